"""Persisted meta survives SIGKILL: a child process updates cursors continuously while its manager flushes them;
the parent kills it between flushes (or at any moment) and reads back exactly what was flushed last.

The child reports every flush on stdout (the flushed document) and, in handshake mode, waits for the parent's "go"
before continuing, so the parent knows precisely which state was flushed last and that newer, unflushed cursors
existed in the child's memory when it was killed. No sleeps: the parent awaits the child's lines.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from canal.client import ClientIdentity
from canal.meta import DestinationSnapshot, FileMetaManager, ZooKeeperMetaManager, read_json
from canal.position import LogPosition

CHILD = r"""
import faulthandler, json, signal, sys, threading, time
faulthandler.register(signal.SIGUSR1)
from canal.client import ClientIdentity
from canal.meta import DestinationSnapshot, FileMetaManager, PeriodMixedMetaManager, ZooKeeperMetaManager
from canal.position import EntryPosition, LogIdentity, LogPosition

kind, target, mode, period = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
out = threading.Lock()
flushes = [0]

def emit(**event):
    with out:
        sys.stdout.write(json.dumps(event, sort_keys=True) + "\n")
        sys.stdout.flush()

def on_flush(snapshot):
    emit(event="flushed", doc=snapshot.to_dict())
    flushes[0] += 1  # after the line is out: "updated" always follows its "flushed"
    if mode == "handshake" and sys.stdin.readline().strip() != "go":
        sys.exit(3)

