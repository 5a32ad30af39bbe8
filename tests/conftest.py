"""Fixtures shared by the test modules (the service fixtures come from pycanal's own pytest plugin)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local SparkSession for the whole run (NOTES: start-up costs ~4.5 s), with the ``canal`` source registered."""
    pytest.importorskip("pyspark")
    from canal.spark import register
    from canal.spark.testing import local_spark, stop_spark

    session = local_spark("pycanal-tests")
    register(session)
    yield session
    stop_spark(session)  # the JVM too: no process outlives the run


@pytest.fixture(scope="session")
def binlog_corpus() -> Any:
    """Binlog files a private MariaDB wrote for a varied workload (:mod:`binlog_corpus`), recorded once a session."""
    from binlog_corpus import record_corpus

    return record_corpus()
