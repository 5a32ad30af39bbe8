"""The window reconciliation against a model: random interleavings of writes, the parser handing transactions off,
chunk windows opening, chunk reads at a snapshot position and chunk emissions; a consumer that applies binlog rows
and upserts the emitted chunk rows ends equal to the source."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from canal.position import EntryPosition
from canal.snapshot.window import ChunkWindow, position_key

KEYS = 6
FILE = "mysql-bin.000001"

# one binlog change: (before key or None, after key or None, after value)
Change = tuple[int | None, int | None, int]


def apply_write(source: dict[int, int], key: int, kind: int, value: int) -> Change | None:
    """One random write applied to ``source``: the change it makes (None when it makes none)."""
    if kind == 0:  # insert or update in place
        change: Change = (key if key in source else None, key, value)
        source[key] = value
    elif kind == 1 and key in source:  # delete
        change = (key, None, 0)
        del source[key]
    elif key in source:  # move the row to another key (an update of the primary key)
        target = (key + 1 + value) % KEYS
        if target in source:
            return None
        change = (key, target, source.pop(key))
        source[target] = change[2]
    else:
        return None
    return change


# the rows there before the stream starts, and the chunks' key ranges ([bounds[i], bounds[i + 1]))
INITIAL_ROWS = st.dictionaries(st.integers(0, KEYS - 1), st.integers(100, 199))
CHUNK_BOUNDS = st.lists(st.integers(1, KEYS - 1), unique=True, max_size=3).map(lambda cuts: [0, *sorted(cuts), KEYS])
WRITE = st.tuples(st.just("write"), st.integers(0, KEYS - 1), st.integers(0, 2), st.integers(0, 99))


class Model:
    def __init__(self, initial: dict[int, int], bounds: list[int]) -> None:
        self.source = dict(initial)  # rows before the stream's start: only the snapshot brings them
        self.binlog: list[list[Change]] = []
        self.handed = 0
        self.consumer: dict[int, int] = {}
        # chunks partition the keys: [bounds[i], bounds[i + 1])
        self.ranges = list(itertools.pairwise(bounds))
        self.phase = 0  # 0: no chunk in flight, 1: window open, 2: read, waiting for the parser
        self.window: ChunkWindow | None = None
        self.rows: list[tuple[int, int]] = []
        self.snapshot_at = EntryPosition(FILE, 0)
        self.emitted_stale = False

    def write(self, key: int, kind: int, value: int) -> None:
        change = apply_write(self.source, key, kind, value)
        if change is not None:
            self.binlog.append([change])

    def advance(self) -> None:
        if self.handed >= len(self.binlog):
            return
        at = position_key(FILE, self.handed)
        for before, after, value in self.binlog[self.handed]:
            if before is not None:
                self.consumer.pop(before, None)
            if after is not None:
                self.consumer[after] = value
            if self.window is not None:
                self.window.observe(
                    [(before,) if before is not None else None, (after,) if after is not None else None], at
                )
        self.handed += 1
        self.boundary()

    def boundary(self) -> None:
        """A transaction boundary (after a hand-off, or a heartbeat): a read chunk the parser reached is emitted."""
        if self.phase != 2 or self.window is None:
            return
        assert self.snapshot_at.position is not None
        if self.handed < self.snapshot_at.position:
            return
        for key, value in self.window.reconcile(self.rows, self.snapshot_at):
            self.consumer[key] = value
        self.phase, self.window, self.rows = 0, None, []
        self.ranges.pop(0)

    def heartbeat(self) -> None:
        self.boundary()

    def chunk(self) -> None:
        self.chunk_step()

    def chunk_step(self) -> None:
        if self.phase == 0 and self.ranges:
            self.window = ChunkWindow("s", "t", [0])
            self.phase = 1
        elif self.phase == 1:
            lo, hi = self.ranges[0]
            self.rows = sorted((k, v) for k, v in self.source.items() if lo <= k < hi)
            self.snapshot_at = EntryPosition(FILE, len(self.binlog))  # every transaction written so far is visible
            self.phase = 2  # emitted at the parser's next boundary at or after the snapshot position

    def drain(self) -> None:
        for _ in range(10 * (len(self.ranges) + 1)):
            while self.handed < len(self.binlog):
                self.advance()
            self.chunk_step()
            self.boundary()
        assert not self.ranges


def play(model: Any, steps: list[tuple[Any, ...]]) -> None:
    """Each step calls the model's method of its name with its arguments; then the model drains."""
    for name, *args in steps:
        getattr(model, name)(*args)
    model.drain()


actions = st.lists(
    st.one_of(
        WRITE,
        st.tuples(st.just("advance")),
        st.tuples(st.just("chunk")),
        st.tuples(st.just("heartbeat")),
    ),
    max_size=60,
)


