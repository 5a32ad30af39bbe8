"""Balance groups on a real ZooKeeper, several EmbeddedServers in this process over fake masters: services that consume
the documented way (a consumer thread per destination, started by on_assigned, stopped by on_revoked after it acked
its batch) share the destinations within one; a join moves only its share, onto the new process; a graceful stop and
a release hand over with nothing lost or delivered twice; caps, a process outside the group, moves by hand and the
status and metrics that show it all. (Real processes, MariaDB and kills: tests/test_balance_processes.py.)"""

from __future__ import annotations

import math
import threading
import time
from collections import defaultdict
from collections.abc import Iterator

import pytest
from procs.balance_harness import Ownership

from canal.cli import main as canal_main
from canal.client import ClientIdentity
from canal.config import BalanceConfig, InstanceConfig, MasterConfig
from canal.errors import HAError, NotRunningError
from canal.ha.balance import request_move
from canal.protocol import EntryType
from canal.server import EmbeddedServer
from canal.testing.fake import FakeMysql
from canal.testing.plugin import ZooKeeperChroot

pytestmark = pytest.mark.integration

SESSION_S = 4.0


def configs(fakes: list[FakeMysql], count: int, **kw: object) -> list[InstanceConfig]:
    """``count`` destinations d00, d01, ... each capturing its own table of one fake (alternately)."""
    out = []
    for i in range(count):
        fake = fakes[i % len(fakes)]
        out.append(
            InstanceConfig(
                destination=f"d{i:02d}",
                master=MasterConfig(address=fake.address, journal_name="mysql-bin.000001", position=4),
                filter_regex=rf"shop\.t{i:02d}",
                **kw,  # type: ignore[arg-type]
            )
        )
    return out


