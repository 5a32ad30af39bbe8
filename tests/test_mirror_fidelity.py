"""Mirror fidelity: every MariaDB type at its limits lands in Delta exactly, through run_batches and DeltaMirror.

One table per type group, inserted, updated (every column, the primary key included) and deleted on the private
MariaDB; after each phase every Delta table equals ``SELECT *`` value for value. A value Arrow cannot hold exactly
fails the batch with MirrorTypeError naming table, column and value: zero dates do, unless the mirror is told to
store them as NULL.

Each test runs twice: through Spark (``run_batches`` hands the mirror DataFrames of change rows) and without it
(``spark=None``: the mirror gets typed batches, :class:`~canal.lake.forms.typed_batch.TypedBatch`, no JSON text
between).
"""

from __future__ import annotations

import datetime as dt
from decimal import Context, Decimal
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("deltalake")

import numpy as np
import pyarrow as pa

from canal.config import InstanceConfig, StoreConfig
from canal.spark import DeltaMirror, MirrorTypeError
from canal.spark.testing import master_position, run_caught_up
from canal.value_text import render_text

pytestmark = [pytest.mark.spark, pytest.mark.integration]


@pytest.fixture(params=["spark", "typed"])
def spark_or_none(request: pytest.FixtureRequest) -> Any:
    """A SparkSession (the plugin's ``spark``), or None: ``run_batches`` then hands the mirror typed batches."""
    return request.getfixturevalue("spark") if request.param == "spark" else None


BIG = "9" * 35 + "." + "9" * 30  # DECIMAL(65,30) max, as text: Decimal arithmetic would round it to 28 digits
EXACT = Context(prec=100)
TABLES: dict[str, str] = {
    "ints": """(id BIGINT UNSIGNED PRIMARY KEY, ti TINYINT, tu TINYINT UNSIGNED, si SMALLINT, mu MEDIUMINT UNSIGNED,
        i INT, iu INT UNSIGNED, bi BIGINT, bu BIGINT UNSIGNED, b1 BIT(1), b17 BIT(17), b64 BIT(64), y YEAR, bo BOOL)""",
    "nums": "(id INT PRIMARY KEY, d65 DECIMAL(65,30), d38 DECIMAL(38,10), d10 DECIMAL(10,2), f FLOAT, dbl DOUBLE)",
    "times": """(id INT PRIMARY KEY, dt6 DATETIME(6), dt0 DATETIME, d DATE, ts TIMESTAMP(6) NULL, t6 TIME(6),
        t0 TIME)""",
    "texts": """(id VARCHAR(10) CHARACTER SET utf8mb4 PRIMARY KEY, emoji VARCHAR(20) CHARACTER SET utf8mb4,
        latin VARCHAR(20) CHARACTER SET latin1, gbk VARCHAR(20) CHARACTER SET gbk, big5 VARCHAR(20) CHARACTER SET big5,
        ujis VARCHAR(20) CHARACTER SET ujis, ucs2 VARCHAR(20) CHARACTER SET ucs2, u16 VARCHAR(20) CHARACTER SET utf16,
        u32 VARCHAR(20) CHARACTER SET utf32, cp1251 VARCHAR(20) CHARACTER SET cp1251, txt LONGTEXT,
        en ENUM('a','b','ü'), st SET('x','y','z'), js JSON)""",
    "bins": """(id VARBINARY(8) PRIMARY KEY, b4 BINARY(4), vb VARBINARY(10), empty BLOB, big LONGBLOB,
        g GEOMETRY, p POINT)""",
}
BIT_WIDTHS = {"b1": 1, "b17": 17, "b64": 64}

