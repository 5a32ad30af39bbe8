"""The event parser end to end on an in-memory binlog: resume after failures, purge, switches, heartbeats."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from test_parser_helpers import (
    CollectingSink,
    MemoryPositions,
    MiniMysql,
    config,
    factory,
    key,
    standard_workload,
)

from canal.config import DetectingConfig, FilterFlags, InstanceConfig, MasterConfig, RetryConfig
from canal.errors import BinlogPurgedError, ConfigError, ParseError, SourceUnreachableError
from canal.parse.convert import EntryConverter
from canal.parse.parser import EventParser
from canal.position import EntryPosition, LogIdentity, LogPosition
from canal.protocol import Entry, EntryType, EventType

FROM_START = {"journal_name": "mysql-bin.000001", "position": 4}


def fast_retry(**kw: Any) -> RetryConfig:
    defaults: dict[str, Any] = {
        "initial_backoff_s": 0.001,
        "max_backoff_s": 0.005,
        "jitter": 0.5,
        "max_attempts": 100,
        "read_timeout_s": 5,
        "heartbeat_period_s": 1,
    }
    defaults.update(kw)
    return RetryConfig(**defaults)


def run_until(
    cfg: InstanceConfig,
    servers: list[MiniMysql],
    boundaries: int,
    positions: MemoryPositions | None = None,
    sink: CollectingSink | None = None,
) -> tuple[list[Entry], EventParser]:
    sink = sink or CollectingSink()
    positions = positions or MemoryPositions()
    parser = EventParser("example", cfg, factory(*servers), sink, positions)
    with parser:
        sink.wait_ends(boundaries)
    assert parser.error is None
    return sink.data(), parser


def boundaries(entries: list[Entry]) -> int:
    return sum(1 for e in entries if e.is_boundary)


def reference(workload: Any = standard_workload, **cfg_kw: Any) -> list[Entry]:
    db = MiniMysql()
    workload(db)
    entries, _ = run_until(config(db, master_kwargs=FROM_START, **cfg_kw), [db], boundaries_of(workload))
    return entries


def boundaries_of(workload: Any) -> int:
    db = MiniMysql()
    workload(db)
    conv = EntryConverter()
    conv.reset(EntryPosition("mysql-bin.000001", 4))
    return sum(1 for e in map(conv.convert, db.all_events()) if e is not None and e.is_boundary)


def test_an_uninterrupted_run_delivers_the_workload_in_order() -> None:
    entries = reference()
    kinds = [(e.entry_type, e.header.event_type) for e in entries]
    assert kinds[:2] == [(EntryType.ROWDATA, EventType.CREATE), (EntryType.TRANSACTIONBEGIN, EventType.QUERY)]
    assert sum(1 for e in entries if e.entry_type is EntryType.TRANSACTIONBEGIN) == 4
    assert {e.header.log_file for e in entries} == {"mysql-bin.000001", "mysql-bin.000002"}
    offsets = [(e.header.log_file, e.header.log_offset) for e in entries]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)


@pytest.mark.parametrize("transaction_size", [1024, 2])
def test_a_crash_at_every_event_resumes_without_loss_or_repeat(transaction_size: int) -> None:
    ref = reference(transaction_size=transaction_size)
    db = MiniMysql()
    standard_workload(db)
    total = len(db.all_events()) + 2  # + the artificial rotate of each dump, + past the end
    for i in range(total):
        db = MiniMysql()
        standard_workload(db)
        db.fail_after(events=i)
        cfg = config(db, master_kwargs=FROM_START, transaction_size=transaction_size, retry=fast_retry())
        entries, parser = run_until(cfg, [db], boundaries(ref))
        assert [key(e) for e in entries] == [key(e) for e in ref], f"crash after {i} events"
        if i < total - 2:
            assert parser.reconnects >= 1 and parser.last_error is not None


def test_repeated_crashes_and_a_failing_sink() -> None:
    ref = reference(transaction_size=3)
    db = MiniMysql()
    standard_workload(db)
    for n in (3, 1, 5, 0, 7, 2):
        db.fail_after(events=n)
    sink = CollectingSink()
    sink.fail_next = 2
    cfg = config(db, master_kwargs=FROM_START, transaction_size=3, retry=fast_retry())
    entries, parser = run_until(cfg, [db], boundaries(ref), sink=sink)
    assert [key(e) for e in entries] == [key(e) for e in ref]
    assert sink.fail_next == 0 and parser.reconnects >= 6


def test_restart_from_a_first_n_rows_done_cursor() -> None:
    def workload(db: MiniMysql) -> None:
        db.transaction([("insert", "shop.orders", [(0, 0, "-")])])
        db.transaction([("insert", "shop.orders", [(i, i, "x")]) for i in range(1, 8)])
        db.transaction([("insert", "shop.orders", [(9, 9, "z")])])

    ref = reference(workload)
    big_rows = [e for e in ref if e.entry_type is EntryType.ROWDATA and e.rows_done == 4 and e.header.log_offset > 300]
    fourth = big_rows[0]
    assert fourth.anchor is not None and fourth.anchor.included
    db = MiniMysql()
    workload(db)
    cursor = LogPosition(LogIdentity(db.address, -1), fourth.anchor, rows_done=4)
    cfg = config(db, master_kwargs=FROM_START)
    entries, _ = run_until(cfg, [db], 2, positions=MemoryPositions(cursor))
    expected = ref[ref.index(fourth) + 1 :]
    assert [key(e) for e in entries] == [key(e) for e in expected]
    assert [e.rows_done for e in entries[:3]] == [5, 6, 7]


def test_positions_are_recorded_after_each_hand_off() -> None:
    db = MiniMysql()
    standard_workload(db)
    positions = MemoryPositions()
    entries, parser = run_until(config(db, master_kwargs=FROM_START), [db], 6, positions=positions)
    last = entries[-1]
    assert positions.positions["example"] == LogPosition(LogIdentity(db.address, -1), last.anchor or None, 0)  # type: ignore[arg-type]
    assert parser.position == positions.positions["example"]
    # six hand-offs, and the rest at the next file's start after the rotation between them
    rests = [p for p in positions.history if not p.position.included]
    assert len(positions.history) == 7 and len(rests) == 1
    assert rests[0].position.journal_name == "mysql-bin.000002" and rests[0].position.position == 4
    places = [(p.position.journal_number, p.position.position) for p in positions.history]
    assert places == sorted(places)


def test_purged_binlog_raises_a_typed_error_naming_the_position() -> None:
    db = MiniMysql()
    standard_workload(db)
    ref = reference()
    end = next(e for e in ref if e.entry_type is EntryType.TRANSACTIONEND)
    db.purge_to("mysql-bin.000002")
    errors: list[BaseException] = []
    got = threading.Event()

    def on_error(exc: BaseException) -> None:
        errors.append(exc)
        got.set()

    cfg = config(db, retry=fast_retry(purge_threshold=3))
    saved = LogPosition(LogIdentity(db.address, -1), end.anchor)  # type: ignore[arg-type]
    parser = EventParser("example", cfg, factory(db), CollectingSink(), MemoryPositions(saved), on_error=on_error)
    with parser:
        assert got.wait(10) and parser.join(10)
    assert isinstance(parser.error, BinlogPurgedError) and errors == [parser.error]
    assert parser.error.errno == 1236
    assert "mysql-bin.000001" in str(parser.error) and str(end.header.log_offset) in str(parser.error)
    assert db.dumps == 3
    assert not parser.is_running


def test_purged_binlog_with_reset_restarts_at_the_current_position() -> None:
    db = MiniMysql()
    standard_workload(db)
    ref = reference()
    end = next(e for e in ref if e.entry_type is EntryType.TRANSACTIONEND)
    db.purge_to("mysql-bin.000002")
    cfg = config(db, retry=fast_retry(purge_threshold=2, reset_on_purge=True))
    saved = LogPosition(LogIdentity(db.address, -1), end.anchor)  # type: ignore[arg-type]
    sink = CollectingSink()
    parser = EventParser("example", cfg, factory(db), sink, MemoryPositions(saved))
    with parser:
        sink.wait_for(lambda es: any(e.entry_type is EntryType.HEARTBEAT for e in es))
        db.transaction([("insert", "shop.users", [(77, "new")])])
        sink.wait_ends(1)
    data = sink.data()
    assert [e.entry_type for e in data] == [EntryType.TRANSACTIONBEGIN, EntryType.ROWDATA, EntryType.TRANSACTIONEND]
    assert data[1].row_change is not None and data[1].row_change.rows[0].after == (77, "new")
    assert parser.error is None


def test_idle_source_sends_heartbeats_that_record_nothing() -> None:
    db = MiniMysql()
    db.transaction([("insert", "shop.users", [(1, "a")])])
    sink = CollectingSink()
    positions = MemoryPositions()
    cfg = config(db, master_kwargs=FROM_START, detecting=DetectingConfig(interval_s=0.02))
    with EventParser("example", cfg, factory(db), sink, positions):
        sink.wait_for(lambda es: sum(1 for e in es if e.entry_type is EntryType.HEARTBEAT) >= 3)
    heartbeats = sink.heartbeats()
    assert all(b == [b[0]] for b in sink.batches if b[0].entry_type is EntryType.HEARTBEAT)
    assert heartbeats[0].header.event_type is EventType.MHEARTBEAT
    assert len(positions.history) == 1  # only the transaction


def test_server_id_change_behind_the_address_resumes_by_time() -> None:
    db = MiniMysql(clock=1_000)
    for i in range(3):
        db.clock = 1_000 + 10 * i
        db.transaction([("insert", "shop.users", [(i, "old")])])
    sink = CollectingSink()
    cfg = config(db, master_kwargs=FROM_START, fallback_interval_s=5)
    parser = EventParser("example", cfg, factory(db), sink, MemoryPositions())
    with parser:
        sink.wait_ends(3)
        # another server takes over the address; it has its own binlog with the transactions again, a bit later
        db.failover(server_id=2)
        for i in range(3):
            db.clock = 1_001 + 10 * i
            db.transaction([("insert", "shop.users", [(i, "new")])])
        sink.wait_ends(4)
    data = sink.data()
    # last handed off at 1020; the search goes back to 1015: the new server's transaction at 1021 is first
    after = data[9:]
    assert [e.header.server_id for e in after] == [2] * len(after)
    assert [r.after for e in after for r in e.iter_rows()] == [(2, "new")]
    assert parser.reconnects >= 1


def test_switch_to_the_standby_after_detecting_failures() -> None:
    master = MiniMysql("master", clock=2_000)
    standby = MiniMysql("standby", clock=2_000, server_id=9)
    for db in (master, standby):
        for i in range(4):
            db.clock = 2_000 + 10 * i
            db.transaction([("insert", "shop.users", [(i, "u")])])
    sink = CollectingSink()
    cfg = config(
        master,
        standby=standby,
        master_kwargs=FROM_START,
        fallback_interval_s=15,
        detecting=DetectingConfig(enable=True, interval_s=0.02, retry_threshold=2, ha_switch=True),
    )
    positions = MemoryPositions()
    parser = EventParser("example", cfg, factory(master, standby), sink, positions)
    with parser:
        sink.wait_ends(4)
        master.crash()
        standby.clock = 2_100
        standby.transaction([("insert", "shop.users", [(100, "after")])])
        sink.wait_for(lambda es: any(r.after == (100, "after") for e in es for r in e.iter_rows()))
    assert parser.active_master.address == standby.address and parser.switches == 1
    data = sink.data()
    from_standby = [e for e in data if e.header.server_id == 9]
    # last handed off at 2030; back 15 s: the standby's 2020 transaction is the first redelivered
    assert [r.after for e in from_standby for r in e.iter_rows()] == [(2, "u"), (3, "u"), (100, "after")]
    assert positions.positions["example"].identity.source_address == standby.address
    assert parser.error is None


def test_filters_and_ddl_entries_through_the_parser() -> None:
    db = MiniMysql()
    standard_workload(db)
    cfg = config(
        db,
        master_kwargs=FROM_START,
        filter_regex=r"shop\.users,shop\.orders",
        black_regex=r"shop\.orders",
        filter_flags=FilterFlags(query_dml=True),
    )
    entries, _ = run_until(cfg, [db], 4)
    rows = [e for e in entries if e.entry_type is EntryType.ROWDATA]
    assert {e.header.table for e in rows} == {"users"}
    assert not any(e.row_change is not None and e.row_change.sql for e in rows)
    # the orders DDL is filtered, but its position still anchors what follows
    begins = [e for e in entries if e.entry_type is EntryType.TRANSACTIONBEGIN]
    assert len(begins) == 4
    ddl_cfg = config(db, master_kwargs=FROM_START)
    all_entries, _ = run_until(ddl_cfg, [db], 6)
    ddls = [e for e in all_entries if e.row_change is not None and e.row_change.is_ddl]
    # the CREATE TABLE inside a transaction (MariaDB logs a CREATE TABLE ... SELECT so) is a DDL too
    assert [e.header.event_type for e in ddls] == [EventType.CREATE, EventType.ALTER, EventType.CREATE]


def test_an_event_the_parser_refuses_stops_it_without_reconnecting() -> None:
    db = MiniMysql()
    db.transaction([("insert", "shop.users", [(1, "ann")])])
    db.transaction([("insert", "shop.users", [(2, "bob")])], statements=["SAVEPOINT"])  # a savepoint with no name
    errors: list[BaseException] = []
    sink = CollectingSink()
    cfg = config(db, master_kwargs=FROM_START, retry=fast_retry(max_attempts=None))
    parser = EventParser("example", cfg, factory(db), sink, MemoryPositions(), on_error=errors.append)
    parser.start()
    try:
        assert parser.join(10), "the parser stops: the same bytes would give the same refusal"
        assert isinstance(parser.error, ParseError) and "unreadable savepoint statement" in str(parser.error)
        assert errors == [parser.error] and parser.reconnects == 0 and not parser.is_running
        # the transaction before the event was handed off, nothing of the one holding it
        assert [e.header.table for e in sink.entries if e.entry_type is EntryType.ROWDATA] == ["users"]
    finally:
        parser.stop()


def test_a_fatal_error_is_surfaced_not_swallowed() -> None:
    db = MiniMysql()
    db.down = True
    errors: list[BaseException] = []
    cfg = config(db, retry=fast_retry(max_attempts=3))
    parser = EventParser("example", cfg, factory(db), CollectingSink(), MemoryPositions(), on_error=errors.append)
    parser.start()
    assert parser.join(10)
    assert isinstance(parser.error, SourceUnreachableError) and errors == [parser.error]
    assert parser.reconnects == 2 and parser.last_error is parser.error
    parser.stop()
    assert not parser.is_started


def test_stop_ends_a_blocked_dump_promptly() -> None:
    db = MiniMysql()
    cfg = config(db, detecting=DetectingConfig(interval_s=60))
    sink = CollectingSink()
    parser = EventParser("example", cfg, factory(db), sink, MemoryPositions())
    parser.start()
    assert parser.is_started and not parser.join(0.05)
    parser.stop(timeout=5)
    assert parser.join(0) and not parser.is_started and parser.error is None


def test_a_config_error_from_the_source_is_fatal_at_once() -> None:
    """A bad setting (e.g. an unreadable CA file) does not heal by retrying: the parser stops on the first one."""
    db = MiniMysql()
    errors: list[BaseException] = []
    got = threading.Event()

    def on_error(exc: BaseException) -> None:
        errors.append(exc)
        got.set()

    def broken(_master: MasterConfig) -> Any:
        raise ConfigError("cannot read the CA file /nonexistent/ca.pem", key="ssl.ca")

    cfg = config(db, retry=fast_retry())
    parser = EventParser("example", cfg, broken, CollectingSink(), MemoryPositions(), on_error=on_error)
    with parser:
        assert got.wait(10) and parser.join(10)
    assert isinstance(parser.error, ConfigError) and errors == [parser.error]
    assert parser.reconnects == 0 and not parser.is_running
