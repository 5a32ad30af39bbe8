"""Where a dump starts: canal's ``MysqlEventParser.findStartPosition``, written once against :class:`BinlogSource`.

The branches, in order (see :func:`find_start_position`):

1. GTID mode: the saved position's executed GTID set, else the configured GTID set -- dump by GTID.
2. A saved position (the log-position manager's latest):
   * same server address and the same server id: resume from it (anchor + rows already handed off);
   * another address (a master/standby switch): search by the saved time minus the fallback interval;
   * same address but another server id (a failover behind one address): the same timestamp search.
3. No saved position: the configured position of the server we are connected to (master or standby):
   * file + offset: as given (moved back to its transaction's start if it points inside one);
   * file + timestamp: the last transaction boundary before the timestamp inside that file (else its start);
   * timestamp only: the files from newest to oldest, the last transaction boundary before the timestamp;
   * file only: the start of that file;
   * nothing: the current end of the binlog (``SHOW MASTER STATUS``).

In GTID mode a start by file and offset carries the server's whole executed GTID set at that position (the parser
adds it with :func:`with_gtid_state`), so the cursor names every replication domain, not only those read since.

The timestamp search reads each file from its start with a non-blocking dump and stops at the first transaction
boundary at or after the timestamp, so it costs one file read per file searched, newest first. Both scans dump with
``decode_rows=False``: they only look at GTID, query, XID and rotate events, offsets and times, and decoding row images
would be most of the cost of reading a file.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import attrs

from canal.address import same_endpoint
from canal.gtid import GtidSet
from canal.log import DestinationAdapter
from canal.parse.boundary import Boundary, event_boundary
from canal.parse.ddl import query_kind
from canal.parse.events import (
    BinlogEvent,
    FormatDescriptionEvent,
    GtidEvent,
    GtidSetEvent,
    QueryEvent,
    RotateEvent,
)
from canal.parse.source import BinlogSource, DumpRequest
from canal.position import EntryPosition, LogPosition
from canal.sql import QueryKind

BINLOG_START = 4


class StartConfig(Protocol):
    """The configured position of one server (``canal.config.MasterConfig``)."""

    @property
    def address(self) -> str: ...

    @property
    def journal_name(self) -> str | None: ...

    @property
    def position(self) -> int | None: ...

    @property
    def timestamp(self) -> int | None: ...

    @property
    def gtid(self) -> str | None: ...


@attrs.frozen(slots=True)
class StartPosition:
    """A dump start: ``position`` (``included``: the event there was consumed, skip it) or a GTID set.

    ``rows_done`` row entries of the first transaction were already handed off and are skipped. ``reason`` says
    which branch chose it (for logs and tests). ``aligned`` is True when the position is known to be a transaction
    boundary (saved positions, timestamp searches, master status), so no move back to a BEGIN is needed.
    """

    position: EntryPosition
    rows_done: int = 0
    gtid_set: str | None = None
    reason: str = ""
    aligned: bool = True

    def dump_request(self, *, blocking: bool = True, heartbeat_period_s: float = 1.0) -> DumpRequest:
        if self.gtid_set:
            return DumpRequest(gtid_set=self.gtid_set, blocking=blocking, heartbeat_period_s=heartbeat_period_s)
        pos = self.position
        return DumpRequest(
            journal_name=pos.journal_name,
            position=pos.position if pos.position is not None else BINLOG_START,
            blocking=blocking,
            heartbeat_period_s=heartbeat_period_s,
        )

    def __str__(self) -> str:
        where = f"gtid {self.gtid_set}" if self.gtid_set else str(self.position)
        rows = f" after {self.rows_done} row entries" if self.rows_done else ""
        return f"{where}{rows} ({self.reason})"


def find_start_position(
    source: BinlogSource,
    *,
    saved: LogPosition | None,
    configured: StartConfig | None,
    gtid_mode: bool = False,
    fallback_interval_s: float = 60,
    log: DestinationAdapter | None = None,
    address: str | None = None,
) -> StartPosition:
    """The position to dump from on ``source`` (opened), following canal's branches (module docstring).

    ``saved`` is the latest restart point (any server); ``configured`` the configured position of the server
    ``source`` connects to (the master's or the standby's config, whichever is being dumped). ``address`` names that
    server as saved positions do (default: ``source.address``).
    """
    if gtid_mode:
        if saved is not None:
            if saved.position.gtid:
                return StartPosition(saved.position, saved.rows_done, saved.position.gtid, "saved gtid set")
        elif configured is not None and configured.gtid:
            return StartPosition(EntryPosition(gtid=configured.gtid), 0, configured.gtid, "configured gtid set")

    if saved is not None:
        return _from_saved(source, address or source.address, saved, configured, fallback_interval_s, log)
    return _from_config(source, configured, log)


def _from_saved(
    source: BinlogSource,
    address: str,
    saved: LogPosition,
    configured: StartConfig | None,
    fallback_interval_s: float,
    log: DestinationAdapter | None,
) -> StartPosition:
    pos = saved.position
    fallback_ms = int(fallback_interval_s * 1000)
    if not same_endpoint(saved.identity.source_address, address):
        # a switch to another server: its file names and offsets mean nothing here; go by time
        if pos.timestamp is None:
            # nothing was read on the old server yet (a start without time): this server's configured position
            _warn(
                log,
                "saved position %s of %s has no timestamp; using the configured position of %s",
                pos,
                saved.identity.source_address,
                address,
            )
            return _from_config(source, configured, log)
        _warn(
            log,
            "switched from %s to %s: searching by time %d ms minus the fallback interval",
            saved.identity.source_address,
            address,
            pos.timestamp,
        )
        return find_by_timestamp(source, pos.timestamp - fallback_ms, reason="switch: timestamp - fallback", log=log)
    if pos.server_id is not None:
        current = source.server_id()
        if current != pos.server_id:
            _warn(
                log,
                "server id changed from %s to %s behind %s: searching by time",
                pos.server_id,
                current,
                source.address,
            )
            if pos.timestamp is None:
                return master_status_start(source, "server id changed, no timestamp: master status")
            return find_by_timestamp(
                source, pos.timestamp - fallback_ms, reason="server id changed: timestamp - fallback", log=log
            )
    return StartPosition(pos, saved.rows_done, None, "saved position")


def _from_config(source: BinlogSource, configured: StartConfig | None, log: DestinationAdapter | None) -> StartPosition:
    journal = configured.journal_name if configured is not None else None
    offset = configured.position if configured is not None else None
    timestamp = configured.timestamp if configured is not None else None
    if not journal:
        if timestamp is not None and timestamp > 0:
            return find_by_timestamp(source, timestamp, reason="configured timestamp", log=log)
        return master_status_start(source, "no position: master status")
    if offset is not None and offset > 0:
        start = StartPosition(EntryPosition(journal, offset), 0, None, "configured file and offset", aligned=False)
        return align_to_transaction(source, start, log)
    if timestamp is not None and timestamp > 0:
        found = search_file(source, journal, timestamp)
        if found is not None:
            return StartPosition(found, 0, None, "configured file and timestamp")
    return StartPosition(EntryPosition(journal, BINLOG_START), 0, None, "configured file: its start")


def master_status_start(source: BinlogSource, reason: str) -> StartPosition:
    status = source.master_status()
    return StartPosition(
        EntryPosition(status.journal_name, status.position, server_id=status.server_id, gtid=status.gtid),
        0,
        None,
        reason,
    )


def find_by_timestamp(
    source: BinlogSource, timestamp_ms: int, *, reason: str, log: DestinationAdapter | None = None
) -> StartPosition:
    """The last transaction boundary before ``timestamp_ms``, searching files newest to oldest.

    When every transaction still in the binlog is at or after the timestamp, the start of the oldest file.
    """
    files = source.binlog_files()
    for binlog in reversed(files):
        found = search_file(source, binlog.name, timestamp_ms)
        if found is not None:
            return StartPosition(found, 0, None, reason)
    if not files:
        return master_status_start(source, reason + ": no binlog files, master status")
    _warn(log, "no transaction before %d ms in the binlog; starting at the oldest file %s", timestamp_ms, files[0].name)
    return StartPosition(EntryPosition(files[0].name, BINLOG_START), 0, None, reason + ": oldest file")


def _file_events(source: BinlogSource, journal: str, position: int = BINLOG_START) -> Iterator[BinlogEvent]:
    """The events of one file from ``position`` (non-blocking), ending at its last event.

    Row events and table maps come undecoded (or decoded, from a source that ignores ``decode_rows``): callers must
    not look at them.
    """
    events = source.dump(DumpRequest(journal_name=journal, position=position, blocking=False, decode_rows=False))
    try:
        for event in events:
            if isinstance(event, RotateEvent) and (event.artificial or event.timestamp == 0):
                continue
            if event.log_file != journal:
                return
            yield event
            if isinstance(event, RotateEvent):
                return
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()


def search_file(source: BinlogSource, journal: str, timestamp_ms: int) -> EntryPosition | None:
    """In one file, the last transaction start or end before the first boundary at/after ``timestamp_ms``.

    A transaction start gives its first event (the GTID event before a BEGIN, if any); an end or a statement outside a
    transaction gives the offset after it. None when the file's first transaction is already too late.
    """
    found: EntryPosition | None = None
    in_txn = False
    gtid_offset: int | None = None  # offset of a GTID event opening the next transaction or statement
    for event in _file_events(source, journal):
        if isinstance(event, GtidEvent) and not (event.mariadb and not event.standalone):
            gtid_offset = event.offset
            continue
        boundary = event_boundary(event, in_txn)
        begin = boundary is Boundary.BEGIN
        end = in_txn and boundary is Boundary.END
        standalone = not in_txn and boundary in (Boundary.STATEMENT, Boundary.XA_OUTCOME)
        if not (begin or end or standalone):
            continue
        if event.timestamp * 1000 >= timestamp_ms:
            break
        if begin:
            in_txn = True
            found = EntryPosition(
                journal,
                gtid_offset if gtid_offset is not None else event.offset,
                event.timestamp * 1000,
                event.server_id,
            )
        else:
            in_txn = False
            found = EntryPosition(journal, event.next_offset, event.timestamp * 1000, event.server_id)
        gtid_offset = None
    return found


def transaction_begin(source: BinlogSource, journal: str, position: int) -> int:
    """The offset of the start of the transaction that ``journal:position`` lies in (``position`` if none)."""
    begin_offset: int | None = None
    gtid_offset: int | None = None
    for event in _file_events(source, journal):
        if event.offset >= position:
            break
        if isinstance(event, GtidEvent) and not (event.mariadb and not event.standalone):
            gtid_offset = event.offset
            continue
        boundary = event_boundary(event, begin_offset is not None)
        if boundary is Boundary.BEGIN:
            begin_offset = gtid_offset if gtid_offset is not None else event.offset
        elif boundary is Boundary.END:
            begin_offset = None
        gtid_offset = None
    return begin_offset if begin_offset is not None else position


_OPENING_KINDS = frozenset({QueryKind.BEGIN, QueryKind.XA_START, QueryKind.DDL, QueryKind.DCL})


def begins_transaction(source: BinlogSource, journal: str, position: int) -> bool:
    """Whether the event at ``journal:position`` opens a transaction or stands alone (a GTID event, a BEGIN, a DDL
    or other statement, a rotate or format description): then a dump can start there with no scan. One event is
    read; a position past the file's last event (its end, as ``SHOW MASTER STATUS`` gives) is a boundary too."""
    for event in _file_events(source, journal, position):
        if event.next_offset <= position:
            continue  # the format description a dump from the middle of a file starts with (sent as of length 0)
        if event.offset > position:
            return False  # the position is not an event's start
        if isinstance(event, (GtidEvent, RotateEvent, FormatDescriptionEvent)):
            return True
        if isinstance(event, QueryEvent):
            # DDL and DCL commit implicitly, so nothing can be open before them; a DML statement or an XA COMMIT may
            # belong to an open transaction: those take the scan
            return query_kind(event.sql) in _OPENING_KINDS
        return False  # a table map, rows or XID: inside a transaction
    return True


