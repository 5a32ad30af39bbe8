"""pytest plugin (entry point ``pytest11: pycanal``): private MariaDB, ZooKeeper, S3, Spark cluster and Spark Connect
fixtures.

Installed with pycanal, so any test suite can use the fixtures without a conftest. Servers start lazily, the first time
a test asks for one, and are stopped by pid when the session (or the test, for ``mariadb_factory``) ends.

Fixtures:

- ``mariadb_server`` (session): a :class:`~canal.testing.services.MariaDBServer` with server id 1.
- ``mariadb`` (function): a :class:`MariaDBDatabase`, a fresh database on ``mariadb_server``, dropped afterwards.
- ``mariadb_factory`` (function): a :class:`MariaDBFactory`; ``mariadb_factory(server_id=None, replica_of=None, **kw)``
  starts another server (a replica with ``replica_of=``); everything it started is stopped after the test.
- ``zookeeper_server`` (session): a :class:`~canal.testing.services.ZooKeeperServer`.
- ``zookeeper`` (function): a :class:`ZooKeeperChroot`, a fresh chroot on ``zookeeper_server``; ``.client()`` gives
  started kazoo clients inside it, stopped after the test.
- ``s3_server`` (session): a :class:`~canal.testing.services.S3Server` (moto), an S3-compatible object store.
- ``s3_bucket`` (function): an :class:`S3Bucket`, a fresh bucket on ``s3_server`` (``.url`` is ``s3://NAME``,
  ``.storage_options`` what ``deltalake`` takes, ``.filesystem()`` a ``pyarrow.fs.S3FileSystem``).
- ``kafka_server`` (session): a :class:`~canal.testing.services.KafkaServer`, a Kafka broker in KRaft mode from the
  jars ``scripts/setup.sh`` fetched (``jars/kafka``); ``.bootstrap`` is ``127.0.0.1:PORT``, ``.create_topic(name,
  partitions)`` makes a topic (skipped, saying why, when the jars are not built).
- ``spark_cluster`` (session): a :class:`~canal.testing.services.SparkCluster`, a standalone master and two workers
  on 127.0.0.1, each worker in its own mount namespace (it cannot see this machine's temporary directory);
  ``.master_url`` is ``spark://127.0.0.1:PORT``.
- ``spark_connect_server`` (session): a :class:`~canal.testing.services.SparkConnectServer`; ``.url`` is
  ``sc://127.0.0.1:PORT``.
- ``spark_connect`` (function): a Spark Connect client session on ``spark_connect_server`` (:func:`connect_session`),
  stopped after the test.
- ``fake_mysql`` (function): a fresh :class:`~canal.testing.fake.FakeMysql` (no server needed) registered under a
  unique name (``fake_mysql.address`` is ``fake://NAME``), unregistered afterwards. Give it FakeMysql keyword
  arguments with ``@pytest.mark.parametrize("fake_mysql", [{"mariadb": True}], indirect=True)``.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import re
import secrets
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import pytest

from canal.testing.fake import FakeMysql
from canal.testing.services import (
    KafkaServer,
    MariaDBServer,
    S3Server,
    SparkCluster,
    SparkConnectServer,
    ZooKeeperServer,
)

if TYPE_CHECKING:
    from kazoo.client import KazooClient
    from pymysql.connections import Connection  # type: ignore[import-untyped,unused-ignore]

    from canal.config import MasterConfig

__all__ = ["MariaDBDatabase", "MariaDBFactory", "S3Bucket", "ZooKeeperChroot", "connect_session"]

# What pyspark's Connect client sets in os.environ and leaves there after stop(); pyspark.sql.utils.is_remote()
# reads it, so a classic SparkSession later in the same process would take itself for a Connect one.
_CONNECT_ENV = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE")

_LOG = logging.getLogger(__name__)

_server_ids = itertools.count(100)  # for mariadb_factory servers; the session server is 1


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "integration: needs real MariaDB / ZooKeeper services")


def _ensure_running(server: MariaDBServer | ZooKeeperServer | S3Server) -> None:
    """Bring a session server back if an earlier test paused or killed it."""
    if server.is_paused:
        server.resume()
    if not server.is_running:
        _LOG.warning("%r was found stopped; restarting it", server)
        server.restart()


def _name_for(request: pytest.FixtureRequest) -> str:
    slug = re.sub(r"\W+", "_", request.node.name).strip("_").lower()[:32]
    return f"t_{slug}_{secrets.token_hex(4)}"


@attrs.define(frozen=True)
class MariaDBDatabase:
    """One test's database on a private MariaDB server."""

    server: MariaDBServer
    database: str

    @property
    def host(self) -> str:
        return self.server.host

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``, the form canal's master address takes."""
        return self.server.address

    @property
    def user(self) -> str:
        """The capture user (SELECT, SHOW VIEW, TRIGGER, REPLICATION SLAVE, REPLICATION CLIENT, BINLOG MONITOR)."""
        return self.server.user

    @property
    def password(self) -> str:
        return self.server.password

    def master(self, start: Sequence[Any] | None = None) -> MasterConfig:
        """A MasterConfig for this server with the capture user, starting at ``(journal, position)`` (e.g. a row of
        ``SHOW MASTER STATUS``) or, without ``start``, at the server's position now."""
        from canal.config import MasterConfig

        journal, position = start[:2] if start is not None else self.execute("SHOW MASTER STATUS")[0][:2]
        return MasterConfig(
            address=self.address,
            username=self.user,
            password=self.password,
            journal_name=str(journal),
            position=int(position),
        )

    def connect(self, *, root: bool = True, **kwargs: Any) -> Connection:
        """A new autocommit pymysql connection to this database (as root unless ``root=False``)."""
        return self.server.connect(self.database, root=root, **kwargs)

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
        """Run one statement as root in this database; the rows it returned."""
        return self.server.execute(sql, params, database=self.database)


