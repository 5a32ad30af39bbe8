"""Entry sink (heartbeats, transaction-entry filter, empty transactions, full store) and group sink (merge order)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence

import attrs
import pytest

from canal.errors import StoreClosedError
from canal.protocol import ColumnMeta, Entry, EntryType, EventType, Header, RowChange, RowData, TableSchema
from canal.sink import EntrySink, GroupSink

T = TableSchema("s", "t", (ColumnMeta("id", is_key=True),))


_OFFSETS = itertools.count(1)


def txn(ms: int, rows: int = 1, server_id: int = 1, at: int | None = None) -> list[Entry]:
    """A transaction of ``rows`` rows at ``at`` (a binlog offset; else after the one made before)."""
    base = next(_OFFSETS) * 1000 if at is None else at

    def h(off: int) -> Header:
        return Header("mysql-bin.000001", base + off, server_id=server_id, execute_time=ms, event_length=10)

    out = [Entry(h(4), EntryType.TRANSACTIONBEGIN, thread_id=1)]
    out += [
        Entry(h(10 + i), EntryType.ROWDATA, RowChange(EventType.INSERT, rows=[RowData(T, None, (i,))]))
        for i in range(rows)
    ]
    out.append(Entry(h(99), EntryType.TRANSACTIONEND, xid=7))
    return out


def heartbeat(ms: int) -> list[Entry]:
    return [Entry(Header("mysql-bin.000001", 4, execute_time=ms), EntryType.HEARTBEAT)]


class ListStore:
    """A put target with a capacity, signalling when a put blocks."""

    def __init__(self, capacity: int = 10**9) -> None:
        self.items: list[Entry] = []
        self.capacity = capacity
        self.cond = threading.Condition()
        self.blocked = threading.Event()

    def put(self, entries: Sequence[Entry], timeout: float | None = None, origin: object = None) -> bool:
        with self.cond:
            if len(self.items) + len(entries) > self.capacity:
                self.blocked.set()
                self.cond.wait(timeout)
                if len(self.items) + len(entries) > self.capacity:
                    return False
            self.items.extend(entries)
            return True

    def fits(self, entries: int, byte_size: int) -> bool:
        with self.cond:
            return len(self.items) + entries <= self.capacity

    def drain(self) -> None:
        with self.cond:
            self.items.clear()
            self.cond.notify_all()


def test_heartbeats_never_reach_the_store() -> None:
    store = ListStore()
    sink = EntrySink(store)
    sink.sink(heartbeat(1000))
    sink.sink(txn(1000))
    assert all(e.entry_type is not EntryType.HEARTBEAT for e in store.items)
    assert len(store.items) == 3 and sink.heartbeats == 1 and sink.last_heartbeat_ms == 1000


def test_transaction_entry_filter_drops_begin_and_end() -> None:
    store = ListStore()
    EntrySink(store, filter_transaction_entry=True).sink(txn(1000, rows=2))
    assert [e.entry_type for e in store.items] == [EntryType.ROWDATA, EntryType.ROWDATA]


def test_empty_transactions_are_dropped_but_one_passes_per_interval() -> None:
    store = ListStore()
    sink = EntrySink(store, empty_transaction_interval_ms=5000, empty_transaction_threshold=3)
    for ms in (0, 1000, 2000):
        sink.sink(txn(ms, rows=0))
    assert store.items == [] and sink.empty_transactions_dropped == 3
    sink.sink(txn(2500, rows=0))  # the 4th in a row exceeds the threshold: it passes, keeping positions moving
    assert len(store.items) == 2
    sink.sink(txn(9000, rows=0))  # more than the interval after the last one let through: passes too
    assert len(store.items) == 4


def test_an_empty_xa_prepare_group_is_never_dropped() -> None:
    """None of its rows captured: its XA COMMIT follows as an entry, and must end a transaction the consumer saw."""
    store = ListStore()
    sink = EntrySink(store, empty_transaction_interval_ms=5000, empty_transaction_threshold=3)
    prepared = txn(0, rows=0)
    xa = {"XA_TYPE": "XA_START", "XA_XID": "X'7831',X'',1"}
    prepared[0] = attrs.evolve(prepared[0], header=attrs.evolve(prepared[0].header, props=xa))
    prepared[-1] = attrs.evolve(
        prepared[-1], header=attrs.evolve(prepared[-1].header, props={**xa, "XA_TYPE": "XA_END"})
    )
    sink.sink(prepared)
    sink.sink(txn(10, rows=0))  # an ordinary empty transaction still goes
    assert store.items == prepared and sink.empty_transactions_dropped == 1


def test_empty_transaction_filter_can_be_disabled() -> None:
    store = ListStore()
    EntrySink(store, filter_empty_transaction=False).sink(txn(0, rows=0))
    assert len(store.items) == 2


def test_full_store_blocks_until_room_then_stop_raises() -> None:
    store = ListStore(capacity=3)
    sink = EntrySink(store, put_wait_s=0.05)
    sink.sink(txn(0))
    done = threading.Event()

    def second() -> None:
        sink.sink(txn(1))
        done.set()

    t = threading.Thread(target=second)
    t.start()
    assert store.blocked.wait(5)
    assert not done.is_set()
    store.drain()
    assert done.wait(5)
    t.join()
    # now a put that can never fit is abandoned on stop(), with a typed error
    errors: list[BaseException] = []

    def third() -> None:
        try:
            sink.sink(txn(2, rows=5))
        except StoreClosedError as exc:
            errors.append(exc)

    store.blocked.clear()
    t = threading.Thread(target=third)
    t.start()
    assert store.blocked.wait(5)
    sink.stop()
    t.join(5)
    assert not t.is_alive() and len(errors) == 1


def test_group_sink_merges_members_in_timestamp_order_keeping_transactions_whole() -> None:
    store = ListStore()
    group = GroupSink(EntrySink(store).sink, members=2)
    a = [txn(ms, rows=2, server_id=1) for ms in (100, 300, 500)]
    b = [txn(ms, rows=2, server_id=2) for ms in (200, 400, 600)]

    def run(index: int, txns: list[list[Entry]]) -> None:
        sink = group.member(index)
        for t in txns:
            sink(t)
        sink(heartbeat(10_000))  # this member is idle from now on
        group.leave(index)

    threads = [threading.Thread(target=run, args=(0, a)), threading.Thread(target=run, args=(1, b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads)
    begins = [e.header.execute_time for e in store.items if e.entry_type is EntryType.TRANSACTIONBEGIN]
    assert begins == [100, 200, 300, 400, 500, 600]
    # every transaction is contiguous: BEGIN, its rows, END from one server
    for i in range(0, len(store.items), 4):
        chunk = store.items[i : i + 4]
        assert len({e.header.server_id for e in chunk}) == 1
        assert chunk[0].entry_type is EntryType.TRANSACTIONBEGIN and chunk[-1].entry_type is EntryType.TRANSACTIONEND


def test_group_member_waits_for_an_idle_member_until_its_heartbeat() -> None:
    store = ListStore()
    group = GroupSink(EntrySink(store).sink, members=2)
    passed = threading.Event()

    def first() -> None:
        group.member(0)(txn(1000), None)
        passed.set()

    t = threading.Thread(target=first)
    t.start()
    assert not passed.wait(0.2)  # member 1 has said nothing yet: member 0 cannot know it is first
    group.member(1)(heartbeat(999), None)
    assert not passed.wait(0.2)  # a heartbeat before t=1000 does not settle it
    group.member(1)(heartbeat(1001), None)
    assert passed.wait(5)
    t.join()
    assert len(store.items) == 3


def test_group_stop_and_leave_release_waiters() -> None:
    store = ListStore()
    group = GroupSink(EntrySink(store).sink, members=3)
    errors: list[BaseException] = []

    def blocked() -> None:
        try:
            group.member(0)(txn(5), None)
        except StoreClosedError as exc:
            errors.append(exc)

    t = threading.Thread(target=blocked)
    t.start()
    group.leave(1)
    group.stop()
    t.join(5)
    assert not t.is_alive() and len(errors) == 1 and store.items == []
    with pytest.raises(IndexError):
        group.member(3)


def test_empty_transactions_read_again_are_judged_as_they_were() -> None:
    """A parser restarted from a cursor reads again what it handed off after it: the empty transactions among them
    are judged in the state before them, not against the last one kept since (later in the binlog)."""
    store = ListStore()
    sink = EntrySink(store, empty_transaction_interval_ms=5000, empty_transaction_threshold=100)
    stream = [(0, 1000), (6000, 2000), (7000, 3000)]  # (ms, offset): dropped, kept (6 s after), dropped
    for ms, at in stream:
        sink.sink(txn(ms, rows=0, at=at))
    first = [e.header.log_offset for e in store.items]
    assert first == [2004, 2099] and sink.empty_transactions_dropped == 2
    store.items.clear()
    for ms, at in stream:  # read again from before the first
        sink.sink(txn(ms, rows=0, at=at))
    assert [e.header.log_offset for e in store.items] == first
    store.items.clear()
    for ms, at in stream[2:]:  # from after the kept one: judged in the state it left
        sink.sink(txn(ms, rows=0, at=at))
    assert store.items == []


def test_room_says_whether_a_hand_off_goes_in_without_waiting_and_not_after_stop() -> None:
    store = ListStore(capacity=3)
    sink = EntrySink(store)
    assert sink.room(3, 10**6) and not sink.room(4, 0)
    sink.sink(txn(1000, rows=1))  # BEGIN, a row, END
    assert not sink.room(1, 0) and store.items
    store.drain()
    assert sink.room(3, 0)
    sink.stop()
    assert not sink.room(1, 0)  # a stopped sink takes nothing: the parser's own thread meets the stop
