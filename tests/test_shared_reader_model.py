"""The shared reader against its model, reading alone: random workloads on the fake binlog (MySQL and MariaDB
flavours, GTID mode or not), random filters, a destination restarted part-way (from a file position or, in GTID
mode, a GTID set) and one started late; every destination's acked entries through the shared reader equal its
entries read alone, a destination that never stopped. Empty transactions the sink
keeps (one every 5 s of binlog time) are in the workloads, so the parser's counting of left-out transactions is
compared too."""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from shared_entries import canonical, drain_shared, fake_config, read_alone, reader_of, upto_end, wait_for

from canal.client import ClientIdentity
from canal.config import InstanceConfig
from canal.errors import SourceError
from canal.parse.events import BinlogEvent, QueryEvent, RowsEvent
from canal.parse.shared import reader as shared
from canal.parse.shared.queue import Subscription
from canal.protocol import EMPTY_MESSAGE_ID
from canal.server import EmbeddedServer
from canal.testing import FakeMysql

_names = itertools.count()
TABLES = ("a.t", "a.u", "b.t", "c.t")
FILTERS = (r"a\..*", r"a\.t", r"b\..*", r"a\.u,c\.t", r".*\..*", r"c\..*", r"A\.T,C\.t")

operation = st.one_of(
    st.tuples(st.just("txn"), st.lists(st.sampled_from(TABLES), min_size=1, max_size=4)),
    st.tuples(st.just("rotate"), st.none()),
    st.tuples(st.just("ddl"), st.sampled_from(TABLES)),
    st.tuples(st.just("sleep"), st.none()),  # 6 s of binlog time: the sink keeps the next empty transaction
)


def write(fake: FakeMysql, operations: list[tuple[str, Any]], keys: itertools.count[int]) -> None:
    for kind, arg in operations:
        if kind == "txn":
            with fake.transaction() as tx:
                for table in arg:
                    k = next(keys)
                    tx.insert(table, {"id": k, "v": f"row {k}"})
                    if k % 3 == 0:
                        tx.update(table, {"id": k, "v": f"row {k}"}, {"id": k, "v": f"changed {k}"})
        elif kind == "rotate":
            fake.rotate()
        elif kind == "ddl":
            fake.execute(f"ALTER TABLE {arg} COMMENT 'c{next(keys)}'")
        else:
            fake.advance_clock(seconds=6)


def config(
    fake: FakeMysql, start: Any, name: str, regex: str, meta: Path, *, share: bool, gtid: bool
) -> InstanceConfig:
    return fake_config(fake, start, name, regex, meta, share=share, gtid=gtid)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# a restarted destination reads again the empty transactions after its cursor: judged against the last one it kept
