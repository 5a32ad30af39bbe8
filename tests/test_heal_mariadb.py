"""Heals on a real MariaDB, beyond the contract's scenarios (test_fail_closed_mariadb.py): a consumer process killed
at random points while a heal runs -- in the middle of its read, of its mirror's reset, of a batch of its rows -- and
restarted each time ends with a mirror equal to ``SELECT``, no batch applied twice; the heal's table read again while
writers change it (inserts, updates, deletes, moved keys, MINIMAL row images) ends equal too; a database dropped and
made again under its name is followed, no stop."""

from __future__ import annotations

import queue
import random
import time
from pathlib import Path
from typing import Any

import attrs
import pytest
from procs.ha_harness import Child, Runs, kill_all
from test_snapshot_stream import Writers, _load

from canal.config import InstanceConfig, MasterConfig, SnapshotConfig, StoreConfig
from canal.instance import Instance
from canal.testing.plugin import MariaDBDatabase

pytest.importorskip("deltalake")

from canal.spark import DeltaMirror, run_batches
from canal.spark.testing import compare_tables, healed_by, master_position, no_batch_twice

pytestmark = pytest.mark.integration

TABLES = ("k", "c", "other")


def _equal(db: MariaDBDatabase, mirror: DeltaMirror, tables: tuple[str, ...] = TABLES) -> None:
    conn = db.connect()
    try:
        for comparison in compare_tables(conn, mirror, db.database, tables):
            assert comparison.equal, str(comparison)
    finally:
        conn.close()


