"""The capture's side of the statement contract (:mod:`canal.sql.contract`): which query events stop it.

:func:`capture_verdict` reads a query event's statement(s) and, with the destination's table filter, tells:

* ``unmodeled``: an :class:`UnmodeledStatement` when the statement is of a shape that stops and touches a captured
  table -- or cannot say which tables it touches (a statement the reader does not know, a multi-table DML): a
  statement on tables the filter leaves out never stops. A RENAME (``RENAME TABLE``, ``ALTER TABLE ... RENAME TO``)
  that leaves a captured name holding a table the filter left out -- the cut-over of an online schema change whose
  own tables are filtered out -- stops too: that table's rows were never captured. So does a RENAME of a captured
  table to a captured name while a snapshot in the stream has not read all of it (``reading``): the read, which
  would find no table under the old name, must go on under the new one
  (:data:`~canal.parse.heal_marks.RENAMED_WHILE_READ`, which heals).
* ``leaves``: the captured tables a RENAME moved to names the filter leaves out. They leave the capture: the
  statement's entry says so in its :data:`LEAVES_CAPTURE` prop, and the mirror drops them.

The renames of one statement are followed pair by pair (``a TO tmp, b TO a, tmp TO b`` keeps both captured).

What happens to an unmodeled statement is one decision, :class:`StatementPolicy`, that the converter calls with
the statement, its tables and its position before anything of it is handed off: :func:`stop` raises
:class:`~canal.errors.UnmodeledStatementError`. Under ``heal="snapshot"`` (the default) the instance's policy is a
:class:`~canal.snapshot.heal.Healer`: for a statement that heals (``healable``: every shape of it that stops heals,
and it says which tables it touches) it reads ``heal_tables`` again in the stream from ``position`` and returns the
props that mark the statement's entry (:data:`canal.parse.heal_marks.HEAL`), so the statement is handed off and the
stream goes on; any other statement it stops as :func:`stop` does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Final, NoReturn, Protocol

import attrs

from canal.errors import UnmodeledStatementError
from canal.names import qualified as qualified_name
from canal.parse.heal_marks import RENAMED_WHILE_READ
from canal.parse.reach import NO_HISTORY, StatementReach, Temporary
from canal.parse.sessions import Scope, flagged_anyway
from canal.position import EntryPosition
from canal.sql import (
    DEFAULT_MODE,
    AlterTable,
    CreateTable,
    DropIndexStatement,
    RenameTable,
    RenameTo,
    SqlMode,
    Statement,
    TableName,
    TruncateTable,
    read_statements,
)
from canal.sql.contract import REACHING, Follow, Shape, Verdict, judge, shape
from canal.sql.lexer import without_strings

__all__ = [
    "LEAVES_CAPTURE",
    "CaptureVerdict",
    "StatementPolicy",
    "UnmodeledStatement",
    "capture_verdict",
    "leaving_tables",
    "stop",
]

LEAVES_CAPTURE: Final = "LEAVES_CAPTURE"
"""Header prop of a RENAME's entry that moved captured tables to names the destination's filter leaves out: a JSON
list of ``[schema, table]`` (their new names). Their rows are no longer captured; the mirror drops them."""

_ONTO_CAPTURED: Final = "RENAME TABLE onto a captured name"
_SHOWN: Final = 200  # characters of a statement an error shows

Captured = Callable[[str, str], bool]
"""``captured(schema, table)``: whether the destination's filter captures that table."""


