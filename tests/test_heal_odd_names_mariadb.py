"""Heals of tables whose database or table names hold dots, backquotes, quotes and non-ASCII letters, on a real
MariaDB: the heal reads the table it names (never a name split at a dot), the mirror voids and rebuilds that table,
and ends equal to ``SELECT``."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from canal.config import InstanceConfig, StoreConfig
from canal.instance import Instance
from canal.sql import quote_name
from canal.testing.plugin import MariaDBDatabase

pytest.importorskip("deltalake")

from canal.spark import DeltaMirror, run_batches
from canal.spark.testing import compare_tables, healed_by, master_position

pytestmark = pytest.mark.integration


def _heal_in(mariadb: MariaDBDatabase, tmp_path: Path, schema: str, table: str) -> None:
    """A table under odd names, mirrored; a statement-logged DELETE heals it; the mirror ends equal to SELECT."""
    conn = mariadb.connect(autocommit=True)
    name = f"{quote_name(schema)}.{quote_name(table)}"
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {quote_name(schema)}")
            start = master_position(conn)
            cur.execute(f"CREATE TABLE {name} (id INT PRIMARY KEY, v VARCHAR(10))")
            cur.execute(f"INSERT INTO {name} SELECT seq, 'x' FROM seq_1_to_300")
        config = InstanceConfig(
            destination="oddnames",
            master=mariadb.master(start),
            store=StoreConfig(batch_mode="ITEMSIZE"),
            meta_mode="file",
            meta_dir=str(tmp_path / "meta"),
        )
        mirror = DeltaMirror(tmp_path / "mirror")
        journal = tmp_path / "journal"
        with Instance(config) as inst:
            run_batches(inst, None, mirror, timeout=0.2, journal=journal, until=healed_by(inst, master_position(conn)))
            with conn.cursor() as cur:
                cur.execute("SET SESSION binlog_format = 'STATEMENT'")
                cur.execute(f"DELETE FROM {name} WHERE MOD(id, 3) = 0")
                cur.execute("SET SESSION binlog_format = 'ROW'")
            end = master_position(conn)
            gave_up = threading.Event()
            timer = threading.Timer(90, gave_up.set)
            timer.start()
            try:
                run_batches(inst, None, mirror, timeout=0.2, journal=journal, until=healed_by(inst, end), stop=gave_up)
            finally:
                timer.cancel()
            assert not gave_up.is_set(), "the heal did not end"
            assert inst.metrics().heals == 1
        [comparison] = compare_tables(conn, mirror, schema, [table])
        assert comparison.equal, str(comparison)
        mirror.close()
    finally:
        if schema != mariadb.database:
            with conn.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS {quote_name(schema)}")
        conn.close()


@pytest.mark.parametrize(
    ("schema_suffix", "table"),
    [(".eu", "t"), ("", "t.x"), ("`q'\"", "tä.`b`"), ("é.ü", "名前.1")],
)
def test_a_heal_of_a_table_under_odd_names_ends_equal(
    mariadb: MariaDBDatabase, tmp_path: Path, schema_suffix: str, table: str
) -> None:
    _heal_in(mariadb, tmp_path, f"{mariadb.database}{schema_suffix}", table)
