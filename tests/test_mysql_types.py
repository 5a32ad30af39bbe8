"""Every MariaDB column type decodes from the binlog to what SELECT returns through pymysql (after the documented
conversions), for rows written by INSERT, changed by UPDATE (before and after images) and removed by DELETE."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest

from canal.parse.events import RowsEvent, TableMapEvent
from canal.parse.mysql import MysqlBinlogSource
from canal.parse.source import DumpRequest
from canal.protocol import EventType, SqlType

pytestmark = pytest.mark.integration

# name, definition, [value SQL for rows A (low), B (high), C (NULL), D (zero / odd)]
COLUMNS: list[tuple[str, str, list[str]]] = [
    ("ti", "TINYINT", ["-128", "127", "NULL", "0"]),
    ("tiu", "TINYINT UNSIGNED", ["0", "255", "NULL", "1"]),
    ("si", "SMALLINT", ["-32768", "32767", "NULL", "-1"]),
    ("siu", "SMALLINT UNSIGNED", ["0", "65535", "NULL", "1"]),
    ("mi", "MEDIUMINT", ["-8388608", "8388607", "NULL", "-1"]),
    ("miu", "MEDIUMINT UNSIGNED", ["0", "16777215", "NULL", "1"]),
    ("i", "INT", ["-2147483648", "2147483647", "NULL", "-1"]),
    ("iu", "INT UNSIGNED", ["0", "4294967295", "NULL", "1"]),
    ("bi", "BIGINT", ["-9223372036854775808", "9223372036854775807", "NULL", "-1"]),
    ("biu", "BIGINT UNSIGNED", ["0", "18446744073709551615", "NULL", "1"]),
    (
        "d65",
        "DECIMAL(65,30)",
        ["-" + "9" * 35 + "." + "9" * 30, "9" * 35 + "." + "9" * 30, "NULL", "-0.000000000000000000000000000001"],
    ),
    ("d10", "DECIMAL(10,0)", ["-9999999999", "9999999999", "NULL", "0"]),
    ("d52", "DECIMAL(5,2)", ["-999.99", "999.99", "NULL", "-0.5"]),
    ("d189", "DECIMAL(18,9)", ["-123456789.123456789", "0.000000001", "NULL", "100000000.5"]),
    ("d124", "DECIMAL(12,4) UNSIGNED", ["0", "99999999.9999", "NULL", "1.0001"]),
    ("f", "FLOAT", ["-1.5", "3.40282e38", "NULL", "0.1"]),
    ("db", "DOUBLE", ["-1.7976931348623157e308", "2.2250738585072014e-308", "NULL", "0.1"]),
    ("b1", "BIT(1)", ["b'0'", "b'1'", "NULL", "b'1'"]),
    ("b9", "BIT(9)", ["b'0'", "b'111111111'", "NULL", "b'100000001'"]),
    ("b64", "BIT(64)", ["0", "18446744073709551615", "NULL", "x'8000000000000001'"]),
    ("y", "YEAR", ["1901", "2155", "NULL", "0"]),
    ("dte", "DATE", ["'1000-01-01'", "'9999-12-31'", "NULL", "'0000-00-00'"]),
    ("dt0", "DATETIME", ["'1000-01-01 00:00:00'", "'9999-12-31 23:59:59'", "NULL", "'0000-00-00 00:00:00'"]),
    ("dt1", "DATETIME(1)", ["'2000-01-01 00:00:00.1'", "'9999-12-31 23:59:59.9'", "NULL", "'2020-00-00 00:00:00'"]),
    ("dt3", "DATETIME(3)", ["'1000-01-01 00:00:00.001'", "'9999-12-31 23:59:59.999'", "NULL", "'0000-00-00'"]),
    (
        "dt6",
        "DATETIME(6)",
        ["'1000-01-01 00:00:00.000001'", "'9999-12-31 23:59:59.999999'", "NULL", "'2021-02-03 04:05:06.5'"],
    ),
    ("ts0", "TIMESTAMP NULL", ["'1970-01-01 00:00:01'", "'2038-01-19 03:14:07'", "NULL", "'0000-00-00 00:00:00'"]),
    ("ts2", "TIMESTAMP(2) NULL", ["'2000-01-01 00:00:00.01'", "'2038-01-19 03:14:07.99'", "NULL", "'0000-00-00'"]),
    (
        "ts6",
        "TIMESTAMP(6) NULL",
        ["'1970-01-01 00:00:01.000001'", "'2038-01-19 03:14:07.999999'", "NULL", "'2001-02-03 04:05:06.7'"],
    ),
    ("tm0", "TIME", ["'-838:59:59'", "'838:59:59'", "NULL", "'00:00:00'"]),
    ("tm2", "TIME(2)", ["'-00:00:00.01'", "'838:59:59.99'", "NULL", "'-01:00:00.5'"]),
    ("tm4", "TIME(4)", ["'-12:34:56.0001'", "'00:00:00.0001'", "NULL", "'-00:00:01.9999'"]),
    ("tm6", "TIME(6)", ["'-838:59:58.999999'", "'838:59:59.000000'", "NULL", "'-00:00:00.000001'"]),
    ("c", "CHAR(10) CHARACTER SET utf8mb4", ["'a'", "'abc  '", "NULL", "''"]),
    ("vc", "VARCHAR(300) CHARACTER SET utf8mb4", ["'ü€😀'", "REPEAT('x', 300)", "NULL", "''"]),
    ("tx", "TEXT CHARACTER SET utf8mb4", ["''", "REPEAT('ab€', 5000)", "NULL", "'line\\nbreak'"]),
    ("lt", "LONGTEXT CHARACTER SET utf8mb4", ["'long'", "REPEAT('z', 70000)", "NULL", "''"]),
    # the five bytes cp1252 leaves undefined, which MySQL's latin1 maps to the same code points
    (
        "vl",
        "VARCHAR(20) CHARACTER SET latin1",
        ["'é'", "CONCAT('ÿþ€', CHAR(129, 141, 143, 144, 157 USING latin1))", "NULL", "''"],
    ),
    ("cl", "CHAR(5) CHARACTER SET latin1", ["'ab'", "'é'", "NULL", "''"]),
    ("tl", "TEXT CHARACTER SET latin1", ["'x€'", "'Ž'", "NULL", "''"]),
    ("vg", "VARCHAR(20) CHARACTER SET gbk", ["'中文'", "'汉字abc'", "NULL", "''"]),
    ("tg", "TEXT CHARACTER SET gbk", ["'汉字'", "REPEAT('中', 1000)", "NULL", "''"]),
    ("v3", "VARCHAR(20) CHARACTER SET utf8mb3", ["'ü€'", "'abc'", "NULL", "''"]),
    ("u16", "VARCHAR(20) CHARACTER SET utf16", ["'ü€😀'", "'abc'", "NULL", "''"]),
    ("c16", "CHAR(100) CHARACTER SET utf16", ["'😀'", "'x'", "NULL", "''"]),
    ("u2", "VARCHAR(20) CHARACTER SET ucs2", ["'ü€'", "'abc'", "NULL", "''"]),
    ("u32", "VARCHAR(20) CHARACTER SET utf32", ["'ü€😀'", "'abc'", "NULL", "''"]),
    ("ej", "VARCHAR(20) CHARACTER SET eucjpms", ["'日本語'", "'ｱｲｳ'", "NULL", "''"]),
    ("uj", "VARCHAR(20) CHARACTER SET ujis", ["'日本語'", "'かな'", "NULL", "''"]),
    ("sj", "VARCHAR(20) CHARACTER SET sjis", ["'日本語'", "'カナ'", "NULL", "''"]),
    ("mr", "VARCHAR(20) CHARACTER SET macroman", ["'é'", "'ü'", "NULL", "''"]),
    ("gr", "VARCHAR(20) CHARACTER SET greek", ["'αβγ'", "'Ω'", "NULL", "''"]),
    ("k8", "VARCHAR(20) CHARACTER SET koi8r", ["'абв'", "'Я'", "NULL", "''"]),
    ("l2", "VARCHAR(20) CHARACTER SET latin2", ["'ŕ'", "'ő'", "NULL", "''"]),
    ("b5", "VARCHAR(20) CHARACTER SET big5", ["'中文'", "'繁體'", "NULL", "''"]),
    ("ek", "VARCHAR(20) CHARACTER SET euckr", ["'한국어'", "'가'", "NULL", "''"]),
    ("c12", "VARCHAR(20) CHARACTER SET cp1251", ["'абв'", "'Ж'", "NULL", "''"]),
    ("bn", "BINARY(6)", ["x'01'", "x'0102030405ff'", "NULL", "x'00'"]),
    ("vb", "VARBINARY(20)", ["x''", "x'00ff00'", "NULL", "x'7f'"]),
    ("bl", "BLOB", ["x'00ff'", "REPEAT(x'00ff7f', 1000)", "NULL", "x''"]),
    ("mb", "MEDIUMBLOB", ["x''", "REPEAT(x'ab', 70000)", "NULL", "x'00'"]),
    ("e", "ENUM('a','b','c d')", ["'a'", "'c d'", "NULL", "''"]),
    ("s", "SET('x','y','z')", ["''", "'x,y,z'", "NULL", "'z,x'"]),
    ("j", "JSON", ["'{\"a\": [1, 2.5, null]}'", "'[]'", "NULL", "'\"s\"'"]),
    (
        "g",
        "GEOMETRY",
        [
            "ST_GeomFromText('POINT(0 0)')",
            "ST_GeomFromText('LINESTRING(0 0,1 1,2 3)')",
            "NULL",
            "ST_GeomFromText('POLYGON((0 0,1 0,1 1,0 0))')",
        ],
    ),
    ("pt", "POINT", ["ST_GeomFromText('POINT(1 2)')", "ST_GeomFromText('POINT(-1.5 2.25)')", "NULL", "NULL"]),
]
NAMES = [c[0] for c in COLUMNS]
GEOMETRY = {"g", "pt"}
TIMESTAMPS = {"ts0", "ts2", "ts6"}


def _expected(row: tuple[Any, ...]) -> dict[str, Any]:
    """A SELECT row (geometry as ST_AsBinary, session time zone UTC) in pycanal's documented value forms."""
    out: dict[str, Any] = {"id": row[0]}
    for (name, definition, _), value in zip(COLUMNS, row[1:], strict=True):
        if value is not None:
            if name in TIMESTAMPS and isinstance(value, dt.datetime):
                value = value.replace(tzinfo=dt.UTC)
            elif definition.startswith("BIT"):
                value = int.from_bytes(value, "big")
            elif definition.startswith("SET"):
                value = frozenset(value.split(",")) if value else frozenset()
        out[name] = value
    return out


