"""The private Spark standalone cluster: a driver on it runs tasks on both workers, and a worker cannot see the
driver's temporary directory (its own mount namespace), as on separate hosts.

The driver runs in a subprocess: this test process may already hold the suite's local SparkSession, and one Python
process has one SparkContext.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from canal.testing.services import SparkCluster

pytestmark = [pytest.mark.integration, pytest.mark.spark]

_DRIVER = r"""
import json, os, sys, tempfile, time
from pyspark.sql import SparkSession
from pyspark import BarrierTaskContext

conf, marker = json.loads(sys.argv[1]), sys.argv[2]
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
print(json.dumps({"driver_ns": os.readlink("/proc/self/ns/mnt"), "tasks": seen}))
spark.stop()
"""


def test_a_job_runs_on_both_workers_which_cannot_see_the_drivers_files(spark_cluster: SparkCluster) -> None:
    spark_cluster.ensure_running()
    marker = Path(tempfile.gettempdir()) / f"pycanal-driver-marker-{os.getpid()}"
    marker.write_text("only on the driver's host")
    try:
        done = subprocess.run(
            [sys.executable, "-c", _DRIVER, json.dumps(spark_cluster.driver_conf()), str(marker)],
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
            env={**os.environ, **spark_cluster.driver_env()},
        )
    finally:
        marker.unlink()
    python_side = [line for line in done.stderr.splitlines() if not line.startswith("\tat ")]  # no JVM frames
    assert done.returncode == 0, "\n".join(python_side)[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    namespaces = {task[0] for task in result["tasks"]}
    assert len(result["tasks"]) == 2
    assert len(namespaces) == 2, f"both tasks ran in one worker: {result}"  # two workers, two mount namespaces
    assert result["driver_ns"] not in namespaces
    assert [task[1] for task in result["tasks"]] == [False, False]  # the driver's file is not there for a task
    assert all(marker.name not in task[2] for task in result["tasks"])
    import canal

    assert [task[3] for task in result["tasks"]] == [canal.__file__] * 2  # this canal, not another installed one


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
