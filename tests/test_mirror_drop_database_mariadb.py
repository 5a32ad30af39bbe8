"""``DROP DATABASE`` followed by the schema history, the entries and the Delta mirror on a real MariaDB (issue 64
item 3): every table of the database goes -- the history forgets them (rows named by it, MINIMAL row metadata), the
entry says so (ERASE, the database as its schema), and the mirror drops every table it holds of that database in
order with the rest of the batch, so a table created again holds only its new rows and one not created again is no
longer mirrored (``CREATE OR REPLACE DATABASE`` too). Database names that need quoting and differ only in case are two
databases. Change rows and typed batches alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("deltalake")

from canal.config import InstanceConfig, MasterConfig, StoreConfig
from canal.schema.history import FileHistoryStore, SchemaHistory
from canal.spark import DeltaMirror, compare
from canal.spark.testing import master_position, run_caught_up
from canal.testing.plugin import MariaDBFactory

pytestmark = pytest.mark.integration

UPPER, LOWER = "Shop 1", "shop 1"  # two databases on a server that keeps names' case


def _tables(conn: Any) -> list[tuple[str, str]]:
    with conn.cursor() as cur:
        cur.execute("SELECT table_schema, table_name FROM information_schema.tables")
        return sorted((str(s), str(t)) for s, t in cur.fetchall() if s in (UPPER, LOWER))  # compared as Python does


@pytest.mark.parametrize("path", ["rows", "typed"])
def test_drop_database_is_followed_by_the_history_the_entries_and_the_mirror(
    mariadb_factory: MariaDBFactory, tmp_path: Path, path: str
) -> None:
    server = mariadb_factory(extra_args=["--binlog-row-metadata=MINIMAL"])  # rows named by the schema history
    conn = server.connect(autocommit=True)
    journal, position = master_position(conn)
    config = InstanceConfig(
        destination="dropdb",
        master=MasterConfig(
            address=server.address,
            username=server.user,
            password=server.password,
            journal_name=journal,
            position=position,
        ),
        filter_regex=r"Shop 1\..*,shop 1\..*",
        store=StoreConfig(batch_mode="ITEMSIZE"),
        meta_mode="file",
        meta_dir=str(tmp_path / "meta"),
    )
    mirror = DeltaMirror(tmp_path / "mirror")
    types: list[tuple[str, str]] = []

    def apply(rows: Any, batch_id: int) -> None:
        types.extend(
            (kind, sql)
            for kind, sql in zip(rows.column("type").to_pylist(), rows.column("sql").to_pylist(), strict=True)
            if sql
        )
        mirror.apply(rows, batch_id)

    def batch(*statements: str) -> None:
        with conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql)
        run_caught_up(conn, config, None, apply if path == "rows" else mirror, batch_size=100_000)
        assert sorted(mirror.tables()) == _tables(conn)
        for schema, table in _tables(conn):
            with conn.cursor() as cur:
                cur.execute(f"SELECT * FROM `{schema}`.`{table}`")
                names = [d[0] for d in cur.description]
                rows = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
            result = compare(mirror.read(schema, table), rows, ["id"], name=f"{schema}.{table}")
            assert result.equal, str(result)

    batch(
        f"CREATE DATABASE `{UPPER}`",
        f"CREATE DATABASE `{LOWER}`",
        f"CREATE TABLE `{UPPER}`.t (id INT PRIMARY KEY, v INT)",
        f"CREATE TABLE `{UPPER}`.u (id INT PRIMARY KEY)",
        f"CREATE TABLE `{LOWER}`.t (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO `{UPPER}`.t VALUES (1, 1), (2, 2)",
        f"INSERT INTO `{UPPER}`.u VALUES (1)",
        f"INSERT INTO `{LOWER}`.t VALUES (1, 10)",
    )
    batch(
        f"INSERT INTO `{UPPER}`.t VALUES (3, 3)",
        f"CREATE TABLE `{UPPER}`.made (id INT PRIMARY KEY)",
        f"INSERT INTO `{UPPER}`.made VALUES (1)",
        f"DROP DATABASE `{UPPER}`",
        f"CREATE DATABASE `{UPPER}`",
        # another layout under the old name: the history must hold the new one to name MINIMAL rows
        f"CREATE TABLE IF NOT EXISTS `{UPPER}`.t (id INT PRIMARY KEY, note VARCHAR(5))",
        f"INSERT INTO `{UPPER}`.t VALUES (9, 'new')",
        f"INSERT INTO `{LOWER}`.t VALUES (2, 20)",
    )
    assert _tables(conn) == [(UPPER, "t"), (LOWER, "t")]
    # MariaDB's CREATE OR REPLACE DATABASE drops the database's tables too
    batch(f"CREATE OR REPLACE DATABASE `{UPPER}`", f"CREATE TABLE `{UPPER}`.t (id INT PRIMARY KEY, v INT)")
    batch(f"INSERT INTO `{UPPER}`.t VALUES (1, 1)")
    batch(
        f"DROP SCHEMA IF EXISTS `{UPPER}`",
        f"DROP DATABASE IF EXISTS `{UPPER}`",
        f"INSERT INTO `{LOWER}`.t VALUES (3, 30)",
    )
    assert _tables(conn) == [(LOWER, "t")]

    history = SchemaHistory(FileHistoryStore(tmp_path / "meta" / "dropdb" / "schema_history.json"))
    assert history.table(UPPER, "t") is None and history.table(UPPER, "u") is None
    assert history.table(LOWER, "t") is not None
    if path == "rows":  # the entries say the database's tables went
        assert [kind for kind, sql in types if "DATABASE" in sql and "DROP" in sql] == ["ERASE"] * 2
