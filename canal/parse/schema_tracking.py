"""The parser's side of the schema history: bootstrap it on a first start, rewind it to each dump's start, feed it
every DDL the dump reads before the entries after the DDL are handed off, and give the decoder its layouts.

Bootstrap. The layouts are read now (:meth:`~canal.parse.source.SchemaReader.schema_catalog`), but a dump may start
earlier (a configured position, a cursor from before the history existed). They are valid from the start position
only if no DDL lies between it and the moment they were read, so the binlog in between is checked (structure only,
no row decoding) for statements that change a layout:

* master status is taken before and after reading the layouts; a DDL between the two makes the read ambiguous and it
  is retried;
* no DDL between the start and the read: the layouts hold from the start;
* only CREATEs of tables that did not exist: they are left out and replayed as the dump reads them;
* any other DDL there: rows before it would be named by a later schema, so the start is refused with
  :class:`~canal.errors.SchemaError` naming the DDL and the recovery, never silently misnamed.

A server that logs column names (``binlog_row_metadata=FULL``) names every row itself: the binlog is checked all the
same (what only the history names -- foreign keys' actions, the types an ALTER converted from -- must hold from
the start), and a DDL there starts the history at the read rather than refusing the start.

How it is checked. On a server that does not log column names, by a scan of the binlog up to the master status taken
first, in a thread of its own while the layouts are read (information_schema over thousands of tables is most of a
second of the server's time, the scan a few microseconds of this process's per event); what the binlog grew by
meanwhile is scanned after. A failed scan fails the bootstrap as it would have in line.

On one that does, by the parser's own dump as it reads, with no second dump of the range (which doubled the server's
work and cost this process 1.5 us a row of a first start's range): the history is bootstrapped at the start, held
in memory, and the parser hands each layout statement before the read to :meth:`SchemaTracker.settle` before it
follows it. Before the range's first one, the history answers for every event what it answers
whatever the check finds: a table created in the range has no rows before its CREATE, a foreign key's action is
named only for a child the statement mapped, and a table altered later has the read's layout, as where the history
starts at the read. A statement of a table created in the range (a CREATE of a table it did not hold, then what
alters, renames or drops it) leaves the tables it creates out of the layouts at the start, as a scan's bootstrap
does, and is followed; the first statement of a table older than the start starts the history at the read, as a
scan finding it would. So a whole range makes the history a scan makes of it; where a statement of an older table
comes after statements of tables created in the range, the changes between are named as the history followed them
(what a scan would have named from the layouts at the read). An entry that asks the history for its tables' layouts
(a heal's) before the read has the rest of the range scanned first.

Views, triggers and routines. The layouts' read holds them as they are at the read: one that a statement in the
range drops, alters or replaces is forgotten at the start (its definition then is gone; the dump follows the
statement from there), by a scan's bootstrap and by the dump's check alike -- the check forgets it at the statement,
before the history follows it. What a statement logged as a statement reaches depends on them, so the history
answers it only once the rest of the range was scanned and its objects forgotten (a question before the read scans
it first, from the end of the last event the dump took). Once the dump has read the whole range
(:meth:`SchemaTracker.passed`), the history is persisted; nothing of it is before: a destination that stops first
bootstraps again at its next start, a dump of another server (a switch) bootstraps from that server's start, and a
failed scan leaves the history empty.

A source that cannot tell its layouts (a directory of binlog files) starts an empty history: tables created in the
files read are known, others only if the files log column names (else their rows fail with SchemaError).
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Final

import attrs

from canal.errors import SchemaError
from canal.names import qualified
from canal.parse.convert import COMPUTED_PROP, IMPLICIT_COLUMNS_PROP, RETYPED_FROM_PROP, RETYPED_TO_PROP
from canal.parse.events import BinlogEvent, FormatDescriptionEvent, QueryEvent
from canal.parse.sessions import SessionTables
from canal.parse.source import BinlogSource, DumpRequest, SchemaReader
from canal.parse.start_position import StartPosition
from canal.position import EntryPosition, journal_number
from canal.schema import SchemaCatalog
from canal.schema.computed import computed_columns, to_json
from canal.schema.followed import history_statement
from canal.schema.history import RECOVERY, SchemaHistory
from canal.schema.objects import EVERY_DATABASE
from canal.sql import (
    AlterDatabase,
    AlterTable,
    CreateDatabase,
    CreateIndex,
    CreateTable,
    DropDatabase,
    DropIndexStatement,
    DropTable,
    RenameTable,
    RenameTo,
    Statement,
    TableName,
    TruncateTable,
    fold_table_names,
)
from canal.sql.objects import ObjectStatement

__all__ = [
    "SchemaTracker",
    "created_in_range",
    "first_layout_ddl",
    "forget_layout_reads",
    "layout_ddl_between",
    "read_layouts",
]

_READ_ATTEMPTS: Final = 5


def _key(position: EntryPosition) -> tuple[int, int]:
    return (position.journal_number, -1 if position.position is None else position.position)


@attrs.frozen(slots=True)
class _Unchecked:
    """A bootstrap at ``start`` of the layouts read at ``read_at`` on the server at ``address`` (one that logs column
    names), held in memory while the dump checks the binlog in between (see the module's docstring); ``seen``: the
    layout statements it read there so far, each of a table created in the range."""

    address: str
    start: EntryPosition
    read_at: EntryPosition
    catalog: SchemaCatalog
    seen: tuple[_Ddl, ...] = ()


class SchemaTracker:
    """Keeps one destination's :class:`~canal.schema.history.SchemaHistory` in step with the parser's dumps."""

    def __init__(self, history: SchemaHistory, log: logging.LoggerAdapter[logging.Logger]) -> None:
        self.history = history
        self._log = log
        self._rewind_at_first_event = False
        self._origin: str | None = None  # the address of the server the current dump reads
        self._source: BinlogSource | None = None  # the current dump's source
        self._unchecked: _Unchecked | None = None
        self._taken_to: EntryPosition | None = None  # while checking: the end of the last event the dump took

    def prepare(self, source: BinlogSource, start: StartPosition, request: DumpRequest) -> DumpRequest:
        """Before a dump from ``start``: bootstrap (first start) or rewind the history; the request with the
        history as the decoder's layouts."""
        history = self.history
        self._source = source
        unchecked = self._unchecked
        if unchecked is not None:
            if source.address != unchecked.address or not start.position.journal_name or start.gtid_set:
                # positions of another server (a switch) do not compare with the read's: a bootstrap of its own
                self._stop_checking()
                history.forget()
            elif not _key(start.position) < _key(unchecked.read_at):
                self._checked()  # the dumps before this one read the whole range: the layouts held from the start
        if history.is_empty:
            self._bootstrap(source, start)
        elif start.position.journal_name and not start.gtid_set:
            history.rewind(start.position, origin=source.address)
        else:
            self._rewind_at_first_event = True  # a GTID start: the first event tells where the dump is
        self._origin = source.address
        return attrs.evolve(request, schema=history)

    def settle(self, event: BinlogEvent, *, layouts: bool = False) -> None:
        """Before the history answers for ``event`` what a bootstrap's check decides (see the module's docstring): a
        layout statement, a view's, trigger's or routine's, or (``layouts``) an entry that names its tables' layouts
        from the history, before the layouts' read. A statement of a table created in the range is followed as the
        bootstrap of a scan that found it would follow it (the table left out of the layouts at the start); one that
        drops or replaces a view, trigger or routine has that object forgotten at the start, as a scan's bootstrap
        forgets it; any other makes the history start at the read; an entry that names layouts has the rest of the
        range scanned, and the history made what a scan of all of it makes."""
        unchecked = self._unchecked
        if unchecked is None:
            return
        if not (journal_number(event.log_file), event.offset) < _key(unchecked.read_at):
            self._checked()  # (the check ends at the event before, unless the dump started there)
            return
        if layouts:
            self._scan_rest(unchecked, EntryPosition(event.log_file, event.offset))
            return
        if not isinstance(event, QueryEvent):
            return
        stmt = history_statement(event.sql, event.mode)
        if stmt is None:
            return
        ddl = self._folded([_Ddl(event.log_file, event.offset, event.schema, event.sql, stmt)])
        if isinstance(stmt, ObjectStatement):
            self.history.forget_objects(_replaced_objects(ddl))  # before the history follows it
            self._unchecked = attrs.evolve(unchecked, seen=(*unchecked.seen, *ddl))
            return
        self._decide(unchecked, [*unchecked.seen, *ddl], whole=False)

    def _question(self) -> None:
        """The history is asked what a statement logged as a statement reaches (its views, triggers, routines, every
        table it holds) while the dump checks a bootstrap: the rest of the range is scanned first, from the end of
        the last event the dump took, and the history made what a scan of all of it makes."""
        unchecked = self._unchecked
        if unchecked is not None:
            self._scan_rest(unchecked, self._taken_to or unchecked.start)

    def _scan_rest(self, unchecked: _Unchecked, at: EntryPosition) -> None:
        source = self._source
        assert source is not None
        if not _key(at) < _key(unchecked.read_at):
            self._checked()
            return
        try:
            rest = self._folded(layout_ddl_between(source, at, unchecked.read_at))
            self.history.forget_objects(_replaced_objects(rest))
            self._decide(unchecked, [*unchecked.seen, *rest], whole=True)
        except BaseException:
            self._stop_checking()
            self.history.forget()  # nothing persisted: the next dump bootstraps it again
            raise

    def _folded(self, found: list[_Ddl]) -> list[_Ddl]:
        if not self.history.lower_case_names:  # else the catalog read holds the names the server stores
            return found
        return [attrs.evolve(d, statement=fold_table_names(d.statement), schema=d.schema.lower()) for d in found]

    def _decide(self, unchecked: _Unchecked, found: list[_Ddl], *, whole: bool) -> None:
        """The layout statements ``found`` between the start and the read so far (``whole``: all of them): while
        each is of a table created in the range, the tables they create are left out of the layouts at the start
        (as a scan's bootstrap leaves them out), and the check goes on unless ``whole``; a statement of a table older
        than the start starts the history at the read."""
        created = created_in_range(found)
        source = self._source
        assert source is not None
        if created is None:
            self._stop_checking()
            self._start_history(source, unchecked.start, unchecked.read_at, unchecked.catalog.copy(), found)
            return
        known = created_in_range(list(unchecked.seen)) or set()
        self.history.leave_out(created - known)  # (tables created before were left out then, and replayed since)
        self._unchecked = attrs.evolve(unchecked, seen=tuple(found))
        if whole:
            self._checked()

    def _stop_checking(self) -> None:
        self._unchecked = None
        self.history.before_question = None

    @property
    def checking(self) -> bool:
        """Whether the dump checks a bootstrap as it reads (see the module's docstring): :meth:`passed` each event."""
        return self._unchecked is not None

    def passed(self, event: BinlogEvent) -> bool:
        """An event the dump took while :attr:`checking` (after the parser followed it): once the dump read every
        event before the layouts' read, without a layout statement among them (:meth:`settle` decides at the first),
        the check ends (the layouts held from the start) and the history is persisted. Whether the check goes on."""
        unchecked = self._unchecked
        if unchecked is None:
            return False
        if event.next_offset:
            if not (journal_number(event.log_file), event.next_offset) < _key(unchecked.read_at):
                self._checked()
                return False
            self._taken_to = EntryPosition(event.log_file, event.next_offset)
        return True

    def _checked(self) -> None:
        """The dump read the range a bootstrap is checked over (or a scan the rest of it), and no layout statement of
        a table older than the start: persist it."""
        self._stop_checking()
        self.history.persist()

    def observe(self, event: QueryEvent) -> dict[str, str]:
        """A query event the dump read: a DDL is recorded (and persisted) before anything after it is handed off.
        What the history knew before it that its entry carries (:data:`~canal.parse.convert.RETYPED_FROM_PROP`,
        :data:`~canal.parse.convert.RETYPED_TO_PROP`, :data:`~canal.parse.convert.IMPLICIT_COLUMNS_PROP`,
        :data:`~canal.parse.convert.COMPUTED_PROP`)."""
        position = EntryPosition(event.log_file, event.offset, event.timestamp * 1000, event.server_id)
        if self._rewind_at_first_event:
            self._rewind_at_first_event = False
            self.history.rewind(position, origin=self._origin)
        mode = event.mode
        retyped, retyped_to = self.history.retyped(event.schema, event.sql, position, mode)
        implicit = self.history.implicit_columns(event.schema, event.sql, mode)
        altered = self.history.altered_table(event.schema, event.sql, mode)
        computed = None if altered is None else computed_columns(altered)
        self.history.apply(position, event.schema, event.sql, next_offset=event.next_offset, sql_mode=event.sql_mode)
        props = {RETYPED_FROM_PROP: json.dumps(retyped, separators=(",", ":"))} if retyped else {}
        if retyped_to:
            props[RETYPED_TO_PROP] = json.dumps(retyped_to, separators=(",", ":"))
        if implicit:
            props[IMPLICIT_COLUMNS_PROP] = json.dumps(implicit, separators=(",", ":"))
        if computed:
            props[COMPUTED_PROP] = to_json(computed)
        return props

    def follow(self, event: QueryEvent) -> None:
        """A query event read: the history follows it (what :meth:`observe` does, without what an entry carries)."""
        position = EntryPosition(event.log_file, event.offset, event.timestamp * 1000, event.server_id)
        if self._rewind_at_first_event:
            self._rewind_at_first_event = False
            self.history.rewind(position, origin=self._origin)
        self.history.apply(position, event.schema, event.sql, next_offset=event.next_offset, sql_mode=event.sql_mode)

    def fork(self) -> SchemaTracker:
        """A tracker over an in-memory copy of the history in its state now (a rewind due at the first event
        included), which changes apart from this one: a shared reader's own (:mod:`canal.parse.shared`)."""
        twin = SchemaTracker(self.history.fork(), self._log)
        twin._rewind_at_first_event = self._rewind_at_first_event
        twin._origin = self._origin
        return twin

    # -- bootstrap ----------------------------------------------------------------------------------------------------

    def _bootstrap(self, source: BinlogSource, start: StartPosition) -> None:
        history = self.history
        if not isinstance(source, SchemaReader):
            at = start.position if start.position.journal_name else source.master_status()
            empty = SchemaCatalog(mariadb=source.is_mariadb)
            # the views, triggers and routines made before the files read are not known either
            empty.objects.unseen_triggers.add(EVERY_DATABASE)
            empty.objects.unseen_routines.add(EVERY_DATABASE)
            history.bootstrap(at, empty, origin=source.address)
            self._log.warning(
                "%s cannot tell its tables' layouts: the schema history starts empty at %s and knows the tables the "
                "binlog creates from here on (others need binlog_row_metadata=FULL)",
                source.address,
                at,
            )
            return
        # the binlog between the start and the read is checked for layout statements (its query events; rows are
        # not decoded) even where the binlog names every row: what only the history names must hold from the start
        # -- the foreign keys' actions of a parent's change (FOREIGN_KEY_ACTIONS), and the types an ALTER converts
        # values from (RETYPED_FROM, which the mirror converts them by). Where it names every row, by the dump itself
        # as it reads (settle); elsewhere by a scan, from now on, while the layouts are read.
        file_start = bool(start.position.journal_name) and not start.gtid_set
        rides = file_start and source.logs_column_names
        scan = _DdlScan(source, start.position) if file_start and not rides else None
        try:
            catalog, read_at = read_layouts(source, self._log)
        finally:
            if scan is not None:
                scan.join()
        if not file_start:
            history.bootstrap(read_at, catalog, origin=source.address)
            return
        if not _key(start.position) < _key(read_at):
            history.bootstrap(start.position, catalog, origin=source.address)  # the layouts read hold at the start
            return
        if rides:
            history.bootstrap(start.position, catalog, origin=source.address, persist=False)
            self._unchecked = _Unchecked(source.address, start.position, read_at, catalog.copy())
            self._taken_to = None
            history.before_question = self._question  # what a statement reaches: decided before it is answered
            return
        assert scan is not None
        self._start_history(source, start.position, read_at, catalog, scan.until(read_at))

    def _start_history(
        self,
        source: BinlogSource,
        start: EntryPosition,
        read_at: EntryPosition,
        catalog: SchemaCatalog,
        found: list[_Ddl],
    ) -> None:
        """Bootstrap the history of the layouts ``catalog`` read at ``read_at`` for a dump from ``start``, given the
        layout statements ``found`` between the two (see the module's docstring)."""
        history = self.history
        if history.lower_case_names:  # the catalog read holds the names the server stores
            found = [attrs.evolve(d, statement=fold_table_names(d.statement), schema=d.schema.lower()) for d in found]
        for stmt, schema in _replaced_objects(found):
            # the read came after it dropped or replaced an object the start still had: that one is not known
            # (the dump reads the statement again, and the history follows it from there)
            catalog.objects.forget(stmt, schema)
        found = [d for d in found if not isinstance(d.statement, ObjectStatement)]
        if not found:
            history.bootstrap(start, catalog, origin=source.address)
            return
        created = created_in_range(found)
        if created is not None:
            # every table those statements touch was created by them: before them it did not exist, and the
            # history replays them as the dump reads them
            for name in created:
                catalog.tables.pop(name, None)
            history.bootstrap(start, catalog, origin=source.address)
            self._log.info(
                "schema history starts at %s without %s (created after it)", start, ", ".join(sorted(created))
            )
            return
        ddl = next((d.describe() for d in found if created_in_range([d]) is None), found[0].describe())
        if isinstance(source, SchemaReader) and source.logs_column_names:
            # the binlog names the rows; the history starts at the read, and the changes before it name the foreign
            # keys' actions the tables have at the read (the DDL between may have changed them: say so), and no
            # types an ALTER converted from (the mirror stops at a conversion they decide)
            history.bootstrap(read_at, catalog, origin=source.address)
            self._log.warning(
                "schema history starts at %s, not at %s: %s lies between them, so the foreign keys' actions named by "
                "the changes before %s are those of the tables at that point, and the ALTERs before it name no types "
                "they converted values from",
                read_at,
                start,
                ddl,
                read_at,
            )
            return
        raise SchemaError(
            f"the schema history cannot start at {start}: {ddl} lies between it and now, and "
            f"{source.address} does not log column names (binlog_row_metadata is not FULL), so the rows before it "
            f"cannot be named; {RECOVERY}",
            position=str(start),
        )


@attrs.frozen(slots=True)
class _LayoutRead:
    position: EntryPosition
    catalog: SchemaCatalog


# the last layouts read per server (and login, which decides what information_schema shows): destinations of one
# master starting together read them once. 100 destinations each reading a 100-table catalog kept the server busy
# for 4.5 s of their start; one read at a time per server, and a read another start made at the same master
# position, or before it with no DDL in between, is taken (copied: each history changes its own)
_SHARED_READS: dict[str, _LayoutRead] = {}
_SHARED_LOCKS: dict[str, threading.Lock] = {}
_SHARED_LOCK = threading.Lock()
_SHARED_SCAN_BYTES: Final = 16 << 20  # the most binlog a start scans for DDL to take an earlier read


def forget_layout_reads() -> None:
    """Forget the layouts read for the process: the next start reads them as a fresh process's first would (for
    benchmarks that time one start after another in one process)."""
    with _SHARED_LOCK:
        _SHARED_READS.clear()


def _shared_lock(key: str) -> threading.Lock:
    with _SHARED_LOCK:
        return _SHARED_LOCKS.setdefault(key, threading.Lock())


def read_layouts(
    source: BinlogSource, log: logging.LoggerAdapter[logging.Logger] | None = None
) -> tuple[SchemaCatalog, EntryPosition]:
    """The source's table layouts now and a position they hold at: no DDL ran between the master status taken before
    and after reading them (else they are read again, up to a few times; then SchemaError).

    A source with a ``share_key`` (a server and its login) reads them once for the process: a read made by another
    destination's start is taken when no DDL lies between its position and the master's now."""
    if not isinstance(source, SchemaReader):
        raise SchemaError(f"{source.address} cannot tell its tables' layouts (a directory of binlog files)")
    key = getattr(source, "share_key", None)
    if not isinstance(key, str):
        return _read_layouts(source, log)
    with _shared_lock(key):
        shared = _SHARED_READS.get(key)
        if shared is not None:
            now = source.master_status()
            at = shared.position
            near = (
                now.server_id == at.server_id  # the same server, not another one now at that address
                and now.journal_name == at.journal_name
                and at.position is not None
                and now.position is not None
                and 0 <= now.position - at.position <= _SHARED_SCAN_BYTES
            )
            if near and (now.position == at.position or first_layout_ddl(source, at, now) is None):
                return shared.catalog.copy(), EntryPosition(
                    now.journal_name, now.position, now.timestamp, now.server_id
                )
        catalog, read_at = _read_layouts(source, log)
        _SHARED_READS[key] = _LayoutRead(read_at, catalog.copy())
        return catalog, read_at


def _read_layouts(
    source: SchemaReader, log: logging.LoggerAdapter[logging.Logger] | None
) -> tuple[SchemaCatalog, EntryPosition]:
    assert isinstance(source, BinlogSource)
    for _attempt in range(_READ_ATTEMPTS):
        before = source.master_status()
        catalog = source.schema_catalog(objects=True)
        after = source.master_status()
        ddl = first_layout_ddl(source, before, after)
        if ddl is None:
            return catalog, EntryPosition(before.journal_name, before.position, before.timestamp, before.server_id)
        if log is not None:
            log.info("%s ran while the table layouts were read; reading them again", ddl)
    raise SchemaError(
        f"DDL kept running on {source.address} while the schema history read the table layouts "
        f"({_READ_ATTEMPTS} attempts); start again when no DDL runs"
    )


def first_layout_ddl(source: BinlogSource, start: EntryPosition, end: EntryPosition) -> str | None:
    """The first statement in [start, end) of the source's binlog that changes a table layout, described, or None.
    Reads the binlog's structure only (no row decoding)."""
    found = layout_ddl_between(source, start, end, first_only=True)
    return found[0].describe() if found else None


@attrs.frozen(slots=True)
class _Ddl:
    log_file: str
    offset: int
    schema: str
    sql: str
    statement: Statement | ObjectStatement

    def describe(self) -> str:
        return f"the DDL {self.sql[:200]!r} at {self.log_file}:{self.offset}"


class _DdlScan:
    """:func:`layout_ddl_between` the start and the binlog's end now, in a thread of its own (see the module's
    docstring); :meth:`until` joins it and scans the rest up to where the layouts were read."""

    def __init__(self, source: BinlogSource, start: EntryPosition) -> None:
        self.source = source
        self.start = start
        self.end = source.master_status()
        self._found: list[_Ddl] = []
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="canal-ddl-scan", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._found = layout_ddl_between(self.source, self.start, self.end)
        except BaseException as exc:  # raised where the bootstrap waits for it (until)
            self._error = exc

    def join(self) -> None:
        self._thread.join()

    def until(self, end: EntryPosition) -> list[_Ddl]:
        """The layout statements in [start, ``end``): the thread's, then those of what lies past its end."""
        self.join()
        if self._error is not None:
            raise self._error
        stop = _key(end)
        found = [d for d in self._found if (journal_number(d.log_file), d.offset) < stop]
        rest = EntryPosition(self.end.journal_name, self.end.position)
        return found + layout_ddl_between(self.source, max(rest, self.start, key=_key), end)


def layout_ddl_between(
    source: BinlogSource, start: EntryPosition, end: EntryPosition, *, first_only: bool = False
) -> list[_Ddl]:
    """The statements in [start, end) of the source's binlog that change a table layout, in order."""
    if not start.journal_name or not (_key(start) < _key(end)):
        return []
    request = DumpRequest(start.journal_name, start.position or 4, blocking=False, decode_rows=False)
    events = source.dump(request)
    found: list[_Ddl] = []
    sessions = SessionTables()
    # a first start past a busy stretch of binlog reads every event of it here: nothing per event but the compare
    end_at, start_at = _key(end), _key(start)
    file_name, file_number = "", -1
    try:
        for event in events:
            if event.offset == 0:
                continue  # an artificial event (a dump's first rotate)
            if event.log_file != file_name:
                file_name, file_number = event.log_file, journal_number(event.log_file)
            at = (file_number, event.offset)
            if not at < end_at:
                break
            if start.included and at == start_at:
                continue  # consumed already
            if isinstance(event, FormatDescriptionEvent) and event.created:
                sessions.clear()  # the server started: its sessions' temporary tables are gone
            elif isinstance(event, QueryEvent):
                # (a view's, trigger's or routine's too: what the bootstrap read of them may miss)
                stmt = history_statement(event.sql, event.mode)
                if stmt is None:
                    continue
                if not isinstance(stmt, ObjectStatement):
                    flagged = event.thread_specific
                    scope = sessions.follow([stmt], event.schema, event.server_id, event.thread_id, flagged=flagged)
                    if scope.session_only:
                        continue  # a session's temporary tables: no layout of the schema
                found.append(_Ddl(event.log_file, event.offset, event.schema, event.sql, stmt))
                if first_only:
                    break
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()
    return found


def _replaced_objects(found: list[_Ddl]) -> list[tuple[ObjectStatement, str]]:
    """The statements among ``found`` that drop, alter or replace a view, trigger or routine, each with its session's
    database: what the layouts read after them hold of those objects is not what the start had."""
    return [
        (d.statement, d.schema)
        for d in found
        if isinstance(d.statement, ObjectStatement) and (d.statement.verb != "CREATE" or d.statement.or_replace)
    ]


def created_in_range(ddl: list[_Ddl]) -> set[str] | None:
    """The tables (``db.table``) the statements create, when each table they touch is first touched by a plain
    CREATE TABLE (so it did not exist before them); None when some statement touches a table that existed before
    (its layout before the statement cannot be known from the layouts now).

    A DROP DATABASE (or CREATE OR REPLACE DATABASE) drops its tables: those born in the range stay born there (a
    CREATE of the same name afterwards is one again); a table of it that existed before the range is in no layout
    now, so the history does not know it, and its rows before the drop stop typed as any unknown table's do."""
    created: set[str] = set()
    for d in ddl:
        stmt = d.statement
        if isinstance(stmt, CreateDatabase | AlterDatabase | DropDatabase | ObjectStatement):
            # no layout the history starts from (the bootstrap reads each database's default character set; views,
            # triggers and routines the window changed are the bootstrap's to forget)
            continue
        names = _touched(stmt, d.schema)
        if names is None:
            return None
        if isinstance(stmt, RenameTable | AlterTable):
            # a table born in the range keeps being one under its new names (RENAME TABLE t TO t2, ... RENAME TO)
            moved = _moved(created, _renames(stmt, d.schema))
            if moved is not None:
                created = moved
                continue
        for name in names:
            if name in created:
                continue
            if isinstance(stmt, CreateTable) and not (stmt.if_not_exists or stmt.or_replace) and name == names[0]:
                created.add(name)
                continue
            return None
    return created


def _moved(created: set[str], renames: list[tuple[str, str]] | None) -> set[str] | None:
    """``created`` after the renames, pair by pair (``a TO tmp, b TO a, tmp TO b``); None when one moves a table not
    born in the range, or there are none."""
    if not renames:
        return None
    moved = set(created)
    for old, new in renames:
        if old not in moved:
            return None
        moved.discard(old)
        moved.add(new)
    return moved


def _renames(stmt: RenameTable | AlterTable, session: str) -> list[tuple[str, str]] | None:
    """The (old, new) names a RENAME TABLE or an ALTER TABLE ... RENAME TO moves, in order; None for an ALTER that
    renames nothing."""

    def full(name: TableName) -> str:
        return qualified(name.schema if name.schema is not None else session, name.name)

    if isinstance(stmt, RenameTable):
        return [(full(old), full(new)) for old, new in stmt.pairs]
    moved = [full(a.table) for a in stmt.actions if isinstance(a, RenameTo)]
    return [(full(stmt.table), moved[-1])] if moved else None


def _touched(stmt: Statement, session: str) -> list[str] | None:
    """The tables a layout statement touches, the one it creates or alters first; None: a whole database."""

    def full(name: TableName) -> str:
        return qualified(name.schema if name.schema is not None else session, name.name)

    if isinstance(stmt, CreateTable):
        return [full(stmt.table), *([full(stmt.like)] if stmt.like is not None else [])]
    if isinstance(stmt, AlterTable):
        moved = [full(a.table) for a in stmt.actions if isinstance(a, RenameTo)]
        return [full(stmt.table), *moved]
    if isinstance(stmt, DropTable):
        return [full(t) for t in stmt.tables]
    if isinstance(stmt, RenameTable):
        return [full(n) for pair in stmt.pairs for n in pair]
    if isinstance(stmt, TruncateTable | CreateIndex | DropIndexStatement):
        return [full(stmt.table)]
    return None
