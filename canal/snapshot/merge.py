"""The parser's side of a snapshot: chunks wait for their place in the stream and join it as SNAPSHOT entries.

A snapshot reader (its own thread and connection) opens a :class:`~canal.snapshot.window.ChunkWindow` for the table,
reads a chunk exact at a binlog position, and :meth:`SnapshotMerge.submit` s it. The parser thread calls
:meth:`SnapshotMerge.after_hand_off` after every hand-off: it records the keys of the windows' tables, and at a
transaction boundary at or after a waiting chunk's position it puts the chunk's reconciled rows, as SNAPSHOT
entries, into the stream next (through the parser's ``put``) -- so they reach the store between transactions, after
every binlog change they already contain and before every change they do not. A chunk whose position the parser has
already passed, with the parser resting at a boundary (an idle server sends nothing to hand off), joins at once:
``submit`` asks the parser (:meth:`attach`) to hand it off at that boundary rather than at the next heartbeat.

A chunk counts as joined -- its reader's :meth:`PendingChunk.wait` returns, and the snapshot's progress moves past
it -- only once ``put`` returned: its entries are in the store. So a runner that is no longer running has every
chunk it read in the store (what a consumer waiting until a snapshot's rows were all handled relies on), and a put
that fails (the store closed under it) leaves the chunk to be read again, with no entry carrying a progress past
rows the stream never got.

SNAPSHOT entries carry the after image only (consumers apply them as upserts), name the table in their header, take
the cursor of the boundary they follow (acking them moves no binlog position), and carry their chunk and progress in
``header.props`` (``snapshot.table_index``: the table's place in the snapshot's list -- a heal may list a table
twice, :mod:`canal.snapshot.heal`).

Progress in the cursor. From :meth:`SnapshotMerge.begin` until the snapshot's last entry, every entry handed off
carries the snapshot's :class:`~canal.position.SnapshotCursor` as of that point (:meth:`SnapshotMerge.tag`): the
table being read and the key of its last row in the stream. Acking an entry makes that the consumer cursor's
snapshot progress, so a restart (or an HA takeover) resumes the snapshot after the last acked snapshot row and
redelivers none of them. Each SNAPSHOT entry advances it; the snapshot's last entry carries none.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from canal.errors import CanalError, HealError, SnapshotError
from canal.names import qualified
from canal.parse.events import RowsEvent
from canal.parse.heal_marks import HEAL, SNAPSHOT_PENDING, heal_mark
from canal.position import EntryPosition, LogPosition, SnapshotCursor
from canal.protocol import ABSENT, ColumnarRows, Entry, EntryType, EventType, Header, RowChange, Rows
from canal.snapshot.marks import MarkedRead, mark_of
from canal.snapshot.reader import Chunk
from canal.snapshot.window import ChunkWindow, entry_position_key, position_key

__all__ = ["ROWS_PER_ENTRY", "LayoutChanged", "PendingChunk", "Put", "SnapshotAborted", "SnapshotMerge"]

ROWS_PER_ENTRY = 1000  # rows of one SNAPSHOT entry: the granularity of acks inside a chunk

Put = Callable[[list[Entry]], None]
"""The parser's way to put entries into the stream (its sink), under its hand-off lock: returns once they are stored."""


class SnapshotAborted(CanalError):
    """The parser dropped a waiting chunk (it stopped, or switched to another server whose positions differ)."""


class LayoutChanged(SnapshotAborted):
    """A waiting chunk was read under its table's layout from before a DDL that the stream reaches first: its reader
    reads it again under the layout after the DDL (a chunk never joins the stream past a DDL in an old layout)."""


