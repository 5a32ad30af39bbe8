"""When a snapshot chunk counts as joined: once its entries are in the stream's store, never before; and where: a chunk
read just after a binlog rotation joins at once on a server that writes nothing more.

A snapshot's runner goes on -- and says it is done after its last chunk -- when the chunk has joined the stream;
consumers that wait until a snapshot's rows were all handed over (``run_batches``' ``RunStats.reached``, the Spark
source's Trigger.AvailableNow) take a runner that stopped for "every chunk is in the store". The parser's thread used
to count the chunk as joined before it put its entries, so a consumer could find the store drained in between (or
for as long as a full store made the put wait). A put that fails leaves the chunk to be read again and the snapshot's
progress where it was: no later entry may carry a progress past rows the stream never got.

After a rotation the parser rests at the new file's start, but a snapshot read there is placed after the file's
header events (format description, GTID list, MariaDB's Binlog_checkpoint), which make no entry: the chunk waited
for the next transaction or server heartbeat (up to the detecting interval), where a chunk read on an idle server
otherwise joins at once. The parser now rests after those events.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from test_parser_helpers import MemoryPositions

from canal.config import DetectingConfig, InstanceConfig, MasterConfig, RetryConfig
from canal.instance import Instance
from canal.parse.parser import EventParser
from canal.position import EntryPosition, LogIdentity, SnapshotCursor
from canal.protocol import ColumnMeta, Entry, EntryType, EventType, Header, TableSchema
from canal.snapshot.merge import SnapshotAborted, SnapshotMerge
from canal.snapshot.reader import Chunk
from canal.testing import FakeMysql
from canal.testing.plugin import MariaDBDatabase

PLAN = SnapshotCursor(("shop.t",))
# server heartbeats every 20 s at most: a chunk that waited for one would time out the tests' waits
SLOW_HEARTBEATS: dict[str, Any] = {
    "detecting": DetectingConfig(interval_s=60),
    "retry": RetryConfig(heartbeat_period_s=20, read_timeout_s=60),
}
JOIN_S = 8.0


class GatedSink:
    """Keeps what the parser hands off; a put of SNAPSHOT entries waits at the gate (a store with no room)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.entries: list[Entry] = []
        self.putting = threading.Event()
        self.gate = threading.Event()

    def __call__(self, entries: list[Entry], origin: LogIdentity) -> None:
        if any(e.header.event_type is EventType.SNAPSHOT for e in entries):
            self.putting.set()
            assert self.gate.wait(10)
        with self.cond:
            self.entries.extend(entries)
            self.cond.notify_all()

    def wait_ends(self, count: int) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: sum(e.is_boundary for e in self.entries) >= count, 10)


def test_a_chunk_joins_once_the_parser_has_put_its_entries(fake_mysql: FakeMysql) -> None:
    fake_mysql.execute("CREATE TABLE shop.t (id INT PRIMARY KEY, v INT)")
    fake_mysql.insert("shop.t", {"id": 1, "v": 1})
    config = InstanceConfig(
        destination="join", master=MasterConfig(address=fake_mysql.address, journal_name="mysql-bin.000001", position=4)
    )
    sink = GatedSink()
    parser = EventParser("join", config, lambda master: fake_mysql.source(), sink, MemoryPositions())
    merge = SnapshotMerge()
    merge.begin(PLAN)
    parser.merge = merge
    with parser:
        sink.wait_ends(2)  # the CREATE and the first insert: the parser rests after them
        fake_mysql.stall()  # the parser reads nothing more for now
        fake_mysql.insert("shop.t", {"id": 2, "v": 2})
        schema = fake_mysql.table("shop.t")
        window = merge.open_window("shop", "t", schema.key_indexes)
        # read after the second insert: it joins at that transaction's end, which the parser has yet to read
        chunk = Chunk(schema, EntryPosition(fake_mysql.current_file, fake_mysql.end), ((1, 1), (2, 2)), None)
        generation = merge.layout_generation("shop", "t")  # the CREATE: the layout the chunk was read under
        pending = merge.submit(window, chunk, 0, last=True, progress=PLAN, layout_generation=generation)
        with pytest.raises(TimeoutError):
            pending.wait(0)  # the parser rests before its place
        fake_mysql.unstall()
        assert sink.putting.wait(10)  # the parser thread puts the chunk's entries; the store has no room yet
        with pytest.raises(TimeoutError):
            pending.wait(0.2)  # not joined while its entries are not in the store (the runner waits here)
        assert merge.progress == PLAN  # and no entry handed off meanwhile would carry a progress past it
        sink.gate.set()
        assert pending.wait(10) == 2
    assert merge.progress is None  # the snapshot's last entry is in the store
    kinds = [e.header.event_type for e in sink.entries if e.entry_type is EntryType.ROWDATA]
    assert kinds[-2:] == [EventType.INSERT, EventType.SNAPSHOT]


