"""The private Spark standalone cluster: a driver on it runs tasks on both workers, and a worker cannot see the
driver's temporary directory (its own mount namespace), as on separate hosts. And the mirror written by Spark tasks
on it: a root in that directory is refused with a typed error before any task writes (the tables would land on the
workers' disks); a root every process reaches is written by the tasks and reads back as the source. And the pipeline
as deployed: the source's spool and the mirror's tables in the object store (the private S3-compatible server), an
initial snapshot read by the executors, the driver killed and a new one going on from its checkpoint -- every
mirror table equals ``SELECT``.

The drivers run in subprocesses: this test process may already hold the suite's local SparkSession, and one Python
process has one SparkContext.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from canal.spark import DeltaMirror
from canal.spark.testing import SHOP_TABLES, ShopWorkload, compare_tables, no_batch_twice
from canal.testing.plugin import MariaDBDatabase
from canal.testing.services import MariaDBServer, S3Server, SparkCluster
from tests.test_spark_source import _children as children
from tests.test_spark_source import _wait_gone as wait_gone

pytestmark = [pytest.mark.integration, pytest.mark.spark]

_DRIVER = r"""
import json, os, sys, tempfile, time
import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark import BarrierTaskContext
from canal.spark import DeltaMirror, MirrorUnreachableError
from canal.lake.forms.changes import entries_to_batch
from tests.procs.mirror_writer import TABLES, batch

conf, marker, hidden, shared = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
stream, results = json.loads(sys.argv[5]), sys.argv[6]
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

# the pipeline as deployed: the canal source with its spool in the object store, an initial snapshot read in key
# ranges by the executors, foreachBatch(DeltaMirror) whose tasks write the mirror's tables in the object store. The
# results so far go to a file first: the test kills this driver (SIGKILL) once micro-batch 1 is written
with open(results, "w") as fh:
    json.dump(out, fh, default=str)
from canal.spark import register
register(spark)
streamed = DeltaMirror(stream["root"], storage_options=stream["storage"])

import threading
hang = threading.Event()

def mirror_then_mark(df, batch_id):
    streamed(df, batch_id)
    if batch_id == 1:
        with open(stream["written"], "w") as fh:
            fh.write(str(batch_id))
        hang.wait()  # written, not committed: the test SIGKILLs this driver here

changes = spark.readStream.format("canal").options(**stream["options"]).load()
query = changes.writeStream.foreachBatch(mirror_then_mark).option("checkpointLocation", stream["checkpoint"]).start()
query.awaitTermination(300)
"""


_RESTART = r"""
import json, sys, time
from pyspark.sql import SparkSession
from canal.spark import DeltaMirror, register

conf, stream = json.loads(sys.argv[1]), json.loads(sys.argv[2])
builder = SparkSession.builder.appName("pycanal-cluster-restart")
for key, value in conf.items():
    builder = builder.config(key, value)
spark = builder.getOrCreate()
register(spark)
streamed = DeltaMirror(stream["root"], storage_options=stream["storage"])
calls = {}

def count(df, batch_id):
    streamed(df, batch_id)
    calls[batch_id] = calls.get(batch_id, 0) + 1

