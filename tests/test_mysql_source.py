"""MysqlBinlogSource against a private MariaDB: dumps by position and GTID, end of a non-blocking dump, heartbeats,
errors (purged position, unreachable server, bad login, wrong binlog settings, lost connection, close from another
thread), and LocalBinlogSource yielding the same events as the network dump of the same binlog."""

from __future__ import annotations

import itertools
import threading
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pymysql  # type: ignore[import-untyped]
import pytest

from canal.errors import BinlogPurgedError, ServerNotReadyError, SourceError, SourceUnreachableError
from canal.parse.events import (
    BinlogEvent,
    FormatDescriptionEvent,
    GtidEvent,
    HeartbeatEvent,
    QueryEvent,
    RotateEvent,
    RowsEvent,
    TableMapEvent,
    XidEvent,
)
from canal.parse.mysql import LocalBinlogSource, MysqlBinlogSource
from canal.parse.mysql.source import binlog_status
from canal.parse.source import BinlogSource, DumpRequest
from canal.protocol import EventType

pytestmark = pytest.mark.integration


def _source(db: Any, **kw: Any) -> MysqlBinlogSource:
    src = MysqlBinlogSource(db.address, db.user, db.password, **kw)
    src.open()
    return src


def _status(db: Any) -> tuple[str, int]:
    row = db.execute("SHOW MASTER STATUS")[0]
    return str(row[0]), int(row[1])


def _rows(events: list[BinlogEvent], table: str) -> list[tuple[EventType, dict[str, Any], dict[str, Any]]]:
    return [
        (ev.event_type, r.before_dict(), r.after_dict())
        for ev in events
        if isinstance(ev, RowsEvent) and ev.table.table == table
        for r in ev.rows
    ]


def test_dump_from_position_yields_positioned_events_and_ends_cleanly(mariadb: Any) -> None:
    src = _source(mariadb, verify_checksum=True)
    assert isinstance(src, BinlogSource)
    assert src.is_mariadb and src.server_id() == 1 and src.slave_id != 1
    assert mariadb.password not in repr(src)
    mariadb.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, qty SMALLINT UNSIGNED NOT NULL, amount DECIMAL(10,2), note VARCHAR(20))"
    )
    file, pos = _status(mariadb)
    conn = mariadb.connect()
    with conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("INSERT INTO t VALUES (1, 65535, 9.99, 'a'), (2, 7, 1.50, NULL)")
        cur.execute("UPDATE t SET note = 'b' WHERE id = 1")
        cur.execute("DELETE FROM t WHERE id = 2")
        cur.execute("COMMIT")
    conn.close()
    end = src.master_status()
    assert end.journal_name == file and end.position > pos and end.gtid
    try:
        events = list(src.dump(DumpRequest(file, pos, blocking=False)))
    finally:
        src.close()
    first = events[0]
    assert isinstance(first, RotateEvent) and first.artificial and first.next_file == file
    assert isinstance(events[1], FormatDescriptionEvent) and events[1].checksum
    real = [ev for ev in events if ev.length > 0]
    assert real[0].offset == pos
    for a, b in itertools.pairwise(real):
        assert b.offset == a.next_offset, (a, b)
    assert real[-1].next_offset == end.position
    assert any(isinstance(ev, GtidEvent) and ev.mariadb and not ev.standalone for ev in events)
    assert isinstance(real[-1], XidEvent)
    assert _rows(events, "t") == [
        (EventType.INSERT, {}, {"id": 1, "qty": 65535, "amount": Decimal("9.99"), "note": "a"}),
        (EventType.INSERT, {}, {"id": 2, "qty": 7, "amount": Decimal("1.50"), "note": None}),
        (
            EventType.UPDATE,
            {"id": 1, "qty": 65535, "amount": Decimal("9.99"), "note": "a"},
            {"id": 1, "qty": 65535, "amount": Decimal("9.99"), "note": "b"},
        ),
        (EventType.DELETE, {"id": 2, "qty": 7, "amount": Decimal("1.50"), "note": None}, {}),
    ]
    maps = [ev for ev in events if isinstance(ev, TableMapEvent)]
    assert maps and maps[0].table_schema.key_indexes == (0,)


