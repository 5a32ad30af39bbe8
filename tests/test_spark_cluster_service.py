"""The private Spark standalone cluster: a driver on it runs tasks on both workers, and a worker cannot see the
driver's temporary directory (its own mount namespace), as on separate hosts. And the mirror written by Spark tasks
on it: a root in that directory is refused with a typed error before any task writes (the tables would land on the
workers' disks); a root every process reaches is written by the tasks and reads back as the source.

The driver runs in a subprocess: this test process may already hold the suite's local SparkSession, and one Python
process has one SparkContext.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from canal.spark import DeltaMirror
from canal.spark.testing import SHOP_TABLES, ShopWorkload, compare_tables, master_position
from canal.testing.plugin import MariaDBDatabase
from canal.testing.services import MariaDBServer, SparkCluster

pytestmark = [pytest.mark.integration, pytest.mark.spark]

_DRIVER = r"""
import json, os, sys, tempfile, time
import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark import BarrierTaskContext
from canal.spark import DeltaMirror, MirrorUnreachableError
from canal.spark.changes import entries_to_batch
from tests.procs.mirror_writer import TABLES, batch

conf, marker, hidden, shared = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
stream = json.loads(sys.argv[5])
builder = SparkSession.builder.appName("pycanal-cluster-test")
for key, value in conf.items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
sc = spark.sparkContext
deadline = time.monotonic() + 60
while sc._jsc.sc().getExecutorMemoryStatus().size() < 3:  # the driver's block manager and two executors'
    if time.monotonic() > deadline:
        raise SystemExit("the executors did not register within 60 s")
    time.sleep(0.1)

def probe(_rows):
    BarrierTaskContext.get().barrier()  # both tasks run at once: one on each single-core executor
    import canal  # the driver's PYTHONPATH reaches the executors' Python workers

    yield (os.readlink("/proc/self/ns/mnt"), os.path.exists(marker), sorted(os.listdir(tempfile.gettempdir())),
           canal.__file__)

# a barrier stage needs every task scheduled together: with two one-core executors, one task on each
seen = sc.parallelize([0, 1], 2).barrier().mapPartitions(probe).collect()
out = {"driver_ns": os.readlink("/proc/self/ns/mnt"), "tasks": seen}

# the mirror: a root only the driver sees is refused; a root every process sees is written by the tasks
first = spark.createDataFrame(pa.table(entries_to_batch(batch(1, {}), "d", 1))).coalesce(1)
try:
    DeltaMirror(hidden)(first, 1)
    out["hidden"] = "applied"
except MirrorUnreachableError as exc:
    out["hidden"] = f"{type(exc).__name__}: {exc}"
mirror = DeltaMirror(shared)
state = {}
for number in range(1, 4):  # one partition (a task writes every table), then two (a table per task), then one
    df = spark.createDataFrame(pa.table(entries_to_batch(batch(number, state), "d", number)))
    mirror(df.coalesce(1) if number % 2 else df.repartition(2), number)
mirror.close()
out["shared"] = {t.table: sorted(map(list, state[t.table].values())) for t in TABLES}
out["read"] = {t.table: sorted([r["id"], str(r["amount"]), r["note"]] for r in mirror.read("shop", t.table).to_pylist())
               for t in TABLES}

# the canal source with its defaults on a cluster (spool.dir under the driver's temporary directory, hidden from the
# executors): foreachBatch fails once after writing micro-batch 1, and the restarted query replays it
from canal.spark import register
register(spark)
streamed = DeltaMirror(stream["root"], on_executors=False)  # the source is under test here, not the mirror's tasks
calls = {}

def crash_once(df, batch_id):
    streamed(df, batch_id)
    calls[batch_id] = calls.get(batch_id, 0) + 1
    if batch_id == 1 and calls[batch_id] == 1:
        raise RuntimeError("crash after the write")

def start(**trigger):
    changes = spark.readStream.format("canal").options(**stream["options"]).load()
    writer = changes.writeStream.foreachBatch(crash_once).option("checkpointLocation", stream["checkpoint"])
    return writer.trigger(**trigger).start() if trigger else writer.start()

began = time.monotonic()
query = start()
try:
    query.awaitTermination(180)
    out["crashed"] = f"no: {calls} after {time.monotonic() - began:.0f} s, {query.lastProgress}"
except Exception as exc:
    out["crashed"] = "crash after the write" in str(exc) or str(exc)[-2000:]
# run to the master's position now and end: processAllAvailable could end while the restarted reader catches up
query = start(availableNow=True)
out["finished"] = query.awaitTermination(180)
query.stop()
streamed.close()
out["calls"] = calls
print(json.dumps(out, default=str))
spark.stop()
"""


@pytest.fixture(scope="module")
def shop(mariadb_server: MariaDBServer) -> Iterator[MariaDBDatabase]:
    """A database of the session's MariaDB holding the shop workload, and the position before it."""
    db = MariaDBDatabase(server=mariadb_server, database=f"cluster_{uuid.uuid4().hex[:8]}")
    mariadb_server.execute(f"CREATE DATABASE `{db.database}`")
    try:
        yield db
    finally:
        mariadb_server.execute(f"DROP DATABASE IF EXISTS `{db.database}`")


