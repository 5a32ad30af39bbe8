"""The Delta mirror equals ``SELECT *`` through DDL production schemas have, each case in ONE batch (the hard way:
rows under one layout, the DDL, rows under the next), on MariaDB through ``run_batches`` (no JVM):

* a key column renamed or reordered between changes of one row (one row, one key: the deleted row goes);
* DDL in the batch that first creates a mirror table; rows and DROP TABLE in one batch;
* a batch replayed after a crash at every step, with RENAME and DROP TABLE in it;
* a multi-pair RENAME TABLE that swaps two tables through a third name;
* ``DROP COLUMN x, ADD COLUMN x`` in one ALTER;
* ``MODIFY`` to a smaller DECIMAL scale: rounded as the server rounds;
* SET labels in the server's order, a pure column move, TIME text with its fraction digits;
* ``ADD COLUMN ... NOT NULL DEFAULT 7`` (and implicit defaults): existing rows read what the server's do;
* ``DROP DATABASE`` drops every mirrored table of it, in order with the rest of the batch (a table created again by
  ``CREATE TABLE IF NOT EXISTS`` holds only its new rows), also when a crash cuts the batch short at any step.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import attrs
import pymysql
import pytest

pytest.importorskip("deltalake")

from canal.config import InstanceConfig, MasterConfig, StoreConfig
from canal.instance import Instance
from canal.lake.planning.plan import batch_steps, in_order
from canal.lake.settings import MODES
from canal.spark import DeltaMirror, MirrorError, MirrorMode, run_batches
from canal.spark.testing import healed_by, master_position, run_caught_up
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration


class Source:
    """The test's database (``app``: its name in the statements, ``{app}``) and a mirror of it."""

    def __init__(self, db: MariaDBDatabase, tmp_path: Path, mode: MirrorMode) -> None:
        self.mode: MirrorMode = mode
        self.app = db.database
        self.journal = tmp_path / "journal"  # run_batches keeps the batch ids of a heal's snapshot rows there
        journal, position = db.execute("SHOW MASTER STATUS")[0][:2]
        self.config = InstanceConfig(
            destination="ddl",
            master=MasterConfig(
                address=db.address,
                username=db.user,
                password=db.password,
                journal_name=str(journal),
                position=int(position),
            ),
            filter_regex=rf"{re.escape(self.app)}\..*",
            store=StoreConfig(batch_mode="ITEMSIZE"),
            meta_mode="file",
            meta_dir=str(tmp_path / "meta"),
        )
        self.conn = db.connect()
        self.mirror = DeltaMirror(tmp_path / "mirror", mode=mode)

    def run(self, *statements: str) -> None:
        """The statements (``{app}`` is the database's name, ``{other}`` another one's), committed."""
        with self.conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql.format(app=self.app, other=f"{self.app}_other"))
        self.conn.commit()

    def batch(self, *statements: str) -> None:
        """The statements, then the mirror caught up in one batch."""
        self.run(*statements)
        end = master_position(self.conn)
        with Instance(self.config) as inst:
            until = healed_by(inst, end)  # (and a heal's rows, where the capture heals)
            run_batches(inst, None, self.mirror, batch_size=100_000, timeout=0.5, journal=self.journal, until=until)

    def select(self, table: str) -> tuple[list[str], list[dict[str, Any]]]:
        with self.conn.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute(f"SELECT * FROM `{self.app}`.{table}")
            return [d[0] for d in cur.description], list(cur.fetchall())

    def assert_equal(self, table: str, key: str) -> None:
        names, rows = self.select(table)
        mirrored = self.mirror.read(self.app, table)
        assert mirrored.column_names == names, table  # the source's column order
        got = sorted(mirrored.to_pylist(), key=lambda r: r[key])
        assert got == sorted((_as_mirrored(r) for r in rows), key=lambda r: r[key]), table

    def assert_gone(self, table: str) -> None:
        assert not self.mirror.table_path(self.app, table).exists(), f"{self.app}.{table} should not be mirrored"


def _as_mirrored(row: dict[str, Any]) -> dict[str, Any]:
    """A pymysql row as the mirror stores it (SET as its text, TIME as a time of day)."""
    out = {}
    for name, value in row.items():
        if isinstance(value, set):
            value = ",".join(sorted(value))  # compared separately by text where the order matters
        out[name] = value
    return out


