"""A/B of two versions of pycanal: CPU per row of the main paths, run alternately on one machine, in one run.

    .venv/bin/python benchmarks/ab.py BASE [HEAD] [--changes 500000] [--rounds 3] [--paths decode,get_ack,...]

BASE -- and HEAD, when given -- is checked out into a git worktree of its own (removed at the end); without HEAD,
this working tree is the HEAD side. Both sides run in this interpreter (its virtualenv), each measurement in a fresh
process whose ``PYTHONPATH`` puts its side's tree first; the process checks that ``canal`` is imported from there.
The measuring code is this tree's (the benchmarks below), the same for both sides.

Workload: bench_spark's (:func:`bench_spark.write_workload`: a 10-column table with the column mix of real tables,
``--changes`` split 60/25/15 into 1,000-row INSERT, UPDATE and DELETE statements), written once to a private MariaDB
(this tree's :class:`~canal.testing.services.MariaDBServer`) in a binlog file of its own, before anything reads it.

Paths, each measured in a process of its own, for each side, in every round:

* ``decode``: bench_decode's source alone (:func:`bench_decode.run_ours`): a ``MysqlBinlogSource`` dump of the
  workload's file, every value touched;
* ``get_ack``: bench_e2e's consumer: ``Instance.get`` (which acks) of batches of up to 512 KiB of binlog, every
  value touched (:func:`bench_e2e._touch`), from the workload's start to its last row;
* ``embedded``: bench_spark's embedded mirror (:func:`bench_spark.embedded`): ``run_batches(inst, None,
  DeltaMirror(...))``, no JVM, from the instance's start until the last row is applied and the mirror's folds ended;
* ``spark``: bench_spark's query (:func:`bench_spark.stream`): a local-mode ``Trigger.AvailableNow`` query of the
  ``canal`` source (``images=packed``, the source's defaults) into a DeltaMirror through ``foreachBatch``, its
  session made before, as a user's job has it.

The figure of each: the CPU of the measuring process (all its threads; for ``spark``, the process and every process
under it -- Spark's JVM, the source's reader, the Python workers -- as ``/proc`` counts them, those that ended
included through their parents) from the start of the measured work to its end, in microseconds per row change of
the workload. The database server's CPU over the same run (its own process: other work on the machine is not
counted) is beside it, with each run's rows/s (``spark``: its steady rate, the micro-batches after the first).

Order: in each round every path runs for both sides back to back, the side that goes first alternating from round to
round (the machine's speed moves in phases of a minute or more). Each figure is the median of the rounds, with the
lowest and highest beside it; a ratio is HEAD's median over BASE's: above 1 is slower. Run it before merging a
change to ``canal/parse``, ``canal/lake`` or ``canal/spark``: a CPU-per-row ratio above 1.05 on any path is a
regression to fix, or to justify.

Writes ``benchmarks/results/ab.json``; the last line is ``RESULT decode_cpu_ratio=... get_ack_cpu_ratio=...
embedded_cpu_ratio=... spark_cpu_ratio=...``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from children import read_spec, run_child
from result_file import write_result

ROOT = Path(__file__).resolve().parent.parent
PATHS = ("decode", "get_ack", "embedded", "spark")
_HZ = os.sysconf("SC_CLK_TCK")


# -- the measuring process ------------------------------------------------------------------------------------------


def _self_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _tree_cpu_s(root: int) -> float:
    """CPU seconds of process ``root`` and every live process under it, each with what its ended children it waited
    for had used (``/proc``: utime, stime, cutime, cstime)."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                stat = fh.read()
        except OSError:  # ended meanwhile
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        parents[int(entry)] = int(fields[1])
        times[int(entry)] = sum(int(v) for v in fields[11:15]) / _HZ
    under = {root}
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in under and pid not in under:
                under.add(pid)
                grew = True
    return sum(times.get(pid, 0.0) for pid in under)


