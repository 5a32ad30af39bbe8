"""Destinations sharing one reader of a real MariaDB get exactly the entries each gets reading alone.

A differential: the same destination configs run once in one process through the shared reader -- with writes going
on, a destination restarted with a batch outstanding, one started far behind the others, one that captures
everything, a rotate, DDL, a savepoint, large and multi-table transactions -- and once each alone
(``share_reader=False``) over the same binlog; every destination's acked entries must be equal, field by field. The
same through an HA handover between two servers of the process, and through SIGKILLs of the process they share it
in (``tests.procs.shared_consumer``).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from procs.ha_harness import Child, kill_all
from shared_entries import END_ID, canonical, ended, through_marker

from canal.client import ClientIdentity
from canal.config import BalanceConfig, DetectingConfig, InstanceConfig, MasterConfig, RetryConfig, StoreConfig
from canal.instance import Instance
from canal.protocol import EMPTY_MESSAGE_ID, EntryType
from canal.server import EmbeddedServer
from canal.testing.plugin import MariaDBDatabase, ZooKeeperChroot

pytestmark = pytest.mark.integration


class Consumer:
    """Takes and acks one destination's batches (or leaves one outstanding)."""

    def __init__(self, get: Callable[..., Any], ack: Callable[[int], None]) -> None:
        self.get = get
        self.ack = ack
        self.entries: list[tuple[Any, ...]] = []

    def step(self, *, ack: bool = True) -> int:
        msg = self.get(50, 0.05)
        if msg.id == EMPTY_MESSAGE_ID:
            return 0
        if ack:
            self.ack(msg.id)
            self.entries += [canonical(e) for e in msg.entries]
        return len(msg.entries)


def configs(master: MasterConfig, db: str, meta: Path, *, shared: bool) -> dict[str, InstanceConfig]:
    filters = {
        "one": rf"{db}_a\..*",  # one database
        "two": rf"{db}_b\.t",  # one table of another
        "three": rf"{db}_a\.u,{db}_c\..*",  # a table of the first and a third database
        "late": rf"{db}_c\..*",  # starts when the others are far ahead
        "all": r".*\..*",  # everything, the marks' database's DDL included
    }
    return {
        name: InstanceConfig(
            destination=name,
            master=master,
            filter_regex=f"{regex},{db}\\.marks",
            share_reader=shared,
            meta_mode="file",
            meta_dir=str(meta),
            transaction_size=64,  # large transactions go in parts
            store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=512),
            detecting=DetectingConfig(interval_s=0.3),
            retry=RetryConfig(initial_backoff_s=0.02, max_backoff_s=0.3, read_timeout_s=10, heartbeat_period_s=0.3),
        )
        for name, regex in filters.items()
    }


def workload(db: MariaDBDatabase, part: int) -> None:
    name = db.database
    keys = itertools.count(part * 10_000)
    with db.connect() as conn, conn.cursor() as cur:

        def run(*statements: str) -> None:
            for sql in statements:
                cur.execute(sql)

        if part == 0:
            for suffix in "abcd":
                run(f"CREATE DATABASE {name}_{suffix}")
                for table in ("t", "u"):
                    run(f"CREATE TABLE {name}_{suffix}.{table} (id INT PRIMARY KEY, v VARCHAR(40), n BIGINT)")
        for round_ in range(6):
            for suffix in "abcd":  # single-row transactions, each database in turn (d is captured by "all" only)
                k = next(keys)
                run(f"INSERT INTO {name}_{suffix}.t (id, v, n) VALUES ({k}, 'p{part} r{round_}', {k * 3})")
            k = next(keys)
            run(  # one transaction over two databases
                "BEGIN",
                f"INSERT INTO {name}_d.u (id, v, n) VALUES ({k}, 'multi', 1)",
                f"INSERT INTO {name}_b.t (id, v, n) VALUES ({k}, 'multi', 2)",
                f"UPDATE {name}_a.u SET n = n + 1 WHERE id < {k}",
                "COMMIT",
            )
        first = next(keys)
        run(  # a large statement: parts of transaction_size
            f"INSERT INTO {name}_c.t (id, v, n) SELECT seq, CONCAT('big ', seq), seq FROM seq_{first}_to_{first + 299}"
        )
        run(f"DELETE FROM {name}_a.t WHERE id % 2 = 0")
        if part == 1:
            run("FLUSH BINARY LOGS")
            run(f"ALTER TABLE {name}_b.t ADD COLUMN w INT DEFAULT 7")
            k = next(keys)
            run(  # a savepoint: the transaction goes to every destination
                "BEGIN",
                f"INSERT INTO {name}_a.t (id, v, n) VALUES ({k}, 'saved', 0)",
                "SAVEPOINT s1",
                f"INSERT INTO {name}_d.t (id, v, n) VALUES ({k}, 'rolled back', 0)",
                "ROLLBACK TO SAVEPOINT s1",
                f"INSERT INTO {name}_c.u (id, v, n) VALUES ({k}, 'kept', 0)",
                "COMMIT",
            )
            run(f"UPDATE {name}_b.t SET w = id % 5")


