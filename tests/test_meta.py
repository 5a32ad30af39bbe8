"""Meta managers without services: client identity, the batch rules, memory and file managers, atomic JSON files."""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from canal.client import DEFAULT_CLIENT_ID, ClientIdentity
from canal.errors import BatchOrderError, ConfigError, MetaError, UnknownBatchError
from canal.meta import (
    ClientNotSubscribedError,
    CorruptMetaError,
    DestinationSnapshot,
    FileMetaManager,
    MemoryMetaManager,
    MetaManager,
    MetaNotStartedError,
    PeriodicFlusher,
    read_json,
    write_json_atomic,
)
from canal.position import EntryPosition, LogIdentity, LogPosition, PositionRange

JAVA_CURSOR = {
    "@type": "com.alibaba.otter.canal.protocol.position.LogPosition",
    "identity": {"slaveId": -1, "sourceAddress": {"address": "127.0.0.1", "port": 3306}},
    "postion": {
        "gtid": "",
        "included": False,
        "journalName": "mysql-bin.000001",
        "position": 4,
        "serverId": 1,
        "timestamp": 1700000000000,
    },
}


def cursor(n: int, rows: int = 0) -> LogPosition:
    return LogPosition(
        LogIdentity("127.0.0.1:3306", 11), EntryPosition("mysql-bin.000003", 100 + n, 1_700_000_000_000, 1), rows
    )


def prange(n: int) -> PositionRange:
    start = EntryPosition("mysql-bin.000003", 100 + n)
    return PositionRange(start, EntryPosition("mysql-bin.000003", 150 + n), None, start, n)


# ------------------------------------------------------------------------------------------------ ClientIdentity


def test_client_identity_defaults_to_canals_client_id() -> None:
    client = ClientIdentity("example")
    assert client.client_id == DEFAULT_CLIENT_ID == 1001
    assert client.filter == "" and not client.has_filter
    assert str(client) == "example/1001"


def test_client_identity_equality_ignores_the_filter() -> None:
    a, b = ClientIdentity("example", 1001, r"shop\..*"), ClientIdentity("example", 1001)
    assert a == b and hash(a) == hash(b)
    assert a != ClientIdentity("example", 1002) and a != ClientIdentity("other")
    assert a.with_filter("x").filter == "x"


