"""End to end: binlog -> parser -> sink -> store -> Instance get + ack, against a private MariaDB.

(a) throughput: rows/s through ``Instance.get`` (MEMSIZE batches, every value touched) on the reference workload of
    ``bench_decode.py`` (200,000 row changes on a 10-column mixed table), vs python-mysql-replication's raw
    ``BinLogStreamReader`` iteration (non-blocking, ``is_mariadb=False``, every value touched), interleaved rounds;
    and the same through ``before_dict()`` / ``after_dict()`` (``dict_ratio``: python-mysql-replication builds dicts
    too);
(b) latency: a writer process commits small transactions at a steady 2,000 rows/s, each row stamped with its commit
    time; the consumer (get + ack, short get timeouts) records now - stamp on arrival: p50 / p99 / max;
(c) memory: peak RSS (VmHWM) of a fresh consumer process streaming one 1,000,000-row transaction vs one
    100,000-row transaction (get + ack); the difference shows whether memory follows the store or the transaction.

    .venv/bin/python benchmarks/bench_e2e.py [--rounds 3] [--latency-s 10] [--profile]

Writes ``benchmarks/results/bench_e2e.json``; the last line is
``RESULT ratio=... dict_ratio=... p99_ms=... rss_delta_mb=...``.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench_decode import DELETES, INSERTS, UPDATES, build_workload, run_pmr
from children import read_spec, run_child
from result_file import write_result

from canal.config import DetectingConfig, InstanceConfig, MasterConfig, RetryConfig, StoreConfig
from canal.instance import Instance
from canal.protocol import EMPTY_MESSAGE_ID, EntryType
from canal.testing.services import MariaDBServer

ROWS = INSERTS + UPDATES + DELETES
STORE = StoreConfig(buffer_size=16384, memory_unit=1024, batch_mode="MEMSIZE")  # canal's defaults
GET_BATCH = 512  # MEMSIZE: up to 512 KiB of binlog events per get
LATENCY_RATE = 2000  # rows/s
LATENCY_ROWS_PER_TXN = 4
BIG_SMALL, BIG_LARGE = 100_000, 1_000_000


def _config(server: MariaDBServer, journal: str, position: int, table: str, slave_id: int) -> InstanceConfig:
    return InstanceConfig(
        destination=f"bench{slave_id}",
        master=MasterConfig(
            address=server.address,
            username=server.user,
            password=server.password,
            journal_name=journal,
            position=position,
        ),
        slave_id=slave_id,
        filter_regex=table,
        store=STORE,
        detecting=DetectingConfig(interval_s=1),
        retry=RetryConfig(heartbeat_period_s=1),
    )


def _touch(msg_entries: Any) -> int:
    rows = 0
    for entry in msg_entries:
        if entry.entry_type is not EntryType.ROWDATA:
            continue
        rc = entry.row_change
        if rc is None or rc.is_ddl:
            continue
        for r in rc.rows:
            rows += 1
            if r.before is not None:
                for _v in r.before:
                    pass
            if r.after is not None:
                for _v in r.after:
                    pass
    return rows


def _touch_dicts(msg_entries: Any) -> int:
    """As most users read rows: ``before_dict()`` / ``after_dict()``, every value touched."""
    rows = 0
    for entry in msg_entries:
        for r in entry.iter_rows():
            rows += 1
            for _v in r.before_dict().values():
                pass
            for _v in r.after_dict().values():
                pass
    return rows


# -- (a) throughput ------------------------------------------------------------------------------------------------


def run_e2e(server: MariaDBServer, first: str, slave_id: int, *, dicts: bool = False) -> tuple[int, float]:
    """Rows/s from Instance start to the last row acked (connect, start finding and dump included); ``dicts``: the
    consumer reads rows as dicts."""
    cfg = _config(server, first, 4, r"bench\.t", slave_id)
    touch = _touch_dicts if dicts else _touch
    rows = 0
    t0 = time.perf_counter()
    with Instance(cfg) as inst:
        while rows < ROWS:
            msg = inst.get(GET_BATCH, timeout=0.05)
            if msg.id != EMPTY_MESSAGE_ID:
                rows += touch(msg.entries)
        elapsed = time.perf_counter() - t0
    return rows, elapsed


def profile_e2e(server: MariaDBServer, first: str) -> None:
    """cProfile one end-to-end run: the parser thread and the consumer (main) thread, each printed."""
    from canal.parse.parser import EventParser

    parser_prof = cProfile.Profile()
    original = EventParser._run

    def profiled(self: EventParser) -> None:
        parser_prof.enable()
        try:
            original(self)
        finally:
            parser_prof.disable()

    EventParser._run = profiled  # type: ignore[method-assign]
    consumer_prof = cProfile.Profile()
    try:
        consumer_prof.enable()
        run_e2e(server, first, 9050)
        consumer_prof.disable()
    finally:
        EventParser._run = original  # type: ignore[method-assign]
    for name, prof in (("parser thread", parser_prof), ("consumer thread", consumer_prof)):
        print(f"--- {name} ---")
        pstats.Stats(prof).sort_stats("tottime").print_stats(18)


# -- (b) latency ---------------------------------------------------------------------------------------------------

WRITER = r"""
import json, sys, time, pymysql
host, port = sys.argv[1], int(sys.argv[2])
seconds, rate, per_txn = float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
conn = pymysql.connect(host=host, port=port, user="root", password="", database="lat", autocommit=True)
cur = conn.cursor()
txns = int(seconds * rate / per_txn)
interval = per_txn / rate
t0 = time.time() + 0.2
sql = "INSERT INTO lat.t (id, ts, note) VALUES " + ",".join(["(%s, %s, 'x')"] * per_txn)
key = 0
commits = []
for k in range(txns):
    due = t0 + k * interval
    delay = due - time.time()
    if delay > 0:
        time.sleep(delay)
    now = time.time_ns() // 1000
    params = []
    for _ in range(per_txn):
        params += [key, now]
        key += 1
    cur.execute(sql, params)
    commits.append(time.time_ns() // 1000 - now)
commits.sort()
print(json.dumps({"rows": key, "commit_p50_ms": commits[len(commits) // 2] / 1000,
                  "commit_p99_ms": commits[int(len(commits) * 0.99)] / 1000, "commit_max_ms": commits[-1] / 1000}))
"""


def run_latency(server: MariaDBServer, seconds: float) -> dict[str, Any]:
    server.execute("CREATE DATABASE lat")
    server.execute("CREATE TABLE lat.t (id INT PRIMARY KEY, ts BIGINT NOT NULL, note VARCHAR(10))")
    journal, position = server.execute("SHOW MASTER STATUS")[0][:2]
    cfg = _config(server, str(journal), int(position), r"lat\.t", 9101)
    expected = int(seconds * LATENCY_RATE / LATENCY_ROWS_PER_TXN) * LATENCY_ROWS_PER_TXN
    lat_us: list[int] = []
    empty_gets = 0
    t0 = time.perf_counter()
    with Instance(cfg) as inst:
        # ready: the dump is under way (a configured file + offset start first scans the file from its start to
        # check the offset is not inside a transaction: seconds on a large file, a start-up cost, not a latency)
        server.execute("INSERT INTO lat.t VALUES (-1, 0, 'ready')")
        while inst.get(GET_BATCH, timeout=0.01).id == EMPTY_MESSAGE_ID:
            if time.perf_counter() - t0 > 60:
                raise SystemExit("latency: the instance did not start within 60 s")
        startup_s = time.perf_counter() - t0
        writer = subprocess.Popen(
            [
                sys.executable,
                "-c",
                WRITER,
                server.host,
                str(server.port),
                str(seconds),
                str(LATENCY_RATE),
                str(LATENCY_ROWS_PER_TXN),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + seconds + 30
            while len(lat_us) < expected and time.monotonic() < deadline:
                msg = inst.get(GET_BATCH, timeout=0.002)
                if msg.id == EMPTY_MESSAGE_ID:
                    empty_gets += 1
                    continue
                now = time.time_ns() // 1000
                for entry in msg.entries:
                    rc = entry.row_change
                    if entry.entry_type is EntryType.ROWDATA and rc is not None and not rc.is_ddl:
                        for r in rc.rows:
                            assert r.after is not None
                            lat_us.append(now - r.after[1])
        finally:
            out, _ = writer.communicate(timeout=30)
    commit = json.loads(out.strip().splitlines()[-1])
    if len(lat_us) != expected:
        raise SystemExit(f"latency: {len(lat_us)} rows arrived, expected {expected}")
    steady = sorted(lat_us)
    pct = lambda q: steady[min(len(steady) - 1, int(q * len(steady)))] / 1000  # noqa: E731
    return {
        "rate_rows_per_s": LATENCY_RATE,
        "rows_per_txn": LATENCY_ROWS_PER_TXN,
        "seconds": seconds,
        "rows": len(lat_us),
        "p50_ms": round(pct(0.50), 2),
        "p90_ms": round(pct(0.90), 2),
        "p99_ms": round(pct(0.99), 2),
        "max_ms": round(steady[-1] / 1000, 2),
        "get_timeout_ms": 2,
        "startup_to_first_row_s": round(startup_s, 2),
        "writer_commit_ms": {k: v for k, v in commit.items() if k != "rows"},
        "empty_gets": empty_gets,
    }


# -- (c) peak RSS --------------------------------------------------------------------------------------------------


def _vmhwm_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


def rss_child(spec: dict[str, Any]) -> None:
    """Runs in a fresh process: consume one transaction of ``rows`` rows with get + ack, print peak RSS."""
    cfg = InstanceConfig(
        destination="rss",
        master=MasterConfig(
            address=spec["address"],
            username=spec["user"],
            password=spec["password"],
            journal_name=spec["journal"],
            position=spec["position"],
        ),
        slave_id=9201,
        filter_regex=r"big\.t",
        store=STORE,
    )
    before = _vmhwm_kb()
    rows = 0
    t0 = time.perf_counter()
    with Instance(cfg) as inst:
        while rows < spec["rows"]:
            msg = inst.get(GET_BATCH, timeout=0.05)
            if msg.id != EMPTY_MESSAGE_ID:
                rows += _touch(msg.entries)
    print(
        json.dumps(
            {
                "rows": rows,
                "seconds": round(time.perf_counter() - t0, 2),
                "vmhwm_start_kb": before,
                "vmhwm_kb": _vmhwm_kb(),
            }
        ),
        flush=True,
    )


def run_rss(server: MariaDBServer) -> dict[str, Any]:
    server.execute("CREATE DATABASE big")
    server.execute(
        "CREATE TABLE big.t (id INT PRIMARY KEY, big BIGINT NOT NULL, name VARCHAR(64) NOT NULL, "
        "amount DECIMAL(12,2) NOT NULL, created DATETIME(6) NOT NULL, note TEXT, "
        "state ENUM('new','paid','shipped','closed') NOT NULL, score DOUBLE, payload BLOB, maybe INT NULL)"
    )
    out: dict[str, Any] = {}
    offset = 0
    for rows in (BIG_SMALL, BIG_LARGE):
        journal, position = server.execute("SHOW MASTER STATUS")[0][:2]
        t0 = time.perf_counter()
        server.execute(
            "INSERT INTO big.t SELECT seq, seq * 7919, CONCAT('name-', seq), (seq % 100000) / 100, "
            "'2024-05-06 07:08:09.123456', CONCAT('note ', seq), ELT(1 + seq % 4, 'new','paid','shipped','closed'), "
            f"seq / 7, UNHEX('DEADBEEF'), IF(seq % 2, NULL, seq) FROM seq_{offset + 1}_to_{offset + rows}",
            database="big",
        )
        write_s = time.perf_counter() - t0
        offset += rows
        spec = {
            "address": server.address,
            "user": server.user,
            "password": server.password,
            "journal": str(journal),
            "position": int(position),
            "rows": rows,
        }
        child = run_child(__file__, "--rss-child", spec, timeout=300, what="rss child")
        child["write_s"] = round(write_s, 2)
        out[str(rows)] = child
        print(
            f"rss: one {rows:,}-row transaction (written in {write_s:.1f}s) consumed in {child['seconds']}s, "
            f"peak RSS {child['vmhwm_kb'] / 1024:.1f} MB (at start {child['vmhwm_start_kb'] / 1024:.1f} MB)",
            flush=True,
        )
    delta = (out[str(BIG_LARGE)]["vmhwm_kb"] - out[str(BIG_SMALL)]["vmhwm_kb"]) / 1024
    out["delta_mb"] = round(delta, 1)
    return out


# -- main ----------------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--latency-s", type=float, default=10.0)
    ap.add_argument("--profile", action="store_true", help="cProfile one extra end-to-end run and print the top")
    ap.add_argument("--only", choices=("throughput", "latency", "rss"), help="run one part (no JSON written)")
    ap.add_argument("--rss-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.rss_child:
        rss_child(read_spec())
        return 0
    if args.only == "throughput":
        with MariaDBServer(server_id=1) as server:
            first = build_workload(server)
            n, secs = run_e2e(server, first, 9001)
            print(f"e2e: {n} rows in {secs:.2f}s = {n / secs:,.0f} rows/s")
            n, secs = run_e2e(server, first, 9002, dicts=True)
            print(f"e2e reading dicts: {n} rows in {secs:.2f}s = {n / secs:,.0f} rows/s")
            if args.profile:
                profile_e2e(server, first)
        return 0
    if args.only == "latency":
        with MariaDBServer(server_id=1) as server:
            print(json.dumps(run_latency(server, args.latency_s), indent=2))
        return 0
    if args.only == "rss":
        with MariaDBServer(server_id=1) as server:
            print(json.dumps(run_rss(server), indent=2))
        return 0
    started = time.perf_counter()
    with MariaDBServer(server_id=1) as server:
        t0 = time.perf_counter()
        first = build_workload(server)
        print(f"workload: {ROWS} row changes written in {time.perf_counter() - t0:.1f}s", flush=True)
        ours: list[float] = []
        dicts: list[float] = []
        pmr: list[float] = []
        for rnd in range(args.rounds):
            for name, out in (("pmr", pmr), ("e2e", ours), ("e2e dicts", dicts)):
                if name == "pmr":
                    n, secs = run_pmr(server, first)
                else:
                    dicts_run = name == "e2e dicts"
                    n, secs = run_e2e(server, first, (9101 if dicts_run else 9001) + rnd, dicts=dicts_run)
                if n != ROWS:
                    raise SystemExit(f"{name} got {n} rows, expected {ROWS}")
                out.append(n / secs)
                print(f"round {rnd + 1} {name}: {n} rows in {secs:.2f}s = {n / secs:,.0f} rows/s", flush=True)
        if args.profile:
            profile_e2e(server, first)
        latency = run_latency(server, args.latency_s)
        print(
            f"latency at {LATENCY_RATE} rows/s: p50 {latency['p50_ms']} ms, p90 {latency['p90_ms']} ms, "
            f"p99 {latency['p99_ms']} ms, max {latency['max_ms']} ms",
            flush=True,
        )
        rss = run_rss(server)
    ours_m = statistics.median(ours)
    dicts_m = statistics.median(dicts)
    pmr_m = statistics.median(pmr)
    ratio = ours_m / pmr_m
    dict_ratio = dicts_m / pmr_m
    result: dict[str, Any] = {
        "benchmark": "bench_e2e",
        "throughput": {
            "rows": ROWS,
            "workload": {"inserts": INSERTS, "updates": UPDATES, "deletes": DELETES, "columns": 10},
            "store": {"buffer_size": STORE.buffer_size, "memory_unit": STORE.memory_unit, "batch_mode": "MEMSIZE"},
            "get_batch_size": GET_BATCH,
            "rounds": args.rounds,
            "e2e_rows_per_s": round(ours_m),
            "pmr_rows_per_s": round(pmr_m),
            "ratio": round(ratio, 2),
            "dict_rows_per_s": round(dicts_m),
            "dict_ratio": round(dict_ratio, 2),
            "e2e_rounds": [round(x) for x in ours],
            "dict_rounds": [round(x) for x in dicts],
            "pmr_rounds": [round(x) for x in pmr],
        },
        "latency": latency,
        "rss": rss,
        "goals": {"ratio": ">= 2.5", "dict_ratio": ">= 8", "p99_ms": "< 50", "rss_delta_mb": "< 50"},
        "seconds": round(time.perf_counter() - started, 1),
    }
    write_result("bench_e2e", result)
    print(f"e2e {ours_m:,.0f} rows/s, PMR {pmr_m:,.0f} rows/s, ratio {ratio:.2f}; total {result['seconds']}s")
    print(
        f"RESULT ratio={ratio:.2f} dict_ratio={dict_ratio:.2f} p99_ms={latency['p99_ms']} "
        f"rss_delta_mb={rss['delta_mb']}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
