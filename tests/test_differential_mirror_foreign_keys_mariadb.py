"""Randomized differential test of the mirror's foreign-key actions (hypothesis, real MariaDB): random inserts,
deletes and key updates on a parent ``p``, a child ``c`` (ON DELETE CASCADE / ON UPDATE CASCADE to ``p.id``,
ON DELETE SET NULL / ON UPDATE SET NULL to the unique ``p.u``), a grandchild ``g`` (ON DELETE CASCADE / ON UPDATE
CASCADE to ``c.id``) and a tree ``t`` referencing itself (ON DELETE CASCADE), some inside transactions, binlog
rotations (``FLUSH BINARY LOGS`` from another session, a transaction open or not), mirrored by ``DeltaMirror`` in runs
of random batch sizes, a new mirror object each run. Every table must equal ``SELECT *``
after every run.

CI runs a few examples (``PYCANAL_FUZZ_EXAMPLES``, default 20, a quarter of them here); a longer run sets it higher.
A failure prints the SQL and a blob that reproduces it.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pymysql
import pytest
from hypothesis import given, note
from hypothesis import strategies as st
from random_schema_workload import FUZZ_EXAMPLES, fuzz_settings

pytest.importorskip("deltalake")

from capture_configs import capture_config

from canal.config import InstanceConfig
from canal.spark import DeltaMirror
from canal.spark.testing import master_position, run_caught_up
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration

EXAMPLES = max(2, FUZZ_EXAMPLES // 4)
TABLES = ("p", "c", "g", "t")
OPS = ["ins_p", "ins_c", "ins_g", "ins_t", "del_p", "del_c", "del_t", "upd_p_id", "upd_p_u", "upd_c_id", "txn", "run"]
OPS.append("rotate")  # FLUSH BINARY LOGS from another session: between transactions, or while one is open


def test_mirror_follows_random_foreign_key_actions(
    mariadb: MariaDBDatabase, tmp_path_factory: pytest.TempPathFactory
) -> None:
    runs = iter(range(1_000_000))

    @fuzz_settings(EXAMPLES)
    @given(ops=st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 9)), max_size=30), seed=st.integers(0, 2**32))
    def check(ops: list[tuple[str, int]], seed: int) -> None:
        db = f"fk{next(runs)}"
        mariadb.execute(f"DROP DATABASE IF EXISTS `{db}`")
        mariadb.execute(f"CREATE DATABASE `{db}`")
        tmp = tmp_path_factory.mktemp("fkmirror")
        conn = mariadb.connect(autocommit=True)
        try:
            _play(mariadb, conn, db, tmp, ops, random.Random(seed))
        finally:
            conn.close()
            mariadb.execute(f"DROP DATABASE IF EXISTS `{db}`")

    check()


def _play(
    mariadb: MariaDBDatabase, conn: Any, db: str, tmp: Path, ops: list[tuple[str, int]], rng: random.Random
) -> None:
    sql: list[str] = []

    def run(statement: str) -> None:
        sql.append(statement)
        try:
            with conn.cursor() as cur:
                cur.execute(statement)
        except pymysql.err.IntegrityError:
            sql[-1] += "  -- refused"  # a duplicate key, or a child of no parent: the server changed nothing

    config = capture_config(mariadb, tmp / "meta", master_position(conn), "fkfuzz", schema=db)
    run(f"CREATE TABLE `{db}`.mark (id INT AUTO_INCREMENT PRIMARY KEY)")
    run(f"CREATE TABLE `{db}`.p (id INT PRIMARY KEY, u INT UNIQUE, v INT)")
    run(
        f"CREATE TABLE `{db}`.c (id INT PRIMARY KEY, pid INT, pu INT, "
        f"FOREIGN KEY (pid) REFERENCES `{db}`.p (id) ON DELETE CASCADE ON UPDATE CASCADE, "
        f"FOREIGN KEY (pu) REFERENCES `{db}`.p (u) ON DELETE SET NULL ON UPDATE SET NULL)"
    )
    run(
        f"CREATE TABLE `{db}`.g (id INT PRIMARY KEY, cid INT, "
        f"FOREIGN KEY (cid) REFERENCES `{db}`.c (id) ON DELETE CASCADE ON UPDATE CASCADE)"
    )
    run(
        f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, up INT, "
        f"FOREIGN KEY (up) REFERENCES `{db}`.t (id) ON DELETE CASCADE)"
    )
    serial = iter(range(100, 1_000_000))
    in_txn = False
    for kind, x in ops:
        n = next(serial)
        if kind == "ins_p":
            run(f"INSERT INTO `{db}`.p VALUES ({x}, {x * 10}, {n})")
        elif kind == "ins_c":
            run(
                f"INSERT INTO `{db}`.c VALUES ({10 + x}, {rng.choice([x, x // 2, 'NULL'])}, "
                f"{rng.choice([x * 10, 'NULL'])})"
            )
        elif kind == "ins_g":
            run(f"INSERT INTO `{db}`.g VALUES ({n}, {10 + x})")
        elif kind == "ins_t":
            run(f"INSERT INTO `{db}`.t VALUES ({x}, {rng.choice(['NULL', x // 2, x - 1])})")
        elif kind == "del_p":
            run(f"DELETE FROM `{db}`.p WHERE id {rng.choice(['=', '<=', '>='])} {x}")
        elif kind == "del_c":
            run(f"DELETE FROM `{db}`.c WHERE id = {10 + x}")
        elif kind == "del_t":
            run(f"DELETE FROM `{db}`.t WHERE id = {x}")
        elif kind == "upd_p_id":
            run(f"UPDATE `{db}`.p SET id = id + 20 WHERE id = {x}")
        elif kind == "upd_p_u":
            run(f"UPDATE `{db}`.p SET u = u + 1, v = v + 1 WHERE id = {x}")
        elif kind == "upd_c_id":
            run(f"UPDATE `{db}`.c SET id = id + 20 WHERE id = {10 + x}")
        elif kind == "txn":
            run("COMMIT" if in_txn else "START TRANSACTION")
            in_txn = not in_txn
        elif kind == "rotate":
            sql.append("FLUSH BINARY LOGS  -- another session")
            mariadb.execute("FLUSH BINARY LOGS")
        elif kind == "run" and not in_txn:
            _mirror_and_compare(mariadb, conn, db, tmp, config, sql, rng)
    if in_txn:
        run("COMMIT")
    _mirror_and_compare(mariadb, conn, db, tmp, config, sql, rng)


def _mirror_and_compare(
    mariadb: MariaDBDatabase, conn: Any, db: str, tmp: Path, config: InstanceConfig, sql: list[str], rng: random.Random
) -> None:
    note("SQL:\n" + ";\n".join(sql))
    with conn.cursor() as cur:  # a committed row last: the run ends at an entry
        cur.execute(f"INSERT INTO `{db}`.mark VALUES ()")
    mirror = DeltaMirror(tmp / "mirror")  # a restart: only what is on disk carries over
    try:
        run_caught_up(conn, config, None, mirror, batch_size=rng.choice([1, 3, 7, 500]))
        for table in TABLES:
            with conn.cursor() as cur:
                cur.execute(f"SELECT * FROM `{db}`.`{table}`")
                columns = [d[0] for d in cur.description]
                want = sorted(tuple(r) for r in cur.fetchall())
            path = mirror.table_path(db, table)
            rows = mirror.read(db, table).to_pylist() if path.exists() else []
            got = sorted(tuple(r[c] for c in columns) for r in rows)
            assert got == want, f"{table}: mirror {got} != source {want}"
    finally:
        mirror.close()