def _check_side(root: str) -> None:
    import canal

    where = Path(canal.__file__).resolve()
    if not where.is_relative_to(Path(root).resolve()):
        raise SystemExit(f"canal came from {where}, not from the side's tree {root}")


def _decode(spec: dict[str, Any], server: Any) -> dict[str, Any]:
    from bench_decode import run_ours

    rows, seconds = run_ours(server, spec["file"])
    return {"rows": rows, "seconds": seconds}


def _get_ack(spec: dict[str, Any], server: Any) -> dict[str, Any]:
    from bench_e2e import GET_BATCH, _config, _touch

    from canal.instance import Instance
    from canal.protocol import EMPTY_MESSAGE_ID

    journal, position = spec["start"]
    rows, began = 0, time.perf_counter()
    with Instance(_config(server, journal, position, r"bench\.t", 9300)) as inst:
        while rows < spec["changes"]:
            msg = inst.get(GET_BATCH, timeout=0.05)
            if msg.id != EMPTY_MESSAGE_ID:
                rows += _touch(msg.entries)
    return {"rows": rows, "seconds": time.perf_counter() - began}


def _embedded(spec: dict[str, Any], server: Any) -> dict[str, Any]:
    from bench_spark import embedded

    with tempfile.TemporaryDirectory(prefix="ab-embedded-") as work:
        done = embedded(server, tuple(spec["start"]), Path(work) / "mirror", spec["changes"])
    if done["mirror_rows"] != spec["expected"]:
        raise SystemExit(f"the embedded mirror holds {done['mirror_rows']} rows, the source {spec['expected']}")
    return {"rows": done["rows"], "seconds": done["seconds"]}


def child() -> None:
    """One measurement in this fresh process: the spec (the side's tree, the server, the path) on stdin, the figures
    as the last line of stdout."""
    from types import SimpleNamespace

    spec = read_spec()
    _check_side(spec["root"])
    from bench_spark import load_arrow

    server = SimpleNamespace(address=spec["address"], user=spec["user"], password=spec["password"])
    load_arrow()  # what a PySpark worker has loaded before a reader's first batch (bench_spark)
    path = spec["path"]
    if path == "spark":
        print(json.dumps(_spark(spec, server)), flush=True)
        return
    measure = {"decode": _decode, "get_ack": _get_ack, "embedded": _embedded}[path]
    before = _self_cpu_s()
    done = measure(spec, server)
    print(json.dumps({**done, "cpu_s": _self_cpu_s() - before}), flush=True)


def _spark(spec: dict[str, Any], server: Any) -> dict[str, Any]:
    from bench_spark import figures, spark_conf, stream

    from canal.spark import register
    from canal.spark.testing import local_spark, stop_spark

    spark = local_spark("pycanal-ab", extra=spark_conf(None))
    spark.sparkContext.setLogLevel("ERROR")
    try:
        register(spark)
        with tempfile.TemporaryDirectory(prefix="ab-spark-") as work:
            before = _tree_cpu_s(os.getpid())
            run_ = stream(spark, server, tuple(spec["start"]), Path(work), 50_000, None, {"images": "packed"})
            cpu_s = _tree_cpu_s(os.getpid()) - before
            run_["mirror"].close()  # its folds (Spark jobs) end before the session does
            mirrored = run_["mirror"].read("bench", "t").num_rows
    finally:
        stop_spark(spark)
    if mirrored != spec["expected"]:
        raise SystemExit(f"the Spark query's mirror holds {mirrored} rows, the source {spec['expected']}")
    made = figures(run_)
    return {
        "rows": made["rows"],
        "seconds": made["whole_s"],
        "steady_rows_per_s": made["steady_rows_per_s"],
        "cpu_s": cpu_s,
    }


# -- the run --------------------------------------------------------------------------------------------------------


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


@contextmanager
def _worktree(commit: str, parent: Path, name: str) -> Iterator[Path]:
    """``commit`` checked out (detached) into a git worktree under ``parent``, removed afterwards."""
    where = parent / name
    _git("worktree", "add", "--detach", "--quiet", str(where), commit)
    try:
        yield where
    finally:
        _git("worktree", "remove", "--force", str(where))


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def _server_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _HZ


