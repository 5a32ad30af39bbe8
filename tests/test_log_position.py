"""Log-position managers: memory, file, meta-based (minimum cursor), failback; model-based tests included.

The ZooKeeper and period-mixed ones are in test_log_position_zookeeper.py; they reuse the machines here.
"""

from __future__ import annotations

import json
import secrets
import tempfile
import threading
from pathlib import Path
from typing import ClassVar

import attrs
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from canal.client import ClientIdentity
from canal.errors import MetaError
from canal.meta import CorruptMetaError, MemoryMetaManager, MetaNotStartedError
from canal.parse.log_position import (
    FailbackLogPositionManager,
    FileLogPositionManager,
    LogPositionManager,
    MemoryLogPositionManager,
    MetaLogPositionManager,
)
from canal.position import EntryPosition, LogIdentity, LogPosition

DEST_COUNT = 2


def pos(n: int, rows: int = 0, included: bool = True) -> LogPosition:
    return LogPosition(
        LogIdentity("127.0.0.1:3306", 9),
        EntryPosition(f"mysql-bin.{1 + n // 100:06d}", 4 + n % 100, 1_700_000_000_000 + n, 1, None, included),
        rows,
    )


positions = st.builds(pos, st.integers(0, 400), st.integers(0, 2), st.booleans())


# ------------------------------------------------------------------------------------------------ unit tests


def test_memory_log_position_manager() -> None:
    mgr = MemoryLogPositionManager()
    assert isinstance(mgr, LogPositionManager)
    with pytest.raises(MetaNotStartedError):
        mgr.get_latest_position("example")
    with mgr:
        assert mgr.get_latest_position("example") is None
        mgr.persist_position("example", pos(1))
        mgr.persist_position("example", pos(2))
        assert mgr.get_latest_position("example") == pos(2)
        with pytest.raises(TypeError):
            mgr.persist_position("example", "mysql-bin.000001:4")  # type: ignore[arg-type]
    mgr.start()
    assert mgr.get_latest_position("example") is None
    mgr.stop()


def test_meta_log_position_is_the_slowest_clients_cursor() -> None:
    meta = MemoryMetaManager()
    with MetaLogPositionManager(meta) as mgr:
        assert meta.is_started  # started for us
        fast, slow, idle = (ClientIdentity("example", i) for i in (1001, 1002, 1003))
        for client in (fast, slow, idle):
            meta.subscribe(client)
        assert mgr.get_latest_position("example") is None
        meta.update_cursor(fast, pos(50))
        meta.update_cursor(slow, pos(20, rows=4))
        assert mgr.get_latest_position("example") == pos(20, rows=4)
        mgr.persist_position("example", pos(99))  # read-only: the consumers' acks move it
        assert mgr.get_latest_position("example") == pos(20, rows=4)
        meta.unsubscribe(slow)
        assert mgr.get_latest_position("example") == pos(50)
    assert not meta.is_started  # and stopped


def test_meta_log_position_leaves_a_running_meta_manager_running() -> None:
    with MemoryMetaManager() as meta:
        with MetaLogPositionManager(meta):
            pass
        assert meta.is_started


def test_failback_reads_primary_then_secondary_and_writes_primary() -> None:
    primary, secondary = MemoryLogPositionManager(), MemoryLogPositionManager()
    with FailbackLogPositionManager(primary, secondary) as mgr:
        secondary.persist_position("example", pos(5))
        assert mgr.get_latest_position("example") == pos(5)
        mgr.persist_position("example", pos(8))
        assert primary.get_latest_position("example") == pos(8)
        assert secondary.get_latest_position("example") == pos(5)
        assert mgr.get_latest_position("example") == pos(8)
    assert not primary.is_started and not secondary.is_started


class RefusingManager(MemoryLogPositionManager):
    def persist_position(self, destination: str, position: LogPosition) -> None:
        raise MetaError("primary is read-only today")


def test_failback_writes_the_secondary_when_the_primary_refuses(caplog: pytest.LogCaptureFixture) -> None:
    secondary = MemoryLogPositionManager()
    with FailbackLogPositionManager(RefusingManager(), secondary) as mgr:
        mgr.persist_position("example", pos(3))
        assert secondary.get_latest_position("example") == pos(3)
        assert mgr.get_latest_position("example") == pos(3)
    assert any("[example]" in r.getMessage() and "read-only" in r.getMessage() for r in caplog.records)


