"""DBLog's watermarks (``canal.snapshot.marks``) through the real :class:`SnapshotMerge`, against a model of a server
that writes a transaction to the binlog before InnoDB makes it visible (MySQL): random interleavings of writes,
commits becoming visible (in binlog order), the parser handing transactions off, and a chunk's steps (window,
low mark, read view, high mark). A consumer that applies the binlog rows and upserts the SNAPSHOT rows ends equal to
the source, and each chunk's keys hold, when it joins the stream, exactly what the binlog handed off up to there
says (no row steps back)."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from test_snapshot_window import CHUNK_BOUNDS, INITIAL_ROWS, WRITE, Change, apply_write, play

from canal.parse.events import RowsEvent
from canal.position import EntryPosition, SnapshotCursor
from canal.protocol import ColumnMeta, Entry, EntryType, EventType, Header, RowChange, RowData, TableSchema
from canal.snapshot.marks import MarkedRead
from canal.snapshot.merge import SnapshotMerge
from canal.snapshot.reader import Chunk

FILE = "mysql-bin.000001"
TABLE = TableSchema("s", "t", (ColumnMeta("id", is_key=True), ColumnMeta("v")))
MARKS = TableSchema("s", "marks", (ColumnMeta("destination", is_key=True), ColumnMeta("mark")))


class Model:
    def __init__(self, initial: dict[int, int], bounds: list[int]) -> None:
        self.initial = dict(initial)
        self.source = dict(initial)  # the table after every transaction in the binlog
        self.binlog: list[list[Change] | str] = []  # a transaction's changes, or a watermark
        self.visible = 0  # transactions InnoDB shows a new read view: a prefix of the binlog
        self.handed = 0
        self.consumer: dict[int, int] = {}
        self.ranges = list(itertools.pairwise(bounds))
        self.merge = SnapshotMerge(("s", "marks"))
        self.merge.begin(SnapshotCursor(("s.t",)))
        self.phase = 0  # 0: idle, 1: window open, 2: low mark written, 3: read view made
        self.marks = 0
        self.low = ""
        self.rows: tuple[tuple[int, int], ...] = ()
        self.pending: Any = None
        self.window: Any = None

    # -- the server ------------------------------------------------------------------------------------------------

    def write(self, key: int, kind: int, value: int) -> None:
        change = apply_write(self.source, key, kind, value)
        if change is not None:
            self.binlog.append([change])

    def commit(self) -> None:
        """The oldest transaction written to the binlog but not yet visible becomes visible."""
        self.visible = min(self.visible + 1, len(self.binlog))

    def state_at(self, n: int) -> dict[int, int]:
        state = dict(self.initial)
        for txn in self.binlog[:n]:
            if isinstance(txn, str):
                continue
            for before, after, value in txn:
                if before is not None:
                    state.pop(before, None)
                if after is not None:
                    state[after] = value
        return state

    def write_mark(self) -> str:
        self.marks += 1
        mark = f"{self.marks:032x}"
        self.merge.expect_mark(mark)
        self.binlog.append(mark)
        self.visible = len(self.binlog)  # its commit returns once it is visible, and so is all before it
        return mark

    # -- the parser ------------------------------------------------------------------------------------------------

    def advance(self) -> None:
        if self.handed >= len(self.binlog):
            return
        index = self.handed
        txn = self.binlog[index]
        self.handed += 1
        entries: list[Entry] = []
        if isinstance(txn, str):
            self.merge.observe_marks(
                RowsEvent(
                    log_file=FILE,
                    offset=10 * index,
                    next_offset=10 * index + 5,
                    timestamp=0,
                    server_id=1,
                    event_type=EventType.INSERT,
                    table_id=2,
                    table=MARKS,
                    rows=(RowData(MARKS, None, ("d", txn)),),
                )
            )
        else:
            rows = []
            for before, after, value in txn:
                old = None if before is None else (before, self.consumer.get(before, -1))
                rows.append(RowData(TABLE, old, None if after is None else (after, value)))
                if before is not None:
                    self.consumer.pop(before, None)
                if after is not None:
                    self.consumer[after] = value
            first = rows[0]
            kind = (
                EventType.UPDATE
                if first.before and first.after
                else EventType.DELETE
                if first.before
                else EventType.INSERT
            )
            header = Header(FILE, 10 * index, schema="s", table="t", event_type=kind, event_length=5)
            entries.append(Entry(header, EntryType.ROWDATA, RowChange(kind, tuple(rows), table=TABLE)))
        entries.append(Entry(Header(FILE, 10 * index + 5, event_length=5), EntryType.TRANSACTIONEND, xid=index))
        self.merge.after_hand_off(entries, None, self.apply)
        self.done_chunk()  # a chunk counts as joined once its entries are put

    def heartbeat(self) -> None:
        if self.handed:
            last = Entry(Header(FILE, 10 * (self.handed - 1) + 5, event_length=5), EntryType.TRANSACTIONEND)
            self.merge.due(last, None, self.apply)
            self.done_chunk()

    def apply(self, entries: list[Entry]) -> None:
        for entry in entries:
            assert entry.header.event_type is EventType.SNAPSHOT
            for row in entry.iter_rows():
                key, value = row.after
                self.consumer[key] = value

    def done_chunk(self) -> None:
        if self.pending is not None and self.pending.emitted is not None:
            self.pending, self.phase = None, 0
            lo, hi = self.ranges.pop(0)
            # exact at its place: the chunk's keys now hold what the binlog handed off so far says they hold
            now = self.state_at(self.handed)
            assert {k: v for k, v in self.consumer.items() if lo <= k < hi} == {
                k: v for k, v in now.items() if lo <= k < hi
            }

    # -- the snapshot reader ---------------------------------------------------------------------------------------

    def chunk(self) -> None:
        self.chunk_step()

    def chunk_step(self) -> None:
        if self.phase == 0 and self.ranges and self.pending is None:
            self.window = self.merge.open_window("s", "t", [0])
            self.phase = 1
        elif self.phase == 1:
            self.low = self.write_mark()
            self.phase = 2
        elif self.phase == 2:
            lo, hi = self.ranges[0]
            view = self.state_at(self.visible)  # START TRANSACTION WITH CONSISTENT SNAPSHOT
            self.rows = tuple(sorted((k, v) for k, v in view.items() if lo <= k < hi))
            self.phase = 3
        elif self.phase == 3 and self.pending is None:
            high = self.write_mark()
            read = MarkedRead(self.low, high, EntryPosition(FILE, 10 * len(self.binlog)))
            chunk = Chunk(TABLE, read, self.rows, None, tuple((str(k),) for k, _ in self.rows))
            self.pending = self.merge.submit(self.window, chunk, 0, last=True, progress=SnapshotCursor(("s.t",)))
            self.heartbeat()

    def drain(self) -> None:
        for _ in range(10 * (len(self.ranges) + 1)):
            while self.handed < len(self.binlog):
                self.advance()
            self.visible = len(self.binlog)
            self.chunk_step()
            self.heartbeat()
        assert not self.ranges


actions = st.lists(
    st.one_of(
        WRITE,
        st.tuples(st.just("commit")),
        st.tuples(st.just("advance")),
        st.tuples(st.just("chunk")),
        st.tuples(st.just("heartbeat")),
    ),
    max_size=80,
)


@settings(max_examples=400, deadline=None)
@given(INITIAL_ROWS, CHUNK_BOUNDS, actions)
def test_chunks_between_watermarks_plus_binlog_end_equal_to_the_source(
    initial: dict[int, int], bounds: list[int], steps: list[tuple[Any, ...]]
) -> None:
    model = Model(initial, bounds)
    play(model, steps)
    assert model.consumer == model.source
