"""Model-based tests: every meta manager against one plain model of canal's meta semantics.

Random sequences of subscribe / unsubscribe / update_cursor / add_batch (new and explicit ids, valid and not) /
remove_batch (oldest, out of order, unknown) / remove_batchs_from / clear / flush / restart / crash are applied to a
manager and to the model; after every step the manager's whole visible state must equal the model's. Restarts check
persistence: the file and period-mixed managers come back with the last *flushed* subscriptions and cursors and no
marks; the ZooKeeper manager with everything; the memory manager with nothing.
"""

from __future__ import annotations

import secrets
import tempfile
from collections.abc import Callable
from typing import Any, ClassVar

import attrs
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from kazoo.client import KazooClient
from test_log_position import run_machine

from canal.client import ClientIdentity
from canal.errors import BatchOrderError, UnknownBatchError
from canal.meta import (
    ClientNotSubscribedError,
    FileMetaManager,
    MemoryMetaManager,
    MetaManager,
    PeriodMixedMetaManager,
    ZooKeeperMetaManager,
)
from canal.position import EntryPosition, LogIdentity, LogPosition, PositionRange

Key = tuple[int, int]  # (destination index, client id)
DEST_COUNT = 2
CLIENT_IDS = (1001, 1002)

# one busy client (so marks and cursors pile up) among a few others
keys = st.one_of(st.just((0, 1001)), st.tuples(st.integers(0, DEST_COUNT - 1), st.sampled_from(CLIENT_IDS)))
filters = st.sampled_from(["", r"shop\..*", r"a\.b,c\..*"])


def entry_position(n: int, included: bool = False) -> EntryPosition:
    return EntryPosition(f"mysql-bin.{1 + n // 1000:06d}", 4 + n % 1000, 1_700_000_000_000 + n, 1, None, included)


log_positions = st.builds(
    lambda n, inc, rows, slave: LogPosition(LogIdentity("127.0.0.1:3306", slave), entry_position(n, inc), rows),
    st.sampled_from([0, 1000]),  # a small pool: equal values recur, as real cursors do
    st.booleans(),
    st.integers(0, 1),
    st.just(-1),
)
position_ranges = st.builds(
    lambda a, b, acked, rows: PositionRange(
        entry_position(a),
        entry_position(a + b),
        entry_position(a + b, True) if acked else None,
        entry_position(a),
        rows,
    ),
    st.integers(0, 5000),
    st.integers(0, 50),
    st.booleans(),
    st.integers(0, 5),
)


@attrs.define
class Model:
    subs: dict[Key, str] = attrs.field(factory=dict)
    cursors: dict[Key, LogPosition] = attrs.field(factory=dict)
    marks: dict[Key, dict[int, PositionRange]] = attrs.field(factory=dict)
    next_id: dict[Key, int] = attrs.field(factory=dict)
    # what a crash leaves behind
    p_subs: dict[Key, str] = attrs.field(factory=dict)
    p_cursors: dict[Key, LogPosition] = attrs.field(factory=dict)


