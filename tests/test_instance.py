"""Instance and EmbeddedServer on the fake binlog: get / ack / rollback semantics, filters, restarts, errors."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from canal.client import ClientIdentity
from canal.config import InstanceConfig, MasterConfig, StoreConfig
from canal.errors import (
    BatchOrderError,
    FilterError,
    NotRunningError,
    NotSubscribedError,
    ServerError,
    UnknownBatchError,
    UnknownDestinationError,
)
from canal.instance import Instance
from canal.protocol import EntryType, EventType, Message
from canal.server import EmbeddedServer
from canal.testing.fake import FakeMysql

_names = itertools.count()


@pytest.fixture
def fake() -> Iterator[FakeMysql]:
    fake = FakeMysql(name=f"inst{next(_names)}", server_id=1)
    fake.execute("CREATE TABLE shop.orders (id INT PRIMARY KEY, amount DECIMAL(10,2), note VARCHAR(20))")
    fake.execute("CREATE TABLE shop.items (id INT PRIMARY KEY, order_id INT)")
    fake.execute("CREATE TABLE audit.log (id INT PRIMARY KEY)")
    yield fake
    fake.unregister()


def config(fake: FakeMysql, **kw: Any) -> InstanceConfig:
    kw.setdefault("store", StoreConfig(batch_mode="ITEMSIZE", buffer_size=4096))
    return InstanceConfig(
        destination=kw.pop("destination", "example"),
        master=MasterConfig(address=fake.address, journal_name="mysql-bin.000001", position=4),
        **kw,
    )


def row_ids(messages: list[Message], table: str = "orders") -> list[int]:
    out = []
    for msg in messages:
        for entry in msg.entries:
            if entry.entry_type is EntryType.ROWDATA and entry.header.table == table:
                for row in entry.iter_rows():
                    image = row.after if row.after is not None else row.before
                    assert image is not None
                    out.append(image[0])
    return out


def orders(fake: FakeMysql, ids: range) -> None:
    for i in ids:
        fake.insert("shop.orders", {"id": i, "amount": Decimal(i), "note": f"n{i}"})


def drain(inst: Instance | Any, want_rows: int, table: str = "orders", batch: int = 7) -> list[Message]:
    """Get and ack until ``want_rows`` rows of ``table`` arrived (short waits: a get with a timeout waits for a
    full batch, as canal's does, and the last batch is rarely full)."""
    got: list[Message] = []
    deadline = time.monotonic() + 20
    while len(row_ids(got, table)) < want_rows:
        assert time.monotonic() < deadline, f"only {len(row_ids(got, table))} of {want_rows} rows within 20 s"
        msg = inst.get(batch, timeout=0.05)
        if msg.id != -1:
            got.append(msg)
    return got


class server_client:
    """The server's get, bound to one client, so drain() works on it too."""

    def __init__(self, server: EmbeddedServer, client: ClientIdentity) -> None:
        self.server, self.client = server, client

    def get(self, batch: int, timeout: float) -> Message:
        return self.server.get(self.client, batch, timeout)


def test_changes_arrive_complete_and_in_order_with_several_batches_outstanding(fake: FakeMysql) -> None:
    orders(fake, range(50))
    with Instance(config(fake)) as inst:
        outstanding = []
        while len(row_ids(outstanding)) < 50:
            msg = inst.get_without_ack(9, timeout=5.0)
            assert msg.id != -1
            outstanding.append(msg)
        assert row_ids(outstanding) == list(range(50))
        ids = [m.id for m in outstanding]
        assert ids == sorted(ids) and len(set(ids)) == len(ids)
        assert inst.list_batch_ids() == ids
        for msg in outstanding:
            inst.ack(msg.id)
        assert inst.list_batch_ids() == []
        assert inst.metrics().store_entries == 0


def test_out_of_order_unknown_and_duplicate_acks_raise_and_change_nothing(fake: FakeMysql) -> None:
    orders(fake, range(10))
    with Instance(config(fake)) as inst:
        first = inst.get_without_ack(4, timeout=5.0)
        second = inst.get_without_ack(4, timeout=5.0)
        cursor_before = inst.get_cursor()
        with pytest.raises(BatchOrderError):
            inst.ack(second.id)
        with pytest.raises(UnknownBatchError):
            inst.ack(second.id + 100)
        assert inst.list_batch_ids() == [first.id, second.id]
        assert inst.get_cursor() == cursor_before
        inst.ack(first.id)
        with pytest.raises(UnknownBatchError):
            inst.ack(first.id)  # duplicate
        inst.ack(second.id)


def test_rollback_all_redelivers_every_outstanding_batch(fake: FakeMysql) -> None:
    orders(fake, range(20))
    with Instance(config(fake)) as inst:
        a = inst.get_without_ack(6, timeout=5.0)
        b = inst.get_without_ack(6, timeout=5.0)
        inst.rollback()
        assert inst.list_batch_ids() == []
        again = [inst.get_without_ack(6, timeout=5.0), inst.get_without_ack(6, timeout=5.0)]
        assert [e.header.log_offset for m in again for e in m] == [e.header.log_offset for m in (a, b) for e in m]
        assert again[0].id > b.id  # new ids: old ones are gone


def test_rollback_of_one_batch_rewinds_it_and_later_ones_only(fake: FakeMysql) -> None:
    orders(fake, range(20))
    with Instance(config(fake)) as inst:
        a, b, c = (inst.get_without_ack(5, timeout=5.0) for _ in range(3))
        inst.rollback(b.id)
        assert inst.list_batch_ids() == [a.id]
        redo = [inst.get_without_ack(5, timeout=5.0), inst.get_without_ack(5, timeout=5.0)]
        assert [e.header.log_offset for m in redo for e in m] == [e.header.log_offset for m in (b, c) for e in m]
        with pytest.raises(UnknownBatchError):
            inst.rollback(b.id)  # already rolled back: unknown, nothing changes
        assert inst.list_batch_ids() == [a.id, redo[0].id, redo[1].id]
        for m in [a, *redo]:
            inst.ack(m.id)


def test_client_filter_narrows_the_instance_filter(fake: FakeMysql) -> None:
    with Instance(config(fake, filter_regex=r"shop\..*")) as inst:
        inst.subscribe(r"shop\.orders,audit\..*")  # audit is outside the instance filter: stays out
        with fake.transaction() as tx:
            tx.insert("shop.orders", {"id": 1, "amount": Decimal(1), "note": "x"})
            tx.insert("shop.items", {"id": 1, "order_id": 1})
            tx.insert("audit.log", {"id": 1})
        got = drain(inst, 1)
        tables = {
            e.header.table for m in got for e in m if e.entry_type is EntryType.ROWDATA and not e.row_change.is_ddl
        }  # type: ignore[union-attr]
        assert tables == {"orders"}
        with pytest.raises(FilterError):
            inst.subscribe("bad[regex")
        assert inst.meta.list_all_subscribe_info("example")[0].filter == r"shop\.orders,audit\..*"


def test_batch_context_acks_on_success_and_rolls_back_on_error(fake: FakeMysql) -> None:
    orders(fake, range(6))
    with Instance(config(fake)) as inst:
        with pytest.raises(RuntimeError), inst.batch(4, timeout=5.0) as msg:
            first_offsets = [e.header.log_offset for e in msg]
            raise RuntimeError("consumer failed")
        assert inst.list_batch_ids() == []
        with inst.batch(4, timeout=5.0) as again:
            assert [e.header.log_offset for e in again] == first_offsets
        assert inst.list_batch_ids() == []
        assert inst.get_cursor() is not None


def test_message_iterator_acks_on_next_and_rolls_back_on_break(fake: FakeMysql) -> None:
    orders(fake, range(12))
    with Instance(config(fake)) as inst:
        seen: list[Message] = []
        for msg in inst.messages(5, timeout=5.0):
            seen.append(msg)
            if len(seen) == 2:
                break  # the 2nd message was not acked: it comes again
        assert inst.list_batch_ids() == []
        again = inst.get_without_ack(5, timeout=5.0)
        assert [e.header.log_offset for e in again] == [e.header.log_offset for e in seen[1]]


def test_restart_resumes_from_the_acked_cursor_row_exact_inside_a_transaction(fake: FakeMysql, tmp_path: Path) -> None:
    with fake.transaction() as tx:  # one big transaction: canal would redeliver all of it
        for i in range(30):
            tx.insert("shop.orders", {"id": i, "amount": Decimal(i), "note": "big"})
    cfg = config(fake, meta_mode="file", meta_dir=str(tmp_path), store=StoreConfig(batch_mode="ITEMSIZE"))
    with Instance(cfg) as inst:
        acked = []
        while len(row_ids(acked)) < 13:
            msg = inst.get(4, timeout=5.0)  # ack batches that end inside the transaction
            acked.append(msg)
        unacked = inst.get_without_ack(4, timeout=5.0)  # handed out, never acked
        assert row_ids([unacked])
    # stop flushed the cursor; a new instance (a restart) continues right after the acked rows
    unstarted = Instance(cfg)
    saved = unstarted.get_cursor()  # read from meta, nothing started (what decides whether a first start is due)
    assert saved is not None and saved.rows_done > 0
    assert not unstarted.is_started and not unstarted.meta.is_started and not unstarted.parser.is_started
    assert Instance(config(fake)).get_cursor() is None  # memory meta: a first start
    with Instance(cfg) as inst:
        assert inst.get_cursor() == saved
        rest = drain(inst, 30 - len(row_ids(acked)))
    assert row_ids(acked) + row_ids(rest) == list(range(30))
    assert row_ids(rest)[: len(row_ids([unacked]))] == row_ids([unacked])  # unacked rows are delivered again


def test_calls_on_a_stopped_or_unsubscribed_instance_raise_typed_errors(fake: FakeMysql) -> None:
    inst = Instance(config(fake))
    with pytest.raises(NotRunningError):
        inst.get_without_ack(10)
    with inst:
        other = ClientIdentity("example", 2002)
        with pytest.raises(NotSubscribedError):
            inst.get_without_ack(10, client=other)
        with pytest.raises(ServerError):
            inst.subscribe("", other)  # client 1001 consumes this destination
        with pytest.raises(ServerError):
            inst.get_without_ack(0)
        inst.unsubscribe()
        inst.subscribe("", other)
        assert inst.get_without_ack(3, timeout=5.0, client=other).id != -1


def test_metrics_count_sequences_rows_and_delays(fake: FakeMysql) -> None:
    orders(fake, range(5))
    with Instance(config(fake)) as inst:
        drain(inst, 5)
        m = inst.metrics()
        assert m.running and m.put_sequence == m.ack_sequence >= 5 * 3
        assert m.rows_per_s > 0 and m.delay_ack_ms is not None and m.reconnects == 0


def test_embedded_server_runs_two_destinations_keyed_by_client(fake: FakeMysql) -> None:
    fake2 = FakeMysql(name=f"inst{next(_names)}", server_id=2)
    try:
        fake2.execute("CREATE TABLE shop.orders (id INT PRIMARY KEY, amount DECIMAL(10,2), note VARCHAR(20))")
        orders(fake, range(3))
        orders(fake2, range(100, 104))
        with EmbeddedServer() as server:
            server.start_destination(config(fake, destination="one"))
            server.add_destination(config(fake2, destination="two"), lazy=True)
            assert not server.is_started("two")
            one, two = ClientIdentity("one"), ClientIdentity("two")
            server.subscribe(two)  # starts the lazy destination
            assert server.is_started("two")
            got_one = drain(server_client(server, one), 3)
            got_two: list[Message] = []
            while len(row_ids(got_two)) < 4:
                msg = server.get_without_ack(two, 4, timeout=5.0)
                server.ack(two, msg.id)
                got_two.append(msg)
            assert row_ids(got_one) == [0, 1, 2] and row_ids(got_two) == [100, 101, 102, 103]
            with pytest.raises(UnknownDestinationError):
                server.get(ClientIdentity("nope"), 10)
            with pytest.raises(NotSubscribedError):
                server.get(ClientIdentity("one", 7), 10)
            with pytest.raises(UnknownBatchError):
                server.ack(one, 12345)
            server.stop_destination("one")
            assert not server.is_started("one")
    finally:
        fake2.unregister()


def test_server_loads_a_canal_conf_dir(fake: FakeMysql, tmp_path: Path) -> None:
    conf = tmp_path / "conf"
    (conf / "example").mkdir(parents=True)
    (conf / "canal.properties").write_text("canal.destinations = example\ncanal.instance.global.mode = spring\n")
    (conf / "example" / "instance.properties").write_text(
        f"canal.instance.master.address = {fake.address}\n"
        "canal.instance.master.journal.name = mysql-bin.000001\n"
        "canal.instance.master.position = 4\n"
        "canal.instance.filter.regex = shop\\\\..*\n"
    )
    orders(fake, range(2))
    with EmbeddedServer.from_conf_dir(conf) as server:
        assert server.destinations == ["example"]
        got = drain(server_client(server, ClientIdentity("example")), 2)
        assert row_ids(got) == [0, 1]


def test_concurrent_producer_and_acking_consumer_lose_and_repeat_nothing(fake: FakeMysql) -> None:
    total = 400
    with Instance(config(fake, store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=64))) as inst:
        producer = threading.Thread(target=orders, args=(fake, range(total)))
        producer.start()
        got = drain(inst, total, batch=10)
        producer.join()
    ids = row_ids(got)
    assert ids == list(range(total))


def test_ddl_entries_are_delivered(fake: FakeMysql) -> None:
    with Instance(config(fake)) as inst:
        fake.execute("ALTER TABLE shop.orders ADD COLUMN extra INT")
        fake.insert("shop.orders", {"id": 1, "amount": Decimal(1), "note": "x", "extra": 5})
        got = drain(inst, 1)
    kinds = [e.header.event_type for m in got for e in m if e.entry_type is EntryType.ROWDATA]
    assert EventType.ALTER in kinds
    last_orders = [e for m in got for e in m if e.header.table == "orders" and e.header.event_type is EventType.INSERT]
    assert last_orders[-1].row_change is not None
    assert last_orders[-1].row_change.rows[0].after_dict()["extra"] == 5


def test_a_failed_start_stops_what_it_had_started(fake: FakeMysql) -> None:
    from canal.parse.log_position import MemoryLogPositionManager

    class Broken(MemoryLogPositionManager):
        def _on_start(self) -> None:
            raise RuntimeError("disk on fire")

    inst = Instance(config(fake), log_positions=Broken())
    with pytest.raises(RuntimeError, match="disk on fire"):
        inst.start()
    assert not inst.is_started and not inst.meta.is_started and not inst.store.is_started
    assert not inst.parser.is_started
