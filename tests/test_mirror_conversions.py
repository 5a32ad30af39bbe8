"""The value conversions of an ALTER the mirror models (canal.lake.ddl.converters), each against what MariaDB 10.11 made
of the same value under ``sql_mode=''`` (measured by hand; tests/test_mirror_conversions_mariadb.py plays them against
the server), the allow-list and its stops (canal.lake.ddl.conversions), and a batch stopped before it writes
anything."""

from __future__ import annotations

import datetime as dt
import json
import pickle
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from canal.lake.ddl import converters as cv
from canal.lake.ddl.conversions import MODELED, Conversion, family, fractions_rule
from canal.lake.ddl.time_zones import StatementZone
from canal.lake.types import MirrorConversionError, MirrorTypeError
from canal.sql import read_column_type

MARIADB = "10.11.19-MariaDB-0+deb12u1-log"


def t(text: str) -> Any:
    return read_column_type(text, strict=False)


def conversion(old: str | None, new: str | None, *, nullable: bool = True, fractions: str | None = "truncate") -> Any:
    sql = f"ALTER TABLE t MODIFY c {new}"
    zone = StatementZone(None, None, "s.t", sql)
    return Conversion("s.t", "c", "c", old, new, nullable, sql, zone, fractions)


@pytest.mark.parametrize(
    ("value", "target", "expected"),
    [
        (Decimal("2.50"), "int", 3),  # DECIMAL: half away from zero
        (Decimal("-2.50"), "int", -3),
        (Decimal("-0.50"), "int", -1),
        (Decimal("-2.50"), "int unsigned", 0),
        (2.5, "int", 2),  # DOUBLE: rint, half to even
        (3.5, "int", 4),
        (-2.5, "int", -2),
        (1e30, "int", 2147483647),
        (-1e30, "int", -2147483648),
        (1000, "tinyint", 127),
        (-5, "int unsigned", 0),
    ],
)
def test_numbers_into_integers(value: Any, target: str, expected: int) -> None:
    assert cv.to_integer(value, t(target)) == expected


def test_a_double_at_or_past_2_63_into_bigint_unsigned_is_not_modeled() -> None:
    with pytest.raises(cv.Unmodeled):  # the server gave 9223372036854775807 for 1e30
        cv.to_integer(1e30, t("bigint unsigned"))


@pytest.mark.parametrize(
    ("value", "target", "expected"),
    [
        (1000, "decimal(3,1)", "99.9"),
        (-1000, "decimal(3,1)", "-99.9"),
        (Decimal("-1.2350"), "decimal(10,2)", "-1.24"),
        (Decimal("1.2345"), "decimal(10,2)", "1.23"),
        (Decimal("999999.9999"), "decimal(10,2)", "1000000.00"),
        (Decimal("12345678.99"), "decimal(4,2)", "99.99"),
        (Decimal("-0.0050"), "decimal(10,2)", "-0.01"),
        (1.005, "decimal(10,2)", "1.01"),  # a DOUBLE through its shortest text
        (2.675, "decimal(10,2)", "2.68"),
        (0.30000000000000004, "decimal(20,17)", "0.30000000000000004"),
        (0.1, "decimal(20,17)", "0.10000000000000000"),
        (1e300, "decimal(10,2)", "99999999.99"),
        (9223372036854775807, "decimal(40,10)", "9223372036854775807.0000000000"),
        (Decimal("-0.001"), "decimal(5,2)", "0.00"),
        (-5, "decimal(5,2) unsigned", "0.00"),
    ],
)
def test_numbers_into_decimals(value: Any, target: str, expected: str) -> None:
    assert cv.decimal_text(cv.to_decimal(value, t(target))) == expected


def test_decimal_bounds_hold_sixty_five_digits() -> None:
    low, high, scale = cv.decimal_bounds(t("decimal(65,30)"))
    assert (str(low), str(high), scale) == ("-" + "9" * 35 + "." + "9" * 30, "9" * 35 + "." + "9" * 30, 30)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1e300, 3.40282e38), (-1e300, -3.40282e38), (1e-50, 0.0), (123456789.123, 123457000.0), (16777217, 16777200.0)],
)
def test_numbers_into_float(value: Any, expected: float) -> None:
    assert cv.to_float(value) == expected


