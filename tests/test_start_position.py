"""Start-position finding: every branch of canal's findStartPosition, on the BinlogSource protocol."""

from __future__ import annotations

from typing import Any

import pytest
from test_parser_helpers import UUID, MiniMysql

from canal.address import same_endpoint
from canal.config import MasterConfig
from canal.parse.events import BinlogEvent, GtidEvent, QueryEvent, RowsEvent, XidEvent
from canal.parse.start_position import (
    StartPosition,
    align_to_transaction,
    begins_transaction,
    find_start_position,
    search_file,
    transaction_begin,
)
from canal.position import EntryPosition, LogIdentity, LogPosition

T0 = 1_700_000_000


def timeline(gtid: bool = False) -> MiniMysql:
    """Transactions at T0+10, T0+20, T0+30 (file 1) and T0+40, T0+50 (file 2)."""
    db = MiniMysql(clock=T0, gtid=gtid)
    for i in range(1, 6):
        db.clock = T0 + 10 * i
        db.transaction([("insert", "shop.orders", [(i, i, "x")])])
        if i == 3:
            db.rotate()
    return db


def find(db: MiniMysql, *, saved: LogPosition | None = None, configured: MasterConfig | None = None, **kw: Any) -> Any:
    conn = db.connect()
    conn.open()
    return find_start_position(conn, saved=saved, configured=configured, **kw)


def events_of(db: MiniMysql, kind: type[BinlogEvent], file_no: int = 1) -> list[Any]:
    return [e for e in db.file(f"mysql-bin.{file_no:06d}") if isinstance(e, kind)]


def begins(db: MiniMysql, file_no: int = 1) -> list[QueryEvent]:
    return [e for e in events_of(db, QueryEvent, file_no) if e.sql == "BEGIN"]


def test_nothing_configured_starts_at_master_status() -> None:
    db = timeline()
    start = find(db)
    assert start.position.journal_name == "mysql-bin.000002"
    assert start.position.position == db.file("mysql-bin.000002")[-1].next_offset
    assert not start.position.included and start.rows_done == 0 and start.gtid_set is None
    assert "master status" in start.reason


def test_saved_position_on_the_same_server_is_used_with_its_rows_done() -> None:
    db = timeline()
    xid = events_of(db, XidEvent)[1]
    anchor = EntryPosition(xid.log_file, xid.offset, xid.timestamp * 1000, 1, None, True)
    saved = LogPosition(LogIdentity(db.address, -1), anchor, rows_done=3)
    start = find(
        db, saved=saved, configured=MasterConfig(address=db.address, journal_name="mysql-bin.000001", position=4)
    )
    assert start.position == anchor and start.rows_done == 3 and start.reason == "saved position"


def test_saved_position_from_another_address_searches_by_time_minus_fallback() -> None:
    old = timeline()
    new = timeline()
    xid = events_of(old, XidEvent, 2)[0]  # the T0+40 transaction
    saved = LogPosition(
        LogIdentity(old.address.replace("m", "old"), -1),
        EntryPosition(xid.log_file, xid.offset, (T0 + 40) * 1000, 1, None, True),
    )
    start = find(new, saved=saved, fallback_interval_s=15)
    # T0+25: the last boundary before it is the end of the T0+20 transaction
    end = events_of(new, XidEvent)[1]
    assert start.position == EntryPosition("mysql-bin.000001", end.next_offset, (T0 + 20) * 1000, 1)
    assert start.rows_done == 0 and "switch" in start.reason


def test_server_id_change_behind_one_address_searches_by_time() -> None:
    db = timeline()
    xid = events_of(db, XidEvent, 2)[1]
    saved = LogPosition(
        LogIdentity(db.address, -1),
        EntryPosition(xid.log_file, xid.offset, (T0 + 50) * 1000, 1, None, True),
        rows_done=2,
    )
    db.failover(server_id=2)
    for i in range(6):
        db.clock = T0 + 5 + 10 * i
        db.transaction([("insert", "shop.orders", [(i, i, "y")])])
    start = find(db, saved=saved, fallback_interval_s=0)
    # the new server's transactions are at T0+5 ... T0+55: the last one before T0+50 is at T0+45 (its BEGIN is first)
    begin = begins(db)[4]
    end = events_of(db, XidEvent)[4]
    assert begin.timestamp == T0 + 45
    assert start.position.position == end.next_offset and start.rows_done == 0
    assert "server id" in start.reason


def test_configured_file_and_offset() -> None:
    db = timeline()
    begin = begins(db)[1]
    start = find(
        db, configured=MasterConfig(address=db.address, journal_name="mysql-bin.000001", position=begin.offset)
    )
    assert start.position == EntryPosition("mysql-bin.000001", begin.offset) and start.aligned


