"""Classify the SQL of binlog query events the way canal's DDL parser does.

:func:`classify_ddl` turns one query-event statement into :class:`DdlResult` values: the canal event type
(CREATE, ALTER, ERASE, TRUNCATE, RENAME, CINDEX, DINDEX, INSERT/UPDATE/DELETE for statement-form DML, QUERY for
everything else) and the schema and table it is about. :func:`query_kind` says which of canal's query filter flags
(``filter.query.dml`` / ``ddl`` / ``dcl``) a statement falls under, and recognises transaction control statements
(BEGIN, COMMIT, ROLLBACK, SAVEPOINT, XA ...). :func:`tables_pass` says whether a statement's results pass a table
filter, :func:`lower_cased` gives them the names a server with ``lower_case_table_names=1`` stores.

The statements are read by the one SQL reader (:mod:`canal.sql`) in its lenient mode, so the classifier never
raises: names are read as MySQL reads them (backtick-quoted identifiers with dots, spaces and doubled backticks
inside, schema-qualified names, Unicode, comments anywhere, executable version comments ``/*!40101 ... */`` and
MariaDB's ``/*M!100100 ... */`` whose content counts as SQL).

Semantics follow canal's ``DruidDdlParser``, with these deliberate differences:

* a statement canal's parser accepts but does not map (CREATE VIEW, GRANT, ...) gives one QUERY result with the
  default schema instead of no result at all (canal then drops the event);
* ``ALTER TABLE ... ADD FOREIGN KEY`` / ``ADD CHECK`` gives ALTER (canal builds no result for it);
* ``REPLACE`` and ``LOAD DATA ... INTO TABLE`` in statement form are INSERT (as canal's ``SimpleDdlParser``);
* results of an ALTER TABLE with several clauses are deduplicated (canal gives one per clause); the first result is
  the one canal puts in the entry header, and it is the same as canal's;
* ``DROP DATABASE`` / ``DROP SCHEMA`` gives ERASE (canal: QUERY), with the database as its schema and no table: it
  drops every table of the database, which no row event and no other entry says.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Final

import attrs

from canal.filter import TableFilters
from canal.protocol import EventType
from canal.sql import DEFAULT_MODE, QueryKind, SqlMode, Statement, TableName, read_statements
from canal.sql import statements as st

__all__ = [
    "DdlResult",
    "QueryKind",
    "classify_ddl",
    "lower_cased",
    "query_kind",
    "savepoint_statement",
    "tables_pass",
    "xa_xid",
]

_DML_TYPES: Final = frozenset({EventType.INSERT, EventType.UPDATE, EventType.DELETE})
_DML_EVENTS: Final = {"INSERT": EventType.INSERT, "UPDATE": EventType.UPDATE, "DELETE": EventType.DELETE}
# the event an unreadable statement's head stands for (a statement without a table falls back to QUERY)
_UNREADABLE_EVENTS: Final = {
    "CREATE TABLE": EventType.CREATE,
    "ALTER TABLE": EventType.ALTER,
    "DROP TABLE": EventType.ERASE,
    "TRUNCATE TABLE": EventType.TRUNCATE,
    "CREATE INDEX": EventType.CINDEX,
    "DROP INDEX": EventType.DINDEX,
}
_INDEX_HEADS: Final = frozenset({"INDEX", "KEY", "UNIQUE", "FULLTEXT", "SPATIAL", "PRIMARY", "VECTOR"})


@attrs.frozen(slots=True)
class DdlResult:
    """What one statement (or one table of a multi-table statement) is about.

    ``schema``/``table`` name the table the event concerns (for RENAME: the new name; ``ori_schema``/``ori_table``
    hold the old one). For CREATE/DROP DATABASE ``schema`` is that database and ``table`` is None. Names are
    unquoted and keep the case they were written in; an unqualified name takes the default schema.
    """

    event_type: EventType
    schema: str | None = None
    table: str | None = None
    ori_schema: str | None = None
    ori_table: str | None = None
    kind: QueryKind = QueryKind.OTHER
    database_level: bool = False  # CREATE / ALTER / DROP DATABASE: ``schema`` is the database

    @property
    def is_ddl(self) -> bool:
        """canal's ``RowChange.isDdl`` for the entry: true unless the statement is DML (INSERT/UPDATE/DELETE)."""
        return self.event_type not in _DML_TYPES


