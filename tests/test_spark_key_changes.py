"""Primary-key changes on MariaDB reach the Delta mirror as a delete of the old key: run_batches -> DeltaMirror.

Every scenario the mirror must get right: a key changed with other columns, changed twice in one batch, swapped
between two rows through a third value, changed then deleted, changed in a batch of its own, and a composite key.
After each phase the Delta tables equal ``SELECT *``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("deltalake")

from canal.config import InstanceConfig, StoreConfig
from canal.spark import DeltaMirror
from canal.spark.testing import compare_tables, master_position, run_caught_up

pytestmark = [pytest.mark.spark, pytest.mark.integration]

TABLES = ("items", "pairs")


def _config(mariadb: Any, start: tuple[str, int], meta_dir: Path) -> InstanceConfig:
    return InstanceConfig(
        destination="keys",
        master=mariadb.master(start),
        filter_regex=rf"{mariadb.database}\..*",
        store=StoreConfig(batch_mode="ITEMSIZE"),
        meta_mode="file",
        meta_dir=str(meta_dir),
    )


def _equal(conn: Any, mirror: DeltaMirror, database: str) -> None:
    for comparison in compare_tables(conn, mirror, database, TABLES):
        assert comparison.equal, str(comparison)


def test_key_changes_leave_the_mirror_equal_to_the_source(mariadb: Any, spark: Any, tmp_path: Path) -> None:
    conn = mariadb.connect()
    db = mariadb.database
    start = master_position(conn)
    cfg = _config(mariadb, start, tmp_path / "meta")
    mirror = DeltaMirror(tmp_path / "mirror")
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {db}.items (id INT PRIMARY KEY, note VARCHAR(20), qty INT)")
        cur.execute(f"CREATE TABLE {db}.pairs (a INT, b VARCHAR(5), v INT, PRIMARY KEY (a, b))")
        cur.executemany(f"INSERT INTO {db}.items VALUES (%s, %s, %s)", [(i, f"n{i}", i) for i in range(1, 9)])
        cur.executemany(f"INSERT INTO {db}.pairs VALUES (%s, %s, %s)", [(1, "x", 1), (1, "y", 2), (2, "x", 3)])
    conn.commit()
    run_caught_up(conn, cfg, spark, mirror, batch_size=1000)
    _equal(conn, mirror, db)

    # everything below lands in one batch: the mirror must reduce it in binlog order
    with conn.cursor() as cur:
        cur.execute(f"UPDATE {db}.items SET id = 1002, note = 'moved' WHERE id = 2")  # key and another column
        cur.execute(f"UPDATE {db}.items SET id = 1003 WHERE id = 3")  # changed twice
        cur.execute(f"UPDATE {db}.items SET id = 2003 WHERE id = 1003")
        cur.execute(f"UPDATE {db}.items SET id = 999 WHERE id = 4")  # 4 and 5 swap through 999
        cur.execute(f"UPDATE {db}.items SET id = 4 WHERE id = 5")
        cur.execute(f"UPDATE {db}.items SET id = 5 WHERE id = 999")
        cur.execute(f"UPDATE {db}.items SET id = 6006 WHERE id = 6")  # changed, then deleted
        cur.execute(f"DELETE FROM {db}.items WHERE id = 6006")
        cur.execute(f"UPDATE {db}.items SET id = id + 100 WHERE id IN (7, 8)")  # one event, two rows
        cur.execute(f"UPDATE {db}.pairs SET b = 'z', v = 9 WHERE a = 1 AND b = 'x'")  # composite key
        cur.execute(f"UPDATE {db}.pairs SET a = 3 WHERE a = 2")
    conn.commit()
    run_caught_up(conn, cfg, spark, mirror, batch_size=1000)
    _equal(conn, mirror, db)
    with conn.cursor() as cur:
        cur.execute(f"SELECT id FROM {db}.items ORDER BY id")
        assert [r[0] for r in cur.fetchall()] == [1, 4, 5, 107, 108, 1002, 2003]

    # a key change in a batch of its own (batch size 1 entry: every event is its own batch)
    with conn.cursor() as cur:
        cur.execute(f"UPDATE {db}.items SET id = 11 WHERE id = 1")
    conn.commit()
    run_caught_up(conn, cfg, spark, mirror, batch_size=1)
    _equal(conn, mirror, db)
    assert sorted(r["id"] for r in mirror.read(db, "items").to_pylist()) == [4, 5, 11, 107, 108, 1002, 2003]
    conn.close()
