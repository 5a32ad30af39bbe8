"""Staged changes (canal.lake.store.staged): a batch's small parts of many tables written as one file and appended to
their change logs later. Every read of the current state stays exact -- while parts are staged, while a flush races a
reader, after a flush the process did not live to finish, after a replayed batch -- and a closing mirror leaves
every change in the change logs, each batch id recorded.

(Killed writers: tests/test_mirror_crash.py, whose writer stages too.)"""

from __future__ import annotations

import os
import random
import shutil
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from canal.lake.forms.changes import entries_to_batch
from canal.lake.store import changelog, staged
from canal.lake.types import MirrorError
from canal.position import EntryPosition
from canal.protocol import ColumnMeta, Entry, EntryType, EventType, Header, RowChange, RowData, TableSchema
from canal.spark import DeltaMirror

deltalake = pytest.importorskip("deltalake")

TABLES = tuple(
    TableSchema(
        "shop",
        f"t{n:02d}",
        (
            ColumnMeta("id", mysql_type="int(11)", is_key=True),
            ColumnMeta("amount", mysql_type="decimal(10,2)"),
            ColumnMeta("note", mysql_type="varchar(20)"),
        ),
    )
    for n in range(12)
)
KEYS = 40
Row = tuple[int, Decimal, str]


class _Source:
    """Deterministic batches of inserts, updates and deletes over every table, and the source state after them."""

    def __init__(self) -> None:
        self.state: dict[str, dict[int, Row]] = {t.table: {} for t in TABLES}
        self.last = 0

    def batch(self, number: int, tables: tuple[TableSchema, ...] = TABLES, sizes: tuple[int, int] = (1, 6)) -> pa.Table:
        """Batch ``number``: ``sizes`` (the least and the most) changes to each of ``tables``."""
        rng = random.Random(number)
        entries: list[Entry] = []
        for table in tables:
            rows = self.state[table.table]
            for _ in range(rng.randint(*sizes)):
                key = rng.randrange(KEYS)
                value = (key, Decimal(rng.randint(0, 99999)) / 100, f"b{number}")
                if key not in rows:
                    event, data = EventType.INSERT, RowData(table, after=value)
                    rows[key] = value
                elif rng.random() < 0.3:
                    event, data = EventType.DELETE, RowData(table, before=rows.pop(key))
                else:
                    event, data = EventType.UPDATE, RowData(table, before=rows[key], after=value)
                    rows[key] = value
                at = number * 10_000 + len(entries)  # a stream's batches: each after the one before
                header = Header("mysql-bin.000001", at, 1, 1_700_000_000_000, "shop", table.table, event)
                anchor = EntryPosition("mysql-bin.000001", 4)
                entries.append(Entry(header, EntryType.ROWDATA, RowChange(event, [data]), anchor=anchor))
        self.last = number
        return entries_to_batch(entries, "d", number)

    def apply(self, mirror: DeltaMirror, first: int, last: int) -> None:
        for number in range(first, last + 1):
            mirror.apply(self.batch(number), number)


def _rows(table: Any) -> dict[int, Row]:
    return {r["id"]: (r["id"], r["amount"], r["note"]) for r in table.to_pylist()}


def _assert_exact(mirror: DeltaMirror, source: _Source) -> None:
    for table in TABLES:
        assert _rows(mirror.read("shop", table.table)) == source.state[table.table], table.table


def _staged_files(root: Path) -> list[str]:
    directory = Path(staged.staged_dir(root))
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def _mirror(root: Path, **options: Any) -> DeltaMirror:
    # the tests read every batch id committed: a change log keeps its commits behind a checkpoint log_history_s (a
    # second by default), so on a loaded machine the first ones were gone before committed_batch_ids read them
    options = {"fold_ratio": 0.3, "stage_spread": 4, "log_history_s": 3600.0, **options}
    return DeltaMirror(root, background_folds=False, **options)


def test_small_parts_are_staged_read_exactly_and_flushed_a_few_tables_a_batch(tmp_path: Path) -> None:
    source = _Source()
    mirror = _mirror(tmp_path)
    source.apply(mirror, 1, 3)  # the tables are created by their first rows; their logs by the next
    most = 0
    for number in range(4, 21):
        source.apply(mirror, number, number)
        files = _staged_files(tmp_path)
        assert all(not name.endswith(".tmp") for name in files)
        most = max(most, len(files))
        result = mirror.history[-1]
        assert result.tables == {f"shop.{t.table}": "applied" for t in TABLES}
        if number % 5 == 0:
            _assert_exact(mirror, source)
    assert most >= 2  # staged, and kept over batches
    assert most <= 4 + 1  # each batch flushes at least a quarter of the tables staged (stage_spread=4)
    assert mirror.folds  # folds ran between flushes
    for table in TABLES:
        assert mirror.committed_batch_ids("shop", table.table) == list(range(1, 21)), table.table
        assert mirror.version("shop", table.table) == 20
    mirror.close()  # appends everything staged
    assert _staged_files(tmp_path) == []
    for table in TABLES:
        log = changelog.log_path(mirror.table_path("shop", table.table))
        assert deltalake.DeltaTable(str(log)).transaction_version(mirror.app_id) == 20
        assert mirror.committed_batch_ids("shop", table.table) == list(range(1, 21))
    _assert_exact(mirror, source)
    mirror.fold()
    for table in TABLES:  # the base alone, once folded
        base = deltalake.DeltaTable(str(mirror.table_path("shop", table.table))).to_pyarrow_table()
        assert _rows(base) == source.state[table.table]


