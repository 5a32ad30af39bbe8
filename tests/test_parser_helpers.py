"""Helpers for the parser tests: a small list-backed binlog server, a collecting sink, a position manager.

``MiniMysql`` is a deliberately small stand-in for :class:`canal.testing.FakeMysql` that implements the
:class:`~canal.parse.source.BinlogSource` protocol exactly as written (artificial rotate, format description,
blocking dumps with heartbeats, close() from another thread, errno 1236 for purged files, injected failures), so
the parser tests do not depend on anything but the protocol.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any

from canal.config import DetectingConfig, InstanceConfig, MasterConfig, RetryConfig
from canal.errors import BinlogPurgedError, SourceError, SourceUnreachableError
from canal.parse.events import (
    BinlogEvent,
    FormatDescriptionEvent,
    GtidEvent,
    GtidSetEvent,
    HeartbeatEvent,
    QueryEvent,
    RotateEvent,
    RowsEvent,
    TableMapEvent,
    XidEvent,
)
from canal.parse.source import BinlogFile, DumpRequest
from canal.position import EntryPosition, LogIdentity, LogPosition
from canal.protocol import ColumnMeta, Entry, EntryType, EventType, RowData, SqlType, TableSchema

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"

ORDERS = TableSchema(
    "shop",
    "orders",
    (
        ColumnMeta("id", SqlType.INTEGER, "int(11)", is_key=True),
        ColumnMeta("amount", SqlType.INTEGER, "int(11)"),
        ColumnMeta("note", SqlType.VARCHAR, "varchar(20)", charset="utf-8"),
    ),
)
USERS = TableSchema(
    "shop",
    "users",
    (ColumnMeta("id", SqlType.INTEGER, "int(11)", is_key=True), ColumnMeta("name", SqlType.VARCHAR, "varchar(20)")),
)
TABLES = {"shop.orders": ORDERS, "shop.users": USERS}


class MiniMysql:
    """An in-memory binlog server with files, rotation, purge, server ids, GTIDs and failure injection."""

    def __init__(self, name: str = "m", *, server_id: int = 1, clock: int = 1_700_000_000, gtid: bool = False) -> None:
        self.address = f"fake://mini-{name}"
        self.server_id = server_id
        self.clock = clock
        self.gtid = gtid
        self.cond = threading.Condition()
        self.files: list[tuple[str, list[BinlogEvent]]] = []
        self.purged: set[str] = set()
        self.down = False
        self._fail_after: list[int] = []
        self._gno = 0
        self._xid = 0
        self._table_id = 100
        self._file_no = 0
        self.dumps = 0
        self.epoch = 0  # bumped to drop every open connection
        self._new_file()

    # -- writing ----------------------------------------------------------------------------------------------

    def _end(self) -> int:
        events = self.files[-1][1]
        return events[-1].next_offset if events else 4

    def _append(self, cls: type[BinlogEvent], length: int, **fields: Any) -> BinlogEvent:
        name, events = self.files[-1]
        offset = self._end()
        event = cls(
            log_file=name,
            offset=offset,
            next_offset=offset + length,
            timestamp=self.clock,
            server_id=self.server_id,
            **fields,
        )
        events.append(event)
        return event

    def _new_file(self) -> None:
        self._file_no += 1
        self.files.append((f"mysql-bin.{self._file_no:06d}", []))
        self._append(FormatDescriptionEvent, 120, server_version="10.11-mini")
        if self.gtid:
            self._append(GtidSetEvent, 40, gtid_set=self.gtid_set())

    def gtid_set(self) -> str:
        return f"{UUID}:1-{self._gno}" if self._gno else ""

    def _notify(self) -> None:
        self.cond.notify_all()

    def _gtid_event(self) -> None:
        if self.gtid:
            self._gno += 1
            self._append(GtidEvent, 65, gtid=f"{UUID}:{self._gno}")

    def execute(self, sql: str, schema: str = "shop") -> None:
        """A statement outside any transaction (DDL, DCL, ...)."""
        with self.cond:
            self._gtid_event()
            self._append(QueryEvent, 80 + len(sql), schema=schema, sql=sql, thread_id=7)
            self._notify()

    def transaction(self, changes: Sequence[tuple[str, str, Sequence[Any]]], *, statements: Sequence[str] = ()) -> None:
        """One transaction: ``changes`` are (kind, table, rows); kind insert/update/delete; rows are tuples (for an
        update: (before, after) pairs)."""
        with self.cond:
            self._gtid_event()
            self._append(QueryEvent, 70, schema="shop", sql="BEGIN", thread_id=42)
            for sql in statements:
                self._append(QueryEvent, 80 + len(sql), schema="shop", sql=sql, thread_id=42)
            for kind, table, rows in changes:
                schema = TABLES[table]
                self._table_id += 1
                self._append(
                    TableMapEvent,
                    40,
                    table_id=self._table_id,
                    schema=schema.schema,
                    table=schema.table,
                    table_schema=schema,
                )
                event_type = {"insert": EventType.INSERT, "update": EventType.UPDATE, "delete": EventType.DELETE}[kind]
                data: list[RowData] = []
                for row in rows:
                    if kind == "insert":
                        data.append(RowData(schema, None, tuple(row)))
                    elif kind == "delete":
                        data.append(RowData(schema, tuple(row), None))
                    else:
                        data.append(RowData(schema, tuple(row[0]), tuple(row[1])))
                self._append(
                    RowsEvent,
                    30 + 20 * len(data),
                    event_type=event_type,
                    table_id=self._table_id,
                    table=schema,
                    rows=tuple(data),
                )
            self._xid += 1
            self._append(XidEvent, 31, xid=self._xid)
            self._notify()

    def rotate(self) -> None:
        with self.cond:
            self._append(RotateEvent, 48, next_file=f"mysql-bin.{self._file_no + 1:06d}")
            self._new_file()
            self._notify()

    def purge_to(self, name: str) -> None:
        with self.cond:
            for fname, _ in self.files:
                if fname == name:
                    break
                self.purged.add(fname)

    def advance_clock(self, seconds: int) -> None:
        self.clock += seconds

    def failover(self, server_id: int) -> None:
        """Another server takes over the address: a new binlog with its own files."""
        with self.cond:
            self.server_id = server_id
            self.epoch += 1
            self.files = []
            self.purged = set()
            self._file_no = 0
            self._new_file()
            self._notify()

    def crash(self) -> None:
        """The server goes down: open connections drop, new ones are refused."""
        with self.cond:
            self.down = True
            self.epoch += 1
            self._notify()

    def fail_after(self, events: int) -> None:
        """The next dump connection drops after ``events`` events."""
        with self.cond:
            self._fail_after.append(events)

    # -- reading ----------------------------------------------------------------------------------------------

    def connect(self) -> MiniConnection:
        return MiniConnection(self)

    def all_events(self) -> list[BinlogEvent]:
        return [e for name, events in self.files if name not in self.purged for e in events]

    def file(self, name: str) -> list[BinlogEvent]:
        for fname, events in self.files:
            if fname == name:
                return events
        raise KeyError(name)


class MiniConnection:
    """One connection to a MiniMysql: the BinlogSource the parser sees."""

    def __init__(self, server: MiniMysql) -> None:
        self.server = server
        self.closed = False
        self.opened = False
        self.epoch = server.epoch

    @property
    def address(self) -> str:
        return self.server.address

    @property
    def is_mariadb(self) -> bool:
        return False

    def open(self) -> None:
        if self.server.down:
            raise SourceUnreachableError(f"{self.address} is down", errno=2003)
        self.opened = True
        self.closed = False
        self.epoch = self.server.epoch

    def close(self) -> None:
        with self.server.cond:
            self.closed = True
            self.server.cond.notify_all()

    def server_id(self) -> int:
        return self.server.server_id

    def master_status(self) -> EntryPosition:
        s = self.server
        with s.cond:
            return EntryPosition(s.files[-1][0], s._end(), server_id=s.server_id, gtid=s.gtid_set() or None)

    def binlog_files(self) -> list[BinlogFile]:
        s = self.server
        with s.cond:
            return [
                BinlogFile(name, events[-1].next_offset if events else 4)
                for name, events in s.files
                if name not in s.purged
            ]

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        if self.server.down or self.closed:
            raise SourceError(f"{self.address} is down", errno=2013)
        return [(1,)]

    def dump(self, request: DumpRequest) -> Iterator[BinlogEvent]:
        s = self.server
        with s.cond:
            s.dumps += 1
            fail_after = s._fail_after.pop(0) if s._fail_after else None
            journal, position = request.journal_name, request.position
            if request.gtid_set is not None:
                done = int(request.gtid_set.rsplit("-", 1)[-1]) if request.gtid_set else 0
                journal, position = self._gtid_start(done)
            names = [n for n, _ in s.files]
            if journal not in names or journal in s.purged:
                raise BinlogPurgedError(
                    f"Could not find first log file name in binary log index file ({journal})", errno=1236
                )
        return self._dump(journal, position, request, fail_after)

    def _gtid_start(self, done: int) -> tuple[str, int]:
        s = self.server
        for name, events in s.files:
            if name in s.purged:
                continue
            for e in events:
                if isinstance(e, GtidEvent) and int(e.gtid.rsplit(":", 1)[1]) > done:
                    return name, e.offset
        return s.files[-1][0], s._end()

    def _dump(self, journal: str, position: int, request: DumpRequest, fail_after: int | None) -> Iterator[BinlogEvent]:
        s = self.server
        count = 0

        def counted(event: BinlogEvent) -> BinlogEvent:
            nonlocal count
            if fail_after is not None and count >= fail_after:
                raise SourceError("connection lost (injected)", errno=2013)
            count += 1
            return event

        yield counted(
            RotateEvent(
                log_file=journal,
                offset=0,
                next_offset=0,
                timestamp=0,
                server_id=s.server_id,
                next_file=journal,
                next_position=position,
                artificial=True,
            )
        )
        index = 0
        while True:
            with s.cond:
                while True:
                    if self.closed:
                        raise SourceError("connection closed", errno=2013)
                    if self.epoch != s.epoch:
                        raise SourceError("connection lost: the server went away", errno=2013)
                    events = s.file(journal)
                    while index < len(events) and events[index].offset < position:
                        index += 1
                    if index < len(events):
                        event = events[index]
                        index += 1
                        break
                    if not request.blocking:
                        return
                    if not s.cond.wait(request.heartbeat_period_s):
                        event = HeartbeatEvent(
                            log_file=journal,
                            offset=s._end(),
                            next_offset=s._end(),
                            timestamp=0,
                            server_id=s.server_id,
                        )
                        break
            if isinstance(event, HeartbeatEvent):
                yield counted(event)
                continue
            position = event.next_offset
            yield counted(event)
            if isinstance(event, RotateEvent):
                journal, position, index = event.next_file, 4, 0


# ---------------------------------------------------------------------------------------------------------------------


class MemoryPositions:
    """A minimal log-position manager."""

    def __init__(self, initial: LogPosition | None = None, destination: str = "example") -> None:
        self.positions: dict[str, LogPosition] = {}
        if initial is not None:
            self.positions[destination] = initial
        self.history: list[LogPosition] = []

    def get_latest_position(self, destination: str) -> LogPosition | None:
        return self.positions.get(destination)

    def persist_position(self, destination: str, position: LogPosition) -> None:
        self.positions[destination] = position
        self.history.append(position)


class CollectingSink:
    """Keeps what was handed off; lets a test wait for a condition on it."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.batches: list[list[Entry]] = []
        self.origins: list[LogIdentity] = []
        self.fail_next = 0

    def __call__(self, entries: list[Entry], origin: LogIdentity) -> None:
        with self.cond:
            if self.fail_next:
                self.fail_next -= 1
                raise RuntimeError("sink refused (injected)")
            self.batches.append(list(entries))
            self.origins.append(origin)
            self.cond.notify_all()

    @property
    def entries(self) -> list[Entry]:
        with self.cond:
            return [e for b in self.batches for e in b]

    def data(self) -> list[Entry]:
        return [e for e in self.entries if e.entry_type is not EntryType.HEARTBEAT]

    def heartbeats(self) -> list[Entry]:
        return [e for e in self.entries if e.entry_type is EntryType.HEARTBEAT]

    def wait_for(self, predicate: Any, timeout: float = 10.0) -> None:
        with self.cond:
            ok = self.cond.wait_for(lambda: predicate([e for b in self.batches for e in b]), timeout)
        assert ok, f"timed out; got {len(self.entries)} entries"

    def wait_ends(self, count: int, timeout: float = 10.0) -> None:
        self.wait_for(lambda es: sum(1 for e in es if e.is_boundary) >= count, timeout)


