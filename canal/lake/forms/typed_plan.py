"""A typed change batch (:class:`~canal.lake.forms.typed_batch.TypedBatch`) as the mirror's planner reads it, and its
plans' MERGE sources taken from the typed images -- no JSON text between the decoder and the Delta tables.

:func:`planned_form` makes the planner's table from the batch's ``changes`` (its metadata columns as they are, the
dictionary-encoded ones decoded) with three columns in place of the JSON ones: ``keys`` is an int64 key id, equal for
rows of one key (grouped on the typed key columns of every layout with the same key columns, each as its identity
-- -0.0 as 0.0, :mod:`canal.lake.key_identity` -- and NaNs together, as the keys' canal text does),
:data:`~canal.lake.planning.plan.KEYLESS_ID` for a layout without a primary key; ``old_keys`` the id of the key an
UPDATE moved away from; ``after`` the row's place in the batch's images (a global image row: the layout's first row plus
``image_row``); ``columns`` the layout id.
:func:`type_sources` then builds each plan's source with ``take`` from the images of its layout: upserts the after
image, deletes the key columns of the before image (a DELETE's, or the moving UPDATE's for its old key).

What only the change-row path follows makes the mirror apply the batch's JSON change rows instead
(:func:`needs_rows`, ``TypedBatch.rows``): XA transactions (their prepared rows are held on disk as change rows until
their commit), foreign keys' actions (the cascades read the change rows' images) and partial row images
(``binlog_row_image`` MINIMAL / NOBLOB: completed from the mirror's rows, :mod:`canal.lake.apply.partial`); so does a
plan whose last changes span two layouts of a table (a DDL between them the batch does not hold), which the JSON
path reads under its last layout by column name (:class:`RowsNeeded`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from canal.lake.forms.ranges import marked as carries_marks
from canal.lake.forms.typed_batch import TypedBatch
from canal.lake.forms.typed_layout import CellError, Layout, TypedChangeError
from canal.lake.key_identity import identity_array
from canal.lake.planning.plan import KEYLESS_ID, TablePlan
from canal.lake.store.changelog import OP as OP_COLUMN
from canal.lake.types import MirrorError
from canal.parse.xa import XA_PREPARE_TYPE

_XA_TYPES = ("XACOMMIT", "XAROLLBACK", XA_PREPARE_TYPE)


class RowsNeeded(MirrorError):
    """A typed batch holds what only the change-row path follows, and it came without its change rows
    (``TypedBatch.rows`` is None); nothing of the batch was written."""


@attrs.frozen(slots=True)
class TypedImages:
    """The images of a batch in the planner's form: per layout id its images, its :class:`Layout`, its first global
    image row, and the values that did not convert."""

    images: Mapping[str, Any]
    layouts: Mapping[str, Layout]
    base: Mapping[str, int]
    errors: Mapping[str, tuple[CellError, ...]]


def needs_rows(batch: TypedBatch) -> bool:
    """Whether the batch holds an XA transaction's rows or outcome, a row marked with props (a foreign key's
    action, an XA xid) or a partial row image: the mirror then applies its change rows. DDL rows' props
    (``lower_case_table_names``) do not count: the planner reads them alike in both forms."""
    import pyarrow as pa
    import pyarrow.compute as pc

    changes = batch.changes
    if changes.num_rows == 0:
        return False
    if holds_partial_images(changes):
        return True
    # (a range's props only say where the batch lies: canal.lake.forms.ranges)
    marked = pc.and_(carries_marks(changes.column("props")), pc.invert(pc.fill_null(changes.column("is_ddl"), False)))
    types = changes.column("type").cast(pa.string())
    outcome = pc.fill_null(pc.is_in(types, value_set=pa.array(_XA_TYPES, pa.string())), False)
    return bool(pc.any(pc.or_(marked, outcome)).as_py())


def holds_partial_images(changes: Any) -> bool:
    """Whether change rows, or a typed batch's ``changes``, hold a partial row image (``before_absent`` or
    ``after_absent`` set; tables without those columns -- change rows of an older pycanal -- hold none)."""
    names = changes.schema.names
    return any(side in names and changes.column(side).null_count < changes.num_rows for side in _ABSENT_SIDES)


_ABSENT_SIDES = ("before_absent", "after_absent")


def change_rows(batch: TypedBatch) -> Any:
    """The batch's JSON change rows (``TypedBatch.rows``); :class:`RowsNeeded` when it has none."""
    if batch.rows is None:
        raise RowsNeeded(
            "this typed batch holds XA transactions, foreign keys' actions, partial row images or a table's rows in "
            "two layouts without the DDL between them, which the mirror follows in change rows: build it with its "
            "change rows (rows=)"
        )
    return batch.rows()


