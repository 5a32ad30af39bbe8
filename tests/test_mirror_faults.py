"""The Delta mirror across faults (issue 43, items 18-23): a staged part and a RENAME in one batch, a CREATE TABLE
step replayed, two writers of one root, time travel on a folded base, damaged files, a failing fold, and memory held
by staged parts and by the mirror's records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from canal.spark import DeltaMirror
from tests.mirror_rows import CREATE, batch, ddl, upsert, values

deltalake = pytest.importorskip("deltalake")


def _journal(root: Path, mirror: DeltaMirror) -> Path:
    return root / f"_pycanal_steps.{mirror.app_id}.json"


def _with_base_and_log(root: Path, **options: Any) -> DeltaMirror:
    """A mirror whose table s.t holds a base (rows 1, 2) and a change log (row 2 changed)."""
    mirror = DeltaMirror(root, background_folds=False, fold_ratio=1000.0, **options)
    mirror.apply(batch(ddl("t", "CREATE", CREATE.format(table="t")), upsert("t", 1, "a"), upsert("t", 2, "b")), 1)
    mirror.fold()
    mirror.apply(batch(upsert("t", 2, "b2", "UPDATE")), 2)
    return mirror


def test_a_staged_insert_and_a_rename_in_one_batch_lose_nothing(tmp_path: Path) -> None:
    mirror = _with_base_and_log(tmp_path)
    result = mirror.apply(batch(upsert("t", 3, "c"), ddl("t", "RENAME", "RENAME TABLE t TO t_old")), 3)
    assert result.tables == {"s.t": "applied"}
    assert mirror.table_names() == ["s.t_old"]
    assert values(mirror.read("s", "t_old")) == {1: "a", 2: "b2", 3: "c"}
    mirror.close()
    assert values(DeltaMirror(tmp_path).read("s", "t_old")) == {1: "a", 2: "b2", 3: "c"}


def test_a_rename_pair_flushes_what_both_tables_staged(tmp_path: Path) -> None:
    mirror = _with_base_and_log(tmp_path)
    mirror.apply(batch(ddl("u", "CREATE", CREATE.format(table="u")), upsert("u", 7, "x")), 3)
    mirror.apply(batch(upsert("u", 8, "y")), 4)
    swap = "RENAME TABLE t TO tmp, u TO t, tmp TO u"
    mirror.apply(batch(upsert("t", 4, "d"), upsert("u", 9, "z"), ddl("t", "RENAME", swap)), 5)
    assert values(mirror.read("s", "u")) == {1: "a", 2: "b2", 4: "d"}
    assert values(mirror.read("s", "t")) == {7: "x", 8: "y", 9: "z"}
    assert mirror.table_names() == ["s.t", "s.u"]


def test_a_create_table_step_replayed_after_its_commit_is_done_once(tmp_path: Path) -> None:
    mirror = DeltaMirror(tmp_path, background_folds=False)
    mirror.apply(batch(upsert("t", 1, "a")), 1)
    journal = _journal(tmp_path, mirror)
    before = journal.read_bytes()
    second = batch(ddl("n", "CREATE", CREATE.format(table="n")), upsert("n", 5, "e"))
    mirror.apply(second, 2)
    # the step's commit done, its journal write not: as if the process died in between
    journal.write_bytes(before)
    del mirror
    again = DeltaMirror(tmp_path, background_folds=False)
    again.apply(second, 2)
    assert values(again.read("s", "n")) == {5: "e"}
    again.apply(batch(upsert("n", 6, "f")), 3)
    assert values(again.read("s", "n")) == {5: "e", 6: "f"}


def test_a_create_table_of_a_table_the_mirror_holds_is_still_refused(tmp_path: Path) -> None:
    from canal.spark.types import MirrorError

    mirror = DeltaMirror(tmp_path, background_folds=False)
    mirror.apply(batch(ddl("n", "CREATE", CREATE.format(table="n")), upsert("n", 5, "e")), 1)
    with pytest.raises(MirrorError, match="already exists"):
        mirror.apply(batch(ddl("n", "CREATE", CREATE.format(table="n"))), 2)
    assert values(mirror.read("s", "n")) == {5: "e"}


def _fold_three_times(root: Path, **options: Any) -> tuple[DeltaMirror, Path, list[int]]:
    """A table folded three times (each fold rewrites the base's one file); the base's version after each fold."""
    mirror = DeltaMirror(root, background_folds=False, fold_ratio=1000.0, **options)
    mirror.apply(batch(upsert("t", 1, "a"), upsert("t", 2, "b")), 1)
    path = mirror.table_path("s", "t")
    versions = []
    for number, value in ((2, "x"), (3, "y"), (4, "z")):
        mirror.apply(batch(upsert("t", 1, value, "UPDATE")), number)
        mirror.fold()
        versions.append(deltalake.DeltaTable(str(path)).version())
    return mirror, path, versions


def test_time_travel_on_a_base_works_after_many_folds_within_the_retention(tmp_path: Path) -> None:
    _mirror, path, versions = _fold_three_times(tmp_path)
    for version, value in zip(versions, ("x", "y", "z"), strict=True):
        table = deltalake.DeltaTable(str(path))
        table.load_as_version(version)
        assert values(table.to_pyarrow_table()) == {1: value, 2: "b"}
    first = deltalake.DeltaTable(str(path), version=0)  # before any fold
    assert values(first.to_pyarrow_table()) == {1: "a", 2: "b"}


def test_a_fold_deletes_replaced_base_files_only_past_the_retention(tmp_path: Path) -> None:
    mirror, path, _versions = _fold_three_times(tmp_path, retention_hours=0)
    table = deltalake.DeltaTable(str(path))
    assert len(list(path.glob("*.parquet"))) == len(table.file_uris())  # nothing kept: retention 0
    assert values(mirror.read("s", "t")) == {1: "z", 2: "b"}
