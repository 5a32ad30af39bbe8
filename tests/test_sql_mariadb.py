"""The SQL reader against a real MariaDB: what the reader (and the fake that applies DDL through it) says about a
table's columns equals what information_schema says after the server ran the same statements."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from canal.sql import CreateTable, read_statement
from canal.testing.fake import FakeMysql
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration

# CREATE TABLE statements in the many spellings MariaDB accepts: synonyms, every type family, attributes, keys,
# comments, version comments, quoting
CREATES = [
    "CREATE TABLE `users` (\n  `id` bigint(20) unsigned NOT NULL AUTO_INCREMENT,\n"
    "  `email` varchar(255) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'x',\n"
    "  `kind` enum('a','b''c') NOT NULL DEFAULT 'a',\n"
    "  `made` datetime(6) DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),\n"
    "  PRIMARY KEY (`id`),\n  UNIQUE KEY `idx_email` (`email`)\n"
    ") ENGINE=InnoDB AUTO_INCREMENT=42 DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci",
    "CREATE TABLE synonyms (a INTEGER, b INT1, c INT2, d INT3, e MIDDLEINT, f INT4, g INT8, h BOOL, i BOOLEAN, "
    "j DEC(8,3), k NUMERIC(5), l FIXED, m REAL, n DOUBLE PRECISION, o FLOAT(10), p FLOAT(30), q FLOAT(7,3), "
    "r FLOAT4, s FLOAT8, t CHARACTER(5), u CHARACTER VARYING(9), v NCHAR(3), w NATIONAL VARCHAR(4), "
    "x LONG VARCHAR, y LONG VARBINARY, z LONG)",
    "CREATE TABLE serials (id SERIAL, note VARCHAR(3))",
    "CREATE TABLE temporal (d DATE, t TIME(3), dt DATETIME(6) NOT NULL, ts TIMESTAMP(2) NULL, y YEAR, t0 TIME)",
    "CREATE TABLE strings (a TINYTEXT, b TEXT, c MEDIUMTEXT, d LONGTEXT, e TINYBLOB, f BLOB, g MEDIUMBLOB, "
    "h LONGBLOB, i BINARY(4), j VARBINARY(7), k BIT, l BIT(17), m CHAR, n BINARY, o CHAR(10) BINARY, "
    "p VARCHAR(5) CHARSET latin1, q TEXT CHARACTER SET utf8mb3 COLLATE utf8mb3_bin)",
    "CREATE TABLE labels (e ENUM('x', 'y''z', 'with,comma') NOT NULL, s SET('a','b','c') DEFAULT 'a,b')",
    "CREATE TABLE geo (id INT PRIMARY KEY, g GEOMETRY, p POINT NOT NULL, l LINESTRING, j JSON, "
    "i6 INET6, u UUID, i4 INET4)",
    "CREATE TABLE numbers (a INT(5) ZEROFILL, b BIGINT UNSIGNED NOT NULL, c DECIMAL(12,4) UNSIGNED, "
    "d TINYINT(1) UNSIGNED, e SMALLINT SIGNED, f MEDIUMINT(4), g DECIMAL(65,30), h DOUBLE(10,2))",
    "CREATE TABLE pk2 (a INT NOT NULL, b VARCHAR(10) NOT NULL, c INT, CONSTRAINT pk PRIMARY KEY (b, a), "
    "UNIQUE (c), KEY (c, a), FULLTEXT KEY ft (b))",
    "CREATE TABLE gen (a INT, b INT AS (a * 2) VIRTUAL, c INT GENERATED ALWAYS AS (a + 1) PERSISTENT, "
    "d VARCHAR(10) AS (CONCAT('x', a)) STORED, CHECK (a > 0), CONSTRAINT c1 CHECK (c < 100))",
    "CREATE TABLE fk (id INT PRIMARY KEY, parent INT, KEY (parent), "
    "CONSTRAINT fk_parent FOREIGN KEY (parent) REFERENCES fk (id) ON DELETE SET NULL ON UPDATE CASCADE)",
    "CREATE /* a comment */ TABLE -- line comment\n `we``ird na.me` ( # hash comment\n"
    " `col umn` INT COMMENT 'a, (comment)', x VARCHAR(3) DEFAULT \"dq\" -- trailing\n)",
    "/*!40101 CREATE TABLE versioned (a INT, b VARCHAR(3)) */",
    "CREATE TABLE vcomment (a INT /*!50100 UNSIGNED */, b INT /*M!100301 NOT NULL */, c INT) "
    "/*!40101 DEFAULT CHARSET=latin1 */",
    "CREATE TABLE IF NOT EXISTS parts (id INT NOT NULL, v INT, PRIMARY KEY (id)) PARTITION BY HASH (id) PARTITIONS 4",
    "CREATE TABLE defaults (a INT DEFAULT -1, b DECIMAL(5,2) DEFAULT 1.50, c VARCHAR(5) DEFAULT _utf8mb4'x', "
    "d BIT(4) DEFAULT b'101', e INT DEFAULT (1 + 1), f DATETIME DEFAULT NOW(), g FLOAT DEFAULT 1e3, "
    "h INT NULL DEFAULT NULL, i TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP)",
    "CREATE TABLE invis (a INT, b INT INVISIBLE, c INT UNIQUE KEY, d INT KEY)",
]

# (setup, ALTER TABLE statements run one after another)
ALTERS = [
    (
        "CREATE TABLE t (id INT NOT NULL, a VARCHAR(10), b INT, c INT, CONSTRAINT pk PRIMARY KEY (id))",
        [
            "ALTER TABLE t ADD COLUMN z INT FIRST",
            "ALTER TABLE t DROP COLUMN c, MODIFY a VARCHAR(30) NOT NULL",
            "ALTER TABLE t CHANGE COLUMN b bb BIGINT UNSIGNED AFTER z",
            "ALTER TABLE t ADD (p INT, q DECIMAL(6,2))",
            "ALTER TABLE t RENAME COLUMN q TO qq, ALGORITHM=INPLACE, LOCK=NONE",
            "ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (id, a)",
            "ALTER TABLE t ALTER COLUMN p SET DEFAULT 5, ADD INDEX ip (p)",
            "ALTER TABLE t RENAME INDEX ip TO ip2, ALTER p DROP DEFAULT",
            "ALTER TABLE t ADD COLUMN IF NOT EXISTS p INT, DROP COLUMN IF EXISTS nope",
            "ALTER TABLE IF EXISTS t MODIFY COLUMN IF EXISTS z TINYINT(1) NOT NULL AFTER qq",
            "/*M!100301 ALTER TABLE t ADD COLUMN IF NOT EXISTS w ENUM('a','b') NOT NULL DEFAULT 'b' AFTER id */",
            "ALTER TABLE t CONVERT TO CHARACTER SET latin1",
            "ALTER ONLINE TABLE t ADD COLUMN v DATETIME(3) NULL, COMMENT 'orders, with a comma'",
            "ALTER TABLE t RENAME TO t2",
        ],
    ),
    (
        "CREATE TABLE u (a INT, b CHAR(3))",
        [
            "ALTER TABLE u ADD COLUMN id INT NOT NULL AUTO_INCREMENT PRIMARY KEY FIRST",
            "ALTER TABLE u MODIFY b VARCHAR(20) CHARACTER SET ascii, DEFAULT CHARSET=latin1",
            "ALTER TABLE u ADD c TEXT, ADD d YEAR AFTER a",
            "ALTER TABLE u CHANGE a a2 SMALLINT UNSIGNED ZEROFILL",
            "ALTER TABLE u DROP d, DROP COLUMN c",
        ],
    ),
]


def _columns(mariadb: MariaDBDatabase, table: str) -> list[tuple[Any, ...]]:
    return mariadb.execute(
        "SELECT COLUMN_NAME, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, COLUMN_KEY, CHARACTER_MAXIMUM_LENGTH, "
        "NUMERIC_PRECISION, NUMERIC_SCALE, DATETIME_PRECISION FROM information_schema.COLUMNS "
        "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
        (table,),
    )


def _primary_key(mariadb: MariaDBDatabase, table: str) -> list[str]:
    rows = mariadb.execute(
        "SELECT COLUMN_NAME FROM information_schema.KEY_COLUMN_USAGE WHERE TABLE_SCHEMA = DATABASE() "
        "AND TABLE_NAME = %s AND CONSTRAINT_NAME = 'PRIMARY' ORDER BY ORDINAL_POSITION",
        (table,),
    )
    return [r[0] for r in rows]


_SERVER_BASE = {"json": "longtext"}  # MariaDB stores JSON as LONGTEXT (with a JSON_VALID check)


@pytest.mark.parametrize("sql", CREATES, ids=[f"create{i}" for i in range(len(CREATES))])
def test_reader_sees_the_columns_mariadb_creates(mariadb: MariaDBDatabase, sql: str) -> None:
    stmt = read_statement(sql)
    assert isinstance(stmt, CreateTable)
    mariadb.execute(sql)
    server = _columns(mariadb, stmt.table.name)
    pk = stmt.primary_key
    assert list(pk) == _primary_key(mariadb, stmt.table.name)
    assert [c.name for c in stmt.columns] == [row[0] for row in server]
    for col, (name, data_type, column_type, is_nullable, _key, char_len, precision, scale, fsp) in zip(
        stmt.columns, server, strict=True
    ):
        t = col.type
        assert _SERVER_BASE.get(t.base, t.base) == data_type, name
        assert t.unsigned == ("unsigned" in column_type), name
        assert (col.is_nullable and col.name not in pk) == (is_nullable == "YES"), name
        if t.base in ("char", "varchar", "binary", "varbinary"):
            assert (t.length or 1) == char_len, name
        if t.base == "decimal":
            assert (t.precision or 10, t.scale or 0) == (precision, scale), name
        if t.fsp is not None:
            assert t.fsp == fsp, name
        if t.labels:
            assert column_type == f"{t.base}(" + ",".join("'" + x.replace("'", "''") + "'" for x in t.labels) + ")"


@pytest.fixture
def fake(mariadb: MariaDBDatabase) -> Iterator[FakeMysql]:
    with FakeMysql(name=f"sqldiff_{mariadb.database}", mariadb=True, database=mariadb.database) as f:
        yield f


def _fake_view(fake: FakeMysql, table: str) -> list[tuple[Any, ...]]:
    return [(c.name, c.mysql_type, c.is_key, c.nullable) for c in fake.table(table).columns]


def _server_view(mariadb: MariaDBDatabase, table: str) -> list[tuple[Any, ...]]:
    return [(r[0], r[2], r[4] == "PRI", r[3] == "YES") for r in _columns(mariadb, table)]


def _tables(mariadb: MariaDBDatabase) -> list[str]:
    return sorted(r[0] for r in mariadb.execute("SHOW TABLES"))


@pytest.mark.parametrize(("setup", "alters"), ALTERS, ids=[f"alter{i}" for i in range(len(ALTERS))])
def test_fake_applies_alters_like_mariadb(
    mariadb: MariaDBDatabase, fake: FakeMysql, setup: str, alters: list[str]
) -> None:
    for sql in [setup, *alters]:
        mariadb.execute(sql)
        fake.execute(sql)
        tables = _tables(mariadb)
        assert [t.split(".", 1)[1] for t in fake.tables()] == tables, sql
        for table in tables:
            assert _fake_view(fake, table) == _server_view(mariadb, table), sql


# -- random ALTER sequences -------------------------------------------------------------------------------------------

_TYPES = [
    "INT",
    "INT UNSIGNED",
    "BIGINT",
    "SMALLINT(3) ZEROFILL",
    "TINYINT(1)",
    "DECIMAL(9,3)",
    "DOUBLE",
    "FLOAT",
    "VARCHAR(12)",
    "CHAR(4)",
    "TEXT",
    "VARBINARY(8)",
    "DATE",
    "DATETIME(3)",
    "TIME",
    "ENUM('a','b')",
    "SET('x','y')",
    "BIT(3)",
    "YEAR",
    "JSON",
]
_NAMES = ["c1", "c2", "c3", "c4", "`c 5`", "C6"]


@st.composite
def _alter(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["add", "add_pos", "drop", "modify", "change", "rename", "list"]))
    name = draw(st.sampled_from(_NAMES))
    type_text = draw(st.sampled_from(_TYPES))
    null = draw(st.sampled_from(["", " NULL", " NOT NULL"]))
    if kind == "add":
        return f"ALTER TABLE r ADD COLUMN IF NOT EXISTS {name} {type_text}{null}"
    if kind == "add_pos":
        where = draw(st.sampled_from(["FIRST", "AFTER id"]))
        return f"ALTER TABLE r ADD IF NOT EXISTS {name} {type_text}{null} {where}"
    if kind == "drop":
        return f"ALTER TABLE r DROP COLUMN IF EXISTS {name}"
    if kind == "modify":
        return f"ALTER TABLE r MODIFY COLUMN IF EXISTS {name} {type_text}{null}"
    if kind == "change":
        new = draw(st.sampled_from(_NAMES))
        return f"ALTER TABLE r CHANGE COLUMN IF EXISTS {name} {new} {type_text}{null}"
    if kind == "rename":
        new = draw(st.sampled_from(_NAMES))
        return f"ALTER TABLE r RENAME COLUMN IF EXISTS {name} TO {new}"
    other = draw(st.sampled_from(_NAMES))
    return f"ALTER TABLE r ADD IF NOT EXISTS ({name} {type_text}, {other} INT)"


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_alter(), min_size=1, max_size=8))
def test_random_alter_sequences_match_mariadb(mariadb: MariaDBDatabase, alters: list[str]) -> None:
    mariadb.execute("DROP TABLE IF EXISTS r")
    with FakeMysql(name=f"sqlrand_{mariadb.database}", mariadb=True, database=mariadb.database) as fake:
        for sql in ["CREATE TABLE r (id INT PRIMARY KEY)", *alters]:
            try:
                mariadb.execute(sql)
            except Exception as exc:  # the server refused it (a duplicate name, ...): the fake must refuse it too
                before = _fake_view(fake, "r")
                with pytest.raises(Exception):  # noqa: B017 -- any refusal; the state check below is the point
                    fake.execute(sql)
                assert _fake_view(fake, "r") == before, f"{sql} failed on MariaDB ({exc}) but changed the fake"
                continue
            fake.execute(sql)
            assert _fake_view(fake, "r") == _server_view(mariadb, "r"), sql