class PendingChunk:
    """A chunk waiting for the parser; :meth:`wait` returns the number of rows emitted once it joined the stream."""

    def __init__(
        self,
        window: ChunkWindow,
        chunk: Chunk,
        number: int,
        last: bool,
        progress: SnapshotCursor,
        layout_generation: int = 0,
    ) -> None:
        self.window = window
        self.layout_generation = layout_generation  # the table's DDL count when the chunk's layout was read
        self.chunk = chunk
        self.number = number
        self.last = last  # the table's last chunk
        self.progress = progress  # the snapshot's progress before this chunk (its table is progress.table)
        # the stream's changes at or after ``lower`` overtake the chunk's rows; it joins at a boundary at or after
        # ``due_at``: both its position when it has one, else its watermarks' once the parser has seen them
        position = chunk.position
        self.lower: EntryPosition | None = None if isinstance(position, MarkedRead) else position
        self.due_at: EntryPosition | None = self.lower
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

    def __init__(self, watermark_table: tuple[str, str] | None = None) -> None:
        self.watermark_table = watermark_table  # DBLog's watermarks (canal.snapshot.marks): the parser's to watch
        self._marks: dict[str, EntryPosition | None] = {}  # marks written and not yet used -> where the parser saw them
        # the last read placed by its marks (the pieces of a table read without a key share one read)
        self._placed: tuple[MarkedRead, EntryPosition, EntryPosition] | None = None
        self._lock = threading.Lock()
        self._windows: dict[tuple[str, str], ChunkWindow] = {}
        self._pending: list[PendingChunk] = []
        self._handed: tuple[int, int] | None = None  # the end of the last boundary handed off
        self._progress: SnapshotCursor | None = None  # what entries handed off now carry (None: no snapshot)
        # the running snapshot's tables: what progress computed from a chunk's (maybe shorter) list is rebased onto
        # when a heal extends the list while the chunk waits (extend)
        self._tables: tuple[str, ...] = ()
        self._hand_off_now: Callable[[], None] | None = None  # the parser's: hand off what is due at its boundary
        self._end_stream = False  # the stream ends with the snapshot's last entry (snapshot mode initial_only)
        self._stream_ended = False
        # DDL handed off per table (lower-case db.table): a chunk read under a layout taken before a DDL of its table
        # that the stream hands off before the chunk joins it would carry the old layout past the DDL
        self._ddl: dict[str, int] = {}
        self._failed: HealError | None = None  # a heal that could not read its tables: the parser stops with it

    def layout_generation(self, schema: str, table: str) -> int:
        """How many DDL statements of the table the stream has handed off: taken before a chunk's layout is read,
        compared when the chunk is placed (a chunk whose table's DDL count moved is read again under the new
        layout)."""
        with self._lock:
            return self._ddl.get(qualified(schema, table).lower(), 0)

    @property
    def active(self) -> bool:
        """Entries are watched (a window is open) or tagged (a snapshot is unfinished), or a heal failed."""
        return bool(self._windows) or self._progress is not None or self._failed is not None

    def fail(self, error: HealError) -> None:
        """A heal could not read its tables again: the parser stops with ``error`` at its next hand-off, before it
        hands off anything more (a copy of those tables would stay void or stale for good). The next
        :meth:`begin` (a start) clears it."""
        self._failed = error

    def attach(self, hand_off_now: Callable[[], None]) -> None:
        """The parser's way to hand off due chunks from another thread, at the boundary it rests at."""
        self._hand_off_now = hand_off_now

    @property
    def progress(self) -> SnapshotCursor | None:
        """The unfinished snapshot's progress as of the last entry handed off."""
        return self._progress

    def begin(self, progress: SnapshotCursor | None, *, end_stream: bool | None = None) -> None:
        """From now on, entries handed off carry ``progress`` (a snapshot starts or resumes; None: it ended).
        ``end_stream`` True: the stream ends with the snapshot's last entry (with ``progress`` None: at once)."""
        with self._lock:
            self._failed = None
            self._progress = progress
            self._tables = () if progress is None else progress.tables
            if end_stream is not None:
                self._end_stream = end_stream
                self._stream_ended = end_stream and progress is None

    def extend(self, tables: Sequence[str], first_new: int) -> None:
        """The running snapshot's tables are now ``tables``: its list with more appended from index ``first_new`` (a
        heal, :meth:`~canal.snapshot.runner.SnapshotRunner.extend`). Entries handed off from now on carry the longer
        list; a snapshot whose last entry was handed off already (its runner not yet over) goes on with the first new
        table."""
        tables = tuple(tables)
        with self._lock:
            self._tables = tables
            progress = self._progress
            if progress is not None:
                self._progress = attrs.evolve(progress, tables=tables)
            else:
                self._progress = SnapshotCursor(tables, first_new, None, 0)

    def handed_past(self, position: tuple[int, int]) -> bool:
        """Whether the stream has handed off everything before ``position`` (a :func:`position_key`): its last
        boundary or heartbeat lies there or later."""
        handed = self._handed
        return handed is not None and position <= handed

    def reading(self) -> frozenset[str]:
        """The tables (``db.table``) the snapshot in the stream has not read all of: those of the progress entries
        handed off now carry, from its table on (a table being read included)."""
        progress = self._progress
        return frozenset() if progress is None else frozenset(progress.tables[progress.table :])

    @property
    def stream_ended(self) -> bool:
        """The snapshot that ends the stream has handed off its last entry: the parser hands off nothing more."""
        return self._stream_ended

    # -- the parser thread: before and after each hand-off -------------------------------------------------------

    def tag(self, entries: list[Entry]) -> list[Entry]:
        """``entries`` carrying the unfinished snapshot's progress (the same list when there is none); a partial
        UPDATE of a table it still reads also carries :data:`~canal.parse.heal_marks.SNAPSHOT_PENDING`. Raises the
        :class:`~canal.errors.HealError` of a heal that failed (:meth:`fail`): nothing more is handed off."""
        failed = self._failed
        if failed is not None:
            raise failed
        progress = self._progress
        if progress is None:
            return entries
        reading = frozenset(progress.tables[progress.table :])
        out = []
        for e in entries:
            header, rc = e.header, e.row_change
            updates = rc is not None and rc.event_type is EventType.UPDATE
            if updates and rc is not None and qualified(header.schema, header.table) in reading:
                rows = rc.rows
                if isinstance(rows, Rows | ColumnarRows) and rows.absent("after"):
                    header = attrs.evolve(header, props={**header.props, SNAPSHOT_PENDING: "true"})
            out.append(Entry(header, e.entry_type, rc, e.thread_id, e.xid, e.anchor, e.rows_done, progress))
        return out

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

    def expect_mark(self, mark: str) -> None:
        """A watermark about to be written: the parser records where it sees it."""
        with self._lock:
            self._marks[mark] = None

    @property
    def expected_marks(self) -> int:
        """How many watermarks the parser still watches for."""
        return len(self._marks)

    def forget_marks(self) -> None:
        """A snapshot ended (done, failed or stopped): the marks it wrote that no chunk used -- those of a read that
        failed between them, or never reached the binlog -- are watched no more. (One snapshot runs at a time.)"""
        with self._lock:
            self._marks.clear()
            self._placed = None

    def observe_marks(self, event: RowsEvent) -> None:
        """A row event of the watermark table (the parser thread; it hands off none of them)."""
        marks = self._marks
        for row in event.rows:
            mark = mark_of(row.after)
            if mark is not None and mark in marks:
                with self._lock:
                    if mark in marks:
                        marks[mark] = EntryPosition(event.log_file, event.offset)

    def submit(
        self,
        window: ChunkWindow,
        chunk: Chunk,
        number: int,
        *,
        last: bool,
        progress: SnapshotCursor,
        layout_generation: int = 0,
    ) -> PendingChunk:
        pending = PendingChunk(window, chunk, number, last, progress, layout_generation)
        with self._lock:
            self._pending.append(pending)
        if self._hand_off_now is not None:
            self._hand_off_now()  # the parser may already be past its position, resting at a boundary
        return pending

    def abort(self, reason: str) -> None:
        """Drop the waiting chunks (their readers read them again) and forget what the windows recorded."""
        with self._lock:
            pending, self._pending = self._pending, []
            self._handed = None
            self._marks.clear()  # their positions name the old binlog; the chunks are read again with new ones
            self._placed = None
        for chunk in pending:
            chunk._finish(None, SnapshotAborted(f"snapshot chunk dropped: {reason}"))

    def after_hand_off(self, entries: Sequence[Entry], resume: LogPosition | None, put: Put) -> int:
        """Record the handed-off rows of watched tables; at a boundary, put the SNAPSHOT entries now due (how many)."""
        windows = self._windows
        last = entries[-1]
        for entry in entries:
            rc = entry.row_change
            if rc is not None and rc.is_ddl and entry.header.table:
                name = qualified(entry.header.schema, entry.header.table).lower()
                with self._lock:
                    self._ddl[name] = self._ddl.get(name, 0) + 1
            if rc is not None and entry.header.props and HEAL in entry.header.props:
                # a heal voids its tables' rows from here: a chunk read before it (its rows older than the point)
                # is read again, as after a DDL
                mark = heal_mark(entry.header.props)
                with self._lock:
                    for healed in () if mark is None else mark.tables:
                        name = healed.full_name.lower()
                        self._ddl[name] = self._ddl.get(name, 0) + 1
        if windows:
            for entry in entries:
                rc = entry.row_change
                if rc is None or entry.entry_type is not EntryType.ROWDATA or rc.is_ddl:
                    continue
                h = entry.header
                window = windows.get((h.schema, h.table))
                if window is not None:
                    at = position_key(h.log_file, h.log_offset)
                    keeps = _keeps_key(rc, window.key_indexes)
                    for row in rc.rows:
                        before, after = row.before, row.after
                        if keeps is not None and before is not None and after is not None and keeps(before, after):
                            window.observe_partial(before, after, at)  # a partial update: no whole state
                        else:
                            window.observe((before, after), at)
        if last.entry_type is not EntryType.HEARTBEAT and not last.is_boundary:
            return 0
        return self.due(last, resume, put)

    def due(self, last: Entry, resume: LogPosition | None, put: Put) -> int:
        """Put the SNAPSHOT entries of the chunks the stream has reached, placed after ``last``, the boundary (or
        heartbeat) the parser rests at (called with the parser's hand-off lock held); how many were put. The chunks
        count as joined once ``put`` returned; if it raises, they are dropped (read again) and the error propagates."""
        h = last.header
        if h.log_file:
            end = h.log_offset + h.event_length if last.entry_type is not EntryType.HEARTBEAT else h.log_offset
            self._handed = position_key(h.log_file, end)
        if not self._pending or self._handed is None:
            return 0
        due: list[PendingChunk] = []
        stale: list[PendingChunk] = []  # read under a layout a DDL the stream handed off since has changed
        failed: list[tuple[PendingChunk, MarkedRead]] = []
        with self._lock:
            for pending in list(self._pending):
                if pending.due_at is None and not self._place(pending):
                    read = pending.chunk.position
                    assert isinstance(read, MarkedRead)
                    if entry_position_key(read.written_by) <= self._handed:
                        failed.append((pending, read))  # the parser passed the binlog's end after the marks
                        self._pending.remove(pending)
                    continue
                assert pending.due_at is not None
                if entry_position_key(pending.due_at) <= self._handed:
                    self._pending.remove(pending)
                    read_under = pending.chunk.table
                    name = qualified(read_under.schema, read_under.table).lower()
                    if self._ddl.get(name, 0) != pending.layout_generation:
                        stale.append(pending)
                    else:
                        due.append(pending)
        for pending, read in failed:
            table = self.watermark_table or ("?", "?")
            pending._finish(
                None,
                SnapshotError(
                    f"the snapshot's watermarks in {'.'.join(table)} did not reach the binlog this destination reads "
                    f"(it passed {read.written_by} without them): is the table excluded from the "
                    "binlog (binlog_ignore_db / binlog_do_db, or writes without sql_log_bin)?"
                ),
            )
        for pending in stale:
            pending._finish(None, LayoutChanged(f"a DDL of {pending.chunk.table.full_name} came before its place"))
        if not due:
            return 0
        out: list[Entry] = []
        joined: list[tuple[PendingChunk, int]] = []
        with self._lock:
            progress, tables = self._progress, self._tables or None  # the list a heal may still make longer
        for pending in due:
            entries_of_chunk, emitted, progress = snapshot_entries(pending, h, resume, tables)
            out.extend(entries_of_chunk)
            joined.append((pending, emitted))
        if out:
            try:
                put(out)
            except BaseException as exc:
                dropped = SnapshotAborted(f"snapshot chunk dropped: the stream did not take it ({exc})")
                for pending, _emitted in joined:
                    pending._finish(None, dropped)
                raise
        # in the store now: the entries after them carry the progress past them, and their readers go on
        with self._lock:
            if tables is not None and self._tables != tables:  # a heal made the list longer meanwhile
                progress = _rebased(progress, self._tables, len(tables))
            self._progress = progress
            if progress is None and self._end_stream:
                self._stream_ended = True
        for pending, emitted in joined:
            pending._finish(emitted)
        return len(out)

    def _place(self, pending: PendingChunk) -> bool:
        """Give a chunk read between watermarks its place once the parser has seen both (lock held)."""
        read = pending.chunk.position
        assert isinstance(read, MarkedRead)
        placed = self._placed
        if placed is not None and placed[0] == read:
            pending.lower, pending.due_at = placed[1], placed[2]
            return True
        low, high = self._marks.get(read.low), self._marks.get(read.high)
        if low is None or high is None:
            return False
        pending.lower, pending.due_at = low, high
        del self._marks[read.low], self._marks[read.high]
        self._placed = (read, low, high)
        return True


