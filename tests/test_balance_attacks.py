"""Balance groups attacked the way production does, on a real ZooKeeper, services in this process over fake
masters: an assignment document that is corrupt or of an older format, two processes started at the same instant,
a consumer whose on_revoked hangs while other destinations move, and a member that flaps. (Real processes paused
past their session: tests/test_balance_attack_processes.py.)"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.watchers import DataWatch
from procs.balance_harness import Ownership
from test_balance_zookeeper import SESSION_S, Ledger, Service, Writer, await_ledger, check_callbacks_alternate, configs

from canal.client import ClientIdentity
from canal.config import BalanceConfig, InstanceConfig, MasterConfig
from canal.errors import NotRunningError
from canal.ha.balance import newer_format
from canal.meta import zkpaths
from canal.server import EmbeddedServer
from canal.testing.fake import FakeMysql
from canal.testing.plugin import ZooKeeperChroot
from canal.testing.services import ZooKeeperServer

pytestmark = pytest.mark.integration


@pytest.fixture
def fakes() -> Iterator[list[FakeMysql]]:
    made = [FakeMysql(name=f"atk{i}{threading.get_ident() % 10**6}") for i in range(2)]
    yield made
    for fake in made:
        fake.unregister()


@pytest.mark.parametrize(
    "document",
    [
        pytest.param(b"\x00garbage{", id="corrupt"),
        pytest.param(json.dumps({"version": 0, "owners": {"d00": "m-0000000007"}}).encode(), id="older-format"),
        pytest.param(b"", id="empty"),
    ],
)
def test_an_unreadable_assignment_document_is_replaced_not_a_stalled_group(
    zookeeper: ZooKeeperChroot, fakes: list[FakeMysql], document: bytes
) -> None:
    # an operator's mistake, a half-written restore, a document an older pycanal left: the group must go on (before,
    # every member failed each step on it, retried forever, and no destination was ever assigned)
    m = 6
    writer = Writer(fakes, m)
    writer.write(1)
    zk = zookeeper.client()
    zk.create(zkpaths.balance_assignment_path("default"), document, makepath=True)
    ledger = Ledger()
    services = [Service(f"u{i}", zookeeper, ledger) for i in range(2)]
    owners = Ownership(zk, [c.destination for c in configs(fakes, m)])
    try:
        for service in services:
            service.server.start()
            for config in configs(fakes, m):
                service.server.start_destination(config)
        owners.wait(lambda o: o.settled(s.address for s in services), 30, "balanced over an unreadable document")
        await_ledger(ledger, writer)
        services.append(joiner := Service("u2", zookeeper, ledger))  # a sticky assignment no fresh one equals
        joiner.server.start()
        for config in configs(fakes, m):
            joiner.server.start_destination(config)
        before = owners.wait(lambda o: o.settled(s.address for s in services), 30, "balanced after a join")
        # spoilt while the group runs: it is written again from who holds what, and nothing moves
        t0 = time.monotonic()
        spoilt = zk.set(zkpaths.balance_assignment_path("default"), document).version
        rewritten = threading.Event()

        def seen(_data: bytes | None, stat: ZnodeStat | None) -> bool:
            if stat is not None and stat.version > spoilt:
                rewritten.set()
                return False  # (the watch ends)
            return True

        DataWatch(zk, zkpaths.balance_assignment_path("default"), seen)
        assert rewritten.wait(30), "the spoilt document was not written again"
        after = owners.wait(lambda o: o.settled(s.address for s in services), 30, "the document written again")
        assert after == before and owners.changes_after(t0) == []
        writer.write(1)
        await_ledger(ledger, writer)
    finally:
        for service in services:
            service.server.stop()
    assert dict(ledger.rows) == writer.expected()
    check_callbacks_alternate(services)


def test_only_a_document_of_a_newer_format_is_left_alone() -> None:
    assert newer_format(b'{"version": 2, "owners": {}}')
    for data in (b'{"version": 1}', b'{"version": 0}', b'{"version": true}', b"[]", b"", b"\xff{", b'{"version": "9"}'):
        assert not newer_format(data), data


class _Said(logging.Handler):
    """Sets ``event`` once a record of the logger it is added to contains ``text``."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text, self.event = text, threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.event.set()


