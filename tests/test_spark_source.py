"""The ``canal`` streaming source: replay of an uncommitted batch, crashes of foreachBatch, reader and driver."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("deltalake")

from canal.spark import DeltaMirror, register
from canal.spark.testing import (
    SHOP_TABLES,
    ShopWorkload,
    compare_tables,
    master_position,
    no_batch_twice,
    source_runner_pids,
)
from canal.testing.services import process_state

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def source_options(mariadb: Any, start: tuple[str, int], spool: Path) -> dict[str, str]:
    return {
        "destination": "shop",
        "master.address": mariadb.address,
        "master.user": mariadb.user,
        "master.password": mariadb.password,
        "master.journal.name": start[0],
        "master.position": str(start[1]),
        "filter.regex": rf"{mariadb.database}\..*",
        "spool.dir": str(spool),
        "canal.instance.memory.batch.mode": "ITEMSIZE",
        "batch.size": "50",
        "max.entries": "100",
        "read.timeout": "0.2",
    }


def start_query(spark: Any, options: dict[str, str], checkpoint: Path, fn: Any, *, available_now: bool = False) -> Any:
    register(spark)
    stream = spark.readStream.format("canal").options(**options).load()
    writer = stream.writeStream.foreachBatch(fn).option("checkpointLocation", str(checkpoint))
    return (writer.trigger(availableNow=True) if available_now else writer).start()


def wait_mirrored(query: Any, conn: Any, mirror: DeltaMirror, db: str, deadline_s: float = 90.0) -> None:
    """Process what the source has until every mirror equals its table (or fail at the deadline)."""
    deadline = time.monotonic() + deadline_s
    while True:
        query.processAllAvailable()
        comparisons = compare_tables(conn, mirror, db, SHOP_TABLES)
        if all(c.equal for c in comparisons):
            return
        if time.monotonic() > deadline:
            raise AssertionError("; ".join(str(c) for c in comparisons if not c.equal))


def run_workload(conn: Any, db: str, n: int, *, seed: int = 5, alter_at: int | None = None) -> ShopWorkload:
    work = ShopWorkload(conn, db, seed=seed)
    work.run(n, alter_at=alter_at)
    return work


def written_workload(
    mariadb: Any, tmp_path: Path, n: int, *, alter_at: int
) -> tuple[Any, Path, DeltaMirror, dict[str, str]]:
    """``n`` shop transactions (an ALTER after the ``alter_at``-th) written after a recorded position, and what a
    query over them needs: the connection, a checkpoint path, a new mirror and source options from that position."""
    conn = mariadb.connect()
    start = master_position(conn)
    run_workload(conn, mariadb.database, n, alter_at=alter_at)
    options = source_options(mariadb, start, tmp_path / "ckpt.canal-spool")
    return conn, tmp_path / "ckpt", DeltaMirror(tmp_path / "mirror", log_history_s=3600), options


@pytest.mark.parametrize("images", ["json", "packed"])
def test_replay_of_an_uncommitted_batch_returns_the_same_rows(
    mariadb: Any, spark: Any, tmp_path: Path, images: str
) -> None:
    """A batch planned but not committed is replayed from the spool, row for row, read back by the planner on the
    driver (``spool.shared`` off; a spool in an object store is replayed in the cluster and Connect tests). Packed
    batches are replayed byte for byte."""
    conn, checkpoint, mirror, options = written_workload(
        mariadb, tmp_path, 150, alter_at=40
    )  # >= 450 entries: >= 5 batches of <= 100
    options["spool.shared"] = "false"
    options["images"] = images
    seen: dict[int, list[list[Any]]] = {}

    def crash_after_write(df: Any, batch_id: int) -> None:
        table = df.toArrow()
        kept = table if images == "packed" else table.select(["seq", "keys", "after"])
        seen.setdefault(batch_id, []).append(kept.to_pylist())
        mirror(table, batch_id)
        if batch_id == 2 and len(seen[batch_id]) == 1:
            raise RuntimeError("crash after the Delta write")

    query = start_query(spark, options, checkpoint, crash_after_write)
    with pytest.raises(Exception, match="crash after the Delta write"):
        query.awaitTermination(120)
    assert not query.isActive
    assert len(seen[2]) == 1

    query = start_query(spark, options, checkpoint, crash_after_write)
    try:
        wait_mirrored(query, conn, mirror, mariadb.database)
    finally:
        query.stop()
    # batch 2 was planned but not committed: replayed from the spool, row for row, and skipped by the mirror
    assert len(seen[2]) == 2 and seen[2][0] == seen[2][1] and seen[2][0]
    assert [r.tables for r in mirror.history if r.batch_id == 2][1] and all(
        v == "skipped" for v in [r for r in mirror.history if r.batch_id == 2][1].tables.values()
    )
    assert len(seen) > 3
    no_batch_twice(mirror, mariadb.database, SHOP_TABLES)
    conn.close()


@pytest.mark.parametrize("images", ["json", "packed"])
def test_reader_process_killed_after_the_write(mariadb: Any, spark: Any, tmp_path: Path, images: str) -> None:
    """The reader's process killed after a batch was written: a restarted query replays from the spool and the
    mirror ends equal to the tables, the mirror written by Spark tasks (packed: from the unpacked typed batches)."""
    conn, checkpoint, mirror, options = written_workload(mariadb, tmp_path, 80, alter_at=30)
    options["images"] = images
    killed: list[int] = []

    def kill_reader_on_batch_2(df: Any, batch_id: int) -> None:
        mirror(df, batch_id)
        if batch_id == 2 and not killed:
            runners = source_runner_pids()
            assert len(runners) == 1, runners
            os.kill(runners[0], signal.SIGKILL)
            killed.append(runners[0])

    query = start_query(spark, options, checkpoint, kill_reader_on_batch_2)
    with pytest.raises(Exception):  # noqa: B017 - the query fails once its reader process is gone
        query.awaitTermination(120)
    assert killed and not query.isActive
    _wait_gone(killed, 30)
    applied_before = {t: mirror.committed_batch_ids(mariadb.database, t) for t in SHOP_TABLES}
    assert any(2 in ids for ids in applied_before.values())

    query = start_query(spark, options, checkpoint, mirror)
    try:
        wait_mirrored(query, conn, mirror, mariadb.database)
        # more changes after the restart flow through the new reader too
        with conn.cursor() as cur:
            cur.execute(f"UPDATE `{mariadb.database}`.orders SET status='late' WHERE id % 5 = 0")
        wait_mirrored(query, conn, mirror, mariadb.database)
    finally:
        query.stop()
    ids = no_batch_twice(mirror, mariadb.database, SHOP_TABLES)
    assert max(max(v, default=-1) for v in ids.values()) > 2
    conn.close()


def _wait_gone(pids: list[int], deadline_s: float) -> None:
    deadline = time.monotonic() + deadline_s
    while any(process_state(p) not in (None, "Z") for p in pids):
        if time.monotonic() > deadline:
            raise AssertionError(f"processes still alive: {[p for p in pids if process_state(p) not in (None, 'Z')]}")
        time.sleep(0.05)  # polling an external process's state with a deadline


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry))
    return out


def test_packed_micro_batches_carry_xa_and_second_layouts_as_their_own(
    mariadb: Any, spark: Any, tmp_path: Path
) -> None:
    """images=packed through Spark: XA transactions (committed and rolled back) travel as change rows and a second
    layout of a table (an ALTER between its rows) opens a micro-batch of its own, the rest typed; the mirror, written
    by Spark tasks and the driver (the DDL), equals SELECT."""
    conn = mariadb.connect(autocommit=True)
    db = mariadb.database
    start = master_position(conn)
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE `{db}`.acct (id INT PRIMARY KEY, bal INT)")
        cur.execute(f"CREATE TABLE `{db}`.notes (id INT PRIMARY KEY, txt VARCHAR(20))")
        for round_ in range(3):
            cur.executemany(f"INSERT INTO `{db}`.acct VALUES (%s, %s)", [(round_ * 100 + i, i) for i in range(30)])
            cur.execute(f"INSERT INTO `{db}`.notes (id, txt) VALUES ({round_ * 2}, 'a'), ({round_ * 2 + 1}, 'b')")
            cur.execute(f"XA START 'x{round_}'")
            cur.execute(f"UPDATE `{db}`.acct SET bal = bal + 1000 WHERE id % 7 = {round_}")
            cur.execute(f"XA END 'x{round_}'")
            cur.execute(f"XA PREPARE 'x{round_}'")
            cur.execute(f"XA {'ROLLBACK' if round_ == 1 else 'COMMIT'} 'x{round_}'")
            cur.execute(f"UPDATE `{db}`.acct SET bal = bal - 1 WHERE id % 3 = 0")
            cur.execute(f"ALTER TABLE `{db}`.notes ADD COLUMN c{round_} INT DEFAULT {round_}")
            cur.execute(f"UPDATE `{db}`.notes SET txt = 'z' WHERE id % 2 = 0")
            cur.execute(f"DELETE FROM `{db}`.acct WHERE id % 11 = {round_}")
            for i in range(12):  # plain transactions: typed micro-batches between the others
                cur.execute(f"UPDATE `{db}`.acct SET bal = bal + {i} WHERE id = {round_ * 100 + i}")
    options = {
        **source_options(mariadb, start, tmp_path / "ckpt.canal-spool"),
        "filter.regex": rf"{db}\..*",
        "images": "packed",
        "batch.size": "4",  # instance batches of four entries, micro-batches of 30 at most
        "max.entries": "30",
    }
    mirror = DeltaMirror(tmp_path / "mirror")
    forms: list[str] = []

    def each(df: Any, batch_id: int) -> None:
        forms.extend(row["form"] for row in df.select("form").collect())
        mirror(df, batch_id)

    query = start_query(spark, options, tmp_path / "ckpt", each, available_now=True)
    assert query.awaitTermination(180)
    assert query.exception() is None
    mirror.close()
    for c in compare_tables(conn, mirror, db, ["acct", "notes"]):
        assert c.equal, str(c)
    assert "typed" in forms and "rows" in forms, forms
    conn.close()