# before the restart, 6 s later in the binlog, it kept one it had dropped; and judged afresh (a policy reset at the
# restart), it dropped one a destination that never stopped keeps -- 6 s after one dropped before its cursor
# restarts by GTID set from a boundary the dump then leaves out (it is in the set): a rotate after it -- one the dump
# reads, or the one that opens a dump beginning in the next file -- moves the anchor as it does for a dump that goes
# on, without the boundary having been read again
# restarted by GTID set before a rotate it then reads: the anchor at the next file's start has the rotate's time, as
# for a dump that went on (it kept the time of the boundary before, which a restarted dump does not know)
# MariaDB's GTIDs, restarted by GTID set after an idle spell: the anchor of the next transaction's BEGIN has the time
# of the boundary before where a destination that went on has the spell's end (found by chance; not fixed yet)
@example(
    before=[],
    after=[("sleep", None)],
    filters=[r"a\..*", r"a\..*"],
    mariadb=True,
    gtid=True,
    restart=True,
).xfail(raises=AssertionError, reason="a restarted MariaDB GTID dump's anchor time after an idle spell")
@example(
    before=[],
    after=[("sleep", None), ("rotate", None)],
    filters=[r"a\..*", r"a\..*"],
    mariadb=False,
    gtid=True,
    restart=True,
)
@example(
    before=[("txn", ["a.t"]), ("rotate", None)],
    after=[("txn", ["a.t"])],
    filters=[r"a\..*", r"a\..*"],
    mariadb=False,
    gtid=True,
    restart=True,
)
@example(
    before=[("ddl", "a.t")],
    after=[("rotate", None)],
    filters=[r"a\..*", r"a\..*"],
    mariadb=False,
    gtid=True,
    restart=True,
)
@example(
    before=[("txn", ["a.t"]), ("rotate", None), ("sleep", None)],
    after=[("txn", ["a.t"])],
    filters=[r"b\..*", r"a\..*"],
    mariadb=False,
    gtid=False,
    restart=True,
)
@example(
    before=[("txn", ["a.t"]), ("rotate", None), ("txn", ["a.u"])],
    after=[("sleep", None), ("txn", ["a.u"])],
    filters=[r"a\.t", r"a\..*"],
    mariadb=False,
    gtid=False,
    restart=True,
)
@given(
    before=st.lists(operation, max_size=12),
    after=st.lists(operation, max_size=12),
    filters=st.lists(st.sampled_from(FILTERS), min_size=2, max_size=4),
    mariadb=st.booleans(),
    gtid=st.booleans(),
    restart=st.booleans(),
)
def test_shared_entries_are_the_entries_read_alone(
    before: list[tuple[str, Any]],
    after: list[tuple[str, Any]],
    filters: list[str],
    mariadb: bool,
    gtid: bool,
    restart: bool,
) -> None:
    fake = FakeMysql(name=f"shared_model_{next(_names)}", mariadb=mariadb, gtid=gtid)
    try:
        for table in (*TABLES, "m.marks"):
            fake.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, v VARCHAR(20))")
        start = fake.master_status()
        keys = itertools.count(1)
        write(fake, before, keys)
        names = [f"d{i}" for i in range(len(filters))]
        with tempfile.TemporaryDirectory() as tmp:
            got: dict[str, list[tuple[Any, ...]]] = {n: [] for n in names}
            server = EmbeddedServer()
            server.start()
            try:
                for name, regex in zip(names[:-1], filters, strict=False):  # the last starts late
                    server.start_destination(config(fake, start, name, regex, Path(tmp, "s"), share=True, gtid=gtid))

                def step(name: str) -> None:
                    client = ClientIdentity(name, 1001)
                    msg = server.get_without_ack(client, 5, 0.02)
                    if msg.id != EMPTY_MESSAGE_ID:
                        server.ack(client, msg.id)
                        got[name] += [canonical(e) for e in msg.entries]

                for name in names[:-1]:
                    step(name)
                write(fake, after, keys)
                if restart:
                    server.stop_destination(names[0])
                    server.start_destination(names[0])
                late = config(fake, start, names[-1], filters[-1], Path(tmp, "s"), share=True, gtid=gtid)
                server.start_destination(late)
                end = next(keys)
                fake.insert("m.marks", {"id": end, "v": "end"})
                for name in names:
                    drain_shared(server, name, got[name], end)
                sharing = any(server.instance(n).parser.shared for n in names)
            finally:
                server.stop()
            assert sharing
            for name, regex in zip(names, filters, strict=True):
                alone = read_alone(fake, start, name, regex, tmp, end, gtid=gtid)
                assert upto_end(got[name], end) == upto_end(alone, end), name
    finally:
        fake.unregister()
        assert not shared.READERS._readers  # every reader ended with its destinations


def _shared_pair(fake: FakeMysql, tmp: str, regexes: tuple[str, ...], **kw: Any) -> tuple[EmbeddedServer, Any]:
    start = fake.master_status()
    server = EmbeddedServer()
    server.start()
    for i, regex in enumerate(regexes):
        server.start_destination(
            attrs.evolve(config(fake, start, f"d{i}", regex, Path(tmp, "s"), share=True, gtid=False), **kw)
        )
    return server, start


def test_a_slow_destination_leaves_the_reader_and_the_others_go_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shared, "QUEUE_EVENTS", 40)
    monkeypatch.setattr(shared, "SLOW_WAIT_S", 0.2)
    monkeypatch.setattr(shared, "REJOIN_AFTER_S", 0.5)
    fake = FakeMysql(name=f"shared_slow_{next(_names)}", mariadb=True)
    try:
        for table in (*TABLES, "m.marks"):
            fake.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, v VARCHAR(20))")
        with tempfile.TemporaryDirectory() as tmp:
            server, start = _shared_pair(fake, tmp, (r"a\..*", r"a\..*"))
            got: list[tuple[Any, ...]] = []
            slow: list[tuple[Any, ...]] = []
            try:
                wait_for("sharing", lambda: all(server.instance(n).parser.shared for n in ("d0", "d1")))
                keys = itertools.count(1)
                end = 0
                # d1 takes nothing: its store (64 entries) fills, then its queue; d0 goes on meanwhile
                for _ in range(60):
                    write(fake, [("txn", ["a.t"])], keys)
                    end = next(keys)
                    fake.insert("m.marks", {"id": end, "v": "end"})
                    drain_shared(server, "d0", got, end)
                assert not server.instance("d1").parser.shared  # it left, and reads alone
                assert server.instance("d0").parser.shared
                drain_shared(server, "d1", slow, end)
                wait_for("d1 to join again", lambda: server.instance("d1").parser.shared)
            finally:
                server.stop()
            alone = read_alone(fake, start, "d1", r"a\..*", tmp, end)
            assert upto_end(slow, end) == upto_end(alone, end)
            assert upto_end(got, end) == upto_end(alone, end)  # d0 captures what d1 does
    finally:
        fake.unregister()