@attrs.frozen(slots=True)
class UnmodeledStatement:
    """A statement the capture cannot follow, met on captured tables.

    ``sql`` is its text as logged (a policy may read it; a message shows :attr:`shown`, never ``sql``);
    ``schema`` the session's database; ``shape`` the contract's shape that stops it; ``tables`` every table it
    names (``db.table``, captured or not; empty when it does not say which); ``captured`` those the filter
    captures; ``position`` where its event starts; ``in_transaction`` whether it is a statement inside a
    transaction (DML logged as a statement) rather than a transaction of its own (DDL). ``healable``: reading
    ``heal_tables`` (every captured table it names, or can reach: :mod:`canal.schema.reach`) again after it makes
    copies of them exact (:attr:`canal.sql.contract.Verdict.heals`). ``unknown_reach``: why what a statement logged
    as a statement reaches cannot be told (then ``heal_tables`` is every captured table)."""

    sql: str
    schema: str
    shape: Shape
    tables: tuple[str, ...]
    captured: tuple[str, ...]
    position: EntryPosition
    in_transaction: bool
    healable: bool = False
    heal_tables: tuple[str, ...] = ()
    unknown_reach: str | None = None

    @property
    def shown(self) -> str:
        """The statement as a message may show it: shortened, its string literals left out."""
        return without_strings(self.sql, _SHOWN)

    @property
    def where(self) -> str:
        """Its position as ``file:offset``."""
        return f"{self.position.journal_name}:{self.position.position}"

    def error(self, why_not_healed: str | None = None) -> UnmodeledStatementError:
        """The typed stop naming it (``why_not_healed``: why the destination, set to heal, could not)."""
        where = self.where
        tables = ", ".join(self.tables) if self.tables else "tables it does not name"
        reaches = [t for t in self.captured if t not in self.tables]
        if self.unknown_reach is not None:
            tables += f" (what it reaches cannot be told: {self.unknown_reach})"
        elif reaches:
            tables += f" (reaching {', '.join(reaches)})"
        healing = (
            f" It could not be healed by reading the tables again: {why_not_healed}."
            if why_not_healed
            else " A re-read of the tables would heal it: the destination is set to stop (heal=stop)."
            if self.healable
            else ""
        )
        return UnmodeledStatementError(
            f"{self.shape.name} on {tables} at {where}: {self.shape.description}. The statement {self.shown!r} "
            "changes what pycanal cannot follow, so the destination stops before it (nothing of it was handed "
            f"off; a restart stops here again).{healing} Mirror the tables anew from a snapshot taken after it (a "
            "new destination, or this one started after this position), or leave them out of the filter if they "
            "need not be captured. docs/concepts/fail-closed.md lists what pycanal follows.",
            statement=self.shown,
            shape=self.shape.name,
            tables=self.tables,
            position=where,
        )


class StatementPolicy(Protocol):
    """What the converter does with an unmodeled statement, before anything of it is handed off: raise (the
    statement stops the destination), or return the props its entry gets (the policy took care of it, e.g. by
    arranging a snapshot of its tables; the entry is handed off). Called again each time the statement is read
    (a restart reads again what was not acked), so a policy must be idempotent."""

    def __call__(self, statement: UnmodeledStatement) -> Mapping[str, str]: ...


def stop(statement: UnmodeledStatement) -> NoReturn:
    """The policy of ``heal="stop"`` (and of a converter nothing set another on): the typed stop
    (:class:`~canal.errors.UnmodeledStatementError`)."""
    raise statement.error()


@attrs.frozen(slots=True)
class CaptureVerdict:
    """What the capture makes of one query event: the statement that stops it (None: it goes on), the captured
    tables its RENAMEs moved out of the capture (``(schema, table)``, their new names), the props a
    :class:`StatementPolicy` that let an unmodeled statement through marks its entry with, and
    ``captures_nothing``: it changed no captured table, whatever the tables it names -- a session's temporary tables
    alone (:mod:`canal.parse.sessions`), or DML logged as a statement that reaches none (its entry is left out, as a
    statement on tables the filter leaves out is)."""

    unmodeled: UnmodeledStatement | None = None
    leaves: tuple[tuple[str, str], ...] = ()
    marks: tuple[tuple[str, str], ...] = ()
    captures_nothing: bool = False

    def props(self) -> dict[str, str]:
        """The entry's props: the tables that leave the capture, and a policy's marks."""
        props = dict(self.marks)
        if self.leaves:
            props[LEAVES_CAPTURE] = json.dumps([list(t) for t in self.leaves], ensure_ascii=False)
        return props


_GOES_ON: Final = CaptureVerdict()


