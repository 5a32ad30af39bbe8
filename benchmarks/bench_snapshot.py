"""Snapshot speed and memory: a 1,000,000-row table into a consumer, against streaming it with one ``SELECT *``.

A private MariaDB holds ``shop.t`` (id INT primary key, an INT, a VARCHAR(40), a DECIMAL(10,2), a DATETIME: about
the shop tables' mix) with ``--rows`` rows. Per round, in this order:

* baseline: one ``SELECT * FROM shop.t`` through pymysql's unbuffered cursor (``SSCursor``, its default
  conversions), every row fetched: rows/s from the query to the last row;
* pycanal: an ``Instance`` streaming the (idle) binlog runs ``snapshot(["shop.t"])``; a consumer takes every entry
  with ``get_without_ack`` + ``ack`` and reads every value: rows/s from the ``snapshot()`` call to the ack that
  finished it (its first chunk included). Peak RSS above the level before the call: the kernel's own peak
  (``VmHWM``), reset before it;
* pycanal with DBLog's watermarks: the same, with ``SnapshotConfig(watermark_table="shop.canal_marks")`` (two
  watermark writes around each chunk's read, as on a server without MariaDB's snapshot position).

``ratio`` = pycanal rows/s / baseline rows/s, medians over ``--rounds`` (goal >= 0.8); ``rss_mb`` = the highest
peak over the rounds (goal < 150). Steady state beside the headline: rows/s after the first chunk was acked.
``marks_ratio``: the watermark run's rows/s / the same baseline (what the watermarks cost, beside the headline).

Then once through Spark (``local[2]``, after the rounds): a streaming query reads the ``canal`` source with
``pycanal.snapshot.mode=initial`` and ``snapshot.partitions`` (``--partitions`` key ranges of ``--partition-rows``
rows per micro-batch, read on the executors) and counts the SNAPSHOT rows of each micro-batch, timed from ``start()``
(the session exists before) to the batch that holds the last one. ``spark_ratio`` = those rows/s / the baseline's
median (goal >= 1.5). Beside it, labelled steady: the rows of the micro-batches after the first one that held
snapshot rows, over the time from its end to the last one's (``spark_steady_ratio``). And Spark's own floor, in a
new session: the first micro-batch of a source whose ranges hold one row each (``spark_floor_s``, see
:mod:`spark_floor`); ``spark_ceiling_ratio`` = the table's rows over those seconds / the baseline: the most any
source could reach in that query on this machine. ``--no-spark`` skips the Spark runs (``spark_ratio`` null).

    .venv/bin/python benchmarks/bench_snapshot.py [--rows 1000000] [--rounds 3] [--chunk-rows 10000] [--no-spark]
        [--partitions 4] [--partition-rows 125000]

Writes ``benchmarks/results/bench_snapshot.json``; the last line is ``RESULT ratio=... steady_ratio=...
spark_ratio=... spark_steady_ratio=... rss_mb=... marks_ratio=... spark_floor_s=...``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from typing import Any

import pymysql.cursors
from result_file import write_result
from spark_floor import first_batch_s

from canal.config import InstanceConfig, MasterConfig, SnapshotConfig, StoreConfig
from canal.instance import Instance
from canal.protocol import EMPTY_MESSAGE_ID
from canal.snapshot.marks import WATERMARK_TABLE_DDL
from canal.testing.services import MariaDBServer

TABLE = "shop.t"
MARKS = "shop.canal_marks"
# the JVM's own defaults, as a user's job has them (the test helpers' sessions trade the optimizing compiler for less
# CPU on short test jobs)
JVM_DEFAULTS = {"spark.ui.showConsoleProgress": "false", "spark.driver.extraJavaOptions": ""}


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


class _PeakRss:
    """The highest RSS of this process between :meth:`start` and :meth:`stop`, above its RSS at the start: Linux's
    own peak (``VmHWM``), reset at the start through ``/proc/self/clear_refs`` -- exact, and no sampling thread
    taking turns with the measured threads."""

    def start(self) -> None:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")  # reset VmHWM to the current RSS (Linux >= 4.0)
        self.base = _status_kb("VmHWM")

    def stop(self) -> float:
        return (_status_kb("VmHWM") - self.base) * 1024 / 1e6


def load(server: MariaDBServer, rows: int) -> None:
    server.execute("CREATE DATABASE shop")
    server.execute(
        "CREATE TABLE shop.t (id INT PRIMARY KEY, qty INT NOT NULL, name VARCHAR(40) NOT NULL, "
        "price DECIMAL(10,2) NOT NULL, placed DATETIME NOT NULL)"
    )
    server.execute(WATERMARK_TABLE_DDL.format(table=MARKS))
    server.execute(f"GRANT INSERT, UPDATE ON {MARKS} TO %s@'%%'", (server.user,))
    step = 200_000
    for start in range(0, rows, step):
        end = min(rows, start + step)
        server.execute(
            f"INSERT INTO shop.t SELECT seq, seq % 97, CONCAT('name ', seq), (seq % 100000) / 100, "
            f"'2026-01-01' + INTERVAL (seq % 100000) SECOND FROM seq_{start + 1}_to_{end}",
            database="shop",
        )


def baseline(server: MariaDBServer) -> tuple[int, float]:
    conn = server.connect(cursorclass=pymysql.cursors.SSCursor)
    try:
        began = time.perf_counter()
        n = 0
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM {TABLE}")
            for row in cur:
                n += len(row) > 0
        return n, time.perf_counter() - began
    finally:
        conn.close()


def snapshot(
    server: MariaDBServer, chunk_rows: int, round_no: int, *, marks: bool = False
) -> tuple[int, float, float, float]:
    """(rows, seconds in all, seconds to the first ack of snapshot rows, peak RSS MB above the start); ``marks``:
    placed by watermarks in ``MARKS``."""
    journal, position = server.execute("SHOW MASTER STATUS")[0][:2]
    config = InstanceConfig(
        destination=f"snapbench{round_no}",
        master=MasterConfig(
            address=server.address,
            username=server.user,
            password=server.password,
            journal_name=journal,
            position=position,
        ),
        slave_id=9000 + round_no,
        filter_regex=r"shop\..*",
        store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=1024),
        snapshot=SnapshotConfig(watermark_table=MARKS if marks else None),
    )
    with Instance(config) as inst:
        rss = _PeakRss()
        rss.start()
        began = time.perf_counter()
        runner = inst.snapshot([TABLE], chunk_rows=chunk_rows)
        rows = 0
        first: float | None = None
        while True:
            msg = inst.get_without_ack(64, timeout=0.5)
            if msg.id == EMPTY_MESSAGE_ID:
                if runner.error is not None:
                    raise runner.error
                continue
            for entry in msg.entries:
                for row in entry.iter_rows():
                    after = row.after
                    if after is not None:
                        rows += 1
                        for value in after:
                            _ = value
            inst.ack(msg.id)
            if first is None and rows:
                first = time.perf_counter() - began
            cursor = inst.get_cursor()
            if runner.progress().done and (cursor is None or cursor.snapshot is None):
                break
        seconds = time.perf_counter() - began
        peak = rss.stop()
    return rows, seconds, first or 0.0, peak


def through_spark(
    server: MariaDBServer, rows: int, chunk_rows: int, work: str, partitions: int, partition_rows: int
) -> tuple[int, float, list[list[float]]]:
    """(SNAPSHOT rows, seconds, per micro-batch: [seconds from start() to its end, its SNAPSHOT rows]) of an initial
    snapshot read by a streaming query of the ``canal`` source, its ranges read on executors (``snapshot.partitions``
    per micro-batch, ``partition_rows`` each)."""
    from canal.spark import register
    from canal.spark.testing import local_spark, stop_spark

    spark = local_spark("pycanal-bench-snapshot", extra=JVM_DEFAULTS)
    spark.sparkContext.setLogLevel("ERROR")
    seen = [0]
    batches: list[list[float]] = []

    def count(df: Any, batch_id: int) -> None:
        n = df.filter("type = 'SNAPSHOT'").count()
        seen[0] += n
        batches.append([round(time.perf_counter() - began, 3), n])

    try:
        register(spark)
        options = {
            "destination": "snapspark",
            "master.address": server.address,
            "master.user": server.user,
            "master.password": server.password,
            "filter.regex": r"shop\..*",
            "spool.dir": os.path.join(work, "spool"),
            "pycanal.snapshot.mode": "initial",
            "pycanal.snapshot.tables": TABLE,  # not the watermark rounds' table
            "pycanal.snapshot.chunk.rows": str(chunk_rows),
            "snapshot.partitions": str(partitions),
            "snapshot.partition.rows": str(partition_rows),
        }
        began = time.perf_counter()
        query = (
            spark.readStream.format("canal")
            .options(**options)
            .load()
            .writeStream.foreachBatch(count)
            .option("checkpointLocation", os.path.join(work, "checkpoint"))
            .start()
        )
        try:
            while seen[0] < rows:
                query.processAllAvailable()
                if time.perf_counter() - began > 1800:
                    raise RuntimeError(f"only {seen[0]} of {rows} snapshot rows in 30 minutes")
            seconds = time.perf_counter() - began
        finally:
            query.stop()
    finally:
        stop_spark(spark)
    return seen[0], seconds, batches


def spark_floor_s(partitions: int) -> float:
    """Spark's own first micro-batch in a new session: a source of ``partitions`` one-row ranges read on executors,
    counted as :func:`through_spark` counts (:mod:`spark_floor`)."""
    from canal.spark.testing import local_spark, stop_spark

    spark = local_spark("pycanal-bench-floor", extra=JVM_DEFAULTS)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        return first_batch_s(spark, lambda df: df.count(), partitions=partitions, simple=False, available_now=False)
    finally:
        stop_spark(spark)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--chunk-rows", type=int, default=10_000)
    ap.add_argument("--no-spark", action="store_true", help="skip the run through Spark (spark_ratio null)")
    ap.add_argument("--partitions", type=int, default=4, help="Spark: snapshot ranges per micro-batch")
    ap.add_argument("--partition-rows", type=int, default=125_000, help="Spark: rows per snapshot range")
    args = ap.parse_args(argv)

    server = MariaDBServer(server_id=1, extra_args=["--innodb-buffer-pool-size=512M"])
    server.start()
    document: dict[str, Any] = {"benchmark": "bench_snapshot", "rows": args.rows, "chunk_rows": args.chunk_rows}
    try:
        load(server, args.rows)
        base_rates: list[float] = []
        ours: list[float] = []
        steady: list[float] = []
        peaks: list[float] = []
        marked: list[float] = []
        for round_no in range(args.rounds):
            n, seconds = baseline(server)
            assert n == args.rows, n
            base_rates.append(n / seconds)
            rows, seconds, first, peak = snapshot(server, args.chunk_rows, round_no)
            assert rows == args.rows, rows
            ours.append(rows / seconds)
            steady.append((rows - args.chunk_rows) / max(seconds - first, 1e-9))
            peaks.append(peak)
            rows, seconds, _first, _peak = snapshot(server, args.chunk_rows, 100 + round_no, marks=True)
            assert rows == args.rows, rows
            marked.append(rows / seconds)
            print(
                f"round {round_no}: SELECT * {base_rates[-1]:,.0f} rows/s, snapshot "
                f"{ours[-1]:,.0f} rows/s (steady {steady[-1]:,.0f}), peak RSS +{peak:.1f} MB; "
                f"with watermarks {marked[-1]:,.0f} rows/s",
                flush=True,
            )
        spark_rate = spark_steady = spark_floor = None
        if not args.no_spark:
            with tempfile.TemporaryDirectory(prefix="bench-snapshot-spark-") as work:
                n, seconds, spark_batches = through_spark(
                    server, args.rows, args.chunk_rows, work, args.partitions, args.partition_rows
                )
            assert n == args.rows, n
            spark_rate = n / seconds
            # steady state: the micro-batches after the first one that held snapshot rows (start-up excluded)
            holding = [b for b in spark_batches if b[1]]
            if len(holding) > 1:
                spark_steady = sum(b[1] for b in holding[1:]) / (holding[-1][0] - holding[0][0])
            document["spark_micro_batches"] = spark_batches
            spark_floor = spark_floor_s(args.partitions)
            print(
                f"through Spark (local[2], ranges on executors): {spark_rate:,.0f} rows/s "
                f"(steady {spark_steady or 0:,.0f}); micro-batches [end s, rows]: {spark_batches}",
                flush=True,
            )
    finally:
        server.stop()
    base_rate, our_rate = statistics.median(base_rates), statistics.median(ours)
    spark_ratio = None if spark_rate is None else spark_rate / base_rate
    ratio = our_rate / base_rate
    rss_mb = max(peaks)
    document.update(
        {
            "baseline_rows_per_s": round(base_rate),
            "snapshot_rows_per_s": round(our_rate),
            "snapshot_steady_rows_per_s": round(statistics.median(steady)),
            "ratio": round(ratio, 3),
            "steady_ratio": round(statistics.median(steady) / base_rate, 3),
            "spark_rows_per_s": None if spark_rate is None else round(spark_rate),
            "spark_ratio": None if spark_ratio is None else round(spark_ratio, 3),
            "spark_steady_rows_per_s": None if spark_steady is None else round(spark_steady),
            "spark_steady_ratio": None if spark_steady is None else round(spark_steady / base_rate, 3),
            "spark_floor_s": None if spark_floor is None else round(spark_floor, 3),
            "spark_ceiling_ratio": None if spark_floor is None else round(args.rows / spark_floor / base_rate, 3),
            "rss_mb": round(rss_mb, 1),
            "marks_rows_per_s": round(statistics.median(marked)),
            "marks_ratio": round(statistics.median(marked) / base_rate, 3),
            "rounds": {
                "baseline": base_rates,
                "snapshot": ours,
                "steady": steady,
                "rss_mb": peaks,
                "watermarks": marked,
            },
        }
    )
    write_result("bench_snapshot", document)
    print(
        f"RESULT ratio={ratio:.3f} steady_ratio={statistics.median(steady) / base_rate:.3f} "
        f"spark_ratio={'null' if spark_ratio is None else f'{spark_ratio:.3f}'} "
        f"spark_steady_ratio={'null' if spark_steady is None else f'{spark_steady / base_rate:.3f}'} "
        f"rss_mb={rss_mb:.1f} marks_ratio={statistics.median(marked) / base_rate:.3f} "
        f"spark_floor_s={'null' if spark_floor is None else f'{spark_floor:.2f}'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
