"""A copy of tables kept from a destination's entries alone, as docs/concepts/fail-closed.md tells a consumer to keep
one: the reference the heal tests hold the entries to (the Delta mirror is one such copy; this one has no storage).

Per table, rows by the table's row key (the columns a test names: its primary key, or the UNIQUE NOT NULL key a table
without one is keyed by). It applies, in order:

* a ``HEAL`` mark: the healed tables' rows are void -- dropped;
* an INSERT or a whole UPDATE: the after image, the UPDATE's old key (its before image's) dropped first;
* a partial UPDATE (``binlog_row_image`` MINIMAL / NOBLOB): the columns it carries written over the row its before
  image's key names; a row the copy does not hold is skipped where the entry says ``SNAPSHOT_PENDING`` (the snapshot
  brings it), an AssertionError otherwise;
* a DELETE: the row its before image's key names, dropped;
* SNAPSHOT rows: upserts.

Statements and DDL are not applied: the tests that use it change no layout, and a statement that changed rows heals.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from canal.instance import Instance
from canal.parse.heal_marks import SNAPSHOT_PENDING, heal_mark
from canal.protocol import ABSENT, Entry, EntryType, EventType
from canal.snapshot.window import position_key


class EntryCopy:
    """Copies of the tables ``keys`` names (``table -> key column names``), kept from entries."""

    def __init__(self, keys: Mapping[str, Sequence[str]]) -> None:
        self.keys = {table: tuple(names) for table, names in keys.items()}
        self.tables: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = {table: {} for table in keys}
        self.skipped = 0  # partial updates of rows not held, marked SNAPSHOT_PENDING

    def apply(self, entries: Sequence[Entry]) -> None:
        for entry in entries:
            if entry.entry_type is not EntryType.ROWDATA or entry.row_change is None:
                continue
            header, rc = entry.header, entry.row_change
            mark = heal_mark(header.props)
            if mark is not None:
                for healed in mark.tables:
                    if healed.table in self.tables:
                        self.tables[healed.table].clear()
            applied = rc.event_type.is_dml or rc.event_type is EventType.SNAPSHOT
            if rc.is_ddl or header.table not in self.tables or not applied:
                continue
            rows = self.tables[header.table]
            names = rc.rows.table.names if hasattr(rc.rows, "table") else ()
            key = self.keys[header.table]
            pending = header.props.get(SNAPSHOT_PENDING) == "true"
            for row in rc.rows:
                before = None if row.before is None else dict(zip(names, row.before, strict=True))
                after = None if row.after is None else dict(zip(names, row.after, strict=True))
                if rc.event_type is EventType.DELETE:
                    assert before is not None
                    rows.pop(_key(before, key), None)
                    continue
                assert after is not None
                if rc.event_type in (EventType.INSERT, EventType.SNAPSHOT):
                    assert ABSENT not in after.values(), f"{header.table}: a partial INSERT {after}"
                    rows[_key(after, key)] = after
                    continue
                assert before is not None
                old = _key(before, key)
                if ABSENT in after.values():
                    held = rows.get(old)
                    if held is None:
                        assert pending, f"{header.table}: a partial UPDATE of key {old}, not held and not pending"
                        self.skipped += 1
                        continue
                    after = {name: held[name] if value is ABSENT else value for name, value in after.items()}
                rows.pop(old, None)
                rows[_key(after, key)] = after

    def rows(self, table: str) -> list[dict[str, Any]]:
        """The table's rows in key order (the key's values as Python orders them)."""
        return [self.tables[table][k] for k in sorted(self.tables[table])]


def _key(image: Mapping[str, Any], key: Sequence[str]) -> tuple[Any, ...]:
    values = tuple(image[name] for name in key)
    assert ABSENT not in values, f"an image without its whole key {key}: {image}"
    return values


def consume_while(inst: Instance, apply: Callable[[Sequence[Entry]], None], going: Callable[[], bool]) -> None:
    """Get, apply and ack ``inst``'s entries while ``going()`` (writers still write, say)."""
    while going():
        message = inst.get_without_ack(1000, timeout=0.1)
        apply(message.entries)
        if message.id != -1:
            inst.ack(message.id)


def drain(
    inst: Instance, apply: Callable[[Sequence[Entry]], None], end: tuple[str, int], timeout: float = 180.0
) -> None:
    """Get, apply and ack ``inst``'s entries until the stream has handed off everything before the master position
    ``end`` and no snapshot is left (running, or unfinished in the stream)."""
    deadline = time.monotonic() + timeout
    target = position_key(*end)
    while time.monotonic() < deadline:
        message = inst.get_without_ack(1000, timeout=0.2)
        apply(message.entries)
        if message.id != -1:
            inst.ack(message.id)
        read = inst.read_position
        merge = inst.parser.merge
        if (
            not message.entries
            and read is not None
            and position_key(str(read.journal_name), int(read.position or 0)) >= target
            and not inst.snapshot_running
            and getattr(merge, "progress", None) is None
            and inst.store.size == 0
        ):
            return
    raise AssertionError(f"the stream did not reach {end} with its snapshots done within {timeout} s")
