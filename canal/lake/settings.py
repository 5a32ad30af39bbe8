"""A mirror's settings as one frozen value: what :class:`~canal.lake.mirror.DeltaMirror` is built from, checked once.

The value is what travels: a Spark task rebuilds the driver's mirror from it (:mod:`canal.spark.mirror_tasks`, one
mirror per value in a Python worker, so it is hashable), and a mirror pickles as it (Spark Connect). The storage
options (credentials) stay out of its repr.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

import attrs

from canal.lake.store.changelog import LOG_HISTORY_S
from canal.lake.types import MirrorError, ZeroDates

HealSetting = Literal["snapshot", "stop"]
"""What a mirror does with a batch that heals a table (canal.lake.apply.heals): reset it, or refuse the batch."""
HEALS: tuple[HealSetting, ...] = ("snapshot", "stop")

MirrorMode = Literal["merge_on_read", "copy_on_write"]
MODES: tuple[MirrorMode, ...] = ("merge_on_read", "copy_on_write")

DEFAULT_STAGE_BYTES = 8 << 20
"""The staged parts a mirror holds in memory, at most, after each batch (and each part staged at most this big)."""

DEFAULT_FILE_BYTES = 1 << 20
"""Data files of 1 MiB: a batch of changes to a range of keys rewrites about a MiB per file it touches. Delta's own
default (100 MB) keeps most tables in one file, which every batch rewrites whole: its cost grows with the table
(``benchmarks/bench_mirror.py``)."""

FOLD_DUTY = 0.5
"""The most of the time a table's background folds take: after a fold that took T seconds, the table's next fold
starts no sooner than ``T * (1 / fold_duty - 1)`` seconds after it ended. A fold rewrites the base files its log's
keys touch, so while a table grows or a stream catches up, a fold due after every batch (10% of the base, the
default ``fold_ratio``) ran back to back and held a core the decoder needed; paced, the log takes several batches
between folds, and each base rewrite serves more of them. A fold shorter than :data:`FOLD_REST_MIN_S` does not
rest the table: a small table's folds cost little, and its base stays as fresh as before."""

FOLD_REST_MIN_S = 1.0
"""Folds shorter than this many seconds are not followed by a rest (``fold_duty``)."""


def _pairs(options: Mapping[str, str] | Iterable[tuple[str, str]] | None) -> tuple[tuple[str, str], ...]:
    items = options.items() if isinstance(options, Mapping) else (options or ())
    return tuple(sorted((str(k), str(v)) for k, v in items))


def _names(tables: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if tables is None else tuple(sorted(set(tables)))


@attrs.frozen(slots=True)
class MirrorSettings:
    """The constructor arguments of a :class:`~canal.lake.mirror.DeltaMirror` (its docstring says what each does),
    checked: a bad one is a :class:`~canal.lake.types.MirrorError` before anything is written. ``root`` is the text
    the mirror registered (:func:`canal.lake.store.fs.register`); ``tables`` the names in order."""

    root: str
    storage_options: tuple[tuple[str, str], ...] = attrs.field(default=(), converter=_pairs, repr=False)
    app_id: str = "pycanal-mirror"
    tables: tuple[str, ...] | None = attrs.field(default=None, converter=_names)
    zero_dates: ZeroDates = "error"
    optimize_every: int | None = None
    vacuum_every: int | None = None
    retention_hours: int = 168
    file_bytes: int = DEFAULT_FILE_BYTES
    mode: MirrorMode = "merge_on_read"
    fold_ratio: float = 0.1
    fold_files: int = 100
    background_folds: bool = True
    fold_workers: int = 2
    fold_duty: float = FOLD_DUTY
    on_executors: bool = True
    log_history_s: float = LOG_HISTORY_S
    stage_rows: int = 512
    stage_spread: int = 16
    stage_bytes: int = DEFAULT_STAGE_BYTES
    max_fold_failures: int = 3
    heal: HealSetting = "snapshot"

    def __attrs_post_init__(self) -> None:
        if self.heal not in HEALS:
            raise MirrorError(f"heal must be one of {', '.join(HEALS)}, got {self.heal!r}")
        if self.zero_dates not in ("error", "null"):
            raise MirrorError(f"zero_dates must be 'error' or 'null', got {self.zero_dates!r}")
        if self.mode not in MODES:
            raise MirrorError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if not self.fold_ratio > 0:
            raise MirrorError(f"fold_ratio must be > 0, got {self.fold_ratio}")
        if self.fold_files < 1 or self.fold_workers < 1:
            raise MirrorError(
                f"fold_files and fold_workers must be >= 1, got {self.fold_files} and {self.fold_workers}"
            )
        if not 0 < self.fold_duty <= 1:
            raise MirrorError(f"fold_duty must be > 0 and <= 1, got {self.fold_duty}")
        if not self.log_history_s > 0:
            raise MirrorError(f"log_history_s must be > 0 (seconds), got {self.log_history_s}")
        if self.stage_rows < 0 or self.stage_spread < 1:
            raise MirrorError(
                f"stage_rows must be >= 0 and stage_spread >= 1, got {self.stage_rows} and {self.stage_spread}"
            )
        if self.stage_bytes < 1 or self.max_fold_failures < 1:
            raise MirrorError(
                f"stage_bytes and max_fold_failures must be >= 1, got {self.stage_bytes} and {self.max_fold_failures}"
            )
        for name, every in (("optimize_every", self.optimize_every), ("vacuum_every", self.vacuum_every)):
            if every is not None and every < 1:
                raise MirrorError(f"{name} must be >= 1 (batches) or None, got {every}")
        if self.retention_hours < 0:
            raise MirrorError(f"retention_hours must be >= 0, got {self.retention_hours}")
        if self.file_bytes < 1:
            raise MirrorError(f"file_bytes must be >= 1, got {self.file_bytes}")

    @property
    def only(self) -> frozenset[str] | None:
        """The ``schema.table`` names mirrored (None: every table)."""
        return None if self.tables is None else frozenset(self.tables)

    @property
    def options(self) -> dict[str, str]:
        """The storage options as a mapping (empty: none)."""
        return dict(self.storage_options)

    def arguments(self) -> dict[str, Any]:
        """The keyword arguments of ``DeltaMirror`` that build a mirror of these settings."""
        arguments = attrs.asdict(self, recurse=False)
        arguments["storage_options"] = self.options or None
        arguments["tables"] = None if self.tables is None else list(self.tables)
        return arguments