def _measure(side: dict[str, Any], path: str, common: dict[str, Any], server: Any) -> dict[str, Any]:
    spec = {**common, "root": str(side["root"]), "path": path}
    load = round(os.getloadavg()[0], 2)  # the machine's, as it begins (other work shares the cores)
    began = time.perf_counter()
    for attempt in (1, 2):
        before = _server_cpu_s(server.pid)
        try:
            done = run_child(
                __file__, "--child", spec, timeout=1800, what=f"{path} of {side['name']}", root=side["root"]
            )
        except SystemExit as exc:  # one more try: a loaded machine has made a Spark task fail once
            if attempt == 2:
                raise
            print(f"{exc}".splitlines()[0] + " -- once more", flush=True)
            continue
        break
    server_s = _server_cpu_s(server.pid) - before
    changes = common["changes"]
    return {
        "cpu_us_per_row": round(done["cpu_s"] / changes * 1e6, 2),
        "server_cpu_us_per_row": round(server_s / changes * 1e6, 2),
        "rows_per_s": round(changes / done["seconds"]),
        **({"steady_rows_per_s": done["steady_rows_per_s"]} if "steady_rows_per_s" in done else {}),
        "load_1m": load,
        "wall_s": round(time.perf_counter() - began, 1),
    }


def _summary(runs: list[dict[str, Any]], key: str) -> dict[str, Any]:
    values = [r[key] for r in runs if r.get(key) is not None]
    if not values:
        return {"median": None, "low": None, "high": None}
    return {"median": round(statistics.median(values), 2), "low": min(values), "high": max(values)}


def _sides(stack: ExitStack, base: str, head: str | None) -> dict[str, dict[str, Any]]:
    """The two sides: BASE (and HEAD, when given) checked out into worktrees that ``stack`` removes; otherwise HEAD
    is this working tree."""
    tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="pycanal-ab-")))
    base_commit = _git("rev-parse", "--verify", f"{base}^{{commit}}")
    sides = {"base": {"name": f"BASE {base_commit[:7]}", "commit": base_commit}}
    sides["base"]["root"] = stack.enter_context(_worktree(base_commit, tmp, "base"))
    if head is not None:
        head_commit = _git("rev-parse", "--verify", f"{head}^{{commit}}")
        sides["head"] = {"name": f"HEAD {head_commit[:7]}", "commit": head_commit}
        sides["head"]["root"] = stack.enter_context(_worktree(head_commit, tmp, "head"))
    else:
        changed = "+changes" if _git("status", "--porcelain", "--untracked-files=no") else ""
        sides["head"] = {"name": "HEAD (working tree)", "commit": _git("rev-parse", "HEAD") + changed, "root": ROOT}
    return sides


def _workload(server: Any, changes: int) -> dict[str, Any]:
    """bench_spark's workload, written to ``server`` in a binlog file of its own: what every measurement is told."""
    from bench_spark import TABLE_DDL, workload_sizes, write_workload

    from canal.spark.testing import master_position

    inserts, updates, deletes = workload_sizes(changes)
    conn = server.connect()
    server.execute("FLUSH BINARY LOGS")  # the workload in a file of its own: the decode path reads that file
    file = master_position(conn)[0]
    server.execute("CREATE DATABASE bench")
    server.execute(TABLE_DDL)
    start = master_position(conn)
    made = write_workload(conn, inserts, updates, deletes)
    conn.close()
    print(f"workload: {made} row changes in {file}, from {start}", flush=True)
    return {
        "address": server.address,
        "user": server.user,
        "password": server.password,
        "file": file,
        "start": list(start),
        "changes": made,
        "expected": inserts - deletes,
    }