@pytest.mark.parametrize(
    ("text", "integer", "decimal"),
    [
        ("12abc", 12, "12.00"),
        (" 42 ", 42, "42.00"),
        ("1.5", 1, "1.50"),  # an integer takes digits only
        ("-3.5e1", -3, "-35.00"),
        ("abc", 0, "0.00"),
        ("", 0, "0.00"),
        ("0x10", 0, "0.00"),
        ("1e3", 1, "1000.00"),
        ("  -7", -7, "-7.00"),
        ("+8", 8, "8.00"),
        (".5", 0, "0.50"),
        ("5.", 5, "5.00"),
        ("1,000", 1, "1.00"),
        ("\t5", 5, "5.00"),
        ("12.345abc", 12, "12.35"),
        ("1.005", 1, "1.01"),
        ("ünïcödé", 0, "0.00"),
        ("é5", 0, "0.00"),
    ],
)
def test_text_read_as_a_number(text: str, integer: int, decimal: str) -> None:
    assert cv.text_integer(text) == integer
    assert cv.decimal_text(cv.to_decimal(cv.text_decimal(text), t("decimal(6,2)"))) == decimal


@pytest.mark.parametrize("text", ["\n5", "\u00a05", "\uff15", "-x", "+", ".e1"])
def test_text_the_mirror_may_read_otherwise_is_not_modeled(text: str) -> None:
    with pytest.raises(cv.Unmodeled):
        cv.text_integer(text)


@pytest.mark.parametrize(
    ("value", "year"),
    [(0, 0), (1, 2001), (69, 2069), (70, 1970), (99, 1999), (100, 0), (1900, 0), (2155, 2155), (-1, 0)],
)
def test_integers_into_year(value: int, year: int) -> None:
    assert cv.to_year(value) == year


def test_integers_into_bit_and_labels() -> None:
    assert [cv.to_bit(v, t("bit(8)")) for v in (300, 5, -1)] == [255, 5, 255]
    labels = ("b", "a", "c")
    assert [cv.enum_of_index(v, labels) for v in (0, 1, 2, 3, 4, -1)] == ["", "b", "a", "c", "", ""]
    assert [cv.set_of_bitmap(v, ("x", "y", "z")) for v in (0, 5, 8, -1)] == ["", "x,z", "", "x,y,z"]
    assert cv.enum_index("a", labels) == 2 and cv.set_bitmap("x,z", ("x", "y", "z")) == 5


def test_labels_by_their_text() -> None:
    assert cv.label_of("a", ("c", "a", "x")) == "a"
    assert cv.label_of("b", ("c", "a", "x")) is None  # '' in an ENUM
    assert cv.label_of("a ", ("b", "a")) == "a"
    assert cv.set_labels("x,z", ("z", "y", "x")) == "z,x"
    assert cv.set_labels("x,z", ("z", "w")) == "z"
    for unsure in ("A", "2", "é", "ä"):  # the collation, or an index, decides: not modeled
        with pytest.raises(cv.Unmodeled):
            cv.label_of(unsure, ("a", "b"))


def test_charsets() -> None:
    assert cv.in_charset("aé€😀Ω", "latin1") == "aé€??"
    assert cv.in_charset("aé€😀Ω", "utf8mb3") == "aé€?Ω"
    assert cv.in_charset("aé€😀Ω", "ascii") == "a????"
    assert cv.encoded("aé€", "latin1") == b"a\xe9\x80"  # MariaDB's latin1 is cp1252
    assert cv.decoded(b"\xff\x81", "latin1") == "ÿ\x81"  # cp1252's gaps: the C1 control of the same code
    with pytest.raises(cv.Unmodeled):
        cv.decoded(b"\xff\x00", "utf8mb4")


