"""Scheduled upkeep, so a long-running mirror needs none by hand: compaction and vacuum every N applied batches.

Every ``optimize_every`` applied batches the tables written since the last compaction are compacted (each MERGE or
fold adds files; many small files slow reads and MERGEs); every ``vacuum_every``, :func:`vacuum` with
``retention_hours``. Neither touches the batch ids in the Delta log: replays are still skipped.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from canal.lake.settings import MirrorSettings
from canal.lake.store import fs
from canal.lake.store import names as naming
from canal.lake.store.handles import Handles
from canal.lake.types import MirrorError
from canal.lake.upkeep.folds import Folds


def maintain(
    settings: MirrorSettings,
    applied_batches: int,
    compact: set[str],
    handles: Handles,
    folds: Folds,
    vacuum_all: Callable[[int], object],
) -> float:
    """The upkeep due after applied batch number ``applied_batches``: ``compact`` (the tables written since the last
    compaction, by directory name) compacted and emptied, or ``vacuum_all(retention_hours)``; the seconds it took."""
    began = time.perf_counter()
    n = applied_batches
    if settings.optimize_every is not None and n % settings.optimize_every == 0:
        for name in sorted(compact):
            path = fs.join(settings.root, name)
            folds.settle(path)  # a fold writes the base too: one writer at a time
            if fs.is_delta_table(path):
                fs.compact_delta(handles.table(path))
        compact.clear()
    if settings.vacuum_every is not None and n % settings.vacuum_every == 0:
        vacuum_all(settings.retention_hours)
    return time.perf_counter() - began


def vacuum(
    root: str,
    tables: Callable[[], Iterable[tuple[str, tuple[str, str]]]],
    retention_hours: int,
    wait_for_folds: Callable[[], None],
) -> dict[str, int]:
    """Delete the data files of the ``tables()`` (directory name, (schema, table)) under ``root`` that no table
    version of the last ``retention_hours`` still references; the number deleted per table (``schema.table``).
    Below Delta's 168-hour default, readers of older versions lose them."""
    if retention_hours < 0:
        raise MirrorError(f"retention_hours must be >= 0, got {retention_hours}")
    wait_for_folds()  # a fold's files are not referenced until it commits: vacuum must not see them
    deleted: dict[str, int] = {}
    for name, pair in tables():
        table = fs.delta_table(fs.join(root, name))
        files = table.vacuum(
            retention_hours=retention_hours, dry_run=False, enforce_retention_duration=retention_hours >= 168
        )
        deleted[naming.display(*pair)] = len(files)
    return deleted
