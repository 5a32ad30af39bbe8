"""A Spark user reads a micro-batch's changes in every images form: from the query's progress (the end offset's
``changes``, :mod:`canal.spark.progress`), through :class:`~canal.spark.ChangeCountListener`, and from the reader
process's exporter (option ``metrics.port``) -- a real local SparkSession over a real MariaDB."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("deltalake")
pytest.importorskip("prometheus_client")

from prometheus_client.parser import text_string_to_metric_families

from canal.spark import ChangeCountListener, DeltaMirror, micro_batch_changes, register
from canal.spark.testing import master_position
from canal.testing.services import free_port

pytestmark = [pytest.mark.spark, pytest.mark.integration]

WRITTEN = {"INSERT": 65, "UPDATE": 20, "DELETE": 10, "ALTER": 1}


def write_changes(mariadb: Any) -> tuple[str, int]:
    """The changes :data:`WRITTEN` counts, in several transactions, after the position returned."""
    conn = mariadb.connect()
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
    start = master_position(conn)
    with conn.cursor() as cur:
        for first in range(0, 60, 10):
            cur.executemany("INSERT INTO t VALUES (%s, %s)", [(i, f"v{i}") for i in range(first, first + 10)])
            conn.commit()
        for i in range(20):
            cur.execute("UPDATE t SET v = %s WHERE id = %s", (f"u{i}", i))
        conn.commit()
        cur.execute("DELETE FROM t WHERE id >= 50")
        conn.commit()
        cur.execute("ALTER TABLE t ADD COLUMN w INT")
        cur.executemany("INSERT INTO t (id, v, w) VALUES (%s, %s, %s)", [(i, "n", i) for i in range(100, 105)])
        conn.commit()
    conn.close()
    return start


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@pytest.mark.parametrize("images", ["packed", "variant", "json"])
def test_a_user_reads_the_changes_written_in_every_images_form(
    mariadb: Any, spark: Any, tmp_path: Path, images: str
) -> None:
    start = write_changes(mariadb)
    port = free_port()
    options = {
        "destination": "counts",
        "master.address": mariadb.address,
        "master.user": mariadb.user,
        "master.password": mariadb.password,
        "master.journal.name": start[0],
        "master.position": str(start[1]),
        "filter.regex": rf"{mariadb.database}\..*",
        "spool.dir": str(tmp_path / "ckpt.canal-spool"),
        "canal.instance.memory.batch.mode": "ITEMSIZE",
        "batch.size": "20",
        "max.entries": "30",
        "read.timeout": "0.2",
        "images": images,
        "metrics.port": str(port),
        "reader.log.level": "INFO",
    }
    mirror = DeltaMirror(tmp_path / "mirror")
    rows_seen: dict[str, int] = {}

    def apply(df: Any, batch_id: int) -> None:
        if images != "packed":  # a row per change: what the user reads in the rows themselves
            for row in df.groupBy("type").count().collect():
                rows_seen[row["type"]] = rows_seen.get(row["type"], 0) + row["count"]
        mirror(df, batch_id)

    register(spark)
    listener = ChangeCountListener()
    spark.streams.addListener(listener)
    query = (
        spark.readStream.format("canal")
        .options(**options)
        .load()
        .writeStream.foreachBatch(apply)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .start()
    )
    try:
        query.processAllAvailable()
        last = query.lastProgress
        assert listener.wait_for(str(query.runId), int(last["batchId"]), timeout=30)
        samples = scrape(f"http://127.0.0.1:{port}/metrics")
    finally:
        query.stop()
        spark.streams.removeListener(listener)
    assert listener.totals() == WRITTEN
    if images != "packed":
        assert rows_seen == WRITTEN
    batches = list(listener.batches)
    assert len(batches) >= 3 and sum(b.rows for b in batches) == sum(WRITTEN.values())
    assert [b.batch_id for b in batches] == sorted({b.batch_id for b in batches})
    assert batches[0].start == "the start" and all(b.end.startswith("mysql-bin.") for b in batches)  # its first
    assert all(b.lag_s is not None and b.lag_s >= 0 for b in batches)
    # the last progress itself carries its micro-batch's changes (numInputRows counts packed rows)
    (read,) = micro_batch_changes(last)
    assert read == batches[-1]
    assert json.loads(last["sources"][0]["endOffset"])["changes"] == read.changes
    # the reader's process serves the same counts, and its instance's series
    dest = (("destination", "counts"),)
    for kind, rows in WRITTEN.items():
        assert samples[("canal_source_changes_total", (("destination", "counts"), ("type", kind)))] == rows
    assert samples[("canal_source_micro_batches_total", dest)] == len(batches)
    assert samples[("canal_instance_running", dest)] == 1.0
    assert samples[("canal_source_delay_seconds", dest)] >= 0
    # the driver's mirror counts what its Spark tasks wrote, from their answers (canal.lake.metrics)
    applied = mirror.metrics()
    assert applied.rows == sum(WRITTEN.values()) and applied.stops == {}
    assert applied.applied_log_file == start[0] and applied.delay_ms is not None
