"""The current state of a mirrored table, read exactly from pyarrow, Spark, DuckDB or Polars -- no Delta jars needed.

A merge-on-read table is its base plus the newer changes of its change log (:mod:`canal.spark.changelog`): the
current state is the base without the keys the newer changes name, plus their latest upserts. Each reader here
builds exactly that; on a copy-on-write table (no log) each is the plain table.

```python
from canal.spark import DeltaMirror, current_dataframe, current_duckdb, current_polars

mirror = DeltaMirror("/data/mirror")
table = mirror.read("shop", "orders")     # pyarrow.Table (changelog.current_state(path) for a path)
df = current_dataframe(spark, mirror.table_path("shop", "orders"))     # Spark DataFrame, computed on executors
rel = current_duckdb(mirror.table_path("shop", "orders"))              # duckdb relation
frame = current_polars(mirror.table_path("shop", "orders"))            # polars DataFrame
```

Spark reads the Delta tables' current data files (their file lists come from the Delta logs), never the directories:
a Delta directory read as plain parquet returns every old file version too. The same helper works on a cluster that
has delta-spark, and on one that has not.
"""

from __future__ import annotations

import os
from typing import Any

from canal.spark import changelog


def current_dataframe(spark: Any, path: str | os.PathLike[str]) -> Any:
    """The current rows of the mirror table at ``path`` as a Spark DataFrame: the base's and the log's data files,
    each key's latest change after the base's folded one, computed by Spark (no row passes through the driver).

    The files are those of the tables' snapshots now. A fold that trims the log before Spark has read them deletes
    some: the job then fails on a missing file (never answers with a change missing); call this again."""
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    base_files, log_files, (batch, seq), keys = changelog.current_files(path)
    if not base_files:
        # no data file to take the schema from (an empty table): the few rows there are, through the driver
        return spark.createDataFrame(changelog.current_state(path))
    base = spark.read.parquet(*base_files)
    if keys is None or not log_files:
        return base
    log = spark.read.parquet(*log_files)
    b, s, op = F.col(changelog.BATCH), F.col(changelog.SEQ), F.col(changelog.OP)
    newer = log.where((b > batch) | ((b == batch) & (s > seq)))
    rank = "__pycanal_rank"
    last = Window.partitionBy(*keys).orderBy(b.desc(), s.desc())
    latest = newer.withColumn(rank, F.row_number().over(last)).where(F.col(rank) == 1).drop(rank)
    kept = base.join(latest.select(*keys), on=list(keys), how="left_anti")
    upserts = latest.where(op == "u").drop(*changelog.INTERNAL_COLUMNS)
    return kept.unionByName(upserts, allowMissingColumns=True)


def current_duckdb(path: str | os.PathLike[str], connection: Any = None) -> Any:
    """The current rows of the mirror table at ``path`` as a DuckDB relation (on ``connection``, else DuckDB's
    default connection)."""
    import duckdb

    rows = changelog.current_state(path)
    return (connection or duckdb.default_connection()).from_arrow(rows)


def current_polars(path: str | os.PathLike[str]) -> Any:
    """The current rows of the mirror table at ``path`` as a Polars DataFrame."""
    import polars as pl

    return pl.from_arrow(changelog.current_state(path))
