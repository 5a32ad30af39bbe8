"""The query filter flags (canal's ``filter.query.dml`` / ``filter.query.ddl``) choose which statements are delivered,
not what a copy follows: on a real MariaDB, a statement that heals -- DML logged as a statement, an ALTER whose
conversion a copy cannot repeat -- reaches the consumer with its ``HEAL`` mark whatever the flags say, and a mirror
kept from the entries ends equal to ``SELECT``."""

from __future__ import annotations

from pathlib import Path

import pytest

from canal.config import FilterFlags, InstanceConfig, StoreConfig
from canal.instance import Instance
from canal.testing.plugin import MariaDBDatabase

pytest.importorskip("deltalake")

from canal.spark import DeltaMirror, run_batches
from canal.spark.testing import compare_tables, healed_by, master_position

pytestmark = pytest.mark.integration

_HEALS = {
    # DML logged as a statement: the rows it deleted are not in the binlog
    "dml": ("SET SESSION binlog_format = 'STATEMENT'", "DELETE FROM t WHERE MOD(id, 3) = 0"),
    # a column whose values the server computes per row: a copy cannot repeat them
    "ddl": ("SET SESSION binlog_format = 'ROW'", "ALTER TABLE t ADD COLUMN g INT AS (id * 2) PERSISTENT"),
}


@pytest.mark.parametrize("flag", ["dml", "ddl"])
def test_a_heal_reaches_the_consumer_whatever_the_query_filter_flags(
    mariadb: MariaDBDatabase, tmp_path: Path, flag: str
) -> None:
    conn = mariadb.connect(autocommit=True)
    start = master_position(conn)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
        cur.execute("INSERT INTO t SELECT seq, 'x' FROM seq_1_to_200")
    config = InstanceConfig(
        destination=f"flags{flag}",
        master=mariadb.master(start),
        filter_regex=rf"{mariadb.database}\.t",
        filter_flags=FilterFlags(query_dml=flag == "dml", query_ddl=flag == "ddl"),
        store=StoreConfig(batch_mode="ITEMSIZE"),
        meta_mode="file",
        meta_dir=str(tmp_path / "meta"),
    )
    mirror = DeltaMirror(tmp_path / "mirror")
    journal = tmp_path / "journal"
    with Instance(config) as inst:
        run_batches(inst, None, mirror, timeout=0.2, journal=journal, until=healed_by(inst, master_position(conn)))
        session, statement = _HEALS[flag]
        with conn.cursor() as cur:
            cur.execute(session)
            cur.execute(statement)
            cur.execute("SET SESSION binlog_format = 'ROW'")
            cur.execute("UPDATE t SET v = 'after' WHERE id IN (1, 2, 4)")
        run_batches(inst, None, mirror, timeout=0.2, journal=journal, until=healed_by(inst, master_position(conn)))
        assert inst.metrics().heals == 1
    assert mirror.metrics().heals == 1  # the mirror met the mark and replaced the table there
    [comparison] = compare_tables(conn, mirror, mariadb.database, ["t"])
    assert comparison.equal, str(comparison)
    mirror.close()
    conn.close()
