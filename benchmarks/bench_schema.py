"""The schema history's cost: decoding rows named by the history (binlog_row_metadata=MINIMAL) vs named by the
binlog itself (FULL), same server, same workload, same run; and the history's size after 10,000 DDLs.

A private MariaDB writes the reference workload (bench_decode's: 200,000 row changes on a 10-column table) twice:
into ``bench.full`` with ``binlog_row_metadata=FULL`` (first binlog file), then into ``bench.minimal`` with MINIMAL
(second file). Interleaved for ``--rounds`` rounds, each file is read whole (non-blocking, every decoded value
touched) by ``MysqlBinlogSource``: FULL as is, MINIMAL with a schema history (bootstrapped from the server) as the
decoder's names. Each figure is a whole read, first event included, no warm-up over the same data.

Then a history with 200 tables takes 10,000 DDLs (ADD / DROP COLUMN, one per simulated second, a file store written
through on every DDL, a snapshot every ``--snapshot-ddls`` and a one-hour expiry): its document size at the end and
the time per DDL.

    .venv/bin/python benchmarks/bench_schema.py [--rounds 3]

Writes ``benchmarks/results/bench_schema.json``; the last line is
``RESULT ratio=<minimal/full> history_kb=... ddl_ms=...`` (goal: ratio >= 0.95, the history costs nothing per row).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from bench_decode import build_workload, run_ours
from result_file import write_result

from canal.parse.mysql import MysqlBinlogSource
from canal.position import EntryPosition
from canal.schema import SchemaCatalog
from canal.schema.history import FileHistoryStore, SchemaHistory
from canal.sql import read_statement
from canal.testing.services import MariaDBServer

DDLS = 10_000
TABLES = 200


def write_both(server: MariaDBServer) -> tuple[str, str]:
    """The workload with FULL metadata into the first file, with MINIMAL into the second; the two file names."""
    full = build_workload(server, "bench.full")
    server.execute("SET GLOBAL binlog_row_metadata = 'MINIMAL'")
    minimal = build_workload(server, "bench.minimal")
    server.execute("FLUSH BINARY LOGS")
    return full, minimal


def history_growth(snapshot_ddls: int) -> dict[str, float]:
    """10,000 DDLs on a 200-table history written through to a file: size and time per DDL."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "schema_history.json"
        history = SchemaHistory(FileHistoryStore(path), snapshot_every=snapshot_ddls, expire_s=3600)
        catalog = SchemaCatalog(mariadb=True, database="app")
        for i in range(TABLES):
            catalog.apply(read_statement(f"CREATE TABLE t{i} (id INT PRIMARY KEY, a VARCHAR(20), b DECIMAL(10,2))"))
        history.bootstrap(EntryPosition("mysql-bin.000001", 4, 1_700_000_000_000), catalog)
        t0 = time.perf_counter()
        for n in range(DDLS):
            table = f"t{n % TABLES}"
            sql = (
                f"ALTER TABLE {table} ADD COLUMN c INT"
                if (n // TABLES) % 2 == 0
                else f"ALTER TABLE {table} DROP COLUMN c"
            )
            offset = 1000 + n * 100
            at = EntryPosition("mysql-bin.000001", offset, 1_700_000_000_000 + n * 1000)
            history.apply(at, "app", sql, next_offset=offset + 50)
        elapsed = time.perf_counter() - t0
        return {
            "ddls": DDLS,
            "tables": TABLES,
            "snapshot_ddls": snapshot_ddls,
            "expire_s": 3600,
            "history_kb": round(path.stat().st_size / 1024, 1),
            "records": history.records,
            "snapshots": history.snapshots,
            "ddl_ms": round(elapsed / DDLS * 1000, 3),
        }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--snapshot-ddls", type=int, default=1000)
    args = ap.parse_args(argv)

    server = MariaDBServer(server_id=1)
    server.start()
    try:
        full_file, minimal_file = write_both(server)
        reader = MysqlBinlogSource(server.address, server.user, server.password)
        reader.open()
        catalog = reader.schema_catalog()
        reader.close()
        history = SchemaHistory()
        history.bootstrap(EntryPosition(minimal_file, 4), catalog)
        full_rates: list[float] = []
        minimal_rates: list[float] = []
        counts: set[tuple[str, int]] = set()
        for _round in range(args.rounds):
            rows, seconds = run_ours(server, full_file, one_file=True)
            counts.add(("full", rows))
            full_rates.append(rows / seconds)
            rows, seconds = run_ours(server, minimal_file, schema=history, one_file=True)
            counts.add(("minimal", rows))
            minimal_rates.append(rows / seconds)
    finally:
        server.stop()
    growth = history_growth(args.snapshot_ddls)
    full_rate, minimal_rate = statistics.median(full_rates), statistics.median(minimal_rates)
    ratio = minimal_rate / full_rate
    document = {
        "benchmark": "bench_schema",
        "decode": {
            "rows": sorted(counts),
            "rounds": args.rounds,
            "full_rows_per_s": round(full_rate),
            "minimal_with_history_rows_per_s": round(minimal_rate),
            "ratio": round(ratio, 3),
            "full_rounds": [round(r) for r in full_rates],
            "minimal_rounds": [round(r) for r in minimal_rates],
        },
        "history": growth,
    }
    write_result("bench_schema", document)
    print(
        f"decode: FULL {full_rate:,.0f} rows/s, MINIMAL named by the history {minimal_rate:,.0f} rows/s "
        f"(each a whole file read, median of {args.rounds})"
    )
    print(
        f"history: {growth['ddls']:,} DDLs on {TABLES} tables -> {growth['history_kb']} KB, {growth['records']} "
        f"records, {growth['snapshots']} snapshots, {growth['ddl_ms']} ms per DDL (written through)"
    )
    print(f"RESULT ratio={ratio:.3f} history_kb={growth['history_kb']} ddl_ms={growth['ddl_ms']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
