"""Group instances (canal's group mode) on the fake binlog, and the group sink's transaction barrier."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator, Sequence

import pytest

from canal.assembly import ParserGroup, member_destination
from canal.client import ClientIdentity
from canal.config import DetectingConfig, InstanceConfig, MasterConfig, RetryConfig, StoreConfig
from canal.errors import ConfigError, NotRunningError
from canal.instance import Instance
from canal.protocol import ColumnMeta, Entry, EntryType, EventType, Header, RowChange, RowData, TableSchema
from canal.server import EmbeddedServer
from canal.sink import EntrySink, GroupSink
from canal.testing.fake import FakeMysql

_names = itertools.count()
T = TableSchema("s", "t", (ColumnMeta("id", is_key=True),))


def _h(ms: int, off: int, server_id: int) -> Header:
    return Header("mysql-bin.000001", off, server_id=server_id, execute_time=ms, event_length=10)


def _rows(ms: int, n: int, server_id: int, first: int = 0) -> list[Entry]:
    return [
        Entry(_h(ms, 10 + i, server_id), EntryType.ROWDATA, RowChange(EventType.INSERT, rows=[RowData(T, None, (i,))]))
        for i in range(first, first + n)
    ]


def _begin(ms: int, server_id: int) -> Entry:
    return Entry(_h(ms, 4, server_id), EntryType.TRANSACTIONBEGIN, thread_id=1)


def _end(ms: int, server_id: int) -> Entry:
    return Entry(_h(ms, 99, server_id), EntryType.TRANSACTIONEND, xid=7)


def _heartbeat(ms: int) -> list[Entry]:
    return [Entry(Header("mysql-bin.000001", 4, execute_time=ms), EntryType.HEARTBEAT)]


class _Store:
    def __init__(self) -> None:
        self.items: list[Entry] = []

    def put(self, entries: Sequence[Entry], timeout: float | None = None, origin: object = None) -> bool:
        self.items.extend(entries)
        return True


def test_a_transaction_handed_off_in_parts_is_never_interleaved() -> None:
    store = _Store()
    group = GroupSink(EntrySink(store).sink, members=2)
    m0, m1 = group.member(0), group.member(1)
    m1(_heartbeat(1100))
    m0([_begin(1000, 1), *_rows(1000, 3, 1)])  # part 1 of a large transaction (no END yet)
    other = threading.Thread(target=m1, args=([_begin(1100, 2), *_rows(1100, 2, 2), _end(1100, 2)],))
    other.start()
    # part 2 is stamped later than member 1's transaction; it still goes first, because part 1 opened the barrier
    last = threading.Thread(target=m0, args=([*_rows(2000, 2, 1, first=3), _end(2000, 1)],))
    last.start()
    last.join(5)
    other.join(5)
    assert not last.is_alive() and not other.is_alive()
    servers = [e.header.server_id for e in store.items]
    assert servers == [1] * 7 + [2] * 4


def test_heartbeat_clock_advances_an_idle_member() -> None:
    store = _Store()
    now = [5000]
    group = GroupSink(EntrySink(store).sink, members=2, heartbeat_clock=lambda: now[0])
    done = threading.Event()

    def first() -> None:
        group.member(0)([_begin(4000, 1), *_rows(4000, 1, 1), _end(4000, 1)])
        done.set()

    t = threading.Thread(target=first)
    t.start()
    assert not done.wait(0.1)
    group.member(1)(_heartbeat(0))  # a server heartbeat carries time 0: the clock stands in for it
    assert done.wait(5)
    t.join()
    group.stop()
    group.reset()  # a restart forgets the members' times and the stop
    group.member(1)(_heartbeat(0))
    group.member(0)([_begin(4500, 1), *_rows(4500, 1, 1), _end(4500, 1)])
    assert len(store.items) == 6


@pytest.fixture
def fakes() -> Iterator[list[FakeMysql]]:
    out = []
    for server_id in (11, 22):
        fake = FakeMysql(name=f"grp{next(_names)}", server_id=server_id)
        fake.execute("CREATE TABLE shop.orders (id INT PRIMARY KEY, v VARCHAR(20))")
        out.append(fake)
    yield out
    for fake in out:
        fake.unregister()


def _config(fakes: list[FakeMysql], **kw: object) -> tuple[InstanceConfig, list[MasterConfig]]:
    members = [MasterConfig(address=f.address, journal_name="mysql-bin.000001", position=4) for f in fakes]
    cfg = InstanceConfig(
        destination="grouped",
        master=members[0],
        store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=1024),
        detecting=DetectingConfig(interval_s=0.05),
        retry=RetryConfig(heartbeat_period_s=0.05, initial_backoff_s=0.01, max_backoff_s=0.05),
        **kw,  # type: ignore[arg-type]
    )
    return cfg, members


def _drain(inst: Instance, rows: int) -> list[Entry]:
    out: list[Entry] = []
    deadline = time.monotonic() + 10
    while sum(len(e.row_change.rows) for e in out if e.row_change is not None and not e.row_change.is_ddl) < rows:
        assert time.monotonic() < deadline
        msg = inst.get(50, timeout=0.05)
        out.extend(msg.entries)
    return out


def test_group_instance_merges_fakes_in_time_order_and_restarts_from_configured_starts(
    fakes: list[FakeMysql],
) -> None:
    # server 11 writes at t = 0, 2, 4, ...; server 22 at t = 1, 3, 5, ... (fake clocks, whole seconds)
    for i in range(20):
        fake = fakes[i % 2]
        fake.set_clock(1_700_000_000 + i)
        with fake.transaction() as tx:
            tx.insert("shop.orders", {"id": i, "v": f"s{i % 2}"})
            tx.insert("shop.orders", {"id": 100 + i, "v": "x"})
    cfg, members = _config(fakes, transaction_size=2)
    inst = Instance.group(cfg, members)
    assert isinstance(inst.parser, ParserGroup) and len(inst.parser.parsers) == 2
    assert [p.destination for p in inst.parser.parsers] == [member_destination("grouped", i) for i in range(2)]
    with inst:
        entries = _drain(inst, 40)
        begins = [e for e in entries if e.entry_type is EntryType.TRANSACTIONBEGIN]
        assert [b.header.execute_time // 1000 - 1_700_000_000 for b in begins] == list(range(20))
        assert [b.header.server_id for b in begins] == [11, 22] * 10
        assert inst.metrics().running
    # a restart dumps every member from its configured start again (memory log positions; see Instance.group)
    with inst:
        again = _drain(inst, 40)
        assert [e.header.execute_time for e in again if e.entry_type is EntryType.TRANSACTIONBEGIN] == [
            b.header.execute_time for b in begins
        ]


def test_group_instance_stops_serving_when_a_member_fails(fakes: list[FakeMysql]) -> None:
    cfg, members = _config(fakes)
    with pytest.raises(ConfigError):
        Instance.group(cfg, [])
    cfg = InstanceConfig(
        destination=cfg.destination,
        master=cfg.master,
        store=cfg.store,
        detecting=cfg.detecting,
        retry=RetryConfig(heartbeat_period_s=0.05, initial_backoff_s=0.01, max_backoff_s=0.01, max_attempts=2),
    )
    bad = [members[0], MasterConfig(address="fake://nobody-registered", journal_name="mysql-bin.000001", position=4)]
    failed = threading.Event()
    with Instance.group(cfg, bad, on_error=lambda _exc: failed.set()) as inst:
        assert failed.wait(10)
        with pytest.raises(NotRunningError):
            inst.get(10, timeout=0.05)  # the merge cannot go on without the failed member
        assert inst.metrics().errors == 1 and not inst.metrics().running


def test_embedded_server_hosts_a_group_destination(fakes: list[FakeMysql]) -> None:
    for i in range(6):
        fakes[i % 2].set_clock(1_700_000_000 + i)
        fakes[i % 2].insert("shop.orders", {"id": i, "v": "x"})
    cfg, members = _config(fakes)
    server = EmbeddedServer()
    with pytest.raises(ConfigError):
        server.add_destination(cfg, members=[])
    assert server.destinations == []  # the refused destination left nothing behind
    server.add_destination(cfg, members=members)
    client = ClientIdentity("grouped", 1001)
    with server:
        server.subscribe(client)
        assert isinstance(server.instance("grouped").parser, ParserGroup)
        seen: list[int] = []
        deadline = time.monotonic() + 10
        while len(seen) < 6:
            assert time.monotonic() < deadline
            msg = server.get(client, 50, timeout=0.05)
            seen += [e.header.server_id for e in msg.entries if e.entry_type is EntryType.TRANSACTIONBEGIN]
        assert seen == [11, 22] * 3  # both masters, merged in time order
