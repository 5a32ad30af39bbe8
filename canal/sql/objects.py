"""Views, triggers and stored routines: their definitions read for what they may change.

A statement can change tables it does not name: an UPDATE of a view changes its base table, an INSERT fires the
table's triggers, a call of a stored function runs its body. Under row-based logging the server logs every row those
change; under statement-based logging (a session's ``binlog_format`` STATEMENT or MIXED) it logs the statement
alone, and what it reached must be told from the objects' definitions. :func:`read_object` reads a ``CREATE`` /
``ALTER`` / ``DROP`` of a ``VIEW``, ``TRIGGER``, ``FUNCTION`` or ``PROCEDURE`` into an :class:`ObjectStatement`
(the schema history keeps them: :mod:`canal.schema.objects`); :func:`read_uses` reads any SQL text -- a routine's
body, a view's query, a logged statement -- for the tables it writes, the names it mentions, the routines it calls and
whether it runs SQL built at run time.

The reading is by tokens, not a full parse, and errs on the side of more: every name a text mentions is in
:attr:`Uses.names` (a column whose name is a table's too is a false friend that only widens what is healed), every
``name(`` is in :attr:`Uses.calls` (built-in functions among them: the schema history knows which names are stored
routines), and a DML statement's write targets are every name between its verb and where its values or conditions
begin (a multi-table UPDATE's joined tables, aliases included). What it cannot read is said: a body that is not SQL (a
UDF's ``SONAME``) has no :class:`Uses`, and ``PREPARE`` / ``EXECUTE`` set :attr:`Uses.dynamic`.

    >>> uses = read_uses("BEGIN INSERT INTO audit (id) VALUES (NEW.id); UPDATE shop.totals SET n = f(n); END")
    >>> [(w.table.schema, w.table.name, sorted(w.events)) for w in uses.writes]
    [(None, 'audit', ['INSERT']), ('shop', 'totals', ['UPDATE'])]
    >>> [c.name for c in uses.calls]  # a stored function, or a built-in one: the schema history knows which
    ['VALUES', 'f']
    >>> read_object("CREATE TRIGGER t_ai AFTER INSERT ON t FOR EACH ROW DELETE FROM q").events
    ('INSERT',)
"""

from __future__ import annotations

from typing import Final

import attrs

from canal.errors import SqlError
from canal.sql.cursor import Cursor
from canal.sql.lexer import DSTRING, END, PUNCT, QUOTED, WORD
from canal.sql.statements import TableName

__all__ = ["OBJECT_KINDS", "ObjectStatement", "Uses", "Write", "read_object", "read_uses"]

OBJECT_KINDS: Final = frozenset({"VIEW", "TRIGGER", "FUNCTION", "PROCEDURE"})
"""The objects whose definitions say what a statement reaches (:func:`read_object` reads them)."""

_EVENTS: Final = ("INSERT", "UPDATE", "DELETE")
# the words a write target's list ends at, per verb (at the top level of the statement)
_UPDATE_END: Final = frozenset({"SET", ";"})
_DELETE_END: Final = frozenset({"WHERE", "ORDER", "LIMIT", "RETURNING", ";"})
# a verb after these words is part of another clause, not a statement (ON UPDATE CASCADE, FOR UPDATE, ON DUPLICATE
# KEY UPDATE, ON DELETE SET NULL)
_NOT_A_STATEMENT_AFTER: Final = frozenset({"ON", "FOR", "KEY", "."})


@attrs.frozen(slots=True)
class Write:
    """A table a text writes (as written: ``schema`` None when unqualified) and how: the row events it may fire on
    it (``INSERT``, ``UPDATE``, ``DELETE``; ``TRUNCATE`` fires none)."""

    table: TableName
    events: frozenset[str]


@attrs.frozen(slots=True)
class Uses:
    """What a text may change and run: ``writes`` (the DML statements' targets), ``calls`` (every ``name(`` and
    ``schema.name(``: stored functions among built-ins), ``procedures`` (``CALL`` targets), ``names`` (every other
    name it mentions: a view's tables), ``dynamic`` (it runs SQL built at run time: ``PREPARE``, ``EXECUTE``)."""

    writes: tuple[Write, ...] = ()
    calls: tuple[TableName, ...] = ()
    procedures: tuple[TableName, ...] = ()
    names: tuple[TableName, ...] = ()
    dynamic: bool = False