TABLE = TableSchema("s", "t", (ColumnMeta("id", is_key=True), ColumnMeta("v")))
FILE = "mysql-bin.000001"


def _end(offset: int) -> Entry:
    return Entry(Header(FILE, offset, event_length=5), EntryType.TRANSACTIONEND, xid=offset)


def test_a_put_that_fails_leaves_the_chunk_to_be_read_again_and_the_progress_where_it_was() -> None:
    merge = SnapshotMerge()
    merge.begin(PLAN)
    merge.after_hand_off([_end(100)], None, lambda entries: None)
    window = merge.open_window("s", "t", [0])
    chunk = Chunk(TABLE, EntryPosition(FILE, 200), ((1, 1),), None, (("1",),))
    pending = merge.submit(window, chunk, 0, last=True, progress=PLAN)

    def store_closed(entries: list[Entry]) -> Any:
        raise RuntimeError("the store was closed")

    with pytest.raises(RuntimeError, match="closed"):
        merge.after_hand_off([_end(200)], None, store_closed)
    with pytest.raises(SnapshotAborted, match="did not take it"):
        pending.wait(0)
    assert merge.progress == PLAN  # entries handed off next carry the progress before the chunk
    assert merge.tag([_end(300)])[0].snapshot == PLAN
    # read again, it joins at the next boundary
    again = merge.submit(window, chunk, 0, last=True, progress=PLAN)
    put: list[Entry] = []
    assert merge.after_hand_off([_end(300)], None, put.extend) == 1
    assert again.wait(0) == 1 and merge.progress is None
    assert [e.header.event_type for e in put] == [EventType.SNAPSHOT]


def test_a_chunk_read_just_after_a_rotation_joins_at_once(fake_mysql: FakeMysql) -> None:
    fake_mysql.execute("CREATE TABLE shop.t (id INT PRIMARY KEY, v INT)")
    fake_mysql.insert("shop.t", {"id": 1, "v": 1})
    config = InstanceConfig(
        destination="join",
        master=MasterConfig(address=fake_mysql.address, journal_name="mysql-bin.000001", position=4),
        **SLOW_HEARTBEATS,
    )
    sink = GatedSink()
    sink.gate.set()
    parser = EventParser("join", config, lambda master: fake_mysql.source(), sink, MemoryPositions())
    merge = SnapshotMerge()
    merge.begin(PLAN)
    parser.merge = merge
    with parser:
        sink.wait_ends(2)
        following = fake_mysql.rotate()
        with sink.cond:  # the parser followed the rotation: it rests at the new file's start
            assert sink.cond.wait_for(lambda: any(e.header.log_file == following for e in sink.entries), 10)
        assert fake_mysql.end > 4  # the new file's header events
        schema = fake_mysql.table("shop.t")
        window = merge.open_window("shop", "t", schema.key_indexes)
        chunk = Chunk(schema, EntryPosition(following, fake_mysql.end), ((1, 1),), None)
        generation = merge.layout_generation("shop", "t")
        pending = merge.submit(window, chunk, 0, last=True, progress=PLAN, layout_generation=generation)
        assert pending.wait(JOIN_S) == 1  # no transaction nor heartbeat came since
    snapshot = [e for e in sink.entries if e.header.event_type is EventType.SNAPSHOT]
    assert [(e.header.log_file, e.header.log_offset) for e in snapshot] == [(following, fake_mysql.end)]


@pytest.mark.integration
def test_a_snapshot_read_just_after_flush_binary_logs_joins_at_once(mariadb: MariaDBDatabase) -> None:
    db = mariadb.database
    mariadb.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY)")
    mariadb.execute(f"INSERT INTO `{db}`.t VALUES (1), (2), (3)")
    config = InstanceConfig(destination="join", master=mariadb.master(), filter_regex=rf"{db}\.t", **SLOW_HEARTBEATS)
    with Instance(config) as inst:
        mariadb.execute("FLUSH BINARY LOGS")  # and nothing written after it
        runner = inst.snapshot([f"{db}.t"], chunk_rows=2)
        assert runner.wait(JOIN_S).rows_emitted == 3  # two chunks, each placed after the new file's header events