class Ledger:
    """Every row each service acked, per destination, in the order acked."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.rows: dict[str, list[int]] = defaultdict(list)

    def add(self, dest: str, ids: list[int]) -> None:
        with self.changed:
            self.rows[dest].extend(ids)
            self.changed.notify_all()

    def count(self) -> int:
        with self.changed:
            return sum(len(v) for v in self.rows.values())


class Service:
    """A service embedding pycanal with callbacks: one consumer thread per destination it serves."""

    def __init__(self, name: str, zookeeper: ZooKeeperChroot, ledger: Ledger, **kw: object) -> None:
        self.name = name
        self.address = f"{name}:1"
        self.ledger = ledger
        self.events: list[tuple[str, str, float]] = []  # (assigned | revoked, destination, t)
        self._stops: dict[str, threading.Event] = {}
        self._threads: dict[str, threading.Thread] = {}
        self.server = EmbeddedServer(
            zk_hosts=zookeeper.hosts,
            address=self.address,
            ha_delay_s=0.2,
            zk_timeout_s=SESSION_S,
            on_assigned=self.assigned,
            on_revoked=self.revoked,
            **kw,  # type: ignore[arg-type]
        )

    def assigned(self, dest: str) -> None:
        self.events.append(("assigned", dest, time.monotonic()))
        stop = self._stops[dest] = threading.Event()
        self._threads[dest] = thread = threading.Thread(target=self.consume, args=(dest, stop), daemon=True)
        thread.start()

    def revoked(self, dest: str) -> None:
        self.events.append(("revoked", dest, time.monotonic()))
        self._stops[dest].set()
        self._threads[dest].join()  # it acks the batch in hand, then ends

    def consume(self, dest: str, stop: threading.Event) -> None:
        client = ClientIdentity(dest, 1001)
        while not stop.is_set():
            try:
                msg = self.server.get_without_ack(client, 50, timeout=0.05)
            except NotRunningError:
                return
            if msg.id == -1:
                continue
            ids = [
                row.after[0]
                for e in msg.entries
                if e.entry_type is EntryType.ROWDATA and e.row_change is not None and not e.row_change.is_ddl
                for row in e.iter_rows()
                if row.after is not None
            ]
            self.server.ack(client, msg.id)
            self.ledger.add(dest, ids)


@pytest.fixture
def fakes() -> Iterator[list[FakeMysql]]:
    made = [FakeMysql(name=f"bal{i}{time.monotonic_ns() % 10**9}") for i in range(2)]
    yield made
    for fake in made:
        fake.unregister()


class Writer:
    """Inserts consecutive ids into each destination's table, in the test's thread."""

    def __init__(self, fakes: list[FakeMysql], count: int) -> None:
        self.fakes, self.count = fakes, count
        self.next = [0] * count
        for i in range(count):
            self.fake(i).execute(f"CREATE TABLE shop.t{i:02d} (id INT PRIMARY KEY)")

    def fake(self, i: int) -> FakeMysql:
        return self.fakes[i % len(self.fakes)]

    def write(self, rounds: int = 1) -> None:
        for _ in range(rounds):
            for i in range(self.count):
                self.fake(i).insert(f"shop.t{i:02d}", {"id": self.next[i]})
                self.next[i] += 1

    @property
    def total(self) -> int:
        return sum(self.next)

    def expected(self) -> dict[str, list[int]]:
        return {f"d{i:02d}": list(range(self.next[i])) for i in range(self.count)}


def await_ledger(ledger: Ledger, writer: Writer, timeout: float = 30.0) -> None:
    """Until the consumers acked every row written, each destination its own (each ack notifies). Not a count of
    rows acked: a row delivered again (HA redelivery) would make up for one another destination had not delivered
    yet, and the wait ended before that destination was served again."""
    expected = {dest: set(rows) for dest, rows in writer.expected().items()}

    def missing() -> dict[str, list[int]]:
        gaps = {dest: rows - set(ledger.rows.get(dest, ())) for dest, rows in expected.items()}
        return {dest: sorted(gap) for dest, gap in gaps.items() if gap}

    with ledger.changed:
        done = ledger.changed.wait_for(lambda: not missing(), timeout)
        assert done, f"rows not acked within {timeout}s: {missing()}"


def check_callbacks_alternate(services: list[Service]) -> None:
    """Per destination and service, assigned and revoked alternate, starting with assigned; across services, a
    destination is assigned to a new owner only after its former owner's on_revoked began."""
    timeline: dict[str, list[tuple[float, str, str]]] = defaultdict(list)
    for service in services:
        per: dict[str, list[str]] = defaultdict(list)
        for kind, dest, t in service.events:
            per[dest].append(kind)
            timeline[dest].append((t, kind, service.name))
        for dest, kinds in per.items():
            assert kinds[::2] == ["assigned"] * len(kinds[::2]) and kinds[1::2] == ["revoked"] * len(kinds[1::2]), (
                service.name,
                dest,
                kinds,
            )
    for dest, events in timeline.items():
        owner: str | None = None
        for _t, kind, name in sorted(events):
            if kind == "assigned":
                assert owner is None, f"{dest}: {name} assigned while {owner} had not begun to revoke"
                owner = name
            elif name == owner:
                owner = None


def test_services_share_the_destinations_and_a_join_moves_only_its_share(
    zookeeper: ZooKeeperChroot, fakes: list[FakeMysql]
) -> None:
    m = 12
    writer = Writer(fakes, m)
    writer.write(2)
    ledger = Ledger()
    services = [Service(f"s{i}", zookeeper, ledger) for i in range(3)]
    owners = Ownership(zookeeper.client(), [c.destination for c in configs(fakes, m)])
    try:
        for service in services:
            service.server.start()
            for config in configs(fakes, m):
                service.server.start_destination(config)
        before = owners.wait(lambda o: o.settled(s.address for s in services), 30, "balanced over three")
        assert sorted(owners.counts(s.address for s in services).values()) == [4, 4, 4]
        for service in services:
            held = {d for d, a in before.items() if a == service.address}
            assert all(service.server.wait_serving(d, 10) for d in held)  # the instance starts after the node
            assert service.server.serving() == held
            state = service.server.balance_state()
            assert state.share == 4 and len(state.assigned) == 4 and state.members == 3
        writer.write(3)

        joiner = Service("s3", zookeeper, ledger)
        joiner.server.start()
        for config in configs(fakes, m):
            joiner.server.start_destination(config)
        services.append(joiner)
        after = owners.wait(lambda o: o.settled(s.address for s in services), 30, "balanced over four")
        moved = {d for d in before if after[d] != before[d]}
        assert all(after[d] == joiner.address for d in moved)
        assert len(moved) == 3 <= math.ceil(m / 3)
        writer.write(3)
        await_ledger(ledger, writer)
    finally:
        for service in services:
            service.server.stop()
    # graceful hand-overs only: every row acked exactly once, in order
    assert dict(ledger.rows) == writer.expected()
    check_callbacks_alternate(services)


