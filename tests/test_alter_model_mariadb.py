"""ALTERs whose effect on the rows a table holds the conversion model follows (canal.schema.conversions,
canal.schema.computed, canal.lake.ddl), on a real MariaDB: each is followed exactly -- the mirror equals ``SELECT``
with no heal -- or heals under the default ``heal="snapshot"`` (equal, one heal) and stops typed under
``heal="stop"`` (``MirrorConversionError`` naming the table and column, nothing of the ALTER written).

* AUTO_INCREMENT made: the server numbers a key of 0 (written under NO_AUTO_VALUE_ON_ZERO) and NULLs anew -- healed;
  under NO_AUTO_VALUE_ON_ZERO a NOT NULL column keeps its zeros, and a column that was AUTO_INCREMENT keeps them
  whatever the ALTER (a wider type) -- followed;
* a generated column's expression changed (VIRTUAL or PERSISTENT), or a column it reads converted -- healed;
* ``ADD COLUMN ... BINARY(4) DEFAULT 'ab'`` / ``BINARY(4) NOT NULL``: existing rows padded with zero bytes; hexadecimal
  and bit literals as defaults (``x'4142'``, ``0x4142``, ``b'01000001'``) read as text, bytes or their number by the
  column's type -- followed; bytes beyond ASCII for a column whose character set the statement does not declare --
  healed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pymysql
import pytest

pytest.importorskip("deltalake")

from canal.config import InstanceConfig, StoreConfig
from canal.instance import Instance
from canal.lake.types import MirrorConversionError
from canal.spark import DeltaMirror, compare, run_batches
from canal.spark.testing import healed_by, master_position
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration

_NAVOZ = "SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_AUTO_VALUE_ON_ZERO')"
_DEFAULT = "SET SESSION sql_mode = DEFAULT"
_GENERATED = "(id INT PRIMARY KEY, v INT, gv INT AS (v * 2) VIRTUAL, gp INT AS (v * 3) PERSISTENT)"


@attrs.frozen
class Case:
    table: str
    setup: tuple[str, ...]
    alter: tuple[str, ...]  # the ALTER, with the session's sql_mode around it where it matters
    heals: bool
    column: str = ""  # the column a heal="stop" mirror names


CASES = [
    # AUTO_INCREMENT made, in the default mode: the 0 becomes 1 (and a NULL the next number)
    Case("ai", (_NAVOZ, "CREATE TABLE ai (id INT NOT NULL PRIMARY KEY, v INT)", "INSERT INTO ai VALUES (0, 1), (5, 2)",
                _DEFAULT), ("ALTER TABLE ai MODIFY id INT NOT NULL AUTO_INCREMENT",), True, "id"),
    Case("ai_null", ("CREATE TABLE ai_null (id INT PRIMARY KEY, k INT NULL, UNIQUE KEY (k))",
                     "INSERT INTO ai_null VALUES (1, NULL), (2, 5)"),
         (_NAVOZ, "ALTER TABLE ai_null MODIFY k INT NOT NULL AUTO_INCREMENT", _DEFAULT), True, "k"),
    # under NO_AUTO_VALUE_ON_ZERO a NOT NULL column keeps its 0; a column that was AUTO_INCREMENT keeps it anyway
    Case("ai_kept", (_NAVOZ, "CREATE TABLE ai_kept (id INT NOT NULL PRIMARY KEY, v INT)",
                     "INSERT INTO ai_kept VALUES (0, 1), (5, 2)", _DEFAULT),
         (_NAVOZ, "ALTER TABLE ai_kept MODIFY id INT NOT NULL AUTO_INCREMENT", _DEFAULT), False),
    Case("ai_wide", (_NAVOZ, "CREATE TABLE ai_wide (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, v INT)",
                     "INSERT INTO ai_wide VALUES (0, 1), (5, 2)", _DEFAULT),
         ("ALTER TABLE ai_wide MODIFY id BIGINT NOT NULL AUTO_INCREMENT",), False),
    # generated columns: an expression set anew, VIRTUAL or PERSISTENT; a column an expression reads, narrowed
    Case("gv", (f"CREATE TABLE gv {_GENERATED}", "INSERT INTO gv (id, v) VALUES (1, 10), (2, 20)"),
         ("ALTER TABLE gv MODIFY gv INT AS (v * 5) VIRTUAL",), True, "gv"),
    Case("gp", (f"CREATE TABLE gp {_GENERATED}", "INSERT INTO gp (id, v) VALUES (1, 10), (2, 20)"),
         ("ALTER TABLE gp MODIFY gp INT AS (v * 7) PERSISTENT",), True, "gp"),
    Case("gbase", (f"CREATE TABLE gbase {_GENERATED}", "INSERT INTO gbase (id, v) VALUES (1, 1000), (2, 20)"),
         ("SET STATEMENT sql_mode = '' FOR ALTER TABLE gbase MODIFY v TINYINT",), True, "gv"),
    # padded and binary-string defaults: followed
    Case("bin", ("CREATE TABLE bin (id INT PRIMARY KEY)", "INSERT INTO bin VALUES (1), (2)"),
         ("ALTER TABLE bin ADD COLUMN c BINARY(4) DEFAULT 'ab', ADD COLUMN d BINARY(4) NOT NULL, "
          "ADD COLUMN e CHAR(4) DEFAULT 'ab  ', ADD COLUMN f VARBINARY(4) DEFAULT 'ab', "
          "ADD COLUMN h CHAR(3) CHARACTER SET binary DEFAULT 'a'",), False),
    Case("hex", ("CREATE TABLE hex (id INT PRIMARY KEY) DEFAULT CHARSET=utf8mb4", "INSERT INTO hex VALUES (1)"),
         ("ALTER TABLE hex ADD a VARCHAR(10) DEFAULT x'4142', ADD b VARCHAR(10) DEFAULT 0x4142, "
          "ADD c VARCHAR(10) DEFAULT b'01000001', ADD d VARBINARY(4) DEFAULT x'00ff', ADD e TEXT DEFAULT x'4142', "
          "ADD i INT DEFAULT 0x41, ADD j BIT(16) DEFAULT x'4142', ADD m ENUM('A','B') DEFAULT x'42', "
          "ADD n YEAR DEFAULT 0x7E8, ADD p BINARY(3) DEFAULT x'41', ADD r SET('A','B') DEFAULT x'412C42', "
          "ADD u DECIMAL(5,1) DEFAULT 0x41, ADD ip INET4 DEFAULT x'01020304', "
          "ADD l1 VARCHAR(5) CHARACTER SET latin1 DEFAULT x'E9', ADD l2 VARCHAR(5) DEFAULT _latin1 x'E9'",), False),
    # bytes beyond ASCII in a column that declares no character set: the table's decides, which a copy is not told
    Case("hexu", ("CREATE TABLE hexu (id INT PRIMARY KEY) DEFAULT CHARSET=utf8mb4", "INSERT INTO hexu VALUES (1)"),
         ("ALTER TABLE hexu ADD s VARCHAR(5) DEFAULT x'C3A9'",), True, "s"),
]  # fmt: skip


def _config(db: MariaDBDatabase, tmp: Path, start: tuple[str, int], name: str, tables: list[str]) -> InstanceConfig:
    return InstanceConfig(
        destination=name,
        master=db.master(start),
        filter_regex=",".join(rf"{db.database}\.{t}" for t in tables),
        store=StoreConfig(batch_mode="ITEMSIZE"),
        meta_mode="file",
        meta_dir=str(tmp / name / "meta"),
    )


def _run(conn: Any, config: InstanceConfig, mirror: DeltaMirror, journal: Path) -> int:
    """Run a destination into ``mirror`` until it handled what the server has written and its heals are over; the
    tables it healed."""
    end = master_position(conn)
    with Instance(config) as inst:
        run_batches(inst, None, mirror, batch_size=50, timeout=0.5, journal=journal, until=healed_by(inst, end))
        metrics = inst.metrics()
    assert metrics.running and metrics.errors == 0, metrics.last_error
    return metrics.heals


def _execute(conn: Any, *statements: str) -> None:
    with conn.cursor() as cur:
        for sql in statements:
            cur.execute(sql)


def _equal(db: MariaDBDatabase, mirror: DeltaMirror, tables: list[str]) -> None:
    """Each table's mirror equals ``SELECT *`` (a BIT as its number, as the mirror holds it)."""
    for table in tables:
        bits = {row[0] for row in db.execute(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
            "AND DATA_TYPE = 'bit'", (db.database, table)
        )}  # fmt: skip
        conn = db.connect()
        try:
            with conn.cursor(pymysql.cursors.DictCursor) as cur:
                cur.execute(f"SELECT * FROM `{db.database}`.`{table}`")
                rows = [
                    {k: int.from_bytes(v, "big") if k in bits and isinstance(v, bytes) else v for k, v in r.items()}
                    for r in cur.fetchall()
                ]
        finally:
            conn.close()
        result = compare(mirror.read(db.database, table), rows, ["id"], name=table)
        assert result.equal, f"{result}: mirror {mirror.read(db.database, table).to_pylist()}, SELECT {rows}"