def test_configured_offset_inside_a_transaction_moves_back_to_its_begin() -> None:
    db = MiniMysql()
    db.transaction([("insert", "shop.orders", [(1, 1, "a")]), ("insert", "shop.orders", [(2, 1, "b")])])
    rows = events_of(db, RowsEvent)
    start = find(
        db, configured=MasterConfig(address=db.address, journal_name="mysql-bin.000001", position=rows[1].offset)
    )
    assert start.position.position == begins(db)[0].offset
    assert transaction_begin(db.connect(), "mysql-bin.000001", rows[0].offset) == begins(db)[0].offset


def test_configured_offset_inside_a_gtid_transaction_moves_back_to_its_gtid_event() -> None:
    db = timeline(gtid=True)
    rows = events_of(db, RowsEvent)
    gtids = events_of(db, GtidEvent)
    start = find(
        db, configured=MasterConfig(address=db.address, journal_name="mysql-bin.000001", position=rows[2].offset)
    )
    assert start.position.position == gtids[2].offset


def test_configured_file_and_timestamp_searches_that_file() -> None:
    db = timeline()
    start = find(
        db, configured=MasterConfig(address=db.address, journal_name="mysql-bin.000001", timestamp=(T0 + 30) * 1000)
    )
    end = events_of(db, XidEvent)[1]
    assert start.position == EntryPosition("mysql-bin.000001", end.next_offset, (T0 + 20) * 1000, 1)
    # nothing before the timestamp in that file: the file's start
    early = find(
        db, configured=MasterConfig(address=db.address, journal_name="mysql-bin.000002", timestamp=(T0 + 5) * 1000)
    )
    assert early.position == EntryPosition("mysql-bin.000002", 4)


def test_configured_file_only_starts_at_its_beginning() -> None:
    db = timeline()
    start = find(db, configured=MasterConfig(address=db.address, journal_name="mysql-bin.000002"))
    assert start.position == EntryPosition("mysql-bin.000002", 4)


def test_configured_timestamp_searches_files_newest_first() -> None:
    db = timeline()
    in_second = find(db, configured=MasterConfig(address=db.address, timestamp=(T0 + 45) * 1000))
    assert in_second.position.journal_name == "mysql-bin.000002"
    assert in_second.position.position == events_of(db, XidEvent, 2)[0].next_offset
    # the first transaction of file 2 is after T0+35: found in file 1, after its last transaction
    in_first = find(db, configured=MasterConfig(address=db.address, timestamp=(T0 + 35) * 1000))
    assert in_first.position.journal_name == "mysql-bin.000001"
    assert in_first.position.position == events_of(db, XidEvent)[2].next_offset
    # exactly at a transaction's time: that transaction is included
    exact = find(db, configured=MasterConfig(address=db.address, timestamp=(T0 + 20) * 1000))
    assert exact.position.position == events_of(db, XidEvent)[0].next_offset
    # before everything: the oldest file still there
    db.purge_to("mysql-bin.000002")
    oldest = find(db, configured=MasterConfig(address=db.address, timestamp=(T0 + 1) * 1000))
    assert oldest.position == EntryPosition("mysql-bin.000002", 4)


def test_timestamp_search_begin_before_and_end_after() -> None:
    db = MiniMysql(clock=T0)
    db.transaction([("insert", "shop.orders", [(1, 1, "a")])])
    db.clock = T0 + 10
    db.execute("CREATE TABLE shop.t (id INT)")
    ddl = events_of(db, QueryEvent)[-1]
    assert search_file(db.connect(), "mysql-bin.000001", (T0 + 11) * 1000) == EntryPosition(
        "mysql-bin.000001", ddl.next_offset, (T0 + 10) * 1000, 1
    )
    assert search_file(db.connect(), "mysql-bin.000001", T0 * 1000) is None


def test_gtid_mode_branches() -> None:
    db = timeline(gtid=True)
    saved = LogPosition(
        LogIdentity("fake://other", -1),
        EntryPosition("mysql-bin.000001", 500, T0 * 1000, 1, f"{UUID}:1-2", True),
        rows_done=1,
    )
    start = find(db, saved=saved, gtid_mode=True)
    assert start.gtid_set == f"{UUID}:1-2" and start.rows_done == 1 and "gtid" in start.reason
    req = start.dump_request()
    assert req.gtid_set == f"{UUID}:1-2" and req.journal_name is None
    # no saved position: the configured GTID set
    configured = MasterConfig(address=db.address, gtid=f"{UUID}:1-3")
    assert find(db, configured=configured, gtid_mode=True).gtid_set == f"{UUID}:1-3"
    # a saved position without a GTID set (written before GTID mode) falls back to file/position
    plain = LogPosition(LogIdentity(db.address, -1), EntryPosition("mysql-bin.000001", 4, T0 * 1000, 1))
    fallback = find(db, saved=plain, gtid_mode=True)
    assert fallback.gtid_set is None and fallback.position == plain.position
    # outside GTID mode the GTID is ignored
    assert find(db, configured=configured).gtid_set is None