def test_mariadb_gtid_dump_starts_after_the_given_state(mariadb: Any) -> None:
    mariadb.execute("CREATE TABLE g (id INT PRIMARY KEY)")
    mariadb.execute("INSERT INTO g VALUES (1)")
    src = _source(mariadb)
    try:
        state = src.master_status().gtid
        assert state
        mariadb.execute("INSERT INTO g VALUES (2)")
        mariadb.execute("INSERT INTO g VALUES (3)")
        events = list(src.dump(DumpRequest(gtid_set=state, blocking=False)))
    finally:
        src.close()
    gtids = [ev.gtid for ev in events if isinstance(ev, GtidEvent)]
    domain, server, seq = state.split(",")[-1].split("-")
    assert gtids[:2] == [f"{domain}-{server}-{int(seq) + 1}", f"{domain}-{server}-{int(seq) + 2}"]
    assert [a["id"] for _, _, a in _rows(events, "g")] == [2, 3]


def test_blocking_dump_sends_heartbeats_and_close_interrupts_it(mariadb: Any) -> None:
    src = _source(mariadb)
    file, pos = _status(mariadb)
    it = src.dump(DumpRequest(file, pos, blocking=True, heartbeat_period_s=0.1))
    deadline = time.monotonic() + 10
    beat = None
    for ev in it:
        if isinstance(ev, HeartbeatEvent):
            beat = ev
            break
        assert time.monotonic() < deadline
    assert beat is not None and beat.log_file == file and beat.offset >= pos
    closer = threading.Thread(target=src.close)
    closer.start()
    with pytest.raises(SourceError) as info:
        for _ in it:
            pass
    closer.join()
    assert info.value.errno == 2013


def test_purged_position_raises_with_the_position(mariadb: Any) -> None:
    src = _source(mariadb)
    try:
        with pytest.raises(BinlogPurgedError) as info:
            list(src.dump(DumpRequest("mysql-bin.999999", 4, blocking=False)))
    finally:
        src.close()
    assert info.value.errno == 1236
    assert "mysql-bin.999999:4" in str(info.value)


def test_unreachable_and_bad_login(mariadb: Any) -> None:
    with pytest.raises(SourceUnreachableError):
        MysqlBinlogSource("127.0.0.1:1", "u", "p", connect_timeout=2).open()
    secret = "Sup3rS3cretPw"
    with pytest.raises(SourceUnreachableError) as info:
        MysqlBinlogSource(mariadb.address, mariadb.user, secret).open()
    assert secret not in str(info.value) and info.value.errno == 1045


def test_statement_binlog_is_refused_with_the_fix(mariadb_factory: Any) -> None:
    server = mariadb_factory(extra_args=["--binlog-format=STATEMENT"])
    src = MysqlBinlogSource(server.address, server.user, server.password)
    with pytest.raises(ServerNotReadyError) as info:
        src.open()
    src.close()
    assert "SET GLOBAL binlog_format='ROW'" in str(info.value)


def test_lost_connection_ends_the_dump_without_reconnecting(mariadb_factory: Any) -> None:
    server = mariadb_factory()
    server.execute("CREATE DATABASE d")
    server.execute("CREATE TABLE d.t (id INT PRIMARY KEY)")
    server.execute("INSERT INTO d.t VALUES (1)")
    src = MysqlBinlogSource(server.address, server.user, server.password)
    src.open()
    it = src.dump(DumpRequest("mysql-bin.000001", 4, blocking=True, heartbeat_period_s=0.1))
    seen: list[BinlogEvent] = []
    with pytest.raises(SourceError) as info:
        for ev in it:
            seen.append(ev)
            if isinstance(ev, HeartbeatEvent) and server.is_running:
                server.kill()
    src.close()
    assert info.value.errno == 2013
    inserts = [r for r in _rows(seen, "t") if r[0] is EventType.INSERT]
    assert len(inserts) == 1  # no silent replay from the start