def test_a_get_waiting_when_a_hand_over_begins_hands_out_nothing_after_it(
    fake_mysql: FakeMysql, zookeeper: ZooKeeperChroot, caplog: pytest.LogCaptureFixture
) -> None:
    # a consumer without on_revoked (canal serve's) waits in a get when the hand-over begins: the drain saw nothing
    # outstanding and persisted the meta from before the batch that get then handed out, so the next owner delivered
    # it again after this one handled it
    fake_mysql.execute("CREATE TABLE shop.t (id INT PRIMARY KEY)")
    client = ClientIdentity("shop", 1001)
    master = MasterConfig(address=fake_mysql.address, journal_name="mysql-bin.000001", position=4)
    shop = InstanceConfig(destination="shop", master=master, flush_period_s=0)
    said = _Said("no new batches here")
    caplog.set_level(logging.INFO, logger="canal.ha.destination")
    logging.getLogger("canal.ha.destination").addHandler(said)
    first = EmbeddedServer(zk_hosts=zookeeper.hosts, address="a:1", ha_delay_s=30)
    second = EmbeddedServer(zk_hosts=zookeeper.hosts, address="b:1", ha_delay_s=30)
    got: list[object] = []
    try:
        with first, second:
            first.start_destination(shop)
            assert first.wait_serving("shop", 20)
            second.start_destination(shop)
            owners = Ownership(zookeeper.client(), ["shop"])
            owners.wait(lambda o: o.doc is not None and len(o.doc.members) == 2, 20, "two members")
            instance = first.instance("shop")
            # what the store holds before (the CREATE TABLE) handed out and acked first: else the waiting get below
            # could take it at once, before the hand-over began, and leave it outstanding for the drain
            deadline = time.monotonic() + 20
            while not any(
                e.row_change is not None and e.row_change.is_ddl for e in first.get(client, 100, 1.0).entries
            ):
                assert time.monotonic() < deadline, "the CREATE TABLE never came"

            def consume() -> None:
                try:
                    got.append(first.get_without_ack(client, 100, timeout=10.0, linger=0.05))
                except NotRunningError as exc:
                    got.append(exc)

            waiting = threading.Thread(target=consume)
            waiting.start()
            while instance._lock.acquire(blocking=False):  # until the get waits for entries, holding the lock
                instance._lock.release()
                waiting.join(0.01)
            releasing = threading.Thread(target=first.release, args=("shop",))
            releasing.start()
            assert said.event.wait(20), "the hand-over did not begin"
            fake_mysql.insert("shop.t", {"id": 1})  # what the waiting get finds
            waiting.join(20)
            releasing.join(30)
            assert not releasing.is_alive()
            # not handed out here (the waiting get ends empty when the hand-over wakes it, or refused) ...
            assert isinstance(got[0], NotRunningError) or not got[0].entries, got
            assert second.wait_serving("shop", 20)
            while True:  # ... but by the next owner, once
                msg = second.get(client, 100, timeout=2.0, linger=0.05)
                rows = [r.after[0] for e in msg.entries if e.row_change is not None for r in e.iter_rows() if r.after]
                if rows or msg.id == -1:
                    break
            assert rows == [1]
    finally:
        logging.getLogger("canal.ha.destination").removeHandler(said)


def test_an_on_revoked_that_never_returns_does_not_silence_the_later_callbacks(
    zookeeper: ZooKeeperChroot, fakes: list[FakeMysql]
) -> None:
    # the callbacks run one at a time on one thread: an on_revoked that never returned kept every later callback
    # queued behind it for ever -- a destination given back to this process was served (its running node held)
    # with no on_assigned, so nothing consumed it
    Writer(fakes, 2)
    hang = threading.Event()
    assigned: list[str] = []
    said = threading.Condition()

    def on_assigned(dest: str) -> None:
        with said:
            assigned.append(dest)
            said.notify_all()

    balance = BalanceConfig(revoke_timeout_s=1.0)
    first = EmbeddedServer(
        zk_hosts=zookeeper.hosts,
        address="a:1",
        ha_delay_s=0.2,
        balance=balance,
        on_assigned=on_assigned,
        on_revoked=lambda d: hang.wait(),  # a service's bug: it never returns
    )
    second = EmbeddedServer(zk_hosts=zookeeper.hosts, address="b:1", ha_delay_s=0.2, balance=balance)
    owners = Ownership(zookeeper.client(), ["d00", "d01"])
    try:
        first.start()
        for config in configs(fakes, 2):
            first.start_destination(config)
        with said:
            assert said.wait_for(lambda: len(assigned) == 2, 20)
        second.start()
        for config in configs(fakes, 2):
            second.start_destination(config)
        moved = owners.wait(lambda o: o.settled(["a:1", "b:1"]), 30, "one destination handed over")
        gone = next(d for d, h in moved.items() if h == "b:1")  # its on_revoked hangs in the first process
        second.stop()  # it comes back to the first
        owners.wait(lambda o: o.holders[gone] == "a:1", 30, "the destination back")
        with said:
            assert said.wait_for(lambda: assigned.count(gone) == 2, 10), assigned
    finally:
        hang.set()
        second.stop()
        first.stop()


@pytest.fixture
def private_zookeeper() -> Iterator[ZooKeeperChroot]:
    """A ZooKeeper of this test's own, which it kills, restarts or pauses by pid (the chroot ``/t``)."""
    with ZooKeeperServer() as server:
        admin = KazooClient(hosts=server.hosts, timeout=10.0)
        admin.start(timeout=10.0)
        admin.ensure_path("/t")
        admin.stop()
        admin.close()
        chroot = ZooKeeperChroot(server=server, chroot="/t")
        try:
            yield chroot
        finally:
            if server.is_paused:
                server.resume()
            chroot.close()


