"""The current state of a mirrored table, read exactly from pyarrow, Spark, DuckDB or Polars -- no Delta jars needed.

A merge-on-read table is its base plus the newer changes of its change log (:mod:`canal.lake.store.changelog`) and its
staged changes not in the log yet (:mod:`canal.lake.store.staged`): the current state is the base without the keys the
newer changes name, plus their latest upserts. Each reader here
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

from canal.errors import require_extra
from canal.lake.own_names import LOG_COLUMNS, log_columns, own_name
from canal.lake.store import changelog


def current_dataframe(spark: Any, path: str | os.PathLike[str]) -> Any:
    """The current rows of the mirror table at ``path`` as a Spark DataFrame: the base's and the log's data files,
    each key's latest change after the base's folded one, computed by Spark (no row of the files passes through the
    driver; the staged changes not in the log yet do, :mod:`canal.lake.store.staged`).

    The files are those of the tables' snapshots now. A fold that trims the log before Spark has read them deletes
    some: the job then fails on a missing file (never answers with a change missing); call this again."""
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    files = changelog.current_files(path)
    if not files.base_files:
        # no data file to take the schema from (an empty table): the few rows there are, through the driver
        return spark.createDataFrame(changelog.current_state(path))
    base = spark.read.parquet(*files.base_files)
    keys, (batch, seq) = files.keys, files.folded
    if keys is None or not (files.log_files or files.staged is not None):
        return base
    parts = [_current_names(spark.read.parquet(*files.log_files))] if files.log_files else []
    if files.staged is not None:
        # staged changes (a few batches' small parts, canal.lake.store.staged) pass through the driver, in the types the
        # Parquet files give the same columns
        staged = spark.createDataFrame(files.staged)
        types = {f.name: f.dataType for f in (parts[0] if parts else base).schema.fields}
        parts.append(staged.select(*(_column(c).cast(types[c]) if c in types else _column(c) for c in staged.columns)))
    log = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1], allowMissingColumns=True)
    b, s, op = F.col(changelog.BATCH), F.col(changelog.SEQ), F.col(changelog.OP)
    newer = log.where((b > batch) | ((b == batch) & (s > seq)))
    rank = own_name("rank")
    last = Window.partitionBy(*(_column(k) for k in keys)).orderBy(b.desc(), s.desc())
    latest = newer.withColumn(rank, F.row_number().over(last)).where(F.col(rank) == 1).drop(rank)
    kept = base.join(latest.select(*(_column(k) for k in keys)), on=list(keys), how="left_anti")
    upserts = latest.where(op == "u").drop(*changelog.INTERNAL_COLUMNS)
    return kept.unionByName(upserts, allowMissingColumns=True)


def _current_names(log: Any) -> Any:
    """A change log's rows (a DataFrame) with the mirror's own column names (one an older pycanal wrote has others:
    :func:`canal.lake.own_names.current_names`)."""
    names = log_columns(log.columns)
    for old, new in zip(names, LOG_COLUMNS, strict=True):
        if old != new:
            log = log.withColumnRenamed(old, new)
    return log


def _column(name: str) -> Any:
    """A column by its name as it is (a MySQL name may hold dots and backticks, which Spark would read as a path)."""
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def current_duckdb(path: str | os.PathLike[str], connection: Any = None) -> Any:
    """The current rows of the mirror table at ``path`` as a DuckDB relation (on ``connection``, else DuckDB's
    default connection)."""
    require_extra("duckdb", "query", "current_duckdb")
    import duckdb

    rows = changelog.current_state(path)
    return (connection or duckdb.default_connection()).from_arrow(rows)


def current_polars(path: str | os.PathLike[str]) -> Any:
    """The current rows of the mirror table at ``path`` as a Polars DataFrame."""
    require_extra("polars", "query", "current_polars")
    import polars as pl

    return pl.from_arrow(changelog.current_state(path))