class MariaDBFactory:
    """Starts extra MariaDB servers for one test and stops them all afterwards (replicas before masters)."""

    def __init__(self) -> None:
        self.servers: list[MariaDBServer] = []

    def __call__(
        self,
        server_id: int | None = None,
        replica_of: MariaDBServer | None = None,
        port: int | None = None,
        extra_args: Sequence[str] = (),
        **kwargs: Any,
    ) -> MariaDBServer:
        """Start and return a :class:`MariaDBServer`; ``server_id`` defaults to a fresh id (100, 101, ...)."""
        if server_id is None:
            server_id = next(_server_ids)
        server = MariaDBServer(server_id=server_id, replica_of=replica_of, port=port, extra_args=extra_args, **kwargs)
        self.servers.append(server)
        server.start()
        return server

    def stop_all(self) -> None:
        for server in reversed(self.servers):
            try:
                server.stop()
            except Exception:
                _LOG.exception("could not stop %r", server)
        self.servers.clear()


@attrs.define
class ZooKeeperChroot:
    """One test's chroot on a private ZooKeeper server."""

    server: ZooKeeperServer
    chroot: str
    _clients: list[KazooClient] = attrs.field(factory=list, repr=False)

    @property
    def hosts(self) -> str:
        """A kazoo hosts string with the chroot: ``127.0.0.1:PORT/pycanal-<hex>``."""
        return f"{self.server.hosts}{self.chroot}"

    def client(self, timeout: float = 10.0, **kwargs: Any) -> KazooClient:
        """A started KazooClient rooted at the chroot (``timeout`` is the session timeout, seconds); stopped and closed
        after the test."""
        from kazoo.client import KazooClient

        client = KazooClient(hosts=self.hosts, timeout=timeout, **kwargs)
        self._clients.append(client)
        client.start(timeout=max(10.0, timeout))
        return client

    def close(self) -> None:
        """Stop and close every client made by :meth:`client`."""
        for client in self._clients:
            with contextlib.suppress(Exception):
                client.stop()
            with contextlib.suppress(Exception):
                client.close()
        self._clients.clear()


@pytest.fixture(scope="session")
def mariadb_server() -> Iterator[MariaDBServer]:
    """One private MariaDB server (server id 1) for the whole session."""
    server = MariaDBServer(server_id=1)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def mariadb(mariadb_server: MariaDBServer, request: pytest.FixtureRequest) -> Iterator[MariaDBDatabase]:
    """A fresh database on the session MariaDB server, dropped after the test."""
    _ensure_running(mariadb_server)
    db = MariaDBDatabase(server=mariadb_server, database=_name_for(request))
    mariadb_server.execute(f"CREATE DATABASE `{db.database}`")
    try:
        yield db
    finally:
        if mariadb_server.is_paused:
            mariadb_server.resume()
        if mariadb_server.is_running:
            try:
                mariadb_server.execute(f"DROP DATABASE IF EXISTS `{db.database}`")
            except Exception:
                _LOG.exception("could not drop database %s", db.database)


@pytest.fixture
def mariadb_factory() -> Iterator[MariaDBFactory]:
    """``mariadb_factory(server_id=None, replica_of=None, **kw)`` starts a MariaDBServer; all stopped after the test."""
    factory = MariaDBFactory()
    try:
        yield factory
    finally:
        factory.stop_all()


