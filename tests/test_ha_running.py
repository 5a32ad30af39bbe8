"""Running monitors on a real ZooKeeper: one active at a time, hand-over, fencing, suspension stops serving."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient

from canal.client import ClientIdentity
from canal.config import InstanceConfig, MasterConfig
from canal.errors import FencedWriteError, NotRunningError
from canal.ha import ClientRunningMonitor, ClusterRegistration, ServerRunningMonitor
from canal.instance import Instance
from canal.meta import zkpaths
from canal.meta.fence import ZkFence, fenced_commit
from canal.testing.fake import FakeMysql
from canal.testing.plugin import ZooKeeperChroot
from canal.testing.services import ZooKeeperServer

pytestmark = pytest.mark.integration


# every monitor callback notifies this one condition, so a test awaits any transition instead of polling
CHANGED = threading.Condition()


class Recorder:
    """Collects a monitor's callbacks and lets a test await them."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []
        self.cond = CHANGED

    def active(self, token: int) -> None:
        with self.cond:
            self.events.append(("active", token))
            self.cond.notify_all()

    def standby(self, reason: str) -> None:
        with self.cond:
            self.events.append(("standby", reason))
            self.cond.notify_all()

    def wait_for(self, kind: str, count: int = 1, timeout: float = 15.0) -> Any:
        with self.cond:
            ok = self.cond.wait_for(lambda: sum(1 for k, _ in self.events if k == kind) >= count, timeout)
            assert ok, f"no {kind!r} #{count} within {timeout}s: {self.events}"
            return [v for k, v in self.events if k == kind][count - 1]


def server_monitor(client: KazooClient, address: str, rec: Recorder, delay: float = 0.3) -> ServerRunningMonitor:
    return ServerRunningMonitor(client, "example", address, on_active=rec.active, on_standby=rec.standby, delay_s=delay)


@pytest.fixture
def three(zookeeper: ZooKeeperChroot) -> Iterator[list[tuple[KazooClient, Recorder, ServerRunningMonitor]]]:
    out = []
    for i in range(3):
        client = zookeeper.client(timeout=2.0)
        rec = Recorder()
        out.append((client, rec, server_monitor(client, f"127.0.0.1:{11111 + i}", rec)))
    yield out
    for _, _, mon in out:
        mon.stop()


def wait_until(predicate: Any, timeout: float = 15.0) -> None:
    """Await a state that a monitor callback brings about (callbacks run after the monitor's state changed)."""
    with CHANGED:
        assert CHANGED.wait_for(predicate, timeout), "condition not reached in time"


