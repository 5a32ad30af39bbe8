"""Every value conversion an ALTER makes, against a real MariaDB (hypothesis): a table with a few columns of random
source types holding random values (NULL, extremes, zero dates, fractions, non-ASCII text, labels, addresses) is
mirrored, then each column is changed to a random target type by ``ALTER TABLE ... MODIFY`` under ``sql_mode=''`` or
the strict default, and mirrored again -- through change rows or typed batches. After each ALTER the mirror equals
``SELECT``, or it stopped with a :class:`~canal.lake.types.MirrorConversionError` naming the table, the column, both
types and the statement, with nothing of the ALTER written (the table as it was before). A strict ALTER the server
refuses logs nothing: there is nothing to follow.

CI plays ``PYCANAL_CONVERSION_EXAMPLES`` examples, half through each path (default 24, about 20 s here); a longer
run sets it higher, without pytest's timeout: ``PYCANAL_CONVERSION_EXAMPLES=3000 pytest --timeout=0 -k every
tests/test_mirror_conversions_mariadb.py``. A failure prints the SQL.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pymysql
import pytest
from hypothesis import example, given, note
from hypothesis import strategies as st
from random_schema_workload import fuzz_settings

pytest.importorskip("deltalake")

from capture_configs import capture_config

from canal.lake.forms.cell_text import server_text
from canal.lake.types import MirrorConversionError
from canal.spark import DeltaMirror, compare
from canal.spark.testing import master_position, run_caught_up
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration

EXAMPLES = int(os.environ.get("PYCANAL_CONVERSION_EXAMPLES", "24"))

_INTS = ["0", "1", "-1", "5", "69", "70", "127", "-128", "255", "1000", "2024", "-5", "2147483647", "NULL"]
_WIDE = ["9223372036854775807", "-9223372036854775808", "18446744073709551615", "65", "NULL", "0", "3"]
_DECIMALS = ["0", "-0.005", "1.2345", "2.5", "-2.5", "99.99", "1234.5678", "-0.5", "69.5", "2024.4999", "NULL"]
_FLOATS = ["1.1", "0.1", "-2.5", "3.5", "1e30", "1e-10", "123456789", "0", "-0.0", "1.005", "NULL"]
_TEXTS = [
    "'abc'", "''", "'ab  '", "'  ab'", "'12abc'", "' 42 '", "'1.5'", "'-3.5e1'", "'ünïcödé'", "'é€😀'", "'a'",
    "'b'", "'x,z'", "'A'", "'abcdefghijkl'", "'2'", "'6ccd780c-baba-1026-9564-5b8c656024db'", "'::1'", "'1.2.3.4'",
    "'2024-01-01'", "'{\"a\": 1}'", "'1e3'", "'\\t5'", "'99999999999999999999'", "NULL",
]  # fmt: skip
_BYTES = ["X'00FF10'", "X'61C3A9'", "X'6162'", "''", "X'00'", "X'41'", "NULL"]
_DATES = ["'2024-02-29'", "'1000-01-01'", "'0000-00-00'", "'9999-12-31'", "'1970-01-01'", "'2000-01-01'", "NULL"]
_DATETIMES = [
    "'2024-01-01 10:00:00.5'", "'2024-01-01 10:00:00.999999'", "'2024-12-31 23:59:59.7'", "'0000-00-00 00:00:00'",
    "'2038-01-19 03:14:07.5'", "'1970-01-01 00:00:00.7'", "'9999-12-31 23:59:59.9'", "'1000-01-01 00:00:00'",
    "'2024-05-06 07:08:09.123456'", "NULL",
]  # fmt: skip
_TIMES = ["'838:59:59'", "'-838:59:59'", "'10:00:00.5'", "'-00:00:01.5'", "'23:59:59.9999'", "'00:00:00'", "NULL"]
_UUIDS = ["'6ccd780c-baba-1026-9564-5b8c656024db'", "'e7a2a5c8-2ad3-4b52-8a8c-6a3e3f1f9c01'", "NULL"]

# source type -> literals of its values (inserted under sql_mode='': a literal out of range is stored clipped)
SOURCES: dict[str, list[str]] = {
    "INT": _INTS,
    "TINYINT UNSIGNED": _INTS,
    "BIGINT": _WIDE,
    "BIGINT UNSIGNED": _WIDE,
    "DECIMAL(10,4)": _DECIMALS,
    "DECIMAL(40,10)": _DECIMALS,
    "DECIMAL(5,2) UNSIGNED": _DECIMALS,
    "FLOAT": _FLOATS,
    "DOUBLE": _FLOATS,
    "FLOAT(7,3)": _FLOATS,
    "BIT(8)": ["b'0'", "b'101'", "b'11111111'", "65", "NULL"],
    "BIT(64)": ["b'1'", "18446744073709551615", "NULL"],
    "YEAR": ["0", "1901", "2024", "2155", "1999", "NULL"],
    "DATE": _DATES,
    "DATETIME": _DATETIMES,
    "DATETIME(6)": _DATETIMES,
    "TIMESTAMP(6) NULL": [d for d in _DATETIMES if "1000-" not in d and "9999-" not in d],
    "TIME": _TIMES,
    "TIME(6)": _TIMES,
    "CHAR(5)": _TEXTS,
    "VARCHAR(20)": _TEXTS,
    "VARCHAR(20) CHARACTER SET latin1": _TEXTS,
    "TEXT": _TEXTS,
    "BINARY(4)": _BYTES,
    "VARBINARY(16)": _BYTES,
    "BLOB": _BYTES,
    "ENUM('b','a','c','2')": ["'a'", "'b'", "'c'", "'2'", "0", "NULL"],
    "SET('x','y','z')": ["'x,z'", "''", "'y'", "'x,y,z'", "NULL"],
    "JSON": ["'{\"a\": 1}'", "'[1, 2]'", "'\"s\"'", "NULL"],
    "UUID": _UUIDS,
    "INET6": ["'::1'", "'2001:db8::ff00:42:8329'", "'::ffff:1.2.3.4'", "NULL"],
    "INET4": ["'1.2.3.4'", "'255.255.255.255'", "NULL"],
}
TARGETS = [
    *SOURCES,
    "TINYINT", "SMALLINT UNSIGNED", "INT NOT NULL", "BIGINT UNSIGNED NOT NULL", "DECIMAL(3,1)", "DECIMAL(20,2)",
    "DECIMAL(50,20)", "DOUBLE(10,2)", "BIT(4)", "YEAR NOT NULL", "DATETIME(0)", "DATETIME(3)", "TIMESTAMP(0) NULL",
    "TIME(3)", "CHAR(2)", "VARCHAR(3)", "VARCHAR(36)", "VARCHAR(5) NOT NULL", "VARCHAR(10) CHARACTER SET ascii",
    "VARCHAR(10) CHARACTER SET utf8mb3", "TEXT CHARACTER SET latin1", "TINYTEXT", "BINARY(16)", "BINARY(36)",
    "VARBINARY(3)", "ENUM('c','a','x')", "ENUM('A','b')", "SET('z','y')", "SET('y','x','w')", "DATE NOT NULL",
    "TIME NOT NULL", "UUID NOT NULL", "CHAR(36) CHARACTER SET latin1",
]  # fmt: skip
MODES = ["", "", "", "STRICT_TRANS_TABLES", "TIME_ROUND_FRACTIONAL"]  # mostly lax: where the server converts most

_NUMBERS = ("INT", "BIGINT", "DECIMAL", "DOUBLE", "FLOAT", "BIT", "YEAR", "ENUM", "SET", "TINYINT", "SMALLINT")
_TEMPORAL = ("DATE", "TIME", "CHAR", "VARCHAR", "TEXT")
_STRINGS = ("CHAR", "TEXT", "BINARY", "BLOB", "JSON", "UUID", "INET", "ENUM", "SET", "INT", "DECIMAL", "DOUBLE")


def _near(source: str) -> list[str]:
    """The targets of the families a source's values most often go to (numbers to numbers and text, ...)."""
    kinds = _TEMPORAL if source.startswith(("DATE", "TIME")) else _NUMBERS if source.startswith(_NUMBERS) else _STRINGS
    return [t for t in TARGETS if t.startswith(kinds) or (kinds is _NUMBERS and t.startswith(("CHAR", "VARCHAR")))]


