"""FakeMysql: event shapes, offsets, files, GTIDs, clock, dumps, failure injection, registry."""

from __future__ import annotations

import datetime as dt
import doctest
import itertools
import threading
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

import canal.testing.fake as fake_module
from canal.errors import BinlogPurgedError, SourceError, SourceUnreachableError
from canal.parse.events import (
    BinlogEvent,
    FormatDescriptionEvent,
    GtidEvent,
    GtidSetEvent,
    HeartbeatEvent,
    IgnoredEvent,
    QueryEvent,
    RotateEvent,
    RowsEvent,
    TableMapEvent,
    XidEvent,
)
from canal.parse.source import BinlogSource, DumpRequest
from canal.protocol import EventType
from canal.testing.fake import (
    DEFAULT_START_TIME,
    FakeBinlogSource,
    FakeMysql,
    FakeMysqlError,
    fake_source,
    lookup_fake,
)

ORDERS = "CREATE TABLE shop.orders (id INT PRIMARY KEY, amount DECIMAL(10,2), note VARCHAR(20))"


@pytest.fixture
def fake() -> Iterator[FakeMysql]:
    with FakeMysql(name="t_fake") as f:
        f.execute(ORDERS)
        yield f


@pytest.fixture
def gfake() -> Iterator[FakeMysql]:
    with FakeMysql(name="t_gfake", gtid=True) as f:
        f.execute(ORDERS)
        yield f


@pytest.fixture
def mfake() -> Iterator[FakeMysql]:
    with FakeMysql(name="t_mfake", mariadb=True) as f:
        f.execute(ORDERS)
        yield f


def names(events: list[BinlogEvent]) -> list[str]:
    return [type(e).__name__ for e in events]


def dump_all(f: FakeMysql, **kw: Any) -> list[BinlogEvent]:
    return list(f.source().dump(DumpRequest(blocking=False, **kw)))


def real(events: list[BinlogEvent]) -> list[BinlogEvent]:
    """Drop artificial events (log_pos 0)."""
    return [e for e in events if e.next_offset != 0]


def order(i: int, note: str = "x") -> dict[str, Any]:
    return {"id": i, "amount": Decimal(i), "note": note}


# -- module doc -----------------------------------------------------------------------------------------------------


