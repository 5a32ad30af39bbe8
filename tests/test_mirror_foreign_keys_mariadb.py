"""The Delta mirror applies foreign keys' actions the binlog does not log (:mod:`canal.lake.apply.cascade`), on a
real MariaDB: ON DELETE CASCADE over three levels, ON DELETE SET NULL, ON UPDATE CASCADE of a primary and of a
unique non-primary key (into a child's primary key too), ON UPDATE SET NULL, a table's key to itself, a child
inserted and its parent deleted in one transaction, a parent deleted with no child (no stop), ALTER TABLE DROP / ADD
FOREIGN KEY between the changes, and a mirror restarted between batches. After every run each mirrored table equals
``SELECT *`` of its source table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("deltalake")

from capture_configs import capture_config

from canal.config import InstanceConfig
from canal.spark import DeltaMirror
from canal.spark.testing import master_position, run_caught_up
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration

TABLES = ("p", "c", "g", "n", "k", "m", "tree")


def _config(mariadb: MariaDBDatabase, tmp_path: Path, start: tuple[str, int]) -> InstanceConfig:
    return capture_config(mariadb, tmp_path / "meta", start, "fka")


def _rows_of_mirror(mirror: DeltaMirror, db: str, table: str, columns: list[str]) -> list[tuple[Any, ...]]:
    return sorted(tuple(r[c] for c in columns) for r in mirror.read(db, table).to_pylist())


def _assert_equal(mirror: DeltaMirror, conn: Any, db: str, when: str) -> None:
    for table in TABLES:
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM `{db}`.`{table}`")
            columns = [d[0] for d in cur.description]
            source = sorted(tuple(r) for r in cur.fetchall())
        assert _rows_of_mirror(mirror, db, table, columns) == source, f"{table} after {when}"


def _run(conn: Any, statements: list[str]) -> None:
    with conn.cursor() as cur:
        for sql in statements:
            cur.execute(sql)


def test_the_mirror_applies_foreign_key_actions(mariadb: MariaDBDatabase, tmp_path: Path) -> None:
    db = mariadb.database
    conn = mariadb.connect(autocommit=True)
    config = _config(mariadb, tmp_path, master_position(conn))
    root = tmp_path / "mirror"
    _run(
        conn,
        [
            f"CREATE TABLE `{db}`.p (id INT PRIMARY KEY, u INT UNIQUE, v INT)",
            f"CREATE TABLE `{db}`.c (id INT PRIMARY KEY, pid INT, pu INT, note VARCHAR(20), "
            f"CONSTRAINT fc FOREIGN KEY (pid) REFERENCES `{db}`.p (id) ON DELETE CASCADE ON UPDATE CASCADE, "
            f"CONSTRAINT fu FOREIGN KEY (pu) REFERENCES `{db}`.p (u) ON DELETE SET NULL ON UPDATE CASCADE)",
            f"CREATE TABLE `{db}`.g (id INT PRIMARY KEY, cid INT, "
            f"CONSTRAINT fg FOREIGN KEY (cid) REFERENCES `{db}`.c (id) ON DELETE CASCADE)",
            f"CREATE TABLE `{db}`.n (id INT PRIMARY KEY, pid INT, "
            f"CONSTRAINT fn FOREIGN KEY (pid) REFERENCES `{db}`.p (id) ON DELETE SET NULL ON UPDATE CASCADE)",
            # a foreign key in the child's primary key (an ON UPDATE CASCADE moves the row), and ON UPDATE SET NULL
            f"CREATE TABLE `{db}`.k (pid INT, id INT, PRIMARY KEY (pid, id), "
            f"CONSTRAINT fk FOREIGN KEY (pid) REFERENCES `{db}`.p (id) ON DELETE CASCADE ON UPDATE CASCADE)",
            f"CREATE TABLE `{db}`.m (id INT PRIMARY KEY, pu INT, "
            f"CONSTRAINT fm FOREIGN KEY (pu) REFERENCES `{db}`.p (u) ON UPDATE SET NULL ON DELETE SET NULL)",
            f"CREATE TABLE `{db}`.tree (id INT PRIMARY KEY, up INT, "
            f"CONSTRAINT ft FOREIGN KEY (up) REFERENCES `{db}`.tree (id) ON DELETE CASCADE)",
            f"INSERT INTO `{db}`.tree VALUES (1, NULL), (2, 1), (3, 2), (4, NULL)",
            f"INSERT INTO `{db}`.p VALUES (1, 10, 0), (2, 20, 0), (3, 30, 0), (4, 40, 0), (5, 50, 0)",
            f"INSERT INTO `{db}`.k VALUES (1, 1), (2, 1), (2, 2)",
            f"INSERT INTO `{db}`.m VALUES (1, 30), (2, 20)",
            f"INSERT INTO `{db}`.c VALUES (11, 1, 20, 'a'), (12, 1, NULL, 'b'), (21, 2, 10, 'c'), (31, 3, 30, 'd')",
            f"INSERT INTO `{db}`.g VALUES (111, 11), (112, 11), (121, 12), (211, 21)",
            f"INSERT INTO `{db}`.n VALUES (1001, 1), (1002, 2), (1005, 5)",
        ],
    )
    mirror = DeltaMirror(root)
    run_caught_up(conn, config, None, mirror)
    _assert_equal(mirror, conn, db, "the first batch")

    # three levels (p -> c -> g) deleted, n.pid and c.pu (21 referenced p1.u) set NULL
    _run(conn, [f"DELETE FROM `{db}`.p WHERE id = 1", f"DELETE FROM `{db}`.tree WHERE id = 1"])  # tree: to itself
    run_caught_up(conn, config, None, mirror)
    _assert_equal(mirror, conn, db, "a cascading DELETE")
    assert _rows_of_mirror(mirror, db, "c", ["id", "pu"]) == [(21, None), (31, 30)]
    assert _rows_of_mirror(mirror, db, "tree", ["id"]) == [(4,)]

    mirror.close()
    mirror = DeltaMirror(root)  # a restart between batches: the children are found in the mirror as it is
    _run(
        conn,
        [
            f"UPDATE `{db}`.p SET id = 22 WHERE id = 2",  # ON UPDATE CASCADE of the primary key: c21.pid, n1002.pid
            f"UPDATE `{db}`.p SET u = 33 WHERE id = 3",  # of a unique non-primary key: c31.pu; the key kept
            f"UPDATE `{db}`.p SET v = 7 WHERE id = 4",  # nothing referenced changed
        ],
    )
    run_caught_up(conn, config, None, mirror)
    _assert_equal(mirror, conn, db, "cascading UPDATEs")
    assert _rows_of_mirror(mirror, db, "c", ["id", "pid", "pu"]) == [(21, 22, None), (31, 3, 33)]
    assert _rows_of_mirror(mirror, db, "k", ["pid", "id"]) == [(22, 1), (22, 2)]
    assert _rows_of_mirror(mirror, db, "m", ["id", "pu"]) == [(1, None), (2, 20)]

    _run(conn, ["START TRANSACTION"])
    _run(
        conn,
        [
            f"INSERT INTO `{db}`.c VALUES (32, 3, NULL, 'new')",  # a child the batch itself makes ...
            f"INSERT INTO `{db}`.g VALUES (321, 32)",
            f"DELETE FROM `{db}`.p WHERE id = 3",  # ... gone with its parent, grandchild too
            f"INSERT INTO `{db}`.p VALUES (3, 30, 1)",
            f"INSERT INTO `{db}`.c VALUES (33, 3, NULL, 'after')",  # a child made after the cascade stays
            f"DELETE FROM `{db}`.p WHERE id = 4",  # no child row: nothing to do, no stop
        ],
    )
    _run(conn, ["COMMIT"])
    run_caught_up(conn, config, None, mirror)
    _assert_equal(mirror, conn, db, "a child inserted and its parent deleted in one transaction")
    assert _rows_of_mirror(mirror, db, "c", ["id"]) == [(21,), (33,)]

    _run(
        conn,
        [
            f"ALTER TABLE `{db}`.n DROP FOREIGN KEY fn",
            f"DELETE FROM `{db}`.p WHERE id = 5",  # no key: n1005 keeps its pid
            f"UPDATE `{db}`.n SET pid = 22 WHERE id = 1005",
            f"ALTER TABLE `{db}`.n ADD CONSTRAINT fn2 FOREIGN KEY (pid) REFERENCES `{db}`.p (id) ON DELETE CASCADE",
            f"DELETE FROM `{db}`.p WHERE id = 22",  # now a CASCADE: n1002 and n1005 go, c21 and its g211 too
        ],
    )
    run_caught_up(conn, config, None, mirror)
    _assert_equal(mirror, conn, db, "DROP / ADD FOREIGN KEY")
    assert _rows_of_mirror(mirror, db, "n", ["id"]) == [(1001,)]
    mirror.close()


def test_a_child_inserted_and_cascaded_away_in_one_batch_is_gone(mariadb: MariaDBDatabase, tmp_path: Path) -> None:
    db = mariadb.database
    conn = mariadb.connect(autocommit=True)
    config = _config(mariadb, tmp_path, master_position(conn))
    _run(
        conn,
        [
            f"CREATE TABLE `{db}`.p (id INT PRIMARY KEY)",
            f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, pid INT, FOREIGN KEY (pid) REFERENCES `{db}`.p (id) "
            "ON DELETE CASCADE)",
            f"INSERT INTO `{db}`.p VALUES (1), (2)",
            f"INSERT INTO `{db}`.t VALUES (1, 1), (2, 2)",
            f"DELETE FROM `{db}`.p WHERE id = 1",
        ],
    )
    # copy_on_write groups a batch's changes by their keys' text: the cascaded DELETE once spelt its key with spaces
    # (found by test_differential_mirror_transactions_mariadb), so the row inserted earlier in the batch survived
    mirror = DeltaMirror(tmp_path / "mirror", mode="copy_on_write")
    try:
        run_caught_up(conn, config, None, mirror, batch_size=500)  # every statement in one batch
        assert _rows_of_mirror(mirror, db, "t", ["id", "pid"]) == [(2, 2)]
    finally:
        mirror.close()
