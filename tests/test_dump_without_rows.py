"""Dumps with ``DumpRequest(decode_rows=False)``: every source yields table maps and rows events as IgnoredEvent and
every other event exactly as a normal dump does, and the start-position scanners (which dump that way) find the same
positions as they do from fully decoded dumps -- on the parser itself, a private MariaDB (network and local files)
and the fake."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
import pytest
from test_mysql_events import _event, _rows_v2, _table_map

from canal.parse.events import (
    BinlogEvent,
    GtidEvent,
    IgnoredEvent,
    QueryEvent,
    RotateEvent,
    RowsEvent,
    TableMapEvent,
    XidEvent,
)
from canal.parse.mysql import EventDecoder, LocalBinlogSource, MysqlBinlogSource
from canal.parse.mysql import packets as P
from canal.parse.source import BinlogFile, BinlogSource, DumpRequest
from canal.parse.start_position import (
    StartPosition,
    align_to_transaction,
    find_by_timestamp,
    search_file,
    transaction_begin,
)
from canal.position import EntryPosition
from canal.testing.fake import FakeMysql

_ROW_CODES = frozenset(
    {
        P.WRITE_ROWS_EVENT_V1,
        P.UPDATE_ROWS_EVENT_V1,
        P.DELETE_ROWS_EVENT_V1,
        P.WRITE_ROWS_EVENT_V2,
        P.UPDATE_ROWS_EVENT_V2,
        P.DELETE_ROWS_EVENT_V2,
    }
)


class _Decoding:
    """A source whose dumps always decode rows: the scanners' behaviour before they asked for no rows."""

    def __init__(self, inner: BinlogSource) -> None:
        self.inner = inner
        self.requests: list[DumpRequest] = []

    @property
    def address(self) -> str:
        return self.inner.address

    @property
    def is_mariadb(self) -> bool:
        return self.inner.is_mariadb

    def open(self) -> None:
        self.inner.open()

    def close(self) -> None:
        self.inner.close()

    def server_id(self) -> int:
        return self.inner.server_id()

    def master_status(self) -> EntryPosition:
        return self.inner.master_status()

    def binlog_files(self) -> list[BinlogFile]:
        return self.inner.binlog_files()

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        return self.inner.query(sql)

    def dump(self, request: DumpRequest) -> Iterator[BinlogEvent]:
        self.requests.append(request)  # as the caller asked
        return self.inner.dump(attrs.evolve(request, decode_rows=True))


def _assert_undecoded(full: list[BinlogEvent], light: list[BinlogEvent], row_codes: frozenset[int]) -> None:
    """``light`` is ``full`` with every table map and rows event turned into an IgnoredEvent at the same place."""
    assert len(light) == len(full)
    for want, got in zip(full, light, strict=True):
        if isinstance(want, (RowsEvent, TableMapEvent)):
            assert isinstance(got, IgnoredEvent), (want, got)
            codes = {P.TABLE_MAP_EVENT} if isinstance(want, TableMapEvent) else row_codes
            assert got.type_code in codes
            assert (got.log_file, got.offset, got.next_offset, got.timestamp, got.server_id) == (
                want.log_file,
                want.offset,
                want.next_offset,
                want.timestamp,
                want.server_id,
            )
        else:
            assert got == want
    assert any(isinstance(e, RowsEvent) for e in full)


def _inside_rows(events: list[BinlogEvent]) -> list[tuple[int, int]]:
    """(offset of a rows event or table map, offset its transaction starts at) for every such event."""
    out: list[tuple[int, int]] = []
    begin: int | None = None
    for e in events:
        if isinstance(e, GtidEvent) and not e.standalone:
            begin = e.offset
        elif isinstance(e, QueryEvent):  # a BEGIN after a MySQL GTID event belongs to that event's transaction
            begin = (begin if begin is not None else e.offset) if e.sql == "BEGIN" else None
        elif isinstance(e, XidEvent):
            begin = None
        elif isinstance(e, (RowsEvent, TableMapEvent)):
            assert begin is not None
            out.append((e.offset, begin))
    return out


