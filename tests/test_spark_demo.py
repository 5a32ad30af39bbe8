"""The demo, reduced: 5,000 rows before the pipeline, a short workload, the reader SIGKILLed once, every mirror equal
to its table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("deltalake")

from canal import demo
from canal.spark.testing import source_runner_pids
from canal.testing.services import process_state

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def test_demo_reduced(spark: Any, tmp_path: Path) -> None:
    result = demo.run(seconds=8.0, rate=40.0, out_dir=tmp_path, progress=False, spark=spark, preload=5000)
    assert result.ok, demo.summary(result)
    assert result.killed_pid is not None and result.restarts >= 1
    assert process_state(result.killed_pid) in (None, "Z")
    assert result.killed_pid not in source_runner_pids()
    assert result.transactions > 100 and result.changes > 300
    assert result.preloaded == 5000 and result.snapshot_rows >= 5000  # the rows there before, through the snapshot
    assert {t["table"] for t in result.tables} == {"shop.customers", "shop.orders", "shop.order_items"}
    assert all(t["source_rows"] > 0 and t["equal"] for t in result.tables)
    assert not result.duplicate_batches
    assert result.chart is not None and result.chart.stat().st_size > 10_000
    assert "EQUAL" in demo.summary(result)
