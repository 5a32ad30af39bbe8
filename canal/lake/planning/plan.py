"""A batch of change rows planned into ordered steps, with Arrow kernels and no I/O.

:func:`in_order` takes the mirror's columns of a batch in ``seq`` order (each DDL row named by the table its
statement changes); :func:`batch_steps` cuts it into ordered steps -- each table's DML rows up to the next DDL that
touches it, that DDL, the next rows (docs/architecture.md says why this is exact), a RENAME TABLE a step per pair
(:class:`RenamePair`), a DROP DATABASE a step that drops every mirrored table of that database (:class:`DropSchema`);
:func:`plan_tables` reduces a step's rows to one :class:`TablePlan` per table: its DDL in
order, and the last change per primary key (deletes delete, inserts and updates upsert the full after image --
pycanal requires FULL row images; an update that changed the key also deletes the old key). Plans are named by
their tables' directories (:mod:`canal.lake.store.names`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs

from canal.lake.ddl import drops
from canal.lake.ddl.ddl_text import ddl_modes, ddl_props, ddl_statement, fold_flags, statement_mode
from canal.lake.ddl.evolution import renamed_tables
from canal.lake.store import names as naming
from canal.lake.types import MirrorError
from canal.parse.unmodeled import LEAVES_CAPTURE, leaving_tables
from canal.sql import (
    DEFAULT_MODE,
    AlterTable,
    CreateDatabase,
    DropDatabase,
    DropTable,
    RenameTable,
    RenameTo,
    Statement,
    TableName,
)


@attrs.define(slots=True)
class TablePlan:
    schema: str
    table: str
    # the last change per key (raw ``keys`` text) in the order of those last changes: DELETE flags, keys, after
    # images (Arrow arrays of equal length; None until the planner sets them); of a typed batch's planner table
    # (canal.lake.forms.typed_plan) the keys are key ids and ``after`` the global image row of each change
    deletes: Any = None
    keys: Any = None
    after: Any = None
    layout: str | None = None
    ddl: list[tuple[int, str, str]] = attrs.field(factory=list)  # (batch row, type, sql) in order
    fold_names: bool = False  # its DDL comes from a server with lower_case_table_names=1 (canal.lake.ddl.ddl_text)
    # batch row of a DDL -> the session state its effect depends on (time zone, start time, former column types)
    ddl_props: dict[int, dict[str, str]] = attrs.field(factory=dict)
    at: Any = None  # the batch row of each kept change (parallel to keys / after)
    truncate: bool = False
    rows: int = 0
    source: Any = None  # (the typed MERGE source, its key columns), built before the batch's first step
    seq: Any = None  # the ``seq`` of each kept change (parallel to keys / after)
    # of a step with partial images (canal.lake.apply.partial): each kept change's ``after_absent`` (null: a whole
    # image), the key whose mirror row completes it (``origin_keys``) and the JSON diffs to apply to that row's
    # documents
    # (``json_diffs``); None when the step has none
    absent: Any = None
    origin: Any = None
    diffs: Any = None
    pending: Any = None  # whether the change's table is still read by a snapshot (canal.lake.apply.partial.PENDING)


MIRROR_COLUMNS = (  # the change-row columns DeltaMirror reads
    "seq",
    "schema",
    "table",
    "type",
    "is_ddl",
    "sql",
    "keys",
    "old_keys",
    "after",
    "columns",
)
KEYLESS_ID = -1
"""The ``keys`` of a row of a table without a primary key in a typed batch's planner table
(:mod:`canal.lake.forms.typed_plan`, whose ``keys`` are int64 key ids; change rows hold ``"{}"``)."""
# read when there: XA marks and foreign keys' actions, positions for errors, the before images the actions follow,
# execute times for the mirror's delay (canal.lake.upkeep.health), the columns partial images do not carry
# (canal.lake.apply.partial)
OPTIONAL_COLUMNS = (
    "props",
    "log_file",
    "log_offset",
    "before",
    "execute_time",
    "before_absent",
    "after_absent",
    "json_diffs",
)


def mirror_columns(names: Sequence[str]) -> list[str]:
    return [*MIRROR_COLUMNS, *(name for name in OPTIONAL_COLUMNS if name in names)]


def ascending(seq: Any) -> bool:
    """Whether ``seq`` is already in (non-decreasing) order, so the stable sort would keep every row in place."""
    import pyarrow.compute as pc

    if seq.null_count:
        return False
    in_order: bool | None = pc.all(pc.less_equal(seq.slice(0, len(seq) - 1), seq.slice(1))).as_py()
    return bool(in_order)


def any_true(mask: Any) -> bool:
    import pyarrow.compute as pc

    return pc.any(mask).as_py() is True


def all_true(mask: Any) -> bool:
    import pyarrow.compute as pc

    return pc.all(mask).as_py() is not False


def true_count(mask: Any) -> int:
    """The true values of a boolean Array or ChunkedArray (no compute call: a batch asks it per table)."""
    chunks = mask.chunks if hasattr(mask, "chunks") else [mask]
    return sum(int(chunk.true_count) for chunk in chunks)


def positions(n: int) -> Any:
    """``0 .. n-1`` as an int64 Arrow array, built in C."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.subtract(pc.cumulative_sum(pa.nulls(n, pa.int64()).fill_null(1)), 1)


