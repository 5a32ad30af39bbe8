"""The event parser on canal.testing.FakeMysql: every failure point, purge, failover, switch, stalls, random work."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_parser_helpers import CollectingSink, MemoryPositions, key

from canal.config import DetectingConfig, FilterFlags, InstanceConfig, MasterConfig, RetryConfig
from canal.errors import BinlogPurgedError, FencedWriteError
from canal.parse.convert import EntryConverter, NeedTransactionBeginError
from canal.parse.events import RowsEvent
from canal.parse.parser import EventParser
from canal.position import EntryPosition, LogIdentity, LogPosition
from canal.protocol import Entry, EntryType, EventType
from canal.testing.fake import FakeMysql, fake_source

_names = itertools.count()
FROM_START = {"journal_name": "mysql-bin.000001", "position": 4}
T0 = 1_700_000_000


def fresh(prefix: str = "p", **kw: Any) -> FakeMysql:
    return FakeMysql(name=f"{prefix}{next(_names)}", **kw)


@pytest.fixture
def fakes() -> Iterator[Callable[..., FakeMysql]]:
    made: list[FakeMysql] = []

    def make(**kw: Any) -> FakeMysql:
        fake = fresh(**kw)
        made.append(fake)
        return fake

    yield make
    for fake in made:
        fake.unregister()


def retry(**kw: Any) -> RetryConfig:
    base: dict[str, Any] = {
        "initial_backoff_s": 0.001,
        "max_backoff_s": 0.005,
        "jitter": 0.5,
        "max_attempts": 100,
        "read_timeout_s": 5,
        "heartbeat_period_s": 1,
    }
    base.update(kw)
    return RetryConfig(**base)


def cfg(
    fake: FakeMysql, *, standby: FakeMysql | None = None, master: dict[str, Any] | None = None, **kw: Any
) -> InstanceConfig:
    kw.setdefault("retry", retry())
    kw.setdefault("detecting", DetectingConfig(interval_s=0.05))
    return InstanceConfig(
        destination="example",
        master=MasterConfig(address=fake.address, **(master if master is not None else FROM_START)),
        standby=None if standby is None else MasterConfig(address=standby.address),
        **kw,
    )


def run(
    config: InstanceConfig, ends: int, positions: MemoryPositions | None = None, sink: CollectingSink | None = None
) -> tuple[list[Entry], EventParser]:
    sink = sink or CollectingSink()
    parser = EventParser("example", config, None, sink, positions or MemoryPositions())
    with parser:
        sink.wait_ends(ends)
    assert parser.error is None
    return sink.data(), parser


def ends_in(fake: FakeMysql) -> int:
    """How many boundaries (transaction ends, DDL) the fake's binlog holds."""
    conv = EntryConverter()
    conv.reset(EntryPosition("mysql-bin.000001", 4))
    return sum(1 for e in map(conv.convert, fake.events()) if e is not None and e.is_boundary)


def create_tables(fake: FakeMysql) -> None:
    fake.execute("CREATE TABLE shop.orders (id INT PRIMARY KEY, amount INT, note VARCHAR(20))")
    fake.execute("CREATE TABLE shop.users (id INT PRIMARY KEY, name VARCHAR(20))")


def workload(fake: FakeMysql) -> None:
    create_tables(fake)
    with fake.transaction() as tx:
        tx.insert_many("shop.orders", [{"id": i, "amount": i, "note": "a"} for i in range(3)])
        tx.insert("shop.users", {"id": 1, "name": "ann"})
    fake.advance_clock(1)
    with fake.transaction() as tx:
        for i in range(3, 8):
            tx.insert("shop.orders", {"id": i, "amount": i, "note": "b"})
        tx.update("shop.orders", {"id": 0}, {"amount": 100})
        tx.delete("shop.orders", {"id": 1})
    fake.rotate()
    fake.execute("ALTER TABLE shop.orders ADD COLUMN extra INT")
    fake.advance_clock(1)
    with fake.transaction() as tx:
        tx.insert("shop.orders", {"id": 20, "amount": 1, "note": "c", "extra": 5})
        tx.update("shop.users", {"id": 1}, {"name": "bea"})


def reference(build: Callable[[FakeMysql], None], fake_kw: dict[str, Any] | None = None, **kw: Any) -> list[Entry]:
    fake = fresh(**(fake_kw or {}))
    try:
        build(fake)
        entries, _ = run(cfg(fake, **kw), ends_in(fake))
        return entries
    finally:
        fake.unregister()


