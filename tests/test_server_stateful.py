"""The embedded server's API driven in random order (get / ack / rollback / subscribe) against a plain model.

The workload is written before the machine starts and the store is large enough to hold all of it, so what a get
returns is determined: the next entries after the last one handed out.
"""

from __future__ import annotations

import itertools
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from canal.client import ClientIdentity
from canal.config import InstanceConfig, MasterConfig, StoreConfig
from canal.errors import BatchOrderError, NotSubscribedError, UnknownBatchError
from canal.protocol import Entry, EntryType
from canal.server import EmbeddedServer
from canal.testing.fake import FakeMysql

_names = itertools.count()
CLIENT = ClientIdentity("example")
STRANGER = ClientIdentity("example", 2002)


def key(entry: Entry) -> tuple[str, int, int]:
    return (entry.header.log_file, entry.header.log_offset, int(entry.entry_type))


class ServerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.fake = FakeMysql(name=f"sm{next(_names)}")
        self.fake.execute("CREATE TABLE shop.t (id INT PRIMARY KEY, v DECIMAL(6,2))")
        for i in range(40):
            with self.fake.transaction() as tx:
                tx.insert("shop.t", {"id": i, "v": Decimal(i)})
                if i % 3 == 0:
                    tx.update("shop.t", {"id": i, "v": Decimal(i)}, {"id": i, "v": Decimal(i + 1)})
        config = InstanceConfig(
            destination="example",
            master=MasterConfig(address=self.fake.address, journal_name="mysql-bin.000001", position=4),
            store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=1024),
        )
        self.server = EmbeddedServer()
        self.server.start()
        self.server.start_destination(config)
        inst = self.server.instance("example")
        # the model's reference sequence: the whole stream, awaited with a get that blocks for all of it
        total = 1 + 40 * 3 + sum(1 for i in range(40) if i % 3 == 0)  # CREATE, BEGIN/row/END each, the updates
        self.stream = list(inst.store.get(total, timeout=0).entries)
        assert len(self.stream) == total
        inst.store.rollback()
        self.delivered = 0  # index of the next stream entry a get hands out
        self.acked = 0
        self.outstanding: list[tuple[int, int, int]] = []  # (batch id, start index, end index)
        self.subscribed = True

    def teardown(self) -> None:
        self.server.stop()
        self.fake.unregister()

    @precondition(lambda self: self.subscribed)
    @rule(size=st.integers(1, 17))
    def get_without_ack(self, size: int) -> None:
        msg = self.server.get_without_ack(CLIENT, size)
        expected = self.stream[self.delivered : self.delivered + size]
        if expected and expected[-1].entry_type is EntryType.TRANSACTIONBEGIN:
            # a batch never ends with a BEGIN that has an entry after it: before it, or with the entry after it
            expected = expected[:-1] if len(expected) > 1 else self.stream[self.delivered : self.delivered + 2]
        assert [key(e) for e in msg.entries] == [key(e) for e in expected]
        if expected:
            assert msg.id > max((b for b, _, _ in self.outstanding), default=-1)
            self.outstanding.append((msg.id, self.delivered, self.delivered + len(expected)))
            self.delivered += len(expected)
        else:
            assert msg.id == -1

    @precondition(lambda self: self.subscribed and self.outstanding)
    @rule()
    def ack_oldest(self) -> None:
        batch_id, _start, end = self.outstanding.pop(0)
        self.server.ack(CLIENT, batch_id)
        self.acked = end

    @precondition(lambda self: self.subscribed and len(self.outstanding) > 1)
    @rule(data=st.data())
    def ack_out_of_order_is_refused(self, data: st.DataObject) -> None:
        batch_id = data.draw(st.sampled_from([b for b, _, _ in self.outstanding[1:]]))
        with pytest.raises(BatchOrderError):
            self.server.ack(CLIENT, batch_id)

    @precondition(lambda self: self.subscribed)
    @rule(offset=st.integers(1, 1000))
    def unknown_ids_are_refused(self, offset: int) -> None:
        unknown = max((b for b, _, _ in self.outstanding), default=0) + offset
        with pytest.raises(UnknownBatchError):
            self.server.ack(CLIENT, unknown)
        with pytest.raises(UnknownBatchError):
            self.server.rollback(CLIENT, unknown)

    @precondition(lambda self: self.subscribed)
    @rule()
    def rollback_all(self) -> None:
        self.server.rollback(CLIENT)
        self.outstanding.clear()
        self.delivered = self.acked

    @precondition(lambda self: self.subscribed and self.outstanding)
    @rule(data=st.data())
    def rollback_one(self, data: st.DataObject) -> None:
        index = data.draw(st.integers(0, len(self.outstanding) - 1))
        batch_id, start, _ = self.outstanding[index]
        self.server.rollback(CLIENT, batch_id)
        del self.outstanding[index:]
        self.delivered = start

    @rule()
    def stranger_is_not_subscribed(self) -> None:
        with pytest.raises(NotSubscribedError):
            self.server.get_without_ack(STRANGER, 1)

    @precondition(lambda self: self.subscribed)
    @rule(flt=st.sampled_from(["", r"shop\..*", r".*\..*"]))
    def resubscribe_with_a_filter(self, flt: str) -> None:
        self.server.subscribe(CLIENT, flt)  # a filter that keeps every table: the stream is unchanged

    @invariant()
    def outstanding_ids_match(self) -> None:
        if self.subscribed:
            assert self.server.list_batch_ids(CLIENT) == [b for b, _, _ in self.outstanding]


ServerMachine.TestCase.settings = settings(
    max_examples=25, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestServerApi = ServerMachine.TestCase