@pytest.fixture(params=MODES)
def source(mariadb: MariaDBDatabase, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Source]:
    """The test's database and a mirror of it, in each of the mirror's modes."""
    source = Source(mariadb, tmp_path, request.param)
    yield source
    source.conn.close()
    mariadb.execute(f"DROP DATABASE IF EXISTS `{source.app}_other`")


def test_a_key_renamed_or_reordered_within_a_batch_stays_one_row(source: Source) -> None:
    source.batch(
        "CREATE TABLE t (a INT NOT NULL, b INT NOT NULL, v INT, PRIMARY KEY (a, b))", "INSERT INTO t VALUES (1, 2, 3)"
    )
    source.batch(
        "UPDATE t SET v = 4",
        "ALTER TABLE t RENAME COLUMN a TO aa",
        "UPDATE t SET v = 5",
        "ALTER TABLE t MODIFY b INT NOT NULL FIRST",  # the key's columns in another order
        "DELETE FROM t",
        "INSERT INTO t (b, aa, v) VALUES (7, 8, 9)",
    )
    source.assert_equal("t", "aa")


def test_ddl_in_the_batch_that_creates_the_mirror_table_is_followed(source: Source, tmp_path: Path) -> None:
    source.batch("CREATE TABLE t (id INT PRIMARY KEY, a INT)", "CREATE TABLE gone (id INT PRIMARY KEY)")
    # a mirror that starts after the CREATEs: rows make its tables
    source.mirror = DeltaMirror(tmp_path / "fresh", mode=source.mode)
    source.batch(
        "INSERT INTO t VALUES (1, 10)",
        "ALTER TABLE t RENAME COLUMN a TO b",
        "INSERT INTO t VALUES (2, 20)",
        "INSERT INTO gone VALUES (1)",
        "DROP TABLE gone",
    )
    source.assert_equal("t", "id")
    source.assert_gone("gone")


def test_a_multi_pair_rename_swaps_two_tables(source: Source) -> None:
    source.batch("CREATE TABLE a (id INT PRIMARY KEY, x INT)", "CREATE TABLE b (k VARCHAR(3) PRIMARY KEY)")
    source.batch("INSERT INTO a VALUES (1, 2)", "INSERT INTO b VALUES ('q')")
    source.batch(
        "INSERT INTO a VALUES (3, 4)",
        "RENAME TABLE a TO tmp, b TO a, tmp TO b",
        "INSERT INTO a VALUES ('r')",
        "INSERT INTO b VALUES (5, 6)",
    )
    source.assert_equal("a", "k")
    source.assert_equal("b", "id")
    source.assert_gone("tmp")


def test_a_replayed_batch_with_renames_and_drops_changes_nothing(source: Source, tmp_path: Path) -> None:
    source.batch("CREATE TABLE t (id INT PRIMARY KEY, v INT)", "CREATE TABLE d (id INT PRIMARY KEY)")
    statements = (
        "INSERT INTO t VALUES (1, 1)",
        "INSERT INTO d VALUES (1)",
        "RENAME TABLE t TO t2",
        "INSERT INTO t2 VALUES (2, 2)",
        "DROP TABLE d",
        "ALTER TABLE t2 RENAME TO t3, ADD COLUMN w INT",
        "INSERT INTO t3 VALUES (3, 3, 3)",
    )
    source.run(*statements)
    batches: list[tuple[Any, int]] = []
    run_caught_up(source.conn, source.config, None, lambda rows, batch_id: batches.append((rows, batch_id)))
    rows, batch_id = _one_batch(batches)
    steps = len(batch_steps(in_order(rows), None))
    import shutil

    source.mirror.wait_for_folds()  # copied whole below: no fold may write while it is
    for crash_after in range(steps + 1):
        # a copy of the mirror as it was, the batch applied up to ``crash_after`` steps, then replayed whole
        root = tmp_path / f"replay{crash_after}"
        shutil.copytree(source.mirror.root, root)
        mirror = DeltaMirror(root, mode=source.mode)
        _apply_steps(mirror, rows, batch_id, crash_after)
        mirror.apply(rows, batch_id)
        mirror.apply(rows, batch_id)  # and again: a replay of a finished batch changes nothing
        assert sorted(mirror.read(source.app, "t3").to_pylist(), key=lambda r: r["id"]) == [
            {"id": 1, "v": 1, "w": None},
            {"id": 2, "v": 2, "w": None},
            {"id": 3, "v": 3, "w": 3},
        ], crash_after
        for gone in ("t", "t2", "d"):
            assert not mirror.table_path(source.app, gone).exists(), (crash_after, gone)