def _until(predicate: Callable[[], bool], timeout: float) -> bool:
    """Whether ``predicate`` came true within ``timeout`` s, looked at every 20 ms (for a state no event tells)."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():
        if time.monotonic() > deadline:
            return False
        pause.wait(0.02)
    return True


@pytest.mark.parametrize("how", ["restarted", "paused"])
def test_a_group_comes_back_whole_after_zookeeper_was_down(
    private_zookeeper: ZooKeeperChroot, fakes: list[FakeMysql], how: str
) -> None:
    # killed and started again (the sessions survive: ZooKeeper gives them a new timeout), or paused past the
    # session timeout (on SIGCONT it expires the sessions it reaches before their clients reconnect: those processes
    # join again as new members; measured: all, some or none of the two, run to run)
    zookeeper = private_zookeeper
    server = zookeeper.server
    assert isinstance(server, ZooKeeperServer)
    m = 4
    writer = Writer(fakes, m)
    writer.write(1)
    ledger = Ledger()
    services = [Service(f"z{i}", zookeeper, ledger) for i in range(2)]
    try:
        for service in services:
            service.server.start()
            for config in configs(fakes, m):
                service.server.start_destination(config)
        owners = Ownership(zookeeper.client(), [c.destination for c in configs(fakes, m)])
        owners.wait(lambda o: o.settled(s.address for s in services), 30, "balanced")
        await_ledger(ledger, writer)
        if how == "restarted":
            server.kill()
        else:
            server.pause()
        writer.write(1)  # while ZooKeeper is down
        for service in services:
            assert _until(lambda s=service: s.server.zookeeper_connected is False, 30), "the session not suspended"
        if how == "restarted":
            server.start()
        else:
            threading.Event().wait(SESSION_S + 1.0)  # the partition's length (not synchronisation)
            server.resume()
        # the watches saw nothing while ZooKeeper was down: the group still looks settled, so that is no sign it
        # came back. A row written once every process is connected again can only be delivered by an activation
        # begun after the suspension (a suspended session stops serving at once): every destination's is the sign
        for service in services:
            assert _until(lambda s=service: s.server.zookeeper_connected is True, 60), "the session not back"
        writer.write(1)
        await_ledger(ledger, writer, 60)
        owners.wait(lambda o: o.settled(s.address for s in services), 60, f"balanced after ZooKeeper {how}")
    finally:
        for service in services:
            service.server.stop()
    # nothing lost; what was acked and not yet flushed when the sessions ended may come again (HA redelivery)
    for dest, rows in writer.expected().items():
        assert sorted(set(ledger.rows[dest])) == rows, dest


def test_a_session_suspended_during_on_revoked_is_a_loss_not_a_hand_over(
    private_zookeeper: ZooKeeperChroot, fake_mysql: FakeMysql
) -> None:
    # the running node outlived the release: the session came back (within its timeout), the node was still its,
    # and this process no longer wanted it -- nobody served the destination until the process ended. And the
    # hand-over counted a move out (and logged "handed over") though its activation had ended with the suspension
    zookeeper = private_zookeeper
    server = zookeeper.server
    assert isinstance(server, ZooKeeperServer)
    fake_mysql.execute("CREATE TABLE shop.t (id INT PRIMARY KEY)")
    master = MasterConfig(address=fake_mysql.address, journal_name="mysql-bin.000001", position=4)
    shop = InstanceConfig(destination="shop", master=master)
    revoking, go_on = threading.Event(), threading.Event()

    def on_revoked(dest: str) -> None:
        revoking.set()
        go_on.wait(30)

    first = EmbeddedServer(zk_hosts=zookeeper.hosts, address="a:1", ha_delay_s=0.2, on_revoked=on_revoked)
    second = EmbeddedServer(zk_hosts=zookeeper.hosts, address="b:1", ha_delay_s=0.2)
    try:
        with first, second:
            first.start_destination(shop)
            assert first.wait_serving("shop", 20)
            second.start_destination(shop)
            owners = Ownership(zookeeper.client(), ["shop"])
            owners.wait(lambda o: o.doc is not None and len(o.doc.members) == 2, 20, "two members")
            releasing = threading.Thread(target=first.release, args=("shop",))
            releasing.start()
            assert revoking.wait(20)
            server.pause()  # the session is suspended while on_revoked runs: the activation ends here ...
            try:
                assert _until(lambda: first.zookeeper_connected is False, 20)
                go_on.set()  # ... and the hand-over ends while ZooKeeper cannot be reached
                releasing.join(30)
                assert not releasing.is_alive()
            finally:
                server.resume()
            # the same session comes back: the running node it still holds must go, or nobody ever serves "shop"
            assert second.wait_serving("shop", 20)
            state = first.balance_state()
            assert (state.moves_in, state.moves_out, state.losses) == (1, 0, 1), state
    finally:
        go_on.set()
