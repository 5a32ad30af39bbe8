"""One table's part of a step applied to its mirror table (:meth:`canal.lake.mirror.DeltaMirror.apply` cuts a batch
into steps, a plan per table): the table created with its first rows, its DDL done to the files (merge-on-read: its
change log folded into the base first), its rows appended to its change log (merge-on-read) or MERGEd into it
(copy-on-write), and the batch id committed with the table's last step of the batch, so a replay skips it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from canal.lake.apply.evolve import TableDDL
from canal.lake.apply.log_writer import LogWriter
from canal.lake.apply.partial import complete_source
from canal.lake.apply.table_writes import create_table, merge_into
from canal.lake.identity.batch_ids import BatchVersions
from canal.lake.identity.lease import MirrorFence
from canal.lake.planning.images import source as source_of
from canal.lake.planning.plan import TablePlan, true_count
from canal.lake.results import TableStats
from canal.lake.settings import MirrorSettings
from canal.lake.store import changelog, delta_append, fs
from canal.lake.store.changelog import record_only
from canal.lake.store.handles import Handles
from canal.lake.types import MirrorError, check_stored_types
from canal.lake.upkeep.folds import Folds


class TableSteps:
    """The table steps of one mirror. ``location(schema, table)``: where a table is; ``forget(*paths)``: what the
    mirror holds open of those tables is dropped; ``rows_now(schema, table)``: a held table's rows as they are now
    (None: not held), which a partial image after a DDL of the batch is completed from."""

    def __init__(
        self,
        settings: MirrorSettings,
        handles: Handles,
        folding: Folds,
        writer: LogWriter,
        ddl: TableDDL,
        versions: BatchVersions,
        fencing: MirrorFence,
        location: Callable[[str, str], str],
        forget: Callable[..., None],
        rows_now: Callable[[str, str], Any],
    ) -> None:
        self._settings = settings
        self._handles = handles
        self._folding = folding
        self._writer = writer
        self._ddl = ddl
        self._versions = versions
        self._fencing = fencing
        self._location = location
        self._forget = forget
        self._rows_now = rows_now

    def apply(
        self, plan: TablePlan, batch_id: int, stats: TableStats, *, check_version: bool = True, record: bool = True
    ) -> bool:
        """Apply ``plan`` (one table's part of a step) as batch ``batch_id``, counted in ``stats``; whether it was
        applied (False: skipped). ``check_version``: a table whose last committed batch id is ``>= batch_id`` is
        skipped (a mirror without a step journal); ``record``: the batch id is committed with it."""
        from deltalake import CommitProperties, Transaction

        self._fencing.check()  # the lease still this mirror's (its driver's): no commit after another writer took it
        path = self._location(plan.schema, plan.table)
        self._ddl.recovered(path)
        exists = delta_append.is_table(path)
        evolution = self._ddl.evolution(plan, path if exists else None)
        merge_on_read = self._settings.mode == "merge_on_read"
        if exists and merge_on_read and (evolution is not None or plan.truncate):
            # DDL applies to the base alone: fold the log into it first (its columns may be newer than the base's)
            self._folding.fold_now(path)
            evolution = self._ddl.evolution(plan, path)
        if not exists:
            self._forget(path)
        moved_to = None if evolution is None else evolution.moved_to
        if moved_to is not None and not exists and fs.is_delta_table(self._location(*moved_to)):
            stats.skipped += 1  # renamed already, after its rows of this batch were merged
            return False
        if exists and check_version:  # a mirror without a step journal (written before it had one)
            done = self._versions.last(path, self._handles.table(path))
            if done is not None and done >= batch_id:
                stats.skipped += 1
                return False
        # a table renamed in this batch commits without the batch id: the rows after the rename (under the new
        # name) are the batch's, and must not be skipped as already applied
        commit = (
            CommitProperties()
            if moved_to is not None or not record
            else CommitProperties(app_transactions=[Transaction(self._settings.app_id, version=batch_id)])
        )
        source: Any = None
        key_names: list[str] = []
        if plan.layout is not None:
            # typed before any step of the batch was applied (apply)
            source, key_names = plan.source if plan.source is not None else source_of(plan, self._settings.zero_dates)
            if not key_names:
                raise MirrorError(
                    f"{plan.schema}.{plan.table} has no primary key and no UNIQUE key over NOT NULL columns; the "
                    "mirror needs one"
                )
            # a partial image after a DDL of the table in this batch: completed from the table's rows as they are now
            source = complete_source(plan, source, key_names, self._rows_now, self._settings.zero_dates)
        if exists and plan.truncate:
            self._handles.table(path).delete()
        if evolution is not None:
            self._ddl.evolve(path, evolution, exists)
            self._forget(path)  # rewritten, or dropped and created anew: a handle would not see it
            self._folding.forget_size(path)
            log = changelog.log_path(path)
            if not fs.is_delta_table(path):
                fs.rmtree(log)  # dropped: its (folded) change log goes too
            elif delta_append.is_table(log):
                changelog.clear(log, self._handles.table(path).schema().to_arrow())  # folded: empty, new layout
            if not evolution.exists:
                stats.applied += 1
                return True
        if source is None:
            # DDL only: record the batch so a replay skips it
            if fs.is_delta_table(path) and record:
                self._folding.settle(path)  # a fold writes the base too: one writer at a time
                record_only(self._handles.table(path), commit)
            self._ddl.move(path, moved_to)
            stats.applied += 1
            return True
        held = exists if evolution is None else delta_append.is_table(path)  # only DDL creates or drops it
        if held:  # the rows' types against the base's: what its DDL declared
            base = self._handles.get(path) or self._handles.table(path)
            check_stored_types(f"{plan.schema}.{plan.table}", source.schema, base.schema().to_arrow())
        deletes = true_count(plan.deletes) if plan.deletes is not None else 0  # the source's ``d`` rows
        stats.upserts += source.num_rows - deletes
        stats.deletes += deletes
        if not held:
            create_table(path, source, commit, self._settings.file_bytes)
            self._ddl.move(path, moved_to)
            stats.applied += 1
            return True
        if merge_on_read:
            records_batch = moved_to is None and record  # as ``commit`` is built
            self._writer.append(path, plan, batch_id, source, key_names, commit, records_batch)
            self._ddl.move(path, moved_to)
            stats.applied += 1
            return True
        merge_into(self._handles.table(path), source, key_names, commit, record)
        self._ddl.move(path, moved_to)
        stats.applied += 1
        return True

