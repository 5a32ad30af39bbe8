"""The schema history: every table's layout at any binlog position (canal's table-meta TSDB, Debezium's schema
history).

Row events name their table but, unless the server logs ``binlog_row_metadata=FULL`` (MySQL 8 and MariaDB default to
MINIMAL / NO_LOG), not its columns. Reading the columns from ``information_schema`` when the row is decoded gives the
schema of *now*, which is wrong for every row written before a later ALTER. The history instead follows the binlog:

* **bootstrap**: on a destination's first start, the layouts of all tables (``information_schema``, every schema but
  the server's own) are taken as a snapshot valid from the dump's start position (see the parser for how it proves
  that no DDL lies between that position and the moment the layouts were read);
* **apply**: each DDL query event is applied to a :class:`~canal.schema.SchemaCatalog` (the one DDL code) and recorded
  with its position *before* any entry after it is handed to the store, so a consumer can never have acked past a DDL
  the history does not hold (a crash between the DDL and its record restarts before the DDL, which is read again);
* **rewind**: a dump that (re)starts at position P sees the schema as of P: the latest snapshot at or before P plus
  the records before P; records at or after P are dropped (they are read again);
* **compaction**: every ``snapshot_every`` records a snapshot of the whole catalog is taken; snapshots and records
  older than ``expire_s`` (by event time) are dropped, keeping the newest snapshot before that horizon.

A DDL the catalog cannot apply (an ALTER of a table it never saw, CREATE TABLE ... SELECT) does not stop the stream:
the table is marked unknown from that position, and only a row event of that table that needs names from the
history fails, with :class:`~canal.errors.SchemaError` naming the table, the position and the recovery.

Persisted as one JSON document (:meth:`SchemaHistory.to_json`, :mod:`canal.schema.history_document`) through a
:class:`~canal.schema.history_store.HistoryStore`: in memory, or a file beside the destination's file meta (the stores
are re-exported here). The layouts the bootstrap reads from the server are :mod:`canal.schema.information_schema`'s.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Final

import attrs

from canal.errors import SchemaError
from canal.names import qualified, split_qualified
from canal.position import EntryPosition
from canal.protocol import TableSchema
from canal.schema.catalog import SchemaCatalog, TableChange, TableDef
from canal.schema.column_source import ColumnSource, SchemaColumn
from canal.schema.columns import effective_charset, mysql_type_text
from canal.schema.conversions import alter_types
from canal.schema.followed import history_statement, layout_statement
from canal.schema.foreign_keys import ActionIndex, ForeignKey, action_edges, action_index
from canal.schema.history_document import Record, Snapshot, decode, encode
from canal.schema.history_store import FileHistoryStore, HistoryStore, MemoryHistoryStore
from canal.schema.objects import EVERY_DATABASE
from canal.schema.reach import Reach, reach
from canal.sql import (
    DEFAULT_MODE,
    AlterTable,
    SqlMode,
    Statement,
    TableName,
    fold_table_names,
)
from canal.sql.objects import ObjectStatement, Write

__all__ = [
    "ColumnSource",
    "FileHistoryStore",
    "HistoryStore",
    "MemoryHistoryStore",
    "SchemaColumn",
    "SchemaHistory",
    "layout_statement",
]

log = logging.getLogger(__name__)

RECOVERY: Final = (
    "recover with `canal schema rebuild --destination D --at FILE:POS` at a position after which the server's current "
    "schema holds (e.g. the cursor, if no DDL followed it), or set binlog_row_metadata=FULL on the server"
)


_COLUMNS_MADE_MAX: Final = 4096  # distinct table layouts whose decoder columns are kept


def _k(position: EntryPosition) -> tuple[int, int, bool]:
    """Binlog order: file number, offset, and ``included`` (the event there consumed: what follows it comes after).
    Times, server ids and GTIDs do not order a history (EntryPosition's own order breaks ties with them)."""
    return (position.journal_number, -1 if position.position is None else position.position, position.included)


def _after(position: EntryPosition, next_offset: int | None) -> EntryPosition:
    """The position just after an event (where the state after it applies)."""
    if next_offset is None or position.position is None:
        return position
    return attrs.evolve(position, position=next_offset, included=False)


class SchemaHistory:
    """Table layouts over binlog positions for one destination (see the module).

    ``mariadb`` selects MariaDB's spelling of types (integer display widths, JSON as LONGTEXT). Thread-safe: the
    parser thread applies and rewinds while readers (``canal schema show``) ask for layouts. A strict
    :class:`ColumnSource` for the row decoder.
    """

    strict = True

    def __init__(
        self,
        store: HistoryStore | None = None,
        *,
        mariadb: bool = True,
        snapshot_every: int = 1000,
        snapshot_interval_s: float | None = None,
        expire_s: float = 360 * 3600,
        destination: str = "",
    ) -> None:
        if snapshot_every < 1:
            raise ValueError("snapshot_every must be >= 1")
        self.store: HistoryStore = store if store is not None else MemoryHistoryStore()
        self.mariadb = mariadb
        self.snapshot_every = snapshot_every
        self.snapshot_interval_s = snapshot_interval_s
        self.expire_s = expire_s
        self.destination = destination
        self._lock = threading.RLock()
        self._snapshots: list[Snapshot] = []
        self._records: list[Record] = []
        self._catalog = SchemaCatalog(mariadb=mariadb)
        self._unknown: dict[str, str] = {}
        self._position: EntryPosition | None = None  # the state applies to events from here on
        self.origin: str | None = None  # the server whose binlog the positions are in (positions compare only there)
        self.version = 0  # bumped on every change of the current state (decoders rebuild what they derived)
        # the server stores database and table names in lower case (lower_case_table_names=1, read by the parser at
        # each start): DDL names are folded as the server folds them, so the history keys tables as rows name them
        self.lower_case_names = False
        # the foreign keys each table's row changes follow, for the state of ``version``: looked up on every
        # DELETE / UPDATE rows event, so the catalog's index of them is built once per state, not per table (a
        # pass over 2,000 tables for each table's first row change made a stream over many tables quadratic)
        self._actions: tuple[int, ActionIndex, dict[tuple[str, str], list[dict[str, Any]]]] = (-1, {}, {})
        # the decoder's columns by what they are made of, not by table: every table of one definition (shards, a
        # schema per tenant) shares them, and a stream over thousands of such tables asks for a new table's at
        # every other transaction
        self._columns_made: dict[tuple[object, ...], tuple[SchemaColumn, ...]] = {}
        self._loaded = False  # read from the store at first use (a ZooKeeper meta is started after assembly)
        self._provisional = False  # a bootstrap made with persist=False, not persisted since: nothing is saved
        # called before the history tells what a statement reaches (a first start's bootstrap that the dump checks
        # as it reads decides first what it holds of the views, triggers and routines: canal.parse.schema_tracking)
        self.before_question: Callable[[], None] | None = None

    @contextlib.contextmanager
    def _all_or_nothing(self) -> Iterator[None]:
        """A change whose persisting fails (a fenced or failed write) leaves the history as it was."""
        saved = (
            self._catalog.copy(),
            dict(self._unknown),
            list(self._records),
            list(self._snapshots),
            self._position,
            self.version,
            self.mariadb,
            self.origin,
            self._provisional,
        )
        try:
            yield
        except BaseException:
            (
                self._catalog,
                self._unknown,
                self._records,
                self._snapshots,
                self._position,
                self.version,
                self.mariadb,
                self.origin,
                self._provisional,
            ) = saved
            raise

    def _ensure_loaded(self) -> None:
        if not self._loaded:
            text = self.store.load()
            if text:
                self._load(text)
            self._loaded = True

    # -- state --------------------------------------------------------------------------------------------------------

    @property
    def is_empty(self) -> bool:
        """Whether the history holds nothing yet (a first start bootstraps it)."""
        with self._lock:
            self._ensure_loaded()
            return not self._snapshots

    @property
    def position(self) -> EntryPosition | None:
        """Where the current state applies from: after the last DDL applied, or the bootstrap / rewind position."""
        with self._lock:
            self._ensure_loaded()
            return self._position

    def holds_nothing_after(self, position: EntryPosition) -> bool:
        """Whether the current state is the one an event at ``position`` sees: nothing after it was applied (a
        bootstrap taken later -- a first start at an old position, on a server that logs column names -- holds the
        layouts of later DDL)."""
        with self._lock:
            self._ensure_loaded()
            return self._position is None or _k(self._position) <= _k(position)

    @property
    def records(self) -> int:
        with self._lock:
            self._ensure_loaded()
            return len(self._records)

    @property
    def snapshots(self) -> int:
        with self._lock:
            self._ensure_loaded()
            return len(self._snapshots)

    def table(self, db: str, name: str) -> TableDef | None:
        """The current layout of ``db.name`` (None: no such table); SchemaError if it is unknown since a DDL."""
        with self._lock:
            self._ensure_loaded()
            why = self._unknown.get(qualified(db, name))
            if why is not None:
                raise SchemaError(
                    f"the layout of {qualified(db, name)} is unknown: {why}; {RECOVERY}", table=qualified(db, name)
                )
            return self._catalog.get(db, name)

    def known_foreign_keys(self, db: str, name: str) -> tuple[ForeignKey, ...] | None:
        """The foreign keys of table ``db.name`` (as a child); None when the history has no such table or its
        layout is unknown since a DDL."""
        with self._lock:
            self._ensure_loaded()
            if qualified(db, name) in self._unknown:
                return None
            table = self._catalog.get(db, name)
            return None if table is None else table.foreign_keys

    def columns(self, db: str, name: str) -> tuple[SchemaColumn, ...] | None:
        """The current columns of ``db.name`` for a row decoder (None: the history has no such table);
        SchemaError if its layout is unknown since a DDL. Tables of one layout get the same tuple."""
        table = self.table(db, name)
        if table is None:
            return None
        key = (table.columns, table.row_key, table.charset, self.mariadb)
        made = self._columns_made.get(key)
        if made is None:
            primary = {p.lower() for p in table.row_key}
            made = tuple(
                SchemaColumn(
                    name=c.name,
                    is_key=c.name.lower() in primary,
                    labels=c.labels,
                    unsigned=c.unsigned if c.base not in ("enum", "set") else None,
                    column_type=mysql_type_text(c, self.mariadb),
                    charset=effective_charset(c, table.charset),
                )
                for c in table.columns
            )
            if len(self._columns_made) >= _COLUMNS_MADE_MAX:
                self._columns_made.clear()  # layouts come and go with DDL
            self._columns_made[key] = made
        return made

    def repair(self, position: EntryPosition, table: TableDef) -> bool:
        """The binlog (FULL metadata) names ``table`` differently from the history: the binlog wins from
        ``position`` on, recorded as a ``CREATE OR REPLACE TABLE`` of its layout (so rewinds and reloads see it).
        Positions before the history's start are left alone (the history never held them)."""
        with self._lock:
            self._ensure_loaded()
            previous = self._catalog.get(table.db, table.name)
            if previous is not None and previous.foreign_keys and not table.foreign_keys:
                # the binlog tells columns, not foreign keys: those whose columns are still there stay
                names = {c.name.lower() for c in table.columns}
                kept = tuple(k for k in previous.foreign_keys if all(c.lower() in names for c in k.columns))
                table = attrs.evolve(table, foreign_keys=kept)
            if previous is not None and previous.keys and not table.keys:
                # nor its other keys: those whose columns are still there stay; and the primary key it names may
                # be the unique key the server promotes to one (canal.schema.keys), no primary key of the table's
                names = {c.name.lower() for c in table.columns}
                others = tuple(k for k in previous.keys if all(c.lower() in names for c in k.columns))
                table = attrs.evolve(table, keys=others)
                if not previous.primary and table.primary and table.primary == previous.row_key:
                    table = attrs.evolve(table, primary=())
            sql = table.show_create(mariadb=self.mariadb, qualified=True).replace(
                "CREATE TABLE", "CREATE OR REPLACE TABLE", 1
            )
            stmt = layout_statement(sql)
            assert stmt is not None
            return self._apply_statement(stmt, position, table.db, sql, position.position)

    def _action_index(self) -> tuple[ActionIndex, dict[tuple[str, str], list[dict[str, Any]]]]:
        """The current state's foreign keys by the table they reference, and the edges looked up from it (under the
        lock): built once per state."""
        if self._actions[0] != self.version:
            self._actions = (self.version, action_index((t.db, t.name, t.foreign_keys) for t in self._catalog), {})
        return self._actions[1], self._actions[2]

    def reach(
        self,
        writes: Sequence[Write],
        calls: Sequence[TableName],
        session: str,
        temporary: Callable[[str, str], bool] | None = None,
        *,
        flagged: bool = False,
        reads: Sequence[TableName] = (),
    ) -> Reach:
        """The tables a statement logged as a statement, run in database ``session``, may change as the current
        state tells (:func:`canal.schema.reach.reach`): its ``writes``, the functions it ``calls``, the views among
        the names it ``reads`` (the functions their queries call), and what their views, triggers, routines and
        foreign keys reach; ``temporary(db, table)``: a name its session holds as a temporary table; ``flagged``:
        the statement used a temporary table (a name no table of the schema has is that one)."""
        if self.before_question is not None:
            self.before_question()
        if self.lower_case_names:
            writes = [fold_table_names(w) for w in writes]
            calls = [fold_table_names(c) for c in calls]
            reads = [fold_table_names(r) for r in reads]
            session = session.lower()
        with self._lock:
            self._ensure_loaded()
            index, _edges = self._action_index()
            return reach(
                self._catalog,
                index,
                writes,
                calls,
                session,
                unknown_tables=self._unknown,
                temporary=temporary,
                flagged=flagged,
                reads=reads,
            )

    def function_names(self) -> set[str] | None:
        """The stored functions' names the history knows (lower case); None when some cannot be known (a database
        whose routines the bootstrap could not see): a statement's calls are then read whole."""
        if self.before_question is not None:
            self.before_question()
        with self._lock:
            self._ensure_loaded()
            objects = self._catalog.objects
            return None if objects.unseen_routines else objects.function_names()

    def view_names(self) -> set[str]:
        """The views' names the history knows (lower case): a statement reading one runs the functions its query
        calls."""
        if self.before_question is not None:
            self.before_question()
        with self._lock:
            self._ensure_loaded()
            return {view.name.lower() for view in self._catalog.objects.views.values()}

    def captured_tables(self, captured: Callable[[str, str], bool]) -> tuple[str, ...]:
        """Every table (``db.table``) the history holds now that ``captured`` takes, those whose layout it lost
        included: what a statement heals whose reach cannot be told."""
        if self.before_question is not None:
            self.before_question()
        with self._lock:
            self._ensure_loaded()
            names = [(t.db, t.name) for t in self._catalog]
            names.extend(split_qualified(lost) for lost in self._unknown)
        return tuple(sorted(dict.fromkeys(qualified(db, table) for db, table in names if captured(db, table))))

    def foreign_key_actions(self, db: str, name: str) -> list[dict[str, Any]]:
        """The foreign keys whose actions change rows when a row of ``db.name`` is deleted or has its referenced
        columns changed, children's children included (:func:`canal.schema.foreign_keys.action_edges`), each with
        ``layout``: its child's columns as ``[name, mysql_type, is_key]``."""
        with self._lock:
            self._ensure_loaded()
            catalog = self._catalog
            index, known_edges = self._action_index()
            known = known_edges.get((db, name))
            if known is not None:
                return [dict(edge) for edge in known]
            edges = action_edges(index, db, name)
            for edge in edges:
                child = catalog.get(edge["db"], edge["table"])
                schema = None if child is None else child.table_schema(mariadb=self.mariadb)
                edge["layout"] = None if schema is None else [[c.name, c.mysql_type, c.is_key] for c in schema.columns]
            known_edges[(db, name)] = edges
            return [dict(edge) for edge in edges]

    def implicit_columns(self, session: str, sql: str, mode: SqlMode = DEFAULT_MODE) -> list[str]:
        """For an ALTER TABLE of a table with columns the server added itself and keeps last (a system-versioned
        table's implicit ``row_start`` / ``row_end``): their names, in order -- where a holder of the table's columns
        by name needs to place the columns the statement adds. Asked before the statement is applied."""
        table = self.altered_table(session, sql, mode)
        return [] if table is None else [c.name for c in table.columns if c.hidden]

    def altered_table(self, session: str, sql: str, mode: SqlMode = DEFAULT_MODE) -> TableDef | None:
        """The table an ALTER TABLE statement changes, as the history holds it now (None: another statement)."""
        stmt = layout_statement(sql, mode)
        if not isinstance(stmt, AlterTable):
            return None
        db, name = stmt.table.schema if stmt.table.schema is not None else session, stmt.table.name
        if self.lower_case_names:  # the history keys tables as the server stores their names
            db, name = db.lower(), name.lower()
        with self._lock:
            self._ensure_loaded()
            return self._catalog.get(db, name)

    def retyped(
        self, session: str, sql: str, at: EntryPosition | None = None, mode: SqlMode = DEFAULT_MODE
    ) -> tuple[dict[str, str], dict[str, str]]:
        """For an ALTER TABLE that declares columns anew (MODIFY / CHANGE) or converts the table's text (CONVERT TO
        CHARACTER SET): each such column's type before the statement and after it (the MySQL type, with its charset
        where it holds text: :func:`~canal.schema.columns.type_with_charset`), both by its name before it -- what a
        holder of its values needs to convert them as the server did (a DATETIME read in the session's time zone
        becomes a TIMESTAMP in UTC, text in the table's charset becomes bytes). Asked before the statement is
        applied; empty for any other statement, a table the history does not hold, a statement it cannot follow, or
        a statement at ``at`` that the history's layouts are already past (it started later: it cannot know the
        types before). ``mode``: the statement's sql_mode."""
        stmt = layout_statement(sql, mode)
        with self._lock:
            self._ensure_loaded()
            if at is not None and self._position is not None and _k(at) < _k(self._position):
                return {}, {}
        table = self.altered_table(session, sql, mode)
        if table is None or not isinstance(stmt, AlterTable):
            return {}, {}
        return alter_types(table, fold_table_names(stmt) if self.lower_case_names else stmt, self.mariadb)

    def table_schema(self, db: str, name: str) -> TableSchema | None:
        table = self.table(db, name)
        return None if table is None else table.table_schema(mariadb=self.mariadb)

    def at(self, position: EntryPosition) -> SchemaCatalog:
        """The catalog as an event at ``position`` sees it (a copy; the history is unchanged)."""
        with self._lock:
            self._ensure_loaded()
            catalog, _unknown = self._state_at(position)
            return catalog

    def fork(self) -> SchemaHistory:
        """A copy in this state, in memory, that changes apart from this history (nothing it does is persisted)."""
        with self._lock:
            self._ensure_loaded()
            twin = SchemaHistory(
                mariadb=self.mariadb,
                snapshot_every=self.snapshot_every,
                snapshot_interval_s=self.snapshot_interval_s,
                expire_s=self.expire_s,
                destination=self.destination,
            )
            twin._loaded = True
            twin._snapshots = list(self._snapshots)  # snapshots and records are never changed, only replaced
            twin._records = list(self._records)
            twin._catalog = self._catalog.copy()
            twin._unknown = dict(self._unknown)
            twin._position = self._position
            twin.origin = self.origin
            twin.lower_case_names = self.lower_case_names
            return twin

    # -- changes ------------------------------------------------------------------------------------------------------

    def bootstrap(
        self, position: EntryPosition, catalog: SchemaCatalog, *, origin: str | None = None, persist: bool = True
    ) -> None:
        """Start the history over: ``catalog`` holds the layouts valid for events at ``position`` (in the binlog of
        server ``origin``) and after. With ``persist=False`` it is held in memory only, until :meth:`persist` or the
        next change that persists (a first start's layouts that the dump checks as it reads them:
        :mod:`canal.parse.schema_tracking`), or :meth:`forget`."""
        with self._lock, self._all_or_nothing():
            self._loaded = True  # what the store held is replaced
            self.origin = origin
            self.mariadb = catalog.mariadb
            snapshot = Snapshot(position, catalog.copy(), {})
            self._snapshots = [snapshot]
            self._records = []
            self._catalog = catalog.copy()
            self._unknown = {}
            self._position = position
            self.version += 1
            self._provisional = not persist
            self._save()
        log.info(
            "destination %s: schema history bootstrapped at %s with %d tables",
            self.destination,
            position,
            len(catalog.tables),
            extra={"destination": self.destination},
        )

    def persist(self) -> None:
        """Persist the history as it is: a bootstrap made with ``persist=False``, and what was applied since."""
        with self._lock:
            self._ensure_loaded()
            self._provisional = False
            self._save()

    def forget(self) -> None:
        """Drop a bootstrap made with ``persist=False`` and not persisted since: the history is empty again, as its
        store is."""
        with self._lock:
            if not self._provisional:
                raise SchemaError(f"destination {self.destination}: a persisted schema history is not forgotten")
            self._snapshots, self._records = [], []
            self._catalog, self._unknown = SchemaCatalog(mariadb=self.mariadb), {}
            self._position = self.origin = None
            self._provisional = False
            self.version += 1

    def leave_out(self, tables: Iterable[str]) -> None:
        """Drop ``tables`` (``db.table``) from a bootstrap made with ``persist=False`` and not persisted since, and from
        the state now: tables a statement after the bootstrap's position creates, where the layouts it was given were
        read (a first start's check, :mod:`canal.parse.schema_tracking`)."""
        names = set(tables)
        if not names:
            return
        with self._lock:
            if not self._provisional or not self._snapshots:
                raise SchemaError(f"destination {self.destination}: tables are left out of a new bootstrap only")
            first = self._snapshots[0]
            catalog = first.catalog.copy()
            for name in names:
                catalog.tables.pop(name, None)
                self._catalog.tables.pop(name, None)
            self._snapshots[0] = Snapshot(first.position, catalog, first.unknown)
            self.version += 1

    def forget_objects(self, statements: Iterable[tuple[ObjectStatement, str]]) -> None:
        """Forget, at a bootstrap made with ``persist=False`` and not persisted since, the views, triggers and
        routines that ``statements`` (each with its session's database) after its position drop, alter or replace:
        the layouts it was given were read after them (a first start's check, :mod:`canal.parse.schema_tracking`).
        The state now is the bootstrap's with what was applied since."""
        forgotten = list(statements)
        if not forgotten:
            return
        with self._lock:
            if not self._provisional or not self._snapshots:
                raise SchemaError(f"destination {self.destination}: objects are forgotten at a new bootstrap only")
            first = self._snapshots[0]
            catalog = first.catalog.copy()
            for stmt, schema in forgotten:
                if self.lower_case_names:
                    stmt, schema = fold_table_names(stmt), schema.lower()
                catalog.objects.forget(stmt, schema)
            self._snapshots = [Snapshot(first.position, catalog, first.unknown)]  # (later ones held the objects)
            self._catalog, self._unknown = self._state_at(None)
            self.version += 1

    def rewind(self, position: EntryPosition, *, origin: str | None = None) -> None:
        """Make the current state the one events at ``position`` see; records at or after it are dropped (a dump
        that starts there reads them again).

        A position in another server's binlog (``origin``, e.g. the standby after a switch) does not compare with
        the history's: the state is then the one at the position's *time* (the switch starts the standby at a time
        before the master's last position, and what follows is read again), and the history starts over there, in
        the new server's positions."""
        with self._lock:
            self._ensure_loaded()
            if origin is not None and self.origin is not None and origin != self.origin:
                self._reanchor(position, origin)
            else:
                self._rewind(position)
                if self.origin is None:
                    self.origin = origin  # a history rebuilt without a server learns it at its first dump

    def _reanchor(self, position: EntryPosition, origin: str) -> None:
        with self._all_or_nothing():
            if not self._snapshots:
                return
            if position.timestamp is None:
                catalog, unknown = self._catalog.copy(), dict(self._unknown)
                log.warning(
                    "destination %s: the schema history moves to %s at %s, whose time is unknown: it keeps its newest "
                    "state",
                    self.destination,
                    origin,
                    position,
                    extra={"destination": self.destination},
                )
            else:
                catalog, unknown = self._state_at_time(position.timestamp)
            self._snapshots = [Snapshot(position, catalog, unknown)]
            self._records = []
            self._catalog, self._unknown, self._position = catalog.copy(), dict(unknown), position
            self.origin = origin
            self.version += 1
            self._save()

    def _state_at_time(self, timestamp: int) -> tuple[SchemaCatalog, dict[str, str]]:
        """The state after every DDL executed before ``timestamp`` (ms)."""

        def before(position: EntryPosition) -> bool:
            return position.timestamp is not None and position.timestamp < timestamp

        return self._replay(before, lambda p: p.timestamp is not None and p.timestamp <= timestamp)

    def _rewind(self, position: EntryPosition) -> None:
        with self._all_or_nothing():
            if not self._snapshots:
                return
            dropped = [r for r in self._records if not _k(r.position) < _k(position)]
            catalog, unknown = self._state_at(position)
            if dropped:
                self._records = [r for r in self._records if _k(r.position) < _k(position)]
                kept = [s for s in self._snapshots if not _k(position) < _k(s.position)]
                self._snapshots = kept or self._snapshots[:1]
            self._catalog, self._unknown, self._position = catalog, unknown, position
            self.version += 1
            if dropped:
                self._save()

    def apply(
        self,
        position: EntryPosition,
        schema: str,
        sql: str,
        *,
        next_offset: int | None = None,
        sql_mode: int | None = None,
    ) -> bool:
        """Apply a query event's statement at ``position`` (its own position; ``next_offset`` where the next event
        starts) run in session database ``schema`` under ``sql_mode`` (as logged); whether it changed the history.
        Persisted before it returns."""
        stmt = history_statement(sql, self._mode(sql_mode))
        if stmt is None:
            return False
        with self._lock:
            self._ensure_loaded()
            return self._apply_statement(stmt, position, schema, sql, next_offset, sql_mode)

    def _mode(self, sql_mode: int | None) -> SqlMode:
        return SqlMode.of(sql_mode, mariadb=self.mariadb)

    def _apply_statement(
        self,
        stmt: Statement | ObjectStatement,
        position: EntryPosition,
        schema: str,
        sql: str,
        next_offset: int | None,
        sql_mode: int | None = None,
    ) -> bool:
        with self._all_or_nothing():
            if not self._snapshots:
                return False  # nothing to change yet: the bootstrap will read the layouts this statement made
            if self._position is not None and _k(position) < _k(self._position):
                return False  # already in the state (a bootstrap or snapshot taken after it)
            self._apply(self._catalog, self._unknown, stmt, schema, position)
            after = _after(position, next_offset)
            self._records.append(Record(position, after, schema, sql, sql_mode))
            self._position = after
            self.version += 1
            if self._snapshot_due(after):
                self._compact(after)
            self._save()
            return True

    def _snapshot_due(self, position: EntryPosition) -> bool:
        """Every ``snapshot_every`` records, or when the newest snapshot is ``snapshot_interval_s`` old."""
        if self._records_after_newest_snapshot() >= self.snapshot_every:
            return True
        newest = self._snapshots[-1].position.timestamp
        interval = self.snapshot_interval_s
        return (
            interval is not None
            and newest is not None
            and position.timestamp is not None
            and position.timestamp - newest >= interval * 1000
        )

    def _records_after_newest_snapshot(self) -> int:
        newest = self._snapshots[-1].position
        return sum(1 for r in self._records if not _k(r.position) < _k(newest))

    def _apply(
        self,
        catalog: SchemaCatalog,
        unknown: dict[str, str],
        stmt: Statement | ObjectStatement,
        schema: str,
        position: EntryPosition,
    ) -> list[TableChange]:
        if isinstance(stmt, ObjectStatement):
            self._apply_object(catalog, stmt, schema, position)
            return []
        if self.lower_case_names:
            stmt = fold_table_names(stmt)
            schema = schema.lower()
        try:
            changes = catalog.apply(stmt, schema or None)
        except SchemaError as exc:
            if exc.table is None:  # no table to mark unknown: the history cannot go on past this statement
                raise SchemaError(
                    f"destination {self.destination}: the DDL at {position} cannot be applied to the schema history "
                    f"and names no table ({exc}); {RECOVERY}"
                ) from exc
            table = exc.table
            unknown[table] = f"{exc} (a DDL at {position} the history cannot apply)"
            catalog.tables.pop(table, None)
            log.warning(
                "destination %s: schema history cannot apply the DDL at %s (%s); rows of %s need FULL binlog row "
                "metadata from here on",
                self.destination,
                position,
                exc,
                table,
                extra={"destination": self.destination},
            )
            return []
        for change in changes:
            for name in (change.old, change.new):
                if name is not None:
                    unknown.pop(name, None)
        return changes

    def _apply_object(
        self, catalog: SchemaCatalog, stmt: ObjectStatement, schema: str, position: EntryPosition
    ) -> None:
        if self.lower_case_names:
            stmt = fold_table_names(stmt)
            schema = schema.lower()
        try:
            catalog.apply_object(stmt, schema or None)
        except SchemaError as exc:
            # an object the history cannot place: what any database's statements reach is not known from here
            catalog.objects.unseen_triggers.add(EVERY_DATABASE)
            catalog.objects.unseen_routines.add(EVERY_DATABASE)
            log.warning(
                "destination %s: schema history cannot follow the %s %s at %s (%s); what statements logged as "
                "statements reach is not known from here",
                self.destination,
                stmt.verb,
                stmt.kind,
                position,
                exc,
                extra={"destination": self.destination},
            )

    def _state_at(self, position: EntryPosition | None) -> tuple[SchemaCatalog, dict[str, str]]:
        """The state events at ``position`` see (None: after every record)."""
        if position is None:
            return self._replay(lambda _p: True, lambda _p: True)
        return self._replay(lambda p: _k(p) < _k(position), lambda p: not _k(position) < _k(p))

    def _replay(
        self, record_before: Callable[[EntryPosition], bool], snapshot_usable: Callable[[EntryPosition], bool]
    ) -> tuple[SchemaCatalog, dict[str, str]]:
        """The newest usable snapshot with the records after it that come before the point, replayed."""
        base = self._snapshots[0]
        for snapshot in self._snapshots:
            if snapshot_usable(snapshot.position):
                base = snapshot
        catalog, unknown = base.catalog.copy(), dict(base.unknown)
        for record in self._records:
            if _k(record.position) < _k(base.position):
                continue
            if not record_before(record.position):
                break
            stmt = history_statement(record.sql, self._mode(record.sql_mode))
            if stmt is not None:
                self._apply(catalog, unknown, stmt, record.schema, record.position)
        return catalog, unknown

    def _compact(self, position: EntryPosition) -> None:
        """A snapshot of the current state at ``position``; what expired before the newest time is dropped."""
        self._snapshots.append(Snapshot(position, self._catalog.copy(), dict(self._unknown)))
        newest = position.timestamp
        if newest is None:
            return
        horizon = newest - int(self.expire_s * 1000)
        keep_from = 0
        for i, snapshot in enumerate(self._snapshots):
            if snapshot.position.timestamp is not None and snapshot.position.timestamp <= horizon:
                keep_from = i  # the newest snapshot at or before the horizon stays: positions after it need it
        self._snapshots = self._snapshots[keep_from:]
        first = self._snapshots[0].position
        self._records = [r for r in self._records if not _k(r.position) < _k(first)]

    # -- persistence --------------------------------------------------------------------------------------------------

    def to_json(self) -> str:
        with self._lock:
            self._ensure_loaded()
            return encode(self.mariadb, self.origin, self._snapshots, self._records)

    def _save(self) -> None:
        if not self._provisional:  # a bootstrap made with persist=False is saved by persist()
            self.store.save(self.to_json())

    def _load(self, text: str) -> None:
        doc = decode(text, self.mariadb, repr(self.store))
        self.mariadb, self.origin, self._snapshots, self._records = doc.mariadb, doc.origin, doc.snapshots, doc.records
        if self._snapshots:
            self._catalog, self._unknown = self._state_at(None)
            self._position = self._records[-1].after if self._records else self._snapshots[-1].position