def test_lengths() -> None:
    assert cv.text_fit("ü" * 200, t("tinytext character set utf8mb4")) == "ü" * 127  # 255 bytes, at a character
    assert cv.text_fit("😀" * 100, t("tinytext character set utf8mb4")) == "😀" * 63
    assert cv.text_fit("abcdef  ", t("char(4)")) == "abcd"
    assert cv.text_fit("ab  ", t("char(5)")) == "ab" and cv.text_fit("  ab", t("char(5)")) == "  ab"
    assert (
        cv.bytes_fit(b"ab", t("binary(6)")) == b"ab\0\0\0\0" and cv.bytes_fit(b"abcdef", t("varbinary(4)")) == b"abcd"
    )


def test_fractions_and_times() -> None:
    us = 10**6
    assert cv.narrow_fraction(36000 * us + 999999, 0, "truncate", False) == 36000 * us
    assert cv.narrow_fraction(36000 * us + 999999, 0, "round", False) == 36001 * us
    assert cv.narrow_fraction(-(36000 * us + 500000), 0, "truncate", True) == -36000 * us  # TIME: towards zero
    assert cv.narrow_fraction(-(36000 * us + 500000), 0, "round", True) == -36001 * us
    with pytest.raises(cv.Unmodeled):
        cv.narrow_fraction(36000 * us + 1, 0, None, False)  # digits cut under a sql_mode the mirror does not know
    assert cv.time_text(cv.narrow_fraction(cv.time_micros("838:59:59.999999"), 3, "round", True), 3) == "838:59:59.999"
    assert cv.time_text(cv.time_micros("-00:00:01.5"), 6) == "-00:00:01.500000"
    assert cv.datetime_text(-62167219200 * us, 0) == "0000-01-01 00:00:00"  # year 0
    assert cv.datetime_text(253402300799 * us + 900000, 1) == "9999-12-31 23:59:59.9"


def test_the_sql_mode_says_how_fractions_are_cut() -> None:
    assert fractions_rule({"SQL_MODE": str(1 << 34), "SERVER_VERSION": MARIADB}) == "round"
    assert fractions_rule({"SQL_MODE": str(1 << 21), "SERVER_VERSION": MARIADB}) == "truncate"
    assert fractions_rule({"SERVER_VERSION": MARIADB}) is None
    assert fractions_rule({"SQL_MODE": "0", "SERVER_VERSION": "8.0.36"}) is None  # MySQL: not measured


def _apply(old: str, new: str, values: list[Any], arrow: Any, **options: Any) -> list[Any]:
    zero_dates = options.pop("zero_dates", "error")
    return conversion(old, new, **options).apply(pa.array(values, arrow), zero_dates).to_pylist()


