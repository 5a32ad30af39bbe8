"""Source trouble against real MariaDB, survived by the parser's retry policy with nothing lost and nothing repeated.

While a workload runs (transactions of varying sizes, one far larger than ``transaction_size``) the dump is
interrupted three ways -- its server thread KILLed, the server restarted, the server frozen (SIGSTOP) for longer than
the read timeout -- each while the parser is inside the large transaction, so the resume is row-exact inside it. The
delivered row changes must equal the workload's log of committed changes, in order, and the delivered entries must
equal those of an uninterrupted reference run over the same binlog.

Then a purged position: the saved cursor's binlog is PURGEd while the instance is down, and the restart stops with a
typed :class:`~canal.errors.BinlogPurgedError` naming the position -- or, with ``reset_on_purge``, resumes at the
current master position after a loud log line.
"""

from __future__ import annotations

import logging
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import attrs
import pymysql
import pytest
from test_parser_helpers import CollectingSink, MemoryPositions, key

from canal.config import DetectingConfig, InstanceConfig, MasterConfig, RetryConfig
from canal.errors import BinlogPurgedError, NotRunningError, SourceError
from canal.instance import Instance
from canal.parse.parser import EventParser
from canal.position import LogIdentity
from canal.protocol import Entry, EntryType
from canal.testing.services import MariaDBServer

pytestmark = pytest.mark.integration

BIG_BASE = 1_000_000  # ids of the large transaction's rows
TRANSACTION_SIZE = 16  # entries per hand-off: every small transaction fits, the large one is cut in parts
BIG_ROWS = 2500  # x 4000-byte rows: ~10 MB, more than socket buffers hold, so a disruption lands inside it
PAD = 4000

Change = tuple[str, str, "dict[str, Any] | None", "dict[str, Any] | None"]  # table, INSERT/UPDATE/DELETE, before, after


# -- the workload ---------------------------------------------------------------------------------------------------


@dataclass
class Statement:
    sql: str
    params: Any
    changes: list[Change]
    many: bool = False  # executemany: params is a list of rows


@dataclass
class Txn:
    number: int
    changes: list[Change]
    retries: int = 0


_LOST = (pymysql.err.OperationalError, pymysql.err.InterfaceError, OSError)