def _rounds(
    sides: dict[str, dict[str, Any]], paths: list[str], rounds: int, common: dict[str, Any], server: Any
) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Every path for both sides back to back, round after round, the side that goes first alternating."""
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {p: {"base": [], "head": []} for p in paths}
    for round_ in range(rounds):
        order = ("base", "head") if round_ % 2 == 0 else ("head", "base")
        for path in paths:
            for name in order:
                done = _measure(sides[name], path, common, server)
                runs[path][name].append(done)
                print(
                    f"round {round_ + 1} {path:8s} {sides[name]['name']:22s} {done['cpu_us_per_row']:7.2f} us CPU "
                    f"a row (server {done['server_cpu_us_per_row']:.2f}), {done['rows_per_s']:,} rows/s "
                    f"[{done['wall_s']} s, load {done['load_1m']}]",
                    flush=True,
                )
    return runs


def _report(
    sides: dict[str, dict[str, Any]], runs: dict[str, dict[str, list[dict[str, Any]]]], common: dict[str, Any]
) -> dict[str, Any]:
    """The medians, spreads and ratios of ``runs``, printed; the result document."""
    result: dict[str, Any] = {
        "benchmark": "ab",
        "base": sides["base"]["commit"],
        "head": sides["head"]["commit"],
        "changes": common["changes"],
        "paths": {},
    }
    print(f"\n{'path':9s} {'side':22s} {'CPU us/row: median (low-high)':>32s} {'server us/row':>14s} {'rows/s':>9s}")
    for path, by_side in runs.items():
        figures: dict[str, Any] = {}
        for name in ("base", "head"):
            rate_key = "steady_rows_per_s" if path == "spark" else "rows_per_s"
            cpu = _summary(by_side[name], "cpu_us_per_row")
            server_cpu = _summary(by_side[name], "server_cpu_us_per_row")
            rate = _summary(by_side[name], rate_key)
            figures[name] = {
                "cpu_us_per_row": cpu,
                "server_cpu_us_per_row": server_cpu,
                rate_key: rate,
                "runs": by_side[name],
            }
            spread = f"{cpu['median']:.2f} ({cpu['low']:.2f}-{cpu['high']:.2f})"
            print(
                f"{path:9s} {sides[name]['name']:22s} {spread:>32s} {server_cpu['median']:14.2f} "
                f"{rate['median'] or 0:9,.0f}"
            )
        base_cpu, head_cpu = figures["base"]["cpu_us_per_row"]["median"], figures["head"]["cpu_us_per_row"]["median"]
        figures["cpu_ratio"] = round(head_cpu / base_cpu, 3) if base_cpu else None
        result["paths"][path] = figures
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("base", nargs="?", help="the commit to compare against (BASE)")
    parser.add_argument("head", nargs="?", help="the commit compared (HEAD; default: this working tree)")
    parser.add_argument("--changes", type=int, default=500_000, help="row changes of the workload (60/25/15)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--paths", default=",".join(PATHS), help=f"some of {','.join(PATHS)}")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child()
        return 0
    if args.base is None:
        parser.error("BASE is required")
    paths = [p for p in args.paths.split(",") if p]
    unknown = set(paths) - set(PATHS)
    if unknown:
        parser.error(f"unknown paths {sorted(unknown)}: choose among {', '.join(PATHS)}")
    from canal.testing.services import MariaDBServer

    started = time.perf_counter()
    uptime = {"start": _uptime()}
    with ExitStack() as stack:
        sides = _sides(stack, args.base, args.head)
        with MariaDBServer(server_id=1) as server:
            common = _workload(server, args.changes)
            runs = _rounds(sides, paths, args.rounds, common, server)
    result = _report(sides, runs, common)
    result["rounds"] = args.rounds
    uptime["end"] = _uptime()
    result["uptime"] = uptime  # the machine's load over the run: CPU per row compares across it, rows/s less so
    result["seconds"] = round(time.perf_counter() - started, 1)
    write_result("ab", result)
    print("RESULT " + " ".join(f"{path}_cpu_ratio={result['paths'][path]['cpu_ratio']}" for path in paths))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
