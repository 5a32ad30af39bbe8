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

from canal.spark.changes import CHANGE_SCHEMA_DDL
from canal.spark.source import CanalStreamReader, partitioned_options

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


class CanalDataSource(DataSource):
    """``spark.readStream.format("canal")``: change rows of one canal destination."""

    SPOOL_SHARED = "false"  # the default of option spool.shared

    @classmethod
    def name(cls) -> str:
        return "canal"

    def schema(self) -> str:
        return CHANGE_SCHEMA_DDL

    def reader_options(self) -> dict[str, str]:
        """The options, with ``spool.shared`` set to this class's default unless given."""
        options = dict(self.options)
        if not any(k.lower() == "spool.shared" for k in options):
            options["spool.shared"] = self.SPOOL_SHARED
        return options

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        options = self.reader_options()
        if partitioned_options(options):
            return CanalPartitionedStreamReader(options)
        return super().streamReader(schema)  # not implemented: pyspark takes the simple reader

    def simpleStreamReader(self, schema: Any) -> CanalSimpleStreamReader:
        return CanalSimpleStreamReader(self.reader_options())


class CanalLocalDataSource(CanalDataSource):
    """The ``canal`` source registered with a local-mode session: its executors run on this machine and see
    ``spool.dir`` at the driver's path, so ``spool.shared`` defaults to true."""

    SPOOL_SHARED = "true"
