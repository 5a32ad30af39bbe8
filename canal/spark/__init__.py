"""PySpark integration: the ``canal`` streaming source, a ``foreachBatch`` helper and an idempotent Delta mirror.

* :func:`register` -- ``spark.readStream.format("canal")`` (:mod:`canal.spark.source`, :mod:`canal.spark.registration`);
* :func:`run_batches` -- an instance embedded in the driver, batch by batch into ``fn(df, batch_id)``;
* :class:`DeltaMirror` / :func:`compare` -- one Delta table per source table, applied once per batch id
  (merge-on-read: a change log beside each table, folded in; or copy-on-write MERGE): :mod:`canal.lake`, which needs
  no Spark, re-exported here -- its mirror as :mod:`canal.spark.mirror`'s, which writes a ``foreachBatch`` DataFrame
  with Spark tasks;
* :func:`current_dataframe`, :func:`current_duckdb`, :func:`current_polars` -- a mirrored table's current state
  (:meth:`DeltaMirror.read` for pyarrow);
* :func:`project` -- one table's change rows as typed columns (JSON or VARIANT images);
* :func:`to_arrow` -- ``df.toArrow()`` that also reads the ``images=variant`` rows (:mod:`canal.lake.forms.frames`);
* :func:`cdc_rows` -- :func:`project` with a DELETE of each old key an UPDATE moved (for a MERGE by key);
* :func:`current_rows` -- the rows one table's change rows leave (a batch computation over a change log);
* :class:`ChangeCountListener` / :func:`micro_batch_changes` -- the changes in each micro-batch of the ``canal``
  source, whatever its images form, read from the query's progress (:mod:`canal.spark.progress`).

pyspark, pyarrow and deltalake are imported only when used (the ``spark`` extra).
"""

from __future__ import annotations

from canal.lake import (
    ApplyResult,
    Comparison,
    FoldResult,
    MirrorCascadeError,
    MirrorCheckpointError,
    MirrorConversionError,
    MirrorError,
    MirrorFoldError,
    MirrorHealError,
    MirrorLeaseError,
    MirrorLineageError,
    MirrorMetrics,
    MirrorMode,
    MirrorPartialImageError,
    MirrorStatementError,
    MirrorStorageError,
    MirrorTimeZoneError,
    MirrorTypeError,
    MirrorUnreachableError,
    MirrorXAError,
    StorageError,
    compare,
)
from canal.lake.forms.changes import CHANGE_SCHEMA_DDL, arrow_schema, entries_to_batch, position_id
from canal.lake.forms.frames import to_arrow
from canal.lake.forms.variant import VariantError
from canal.lake.forms.variant_changes import VARIANT_SCHEMA_DDL, entries_to_variant_batch, variant_arrow_schema
from canal.spark.batches import JournalError, RunStats, run_batches
from canal.spark.current import current_dataframe, current_duckdb, current_polars
from canal.spark.mirror import DeltaMirror
from canal.spark.offsets import INITIAL_OFFSET
from canal.spark.progress import MicroBatchChanges, micro_batch_changes
from canal.spark.project import cdc_rows, current_rows, project
from canal.spark.registration import register
from canal.spark.sessions import close_sessions
from canal.spark.source import CanalStreamReader
from canal.spark.source_options import SparkSourceError, config_from_options
from canal.spark.spool import Spool, SpoolError

__all__ = [
    "CHANGE_SCHEMA_DDL",
    "INITIAL_OFFSET",
    "VARIANT_SCHEMA_DDL",
    "ApplyResult",
    "CanalStreamReader",
    "ChangeCountListener",
    "Comparison",
    "DeltaMirror",
    "FoldResult",
    "JournalError",
    "MicroBatchChanges",
    "MirrorCascadeError",
    "MirrorCheckpointError",
    "MirrorConversionError",
    "MirrorError",
    "MirrorFoldError",
    "MirrorHealError",
    "MirrorLeaseError",
    "MirrorLineageError",
    "MirrorMetrics",
    "MirrorMode",
    "MirrorPartialImageError",
    "MirrorStatementError",
    "MirrorStorageError",
    "MirrorTimeZoneError",
    "MirrorTypeError",
    "MirrorUnreachableError",
    "MirrorXAError",
    "RunStats",
    "SparkSourceError",
    "Spool",
    "SpoolError",
    "StorageError",
    "VariantError",
    "arrow_schema",
    "cdc_rows",
    "close_sessions",
    "compare",
    "config_from_options",
    "current_dataframe",
    "current_duckdb",
    "current_polars",
    "current_rows",
    "entries_to_batch",
    "entries_to_variant_batch",
    "micro_batch_changes",
    "position_id",
    "project",
    "register",
    "run_batches",
    "to_arrow",
    "variant_arrow_schema",
]


def __getattr__(name: str) -> object:
    """:class:`~canal.spark.listener.ChangeCountListener` is a pyspark class: imported when first asked for."""
    if name == "ChangeCountListener":
        from canal.spark.listener import ChangeCountListener

        return ChangeCountListener
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