def test_module_docstring_example_runs() -> None:
    result = doctest.testmod(fake_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 10
    assert result.failed == 0


# -- transaction shapes ---------------------------------------------------------------------------------------------


def test_mysql_transaction_shape_without_gtid(fake: FakeMysql) -> None:
    with fake.transaction() as tx:
        tx.insert("shop.orders", order(1))
        tx.insert_many("shop.orders", [order(2), order(3)])
        tx.update("shop.orders", {"id": 1}, {"note": "y"})
        tx.delete("shop.orders", {"id": 2})
    ev = tx.events
    assert names(ev) == ["QueryEvent"] + ["TableMapEvent", "RowsEvent"] * 4 + ["XidEvent"]
    begin = ev[0]
    assert isinstance(begin, QueryEvent) and begin.sql == "BEGIN"
    rows = [e for e in ev if isinstance(e, RowsEvent)]
    assert [r.event_type for r in rows] == [EventType.INSERT, EventType.INSERT, EventType.UPDATE, EventType.DELETE]
    assert [len(r.rows) for r in rows] == [1, 2, 1, 1]
    upd = rows[2].rows[0]
    assert upd.before_dict() == {"id": 1, "amount": Decimal("1.00"), "note": "x"}
    assert upd.after_dict() == {"id": 1, "amount": Decimal("1.00"), "note": "y"}
    assert rows[3].rows[0].before_dict()["note"] == "x"
    maps = [e for e in ev if isinstance(e, TableMapEvent)]
    assert all(m.schema == "shop" and m.table == "orders" and m.table_id == rows[0].table_id for m in maps)
    assert isinstance(ev[-1], XidEvent)
    assert fake.rows("shop.orders") == [
        {"id": 1, "amount": Decimal("1.00"), "note": "y"},
        {"id": 3, "amount": Decimal("3.00"), "note": "x"},
    ]


def test_mysql_gtid_transaction_and_ddl_shape(gfake: FakeMysql) -> None:
    ev = gfake.insert("shop.orders", order(1))
    assert names(ev) == ["GtidEvent", "QueryEvent", "TableMapEvent", "RowsEvent", "XidEvent"]
    gtid = ev[0]
    assert isinstance(gtid, GtidEvent) and not gtid.mariadb and not gtid.standalone
    uuid = gfake.server_uuid()
    assert gtid.gtid == f"{uuid}:2"  # the CREATE TABLE was 1
    ddl = gfake.execute("ALTER TABLE shop.orders ADD COLUMN c INT")
    assert names(ddl) == ["GtidEvent", "QueryEvent"]
    assert isinstance(ddl[0], GtidEvent) and ddl[0].gtid == f"{uuid}:3"
    assert gfake.gtid_executed() == f"{uuid}:1-3"
    assert gfake.master_status().gtid == f"{uuid}:1-3"


def test_mariadb_transaction_and_ddl_shape(mfake: FakeMysql) -> None:
    ev = mfake.insert("shop.orders", order(1))
    assert names(ev) == ["GtidEvent", "TableMapEvent", "RowsEvent", "XidEvent"]  # the GTID event is the BEGIN
    g = ev[0]
    assert isinstance(g, GtidEvent) and g.mariadb and not g.standalone and g.gtid == "0-1-2"
    ddl = mfake.execute("DROP TABLE shop.orders")
    assert isinstance(ddl[0], GtidEvent) and ddl[0].standalone and ddl[0].gtid == "0-1-3"
    assert isinstance(ddl[1], QueryEvent) and ddl[1].sql == "DROP TABLE `shop`.`orders` /* generated by server */"
    assert mfake.master_status().gtid == "0-1-3"
    head = mfake.events("mysql-bin.000001")[:3]
    assert names(head) == ["FormatDescriptionEvent", "GtidSetEvent", "IgnoredEvent"]
    assert head[1].offset == 256 and isinstance(head[2], IgnoredEvent) and head[2].type_code == 161


def test_ddl_query_event_carries_session_schema(fake: FakeMysql) -> None:
    ev = fake.execute("CREATE TABLE t2 (a INT)", schema="shop")
    assert isinstance(ev[0], QueryEvent) and ev[0].schema == "shop"
    assert fake.execute("USE shop") == []  # USE is not logged
    ev = fake.execute("TRUNCATE orders")
    assert isinstance(ev[0], QueryEvent) and ev[0].schema == "shop" and ev[0].sql == "TRUNCATE orders"
    ev = fake.execute("CREATE DATABASE other")
    assert isinstance(ev[0], QueryEvent) and ev[0].schema == "other"
    ev = fake.execute("GRANT SELECT ON shop.* TO 'x'@'%'")  # anything else: logged as is
    assert isinstance(ev[0], QueryEvent) and ev[0].sql.startswith("GRANT")
    with fake.transaction() as tx:
        tx.insert("orders", order(1))
    begin = tx.events[0]
    assert isinstance(begin, QueryEvent) and begin.schema == "shop"


def test_exception_in_transaction_writes_nothing(fake: FakeMysql) -> None:
    end = fake.end
    with pytest.raises(RuntimeError), fake.transaction() as tx:
        tx.insert("shop.orders", order(1))
        raise RuntimeError("boom")
    assert fake.end == end and fake.rows("shop.orders") == []
    with fake.transaction():
        pass  # empty: nothing written
    assert fake.end == end


def test_value_checks(fake: FakeMysql) -> None:
    with pytest.raises(FakeMysqlError, match="no column 'nope'"):
        fake.insert("shop.orders", {"id": 1, "nope": 2})
    with pytest.raises(FakeMysqlError, match="NOT NULL"):
        fake.insert("shop.orders", {"amount": Decimal(1)})
    with pytest.raises(FakeMysqlError, match="longer than 20"):
        fake.insert("shop.orders", {"id": 1, "note": "x" * 21})
    with pytest.raises(FakeMysqlError, match="an int is expected"):
        fake.insert("shop.orders", {"id": "1"})
    with pytest.raises(FakeMysqlError, match="doesn't exist"):
        fake.insert("shop.nope", {"id": 1})
    fake.insert("shop.orders", order(1))
    with pytest.raises(FakeMysqlError, match="Duplicate entry"):
        fake.insert("shop.orders", order(1))
    with pytest.raises(FakeMysqlError, match="no row with key"):
        fake.delete("shop.orders", {"id": 9})
    with pytest.raises(FakeMysqlError, match="before image"):
        fake.update("shop.orders", {"id": 1, "note": "wrong"}, {"note": "z"})
    fake.execute(
        "CREATE TABLE shop.typed (id BIGINT UNSIGNED NOT NULL, ts TIMESTAMP(3), st SET('a','b'), "
        "e ENUM('x','y'), bin BINARY(4), PRIMARY KEY (id))"
    )
    fake.insert(
        "shop.typed",
        {"id": 2**64 - 1, "ts": dt.datetime(2024, 1, 2, 3, 4, 5, 123456), "st": "b,a", "e": 2, "bin": b"ab"},
    )
    (row,) = fake.rows("shop.typed")
    assert row == {
        "id": 2**64 - 1,
        "ts": dt.datetime(2024, 1, 2, 3, 4, 5, 123000, tzinfo=dt.UTC),
        "st": frozenset({"a", "b"}),
        "e": "y",
        "bin": b"ab\0\0",
    }
    with pytest.raises(FakeMysqlError, match="out of range"):
        fake.insert("shop.typed", {"id": -1})


def test_large_statement_splits_into_several_rows_events() -> None:
    with FakeMysql(name="t_split", max_rows_event_size=1024) as f:
        f.execute("CREATE TABLE d.t (id INT PRIMARY KEY, s VARCHAR(200))")
        ev = f.insert_many("d.t", [{"id": i, "s": "x" * 100} for i in range(40)])
        rows = [e for e in ev if isinstance(e, RowsEvent)]
        assert len(rows) > 3
        assert [r.end_of_statement for r in rows] == [False] * (len(rows) - 1) + [True]
        assert sum(len(r.rows) for r in rows) == 40
        assert all(r.length <= 1024 + 200 for r in rows)
        assert len([e for e in ev if isinstance(e, TableMapEvent)]) == 1


# -- offsets, files, clock -----------------------------------------------------------------------------------------


def test_offsets_chain_and_grow(fake: FakeMysql) -> None:
    for i in range(5):
        fake.insert("shop.orders", order(i, "n" * i))
    events = fake.events()
    assert events[0].offset == 4 and isinstance(events[0], FormatDescriptionEvent)
    for a, b in itertools.pairwise(events):
        assert b.offset == a.next_offset
        assert a.next_offset > a.offset
    assert fake.end == events[-1].next_offset == fake.binlog_files()[-1].size
    sizes = [e.length for e in events if isinstance(e, RowsEvent)]
    assert sizes == sorted(sizes) and sizes[0] < sizes[-1]  # longer notes, longer events


def test_rotate_purge_and_auto_rotation(fake: FakeMysql) -> None:
    fake.insert("shop.orders", order(1))
    end1 = fake.end
    assert fake.rotate() == "mysql-bin.000002"
    last = fake.events("mysql-bin.000001")[-1]
    assert isinstance(last, RotateEvent) and last.offset == end1 and last.next_file == "mysql-bin.000002"
    assert not last.artificial and last.next_position == 4
    assert fake.events("mysql-bin.000002")[0].offset == 4
    fake.rotate()
    assert [f.name for f in fake.binlog_files()] == ["mysql-bin.000001", "mysql-bin.000002", "mysql-bin.000003"]
    fake.purge_to("mysql-bin.000002")
    assert [f.name for f in fake.binlog_files()] == ["mysql-bin.000002", "mysql-bin.000003"]
    with pytest.raises(FakeMysqlError):
        fake.purge_to("mysql-bin.000001")
    with FakeMysql(name="t_auto", max_binlog_size=600) as small:
        small.execute(ORDERS)
        for i in range(10):
            small.insert("shop.orders", order(i))
        files = small.binlog_files()
        assert len(files) > 2
        assert all(f.size >= 600 for f in files[:-1])
        for f in files[:-1]:  # never inside a transaction: each file ends XID, ROTATE
            tail = small.events(f.name)[-2:]
            assert names(tail)[1] == "RotateEvent" and names(tail)[0] in ("XidEvent", "QueryEvent")


def test_clock(fake: FakeMysql) -> None:
    assert fake.insert("shop.orders", order(1))[0].timestamp == DEFAULT_START_TIME
    fake.advance_clock(90.5)
    assert fake.insert("shop.orders", order(2))[0].timestamp == DEFAULT_START_TIME + 90
    fake.set_clock(dt.datetime(2025, 1, 1, tzinfo=dt.UTC))
    with fake.transaction() as tx:
        tx.insert("shop.orders", order(3))
        fake.advance_clock(5)
    ts = [e.timestamp for e in tx.events]
    start = int(dt.datetime(2025, 1, 1, tzinfo=dt.UTC).timestamp())
    assert ts[:-1] == [start] * (len(ts) - 1) and ts[-1] == start + 5  # the XID has the commit time
    with pytest.raises(FakeMysqlError):
        fake.advance_clock(-1)


def test_failover_continues_the_sequence_with_new_server_id(gfake: FakeMysql) -> None:
    gfake.insert("shop.orders", order(1))
    old_uuid = gfake.server_uuid()
    gfake.failover(server_id=2)
    assert gfake.server_id() == 2 and gfake.current_file == "mysql-bin.000002"
    rot = gfake.events("mysql-bin.000001")[-1]
    assert isinstance(rot, RotateEvent) and rot.server_id == 1
    ev = gfake.insert("shop.orders", order(2))
    assert {e.server_id for e in ev} == {2}
    new_uuid = gfake.server_uuid()
    assert new_uuid != old_uuid and isinstance(ev[0], GtidEvent) and ev[0].gtid == f"{new_uuid}:1"
    prev = gfake.events("mysql-bin.000002")[1]
    assert isinstance(prev, GtidSetEvent) and prev.gtid_set == f"{old_uuid}:1-2"
    assert gfake.rows("shop.orders") == [
        {"id": 1, "amount": Decimal("1.00"), "note": "x"},
        {"id": 2, "amount": Decimal("2.00"), "note": "x"},
    ]


def test_failover_new_binlog(mfake: FakeMysql) -> None:
    mfake.insert("shop.orders", order(1))
    mfake.rotate()
    mfake.failover(server_id=7, new_binlog=True)
    assert [f.name for f in mfake.binlog_files()] == ["mysql-bin.000001"]
    assert mfake.events()[0].server_id == 7
    gl = mfake.events()[1]
    assert isinstance(gl, GtidSetEvent) and gl.gtid_set == "0-1-2"
    ev = mfake.insert("shop.orders", order(2))
    assert isinstance(ev[0], GtidEvent) and ev[0].gtid == "0-7-3"
    got = dump_all(mfake, gtid_set="0-1-2")  # GTID resume works across the failover
    assert [e.gtid for e in got if isinstance(e, GtidEvent)] == ["0-7-3"]


def test_enable_gtid_rotates(fake: FakeMysql) -> None:
    fake.insert("shop.orders", order(1))
    assert fake.master_status().gtid is None
    fake.enable_gtid()
    assert fake.current_file == "mysql-bin.000002"
    assert isinstance(fake.events("mysql-bin.000002")[1], GtidSetEvent)
    ev = fake.insert("shop.orders", order(2))
    assert isinstance(ev[0], GtidEvent)


# -- dumps -----------------------------------------------------------------------------------------------------------


def test_source_satisfies_protocol(fake: FakeMysql) -> None:
    src = fake.source()
    assert isinstance(src, BinlogSource)
    assert src.address == "fake://t_fake" and not src.is_mariadb
    src.open()
    assert src.server_id() == 1
    assert src.master_status().journal_name == "mysql-bin.000001"
    assert src.query("SELECT 1") == [(1,)]
    assert src.query("SHOW MASTER STATUS")[0][:2] == ("mysql-bin.000001", fake.end)
    assert src.query("SELECT @@server_id, @@global.binlog_format") == [(1, "ROW")]
    assert ("binlog_row_image", "FULL") in src.query("SHOW VARIABLES LIKE 'binlog_row%'")
    with pytest.raises(SourceError) as err:
        src.query("SELECT nonsense()")
    assert err.value.errno == 1064


def test_dump_from_start_of_file(fake: FakeMysql) -> None:
    fake.insert("shop.orders", order(1))
    ev = list(fake.source().dump(DumpRequest("mysql-bin.000001", 4, blocking=False)))
    rot, fde = ev[0], ev[1]
    assert isinstance(rot, RotateEvent) and rot.artificial and rot.timestamp == 0
    assert rot.next_file == "mysql-bin.000001" and rot.next_position == 4
    assert isinstance(fde, FormatDescriptionEvent) and fde.offset == 4 and fde.next_offset > 4  # the real one
    assert ev[1:] == fake.events("mysql-bin.000001")


def test_dump_from_mid_file_event_start(fake: FakeMysql) -> None:
    first = fake.insert("shop.orders", order(1))
    second = fake.insert("shop.orders", order(2))
    start = second[0].offset
    ev = list(fake.source().dump(DumpRequest("mysql-bin.000001", start, blocking=False)))
    assert isinstance(ev[0], RotateEvent) and ev[0].next_position == start
    fde = ev[1]
    assert isinstance(fde, FormatDescriptionEvent) and fde.offset == 0 and fde.next_offset == 0  # artificial
    assert ev[2:] == second
    assert first[-1].next_offset == start
    # from the end: nothing but the preamble
    ev = list(fake.source().dump(DumpRequest("mysql-bin.000001", fake.end, blocking=False)))
    assert names(ev) == ["RotateEvent", "FormatDescriptionEvent"]


def test_dump_bogus_position_and_purged_file(fake: FakeMysql) -> None:
    ev = fake.insert("shop.orders", order(1))
    src = fake.source()
    with pytest.raises(SourceError) as err:
        src.dump(DumpRequest("mysql-bin.000001", ev[1].offset + 1, blocking=False))
    assert err.value.errno == 1236 and "bogus data in log event" in str(err.value)
    assert not isinstance(err.value, BinlogPurgedError)
    with pytest.raises(SourceError) as err:
        src.dump(DumpRequest("mysql-bin.000001", fake.end + 100, blocking=False))
    assert err.value.errno == 1236
    fake.rotate()
    fake.purge_to("mysql-bin.000002")
    with pytest.raises(BinlogPurgedError) as perr:
        src.dump(DumpRequest("mysql-bin.000001", 4, blocking=False))
    assert perr.value.errno == 1236 and "Could not find first log file name" in str(perr.value)
    with pytest.raises(BinlogPurgedError):
        src.dump(DumpRequest("mysql-bin.000009", 4, blocking=False))


def test_dump_crosses_files_and_starts_at_oldest(fake: FakeMysql) -> None:
    fake.insert("shop.orders", order(1))
    fake.rotate()
    fake.insert("shop.orders", order(2))
    fake.rotate()
    fake.purge_to("mysql-bin.000002")
    ev = dump_all(fake)  # no file named: the oldest present file
    assert isinstance(ev[0], RotateEvent) and ev[0].next_file == "mysql-bin.000002"
    assert real(ev) == fake.events()
    fake_rotates = [e for e in ev if isinstance(e, RotateEvent) and e.artificial]
    assert [r.next_file for r in fake_rotates] == ["mysql-bin.000002", "mysql-bin.000003"]
    i = ev.index(fake_rotates[1])
    own = ev[i - 1]
    assert isinstance(own, RotateEvent) and not own.artificial  # the file's own rotate comes first
    assert isinstance(ev[i + 1], FormatDescriptionEvent) and ev[i + 1].log_file == "mysql-bin.000003"


def test_dump_from_mysql_gtid_set(gfake: FakeMysql) -> None:
    uuid = gfake.server_uuid()
    for i in range(1, 5):
        gfake.insert("shop.orders", order(i))  # gtids 2..5
    ev = dump_all(gfake, gtid_set=f"{uuid}:1-3")
    assert [e.gtid for e in ev if isinstance(e, GtidEvent)] == [f"{uuid}:4", f"{uuid}:5"]
    assert [r.rows[0].after_dict()["id"] for r in ev if isinstance(r, RowsEvent)] == [3, 4]
    ev = dump_all(gfake, gtid_set=f"{uuid}:1-2:4")  # a hole: only what is missing
    assert [e.gtid for e in ev if isinstance(e, GtidEvent)] == [f"{uuid}:3", f"{uuid}:5"]
    # newest file whose previous-GTIDs the set contains
    gfake.rotate()
    gfake.insert("shop.orders", order(9))
    ev = dump_all(gfake, gtid_set=f"{uuid}:1-5")
    assert isinstance(ev[0], RotateEvent) and ev[0].next_file == "mysql-bin.000002"
    assert [e.gtid for e in ev if isinstance(e, GtidEvent)] == [f"{uuid}:6"]
    gfake.purge_to("mysql-bin.000002")
    with pytest.raises(BinlogPurgedError) as err:
        dump_all(gfake, gtid_set=f"{uuid}:1-2")
    assert err.value.errno == 1236
    with pytest.raises(SourceError) as serr:
        dump_all(gfake, gtid_set=f"{uuid}:1-99")
    assert serr.value.errno == 1236 and "more GTIDs" in str(serr.value)


def test_gtid_dump_needs_gtid_mode(fake: FakeMysql) -> None:
    with pytest.raises(SourceError) as err:
        dump_all(fake, gtid_set="")
    assert err.value.errno == 1236 and "GTID_MODE = OFF" in str(err.value)


def test_dump_from_mariadb_gtid_pos(mfake: FakeMysql) -> None:
    for i in range(1, 4):
        mfake.insert("shop.orders", order(i))  # 0-1-2 .. 0-1-4
    ev = dump_all(mfake, gtid_set="0-1-3")
    assert [e.gtid for e in ev if isinstance(e, GtidEvent)] == ["0-1-4"]
    ev = dump_all(mfake, gtid_set="")
    assert [e.gtid for e in ev if isinstance(e, GtidEvent)] == ["0-1-1", "0-1-2", "0-1-3", "0-1-4"]
    mfake.rotate()
    mfake.insert("shop.orders", order(5))
    mfake.purge_to("mysql-bin.000002")
    ev = dump_all(mfake, gtid_set="0-1-4")
    assert isinstance(ev[0], RotateEvent) and ev[0].next_file == "mysql-bin.000002"
    assert [e.gtid for e in ev if isinstance(e, GtidEvent)] == ["0-1-5"]
    with pytest.raises(BinlogPurgedError):
        dump_all(mfake, gtid_set="0-1-2")
    with pytest.raises(SourceError) as err:
        dump_all(mfake, gtid_set="0-1-50")
    assert err.value.errno == 1236 and not isinstance(err.value, BinlogPurgedError)


def test_non_blocking_dump_ends_at_current_end(fake: FakeMysql) -> None:
    dump = fake.source().dump(DumpRequest(blocking=False))
    got = list(dump)
    fake.insert("shop.orders", order(1))
    assert next(dump, None) is None  # ended: later events are not seen
    assert real(got) == fake.events()[: len(real(got))]
    assert fake.active_dumps == 0


def _consume(dump: Any, into: list[BinlogEvent], errors: list[BaseException], stop: int | None = None) -> None:
    try:
        for e in dump:
            into.append(e)
            if stop is not None and len(into) >= stop:
                return
    except BaseException as exc:
        errors.append(exc)


def test_blocking_dump_is_woken_by_a_commit(fake: FakeMysql) -> None:
    dump = fake.source().dump(DumpRequest(fake.current_file, fake.end, heartbeat_period_s=60))
    got: list[BinlogEvent] = []
    errors: list[BaseException] = []
    t = threading.Thread(target=_consume, args=(dump, got, errors, 2 + 4))  # preamble + BEGIN, map, rows, XID
    t.start()
    assert fake.wait_for_idle_dumps(1, timeout=5)  # caught up and blocked
    assert names(got) == ["RotateEvent", "FormatDescriptionEvent"]
    written = fake.insert("shop.orders", order(1))
    t.join(timeout=5)
    assert not t.is_alive() and not errors
    assert got[2:] == written  # no heartbeat: it was the commit that woke it (period 60 s)
    dump.close()


def test_blocking_dump_heartbeats_when_idle(fake: FakeMysql) -> None:
    dump = fake.source().dump(DumpRequest(fake.current_file, fake.end, heartbeat_period_s=0.02))
    with dump:
        assert names([next(dump), next(dump)]) == ["RotateEvent", "FormatDescriptionEvent"]
        hb = next(dump)
        assert isinstance(hb, HeartbeatEvent)
        assert hb.log_file == fake.current_file and hb.offset == fake.end and hb.length == 0
        assert isinstance(next(dump), HeartbeatEvent)


def test_close_stops_a_blocked_dump(fake: FakeMysql) -> None:
    src = fake.source()
    dump = src.dump(DumpRequest(fake.current_file, fake.end, heartbeat_period_s=60))
    got: list[BinlogEvent] = []
    errors: list[BaseException] = []
    t = threading.Thread(target=_consume, args=(dump, got, errors))
    t.start()
    assert fake.wait_for_idle_dumps(1, timeout=5)
    dump.close()  # from another thread: StopIteration
    t.join(timeout=5)
    assert not t.is_alive() and errors == []
    dump2 = src.dump(DumpRequest(fake.current_file, fake.end, heartbeat_period_s=60))
    t = threading.Thread(target=_consume, args=(dump2, got, errors))
    t.start()
    assert fake.wait_for_idle_dumps(1, timeout=5)
    src.close()  # closing the source: SourceError
    t.join(timeout=5)
    assert not t.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], SourceError) and errors[0].errno == 2013
    assert fake.active_dumps == 0


