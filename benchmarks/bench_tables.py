"""No per-table or per-file cliffs: many tables vs one, and a start at the end of a 1 GB binlog file.

(a) many tables: a private MariaDB (``table_definition_cache=400``, its default) holds 2,000 tables; 6,000 single-row
    transactions written round-robin over them (an insert, an update and a delete per table) go into one binlog
    file, the same 6,000 transactions on one table into the next. Interleaved for ``--rounds`` rounds, an
    ``Instance`` (get + ack, every value touched) reads each file from its start: rows/s from the instance's start
    to its last row (connect, schema bootstrap and start finding included). The server hands out new table ids as
    tables leave its definition cache, so every table map of the many-table file may carry an id never seen before.
    ``many_tables_ratio`` = many-table rows/s / one-table rows/s (goal >= 0.9); ``steady_ratio`` the same after each
    run's first row (goal >= 0.7).
(b) start-up, on a server of its own: 1 GB of rows is written into one binlog file, then one small transaction; an
    ``Instance`` configured at that transaction's position (what ``SHOW MASTER STATUS`` returned before it) is timed
    from its start to the row in hand: ``startup_s`` (goal < 0.5 s). Beside it, the same start at a position near
    the start of a fresh file (``small_file_startup_s``) and the time the old alignment took: a scan of the big file
    from its first event to the position (``scan_s``).

    .venv/bin/python benchmarks/bench_tables.py [--rounds 3] [--tables 2000] [--gb 1.0]

Writes ``benchmarks/results/bench_tables.json``; the last line is
``RESULT many_tables_ratio=... steady_ratio=... startup_s=... scan_s=...``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from bench_e2e import _config, _touch
from result_file import write_result

from canal.instance import Instance
from canal.parse.mysql import MysqlBinlogSource
from canal.parse.schema_tracking import forget_layout_reads
from canal.parse.start_position import transaction_begin
from canal.position import EntryPosition
from canal.protocol import EMPTY_MESSAGE_ID
from canal.testing.services import MariaDBServer

BLOB_BYTES = 1 << 20
ROWS_PER_STATEMENT = 16


def _flush(server: MariaDBServer) -> EntryPosition:
    server.execute("FLUSH BINARY LOGS")
    rows = server.execute("SHOW MASTER STATUS")
    return EntryPosition(str(rows[0][0]), int(rows[0][1]))


def _round_robin(server: MariaDBServer, tables: list[str]) -> None:
    """Per table an insert, an update and a delete, each its own transaction, round-robin over ``tables``; when
    there is one table, 3 x 2,000 transactions on distinct keys instead."""
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            n = 2000 if len(tables) == 1 else len(tables)
            for sql in (
                "INSERT INTO {t} VALUES ({k}, {k}, 'a')",
                "UPDATE {t} SET b = 'b' WHERE id = {k}",
                "DELETE FROM {t} WHERE id = {k}",
            ):
                for i in range(n):
                    cur.execute(sql.format(t=tables[i % len(tables)], k=i))
                    conn.commit()
    finally:
        conn.close()


def build_many(server: MariaDBServer, count: int) -> tuple[EntryPosition, EntryPosition]:
    server.execute("CREATE DATABASE many")
    server.execute("CREATE DATABASE one")
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            for i in range(count):
                cur.execute(f"CREATE TABLE many.t{i} (id INT PRIMARY KEY, a INT, b VARCHAR(20))")
            cur.execute("CREATE TABLE one.t (id INT PRIMARY KEY, a INT, b VARCHAR(20))")
    finally:
        conn.close()
    many_start = _flush(server)
    _round_robin(server, [f"many.t{i}" for i in range(count)])
    one_start = _flush(server)
    _round_robin(server, ["one.t"])
    _flush(server)
    return many_start, one_start


def consume(server: MariaDBServer, start: EntryPosition, regex: str, rows: int, slave_id: int) -> tuple[float, float]:
    """Seconds from the instance's start to its ``rows``-th row (get + ack, every value touched), and to its first."""
    cfg = _config(server, start.journal_name or "", start.position or 4, regex, slave_id)
    # each start reads the layouts as a fresh process's would: not the read of the run before (shared in a process)
    forget_layout_reads()
    seen = 0
    first = 0.0
    t0 = time.perf_counter()
    with Instance(cfg) as inst:
        while seen < rows:
            msg = inst.get(512, timeout=0.05)
            if msg.id != EMPTY_MESSAGE_ID:
                if not seen:
                    first = time.perf_counter() - t0
                seen += _touch(msg.entries)
        elapsed = time.perf_counter() - t0
    if seen != rows:
        raise AssertionError(f"read {seen} rows, expected {rows}")
    return elapsed, first


def create_big(server: MariaDBServer) -> None:
    server.execute("CREATE DATABASE big")
    server.execute("CREATE TABLE big.t (id INT PRIMARY KEY, b LONGBLOB)")
    server.execute("CREATE TABLE big.s (id INT PRIMARY KEY)")
    _flush(server)


