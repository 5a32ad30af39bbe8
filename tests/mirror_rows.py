"""Change rows for mirror tests, built by hand in the columns :class:`canal.spark.DeltaMirror` reads: DML rows of
tables ``(id INT key, v VARCHAR(20))`` and DDL rows (with the props the capture gives them), numbered by ``seq`` in
the order given."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

SCHEMA = pa.schema(
    [
        ("seq", pa.int64()),
        ("schema", pa.string()),
        ("table", pa.string()),
        ("type", pa.string()),
        ("is_ddl", pa.bool_()),
        ("sql", pa.string()),
        ("keys", pa.string()),
        ("old_keys", pa.string()),
        ("after", pa.string()),
        ("columns", pa.string()),
        ("props", pa.string()),
    ]
)
LAYOUT = json.dumps([["id", "int(11)", True], ["v", "varchar(20)", False]])
CREATE = "CREATE TABLE {table} (id INT NOT NULL PRIMARY KEY, v VARCHAR(20))"


def upsert(table: str, key: int, value: str, kind: str = "INSERT", schema: str = "s") -> dict[str, Any]:
    after = json.dumps({"id": str(key), "v": value})
    return {
        "schema": schema,
        "table": table,
        "type": kind,
        "is_ddl": False,
        "sql": None,
        "keys": json.dumps({"id": str(key)}),
        "old_keys": None,
        "after": after,
        "columns": LAYOUT,
    }


def delete(table: str, key: int, schema: str = "s") -> dict[str, Any]:
    return {
        "schema": schema,
        "table": table,
        "type": "DELETE",
        "is_ddl": False,
        "sql": None,
        "keys": json.dumps({"id": str(key)}),
        "old_keys": None,
        "after": None,
        "columns": LAYOUT,
    }


def ddl(table: str, kind: str, sql: str, schema: str = "s", props: dict[str, str] | None = None) -> dict[str, Any]:
    """A DDL row; ``props`` what the capture tells of it (a retyping ALTER's types before and after it:
    ``RETYPED_FROM`` / ``RETYPED_TO``)."""
    return {
        "props": None if props is None else json.dumps(props),
        "schema": schema,
        "table": table,
        "type": kind,
        "is_ddl": True,
        "sql": sql,
        "keys": None,
        "old_keys": None,
        "after": None,
        "columns": None,
    }


def batch(*rows: dict[str, Any]) -> pa.Table:
    return pa.Table.from_pylist([{"seq": n, **row} for n, row in enumerate(rows, 1)], schema=SCHEMA)


def values(table: Any) -> dict[int, str]:
    """A mirror table's rows (a pyarrow Table) as ``{id: v}``."""
    return {row["id"]: row["v"] for row in table.to_pylist()}
