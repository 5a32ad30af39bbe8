"""Joining a shared reader where the destination's own dump would send something else, on the fake binlog in both
flavours: each destination's entries are the ones it gets reading alone.

* a destination from a file position joining a reader whose dump starts from a GTID set, which leaves out the
  groups the set holds: it never joins at a place before such a gap (from the events the reader holds, or where
  the reader rests), nor stays across one;
* a destination from a GTID set joining a reader from a file position: it never gets a group its own dump would
  leave out;
* a destination joining from the events the reader holds while the reader waits for room in another's full queue
  gets each event once.
"""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path
from typing import Any

import attrs
import pytest
from shared_entries import drain_all, fake_config, read_alone, reader_of, upto_end, wait_for

from canal.config import DetectingConfig, InstanceConfig, RetryConfig
from canal.parse.events import BinlogEvent
from canal.parse.shared import reader as shared
from canal.parse.shared.queue import Subscription
from canal.server import EmbeddedServer
from canal.testing import FakeMysql

_names = itertools.count()


def _fake(mariadb: bool) -> FakeMysql:
    fake = FakeMysql(name=f"shared_joins_{next(_names)}", mariadb=mariadb, gtid=True)
    for table in ("a.t", "m.marks"):
        fake.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, v VARCHAR(20))")
    return fake


def _rows(fake: FakeMysql, keys: range) -> None:
    for k in keys:
        fake.insert("a.t", {"id": k, "v": f"row {k}"})


def _compare(
    fake: FakeMysql, got: dict[str, list[tuple[Any, ...]]], starts: dict[str, Any], tmp: str, end: int
) -> None:
    for name, start in starts.items():
        alone = read_alone(fake, start, name, r"a\..*", tmp, end)
        assert upto_end(got[name], end) == upto_end(alone, end), name