def test_switch_without_a_saved_time_uses_this_servers_configured_position() -> None:
    db = timeline()
    saved = LogPosition(LogIdentity("fake://old-master", -1), EntryPosition("mysql-bin.000007", 1234))
    configured = MasterConfig(address=db.address, journal_name="mysql-bin.000002")
    start = find(db, saved=saved, configured=configured, address=db.address)
    assert start.position == EntryPosition("mysql-bin.000002", 4)
    assert "master status" in find(db, saved=saved, address=db.address).reason


class _CountingSource:
    """A source that counts the events its dumps hand out (how much of a file a start reads)."""

    def __init__(self, db: MiniMysql) -> None:
        self.conn = db.connect()
        self.conn.open()
        self.address = self.conn.address
        self.events = 0

    def dump(self, request: Any) -> Any:
        for event in self.conn.dump(request):
            self.events += 1
            yield event

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


def test_a_start_at_a_transaction_boundary_reads_one_event_not_the_file() -> None:
    db = MiniMysql()
    for i in range(200):
        db.transaction([("insert", "shop.orders", [(i, i, "x")])])
    db.execute("CREATE TABLE shop.extra (id INT PRIMARY KEY)")
    db.transaction([("insert", "shop.orders", [(500, 1, "y")])])
    ddl = next(e for e in events_of(db, QueryEvent) if e.sql.startswith("CREATE"))
    rows = events_of(db, RowsEvent)
    xids = events_of(db, XidEvent)
    cases = [
        (begins(db)[150].offset, True),
        (ddl.offset, True),
        (db.file("mysql-bin.000001")[-1].next_offset, True),  # the end of the file (master status)
        (rows[150].offset, False),
        (xids[150].offset, False),
    ]
    for offset, boundary in cases:
        source = _CountingSource(db)
        assert begins_transaction(source, "mysql-bin.000001", offset) is boundary  # type: ignore[arg-type]
        assert source.events <= 3  # the artificial rotate, the format description, the event there
        source = _CountingSource(db)
        start = align_to_transaction(source, StartPosition(EntryPosition("mysql-bin.000001", offset)), None)  # type: ignore[arg-type]
        if boundary:
            assert start.position.position == offset and source.events <= 3
        else:
            assert start.position.position == begins(db)[150].offset
            assert source.events > 600  # the scan from the file's start


def test_a_gtid_event_begins_a_transaction() -> None:
    db = timeline(gtid=True)
    gtid = events_of(db, GtidEvent)[1]
    begin = begins(db)[1]
    conn = db.connect()
    conn.open()
    assert begins_transaction(conn, "mysql-bin.000001", gtid.offset)
    # a BEGIN after its GTID event: the dump may start there (the GTID event is not needed to read the transaction)
    assert begins_transaction(conn, "mysql-bin.000001", begin.offset)


def test_a_cursor_canal_wrote_names_this_server_by_its_resolved_host() -> None:
    """Java canal writes the host its InetSocketAddress resolved to: a cursor for 127.0.0.1:P names localhost:P
    (measured: tests/test_peers_ha_mariadb.py). It is this server's position, not a switch searched by time (which
    handed out again every row of the fallback interval)."""
    db = timeline()
    xid = events_of(db, XidEvent)[1]
    anchor = EntryPosition(xid.log_file, xid.offset, xid.timestamp * 1000, 1, None, True)
    saved = LogPosition(LogIdentity("localhost:3306", -1), anchor)
    start = find(db, saved=saved, address="127.0.0.1:3306")
    assert start.position == anchor and start.reason == "saved position"
    other = find(db, saved=LogPosition(LogIdentity("localhost:3307", -1), anchor), address="127.0.0.1:3306")
    assert "switch" in other.reason


@pytest.mark.parametrize(
    ("saved", "current", "same"),
    [
        (None, "127.0.0.1:3306", True),
        ("127.0.0.1:3306", "127.0.0.1:3306", True),
        ("localhost:3306", "127.0.0.1:3306", True),
        ("LOCALHOST:3306", "localhost:3306", True),
        ("localhost:3307", "127.0.0.1:3306", False),
        ("10.255.255.1:3306", "127.0.0.1:3306", False),
        ("no-such-host.invalid:3306", "127.0.0.1:3306", False),
        ("fake://a", "fake://a", True),
        ("fake://a", "fake://b", False),
        ("/var/lib/binlogs", "127.0.0.1:3306", False),
    ],
)
def test_same_endpoint(saved: str | None, current: str, same: bool) -> None:
    assert same_endpoint(saved, current) is same
