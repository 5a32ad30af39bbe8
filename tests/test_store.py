"""MemoryEventStore: configuration, batches and ranges, limits, blocking, stop, and producer/consumer threads."""

from __future__ import annotations

import gc
import random
import threading
import time
import weakref
from collections.abc import Callable

import pytest
from test_store_support import EntryMaker

from canal.errors import (
    ConfigError,
    StoreBatchTooLargeError,
    StoreClosedError,
    StoreError,
    StoreSequenceError,
)
from canal.protocol import Entry
from canal.store import BatchMode, Events, EventStore, MemoryEventStore

WAIT = 10.0  # generous bound for a thread to reach a state; never a synchronisation sleep


def wait_until(predicate: Callable[[], bool], what: str) -> None:
    """Poll a state the store exposes (e.g. a thread is now blocked in it), failing after WAIT seconds."""
    deadline = time.monotonic() + WAIT
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for: {what}")
        time.sleep(0.0005)  # yields the GIL while polling; correctness never depends on its length


class Runner(threading.Thread):
    """A thread that records its function's result or exception."""

    def __init__(self, fn: Callable[[], object]) -> None:
        super().__init__(daemon=True)
        self.fn = fn
        self.result: object = None
        self.error: BaseException | None = None
        self.done = threading.Event()

    def run(self) -> None:
        try:
            self.result = self.fn()
        except BaseException as exc:  # recorded for the test to assert on
            self.error = exc
        finally:
            self.done.set()

    def finish(self) -> object:
        assert self.done.wait(WAIT), "thread did not finish"
        self.join()
        if self.error is not None:
            raise self.error
        return self.result


@pytest.fixture
def maker() -> EntryMaker:
    return EntryMaker()


# ---------------------------------------------------------------- configuration and lifecycle


@pytest.mark.parametrize("size", [0, -4, 3, 12, 1000, True, 2.0])
def test_buffer_size_must_be_a_power_of_two(size: object) -> None:
    with pytest.raises(ConfigError) as info:
        MemoryEventStore(buffer_size=size)  # type: ignore[arg-type]
    assert info.value.key == "buffer_size"


def test_other_settings_are_checked() -> None:
    with pytest.raises(ConfigError):
        MemoryEventStore(memory_unit=0)
    with pytest.raises(ConfigError):
        MemoryEventStore(batch_mode="BYTES")
    assert MemoryEventStore(batch_mode="itemsize").batch_mode is BatchMode.ITEMSIZE
    assert BatchMode.parse(" memsize ") is BatchMode.MEMSIZE
    store = MemoryEventStore(8, 10)
    assert store.byte_capacity == 80
    assert MemoryEventStore(8, 10, BatchMode.ITEMSIZE).byte_capacity is None


def test_is_an_event_store() -> None:
    assert isinstance(MemoryEventStore(), EventStore)


def test_lifecycle(maker: EntryMaker) -> None:
    store = MemoryEventStore(8)
    assert not store.is_started
    with pytest.raises(StoreClosedError):
        store.put([maker.make("R")])
    with pytest.raises(StoreClosedError):
        store.get(1)
    with store as s:
        assert s is store and store.is_started
        assert store.put(maker.transaction(1))
        assert store.size == 3
    assert not store.is_started
    for call in (lambda: store.get(1), lambda: store.ack(0), store.rollback, store.clear):
        with pytest.raises(StoreClosedError):
            call()
    store.start()  # a restarted store is empty, sequences back at -1
    assert (store.put_sequence, store.get_sequence, store.ack_sequence, store.size) == (-1, -1, -1, 0)
    assert store.latest_position() is None
    store.stop()
    store.stop()  # idempotent


def test_stop_drops_references(maker: EntryMaker) -> None:
    store = MemoryEventStore(8)
    store.start()
    batch = maker.transaction(2)
    refs = [weakref.ref(e) for e in batch]
    store.put(batch)
    del batch
    store.stop()
    gc.collect()
    assert all(r() is None for r in refs)


