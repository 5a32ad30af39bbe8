"""The transaction buffer: whole transactions, ordered parts of big ones, restart positions after each hand-off."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_parser_helpers import CollectingSink, MemoryPositions, MiniMysql

from canal.errors import ParseError, RolledBackHandOffError
from canal.parse.convert import EntryConverter
from canal.parse.events import HeartbeatEvent
from canal.parse.transaction import TransactionBuffer
from canal.position import EntryPosition, LogIdentity, LogPosition
from canal.protocol import Entry, EntryType

IDENTITY = LogIdentity("fake://mini-m", 7)


def entries_of(db: MiniMysql) -> list[Entry]:
    conv = EntryConverter()
    conv.reset(EntryPosition("mysql-bin.000001", 4))
    return [e for e in map(conv.convert, db.all_events()) if e is not None]


def run(entries: list[Entry], size: int) -> tuple[CollectingSink, MemoryPositions, TransactionBuffer]:
    sink = CollectingSink()
    positions = MemoryPositions()
    buffer = TransactionBuffer("example", sink, positions, transaction_size=size, identity=IDENTITY)
    for entry in entries:
        buffer.add(entry)
    return sink, positions, buffer


def test_whole_transactions_are_handed_off_at_their_end() -> None:
    db = MiniMysql()
    db.transaction([("insert", "shop.orders", [(1, 1, "a")]), ("insert", "shop.orders", [(2, 1, "a")])])
    db.execute("CREATE TABLE shop.t (id INT)")
    entries = entries_of(db)
    sink, positions, buffer = run(entries, 1024)
    assert [len(b) for b in sink.batches] == [4, 1]
    assert sink.entries == entries
    end, ddl = entries[3], entries[4]
    assert positions.history == [
        LogPosition(IDENTITY, end.anchor or EntryPosition(), 0),
        LogPosition(IDENTITY, ddl.anchor or EntryPosition(), 0),
    ]
    assert buffer.last_position == positions.history[-1] and len(buffer) == 0


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 100])
def test_big_transactions_go_in_ordered_parts_with_rows_done(size: int) -> None:
    db = MiniMysql()
    db.transaction([("insert", "shop.orders", [(i, i, "x")]) for i in range(6)])  # BEGIN + 6 rows + END
    entries = entries_of(db)
    sink, positions, _ = run(entries, size)
    assert sink.entries == entries
    assert all(len(b) <= max(size, 2) for b in sink.batches)
    assert all(b[-1].entry_type is not EntryType.TRANSACTIONBEGIN for b in sink.batches)
    # after each part: the transaction's anchor and the rows handed so far; after the end: the end itself
    for batch, recorded in zip(sink.batches, positions.history, strict=True):
        last = batch[-1]
        assert recorded == LogPosition(IDENTITY, last.anchor or EntryPosition(), last.rows_done)
    assert positions.history[-1].rows_done == 0 and positions.history[-1].position.included
    if size < len(entries):
        assert any(p.rows_done > 0 for p in positions.history)


def test_a_failing_sink_records_nothing_and_keeps_the_entries() -> None:
    db = MiniMysql()
    db.transaction([("insert", "shop.orders", [(1, 1, "a")])])
    entries = entries_of(db)
    sink = CollectingSink()
    sink.fail_next = 1
    positions = MemoryPositions()
    buffer = TransactionBuffer("example", sink, positions, identity=IDENTITY)
    buffer.add(entries[0])
    buffer.add(entries[1])
    with pytest.raises(RuntimeError):
        buffer.add(entries[2])
    assert positions.history == [] and buffer.last_position is None and len(buffer) == 3
    buffer.clear()
    assert len(buffer) == 0


def test_heartbeats_go_alone_and_record_nothing() -> None:
    db = MiniMysql()
    db.transaction([("insert", "shop.orders", [(1, 1, "a")])])
    entries = entries_of(db)
    conv = EntryConverter()
    hb = conv.heartbeat(HeartbeatEvent(log_file="mysql-bin.000001", offset=9, next_offset=9, timestamp=0, server_id=1))
    sink, positions, _ = run([*entries, hb], 1024)
    assert sink.batches[-1] == [hb]
    assert len(positions.history) == 1


def test_transaction_size_must_be_positive() -> None:
    with pytest.raises(ValueError):
        TransactionBuffer("example", CollectingSink(), transaction_size=0)


def _rows_transaction(count: int) -> list[Entry]:
    db = MiniMysql()
    db.transaction([("insert", "shop.orders", [(i, i, "x")]) for i in range(count)])
    return entries_of(db)  # BEGIN, rows, END


@pytest.mark.parametrize(
    ("size", "held"),
    [(1, True), (2, True), (3, True), (100, True), (100, False)],  # not held and smaller: the next test
    ids=["held-1", "held-2", "held-3", "held-100", "fits-100"],
)
def test_a_transaction_that_ends_in_rollback_goes_out_empty(size: int, held: bool) -> None:
    """BEGIN r0 r1 ROLLBACK: held whole (MariaDB's GTID said it may roll back) or within transaction_size, the
    consumer gets BEGIN and END only, the restart point moved past it."""
    begin, r0, r1, end = _rows_transaction(2)
    sink, positions = CollectingSink(), MemoryPositions()
    buffer = TransactionBuffer("example", sink, positions, transaction_size=size, identity=IDENTITY)
    if held:
        buffer.savepoint("HOLD", "", "at test")
    for entry in (begin, r0, r1):
        buffer.add(entry)
    assert sink.entries == []  # held until its end
    buffer.savepoint("ROLLBACK", "", "at test")
    buffer.add(end)
    assert sink.batches == [[begin, end]]
    assert positions.history == [LogPosition(IDENTITY, end.anchor or EntryPosition(), 0)] and len(buffer) == 0
    after = _rows_transaction(1)  # the hold ended with its transaction: the next one goes out in parts again
    for entry in after:
        buffer.add(entry)
    assert sink.entries[2:] == after
    assert len(sink.batches) == (2 if size >= 3 else 3)


def test_a_held_transaction_past_the_hold_limit_goes_out_in_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A transaction held whole (MariaDB did not flag it transactional) goes out in parts once it holds more than
    HOLD_ENTRIES: memory stays bounded; a ROLLBACK after that is the typed error."""
    from canal.parse import transaction

    monkeypatch.setattr(transaction, "HOLD_ENTRIES", 3)
    begin, *rows, end = _rows_transaction(6)
    sink, positions = CollectingSink(), MemoryPositions()
    buffer = TransactionBuffer("example", sink, positions, transaction_size=2, identity=IDENTITY)
    buffer.savepoint("HOLD", "", "at test")
    for entry in (begin, *rows[:2]):
        buffer.add(entry)
    assert sink.entries == []  # three entries: held
    buffer.add(rows[2])  # over the limit: parts of transaction_size go out
    assert sink.entries[:2] == [begin, rows[0]] and len(buffer) <= 2
    with pytest.raises(RolledBackHandOffError):
        buffer.savepoint("ROLLBACK", "", "at test")
    for entry in (*rows[3:], end):  # (had it committed: the rest goes out as any transaction's)
        buffer.add(entry)
    assert sink.entries == [begin, *rows, end]


@pytest.mark.parametrize("size", [1, 2, 3])
def test_a_rollback_after_a_part_went_out_is_an_error_that_records_nothing(size: int) -> None:
    """Not held (MySQL says nothing ahead) and longer than transaction_size: a part went out before the ROLLBACK.
    The consumer may hold rows that never happened: a typed error, the restart point still at the part."""
    begin, r0, r1, r2, _end = _rows_transaction(3)
    sink, positions = CollectingSink(), MemoryPositions()
    buffer = TransactionBuffer("example", sink, positions, transaction_size=size, identity=IDENTITY)
    for entry in (begin, r0, r1, r2):
        buffer.add(entry)
    assert sink.entries[:2] == [begin, r0]
    handed, recorded = list(sink.entries), list(positions.history)
    with pytest.raises(RolledBackHandOffError, match=rf"'ROLLBACK' at x:9.*part of it was handed off.*size={size}"):
        buffer.savepoint("ROLLBACK", "", "'ROLLBACK' at x:9")
    assert sink.entries == handed and positions.history == recorded and recorded[-1].rows_done > 0


@pytest.mark.parametrize("size", [1, 2, 3, 100])
def test_rows_a_rollback_to_savepoint_undid_are_never_handed_off(size: int) -> None:
    """BEGIN r0 SAVEPOINT a r1 SAVEPOINT b r2 ROLLBACK TO a r3 END: r1 and r2 are left out, in parts of any size;
    nothing after the first savepoint is handed off before the end."""
    db = MiniMysql()
    db.transaction([("insert", "shop.orders", [(i, i, "x")]) for i in range(4)])
    entries = entries_of(db)  # BEGIN, r0..r3, END
    sink = CollectingSink()
    buffer = TransactionBuffer("example", sink, MemoryPositions(), transaction_size=size, identity=IDENTITY)
    begin, r0, r1, r2, r3, end = entries
    for entry, savepoint in [
        (begin, None),
        (r0, ("SAVEPOINT", "a")),
        (r1, ("SAVEPOINT", "B")),
        (r2, ("ROLLBACK TO", "A")),
        (r3, None),
    ]:
        buffer.add(entry)
        if savepoint is not None:
            buffer.savepoint(*savepoint, "at test")
    assert r3 not in sink.entries and r1 not in sink.entries  # held: a later ROLLBACK TO might undo them
    with pytest.raises(ParseError, match=r"'b'.*names no savepoint"):
        buffer.savepoint("ROLLBACK TO", "b", "at test")  # b went with the ROLLBACK TO a
    buffer.add(end)
    assert sink.entries == [begin, r0, r3, end]
    assert len(buffer) == 0
    buffer.savepoint("SAVEPOINT", "c", "at test")
    buffer.add(begin)  # a transaction's savepoints end with it
    with pytest.raises(ParseError):
        buffer.savepoint("RELEASE", "c", "at test")


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(min_value=1, max_value=12),
    size=st.integers(min_value=1, max_value=20),
    part_bytes=st.integers(min_value=1, max_value=400),
)
def test_parts_are_bounded_by_binlog_bytes_as_by_entries(rows: int, size: int, part_bytes: int) -> None:
    """A transaction goes out in parts of at most ``part_bytes`` binlog bytes (a part holds at least one entry, and a
    BEGIN never ends one) as well as of ``transaction_size`` entries: in order, each part recorded with the rows it
    holds, the whole transaction handed off."""
    entries = _rows_transaction(rows)
    sink = CollectingSink()
    positions = MemoryPositions()
    buffer = TransactionBuffer(
        "example", sink, positions, transaction_size=size, part_bytes=part_bytes, identity=IDENTITY
    )
    for entry in entries:
        buffer.add(entry)
    assert sink.entries == entries and len(buffer) == 0
    for batch, recorded in zip(sink.batches, positions.history, strict=True):
        body = [e for e in batch if e.entry_type is not EntryType.TRANSACTIONBEGIN]
        assert len(body) == 1 or sum(e.header.event_length for e in body) <= part_bytes
        assert len(batch) <= max(size, 2) and batch[-1].entry_type is not EntryType.TRANSACTIONBEGIN
        last = batch[-1]
        assert recorded == LogPosition(IDENTITY, last.anchor or EntryPosition(), last.rows_done)
    total = sum(e.header.event_length for e in entries)
    if total <= part_bytes and len(entries) <= size:
        assert sink.batches == [entries]  # a transaction that fits goes whole


def test_part_bytes_must_be_positive() -> None:
    with pytest.raises(ValueError):
        TransactionBuffer("example", CollectingSink(), part_bytes=0)