def test_an_error_of_the_readers_dump_goes_to_every_destination() -> None:
    fake = FakeMysql(name=f"shared_error_{next(_names)}", mariadb=True)
    try:
        for table in (*TABLES, "m.marks"):
            fake.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, v VARCHAR(20))")
        with tempfile.TemporaryDirectory() as tmp:
            server, start = _shared_pair(fake, tmp, (r"a\..*", r"b\..*", r".*\..*"))
            names = ("d0", "d1", "d2")
            got: dict[str, list[tuple[Any, ...]]] = {n: [] for n in names}
            try:
                wait_for("sharing", lambda: all(server.instance(n).parser.shared for n in names))
                reconnects = {n: server.instance(n).parser.reconnects for n in names}
                fake.fail_after(events=7)  # the reader's next dump: the one after this drop
                keys = itertools.count(1)
                reader_of(fake)._source.close()
                write(fake, [("txn", ["a.t", "b.t"]), ("txn", ["c.t"])] * 5, keys)
                end = next(keys)
                fake.insert("m.marks", {"id": end, "v": "end"})
                for name in names:
                    drain_shared(server, name, got[name], end)
                # every destination saw the dump fail and dumped again
                assert all(server.instance(n).parser.reconnects > reconnects[n] for n in names)
                assert all(isinstance(server.instance(n).parser.last_error, SourceError) for n in names), {
                    n: server.instance(n).parser.last_error for n in names
                }
            finally:
                server.stop()
            for i, name in enumerate(names):
                alone = read_alone(fake, start, name, (r"a\..*", r"b\..*", r".*\..*")[i], tmp, end)
                assert upto_end(got[name], end) == upto_end(alone, end), name
    finally:
        fake.unregister()


def test_waiting_parsers_converted_on_the_readers_thread_get_the_entries_they_get_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One transaction at a time, each taken before the next is written: every parser waits when its transaction ends,
    so the reader converts them on its own thread (canal.parse.shared.queue) -- plain transactions only: a DDL goes to
    the parsers' own threads; the entries are still the ones each destination gets reading alone."""
    taken: list[BinlogEvent] = []
    run_inline = Subscription.run_inline

    def spied(sub: Subscription) -> bool:
        queued = [e for item in sub.items for e in (item if isinstance(item, list) else [item])]
        done = run_inline(sub)
        if done:
            taken.extend(queued)
        return done

    monkeypatch.setattr(Subscription, "run_inline", spied)
    fake = FakeMysql(name=f"shared_inline_{next(_names)}", mariadb=True)
    regexes = (r"a\..*", r"b\..*", r".*\..*")
    names = ("d0", "d1", "d2")
    try:
        for table in (*TABLES, "m.marks"):
            fake.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, v VARCHAR(20))")
        with tempfile.TemporaryDirectory() as tmp:
            server, start = _shared_pair(fake, tmp, regexes)
            got: dict[str, list[tuple[Any, ...]]] = {n: [] for n in names}
            try:
                wait_for("sharing", lambda: all(server.instance(n).parser.shared for n in names))
                reader = reader_of(fake)
                keys = itertools.count(1)
                for tables in (["a.t"], ["b.t", "a.u"], ["c.t"], ["a.t"], [], ["b.t"]) * 3:
                    write(fake, [("txn", tables)] if tables else [("ddl", "a.t")], keys)
                    end = next(keys)
                    fake.insert("m.marks", {"id": end, "v": "end"})
                    for name in names:
                        drain_shared(server, name, got[name], end)
                assert reader.inlined > 0 and any(isinstance(e, RowsEvent) for e in taken)
                # no DDL was taken on the reader's thread: the ALTERs went to the parsers' own threads
                assert not [e for e in taken if isinstance(e, QueryEvent) and "ALTER" in e.sql.upper()]
            finally:
                server.stop()
            for name, regex in zip(names, regexes, strict=True):
                alone = read_alone(fake, start, name, regex, tmp, end)
                assert upto_end(got[name], end) == upto_end(alone, end), name
    finally:
        fake.unregister()
