"""Partial row images in the mirror: completed from the key's full state, or a typed stop before anything is written.

Under ``binlog_row_image=MINIMAL`` or ``NOBLOB`` a change row's images carry only some columns; its
``after_absent`` names the ones the after image lacks (:mod:`canal.lake.forms.changes`). A column an UPDATE's after
image does not carry was not written by the statement: it keeps the value the row had. So the mirror applies a partial
UPDATE as an update of the columns it carries, on the row its key names -- and writes only whole rows: every change
log row and every MERGE source row is a whole image, so the readers of the current state, the folds and the
readers outside pycanal (:mod:`canal.lake.store.changelog`) see nothing partial. The whole row is made before it is
written, from the key's state just before the change, taken

* from the batch's earlier rows of the key in the same step (:func:`chain_step`, at the text level, before the step
  is planned): a whole image (an INSERT, a whole UPDATE) makes the next partial one whole; a partial one adds its
  columns to the ones before it, so ``insert``, ``set a``, ``set b`` leaves one whole row, and ``set a``, ``set b`` of
  a key the step never saw whole leaves one partial change carrying both columns;
* else from the mirror's current rows (:func:`complete_source`, typed: the key's row as the mirror holds it, base and
  change log merged), read when the step is applied -- or, for a table no DDL of the batch touches (its one step),
  before any step is applied, so a stop there leaves the whole batch unwritten. The row of an UPDATE that moved the
  key is found by its old key (``origin_keys``).

A partial JSON update (MySQL's ``binlog_row_value_options=PARTIAL_JSON``) whose before image does not carry the
document is a partial UPDATE too: its after image lacks the JSON column, and its ``json_diffs``
(:mod:`canal.lake.forms.json_diffs`) say how the statement changed the document. The mirror applies them, as MySQL did,
to the document the key's state just before holds -- the step's earlier rows of the key (a chain of partial changes
of a key the step never saw whole carries their diffs one after the other), else the mirror's row
(:func:`complete_source`).

What the mirror cannot complete is a :class:`MirrorPartialImageError`, raised before the change is written -- naming
the table, the columns the image lacks and the key:

* an INSERT that does not carry every column (MINIMAL logs the columns the statement named; NOBLOB leaves out the
  BLOB/TEXT ones it did not: a default the mirror cannot know);
* an UPDATE of a key the mirror does not hold, or that the batch deleted before it -- but for an UPDATE of a table a
  snapshot in the stream still reads (:data:`~canal.parse.heal_marks.SNAPSHOT_PENDING`: a heal's), which the
  snapshot's row brings, the update's columns written over: skipped, as the delete of a row not held;
* a change whose images carry no whole key (neither the after image nor the before image holds a key column);
* a JSON diff that does not apply to the document the mirror holds (SQL NULL, or no member or cell where its path
  points): the mirror's row is not the server's.

The capture heals the first and the last (:mod:`canal.snapshot.heal`: it reads the table again from there) under
its default ``heal="snapshot"``; they reach a mirror only from a destination set to ``heal="stop"``.

What it costs: a batch with partial images that needs the mirror's rows reads the current state of each such table
once per step (as a foreign key's action does, :mod:`canal.lake.apply.cascade`); whole images cost nothing here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Final

from canal.lake.forms.json_diffs import JSON_DIFFS, apply_text, dumps, loads
from canal.lake.forms.typed_plan import holds_partial_images
from canal.lake.key_identity import drop_identity, with_identity
from canal.lake.planning.images import typed_column
from canal.lake.planning.plan import DropSchema
from canal.lake.store.changelog import OP
from canal.lake.types import MirrorError, ZeroDates, arrow_type, typed_array
from canal.mysql_json import JsonDiff, JsonDiffError
from canal.parse.heal_marks import SNAPSHOT_PENDING

ORIGIN: Final = "origin_keys"
"""The batch column (of the mirror's working table, never stored) holding, per partial change left to complete from
the mirror, the key whose row it completes: its own key, or the key an UPDATE moved it from."""
PENDING: Final = "origin_pending"
"""Beside :data:`ORIGIN`: the change is an UPDATE of a table a snapshot in the stream still reads
(:data:`~canal.parse.heal_marks.SNAPSHOT_PENDING`): where the mirror does not hold its row, the snapshot brings it
with the update's columns written over, so the change is skipped there rather than refused."""
AFTER_ABSENT: Final = "after_absent"
BEFORE_ABSENT: Final = "before_absent"


class MirrorPartialImageError(MirrorError):
    """A partial row image (``binlog_row_image`` MINIMAL / NOBLOB) the mirror cannot make whole: it names the table,
    the columns the image lacks, the key and why. Nothing of the change was written -- of the batch, unless a DDL of
    the table came before it in the batch (then the steps before it are applied and journaled, and a replay goes on
    from there)."""

    def __init__(self, schema: str, table: str, columns: Sequence[str], key: str | None, reason: str) -> None:
        self.schema = schema
        self.table = table
        self.columns = tuple(columns)
        self.key = key
        self.reason = reason
        lacking = ", ".join(self.columns) or "none"
        super().__init__(
            f"{schema}.{table}: a partial row image (binlog_row_image MINIMAL or NOBLOB) lacking {lacking} cannot be "
            f"applied: {reason} (key {key}). Nothing of it was written; log whole images (binlog_row_image=FULL) or "
            "mirror the table anew from a snapshot"
        )


_FULL: Final = "full"
_PARTIAL: Final = "partial"
_DELETED: Final = "deleted"


def chain_step(rows: Any) -> Any:
    """The change rows of one step (``seq`` order, no DDL among them) with each partial after image completed from the
    step's earlier rows of its key where they hold a whole image, else merged with the partial ones before it
    (``after``, ``after_absent`` rewritten) and given the key to complete it from (:data:`ORIGIN`). Raises
    :class:`MirrorPartialImageError` for an INSERT that does not carry every column, an UPDATE of a key the step
    deleted, and an image without its whole key. ``rows`` itself when it holds no partial image."""
    import pyarrow as pa

    if not holds_partial_images(rows):
        return rows
    names = rows.column_names
    data = {name: rows.column(name).to_pylist() for name in ("schema", "table", "type", "is_ddl", "keys", "old_keys")}
    data["columns"] = rows.column("columns").to_pylist()
    data["after"] = rows.column("after").to_pylist()
    after_absent = rows.column(AFTER_ABSENT).to_pylist() if AFTER_ABSENT in names else [None] * rows.num_rows
    before_absent = rows.column(BEFORE_ABSENT).to_pylist() if BEFORE_ABSENT in names else [None] * rows.num_rows
    json_diffs = rows.column(JSON_DIFFS).to_pylist() if JSON_DIFFS in names else [None] * rows.num_rows
    partial_tables = {
        (data["schema"][i], data["table"][i])
        for i in range(rows.num_rows)
        if after_absent[i] is not None or before_absent[i] is not None
    }
    origin: list[str | None] = [None] * rows.num_rows
    # per key: whole / partial / deleted, the columns known, the key to complete the rest from, and the JSON diffs
    # of columns not known yet (a chain of partial JSON updates of a key the step never saw whole), in order
    states: dict[tuple[str, str, str], tuple[str, dict[str, Any], str | None, dict[str, list[JsonDiff]]]] = {}
    for i in range(rows.num_rows):
        name = (data["schema"][i], data["table"][i])
        if name not in partial_tables or data["is_ddl"][i] or data["columns"][i] is None or data["keys"][i] is None:
            continue
        layout = json.loads(data["columns"][i])
        key, old, kind = data["keys"][i], data["old_keys"][i], data["type"][i]
        lacking_text = after_absent[i]
        lacking = json.loads(lacking_text) if lacking_text is not None else []
        _check_key(name, layout, key, old, lacking)
        if kind == "DELETE":
            states[(*name, key)] = (_DELETED, {}, None, {})
            continue
        after = json.loads(data["after"][i]) if data["after"][i] is not None else {}
        diffs = _diffs(name, json_diffs[i], lacking, key)
        if old is not None:
            moved = states.get((*name, old))
            states[(*name, old)] = (_DELETED, {}, None, {})
        else:
            moved = None
        if not lacking:
            states[(*name, key)] = (_FULL, after, None, {})
            continue
        if kind != "UPDATE":
            raise MirrorPartialImageError(
                *name, lacking, key, f"a{'n' if kind[0] in 'AEIOU' else ''} {kind} that does not carry every column"
            )
        prior = moved if old is not None else states.get((*name, key))
        if prior is None:  # the step never saw the key: completed from the mirror's row
            states[(*name, key)] = (_PARTIAL, after, old if old is not None else key, diffs)
        elif prior[0] == _DELETED:
            raise MirrorPartialImageError(*name, lacking, key, "an UPDATE of a row the batch deleted before it")
        else:
            merged = {**prior[1], **after}
            pending = {column: list(d) for column, d in prior[3].items() if column not in after}
            for column, column_diffs in diffs.items():
                if column in merged:  # the document before it is known: the diff applies to it now
                    merged[column] = _applied(name, column, merged[column], column_diffs, lacking, key)
                else:  # not known yet either: after the diffs before it, from the mirror's document
                    pending.setdefault(column, []).extend(column_diffs)
            states[(*name, key)] = (prior[0], merged, prior[2], pending)
        state, merged, source, pending = states[(*name, key)]
        data["after"][i] = json.dumps(
            {c[0]: merged[c[0]] for c in layout if c[0] in merged}, ensure_ascii=False, separators=(",", ":")
        )
        still = [c[0] for c in layout if c[0] not in merged]
        if state == _FULL or not still:  # whole now: the columns before it, or its chain's, cover the rest
            states[(*name, key)] = (_FULL, merged, None, {})
            after_absent[i], origin[i], json_diffs[i] = None, None, None
        else:
            after_absent[i], origin[i] = json.dumps(still, ensure_ascii=False, separators=(",", ":")), source
            json_diffs[i] = dumps(pending)
    props = rows.column("props").to_pylist() if "props" in names else [None] * rows.num_rows
    read_along = [origin[i] is not None and SNAPSHOT_PENDING in (props[i] or "") for i in range(rows.num_rows)]
    out = rows
    rewritten = (
        ("after", data["after"], pa.string()),
        (AFTER_ABSENT, after_absent, pa.string()),
        (JSON_DIFFS, json_diffs, pa.string()),
        (ORIGIN, origin, pa.string()),
        (PENDING, read_along, pa.bool_()),
    )
    for column, values, kind in rewritten:
        array = pa.array(values, kind)
        out = (
            out.set_column(names.index(column), column, array) if column in names else out.append_column(column, array)
        )
    return out


def _diffs(name: tuple[str, str], text: str | None, lacking: list[str], key: str) -> dict[str, list[JsonDiff]]:
    """A change row's JSON diffs (``json_diffs``), each of a column its after image lacks."""
    try:
        diffs = loads(text)
    except ValueError as exc:
        raise MirrorPartialImageError(*name, lacking, key, f"its JSON diffs cannot be read ({exc})") from None
    stray = [column for column in diffs if column not in lacking]
    if stray:
        raise MirrorPartialImageError(*name, lacking, key, f"it holds JSON diffs of {', '.join(stray)} besides values")
    return diffs


def _applied(
    name: tuple[str, str], column: str, text: Any, diffs: list[JsonDiff], lacking: list[str], key: str | None
) -> str:
    """``column``'s document (its canal text) with a partial JSON update's ``diffs`` applied: a
    MirrorPartialImageError where they do not apply (the document is not the one the server held)."""
    try:
        return apply_text(text, diffs)
    except JsonDiffError as exc:
        raise MirrorPartialImageError(
            *name, lacking, key, f"its JSON diff of {column} does not apply to the document before it ({exc})"
        ) from None


def _check_key(name: tuple[str, str], layout: list[Any], key: str, old: str | None, lacking: list[str]) -> None:
    """A MirrorPartialImageError for a change whose key (or old key) does not hold every key column."""
    key_names = [str(c[0]) for c in layout if c[2]]
    for text in (key, old):
        if text is not None and not set(key_names) <= set(json.loads(text)):
            raise MirrorPartialImageError(
                *name, lacking, text, f"neither of its images carries the whole key ({', '.join(key_names)})"
            )


def needs_mirror(plan: Any) -> bool:
    """Whether the plan's last changes hold a partial one left to complete from the mirror's rows."""
    absent = plan.absent
    return absent is not None and absent.null_count < len(absent)


Read = Callable[[str, str], Any]
"""``read(schema, table)``: a mirrored table's current rows (a pyarrow Table), None when the mirror holds no such
table."""


def complete_before_writing(steps: Sequence[Any], read: Read, zero_dates: ZeroDates) -> None:
    """Complete the plans' partial changes (:func:`complete_source`) of the tables no DDL of the batch touches --
    their one step -- before any step is written: a stop there leaves the whole batch unwritten. ``steps``: the
    batch's steps as the mirror planned and typed them (a dict of plans, a rename pair, or a database dropped)."""
    touched: set[str] = set()
    dropped: set[str] = set()  # databases a DROP DATABASE of the batch drops: every table of them is touched
    for step in steps:
        if isinstance(step, dict):
            touched.update(name for name, plan in step.items() if plan.ddl or plan.truncate)
        elif isinstance(step, DropSchema):
            dropped.add(step.schema)
        else:
            touched.update((step.old, step.new))
    for step in steps:
        if not isinstance(step, dict):
            continue
        for name, plan in step.items():
            if name in touched or plan.schema in dropped:
                continue
            if needs_mirror(plan) and plan.source is not None:
                source, key_names = plan.source
                plan.source = (complete_source(plan, source, key_names, read, zero_dates), key_names)


def complete_source(plan: Any, source: Any, key_names: list[str], read: Read, zero_dates: ZeroDates) -> Any:
    """``source`` (the plan's typed MERGE source: its last changes, in the plan's order) with each partial upsert's
    absent cells taken from the mirror's row of its :data:`ORIGIN` key (``read``: the table's current rows); the
    plan then has no partial change left (``plan.absent`` None). :class:`MirrorPartialImageError` when the mirror
    holds no such row. ``source`` itself when the plan has no partial change to complete."""

    if not needs_mirror(plan):
        return source
    completed = _completed(plan, source, key_names, read, zero_dates)
    plan.absent = plan.origin = plan.diffs = plan.pending = None
    return completed


def _completed(plan: Any, source: Any, key_names: list[str], read: Read, zero_dates: ZeroDates) -> Any:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    absent = _plain(plan.absent)
    deletes = _plain(plan.deletes)
    partial = np.flatnonzero(
        np.asarray(pc.and_(pc.is_valid(absent), pc.invert(deletes)).to_numpy(zero_copy_only=False), bool)
    )
    if not len(partial):
        return source
    layout = json.loads(plan.layout)
    lacking = [json.loads(text) for text in absent.take(pa.array(partial)).to_pylist()]
    origins = _plain(plan.origin).take(pa.array(partial)).to_pylist()
    texts = [None] * len(partial) if plan.diffs is None else _plain(plan.diffs).take(pa.array(partial)).to_pylist()
    where = (plan.schema, plan.table)
    diffs = [_diffs(where, text, names, key) for text, names, key in zip(texts, lacking, origins, strict=True)]
    wanted = [c for c in layout if any(c[0] in names for names in lacking)]
    rows = read(plan.schema, plan.table)
    columns = {name: _plain(column) for name, column in zip(source.column_names, source.columns, strict=True)}
    if rows is None or rows.num_rows == 0:
        _skip_pending(plan, partial, np.zeros(len(partial), bool), lacking, origins, columns)
        return pa.table(columns)
    held = set(rows.column_names)
    missing = [c[0] for c in wanted if c[0] not in held] + [k for k in key_names if k not in held]
    if missing:
        raise MirrorPartialImageError(
            plan.schema, plan.table, missing, origins[0], "the mirror's table has no such columns"
        )
    # the origin keys typed as the mirror's key columns, joined with its rows on their identities
    typed = {c[0]: str(c[1]) for c in layout}
    found_at = "__pycanal_found"
    spelt = [json.loads(text) for text in origins]
    keys = pa.table(
        {
            **{
                k: typed_column(
                    k, lambda k=k: typed_array([o[k] for o in spelt], arrow_type(typed[k]), zero_dates)
                ).cast(rows.schema.field(k).type)
                for k in key_names
            },
            "__pycanal_at": pa.array(np.arange(len(partial)), pa.int64()),
        }
    )
    chosen = rows.select(list(dict.fromkeys([*key_names, *(c[0] for c in wanted)]))).append_column(
        found_at, pa.repeat(pa.scalar(True), rows.num_rows)
    )
    left, on = with_identity(keys, key_names)
    right, _ = with_identity(chosen, key_names)
    joined = drop_identity(
        left.join(right.drop_columns(key_names) if on != key_names else right, keys=on, join_type="left outer")
    ).sort_by("__pycanal_at")
    if joined.num_rows != len(partial):  # a key the mirror holds twice: it is not the table's
        raise MirrorPartialImageError(plan.schema, plan.table, [], None, "the mirror holds one of its keys twice")
    found = np.asarray(joined.column(found_at).is_valid().to_numpy(zero_copy_only=False), bool)
    if not found.all():
        _skip_pending(plan, partial, found, lacking, origins, columns)
    at = np.full(source.num_rows, -1, np.int64)
    at[partial] = np.arange(len(partial))
    for name, _type, _key in wanted:
        takes = np.array([name in names for names in lacking], bool)
        mask = np.zeros(source.num_rows, bool)
        mask[partial[takes]] = True
        target = columns[name].type
        held = joined.column(name).combine_chunks()
        diffed = [j for j in np.flatnonzero(takes) if name in diffs[j] and found[j]]  # (skipped: no row)
        if diffed:  # a partial JSON update: its diffs applied to the document the mirror holds
            texts = held.to_pylist()
            for j in diffed:
                texts[j] = _applied((plan.schema, plan.table), name, texts[j], diffs[j][name], lacking[j], origins[j])
            held = pa.array(texts, pa.string())
        values = held.cast(target).take(pa.array(np.where(mask, at, 0)))
        columns[name] = pc.if_else(pa.array(mask), values, columns[name])
    return pa.table(columns)


def _skip_pending(
    plan: Any, partial: Any, found: Any, lacking: list[Any], origins: list[Any], columns: dict[str, Any]
) -> None:
    """The partial changes (at ``partial``, in the plan) whose row the mirror does not hold (``found`` False): an
    update of a table a snapshot still reads (:data:`PENDING`) becomes the delete of a row not held -- skipped; the
    snapshot brings the row, the update's columns written over (:mod:`canal.snapshot.window`). Any other is a
    :class:`MirrorPartialImageError`."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    pending = (
        np.asarray(_plain(plan.pending).to_numpy(zero_copy_only=False), bool)[partial]
        if plan.pending is not None
        else np.zeros(len(partial), bool)
    )
    refused = ~found & ~pending
    if refused.any():
        first = int(np.argmax(refused))
        raise MirrorPartialImageError(
            plan.schema, plan.table, lacking[first], origins[first], "the mirror does not hold the row it updates"
        )
    skipped = np.zeros(len(columns[OP]), bool)
    skipped[partial[~found]] = True
    plan.deletes = pc.or_(_plain(plan.deletes), pa.array(skipped))
    columns[OP] = pc.if_else(pa.array(skipped), pa.scalar("d", columns[OP].type), columns[OP])


def _plain(array: Any) -> Any:
    import pyarrow as pa

    return array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array