def step_rows(table: Any, step: Any) -> Any:
    """The rows of ``table`` a step of :func:`batch_steps` holds (row numbers in ascending order): a zero-copy slice
    when they are consecutive -- a batch with no DDL is one step of every row --, else taken."""
    n = len(step)
    if n and step[n - 1].as_py() - step[0].as_py() == n - 1:
        return table.slice(step[0].as_py(), n)
    return table.take(step)


def in_order(table: Any) -> Any:
    """The mirror's columns of a batch, in ``seq`` order (a stable sort: ties keep their arrival order), each
    DDL row named by the schema of the table its statement changes: a change row's ``schema`` for a statement is
    the session's database, and ``ALTER TABLE db.t ...`` run from another one changes ``db.t``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = table.select(mirror_columns(table.column_names))
    if table.num_rows > 1 and not ascending(table.column("seq")):
        table = table.take(pc.sort_indices(table, sort_keys=[("seq", "ascending")]))
    is_ddl = pc.fill_null(table.column("is_ddl"), False)
    if not any_true(is_ddl):
        return table
    schemas = table.column("schema").to_pylist()
    folds = fold_flags(table)
    modes = ddl_modes(table)
    changed = False
    dropped: dict[int, list[TableName]] = {}  # row of a DROP TABLE of several tables -> them
    left = _left_capture(table, is_ddl)  # row of a RENAME -> the tables it moved out of the capture
    for row in pc.indices_nonzero(is_ddl).to_pylist():
        stmt = ddl_statement(table.column("sql")[row].as_py(), folds[row], modes.get(row, DEFAULT_MODE))
        named = getattr(stmt, "table", None) if not isinstance(stmt, RenameTable) else None
        if isinstance(stmt, DropTable) and len(stmt.tables) == 1:
            named = stmt.tables[0]
        elif isinstance(stmt, DropTable) and not stmt.temporary:
            dropped[row] = [t.qualified(schemas[row]) for t in stmt.tables]
        if named is not None and named.schema is not None and named.schema != schemas[row]:
            schemas[row] = named.schema
            changed = True
    if changed:
        table = table.set_column(table.column_names.index("schema"), "schema", pa.array(schemas, pa.string()))
    if dropped or left:
        table = drops.one_per_table(table, dropped, left)
    return table


def _left_capture(table: Any, is_ddl: Any) -> dict[int, list[TableName]]:
    """For each DDL row whose props say it moved captured tables out of the capture
    (:data:`canal.parse.unmodeled.LEAVES_CAPTURE`): those tables, by their new names."""
    import pyarrow.compute as pc

    if "props" not in table.column_names:
        return {}
    marked = pc.and_(is_ddl, pc.fill_null(pc.match_substring(table.column("props"), LEAVES_CAPTURE), False))
    left: dict[int, list[TableName]] = {}
    for row in pc.indices_nonzero(marked).to_pylist():
        props = json.loads(table.column("props")[row].as_py())
        left[row] = [TableName(db, name) for db, name in leaving_tables(props)]
    return left


def plan_tables(table: Any, only: frozenset[str] | None) -> dict[str, TablePlan]:
    """Reduce a batch to per-table plans with Arrow kernels; only DDL rows (few) are looked at in Python.

    The outcome is that of walking the rows in ``seq`` order (ties in arrival order): a row belongs to the table
    ``(schema, table)``, its plan named by its directory (rows without a table name, and tables outside
    ``tables=``, are dropped); DDL rows are
    kept in order and TRUNCATE/ERASE forgets the table's earlier DML rows; DML rows with null keys or columns
    are ignored; the table layout is its last DML row's ``columns``; per ``keys`` text the last change wins.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    partials = ("props", "after_absent", "origin_keys", "json_diffs", "origin_pending")
    extra = [name for name in partials if name in table.column_names]
    table = table.select([*MIRROR_COLUMNS, *extra])  # props: fold_flags; the rest: partial images
    if table.num_rows > 1 and not ascending(table.column("seq")):
        table = table.take(pc.sort_indices(table, sort_keys=[("seq", "ascending")]))  # a stable sort
    names = table.column("table")
    named = pc.fill_null(pc.not_equal(names, ""), False)
    if not all_true(named):
        table = table.filter(named)
    # ``tables=`` names tables as ``schema.table`` (a null schema reads "None")
    full = pc.binary_join_element_wise(
        table.column("schema"), table.column("table"), ".", null_handling="replace", null_replacement="None"
    )
    if only is not None:
        chosen = pc.is_in(full, value_set=pa.array(sorted(only), type=pa.string()))
        if not all_true(chosen):
            table = table.filter(chosen)
            full = full.filter(chosen)
    n = table.num_rows
    plans: dict[str, TablePlan] = {}
    if n == 0:
        return plans
    # a table is its (schema, table) pair, joined by NUL, which no MariaDB name holds: names with dots stay apart
    pair = pc.binary_join_element_wise(
        table.column("schema"), table.column("table"), "\0", null_handling="replace", null_replacement="None"
    )
    if isinstance(pair, pa.ChunkedArray):
        pair = pair.combine_chunks()
    # dictionary order is first appearance, which is the order plans are applied in
    encoded = pc.dictionary_encode(pair)
    tid = encoded.indices.cast(pa.int64())
    pos = positions(n)
    per_table = pa.table({"tid": tid, "pos": pos}).group_by("tid").aggregate([("pos", "min"), ("pos", "count")])
    firsts = per_table.column("pos_min")
    heads = pa.table(
        {
            "tid": per_table.column("tid"),
            "schema": table.column("schema").take(firsts),
            "table": table.column("table").take(firsts),
            "rows": per_table.column("pos_count"),
        }
    ).sort_by("tid")
    # a plan is named by its table's directory (naming.directory): ``schema.table`` for plain names
    full_names: list[str] = []
    for _t, schema, name, rows in zip(*(heads.column(c).to_pylist() for c in heads.column_names), strict=True):
        full_names.append(naming.display(schema, name))
        plan = plans[naming.directory(schema, name)] = TablePlan(schema, name)
        plan.rows = rows
    by_tid = list(plans.values())

    is_ddl = pc.fill_null(table.column("is_ddl"), False)
    truncated_at: dict[int, int] = {}
    if any_true(is_ddl):
        at = pc.indices_nonzero(is_ddl)
        folds = fold_flags(table)
        states = ddl_props(table)
        ddl_rows = zip(
            at.to_pylist(),
            tid.take(at).to_pylist(),
            table.column("type").take(at).to_pylist(),
            table.column("sql").take(at).to_pylist(),
            strict=True,
        )
        moved_first: dict[str, list[str]] = {}  # plan -> plans of tables renamed to it (applied before it)
        for row, t, kind, sql in ddl_rows:
            plan = by_tid[t]
            if kind in ("TRUNCATE", "ERASE"):
                truncated_at[t] = row
                plan.truncate = True
            # a rename belongs to the table it renames (its rows before the rename merge there, then it moves)
            olds = renamed_tables(sql or "", plan.schema, folds[row], statement_mode(states.get(row)))
            for old_schema, old_table in olds:
                if only is not None and naming.display(old_schema, old_table) not in only:
                    continue
                old_name = naming.directory(old_schema, old_table)
                if old_name not in plans:
                    plans[old_name] = TablePlan(old_schema, old_table)
                    moved_first.setdefault(naming.directory(plan.schema, plan.table), []).append(old_name)
                plans[old_name].ddl.append((row, kind, sql or ""))
                plans[old_name].fold_names |= folds[row]
                if row in states:
                    plans[old_name].ddl_props[row] = states[row]
            if not olds:
                plan.ddl.append((row, kind, sql or ""))
                plan.fold_names |= folds[row]
                if row in states:
                    plan.ddl_props[row] = states[row]
        if moved_first:
            ordered: dict[str, TablePlan] = {}
            for name, plan in plans.items():
                for old_name in moved_first.get(name, ()):
                    ordered[old_name] = plans[old_name]
                ordered.setdefault(name, plan)
            plans.clear()
            plans.update(ordered)

    keys = table.column("keys")
    dml = pc.and_(pc.invert(is_ddl), pc.and_(pc.is_valid(keys), pc.is_valid(table.column("columns"))))
    if not any_true(dml):
        return plans
    no_key = "{}" if pa.types.is_string(keys.type) else KEYLESS_ID
    keyless = pc.and_(dml, pc.fill_null(pc.equal(keys, no_key), False))
    if any_true(keyless):
        full = full_names[tid[pc.indices_nonzero(keyless)[0].as_py()].as_py()]  # the first such row's table
        raise MirrorError(
            f"{full} has no primary key and no UNIQUE key over NOT NULL columns; the mirror needs one to apply updates "
            "and deletes"
        )
    rows = pa.table({"tid": tid, "pos": pos, "keys": keys}).filter(dml)
    # the layout is the last DML row's, even one a later TRUNCATE discards
    last_rows = rows.group_by("tid").aggregate([("pos", "max")])
    layouts = table.column("columns").take(last_rows.column("pos_max")).to_pylist()
    for t, layout in zip(last_rows.column("tid").to_pylist(), layouts, strict=True):
        by_tid[t].layout = layout
    # Each change at row ``pos`` gets order 2*pos+1. An UPDATE that changed the primary key also deletes its old
    # key, just before it (order 2*pos): MySQL keeps keys unique after every row, so walking the changes in
    # order and keeping the last one per key gives the source's final rows, also for keys changed twice,
    # swapped through a third value, or changed and then deleted.
    changes = pa.table({"tid": tid, "order": pc.add(pc.multiply(pos, 2), 1), "keys": keys}).filter(dml)
    old_keys = table.column("old_keys")
    moved = pc.and_(dml, pc.is_valid(old_keys))
    if any_true(moved):
        old = pa.table(
            {"tid": tid.filter(moved), "order": pc.multiply(pos.filter(moved), 2), "keys": old_keys.filter(moved)}
        )
        changes = pa.concat_tables([changes, old.cast(changes.schema)])
    if truncated_at:
        cut = pa.array([2 * truncated_at.get(t, -1) for t in range(len(by_tid))], type=pa.int64())
        changes = changes.filter(pc.greater(changes.column("order"), cut.take(changes.column("tid"))))
    # the last change per (table, key); orders are unique, and an even order is an old key's delete
    winners = changes.group_by(["tid", "keys"]).aggregate([("order", "max")])
    winners = winners.sort_by([("tid", "ascending"), ("order_max", "ascending")])
    order = winners.column("order_max")
    old_key = pc.equal(pc.bit_wise_and(order, 1), 0)
    at = pc.shift_right(order, 1)  # the change row (for an old key's delete: the UPDATE's row)
    # every row wins, in order (inserts, or each key changed once, in one table): the images need no copy
    every_row = len(at) == table.num_rows and all_true(pc.equal(at, positions(len(at))))

    def kept(column: Any) -> Any:
        return column if every_row else column.take(at)

    updated = pc.fill_null(pc.not_equal(kept(table.column("type")), "DELETE"), True)
    deletes = pc.or_(old_key, pc.invert(updated))
    kept_keys = winners.column("keys")
    after = table.column("after")
    if pa.types.is_string(after.type) and any_true(old_key):
        kept_after = pc.if_else(old_key, pa.scalar(None, pa.string()), kept(after))
    else:  # JSON images with no old key's delete, or a typed batch's image rows (an old key's delete keeps its
        # UPDATE's, whose before image holds that key)
        kept_after = kept(after)
    seqs = kept(table.column("seq"))
    partial = "origin_keys" in table.column_names  # a step canal.lake.apply.partial.chain_step left partial images in
    if partial:  # an old key's delete completes nothing
        kept_absent = pc.if_else(old_key, pa.scalar(None, pa.string()), kept(table.column("after_absent")))
        kept_origin = pc.if_else(old_key, pa.scalar(None, pa.string()), kept(table.column("origin_keys")))
        kept_diffs = (
            pc.if_else(old_key, pa.scalar(None, pa.string()), kept(table.column("json_diffs")))
            if "json_diffs" in table.column_names
            else None
        )
        kept_pending = pc.if_else(old_key, pa.scalar(False, pa.bool_()), kept(table.column("origin_pending")))
    counts = winners.group_by("tid").aggregate([("order_max", "count")]).sort_by("tid")
    offset = 0
    for t, count in zip(*(counts.column(c).to_pylist() for c in ("tid", "order_max_count")), strict=True):
        plan = by_tid[t]
        plan.deletes = deletes.slice(offset, count)
        plan.keys = kept_keys.slice(offset, count)
        plan.after = kept_after.slice(offset, count)
        plan.at = at.slice(offset, count)
        plan.seq = seqs.slice(offset, count)
        if partial:
            plan.absent = kept_absent.slice(offset, count)
            plan.origin = kept_origin.slice(offset, count)
            plan.diffs = None if kept_diffs is None else kept_diffs.slice(offset, count)
            plan.pending = kept_pending.slice(offset, count)
        offset += count
    return plans


