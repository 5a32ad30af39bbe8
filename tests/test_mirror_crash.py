"""A merge-on-read mirror whose writing process is SIGKILLed at a DDL step's boundary (a RENAME pair's table moved,
its change log not yet), mid-append, mid-fold, between a fold's two steps (its
base commit and its trim of the change log), mid-way through writing a batch's staged changes, and after a flush of
staged changes appended them before their files were deleted: what a reader sees right after the kill is the source
after the last batch applied, or (table by table) after the one in flight; restarted from the last batch it reported
applied (so that one is replayed), it ends equal to the source, and after a last fold its base alone does too.

The writer is a real separate process (:mod:`tests.procs.mirror_writer`) that kills itself at the chosen point.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from canal.lake.store import changelog, latest_changes
from canal.spark import DeltaMirror
from tests.procs.mirror_writer import TABLES, Row, source_after

ROOT = Path(__file__).resolve().parent.parent
LAST = 10


def _write(root: Path, first: int, last: int, *kill: str) -> tuple[int, list[int]]:
    """The writer process, killed at ``kill``: its exit code and the batches it reported applied."""
    proc = subprocess.run(
        [sys.executable, "-m", "tests.procs.mirror_writer", str(root), str(first), str(last), *kill],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    applied = [int(line.split()[1]) for line in proc.stdout.splitlines() if line.startswith("A ")]
    assert proc.returncode in (0, -9), proc.stderr[-3000:]
    return proc.returncode, applied


def _resume(main: Callable[[list[str]], None], *args: object) -> list[int]:
    """The writer restarted after its kill, run here: what it reads is all on disk, nothing of the dead process is
    left but its files (a process of its own would add only its start, seconds of imports under load). The batches it
    reported applied."""
    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        main([str(a) for a in args])
    return [int(line.split()[1]) for line in said.getvalue().splitlines() if line.startswith("A ")]


def _rows(table: Any) -> dict[int, Row]:
    return {r["id"]: (r["id"], r["amount"], r["note"]) for r in table.to_pylist()}


@pytest.mark.parametrize(
    "kill",
    [
        ("append", "0"),
        ("append", "15"),
        ("publish",),
        ("fold", "0"),
        ("fold", "25"),
        ("between",),
        ("stage", "0"),
        ("stage", "1"),
        ("flushed",),
    ],
    ids="-".join,
)
def test_a_writer_killed_anywhere_leaves_an_exact_mirror_and_resumes(tmp_path: Path, kill: tuple[str, ...]) -> None:
    root = tmp_path / "mirror"
    code, applied = _write(root, 1, LAST, *kill)
    assert code == -9, f"the writer was not killed at {kill} (applied {applied})"
    done = max(applied, default=0)
    assert done < LAST
    # what a reader sees now: each table as the source was after the last batch applied or the one in flight
    reader = DeltaMirror(root)
    for table in TABLES:
        if not reader.table_path("shop", table.table).exists():
            assert done == 0
            continue
        seen = _rows(reader.read("shop", table.table))
        assert seen in (source_after(done).get(table.table), source_after(done + 1).get(table.table)), table.table
    from tests.procs import mirror_writer

    applied = _resume(mirror_writer.main, root, max(done, 1), LAST)
    assert applied[-1] == LAST
    want = source_after(LAST)
    mirror = DeltaMirror(root)
    for table in TABLES:
        assert _rows(mirror.read("shop", table.table)) == want[table.table], table.table
    mirror.fold()
    from deltalake import DeltaTable

    for table in TABLES:
        path = mirror.table_path("shop", table.table)
        assert _rows(DeltaTable(str(path)).to_pyarrow_table()) == want[table.table]  # the base alone, once folded
        assert changelog.log_size(path).log_rows == 0


@pytest.mark.parametrize("reader", ["pyarrow", "files"])
def test_a_fold_between_a_readers_two_snapshots_loses_no_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reader: str
) -> None:
    """A fold that commits its base and trims the log while a reader is between its snapshots of the two: the
    reader sees every change (found by the model test: a row deleted in the log came back from an older base whose
    newer changes the trim had removed)."""
    import deltalake
    import pyarrow as pa
    import pyarrow.parquet as pq

    from canal.spark import entries_to_batch
    from tests.procs.mirror_writer import batch

    root = tmp_path / "mirror"
    mirror = DeltaMirror(root, background_folds=False, fold_ratio=1000.0, fold_files=1000)
    state: dict[str, dict[int, Row]] = {}
    for number in (1, 2):
        mirror.apply(entries_to_batch(batch(number, state), "d", number), number)
    mirror.fold()  # the base holds batches 1-2
    for number in (3, 4):
        mirror.apply(entries_to_batch(batch(number, state), "d", number), number)  # the log holds 3-4
    table = TABLES[0].table
    path = mirror.table_path("shop", table)
    assert changelog.log_size(path).log_rows > 0
    folds: list[object] = []
    real_table = deltalake.DeltaTable

    class Racing(real_table):  # type: ignore[misc,valid-type]
        """Once, right after the reader's first snapshot: a fold commits its base and trims the log."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            if not folds:
                folds.append("folding")  # the fold's own snapshots pass
                folds.append(changelog.fold(path))

    monkeypatch.setattr(deltalake, "DeltaTable", Racing)
    if reader == "pyarrow":
        rows = changelog.current_state(path)
    else:  # what current_dataframe builds on: the base's and the log's files, read as the Spark helper reads them

        def files(uris: list[str]) -> Any:
            def plain(t: Any) -> Any:  # deltalake writes some strings as string_view
                return t.cast(
                    pa.schema([f.with_type(pa.string()) if f.type == pa.string_view() else f for f in t.schema])
                )

            return pa.concat_tables([plain(pq.read_table(u.removeprefix("file://"))) for u in uris])

        def read_files() -> Any:
            current = changelog.current_files(path)
            after, keys = current.folded, current.keys
            assert keys is not None
            base = files(current.base_files)
            parts = [files(current.log_files)] if current.log_files else []
            if current.staged is not None:
                parts.append(current.staged)
            if not parts:  # folded and trimmed whole
                return base
            log = pa.concat_tables(parts, promote_options="permissive")
            return changelog._overlay(base, latest_changes.latest(log.filter(changelog._after(log, after)), keys), keys)

        # the fold's trim deleted the log files just listed: that read fails (a Spark job reading them would), and
        # is done again -- it never answers with a change missing
        with pytest.raises(FileNotFoundError):
            read_files()
        rows = read_files()
    assert folds  # the fold ran
    assert _rows(rows) == state[table]


