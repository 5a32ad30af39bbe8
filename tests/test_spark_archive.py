"""The Spark JVMs' class archive (:mod:`canal.testing.services.spark_archive`): a JVM maps it only on the class path it
was written with, and a JVM that does not map it starts as if there were none -- so a change of the class path that
the launchers build would cost every Spark test its start-up time without failing anything. The local session's
driver and a standalone daemon map it; its name follows the jars it was written from."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from canal.testing.services import spark_archive

pytestmark = [pytest.mark.spark]


def _written() -> Path:
    archive = spark_archive.driver_archive()
    if archive is None or not archive.is_file():
        pytest.skip(f"no class archive at {archive}: scripts/setup.sh writes it")
    return archive


def _maps(pid: int, archive: Path) -> bool:
    return any(str(archive) in line for line in Path(f"/proc/{pid}/maps").read_text().splitlines())


@pytest.mark.integration
def test_the_local_sessions_driver_maps_the_archive(spark: Any) -> None:
    from pyspark import SparkContext

    archive = _written()
    gateway = SparkContext._gateway
    assert gateway is not None
    assert _maps(gateway.proc.pid, archive), spark.sparkContext.getConf().get("spark.driver.extraJavaOptions")


@pytest.mark.integration
def test_a_standalone_daemon_maps_the_archive() -> None:
    from canal.testing.services import SparkMaster

    archive = _written()
    with SparkMaster() as master:
        assert master.pid is not None
        assert _maps(master.pid, archive)


def test_the_archives_name_follows_the_jars(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "pyspark"
    (home / "jars").mkdir(parents=True)
    jar = home / "jars" / "spark-core_2.13-4.3.0.jar"
    jar.write_bytes(b"one")
    monkeypatch.setattr(spark_archive, "spark_home", lambda: home)
    monkeypatch.setattr(spark_archive, "archive_dir", lambda: tmp_path / "archives")
    first = spark_archive.driver_archive()
    assert first is not None and first == spark_archive.driver_archive()  # the same jars: the same archive
    assert spark_archive.driver_java_options() == spark_archive.TEST_JVM_OPTIONS  # not written: not named
    first.parent.mkdir()
    first.write_bytes(b"")
    assert f"-XX:SharedArchiveFile={first} " in spark_archive.driver_java_options()
    os.utime(jar, ns=(1, 1))  # pyspark reinstalled: a JVM would not map the old archive, and it is not named
    assert spark_archive.driver_archive() != first
    assert spark_archive.driver_java_options() == spark_archive.TEST_JVM_OPTIONS
