"""The pyspark classes of the ``canal`` data source (imports pyspark; :func:`canal.spark.register` loads it).

Defined at module level so that Spark can pickle them by reference into its Python workers.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource, SimpleDataSourceStreamReader

from canal.spark.changes import CHANGE_SCHEMA_DDL
from canal.spark.source import CanalStreamReader

try:
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow as _AvailableNow
except ImportError:  # pragma: no cover - pyspark without the mixin: Trigger.AvailableNow runs one batch
    _AvailableNow = object  # type: ignore[misc,assignment]


class CanalSimpleStreamReader(CanalStreamReader, SimpleDataSourceStreamReader, _AvailableNow):
    """The ``canal`` source's reader: :class:`~canal.spark.source.CanalStreamReader` as pyspark sees it."""


class CanalDataSource(DataSource):
    """``spark.readStream.format("canal")``: change rows of one canal destination."""

    @classmethod
    def name(cls) -> str:
        return "canal"

    def schema(self) -> str:
        return CHANGE_SCHEMA_DDL

    def simpleStreamReader(self, schema: Any) -> CanalSimpleStreamReader:
        return CanalSimpleStreamReader(dict(self.options))
