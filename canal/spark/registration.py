"""``canal.spark.register(spark)``: make ``spark.readStream.format("canal")`` available.

Kept apart from :mod:`canal.spark.source` (the reader logic, no pyspark import) and :mod:`canal.spark.datasource`
(the pyspark classes, which import the reader): importing ``canal.spark`` does not import pyspark.
"""

from __future__ import annotations

from typing import Any


def register(spark: Any) -> None:
    """Register the ``canal`` data source with a SparkSession. With a local-mode session (``spark.master``
    ``local...``) the source's option ``spool.shared`` defaults to true: the executors run on this machine."""
    from canal.spark.datasource import CanalDataSource, CanalLocalDataSource

    master = spark.conf.get("spark.master", "") or ""
    spark.dataSource.register(CanalLocalDataSource if master.startswith("local") else CanalDataSource)
