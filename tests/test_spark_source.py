"""The ``canal`` streaming source: replay of an uncommitted batch, crashes of foreachBatch, reader and driver."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("deltalake")

from canal.spark import DeltaMirror, register  # noqa: E402
from canal.spark.testing import (  # noqa: E402
    SHOP_TABLES,
    ShopWorkload,
    compare_tables,
    local_spark,
    master_position,
    no_batch_twice,
)
from canal.testing.services import process_state  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.integration]


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    session = local_spark("pycanal-tests")
    register(session)
    yield session
    session.stop()


def source_options(mariadb: Any, start: tuple[str, int], spool: Path) -> dict[str, str]:
    return {
        "destination": "shop",
        "master.address": mariadb.address,
        "master.user": mariadb.user,
        "master.password": mariadb.password,
        "master.journal.name": start[0],
        "master.position": str(start[1]),
        "filter.regex": rf"{mariadb.database}\..*",
        "spool.dir": str(spool),
        "canal.instance.memory.batch.mode": "ITEMSIZE",
        "batch.size": "50",
        "max.entries": "150",
        "read.timeout": "0.2",
    }


def start_query(spark: Any, options: dict[str, str], checkpoint: Path, fn: Any) -> Any:
    register(spark)
    stream = spark.readStream.format("canal").options(**options).load()
    return stream.writeStream.foreachBatch(fn).option("checkpointLocation", str(checkpoint)).start()


def wait_mirrored(query: Any, conn: Any, mirror: DeltaMirror, db: str, deadline_s: float = 90.0) -> None:
    """Process what the source has until every mirror equals its table (or fail at the deadline)."""
    deadline = time.monotonic() + deadline_s
    while True:
        query.processAllAvailable()
        comparisons = compare_tables(conn, mirror, db, SHOP_TABLES)
        if all(c.equal for c in comparisons):
            return
        if time.monotonic() > deadline:
            raise AssertionError("; ".join(str(c) for c in comparisons if not c.equal))


def run_workload(conn: Any, db: str, n: int, *, seed: int = 5, alter_at: int | None = None) -> ShopWorkload:
    work = ShopWorkload(conn, db, seed=seed)
    work.create()
    for i in range(n):
        work.transaction()
        if i == alter_at:
            work.alter()
    return work


def test_replay_of_an_uncommitted_batch_returns_the_same_rows(mariadb: Any, spark: Any, tmp_path: Path) -> None:
    conn = mariadb.connect()
    start = master_position(conn)
    run_workload(conn, mariadb.database, 80, alter_at=40)
    checkpoint, mirror = tmp_path / "ckpt", DeltaMirror(tmp_path / "mirror")
    options = source_options(mariadb, start, tmp_path / "ckpt.canal-spool")
    seen: dict[int, list[list[Any]]] = {}

    def crash_after_write(df: Any, batch_id: int) -> None:
        table = df.toArrow()
        seen.setdefault(batch_id, []).append(table.select(["seq", "keys", "after"]).to_pylist())
        mirror(table, batch_id)
        if batch_id == 2 and len(seen[batch_id]) == 1:
            raise RuntimeError("crash after the Delta write")

    query = start_query(spark, options, checkpoint, crash_after_write)
    with pytest.raises(Exception, match="crash after the Delta write"):
        query.awaitTermination(120)
    assert not query.isActive
    assert len(seen[2]) == 1

    query = start_query(spark, options, checkpoint, crash_after_write)
    try:
        wait_mirrored(query, conn, mirror, mariadb.database)
    finally:
        query.stop()
    # batch 2 was planned but not committed: replayed from the spool, row for row, and skipped by the mirror
    assert len(seen[2]) == 2 and seen[2][0] == seen[2][1] and seen[2][0]
    assert [r.tables for r in mirror.history if r.batch_id == 2][1] and all(
        v == "skipped" for v in [r for r in mirror.history if r.batch_id == 2][1].tables.values()
    )
    assert len(seen) > 3
    no_batch_twice(mirror, mariadb.database, SHOP_TABLES)
    conn.close()
