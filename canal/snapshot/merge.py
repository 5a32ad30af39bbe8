"""The parser's side of a snapshot: chunks wait for their place in the stream and join it as SNAPSHOT entries.

A snapshot reader (its own thread and connection) opens a :class:`~canal.snapshot.window.ChunkWindow` for the table,
reads a chunk exact at a binlog position, and :meth:`SnapshotMerge.submit` s it. The parser thread calls
:meth:`SnapshotMerge.after_hand_off` after every hand-off: it records the keys of the windows' tables, and at a
transaction boundary at or after a waiting chunk's position it returns the chunk's reconciled rows as SNAPSHOT
entries, which the parser hands off next -- so they reach the store between transactions, after every binlog change
they already contain and before every change they do not.

SNAPSHOT entries carry the after image only (consumers apply them as upserts), name the table in their header, take
the cursor of the boundary they follow (acking them moves no binlog position), and carry their chunk and progress in
``header.props``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from canal.errors import CanalError
from canal.position import EntryPosition, LogPosition
from canal.protocol import Entry, EntryType, EventType, Header, RowChange, RowData
from canal.snapshot.reader import Chunk
from canal.snapshot.window import ChunkWindow, position_key

__all__ = ["ROWS_PER_ENTRY", "PendingChunk", "SnapshotAborted", "SnapshotMerge"]

ROWS_PER_ENTRY = 1000  # rows of one SNAPSHOT entry: the granularity of acks inside a chunk


class SnapshotAborted(CanalError):
    """The parser dropped a waiting chunk (it stopped, or switched to another server whose positions differ)."""


class PendingChunk:
    """A chunk waiting for the parser; :meth:`wait` returns the number of rows emitted once it joined the stream."""

    def __init__(self, window: ChunkWindow, chunk: Chunk, number: int, last: bool) -> None:
        self.window = window
        self.chunk = chunk
        self.number = number
        self.last = last
        self.emitted: int | None = None
        self.error: BaseException | None = None
        self._done = threading.Event()

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise TimeoutError("the chunk is still waiting for the parser")
        if self.error is not None:
            raise self.error
        assert self.emitted is not None
        return self.emitted

    def _finish(self, emitted: int | None, error: BaseException | None = None) -> None:
        self.emitted, self.error = emitted, error
        self._done.set()


class SnapshotMerge:
    """Open windows and waiting chunks of one parser. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._windows: dict[tuple[str, str], ChunkWindow] = {}
        self._pending: list[PendingChunk] = []
        self._handed: tuple[int, int] | None = None  # the end of the last boundary handed off

    @property
    def active(self) -> bool:
        return bool(self._windows)

    def open_window(self, schema: str, table: str, key_indexes: Sequence[int]) -> ChunkWindow:
        """Start recording the table's changed keys (before the chunk's read starts)."""
        window = ChunkWindow(schema, table, key_indexes)
        with self._lock:
            self._windows[(schema, table)] = window
        return window

    def close_window(self, window: ChunkWindow) -> None:
        with self._lock:
            if self._windows.get((window.schema, window.table)) is window:
                del self._windows[(window.schema, window.table)]

    def submit(self, window: ChunkWindow, chunk: Chunk, number: int, *, last: bool) -> PendingChunk:
        pending = PendingChunk(window, chunk, number, last)
        with self._lock:
            self._pending.append(pending)
        return pending

    def abort(self, reason: str) -> None:
        """Drop the waiting chunks (their readers read them again) and forget what the windows recorded."""
        with self._lock:
            pending, self._pending = self._pending, []
            self._handed = None
        for chunk in pending:
            chunk._finish(None, SnapshotAborted(f"snapshot chunk dropped: {reason}"))

    # -- the parser thread --------------------------------------------------------------------------------------------

    def after_hand_off(self, entries: Sequence[Entry], resume: LogPosition | None) -> list[Entry]:
        """Record the handed-off rows of watched tables; at a boundary, the SNAPSHOT entries now due."""
        windows = self._windows
        last = entries[-1]
        if windows:
            for entry in entries:
                rc = entry.row_change
                if rc is None or entry.entry_type is not EntryType.ROWDATA or rc.is_ddl:
                    continue
                h = entry.header
                window = windows.get((h.schema, h.table))
                if window is not None:
                    at = position_key(h.log_file, h.log_offset)
                    for row in rc.rows:
                        window.observe((row.before, row.after), at)
        boundary = last.entry_type is EntryType.HEARTBEAT or last.is_boundary
        if not boundary:
            return []
        h = last.header
        if h.log_file:
            end = h.log_offset + h.event_length if last.entry_type is not EntryType.HEARTBEAT else h.log_offset
            self._handed = position_key(h.log_file, end)
        if not self._pending or self._handed is None:
            return []
        due: list[PendingChunk] = []
        with self._lock:
            for pending in list(self._pending):
                where = pending.chunk.position
                assert where.journal_name is not None and where.position is not None
                if position_key(where.journal_name, where.position) <= self._handed:
                    due.append(pending)
                    self._pending.remove(pending)
        out: list[Entry] = []
        for pending in due:
            rows = pending.window.reconcile(pending.chunk.rows, pending.chunk.position)
            out.extend(snapshot_entries(pending, rows, h, resume))
            pending._finish(len(rows))
        return out


def snapshot_entries(
    pending: PendingChunk, rows: Sequence[Sequence[Any]], at: Header, resume: LogPosition | None
) -> list[Entry]:
    """The SNAPSHOT entries of a chunk's ``rows``, placed after the boundary whose header is ``at``."""
    chunk = pending.chunk
    table = chunk.table
    now = int(time.time() * 1000)
    anchor: EntryPosition | None = None if resume is None else resume.position
    rows_done = 0 if resume is None else resume.rows_done
    parts = [rows[start : start + ROWS_PER_ENTRY] for start in range(0, len(rows), ROWS_PER_ENTRY)]
    if not parts and pending.last:
        parts = [()]  # a last chunk with no row left: one empty entry still says the table is done
    entries: list[Entry] = []
    for n, part in enumerate(parts, 1):
        header = Header(
            log_file=at.log_file,
            log_offset=at.log_offset,
            server_id=at.server_id,
            execute_time=now,
            schema=table.schema,
            table=table.table,
            event_type=EventType.SNAPSHOT,
            event_length=64 * len(part),  # what MEMSIZE stores account for (there is no binlog event to measure)
            props={
                "snapshot.chunk": str(pending.number),
                "snapshot.position": str(chunk.position),
                "snapshot.table_done": "true" if pending.last and n == len(parts) else "false",
            },
        )
        change = RowChange(EventType.SNAPSHOT, tuple(RowData(table, None, tuple(row)) for row in part), table=table)
        entries.append(Entry(header, EntryType.ROWDATA, change, anchor=anchor, rows_done=rows_done))
    return entries