@pytest.mark.parametrize(
    ("args", "key"),
    [
        (("",), "destination"),
        (("a/b",), "destination"),
        (("..",), "destination"),
        (("x", -1), "client_id"),
        (("x", 40000), "client_id"),
        (("x", True), "client_id"),
        (("x", 1, None), "filter"),
    ],
)
def test_client_identity_rejects_bad_values(args: tuple[Any, ...], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        ClientIdentity(*args)
    assert err.value.key == key


# ------------------------------------------------------------------------------------------------ memory semantics


@pytest.fixture
def memory() -> Any:
    with MemoryMetaManager() as mgr:
        yield mgr


def test_every_manager_is_a_meta_manager(tmp_path: Path) -> None:
    assert isinstance(MemoryMetaManager(), MetaManager)
    assert isinstance(FileMetaManager(tmp_path), MetaManager)


def test_subscriptions_are_listed_by_client_id_with_filters(memory: MemoryMetaManager) -> None:
    memory.subscribe(ClientIdentity("example", 1002))
    memory.subscribe(ClientIdentity("example", 1001, "a"))
    memory.subscribe(ClientIdentity("other", 1001))
    memory.subscribe(ClientIdentity("example", 1001, "b"))  # re-subscribing replaces the filter
    assert [(c.client_id, c.filter) for c in memory.list_all_subscribe_info("example")] == [(1001, "b"), (1002, "")]
    assert memory.has_subscribe(ClientIdentity("other"))
    assert not memory.has_subscribe(ClientIdentity("nobody"))
    assert memory.list_all_subscribe_info("nobody") == []


def test_batches_get_increasing_ids_and_ack_in_order(memory: MemoryMetaManager) -> None:
    client = ClientIdentity("example")
    memory.subscribe(client)
    ids = [memory.add_batch(client, prange(i)) for i in range(3)]
    assert ids == [1, 2, 3]
    assert memory.get_first_batch(client) == prange(0) and memory.get_last_batch(client) == prange(2)
    with pytest.raises(BatchOrderError, match="ack batch 1 first"):
        memory.remove_batch(client, 2)
    with pytest.raises(UnknownBatchError, match="batch 9 is not outstanding"):
        memory.remove_batch(client, 9)
    assert list(memory.list_all_batchs(client)) == [1, 2, 3]  # both refusals changed nothing
    assert memory.remove_batch(client, 1) == prange(0)
    with pytest.raises(UnknownBatchError):
        memory.remove_batch(client, 1)  # already acked
    memory.clear_all_batchs(client)
    assert memory.list_all_batchs(client) == {} and memory.get_first_batch(client) is None
    assert memory.add_batch(client, prange(5)) == 4  # ids never repeat within a run


def test_explicit_batch_ids_must_be_newer_than_outstanding_ones(memory: MemoryMetaManager) -> None:
    client = ClientIdentity("example")
    memory.subscribe(client)
    assert memory.add_batch(client, prange(0), 10) == 10
    with pytest.raises(BatchOrderError):
        memory.add_batch(client, prange(1), 10)
    with pytest.raises(BatchOrderError):
        memory.add_batch(client, prange(1), 3)
    assert memory.add_batch(client, prange(1)) == 11
    assert memory.get_batch(client, 10) == prange(0) and memory.get_batch(client, 3) is None


def test_remove_batchs_from_rolls_back_one_batch_and_its_successors(memory: MemoryMetaManager) -> None:
    client = ClientIdentity("example")
    memory.subscribe(client)
    for i in range(4):
        memory.add_batch(client, prange(i))
    assert memory.remove_batchs_from(client, 3) == {3: prange(2), 4: prange(3)}
    assert list(memory.list_all_batchs(client)) == [1, 2]
    with pytest.raises(UnknownBatchError):
        memory.remove_batchs_from(client, 3)


def test_cursor_and_mark_writes_need_a_subscription(memory: MemoryMetaManager) -> None:
    client = ClientIdentity("example")
    with pytest.raises(ClientNotSubscribedError):
        memory.update_cursor(client, cursor(1))
    with pytest.raises(ClientNotSubscribedError):
        memory.add_batch(client, prange(1))
    memory.subscribe(client)
    memory.update_cursor(client, cursor(1))
    memory.add_batch(client, prange(1))
    memory.unsubscribe(client)  # drops cursor and marks
    memory.subscribe(client)
    assert memory.get_cursor(client) is None and memory.list_all_batchs(client) == {}


def test_a_stopped_manager_refuses_calls_and_forgets() -> None:
    mgr = MemoryMetaManager()
    with pytest.raises(MetaNotStartedError):
        mgr.subscribe(ClientIdentity("example"))
    with mgr:
        assert mgr.is_started
        mgr.subscribe(ClientIdentity("example"))
    assert not mgr.is_started
    mgr.start()
    assert not mgr.has_subscribe(ClientIdentity("example"))
    mgr.stop()


def test_concurrent_acks_never_skip_or_repeat(memory: MemoryMetaManager) -> None:
    client = ClientIdentity("example")
    memory.subscribe(client)
    for i in range(400):
        memory.add_batch(client, prange(i))
    acked: list[int] = []
    lock = threading.Lock()

    def worker() -> None:
        while True:
            first = memory.list_all_batchs(client)
            if not first:
                return
            batch_id = next(iter(first))
            try:
                memory.remove_batch(client, batch_id)
            except UnknownBatchError:
                continue  # another thread acked it first
            with lock:
                acked.append(batch_id)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(acked) == list(range(1, 401)) and len(set(acked)) == 400


# ------------------------------------------------------------------------------------------------ file manager


def test_file_meta_survives_a_restart_without_marks(tmp_path: Path) -> None:
    client = ClientIdentity("example", 1001, r"shop\..*")
    with FileMetaManager(tmp_path, flush_period_s=None) as mgr:
        mgr.subscribe(client)
        mgr.update_cursor(client, cursor(7, rows=3))
        mgr.add_batch(client, prange(1))
    document = json.loads((tmp_path / "example" / "meta.dat").read_text())
    assert document["destination"] == "example"
    assert document["clientDatas"][0]["clientIdentity"] == {
        "clientId": 1001,
        "destination": "example",
        "filter": r"shop\..*",
    }
    assert document["clientDatas"][0]["cursor"]["postion"]["position"] == 107
    with FileMetaManager(tmp_path, flush_period_s=None) as again:
        assert again.list_all_subscribe_info("example") == [client]
        assert again.list_all_subscribe_info("example")[0].filter == r"shop\..*"
        assert again.get_cursor(client) == cursor(7, rows=3)
        assert again.list_all_batchs(client) == {}
        assert again.add_batch(client, prange(2)) == 1


def test_file_meta_writes_only_when_something_changed(tmp_path: Path) -> None:
    flushed: list[DestinationSnapshot] = []
    client = ClientIdentity("example")
    with FileMetaManager(tmp_path, flush_period_s=None, on_flush=flushed.append) as mgr:
        mgr.subscribe(client)  # written through
        assert len(flushed) == 1
        path = mgr.path_of("example")
        inode = path.stat().st_ino
        mgr.flush()
        mgr.add_batch(client, prange(1))  # marks are not persisted: not dirty
        mgr.flush()
        assert len(flushed) == 1 and path.stat().st_ino == inode
        mgr.update_cursor(client, cursor(1))
        mgr.flush()
        assert len(flushed) == 2 and path.stat().st_ino != inode
        assert flushed[-1].cursor_of(1001) == cursor(1)


def test_file_meta_flushes_in_the_background(tmp_path: Path) -> None:
    client = ClientIdentity("example")
    seen = threading.Event()

    def on_flush(snapshot: DestinationSnapshot) -> None:
        if snapshot.cursor_of(1001) == cursor(42):
            seen.set()

    mgr = FileMetaManager(tmp_path, flush_period_s=0.02, on_flush=on_flush)
    with mgr:
        mgr.subscribe(client)
        mgr.update_cursor(client, cursor(42))
        assert seen.wait(10), "the background flusher never wrote the cursor"
        assert LogPosition.from_dict(read_json(mgr.path_of("example"))["clientDatas"][0]["cursor"]) == cursor(42)


def test_file_meta_reads_canals_own_document(tmp_path: Path) -> None:
    (tmp_path / "example").mkdir()
    (tmp_path / "example" / "meta.dat").write_text(
        json.dumps(
            {
                "clientDatas": [
                    {
                        "batch": {"atomicMaxBatchId": 3, "batches": {}},
                        "clientIdentity": {"clientId": 1001, "destination": "example", "filter": ""},
                        "cursor": JAVA_CURSOR,
                    }
                ],
                "destination": "example",
            }
        )
    )
    with FileMetaManager(tmp_path, flush_period_s=None) as mgr:
        got = mgr.get_cursor(ClientIdentity("example"))
    assert got is not None and got.position.journal_name == "mysql-bin.000001" and got.position.position == 4
    assert got.identity.source_address == "127.0.0.1:3306" and got.position.server_id == 1


@pytest.mark.parametrize(
    "content",
    [
        b'{"destination": "example", "clientDatas": [{"clientIdentity": {"clientId": 1001',
        b"",
        b"\xff\xfe",
        b'{"destination": "other", "clientDatas": []}',
        b'{"destination": "example", "clientDatas": [{"x": 1}]}',
        b"[1, 2]",
    ],
)
def test_a_corrupt_file_raises_a_clear_meta_error(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "example").mkdir()
    path = tmp_path / "example" / "meta.dat"
    path.write_bytes(content)
    with FileMetaManager(tmp_path, flush_period_s=None) as mgr:
        with pytest.raises(CorruptMetaError) as err:
            mgr.get_cursor(ClientIdentity("example"))
        assert str(path) in str(err.value)
        assert mgr.list_all_subscribe_info("fine") == []  # other destinations are unaffected
    assert path.read_bytes() == content  # never overwritten


def test_file_meta_refuses_an_unwritable_directory(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(MetaError):
        FileMetaManager(blocker / "sub").start()


# ------------------------------------------------------------------------------------------------ persist helpers


def test_atomic_json_write_replaces_and_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "doc.json"
    write_json_atomic(target, {"a": 1})
    write_json_atomic(target, {"a": 2, "text": "ü"})
    assert read_json(target) == {"a": 2, "text": "ü"}
    assert os.listdir(target.parent) == ["doc.json"]
    assert read_json(tmp_path / "missing.json") is None


def test_atomic_json_write_failure_is_a_meta_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(MetaError, match="cannot write"):
        write_json_atomic(blocker / "doc.json", {})


def test_periodic_flusher_logs_a_failure_streak_once(caplog: pytest.LogCaptureFixture) -> None:
    calls = 0
    done = threading.Event()

    def flush() -> None:
        nonlocal calls
        calls += 1
        if calls >= 6:
            done.set()
        if calls <= 3:
            raise MetaError("disk full")

    flusher = PeriodicFlusher(flush, 0.005, name="t-flush")
    with caplog.at_level(logging.INFO, logger="canal.meta.persist"):
        flusher.start()
        assert done.wait(10)
        flusher.stop()
    messages = [r.getMessage() for r in caplog.records]
    assert sum("disk full" in m for m in messages) == 1
    assert sum("recovered" in m for m in messages) == 1
    with pytest.raises(ValueError):
        PeriodicFlusher(flush, 0, name="bad")


def test_a_failing_flush_listener_is_logged_not_raised(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    def on_flush(snapshot: DestinationSnapshot) -> None:
        raise RuntimeError("listener broke")

    with FileMetaManager(tmp_path, flush_period_s=None, on_flush=on_flush) as mgr:
        mgr.subscribe(ClientIdentity("example"))  # written, listener fails, subscribe still succeeds
        assert read_json(mgr.path_of("example"))["clientDatas"][0]["clientIdentity"]["clientId"] == 1001
    assert any("[example] meta flush listener failed" in r.getMessage() for r in caplog.records)


def test_file_meta_with_a_zero_period_writes_every_cursor_through(tmp_path: Path) -> None:
    from canal.meta.persist import read_json

    meta = FileMetaManager(tmp_path, flush_period_s=0)
    meta.start()
    try:
        client = ClientIdentity("example")
        meta.subscribe(client)
        for offset in (4, 120, 999):
            cursor = LogPosition(position=EntryPosition("mysql-bin.000001", offset), rows_done=offset % 7)
            meta.update_cursor(client, cursor)
            # on disk already, without a flush or a stop: a SIGKILL now loses nothing that was acked
            document = read_json(meta.path_of("example"))
            assert LogPosition.from_dict(document["clientDatas"][0]["cursor"]) == cursor
    finally:
        meta.stop()
