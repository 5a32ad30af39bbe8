"""The whole machine's busy CPU time over a stretch of a benchmark: every process's, the JVMs', the Python workers'
and the server's included.

A pipeline's rate on a small machine is bounded by the CPU each row costs all its processes together, divided among
the cores. The Spark benchmark's processes are many and short-lived (a PySpark worker per task), so it counts what
the kernel counts for the machine (``/proc/stat``: user, nice, system, irq, softirq and steal time) rather than
following processes. Anything else running on the machine is counted too: benchmarks run alone.
"""

from __future__ import annotations

import os
import time
from types import TracebackType

import attrs


def busy_s() -> float:
    """The machine's busy CPU seconds since boot, all cores together."""
    with open("/proc/stat", encoding="ascii") as fh:
        fields = [int(v) for v in fh.readline().split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


@attrs.define
class Busy:
    """``with Busy() as busy: ...``: the busy CPU seconds and the wall seconds of the block."""

    cpu_s: float = 0.0
    wall_s: float = 0.0
    _cpu0: float = 0.0
    _wall0: float = 0.0

    def __enter__(self) -> Busy:
        self._cpu0, self._wall0 = busy_s(), time.perf_counter()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.cpu_s, self.wall_s = busy_s() - self._cpu0, time.perf_counter() - self._wall0

    def figures(self, rows: int) -> dict[str, float]:
        """CPU microseconds a row, and how many cores were busy on average."""
        return {
            "cpu_us_per_row": round(self.cpu_s / rows * 1e6, 1),
            "cores_busy": round(self.cpu_s / self.wall_s, 2),
        }


PROCESS_KINDS = ("jvm", "reader", "python_workers", "driver", "database", "kafka_broker")
"""The parts :class:`ByProcess` splits the machine's CPU into (plus ``unattributed``)."""


def process_kind(pid: int, comm: str, cmdline: str) -> str | None:
    """Which part of a Spark pipeline a process is: Spark's JVMs, the ``canal`` source's reader (the process Spark
    runs a Python streaming source in), PySpark's Python workers (the daemon and the workers it forks: the mirror's
    tasks and the source's read tasks), this benchmark's process (the driver's Python), the database server or a
    Kafka broker (:class:`canal.testing.services.KafkaServer`'s JVM)."""
    if pid == os.getpid():
        return "driver"
    if comm == "java":
        return "kafka_broker" if " kafka.Kafka " in cmdline else "jvm"
    if comm in ("mariadbd", "mysqld"):
        return "database"
    if "python_streaming_source_runner" in cmdline:
        return "reader"
    if "pyspark.daemon" in cmdline or "pyspark.worker" in cmdline:
        return "python_workers"
    return None


def _process_cpu(hz: int, kinds: dict[tuple[int, int, str], str]) -> dict[tuple[int, int], tuple[str, float]]:
    """Every live process's kind (or "") and CPU seconds so far, by pid and start time (a pid is reused). ``kinds``
    keeps each process's kind by its name as well: its command line is read once a name, not at every sample (a
    process the JVM forks is named as the JVM until it runs the program it starts; an ended one, a zombie until
    reaped, keeps its name but has no command line left)."""
    found: dict[tuple[int, int], tuple[str, float]] = {}
    parents: dict[tuple[int, int], int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                stat = fh.read()
            comm = stat[stat.index("(") + 1 : stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2 :].split()
            process = (int(entry), int(fields[19]))  # pid, starttime
            kind = kinds.get((*process, comm))
            if kind is None:
                with open(f"/proc/{entry}/cmdline", "rb") as fb:
                    cmdline = fb.read().replace(b"\0", b" ").decode(errors="replace")
                kind = kinds[(*process, comm)] = process_kind(process[0], comm, cmdline) or ""
        except OSError:  # gone meanwhile
            continue
        found[process] = (kind, (int(fields[11]) + int(fields[12])) / hz)  # utime + stime
        parents[process] = int(fields[1])
    # only this process and those under it: the machine may run other work (its CPU is unattributed)
    by_pid = {process[0]: process for process in found}
    mine: dict[int, bool] = {os.getpid(): True}

    def under_me(pid: int) -> bool:
        chain = []
        while pid not in mine and pid in by_pid and len(chain) < 64:
            chain.append(pid)
            pid = parents[by_pid[pid]]
        verdict = mine.get(pid, False)
        for link in chain:
            mine[link] = verdict
        return verdict

    return {process: value for process, value in found.items() if under_me(process[0])}


class ByProcess:
    """``with ByProcess() as parts: ...``: the machine's busy CPU seconds of the block split by
    :data:`PROCESS_KINDS` -- of this process and the processes under it --, sampled from ``/proc`` every
    ``interval_s`` in a thread; the busy time no sample could attribute (a process that ended between two samples,
    kernel threads, other work on the machine) is ``unattributed``."""

    def __init__(self, interval_s: float = 0.2) -> None:
        import threading

        self._interval_s = interval_s
        self._hz = os.sysconf("SC_CLK_TCK")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-by-process", daemon=True)
        # (pid, start time) -> kind, CPU at its first sample, at its newest
        self._seen: dict[tuple[int, int], tuple[str, float, float]] = {}
        self._born_before: set[tuple[int, int]] = set()
        self._kinds: dict[tuple[int, int, str], str] = {}  # (pid, start time, name) -> kind (_process_cpu)
        self._busy = Busy()
        self.cpu_s: dict[str, float] = {}

    def _sample(self) -> None:
        for process, (kind, cpu) in _process_cpu(self._hz, self._kinds).items():
            first = self._seen.get(process)
            self._seen[process] = (kind, cpu if first is None else first[1], cpu)  # the kind its name now says

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            self._sample()

    def __enter__(self) -> ByProcess:
        self._busy.__enter__()
        # a process alive at the start counts from here; one born later from its birth (its first sample's CPU is
        # counted whole: a process seen first mid-block started in it)
        self._sample()
        self._born_before = set(self._seen)
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()
        self._busy.__exit__(kind, exc, tb)
        parts = dict.fromkeys(PROCESS_KINDS, 0.0)
        for process, (what, first, newest) in self._seen.items():
            if what:
                parts[what] += newest - first if process in self._born_before else newest
        parts = {k: round(v, 2) for k, v in parts.items()}
        parts["unattributed"] = round(max(self._busy.cpu_s - sum(parts.values()), 0.0), 2)
        self.cpu_s = parts

    @property
    def busy(self) -> Busy:
        """The machine's busy CPU and wall seconds of the block (:class:`Busy`)."""
        return self._busy
