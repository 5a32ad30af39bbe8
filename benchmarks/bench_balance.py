"""Balance groups: how fast processes that embed the same destinations settle after a join and a leave, how much a
join moves, how long a graceful hand-over leaves a destination unserved, and what a balanced group costs per row.

Run: ``python benchmarks/bench_balance.py [--destinations 40] [--processes 4] [--window 15] [--rate 400]``.

Starts its own two MariaDB servers and a ZooKeeper (``canal.testing.services``, tickTime 500 ms). M destinations
(``d00``, ``d01``, ...) each capture one table of one of the two masters (alternately); two writers insert into them
at ``--rate`` rows/s in all, in transactions of 1-5 rows. The processes are ``tests.procs.balance_consumer``: a
service with a consumer thread per destination it serves, started by ``on_assigned`` and stopped by ``on_revoked``
after it acked its batch (write-through cursors in ZooKeeper, session timeout 4 s, ``ha_delay_s`` 0.5). The parent
watches the running nodes and the assignment document (``tests.procs.balance_harness.Ownership``).

1. **Baseline**: one process runs all M destinations; its CPU per consumed row over ``--window`` seconds.
2. N-1 processes share them; then the N-th starts: ``settle_join_s`` is the time from its member node's creation
   (the change of membership) until the group has settled (the document computed for N members, every destination
   held by its assigned process, shares within one), ``start_to_settled_s`` from its process's start (Python's
   start and its M destinations' included); ``moves_per_join`` the destinations whose holder changed (goal: at most
   ceil(M/N)).
3. **Balanced**: the N processes' CPU per consumed row over the same window; ``cpu_per_row_ratio`` is it over the
   baseline's (the same rows, consumed by N processes instead of one).
4. One process stops gracefully (SIGTERM, ``stop_on_signals``): ``settle_leave_s``, the time until the rest have
   settled.
5. One process is SIGKILLed: ``settle_kill_s`` (its session must expire first: 4 s + a tick, then ``ha_delay_s``).

``max_gap_s`` is the longest a destination went unserved in a graceful hand-over (the join's and the graceful
leave's): from its old owner refusing new batches ("handing over" in that process's log) until its new owner serves
it ("serving with fencing token"), both logged with the same monotonic clock; the goal is under 1 s.
``gap_phases_s`` splits each gap at the old owner's release of the running node ("stopped serving ...: released") and
the new owner's activation ("became active"): ``releasing`` (its consumer finishing the batch in hand, the meta
persisted), ``taking`` (the release's transaction, the watch, the node's creation with the epoch's bump) and
``starting`` (the instance's start: the meta loaded, the parser started); the median and maximum of each.
CPU is counted per process from ``/proc/<pid>/stat`` (user + system): every thread of the service, its parsers and
readers included.

Writes ``benchmarks/results/bench_balance.json``; the last line is ``RESULT settle_join_s=... settle_leave_s=...
moves_per_join=... max_gap_s=... cpu_per_row_ratio=...``.
"""

from __future__ import annotations

import argparse
import math
import os
import queue
import random
import re
import signal
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kazoo.client import KazooClient  # noqa: E402
from kazoo.recipe.watchers import ChildrenWatch  # noqa: E402
from result_file import write_result  # noqa: E402

from canal.meta import zkpaths  # noqa: E402
from canal.testing.services import MariaDBServer, ZooKeeperServer  # noqa: E402
from tests.procs.balance_harness import Ownership, parse_service_log  # noqa: E402
from tests.procs.ha_harness import Child, kill_all  # noqa: E402

SESSION_S = 4.0
HA_DELAY_S = 0.5
_RECORD = re.compile(
    r"^(\d+\.\d+) \S+ INFO \S+ \[(\w+)\] "
    r"(handing over|stopped serving \S+: released|became active|serving with fencing token)"
)