class MetaMachine(RuleBasedStateMachine):
    """The rules; subclasses say how to build a manager and what survives a restart."""

    subs_persist_at_once: ClassVar[bool] = False  # subscription changes are persisted immediately
    cursors_persist_at_once: ClassVar[bool] = False
    subscribe_flushes_destination: ClassVar[bool] = False  # file: a subscription change rewrites its whole document
    marks_survive: ClassVar[bool] = False
    anything_survives: ClassVar[bool] = True
    can_crash: ClassVar[bool] = True

    def __init__(self) -> None:
        super().__init__()
        self.model = Model()
        self.prefix = f"d{secrets.token_hex(4)}"
        self.mgr = self.make()
        self.mgr.start()

    def make(self) -> MetaManager:
        raise NotImplementedError

    def dest(self, index: int) -> str:
        return f"{self.prefix}{index}"

    def client(self, key: Key, filter: str = "") -> ClientIdentity:
        return ClientIdentity(self.dest(key[0]), key[1], filter)

    def teardown(self) -> None:
        self.mgr.stop()

    # -- model helpers

    def persist_destination(self, index: int) -> None:
        m = self.model
        for table, current in ((m.p_subs, m.subs), (m.p_cursors, m.cursors)):
            for key in [k for k in table if k[0] == index]:
                del table[key]
            table.update({k: v for k, v in current.items() if k[0] == index})  # type: ignore[attr-defined]

    def persist_all(self) -> None:
        for index in range(DEST_COUNT):
            self.persist_destination(index)

    def come_back(self) -> None:
        """The model after a new manager instance starts on the persisted state."""
        m = self.model
        if not self.anything_survives:
            self.model = Model()
            return
        m.subs = dict(m.p_subs)
        m.cursors = {k: v for k, v in m.p_cursors.items() if k in m.subs}
        if not self.marks_survive:
            m.marks.clear()
            m.next_id.clear()

    # -- rules (restart, crash and unsubscribe act on one draw in four, so that marks and cursors accumulate)

    @initialize(subscribed=st.sets(keys))
    def subscribe_some(self, subscribed: set[Key]) -> None:
        for key in sorted(subscribed | {(0, 1001)}):
            self.subscribe(key, "")

    @rule(key=keys, filter=filters)
    def subscribe(self, key: Key, filter: str) -> None:
        self.mgr.subscribe(self.client(key, filter))
        self.model.subs[key] = filter
        if self.subscribe_flushes_destination:
            self.persist_destination(key[0])
        elif self.subs_persist_at_once:
            self.model.p_subs[key] = filter

    @rule(key=keys, go=st.integers(0, 3))
    def unsubscribe(self, key: Key, go: int) -> None:
        if go:
            return
        self.mgr.unsubscribe(self.client(key))
        m = self.model
        for table in (m.subs, m.cursors, m.marks, m.next_id):
            table.pop(key, None)  # type: ignore[attr-defined]
        if self.subscribe_flushes_destination:
            self.persist_destination(key[0])
        elif self.subs_persist_at_once:
            m.p_subs.pop(key, None)
            m.p_cursors.pop(key, None)

    @rule(key=keys, position=log_positions)
    def update_cursor(self, key: Key, position: LogPosition) -> None:
        if key not in self.model.subs:
            with pytest.raises(ClientNotSubscribedError):
                self.mgr.update_cursor(self.client(key), position)
            return
        self.mgr.update_cursor(self.client(key), position)
        self.model.cursors[key] = position
        if self.cursors_persist_at_once:
            self.model.p_cursors[key] = position

    @rule(key=keys, position_range=position_ranges)
    def add_batch(self, key: Key, position_range: PositionRange) -> None:
        if key not in self.model.subs:
            with pytest.raises(ClientNotSubscribedError):
                self.mgr.add_batch(self.client(key), position_range)
            return
        batch_id = self.mgr.add_batch(self.client(key), position_range)
        expected = self.model.next_id.get(key, 1)
        assert batch_id == expected, f"new batch id {batch_id}, expected {expected}"
        self.model.marks.setdefault(key, {})[batch_id] = position_range
        self.model.next_id[key] = batch_id + 1

    @rule(key=keys, position_range=position_ranges, delta=st.sampled_from([-2, -1, 0, 1, 3]))
    def add_batch_with_id(self, key: Key, position_range: PositionRange, delta: int) -> None:
        outstanding = list(self.model.marks.get(key, {}))
        batch_id = (outstanding[-1] if outstanding else self.model.next_id.get(key, 1)) + delta
        if key not in self.model.subs:
            with pytest.raises(ClientNotSubscribedError):
                self.mgr.add_batch(self.client(key), position_range, batch_id)
            return
        if batch_id < 0 or (outstanding and batch_id <= outstanding[-1]):
            with pytest.raises(BatchOrderError):
                self.mgr.add_batch(self.client(key), position_range, batch_id)
            return
        assert self.mgr.add_batch(self.client(key), position_range, batch_id) == batch_id
        self.model.marks.setdefault(key, {})[batch_id] = position_range
        self.model.next_id[key] = max(self.model.next_id.get(key, 1), batch_id + 1)

    @rule(key=keys, choice=st.sampled_from(["oldest", "oldest", "later", "unknown"]))
    def remove_batch(self, key: Key, choice: str) -> None:
        marks = self.model.marks.get(key, {})
        ids = list(marks)
        client = self.client(key)
        if choice == "oldest" and ids:
            assert self.mgr.remove_batch(client, ids[0]) == marks.pop(ids[0])
        elif choice == "later" and len(ids) > 1:
            with pytest.raises(BatchOrderError):
                self.mgr.remove_batch(client, ids[-1])
        else:
            unknown = (ids[-1] + 5) if ids else self.model.next_id.get(key, 1) + 2
            with pytest.raises(UnknownBatchError):
                self.mgr.remove_batch(client, unknown)

    @rule(key=keys, pick=st.integers(0, 4))
    def remove_batchs_from(self, key: Key, pick: int) -> None:
        marks = self.model.marks.get(key, {})
        ids = list(marks)
        client = self.client(key)
        if pick < len(ids):
            chosen = ids[pick]
            expected = {i: marks.pop(i) for i in ids if i >= chosen}
            assert self.mgr.remove_batchs_from(client, chosen) == expected
        else:
            with pytest.raises(UnknownBatchError):
                self.mgr.remove_batchs_from(client, (ids[-1] if ids else 0) + 10 + pick)

    @rule(key=keys)
    def clear_all_batchs(self, key: Key) -> None:
        self.mgr.clear_all_batchs(self.client(key))
        self.model.marks.pop(key, None)

    @rule(go=st.integers(0, 3))
    def restart(self, go: int) -> None:
        """Clean stop (final flush) and a new instance on the same storage."""
        if go:
            return
        self.mgr.stop()
        self.persist_all()
        self.mgr = self.make()
        self.mgr.start()
        self.come_back()

    @rule(go=st.integers(0, 3))
    def crash(self, go: int) -> None:
        """A new instance on the same storage while the old one never flushes again (flush period None)."""
        if go or not self.can_crash:
            return
        self.mgr = self.make()
        self.mgr.start()
        self.come_back()

    # -- what must hold after every step

    @invariant()
    def state_matches_model(self) -> None:
        m = self.model
        for index in range(DEST_COUNT):
            listed = [(c.client_id, c.filter) for c in self.mgr.list_all_subscribe_info(self.dest(index))]
            assert listed == sorted((k[1], f) for k, f in m.subs.items() if k[0] == index)
            for client_id in CLIENT_IDS:
                key = (index, client_id)
                client = self.client(key)
                assert self.mgr.has_subscribe(client) == (key in m.subs)
                assert self.mgr.get_cursor(client) == m.cursors.get(key)
                marks = m.marks.get(key, {})
                assert list(self.mgr.list_all_batchs(client).items()) == list(marks.items())
                assert self.mgr.get_first_batch(client) == (next(iter(marks.values())) if marks else None)
                assert self.mgr.get_last_batch(client) == (list(marks.values())[-1] if marks else None)
                for batch_id, position_range in marks.items():
                    assert self.mgr.get_batch(client, batch_id) == position_range