# -- failure injection ----------------------------------------------------------------------------------------------


def test_fail_after(fake: FakeMysql) -> None:
    for i in range(3):
        fake.insert("shop.orders", order(i))
    fake.fail_after(events=7)
    dump = fake.source().dump(DumpRequest(blocking=False))
    got = []
    with pytest.raises(SourceError) as err:
        for e in dump:
            got.append(e)
    assert err.value.errno == 2013 and len(got) == 7
    assert len(dump_all(fake)) > 7  # only the next dump connection drops


def test_refuse(fake: FakeMysql) -> None:
    src = fake.source()
    fake.refuse(errno=1045, times=2)
    with pytest.raises(SourceUnreachableError) as err:
        src.open()
    assert err.value.errno == 1045
    with pytest.raises(SourceUnreachableError):
        src.dump(DumpRequest(blocking=False))
    src.open()
    assert len(list(src.dump(DumpRequest(blocking=False)))) > 2
    fake.refuse(errno=1236, times=1)
    with pytest.raises(BinlogPurgedError):
        src.dump(DumpRequest(blocking=False))
    fake.refuse(errno=1205)
    with pytest.raises(SourceError) as serr:
        src.dump(DumpRequest(blocking=False))
    assert serr.value.errno == 1205 and not isinstance(serr.value, SourceUnreachableError)
    assert fake.dump_attempts == 4 and fake.dumps_started == 1 and fake.connect_attempts == 2


