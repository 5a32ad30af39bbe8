"""A binlog that keeps moving, against a real MariaDB: rotations, purges, server restarts, killed dump connections and
consumer restarts at random batch boundaries deliver exactly what an uninterrupted consumer gets (issue 43, item 8
and the randomized operations).

Each test runs a private server (``PURGE BINARY LOGS`` must not touch other tests' binlogs). The randomized test plays
``max(2, PYCANAL_FUZZ_EXAMPLES // 10)`` workloads (default 2; a longer run sets ``PYCANAL_FUZZ_EXAMPLES`` higher).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from random_schema_workload import FUZZ_EXAMPLES, fuzz_settings

from canal.config import DetectingConfig, InstanceConfig, MasterConfig, RetryConfig
from canal.instance import Instance
from canal.position import LogPosition
from canal.protocol import Entry, EntryType, Message
from canal.testing.services import MariaDBServer

pytestmark = pytest.mark.integration

Key = tuple[str, str, int]  # entry type, binlog file, offset


def _key(entry: Entry) -> Key:
    return entry.entry_type.name, entry.header.log_file, entry.header.log_offset


def _config(server: MariaDBServer, database: str, destination: str, meta_dir: Path, start: dict[str, Any]) -> Any:
    return InstanceConfig(
        destination=destination,
        master=MasterConfig(address=server.address, username=server.user, password=server.password, **start),
        filter_regex=rf"{database}\..*",
        transaction_size=3,
        meta_mode="file",
        meta_dir=str(meta_dir),
        flush_period_s=0,
        detecting=DetectingConfig(interval_s=0.2),
        retry=RetryConfig(
            initial_backoff_s=0.01,
            max_backoff_s=0.2,
            max_attempts=400,
            connect_timeout_s=1.0,
            read_timeout_s=2.0,
            heartbeat_period_s=0.2,
            purge_threshold=2,
        ),
    )


def _status(server: MariaDBServer) -> dict[str, Any]:
    row = server.execute("SHOW MASTER STATUS")[0]
    return {"journal_name": str(row[0]), "position": int(row[1])}


def _current_file(server: MariaDBServer) -> str:
    return str(server.execute("SHOW MASTER STATUS")[0][0])


def _kill_dump_threads(server: MariaDBServer) -> int:
    killed = 0
    for row in server.execute("SHOW PROCESSLIST"):
        if row[4] == "Binlog Dump" and row[1] == server.user:
            server.execute(f"KILL {int(row[0])}")
            killed += 1
    return killed


def _until(predicate: Callable[[], bool], what: str, timeout: float = 30) -> None:
    """Poll external state until ``predicate`` holds (a deadline, not a sleep standing in for synchronisation)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"


def _cursor_in(inst: Instance, journal: str) -> Callable[[], bool]:
    """An empty get (a caught-up consumer's cursor follows the stream), then whether the cursor is in ``journal``."""

    def check() -> bool:
        assert inst.get(100, timeout=0.05).id == -1
        cursor = inst.get_cursor()
        return cursor is not None and cursor.position.journal_name == journal

    return check


def _insert(server: MariaDBServer, database: str, ids: range) -> None:
    with server.connect(database) as conn, conn.cursor() as cur:
        cur.execute("BEGIN")
        for i in ids:
            cur.execute("INSERT INTO t VALUES (%s, 'x')", (i,))
        cur.execute("COMMIT")


def _consume(inst: Instance, count: int) -> list[Entry]:
    got: list[Entry] = []
    deadline = time.monotonic() + 30
    while len(got) < count:
        assert time.monotonic() < deadline, f"only {len(got)} of {count} entries within 30 s"
        got.extend(inst.get(100, timeout=0.05).entries)
    return got


def _kinds(entries: list[Entry]) -> str:
    names = {EntryType.TRANSACTIONBEGIN: "B", EntryType.TRANSACTIONEND: "E", EntryType.ROWDATA: "R"}
    return "".join(names[e.entry_type] for e in entries)


