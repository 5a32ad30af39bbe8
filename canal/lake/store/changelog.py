"""Merge-on-read mirror tables: a base Delta table, a change log beside it, and folds that merge one into the other.

A batch that lands on a merge-on-read table appends its last change per key to the table's *change log* -- a Delta
table at ``root/_changes/{directory}`` (the base's directory name, :mod:`canal.lake.store.names`) holding the table's
columns plus ``BATCH`` (the batch id), ``SEQ`` (the change row's ``seq`` in it) and ``OP`` (``u`` upsert, ``d``
delete), names no source column can have (:mod:`canal.lake.own_names`) -- so its cost is what the batch holds, not
the table's size. Changes are ordered by (batch id, seq): batch ids increase, and so does ``seq``
within a batch. A *fold* merges the log into the *base* (``root/{directory}``, a plain Delta table of the
source's columns): every key's latest change, deletes dropped. It commits the base together with the change it folded
through -- its (batch id, seq), as the versions of two app transactions (:data:`FOLD_BATCH_APP_ID`,
:data:`FOLD_SEQ_APP_ID`) and in the commit's metadata (``pycanal.folded_batch``, ``pycanal.folded_seq``) -- then
trims the log of the rows it folded.

Why every state reads exactly (:func:`current_state`). Let ``F`` be the base's folded change, read from the same
Delta snapshot as its rows. The base holds the result of every change up to ``F``; the log rows after ``F`` are all
newer than anything in the base. The current state is the base without the keys those newer rows name, plus the
newer rows' latest upserts -- taken from a log snapshot that still holds every change after ``F``. A reader takes
the log's snapshot first, then the base's: a fold that commits in between trims only after its base commit, so the
log snapshot holds what it folded, and the newer base skips it as ``<= F``. (The other way round, a fold committing
between the two snapshots trims changes after the older base's ``F`` before the log is read: a deleted row came
back.) A trim that deletes the files of the log snapshot being read makes the read fail, and it is done again. So:

* a crash after the fold's base commit and before the trim leaves folded rows in the log: readers skip them
  (``<= F``) and the next fold trims them;
* a crash during either commit leaves the commit whole or absent (Delta commits are atomic);
* an append racing a fold comes after every change the fold read: between two folds a table gets at most one
  append per batch (a DDL or key change in a batch folds the table first, within the batch), and batches
  increase; the fold trims only ``<= F``;
* a batch replayed, or written twice by a speculative task, appends the rows it had: the latest change per key is
  the same row either way (and a copy landing after a fold of its batch is ``<= F``: skipped, as folded);
* two folds of one table racing: the second MERGE into the base fails on Delta's conflict check (the base changed
  since it read it) and does nothing; the next fold starts from the new base.

A batch's small parts of many tables may wait in one staged file before they are appended to their logs
(:mod:`canal.lake.store.staged`): readers read them before the log's snapshot and take them as log rows.

A standard Delta reader of ``root/{directory}`` sees the base: the source as of the table's last fold, whose
commit names the change it folded through (``pycanal.folded_batch``, ``pycanal.folded_seq``).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import attrs

from canal.lake.key_identity import drop_identity, with_identity
from canal.lake.own_names import BATCH as BATCH  # re-exported: the log's columns, named there
from canal.lake.own_names import LOG_COLUMNS, current_names, log_columns
from canal.lake.own_names import OP as OP
from canal.lake.own_names import SEQ as SEQ
from canal.lake.store import fs, latest_changes
from canal.lake.store.delta_append import is_table
from canal.lake.store.errors import ERROR_CHARS, storage_error_types
from canal.lake.store.staged import staged_rows
from canal.lake.types import MirrorError, MirrorStorageError

INTERNAL_COLUMNS = LOG_COLUMNS
FOLD_BATCH_APP_ID = "pycanal.folded.batch"
"""The app id whose transaction version on a base table is the batch id of the change it was folded through."""
FOLD_SEQ_APP_ID = "pycanal.folded.seq"
"""The app id whose transaction version on a base table is the seq of the change it was folded through."""
NOT_FOLDED = (-1, -1)
Change = tuple[int, int]  # (batch id, seq): the order of changes
LOG_DIR = "_changes"
_KEYS_FILE = "_pycanal_keys.json"  # in the log's directory: Delta keeps no custom table properties; vacuum skips "_"
_REPLACED_FILE = "_pycanal_replaced.json"  # base files folds replaced, and when: deleted past the retention
_READ_ATTEMPTS = 3
T = TypeVar("T")


_COMMIT_ATTEMPTS = 5


def retrying_commits(commit: Callable[[], T], lost: Callable[[BaseException], bool] | None = None) -> T:
    """``commit()``, again when it lost a race with another writer of the same Delta table (a fold's trim and a
    batch's append): a commit that failed wrote nothing, so doing it again is safe. ``lost`` tells such a failure
    (default: Delta's ``CommitFailedError``)."""
    from deltalake.exceptions import CommitFailedError

    for attempt in range(_COMMIT_ATTEMPTS):
        try:
            return commit()
        except Exception as exc:
            raced = lost(exc) if lost is not None else isinstance(exc, CommitFailedError)
            if not raced or attempt == _COMMIT_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


LOG_HISTORY_S = 1.0
"""How long a change log keeps its commits behind a checkpoint (one every 10 commits). A change log takes a commit
per batch, and Delta lists its whole ``_delta_log`` directory to find new commits, so an append would otherwise cost
more with every batch (measured: 4.6 ms at 100 commits, 24 ms at 400). The log's history is not needed (its
checkpoints keep each app id's last batch id); a reader that loses a commit file to the cleanup reads again."""


def log_configuration(history_s: float) -> dict[str, str | None]:
    """The Delta table properties of a new change log."""
    return {
        "delta.checkpointInterval": "10",
        "delta.logRetentionDuration": f"interval {max(1, round(history_s))} seconds",
    }


COMPACT_FILES = 16
"""A change log of this many data files is compacted into one between folds: reading the current state reads every
log file, and a small file costs about as much to open as a large one."""


def append(log: str, rows: Any, commit: Any, table: Any = None, history_s: float = LOG_HISTORY_S) -> Any:
    """Append change rows to the log (created by the first), through ``table`` (the log's DeltaTable, kept open by
    the caller) when given: with Delta's schema merge only when they carry columns the log has not. Returns the log's
    DeltaTable to keep open (None when this append created the log)."""
    used: list[Any] = [None]
    kept = [table]

    def write() -> None:
        if kept[0] is None and not is_table(log):
            fs.write_delta(
                log, rows, mode="append", commit_properties=commit, configuration=log_configuration(history_s)
            )
            return
        # an append from a version before a trim fails Delta's conflict check (and leaves its file behind)
        handle = used[0] = refreshed(kept[0], log) if kept[0] is not None else open_table(log)
        known = {f.name for f in handle.schema().fields}
        merge = not set(rows.column_names) <= known
        try:
            fs.write_delta(
                handle, rows, mode="append", schema_mode="merge" if merge else None, commit_properties=commit
            )
        except Exception:
            kept[0] = None  # read the log anew next time: the handle may name a commit the cleanup took
            raise

    # lost races: a fold's trim committed first (CommitFailedError), or, in another process (a fold beside Spark
    # tasks' appends), the log's cleanup deleted a commit file between Delta listing the log and reading it
    retrying_commits(write, _lost_race)
    return used[0]


def refreshed(table: Any, path: str) -> Any:
    """The kept-open DeltaTable ``table`` of ``path`` brought up to date -- or opened anew when the commits after its
    version were cleaned up behind a checkpoint (a change log keeps them ``log_history_s``)."""
    try:
        table.update_incremental()
    except Exception as exc:
        if not _lost_race(exc):
            raise
        return open_table(path)
    return table


def open_table(path: str | os.PathLike[str]) -> Any:
    """The change log's DeltaTable, opened again when a commit it listed was cleaned up before it read it (the log's
    cleanup runs in the process that folds, which need not be this one)."""
    for attempt in range(_READ_ATTEMPTS):
        try:
            return fs.delta_table(path)
        except Exception as exc:
            if not _lost_race(exc) or attempt == _READ_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable")


def log_path(base: str | os.PathLike[str]) -> str:
    """The change log of the base table at ``base`` (``root/_changes/{directory}``, the base's directory name)."""
    return _log_path(os.fspath(base))


@functools.lru_cache(maxsize=4096)
def _log_path(base: str) -> str:
    # remembered: a batch asks for the log of each table it writes, and building paths costs more than the lookup
    parent, name = fs.split(base)
    return fs.join(parent, LOG_DIR, name)


def read_keys(log: str) -> list[str] | None:
    """The key columns the log's rows are keyed by, None when the table has no log."""
    try:
        data = json.loads(fs.read_text(fs.join(log, _KEYS_FILE)))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise MirrorError(f"the change log's key file in {log} cannot be read: {exc}") from exc
    if not isinstance(data, list) or not all(isinstance(k, str) for k in data) or not data:
        raise MirrorError(f"the change log's key file in {log} is damaged: {data!r}")
    return data


def write_keys(log: str, keys: Sequence[str]) -> None:
    fs.write_bytes(fs.join(log, _KEYS_FILE), json.dumps(list(keys)).encode())


def folded(base: Any) -> Change:
    """The change (batch id, seq) the base table (a DeltaTable) was folded through; (-1, -1) before its first."""
    batch, seq = base.transaction_version(FOLD_BATCH_APP_ID), base.transaction_version(FOLD_SEQ_APP_ID)
    return NOT_FOLDED if batch is None or seq is None else (int(batch), int(seq))


def _after(rows: Any, change: Change) -> Any:
    """The mask of the log rows that come after ``change``."""
    import pyarrow.compute as pc

    batch, seq = rows.column(BATCH), rows.column(SEQ)
    return pc.or_(pc.greater(batch, change[0]), pc.and_(pc.equal(batch, change[0]), pc.greater(seq, change[1])))


def _newer(log_table: Any, after: Change, keys: Sequence[str]) -> Any:
    """Each key's last change in the log (a DeltaTable) after ``after``, in change order, read a file at a time and
    reduced as it comes (:func:`canal.lake.store.latest_changes.reduced`): a fold holds its changes and one file, not
    the log (a dataset filter aborted deltalake 1.6)."""
    pieces = (current_names(piece) for piece in fs.delta_pieces(log_table))
    newer = (p if after == NOT_FOLDED or not p.num_rows else p.filter(_after(p, after)) for p in pieces)
    changes = latest_changes.reduced(newer, keys)
    return current_names(fs.delta_rows(log_table)) if changes is None else changes  # no file: no rows, its schema


def _overlay(base_rows: Any, newer: Any, keys: Sequence[str]) -> Any:
    """``base_rows`` without the keys ``newer`` (latest changes, all newer than the base) names, plus its upserts, in
    the base's column order (columns only one side has are filled with nulls)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if newer is None or newer.num_rows == 0:
        return base_rows
    names = [k for k in keys if k in base_rows.column_names]
    if len(names) != len(keys):
        raise MirrorError(f"the change log is keyed by {list(keys)}, which the base table does not have all of")
    # joined on the keys' identities (a -0.0 change replaces the base's 0.0 row), the base's values kept
    base_ids, on = with_identity(base_rows, keys)
    newer_ids, _ = with_identity(newer.select(list(keys)), keys)
    kept = drop_identity(base_ids.join(newer_ids.select(on), keys=on, join_type="left anti", use_threads=True))
    upserts = newer.filter(pc.equal(newer.column(OP), "u")).drop_columns(list(INTERNAL_COLUMNS))
    combined = pa.concat_tables([kept, upserts], promote_options="permissive")
    order = [*base_rows.column_names, *(c for c in upserts.column_names if c not in base_rows.column_names)]
    return combined.select(order)


def current_state(base: str | os.PathLike[str]) -> Any:
    """The current rows of a mirror table (a pyarrow Table): its base overlaid with the newer changes of its log --
    exact whatever fold or append is under way (module docstring), its staged changes included
    (:mod:`canal.lake.store.staged`). A table without a log is its base."""
    import pyarrow as pa

    log = log_path(base)
    for attempt in range(_READ_ATTEMPTS):
        try:
            keys = read_keys(log)
            staged = staged_rows(base)  # before the log's snapshot (canal.lake.store.staged)
            log_table = _log_snapshot(log, keys)  # before the base's (module docstring)
            table = fs.delta_table(base)
            after = folded(table)
            if keys is None or log_table is None:
                return fs.delta_rows(table)
            with ThreadPoolExecutor(1) as pool:  # the log's files read while the base's are
                reading = pool.submit(_newer, log_table, after, keys)
                rows = fs.delta_rows(table)
                newer = reading.result()
            if staged is not None and staged.num_rows:
                staged = staged.filter(_after(staged, after)) if after != NOT_FOLDED else staged
                newer = latest_changes.latest(pa.concat_tables([newer, staged], promote_options="permissive"), keys)
            return _overlay(rows, newer, keys)
        except Exception as exc:
            # a fold removed the files of the versions just read (its trim deletes them at once), or the log's
            # cleanup a commit file: read again
            if not _lost_race(exc) or attempt == _READ_ATTEMPTS - 1:
                if isinstance(exc, MirrorError) or not isinstance(exc, storage_error_types()):
                    raise
                what = f"{type(exc).__name__}: {str(exc)[:ERROR_CHARS]}"
                raise MirrorStorageError(f"{base} cannot be read: {what}") from exc
    raise AssertionError("unreachable")


@attrs.frozen
class CurrentFiles:
    """What a reader outside pycanal needs to build a mirror table's current state itself (:func:`current_files`)."""

    base_files: list[str]
    log_files: list[str]
    folded: Change  # the base's folded change (batch id, seq): log rows up to it are in the base already
    keys: list[str] | None  # the log's key columns (None without a log)
    staged: Any  # the staged changes not in the log yet (a pyarrow Table in the log's columns), or None


def current_files(base: str | os.PathLike[str]) -> CurrentFiles:
    """The base's data files, the log's data files and its staged changes (:mod:`canal.lake.store.staged`), the base's
    folded change and the key columns: the current state is the base overlaid with each key's latest change (log
    and staged rows together) after the folded one."""
    log = log_path(base)
    keys = read_keys(log)
    staged = staged_rows(base) if keys is not None else None  # before the log's snapshot (canal.lake.store.staged)
    log_table = _log_snapshot(log, keys)  # before the base's (module docstring)
    table = fs.delta_table(base)
    log_files = [] if log_table is None else log_table.file_uris()
    if log_table is None or (staged is not None and staged.num_rows == 0):
        staged = None
    return CurrentFiles(list(table.file_uris()), list(log_files), folded(table), keys, staged)


def _log_snapshot(log: str, keys: list[str] | None) -> Any:
    """The log's current snapshot (a DeltaTable), None when the table has none. Readers take it before the base's:
    a fold that commits in between folded only changes this snapshot still holds, as the fold trims the log after
    its base commit. Taken after the base's, it could miss changes -- a fold committing in between folds past the
    older base's change and trims them from the log before it is read."""
    if keys is None or not is_table(log):
        return None
    return fs.delta_table(log)


@attrs.frozen(slots=True)
class LogSize:
    """How big a table's change log is beside its base (from the Delta logs' file statistics, no data read)."""

    log_rows: int
    log_files: int
    base_rows: int


def _rows_and_files(table: Any) -> tuple[int, int]:
    import pyarrow as pa
    import pyarrow.compute as pc

    actions = pa.table(table.get_add_actions(flatten=True))
    files = actions.num_rows
    if files == 0:
        return 0, 0
    counts = actions.column("num_records")
    total = pc.sum(counts).as_py()
    return int(total or 0), files


def log_size(base: str | os.PathLike[str], base_table: Any = None, log_table: Any = None) -> LogSize:
    """The sizes of the table at ``base`` and its log, through their DeltaTables when the caller keeps them open
    (up to date), else opened here."""
    log = log_path(base)
    if log_table is None and is_table(log):
        log_table = open_table(log)
    log_rows, log_files = _rows_and_files(log_table) if log_table is not None else (0, 0)
    base_rows, _ = _rows_and_files(base_table if base_table is not None else open_table(base))
    return LogSize(log_rows, log_files, base_rows)


@attrs.frozen(slots=True)
class FoldResult:
    table: str
    folded_rows: int  # log rows merged into the base (latest per key)
    through: Change  # the change (batch id, seq) the base is folded through now ((-1, -1): never folded)
    seconds: float
    trimmed_files: int


def quote(name: str) -> str:
    """A column name as a Delta SQL identifier: in double quotes, a double quote doubled -- every other character
    (backticks, dots, spaces, single quotes, non-ASCII letters) stands for itself, case kept. The one way the mirror
    names a column in the SQL it hands deltalake (predicates, MERGE updates)."""
    return '"' + name.replace('"', '""') + '"'


def _uris_to_paths(uris: Sequence[str]) -> list[str]:
    """Data file URIs as deltalake gives them, as locations: local paths, or object-store URIs as they are."""
    return [uri[len("file://") :] if uri.startswith("file://") else uri for uri in uris]


def _delete_files(paths: Sequence[str]) -> int:
    deleted = 0
    for path in paths:
        if fs.remote(path):
            fs.unlink(path)  # (an object store does not tell whether it was there)
            deleted += 1
            continue
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
            deleted += 1
    return deleted


class FoldRaceError(MirrorError):
    """A fold lost a commit race: with another fold of the same table (a speculative twin task), when it changed
    nothing and the other did its work; or, trimming the log, with appends (five attempts): the base holds the
    folded changes, and the log keeps them until the next fold trims it (readers skip them meanwhile)."""


def _lost_race(exc: BaseException) -> bool:
    from deltalake.exceptions import CommitFailedError, DeltaError

    if isinstance(exc, CommitFailedError | FileNotFoundError):
        return True
    return isinstance(exc, DeltaError) and "not found" in str(exc)


RETENTION_S = 168 * 3600.0
"""How long the base files a fold replaced stay, by default: Delta's own ``deletedFileRetentionDuration`` (a week),
so the base's older versions can still be read (time travel) as with any Delta table."""


def fold(
    base: str | os.PathLike[str],
    *,
    name: str = "",
    appends: contextlib.AbstractContextManager[object] | None = None,
    by_files: bool = False,
    retention_s: float = RETENTION_S,
) -> FoldResult:
    """Merge the log of the table at ``base`` into its base and trim the log (module docstring: why any crash or race
    between these steps changes no answer). The base files a fold replaces stay ``retention_s`` seconds -- or the
    base's ``delta.deletedFileRetentionDuration`` when that is longer -- so a reader of an older version of the base
    (time travel) still finds them; a later fold deletes them once that time has passed. The log files it trims are
    deleted at once (only :func:`current_state` reads the log, and it reads again when a file went away).

    A fold that loses a race with another fold of the table raises :class:`FoldRaceError`, having changed nothing
    the other did not do. ``appends``: the lock the process's appends to the log hold, held while the fold trims the
    log (for the trim's checkpoint alone ``by_files``: :func:`trim`) and sweeps it: a Delta append that loses to a
    trim leaves its data file behind, and files no version references are swept once they are
    :data:`ORPHAN_AGE_S` old."""
    try:
        return _fold(
            base,
            name=name or fs.split(base)[1],
            appends=appends or contextlib.nullcontext(),
            by_files=by_files,
            retention_s=retention_s,
        )
    except Exception as exc:
        if _lost_race(exc):
            raise FoldRaceError(
                f"fold of {name or fs.split(base)[1]} lost a commit race (to another fold of the table, or to appends "
                f"while it trimmed the log): {exc}"
            ) from exc
        raise


def _fold(
    base: str | os.PathLike[str],
    *,
    name: str,
    appends: contextlib.AbstractContextManager[object],
    by_files: bool,
    retention_s: float,
) -> FoldResult:
    from deltalake import CommitProperties, Transaction

    began = time.perf_counter()
    log = log_path(base)
    keys = read_keys(log)
    if keys is None or not is_table(log):
        return FoldResult(name, 0, NOT_FOLDED, time.perf_counter() - began, 0)
    table = fs.delta_table(base)
    after = folded(table)
    log_table = fs.delta_table(log)
    changes = _newer(log_table, after, keys)
    through = after
    merged = 0
    if changes.num_rows:
        import pyarrow.compute as pc

        merged = changes.num_rows
        last = changes.take(pc.sort_indices(changes, sort_keys=[(BATCH, "descending"), (SEQ, "descending")])[:1])
        through = (int(last.column(BATCH)[0].as_py()), int(last.column(SEQ)[0].as_py()))
        base_files = set(table.file_uris())
        source = changes.drop_columns([BATCH, SEQ])
        predicate = " AND ".join(f"t.{quote(k)} = s.{quote(k)}" for k in keys)
        commit = CommitProperties(
            app_transactions=[
                Transaction(FOLD_BATCH_APP_ID, version=through[0]),
                Transaction(FOLD_SEQ_APP_ID, version=through[1]),
            ],
            custom_metadata={"pycanal.folded_batch": str(through[0]), "pycanal.folded_seq": str(through[1])},
        )
        if not merge_changes(table, source, predicate, commit):
            record_only(table, commit)
        table.update_incremental()
        replaced = [os.path.basename(p) for p in _uris_to_paths(sorted(base_files - set(table.file_uris())))]
        _retire_replaced(base, log, replaced, max(retention_s, _table_retention_s(table)))
    trimmed = trim(log, through, appends, by_files=by_files)
    with appends:
        trimmed += _sweep_orphans(log)
    return FoldResult(name, merged, through, time.perf_counter() - began, trimmed)


ORPHAN_AGE_S = 600.0
"""A data file in a change log's directory that no version references and that is this old is an orphan (of an
append that lost a commit race, or of a killed writer): no write in flight is that old."""


def _sweep_orphans(log: str) -> int:
    referenced = {os.path.basename(p) for p in _uris_to_paths(fs.delta_table(log).file_uris())}
    cutoff = time.time() - ORPHAN_AGE_S
    orphans = [
        fs.join(log, name)
        for name, modified in fs.files_modified(log)
        if name.endswith(".parquet") and name not in referenced and modified < cutoff
    ]
    return _delete_files(orphans)


def merge_changes(table: Any, source: Any, predicate: str, commit: Any) -> bool:
    """MERGE the last change per key (``source``: the table's columns and :data:`OP`) into the Delta table
    ``table``: deletes delete, upserts update or insert, ``predicate`` matching keys (source ``s``, target ``t``).
    False when it changed nothing -- and so committed nothing, ``commit``'s app transactions included (deletes of
    rows the table does not hold): the caller records them with :func:`record_only` where it needs them.

    Every source column is named, quoted, in ``updates``: deltalake's ``update_all`` / ``insert_all`` quote names
    with backticks and fail on a name holding one (a MySQL column may)."""
    columns = {quote(name): f"s.{quote(name)}" for name in source.column_names if name != OP}
    metrics = (
        table.merge(
            source,
            predicate=predicate,
            source_alias="s",
            target_alias="t",
            merge_schema=True,
            writer_properties=fs.writer_properties(len(columns)),
            commit_properties=commit,
        )
        .when_matched_delete(predicate=f"s.{OP} = 'd'")
        .when_matched_update(updates=columns, predicate=f"s.{OP} = 'u'")
        .when_not_matched_insert(updates=columns, predicate=f"s.{OP} = 'u'")
        .execute()
    )
    return bool(metrics.get("num_target_files_added") or metrics.get("num_target_files_removed"))


def record_only(table: Any, commit: Any) -> None:
    """Commit ``commit`` (its app transactions) to the Delta table ``table`` without changing its rows."""
    import pyarrow as pa

    fs.write_delta(table, pa.schema(table.schema().to_arrow()).empty_table(), mode="append", commit_properties=commit)


def _replaced_before(log: str) -> list[tuple[str, float]]:
    """(name in the base's directory, when a fold replaced it) of the base files folds replaced and did not delete
    yet. (A list of bare names, as an older pycanal wrote it, reads as replaced long ago: it deleted them at the
    next fold.)"""
    try:
        data = json.loads(fs.read_text(fs.join(log, _REPLACED_FILE)))
    except (FileNotFoundError, ValueError):
        return []
    if not isinstance(data, list):
        return []
    kept: list[tuple[str, float]] = []
    for item in data:
        if isinstance(item, str):
            kept.append((item, 0.0))
        elif isinstance(item, list) and len(item) == 2:
            name, at = item
            if isinstance(name, str) and isinstance(at, int | float):
                kept.append((name, float(at)))
    return kept


def _retire_replaced(base: str | os.PathLike[str], log: str, replaced: Sequence[str], retention_s: float) -> None:
    """Record the base files a fold just ``replaced``, and delete those replaced more than ``retention_s`` ago."""
    now = time.time()
    waiting = [*_replaced_before(log), *((name, now) for name in replaced)]
    due = [name for name, at in waiting if at + retention_s <= now]
    _delete_files([fs.join(os.fspath(base), name) for name in due])
    kept = [[name, at] for name, at in waiting if at + retention_s > now]
    fs.write_bytes(fs.join(log, _REPLACED_FILE), json.dumps(kept).encode())


_INTERVAL = re.compile(r"\s*interval\s+(\d+)\s+(second|minute|hour|day|week)s?\s*", re.IGNORECASE)
_UNIT_S = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 604800}


def _table_retention_s(table: Any) -> float:
    """The base's ``delta.deletedFileRetentionDuration`` in seconds (0 when it sets none, or none this reads)."""
    text = table.metadata().configuration.get("delta.deletedFileRetentionDuration")
    match = _INTERVAL.fullmatch(text or "")
    return float(int(match.group(1)) * _UNIT_S[match.group(2).lower()]) if match else 0.0


def trim(
    log: str,
    through: Change,
    appends: contextlib.AbstractContextManager[object] | None = None,
    *,
    by_files: bool = False,
) -> int:
    """Remove the log rows up to the change ``through`` (folded into the base), deleting the files they were in; the
    number of files deleted.

    With ``by_files`` (this process is the log's only writer), when every file holds changes on one side of
    ``through`` only -- as each append writes one batch's changes to a file of its own, and a fold reads whole
    files --, the files before it are removed by a commit of ``remove`` actions alone, without ``appends`` (the
    lock the process's appends to the log hold; taken to checkpoint), so the batches that come meanwhile land
    (:func:`_trim_files`). Otherwise the rows are deleted by a Delta DELETE holding ``appends`` throughout: Delta's
    conflict check fails a DELETE when an append committed while it ran (it cannot tell that the appended rows are
    all newer than ``through``), and a batch comes every few milliseconds."""

    if through == NOT_FOLDED or not is_table(log):
        return 0
    lock = appends or contextlib.nullcontext()
    if by_files:
        trimmed = _trim_files(log, through, lock)
        if trimmed is not None:
            return trimmed
    batch, seq, _op = log_columns([f.name for f in fs.delta_table(log).schema().fields])
    b, s = quote(batch), quote(seq)
    with lock:
        return _replacing_files(
            log, lambda table: table.delete(f"{b} < {through[0]} OR ({b} = {through[0]} AND {s} <= {through[1]})")
        )


_PLAIN_PATH = re.compile(r"[A-Za-z0-9._-]+")  # a data file named in the table's directory with nothing to escape


def _trim_files(log: str, through: Change, appends: contextlib.AbstractContextManager[object]) -> int | None:
    """Trim by removing the log's files whose changes all come at or before ``through``; the number of files
    deleted, or None when a file holds changes on both sides (or is named in a way this does not read) or a commit
    made meanwhile removed one of them: the caller deletes rows instead. A batch that appends while this runs writes
    a file of its own, which is not among those read here; one that had appended a batch at or before ``through``
    once more (a speculative duplicate) wrote the same changes, and they go too."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from canal.lake.store import delta_append

    table = fs.delta_table(log)
    version = table.version()
    before = set(table.file_uris())
    batch_column, seq_column, _op = log_columns([f.name for f in table.schema().fields])
    adds = pa.table(table.get_add_actions(flatten=False))
    folded: list[tuple[str, int]] = []
    for path, size in zip(adds.column("path").to_pylist(), adds.column("size_bytes").to_pylist(), strict=True):
        if not _PLAIN_PATH.fullmatch(path):
            return None
        try:
            where = fs.join(log, path)
            source = pa.BufferReader(fs.read_bytes(where)) if fs.remote(where) else where
            changes = pq.read_table(source, columns=[batch_column, seq_column])
        except (OSError, pa.ArrowInvalid):  # gone, or without the columns: Delta's DELETE reads the table anew
            return None
        batch, seq = changes.column(batch_column), changes.column(seq_column)
        at_last = pc.and_(pc.equal(batch, through[0]), pc.less_equal(seq, through[1]))
        up_to = pc.or_(pc.less(batch, through[0]), at_last)
        done = pc.sum(up_to.cast(pa.int64())).as_py() or 0
        if done == changes.num_rows:
            folded.append((path, int(size)))
        elif done:
            return None
    if not folded:
        return 0
    if delta_append.remove_files(log, folded, version=version) is None:
        return None
    return _checkpoint_and_delete(table, log, before, appends)


def _replacing_files(
    log: str, change: Callable[[Any], object], appends: contextlib.AbstractContextManager[object] | None = None
) -> int:
    """``change(table)`` on the log's DeltaTable, brought up to date first and again when it lost a commit race,
    then the data files it removed from the table deleted (only pycanal reads the log, and it reads again when a file
    went away); the number deleted.

    ``appends`` (the lock the process's appends to the log hold, when the caller does not hold it already) is held
    for the checkpoint alone, not for ``change``, which may take tens of milliseconds: a compaction, which Delta lets
    commit after concurrent appends, rewrites the files while batches land (held throughout, a batch over 50 tables
    whose logs were compacted after the same batch waited 1.3-1.9 s instead of 28 ms). A direct append that finds
    its version taken by ``change`` goes on to the next."""
    table = fs.delta_table(log)
    before = set(table.file_uris())

    def commit() -> None:
        table.update_incremental()
        change(table)

    retrying_commits(commit)
    return _checkpoint_and_delete(table, log, before, appends or contextlib.nullcontext())


def _checkpoint_and_delete(
    table: Any, log: str, before: set[str], appends: contextlib.AbstractContextManager[object]
) -> int:
    """After a commit that removed files from the log: bring ``table`` up to date and checkpoint it holding
    ``appends``, then delete the files of ``before`` (its file URIs before the commit) it no longer holds; the
    number deleted."""
    with appends:
        table.update_incremental()
        checkpoint(table, log)
    return _delete_files(_uris_to_paths(sorted(before - set(table.file_uris()))))


CHECKPOINT_EVERY = 10
"""Commits of a change log after which its trims and compactions write a checkpoint (the log's own
``delta.checkpointInterval``): appends written directly (:mod:`canal.lake.store.delta_append`) write none."""


def checkpoint(table: Any, log: str) -> None:
    """Checkpoint the log (an up-to-date DeltaTable) when it has :data:`CHECKPOINT_EVERY` commits since its last
    checkpoint, and drop the commits behind it older than the log's retention (``log_history_s``). Called holding
    the log's append lock: a direct append never publishes a commit behind a checkpoint."""
    from canal.lake.store.delta_append import last_checkpoint

    if table.version() - last_checkpoint(log) >= CHECKPOINT_EVERY:
        table.create_checkpoint()
        table.cleanup_metadata()


def compact(log: str, appends: contextlib.AbstractContextManager[object] | None = None) -> int:
    """Rewrite the log's data files into few (Delta OPTIMIZE), deleting the old files; the number deleted.
    ``appends``: see :func:`_replacing_files`."""
    if not is_table(log):
        return 0
    return _replacing_files(log, fs.compact_delta, appends)


def take_own_names(log: str) -> bool:
    """Rewrite a change log an older pycanal wrote (columns ``_canal_*``) under the mirror's own names
    (:mod:`canal.lake.own_names`), rows and history kept; False when it has them. Hold the log's append lock."""
    if not is_table(log) or log_columns([f.name for f in fs.delta_table(log).schema().fields]) == LOG_COLUMNS:
        return False
    _replacing_files(
        log, lambda t: fs.write_delta(t, current_names(fs.delta_rows(t)), mode="overwrite", schema_mode="overwrite")
    )
    return True


def clear(log: str, schema: Any) -> None:
    """Empty the log and give it ``schema`` (the base's columns after a DDL, plus the log's own): the log's Delta
    history, and so the batch ids committed to it, stays."""
    import pyarrow as pa

    fields = [f for f in pa.schema(schema) if f.name not in INTERNAL_COLUMNS]
    full = pa.schema([*fields, pa.field(BATCH, pa.int64()), pa.field(SEQ, pa.int64()), pa.field(OP, pa.string())])
    if not is_table(log):
        return
    _replacing_files(
        log, lambda table: fs.write_delta(table, full.empty_table(), mode="overwrite", schema_mode="overwrite")
    )


def key_range(source: Any, key_names: Sequence[str]) -> str:
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