ROWS: dict[str, list[tuple[Any, ...]]] = {
    "ints": [
        (0, -128, 0, -32768, 0, -(2**31), 0, -(2**63), 0, 0, 0, 0, 1901, 0),
        (
            2**64 - 1,
            127,
            255,
            32767,
            2**24 - 1,
            2**31 - 1,
            2**32 - 1,
            2**63 - 1,
            2**64 - 1,
            1,
            2**17 - 1,
            2**64 - 1,
            2155,
            1,
        ),
        (7, None, None, None, None, None, None, None, None, None, None, None, None, None),
    ],
    "nums": [
        (1, BIG, "9" * 28 + "." + "9" * 10, "99999999.99", 1.5, 1.7976931348623157e308),
        (2, "-" + BIG, "-" + "9" * 28 + "." + "9" * 10, "-99999999.99", -0.25, -2.2250738585072014e-308),
        (3, "0." + "0" * 29 + "1", "0", "0.01", 0.0, 5e-324),
    ],
    "times": [
        (
            1,
            "9999-12-31 23:59:59.999999",
            "9999-12-31 23:59:59",
            "9999-12-31",
            "2038-01-19 03:14:07.999999",
            "838:59:59.000000",
            "838:59:59",
        ),
        (
            2,
            "1000-01-01 00:00:00.000000",
            "1000-01-01 00:00:00",
            "1000-01-01",
            "1970-01-01 00:00:01.000000",
            "-838:59:59.000000",
            "-838:59:59",
        ),
        (3, "2024-02-29 12:34:56.000001", None, None, None, "-00:00:00.000001", "00:00:00"),
    ],
    "texts": [
        (
            "a",
            "😀🎉 𝄞",
            "café ÿ",
            "中文字",
            "中文字",
            "日本語",
            "ÅΩ€",
            "𝄞 ok",
            "🎉",
            "Привет",
            "x" * 70000,
            "ü",
            "x,z",
            '{"k": [1, 2.5, "é"]}',
        ),
        ("b", "", "", "", "", "", "", "", "", "", "", "a", "", "null"),
        ("c", None, None, None, None, None, None, None, None, None, None, None, None, None),
    ],
    "bins": [
        (b"\x00\xff", b"\x00\x00\x00\x00", b"\xff" * 10, b"", bytes(range(256)) * 4096, "POINT(1 2)", "POINT(-1.5 0)"),
        (b"\x01", b"ab", b"", b"", b"", "LINESTRING(0 0, 1 1, 2 0)", "POINT(0 0)"),
        (b"\x02", None, None, None, None, None, None),
    ],
}
GEOMETRY_COLUMNS = {"g", "p"}


def _insert(cur: Any, db: str, table: str, row: tuple[Any, ...]) -> None:
    if table == "bins":  # geometries from WKT
        marks = ", ".join("ST_GeomFromText(%s)" if i >= 5 else "%s" for i in range(len(row)))
    elif table == "ints":  # BIT values as numbers
        marks = ", ".join(
            "CAST(%s AS UNSIGNED)" if i in (9, 10, 11) and row[i] is not None else "%s" for i in range(len(row))
        )
    else:
        marks = ", ".join(["%s"] * len(row))
    cur.execute(f"INSERT INTO {db}.{table} VALUES ({marks})", row)


def _config(mariadb: Any, start: tuple[str, int], meta_dir: Path) -> InstanceConfig:
    return InstanceConfig(
        destination="fidelity",
        master=mariadb.master(start),
        filter_regex=rf"{mariadb.database}\..*",
        store=StoreConfig(batch_mode="ITEMSIZE"),
        meta_mode="file",
        meta_dir=str(meta_dir),
    )