def test_stall_and_unstall(fake: FakeMysql) -> None:
    fake.stall()
    dump = fake.source().dump(DumpRequest(blocking=True, heartbeat_period_s=0.001))
    got: list[BinlogEvent] = []
    errors: list[BaseException] = []
    t = threading.Thread(target=_consume, args=(dump, got, errors, 3))
    t.start()
    assert fake.wait_for_idle_dumps(1, timeout=5)
    assert got == []  # stalled: not even the preamble or heartbeats
    fake.unstall()
    t.join(timeout=5)
    assert not t.is_alive() and names(got) == ["RotateEvent", "FormatDescriptionEvent", "QueryEvent"]
    fake.stall()
    t = threading.Thread(target=_consume, args=(dump, got, errors))
    t.start()
    assert fake.wait_for_idle_dumps(1, timeout=5)
    dump.close()
    t.join(timeout=5)
    assert not t.is_alive() and errors == [] and len(got) == 3


def test_down_and_up(fake: FakeMysql) -> None:
    src = fake.source()
    dump = src.dump(DumpRequest(fake.current_file, fake.end, heartbeat_period_s=60))
    got: list[BinlogEvent] = []
    errors: list[BaseException] = []
    t = threading.Thread(target=_consume, args=(dump, got, errors))
    t.start()
    assert fake.wait_for_idle_dumps(1, timeout=5)
    fake.down()
    t.join(timeout=5)
    assert not t.is_alive() and isinstance(errors[0], SourceError) and errors[0].errno == 2013
    for call in (src.open, src.master_status, lambda: src.query("SELECT 1"), lambda: src.dump(DumpRequest())):
        with pytest.raises(SourceUnreachableError) as err:
            call()
        assert err.value.errno == 2003
    fake.up()
    src.open()
    assert src.query("SELECT 1") == [(1,)]