class _Classifier:
    """Maps the reader's statements to canal's results under one default schema."""

    __slots__ = ("default",)

    def __init__(self, default: str | None) -> None:
        self.default = default

    def query(self, kind: QueryKind, schema: str | None = None) -> list[DdlResult]:
        return [DdlResult(EventType.QUERY, schema if schema is not None else self.default, None, kind=kind)]

    def table(self, event_type: EventType, name: TableName | None, kind: QueryKind = QueryKind.DDL) -> DdlResult:
        if name is None:
            # no table event without a table: statement-form DML keeps its type (canal: multi-table UPDATE), DDL
            # whose table cannot be read falls back to QUERY
            return DdlResult(event_type if kind is QueryKind.DML else EventType.QUERY, self.default, None, kind=kind)
        schema = name.schema if name.schema is not None else self.default
        return DdlResult(event_type, schema, name.name, kind=kind)

    def results(self, stmt: Statement) -> list[DdlResult]:
        if isinstance(stmt, st.CreateTable):
            return [self.table(EventType.CREATE, stmt.table)]
        if isinstance(stmt, st.AlterTable):
            return self.alter(stmt)
        if isinstance(stmt, st.DropTable):
            return [self.table(EventType.ERASE, name) for name in stmt.tables]
        if isinstance(stmt, st.RenameTable):
            return [self.rename(old, new) for old, new in stmt.pairs]
        if isinstance(stmt, st.TruncateTable):
            return [self.table(EventType.TRUNCATE, stmt.table)]
        if isinstance(stmt, st.CreateIndex):
            return [self.table(EventType.CINDEX, stmt.table)]
        if isinstance(stmt, st.DropIndexStatement):
            return [self.table(EventType.DINDEX, stmt.table)]
        if isinstance(stmt, st.CreateDatabase | st.DropDatabase | st.AlterDatabase):
            name = stmt.name if stmt.name is not None else self.default  # ALTER DATABASE without a name: the session's
            database_event = EventType.ERASE if isinstance(stmt, st.DropDatabase) else EventType.QUERY  # tables go
            return [DdlResult(database_event, name, None, kind=QueryKind.DDL, database_level=True)]
        if isinstance(stmt, st.DmlStatement):
            return [self.table(_DML_EVENTS[stmt.verb], stmt.table, QueryKind.DML)]
        if isinstance(stmt, st.TransactionStatement | st.Grant | st.TableMaintenance):
            return self.query(stmt.kind)
        if isinstance(stmt, st.OtherStatement):
            return self.query(stmt.kind, stmt.schema)
        event_type = _UNREADABLE_EVENTS.get(stmt.verb)
        if event_type is None:
            return self.query(stmt.kind)
        return [self.table(event_type, stmt.table)]

    def rename(self, old: TableName, new: TableName) -> DdlResult:
        was, now = old.qualified(self.default), new.qualified(self.default)
        return DdlResult(EventType.RENAME, now.schema, now.name, was.schema, was.name, QueryKind.DDL)

    def alter(self, stmt: st.AlterTable) -> list[DdlResult]:
        table = stmt.table.qualified(self.default)
        has_options = False
        found: list[DdlResult] = []
        for action in stmt.actions:
            if isinstance(action, st.SetTableOptions):
                has_options = True
            elif isinstance(action, st.RenameTo):
                new = action.table
                # an unqualified new name goes to the default schema (canal's rule), else stays in the table's own
                new_schema = new.schema if new.schema is not None else (self.default or table.schema)
                found.append(DdlResult(EventType.RENAME, new_schema, new.name, table.schema, table.name, QueryKind.DDL))
            elif not isinstance(action, st.AlterOption):
                found.append(DdlResult(_alter_event(action), table.schema, table.name, kind=QueryKind.DDL))
        results: list[DdlResult] = []
        if has_options or not found:
            results.append(DdlResult(EventType.ALTER, table.schema, table.name, kind=QueryKind.DDL))
        for r in found:
            if r not in results:
                results.append(r)
        return results


def _alter_event(action: st.AlterAction) -> EventType:
    if isinstance(action, st.AddKey) and isinstance(action.key, st.IndexDef):
        return EventType.CINDEX
    if isinstance(action, st.DropKey) and action.kind in ("INDEX", "CONSTRAINT"):
        return EventType.DINDEX
    if isinstance(action, st.OtherAction) and action.error is not None:
        # an action the reader could not read: judge by its first words, as canal's parser would
        verb, _, what = action.head.partition(" ")
        if verb == "ADD" and what in _INDEX_HEADS:
            return EventType.CINDEX
        if verb == "DROP" and what in ("INDEX", "KEY", "CONSTRAINT"):
            return EventType.DINDEX
    return EventType.ALTER