def capture_verdict(
    sql: str,
    session: str,
    captured: Captured,
    position: EntryPosition,
    *,
    in_transaction: bool,
    lower_case: bool = False,
    reading: Callable[[], Collection[str]] | None = None,
    statements: Sequence[Statement] | None = None,
    scope: Scope | None = None,
    temporary: Temporary | None = None,
    reach: StatementReach | None = None,
    mode: SqlMode = DEFAULT_MODE,
) -> CaptureVerdict:
    """The verdict on a query event (not transaction control) of database ``session`` at ``position``;
    ``lower_case``: the server folds table names (``lower_case_table_names=1``); ``reading()``: the tables
    (``db.table``) a snapshot in the stream has not read all of yet, asked only of a statement that renames;
    ``statements``: ``sql`` read (leniently, under its sql_mode ``mode``), if it was; ``scope``: where the statement
    stands among its session's temporary tables, and ``temporary(db, table)`` whether its session holds one of that
    name (:mod:`canal.parse.sessions`); ``reach``: what a statement logged as a statement may change beyond the tables
    it names (:mod:`canal.parse.reach`; None: that cannot be told)."""
    if statements is None:
        statements = read_statements(sql, strict=False, mode=mode)
    verdict = judge(statements)

    def qualified(name: TableName) -> tuple[str, str]:
        db, table = name.schema if name.schema is not None else session, name.name
        return (db.lower(), table.lower()) if lower_case else (db, table)

    named = [qualified(t) for t in verdict.tables]
    reaching = any(s.name in REACHING for s in verdict.shapes)
    if scope is not None and not reaching:

        def exists(name: TableName) -> bool:
            return reach is not None and reach.holds(*qualified(name), position)

        session_verdict = _session_tables(verdict, statements, scope, named, captured, exists)
        if session_verdict is not None:
            return _statement_verdict(session_verdict, sql, session, named, position, in_transaction)
    if reaching:
        flagged = scope is not None and scope.flagged
        return _reaching(
            verdict, statements, sql, session, captured, named, position, in_transaction, temporary, reach, flagged
        )
    touched = [t for t in named if captured(*t)]
    entering, leaves, moved = _renames(statements, qualified, captured, reading)
    stopping: Shape | None = None
    healable = False
    if verdict.follow is Follow.STOP and (touched or not verdict.tables_known):
        stopping = verdict.stops[0]
        healable = verdict.heals and (not entering or shape(_ONTO_CAPTURED).heals)
    elif entering or moved:
        stopping = shape(_ONTO_CAPTURED) if entering else RENAMED_WHILE_READ
        healable = stopping.heals and verdict.tables_known
    if stopping is None:
        return CaptureVerdict(leaves=tuple(leaves)) if leaves else _GOES_ON
    statement = UnmodeledStatement(
        sql,
        session,
        stopping,
        tuple(qualified_name(db, t) for db, t in named),
        tuple(qualified_name(db, t) for db, t in (touched if stopping.name != _ONTO_CAPTURED else entering)),
        position,
        in_transaction,
        healable and bool(touched),
        tuple(dict.fromkeys(qualified_name(db, t) for db, t in touched)),
    )
    return CaptureVerdict(statement, tuple(leaves))


_CAPTURES_NOTHING: Final = CaptureVerdict(captures_nothing=True)


def _session_tables(
    verdict: Verdict,
    statements: Sequence[Statement],
    scope: Scope,
    named: list[tuple[str, str]],
    captured: Captured,
    exists: Callable[[TableName], bool],
) -> CaptureVerdict | tuple[Shape, list[tuple[str, str]], bool] | None:
    """A statement (not DML) among its session's temporary tables: on them alone it changes nothing of the schema;
    beside tables of the schema it stops; with the thread-specific flag and no temporary table known under the
    names it touches, whether it changed the tables of those names cannot be told -- unless the flag is one the
    server sets whatever the session holds (a drop's: ``exists(name)``, the schema holds that table before the
    statement). None: none of that."""
    temporary = scope.temporary
    if temporary and scope.session_only:
        return _CAPTURES_NOTHING
    real = [t for t in named if t not in temporary and captured(*t)]
    if temporary:
        if real and verdict.follow is not Follow.NO_CHANGE:
            return shape("a statement on a session's temporary tables and others"), real, False
        return None
    if not (scope.flagged and real) or any(flagged_anyway(stmt, exists) for stmt in statements):
        return None
    for stmt in statements:
        if isinstance(stmt, TruncateTable):
            return shape("TRUNCATE of a name a session may hold as temporary"), real, True
        if (
            isinstance(stmt, AlterTable | RenameTable)
            or (isinstance(stmt, DropIndexStatement) and stmt.name.upper() == "PRIMARY")
            or (isinstance(stmt, CreateTable) and not stmt.temporary and stmt.like is not None)
        ):
            return shape("a layout change of a name a session may hold as temporary"), real, False
    return None