def test_file_log_position_flushes_atomically_and_survives_restart(tmp_path: Path) -> None:
    with FileLogPositionManager(tmp_path, flush_period_s=None) as mgr:
        mgr.persist_position("example", pos(7, rows=2))
        assert not (tmp_path / "example" / "parse.dat").exists()  # not yet flushed
        mgr.flush()
        document = json.loads((tmp_path / "example" / "parse.dat").read_text())
        assert document["postion"]["position"] == 11 and document["rowsDone"] == 2
        inode = (tmp_path / "example" / "parse.dat").stat().st_ino
        mgr.flush()  # unchanged: not rewritten
        assert (tmp_path / "example" / "parse.dat").stat().st_ino == inode
        mgr.persist_position("example", pos(9))
    with FileLogPositionManager(tmp_path, flush_period_s=None) as again:
        assert again.get_latest_position("example") == pos(9)  # flushed on stop
        assert again.get_latest_position("other") is None


def test_file_log_position_flushes_in_the_background(tmp_path: Path) -> None:
    done = threading.Event()
    flushed: list[tuple[str, LogPosition]] = []

    def on_flush(destination: str, position: LogPosition) -> None:
        flushed.append((destination, position))
        done.set()

    with FileLogPositionManager(tmp_path, flush_period_s=0.01, on_flush=on_flush) as mgr:
        mgr.persist_position("example", pos(4))
        assert done.wait(10), "the background flusher never wrote the position"
        assert flushed == [("example", pos(4))]
        assert LogPosition.from_json(mgr.path_of("example").read_text()) == pos(4)


def test_file_log_position_reads_canals_document(tmp_path: Path) -> None:
    (tmp_path / "example").mkdir()
    (tmp_path / "example" / "parse.dat").write_text(
        '{"identity":{"slaveId":-1,"sourceAddress":{"address":"127.0.0.1","port":3306}},'
        '"postion":{"gtid":"","included":false,"journalName":"mysql-bin.000001","position":4,"serverId":1,'
        '"timestamp":1700000000000}}'
    )
    with FileLogPositionManager(tmp_path, flush_period_s=None) as mgr:
        got = mgr.get_latest_position("example")
    assert got is not None and got.position.journal_name == "mysql-bin.000001" and got.position.position == 4


def test_file_log_position_corrupt_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "example").mkdir()
    (tmp_path / "example" / "parse.dat").write_text('{"postion": {"journalName": ')
    with FileLogPositionManager(tmp_path, flush_period_s=None) as mgr, pytest.raises(CorruptMetaError, match="parse"):
        mgr.get_latest_position("example")
    (tmp_path / "example" / "parse.dat").write_text('{"nothing": 1}')
    with FileLogPositionManager(tmp_path, flush_period_s=None) as mgr, pytest.raises(CorruptMetaError):
        mgr.get_latest_position("example")


# ------------------------------------------------------------------------------------------------ model-based


@attrs.define
class PositionModel:
    positions: dict[int, LogPosition] = attrs.field(factory=dict)
    persisted: dict[int, LogPosition] = attrs.field(factory=dict)


class LogPositionMachine(RuleBasedStateMachine):
    """persist / flush / restart / crash against a model; subclasses say what survives."""

    persists_at_once: ClassVar[bool] = False
    anything_survives: ClassVar[bool] = True
    can_crash: ClassVar[bool] = True
    can_flush: ClassVar[bool] = False

    def __init__(self) -> None:
        super().__init__()
        self.model = PositionModel()
        self.prefix = f"p{secrets.token_hex(4)}"
        self.mgr = self.make()
        self.mgr.start()

    def make(self) -> LogPositionManager:
        raise NotImplementedError

    def dest(self, index: int) -> str:
        return f"{self.prefix}{index}"

    def teardown(self) -> None:
        self.mgr.stop()

    @rule(index=st.integers(0, DEST_COUNT - 1), position=positions)
    def persist(self, index: int, position: LogPosition) -> None:
        self.mgr.persist_position(self.dest(index), position)
        self.model.positions[index] = position
        if self.persists_at_once:
            self.model.persisted[index] = position

    @rule()
    def flush(self) -> None:
        if self.can_flush:
            self.mgr.flush()  # type: ignore[attr-defined]
            self.model.persisted = dict(self.model.positions)

    @rule()
    def restart(self) -> None:
        self.mgr.stop()
        self.model.persisted = dict(self.model.positions) if self.anything_survives else {}
        self.mgr = self.make()
        self.mgr.start()
        self.model.positions = dict(self.model.persisted)

    @rule()
    def crash(self) -> None:
        if self.can_crash:
            self.mgr = self.make()
            self.mgr.start()
            self.model.positions = dict(self.model.persisted)

    @invariant()
    def matches(self) -> None:
        for index in range(DEST_COUNT):
            assert self.mgr.get_latest_position(self.dest(index)) == self.model.positions.get(index)