MODES: dict[str, tuple[dict[str, Any], bool]] = {
    "file-position": ({}, False),
    "mysql-gtid": ({"gtid": True}, True),
    "mariadb-gtid": ({"mariadb": True}, True),
}


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("transaction_size", [1024, 3])
def test_a_crash_at_every_event_index_resumes_exactly(transaction_size: int, mode: str) -> None:
    fake_kw, gtid_mode = MODES[mode]
    ref = reference(workload, fake_kw, transaction_size=transaction_size, gtid_mode=gtid_mode)
    assert sum(1 for e in ref if e.entry_type is EntryType.ROWDATA and e.rows_done > 3) > 0
    assert all(e.header.gtid for e in ref) == gtid_mode
    probe = fresh(**fake_kw)
    workload(probe)
    total = len(probe.events()) + 4  # + artificial rotates / format descriptions of the dump
    probe.unregister()
    for i in range(total):
        fake = fresh(**fake_kw)
        try:
            workload(fake)
            fake.fail_after(events=i)
            config = cfg(fake, transaction_size=transaction_size, gtid_mode=gtid_mode)
            entries, parser = run(config, ends_in(fake))
            assert [key(e) for e in entries] == [key(e) for e in ref], f"crash after {i} events"
            if i < total - 4:
                assert parser.reconnects >= 1
            if gtid_mode and 8 < i < total - 4:
                # after the first hand-off a resume goes by the executed GTID set, not by file and offset
                assert fake.dump_requests[-1].gtid_set is not None
        finally:
            fake.unregister()


def test_restart_from_a_first_n_rows_done_cursor(fakes: Callable[..., FakeMysql]) -> None:
    ref = reference(workload)
    big = next(e for e in ref if e.entry_type is EntryType.ROWDATA and e.rows_done == 5)
    fake = fakes()
    workload(fake)
    cursor = LogPosition(LogIdentity(fake.address, -1), big.anchor, rows_done=5)  # type: ignore[arg-type]
    entries, _ = run(cfg(fake), 3, positions=MemoryPositions(cursor))
    assert [key(e) for e in entries] == [key(e) for e in ref[ref.index(big) + 1 :]]
    assert entries[0].rows_done == 6


def test_purge_raises_a_typed_error_naming_the_position(fakes: Callable[..., FakeMysql]) -> None:
    fake = fakes()
    workload(fake)
    ref = reference(workload)
    end = next(e for e in ref if e.entry_type is EntryType.TRANSACTIONEND)
    fake.purge_to("mysql-bin.000002")
    saved = LogPosition(LogIdentity(fake.address, -1), end.anchor)  # type: ignore[arg-type]
    failed = threading.Event()
    parser = EventParser(
        "example",
        cfg(fake, retry=retry(purge_threshold=2)),
        None,
        CollectingSink(),
        MemoryPositions(saved),
        on_error=lambda exc: failed.set(),
    )
    with parser:
        assert failed.wait(10)
    assert isinstance(parser.error, BinlogPurgedError)
    assert f"mysql-bin.000001:{end.header.log_offset}" in str(parser.error)
    assert fake.dump_attempts == 2


def test_purge_with_reset_continues_from_the_current_position(fakes: Callable[..., FakeMysql]) -> None:
    fake = fakes()
    workload(fake)
    fake.rotate()
    fake.purge_to("mysql-bin.000003")
    saved = LogPosition(LogIdentity(fake.address, -1), EntryPosition("mysql-bin.000001", 4))
    sink = CollectingSink()
    parser = EventParser(
        "example", cfg(fake, retry=retry(purge_threshold=1, reset_on_purge=True)), None, sink, MemoryPositions(saved)
    )
    with parser:
        assert fake.wait_for_idle_dumps(1)
        with fake.transaction() as tx:
            tx.insert("shop.users", {"id": 50, "name": "late"})
        sink.wait_ends(1)
    assert [r.after_dict()["id"] for e in sink.data() for r in e.iter_rows()] == [50]


def test_failover_with_a_new_server_id_resumes_by_time(fakes: Callable[..., FakeMysql]) -> None:
    fake = fakes()
    create_tables(fake)
    for i in range(3):
        fake.advance_clock(10)
        fake.insert("shop.users", {"id": i, "name": "old"})
    positions = MemoryPositions()
    first, _ = run(cfg(fake), 5, positions=positions)
    last_time = first[-1].header.execute_time // 1000
    assert positions.positions["example"].position.server_id == 1
    # a promoted replica with a binlog of its own takes over the address; its clock is a little behind
    fake.failover(server_id=2, new_binlog=True)
    for i, at in enumerate((-20, -14, -8, -2, 4)):
        fake.set_clock(last_time + at)
        fake.insert("shop.users", {"id": 3 + i, "name": "new"})
    sink = CollectingSink()
    parser = EventParser("example", cfg(fake, fallback_interval_s=5), None, sink, positions)
    with parser:
        sink.wait_for(lambda es: any(r.after_dict().get("id") == 7 for e in es for r in e.iter_rows()))
    assert parser.error is None
    # the search starts at last - 5 s: the transactions at -2 and +4 only
    assert [(e.header.server_id, r.after_dict()["id"]) for e in sink.data() for r in e.iter_rows()] == [(2, 6), (2, 7)]


