"""A copy of the captured tables kept from the entries, as docs/concepts/fail-closed.md tells a consumer to keep one,
for the tests that compare it with ``SELECT``: rows by key; a heal's mark (``HEAL``) voids the tables it names and
their SNAPSHOT rows rebuild them; the foreign keys' actions a parent's row carries (``FOREIGN_KEY_ACTIONS``) are
applied to the children it holds; CREATE / DROP / TRUNCATE / RENAME TABLE and DROP DATABASE are followed.

What such a copy cannot follow fails the test loudly (:class:`CopyError`): a statement logged as a statement without a
heal's mark, an ALTER TABLE of a table it holds (the tests that use it change no captured layout: a temporary table's
ALTER must never reach it), partial images.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from typing import Any

from canal.parse.cascade import FOREIGN_KEY_ACTIONS
from canal.parse.heal_marks import heal_mark
from canal.protocol import ABSENT, Entry, EntryType, EventType
from canal.sql import AlterTable, CreateTable, DropDatabase, DropTable, RenameTable, TruncateTable, read_statements

Name = tuple[str, str]
Row = dict[str, Any]


def plain_row(values: dict[str, Any]) -> dict[str, Any]:
    """SELECT's and the decoder's values in one form: a SET as its text (the workload's labels sort in their
    definition order), a TIMESTAMP as its UTC time (SELECT reads it in UTC where the tests compare)."""
    return {k: _plain_value(v) for k, v in values.items()}


def _plain_value(value: Any) -> Any:
    if isinstance(value, set | frozenset):
        return ",".join(sorted(value))
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


def keyed_rows(rows: Iterable[dict[str, Any]], key: list[str]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Rows in :func:`plain_row`'s form by their key's values."""
    return {tuple(r[k] for k in key): plain_row(r) for r in rows}


class CopyError(AssertionError):
    """An entry the copy cannot follow."""