def poll_until(predicate: Any, timeout: float = 15.0) -> None:
    """For the one state no callback announces (a finished, unsuccessful attempt to take the node)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def test_exactly_one_process_runs_a_destination(
    three: list[tuple[KazooClient, Recorder, ServerRunningMonitor]],
) -> None:
    for _, _, mon in three:
        mon.start()
    wait_until(lambda: sum(m.is_active for _, _, m in three) == 1)
    active = next(m for _, _, m in three if m.is_active)
    client = three[0][0]
    raw, _stat = client.get(zkpaths.destination_running_path("example"))
    data = json.loads(raw)
    assert data == {"cid": 1, "address": active.address, "active": True}  # canal's node content
    standby = next(m for _, _, m in three if not m.is_active)
    with pytest.raises(NotRunningError):
        standby.check_active()
    assert active.check_active() == active.token


def test_release_hands_over_at_once_and_old_token_is_fenced(
    three: list[tuple[KazooClient, Recorder, ServerRunningMonitor]],
) -> None:
    for _, _, mon in three:
        mon.delay_s = 30.0  # a non-owner would wait this long after a crash; a clean release must not
        mon.start()
    wait_until(lambda: any(m.is_active for _, _, m in three))
    client, rec, first = next(t for t in three if t[2].is_active)
    old_token = first.check_active()
    cursor = "/otter/canal/destinations/example/1001/cursor"
    client.ensure_path(cursor)

    def write(value: bytes, monitor: ServerRunningMonitor, token: int) -> None:
        fenced_commit(client, ZkFence(monitor.epoch_path, token), [lambda t: t.set_data(cursor, value)])

    write(b"from-first", first, old_token)

    started = time.monotonic()
    first.release()
    rec.wait_for("standby")
    wait_until(lambda: any(m.is_active for _, _, m in three if m is not first))
    assert time.monotonic() - started < 10.0
    assert not first.is_active
    second = next(m for _, _, m in three if m.is_active)
    assert second.check_active() > old_token

    with pytest.raises(FencedWriteError):
        write(b"late-write", first, old_token)
    assert client.get(cursor)[0] == b"from-first"
    write(b"from-second", second, second.check_active())
    assert client.get(cursor)[0] == b"from-second"


class ReadRecorder:
    """A real kazoo client that notes every read made through it: (what, path, thread)."""

    def __init__(self, client: KazooClient) -> None:
        self._client = client
        self.reads: list[tuple[str, str, threading.Thread]] = []

    @property
    def threads(self) -> list[threading.Thread]:
        return [thread for _, _, thread in self.reads]

    def _noted(self, name: str) -> Any:
        method = getattr(self._client, name)

        def read(path: str, *args: Any, **kwargs: Any) -> Any:
            self.reads.append((name.removesuffix("_async"), path, threading.current_thread()))
            return method(path, *args, **kwargs)

        return read

    def __getattr__(self, name: str) -> Any:
        if name in ("get", "exists", "get_children", "get_async", "exists_async", "get_children_async"):
            return self._noted(name)
        return getattr(self._client, name)


def test_a_takeover_reads_nothing_on_kazoos_event_thread(zookeeper: ZooKeeperChroot) -> None:
    """kazoo runs every watch callback of a client on one thread, in turn. Its DataWatch read the node there (two
    round trips per event): when ten destinations were released at once, the tenth next owner heard of its release
    only after the other watches' reads -- the longest part of a hand-over's gap on a loaded machine."""
    rec_a, rec_b = Recorder(), Recorder()
    a = server_monitor(zookeeper.client(timeout=2.0), "127.0.0.1:21", rec_a, delay=30.0)
    a.start()
    rec_a.wait_for("active")
    client = zookeeper.client(timeout=2.0)
    event_threads: list[threading.Thread] = []
    fired = threading.Event()

    def note(_event: Any) -> None:
        event_threads.append(threading.current_thread())
        fired.set()

    client.exists("/watched", watch=note)
    client.create("/watched")
    assert fired.wait(10)
    reads = ReadRecorder(client)
    b = server_monitor(reads, "127.0.0.1:22", rec_b, delay=30.0)  # type: ignore[arg-type]
    b.start()
    try:
        poll_until(lambda: b.attempts >= 1)  # it found the node taken and stands by, watching it
        a.release()  # a clean release: b takes over at once (not after its 30 s delay)
        token = rec_b.wait_for("active", timeout=10.0)
        assert token > 0 and b.is_active
        assert reads.threads, "the monitor read nothing through its client"
        assert event_threads[0] not in reads.threads
    finally:
        b.stop()
        a.stop()


def test_the_creation_of_the_running_node_is_the_activation(zookeeper: ZooKeeperChroot) -> None:
    """The running node's creation and the fencing epoch's bump are one transaction (one round trip, where a
    takeover used to take four), from the destination's first activation on: the epoch's version is the token."""
    client = zookeeper.client(timeout=2.0)
    running, epoch = zkpaths.destination_running_path("example"), zkpaths.destination_epoch_path("example")
    for address, rec in (("127.0.0.1:31", Recorder()), ("127.0.0.1:32", Recorder())):
        mon = server_monitor(zookeeper.client(timeout=2.0), address, rec)
        mon.start()
        try:
            token = rec.wait_for("active")
            node = client.exists(running)
            data, stat = client.get(epoch)
            assert node is not None and stat.mzxid == node.czxid  # one transaction: one zxid
            assert stat.version == token and data == address.encode()
        finally:
            mon.stop()  # a clean release: the next one competes at once


def test_a_release_is_one_round_trip(zookeeper: ZooKeeperChroot) -> None:
    """A graceful release deletes the node its activation made without reading it first (the read was one round
    trip of every hand-over's gap, on the old owner)."""
    rec = Recorder()
    reads = ReadRecorder(zookeeper.client(timeout=2.0))
    mon = server_monitor(reads, "127.0.0.1:41", rec)  # type: ignore[arg-type]
    mon.start()
    try:
        rec.wait_for("active")
        reads.reads.clear()
        mon.release()
        # (the watch looks at the node again once it is gone: an exists, after the release)
        assert not [r for r in reads.reads if r[:2] == ("get", mon.path)], reads.reads
        client = zookeeper.client(timeout=2.0)
        assert client.exists(mon.path) is None
        assert client.get(mon.epoch_path)[0] == b"<released>"
    finally:
        mon.stop()


def test_a_release_leaves_alone_a_node_made_anew_at_the_path(zookeeper: ZooKeeperChroot) -> None:
    """The release's one round trip deletes only the node its activation made: one deleted by hand and created again
    by a process that knows no epoch (canal's server) before this process heard of it survives the release."""
    rec = Recorder()
    mon = server_monitor(zookeeper.client(timeout=2.0), "127.0.0.1:42", rec)
    mon.start()
    other = zookeeper.client(timeout=2.0)
    try:
        rec.wait_for("active")
        held, go_on = threading.Event(), threading.Event()

        def hold() -> None:
            held.set()
            go_on.wait(10)

        holding = threading.Thread(target=mon.call, args=(hold,))
        holding.start()
        assert held.wait(10)  # the monitor's worker waits here: the release and the watch's look queue behind it
        releasing = threading.Thread(target=mon.release)
        releasing.start()
        poll_until(lambda: mon._tasks.qsize() >= 1)  # the release is queued first
        other.delete(mon.path)
        other.create(mon.path, b'{"active":true,"address":"127.0.0.1:11111","cid":1}', ephemeral=True)
        go_on.set()
        releasing.join(10)
        holding.join(10)
        assert not releasing.is_alive() and not mon.is_active
        node = other.exists(mon.path)
        assert node is not None and node.ephemeralOwner == other.client_id[0]
    finally:
        go_on.set()
        mon.stop()


def test_an_instance_start_reads_the_subscriptions_once(zookeeper: ZooKeeperChroot, fake_mysql: FakeMysql) -> None:
    """An HA takeover serves once its instance started, and with the meta in ZooKeeper each read of that start is a
    round trip of the hand-over's gap: it asked whether the default client had subscribed, then listed the
    subscriptions (and read each one's filter) twice."""
    fake_mysql.execute("CREATE TABLE shop.t (id INT PRIMARY KEY)")
    master = MasterConfig(address=fake_mysql.address, journal_name="mysql-bin.000001", position=4)
    config = InstanceConfig(
        destination="shop", master=master, meta_mode="zookeeper", zk_hosts=zookeeper.hosts, flush_period_s=0
    )
    reads = ReadRecorder(zookeeper.client(timeout=2.0))
    for start in ("first", "again"):  # the first subscribes the default client; the second finds it
        instance = Instance(config, zk=reads)
        reads.reads.clear()
        instance.start()
        try:
            here = [(what, path) for what, path, thread in reads.reads if thread is threading.current_thread()]
            subscriptions = [r for r in here if r == ("get_children", zkpaths.destination_path("shop"))]
            # the start's own (twice for the first: again after it subscribed), and its restart position's
            assert len(subscriptions) == (3 if start == "first" else 2), here
            assert ("exists", zkpaths.client_path(ClientIdentity("shop", 1001))) not in here
        finally:
            instance.stop()


def test_crash_of_the_active_is_taken_over_after_the_delay(zookeeper: ZooKeeperChroot) -> None:
    doomed_client = zookeeper.client(timeout=2.0)
    survivor_client = zookeeper.client(timeout=2.0)
    rec_a, rec_b = Recorder(), Recorder()
    a = server_monitor(doomed_client, "127.0.0.1:1", rec_a, delay=0.5)
    a.start()
    rec_a.wait_for("active")
    b = server_monitor(survivor_client, "127.0.0.1:2", rec_b, delay=0.5)
    b.start()
    try:
        assert not b.is_active
        # the active process dies: its session closes, the ephemeral node goes, the standby takes over
        doomed_client.stop()
        doomed_client.close()
        token = rec_b.wait_for("active")
        assert token >= 1 and b.is_active
    finally:
        b.stop()


def test_former_owner_regrabs_at_once_after_its_node_is_deleted(zookeeper: ZooKeeperChroot) -> None:
    client = zookeeper.client(timeout=2.0)
    other = zookeeper.client(timeout=2.0)
    rec, rec_other = Recorder(), Recorder()
    mine = server_monitor(client, "127.0.0.1:7", rec, delay=30.0)
    theirs = server_monitor(other, "127.0.0.1:8", rec_other, delay=30.0)
    mine.start()
    first = rec.wait_for("active")
    theirs.start()
    poll_until(lambda: theirs.attempts >= 1)  # it has seen the node taken
    try:
        other.delete(zkpaths.destination_running_path("example"))  # e.g. an operator removed it
        rec.wait_for("standby")
        second = rec.wait_for("active", count=2, timeout=10.0)  # far less than the 30 s others must wait
        assert second > first
        assert not theirs.is_active
    finally:
        theirs.stop()
        mine.stop()


def test_suspended_session_stops_serving_at_once_and_resumes_only_as_owner() -> None:
    with ZooKeeperServer() as zk:
        client = KazooClient(hosts=zk.hosts, timeout=4.0)
        client.start(10)
        rec = Recorder()
        mon = server_monitor(client, "127.0.0.1:9", rec)
        try:
            mon.start()
            first = rec.wait_for("active")
            zk.pause()  # the connection stalls: kazoo reports SUSPENDED
            reason = rec.wait_for("standby", timeout=20)
            assert "suspended" in reason
            with pytest.raises(NotRunningError):
                mon.check_active()
            zk.resume()  # same session comes back: the node is still ours, so it serves again with a new token
            second = rec.wait_for("active", count=2, timeout=20)
            assert second > first
        finally:
            if zk.is_paused:
                zk.resume()
            mon.stop()
            client.stop()
            client.close()


def test_client_running_monitor_allows_one_consumer_per_client_id(zookeeper: ZooKeeperChroot) -> None:
    recs = [Recorder(), Recorder()]
    mons = [
        ClientRunningMonitor(
            zookeeper.client(timeout=2.0), "example", 1001, f"10.0.0.{i}:1", on_active=r.active, on_standby=r.standby
        )
        for i, r in enumerate(recs)
    ]
    for m in mons:
        m.start()
    try:
        wait_until(lambda: sum(m.is_active for m in mons) == 1)
        active = next(m for m in mons if m.is_active)
        raw, _ = zookeeper.client().get(zkpaths.client_running_path(ClientIdentity("example", 1001)))
        assert json.loads(raw)["clientId"] == 1001
        active.release()
        wait_until(lambda: any(m.is_active for m in mons if m is not active))
    finally:
        for m in mons:
            m.stop()


def test_cluster_registration_is_ephemeral_and_recreated(zookeeper: ZooKeeperChroot) -> None:
    client = zookeeper.client(timeout=2.0)
    reg = ClusterRegistration(client, "127.0.0.1:11111", ["example"])
    reg.start()
    observer = zookeeper.client()
    assert observer.get_children(zkpaths.CLUSTER_ROOT) == ["127.0.0.1:11111"]
    assert observer.get_children(zkpaths.destination_cluster_path("example")) == ["127.0.0.1:11111"]
    reg.add("other")
    assert observer.exists(zkpaths.destination_cluster_path("other", "127.0.0.1:11111"))
    reg.stop()
    assert observer.get_children(zkpaths.CLUSTER_ROOT) == []


def test_a_failed_activation_gives_the_node_up_so_a_standby_takes_over(zookeeper: ZooKeeperChroot) -> None:
    """If on_active raises (e.g. the instance cannot start), the process must not sit on the running node."""
    failures: list[int] = []

    def broken_active(token: int) -> None:
        with CHANGED:
            failures.append(token)
            CHANGED.notify_all()
        raise RuntimeError("instance could not start")

    rec_a, rec_b = Recorder(), Recorder()
    a = ServerRunningMonitor(
        zookeeper.client(timeout=2.0),
        "example",
        "127.0.0.1:1",
        on_active=broken_active,
        on_standby=rec_a.standby,
        delay_s=30.0,
    )
    b = server_monitor(zookeeper.client(timeout=2.0), "127.0.0.1:2", rec_b, delay=30.0)
    a.start()
    try:
        wait_until(lambda: bool(failures))
        b.start()
        token = rec_b.wait_for("active", timeout=10.0)  # at once: far less than the 30 s delay
        assert token > failures[0]
        assert not a.is_active and a.token is None
    finally:
        b.stop()
        a.stop()


def test_a_failed_activation_is_retried_after_the_delay(zookeeper: ZooKeeperChroot) -> None:
    rec = Recorder()
    calls: list[int] = []

    def fails_once(token: int) -> None:
        calls.append(token)
        if len(calls) == 1:
            raise RuntimeError("instance could not start")
        rec.active(token)

    mon = ServerRunningMonitor(
        zookeeper.client(timeout=2.0),
        "example",
        "127.0.0.1:1",
        on_active=fails_once,
        on_standby=rec.standby,
        delay_s=0.3,
    )
    mon.start()
    try:
        token = rec.wait_for("active", timeout=10.0)
        assert token > calls[0] and mon.is_active
    finally:
        mon.stop()


class FlakyClient:
    """A real kazoo client whose first ``failures`` attempts to create a node raise ConnectionLoss (as a flaky
    network does): a create, or the commit of a transaction that creates one (the monitor's compete)."""

    def __init__(self, client: KazooClient, failures: int) -> None:
        self._client = client
        self.failures = failures
        self.creates = 0

    def _attempt(self) -> None:
        from kazoo.exceptions import ConnectionLoss

        self.creates += 1
        if self.creates <= self.failures:
            raise ConnectionLoss("injected connection loss")

    def create(self, *args: Any, **kwargs: Any) -> Any:
        self._attempt()
        return self._client.create(*args, **kwargs)

    def transaction(self) -> Any:
        flaky, tx = self, self._client.transaction()

        class Transaction:
            creates = False

            def create(self, *args: Any, **kwargs: Any) -> None:
                self.creates = True
                tx.create(*args, **kwargs)

            def commit(self) -> Any:
                if self.creates:
                    flaky._attempt()
                return tx.commit()

            def __getattr__(self, name: str) -> Any:
                return getattr(tx, name)

        return Transaction()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def test_a_failed_compete_step_is_retried_until_it_succeeds(zookeeper: ZooKeeperChroot) -> None:
    """ConnectionLoss inside the compete step used to be logged and dropped: no watch fires for a node nobody
    holds, so the standby never competed again and the destination stayed unserved."""
    rec = Recorder()
    flaky = FlakyClient(zookeeper.client(timeout=2.0), failures=3)
    mon = server_monitor(flaky, "127.0.0.1:2", rec)  # type: ignore[arg-type]
    mon.start()
    try:
        rec.wait_for("active", timeout=10.0)
        assert mon.is_active and flaky.creates == 4
    finally:
        mon.stop()


def test_a_standby_whose_compete_fails_still_takes_over(zookeeper: ZooKeeperChroot) -> None:
    """The active one releases while the standby's ZooKeeper calls fail: the standby keeps trying and takes over."""
    rec_a, rec_b = Recorder(), Recorder()
    a = server_monitor(zookeeper.client(timeout=2.0), "127.0.0.1:3", rec_a)
    a.start()
    rec_a.wait_for("active")
    flaky = FlakyClient(zookeeper.client(timeout=2.0), failures=0)
    b = server_monitor(flaky, "127.0.0.1:4", rec_b)  # type: ignore[arg-type]
    b.start()
    try:
        poll_until(lambda: b.attempts >= 1)  # b found the node taken and stands by (no callback says so)
        flaky.failures = flaky.creates + 2  # its next two creates fail
        a.release()
        token = rec_b.wait_for("active", timeout=10.0)
        assert b.is_active and flaky.creates >= flaky.failures + 1 and token > 0
    finally:
        b.stop()
        a.stop()