@attrs.frozen(slots=True)
class ObjectStatement:
    """A CREATE / ALTER / DROP of a view, trigger, function or procedure.

    ``verb`` is ``CREATE``, ``ALTER`` or ``DROP``; ``kind`` the object (:data:`OBJECT_KINDS`); ``names`` the objects
    (a DROP VIEW lists several; a name is as written); ``or_replace`` / ``if_exists`` / ``if_not_exists`` as
    written (``ALTER VIEW`` replaces). A trigger's ``table`` (in the trigger's database), ``timing`` and ``events``.
    ``uses``: what a view's query or a routine's or trigger's body may change and run; None for a definition that
    is not SQL (a UDF's ``SONAME``) or that could not be read (``error`` says why) -- the object is then known to
    exist, not what it does. An ``ALTER FUNCTION`` / ``PROCEDURE`` changes characteristics only (``uses`` None,
    ``changes_body`` False). ``udf``: a CREATE FUNCTION of a user-defined function (``SONAME``: a shared library's
    code, global to the server)."""

    verb: str
    kind: str
    names: tuple[TableName, ...]
    or_replace: bool = False
    if_exists: bool = False
    if_not_exists: bool = False
    table: TableName | None = None
    timing: str = ""
    events: tuple[str, ...] = ()
    uses: Uses | None = None
    error: str | None = None
    udf: bool = False

    @property
    def changes_body(self) -> bool:
        """Whether it defines the object (CREATE, ALTER VIEW), rather than dropping it or changing its
        characteristics."""
        return self.verb == "CREATE" or (self.verb == "ALTER" and self.kind == "VIEW")


def read_object(sql: str) -> ObjectStatement | None:
    """The CREATE / ALTER / DROP of a view, trigger, function or procedure ``sql`` holds; None for any other
    statement, and for one whose object's name cannot be read."""
    c = Cursor(sql)
    verb = c.next().up
    if verb not in ("CREATE", "ALTER", "DROP"):
        return None
    mods = c.create_modifiers()
    kind = c.next().up
    if kind not in OBJECT_KINDS:
        return None
    if_exists = c.accept_seq("IF", "EXISTS")
    if_not_exists = not if_exists and c.accept_seq("IF", "NOT", "EXISTS")
    first = c.opt_table_name()
    if first is None:
        return None
    base = ObjectStatement(verb, kind, (first,), "OR REPLACE" in mods, if_exists, if_not_exists)
    if verb == "DROP":
        names = [first]
        while kind == "VIEW" and c.accept(","):
            name = c.opt_table_name()
            if name is None:
                return None
            names.append(name)
        return attrs.evolve(base, names=tuple(names))
    if verb == "ALTER" and kind != "VIEW":
        return base  # characteristics (COMMENT, SQL SECURITY, ...): the body stays
    try:
        if kind == "VIEW":
            return _view(c, attrs.evolve(base, or_replace=base.or_replace or verb == "ALTER"))
        if kind == "TRIGGER":
            return _trigger(c, base)
        return _routine(c, base)
    except SqlError as exc:
        return attrs.evolve(base, error=str(exc))


def _view(c: Cursor, base: ObjectStatement) -> ObjectStatement:
    if c.up() == "(":
        c.skip_group()  # the view's column names
    c.expect("AS")
    return attrs.evolve(base, uses=_scan(c))


def _trigger(c: Cursor, base: ObjectStatement) -> ObjectStatement:
    timing = c.expect("BEFORE", "AFTER")
    events = [c.expect(*_EVENTS)]
    while c.accept("OR"):  # MariaDB 11.x: one trigger on several events
        events.append(c.expect(*_EVENTS))
    c.expect("ON")
    table = c.table_name()
    c.expect_seq("FOR", "EACH", "ROW")
    if c.accept("FOLLOWS", "PRECEDES"):
        c.table_name("a trigger name")
    return attrs.evolve(base, table=table, timing=timing, events=tuple(events), uses=_scan(c))


def _routine(c: Cursor, base: ObjectStatement) -> ObjectStatement:
    if c.up() != "(":
        # CREATE [AGGREGATE] FUNCTION name RETURNS {STRING | INTEGER | REAL | DECIMAL} SONAME 'lib': a UDF, whose
        # code is not SQL
        return attrs.evolve(base, error="a user-defined function (SONAME): its code is not SQL", udf=True)
    c.skip_group()  # the parameters
    return attrs.evolve(base, uses=_scan(c))


def read_uses(sql: str) -> Uses:
    """What ``sql`` may change and run (module docstring): a routine's or trigger's body, a view's query, or a
    logged statement (whose own target is in :attr:`Uses.writes` too). Any text reads: what is not SQL is names."""
    return _scan(Cursor(sql))


def _scan(c: Cursor) -> Uses:
    """Every token from the cursor on: the statements' write targets, calls and names."""
    found = _Found()
    previous = ""
    while True:
        tok = c.peek()
        if tok is END:
            break
        up = tok.up
        if tok.kind == WORD and previous not in _NOT_A_STATEMENT_AFTER and c.up(1) != "(":
            if up in ("INSERT", "REPLACE", "UPDATE", "DELETE", "TRUNCATE", "LOAD"):
                c.next()
                found.writes.extend(_targets(c, up, found))
                previous = ""
                continue
            if up == "CALL":
                c.next()
                name = c.opt_table_name()
                if name is not None:
                    found.procedures.append(name)
                previous = ""
                continue
            if up in ("PREPARE", "EXECUTE"):
                found.dynamic = True
        if tok.kind in (WORD, QUOTED, DSTRING) and tok.text and not (tok.kind == WORD and tok.text.isdigit()):
            found.name(_name(c), c.up() == "(")
            previous = up
            continue
        c.next()
        previous = up if tok.kind == PUNCT else ""
    return found.uses()