def test_failover_drops_open_dumps(fake: FakeMysql) -> None:
    dump = fake.source().dump(DumpRequest(blocking=False))
    next(dump)
    fake.failover(server_id=2)
    with pytest.raises(SourceError) as err:
        next(dump)
    assert err.value.errno == 2013


def test_dump_requests_are_recorded(fake: FakeMysql) -> None:
    src = fake.source()
    list(src.dump(DumpRequest(blocking=False)))
    req = DumpRequest("mysql-bin.000001", 4, blocking=False)
    list(src.dump(req))
    assert fake.dumps_started == 2 and fake.dump_requests[-1] == req


# -- schema evolution -----------------------------------------------------------------------------------------------


def test_rows_keep_the_schema_of_their_time(fake: FakeMysql) -> None:
    before = fake.insert("shop.orders", order(1))
    fake.execute("ALTER TABLE shop.orders ADD COLUMN qty INT UNSIGNED NOT NULL DEFAULT 1 AFTER id")
    after = fake.insert("shop.orders", {"id": 2, "qty": 5})
    old_rows = next(e for e in before if isinstance(e, RowsEvent))
    new_rows = next(e for e in after if isinstance(e, RowsEvent))
    assert old_rows.table.names == ("id", "amount", "note")
    assert new_rows.table.names == ("id", "qty", "amount", "note")
    assert new_rows.table_id != old_rows.table_id
    qty = new_rows.table.columns[1]
    assert qty.unsigned and not qty.nullable and qty.mysql_type == "int unsigned" and qty.sql_type == -5
    assert new_rows.rows[0].after == (2, 5, None, None)
    # the dump still serves the old rows with the old schema
    served = [e for e in dump_all(fake) if isinstance(e, RowsEvent)]
    assert served[0].table is old_rows.table and served[1].table is new_rows.table
    assert fake.rows("shop.orders")[0] == {"id": 1, "qty": 0, "amount": Decimal("1.00"), "note": "x"}