def key(entry: Entry) -> tuple[Any, ...]:
    """What must be equal between two runs for 'the same entry'."""
    anchor = entry.anchor
    rc = entry.row_change
    return (
        entry.entry_type,
        entry.header.log_file,
        entry.header.log_offset,
        entry.header.event_type,
        # the transaction number only: two fakes of different names have different server uuids
        None if entry.header.gtid is None else entry.header.gtid.rsplit(":", 1)[-1],
        None if rc is None else (tuple(rc.rows), rc.sql, rc.is_ddl),
        None if anchor is None else (anchor.journal_name, anchor.position, anchor.included),
        entry.rows_done,
    )


def config(
    master: MiniMysql,
    *,
    standby: MiniMysql | None = None,
    transaction_size: int = 1024,
    detecting: DetectingConfig | None = None,
    retry: RetryConfig | None = None,
    master_kwargs: dict[str, Any] | None = None,
    **kwargs: Any,
) -> InstanceConfig:
    # MasterConfig validates addresses as host:port or fake://; the mini servers register under a fake:// name
    return InstanceConfig(
        destination="example",
        master=MasterConfig(address=master.address, **(master_kwargs or {})),
        standby=None if standby is None else MasterConfig(address=standby.address),
        transaction_size=transaction_size,
        detecting=detecting or DetectingConfig(interval_s=0.05),
        retry=retry
        or RetryConfig(
            initial_backoff_s=0.001,
            max_backoff_s=0.01,
            jitter=0.5,
            max_attempts=50,
            read_timeout_s=5,
            heartbeat_period_s=1,
        ),
        **kwargs,
    )


