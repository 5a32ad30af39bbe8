"""``canal snapshot``: a consistent copy of tables, printed like ``canal tail``, with a progress bar.

The destination runs in this process with snapshot mode ``initial_only``: the tables' rows arrive as SNAPSHOT lines
and, interleaved where they take effect, the changes made while they are read; applied in order (SNAPSHOT, INSERT,
UPDATE as upserts, DELETE as deletes) they give the tables as they were when the copy ended. The command ends when
the snapshot's last row is printed. With ``--meta-dir`` an interrupted copy resumes after its last printed row.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from typing import Any, TextIO

import attrs

from canal.cli.common import CliError, add_source_arguments, load_instance_config, positive_float, positive_int
from canal.cli.tail import _loop, local_config, run_instance
from canal.config import InstanceConfig, SnapshotConfig, SnapshotMode
from canal.errors import CanalError, SnapshotError
from canal.instance import Instance
from canal.snapshot.runner import SnapshotProgress, split_table_name

_BAR_WIDTH = 30
_DRAW_EVERY_S = 0.2


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "snapshot",
        help="print a consistent copy of tables, with a progress bar",
        description=(
            "Snapshot tables without locks and print their rows (SNAPSHOT lines) with the changes made while they "
            "are read, in the order that applies them, then exit. A progress bar goes to stderr when it is a "
            "terminal (--progress: always). With --meta-dir an interrupted copy resumes where it stopped."
        ),
    )
    add_source_arguments(p)
    p.add_argument(
        "--tables",
        metavar="DB.TABLE,...",
        help="the tables to copy (default: every table the properties' filter captures); the changes printed are "
        "those of these tables only",
    )
    p.add_argument("--json", action="store_true", help="one JSON object per row, as canal tail --json prints them")
    p.add_argument("--chunk-rows", type=positive_int, metavar="N", help="rows read per chunk (default 10000)")
    p.add_argument("--max-rows-per-s", type=positive_float, metavar="R", help="read at most R rows a second")
    p.add_argument("--meta-dir", metavar="DIR", help="persist progress in DIR/{destination}/meta.dat (resumable)")
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="draw the progress bar on stderr (default: when stderr is a terminal)",
    )
    p.add_argument("--utc", action="store_true", help="print times in UTC instead of local time")
    p.add_argument("--show-position", action="store_true", help="append each row's binlog file:offset to text lines")
    p.set_defaults(run=run)


def snapshot_config(args: argparse.Namespace) -> InstanceConfig:
    config = load_instance_config(args)
    settings = config.snapshot
    changes: dict[str, Any] = {"mode": SnapshotMode.INITIAL_ONLY}
    if args.tables:
        changes["tables"] = args.tables
        # the changes made during the copy are printed for these tables only: the destination's filter narrowed
        names = [name.strip() for name in args.tables.split(",") if name.strip()]
        for name in names:
            if not config.table_filters.includes(*split_table_name(name)):
                raise CliError(f"--tables {name}: the destination's filter does not capture it")
        config = attrs.evolve(config, filter_regex=",".join(re.escape(name) for name in names))
    if args.chunk_rows is not None:
        changes["chunk_rows"] = args.chunk_rows
    if args.max_rows_per_s is not None:
        changes["max_rows_per_s"] = args.max_rows_per_s
    snapshot: SnapshotConfig = attrs.evolve(settings, **changes)
    # a copy has no start position: it starts where the server is now
    master = attrs.evolve(config.master, journal_name=None, position=None, timestamp=None, gtid="")
    return attrs.evolve(local_config(config, master, args.meta_dir), snapshot=snapshot)


def run(args: argparse.Namespace) -> int:
    config = snapshot_config(args)
    err = sys.stderr
    draw = args.progress if args.progress is not None else err.isatty()
    bar = ProgressBar(err) if draw else None

    def body(instance: Instance) -> None:
        if not instance.snapshots:
            err.write(f"canal: the snapshot of destination {instance.destination} is already complete\n")
            return
        runner = instance.snapshots[-1]

        def tick() -> None:
            if bar is not None:
                bar.update(runner.progress())

        def finished() -> bool:
            error = runner.error
            if isinstance(error, CanalError):
                raise error
            if error is not None:
                raise SnapshotError(f"the snapshot failed: {type(error).__name__}: {error}") from error
            return runner.progress().done  # its last row is in the store, and the store is empty

        _loop(instance, args, sys.stdout, None, finished=finished, tick=tick)
        if bar is not None:
            bar.update(runner.progress(), final=True)

    return run_instance(config, body)


class ProgressBar:
    """One stderr line redrawn in place: ``[#####-----]  45%  123,456/270,000 rows  1/3 tables  41,000 rows/s
    ETA 3 s``. The row total is InnoDB's estimate, so the bar stops at 99% until the snapshot is done."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._drawn = 0.0

    def update(self, progress: SnapshotProgress, *, final: bool = False) -> None:
        now = time.monotonic()
        if not final and now - self._drawn < _DRAW_EVERY_S:
            return
        self._drawn = now
        self._stream.write("\r" + render(progress) + ("\n" if final else ""))
        self._stream.flush()


def render(progress: SnapshotProgress) -> str:
    """The progress bar's text."""
    expected = progress.rows_expected
    if progress.done:
        fraction = 1.0
    elif expected > 0:
        fraction = min(progress.rows_emitted / expected, 0.99)
    else:
        fraction = progress.tables_done / max(len(progress.tables), 1)
    filled = int(fraction * _BAR_WIDTH)
    total = f"/{max(expected, progress.rows_emitted):,}" if expected else ""
    parts = [
        f"[{'#' * filled}{'-' * (_BAR_WIDTH - filled)}] {fraction:4.0%}",
        f"{progress.rows_emitted:,}{total} rows",
        f"{progress.tables_done}/{len(progress.tables)} tables",
        f"{progress.rows_per_s:,.0f} rows/s",
    ]
    if progress.eta_s is not None and not progress.done:
        parts.append(f"ETA {progress.eta_s:,.0f} s")
    return "  ".join(parts)
