"""The mirror written by Spark tasks (:mod:`canal.spark.mirror_tasks`): a table per task, idempotent per (table,
batch id) when a task runs twice at once (speculation) or again (a retry, a replayed micro-batch), folds as tasks;
and the current state read from Spark, DuckDB and Polars equal to pyarrow's."""

from __future__ import annotations

import contextlib
import threading
from decimal import Decimal
from pathlib import Path
from typing import Any

import attrs
import pyarrow as pa
import pytest

from canal.lake.settings import MODES, MirrorSettings
from canal.lake.store import changelog
from canal.lake.types import MirrorError, MirrorStorageError
from canal.spark import (
    DeltaMirror,
    MirrorMode,
    current_dataframe,
    current_duckdb,
    current_polars,
    entries_to_batch,
)
from canal.spark.mirror_tasks import SPILL_PREFIX, _drop_spills, _read_spill, write_partition
from canal.spark.testing import master_position
from tests.procs.mirror_writer import TABLES, Row, batch, source_after
from tests.test_spark_units import _mirror_available_now, _source_options


def _rows(table: Any) -> dict[int, Row]:
    return {r["id"]: (r["id"], r["amount"], r["note"]) for r in table.to_pylist()}


def _task(root: Path, mode: MirrorMode, rows: Any, batch_id: int) -> None:
    """One executor's task: a mirror of its own, the table's rows of the batch, no step journal."""
    from deltalake.exceptions import CommitFailedError

    try:
        DeltaMirror(root, mode=mode).apply(rows, batch_id, steps_journal=False, fold=False)
    except MirrorStorageError as exc:
        if not isinstance(exc.__cause__, CommitFailedError):
            raise
        # copy-on-write: the twin's MERGE committed first; Spark retries the task, which then skips the batch
        DeltaMirror(root, mode=mode).apply(rows, batch_id, steps_journal=False, fold=False)


@pytest.mark.parametrize("mode", MODES)
def test_speculative_twin_tasks_and_racing_folds_change_nothing(tmp_path: Path, mode: MirrorMode) -> None:
    import pyarrow.compute as pc

    root = tmp_path / "mirror"
    state: dict[str, dict[int, Row]] = {}
    for number in range(1, 13):
        rows = entries_to_batch(batch(number, state), "d", number)
        for table in TABLES:
            part = rows.filter(pc.equal(rows.column("table"), table.table))
            twins = [threading.Thread(target=_task, args=(root, mode, part, number)) for _ in range(2)]
            for t in twins:
                t.start()
            for t in twins:
                t.join()
        if mode == "merge_on_read" and number % 3 == 0:  # two fold tasks of each table at once: one may lose
            folds = [threading.Thread(target=_fold_task, args=(root,)) for _ in range(2)]
            for t in folds:
                t.start()
            for t in folds:
                t.join()
        mirror = DeltaMirror(root, mode=mode)
        for table in TABLES:
            assert _rows(mirror.read("shop", table.table)) == state[table.table], (number, table.table)
    # a replayed micro-batch: every table skips it
    again = entries_to_batch(batch(12, source_after(11)), "d", 12)
    result = DeltaMirror(root, mode=mode).apply(again, 12, steps_journal=False)
    assert set(result.tables.values()) == {"skipped"}
    for table in TABLES:
        assert _rows(DeltaMirror(root).read("shop", table.table)) == source_after(12)[table.table]


def _fold_task(root: Path) -> None:
    for table in TABLES:
        with contextlib.suppress(changelog.FoldRaceError):  # the twin fold won: this one changed nothing
            changelog.fold(root / f"shop.{table.table}")


