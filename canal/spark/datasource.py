"""The pyspark classes of the ``canal`` data source (imports pyspark; :func:`canal.spark.register` loads it).

Defined at module level so that Spark can pickle them by reference into its Python workers.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    InputPartition,
    SimpleDataSourceStreamReader,
)

from canal.lake.storage import in_object_store
from canal.spark.changes import CHANGE_SCHEMA_DDL
from canal.spark.source import CanalStreamReader, partitioned_options

try:  # pyspark's adapter of a simple reader to the engine; private, hence the guard (tests check it exists)
    from pyspark.sql.datasource_internal import _SimpleStreamReaderWrapper
except ImportError:  # pragma: no cover - a pyspark without it: replays are read where Spark plans them
    _SimpleStreamReaderWrapper = None  # type: ignore[assignment,misc]

try:
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow as _AvailableNow
except ImportError:  # pragma: no cover - pyspark without the mixin: Trigger.AvailableNow runs one batch
    _AvailableNow = object  # type: ignore[misc,assignment]


class CanalSimpleStreamReader(CanalStreamReader, SimpleDataSourceStreamReader, _AvailableNow):
    """The ``canal`` source's reader: :class:`~canal.spark.source.CanalStreamReader` as pyspark sees it."""


class CanalPartitionedStreamReader(CanalStreamReader, DataSourceStreamReader, _AvailableNow):
    """The reader with option ``snapshot.partitions``: snapshot ranges are input partitions read on executors
    (:mod:`canal.spark.chunks`); the binlog rows travel to an executor inside a partition."""

    def latestOffset(self, start: dict[str, Any], limit: Any) -> dict[str, Any]:
        return self.latest(start)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        return [InputPartition(value) for value in self.partition_values(start, end)]

    def read(self, partition: InputPartition) -> Any:  # type: ignore[override]
        return self.read_value(partition.value)


if _SimpleStreamReaderWrapper is not None:

    class _ReplayOnDriver(_SimpleStreamReaderWrapper):
        """The simple reader as the engine sees it, with replays read where the spool is.

        pyspark's adapter hands Spark the rows of a micro-batch its ``read`` returned in this process (Spark moves
        them to the task itself). A micro-batch planned before a restart is not among them, and the adapter would
        have the *task* call ``readBetweenOffsets`` -- on an executor, which on a cluster cannot see the driver's
        ``spool.dir``. Here the planner (on the driver, beside the spool) reads such a micro-batch from the spool and
        hands its rows over the same way, so a replay needs no disk the executors share."""

        def getCache(self, start: dict[str, Any], end: dict[str, Any]) -> Any:
            cached = super().getCache(start, end)
            if cached is not None:
                return cached
            return self.simple_reader.readBetweenOffsets(start, end)


class CanalDataSource(DataSource):
    """``spark.readStream.format("canal")``: change rows of one canal destination."""

    SPOOL_SHARED = "false"  # the default of option spool.shared

    @classmethod
    def name(cls) -> str:
        return "canal"

    def schema(self) -> str:
        return CHANGE_SCHEMA_DDL

    def reader_options(self) -> dict[str, str]:
        """The options, with ``spool.shared`` set unless given: true when ``spool.dir`` is in an object store (every
        executor reaches it), else this class's default."""
        options = dict(self.options)
        if not any(k.lower() == "spool.shared" for k in options):
            spool_dir = next((v for k, v in options.items() if k.lower() == "spool.dir"), "")
            options["spool.shared"] = "true" if in_object_store(spool_dir) else self.SPOOL_SHARED
        return options

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        options = self.reader_options()
        if partitioned_options(options):
            return CanalPartitionedStreamReader(options)
        if _SimpleStreamReaderWrapper is None:  # pragma: no cover
            return super().streamReader(schema)  # not implemented: pyspark adapts the simple reader itself
        return _ReplayOnDriver(self.simpleStreamReader(schema))

    def simpleStreamReader(self, schema: Any) -> CanalSimpleStreamReader:
        return CanalSimpleStreamReader(self.reader_options())


class CanalLocalDataSource(CanalDataSource):
    """The ``canal`` source registered with a local-mode session: its executors run on this machine and see
    ``spool.dir`` at the driver's path, so ``spool.shared`` defaults to true."""

    SPOOL_SHARED = "true"
