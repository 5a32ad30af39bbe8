"""A heal in the mirror: the tables a heal reads again are replaced at its mark, and rebuilt by what follows.

Where the server changed a captured table's rows without logging them, the capture (``heal="snapshot"``, the
default) marks the entry of that point (:data:`canal.parse.heal_marks.HEAL`: the tables, why, where) and reads the
tables again in the stream after it (:mod:`canal.snapshot.heal`). The mirror replaces each such table at the mark:
the mark's change rows (a statement, or the rows of an entry whose partial images it could not apply) become

* ``DROP TABLE IF EXISTS`` of each table -- every row it held is void there, a row the source lost unlogged with
  them (a table the source no longer has stays dropped);
* and ``CREATE TABLE`` of each table that exists after the point, in the layout the mark gives (the schema
  history's: a table renamed onto the name, or converted by an ALTER, has its new one). Where the mark knows no
  layout (no schema history, or one that holds later DDL already) the table's next rows make it, in the layout they
  carry, as the rows of a table the mirror does not hold do: until then the mirror has no such table
  (``DeltaMirror.tables()`` does not list it, and ``read`` raises a ``MirrorStorageError`` naming it) -- which only
  a table with no rows can stay, as the heal's read of the table brings each of its rows.

These are ordinary DDL rows at the mark's place in the batch, so they are planned, applied and journaled as any DDL
is (:mod:`canal.lake.planning.plan`, the step journal): exact through crashes and replays, in every form of batch (a
typed batch's DDL row plans the same), with the staged parts flushed and the change logs folded first. The statement
itself is not applied. Then the rows of the entries after the mark -- the binlog's changes and the heal's SNAPSHOT
rows, upserts -- rebuild the table, which equals the source once the heal's read of it ends
(:mod:`canal.snapshot.heal` says why).

``DeltaMirror(heal="stop")`` refuses a heal instead: :class:`MirrorHealError`, nothing of the batch written -- a
mirror that must never lose its rows' history to a re-read, or whose tables another process also writes.
"""

from __future__ import annotations

import json
from typing import Any, Final

from canal.lake.settings import HealSetting
from canal.lake.types import MirrorError
from canal.parse.convert import RETYPED_FROM_PROP, RETYPED_TO_PROP
from canal.parse.heal_marks import HEAL, HealMark, heal_mark
from canal.sql import TableName

__all__ = ["HealSetting", "MirrorHealError", "heal_resets", "replace_healed"]


# the change-row columns a reset row leaves empty (of those a batch has): a DDL row has no images, keys or layout
_EMPTIED = ("keys", "old_keys", "after", "before", "columns", "before_absent", "after_absent", "origin_keys")


class MirrorHealError(MirrorError):
    """A batch holds a heal (the capture reads tables again where the server changed their rows unlogged) and the
    mirror is set to refuse one (``heal="stop"``): nothing of the batch was written."""


_VOID_PROPS: Final = frozenset({HEAL, RETYPED_FROM_PROP, RETYPED_TO_PROP})


def replace_healed(table: Any, setting: HealSetting) -> tuple[Any, list[HealMark]]:
    """``table`` (a batch's change rows in ``seq`` order, the mirror's columns) with each heal's marked rows replaced by
    its reset rows (module docstring), and the heals it held, in order. :class:`MirrorHealError` under ``stop``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if "props" not in table.column_names or table.num_rows == 0:
        return table, []
    props = table.column("props")
    marked = pc.fill_null(pc.match_substring(props, f'"{HEAL}"'), False)
    if not pc.any(marked).as_py():
        return table, []
    rows = pc.indices_nonzero(marked).to_pylist()
    texts = props.take(pa.array(rows, pa.int64())).to_pylist()
    found: dict[int, tuple[HealMark, dict[str, Any]]] = {}  # the first row of each marked entry -> its mark
    last_text: str | None = None
    last_row = -2
    covered: set[int] = set()
    for row, text in zip(rows, texts, strict=True):
        covered.add(row)
        if row == last_row + 1 and text == last_text:  # the next row of the same entry
            last_row = row
            continue
        decoded = json.loads(text)
        mark = heal_mark(decoded)
        if mark is None:  # (a prop that merely holds the word)
            covered.discard(row)
            continue
        # the statement is not applied: what it converts (the types before and after it) goes with it
        found[row] = (mark, {k: v for k, v in decoded.items() if k not in _VOID_PROPS})
        last_text, last_row = text, row
    if not found:
        return table, []
    if setting == "stop":
        mark = next(iter(found.values()))[0]
        raise MirrorHealError(
            f"{mark.why} at {mark.at} changed rows of {', '.join(t.full_name for t in mark.tables)} that the binlog "
            f"does not hold ({mark.statement!r}), and the capture reads them again from there (a heal); this mirror "
            "refuses heals (heal='stop'). Nothing of the batch was written. Mirror with heal='snapshot' (the "
            "default), or set the destination to heal='stop' to have it stop at such a statement instead."
        )
    take: list[int] = []
    schemas: list[str | None] = []
    names: list[str | None] = []
    kinds: list[str | None] = []
    sqls: list[str | None] = []
    kept_props: list[str | None] = []
    synthetic: list[bool] = []
    old = {name: table.column(name).to_pylist() for name in ("schema", "table", "type", "sql", "props")}
    for row in range(table.num_rows):
        heal = found.get(row)
        if heal is None:
            if row in covered:
                continue  # a marked entry's other rows: replaced with its first
            take.append(row)
            for out, name in ((schemas, "schema"), (names, "table"), (kinds, "type"), (sqls, "sql")):
                out.append(old[name][row])
            kept_props.append(old["props"][row])
            synthetic.append(False)
            continue
        mark, rest = heal
        rest_text = json.dumps(rest, sort_keys=True, ensure_ascii=False, separators=(",", ":")) if rest else None
        for healed in mark.tables:
            name = str(TableName(healed.schema, healed.table))
            statements = [("ERASE", f"DROP TABLE IF EXISTS {name}")]
            if healed.create is not None:
                statements.append(("CREATE", healed.create))
            for kind, sql in statements:
                take.append(row)
                schemas.append(healed.schema)
                names.append(healed.table)
                kinds.append(kind)
                sqls.append(sql)
                kept_props.append(rest_text)
                synthetic.append(True)
    out = table.take(pa.array(take, pa.int64()))
    columns = {
        "schema": pa.array(schemas, pa.string()),
        "table": pa.array(names, pa.string()),
        "type": pa.array(kinds, pa.string()),
        "sql": pa.array(sqls, pa.string()),
        "props": pa.array(kept_props, pa.string()),
    }
    made = pa.array(synthetic, pa.bool_())
    columns["is_ddl"] = pc.or_(pc.fill_null(out.column("is_ddl").combine_chunks(), False), made)
    for name in _EMPTIED:
        if name in out.column_names:
            column = out.column(name).combine_chunks()
            columns[name] = pc.if_else(made, pa.scalar(None, column.type), column)
    for name, values in columns.items():
        out = out.set_column(out.column_names.index(name), name, values.cast(out.schema.field(name).type))
    return out, [mark for mark, _rest in found.values()]


def heal_resets(table: Any, setting: HealSetting, healed: Any, replay: bool) -> Any:
    """:func:`replace_healed` for :meth:`DeltaMirror.apply <canal.lake.mirror.DeltaMirror.apply>`: each healed table
    counted (``healed()``, the mirror's counters), unless the batch is a replay going on after its journaled steps."""
    table, marks = replace_healed(table, setting)
    if not replay:
        for mark in marks:
            for _table in mark.tables:
                healed()
    return table
