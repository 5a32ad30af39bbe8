"""Staged changes: a batch's small parts of many tables, written as one file until they join their change logs.

A merge-on-read batch appends each table's changes to that table's change log: a Parquet file and a Delta commit
per table. For a table's few changes that costs about half a millisecond whatever they hold -- mostly Parquet's
fixed cost of a file (0.2 ms for 40 rows, against 17 us for the same rows in Arrow's IPC format) and the creation
of two files, which on a disk file system takes 30 us to 0.7 ms each, by what was deleted near them lately. A batch
spread over 50 tables paid it 50 times. So a table's part of at most ``stage_rows`` rows is *staged* instead: every
staged part of a batch goes into one file, ``root/_pycanal_staged/{batch id}-{app id as hex}.arrow`` -- an Arrow
IPC file with a row per table: its name, and its rows (the rows its change log would have taken, batch and seq
included) as an Arrow IPC stream. A table's staged parts are *flushed* -- appended to its change log as one append
that records the last of their batch ids -- a few tables a batch, and whenever anything else is about to write its
change log or its base (a larger part, a DDL, a fold on demand, a closing mirror, Spark tasks). A staged file is
deleted once each of its tables has been flushed.

Why every state reads exactly. A table's staged changes are always newer than every change its log holds: nothing
but a flush writes the log while it has staged parts, and a flush takes all of them. A fold folds what the log
held, so a fold's change (batch, seq) is older than every staged change. A reader (:func:`staged_rows`) reads the
staged files before it takes the log's snapshot: a flush committing in between leaves the same changes in both --
copies of one change, which the current state takes once (:func:`canal.lake.store.latest_changes.latest`) -- and a
staged file is deleted only after its tables' flushes committed, so a file gone before it is read is in the log the
reader takes next. A process killed while it writes a staged file leaves a temporary file that nothing reads (a file
appears whole under its name, by a rename -- or one PUT in an object store, :mod:`canal.lake.store.fs`); killed after,
its batch is staged: a replay of the batch writes the same file again, and the next mirror on the root takes the
staged parts up where they are (:func:`load`), dropping those its last flush had appended already.

The mirror that staged them is the only writer of its change logs (``DeltaMirror.sole_log_writer``); where Spark
tasks append, the driver flushes first and stages nothing more.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import attrs

from canal.files import write_new
from canal.lake.own_names import current_names
from canal.lake.store import fs
from canal.lake.store.arrow_streams import read_stream, stream_bytes
from canal.lake.types import MirrorError

STAGED_DIR = "_pycanal_staged"
FLUSHED_BATCHES = "pycanal.flushed_batches"
"""The ``commitInfo`` entry of a flush's commit: the batch ids of the staged parts it appended (its ``txn`` holds
the last)."""
_SUFFIX = ".arrow"
_TMP_SUFFIX = ".tmp"
ABANDONED_AFTER_S = 600.0
"""How old a temporary staged file of this app must be for a starting mirror to delete it as a write its process did
not live to finish. A fresh one may be another live process's write under way -- a speculative twin of a Spark task
starts its mirror while the first task writes --, which a write takes milliseconds to rename; deleted, it failed that
task (seen in the twin-task test)."""


def staged_dir(root: str | os.PathLike[str]) -> str:
    """The directory of the staged files under ``root`` (a local path or an object-store URI)."""
    return fs.join(os.fspath(root), STAGED_DIR)


def _file_name(batch_id: int, app_id: str) -> str:
    return f"{batch_id:020d}-{app_id.encode().hex()}{_SUFFIX}"


def _parse_name(name: str) -> tuple[int, str] | None:
    """(batch id, app id) of a staged file's name; None for anything else (a temporary file)."""
    if not name.endswith(_SUFFIX):
        return None
    batch, _, app = name[: -len(_SUFFIX)].partition("-")
    try:
        return int(batch), bytes.fromhex(app).decode()
    except ValueError:
        return None


def _interrupted(name: str) -> tuple[int, str] | None:
    """(batch id, app id) of the staged file a local temporary file named ``name`` (``{name}.{random}.tmp``,
    :func:`_write_local`) was to become -- a write interrupted by its process's death --, None for any other name."""
    return _parse_name(name.rsplit(".", 2)[0]) if name.endswith(_TMP_SUFFIX) else None


def _outer_schema() -> Any:
    import pyarrow as pa

    return pa.schema([("table", pa.string()), ("rows", pa.large_binary())])