def _value(column: str, value: Any) -> Any:
    """A cell in one comparable form: BIT bytes as their number, everything else as canal text (exact: decimals
    keep every digit, datetimes every microsecond, binary every byte)."""
    if value is None:
        return None
    if column in BIT_WIDTHS and isinstance(value, bytes):
        return int.from_bytes(value, "big")
    if column in BIT_WIDTHS:
        return int(value)
    if isinstance(value, bytes):
        return value
    if isinstance(value, int | Decimal):  # BIGINT UNSIGNED is a decimal(20,0) in the mirror, an int here
        return Decimal(value).normalize(EXACT)
    if isinstance(value, str) and column.startswith("d") and value.lstrip("-")[:1].isdigit() and "." in value:
        return Decimal(value).normalize(EXACT)  # DECIMAL beyond 38 digits is kept as its exact text
    if isinstance(value, set):
        return ",".join(sorted(value))
    if isinstance(value, dt.timedelta):  # TIME as the server prints it: exactly its declared fraction digits
        whole, _, fraction = render_text(value).partition(".")
        fsp = int(column[1:]) if column[1:].isdigit() else 0
        return whole + ("." + fraction.ljust(6, "0")[:fsp] if fsp else "")
    return render_text(value)


def _assert_equal(conn: Any, mirror: DeltaMirror, db: str, table: str) -> None:
    with conn.cursor() as cur:
        # geometries as WKB (ST_AsBinary: what the decoder hands out, without the SRID prefix MySQL stores)
        columns = "id, b4, vb, empty, big, ST_AsBinary(g) AS g, ST_AsBinary(p) AS p" if table == "bins" else "*"
        cur.execute(f"SELECT {columns} FROM {db}.{table}")
        names = [d[0] for d in cur.description]
        source = {_value("id", row[0]): dict(zip(names, row, strict=True)) for row in cur.fetchall()}
    if not (mirror.table_path(db, table)).exists():
        assert source == {}
        return
    mirrored = {_value("id", row["id"]): row for row in mirror.read(db, table).to_pylist()}
    assert sorted(map(repr, mirrored)) == sorted(map(repr, source)), table
    for key, want in source.items():
        got = mirrored[key]
        for name in names:
            assert _value(name, got[name]) == _value(name, want[name]), (table, key, name, got[name], want[name])


def test_every_type_at_its_limits_lands_exactly(mariadb: Any, spark_or_none: Any, tmp_path: Path) -> None:
    conn = mariadb.connect()
    spark = spark_or_none
    db = mariadb.database
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
    start = master_position(conn)
    cfg = _config(mariadb, start, tmp_path / "meta")
    mirror = DeltaMirror(tmp_path / "mirror")
    with conn.cursor() as cur:
        for table, columns in TABLES.items():
            cur.execute(f"CREATE TABLE {db}.{table} {columns}")
        for table, rows in ROWS.items():
            for row in rows:
                _insert(cur, db, table, row)
    conn.commit()
    run_caught_up(conn, cfg, spark, mirror)
    for table in TABLES:
        _assert_equal(conn, mirror, db, table)

    # update every column, the primary key included: the limits move to other rows
    with conn.cursor() as cur:
        cur.execute(
            f"UPDATE {db}.ints SET id = id - 1, ti = -ti - 1, bu = 2 * 0 + 18446744073709551614, b64 = b64 - 1 "
            "WHERE id = 18446744073709551615"
        )
        cur.execute(
            f"UPDATE {db}.ints SET id = 5, ti = 1, tu = 2, si = 3, mu = 4, i = 5, iu = 6, bi = 7, bu = 8, "
            "b1 = 1, b17 = 9, b64 = 18446744073709551615, y = 2000, bo = 1 WHERE id = 7"
        )
        cur.execute(
            f"UPDATE {db}.nums SET id = 20, d65 = -d65, d38 = d38 / 3, d10 = -d10, f = 2.5, dbl = -dbl WHERE id = 2"
        )
        cur.execute(
            f"UPDATE {db}.times SET id = 30, dt6 = '1000-01-01 00:00:00.000001', dt0 = NULL, "
            "d = '2000-02-29', ts = '2038-01-19 03:14:07.000000', t6 = '-838:59:58.999999', t0 = '12:00:00' "
            "WHERE id = 1"
        )
        cur.execute(
            f"UPDATE {db}.texts SET id = 'z', emoji = '👍', latin = 'é', gbk = '字', big5 = '字', "
            "ujis = '語', ucs2 = 'Ω', u16 = '😀', u32 = '𝄞', cp1251 = 'Я', txt = 'short', en = 'b', "
            "st = 'x,y,z', js = '[]' WHERE id = 'a'"
        )
        cur.execute(
            f"UPDATE {db}.bins SET id = x'ff', b4 = x'01020304', vb = x'00', empty = x'', big = x'00', "
            "g = ST_GeomFromText('POLYGON((0 0, 1 0, 1 1, 0 0))'), p = ST_GeomFromText('POINT(9 9)') "
            "WHERE id = x'01'"
        )
    conn.commit()
    run_caught_up(conn, cfg, spark, mirror)
    for table in TABLES:
        _assert_equal(conn, mirror, db, table)

    with conn.cursor() as cur:
        cur.execute(f"DELETE FROM {db}.ints WHERE id = 0")
        cur.execute(f"DELETE FROM {db}.nums WHERE id = 1")
        cur.execute(f"DELETE FROM {db}.times WHERE id = 2")
        cur.execute(f"DELETE FROM {db}.texts WHERE id = 'b'")
        cur.execute(f"DELETE FROM {db}.bins WHERE id = x'00ff'")
    conn.commit()
    run_caught_up(conn, cfg, spark, mirror)
    for table in TABLES:
        _assert_equal(conn, mirror, db, table)
    conn.close()