def test_modeled_conversions_of_columns() -> None:
    uuid = "6ccd780c-baba-1026-9564-5b8c656024db"
    padded = bytes.fromhex(uuid.replace("-", "")) + b"\0" * 20
    assert _apply("uuid", "binary(36)", [uuid, None], pa.string()) == [padded, None]
    assert _apply("inet4", "varbinary(10)", ["1.2.3.4"], pa.string()) == [b"\x01\x02\x03\x04"]
    assert _apply("char(36) character set utf8mb4", "uuid", [uuid.upper()], pa.string()) == [uuid]
    assert _apply("varchar(10) character set utf8mb4", "varbinary(20)", ["aé"], pa.string()) == [b"a\xc3\xa9"]
    assert _apply("varchar(10) character set latin1", "varbinary(20)", ["aé€"], pa.string()) == [b"a\xe9\x80"]
    assert _apply("bit(8)", "varchar(4) character set utf8mb4", [65, 5], pa.int64()) == ["65", "5"]
    assert _apply("year(4)", "varchar(4) character set utf8mb4", [0, 2024], pa.int64()) == ["0000", "2024"]
    assert _apply("enum('b','a','c') character set utf8mb4", "int(11)", ["a", "b", ""], pa.string()) == [2, 1, 0]
    assert _apply("set('x','y','z') character set utf8mb4", "int(11)", ["x,z", ""], pa.string()) == [5, 0]
    assert _apply("double", "float", [1e300, 1.1], pa.float64()) == [3.40282e38, 1.1]
    assert _apply("decimal(10,4)", "decimal(10,2)", [Decimal("-1.2350")], pa.decimal128(10, 4)) == [Decimal("-1.24")]
    moments = [dt.datetime(2024, 1, 1, 10, 0, 0, 999999), dt.datetime(2038, 1, 19, 3, 14, 7, 700000)]
    stamps = pa.array(moments, pa.timestamp("us"))
    truncated = conversion("datetime(6)", "timestamp", fractions="truncate").apply(stamps, "null").cast(pa.int64())
    rounded = conversion("datetime(6)", "timestamp", fractions="round").apply(stamps, "null").cast(pa.int64())
    assert truncated.to_pylist() == [1704103200 * 10**6, 2147483647 * 10**6]
    assert rounded.to_pylist() == [1704103201 * 10**6, None]  # 03:14:08 is past TIMESTAMP's range: the zero one
    with pytest.raises(MirrorTypeError, match="zero_dates='null'"):
        conversion("datetime(6)", "timestamp", fractions="round").apply(stamps, "error")
    assert _apply("datetime(6)", "time(3)", moments[:1], pa.timestamp("us")) == ["10:00:00.999"]
    # BIT: its number in a CHAR / VARCHAR / (VAR)BINARY, its bytes in a TEXT or BLOB type (measured)
    assert _apply("bit(64)", "text character set latin1", [Decimal(65)], pa.decimal128(20, 0)) == ["\0" * 7 + "A"]
    assert _apply("bit(8)", "blob", [1], pa.int64()) == [b"\x01"]


def test_a_column_made_not_null_takes_its_type_zero_value() -> None:
    assert _apply("int(11)", "int(11)", [None, 1], pa.int64(), nullable=False) == [0, 1]
    assert _apply(
        "enum('b','a') character set utf8mb4",
        "enum('b','a') character set utf8mb4",
        [None],
        pa.string(),
        nullable=False,
    ) == [""]
    assert _apply("uuid", "uuid", [None], pa.string(), nullable=False) == ["00000000-0000-0000-0000-000000000000"]
    assert _apply("time", "time", [None], pa.string(), nullable=False) == ["00:00:00"]
    assert _apply("binary(3)", "binary(3)", [None], pa.binary(), nullable=False) == [b"\0\0\0"]
    assert _apply("date", "date", [None], pa.date32(), nullable=False, zero_dates="null") == [None]  # the zero date
    with pytest.raises(MirrorConversionError, match="zero_dates='null'"):
        _apply("date", "date", [None], pa.date32(), nullable=False)
    with pytest.raises(MirrorConversionError, match="the current time"):
        _apply("timestamp", "timestamp", [None], pa.timestamp("us"), nullable=False)


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        ("float", "double", "FLOAT to DOUBLE is not a conversion the mirror models"),  # SELECT shows float32 digits
        ("float(7,3)", "decimal(10,2)", "FLOAT to DECIMAL"),
        ("double", "float(7,3)", "FLOAT(M,D) rounds to its decimals"),
        ("double", "double(10,2)", "DOUBLE(M,D)"),
        ("double", "varchar(30) character set utf8mb4", "DOUBLE to TEXT"),
        ("time", "datetime", "TIME to DATETIME is not a conversion the mirror models"),
        ("binary(16)", "uuid", "BINARY to UUID"),
        ("varchar(10) character set utf8mb4", "varchar(10) character set cp1251", "charset cp1251"),
        ("varchar(10) character set big5", "varbinary(10)", "big5 as bytes"),
        ("geometry", "point", "GEOMETRY to GEOMETRY is not a conversion"),
    ],
)
def test_a_pair_not_modeled_is_a_typed_stop(old: str, new: str, why: str) -> None:
    with pytest.raises(MirrorConversionError) as stop:
        conversion(old, new).check()
    assert why in str(stop.value), str(stop.value)
    assert (stop.value.table, stop.value.column, stop.value.from_type, stop.value.to_type) == ("s.t", "c", old, new)
    assert stop.value.statement == f"ALTER TABLE t MODIFY c {new}"
    again = pickle.loads(pickle.dumps(stop.value))  # a Spark task's error reaches the driver whole
    assert (type(again), again.table, again.to_type, str(again)) == (MirrorConversionError, "s.t", new, str(stop.value))