# from the dead driver's checkpoint to the master's position now, then the query ends
changes = spark.readStream.format("canal").options(**stream["options"]).load()
writer = changes.writeStream.foreachBatch(count).option("checkpointLocation", stream["checkpoint"])
query = writer.trigger(availableNow=True).start()
finished = query.awaitTermination(300)
streamed.close()
print(json.dumps({"finished": finished, "calls": calls}))
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
    spark_cluster: SparkCluster,
    shop: MariaDBDatabase,
    s3_server: S3Server,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, Any]]:
    """One driver on the cluster (its start-up is most of the cost): its tasks' view of the file system, a mirror
    written with a root only the driver sees, then with one every process sees; then the pipeline with the source's
    spool and the mirror in the object store, from an initial snapshot read by the executors, until the test kills
    the driver after micro-batch 1 is written; then more transactions, a DDL among them, and a second driver that
    goes on from the dead one's checkpoint to the master's position."""
    spark_cluster.ensure_running()
    conn = shop.connect()
    workload = ShopWorkload(conn, shop.database, seed=11)
    workload.create()
    workload.preload(150)  # there before the pipeline starts: its initial snapshot reads them, in 4 key ranges
    for _ in range(10):
        workload.transaction()
    marker = Path(tempfile.gettempdir()) / f"pycanal-driver-marker-{os.getpid()}"
    marker.write_text("only on the driver's host")
    work = tmp_path_factory.mktemp("cluster")
    hidden = work / "mirror"  # under the temporary directory: only the driver sees it
    shared = Path("/var/tmp") / f"pycanal-cluster-mirror-{uuid.uuid4().hex}"  # outside it: every process does
    assert not str(shared).startswith(tempfile.gettempdir())
    bucket = f"cluster-{uuid.uuid4().hex[:12]}"
    s3_server.create_bucket(bucket)
    storage = s3_server.storage_options()
    stream = {
        "root": f"s3://{bucket}/mirror",
        "storage": storage,
        "checkpoint": str(work / "checkpoint"),  # Spark's checkpoint: the drivers' host
        "written": str(work / "written"),
        "options": {
            "destination": "cluster",
            "master.address": shop.address,
            "master.user": shop.user,
            "master.password": shop.password,
            "filter.regex": rf"{shop.database}\..*",
            "pycanal.snapshot.mode": "initial",
            "snapshot.partitions": "2",  # key ranges of 40 rows, two per micro-batch, read by the executors
            "snapshot.partition.rows": "40",
            "spool.dir": f"s3://{bucket}/spool",
            **{f"spool.storage.{key}": value for key, value in storage.items()},
            "read.timeout": "0.2",
        },
    }
    results = work / "results.json"
    args = [json.dumps(spark_cluster.driver_conf()), str(marker), str(hidden), str(shared), json.dumps(stream)]
    env = {**os.environ, **spark_cluster.driver_env()}
    here = Path(__file__).resolve().parent.parent  # the drivers import tests.procs
    try:
        _kill_after_batch_1([sys.executable, "-c", _DRIVER, *args, str(results)], Path(stream["written"]), env, here)
        out: dict[str, Any] = json.loads(results.read_text())
        for i in range(12):  # while no driver runs: the binlog after the snapshot, a DDL among it
            workload.transaction()
            if i == 4:
                workload.alter()
        restart = [sys.executable, "-c", _RESTART, json.dumps(spark_cluster.driver_conf()), json.dumps(stream)]
        done = subprocess.run(restart, capture_output=True, text=True, timeout=400, check=False, cwd=here, env=env)
        python_side = [line for line in done.stderr.splitlines() if not line.startswith("\tat ")]  # no JVM frames
        assert done.returncode == 0, "\n".join(python_side)[-4000:]
        out.update(json.loads(done.stdout.strip().splitlines()[-1]))
    finally:
        conn.close()
        marker.unlink()
        shutil.rmtree(shared, ignore_errors=True)
    yield {**out, "marker": marker.name, "hidden_root": str(hidden), "stream": stream}


def _kill_after_batch_1(command: list[str], written: Path, env: dict[str, str], cwd: Path) -> None:
    """Run the first driver; SIGKILL it (and wait for its JVM and the source's reader to go) once it has written
    micro-batch 1, before Spark commits it."""
    log = written.with_name("driver.log")
    with log.open("w") as errors:  # a file: a pipe nobody reads would stall the driver once full
        driver = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=errors, env=env, cwd=cwd)
    try:
        deadline = time.monotonic() + 300
        while not written.exists():
            if driver.poll() is not None:
                lines = [line for line in log.read_text().splitlines() if not line.startswith("\tat ")]
                raise AssertionError("the driver exited before micro-batch 1:\n" + "\n".join(lines[-60:]))
            assert time.monotonic() < deadline, "the driver did not write micro-batch 1 in 300 s"
            time.sleep(0.1)  # polling an external process with a deadline
        family = children(driver.pid)
        family += [c for p in list(family) for c in children(p)]
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(30)
        wait_gone(family, 60)  # the JVM exits when its Python driver dies; the reader follows
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()


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


