"""FakeMysql: the in-memory server that composes the catalog, the binlog, dumps and failure injection."""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from canal.parse.events import BinlogEvent, RotateEvent
from canal.parse.source import BinlogFile, DumpRequest
from canal.position import EntryPosition
from canal.protocol import TableSchema
from canal.schema import SchemaCatalog
from canal.sql import DmlStatement, OtherStatement, SqlError, SqlMode, TransactionStatement, read_statements
from canal.sql.modes import mode_bits
from canal.testing.fake import source as registry
from canal.testing.fake.binlog import MARIADB_VERSION, MYSQL_VERSION, BinlogWriter
from canal.testing.fake.catalog import Catalog
from canal.testing.fake.dump import FakeDump, locate_file, locate_gtid
from canal.testing.fake.errors import FakeMysqlError
from canal.testing.fake.faults import Faults
from canal.testing.fake.queries import answer
from canal.testing.fake.row_image import RowImage, checked
from canal.testing.fake.source import NAME_PATTERN, FakeBinlogSource, lookup_fake
from canal.testing.fake.transaction import FakeTransaction

__all__ = ["DEFAULT_START_TIME", "FakeMysql"]

DEFAULT_START_TIME = 1_700_000_000
"""The clock's default start: 2023-11-14 22:13:20 UTC, so event timestamps are the same on every run."""

# statements that write nothing to a binlog: execute() refuses them (query() answers reads)
_NOT_LOGGED = frozenset({"SELECT", "SHOW", "START", "SET", "DESC", "DESCRIBE"})


def _epoch_seconds(value: float | dt.datetime) -> float:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return value.timestamp()
    return float(value)


