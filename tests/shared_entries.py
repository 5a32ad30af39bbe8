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


def ended(entries: Sequence[tuple[Any, ...]], db: str) -> bool:
    """Whether the end marker (a row of ``db.marks`` with id END_ID) arrived."""
    for e in entries:
        change = e[11]
        if (
            e[0] is EntryType.ROWDATA
            and e[6] == "marks"
            and change is not None
            and any(after is not None and after[0] == END_ID for _before, after in change[6])
        ):
            return True
    return False
