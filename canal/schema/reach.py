"""What a statement logged as a statement may change, beyond the tables it names.

Under statement-based logging (a session's ``binlog_format`` STATEMENT, or MIXED for what it deems safe) the binlog
holds a DML statement, not its rows, and the server ran more than the statement says: an UPDATE of a view writes its
base table, a DELETE of a parent row deletes or updates its children through ``ON DELETE CASCADE`` / ``SET NULL``
(InnoDB, unlogged under any format), an INSERT fires the table's triggers, a stored function called anywhere in the
statement runs its body -- a function a view it reads calls too -- and those in turn reach further. :func:`reach`
follows all of it from the schema catalog's views, triggers, routines and foreign keys (:mod:`canal.schema.objects`),
as of the statement's place in the binlog (the schema history's state there), and gives the tables it may change. A
temporary table a statement writes changes no table of the schema (``temporary``: the session's own tables, which
shadow a table of that name).

What cannot be told makes the answer :attr:`Reach.unknown` (then any table may have changed), never a narrower set:
a view, trigger or routine whose definition is not known, triggers the bootstrap could not see, a routine that is not
known where a statement calls it by its qualified name, a call of a procedure the history does not hold, SQL built
at run time (``PREPARE`` / ``EXECUTE``), or a written name the history knows as no table and no view -- unless the
statement carries the thread-specific flag (it used a temporary table): the name is then that temporary table.

    >>> from canal.schema import SchemaCatalog
    >>> from canal.sql import read_statement
    >>> from canal.sql.objects import read_object, read_uses
    >>> catalog = SchemaCatalog(database="d")
    >>> for sql in ("CREATE TABLE t (id INT PRIMARY KEY)", "CREATE TABLE audit (id INT)"):
    ...     _ = catalog.apply(read_statement(sql))
    >>> _ = catalog.apply_object(read_object("CREATE VIEW v AS SELECT id FROM t"))
    >>> trigger = "CREATE TRIGGER ai AFTER INSERT ON t FOR EACH ROW INSERT INTO audit VALUES (1)"
    >>> _ = catalog.apply_object(read_object(trigger))
    >>> reach(catalog, {}, read_uses("INSERT INTO v VALUES (1)").writes, (), "d").tables
    (('d', 't'), ('d', 'audit'))
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Final

import attrs

from canal.names import qualified
from canal.schema.foreign_keys import ActionIndex
from canal.sql import TableName
from canal.sql.objects import Uses, Write

if TYPE_CHECKING:
    from canal.schema.catalog import SchemaCatalog

__all__ = ["Reach", "reach"]

_SYSTEM_DATABASES: Final = frozenset({"mysql", "information_schema", "performance_schema", "sys"})
_DELETE_ACTIONS: Final = {"CASCADE": "DELETE", "SET NULL": "UPDATE", "SET DEFAULT": "UPDATE"}


@attrs.frozen(slots=True)
class Reach:
    """The tables (``(db, table)``, in the order they were reached) a statement may change; ``unknown`` says why what
    it may change cannot be told (then any table may have changed, and ``tables`` is what was found before that)."""

    tables: tuple[tuple[str, str], ...]
    unknown: str | None = None


class _Unknown(Exception):
    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def reach(
    catalog: SchemaCatalog,
    actions: ActionIndex,
    writes: Sequence[Write],
    calls: Sequence[TableName],
    session: str,
    *,
    unknown_tables: Collection[str] = (),
    temporary: Callable[[str, str], bool] | None = None,
    flagged: bool = False,
    reads: Sequence[TableName] = (),
) -> Reach:
    """The tables a statement run in database ``session`` may change (module docstring): ``writes`` are its own
    targets (as written), ``calls`` the names it calls as functions; ``actions`` the catalog's foreign keys by the
    table they reference (:func:`canal.schema.foreign_keys.action_index`); ``unknown_tables`` the tables whose layout
    the history lost (tables all the same); ``temporary(db, table)`` whether the session holds a temporary table of
    that name; ``flagged``: the statement used a temporary table (the thread-specific flag), so a written name that
    is no table and no view of the schema is that temporary table; ``reads`` the other names it mentions -- a view
    among them runs the functions its query calls (``SELECT f(id) AS x FROM t``: reading it writes what ``f``
    writes)."""
    walk = _Walk(catalog, actions, unknown_tables, temporary, flagged)
    try:
        for write in writes:
            walk.write(write.table, write.events, session)
        for call in calls:
            walk.call(call, "FUNCTION", session)
        for name in reads:
            walk.read(name, session)
        walk.run()
    except _Unknown as exc:
        return Reach(tuple(walk.found), exc.why)
    return Reach(tuple(walk.found))


class _Walk:
    """The reach of one statement: a queue of writes and calls, each followed once."""

    def __init__(
        self,
        catalog: SchemaCatalog,
        actions: ActionIndex,
        unknown_tables: Collection[str],
        temporary: Callable[[str, str], bool] | None,
        flagged: bool,
    ) -> None:
        self.flagged = flagged
        self.catalog = catalog
        self.objects = catalog.objects
        self.actions = actions
        self.unknown_tables = unknown_tables
        self.temporary = temporary
        self.found: dict[tuple[str, str], None] = {}
        self.todo: list[Callable[[], None]] = []
        self.seen: set[tuple[str, ...]] = set()

    def run(self) -> None:
        while self.todo:
            self.todo.pop(0)()

    # -- what is reached ------------------------------------------------------------------------------------------

    def write(self, name: TableName, events: frozenset[str], default_db: str) -> None:
        db = name.schema if name.schema is not None else default_db
        for event in events or {"TRUNCATE"}:
            key = ("write", db, name.name, event)
            if key not in self.seen:
                self.seen.add(key)
                self.todo.append(functools.partial(self._written, db, name.name, event))

    def call(self, name: TableName, kind: str, default_db: str) -> None:
        db = name.schema if name.schema is not None else default_db
        key = ("call", kind, db, name.name.lower())
        if key not in self.seen:
            self.seen.add(key)
            self.todo.append(functools.partial(self._called, name, kind, db))

    def read(self, name: TableName, default_db: str) -> None:
        """A name a text mentions: where it is a view, reading it runs the functions its query calls."""
        db = name.schema if name.schema is not None else default_db
        key = ("read", db, name.name)
        if key not in self.seen and self.objects.view(db, name.name) is not None:
            self.seen.add(key)
            self.todo.append(functools.partial(self._read_view, db, name.name))

    def uses(self, uses: Uses | None, what: str, default_db: str) -> None:
        if uses is None:
            raise _Unknown(f"{what}, whose definition is not known")
        if uses.dynamic:
            raise _Unknown(f"{what}, which runs SQL built at run time (PREPARE / EXECUTE)")
        for write in uses.writes:
            self.write(write.table, write.events, default_db)
        for call in uses.calls:
            self.call(call, "FUNCTION", default_db)
        for procedure in uses.procedures:
            self.call(procedure, "PROCEDURE", default_db)
        for name in uses.names:
            self.read(name, default_db)

    # -- following one --------------------------------------------------------------------------------------------

    def _written(self, db: str, table: str, event: str) -> None:
        if self.temporary is not None and self.temporary(db, table):
            return  # the session's own table: nothing of the schema (it has no triggers, views or keys)
        full = qualified(db, table)
        view = self.objects.view(db, table)
        if view is not None:
            self._through_view(view.db, full, view.uses, event)
            return
        if full not in self.catalog.tables and full not in self.unknown_tables:
            if self.flagged:
                return  # the temporary table the statement used: no table of the schema has the name
            raise _Unknown(f"it writes {full}, which the schema history knows as no table and no view")
        self.found[(db, table)] = None
        if event == "TRUNCATE":
            return  # fires no trigger, and InnoDB refuses to truncate a table other tables reference
        triggers = self.objects.triggers_of(db, table)
        if triggers is None:
            raise _Unknown(f"the triggers of {full} are not known (the capture user could not see them)")
        for trigger in triggers:
            if event in trigger.events:
                self.uses(trigger.uses, f"the trigger {db}.{trigger.name}", db)
        for child_db, child, key in self.actions.get((db, table), ()):
            if event == "DELETE" and key.on_delete in _DELETE_ACTIONS:
                self.write(TableName(child_db, child), frozenset({_DELETE_ACTIONS[key.on_delete]}), child_db)
            elif event == "UPDATE" and key.on_update in _DELETE_ACTIONS:
                self.write(TableName(child_db, child), frozenset({"UPDATE"}), child_db)

    def _through_view(self, db: str, full: str, uses: Uses | None, event: str) -> None:
        """A write through a view writes the tables (and views) of its query; the functions its query calls run."""
        if uses is None:
            raise _Unknown(f"the view {full}, whose definition is not known (the capture user lacks SHOW VIEW)")
        for name in uses.names:
            named_db = name.schema if name.schema is not None else db
            key = qualified(named_db, name.name)
            if key in self.catalog.tables or key in self.unknown_tables or self.objects.view(named_db, name.name):
                self.write(TableName(named_db, name.name), frozenset({event}), db)
        for call in uses.calls:
            self.call(call, "FUNCTION", db)

    def _read_view(self, db: str, name: str) -> None:
        """A view read (not written): the functions its query calls run, and the views it reads are read."""
        view = self.objects.view(db, name)
        assert view is not None
        if view.uses is None:
            if self.objects.has_functions():
                raise _Unknown(
                    f"it reads the view {qualified(db, name)}, whose definition is not known (the capture user lacks "
                    "SHOW VIEW): it may call a stored function"
                )
            return
        for call in view.uses.calls:
            self.call(call, "FUNCTION", view.db)
        for read in view.uses.names:
            self.read(read, view.db)

    def _called(self, name: TableName, kind: str, db: str) -> None:
        if db.lower() in _SYSTEM_DATABASES:
            return  # the server's own routines (sys.*) write no table a destination captures
        routine = self.objects.routine(kind, db, name.name)
        if routine is not None:
            self.uses(routine.uses, f"the {kind.lower()} {db}.{name.name}", routine.db)
            return
        if kind == "PROCEDURE" or name.schema is not None:
            raise _Unknown(f"it calls {db}.{name.name}, a {kind.lower()} the schema history does not know")
        if not self.objects.routines_seen(db):
            raise _Unknown(f"it calls {name.name}, and the routines of {db} are not known")
        # an unqualified name that is no stored function of the database: a built-in function (or a UDF)