# ---------------------------------------------------------------- batches, sequences, ranges


def test_itemsize_batches_and_sequences(maker: EntryMaker) -> None:
    with MemoryEventStore(16, batch_mode="ITEMSIZE") as store:
        entries = maker.stream(10)
        assert store.put(entries)
        first = store.get(3)
        assert list(first.entries) == entries[:3]
        assert (first.start_seq, first.end_seq) == (0, 2)
        second = store.get(100)
        assert list(second.entries) == entries[3:]
        assert (second.start_seq, second.end_seq) == (3, 9)
        empty = store.get(5)
        assert empty.is_empty and empty.range is None and (empty.start_seq, empty.end_seq) == (10, 9)
        store.ack(first.end_seq)
        assert store.first_position() == entries[3].position
        store.ack(first.end_seq)  # the current ack again: nothing happens
        with pytest.raises(StoreSequenceError):
            store.ack(second.end_seq + 1)  # never handed out
        with pytest.raises(StoreSequenceError):
            store.ack(first.end_seq - 1)  # already acked
        assert store.ack_sequence == 2 and store.get_sequence == 9
        store.rollback()
        again = store.get(100)
        assert list(again.entries) == entries[3:] and again.start_seq == 3
        store.rollback(6)  # batches after sequence 6 again
        assert list(store.get(100).entries) == entries[7:]
        with pytest.raises(StoreSequenceError):
            store.rollback(1)
        store.ack(9)
        assert store.size == 0 and store.first_position() is None
        assert store.latest_position() == entries[-1].position


def test_memsize_batches_cut_by_bytes(maker: EntryMaker) -> None:
    with MemoryEventStore(16, memory_unit=100) as store:  # MEMSIZE by default
        sizes = [60, 30, 20, 250, 10, 90, 5]
        entries = [maker.make("R", n) for n in sizes]
        assert store.put(entries)
        assert [e.byte_size for e in store.get(1).entries] == [60, 30]  # 110 > 100
        assert [e.byte_size for e in store.get(1).entries] == [20]  # 20 + 250 > 100
        assert [e.byte_size for e in store.get(1).entries] == [250]  # always at least one entry
        assert [e.byte_size for e in store.get(2).entries] == [10, 90, 5]
        stats = store.stats()
        assert stats.bytes_held == sum(sizes) == stats.get_bytes
        store.ack(3)
        assert store.bytes_held == 105


def test_memsize_cut_across_the_ring_end(maker: EntryMaker) -> None:
    with MemoryEventStore(8, memory_unit=100) as store:
        store.put([maker.make("R", 10) for _ in range(6)])
        store.ack(store.get(100).end_seq)
        batch = [maker.make("R", n) for n in (10, 20, 30, 40, 50, 60)]  # slots 6, 7, 0, 1, 2, 3
        store.put(batch)
        got = store.get(1)  # 100 bytes: 10 + 20 + 30 + 40, across the end of the ring
        assert list(got.entries) == batch[:4]
        assert list(store.get(1).entries) == [batch[4]]  # 50 + 60 > 100
        assert list(store.get(1).entries) == [batch[5]]
        assert store.stats().get_bytes == 60 + sum(n for n in (10, 20, 30, 40, 50, 60))


def test_memsize_cut_inside_the_first_part_of_a_wrapped_run(maker: EntryMaker) -> None:
    with MemoryEventStore(8, memory_unit=100) as store:
        store.put([maker.make("R", 10) for _ in range(5)])
        store.ack(store.get(100).end_seq)
        batch = [maker.make("R", n) for n in (40, 40, 40, 10, 10)]  # slots 5, 6, 7, 0, 1
        store.put(batch)
        assert list(store.get(1).entries) == batch[:2]  # 80; a third would make 120
        assert list(store.get(1).entries) == batch[2:]  # 40 + 10 + 10, across the end of the ring


