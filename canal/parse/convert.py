"""Normalized binlog events -> :class:`~canal.protocol.Entry` objects (canal's ``LogEventConvert``).

One :class:`EntryConverter` per dump connection. It turns BEGIN / XID / COMMIT into TRANSACTIONBEGIN /
TRANSACTIONEND entries, each rows event into one ROWDATA entry (after the table and field filters), DDL statements
into ROWDATA entries with ``is_ddl`` and other statements into QUERY row changes, and stamps every entry with its
cursor placement (``anchor`` + ``rows_done``, see :mod:`canal.position`):

* the anchor of a transaction is the boundary before it: the previous transaction end or DDL (``included=True``),
  or, for the first transaction of a dump, the dump's start position (``included=False`` unless the dump resumed
  from a consumed boundary);
* a binlog rotate between transactions moves the anchor to the next file's start (``included=False``) and yields a
  HEARTBEAT entry resting there, so a caught-up cursor follows the binlog into its next file;
* ``rows_done`` counts the ROWDATA entries of the open transaction up to and including the entry (0 on BEGIN);
* a boundary entry (transaction end, DDL) is its own anchor (``included=True``) with ``rows_done=0`` -- except the
  end of a MySQL compressed transaction, which sits at its payload's end and occupies no bytes: it is resumed at
  (``included=False``), so the resume starts with the next event and skips nothing.

Resuming from a cursor (``reset(start, rows_done=N)``) suppresses the boundary the cursor names (when ``included``),
and the BEGIN and first N ROWDATA entries of the transaction that follows, so exactly what was handed off before is
not produced again. A dump from a GTID set never sends that boundary (its group is in the set): once past its place,
the converter moves on as if it had read it, so a rotate then moves the anchor as in a dump that never stopped.
Filters are applied per rows event; no per-row work is done unless a field filter projects the rows of that table.

A statement inside a transaction is a ROWDATA entry of it; a DDL there (MariaDB's ``CREATE TABLE ... SELECT``: the
CREATE, then the copied rows) keeps ``is_ddl``, as canal marks it. Savepoint statements inside a transaction go to
:attr:`EntryConverter.savepoints` (the transaction buffer drops what a ``ROLLBACK TO`` undid).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping, Sequence

import attrs

from canal.config import FilterFlags
from canal.errors import ParseError
from canal.filter import FieldFilter, TableFilters
from canal.gtid import GtidSet
from canal.parse.boundary import Boundary, query_boundary
from canal.parse.cascade import (
    ForeignKeyActions,
    KnownForeignKeys,
    StatementTables,
    actions_prop,
    out_of_capture,
    out_of_capture_statement,
    references_unchanged,
)
from canal.parse.ddl import DdlResult, QueryKind, classify_ddl, lower_cased, savepoint_statement, tables_pass, xa_xid
from canal.parse.events import (
    UNDECODED,
    BinlogEvent,
    FormatDescriptionEvent,
    GtidEvent,
    GtidSetEvent,
    HeartbeatEvent,
    PassedEvent,
    PassedTransaction,
    QueryEvent,
    RotateEvent,
    RowsEvent,
    TableMapEvent,
    XidEvent,
)
from canal.parse.heal_marks import HEAL
from canal.parse.passing import passed_gtids, take_passed
from canal.parse.reach import StatementReach
from canal.parse.sessions import Scope, SessionTables
from canal.parse.statement_props import statement_props
from canal.parse.unmodeled import CaptureVerdict, StatementPolicy, capture_verdict, stop
from canal.parse.xa import xa_props
from canal.position import EntryPosition, journal_number
from canal.protocol import Entry, EntryType, EventType, Header, RowChange
from canal.sql import read_statements

RETYPED_FROM_PROP = "RETYPED_FROM"
"""Header prop of an ALTER TABLE entry that declares columns anew (MODIFY / CHANGE), added from the schema history
(:meth:`canal.schema.history.SchemaHistory.retyped`): a JSON object of each such column's MySQL type before the
statement, by its name before it (a TIMESTAMP's values are instants, a DATETIME's local times)."""
RETYPED_TO_PROP = "RETYPED_TO"
"""Beside :data:`RETYPED_FROM_PROP` (and for the same columns, by the same names): each column's type after the
statement, with its charset where it holds text, as the schema history resolved it (a MODIFY without a charset takes
the table's; CONVERT TO CHARACTER SET moves every text column, a TEXT to a wider one where its characters need it)."""
IMPLICIT_COLUMNS_PROP = "IMPLICIT_COLUMNS"
"""Header prop of an ALTER TABLE entry of a table with columns the server added itself and keeps last (a
system-versioned table's implicit ``row_start`` / ``row_end``), added from the schema history: a JSON list of their
names -- the columns the statement adds without a place go before them."""
COMPUTED_PROP = "COMPUTED_COLUMNS"
"""Header prop of an ALTER TABLE entry of a table with columns whose values the server computes, added from the schema
history: a JSON object of those columns before the statement, by name -- ``{"id": {"auto_increment": true}, "g":
{"generated": "v * 2"}}`` (:mod:`canal.schema.computed`): whether an ALTER numbers a column anew, or computes a
generated column's values again, which a copy cannot repeat."""
_NOT_AT_A_POSITION = (HeartbeatEvent, RotateEvent, FormatDescriptionEvent, GtidSetEvent)
"""Events a dump sends that are not the stream at its start: the server's idle beats and rotates, and a file's
preamble (its format description and GTID set), stamped when the file was made."""
SavepointListener = Callable[[str, str, str], None]
"""``listener(verb, name, where)``: a savepoint statement inside a transaction (:attr:`EntryConverter.savepoints`);
also ``HOLD`` before the BEGIN of a transaction any part of which the server may undo at its end, and ``ROLLBACK``
before the END of a transaction the server rolled back (both with an empty name)."""


@attrs.frozen(slots=True)
class ConvertOptions:
    """Everything that changes what the converter emits."""

    tables: TableFilters | None = None  # None: every table
    fields: FieldFilter | None = None  # None: every column
    flags: FilterFlags = attrs.field(factory=FilterFlags)
    gtid_mode: bool = False


class NeedTransactionBeginError(ParseError):
    """The dump started inside a transaction (rows or a commit arrived before its BEGIN).

    The parser moves the start back to that transaction's BEGIN and dumps again (canal's ``needTransactionPosition``).
    """

    def __init__(self, message: str, *, start: EntryPosition) -> None:
        super().__init__(message)
        self.start = start


# ---------------------------------------------------------------------------------------------------------------------
# the converter


class EntryConverter:
    """Stateful event -> entry conversion for one dump (``reset`` it for every new dump)."""

    def __init__(self, options: ConvertOptions | None = None) -> None:
        self.options = options or ConvertOptions()
        self._start = EntryPosition()
        self._anchor = EntryPosition()
        self._anchor_filled = True
        self._rows = 0
        self._in_txn = False
        self._txn_gtid: str | None = None
        self._pending_gtid: str | None = None
        self._txn_xa: str | None = None  # the xid of the open XA transaction (canal.parse.xa)
        self._pending_xa: str | None = None
        self._stmt_tables = StatementTables()  # tables a statement may change unlogged (canal.parse.cascade)
        self._executed: GtidSet | None = None
        self._skip_event: tuple[str | None, int | None] | None = None
        # set by the parser when something waits for the stream to rest at a boundary (a snapshot merge): the
        # boundary a resumed dump skips then yields a resting HEARTBEAT (see _resting_after)
        self.rest_after_skip = False
        self._skip_begin = False
        self._skip_rows = 0
        self._seen_data = False
        self._source_server_id: int | None = None
        # told of every SAVEPOINT / ROLLBACK TO / RELEASE SAVEPOINT inside a transaction, in binlog order, as
        # ``(verb, name, where)``, of a transaction that must be held whole (HOLD) and of one that ended in ROLLBACK:
        # the transaction buffer, which leaves out the rows a ROLLBACK TO or a ROLLBACK undid
        self.savepoints: SavepointListener | None = None
        # the server stores database and table names in lower case (lower_case_table_names=1; set by the parser
        # for each dump): a DDL entry names its table so, as the rows of that table do
        self.lower_case_names = False
        # the schema history's foreign keys (set by the parser when it keeps one): the FOREIGN_KEY_ACTIONS prop
        self.foreign_key_actions: ForeignKeyActions | None = None
        # the server's system_time_zone (set by the parser for each dump): what a statement's SYSTEM zone is
        self.system_time_zone: str | None = None
        self._server_version: str | None = None  # of the binlog file read (its format description event)
        # and its tables' own foreign keys: the tables a statement may have changed unseen (CASCADE_TABLES)
        self.foreign_keys: KnownForeignKeys | None = None
        # what a statement the capture cannot follow, on a captured table, does (canal.parse.unmodeled): the typed
        # stop, before anything of it is handed off
        self.unmodeled: StatementPolicy = stop
        # the tables (db.table) the snapshot in the stream has not read all of (set by the parser with its merge):
        # a RENAME of one to a captured name goes to unmodeled too (canal.parse.unmodeled)
        self.reading: Callable[[], Collection[str]] | None = None
        # what a statement logged as a statement may change beyond the tables it names (set by the parser from its
        # schema history; without one that cannot be told): canal.parse.reach
        self.reach = StatementReach(None)
        # each session's temporary tables, which shadow the tables of their names (canal.parse.sessions); and
        # whether the last query event was about them alone (the schema history then leaves it)
        self._sessions = SessionTables()
        self.session_only = False
        # the entry of the last statement outside a transaction that only a query filter flag dropped (the parser's,
        # through take_filtered): a copy still needs it where the parser's judgement heals it (an ALTER's conversions)
        self._filtered: Entry | None = None

    # -- state ----------------------------------------------------------------------------------------------------

    @property
    def anchor(self) -> EntryPosition:
        """The boundary the current (or next) transaction resumes from."""
        return self._anchor

    @property
    def rows_done(self) -> int:
        return self._rows

    @property
    def in_transaction(self) -> bool:
        return self._in_txn

    @property
    def between_transactions(self) -> bool:
        """Outside any transaction (no GTID waiting for its statement either), with nothing of a resumed dump left to
        skip: an event read now that makes no entry leaves the stream resting after it."""
        return (
            not self._in_txn
            and self._pending_gtid is None
            and self._skip_event is None
            and not self._skip_begin
            and not self._skip_rows
        )

    def reset(self, start: EntryPosition, rows_done: int = 0, *, server_id: int | None = None) -> None:
        """Begin a new dump at ``start`` (a dump start or a consumed boundary), skipping ``rows_done`` rows.

        ``server_id`` is the id of the server whose binlog is read; positions carry it (not the id of each event,
        which in a replication chain is the originating server's) so a server change can be told apart.
        """
        self._source_server_id = server_id
        if server_id is not None and start.server_id != server_id:
            # the dump reads this server's binlog from ``start``: a position there, whatever server a saved cursor or
            # a search by time (which reads each event's own id) named -- so every entry's anchor names the server
            # whose binlog its position is in (the source lineage a mirror compares positions within)
            start = attrs.evolve(start, server_id=server_id)
        self._start = start
        self._anchor = start
        self._anchor_filled = start.timestamp is not None and start.server_id is not None
        self._rows = 0
        self._in_txn = False
        self._txn_gtid = None
        self._pending_gtid = None
        self._txn_xa = self._pending_xa = None
        self._stmt_tables.reset()
        self._sessions.clear()  # a session's temporary tables before the start are not in the binlog read
        self._executed = GtidSet(start.gtid) if self.options.gtid_mode and start.gtid else None
        self._skip_event = (start.journal_name, start.position) if start.included and start.position else None
        self._skip_begin = rows_done > 0
        self._skip_rows = rows_done
        self._seen_data = False

    def _fill_anchor(self, event: BinlogEvent) -> None:
        # the first event of the stream gives a dump start its time and server (used by timestamp fallbacks after a
        # switch): the first one at or after the start, so a dump read alone (which the server opens with the file's
        # format description and GTID list, stamped when the file was made) and a destination joining a shared reader
        # at the same start (which sees neither) stamp it alike
        self._anchor_filled = True
        if event.timestamp <= 0:
            self._anchor_filled = False
            return
        anchor = self._anchor
        self._anchor = attrs.evolve(
            anchor,
            timestamp=anchor.timestamp if anchor.timestamp is not None else event.timestamp * 1000,
            server_id=anchor.server_id
            if anchor.server_id is not None
            else (self._source_server_id if self._source_server_id is not None else event.server_id),
        )

    def _boundary_position(self, event: BinlogEvent) -> EntryPosition:
        gtid = str(self._executed) if self.options.gtid_mode and self._executed else None
        return EntryPosition(
            journal_name=event.log_file,
            position=event.offset,
            timestamp=event.timestamp * 1000,
            server_id=self._source_server_id if self._source_server_id is not None else event.server_id,
            gtid=gtid,
            # the end of a compressed transaction occupies no bytes (it sits at its payload's end): resume there
            included=event.next_offset > event.offset,
        )

    def _header(
        self,
        event: BinlogEvent,
        event_type: EventType,
        schema: str = "",
        table: str = "",
        gtid: str | None = None,
        props: Mapping[str, str] | None = None,
    ) -> Header:
        return Header(
            log_file=event.log_file,
            log_offset=event.offset,
            server_id=event.server_id,
            execute_time=event.timestamp * 1000,
            schema=schema,
            table=table,
            event_type=event_type,
            event_length=event.length,
            gtid=gtid,
            props=props or {},
        )

    # -- conversion -----------------------------------------------------------------------------------------------

    def convert(self, event: BinlogEvent) -> Entry | None:
        """The entry for one event, or None (filtered out, already handed off, or nothing to emit)."""
        if not self._anchor_filled and not isinstance(event, _NOT_AT_A_POSITION):
            self._fill_anchor(event)
        if self._skip_event is not None:
            self._passed_skipped_boundary(event)
        if isinstance(event, RowsEvent):
            return self._rows_event(event)
        if isinstance(event, TableMapEvent):
            self._stmt_tables.mapped(event.schema, event.table)
            return None
        if isinstance(event, XidEvent):
            return self._end(event, xid=event.xid)
        if isinstance(event, QueryEvent):
            return self._query(event)
        if isinstance(event, GtidEvent):
            return self._gtid(event)
        if isinstance(event, GtidSetEvent):
            if self.options.gtid_mode and not self._executed:
                self._executed = GtidSet(event.gtid_set, mariadb=event.mariadb)
            return None
        if isinstance(event, HeartbeatEvent):
            return self.heartbeat(event)
        if isinstance(event, RotateEvent):
            return self._rotate(event)
        if isinstance(event, FormatDescriptionEvent):
            self._server_version = event.server_version or None
            if event.created:
                self._sessions.clear()  # a binlog the server began at its start: every session before it ended
        return None

    @property
    def can_pass_over(self) -> bool:
        """Whether :meth:`pass_over` applies now: between transactions, nothing of a resumed dump left to skip."""
        return not (self._in_txn or self._skip_event is not None or self._skip_begin or self._skip_rows)

    def take_passed(
        self,
        event: PassedEvent,
        add: Callable[[Entry], None],
        drops: Callable[[Sequence[int], int], int] | None,
        merging: bool,
    ) -> None:
        """Transactions a shared reader left out of this stream: :func:`canal.parse.passing.take_passed`."""
        take_passed(self, event, add, drops, merging)

    def pass_over(self, transactions: Sequence[PassedTransaction]) -> None:
        """Whole transactions that make no entry here but empty ones the sink drops (a shared reader left them out of
        this stream: :class:`~canal.parse.events.PassedEvent`), given their GTID, BEGIN and end events: the state
        moves as converting them would move it -- the GTID state takes their GTIDs, the anchor moves to the last
        one's end -- without making the entries. Only when :attr:`can_pass_over`."""
        assert self.can_pass_over and transactions
        if not self._anchor_filled:
            self._fill_anchor(transactions[0].events[0])
        if self._executed is not None or self.options.gtid_mode:
            self._executed = passed_gtids(self._executed, transactions)
        self._seen_data = True
        self._pending_gtid = None
        self._pending_xa = None
        self._close_txn()
        self._anchor = self._boundary_position(transactions[-1].events[-1])
        self._anchor_filled = True

    def _rotate(self, event: RotateEvent) -> Entry | None:
        """A binlog rotate between transactions: the anchor moves to the next file's start (resumed at, nothing there
        consumed yet; stamped with the rotate's time, whether the dump read the boundary before or resumed past it),
        and a HEARTBEAT entry says the stream rests there -- so a caught-up cursor follows the rotate and a purge of
        the old file strands nothing. A rotate into a later file only: the artificial one that opens
        every dump names the file the dump starts in, while the one a server sends when a dump passes the end of a
        file closed by a shutdown (no rotate event in it) names the next. Not one met while a resumed dump still
        skips what was handed off before, nor inside a transaction (servers rotate between transactions)."""
        if self._in_txn or self._skip_event is not None or self._skip_begin or self._skip_rows:
            return None
        anchor = self._anchor
        if journal_number(event.next_file) <= anchor.journal_number:
            return None
        self._anchor = EntryPosition(
            journal_name=event.next_file,
            position=event.next_position,
            timestamp=event.timestamp * 1000 or anchor.timestamp,
            server_id=anchor.server_id if anchor.server_id is not None else self._source_server_id,
            gtid=str(self._executed) if self.options.gtid_mode and self._executed else anchor.gtid,
            included=False,
        )
        # stamped with a binlog time, which a group sink reads as "nothing earlier comes": the rotate's, or for an
        # artificial one (stamped 0) the last boundary's
        stamp = event.timestamp * 1000 if event.timestamp else anchor.timestamp
        return self.resting_at(self._anchor, stamp or 0)

    def heartbeat(self, event: BinlogEvent) -> Entry:
        """A HEARTBEAT entry placed at the current cursor (the sink drops it before the store)."""
        return Entry(
            header=self._header(event, EventType.MHEARTBEAT),
            entry_type=EntryType.HEARTBEAT,
            anchor=self._anchor,
            rows_done=self._rows,
        )

    def resting_at(self, start: EntryPosition, execute_time: int | None = None) -> Entry:
        """A HEARTBEAT entry at a dump's start ``start`` (a point between transactions that nothing at it was read
        from yet): the stream rests there until the first event comes, which is all an idle server sends.
        ``execute_time``: the binlog time it rests at (None: now)."""
        return Entry(
            header=Header(
                log_file=start.journal_name or "",
                log_offset=start.position or 0,
                server_id=self._source_server_id or 0,
                execute_time=int(time.time() * 1000) if execute_time is None else execute_time,
                event_type=EventType.MHEARTBEAT,
            ),
            entry_type=EntryType.HEARTBEAT,
            anchor=self._anchor,
            rows_done=self._rows,
        )

    def _resting_after(self, event: BinlogEvent) -> Entry | None:
        """After the boundary a resumed dump skips (the cursor's, consumed before): with ``rest_after_skip``, a
        HEARTBEAT entry saying the stream rests between transactions right after it -- what an idle server sends
        nothing more about -- so what waits for a boundary there (a snapshot chunk) need not wait for a heartbeat."""
        if not self.rest_after_skip or event.next_offset <= event.offset:
            return None
        return self.resting_at(EntryPosition(event.log_file, event.next_offset))

    def _passed_skipped_boundary(self, event: BinlogEvent) -> None:
        """A resumed dump that goes past the boundary it resumed at without reading it -- a dump from a GTID set
        leaves out the group that ends there, as every group the set holds -- has nothing left to skip: from here it
        moves as a dump that read the boundary would (a rotate moves its anchor)."""
        skip = self._skip_event
        assert skip is not None
        if skip[0] is None or skip[1] is None:
            return
        if isinstance(event, RotateEvent):
            # where the binlog goes on: a dump from a GTID set may begin in a file after the boundary's
            here = (journal_number(event.next_file), event.next_position)
        elif event.next_offset <= event.offset or event.timestamp == 0:
            return  # an artificial event, or a heartbeat: it has no place in the binlog
        else:
            here = (journal_number(event.log_file), event.offset)
        if here > (journal_number(skip[0]), skip[1]):
            self._skip_event = None

    def _is_skipped_boundary(self, event: BinlogEvent) -> bool:
        skip = self._skip_event
        if skip is None:
            return False
        if event.log_file == skip[0] and event.offset == skip[1]:
            self._skip_event = None
            return True
        return False

    def _outside_transaction(self, event: BinlogEvent, what: str) -> None:
        if not self._seen_data:
            raise NeedTransactionBeginError(
                f"the dump started inside a transaction: {what} at {event.log_file}:{event.offset} before its BEGIN",
                start=self._start,
            )

    def _begin(self, event: BinlogEvent, thread_id: int, xid: str | None = None) -> Entry | None:
        self._seen_data = True
        self._in_txn = True
        self._rows = 0
        self._txn_gtid = self._pending_gtid
        self._pending_gtid = None
        self._txn_xa = xid or self._pending_xa
        self._pending_xa = None
        if self._skip_begin:
            self._skip_begin = False
            return None
        return Entry(
            header=self._header(event, EventType.QUERY, gtid=self._txn_gtid, props=xa_props("XA_START", self._txn_xa)),
            entry_type=EntryType.TRANSACTIONBEGIN,
            thread_id=thread_id,
            anchor=self._anchor,
            rows_done=0,
        )

    def _end(self, event: BinlogEvent, xid: int, *, rolled_back: bool = False) -> Entry | None:
        if self._is_skipped_boundary(event):
            self._seen_data = True
            self._close_txn(keep_skip=True)
            return self._resting_after(event)
        if not self._in_txn:
            self._outside_transaction(event, "a transaction end")
        self._seen_data = True
        if rolled_back:
            # MariaDB and MySQL log a rolled-back transaction cache, ended by ROLLBACK, when a non-transactional
            # table was changed in it; in ROW format those changes are logged before it, as groups of their own, so
            # none of the rows that precede this ROLLBACK happened
            self._control("ROLLBACK", "", event)
        gtid = self._txn_gtid
        xa = xa_props("XA_END", self._txn_xa)
        self._close_txn()
        position = self._boundary_position(event)
        self._anchor = position
        self._anchor_filled = True
        return Entry(
            header=self._header(event, EventType.QUERY, gtid=gtid, props=xa),
            entry_type=EntryType.TRANSACTIONEND,
            xid=xid,
            anchor=position,
            rows_done=0,
        )

    def _close_txn(self, keep_skip: bool = False) -> None:
        self._in_txn = False
        self._rows = 0
        self._txn_gtid = None
        self._txn_xa = None
        self._stmt_tables.reset()
        if not keep_skip:  # the transaction a resume skipped into is over
            self._skip_begin = False
            self._skip_rows = 0

    def _gtid(self, event: GtidEvent) -> Entry | None:
        if self._executed is not None or self.options.gtid_mode:
            if self._executed is None:
                self._executed = GtidSet(mariadb=event.mariadb)
            self._executed.add(event.gtid)
        if self._is_skipped_boundary(event):
            return None
        self._pending_gtid = event.gtid
        self._pending_xa = event.xa_xid
        if event.mariadb and not event.standalone:
            # MariaDB: the GTID event opens the transaction (no BEGIN query follows)
            if event.non_transactional:
                # a group the server did not flag transactional may end in ROLLBACK: none of it goes out before then
                self._control("HOLD", "", event)
            return self._begin(event, thread_id=0)
        return None

    def _rows_event(self, event: RowsEvent) -> Entry | None:
        if not self._in_txn:
            self._outside_transaction(event, "a rows event")
        self._seen_data = True
        options = self.options
        table = event.table
        changes_rows = event.event_type in (EventType.DELETE, EventType.UPDATE)
        edges = self._stmt_tables.edges(table.schema, table.table, changes_rows, self.foreign_key_actions)
        silent = self._stmt_tables.rows(table.schema, table.table, event.end_of_statement, self.foreign_keys)
        cascade = {**silent, **actions_prop(edges)}
        flags = options.flags
        if flags.rows:
            return None
        kind = event.event_type
        if (
            (flags.dml_insert and kind is EventType.INSERT)
            or (flags.dml_update and kind is EventType.UPDATE)
            or (flags.dml_delete and kind is EventType.DELETE)
        ):
            return None
        tables = options.tables
        if tables is not None and not tables.matches(table.schema, table.table):
            # the parent left out: what its foreign keys' actions did to captured children is in no entry (unless
            # an UPDATE whose rows were decoded changed no column its children reference, as the schema history
            # knows them)
            children = out_of_capture(edges, silent, tables.matches)
            known = self.foreign_key_actions is not None
            if not children or (
                (kind is EventType.UPDATE and known and event.rows is not UNDECODED)
                and references_unchanged(edges, table.schema, table.table, table.names, event.rows)
            ):
                return None
            return self._cascade_out_of_capture(event, children)
        if event.schema_error is not None:
            raise event.schema_error  # a captured table whose columns cannot be known exactly: never misnamed rows
        self._rows += 1
        if self._skip_rows:
            self._skip_rows -= 1
            return None
        rows = event.rows
        fields = options.fields
        if fields is not None:
            projected = fields.project_schema(table)
            if projected is not table:
                rows = fields.project_rows(table, rows)
                table = projected
        return Entry(
            header=self._header(
                event,
                event.event_type,
                table.schema,
                table.table,
                self._txn_gtid,
                {**xa_props(None, self._txn_xa), **cascade},
            ),
            entry_type=EntryType.ROWDATA,
            row_change=RowChange(event_type=event.event_type, rows=rows, table_id=event.table_id, table=table),
            anchor=self._anchor,
            rows_done=self._rows,
        )

    def _cascade_out_of_capture(self, event: RowsEvent, children: Sequence[tuple[str, str]]) -> Entry | None:
        """A change of a table the filter leaves out whose foreign keys' actions may have changed captured
        ``children``: they heal from here (:attr:`unmodeled`: the typed stop under heal="stop"), the mark on a
        statement entry of the first child (:func:`canal.parse.cascade.out_of_capture_statement`)."""
        statement = out_of_capture_statement(event, children)
        marks = self.unmodeled(statement)  # raises (heal="stop"), or the heal's mark
        self._rows += 1
        if self._skip_rows:
            self._skip_rows -= 1
            return None
        db, name = children[0]  # (a client filter narrowing the capture keeps it)
        return Entry(
            header=self._header(
                event, EventType.QUERY, db, name, self._txn_gtid, {**xa_props(None, self._txn_xa), **marks}
            ),
            entry_type=EntryType.ROWDATA,
            row_change=RowChange(event_type=EventType.QUERY, sql=statement.sql, ddl_schema=event.table.schema),
            anchor=self._anchor,
            rows_done=self._rows,
        )

    def _query(self, event: QueryEvent) -> Entry | None:
        self.session_only = False
        results = classify_ddl(event.sql, event.schema or None, event.mode)
        if self.lower_case_names:
            results = lower_cased(results)
        kind = results[0].kind
        boundary = query_boundary(kind, self._in_txn)
        if boundary is Boundary.BEGIN:
            if self._is_skipped_boundary(event):
                return None
            return self._begin(event, event.thread_id, xa_xid(event.sql) if kind is QueryKind.XA_START else None)
        if boundary is Boundary.END:
            return self._end(event, xid=0, rolled_back=kind in (QueryKind.ROLLBACK, QueryKind.XA_ROLLBACK))
        if boundary is Boundary.XA_OUTCOME:
            # the second phase of an XA transaction: a boundary of its own
            event_type = EventType.XACOMMIT if kind is QueryKind.XA_COMMIT else EventType.XAROLLBACK
            self._seen_data = True
            outcome = "XA_COMMIT" if kind is QueryKind.XA_COMMIT else "XA_ROLLBACK"
            return self._boundary_statement(event, event_type, False, None, xa_props(outcome, xa_xid(event.sql)))
        if boundary is Boundary.CONTROL:  # SAVEPOINT, XA PREPARE: nothing to deliver
            if kind is QueryKind.SAVEPOINT and self._in_txn:
                self._savepoint(event)
            return None
        return self._statement(event, results)

    def _savepoint(self, event: QueryEvent) -> None:
        """A savepoint statement inside a transaction, for :attr:`savepoints` (the transaction buffer)."""
        statement = savepoint_statement(event.sql)
        if statement is None:
            raise ParseError(f"unreadable savepoint statement {event.sql!r} at {event.log_file}:{event.offset}")
        self._control(statement[0], statement[1], event)

    def _control(self, verb: str, name: str, event: BinlogEvent) -> None:
        listener = self.savepoints
        if listener is not None:
            what = repr(event.sql) if isinstance(event, QueryEvent) else type(event).__name__
            listener(verb, name, f"{what} at {event.log_file}:{event.offset}")

    def _judged(self, event: QueryEvent, resumed_past: bool) -> CaptureVerdict:
        """The statement contract's verdict on a statement (canal.parse.unmodeled); an unmodeled one on a captured
        table goes to :attr:`unmodeled` (the typed stop, by default) before anything of it is handed off -- whatever
        the query filter flags, which choose what is delivered, not what is followed. The statement's session's
        temporary tables follow it first (``resumed_past``: it was handed off before, and is not judged again)."""
        tables = self.options.tables
        session = self._session(event)
        statements = read_statements(event.sql, strict=False, mode=event.mode)
        flagged = event.thread_specific
        scope = self._sessions.follow(
            statements, session, event.server_id, event.thread_id, flagged=flagged, lower_case=self.lower_case_names
        )
        if self._in_txn:
            # a statement inside a transaction is judged as a restart inside it judges it again, which knows no
            # session's temporary tables made before it (the transaction's entries it skips must be the ones handed
            # off): by the event's flag alone -- a DML of a temporary table shadowing a captured one heals that one
            scope = Scope(flagged=flagged)
        self.session_only = scope.session_only
        if resumed_past:
            return CaptureVerdict(captures_nothing=scope.session_only)
        verdict = capture_verdict(
            event.sql,
            session,
            (lambda _db, _t: True) if tables is None else tables.matches,
            EntryPosition(event.log_file, event.offset, event.timestamp * 1000, event.server_id),
            in_transaction=self._in_txn,
            lower_case=self.lower_case_names,
            reading=self._reading,
            statements=statements,
            scope=scope,
            reach=self.reach,
            mode=event.mode,
        )
        if verdict.unmodeled is None:
            return verdict
        marks = self.unmodeled(verdict.unmodeled)  # raises (the default), or a policy took care of it
        return attrs.evolve(verdict, unmodeled=None, marks=tuple(marks.items()))

    def _reading(self) -> Collection[str]:
        reading = () if self.reading is None else self.reading()
        return {name.lower() for name in reading} if self.lower_case_names and reading else reading

    def _statement(self, event: QueryEvent, results: Sequence[DdlResult]) -> Entry | None:
        first = results[0]
        event_type = first.event_type
        flag = first.kind.filter_flag
        flags = self.options.flags
        resumed_past = self._skip_event == (event.log_file, event.offset)  # handed off before: not judged again
        verdict = self._judged(event, resumed_past)
        props = verdict.props()
        # the query filter flags choose which statements are delivered, not what a copy follows: a statement whose
        # entry carries a heal's mark goes out whatever they say (its tables' rows are void from there)
        flagged = (
            (flag == "dml" and flags.query_dml)
            or (flag == "ddl" and flags.query_ddl)
            or (flag == "dcl" and flags.query_dcl)
        ) and HEAL not in props
        # a session's temporary tables alone, or DML that reaches none captured, passes nothing
        passes = not verdict.captures_nothing and (
            tables_pass(results, self.options.tables) or verdict.leaves or verdict.marks
        )
        dropped = flagged or not passes
        if self._in_txn:
            # a statement inside a transaction (statement-format DML, ...): a row entry, not a boundary
            self._seen_data = True
            if dropped:
                return None
            self._rows += 1
            if self._skip_rows:
                self._skip_rows -= 1
                return None
            return Entry(
                header=self._ddl_header(
                    self._header(
                        event,
                        event_type,
                        first.schema or "",
                        first.table or "",
                        self._txn_gtid,
                        {**xa_props(None, self._txn_xa), **props},
                    ),
                    event,
                    first,
                ),
                entry_type=EntryType.ROWDATA,
                # a DDL inside a transaction (MariaDB's CREATE TABLE ... SELECT) is still a DDL, as canal marks it
                row_change=RowChange(
                    event_type=event_type, sql=event.sql, ddl_schema=self._session(event), is_ddl=first.is_ddl
                ),
                anchor=self._anchor,
                rows_done=self._rows,
            )
        # outside a transaction: a DDL (or DCL, or other statement) -- a boundary in its own right
        self._seen_data = True
        if flagged and passes:
            # only the flag drops it: the parser may still heal it (take_filtered), and it then goes out
            self._filtered = self._boundary_statement(event, event_type, False, first, props)
            return None
        return self._boundary_statement(event, event_type, dropped, first, props)

    def take_filtered(self) -> Entry | None:
        """The entry of the statement just converted (outside a transaction) that only a query filter flag dropped,
        once: the parser judges it as it judges a delivered one (an ALTER whose conversions a copy cannot repeat) and
        hands it off only where that marks it ``HEAL`` -- the flags choose what is delivered, not what is
        followed."""
        filtered, self._filtered = self._filtered, None
        return filtered

    def _boundary_statement(
        self,
        event: QueryEvent,
        event_type: EventType,
        dropped: bool,
        first: DdlResult | None,
        props: Mapping[str, str] | None = None,
    ) -> Entry | None:
        skipped = self._is_skipped_boundary(event)
        gtid = self._pending_gtid
        self._pending_gtid = None
        position = self._boundary_position(event)
        self._anchor = position
        self._anchor_filled = True
        self._close_txn(keep_skip=skipped)
        if skipped:
            return self._resting_after(event)
        if dropped:
            return None
        schema = (first.schema if first is not None else None) or self._session(event)
        table = (first.table if first is not None else None) or ""
        return Entry(
            header=self._ddl_header(
                self._header(event, event_type, schema, table, gtid, props),
                event,
                first,
            ),
            entry_type=EntryType.ROWDATA,
            row_change=RowChange(
                event_type=event_type,
                sql=event.sql,
                ddl_schema=self._session(event),
                is_ddl=first.is_ddl if first is not None else True,
            ),
            anchor=position,
            rows_done=0,
        )

    def _ddl_header(self, header: Header, event: QueryEvent, first: DdlResult | None) -> Header:
        """A statement entry's header, with the props :func:`~canal.parse.statement_props.statement_props` gives it."""
        props = statement_props(event, first, self.lower_case_names, self.system_time_zone, self._server_version)
        if not props:
            return header
        return attrs.evolve(header, props={**header.props, **props})

    def _session(self, event: QueryEvent) -> str:
        """The statement's session database, as the server names it."""
        return event.schema.lower() if self.lower_case_names else event.schema
