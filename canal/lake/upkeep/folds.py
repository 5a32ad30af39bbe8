"""Folds and their scheduling (merge-on-read): when a table's change log is folded into its base, and by whom.

A fold starts when the log holds ``fold_ratio`` times the base's rows or ``fold_files`` files
(:meth:`Folds.fold_due`, from log sizes kept up to date as appends land), in a background thread
(``background_folds``; else at the end of the batch), tables in parallel (``fold_workers``), each table's folds paced
to take at most ``fold_duty`` of the time (:data:`canal.lake.settings.FOLD_DUTY`; folds under a second excepted); a
log of many small files that is not due is compacted instead. A failed background fold is logged, recorded, counted
(:mod:`canal.lake.upkeep.health`) and tried again after a later batch. A table's appends and its folds' trims hold one
lock per table (:meth:`Folds.appends`); a step that rewrites, moves or drops a table waits for its fold first
(:meth:`Folds.settle`). The folding itself is :func:`canal.lake.store.changelog.fold`.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from canal.lake.settings import FOLD_REST_MIN_S, MirrorSettings
from canal.lake.store import changelog, delta_append
from canal.lake.store.changelog import FoldResult
from canal.lake.store.errors import ERROR_CHARS
from canal.lake.store.handles import Handles
from canal.lake.upkeep.health import FoldHealth
from canal.lake.upkeep.writers import LogWriters


class Folds:
    """The folds of one mirror's tables (by base path): their schedule, the pool running them, the logs' sizes.

    ``before_fold(path)``: what must reach the log before a fold now (the table's staged parts); ``done`` and
    ``errors``: the records of folds done and of background folds that failed (the newest only)."""

    def __init__(
        self,
        settings: MirrorSettings,
        handles: Handles,
        writers: LogWriters,
        *,
        before_fold: Callable[[str], None],
        done: list[FoldResult],
        errors: list[str],
        log: logging.Logger | logging.LoggerAdapter[Any],
    ) -> None:
        self._settings = settings
        self._handles = handles
        self._writers = writers
        self._before_fold = before_fold
        self.done = done
        self.errors = errors
        self._log = log
        self.health = FoldHealth(settings.max_fold_failures)
        self.lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._pending: dict[str, Future[None]] = {}  # base path -> its fold under way
        self.log_sizes: dict[str, changelog.LogSize] = {}  # base path -> its log's size, kept up to date
        self.written: set[str] = set()  # base paths whose logs the current batch appended to
        self._append_locks: dict[str, threading.Lock] = {}  # base path -> held by its log's appends and trims
        self._rest_until: dict[str, float] = {}  # base path -> when its next background fold may start (fold_duty)

    def wait(self) -> None:
        """Wait until every background fold started so far has ended."""
        with self.lock:
            pending = list(self._pending.values())
        for future in pending:
            future.exception()

    def close(self) -> None:
        self.wait()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self._pool = None

    def settle(self, path: str) -> None:
        """Wait for a background fold of the table at ``path`` (before a step rewrites, moves or drops it)."""
        with self.lock:
            future = self._pending.get(path)
        if future is not None:
            future.exception()

    def fold_now(self, path: str) -> FoldResult:
        """Fold the table at ``path`` in this thread (its staged parts appended first)."""
        self._before_fold(path)
        self.settle(path)
        result = self._fold(path)
        self._folded(path, result)
        return result

    def _fold(self, path: str) -> FoldResult:
        """Fold the table at ``path``, trimming its log by whole files when no other writer appends to the logs."""
        return changelog.fold(
            path,
            name=os.path.basename(path),
            appends=self.appends(path),
            by_files=self._writers.trim_by_files,
            retention_s=self._settings.retention_hours * 3600.0,
        )

    def _folded(self, path: str, result: FoldResult, size: changelog.LogSize | None = None) -> None:
        """Record a fold, and the log's size after it (None: read from the Delta logs when next needed)."""
        with self.lock:
            self.done.append(result)
            self._sized(path, size)
        self.health.succeeded([path])

    def check(self) -> None:
        """:class:`~canal.lake.types.MirrorFoldError` when a table's folds failed ``max_fold_failures`` times in a
        row (:mod:`canal.lake.upkeep.health`)."""
        self.health.check(lambda path: Path(path).name)

    def _sized(self, path: str, size: changelog.LogSize | None) -> None:
        if size is None:
            self.log_sizes.pop(path, None)
        else:
            self.log_sizes[path] = size

    def forget_size(self, path: str) -> None:
        """The size of the table's log is read anew when next needed (rewritten, moved or dropped)."""
        self.log_sizes.pop(path, None)

    def _log_size(self, path: str) -> changelog.LogSize:
        size = self.log_sizes.get(path)
        if size is None:
            size = self.log_sizes[path] = changelog.log_size(path, self._handles.table(path), self._handles.log(path))
        return size

    def appended(self, path: str, rows: int) -> None:
        """The change log of the table at ``path`` took ``rows`` in a file of their own (in this batch)."""
        self.written.add(path)
        with self.lock:
            size = self.log_sizes.get(path)
            if size is not None:
                self.log_sizes[path] = changelog.LogSize(size.log_rows + rows, size.log_files + 1, size.base_rows)

    def take_written(self) -> set[str]:
        """The tables whose logs the batch appended to (then none)."""
        written, self.written = self.written, set()
        return written

    def fold_due(self, path: str) -> bool:
        """Whether the change log of the table at ``path`` is big enough to fold (``fold_ratio``, ``fold_files``)."""
        size = self._log_size(path)
        if size.log_rows == 0:
            return False
        settings = self._settings
        return size.log_rows >= settings.fold_ratio * max(size.base_rows, 1) or size.log_files >= settings.fold_files

    def schedule(self, paths: Iterable[str]) -> list[str]:
        """Start the folds due among ``paths`` (and the compaction of logs of many files that are not due): in the
        background, or now without ``background_folds``. The tables whose fold started."""
        logs = [p for p in sorted(set(paths)) if delta_append.is_table(changelog.log_path(p))]
        due = [p for p in logs if self.fold_due(p)]
        scattered = [p for p in logs if p not in due and self._log_size(p).log_files >= changelog.COMPACT_FILES]
        if not self._settings.background_folds:
            for path in due:
                self.fold_now(path)
            for path in scattered:
                self._compact_claimed(path)
            return [Path(path).name for path in due]
        for path in self.claim(scattered, paced=False):
            self.run([path], functools.partial(self._compact_claimed, path), sizes_known=True, paced=False)
        started = self.claim(due)
        for path in started:
            self.run([path], functools.partial(self._fold_claimed, path), sizes_known=True)
        return [Path(path).name for path in started]

    def _compact_claimed(self, path: str) -> None:
        changelog.compact(changelog.log_path(path), self.appends(path))
        size = self._measured_log(path)
        with self.lock:
            self._sized(path, size)

    def _fold_claimed(self, path: str) -> None:
        result = self._fold(path)
        self._folded(path, result, self._measured_log(path))

    def _measured_log(self, path: str) -> changelog.LogSize | None:
        """The size of the table's log read anew in the thread that just folded or compacted it, so that the next
        batch need not (through deltalake: 2-10 ms a table while folds compete for the cores, which a batch spread
        over 50 tables paid for each table folded or compacted since the last). A batch landing while it is read
        may go uncounted until the log's next fold or compaction: the size only decides when those run. None where
        it cannot be read: the next batch reads it."""
        from deltalake.exceptions import DeltaError

        try:
            return changelog.log_size(path)
        except (DeltaError, OSError) as exc:
            self._log.info("the size of %s's change log is left to the next batch: %s", Path(path).name, exc)
            return None

    def claim(self, paths: Iterable[str], *, paced: bool = True) -> list[str]:
        """The tables (base paths) among ``paths`` whose fold is not under way -- and, ``paced``, whose last fold
        rested long enough (``fold_duty``) -- now marked as under way: the caller must hand them to :meth:`run`."""
        claimed: list[str] = []
        now = time.monotonic()
        with self.lock:
            for path in paths:
                if path not in self._pending and not (paced and now < self._rest_until.get(path, now)):
                    self._pending[path] = Future()
                    claimed.append(path)
        return claimed

    def run(
        self, paths: list[str], fold: Callable[[], object], *, sizes_known: bool = False, paced: bool = True
    ) -> None:
        """Run ``fold`` (which folds the claimed tables ``paths``) in a background thread; a fold that fails is logged
        and left to a later batch (the log stays, and reads exactly), and counted: after ``max_fold_failures`` in a
        row the next batch is refused (:meth:`check`). The logs' sizes are read anew by the next batch that needs
        them, unless ``sizes_known`` (``fold`` records them) and it succeeded. ``paced``: the tables rest after it,
        as ``fold_duty`` says, before :meth:`claim` gives them again."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._settings.fold_workers, thread_name_prefix="pycanal-fold")
        with self.lock:
            claims = [self._pending[path] for path in paths]

        def run() -> None:
            error: BaseException | None = None
            began = time.monotonic()
            try:
                fold()
            except Exception as exc:
                error = exc
                names = ", ".join(Path(path).name for path in paths)
                with self.lock:
                    self.errors.append(f"{names}: {type(exc).__name__}: {str(exc)[:ERROR_CHARS]}")
                if not isinstance(exc, changelog.FoldRaceError):  # a lost race did no harm (canal.lake.upkeep.health)
                    self.health.failed(list(paths), exc)
                self._log.warning("fold of %s failed (tried again after a later batch): %s", names, exc)
            else:  # (a fold done here was counted by _folded)
                self.health.succeeded(list(paths), folded=False)
            finally:
                ended = time.monotonic()
                took = ended - began
                rest = took * (1 / self._settings.fold_duty - 1) if took >= FOLD_REST_MIN_S else 0.0
                with self.lock:
                    for path in paths:
                        self._pending.pop(path, None)
                        if paced and error is None:  # a failed fold is tried again after the next batch
                            self._rest_until[path] = ended + rest
                        if error is not None or not sizes_known:
                            self.log_sizes.pop(path, None)
                for claim in claims:
                    if error is None:
                        claim.set_result(None)
                    else:
                        claim.set_exception(error)

        self._pool.submit(run)

    def appends(self, path: str) -> threading.Lock:
        """The lock this process's appends to the table's change log and its folds' trims hold."""
        with self.lock:
            lock = self._append_locks.get(path)
            if lock is None:
                lock = self._append_locks[path] = threading.Lock()
            return lock
