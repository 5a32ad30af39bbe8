"""Tables a statement changed without logging a row: foreign-key actions (``ON DELETE CASCADE``, ``ON UPDATE
CASCADE``, ``SET NULL``).

The server logs the rows a statement changed itself, but not the rows InnoDB changed for a foreign key's action on a
child table. It does map every table the statement locked for writing, children with such actions included: a
table map in a statement's group of events with no rows event of its own is a table that statement may have
changed unseen. :class:`StatementTables` follows the table maps and rows events of each statement and names those
tables on the statement's last row entry, as the header prop :data:`CASCADE_TABLES` (a JSON list of
``[schema, table]``). A consumer that keeps copies of those tables must look them up again, or apply the foreign
keys' actions itself: with a schema history, each DELETE / UPDATE row entry of such a statement carries the foreign
keys its rows' changes follow (:data:`FOREIGN_KEY_ACTIONS`), which the Delta mirror applies
(:mod:`canal.lake.apply.cascade`); without, it stops there (:mod:`canal.lake.apply.stops`).

It names a child whether or not a row of it changed (the server maps it before it knows). Without a schema history
it also names a table a trigger was prepared to write but did not (pt-online-schema-change's delete trigger, for a
row it had not copied yet); with one (:data:`KnownForeignKeys`), only the tables a foreign key's action can reach from
the tables the statement logged rows of (directly, or through another such table), and every table whose keys the
history does not know -- a trigger's writes are logged as rows, so a table no action reaches changed nothing unseen.

A parent the destination's filter leaves out hands out no rows, so no copy can apply its actions: the captured
children its change may have reached (:func:`out_of_capture`) heal at its rows event instead
(:func:`out_of_capture_statement`, the mark on an entry of its own) -- unless it is an UPDATE whose decoded rows
changed no column a child references (:func:`references_unchanged`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from canal.names import qualified
from canal.parse.events import RowsEvent
from canal.parse.heal_marks import CASCADE_OUT_OF_CAPTURE
from canal.parse.unmodeled import UnmodeledStatement
from canal.position import EntryPosition
from canal.protocol import ABSENT
from canal.schema.foreign_keys import CHANGING_ACTIONS, ForeignKey

CASCADE_TABLES: Final = "CASCADE_TABLES"
FOREIGN_KEY_ACTIONS: Final = "FOREIGN_KEY_ACTIONS"
"""The header prop, on each DELETE / UPDATE row entry of a statement that mapped a child table of its table through a
foreign key whose action changes rows: a JSON list of those foreign keys, children's children included, from the
schema history (:meth:`canal.schema.history.SchemaHistory.foreign_key_actions`): each an object with the child's
``db``, ``table`` and ``layout`` (``[name, mysql_type, is_key]`` per column), the key's ``name``, ``columns``,
``ref_db``, ``ref_table``, ``ref_columns``, ``on_delete`` and ``on_update``."""

ForeignKeyActions = Callable[[str, str], list[dict[str, Any]]]
"""``(db, table)`` -> the foreign keys a change of its rows follows (the schema history's)."""

KnownForeignKeys = Callable[[str, str], Sequence[ForeignKey] | None]
"""``(db, table)`` -> the table's own foreign keys, as the schema history knows them (None: it does not know the
table)."""


class StatementTables:
    """The tables mapped and the tables with rows in the statement being read."""

    __slots__ = ("_mapped", "_rowed")

    def __init__(self) -> None:
        self._mapped: dict[tuple[str, str], None] = {}  # in map order
        self._rowed: set[tuple[str, str]] = set()

    def reset(self) -> None:
        self._mapped.clear()
        self._rowed.clear()

    def mapped(self, schema: str, table: str) -> None:
        self._mapped[(schema, table)] = None

    def edges(
        self, schema: str, table: str, changes_rows: bool, follow: ForeignKeyActions | None
    ) -> list[dict[str, Any]]:
        """Before :meth:`rows` of a rows event of ``schema.table`` (``changes_rows``: a DELETE or UPDATE): the foreign
        keys its change follows to a child the statement mapped, the table itself included (a statement's table maps
        all come before its rows events)."""
        if not changes_rows or follow is None:
            return []
        # a foreign key of the table to itself (a tree's parent column) cascades within it, unlogged too
        return [e for e in follow(schema, table) if (e["db"], e["table"]) in self._mapped]

    def actions(self, schema: str, table: str, changes_rows: bool, follow: ForeignKeyActions | None) -> dict[str, str]:
        """The :data:`FOREIGN_KEY_ACTIONS` prop of :meth:`edges`, or none."""
        return actions_prop(self.edges(schema, table, changes_rows, follow))

    def rows(
        self, schema: str, table: str, end_of_statement: bool, keys: KnownForeignKeys | None = None
    ) -> Mapping[str, str]:
        """A rows event of ``schema.table``; at the statement's last one, the props naming the tables it mapped and
        logged no rows of that it may have changed unseen (all of them without ``keys``; empty when none)."""
        self._rowed.add((schema, table))
        if not end_of_statement:
            return {}
        silent = [name for name in self._mapped if name not in self._rowed]
        if keys is not None and silent:
            silent = _reachable(silent, self._rowed, keys)
        self.reset()
        return {CASCADE_TABLES: json.dumps([list(n) for n in silent], ensure_ascii=False)} if silent else {}


def actions_prop(edges: list[dict[str, Any]]) -> dict[str, str]:
    """The :data:`FOREIGN_KEY_ACTIONS` prop of a rows entry whose change follows ``edges`` (none without)."""
    return {FOREIGN_KEY_ACTIONS: json.dumps(edges, ensure_ascii=False, separators=(",", ":"))} if edges else {}


def out_of_capture(
    edges: list[dict[str, Any]], silent: Mapping[str, str], captured: Callable[[str, str], bool]
) -> list[tuple[str, str]]:
    """For a rows event of a table the filter leaves out: the captured tables its change may have changed unlogged
    -- the children its foreign keys' actions reach (``edges``), and the tables its statement mapped and logged no
    rows of (``silent``, the :data:`CASCADE_TABLES` prop at the statement's last rows event). The server logs none
    of their changes, and the parent's rows, which a copy would apply the actions from, are not handed off."""
    found = [(str(e["db"]), str(e["table"])) for e in edges]
    text = silent.get(CASCADE_TABLES)
    if text:
        found += [(str(db), str(table)) for db, table in json.loads(text)]
    return [name for name in dict.fromkeys(found) if captured(*name)]


def out_of_capture_statement(event: RowsEvent, children: Sequence[tuple[str, str]]) -> UnmodeledStatement:
    """A rows event of a table the filter leaves out whose foreign keys' actions may have changed the captured
    ``children`` (:func:`out_of_capture`), as a change to heal (the children), described in words: no statement
    of the server's, none to replay."""
    parent = qualified(event.table.schema, event.table.table)
    names = tuple(qualified(db, name) for db, name in children)
    verb = event.event_type.name
    return UnmodeledStatement(
        f"{verb} rows of {parent}: the ON {verb} actions of its foreign keys change {', '.join(names)}",
        event.table.schema,
        CASCADE_OUT_OF_CAPTURE,
        (parent, *names),
        names,
        EntryPosition(event.log_file, event.offset, event.timestamp * 1000, event.server_id),
        True,
        True,
        names,
    )


def references_unchanged(edges: list[dict[str, Any]], schema: str, table: str, names: Sequence[str], rows: Any) -> bool:
    """Whether an UPDATE of ``schema.table`` (``names``: its columns; ``rows``: decoded images) left every column its
    children's foreign keys (``edges``) reference as it was: no ON UPDATE action ran. False where an image does not
    carry one (a partial image)."""
    referenced = {c for e in edges if (e["ref_db"], e["ref_table"]) == (schema, table) for c in e["ref_columns"]}
    where = [i for i, name in enumerate(names) if name in referenced]
    if len(where) != len(referenced):
        return False
    for row in rows:
        before, after = row.before, row.after
        if before is None or after is None:
            return False
        for i in where:
            if before[i] is ABSENT or (after[i] is not ABSENT and after[i] != before[i]):
                return False
    return True


def _reachable(
    silent: list[tuple[str, str]], rowed: set[tuple[str, str]], keys: KnownForeignKeys
) -> list[tuple[str, str]]:
    """The tables of ``silent`` a foreign key's action may have changed: those whose keys the history does not know,
    and those with a key that changes rows referencing a table of ``rowed`` or another such table."""
    changed = set(rowed)
    found: set[tuple[str, str]] = set()
    progress = True
    while progress:
        progress = False
        for name in silent:
            if name in found:
                continue
            known = keys(*name)
            if known is None or any(
                (key.ref_db, key.ref_table) in changed
                and (key.on_delete in CHANGING_ACTIONS or key.on_update in CHANGING_ACTIONS)
                for key in known
            ):
                found.add(name)
                changed.add(name)
                progress = True
    return [name for name in silent if name in found]