def _apply_steps(mirror: DeltaMirror, rows: Any, batch_id: int, steps: int) -> None:
    """Apply the batch, stopping (as a crash would) once ``steps`` steps are journaled."""

    class Crash(Exception):
        pass

    write = mirror._write_journal

    def crash_at(batch: int, done: int) -> None:
        write(batch, done)
        if done >= steps:
            raise Crash

    mirror._write_journal = crash_at  # type: ignore[method-assign]
    try:
        if steps:
            with pytest.raises(Crash):
                mirror.apply(rows, batch_id)
    finally:
        mirror._write_journal = write  # type: ignore[method-assign]


def test_drop_and_add_of_one_column_in_one_alter_forgets_its_values(source: Source) -> None:
    source.batch("CREATE TABLE t (id INT PRIMARY KEY, x INT, y INT)", "INSERT INTO t VALUES (1, 10, 100)")
    source.batch("ALTER TABLE t DROP COLUMN x, ADD COLUMN x INT")
    source.assert_equal("t", "id")


def test_a_smaller_decimal_scale_rounds_as_the_server(source: Source) -> None:
    source.batch(
        "CREATE TABLE t (id INT PRIMARY KEY, d DECIMAL(10,4))",
        "INSERT INTO t VALUES (1, 1.2345), (2, -1.2355), (3, 2.0050), (4, NULL)",
    )
    source.batch("ALTER TABLE t MODIFY d DECIMAL(10,2)")
    source.assert_equal("t", "id")
    assert {r["id"]: r["d"] for r in source.select("t")[1]}[2] == Decimal("-1.24")


def test_set_labels_column_moves_and_time_text_are_the_servers(source: Source) -> None:
    source.batch(
        "CREATE TABLE t (id INT PRIMARY KEY, s SET('zeta', 'alpha', 'mid'), tm TIME(3), v INT)",
        "INSERT INTO t VALUES (1, 'alpha,zeta', '12:34:56.5', 1), (2, 'mid,alpha', '-01:00:00', 2)",
    )
    source.batch("ALTER TABLE t MODIFY v INT FIRST")  # a pure move
    mirrored = source.mirror.read(source.app, "t")
    assert mirrored.column_names == ["v", "id", "s", "tm"]
    with source.conn.cursor() as cur:
        cur.execute(f"SELECT v, id, CAST(s AS CHAR), CAST(tm AS CHAR) FROM `{source.app}`.t ORDER BY id")
        server = [dict(zip(["v", "id", "s", "tm"], row, strict=True)) for row in cur.fetchall()]
    # 'zeta,alpha': the labels in the definition's order; '12:34:56.500': TIME(3)'s three fraction digits
    assert sorted(mirrored.to_pylist(), key=lambda r: r["id"]) == server
    assert server[0]["s"] == "zeta,alpha" and server[0]["tm"] == "12:34:56.500"


def test_an_added_column_with_a_default_reads_the_default_in_existing_rows(source: Source) -> None:
    source.batch("CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1), (2)")
    source.batch(
        "ALTER TABLE t ADD COLUMN extra INT NOT NULL DEFAULT 7, ADD COLUMN note VARCHAR(5) DEFAULT 'n/a', "
        "ADD COLUMN n INT NOT NULL, ADD COLUMN e ENUM('x', 'y') NOT NULL, ADD COLUMN s VARCHAR(3) NOT NULL, "
        "ADD COLUMN maybe INT",
        "INSERT INTO t (id, extra, n, e, s) VALUES (3, 8, 9, 'y', 'abc')",
    )
    source.assert_equal("t", "id")


@pytest.mark.parametrize("heal", ["stop", "snapshot"])
def test_an_expression_default_the_mirror_cannot_compute_heals_or_is_a_typed_error(source: Source, heal: str) -> None:
    """The values the server computed for the rows: the capture reads the table again from the ALTER on (the
    default), or the mirror stops typed there (heal="stop")."""
    source.config = attrs.evolve(source.config, heal=heal)
    source.batch("CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1)")
    if heal == "snapshot":
        source.batch("ALTER TABLE t ADD COLUMN created DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP")
        source.assert_equal("t", "id")
        assert source.mirror.metrics().heals == 1
        return
    with pytest.raises(MirrorError, match=rf"{re.escape(source.app)}\.t.*created.*DEFAULT.*(?i:current_timestamp)"):
        source.batch("ALTER TABLE t ADD COLUMN created DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP")
    assert source.mirror.read(source.app, "t").column_names == ["id"]  # nothing changed