def test_a_part_above_stage_rows_goes_to_its_log_after_the_parts_staged_before_it(tmp_path: Path) -> None:
    source = _Source()
    mirror = _mirror(tmp_path, stage_rows=3, stage_spread=1000)  # parts of 1-3 rows staged, larger ones not
    checked = 0
    for number in range(1, 15):
        source.apply(mirror, number, number)
        parts = mirror._staging.parts()
        for table in TABLES:
            path = str(mirror.table_path("shop", table.table))
            if path not in parts.tables:
                continue
            logged = delta_append_txn(changelog.log_path(path), mirror.app_id)
            if logged is not None:
                # the log recorded only batches older than every staged one: its batches stay in order
                assert logged < parts.tables[path].batches[0]
                checked += 1
        if number % 4 == 0:
            _assert_exact(mirror, source)
    assert checked  # some tables had parts staged and parts appended


def delta_append_txn(log: str, app_id: str) -> int | None:
    if not (Path(log) / "_delta_log").exists():
        return None
    done = deltalake.DeltaTable(str(log)).transaction_version(app_id)
    return None if done is None else int(done)


@pytest.mark.parametrize(
    ("module", "name", "flush_first"),
    [
        # a flush committing (and deleting the staged files) just after the reader's log snapshot: the staged files,
        # read before it, still hold the changes (read after it, they would be gone)
        (changelog, "_log_snapshot", False),
        # a staged file deleted before the reader opens it: its changes are in the log the reader takes next
        (staged, "_read_file", True),
    ],
    ids=["flush-after-log-snapshot", "file-deleted-before-read"],
)
def test_a_flush_racing_a_reader_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: Any, name: str, flush_first: bool
) -> None:
    """Both fail when the staged files are read after the log's snapshot."""
    source = _Source()
    mirror = _mirror(tmp_path, stage_spread=1000, fold_ratio=1000.0)
    source.apply(mirror, 1, 8)
    assert _staged_files(tmp_path)
    real = getattr(module, name)
    flushes = []

    def racing(*args: Any) -> Any:
        def flush() -> None:
            if not flushes:
                flushes.append(args)
                mirror.flush_staged()  # commits every staged part and deletes the staged files
                assert _staged_files(tmp_path) == []

        if flush_first:
            flush()
        answer = real(*args)
        flush()
        return answer

    monkeypatch.setattr(module, name, racing)
    assert _rows(mirror.read("shop", "t03")) == source.state["t03"]
    assert flushes
    assert _rows(mirror.read("shop", "t03")) == source.state["t03"]  # now from the log alone


def test_a_new_mirror_takes_up_what_another_one_staged(tmp_path: Path) -> None:
    source = _Source()
    first = _mirror(tmp_path)
    source.apply(first, 1, 10)  # not closed: as if its process had died
    del first
    assert _staged_files(tmp_path)
    second = _mirror(tmp_path)
    _assert_exact(second, source)
    source.apply(second, 11, 20)
    _assert_exact(second, source)
    for table in TABLES:
        assert second.committed_batch_ids("shop", table.table) == list(range(1, 21))
    second.close()
    assert _staged_files(tmp_path) == []
    _assert_exact(second, source)


def test_a_new_mirror_deletes_its_own_interrupted_writes_only(tmp_path: Path) -> None:
    source = _Source()
    first = _mirror(tmp_path)
    source.apply(first, 1, 4)
    app_id = first.app_id
    del first  # its process died
    directory = Path(staged.staged_dir(tmp_path))
    own = directory / f"{5:020d}-{app_id.encode().hex()}.arrow.0123456789abcdef.tmp"
    other = directory / f"{5:020d}-{b'another-app'.hex()}.arrow.0123456789abcdef.tmp"
    fresh = directory / f"{6:020d}-{app_id.encode().hex()}.arrow.fedcba9876543210.tmp"
    for path in (own, other, fresh):
        path.write_bytes(b"half a file")  # a process killed while writing it (fresh: a live one writing it now)
    abandoned = time.time() - staged.ABANDONED_AFTER_S - 1
    for path in (own, other):
        os.utime(path, (abandoned, abandoned))
    second = _mirror(tmp_path)
    source.apply(second, 5, 6)
    assert not own.exists() and other.exists()  # another app's mirror may be writing its file
    assert fresh.exists()  # a speculative twin of a Spark task may be writing it: not deleted while fresh
    _assert_exact(second, source)