@pytest.fixture
def conn(mariadb: MariaDBDatabase) -> Iterator[Any]:
    connection = mariadb.connect(autocommit=True)
    _execute(connection, f"USE `{mariadb.database}`")
    yield connection
    connection.close()


def test_alters_are_followed_exactly_or_healed_and_stop_typed_under_heal_stop(
    mariadb: MariaDBDatabase, conn: Any, tmp_path: Path
) -> None:
    start = master_position(conn)
    for case in CASES:
        _execute(conn, *case.setup)
    tables = [case.table for case in CASES]
    healing = DeltaMirror(tmp_path / "healed")
    config = _config(mariadb, tmp_path, start, "healing", tables)
    assert _run(conn, config, healing, tmp_path / "journal") == 0
    # destinations that stop (heal="stop"), one per statement that heals, all caught up before it
    stops = {case.table: DeltaMirror(tmp_path / case.table / "mirror") for case in CASES if case.heals}
    stop_config = {
        table: attrs.evolve(_config(mariadb, tmp_path, start, f"stop_{table}", [table]), heal="stop") for table in stops
    }
    for table, mirror in stops.items():
        assert _run(conn, stop_config[table], mirror, tmp_path / table / "journal") == 0
    followed = [case.table for case in CASES if not case.heals]
    plain = DeltaMirror(tmp_path / "plain")
    plain_config = attrs.evolve(_config(mariadb, tmp_path, start, "plain", followed), heal="stop")
    assert _run(conn, plain_config, plain, tmp_path / "plain_journal") == 0
    before = {table: mirror.read(mariadb.database, table).to_pylist() for table, mirror in stops.items()}

    for case in CASES:
        _execute(conn, *case.alter)
    assert [r[1] for r in mariadb.execute(f"SELECT * FROM `{mariadb.database}`.ai ORDER BY v")] == [1, 2]
    assert mariadb.execute(f"SELECT id FROM `{mariadb.database}`.ai_kept ORDER BY v")[0][0] == 0

    # the default: what the model follows is mirrored as the server left it, what it does not is read again
    assert _run(conn, config, healing, tmp_path / "journal") == len(stops)
    _equal(mariadb, healing, tables)
    # heal="stop": the statements the model follows go through as they are, equal, nothing healed
    assert _run(conn, plain_config, plain, tmp_path / "plain_journal") == 0
    _equal(mariadb, plain, followed)
    # ... and each one it does not follow stops typed, naming its table and column, with nothing of it written
    for case in CASES:
        if not case.heals:
            continue
        mirror = stops[case.table]
        version = mirror.version(mariadb.database, case.table)
        with pytest.raises(MirrorConversionError) as stopped:
            _run(conn, stop_config[case.table], mirror, tmp_path / case.table / "journal")
        assert stopped.value.table == f"{mariadb.database}.{case.table}", case
        assert stopped.value.column == case.column, (case, str(stopped.value))
        assert mirror.version(mariadb.database, case.table) == version
        assert mirror.read(mariadb.database, case.table).to_pylist() == before[case.table]