@pytest.fixture(scope="module")
def cluster_run(
    spark_cluster: SparkCluster, shop: MariaDBDatabase, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """One driver on the cluster (its start-up is most of the cost): its tasks' view of the file system, a mirror
    written with a root only the driver sees, then with one every process sees, and a streaming query from the
    ``canal`` source, with its defaults, whose foreachBatch fails once after writing."""
    spark_cluster.ensure_running()
    conn = shop.connect()
    start = master_position(conn)
    ShopWorkload(conn, shop.database, seed=11).run(60, alter_at=20)
    conn.close()
    marker = Path(tempfile.gettempdir()) / f"pycanal-driver-marker-{os.getpid()}"
    marker.write_text("only on the driver's host")
    hidden = tmp_path_factory.mktemp("cluster") / "mirror"  # under the temporary directory: only the driver sees it
    shared = Path("/var/tmp") / f"pycanal-cluster-mirror-{uuid.uuid4().hex}"  # outside it: every process does
    assert not str(shared).startswith(tempfile.gettempdir())
    stream = {
        "root": f"{shared}-stream",
        "checkpoint": f"{shared}-checkpoint",  # Spark's checkpoint: every process reaches it, as on a cluster
        "options": {
            "destination": "cluster",
            "master.address": shop.address,
            "master.user": shop.user,
            "master.password": shop.password,
            "master.journal.name": start[0],
            "master.position": str(start[1]),
            "filter.regex": rf"{shop.database}\..*",
            "spool.dir": str(hidden.parent / "spool"),  # the driver's disk only
            "canal.instance.memory.batch.mode": "ITEMSIZE",  # instance batches of 20 entries, micro-batches of 40
            "batch.size": "20",
            "max.entries": "40",
            "read.timeout": "0.2",
        },
    }
    args = [json.dumps(spark_cluster.driver_conf()), str(marker), str(hidden), str(shared), json.dumps(stream)]
    try:
        done = subprocess.run(
            [sys.executable, "-c", _DRIVER, *args],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            cwd=Path(__file__).resolve().parent.parent,  # the driver imports tests.procs
            env={**os.environ, **spark_cluster.driver_env()},
        )
    finally:
        marker.unlink()
        shutil.rmtree(shared, ignore_errors=True)
        shutil.rmtree(stream["checkpoint"], ignore_errors=True)
    python_side = [line for line in done.stderr.splitlines() if not line.startswith("\tat ")]  # no JVM frames
    assert done.returncode == 0, "\n".join(python_side)[-4000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    try:
        yield {**result, "marker": marker.name, "hidden_root": str(hidden), "stream_root": stream["root"]}
    finally:
        shutil.rmtree(stream["root"], ignore_errors=True)


def test_a_job_runs_on_both_workers_which_cannot_see_the_drivers_files(cluster_run: dict[str, Any]) -> None:
    result = cluster_run
    namespaces = {task[0] for task in result["tasks"]}
    assert len(result["tasks"]) == 2
    assert len(namespaces) == 2, f"both tasks ran in one worker: {result}"  # two workers, two mount namespaces
    assert result["driver_ns"] not in namespaces
    assert [task[1] for task in result["tasks"]] == [False, False]  # the driver's file is not there for a task
    assert all(result["marker"] not in task[2] for task in result["tasks"])
    import canal

    assert [task[3] for task in result["tasks"]] == [canal.__file__] * 2  # this canal, not another installed one


def test_a_root_the_executors_cannot_see_is_refused_and_a_shared_one_is_written(cluster_run: dict[str, Any]) -> None:
    result = cluster_run
    hidden = Path(result["hidden_root"])
    assert result["hidden"].startswith(f"MirrorUnreachableError: mirror root {hidden}"), result["hidden"]
    left = sorted(p.name for p in hidden.iterdir())  # the driver's writer lease only: no table, the probe file gone
    assert all(name.startswith("_pycanal_lease.") for name in left), left
    for table, rows in result["shared"].items():
        read = result["read"][table]
        assert [[r[0], Decimal(r[1]), r[2]] for r in rows] == [[r[0], Decimal(r[1]), r[2]] for r in read], table


def test_a_batch_replayed_after_a_crash_needs_no_spool_on_the_executors(
    cluster_run: dict[str, Any], shop: MariaDBDatabase
) -> None:
    """The source's spool is on the driver's disk alone. Micro-batch 1, planned and written but not committed, is
    replayed by the restarted query: its rows come from the driver's planner, as every micro-batch's do, not from a
    task reading the spool (it would not be there), and the mirror equals the source."""
    result = cluster_run
    assert result["crashed"] is True, result["crashed"]
    assert result["finished"] is True
    assert result["calls"]["1"] == 2 and len(result["calls"]) >= 3, result["calls"]
    conn = shop.connect()
    try:
        comparisons = compare_tables(conn, DeltaMirror(result["stream_root"]), shop.database, SHOP_TABLES)
    finally:
        conn.close()
    assert all(c.equal for c in comparisons), [str(c) for c in comparisons if not c.equal]


def test_the_cluster_lists_two_alive_workers(spark_cluster: SparkCluster) -> None:
    spark_cluster.ensure_running()
    workers = spark_cluster.master.alive_workers()
    assert sorted(w["port"] for w in workers) == sorted(w.port for w in spark_cluster.workers)
    assert all(w["cores"] == 1 for w in workers)
    assert spark_cluster.master_url == f"spark://127.0.0.1:{spark_cluster.master.port}"


def test_a_python_environment_the_worker_would_hide_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from canal.errors import ServiceError
    from canal.testing.services import SparkMaster, SparkWorker

    hidden_env = Path(tempfile.gettempdir()) / "some-venv"
    monkeypatch.setattr(sys, "prefix", str(hidden_env))
    worker = SparkWorker(SparkMaster())
    with pytest.raises(ServiceError, match="hides") as refused:
        worker.start()
    assert str(hidden_env) in str(refused.value)
    assert worker.pid is None and worker.workdir is None and not worker.is_running