def _select(conn: Any, table: str) -> dict[int, dict[str, Any]]:
    cols = ", ".join(f"ST_AsBinary(`{n}`)" if n in GEOMETRY else f"`{n}`" for n in NAMES)
    with conn.cursor() as cur:
        cur.execute(f"SELECT id, {cols} FROM {table} ORDER BY id")
        return {r[0]: _expected(r) for r in cur.fetchall()}


def _insert_sql(table: str, row_id: int, which: int) -> str:
    return f"INSERT INTO {table} (id, {', '.join(NAMES)}) VALUES ({row_id}, {', '.join(c[2][which] for c in COLUMNS)})"


def _update_sql(table: str, row_id: int, which: int) -> str:
    sets = ", ".join(f"`{c[0]}` = {c[2][which]}" for c in COLUMNS)
    return f"UPDATE {table} SET {sets} WHERE id = {row_id}"


def test_every_type_matches_select(mariadb: Any) -> None:
    table = f"`{mariadb.database}`.types"
    conn = mariadb.connect()
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = '', time_zone = '+00:00'")
        defs = ", ".join(f"`{n}` {d}" for n, d, _ in COLUMNS)
        cur.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, {defs}) CHARACTER SET utf8mb4")
        cur.execute("SHOW MASTER STATUS")
        start_file, start_pos = cur.fetchone()[:2]
        for row_id, which in ((1, 0), (2, 1), (3, 2), (4, 3)):
            cur.execute(_insert_sql(table, row_id, which))
        inserted = _select(conn, table)
        # every row takes another row's values: each column goes low->high, high->NULL, NULL->zero, zero->low
        cur.execute("BEGIN")
        for row_id, which in ((1, 1), (2, 2), (3, 3), (4, 0)):
            cur.execute(_update_sql(table, row_id, which))
        cur.execute("COMMIT")
        updated = _select(conn, table)
        cur.execute(f"DELETE FROM {table}")
    conn.close()
    assert len(inserted) == 4 and len(updated) == 4

    source = MysqlBinlogSource(mariadb.address, mariadb.user, mariadb.password)
    source.open()
    try:
        events = list(source.dump(DumpRequest(start_file, start_pos, blocking=False)))
    finally:
        source.close()
    rows = [
        (ev.event_type, r) for ev in events if isinstance(ev, RowsEvent) and ev.table.table == "types" for r in ev.rows
    ]
    maps = [ev for ev in events if isinstance(ev, TableMapEvent) and ev.table == "types"]
    assert maps
    assert [t for t, _ in rows] == [EventType.INSERT] * 4 + [EventType.UPDATE] * 4 + [EventType.DELETE] * 4

    def check(image: dict[str, Any], expected: dict[str, Any], what: str) -> None:
        mismatches = {
            k: (image[k], expected[k])
            for k in expected
            if image[k] != expected[k] or type(image[k]) is not type(expected[k])
        }
        assert not mismatches, f"{what}: (decoded, selected) differ: {mismatches}"

    for _, r in rows[:4]:
        assert r.before is None
        check(r.after_dict(), inserted[r.after_dict()["id"]], f"insert id={r.after_dict()['id']}")
    for _, r in rows[4:8]:
        row_id = r.after_dict()["id"]
        check(r.before_dict(), inserted[row_id], f"update before id={row_id}")
        check(r.after_dict(), updated[row_id], f"update after id={row_id}")
    for _, r in rows[8:]:
        assert r.after is None
        row_id = r.before_dict()["id"]
        check(r.before_dict(), updated[row_id], f"delete id={row_id}")

    schema = rows[0][1].table
    assert schema.names == ("id", *NAMES)
    assert schema.key_indexes == (0,)
    cols = {c.name: c for c in schema.columns}
    assert cols["biu"].unsigned and not cols["bi"].unsigned
    # canal's rule (canal.sql.types.canal_sql_type): unsigned integers one size wider, BIGINT UNSIGNED a DECIMAL
    assert cols["biu"].mysql_type == "bigint(20) unsigned" and cols["biu"].sql_type == SqlType.DECIMAL
    assert cols["d65"].mysql_type == "decimal(65,30)" and cols["d65"].sql_type == SqlType.DECIMAL
    assert cols["vc"].mysql_type == "varchar(300)" and cols["vc"].charset == "utf-8"
    assert cols["vl"].charset == "cp1252" and cols["vg"].charset == "gbk"
    # declared lengths come back from byte lengths divided by each charset's widest character
    assert cols["v3"].mysql_type == "varchar(20)" and cols["c16"].mysql_type == "char(100)"
    assert cols["u16"].charset == "utf-16-be" and cols["ej"].charset == "euc_jp" and cols["mr"].charset == "mac-roman"
    assert cols["bn"].charset is None and cols["bn"].mysql_type == "binary(6)"
    assert cols["e"].labels == ("a", "b", "c d") and cols["s"].labels == ("x", "y", "z")
    assert cols["dt6"].fsp == 6 and cols["dt6"].mysql_type == "datetime(6)"
    assert not cols["id"].nullable and cols["ti"].nullable
    assert (cols["tx"].mysql_type, cols["tx"].sql_type) == ("text", SqlType.CLOB)
    assert (cols["lt"].mysql_type, cols["mb"].mysql_type) == ("longtext", "mediumblob")
    assert (cols["bl"].mysql_type, cols["bl"].sql_type) == ("blob", SqlType.BLOB)
    assert cols["tm4"].mysql_type == "time(4)" and cols["ts6"].sql_type == SqlType.TIMESTAMP
    assert cols["pt"].mysql_type == "point" and cols["g"].mysql_type == "geometry"
    assert isinstance(rows[1][1].after_dict()["d65"], Decimal)


