"""Helpers for Spark tests, the demo and the benchmark: a local SparkSession, source snapshots, mirror checks."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from canal.spark.mirror import Comparison, DeltaMirror, compare


def local_spark(app_name: str = "pycanal", *, cores: int = 2, extra: dict[str, str] | None = None) -> Any:
    """A local SparkSession set up for pycanal: this interpreter for Python workers, loopback only, no UI."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app_name)
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.streaming.stopTimeout", "30s")
    )
    for key, value in (extra or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def select_all(conn: Any, schema: str, table: str) -> list[dict[str, Any]]:
    """``SELECT *`` of a table as dicts (a pymysql connection)."""
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM `{schema}`.`{table}`")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def primary_key(conn: Any, schema: str, table: str) -> list[str]:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s "
            "AND CONSTRAINT_NAME='PRIMARY' ORDER BY ORDINAL_POSITION",
            (schema, table),
        )
        return [str(r[0]) for r in cur.fetchall()]


def compare_tables(conn: Any, mirror: DeltaMirror, schema: str, tables: Iterable[str]) -> list[Comparison]:
    """Compare each table's mirror with ``SELECT *`` of its source (an empty source against a missing mirror is
    equal)."""
    import pyarrow as pa

    out = []
    for table in tables:
        rows = select_all(conn, schema, table)
        key = primary_key(conn, schema, table)
        path = mirror.table_path(schema, table)
        if path.exists():
            mirrored: Any = mirror.read(schema, table)
        else:
            mirrored = pa.table({k: pa.array([], type=pa.string()) for k in (rows[0] if rows else key)})
        out.append(compare(mirrored, rows, key, name=f"{schema}.{table}"))
    return out


def no_batch_twice(mirror: DeltaMirror, schema: str, tables: Sequence[str]) -> dict[str, list[int]]:
    """Every table's committed batch ids; raises AssertionError if one was committed twice or out of order."""
    out = {}
    for table in tables:
        ids = mirror.committed_batch_ids(schema, table)
        if ids != sorted(set(ids)):
            raise AssertionError(f"{schema}.{table}: batch ids committed twice or out of order: {ids}")
        out[table] = ids
    return out
