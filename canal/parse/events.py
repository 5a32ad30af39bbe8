"""Normalized binlog events: the small set the converter consumes, whatever the source.

Every source -- the MySQL/MariaDB dump, local binlog files, :class:`canal.testing.FakeMysql` -- yields these, so the
converter, the transaction buffer and start-position finding are written once. Row events arrive already decoded:
``RowsEvent.rows`` holds :class:`~canal.protocol.RowData` against the table's shared :class:`TableSchema`.

Positions: ``offset`` is where the event starts in ``log_file`` and ``next_offset`` where the next one starts (the
binlog header's ``log_pos``); dumping from ``offset`` re-reads this event, from ``next_offset`` the one after it.
An event with ``offset == next_offset`` occupies no bytes of its own: an artificial event the server sends, or the
last event of a MySQL compressed transaction (:class:`TransactionPayloadEvent`), which is placed at the end of its
payload -- a transaction boundary there is resumed *at* that position, since there is nothing to skip.
``timestamp`` is the event header's time in whole seconds since the epoch (the binlog's resolution).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from canal.errors import SchemaError
from canal.gtid import GtidStep
from canal.position import EntryPosition
from canal.protocol import EventType, RowData, TableSchema
from canal.schema.history import SchemaColumn
from canal.sql.modes import SqlMode


class _Undecoded(tuple):  # type: ignore[type-arg]
    """The rows of a rows event a source was asked not to decode (:attr:`DumpRequest.decode_table
    <canal.parse.source.DumpRequest.decode_table>`): none, and recognisable as such (``rows is UNDECODED``)."""

    __slots__ = ()


UNDECODED: Sequence[RowData] = _Undecoded()
"""``RowsEvent.rows`` of a rows event left undecoded (its table is one no reader of the stream captures)."""


@attrs.frozen(slots=True, kw_only=True)
class BinlogEvent:
    """Fields every event has."""

    log_file: str
    offset: int
    next_offset: int
    timestamp: int
    server_id: int

    @property
    def length(self) -> int:
        """Bytes this event occupies in the binlog (0 for artificial events)."""
        return max(self.next_offset - self.offset, 0)


@attrs.frozen(slots=True, kw_only=True)
class RotateEvent(BinlogEvent):
    """The binlog continues in ``next_file`` at ``next_position``.

    ``artificial`` marks the fake rotate a server sends first on every dump (timestamp 0, not in the file).
    """

    next_file: str
    next_position: int = 4
    artificial: bool = False


@attrs.frozen(slots=True, kw_only=True)
class FormatDescriptionEvent(BinlogEvent):
    """The first real event of every binlog file."""

    binlog_version: int = 4
    server_version: str = ""
    checksum: bool = False
    # when the server wrote it at its start (seconds), else 0: every session before it ended with the old process
    created: int = 0


@attrs.frozen(slots=True)
class LayoutSeen:
    """What a shared reader's schema history held of a table when the reader decoded its table map
    (:mod:`canal.parse.shared`): the columns it gives a row decoder (None: no such table), or that the table's layout
    is unknown since a DDL. A destination's own history must hold the same there, or the destination reads alone."""

    columns: tuple[SchemaColumn, ...] | None
    unknown: bool = False


@attrs.frozen(slots=True, kw_only=True)
class TableMapEvent(BinlogEvent):
    """Binds ``table_id`` to a table layout for the row events that follow it in the same statement."""

    table_id: int
    schema: str
    table: str
    table_schema: TableSchema
    # set by a shared reader that decodes with a schema history: what that history held of the table here
    seen: LayoutSeen | None = attrs.field(default=None, eq=False, repr=False)


@attrs.frozen(slots=True, kw_only=True)
class RowsEvent(BinlogEvent):
    """Decoded rows of one write/update/delete rows event."""

    event_type: EventType  # INSERT, UPDATE or DELETE
    table_id: int
    table: TableSchema
    rows: Sequence[RowData]
    end_of_statement: bool = True
    # the table's columns could not be known exactly (schema history): raised by the converter if the table is
    # captured, so a filtered table never stops the stream
    schema_error: SchemaError | None = None


@attrs.frozen(slots=True, kw_only=True)
class QueryEvent(BinlogEvent):
    """A statement: ``BEGIN``, ``COMMIT`` (non-transactional engines), a DDL, or a DML logged as a statement."""

    schema: str  # the session's current database ("" when none)
    sql: str
    thread_id: int = 0
    error_code: int = 0
    # the session's time_zone, logged when the statement used it (canal.parse.mysql.query_status): None otherwise
    time_zone: str | None = None
    micros: int | None = None  # MariaDB: the microseconds of the statement's start time (``timestamp`` its seconds)
    sql_mode: int | None = None  # the statement's sql_mode, the server's bit set (None: not read)
    # the header's LOG_EVENT_THREAD_SPECIFIC_F: the statement used a temporary table of its session (or CONNECTION_ID())
    thread_specific: bool = False
    mariadb: bool = True  # written by a MariaDB server (sql_mode bits 9 and 32 are MariaDB's own modes there)

    @property
    def mode(self) -> SqlMode:
        """How the statement's text reads under its sql_mode (:mod:`canal.sql.modes`; the default when not read)."""
        return SqlMode.of(self.sql_mode, mariadb=self.mariadb)


@attrs.frozen(slots=True, kw_only=True)
class XidEvent(BinlogEvent):
    """The commit of a transaction."""

    xid: int


