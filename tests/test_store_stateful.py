"""MemoryEventStore against a plain model (a list and three counters), driven by hypothesis."""

from __future__ import annotations

import weakref

import attrs
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from test_store_support import EntryMaker, model_cut, model_range

from canal.errors import StoreBatchTooLargeError, StoreSequenceError
from canal.position import LogIdentity
from canal.protocol import Entry, EntryType
from canal.store import BatchMode, MemoryEventStore, memory

KINDS = st.sampled_from("BRRRREDH")
ORIGIN = st.sampled_from([None, LogIdentity("master:3306", 7), LogIdentity("standby:3306", 7)])
ITEM = st.tuples(KINDS, st.one_of(st.integers(0, 60), st.integers(0, 400)), st.booleans(), st.integers(0, 5))


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.maker = EntryMaker()
        self.store: MemoryEventStore | None = None
        self.entries: dict[int, Entry] = {}  # seq -> entry, for every entry not yet acked (the model holds them)
        self.batch_of: dict[int, int] = {}  # seq -> id of the put that brought it
        self.origin_of: dict[int, LogIdentity | None] = {}  # seq -> the server it was put with
        self.gone: list[weakref.ref[Entry]] = []  # acked / cleared entries: nobody may keep them alive
        self.put = self.get = self.ack = -1
        self.puts = 0
        self.latest = None

    @initialize(
        size=st.sampled_from([1, 2, 4, 8, 16]),
        unit=st.sampled_from([1, 50, 100, 256]),
        mode=st.sampled_from(list(BatchMode)),
        ddl=st.booleans(),
        first_slots=st.sampled_from([1, 2, 4, memory.FIRST_SLOTS]),  # the ring grows as puts need
    )
    def setup(self, size: int, unit: int, mode: BatchMode, ddl: bool, first_slots: int) -> None:
        self.size, self.unit, self.mode, self.ddl = size, unit, mode, ddl
        self.memsize = mode is BatchMode.MEMSIZE
        self.store = MemoryEventStore(size, unit, mode.value.lower(), ddl_isolation=ddl)
        self.first_slots, memory.FIRST_SLOTS = memory.FIRST_SLOTS, first_slots
        try:
            self.store.start()
        finally:
            memory.FIRST_SLOTS = self.first_slots

    def teardown(self) -> None:
        if self.store is not None:
            self.store.stop()

    @property
    def s(self) -> MemoryEventStore:
        assert self.store is not None
        return self.store

    def _held_bytes(self) -> int:
        return sum(e.byte_size for e in self.entries.values())

    def _make(self, items: list[tuple[str, int, bool, int]]) -> list[Entry]:
        out = []
        for kind, length, anchored, rows in items:
            anchor = self.maker.make("E", 1).position.with_included(True) if anchored else None
            out.append(self.maker.make(kind, length, anchor, rows))
        return out

    @rule(items=st.lists(ITEM, min_size=0, max_size=20), blocking_api=st.booleans(), origin=ORIGIN)
    def put(self, items: list[tuple[str, int, bool, int]], blocking_api: bool, origin: LogIdentity | None) -> None:
        batch = self._make(items)
        n = len(batch)
        if n > self.size:
            with pytest.raises(StoreBatchTooLargeError):
                self.s.put(batch, timeout=0, origin=origin) if blocking_api else self.s.try_put(batch, origin)
            return
        held = self.put - self.ack
        batch_bytes = sum(e.byte_size for e in batch)
        byte_ok = not self.memsize or self._held_bytes() + batch_bytes <= self.size * self.unit or held == 0
        fits = n == 0 or (held + n <= self.size and byte_ok)
        ok = self.s.put(batch, timeout=0, origin=origin) if blocking_api else self.s.try_put(batch, origin)
        assert ok == fits
        if ok and n:
            self.puts += 1
            for e in batch:
                self.put += 1
                self.entries[self.put] = e
                self.batch_of[self.put] = self.puts
                self.origin_of[self.put] = origin
            self.latest = batch[-1].position

    @rule(batch_size=st.one_of(st.integers(1, 3), st.integers(1, 20)))
    def get(self, batch_size: int) -> None:
        unread = [self.entries[q] for q in range(self.get + 1, self.put + 1)]
        n = model_cut(unread, batch_size, self.memsize, self.unit, self.ddl)
        events = self.s.get(batch_size)
        assert events.start_seq == self.get + 1
        if n == 0:
            assert events.is_empty and events.range is None and events.end_seq == self.get
            return
        assert len(events.entries) == n
        assert all(a is b for a, b in zip(events.entries, unread[:n], strict=True))
        assert events.end_seq == self.get + n
        # the range names the server its last entry was put with, and the batch's store sequences
        last = self.get + n
        assert events.range == attrs.evolve(
            model_range(unread[:n]), identity=self.origin_of[last], seqs=(self.get + 1, last)
        )
        # a BEGIN cut alone takes the entry after it along (a batch never ends with a BEGIN before an entry)
        begin_pair = n == 2 and unread[0].entry_type is EntryType.TRANSACTIONBEGIN
        if self.memsize and n > 1 and not begin_pair:
            assert sum(e.byte_size for e in events.entries) <= batch_size * self.unit
        if self.ddl and any(e.is_boundary and e.row_change is not None and e.row_change.is_ddl for e in unread[:n]):
            assert n == 1 or begin_pair
        self.get += n

    @rule(delta=st.integers(-2, 6))
    def ack(self, delta: int) -> None:
        target = self.ack + delta
        if target < self.ack or target > self.get:
            with pytest.raises(StoreSequenceError):
                self.s.ack(target)
            return
        self.s.ack(target)
        for q in range(self.ack + 1, target + 1):
            self.gone.append(weakref.ref(self.entries.pop(q)))
            self.batch_of.pop(q)
        self.ack = target

    @rule()
    def rollback_all(self) -> None:
        self.s.rollback()
        self.get = self.ack

    @rule(delta=st.integers(-1, 5))
    def rollback_to(self, delta: int) -> None:
        target = self.ack + delta
        if target < self.ack or target > self.get:
            with pytest.raises(StoreSequenceError):
                self.s.rollback(target)
            return
        self.s.rollback(target)
        self.get = target

    @precondition(lambda self: self.put - self.ack > 0)
    @rule()
    def clear(self) -> None:
        self.s.clear()
        for q in range(self.ack + 1, self.put + 1):
            self.gone.append(weakref.ref(self.entries.pop(q)))
        self.batch_of.clear()
        self.get = self.ack = self.put

    @invariant()
    def counters(self) -> None:
        if self.store is None:
            return
        st_ = self.s.stats()
        assert (st_.put_sequence, st_.get_sequence, st_.ack_sequence) == (self.put, self.get, self.ack)
        assert st_.entries_held == len(self.entries) == self.s.size <= self.size
        assert st_.unread == self.put - self.get == self.s.unread
        held_bytes = self._held_bytes()
        assert st_.bytes_held == held_bytes == self.s.bytes_held
        assert st_.get_bytes - st_.ack_bytes == sum(
            self.entries[q].byte_size for q in range(self.ack + 1, self.get + 1)
        )
        if self.memsize and held_bytes > self.size * self.unit:
            # only an oversized batch, accepted alone into an empty store, may exceed the byte capacity
            assert len(set(self.batch_of.values())) == 1
        first = self.entries[self.ack + 1].position if self.entries else None
        assert self.s.first_position() == first
        assert self.s.latest_position() == self.latest

    @invariant()
    def references_dropped(self) -> None:
        assert all(ref() is None for ref in self.gone)
        self.gone.clear()


StoreMachine.TestCase.settings = settings(
    max_examples=200, stateful_step_count=50, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestStoreMachine = StoreMachine.TestCase
