"""The capture's question about a statement logged as a statement: which tables may it have changed?

:class:`StatementReach` reads a query event's DML (or a ``SELECT`` / ``DO`` the server logged because a stored
function it calls writes) for its targets and the functions it calls, and asks the schema history
(:meth:`canal.schema.history.SchemaHistory.reach`, :mod:`canal.schema.reach`) what those reach at the statement's
place in the binlog. Without a schema history nothing of views, triggers, routines or foreign keys is known: the
answer is that it cannot be told (:data:`NO_HISTORY`), and a copy is healed whole.

A statement's text is searched for the functions it calls -- and for the views it reads, whose queries may call them
-- only where a stored function may be called (the history knows one, or could not see a database's routines), and
then first for their names (a megabyte INSERT is read whole only where it may call one or read a view; a comment may
stand between a function's name and its parenthesis).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

from canal.errors import SchemaError
from canal.position import EntryPosition
from canal.schema.reach import Reach
from canal.sql import DmlStatement, OtherStatement, Statement, TableName
from canal.sql.objects import Write, read_uses

if TYPE_CHECKING:
    from canal.schema.history import SchemaHistory

__all__ = ["NO_HISTORY", "StatementReach", "statement_writes"]

Temporary = Callable[[str, str], bool]
"""``temporary(db, table)``: whether the statement's session holds a temporary table of that name."""

# what may stand between a function's name and its parenthesis: blanks, comments, an executable comment's opening
_BETWEEN: Final = r"(?:\s|/\*M?!\d*|/\*.*?\*/|(?:#|--\s)[^\n]*(?:\n|$))*"
_DUPLICATE: Final = re.compile(r"\bDUPLICATE\b", re.IGNORECASE)
_SYSTEM: Final = frozenset({"mysql", "information_schema", "performance_schema", "sys"})  # never read by a heal
_EVENTS: Final = {
    "REPLACE": frozenset({"INSERT", "DELETE"}),
    "LOAD": frozenset({"INSERT", "DELETE"}),  # LOAD DATA ... REPLACE
    "UPDATE": frozenset({"UPDATE"}),
    "DELETE": frozenset({"DELETE"}),
}


def statement_writes(stmt: DmlStatement, sql: str) -> list[Write]:
    """A DML statement's own targets and the row events it fires on them: its one table, or a multi-table
    UPDATE's / DELETE's references (read from its text)."""
    if stmt.table is None:
        return list(read_uses(sql).writes)
    events = _EVENTS.get(stmt.head or stmt.verb)
    if events is None:  # INSERT; ... ON DUPLICATE KEY UPDATE updates the row there
        events = frozenset({"INSERT", "UPDATE"}) if _DUPLICATE.search(sql) else frozenset({"INSERT"})
    return [Write(stmt.table, events)]


class StatementReach:
    """What statements logged as statements may change, from the schema history ``history`` (None: a destination
    without one -- nothing can be told); ``skipped``: a table (``(db, table)``) no heal reads (a snapshot's
    watermark table)."""

    def __init__(self, history: SchemaHistory | None, skipped: tuple[str, str] | None = None) -> None:
        self.history = history
        self.skipped = skipped
        self._names: tuple[int, re.Pattern[str] | None] = (-1, None)

    def of(
        self,
        statements: Sequence[Statement],
        sql: str,
        session: str,
        temporary: Temporary | None,
        *,
        flagged: bool = False,
    ) -> Reach:
        """The tables ``statements`` (a query event's, run in database ``session``; ``flagged``: with the
        thread-specific flag) may change."""
        history = self.history
        if history is None:
            return NO_HISTORY
        writes: list[Write] = []
        for stmt in statements:
            if isinstance(stmt, DmlStatement):
                writes.extend(statement_writes(stmt, sql))
        calls, reads = self._uses(history, statements, sql)
        return history.reach(writes, calls, session, temporary, flagged=flagged, reads=reads)

    def holds(self, db: str, table: str, position: EntryPosition) -> bool:
        """Whether the schema history holds a table ``db.table`` for the statement at ``position``; False where that
        is not known (no history, a layout it lost, or a state that holds DDL after ``position``: a first start's
        bootstrap taken later)."""
        history = self.history
        if history is None or not history.holds_nothing_after(position):
            return False
        try:
            return history.table(db, table) is not None
        except SchemaError:  # unknown since a DDL: not known to be there
            return False

    def every_captured(self, captured: Callable[[str, str], bool]) -> tuple[str, ...] | None:
        """Every table (``db.table``) the history holds that ``captured`` takes: what a statement whose reach cannot
        be told heals; None without a history (the tables are not known here)."""
        if self.history is None:
            return None
        skipped = self.skipped

        def taken(db: str, table: str) -> bool:
            return captured(db, table) and db.lower() not in _SYSTEM and (db, table) != skipped

        return self.history.captured_tables(taken)

    def _uses(
        self, history: SchemaHistory, statements: Sequence[Statement], sql: str
    ) -> tuple[Sequence[TableName], Sequence[TableName]]:
        """The names the statements call as functions, and the other names they mention (views they read)."""
        calling = any(
            isinstance(s, DmlStatement) or (isinstance(s, OtherStatement) and s.verb in ("SELECT", "DO"))
            for s in statements
        )
        if not calling:
            return (), ()
        names = self._function_names(history)
        if names is None or names.search(sql):
            uses = read_uses(sql)
            return uses.calls, uses.names
        return (), ()

    def _function_names(self, history: SchemaHistory) -> re.Pattern[str] | None:
        """A pattern of the stored functions' names a statement may call, and of the views it may read (their
        queries may call one): None -- any name may be one, the text is read; ``(?!)`` (matching nothing) where no
        function is known."""
        version = history.version
        if self._names[0] != version:
            known = history.function_names()
            if known is None:
                pattern = None
            elif not known:
                pattern = re.compile(r"(?!)")
            else:
                functions = "|".join(re.escape(name) for name in sorted(known, key=len, reverse=True))
                views = "|".join(re.escape(name) for name in sorted(history.view_names(), key=len, reverse=True))
                read = rf"|(?<![\w$])`?(?:{views})`?(?![\w$])" if views else ""
                pattern = re.compile(rf"(?<![\w$])`?(?:{functions})`?{_BETWEEN}\({read}", re.IGNORECASE | re.DOTALL)
            self._names = (version, pattern)
        return self._names[1]


NO_HISTORY: Final = Reach((), "the destination keeps no schema history, which knows views, triggers, routines and "
                              "foreign keys")  # fmt: skip
"""The reach of any statement without a schema history: not known."""
