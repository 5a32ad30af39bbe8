"""``DROP TABLE a, b, ...`` as one DDL row per table it names, for the mirror; and the drop of tables a RENAME moved
out of the capture.

A statement's change row belongs to one table (the mirror plans and applies each table's rows and DDL together:
:mod:`canal.lake.mirror`); a DROP of several tables changes each of them. The server drops them in the order named
(``DROP TABLE IF EXISTS`` skipping the missing ones): so the row becomes one row per table, at its place in the
batch, each a ``DROP TABLE IF EXISTS`` of that table alone (the mirror may not hold every one), with the statement's
other columns (``seq``, ``type``) kept.

A RENAME that moved captured tables to names the destination's filter leaves out says so in its ``props``
(:data:`canal.parse.unmodeled.LEAVES_CAPTURE`): those tables left the capture, their later rows never come, so the
mirror must not keep them. The RENAME row is followed by a ``DROP TABLE IF EXISTS`` row of each (type ``ERASE``, no
props), applied after the rename moved it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from canal.sql import TableName

__all__ = ["one_per_table"]


def one_per_table(
    table: Any, dropped: Mapping[int, Sequence[TableName]], left: Mapping[int, Sequence[TableName]] | None = None
) -> Any:
    """``table`` (a batch's change rows, in order) with each row of ``dropped`` (row -> the tables its DROP names,
    qualified) replaced by one row per table, and each row of ``left`` (row -> the tables its RENAME moved out of
    the capture, qualified) followed by a drop of each."""
    import pyarrow as pa

    left = left or {}
    take: list[int] = []
    schemas: list[str | None] = []
    names: list[str | None] = []
    sqls: list[str | None] = []
    synthetic: list[bool] = []
    old_schemas = table.column("schema").to_pylist()
    old_names = table.column("table").to_pylist()
    old_sqls = table.column("sql").to_pylist()

    def drop(row: int, name: TableName, *, added: bool) -> None:
        take.append(row)
        schemas.append(name.schema)
        names.append(name.name)
        sqls.append(f"DROP TABLE IF EXISTS {name}")
        synthetic.append(added)

    for row in range(table.num_rows):
        tables = dropped.get(row)
        if tables is None:
            take.append(row)
            schemas.append(old_schemas[row])
            names.append(old_names[row])
            sqls.append(old_sqls[row])
            synthetic.append(False)
        else:
            for name in tables:
                drop(row, name, added=False)
        for name in left.get(row, ()):
            drop(row, name, added=True)
    table = table.take(pa.array(take, pa.int64()))
    for column, values in (("schema", schemas), ("table", names), ("sql", sqls)):
        table = table.set_column(table.column_names.index(column), column, pa.array(values, pa.string()))
    if any(synthetic):
        import pyarrow.compute as pc

        added = pa.array(synthetic, pa.bool_())
        kinds = pc.if_else(added, pa.scalar("ERASE", pa.string()), table.column("type").combine_chunks())
        table = table.set_column(table.column_names.index("type"), "type", kinds)
        if "props" in table.column_names:
            props = pc.if_else(added, pa.scalar(None, pa.string()), table.column("props").combine_chunks())
            table = table.set_column(table.column_names.index("props"), "props", props)
    return table
