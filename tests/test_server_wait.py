"""EmbeddedServer.wait_serving: without HA at once; under HA (real ZooKeeper) only where the running node is held."""

from __future__ import annotations

import attrs
import pytest

from canal.client import ClientIdentity
from canal.config import InstanceConfig, MasterConfig
from canal.errors import NotRunningError, ServerError, UnknownDestinationError
from canal.protocol import EntryType, Message
from canal.server import EmbeddedServer
from canal.testing.fake import FakeMysql
from canal.testing.plugin import ZooKeeperChroot


def config(fake: FakeMysql, destination: str = "shop") -> InstanceConfig:
    return InstanceConfig(
        destination=destination,
        master=MasterConfig(address=fake.address, journal_name="mysql-bin.000001", position=4),
    )


def test_without_ha_a_lazy_destination_is_started_and_serves(fake_mysql: FakeMysql) -> None:
    server = EmbeddedServer()
    server.add_destination(config(fake_mysql), lazy=True)
    with pytest.raises(ServerError):
        server.wait_serving("shop")  # the server itself is not started
    with server:
        assert not server.is_started("shop")
        assert server.wait_serving("shop", timeout=0)
        assert server.is_started("shop")
        with pytest.raises(UnknownDestinationError):
            server.wait_serving("nope")


@pytest.mark.integration
def test_under_ha_only_the_node_holder_serves_and_a_release_hands_over(
    fake_mysql: FakeMysql, zookeeper: ZooKeeperChroot
) -> None:
    fake_mysql.execute("CREATE TABLE shop.t (id INT PRIMARY KEY)")
    fake_mysql.insert("shop.t", {"id": 1})
    first = EmbeddedServer(zk_hosts=zookeeper.hosts, address="first:1", ha_delay_s=0.1, zk_timeout_s=5.0)
    second = EmbeddedServer(zk_hosts=zookeeper.hosts, address="second:2", ha_delay_s=0.1, zk_timeout_s=5.0)
    client = ClientIdentity("shop", 1001)
    with first, second:
        first.start_destination(config(fake_mysql))
        assert first.wait_serving("shop", timeout=20)
        first.subscribe(client)
        second.start_destination(config(fake_mysql))
        assert not second.wait_serving("shop", timeout=0.5)  # standing by: the first holds the running node
        with pytest.raises(NotRunningError):
            second.get_without_ack(client, 10)
        first.release("shop")
        assert second.wait_serving("shop", timeout=20)
        assert not first.is_started("shop")
        second.subscribe(client)
        assert 1 in row_ids(second, client)  # nothing was acked: the new owner delivers the row from the start


def row_ids(server: EmbeddedServer, client: ClientIdentity) -> list[int]:
    """Row ids of shop.t handed out until an empty get (each get waits up to 2 s for entries)."""
    ids: list[int] = []
    while True:
        msg = server.get(client, 100, timeout=2.0, linger=0.05)
        if msg.id == -1:
            return ids
        ids.extend(row_ids_of(msg))


def row_ids_of(msg: Message) -> list[int]:
    return [
        row.after[0]
        for entry in msg.entries
        if entry.entry_type is EntryType.ROWDATA and entry.header.table == "t"
        for row in entry.iter_rows()
        if row.after is not None
    ]


@pytest.mark.integration
def test_an_instance_of_an_earlier_activation_cannot_ack_under_the_next_one(
    fake_mysql: FakeMysql, zookeeper: ZooKeeperChroot
) -> None:
    """A process whose session was suspended and came back (the same session) competes again and is activated
    again, with a new fencing token and a new instance, while the old instance is still stopping. An ack that the
    old instance was in the middle of must not pass: it proves ownership and writes its cursor under its own
    activation's token, not under whatever the process holds now (it would move the cursor under the new instance,
    which then writes its own, older one over it: rows acked once delivered again)."""
    from kazoo.protocol.states import KazooState

    from canal.errors import OwnershipLostError
    from canal.meta import zkpaths

    fake_mysql.execute("CREATE TABLE shop.t (id INT PRIMARY KEY)")
    fake_mysql.insert("shop.t", {"id": 0})
    client = ClientIdentity("shop", 1001)
    server = EmbeddedServer(zk_hosts=zookeeper.hosts, address="only:1", ha_delay_s=0.1, zk_timeout_s=5.0)
    with server:
        server.start_destination(attrs.evolve(config(fake_mysql), flush_period_s=0))  # acks write through
        assert server.wait_serving("shop", timeout=20)
        monitor = server.running_monitor("shop")
        assert monitor is not None
        first = monitor.token
        old = server.instance("shop")
        while 0 not in row_ids_of(
            server.get(client, 100, timeout=2.0, linger=0.05)
        ):  # acked: the cursor is in ZooKeeper
            pass
        fake_mysql.insert("shop.t", {"id": 1})
        fake_mysql.insert("shop.t", {"id": 2})
        while 1 not in row_ids_of(batch := server.get_without_ack(client, 100, timeout=2.0, linger=0.05)):
            if batch.id != -1:
                server.ack(client, batch.id)
        zk = zookeeper.client()
        cursor_before = zk.get(zkpaths.cursor_path(client))[0]
        with old._lock:  # the old instance is busy in a consumer call: its stop waits for it
            monitor._on_state(KazooState.SUSPENDED)  # what kazoo's connection listener does
            monitor._on_state(KazooState.CONNECTED)  # the same session back: compete again
            assert server.wait_serving("shop", timeout=20)
            assert monitor.token is not None and monitor.token > (first or 0)
            with pytest.raises(OwnershipLostError):
                old.ack(batch.id, client)
        assert zk.get(zkpaths.cursor_path(client))[0] == cursor_before
        assert row_ids(server, client)[:1] == [1]  # the new instance delivers the unacked rows again, from row 1
