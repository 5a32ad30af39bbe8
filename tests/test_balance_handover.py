"""One hand-over on a real ZooKeeper, step by step: while on_revoked runs, new batches are refused and the batch in
hand can still be acked, and the next owner starts right after it; an on_revoked that never returns delays the
hand-over by revoke_timeout_s only, and what it held unacked is delivered again; a batch held without callbacks is
waited for. Also the balance settings: their keys, their checks, and the assignment document's and member nodes'
readers refusing what they cannot read."""

from __future__ import annotations

import threading
import time

import pytest
from procs.balance_harness import Ownership

from canal.client import ClientIdentity
from canal.config import BalanceConfig, InstanceConfig, MasterConfig, ServerConfig, to_balance_config
from canal.errors import ConfigError, HAError, NotRunningError
from canal.ha.assign import Placement
from canal.ha.balance import AssignmentDoc, member_bytes, parse_member
from canal.protocol import EntryType, Message
from canal.server import EmbeddedServer
from canal.testing.fake import FakeMysql
from canal.testing.plugin import ZooKeeperChroot

CLIENT = ClientIdentity("shop", 1001)


def config(fake: FakeMysql) -> InstanceConfig:
    return InstanceConfig(
        destination="shop",
        master=MasterConfig(address=fake.address, journal_name="mysql-bin.000001", position=4),
        flush_period_s=0,
    )


def ids(msg: Message) -> list[int]:
    return [
        row.after[0]
        for e in msg.entries
        if e.entry_type is EntryType.ROWDATA and e.row_change is not None and not e.row_change.is_ddl
        for row in e.iter_rows()
        if row.after is not None
    ]


def first_rows(server: EmbeddedServer) -> list[int]:
    """The rows of the next batch holding rows (each get waits up to 2 s)."""
    while True:
        msg = server.get(CLIENT, 100, timeout=2.0, linger=0.05)
        if msg.id == -1 or ids(msg):
            return ids(msg)


def await_members(zookeeper: ZooKeeperChroot, count: int) -> None:
    """Until the group's assignment was computed for ``count`` members (a ZooKeeper watch)."""
    owners = Ownership(zookeeper.client(), ["shop"])
    owners.wait(lambda o: o.doc is not None and len(o.doc.members) == count, 20, f"{count} members")


def held_batch(server: EmbeddedServer, fake: FakeMysql, row: int) -> Message:
    """A batch holding ``row``, handed out and not acked (what came before it acked)."""
    fake.insert("shop.t", {"id": row})
    while True:
        msg = server.get_without_ack(CLIENT, 100, timeout=2.0, linger=0.05)
        if row in ids(msg):
            return msg
        if msg.id != -1:
            server.ack(CLIENT, msg.id)


@pytest.mark.integration
def test_on_revoked_finishes_the_batch_in_hand_and_the_next_owner_starts_after_it(
    fake_mysql: FakeMysql, zookeeper: ZooKeeperChroot
) -> None:
    fake_mysql.execute("CREATE TABLE shop.t (id INT PRIMARY KEY)")
    seen: list[str] = []
    held: list[Message] = []

    def revoked(dest: str) -> None:
        # the destination is being handed over: no new batch here, the one in hand is still ours to ack
        with pytest.raises(NotRunningError, match="being handed over"):
            first.get_without_ack(CLIENT, 10)
        first.ack(CLIENT, held[0].id)
        seen.append(f"revoked {dest}")

    first = EmbeddedServer(zk_hosts=zookeeper.hosts, address="a:1", ha_delay_s=30, on_revoked=revoked)
    second = EmbeddedServer(
        zk_hosts=zookeeper.hosts, address="b:1", ha_delay_s=30, on_assigned=lambda d: seen.append(f"assigned {d}")
    )
    with first, second:
        first.start_destination(config(fake_mysql))
        assert first.wait_serving("shop", 20)
        held.append(held_batch(first, fake_mysql, 1))
        second.start_destination(config(fake_mysql))  # one destination, two members: it stays where it is
        await_members(zookeeper, 2)
        assert first.serving() == {"shop"} and not second.serving()
        fake_mysql.insert("shop.t", {"id": 2})
        first.release("shop")  # returns once handed over
        assert seen[0] == "revoked shop"
        assert second.wait_serving("shop", 20)  # at once: the former owner released it (no ha_delay_s)
        assert first_rows(second) == [2]  # right after the acked batch: row 1 is not delivered again
        assert seen == ["revoked shop", "assigned shop"]
        with pytest.raises(NotRunningError):
            first.get_without_ack(CLIENT, 10)