def test_registry() -> None:
    a = FakeMysql(name="t_reg")
    try:
        assert lookup_fake("fake://t_reg") is a and FakeMysql.lookup("t_reg") is a
        src = fake_source("fake://t_reg")
        assert isinstance(src, FakeBinlogSource) and src.address == "fake://t_reg"
        src.open()
        b = FakeMysql(name="t_reg", server_id=5)  # replaces a
        assert lookup_fake("fake://t_reg") is b and src.server_id() == 5  # resolved per call
        a.unregister()  # not registered any more: no effect on b
        assert lookup_fake("fake://t_reg") is b
        b.unregister()
        with pytest.raises(SourceUnreachableError) as err:
            lookup_fake("fake://t_reg")
        assert err.value.errno == 2003 and "t_reg" in str(err.value)
        with pytest.raises(SourceUnreachableError):
            src.open()
    finally:
        a.unregister()


def test_fake_mysql_fixture(fake_mysql: FakeMysql) -> None:
    assert lookup_fake(fake_mysql.address) is fake_mysql
    assert fake_mysql.address.startswith("fake://t_test_fake_mysql_fixture")
    assert fake_mysql.binlog_files()[0].name == "mysql-bin.000001"


@pytest.mark.parametrize("fake_mysql", [{"mariadb": True, "gtid": True}], indirect=True)
def test_fake_mysql_fixture_parametrized(fake_mysql: FakeMysql) -> None:
    assert fake_mysql.is_mariadb and fake_mysql.gtid_enabled


