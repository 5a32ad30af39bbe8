"""A Delta Lake mirror of source tables, applied idempotently per batch (``deltalake``, no JVM needed).

``DeltaMirror(root)`` keeps one Delta table per source table under ``root/{schema}.{table}``, each name escaped
(:mod:`canal.lake.names`: ``shop.orders`` stays ``shop.orders``). :meth:`apply` takes one batch of change rows
(:mod:`canal.spark.changes`) as ordered steps -- each table's rows up to the next DDL that
touches it, that DDL, the next rows (:func:`_steps`; docs/architecture.md says why this is exact) -- journaled so a
replay goes on after the last step done, and for each step, per table:

* reduces the batch to the last change per primary key (deletes delete, inserts and updates upsert the full after
  image -- pycanal requires FULL row images); an update that changed the primary key (``old_keys``) also deletes
  the old key, so the mirror follows key changes, swaps and changed-then-deleted rows;
* follows DDL through the one DDL code (:mod:`canal.lake.evolution`): ADD / DROP / RENAME / CHANGE / MODIFY COLUMN
  with FIRST / AFTER rewrite the table to the source's column order, keeping each column's data across renames and
  moves; a declared type change converts the values as the server does (a smaller DECIMAL scale rounds half away
  from zero; a value that does not fit is a MirrorTypeError); RENAME TABLE moves the Delta table, a pair at a time;
  CREATE TABLE makes it (empty); DROP TABLE removes it; TRUNCATE empties it. An added column's existing rows read
  its constant DEFAULT or the type's implicit NOT NULL default, as the server fills them without logging rows (a
  DEFAULT it computes per row is a MirrorError); new columns seen in row images are added by the MERGE
  (``merge_schema``);
* commits the table's last step of the batch together with the app transaction ``(app_id, batch_id)`` (a table
  renamed in the batch commits without it)
  (``CommitProperties(app_transactions=[Transaction(app_id, version=batch_id)])``); a mirror without a step journal
  (written by an older pycanal) skips the table when
  ``transaction_version(app_id) >= batch_id`` -- a batch replayed after a crash is applied at most once per table.

Batch ids must increase: Spark's micro-batch ids do, and so do :func:`canal.spark.run_batches`' position-derived ids.
A DataFrame handed to ``foreachBatch`` can be passed straight in: ``query.foreachBatch(mirror)``.

A mirror keeps each table it writes open between batches and, before using it again, reads only the commits made
since (its own or anyone's). Opening a table anew replays its log from the last checkpoint, which cost each
micro-batch tens of milliseconds per table, growing with the commits since that checkpoint.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal, TypeVar

import attrs

from canal.lake import changelog, delta_append, drops, fs, staged, step_marks, table_moves
from canal.lake import names as naming
from canal.lake.applied import check_batch, newest_position, record_batch
from canal.lake.cascade import ExpandedBatch, expand_cascades
from canal.lake.changelog import FoldResult, quote, record_only
from canal.lake.ddl_text import ddl_statement, fold_flags
from canal.lake.evolution import Evolution, plan_evolution, renamed_tables
from canal.lake.health import ERROR_CHARS, FoldHealth, MirrorMetrics, typed_storage_errors
from canal.lake.lease import WriterLease
from canal.lake.locations import local_path
from canal.lake.narrowing import fit_declared, narrows
from canal.lake.records import Recent
from canal.lake.stops import check_cascades, check_statements
from canal.lake.types import MirrorError, MirrorTypeError, ZeroDates, arrow_type, typed_array, typed_strings
from canal.lake.xa import HeldTransactions, held_directory
from canal.log import destination_logger
from canal.protocol import render_text
from canal.sql import AlterTable, CreateTable, DropTable, RenameTable, RenameTo, TableName

OP_COLUMN = changelog.OP

MirrorMode = Literal["merge_on_read", "copy_on_write"]
MODES: tuple[MirrorMode, ...] = ("merge_on_read", "copy_on_write")


@attrs.define(slots=True)
class TableStats:
    applied: int = 0  # batches applied
    skipped: int = 0  # batches skipped as already applied
    upserts: int = 0
    deletes: int = 0
    changes: int = 0  # change rows seen (before the last-per-key reduction)


@attrs.define(slots=True)
class ApplyResult:
    batch_id: int
    # table (its directory name, canal.lake.names: ``schema.table`` for plain names) -> "applied" | "skipped"
    tables: dict[str, str] = attrs.field(factory=dict)
    rows: int = 0
    merge_s: float = 0.0
    prepare_s: float = 0.0
    maintenance_s: float = 0.0  # scheduled compaction and vacuum after the batch (``optimize_every``, ...)
    folds: list[str] = attrs.field(factory=list)  # tables whose fold the batch started (merge_on_read)
    staged: list[str] = attrs.field(factory=list)  # tables whose part the batch staged (canal.lake.staged)
    flushed: list[str] = attrs.field(factory=list)  # tables whose staged parts the batch appended to their logs


@attrs.define(slots=True)
class _TablePlan:
    schema: str
    table: str
    # the last change per key (raw ``keys`` text) in the order of those last changes: DELETE flags, keys, after
    # images (Arrow arrays of equal length; None until the planner sets them)
    deletes: Any = None
    keys: Any = None
    after: Any = None
    layout: str | None = None
    ddl: list[tuple[int, str, str]] = attrs.field(factory=list)  # (batch row, type, sql) in order
    fold_names: bool = False  # its DDL comes from a server with lower_case_table_names=1 (canal.lake.ddl_text)
    at: Any = None  # the batch row of each kept change (parallel to keys / after)
    truncate: bool = False
    rows: int = 0
    source: Any = None  # (the typed MERGE source, its key columns), built before the batch's first step
    seq: Any = None  # the ``seq`` of each kept change (parallel to keys / after)


@attrs.define(slots=True)
class _LogAppend:
    """One table's change rows of a step, to be appended to its change log (:meth:`DeltaMirror._commit_appends`)."""

    path: str  # the base table
    log: str
    rows: Any  # the change rows, with the log's batch and seq columns
    batch_id: int | None  # committed as the mirror's app transaction, when the append records the batch
    through_deltalake: Callable[[], None]  # the append through deltalake (a new log, new columns, another writer)
    direct: tuple[int, Any, Any] | None = None  # (the log's version, its Arrow schema, the rows in it): direct append
    flushed: list[int] | None = None  # a flush of staged parts: their batch ids (staged.FLUSHED_BATCHES)


MIRROR_COLUMNS = (  # the change-row columns DeltaMirror reads
    "seq",
    "schema",
    "table",
    "type",
    "is_ddl",
    "sql",
    "keys",
    "old_keys",
    "after",
    "columns",
)
# read when there: XA marks and foreign keys' actions, positions for errors, the before images the actions follow
OPTIONAL_COLUMNS = ("props", "log_file", "log_offset", "before")


def _mirror_columns(names: Sequence[str]) -> list[str]:
    return [*MIRROR_COLUMNS, *(name for name in OPTIONAL_COLUMNS if name in names)]


def _to_arrow_table(changes: Any) -> Any:
    import pyarrow as pa

    if isinstance(changes, pa.Table):
        return changes
    if isinstance(changes, pa.RecordBatch):
        return pa.Table.from_batches([changes])
    if isinstance(changes, Sequence) and all(isinstance(b, pa.RecordBatch) for b in changes):
        return pa.Table.from_batches(list(changes)) if changes else None
    if hasattr(changes, "toArrow"):  # a Spark DataFrame: only the columns the mirror reads cross over
        return changes.select(*_mirror_columns(changes.columns)).toArrow()
    raise TypeError(f"cannot mirror {type(changes).__name__}: pass a pyarrow Table/RecordBatch or a DataFrame")


def _ascending(seq: Any) -> bool:
    """Whether ``seq`` is already in (non-decreasing) order, so the stable sort would keep every row in place."""
    import pyarrow.compute as pc

    if seq.null_count:
        return False
    in_order: bool | None = pc.all(pc.less_equal(seq.slice(0, len(seq) - 1), seq.slice(1))).as_py()
    return bool(in_order)


def _any(mask: Any) -> bool:
    import pyarrow.compute as pc

    return pc.any(mask).as_py() is True


def _all(mask: Any) -> bool:
    import pyarrow.compute as pc

    return pc.all(mask).as_py() is not False


def _each(apply_one: Callable[[str, _TablePlan], bool], step: dict[str, _TablePlan]) -> dict[str, bool]:
    return {name: apply_one(name, plan) for name, plan in step.items()}


def _true_count(mask: Any) -> int:
    """The true values of a boolean Array or ChunkedArray (no compute call: a batch asks it per table)."""
    chunks = mask.chunks if hasattr(mask, "chunks") else [mask]
    return sum(int(chunk.true_count) for chunk in chunks)


def _positions(n: int) -> Any:
    """``0 .. n-1`` as an int64 Arrow array, built in C."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.subtract(pc.cumulative_sum(pa.nulls(n, pa.int64()).fill_null(1)), 1)


_BLOCK = 1 << 20  # pyarrow.json's default block size; a block must hold the longest image


def _typed_column(name: str, convert: Any) -> Any:
    """``convert()`` with the column named in a MirrorTypeError."""
    try:
        return convert()
    except MirrorTypeError as exc:
        raise MirrorTypeError(f"column {name!r}: {exc}") from None


def _parse_images(texts: Any, layout: Any, zero_dates: ZeroDates = "error") -> list[Any] | None:
    """The layout's columns of JSON images (one object of canal text per value), typed, parsed by pyarrow.json;
    None when the images or the layout are outside what this path reproduces exactly -- the caller then parses them
    in Python. pyarrow.json rejects duplicate names, non-string values, and everything ``json.loads`` rejects, so
    what it accepts reads the same; a null image or one that is not a lone object (checked by the first character
    and the row count) goes to Python."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pj

    n = len(texts)
    if n == 0 or texts.null_count:
        return None
    if not isinstance(layout, list) or not all(
        isinstance(c, list) and len(c) == 3 and isinstance(c[0], str) and isinstance(c[1], str) for c in layout
    ):
        return None
    names = [c[0] for c in layout]
    if len(set(names)) != len(names):
        return None
    if not pc.all(pc.starts_with(texts, "{")).as_py():
        # every line then yields at least one row or an error, so n rows means one object per image
        return None
    longest = pc.max(pc.binary_length(texts)).as_py()
    if longest >= (1 << 30):
        return None
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    # each image followed by a newline, all in one fresh data buffer: that buffer is the newline-delimited text
    wide = pa.large_string()  # 64-bit offsets: a batch's images may exceed 2 GiB together
    lines = pc.binary_join_element_wise(texts.cast(wide), pa.scalar("", wide), pa.scalar("\n", wide))
    _validity, offsets_buffer, data = lines.buffers()
    offsets = pa.Array.from_buffers(pa.int64(), n + 1, [None, offsets_buffer], offset=lines.offset)
    start, end = offsets[0].as_py(), offsets[n].as_py()
    joined = data.slice(start, end - start)
    schema = pa.schema([pa.field(name, pa.string()) for name in names])
    try:
        parsed = pj.read_json(
            pa.BufferReader(joined),
            read_options=pj.ReadOptions(block_size=max(_BLOCK, 2 * (longest + 1))),
            parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"),
        )
    except pa.ArrowException:
        return None
    if parsed.num_rows != n:
        return None
    return [
        _typed_column(name, lambda n=name, t=type_text: typed_strings(parsed.column(n), arrow_type(t), zero_dates))
        for name, type_text, _key in layout
    ]


T = TypeVar("T")

