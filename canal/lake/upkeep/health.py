"""How a mirror is doing, and its faults typed: failing folds counted and surfaced, storage errors as MirrorErrors.

A fold runs in the background, after the batch that made it due was acked: its failure cannot fail that batch. Left
at a warning, a log that cannot be folded (a damaged file) grows behind batches acked as healthy. So
:class:`FoldHealth` counts each table's failed folds in a row: :meth:`DeltaMirror.metrics` shows them, and once a
table's reach ``max_fold_failures`` the next batch is refused with :class:`~canal.lake.types.MirrorFoldError`
(nothing of it written) until a fold of the table succeeds -- ``DeltaMirror.fold()`` folds in the caller's thread,
raising what stops it. A fold that lost a commit race (:class:`~canal.lake.store.changelog.FoldRaceError`) did no harm
and counts as neither.

Storage errors become :class:`~canal.lake.types.MirrorStorageError` in :mod:`canal.lake.store.errors`.

:class:`MirrorCounters` counts what the batches handed to a mirror object did -- in the process that hands them over:
the embedded :func:`~canal.spark.run_batches` process, the Spark driver under ``foreachBatch`` (with
``on_executors``, the tasks' answers are counted there) -- for :meth:`DeltaMirror.metrics` and the exporter
(:mod:`canal.lake.metrics`): batches and change rows, the newest binlog position applied and its execute time, and
the batches that stopped, by error class. :func:`monitored` wraps the mirror's entry points: a batch is counted once,
by the outermost of them (``__call__`` applies through ``apply``).
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import attrs

from canal.lake.identity.applied import position_key
from canal.lake.store.errors import ERROR_CHARS
from canal.lake.types import MirrorFoldError

F = TypeVar("F", bound=Callable[..., Any])


@attrs.frozen(slots=True)
class MirrorMetrics:
    """What :meth:`canal.spark.DeltaMirror.metrics` reports."""

    batches: int  # batches that applied something, handed to this mirror object (tasks' included: on_executors)
    folds: int  # folds this mirror did (not those Spark tasks do: on_executors)
    fold_failures: int  # folds (and log compactions) that failed, in this process
    failing_folds: dict[str, int]  # ``schema.table`` -> its folds failed in a row (absent once one succeeds)
    last_fold_error: str | None
    staged_tables: int  # tables holding staged parts
    staged_rows: int
    staged_bytes: int  # the staged parts held in memory (bounded by ``stage_bytes`` after each batch)
    rows: int = 0  # change rows of those batches
    applied_log_file: str | None = None  # the binlog file of the newest change applied (None: no position yet)
    applied_log_offset: int | None = None  # its offset
    delay_ms: int | None = None  # now minus the execute time of the newest change applied (None: none yet)
    stops: dict[str, int] = attrs.field(factory=dict)  # batches that failed, by error class (typed: MirrorError's)
    heals: int = 0  # tables read again in the stream where the server changed rows it did not log
    destination: str | None = None  # the destination of the changes applied (None: no batch named one yet)


def mirror_metrics(batches: int, health: FoldHealth, parts: Any) -> MirrorMetrics:
    """The metrics of a mirror that applied ``batches``, whose folds' health is ``health`` and which holds the staged
    parts ``parts`` (None: none loaded)."""
    with health.lock:
        failures, last = health.failures, health.last_error
    return MirrorMetrics(
        batches=batches,
        folds=health.done,
        fold_failures=failures,
        failing_folds=health.by_name(lambda path: Path(path).name),
        last_fold_error=last,
        staged_tables=0 if parts is None else len(parts.tables),
        staged_rows=0 if parts is None else parts.rows,
        staged_bytes=0 if parts is None else parts.bytes,
    )


@attrs.define(slots=True)
class FoldHealth:
    """Failed folds per table (base path -> in a row), counted by the fold threads."""

    limit: int
    failing: dict[str, int] = attrs.field(factory=dict)
    failures: int = 0
    done: int = 0
    last_error: str | None = None
    lock: threading.Lock = attrs.field(factory=threading.Lock)

    def failed(self, paths: list[str], error: BaseException) -> None:
        with self.lock:
            self.failures += 1
            self.last_error = f"{type(error).__name__}: {str(error)[:ERROR_CHARS]}"
            for path in paths:
                self.failing[path] = self.failing.get(path, 0) + 1

    def succeeded(self, paths: list[str], *, folded: bool = True) -> None:
        """The tables' folds (or, not ``folded``, other upkeep of their logs: compactions, Spark jobs that fold in
        other processes) succeeded: their failures in a row end."""
        with self.lock:
            self.done += 1 if folded else 0
            for path in paths:
                self.failing.pop(path, None)

    def by_name(self, name: Callable[[str], str]) -> dict[str, int]:
        with self.lock:
            return {name(path): count for path, count in self.failing.items()}

    def check(self, name: Callable[[str], str]) -> None:
        """:class:`MirrorFoldError` when a table's folds failed ``limit`` times in a row."""
        with self.lock:
            stuck = {name(path): count for path, count in self.failing.items() if count >= self.limit}
            last = self.last_error
        if stuck:
            tables = ", ".join(f"{table} ({count} in a row)" for table, count in sorted(stuck.items()))
            raise MirrorFoldError(
                f"the folds of {tables} failed, the last with {last}; no batch is applied until a fold of each "
                "succeeds (DeltaMirror.fold(schema, table) folds now and raises what stops it)"
            )


