"""The MySQL/MariaDB binlog source: a replica connection (pymysql) with our own dump loop and decoder.

Never reconnects on its own: any failure during a dump ends the iterator with :class:`~canal.errors.SourceError`
(``errno`` 2013 for a lost connection, or the server's error number), and the parser's retry policy decides what
to do. Purged or unknown positions (errno 1236) raise :class:`~canal.errors.BinlogPurgedError`; a request the
capture user lacks the privilege for raises :class:`~canal.errors.MissingPrivilegeError` naming it, and a server
not set up for capture :class:`~canal.errors.ServerNotReadyError` (neither is retried).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pymysql  # type: ignore[import-untyped]
import pymysql.err  # type: ignore[import-untyped]

from canal.address import split_address
from canal.config import SslConfig
from canal.errors import (
    BinlogPurgedError,
    ReplicaIdConflictError,
    SchemaError,
    ServerNotReadyError,
    SourceError,
)
from canal.parse.events import BinlogEvent, TransactionPayloadEvent
from canal.parse.mysql import packets as P
from canal.parse.mysql.binlog import EventDecoder
from canal.parse.mysql.connect import (
    EXPIRED_PASSWORD,
    TlsState,
    expired_password_error,
    open_connection,
    shared_ssl_context,
    tls_state,
)
from canal.parse.mysql.replica_ids import REPLICA_IDS, derive_replica_id
from canal.parse.mysql.server_errors import (
    CR_SERVER_LOST,
    DUMP_DENIED,
    ER_MASTER_FATAL_ERROR_READING_BINLOG,
    ER_NO_SUCH_THREAD,
    ER_PARSE_ERROR,
    ER_SLAVE_SAME_ID,
    LOST,
    QUERY_DENIED,
    SAME_ID_TEXT,
    errno_of,
    privilege_error,
)
from canal.parse.source import BinlogFile, DumpRequest
from canal.position import EntryPosition
from canal.schema import SchemaCatalog, TableDef
from canal.schema.history import SchemaColumn
from canal.schema.information_schema import (
    BOOTSTRAP_DATABASES_SQL,
    BOOTSTRAP_FOREIGN_KEYS_SQL,
    BOOTSTRAP_KEYS_SQL,
    BOOTSTRAP_SQL,
    BOOTSTRAP_VERSIONED_SQL,
    COLUMN_SOURCE_SQL,
    TABLE_COLUMNS_SQL,
    TABLE_KEYS_SQL,
    catalog_from_columns,
    foreign_key_rows,
    read_objects,
    schema_columns,
    versioned_table,
)
from canal.secrets import secret_token
from canal.sql import quote_name

log = logging.getLogger(__name__)

# one table's type, and whether it has foreign keys (a child): what schema_catalog(table) reads SHOW CREATE TABLE for
_TABLE_KIND_SQL = (
    "SELECT t.TABLE_TYPE, EXISTS (SELECT 1 FROM information_schema.KEY_COLUMN_USAGE k WHERE k.TABLE_SCHEMA = "
    "t.TABLE_SCHEMA AND k.TABLE_NAME = t.TABLE_NAME AND k.REFERENCED_TABLE_NAME IS NOT NULL) "
    "FROM information_schema.TABLES t WHERE t.TABLE_SCHEMA = %s AND t.TABLE_NAME = %s"
)

_T = TypeVar("_T")

DUMP_END_WAIT_S = 2.0
"""How long :meth:`MysqlBinlogSource.close` waits for the server to end the dump threads it killed."""
DUMP_READ_BUFFER = 256 * 1024
"""Bytes the binlog dump's socket reads ask for at a time (see ``_prepare_dump``): an embedded mirror consuming a
1,000,000-change dump in the same process ran 2-9% faster with them than with 8 KB reads (three runs each)."""


def default_slave_id(address: str, server_id: int | None = None, name: str = "") -> int:
    """The replica id a dump of destination ``name`` on ``address`` derives in this process (never the server's own
    id ``server_id``); :mod:`canal.parse.mysql.replica_ids` describes the scheme."""
    sid = derive_replica_id(address, name)
    return sid + 1 if sid == server_id else sid


def binlog_status(cur: Any) -> tuple[Any, ...] | None:
    """The first row of ``SHOW MASTER STATUS`` on ``cur`` (file, position, ...), or None when binary logging is off.
    A server that no longer parses that statement (MySQL 8.4 removed it) is asked ``SHOW BINARY LOG STATUS``."""
    try:
        cur.execute("SHOW MASTER STATUS")
    except pymysql.err.MySQLError as exc:
        if errno_of(exc) != ER_PARSE_ERROR:  # a lost connection or a missing grant is that error, not a syntax question
            raise
        cur.execute("SHOW BINARY LOG STATUS")
    row = cur.fetchone()
    return None if row is None else tuple(row)


class MysqlBinlogSource:
    """A MySQL or MariaDB server read over the replication protocol (implements ``BinlogSource``).

    ``address`` is ``host:port``; the user needs REPLICATION SLAVE, REPLICATION CLIENT and SELECT (MariaDB also
    BINLOG MONITOR). ``slave_id`` defaults to :func:`default_slave_id`. ``verify_checksum`` (on by default)
    checks every event's CRC32 before its body is read, so a corrupted event never becomes rows (its cost is within
    the noise of ``benchmarks/bench_decode.py``). ``schema_fallback`` lets table maps without column names
    (``binlog_row_metadata`` below FULL) take names from information_schema, with a warning, when the dump request
    brings no schema history (``DumpRequest.schema``). ``ssl`` is how every
    connection to the server uses TLS (default: the MySQL client's PREFERRED); see :mod:`canal.parse.mysql.connect`.
    """

    def __init__(
        self,
        address: str,
        username: str,
        password: str,
        *,
        slave_id: int | None = None,
        charset: str = "utf8mb4",
        connect_timeout: float = 10.0,
        read_timeout: float | None = None,  # dump idle timeout; default max(4 heartbeats, 10 s)
        verify_checksum: bool = True,
        schema_fallback: bool = True,
        ssl: SslConfig | None = None,
        replica_name: str = "",
    ) -> None:
        self._address = address
        self._replica_name = replica_name
        self._host, self._port = split_address(address, 3306)
        self._username = username
        self._password = password
        self._slave_id = slave_id
        self._charset = charset
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._verify_checksum = verify_checksum
        self._schema_fallback = schema_fallback
        self._ssl = ssl if ssl is not None else SslConfig()
        self._side: pymysql.connections.Connection | None = None
        self._is_mariadb = False
        self._server_id: int | None = None
        self._version = ""
        self._lock = threading.RLock()
        self._query_lock = threading.Lock()  # the side connection serves one statement at a time
        self._dumps: set[pymysql.connections.Connection] = set()
        self._closed = False
        self._logs_column_names = True  # binlog_row_metadata, read by open()
        self._lower_case_names = False  # lower_case_table_names=1, read by open()
        self._system_time_zone: str | None = None  # system_time_zone, read by open()

    def __repr__(self) -> str:
        return (
            f"MysqlBinlogSource(address={self._address!r}, username={self._username!r}, slave_id={self._slave_id}, "
            f"ssl={self._ssl.mode.value})"
        )

    # -- BinlogSource --------------------------------------------------------------------------------------------------

    @property
    def address(self) -> str:
        return self._address

    @property
    def share_key(self) -> str:
        """What a read of this server is valid for in the process: everything that decides what a connection of
        this source is and how its dump is read, so that a destination reads through a shared reader
        (:mod:`canal.parse.shared`) only when the reader's connection is one it would open itself. The server's
        address; the login -- the user, and which password (and client key password): a number this process gives
        each, never the password; the auth plugin is the account's, so user and address decide it --; TLS -- the mode
        (whether it encrypts, whether it verifies the CA, the host name), the CA, client certificate and key files
        and the TLS versions --; the charset; whether event checksums are verified; and whether information_schema
        names the columns of a table map without names. Equal keys, equal connections."""
        tls = self._ssl
        parts = [f"login {secret_token(self._username, self._password, tls.key_password or '')}", tls.mode.value]
        parts += [f"{name} {path}" for name, path in (("ca", tls.ca), ("cert", tls.cert), ("key", tls.key)) if path]
        if tls.tls_versions:
            parts.append("/".join(tls.tls_versions))
        parts.append(self._charset)
        if not self._verify_checksum:
            parts.append("checksums unverified")
        if not self._schema_fallback:
            parts.append("no information_schema names")
        return f"{self._username}@{self._address} ({', '.join(parts)})"

    def dump_as(self, name: str) -> None:
        """Register this source's dumps as ``name``, with a replica id derived for it, whatever ``slave_id`` is
        configured: a shared reader's source (:mod:`canal.parse.shared`), made from the source of the destination
        that started it, reads for every destination of the process and is none of their dumps. A destination that
        leaves the process (an HA handover) dumps elsewhere with its configured id, and the server would end the
        reader's dump for it: the destinations still reading through it would get another destination's clash."""
        self._slave_id = None
        self._replica_name = name

    @property
    def is_mariadb(self) -> bool:
        self._side_connection()
        return self._is_mariadb

    @property
    def slave_id(self) -> int:
        """The configured replica id, else the one this source's destination derives (a dump steps over an id
        another dump of this process holds: :mod:`canal.parse.mysql.replica_ids`)."""
        if self._slave_id is not None:
            return self._slave_id
        return default_slave_id(self._address, self.server_id(), self._replica_name)

    def snapshot_connection(self) -> pymysql.connections.Connection:
        """A new connection for a snapshot chunk: every value as the server's text (no pymysql conversion), in
        utf8mb4 whatever charset is configured: the server converts each text column's value into the connection's
        charset, and any other one (utf8mb3, latin1) would turn what it cannot hold into '?'."""
        return self._connect(conv={}, charset="utf8mb4")

    def _connect(
        self, conv: dict[Any, Any] | None = None, charset: str | None = None
    ) -> pymysql.connections.Connection:
        context = shared_ssl_context(self._ssl)  # one per process for these settings (and their files' versions)
        return open_connection(
            address=self._address,
            host=self._host,
            port=self._port,
            user=self._username,
            password=self._password,
            ssl_config=self._ssl,
            context=context,
            charset=charset or self._charset,
            connect_timeout=self._connect_timeout,
            read_timeout=self._read_timeout,
            conv=conv,
        )

    @property
    def tls(self) -> TlsState:
        """How the side connection (and so every connection of this source) is protected; connects if needed."""
        return tls_state(self._side_connection(), self._ssl.mode)

    def _side_connection(self) -> pymysql.connections.Connection:
        with self._lock:
            if self._side is None:
                self._closed = False
                conn = self._connect()
                try:
                    with conn.cursor() as cur:
                        cur.execute("SELECT VERSION(), @@server_id")
                        row = cur.fetchone()
                except pymysql.err.MySQLError as e:  # the first statement of a new login: typed as every other
                    conn.close()
                    code, text = errno_of(e), str(e.args[1]) if len(e.args) > 1 else str(e)
                    if code in EXPIRED_PASSWORD:
                        raise expired_password_error(self._address, self._username, code, text) from None
                    raise SourceError(f"{self._address}: the first statement failed: {text}", errno=code) from None
                assert row is not None
                self._version = str(row[0])
                self._is_mariadb = "mariadb" in self._version.lower()
                self._server_id = int(row[1])
                self._side = conn
            return self._side

    def open(self) -> None:
        conn = self._side_connection()
        variables = self._variables(
            conn,
            "binlog_format",
            "binlog_row_image",
            "log_bin",
            "binlog_row_metadata",
            "mysql56_temporal_format",
            "lower_case_table_names",
            "system_time_zone",
        )
        self._lower_case_names = variables.get("lower_case_table_names", "0") == "1"
        self._system_time_zone = variables.get("system_time_zone")
        if variables.get("log_bin", "ON").upper() not in ("ON", "1"):
            raise ServerNotReadyError(
                f"{self._address} has no binary log: start the server with log-bin=mysql-bin (my.cnf [mysqld])"
            )
        fmt = variables.get("binlog_format", "").upper()
        if fmt != "ROW":
            raise ServerNotReadyError(
                f"{self._address} has binlog_format={fmt}; pycanal needs ROW: run SET GLOBAL binlog_format='ROW' "
                "(and put binlog_format=ROW in my.cnf [mysqld])"
            )
        image = variables.get("binlog_row_image", "FULL").upper()
        if image != "FULL":
            raise ServerNotReadyError(
                f"{self._address} has binlog_row_image={image}; pycanal needs FULL: run SET GLOBAL "
                "binlog_row_image='FULL' (and put binlog_row_image=FULL in my.cnf [mysqld])"
            )
        metadata = variables.get("binlog_row_metadata", "FULL").upper()
        self._logs_column_names = metadata == "FULL"
        if metadata != "FULL":
            log.info(
                "%s has binlog_row_metadata=%s: column names, keys and ENUM/SET labels come from the schema history "
                "(or, with the history off, from information_schema at read time)",
                self._address,
                metadata,
            )
        if variables.get("mysql56_temporal_format", "ON").upper() not in ("ON", "1"):
            log.warning(
                "%s has mysql56_temporal_format=OFF: tables created now with fractional-second temporal columns "
                "cannot be decoded from the binlog. Run SET GLOBAL mysql56_temporal_format=ON",
                self._address,
            )

    def _variables(self, conn: pymysql.connections.Connection, *names: str) -> dict[str, str]:
        like = " OR ".join(f"Variable_name = '{n}'" for n in names)
        rows = self._run(conn, f"SHOW GLOBAL VARIABLES WHERE {like}")
        return {str(r[0]).lower(): str(r[1]) for r in rows}

    def _run(
        self, conn: pymysql.connections.Connection, sql: str, args: tuple[Any, ...] | None = None
    ) -> list[tuple[Any, ...]]:
        def fetch_all(cur: Any) -> list[tuple[Any, ...]]:
            cur.execute(sql, args)
            return list(cur.fetchall())

        return self._on_cursor(conn, repr(sql), fetch_all)

    def _on_cursor(self, conn: pymysql.connections.Connection, what: str, use: Callable[[Any], _T]) -> _T:
        """``use`` on a cursor of ``conn``; a failure is a :class:`SourceError` naming ``what`` (and a lost side
        connection is dropped, to be opened again)."""
        try:
            with self._query_lock, conn.cursor() as cur:
                return use(cur)
        except pymysql.err.MySQLError as e:
            code = errno_of(e)
            if code in LOST or isinstance(e, pymysql.err.InterfaceError):  # InterfaceError: pymysql closed it
                code = code if code in LOST else CR_SERVER_LOST
                with self._lock:
                    if self._side is conn:
                        self._side = None
            text = str(e.args[1]) if len(e.args) > 1 else str(e)
            if code in QUERY_DENIED:
                raise privilege_error(self._address, self._username, what, code, text, dump=False) from None
            if code in EXPIRED_PASSWORD:
                raise expired_password_error(self._address, self._username, code, text) from None
            raise SourceError(f"{self._address}: {what} failed: {e}", errno=code) from None
        except OSError as e:
            with self._lock:
                if self._side is conn:
                    self._side = None
            raise SourceError(f"{self._address}: {what} failed: {e}", errno=CR_SERVER_LOST) from None

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        return self._run(self._side_connection(), sql)

    @property
    def logs_column_names(self) -> bool:
        """Whether table maps carry column names (``binlog_row_metadata=FULL``, read when the source opened)."""
        return self._logs_column_names

    @property
    def lower_case_names(self) -> bool:
        """Whether the server stores names in lower case (``lower_case_table_names=1``, read when the source opened)."""
        return self._lower_case_names

    @property
    def system_time_zone(self) -> str | None:
        """The server's ``system_time_zone`` (read when the source opened): what a session's ``SYSTEM`` zone is."""
        return self._system_time_zone

    def schema_catalog(self, table: tuple[str, str] | None = None, *, objects: bool = False) -> SchemaCatalog:
        """Every table's layout now, from information_schema (the server's own schemas aside); with ``table``
        (``(db, name)``), that table's alone (none when there is no such table); with ``objects``, its views, triggers
        and routines too (:func:`canal.schema.information_schema.read_objects`)."""
        conn = self._side_connection()
        charset = str(self._run(conn, "SELECT @@character_set_server")[0][0])
        if table is not None:
            rows = self._run(conn, TABLE_COLUMNS_SQL, table)
            primary = self._run(conn, TABLE_KEYS_SQL, table)
            kind = self._run(conn, _TABLE_KIND_SQL, table)
            children = [table] if kind and kind[0][1] else []
            versioned = [table] if kind and str(kind[0][0]) == "SYSTEM VERSIONED" else []
        else:
            rows = self._run(conn, BOOTSTRAP_SQL)
            primary = self._run(conn, BOOTSTRAP_KEYS_SQL)
            children = self._run(conn, BOOTSTRAP_FOREIGN_KEYS_SQL)
            versioned = self._run(conn, BOOTSTRAP_VERSIONED_SQL)
        keys = []
        for db, table_name in children:
            table_text = f"{quote_name(str(db))}.{quote_name(str(table_name))}"
            text = str(self._run(conn, f"SHOW CREATE TABLE {table_text}")[0][1])
            try:
                keys.extend(foreign_key_rows(str(db), text))
            except SchemaError as exc:  # its keys unknown: a mirror stops at what they cascade (CASCADE_TABLES)
                log.warning("%s: the foreign keys of %s are not known: %s", self.address, table_text, exc)
        catalog = catalog_from_columns(rows, primary, charset=charset, mariadb=self._is_mariadb, foreign_key_rows=keys)
        for db, table_name in versioned:  # their period columns: from SHOW CREATE TABLE
            text = str(self._run(conn, f"SHOW CREATE TABLE {quote_name(str(db))}.{quote_name(str(table_name))}")[0][1])
            layout = versioned_table(str(db), text, mariadb=self._is_mariadb)
            catalog.tables[layout.full_name] = layout
        for name, db_charset in self._run(conn, BOOTSTRAP_DATABASES_SQL):
            catalog.databases[str(name)] = None if db_charset is None else str(db_charset)
        if objects:
            catalog.objects = read_objects(
                lambda sql, *args: self._run(conn, sql, args or None), list(catalog.databases)
            )
        return catalog

    def server_id(self) -> int:
        self._side_connection()
        assert self._server_id is not None
        return self._server_id

    def master_status(self) -> EntryPosition:
        conn = self._side_connection()
        status = self._on_cursor(conn, "'SHOW MASTER STATUS'", binlog_status)
        if status is None:
            raise ServerNotReadyError(f"{self._address}: SHOW MASTER STATUS is empty (binary logging off?)")
        file, pos = str(status[0]), int(status[1])
        if self._is_mariadb:
            gtid = self._run(conn, "SELECT @@GLOBAL.gtid_binlog_pos")[0][0]
        else:
            gtid = self._run(conn, "SELECT @@GLOBAL.gtid_executed")[0][0]
        gtid_text = str(gtid).replace("\n", "") if gtid else None
        return EntryPosition(file, pos, None, self._server_id, gtid_text or None)

    def binlog_files(self) -> list[BinlogFile]:
        return [BinlogFile(str(r[0]), int(r[1])) for r in self.query("SHOW BINARY LOGS")]

    def close(self) -> None:
        """Close every connection of this source: the dumps end on the server too before this returns (see
        :meth:`_end_dumps`), the side connection with COM_QUIT."""
        with self._lock:
            self._closed = True
            dumps = list(self._dumps)
            side, self._side = self._side, None
        threads = []
        for conn in dumps:
            sock = getattr(conn, "_sock", None)
            if sock is not None:
                threads.append(conn.thread_id())
                # only wakes the dump's reader, which then ends with "source closed"; a socket its thread has closed
                # already raises OSError here, and there is nothing left to wake
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
        if threads:
            self._end_dumps(side, threads)
        if side is not None:
            try:
                side.close()  # sends COM_QUIT, which a broken or already closed connection cannot
            except (pymysql.err.Error, OSError):
                side._force_close()

    def _end_dumps(self, side: pymysql.connections.Connection | None, threads: list[int]) -> None:
        """End the server's threads of dumps this source closed, and wait (up to :data:`DUMP_END_WAIT_S`) until
        they are gone. A binlog dump thread waiting for new events does not read its socket: it notices a closed
        one only when it next writes to it (an event, or a heartbeat a period later), and a closed source would leave
        it on the server until then, registered under its replica id. The capture user may end its own threads."""
        own = side is not None and self._query_lock.acquire(timeout=1.0)
        conn = side if own else None
        try:
            if conn is None:  # no side connection, or one busy with a statement of another thread
                conn = self._connect()
            with conn.cursor() as cur:
                for thread in threads:
                    try:
                        cur.execute(f"KILL CONNECTION {int(thread)}")
                    except pymysql.err.OperationalError as exc:
                        if errno_of(exc) != ER_NO_SUCH_THREAD:  # already gone: what was wanted
                            raise
                listed = ", ".join(str(int(t)) for t in threads)
                deadline = time.monotonic() + DUMP_END_WAIT_S
                while True:
                    cur.execute(f"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID IN ({listed})")
                    row = cur.fetchone()
                    if not row or not row[0]:
                        return
                    if time.monotonic() > deadline:
                        log.warning(
                            "%s: binlog dump threads %s still listed %.1f s after KILL",
                            self._address,
                            listed,
                            DUMP_END_WAIT_S,
                        )
                        return
                    time.sleep(0.005)
        except (pymysql.err.Error, OSError, SourceError) as exc:
            # the dumps' sockets are closed: the server ends their threads at its next write to them at the latest
            log.warning("%s: could not end the server's binlog dump threads %s: %s", self._address, threads, exc)
        finally:
            if own:
                self._query_lock.release()
            elif conn is not None:
                with contextlib.suppress(pymysql.err.Error, OSError):
                    conn.close()

    def __enter__(self) -> MysqlBinlogSource:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- schema fallback -------------------------------------------------------------------------------------------

    # a ColumnSource for table maps without names when the dump request brings no schema history: information_schema
    # now, not strict (names with a warning), never changing version (the decoder keeps what it built)
    strict = False
    version = 0

    def repair(self, position: EntryPosition, table: TableDef) -> bool:
        return False  # information_schema is read, never written

    def columns(self, schema: str, table: str) -> list[SchemaColumn] | None:
        """The table's columns from information_schema ([] for a table it does not show).

        A failed query is never taken for "no columns": the decoder would cache UNKNOWN_COLn names (or a wrong
        fractional precision) for the table. A side connection the server dropped while the dump ran (wait_timeout)
        is replaced once; any other failure propagates and ends the dump, which the parser retries.
        """
        sql = COLUMN_SOURCE_SQL
        try:
            rows = self._run(self._side_connection(), sql, (schema, table))
        except SourceError as e:
            if e.errno not in LOST:
                raise
            log.info(
                "%s: the side connection was lost (%s); reconnecting for %s.%s's columns",
                self._address,
                e,
                schema,
                table,
            )
            rows = self._run(self._side_connection(), sql, (schema, table))
        return schema_columns(rows)

    # -- dump ---------------------------------------------------------------------------------------------------------

    def dump(self, request: DumpRequest) -> Iterator[BinlogEvent]:
        if request.gtid_set is None and not request.journal_name:
            raise SourceError(f"{self._address}: a dump needs a journal name or a GTID set")
        self._side_connection()
        return self._dump(request)

    def _where(self, request: DumpRequest) -> str:
        if request.gtid_set is not None:
            return f"GTID set {request.gtid_set!r}"
        return f"{request.journal_name}:{request.position}"

    def _idle_timeout(self, request: DumpRequest) -> float:
        if self._read_timeout is not None:
            return self._read_timeout
        return max(4 * request.heartbeat_period_s, 10.0)

    def _dump(self, request: DumpRequest) -> Iterator[BinlogEvent]:
        conn = self._connect()
        with self._lock:
            if self._closed:
                conn.close()
                raise SourceError(f"{self._address}: source is closed", errno=CR_SERVER_LOST)
            self._dumps.add(conn)
        # the server ends an older dump registered with the same id: every dump of this process holds its own
        try:
            slave_id = REPLICA_IDS.lease(
                self._address, self._replica_name, configured=self._slave_id, master_id=self._server_id
            )
        except BaseException:
            with self._lock:
                self._dumps.discard(conn)
            conn._force_close()
            raise
        log.debug("%s: dumping as replica id %d", self._address, slave_id)
        try:
            try:
                checksum = self._prepare_dump(conn, request, slave_id)
                # a server that stops sending (hung, paused, network partition) sends no heartbeats either
                conn._sock.settimeout(self._idle_timeout(request))
            except pymysql.err.MySQLError as e:
                raise self._error(e, request, slave_id=slave_id) from None
            except OSError as e:
                raise SourceError(f"{self._address}: dump setup failed: {e}", errno=CR_SERVER_LOST) from None
            parser = EventDecoder(
                request.journal_name or "",
                checksum=checksum,
                verify_checksum=self._verify_checksum,
                schema_lookup=request.schema if request.schema is not None else self if self._schema_fallback else None,
                decode_rows=request.decode_rows,
                rows_form=request.rows_form,
                decode_table=request.decode_table,
            )
            if request.journal_name:
                parser.position = request.position
            yield from self._read_events(conn, parser, request, slave_id)
        finally:
            with self._lock:
                self._dumps.discard(conn)
            REPLICA_IDS.release(self._address, slave_id)
            conn._force_close()

    def _prepare_dump(self, conn: pymysql.connections.Connection, request: DumpRequest, slave_id: int) -> bool:
        with conn.cursor() as cur:
            cur.execute("SELECT @@GLOBAL.binlog_checksum")
            row = cur.fetchone()
            alg = str(row[0]).upper() if row and row[0] is not None else "NONE"
            # MySQL 8.0.26 renamed the dump's session variables (source_*, replica_*) and still reads the old
            # names when the new ones are unset; MariaDB reads only the old ones. Setting both serves every server.
            cur.execute("SET @master_binlog_checksum = @@GLOBAL.binlog_checksum")
            if not self._is_mariadb:
                cur.execute("SET @source_binlog_checksum = @@GLOBAL.binlog_checksum")
            if request.heartbeat_period_s > 0:  # 0: no heartbeats
                period_ns = int(max(request.heartbeat_period_s, 0.001) * 1e9)
                cur.execute(f"SET @master_heartbeat_period = {period_ns}")
                if not self._is_mariadb:
                    cur.execute(f"SET @source_heartbeat_period = {period_ns}")
            if self._is_mariadb:
                cur.execute(f"SET @mariadb_slave_capability = {P.MARIA_SLAVE_CAPABILITY_GTID}")
                if request.gtid_set is not None:
                    cur.execute("SET @slave_connect_state = %s", (request.gtid_set,))
                    cur.execute("SET @slave_gtid_strict_mode = 0")
                    cur.execute("SET @slave_gtid_ignore_duplicates = 0")
            else:
                cur.execute("SET @slave_uuid = UUID(), @replica_uuid = @slave_uuid")
        host = socket.gethostname()
        conn._execute_command(P.COM_REGISTER_SLAVE, P.register_slave_packet(slave_id, host, self._username, 0))
        self._read_ok(conn)
        # The dump is one endless reply: read it in large pieces rather than pymysql's 8 KB. Each socket read releases
        # the interpreter lock, and while another thread of the process holds it (a consumer building typed batches)
        # the parser waits up to the switch interval to get it back: once per read, not once per event, with these.
        # Nothing is buffered at this point (every reply before was read whole; the server sends nothing unasked).
        conn._rfile.close()
        conn._rfile = conn._sock.makefile("rb", buffering=DUMP_READ_BUFFER)
        flags = 0 if request.blocking else P.BINLOG_DUMP_NON_BLOCK
        if self._is_mariadb:
            flags |= P.BINLOG_SEND_ANNOTATE_ROWS_EVENT  # the same events as the files hold
        if request.gtid_set is not None and not self._is_mariadb:
            conn._execute_command(P.COM_BINLOG_DUMP_GTID, P.binlog_dump_gtid_packet(slave_id, request.gtid_set, flags))
        elif request.gtid_set is not None:
            conn._execute_command(P.COM_BINLOG_DUMP, P.binlog_dump_packet("", 4, slave_id, flags))
        else:
            if not request.journal_name:
                raise SourceError(f"{self._address}: a dump needs a journal name or a GTID set")
            conn._execute_command(
                P.COM_BINLOG_DUMP, P.binlog_dump_packet(request.journal_name, request.position, slave_id, flags)
            )
        return alg == "CRC32"

    def _read_ok(self, conn: pymysql.connections.Connection) -> None:
        data = self._read_payload(conn)
        if data[0] == 0xFF:
            self._raise_error_packet(data)

    def _read_payload(self, conn: pymysql.connections.Connection) -> bytes:
        try:
            data, conn._next_seq_id = P.read_packet(conn._read_bytes, conn._next_seq_id)
        except ValueError as e:
            raise SourceError(f"{self._address}: malformed reply: {e}", errno=2027) from None
        if not data:
            raise SourceError(f"{self._address}: empty reply packet", errno=2027)
        return data

    def _raise_error_packet(self, data: bytes) -> None:
        code, msg = P.parse_error_packet(data)
        raise pymysql.err.OperationalError(code, msg)

    def _read_events(
        self, conn: pymysql.connections.Connection, parser: EventDecoder, request: DumpRequest, slave_id: int
    ) -> Iterator[BinlogEvent]:
        read = conn._read_bytes
        read_packet = P.read_packet
        parse = parser.parse
        seq = conn._next_seq_id
        while True:
            try:
                data, seq = read_packet(read, seq)
            except pymysql.err.MySQLError as e:
                raise self._error(e, request, parser, slave_id) from None
            except OSError as e:
                raise SourceError(
                    f"{self._address}: binlog dump connection lost after {parser.log_file}:{parser.position}: {e}",
                    errno=CR_SERVER_LOST,
                ) from None
            except ValueError as e:  # the stream lost its framing: nothing after this point can be trusted
                raise SourceError(
                    f"{self._address}: malformed packet in the binlog dump after {parser.log_file}:{parser.position}: "
                    f"{e}",
                    errno=2027,
                ) from None
            if not data:
                raise SourceError(
                    f"{self._address}: empty packet in the binlog dump after {parser.log_file}:{parser.position}",
                    errno=2027,
                )
            first = data[0]
            if first == 0:
                ev = parse(data, 1)
                if ev.__class__ is TransactionPayloadEvent:
                    assert isinstance(ev, TransactionPayloadEvent)
                    yield from parser.expand(ev)
                else:
                    yield ev
            elif first == 0xFE and len(data) < 9:
                return  # EOF: a non-blocking dump reached the end of the binlog
            elif first == 0xFF:
                try:
                    self._raise_error_packet(data)
                except pymysql.err.MySQLError as e:
                    raise self._error(e, request, parser, slave_id) from None
            else:
                raise SourceError(
                    f"{self._address}: unexpected packet 0x{first:02x} in the binlog dump after "
                    f"{parser.log_file}:{parser.position}",
                    errno=2027,
                )

    def _error(
        self,
        exc: pymysql.err.MySQLError,
        request: DumpRequest,
        parser: EventDecoder | None = None,
        slave_id: int | None = None,
    ) -> SourceError:
        code = errno_of(exc)
        text = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
        if self._closed:
            return SourceError(f"{self._address}: binlog dump stopped: source closed", errno=code or CR_SERVER_LOST)
        if slave_id is not None and (code == ER_SLAVE_SAME_ID or SAME_ID_TEXT in text):
            return self._conflict(slave_id, code, text)
        if code in DUMP_DENIED and code is not None:
            return privilege_error(self._address, self._username, "the binlog dump", code, text, dump=True)
        if code in EXPIRED_PASSWORD and code is not None:  # the password expired since the side connection logged in
            return expired_password_error(self._address, self._username, code, text)
        if code == ER_MASTER_FATAL_ERROR_READING_BINLOG:
            return BinlogPurgedError(
                f"{self._address} cannot send the binlog from {self._where(request)}: {text}", errno=code
            )
        where = f" after {parser.log_file}:{parser.position}" if parser is not None else ""
        return SourceError(f"{self._address}: binlog dump failed{where}: {text}", errno=code or CR_SERVER_LOST)

    def _conflict(self, slave_id: int, code: int | None, text: str) -> ReplicaIdConflictError:
        """Another replica registered this dump's id, and the server ended this dump for it."""
        if self._slave_id is None:
            # a derived id: the next dump of this destination derives another
            REPLICA_IDS.redraw(self._address, self._replica_name)
            fix = "pycanal derived this id; the next attempt derives another"
        else:
            fix = (
                "give this destination a slave_id (canal.instance.mysql.slaveId) that no other replica of the server "
                "uses, or leave it unset to have one derived"
            )
        return ReplicaIdConflictError(
            f"{self._address}: another replica connected with replica id (server_id) {slave_id} and the server ended "
            f"this binlog dump ({text}); {fix}",
            replica_id=slave_id,
            errno=code,
        )