@attrs.define
class _Found:
    writes: list[Write] = attrs.field(factory=list)
    calls: list[TableName] = attrs.field(factory=list)
    procedures: list[TableName] = attrs.field(factory=list)
    names: list[TableName] = attrs.field(factory=list)
    dynamic: bool = False

    def name(self, name: TableName, called: bool) -> None:
        (self.calls if called else self.names).append(name)

    def uses(self) -> Uses:
        return Uses(
            tuple(dict.fromkeys(self.writes)),
            tuple(dict.fromkeys(self.calls)),
            tuple(dict.fromkeys(self.procedures)),
            tuple(dict.fromkeys(self.names)),
            self.dynamic,
        )


def _name(c: Cursor) -> TableName:
    """At a name: ``name`` or ``schema.name`` (a third part, ``t.c`` after a schema, is read as its own name)."""
    first = c.next().text
    if c.up() == "." and c.is_name(1):
        c.next()
        return TableName(first, c.next().text)
    return TableName(None, first)


def _targets(c: Cursor, verb: str, found: _Found) -> list[Write]:
    """After a DML verb: the tables the statement writes, with the row events it fires on them."""
    if verb == "INSERT" or verb == "REPLACE":
        while c.accept("LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE"):
            pass
        c.accept("INTO")
        name = c.opt_table_name()
        if name is None:
            return []
        if verb == "REPLACE":
            return [Write(name, frozenset({"INSERT", "DELETE"}))]
        duplicate = _ahead(c, "DUPLICATE")  # ON DUPLICATE KEY UPDATE: an UPDATE of the row that is there
        return [Write(name, frozenset({"INSERT", "UPDATE"} if duplicate else {"INSERT"}))]
    if verb == "TRUNCATE":
        c.accept("TABLE")
        name = c.opt_table_name()
        return [] if name is None else [Write(name, frozenset({"TRUNCATE"}))]
    if verb == "LOAD":
        if not c.accept("DATA", "XML"):
            return []
        while not c.at_end() and not c.accept_seq("INTO", "TABLE"):
            c.skip_tolerant()
        name = c.opt_table_name()
        return [] if name is None else [Write(name, frozenset({"INSERT", "DELETE"}))]  # ... REPLACE INTO TABLE
    events = frozenset({verb})
    return [Write(name, events) for name in _table_references(c, _UPDATE_END if verb == "UPDATE" else _DELETE_END,
                                                              found)]  # fmt: skip


def _table_references(c: Cursor, end: frozenset[str], found: _Found) -> list[TableName]:
    """UPDATE's ``table_references`` up to SET, DELETE's ``[t1, ...] FROM table_references`` up to WHERE: the names
    in a table's place (first, after a comma, a JOIN, FROM or USING), without the aliases the references give them
    (``DELETE a FROM t AS a`` deletes from ``t``). A derived table's query is read for its calls."""
    tables: list[TableName] = []
    aliases: set[str] = set()
    table_next = True
    after_table = False
    while True:
        tok = c.peek()
        up = tok.up
        if tok is END or up in end:
            break
        if up == "(":
            try:
                first, stop = c.skip_group()
            except SqlError:  # never closed: the rest of the text is read as it is
                c.next()
                continue
            inner = _scan(Cursor(c.text(first, stop)))
            found.calls.extend(inner.calls)
            found.writes.extend(inner.writes)
            table_next, after_table = False, True  # a derived table; an alias may follow
            continue
        if up in (",", "JOIN", "STRAIGHT_JOIN", "FROM", "USING"):
            c.next()
            table_next, after_table = True, False
            continue
        if up in ("ON", "WHERE"):  # a join's condition: names of columns, up to the next reference
            c.next()
            table_next = after_table = False
            continue
        if tok.kind in (WORD, QUOTED, DSTRING) and tok.text and up not in _REFERENCE_WORDS:
            name = _name(c)
            if c.up() == "(":
                found.calls.append(name)
            elif table_next:
                tables.append(name)
                table_next, after_table = False, True
            elif after_table and name.schema is None:
                aliases.add(name.name.lower())  # t AS a, t a
                after_table = False
            continue
        if up == "AS":
            c.next()
            continue
        c.next()
    return [t for t in tables if t.schema is not None or t.name.lower() not in aliases]


_REFERENCE_WORDS: Final = frozenset(
    {"LOW_PRIORITY", "QUICK", "IGNORE", "INNER", "LEFT", "RIGHT", "OUTER", "CROSS", "NATURAL", "LATERAL", "AS",
     "PARTITION", "USE", "FORCE", "INDEX", "KEY", "FOR", "ON", "AND", "OR", "NOT"}
)  # fmt: skip


def _ahead(c: Cursor, word: str) -> bool:
    """Whether ``word`` comes before the statement's end (``;``), without moving."""
    start = c.pos
    try:
        while not c.at_end():
            if c.next().up == word:
                return True
        return False
    finally:
        c.pos = start