# --------------------------------------------------------------------------------------------------------------------
# public entry points

_CACHE_MAX_SQL: Final = 4096  # longer statements (big INSERTs) are not worth keeping in the memo


@functools.lru_cache(maxsize=1024)
def _classify_cached(sql: str, default_schema: str | None, mode: SqlMode) -> tuple[DdlResult, ...]:
    return _classify(sql, default_schema, mode)


def _classify(sql: str, default_schema: str | None, mode: SqlMode = DEFAULT_MODE) -> tuple[DdlResult, ...]:
    classifier = _Classifier(default_schema)
    results = [r for stmt in read_statements(sql, strict=False, mode=mode) for r in classifier.results(stmt)]
    if not results:
        return (DdlResult(EventType.QUERY, default_schema, None, kind=QueryKind.OTHER),)
    return tuple(results)


def classify_ddl(sql: str, default_schema: str | None, mode: SqlMode = DEFAULT_MODE) -> list[DdlResult]:
    """Classify a query event's statement(s), read under its sql_mode ``mode``, as canal's DDL parser does; never
    raises.

    ``default_schema`` is the query event's current database (None or "" when there is none); unqualified names
    take it. Multi-table statements (DROP TABLE a, b / RENAME TABLE a TO b, c TO d) give one result per table; an
    ALTER TABLE gives one result per distinct kind of change (ALTER, CINDEX, DINDEX, RENAME), table options first
    as in canal. The first result is the one for the entry header; every result counts for filtering (the event is
    kept when any of them passes) and for invalidating table metadata. Unparseable or empty text gives one QUERY
    result with the default schema.
    """
    default = default_schema or None
    if len(sql) <= _CACHE_MAX_SQL:
        return list(_classify_cached(sql, default, mode))
    return list(_classify(sql, default, mode))


def query_kind(sql: str) -> QueryKind:
    """The kind of the (first) statement of a query event: transaction control, DML, DDL, DCL or OTHER."""
    return classify_ddl(sql, None)[0].kind


def xa_xid(sql: str) -> str | None:
    """The xid text of an XA statement (``X'..',X'..',1`` or a quoted string), as canal's ``XA_XID`` prop; else None."""
    statements = read_statements(sql, strict=False)
    if statements and isinstance(statements[0], st.TransactionStatement):
        return statements[0].xid
    return None


def savepoint_statement(sql: str) -> tuple[str, str] | None:
    """``(verb, name)`` of a savepoint statement -- verb ``"SAVEPOINT"``, ``"ROLLBACK TO"`` or ``"RELEASE"`` -- else
    None (also when the name cannot be read)."""
    statements = read_statements(sql, strict=False)
    if statements and isinstance(statements[0], st.TransactionStatement):
        stmt = statements[0]
        if stmt.savepoint_verb is not None and stmt.savepoint is not None:
            return stmt.savepoint_verb, stmt.savepoint
    return None


def lower_cased(results: Sequence[DdlResult]) -> list[DdlResult]:
    """``results`` with their database and table names in lower case, as a server with ``lower_case_table_names=1``
    stores them (the statement's text keeps the case it was typed in)."""
    return [
        attrs.evolve(
            r,
            schema=_lower(r.schema),
            table=_lower(r.table),
            ori_schema=_lower(r.ori_schema),
            ori_table=_lower(r.ori_table),
        )
        for r in results
    ]


def _lower(name: str | None) -> str | None:
    return None if name is None else name.lower()


def tables_pass(results: Sequence[DdlResult], tables: TableFilters | None) -> bool:
    """Whether a statement of these ``results`` passes the table filter ``tables`` (None: every table)."""
    if tables is None:
        return True
    named = [r for r in results if r.table and r.kind is not QueryKind.DCL]
    if not named:
        # a database's DDL passes when a table of it may pass (canal passes them all, so a pipeline filtered
        # to one schema saw CREATE/DROP DATABASE of every other one)
        databases = [r.schema for r in results if r.database_level and r.schema]
        return not databases or any(tables.may_include_schema(d) for d in databases)
    return any(tables.matches(r.schema or "", r.table or "") for r in named)
