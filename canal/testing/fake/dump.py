"""Dump connections of the fake server: where a dump starts (file position or GTID set), and the iterator that
serves events, waits at the end of the binlog, sends heartbeats and fails like a dropped connection."""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import attrs

from canal.errors import BinlogPurgedError, SourceError
from canal.parse.events import (
    BinlogEvent,
    HeartbeatEvent,
    IgnoredEvent,
    RotateEvent,
    RowsEvent,
    TableMapEvent,
)
from canal.parse.mysql import packets as P
from canal.parse.source import DumpRequest
from canal.protocol import EventType
from canal.testing.fake.binlog import BinlogWriter, LogFile
from canal.testing.fake.gtid import (
    Tag,
    format_mariadb_gtid_pos,
    format_mysql_gtid_set,
    mysql_contains,
    mysql_subset,
    parse_mariadb_gtid_pos,
    parse_mysql_gtid_set,
)

if TYPE_CHECKING:
    from canal.testing.fake.server import FakeMysql
    from canal.testing.fake.source import FakeBinlogSource

__all__ = ["FakeDump", "locate_file", "locate_gtid"]


class FakeDump(Iterator[BinlogEvent]):
    """An iterator over one dump connection. ``close()`` (from any thread) ends it promptly with StopIteration."""

    def __init__(
        self,
        fake: FakeMysql,
        source: FakeBinlogSource,
        request: DumpRequest,
        log: LogFile,
        index: int,
        pending: list[BinlogEvent],
        skip: Callable[[Tag], bool] | None,
        budget: int | None,
    ) -> None:
        self._fake = fake
        self._source = source
        self._source_gen = source._generation
        self._epoch = fake._epoch
        self.request = request
        self._file = log
        self._index = index
        self._pos = request.position if request.gtid_set is None and request.journal_name else 4
        self._pending = collections.deque(pending)
        self._skip = skip
        self._budget = budget
        self._yielded = 0
        self._idle_since = time.monotonic()
        self._closed = False
        self._error: SourceError | None = None
        self._finished = False

    def __iter__(self) -> FakeDump:
        return self

    def __enter__(self) -> FakeDump:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed or self._finished

    @property
    def events_yielded(self) -> int:
        return self._yielded

    def close(self) -> None:
        """Stop the dump; a ``next()`` blocked in another thread returns StopIteration promptly."""
        with self._fake._cond:
            self._closed = True
            self._finish()
            self._fake._cond.notify_all()

    def _finish(self) -> None:
        if not self._finished:
            self._finished = True
            self._fake._active_dumps -= 1
            self._source._forget(self)

    def _fail(self, error: SourceError) -> SourceError:
        self._error = error
        self._finish()
        return error

    def _broken(self) -> SourceError | None:
        fake = self._fake
        if self._source._generation != self._source_gen:
            return SourceError(f"the connection to {fake.address} was closed (source.close())", errno=2013)
        if fake._epoch != self._epoch:
            return SourceError(
                f"Lost connection to MySQL server during query ({fake.address} failed over or went away)", errno=2013
            )
        if fake._faults.down:
            return SourceError(f"Lost connection to MySQL server during query ({fake.address} is down)", errno=2013)
        return None

    def __next__(self) -> BinlogEvent:
        fake = self._fake
        with fake._cond:
            while True:
                if self._closed:
                    raise StopIteration
                if self._error is not None:
                    raise self._error
                if self._finished:
                    raise StopIteration
                broken = self._broken()
                if broken is not None:
                    raise self._fail(broken)
                if fake._faults.stalled:
                    self._park(None)
                    continue
                if self._budget is not None and self._yielded >= self._budget:
                    raise self._fail(
                        SourceError(
                            f"Lost connection to MySQL server during query ({fake.address}: fail_after "
                            f"{self._budget} events)",
                            errno=2013,
                        )
                    )
                event = self._step()
                now = time.monotonic()
                if event is not None:
                    if not self.request.decode_rows and isinstance(event, (RowsEvent, TableMapEvent)):
                        event = _undecoded(event, fake.is_mariadb)
                    self._yielded += 1
                    self._idle_since = now
                    return event
                if not self.request.blocking:
                    self._finish()
                    raise StopIteration
                due = self._idle_since + self.request.heartbeat_period_s
                if now >= due:
                    self._yielded += 1
                    self._idle_since = now
                    return HeartbeatEvent(
                        log_file=self._file.name,
                        offset=self._pos,
                        next_offset=self._pos,
                        timestamp=0,
                        server_id=fake._log.server_id,
                    )
                self._park(due - now)

    def _park(self, timeout: float | None) -> None:
        fake = self._fake
        fake._waiting_dumps += 1
        fake._idle_cond.notify_all()
        try:
            fake._cond.wait(timeout)
        finally:
            fake._waiting_dumps -= 1

    def _step(self) -> BinlogEvent | None:
        if self._pending:
            return self._pending.popleft()
        while True:
            log = self._file
            if self._index < len(log.events):
                event = log.events[self._index]
                tag = log.tags[self._index]
                self._index += 1
                self._pos = event.next_offset
                if self._skip is not None and tag is not None and self._skip(tag):
                    continue
                return event
            if not log.closed:
                return None
            following = self._fake._log.file_after(log)
            if following is None:
                return None
            self._file = following
            self._index = 0
            self._pos = 4
            return RotateEvent(
                log_file=following.name,
                offset=0,
                next_offset=0,
                timestamp=0,
                server_id=self._fake._log.server_id,
                next_file=following.name,
                next_position=4,
                artificial=True,
            )


