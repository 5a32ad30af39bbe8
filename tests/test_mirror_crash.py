"""A merge-on-read mirror whose writing process is SIGKILLed mid-append, mid-fold and between a fold's two steps (its
base commit and its trim of the change log): what a reader sees right after the kill is the source after the last
batch applied, or (table by table) after the one in flight; restarted from the last batch it reported applied (so
that one is replayed), it ends equal to the source, and after a last fold its base alone does too.

The writer is a real separate process (:mod:`tests.procs.mirror_writer`) that kills itself at the chosen point.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from canal.spark import DeltaMirror, changelog
from tests.procs.mirror_writer import TABLES, Row, source_after

ROOT = Path(__file__).resolve().parent.parent
LAST = 10


def _write(root: Path, first: int, last: int, *kill: str) -> tuple[int, list[int]]:
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


def _rows(table: Any) -> dict[int, Row]:
    return {r["id"]: (r["id"], r["amount"], r["note"]) for r in table.to_pylist()}


@pytest.mark.parametrize(
    "kill",
    [("append", "0"), ("append", "15"), ("publish",), ("fold", "0"), ("fold", "25"), ("between",)],
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
    code, applied = _write(root, max(done, 1), LAST)
    assert code == 0 and applied[-1] == LAST
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
