"""``foreachBatch`` for an instance embedded in the driver: pull, hand a DataFrame to ``fn``, ack after it returns.

:func:`run_batches` names each batch by the binlog position of its last entry (:func:`~canal.spark.changes.position_id`:
``journal_number << 32 | offset``), so ids increase and mean the same thing after a restart. With a ``journal``
file, the id of a batch is recorded before ``fn`` runs and cleared after the ack; after a crash between ``fn``'s write
and the ack, the instance redelivers from its acked cursor and the first batch is cut to end exactly at the recorded
position -- the same entries under the same id, which an idempotent sink (e.g.
:class:`~canal.spark.mirror.DeltaMirror`, which skips ids it has committed) recognises as already written.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from canal.errors import CanalError, SnapshotError
from canal.instance import Instance
from canal.protocol import EMPTY_MESSAGE_ID, Entry, EventType
from canal.spark.changes import CHANGE_SCHEMA_DDL, entries_to_batch, position_id


@attrs.define(slots=True)
class RunStats:
    """What :func:`run_batches` did."""

    batches: int = 0  # fn calls
    rows: int = 0  # change rows handed to fn
    entries: int = 0
    decode_s: float = 0.0  # waiting for / pulling entries and turning them into Arrow
    spark_s: float = 0.0  # building DataFrames
    fn_s: float = 0.0  # inside fn
    batch_ids: list[int] = attrs.field(factory=list)
    last_file: str | None = None  # binlog file of the last entry handled
    last_next_offset: int = 0  # offset just past the last entry handled (compare with SHOW MASTER STATUS)

    def reached(self, file: str, offset: int) -> bool:
        """Whether every event before ``file:offset`` was handled (and acked)."""
        from canal.position import journal_number

        if self.last_file is None:
            return False
        return (journal_number(self.last_file), self.last_next_offset) >= (journal_number(file), offset)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as fh:
        json.dump(data, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class _Puller:
    """Messages from the instance, consumed entry by entry; a message is acked once all its entries are done."""

    def __init__(self, instance: Instance, batch_size: int, timeout: float) -> None:
        self.instance = instance
        self.batch_size = batch_size
        self.timeout = timeout
        self.buffer: deque[list[Any]] = deque()  # [message id, remaining entries]

    def _fetch(self) -> bool:
        msg = self.instance.get_without_ack(self.batch_size, self.timeout)
        if msg.id == EMPTY_MESSAGE_ID:
            return False
        self.buffer.append([msg.id, list(msg.entries)])
        return True

    def take(self, until_id: int | None, deadline: float | None) -> tuple[list[Entry], list[int]]:
        """Entries for one batch and the message ids to ack after it; empty when nothing arrived in time."""
        if not self.buffer and not self._fetch():
            return [], []
        entries: list[Entry]
        ids: list[int]
        if until_id is not None and position_id(self.buffer[0][1][0]) > until_id:
            until_id = None  # the recorded batch was acked before the crash: nothing to cut
        if until_id is None:
            entries = [e for _mid, rest in self.buffer for e in rest]
            ids = [mid for mid, _rest in self.buffer]
            self.buffer.clear()
            return entries, ids
        # cut at until_id: fetch until an entry at or past it is buffered
        while position_id(self.buffer[-1][1][-1]) < until_id:
            if deadline is not None and time.monotonic() > deadline:
                break
            self._fetch()
        entries = []
        ids = []
        while self.buffer:
            mid, rest = self.buffer[0]
            cut = len(rest)
            for i, entry in enumerate(rest):
                if position_id(entry) > until_id:
                    cut = i
                    break
            entries.extend(rest[:cut])
            if cut < len(rest):
                self.buffer[0][1] = rest[cut:]
                break
            ids.append(mid)
            self.buffer.popleft()
        return entries, ids

    def ack(self, ids: list[int]) -> None:
        for mid in ids:
            self.instance.ack(mid)


class JournalError(CanalError):
    """The ``run_batches`` journal cannot be read: the batch in flight before a crash is unknown, so the first batch
    cannot be guaranteed identical to it. Nothing was consumed; fix or remove the file (losing that guarantee)."""


def _read_journal(path: Path) -> int | None:
    """The id of the batch that was in flight when the last run stopped, None when there was none."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise JournalError(f"cannot read the run_batches journal {path}: {exc}") from exc
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise JournalError(f"the run_batches journal {path} is not JSON ({exc}): {text[:80]!r}") from None
    if isinstance(document, dict) and len(document) == 1:
        ((state, batch_id),) = document.items()
        if state in ("pending", "done") and isinstance(batch_id, int) and not isinstance(batch_id, bool):
            return batch_id if state == "pending" else None
    raise JournalError(
        f'the run_batches journal {path} holds {text[:80]!r}; expected {{"pending": id}} or {{"done": id}}'
    )