class EntryCopy:
    """``tables[(db, table)]``: the rows held, by primary key (a tuple of the key's values)."""

    def __init__(self, tables: Iterable[Name] = ()) -> None:
        self.tables: dict[Name, dict[tuple[Any, ...], Row]] = {name: {} for name in tables}
        self.keys: dict[Name, list[str]] = {}
        self.heals: list[str] = []  # the ``why`` of each heal seen
        self.healed: list[tuple[str, ...]] = []  # and the tables (``db.table``) each one read again

    def rows(self, db: str, table: str) -> list[Row]:
        return sorted(self.tables.get((db, table), {}).values(), key=lambda r: tuple(str(v) for v in r.values()))

    def apply(self, entries: Iterable[Entry]) -> None:
        for entry in entries:
            if entry.entry_type is EntryType.ROWDATA:
                self._entry(entry)

    # -- one entry ----------------------------------------------------------------------------------------------------

    def _entry(self, entry: Entry) -> None:
        header, rc = entry.header, entry.row_change
        assert rc is not None
        mark = heal_mark(header.props)
        if mark is not None:
            self.heals.append(mark.why)
            self.healed.append(tuple(t.full_name for t in mark.tables))
            for healed in mark.tables:
                self.tables[(healed.schema, healed.table)] = {}  # void from here: the heal's rows rebuild it
            return  # the statement itself need not be applied
        name = (header.schema, header.table)
        if rc.is_ddl:
            self._ddl(rc.sql or "", rc.ddl_schema or header.schema)
            return
        if rc.event_type is EventType.QUERY or (rc.sql and not rc.rows):
            raise CopyError(f"a statement without a heal's mark at {header.log_file}:{header.log_offset}: {rc.sql!r}")
        table = rc.table
        assert table is not None
        keys = [table.names[i] for i in table.key_indexes]
        self.keys[name] = keys
        held = self.tables.setdefault(name, {})
        edges = json.loads(header.props.get(FOREIGN_KEY_ACTIONS, "[]"))
        for row in rc.rows:
            for image in (row.before, row.after):
                if image is not None and any(v is ABSENT for v in image):
                    raise CopyError(f"a partial image of {name}: the copy keeps whole rows")
            before = None if row.before is None else dict(zip(table.names, row.before, strict=True))
            after = None if row.after is None else dict(zip(table.names, row.after, strict=True))
            kind = rc.event_type
            if kind in (EventType.DELETE, EventType.UPDATE) and before is not None:
                held.pop(tuple(before[k] for k in keys), None)
            if kind in (EventType.INSERT, EventType.UPDATE, EventType.SNAPSHOT) and after is not None:
                held[tuple(after[k] for k in keys)] = after
            if edges and before is not None and kind in (EventType.DELETE, EventType.UPDATE):
                self._cascade(name, before, after, edges)

    def _cascade(self, parent: Name, before: Row, after: Row | None, edges: list[dict[str, Any]]) -> None:
        """The foreign keys' actions a parent row's change runs, as the capture guide says to apply them: the children
        whose columns held the old referenced values are deleted (CASCADE) or set NULL (SET NULL), or take the new
        values (ON UPDATE CASCADE); then the same for those rows' own children."""
        for edge in edges:
            if (edge["ref_db"], edge["ref_table"]) != parent:
                continue
            old = [before[c] for c in edge["ref_columns"]]
            new = None if after is None else [after[c] for c in edge["ref_columns"]]
            if new == old:
                continue
            action = edge["on_delete"] if after is None else edge["on_update"]
            if action not in ("CASCADE", "SET NULL"):
                continue
            child = (edge["db"], edge["table"])
            held = self.tables.get(child)
            if held is None:
                continue
            keys = self.keys.get(child) or [c[0] for c in edge["layout"] if c[2]]
            for key, row in list(held.items()):
                if [row.get(c) for c in edge["columns"]] != old or None in old:
                    continue
                del held[key]
                if action == "CASCADE" and new is None:
                    changed = None
                else:
                    values = new if action == "CASCADE" else [None] * len(old)
                    changed = {**row, **dict(zip(edge["columns"], values, strict=True))}
                    held[tuple(changed[k] for k in keys)] = changed
                self._cascade(child, row, changed, edges)

    def _ddl(self, sql: str, session: str) -> None:
        for stmt in read_statements(sql, strict=False):

            def full(name: Any) -> Name:
                return (name.schema if name.schema is not None else session, name.name)

            if isinstance(stmt, CreateTable):
                if not stmt.temporary:
                    self.tables[full(stmt.table)] = {}
            elif isinstance(stmt, DropTable):
                for name in stmt.tables:
                    self.tables.pop(full(name), None)
            elif isinstance(stmt, TruncateTable):
                self.tables[full(stmt.table)] = {}
            elif isinstance(stmt, RenameTable):
                for old, new in stmt.pairs:
                    self.tables[full(new)] = self.tables.pop(full(old), {})
            elif isinstance(stmt, DropDatabase):
                for name in [n for n in self.tables if n[0] == stmt.name]:
                    del self.tables[name]
            elif isinstance(stmt, AlterTable):
                target = full(stmt.table)
                if target in self.tables:
                    raise CopyError(f"an ALTER TABLE of {target}, which the copy holds: {sql[:120]!r}")


def copy_until_healed(instance: Any, copy: EntryCopy, marker: Name, marker_id: int, limit_s: float = 60.0) -> None:
    """Apply ``instance``'s entries to ``copy`` until the row ``marker_id`` of table ``marker`` (written last) came and
    the heals are over (no snapshot reading, none unfinished in the cursor); each batch acked once applied."""
    import time

    deadline = time.monotonic() + limit_s
    seen = False
    while time.monotonic() < deadline:
        message = instance.get(500, timeout=0.3)
        copy.apply(message.entries)
        for entry in message.entries:
            rc = entry.row_change
            if (entry.header.schema, entry.header.table) == marker and rc is not None and rc.rows:
                seen = seen or any(r.after is not None and r.after[0] == marker_id for r in rc.rows)
        if seen and not message.entries and not instance.snapshot_running:
            cursor = instance.get_cursor()
            if cursor is None or cursor.snapshot is None:
                return
    raise AssertionError(f"the copy did not catch up in {limit_s} s (marker seen: {seen})")
