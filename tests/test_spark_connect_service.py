"""The private Spark Connect server: a client session on its ``sc://`` URL runs queries, and leaves this process's
classic PySpark as it found it."""

from __future__ import annotations

from typing import Any

import pytest

from canal.testing.plugin import connect_session
from canal.testing.services import SparkConnectServer

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_a_remote_session_runs_a_query(spark_connect: Any, spark_connect_server: SparkConnectServer) -> None:
    assert spark_connect_server.url == f"sc://127.0.0.1:{spark_connect_server.port}"
    assert type(spark_connect).__module__ == "pyspark.sql.connect.session"
    rows = spark_connect.range(100).selectExpr("id % 3 AS k").groupBy("k").count().orderBy("k").collect()
    assert [(row["k"], row["count"]) for row in rows] == [(0, 34), (1, 33), (2, 33)]


def test_the_process_is_not_left_in_connect_mode(spark_connect_server: SparkConnectServer) -> None:
    from pyspark.sql.utils import is_remote

    with connect_session(spark_connect_server.url) as session:
        assert session.sql("SELECT 1 AS one").collect()[0]["one"] == 1
        assert is_remote()
    assert not is_remote()  # a classic SparkSession later in this process is classic again