@pytest.fixture(scope="session")
def zookeeper_server() -> Iterator[ZooKeeperServer]:
    """One private ZooKeeper server for the whole session."""
    server = ZooKeeperServer()
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def zookeeper(zookeeper_server: ZooKeeperServer) -> Iterator[ZooKeeperChroot]:
    """A fresh chroot (``/pycanal-<hex>``) on the session ZooKeeper server; its clients are stopped after the test."""
    from kazoo.client import KazooClient

    _ensure_running(zookeeper_server)
    chroot = ZooKeeperChroot(server=zookeeper_server, chroot=f"/pycanal-{secrets.token_hex(6)}")
    admin = KazooClient(hosts=zookeeper_server.hosts, timeout=10.0)
    admin.start(timeout=10.0)
    try:
        admin.ensure_path(chroot.chroot)
    finally:
        admin.stop()
        admin.close()
    try:
        yield chroot
    finally:
        chroot.close()
        if zookeeper_server.is_paused:
            zookeeper_server.resume()
        if zookeeper_server.is_running:
            admin = KazooClient(hosts=zookeeper_server.hosts, timeout=10.0)
            try:
                admin.start(timeout=10.0)
                admin.delete(chroot.chroot, recursive=True)
            except Exception:
                _LOG.warning("could not delete chroot %s", chroot.chroot, exc_info=True)
            finally:
                admin.stop()
                admin.close()


@attrs.define(frozen=True)
class S3Bucket:
    """One test's bucket on the private S3-compatible server."""

    server: S3Server
    name: str

    @property
    def url(self) -> str:
        """``s3://NAME``."""
        return f"s3://{self.name}"

    @property
    def storage_options(self) -> dict[str, str]:
        """What ``deltalake`` takes as ``storage_options`` (endpoint, keys, region, plain HTTP allowed)."""
        return self.server.storage_options()

    def filesystem(self) -> Any:
        """A ``pyarrow.fs.S3FileSystem`` on the server (paths are ``NAME/key``)."""
        from pyarrow.fs import S3FileSystem

        return S3FileSystem(**self.server.pyarrow_options())


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """One private S3-compatible server (moto) for the whole session."""
    server = S3Server()
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_bucket(s3_server: S3Server, request: pytest.FixtureRequest) -> S3Bucket:
    """A fresh bucket on the session S3 server (left there: the server is in memory and ends with the session)."""
    _ensure_running(s3_server)
    name = _name_for(request).replace("_", "-")[:63]
    s3_server.create_bucket(name)
    return S3Bucket(server=s3_server, name=name)


@pytest.fixture(scope="session")
def kafka_server() -> Iterator[KafkaServer]:
    """One private Kafka broker (KRaft) for the whole session; the tests that ask for it skip when the jars are not
    built."""
    from canal.testing import jars

    reason = jars.skip_reason()
    if reason is not None:
        pytest.skip(reason)
    server = KafkaServer()
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator[SparkCluster]:
    """A standalone Spark master and two workers on 127.0.0.1 for the whole session, each worker in its own mount
    namespace."""
    cluster = SparkCluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def spark_connect_server() -> Iterator[SparkConnectServer]:
    """A Spark Connect server (local master) for the whole session."""
    server = SparkConnectServer()
    try:
        server.start()
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def connect_session(url: str) -> Iterator[Any]:
    """A Spark Connect client session on ``url`` (``sc://HOST:PORT``), stopped on exit, and the process environment
    put back as it was: the client marks the whole process as a Connect one and does not undo it."""
    import os

    from pyspark.sql import SparkSession

    before = {name: os.environ.get(name) for name in _CONNECT_ENV}
    session = SparkSession.builder.remote(url).create()
    try:
        yield session
    finally:
        try:
            session.stop()
        finally:
            for name, value in before.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


@pytest.fixture
def spark_connect(spark_connect_server: SparkConnectServer) -> Iterator[Any]:
    """A Spark Connect client session on the session's Connect server, stopped after the test."""
    if not spark_connect_server.is_running:
        spark_connect_server.restart()
    with connect_session(spark_connect_server.url) as session:
        yield session


@pytest.fixture
def fake_mysql(request: pytest.FixtureRequest) -> Iterator[FakeMysql]:
    """A fresh in-memory FakeMysql for this test; indirect parametrization passes FakeMysql keyword arguments."""
    kwargs: dict[str, Any] = dict(getattr(request, "param", None) or {})
    kwargs.setdefault("name", _name_for(request))
    with FakeMysql(**kwargs) as fake:
        yield fake
