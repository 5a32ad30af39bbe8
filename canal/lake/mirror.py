"""The Delta mirror's facade: :class:`DeltaMirror`, which applies batches of change rows to one Delta table per source
table under a root, idempotently per batch (``deltalake``, no JVM needed), and its batch's outcome.

A batch (:mod:`canal.lake.forms`) goes through the sub-packages in order: :mod:`canal.lake.identity` admits the rows
not applied yet, by source lineage, and numbers the batch; :mod:`canal.lake.planning` cuts it into ordered steps (a
table's rows up to the next DDL that touches it, that DDL, ...: docs/architecture.md says why this is exact) of a plan
per table, their images typed before any step is applied; :mod:`canal.lake.apply` holds XA transactions, stops where
the mirror cannot follow, adds foreign keys' actions and applies each step, journaled (rows to the change logs of
:mod:`canal.lake.store`, staged, or MERGEd; DDL to the files); :mod:`canal.lake.upkeep` schedules folds and upkeep.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from canal.lake.apply.cascade import ExpandedBatch, expand_cascades
from canal.lake.apply.evolve import TableDDL
from canal.lake.apply.heals import HealSetting, heal_resets
from canal.lake.apply.log_writer import LogWriter
from canal.lake.apply.partial import chain_step, complete_before_writing
from canal.lake.apply.staging import Staging
from canal.lake.apply.stops import check_cascades, check_statements
from canal.lake.apply.table_steps import TableSteps
from canal.lake.apply.xa import HeldTransactions, held_directory
from canal.lake.forms.cell_text import rows_texts
from canal.lake.forms.frames import batch_table
from canal.lake.forms.packed import is_packed, unpack_all
from canal.lake.forms.typed_batch import TypedBatch
from canal.lake.forms.typed_plan import RowsNeeded, TypedImages, change_rows, needs_rows, planned_form
from canal.lake.forms.typed_plan import type_sources as typed_sources
from canal.lake.forms.variant_rows import holds_variants, variant_rows_to_typed
from canal.lake.identity.admit import admit, admit_rows
from canal.lake.identity.applied import Applied, newest_position, newest_time, write_applied
from canal.lake.identity.batch_ids import BatchVersions
from canal.lake.identity.journal import StepJournal
from canal.lake.identity.lease import MirrorFence
from canal.lake.identity.lineage import destinations
from canal.lake.identity.owners import TableOwners, table_pairs
from canal.lake.planning.images import type_sources
from canal.lake.planning.plan import (
    MIRROR_COLUMNS,
    DropSchema,
    RenamePair,
    TablePlan,
    batch_steps,
    changes_tables,
    in_order,
    plan_tables,
    step_names,
    step_rows,
)
from canal.lake.results import ApplyResult, TableStats
from canal.lake.settings import DEFAULT_FILE_BYTES, DEFAULT_STAGE_BYTES, FOLD_DUTY, MirrorMode, MirrorSettings
from canal.lake.store import changelog, fs
from canal.lake.store import names as naming
from canal.lake.store.changelog import FoldResult
from canal.lake.store.errors import typed_storage_errors
from canal.lake.store.handles import Handles
from canal.lake.store.locations import local_path
from canal.lake.types import MirrorError, ZeroDates
from canal.lake.upkeep import maintenance
from canal.lake.upkeep.folds import Folds
from canal.lake.upkeep.health import MirrorCounters, MirrorMetrics, monitored
from canal.lake.upkeep.records import Recent
from canal.lake.upkeep.writers import LogWriters
from canal.log import destination_logger

RECORDS_KEPT = 1000
"""Entries of ``history``, ``folds`` and ``fold_errors`` kept (the newest): a mirror runs for months."""
RECORD_NAMES = 200_000
"""Table names held by the ``history`` kept, at most (a batch over 10,000 tables names each in its result)."""
RECORD_CHARS = 1 << 20
"""Characters of the ``fold_errors`` kept, at most."""


def _each(apply_one: Callable[[str, TablePlan], bool], step: dict[str, TablePlan]) -> dict[str, bool]:
    return {name: apply_one(name, plan) for name, plan in step.items()}


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
    beside its base and folds the log into the base when it grows (:mod:`canal.lake.store.changelog`), so a batch costs
    what it holds whatever the table's size; read the current state with :meth:`read` (or
    :mod:`canal.spark.current`): the base alone is the source as of its last fold. ``copy_on_write`` MERGEs every
    batch into the table itself, which a standard Delta reader then sees current, at a cost that grows with the
    table. A fold starts when the log holds ``fold_ratio`` times the base's rows or ``fold_files`` files, in a
    background thread, tables in parallel (``fold_workers``), a table's at most ``fold_duty`` of the time
    (:data:`~canal.lake.settings.FOLD_DUTY`; ``background_folds=False``: after each batch, unpaced); a failed
    background fold is logged, counted (:meth:`metrics`) and tried again after the next batch; once a table's folds
    failed ``max_fold_failures`` times in a row, batches are refused (``MirrorFoldError``) until a fold succeeds
    (:mod:`canal.lake.upkeep.health`). A fold keeps the base files it replaces for ``retention_hours`` (time travel).
    DDL, TRUNCATE and a change of key fold the table first, within the batch.

    ``on_executors``: a Spark DataFrame handed to :class:`canal.spark.DeltaMirror` by ``foreachBatch`` is written by
    Spark tasks, a table per task, folds too (:mod:`canal.spark.mirror_tasks`; a batch with DDL by the driver, in
    order); this class refuses it (``MirrorError``). ``on_executors=False``: the driver applies it, as Arrow.

    ``stage_rows``: merge-on-read, a table's part of a batch of at most this many rows is staged -- every such part
    of the batch written as one file, appended to the table's change log later, a few tables a batch
    (``stage_spread``: each batch flushes at least one in that many of the tables staged), or before anything else
    writes the table (:mod:`canal.lake.store.staged`): a batch spread over many tables then costs about what one
    table's would. 0: never stage. Readers of the current state read staged changes too. ``stage_bytes``: the most
    a batch stages, and the most held staged after each batch (the oldest tables flushed first).

    ``app_id``: one live mirror writes a root under an app id (:mod:`canal.lake.identity.lease`; a second is refused
    with ``MirrorLeaseError``): give each destination mirrored into one root its own.

    ``root``: a local path, a ``file://`` URI, or a prefix in an object store (``s3://bucket/mirror``, ``gs://``,
    ``az://``, ``abfss://``) reached with ``storage_options`` -- the keys ``deltalake`` takes (``AWS_ENDPOINT_URL``,
    ``AWS_ACCESS_KEY_ID``, ...), else the store's environment variables -- which travel to executors' tasks with the
    mirror's settings and stay out of reprs and messages (:mod:`canal.lake.store.fs`).

    ``log_history_s``: how long a change log keeps its Delta commits behind a checkpoint (default a second: an
    append lists them all). :meth:`committed_batch_ids` sees a change log's batch ids that far back only.
    ``heal``: ``snapshot`` replaces a table a heal reads again, at its mark; ``stop`` refuses it
    (canal.lake.apply.heals).
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
        fold_duty: float = FOLD_DUTY,
        on_executors: bool = True,
        log_history_s: float = changelog.LOG_HISTORY_S,
        stage_rows: int = 512,
        stage_spread: int = 16,
        stage_bytes: int = DEFAULT_STAGE_BYTES,
        max_fold_failures: int = 3,
        storage_options: Mapping[str, str] | None = None,
        heal: HealSetting = "snapshot",
    ) -> None:
        checked = MirrorSettings(  # a bad argument fails here, before anything is registered or written
            root=os.fspath(root),
            storage_options=storage_options,
            app_id=app_id,
            tables=tables,
            zero_dates=zero_dates,
            optimize_every=optimize_every,
            vacuum_every=vacuum_every,
            retention_hours=retention_hours,
            file_bytes=file_bytes,
            mode=mode,
            fold_ratio=fold_ratio,
            fold_files=fold_files,
            background_folds=background_folds,
            fold_workers=fold_workers,
            fold_duty=fold_duty,
            on_executors=on_executors,
            log_history_s=log_history_s,
            stage_rows=stage_rows,
            stage_spread=stage_spread,
            stage_bytes=stage_bytes,
            max_fold_failures=max_fold_failures,
            heal=heal,
        )
        # the root as text: a local path, or an object store's URI whose options this process registers for every
        # location under it (canal.lake.store.fs); kept out of reprs and messages with the options
        settings = attrs.evolve(checked, root=fs.register(root, "the mirror's root", storage_options))
        self._settings = settings
        self._log = destination_logger(__name__, app_id)
        self._handles = Handles()  # the tables kept open between batches
        self._writers = LogWriters()
        self._staging = Staging(settings, self._writers, lambda path: self._versions.in_log(path))
        # folds done, in the order they ended; background folds that failed (tried again after a later batch): the
        # newest only (canal.lake.upkeep.records)
        self._folding = Folds(
            settings,
            self._handles,
            self._writers,
            before_fold=lambda path: self._writer.flush(path),
            done=Recent(RECORDS_KEPT, RECORDS_KEPT, lambda _fold: 1),
            errors=Recent(RECORDS_KEPT, RECORD_CHARS, len),
            log=self._log,
        )
        self._writer = LogWriter(settings, self._handles, self._writers, self._folding, self._staging)
        self._ddl = TableDDL(settings, self._handles, self._folding, self._forget)
        self._journal = StepJournal(settings.root, settings.app_id)
        self._versions = BatchVersions(settings.app_id, self._handles, self._staging.parts_if_any)
        self._owners = TableOwners(settings.root, settings.app_id)  # tables another app id writes are refused
        # its lease (renewed while a batch runs), or a Spark task's: its driver's, fencing every commit
        self.fencing = MirrorFence(settings.root, settings.app_id, self)
        self._applied_batches = 0  # batches that wrote something, for the maintenance schedule
        self._compact: set[str] = set()  # tables written since their last compaction
        self.stats: dict[str, TableStats] = {}
        self.history: list[ApplyResult] = Recent(RECORDS_KEPT, RECORD_NAMES, ApplyResult.names_held)  # newest
        self.reach_checked = False  # whether Spark tasks were seen to reach the root (canal.spark.mirror_tasks)
        # what its batches did, for metrics() and the exporter (canal.lake.upkeep.health)
        self.counters = MirrorCounters()
        self._rows_now = lambda db, name: self.read(db, name) if self._holds(db, name) else None  # None: not held
        self._table_steps = TableSteps(
            settings,
            self._handles,
            self._folding,
            self._writer,
            self._ddl,
            self._versions,
            self.fencing,
            self.table_location,
            self._forget,
            self._rows_now,
        )

    # -- settings ------------------------------------------------------------------------------------------------

    def settings(self) -> MirrorSettings:
        """The settings this mirror was built from (what a Spark task builds its own from)."""
        return self._settings

    def __reduce__(self) -> tuple[Any, ...]:
        """A mirror pickles as its settings: Spark Connect pickles ``foreachBatch``'s function (a mirror, or a
        function closing over one) into the server's Python process, where a mirror of the same settings is built;
        what it holds at run time (table handles, pools, locks, the writer lease, records) does not travel."""
        return (_rebuild, (type(self), self._settings))

    @property
    def root(self) -> str:
        """The root as text: a local path, or an object store's URI."""
        return self._settings.root

    @property
    def app_id(self) -> str:
        return self._settings.app_id

    @property
    def storage_options(self) -> dict[str, str]:
        return self._settings.options

    @property
    def only(self) -> frozenset[str] | None:
        """The ``schema.table`` names mirrored (None: every table)."""
        return self._settings.only

    @property
    def mode(self) -> MirrorMode:
        return self._settings.mode

    @property
    def zero_dates(self) -> ZeroDates:
        return self._settings.zero_dates

    @property
    def sole_log_writer(self) -> bool:
        """Whether this mirror object is the only writer of its change logs (appends, folds, compactions), so appends
        may be written as Delta commits directly (:mod:`canal.lake.store.delta_append`). Spark tasks' mirrors are not
        (folds run in other tasks); set it False where another process or mirror object folds the same root."""
        return self._writers.sole

    @sole_log_writer.setter
    def sole_log_writer(self, sole: bool) -> None:
        self._writers.sole = sole

    @property
    def tasks_append(self) -> bool:
        """Whether Spark tasks have appended to this mirror's change logs (:mod:`canal.spark.mirror_tasks` sets
        it): its folds then trim through Delta's DELETE, whose conflict checks cover their appends and the
        checkpoints those write, not by removing whole files (:func:`canal.lake.store.changelog.trim`)."""
        return self._writers.tasks_append

    @tasks_append.setter
    def tasks_append(self, appending: bool) -> None:
        self._writers.tasks_append = appending

    @property
    def folds(self) -> list[FoldResult]:
        """The folds done, in the order they ended (the newest :data:`RECORDS_KEPT`)."""
        return self._folding.done

    @property
    def fold_errors(self) -> list[str]:
        """The background folds that failed (tried again after a later batch), the newest only."""
        return self._folding.errors

    # -- paths and versions --------------------------------------------------------------------------------------

    def table_path(self, schema: str, table: str) -> Path:
        """The local directory of the mirror table of ``schema.table`` (:func:`canal.lake.store.names.directory`); a
        :class:`~canal.errors.StorageLocationError` for a root in an object store (:meth:`table_location`)."""
        return local_path(self.table_location(schema, table), "the mirror table's location")

    def table_location(self, schema: str, table: str) -> str:
        """Where the mirror table of ``schema.table`` is: a local path as text, or a URI under the object-store root
        (what ``deltalake`` and :mod:`canal.spark.current` take, with the root's ``storage_options``)."""
        return naming.location(self.root, schema, table)

    def _holds(self, schema: str, table: str) -> bool:
        """Whether the mirror keeps a copy of ``schema.table`` (a foreign key's action there would go unseen)."""
        return (self.only is None or f"{schema}.{table}" in self.only) and fs.exists(self.table_location(schema, table))

    def _mirrors(self, schema: str, table: str) -> bool:
        return self.only is None or f"{schema}.{table}" in self.only

    def _current_rows(self, schema: str, table: str) -> list[dict[str, str | None]] | None:
        """A held table's rows as they are before the batch, in canal text (None: not held): where a foreign key's
        action looks (rendered by Arrow: Python's dates hold no year 0, which MySQL stores)."""
        return rows_texts(self.read(schema, table)) if self._holds(schema, table) else None

    def table_names(self) -> list[str]:
        """``schema.table`` of every mirrored table that exists, as the server spells them (:meth:`tables`: pairs)."""
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
        """The last batch number committed to a table: to its base or (merge-on-read) to its change log."""
        return self._versions.last(path, base)

    def committed_batch_ids(self, schema: str, table: str) -> list[int]:
        """Every batch number committed to a table, in order (read from the Delta logs' ``txn`` actions of its base
        and, merge-on-read, its change log -- whose commits are kept ``log_history_s``: older ones are not seen)."""
        return self._versions.committed(self.table_location(schema, table))

    @typed_storage_errors
    def read(self, schema: str, table: str) -> Any:
        """The current state of one mirrored table as a pyarrow Table (merge-on-read: its base overlaid with the newer
        changes of its log, exact whatever fold is under way)."""
        return changelog.current_state(self.table_location(schema, table))

    # -- folds (merge_on_read) -----------------------------------------------------------------------------------

    @typed_storage_errors
    def fold(self, schema: str | None = None, table: str | None = None) -> list[FoldResult]:
        """Fold now, in this thread: one table, or every table with a change log (its staged changes appended first)."""
        if (schema is None) != (table is None):
            raise MirrorError("fold() takes both schema and table, or neither")
        if schema is not None and table is not None:
            return [self._folding.fold_now(self.table_location(schema, table))]
        return [self._folding.fold_now(fs.join(self.root, name)) for name, _pair in self._table_directories()]

    def wait_for_folds(self) -> None:
        """Wait until every background fold started so far has ended."""
        self._folding.wait()

    @typed_storage_errors
    def close(self) -> None:
        """Append staged changes to their logs, wait for background folds, stop the threads (it can apply again)."""
        self.flush_staged()
        self._folding.close()
        self._writer.close()
        self.fencing.release()

    def __enter__(self) -> DeltaMirror:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def hold_lease(self) -> None:
        """Take (or renew) this mirror's lease on its root and app id, renewed until the batch ends; a
        :class:`~canal.lake.types.MirrorLeaseError` when another live mirror writes them
        (:mod:`canal.lake.identity.lease`)."""
        self.fencing.hold()

    def check_owners(self, tables: Any, *, mirrored: bool = False) -> None:
        """``MirrorLineageError`` when one of ``tables`` (``(schema, table)`` pairs; ``mirrored``: a batch's rows, the
        tables it mirrors) holds another app id's batches (:mod:`canal.lake.identity.owners`); asked before a batch
        writes."""
        if self._owners.others():  # (one app id on the root: nothing to check)
            pairs = [pair for pair in table_pairs(tables) if self._mirrors(*pair)] if mirrored else tables
            self._owners.check(pairs, self.table_location, self._handles.log)

    def check_folds(self) -> None:
        """:class:`~canal.lake.types.MirrorFoldError` when a table's folds failed ``max_fold_failures`` times in a
        row (:mod:`canal.lake.upkeep.health`); :meth:`apply` asks first."""
        self._folding.check()

    def metrics(self) -> MirrorMetrics:
        """How the mirror is doing in this process: batches applied and their newest position, folds done and failed
        (tables failing in a row), staged parts held, batches stopped by error class
        (:mod:`canal.lake.upkeep.health`)."""
        return self.counters.metrics(self._folding.health, self._staging.loaded)

    def fold_due(self, path: str) -> bool:
        """Whether the change log of the table at ``path`` is big enough to fold (``fold_ratio``, ``fold_files``)."""
        return self._folding.fold_due(path)

    def claim_folds(self, paths: Iterable[str]) -> list[str]:
        """The tables (base paths) among ``paths`` whose fold is neither under way nor resting (``fold_duty``), now
        marked as under way: the caller must hand them to :meth:`run_folds`."""
        return self._folding.claim(paths)

    def run_folds(self, paths: list[str], fold: Callable[[], object], *, sizes_known: bool = False) -> None:
        """Run ``fold`` (folding the claimed ``paths``) in a background thread
        (:meth:`canal.lake.upkeep.folds.Folds.run`)."""
        self._folding.run(paths, fold, sizes_known=sizes_known)

    def flush_staged(self) -> None:
        """Append every staged change to its table's change log (:mod:`canal.lake.store.staged`)."""
        self._writer.flush_staged()

    def vacuum(self, retention_hours: int = 168) -> dict[str, int]:
        """Delete the data files of every mirrored table that no table version of the last ``retention_hours``
        still references (each MERGE rewrites the files it touches; the old ones stay for time travel until now).

        Returns the number of files deleted per table. Replays are still recognised afterwards: the applied batch
        ids live in the Delta log, which vacuum does not touch. Below Delta's 168-hour default, readers of older
        versions lose them -- which a mirror that only reads its latest version does not mind.
        """
        return maintenance.vacuum(self.root, self._table_directories, retention_hours, self.wait_for_folds)

    def _maintain(self) -> float:
        """Scheduled upkeep after an applied batch (:mod:`canal.lake.upkeep.maintenance`)."""
        return maintenance.maintain(
            self._settings, self._applied_batches, self._compact, self._handles, self._folding, self.vacuum
        )

    def _forget(self, *paths: str) -> None:
        """What the mirror holds of the tables at ``paths`` (open handles, their logs' state) is read anew."""
        for path in paths:
            self._handles.forget(path)
            self._writer.forget(path)

    @property
    def tables_epoch(self) -> str:
        """New whenever this mirror rewrites, moves or drops a table (:class:`Handles`)."""
        return self._handles.epoch

    def follow_tables_epoch(self, epoch: str) -> None:
        """A Spark task's mirror, given the driver's :attr:`tables_epoch`: every table it holds is read anew when
        that is not its own -- the driver rewrote, moved or dropped one since."""
        if epoch != self._handles.epoch:
            self._forget(*self._handles.locations())
            self._handles.epoch = epoch

    # -- applying ------------------------------------------------------------------------------------------------

    COLUMNS = MIRROR_COLUMNS

    @monitored
    def __call__(self, changes: Any, batch_id: int) -> ApplyResult:
        """``foreachBatch``'s entry: a DataFrame to :meth:`apply_dataframe` (``on_executors``), else :meth:`apply`."""
        if self._settings.on_executors and hasattr(changes, "sparkSession"):
            return self.apply_dataframe(changes, batch_id)
        return self.apply(changes, batch_id)

    def apply_dataframe(self, df: Any, batch_id: int) -> ApplyResult:
        """Spark tasks write a DataFrame: :class:`canal.spark.DeltaMirror` (this package never imports canal.spark).
        Here: refused, nothing written -- not quietly applied on the driver instead."""
        raise MirrorError(
            f"mirror {self.root}: batch {batch_id} is a Spark DataFrame and on_executors=True: canal.spark.DeltaMirror "
            "writes it with Spark tasks (on_executors=False: the driver applies it)"
        )

    def new_result(self, batch_id: int) -> ApplyResult:
        return ApplyResult(batch_id)

    def table_stats(self, name: str) -> TableStats:
        """The running statistics of one table (by its directory name: ``schema.table`` for plain names)."""
        return self.stats.setdefault(name, TableStats())

    @monitored
    @typed_storage_errors
    def apply(
        self,
        changes: Any,
        batch_id: int,
        *,
        steps_journal: bool = True,
        fold: bool = True,
        follow: Applied | None = None,
        skip: bool = False,
    ) -> ApplyResult:
        """Apply one batch of change rows (a DataFrame, pyarrow Table or RecordBatch) or a typed batch
        (:class:`~canal.lake.forms.typed_batch.TypedBatch`: planned and applied from its typed images, no JSON parsed;
        :mod:`canal.lake.forms.typed_plan`) as batch ``batch_id``; rows of packed batches are unpacked into one
        (``packed``).

        The batch is applied as an ordered list of steps (:func:`~canal.lake.planning.plan.batch_steps`): each table's
        DML rows up to the next DDL that touches it, reduced to the last change per key under the one layout they were
        written in and merged at once, then that DDL, then the table's next rows, and so on -- as the source applied
        them. A batch without DDL is one step per table. The steps done are journaled beside the tables, so a batch
        replayed after a crash goes on after the last step done and never applies one twice.

        Which rows are new is decided by their source lineage, not by ``batch_id`` (:mod:`canal.lake.identity.admit`):
        rows the mirror applied are left out, rows with no provable relation to them stop the batch
        (``MirrorLineageError``).

        ``steps_journal=False`` (a Spark task writing its part of a batch without DDL, which the driver admitted):
        ``batch_id`` is the number the driver gave the batch, ``follow`` the record before it (the rows the mirror has
        by it are left out; ``skip``: all of it, the batch is a replay); no step journal; a table whose last committed
        number is ``>= batch_id`` is skipped.
        ``fold=False``: start no fold after the batch (the caller schedules them, :meth:`fold_due`)."""
        with self.fencing.renewed():  # the lease (if this batch takes it) renewed while the batch runs
            if not isinstance(changes, TypedBatch):
                table = batch_table(changes)
                if table is not None and is_packed(table.column_names):
                    # images=packed: typed batches, or change rows (canal.lake.forms.packed)
                    changes = unpack_all(table)
                    if not isinstance(changes, TypedBatch):
                        return self._apply(changes, None, batch_id, steps_journal, fold, follow, skip)
                elif table is None or not holds_variants(table):
                    rows = changes if table is None else table
                    return self._apply(rows, None, batch_id, steps_journal, fold, follow, skip)
                else:
                    changes = variant_rows_to_typed(table)  # the images=variant form: decoded into typed images
            if needs_rows(changes):  # XA, foreign keys' actions: followed in change rows (canal.lake.forms.typed_plan)
                return self._apply(change_rows(changes), None, batch_id, steps_journal, fold, follow, skip)
            try:
                return self._apply(*planned_form(changes), batch_id, steps_journal, fold, follow, skip)
            except RowsNeeded:  # raised before anything of the batch was written
                return self._apply(change_rows(changes), None, batch_id, steps_journal, fold, follow, skip)

    def _apply(
        self,
        changes: Any,
        typed: TypedImages | None,
        batch_id: int,
        steps_journal: bool,
        fold: bool,
        follow: Applied | None = None,
        skip: bool = False,
    ) -> ApplyResult:
        began = time.perf_counter()
        self.check_folds()  # nothing of the batch written while a table's folds keep failing
        result = ApplyResult(batch_id)
        self._staging.new_batch()
        table = batch_table(changes)
        if table is None or table.num_rows == 0:
            self.history.append(result)
            return result
        result.destination = next(iter(destinations(table)), None)  # (an app id mirrors one destination)
        if steps_journal:
            self.hold_lease()  # one writer (and reader) of the root's journal per app id (canal.lake.identity.lease)
        # the rows the mirror has not applied, by its record and their source lineage -- never by the batch's id --
        # numbered past everything it applied (canal.lake.identity.admit); a Spark task's part: as its driver admitted
        # them
        owners = functools.partial(self.check_owners, mirrored=True)  # another app id's tables: refused
        admitted = (
            admit(table, batch_id, self.root, self.app_id, self._read_journal(), check=owners)
            if steps_journal
            else admit_rows(table, batch_id, follow, self.root, self.app_id, check=owners, skip=skip)
        )
        batch_number, done, again = admitted.number, admitted.done, admitted.done > 0 or admitted.skip
        table = heal_resets(in_order(admitted.table), self._settings.heal, self.counters.healed, again)  # heals
        result.rows = table.num_rows
        # the newest change of those it applies, for metrics() and the exporter (canal.lake.upkeep.health)
        result.newest, result.newest_time_ms = newest_position(table), newest_time(table)
        if admitted.skip or not table.num_rows:
            for name in plan_tables(table, self.only):
                result.tables[name] = "skipped"  # applied before: the same batch again, or changes the mirror has
                self.stats.setdefault(name, TableStats()).skipped += 1
            if admitted.records:
                write_applied(self.root, self.app_id, admitted.after())
            self.history.append(result)
            return result
        journal = self._read_journal() if steps_journal else None
        # XA: prepared rows held until their XA COMMIT (canal.lake.apply.xa); statements stop (canal.lake.apply.stops)
        table, hold = HeldTransactions(held_directory(self.root, self.app_id)).follow(table, batch_number)
        check_statements(table)
        # foreign keys' actions the binlog does not log: the children's rows added (canal.lake.apply.cascade);
        # a cascade without the source's foreign keys stops (canal.lake.apply.stops)
        kept = ExpandedBatch(self.root, self.app_id)
        if steps_journal:
            kept.drop_before(batch_number)
        expanded = kept.load(batch_number) if done else None  # a replay: the batch its journaled steps counted
        if expanded is None:
            expanded = expand_cascades(table, self._current_rows, self._mirrors)
            if steps_journal and expanded.num_rows != table.num_rows:
                kept.save(batch_number, expanded)
        table = expanded
        check_cascades(table, self._holds)
        if "before" in table.column_names:
            table = table.drop_columns(["before"])
        # a mirror written before it kept a step journal knows its replays by each table's last batch id only
        journaled = journal is not None
        # every step planned and its rows typed before any is applied: a value that does not convert fails the
        # batch with nothing written
        steps: list[RenamePair | DropSchema | dict[str, TablePlan]] = []
        for number, step in enumerate(batch_steps(table, self.only)):
            if isinstance(step, RenamePair | DropSchema):
                steps.append(step)
                continue
            # partial images: canal.lake.apply.partial
            plans = plan_tables(chain_step(step_rows(table, step)), self.only)
            if number >= done and typed is not None:
                typed_sources(plans, typed)
            elif number >= done:
                type_sources([plan for plan in plans.values() if plan.layout is not None], self._settings.zero_dates)
            steps.append(plans)
        complete_before_writing(steps, self._rows_now, self._settings.zero_dates)  # of tables without DDL
        self._ddl.check_conversions(steps[done:], self._rows_now)  # an ALTER's unmodeled conversion: none written
        result.prepare_s = time.perf_counter() - began
        hold()
        if any(changes_tables(step) for step in steps):
            self.flush_staged()  # DDL rewrites, moves, clears or drops change logs: nothing staged may outlive that
        # a table's batch id is committed once, with its last step of the batch (its earlier steps commit without)
        last_step = {name: number for number, step in enumerate(steps) if isinstance(step, dict) for name in step}
        # a table renamed by a later pair of a RENAME TABLE commits without it, as one renamed by ALTER does: its change
        # log moves to the new name, whose later rows of the batch (staged, maybe) must not read as recorded already
        renamed_at = {
            name: number
            for number, step in enumerate(steps)
            if isinstance(step, RenamePair)
            for name in (step.old, step.new)
        }
        for number, step in enumerate(steps):
            if number < done:  # applied before a crash: a replay skips it
                for name in step_names(step):
                    if name not in result.tables:
                        result.tables[name] = "skipped"
                        self.stats.setdefault(name, TableStats()).skipped += 1
                continue
            if changes_tables(step):
                # the parts the batch's earlier steps staged go to their logs before a DDL step moves, rewrites or
                # drops a table (a part staged under a name renamed away was appended to no table)
                self.flush_staged()
            self._ddl.step = (batch_number, number) if steps_journal else None
            if isinstance(step, RenamePair):
                self.fencing.check()
                self._ddl.rename_pair(step)
                result.tables.setdefault(step.old, "applied")
            elif isinstance(step, DropSchema):  # every mirrored table of the database goes
                result.tables.update(dict.fromkeys(self._ddl.drop_schema(step.schema, self.only), "applied"))
            else:
                merge_began = time.perf_counter()

                def one(name: str, plan: TablePlan, number: int = number, journaled: bool = journaled) -> bool:
                    stats = self.stats.setdefault(name, TableStats())
                    stats.changes += plan.rows
                    record = last_step[name] == number and renamed_at.get(name, -1) < number
                    return self._apply_table(plan, batch_number, stats, check_version=not journaled, record=record)

                if len(step) > 1 and not any(plan.ddl or plan.truncate for plan in step.values()):
                    # tables of a step without DDL are independent: each its own Delta commits, in parallel (the
                    # fixed cost of a commit is most of a small table's part of a batch)
                    if self._settings.mode == "merge_on_read":
                        # applied here, one table after another; the appends that go through deltalake (a new
                        # log's first) written by the pool meanwhile
                        outcomes = self._writer.deferred(functools.partial(_each, one, step))
                    else:
                        outcomes = dict(zip(step, self._writer.pool().map(one, step, step.values()), strict=True))
                else:
                    outcomes = {name: one(name, plan) for name, plan in step.items()}
                result.merge_s += time.perf_counter() - merge_began
                for name, applied in outcomes.items():
                    if applied or name not in result.tables:
                        result.tables[name] = "applied" if applied else "skipped"
                    if applied:
                        self._compact.add(name)
            self._ddl.step = None
            if steps_journal:
                self._write_journal(batch_number, number + 1)
                journaled = True
        for path in self._staging.due():
            self.fencing.check()
            self._writer.flush(path)
        result.staged = sorted(Path(path).name for path in self._staging.staged_by_batch)
        result.flushed = sorted(Path(path).name for path in self._staging.flushed_by_batch)
        if any(state == "applied" for state in result.tables.values()):
            self._applied_batches += 1
            result.maintenance_s = self._maintain()
        if self._folding.written:
            written = self._folding.take_written()
            if fold:
                result.folds = self._folding.schedule(written)
            else:  # the caller folds: sizes read anew, as other processes fold these tables
                for path in written:
                    self._folding.forget_size(path)
                result.folds = sorted(Path(path).name for path in written if self.fold_due(path))
        if admitted.records:
            self.fencing.check()
            write_applied(self.root, self.app_id, admitted.after())  # finished: its lineage, its number
        self.history.append(result)
        return result

    def _read_journal(self) -> tuple[int, int] | None:
        """(batch id, steps done) of the last batch this mirror's app id applied
        (:mod:`canal.lake.identity.journal`)."""
        return self._journal.read()

    def _write_journal(self, batch_id: int, done: int) -> None:
        """Record ``done`` steps of ``batch_id`` applied: every step the batch applies passes here."""
        self._journal.write(batch_id, done)

    def _apply_table(
        self, plan: TablePlan, batch_id: int, stats: TableStats, *, check_version: bool = True, record: bool = True
    ) -> bool:
        """One table's part of a step (:class:`~canal.lake.apply.table_steps.TableSteps`)."""
        return self._table_steps.apply(plan, batch_id, stats, check_version=check_version, record=record)

def _rebuild(kind: type[DeltaMirror], settings: MirrorSettings) -> DeltaMirror:
    """A mirror of type ``kind`` built from ``settings`` (:meth:`DeltaMirror.__reduce__`)."""
    return kind(**settings.arguments())
