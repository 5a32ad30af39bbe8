"""Parent-side helpers for HA process tests and the failover benchmark: run ``tests.procs.ha_consumer`` children,
read their stdout on a thread each, await lines with deadlines, kill and reap them, parse their logs."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from canal.testing.services import process_state

ROOT = Path(__file__).resolve().parent.parent.parent


class Child:
    """One child process running ``module`` (by default ``tests.procs.ha_consumer``) with ``args`` as JSON; every
    stdout line lands in ``lines`` (and the shared ``events``)."""

    def __init__(
        self,
        name: str,
        args: dict[str, Any],
        events: queue.Queue[tuple[str, str]] | None = None,
        module: str = "tests.procs.ha_consumer",
    ) -> None:
        self.name = name
        self.args = args
        self.lines: queue.Queue[str] = queue.Queue()
        self._events = events
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, json.dumps(args)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=str(ROOT),
        )
        self.killed_at: float | None = None
        self._reader = threading.Thread(target=self._read, name=f"read-{name}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            self.lines.put(line)
            if self._events is not None:
                self._events.put((self.name, line))

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        """Running or stopped, not a zombie (from /proc, not ``kill -0``)."""
        return process_state(self.pid) not in (None, "Z", "X", "x")

    def expect(self, predicate: Callable[[str], bool], timeout: float, what: str = "") -> str:
        """The next stdout line satisfying ``predicate`` (others are dropped); fails after ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{self.name}: no line {what!r} within {timeout}s")
            try:
                line = self.lines.get(timeout=min(left, 0.5))
            except queue.Empty:
                if not self.alive() and self.lines.empty():
                    raise AssertionError(f"{self.name} exited (rc {self.proc.poll()}) waiting for {what!r}") from None
                continue
            if predicate(line):
                return line

    def command(self, cmd: str, timeout: float = 30.0) -> str:
        """script mode: send one command, return its one answer line."""
        self.send(cmd)
        return self.expect(lambda line: True, timeout, f"answer to {cmd}")

    def send(self, cmd: str) -> None:
        """script mode: send one command without waiting for its answer (read it later with :meth:`expect`)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def kill(self) -> float:
        """SIGKILL and reap; returns the monotonic time the signal was sent."""
        now = time.monotonic()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.killed_at = now
        self.proc.wait(30)
        return now


class Runs:
    """Consecutive runs of one consumer ``module`` (a kill test restarts it after each kill): run ``n`` is the child
    ``run<n>`` with ``base`` plus its ``phase`` and its own log file ``root/run<n>.log`` as arguments."""

    def __init__(self, module: str, base: dict[str, Any], root: Path, events: queue.Queue[tuple[str, str]]) -> None:
        self.module, self.base, self.root, self.events = module, base, root, events
        self.children: list[Child] = []
        self.logs: list[Path] = []

    def run(self, phase: str | None) -> Child:
        name = f"run{len(self.children)}"
        log = self.root / f"{name}.log"
        self.logs.append(log)
        child = Child(name, {**self.base, "phase": phase, "log": str(log)}, self.events, module=self.module)
        self.children.append(child)
        return child


def next_event(
    events: queue.Queue[tuple[str, str]], pred: Callable[[str, str], bool], timeout: float, what: str
) -> tuple[str, str]:
    """The next ``(child name, stdout line)`` on the shared ``events`` queue that satisfies ``pred`` (the others are
    dropped); fails after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        assert left > 0, f"no {what} within {timeout}s"
        try:
            name, line = events.get(timeout=left)
        except queue.Empty:
            continue
        if pred(name, line):
            return name, line


def kill_all(children: list[Child]) -> None:
    for child in children:
        try:
            child.signal(signal.SIGCONT)
            child.kill()
        except Exception:  # keep killing the others
            pass
        for stream in (child.proc.stdin, child.proc.stdout):
            try:
                if stream is not None:
                    stream.close()
            except Exception:
                pass


@attrs.define
class ConsumerLog:
    """One loop-mode child's log, parsed."""

    name: str
    serving: list[tuple[int, float]] = attrs.field(factory=list)  # (token, t) of S lines
    ended: list[tuple[int, float]] = attrs.field(factory=list)  # (token, t) of E lines
    delivered: list[tuple[int, int | None, float, list[int]]] = attrs.field(factory=list)  # (batch, token, t, ids)
    acked: list[tuple[int, int, float, float]] = attrs.field(factory=list)  # (batch, token, t0, t1)
    failed: list[tuple[int, int | None, str]] = attrs.field(factory=list)  # (batch, token, error class)

    @classmethod
    def parse(cls, name: str, path: Path) -> ConsumerLog:
        out = cls(name)
        if not path.exists():
            return out
        # only whole lines: the last one may be torn -- still being written by a live process, or cut by a SIGKILL
        for line in path.read_text().split("\n")[:-1]:
            kind, *rest = line.split()
            if kind == "S":
                out.serving.append((int(rest[0]), float(rest[1])))
            elif kind == "E":
                out.ended.append((int(rest[0]), float(rest[1])))
            elif kind == "D":
                token = None if rest[1] == "-" else int(rest[1])
                out.delivered.append((int(rest[0]), token, float(rest[2]), [int(x) for x in rest[3:]]))
            elif kind == "A":
                out.acked.append((int(rest[0]), int(rest[1]), float(rest[2]), float(rest[3])))
            elif kind == "F":
                out.failed.append((int(rest[0]), None if rest[1] == "None" else int(rest[1]), rest[2]))
        return out
