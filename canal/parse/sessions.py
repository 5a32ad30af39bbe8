"""The temporary tables each session holds, as the binlog shows them: a session's own tables shadow the tables of
their names.

``CREATE TEMPORARY TABLE t`` makes a table only its session sees, and while it exists every statement of that
session naming ``t`` -- DML, ``TRUNCATE``, ``ALTER TABLE t RENAME ...``, ``RENAME TABLE``, ``DROP TABLE`` -- is about
it, not about the table ``t`` of the schema. Under statement-based logging (a session's ``binlog_format`` STATEMENT or
MIXED) the server logs those statements, each query event carrying the session's thread id and the thread-specific
flag (``LOG_EVENT_THREAD_SPECIFIC_F``); the DROP of a temporary table it logs as ``DROP TEMPORARY TABLE``, also when
the session ends. :class:`SessionTables` follows them per session (the event's server id and thread id), so a
statement on a session's temporary table changes nothing of the schema (:class:`Scope`), and what it cannot know it
says: a flagged statement naming a table the model holds no temporary table of -- a session that created it before
the dump's start -- may be about either (:attr:`Scope.flagged`).

What sets the flag (MariaDB 10.11, measured under ROW, STATEMENT and MIXED alike: the flag is the statement's own,
not the session's, and does not depend on the format): a statement that opens, creates, truncates or drops a
temporary table, or evaluates ``CONNECTION_ID()`` (a column's ``DEFAULT (CONNECTION_ID())`` too, for any statement
opening its table, an ALTER included) -- and every statement that drops a table of the schema: each ``DROP TABLE``
(``IF EXISTS`` of no table too), and a ``CREATE OR REPLACE TABLE`` whose table exists (its implicit drop; of a new
name it is unflagged). Such a drop's flag says nothing of the temporary tables of the names (:func:`flagged_anyway`).
A plain ``CREATE TABLE ... LIKE`` of a table of the schema, a TRUNCATE or ALTER of one, and ``RENAME TABLE`` (of a
temporary table too) carry no flag. A session holding a temporary table cannot switch out of ROW logging, and under
ROW a ``CREATE TABLE ... LIKE`` of a temporary table is logged as a ``CREATE TABLE`` of its columns: the text ``LIKE
t`` of a temporary ``t`` comes from a session logging statements, whose ``CREATE TEMPORARY TABLE t`` is in the binlog
too (unless it turned its binlog off), perhaps before the dump's start. So where a drop's flag hides what the
statement used, the model alone answers: a ``CREATE OR REPLACE TABLE x LIKE t`` of an existing ``x`` is of the
temporary ``t`` only if the model holds one, which it does not for a session that made it before the dump's start.

The converter uses the model for statements between transactions (TRUNCATE, ALTER, RENAME, DROP of a temporary
table); a statement inside a transaction (DML) it judges by the event's flag alone, as a restart inside that
transaction judges it again -- knowing no session's tables made before it.

The model starts empty at every dump start (a session's tables before the start are not in the binlog read) and when
a binlog file written at a server's start begins (its format description is stamped ``created``: every session
ended with the old process). Under row-based logging the server logs no statement on a temporary table -- but for a
``RENAME TABLE`` of one (MariaDB 10.11, measured: without the flag, and without the CREATE before it), which the binlog
alone cannot tell from a rename of the table of that name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from canal.sql import AlterTable, CreateTable, DropTable, RenameTable, RenameTo, Statement, TableName, named_tables

__all__ = ["Scope", "SessionTables", "flagged_anyway"]

Name = tuple[str, str]


@attrs.frozen(slots=True)
class Scope:
    """Where one query event's statements stand: ``temporary`` -- the names (``(db, table)``) they name that are the
    session's temporary tables (before the statement: ``CREATE TEMPORARY TABLE`` and ``DROP TEMPORARY TABLE`` name
    theirs); ``flagged`` -- the event carries the thread-specific flag; ``session_only`` -- every table they name is
    the session's (or a temporary one they create or drop): nothing of the schema changes, but what DML there may
    reach (a stored function it calls)."""

    temporary: frozenset[Name] = frozenset()
    flagged: bool = False
    session_only: bool = False


_NOTHING = Scope()


class SessionTables:
    """The temporary tables of each session, by ``(server id, thread id)``."""

    __slots__ = ("_tables",)

    def __init__(self) -> None:
        self._tables: dict[tuple[int, int], set[Name]] = {}

    def clear(self) -> None:
        """No session's tables are known (a dump's start, a server's start)."""
        self._tables.clear()

    def holds(self, server_id: int, thread_id: int, db: str, table: str) -> bool:
        tables = self._tables.get((server_id, thread_id))
        return tables is not None and (db, table) in tables

    def follow(
        self,
        statements: Sequence[Statement],
        session: str,
        server_id: int,
        thread_id: int,
        *,
        flagged: bool,
        lower_case: bool = False,
    ) -> Scope:
        """A query event's statements, run by session ``thread_id`` of ``server_id`` in database ``session``: the
        :class:`Scope` they stand in (the names judged before the statements change the model), then the model
        follows them."""
        key = (server_id, thread_id)
        tables = self._tables.get(key)
        if not statements or (tables is None and not flagged and not _creates_temporary(statements)):
            return _NOTHING

        def qualified(name: TableName) -> Name:
            db, table = name.schema if name.schema is not None else session, name.name
            return (db.lower(), table.lower()) if lower_case else (db, table)

        held = set() if tables is None else set(tables)
        temporary: set[Name] = set()
        every = True
        for stmt in statements:
            names = [qualified(n) for n in named_tables(stmt)]
            before = set(held)
            _change(held, stmt, names, qualified)
            own = _own_tables(stmt, names)
            # a session's table before the statement, or after it (a rename of one), or one it creates or drops
            theirs = [n for n in names if n in before or n in held or n in own]
            if isinstance(stmt, CreateTable) and not stmt.temporary and theirs[:1] == names[:1]:
                theirs = theirs[1:]  # CREATE TABLE makes a table of the schema, whatever the session holds
            temporary.update(theirs)
            every = every and len(theirs) == len(names)
        if held:
            self._tables[key] = held
        else:
            self._tables.pop(key, None)
        if not temporary and not flagged:
            return _NOTHING
        return Scope(frozenset(temporary), flagged, every and bool(temporary))


