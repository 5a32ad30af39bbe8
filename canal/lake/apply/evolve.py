"""A step's DDL applied to a mirror table: the table rewritten to its new layout, created, dropped or moved.

What the statements do is planned by :mod:`canal.lake.ddl.evolution` (the one DDL code); this module does it to the
files: ADD / DROP / RENAME / CHANGE / MODIFY COLUMN rewrite the table in the source's column order, keeping each
column's data across renames and moves (a declared type change converts the values as the server does, or stops:
:mod:`canal.lake.ddl.conversions`); CREATE TABLE makes it empty (marked with its step:
:mod:`canal.lake.apply.step_marks`); DROP TABLE removes it; RENAME TABLE moves its directory and change log
(:mod:`canal.lake.store.table_moves` in an object store); DROP DATABASE drops every mirrored table of the database
(:meth:`TableDDL.drop_schema`). A rewrite that reorders columns writes the table anew beside
the old one and replaces it; one cut short by a crash is finished by the next batch (:meth:`TableDDL.recovered`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from typing import Any

from canal.lake.apply import step_marks
from canal.lake.ddl.conversions import check_batch_conversions
from canal.lake.ddl.ddl_text import ddl_statement, statement_mode
from canal.lake.ddl.evolution import Evolution, plan_evolution
from canal.lake.ddl.versioning import current_rows
from canal.lake.own_names import log_columns
from canal.lake.planning.images import retyped, typed_column
from canal.lake.planning.plan import RenamePair, TablePlan
from canal.lake.settings import MirrorSettings
from canal.lake.store import changelog, delta_append, fs, table_moves
from canal.lake.store import names as naming
from canal.lake.store.handles import Handles
from canal.lake.types import MirrorError, typed_array
from canal.lake.upkeep.folds import Folds
from canal.sql import CreateTable


class TableDDL:
    """The DDL steps of one mirror (its tables by location). ``forget(*paths)``: what the mirror holds open of those
    tables is dropped; ``step``: the (batch id, step number) of the journaled step being applied, set by the mirror
    (None: no step journal)."""

    def __init__(self, settings: MirrorSettings, handles: Handles, folds: Folds, forget: Callable[..., None]) -> None:
        self._settings = settings
        self._handles = handles
        self._folds = folds
        self._forget = forget
        self.step: tuple[int, int] | None = None
        self._replaces_checked: set[str] = set()  # object store: tables no rewrite is left unfinished in (recovered)

    def table_location(self, schema: str, table: str) -> str:
        return naming.location(self._settings.root, schema, table)

    def _new_table_configuration(self) -> dict[str, str | None]:
        return {"delta.targetFileSize": str(self._settings.file_bytes)}

    def rename_pair(self, pair: RenamePair) -> None:
        """One pair of a RENAME TABLE: the mirror table's directory moves (a table the mirror does not hold, or
        moved already by a replayed step, moves nothing)."""
        moved_to = naming.parse(pair.new)
        assert moved_to is not None  # batch_steps names the pair by directory names
        self.move(fs.join(self._settings.root, pair.old), moved_to)

    def drop_schema(self, schema: str, only: frozenset[str] | None) -> list[str]:
        """DROP DATABASE ``schema``: every mirrored table of it (of ``only``, when set) goes with its change log; the
        directory names of those dropped. The change logs are listed too, and a rewrite's leftovers (``.rewritten``,
        ``.replaced``): a drop a crash cut short is finished by the step's replay."""
        root = self._settings.root
        found: set[str] = set()
        for name in [*fs.listdir(root), *fs.listdir(fs.join(root, changelog.LOG_DIR))]:
            for suffix in (".rewritten", ".replaced"):
                name = name.removesuffix(suffix)
            pair = naming.parse(name)
            if pair is not None and pair[0] == schema and (only is None or naming.display(*pair) in only):
                found.add(name)
        for name in sorted(found):
            path = fs.join(root, name)
            self.recovered(path)  # a rewrite cut short is finished (or its leftovers put back) before it goes
            self._folds.settle(path)  # a fold writes the base and the log: wait for it
            self._forget(path)
            self._folds.forget_size(path)
            fs.rmtree(f"{path}.rewritten")
            fs.rmtree(path)
            fs.rmtree(changelog.log_path(path))
        return sorted(found)

    @staticmethod
    def check_conversions(steps: list[Any], rows_now: Callable[[str, str], Any]) -> None:
        """Before a batch writes anything: an ALTER among its ``steps`` that converts values the mirror holds between
        types it does not model stops it (:func:`canal.lake.ddl.conversions.check_batch_conversions`)."""
        check_batch_conversions(steps, rows_now)

    def evolution(self, plan: TablePlan, path: str | None) -> Evolution | None:
        """What the batch's statements do to the table (None: none of them changes a layout)."""
        statements = [(row, sql) for row, kind, sql in plan.ddl if kind != "TRUNCATE"]
        if not statements:
            return None
        if path is None and not any(
            isinstance(ddl_statement(sql, plan.fold_names, statement_mode(plan.ddl_props.get(row))), CreateTable)
            for row, sql in statements
        ):
            return None  # a table the mirror does not hold yet: its first rows create it
        current = None
        if path is not None and not self._created_by_this_step(path, statements, plan):
            current = [field.name for field in fs.delta_table(path).schema().fields]
        return plan_evolution(
            plan.schema,
            plan.table,
            current,
            statements,
            columns_of=self._columns_of,
            fold_names=plan.fold_names,
            props=plan.ddl_props,
            zero_dates=self._settings.zero_dates,
        )

    def _columns_of(self, schema: str, table: str) -> list[tuple[str, Any]] | None:
        """The columns (name, Arrow type) of a mirror table -- its base's, then those only its change log has yet --
        for a CREATE TABLE ... LIKE it (a batch with DDL appended the staged parts first); None when the mirror does
        not hold it."""
        import pyarrow as pa

        path = self.table_location(schema, table)
        if not delta_append.is_table(path):
            return None
        columns = [(f.name, f.type) for f in pa.schema(self._handles.table(path).schema().to_arrow())]
        log = self._handles.log(path)
        if log is not None:
            in_log = pa.schema(log.schema().to_arrow())
            known = {name for name, _kind in columns} | set(log_columns(in_log.names))
            columns += [(f.name, f.type) for f in in_log if f.name not in known]
        return columns

    def _created_by_this_step(self, path: str, statements: list[tuple[int, str]], plan: TablePlan) -> bool:
        """Whether the table at ``path`` is the one this CREATE TABLE step made before a crash kept the step journal
        from saying so (:mod:`canal.lake.apply.step_marks`): the replay then creates it again, as the step did."""
        if self.step is None or len(statements) != 1:
            return False
        row, sql = statements[0]
        if not isinstance(ddl_statement(sql, plan.fold_names, statement_mode(plan.ddl_props.get(row))), CreateTable):
            return False
        return step_marks.created_by(path, self._settings.app_id, *self.step)

    def evolve(self, path: str, evolution: Evolution, exists: bool) -> None:
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
                    if self.step is None
                    else CommitProperties(
                        custom_metadata=step_marks.created_metadata(self._settings.app_id, *self.step)
                    ),
                )
            return
        if not exists:
            return  # the table's first rows create it, in the layout they carry
        dt = fs.delta_table(path)
        data = fs.delta_rows(dt)
        if evolution.current_only is not None and evolution.current_only in data.column_names:
            data = current_rows(data, evolution.current_only)  # DROP SYSTEM VERSIONING: the history goes
        current = [(field.name, field.type) for field in data.schema]
        conversions = dict(evolution.conversions)
        if conversions and self.step is not None and step_marks.rewritten_by(dt, self._settings.app_id, *self.step):
            conversions = {}  # this step's replay: its conversions are done (a layout cannot tell them)
        fills = dict(evolution.fills)
        converted: dict[str, Any] = {}
        for name, source, _kind in evolution.columns:
            if source is not None and source in data.column_names and conversions.get(name):
                column = data.column(source)
                for conversion in conversions[name]:  # as the server converted them (canal.lake.ddl.conversions)
                    column = conversion.apply(column, self._settings.zero_dates)
                converted[name] = column
        if not evolution.changes(current) and all(
            converted[name].equals(data.column(source).combine_chunks())
            for name, source, _kind in evolution.columns
            if name in converted
        ):
            return
        arrays, fields = [], []
        for name, source, kind in evolution.columns:
            if name in converted:
                column = converted[name]
            elif source is not None and source in data.column_names:
                column = data.column(source)
                if kind is not None and column.type != kind:
                    column = retyped(column, kind, f"{path}: column {source!r}")
            else:
                target = kind if kind is not None else pa.string()
                fill = fills.get(name)
                column = (
                    pa.nulls(data.num_rows, target)
                    if fill is None
                    else typed_column(
                        name, lambda t=target, f=fill: typed_array([f] * data.num_rows, t, self._settings.zero_dates)
                    )
                )
            arrays.append(column)
            fields.append(pa.field(name, column.type))
        rewritten = pa.Table.from_arrays(arrays, schema=pa.schema(fields))
        marks = None if self.step is None else step_marks.rewritten_metadata(self._settings.app_id, *self.step)
        if [f.name for f in fields] != data.column_names and {f.name for f in fields} == set(data.column_names):
            # the same columns in another order: delta-rs keeps a table's column order on overwrite, so the table
            # is written anew beside the old one, which it then replaces (its last batch id carried over)
            self._recreate(path, dt, rewritten, marks)
            return
        fs.write_delta(
            dt,
            rewritten,
            mode="overwrite",
            schema_mode="overwrite",
            commit_properties=None if marks is None else CommitProperties(custom_metadata=marks),
        )

    def _recreate(self, path: str, dt: Any, data: Any, marks: dict[str, str] | None) -> None:
        from deltalake import CommitProperties, Transaction

        version = dt.transaction_version(self._settings.app_id)
        fresh, old = f"{path}.rewritten", f"{path}.replaced"
        fs.rmtree(fresh)
        fs.write_delta(
            fresh,
            data,
            mode="overwrite",
            configuration=self._new_table_configuration(),
            commit_properties=CommitProperties(
                app_transactions=None if version is None else [Transaction(self._settings.app_id, version=version)],
                custom_metadata=marks,
            ),
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

    def recovered(self, path: str) -> None:
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

    def move(self, path: str, moved_to: tuple[str, str] | None) -> None:
        """RENAME TABLE: the mirror table moves with its source table (its directory, Delta log and all, and its
        change log). A table the mirror does not hold, or moved already by a replayed step, moves nothing."""
        if moved_to is None:
            return
        target = self.table_location(*moved_to)
        log, target_log = changelog.log_path(path), changelog.log_path(target)
        if fs.remote(path):
            self._folds.settle(path)
            self._forget(path, target)
            self._folds.forget_size(path)
            table_moves.move_table(path, log, target, target_log)
            return
        if not os.path.exists(path):
            if os.path.exists(log) and os.path.exists(target) and not os.path.exists(target_log):
                os.replace(log, target_log)  # the base moved before a crash, its log not yet: finish the move
            return
        if os.path.exists(target):
            raise MirrorError(f"cannot rename {path} to {target}: the mirror already has that table")
        self._folds.settle(path)
        self._forget(path, target)
        self._folds.forget_size(path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.replace(path, target)
        if os.path.exists(target_log):
            shutil.rmtree(target_log)  # a change log left by an earlier table of that name
        if os.path.exists(log):
            os.makedirs(os.path.dirname(target_log), exist_ok=True)
            os.replace(log, target_log)