@pytest.mark.integration
def test_an_on_revoked_that_hangs_delays_the_hand_over_by_the_timeout_only(
    fake_mysql: FakeMysql, zookeeper: ZooKeeperChroot
) -> None:
    fake_mysql.execute("CREATE TABLE shop.t (id INT PRIMARY KEY)")
    hang = threading.Event()
    balance = BalanceConfig(revoke_timeout_s=1.0)
    first = EmbeddedServer(zk_hosts=zookeeper.hosts, address="a:1", balance=balance, on_revoked=lambda d: hang.wait(60))
    second = EmbeddedServer(zk_hosts=zookeeper.hosts, address="b:1", balance=balance)
    try:
        with first, second:
            first.start_destination(config(fake_mysql))
            assert first.wait_serving("shop", 20)
            held_batch(first, fake_mysql, 1)  # never acked
            second.start_destination(config(fake_mysql))
            await_members(zookeeper, 2)
            began = time.monotonic()
            first.release("shop")
            took = time.monotonic() - began
            assert 1.0 <= took < 10.0, took
            assert second.wait_serving("shop", 20)
            assert first_rows(second) == [1]  # not acked: delivered again
            hang.set()
    finally:
        hang.set()


@pytest.mark.integration
def test_without_callbacks_a_hand_over_waits_for_the_batch_in_hand(
    fake_mysql: FakeMysql, zookeeper: ZooKeeperChroot
) -> None:
    fake_mysql.execute("CREATE TABLE shop.t (id INT PRIMARY KEY)")
    first = EmbeddedServer(zk_hosts=zookeeper.hosts, address="a:1")
    second = EmbeddedServer(zk_hosts=zookeeper.hosts, address="b:1")
    with first, second:
        first.start_destination(config(fake_mysql))
        assert first.wait_serving("shop", 20)
        batch = held_batch(first, fake_mysql, 1)
        second.start_destination(config(fake_mysql))
        await_members(zookeeper, 2)
        releasing = threading.Thread(target=first.release, args=("shop",))
        releasing.start()
        # the consumer's gets are refused from the moment the hand-over began; it acks the batch it holds
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                first.get_without_ack(CLIENT, 10, timeout=0.05)  # empty until the hand-over begins
            except NotRunningError as exc:
                assert "being handed over" in str(exc)
                break
        else:
            raise AssertionError("the hand-over did not begin")
        first.ack(CLIENT, batch.id)
        releasing.join(30)
        assert not releasing.is_alive()
        assert second.wait_serving("shop", 20)
        fake_mysql.insert("shop.t", {"id": 2})
        assert first_rows(second) == [2]


