"""The Delta mirror of a server with ``lower_case_table_names=1`` (issue 43 item 15): its DDL names tables as typed
(``Orders``), its rows as the server keeps them (``orders``); the mirror reads each DDL row's statement with names
folded as the server folds them, so it holds one table per server table, equal to SELECT, in each of its modes.

The private MariaDB needs its own datadir initialised with the setting (``install_args``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("deltalake")

from canal.config import InstanceConfig, StoreConfig
from canal.lake.settings import MODES
from canal.spark import DeltaMirror
from canal.spark.testing import run_caught_up
from canal.testing.plugin import MariaDBFactory

pytestmark = pytest.mark.integration

_LOWER = "--lower-case-table-names=1"


def _server_tables(conn: Any) -> list[str]:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT CONCAT(table_schema, '.', table_name) FROM information_schema.tables"
            " WHERE table_schema IN ('shop', 'other') ORDER BY 1"
        )
        return [row[0] for row in cur.fetchall()]


def _rows(conn: Any, name: str) -> list[dict[str, Any]]:
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM {name}")
        columns = [d[0] for d in cur.description]
        return sorted((dict(zip(columns, row, strict=True)) for row in cur.fetchall()), key=lambda r: r["Id"])


def test_mixed_case_ddl_mirrors_one_table_per_server_table(mariadb_factory: MariaDBFactory, tmp_path: Path) -> None:
    server = mariadb_factory(install_args=[_LOWER], extra_args=[_LOWER])
    assert server.execute("SELECT @@lower_case_table_names")[0][0] == 1
    conn = server.connect()
    master = _master(server)
    mirrors = {mode: DeltaMirror(tmp_path / f"mirror-{mode}", mode=mode) for mode in MODES}
    configs = {
        mode: InstanceConfig(
            destination="lower",
            master=master,
            filter_regex=r"shop\..*,other\..*",
            store=StoreConfig(batch_mode="ITEMSIZE"),
            meta_mode="file",
            meta_dir=str(tmp_path / f"meta-{mode}"),
        )
        for mode in MODES
    }

    def batch(*statements: str) -> None:
        with conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql)
        for mode, mirror in mirrors.items():
            run_caught_up(conn, configs[mode], None, mirror, batch_size=100_000)
            expected = _server_tables(conn)
            assert mirror.table_names() == expected, mode
            for name in expected:
                schema, table = name.split(".")
                mirrored = sorted(mirror.read(schema, table).to_pylist(), key=lambda r: r["Id"])
                assert mirrored == _rows(conn, name), (mode, name)

    try:
        batch(
            "CREATE DATABASE Shop",
            "CREATE DATABASE OTHER",
            "CREATE TABLE Shop.Orders (Id INT PRIMARY KEY, Amount INT)",
            "INSERT INTO shop.orders VALUES (1, 10), (2, 20)",
            "ALTER TABLE SHOP.Orders ADD COLUMN Note VARCHAR(10)",
            "INSERT INTO Shop.ORDERS VALUES (3, 30, 'three')",
        )
        batch(
            "ALTER TABLE Shop.Orders ADD COLUMN Extra INT DEFAULT 7, ADD COLUMN Tag VARCHAR(5) DEFAULT 'AbC'",
            "UPDATE shop.orders SET Amount = 11 WHERE Id = 1",
        )
        batch(
            "CREATE TABLE Shop.Copy LIKE SHOP.Orders",
            "INSERT INTO Shop.Copy SELECT * FROM Shop.Orders WHERE Id < 3",
            "RENAME TABLE Shop.Orders TO Shop.Orders_Old, Shop.Copy TO OTHER.Copied",
            "INSERT INTO Shop.Orders_OLD VALUES (4, 40, NULL, 1, 'Four')",
        )
        batch(
            "ALTER TABLE Other.Copied RENAME TO Shop.Moved",
            "INSERT INTO shop.MOVED VALUES (5, 50, 'five', 2, 'F')",
            "CREATE TABLE Shop.Gone (Id INT PRIMARY KEY)",
            "CREATE TABLE Shop.Also (Id INT PRIMARY KEY)",
            "INSERT INTO Shop.Gone VALUES (1)",
            "INSERT INTO Shop.Also VALUES (1)",
        )
        batch(
            "DROP TABLE Shop.GONE, SHOP.Also",
            "TRUNCATE TABLE Shop.Orders_Old",
            "INSERT INTO Shop.Orders_Old VALUES (9, 90, 'n', 0, 'N')",
        )
        batch("TRUNCATE TABLE SHOP.Moved", "INSERT INTO Shop.Moved VALUES (6, 60, 'six', 3, 'S')")
        assert _server_tables(conn) == ["shop.moved", "shop.orders_old"]
        batch(
            "CREATE TABLE Other.Keep (Id INT PRIMARY KEY)",
            "INSERT INTO OTHER.keep VALUES (1)",
            "DROP DATABASE SHOP",  # every table of shop goes, whatever case the statement names it in
            "CREATE DATABASE Shop",
            "CREATE TABLE IF NOT EXISTS SHOP.Moved (Id INT PRIMARY KEY)",
            "INSERT INTO shop.moved VALUES (7)",
        )
        assert _server_tables(conn) == ["other.keep", "shop.moved"]
    finally:
        for mirror in mirrors.values():
            mirror.close()
        conn.close()


def _master(server: Any) -> Any:
    from canal.config import MasterConfig

    journal, position = server.execute("SHOW MASTER STATUS")[0][:2]
    return MasterConfig(
        address=server.address, username=server.user, password=server.password, journal_name=journal, position=position
    )