def test_the_pipeline_in_the_object_store_survives_a_killed_driver(
    cluster_run: dict[str, Any], shop: MariaDBDatabase
) -> None:
    """The source's spool and the mirror's tables in the object store, the initial snapshot's key ranges read by
    the executors, the first driver killed after writing micro-batch 1 and before committing it: the second driver
    replays micro-batch 1 (the mirror skips what it had), goes on through the binlog and a DDL to the master's
    position, and every mirror table equals SELECT -- no batch committed twice."""
    result = cluster_run
    assert result["finished"] is True
    assert result["calls"].get("1") == 1 and len(result["calls"]) >= 2, result["calls"]  # 1 replayed, then more
    stream = result["stream"]
    mirror = DeltaMirror(stream["root"], storage_options=stream["storage"])
    conn = shop.connect()
    try:
        comparisons = compare_tables(conn, mirror, shop.database, SHOP_TABLES)
    finally:
        conn.close()
    assert all(c.equal for c in comparisons), [str(c) for c in comparisons if not c.equal]
    no_batch_twice(mirror, shop.database, SHOP_TABLES)


def test_the_cluster_lists_two_alive_workers(spark_cluster: SparkCluster) -> None:
    spark_cluster.ensure_running()
    workers = spark_cluster.master.alive_workers()
    assert sorted(w["port"] for w in workers) == sorted(w.port for w in spark_cluster.workers)
    assert all(w["cores"] == 1 for w in workers)
    assert spark_cluster.master_url == f"spark://127.0.0.1:{spark_cluster.master.port}"


def test_what_the_executors_run_is_shared_from_the_hidden_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkout and its environment in the temporary directory (a clone in /tmp): the worker binds each into its
    tmpfs, read-only, before the tmpfs hides the rest; the paths inside another, outside it or missing are left."""
    from canal.testing.services import SparkMaster, SparkWorker

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    checkout, venv = tmp_path / "clone", tmp_path / "clone" / ".venv"
    tool = tmp_path / "tools.zip"
    for path in (venv, checkout / "src"):
        path.mkdir(parents=True)
    tool.write_bytes(b"PK")
    monkeypatch.setattr(sys, "prefix", str(venv))
    entries = [checkout, checkout / "src", tool, tmp_path / "gone", Path("/usr/lib")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(map(str, entries)))
    worker = SparkWorker(SparkMaster())
    assert worker.hidden == tmp_path.resolve()
    assert worker.shared_paths() == [checkout.resolve(), tool.resolve()]  # the venv and src are in the checkout
    worker.workdir = tmp_path / "worker"
    worker.spark_home, worker._unshare = Path("/opt/spark"), "unshare"
    script = worker._command()[-1]
    view = f"{worker.workdir}/view"
    assert f"mount --bind {checkout} {view}/clone && mount -o remount,bind,ro {view}/clone" in script
    assert f": > {view}/tools.zip && mount --bind {tool} {view}/tools.zip" in script  # a file: bound onto a file
    assert script.index("mount --bind") < script.index(f"mount --move {view} {tmp_path}") < script.index("exec ")


def test_a_worker_that_would_have_to_share_the_whole_hidden_directory_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from canal.errors import ServiceError
    from canal.testing.services import SparkMaster, SparkWorker

    monkeypatch.setenv("PYTHONPATH", tempfile.gettempdir())
    worker = SparkWorker(SparkMaster())
    with pytest.raises(ServiceError, match="they need all of it") as refused:
        worker.start()
    assert tempfile.gettempdir() in str(refused.value)
    assert worker.pid is None and worker.workdir is None and not worker.is_running