def test_zero_dates_fail_the_batch_by_name_unless_stored_as_null(
    mariadb: Any, spark_or_none: Any, tmp_path: Path
) -> None:
    conn = mariadb.connect()
    spark = spark_or_none
    db = mariadb.database
    with conn.cursor() as cur:
        cur.execute("SET sql_mode = ''")  # MariaDB accepts zero dates only outside the strict modes
    start = master_position(conn)
    cfg = _config(mariadb, start, tmp_path / "meta")
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {db}.zeros (id INT PRIMARY KEY, d DATE, dt DATETIME(6))")
        cur.execute(f"INSERT INTO {db}.zeros VALUES (1, '0000-00-00', '2024-01-02 03:04:05.000006')")
        cur.execute(f"INSERT INTO {db}.zeros VALUES (2, '2024-01-02', '0000-00-00 00:00:00.000000')")
        # year 0 with a month and a day is no zero date: a value in both mirrors, beside the zero dates
        cur.execute(f"INSERT INTO {db}.zeros VALUES (3, '0000-01-01', '0000-01-01 10:00:00.500000')")
    conn.commit()
    strict = DeltaMirror(tmp_path / "strict")
    with pytest.raises(MirrorTypeError, match=rf"{db}\.zeros: column 'd': zero date '0000-00-00'"):
        run_caught_up(conn, cfg, spark, strict)
    assert not strict.table_path(db, "zeros").exists()

    lenient = DeltaMirror(tmp_path / "lenient", zero_dates="null")
    run_caught_up(conn, _config(mariadb, start, tmp_path / "meta2"), spark, lenient)
    read = lenient.read(db, "zeros").sort_by("id")
    rows = read.slice(0, 2).to_pylist()  # Python's datetime holds no year 0: row 3 is read as Arrow's integers
    assert rows == [
        {"id": 1, "d": None, "dt": dt.datetime(2024, 1, 2, 3, 4, 5, 6)},
        {"id": 2, "d": dt.date(2024, 1, 2), "dt": None},
    ]
    assert read.column("id")[2].as_py() == 3
    assert read.column("d").cast(pa.int32())[2].as_py() == np.datetime64("0000-01-01", "D").astype(np.int64)
    year0 = np.datetime64("0000-01-01T10:00:00.5", "us").astype(np.int64)
    assert read.column("dt").cast(pa.int64())[2].as_py() == year0
    conn.close()
