"""The ``canal`` source on a database that already holds rows: ``pycanal.snapshot.mode=initial`` snapshots it into
the change rows (type SNAPSHOT) while the workload writes, an uncommitted micro-batch of snapshot rows replays
identically, and the Delta mirror ends equal to the source."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("deltalake")

from test_spark_source import (
    run_workload,
    source_options,
    start_query,
    wait_mirrored,
)

from canal.spark import DeltaMirror, register, to_arrow
from canal.spark.chunks import PARTITION_SEQ_BASE
from canal.spark.testing import SHOP_TABLES, compare_tables, master_position, no_batch_twice

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def _first_start(mariadb: Any, tmp_path: Path, extra: dict[str, str]) -> tuple[Any, str, Any, dict[str, str]]:
    """A shop database holding the rows of 150 transactions the pipeline never sees in the binlog, and source
    options (plus ``extra``) for a first start in snapshot mode initial: (connection, database, workload, options)."""
    conn = mariadb.connect()
    db = mariadb.database
    work = run_workload(conn, db, 150)
    options = source_options(mariadb, master_position(conn), tmp_path / "ckpt.canal-spool")
    del options["master.journal.name"], options["master.position"]  # a first start: the server's position now
    return conn, db, work, {**options, "pycanal.snapshot.mode": "initial", **extra}


@pytest.mark.parametrize("reader", ["driver", "executors", "executors-variant"])
def test_initial_snapshot_of_a_populated_database_then_streaming(
    mariadb: Any, spark: Any, tmp_path: Path, reader: str
) -> None:
    # executors: ranges of 40 rows read on executors, two per micro-batch; -variant: images=variant, the ranges'
    # rows turned into it by their tasks, and the mirror writing the micro-batch's partitions on executors
    ranges = {"snapshot.partitions": "2", "snapshot.partition.rows": "40"} if reader != "driver" else {}
    if reader == "executors-variant":
        ranges["images"] = "variant"
    conn, db, work, options = _first_start(mariadb, tmp_path, {"pycanal.snapshot.chunk.rows": "40", **ranges})
    checkpoint, mirror = tmp_path / "ckpt", DeltaMirror(tmp_path / "mirror", log_history_s=3600)
    seen: dict[int, list[list[Any]]] = {}
    crashed: list[int] = []

    def crash_once(df: Any, batch_id: int) -> None:
        table = to_arrow(df)  # (PySpark's df.toArrow() refuses VARIANT columns holding NULLs)
        seen.setdefault(batch_id, []).append(table.select(["seq", "type", "keys", "after"]).to_pylist())
        mirror(df if reader == "executors-variant" else table, batch_id)
        if not crashed and "SNAPSHOT" in table.column("type").to_pylist() and batch_id >= 1:
            crashed.append(batch_id)
            raise RuntimeError("crash after the Delta write")

    query = start_query(spark, options, checkpoint, crash_once)
    for _ in range(30):  # writes while the snapshot runs
        work.transaction()
    with pytest.raises(Exception, match="crash after the Delta write"):
        query.awaitTermination(180)

    query = start_query(spark, options, checkpoint, crash_once)
    try:
        for _ in range(30):
            work.transaction()
        wait_mirrored(query, conn, mirror, db, deadline_s=180)
    finally:
        query.stop()
    # the crashed batch was planned, not committed: replayed row for row, snapshot rows included
    replayed = seen[crashed[0]]
    assert len(replayed) == 2 and replayed[0] == replayed[1]
    snapshot_rows = [r for runs in seen.values() for r in runs[-1] if r["type"] == "SNAPSHOT"]
    assert len({str(r["keys"]) for r in snapshot_rows}) >= 150  # the rows that were there before the query
    # where they were read: executor ranges number their rows after the micro-batch's binlog rows
    from_ranges = {(r["seq"] & 0xFFFFFFFF) >= PARTITION_SEQ_BASE for r in snapshot_rows}
    assert from_ranges == {reader != "driver"}
    no_batch_twice(mirror, db, SHOP_TABLES)
    if reader != "driver":  # the plan's progress rides in the offsets, which the query's progress shows
        plan = [
            _offset(p["sources"][0][side]).get("chunks")
            for p in query.recentProgress
            for side in ("startOffset", "endOffset")
        ]
        assert any(c is not None and c["tables"] for c in plan) and plan[-1] is None  # planning, then done
    conn.close()


def _offset(value: Any) -> dict[str, Any]:
    return json.loads(value) if isinstance(value, str) else dict(value or {})


def test_a_column_added_while_executor_ranges_are_read(mariadb: Any, spark: Any, tmp_path: Path) -> None:
    """``ALTER TABLE customers ADD COLUMN tier`` after the first range is mirrored, then updates that set it: the
    ranges read later were planned without ``tier`` but are read under the layout at their read, so their upserts
    carry it (an upsert without it would null ``tier`` in a MERGE whose batch also has rows with it) -- the mirror
    ends equal."""
    conn, db, work, options = _first_start(
        mariadb, tmp_path, {"snapshot.partitions": "1", "snapshot.partition.rows": "20"}
    )
    mirror = DeltaMirror(tmp_path / "mirror", log_history_s=3600)
    first_range = threading.Event()
    after_alter: list[str] = []  # the tables of SNAPSHOT rows mirrored after the ALTER

    def apply(df: Any, batch_id: int) -> None:
        table = df.toArrow()
        mirror(table, batch_id)
        kinds = set(zip(table.column("type").to_pylist(), table.column("table").to_pylist(), strict=True))
        if work.altered:
            after_alter.extend(name for kind, name in kinds if kind == "SNAPSHOT")
        if any(kind == "SNAPSHOT" for kind, _ in kinds):
            first_range.set()

    query = start_query(spark, options, tmp_path / "ckpt", apply)
    try:
        assert first_range.wait(180), "no range was mirrored"
        work.alter()
        for _ in range(40):  # updates that set tier, while later ranges are read
            work.transaction()
        wait_mirrored(query, conn, mirror, db, deadline_s=180)
    finally:
        query.stop()
    assert "customers" in after_alter  # the ALTER landed inside the snapshot of customers
    no_batch_twice(mirror, db, SHOP_TABLES)
    conn.close()


@pytest.mark.parametrize("reader", ["driver", "executors"])
def test_trigger_available_now_delivers_the_whole_initial_snapshot(
    mariadb: Any, spark: Any, tmp_path: Path, reader: str
) -> None:
    """The rows already there are data available now: a ``Trigger.AvailableNow`` query (what a Spark Declarative
    Pipeline's streaming table runs) ends only once the snapshot is in, and then the mirror equals the source;
    a second run delivers what was written since."""
    ranges = {"snapshot.partitions": "2", "snapshot.partition.rows": "40"} if reader == "executors" else {}
    conn, db, work, options = _first_start(mariadb, tmp_path, {"pycanal.snapshot.chunk.rows": "40", **ranges})
    mirror = DeltaMirror(tmp_path / "mirror", log_history_s=3600)

    def run() -> None:
        register(spark)
        query = (
            spark.readStream.format("canal")
            .options(**options)
            .load()
            .writeStream.foreachBatch(mirror)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(180)  # it ends itself
        assert query.exception() is None

    run()
    for c in compare_tables(conn, mirror, db, SHOP_TABLES):
        assert c.equal, str(c)
    for _ in range(20):
        work.transaction()
    run()
    for c in compare_tables(conn, mirror, db, SHOP_TABLES):
        assert c.equal, str(c)
    no_batch_twice(mirror, db, SHOP_TABLES)
    conn.close()
