"""The parser's side of the schema history: bootstrap it on a first start, rewind it to each dump's start, feed it
every DDL the dump reads before the entries after the DDL are handed off, and give the decoder its layouts.

Bootstrap. The layouts are read now (:meth:`~canal.parse.source.SchemaReader.schema_catalog`), but a dump may start
earlier (a configured position, a cursor from before the history existed). They are valid from the start position
only if no DDL lies between it and the moment they were read, so the binlog in between is scanned (structure only,
no row decoding) for statements that change a layout:

* master status is taken before and after reading the layouts; a DDL between the two makes the read ambiguous and it
  is retried;
* no DDL between the start and the read: the layouts hold from the start;
* only CREATEs of tables that did not exist: they are left out and replayed as the dump reads them;
* any other DDL there: rows before it would be named by a later schema, so the start is refused with
  :class:`~canal.errors.SchemaError` naming the DDL and the recovery, never silently misnamed.

A server that logs column names (``binlog_row_metadata=FULL``) names every row itself: the binlog is scanned all the
same (what only the history names -- foreign keys' actions, the types an ALTER converted from -- must hold from
the start), and a DDL there starts the history at the read rather than refusing the start.

The scan of the binlog up to the master status taken first runs in a thread of its own while the layouts are read
(information_schema over thousands of tables is most of a second of the server's time, the scan a few microseconds
of this process's per event); what the binlog grew by meanwhile is scanned after. A failed scan fails the bootstrap
as it would have in line.

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
from canal.parse.events import FormatDescriptionEvent, QueryEvent
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


class SchemaTracker:
    """Keeps one destination's :class:`~canal.schema.history.SchemaHistory` in step with the parser's dumps."""

    def __init__(self, history: SchemaHistory, log: logging.LoggerAdapter[logging.Logger]) -> None:
        self.history = history
        self._log = log
        self._rewind_at_first_event = False
        self._origin: str | None = None  # the address of the server the current dump reads

    def prepare(self, source: BinlogSource, start: StartPosition, request: DumpRequest) -> DumpRequest:
        """Before a dump from ``start``: bootstrap (first start) or rewind the history; the request with the
        history as the decoder's layouts."""
        history = self.history
        if history.is_empty:
            self._bootstrap(source, start)
        elif start.position.journal_name and not start.gtid_set:
            history.rewind(start.position, origin=source.address)
        else:
            self._rewind_at_first_event = True  # a GTID start: the first event tells where the dump is
        self._origin = source.address
        return attrs.evolve(request, schema=history)

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
        # the binlog between the start and the read is scanned (its query events; rows are not decoded) even where
        # the binlog names every row: what only the history names must hold from the start -- the foreign keys'
        # actions of a parent's change (FOREIGN_KEY_ACTIONS), and the types an ALTER converts values from
        # (RETYPED_FROM, which the mirror converts them by); from now on, while the layouts are read
        scan = _DdlScan(source, start.position) if start.position.journal_name and not start.gtid_set else None
        try:
            catalog, read_at = read_layouts(source, self._log)
        finally:
            if scan is not None:
                scan.join()
        if scan is None:
            history.bootstrap(read_at, catalog, origin=source.address)
            return
        if not _key(start.position) < _key(read_at):
            history.bootstrap(start.position, catalog, origin=source.address)  # the layouts read hold at the start
            return
        found = scan.until(read_at)
        if history.lower_case_names:  # the catalog read holds the names the server stores
            found = [attrs.evolve(d, statement=fold_table_names(d.statement), schema=d.schema.lower()) for d in found]
        for d in found:
            if isinstance(d.statement, ObjectStatement) and (d.statement.verb != "CREATE" or d.statement.or_replace):
                # the read came after it dropped or replaced an object the start still had: that one is not known
                # (the dump reads the statement again, and the history follows it from there)
                catalog.objects.forget(d.statement, d.schema)
        found = [d for d in found if not isinstance(d.statement, ObjectStatement)]
        if not found:
            history.bootstrap(start.position, catalog, origin=source.address)
            return
        created = created_in_range(found)
        if created is not None:
            # every table those statements touch was created by them: before them it did not exist, and the
            # history replays them as the dump reads them
            for name in created:
                catalog.tables.pop(name, None)
            history.bootstrap(start.position, catalog, origin=source.address)
            self._log.info(
                "schema history starts at %s without %s (created after it)", start.position, ", ".join(sorted(created))
            )
            return
        ddl = next((d.describe() for d in found if created_in_range([d]) is None), found[0].describe())
        if source.logs_column_names:
            # the binlog names the rows; the history starts at the read, and the changes before it name the foreign
            # keys' actions the tables have at the read (the DDL between may have changed them: say so), and no
            # types an ALTER converted from (the mirror stops at a conversion they decide)
            history.bootstrap(read_at, catalog, origin=source.address)
            self._log.warning(
                "schema history starts at %s, not at %s: %s lies between them, so the foreign keys' actions named by "
                "the changes before %s are those of the tables at that point, and the ALTERs before it name no types "
                "they converted values from",
                read_at,
                start.position,
                ddl,
                read_at,
            )
            return
        raise SchemaError(
            f"the schema history cannot start at {start.position}: {ddl} lies between it and now, and "
            f"{source.address} does not log column names (binlog_row_metadata is not FULL), so the rows before it "
            f"cannot be named; {RECOVERY}",
            position=str(start.position),
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