def test_standby_switch_after_detecting_failures(fakes: Callable[..., FakeMysql]) -> None:
    master, standby = fakes(), fakes(server_id=2)
    for fake in (master, standby):
        create_tables(fake)
        for i in range(4):
            fake.set_clock(T0 + 10 * i)
            fake.insert("shop.users", {"id": i, "name": "u"})
    sink = CollectingSink()
    config = cfg(
        master,
        standby=standby,
        fallback_interval_s=15,
        detecting=DetectingConfig(enable=True, interval_s=0.02, retry_threshold=3, ha_switch=True),
    )
    positions = MemoryPositions()
    parser = EventParser("example", config, None, sink, positions)
    with parser:
        sink.wait_ends(6)
        master.down()
        standby.set_clock(T0 + 100)
        standby.insert("shop.users", {"id": 100, "name": "after"})
        sink.wait_for(lambda es: any(r.after_dict().get("id") == 100 for e in es for r in e.iter_rows()))
    assert parser.active_master.address == standby.address and parser.switches == 1
    from_standby = [e for e in sink.data() if e.header.server_id == 2]
    # last handed off at T0+30; minus 15 s: the standby's T0+20 insert is the first one again
    assert [r.after_dict()["id"] for e in from_standby for r in e.iter_rows()] == [2, 3, 100]
    assert positions.positions["example"].identity.source_address == standby.address


def test_idle_heartbeats_and_a_stalled_dump_reconnects(fakes: Callable[..., FakeMysql]) -> None:
    fake = fakes()
    create_tables(fake)
    connections: list[MasterConfig] = []
    second = threading.Event()

    def connect(master: MasterConfig) -> Any:
        connections.append(master)
        if len(connections) == 2:
            second.set()
        return fake_source(master.address)

    sink = CollectingSink()
    positions = MemoryPositions()
    config = cfg(fake, retry=retry(read_timeout_s=0.3, heartbeat_period_s=0.05))
    parser = EventParser("example", config, connect, sink, positions)
    with parser:
        sink.wait_for(lambda es: sum(1 for e in es if e.entry_type is EntryType.HEARTBEAT) >= 2)
        assert parser.reconnects == 0 and len(positions.history) == 2  # heartbeats record nothing
        fake.stall()  # nothing arrives, not even heartbeats: the watchdog must drop the connection
        assert second.wait(5)
        fake.unstall()
        fake.insert("shop.users", {"id": 1, "name": "x"})
        sink.wait_ends(3)
    heartbeats = sink.heartbeats()
    assert all(e.header.event_type is EventType.MHEARTBEAT and e.row_change is None for e in heartbeats)
    assert parser.reconnects >= 1 and len(positions.history) == 3
    assert [r.after_dict() for e in sink.data() for r in e.iter_rows()] == [{"id": 1, "name": "x"}]


def test_filters_and_ddl_through_the_parser(fakes: Callable[..., FakeMysql]) -> None:
    fake = fakes()
    workload(fake)
    config = cfg(
        fake,
        filter_regex=r"shop\..*",
        black_regex=r"shop\.users",
        field_filter="shop.orders:id/note",
        filter_flags=FilterFlags(dml_delete=True),
    )
    entries, _ = run(config, 5)
    rows = [e for e in entries if e.entry_type is EntryType.ROWDATA and e.row_change and not e.row_change.is_ddl]
    assert {e.header.table for e in rows} == {"orders"}
    assert all(r.table.names == ("id", "note") for e in rows for r in e.iter_rows())
    assert EventType.DELETE not in {e.header.event_type for e in rows}
    ddls = [e for e in entries if e.row_change is not None and e.row_change.is_ddl]
    assert [(e.header.event_type, e.header.table) for e in ddls] == [
        (EventType.CREATE, "orders"),
        (EventType.ALTER, "orders"),
    ]


def test_gtid_mode_resumes_by_gtid_set(fakes: Callable[..., FakeMysql]) -> None:
    fake = fakes(gtid=True)
    workload(fake)
    positions = MemoryPositions()
    run(cfg(fake, gtid_mode=True), ends_in(fake), positions=positions)
    saved = positions.positions["example"]
    assert saved.position.gtid and ":1-" in saved.position.gtid
    # a second parser resumes by the saved GTID set: only the new transaction
    with fake.transaction() as tx:
        tx.insert("shop.users", {"id": 9, "name": "g"})
    entries, _ = run(cfg(fake, gtid_mode=True, master={}), 1, positions=MemoryPositions(saved))
    assert [r.after_dict()["id"] for e in entries for r in e.iter_rows()] == [9]
    assert fake.dump_requests[-1].gtid_set == saved.position.gtid
    assert entries[0].header.gtid is not None