def test_local_files_yield_the_same_events_as_the_network(mariadb: Any) -> None:
    mariadb.execute("FLUSH BINARY LOGS")
    file, _ = _status(mariadb)
    mariadb.execute(
        "CREATE TABLE f (id INT PRIMARY KEY, name VARCHAR(20), at DATETIME(6), tags SET('a','b'), blob_ BLOB)"
    )
    for i in range(20):
        mariadb.execute(f"INSERT INTO f VALUES ({i}, 'n{i}', '2024-01-02 03:04:05.{i:06d}', 'a,b', x'00{i:02x}')")
    mariadb.execute("UPDATE f SET name = CONCAT(name, '!') WHERE id < 10")
    mariadb.execute("DELETE FROM f WHERE id >= 15")
    mariadb.execute("FLUSH BINARY LOGS")  # the rows span a complete file ending in a rotate
    mariadb.execute("INSERT INTO f VALUES (100, 'next file', NULL, '', NULL)")
    src = _source(mariadb)
    try:
        net = [ev for ev in src.dump(DumpRequest(file, 4, blocking=False)) if ev.length > 0]
    finally:
        src.close()
    datadir = Path(mariadb.server.datadir)
    local = LocalBinlogSource(datadir)
    local.open()
    assert local.address == f"file://{datadir}" and local.is_mariadb and local.server_id() == 1
    assert [f.name for f in local.binlog_files()] == [f.name for f in src.binlog_files()]
    files = list(local.dump(DumpRequest(file, 4, blocking=False)))
    local.close()
    assert len(_rows(files, "f")) == 20 + 10 + 5 + 1
    assert files[: len(net)] == net
    assert any(isinstance(ev, QueryEvent) and "CREATE TABLE f" in ev.sql for ev in files)
    # a dump from the middle of a file starts at that event
    mid = next(ev for ev in net if isinstance(ev, TableMapEvent))
    again = list(LocalBinlogSource(datadir).dump(DumpRequest(mid.log_file, mid.offset, blocking=False)))
    assert isinstance(again[0], FormatDescriptionEvent) and again[0].length == 0 and again[1] == mid