@settings(max_examples=400, deadline=None)
@given(INITIAL_ROWS, CHUNK_BOUNDS, actions)
def test_snapshot_plus_binlog_ends_equal_to_the_source(
    initial: dict[int, int], bounds: list[int], steps: list[tuple[Any, ...]]
) -> None:
    model = Model(initial, bounds)
    play(model, steps)
    assert model.consumer == model.source


def test_a_row_deleted_after_the_snapshot_position_is_not_brought_back() -> None:
    model = Model({1: 100}, [0, KEYS])
    model.chunk_step()  # the window opens
    model.chunk_step()  # the chunk is read: key 1 at its snapshot position
    model.write(1, 1, 0)  # deleted after it
    assert model.phase == 2
    model.advance()  # the delete is handed off, then the chunk: its row 1 must be dropped
    assert model.consumer == model.source == {}


def test_rows_changed_before_the_snapshot_position_are_kept() -> None:
    window = ChunkWindow("s", "t", [0])
    window.observe([(1,), (1,)], position_key(FILE, 10))
    kept = window.reconcile([(1, "x"), (2, "y")], EntryPosition(FILE, 11))
    assert kept == [(1, "x"), (2, "y")]
    assert window.reconcile([(1, "x"), (2, "y")], EntryPosition(FILE, 10)) == [(2, "y")]
    # a later file is later whatever its offsets
    window.observe([(2,)], position_key("mysql-bin.000002", 4))
    assert window.reconcile([(2, "y")], EntryPosition(FILE, 99_999)) == []


# -- the SNAPSHOT entries of a chunk and the progress they carry ------------------------------------------------------

TABLES = ("d.a", "d.b", "d.c")


@settings(max_examples=300)
@given(
    n_rows=st.integers(0, 30),
    changed=st.sets(st.integers(0, 40)),
    last=st.booleans(),
    table=st.integers(0, len(TABLES) - 1),
    part=st.integers(1, 7),
)
def test_snapshot_entries_carry_the_progress_of_what_they_hold(
    n_rows: int, changed: set[int], last: bool, table: int, part: int
) -> None:
    """Against a model: the chunk's rows minus the overtaken keys, in order, in parts of ``part`` read rows; each
    entry's progress names the last key read up to it; the table's last entry moves on to the next table (or ends
    the snapshot)."""
    from unittest.mock import patch

    import canal.snapshot.merge as merge
    from canal.position import SnapshotCursor
    from canal.protocol import ColumnMeta, EventType, Header, TableSchema
    from canal.snapshot.reader import Chunk

    if not last:
        n_rows = max(n_rows, 1)  # a chunk that is not the table's last is full
    db, name = TABLES[table].split(".")
    schema = TableSchema(db, name, (ColumnMeta("id", is_key=True), ColumnMeta("v")))
    rows = tuple((i, f"v{i}") for i in range(n_rows))
    keys = tuple((str(i),) for i in range(n_rows))
    at = EntryPosition(FILE, 100)
    chunk = Chunk(schema, at, rows, None if last else keys[-1], keys)
    window = ChunkWindow(db, name, (0,))
    for key in changed:
        window.observe([(key, "new")], position_key(FILE, 150))  # overtaken by the stream after the read
    base = SnapshotCursor(TABLES, table, None, 5)
    pending = merge.PendingChunk(window, chunk, 3, last, base)
    with patch.object(merge, "ROWS_PER_ENTRY", part):
        entries, emitted, progress = merge.snapshot_entries(pending, Header(FILE, 200), None)

    kept = [r for r in rows if r[0] not in changed]
    got = [tuple(row.after) for e in entries for row in e.iter_rows()]
    assert got == kept and emitted == len(kept)
    assert all(e.header.event_type is EventType.SNAPSHOT and e.header.log_offset == 200 for e in entries)
    if last:
        following = SnapshotCursor(TABLES, table + 1, None, 5 + len(kept)) if table + 1 < len(TABLES) else None
        assert progress == following and entries and entries[-1].snapshot == following
        assert entries[-1].header.props["snapshot.table_done"] == "true"
    else:
        assert progress == SnapshotCursor(TABLES, table, keys[-1], 5 + len(kept))
        final_part = rows[(n_rows - 1) // part * part :]
        if any(r in kept for r in final_part):  # else that part emitted nothing: the progress moves on regardless
            assert entries[-1].snapshot == progress
    held = 5
    for entry in entries[:-1] if last else entries:
        held += len(entry.row_change.rows) if entry.row_change else 0
        assert entry.snapshot is not None and entry.snapshot.rows == held
        assert entry.snapshot.after is not None
        last_key = int(entry.snapshot.after[0])
        # everything up to the named key is in this entry or before it; nothing after it is
        assert all(r[0] <= last_key for r in got[: held - 5]) and all(r[0] > last_key for r in got[held - 5 :])