def test_random_values_match_select(mariadb: Any) -> None:
    """Seeded random values over the types with the most arithmetic in their decoding."""
    import random

    rnd = random.Random(20240521)
    table = f"`{mariadb.database}`.rnd"
    spec = [
        ("d", "DECIMAL(30,7)", lambda: f"{rnd.choice('-+')}{rnd.randrange(10**23)}.{rnd.randrange(10**7):07d}"),
        ("d2", "DECIMAL(9,9)", lambda: f"{rnd.choice('-+')}0.{rnd.randrange(10**9):09d}"),
        ("m", "MEDIUMINT", lambda: str(rnd.randrange(-(2**23), 2**23))),
        (
            "dt",
            "DATETIME(4)",
            lambda: (
                f"'{rnd.randrange(1000, 10000)}-{rnd.randrange(1, 13):02d}-"
                f"{rnd.randrange(1, 29):02d} {rnd.randrange(24):02d}:{rnd.randrange(60):02d}:{rnd.randrange(60):02d}."
                f"{rnd.randrange(10000):04d}'"
            ),
        ),
        ("ts", "TIMESTAMP(5) NULL", lambda: f"FROM_UNIXTIME({rnd.randrange(1, 2**31 - 1)}.{rnd.randrange(10**5):05d})"),
        (
            "t3",
            "TIME(3)",
            lambda: (
                f"'{rnd.choice(['-', ''])}{rnd.randrange(839):d}:{rnd.randrange(60):02d}:"
                f"{rnd.randrange(60):02d}.{rnd.randrange(1000):03d}'"
            ),
        ),
        (
            "t1",
            "TIME(1)",
            lambda: (
                f"'{rnd.choice(['-', ''])}{rnd.randrange(839):d}:{rnd.randrange(60):02d}:"
                f"{rnd.randrange(60):02d}.{rnd.randrange(10):d}'"
            ),
        ),
        ("f", "FLOAT", lambda: repr(rnd.uniform(-1e6, 1e6))),
        ("db", "DOUBLE", lambda: repr(rnd.uniform(-1e300, 1e300))),
        ("bt", "BIT(37)", lambda: str(rnd.randrange(2**37))),
        (
            "st",
            "SET('a','b','c','d','e','f','g','h','i')",
            lambda: "'" + ",".join(rnd.sample("abcdefghi", rnd.randrange(10))) + "'",
        ),
        (
            "v",
            "VARCHAR(40) CHARACTER SET utf8mb4",
            lambda: "'" + "".join(rnd.choice("aé€😀z ") for _ in range(rnd.randrange(40))) + "'",
        ),
    ]
    conn = mariadb.connect()
    with conn.cursor() as cur:
        cur.execute("SET SESSION time_zone = '+00:00'")
        cur.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, {', '.join(f'{n} {d}' for n, d, _ in spec)})")
        cur.execute("SHOW MASTER STATUS")
        start_file, start_pos = cur.fetchone()[:2]
        for chunk in range(5):
            values = []
            for i in range(chunk * 60, chunk * 60 + 60):
                cells = [("NULL" if rnd.random() < 0.1 else gen()) for _, _, gen in spec]
                values.append(f"({i}, {', '.join(cells)})")
            cur.execute(f"INSERT INTO {table} VALUES {', '.join(values)}")
        cur.execute(f"SELECT id, {', '.join(n for n, _, _ in spec)} FROM {table} ORDER BY id")
        selected = {}
        for row in cur.fetchall():
            expected: dict[str, Any] = {"id": row[0]}
            for (name, definition, _), value in zip(spec, row[1:], strict=True):
                if value is not None:
                    if definition.startswith("TIMESTAMP"):
                        value = value.replace(tzinfo=dt.UTC)
                    elif definition.startswith("BIT"):
                        value = int.from_bytes(value, "big")
                    elif definition.startswith("SET"):
                        value = frozenset(value.split(",")) if value else frozenset()
                expected[name] = value
            selected[row[0]] = expected
    conn.close()
    source = MysqlBinlogSource(mariadb.address, mariadb.user, mariadb.password)
    source.open()
    try:
        events = list(source.dump(DumpRequest(start_file, start_pos, blocking=False)))
    finally:
        source.close()
    decoded = {
        r.after_dict()["id"]: r.after_dict()
        for ev in events
        if isinstance(ev, RowsEvent) and ev.table.table == "rnd"
        for r in ev.rows
    }
    assert len(decoded) == 300
    for row_id, expected in selected.items():
        assert decoded[row_id] == expected, row_id