def test_exported_from_canal_testing() -> None:
    import canal.testing

    assert canal.testing.FakeMysql is FakeMysql


def test_blocking_dump_follows_a_rotation(fake: FakeMysql) -> None:
    dump = fake.source().dump(DumpRequest(fake.current_file, fake.end, heartbeat_period_s=60))
    with dump:
        assert names([next(dump), next(dump)]) == ["RotateEvent", "FormatDescriptionEvent"]
        fake.rotate()
        ev = fake.insert("shop.orders", order(1))
        got = [next(dump) for _ in range(3 + len(ev))]
        own, artificial, fde = got[:3]
        assert isinstance(own, RotateEvent) and not own.artificial and own.log_file == "mysql-bin.000001"
        assert isinstance(artificial, RotateEvent) and artificial.artificial
        assert isinstance(fde, FormatDescriptionEvent) and fde.log_file == "mysql-bin.000002" and fde.offset == 4
        assert got[3:] == ev


def test_mariadb_status_queries(mfake: FakeMysql) -> None:
    mfake.insert("shop.orders", order(1))
    src = mfake.source()
    assert src.is_mariadb
    assert src.query("SELECT @@gtid_binlog_pos, @@GLOBAL.gtid_current_pos") == [("0-1-2", "0-1-2")]
    assert src.query("SHOW MASTER STATUS") == [("mysql-bin.000001", mfake.end, "", "")]
    assert src.query("SHOW BINARY LOGS") == [("mysql-bin.000001", mfake.end)]
    assert "MariaDB" in src.query("SELECT VERSION()")[0][0]


