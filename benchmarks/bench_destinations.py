"""Many destinations in one process: what each destination costs, against a private MariaDB.

N destinations in one ``EmbeddedServer``, each capturing its own database (``d000.t`` .. ``d099.t``) of one
MariaDB, with ``slave_id`` left unset; a writer in another process commits the same total of single-row transactions
for every N, spread evenly over the N databases, while a consumer thread per destination takes its rows
(``get`` + ack). Each N runs in a fresh process, which measures:

* ``start_s``: from the first ``start_destination`` until every destination's parser reads through the shared reader
  (N=1: has read from the binlog). A destination that starts before a second one of its master reads alone at first,
  and joins the reader at its dump's next heartbeat (within a second): a run measured before then would time that
  passing moment -- the first destinations each decoding the binlog alone -- not what N destinations cost;
* CPU per consumed row: the process's CPU time (every thread: parsers, readers, consumers) from the first write to
  the last row consumed, over the rows. The consumer threads (one per destination, each in ``get``) start before the
  first write, as a service's consumers would be running: starting 100 threads is the benchmark's set-up, not a cost
  of the destinations;
* RSS after the run, and the server's binlog dumps while it ran.

Each N runs ``--rounds`` times (5), interleaved, each round in a fresh process; each figure is the median of its
rounds (a round of N=1 takes a fraction of a CPU-second, whose noise alone moved the ratio by 0.5). The baseline is
N=1 in the same run. ``dest_cpu_ratio`` = CPU per row at N=100 / at N=1 (goal <= 2);
``start_100_s`` (goal <= 2); ``rss_per_dest_mb`` = (RSS at N=100 - RSS at N=1) / 99 (goal <= 1). The headline
figures are the whole run's: no warm-up pass.

    .venv/bin/python benchmarks/bench_destinations.py [--writes 2000] [--counts 1,100] [--rounds 5]

Writes ``benchmarks/results/bench_destinations.json``; the last line is
``RESULT dest_cpu_ratio=... start_100_s=... rss_per_dest_mb=...``.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from children import read_spec, start_child
from result_file import write_result

DATABASES = 100


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def child(spec: dict[str, Any]) -> None:
    """Runs in a fresh process: N destinations, started, then consumed until every write arrived."""
    from canal.client import ClientIdentity
    from canal.config import InstanceConfig, MasterConfig
    from canal.protocol import EMPTY_MESSAGE_ID, EntryType
    from canal.server import EmbeddedServer

    n = spec["n"]
    master = MasterConfig(
        address=spec["address"],
        username=spec["user"],
        password=spec["password"],
        journal_name=spec["journal"],
        position=spec["position"],
    )
    rss_base = _rss_mb()
    server = EmbeddedServer()
    server.start()
    t0 = time.perf_counter()
    cpu0 = _cpu_s()
    names = [f"dest{i:03d}" for i in range(n)]
    for i, name in enumerate(names):
        server.start_destination(InstanceConfig(destination=name, master=master, filter_regex=rf"d{i:03d}\.t"))
    instances = [server.instance(name) for name in names]
    while any(inst.read_position is None or (n > 1 and not getattr(inst.parser, "shared", True)) for inst in instances):
        if time.perf_counter() - t0 > 120:
            raise SystemExit("the destinations did not start within 120 s")
        time.sleep(0.005)
    start_s = time.perf_counter() - t0
    start_cpu_s = _cpu_s() - cpu0
    rss_started = _rss_mb()
    expected = spec["writes"] // n
    counts = [0] * n
    errors: list[BaseException] = []

    def consume(index: int) -> None:
        client = ClientIdentity(names[index], 1001)
        try:
            while counts[index] < expected:
                msg = server.get(client, 1000, timeout=1.0)
                if msg.id == EMPTY_MESSAGE_ID:
                    continue
                for entry in msg.entries:
                    if entry.entry_type is EntryType.ROWDATA and entry.row_change is not None:
                        counts[index] += len(entry.row_change.rows)
        except BaseException as exc:
            errors.append(exc)

    # the consumers wait for entries before the writer begins: starting N threads is the benchmark's own set-up
    threads = [threading.Thread(target=consume, args=(i,), daemon=True) for i in range(n)]
    for thread in threads:
        thread.start()
    print(json.dumps({"ready": True}), flush=True)
    sys.stdin.readline()  # the writer begins
    cpu0 = _cpu_s()
    t0 = time.perf_counter()
    for thread in threads:
        thread.join(timeout=600)
    if errors or sum(counts) != expected * n:
        raise SystemExit(f"consumed {sum(counts)} of {expected * n} rows: {errors[:1]}")
    wall_s = time.perf_counter() - t0
    cpu_s = _cpu_s() - cpu0
    rss_run = _rss_mb()
    reconnects = sum(inst.parser.reconnects for inst in instances)
    threads_alive = threading.active_count()
    stop0 = time.perf_counter()
    server.stop()
    stop_s = time.perf_counter() - stop0
    print(
        json.dumps(
            {
                "n": n,
                "rows": sum(counts),
                "start_s": round(start_s, 3),
                "start_cpu_s": round(start_cpu_s, 3),
                "wall_s": round(wall_s, 3),
                "cpu_s": round(cpu_s, 3),
                "cpu_per_row_ms": round(cpu_s / sum(counts) * 1000, 4),
                "rows_per_s": round(sum(counts) / wall_s),
                "rss_base_mb": round(rss_base, 1),
                "rss_started_mb": round(rss_started, 1),
                "rss_run_mb": round(rss_run, 1),
                "threads": threads_alive,
                "reconnects": reconnects,
                "stop_s": round(stop_s, 3),
            }
        ),
        flush=True,
    )


def run(server: Any, n: int, writes: int) -> dict[str, Any]:
    journal, position = server.execute("SHOW MASTER STATUS")[0][:2]
    spec = {
        "address": server.address,
        "user": server.user,
        "password": server.password,
        "journal": str(journal),
        "position": int(position),
        "n": n,
        "writes": writes,
    }
    proc = start_child(__file__, "--child", spec)
    assert proc.stdin is not None and proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"N={n}: the child ended before it was ready")
    dumps_started = sum(1 for r in server.execute("SHOW PROCESSLIST") if r[4] == "Binlog Dump")
    proc.stdin.write("go\n")
    proc.stdin.flush()
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            for k in range(writes):
                cur.execute(f"INSERT INTO d{k % n:03d}.t (id, v, n) VALUES (%s, %s, %s)", (k, f"value {k}", k * 7))
        dumps_running = sum(1 for r in server.execute("SHOW PROCESSLIST") if r[4] == "Binlog Dump")
    finally:
        conn.close()
    out, _ = proc.communicate(timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"N={n}: the child failed ({proc.returncode})")
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    result["server_dumps"] = max(dumps_started, dumps_running)
    for db in range(n):
        server.execute(f"DELETE FROM d{db:03d}.t")
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--writes", type=int, default=2000)
    ap.add_argument("--counts", default="1,100", help="numbers of destinations, the first is the baseline")
    ap.add_argument("--rounds", type=int, default=5, help="runs of each N, interleaved; the medians are reported")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(read_spec())
        return 0
    from canal.testing.services import MariaDBServer

    counts = [int(c) for c in args.counts.split(",")]
    started = time.perf_counter()
    rounds: dict[str, list[dict[str, Any]]] = {str(n): [] for n in counts}
    with MariaDBServer(server_id=1, extra_args=["--max-connections=1000"]) as server:
        for db in range(DATABASES):
            server.execute(f"CREATE DATABASE d{db:03d}")
            server.execute(f"CREATE TABLE d{db:03d}.t (id INT PRIMARY KEY, v VARCHAR(32), n BIGINT)")
        for _ in range(args.rounds):  # interleaved: a drift of the machine's load falls on every N alike
            for n in counts:
                result = run(server, n, args.writes - args.writes % n)
                rounds[str(n)].append(result)
                print(
                    f"N={n}: started in {result['start_s']} s ({result['start_cpu_s']} CPU-s), {result['rows']} rows "
                    f"in {result['wall_s']} s, {result['cpu_per_row_ms']} ms CPU per row, RSS {result['rss_run_mb']} "
                    f"MB, {result['server_dumps']} dumps on the server, {result['reconnects']} reconnects",
                    flush=True,
                )
    # each N's median round by CPU per row (its other figures from the same round), start and RSS medians apart
    runs: dict[str, Any] = {}
    for n, results in rounds.items():
        median = sorted(results, key=lambda r: r["cpu_per_row_ms"])[len(results) // 2]
        runs[n] = {
            **median,
            "start_s": statistics.median(r["start_s"] for r in results),
            "rss_run_mb": statistics.median(r["rss_run_mb"] for r in results),
            "rounds": results,
        }
    base, top = runs[str(counts[0])], runs[str(counts[-1])]
    ratio = top["cpu_per_row_ms"] / base["cpu_per_row_ms"]
    per_dest = (top["rss_run_mb"] - base["rss_run_mb"]) / max(1, counts[-1] - counts[0])
    document = {
        "benchmark": "bench_destinations",
        "writes": args.writes,
        "rounds": args.rounds,
        "runs": runs,
        "dest_cpu_ratio": round(ratio, 2),
        f"start_{counts[-1]}_s": top["start_s"],
        "rss_per_dest_mb": round(per_dest, 2),
        "goals": {"dest_cpu_ratio": "<= 2", "start_100_s": "<= 2", "rss_per_dest_mb": "<= 1"},
        "seconds": round(time.perf_counter() - started, 1),
    }
    write_result("bench_destinations", document)
    print(f"RESULT dest_cpu_ratio={ratio:.2f} start_{counts[-1]}_s={top['start_s']} rss_per_dest_mb={per_dest:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