def _rebased(progress: SnapshotCursor | None, tables: tuple[str, ...], first_new: int) -> SnapshotCursor | None:
    """``progress``, computed with the snapshot's list before a heal made it ``tables`` (more appended from
    ``first_new``): on the longer list, and not ended while a table of it is left."""
    if progress is None:
        return SnapshotCursor(tables, first_new, None, 0)
    return attrs.evolve(progress, tables=tables)


def _keeps_key(rc: RowChange, keys: Sequence[int]) -> Callable[[Sequence[Any], Sequence[Any]], bool] | None:
    """For the rows of an UPDATE whose after images are partial (``binlog_row_image`` MINIMAL / NOBLOB) on a table
    with a key: whether a row's update kept its key (its after image carries no key column, or the same values).
    None for any other change: its rows are whole states."""
    rows = rc.rows
    if rc.event_type is not EventType.UPDATE or not keys or not isinstance(rows, Rows | ColumnarRows):
        return None
    if not rows.absent("after"):
        return None

    def keeps(before: Sequence[Any], after: Sequence[Any]) -> bool:
        return all(after[i] is ABSENT or after[i] == before[i] for i in keys)

    return keeps


def snapshot_entries(
    pending: PendingChunk, at: Header, resume: LogPosition | None, tables: tuple[str, ...] | None = None
) -> tuple[list[Entry], int, SnapshotCursor | None]:
    """The SNAPSHOT entries of a waiting chunk placed after the boundary whose header is ``at``, the number of rows
    they hold, and the snapshot's progress after them. ``tables``: the snapshot's tables now, when a heal made the
    list longer than the one the chunk was read with (its progress is rebased onto it).

    The chunk is cut into parts of ``ROWS_PER_ENTRY`` rows as read; each part loses the rows the stream overtook
    (:meth:`ChunkWindow.reconcile`) and its entry's progress names the key of the part's last row *read* (a dropped
    row was already delivered by the binlog, before this boundary). A part left empty is not emitted (its progress
    passes to the next one), except the last part of a table's last chunk, which says the table is done.
    """
    chunk = pending.chunk
    table = chunk.table
    now = int(time.time() * 1000)
    anchor: EntryPosition | None = None if resume is None else resume.position
    rows_done = 0 if resume is None else resume.rows_done
    base = pending.progress
    if tables is not None and tables != base.tables:
        base = attrs.evolve(base, tables=tables)
    done_rows = base.rows
    entries: list[Entry] = []
    emitted = 0
    n_read = len(chunk.rows)
    starts = list(range(0, n_read, ROWS_PER_ENTRY)) or [0]
    progress: SnapshotCursor | None = base
    for n, start in enumerate(starts, 1):
        end = min(start + ROWS_PER_ENTRY, n_read)
        assert pending.lower is not None  # placed before it is due
        part = pending.window.reconcile(chunk.rows[start:end], pending.lower)
        final = n == len(starts)
        table_done = pending.last and final
        done_rows += len(part)
        emitted += len(part)
        if table_done:
            following = base.table + 1
            progress = SnapshotCursor(base.tables, following, None, done_rows) if following < len(base.tables) else None
        else:
            after = chunk.keys[end - 1] if chunk.keys is not None and end > 0 else None
            progress = SnapshotCursor(base.tables, base.table, after, done_rows, base.key)
        if not part and not table_done:
            continue
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
                "snapshot.position": str(pending.due_at),
                "snapshot.table_done": "true" if table_done else "false",
                "snapshot.table_index": str(base.table),
            },
        )
        change = RowChange(
            EventType.SNAPSHOT,
            Rows(table, None, list(map(tuple, part))),  # tuple() of a tuple is that tuple: no copy
            table=table,
        )
        entries.append(Entry(header, EntryType.ROWDATA, change, anchor=anchor, rows_done=rows_done, snapshot=progress))
    return entries, emitted, progress