def write(root: str | os.PathLike[str], app_id: str, batch_id: int, parts: dict[str, Any]) -> str:
    """Stage ``parts`` (table name ``schema.table`` -> its rows, in its change log's schema) as batch ``batch_id``'s
    staged file, replacing one a replay of the batch finds (it holds the same changes); its location."""
    import pyarrow as pa

    directory = staged_dir(root)
    fs.makedirs(directory)
    outer = pa.table(
        {
            "table": pa.array(list(parts), pa.string()),
            "rows": pa.array([stream_bytes(rows) for rows in parts.values()], pa.large_binary()),
        },
        schema=_outer_schema(),
    )
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, outer.schema) as writer:
        writer.write_table(outer)
    path = fs.join(directory, _file_name(batch_id, app_id))
    if fs.remote(path):
        fs.write_bytes(path, sink.getvalue().to_pybytes())  # one PUT: readers see the whole file or none
    else:
        _write_local(path, sink.getvalue())
    return path


def _write_local(path: str, data: Any) -> None:
    """A local staged file written whole under a temporary name and renamed: readers see the whole file or none.
    Through the system calls alone, not fsynced (:func:`canal.files.write_new`): it survives the process's crash,
    not necessarily the machine's, as deltalake's own commits. :func:`canal.lake.store.fs.write_bytes` fsyncs the file
    and its directory, which cost a staged batch about 10 ms on a disk against 0.4 ms (100 kB, measured) -- and
    staging exists to save small writes' fixed costs."""
    staging = f"{path}.{os.urandom(8).hex()}{_TMP_SUFFIX}"
    try:
        write_new(staging, data)
        os.replace(staging, path)
    except BaseException:
        fs.unlink(staging)
        raise


def _read_file(path: str) -> Any | None:
    """The outer table of a staged file; None when it is gone (flushed and deleted)."""
    import pyarrow as pa

    try:
        data = fs.read_bytes(path)  # read whole (a few hundred kB): the caller keeps slices of it
        return pa.ipc.open_file(pa.py_buffer(data)).read_all()
    except FileNotFoundError:
        return None
    except (OSError, pa.ArrowInvalid) as exc:
        raise MirrorError(f"the staged changes {path} cannot be read: {exc}") from exc


def _staged_files(root: str | os.PathLike[str]) -> list[tuple[int, str, str]]:
    """(batch id, app id, location) of every staged file under ``root``, in batch order."""
    directory = staged_dir(root)
    found = []
    for name in fs.listdir(directory):  # none when there is no directory
        parsed = _parse_name(name)
        if parsed is not None:
            found.append((parsed[0], parsed[1], fs.join(directory, name)))
    return sorted(found)


def staged_rows(base: str | os.PathLike[str]) -> Any | None:
    """The staged changes of the mirror table at ``base`` (``root/{directory}``), a pyarrow Table in its change
    log's columns; None when it has none. Read before the log's snapshot (module docstring)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    root, name = fs.split(os.fspath(base))
    parts = []
    for _batch, _app, path in _staged_files(root):
        outer = _read_file(path)
        if outer is None:
            continue
        for blob in outer.filter(pc.equal(outer.column("table"), name)).column("rows").to_pylist():
            parts.append(current_names(read_stream(blob)))  # (staged by an older pycanal: its names)
    if not parts:
        return None
    return pa.concat_tables(parts, promote_options="permissive")


@attrs.define(slots=True)
class StagedTable:
    """One table's staged parts, in batch order, as a mirror holds them."""

    batches: list[int] = attrs.field(factory=list)
    parts: list[Any] = attrs.field(factory=list)
    rows: int = 0
    bytes: int = 0  # the parts' Arrow buffers: what the mirror holds in memory until they are flushed

    def add(self, batch_id: int, rows: Any) -> None:
        self.batches.append(batch_id)
        self.parts.append(rows)
        self.rows += rows.num_rows
        self.bytes += rows.nbytes