def _assert_scans_match(
    src: BinlogSource, journal: str, events: list[BinlogEvent], times_ms: list[int], every: int = 1
) -> None:
    """The scanners answer from rows-off dumps of ``src`` as from decoded ones (and inside a transaction, right).

    Each probe is a dump of the file: ``every`` > 1 probes a sample (a network dump costs a connection).
    """
    old = _Decoding(src)
    mine = [e for e in events if e.log_file == journal and e.length > 0]
    inside = _inside_rows(mine)
    assert inside
    # every boundary, the end, and a sample of places inside transactions
    probes = {e.offset for e in mine if not isinstance(e, (RowsEvent, TableMapEvent))} | {mine[-1].next_offset}
    probes |= {off for off, _ in inside[::7]} | {inside[-1][0]}
    for off in sorted(probes)[::every]:
        assert transaction_begin(src, journal, off) == transaction_begin(old, journal, off), off
    for off, begin in [*inside[:: 7 * every], inside[-1]]:
        assert transaction_begin(src, journal, off) == begin
        start = StartPosition(EntryPosition(journal, off), reason="configured", aligned=False)
        moved = align_to_transaction(src, start, None)
        assert moved.position.position == begin and moved.aligned
    for ts in times_ms[::every]:
        found = search_file(src, journal, ts)
        assert found == search_file(old, journal, ts), ts
        if found is not None:  # else older files are searched, which other tests may have filled
            assert find_by_timestamp(src, ts, reason="t") == find_by_timestamp(old, ts, reason="t"), ts
    assert old.requests and not any(r.decode_rows for r in old.requests)  # what the scanners asked for


# -- the parser ---------------------------------------------------------------------------------------------------


def test_parser_without_rows_never_decodes_nor_looks_up_columns() -> None:
    def lookup(schema: str, table: str) -> None:
        raise AssertionError(f"schema lookup of {schema}.{table} with decode_rows=False")

    parser = EventDecoder("binlog.000007", checksum=True, verify_checksum=True, schema_lookup=lookup, decode_rows=False)
    # a table map without column names: a decoding parser would ask schema_lookup for them
    named = _table_map(91)
    nameless = named[: named.index(b"\x02\x01\x01\x80") + 1]  # up to the null bitmap: no optional metadata
    tm = parser.parse(_event(P.TABLE_MAP_EVENT, nameless, 200, checksum=True))
    assert isinstance(tm, IgnoredEvent) and tm.type_code == P.TABLE_MAP_EVENT and tm.next_offset == 200
    # rows of a table id never mapped (a dump started mid-statement) and garbage compressed rows: never looked into
    rows = parser.parse(_event(P.WRITE_ROWS_EVENT_V2, _rows_v2(5, [(1, b"x")]), 300, checksum=True))
    assert isinstance(rows, IgnoredEvent) and rows.type_code == P.WRITE_ROWS_EVENT_V2
    assert (rows.offset, rows.next_offset, rows.timestamp, rows.server_id) == (300 - rows.length, 300, 1_700_000_000, 7)
    packed = parser.parse(_event(P.UPDATE_ROWS_COMPRESSED_EVENT, bytes(40), 400, checksum=True))
    assert isinstance(packed, IgnoredEvent) and packed.type_code == P.UPDATE_ROWS_COMPRESSED_EVENT
    assert not parser.tables
    xid = parser.parse(_event(P.XID_EVENT, (9).to_bytes(8, "little"), 500, checksum=True))
    assert isinstance(xid, XidEvent) and xid.xid == 9


# -- MariaDB --------------------------------------------------------------------------------------------------------


def _write_history(db: Any, ts0: int) -> str:
    """A complete binlog file (returned) of small, large and multi-statement transactions and DDL, 10 s apart."""
    db.execute("FLUSH BINARY LOGS")
    file = str(db.execute("SHOW MASTER STATUS")[0][0])
    conn = db.connect()
    try:
        with conn.cursor() as cur:

            def at(seconds: int, *sql: str) -> None:
                cur.execute(f"SET TIMESTAMP = {ts0 + seconds}")
                for s in sql:
                    cur.execute(s)

            cur.execute("SET SESSION max_recursive_iterations = 100000")
            at(0, "CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(60), n BIGINT, body BLOB)")
            at(10, "INSERT INTO t (v, n) VALUES ('one', 1)")
            # one statement of 2000 rows (many rows events), then an update of all of them, in one transaction
            at(
                20,
                "BEGIN",
                "INSERT INTO t (v, n, body) WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r "
                "WHERE i < 2000) SELECT CONCAT('row ', i), i * 7, REPEAT('x', i % 50) FROM r",
                "UPDATE t SET n = n + 1 WHERE id > 1",
                "COMMIT",
            )
            at(30, "ALTER TABLE t ADD COLUMN w INT")
            at(40, "BEGIN", "DELETE FROM t WHERE id % 3 = 0", "INSERT INTO t (v) VALUES ('last')", "COMMIT")
    finally:
        conn.close()
    db.execute("FLUSH BINARY LOGS")
    return file