class MemoryMachine(MetaMachine):
    anything_survives = False
    can_crash = False

    def make(self) -> MetaManager:
        return MemoryMetaManager()


class FileMachine(MetaMachine):
    subscribe_flushes_destination = True

    def __init__(self) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="pycanal-meta-")
        super().__init__()

    def make(self) -> MetaManager:
        return FileMetaManager(self.tmp.name, flush_period_s=None)

    @rule()
    def flush(self) -> None:
        assert isinstance(self.mgr, FileMetaManager)
        self.mgr.flush()
        self.persist_all()

    def teardown(self) -> None:
        try:
            super().teardown()
        finally:
            self.tmp.cleanup()


class ZooKeeperMachine(MetaMachine):
    zk: ClassVar[KazooClient]
    subs_persist_at_once = True
    cursors_persist_at_once = True
    marks_survive = True

    def make(self) -> MetaManager:
        return ZooKeeperMetaManager(self.zk)


class PeriodMixedMachine(MetaMachine):
    zk: ClassVar[KazooClient]
    subs_persist_at_once = True

    def make(self) -> MetaManager:
        return PeriodMixedMetaManager(ZooKeeperMetaManager(self.zk), flush_period_s=None)

    @rule()
    def flush(self) -> None:
        assert isinstance(self.mgr, PeriodMixedMetaManager)
        self.mgr.flush()
        self.persist_all()


def test_memory_meta_matches_model() -> None:
    run_machine(MemoryMachine, 100, 40)


def test_file_meta_matches_model() -> None:
    run_machine(FileMachine, 50, 40)


def _with_zk(base: type[MetaMachine], zk: KazooClient) -> type[RuleBasedStateMachine]:
    attrs_: dict[str, Any] = {"zk": zk}
    made: Callable[..., type[RuleBasedStateMachine]] = type
    return made(f"{base.__name__}OnServer", (base,), attrs_)


@pytest.mark.integration
def test_zookeeper_meta_matches_model(zookeeper: Any) -> None:
    run_machine(_with_zk(ZooKeeperMachine, zookeeper.client()), 12, 30)


@pytest.mark.integration
def test_period_mixed_meta_matches_model(zookeeper: Any) -> None:
    run_machine(_with_zk(PeriodMixedMachine, zookeeper.client()), 40, 30)