@pytest.mark.parametrize("mariadb", [False, True], ids=["mysql", "mariadb"])
@pytest.mark.parametrize("where", ["held", "held-rotated", "at"])
def test_a_file_start_never_joins_before_a_gap_of_a_gtid_readers_dump(
    mariadb: bool, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader's dump starts from the GTID set after rows 1-5, so it leaves them out; a destination from the
    file's start (before them) joins from the events the reader holds ("held": rows 6-7 are read; "held-rotated":
    the gap ends where the file does, rows 6-7 are in the next, and no heartbeat of the idle reader came between) or
    where the reader rests ("at": nothing after the rows yet). It must get rows 1-7, as alone."""
    fake = _fake(mariadb)
    try:
        fake.rotate()
        file_start = fake.master_status()  # after the new file's header events: before rows 1-5
        if where == "held-rotated":
            # the file's first event: a place the reader holds; and the reader's dump sends no heartbeat
            file_start = attrs.evolve(file_start, position=4)
            monkeypatch.setattr(shared, "HEARTBEAT_S", 60.0)
        _rows(fake, range(1, 6))
        gtids = fake.gtid_executed()
        quiet = RetryConfig(initial_backoff_s=0.01, max_backoff_s=0.1, heartbeat_period_s=60, read_timeout_s=120)

        def config(start: Any, name: str) -> InstanceConfig:
            made = fake_config(fake, start, name, r"a\..*", Path(tmp, "s"), share=True)
            if where != "held-rotated":
                return made
            return attrs.evolve(made, retry=quiet, detecting=DetectingConfig(interval_s=60))

        with tempfile.TemporaryDirectory() as tmp:
            server = EmbeddedServer()
            server.start()
            got: dict[str, list[tuple[Any, ...]]] = {n: [] for n in ("g1", "g2", "f")}
            try:
                for name in ("g1", "g2"):  # one of them makes the reader: a dump from the GTID set
                    server.start_destination(config(gtids, name))
                wait_for("the reader", lambda: any(server.instance(n).parser.shared for n in ("g1", "g2")))
                if where.startswith("held"):
                    if where == "held-rotated":
                        fake.rotate()
                    _rows(fake, range(6, 8))
                    now = fake.master_status()
                    assert now.position is not None
                    wait_for(
                        "rows 6-7 read",
                        lambda: reader_of(fake)._tracker.next_start == (now.journal_number, now.position),
                    )
                server.start_destination(config(file_start, "f"))
                if where == "at":
                    _rows(fake, range(6, 8))
                fake.insert("m.marks", {"id": 100, "v": "end"})
                drain_all(server, got, 100)
            finally:
                server.stop()
            _compare(fake, got, {"g1": gtids, "g2": gtids, "f": file_start}, tmp, 100)
    finally:
        fake.unregister()
        assert not shared.READERS._readers


@pytest.mark.parametrize("mariadb", [False, True], ids=["mysql", "mariadb"])
def test_a_gtid_start_never_gets_a_group_its_own_dump_leaves_out(mariadb: bool) -> None:
    """The reader's dump starts from the file's start, before rows 1-5; a destination from the GTID set after them
    reads alone through the file's header events -- where the reader holds the same place -- and must not join
    there: its own dump leaves rows 1-5 out. It gets rows 6-7, as alone."""
    fake = _fake(mariadb)
    try:
        fake.rotate()
        file_start = fake.master_status()
        _rows(fake, range(1, 6))
        gtids = fake.gtid_executed()
        with tempfile.TemporaryDirectory() as tmp:
            meta = Path(tmp, "s")
            server = EmbeddedServer()
            server.start()
            got: dict[str, list[tuple[Any, ...]]] = {n: [] for n in ("f1", "f2", "g")}
            try:
                for name in ("f1", "f2"):  # one of them makes the reader: a dump from the file's start
                    server.start_destination(fake_config(fake, file_start, name, r"a\..*", meta, share=True))
                wait_for("the reader", lambda: any(server.instance(n).parser.shared for n in ("f1", "f2")))
                server.start_destination(fake_config(fake, gtids, "g", r"a\..*", meta, share=True))
                _rows(fake, range(6, 8))
                fake.insert("m.marks", {"id": 100, "v": "end"})
                drain_all(server, got, 100)
                wait_for("g to join", lambda: server.instance("g").parser.shared)
            finally:
                server.stop()
            _compare(fake, got, {"f1": file_start, "f2": file_start, "g": gtids}, tmp, 100)
    finally:
        fake.unregister()
        assert not shared.READERS._readers


@pytest.mark.parametrize("mariadb", [False, True], ids=["mysql", "mariadb"])
def test_a_destination_joining_while_the_reader_waits_for_room_gets_each_event_once(
    mariadb: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ "slow" takes nothing, so its queue fills inside a long transaction and the reader waits for room; "late"
    starts then, from before that transaction: it joins from the events the reader holds (the transaction's so far)
    while the reader waits. Once "slow" takes its entries, the reader goes on: "late" must not get the event the
    reader was giving when it began to wait a second time -- neither the event (whether it makes an entry or not) nor
    the entries."""
    pushed: list[tuple[str, int]] = []  # where the binlog events queued for "late" start
    push = Subscription.push

    def spied(sub: Subscription, item: BinlogEvent | list[BinlogEvent], count: int = 1) -> None:
        if sub.member.destination == "late":
            events = item if isinstance(item, list) else [item]
            pushed.extend((e.log_file, e.offset) for e in events if e.next_offset > e.offset)  # binlog events
        push(sub, item, count)

    monkeypatch.setattr(Subscription, "push", spied)
    monkeypatch.setattr(shared, "QUEUE_EVENTS", 40)
    monkeypatch.setattr(shared, "SLOW_WAIT_S", 60.0)  # "slow" stays while "late" joins
    fake = _fake(mariadb)
    try:
        fake.execute("CREATE TABLE b.t (id INT PRIMARY KEY, v VARCHAR(20))")
        start = fake.master_status()
        with tempfile.TemporaryDirectory() as tmp:
            meta = Path(tmp, "s")
            server = EmbeddedServer()
            server.start()
            got: dict[str, list[tuple[Any, ...]]] = {n: [] for n in ("slow", "late", "other")}
            regexes = {"other": r"b\..*", "slow": r"a\..*", "late": r"a\..*"}
            try:
                for name in ("other", "slow"):
                    server.start_destination(fake_config(fake, start, name, regexes[name], meta, share=True))
                wait_for("sharing", lambda: all(server.instance(n).parser.shared for n in ("other", "slow")))  # idle
                reader = reader_of(fake)
                with fake.transaction() as tx:  # 200 events: more than slow's store and queue hold
                    for k in range(100):
                        tx.insert("a.t", {"id": k, "v": f"row {k}"})
                wait_for("the reader to wait for room", lambda: reader.waiting_for is not None)
                server.start_destination(fake_config(fake, start, "late", regexes["late"], meta, share=True))
                wait_for("late to join", lambda: server.instance("late").parser.shared)
                assert reader.waiting_for is not None  # it joined during the wait
                fake.insert("b.t", {"id": 1, "v": "b"})
                fake.insert("m.marks", {"id": 1000, "v": "end"})
                drain_all(server, got, 1000)
            finally:
                server.stop()
            assert len(pushed) == len(set(pushed))  # each event once
            for name, regex in regexes.items():
                alone = read_alone(fake, start, name, regex, tmp, 1000)
                assert upto_end(got[name], 1000) == upto_end(alone, 1000), name
    finally:
        fake.unregister()
        assert not shared.READERS._readers