DEFAULT_STAGE_BYTES = 8 << 20
"""The staged parts a mirror holds in memory, at most, after each batch (and each part staged at most this big)."""
RECORDS_KEPT = 1000
"""Entries of ``history``, ``folds`` and ``fold_errors`` kept (the newest): a mirror runs for months."""
RECORD_NAMES = 200_000
"""Table names held by the ``history`` kept, at most (a batch over 10,000 tables names each in its result)."""
RECORD_CHARS = 1 << 20
"""Characters of the ``fold_errors`` kept, at most."""


def _result_names(result: ApplyResult) -> int:
    return len(result.tables) + len(result.folds) + len(result.staged) + len(result.flushed)


TABLE_WORKERS = 4
"""Threads that apply the tables of one step: a Delta commit mostly waits (files, the log), so more than the cores."""

DEFAULT_FILE_BYTES = 1 << 20
"""Data files of 1 MiB: a batch of changes to a range of keys rewrites about a MiB per file it touches. Delta's own
default (100 MB) keeps most tables in one file, which every batch rewrites whole: its cost grows with the table
(``benchmarks/bench_mirror.py``)."""


class DeltaMirror:
    """One Delta table per source table under ``root``; ``mirror(df, batch_id)`` applies a batch idempotently.

    ``optimize_every`` / ``vacuum_every``: compact the written tables / vacuum every N applied batches (None: never;
    :meth:`vacuum` by hand still works), vacuum keeping ``retention_hours`` of old files. ``tables``: mirror only
    these ``schema.table`` names. ``zero_dates``: ``error`` (a zero date fails the batch) or ``null``.
    ``file_bytes``: the target size of the data files of the tables the mirror creates (their
    ``delta.targetFileSize``; MERGE and compaction keep to it). A MERGE rewrites every file that holds a changed key,
    so a table kept in one file is rewritten whole by every batch: smaller files make batches cheaper, larger ones
    make reads cheaper. Tables that exist keep their setting.

    ``mode``: ``merge_on_read`` (the default) appends each batch's last change per key to the table's change log
    beside its base and folds the log into the base when it grows (:mod:`canal.lake.changelog`), so a batch costs
    what it holds whatever the table's size; read the current state with :meth:`read` (or
    :mod:`canal.spark.current`): the base alone is the source as of its last fold. ``copy_on_write`` MERGEs every
    batch into the table itself, which a standard Delta reader then sees current, at a cost that grows with the
    table. A fold starts when the log holds ``fold_ratio`` times the base's rows or ``fold_files`` files, in a
    background thread (``background_folds``; else at the end of the batch), tables in parallel (``fold_workers``);
    a failed background fold is logged, counted (:meth:`metrics`) and tried again after the next batch; once a
    table's folds failed ``max_fold_failures`` times in a row, batches are refused (``MirrorFoldError``) until a fold
    of it succeeds (:mod:`canal.lake.health`). A fold keeps the base files it replaces for
    ``retention_hours`` (time travel). DDL, TRUNCATE and a change of key fold the table first, within the batch.

    ``on_executors``: a Spark DataFrame handed to the mirror by ``foreachBatch`` is written by Spark tasks, each
    table's part of the batch by one task, tables in parallel, and folds run as Spark tasks too
    (:mod:`canal.spark.mirror_tasks`); a batch that holds DDL is applied by the driver, in order.

    ``stage_rows``: merge-on-read, a table's part of a batch of at most this many rows is staged -- every such part
    of the batch written as one file, appended to the table's change log later, a few tables a batch
    (``stage_spread``: each batch flushes at least one in that many of the tables staged), or before anything else
    writes the table (:mod:`canal.lake.staged`): a batch spread over many tables then costs about what one
    table's would. 0: never stage. Readers of the current state read staged changes too. ``stage_bytes``: the most
    a batch stages, and the most held staged after each batch (the oldest tables flushed first).

    ``app_id``: one live mirror writes a root under an app id (:mod:`canal.lake.lease`; a second is refused with
    ``MirrorLeaseError``): give each destination mirrored into one root its own.

    ``root``: a local path, a ``file://`` URI, or a prefix in an object store (``s3://bucket/mirror``, ``gs://``,
    ``az://``, ``abfss://``) reached with ``storage_options`` -- the keys ``deltalake`` takes (``AWS_ENDPOINT_URL``,
    ``AWS_ACCESS_KEY_ID``, ...), else the store's environment variables -- which travel to executors' tasks with the
    mirror's settings and stay out of reprs and messages (:mod:`canal.lake.fs`).

    ``log_history_s``: how long a change log keeps its Delta commits behind a checkpoint (default a second: an
    append lists them all). :meth:`committed_batch_ids` sees a change log's batch ids that far back only.
    """

    def __init__(
        self,
        root: str | Path,
        *,
        app_id: str = "pycanal-mirror",
        tables: Iterable[str] | None = None,
        zero_dates: ZeroDates = "error",
        optimize_every: int | None = None,
        vacuum_every: int | None = None,
        retention_hours: int = 168,
        file_bytes: int = DEFAULT_FILE_BYTES,
        mode: MirrorMode = "merge_on_read",
        fold_ratio: float = 0.1,
        fold_files: int = 100,
        background_folds: bool = True,
        fold_workers: int = 2,
        on_executors: bool = True,
        log_history_s: float = changelog.LOG_HISTORY_S,
        stage_rows: int = 512,
        stage_spread: int = 16,
        stage_bytes: int = DEFAULT_STAGE_BYTES,
        max_fold_failures: int = 3,
        storage_options: Mapping[str, str] | None = None,
    ) -> None:
        if zero_dates not in ("error", "null"):
            raise MirrorError(f"zero_dates must be 'error' or 'null', got {zero_dates!r}")
        if mode not in MODES:
            raise MirrorError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if not fold_ratio > 0:
            raise MirrorError(f"fold_ratio must be > 0, got {fold_ratio}")
        if fold_files < 1 or fold_workers < 1:
            raise MirrorError(f"fold_files and fold_workers must be >= 1, got {fold_files} and {fold_workers}")
        self.mode: MirrorMode = mode
        self.fold_ratio = fold_ratio
        self.fold_files = fold_files
        self.background_folds = background_folds
        self.fold_workers = fold_workers
        self.on_executors = on_executors
        if not log_history_s > 0:
            raise MirrorError(f"log_history_s must be > 0 (seconds), got {log_history_s}")
        self.log_history_s = log_history_s
        if stage_rows < 0 or stage_spread < 1:
            raise MirrorError(f"stage_rows must be >= 0 and stage_spread >= 1, got {stage_rows} and {stage_spread}")
        self.stage_rows = stage_rows
        self.stage_spread = stage_spread
        if stage_bytes < 1 or max_fold_failures < 1:
            raise MirrorError(
                f"stage_bytes and max_fold_failures must be >= 1, got {stage_bytes} and {max_fold_failures}"
            )
        self.stage_bytes = stage_bytes
        self.max_fold_failures = max_fold_failures
        self._fold_health = FoldHealth(max_fold_failures)
        self._lease: WriterLease | None = None  # taken by the first batch written with the step journal (lease)
        self._staged_parts: staged.Staged | None = None  # loaded by the first batch that stages or flushes
        self._step: tuple[int, int] | None = None  # (batch id, step number) of the journaled step being applied
        self._staged_by_batch: list[str] = []  # the batch's staged tables (base paths), for its ApplyResult
        self._flushed_by_batch: list[str] = []  # the tables whose staged parts it flushed (the same)
        # folds done, in the order they ended; background folds that failed (tried again after a later batch): the
        # newest only (canal.lake.records)
        self.folds: list[FoldResult] = Recent(RECORDS_KEPT, RECORDS_KEPT, lambda _fold: 1)
        self.fold_errors: list[str] = Recent(RECORDS_KEPT, RECORD_CHARS, len)
        self._fold_lock = threading.Lock()
        self._fold_pool: ThreadPoolExecutor | None = None
        self._table_pool: ThreadPoolExecutor | None = None  # applies the tables of a step without DDL in parallel
        self._deferred: list[Future[None]] | None = None  # the step's appends under way (_with_deferred_appends)
        self._step_appends: list[_LogAppend] | None = None  # the step's appends not written yet (the same)
        self._pending_folds: dict[str, Future[None]] = {}  # base path -> its fold under way
        self._log_sizes: dict[str, changelog.LogSize] = {}  # base path -> its log's size, kept up to date
        self._log = destination_logger(__name__, app_id)
        self._written: set[str] = set()  # base paths whose logs the current batch appended to
        self._append_locks: dict[str, threading.Lock] = {}  # base path -> held by its log's appends and trims
        self._log_keys: dict[str, list[str]] = {}  # base path -> its log's key columns, as last read or written
        for name, every in (("optimize_every", optimize_every), ("vacuum_every", vacuum_every)):
            if every is not None and every < 1:
                raise MirrorError(f"{name} must be >= 1 (batches) or None, got {every}")
        if retention_hours < 0:
            raise MirrorError(f"retention_hours must be >= 0, got {retention_hours}")
        if file_bytes < 1:
            raise MirrorError(f"file_bytes must be >= 1, got {file_bytes}")
        self.file_bytes = file_bytes
        self.optimize_every = optimize_every
        self.vacuum_every = vacuum_every
        self.retention_hours = retention_hours
        self._applied_batches = 0  # batches that wrote something, for the maintenance schedule
        self._compact: set[str] = set()  # tables written since their last compaction
        # the root as text: a local path, or an object store's URI whose options this process registers for every
        # location under it (canal.lake.fs); kept out of reprs and messages with the options
        self.root = fs.register(root, "the mirror's root", storage_options)
        self.storage_options: dict[str, str] = dict(storage_options or {})
        self.zero_dates: ZeroDates = zero_dates
        self.app_id = app_id
        self.only = None if tables is None else frozenset(tables)
        self.stats: dict[str, TableStats] = {}
        self.history: list[ApplyResult] = Recent(RECORDS_KEPT, RECORD_NAMES, _result_names)  # the newest batches
        self._handles: dict[str, Any] = {}  # path -> DeltaTable kept between batches (see _handle)
        self._replaces_checked: set[str] = set()  # object store: tables no rewrite is left unfinished in (_recovered)
        # change log path -> (its version, its Arrow schema) after this process's last direct append (_append_directly)
        self._direct_state: dict[str, tuple[int, Any]] = {}
        self.reach_checked = False  # whether Spark tasks were seen to reach the root (mirror_tasks)
        self.sole_log_writer = True
        """Whether this mirror object is the only writer of its change logs (appends, folds, compactions), so
        appends may be written as Delta commits directly (:mod:`canal.lake.delta_append`). Spark tasks' mirrors
        are not (folds run in other tasks); set it False where another process or mirror object folds the same
        root."""
        self.tasks_append = False
        """Whether Spark tasks have appended to this mirror's change logs (:mod:`canal.spark.mirror_tasks` sets
        it): its folds then trim through Delta's DELETE, whose conflict checks cover their appends and the
        checkpoints those write, not by removing whole files (:func:`canal.lake.changelog.trim`)."""

    # -- paths and versions --------------------------------------------------------------------------------------

    def table_path(self, schema: str, table: str) -> Path:
        """The local directory of the mirror table of ``schema.table`` (:func:`canal.lake.names.directory`: escaped,
        one entry of the root); a :class:`~canal.errors.StorageLocationError` for a root in an object store, whose
        tables :meth:`table_location` names."""
        return local_path(self.table_location(schema, table), "the mirror table's location")

    def table_location(self, schema: str, table: str) -> str:
        """Where the mirror table of ``schema.table`` is: a local path as text, or a URI under the object-store root
        (what ``deltalake`` and :mod:`canal.spark.current` take, with the root's ``storage_options``)."""
        return fs.join(self.root, naming.directory(schema, table))

    def _holds(self, schema: str, table: str) -> bool:
        """Whether the mirror keeps a copy of ``schema.table`` (a foreign key's action there would go unseen)."""
        return (self.only is None or f"{schema}.{table}" in self.only) and fs.exists(self.table_location(schema, table))

    def _mirrors(self, schema: str, table: str) -> bool:
        return self.only is None or f"{schema}.{table}" in self.only

    def _current_rows(self, schema: str, table: str) -> list[dict[str, Any]] | None:
        """A held table's rows as they are before the batch (None: not held): where a foreign key's action looks."""
        if not self._holds(schema, table):
            return None
        rows: list[dict[str, Any]] = self.read(schema, table).to_pylist()
        return rows

    def table_names(self) -> list[str]:
        """``schema.table`` of every mirrored table that exists, as the server spells them (:meth:`tables` gives
        the pairs: a name holding a dot reads ambiguously here)."""
        return sorted(naming.display(*pair) for pair in self.tables())

    def tables(self) -> list[tuple[str, str]]:
        """``(schema, table)`` of every mirrored table that exists, in the order of their directories."""
        return [pair for _name, pair in self._table_directories()]

    def _table_directories(self) -> list[tuple[str, tuple[str, str]]]:
        """(directory name, (schema, table)) of every mirrored table that exists, by directory name."""
        found = []
        for name in fs.listdir(self.root):
            pair = naming.parse(name)
            if pair is not None and fs.is_delta_table(fs.join(self.root, name)):
                found.append((name, pair))
        return found

    def version(self, schema: str, table: str) -> int | None:
        """The last batch id applied to a table (its Delta app-transaction version), None if none."""
        path = self.table_location(schema, table)
        if not fs.is_delta_table(path):
            return None
        return self._batch_version(path)

    def _batch_version(self, path: str, base: Any = None) -> int | None:
        """The last batch id committed to a table: to its base or (merge-on-read) to its change log."""
        versions: list[int] = []
        base = base if base is not None else fs.delta_table(path)
        if (done := base.transaction_version(self.app_id)) is not None:
            versions.append(int(done))
        log = self._log_handle(path)
        if log is not None and (done := log.transaction_version(self.app_id)) is not None:
            versions.append(int(done))
        parts = self._staged_if_any()
        if parts is not None and (last := parts.last_batch(path)) is not None:
            versions.append(last)
        return max(versions) if versions else None

    def _log_batch(self, path: str) -> int | None:
        """The last batch id the change log of the table at ``path`` recorded (None: none, or no log)."""
        log = self._log_handle(path)
        done = None if log is None else log.transaction_version(self.app_id)
        return None if done is None else int(done)

    def _log_handle(self, path: str) -> Any:
        """The change log of the table at ``path``, kept open between batches and brought up to date (None: it has
        none)."""
        log = changelog.log_path(path)
        handle = self._handles.get(log)
        if handle is not None:
            handle = changelog.refreshed(handle, log)
        elif delta_append.is_table(log):
            handle = changelog.open_table(log)
        else:
            return None
        self._handles[log] = handle
        return handle

    def committed_batch_ids(self, schema: str, table: str) -> list[int]:
        """Every batch id committed to a table, in order (read from the Delta logs' ``txn`` actions of its base and,
        merge-on-read, its change log -- whose commits are kept ``log_history_s``: older ones are not seen)."""
        base = self.table_location(schema, table)
        ids: list[int] = []
        for log in (fs.join(base, "_delta_log"), fs.join(changelog.log_path(base), "_delta_log")):
            ids.extend(self._logged_batch_ids(log))
        parts = self._staged_if_any()
        if parts is not None:
            ids.extend(parts.batch_ids(base))
        return sorted(set(ids))

    def _logged_batch_ids(self, log: str) -> list[int]:
        ids: list[int] = []
        for name in fs.listdir(log):
            if not name.endswith(".json"):
                continue
            commit_ids: list[int] = []
            listed: list[int] = []
            try:
                text = fs.read_text(fs.join(log, name))
            except FileNotFoundError:
                continue  # cleaned up behind a checkpoint since it was listed
            for line in text.splitlines():
                if not line.strip():
                    continue
                action = json.loads(line)
                txn = action.get("txn")
                if txn and txn.get("appId") == self.app_id:
                    commit_ids.append(int(txn["version"]))
                flushed = (action.get("commitInfo") or {}).get(staged.FLUSHED_BATCHES)
                if flushed:  # a flush of staged parts: every batch it appended
                    listed = [int(b) for b in str(flushed).split(",")]
            ids.extend(listed if listed else commit_ids)
        return ids

    @typed_storage_errors
    def read(self, schema: str, table: str) -> Any:
        """The current state of one mirrored table as a pyarrow Table (merge-on-read: its base overlaid with the
        newer changes of its log, exact whatever fold is under way)."""
        return changelog.current_state(self.table_location(schema, table))

    # -- folds (merge_on_read) -----------------------------------------------------------------------------------

    @typed_storage_errors
    def fold(self, schema: str | None = None, table: str | None = None) -> list[FoldResult]:
        """Fold now, in this thread: one table, or every table that has a change log (its staged changes appended
        to it first); returns what each fold did."""
        if (schema is None) != (table is None):
            raise MirrorError("fold() takes both schema and table, or neither")
        if schema is not None and table is not None:
            return [self._fold_now(self.table_location(schema, table))]
        return [self._fold_now(fs.join(self.root, name)) for name, _pair in self._table_directories()]

    def wait_for_folds(self) -> None:
        """Wait until every background fold started so far has ended."""
        with self._fold_lock:
            pending = list(self._pending_folds.values())
        for future in pending:
            future.exception()

    @typed_storage_errors
    def close(self) -> None:
        """Append the staged changes to their change logs, wait for background folds and stop the mirror's threads
        (it can still apply batches afterwards)."""
        self.flush_staged()
        self.wait_for_folds()
        for pool in (self._fold_pool, self._table_pool):
            if pool is not None:
                pool.shutdown(wait=True)
        self._fold_pool = self._table_pool = None
        if self._lease is not None:
            self._lease.release()

    def __enter__(self) -> DeltaMirror:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _settle(self, path: str) -> None:
        """Wait for a background fold of the table at ``path`` (before a step rewrites, moves or drops it)."""
        with self._fold_lock:
            future = self._pending_folds.get(path)
        if future is not None:
            future.exception()

    def _fold_now(self, path: str) -> FoldResult:
        self._flush(path)
        self._settle(path)
        result = self._fold(path)
        self._folded(path, result)
        return result

    def _fold(self, path: str) -> FoldResult:
        """Fold the table at ``path``, trimming its log by whole files when no other writer appends to the logs."""
        by_files = self.sole_log_writer and not self.tasks_append
        return changelog.fold(
            path,
            name=os.path.basename(path),
            appends=self._appends(path),
            by_files=by_files,
            retention_s=self.retention_hours * 3600.0,
        )

    def _folded(self, path: str, result: FoldResult, size: changelog.LogSize | None = None) -> None:
        """Record a fold, and the log's size after it (None: read from the Delta logs when next needed)."""
        with self._fold_lock:
            self.folds.append(result)
            self._sized(path, size)
        self._fold_health.succeeded([path])

    def hold_lease(self) -> None:
        """Take (or renew) this mirror's lease on its root and app id; :class:`~canal.lake.types.MirrorLeaseError`
        when another live mirror writes them (:mod:`canal.lake.lease`)."""
        if self._lease is None:
            self._lease = WriterLease(self.root, self.app_id, self)
        self._lease.hold()

    def check_folds(self) -> None:
        """:class:`~canal.lake.types.MirrorFoldError` when a table's folds failed ``max_fold_failures`` times in a
        row (:mod:`canal.lake.health`); :meth:`apply` asks first."""
        self._fold_health.check(lambda path: Path(path).name)

    def metrics(self) -> MirrorMetrics:
        """How the mirror is doing in this process: batches applied, folds done and failed (tables failing in a row),
        staged parts held."""
        parts = self._staged_parts
        health = self._fold_health
        with health.lock:
            failures, last = health.failures, health.last_error
        return MirrorMetrics(
            batches=self._applied_batches,
            folds=health.done,
            fold_failures=failures,
            failing_folds=health.by_name(lambda path: Path(path).name),
            last_fold_error=last,
            staged_tables=0 if parts is None else len(parts.tables),
            staged_rows=0 if parts is None else parts.rows,
            staged_bytes=0 if parts is None else parts.bytes,
        )

    def _sized(self, path: str, size: changelog.LogSize | None) -> None:
        if size is None:
            self._log_sizes.pop(path, None)
        else:
            self._log_sizes[path] = size

    def _log_size(self, path: str) -> changelog.LogSize:
        size = self._log_sizes.get(path)
        if size is None:
            size = self._log_sizes[path] = changelog.log_size(path, self._handle(path), self._log_handle(path))
        return size

    def _appended(self, path: str, rows: int) -> None:
        """The change log of the table at ``path`` took ``rows`` in a file of their own (in this batch)."""
        self._written.add(path)
        with self._fold_lock:
            size = self._log_sizes.get(path)
            if size is not None:
                self._log_sizes[path] = changelog.LogSize(size.log_rows + rows, size.log_files + 1, size.base_rows)

    def fold_due(self, path: str) -> bool:
        """Whether the change log of the table at ``path`` is big enough to fold (``fold_ratio``, ``fold_files``)."""
        size = self._log_size(path)
        if size.log_rows == 0:
            return False
        return size.log_rows >= self.fold_ratio * max(size.base_rows, 1) or size.log_files >= self.fold_files

    def _schedule_folds(self, paths: Iterable[str]) -> list[str]:
        """Start the folds due among ``paths`` (and the compaction of logs of many files that are not due): in the
        background, or now without ``background_folds``. The tables whose fold started."""
        logs = [p for p in sorted(set(paths)) if delta_append.is_table(changelog.log_path(p))]
        due = [p for p in logs if self.fold_due(p)]
        scattered = [p for p in logs if p not in due and self._log_size(p).log_files >= changelog.COMPACT_FILES]
        if not self.background_folds:
            for path in due:
                self._fold_now(path)
            for path in scattered:
                self._compact_claimed(path)
            return [Path(path).name for path in due]
        for path in self.claim_folds(scattered):
            self.run_folds([path], functools.partial(self._compact_claimed, path), sizes_known=True)
        started = self.claim_folds(due)
        for path in started:
            self.run_folds([path], functools.partial(self._fold_claimed, path), sizes_known=True)
        return [Path(path).name for path in started]

    def _compact_claimed(self, path: str) -> None:
        changelog.compact(changelog.log_path(path), self._appends(path))
        size = self._measured_log(path)
        with self._fold_lock:
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

    def claim_folds(self, paths: Iterable[str]) -> list[str]:
        """The tables (base paths) among ``paths`` whose fold is not under way, now marked as under way: the caller
        must hand them to :meth:`run_folds`."""
        claimed: list[str] = []
        with self._fold_lock:
            for path in paths:
                if path not in self._pending_folds:
                    self._pending_folds[path] = Future()
                    claimed.append(path)
        return claimed

    def run_folds(self, paths: list[str], fold: Callable[[], object], *, sizes_known: bool = False) -> None:
        """Run ``fold`` (which folds the claimed tables ``paths``) in a background thread; a fold that fails is logged
        and left to a later batch (the log stays, and reads exactly), and counted: after ``max_fold_failures`` in a
        row the next batch is refused (:meth:`check_folds`). The logs' sizes are read
        anew by the next batch that needs them, unless ``sizes_known`` (``fold`` records them) and it succeeded."""
        if self._fold_pool is None:
            self._fold_pool = ThreadPoolExecutor(self.fold_workers, thread_name_prefix="pycanal-fold")
        with self._fold_lock:
            claims = [self._pending_folds[path] for path in paths]

        def run() -> None:
            error: BaseException | None = None
            try:
                fold()
            except Exception as exc:
                error = exc
                names = ", ".join(Path(path).name for path in paths)
                with self._fold_lock:
                    self.fold_errors.append(f"{names}: {type(exc).__name__}: {str(exc)[:ERROR_CHARS]}")
                if not isinstance(exc, changelog.FoldRaceError):  # a lost race did no harm (mirror_health)
                    self._fold_health.failed(list(paths), exc)
                self._log.warning("fold of %s failed (tried again after a later batch): %s", names, exc)
            else:  # (a fold done here was counted by _folded)
                self._fold_health.succeeded(list(paths), folded=False)
            finally:
                with self._fold_lock:
                    for path in paths:
                        self._pending_folds.pop(path, None)
                        if error is not None or not sizes_known:
                            self._log_sizes.pop(path, None)
                for claim in claims:
                    if error is None:
                        claim.set_result(None)
                    else:
                        claim.set_exception(error)

        self._fold_pool.submit(run)

    def vacuum(self, retention_hours: int = 168) -> dict[str, int]:
        """Delete the data files of every mirrored table that no table version of the last ``retention_hours``
        still references (each MERGE rewrites the files it touches; the old ones stay for time travel until now).

        Returns the number of files deleted per table. Replays are still recognised afterwards: the applied batch
        ids live in the Delta log, which vacuum does not touch. Below Delta's 168-hour default, readers of older
        versions lose them -- which a mirror that only reads its latest version does not mind.
        """
        if retention_hours < 0:
            raise MirrorError(f"retention_hours must be >= 0, got {retention_hours}")
        self.wait_for_folds()  # a fold's files are not referenced until it commits: vacuum must not see them
        deleted: dict[str, int] = {}
        for name, pair in self._table_directories():
            table = fs.delta_table(fs.join(self.root, name))
            files = table.vacuum(
                retention_hours=retention_hours, dry_run=False, enforce_retention_duration=retention_hours >= 168
            )
            deleted[naming.display(*pair)] = len(files)
        return deleted

    # -- applying ------------------------------------------------------------------------------------------------

    COLUMNS = MIRROR_COLUMNS

    def __call__(self, changes: Any, batch_id: int) -> None:
        """``foreachBatch`` entry point: a Spark DataFrame is written by Spark tasks, a table per task, when
        ``on_executors`` (:func:`canal.spark.mirror_tasks.apply_on_executors`); anything else by :meth:`apply`."""
        if self.on_executors and hasattr(changes, "sparkSession"):
            from canal.spark.mirror_tasks import apply_on_executors

            apply_on_executors(self, changes, batch_id)
        else:
            self.apply(changes, batch_id)

    def new_result(self, batch_id: int) -> ApplyResult:
        return ApplyResult(batch_id)

    def table_stats(self, name: str) -> TableStats:
        """The running statistics of one table (by its directory name: ``schema.table`` for plain names)."""
        return self.stats.setdefault(name, TableStats())

    def __reduce__(self) -> tuple[Any, ...]:
        """A mirror pickles as its settings: Spark Connect pickles ``foreachBatch``'s function (a mirror, or a
        function closing over one) into the server's Python process, where a mirror of the same settings is built.
        What a mirror holds at run time (table handles, thread pools, locks, the writer lease, records) is this
        process's and does not travel."""
        return (_rebuild, (type(self), self.settings()))

    def settings(self) -> dict[str, Any]:
        """The constructor arguments of this mirror (what a Spark task builds its own from)."""
        return {
            "root": self.root,
            "storage_options": self.storage_options or None,
            "app_id": self.app_id,
            "tables": None if self.only is None else sorted(self.only),
            "zero_dates": self.zero_dates,
            "optimize_every": self.optimize_every,
            "vacuum_every": self.vacuum_every,
            "retention_hours": self.retention_hours,
            "file_bytes": self.file_bytes,
            "mode": self.mode,
            "fold_ratio": self.fold_ratio,
            "fold_files": self.fold_files,
            "background_folds": self.background_folds,
            "fold_workers": self.fold_workers,
            "on_executors": self.on_executors,
            "log_history_s": self.log_history_s,
            "stage_rows": self.stage_rows,
            "stage_spread": self.stage_spread,
            "stage_bytes": self.stage_bytes,
            "max_fold_failures": self.max_fold_failures,
        }

    @typed_storage_errors
    def apply(self, changes: Any, batch_id: int, *, steps_journal: bool = True, fold: bool = True) -> ApplyResult:
        """Apply one batch of change rows (a DataFrame, pyarrow Table or RecordBatch) as batch ``batch_id``.

        The batch is applied as an ordered list of steps (:func:`_steps`): each table's DML rows up to the next
        DDL that touches it, reduced to the last change per key under the one layout they were written in and
        merged at once, then that DDL, then the table's next rows, and so on -- as the source applied them. A batch
        without DDL is one step per table. The steps done are journaled beside the tables, so a batch replayed
        after a crash goes on after the last step done and never applies one twice.

        ``steps_journal=False`` (a Spark task writing one table's part of a batch without DDL): no step journal; a table
        whose last committed batch id is ``>= batch_id`` is skipped. ``fold=False``: start no fold after the batch
        (the caller schedules them, :meth:`fold_due`)."""
        began = time.perf_counter()
        self.check_folds()  # nothing of the batch written while a table's folds keep failing
        result = ApplyResult(batch_id)
        self._staged_by_batch, self._flushed_by_batch = [], []
        table = _to_arrow_table(changes)
        if table is None or table.num_rows == 0:
            self.history.append(result)
            return result
        table = self._ordered(table)
        result.rows = table.num_rows
        newest, before = None, None
        if steps_journal:
            self.hold_lease()  # one writer (and reader) of the root's journal per app id (canal.lake.lease)
            # a batch id finished already with changes after the position it reached: a new query (canal.lake.applied)
            newest = newest_position(table)
            before = check_batch(self.root, self.app_id, batch_id, newest)
        journal = self._read_journal() if steps_journal else None
        if journal is not None and journal[0] > batch_id:
            for name in self._plan(table):
                result.tables[name] = "skipped"  # a later batch was applied: this one is a replay
                self.stats.setdefault(name, TableStats()).skipped += 1
            self.history.append(result)
            return result
        done = journal[1] if journal is not None and journal[0] == batch_id else 0
        # XA: prepared rows held until their XA COMMIT (canal.lake.xa); statements stop (mirror_stops)
        table, hold = HeldTransactions(held_directory(self.root, self.app_id)).follow(table, batch_id)
        check_statements(table)
        # foreign keys' actions the binlog does not log: the children's rows added (canal.lake.cascade);
        # a cascade without the source's foreign keys stops (mirror_stops)
        kept = ExpandedBatch(self.root, self.app_id)
        if steps_journal:
            kept.drop_before(batch_id)
        expanded = kept.load(batch_id) if done else None  # a replay: the batch its journaled steps counted
        if expanded is None:
            expanded = expand_cascades(table, self._current_rows, self._mirrors)
            if steps_journal and expanded.num_rows != table.num_rows:
                kept.save(batch_id, expanded)
        table = expanded
        check_cascades(table, self._holds)
        if "before" in table.column_names:
            table = table.drop_columns(["before"])
        # a mirror written before it kept a step journal knows its replays by each table's last batch id only
        journaled = journal is not None
        # every step planned and its rows typed before any is applied: a value that does not convert fails the
        # batch with nothing written
        steps: list[_RenamePair | dict[str, _TablePlan]] = []
        for number, step in enumerate(_steps(table, self.only)):
            if isinstance(step, _RenamePair):
                steps.append(step)
                continue
            plans = self._plan(table.take(step))
            if number >= done:
                self._type_sources([plan for plan in plans.values() if plan.layout is not None])
            steps.append(plans)
        result.prepare_s = time.perf_counter() - began
        hold()
        if any(isinstance(step, _RenamePair) or any(p.ddl or p.truncate for p in step.values()) for step in steps):
            self.flush_staged()  # DDL rewrites, moves, clears or drops change logs: nothing staged may outlive that
        # a table's batch id is committed once, with its last step of the batch (its earlier steps commit without)
        last_step = {name: number for number, step in enumerate(steps) if isinstance(step, dict) for name in step}
        # a table renamed by a later pair of a RENAME TABLE commits without it, as one renamed by ALTER does: its change
        # log moves to the new name, whose later rows of the batch (staged, maybe) must not read as recorded already
        renamed_at = {
            name: number
            for number, step in enumerate(steps)
            if isinstance(step, _RenamePair)
            for name in (step.old, step.new)
        }
        for number, step in enumerate(steps):
            if number < done:  # applied before a crash: a replay skips it
                for name in [step.old] if isinstance(step, _RenamePair) else list(step):
                    if name not in result.tables:
                        result.tables[name] = "skipped"
                        self.stats.setdefault(name, TableStats()).skipped += 1
                continue
            if isinstance(step, _RenamePair) or any(p.ddl or p.truncate for p in step.values()):
                # the parts the batch's earlier steps staged go to their logs before a DDL step moves, rewrites or
                # drops a table (a part staged under a name renamed away was appended to no table)
                self.flush_staged()
            self._step = (batch_id, number) if steps_journal else None
            if isinstance(step, _RenamePair):
                self._rename_pair(step)
                result.tables.setdefault(step.old, "applied")
            else:
                merge_began = time.perf_counter()

                def one(name: str, plan: _TablePlan, number: int = number, journaled: bool = journaled) -> bool:
                    stats = self.stats.setdefault(name, TableStats())
                    stats.changes += plan.rows
                    record = last_step[name] == number and renamed_at.get(name, -1) < number
                    return self._apply_table(plan, batch_id, stats, check_version=not journaled, record=record)

                if len(step) > 1 and not any(plan.ddl or plan.truncate for plan in step.values()):
                    # tables of a step without DDL are independent: each its own Delta commits, in parallel (the
                    # fixed cost of a commit is most of a small table's part of a batch)
                    if self.mode == "merge_on_read":
                        # applied here, one table after another; the appends that go through deltalake (a new
                        # log's first) written by the pool meanwhile
                        outcomes = self._with_deferred_appends(functools.partial(_each, one, step))
                    else:
                        outcomes = dict(zip(step, self._tables_pool().map(one, step, step.values()), strict=True))
                else:
                    outcomes = {name: one(name, plan) for name, plan in step.items()}
                result.merge_s += time.perf_counter() - merge_began
                for name, applied in outcomes.items():
                    if applied or name not in result.tables:
                        result.tables[name] = "applied" if applied else "skipped"
                    if applied:
                        self._compact.add(name)
            self._step = None
            if steps_journal:
                self._write_journal(batch_id, number + 1)
                journaled = True
        if self._staged_parts is not None and self._staged_parts.tables:
            for path in self._staged_parts.due(self.stage_rows, self.stage_spread, self.stage_bytes):
                self._flush(path)
        result.staged = sorted(Path(path).name for path in self._staged_by_batch)
        result.flushed = sorted(Path(path).name for path in self._flushed_by_batch)
        if any(state == "applied" for state in result.tables.values()):
            self._applied_batches += 1
            result.maintenance_s = self._maintain()
        if self._written:
            written, self._written = self._written, set()
            if fold:
                result.folds = self._schedule_folds(written)
            else:  # the caller folds: sizes read anew, as other processes fold these tables
                for path in written:
                    self._log_sizes.pop(path, None)
                result.folds = sorted(Path(path).name for path in written if self.fold_due(path))
        if steps_journal:
            record_batch(self.root, self.app_id, before, batch_id, newest)
        self.history.append(result)
        return result

    def _tables_pool(self) -> ThreadPoolExecutor:
        if self._table_pool is None:
            self._table_pool = ThreadPoolExecutor(TABLE_WORKERS, thread_name_prefix="pycanal-mirror")
        return self._table_pool

    def _with_deferred_appends(self, run: Callable[[], T]) -> T:
        """``run()`` (a step's tables, one after another), its change-log appends gathered and written once it has
        planned every table (:meth:`_commit_appends`), those through deltalake by the tables pool meanwhile; returns
        once every one of them is written (the first append error raised, as the error of ``run()`` would be)."""
        self._deferred = []
        self._step_appends = []
        try:
            outcome = run()
            appends, self._step_appends = self._step_appends, None
            self._commit_appends(appends)
        finally:
            self._step_appends = None
            deferred, self._deferred = self._deferred, None
            for future in deferred:
                future.exception()  # every append ended before the step does, whatever happened
        for future in deferred:
            future.result()
        return outcome

    def _journal_path(self) -> str:
        return fs.join(self.root, f"_pycanal_steps.{self.app_id}.json")

    def _read_journal(self) -> tuple[int, int] | None:
        """(batch id, steps done) of the last batch this mirror's app id applied; None before its first."""
        path = self._journal_path()
        try:
            data = json.loads(fs.read_text(path))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise MirrorError(f"the mirror's step journal {path} cannot be read: {exc}") from exc
        if not isinstance(data, dict) or not all(isinstance(data.get(k), int) for k in ("batch", "done")):
            raise MirrorError(f"the mirror's step journal {path} is damaged: {data!r}")
        return int(data["batch"]), int(data["done"])

    def _write_journal(self, batch_id: int, done: int) -> None:
        fs.write_bytes(self._journal_path(), json.dumps({"batch": batch_id, "done": done}).encode())

    def _rename_pair(self, pair: _RenamePair) -> None:
        """One pair of a RENAME TABLE: the mirror table's directory moves (a table the mirror does not hold, or
        moved already by a replayed step, moves nothing)."""
        moved_to = naming.parse(pair.new)
        assert moved_to is not None  # _steps names the pair by directory names
        self._move(fs.join(self.root, pair.old), moved_to)

    @staticmethod
    def _ordered(table: Any) -> Any:
        """The mirror's columns of a batch, in ``seq`` order (a stable sort: ties keep their arrival order), each
        DDL row named by the schema of the table its statement changes: a change row's ``schema`` for a statement is
        the session's database, and ``ALTER TABLE db.t ...`` run from another one changes ``db.t``."""
        import pyarrow as pa
        import pyarrow.compute as pc

        table = table.select(_mirror_columns(table.column_names))
        if table.num_rows > 1 and not _ascending(table.column("seq")):
            table = table.take(pc.sort_indices(table, sort_keys=[("seq", "ascending")]))
        is_ddl = pc.fill_null(table.column("is_ddl"), False)
        if not _any(is_ddl):
            return table
        schemas = table.column("schema").to_pylist()
        folds = fold_flags(table)
        changed = False
        dropped: dict[int, list[TableName]] = {}  # row of a DROP TABLE of several tables -> them
        for row in pc.indices_nonzero(is_ddl).to_pylist():
            stmt = ddl_statement(table.column("sql")[row].as_py(), folds[row])
            named = getattr(stmt, "table", None) if not isinstance(stmt, RenameTable) else None
            if isinstance(stmt, DropTable) and len(stmt.tables) == 1:
                named = stmt.tables[0]
            elif isinstance(stmt, DropTable) and not stmt.temporary:
                dropped[row] = [t.qualified(schemas[row]) for t in stmt.tables]
            if named is not None and named.schema is not None and named.schema != schemas[row]:
                schemas[row] = named.schema
                changed = True
        if changed:
            table = table.set_column(table.column_names.index("schema"), "schema", pa.array(schemas, pa.string()))
        if dropped:
            table = drops.one_per_table(table, dropped)
        return table

    def _maintain(self) -> float:
        """Scheduled upkeep, so a long-running mirror needs none by hand: every ``optimize_every`` applied batches,
        compact the tables written since the last compaction (each MERGE adds files; many small files slow reads
        and MERGEs); every ``vacuum_every``, :meth:`vacuum` with ``retention_hours``. Neither touches the batch ids
        in the Delta log: replays are still skipped."""
        began = time.perf_counter()
        n = self._applied_batches
        if self.optimize_every is not None and n % self.optimize_every == 0:
            for name in sorted(self._compact):
                path = fs.join(self.root, name)
                self._settle(path)  # a fold writes the base too: one writer at a time
                if fs.is_delta_table(path):
                    self._handle(path).optimize.compact()
            self._compact.clear()
        if self.vacuum_every is not None and n % self.vacuum_every == 0:
            self.vacuum(self.retention_hours)
        return time.perf_counter() - began

    def _plan(self, table: Any) -> dict[str, _TablePlan]:
        """Reduce a batch to per-table plans with Arrow kernels; only DDL rows (few) are looked at in Python.

        The outcome is that of walking the rows in ``seq`` order (ties in arrival order): a row belongs to the table
        ``(schema, table)``, its plan named by its directory (rows without a table name, and tables outside
        ``tables=``, are dropped); DDL rows are
        kept in order and TRUNCATE/ERASE forgets the table's earlier DML rows; DML rows with null keys or columns
        are ignored; the table layout is its last DML row's ``columns``; per ``keys`` text the last change wins.
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        table = table.select([*MIRROR_COLUMNS, *(["props"] if "props" in table.column_names else [])])  # fold_flags
        if table.num_rows > 1 and not _ascending(table.column("seq")):
            table = table.take(pc.sort_indices(table, sort_keys=[("seq", "ascending")]))  # a stable sort
        names = table.column("table")
        named = pc.fill_null(pc.not_equal(names, ""), False)
        if not _all(named):
            table = table.filter(named)
        # ``tables=`` names tables as ``schema.table`` (a null schema reads "None")
        full = pc.binary_join_element_wise(
            table.column("schema"), table.column("table"), ".", null_handling="replace", null_replacement="None"
        )
        if self.only is not None:
            chosen = pc.is_in(full, value_set=pa.array(sorted(self.only), type=pa.string()))
            if not _all(chosen):
                table = table.filter(chosen)
                full = full.filter(chosen)
        n = table.num_rows
        plans: dict[str, _TablePlan] = {}
        if n == 0:
            return plans
        # a table is its (schema, table) pair, joined by NUL, which no MariaDB name holds: names with dots stay apart
        pair = pc.binary_join_element_wise(
            table.column("schema"), table.column("table"), "\0", null_handling="replace", null_replacement="None"
        )
        if isinstance(pair, pa.ChunkedArray):
            pair = pair.combine_chunks()
        # dictionary order is first appearance, which is the order plans are applied in
        encoded = pc.dictionary_encode(pair)
        tid = encoded.indices.cast(pa.int64())
        pos = _positions(n)
        per_table = pa.table({"tid": tid, "pos": pos}).group_by("tid").aggregate([("pos", "min"), ("pos", "count")])
        firsts = per_table.column("pos_min")
        heads = pa.table(
            {
                "tid": per_table.column("tid"),
                "schema": table.column("schema").take(firsts),
                "table": table.column("table").take(firsts),
                "rows": per_table.column("pos_count"),
            }
        ).sort_by("tid")
        # a plan is named by its table's directory (naming.directory): ``schema.table`` for plain names
        full_names: list[str] = []
        for _t, schema, name, rows in zip(*(heads.column(c).to_pylist() for c in heads.column_names), strict=True):
            full_names.append(naming.display(schema, name))
            plan = plans[naming.directory(schema, name)] = _TablePlan(schema, name)
            plan.rows = rows
        by_tid = list(plans.values())

        is_ddl = pc.fill_null(table.column("is_ddl"), False)
        truncated_at: dict[int, int] = {}
        if _any(is_ddl):
            at = pc.indices_nonzero(is_ddl)
            folds = fold_flags(table)
            ddl_rows = zip(
                at.to_pylist(),
                tid.take(at).to_pylist(),
                table.column("type").take(at).to_pylist(),
                table.column("sql").take(at).to_pylist(),
                strict=True,
            )
            moved_first: dict[str, list[str]] = {}  # plan -> plans of tables renamed to it (applied before it)
            for row, t, kind, sql in ddl_rows:
                plan = by_tid[t]
                if kind in ("TRUNCATE", "ERASE"):
                    truncated_at[t] = row
                    plan.truncate = True
                # a rename belongs to the table it renames (its rows before the rename merge there, then it moves)
                olds = renamed_tables(sql or "", plan.schema, folds[row])
                for old_schema, old_table in olds:
                    if self.only is not None and naming.display(old_schema, old_table) not in self.only:
                        continue
                    old_name = naming.directory(old_schema, old_table)
                    if old_name not in plans:
                        plans[old_name] = _TablePlan(old_schema, old_table)
                        moved_first.setdefault(naming.directory(plan.schema, plan.table), []).append(old_name)
                    plans[old_name].ddl.append((row, kind, sql or ""))
                    plans[old_name].fold_names |= folds[row]
                if not olds:
                    plan.ddl.append((row, kind, sql or ""))
                    plan.fold_names |= folds[row]
            if moved_first:
                ordered: dict[str, _TablePlan] = {}
                for name, plan in plans.items():
                    for old_name in moved_first.get(name, ()):
                        ordered[old_name] = plans[old_name]
                    ordered.setdefault(name, plan)
                plans.clear()
                plans.update(ordered)

        keys = table.column("keys")
        dml = pc.and_(pc.invert(is_ddl), pc.and_(pc.is_valid(keys), pc.is_valid(table.column("columns"))))
        if not _any(dml):
            return plans
        keyless = pc.and_(dml, pc.fill_null(pc.equal(keys, "{}"), False))
        if _any(keyless):
            full = full_names[tid[pc.indices_nonzero(keyless)[0].as_py()].as_py()]  # the first such row's table
            raise MirrorError(f"{full} has no primary key; the mirror needs one to apply updates and deletes")
        rows = pa.table({"tid": tid, "pos": pos, "keys": keys}).filter(dml)
        # the layout is the last DML row's, even one a later TRUNCATE discards
        last_rows = rows.group_by("tid").aggregate([("pos", "max")])
        layouts = table.column("columns").take(last_rows.column("pos_max")).to_pylist()
        for t, layout in zip(last_rows.column("tid").to_pylist(), layouts, strict=True):
            by_tid[t].layout = layout
        # Each change at row ``pos`` gets order 2*pos+1. An UPDATE that changed the primary key also deletes its old
        # key, just before it (order 2*pos): MySQL keeps keys unique after every row, so walking the changes in
        # order and keeping the last one per key gives the source's final rows, also for keys changed twice,
        # swapped through a third value, or changed and then deleted.
        changes = pa.table({"tid": tid, "order": pc.add(pc.multiply(pos, 2), 1), "keys": keys}).filter(dml)
        old_keys = table.column("old_keys")
        moved = pc.and_(dml, pc.is_valid(old_keys))
        if _any(moved):
            old = pa.table(
                {"tid": tid.filter(moved), "order": pc.multiply(pos.filter(moved), 2), "keys": old_keys.filter(moved)}
            )
            changes = pa.concat_tables([changes, old.cast(changes.schema)])
        if truncated_at:
            cut = pa.array([2 * truncated_at.get(t, -1) for t in range(len(by_tid))], type=pa.int64())
            changes = changes.filter(pc.greater(changes.column("order"), cut.take(changes.column("tid"))))
        # the last change per (table, key); orders are unique, and an even order is an old key's delete
        winners = changes.group_by(["tid", "keys"]).aggregate([("order", "max")])
        winners = winners.sort_by([("tid", "ascending"), ("order_max", "ascending")])
        order = winners.column("order_max")
        old_key = pc.equal(pc.bit_wise_and(order, 1), 0)
        at = pc.shift_right(order, 1)  # the change row (for an old key's delete: the UPDATE's row)
        updated = pc.fill_null(pc.not_equal(table.column("type").take(at), "DELETE"), True)
        deletes = pc.or_(old_key, pc.invert(updated))
        kept_keys = winners.column("keys")
        kept_after = pc.if_else(old_key, pa.scalar(None, pa.string()), table.column("after").take(at))
        seqs = table.column("seq").take(at)
        counts = winners.group_by("tid").aggregate([("order_max", "count")]).sort_by("tid")
        offset = 0
        for t, count in zip(*(counts.column(c).to_pylist() for c in ("tid", "order_max_count")), strict=True):
            plan = by_tid[t]
            plan.deletes = deletes.slice(offset, count)
            plan.keys = kept_keys.slice(offset, count)
            plan.after = kept_after.slice(offset, count)
            plan.at = at.slice(offset, count)
            plan.seq = seqs.slice(offset, count)
            offset += count
        return plans

    def _type_sources(self, plans: list[_TablePlan]) -> None:
        """Each plan's MERGE source (``plan.source``, :meth:`_source`). The images of plans of one layout (a sharded
        table's shards: ``t00`` .. ``t49`` of one definition) are parsed in one call, whose fixed cost a batch spread
        over many such tables would otherwise pay per table; the same layout types them the same way."""
        groups: dict[str, list[_TablePlan]] = {}
        for plan in plans:
            assert plan.layout is not None
            groups.setdefault(plan.layout, []).append(plan)
        for layout, group in groups.items():
            if len(group) > 1 and self._type_together(layout, group):
                continue
            for plan in group:
                plan.source = self._source(plan)

    def _type_together(self, layout_text: str, group: list[_TablePlan]) -> bool:
        """The sources of ``group`` (plans of the layout ``layout_text``) typed by one parse; False when they were
        not (an image or a value the shared path does not take: each plan is then typed alone, and a value that does
        not convert is named with its table)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        if any(plan.deletes is None or plan.keys is None or plan.after is None for plan in group):
            return False
        layout = json.loads(layout_text)

        def chunks(array: Any) -> list[Any]:
            return list(array.chunks) if isinstance(array, pa.ChunkedArray) else [array]

        deletes = pa.chunked_array([c for plan in group for c in chunks(plan.deletes)], pa.bool_())
        keys = pa.chunked_array([c for plan in group for c in chunks(plan.keys)], pa.string())
        after = pa.chunked_array([c for plan in group for c in chunks(plan.after)], pa.string())
        try:
            columns = _parse_images(pc.if_else(deletes, keys, after), layout, self.zero_dates)
        except MirrorTypeError:
            return False
        if columns is None:
            return False
        names = [c[0] for c in layout]
        key_names = [c[0] for c in layout if c[2]]
        arrays = [*columns, pc.if_else(deletes, "d", "u")]
        arrays = [a if isinstance(a, pa.ChunkedArray) else pa.chunked_array([a]) for a in arrays]
        whole = pa.Table.from_arrays(arrays, names=[*names, OP_COLUMN])
        offset = 0
        for plan in group:
            assert plan.deletes is not None
            plan.source = (whole.slice(offset, len(plan.deletes)), key_names)
            offset += len(plan.deletes)
        return True

    def _source(self, plan: _TablePlan) -> tuple[Any, list[str]]:
        """The MERGE source: the plan's last changes as typed columns plus the operation column; a value that does
        not convert exactly is a MirrorTypeError naming the table, the column and the value."""
        try:
            return self._typed_source(plan)
        except MirrorTypeError as exc:
            raise MirrorTypeError(f"{plan.schema}.{plan.table}: {exc}") from None

    def _typed_source(self, plan: _TablePlan) -> tuple[Any, list[str]]:
        import pyarrow as pa
        import pyarrow.compute as pc

        assert plan.layout is not None
        layout = json.loads(plan.layout)
        names = [c[0] for c in layout]
        key_names = [c[0] for c in layout if c[2]]
        if plan.deletes is None:
            deletes, keys, after = pa.array([], pa.bool_()), pa.array([], pa.string()), pa.array([], pa.string())
        else:
            deletes, keys, after = plan.deletes, plan.keys, plan.after
        columns = _parse_images(pc.if_else(deletes, keys, after), layout, self.zero_dates)
        if columns is None:
            return self._source_slow(layout, deletes, keys, after, self.zero_dates), key_names
        arrays = [*columns, pc.if_else(deletes, "d", "u")]
        arrays = [a if isinstance(a, pa.ChunkedArray) else pa.chunked_array([a]) for a in arrays]
        return pa.Table.from_arrays(arrays, names=[*names, OP_COLUMN]), key_names

    @staticmethod
    def _source_slow(layout: Any, deletes: Any, keys: Any, after: Any, zero_dates: ZeroDates = "error") -> Any:
        """The MERGE source built in Python, value by value: for the layouts and images the Arrow path does not
        take on (odd JSON, duplicate names, null images), with their original outcome, errors included."""
        import pyarrow as pa

        names = [c[0] for c in layout]
        values: dict[str, list[str | None]] = {n: [] for n in names}
        ops: list[str] = []
        for delete, key, image_text in zip(deletes.to_pylist(), keys.to_pylist(), after.to_pylist(), strict=True):
            image: dict[str, str | None]
            if delete:
                image = json.loads(key)
            else:
                assert image_text is not None
                image = json.loads(image_text)
            for n in names:
                values[n].append(image.get(n))
            ops.append("d" if delete else "u")
        arrays = [
            _typed_column(n, lambda n=n, t=t: typed_array(values[n], arrow_type(t), zero_dates)) for n, t, _k in layout
        ]
        arrays.append(pa.array(ops, type=pa.string()))
        return pa.Table.from_arrays(arrays, names=[*names, OP_COLUMN])

    def _handle(self, path: str) -> Any:
        """The Delta table at ``path``, opened once and brought up to date on each use by reading only the commits
        since: opening it anew replays its log from the last checkpoint (up to 100 commits, tens of milliseconds),
        which every micro-batch would pay twice per table. Statements that rewrite, drop or move a table forget its
        handle (:meth:`_forget`)."""
        handle = self._handles.get(path)
        if handle is None:
            handle = self._handles[path] = fs.delta_table(path)
        else:
            handle.update_incremental()
        return handle

    def _new_table_configuration(self) -> dict[str, str | None]:
        return {"delta.targetFileSize": str(self.file_bytes)}

    def _forget(self, *paths: str) -> None:
        for path in paths:
            self._handles.pop(path, None)
            self._handles.pop(changelog.log_path(path), None)
            self._direct_state.pop(changelog.log_path(path), None)
            self._log_keys.pop(path, None)

    def _appends(self, path: str) -> threading.Lock:
        """The lock this process's appends to the table's change log and its folds' trims hold."""
        with self._fold_lock:
            lock = self._append_locks.get(path)
            if lock is None:
                lock = self._append_locks[path] = threading.Lock()
            return lock

    def _apply_table(
        self, plan: _TablePlan, batch_id: int, stats: TableStats, *, check_version: bool = True, record: bool = True
    ) -> bool:
        import pyarrow.compute as pc
        from deltalake import CommitProperties, Transaction

        path = self.table_location(plan.schema, plan.table)
        self._recovered(path)
        exists = delta_append.is_table(path)
        evolution = self._evolution(plan, path if exists else None)
        merge_on_read = self.mode == "merge_on_read"
        if exists and merge_on_read and (evolution is not None or plan.truncate):
            # DDL applies to the base alone: fold the log into it first (its columns may be newer than the base's)
            self._fold_now(path)
            evolution = self._evolution(plan, path)
        if not exists:
            self._forget(path)
        moved_to = None if evolution is None else evolution.moved_to
        if moved_to is not None and not exists and fs.is_delta_table(self.table_location(*moved_to)):
            stats.skipped += 1  # renamed already, after its rows of this batch were merged
            return False
        if exists and check_version:  # a mirror without a step journal (written before it had one)
            done = self._batch_version(path, self._handle(path))
            if done is not None and done >= batch_id:
                stats.skipped += 1
                return False
        # a table renamed in this batch commits without the batch id: the rows after the rename (under the new
        # name) are the batch's, and must not be skipped as already applied
        commit = (
            CommitProperties()
            if moved_to is not None or not record
            else CommitProperties(app_transactions=[Transaction(self.app_id, version=batch_id)])
        )
        source: Any = None
        key_names: list[str] = []
        if plan.layout is not None:
            # typed before any step of the batch was applied (apply)
            source, key_names = plan.source if plan.source is not None else self._source(plan)
            if not key_names:
                raise MirrorError(f"{plan.schema}.{plan.table} has no primary key; the mirror needs one")
        if exists and plan.truncate:
            self._handle(path).delete()
        if evolution is not None:
            self._evolve(path, evolution, exists)
            self._forget(path)  # rewritten, or dropped and created anew: a handle would not see it
            self._log_sizes.pop(path, None)
            log = changelog.log_path(path)
            if not fs.is_delta_table(path):
                fs.rmtree(log)  # dropped: its (folded) change log goes too
            elif delta_append.is_table(log):
                changelog.clear(log, self._handle(path).schema().to_arrow())  # folded: now empty, in the new layout
            if not evolution.exists:
                stats.applied += 1
                return True
        if source is None:
            # DDL only: record the batch so a replay skips it
            if fs.is_delta_table(path) and record:
                self._settle(path)  # a fold writes the base too: one writer at a time
                record_only(self._handle(path), commit)
            self._move(path, moved_to)
            stats.applied += 1
            return True
        deletes = _true_count(plan.deletes) if plan.deletes is not None else 0  # the source's ``d`` rows
        stats.upserts += source.num_rows - deletes
        stats.deletes += deletes
        if not (exists if evolution is None else delta_append.is_table(path)):  # only DDL creates or drops it
            fs.rmtree(changelog.log_path(path))  # a change log of an earlier life
            fs.write_delta(
                path,
                source.filter(pc.equal(source.column(OP_COLUMN), "u")).drop_columns([OP_COLUMN]),
                mode="append",
                commit_properties=commit,
                configuration=self._new_table_configuration(),
                target_file_size=self.file_bytes,
            )
            self._move(path, moved_to)
            stats.applied += 1
            return True
        if merge_on_read:
            records_batch = moved_to is None and record  # as ``commit`` is built
            self._append_to_log(path, plan, batch_id, source, key_names, commit, records_batch)
            self._move(path, moved_to)
            stats.applied += 1
            return True
        dt = self._handle(path)
        predicate = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in key_names) + _key_range(source, key_names)
        if not changelog.merge_changes(dt, source, predicate, commit) and record:
            # a MERGE that changes nothing (deletes of rows the mirror does not hold) commits nothing, and so would
            # not record the batch: record it, so a replay is recognised like any other
            record_only(dt, commit)
        self._move(path, moved_to)
        stats.applied += 1
        return True

    def _append_to_log(
        self,
        path: str,
        plan: _TablePlan,
        batch_id: int,
        source: Any,
        key_names: list[str],
        commit: Any,
        records_batch: bool,
    ) -> None:
        """merge_on_read: the step's last change per key, with its sequence, appended to the table's change log
        (committing ``batch_id`` as the mirror's app transaction when ``records_batch``, as ``commit`` does)."""
        import pyarrow as pa

        log = changelog.log_path(path)
        recorded = self._log_keys.get(path)
        if recorded is None:
            recorded = changelog.read_keys(log)
        if recorded != key_names:
            self._flush(path)
            if recorded is not None:
                # rows keyed one way cannot be folded with rows keyed another: fold, then key the log anew
                self._fold_now(path)
                if delta_append.is_table(log):
                    changelog.clear(log, self._handle(path).schema().to_arrow())
            changelog.write_keys(log, key_names)
        self._log_keys[path] = key_names
        seq = plan.seq if plan.seq is not None else pa.array([], pa.int64())
        if seq.null_count:
            raise MirrorError(f"{plan.schema}.{plan.table}: change rows without a seq cannot be mirrored merge-on-read")
        rows = source.append_column(changelog.BATCH, pa.repeat(pa.scalar(batch_id, pa.int64()), source.num_rows))
        rows = rows.append_column(changelog.SEQ, seq if seq.type == pa.int64() else seq.cast(pa.int64()))

        through_deltalake = functools.partial(self._append_with_deltalake, path, log, rows, commit)
        append = _LogAppend(path, log, rows, batch_id if records_batch else None, through_deltalake)
        with self._appends(path):
            append.direct = self._direct_target(log, rows)
        if append.direct is None:
            self._flush(path)  # the staged parts first, in this thread: the log's batches stay in order
            self._append_through_deltalake(append)  # at once: within a step, the pool writes it meanwhile
        elif self._step_appends is not None:
            self._step_appends.append(append)
        else:
            self._commit_appends([append])

    def _append_with_deltalake(self, path: str, log: str, rows: Any, commit: Any) -> None:
        """Append ``rows`` to the change log ``log`` of the table at ``path`` through deltalake, with ``commit``."""
        with self._appends(path):
            handle = self._handles.get(log)  # append() brings it up to date
            if handle is None and delta_append.is_table(log):
                handle = self._handles[log] = changelog.open_table(log)
            handle = changelog.append(log, rows, commit, handle, self.log_history_s)
            if handle is not None:
                self._handles[log] = handle

    def _commit_appends(self, appends: list[_LogAppend]) -> None:
        """Write ``appends`` (each with its direct target) to their change logs: their rows encoded one after another
        first (the Parquet writer's code stays in the processor's caches: :func:`delta_append.encode`), then each
        committed; one whose direct commit is refused goes through deltalake."""
        appends = self._stage(appends)
        encoded = [delta_append.encode(a.direct[2]) for a in appends if a.direct is not None]
        for append, data in zip(appends, encoded, strict=True):
            self._flush(append.path)  # its staged parts first: the log's batches stay in order
            if self._append_directly(append, data):
                self._appended(append.path, append.rows.num_rows)
            else:
                self._append_through_deltalake(append)

    def _append_through_deltalake(self, append: _LogAppend) -> None:
        """``append`` through deltalake: by the tables pool within a step (deltalake's work releases the GIL), else
        now."""
        if self._deferred is not None:
            self._deferred.append(self._tables_pool().submit(append.through_deltalake))
        else:
            append.through_deltalake()
        self._appended(append.path, append.rows.num_rows)

    def _direct_target(self, log: str, rows: Any) -> tuple[int, Any, Any] | None:
        """Where an append to an existing change log can be written as its next Delta commit directly
        (:mod:`canal.lake.delta_append`: about a quarter of a millisecond against 2-7 ms through ``deltalake``,
        which a batch spread over many tables pays per table): (the log's version, its Arrow schema, ``rows`` in that
        schema), when this process is the log's only writer and the rows have the log's columns; else None, and the
        caller appends through ``deltalake``. Called holding the table's append lock."""
        import pyarrow as pa

        if not self.sole_log_writer:
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
            self._handles[key] = handle
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

    def _append_directly(self, append: _LogAppend, encoded: Any) -> bool:
        """Commit ``append`` (its direct target known) with its rows ``encoded``; False when it did not append: the
        log changed its schema, or dropped commits since the version known behind a checkpoint (read anew on the
        next append)."""
        assert append.direct is not None
        version, schema, typed = append.direct
        with self._appends(append.path):
            committed = delta_append.append(
                append.log,
                typed,
                version=version,
                app_id=self.app_id,
                batch_id=append.batch_id,
                encoded=encoded,
                metadata=None if append.flushed is None else _flushed_metadata(append.flushed),
            )
        if committed is None:
            return False
        self._direct_state[append.log] = (committed, schema)
        return True

    # -- staged changes (merge_on_read) ---------------------------------------------------------------------------

    def _staged(self) -> staged.Staged:
        """What this mirror has staged (read from the root by the first call: a mirror starting where another
        stopped)."""
        if self._staged_parts is None:
            self._staged_parts = staged.load(self.root, self.app_id, self._log_batch)
        return self._staged_parts

    def _staged_if_any(self) -> staged.Staged | None:
        """What this mirror has staged, None when it cannot have staged anything (another writer of its logs, or
        nothing staged under its root ever); a mirror that is not its logs' only writer never flushes a part
        another process staged: that one flushes them before anything else appends."""
        if not self.sole_log_writer:
            return None
        if self._staged_parts is None and not fs.is_dir(staged.staged_dir(self.root)):
            return None
        return self._staged()

    def _stage(self, appends: list[_LogAppend]) -> list[_LogAppend]:
        """Stage the small ones of a step's appends, all in one file (:mod:`canal.lake.staged`); the others."""
        if self.stage_rows == 0 or not self.sole_log_writer or self.tasks_append:
            return appends
        small = [
            a for a in appends if a.direct is not None and a.batch_id is not None and a.rows.num_rows <= self.stage_rows
        ]
        room = self.stage_bytes  # a batch stages at most stage_bytes (wide rows are held by their bytes)
        for append in list(small):
            room -= append.rows.nbytes
            if room < 0:
                small.remove(append)
        if not small or any(a.batch_id != small[0].batch_id for a in small):
            return appends
        batch_id = small[0].batch_id
        assert batch_id is not None
        parts = self._staged()
        # a replay after a crash: the parts staged already are not staged (nor appended) twice
        late = [a for a in small if (last := parts.last_batch(a.path)) is not None and last >= batch_id]
        small = [a for a in small if a not in late]
        if small and not parts.has_batch(batch_id):  # (else the rest are appended, as before staging)
            parts.stage(batch_id, {a.path: a.direct[2] for a in small if a.direct is not None})
            self._staged_by_batch.extend(a.path for a in small)
        else:
            small = []
        taken = {id(a) for a in small + late}
        for append in small + late:  # nothing appended: the log's version and schema are still those read
            if append.direct is not None:
                self._direct_state[str(append.log)] = append.direct[:2]
        return [a for a in appends if id(a) not in taken]

    def flush_staged(self) -> None:
        """Append every staged change to its table's change log (:mod:`canal.lake.staged`)."""
        parts = self._staged_if_any()
        for path in [] if parts is None else list(parts.tables):
            self._flush(path)

    def _flush(self, path: str) -> None:
        """Append the staged parts of the table at ``path`` to its change log, as one append recording their last
        batch id, in this thread; then forget them."""
        import pyarrow as pa
        from deltalake import CommitProperties, Transaction

        parts = self._staged_if_any()
        table = None if parts is None else parts.take(path)
        if parts is None or table is None:
            return
        rows = pa.concat_tables(table.parts, promote_options="permissive")
        batch_id = table.batches[-1]
        log = changelog.log_path(path)
        commit = CommitProperties(
            app_transactions=[Transaction(self.app_id, version=batch_id)],
            custom_metadata=_flushed_metadata(table.batches),
        )

        through_deltalake = functools.partial(self._append_with_deltalake, path, log, rows, commit)
        append = _LogAppend(path, log, rows, batch_id, through_deltalake, flushed=list(table.batches))
        with self._appends(path):
            append.direct = self._direct_target(log, rows)
        if append.direct is None or not self._append_directly(append, delta_append.encode(append.direct[2])):
            through_deltalake()
        self._appended(path, rows.num_rows)
        parts.flushed(path)
        self._flushed_by_batch.append(path)

    # -- schema evolution ----------------------------------------------------------------------------------------

    def _evolution(self, plan: _TablePlan, path: str | None) -> Evolution | None:
        """What the batch's statements do to the table (None: none of them changes a layout)."""
        statements = [(row, sql) for row, kind, sql in plan.ddl if kind != "TRUNCATE"]
        if not statements:
            return None
        if path is None and not any(
            isinstance(ddl_statement(sql, plan.fold_names), CreateTable) for _row, sql in statements
        ):
            return None  # a table the mirror does not hold yet: its first rows create it
        current = None
        if path is not None and not self._created_by_this_step(path, statements, plan.fold_names):
            current = [field.name for field in fs.delta_table(path).schema().fields]
        return plan_evolution(
            plan.schema, plan.table, current, statements, columns_of=self._columns_of, fold_names=plan.fold_names
        )

    def _columns_of(self, schema: str, table: str) -> list[tuple[str, Any]] | None:
        """The columns (name, Arrow type) of a mirror table -- its base's, then those only its change log has yet --
        for a CREATE TABLE ... LIKE it (a batch with DDL appended the staged parts first); None when the mirror does
        not hold it."""
        import pyarrow as pa

        path = self.table_location(schema, table)
        if not delta_append.is_table(path):
            return None
        columns = [(f.name, f.type) for f in pa.schema(self._handle(path).schema().to_arrow())]
        log = self._log_handle(path)
        if log is not None:
            known = {name for name, _kind in columns} | set(changelog.INTERNAL_COLUMNS)
            columns += [(f.name, f.type) for f in pa.schema(log.schema().to_arrow()) if f.name not in known]
        return columns

    def _created_by_this_step(self, path: str, statements: list[tuple[int, str]], fold_names: bool) -> bool:
        """Whether the table at ``path`` is the one this CREATE TABLE step made before a crash kept the step journal
        from saying so (:mod:`canal.lake.step_marks`): the replay then creates it again, as the step did."""
        if self._step is None or len(statements) != 1:
            return False
        if not isinstance(ddl_statement(statements[0][1], fold_names), CreateTable):
            return False
        return step_marks.created_by(path, self.app_id, *self._step)

    def _evolve(self, path: str, evolution: Evolution, exists: bool) -> None:
        """Rewrite the table to its layout after the batch's DDL (nothing when it already has it: replays)."""
        import pyarrow as pa
        from deltalake import CommitProperties

        if not evolution.exists or evolution.created:
            if exists:
                fs.rmtree(path)  # dropped (and maybe created anew): the source table's rows are gone
            if evolution.exists:
                fields = [
                    pa.field(name, kind if kind is not None else pa.string()) for name, _s, kind in evolution.columns
                ]
                fs.write_delta(
                    path,
                    pa.schema(fields).empty_table(),
                    mode="overwrite",
                    configuration=self._new_table_configuration(),
                    commit_properties=None
                    if self._step is None
                    else CommitProperties(custom_metadata=step_marks.created_metadata(self.app_id, *self._step)),
                )
            return
        if not exists:
            return  # the table's first rows create it, in the layout they carry
        dt = fs.delta_table(path)
        data = dt.to_pyarrow_table()
        current = [(field.name, field.type) for field in data.schema]
        declared = dict(evolution.declared)
        if not evolution.changes(current) and not narrows(data, evolution.columns, declared):
            return
        fills = dict(evolution.fills)
        arrays, fields = [], []
        for name, source, kind in evolution.columns:
            if source is not None and source in data.column_names:
                column = data.column(source)
                if kind is not None and column.type != kind:
                    column = _retyped(column, kind, f"{path}: column {source!r}")
                column = fit_declared(column, declared.get(name))  # a narrower type: as the server converts
            else:
                target = kind if kind is not None else pa.string()
                fill = fills.get(name)
                column = (
                    pa.nulls(data.num_rows, target)
                    if fill is None
                    else _typed_column(
                        name, lambda t=target, f=fill: typed_array([f] * data.num_rows, t, self.zero_dates)
                    )
                )
            arrays.append(column)
            fields.append(pa.field(name, column.type))
        rewritten = pa.Table.from_arrays(arrays, schema=pa.schema(fields))
        if [f.name for f in fields] != data.column_names and {f.name for f in fields} == set(data.column_names):
            # the same columns in another order: delta-rs keeps a table's column order on overwrite, so the table
            # is written anew beside the old one, which it then replaces (its last batch id carried over)
            self._recreate(path, dt, rewritten)
            return
        fs.write_delta(dt, rewritten, mode="overwrite", schema_mode="overwrite")

    def _recreate(self, path: str, dt: Any, data: Any) -> None:
        from deltalake import CommitProperties, Transaction

        version = dt.transaction_version(self.app_id)
        fresh, old = f"{path}.rewritten", f"{path}.replaced"
        fs.rmtree(fresh)
        fs.write_delta(
            fresh,
            data,
            mode="overwrite",
            configuration=self._new_table_configuration(),
            commit_properties=None
            if version is None
            else CommitProperties(app_transactions=[Transaction(self.app_id, version=version)]),
        )
        self._forget(path)
        if fs.remote(path):
            self._replaces_checked.discard(path)  # until it is done: a failure is finished by the next batch
            table_moves.replace_tree(fresh, path)  # no renames in an object store: copied, then the copy dropped
            self._replaces_checked.add(path)
            return
        os.replace(path, old)
        os.replace(fresh, path)
        shutil.rmtree(old)

    def _recovered(self, path: str) -> None:
        """A table whose rewrite (:meth:`_recreate`) stopped between its two renames (or, in an object store, its
        copy and the removal of the rewritten table) is finished first."""
        if fs.remote(path):
            # each listing is a request to the store: once per table and mirror object (a crash ends the object;
            # a rewrite that failed in this one is looked at again, as _recreate takes the table off the list)
            if path not in self._replaces_checked:
                table_moves.finish_replace(f"{path}.rewritten", path)
                self._replaces_checked.add(path)
            return
        old = f"{path}.replaced"
        if not os.path.exists(path) and os.path.exists(old):
            os.replace(old, path)
        elif os.path.exists(old):
            shutil.rmtree(old)

    def _move(self, path: str, moved_to: tuple[str, str] | None) -> None:
        """RENAME TABLE: the mirror table moves with its source table (its directory, Delta log and all, and its
        change log). A table the mirror does not hold, or moved already by a replayed step, moves nothing."""
        if moved_to is None:
            return
        target = self.table_location(*moved_to)
        log, target_log = changelog.log_path(path), changelog.log_path(target)
        if fs.remote(path):
            self._settle(path)
            self._forget(path, target)
            self._log_sizes.pop(path, None)
            table_moves.move_table(path, log, target, target_log)
            return
        if not os.path.exists(path):
            if os.path.exists(log) and os.path.exists(target) and not os.path.exists(target_log):
                os.replace(log, target_log)  # the base moved before a crash, its log not yet: finish the move
            return
        if os.path.exists(target):
            raise MirrorError(f"cannot rename {path} to {target}: the mirror already has that table")
        self._settle(path)
        self._forget(path, target)
        self._log_sizes.pop(path, None)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.replace(path, target)
        if os.path.exists(target_log):
            shutil.rmtree(target_log)  # a change log left by an earlier table of that name
        if os.path.exists(log):
            os.makedirs(os.path.dirname(target_log), exist_ok=True)
            os.replace(log, target_log)