@pytest.mark.parametrize(
    ("number", "boundary"),
    [(4, "moved s.tmp")],  # a RENAME pair: the table moved, its change log not yet
    ids=["rename-pair"],
)
def test_a_writer_killed_at_a_ddl_step_boundary_resumes_to_the_uninterrupted_result(
    tmp_path: Path, number: int, boundary: str
) -> None:
    """The real-process companion of tests/test_mirror_step_faults.py (which tries every DDL step's boundary in one
    process, a few seconds each here): SIGKILLed at a DDL step's boundary, the writer restarted from the batch in
    flight ends where the model does."""
    from tests.mirror_rows import values
    from tests.test_mirror_step_faults import BATCHES, MODEL

    root = tmp_path / "mirror"

    def run(*args: object) -> tuple[int, list[int]]:
        proc = subprocess.run(
            [sys.executable, "-m", "tests.procs.step_writer", str(root), *map(str, args)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert proc.returncode in (0, -9), proc.stderr[-3000:]
        return proc.returncode, [int(line.split()[1]) for line in proc.stdout.splitlines() if line.startswith("A ")]

    code, applied = run(1, len(BATCHES), number, boundary)
    assert code == -9 and applied == list(range(1, number)), (code, applied)
    from tests.procs import step_writer

    applied = _resume(step_writer.main, root, number, len(BATCHES))
    assert applied[-1] == len(BATCHES)
    reader = DeltaMirror(root)
    want = MODEL[-1]
    assert reader.table_names() == [f"s.{t}" for t in sorted(want)]
    for table, rows in want.items():
        assert values(reader.read("s", table)) == rows, table
