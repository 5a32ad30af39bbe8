"""How a mirror is doing, and its faults typed: failing folds counted and surfaced, storage errors as MirrorErrors.

A fold runs in the background, after the batch that made it due was acked: its failure cannot fail that batch. Left
at a warning, a log that cannot be folded (a damaged file) grows behind batches acked as healthy. So
:class:`FoldHealth` counts each table's failed folds in a row: :meth:`DeltaMirror.metrics` shows them, and once a
table's reach ``max_fold_failures`` the next batch is refused with :class:`~canal.lake.types.MirrorFoldError`
(nothing of it written) until a fold of the table succeeds -- ``DeltaMirror.fold()`` folds in the caller's thread,
raising what stops it. A fold that lost a commit race (:class:`~canal.lake.changelog.FoldRaceError`) did no harm
and counts as neither.

:func:`typed_storage_errors` turns what pyarrow and deltalake raise for files they cannot read or write (a damaged
Parquet file, a truncated Delta commit, a disk error) into :class:`~canal.lake.types.MirrorStorageError` at the
mirror's public methods, naming the root and the method.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import attrs

from canal.lake.types import MirrorError, MirrorFoldError, MirrorStorageError

F = TypeVar("F", bound=Callable[..., Any])
ERROR_CHARS = 2000  # of a fold error kept: the library's message can carry a whole backtrace


def storage_error_types() -> tuple[type[BaseException], ...]:
    import pyarrow as pa
    from deltalake.exceptions import DeltaError

    from canal.lake.storage import StorageError  # the mirror's own files in an object store (canal.lake.fs)

    return (pa.ArrowException, DeltaError, OSError, StorageError)


def typed_storage_errors(method: F) -> F:
    """``method`` of an object with a ``root``, raising :class:`MirrorStorageError` for a storage error (a
    MirrorError, or any other error, goes through as it is)."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except MirrorError:
            raise
        except storage_error_types() as exc:
            raise MirrorStorageError(
                f"mirror {self.root}: {method.__name__} failed on its files: {type(exc).__name__}: "
                f"{str(exc)[:ERROR_CHARS]}"
            ) from exc

    return cast(F, wrapper)


@attrs.frozen(slots=True)
class MirrorMetrics:
    """What :meth:`canal.spark.DeltaMirror.metrics` reports."""

    batches: int  # batches that applied something, in this process
    folds: int  # folds this mirror did (not those Spark tasks do: on_executors)
    fold_failures: int  # folds (and log compactions) that failed, in this process
    failing_folds: dict[str, int]  # ``schema.table`` -> its folds failed in a row (absent once one succeeds)
    last_fold_error: str | None
    staged_tables: int  # tables holding staged parts
    staged_rows: int
    staged_bytes: int  # the staged parts held in memory (bounded by ``stage_bytes`` after each batch)


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