@attrs.frozen(slots=True)
class RenamePair:
    """One pair of a RENAME TABLE (the tables' directory names, :func:`canal.lake.store.names.directory`), a step of its
    own: the pairs apply in order, each seeing the ones before it (``a TO tmp, b TO a, tmp TO b``), and each is
    journaled."""

    old: str
    new: str


@attrs.frozen(slots=True)
class DropSchema:
    """``DROP DATABASE`` (``DROP SCHEMA``, ``CREATE OR REPLACE DATABASE``) of ``schema``, a step of its own: the server
    drops every table of the database without logging a row or naming one, so every table the mirror holds of it at
    that point of the batch goes (those an earlier step of the batch created or renamed into it among them; the
    tables' rows of the batch before it are applied first). Found by listing the mirror's tables when the step is
    applied: a replay after a crash in the middle drops what is left."""

    schema: str


def dropped_schema(stmt: Statement | None) -> str | None:
    """The database whose every table ``stmt`` drops: ``DROP DATABASE d``, ``CREATE OR REPLACE DATABASE d``."""
    if isinstance(stmt, DropDatabase) or (isinstance(stmt, CreateDatabase) and stmt.or_replace):
        return stmt.name
    return None


def batch_steps(table: Any, only: frozenset[str] | None) -> list[Any]:
    """The batch (in ``seq`` order) as ordered steps: an Arrow index array of rows to plan and apply together, a
    :class:`RenamePair` or a :class:`DropSchema`. A table's DML rows form one step up to the next DDL row that touches
    the table (its own, a RENAME naming it, or a DROP DATABASE of its database), which is a step of its own (a RENAME
    TABLE: a step per pair); rows of tables no DDL touches stay one step per table, applied after the DDL steps that
    come before their last row."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = table.num_rows
    is_ddl = pc.fill_null(table.column("is_ddl"), False)
    if not any_true(is_ddl):
        return [positions(n)]
    flags = is_ddl.to_pylist()
    sqls = table.column("sql").to_pylist()
    schemas = table.column("schema").to_pylist()
    folds = fold_flags(table)
    modes = ddl_modes(table)
    # each row's table by its directory name, as plan_tables names its plans
    names = [
        None if not t else naming.directory(db if db is not None else "None", t)
        for db, t in zip(schemas, table.column("table").to_pylist(), strict=True)
    ]
    schema_of = {name: db for name, db in zip(names, schemas, strict=True) if name is not None}
    steps: list[Any] = []
    pending: dict[str | None, list[int]] = {}  # table -> its DML rows since the last DDL that touched it

    def flush(name: str | None) -> None:
        rows = pending.pop(name, None)
        if rows:
            steps.append(pa.array(rows, pa.int64()))

    for row in range(n):
        name = names[row]
        if not flags[row]:
            pending.setdefault(name, []).append(row)
            continue
        stmt = ddl_statement(sqls[row], folds[row], modes.get(row, DEFAULT_MODE))
        dropped = dropped_schema(stmt)
        if dropped is not None:
            for other in list(pending):
                if other is not None and schema_of.get(other) == dropped:
                    flush(other)
            steps.append(DropSchema(dropped))
            continue
        if isinstance(stmt, RenameTable):
            session = schemas[row] or ""
            pairs = [((old.schema or session, old.name), (new.schema or session, new.name)) for old, new in stmt.pairs]
            for old_pair, new_pair in pairs:
                flush(naming.directory(*old_pair))
                flush(naming.directory(*new_pair))
            steps.extend(
                RenamePair(naming.directory(*old_pair), naming.directory(*new_pair))
                for old_pair, new_pair in pairs
                if only is None or naming.display(*old_pair) in only or naming.display(*new_pair) in only
            )
            continue
        touched = {
            name,
            *(
                naming.directory(db, t)
                for db, t in renamed_tables(
                    sqls[row] or "", schemas[row] or "", folds[row], modes.get(row, DEFAULT_MODE)
                )
            ),
        }
        if isinstance(stmt, AlterTable):
            touched |= {
                naming.directory(a.table.schema or schemas[row], a.table.name)
                for a in stmt.actions
                if isinstance(a, RenameTo)
            }
        for other in list(pending):
            if other in touched:
                flush(other)
        steps.append(pa.array([row], pa.int64()))
    for name in list(pending):
        flush(name)
    return steps


def changes_tables(step: RenamePair | DropSchema | dict[str, TablePlan]) -> bool:
    """Whether a planned step moves, rewrites, clears or drops a table (a RENAME pair, a DROP DATABASE, DDL, TRUNCATE):
    what is staged must reach the change logs before it."""
    return not isinstance(step, dict) or any(plan.ddl or plan.truncate for plan in step.values())


def step_names(step: RenamePair | DropSchema | dict[str, TablePlan]) -> list[str]:
    """The tables a planned step names: its plans', a RENAME pair's old one (a DROP DATABASE names none)."""
    return [step.old] if isinstance(step, RenamePair) else list(step) if isinstance(step, dict) else []
