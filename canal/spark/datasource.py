"""The pyspark classes of the ``canal`` data source (imports pyspark; :func:`canal.spark.register` loads it).

Defined at module level so that Spark can pickle them by reference into its Python workers.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from canal.lake.store.storage import in_object_store
from canal.spark.source import CanalStreamReader
from canal.spark.source_options import image_form, rows_schema_ddl

try:
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow as _AvailableNow
except ImportError:  # pragma: no cover - pyspark without the mixin: Trigger.AvailableNow runs one batch
    _AvailableNow = object  # type: ignore[misc,assignment]


class CanalPartitionedStreamReader(CanalStreamReader, DataSourceStreamReader, _AvailableNow):
    """The ``canal`` source's reader as pyspark sees it: :class:`~canal.spark.source.CanalStreamReader`, whose
    micro-batches are input partitions read by tasks -- the binlog rows as the spool file's name (``spool.shared``)
    or as the rows themselves, read from the spool on the driver (:class:`~canal.spark.spool.InlineRows`), and the
    snapshot's key ranges with ``snapshot.partitions`` (:mod:`canal.spark.chunks`). A micro-batch replayed after a
    restart is read from the spool the same way, so executors need the driver's ``spool.dir`` only with
    ``spool.shared``."""

    def latestOffset(self, start: dict[str, Any], limit: Any) -> dict[str, Any]:
        return self.latest(start)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        return [InputPartition(value) for value in self.partition_values(start, end)]

    def read(self, partition: InputPartition) -> Any:  # type: ignore[override]
        return self.rows_of(partition.value)


class CanalDataSource(DataSource):
    """``spark.readStream.format("canal")``: change rows of one canal destination."""

    SPOOL_SHARED = "false"  # the default of option spool.shared

    @classmethod
    def name(cls) -> str:
        return "canal"

    def schema(self) -> str:
        """The change-row schema; its images VARIANT values with ``images=variant``; packed batches'
        (:mod:`canal.lake.forms.packed`) with ``images=packed``."""
        return rows_schema_ddl(image_form(self.options))

    def reader_options(self) -> dict[str, str]:
        """The options, with ``spool.shared`` set unless given: true when ``spool.dir`` is in an object store (every
        executor reaches it), else this class's default."""
        options = dict(self.options)
        if not any(k.lower() == "spool.shared" for k in options):
            spool_dir = next((v for k, v in options.items() if k.lower() == "spool.dir"), "")
            options["spool.shared"] = "true" if in_object_store(spool_dir) else self.SPOOL_SHARED
        return options

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return CanalPartitionedStreamReader(self.reader_options())


class CanalLocalDataSource(CanalDataSource):
    """The ``canal`` source registered with a local-mode session: its executors run on this machine and see
    ``spool.dir`` at the driver's path, so ``spool.shared`` defaults to true."""

    SPOOL_SHARED = "true"
