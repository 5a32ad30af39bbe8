"""Wide rows into the embedded Delta mirror: cost per cell and peak memory from 10 to 1,000 columns.

Workload per width C (10, 100, 1,000): a table of an INT key and C-1 columns (INT, DOUBLE and latin1 VARCHAR(8) in
turn), 1,000 rows inserted in one statement and updated 20 times by statements of 1,000 rows (full row images):
21,000 row changes, written to a private MariaDB's binlog before anything reads it. Each run is a fresh process:

* ``mirror``: ``run_batches(instance, None, DeltaMirror(root))`` -- the typed path, no Spark -- from the instance's
  start until the last row is applied, its store and batches the defaults (16 MB of binlog each). The headline is
  this whole run's wall time per cell (rows x columns); CPU per cell beside it;
* ``instance``: the same rows through ``Instance.get`` (tuples, nothing applied), the decoding baseline.

``wide_cell_ratio`` = the mirror's us per cell at 1,000 columns / at 100 (goal <= 1.2); ``mirror_decode_ratio`` = the
mirror run's decode rate / the instance run's, for the 10-column rows (goal >= 0.9): rows per CPU second of the parser
thread, which is the decoding (the mirror's own work runs in the consumer's thread), the median of ``--rounds`` runs of
each, interleaved (the parser spends about 70 ms on those rows: one run's ratio moved between 0.90 and 1.09);
``wide_peak_rss_mb`` = the peak RSS (VmHWM) of the mirror run at 1,000 columns (goal <= 600).

    .venv/bin/python benchmarks/bench_wide.py [--widths 10,100,1000] [--rounds 5]

Writes ``benchmarks/results/bench_wide.json``; the last line is
``RESULT wide_cell_ratio=... mirror_decode_ratio=... wide_peak_rss_mb=...``.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

from children import read_spec, run_child
from result_file import write_result

ROWS = 1000
UPDATES = 20


def _column(i: int) -> tuple[str, str, str]:
    """(declaration, insert expression, update expression) of value column ``i`` (1-based)."""
    if i % 3 == 0:
        return f"c{i} VARCHAR(8) CHARACTER SET latin1", "CONCAT('v', seq % 1000)", "CONCAT('u{k}-', id % 100)"
    if i % 3 == 1:
        return f"c{i} INT", "seq", f"c{i} + 1"
    return f"c{i} DOUBLE", "seq / 7", f"c{i} * 1.01"


def write_workload(server: Any, width: int) -> tuple[str, int]:
    """The table w.t{width} and its 21,000 changes; the binlog position before them."""
    columns = [_column(i) for i in range(1, width)]
    server.execute("CREATE DATABASE IF NOT EXISTS w")
    declared = ", ".join(c[0] for c in columns)
    server.execute(f"CREATE TABLE w.t{width} (id INT PRIMARY KEY, {declared}) ROW_FORMAT=DYNAMIC")
    journal, position = server.execute("SHOW MASTER STATUS")[0][:2]
    values = ", ".join(c[1] for c in columns)
    server.execute(f"INSERT INTO w.t{width} SELECT seq, {values} FROM seq_1_to_{ROWS}", database="w")
    for k in range(UPDATES):
        sets = ", ".join(f"c{i} = {c[2].format(k=k)}" for i, c in enumerate(columns, start=1))
        server.execute(f"UPDATE w.t{width} SET {sets}")
    return str(journal), int(position)


def _thread_cpu_s(native_id: int) -> float:
    """A thread's CPU time in nanoseconds' resolution (schedstat's first field; /proc's stat counts 10 ms ticks, a
    fifth of the 10-column rows' decoding)."""
    return int(Path(f"/proc/self/task/{native_id}/schedstat").read_text().split()[0]) / 1e9


def _peak_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def child(spec: dict[str, Any]) -> None:
    """One run in a fresh process: the mirror's or the instance's, of one width."""
    from canal.config import InstanceConfig, MasterConfig
    from canal.instance import Instance
    from canal.protocol import EMPTY_MESSAGE_ID
    from canal.spark import DeltaMirror, run_batches

    width, total = spec["width"], ROWS * (UPDATES + 1)
    config = InstanceConfig(
        destination="wide",
        master=MasterConfig(
            address=spec["address"],
            username=spec["user"],
            password=spec["password"],
            journal_name=spec["journal"],
            position=spec["position"],
        ),
        filter_regex=rf"w\.t{width}",
    )
    usage0 = resource.getrusage(resource.RUSAGE_SELF)
    began = time.perf_counter()
    batches = None
    with tempfile.TemporaryDirectory() as tmp, Instance(config) as inst:
        if spec["mode"] == "mirror":
            mirror = DeltaMirror(Path(tmp) / "mirror")
            stats = run_batches(inst, None, mirror, until=lambda done: done.rows >= total)
            rows, batches = stats.rows, stats.batches
            seconds = time.perf_counter() - began
            peak_mb = _peak_mb()  # the run's: not the read of the whole table below, which checks it
            mirror.close()  # folds still under way: off the stream's path, not in its time
            mirrored = mirror.read("w", f"t{width}").num_rows
            if mirrored != ROWS:
                raise SystemExit(f"the mirror holds {mirrored} rows of w.t{width}, not {ROWS}")
        else:
            rows = 0
            while rows < total:
                msg = inst.get(16384, timeout=0.5)
                if msg.id != EMPTY_MESSAGE_ID:
                    rows += sum(
                        len(e.row_change.rows)
                        for e in msg.entries
                        if e.row_change is not None and not e.row_change.is_ddl
                    )
            seconds = time.perf_counter() - began
            peak_mb = _peak_mb()
        thread = inst.parser._thread  # type: ignore[union-attr]
        assert thread is not None and thread.native_id is not None
        parser_cpu_s = _thread_cpu_s(thread.native_id)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu_s = usage.ru_utime + usage.ru_stime - usage0.ru_utime - usage0.ru_stime
    cells = rows * width
    print(
        json.dumps(
            {
                "mode": spec["mode"],
                "width": width,
                "rows": rows,
                "batches": batches,
                "seconds": round(seconds, 3),
                "cpu_s": round(cpu_s, 3),
                "us_per_cell": round(seconds / cells * 1e6, 4),
                "cpu_us_per_cell": round(cpu_s / cells * 1e6, 4),
                "parser_cpu_s": round(parser_cpu_s, 3),
                "decode_rows_per_cpu_s": round(rows / max(parser_cpu_s, 0.01)),
                "peak_rss_mb": round(peak_mb, 1),
            }
        ),
        flush=True,
    )


def run(server: Any, mode: str, width: int, start: tuple[str, int]) -> dict[str, Any]:
    spec = {
        "address": server.address,
        "user": server.user,
        "password": server.password,
        "journal": start[0],
        "position": start[1],
        "mode": mode,
        "width": width,
    }
    result = run_child(__file__, "--child", spec, timeout=1800, what=f"{mode} at {width} columns")
    print(
        f"{mode} {width} columns: {result['rows']} rows in {result['seconds']} s ({result['us_per_cell']} us a cell, "
        f"{result['cpu_us_per_cell']} us CPU), decoding {result['decode_rows_per_cpu_s']:,} rows per CPU-s, "
        f"peak RSS {result['peak_rss_mb']} MB",
        flush=True,
    )
    return result


def _median(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of median decode rate (its other figures from the same run), with every run beside it."""
    median = sorted(results, key=lambda r: r["decode_rows_per_cpu_s"])[len(results) // 2]
    return {**median, "rounds": results} if len(results) > 1 else median


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--widths", default="10,100,1000")
    ap.add_argument("--rounds", type=int, default=5, help="runs of each mode at the narrowest width; medians")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(read_spec())
        return 0
    from canal.testing.services import MariaDBServer

    widths = [int(w) for w in args.widths.split(",")]
    started = time.perf_counter()
    mirror: dict[int, dict[str, Any]] = {}
    instance: dict[int, dict[str, Any]] = {}
    narrow, wide = min(widths), max(widths)
    with MariaDBServer(server_id=1) as server:
        for width in widths:
            # written after the runs of the narrower tables: a parser reads nothing past its own rows (it would
            # decode ahead while the run ends, and count that in its decoding)
            start = write_workload(server, width)
            rounds: dict[str, list[dict[str, Any]]] = {"instance": [], "mirror": []}
            for _ in range(args.rounds if width == narrow else 1):
                for mode, results in rounds.items():
                    results.append(run(server, mode, width, start))
            instance[width], mirror[width] = (_median(rounds[mode]) for mode in ("instance", "mirror"))
    middle = 100 if 100 in widths else narrow
    cell_ratio = mirror[wide]["us_per_cell"] / mirror[middle]["us_per_cell"]
    cpu_cell_ratio = mirror[wide]["cpu_us_per_cell"] / mirror[middle]["cpu_us_per_cell"]
    decode_ratio = mirror[narrow]["decode_rows_per_cpu_s"] / instance[narrow]["decode_rows_per_cpu_s"]
    peak = mirror[wide]["peak_rss_mb"]
    document = {
        "benchmark": "bench_wide",
        "rows": ROWS,
        "updates": UPDATES,
        "mirror": {str(w): r for w, r in mirror.items()},
        "instance": {str(w): r for w, r in instance.items()},
        "wide_cell_ratio": round(cell_ratio, 2),
        "wide_cpu_cell_ratio": round(cpu_cell_ratio, 2),
        "mirror_decode_ratio": round(decode_ratio, 2),
        "wide_peak_rss_mb": peak,
        "goals": {"wide_cell_ratio": "<= 1.2", "mirror_decode_ratio": ">= 0.9", "wide_peak_rss_mb": "<= 600"},
        "seconds": round(time.perf_counter() - started, 1),
    }
    write_result("bench_wide", document)
    print(f"RESULT wide_cell_ratio={cell_ratio:.2f} mirror_decode_ratio={decode_ratio:.2f} wide_peak_rss_mb={peak}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
