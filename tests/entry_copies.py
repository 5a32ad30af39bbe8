"""A copy of the captured tables kept from the entries, as docs/concepts/fail-closed.md tells a consumer to keep one,
for the tests that compare it with ``SELECT``: rows by key; a heal's mark (``HEAL``) voids the tables it names and
their SNAPSHOT rows rebuild them; the foreign keys' actions a parent's row carries (``FOREIGN_KEY_ACTIONS``) are
applied to the children it holds; CREATE / DROP / TRUNCATE / RENAME TABLE and DROP DATABASE are followed.

Partial images (``binlog_row_image`` MINIMAL / NOBLOB) are followed as the docs say: a partial UPDATE's columns are
written over the row its before image's key names (the table's key: its primary key, or the UNIQUE NOT NULL key the
server promotes to one); one of a row the copy does not hold is skipped where the entry says ``SNAPSHOT_PENDING`` (a
snapshot brings the row), and a SNAPSHOT row after an update of what a VIRTUAL column is computed from makes the row
exact again (the rows read again).

What such a copy cannot follow fails the test loudly (:class:`CopyError`): a statement logged as a statement without a
heal's mark, an ALTER TABLE of a table it holds (the tests that use it change no captured layout: a temporary table's
ALTER must never reach it), a partial INSERT (it heals its table), a partial UPDATE of a row not held and not pending.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable
from typing import Any

from canal.parse.cascade import FOREIGN_KEY_ACTIONS
from canal.parse.heal_marks import SNAPSHOT_PENDING, heal_mark
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
        pending = header.props.get(SNAPSHOT_PENDING) == "true"
        for row in rc.rows:
            before = None if row.before is None else dict(zip(table.names, row.before, strict=True))
            after = None if row.after is None else dict(zip(table.names, row.after, strict=True))
            kind = rc.event_type
            if after is not None and ABSENT in after.values():
                if kind is not EventType.UPDATE or before is None:
                    raise CopyError(f"a partial {kind.name} of {name}: its table heals, it is not applied")
                base = held.get(_key(before, keys, name))
                if base is None:
                    if pending:
                        continue  # the snapshot still reading the table brings the row, this update written over
                    raise CopyError(f"a partial UPDATE of {name} of a row the copy does not hold, not pending")
                after = {c: base[c] if v is ABSENT else v for c, v in after.items()}
            if edges and before is not None and ABSENT in before.values():
                raise CopyError(f"a partial before image of {name}, whose foreign keys' actions need the whole row")
            if kind in (EventType.DELETE, EventType.UPDATE) and before is not None:
                held.pop(_key(before, keys, name), None)
            if kind in (EventType.INSERT, EventType.UPDATE, EventType.SNAPSHOT) and after is not None:
                held[_key(after, keys, name)] = after
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


def _key(image: Row, keys: list[str], name: Name) -> tuple[Any, ...]:
    values = tuple(image[k] for k in keys)
    if ABSENT in values:
        raise CopyError(f"an image of {name} without its whole key ({', '.join(keys)})")
    return values


def consume_while(instance: Any, copy: EntryCopy, going: Any) -> None:
    """Apply ``instance``'s entries to ``copy`` (each batch acked once applied) while ``going()`` (writers write)."""
    while going():
        message = instance.get(1000, timeout=0.1)
        copy.apply(message.entries)


def copy_until_reached(instance: Any, copy: EntryCopy, end: tuple[str, int], limit_s: float = 120.0) -> None:
    """Apply ``instance``'s entries to ``copy`` until the stream has read the binlog up to the master position
    ``end`` (``SHOW MASTER STATUS``'s file and offset) and the snapshots are over (none reading, none unfinished in the
    stream, the store drained)."""
    import time

    from canal.snapshot.window import position_key

    deadline = time.monotonic() + limit_s
    target = position_key(*end)
    while time.monotonic() < deadline:
        message = instance.get(1000, timeout=0.2, linger=0.05)  # an empty one still waits its 0.2 s
        copy.apply(message.entries)
        read = instance.read_position
        merge = instance.parser.merge
        if (
            not message.entries
            and read is not None
            and position_key(str(read.journal_name), int(read.position or 0)) >= target
            and not instance.snapshot_running
            and getattr(merge, "progress", None) is None
            and instance.store.size == 0
        ):
            return
    raise AssertionError(f"the copy did not reach {end} with its snapshots over in {limit_s} s")


def copy_until_healed(instance: Any, copy: EntryCopy, marker: Name, marker_id: int, limit_s: float = 60.0) -> None:
    """Apply ``instance``'s entries to ``copy`` until the row ``marker_id`` of table ``marker`` (written last) came and
    the heals are over (no snapshot reading, none unfinished in the cursor); each batch acked once applied."""
    import time

    deadline = time.monotonic() + limit_s
    seen = False
    while time.monotonic() < deadline:
        message = instance.get(500, timeout=0.3, linger=0.05)  # an empty one still waits its 0.3 s
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