class MemoryPositionMachine(LogPositionMachine):
    anything_survives = False
    can_crash = False

    def make(self) -> LogPositionManager:
        return MemoryLogPositionManager()


class FilePositionMachine(LogPositionMachine):
    can_flush = True

    def __init__(self) -> None:
        self.tmp = tempfile.TemporaryDirectory(prefix="pycanal-pos-")
        super().__init__()

    def make(self) -> LogPositionManager:
        return FileLogPositionManager(self.tmp.name, flush_period_s=None)

    def teardown(self) -> None:
        try:
            super().teardown()
        finally:
            self.tmp.cleanup()


class MetaPositionMachine(RuleBasedStateMachine):
    """The meta-based manager always answers the minimum subscribed cursor; persist changes nothing. Wrapped in a
    failback behind a memory primary, reads come from the primary once it has a position."""

    def __init__(self) -> None:
        super().__init__()
        self.meta = MemoryMetaManager()
        self.primary = MemoryLogPositionManager()
        self.meta_positions = MetaLogPositionManager(self.meta)
        self.failback = FailbackLogPositionManager(self.primary, self.meta_positions)
        self.failback.start()
        self.cursors: dict[tuple[int, int], LogPosition] = {}
        self.subs: set[tuple[int, int]] = set()
        self.primary_model: dict[int, LogPosition] = {}

    def teardown(self) -> None:
        self.failback.stop()
        assert not self.meta.is_started

    @rule(index=st.integers(0, DEST_COUNT - 1), client_id=st.sampled_from([1001, 1002, 1003]))
    def subscribe(self, index: int, client_id: int) -> None:
        self.meta.subscribe(ClientIdentity(f"d{index}", client_id))
        self.subs.add((index, client_id))

    @rule(index=st.integers(0, DEST_COUNT - 1), client_id=st.sampled_from([1001, 1002, 1003]))
    def unsubscribe(self, index: int, client_id: int) -> None:
        self.meta.unsubscribe(ClientIdentity(f"d{index}", client_id))
        self.subs.discard((index, client_id))
        self.cursors.pop((index, client_id), None)

    @rule(index=st.integers(0, DEST_COUNT - 1), client_id=st.sampled_from([1001, 1002, 1003]), position=positions)
    def ack(self, index: int, client_id: int, position: LogPosition) -> None:
        if (index, client_id) in self.subs:
            self.meta.update_cursor(ClientIdentity(f"d{index}", client_id), position)
            self.cursors[(index, client_id)] = position

    @rule(index=st.integers(0, DEST_COUNT - 1), position=positions)
    def persist_via_meta(self, index: int, position: LogPosition) -> None:
        self.meta_positions.persist_position(f"d{index}", position)  # a no-op

    @rule(index=st.integers(0, DEST_COUNT - 1), position=positions)
    def persist_via_failback(self, index: int, position: LogPosition) -> None:
        self.failback.persist_position(f"d{index}", position)
        self.primary_model[index] = position

    @invariant()
    def matches(self) -> None:
        for index in range(DEST_COUNT):
            present = [p for (i, _c), p in self.cursors.items() if i == index]
            expected_meta = min(present) if present else None
            assert self.meta_positions.get_latest_position(f"d{index}") == expected_meta
            expected = self.primary_model.get(index, expected_meta)
            assert self.failback.get_latest_position(f"d{index}") == expected


def run_machine(machine: type[RuleBasedStateMachine], examples: int, steps: int) -> None:
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=steps,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
        ),
    )


def test_memory_positions_match_model() -> None:
    run_machine(MemoryPositionMachine, 60, 30)


def test_file_positions_match_model() -> None:
    run_machine(FilePositionMachine, 60, 30)


def test_meta_and_failback_positions_match_model() -> None:
    run_machine(MetaPositionMachine, 100, 40)