def test_a_caught_up_destination_survives_rotations_purges_blips_and_restarts(
    mariadb_factory: Any, tmp_path: Path
) -> None:
    server: MariaDBServer = mariadb_factory()
    server.execute("CREATE DATABASE d")
    server.execute("CREATE TABLE d.t (id INT PRIMARY KEY, note VARCHAR(10))")
    cfg = _config(server, "d", "moving", tmp_path, _status(server))
    _insert(server, "d", range(0, 3))
    with Instance(cfg) as inst:
        assert _kinds(_consume(inst, 5)) == "BRRRE"
        # the routine rotate and purge (binlog_expire_logs_seconds): the caught-up cursor follows into the new file
        server.execute("FLUSH BINARY LOGS")
        new = _current_file(server)
        server.execute(f"PURGE BINARY LOGS TO '{new}'")
        _until(_cursor_in(inst, new), f"the cursor to follow the rotate into {new}")
        # a network blip: the parser reconnects where it rests, in the new file
        assert _kill_dump_threads(server) >= 1
        _insert(server, "d", range(10, 12))
        got = _consume(inst, 4)
        assert _kinds(got) == "BRRE" and {e.header.log_file for e in got} == {new}
        assert inst.metrics().running
        server.execute("FLUSH BINARY LOGS")
        newer = _current_file(server)
        _until(_cursor_in(inst, newer), f"the cursor to follow the rotate into {newer}")
    server.execute(f"PURGE BINARY LOGS TO '{newer}'")
    # a restart of the destination resumes in the newest file: nothing purged is asked for
    with Instance(cfg) as inst:
        _insert(server, "d", range(20, 21))
        assert _kinds(_consume(inst, 3)) == "BRE"
        assert inst.metrics().running
        # a server restart rotates the binlog; the caught-up cursor follows, and a purge after it loses nothing
        server.restart()
        restarted = _current_file(server)
        _until(_cursor_in(inst, restarted), f"the cursor to follow the server restart into {restarted}")
        server.execute(f"PURGE BINARY LOGS TO '{restarted}'")
        _insert(server, "d", range(30, 32))
        assert _kinds(_consume(inst, 4)) == "BRRE"
        assert inst.metrics().running and inst.parser.error is None


# -- randomized: operations on the server and on the consumer ------------------------------------------------------

_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.integers(1, 6)),  # a transaction of n rows
        st.tuples(st.just("get"), st.integers(1, 5)),
        st.tuples(st.just("ack"), st.just(0)),
        st.tuples(st.just("rollback"), st.integers(-1, 2)),
        st.tuples(st.just("restart"), st.just(0)),  # the consumer's instance
        st.tuples(st.just("flush"), st.just(0)),
        st.tuples(st.just("purge"), st.just(0)),  # to the oldest file a cursor is in
        st.tuples(st.just("catch_up_purge"), st.just(0)),  # both caught up, then purge to the current file
        st.tuples(st.just("kill_dumps"), st.just(0)),
        st.tuples(st.just("server_restart"), st.just(0)),
    ),
    min_size=1,
    max_size=14,
)

_databases = itertools.count()


