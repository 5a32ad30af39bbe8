"""The Delta mirror follows every kind of DDL and equals the source after each, on a server that logs no column
names (rows named by the schema history, tables evolved by the one DDL code).

Phases on a private MariaDB with ``binlog_row_metadata=MINIMAL``, each read through ``run_batches`` into a
``DeltaMirror`` and then compared with ``SELECT *`` (values, column set and column order): a column added in the
middle; a column renamed with rows written before and after the rename in the same batch; a type widened and a
column renamed and moved by CHANGE; a column dropped; the table renamed; a table created empty; a table dropped and
created again with other columns; a table dropped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pymysql
import pytest

pytest.importorskip("pyspark")
pytest.importorskip("deltalake")

from canal.config import InstanceConfig, MasterConfig, StoreConfig
from canal.spark import DeltaMirror, compare
from canal.spark.testing import run_caught_up
from canal.testing.plugin import MariaDBFactory

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def _select(conn: Any, table: str) -> tuple[list[str], list[dict[str, Any]]]:
    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute(f"SELECT * FROM app.{table}")
        names = [d[0] for d in cur.description]
        return names, list(cur.fetchall())


def _assert_mirrors(conn: Any, mirror: DeltaMirror, tables: dict[str, list[str]], gone: list[str]) -> None:
    for table, key in tables.items():
        names, rows = _select(conn, table)
        path = mirror.table_path("app", table)
        assert path.exists(), f"app.{table} is not mirrored"
        result = compare(path, rows, key, name=table)
        assert result.equal, str(result)
        assert mirror.read("app", table).column_names == names, table  # the source's column order
    for table in gone:
        assert not mirror.table_path("app", table).exists(), f"app.{table} should be gone"


def test_the_mirror_follows_ddl_and_equals_the_source_after_each(
    mariadb_factory: MariaDBFactory, spark: Any, tmp_path: Path
) -> None:
    server = mariadb_factory(extra_args=["--binlog-row-metadata=MINIMAL"])
    server.execute("CREATE DATABASE app")
    journal, position = server.execute("SHOW MASTER STATUS")[0][:2]
    config = InstanceConfig(
        destination="evolve",
        master=MasterConfig(
            address=server.address,
            username=server.user,
            password=server.password,
            journal_name=str(journal),
            position=int(position),
        ),
        filter_regex=r"app\..*",
        store=StoreConfig(batch_mode="ITEMSIZE"),
        meta_mode="file",
        meta_dir=str(tmp_path / "meta"),
    )
    mirror = DeltaMirror(tmp_path / "mirror")
    conn = server.connect("app")

    def run(*statements: str) -> None:
        with conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql)
        run_caught_up(conn, config, spark, mirror, batch_size=10_000)

    run(
        "CREATE TABLE t (id INT NOT NULL PRIMARY KEY, a VARCHAR(10), b INT)",
        "INSERT INTO t VALUES (1, 'one', 10), (2, 'two', 20), (3, 'three', 30)",
    )
    _assert_mirrors(conn, mirror, {"t": ["id"]}, [])

    run("ALTER TABLE t ADD COLUMN c VARCHAR(5) AFTER id", "UPDATE t SET c = 'c1' WHERE id = 1")
    _assert_mirrors(conn, mirror, {"t": ["id"]}, [])

    # rows before and after the rename in one batch: the older images name the old column
    run(
        "INSERT INTO t (id, c, a, b) VALUES (4, 'c4', 'four', 40)",
        "UPDATE t SET a = 'uno' WHERE id = 1",
        "ALTER TABLE t RENAME COLUMN a TO aa",
        "INSERT INTO t (id, c, aa, b) VALUES (5, 'c5', 'five', 50)",
    )
    _assert_mirrors(conn, mirror, {"t": ["id"]}, [])

    run(
        "ALTER TABLE t MODIFY b BIGINT",
        "UPDATE t SET b = 1099511627776 WHERE id = 2",
        "ALTER TABLE t CHANGE b bb DECIMAL(20,2) FIRST",
        "UPDATE t SET bb = 0.5 WHERE id = 3",
    )
    _assert_mirrors(conn, mirror, {"t": ["id"]}, [])

    run("ALTER TABLE t DROP COLUMN c", "DELETE FROM t WHERE id = 4")
    _assert_mirrors(conn, mirror, {"t": ["id"]}, [])

    run("RENAME TABLE t TO t2", "INSERT INTO t2 (id, aa, bb) VALUES (6, 'six', 6)")
    _assert_mirrors(conn, mirror, {"t2": ["id"]}, ["t"])

    run("CREATE TABLE e (id INT NOT NULL PRIMARY KEY, note TEXT)")
    _assert_mirrors(conn, mirror, {"t2": ["id"], "e": ["id"]}, ["t"])

    run(
        "DROP TABLE t2",
        "CREATE TABLE t2 (k VARCHAR(3) NOT NULL PRIMARY KEY, v DOUBLE)",
        "INSERT INTO t2 VALUES ('a', 1.5), ('b', -2)",
    )
    _assert_mirrors(conn, mirror, {"t2": ["k"], "e": ["id"]}, ["t"])

    run("DROP TABLE e")
    _assert_mirrors(conn, mirror, {"t2": ["k"]}, ["t", "e"])
    conn.close()
