"""``DROP TABLE a, b, ...`` as one DDL row per table it names, for the mirror.

A statement's change row belongs to one table (the mirror plans and applies each table's rows and DDL together:
:mod:`canal.lake.mirror`); a DROP of several tables changes each of them. The server drops them in the order named
(``DROP TABLE IF EXISTS`` skipping the missing ones): so the row becomes one row per table, at its place in the
batch, each a ``DROP TABLE IF EXISTS`` of that table alone (the mirror may not hold every one), with the statement's
other columns (``seq``, ``type``) kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from canal.sql import TableName

__all__ = ["one_per_table"]


def one_per_table(table: Any, dropped: Mapping[int, Sequence[TableName]]) -> Any:
    """``table`` (a batch's change rows, in order) with each row of ``dropped`` (row -> the tables its DROP names,
    qualified) replaced by one row per table."""
    import pyarrow as pa

    take: list[int] = []
    schemas: list[str | None] = []
    names: list[str | None] = []
    sqls: list[str | None] = []
    old_schemas = table.column("schema").to_pylist()
    old_names = table.column("table").to_pylist()
    old_sqls = table.column("sql").to_pylist()
    for row in range(table.num_rows):
        tables = dropped.get(row)
        if tables is None:
            take.append(row)
            schemas.append(old_schemas[row])
            names.append(old_names[row])
            sqls.append(old_sqls[row])
            continue
        for name in tables:
            take.append(row)
            schemas.append(name.schema)
            names.append(name.name)
            sqls.append(f"DROP TABLE IF EXISTS {name}")
    table = table.take(pa.array(take, pa.int64()))
    for column, values in (("schema", schemas), ("table", names), ("sql", sqls)):
        table = table.set_column(table.column_names.index(column), column, pa.array(values, pa.string()))
    return table
