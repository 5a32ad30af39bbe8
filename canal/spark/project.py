"""``project(df, table)``: one table's change rows as typed columns."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from canal.protocol import TableSchema
from canal.spark.types import spark_type_sql
from canal.sql import CreateTable, SqlError, read_statement


def parse_create_table(ddl: str) -> tuple[str | None, str, list[tuple[str, str]]]:
    """``(schema, table, [(column, mysql_type), ...])`` of a ``CREATE TABLE`` statement, read by :mod:`canal.sql`
    (``mysql_type`` as written, e.g. ``DECIMAL(12, 2)``); SqlError (a ValueError) for anything else."""
    stmt = read_statement(ddl)
    if not isinstance(stmt, CreateTable) or not stmt.columns:
        raise SqlError(f"not a CREATE TABLE statement with columns: {ddl[:80]!r}", offset=0)
    return stmt.table.schema, stmt.table.name, [(c.name, c.type.text) for c in stmt.columns]


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
