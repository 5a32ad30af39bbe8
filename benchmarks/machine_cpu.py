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