def planned_form(batch: TypedBatch) -> tuple[Any, TypedImages]:
    """The planner's table of ``batch`` (see the module docstring) and its images."""
    import pyarrow as pa
    import pyarrow.compute as pc

    changes = batch.changes
    base: dict[str, int] = {}
    total = 0
    for lid, images in batch.images.items():
        base[lid] = total
        total += images.num_rows
    layout = changes.column("layout").combine_chunks()
    bases = pa.array([base[v] for v in layout.dictionary.to_pylist()], pa.int64()).take(layout.indices)
    rows = pc.add(bases, changes.column("image_row").combine_chunks().cast(pa.int64()))  # null: not a DML row
    dml = pc.is_valid(rows)
    # each image row belongs to one change row: the DML rows' global image rows are a permutation of 0 .. total-1
    by_image = pc.sort_indices(rows.filter(dml))
    moved = pc.fill_null(changes.column("key_changed").combine_chunks().filter(dml).take(by_image), False)
    ids, old_ids = _key_ids(batch, base, moved)
    text = pa.string()
    table = pa.table(
        {
            "seq": changes.column("seq"),
            "schema": changes.column("schema").cast(text),
            "table": changes.column("table").cast(text),
            "type": changes.column("type").cast(text),
            "is_ddl": changes.column("is_ddl"),
            "sql": changes.column("sql").cast(text),
            "keys": ids.take(rows),
            "old_keys": old_ids.take(rows),
            "after": rows,
            "columns": layout.cast(text),
            "props": changes.column("props").cast(text),
            "log_file": changes.column("log_file").cast(text),
            "log_offset": changes.column("log_offset"),
            "execute_time": changes.column("execute_time"),
            # what tells the rows the mirror applied from the others (canal.lake.identity.lineage), dropped once it did
            "destination": changes.column("destination").cast(text),
            "row_index": changes.column("row_index"),
            "gtid": changes.column("gtid").cast(text),
            "log_server_id": changes.column("log_server_id"),
        }
    )
    return table, TypedImages(batch.images, batch.layouts, base, batch.errors)