class HandOver(NamedTuple):
    """One graceful hand-over from the logs: its gap, and the gap's three phases (seconds)."""

    gap: float
    releasing: float  # the old owner: "handing over" (refusing new batches) until it released the running node
    taking: float  # the release until the new owner became active (its watch, its node created, the epoch bumped)
    starting: float  # active until serving (its instance started: the meta loaded, the parser started)


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Writers:
    """Two writer threads, one per master, inserting consecutive ids into the destinations' tables at ``rate``
    rows/s in all."""

    def __init__(self, servers: list[MariaDBServer], m: int, rate: float) -> None:
        self.servers, self.m, self.rate = servers, m, rate
        self.next = [0] * m
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.run, args=(k,), daemon=True) for k in range(len(servers))]
        for i in range(m):
            servers[i % len(servers)].execute(f"CREATE TABLE bal.t{i:02d} (id INT PRIMARY KEY)")

    def run(self, k: int) -> None:
        rng = random.Random(k)
        tables = [i for i in range(self.m) if i % len(self.servers) == k]
        per_thread = self.rate / len(self.servers)
        with self.servers[k].connect("bal") as conn, conn.cursor() as cur:
            cur.execute("SET autocommit=0")
            started, written = time.monotonic(), 0
            while not self.stop.is_set():
                table = rng.choice(tables)
                size = rng.randint(1, 5)
                first = self.next[table]
                cur.executemany(f"INSERT INTO t{table:02d} VALUES (%s)", [(first + j,) for j in range(size)])
                conn.commit()
                self.next[table] = first + size
                written += size
                ahead = written / per_thread - (time.monotonic() - started)
                if ahead > 0:
                    self.stop.wait(ahead)  # pacing to the rate

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def finish(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(30)


class Bench:
    def __init__(self, args: argparse.Namespace, servers: list[MariaDBServer], zk: ZooKeeperServer) -> None:
        self.args = args
        self.m = args.destinations
        self.workdir = Path(args.workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        for old in self.workdir.glob("*.log*"):
            old.unlink()
        for server in servers:
            server.execute("CREATE DATABASE bal")
        self.writers = Writers(servers, self.m, args.rate)
        masters = []
        for server in servers:
            journal, position = server.execute("SHOW MASTER STATUS")[0][:2]
            masters.append(
                {
                    "address": server.address,
                    "user": server.user,
                    "password": server.password,
                    "database": "bal",
                    "journal": journal,
                    "position": position,
                }
            )
        self.base = {
            "zk_hosts": zk.hosts,
            "masters": masters,
            "destinations": self.m,
            "ha_delay_s": HA_DELAY_S,
            "zk_timeout_s": SESSION_S,
        }
        self.watcher = KazooClient(hosts=zk.hosts, timeout=10.0)
        self.watcher.start(10)
        self.owners = Ownership(self.watcher, [f"d{i:02d}" for i in range(self.m)])
        self.members: list[tuple[float, int]] = []  # (t, members) at each change of the group's membership
        self.watcher.ensure_path(zkpaths.balance_members_path("default"))
        ChildrenWatch(self.watcher, zkpaths.balance_members_path("default"), self._on_members)
        self.events: queue.Queue[tuple[str, str]] = queue.Queue()
        self.children: dict[str, Child] = {}
        self.live: dict[str, Child] = {}
        self.acked: dict[str, int] = {}  # destination -> the highest row id acked, from the children's "A" lines
        self.acked_changed = threading.Condition()
        threading.Thread(target=self._follow, daemon=True).start()

    def _follow(self) -> None:
        while True:
            _name, line = self.events.get()
            if line.startswith("A "):
                _, dest, top = line.split()
                with self.acked_changed:
                    self.acked[dest] = max(self.acked.get(dest, -1), int(top))
                    self.acked_changed.notify_all()

    def caught_up(self) -> None:
        """Until every row written so far was acked: a measurement starts without a backlog (which is consumed in
        larger batches, each row cheaper)."""
        written = {f"d{i:02d}": n for i, n in enumerate(self.writers.next)}
        with self.acked_changed:
            done = self.acked_changed.wait_for(
                lambda: all(self.acked.get(d, -1) >= n - 1 for d, n in written.items() if n), 120
            )
        assert done, "the consumers did not catch up within 120 s"

    def _on_members(self, children: list[str]) -> None:
        self.members.append((time.monotonic(), len(children)))

    def joined(self, since: float, count: int) -> float:
        """When the membership first reached ``count`` after ``since``."""
        return next(t for t, n in self.members if t >= since and n >= count)

    def spawn(self) -> Child:
        name = f"p{len(self.children)}"
        child = Child(
            name,
            {
                **self.base,
                "address": f"127.0.0.1:{24000 + len(self.children)}",
                "log": str(self.workdir / f"{name}.log"),
            },
            self.events,
            module="tests.procs.balance_consumer",
        )
        self.children[name] = child
        child.expect(lambda line: line == "W", 60, "started")
        self.live[name] = child
        return child

    def settle(self, what: str) -> float:
        addresses = [c.args["address"] for c in self.live.values()]
        self.owners.wait(lambda o: o.settled(addresses), 120, what)
        return time.monotonic()

    def rows_acked(self, since: float, until: float) -> int:
        """Rows of batches acked in [since, until], over every process's ledger."""
        rows = 0
        for name, child in self.children.items():
            logs, _ = parse_service_log(name, Path(child.args["log"]))
            for log in logs.values():
                sizes = {(b, t): len(ids) for b, t, _, ids in log.delivered}
                rows += sum(sizes.get((b, t), 0) for b, t, _t0, t1 in log.acked if since <= t1 <= until)
        return rows

    def cpu_per_row(self, label: str) -> dict[str, float]:
        """CPU seconds of the live processes per row they acked over the window (begun with no backlog)."""
        self.caught_up()
        pids = [c.pid for c in self.live.values()]
        start, cpu0 = time.monotonic(), sum(cpu_s(p) for p in pids)
        time.sleep(self.args.window)  # the measured stretch: rows flow, nothing waits on it
        end, cpu1 = time.monotonic(), sum(cpu_s(p) for p in pids)
        time.sleep(0.2)  # the log lines of acks that ended in the window are written
        rows = self.rows_acked(start, end)
        out = {
            "processes": len(pids),
            "window_s": round(end - start, 3),
            "rows": rows,
            "cpu_s": round(cpu1 - cpu0, 3),
            "cpu_per_row_us": round((cpu1 - cpu0) / max(rows, 1) * 1e6, 2),
        }
        print(f"{label}: {out}", flush=True)
        return out

    def gaps(self, since: float) -> dict[str, HandOver]:
        """Per destination, the longest hand-over after ``since``: a "handing over" record of one process to the next
        "serving with fencing token" record of another, from the processes' logs; its phases from the old owner's
        "stopped serving ...: released" and the new one's "became active" between them."""
        records: list[tuple[float, str, str, str]] = []
        for name, child in self.children.items():
            path = Path(child.args["log"] + ".err")
            if not path.exists():
                continue
            for line in path.read_text().splitlines():
                found = _RECORD.match(line)
                if found and float(found.group(1)) >= since:
                    records.append((float(found.group(1)), found.group(2), found.group(3), name))
        records.sort()
        out: dict[str, HandOver] = {}
        pending: dict[str, tuple[str, dict[str, float]]] = {}  # dest -> (old owner, its records' times by kind)
        for t, dest, what, name in records:
            kind = what.split()[0]  # handing, stopped, became, serving
            if kind == "handing":
                pending[dest] = (name, {"handing": t})
            elif dest not in pending:
                continue
            elif kind == "stopped":
                if name == pending[dest][0]:
                    pending[dest][1].setdefault(kind, t)  # the old owner's release
            elif name == pending[dest][0]:
                continue  # only the new owner's activation and serving count
            elif kind == "serving":
                _old, times = pending.pop(dest)
                began = times["handing"]
                released = times.get("stopped", began)
                active = times.get("became", released)
                if t - began > out.get(dest, HandOver(-1.0, 0.0, 0.0, 0.0)).gap:
                    out[dest] = HandOver(t - began, released - began, active - released, t - active)
            else:
                pending[dest][1][kind] = t  # its last activation before it serves
        return out

    def close(self) -> None:
        self.writers.finish()
        kill_all(list(self.children.values()))
        self.watcher.stop()
        self.watcher.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--destinations", type=int, default=40)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--window", type=float, default=15.0, help="seconds of each CPU measurement")
    parser.add_argument("--rate", type=float, default=400.0, help="rows written per second, in all")
    parser.add_argument("--workdir", default="/tmp/pycanal-bench-balance")
    args = parser.parse_args()
    m, n = args.destinations, args.processes
    load_before = os.getloadavg()

    with MariaDBServer(server_id=1) as first, MariaDBServer(server_id=2) as second, ZooKeeperServer() as zk:
        bench = Bench(args, [first, second], zk)
        try:
            bench.writers.start()
            single = bench.spawn()
            bench.settle("one process running all")
            baseline = bench.cpu_per_row("one process")
            for _ in range(n - 2):
                bench.spawn()
            bench.settle(f"balanced over {n - 1}")

            before = dict(bench.owners.holders)
            started_at = time.monotonic()
            bench.spawn()
            settled_at = bench.settle(f"balanced over {n}")
            joined_at = bench.joined(started_at, n)  # its member node: the change of membership
            settle_join_s, start_to_settled_s = settled_at - joined_at, settled_at - started_at
            after = dict(bench.owners.holders)
            moves = sum(1 for d in before if after[d] != before[d])
            join_gaps = bench.gaps(joined_at)
            print(
                f"join: settled {settle_join_s:.3f} s after it joined ({start_to_settled_s:.3f} s after its start), "
                f"{moves} moves",
                flush=True,
            )

            balanced = bench.cpu_per_row(f"{n} processes")

            leaver = bench.live.pop(single.name)  # the one that ran everything leaves gracefully
            left_at = time.monotonic()
            leaver.signal(signal.SIGTERM)
            settle_leave_s = bench.settle(f"balanced over {n - 1} after a graceful leave") - left_at
            leave_gaps = bench.gaps(left_at)
            leaver.proc.wait(60)
            print(f"graceful leave: settled in {settle_leave_s:.3f} s", flush=True)

            victim = bench.live.pop(sorted(bench.live)[0])
            killed_at = victim.kill()
            settle_kill_s = bench.settle(f"balanced over {n - 2} after a crash") - killed_at
            print(f"crash: settled in {settle_kill_s:.3f} s", flush=True)
        finally:
            bench.close()

    hand_overs = list(join_gaps.values()) + list(leave_gaps.values())
    gaps = [h.gap for h in hand_overs]
    max_gap_s = max(gaps) if gaps else float("nan")
    ratio = balanced["cpu_per_row_us"] / baseline["cpu_per_row_us"]
    doc: dict[str, Any] = {
        "benchmark": "bench_balance",
        "what": "a balance group of service processes: settling after a join and a leave, the moves of a join, the "
        "gaps of graceful hand-overs, CPU per consumed row balanced against one process running all",
        "destinations": m,
        "processes": n,
        "masters": 2,
        "rate_rows_per_s": args.rate,
        "session_timeout_s": SESSION_S,
        "ha_delay_s": HA_DELAY_S,
        "settle_join_s": round(settle_join_s, 3),
        "start_to_settled_s": round(start_to_settled_s, 3),
        "settle_leave_s": round(settle_leave_s, 3),
        "settle_kill_s": round(settle_kill_s, 3),
        "moves_per_join": moves,
        "moves_goal": math.ceil(m / n),
        "max_gap_s": round(max_gap_s, 3),
        "median_gap_s": round(statistics.median(gaps), 3) if gaps else None,
        "gap_goal_s": 1.0,
        "hand_overs": len(gaps),
        "join_gaps_s": {d: round(h.gap, 3) for d, h in sorted(join_gaps.items())},
        "leave_gaps_s": {d: round(h.gap, 3) for d, h in sorted(leave_gaps.items())},
        # where the gaps went: the median and the maximum of each phase over the hand-overs counted
        "gap_phases_s": {
            phase: {
                "median": round(statistics.median(getattr(h, phase) for h in hand_overs), 3),
                "max": round(max(getattr(h, phase) for h in hand_overs), 3),
            }
            for phase in ("releasing", "taking", "starting")
        }
        if hand_overs
        else None,
        "baseline_one_process": baseline,
        "balanced": balanced,
        "cpu_per_row_ratio": round(ratio, 3),
        # the machine's load around the run: on a shared 2-core machine the gaps and settle times are mostly waits
        # for a core, so they compare only between runs of like load
        "load_average_1m": [round(load_before[0], 2), round(os.getloadavg()[0], 2)],
    }
    write_result("bench_balance", doc)
    print(
        f"RESULT settle_join_s={settle_join_s:.3f} settle_leave_s={settle_leave_s:.3f} moves_per_join={moves} "
        f"max_gap_s={max_gap_s:.3f} cpu_per_row_ratio={ratio:.3f}"
    )


if __name__ == "__main__":
    main()
