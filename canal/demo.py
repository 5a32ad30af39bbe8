"""End-to-end demo (``python -m canal.demo``, run by ``scripts/demo.sh``): a shop database mirrored into Delta Lake.

1. starts a private MariaDB (ROW binlog) and ZooKeeper (which keeps the canal cursor);
2. creates ``shop.customers``, ``shop.orders`` and ``shop.order_items`` and fills them with 200,000 rows before any
   capture starts (a database that already holds data);
3. a Spark structured-streaming query reads the ``canal`` source with ``pycanal.snapshot.mode=initial``: the existing
   rows arrive as SNAPSHOT change rows, merged with the binlog (Spark's executors read the snapshot's key ranges,
   ``snapshot.partitions``), while a workload generator writes (transactions of
   inserts, updates and deletes, and one ``ALTER TABLE customers ADD COLUMN tier``); every table is mirrored into its
   own Delta table (``DeltaMirror``: MERGE per table, committed with the micro-batch id as an app transaction);
4. part-way through, the process that runs the canal reader (``python_streaming_source_runner``) is SIGKILLed; the
   query fails and is restarted from the same checkpoint -- the checkpoint, the spool and the cursor make it exact;
5. when the workload is done and mirrored, compares each Delta table with ``SELECT *`` of its source, prints a summary
   (rows, changes, throughput, lag), writes ``demo-throughput-lag.png`` and stops everything.

Exit status 0 when every mirror equals its table, 1 otherwise (or when a service could not start).
Options: ``--seconds`` (workload duration, default 40), ``--rate`` (transactions per second, default 80),
``--preload`` (rows in the tables before the pipeline starts, default 200000),
``--out DIR`` (where the chart and the Delta tables go; default a temporary directory, removed at the end, the chart
kept as ``$TMPDIR/pycanal-demo-throughput-lag.png``), ``--no-kill``, ``--metrics-port P`` and ``--mirror-metrics-port
Q`` (Prometheus metrics: the Spark source's reader process serves the capture's and the source's series on
127.0.0.1:P, the driver, which applies the mirror, the mirror's on Q; ``scripts/dashboard_png.py`` scrapes them to
draw the monitoring guide's dashboard).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from canal.errors import ServiceError
from canal.testing.services import MariaDBServer, ZooKeeperServer, process_state

_LOG = logging.getLogger(__name__)
DB = "shop"


def _say(message: str) -> None:
    print(message, flush=True)


@attrs.define(slots=True)
class BatchPoint:
    at: float  # seconds since the query first started
    batch_id: int
    rows: int
    lag_ms: int | None
    merge_s: float


@attrs.define(slots=True)
class DemoResult:
    ok: bool = False
    tables: list[dict[str, Any]] = attrs.field(factory=list)
    points: list[BatchPoint] = attrs.field(factory=list)
    transactions: int = 0
    changes: int = 0
    preloaded: int = 0  # rows in the tables before the pipeline started
    snapshot_rows: int = 0  # SNAPSHOT change rows mirrored
    restarts: int = 0
    killed_pid: int | None = None
    elapsed_s: float = 0.0
    chart: Path | None = None
    duplicate_batches: list[str] = attrs.field(factory=list)


class _Workload(threading.Thread):
    def __init__(self, work: Any, seconds: float, rate: float) -> None:
        super().__init__(name="demo-workload", daemon=True)
        self.work = work
        self.seconds = seconds
        self.rate = rate
        self.stop_event = threading.Event()
        self.transactions = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            began = time.monotonic()
            altered = False
            while not self.stop_event.is_set():
                elapsed = time.monotonic() - began
                if elapsed >= self.seconds:
                    break
                if not altered and elapsed >= self.seconds / 2:
                    self.work.alter()
                    altered = True
                self.work.transaction()
                self.transactions += 1
                # pace to `rate` transactions per second (rate control, not synchronisation)
                ahead = self.transactions / self.rate - (time.monotonic() - began)
                if ahead > 0:
                    self.stop_event.wait(ahead)
            if not altered:
                self.work.alter()
        except BaseException as exc:
            self.error = exc


def _percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * (len(ordered) - 1) + 0.5))]


def _chart(points: Sequence[BatchPoint], kill_at: float | None, path: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        _say("matplotlib is not installed: no chart")
        return None
    buckets: dict[int, int] = {}
    for p in points:
        buckets[int(p.at)] = buckets.get(int(p.at), 0) + p.rows
    if not buckets:
        return None
    seconds = list(range(min(buckets), max(buckets) + 1))
    fig, ax1 = plt.subplots(figsize=(9, 4.5))
    ax1.bar(seconds, [buckets.get(s, 0) for s in seconds], color="#4c72b0", label="rows mirrored / s")
    ax1.set_xlabel("seconds since the query started")
    ax1.set_ylabel("rows per second", color="#4c72b0")
    ax2 = ax1.twinx()
    lagged = [p for p in points if p.lag_ms is not None]
    ax2.plot([p.at for p in lagged], [(p.lag_ms or 0) / 1000 for p in lagged], color="#dd8452", marker=".", label="lag")
    ax2.set_ylabel("lag behind the master (s)", color="#dd8452")
    if kill_at is not None:
        ax1.axvline(kill_at, color="red", linestyle="--")
        ax1.annotate("reader SIGKILLed", (kill_at, ax1.get_ylim()[1] * 0.9), color="red")
    ax1.set_title("pycanal: MariaDB -> Spark (canal source) -> Delta mirror")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run(
    *,
    seconds: float = 40.0,
    rate: float = 80.0,
    out_dir: Path | None = None,
    kill: bool = True,
    chart: bool = True,
    progress: bool = True,
    spark: Any = None,
    preload: int = 200_000,
    metrics_port: int | None = None,
    mirror_metrics_port: int | None = None,
) -> DemoResult:
    """Run the demo; the figures for the summary. A given ``spark`` session is used and left running.

    Without ``out_dir`` the work directory is temporary and removed at the end (also on failure); the chart is kept
    as ``$TMPDIR/pycanal-demo-throughput-lag.png``.
    """
    args: dict[str, Any] = {
        "seconds": seconds,
        "rate": rate,
        "kill": kill,
        "chart": chart,
        "progress": progress,
        "preload": preload,
        "metrics_port": metrics_port,
        "mirror_metrics_port": mirror_metrics_port,
    }
    if out_dir is not None:
        return _run(work_dir=out_dir, spark=spark, **args)
    work_dir = Path(tempfile.mkdtemp(prefix="pycanal-demo-"))
    try:
        return _run(work_dir=work_dir, spark=spark, keep_chart=True, **args)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


def _run(
    *,
    seconds: float,
    rate: float,
    work_dir: Path,
    kill: bool,
    chart: bool,
    progress: bool,
    spark: Any,
    preload: int,
    metrics_port: int | None = None,
    mirror_metrics_port: int | None = None,
    keep_chart: bool = False,
) -> DemoResult:
    # run() owns the defaults and the temporary work directory; this is the demo itself
    from canal.lake.metrics import MirrorCollector
    from canal.metrics import start_http_server
    from canal.spark import DeltaMirror, register
    from canal.spark.testing import (
        SHOP_TABLES,
        ShopWorkload,
        compare_tables,
        local_spark,
        master_position,
        source_runner_pids,
        stop_spark,
    )

    result = DemoResult()
    work_dir.mkdir(parents=True, exist_ok=True)  # removed by run() when it made it
    checkpoint = work_dir / "checkpoint"
    began = time.monotonic()
    with MariaDBServer(server_id=1) as mariadb, ZooKeeperServer() as zookeeper:
        _say(f"MariaDB on {mariadb.address} (pid {mariadb.pid}), ZooKeeper on {zookeeper.hosts} (pid {zookeeper.pid})")
        conn = mariadb.connect()
        mariadb.execute(f"CREATE DATABASE {DB}")
        work = ShopWorkload(mariadb.connect(DB), DB, seed=11)
        work.create()
        result.preloaded = work.preload(preload) if preload > 0 else 0
        start = master_position(conn)
        _say(
            f"created {', '.join(f'{DB}.{t}' for t in SHOP_TABLES)} holding {result.preloaded} rows; capture starts "
            f"at {start[0]}:{start[1]} with a snapshot of them"
        )

        own_spark = spark is None
        jvm_pid: int | None = None
        if spark is None:
            spark = local_spark("pycanal-demo", extra={"spark.ui.showConsoleProgress": "false"})
            jvm_pid = getattr(getattr(spark.sparkContext._gateway, "proc", None), "pid", None)
        exporters = contextlib.ExitStack()
        try:
            if own_spark:
                spark.sparkContext.setLogLevel("OFF")
            register(spark)
            mirror = DeltaMirror(work_dir / "mirror", log_history_s=3600)  # the summary counts every batch id
            options = {
                "destination": DB,
                "master.address": mariadb.address,
                "master.user": mariadb.user,
                "master.password": mariadb.password,
                "filter.regex": rf"{DB}\..*",
                "pycanal.snapshot.mode": "initial",  # the rows already there, then the binlog, without a gap
                # the snapshot's key ranges are read by Spark's executors (two at a time), not by the reader process
                "snapshot.partitions": "2",
                "snapshot.partition.rows": "50000",
                "meta.mode": "zookeeper",
                "zk.servers": zookeeper.hosts,
                "spool.dir": str(work_dir / "checkpoint.canal-spool"),
                "max.entries": "20000",
                "read.timeout": "0.2",
            }
            if metrics_port is not None:  # the reader's process serves the capture's and the source's series
                options["metrics.port"] = str(metrics_port)
            if mirror_metrics_port is not None:  # this process applies the mirror: it serves the mirror's
                exporters.enter_context(start_http_server(mirror_metrics_port, collectors=[MirrorCollector(mirror)]))
            t0 = time.monotonic()
            lock = threading.Lock()

            def mirror_batch(df: Any, batch_id: int) -> None:
                import pyarrow.compute as pc

                table = df.toArrow()
                applied = mirror.apply(table, batch_id)
                snapshot_rows = pc.sum(pc.equal(table.column("type"), "SNAPSHOT")).as_py() or 0
                now = time.time()
                lag = None
                if table.num_rows:
                    newest = pc.max(table.column("execute_time")).as_py()
                    lag = int((now - newest.timestamp()) * 1000) if newest is not None else None
                with lock:
                    result.snapshot_rows += snapshot_rows
                    result.points.append(
                        BatchPoint(time.monotonic() - t0, batch_id, table.num_rows, lag, applied.merge_s)
                    )

            def start_query() -> Any:
                return (
                    spark.readStream.format("canal")
                    .options(**options)
                    .load()
                    .writeStream.queryName("shop_mirror")
                    .foreachBatch(mirror_batch)
                    .option("checkpointLocation", str(checkpoint))
                    .start()
                )

            def kill_reader() -> float | None:
                runners = source_runner_pids()
                if not runners:
                    return None
                result.killed_pid = runners[0]
                os.kill(runners[0], signal.SIGKILL)
                _say(f"  !! SIGKILL to the canal reader (python_streaming_source_runner, pid {runners[0]})")
                return time.monotonic() - t0

            query = start_query()
            workload = _Workload(work, seconds, rate)
            workload.start()
            ticker = threading.Event()
            kill_at: float | None = None
            last_print = 0.0
            while workload.is_alive():
                ticker.wait(0.25)
                if kill and kill_at is None and time.monotonic() - t0 >= seconds * 0.45 and result.points:
                    kill_at = kill_reader()
                if not query.isActive:
                    error = query.exception()  # the failure is expected after the kill
                    why = type(error).__name__ if error else "no error"
                    _say(f"  query stopped ({why}); restarting it from {checkpoint}")
                    result.restarts += 1
                    query = start_query()
                if progress and time.monotonic() - last_print >= 2.0:
                    last_print = time.monotonic()
                    with lock:
                        rows = sum(p.rows for p in result.points)
                        lag_ms = result.points[-1].lag_ms if result.points else None
                        batches = len(result.points)
                    _say(
                        f"  t={last_print - t0:5.1f}s  transactions {workload.transactions:6d}  "
                        f"changes {work.changes:7d}  mirrored {rows:7d} rows in {batches:4d} batches  "
                        f"lag {'-' if lag_ms is None else f'{lag_ms / 1000:.1f}s'}"
                    )
            if workload.error is not None:
                raise ServiceError(f"the workload failed: {workload.error}")
            result.transactions = workload.transactions
            result.changes = work.changes
            _say(f"workload done: {result.transactions} transactions, {result.changes} row changes; draining")
            deadline = time.monotonic() + 120
            comparisons: list[Any] = []
            while True:
                if kill and kill_at is None and result.points:
                    kill_at = kill_reader()  # the workload was too short to kill the reader while it ran
                    with contextlib.suppress(Exception):
                        query.awaitTermination(60)
                if not query.isActive:
                    _say("  query stopped; restarting it from the checkpoint")
                    result.restarts += 1
                    query = start_query()
                try:
                    query.processAllAvailable()
                except Exception as exc:  # the query died under processAllAvailable: restart it
                    _say(f"  query failed ({type(exc).__name__}); restarting it from the checkpoint")
                    continue
                comparisons = compare_tables(conn, mirror, DB, SHOP_TABLES)
                killed_or_not_asked = not kill or kill_at is not None
                if (all(c.equal for c in comparisons) and killed_or_not_asked) or time.monotonic() > deadline:
                    break
            query.stop()
            result.elapsed_s = time.monotonic() - t0
            for table, comparison in zip(SHOP_TABLES, comparisons, strict=True):
                stats = mirror.stats.get(f"{DB}.{table}")
                ids = mirror.committed_batch_ids(DB, table)
                if ids != sorted(set(ids)):
                    result.duplicate_batches.append(table)
                result.tables.append(
                    {
                        "table": f"{DB}.{table}",
                        "source_rows": comparison.source_rows,
                        "mirror_rows": comparison.mirror_rows,
                        "changes": stats.changes if stats else 0,
                        "batches": len(ids),
                        "skipped": stats.skipped if stats else 0,
                        "equal": comparison.equal,
                        "detail": str(comparison),
                    }
                )
            result.ok = all(t["equal"] for t in result.tables) and not result.duplicate_batches
            if chart:
                png = _chart(result.points, kill_at, work_dir / "demo-throughput-lag.png")
                if png is not None and keep_chart:
                    kept = Path(tempfile.gettempdir()) / "pycanal-demo-throughput-lag.png"
                    shutil.copy(png, kept)
                    png = kept
                result.chart = png
        finally:
            exporters.close()
            if own_spark:
                stop_spark(spark)
        conn.close()
        pids = [mariadb.pid, zookeeper.pid, jvm_pid]
    left = [pid for pid in pids if pid is not None and process_state(pid) not in (None, "Z")]
    if left:
        raise ServiceError(f"demo servers still running after stop: pids {left}")
    result.elapsed_s = max(result.elapsed_s, 0.0)
    _LOG.debug("demo took %.1f s", time.monotonic() - began)
    return result


def summary(result: DemoResult) -> str:
    lines = [
        f"{'table':<18} {'source rows':>11} {'mirror rows':>11} {'changes':>8} {'batches':>8} {'skipped':>8}  result"
    ]
    for t in result.tables:
        lines.append(
            f"{t['table']:<18} {t['source_rows']:>11} {t['mirror_rows']:>11} {t['changes']:>8} {t['batches']:>8} "
            f"{t['skipped']:>8}  {'EQUAL' if t['equal'] else 'DIFFERS: ' + t['detail']}"
        )
    rows = sum(p.rows for p in result.points)
    busy = [p for p in result.points if p.rows]
    span = (busy[-1].at - busy[0].at) if len(busy) > 1 else 0.0
    lags = [p.lag_ms / 1000 for p in result.points if p.lag_ms is not None]
    lines.append(
        f"{result.preloaded} rows before the pipeline started, {result.snapshot_rows} SNAPSHOT rows mirrored "
        f"(the snapshot reads rows as they are then: rows the workload inserted before their chunk was read come too)"
    )
    lines.append(
        f"{result.transactions} transactions, {result.changes} row changes; {rows} change rows through foreachBatch in "
        f"{len(result.points)} micro-batches over {result.elapsed_s:.1f} s "
        f"({rows / span if span else 0:.0f} rows/s while busy); lag p50 {_percentile(lags, 0.5):.1f} s, "
        f"p95 {_percentile(lags, 0.95):.1f} s, max {max(lags, default=0):.1f} s"
    )
    lines.append(
        f"reader process killed: pid {result.killed_pid}; query restarts: {result.restarts}; "
        f"batches committed twice: {', '.join(result.duplicate_batches) or 'none'}"
    )
    if result.chart is not None:
        lines.append(f"chart: {result.chart}")
    lines.append("mirrors EQUAL their source tables" if result.ok else "MIRROR MISMATCH")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo; 0 when every mirror equals its source table."""
    parser = argparse.ArgumentParser(prog="python -m canal.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=40.0, help="workload duration")
    parser.add_argument("--rate", type=float, default=80.0, help="transactions per second")
    parser.add_argument("--out", type=Path, default=None, help="keep the chart and the Delta tables here")
    parser.add_argument("--no-kill", action="store_true", help="do not kill the reader process")
    parser.add_argument("--preload", type=int, default=200_000, help="rows in the tables before the pipeline starts")
    parser.add_argument(
        "--metrics-port", type=int, default=None, help="the reader's process serves the capture's metrics here"
    )
    parser.add_argument("--mirror-metrics-port", type=int, default=None, help="the mirror's metrics are served here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        result = run(
            seconds=args.seconds,
            rate=args.rate,
            out_dir=args.out,
            kill=not args.no_kill,
            preload=args.preload,
            metrics_port=args.metrics_port,
            mirror_metrics_port=args.mirror_metrics_port,
        )
    except ServiceError as exc:
        _say(f"demo failed: {exc}")
        return 1
    _say(summary(result))
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