class _Run:
    """The consumer under test and an uninterrupted one (get and ack only) on the same server."""

    def __init__(self, server: MariaDBServer, tmp: Path) -> None:
        self.server = server
        self.database = f"r{next(_databases)}"
        server.execute(f"CREATE DATABASE {self.database}")
        server.execute(f"CREATE TABLE {self.database}.t (id INT PRIMARY KEY, note VARCHAR(10))")
        start = _status(server)
        self.config = _config(server, self.database, "tested", tmp / self.database / "tested", start)
        self.reference = Instance(_config(server, self.database, "reference", tmp / self.database / "ref", start))
        self.instance = Instance(self.config)
        self.expected = 0  # entries written
        self.serial = itertools.count()
        self.reference_keys: list[Key] = []
        self.acked: list[Key] = []
        self.outstanding: list[Message] = []

    def start(self) -> None:
        self.reference.start()
        self.instance.start()

    def stop(self) -> None:
        self.instance.stop()
        self.reference.stop()

    @property
    def handed(self) -> int:
        return len(self.acked) + sum(len(m.entries) for m in self.outstanding)

    def write(self, rows: int) -> None:
        first = next(self.serial) * 100
        _insert(self.server, self.database, range(first, first + rows))
        self.expected += rows + 2

    def reference_catch_up(self) -> None:
        deadline = time.monotonic() + 60
        while len(self.reference_keys) < self.expected:
            assert time.monotonic() < deadline, f"the reference got {len(self.reference_keys)} of {self.expected}"
            self.reference_keys.extend(_key(e) for e in self.reference.get(1000, timeout=0.05).entries)

    def get(self, size: int) -> None:
        if self.handed >= self.expected:
            return
        msg = self.instance.get_without_ack(size, timeout=0.05)
        if msg.id == -1:
            return
        self.reference_catch_up()
        keys = [_key(e) for e in msg.entries]
        start = self.handed
        assert keys == self.reference_keys[start : start + len(keys)], f"batch {msg.id} does not continue the stream"
        self.outstanding.append(msg)

    def ack(self) -> None:
        if self.outstanding:
            msg = self.outstanding.pop(0)
            self.instance.ack(msg.id)
            self.acked.extend(_key(e) for e in msg.entries)

    def rollback(self, which: int) -> None:
        if not self.outstanding:
            return
        if which < 0:
            self.instance.rollback()
            self.outstanding.clear()
            return
        index = min(which, len(self.outstanding) - 1)
        self.instance.rollback(self.outstanding[index].id)
        del self.outstanding[index:]

    def restart(self) -> None:
        self.instance.stop()
        self.outstanding.clear()
        self.instance = Instance(self.config)
        self.instance.start()

    def drain(self) -> None:
        self.reference_catch_up()
        while self.outstanding:
            self.ack()
        deadline = time.monotonic() + 60
        while self.handed < self.expected:
            assert time.monotonic() < deadline, f"only {self.handed} of {self.expected} entries within 60 s"
            self.get(1000)
            self.ack()

    def cursors(self) -> list[LogPosition]:
        return [c for c in (self.instance.get_cursor(), self.reference.get_cursor()) if c is not None]

    def purge(self) -> None:
        """PURGE BINARY LOGS TO the oldest file a cursor is in: nothing either destination needs."""
        files = [c.position.journal_name for c in self.cursors() if c.position.journal_name]
        if len(files) == 2:
            oldest = min(files, key=lambda name: int(name.rsplit(".", 1)[1]))
            self.server.execute(f"PURGE BINARY LOGS TO '{oldest}'")

    def catch_up_purge(self) -> None:
        """Everything acked, both cursors follow into the current file, which then is the only one left."""
        self.drain()
        current = _current_file(self.server)
        _until(_cursor_in(self.instance, current), f"the tested cursor to reach {current}")
        _until(_cursor_in(self.reference, current), f"the reference cursor to reach {current}")
        self.server.execute(f"PURGE BINARY LOGS TO '{current}'")


@fuzz_settings(max(2, FUZZ_EXAMPLES // 10))
@given(ops=_OPS)
def test_random_operations_deliver_what_an_uninterrupted_consumer_gets(
    mariadb_factory: Any, tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, int]]
) -> None:
    server = _server(mariadb_factory)
    run = _Run(server, tmp_path_factory.mktemp("delivery"))
    run.start()
    try:
        for op, arg in ops:
            if op == "write":
                run.write(arg)
            elif op == "get":
                run.get(arg)
            elif op == "ack":
                run.ack()
            elif op == "rollback":
                run.rollback(arg)
            elif op == "restart":
                run.restart()
            elif op == "flush":
                server.execute("FLUSH BINARY LOGS")
            elif op == "purge":
                run.purge()
            elif op == "catch_up_purge":
                run.catch_up_purge()
            elif op == "kill_dumps":
                _kill_dump_threads(server)
            else:
                server.restart()
            for inst in (run.instance, run.reference):
                assert inst.metrics().running, inst.metrics().last_error
        run.write(1)  # a last transaction: both runs end with its END acked
        run.drain()
        assert run.acked == run.reference_keys
        tested, reference = run.instance.get_cursor(), run.reference.get_cursor()
        assert tested is not None and reference is not None
        assert (tested.position.journal_name, tested.position.position, tested.rows_done) == (
            reference.position.journal_name,
            reference.position.position,
            reference.rows_done,
        )
    finally:
        run.stop()


def _server(factory: Any) -> MariaDBServer:
    """One private server for every example of the test (a function-scoped fixture is shared by a test's examples;
    the factory stops the server after the test)."""
    server: MariaDBServer = factory.servers[0] if factory.servers else factory()
    if not server.is_running:
        server.start()
    return server