def test_every_modeled_pair_is_between_families() -> None:
    families = {family(t(text)) for text in ("int", "decimal", "float", "double", "bit", "year", "date", "datetime",
                                             "timestamp", "time", "text", "blob", "enum('a')", "set('a')", "uuid",
                                             "inet6", "inet4", "json", "geometry", "vector")}  # fmt: skip
    assert {f for pair in MODELED for f in pair} <= families
    assert ("time", "datetime") not in MODELED and not any(source == "float" for source, _target in MODELED)


def test_a_column_of_nulls_converts_whatever_the_types() -> None:
    assert _apply("float", "double", [None, None], pa.float64()) == [None, None]  # FLOAT to DOUBLE: no value, no stop
    assert _apply("time", "datetime", [], pa.string()) == []
    with pytest.raises(MirrorConversionError, match="may be a zero date"):  # a NULL date may be a zero date
        _apply("date", "varchar(10) character set utf8mb4", [None], pa.date32(), zero_dates="null")


def test_a_type_before_unknown_converts_only_where_the_stored_kind_decides() -> None:
    assert _apply(None, "tinyint(4)", [1000, None], pa.int64()) == [127, None]  # any integer, YEAR or BIT: a number
    with pytest.raises(MirrorConversionError, match="type before the statement is unknown"):
        _apply(None, "varchar(3)", ["abcdef"], pa.string())


def test_an_unmodeled_pair_the_history_names_stops_the_batch_before_it_writes(tmp_path: Path) -> None:
    from mirror_rows import CREATE, batch, ddl, upsert, values

    from canal.spark import DeltaMirror

    mirror = DeltaMirror(tmp_path / "mirror")
    mirror.apply(batch(ddl("t", "CREATE", CREATE.format(table="t")), upsert("t", 1, "x")), 1)
    types = {"RETYPED_FROM": json.dumps({"v": "varchar(20)"}), "RETYPED_TO": json.dumps({"v": "time"})}
    stopped = batch(upsert("t", 2, "y"), ddl("t", "ALTER", "ALTER TABLE t MODIFY v TIME", props=types))
    with pytest.raises(MirrorConversionError, match="TEXT to TIME") as stop:
        mirror.apply(stopped, 2)
    assert stop.value.table == "s.t" and stop.value.column == "v"
    assert values(mirror.read("s", "t")) == {1: "x"}  # nothing of the batch: not even the row before the ALTER
    mirror.close()
    # a table created in the batch holds no value to convert: its ALTER converts nothing, whatever the types
    fresh = DeltaMirror(tmp_path / "fresh")
    fresh.apply(
        batch(
            ddl("t", "CREATE", CREATE.format(table="t")), ddl("t", "ALTER", "ALTER TABLE t MODIFY v TIME", props=types)
        ),
        1,
    )
    assert fresh.read("s", "t").num_rows == 0 and fresh.read("s", "t").column_names == ["id", "v"]
    fresh.close()


def test_the_contract_page_holds_the_generated_conversions_table() -> None:
    import re

    from canal.lake.ddl.conversions import conversions_table

    page = (Path(__file__).parent.parent / "docs" / "concepts" / "fail-closed.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- contract:conversions -->\n(.*?)<!-- /contract:conversions -->", page, re.S)
    assert found is not None, "the page marks its generated table"
    assert found.group(1) == conversions_table(), "regenerate it from canal.lake.ddl.conversions.conversions_table()"