def position(i):
    return LogPosition(LogIdentity("127.0.0.1:3306", 5),
                       EntryPosition("mysql-bin.%06d" % (1 + i // 100), 4 + i, 1700000000000 + i, 1, None, True),
                       i % 3)

if kind == "zk":  # writes through: every update is a flush
    mgr = ZooKeeperMetaManager(target)
    mgr.start()
    clients = [ClientIdentity("example", 1001, "shop\\..*"), ClientIdentity("example", 1002)]
    for client in clients:
        mgr.subscribe(client)
    i = 0
    while True:
        i += 1
        cursors = {1001: position(i), 1002: position(i // 2)}
        for client in clients:
            mgr.update_cursor(client, cursors[client.client_id])
        on_flush(DestinationSnapshot("example", tuple(clients), cursors))
elif kind == "file":
    class Tracing(FileMetaManager):
        def _write(self, snapshot, previous):
            emit(event="writing", doc=snapshot.to_dict())
            super()._write(snapshot, previous)
    mgr = Tracing(target, flush_period_s=period, on_flush=on_flush)
else:
    class Tracing(PeriodMixedMetaManager):
        def _write(self, snapshot, previous):
            emit(event="writing", doc=snapshot.to_dict())
            super()._write(snapshot, previous)
    mgr = Tracing(ZooKeeperMetaManager(target), flush_period_s=period, on_flush=on_flush)

mgr.start()
clients = [ClientIdentity("example", 1001, "shop\\..*"), ClientIdentity("example", 1002)]
for client in clients:
    mgr.subscribe(client)
seen, i = flushes[0], 0
while True:
    i += 1
    changed, seen = flushes[0] != seen, flushes[0]  # read before this update: the flush snapshot is older
    mgr.update_cursor(clients[0], position(i))
    mgr.update_cursor(clients[1], position(i // 2))
    if changed:
        emit(event="updated", i=i)
    time.sleep(0.0002)  # pacing only: keeps the loop from starving the flusher thread
"""


class Child:
    def __init__(self, kind: str, target: str, mode: str, period: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, kind, target, mode, str(period)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert self.proc.stdout is not None
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.proc.stdout, selectors.EVENT_READ)
        self.events: list[dict[str, Any]] = []
        self.buffer = b""

    def next_event(self, timeout: float = 30.0) -> dict[str, Any]:
        """The child's next stdout line as an event (raw reads: select() and a buffered reader do not mix)."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self.selector.select(remaining):
                os.kill(self.proc.pid, signal.SIGUSR1)  # the child dumps its threads' stacks to stderr
                raise AssertionError(f"child sent nothing for {timeout}s after {self.events[-3:]}")
            chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
            if not chunk:
                raise AssertionError(f"child exited ({self.proc.wait(timeout=30)}); stderr: {self.stderr()}")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        event: dict[str, Any] = json.loads(line)
        self.events.append(event)
        return event

    def until(self, name: str) -> dict[str, Any]:
        while True:
            event = self.next_event()
            if event["event"] == name:
                return event

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.flush()

    def kill(self) -> list[dict[str, Any]]:
        """SIGKILL, reap, and return every event the child had written before dying."""
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        assert self.proc.returncode == -signal.SIGKILL
        assert self.proc.stdout is not None
        rest = self.buffer + self.proc.stdout.read()
        self.buffer = b""
        self.events.extend(json.loads(line) for line in rest.splitlines() if line.strip())
        return self.events

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return "(running)"
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode("utf-8", "replace")[-2000:]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        self.selector.close()


def cursor_index(doc: dict[str, Any]) -> int:
    cursors = [d["cursor"] for d in doc["clientDatas"] if d["clientIdentity"]["clientId"] == 1001]
    return -1 if not cursors or cursors[0] is None else LogPosition.from_dict(cursors[0]).position.position or -1


def kill_between_flushes(kind: str, target: str, acked_flushes: int = 5) -> dict[str, Any]:
    """Let the child flush ``acked_flushes`` times, kill it while it is blocked after the next flush (with newer
    cursors in memory, unless it writes through); return the last flushed document."""
    child = Child(kind, target, "handshake", 0.01)
    try:
        flushed = 0
        while True:
            event = child.until("flushed")
            flushed += 1
            if flushed > acked_flushes and cursor_index(event["doc"]) > 0:
                break
            child.go()
        last = event["doc"]
        if kind != "zk":
            # the child keeps updating memory while its flusher waits for us: newer, unflushed cursors exist
            updated = child.until("updated")
            assert 4 + updated["i"] > cursor_index(last)
        child.kill()
        return last
    finally:
        child.close()


def kill_anywhere(kind: str, target: str, flushes: int = 30) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Let the child flush freely and kill it at once after ``flushes`` flushes, mid-write or not; return the
    documents it had started writing and those it had finished, in order."""
    child = Child(kind, target, "free", 0.001)
    try:
        seen = 0
        while seen < flushes:
            if child.until("flushed"):
                seen += 1
        events = child.kill()
    finally:
        child.close()
    writing = [e["doc"] for e in events if e["event"] == "writing"]
    written = [e["doc"] for e in events if e["event"] == "flushed"]
    return writing, written


def test_file_meta_holds_the_last_flush_after_sigkill(tmp_path: Path) -> None:
    last = kill_between_flushes("file", str(tmp_path))
    path = tmp_path / "example" / "meta.dat"
    assert read_json(path) == last
    with FileMetaManager(tmp_path, flush_period_s=None) as mgr:
        snapshot = DestinationSnapshot.from_dict(last)
        assert [(c.client_id, c.filter) for c in mgr.list_all_subscribe_info("example")] == [
            (1001, r"shop\..*"),
            (1002, ""),
        ]
        for client in mgr.list_all_subscribe_info("example"):
            assert mgr.get_cursor(client) == snapshot.cursor_of(client.client_id)


def test_file_meta_is_never_corrupt_whenever_killed(tmp_path: Path) -> None:
    for _round in range(3):
        writing, written = kill_anywhere("file", str(tmp_path))
        on_disk = read_json(tmp_path / "example" / "meta.dat")  # parses: not corrupt
        # the file holds the last finished write, or the one in flight when the kill came
        assert on_disk == written[-1] or (on_disk in writing and writing.index(on_disk) >= len(written) - 1)
        assert cursor_index(on_disk) >= cursor_index(written[-1])
        with FileMetaManager(tmp_path, flush_period_s=None) as mgr:
            got = mgr.get_cursor(ClientIdentity("example"))
            assert got == DestinationSnapshot.from_dict(on_disk).cursor_of(1001)
        assert os.listdir(tmp_path / "example") == ["meta.dat"]  # a killed write's temp file is cleaned up


def _zk_cursors(hosts: str) -> dict[int, LogPosition | None]:
    with ZooKeeperMetaManager(hosts) as zk:
        return {c.client_id: zk.get_cursor(c) for c in zk.list_all_subscribe_info("example")}


@pytest.mark.integration
def test_period_mixed_meta_holds_the_last_flush_after_sigkill(zookeeper: Any) -> None:
    last = kill_between_flushes("period", zookeeper.hosts)
    snapshot = DestinationSnapshot.from_dict(last)
    assert _zk_cursors(zookeeper.hosts) == {1001: snapshot.cursor_of(1001), 1002: snapshot.cursor_of(1002)}
    with ZooKeeperMetaManager(zookeeper.hosts) as zk:
        assert zk.list_all_subscribe_info("example")[0].filter == r"shop\..*"


@pytest.mark.integration
def test_zookeeper_meta_holds_the_last_write_after_sigkill(zookeeper: Any) -> None:
    last = kill_between_flushes("zk", zookeeper.hosts)
    snapshot = DestinationSnapshot.from_dict(last)
    assert _zk_cursors(zookeeper.hosts) == {1001: snapshot.cursor_of(1001), 1002: snapshot.cursor_of(1002)}


@pytest.mark.integration
def test_period_mixed_meta_is_consistent_whenever_killed(zookeeper: Any) -> None:
    writing, written = kill_anywhere("period", zookeeper.hosts, flushes=20)
    got = _zk_cursors(zookeeper.hosts)
    candidates = [DestinationSnapshot.from_dict(d) for d in [written[-1], *writing[len(written) - 1 :]]]
    # each cursor is the one of the last finished flush or of the flush in flight (cursor writes are per client)
    for client_id in (1001, 1002):
        assert got[client_id] in [s.cursor_of(client_id) for s in candidates]
