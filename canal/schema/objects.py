"""The views, triggers and stored routines of a schema catalog: what a statement can reach beyond the tables it names.

The schema history keeps them beside the table layouts (:attr:`canal.schema.SchemaCatalog.objects`): its bootstrap
reads them from ``information_schema`` and every later ``CREATE`` / ``ALTER`` / ``DROP`` of a view, trigger, function
or procedure is applied here (:meth:`ObjectCatalog.apply`, read by :func:`canal.sql.objects.read_object`), as are
the table statements that move or drop them with their tables (a trigger follows its table's rename and goes with its
DROP; a ``RENAME TABLE`` of a view renames the view; ``DROP DATABASE`` drops all of a database's). What each one may
change is :class:`canal.sql.objects.Uses`; :mod:`canal.schema.reach` follows them for a statement.

What cannot be known is kept as such, never left out: a view whose definition the capture user cannot read (it lacks
``SHOW VIEW``), a routine whose body is not SQL (a UDF) or cannot be read, a database whose triggers the bootstrap
could not see (``information_schema.TRIGGERS`` lists a trigger only to a user with the ``TRIGGER`` privilege on its
table: :attr:`ObjectCatalog.unseen_triggers`), routines it could not list (:attr:`ObjectCatalog.unseen_routines`),
and an object a statement replaced or dropped between a dump's start and the bootstrap's read (its definition
before is gone: :meth:`ObjectCatalog.forget`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

import attrs

from canal.names import qualified, split_qualified
from canal.sql import TableName
from canal.sql.objects import ObjectStatement, Uses, Write

__all__ = ["EVERY_DATABASE", "ObjectCatalog", "Routine", "Trigger", "View"]

EVERY_DATABASE: Final = "*"
"""In :attr:`ObjectCatalog.unseen_triggers` / :attr:`~ObjectCatalog.unseen_routines`: every database."""


@attrs.frozen(slots=True)
class View:
    """A view: ``uses`` is what its query names and calls (None: its definition is not known)."""

    db: str
    name: str
    uses: Uses | None


@attrs.frozen(slots=True)
class Trigger:
    """A trigger of table ``db.table`` (None: a trigger whose table is not known) on ``events``; ``uses`` is what its
    body may change and run (None: not known)."""

    db: str
    name: str
    table: str | None
    events: tuple[str, ...]
    uses: Uses | None


@attrs.frozen(slots=True)
class Routine:
    """A stored function or procedure (``kind``); ``uses`` is what its body may change and run (None: not SQL, or
    not known)."""

    db: str
    name: str
    kind: str
    uses: Uses | None


def _routine_key(kind: str, db: str, name: str) -> str:
    return f"{kind} {qualified(db, name.lower())}"  # routine names are not case-sensitive


class ObjectCatalog:
    """Views, triggers and routines by name (``db.name``); not thread-safe by itself (its catalog's holder locks)."""

    __slots__ = ("routines", "triggers", "unseen_routines", "unseen_triggers", "views")

    def __init__(self) -> None:
        self.views: dict[str, View] = {}
        self.triggers: dict[str, Trigger] = {}
        self.routines: dict[str, Routine] = {}
        # databases (or EVERY_DATABASE) whose triggers / routines the bootstrap could not see: a table of them may
        # have triggers the history does not know
        self.unseen_triggers: set[str] = set()
        self.unseen_routines: set[str] = set()

    def copy(self) -> ObjectCatalog:
        other = ObjectCatalog()
        other.views = dict(self.views)
        other.triggers = dict(self.triggers)
        other.routines = dict(self.routines)
        other.unseen_triggers = set(self.unseen_triggers)
        other.unseen_routines = set(self.unseen_routines)
        return other

    def __bool__(self) -> bool:
        return bool(self.views or self.triggers or self.routines or self.unseen_triggers or self.unseen_routines)

    # -- reading ------------------------------------------------------------------------------------------------------

    def view(self, db: str, name: str) -> View | None:
        return self.views.get(qualified(db, name))

    def routine(self, kind: str, db: str, name: str) -> Routine | None:
        return self.routines.get(_routine_key(kind, db, name))

    def has_functions(self) -> bool:
        """Whether a statement may call a stored function: one is known, or some could not be seen."""
        return bool(self.unseen_routines) or any(r.kind == "FUNCTION" for r in self.routines.values())

    def function_names(self) -> set[str]:
        """The known stored functions' names, lower case (a statement's text is searched for them)."""
        return {r.name.lower() for r in self.routines.values() if r.kind == "FUNCTION"}

    def triggers_of(self, db: str, table: str) -> list[Trigger] | None:
        """The triggers of ``db.table``; None when the table may have triggers the history does not know (its
        database's were not seen, or it holds a trigger whose table is not known)."""
        if EVERY_DATABASE in self.unseen_triggers or db in self.unseen_triggers:
            return None
        found = []
        for trigger in self.triggers.values():
            if trigger.db != db:
                continue
            if trigger.table is None:
                return None
            if trigger.table == table:
                found.append(trigger)
        return found

    def routines_seen(self, db: str) -> bool:
        """Whether every routine of ``db`` is known to exist (its body may still not be)."""
        return EVERY_DATABASE not in self.unseen_routines and db not in self.unseen_routines

    # -- changes ------------------------------------------------------------------------------------------------------

    def add(self, found: View | Trigger | Routine) -> None:
        """An object as the bootstrap read it (replacing one of its name)."""
        if isinstance(found, View):
            self.views[qualified(found.db, found.name)] = found
        elif isinstance(found, Trigger):
            self.triggers[qualified(found.db, found.name)] = found
        else:
            self.routines[_routine_key(found.kind, found.db, found.name)] = found

    def apply(self, stmt: ObjectStatement, session: str) -> bool:
        """A CREATE / ALTER / DROP of a view, trigger, function or procedure, run in database ``session``; whether
        it changed anything. A definition that cannot be read is kept as one whose effects are not known."""
        db_of = [name.schema if name.schema is not None else session for name in stmt.names]
        kind = stmt.kind
        if stmt.verb == "DROP":
            changed = False
            for db, dropped in zip(db_of, stmt.names, strict=True):
                if kind == "VIEW":
                    changed |= self.views.pop(qualified(db, dropped.name), None) is not None
                elif kind == "TRIGGER":
                    changed |= self.triggers.pop(qualified(db, dropped.name), None) is not None
                else:
                    changed |= self.routines.pop(_routine_key(kind, db, dropped.name), None) is not None
            return changed
        if not stmt.changes_body or stmt.udf:
            # ALTER FUNCTION / PROCEDURE: characteristics; a UDF is a library's code, global to the server, taken to
            # change no table (a call of one reads as a built-in function's)
            return False
        db, name = db_of[0], stmt.names[0].name
        if stmt.if_not_exists and self._exists(kind, db, name):
            return False
        if kind == "VIEW":
            self.views[qualified(db, name)] = View(db, name, stmt.uses)
            return True
        # what a body only reads changes nothing: its names are not kept
        uses = None if stmt.uses is None else attrs.evolve(stmt.uses, names=())
        if kind == "TRIGGER":
            table = None if stmt.table is None else stmt.table.name  # a trigger's table is in its database
            self.triggers[qualified(db, name)] = Trigger(db, name, table, stmt.events, uses)
        else:
            self.routines[_routine_key(kind, db, name)] = Routine(db, name, kind, uses)
        return True

    def _exists(self, kind: str, db: str, name: str) -> bool:
        if kind == "VIEW":
            return qualified(db, name) in self.views
        if kind == "TRIGGER":
            return qualified(db, name) in self.triggers
        return _routine_key(kind, db, name) in self.routines

    def forget(self, stmt: ObjectStatement, session: str) -> None:
        """The bootstrap's read came after ``stmt`` replaced or dropped an object the dump's start still had: its
        definition before is not known (a trigger whose table is not known holds its whole database unknown, until
        a DROP of it)."""
        for name in stmt.names:
            db = name.schema if name.schema is not None else session
            if stmt.kind == "VIEW":
                self.views[qualified(db, name.name)] = View(db, name.name, None)
            elif stmt.kind == "TRIGGER":
                self.triggers[qualified(db, name.name)] = Trigger(db, name.name, None, (), None)
            else:
                key = _routine_key(stmt.kind, db, name.name)
                self.routines[key] = Routine(db, name.name, stmt.kind, None)

    def rename_view(self, old: str, new: str) -> bool:
        """``RENAME TABLE`` of a view (``db.name`` to ``db.name``); False when ``old`` is no view."""
        view = self.views.pop(old, None)
        if view is None:
            return False
        db, name = split_qualified(new)
        self.views[new] = attrs.evolve(view, db=db, name=name)
        return True

    def table_renamed(self, old: str, new: str) -> None:
        """Table ``old`` is now ``new``: its triggers follow it (the server refuses a rename to another database of
        a table with triggers)."""
        old_db, old_name = split_qualified(old)
        new_db, new_name = split_qualified(new)
        for key, trigger in list(self.triggers.items()):
            if trigger.db == old_db and trigger.table == old_name:
                self.triggers[key] = attrs.evolve(trigger, table=new_name) if new_db == old_db else trigger

    def table_dropped(self, name: str) -> None:
        """Table ``db.table`` is gone, and its triggers with it."""
        db, table = split_qualified(name)
        for key, trigger in list(self.triggers.items()):
            if trigger.db == db and trigger.table == table:
                del self.triggers[key]

    def database_dropped(self, db: str) -> None:
        """Every view, trigger and routine of ``db`` is gone; so is what could not be seen of it."""
        self.views = {k: v for k, v in self.views.items() if v.db != db}
        self.triggers = {k: t for k, t in self.triggers.items() if t.db != db}
        self.routines = {k: r for k, r in self.routines.items() if r.db != db}
        self.unseen_triggers.discard(db)
        self.unseen_routines.discard(db)

    # -- persistence --------------------------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "views": [[v.db, v.name, _uses_to_list(v.uses)] for v in self.views.values()],
            "triggers": [
                [t.db, t.name, t.table, list(t.events), _uses_to_list(t.uses)] for t in self.triggers.values()
            ],
            "routines": [[r.db, r.name, r.kind, _uses_to_list(r.uses)] for r in self.routines.values()],
            "unseen_triggers": sorted(self.unseen_triggers),
            "unseen_routines": sorted(self.unseen_routines),
        }

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any] | None) -> ObjectCatalog:
        """From :meth:`to_dict`'s document; None (a history written before objects were kept): none known, and the
        triggers and routines of every database not seen."""
        objects = cls()
        if doc is None:
            objects.unseen_triggers.add(EVERY_DATABASE)
            objects.unseen_routines.add(EVERY_DATABASE)
            return objects
        for db, name, uses in doc.get("views", ()):
            objects.views[qualified(db, name)] = View(str(db), str(name), _uses_from_list(uses))
        for db, name, table, events, uses in doc.get("triggers", ()):
            table_name = None if table is None else str(table)
            trigger = Trigger(str(db), str(name), table_name, tuple(str(e) for e in events), _uses_from_list(uses))
            objects.triggers[qualified(db, name)] = trigger
        for db, name, kind, uses in doc.get("routines", ()):
            objects.routines[_routine_key(str(kind), str(db), str(name))] = Routine(
                str(db), str(name), str(kind), _uses_from_list(uses)
            )
        objects.unseen_triggers = {str(d) for d in doc.get("unseen_triggers", ())}
        objects.unseen_routines = {str(d) for d in doc.get("unseen_routines", ())}
        return objects


def _names(names: Iterable[TableName]) -> list[list[str | None]]:
    return [[n.schema, n.name] for n in names]


def _uses_to_list(uses: Uses | None) -> list[Any] | None:
    if uses is None:
        return None
    writes = [[w.table.schema, w.table.name, sorted(w.events)] for w in uses.writes]
    return [writes, _names(uses.calls), _names(uses.procedures), _names(uses.names), uses.dynamic]


def _uses_from_list(doc: list[Any] | None) -> Uses | None:
    if doc is None:
        return None
    writes, calls, procedures, names, dynamic = doc

    def named(items: list[list[Any]]) -> tuple[TableName, ...]:
        return tuple(TableName(None if s is None else str(s), str(n)) for s, n in items)

    return Uses(
        tuple(
            Write(TableName(None if s is None else str(s), str(n)), frozenset(str(e) for e in events))
            for s, n, events in writes
        ),
        named(calls),
        named(procedures),
        named(names),
        bool(dynamic),
    )
