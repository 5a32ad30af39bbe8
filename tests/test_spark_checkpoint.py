"""A new checkpoint location on an existing mirror, started from an older position, as the production report had
it: the same mirror root, a new checkpoint and destination meta, micro-batches of at most 500 rows, a DDL, deletes
and updates in the range the mirror already holds. Its batch ids start at 0 again, and its first micro-batches bring
changes the mirror has: they are skipped row by row (canal.lake.identity.admit), never applied again -- no deleted row
comes back, none reverts, no schema mismatch -- and its later ones apply exactly what the mirror lacks. The query from
the old checkpoint then goes on exactly. The same through run_batches, whose ids are binlog positions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from canal import Instance, InstanceConfig, MasterConfig
from canal.spark import DeltaMirror, run_batches
from canal.spark.testing import compare_tables, master_position
from tests.test_spark_units import _mirror_available_now, _source_options

pytestmark = [pytest.mark.integration]


def _history(cur: Any, db: str) -> None:
    """Rows inserted a hundred a statement, updated and deleted, then a column added: the last change."""
    cur.execute(f"CREATE TABLE `{db}`.a (id INT PRIMARY KEY, x INT)")
    for first in range(0, 600, 100):
        cur.executemany(f"INSERT INTO `{db}`.a VALUES (%s, %s)", [(i, i) for i in range(first, first + 100)])
    cur.execute(f"UPDATE `{db}`.a SET x = x + 1000 WHERE id % 9 = 0")
    cur.execute(f"DELETE FROM `{db}`.a WHERE id % 10 = 1")
    cur.execute(f"ALTER TABLE `{db}`.a ADD COLUMN y INT NOT NULL DEFAULT 7")


def _more(cur: Any, db: str, step: int) -> None:
    """Changes after those: rows under the new layout, updates and deletes."""
    first = 600 + 100 * step
    cur.executemany(f"INSERT INTO `{db}`.a VALUES (%s, %s, %s)", [(i, i, i % 3) for i in range(first, first + 100)])
    cur.execute(f"UPDATE `{db}`.a SET x = -x WHERE id % 7 = {step}")
    cur.execute(f"DELETE FROM `{db}`.a WHERE id % 13 = {step}")
    cur.execute(f"UPDATE `{db}`.a SET y = y + {step} WHERE id % 11 = 0")


def _exact(conn: Any, mirror: DeltaMirror, db: str) -> None:
    for c in compare_tables(conn, mirror, db, ["a"]):
        assert c.equal, str(c)


@pytest.mark.spark
def test_a_new_checkpoint_from_an_older_position_applies_exactly_what_the_mirror_lacks(
    mariadb: Any, spark: Any, tmp_path: Path
) -> None:
    conn = mariadb.connect()
    db = mariadb.database
    start = master_position(conn)
    with conn.cursor() as cur:
        _history(cur, db)
    options = _source_options(mariadb, start, tmp_path, **{"meta.dir": str(tmp_path / "meta")})
    mirror = DeltaMirror(tmp_path / "m")
    assert _mirror_available_now(spark, options, mirror, tmp_path / "ckpt").awaitTermination(120)
    _exact(conn, mirror, db)
    with conn.cursor() as cur:
        _more(cur, db, 1)
    mirror.close()

    # a new checkpoint and meta, from the old start: its batches 0, 1, ... hold 500 rows each, most of them applied
    fresh = {
        **options,
        "meta.dir": str(tmp_path / "meta2"),
        "spool.dir": str(tmp_path / "ckpt2.canal-spool"),
        "maxRowsPerTrigger": "500",
    }
    second = DeltaMirror(tmp_path / "m")
    assert _mirror_available_now(spark, fresh, second, tmp_path / "ckpt2").awaitTermination(180)
    assert len(second.history) >= 2  # micro-batches of at most 500 rows
    assert set(second.history[0].tables.values()) == {"skipped"}  # the mirror held all of them
    _exact(conn, second, db)
    second.close()

    with conn.cursor() as cur:
        _more(cur, db, 2)
    again = DeltaMirror(tmp_path / "m")  # the query of the old checkpoint goes on
    assert _mirror_available_now(spark, options, again, tmp_path / "ckpt").awaitTermination(120)
    _exact(conn, again, db)
    again.close()
    conn.close()


def test_run_batches_from_an_older_position_applies_exactly_what_the_mirror_lacks(mariadb: Any, tmp_path: Path) -> None:
    conn = mariadb.connect()
    db = mariadb.database
    start = master_position(conn)
    with conn.cursor() as cur:
        _history(cur, db)

    def instance(meta: str) -> Instance:
        master = MasterConfig(
            address=mariadb.address,
            username=mariadb.user,
            password=mariadb.password,
            journal_name=start[0],
            position=start[1],
        )
        config = InstanceConfig(
            destination="d", master=master, filter_regex=rf"{db}\..*", meta_mode="file", meta_dir=str(tmp_path / meta)
        )
        return Instance(config)

    def run(meta: str, journal: str, batch_size: int) -> None:
        until = master_position(conn)
        with instance(meta) as inst:
            run_batches(
                inst, None, mirror, batch_size=batch_size, journal=tmp_path / journal, until=lambda s: s.reached(*until)
            )

    mirror = DeltaMirror(tmp_path / "m")
    run("meta", "journal", 16384)
    _exact(conn, mirror, db)
    with conn.cursor() as cur:
        _more(cur, db, 1)
    applied = len(mirror.history)
    run("meta2", "journal2", 2)  # a new journal and meta from the old start, in batches of 2 KB of binlog
    assert len(mirror.history) - applied >= 4
    _exact(conn, mirror, db)
    with conn.cursor() as cur:
        _more(cur, db, 2)
    run("meta", "journal", 16384)
    _exact(conn, mirror, db)
    mirror.close()
    conn.close()