def flagged_anyway(stmt: Statement, exists: Callable[[TableName], bool]) -> bool:
    """Whether the server sets the thread-specific flag on ``stmt`` whatever temporary tables its session holds, as it
    does on every statement that drops a table of the schema (``exists(name)``: the schema holds a table of that
    name before the statement): a ``DROP TABLE`` and a ``CREATE OR REPLACE TABLE`` of a table that exists. The
    flag of such a statement tells nothing of the temporary tables of the names it holds."""
    if isinstance(stmt, DropTable):
        return not stmt.temporary
    return isinstance(stmt, CreateTable) and stmt.or_replace and not stmt.temporary and exists(stmt.table)


def _creates_temporary(statements: Sequence[Statement]) -> bool:
    return any(isinstance(s, CreateTable) and s.temporary for s in statements)


def _own_tables(stmt: Statement, names: list[Name]) -> set[Name]:
    """The temporary tables a statement creates or drops by saying so (``CREATE`` / ``DROP TEMPORARY TABLE``)."""
    if isinstance(stmt, CreateTable) and stmt.temporary:
        return {names[0]}  # (not a LIKE's source: that one is whatever its name holds)
    if isinstance(stmt, DropTable) and stmt.temporary:
        return set(names)
    return set()


def _change(held: set[Name], stmt: Statement, names: list[Name], qualified: Callable[[TableName], Name]) -> None:
    """The session's temporary tables after ``stmt`` (``names``: the tables it names, qualified)."""
    if isinstance(stmt, CreateTable) and stmt.temporary:
        held.add(names[0])
    elif isinstance(stmt, DropTable):
        held.difference_update(names)  # DROP TABLE drops a session's temporary table of the name first
    elif isinstance(stmt, RenameTable):
        for old_name, new_name in stmt.pairs:  # in order: a TO tmp, b TO a, tmp TO b
            old = qualified(old_name)
            if old in held:
                held.discard(old)
                held.add(qualified(new_name))
    elif isinstance(stmt, AlterTable) and names[0] in held:
        renamed = [qualified(a.table) for a in stmt.actions if isinstance(a, RenameTo)]
        if renamed:
            held.discard(names[0])
            held.add(renamed[-1])
