"""The change-log writer (merge-on-read): a step's last change per key appended to each table's change log.

An append to an existing log by a mirror that is its only writer is written as the log's next Delta commit
directly (:mod:`canal.lake.store.delta_append`: about a quarter of a millisecond against 2-7 ms through ``deltalake``,
which a batch spread over many tables pays per table); a new log's first append, one with new columns, and any
append by a mirror that shares its logs go through ``deltalake``. Within a step, the appends are gathered while
the step plans its tables and written once it has (:meth:`LogWriter.deferred`), the ones through deltalake by a
pool meanwhile; the small ones are staged instead (:mod:`canal.lake.apply.staging`). A table's staged parts reach its
log before anything else does, so its batches stay in order.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from canal.lake.apply.appends import LogAppend
from canal.lake.apply.staging import Staging
from canal.lake.planning.plan import TablePlan
from canal.lake.settings import MirrorSettings
from canal.lake.store import changelog, delta_append, staged
from canal.lake.store.handles import Handles
from canal.lake.types import MirrorError
from canal.lake.upkeep.folds import Folds
from canal.lake.upkeep.writers import LogWriters

T = TypeVar("T")

TABLE_WORKERS = 4
"""Threads that apply the tables of one step: a Delta commit mostly waits (files, the log), so more than the cores."""


def flushed_metadata(batch_ids: Sequence[int]) -> dict[str, str]:
    """The commit metadata of a flush of staged parts: the batch ids it appends."""
    return {staged.FLUSHED_BATCHES: ",".join(str(b) for b in batch_ids)}


class LogWriter:
    """Appends to the change logs of one mirror's tables (by base path)."""

    def __init__(
        self, settings: MirrorSettings, handles: Handles, writers: LogWriters, folds: Folds, staging: Staging
    ) -> None:
        self._settings = settings
        self._handles = handles
        self._writers = writers
        self._folds = folds
        self._staging = staging
        self._pool: ThreadPoolExecutor | None = None  # applies the tables of a step without DDL in parallel
        self._deferred: list[Future[None]] | None = None  # the step's appends under way (deferred)
        self._step_appends: list[LogAppend] | None = None  # the step's appends not written yet (the same)
        # change log path -> (its version, its Arrow schema) after this process's last direct append (_append_directly)
        self._direct_state: dict[str, tuple[int, Any]] = {}
        self._log_keys: dict[str, list[str]] = {}  # base path -> its log's key columns, as last read or written
        self._named: set[str] = set()  # base paths whose change log has the mirror's own column names (own_names)

    def pool(self) -> ThreadPoolExecutor:
        """The threads that write a step's tables (and its appends through deltalake) in parallel."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(TABLE_WORKERS, thread_name_prefix="pycanal-mirror")
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
        self._pool = None

    def forget(self, path: str) -> None:
        """What is known of the table's change log is read anew (rewritten, moved or dropped)."""
        self._direct_state.pop(changelog.log_path(path), None)
        self._log_keys.pop(path, None)
        self._named.discard(path)

    def deferred(self, run: Callable[[], T]) -> T:
        """``run()`` (a step's tables, one after another), its change-log appends gathered and written once it has
        planned every table (:meth:`commit`), those through deltalake by the pool meanwhile; returns once every one
        of them is written (the first append error raised, as the error of ``run()`` would be)."""
        self._deferred = []
        self._step_appends = []
        try:
            outcome = run()
            appends, self._step_appends = self._step_appends, None
            self.commit(appends)
        finally:
            self._step_appends = None
            deferred, self._deferred = self._deferred, None
            for future in deferred:
                future.exception()  # every append ended before the step does, whatever happened
        for future in deferred:
            future.result()
        return outcome

    def append(
        self,
        path: str,
        plan: TablePlan,
        batch_id: int,
        source: Any,
        key_names: list[str],
        commit: Any,
        records_batch: bool,
    ) -> None:
        """The step's last change per key, with its sequence, appended to the table's change log (committing
        ``batch_id`` as the mirror's app transaction when ``records_batch``, as ``commit`` does)."""
        import pyarrow as pa

        log = changelog.log_path(path)
        self._own_names(path)
        recorded = self._log_keys.get(path)
        if recorded is None:
            recorded = changelog.read_keys(log)
        if recorded != key_names:
            self.flush(path)
            if recorded is not None:
                # rows keyed one way cannot be folded with rows keyed another: fold, then key the log anew
                self._folds.fold_now(path)
                if delta_append.is_table(log):
                    changelog.clear(log, self._handles.table(path).schema().to_arrow())
            changelog.write_keys(log, key_names)
        self._log_keys[path] = key_names
        self._own_names(path)
        seq = plan.seq if plan.seq is not None else pa.array([], pa.int64())
        if seq.null_count:
            raise MirrorError(f"{plan.schema}.{plan.table}: change rows without a seq cannot be mirrored merge-on-read")
        rows = source.append_column(changelog.BATCH, pa.repeat(pa.scalar(batch_id, pa.int64()), source.num_rows))
        rows = rows.append_column(changelog.SEQ, seq if seq.type == pa.int64() else seq.cast(pa.int64()))

        through_deltalake = functools.partial(self._append_with_deltalake, path, log, rows, commit)
        append = LogAppend(path, log, rows, batch_id if records_batch else None, through_deltalake)
        with self._folds.appends(path):
            append.direct = self._direct_target(log, rows)
        if append.direct is None:
            self.flush(path)  # the staged parts first, in this thread: the log's batches stay in order
            self._append_through_deltalake(append)  # at once: within a step, the pool writes it meanwhile
        elif self._step_appends is not None:
            self._step_appends.append(append)
        else:
            self.commit([append])

    def _own_names(self, path: str) -> None:
        """Before this process first writes the table's change log: one an older pycanal wrote names its own columns
        otherwise (:mod:`canal.lake.own_names`), and is rewritten under the mirror's names first."""
        if path in self._named:
            return
        log = changelog.log_path(path)
        with self._folds.appends(path):
            if changelog.take_own_names(log):
                self._direct_state.pop(log, None)  # a new schema: read anew (a held handle reads the commit)
        self._named.add(path)

    def _append_with_deltalake(self, path: str, log: str, rows: Any, commit: Any) -> None:
        """Append ``rows`` to the change log ``log`` of the table at ``path`` through deltalake, with ``commit``."""
        with self._folds.appends(path):
            handle = self._handles.get(log)  # append() brings it up to date
            if handle is None and delta_append.is_table(log):
                handle = changelog.open_table(log)
                self._handles.put(log, handle)
            handle = changelog.append(log, rows, commit, handle, self._settings.log_history_s)
            if handle is not None:
                self._handles.put(log, handle)

    def commit(self, appends: list[LogAppend]) -> None:
        """Write ``appends`` (each with its direct target) to their change logs, the small ones staged instead:
        their rows encoded one after another first (the Parquet writer's code stays in the processor's caches:
        :func:`delta_append.encode`), then each committed; one whose direct commit is refused goes through
        deltalake."""
        taken = self._staging.stage(appends)
        for append in taken:  # nothing appended: the log's version and schema are still those read
            if append.direct is not None:
                self._direct_state[str(append.log)] = append.direct[:2]
        taken_ids = {id(a) for a in taken}
        appends = [a for a in appends if id(a) not in taken_ids]
        encoded = [delta_append.encode(a.direct[2]) for a in appends if a.direct is not None]
        for append, data in zip(appends, encoded, strict=True):
            self.flush(append.path)  # its staged parts first: the log's batches stay in order
            if self._append_directly(append, data):
                self._folds.appended(append.path, append.rows.num_rows)
            else:
                self._append_through_deltalake(append)

    def _append_through_deltalake(self, append: LogAppend) -> None:
        """``append`` through deltalake: by the pool within a step (deltalake's work releases the GIL), else now."""
        if self._deferred is not None:
            self._deferred.append(self.pool().submit(append.through_deltalake))
        else:
            append.through_deltalake()
        self._folds.appended(append.path, append.rows.num_rows)

    def _direct_target(self, log: str, rows: Any) -> tuple[int, Any, Any] | None:
        """Where an append to an existing change log can be written as its next Delta commit directly: (the log's
        version, its Arrow schema, ``rows`` in that schema), when this process is the log's only writer and the rows
        have the log's columns; else None, and the caller appends through ``deltalake``. Called holding the table's
        append lock."""
        import pyarrow as pa

        if not self._writers.sole:
            return None
        key = log
        known = self._direct_state.pop(key, None)
        if known is None:
            handle = self._handles.get(key)
            if handle is None:
                if not delta_append.is_table(log):
                    return None
                handle = changelog.open_table(log)
            else:
                handle = changelog.refreshed(handle, log)
            self._handles.put(key, handle)
            known = (handle.version(), pa.schema(handle.schema().to_arrow()))
        version, schema = known
        if set(rows.column_names) != set(schema.names):
            return None  # new columns: Delta's schema merge
        typed = rows.select(schema.names)
        if typed.schema != schema:
            try:
                typed = typed.cast(schema)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return None
        return version, schema, typed

    def _append_directly(self, append: LogAppend, encoded: Any) -> bool:
        """Commit ``append`` (its direct target known) with its rows ``encoded``; False when it did not append: the
        log changed its schema, or dropped commits since the version known behind a checkpoint (read anew on the
        next append)."""
        assert append.direct is not None
        version, schema, typed = append.direct
        with self._folds.appends(append.path):
            committed = delta_append.append(
                append.log,
                typed,
                version=version,
                app_id=self._settings.app_id,
                batch_id=append.batch_id,
                encoded=encoded,
                metadata=None if append.flushed is None else flushed_metadata(append.flushed),
            )
        if committed is None:
            return False
        self._direct_state[append.log] = (committed, schema)
        return True

    def flush_staged(self) -> None:
        """Append every staged change to its table's change log (:mod:`canal.lake.store.staged`)."""
        for path in self._staging.tables():
            self.flush(path)

    def flush(self, path: str) -> None:
        """Append the staged parts of the table at ``path`` to its change log, as one append recording their last
        batch id, in this thread; then forget them."""
        import pyarrow as pa
        from deltalake import CommitProperties, Transaction

        parts = self._staging.parts_if_any()
        table = None if parts is None else parts.take(path)
        if parts is None or table is None:
            return
        self._own_names(path)
        rows = pa.concat_tables(table.parts, promote_options="permissive")
        batch_id = table.batches[-1]
        log = changelog.log_path(path)
        commit = CommitProperties(
            app_transactions=[Transaction(self._settings.app_id, version=batch_id)],
            custom_metadata=flushed_metadata(table.batches),
        )

        through_deltalake = functools.partial(self._append_with_deltalake, path, log, rows, commit)
        append = LogAppend(path, log, rows, batch_id, through_deltalake, flushed=list(table.batches))
        with self._folds.appends(path):
            append.direct = self._direct_target(log, rows)
        if append.direct is None or not self._append_directly(append, delta_append.encode(append.direct[2])):
            through_deltalake()
        self._folds.appended(path, rows.num_rows)
        parts.flushed(path)
        self._staging.flushed_by_batch.append(path)
