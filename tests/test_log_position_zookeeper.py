"""ZooKeeper and period-mixed log-position managers against a real private ZooKeeper."""

from __future__ import annotations

import json
import threading
from typing import Any, ClassVar

import pytest
from kazoo.client import KazooClient
from test_log_position import LogPositionMachine, pos, run_machine

from canal.errors import FencedWriteError
from canal.meta import CorruptMetaError
from canal.parse.log_position import (
    FailbackLogPositionManager,
    LogPositionManager,
    MemoryLogPositionManager,
    PeriodMixedLogPositionManager,
    ZooKeeperLogPositionManager,
)
from canal.position import LogPosition

pytestmark = pytest.mark.integration

PARSE = "/otter/canal/destinations/example/parse"
JAVA_POSITION = (
    '{"identity":{"slaveId":-1,"sourceAddress":{"address":"127.0.0.1","port":3306}},"postion":{"gtid":"",'
    '"included":false,"journalName":"mysql-bin.000001","position":4,"serverId":1,"timestamp":1700000000000}}'
)


@pytest.fixture
def kz(zookeeper: Any) -> KazooClient:
    client: KazooClient = zookeeper.client()
    return client


def test_zookeeper_position_uses_canals_parse_node(kz: KazooClient) -> None:
    with ZooKeeperLogPositionManager(kz) as mgr:
        assert isinstance(mgr, LogPositionManager)
        assert mgr.get_latest_position("example") is None
        mgr.persist_position("example", pos(12, rows=1))
        document = json.loads(kz.get(PARSE)[0])
        assert document["postion"]["journalName"] == "mysql-bin.000001" and document["rowsDone"] == 1
        assert mgr.get_latest_position("example") == pos(12, rows=1)
        mgr.persist_position("example", pos(13))
        assert mgr.get_latest_position("example") == pos(13)


def test_zookeeper_position_reads_java_canals_document(kz: KazooClient) -> None:
    kz.create(PARSE, JAVA_POSITION.encode(), makepath=True)
    with ZooKeeperLogPositionManager(kz) as mgr:
        got = mgr.get_latest_position("example")
    assert got is not None and got.position.position == 4 and got.identity.source_address == "127.0.0.1:3306"


def test_zookeeper_position_corrupt_node(kz: KazooClient) -> None:
    kz.create(PARSE, b"{oops", makepath=True)
    with ZooKeeperLogPositionManager(kz) as mgr, pytest.raises(CorruptMetaError, match=PARSE):
        mgr.get_latest_position("example")


def test_zookeeper_position_writes_are_fenced(kz: KazooClient) -> None:
    kz.create("/otter/canal/destinations/example/running", b"", makepath=True)
    with ZooKeeperLogPositionManager(kz, fence=("/otter/canal/destinations/example/running", 0)) as mgr:
        mgr.persist_position("example", pos(1))
        kz.set("/otter/canal/destinations/example/running", b"taken")
        with pytest.raises(FencedWriteError):
            mgr.persist_position("example", pos(2))
        assert mgr.get_latest_position("example") == pos(1)


def test_period_mixed_position_flushes_on_period_and_stop(zookeeper: Any, kz: KazooClient) -> None:
    done = threading.Event()

    def on_flush(destination: str, position: LogPosition) -> None:
        if position == pos(30):
            done.set()

    with ZooKeeperLogPositionManager(kz) as view:
        with PeriodMixedLogPositionManager(
            ZooKeeperLogPositionManager(zookeeper.hosts), flush_period_s=0.01, on_flush=on_flush
        ) as mixed:
            mixed.persist_position("example", pos(30))
            assert done.wait(10)
            assert view.get_latest_position("example") == pos(30)
            mixed.persist_position("example", pos(31))
        assert view.get_latest_position("example") == pos(31)  # flushed on stop


def test_failback_from_memory_to_zookeeper(kz: KazooClient) -> None:
    kz.create(PARSE, pos(3).to_json().encode(), makepath=True)
    primary = MemoryLogPositionManager()
    with FailbackLogPositionManager(primary, ZooKeeperLogPositionManager(kz)) as mgr:
        assert mgr.get_latest_position("example") == pos(3)
        mgr.persist_position("example", pos(4))
        assert mgr.get_latest_position("example") == pos(4)
        assert LogPosition.from_json(kz.get(PARSE)[0]) == pos(3)  # writes go to the primary


class ZooKeeperPositionMachine(LogPositionMachine):
    zk: ClassVar[KazooClient]
    persists_at_once = True

    def make(self) -> LogPositionManager:
        return ZooKeeperLogPositionManager(self.zk)


class PeriodMixedPositionMachine(LogPositionMachine):
    zk: ClassVar[KazooClient]
    can_flush = True

    def make(self) -> LogPositionManager:
        return PeriodMixedLogPositionManager(ZooKeeperLogPositionManager(self.zk), flush_period_s=None)


def test_zookeeper_positions_match_model(kz: KazooClient) -> None:
    run_machine(type("ZkPositions", (ZooKeeperPositionMachine,), {"zk": kz}), 20, 25)


def test_period_mixed_positions_match_model(kz: KazooClient) -> None:
    run_machine(type("PeriodPositions", (PeriodMixedPositionMachine,), {"zk": kz}), 25, 30)