def test_the_decoder_and_the_fake_name_types_by_one_rule() -> None:
    """canal's JDBC types (RowsLogBuffer's, as LogEventConvert adjusts them), one table for the decoder and fake."""
    from canal.sql.types import canal_sql_type

    assert [canal_sql_type(b, unsigned=True) for b in ("tinyint", "smallint", "mediumint", "int", "bigint")] == [
        SqlType.SMALLINT,
        SqlType.INTEGER,
        SqlType.INTEGER,
        SqlType.BIGINT,
        SqlType.DECIMAL,
    ]
    assert canal_sql_type("year") == SqlType.VARCHAR and canal_sql_type("enum") == SqlType.INTEGER
    assert canal_sql_type("set") == SqlType.BIT and canal_sql_type("json") == SqlType.VARCHAR
    assert canal_sql_type("varbinary") == canal_sql_type("geometry") == canal_sql_type("blob") == SqlType.BLOB
    assert canal_sql_type("longtext") == SqlType.CLOB and canal_sql_type("text", binary=True) == SqlType.BLOB


@pytest.mark.parametrize(
    ("type_text", "arrow", "spark", "python"),
    [
        ("int(11)", "int64", "BIGINT", int),
        ("bigint(20) unsigned", "decimal128(20, 0)", "DECIMAL(20,0)", int),
        ("bit(64)", "decimal128(20, 0)", "DECIMAL(20,0)", int),
        ("bit(9)", "int64", "BIGINT", int),
        ("decimal(65,30)", "string", "STRING", Decimal),
        ("decimal(10,2) unsigned", "decimal128(10, 2)", "DECIMAL(10,2)", Decimal),
        ("double", "double", "DOUBLE", float),
        ("year(4)", "int64", "BIGINT", int),
        ("date", "date32[day]", "DATE", dt.date),
        ("timestamp(6)", "timestamp[us]", "TIMESTAMP_NTZ", dt.datetime),
        ("time(2)", "string", "STRING", dt.timedelta),
        ("varchar(20)", "string", "STRING", str),
        ("varchar(20) character set binary", "binary", "BINARY", bytes),
        ("longblob", "binary", "BINARY", bytes),
        ("point", "binary", "BINARY", bytes),
        ("set('a','b')", "string", "STRING", frozenset),
        ("enum('a','b')", "string", "STRING", str),
        ("longtext", "string", "STRING", str),
    ],
)
def test_one_type_model_names_the_python_arrow_and_spark_types(
    type_text: str, arrow: str, spark: str, python: type
) -> None:
    """The type model (canal.sql.types) gives a column type's Python value type and the exact stored type that the
    Spark side's Arrow and Spark SQL types both come from."""
    pytest.importorskip("pyarrow")
    from canal.lake.types import arrow_type, spark_type_sql
    from canal.sql import read_column_type
    from canal.sql.types import python_type

    assert (str(arrow_type(type_text)), spark_type_sql(type_text)) == (arrow, spark)
    assert python_type(read_column_type(type_text)) is python
