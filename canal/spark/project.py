"""``project(df, table)``: one table's change rows as typed columns."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from canal.protocol import TableSchema
from canal.spark.mirror import _split_top, _unquote
from canal.spark.types import spark_type_sql

_CREATE = re.compile(
    r"^\s*create\s+(?:or\s+replace\s+)?(?:temporary\s+)?table\s+(?:if\s+not\s+exists\s+)?"
    r"((?:`(?:[^`]|``)+`|\w+)(?:\s*\.\s*(?:`(?:[^`]|``)+`|\w+))?)\s*\((.*)\)[^)]*$",
    re.I | re.S,
)
_NOT_COLUMN = re.compile(r"^(?:primary|key|index|unique|constraint|foreign|fulltext|spatial|check|period)\b", re.I)
_NAME = re.compile(r"^(`(?:[^`]|``)+`|\w+)\s+(\w+(?:\s*\([^)]*\))?(?:\s+unsigned)?)", re.I | re.S)


def parse_create_table(ddl: str) -> tuple[str | None, str, list[tuple[str, str]]]:
    """``(schema, table, [(column, mysql_type), ...])`` of a ``CREATE TABLE`` statement."""
    match = _CREATE.match(ddl.strip().rstrip(";"))
    if not match:
        raise ValueError(f"not a CREATE TABLE statement: {ddl[:80]!r}")
    parts = [_unquote(p.strip()) for p in re.split(r"\s*\.\s*(?=(?:[^`]*`[^`]*`)*[^`]*$)", match.group(1))]
    schema, table = (parts[0], parts[1]) if len(parts) == 2 else (None, parts[0])
    columns = []
    for clause in _split_top(match.group(2)):
        if _NOT_COLUMN.match(clause):
            continue
        col = _NAME.match(clause)
        if col:
            columns.append((_unquote(col.group(1)), re.sub(r"\s+", " ", col.group(2))))
    return schema, table, columns


def project(
    df: Any, table_schema_or_ddl: TableSchema | str | Sequence[tuple[str, str]], table: str | None = None
) -> Any:
    """The changes of one table in ``df`` (change rows) as typed columns.

    ``table_schema_or_ddl``: a :class:`~canal.protocol.TableSchema`, a ``CREATE TABLE`` statement, or
    ``[(column, mysql_type), ...]`` together with ``table="schema.table"`` (or a bare table name). Output columns:
    ``op`` (INSERT / UPDATE / DELETE), ``seq``, ``execute_time``, then the table's columns typed (values from the
    after image, or the before image of a DELETE). DDL rows and other tables are dropped.
    """
    from pyspark.sql import functions as F

    schema_name: str | None
    if isinstance(table_schema_or_ddl, TableSchema):
        schema_name, table_name = table_schema_or_ddl.schema, table_schema_or_ddl.table
        columns = [(c.name, c.mysql_type) for c in table_schema_or_ddl.columns]
    elif isinstance(table_schema_or_ddl, str):
        schema_name, table_name, columns = parse_create_table(table_schema_or_ddl)
    else:
        if table is None:
            raise ValueError("pass table='schema.table' with a column list")
        columns = [(str(n), str(t)) for n, t in table_schema_or_ddl]
        schema_name, table_name = None, table
    if table is not None:
        schema_name, _, table_name = table.rpartition(".") if "." in table else (schema_name, "", table)
    cond = (F.col("table") == table_name) & (~F.col("is_ddl"))
    if schema_name:
        cond = cond & (F.col("schema") == schema_name)
    image = F.from_json(F.coalesce(F.col("after"), F.col("before")), "MAP<STRING,STRING>")
    selected = [F.col("type").alias("op"), F.col("seq"), F.col("execute_time")]
    for name, mysql_type in columns:
        value = image.getItem(name)
        sql_type = spark_type_sql(mysql_type)
        typed = F.encode(value, "ISO-8859-1") if sql_type == "BINARY" else value.cast(sql_type)
        selected.append(typed.alias(name))
    return df.where(cond).select(*selected)