def test_memsize_cut_of_a_long_unread_run(maker: EntryMaker) -> None:
    with MemoryEventStore(1024, memory_unit=1) as store:
        small = [maker.make("R", 1) for _ in range(600)]
        big = maker.make("R", 100)
        store.put([*small, big])
        got = store.get(300)  # the cut lies in the second block of running sums
        assert list(got.entries) == small[:300] and store.stats().get_bytes == 300
        store.rollback()
        got = store.get(344)
        assert list(got.entries) == small[:344] and store.stats().get_bytes == 344
        got = store.get(300)  # 256 small ones fit (one block of sums), the big one would make 356
        assert list(got.entries) == small[344:] and store.stats().get_bytes == 600
        assert list(store.get(1).entries) == [big]
        store.rollback(279)
        assert store.stats().get_bytes == 280 and len(store.get(1000)) == 321


def test_ddl_isolation(maker: EntryMaker) -> None:
    with MemoryEventStore(16, batch_mode="ITEMSIZE", ddl_isolation=True) as store:
        entries = [maker.make("R"), maker.make("E"), maker.make("D"), maker.make("D"), maker.make("B"), maker.make("R")]
        store.put(entries)
        assert list(store.get(10).entries) == entries[:2]
        assert list(store.get(10).entries) == [entries[2]]
        assert list(store.get(10).entries) == [entries[3]]
        assert list(store.get(10).entries) == entries[4:]
    with MemoryEventStore(16, batch_mode="ITEMSIZE", ddl_isolation=False) as store:
        store.put(entries)
        assert len(store.get(10)) == 6


def test_position_range(maker: EntryMaker) -> None:
    with MemoryEventStore(64, batch_mode="ITEMSIZE") as store:
        tx1 = maker.transaction(2)
        tx2 = maker.transaction(3)
        store.put(tx1 + tx2)
        mid = store.get(6)  # tx1 whole, then BEGIN and one row of tx2
        r = mid.range
        assert r is not None
        assert r.start == tx1[0].position and r.end == tx2[1].position
        assert r.ack == tx1[-1].position.with_included(True)
        assert r.cursor == tx2[1].anchor and r.rows_done == 1
        inside = store.get(2)  # two rows of tx2: no boundary
        assert inside.range is not None and inside.range.ack is None
        assert inside.range.cursor == tx2[0].anchor and inside.range.rows_done == 3
        end = store.get(1)
        assert end.range is not None and end.range.ack == tx2[-1].position.with_included(True)
        assert end.range.start == end.range.end == tx2[-1].position
        # entries without anchors fall back to their own position, included when they are boundaries
        loose = [maker.make("R", rows_done=2), maker.make("E"), maker.make("R")]
        store.put(loose[:2])
        got = store.get(10)
        assert got.range is not None and got.range.cursor == loose[1].position.with_included(True)
        store.put(loose[2:])
        got = store.get(10)
        assert got.range is not None and got.range.cursor == loose[2].position and got.range.ack is None


def test_acked_entries_are_released(maker: EntryMaker) -> None:
    with MemoryEventStore(8) as store:
        batch = maker.transaction(3)  # 5 entries
        refs = [weakref.ref(e) for e in batch]
        store.put(batch)
        del batch
        events: Events | None = store.get(1000)
        assert events is not None
        end = events.end_seq
        events = None
        store.ack(end - 2)
        assert [r() is None for r in refs] == [True, True, True, False, False]
        store.clear()
        assert all(r() is None for r in refs)
        assert store.size == 0 and store.bytes_held == 0
        store.ack(end)  # the ack sequence jumped to the put sequence: acking it again is a no-op
        with pytest.raises(StoreSequenceError):
            store.ack(end - 1)  # below it


# ---------------------------------------------------------------- limits


def test_item_limit_counts_the_incoming_batch(maker: EntryMaker) -> None:
    with MemoryEventStore(8, batch_mode="ITEMSIZE") as store:
        assert store.try_put(maker.stream(5))
        assert not store.try_put(maker.stream(4))  # 9 > 8: nothing put
        assert not store.put(maker.stream(4), timeout=0)
        assert store.size == 5
        assert store.try_put(maker.stream(3))
        assert store.size == 8
        with pytest.raises(StoreBatchTooLargeError):
            store.put(maker.stream(9))
        assert isinstance(StoreBatchTooLargeError("x"), StoreError)