def _statement_verdict(
    found: CaptureVerdict | tuple[Shape, list[tuple[str, str]], bool],
    sql: str,
    session: str,
    named: list[tuple[str, str]],
    position: EntryPosition,
    in_transaction: bool,
) -> CaptureVerdict:
    if isinstance(found, CaptureVerdict):
        return found
    stopping, touched, healable = found
    touched_names = tuple(dict.fromkeys(qualified_name(db, t) for db, t in touched))
    statement = UnmodeledStatement(
        sql,
        session,
        stopping,
        tuple(qualified_name(db, t) for db, t in named),
        touched_names,
        position,
        in_transaction,
        healable,
        touched_names if healable else (),
    )
    return CaptureVerdict(statement)


def _reaching(
    verdict: Verdict,
    statements: Sequence[Statement],
    sql: str,
    session: str,
    captured: Captured,
    named: list[tuple[str, str]],
    position: EntryPosition,
    in_transaction: bool,
    temporary: Temporary | None,
    reach: StatementReach | None,
    flagged: bool,
) -> CaptureVerdict:
    """A statement logged as a statement, whose rows are not in the binlog: it stops (or heals) where it can reach a
    captured table, or where what it reaches cannot be told (then every captured table heals)."""
    found = NO_HISTORY if reach is None else reach.of(statements, sql, session, temporary, flagged=flagged)
    touched = [qualified_name(db, t) for db, t in found.tables if captured(db, t)]
    heal_tables: tuple[str, ...] = tuple(dict.fromkeys(touched))
    every: tuple[str, ...] | None = ()
    if found.unknown is not None:
        every = None if reach is None else reach.every_captured(captured)
        heal_tables = tuple(dict.fromkeys([*touched, *(every or ())]))
        if every is not None and not heal_tables:
            return _CAPTURES_NOTHING  # nothing is captured
    elif not touched:
        return _CAPTURES_NOTHING
    stopping = verdict.stops[0]
    heals = all(s.heals for s in verdict.stops) and every is not None and bool(heal_tables)
    statement = UnmodeledStatement(
        sql,
        session,
        stopping,
        tuple(qualified_name(db, t) for db, t in named),
        tuple(touched),
        position,
        in_transaction,
        heals,
        heal_tables,
        found.unknown,
    )
    return CaptureVerdict(statement)


def _renames(
    statements: Sequence[Statement],
    qualified: Callable[[TableName], tuple[str, str]],
    captured: Captured,
    reading: Callable[[], Collection[str]] | None,
) -> tuple[list[tuple[str, str]], list[tuple[str, str]], list[tuple[str, str]]]:
    """The captured names a statement's renames leave holding a table the filter left out, the captured tables
    they move to names the filter leaves out (their new names), and the captured names they leave holding a table
    of ``reading`` under another name: the renames followed in order."""
    pairs: list[tuple[tuple[str, str], tuple[str, str]]] = []
    for stmt in statements:
        if isinstance(stmt, RenameTable):
            pairs += [(qualified(old), qualified(new)) for old, new in stmt.pairs]
        elif isinstance(stmt, AlterTable):
            old = qualified(stmt.table)
            for action in stmt.actions:
                if isinstance(action, RenameTo):  # an unqualified new name is in the session's database
                    pairs.append((old, qualified(action.table)))
    if not pairs:
        return [], [], []
    holds_captured: dict[tuple[str, str], bool] = {}  # name -> whether the table it holds now was captured
    first_name: dict[tuple[str, str], tuple[str, str]] = {}  # name -> the name its table had before the statement
    exists: dict[tuple[str, str], bool] = {}
    for old, new in pairs:
        was = holds_captured.get(old, captured(*old))
        exists[old] = False
        exists[new] = True
        holds_captured[new] = was
        first_name[new] = first_name.get(old, old)
    finals = [name for name, there in exists.items() if there]
    entering = [name for name in finals if captured(*name) and not holds_captured[name]]
    leaves = [name for name in finals if not captured(*name) and holds_captured[name]]
    unread = () if reading is None else reading()
    moved = [
        name
        for name in finals
        if captured(*name)
        and holds_captured[name]
        and first_name[name] != name
        and qualified_name(*first_name[name]) in unread
    ]
    return entering, leaves, moved


def leaving_tables(props: Mapping[str, str]) -> list[tuple[str, str]]:
    """The ``(schema, table)`` pairs of an entry's (or change row's) :data:`LEAVES_CAPTURE` prop; [] without it."""
    text = props.get(LEAVES_CAPTURE)
    if not text:
        return []
    return [(str(db), str(table)) for db, table in json.loads(text)]
