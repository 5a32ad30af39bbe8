"""A fault at every step boundary of the mirror, its journal writes included: after a restart and the replay of the
batch in flight, the mirror reads as the uninterrupted run did.

The batches below hold every kind of step: CREATE TABLE (also of a name dropped before), rows staged and appended,
RENAME TABLE of a pair swapping two tables through a third name and of one table whose rows of the same batch are
staged, TRUNCATE, DROP TABLE. An uninterrupted run records every *boundary* each batch crosses, in order: each write
of the step journal (a fault just before it -- the step done, the journal not saying so -- and just after it), each
rename of a table's or log's directory (a fault between a table's move and its change log's), and each flush of
staged parts (a fault after the append, before the staged file is deleted). Then, for every boundary of every batch,
a run starts from a copy of the uninterrupted run's files before that batch, applies the batch with a fault at that
boundary (an exception no ``except Exception`` catches, after which the mirror object is dropped as a dead process
drops it), starts a new mirror on the root, replays the batch (the consumer acked nothing of it) and applies the next
one: after each, every table -- the set of tables and their rows -- reads as after the same batch of the
uninterrupted run, which is also checked against a model.

By default the boundaries of the DDL steps are tried (the journal writes just before and after each, every move
and every flush; about 40) and each run stops after the replayed batch; PYCANAL_STEP_FAULTS=all tries every
boundary, DML steps' too, and goes on PYCANAL_STEP_FAULTS_AFTER=N (default 2 then) batches after the replay.
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from canal.lake.apply import evolve
from canal.lake.planning.plan import RenamePair, batch_steps
from canal.lake.store import staged
from canal.spark import DeltaMirror
from tests.mirror_rows import CREATE, batch, ddl, delete, upsert, values

pytest.importorskip("deltalake")

BATCHES = [
    [
        ddl("a", "CREATE", CREATE.format(table="a")),
        upsert("a", 1, "a1"),
        upsert("a", 2, "a2"),
        ddl("b", "CREATE", CREATE.format(table="b")),
        upsert("b", 10, "b10"),
    ],
    [upsert("a", 3, "a3"), upsert("b", 10, "b10'", "UPDATE")],
    [upsert("a", 4, "a4"), upsert("b", 11, "b11"), delete("a", 1)],
    [
        upsert("a", 5, "a5"),
        upsert("b", 12, "b12"),
        ddl("a", "RENAME", "RENAME TABLE a TO tmp, b TO a, tmp TO b"),
        upsert("a", 13, "a13"),
        upsert("b", 6, "b6"),
    ],
    [upsert("b", 7, "b7"), upsert("a", 14, "a14"), ddl("a", "TRUNCATE", "TRUNCATE TABLE a"), upsert("a", 20, "a20")],
    [
        ddl("c", "CREATE", CREATE.format(table="c")),
        upsert("c", 1, "c1"),
        ddl("b", "DROP", "DROP TABLE b"),
        upsert("a", 21, "a21"),
    ],
    [upsert("c", 2, "c2"), ddl("c", "RENAME", "RENAME TABLE c TO d"), upsert("d", 3, "d3"), upsert("a", 22, "a22")],
    [
        upsert("d", 4, "d4"),
        ddl("b", "CREATE", CREATE.format(table="b")),
        upsert("b", 30, "b30"),
        ddl("d", "DROP", "DROP TABLE d"),
        ddl("d", "CREATE", CREATE.format(table="d")),
        upsert("d", 40, "d40"),
    ],
    [upsert("a", 23, "a23"), upsert("b", 31, "b31"), upsert("d", 41, "d41")],
]
# the source after each batch: schema s, table -> {id: v}
MODEL: list[dict[str, dict[int, str]]] = [
    {"a": {1: "a1", 2: "a2"}, "b": {10: "b10"}},
    {"a": {1: "a1", 2: "a2", 3: "a3"}, "b": {10: "b10'"}},
    {"a": {2: "a2", 3: "a3", 4: "a4"}, "b": {10: "b10'", 11: "b11"}},
    {"b": {2: "a2", 3: "a3", 4: "a4", 5: "a5", 6: "b6"}, "a": {10: "b10'", 11: "b11", 12: "b12", 13: "a13"}},
    {"b": {2: "a2", 3: "a3", 4: "a4", 5: "a5", 6: "b6", 7: "b7"}, "a": {20: "a20"}},
    {"a": {20: "a20", 21: "a21"}, "c": {1: "c1"}},
    {"a": {20: "a20", 21: "a21", 22: "a22"}, "d": {1: "c1", 2: "c2", 3: "d3"}},
    {"a": {20: "a20", 21: "a21", 22: "a22"}, "b": {30: "b30"}, "d": {40: "d40"}},
    {"a": {20: "a20", 21: "a21", 22: "a22", 23: "a23"}, "b": {30: "b30", 31: "b31"}, "d": {40: "d40", 41: "d41"}},
]
OPTIONS: dict[str, Any] = {"background_folds": False, "fold_ratio": 1000.0, "stage_spread": 1000}


class _Fault(BaseException):
    """The process dies here (no ``except Exception`` of the mirror catches it)."""


class _Boundaries:
    """Counts the boundaries a batch crosses; raises :class:`_Fault` at the ``at``-th (None: never)."""

    def __init__(self) -> None:
        self.at: int | None = None
        self.seen: list[str] = []

    def cross(self, name: str) -> None:
        self.seen.append(name)
        if self.at is not None and len(self.seen) == self.at + 1:
            raise _Fault(name)


@contextlib.contextmanager
def _watched(monkeypatch: pytest.MonkeyPatch, boundaries: _Boundaries) -> Iterator[None]:
    real_journal = DeltaMirror._write_journal
    real_flushed = staged.Staged.flushed

    def write_journal(self: DeltaMirror, batch_id: int, done: int) -> None:
        boundaries.cross(f"before journal {done}")
        real_journal(self, batch_id, done)
        boundaries.cross(f"after journal {done}")

    def flushed(self: staged.Staged, path: str) -> None:
        boundaries.cross(f"flushed {Path(path).name}, its staged file not deleted")
        real_flushed(self, path)

    def replace(source: Any, target: Any) -> None:
        os.replace(source, target)
        moved = Path(source)
        boundaries.cross(
            f"moved {moved.parent.name}/{moved.name}" if moved.parent.name == "_changes" else f"moved {moved.name}"
        )

    moves = types.SimpleNamespace(**{name: getattr(os, name) for name in dir(os) if not name.startswith("__")})
    moves.replace = replace
    with monkeypatch.context() as patch:
        patch.setattr(DeltaMirror, "_write_journal", write_journal)
        patch.setattr(staged.Staged, "flushed", flushed)
        patch.setattr(evolve, "os", moves)
        yield


def _state(root: Path) -> dict[str, dict[int, str]]:
    reader = DeltaMirror(root)
    return {name.split(".", 1)[1]: values(reader.read(*name.split(".", 1))) for name in reader.table_names()}


def _copy(source: Path, target: Path) -> None:
    # the lease names the uninterrupted run's mirror, alive in this process: a copy is another root's files
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("_pycanal_lease.*"))


def _uninterrupted(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Path], list[list[str]]]:
    """Run every batch; the root's files before each batch, and each batch's boundaries."""
    root = tmp / "whole"
    snapshots, crossed = [], []
    boundaries = _Boundaries()
    writer = DeltaMirror(root, **OPTIONS)
    for number, rows in enumerate(BATCHES, 1):
        snapshot = tmp / f"before-{number}"
        if root.exists():
            _copy(root, snapshot)
        snapshots.append(snapshot)
        boundaries.seen = []
        with _watched(monkeypatch, boundaries):
            writer.apply(batch(*rows), number)
        crossed.append(list(boundaries.seen))
        assert _state(root) == {t: MODEL[number - 1][t] for t in sorted(MODEL[number - 1])}, number
    writer.close()
    return snapshots, crossed


def _ddl_journal_writes(rows: list[dict[str, Any]]) -> set[int]:
    """The journal writes (their ``done`` counts) that follow a DDL step of the batch: a RENAME pair, or a DDL row."""
    table = batch(*rows)
    is_ddl = table.column("is_ddl").to_pylist()
    return {
        number + 1
        for number, step in enumerate(batch_steps(table, None))
        if isinstance(step, RenamePair) or (len(step) == 1 and is_ddl[step[0].as_py()])
    }


def _chosen(number: int, name: str) -> bool:
    if os.environ.get("PYCANAL_STEP_FAULTS") == "all" or not name.endswith(tuple("0123456789")):
        return True  # every move and flush
    return int(name.rsplit(" ", 1)[1]) in _ddl_journal_writes(BATCHES[number - 1])


def test_a_fault_at_every_step_boundary_is_replayed_to_the_uninterrupted_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snapshots, crossed = _uninterrupted(tmp_path, monkeypatch)
    every = os.environ.get("PYCANAL_STEP_FAULTS") == "all"
    after = int(os.environ.get("PYCANAL_STEP_FAULTS_AFTER", "2" if every else "0"))
    kinds = {name.split(" ")[0] for names in crossed for name in names}
    assert kinds == {"before", "after", "moved", "flushed"}, kinds  # every kind of boundary is crossed
    chosen = [(number, at, name) for number, names in enumerate(crossed, 1) for at, name in enumerate(names)]
    chosen = [(number, at, name) for number, at, name in chosen if _chosen(number, name)]
    # each kind of DDL step is tried: CREATE (batches 1, 6, 8), RENAME pairs (4, 7), TRUNCATE (5), DROP (6, 8)
    assert {number for number, _at, name in chosen if "journal" in name} == {1, 4, 5, 6, 7, 8}
    tried = 0
    for number, at, name in chosen:
        root = tmp_path / f"fault-{number}-{at}"
        if snapshots[number - 1].exists():
            _copy(snapshots[number - 1], root)
        boundaries = _Boundaries()
        boundaries.at = at
        writer = DeltaMirror(root, **OPTIONS)
        with _watched(monkeypatch, boundaries), pytest.raises(_Fault):
            writer.apply(batch(*BATCHES[number - 1]), number)
        del writer  # the process died: its memory (staged parts, open tables, its lease) is gone
        gc.collect()
        writer = DeltaMirror(root, **OPTIONS)
        for replayed in range(number, min(number + after, len(BATCHES)) + 1):
            writer.apply(batch(*BATCHES[replayed - 1]), replayed)
            want = MODEL[replayed - 1]
            assert _state(root) == {t: want[t] for t in sorted(want)}, (number, name, replayed)
        writer.close()
        del writer
        shutil.rmtree(root)
        tried += 1
    assert tried == len(chosen)