class FakeMysql:
    """An in-memory MySQL/MariaDB server: drive it like a database, dump its binlog like a real one.

    See the package documentation for the full behaviour; every method is safe to call while dumps run in other
    threads (one writer thread is assumed: the test).
    """

    def __init__(
        self,
        name: str = "fake",
        *,
        server_id: int = 1,
        gtid: bool = False,
        mariadb: bool = False,
        start_time: float | dt.datetime = DEFAULT_START_TIME,
        database: str = "",
        max_binlog_size: int = 1 << 30,
        max_rows_event_size: int = 8192,
        basename: str = "mysql-bin",
        domain_id: int = 0,
        thread_id: int = 8,
        register: bool = True,
        charset: str = "utf8mb4",
        row_image: RowImage = "FULL",
    ) -> None:
        if not NAME_PATTERN.match(name):
            raise FakeMysqlError(f"a FakeMysql name must match {NAME_PATTERN.pattern}, got {name!r}")
        self._name = name
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)  # new events, state changes: wakes dumps
        self._idle_cond = threading.Condition(self._lock)  # a dump started waiting: wakes wait_for_idle_dumps
        self._clock = _epoch_seconds(start_time)
        self._mariadb = mariadb
        self._row_image = checked(row_image)
        self._domain_id = domain_id
        self._catalog = Catalog(mariadb=mariadb, database=database, charset=charset)
        self._log = BinlogWriter(
            name=name,
            server_id=server_id,
            mariadb=mariadb,
            gtid=gtid,
            domain_id=domain_id,
            basename=basename,
            max_binlog_size=max_binlog_size,
            max_rows_event_size=max_rows_event_size,
            thread_id=thread_id,
            clock=lambda: self.now,
        )
        self._faults = Faults()
        self._epoch = 0  # bumped when every open dump must drop (failover, re-registration, unregister)
        self._tx_open = False
        self._dump_attempts = 0
        self._dumps_started = 0
        self._connect_attempts = 0
        self._dump_requests: list[DumpRequest] = []
        self._active_dumps = 0
        self._waiting_dumps = 0
        self._default_source: FakeBinlogSource | None = None
        if register:
            old = registry.register(self)
            if old is not None:
                old._drop_connections()

    def __repr__(self) -> str:
        kind = "MariaDB" if self._mariadb else "MySQL"
        return f"<FakeMysql {self.address} {kind} server_id={self._log.server_id} at {self.current_file}:{self.end}>"

    # -- registry -----------------------------------------------------------------------------------------------------

    @staticmethod
    def lookup(name: str) -> FakeMysql:
        """The fake registered under NAME (``fake://`` prefix allowed); SourceUnreachableError when none is."""
        return lookup_fake(name)

    def unregister(self) -> None:
        """Leave the registry (if still registered under the name) and drop open dump connections."""
        registry.unregister(self)
        self._drop_connections()

    def __enter__(self) -> FakeMysql:
        return self

    def __exit__(self, *exc: object) -> None:
        self.unregister()

    def _drop_connections(self) -> None:
        with self._cond:
            self._epoch += 1
            self._cond.notify_all()

    def source(self) -> FakeBinlogSource:
        """A new BinlogSource connected to this fake (address ``fake://NAME``)."""
        return FakeBinlogSource(self)

    # -- properties ---------------------------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def address(self) -> str:
        return f"fake://{self._name}"

    @property
    def is_mariadb(self) -> bool:
        return self._mariadb

    @property
    def row_image(self) -> RowImage:
        """The server's ``binlog_row_image`` (FULL, MINIMAL or NOBLOB): which columns the rows events' images carry
        (:mod:`canal.testing.fake.row_image`); a transaction may set its own (``transaction(row_image=...)``, a
        session's ``SET binlog_row_image``). Settable, like ``SET GLOBAL``: later transactions follow it."""
        return self._row_image

    @row_image.setter
    def row_image(self, value: RowImage) -> None:
        self._row_image = checked(value)

    @property
    def gtid_enabled(self) -> bool:
        return self._log.gtid

    @property
    def database(self) -> str:
        """The session's current database (``USE``); the schema of the query events written."""
        return self._catalog.database

    @property
    def now(self) -> int:
        """The clock in whole seconds since the epoch: the timestamp of events written now."""
        return int(self._clock)

    @property
    def current_file(self) -> str:
        with self._lock:
            return self._log.files[-1].name

    @property
    def end(self) -> int:
        """The end offset of the current file."""
        with self._lock:
            return self._log.files[-1].end

    @property
    def dump_attempts(self) -> int:
        """Dump requests received, refused ones included."""
        return self._dump_attempts

    @property
    def dumps_started(self) -> int:
        """Dumps accepted (a retrying client raises this once per reconnect)."""
        return self._dumps_started

    @property
    def connect_attempts(self) -> int:
        """``source.open()`` calls, refused ones included."""
        return self._connect_attempts

    @property
    def dump_requests(self) -> list[DumpRequest]:
        """The requests of accepted dumps, in order: where each (re)connect started."""
        with self._lock:
            return list(self._dump_requests)

    @property
    def active_dumps(self) -> int:
        return self._active_dumps

    @property
    def waiting_dumps(self) -> int:
        """Dumps blocked right now (at the end of the binlog, or stalled)."""
        return self._waiting_dumps

    def server_uuid(self, server_id: int | None = None) -> str:
        """The MySQL server uuid of a server id (deterministic per fake name and id)."""
        return self._log.server_uuid(server_id)

    # -- clock --------------------------------------------------------------------------------------------------------

    def advance_clock(self, seconds: float) -> int:
        """Move the clock forward; returns the new time in whole seconds."""
        if seconds < 0:
            raise FakeMysqlError("advance_clock() moves forward only; use set_clock() to go back")
        with self._lock:
            self._clock += seconds
            return int(self._clock)

    def set_clock(self, when: float | dt.datetime) -> int:
        """Set the clock (seconds since the epoch, or a datetime; naive ones are UTC)."""
        with self._lock:
            self._clock = _epoch_seconds(when)
            return int(self._clock)

    # -- binlog files -------------------------------------------------------------------------------------------------

    def _check_writable(self) -> None:
        if self._tx_open:
            raise FakeMysqlError("a transaction is open: finish the `with fake.transaction()` block first")

    def rotate(self) -> str:
        """FLUSH BINARY LOGS: end the current file with a RotateEvent and start the next; returns its name."""
        with self._cond:
            name = self._log.rotate()
            self._cond.notify_all()
            return name

    def purge_to(self, name: str) -> None:
        """PURGE BINARY LOGS TO 'name': drop the files before it."""
        with self._cond:
            self._log.purge_to(name)

    def failover(self, server_id: int, *, new_binlog: bool = False) -> None:
        """The master dies and a replica with ``server_id`` takes over; open dump connections drop (errno 2013).

        By default the promoted server's binlog is modeled as the continuation of the same file sequence: the old
        file ends with a RotateEvent and the next file (``mysql-bin.N+1``) is written by the new server id, so old
        positions stay valid. With ``new_binlog=True`` the promoted server has a binlog of its own: every old file
        is gone and a new sequence starts again at ``mysql-bin.000001`` (whose offsets mean something else), while
        the executed GTIDs, the schemas and the table contents carry over -- old file positions then fail (purged)
        or point at unrelated events, as they would on a real promoted replica; GTIDs and timestamps still work.
        MySQL GTIDs of the new server use a new server uuid; MariaDB GTIDs carry the new server id.
        """
        with self._cond:
            self._check_writable()
            self._epoch += 1
            self._log.failover(server_id, new_binlog)
            self._cond.notify_all()

    def enable_gtid(self) -> None:
        """Turn GTID mode on (MySQL; MariaDB always has GTIDs): the binlog rotates, later transactions get GTIDs."""
        with self._cond:
            if self._log.gtid:
                return
            self._log.enable_gtid()
            self._cond.notify_all()

    # -- DML ----------------------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self, *, row_image: RowImage | None = None) -> Iterator[FakeTransaction]:
        """``with fake.transaction() as tx:`` -- written as one binlog transaction when the block ends normally;
        an exception in the block writes nothing and changes no rows. ``row_image``: the ``binlog_row_image`` of
        this transaction's rows (a session's setting; default: the server's, :attr:`row_image`)."""
        image = self._row_image if row_image is None else checked(row_image)
        with self._lock:
            self._check_writable()
            self._tx_open = True
        tx = FakeTransaction(self, image)
        try:
            yield tx
        except BaseException:
            with self._lock:
                tx.open = False
                self._tx_open = False
            raise
        self._commit(tx)

    def _commit(self, tx: FakeTransaction) -> None:
        with self._cond:
            tx.open = False
            self._tx_open = False
            if not tx._stmts:
                return
            tx.events = self._log.write_transaction(tx._stmts, self._catalog.database)
            for full_name, changes in tx._overlay.items():
                table = self._catalog.tables.get(full_name)
                if table is None:
                    continue
                for key, image in changes.items():
                    if image is None:
                        table.data.pop(key, None)
                    else:
                        table.data[key] = image
            self._cond.notify_all()

    def insert(self, table: str, row: Mapping[str, Any]) -> list[BinlogEvent]:
        """A one-statement transaction; returns the events written."""
        with self.transaction() as tx:
            tx.insert(table, row)
        return tx.events

    def insert_many(self, table: str, rows: Iterable[Mapping[str, Any]]) -> list[BinlogEvent]:
        with self.transaction() as tx:
            tx.insert_many(table, rows)
        return tx.events

    def update(self, table: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> list[BinlogEvent]:
        with self.transaction() as tx:
            tx.update(table, before, after)
        return tx.events

    def delete(self, table: str, row: Mapping[str, Any]) -> list[BinlogEvent]:
        with self.transaction() as tx:
            tx.delete(table, row)
        return tx.events

    # -- tables -------------------------------------------------------------------------------------------------------

    def table(self, name: str) -> TableSchema:
        """The current schema of a table (``db.table``, or ``table`` in the current database)."""
        with self._lock:
            return self._catalog.table(name).schema

    def schema_catalog(self) -> SchemaCatalog:
        """A copy of the table layouts now (what a schema history bootstraps from)."""
        with self._lock:
            return self._catalog.schemas.copy()

    def tables(self) -> list[str]:
        with self._lock:
            return sorted(self._catalog.tables)

    def rows(self, name: str) -> list[dict[str, Any]]:
        """The table's current contents, like ``SELECT *``: one dict per row, ordered by primary key."""
        with self._lock:
            t = self._catalog.table(name)
            items = list(t.data.items())
            names = t.schema.names
        try:
            items.sort(key=lambda kv: kv[0])
        except TypeError:
            items.sort(key=lambda kv: repr(kv[0]))
        return [dict(zip(names, image, strict=True)) for _, image in items]

    # -- DDL ----------------------------------------------------------------------------------------------------------

    def execute(self, sql: str, *, schema: str | None = None, sql_mode: str | None = None) -> list[BinlogEvent]:
        """Run a DDL (or any other logged statement) and write it as a QueryEvent; returns the events written.

        ``schema`` overrides the session database for this statement. ``USE db`` changes the session database
        and writes nothing (as on a real server). Row changes go through :meth:`transaction` / :meth:`insert`.
        The statement is read by the SQL reader (:mod:`canal.sql`), as pycanal reads every statement, under
        ``sql_mode`` (names, ``'NO_BACKSLASH_ESCAPES,ANSI_QUOTES'``; None: the default mode), which the event logs
        as the server does (its bit set).
        """
        bits = None if sql_mode is None else mode_bits(sql_mode)
        with self._cond:
            self._check_writable()
            session = self._catalog.database if schema is None else schema
            try:
                statements = read_statements(sql, mode=SqlMode.of(bits, mariadb=self._log.mariadb))
            except SqlError as exc:
                raise FakeMysqlError(f"FakeMysql cannot read {sql!r}: {exc}") from None
            if not statements:
                raise FakeMysqlError("empty statement")
            if len(statements) > 1:
                raise FakeMysqlError(f"one statement per execute(), got {len(statements)}: {sql!r}")
            stmt = statements[0]
            if isinstance(stmt, OtherStatement) and stmt.verb == "USE":
                if stmt.schema is None:
                    raise FakeMysqlError(f"USE needs a database: {sql!r}")
                self._catalog.use(stmt.schema)
                return []
            if isinstance(stmt, DmlStatement):
                raise FakeMysqlError(f"{stmt.verb} through execute() is not modeled: use fake.insert()/transaction()")
            not_logged = isinstance(stmt, OtherStatement) and stmt.verb in _NOT_LOGGED
            if isinstance(stmt, TransactionStatement) or not_logged:
                raise FakeMysqlError(f"{sql.split()[0].upper()} writes nothing to the binlog: use query() for reads")
            text = sql.strip().rstrip(";").strip()
            logged_schema, logged_sql = self._catalog.apply(stmt, session, text)
            events = self._log.write_statement(logged_schema, logged_sql, bits)
            self._cond.notify_all()
            return events

    # -- serving ------------------------------------------------------------------------------------------------------

    def server_id(self) -> int:
        return self._log.server_id

    def gtid_executed(self) -> str:
        """The executed GTID set: MySQL ``uuid:1-N,...`` or MariaDB ``domain-server-seq,...`` ("" when none)."""
        with self._lock:
            return self._log.gtid_executed()

    def gtid_purged(self) -> str:
        """GTIDs no longer in the binlog (MySQL ``gtid_purged``; MariaDB: the GTID list of the oldest file)."""
        with self._lock:
            return self._log.gtid_purged()

    def master_status(self) -> EntryPosition:
        """SHOW MASTER STATUS: current file and end offset, server id, executed GTID set (when GTIDs are on)."""
        with self._lock:
            log = self._log.files[-1]
            gtid = self._log.gtid_executed() if self._log.gtid else None
            return EntryPosition(
                journal_name=log.name, position=log.end, server_id=self._log.server_id, gtid=gtid or None
            )

    def binlog_files(self) -> list[BinlogFile]:
        """SHOW BINARY LOGS: the files still present, oldest first, with their sizes."""
        with self._lock:
            return self._log.binlog_files()

    def events(self, log_file: str | None = None) -> list[BinlogEvent]:
        """The events stored in one file (or in every present file), like SHOW BINLOG EVENTS."""
        with self._lock:
            present = self._log.files
            files = present if log_file is None else [f for f in present if f.name == log_file]
            if log_file is not None and not files:
                raise FakeMysqlError(f"no binlog file {log_file!r} (files: {[f.name for f in present]})")
            return [e for f in files for e in f.events]

    def dump(self, request: DumpRequest | None = None) -> FakeDump:
        """A dump on this fake's own default source (``request`` defaults to a non-blocking dump of everything)."""
        if self._default_source is None:
            self._default_source = FakeBinlogSource(self)
        return self._default_source.dump(request if request is not None else DumpRequest(blocking=False))

    def _open_dump(self, source: FakeBinlogSource, request: DumpRequest) -> FakeDump:
        with self._cond:
            self._dump_attempts += 1
            self._faults.check_connect(self.address)
            if request.gtid_set is not None:
                log, skip = locate_gtid(self._log, request.gtid_set)
                index, position = 0, 4
                pending: list[BinlogEvent] = []
            else:
                log, index, position, pending = locate_file(
                    self._log, self.address, request.journal_name, request.position
                )
                skip = None
            rotate = RotateEvent(
                log_file=log.name,
                offset=0,
                next_offset=0,
                timestamp=0,
                server_id=self._log.server_id,
                next_file=log.name,
                next_position=position,
                artificial=True,
            )
            pending.insert(0, rotate)
            budget = self._faults.take_budget()
            self._dumps_started += 1
            self._dump_requests.append(request)
            self._active_dumps += 1
            dump = FakeDump(self, source, request, log, index, pending, skip, budget)
            dump._pos = position
            return dump

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        """Answer the few statements a parser sends for detecting and status (SELECT 1, SHOW MASTER STATUS, SHOW
        BINARY LOGS, SELECT @@var, SHOW VARIABLES LIKE, SELECT VERSION(), SHOW CREATE TABLE, SELECT * FROM t)."""
        self._faults.check_up(self.address)
        with self._lock:
            return answer(self, sql)

    def _variables(self) -> dict[str, Any]:
        gtid = self.gtid_executed()
        log = self._log
        return {
            "server_id": log.server_id,
            "server_uuid": self.server_uuid(),
            "version": MARIADB_VERSION if self._mariadb else MYSQL_VERSION,
            "version_comment": "pycanal FakeMysql",
            "log_bin": 1,
            "log_bin_basename": log.basename,
            "binlog_format": "ROW",
            "binlog_row_image": "FULL",
            "binlog_row_metadata": "FULL",
            "binlog_checksum": "CRC32",
            "max_binlog_size": log.max_binlog_size,
            "gtid_mode": "ON" if log.gtid else "OFF",
            "enforce_gtid_consistency": "ON" if log.gtid else "OFF",
            "gtid_executed": "" if self._mariadb else gtid,
            "gtid_purged": "" if self._mariadb else self.gtid_purged(),
            "gtid_binlog_pos": gtid if self._mariadb else "",
            "gtid_current_pos": gtid if self._mariadb else "",
            "gtid_slave_pos": "",
            "gtid_domain_id": self._domain_id,
            "gtid_strict_mode": 0,
            "character_set_server": "utf8mb4",
            "time_zone": "SYSTEM",
            "system_time_zone": "UTC",
            "read_only": 0,
            "log_slave_updates": 1,
            "hostname": f"fake-{self._name}",
            "port": 0,
        }

    # -- failure injection --------------------------------------------------------------------------------------------

    def fail_after(self, events: int) -> None:
        """The next dump connection drops (SourceError errno 2013) after yielding ``events`` events (counting every
        event it yields: the artificial rotate and format description, heartbeats included)."""
        if events < 0:
            raise FakeMysqlError("fail_after(events=...) needs a count >= 0")
        with self._lock:
            self._faults.fail_after = events

    def refuse(self, errno: int = 1040, times: int = 1, message: str | None = None) -> None:
        """The next ``times`` connect (``source.open()``) or dump attempts fail with ``errno``, typed as
        :class:`~canal.parse.mysql.MysqlBinlogSource` types it: SourceAccessDeniedError for a refused login (1044,
        1045, 1698), MissingPrivilegeError for 1227, SourceUnreachableError for connection errors (2002, 2003, 2005,
        2006, 2013, 1040, 1129, 1130), BinlogPurgedError for 1236, SourceError otherwise."""
        with self._lock:
            self._faults.refuse_errno = errno
            self._faults.refuse_left = times
            self._faults.refuse_message = message

    def stall(self) -> None:
        """Dumps yield nothing, not even heartbeats, until :meth:`unstall` or until they are closed."""
        self._set_faults(stalled=True)

    def unstall(self) -> None:
        self._set_faults(stalled=False)

    def down(self) -> None:
        """The server becomes unreachable: connect/dump/query raise SourceUnreachableError (errno 2003) and open
        dumps drop with SourceError errno 2013."""
        self._set_faults(down=True)

    def up(self) -> None:
        self._set_faults(down=False)

    def _set_faults(self, **changes: bool) -> None:
        with self._cond:
            for name, value in changes.items():
                setattr(self._faults, name, value)
            self._cond.notify_all()  # waiting dumps look again

    @property
    def is_down(self) -> bool:
        return self._faults.down

    def wait_for_idle_dumps(self, count: int = 1, timeout: float = 5.0) -> bool:
        """Block until at least ``count`` dumps are waiting (caught up, or stalled); False on timeout.

        Lets a test act exactly when a consumer thread has caught up, without sleeping.
        """
        with self._idle_cond:
            return self._idle_cond.wait_for(lambda: self._waiting_dumps >= count, timeout)
