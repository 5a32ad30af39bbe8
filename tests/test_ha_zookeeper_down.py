"""ZooKeeper that cannot be reached, with a real ZooKeeper process the test kills or pauses by pid.

Down at start, ``EmbeddedServer.start()`` raises an ``HAError`` naming the hosts (it raised kazoo's
``KazooTimeoutError``) and leaves nothing running. Down while running, ``stop()`` returns within its
``stop_timeout_s`` (it waited on a ZooKeeper read until ZooKeeper came back: a pod stopped with SIGTERM hung until
it was killed), and leaves no thread of the server behind.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from canal.config import InstanceConfig, MasterConfig
from canal.errors import HAError
from canal.server import EmbeddedServer
from canal.testing.fake import FakeMysql
from canal.testing.services import ZooKeeperServer
from canal.testing.services.process import free_port

pytestmark = pytest.mark.integration


def _threads() -> set[threading.Thread]:
    return set(threading.enumerate())


def _left_behind(before: set[threading.Thread], timeout: float = 5.0) -> list[str]:
    """Threads started since ``before`` that are still alive after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        alive = [t.name for t in _threads() - before if t.is_alive()]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.02)


def test_zookeeper_down_at_start_is_an_ha_error_naming_the_hosts() -> None:
    hosts = f"127.0.0.1:{free_port()}"  # nothing listens there
    before = _threads()
    server = EmbeddedServer(zk_hosts=hosts, zk_timeout_s=1.0)
    began = time.monotonic()
    with pytest.raises(HAError, match=f"cannot reach ZooKeeper at {hosts} within 1 s"):
        server.start()
    assert time.monotonic() - began < 5.0
    assert not server.is_started() and server.zookeeper_connected is None
    assert _left_behind(before) == []  # kazoo's threads stopped with the client


@pytest.fixture
def private_zookeeper() -> Iterator[ZooKeeperServer]:
    with ZooKeeperServer() as zk:
        yield zk


@pytest.mark.parametrize("how", ["killed", "paused"])
def test_stop_is_bounded_while_zookeeper_is_down(
    private_zookeeper: ZooKeeperServer, fake_mysql: FakeMysql, how: str
) -> None:
    zk = private_zookeeper
    fake_mysql.execute("CREATE TABLE shop.t (id INT PRIMARY KEY)")
    before = _threads()
    server = EmbeddedServer(zk_hosts=zk.hosts, zk_timeout_s=4.0, ha_delay_s=0.2, stop_timeout_s=1.0)
    server.start()
    master = MasterConfig(address=fake_mysql.address, journal_name="mysql-bin.000001", position=4)
    server.start_destination(InstanceConfig(destination="d", master=master))
    assert server.wait_serving("d", 20)
    fake_mysql.insert("shop.t", {"id": 1})
    client = server.instance("d").default_client
    msg = server.get_without_ack(client, 100, timeout=2.0, linger=0.05)
    assert msg.id != -1
    server.ack(client, msg.id)  # a cursor acked that the stop would flush
    if how == "killed":
        zk.kill()  # SIGKILL by pid: connections refused
        deadline = time.monotonic() + 10
        while server.zookeeper_connected and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.zookeeper_connected is False
        assert server.metrics() == {}  # suspended: nothing served here, so no destination's series
    else:
        zk.pause()  # SIGSTOP: connections stay open, nothing answers (kazoo notices only after its ping timeout)
    try:
        began = time.monotonic()
        stopping = threading.Thread(target=server.stop, name="test-stop", daemon=True)
        stopping.start()
        stopping.join(30)
        took = time.monotonic() - began
        assert not stopping.is_alive(), "stop() still waits for ZooKeeper"
        assert took < 1.0 + 4.0, took  # stop_timeout_s, then what needs no ZooKeeper
        assert not server.is_started()
        assert _left_behind(before | {stopping}) == []
    finally:
        if how == "paused":
            zk.resume()