def test_minimal_metadata_falls_back_to_information_schema_with_one_warning(
    mariadb_factory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    server = mariadb_factory(extra_args=["--binlog-row-metadata=MINIMAL"])
    server.execute("CREATE DATABASE d")
    server.execute("CREATE TABLE d.m (k INT UNSIGNED, id INT PRIMARY KEY, e ENUM('x','y'), s SET('p','q'))")
    server.execute("INSERT INTO d.m VALUES (4294967295, 1, 'y', 'p,q')")
    server.execute("INSERT INTO d.m VALUES (0, 2, 'x', '')")
    src = MysqlBinlogSource(server.address, server.user, server.password)
    with caplog.at_level("WARNING"):
        src.open()
        try:
            events = list(src.dump(DumpRequest("mysql-bin.000001", 4, blocking=False)))
        finally:
            src.close()
    rows = [r for ev in events if isinstance(ev, RowsEvent) for r in ev.rows]
    assert [r.after_dict() for r in rows] == [
        {"k": 4294967295, "id": 1, "e": "y", "s": frozenset({"p", "q"})},
        {"k": 0, "id": 2, "e": "x", "s": frozenset()},
    ]
    assert rows[0].table.key_indexes == (1,)
    # names from information_schema now (no schema history in the request): one warning per table, saying so
    warnings = [r for r in caplog.records if "binlog_row_metadata" in r.getMessage()]
    per_table = [r for r in warnings if r.name == "canal.parse.mysql.binlog"]
    assert len(per_table) == 1 and "d.m" in per_table[0].getMessage()
    assert "schema history" in per_table[0].getMessage()
    assert all(r.name == "canal.parse.mysql.binlog" for r in warnings)
    # local files have no information_schema: the names stay unknown, the values are still decoded
    files = list(LocalBinlogSource(server.datadir).dump(DumpRequest("mysql-bin.000001", 4, blocking=False)))
    local_rows = [r for ev in files if isinstance(ev, RowsEvent) for r in ev.rows]
    assert local_rows[0].table.names[0] == "UNKNOWN_COL0" and local_rows[0].after is not None
    assert local_rows[0].after[0] == 4294967295


def test_old_mariadb_fractional_temporal_format_decodes_with_information_schema(mariadb_factory: Any) -> None:
    import datetime as dt

    server = mariadb_factory(extra_args=["--mysql56-temporal-format=OFF"])
    server.execute("CREATE DATABASE d")
    cols = {
        "plain": ("DATETIME", ["'2020-01-02 03:04:05'", "'0000-00-00 00:00:00'"]),
        "d1": ("DATETIME(1)", ["'2020-01-02 03:04:05.6'", "'9999-12-31 23:59:59.9'"]),
        "d3": ("DATETIME(3)", ["'1000-01-01 00:00:00.001'", "'0000-00-00 00:00:00'"]),
        "d6": ("DATETIME(6)", ["'1999-12-31 23:59:59.999999'", "'2000-02-29 12:00:00.000001'"]),
        "t0": ("TIME", ["'-01:02:03'", "'838:59:59'"]),
        "t2": ("TIME(2)", ["'-12:34:56.78'", "'00:00:00.01'"]),
        "t4": ("TIME(4)", ["'-838:59:58.9999'", "'-00:00:00.0001'"]),
        "t6": ("TIME(6)", ["'838:59:58.999999'", "'-00:00:01.5'"]),
        "s0": ("TIMESTAMP NULL", ["'2022-02-02 02:02:02'", "NULL"]),
        "s3": ("TIMESTAMP(3) NULL", ["'2038-01-19 03:14:07.999'", "'1970-01-01 00:00:01.001'"]),
        "s5": ("TIMESTAMP(5) NULL", ["'2001-01-01 00:00:00.00001'", "'0000-00-00 00:00:00'"]),
    }
    defs = ", ".join(f"{n} {d}" for n, (d, _) in cols.items())
    server.execute(f"CREATE TABLE d.o (id INT PRIMARY KEY, {defs})")
    conn = server.connect("d")
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = '', time_zone = '+00:00'")
        for i in range(2):
            cur.execute(f"INSERT INTO o VALUES ({i}, {', '.join(v[i] for _, v in cols.values())})")
        cur.execute(f"SELECT id, {', '.join(cols)} FROM o ORDER BY id")
        selected = [
            {
                "id": r[0],
                **{
                    n: (v.replace(tzinfo=dt.UTC) if n.startswith("s") and isinstance(v, dt.datetime) else v)
                    for n, v in zip(cols, r[1:], strict=True)
                },
            }
            for r in cur.fetchall()
        ]
    conn.close()
    src = MysqlBinlogSource(server.address, server.user, server.password)
    src.open()
    try:
        events = list(src.dump(DumpRequest("mysql-bin.000001", 4, blocking=False)))
    finally:
        src.close()
    assert [a for _, _, a in _rows(events, "o")] == selected


def test_a_paused_server_ends_a_blocking_dump_after_the_idle_timeout(mariadb_factory: Any) -> None:
    server = mariadb_factory()
    src = MysqlBinlogSource(server.address, server.user, server.password, read_timeout=1.0)
    src.open()
    file, pos = _status(server)
    it = src.dump(DumpRequest(file, pos, blocking=True, heartbeat_period_s=0.1))
    try:
        with pytest.raises(SourceError) as info:
            for ev in it:
                if isinstance(ev, HeartbeatEvent) and not server.is_paused:
                    server.pause()
                    paused_at = time.monotonic()
        assert info.value.errno == 2013
        assert time.monotonic() - paused_at < 5
    finally:
        if server.is_paused:
            server.resume()
        src.close()


def test_local_files_saved_with_mariadb_binlog_raw(mariadb: Any, tmp_path: Path) -> None:
    import shutil
    import subprocess

    binary = shutil.which("mariadb-binlog")
    if binary is None:
        pytest.skip("mariadb-binlog is not installed")
    mariadb.execute("FLUSH BINARY LOGS")
    file, _ = _status(mariadb)
    mariadb.execute("CREATE TABLE r (id INT PRIMARY KEY, v VARCHAR(10))")
    mariadb.execute("INSERT INTO r VALUES (1, 'one'), (2, 'two')")
    mariadb.execute("FLUSH BINARY LOGS")
    subprocess.run(
        [
            binary,
            "--read-from-remote-server",
            f"--host={mariadb.host}",
            f"--port={mariadb.port}",
            "--user=root",
            "--raw",
            f"--result-file={tmp_path}/",
            file,
        ],
        check=True,
        capture_output=True,
        timeout=30,
    )
    local = LocalBinlogSource(tmp_path)
    events = list(local.dump(DumpRequest(file, 4, blocking=False)))
    assert [a for _, _, a in _rows(events, "r")] == [{"id": 1, "v": "one"}, {"id": 2, "v": "two"}]
    assert isinstance(events[-1], RotateEvent) and not events[-1].artificial


def test_mariadb_compressed_binlog_events(mariadb_factory: Any) -> None:
    server = mariadb_factory(extra_args=["--log-bin-compress=ON", "--log-bin-compress-min-len=10"])
    server.execute("CREATE DATABASE d")
    server.execute("CREATE TABLE d.z (id INT PRIMARY KEY, body TEXT)")
    server.execute("INSERT INTO d.z VALUES (1, REPEAT('compress me ', 200)), (2, 'short')")
    server.execute("UPDATE d.z SET body = 'changed' WHERE id = 1")
    src = MysqlBinlogSource(server.address, server.user, server.password)
    src.open()
    try:
        events = list(src.dump(DumpRequest("mysql-bin.000001", 4, blocking=False)))
    finally:
        src.close()
    assert {ev.type_code for ev in events if type(ev).__name__ == "IgnoredEvent"}.isdisjoint(range(165, 172))
    rows = _rows(events, "z")
    assert rows[0] == (EventType.INSERT, {}, {"id": 1, "body": "compress me " * 200})
    assert rows[2] == (
        EventType.UPDATE,
        {"id": 1, "body": "compress me " * 200},
        {"id": 1, "body": "changed"},
    )
    assert any(isinstance(ev, QueryEvent) and ev.sql.startswith("CREATE TABLE d.z") for ev in events)


def test_events_larger_than_one_packet(mariadb: Any) -> None:
    mariadb.server.execute("SET GLOBAL max_allowed_packet = 64 * 1024 * 1024")
    mariadb.execute("CREATE TABLE big (id INT PRIMARY KEY, body LONGBLOB)")
    file, pos = _status(mariadb)
    conn = mariadb.connect()  # a new session sees the new max_allowed_packet
    payload = bytes(range(256)) * (17 * 4096 + 3)  # ~17.8 MB: one binlog event spans two protocol packets
    with conn.cursor() as cur:
        cur.execute("INSERT INTO big VALUES (1, %s)", (payload,))
    conn.close()
    src = _source(mariadb)
    try:
        events = list(src.dump(DumpRequest(file, pos, blocking=False)))
    finally:
        src.close()
    rows = _rows(events, "big")
    assert len(rows) == 1 and rows[0][2]["body"] == payload


def test_concurrent_dumps_of_one_source_do_not_end_each_other(mariadb: Any) -> None:
    src = _source(mariadb)
    file, pos = _status(mariadb)
    first = src.dump(DumpRequest(file, pos, blocking=True, heartbeat_period_s=0.1))
    second = src.dump(DumpRequest(file, pos, blocking=True, heartbeat_period_s=0.1))
    try:
        for it in (first, second, first, second):
            deadline = time.monotonic() + 10
            for ev in it:
                if isinstance(ev, HeartbeatEvent):
                    break
                assert time.monotonic() < deadline
    finally:
        src.close()


def test_server_without_checksums(mariadb_factory: Any) -> None:
    server = mariadb_factory(extra_args=["--binlog-checksum=NONE"])
    server.execute("CREATE DATABASE d")
    server.execute("CREATE TABLE d.n (id INT PRIMARY KEY, v VARCHAR(5))")
    server.execute("INSERT INTO d.n VALUES (1, 'a')")
    src = MysqlBinlogSource(server.address, server.user, server.password, verify_checksum=True)
    src.open()
    try:
        events = list(src.dump(DumpRequest("mysql-bin.000001", 4, blocking=False)))
    finally:
        src.close()
    fde = next(ev for ev in events if isinstance(ev, FormatDescriptionEvent))
    assert not fde.checksum
    assert _rows(events, "n") == [(EventType.INSERT, {}, {"id": 1, "v": "a"})]
    local = list(LocalBinlogSource(server.datadir).dump(DumpRequest("mysql-bin.000001", 4, blocking=False)))
    net = [ev for ev in events if ev.length > 0]
    assert local[: len(net)] == net


def test_local_blocking_dump_follows_the_growing_file(mariadb: Any) -> None:
    mariadb.execute("CREATE TABLE grow (id INT PRIMARY KEY)")
    file, pos = _status(mariadb)
    local = LocalBinlogSource(mariadb.server.datadir)
    local.open()
    it = local.dump(DumpRequest(file, pos, blocking=True, heartbeat_period_s=0.1))
    first = next(it)
    assert isinstance(first, FormatDescriptionEvent) and first.length == 0
    beat = next(it)
    assert isinstance(beat, HeartbeatEvent) and beat.log_file == file and beat.offset == pos
    mariadb.execute("INSERT INTO grow VALUES (7)")
    deadline = time.monotonic() + 10
    seen: list[BinlogEvent] = []
    for ev in it:
        seen.append(ev)
        if isinstance(ev, XidEvent):
            break
        assert time.monotonic() < deadline
    assert [a for _, _, a in _rows(seen, "grow")] == [{"id": 7}]
    threading.Thread(target=local.close).start()
    with pytest.raises(SourceError):
        for _ in it:
            pass


def test_a_dropped_side_connection_does_not_cost_the_column_names(mariadb_factory: Any) -> None:
    # binlog_row_metadata=MINIMAL: names come from information_schema over the side connection; a side connection the
    # server dropped meanwhile (wait_timeout, a KILL) used to give UNKNOWN_COLn names for the rest of the dump
    server = mariadb_factory(extra_args=["--binlog-row-metadata=MINIMAL"])
    server.execute("CREATE DATABASE d")
    server.execute("CREATE TABLE d.k (id INT PRIMARY KEY, v VARCHAR(5))")
    start = _status(server)
    server.execute("INSERT INTO d.k VALUES (1, 'a')")
    src = _source(server)
    try:
        (side_id,) = server.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE USER = %s", (server.user,))
        server.execute("KILL CONNECTION %s", (side_id[0],))
        events = list(src.dump(DumpRequest(*start, blocking=False)))
    finally:
        src.close()
    assert [after for _type, _before, after in _rows(events, "k")] == [{"id": 1, "v": "a"}]


def test_master_status_names_a_missing_grant(mariadb: Any) -> None:
    # SHOW MASTER STATUS failing for a reason other than its syntax (MySQL 8.4 renamed it) is reported as it is
    user, password = f"nogrant_{mariadb.database[-8:]}", "nogrant-pw"
    mariadb.server.execute("CREATE USER %s@'%%' IDENTIFIED BY %s", (user, password))
    try:
        src = MysqlBinlogSource(mariadb.address, user, password)
        try:
            with pytest.raises(SourceError, match=r"'SHOW MASTER STATUS' failed.*privilege") as info:
                src.master_status()
        finally:
            src.close()
        assert info.value.errno == 1227
    finally:
        mariadb.server.execute("DROP USER %s@'%%'", (user,))


class _StatusCursor:
    """A cursor of a server that fails ``SHOW MASTER STATUS`` with ``error`` and answers any other statement."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.executed: list[str] = []

    def execute(self, sql: str) -> None:
        self.executed.append(sql)
        if sql == "SHOW MASTER STATUS":
            raise self.error

    def fetchone(self) -> tuple[Any, ...]:
        return ("binlog.000007", 4242, "", "")


def test_binlog_status_asks_mysql_84_by_its_new_name_and_reports_other_failures() -> None:
    renamed = _StatusCursor(pymysql.err.ProgrammingError(1064, "You have an error in your SQL syntax"))
    assert binlog_status(renamed) == ("binlog.000007", 4242, "", "")
    assert renamed.executed == ["SHOW MASTER STATUS", "SHOW BINARY LOG STATUS"]
    denied = _StatusCursor(pymysql.err.OperationalError(1227, "Access denied; you need the BINLOG MONITOR privilege"))
    with pytest.raises(pymysql.err.OperationalError, match="privilege"):
        binlog_status(denied)
    assert denied.executed == ["SHOW MASTER STATUS"]