def _heal_statement(db: MariaDBDatabase) -> None:
    """DML logged as a statement (a session with binlog_format STATEMENT): the rows it changed are not in the binlog,
    so the capture heals k from there."""
    conn = db.connect(autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION binlog_format = 'STATEMENT'")
            cur.execute("DELETE FROM k WHERE MOD(id, 7) = 0")
            cur.execute("UPDATE k SET s = 'by statement' WHERE MOD(id, 5) = 0")
    finally:
        conn.close()


def test_a_consumer_killed_anywhere_in_a_heal_ends_equal(mariadb: MariaDBDatabase, tmp_path: Path) -> None:
    rng = random.Random(65)
    conn = mariadb.connect(autocommit=True)
    start = master_position(conn)
    _load(mariadb)
    events: queue.Queue[tuple[str, str]] = queue.Queue()
    statement, target = tmp_path / "statement", tmp_path / "target"
    base = {
        "address": mariadb.address,
        "user": mariadb.user,
        "password": mariadb.password,
        "database": mariadb.database,
        "start": list(start),
        "meta_dir": str(tmp_path / "meta"),
        "mirror": str(tmp_path / "mirror"),
        "journal": str(tmp_path / "journal.json"),
        "statement": str(statement),
        "target": str(target),
        "chunk_rows": 100,  # 30 chunks of k: the heal outlasts the four kills, each 0.1-1.5 s into a run
    }
    processes = Runs("tests.procs.heal_consumer", base, tmp_path, events)
    kills = 0
    try:
        with Writers(mariadb, seed=65, pause_s=0.02) as writers:
            child: Child = processes.run(None)
            child.expect(lambda line: line == "W", 60, "W")
            time.sleep(0.5)
            _heal_statement(mariadb)
            statement.write_text("{} {}".format(*master_position(conn)))
            for _ in range(4):  # killed at a random point of the heal, each run resuming it
                line = child.expect(lambda line: line in ("H", "S"), 120, "H")
                if line == "S":
                    break
                time.sleep(rng.uniform(0.1, 1.5))
                if child.alive():
                    child.kill()
                    kills += 1
                child = processes.run(None)
            child.expect(lambda line: line == "S", 180, "S")
        target.write_text("{} {}".format(*master_position(conn)))
        assert child.proc.wait(120) == 0
    finally:
        kill_all(processes.children)
        conn.close()
    assert kills >= 2 and writers.writes > 50
    mirror = DeltaMirror(tmp_path / "mirror")
    _equal(mariadb, mirror)
    no_batch_twice(mirror, mariadb.database, TABLES)
    mirror.close()


def test_a_heal_under_writers_with_partial_row_images_ends_equal(mariadb: MariaDBDatabase, tmp_path: Path) -> None:
    """Writers in MINIMAL sessions (updates logging the columns they change) while k is read again: an update of a
    row the heal has not brought yet is skipped by the mirror and written over the chunk's row by the snapshot's
    window, whichever comes first."""
    conn = mariadb.connect(autocommit=True)
    start = master_position(conn)
    _load(mariadb)
    config = InstanceConfig(
        destination="healwrites",
        master=mariadb.master(start),
        filter_regex=rf"{mariadb.database}\.(k|c|other)",
        store=StoreConfig(batch_mode="ITEMSIZE"),
        meta_mode="file",
        meta_dir=str(tmp_path / "meta"),
        snapshot=SnapshotConfig(chunk_rows=50),
    )
    mirror = DeltaMirror(tmp_path / "mirror")
    rng = random.Random(7)
    with Instance(config) as inst:
        end = master_position(conn)
        run_batches(inst, None, mirror, batch_size=64, timeout=0.2, journal=tmp_path / "j", until=healed_by(inst, end))
        writer = mariadb.connect(autocommit=True)
        with writer.cursor() as cur:
            cur.execute("SET SESSION binlog_row_image = 'MINIMAL'")
            cur.execute("SET SESSION binlog_format = 'STATEMENT'")
            cur.execute("DELETE FROM k WHERE MOD(id, 11) = 0")  # the heal
            cur.execute("SET SESSION binlog_format = 'ROW'")
            for _ in range(300):
                key = rng.randint(1, 3300)
                if rng.random() < 0.6:
                    cur.execute("UPDATE k SET s = %s WHERE id = %s", (f"m{rng.random():.4f}", key))
                elif rng.random() < 0.5:
                    cur.execute("DELETE FROM k WHERE id = %s", (key,))
                else:
                    cur.execute("REPLACE INTO k VALUES (%s, %s, %s)", (key, rng.randint(0, 9), "whole"))
                if rng.random() < 0.05:  # the consumer keeps pace now and then, so the writes meet the read
                    journal = tmp_path / "j"
                    run_batches(inst, None, mirror, timeout=0.2, journal=journal, max_batches=2, idle_stop_s=0.1)
        writer.close()
        end = master_position(conn)
        run_batches(inst, None, mirror, batch_size=64, timeout=0.2, journal=tmp_path / "j", until=healed_by(inst, end))
        assert inst.metrics().heals == 1
    conn.close()
    _equal(mariadb, mirror)
    mirror.close()


def test_a_database_dropped_and_made_again_is_followed(mariadb: MariaDBDatabase, tmp_path: Path) -> None:
    conn = mariadb.connect(autocommit=True)
    start = master_position(conn)
    name = f"{mariadb.database}_again"
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}`")
        cur.execute(f"CREATE TABLE `{name}`.t (id INT PRIMARY KEY, v INT)")
        cur.execute(f"CREATE TABLE `{name}`.gone (id INT PRIMARY KEY)")
        cur.execute(f"INSERT INTO `{name}`.t VALUES (1, 1), (2, 2)")
        cur.execute(f"INSERT INTO `{name}`.gone VALUES (1)")
        cur.execute(f"DROP DATABASE `{name}`")
        cur.execute(f"CREATE DATABASE `{name}`")
        cur.execute(f"CREATE TABLE IF NOT EXISTS `{name}`.t (id INT PRIMARY KEY, v INT)")
        cur.execute(f"INSERT INTO `{name}`.t VALUES (3, 3)")
    config = InstanceConfig(
        destination="again",
        master=mariadb.master(start),
        filter_regex=rf"{name}\..*",
        store=StoreConfig(batch_mode="ITEMSIZE"),
    )
    mirror = DeltaMirror(tmp_path / "mirror")
    try:
        end = master_position(conn)
        with Instance(config) as inst:
            run_batches(inst, None, mirror, batch_size=10, timeout=0.5, until=healed_by(inst, end))
            assert inst.metrics().heals == 0 and inst.metrics().errors == 0
        assert mirror.read(name, "t").to_pylist() == [{"id": 3, "v": 3}]
        assert mirror.tables() == [(name, "t")]
    finally:
        with conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        conn.close()
        mirror.close()


def _healed_then(
    mariadb: MariaDBDatabase, tmp_path: Path, destination: str, rows: str, *statements: str
) -> tuple[str, DeltaMirror]:
    """A table t (an INT key, a FLOAT f) holding ``rows``, mirrored; then ``ALTER TABLE t MODIFY f DOUBLE`` -- a
    conversion the mirror would not repeat, so the capture heals t from there -- and ``statements`` (``{db}``: the
    test's database); the mirror caught up with all of it, its heals over. The database and the mirror."""
    from capture_configs import capture_config

    from canal.spark.testing import run_caught_up

    db = mariadb.database
    conn = mariadb.connect(autocommit=True)
    try:
        config = capture_config(mariadb, tmp_path / "meta", master_position(conn), destination, schema=db)
        mirror = DeltaMirror(tmp_path / "mirror")
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, f FLOAT)")
            cur.execute(f"INSERT INTO `{db}`.t VALUES {rows}")
        run_caught_up(conn, config, None, mirror, journal=tmp_path / "journal")
        with conn.cursor() as cur:
            cur.execute(f"ALTER TABLE `{db}`.t MODIFY f DOUBLE")
            for sql in statements:
                cur.execute(sql.format(db=db))
        run_caught_up(conn, config, None, mirror, journal=tmp_path / "journal")
    finally:
        conn.close()
    return db, mirror


@pytest.mark.parametrize("drop", ["table", "database"])
def test_a_heal_of_a_table_dropped_before_its_read_is_over(mariadb: MariaDBDatabase, tmp_path: Path, drop: str) -> None:
    """A table healed (an ALTER the mirror would not repeat: FLOAT made DOUBLE) and dropped before the heal's read
    came to it: the read skips it and ends with no entry of its own, and the mirror holds no such table. The run
    waiting for the heal (healed_by) waited for an entry that never came."""
    gone = ["DROP TABLE `{db}`.t"] if drop == "table" else ["DROP DATABASE `{db}`", "CREATE DATABASE `{db}`"]
    db, mirror = _healed_then(
        mariadb,
        tmp_path,
        "dropped",
        "(1, 1.1)",
        *gone,
        "CREATE TABLE `{db}`.u (id INT PRIMARY KEY)",
        "INSERT INTO `{db}`.u VALUES (1)",
    )
    assert not mirror.table_path(db, "t").exists() and mirror.read(db, "u").to_pylist() == [{"id": 1}]
    mirror.close()


# a transaction of 200,000 rows between the heal and the rename: the heal's read may find t gone while the stream still
# decodes it, and leaves t only once the stream has passed the rename (it left it at once, and the rename, come after,
# passed as a plain one -- in some runs: tests/test_heal.py tests the wait itself)
_LONG = "INSERT INTO `{db}`.u SELECT seq, seq FROM `{db}`.seq_1_to_200000"


@pytest.mark.parametrize(
    "statements",
    [
        ["RENAME TABLE `{db}`.t TO `{db}`.t2"],
        ["ALTER TABLE `{db}`.t RENAME TO `{db}`.t2"],
        ["RENAME TABLE `{db}`.t TO `{db}`.tmp, `{db}`.tmp TO `{db}`.t2"],
        ["CREATE TABLE `{db}`.u (id INT PRIMARY KEY, v INT)", _LONG, "RENAME TABLE `{db}`.t TO `{db}`.t2"],
    ],
    ids=["rename", "alter-rename", "two-steps", "behind-a-long-transaction"],
)
def test_a_heal_of_a_table_renamed_before_its_read_is_over(
    mariadb: MariaDBDatabase, tmp_path: Path, statements: list[str]
) -> None:
    """A table healed (an ALTER the mirror would not repeat) and renamed before the heal's read came to it: its rows
    live on under the new name, so the heal follows the rename and reads that table. It used to skip the read as if
    the table were dropped, and the mirror held the new name with none of the rows written before the heal."""
    *before, rename = statements
    db, mirror = _healed_then(
        mariadb,
        tmp_path,
        "renamed",
        "(1, 1.1), (2, 2.5)",
        *before,
        "INSERT INTO `{db}`.t VALUES (3, 3.25)",
        rename,
        "INSERT INTO `{db}`.t2 VALUES (4, 4.5)",
    )
    assert not mirror.table_path(db, "t").exists() and not mirror.table_path(db, "tmp").exists()
    _equal(mariadb, mirror, ("t2",))
    assert len(mirror.read(db, "t2").to_pylist()) == 4
    mirror.close()


@pytest.mark.parametrize(("statement", "heal"), [("rename", "snapshot"), ("rename", "stop"), ("drop", "snapshot")])
def test_a_table_renamed_before_the_initial_snapshot_reads_it(
    mariadb: MariaDBDatabase, tmp_path: Path, statement: str, heal: str
) -> None:
    """The initial snapshot reads big (slowly), then t; t is renamed to t2 while big is read. The snapshot reads t2
    (the rename heals), and the mirror holds t2 with every row; under heal="stop" the destination stops typed at the
    rename, naming it, and t2 is not left short of rows without a word. A t dropped instead is left: the snapshot
    reads its layout again at its turn (it read under the one planned, and waited 60 s for a DDL already passed)."""
    from capture_configs import capture_config

    from canal.errors import NotRunningError, UnmodeledStatementError
    from canal.parse.heal_marks import RENAMED_WHILE_READ
    from canal.spark.testing import healed_by

    db = mariadb.database
    conn = mariadb.connect(autocommit=True)
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE `{db}`.big (id INT PRIMARY KEY, v INT)")
        cur.execute(f"INSERT INTO `{db}`.big VALUES " + ", ".join(f"({i}, {i})" for i in range(100)))
        cur.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v INT)")
        cur.execute(f"INSERT INTO `{db}`.t VALUES (1, 1), (2, 2), (3, 3)")
    snapshot = SnapshotConfig(mode="initial", tables=(f"{db}.big", f"{db}.t"), chunk_rows=5, max_rows_per_s=25)
    config = capture_config(mariadb, tmp_path / "meta", master_position(conn), "initial", schema=db, heal=heal)
    master = MasterConfig(address=mariadb.address, username=mariadb.user, password=mariadb.password)
    config = attrs.evolve(config, master=master, snapshot=snapshot)  # no position: the initial snapshot's first start
    deadline = time.monotonic() + 30
    mirror = DeltaMirror(tmp_path / "mirror")
    end: tuple[str, int] | None = None
    with Instance(config) as inst:

        def until(stats: Any) -> bool:
            nonlocal end
            assert time.monotonic() < deadline, inst.metrics()
            if end is None:
                runner = inst.snapshots[-1] if inst.snapshots else None
                if runner is None or runner.progress().rows_read == 0:
                    return False
                assert runner.progress().tables_done == 0, "the snapshot read big before t was renamed"
                with conn.cursor() as cur:
                    if statement == "drop":
                        cur.execute(f"DROP TABLE `{db}`.t")
                    else:
                        cur.execute(f"RENAME TABLE `{db}`.t TO `{db}`.t2")
                        cur.execute(f"INSERT INTO `{db}`.t2 VALUES (4, 4)")
                end = master_position(conn)
                return False
            return healed_by(inst, end)(stats)

        if heal == "stop":
            with pytest.raises(NotRunningError) as caught:
                run_batches(inst, None, mirror, batch_size=50, timeout=0.5, journal=tmp_path / "journal", until=until)
            error = caught.value.__cause__
            assert isinstance(error, UnmodeledStatementError) and error.shape == RENAMED_WHILE_READ.name
            assert error.tables == (f"{db}.t", f"{db}.t2")
            assert not mirror.table_path(db, "t2").exists()
        else:
            run_batches(inst, None, mirror, batch_size=50, timeout=0.5, journal=tmp_path / "journal", until=until)
            metrics = inst.metrics()
            assert metrics.errors == 0 and metrics.heals == (2 if statement == "rename" else 0)  # t (gone) and t2
    if heal == "snapshot":
        assert not mirror.table_path(db, "t").exists()
        _equal(mariadb, mirror, ("big", "t2") if statement == "rename" else ("big",))
        if statement == "rename":
            assert len(mirror.read(db, "t2").to_pylist()) == 4
    mirror.close()
    conn.close()