def test_a_graceful_stop_and_a_release_hand_over_with_nothing_lost_or_twice(
    zookeeper: ZooKeeperChroot, fakes: list[FakeMysql]
) -> None:
    m = 6
    writer = Writer(fakes, m)
    ledger = Ledger()
    services = [Service(f"g{i}", zookeeper, ledger) for i in range(3)]
    owners = Ownership(zookeeper.client(), [c.destination for c in configs(fakes, m)])
    try:
        for service in services:
            service.server.start()
            for config in configs(fakes, m):
                service.server.start_destination(config)
        owners.wait(lambda o: o.settled(s.address for s in services), 30, "balanced")
        writer.write(2)
        await_ledger(ledger, writer)

        leaving = services.pop(0)
        held = set(leaving.server.serving())
        stopped_at = time.monotonic()
        leaving.server.stop()
        took = time.monotonic() - stopped_at
        assert not leaving.server.serving()
        after = owners.wait(lambda o: o.settled(s.address for s in services), 30, "balanced after a stop")
        assert all(after[d] in {s.address for s in services} for d in held)
        assert took < 10, took
        # the hand-over's gaps: each destination it held was held by nobody only briefly (no ha_delay_s)
        spans = owners.unowned_spans()
        assert max((e - s for d in held for s, e in spans[d] if s >= stopped_at), default=0) < 3.0, spans
        writer.write(2)
        await_ledger(ledger, writer)

        # release: this process declines the destination, another takes it at once
        first = services[0]
        dest = sorted(first.server.serving())[0]
        first.server.release(dest)
        assert dest not in first.server.serving()
        other = owners.wait(lambda o: o.holders[dest] == services[1].address, 30, "the release taken")[dest]
        assert other == services[1].address
        writer.write(2)
        await_ledger(ledger, writer)
        first.server.start_destination(dest)  # takes part again: the group may give it back
        owners.wait(lambda o: o.settled(s.address for s in services), 30, "balanced after taking part again")
    finally:
        for service in services:
            service.server.stop()
    assert dict(ledger.rows) == writer.expected()
    check_callbacks_alternate([leaving, *services])