@pytest.mark.parametrize("mariadb", [False, True], ids=["mysql", "mariadb"])
def test_a_destination_waiting_ahead_of_the_reader_gets_nothing_before_its_place(
    mariadb: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader is held back by "slow" (its queue full); a transaction of a.t is written, then "ahead" starts after
    it, a little ahead of the reader in the same file: it waits there for the reader. When the reader goes on, the
    transaction before that place is not "ahead"'s, though it captures its table."""
    monkeypatch.setattr(shared, "QUEUE_EVENTS", 40)
    monkeypatch.setattr(shared, "SLOW_WAIT_S", 60.0)  # "slow" holds the reader back until it takes its entries
    fake = _fake(mariadb)
    try:
        fake.execute("CREATE TABLE b.t (id INT PRIMARY KEY, v VARCHAR(20))")
        start = fake.master_status()
        with tempfile.TemporaryDirectory() as tmp:
            meta = Path(tmp, "s")
            server = EmbeddedServer()
            server.start()
            regexes = {"slow": r"b\..*", "other": r"a\..*", "ahead": r"a\..*"}
            got: dict[str, list[tuple[Any, ...]]] = {n: [] for n in regexes}
            try:
                for name in ("slow", "other"):
                    server.start_destination(fake_config(fake, start, name, regexes[name], meta, share=True))
                wait_for("sharing", lambda: all(server.instance(n).parser.shared for n in ("slow", "other")))
                reader = reader_of(fake)
                with fake.transaction() as tx:
                    for k in range(100):
                        tx.insert("b.t", {"id": k, "v": f"row {k}"})
                wait_for("the reader to wait for room", lambda: reader.waiting_for is not None)
                _rows(fake, range(1, 3))  # before the place "ahead" starts at
                place = fake.master_status()
                server.start_destination(fake_config(fake, place, "ahead", regexes["ahead"], meta, share=True))
                wait_for("ahead to wait for the reader", lambda: bool(reader._ahead))
                _rows(fake, range(3, 5))
                fake.insert("m.marks", {"id": 100, "v": "end"})
                drain_all(server, got, 100)
            finally:
                server.stop()
            starts = {"slow": start, "other": start, "ahead": place}
            for name, regex in regexes.items():
                alone = read_alone(fake, starts[name], name, regex, tmp, 100)
                assert upto_end(got[name], 100) == upto_end(alone, 100), name
    finally:
        fake.unregister()
        assert not shared.READERS._readers


@pytest.mark.parametrize("mariadb", [False, True], ids=["mysql", "mariadb"])
def test_a_file_start_joins_an_idle_gtid_reader_where_its_heartbeats_say_it_rests(mariadb: bool) -> None:
    """A reader's dump from the GTID set of everything written rests at the binlog's end, having sent nothing since
    the file's header events; a destination from that end waits ahead of the place the reader was last given, and
    joins where the reader's heartbeats say it rests -- not only at the next transaction, nor after its read
    timeout."""
    fake = _fake(mariadb)
    try:
        _rows(fake, range(1, 6))
        gtids = fake.gtid_executed()
        end = fake.master_status()
        with tempfile.TemporaryDirectory() as tmp:
            meta = Path(tmp, "s")
            server = EmbeddedServer()
            server.start()
            got: dict[str, list[tuple[Any, ...]]] = {n: [] for n in ("g1", "g2", "f")}
            try:
                for name in ("g1", "g2"):
                    server.start_destination(fake_config(fake, gtids, name, r"a\..*", meta, share=True))
                wait_for("the reader", lambda: any(server.instance(n).parser.shared for n in ("g1", "g2")))
                reader = reader_of(fake)
                server.start_destination(fake_config(fake, end, "f", r"a\..*", meta, share=True))
                wait_for("f to join", lambda: server.instance("f").parser.shared and not reader._ahead, 5)
                assert server.instance("f").parser.reconnects == 0
                _rows(fake, range(6, 8))
                fake.insert("m.marks", {"id": 100, "v": "end"})
                drain_all(server, got, 100)
                assert server.instance("f").parser.shared
            finally:
                server.stop()
            _compare(fake, got, {"g1": gtids, "g2": gtids, "f": end}, tmp, 100)
    finally:
        fake.unregister()
        assert not shared.READERS._readers