# ---------------------------------------------------------------------------------------------------------------------
# random workloads with random failure points


@st.composite
def workloads(draw: st.DrawFn) -> list[tuple[str, int]]:
    steps = draw(
        st.lists(
            st.one_of(
                st.tuples(st.just("tx"), st.integers(1, 9)),
                st.tuples(st.just("ddl"), st.just(0)),
                st.tuples(st.just("rotate"), st.just(0)),
                st.tuples(st.just("clock"), st.integers(1, 5)),
            ),
            min_size=1,
            max_size=12,
        )
    )
    return steps


def build(steps: list[tuple[str, int]]) -> Callable[[FakeMysql], None]:
    def apply(fake: FakeMysql) -> None:
        create_tables(fake)
        next_id = 0
        columns = 0
        for kind, n in steps:
            if kind == "tx":
                with fake.transaction() as tx:
                    for _ in range(n):
                        tx.insert("shop.users", {"id": next_id, "name": f"n{next_id}"})
                        next_id += 1
                    if next_id > 1:
                        tx.update("shop.users", {"id": next_id - 1}, {"name": "upd"})
            elif kind == "ddl":
                columns += 1
                fake.execute(f"ALTER TABLE shop.orders ADD COLUMN c{columns} INT")
            elif kind == "rotate":
                fake.rotate()
            else:
                fake.advance_clock(n)

    return apply


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=workloads(),
    size=st.integers(1, 6),
    failures=st.lists(st.integers(0, 60), max_size=4),
    sink_failures=st.integers(0, 2),
)
def test_random_workloads_with_random_failures_give_the_reference(
    steps: list[tuple[str, int]], size: int, failures: list[int], sink_failures: int
) -> None:
    apply = build(steps)
    ref = reference(apply, transaction_size=size)
    fake = fresh("h")
    try:
        apply(fake)
        armed = list(failures)

        def connect(master: MasterConfig) -> Any:
            # each new dump connection gets the next failure point, if any is left
            if armed:
                fake.fail_after(events=armed.pop(0))
            return fake_source(master.address)

        sink = CollectingSink()
        sink.fail_next = sink_failures
        parser = EventParser("example", cfg(fake, transaction_size=size), connect, sink, MemoryPositions())
        with parser:
            sink.wait_ends(ends_in(fake))
        assert parser.error is None
        assert [key(e) for e in sink.data()] == [key(e) for e in ref]
        if sink_failures:
            assert parser.reconnects >= 1
    finally:
        fake.unregister()


def test_a_cursor_inside_a_transaction_moves_back_to_its_begin(fakes: Callable[..., FakeMysql]) -> None:
    ref = reference(workload)
    fake = fakes()
    workload(fake)
    rows = [e for e in fake.events() if isinstance(e, RowsEvent)]
    inside = rows[3]  # the second insert of the second transaction
    cursor = LogPosition(LogIdentity(fake.address, -1), EntryPosition(inside.log_file, inside.offset))
    entries, parser = run(cfg(fake), 3, positions=MemoryPositions(cursor))  # this one, a DDL, the last
    begin = [
        e
        for e in ref
        if e.entry_type is EntryType.TRANSACTIONBEGIN
        and (e.header.log_file, e.header.log_offset) < (inside.log_file, inside.offset)
    ][-1]
    assert begin != next(e for e in ref if e.entry_type is EntryType.TRANSACTIONBEGIN)
    expected = ref[ref.index(begin) :]
    assert [(e.entry_type, e.header.log_file, e.header.log_offset) for e in entries] == [
        (e.entry_type, e.header.log_file, e.header.log_offset) for e in expected
    ]
    assert entries[0].anchor is not None and entries[0].anchor.position == begin.header.log_offset
    assert parser.reconnects == 1 and isinstance(parser.last_error, NeedTransactionBeginError)


def test_a_fenced_position_write_is_fatal(fakes: Callable[..., FakeMysql]) -> None:
    fake = fakes()
    workload(fake)

    class Fenced(MemoryPositions):
        def persist_position(self, destination: str, position: LogPosition) -> None:
            raise FencedWriteError("another process owns the destination")

    errors: list[BaseException] = []
    parser = EventParser("example", cfg(fake), None, CollectingSink(), Fenced(), on_error=errors.append)
    with parser:
        assert parser.join(10)
    assert isinstance(parser.error, FencedWriteError) and errors == [parser.error]