def test_byte_limit_counts_the_incoming_batch(maker: EntryMaker) -> None:
    with MemoryEventStore(8, memory_unit=100) as store:  # 800 bytes
        assert store.try_put([maker.make("R", 500)])
        assert not store.try_put([maker.make("R", 200), maker.make("R", 101)])
        assert store.try_put([maker.make("R", 200), maker.make("R", 100)])
        assert store.bytes_held == 800
        assert not store.try_put([maker.make("R", 0), maker.make("R", 1)])


def test_fits_says_what_a_put_would_do_now(maker: EntryMaker) -> None:
    store = MemoryEventStore(8, memory_unit=100)  # 800 bytes
    assert not store.fits(1, 1)  # not started: a put would raise
    with store:
        assert store.fits(8, 800) and not store.fits(9, 1)
        assert store.fits(1, 801)  # more bytes than the store holds go in alone, into an empty store
        store.put([maker.make("R", 500)] * 1)
        assert store.fits(7, 300) and not store.fits(8, 1) and not store.fits(1, 301)
        assert store.size == 1  # asking put nothing
    with MemoryEventStore(8, batch_mode="ITEMSIZE") as items:
        assert items.fits(8, 10**9) and not items.fits(9, 0)


def test_oversized_byte_batch_waits_for_an_empty_store(maker: EntryMaker) -> None:
    with MemoryEventStore(8, memory_unit=100) as store:
        store.put([maker.make("R", 10)])
        huge = [maker.make("R", 600), maker.make("R", 600)]
        assert not store.try_put(huge)
        producer = Runner(lambda: store.put(huge))
        producer.start()
        wait_until(lambda: store.waiting_producers == 1, "put blocked")
        # the consumer still gets the small entry (blocking get: the producer waits, so no full batch will come)
        got = store.get(100, timeout=0)
        assert len(got) == 1
        assert not producer.done.is_set()
        store.ack(got.end_seq)
        assert producer.finish() is True
        assert store.bytes_held == 1200 and store.size == 2  # the one documented excess
        assert not store.try_put([maker.make("R", 1)])  # nothing joins it
        store.ack(store.get(100).end_seq)
        assert store.try_put([maker.make("R", 1)])


# ---------------------------------------------------------------- blocking and wake-ups


def test_blocking_put_wakes_on_ack(maker: EntryMaker) -> None:
    with MemoryEventStore(4, batch_mode="ITEMSIZE") as store:
        store.put(maker.stream(4))
        batch = maker.stream(2)
        producer = Runner(lambda: store.put(batch))
        producer.start()
        wait_until(lambda: store.waiting_producers == 1, "put blocked")
        got = store.get(1)
        store.ack(got.end_seq)  # one slot free: not enough for 2
        assert not producer.done.is_set() and store.waiting_producers == 1
        store.ack(store.get(1).end_seq)
        assert producer.finish() is True
        assert store.put_sequence == 5


def test_put_timeout_returns_false(maker: EntryMaker) -> None:
    with MemoryEventStore(2, batch_mode="ITEMSIZE") as store:
        store.put(maker.stream(2))
        t0 = time.monotonic()
        assert store.put(maker.stream(1), timeout=0.05) is False
        assert time.monotonic() - t0 >= 0.05
        assert store.size == 2


def test_blocking_get_waits_for_a_full_batch(maker: EntryMaker) -> None:
    with MemoryEventStore(16, batch_mode="ITEMSIZE") as store:
        consumer = Runner(lambda: store.get(4, timeout=0))
        consumer.start()
        wait_until(lambda: store.waiting_consumers == 1, "get blocked")
        store.put(maker.stream(2))
        wait_until(lambda: store.waiting_consumers == 1 and store.unread == 2, "still blocked after 2")
        assert not consumer.done.is_set()
        store.put(maker.stream(2))
        got = consumer.finish()
        assert isinstance(got, Events) and len(got) == 4