@pytest.mark.integration
@pytest.mark.spark
@pytest.mark.parametrize("mode", MODES)
def test_foreach_batch_writes_on_executors_and_reads_exactly_anywhere(
    mariadb: Any, spark: Any, tmp_path: Path, mode: MirrorMode
) -> None:
    conn = mariadb.connect()
    db = mariadb.database
    start = master_position(conn)
    with conn.cursor() as cur:
        for name in ("a", "b", "c"):
            cur.execute(f"CREATE TABLE `{db}`.{name} (id INT PRIMARY KEY, v VARCHAR(20), n DECIMAL(8,2))")
        for i in range(300):
            name = "abc"[i % 3]
            cur.execute(f"INSERT INTO `{db}`.{name} VALUES (%s, %s, %s)", (i, f"v{i}", Decimal(i) / 4))
            if i % 7 == 0:
                cur.execute(f"UPDATE `{db}`.{name} SET v = 'u' WHERE id < %s", (i // 2,))
            if i % 11 == 0:
                cur.execute(f"DELETE FROM `{db}`.{name} WHERE id = %s", (i - 3,))
        cur.execute(f"ALTER TABLE `{db}`.b ADD COLUMN extra INT NOT NULL DEFAULT 7")
        cur.execute(f"UPDATE `{db}`.b SET extra = 8 WHERE id < 100")
    mirror = DeltaMirror(tmp_path / "m", mode=mode, fold_ratio=0.2)
    driver_batches: list[int] = []
    apply = mirror.apply

    def counted(changes: Any, batch_id: int, **kwargs: Any) -> Any:
        driver_batches.append(batch_id)
        return apply(changes, batch_id, **kwargs)

    mirror.apply = counted  # type: ignore[method-assign]
    options = _source_options(mariadb, start, tmp_path, maxRowsPerTrigger="120")
    assert _mirror_available_now(spark, options, mirror, tmp_path / "ckpt").awaitTermination(180)
    mirror.wait_for_folds()
    assert len(mirror.history) > len(driver_batches) >= 1  # DML batches were written by tasks, DDL ones by the driver
    # the DDL batches reached the driver as files beside the tables, each deleted once read
    assert not list((tmp_path / "m").glob(f"{SPILL_PREFIX}*"))
    for name in ("a", "b", "c"):
        with conn.cursor() as cur:
            cur.execute(f"SELECT id, v, n{', extra' if name == 'b' else ''} FROM `{db}`.{name} ORDER BY id")
            want = [tuple(r) for r in cur.fetchall()]
        path = mirror.table_path(db, name)
        columns = ["id", "v", "n", *(["extra"] if name == "b" else [])]
        for how, rows in (
            ("pyarrow", mirror.read(db, name).select(columns).to_pylist()),
            ("spark", [r.asDict() for r in current_dataframe(spark, path).select(*columns).collect()]),
            ("duckdb", [dict(zip(columns, r, strict=True)) for r in current_duckdb(path).select(*columns).fetchall()]),
            ("polars", current_polars(path).select(columns).to_dicts()),
        ):
            got = sorted(tuple(r[c] for c in columns) for r in rows)
            assert got == want, (how, name)
    conn.close()


@pytest.mark.spark
def test_a_batch_in_several_partitions_is_written_a_table_per_task(spark: Any, tmp_path: Path) -> None:
    """A DataFrame of several partitions (not the canal source's one) goes the grouped way: a table per task."""
    mirror = DeltaMirror(tmp_path / "m")
    state: dict[str, dict[int, Row]] = {}
    for number in range(1, 5):
        rows = entries_to_batch(batch(number, state), "d", number)
        df = spark.createDataFrame(pa.table(rows)).repartition(3)
        assert df.rdd.getNumPartitions() == 3
        mirror(df, number)
        assert set(mirror.history[-1].tables) == {"shop.a", "shop.b"}
    mirror.close()
    for table in TABLES:
        assert _rows(mirror.read("shop", table.table)) == state[table.table]


@pytest.mark.spark
@pytest.mark.parametrize("partitions", [1, 3])
def test_a_lost_task_answer_fails_the_batch_and_records_nothing(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, partitions: int
) -> None:
    """PySpark's collect returns what it received when the thread serving the result dies (an OutOfMemoryError in
    the driver does that): a short answer fails the batch instead of recording it with fewer tables, and Spark's
    next run of the batch completes it."""
    mirror = DeltaMirror(tmp_path / "m")
    state: dict[str, dict[int, Row]] = {}
    first = entries_to_batch(batch(1, state), "d", 1)
    mirror(spark.createDataFrame(pa.table(first)).coalesce(1), 1)
    after_first = {t.table: _rows(mirror.read("shop", t.table)) for t in TABLES}
    history, stats = len(mirror.history), {n: attrs.astuple(s) for n, s in mirror.stats.items()}

    second = entries_to_batch(batch(2, state), "d", 2)
    df = spark.createDataFrame(pa.table(second))
    df = df.coalesce(1) if partitions == 1 else df.repartition(partitions)
    frame = type(df)  # PySpark's DataFrame implementation (classic or Connect)
    collect = frame.collect

    def short(self: Any) -> list[Any]:
        rows: list[Any] = collect(self)
        return rows[:-1] if "spill" in self.columns else rows  # the tasks' answers lose their last row

    monkeypatch.setattr(frame, "collect", short)
    with pytest.raises(MirrorError, match="answers of"):
        mirror(df, 2)
    assert len(mirror.history) == history  # nothing recorded for batch 2
    assert {n: attrs.astuple(s) for n, s in mirror.stats.items()} == stats
    monkeypatch.undo()
    mirror(df, 2)  # Spark runs the batch again: the tables the tasks wrote are skipped, the rest applied
    assert mirror.history[-1].rows == second.num_rows
    mirror.close()
    for table in TABLES:
        assert _rows(mirror.read("shop", table.table)) == state[table.table] != after_first[table.table]


def test_ddl_batch_files_left_by_a_failed_driver_are_dropped_by_a_later_one(tmp_path: Path) -> None:
    names = [f"{SPILL_PREFIX}{n}.{tag}.arrow" for n, tag in ((3, "a"), (4, "b"), (5, "c"))]
    for name in [*names, "other.arrow", f"{SPILL_PREFIX}x.arrow"]:
        (tmp_path / name).write_bytes(b"")
    _drop_spills(tmp_path, 5)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([names[2], "other.arrow", f"{SPILL_PREFIX}x.arrow"])


def test_a_ddl_batch_is_handed_to_the_driver_in_a_file_read_once(tmp_path: Path) -> None:
    rows = pa.table({"is_ddl": [True], "sql": ["CREATE TABLE t (id int)"]})
    settings = MirrorSettings(root=str(tmp_path), app_id="app")
    answer = pa.Table.from_batches(list(write_partition(DeltaMirror, settings, "e", 5, rows.to_batches(), None)))
    (spill,) = answer.column("spill").to_pylist()
    assert answer.column("status").to_pylist() == ["ddl"]
    assert [p.name for p in tmp_path.iterdir()] == [Path(spill).name] and Path(spill).parent == tmp_path
    assert _read_spill(spill) == rows
    assert list(tmp_path.iterdir()) == []  # read once, then gone