def test_shared_destinations_get_what_each_gets_alone(mariadb: MariaDBDatabase, tmp_path: Path) -> None:
    db = mariadb.database
    mariadb.execute("CREATE TABLE marks (id INT PRIMARY KEY)")
    master = mariadb.master()
    workload(mariadb, 0)

    # -- shared: all in one process ----------------------------------------------------------------------------------
    shared = configs(master, db, tmp_path / "shared", shared=True)
    server = EmbeddedServer()
    server.start()
    consumers: dict[str, Consumer] = {}
    try:

        def attach(name: str) -> None:
            server.start_destination(shared[name])
            client = ClientIdentity(name, 1001)
            consumers[name] = Consumer(
                lambda size, timeout: server.get_without_ack(client, size, timeout),
                lambda batch: server.ack(client, batch),
            )

        for name in ("one", "two", "three", "all"):
            attach(name)
        for _ in range(10):
            for consumer in consumers.values():
                consumer.step()
        assert any(server.instance(n).parser.shared for n in consumers)
        workload(mariadb, 1)  # written while they read
        for _ in range(5):
            for consumer in consumers.values():
                consumer.step()
        # "two" stops with a batch taken and not acked: it comes again after the restart
        consumers["two"].step(ack=False)
        server.stop_destination("two")
        for _ in range(5):
            for name in ("one", "three", "all"):
                consumers[name].step()
        server.start_destination("two")
        attach("late")  # far behind: it reads alone, then joins the others
        workload(mariadb, 2)
        mariadb.execute(f"INSERT INTO marks VALUES ({END_ID})")
        deadline = time.monotonic() + 90
        while not all(ended(c.entries, db) for c in consumers.values()):
            assert time.monotonic() < deadline, {n: len(c.entries) for n, c in consumers.items()}
            for consumer in consumers.values():
                if not ended(consumer.entries, db):
                    consumer.step()
        joined = {n: server.instance(n).parser.shared for n in consumers}
    finally:
        server.stop()
    assert joined["late"], joined  # it caught up and joined

    # -- each alone ----------------------------------------------------------------------------------------------------
    for name, config in configs(master, db, tmp_path / "alone", shared=False).items():
        alone = Consumer(lambda size, timeout: inst.get_without_ack(size, timeout), lambda batch: inst.ack(batch))
        with Instance(config) as inst:
            deadline = time.monotonic() + 60
            while not ended(alone.entries, db):
                assert time.monotonic() < deadline, f"{name}: {len(alone.entries)} entries alone"
                alone.step()
        got, want = through_marker(consumers[name].entries), through_marker(alone.entries)
        assert len(got) == len(want), name
        for i, (a, b) in enumerate(zip(got, want, strict=True)):
            assert a == b, f"{name}: entry {i} differs:\nshared {a}\nalone  {b}"


def test_a_destination_handed_over_under_ha_shares_again(
    mariadb: MariaDBDatabase, zookeeper: ZooKeeperChroot, tmp_path: Path
) -> None:
    db = mariadb.database
    mariadb.execute("CREATE TABLE marks (id INT PRIMARY KEY)")
    master = mariadb.master()
    workload(mariadb, 0)
    names = ("one", "two", "all")
    shared = {n: c for n, c in configs(master, db, tmp_path / "shared", shared=True).items() if n in names}
    # canal's cluster mode (balancing off): the second process stands by for every destination and takes "two"
    # only when the first releases it; with balancing (the default) the group would move some of them at once. The
    # release waits revoke_timeout_s for the batch left outstanding below (30 s by default), then hands over anyway
    balance = BalanceConfig(enabled=False, revoke_timeout_s=2.0)
    first, second = (
        EmbeddedServer(zk_hosts=zookeeper.hosts, address=address, ha_delay_s=0.1, zk_timeout_s=5, balance=balance)
        for address in ("127.0.0.1:1", "127.0.0.1:2")
    )
    owner = dict.fromkeys(names, first)
    consumers: dict[str, Consumer] = {}
    for name in names:
        client = ClientIdentity(name, 1001)
        consumers[name] = Consumer(
            lambda size, timeout, client=client: owner[client.destination].get_without_ack(client, size, timeout),
            lambda batch, client=client: owner[client.destination].ack(client, batch),
        )
    try:
        first.start()
        for config in shared.values():
            first.start_destination(config)
            assert first.wait_serving(config.destination, 30)
        second.start()
        for config in shared.values():
            second.add_destination(config, lazy=False)  # stands by
        for _ in range(10):
            for consumer in consumers.values():
                consumer.step()
        assert first.instance("two").parser.shared
        workload(mariadb, 1)
        consumers["two"].step(ack=False)  # handed over with a batch outstanding: the new owner delivers it again
        first.release("two")
        assert second.wait_serving("two", 30)
        owner["two"] = second
        workload(mariadb, 2)
        mariadb.execute(f"INSERT INTO marks VALUES ({END_ID})")
        deadline = time.monotonic() + 90
        while not all(ended(c.entries, db) for c in consumers.values()):
            assert time.monotonic() < deadline, {n: len(c.entries) for n, c in consumers.items()}
            for consumer in consumers.values():
                if not ended(consumer.entries, db):
                    consumer.step()
        # the new owner's instance joined the reader the others of the process read through
        assert second.instance("two").parser.shared and first.instance("one").parser.shared
    finally:
        second.stop()
        first.stop()
    for name, config in configs(master, db, tmp_path / "alone", shared=False).items():
        if name not in names:
            continue
        alone = Consumer(lambda size, timeout: inst.get_without_ack(size, timeout), lambda batch: inst.ack(batch))
        with Instance(config) as inst:
            deadline = time.monotonic() + 60
            while not ended(alone.entries, db):
                assert time.monotonic() < deadline, f"{name}: {len(alone.entries)} entries alone"
                alone.step()
        # "two" went on in another server's instance, which counts canal's one-empty-transaction-every-5-s afresh
        # (see the kill test below): which empty transactions it lets through depends on the hand-over's moment
        got = without_empty_transactions([repr(e) for e in through_marker(consumers[name].entries)])
        assert got == without_empty_transactions([repr(e) for e in through_marker(alone.entries)]), name


