"""The window reconciliation against a model: random interleavings of writes, the parser handing transactions off,
chunk windows opening, chunk reads at a snapshot position and chunk emissions; a consumer that applies binlog rows
and upserts the emitted chunk rows ends equal to the source."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from canal.position import EntryPosition
from canal.protocol import ABSENT
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


# -- partial row images, key moves and rows read again (a heal's read under MINIMAL writers) --------------------------

# a row: (key, a, b); ``v`` is a VIRTUAL column computed from ``a`` (2 * a): SELECT shows it, a partial image never
# carries it. The copy (a heal voided it) holds (a, b, v) by key.
Row = tuple[int, int, int]
PARTIAL_KEYS = 8
PARTIAL_WRITE = st.tuples(
    st.just("write"),
    st.sampled_from(["insert", "delete", "set_a", "set_b", "move", "whole"]),
    st.integers(0, PARTIAL_KEYS - 1),
    st.integers(0, 99),
)


class PartialModel:
    """The capture and a copy kept from its entries while a heal reads the table in chunks and writers change it with
    whole images and MINIMAL ones (an update of one column; a key moved). The capture's rules under test: the window
    (:class:`ChunkWindow`: a chunk's row dropped where a whole change overtook it, a partial update's columns written
    over it) as the merge feeds it; ``SNAPSHOT_PENDING`` while a pass is left (the copy skips a partial update of a row
    it does not hold); and the rows read again (canal.parse.rereads) -- a partial key move while a pass is left, an
    update of what the VIRTUAL column is computed from -- in passes of their own, through windows of their own."""

    def __init__(self, initial: dict[int, tuple[int, int]], bounds: list[int]) -> None:
        self.source = dict(initial)
        # each change: (before image or None, after image or None), images (key, a, b) with ABSENT cells
        self.binlog: list[tuple[tuple[Any, ...] | None, tuple[Any, ...] | None]] = []
        self.handed = 0
        self.copy: dict[int, tuple[int, int, int]] = {}
        self.passes: list[list[tuple[int, int]] | set[int]] = [list(itertools.pairwise(bounds))]  # ranges, or keys
        self.window: ChunkWindow | None = None
        self.read_at: int | None = None  # a chunk read, waiting for the parser: its position
        self.rows: list[Row] = []
        self.phase = 0  # 0: nothing in flight, 1: window open, 2: read
        self.reread: set[int] = set()  # keys to read again, in the next pass

    @property
    def reading(self) -> bool:
        return bool(self.passes) or bool(self.reread)

    def write(self, kind: str, key: int, value: int) -> None:
        source = self.source
        if kind == "insert" and key not in source:
            source[key] = (value, -value)
            self.binlog.append((None, (key, *source[key])))
        elif kind == "delete" and key in source:
            self.binlog.append(((key, ABSENT, ABSENT), None))  # MINIMAL: the key only
            del source[key]
        elif kind in ("set_a", "set_b") and key in source:
            a, b = source[key]
            source[key] = (value, b) if kind == "set_a" else (a, value)
            after = (ABSENT, value, ABSENT) if kind == "set_a" else (ABSENT, ABSENT, value)
            self.binlog.append(((key, ABSENT, ABSENT), after))
        elif kind == "move" and key in source:
            target = (key + 1 + value) % PARTIAL_KEYS
            if target not in source:
                source[target] = source.pop(key)
                self.binlog.append(((key, ABSENT, ABSENT), (target, ABSENT, ABSENT)))
        elif kind == "whole" and key in source:
            old = (key, *source[key])
            source[key] = (value, value + 1)
            self.binlog.append((old, (key, *source[key])))

    def advance(self) -> None:
        """The parser converts, judges and hands off the next change, then the boundary after it."""
        if self.handed >= len(self.binlog):
            return
        before, after = self.binlog[self.handed]
        at = position_key(FILE, self.handed)
        partial = after is not None and ABSENT in after
        if partial and before is not None and after is not None:
            moved = after[0] is not ABSENT and after[0] != before[0]
            key = after[0] if after[0] is not ABSENT else before[0]
            if (moved and self.reading) or after[1] is not ABSENT:  # a key moved while read; v's base written
                self.reread.add(key)
        pending = self.reading  # the entry carries the progress of the passes asked for at it, its own included
        self._apply(before, after, pending)
        window = self.window
        if window is not None:
            if partial and before is not None and after is not None and after[0] in (ABSENT, before[0]):
                window.observe_partial(before, after, at)
            else:
                window.observe((before, after), at)
        self.handed += 1
        self.boundary()

    def _apply(self, before: tuple[Any, ...] | None, after: tuple[Any, ...] | None, pending: bool) -> None:
        copy = self.copy
        if after is None:
            assert before is not None
            copy.pop(before[0], None)
        elif before is None or ABSENT not in after:
            if before is not None:
                copy.pop(before[0], None)
            copy[after[0]] = (after[1], after[2], 2 * after[1])
        elif before[0] in copy:
            a, b, v = copy.pop(before[0])
            a, b = (a if after[1] is ABSENT else after[1]), (b if after[2] is ABSENT else after[2])
            copy[after[0] if after[0] is not ABSENT else before[0]] = (a, b, v)  # v as held: a partial image lacks it
        else:
            assert pending, f"a partial update of {before[0]}, a row the copy does not hold, outside a snapshot"

    def boundary(self) -> None:
        """A boundary (after a hand-off, or a heartbeat): a read chunk the parser reached joins the stream."""
        if self.phase != 2 or self.window is None or self.read_at is None or self.handed < self.read_at:
            return
        for key, a, b in self.window.reconcile(self.rows, EntryPosition(FILE, self.read_at)):
            self.copy[key] = (a, b, 2 * a)
        self.phase, self.window, self.rows, self.read_at = 0, None, [], None
        current = self.passes[0]
        if isinstance(current, list):
            current.pop(0)
            if current:
                return
        self.passes.pop(0)
        if not self.passes and self.reread:
            self.passes.append(self.reread)
            self.reread = set()

    def chunk_step(self) -> None:
        if self.phase == 0 and (self.passes or self.reread):
            if not self.passes:
                self.passes.append(self.reread)
                self.reread = set()
            self.window = ChunkWindow("s", "t", [0])
            self.phase = 1
        elif self.phase == 1:
            current = self.passes[0]
            if isinstance(current, list):
                lo, hi = current[0]
                chosen = [k for k in self.source if lo <= k < hi]
            else:  # a pass of rows read again (the keys asked for before it started)
                chosen = [k for k in self.source if k in current]
            self.rows = sorted((k, *self.source[k]) for k in chosen)
            self.read_at = len(self.binlog)
            self.phase = 2

    def drain(self) -> None:
        for _ in range(20 * (PARTIAL_KEYS + 2)):
            while self.handed < len(self.binlog):
                self.advance()
            self.chunk_step()
            self.boundary()
            if not self.reading and self.phase == 0:
                return
        raise AssertionError("the passes never ended")

    def selected(self) -> dict[int, tuple[int, int, int]]:
        return {k: (a, b, 2 * a) for k, (a, b) in self.source.items()}


partial_actions = st.lists(
    st.one_of(
        PARTIAL_WRITE, st.tuples(st.just("advance")), st.tuples(st.just("chunk")), st.tuples(st.just("boundary"))
    ),
    max_size=60,
)


def play_partial(model: PartialModel, steps: list[tuple[Any, ...]]) -> None:
    for name, *args in steps:
        if name == "write":
            model.write(*args)
        elif name == "advance":
            model.advance()
        elif name == "chunk":
            model.chunk_step()
        else:
            model.boundary()
    model.drain()


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.integers(0, PARTIAL_KEYS - 1), st.tuples(st.integers(0, 99), st.integers(0, 99))),
    st.lists(st.integers(1, PARTIAL_KEYS - 1), unique=True, max_size=3).map(
        lambda cuts: [0, *sorted(cuts), PARTIAL_KEYS]
    ),
    partial_actions,
)
def test_a_copy_under_partial_images_and_moved_keys_ends_equal_to_select(
    initial: dict[int, tuple[int, int]], bounds: list[int], steps: list[tuple[Any, ...]]
) -> None:
    model = PartialModel(initial, bounds)
    play_partial(model, steps)
    assert model.copy == model.selected()


def test_a_partial_key_move_into_rows_already_read_is_read_again() -> None:
    """The issue's case: the read passed key 0, a MINIMAL update moves key 6 (not read yet) to 0; the copy holds
    neither, skips the update, and the chunk of 6 no longer finds it -- only reading key 0 again brings the row."""
    model = PartialModel({0: (1, 1), 6: (5, 5)}, [0, 3, PARTIAL_KEYS])
    model.write("delete", 0, 0)
    model.advance()
    model.chunk_step()
    model.chunk_step()  # [0, 3) read: key 0 is gone
    model.advance()  # ... and the chunk joins: the copy holds nothing of [0, 3)
    model.write("move", 6, 1)  # 6 -> 0
    model.advance()
    assert model.reread == {0} and 0 not in model.copy
    model.drain()
    assert model.copy == model.selected() == {0: (5, 5, 10)}