@pytest.mark.integration
def test_a_get_waiting_for_entries_ends_when_the_hand_over_begins(
    fake_mysql: FakeMysql, zookeeper: ZooKeeperChroot
) -> None:
    # a service's consumer waits in a get with a long timeout, and its on_revoked stops it and waits for it to
    # return: the get waited out its timeout (here 20 s) before the hand-over could go on -- part of every gap
    fake_mysql.execute("CREATE TABLE shop.t (id INT PRIMARY KEY)")
    stop = threading.Event()
    returned: list[object] = []

    def consume() -> None:
        while not stop.is_set():
            try:
                msg = first.get_without_ack(CLIENT, 100, timeout=20.0)
            except NotRunningError as exc:
                returned.append(exc)
                return
            if msg.id != -1:
                first.ack(CLIENT, msg.id)
        returned.append("stopped")

    consumer = threading.Thread(target=consume, daemon=True)

    def revoked(dest: str) -> None:
        stop.set()
        consumer.join(30)

    first = EmbeddedServer(zk_hosts=zookeeper.hosts, address="a:1", ha_delay_s=30, on_revoked=revoked)
    second = EmbeddedServer(zk_hosts=zookeeper.hosts, address="b:1", ha_delay_s=30)
    with first, second:
        first.start_destination(config(fake_mysql))
        assert first.wait_serving("shop", 20)
        consumer.start()
        store = first.instance("shop").store
        deadline = time.monotonic() + 20
        while store.waiting_consumers == 0:  # the consumer waits in its get (no event to await)
            assert time.monotonic() < deadline, "the consumer never waited in a get"
            time.sleep(0.01)
        second.start_destination(config(fake_mysql))
        await_members(zookeeper, 2)
        began = time.monotonic()
        first.release("shop")
        took = time.monotonic() - began
        assert took < 5.0, took  # not the get's 20 s
        # the get returned: empty, or refusing what the store held (put back for the next owner)
        assert not consumer.is_alive() and len(returned) == 1
        assert returned[0] == "stopped" or "being handed over" in str(returned[0]), returned
        assert second.wait_serving("shop", 20)
        fake_mysql.insert("shop.t", {"id": 1})
        assert first_rows(second) == [1]


def test_balance_settings_read_from_canal_properties_and_their_checks() -> None:
    server = ServerConfig.from_properties(
        "canal.destinations = shop\n"
        "pycanal.ha.balance = false\n"
        "pycanal.ha.balance.group = shops\n"
        "pycanal.ha.max.destinations = 3\n"
        "pycanal.ha.revoke.timeout = 7.5\n"
    )
    assert server.balance == BalanceConfig(enabled=False, group="shops", max_destinations=3, revoke_timeout_s=7.5)
    assert ServerConfig().balance == BalanceConfig()  # on, group default, no cap
    for text, key in (
        ("pycanal.ha.max.destinations = -1\n", "pycanal.ha.max.destinations"),
        ("pycanal.ha.balance.group = a/b\n", "pycanal.ha.balance.group"),
        ("pycanal.ha.revoke.timeout = 0\n", "pycanal.ha.revoke.timeout"),
        ("pycanal.ha.balance = maybe\n", "pycanal.ha.balance"),
    ):
        with pytest.raises(ConfigError) as caught:
            ServerConfig.from_properties(text)
        assert caught.value.key == key, text
    instance = InstanceConfig.from_properties(
        "canal.instance.master.address = 127.0.0.1:3306\npycanal.instance.preferred.hosts = 10.0.0.5, db-host\n",
        destination="shop",
    )
    assert instance.preferred_hosts == ("10.0.0.5", "db-host")
    assert InstanceConfig.from_properties(instance.to_properties(), destination="shop").preferred_hosts == (
        "10.0.0.5",
        "db-host",
    )
    assert to_balance_config(None) == to_balance_config(True) == BalanceConfig()
    assert not to_balance_config(False).enabled
    with pytest.raises(ConfigError):
        to_balance_config("yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        EmbeddedServer(zk_hosts="127.0.0.1:1", balance=3)  # type: ignore[arg-type]


def test_unreadable_balance_nodes_are_typed_errors() -> None:
    with pytest.raises(HAError, match="document version"):
        AssignmentDoc.from_bytes(b'{"version": 99}')
    with pytest.raises(HAError, match="unreadable balance assignment"):
        AssignmentDoc.from_bytes(b"not json")
    with pytest.raises(HAError, match="member node m-1"):
        parse_member("m-1", b'{"address": "a:1"}')
    doc = AssignmentDoc({"m-1": ("a:1", 3)}, ("d9",), {"d1": "m-1", "d9": None}, {"m-1": 1}, {"d1": "m-1"})
    assert AssignmentDoc.from_bytes(doc.to_bytes()) == doc
    data = member_bytes("a:1", {"d1": Placement("u@h:1", ("h2",))}, max_destinations=2, leaving=True, declined=["d1"])
    member = parse_member("m-1", data)
    assert (member.address, member.max_destinations, member.leaving, member.declined) == ("a:1", 2, True, {"d1"})
    assert member.destinations == {"d1": Placement("u@h:1", ("h2",))}
