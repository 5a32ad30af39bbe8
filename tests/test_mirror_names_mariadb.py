"""Names as the server spells them, and the DDL forms that name several tables, mirrored against a private MariaDB
through ``run_batches`` (no JVM), in each of the mirror's modes:

* ``DROP TABLE a, b`` drops both mirror tables;
* ``CREATE OR REPLACE TABLE b LIKE a`` / ``... (columns)`` / ``... SELECT``: b holds what the server's b holds, not
  its old rows (the SELECT form waits for its statement to reach the mirror: issue 43 item 6);
* table and database names holding dots, slashes, ``..``, ``%20``, spaces, ``#``, backticks, non-ASCII letters and
  differing case: each its own directory, inside the mirror root, listed by ``table_names()`` as the server spells
  it, readable by deltalake and Polars (:mod:`canal.lake.store.names`);
* column names holding a backtick, quotes, dots, spaces and non-ASCII letters: every MERGE, fold and DDL works.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pymysql
import pytest

pytest.importorskip("deltalake")

from canal.config import InstanceConfig, StoreConfig
from canal.lake.settings import MODES
from canal.spark import DeltaMirror, MirrorMode
from canal.spark.testing import run_caught_up
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration

PREFIX = "h3n"  # every database of these tests starts with it (the instance's filter)


def ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


class Source:
    def __init__(self, db: MariaDBDatabase, tmp_path: Path, mode: MirrorMode, databases: list[str]) -> None:
        self.mode: MirrorMode = mode
        self.server = db
        self.databases = databases
        for name in databases:
            db.execute(f"DROP DATABASE IF EXISTS {ident(name)}")
            db.execute(f"CREATE DATABASE {ident(name)}")
        master = db.master()
        self.config = InstanceConfig(
            destination="names",
            master=master,
            filter_regex=rf"{PREFIX}.*",
            store=StoreConfig(batch_mode="ITEMSIZE"),
            meta_mode="file",
            meta_dir=str(tmp_path / "meta"),
        )
        self.conn = db.connect()
        self.root = tmp_path / "mirror"
        self.mirror = DeltaMirror(self.root, mode=mode)

    def close(self) -> None:
        self.mirror.close()
        self.conn.close()
        for name in self.databases:
            self.server.execute(f"DROP DATABASE IF EXISTS {ident(name)}")

    def batch(self, *statements: str) -> None:
        """The statements, then the mirror caught up in one batch."""
        with self.conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql)
        self.conn.commit()
        run_caught_up(self.conn, self.config, None, self.mirror, batch_size=100_000)

    def select(self, schema: str, table: str) -> list[dict[str, Any]]:
        with self.conn.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute(f"SELECT * FROM {ident(schema)}.{ident(table)}")
            return list(cur.fetchall())

    def assert_equal(self, schema: str, table: str, key: str = "id") -> None:
        rows = self.select(schema, table)
        mirrored = self.mirror.read(schema, table).to_pylist()
        assert sorted(mirrored, key=lambda r: r[key]) == sorted(rows, key=lambda r: r[key]), f"{schema}.{table}"

    def inside_root(self) -> None:
        """Nothing the mirror wrote lies outside its root."""
        outside = [p for p in self.root.parent.iterdir() if p.name not in ("mirror", "meta")]
        assert outside == [], outside


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> MirrorMode:
    mode: MirrorMode = request.param
    return mode


def test_drop_table_of_two_tables_drops_both_mirror_tables(
    mariadb: MariaDBDatabase, tmp_path: Path, mode: MirrorMode
) -> None:
    db = f"{PREFIX}drop"
    source = Source(mariadb, tmp_path, mode, [db])
    try:
        source.batch(
            f"CREATE TABLE {db}.a (id INT PRIMARY KEY)",
            f"CREATE TABLE {db}.b (id INT PRIMARY KEY)",
            f"CREATE TABLE {db}.c (id INT PRIMARY KEY)",
            f"INSERT INTO {db}.a VALUES (1)",
            f"INSERT INTO {db}.b VALUES (2)",
            f"INSERT INTO {db}.c VALUES (3)",
        )
        assert source.mirror.table_names() == [f"{db}.a", f"{db}.b", f"{db}.c"]
        source.batch(f"DROP TABLE {db}.a, {db}.b")
        assert source.mirror.table_names() == [f"{db}.c"]
        # rows, a drop of two in one statement and rows again, in one batch
        source.batch(
            f"CREATE TABLE {db}.a (id INT PRIMARY KEY)",
            f"INSERT INTO {db}.a VALUES (4)",
            f"INSERT INTO {db}.c VALUES (5)",
            f"DROP TABLE IF EXISTS {db}.c, {db}.nothing, {db}.a",
            f"CREATE TABLE {db}.c (id INT PRIMARY KEY)",
            f"INSERT INTO {db}.c VALUES (6)",
        )
        assert source.mirror.table_names() == [f"{db}.c"]
        source.assert_equal(db, "c")
    finally:
        source.close()


def test_create_or_replace_table_replaces_the_mirror_table(
    mariadb: MariaDBDatabase, tmp_path: Path, mode: MirrorMode
) -> None:
    db = f"{PREFIX}replace"
    source = Source(mariadb, tmp_path, mode, [db])
    try:
        source.batch(
            f"CREATE TABLE {db}.a (id INT PRIMARY KEY, x VARCHAR(10))",
            f"CREATE TABLE {db}.b (id INT PRIMARY KEY, old INT)",
            f"INSERT INTO {db}.a VALUES (1, 'a1'), (2, 'a2')",
            f"INSERT INTO {db}.b VALUES (1, 10), (7, 70)",
        )
        source.batch(f"CREATE OR REPLACE TABLE {db}.b LIKE {db}.a")
        assert source.mirror.read(db, "b").num_rows == 0
        assert source.mirror.read(db, "b").column_names == ["id", "x"]
        source.batch(f"INSERT INTO {db}.b VALUES (3, 'b3')")
        source.assert_equal(db, "b")
        source.batch(
            f"CREATE OR REPLACE TABLE {db}.b (id INT PRIMARY KEY, y INT)", f"INSERT INTO {db}.b VALUES (4, 40)"
        )
        source.assert_equal(db, "b")
        source.batch(f"INSERT INTO {db}.b VALUES (9, 40)", f"CREATE OR REPLACE TABLE {db}.b LIKE {db}.a")
        assert source.mirror.read(db, "b").num_rows == 0
        source.assert_equal(db, "a")
    finally:
        source.close()


def test_create_or_replace_table_select_replaces_the_mirror_table(
    mariadb: MariaDBDatabase, tmp_path: Path, mode: MirrorMode
) -> None:
    db = f"{PREFIX}select"
    source = Source(mariadb, tmp_path, mode, [db])
    try:
        source.batch(
            f"CREATE TABLE {db}.a (id INT PRIMARY KEY, x VARCHAR(10))",
            f"CREATE TABLE {db}.b (id INT PRIMARY KEY, old INT)",
            f"INSERT INTO {db}.a VALUES (1, 'a1'), (2, 'a2')",
            f"INSERT INTO {db}.b VALUES (1, 10), (7, 70)",
        )
        source.batch(f"CREATE OR REPLACE TABLE {db}.b (PRIMARY KEY (id)) SELECT id, x FROM {db}.a")
        source.assert_equal(db, "b")
    finally:
        source.close()


ODD_DATABASES = [f"{PREFIX}D", f"{PREFIX}D.x", f"{PREFIX}ü #%20", f"{PREFIX}d"]


def test_table_names_map_to_their_own_directories_inside_the_root(
    mariadb: MariaDBDatabase, tmp_path: Path, mode: MirrorMode
) -> None:
    import polars as pl

    d, dx, odd, lower = ODD_DATABASES
    source = Source(mariadb, tmp_path, mode, ODD_DATABASES)
    tables = [
        (d, "x.y"),
        (dx, "y"),
        (d, "a"),
        (d, "a/b"),
        (d, "x/../../escaped"),
        (d, "a%20b"),
        (d, "a b"),
        (odd, "Ωμέγα#1"),
        (odd, "t`q"),
        (d, "Orders"),
        (d, "orders"),
        (lower, "orders"),
    ]
    try:
        statements = []
        for n, (schema, table) in enumerate(tables):
            statements.append(f"CREATE TABLE {ident(schema)}.{ident(table)} (id INT PRIMARY KEY, n INT)")
            statements.append(f"INSERT INTO {ident(schema)}.{ident(table)} VALUES ({n}, {n * 10})")
        source.batch(*statements)
        source.inside_root()
        assert source.mirror.table_names() == sorted(f"{s}.{t}" for s, t in tables)
        for schema, table in tables:
            source.assert_equal(schema, table)
            path = source.mirror.table_path(schema, table)
            assert path.parent == source.root
            assert pl.read_delta(str(path)).to_dicts() == source.select(schema, table) or mode == "merge_on_read"
        source.batch(f"DROP TABLE {ident(d)}.a", f"UPDATE {ident(d)}.{ident('a/b')} SET n = n + 1")
        assert f"{d}.a" not in source.mirror.table_names()
        source.assert_equal(d, "a/b")
        source.batch(
            f"RENAME TABLE {ident(d)}.{ident('x.y')} TO {ident(dx)}.{ident('z/..')}, "
            f"{ident(dx)}.y TO {ident(d)}.{ident('x.y')}",
            f"INSERT INTO {ident(dx)}.{ident('z/..')} VALUES (100, 1)",
        )
        source.assert_equal(dx, "z/..")
        source.assert_equal(d, "x.y")
        source.inside_root()
        # the mirror's state read anew by another mirror object on the root
        again = DeltaMirror(source.root, mode=mode)
        assert again.table_names() == source.mirror.table_names()
        assert f"{dx}.z/.." in again.table_names()
        folded = source.mirror.fold() if mode == "merge_on_read" else []
        assert len(folded) == len(source.mirror.table_names()) or mode == "copy_on_write"
        for name in again.table_names():
            schema, table = next((s, t) for s, t in [*tables, (dx, "z/..")] if f"{s}.{t}" == name)
            assert pl.read_delta(str(again.table_path(schema, table))).sort("id").to_dicts() == sorted(
                source.select(schema, table), key=lambda r: r["id"]
            )
    finally:
        source.close()


def test_odd_column_names_are_merged_folded_and_altered(
    mariadb: MariaDBDatabase, tmp_path: Path, mode: MirrorMode
) -> None:
    db = f"{PREFIX}cols"
    source = Source(mariadb, tmp_path, mode, [db])
    key, other = "k`ey", 'v"a.l ü'
    try:
        source.batch(
            f"CREATE TABLE {db}.t ({ident(key)} INT PRIMARY KEY, {ident(other)} VARCHAR(10), `it's` INT)",
            f"INSERT INTO {db}.t VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', 3)",
        )
        source.batch(
            f"UPDATE {db}.t SET {ident(other)} = 'B' WHERE {ident(key)} = 2", f"DELETE FROM {db}.t WHERE `it's` = 3"
        )
        source.assert_equal(db, "t", key)
        source.mirror.fold()
        source.batch(
            f"ALTER TABLE {db}.t ADD COLUMN {ident('n`ew')} INT NOT NULL DEFAULT 5",
            f"INSERT INTO {db}.t VALUES (4, 'd', 4, 6)",
            f"ALTER TABLE {db}.t RENAME COLUMN {ident(other)} TO {ident('w`x')}",
            f"UPDATE {db}.t SET {ident('n`ew')} = 9 WHERE {ident(key)} = 1",
        )
        source.assert_equal(db, "t", key)
        source.mirror.wait_for_folds()
        assert source.mirror.fold_errors == []
        source.mirror.fold()
        source.assert_equal(db, "t", key)
    finally:
        source.close()


def test_odd_names_mirrored_by_spark_tasks_read_back_through_spark_and_polars(
    mariadb: MariaDBDatabase, tmp_path: Path, spark: Any
) -> None:
    """The same names through a SparkSession: each table's part of a batch written (and folded) by Spark tasks,
    which name tables by their directories; read back by ``current_dataframe`` and Polars."""
    import polars as pl

    from canal.spark import current_dataframe, current_polars

    d, dx, odd, _lower = ODD_DATABASES
    source = Source(mariadb, tmp_path, "merge_on_read", ODD_DATABASES)
    tables = [(d, "x.y"), (dx, "y"), (d, "a/b"), (odd, "Ωμέγα #%20"), (d, "Orders"), (d, "orders")]
    key, value = "i.d`", "n`ü v"
    try:
        columns = f"({ident(key)} INT PRIMARY KEY, {ident(value)} INT)"
        source.batch(*(f"CREATE TABLE {ident(s)}.{ident(t)} {columns}" for s, t in tables))  # DDL: by the driver
        for stage_rows in (0, 512):  # each table's part written to its change log, then staged
            source.mirror = DeltaMirror(source.root, fold_ratio=0.01, stage_rows=stage_rows)
            with source.conn.cursor() as cur:
                for n, (schema, table) in enumerate(tables):
                    n += 100 * stage_rows
                    cur.execute(f"INSERT INTO {ident(schema)}.{ident(table)} VALUES ({n}, {n}), ({n + 10}, 1)")
                    where = f"{ident(key)} = {n}"
                    cur.execute(f"UPDATE {ident(schema)}.{ident(table)} SET {ident(value)} = 7 WHERE {where}")
            source.conn.commit()
            run_caught_up(source.conn, source.config, spark, source.mirror, batch_size=100_000)
            source.mirror.wait_for_folds()
        source.inside_root()
        assert source.mirror.table_names() == sorted(f"{s}.{t}" for s, t in tables)
        for schema, table in tables:
            rows = sorted(source.select(schema, table), key=lambda r: r[key])
            path = source.mirror.table_path(schema, table)
            assert sorted((r.asDict() for r in current_dataframe(spark, path).collect()), key=lambda r: r[key]) == rows
            assert current_polars(path).sort(key).to_dicts() == rows
            source.mirror.fold(schema, table)
            assert pl.read_delta(str(path)).sort(key).to_dicts() == rows  # the base, folded: any Delta reader
    finally:
        source.close()