# a target of any type, or (more often) of the families the source's values convert to
column = st.sampled_from(sorted(SOURCES)).flatmap(
    lambda source: st.tuples(
        st.just(source),
        st.one_of(st.sampled_from(_near(source)), st.sampled_from(_near(source)), st.sampled_from(TARGETS)),
        st.sampled_from(MODES),
    )
)


@pytest.mark.parametrize("path", ["rows", "typed"])
def test_every_conversion_an_alter_makes_is_mirrored_or_a_typed_stop(
    mariadb: MariaDBDatabase, tmp_path_factory: pytest.TempPathFactory, path: str
) -> None:
    db = mariadb.database
    runs = iter(range(1_000_000))
    outcomes: dict[str, int] = {}

    @fuzz_settings(max(1, EXAMPLES // 2))
    @given(
        columns=st.lists(column, min_size=1, max_size=3),
        rows=st.lists(st.lists(st.integers(0, 99), min_size=3, max_size=3), min_size=1, max_size=6),
    )
    # measured by hand first: UUID to BINARY(36) is its 16 bytes zero-padded; DATETIME(6) to DATETIME(0) truncates
    # (rounds under TIME_ROUND_FRACTIONAL); a label the ENUM loses becomes ''; utf8mb4 to latin1 makes '😀' '?'
    @example(
        columns=[("UUID", "BINARY(36)", ""), ("DATETIME(6)", "DATETIME(0)", "TIME_ROUND_FRACTIONAL")],
        rows=[[0, 1, 0], [1, 2, 0], [2, 8, 0]],
    )
    @example(
        columns=[("ENUM('b','a','c','2')", "ENUM('c','a','x')", ""), ("VARCHAR(20)", "TEXT CHARACTER SET latin1", "")],
        rows=[[0, 9, 0], [1, 8, 0], [3, 14, 0], [4, 4, 0]],
    )
    # a DATETIME outside TIMESTAMP's range becomes the zero TIMESTAMP's seconds with its fraction kept: 1970-01-01
    # 00:00:00.7 stays (epoch 0.7 s), 9999-12-31 23:59:59.9 becomes 1970-01-01 00:00:00.9; only a whole second is
    # the zero (the mirror made every one of them the zero)
    @example(columns=[("DATETIME(6)", "TIMESTAMP(6) NULL", "")], rows=[[5, 0, 0], [6, 0, 0], [7, 0, 0], [4, 0, 0]])
    # a negative integer into a BIT(64) is its 64-bit two's complement (-1 -> 2**64 - 1), into a narrower BIT the
    # largest value (the mirror made the BIT(64)'s the largest too)
    @example(
        columns=[("BIGINT", "BIT(64)", ""), ("INT", "BIT(64)", ""), ("INT", "BIT(8)", "")], rows=[[1, 2, 2], [0, 7, 7]]
    )
    # strings read as numbers under sql_mode='' ('12abc' -> 12, '1.5' -> 1, ' 42 ' -> 42), FLOAT to DOUBLE (a stop)
    @example(columns=[("TEXT", "INT", ""), ("FLOAT", "DOUBLE", "")], rows=[[4, 0, 0], [5, 1, 0], [6, 2, 0]])
    def check(columns: list[tuple[str, str, str]], rows: list[list[int]]) -> None:
        table = f"c{next(runs)}"
        tmp = tmp_path_factory.mktemp("conversions")
        conn = mariadb.connect(charset="utf8mb4")
        try:
            outcome = _play(mariadb, conn, tmp, table, columns, rows, path)
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        finally:
            conn.close()
            mariadb.execute(f"DROP TABLE IF EXISTS `{db}`.`{table}`")

    check()
    print(f"conversion outcomes ({path}): {sorted(outcomes.items())}")  # shown with -s: what the examples reached


def _play(
    mariadb: MariaDBDatabase,
    conn: Any,
    tmp: Path,
    table: str,
    columns: list[tuple[str, str, str]],
    rows: list[list[int]],
    path: str,
) -> str:
    """One example: the table made and mirrored, then each column's ALTER mirrored in turn; what the last one did."""
    db = mariadb.database
    config = capture_config(mariadb, tmp / "meta", master_position(conn), "conversions", schema=db, heal="stop")
    mirror = DeltaMirror(tmp / "mirror", zero_dates="null")  # the zero dates the conversions make: NULL
    target: Callable[[Any, int], Any] = mirror if path == "typed" else (lambda b, i: mirror.apply(b, i))
    names = [f"v{i}" for i in range(len(columns))]
    definitions = ", ".join(f"`{name}` {source}" for name, (source, _target, _mode) in zip(names, columns, strict=True))
    statements = [f"CREATE TABLE `{db}`.`{table}` (id INT PRIMARY KEY, {definitions}) DEFAULT CHARSET=utf8mb4"]
    for number, picks in enumerate(rows):
        values = [
            SOURCES[source][pick % len(SOURCES[source])] for (source, _t, _m), pick in zip(columns, picks, strict=False)
        ]
        statements.append(f"INSERT INTO `{db}`.`{table}` VALUES ({number}, {', '.join(values)})")
    _execute(conn, "SET SESSION sql_mode = ''", *statements)
    note("SQL:\n" + ";\n".join(statements))
    try:
        run_caught_up(conn, config, None, target)
        _assert_equal(conn, mirror, db, table)
        outcome = "no ALTER"
        for name, (source, new_type, mode) in zip(names, columns, strict=True):
            alter = f"ALTER TABLE `{db}`.`{table}` MODIFY `{name}` {new_type}"
            note(f"sql_mode={mode!r}: {alter}")
            before = _select(conn, db, table)
            try:
                _execute(conn, f"SET SESSION sql_mode = '{mode}'", alter)
            except pymysql.MySQLError as refused:  # a strict mode refuses what does not convert: nothing logged
                note(f"refused: {refused}")
                outcome = "refused"
                continue
            try:
                run_caught_up(conn, config, None, target)
            except MirrorConversionError as stop:
                note(f"stopped: {stop}")
                assert stop.table == f"{db}.{table}" and stop.statement is not None and alter in stop.statement
                assert stop.column == name and stop.to_type is not None, str(stop)
                assert stop.from_type is not None or "unknown" in str(stop), str(stop)
                _assert_equal(conn, mirror, db, table, before)  # nothing of the ALTER written
                return f"stop {source} -> {new_type}"
            _assert_equal(conn, mirror, db, table)
            outcome = "mirrored"
        return outcome
    finally:
        mirror.close()


def _execute(conn: Any, *statements: str) -> None:
    with conn.cursor() as cur:
        for sql in statements:
            cur.execute(sql)


def _select(conn: Any, db: str, table: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The table's rows (``SELECT *``) and its columns' types, in the form the mirror holds them."""
    with conn.cursor(pymysql.cursors.DictCursor) as cur:
        cur.execute(
            "SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
            "AND TABLE_NAME = %s",
            (db, table),
        )
        types = {r["COLUMN_NAME"]: r["COLUMN_TYPE"] for r in cur.fetchall()}
        cur.execute(f"SELECT * FROM `{db}`.`{table}`")
        rows = [{name: _held(value, types[name]) for name, value in row.items()} for row in cur.fetchall()]
    return rows, types


def _held(value: Any, mysql_type: str) -> Any:
    """A ``SELECT`` cell as the mirror holds it: a zero date NULL (zero_dates="null"), BIT a number, a SET's labels
    and a TIME's text as the server prints them."""
    if value is None:
        return None
    base = mysql_type.split("(")[0].split(" ")[0]
    if isinstance(value, str) and base in ("date", "datetime", "timestamp") and value[:10].endswith(("-00", "-00-00")):
        return None
    if isinstance(value, str) and base in ("date", "datetime", "timestamp") and "-00" in value[:10]:
        return None
    if base == "bit" and isinstance(value, bytes):
        return int.from_bytes(value, "big")
    printed = server_text(mysql_type)
    if printed is not None and isinstance(value, set | frozenset | dt.timedelta):
        return printed(value)
    if isinstance(value, float) and value == 0:
        return 0.0  # -0.0: the decoder's MariaDB value
    if isinstance(value, Decimal) and value.is_zero():
        return abs(value)
    return value


def _assert_equal(
    conn: Any, mirror: DeltaMirror, db: str, table: str, expected: tuple[list[dict[str, Any]], Any] | None = None
) -> None:
    rows, _types = expected if expected is not None else _select(conn, db, table)
    result = compare(mirror.read(db, table), rows, ["id"], name=table)
    assert result.equal, str(result)


def test_added_columns_defaults_are_stored_as_the_server_stores_them(mariadb: MariaDBDatabase, tmp_path: Path) -> None:
    """``ADD COLUMN ... DEFAULT`` writes the default into every row the table holds, as the column stores it:
    fractional seconds truncated (rounded under TIME_ROUND_FRACTIONAL), a CHAR without trailing spaces, a SET in its
    labels' order, a YEAR of 69 in 2069, a DECIMAL rounded; the mirror's rows read the same. A default the mirror
    does not reproduce (an ENUM label in another case, which the collation matches) stops typed, nothing written."""
    db = mariadb.database
    conn = mariadb.connect(charset="utf8mb4")
    config = capture_config(mariadb, tmp_path / "meta", master_position(conn), "defaults", schema=db, heal="stop")
    mirror = DeltaMirror(tmp_path / "mirror")
    _execute(conn, f"CREATE TABLE `{db}`.d (id INT PRIMARY KEY)", f"INSERT INTO `{db}`.d VALUES (1), (2)")
    run_caught_up(conn, config, None, mirror)
    _execute(
        conn,
        f"ALTER TABLE `{db}`.d ADD COLUMN a DATETIME(0) DEFAULT '2024-01-01 10:00:00.7', ADD b CHAR(5) DEFAULT 'ab  ',"
        " ADD c SET('x','y') DEFAULT 'y,x', ADD e YEAR DEFAULT 69, ADD f DECIMAL(5,1) DEFAULT 1.25",
        "SET SESSION sql_mode = 'TIME_ROUND_FRACTIONAL'",
        f"ALTER TABLE `{db}`.d ADD g DATETIME(1) DEFAULT '2024-01-01 10:00:00.56', ADD h TIME(1) DEFAULT '10:00:00.56',"
        " ADD k TIME(2) NOT NULL",
    )
    assert _select(conn, db, "d")[0][0]["a"] == dt.datetime(2024, 1, 1, 10)  # truncated by default
    assert _select(conn, db, "d")[0][0]["g"] == dt.datetime(2024, 1, 1, 10, 0, 0, 600000)  # rounded
    run_caught_up(conn, config, None, mirror)
    _assert_equal(conn, mirror, db, "d")
    before = _select(conn, db, "d")
    _execute(conn, f"ALTER TABLE `{db}`.d ADD COLUMN i ENUM('a','b') DEFAULT 'B'")
    with pytest.raises(MirrorConversionError, match=r"column 'i'.*DEFAULT 'B'") as stop:
        run_caught_up(conn, config, None, mirror)
    assert stop.value.table == f"{db}.d" and stop.value.column == "i"
    _assert_equal(conn, mirror, db, "d", before)
    mirror.close()
    conn.close()


def test_a_history_started_after_the_alter_names_no_types_and_the_mirror_stops(
    mariadb: MariaDBDatabase, tmp_path: Path
) -> None:
    """A capture whose first start comes before an ALTER of a table that existed before that start reads the table's
    layout after the ALTER: its schema history cannot tell the types before it (it named the types after as
    RETYPED_FROM, and the mirror kept 'abcdefgh' where SELECT shows 'abc'). The mirror then converts what the stored
    kind decides (an integer clipped) and stops typed where the type before decides (text), nothing of that ALTER
    written. (A table created after the start is followed from its CREATE: the history scans the binlog before.)"""
    db = mariadb.database
    conn = mariadb.connect(charset="utf8mb4")
    _execute(
        conn,
        "SET SESSION sql_mode = ''",
        f"CREATE TABLE `{db}`.n (id INT PRIMARY KEY, a INT, c VARCHAR(10))",
        f"INSERT INTO `{db}`.n VALUES (1, 5, 'before')",
    )
    config = capture_config(mariadb, tmp_path / "meta", master_position(conn), "late", schema=db, heal="stop")
    mirror = DeltaMirror(tmp_path / "mirror")
    _execute(
        conn,
        f"INSERT INTO `{db}`.n VALUES (2, 1000, 'abcdefgh')",
        f"ALTER TABLE `{db}`.n MODIFY a TINYINT",
        f"ALTER TABLE `{db}`.n MODIFY c VARCHAR(3)",
    )
    with pytest.raises(MirrorConversionError, match=r"column 'c'.*type before the statement is unknown") as stop:
        run_caught_up(conn, config, None, mirror)
    assert stop.value.table == f"{db}.n" and stop.value.column == "c"
    assert mirror.read(db, "n").to_pylist() == [{"id": 2, "a": 127, "c": "abcdefgh"}]  # the ALTER of c: not written
    mirror.close()
    conn.close()
