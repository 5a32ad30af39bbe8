"""Heals judged on rows inside a prepared XA transaction, on a real MariaDB (``binlog_format=ROW``, a MINIMAL session):
MariaDB logs the transaction at its XA PREPARE and makes it visible at its XA COMMIT, so what a heal reads while it is
prepared lacks its changes, and the Delta mirror applies the prepared entries -- a heal's mark among them -- at the XA
COMMIT. An INSERT that leaves columns to their defaults and a cascade from a parent the filter leaves out (a mark: the
mirror voided the table at the XA COMMIT and kept none of its rows), and an UPDATE of what a VIRTUAL column is
computed from (its row read again while prepared: the VIRTUAL column kept its old value) are read again once the XA
COMMIT is read (canal.parse.xa_heals), and the mirror equals ``SELECT``. (Statements logged as statements inside an
XA transaction: tests/test_statement_reach_mariadb.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from canal.config import InstanceConfig, StoreConfig
from canal.instance import Instance
from canal.testing.plugin import MariaDBDatabase

pytest.importorskip("deltalake")

from canal.spark import DeltaMirror, run_batches
from canal.spark.testing import compare_tables, healed_by, master_position

pytestmark = pytest.mark.integration

SCHEMA = [
    "CREATE TABLE g (id INT PRIMARY KEY, v INT, w VARCHAR(5) DEFAULT 'd', x INT AS (v * 2) VIRTUAL)",
    "INSERT INTO g (id, v) VALUES (1, 1), (2, 2)",
    "CREATE TABLE par (id INT PRIMARY KEY)",
    "INSERT INTO par VALUES (1), (2)",
    "CREATE TABLE ch (id INT PRIMARY KEY, pid INT, FOREIGN KEY (pid) REFERENCES par (id) ON DELETE CASCADE)",
    "INSERT INTO ch VALUES (10, 1), (20, 2)",
]
# what the prepared transaction does, and what is captured (the parent of ch left out)
CASES = {
    "a VIRTUAL column's base updated": ("UPDATE g SET v = 50 WHERE id = 1", "g"),
    "an INSERT leaving defaults": ("INSERT INTO g (id, v) VALUES (3, 3)", "g"),
    "a cascade from a parent left out": ("DELETE FROM par WHERE id = 1", "ch"),
}


def _execute(conn: Any, *statements: str) -> None:
    with conn.cursor() as cur:
        for sql in statements:
            cur.execute(sql)


@pytest.mark.parametrize("case", list(CASES))
def test_a_heal_inside_a_prepared_xa_transaction_reads_again_after_its_xa_commit(
    mariadb: MariaDBDatabase, tmp_path: Path, case: str
) -> None:
    db = mariadb.database
    statement, table = CASES[case]
    conn = mariadb.connect(autocommit=True)
    session = mariadb.connect(autocommit=True)
    mirror = DeltaMirror(tmp_path / "mirror")
    try:
        start = master_position(conn)
        _execute(conn, f"USE `{db}`", *SCHEMA)
        minimal = ("SET SESSION binlog_format = 'ROW'", "SET SESSION binlog_row_image = 'MINIMAL'")
        _execute(session, f"USE `{db}`", *minimal, "XA START 'x'", statement, "XA END 'x'", "XA PREPARE 'x'")
        config = InstanceConfig(
            destination="xa",
            master=mariadb.master(start),
            filter_regex=rf"{db}\.{table}",
            store=StoreConfig(batch_mode="ITEMSIZE"),
            meta_mode="file",
            meta_dir=str(tmp_path / "meta"),
        )
        journal = tmp_path / "journal.json"
        with Instance(config) as inst:
            run_batches(inst, None, mirror, timeout=0.5, until=healed_by(inst, master_position(conn)), journal=journal)
            _execute(session, "XA COMMIT 'x'")
            run_batches(inst, None, mirror, timeout=0.5, until=healed_by(inst, master_position(conn)), journal=journal)
        for comparison in compare_tables(conn, mirror, db, [table]):
            assert comparison.equal, str(comparison)
    finally:
        mirror.close()
        session.close()
        conn.close()
