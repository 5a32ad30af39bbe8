"""Appends written as Delta commits directly (canal.lake.store.delta_append): read back by deltalake like its own,
placed after any commit another writer made first, and refused -- with nothing left behind -- where a blind append would
be wrong (a schema change, a newer checkpoint, a table that is not the one the version was read from). The mirrors
here stage nothing (``stage_rows=0``): every batch's part is such an append (staging: tests/test_mirror_staged.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from canal import files
from canal.lake.store import delta_append

deltalake = pytest.importorskip("deltalake")


def _rows(first: int, n: int) -> pa.Table:
    return pa.table({"id": pa.array(range(first, first + n), pa.int64()), "note": [f"n{i}" for i in range(n)]})


def _table(path: Path) -> object:
    deltalake.write_deltalake(str(path), _rows(0, 3), mode="append")
    return deltalake.DeltaTable(str(path))


def _data_files(path: Path) -> set[str]:
    return {name for name in os.listdir(path) if name.endswith(".parquet")}


def test_an_append_reads_back_with_its_batch_id(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _table(path)
    assert delta_append.append(path, _rows(3, 2), version=0, app_id="app", batch_id=7) == 1
    assert delta_append.append(path, _rows(5, 1), version=1) == 2
    table = deltalake.DeltaTable(str(path))
    assert table.version() == 2
    assert table.transaction_version("app") == 7
    assert sorted(table.to_pyarrow_table().column("id").to_pylist()) == list(range(6))
    assert len(table.file_uris()) == 3


def test_an_append_goes_after_a_commit_another_writer_made_first(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _table(path)
    deltalake.write_deltalake(table, _rows(10, 1), mode="append")  # version 1, unknown to the next append
    table.delete("id = 0")  # version 2: removes a file, as a fold's trim does
    assert delta_append.append(path, _rows(20, 1), version=0) == 3
    ids = sorted(deltalake.DeltaTable(str(path)).to_pyarrow_table().column("id").to_pylist())
    assert ids == [1, 2, 10, 20]


def test_a_schema_change_since_the_version_read_refuses_the_append(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _table(path)
    wider = pa.table({"id": pa.array([9], pa.int64()), "note": ["x"], "extra": [1]})
    deltalake.write_deltalake(table, wider, mode="overwrite", schema_mode="overwrite")  # version 1: metaData
    files = _data_files(path)
    assert delta_append.append(path, _rows(3, 1), version=0) is None
    after = deltalake.DeltaTable(str(path))
    assert after.version() == 1
    assert after.to_pyarrow_table().column("id").to_pylist() == [9]
    assert _data_files(path) == files  # its data file removed again
    assert not [n for n in os.listdir(path / "_delta_log") if n.endswith(".tmp")]


def test_a_checkpoint_newer_than_the_version_read_refuses_the_append_once_commits_since_are_gone(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t"
    table = _table(path)
    deltalake.write_deltalake(table, _rows(3, 1), mode="append")
    table.update_incremental()
    table.create_checkpoint()  # at version 1: commits up to it may be cleaned up
    (path / "_delta_log" / f"{1:020d}.json").unlink()  # as Delta's log cleanup does
    assert delta_append.last_checkpoint(path) == 1
    assert delta_append.append(path, _rows(5, 1), version=0) is None
    assert not (path / "_delta_log" / f"{1:020d}.json").exists()  # nothing published behind the checkpoint
    assert delta_append.append(path, _rows(5, 1), version=1) == 2
    assert sorted(deltalake.DeltaTable(str(path)).to_pyarrow_table().column("id").to_pylist()) == [0, 1, 2, 3, 5]


def test_a_checkpoint_newer_than_the_version_read_is_passed_while_the_commits_since_are_there(tmp_path: Path) -> None:
    """A compaction checkpointed the log after the append's version was read: the commits since are still there, so
    the append goes after them (each read: a schema change among them would still refuse it)."""
    path = tmp_path / "t"
    table = _table(path)
    deltalake.write_deltalake(table, _rows(3, 1), mode="append")
    table.update_incremental()
    table.optimize.compact()  # version 2: add / remove
    table.update_incremental()
    table.create_checkpoint()
    assert delta_append.last_checkpoint(path) == 2
    assert delta_append.append(path, _rows(5, 1), version=0) == 3
    reread = deltalake.DeltaTable(str(path))
    assert reread.version() == 3
    assert sorted(reread.to_pyarrow_table().column("id").to_pylist()) == [0, 1, 2, 3, 5]
    wider = pa.table({"id": pa.array([9], pa.int64()), "note": ["x"], "extra": [1]})
    deltalake.write_deltalake(reread, wider, mode="overwrite", schema_mode="overwrite")  # version 4: metaData
    reread.update_incremental()
    reread.create_checkpoint()
    assert delta_append.append(path, _rows(7, 1), version=3) is None


def test_a_version_the_table_does_not_have_refuses_the_append(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _table(path)  # version 0 only: a version read from an earlier table of that name is not its
    assert delta_append.append(path, _rows(3, 1), version=4) is None
    assert deltalake.DeltaTable(str(path)).version() == 0
    assert not (path / "_delta_log" / f"{5:020d}.json").exists()


def test_an_unreadable_last_checkpoint_refuses_the_append(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _table(path)
    (path / "_delta_log" / "_last_checkpoint").write_text("{not json")
    assert delta_append.last_checkpoint(path) == delta_append.UNKNOWN_CHECKPOINT
    assert delta_append.append(path, _rows(3, 1), version=0) is None


def test_a_mirror_appends_directly_across_compactions_checkpoints_and_folds(tmp_path: Path) -> None:
    from canal.lake.store import changelog
    from canal.spark import DeltaMirror
    from tests.procs.mirror_writer import TABLES

    mirror = DeltaMirror(tmp_path, stage_rows=0, fold_ratio=1000.0, fold_files=1000, background_folds=False)
    source = _Source(mirror)
    source.apply(30)
    mirror.fold("shop", "a")  # a fold's trim between direct appends
    source.apply(15)
    last = source.last
    source.assert_mirrored()
    for table in TABLES:
        log = Path(changelog.log_path(mirror.table_path("shop", table.table)))
        commits = sorted((log / "_delta_log").glob("*.json"))
        direct = [c for c in commits if '"engineInfo": "pycanal"' in c.read_text()]
        assert direct, "no append was written directly"
        assert delta_append.last_checkpoint(log) >= 10  # written by the compactions, the commits behind it dropped
        assert deltalake.DeltaTable(str(log)).transaction_version(mirror.app_id) == last
    assert mirror.committed_batch_ids("shop", "b")[-1] == last


@pytest.mark.skipif(files._RENAMEAT2 is None, reason="no renameat2 here")
def test_a_direct_append_deletes_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its commit file is renamed into place, not linked: no temporary name is deleted (on ext4 without a journal each
    deleted name slows the next file creations, and a batch over 50 tables creates 100 files)."""
    path = tmp_path / "t"
    _table(path)
    unlinked: list[str] = []
    real_unlink = os.unlink

    def unlink(name: Any, *args: Any, **kwargs: Any) -> None:
        unlinked.append(str(name))
        real_unlink(name, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", unlink)
    assert delta_append.append(path, _rows(3, 2), version=0, app_id="app", batch_id=1) == 1
    assert unlinked == []
    assert sorted(os.listdir(path / "_delta_log")) == [f"{v:020d}.json" for v in (0, 1)]


def test_a_direct_append_refused_at_its_commit_goes_through_deltalake(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step's tables are planned and encoded first, then committed: a table whose direct commit is refused then (its
    log changed meanwhile) is appended through deltalake in the same step, and every table stays exact."""
    from canal.spark import DeltaMirror
    from tests.procs.mirror_writer import TABLES

    real = delta_append.append
    calls: list[str] = []

    def every_other(table: Any, rows: Any, **kwargs: Any) -> int | None:
        calls.append(str(table))
        return None if len(calls) % 2 else real(table, rows, **kwargs)

    monkeypatch.setattr(delta_append, "append", every_other)
    source = _Source(DeltaMirror(tmp_path, stage_rows=0, background_folds=False))
    source.apply(8)
    assert len(calls) >= 8, "the direct appends were not tried"
    source.assert_mirrored()
    for table in TABLES:
        assert source.mirror.committed_batch_ids("shop", table.table)[-1] == 8


class _Source:
    """The writer procs' deterministic batches (``tests.procs.mirror_writer``) applied to a mirror, and the source
    they leave."""

    def __init__(self, mirror: Any) -> None:
        self.mirror = mirror
        self.state: dict[str, dict[int, tuple[object, ...]]] = {}
        self.last = 0

    def apply(self, count: int = 1) -> None:
        from canal.lake.forms.changes import entries_to_batch
        from tests.procs.mirror_writer import batch

        for _ in range(count):
            self.last += 1
            entries = entries_to_batch(batch(self.last, self.state), "d", self.last)  # type: ignore[arg-type]
            self.mirror.apply(entries, self.last)

    def assert_mirrored(self) -> None:
        from tests.procs.mirror_writer import TABLES, source_after

        want = source_after(self.last)
        for table in TABLES:
            rows = self.mirror.read("shop", table.table).to_pylist()
            assert {r["id"]: (r["id"], r["amount"], r["note"]) for r in rows} == want[table.table], table.table

    def land_while_held(self, held: Any, due: int) -> None:
        """Apply batches until a background rewrite is held (``held`` set; due after batch ``due``), then three more,
        which land while it waits."""
        while not held.is_set():
            assert self.last < 5, "no background rewrite started"
            self.apply()
            held.wait(10 if self.last >= due else 0.5)
        self.apply(3)


def _holding(real: Any, held: Any, landed: Any, waited: list[bool]) -> Any:
    """``real`` that, once called, sets ``held`` and waits for ``landed`` before it goes on (``waited``: whether
    ``landed`` came within 30 s -- a batch blocked by the caller's lock would never set it)."""

    def hold(*args: object, **kwargs: object) -> object:
        held.set()
        waited.append(landed.wait(30))
        return real(*args, **kwargs)

    return hold


def test_batches_land_while_a_background_compaction_rewrites_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A log's compaction rewrites its files without the lock the appends hold (it holds it only to checkpoint): the
    batches that come while it runs land at once, it commits after them, and every table reads exactly. Held for
    the whole rewrite, a batch over 50 tables whose logs were compacted after the same batch took 1.3-1.9 s instead
    of 28 ms."""
    import threading

    from deltalake.table import TableOptimizer

    from canal.lake.store import changelog
    from canal.spark import DeltaMirror
    from tests.procs.mirror_writer import TABLES

    rewriting, landed = threading.Event(), threading.Event()
    waited: list[bool] = []
    monkeypatch.setattr(changelog, "COMPACT_FILES", 3)  # compacted once they hold 3 files, never folded
    monkeypatch.setattr(TableOptimizer, "compact", _holding(TableOptimizer.compact, rewriting, landed, waited))
    source = _Source(DeltaMirror(tmp_path, stage_rows=0, fold_ratio=1000.0, fold_files=1000))
    # the first batch makes the tables (their rows in the base), the next three append a log file each: the fourth
    # batch's logs hold 3 files (due after the third, it waited its 10 s for nothing on every run)
    source.land_while_held(rewriting, due=4)
    landed.set()
    source.mirror.wait_for_folds()
    assert waited and all(waited), "a batch waited for the compaction"
    assert not source.mirror.fold_errors
    source.assert_mirrored()
    for table in TABLES:
        log = changelog.log_path(source.mirror.table_path("shop", table.table))
        operations = [h["operation"] for h in deltalake.DeltaTable(str(log)).history()]
        assert operations[0] == "OPTIMIZE", operations  # the compaction committed after the batches that landed
    source.mirror.close()


def test_a_table_on_a_file_system_without_hard_links_is_appended_through_deltalake(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Neither a rename that never replaces nor link(2) (some FUSE and object-store mounts): the append gives up
    leaving nothing behind, the table's later appends write nothing before giving up, and a mirror there appends
    through deltalake, exactly."""
    import errno

    from canal import files
    from canal.spark import DeltaMirror
    from tests.procs.mirror_writer import TABLES

    links: list[str] = []

    def refused(source: object, target: object, **kwargs: object) -> None:
        links.append(str(target))
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(delta_append, "_WITHOUT_PUT_IF_ABSENT", set())
    monkeypatch.setattr(files, "_rename_noreplace", lambda source, target: None)
    monkeypatch.setattr(os, "link", refused)
    path = tmp_path / "t"
    _table(path)
    before, log_before = _data_files(path), set(os.listdir(path / "_delta_log"))
    assert delta_append.append(path, _rows(3, 2), version=0, app_id="app", batch_id=1) is None
    assert delta_append.append(path, _rows(5, 2), version=0, app_id="app", batch_id=1) is None
    assert len(links) == 1  # the second wrote nothing
    assert _data_files(path) == before and set(os.listdir(path / "_delta_log")) == log_before
    assert deltalake.DeltaTable(str(path)).version() == 0

    source = _Source(DeltaMirror(tmp_path / "mirror", stage_rows=0, background_folds=False))
    source.apply(5)
    source.assert_mirrored()
    for table in TABLES:
        assert source.mirror.committed_batch_ids("shop", table.table)[-1] == 5


def test_folds_complete_while_batches_keep_landing(tmp_path: Path) -> None:
    """Background folds of tables that take a batch every few milliseconds: every fold commits (none fails on a
    conflict with the appends that land while it trims the log) and the logs stay small. Folds back to back
    (``fold_duty=1``): the most of them, racing the appends."""
    from canal.lake.store import changelog
    from canal.spark import DeltaMirror
    from tests.procs.mirror_writer import TABLES

    source = _Source(DeltaMirror(tmp_path, stage_rows=0, fold_ratio=0.05, fold_duty=1.0))
    source.apply(60)
    source.mirror.wait_for_folds()
    assert not source.mirror.fold_errors
    assert len(source.mirror.folds) >= 10
    source.assert_mirrored()
    for table in TABLES:
        assert changelog.log_size(source.mirror.table_path("shop", table.table)).log_files < 20
    source.mirror.close()


def test_a_background_fold_or_compaction_leaves_the_log_size_read_for_the_next_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The thread that folded or compacted a log reads its new size, so the batches after do not (through deltalake:
    2-10 ms a table while folds compete for the cores); the size it recorded is the log's."""
    import threading

    from canal.lake.store import changelog
    from canal.spark import DeltaMirror
    from tests.procs.mirror_writer import TABLES

    source = _Source(DeltaMirror(tmp_path, stage_rows=0, fold_ratio=0.05))
    source.apply(12)
    source.mirror.wait_for_folds()
    assert source.mirror.folds, "no fold ran"
    real = changelog.log_size
    readers: list[str] = []

    def log_size(*args: Any, **kwargs: Any) -> Any:
        readers.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(changelog, "log_size", log_size)
    source.apply()
    source.mirror.wait_for_folds()
    assert threading.current_thread().name not in readers
    monkeypatch.undo()
    kept = source.mirror._folding.log_sizes  # read by a fold or compaction, counted on by the appends since
    paths = [str(source.mirror.table_path("shop", table.table)) for table in TABLES]
    assert any(path in kept for path in paths)
    for path in paths:
        if path in kept:
            assert kept[path] == changelog.log_size(path)
    source.assert_mirrored()
    source.mirror.close()


def _log_changes(log: Path) -> list[tuple[int, int]]:
    from canal.lake.store import changelog

    rows = deltalake.DeltaTable(str(log)).to_pyarrow_table(columns=[changelog.BATCH, changelog.SEQ])
    return sorted(zip(rows.column(0).to_pylist(), rows.column(1).to_pylist(), strict=True))


def test_a_trim_by_files_removes_whole_files_and_deletes_rows_where_a_file_straddles(tmp_path: Path) -> None:
    """``trim(by_files=True)``: files whose changes all come at or before the trimmed change go by a commit of
    ``remove`` actions; when a file holds changes on both sides, the rows are deleted instead. Either way the log
    keeps exactly the later changes."""
    from canal.lake.store import changelog
    from canal.spark import DeltaMirror

    source = _Source(DeltaMirror(tmp_path, stage_rows=0, fold_ratio=1000.0, fold_files=1000, background_folds=False))
    source.apply(4)
    log = Path(changelog.log_path(source.mirror.table_path("shop", "a")))
    changes = _log_changes(log)
    files = len(deltalake.DeltaTable(str(log)).file_uris())
    through = max(c for c in changes if c[0] == 2)  # the end of batch 2: files on one side each
    gone = len({c[0] for c in changes if c <= through})  # a file per batch (batch 1 created the base)
    assert gone >= 1
    assert changelog.trim(log, through, by_files=True) == gone
    assert _log_changes(log) == [c for c in changes if c > through]
    history = deltalake.DeltaTable(str(log)).history(1)[0]
    assert (history["operation"], history.get("engineInfo")) == ("DELETE", "pycanal")  # a commit of removes
    assert len(deltalake.DeltaTable(str(log)).file_uris()) == files - gone
    left = _log_changes(log)
    middle = left[len([c for c in left if c[0] == 3]) // 2]  # inside batch 3's file
    assert middle[0] == 3 and sum(1 for c in left if c[0] == 3) >= 3  # rows of batch 3 on both sides
    changelog.trim(log, middle, by_files=True)
    assert _log_changes(log) == [c for c in left if c > middle]
    assert deltalake.DeltaTable(str(log)).history(1)[0].get("engineInfo") != "pycanal"  # Delta's DELETE


def test_batches_land_while_a_background_fold_trims_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fold of a mirror that writes its logs alone trims by removing whole files, without the lock the appends
    hold: the batches that come while it commits land at once, and every table reads exactly."""
    import threading

    from canal.spark import DeltaMirror

    trimming, landed = threading.Event(), threading.Event()
    waited: list[bool] = []
    monkeypatch.setattr(delta_append, "remove_files", _holding(delta_append.remove_files, trimming, landed, waited))
    source = _Source(DeltaMirror(tmp_path, stage_rows=0, fold_ratio=0.001))  # a fold after every batch
    source.land_while_held(trimming, due=2)
    landed.set()
    source.mirror.wait_for_folds()
    assert waited and all(waited), "a batch waited for the trim"
    assert not source.mirror.fold_errors
    source.assert_mirrored()
    source.mirror.close()
