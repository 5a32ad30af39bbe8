"""SIGKILL a consumer process (file meta) at each phase of a snapshot while writers change the table: before a chunk's
read starts, after its read before it joins the stream, while the consumer holds snapshot rows it has not acked, and
between chunks (with DBLog's watermarks, also between a read's two marks). Every restart resumes the snapshot from the
cursor; the consumer's mirror ends equal to the source and no acked row (snapshot or binlog) is ever delivered again."""

from __future__ import annotations

import json
import queue
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from procs.ha_harness import Child, Runs, kill_all
from test_snapshot_marks import create_watermark_table
from test_snapshot_stream import Writers, _load, _select

from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration

PHASES = ("before_read", "after_read", "before_ack", "between_chunks")
MARKED_PHASES = ("before_read", "between_marks", "after_read", "before_ack", "between_chunks")


def _batches(path: Path) -> Iterator[tuple[int, list[list[Any]], bool]]:
    """(batch id, rows, acked) of one run's log, in delivery order."""
    if not path.exists():
        return
    delivered: dict[int, list[list[Any]]] = {}
    acked: set[int] = set()
    # only whole lines: the last one may be torn -- still being written by the live run, or cut by a SIGKILL
    for line in path.read_text().split("\n")[:-1]:
        kind, batch, *rest = line.split(" ", 2)
        if kind == "D":
            delivered[int(batch)] = json.loads(rest[0])
        elif kind == "A":
            acked.add(int(batch))
    for batch, rows in delivered.items():
        yield batch, rows, batch in acked


@pytest.mark.parametrize("watermarks", [False, True], ids=["snapshot_position", "watermarks"])
def test_sigkill_at_each_phase_of_a_snapshot(mariadb: MariaDBDatabase, tmp_path: Path, watermarks: bool) -> None:
    """At MariaDB's snapshot position, or between DBLog's watermarks (then also killed between a read's two
    marks)."""
    _load(mariadb)  # k: 3000 rows, read in chunks of 100; other: filled by the writers from now on
    db = mariadb.database
    if watermarks:
        create_watermark_table(mariadb)
    events: queue.Queue[tuple[str, str]] = queue.Queue()
    base = {
        "address": mariadb.address,
        "user": mariadb.user,
        "password": mariadb.password,
        "database": db,
        "meta_dir": str(tmp_path / "meta"),
        "chunk_rows": 100,
        "at": 2,
        "watermark_table": f"{db}.canal_marks" if watermarks else None,
    }
    processes = Runs("tests.procs.snapshot_consumer", base, tmp_path, events)
    children, logs, run = processes.children, processes.logs, processes.run

    def await_line(child: Child, want: str, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"{child.name}: no {want!r} within {timeout}s"
            try:
                name, line = events.get(timeout=min(left, 0.5))
            except queue.Empty:
                assert child.alive(), f"{child.name} exited (rc {child.proc.poll()})"
                continue
            if name != child.name:
                continue
            assert line != "S" or want == "S", f"{child.name}: the snapshot finished before {want!r}"
            if line == want:
                return

    try:
        with Writers(mariadb, seed=11) as writers:
            for phase in MARKED_PHASES if watermarks else PHASES:
                child = run(phase)
                await_line(child, f"P {phase}")
                child.kill()
            last = run(None)
            await_line(last, "S", timeout=180)  # the snapshot is finished in the cursor
            assert writers.writes > 50
        mariadb.execute("INSERT INTO other VALUES (NULL, -1)")  # a marker: all writes before it are delivered
        deadline = time.monotonic() + 60
        while not any(
            row[1] == "other" and row[3] is not None and row[3][1] == -1
            for _, rows, _ in _batches(logs[-1])
            for row in rows
        ):
            assert time.monotonic() < deadline, "the marker row did not arrive"
            time.sleep(0.2)
    finally:
        kill_all(children)

    mirror: dict[str, dict[tuple[Any, ...], tuple[Any, ...]]] = {}
    acked_snapshot: set[tuple[str, tuple[Any, ...]]] = set()
    acked_events: set[tuple[Any, ...]] = set()
    redelivered_snapshot_rows = 0
    held: set[tuple[str, tuple[Any, ...]]] = set()  # snapshot rows delivered and never acked (killed holding them)
    for path in logs:
        for _batch, rows, acked in _batches(path):
            for kind, table, key, after, event in rows:
                identity = (table, tuple(key))
                if kind == "SNAPSHOT":
                    assert identity not in acked_snapshot, f"acked snapshot row {identity} delivered again"
                    redelivered_snapshot_rows += identity in held
                    held.discard(identity)
                    if acked:
                        acked_snapshot.add(identity)
                    else:
                        held.add(identity)
                else:
                    ev = (kind, *event)
                    assert ev not in acked_events, f"acked change {ev} delivered again"
                    if acked:
                        acked_events.add(ev)
                rows_of = mirror.setdefault(table, {})
                if kind == "DELETE":
                    rows_of.pop(tuple(key), None)
                else:
                    rows_of[tuple(key)] = tuple(after)
    # the kill holding unacked snapshot rows had them delivered again after the restart
    assert redelivered_snapshot_rows > 0
    assert len(acked_snapshot) > 2000  # most of k came through the snapshot, across five runs
    assert mirror["k"] == _select(mariadb, "k", 1)
    assert mirror["other"] == _select(mariadb, "other", 1)
    assert "canal_marks" not in mirror  # captured by the filter, but watermarks are never handed off