def test_a_producer_waiting_outside_the_store_ends_a_wait_for_a_full_batch(maker: EntryMaker) -> None:
    """A snapshot reader at its read-ahead limit waits for the consumer; a get waiting for a full batch must not
    wait for entries that only come once it takes these."""
    with MemoryEventStore(16, batch_mode="ITEMSIZE") as store:
        consumer = Runner(lambda: store.get(8, timeout=0))
        consumer.start()
        wait_until(lambda: store.waiting_consumers == 1, "get blocked")
        store.put(maker.stream(2))
        wait_until(lambda: store.unread == 2, "two entries in")
        assert not consumer.done.is_set()
        store.producer_waiting()
        got = consumer.finish()
        assert isinstance(got, Events) and len(got) == 2
        store.put(maker.stream(1))  # a put clears it: the next get waits for its full batch again
        again = Runner(lambda: store.get(2, timeout=0))
        again.start()
        wait_until(lambda: store.waiting_consumers == 1, "the next get blocked")
        assert not again.done.is_set()
        store.put([maker.make("R")])  # the BEGIN's first row (a batch does not end with a BEGIN before it)
        got = again.finish()
        assert isinstance(got, Events) and len(got) == 2



def test_wake_getters_ends_the_waits_under_way_only(maker: EntryMaker) -> None:
    """An HA hand-over refuses new batches from its start: a get already waiting (for entries, for a full batch)
    returns now with what is there, and its service's on_revoked need not wait out the get's timeout."""
    with MemoryEventStore(16, batch_mode="ITEMSIZE") as store:
        empty = Runner(lambda: store.get(8, timeout=60.0))
        full = Runner(lambda: store.get(8, timeout=0))
        empty.start()
        wait_until(lambda: store.waiting_consumers == 1, "the first get blocked")
        store.wake_getters()
        got = empty.finish()
        assert isinstance(got, Events) and got.is_empty
        store.put(maker.stream(2))
        full.start()
        wait_until(lambda: store.waiting_consumers == 1, "the second get blocked")
        store.wake_getters()
        got = full.finish()
        assert isinstance(got, Events) and len(got) == 2
        later = Runner(lambda: store.get(8, timeout=0))  # a get after the wake waits as usual
        later.start()
        wait_until(lambda: store.waiting_consumers == 1, "a later get blocked")
        assert not later.done.wait(0.05)
        store.wake_getters()
        assert later.finish() is not None


def test_a_quiet_store_ends_a_wait_for_a_full_batch_after_the_linger(maker: EntryMaker) -> None:
    """A parser caught up with its server puts nothing until the server writes again: a get waiting for a full batch
    with a linger hands out what is there once nothing was put for that long -- never sooner."""
    with MemoryEventStore(16, batch_mode="ITEMSIZE") as store:
        consumer = Runner(lambda: store.get(8, timeout=0, linger=0.2))  # without the linger: waits forever
        consumer.start()
        wait_until(lambda: store.waiting_consumers == 1, "get blocked")
        store.put(maker.stream(2))
        put_at = time.monotonic()
        got = consumer.finish()
        assert time.monotonic() - put_at >= 0.2
        assert isinstance(got, Events) and len(got) == 2 and store.unread == 0


def test_a_linger_does_not_end_the_wait_while_entries_keep_coming(maker: EntryMaker) -> None:
    """The quiet time counts from the last put: puts closer together than the linger, for longer than it, keep the
    wait going until the batch is full (a linger counted from the first put would hand out half of it)."""
    linger, gap = 1.0, 0.2  # the producer's pace is what is under test; five gaps are longer than the linger
    with MemoryEventStore(64, batch_mode="ITEMSIZE") as store:
        consumer = Runner(lambda: store.get(12, timeout=0, linger=linger))
        consumer.start()
        wait_until(lambda: store.waiting_consumers == 1, "get blocked")
        first_put = time.monotonic()
        for _ in range(5):
            store.put(maker.stream(2))
            time.sleep(gap)
            assert not consumer.done.is_set()
        store.put(maker.stream(2))
        got = consumer.finish()
        assert time.monotonic() - first_put >= linger
        assert isinstance(got, Events) and len(got) == 12