def write_big(server: MariaDBServer, gb: float) -> None:
    rows = int(gb * 1e9 / BLOB_BYTES)
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            for first in range(0, rows, ROWS_PER_STATEMENT):
                last = min(rows, first + ROWS_PER_STATEMENT)
                values = ", ".join(f"({i}, REPEAT('x', {BLOB_BYTES}))" for i in range(first, last))
                cur.execute(f"INSERT INTO big.t VALUES {values}")
                conn.commit()
    finally:
        conn.close()


def timed_start(server: MariaDBServer, key: int, slave_id: int) -> tuple[float, EntryPosition]:
    """Seconds from an instance's start at the current end of the binlog to the row written just after it."""
    rows = server.execute("SHOW MASTER STATUS")
    at = EntryPosition(str(rows[0][0]), int(rows[0][1]))
    server.execute(f"INSERT INTO big.s VALUES ({key})")
    return consume(server, at, r"big\.s", 1, slave_id)[0], at


def file_size(server: MariaDBServer, name: str) -> int:
    return (server.datadir / name).stat().st_size


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tables", type=int, default=2000)
    ap.add_argument("--gb", type=float, default=1.0, help="the big binlog file in 10^9 bytes (1 GiB would rotate)")
    args = ap.parse_args(argv)

    server = MariaDBServer(server_id=1, extra_args=["--table-definition-cache=400"])
    server.start()
    document: dict[str, Any] = {"benchmark": "bench_tables"}
    try:
        t0 = time.perf_counter()
        many_start, one_start = build_many(server, args.tables)
        total = 3 * args.tables
        one_total = 3 * 2000
        build_s = time.perf_counter() - t0
        many_rates: list[float] = []
        one_rates: list[float] = []
        many_steady: list[float] = []
        one_steady: list[float] = []
        firsts: list[float] = []
        slave = 7000
        for _round in range(args.rounds):
            slave += 2
            seconds, first = consume(server, many_start, r"many\..*", total, slave)
            many_rates.append(total / seconds)
            many_steady.append(total / (seconds - first))
            firsts.append(first)
            seconds, first = consume(server, one_start, r"one\.t", one_total, slave + 1)
            one_rates.append(one_total / seconds)
            one_steady.append(one_total / (seconds - first))
        many_rate, one_rate = statistics.median(many_rates), statistics.median(one_rates)
        ratio = many_rate / one_rate
        steady_ratio = statistics.median(many_steady) / statistics.median(one_steady)
    finally:
        server.stop()

    # a server of its own: the start-up measures the binlog file, not a first start's bootstrap of 2,000 tables
    server = MariaDBServer(server_id=2, extra_args=["--max-binlog-size=1073741824"])
    server.start()
    try:
        create_big(server)
        small_file_s, _ = timed_start(server, 0, slave + 10)  # a fresh file: the start is near its beginning
        t0 = time.perf_counter()
        write_big(server, args.gb)
        write_s = time.perf_counter() - t0
        startups: list[float] = []
        at = EntryPosition("", 4)
        for n in range(args.rounds):
            seconds, at = timed_start(server, n + 1, slave + 20 + n)
            startups.append(seconds)
        big_file = at.journal_name or ""
        source = MysqlBinlogSource(server.address, server.user, server.password, slave_id=slave + 40)
        source.open()
        try:
            t0 = time.perf_counter()
            transaction_begin(source, big_file, at.position or 4)
            scan_s = time.perf_counter() - t0
        finally:
            source.close()
        size = file_size(server, big_file)
    finally:
        server.stop()
    startup_s = statistics.median(startups)
    document.update(
        {
            "many_tables": {
                "tables": args.tables,
                "transactions": total,
                "rounds": args.rounds,
                "many_rows_per_s": round(many_rate),
                "one_rows_per_s": round(one_rate),
                "many_rounds": [round(r) for r in many_rates],
                "one_rounds": [round(r) for r in one_rates],
                "many_tables_ratio": round(ratio, 3),
                "steady_many_rows_per_s": round(statistics.median(many_steady)),
                "steady_one_rows_per_s": round(statistics.median(one_steady)),
                "steady_ratio": round(steady_ratio, 3),
                "first_row_s": round(statistics.median(firsts), 3),
                "build_s": round(build_s, 1),
            },
            "startup": {
                "binlog_file_bytes": size,
                "write_s": round(write_s, 1),
                "startup_s": round(startup_s, 3),
                "startup_rounds": [round(s, 3) for s in startups],
                "small_file_startup_s": round(small_file_s, 3),
                "scan_s": round(scan_s, 3),
            },
        }
    )
    write_result("bench_tables", document)
    print(
        f"many tables: {args.tables} tables {many_rate:,.0f} rows/s vs one table {one_rate:,.0f} rows/s "
        f"(whole runs from the instance's start, median of {args.rounds}); steady state (after the first row, "
        f"which waits for the schema bootstrap of {args.tables + 1} tables): ratio {steady_ratio:.3f}"
    )
    print(
        f"start-up at the end of a {size / 1e9:.2f} GB file: {startup_s:.3f} s to the first row "
        f"(small file: {small_file_s:.3f} s; a scan to the position: {scan_s:.2f} s)"
    )
    print(
        f"RESULT many_tables_ratio={ratio:.3f} steady_ratio={steady_ratio:.3f} startup_s={startup_s:.3f} "
        f"scan_s={scan_s:.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
