"""``canal.spark.register(spark)``: make ``spark.readStream.format("canal")`` available.

Kept apart from :mod:`canal.spark.source` (the reader logic, no pyspark import) and :mod:`canal.spark.datasource`
(the pyspark classes, which import the reader): importing ``canal.spark`` does not import pyspark.
"""

from __future__ import annotations

from typing import Any


def register(spark: Any) -> None:
    """Register the ``canal`` data source with a SparkSession."""
    from canal.spark.datasource import CanalDataSource

    spark.dataSource.register(CanalDataSource)