def test_a_linger_does_not_end_a_wait_on_an_empty_store(maker: EntryMaker) -> None:
    with MemoryEventStore(16, batch_mode="ITEMSIZE") as store:
        t0 = time.monotonic()
        assert store.get(4, timeout=0.3, linger=0.01).is_empty
        assert time.monotonic() - t0 >= 0.3  # the timeout, not the linger: there was nothing to hand out


@pytest.mark.parametrize("linger", [-0.1, float("nan")])
def test_a_bad_linger_is_refused_before_anything_is_handed_out(maker: EntryMaker, linger: float) -> None:
    with MemoryEventStore(16, batch_mode="ITEMSIZE") as store:
        store.put(maker.stream(2))
        with pytest.raises(ValueError, match="linger"):
            store.get(4, timeout=0, linger=linger)
        assert store.unread == 2 and len(store.get(4)) == 2


def test_blocking_get_wakes_on_rollback(maker: EntryMaker) -> None:
    with MemoryEventStore(16, batch_mode="ITEMSIZE") as store:
        store.put(maker.stream(3))
        store.get(3)
        consumer = Runner(lambda: store.get(3, timeout=0))
        consumer.start()
        wait_until(lambda: store.waiting_consumers == 1, "get blocked")
        store.rollback()
        got = consumer.finish()
        assert isinstance(got, Events) and got.start_seq == 0 and len(got) == 3


def test_get_timeout_returns_what_is_there(maker: EntryMaker) -> None:
    with MemoryEventStore(16, batch_mode="ITEMSIZE") as store:
        t0 = time.monotonic()
        assert store.get(5, timeout=0.05).is_empty
        assert time.monotonic() - t0 >= 0.05
        store.put(maker.stream(2))
        assert len(store.get(5, timeout=0.05)) == 2
        assert store.get(5).is_empty  # None: at once


def test_memsize_blocking_get_waits_for_bytes(maker: EntryMaker) -> None:
    with MemoryEventStore(16, memory_unit=100) as store:
        store.put([maker.make("R", 150)])
        consumer = Runner(lambda: store.get(2, timeout=0))  # wants 200 bytes
        consumer.start()
        wait_until(lambda: store.waiting_consumers == 1, "get blocked")
        store.put([maker.make("R", 49)])
        wait_until(lambda: store.unread == 2, "second put")
        assert not consumer.done.is_set()
        store.put([maker.make("R", 1)])
        got = consumer.finish()
        assert isinstance(got, Events) and [e.byte_size for e in got.entries] == [150, 49, 1]


def test_blocking_get_ends_when_a_ddl_cuts_the_batch(maker: EntryMaker) -> None:
    with MemoryEventStore(16, batch_mode="ITEMSIZE", ddl_isolation=True) as store:
        consumer = Runner(lambda: store.get(10, timeout=0))
        consumer.start()
        wait_until(lambda: store.waiting_consumers == 1, "get blocked")
        entries = [maker.make("R"), maker.make("D")]
        store.put(entries)
        got = consumer.finish()
        assert isinstance(got, Events) and list(got.entries) == entries[:1]


def test_stop_wakes_blocked_callers(maker: EntryMaker) -> None:
    store = MemoryEventStore(2, batch_mode="ITEMSIZE")
    store.start()
    store.put(maker.stream(2))
    store.get(2)
    producer = Runner(lambda: store.put(maker.stream(1)))
    consumers = [Runner(lambda: store.get(5, timeout=0)), Runner(lambda: store.get(5, timeout=30))]
    producer.start()
    for c in consumers:
        c.start()
    wait_until(lambda: store.waiting_producers == 1 and store.waiting_consumers == 2, "all blocked")
    store.stop()
    for runner in (producer, *consumers):
        with pytest.raises(StoreClosedError):
            runner.finish()
    assert store.waiting_producers == 0 and store.waiting_consumers == 0


