"""Randomized differential test of the mirror through random DDL and values of every family (hypothesis, real
MariaDB): the schema workload of ``random_schema_workload`` -- ADD / DROP / RENAME / CHANGE / MODIFY column with FIRST
/ AFTER, name swaps, primary-key switches, table renames, swaps, drops and creations, values at their types' limits
(year 0 among them) -- mirrored by ``DeltaMirror`` (a random mode; typed batches, change rows, or Spark's DataFrames)
through ``run_batches`` in two runs of a random batch size, a new mirror object each, under FULL or MINIMAL row
metadata. After each run every live table must equal ``SELECT *`` (values, column set and order), and no other table
may be mirrored.

CI runs a few examples (``PYCANAL_FUZZ_EXAMPLES``, default 20, a quarter of them here); a failure prints the SQL and
a blob that reproduces it.
"""

from __future__ import annotations

import random
from typing import Any

import pymysql
import pytest
from hypothesis import example, given, note
from hypothesis import strategies as st
from random_schema_workload import FUZZ_EXAMPLES, Op, Workload, fuzz_settings, operation

pytest.importorskip("deltalake")

from capture_configs import capture_config

from canal.lake.settings import MODES
from canal.spark import DeltaMirror, compare
from canal.spark.testing import master_position, run_caught_up
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration

EXAMPLES = max(2, FUZZ_EXAMPLES // 4)
MARK = "mark"  # a table of the database the workload never touches (its tables are t<n>)


@pytest.mark.parametrize("path", ["rows", "typed", pytest.param("spark", marks=pytest.mark.spark)])
def test_random_ddl_and_values_mirror_equal_to_select(
    mariadb: MariaDBDatabase, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest, path: str
) -> None:
    spark = request.getfixturevalue("spark") if path == "spark" else None
    runs = iter(range(1_000_000))
    default_metadata = mariadb.execute("SELECT @@GLOBAL.binlog_row_metadata")[0][0]

    @fuzz_settings(EXAMPLES)
    # longer workloads than the capture test's: a mirror's defects show where many rows meet many statements
    @given(
        ops=st.lists(operation, min_size=10, max_size=40),
        cut=st.integers(0, 40),
        mode=st.sampled_from(MODES),
        metadata=st.sampled_from(["FULL", "MINIMAL"]),  # MINIMAL: rows named by the schema history
        seed=st.integers(0, 2**32 - 1),
    )
    # found by this test: a swap of two columns' names and types rewrites the table, and a Spark task's mirror kept
    # the old table open in its Python worker -- its next batch read the new table's log on top of the old one's
    @example(
        ops=[("add", 0, 0, 0), *[("insert", 0, 0, 0)] * 8, ("swap", 0, 0, 11), ("insert", 0, 0, 0)],
        cut=0,
        mode="merge_on_read",
        metadata="FULL",
        seed=0,
    )
    # the server rotates its binlog before and after the mirror's first run ends: the second resumes in an older file
    @example(
        ops=[
            *[("insert", 0, 0, 0)] * 3,
            *[("rotate", 0, 0, 0), ("update", 0, 0, 0), ("add", 0, 0, 0), ("rotate", 0, 0, 0), ("insert", 0, 0, 0)],
            *[("delete", 0, 0, 0), ("rotate", 0, 0, 0), ("insert", 0, 0, 0)],
        ],
        cut=5,
        mode="merge_on_read",
        metadata="MINIMAL",
        seed=0,
    )
    def check(ops: list[Op], cut: int, mode: Any, metadata: str, seed: int) -> None:
        db = f"mm{next(runs)}"
        mariadb.execute(f"DROP DATABASE IF EXISTS `{db}`")
        mariadb.execute(f"CREATE DATABASE `{db}`")
        tmp = tmp_path_factory.mktemp("schema_mirror")
        conn = mariadb.connect()
        mariadb.execute(f"SET GLOBAL binlog_row_metadata = {metadata}")
        try:
            config = capture_config(mariadb, tmp / "meta", master_position(conn), "schemamirror", schema=db)
            mariadb.execute(f"CREATE TABLE `{db}`.`{MARK}` (id INT AUTO_INCREMENT PRIMARY KEY)")
            workload = Workload(conn, db, seed)
            rng = random.Random(seed)
            workload.create_table()
            for part in (ops[:cut], ops[cut:]):
                for kind, a, b, c in part:
                    if not workload.tables:
                        workload.create_table()
                    getattr(workload, "_" + kind)(a, b, c)
                note(f"mode={mode} metadata={metadata} seed={seed}\nSQL:\n" + ";\n".join(workload.sql))
                # a committed row last: the run ends at an entry (the workload may end with DDL, or with a
                # statement the server refused)
                mariadb.execute(f"INSERT INTO `{db}`.`{MARK}` VALUES ()")
                mirror = DeltaMirror(tmp / "mirror", mode=mode)  # a restart: only what is on disk carries over

                def apply(batch: Any, batch_id: int, mirror: DeltaMirror = mirror) -> None:
                    mirror.apply(batch, batch_id)  # not a DeltaMirror: run_batches hands it change rows

                try:
                    target = apply if path == "rows" else mirror  # typed batches, or Spark's change rows
                    run_caught_up(conn, config, spark, target, batch_size=rng.choice([1, 7, 500]))
                    _assert_mirrors(conn, mirror, workload)
                finally:
                    mirror.close()
        finally:
            conn.close()
            mariadb.execute(f"SET GLOBAL binlog_row_metadata = {default_metadata}")
            mariadb.execute(f"DROP DATABASE IF EXISTS `{db}`")

    check()


def _assert_mirrors(conn: Any, mirror: DeltaMirror, workload: Workload) -> None:
    db = workload.db
    for table in workload.tables:
        with conn.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute(f"SELECT * FROM `{db}`.`{table}`")
            names = [d[0] for d in cur.description]
            rows = list(cur.fetchall())
        assert mirror.table_path(db, table).exists(), f"{db}.{table} is not mirrored"
        mirrored = mirror.read(db, table)
        result = compare(mirrored, rows, [workload.key[table]], name=table)
        assert result.equal, str(result)
        assert mirrored.column_names == names, table  # the source's column order
    assert {table for schema, table in mirror.tables() if schema == db} == {*workload.tables, MARK}