@attrs.define(slots=True)
class MirrorCounters:
    """What the batches handed to one mirror object did (module docstring); thread-safe."""

    batches: int = 0  # batches that applied something
    rows: int = 0  # change rows of those batches
    log_file: str | None = None  # the newest binlog position applied
    log_offset: int = 0
    newest_time_ms: int | None = None  # the newest execute time among the changes applied
    stops: dict[str, int] = attrs.field(factory=dict)  # error class name -> batches that failed with it
    heals: int = 0
    destination: str | None = None  # the destination of the changes applied (the last batch that named one)
    lock: threading.Lock = attrs.field(factory=threading.Lock)
    depth: threading.local = attrs.field(factory=threading.local)  # entry points under way in each thread

    def finished(self, result: Any) -> None:
        """A batch ended: ``result`` is its :class:`~canal.lake.results.ApplyResult`."""
        with self.lock:
            if "applied" in result.tables.values():  # a replay, skipped, counts neither
                self.batches += 1
                self.rows += result.rows
            newest = result.newest
            if newest is not None and (
                self.log_file is None or position_key(*newest) > position_key(self.log_file, self.log_offset)
            ):
                self.log_file, self.log_offset = newest
            when = result.newest_time_ms
            if when is not None and (self.newest_time_ms is None or when > self.newest_time_ms):
                self.newest_time_ms = when
            if result.destination is not None:
                self.destination = result.destination

    def stopped(self, error: BaseException) -> None:
        """A batch failed with ``error`` (nothing of it, or of its remaining steps, applied)."""
        with self.lock:
            name = type(error).__name__
            self.stops[name] = self.stops.get(name, 0) + 1

    def healed(self) -> None:
        """A table was read again in the stream (the mirror heals where the server changed rows it did not log)."""
        with self.lock:
            self.heals += 1

    def metrics(self, health: FoldHealth, staged: Any) -> MirrorMetrics:
        """The mirror's :class:`MirrorMetrics`: these counters, its folds' ``health`` and its ``staged`` parts."""
        with health.lock:
            folds, failures, last = health.done, health.failures, health.last_error
        failing = health.by_name(lambda path: Path(path).name)
        with self.lock:
            now_ms = int(time.time() * 1000)
            return MirrorMetrics(
                batches=self.batches,
                folds=folds,
                fold_failures=failures,
                failing_folds=failing,
                last_fold_error=last,
                staged_tables=0 if staged is None else len(staged.tables),
                staged_rows=0 if staged is None else staged.rows,
                staged_bytes=0 if staged is None else staged.bytes,
                rows=self.rows,
                applied_log_file=self.log_file,
                applied_log_offset=None if self.log_file is None else self.log_offset,
                delay_ms=None if self.newest_time_ms is None else max(0, now_ms - self.newest_time_ms),
                stops=dict(self.stops),
                heals=self.heals,
                destination=self.destination,
            )


def monitored(method: F) -> F:
    """An entry point of a mirror (an object with ``counters``, a :class:`MirrorCounters`) whose batches are counted:
    the result it returns (an :class:`~canal.lake.results.ApplyResult`), or the error it raises. Only the outermost
    entry point under way in a thread counts: one that calls another counts the batch once."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        counters: MirrorCounters = self.counters
        depth = getattr(counters.depth, "n", 0)
        counters.depth.n = depth + 1
        try:
            result = method(self, *args, **kwargs)
        except Exception as error:
            if depth == 0:
                counters.stopped(error)
            raise
        finally:
            counters.depth.n = depth
        if depth == 0 and result is not None:
            counters.finished(result)
        return result

    return cast(F, wrapper)