def test_concurrent_readers_see_the_whole_binlog_in_order(fake: FakeMysql) -> None:
    total = 150
    results: list[list[BinlogEvent]] = [[] for _ in range(3)]
    errors: list[BaseException] = []

    def reader(into: list[BinlogEvent]) -> None:
        try:
            with fake.source().dump(DumpRequest("mysql-bin.000001", 4, heartbeat_period_s=60)) as dump:
                xids = 0
                for e in dump:
                    into.append(e)
                    xids += isinstance(e, XidEvent)
                    if xids == total:
                        return
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=reader, args=(r,)) for r in results]
    for t in threads:
        t.start()
    for i in range(total):
        fake.insert("shop.orders", order(i))
        if i % 40 == 39:
            fake.rotate()
    for t in threads:
        t.join(timeout=10)
    assert not errors and not any(t.is_alive() for t in threads)
    stored = [e for e in fake.events() if not isinstance(e, RotateEvent)]
    for got in results:
        seen = [e for e in real(got) if not isinstance(e, RotateEvent)]
        assert seen == stored


def test_decimal_65_30_at_its_limits_and_mysql_rounding() -> None:
    """MariaDB stores DECIMAL(65,30) values of 65 digits and rounds half away from zero; so does the fake (it used
    to raise decimal.InvalidOperation beyond 28 digits)."""
    big = Decimal("9" * 35 + "." + "9" * 30)
    with FakeMysql(name="decimals") as fake:
        fake.execute("CREATE TABLE shop.d (id INT PRIMARY KEY, v DECIMAL(65,30), r DECIMAL(4,2))")
        events = fake.insert("shop.d", {"id": 1, "v": big, "r": Decimal("1.235")})
        fake.insert("shop.d", {"id": 2, "v": Decimal("-" + str(big)), "r": Decimal("-1.235")})
        rows = [e for e in events if isinstance(e, RowsEvent)]
        assert rows and rows[0].rows[0].after == (1, big, Decimal("1.24"))
        with pytest.raises(FakeMysqlError, match="digits"):
            fake.insert("shop.d", {"id": 3, "v": Decimal("1" + "0" * 35), "r": 0})
