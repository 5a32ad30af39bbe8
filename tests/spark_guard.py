"""A Spark test that runs out of time fails alone, with thread dumps, instead of taking its worker's SparkSession with
it.

pytest-timeout ends a test by raising in its main thread wherever it is -- usually inside a py4j call waiting on a
Spark job. That breaks the py4j connection (``... does not exist in the JVM``), and every later Spark test of the
worker fails too. :class:`SparkJobGuard` acts first, shortly before the test's timeout: it writes the stacks of this
process's Python threads and of the JVM's threads (``jstack``, or SIGQUIT: the JVM prints them to the stdout it
shares with pytest) to stderr, then cancels the session's jobs (and any the test starts afterwards), so the waiting
call returns with a cancelled-job error and the test fails with a message that says why.
"""

from __future__ import annotations

import faulthandler
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import Any

CANCEL_EVERY_S = 1.0
"""How often jobs are cancelled again once the guard has fired (a test may start new ones after the first cancel)."""


def guard_deadline(timeout_s: float) -> float:
    """Seconds into a test at which its guard fires: before pytest-timeout's ``timeout_s``, leaving time for the dumps
    and the cancelled jobs' unwinding."""
    return max(timeout_s * 0.8, timeout_s - 45.0)


class SparkJobGuard:
    """Cancels ``spark``'s jobs once ``deadline`` s have passed since ``started`` (``time.monotonic()``, when the
    test's time began), after dumping thread stacks; until :meth:`close`."""

    def __init__(self, spark: Any, started: float, deadline: float, test: str) -> None:
        self.spark = spark
        self.test = test
        self.fired_after_s: float | None = None  # seconds into the test
        self._began = started
        self._closed = threading.Event()
        self._thread = threading.Thread(
            target=self._watch, args=(started + deadline,), name="spark-job-guard", daemon=True
        )
        self._thread.start()

    def _watch(self, deadline: float) -> None:
        if self._closed.wait(max(0.0, deadline - time.monotonic())):
            return
        self.fired_after_s = time.monotonic() - self._began
        sys.stderr.write(
            f"\n== spark-job-guard: {self.test} still runs after {self.fired_after_s:.0f} s: thread dumps, then its "
            "Spark jobs are cancelled ==\n"
        )
        sys.stderr.flush()
        faulthandler.dump_traceback(sys.stderr, all_threads=True)
        self._dump_jvm()
        while True:
            try:
                self.spark.sparkContext.cancelAllJobs()
            except Exception as exc:  # the session itself is broken: nothing left to cancel
                sys.stderr.write(f"spark-job-guard: cancelling failed: {type(exc).__name__}: {exc}\n")
                return
            if self._closed.wait(CANCEL_EVERY_S):
                return

    @staticmethod
    def _dump_jvm() -> None:
        from pyspark import SparkContext

        gateway = SparkContext._gateway
        proc = getattr(gateway, "proc", None)
        if proc is None:
            return
        jstack = shutil.which("jstack")
        if jstack is not None:
            done = subprocess.run([jstack, str(proc.pid)], capture_output=True, text=True, timeout=60, check=False)
            sys.stderr.write(done.stdout + done.stderr)
        else:
            os.kill(proc.pid, signal.SIGQUIT)
        sys.stderr.flush()

    def close(self) -> None:
        self._closed.set()
        self._thread.join(30)
