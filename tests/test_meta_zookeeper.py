"""ZooKeeper and period-mixed meta managers against a real private ZooKeeper: canal's layout, Java canal's cursor
JSON, fenced cursor writes, client ownership, write-through subscriptions and periodic cursor flushes."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError

from canal.client import ClientIdentity
from canal.errors import BatchOrderError, FencedWriteError, MetaError, UnknownBatchError
from canal.meta import (
    ClientNotSubscribedError,
    CorruptMetaError,
    DestinationSnapshot,
    MetaManager,
    PeriodMixedMetaManager,
    ZkFence,
    ZooKeeperMetaManager,
    fenced_commit,
)
from canal.position import EntryPosition, LogIdentity, LogPosition, PositionRange

pytestmark = pytest.mark.integration

JAVA_CURSOR = (
    '{"@type":"com.alibaba.otter.canal.protocol.position.LogPosition","identity":{"slaveId":-1,'
    '"sourceAddress":{"address":"127.0.0.1","port":3306}},"postion":{"gtid":"","included":false,'
    '"journalName":"mysql-bin.000001","position":4,"serverId":1,"timestamp":1700000000000}}'
)
DEST = "/otter/canal/destinations/example"


def cursor(n: int, rows: int = 0) -> LogPosition:
    return LogPosition(
        LogIdentity("10.0.0.5:3306", 3), EntryPosition("mysql-bin.000002", n, 1_700_000_000_000, 2), rows
    )


def prange(n: int) -> PositionRange:
    start = EntryPosition("mysql-bin.000002", n)
    return PositionRange(
        start,
        EntryPosition("mysql-bin.000002", n + 50),
        EntryPosition("mysql-bin.000002", n + 40, included=True),
        start,
        0,
    )


@pytest.fixture
def kz(zookeeper: Any) -> KazooClient:
    client: KazooClient = zookeeper.client()
    return client


@pytest.fixture
def zk_meta(kz: KazooClient) -> Any:
    with ZooKeeperMetaManager(kz) as mgr:
        yield mgr


def test_reads_a_cursor_written_by_java_canal(kz: KazooClient, zk_meta: ZooKeeperMetaManager) -> None:
    kz.create(f"{DEST}/1001/cursor", JAVA_CURSOR.encode(), makepath=True)
    got = zk_meta.get_cursor(ClientIdentity("example"))
    assert got == LogPosition(
        LogIdentity("127.0.0.1:3306", -1), EntryPosition("mysql-bin.000001", 4, 1700000000000, 1, None, False), 0
    )
    assert zk_meta.list_all_subscribe_info("example") == [ClientIdentity("example")]


def test_uses_canals_layout(kz: KazooClient, zk_meta: ZooKeeperMetaManager) -> None:
    client = ClientIdentity("example", 1001, r"shop\..*")
    zk_meta.subscribe(client)
    zk_meta.update_cursor(client, cursor(120, rows=2))
    assert zk_meta.add_batch(client, prange(1)) == 1
    assert zk_meta.add_batch(client, prange(2)) == 2
    assert kz.get(f"{DEST}/1001/filter")[0] == rb"shop\..*"
    document = json.loads(kz.get(f"{DEST}/1001/cursor")[0])
    assert document["@type"] == "com.alibaba.otter.canal.protocol.position.LogPosition"
    assert document["postion"]["journalName"] == "mysql-bin.000002" and document["postion"]["position"] == 120
    assert document["identity"] == {"slaveId": 3, "sourceAddress": {"address": "10.0.0.5", "port": 3306}}
    assert sorted(kz.get_children(f"{DEST}/1001/mark")) == ["0000000001", "0000000002"]
    assert PositionRange.from_json(kz.get(f"{DEST}/1001/mark/0000000002")[0]) == prange(2)
    # re-subscribing without a filter removes the filter node; canal's other nodes are not clients
    zk_meta.subscribe(ClientIdentity("example"))
    assert kz.exists(f"{DEST}/1001/filter") is None
    for other in ("running", "cluster", "parse"):
        kz.ensure_path(f"{DEST}/{other}")
    assert zk_meta.list_all_subscribe_info("example") == [ClientIdentity("example")]
    zk_meta.unsubscribe(client)
    assert kz.exists(f"{DEST}/1001") is None


def test_batch_rules_in_zookeeper(zk_meta: ZooKeeperMetaManager) -> None:
    client = ClientIdentity("example")
    with pytest.raises(ClientNotSubscribedError):
        zk_meta.add_batch(client, prange(0))
    zk_meta.subscribe(client)
    assert [zk_meta.add_batch(client, prange(i)) for i in range(3)] == [1, 2, 3]
    with pytest.raises(BatchOrderError):
        zk_meta.remove_batch(client, 3)
    with pytest.raises(UnknownBatchError):
        zk_meta.remove_batch(client, 7)
    assert list(zk_meta.list_all_batchs(client)) == [1, 2, 3]
    assert zk_meta.remove_batch(client, 1) == prange(0)
    zk_meta.clear_all_batchs(client)
    assert zk_meta.add_batch(client, prange(9), 20) == 20
    assert zk_meta.add_batch(client, prange(10)) == 21  # the counter follows explicit ids
    with pytest.raises(BatchOrderError):
        zk_meta.add_batch(client, prange(11), 21)


def test_batch_ids_survive_a_new_manager(kz: KazooClient) -> None:
    client = ClientIdentity("example")
    with ZooKeeperMetaManager(kz) as first:
        first.subscribe(client)
        first.add_batch(client, prange(0))
        first.add_batch(client, prange(1))
        first.remove_batch(client, 1)
    with ZooKeeperMetaManager(kz) as second:
        assert second.list_all_batchs(client) == {2: prange(1)}
        assert second.add_batch(client, prange(2)) == 3


def test_concurrent_managers_never_hand_out_the_same_batch_id(kz: KazooClient, zookeeper: Any) -> None:
    client = ClientIdentity("example")
    managers = [ZooKeeperMetaManager(kz), ZooKeeperMetaManager(zookeeper.client())]
    for mgr in managers:
        mgr.start()
    managers[0].subscribe(client)
    got: list[int] = []
    lock = threading.Lock()

    def add(mgr: ZooKeeperMetaManager) -> None:
        for i in range(15):
            batch_id = mgr.add_batch(client, prange(i))
            with lock:
                got.append(batch_id)

    threads = [threading.Thread(target=add, args=(m,)) for m in managers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == list(range(1, 31))
    assert list(managers[0].list_all_batchs(client)) == list(range(1, 31))


def test_a_corrupt_cursor_node_is_a_clear_error(kz: KazooClient, zk_meta: ZooKeeperMetaManager) -> None:
    kz.create(f"{DEST}/1001/cursor", b'{"@type": "x", "postion": ', makepath=True)
    with pytest.raises(CorruptMetaError, match=f"{DEST}/1001/cursor"):
        zk_meta.get_cursor(ClientIdentity("example"))


def test_fenced_cursor_writes(kz: KazooClient, zk_meta: ZooKeeperMetaManager) -> None:
    client = ClientIdentity("example")
    zk_meta.subscribe(client)
    kz.create(f"{DEST}/running", b'{"cid":1}', makepath=True)
    version = kz.exists(f"{DEST}/running").version
    zk_meta.set_fence((f"{DEST}/running", version))
    zk_meta.update_cursor(client, cursor(10))
    kz.set(f"{DEST}/running", b'{"cid":2}')  # somebody else took over
    with pytest.raises(FencedWriteError, match="another version"):
        zk_meta.update_cursor(client, cursor(20))
    assert zk_meta.get_cursor(client) == cursor(10)  # nothing written
    kz.delete(f"{DEST}/running")
    with pytest.raises(FencedWriteError, match="is gone"):
        zk_meta.update_cursor(client, cursor(30))
    claim: list[ZkFence | None] = [None]
    zk_meta.set_fence(lambda: claim[0])
    with pytest.raises(FencedWriteError, match="does not own"):
        zk_meta.update_cursor(client, cursor(40))
    kz.create(f"{DEST}/running", b"{}")
    claim[0] = ZkFence(f"{DEST}/running", 0)
    zk_meta.update_cursor(client, cursor(50))  # the callable's current claim holds
    assert zk_meta.get_cursor(client) == cursor(50)
    zk_meta.set_fence(None)
    zk_meta.update_cursor(client, cursor(60))
    assert zk_meta.get_cursor(client) == cursor(60)


def test_fenced_commit_applies_all_or_nothing(kz: KazooClient) -> None:
    kz.create("/owner", b"")
    ops = [lambda t: t.create("/a", b"1"), lambda t: t.create("/b", b"2")]
    with pytest.raises(FencedWriteError):
        fenced_commit(kz, ("/owner", 5), ops)
    assert kz.exists("/a") is None and kz.exists("/b") is None
    fenced_commit(kz, ("/owner", 0), ops)
    assert kz.get("/b")[0] == b"2"
    with pytest.raises(NodeExistsError):
        fenced_commit(kz, ("/owner", 0), [lambda t: t.create("/c", b""), lambda t: t.create("/a", b"")])
    assert kz.exists("/c") is None


def test_cursor_writes_never_resurrect_an_unsubscribed_client(zk_meta: ZooKeeperMetaManager, kz: KazooClient) -> None:
    client = ClientIdentity("example")
    with pytest.raises(ClientNotSubscribedError):
        zk_meta.update_cursor(client, cursor(1))
    assert kz.exists(f"{DEST}/1001") is None


def test_hosts_string_owns_its_client(zookeeper: Any) -> None:
    mgr = ZooKeeperMetaManager(zookeeper.hosts)
    assert isinstance(mgr, MetaManager)
    with mgr:
        own = mgr.zk
        mgr.subscribe(ClientIdentity("example"))
        assert own.connected
    assert not own.connected
    with pytest.raises(MetaError):
        _ = mgr.zk


def test_an_unreachable_server_is_a_meta_error_and_leaves_nothing_running() -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens here
    before = threading.active_count()
    mgr = ZooKeeperMetaManager(f"127.0.0.1:{port}", timeout_s=1.0)
    with pytest.raises(MetaError, match="connect"):
        mgr.start()
    assert not mgr.is_started
    assert threading.active_count() <= before


def test_zookeeper_failures_are_meta_errors(zookeeper: Any) -> None:
    kz = zookeeper.client()
    mgr = ZooKeeperMetaManager(kz)
    mgr.start()
    kz.stop()
    with pytest.raises(MetaError, match="ZooKeeper failed"):
        mgr.has_subscribe(ClientIdentity("example"))


# ------------------------------------------------------------------------------------------------ period-mixed


def test_period_mixed_writes_subscriptions_through_and_cursors_on_flush(kz: KazooClient) -> None:
    client = ClientIdentity("example", 1001, "x")
    flushed: list[DestinationSnapshot] = []
    with (
        ZooKeeperMetaManager(kz) as view,
        PeriodMixedMetaManager(ZooKeeperMetaManager(kz), flush_period_s=None, on_flush=flushed.append) as mixed,
    ):
        mixed.subscribe(client)
        assert view.list_all_subscribe_info("example")[0].filter == "x"
        mixed.update_cursor(client, cursor(5))
        mixed.add_batch(client, prange(1))
        assert view.get_cursor(client) is None and view.list_all_batchs(client) == {}
        mixed.flush()
        assert view.get_cursor(client) == cursor(5) and len(flushed) == 1
        mixed.flush()  # nothing changed: nothing written
        assert len(flushed) == 1
        mixed.update_cursor(client, cursor(6))
    assert ZooKeeperMetaManager(kz).zk is kz
    with ZooKeeperMetaManager(kz) as view:
        assert view.get_cursor(client) == cursor(6)  # flushed on stop


def test_period_mixed_flushes_in_the_background(kz: KazooClient) -> None:
    client = ClientIdentity("example")
    seen = threading.Event()

    def on_flush(snapshot: DestinationSnapshot) -> None:
        if snapshot.cursor_of(1001) == cursor(77):
            seen.set()

    with PeriodMixedMetaManager(ZooKeeperMetaManager(kz), flush_period_s=0.02, on_flush=on_flush) as mixed:
        mixed.subscribe(client)
        mixed.update_cursor(client, cursor(77))
        assert seen.wait(10)
        with ZooKeeperMetaManager(kz) as view:
            assert view.get_cursor(client) == cursor(77)


def test_period_mixed_rewrites_a_cursor_after_resubscribe(kz: KazooClient) -> None:
    """Unsubscribing drops the cursor in ZooKeeper; the same cursor set again must be written again."""
    client = ClientIdentity("example")
    mixed = PeriodMixedMetaManager(ZooKeeperMetaManager(kz), flush_period_s=None)
    mixed.start()
    mixed.subscribe(client)
    mixed.update_cursor(client, cursor(5))
    mixed.flush()
    mixed.unsubscribe(client)
    mixed.subscribe(client)
    mixed.update_cursor(client, cursor(5))
    mixed.flush()
    with ZooKeeperMetaManager(kz) as view:  # as after a crash: only what reached ZooKeeper
        assert view.get_cursor(client) == cursor(5)
    mixed.stop()


def test_period_mixed_loads_what_is_in_zookeeper(kz: KazooClient) -> None:
    kz.create(f"{DEST}/1001/cursor", JAVA_CURSOR.encode(), makepath=True)
    kz.create(f"{DEST}/1002/filter", b"a\\.b", makepath=True)
    with PeriodMixedMetaManager(ZooKeeperMetaManager(kz), flush_period_s=None) as mixed:
        assert [(c.client_id, c.filter) for c in mixed.list_all_subscribe_info("example")] == [
            (1001, ""),
            (1002, r"a\.b"),
        ]
        got = mixed.get_cursor(ClientIdentity("example"))
        assert got is not None and got.position.journal_name == "mysql-bin.000001"


def test_period_mixed_flush_is_fenced(kz: KazooClient) -> None:
    client = ClientIdentity("example")
    kz.create(f"{DEST}/running", b"", makepath=True)
    zk_meta = ZooKeeperMetaManager(kz, fence=(f"{DEST}/running", 0))
    mixed = PeriodMixedMetaManager(zk_meta, flush_period_s=None)
    mixed.start()
    mixed.subscribe(client)
    mixed.update_cursor(client, cursor(1))
    mixed.flush()
    kz.set(f"{DEST}/running", b"other")
    mixed.update_cursor(client, cursor(2))
    with pytest.raises(FencedWriteError):
        mixed.flush()
    with pytest.raises(FencedWriteError):
        mixed.stop()  # the final flush is refused too, and says so
    assert not mixed.is_started and not zk_meta.is_started
    with ZooKeeperMetaManager(kz) as view:
        assert view.get_cursor(client) == cursor(1)


def test_schema_history_lives_beside_the_cursors_compressed_and_fenced(
    kz: KazooClient, zk_meta: ZooKeeperMetaManager
) -> None:

    from canal.schema import SchemaCatalog
    from canal.schema.history import SchemaHistory
    from canal.sql import read_statement

    catalog = SchemaCatalog(database="app", mariadb=True)
    for i in range(300):  # a history that would not fit a node uncompressed... compresses well below the limit
        catalog.apply(read_statement(f"CREATE TABLE t{i} (id INT PRIMARY KEY, name VARCHAR(64), note TEXT)"))
    history = SchemaHistory(zk_meta.schema_history_store("example"))
    history.bootstrap(EntryPosition("mysql-bin.000001", 4), catalog)
    history.apply(EntryPosition("mysql-bin.000001", 100), "app", "ALTER TABLE t1 ADD COLUMN b INT", next_offset=150)
    data, _ = kz.get(f"{DEST}/schema_history")
    assert len(data) < len(history.to_json()) / 5  # zlib
    again = SchemaHistory(zk_meta.schema_history_store("example"))  # another process, same ZooKeeper
    assert [c.name for c in again.columns("app", "t1") or []] == ["id", "name", "note", "b"]

    kz.create(f"{DEST}/running", b'{"cid":1}', makepath=True)
    zk_meta.set_fence((f"{DEST}/running", kz.exists(f"{DEST}/running").version))
    kz.set(f"{DEST}/running", b'{"cid":2}')  # another process owns the destination now
    with pytest.raises(FencedWriteError):
        history.apply(EntryPosition("mysql-bin.000001", 200), "app", "DROP TABLE t2", next_offset=250)
    assert kz.get(f"{DEST}/schema_history")[0] == data  # nothing written
    assert history.table("app", "t2") is not None and history.records == 1  # nor changed in memory
    kz.set(f"{DEST}/schema_history", b"not zlib")
    with pytest.raises(MetaError, match="schema history"):
        _ = SchemaHistory(zk_meta.schema_history_store("example")).is_empty


class Calls:
    """A real kazoo client that notes, in order, each read sent (``send``), each wait for an answer (``wait``) and
    each transaction committed (``commit``), with the path read."""

    def __init__(self, client: KazooClient) -> None:
        self._client = client
        self.log: list[tuple[str, str]] = []

    def _sync(self, name: str) -> Any:
        def read(path: str, *args: Any, **kwargs: Any) -> Any:
            self.log.append(("send", path))
            self.log.append(("wait", path))
            return getattr(self._client, name)(path, *args, **kwargs)

        return read

    def _async(self, name: str) -> Any:
        calls = self

        def send(path: str, *args: Any, **kwargs: Any) -> Any:
            calls.log.append(("send", path))
            result = getattr(calls._client, name)(path, *args, **kwargs)

            class Result:
                def get(self, *a: Any, **k: Any) -> Any:
                    calls.log.append(("wait", path))
                    return result.get(*a, **k)

            return Result()

        return send

    def transaction(self) -> Any:
        tx, calls = self._client.transaction(), self

        class Transaction:
            def commit(self) -> Any:
                calls.log.append(("commit", ""))
                return tx.commit()

            def __getattr__(self, name: str) -> Any:
                return getattr(tx, name)

        return Transaction()

    def __getattr__(self, name: str) -> Any:
        if name in ("get", "exists", "get_children"):
            return self._sync(name)
        if name in ("get_async", "exists_async", "get_children_async"):
            return self._async(name)
        return getattr(self._client, name)


def test_a_cursor_overwrite_is_one_round_trip(kz: KazooClient) -> None:
    """A write-through cursor is written at every ack (and an ack in flight is part of every hand-over's gap): it
    looked whether the subscription and the cursor existed first, three round trips where one does."""
    calls = Calls(kz)
    client = ClientIdentity("example", 1001)
    fence = ZkFence(f"{DEST}/epoch", 0)
    kz.ensure_path(fence.path)
    with ZooKeeperMetaManager(calls, fence=fence) as mgr:  # type: ignore[arg-type]
        mgr.subscribe(client)
        mgr.update_cursor(client, cursor(100))  # the first write creates the node
        calls.log.clear()
        mgr.update_cursor(client, cursor(200))
        assert calls.log == [("commit", "")]
        assert mgr.get_cursor(client) == cursor(200)
        kz.set(fence.path, b"another owner")  # the fence moves: the overwrite is refused, nothing written
        with pytest.raises(FencedWriteError):
            mgr.update_cursor(client, cursor(300))
        mgr.unsubscribe(client)
    with ZooKeeperMetaManager(kz, fence=(fence.path, 1)) as mgr:  # an unsubscribed client's cursor is not made
        with pytest.raises(ClientNotSubscribedError):
            mgr.update_cursor(client, cursor(400))
        assert kz.exists(f"{DEST}/1001") is None


def test_a_destination_loads_in_two_round_trips(kz: KazooClient) -> None:
    """An HA takeover's start loads the destination (period-mixed meta): the list of subscriptions, then every filter
    and cursor read at once -- they were read one after the other."""
    with ZooKeeperMetaManager(kz) as mgr:
        for client_id, client_filter in ((1001, ""), (1002, r"shop\..*"), (1003, "")):
            mgr.subscribe(ClientIdentity("example", client_id, client_filter))
        mgr.update_cursor(ClientIdentity("example", 1001), cursor(100))
        mgr.update_cursor(ClientIdentity("example", 1002), cursor(200))
    calls = Calls(kz)
    with PeriodMixedMetaManager(ZooKeeperMetaManager(calls), flush_period_s=0) as meta:  # type: ignore[arg-type]
        clients = meta.list_all_subscribe_info("example")
        assert [(c.client_id, c.filter) for c in clients] == [(1001, ""), (1002, r"shop\..*"), (1003, "")]
        cursors = [meta.get_cursor(c) for c in clients]
        assert cursors == [cursor(100), cursor(200), None]
    sends = [i for i, (what, _path) in enumerate(calls.log) if what == "send"]
    waits = [i for i, (what, _path) in enumerate(calls.log) if what == "wait"]
    assert len(sends) == 7 and len(waits) == 7, calls.log  # the list, three filters and three cursors
    assert calls.log[0:2] == [("send", DEST), ("wait", DEST)]
    assert max(sends[1:]) < min(waits[1:]), calls.log  # all six sent before the first answer is awaited
