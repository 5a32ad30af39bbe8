"""Fixtures shared by the test modules (the service fixtures come from pycanal's own pytest plugin)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

_STARTED = pytest.StashKey[float]()

# The files that take longest (Spark drivers on the cluster, pipelines, killed processes), in that order: 88 s down to
# 23 s of serial time each in a whole run (setup included). They are collected first, and the test command hands
# files to its two workers in collection order (--no-loadscope-reorder): started last, a long file would run alone at
# the end while the other worker idles. The order among them matters little (the files after them, most of them
# seconds long, even the workers out to within a few seconds); a file missing here does, once it takes minutes.
SLOW_FILES_FIRST = (
    "test_spark_pipelines.py",
    "test_docs.py",
    "test_spark_cluster_service.py",
    "test_differential_schema_mirror_mariadb.py",
    "test_spark_snapshot.py",
    "test_mirror_staged.py",
    "test_spark_units.py",
    "test_spark_delta_connector.py",
    "test_ha_processes.py",
    "test_balance_attacks.py",
    "test_spark_source.py",
    "test_heal_mariadb.py",
    "test_spark_s3a_checkpoint.py",
    "test_mirror_float_keys.py",
    "test_mirror_s3.py",
    "test_peers_canal_mariadb.py",
    "test_spark_connect_service.py",
    "test_peers_ha_mariadb.py",
    "test_mirror_executors.py",
    "test_mirror_step_faults.py",
    "test_spark_connect_secrets.py",
    "test_monitoring_stalls.py",
    "test_mirror_ddl_mariadb.py",
    "test_mirror_partial_images.py",
    "test_statement_reach_mariadb.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow files first (:data:`SLOW_FILES_FIRST`); every other file after them, in its usual order."""
    rank = {name: i for i, name in enumerate(SLOW_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # a stable sort: tests keep their order


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> None:
    """When the test's time started (pytest-timeout's clock starts here too, before the fixtures are set up)."""
    item.stash[_STARTED] = time.monotonic()


def _timeout_s(item: pytest.Item) -> float:
    """The test's pytest-timeout (its marker, ``--timeout``, the ini file); 0: none."""
    marker = item.get_closest_marker("timeout")
    value: Any = None
    if marker is not None:
        value = marker.args[0] if marker.args else marker.kwargs.get("timeout")
    if value is None:
        value = item.config.getoption("timeout", None)
    if value is None:
        value = item.config.getini("timeout") or 0
    return float(value)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local SparkSession for the whole run (start-up costs ~4.5 s), with the ``canal`` source registered, and the
    connectors' jars (Delta Lake's, Kafka's, S3A's) when ``scripts/setup.sh`` could fetch them: a test that needs them
    asks :func:`needs_jars`."""
    pytest.importorskip("pyspark")
    from canal.spark import register
    from canal.spark.testing import local_spark, stop_spark

    session = local_spark("pycanal-tests")  # with the connectors when they are built
    register(session)
    yield session
    stop_spark(session)  # the JVM too: no process outlives the run


def needs_jars() -> None:
    """Skip the calling test, saying why, when the connectors' jars are not there (``scripts/setup.sh`` without
    Maven)."""
    from canal.testing import jars

    reason = jars.skip_reason()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def binlog_corpus() -> Any:
    """Binlog files a private MariaDB wrote for a varied workload (:mod:`binlog_corpus`), recorded once a session."""
    from binlog_corpus import record_corpus

    return record_corpus()


@pytest.fixture(autouse=True)
def _spark_job_guard(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test using the ``spark`` fixture that runs out of time has its Spark jobs cancelled, with thread dumps, just
    before pytest-timeout would end it (:mod:`spark_guard`): it fails alone, and the session stays usable."""
    timeout = _timeout_s(request.node)
    if "spark" not in request.fixturenames or not timeout:
        yield
        return
    from spark_guard import SparkJobGuard, guard_deadline

    session = request.getfixturevalue("spark")
    started = request.node.stash.get(_STARTED, time.monotonic())
    guard = SparkJobGuard(session, started, guard_deadline(timeout), request.node.nodeid)
    try:
        yield
    finally:
        guard.close()
    if guard.fired_after_s is not None:
        pytest.fail(
            f"{request.node.nodeid}: its Spark jobs were cancelled {guard.fired_after_s:.0f} s into the test, "
            f"before its {timeout:.0f}-s timeout (thread dumps in its captured stderr)",
            pytrace=False,
        )


@pytest.fixture
def sessions(mariadb: Any) -> Iterator[Callable[[], Any]]:
    """New writing sessions on the test's database (a session that prepared an XA transaction can do nothing else
    until its outcome). A test that fails between XA PREPARE and the outcome leaves a prepared transaction holding
    its locks (the database could not be dropped): each is rolled back by the session that prepared it."""
    import pymysql

    opened: list[Any] = []

    def new() -> Any:
        opened.append(mariadb.connect(autocommit=True))
        return opened[-1]

    yield new
    for session in opened:
        with session.cursor() as cur:
            cur.execute("XA RECOVER")
            for row in cur.fetchall():
                with contextlib.suppress(pymysql.err.OperationalError):  # prepared by another session
                    cur.execute(f"XA ROLLBACK '{row[3].decode() if isinstance(row[3], bytes) else row[3]}'")
        session.close()


@pytest.fixture
def shop_instance(fake_mysql: Any) -> Iterator[Any]:
    """A started Instance over the fake binlog of ``CREATE TABLE shop.t (id INT PRIMARY KEY)`` and five inserts
    (ids 0-4): six change rows, from the start of the binlog, no cursor yet."""
    from canal.config import InstanceConfig, MasterConfig
    from canal.instance import Instance

    fake_mysql.execute("CREATE TABLE shop.t (id INT PRIMARY KEY)")
    for i in range(5):
        fake_mysql.insert("shop.t", {"id": i})
    config = InstanceConfig(
        destination="shop",
        master=MasterConfig(address=fake_mysql.address, journal_name="mysql-bin.000001", position=4),
    )
    with Instance(config) as inst:
        yield inst