def test_ddl_of_a_qualified_table_from_another_database_changes_that_table(source: Source) -> None:
    source.batch("CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1)")
    source.batch(
        "CREATE DATABASE {other}",
        "USE {other}",  # the statements' session database is not the table's
        "ALTER TABLE {app}.t ADD COLUMN e INT NOT NULL DEFAULT 5",
        "INSERT INTO {app}.t VALUES (2, 6)",
        "USE {app}",
    )
    source.assert_equal("t", "id")


def test_one_alter_swapping_two_names_keeps_each_columns_values_and_type(source: Source) -> None:
    source.batch("CREATE TABLE t (id INT PRIMARY KEY, a INT, b VARCHAR(5))", "INSERT INTO t VALUES (1, 10, 'x')")
    source.batch(
        "ALTER TABLE t CHANGE a b INT, CHANGE b a VARCHAR(5)",
        "INSERT INTO t VALUES (2, 20, 'y')",
        "ALTER TABLE t RENAME COLUMN a TO b, RENAME COLUMN b TO a",  # and back, by RENAME COLUMN
        "INSERT INTO t VALUES (3, 30, 'z')",
    )
    source.assert_equal("t", "id")


def _drop_database_batch(source: Source) -> None:
    source.batch(
        "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
        "CREATE TABLE u (id INT PRIMARY KEY)",
        "INSERT INTO t VALUES (1, 1), (2, 2)",
        "INSERT INTO u VALUES (1)",
    )
    source.run(
        "INSERT INTO {app}.t VALUES (3, 3)",
        "CREATE TABLE {app}.made (id INT PRIMARY KEY)",  # made in the batch, before the drop
        "INSERT INTO {app}.made VALUES (1)",
        "RENAME TABLE {app}.u TO {app}.u2",
        "DROP DATABASE {app}",
        "CREATE DATABASE {app}",
        "CREATE TABLE IF NOT EXISTS {app}.t (id INT PRIMARY KEY, note VARCHAR(5))",
        "INSERT INTO {app}.t VALUES (9, 'new')",
        "USE {app}",
    )


def _assert_only_the_new_t(source: Source, mirror: DeltaMirror) -> None:
    assert mirror.tables() == [(source.app, "t")]
    assert mirror.read(source.app, "t").to_pylist() == source.select("t")[1] == [{"id": 9, "note": "new"}]


def test_drop_database_drops_every_mirrored_table_in_order(source: Source) -> None:
    _drop_database_batch(source)
    run_caught_up(source.conn, source.config, None, source.mirror, batch_size=100_000)
    _assert_only_the_new_t(source, source.mirror)
    source.batch("DROP SCHEMA IF EXISTS {app}", "DROP DATABASE IF EXISTS {app}", "CREATE SCHEMA {app}", "USE {app}")
    assert source.mirror.tables() == []


def test_a_replayed_batch_with_a_drop_database_changes_nothing(source: Source, tmp_path: Path) -> None:
    import shutil

    _drop_database_batch(source)
    batches: list[tuple[Any, int]] = []
    run_caught_up(source.conn, source.config, None, lambda rows, batch_id: batches.append((rows, batch_id)))
    rows, batch_id = _one_batch(batches)
    assert "ERASE" in rows.column("type").to_pylist()  # the entry says the database's tables went
    steps = len(batch_steps(in_order(rows), None))
    source.mirror.wait_for_folds()  # copied whole below: no fold may write while it is
    for crash_after in range(steps + 1):
        root = tmp_path / f"replay{crash_after}"
        shutil.copytree(source.mirror.root, root)
        mirror = DeltaMirror(root, mode=source.mode)
        _apply_steps(mirror, rows, batch_id, crash_after)
        mirror.apply(rows, batch_id)
        mirror.apply(rows, batch_id)  # and again: a replay of a finished batch changes nothing
        _assert_only_the_new_t(source, mirror)
        mirror.close()


def _one_batch(batches: list[tuple[Any, int]]) -> tuple[Any, int]:
    """The batches a run made of the statements as one (a loaded machine may cut them in two), under the last id."""
    import pyarrow as pa

    return pa.concat_tables([rows for rows, _id in batches]), batches[-1][1]