_BEGIN = repr(EntryType.TRANSACTIONBEGIN)
_END = repr(EntryType.TRANSACTIONEND)


def without_empty_transactions(lines: list[str]) -> list[str]:
    """``lines`` (reprs of :func:`canonical` entries) without the transactions that hold no row: a BEGIN followed
    at once by its END."""
    kept: list[str] = []
    for line in lines:
        if line.startswith(f"({_END}") and kept and kept[-1].startswith(f"({_BEGIN}"):
            kept.pop()
            continue
        kept.append(line)
    return kept


def test_shared_destinations_through_kills_of_their_process(mariadb: MariaDBDatabase, tmp_path: Path) -> None:
    db = mariadb.database
    mariadb.execute("CREATE TABLE marks (id INT PRIMARY KEY)")
    master = mariadb.master()
    workload(mariadb, 0)
    names = ("one", "three", "all")
    shared = {
        n: attrs.evolve(c, flush_period_s=0)  # an ack is on disk when it returns
        for n, c in configs(master, db, tmp_path / "shared", shared=True).items()
        if n in names
    }
    out = tmp_path / "out"
    out.mkdir()
    spec = {
        "configs": {n: c.to_properties(include_password=True) for n, c in shared.items()},
        "out": str(out),
        "db": db,
    }

    def recorded(name: str) -> int:
        path = out / f"{name}.log"
        return path.read_text().count("\n") if path.exists() else 0

    for part in (1, 2):
        child = Child("shared", spec, module="tests.procs.shared_consumer")
        writer = threading.Thread(target=workload, args=(mariadb, part))
        try:
            child.expect(lambda line: line == "ready", 60, "ready")
            child.expect(lambda line: line == "shared", 60, "shared")
            before = sum(recorded(n) for n in names)
            writer.start()  # written while it reads
            deadline = time.monotonic() + 60
            while sum(recorded(n) for n in names) < before + 40:  # killed while it takes them
                assert time.monotonic() < deadline, {n: recorded(n) for n in names}
                time.sleep(0.005)
        finally:
            kill_all([child])
            if writer.is_alive():
                writer.join()
    mariadb.execute(f"INSERT INTO marks VALUES ({END_ID})")
    child = Child("shared", spec, module="tests.procs.shared_consumer")
    try:
        child.expect(lambda line: line == "done", 90, "done")
    finally:
        kill_all([child])
    for name, config in configs(master, db, tmp_path / "alone", shared=False).items():
        if name not in names:
            continue
        alone = Consumer(lambda size, timeout: inst.get_without_ack(size, timeout), lambda batch: inst.ack(batch))
        with Instance(config) as inst:
            deadline = time.monotonic() + 60
            while not ended(alone.entries, db):
                assert time.monotonic() < deadline, f"{name}: {len(alone.entries)} entries alone"
                alone.step()
        lines = (out / f"{name}.log").read_text().split("\n")[:-1]  # a line cut by a kill has no newline
        seen: set[str] = set()
        got = []
        for line in lines:  # a batch recorded and killed before its ack comes again after the restart
            if line not in seen:
                seen.add(line)
                got.append(line)
        want = [repr(e) for e in through_marker(alone.entries)]
        # canal's empty-transaction policy lets one through every 5 s of binlog time, judged against the last one a
        # process let through: a process started again after a kill begins that count afresh, so which empty
        # transactions come depends on how long the workload took on this machine, killed or alone alike
        got, want = without_empty_transactions(got), without_empty_transactions(want)
        assert got[: len(want)] == want and len(got) <= len(want) + 1, name  # the marker's END may follow it
