"""Steady-state throughput from MariaDB to a Delta mirror through the ``canal`` Spark source.

Reference workload: 200,000 row changes (120k inserts, 50k updates, 30k deletes in 1,000-row statements) on a
10-column table, written to a private MariaDB's binlog before the query starts. A Spark streaming query reads the
``canal`` source with large micro-batches and mirrors the table into Delta (``DeltaMirror``: one MERGE per batch).

Stages: ``decode`` -- reading and decoding the binlog into change rows: the reader does this for the next batch
while Spark runs the current one (``prefetch``), so it is reported as what it costs on its own, from the baseline
below; ``read_wait`` -- the part of it Spark still waited for (its ``latestOffset`` duration); ``spark`` -- the rest of
each micro-batch outside the MERGE (planning, Arrow transfer, ``toArrow``, WAL/commit logs); ``merge`` -- preparing
and running the Delta MERGE. The stages overlap (the reader works on the next batch meanwhile), so their times add
up to more than the wall time; the slowest of them bounds the throughput. Baseline in the same run: the same
binlog decoded into change rows by an Instance in this process, without Spark.

Warm-up, as benchmark harnesses do: the whole pipeline first runs once over the workload into a scratch mirror (JVM
JIT, Python workers); the measured run is a new query, reader process and instance over the same binlog. Steady state
leaves out its first micro-batch (instance start, nothing prefetched yet).

Prints the figures and ends with ``RESULT rows_per_s=... decode_s=... read_wait_s=... spark_s=... merge_s=...``; JSON in
``benchmarks/results/bench_spark.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from result_file import write_result

TABLE_DDL = (
    "CREATE TABLE bench.t (id BIGINT PRIMARY KEY, c1 INT NOT NULL, c2 BIGINT, c3 VARCHAR(32), c4 VARCHAR(64), "
    "c5 DECIMAL(12,2), c6 DOUBLE, c7 DATETIME, c8 DATE, c9 TINYINT)"
)


def write_workload(conn: Any, inserts: int, updates: int, deletes: int, chunk: int = 1000) -> int:
    made = 0
    with conn.cursor() as cur:
        for base in range(0, inserts, chunk):
            rows = [
                (
                    i,
                    i % 1000,
                    i * 7,
                    f"name-{i}",
                    f"some longer text value number {i}",
                    f"{i % 10000}.{i % 100:02d}",
                    i / 3,
                    "2024-05-06 07:08:09",
                    "2024-05-06",
                    i % 100,
                )
                for i in range(base, min(base + chunk, inserts))
            ]
            cur.executemany("INSERT INTO bench.t VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)", rows)
            made += len(rows)
        for base in range(0, updates, chunk):
            made += cur.execute(
                "UPDATE bench.t SET c1 = c1 + 1, c3 = CONCAT('upd-', id) WHERE id >= %s AND id < %s",
                (base, base + chunk),
            )
        for base in range(inserts - deletes, inserts, chunk):
            made += cur.execute("DELETE FROM bench.t WHERE id >= %s AND id < %s", (base, base + chunk))
    return made


def baseline_decode(server: Any, start: tuple[str, int], end: tuple[str, int]) -> dict[str, float]:
    """Decode the binlog into change rows in this process, no Spark."""
    from canal.config import InstanceConfig, MasterConfig, StoreConfig
    from canal.instance import Instance
    from canal.position import journal_number
    from canal.spark.changes import entries_to_batch

    cfg = InstanceConfig(
        destination="bench",
        master=MasterConfig(
            address=server.address,
            username=server.user,
            password=server.password,
            journal_name=start[0],
            position=start[1],
        ),
        filter_regex=r"bench\..*",
        store=StoreConfig(buffer_size=65536),
    )
    rows = 0
    began = time.perf_counter()
    with Instance(cfg) as inst:
        while True:
            msg = inst.get(4096, timeout=2.0)
            if not msg.entries:
                break
            rows += entries_to_batch(msg.entries, "bench", 1).num_rows
            last = msg.entries[-1].header
            if (journal_number(last.log_file), last.next_offset) >= (journal_number(end[0]), end[1]):
                break
    seconds = time.perf_counter() - began
    return {"rows": rows, "seconds": round(seconds, 3), "rows_per_s": round(rows / seconds)}


def stream_once(
    spark: Any, server: Any, start: tuple[str, int], work: Path, total_rows: int, max_entries: int, buffer_size: int
) -> Any:
    """Mirror the workload's binlog into a new Delta mirror under ``work`` with one streaming query; per-batch
    figures and the query's progress reports."""
    from canal.spark import DeltaMirror
    from canal.spark.mirror import MIRROR_COLUMNS

    mirror = DeltaMirror(work / "mirror")
    batches: list[dict[str, float]] = []

    def apply(df: Any, batch_id: int) -> None:
        began = time.perf_counter()
        table = df.select(*MIRROR_COLUMNS).toArrow()  # what DeltaMirror(df, id) does
        fetched = time.perf_counter()
        result = mirror.apply(table, batch_id)
        batches.append(
            {
                "batch_id": batch_id,
                "rows": table.num_rows,
                "to_arrow_s": fetched - began,
                "merge_s": result.merge_s + result.prepare_s,
                "done_at": time.perf_counter(),
            }
        )

    options = {
        "destination": "bench",
        "master.address": server.address,
        "master.user": server.user,
        "master.password": server.password,
        "master.journal.name": start[0],
        "master.position": str(start[1]),
        "filter.regex": r"bench\..*",
        "spool.dir": str(work / "checkpoint.canal-spool"),
        "canal.instance.memory.buffer.size": str(buffer_size),
        "canal.instance.memory.batch.mode": "ITEMSIZE",
        "batch.size": "1024",
        "max.entries": str(max_entries),
        "read.timeout": "1.0",
    }
    began = time.perf_counter()
    query = (
        spark.readStream.format("canal")
        .options(**options)
        .load()
        .writeStream.foreachBatch(apply)
        .option("checkpointLocation", str(work / "checkpoint"))
        .start()
    )
    try:
        while sum(b["rows"] for b in batches) < total_rows:
            query.processAllAvailable()
            if time.perf_counter() - began > 600:
                raise RuntimeError(f"only {sum(b['rows'] for b in batches)} of {total_rows} rows mirrored")
        progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    finally:
        query.stop()
    return began, batches, progress, mirror


