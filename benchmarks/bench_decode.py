"""Row-decoding throughput: pycanal's MySQL source vs python-mysql-replication (PMR), same binlog, same run.

Builds the reference workload in a private MariaDB -- 200,000 row changes on a 10-column mixed-type table
(140k inserts in multi-row statements, 40k updates, 20k deletes) -- then, interleaved for ``--rounds`` rounds, reads the
whole binlog non-blocking from its first file with PMR's ``BinLogStreamReader`` and with ``MysqlBinlogSource``,
touching every decoded value, and reports the median rows/s of each.

    .venv/bin/python benchmarks/bench_decode.py [--rounds 3] [--profile]

Writes ``benchmarks/results/bench_decode.json``; the last line is
``RESULT ratio=<ours/PMR> ours_rows_per_s=... pmr_rows_per_s=...``.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time
from typing import Any

from result_file import write_result

from canal.parse.events import RowsEvent
from canal.parse.mysql import MysqlBinlogSource
from canal.parse.source import DumpRequest
from canal.schema.history import ColumnSource
from canal.testing.services import MariaDBServer

INSERTS = 140_000
UPDATES = 40_000
DELETES = 20_000
BATCH = 1000

DDL = """CREATE TABLE bench.t (
    id INT PRIMARY KEY,
    big BIGINT NOT NULL,
    name VARCHAR(64) NOT NULL,
    amount DECIMAL(12,2) NOT NULL,
    created DATETIME(6) NOT NULL,
    note TEXT,
    state ENUM('new','paid','shipped','closed') NOT NULL,
    score DOUBLE,
    payload BLOB,
    maybe INT NULL
) CHARACTER SET utf8mb4"""


def build_workload(
    server: MariaDBServer,
    table: str = "bench.t",
    *,
    inserts: int = INSERTS,
    updates: int = UPDATES,
    deletes: int = DELETES,
) -> str:
    """Write the workload into ``table`` (in a new binlog file; the database ``bench`` is created if missing);
    returns that binlog file (the dump start). ``inserts`` / ``updates`` / ``deletes`` (multiples of the batch of
    1,000 rows) scale it down for a test that reads it with other readers too."""
    conn = server.connect()
    with conn.cursor() as cur:
        cur.execute("FLUSH BINARY LOGS")
        cur.execute("SHOW MASTER STATUS")
        row = cur.fetchone()
        assert row is not None
        first = str(row[0])
        cur.execute("CREATE DATABASE IF NOT EXISTS bench")
        cur.execute(DDL.replace("bench.t", table))
        for start in range(0, inserts, BATCH):
            values = []
            for i in range(start, start + BATCH):
                values.append(
                    f"({i}, {i * 7919 - 10**12}, 'name-{i:08d}', {(i % 100000) / 100:.2f}, "
                    f"'2024-{1 + i % 12:02d}-{1 + i % 28:02d} {i % 24:02d}:{i % 60:02d}:{i % 60:02d}"
                    f".{i % 999999:06d}', "
                    f"'note {i} {'x' * (i % 40)}', '{('new', 'paid', 'shipped', 'closed')[i % 4]}', {i / 7:.6f}, "
                    f"x'{(i % 65536):04x}deadbeef', {'NULL' if i % 2 else i})"
                )
            cur.execute("BEGIN")
            cur.execute(f"INSERT INTO {table} VALUES " + ",".join(values))
            cur.execute("COMMIT")
        for start in range(0, updates, BATCH):
            cur.execute(
                f"UPDATE {table} SET amount = amount + 1, state = 'paid', maybe = id "
                f"WHERE id >= {start} AND id < {start + BATCH}"
            )
        for start in range(inserts - deletes, inserts, BATCH):
            cur.execute(f"DELETE FROM {table} WHERE id >= {start} AND id < {start + BATCH}")
    conn.close()
    return first


def run_ours(
    server: MariaDBServer, first: str, *, schema: ColumnSource | None = None, one_file: bool = False
) -> tuple[int, float]:
    """Rows and seconds of reading the binlog from ``first`` (only that file with ``one_file``), every value touched;
    ``schema`` names table maps without names (the schema history)."""
    source = MysqlBinlogSource(server.address, server.user, server.password, slave_id=9001, schema_fallback=False)
    source.open()
    rows = 0
    t0 = time.perf_counter()
    try:
        for ev in source.dump(DumpRequest(first, 4, blocking=False, schema=schema)):
            if one_file and ev.log_file != first:
                break
            if type(ev) is RowsEvent:
                assert ev.schema_error is None, ev.schema_error
                for r in ev.rows:
                    rows += 1
                    if r.before is not None:
                        for _v in r.before:
                            pass
                    if r.after is not None:
                        for _v in r.after:
                            pass
    finally:
        source.close()
    return rows, time.perf_counter() - t0


def run_pmr(server: MariaDBServer, first: str) -> tuple[int, float]:
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    settings = {"host": server.host, "port": server.port, "user": server.user, "passwd": server.password}
    stream = BinLogStreamReader(
        connection_settings=settings,
        server_id=9002,
        blocking=False,
        resume_stream=True,
        log_file=first,
        log_pos=4,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
        is_mariadb=False,
    )
    rows = 0
    t0 = time.perf_counter()
    try:
        for ev in stream:
            for r in ev.rows:
                rows += 1
                for key in ("values", "before_values", "after_values"):
                    image = r.get(key)
                    if image is not None:
                        for _v in image.values():
                            pass
    finally:
        stream.close()
    return rows, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="cProfile one extra run of ours and print the top")
    args = ap.parse_args(argv)
    expected = INSERTS + UPDATES + DELETES
    with MariaDBServer(server_id=1) as server:
        t0 = time.perf_counter()
        first = build_workload(server)
        print(f"workload: {expected} row changes written in {time.perf_counter() - t0:.1f}s", flush=True)
        ours: list[float] = []
        pmr: list[float] = []
        for rnd in range(args.rounds):
            for name, fn, out in (("pmr", run_pmr, pmr), ("ours", run_ours, ours)):
                n, secs = fn(server, first)
                if n != expected:
                    raise SystemExit(f"{name} decoded {n} rows, expected {expected}")
                out.append(n / secs)
                print(f"round {rnd + 1} {name:4s}: {n} rows in {secs:.2f}s = {n / secs:,.0f} rows/s", flush=True)
        if args.profile:
            prof = cProfile.Profile()
            prof.enable()
            run_ours(server, first)
            prof.disable()
            pstats.Stats(prof).sort_stats("cumulative").print_stats(20)
    ours_m = statistics.median(ours)
    pmr_m = statistics.median(pmr)
    ratio = ours_m / pmr_m
    result: dict[str, Any] = {
        "benchmark": "bench_decode",
        "rows": expected,
        "workload": {"inserts": INSERTS, "updates": UPDATES, "deletes": DELETES, "columns": 10},
        "rounds": args.rounds,
        "ours_rows_per_s": round(ours_m),
        "pmr_rows_per_s": round(pmr_m),
        "ratio": round(ratio, 2),
        "ours_rounds": [round(x) for x in ours],
        "pmr_rounds": [round(x) for x in pmr],
    }
    write_result("bench_decode", result)
    print(f"ours {ours_m:,.0f} rows/s, PMR {pmr_m:,.0f} rows/s, ratio {ratio:.2f}")
    print(f"RESULT ratio={ratio:.2f} ours_rows_per_s={ours_m:.0f} pmr_rows_per_s={pmr_m:.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