_ROWS_TYPE_CODES = {  # MariaDB writes v1 rows events, MySQL v2
    (EventType.INSERT, True): P.WRITE_ROWS_EVENT_V1,
    (EventType.UPDATE, True): P.UPDATE_ROWS_EVENT_V1,
    (EventType.DELETE, True): P.DELETE_ROWS_EVENT_V1,
    (EventType.INSERT, False): P.WRITE_ROWS_EVENT_V2,
    (EventType.UPDATE, False): P.UPDATE_ROWS_EVENT_V2,
    (EventType.DELETE, False): P.DELETE_ROWS_EVENT_V2,
}


def _undecoded(event: RowsEvent | TableMapEvent, mariadb: bool) -> IgnoredEvent:
    """What a real source yields for a table map or rows event when a dump asks for no rows (DumpRequest)."""
    code = P.TABLE_MAP_EVENT if isinstance(event, TableMapEvent) else _ROWS_TYPE_CODES[event.event_type, mariadb]
    header = {field.name: getattr(event, field.name) for field in attrs.fields(BinlogEvent)}  # file, offsets, ...
    return IgnoredEvent(**header, type_code=code)


def locate_file(
    writer: BinlogWriter, address: str, name: str | None, position: int
) -> tuple[LogFile, int, int, list[BinlogEvent]]:
    """Where a dump from a file position starts: the file, the event index, the offset and the events to send first."""
    if not name:
        return writer.files[0], 0, 4, []
    log = writer.find_file(name)
    if log is None:
        raise BinlogPurgedError(
            f"Could not find first log file name in binary log index file ({name!r} is not on {address}; "
            f"files: {', '.join(f.name for f in writer.files)})",
            errno=1236,
        )
    if position < 4:
        raise SourceError(
            f"Client requested master to start replication from position < 4 ({name}:{position})", errno=1236
        )
    if position > log.end:
        raise SourceError(
            f"Client requested master to start replication from position > file size ({name}:{position}, "
            f"size {log.end})",
            errno=1236,
        )
    if position == 4:
        return log, 0, 4, []
    if position == log.end:
        index = len(log.events)
    elif position in log.starts:
        index = log.starts[position]
    else:
        raise SourceError(
            f"bogus data in log event: client requested master to start replication from impossible position; "
            f"{name}:{position} is not the start of an event",
            errno=1236,
        )
    fde = attrs.evolve(log.events[0], offset=0, next_offset=0)  # artificial: log_pos 0, as on the wire
    return log, index, position, [fde]


def locate_gtid(writer: BinlogWriter, text: str) -> tuple[LogFile, Callable[[Tag], bool]]:
    """Where a dump from a GTID set starts: the file, and which transactions to skip."""
    if writer.mariadb:
        return _locate_mariadb(writer, text)
    if not writer.gtid:
        raise SourceError(
            "The replication receiver thread cannot start in AUTO_POSITION mode: this server uses "
            "@@GLOBAL.GTID_MODE = OFF.",
            errno=1236,
        )
    wanted = parse_mysql_gtid_set(text)
    purged = writer.files[0].mysql_gtids
    if not mysql_subset(purged, wanted):
        raise BinlogPurgedError(
            "Cannot replicate because the master purged required binary logs. Replicate the missing "
            f"transactions from elsewhere (purged {format_mysql_gtid_set(purged)}, requested {text!r})",
            errno=1236,
        )
    own = writer.server_uuid()
    if not mysql_subset({own: wanted.get(own, [])}, writer.mysql_gtids):
        raise SourceError(
            "Slave has more GTIDs than the master has, using the master's SERVER_UUID. This may indicate that "
            f"the end of the binary log was truncated or that the last binary log file was lost ({text!r})",
            errno=1236,
        )
    start = writer.files[0]
    for f in reversed(writer.files):
        if mysql_subset(f.mysql_gtids, wanted):
            start = f
            break

    def skip(tag: Tag) -> bool:
        return mysql_contains(wanted, tag[0], tag[1])

    return start, skip


def _locate_mariadb(writer: BinlogWriter, text: str) -> tuple[LogFile, Callable[[Tag], bool]]:
    wanted = parse_mariadb_gtid_pos(text)
    oldest = writer.files[0].mariadb_gtids
    for domain, (server, seq) in wanted.items():
        current = writer.mariadb_gtids.get(domain)
        if current is None or seq > current[1]:
            raise SourceError(
                f"Error: connecting slave requested to start from GTID {domain}-{server}-{seq}, which is not in "
                "the master's binlog",
                errno=1236,
            )
    for domain, (_server, seq) in oldest.items():
        if wanted.get(domain, (0, 0))[1] < seq:
            raise BinlogPurgedError(
                "Could not find GTID state requested by slave in any binlog files. Probably the slave state is "
                f"too old and required binlog files have been purged (requested {text!r}, oldest binlog starts "
                f"after {format_mariadb_gtid_pos(oldest)})",
                errno=1236,
            )
    start = writer.files[0]
    for f in reversed(writer.files):
        if all(seq <= wanted.get(d, (0, 0))[1] for d, (_s, seq) in f.mariadb_gtids.items()):
            start = f
            break

    def skip(tag: Tag) -> bool:
        return tag[0] in wanted and tag[2] <= wanted[tag[0]][1]

    return start, skip