@attrs.frozen(slots=True, kw_only=True)
class GtidEvent(BinlogEvent):
    """The GTID of the transaction that follows.

    MySQL: ``uuid:gno``, followed by BEGIN (or a DDL query). MariaDB: ``domain-server-seq``; it replaces BEGIN
    unless ``standalone`` (a DDL or other statement outside a transaction follows).
    """

    gtid: str
    mariadb: bool = False
    standalone: bool = False
    xa_xid: str | None = None  # MariaDB: the xid of the prepared XA transaction it opens (canal.parse.xa)
    # MariaDB: the group it opens lacks FL_TRANSACTIONAL -- it changed a non-transactional table, or its changes
    # may be undone by the ROLLBACK that ends it (the server logs a rolled-back cache that touched one)
    non_transactional: bool = False


@attrs.frozen(slots=True, kw_only=True)
class GtidSetEvent(BinlogEvent):
    """At the start of a file: the GTID set executed before it (MySQL previous-GTIDs, MariaDB GTID list)."""

    gtid_set: str
    mariadb: bool = False


@attrs.frozen(slots=True, kw_only=True)
class HeartbeatEvent(BinlogEvent):
    """Sent by the server while the dump is idle; ``log_file``/``offset`` are the server's current coordinates."""


@attrs.frozen(slots=True, kw_only=True)
class IgnoredEvent(BinlogEvent):
    """Any other event (annotate rows, checkpoints, incidents, ...): only its position matters."""

    type_code: int


@attrs.frozen(slots=True, kw_only=True)
class StartEncryptionEvent(IgnoredEvent):
    """MariaDB ``encrypt_binlog=ON``: the file's events after this one are encrypted with the key ``key_version``
    under ``scheme`` (1: AES, the only scheme MariaDB writes) and ``nonce`` (12 bytes, stored in clear in the file).
    A server decrypts them before it sends them and flags this event ignorable; sources yield it only then, so the
    events after it are plain. It carries no change: only its position counts."""

    scheme: int
    key_version: int
    nonce: bytes = attrs.field(repr=False)


@attrs.frozen(slots=True, kw_only=True)
class TransactionPayloadEvent(BinlogEvent):
    """A MySQL compressed transaction (``binlog_transaction_compression=ON``): the BEGIN ... COMMIT events of one
    transaction in one event. Sources never yield it: they yield the events :meth:`EventDecoder.expand
    <canal.parse.mysql.binlog.EventDecoder.expand>` decodes from it, each at the payload's position (``offset``
    and ``next_offset`` of the payload), except the last, which sits at the payload's end (``offset ==
    next_offset``)."""

    compression: int  # 0 zstd, 255 none
    payload: bytes
    uncompressed_size: int


@attrs.frozen(slots=True, kw_only=True)
class PassedTransaction:
    """One transaction a shared reader left out of a destination's stream (:class:`PassedEvent`): its events other
    than table maps, rows and annotations (its GTID, BEGIN and end), and the execute time of the event that opens it
    (``begin_ms``: the time its TRANSACTIONBEGIN entry would carry)."""

    events: tuple[BinlogEvent, ...]
    begin_ms: int
    # its GTID read once for every destination (None: it has none, or one only GtidSet.add reads), and how many
    # transactions before it in the reader's list of passed ones carry the GTIDs just before it of the same source:
    # a run of them is one span of a GTID set (EntryConverter.pass_over)
    gtid: GtidStep | None = None
    run_offset: int = 0


@attrs.frozen(slots=True, kw_only=True)
class PassedEvent(BinlogEvent):
    """Whole transactions a shared reader (:mod:`canal.parse.shared`) left out of a destination's stream because no
    table of theirs is one the destination captures: never read from a binlog. Its position is the last one's end
    event's; ``transactions`` are in binlog order. The parser gives the converter their boundary events, or only their
    GTIDs and end when the empty-transaction policy drops them anyway (:meth:`EntryConverter.pass_over
    <canal.parse.convert.EntryConverter.pass_over>`): the entries are the ones it would have made of the whole
    transactions."""

    transactions: tuple[PassedTransaction, ...]
    # each transaction's ``begin_ms``, side by side: what the empty-transaction policy reads of a run
    # (:meth:`EntrySink.drops_empty <canal.sink.entry_sink.EntrySink.drops_empty>`)
    begins_ms: tuple[int, ...]
    # whether the stream rests after them: False when a group given to the destination follows at once (its own
    # entries move the cursor; a resting point in between would only be overwritten)
    rests: bool = True


def read_end(event: BinlogEvent, server_id: int | None) -> EntryPosition:
    """Where a dump of the binlog of server ``server_id`` stands once it read ``event``: a rotate's next file, a
    heartbeat's coordinates (it holds no bytes of the binlog), else the event's end."""
    if isinstance(event, RotateEvent):
        return EntryPosition(journal_name=event.next_file, position=event.next_position, server_id=server_id)
    if isinstance(event, HeartbeatEvent):
        return EntryPosition(journal_name=event.log_file, position=event.offset, server_id=server_id)
    return EntryPosition(journal_name=event.log_file, position=event.next_offset, server_id=server_id)


def ends_before(a: EntryPosition, b: EntryPosition) -> bool:
    """Whether ``a`` lies before ``b`` in a binlog, by file and offset alone."""
    return (a.journal_number, a.position or 0) < (b.journal_number, b.position or 0)
