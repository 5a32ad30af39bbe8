"""A class-data-sharing archive of a Spark driver JVM's classes (Java's AppCDS), which ``scripts/setup.sh`` writes once
(``python -m canal.testing.services.spark_archive``) and every test driver JVM maps instead of loading, verifying
and linking its ~15,000 classes from the jars again: a local SparkSession's start and first jobs take about half the
CPU with it (measured on 2 cores: 7-8 s of the JVM's CPU against 13-15 s).

A JVM takes an archive only on the class path it was written with (pyspark's ``conf`` directory, then its ``jars``),
which is what ``spark-submit`` gives a driver when ``SPARK_CONF_DIR`` is not set: the local sessions of
:func:`canal.spark.testing.local_spark` and the drivers on a :class:`~canal.testing.services.SparkCluster`. The
archive's name is a digest of what it depends on (the JVM's library, the jars' names, sizes and times, the JVM
options): after an upgrade of either the name changes, the old archive is not found, and the JVMs start as they
would without one until the setup writes the new one. Nothing is required of it: without the archive the options
are the plain :data:`~canal.testing.services.spark.TEST_JVM_OPTIONS`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

from canal.errors import ServiceError
from canal.testing.services.process import SETUP_COMMAND

TEST_JVM_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
"""The JVM options of every Spark JVM the tests start (:mod:`canal.testing.services.spark`'s,
``canal.spark.testing.local_spark``'s), before the archive's: a test's jobs are small and its JVMs short-lived, and
the client compiler only with the serial collector take about a third less CPU than the JVM's defaults (C2 compiling
hot code, parallel GC threads), measured on 2 cores."""


def spark_home() -> Path:
    """The pip ``pyspark`` package directory, which is a whole Spark distribution (``bin``, ``sbin``, ``jars``)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ServiceError(f"the Spark services need pyspark (pycanal's spark extra): run {SETUP_COMMAND}")
    return Path(spec.origin).parent

# Run in a process of its own with the archive's dump option: a session like the tests' (the connectors' jars when
# built, the canal source registered), a job with a shuffle, Arrow both ways, and a streaming query through
# foreachBatch; the JVM writes the classes it loaded when it exits.
_WORKLOAD = r"""
import json, sys, tempfile
from pathlib import Path
from canal.spark import register
from canal.spark.testing import local_spark, stop_spark

spark = local_spark("pycanal-class-archive", extra={"spark.driver.extraJavaOptions": sys.argv[1]})
register(spark)
frame = spark.range(1000).selectExpr("id", "id % 7 AS k", "CAST(id AS STRING) AS s")
frame.groupBy("k").count().collect()
spark.createDataFrame(frame.toPandas()).count()
with tempfile.TemporaryDirectory() as work:
    (Path(work) / "in").mkdir()
    (Path(work) / "in" / "a.json").write_text(json.dumps({"id": 1, "note": "a"}))
    seen = []
    query = (
        spark.readStream.schema("id INT, note STRING").json(str(Path(work) / "in"))
        .writeStream.foreachBatch(lambda df, _batch: seen.extend(df.collect()))
        .option("checkpointLocation", str(Path(work) / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert len(seen) == 1, seen
stop_spark(spark, timeout_s=900)  # the JVM writes the archive as it exits
"""


def _java() -> Path | None:
    """The java ``spark-submit`` runs: ``$JAVA_HOME/bin/java``, else the one on ``PATH``."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def archive_dir() -> Path:
    """Where the archives are kept: beside the Python environment that holds pyspark."""
    return Path(sys.prefix) / "pycanal-jvm-archives"


def driver_archive() -> Path | None:
    """The archive a driver JVM of this environment would map (whether or not it has been written); None without
    java."""
    java = _java()
    if java is None:
        return None
    digest = hashlib.sha256(TEST_JVM_OPTIONS.encode())
    libraries = sorted(java.parent.parent.glob("lib/server/libjvm.so"))
    for path in [*libraries, *sorted((spark_home() / "jars").glob("*.jar"))]:
        stat = path.stat()
        digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return archive_dir() / f"spark-driver-{digest.hexdigest()[:16]}.jsa"


def driver_java_options() -> str:
    """The JVM options of a Spark driver in the tests: :data:`TEST_JVM_OPTIONS`, and the class archive when it has
    been written. A JVM on another class path (a ``SPARK_CONF_DIR`` set) ignores the archive and starts as usual."""
    archive = driver_archive()
    if archive is None or not archive.is_file():
        return TEST_JVM_OPTIONS
    # the archive's notices off: one on another class path would print a warning on the JVM's stdout
    return f"{TEST_JVM_OPTIONS} -XX:SharedArchiveFile={archive} -Xlog:cds=off,cds+dynamic=off"


def write_driver_archive(timeout_s: float = 1800.0) -> Path | None:
    """Write this environment's driver archive unless it is there; remove the archives of earlier jars or JVMs.
    Returns its path (None without java). Raises RuntimeError (with the run's output) when the workload fails."""
    archive = driver_archive()
    if archive is None or archive.is_file():
        return archive
    archive.parent.mkdir(parents=True, exist_ok=True)
    partial = archive.with_suffix(f".{os.getpid()}.partial")
    environment = {key: value for key, value in os.environ.items() if key != "SPARK_CONF_DIR"}
    done = subprocess.run(
        [sys.executable, "-c", _WORKLOAD, f"{TEST_JVM_OPTIONS} -XX:ArchiveClassesAtExit={partial}"],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=environment,
        check=False,
    )
    if done.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        raise RuntimeError(f"the class archive's workload failed ({done.returncode}):\n{done.stderr[-3000:]}")
    partial.rename(archive)
    for old in archive.parent.glob("spark-driver-*.jsa"):
        if old != archive:
            old.unlink(missing_ok=True)
    return archive


if __name__ == "__main__":
    print(write_driver_archive())