def _key_ids(batch: TypedBatch, base: Mapping[str, int], moved: Any) -> tuple[Any, Any]:
    """Per global image row: the id of its key, and of its old key where ``moved`` (else null). Layouts with the same
    key columns (name and type) share ids, as their keys' JSON text would be equal for equal values."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    groups: dict[tuple[tuple[str, str], ...], list[str]] = {}
    for lid, layout in batch.layouts.items():
        image_type = layout.image_type
        signature = tuple((n, str(image_type.field(n).type)) for n in layout.key_names)
        groups.setdefault(signature, []).append(lid)
    ids: dict[str, Any] = {}
    old_ids: dict[str, Any] = {}
    next_id = 0
    for signature, lids in groups.items():
        sizes = [batch.images[lid].num_rows for lid in lids]
        if not signature:
            for lid, size in zip(lids, sizes, strict=True):
                ids[lid] = pa.array(np.full(size, KEYLESS_ID, dtype=np.int64))
                old_ids[lid] = pa.nulls(size, pa.int64())
            continue
        masks = [moved.slice(base[lid], size) for lid, size in zip(lids, sizes, strict=True)]
        keys = [batch.keys(lid) for lid in lids]
        befores = [batch.images[lid].column("before") for lid in lids]
        columns = {  # each key column as its identity (-0.0 as 0.0), as the change rows' keys text spells it
            f"k{j}": identity_array(
                pa.concat_arrays(
                    [k.field(j) for k in keys] + [b.field(name).filter(m) for b, m in zip(befores, masks, strict=True)]
                )
            )
            for j, (name, _type) in enumerate(signature)
        }
        count = len(columns["k0"])
        grouped = (
            pa.table({**columns, "_at": pa.array(np.arange(count, dtype=np.int64))})
            .group_by(list(columns))
            .aggregate([("_at", "list")])
        )
        lists = grouped.column("_at_list").combine_chunks()
        group_of = pc.list_parent_indices(lists).take(pc.sort_indices(pc.list_flatten(lists)))
        group_of = pc.add(group_of.cast(pa.int64()), next_id)
        next_id += grouped.num_rows
        offset = sum(sizes)
        start = 0
        for lid, size, mask in zip(lids, sizes, masks, strict=True):
            ids[lid] = group_of.slice(start, size)
            start += size
            changed = mask.true_count
            old = group_of.slice(offset, changed)
            offset += changed
            old_ids[lid] = (
                pc.replace_with_mask(pa.nulls(size, pa.int64()), mask, old) if changed else pa.nulls(size, pa.int64())
            )
    order = list(batch.images)
    if not order:
        return pa.array([], pa.int64()), pa.array([], pa.int64())
    return pa.concat_arrays([ids[lid] for lid in order]), pa.concat_arrays([old_ids[lid] for lid in order])


def type_sources(plans: Mapping[str, TablePlan], typed: TypedImages) -> None:
    """Each plan's MERGE source (``plan.source``) from the typed images; :class:`RowsNeeded` for a plan whose last
    changes come from two layouts, a :class:`~canal.lake.forms.typed_layout.TypedChangeError` for a value it applies
    that did not convert (naming the table, the column and the value, as the JSON path does)."""
    for plan in plans.values():
        if plan.layout is not None:
            plan.source = _source(plan, typed)


def _source(plan: TablePlan, typed: TypedImages) -> tuple[Any, list[str]]:
    import pyarrow as pa
    import pyarrow.compute as pc

    assert plan.layout is not None and plan.deletes is not None and plan.after is not None
    lid = plan.layout
    layout, images, first = typed.layouts[lid], typed.images[lid], typed.base[lid]
    rows = plan.after.combine_chunks() if isinstance(plan.after, pa.ChunkedArray) else plan.after
    if len(rows) and not (
        pc.min(rows).as_py() >= first and pc.max(rows).as_py() < first + images.num_rows  # one layout
    ):
        raise RowsNeeded(f"{plan.schema}.{plan.table}: its last changes of a step come from two layouts")
    rows = pc.subtract(rows, first)
    deletes = plan.deletes.combine_chunks() if isinstance(plan.deletes, pa.ChunkedArray) else plan.deletes
    errors = typed.errors.get(lid)
    if errors:
        _check(plan, layout, errors, rows, deletes)
    before, after = images.column("before").take(rows), images.column("after").take(rows)
    arrays = []
    for name, _type, is_key in layout.columns:
        value = after.field(name)
        arrays.append(pc.if_else(deletes, before.field(name) if is_key else pa.scalar(None, value.type), value))
    arrays.append(pc.if_else(deletes, "d", "u"))
    return pa.Table.from_arrays(arrays, names=[*layout.names, OP_COLUMN]), layout.key_names


def _check(plan: TablePlan, layout: Layout, errors: tuple[CellError, ...], rows: Any, deletes: Any) -> None:
    """A TypedChangeError for the first value (in column order, then in the source's order) the source takes that
    did not convert: an upsert's after image, a delete's key columns of the before image."""
    place = {
        ("before" if delete else "after", row): n
        for n, (row, delete) in enumerate(zip(rows.to_pylist(), deletes.to_pylist(), strict=True))
    }
    keys = set(layout.key_indexes)
    hits = [
        (error.column, place[(error.side, error.row)], error.message)
        for error in errors
        if (error.side, error.row) in place and (error.side == "after" or error.column in keys)
    ]
    if hits:
        raise TypedChangeError(f"{plan.schema}.{plan.table}: {min(hits)[2]}")