def test_caps_a_process_outside_the_group_and_a_move_by_hand(
    zookeeper: ZooKeeperChroot, fakes: list[FakeMysql], capsys: pytest.CaptureFixture[str]
) -> None:
    m = 6
    Writer(fakes, m)
    ledger = Ledger()
    every = [c.destination for c in configs(fakes, m)]
    owners = Ownership(zookeeper.client(), every)
    # a process with balancing off (canal's cluster mode: a canal server behaves the same) holds d00 and d01
    outside = EmbeddedServer(zk_hosts=zookeeper.hosts, address="outside:1", ha_delay_s=0.2, balance=False)
    capped = Service("capped", zookeeper, ledger, balance=BalanceConfig(max_destinations=1))
    free = Service("free", zookeeper, ledger)
    services = [capped, free]
    try:
        outside.start()
        for config in configs(fakes, m)[:2]:
            outside.start_destination(config)
            assert outside.wait_serving(config.destination, 20)
        for service in services:
            service.server.start()
            for config in configs(fakes, m):
                service.server.start_destination(config)
        held = owners.wait(
            lambda o: (
                o.doc is not None
                and set(o.doc.foreign) == {"d00", "d01"}
                and o.counts(["capped:1", "free:1"]) == {"capped:1": 1, "free:1": 3}
            ),
            30,
            "the cap and the outside process honoured",
        )
        assert held["d00"] == held["d01"] == "outside:1"
        assert capped.server.balance_state().share == 1

        # a move by hand: the capped process is full, the free one takes anything it embeds
        mine = next(d for d, h in held.items() if h == "capped:1")
        zk = zookeeper.client()
        with pytest.raises(HAError, match="max_destinations"):
            request_move(zk, "default", next(d for d, h in held.items() if h == "free:1"), "capped:1", timeout=10)
        with pytest.raises(HAError, match="no member"):
            request_move(zk, "default", mine, "nobody:1", timeout=10)
        with pytest.raises(HAError, match="outside balance group"):
            request_move(zk, "default", "d00", "free:1", timeout=10)
        assert canal_main(["ha", "move", mine, "--to", "free:1", "--zk", zookeeper.hosts, "--wait", "30"]) == 0
        owners.wait(lambda o: o.holders[mine] == "free:1", 10, "the move seen by this test's watch too")
        # the capped process is under its cap now: the group fills it again, with another destination
        owners.wait(lambda o: o.counts(["capped:1"]) == {"capped:1": 1}, 30, "the capped process refilled")
        assert owners.holders[mine] == "free:1"  # the pin holds

        capsys.readouterr()
        assert canal_main(["ha", "status", "--zk", zookeeper.hosts]) == 0
        out = capsys.readouterr().out
        assert "balance group default: 2 members" in out
        assert "capped:1" in out and "share 1" in out and "max 1" in out
        assert "outside the group: d00, d01" in out

        # the outside process stops: its destinations join the assignment
        outside.stop()
        owners.wait(
            lambda o: all(o.holders[d] in ("capped:1", "free:1") for d in every), 30, "every destination assigned"
        )
        assert owners.counts(["capped:1", "free:1"]) == {"capped:1": 1, "free:1": 5}
    finally:
        outside.stop()
        for service in services:
            service.server.stop()


def test_metrics_show_shares_moves_and_unowned_destinations(zookeeper: ZooKeeperChroot, fakes: list[FakeMysql]) -> None:
    pytest.importorskip("prometheus_client")
    from canal.metrics import CanalCollector

    Writer(fakes, 3)
    ledger = Ledger()
    # room for two destinations in the group: the third has no owner
    a = Service("ma", zookeeper, ledger, balance=BalanceConfig(max_destinations=1))
    b = Service("mb", zookeeper, ledger, balance=BalanceConfig(max_destinations=1))
    owners = Ownership(zookeeper.client(), ["d00", "d01", "d02"])
    try:
        for service in (a, b):
            service.server.start()
            for config in configs(fakes, 3):
                service.server.start_destination(config)
        owners.wait(lambda o: o.counts(["ma:1", "mb:1"]) == {"ma:1": 1, "mb:1": 1}, 30, "both at their cap")
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in CanalCollector(a.server).collect()
            for s in family.samples
        }
        mine = sorted(a.server.serving())
        assert samples[("canal_ha_serving_destinations", ())] == 1
        assert samples[("canal_ha_share", ())] == 1
        assert samples[("canal_ha_members", ())] == 2
        assert samples[("canal_ha_moves_total", (("direction", "in"),))] == 1
        for dest in ("d00", "d01", "d02"):
            assert samples[("canal_ha_serving", (("destination", dest),))] == (1 if dest in mine else 0)
        unowned = next(d for d, h in owners.holders.items() if h is None)
        assert samples[("canal_ha_owned", (("destination", unowned),))] == 0
        assert sum(samples[("canal_ha_owned", (("destination", d),))] for d in ("d00", "d01", "d02")) == 2
    finally:
        for service in (a, b):
            service.server.stop()