@attrs.define(slots=True)
class Staged:
    """What one mirror has staged and not flushed yet: per table (base path), its parts; per staged file (batch
    id), the tables still to flush."""

    root: str
    app_id: str
    tables: dict[str, StagedTable] = attrs.field(factory=dict)
    files: dict[int, set[str]] = attrs.field(factory=dict)

    def stage(self, batch_id: int, parts: dict[str, Any]) -> None:
        """Write ``parts`` (base path -> rows) as the batch's staged file, then hold them. (A batch staged
        already is a replay: the caller appends its parts instead, :meth:`has_batch`.)"""
        write(self.root, self.app_id, batch_id, {fs.split(path)[1]: rows for path, rows in parts.items()})
        self.files[batch_id] = set(parts)
        for path, rows in parts.items():
            self.tables.setdefault(path, StagedTable()).add(batch_id, rows)

    def has_batch(self, batch_id: int) -> bool:
        return batch_id in self.files

    def last_batch(self, path: str) -> int | None:
        table = self.tables.get(path)
        return table.batches[-1] if table is not None else None

    def batch_ids(self, path: str) -> list[int]:
        table = self.tables.get(path)
        return list(table.batches) if table is not None else []

    def take(self, path: str) -> StagedTable | None:
        """The table's staged parts, which the caller appends to its log, then calls :meth:`flushed`."""
        return self.tables.get(path)

    def flushed(self, path: str) -> None:
        """The table's staged parts are in its change log: forget them, deleting the staged files left with none."""
        table = self.tables.pop(path, None)
        if table is None:
            return
        for batch_id in table.batches:
            waiting = self.files.get(batch_id)
            if waiting is None:
                continue
            waiting.discard(path)
            if not waiting:
                del self.files[batch_id]
                fs.unlink(fs.join(staged_dir(self.root), _file_name(batch_id, self.app_id)))

    @property
    def bytes(self) -> int:
        """The bytes of every part held (:attr:`StagedTable.bytes`)."""
        return sum(table.bytes for table in self.tables.values())

    @property
    def rows(self) -> int:
        return sum(table.rows for table in self.tables.values())

    def due(self, stage_rows: int, spread: int, stage_bytes: int | None = None) -> list[str]:
        """The tables to flush after a batch: those holding ``stage_rows`` rows or more, and at least one in
        ``spread`` of the tables staged -- the oldest first -- so that flushes come a few a batch, not all at once;
        and more of the oldest until what stays holds at most ``stage_bytes`` bytes (wide rows are held in memory
        by their bytes, not their count)."""
        by_age = sorted(self.tables, key=lambda p: (self.tables[p].batches[0], -self.tables[p].rows))
        full = [p for p in by_age if self.tables[p].rows >= stage_rows]
        share = -(-len(self.tables) // spread)
        rest = [p for p in by_age if self.tables[p].rows < stage_rows][: max(0, share - len(full))]
        chosen = full + rest
        if stage_bytes is not None:
            held = self.bytes - sum(self.tables[p].bytes for p in chosen)
            for path in by_age:
                if held <= stage_bytes:
                    break
                if path not in chosen:
                    chosen.append(path)
                    held -= self.tables[path].bytes
        return chosen


def load(root: str | os.PathLike[str], app_id: str, flushed_through: Callable[[str], int | None]) -> Staged:
    """The staged parts ``app_id`` left under ``root`` (a mirror starting on it), without those already in their
    logs: a part of a batch ``<= flushed_through(path)`` (the last batch id its change log recorded) was appended by
    a flush the process did not live to delete the file of. Its temporary files of writes interrupted
    (:data:`ABANDONED_AFTER_S` old) are deleted."""
    root = os.fspath(root)
    staged = Staged(root, app_id)
    directory = staged_dir(root)
    now = time.time()
    for name, modified in fs.files_modified(directory):
        # the app's own only (another app's mirror may be writing one); an object store has none (one PUT)
        parsed = _interrupted(name)
        if parsed is not None and parsed[1] == app_id and now - modified >= ABANDONED_AFTER_S:
            fs.unlink(fs.join(directory, name))
    last: dict[str, int | None] = {}
    for batch_id, app, path in _staged_files(root):
        if app != app_id:
            continue
        outer = _read_file(path)
        if outer is None:
            continue
        waiting: set[str] = set()
        for name, blob in zip(outer.column("table").to_pylist(), outer.column("rows").to_pylist(), strict=True):
            base = fs.join(root, name)
            if base not in last:
                last[base] = flushed_through(base)
            done = last[base]
            if done is not None and batch_id <= done:
                continue
            staged.tables.setdefault(base, StagedTable()).add(batch_id, current_names(read_stream(blob)))
            waiting.add(base)
        if waiting:
            staged.files[batch_id] = waiting
        else:
            fs.unlink(path)
    return staged