def align_to_transaction(source: BinlogSource, start: StartPosition, log: DestinationAdapter | None) -> StartPosition:
    """Move a start inside a transaction back to that transaction's start (canal's ``findTransactionBeginPosition``).

    The event at the start is read first: when it opens a transaction (the usual case: a saved or
    ``SHOW MASTER STATUS`` position) no scan from the file's start is needed, so a start costs the same at the end of
    a 1 GB file as at its beginning.
    """
    pos = start.position
    if start.gtid_set or pos.journal_name is None or pos.position is None or pos.position <= BINLOG_START:
        return attrs.evolve(start, aligned=True)
    if begins_transaction(source, pos.journal_name, pos.position):
        return attrs.evolve(start, aligned=True)
    begin = transaction_begin(source, pos.journal_name, pos.position)
    if begin != pos.position:
        _warn(log, "start %s lies inside a transaction: moving back to its start at offset %d", pos, begin)
        return StartPosition(
            attrs.evolve(pos, position=begin, included=False), 0, None, start.reason + ", moved to its transaction"
        )
    return attrs.evolve(start, aligned=True)


def gtid_state_at(source: BinlogSource, journal: str, position: int) -> str | None:
    """The executed GTID set at ``journal:position``: the set the file starts with (MySQL's previous-GTIDs, MariaDB's
    GTID list) plus every GTID logged before the position. None when the file names none (no GTIDs yet).

    A GTID-mode cursor must carry the server's whole state, not only the GTIDs read since the start: a restart dumps
    by that set, and a replication domain (or server uuid) missing from it is sent again from its beginning."""
    state: GtidSet | None = None
    for event in _file_events(source, journal):
        if event.offset >= position:
            break
        if isinstance(event, GtidSetEvent):
            if state is None:
                state = GtidSet(event.gtid_set, mariadb=event.mariadb)
        elif isinstance(event, GtidEvent):
            if state is None:
                state = GtidSet(mariadb=event.mariadb)
            state.add(event.gtid)
    return str(state) if state else None


def with_gtid_state(source: BinlogSource, start: StartPosition, log: DestinationAdapter | None) -> StartPosition:
    """A file-and-offset start in GTID mode, with the GTID state at it (:func:`gtid_state_at`) when it has none."""
    pos = start.position
    if start.gtid_set or pos.gtid or pos.journal_name is None or pos.position is None or pos.position <= BINLOG_START:
        return start  # at a file's start the dump reads the file's own GTID set (the converter takes it)
    state = gtid_state_at(source, pos.journal_name, pos.position)
    if state is None:
        return start
    _info(log, "GTID state at the start %s: %s", pos, state)
    return attrs.evolve(start, position=attrs.evolve(pos, gtid=state))


def _info(log: DestinationAdapter | None, msg: str, *args: object) -> None:
    if log is not None:
        log.info(msg, *args)


def _warn(log: DestinationAdapter | None, msg: str, *args: object) -> None:
    if log is not None:
        log.warning(msg, *args)
