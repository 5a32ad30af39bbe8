"""The fake server's binlog: files, the events written to them (with realistic sizes and offsets), and GTIDs.

Event lengths are header (19) + a payload estimate + CRC32 (4), so offsets grow like a real binlog's. Not
thread-safe by itself: the server holds its lock around every call.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import attrs

from canal.parse import events as ev
from canal.parse.source import BinlogFile
from canal.position import journal_number
from canal.protocol import ABSENT, EventType, RowData, Rows, TableSchema
from canal.testing.fake.catalog import Table
from canal.testing.fake.columns import value_size
from canal.testing.fake.errors import FakeMysqlError
from canal.testing.fake.gtid import MariaGtids, MysqlGtids, Tag, format_mariadb_gtid_pos, format_mysql_gtid_set, merge

__all__ = ["MARIADB_VERSION", "MYSQL_VERSION", "BinlogWriter", "LogFile", "RowsStatement"]

_E = TypeVar("_E", bound=ev.BinlogEvent)

_HEADER = 19  # binlog event header
_CRC = 4  # CRC32 checksum at the end of every event (binlog_checksum=CRC32, the default)
MYSQL_VERSION = "8.0.36-fake"
MARIADB_VERSION = "10.11.6-MariaDB-fake-log"


@attrs.define(eq=False)
class LogFile:
    name: str
    mysql_gtids: MysqlGtids  # executed GTIDs before this file (its previous-GTIDs)
    mariadb_gtids: MariaGtids  # the GTID list at the start of this file
    events: list[ev.BinlogEvent] = attrs.Factory(list)
    tags: list[Tag | None] = attrs.Factory(list)
    starts: dict[int, int] = attrs.Factory(dict)  # event offset -> index in events
    end: int = 4
    closed: bool = False


@attrs.frozen(slots=True)
class RowsStatement:
    """One row-changing statement of a transaction: a table map and its rows events."""

    table: Table
    schema: TableSchema
    table_id: int
    event_type: EventType
    rows: tuple[RowData, ...]
    timestamp: int


@attrs.define(kw_only=True, eq=False)
class BinlogWriter:
    """The binlog files of one fake server and the GTID state they carry."""

    name: str
    server_id: int
    mariadb: bool
    gtid: bool
    domain_id: int
    basename: str
    max_binlog_size: int
    max_rows_event_size: int
    thread_id: int
    clock: Callable[[], int]  # the server's clock in whole seconds
    xid: int = 1000
    mysql_gtids: MysqlGtids = attrs.Factory(dict)
    mariadb_gtids: MariaGtids = attrs.Factory(dict)
    files: list[LogFile] = attrs.Factory(list)
    file_seq: int = 0

    def __attrs_post_init__(self) -> None:
        self.gtid = self.gtid or self.mariadb  # MariaDB always has GTIDs
        self.new_file()

    # -- GTIDs --------------------------------------------------------------------------------------------------------

    def server_uuid(self, server_id: int | None = None) -> str:
        """The MySQL server uuid of a server id (deterministic per fake name and id)."""
        sid = self.server_id if server_id is None else server_id
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"fake://{self.name}/{sid}"))

    def gtid_executed(self) -> str:
        if self.mariadb:
            return format_mariadb_gtid_pos(self.mariadb_gtids)
        return format_mysql_gtid_set(self.mysql_gtids)

    def gtid_purged(self) -> str:
        first = self.files[0]
        if self.mariadb:
            return format_mariadb_gtid_pos(first.mariadb_gtids)
        return format_mysql_gtid_set(first.mysql_gtids)

    def _next_gtid(self) -> tuple[str, Tag]:
        if self.mariadb:
            last = self.mariadb_gtids.get(self.domain_id, (0, 0))[1]
            seq = last + 1
            return f"{self.domain_id}-{self.server_id}-{seq}", (self.domain_id, self.server_id, seq)
        sid = self.server_uuid()
        intervals = self.mysql_gtids.get(sid, [])
        gno = intervals[-1][1] + 1 if intervals else 1
        return f"{sid}:{gno}", (sid, gno)

    def _record_gtid(self, tag: Tag) -> None:
        if self.mariadb:
            self.mariadb_gtids[tag[0]] = (tag[1], tag[2])
        else:
            sid, gno = tag
            self.mysql_gtids[sid] = merge([*self.mysql_gtids.get(sid, []), (gno, gno)])

    # -- files --------------------------------------------------------------------------------------------------------

    def emit(self, factory: Callable[..., _E], size: int, tag: Tag | None, timestamp: int, **fields: Any) -> _E:
        log = self.files[-1]
        event = factory(
            log_file=log.name,
            offset=log.end,
            next_offset=log.end + size,
            timestamp=timestamp,
            server_id=self.server_id,
            **fields,
        )
        log.starts[log.end] = len(log.events)
        log.events.append(event)
        log.tags.append(tag)
        log.end += size
        return event

    def new_file(self) -> None:
        self.file_seq += 1
        name = f"{self.basename}.{self.file_seq:06d}"
        self.files.append(LogFile(name, {k: list(v) for k, v in self.mysql_gtids.items()}, dict(self.mariadb_gtids)))
        ts = self.clock()
        if self.mariadb:
            self.emit(ev.FormatDescriptionEvent, 256 - 4, None, ts, server_version=MARIADB_VERSION, checksum=True)
            size = _HEADER + 4 + 16 * len(self.mariadb_gtids) + _CRC
            gtid_list = format_mariadb_gtid_pos(self.mariadb_gtids)
            self.emit(ev.GtidSetEvent, size, None, ts, gtid_set=gtid_list, mariadb=True)
            self.emit(ev.IgnoredEvent, _HEADER + 4 + len(name) + _CRC, None, ts, type_code=161)  # binlog checkpoint
        else:
            self.emit(ev.FormatDescriptionEvent, 122, None, ts, server_version=MYSQL_VERSION, checksum=True)
            if self.gtid:
                size = _HEADER + 8 + sum(16 + 8 + 16 * len(v) for v in self.mysql_gtids.values()) + _CRC
                self.emit(ev.GtidSetEvent, size, None, ts, gtid_set=format_mysql_gtid_set(self.mysql_gtids))

    def close_file(self) -> None:
        log = self.files[-1]
        following = f"{self.basename}.{self.file_seq + 1:06d}"
        size = _HEADER + 8 + len(following) + _CRC
        self.emit(ev.RotateEvent, size, None, self.clock(), next_file=following, next_position=4)
        log.closed = True

    def rotate(self) -> str:
        self.close_file()
        self.new_file()
        return self.files[-1].name

    def maybe_rotate(self) -> None:
        if self.files[-1].end >= self.max_binlog_size:
            self.rotate()

    def purge_to(self, name: str) -> None:
        names = [f.name for f in self.files]
        if name not in names:
            raise FakeMysqlError(f"Target log {name!r} not found in binlog index (files: {', '.join(names)})")
        del self.files[: names.index(name)]

    def failover(self, server_id: int, new_binlog: bool) -> None:
        if new_binlog:
            self.server_id = server_id
            self.files = []
            self.file_seq = 0
        else:
            self.close_file()
            self.server_id = server_id
        self.new_file()

    def enable_gtid(self) -> None:
        self.gtid = True
        self.rotate()

    def find_file(self, name: str) -> LogFile | None:
        for f in self.files:
            if f.name == name:
                return f
        return None

    def file_after(self, log: LogFile) -> LogFile | None:
        for i, f in enumerate(self.files):
            if f is log:
                return self.files[i + 1] if i + 1 < len(self.files) else None
        number = journal_number(log.name)
        for f in self.files:
            if journal_number(f.name) > number:
                return f
        return None

    def binlog_files(self) -> list[BinlogFile]:
        return [BinlogFile(f.name, f.end) for f in self.files]

    # -- statements and transactions ----------------------------------------------------------------------------------

    def _gtid_event(self, timestamp: int, standalone: bool) -> Tag | None:
        if not self.gtid:
            return None
        text, tag = self._next_gtid()
        size = _HEADER + (19 if self.mariadb else 60) + _CRC
        self.emit(
            ev.GtidEvent, size, tag, timestamp, gtid=text, mariadb=self.mariadb, standalone=standalone and self.mariadb
        )
        return tag

    def _query_event(
        self, tag: Tag | None, timestamp: int, schema: str, sql: str, sql_mode: int | None = None
    ) -> ev.QueryEvent:
        size = _HEADER + 13 + 26 + len(schema.encode()) + 1 + len(sql.encode()) + _CRC
        return self.emit(
            ev.QueryEvent,
            size,
            tag,
            timestamp,
            schema=schema,
            sql=sql,
            thread_id=self.thread_id,
            sql_mode=sql_mode,
            mariadb=self.mariadb,
        )

    def write_statement(self, schema: str, sql: str, sql_mode: int | None = None) -> list[ev.BinlogEvent]:
        """A statement outside any transaction: [GTID] query (``sql_mode``: its bit set, as the server logs it);
        returns the events written."""
        log = self.files[-1]
        first = len(log.events)
        ts = self.clock()
        tag = self._gtid_event(ts, standalone=True)
        self._query_event(tag, ts, schema, sql, sql_mode)
        if tag is not None:
            self._record_gtid(tag)
        events = log.events[first:]
        self.maybe_rotate()
        return events

    def write_transaction(self, statements: Sequence[RowsStatement], database: str) -> list[ev.BinlogEvent]:
        """[GTID] BEGIN, a table map and rows events per statement, XID; returns the events written."""
        log = self.files[-1]
        first = len(log.events)
        begin_ts = statements[0].timestamp
        tag = self._gtid_event(begin_ts, standalone=False)
        if not self.mariadb:  # MariaDB's GTID event is the BEGIN
            self._query_event(tag, begin_ts, database, "BEGIN")
        for stmt in statements:
            self._write_rows(tag, stmt)
        self.xid += 1
        self.emit(ev.XidEvent, _HEADER + 8 + _CRC, tag, self.clock(), xid=self.xid)
        if tag is not None:
            self._record_gtid(tag)
        events = log.events[first:]
        self.maybe_rotate()
        return events

    def _write_rows(self, tag: Tag | None, stmt: RowsStatement) -> None:
        t, schema = stmt.table, stmt.schema
        n = len(schema.columns)
        names = sum(len(c.name.encode()) + 1 for c in schema.columns)
        map_size = _HEADER + 8 + len(t.db) + 2 + len(t.name) + 2 + 1 + n + 1 + 2 * n + (n + 7) // 8 + names + 3
        self.emit(
            ev.TableMapEvent,
            map_size + _CRC,
            tag,
            stmt.timestamp,
            table_id=stmt.table_id,
            schema=t.db,
            table=t.name,
            table_schema=schema,
        )
        images = 2 if stmt.event_type is EventType.UPDATE else 1
        fixed = _HEADER + (8 if self.mariadb else 10) + 1 + images * ((n + 7) // 8) + _CRC
        chunks: list[tuple[list[RowData], int]] = []
        rows: list[RowData] = []
        size = fixed
        for row in stmt.rows:
            row_size = 0
            for image in (row.before, row.after):
                if image is not None:
                    row_size += (n + 7) // 8 + sum(
                        value_size(c, v) for c, v in zip(t.columns, image, strict=True) if v is not ABSENT
                    )
            if rows and size + row_size > self.max_rows_event_size:
                chunks.append((rows, size))
                rows, size = [], fixed
            rows.append(row)
            size += row_size
        chunks.append((rows, size))
        for i, (chunk, chunk_size) in enumerate(chunks):
            self.emit(
                ev.RowsEvent,
                chunk_size,
                tag,
                stmt.timestamp,
                event_type=stmt.event_type,
                table_id=stmt.table_id,
                table=schema,
                rows=Rows.of(chunk) if chunk else Rows(schema, None, ()),  # as the MySQL decoder holds them
                end_of_statement=i == len(chunks) - 1,
            )
