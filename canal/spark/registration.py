"""``canal.spark.register(spark)``: make ``spark.readStream.format("canal")`` available, with Spark's redaction of the
source's secret options (:mod:`canal.spark.redaction`).

Kept apart from :mod:`canal.spark.source` (the reader logic, no pyspark import) and :mod:`canal.spark.datasource`
(the pyspark classes, which import the reader): importing ``canal.spark`` does not import pyspark.
"""

from __future__ import annotations

from typing import Any

from canal.spark.redaction import redact_source_secrets


def register(spark: Any) -> None:
    """Register the ``canal`` data source with a SparkSession. With a local-mode session (``spark.master``
    ``local...``) the source's option ``spool.shared`` defaults to true: the executors run on this machine. The
    session's redaction patterns are extended with the source's secret options (never replaced:
    :func:`~canal.spark.redaction.redact_source_secrets`), so its plans, as Spark writes them to the UI, the event log
    and the history server, hide them."""
    from canal.spark.datasource import CanalDataSource, CanalLocalDataSource

    redact_source_secrets(spark)
    master = spark.conf.get("spark.master", "") or ""
    spark.dataSource.register(CanalLocalDataSource if master.startswith("local") else CanalDataSource)
