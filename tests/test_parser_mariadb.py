"""The event parser against a private MariaDB: conversion of a real binlog, a restart without loss or repeats,
a dropped connection, GTID mode."""

from __future__ import annotations

import time
from typing import Any

import pytest
from test_parser_helpers import CollectingSink, MemoryPositions, key

from canal.config import DetectingConfig, InstanceConfig, MasterConfig, RetryConfig
from canal.parse.parser import EventParser
from canal.protocol import Entry, EntryType, EventType

pytestmark = pytest.mark.integration


def _config(db: Any, *, gtid_mode: bool = False, transaction_size: int = 1024, **master: Any) -> InstanceConfig:
    return InstanceConfig(
        destination="example",
        master=MasterConfig(address=db.address, username=db.user, password=db.password, **master),
        filter_regex=rf"{db.database}\..*",
        gtid_mode=gtid_mode,
        transaction_size=transaction_size,
        detecting=DetectingConfig(interval_s=0.2),
        retry=RetryConfig(
            initial_backoff_s=0.01, max_backoff_s=0.05, max_attempts=20, read_timeout_s=5, heartbeat_period_s=0.5
        ),
    )


def _status(db: Any) -> dict[str, Any]:
    row = db.execute("SHOW MASTER STATUS")[0]
    return {"journal_name": str(row[0]), "position": int(row[1])}


def _rows(entries: list[Entry]) -> list[tuple[EventType, dict[str, Any]]]:
    return [
        (e.header.event_type, r.after_dict() or r.before_dict())
        for e in entries
        if e.row_change is not None and not e.row_change.is_ddl
        for r in e.iter_rows()
    ]


def _write(db: Any, first: int, count: int) -> None:
    conn = db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("BEGIN")
            for i in range(first, first + count):
                cur.execute("INSERT INTO t (id, v) VALUES (%s, %s)", (i, f"v{i}"))
            cur.execute("COMMIT")
    finally:
        conn.close()


def test_real_binlog_entries_and_an_exact_restart(mariadb: Any) -> None:
    start = _status(mariadb)
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
    _write(mariadb, 1, 3)
    mariadb.execute("UPDATE t SET v = 'x' WHERE id = 2")
    positions = MemoryPositions()
    sink = CollectingSink()
    with EventParser("example", _config(mariadb, transaction_size=2, **start), None, sink, positions):
        sink.wait_ends(3)
    first = sink.data()
    ddl = first[0]
    assert ddl.row_change is not None and ddl.row_change.is_ddl and ddl.header.event_type is EventType.CREATE
    assert (ddl.header.schema, ddl.header.table) == (mariadb.database, "t")
    assert [e.entry_type for e in first[1:6]] == [EntryType.TRANSACTIONBEGIN] + [EntryType.ROWDATA] * 3 + [
        EntryType.TRANSACTIONEND
    ]
    assert _rows(first) == [
        (EventType.INSERT, {"id": 1, "v": "v1"}),
        (EventType.INSERT, {"id": 2, "v": "v2"}),
        (EventType.INSERT, {"id": 3, "v": "v3"}),
        (EventType.UPDATE, {"id": 2, "v": "x"}),
    ]
    assert all(e.header.gtid for e in first)  # MariaDB always logs GTIDs
    # more changes while stopped; a new parser resumes from the recorded position: nothing lost, nothing repeated
    _write(mariadb, 10, 5)
    mariadb.execute("DELETE FROM t WHERE id = 1")
    sink2 = CollectingSink()
    with EventParser("example", _config(mariadb, **start), None, sink2, positions):
        sink2.wait_ends(2)
    assert _rows(sink2.data()) == [(EventType.INSERT, {"id": i, "v": f"v{i}"}) for i in range(10, 15)] + [
        (EventType.DELETE, {"id": 1, "v": "v1"})
    ]
    # the same, in one uninterrupted run from the start
    sink3 = CollectingSink()
    with EventParser("example", _config(mariadb, transaction_size=2, **start), None, sink3, MemoryPositions()):
        sink3.wait_ends(5)
    assert [key(e) for e in sink3.data()] == [key(e) for e in first + sink2.data()]


def test_a_killed_dump_connection_resumes_exactly(mariadb: Any) -> None:
    start = _status(mariadb)
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
    _write(mariadb, 1, 4)
    sink = CollectingSink()
    parser = EventParser("example", _config(mariadb, transaction_size=2, **start), None, sink, MemoryPositions())
    with parser:
        sink.wait_ends(2)
        # kill the binlog dump thread on the server: the parser reconnects and continues where it was
        for row in mariadb.execute("SHOW PROCESSLIST"):
            if row[4] == "Binlog Dump":
                mariadb.execute(f"KILL {int(row[0])}")
        _write(mariadb, 20, 3)
        sink.wait_ends(3)
    assert parser.reconnects >= 1
    ids = [after["id"] for _, after in _rows(sink.data())]
    assert ids == [1, 2, 3, 4, 20, 21, 22]


def test_gtid_mode_resumes_by_gtid(mariadb: Any) -> None:
    start = _status(mariadb)
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
    _write(mariadb, 1, 2)
    positions = MemoryPositions()
    sink = CollectingSink()
    with EventParser("example", _config(mariadb, gtid_mode=True, **start), None, sink, positions):
        sink.wait_ends(2)
    saved = positions.positions["example"]
    assert saved.position.gtid and "-" in saved.position.gtid
    _write(mariadb, 5, 2)
    sink2 = CollectingSink()
    with EventParser("example", _config(mariadb, gtid_mode=True), None, sink2, positions):
        sink2.wait_ends(1)
    assert [after["id"] for _, after in _rows(sink2.data())] == [5, 6]


def test_start_by_timestamp_searches_the_real_binlog_files(mariadb_factory: Any) -> None:
    server = mariadb_factory()
    server.execute("CREATE DATABASE d")
    server.execute("CREATE TABLE d.t (id INT PRIMARY KEY, v VARCHAR(20))")
    base = int(time.time()) + 1000  # binlog times come from the session's timestamp
    conn = server.connect("d")
    try:
        with conn.cursor() as cur:
            for i, offset in enumerate((10, 20, 30), start=1):
                if i == 3:
                    cur.execute("FLUSH BINARY LOGS")
                cur.execute(f"SET timestamp = {base + offset}")
                cur.execute("BEGIN")
                cur.execute("INSERT INTO t VALUES (%s, %s)", (i, f"at+{offset}"))
                cur.execute("COMMIT")
    finally:
        conn.close()
    config = InstanceConfig(
        destination="example",
        master=MasterConfig(
            address=server.address, username=server.user, password=server.password, timestamp=(base + 20) * 1000
        ),
        filter_regex=r"d\..*",
        retry=RetryConfig(initial_backoff_s=0.01, max_backoff_s=0.05, max_attempts=5),
    )
    sink = CollectingSink()
    with EventParser("example", config, None, sink, MemoryPositions()):
        sink.wait_ends(2)
    data = sink.data()
    assert [after["id"] for _, after in _rows(data)] == [2, 3]
    assert data[0].entry_type is EntryType.TRANSACTIONBEGIN and data[0].header.execute_time == (base + 20) * 1000
    assert {e.header.log_file for e in data} == {"mysql-bin.000001", "mysql-bin.000002"}