def run(inserts: int, updates: int, deletes: int, max_entries: int, buffer_size: int) -> dict[str, Any]:
    from canal.spark import register
    from canal.spark.testing import local_spark, master_position, stop_spark
    from canal.testing.services import MariaDBServer

    with MariaDBServer(server_id=1) as server, tempfile.TemporaryDirectory(prefix="bench-spark-") as tmp:
        work = Path(tmp)
        conn = server.connect()
        start = master_position(conn)
        server.execute("CREATE DATABASE bench")
        server.execute(TABLE_DDL)
        t0 = time.perf_counter()
        changes = write_workload(conn, inserts, updates, deletes)
        end = master_position(conn)
        print(f"workload: {changes} row changes written in {time.perf_counter() - t0:.1f} s; binlog to {end}")

        baseline = baseline_decode(server, start, end)
        print(f"baseline (decode to change rows, no Spark): {baseline['rows_per_s']} rows/s")

        spark = local_spark("pycanal-bench", extra={"spark.ui.showConsoleProgress": "false"})
        spark.sparkContext.setLogLevel("ERROR")
        total_rows = changes + 2  # + CREATE DATABASE and CREATE TABLE rows
        try:
            register(spark)
            t0 = time.perf_counter()
            stream_once(spark, server, start, work / "warmup", total_rows, max_entries, buffer_size)
            print(f"warm-up run (JVM JIT, Python workers): {time.perf_counter() - t0:.1f} s")
            began, batches, progress, mirror = stream_once(
                spark, server, start, work / "run", total_rows, max_entries, buffer_size
            )
        finally:
            stop_spark(spark)
        mirrored = mirror.read("bench", "t").num_rows
        expected = inserts - deletes
        if mirrored != expected:
            raise RuntimeError(f"mirror has {mirrored} rows, source {expected}")

    steady = batches[1:] if len(batches) > 1 else batches
    steady_ids = {int(b["batch_id"]) for b in steady}
    steady_rows = sum(b["rows"] for b in steady)
    steady_wall = batches[-1]["done_at"] - (batches[0]["done_at"] if len(batches) > 1 else began)
    by_id = {int(p["batchId"]): p for p in progress}
    read_wait_s = sum(by_id[i]["durationMs"].get("latestOffset", 0) for i in steady_ids if i in by_id) / 1000
    trigger_s = sum(by_id[i]["durationMs"].get("triggerExecution", 0) for i in steady_ids if i in by_id) / 1000
    merge_s = sum(b["merge_s"] for b in steady)
    spark_s = max(0.0, trigger_s - read_wait_s - merge_s)
    # the reader prepares the next batch while Spark runs the current one, so its decode time is hidden; what it
    # costs on its own is measured by the baseline (the same decode and encode, in this process)
    decode_s = steady_rows / baseline["rows_per_s"]
    return {
        "benchmark": "bench_spark",
        "workload": {"inserts": inserts, "updates": updates, "deletes": deletes, "columns": 10, "changes": changes},
        "micro_batches": len(batches),
        "max_entries": max_entries,
        "buffer_size": buffer_size,
        "rows_per_batch": round(steady_rows / max(1, len(steady))),
        "steady_rows": steady_rows,
        "steady_wall_s": round(steady_wall, 3),
        "rows_per_s": round(steady_rows / steady_wall) if steady_wall > 0 else 0,
        "decode_s": round(decode_s, 3),
        "read_wait_s": round(read_wait_s, 3),
        "spark_s": round(spark_s, 3),
        "merge_s": round(merge_s, 3),
        "first_batch_s": round(batches[0]["done_at"] - began, 3),
        "baseline_decode": baseline,
        "mirror_rows": mirrored,
        "batches": [
            {
                "batch_id": int(b["batch_id"]),
                "rows": int(b["rows"]),
                "to_arrow_s": round(b["to_arrow_s"], 3),
                "merge_s": round(b["merge_s"], 3),
                "duration_ms": by_id.get(int(b["batch_id"]), {}).get("durationMs", {}),
            }
            for b in batches
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inserts", type=int, default=120_000)
    parser.add_argument("--updates", type=int, default=50_000)
    parser.add_argument("--deletes", type=int, default=30_000)
    parser.add_argument("--max-entries", type=int, default=1000, help="binlog entries per micro-batch")
    parser.add_argument(
        "--buffer-size", type=int, default=16384, help="instance store size in entries (canal's default)"
    )
    args = parser.parse_args(argv)
    out = run(args.inserts, args.updates, args.deletes, args.max_entries, args.buffer_size)
    print(json.dumps(out, indent=2))
    write_result("bench_spark", out)
    print(
        f"RESULT rows_per_s={out['rows_per_s']} decode_s={out['decode_s']} read_wait_s={out['read_wait_s']} "
        f"spark_s={out['spark_s']} merge_s={out['merge_s']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
