"""Every error path of get / ack / rollback changes nothing: the state after the error equals the state before.

The state is what a consumer or a restart can observe: the outstanding batch marks (with their ranges), the cursor,
the subscriptions, the store's sequences, and what the next ``get`` hands out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import attrs
import pytest

from canal.client import ClientIdentity
from canal.config import InstanceConfig, MasterConfig, StoreConfig
from canal.errors import (
    BatchOrderError,
    CanalError,
    FencedWriteError,
    NotRunningError,
    NotSubscribedError,
    ServerError,
    UnknownBatchError,
)
from canal.instance import Instance
from canal.meta import MemoryMetaManager
from canal.position import LogIdentity, LogPosition, PositionRange
from canal.protocol import EntryType, Message
from canal.testing.fake import FakeMysql


@pytest.fixture
def fake(fake_mysql: FakeMysql) -> FakeMysql:
    fake_mysql.execute("CREATE TABLE shop.orders (id INT PRIMARY KEY, amount DECIMAL(10,2))")
    for i in range(40):  # one transaction each: several entries per batch
        fake_mysql.insert("shop.orders", {"id": i, "amount": Decimal(i)})
    return fake_mysql


def _config(fake: FakeMysql) -> InstanceConfig:
    return InstanceConfig(
        destination="example",
        master=MasterConfig(address=fake.address, journal_name="mysql-bin.000001", position=4),
        store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=4096),
    )


class _FencedMeta(MemoryMetaManager):
    """A meta whose cursor writes are refused while ``fenced`` is set (as a ZooKeeper fence refuses them)."""

    fenced = False

    def update_cursor(self, client: ClientIdentity, position: LogPosition) -> None:
        if self.fenced:
            raise FencedWriteError("the fencing token is stale; the cursor was not written")
        super().update_cursor(client, position)


def _state(inst: Instance) -> dict[str, Any]:
    client = inst.default_client
    stats = inst.store.stats()
    return {
        "marks": inst.meta.list_all_batchs(client),
        "cursor": inst.meta.get_cursor(client),
        "subscribed": inst.meta.list_all_subscribe_info(inst.destination),
        "sequences": (stats.get_sequence, stats.ack_sequence),  # the parser may still be putting
    }


def _ids(msg: Message) -> list[int]:
    return [
        row.after[0]
        for e in msg.entries
        if e.entry_type is EntryType.ROWDATA
        for row in e.iter_rows()
        if row.after is not None
    ]


@pytest.fixture
def inst(fake: FakeMysql) -> Iterator[Instance]:
    meta = _FencedMeta()
    meta.start()
    with Instance(_config(fake), meta=meta) as inst:
        yield inst
    meta.stop()


def _unchanged(inst: Instance, call: Callable[[], object], error: type[CanalError]) -> None:
    before = _state(inst)
    with pytest.raises(error):
        call()
    assert _state(inst) == before


def test_ack_errors_change_nothing(inst: Instance) -> None:
    first = inst.get_without_ack(6, timeout=5)
    second = inst.get_without_ack(6, timeout=5)
    assert first.id != -1 and second.id != -1
    _unchanged(inst, lambda: inst.ack(second.id), BatchOrderError)  # out of order
    _unchanged(inst, lambda: inst.ack(second.id + 100), UnknownBatchError)  # never handed out
    _unchanged(inst, lambda: inst.ack(first.id, ClientIdentity("other", 1001)), ServerError)  # other destination
    _unchanged(inst, lambda: inst.ack(first.id, ClientIdentity("example", 7)), NotSubscribedError)
    inst.ack(first.id)
    _unchanged(inst, lambda: inst.ack(first.id), UnknownBatchError)  # already acked
    # after all that, the batches still go through in order
    inst.ack(second.id)
    assert inst.list_batch_ids() == []


def test_a_mark_this_process_did_not_hand_out_is_refused_and_kept(inst: Instance) -> None:
    """A leftover mark (another process's, or an older run's) is not acked, rolled back or deleted by mistake."""
    client = inst.default_client
    msg = inst.get_without_ack(3, timeout=5)
    assert msg.id != -1
    mark = inst.meta.get_batch(client, msg.id)
    assert mark is not None and mark.seqs is not None and mark.identity is not None
    foreign = attrs.evolve(mark, seqs=None)
    inst.meta.clear_all_batchs(client)
    inst.store.rollback()
    foreign_id = inst.meta.add_batch(client, foreign)
    _unchanged(inst, lambda: inst.ack(foreign_id), UnknownBatchError)
    _unchanged(inst, lambda: inst.rollback(foreign_id), UnknownBatchError)
    assert inst.meta.get_batch(client, foreign_id) == foreign


def test_a_refused_cursor_write_leaves_the_batch_outstanding(inst: Instance) -> None:
    msg = inst.get_without_ack(5, timeout=5)
    meta = inst.meta
    assert isinstance(meta, _FencedMeta)
    meta.fenced = True
    _unchanged(inst, lambda: inst.ack(msg.id), FencedWriteError)
    meta.fenced = False
    mark = inst.meta.get_batch(inst.default_client, msg.id)
    assert mark is not None
    inst.ack(msg.id)  # once the write is allowed again, the same ack goes through
    assert inst.list_batch_ids() == []
    assert inst.get_cursor() == LogPosition(mark.identity, mark.cursor, mark.rows_done)


def test_rollback_errors_change_nothing(inst: Instance) -> None:
    first = inst.get_without_ack(4, timeout=5)
    second = inst.get_without_ack(4, timeout=5)
    _unchanged(inst, lambda: inst.rollback(second.id + 50), UnknownBatchError)
    _unchanged(inst, lambda: inst.rollback(first.id, ClientIdentity("example", 9)), NotSubscribedError)
    inst.ack(first.id)
    _unchanged(inst, lambda: inst.rollback(first.id), UnknownBatchError)  # acked already
    inst.rollback(second.id)
    again = inst.get_without_ack(4, timeout=5)
    assert _ids(again) == _ids(second)


def test_get_errors_change_nothing(inst: Instance) -> None:
    outstanding = inst.get_without_ack(3, timeout=5)
    _unchanged(inst, lambda: inst.get_without_ack(0, timeout=5), ServerError)
    _unchanged(inst, lambda: inst.get_without_ack(5, client=ClientIdentity("example", 9)), NotSubscribedError)
    _unchanged(inst, lambda: inst.get(5, client=ClientIdentity("elsewhere", 1001)), ServerError)
    inst.ack(outstanding.id)


def test_calls_on_a_stopped_instance_raise_and_leave_the_meta_alone(fake: FakeMysql) -> None:
    meta = MemoryMetaManager()
    meta.start()
    inst = Instance(_config(fake), meta=meta)
    inst.start()
    msg = inst.get_without_ack(5, timeout=5)
    inst.stop()
    client = inst.default_client
    marks, cursor = meta.list_all_batchs(client), meta.get_cursor(client)
    for call in (lambda: inst.ack(msg.id), lambda: inst.rollback(msg.id), lambda: inst.get_without_ack(5, timeout=5)):
        with pytest.raises(NotRunningError):
            call()
        assert meta.list_all_batchs(client) == marks and meta.get_cursor(client) == cursor
    meta.stop()


def test_marks_of_an_earlier_run_are_rolled_back_on_start(fake: FakeMysql) -> None:
    """A crash leaves marks in a persistent meta: the next start drops them and redelivers from the cursor."""
    meta = MemoryMetaManager()
    meta.start()
    with Instance(_config(fake), meta=meta) as inst:
        acked = inst.get(6, timeout=5)
        left = inst.get_without_ack(6, timeout=5)
        assert left.id != -1
    client = inst.default_client
    assert list(meta.list_all_batchs(client)) == [left.id]  # stop() keeps the meta as a crash would
    with Instance(_config(fake), meta=meta) as again:
        assert meta.list_all_batchs(client) == {}
        msg = again.get_without_ack(6, timeout=5)
        assert _ids(msg) == _ids(left) and msg.id > left.id  # ids keep increasing
        again.ack(msg.id)
    assert _ids(acked) and not set(_ids(acked)) & set(_ids(msg))
    meta.stop()


def test_a_batch_names_the_server_it_was_read_from(inst: Instance, fake: FakeMysql) -> None:
    msg = inst.get_without_ack(4, timeout=5)
    mark = inst.meta.get_batch(inst.default_client, msg.id)
    assert isinstance(mark, PositionRange)
    assert mark.identity == LogIdentity(fake.address, -1)
    inst.ack(msg.id)
    cursor = inst.get_cursor()
    assert cursor is not None and cursor.identity == LogIdentity(fake.address, -1)