# ---------------------------------------------------------------- producer / consumer threads

N = 100_000


def _produce(store: MemoryEventStore, entries: list[Entry], seed: int) -> None:
    rnd = random.Random(seed)
    i = 0
    while i < len(entries):
        n = rnd.randint(1, 40)
        batch = entries[i : i + n]
        mode = rnd.random()
        if mode < 0.6:
            assert store.put(batch)
        elif mode < 0.8:
            while not store.put(batch, timeout=0.001):
                pass
        elif not store.try_put(batch):
            assert store.put(batch)  # did not fit now: wait for room
        i += len(batch)


def test_one_producer_one_consumer_with_rollbacks(maker: EntryMaker) -> None:
    entries = maker.stream(N, length=50)
    store = MemoryEventStore(256, memory_unit=64)  # MEMSIZE: 16 KiB
    store.start()
    producer = Runner(lambda: _produce(store, entries, 1))
    received: list[Entry] = []
    rnd = random.Random(2)
    producer.start()
    pending: list[Entry] = []
    while len(received) < N:
        timeout = rnd.choice([None, 0, 0.001])
        size = rnd.randint(1, 30)
        if timeout == 0 and (N - store.get_sequence - 1) * 50 < size * 64:
            timeout = None  # the tail: a full batch will never come, do not block for one
        got = store.get(size, timeout=timeout)
        pending.extend(got.entries)
        if got.is_empty:
            continue
        if rnd.random() < 0.1:
            store.rollback()
            pending.clear()
        else:
            store.ack(got.end_seq)
            received.extend(pending)
            pending.clear()
    producer.finish()
    assert len(received) == N
    assert all(a is b for a, b in zip(received, entries, strict=True))
    assert store.ack_sequence == N - 1 and store.size == 0
    store.stop()


@pytest.mark.parametrize("consumers", [2, 4])
def test_one_producer_many_consumers(maker: EntryMaker, consumers: int) -> None:
    entries = maker.stream(N, length=50)
    # consumers may block for a full batch (up to 50 entries): a tail of heartbeats longer than all of them can
    # take lets every one of them finish; each leaves after its first batch that reaches into the tail
    tail = [maker.make("H") for _ in range(50 * (consumers + 1))]
    tail_ids = {id(e) for e in tail}
    store = MemoryEventStore(512, batch_mode="ITEMSIZE")
    store.start()
    lock = threading.Lock()
    outstanding: dict[int, int] = {}  # start_seq -> end_seq, batches handed out and not acked
    done_upto = [-1]
    batches: list[Events] = []

    def consume(seed: int) -> None:
        rnd = random.Random(seed)
        while True:
            got = store.get(rnd.randint(1, 50), timeout=rnd.choice([0, 0.01, None]))
            if got.is_empty:
                continue
            with lock:
                batches.append(got)
                outstanding[got.start_seq] = got.end_seq
                # ack in order: the contiguous prefix of finished batches (the instance keeps batch order too)
                while done_upto[0] + 1 in outstanding:
                    done_upto[0] = outstanding.pop(done_upto[0] + 1)
                store.ack(done_upto[0])
            if id(got.entries[-1]) in tail_ids:
                return

    threads = [Runner(lambda s=s: consume(s)) for s in range(consumers)]  # type: ignore[misc]
    producer = Runner(lambda: _produce(store, entries + tail, 3))
    for t in threads:
        t.start()
    producer.start()
    producer.finish()
    for t in threads:
        t.finish()
    assert store.ack_sequence >= N - 1
    store.stop()
    batches.sort(key=lambda b: b.start_seq)
    assert [b.start_seq for b in batches] == [0] + [b.end_seq + 1 for b in batches[:-1]]
    got = [e for b in batches for e in b.entries]
    assert len(got) >= N
    assert all(a is b for a, b in zip(got, entries + tail, strict=False))