@dataclass
class Workload:
    """One writer of transactions of varying sizes to ``t`` (and a ``txlog`` row per transaction, which tells after a
    lost connection whether the transaction committed). ``log`` holds every committed transaction's row changes in
    commit order; a transaction whose connection broke is retried unless its ``txlog`` row shows it committed."""

    server: MariaDBServer
    database: str
    seed: int = 7
    model: dict[int, dict[str, Any]] = field(default_factory=dict)
    log: list[Txn] = field(default_factory=list)
    reconnects: int = 0
    error: BaseException | None = None
    _conn: Any = None
    _next_id: int = 1
    _number: int = 0
    _thread: threading.Thread | None = None

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.stop = threading.Event()
        self.done = threading.Event()

    # setup and plain statements

    def create_tables(self, timestamp: int | None = None) -> None:
        conn = self._connection()
        with conn.cursor() as cur:
            if timestamp is not None:
                cur.execute(f"SET timestamp = {timestamp}")
            cur.execute(
                "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(32) NOT NULL, n INT NOT NULL, "
                "pad VARCHAR(4000) NOT NULL DEFAULT '')"
            )
            cur.execute("CREATE TABLE txlog (txn INT PRIMARY KEY)")
            cur.execute("SET timestamp = DEFAULT")

    def _connection(self) -> Any:
        if self._conn is None:
            self._conn = self.server.connect(self.database, connect_timeout=2)
        return self._conn

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                conn._force_close()

    def close(self) -> None:
        """Stop the writer thread (if any) and drop the connection."""
        self.stop.set()
        if self._thread is not None:
            self._thread.join(30)
        self._drop_connection()

    # planning: statements and the changes they make, against a copy of the model

    def _row(self, i: int, pad: str = "") -> dict[str, Any]:
        return {"id": i, "v": f"v{i}", "n": 0, "pad": pad}

    def plan_small(self) -> tuple[list[Statement], dict[int, dict[str, Any]]]:
        rng = self.rng
        model = dict(self.model)
        number = self._number + 1
        stmts = [
            Statement("INSERT INTO txlog (txn) VALUES (%s)", (number,), [("txlog", "INSERT", None, {"txn": number})])
        ]
        for _ in range(rng.choice((1, 1, 2, 3, 5, 8))):
            kind = rng.choices(("insert", "multi", "update", "delete"), (4, 2, 3, 1))[0]
            if kind in ("update", "delete") and not model:
                kind = "insert"
            if kind in ("insert", "multi"):
                rows = [self._row(self._next_id + k) for k in range(1 if kind == "insert" else rng.randint(2, 4))]
                self._next_id += len(rows)
                values = ", ".join(["(%s, %s, %s, %s)"] * len(rows))
                params = [x for r in rows for x in (r["id"], r["v"], r["n"], r["pad"])]
                stmts.append(
                    Statement(
                        f"INSERT INTO t (id, v, n, pad) VALUES {values}",
                        params,
                        [("t", "INSERT", None, r) for r in rows],
                    )
                )
                model.update({r["id"]: r for r in rows})
            elif kind == "update":
                i = rng.choice(sorted(model))
                before = model[i]
                after = {**before, "n": before["n"] + 1, "v": f"u{before['n'] + 1}"}
                stmts.append(
                    Statement(
                        "UPDATE t SET n = %s, v = %s WHERE id = %s",
                        (after["n"], after["v"], i),
                        [("t", "UPDATE", before, after)],
                    )
                )
                model[i] = after
            else:
                i = rng.choice(sorted(model))
                stmts.append(Statement("DELETE FROM t WHERE id = %s", (i,), [("t", "DELETE", model.pop(i), None)]))
        return stmts, model

    def plan_big(self, rows: int) -> tuple[list[Statement], dict[int, dict[str, Any]]]:
        model = dict(self.model)
        number = self._number + 1
        new = [self._row(BIG_BASE + k, (f"{k:08d}" * (PAD // 8 + 1))[:PAD]) for k in range(rows)]
        model.update({r["id"]: r for r in new})
        return [
            Statement("INSERT INTO txlog (txn) VALUES (%s)", (number,), [("txlog", "INSERT", None, {"txn": number})]),
            Statement(
                "INSERT INTO t (id, v, n, pad) VALUES (%s, %s, %s, %s)",
                [(r["id"], r["v"], r["n"], r["pad"]) for r in new],
                [("t", "INSERT", None, r) for r in new],
                many=True,
            ),
        ], model

    # running

    def commit(self, plan: tuple[list[Statement], dict[int, dict[str, Any]]], timestamp: int | None = None) -> Txn:
        """Run one planned transaction until it is known to be committed (reconnecting through server trouble)."""
        stmts, model = plan
        number = self._number + 1
        txn = Txn(number, [c for s in stmts for c in s.changes])
        deadline = time.monotonic() + 60
        while True:
            try:
                conn = self._connection()
                with conn.cursor() as cur:
                    if timestamp is not None:
                        cur.execute(f"SET timestamp = {timestamp}")
                    cur.execute("BEGIN")
                    for s in stmts:
                        if s.many:
                            cur.executemany(s.sql, s.params)
                        else:
                            cur.execute(s.sql, s.params)
                    cur.execute("COMMIT")
                    if timestamp is not None:
                        cur.execute("SET timestamp = DEFAULT")
                break
            except _LOST:
                self._drop_connection()
                if self._committed(number, deadline):
                    break
                txn.retries += 1
        self._number = number
        self.model = model
        self.log.append(txn)
        return txn

    def _committed(self, number: int, deadline: float) -> bool:
        """After a lost connection: reconnect (polling until the server answers) and look for the txlog row."""
        while True:
            try:
                rows = self._connection().cursor()
                rows.execute("SELECT COUNT(*) FROM txlog WHERE txn = %s", (number,))
                (count,) = rows.fetchone()
                self.reconnects += 1
                return bool(count)
            except _LOST:
                self._drop_connection()
                if time.monotonic() > deadline:
                    raise
                self.stop.wait(0.05)  # a restarting server: poll until it answers

    def small(self, count: int) -> None:
        for _ in range(count):
            self.commit(self.plan_small())

    def start(self, before: int, big_rows: int | None, after: int, pace_s: float = 0.01) -> None:
        """In a thread: ``before`` small transactions, the large one, small ones until :attr:`stop`, ``after`` more."""

        def run() -> None:
            try:
                self.small(before)
                if big_rows is not None:
                    self.commit(self.plan_big(big_rows))
                while not self.stop.wait(pace_s):
                    self.commit(self.plan_small())
                self.small(after)
            except BaseException as exc:
                self.error = exc
            finally:
                self.done.set()

        self._thread = threading.Thread(target=run, name="workload", daemon=True)
        self._thread.start()

    def finish(self, timeout: float = 60) -> None:
        self.stop.set()
        assert self.done.wait(timeout), "the workload did not finish"
        if self.error is not None:
            raise self.error

    @property
    def last_number(self) -> int:
        return self.log[-1].number

    def changes(self) -> list[Change]:
        return [c for txn in self.log for c in txn.changes]


def row_changes(entries: list[Entry]) -> list[Change]:
    return [
        (
            e.header.table,
            e.header.event_type.name,
            r.before_dict() if r.before is not None else None,
            r.after_dict() if r.after is not None else None,
        )
        for e in entries
        if e.entry_type is EntryType.ROWDATA and e.row_change is not None and not e.row_change.is_ddl
        for r in e.iter_rows()
    ]


def delivered_txlog(entries: list[Entry]) -> list[int]:
    """The transaction numbers delivered (their txlog rows), cheaply: tests wait on this after every hand-off."""
    return [
        int(r.after_dict()["txn"])
        for e in entries
        if e.header.table == "txlog" and e.entry_type is EntryType.ROWDATA and e.row_change is not None
        for r in e.iter_rows()
        if r.after is not None
    ]


# -- the parser side ------------------------------------------------------------------------------------------------


class HoldingSink(CollectingSink):
    """Collects hand-offs; the first part of the large transaction (a hand-off without its end) blocks the parser
    thread until :meth:`release`, so a disruption can be made while the parser is inside that transaction."""

    def __init__(self) -> None:
        super().__init__()
        self.held = threading.Event()
        self._release = threading.Event()

    def __call__(self, entries: list[Entry], origin: LogIdentity) -> None:
        super().__call__(entries, origin)
        if not self.held.is_set() and _inside_big(entries):
            self.held.set()
            assert self._release.wait(60), "the test never released the sink"

    def release(self) -> None:
        self._release.set()


def _inside_big(entries: list[Entry]) -> bool:
    if any(e.entry_type is EntryType.TRANSACTIONEND for e in entries):
        return False
    return any(after and int(after.get("id", 0)) >= BIG_BASE for _, _, _, after in row_changes(entries))


def _config(server: MariaDBServer, database: str, start: dict[str, Any], **retry: Any) -> InstanceConfig:
    settings: dict[str, Any] = {
        "initial_backoff_s": 0.01,
        "max_backoff_s": 0.1,
        "max_attempts": 200,
        "connect_timeout_s": 1.0,
        "read_timeout_s": 1.0,
        "heartbeat_period_s": 0.2,
    }
    settings.update(retry)
    return InstanceConfig(
        destination="example",
        master=MasterConfig(address=server.address, username=server.user, password=server.password, **start),
        filter_regex=rf"{database}\..*",
        transaction_size=TRANSACTION_SIZE,
        detecting=DetectingConfig(interval_s=0.2),
        retry=RetryConfig(**settings),
    )


def _status(server: MariaDBServer) -> dict[str, Any]:
    row = server.execute("SHOW MASTER STATUS")[0]
    return {"journal_name": str(row[0]), "position": int(row[1])}


def _wait(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll external state until ``predicate`` holds (a deadline, not a sleep standing in for synchronisation)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.fixture
def parser_log(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    with caplog.at_level(logging.INFO, logger="canal.parse.parser"):
        yield caplog


def _dump_starts(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "dumping from" in r.getMessage()]


def _survive(
    server: MariaDBServer,
    database: str,
    disrupt: Callable[[EventParser, HoldingSink], None],
    caplog: pytest.LogCaptureFixture,
) -> EventParser:
    """Run the workload with a parser reading it, ``disrupt`` while the parser is inside the large transaction, and
    check that the delivered rows equal the committed ones exactly (and the entries those of a reference run)."""
    workload = Workload(server, database)
    workload.create_tables()
    start = _status(server)
    workload.small(5)
    sink = HoldingSink()
    positions = MemoryPositions()
    parser = EventParser("example", _config(server, database, start), None, sink, positions)
    try:
        with parser:
            workload.start(before=5, big_rows=BIG_ROWS, after=5)
            assert sink.held.wait(30), "the parser never reached the large transaction"
            disrupt(parser, sink)
            sink.release()
            _wait(lambda: parser.reconnects >= 1 or parser.error is not None, 30, "a reconnect")
            # more small transactions after the parser came back, then the rest of the workload
            done_before = len(delivered_txlog(sink.data()))
            sink.wait_for(lambda es: len(delivered_txlog(es)) >= done_before + 3, timeout=30)
            workload.finish()
            last = workload.last_number
            sink.wait_for(lambda es: last in delivered_txlog(es), timeout=30)
            assert parser.error is None
    finally:
        sink.release()
        workload.close()
    data = sink.data()
    expected = workload.changes()
    got = row_changes(data)
    assert len(got) == len(expected)
    assert got == expected  # no loss, no repeat, in commit order
    assert sum(1 for e in data if e.entry_type is EntryType.TRANSACTIONEND) == len(workload.log)
    # the parser came back inside the large transaction, after the rows it had handed off
    resumed = _dump_starts(caplog)[1:]
    assert resumed, "the parser did not reconnect"
    assert any(" row entries " in line for line in resumed), resumed
    # entry for entry (positions, anchors, rows_done) what an uninterrupted parser delivers from the same start
    reference = CollectingSink()
    with EventParser("example", _config(server, database, start), None, reference, MemoryPositions()):
        reference.wait_for(lambda es: last in delivered_txlog(es), timeout=30)
    assert [key(e) for e in data] == [key(e) for e in reference.data()]
    return parser


# -- the three disruptions ------------------------------------------------------------------------------------------


def _accepts(server: MariaDBServer) -> bool:
    try:
        with socket.create_connection((server.host, server.port), timeout=0.5):
            return True
    except OSError:
        return False


def _kill_dump_threads(server: MariaDBServer) -> int:
    killed = 0
    for row in server.execute("SHOW PROCESSLIST"):
        if row[4] == "Binlog Dump" and row[1] == server.user:
            server.execute(f"KILL {int(row[0])}")
            killed += 1
    return killed


def test_a_killed_dump_thread_is_survived_exactly(mariadb: Any, parser_log: pytest.LogCaptureFixture) -> None:
    server: MariaDBServer = mariadb.server

    def disrupt(parser: EventParser, sink: HoldingSink) -> None:
        # (dump threads of earlier tests' parsers may linger until the server next writes to them: kill all)
        assert _kill_dump_threads(server) >= 1

    parser = _survive(server, mariadb.database, disrupt, parser_log)
    assert isinstance(parser.last_error, SourceError)


def test_a_server_restart_is_survived_exactly(mariadb_factory: Any, parser_log: pytest.LogCaptureFixture) -> None:
    server: MariaDBServer = mariadb_factory()
    server.execute("CREATE DATABASE d")
    pid = server.pid

    # A graceful shutdown kills the binlog dump threads last and lets them send what the binlog holds first, so a
    # parser let go while the server shuts down could read the whole large transaction before the connection ends
    # (it did, on a fast machine). Held until the old server is gone, the parser reads only what the socket buffers
    # took: the dump thread, blocked writing to a replica that reads nothing, gives up after net_write_timeout
    # (read when a connection opens: set before the parser connects), which lets the shutdown end.
    server.execute("SET GLOBAL net_write_timeout = 2")

    def disrupt(parser: EventParser, sink: HoldingSink) -> None:
        # a graceful stop and start (same datadir and port) while the parser is held inside the large transaction;
        # the workload writes through it
        restart = threading.Thread(target=server.restart, name="restart")
        restart.start()
        _wait(lambda: not Path(f"/proc/{pid}").exists(), 30, "the old server to exit")
        sink.release()
        restart.join(60)
        assert not restart.is_alive() and server.is_running

    parser = _survive(server, "d", disrupt, parser_log)
    assert server.pid != pid
    assert isinstance(parser.last_error, SourceError)
    # the restart rotated the binlog: the parser followed the old file to its end and into the new one
    assert len(server.execute("SHOW BINARY LOGS")) >= 2


def test_a_network_stall_longer_than_the_read_timeout_is_survived_exactly(
    mariadb_factory: Any, parser_log: pytest.LogCaptureFixture
) -> None:
    server: MariaDBServer = mariadb_factory()
    server.execute("CREATE DATABASE d")
    stalled: dict[str, float] = {}

    def disrupt(parser: EventParser, sink: HoldingSink) -> None:
        server.pause()  # connections stay open, nothing is answered: no events, no heartbeats, no handshakes
        began = time.monotonic()
        try:
            sink.release()
            # the stalled dump is given up after the read timeout, and at least one reconnect attempt fails too
            _wait(lambda: parser.reconnects >= 2, 30, "the stall to be detected and a reconnect to fail")
            stalled["s"] = time.monotonic() - began
        finally:
            server.resume()

    parser = _survive(server, "d", disrupt, parser_log)
    assert stalled["s"] >= 1.0  # read_timeout_s: the dump was not abandoned before the timeout
    assert isinstance(parser.last_error, SourceError)


# -- a purged position ----------------------------------------------------------------------------------------------


def _instance_config(server: MariaDBServer, meta_dir: Path, **retry: Any) -> InstanceConfig:
    config = _config(server, "d", {"journal_name": "mysql-bin.000001", "position": 4}, purge_threshold=2, **retry)
    return attrs.evolve(config, meta_mode="file", meta_dir=str(meta_dir), flush_period_s=0)


def _consume(inst: Instance, until: Callable[[list[Entry]], bool], timeout: float = 30) -> list[Entry]:
    got: list[Entry] = []
    deadline = time.monotonic() + timeout
    while not until(got):
        assert time.monotonic() < deadline, f"timed out; got {len(got)} entries"
        got.extend(inst.get(1000, timeout=0.2).entries)
    return got


def test_a_purged_position_is_a_typed_error_or_with_reset_on_purge_a_loud_reset(
    mariadb_factory: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server: MariaDBServer = mariadb_factory()
    server.execute("CREATE DATABASE d")
    workload = Workload(server, "d")
    try:
        workload.create_tables()
        workload.small(4)
        with Instance(_instance_config(server, tmp_path)) as inst:
            got = _consume(inst, lambda es: workload.last_number in delivered_txlog(es))
        assert row_changes(got) == workload.changes()
        cursor_file = "mysql-bin.000001"
        # while the instance is down: more changes, two rotations, and the cursor's file purged
        workload.small(3)
        server.execute("FLUSH BINARY LOGS")
        workload.small(2)
        server.execute("FLUSH BINARY LOGS")
        server.execute("PURGE BINARY LOGS TO 'mysql-bin.000003'")
        assert cursor_file not in [r[0] for r in server.execute("SHOW BINARY LOGS")]

        errors: list[BaseException] = []
        inst = Instance(_instance_config(server, tmp_path), on_error=errors.append)
        with inst:
            assert inst.parser.join(30), "the parser did not give up on the purged position"
            error = inst.parser.error
            assert isinstance(error, BinlogPurgedError)
            assert error.errno == 1236
            assert cursor_file in str(error) and server.address in str(error)
            assert errors == [error]
            with pytest.raises(NotRunningError) as raised:
                inst.get(10, timeout=0.1)
            assert raised.value.__cause__ is error
            assert inst.metrics().errors == 1

        # reset_on_purge: the same restart resumes at the current master position, saying loudly what was lost
        lost_before = len(workload.log)
        caplog.clear()
        with (
            caplog.at_level(logging.INFO, logger="canal.parse.parser"),
            Instance(_instance_config(server, tmp_path, reset_on_purge=True), on_error=errors.append) as inst,
        ):
            _wait(
                lambda: (p := inst.parser.position) is not None and p.position.journal_name == "mysql-bin.000003",
                30,
                "the reset to the current master position",
            )
            loud = [r for r in caplog.records if r.levelno == logging.ERROR and "BINLOG PURGED" in r.getMessage()]
            assert len(loud) == 1 and cursor_file in loud[0].getMessage() and "LOST" in loud[0].getMessage()
            workload.small(3)
            last = workload.last_number
            got = _consume(inst, lambda es: last in delivered_txlog(es))
            assert inst.parser.error is None and len(errors) == 1
            cursor = inst.get_cursor()
            assert cursor is not None and cursor.position.journal_name == "mysql-bin.000003"
        # exactly the changes made after the reset; the ones in the purged range (and before the reset) are gone
        assert row_changes(got) == [c for txn in workload.log[lost_before:] for c in txn.changes]
    finally:
        workload.close()