def test_a_flush_whose_process_died_before_deleting_its_files_appends_nothing_twice(tmp_path: Path) -> None:
    source = _Source()
    first = _mirror(tmp_path, stage_spread=1000, fold_ratio=1000.0)
    source.apply(first, 1, 6)
    kept = tmp_path.parent / "kept-staged"
    shutil.copytree(staged.staged_dir(tmp_path), kept)
    first.flush_staged()
    assert _staged_files(tmp_path) == []
    shutil.rmtree(staged.staged_dir(tmp_path))
    shutil.copytree(kept, staged.staged_dir(tmp_path))  # the files the dead process did not delete
    del first
    _assert_exact(DeltaMirror(tmp_path), source)  # copies of the logged changes: read once
    second = _mirror(tmp_path, stage_spread=1000, fold_ratio=1000.0)
    assert second._staging.parts().tables == {}  # every part is in its log already: none taken up again
    assert _staged_files(tmp_path) == []
    source.apply(second, 7, 9)
    second.close()
    for table in TABLES:
        log = changelog.log_path(second.table_path("shop", table.table))
        rows = deltalake.DeltaTable(str(log)).to_pyarrow_table()
        batches, seqs = rows.column(changelog.BATCH).to_pylist(), rows.column(changelog.SEQ).to_pylist()
        changes = list(zip(batches, seqs, strict=True))
        assert len(changes) == len(set(changes)), table.table  # no change appended twice
    _assert_exact(second, source)


def test_a_replayed_batch_stages_nothing_twice(tmp_path: Path) -> None:
    source = _Source()
    first = _mirror(tmp_path, stage_spread=1000, fold_ratio=1000.0)
    source.apply(first, 1, 4)
    journal = tmp_path / f"_pycanal_steps.{first.app_id}.json"
    replay_from = journal.read_bytes()
    again = source.batch(5)  # deterministic: a replay brings the same rows
    first.apply(again, 5)
    # the process died after staging batch 5 and before journaling it: the next one replays it
    journal.write_bytes(replay_from)
    del first
    second = _mirror(tmp_path, stage_spread=1000, fold_ratio=1000.0)
    holding_5 = {p for p, t in second._staging.parts().tables.items() if 5 in t.batches}
    assert holding_5
    second.apply(again, 5)
    after = second._staging.parts()
    for table in TABLES:
        path = str(second.table_path("shop", table.table))
        # staged once (one table a batch is flushed after it: stage_spread)
        assert after.batch_ids(path).count(5) == (1 if path in holding_5 and path in after.tables else 0)
    assert len(holding_5 & set(after.tables)) >= len(holding_5) - 1
    _assert_exact(second, source)
    source.apply(second, 6, 8)
    second.close()
    _assert_exact(second, source)


_BATCH = st.tuples(st.just("batch"), st.sets(st.integers(0, 3), min_size=1), st.booleans())
_OPS = st.one_of(
    _BATCH,
    _BATCH,
    _BATCH,
    st.tuples(st.just("flush")),
    st.tuples(st.just("fold"), st.integers(0, 3)),
    st.tuples(st.just("close")),
    st.tuples(st.just("restart")),
    st.tuples(st.just("replay")),
    st.tuples(st.just("fault"), st.sets(st.integers(0, 3), min_size=1), st.booleans(), st.integers(0, 6)),
)


