"""The Delta mirror: one Delta table per source table, kept exactly equal to the source batch by batch, without Spark.

* :class:`DeltaMirror` -- applies batches of change rows (a pyarrow Table; a Spark DataFrame through
  ``foreachBatch``) idempotently, merge-on-read (a change log beside each table, folded in) or copy-on-write;
* :func:`compare` / :class:`Comparison` -- a mirrored table against ``SELECT *`` rows, cell by cell;
* :class:`MirrorSettings` -- a mirror's settings as one frozen value (what Spark tasks rebuild a mirror from).

pyarrow and deltalake are imported when used (the ``lake`` extra); this package never imports pyspark or
:mod:`canal.spark` at import time (docs/architecture.md: the modules and the path of a row through them).
"""

from __future__ import annotations

from canal.lake.apply.heals import MirrorHealError
from canal.lake.apply.partial import MirrorPartialImageError
from canal.lake.apply.stops import MirrorCascadeError, MirrorStatementError
from canal.lake.apply.xa import MirrorXAError
from canal.lake.compare import Comparison, compare
from canal.lake.ddl.time_zones import MirrorTimeZoneError
from canal.lake.forms.typed_batch import TypedBatch, entries_to_typed
from canal.lake.forms.typed_layout import TypedChangeError
from canal.lake.forms.typed_plan import RowsNeeded
from canal.lake.mirror import DeltaMirror
from canal.lake.native_memory import purge_freed_memory
from canal.lake.results import ApplyResult, TableStats
from canal.lake.settings import MirrorMode, MirrorSettings
from canal.lake.store.changelog import FoldResult
from canal.lake.store.storage import StorageError
from canal.lake.types import (
    MirrorCheckpointError,
    MirrorConversionError,
    MirrorError,
    MirrorFoldError,
    MirrorLeaseError,
    MirrorLineageError,
    MirrorStorageError,
    MirrorTypeError,
    MirrorUnreachableError,
)
from canal.lake.upkeep.health import MirrorMetrics

__all__ = [
    "ApplyResult",
    "Comparison",
    "DeltaMirror",
    "FoldResult",
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
    "MirrorSettings",
    "MirrorStatementError",
    "MirrorStorageError",
    "MirrorTimeZoneError",
    "MirrorTypeError",
    "MirrorUnreachableError",
    "MirrorXAError",
    "RowsNeeded",
    "StorageError",
    "TableStats",
    "TypedBatch",
    "TypedChangeError",
    "compare",
    "entries_to_typed",
]

purge_freed_memory()  # before any of these modules loads deltalake (each imports it when used)