@pytest.mark.integration
def test_mariadb_dumps_without_rows_match_and_scans_find_the_same_positions(mariadb: Any) -> None:
    ts0 = 1_800_000_000
    file = _write_history(mariadb, ts0)
    net = MysqlBinlogSource(mariadb.address, mariadb.user, mariadb.password)
    net.open()
    local = LocalBinlogSource(mariadb.server.datadir)
    local.open()
    try:
        # the test's file is complete (it ends with a rotate); the files after it are the server's current ones,
        # where the server (a binlog checkpoint) or another test may write between the two dumps
        full = [e for e in net.dump(DumpRequest(file, 4, blocking=False)) if e.log_file == file]
        light = [e for e in net.dump(DumpRequest(file, 4, blocking=False, decode_rows=False)) if e.log_file == file]
        _assert_undecoded(full, light, _ROW_CODES)
        mine = [e for e in full if e.log_file == file]
        assert isinstance(mine[-1], RotateEvent) and not mine[-1].artificial
        assert sum(isinstance(e, RowsEvent) for e in mine) > 20  # the large transaction spans many rows events

        local_full = [e for e in local.dump(DumpRequest(file, 4, blocking=False)) if e.log_file == file]
        local_light = [
            e for e in local.dump(DumpRequest(file, 4, blocking=False, decode_rows=False)) if e.log_file == file
        ]
        _assert_undecoded(local_full, local_light, _ROW_CODES)
        on_disk = [e for e in light if e.length > 0]
        assert local_light[: len(on_disk)] == on_disk

        # no table map is needed: a rows-off dump may start at any rows event, which a decoding one refuses
        middle = [e for e in mine if isinstance(e, RowsEvent)][10]
        for src in (net, local):
            again = list(src.dump(DumpRequest(file, middle.offset, blocking=False, decode_rows=False)))
            assert [e for e in again if e.length > 0][: len(mine) - mine.index(middle)] == [
                e for e in light if e.length > 0 and e.log_file == file and e.offset >= middle.offset
            ]

        times = [ts0 * 1000 + d for d in (-1, 0, 1, 9_999, 10_000, 15_000, 20_000, 25_000, 35_000, 40_000, 99_000)]
        _assert_scans_match(local, file, full, times)
        _assert_scans_match(net, file, full, times, every=3)
        # and the answers are the right ones: inside the large transaction -> its GTID event
        big_gtid = next(e for e in mine if isinstance(e, GtidEvent) and e.timestamp == ts0 + 20)
        last_rows = [e for e in mine if isinstance(e, RowsEvent) and e.timestamp == ts0 + 20][-1]
        assert transaction_begin(net, file, last_rows.offset) == big_gtid.offset
        assert transaction_begin(local, file, last_rows.offset) == big_gtid.offset
        found = search_file(net, file, (ts0 + 25) * 1000)
        big_xid = next(e for e in mine if isinstance(e, XidEvent) and e.timestamp == ts0 + 20)
        assert found is not None and found.position == big_xid.next_offset
    finally:
        net.close()
        local.close()


# -- the fake ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mariadb", [False, True], ids=["mysql", "mariadb"])
def test_fake_dump_without_rows_and_scans(mariadb: bool) -> None:
    fake = FakeMysql(name=f"norows_{mariadb}", mariadb=mariadb, gtid=mariadb, register=False)
    fake.execute("CREATE DATABASE s")
    fake.execute("CREATE TABLE s.t (id INT PRIMARY KEY, v VARCHAR(40))")
    fake.advance_clock(10)
    fake.insert("s.t", {"id": 0, "v": "zero"})
    fake.advance_clock(10)
    with fake.transaction() as tx:
        tx.insert_many("s.t", ({"id": i, "v": f"row {i}"} for i in range(1, 3001)))
        tx.update_many("s.t", (({"id": i}, {"v": f"new {i}"}) for i in range(1, 1001)))
    fake.advance_clock(10)
    fake.execute("ALTER TABLE s.t ADD COLUMN w INT")
    fake.advance_clock(10)
    fake.delete("s.t", {"id": 0})
    file = fake.current_file
    source = fake.source()
    full = list(source.dump(DumpRequest(file, 4, blocking=False)))
    light = list(source.dump(DumpRequest(file, 4, blocking=False, decode_rows=False)))
    codes = frozenset(range(23, 26)) if mariadb else frozenset(range(30, 33))
    _assert_undecoded(full, light, codes)
    assert sum(isinstance(e, RowsEvent) for e in full) > 10

    before = len(fake.dump_requests)
    t0 = full[1].timestamp * 1000
    _assert_scans_match(source, file, full, [t0 + d for d in (-1, 0, 5_000, 10_000, 15_000, 25_000, 35_000, 99_000)])
    scans = fake.dump_requests[before:]
    assert any(not r.decode_rows for r in scans) and any(r.decode_rows for r in scans)