@settings(max_examples=int(os.environ.get("PYCANAL_STAGED_EXAMPLES", "10")), deadline=None)
@given(ops=st.lists(_OPS, min_size=4, max_size=16))
def test_any_mix_of_batches_flushes_folds_restarts_and_replays_reads_as_the_source(ops: list[tuple[Any, ...]]) -> None:
    """Against a model (the source's rows): batches of small (staged) and larger (appended) parts of some of four
    tables, flushes, folds on demand, a mirror closed or dropped without closing (a dead process) and a new one
    started, a batch replayed after its journal was lost, and a batch whose process died at one of its boundaries
    (a journal write, before or after it; a flush before its staged file's deletion: tests/test_mirror_step_faults.py)
    replayed by a new mirror; after each, every table reads as the source. (10 examples; PYCANAL_STAGED_EXAMPLES=N
    for more.)"""
    import gc
    import tempfile

    from tests.test_mirror_step_faults import _Boundaries, _Fault, _watched

    tables = TABLES[:4]
    with tempfile.TemporaryDirectory(prefix="staged-model-") as tmp:
        root = Path(tmp)
        source = _Source()
        options = {"stage_rows": 4, "stage_spread": 3, "fold_ratio": 0.5, "background_folds": False}
        mirror = DeltaMirror(root, **options)
        for number in (1, 2):  # every table and its change log created (a log's first append goes through deltalake)
            mirror.apply(source.batch(number, tables, (5, 9)), number)
        journal = root / f"_pycanal_steps.{mirror.app_id}.json"
        replayable: tuple[bytes, pa.Table, int] | None = None
        for op in ops:
            if op[0] == "batch":
                number += 1
                chosen = tuple(tables[i] for i in sorted(op[1]))
                before = journal.read_bytes() if journal.exists() else None
                rows = source.batch(number, chosen, (1, 3) if op[2] else (5, 9))
                mirror.apply(rows, number)
                replayable = None if before is None else (before, rows, number)
            elif op[0] == "flush":
                mirror.flush_staged()
            elif op[0] == "fold":
                mirror.fold("shop", tables[op[1]].table)
            elif op[0] == "close":
                mirror.close()
            elif op[0] == "restart":
                mirror = DeltaMirror(root, **options)  # the old one dropped unclosed: its process died
            elif op[0] == "fault":
                number += 1
                chosen = tuple(tables[i] for i in sorted(op[1]))
                rows = source.batch(number, chosen, (1, 3) if op[2] else (5, 9))
                boundaries = _Boundaries()
                boundaries.at = op[3]
                with pytest.MonkeyPatch.context() as patch, _watched(patch, boundaries):
                    try:
                        mirror.apply(rows, number)
                    except _Fault:
                        del mirror  # the process died at that boundary; a new one replays the batch
                        gc.collect()
                        mirror = DeltaMirror(root, **options)
                mirror.apply(rows, number)  # (a replay of a batch applied whole changes nothing)
                replayable = None
            elif op[0] == "replay" and replayable is not None:
                journal.write_bytes(replayable[0])  # died after the batch, before its journal
                mirror = DeltaMirror(root, **options)
                mirror.apply(replayable[1], replayable[2])
            for table in tables:
                assert _rows(mirror.read("shop", table.table)) == source.state[table.table], (op, table.table)
        mirror.close()
        assert _staged_files(root) == []
        for table in tables:
            assert _rows(mirror.read("shop", table.table)) == source.state[table.table]


def test_stage_settings_are_checked_and_zero_stages_nothing(tmp_path: Path) -> None:
    for bad in ({"stage_rows": -1}, {"stage_spread": 0}):
        with pytest.raises(MirrorError, match="stage_rows must be >= 0 and stage_spread >= 1"):
            DeltaMirror(tmp_path, **bad)
    assert not tmp_path.joinpath(staged.STAGED_DIR).exists()  # nothing written by a refused mirror
    source = _Source()
    mirror = _mirror(tmp_path, stage_rows=0)
    source.apply(mirror, 1, 6)
    assert not os.path.exists(staged.staged_dir(tmp_path))
    _assert_exact(mirror, source)


def test_a_damaged_staged_file_is_a_typed_error(tmp_path: Path) -> None:
    source = _Source()
    mirror = _mirror(tmp_path, stage_spread=1000)
    source.apply(mirror, 1, 5)
    (name,) = _staged_files(tmp_path)[-1:]
    Path(staged.staged_dir(tmp_path), name).write_bytes(b"not arrow")
    with pytest.raises(MirrorError, match=r"staged changes .* cannot be read"):
        mirror.read("shop", "t00")


@pytest.mark.spark
def test_spark_duckdb_and_polars_read_staged_changes_exactly(spark: Any, tmp_path: Path) -> None:
    from canal.spark import current_dataframe, current_duckdb, current_polars

    seen = set()
    columns = ["id", "amount", "note"]
    for root, fold_ratio in ((tmp_path / "folded", 0.3), (tmp_path / "logged", 1000.0)):
        source = _Source()
        mirror = _mirror(root, stage_spread=1000, fold_ratio=fold_ratio)
        source.apply(mirror, 1, 12)
        for table in TABLES[:2]:
            path = mirror.table_path("shop", table.table)
            files = changelog.current_files(path)
            seen.add((files.staged is not None, bool(files.log_files)))
            want = source.state[table.table]
            got = current_dataframe(spark, path).collect()
            assert _rows(pa.Table.from_pylist([r.asDict() for r in got])) == want, table.table
            assert {r[0]: tuple(r) for r in current_duckdb(path).select(*columns).fetchall()} == want
            assert _rows(current_polars(path).to_arrow()) == want
    assert (True, True) in seen and (True, False) in seen  # staged rows beside log files, and alone