def run_batches(
    instance: Instance,
    spark: Any,
    fn: Callable[[Any, int], Any],
    *,
    batch_size: int = 4096,
    timeout: float = 1.0,
    journal: str | os.PathLike[str] | None = None,
    max_batches: int | None = None,
    stop: threading.Event | None = None,
    idle_stop_s: float | None = None,
    until: Callable[[RunStats], bool] | None = None,
) -> RunStats:
    """Pull batches from a started ``instance`` and call ``fn(df, batch_id)`` with each; ack after ``fn`` returns.

    ``df`` has the change-row schema (:data:`~canal.spark.changes.CHANGE_SCHEMA_DDL`); batches without change rows
    (only transaction boundaries or heartbeats) are acked without calling ``fn``. An exception from ``fn`` leaves
    the batch unacked and propagates (the instance redelivers it after :meth:`Instance.rollback` or a restart).
    Stops after ``max_batches`` calls, when ``stop`` is set, when ``until(stats)`` is true, or after ``idle_stop_s``
    seconds without data. ``journal`` (a file path) makes the first batch after a crash identical to the one that was
    in flight (see the module docstring). Snapshot rows raise :class:`~canal.errors.SnapshotError` before ``fn``
    sees them (nothing is acked): batch ids are binlog positions, which snapshot rows do not have of their own.
    """
    stats = RunStats()
    puller = _Puller(instance, batch_size, timeout)
    journal_path = None if journal is None else Path(journal)
    pending: int | None = None
    if journal_path is not None:
        pending = _read_journal(journal_path)
    idle_since = time.monotonic()
    destination = instance.destination
    while True:
        if stop is not None and stop.is_set():
            break
        if until is not None and until(stats):
            break
        if max_batches is not None and stats.batches >= max_batches:
            break
        began = time.perf_counter()
        deadline = None if pending is None else time.monotonic() + 30.0
        entries, ack_ids = puller.take(pending, deadline)
        if not entries and not ack_ids:
            stats.decode_s += time.perf_counter() - began
            if idle_stop_s is not None and time.monotonic() - idle_since > idle_stop_s:
                break
            continue
        idle_since = time.monotonic()
        pending = None
        if any(e.header.event_type is EventType.SNAPSHOT for e in entries):
            # batch ids are binlog positions, and snapshot rows sit at the boundary they follow: a batch of them would
            # share its id with the batch before it, and an idempotent sink would skip it as already written
            raise SnapshotError(
                "run_batches cannot name batches that hold snapshot rows (they share their binlog position with the "
                "batch before them): read a destination that snapshots through the canal streaming source"
            )
        stats.entries += len(entries)
        batch_id = position_id(entries[-1])
        rows = entries_to_batch(entries, destination, 0)
        decoded = time.perf_counter()
        stats.decode_s += decoded - began
        if rows.num_rows:
            import pyarrow as pa

            df = spark.createDataFrame(pa.Table.from_batches([rows]), schema=CHANGE_SCHEMA_DDL)
            built = time.perf_counter()
            stats.spark_s += built - decoded
            if journal_path is not None:
                _write_json(journal_path, {"pending": batch_id})
            fn(df, batch_id)
            stats.fn_s += time.perf_counter() - built
            stats.batches += 1
            stats.rows += rows.num_rows
            stats.batch_ids.append(batch_id)
        puller.ack(ack_ids)
        last = entries[-1].header
        stats.last_file, stats.last_next_offset = last.log_file, last.next_offset
        if journal_path is not None and rows.num_rows:
            _write_json(journal_path, {"done": batch_id})
    return stats