def factory(*servers: MiniMysql) -> Any:
    by_address = {s.address: s for s in servers}

    def make(master: MasterConfig) -> MiniConnection:
        return by_address[master.address].connect()

    return make


def standard_workload(db: MiniMysql) -> None:
    """DDL, small and multi-event transactions, a rotation, a statement inside a transaction (a CREATE TABLE ...
    SELECT as MariaDB logs it under row logging: the CREATE, then its rows)."""
    db.execute("CREATE TABLE shop.orders (id INT PRIMARY KEY, amount INT, note VARCHAR(20))")
    db.advance_clock(1)
    db.transaction([("insert", "shop.orders", [(1, 10, "a"), (2, 20, "b")])])
    db.advance_clock(1)
    db.transaction(
        [
            ("insert", "shop.orders", [(3, 30, "c")]),
            ("update", "shop.orders", [((1, 10, "a"), (1, 11, "a"))]),
            ("insert", "shop.users", [(1, "ann")]),
            ("delete", "shop.orders", [(2, 20, "b")]),
        ]
    )
    db.rotate()
    db.advance_clock(1)
    db.execute("ALTER TABLE shop.orders ADD COLUMN extra INT")
    db.transaction(
        [("insert", "shop.users", [(2, "bob")])], statements=["CREATE TABLE `log` (`x` int(11) DEFAULT NULL)"]
    )
    db.advance_clock(1)
    db.transaction([("update", "shop.users", [((2, "bob"), (2, "rob"))]), ("insert", "shop.orders", [(4, 1, "d")])])