def _flushed_metadata(batch_ids: Sequence[int]) -> dict[str, str]:
    return {staged.FLUSHED_BATCHES: ",".join(str(b) for b in batch_ids)}


def _key_range(source: Any, key_names: Sequence[str]) -> str:
    """`` AND t.k >= lo AND t.k <= hi`` over the batch's first key column, when it is an integer or a string: every
    key of the batch lies in that range, so the MERGE finds the same matches, and Delta skips the files whose key
    statistics lie outside it instead of scanning the whole table (changes cluster: new rows at the end of the key
    range, updates and deletes of recent ones). Empty for other key types and for nulls."""
    import pyarrow as pa
    import pyarrow.compute as pc

    name = key_names[0]
    column = source.column(name)
    if column.null_count or len(column) == 0:
        return ""
    kind = column.type
    if pa.types.is_integer(kind):
        bounds = pc.min_max(column)
        lo, hi = str(bounds["min"].as_py()), str(bounds["max"].as_py())
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
        bounds = pc.min_max(column)
        lo, hi = (_sql_string(bounds[end].as_py()) for end in ("min", "max"))
    else:
        return ""
    quoted = quote(name)
    return f" AND t.{quoted} >= {lo} AND t.{quoted} <= {hi}"


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _retyped(column: Any, kind: Any, what: str) -> Any:
    """A mirror column in a type a DDL declared: a safe Arrow cast where the types allow it in general, else value by
    value through canal text (a BIGINT whose values fit DECIMAL(20,2)); MirrorTypeError for a value that does not
    fit exactly."""
    import pyarrow as pa
    import pyarrow.compute as pc

    source_type = column.type
    if pa.types.is_decimal(source_type) and (
        (pa.types.is_decimal(kind) and kind.scale < source_type.scale) or pa.types.is_integer(kind)
    ):
        # the server rounds a DECIMAL to fewer digits half away from zero (-1.2355 -> -1.24); a value that then
        # does not fit is refused by the server too (its ALTER fails, so none is logged)
        scale = kind.scale if pa.types.is_decimal(kind) else 0
        column = pc.round(column, ndigits=scale, round_mode="half_towards_infinity")
    try:
        return column.cast(kind)  # safe: overflow, truncation and bad text raise
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    try:
        return typed_strings(column.cast(pa.string()), kind)
    except (MirrorTypeError, pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise MirrorTypeError(f"{what} cannot become {kind}: {exc}") from None


# -- comparing ---------------------------------------------------------------------------------------------------


@attrs.frozen(slots=True)
class Comparison:
    """The outcome of :func:`compare`: equal when nothing is missing, extra or different and the columns agree."""

    table: str
    source_rows: int
    mirror_rows: int
    missing: tuple[Any, ...]  # keys in the source, not in the mirror
    extra: tuple[Any, ...]  # keys in the mirror, not in the source
    different: tuple[Any, ...]  # keys whose values differ
    column_mismatch: tuple[str, ...]  # columns in one side only

    @property
    def equal(self) -> bool:
        return not (self.missing or self.extra or self.different or self.column_mismatch)

    def __str__(self) -> str:
        if self.equal:
            return f"{self.table}: {self.source_rows} rows equal"
        return (
            f"{self.table}: source {self.source_rows} rows, mirror {self.mirror_rows}; "
            f"missing {list(self.missing)[:5]}, extra {list(self.extra)[:5]}, "
            f"different {list(self.different)[:5]}, columns {list(self.column_mismatch)}"
        )


def _text(value: Any) -> str | None:
    return None if value is None else render_text(value)


def compare(
    mirror_table: Any,
    rows_from_select: Sequence[Mapping[str, Any]],
    key: Sequence[str],
    *,
    name: str = "",
) -> Comparison:
    """Compare a mirror (a mirrored table's path -- its current state, :func:`changelog.current_state` --, a
    ``DeltaTable`` or a pyarrow Table) with ``SELECT *`` rows (dicts, e.g. from a pymysql ``DictCursor``), cell by
    cell in canal's text form. ``key`` names the primary-key columns."""
    import pyarrow as pa

    if isinstance(mirror_table, str | Path):
        mirror_table = changelog.current_state(mirror_table)
    if not isinstance(mirror_table, pa.Table):
        mirror_table = mirror_table.to_pyarrow_table()
    mirror_rows = mirror_table.to_pylist()
    mirror_cols = set(mirror_table.column_names)
    source_cols = set(rows_from_select[0].keys()) if rows_from_select else mirror_cols
    columns = sorted(mirror_cols & source_cols)

    def keyed(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[str | None, ...], dict[str, str | None]]:
        return {tuple(_text(r[k]) for k in key): {c: _text(r.get(c)) for c in columns} for r in rows}

    src = keyed(rows_from_select)
    mir = keyed(mirror_rows)
    missing = tuple(sorted((k for k in src if k not in mir), key=str))
    extra = tuple(sorted((k for k in mir if k not in src), key=str))
    different = tuple(sorted((k for k in src if k in mir and src[k] != mir[k]), key=str))
    return Comparison(
        table=name,
        source_rows=len(src),
        mirror_rows=len(mir),
        missing=missing,
        extra=extra,
        different=different,
        column_mismatch=tuple(sorted(mirror_cols ^ source_cols)) if rows_from_select else (),
    )


@attrs.frozen(slots=True)
class _RenamePair:
    """One pair of a RENAME TABLE (the tables' directory names, :func:`canal.lake.names.directory`), a step of its
    own: the pairs apply in order, each seeing the ones before it (``a TO tmp, b TO a, tmp TO b``), and each is
    journaled."""

    old: str
    new: str


def _steps(table: Any, only: frozenset[str] | None) -> list[Any]:
    """The batch (in ``seq`` order) as ordered steps: an Arrow index array of rows to plan and apply together, or a
    :class:`_RenamePair`. A table's DML rows form one step up to the next DDL row that touches the table (its own,
    or a RENAME naming it), which is a step of its own (a RENAME TABLE: a step per pair); rows of tables no DDL
    touches stay one step per table, applied after the DDL steps that come before their last row."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = table.num_rows
    is_ddl = pc.fill_null(table.column("is_ddl"), False)
    if not _any(is_ddl):
        return [_positions(n)]
    flags = is_ddl.to_pylist()
    sqls = table.column("sql").to_pylist()
    schemas = table.column("schema").to_pylist()
    folds = fold_flags(table)
    # each row's table by its directory name, as _plan names its plans
    names = [
        None if not t else naming.directory(db if db is not None else "None", t)
        for db, t in zip(schemas, table.column("table").to_pylist(), strict=True)
    ]
    steps: list[Any] = []
    pending: dict[str | None, list[int]] = {}  # table -> its DML rows since the last DDL that touched it

    def flush(name: str | None) -> None:
        rows = pending.pop(name, None)
        if rows:
            steps.append(pa.array(rows, pa.int64()))

    for row in range(n):
        name = names[row]
        if not flags[row]:
            pending.setdefault(name, []).append(row)
            continue
        stmt = ddl_statement(sqls[row], folds[row])
        if isinstance(stmt, RenameTable):
            session = schemas[row] or ""
            pairs = [((old.schema or session, old.name), (new.schema or session, new.name)) for old, new in stmt.pairs]
            for old_pair, new_pair in pairs:
                flush(naming.directory(*old_pair))
                flush(naming.directory(*new_pair))
            steps.extend(
                _RenamePair(naming.directory(*old_pair), naming.directory(*new_pair))
                for old_pair, new_pair in pairs
                if only is None or naming.display(*old_pair) in only or naming.display(*new_pair) in only
            )
            continue
        touched = {
            name,
            *(naming.directory(db, t) for db, t in renamed_tables(sqls[row] or "", schemas[row] or "", folds[row])),
        }
        if isinstance(stmt, AlterTable):
            touched |= {
                naming.directory(a.table.schema or schemas[row], a.table.name)
                for a in stmt.actions
                if isinstance(a, RenameTo)
            }
        for other in list(pending):
            if other in touched:
                flush(other)
        steps.append(pa.array([row], pa.int64()))
    for name in list(pending):
        flush(name)
    return steps


def _rebuild(kind: type[DeltaMirror], settings: dict[str, Any]) -> DeltaMirror:
    """A mirror of type ``kind`` built from ``settings`` (:meth:`DeltaMirror.__reduce__`)."""
    return kind(**settings)
