"""Entries in a comparable form, for the shared reader's differential tests (and their child processes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from canal.protocol import Entry, EntryType

END_ID = 999_999


def canonical(entry: Entry) -> tuple[Any, ...]:
    """Everything an entry carries, comparable."""
    h = entry.header
    rc = entry.row_change
    change = None
    if rc is not None:
        change = (
            rc.event_type,
            rc.is_ddl,
            rc.sql,
            rc.ddl_schema,
            rc.table_id,
            None if rc.table is None else rc.table.names,
            tuple((r.before, r.after) for r in rc.rows),
        )
    return (
        entry.entry_type,
        h.log_file,
        h.log_offset,
        h.server_id,
        h.execute_time,
        h.schema,
        h.table,
        h.event_type,
        h.event_length,
        h.gtid,
        tuple(sorted(h.props.items())),
        change,
        entry.thread_id,
        entry.xid,
        entry.anchor,
        entry.rows_done,
    )


def _is_marker(e: tuple[Any, ...]) -> bool:
    change = e[11]
    return (
        e[0] is EntryType.ROWDATA
        and e[6] == "marks"
        and change is not None
        and any(after is not None and after[0] == END_ID for _before, after in change[6])
    )


def ended(entries: Sequence[tuple[Any, ...]], db: str) -> bool:
    """Whether the end marker (a row of ``db.marks`` with id END_ID) arrived."""
    return any(_is_marker(e) for e in entries)


def through_marker(entries: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The entries up to the end marker's row: whether its transaction's END came in the same batch depends on when
    the consumer asked, not on what the destination made."""
    return list(entries[: next(i for i, e in enumerate(entries) if _is_marker(e)) + 1])
