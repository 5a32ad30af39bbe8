"""Differential: the same DDL and DML on ``FakeMysql(mariadb=True)`` and on a private MariaDB give identical entries.

A consumer unit-tests against the fake and runs against a server; what it sees must not change between the two. Both
run the same statements (DDL as text; DML as the same Python values, parameterized for MariaDB and passed to the
fake's transactions), each read by an Instance, and the entries are compared field by field: entry and event types,
schema, table, DDL text, and every column's name, ``mysql_type``, ``sql_type``, key flag, updated flag, null flag and
value, plus the table's column metadata (unsigned, nullable, charset, fractional precision, labels). Offsets,
timestamps, server ids, GTIDs, thread ids and xids differ by nature and are left out.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import pytest

from canal.config import InstanceConfig, MasterConfig, StoreConfig
from canal.instance import Instance
from canal.protocol import EMPTY_MESSAGE_ID, Entry, EntryType
from canal.sql import read_column_type
from canal.sql.types import python_type
from canal.testing.fake import FakeMysql
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration

TABLE = "t"

# name, definition, value in row 1, value in row 2 (row 3 is all NULL but the key)
COLUMNS: list[tuple[str, str, Any, Any]] = [
    ("ti", "TINYINT", -128, 127),
    ("tiu", "TINYINT UNSIGNED", 255, 0),
    ("siu", "SMALLINT UNSIGNED", 65535, 1),
    ("mi", "MEDIUMINT", -8388608, 8388607),
    ("iu", "INT UNSIGNED", 4294967295, 7),
    ("bi", "BIGINT", -9223372036854775808, 9223372036854775807),
    ("biu", "BIGINT UNSIGNED", 18446744073709551615, 0),
    ("d65", "DECIMAL(65,30)", Decimal("-" + "9" * 35 + "." + "9" * 30), Decimal("0.000000000000000000000000000001")),
    ("d102", "DECIMAL(10,2)", Decimal("12345678.91"), Decimal("-0.5")),
    ("du", "DECIMAL(6,3) UNSIGNED", Decimal("999.999"), Decimal("0")),
    ("f", "FLOAT", 1.5, -0.25),
    ("db", "DOUBLE", -1.7976931348623157e308, 0.1),
    ("b9", "BIT(9)", 257, 0),
    ("y", "YEAR", 1901, 2155),
    ("dte", "DATE", dt.date(1000, 1, 1), dt.date(9999, 12, 31)),
    ("dt3", "DATETIME(3)", dt.datetime(2020, 2, 29, 23, 59, 59, 123000), dt.datetime(1000, 1, 1)),
    ("ts6", "TIMESTAMP(6) NULL", dt.datetime(2038, 1, 19, 3, 14, 7, 999999), dt.datetime(1970, 1, 1, 0, 0, 1)),
    ("tm2", "TIME(2)", dt.timedelta(hours=838, minutes=59, seconds=59, microseconds=990000), dt.timedelta(0)),
    ("c", "CHAR(10)", "abc", ""),
    ("vc", "VARCHAR(20)", "ü€😀", "x" * 20),
    ("vl", "VARCHAR(20) CHARACTER SET latin1", "é", "ÿ"),
    ("tx", "TEXT", "line\nbreak", ""),
    ("lt", "LONGTEXT", "z" * 1000, "long"),
    ("bn", "BINARY(4)", b"\x00\x01\x02\x03", b"\xff\xff\xff\xff"),
    ("vb", "VARBINARY(8)", b"\x00\xff", b""),
    ("bl", "BLOB", b"\x00" * 300, b"blob"),
    ("e", "ENUM('a','b','c d')", "c d", "a"),
    ("s", "SET('x','y','z')", "x,z", ""),
    ("j", "JSON", '{"k": [1, 2.5, "v"]}', "[]"),
]


def _create_sql() -> str:
    cols = ", ".join(f"`{name}` {definition}" for name, definition, _, _ in COLUMNS)
    return f"CREATE TABLE `{TABLE}` (`id` INT NOT NULL PRIMARY KEY, {cols}) DEFAULT CHARSET=utf8mb4"


def _row(key: int, which: int | None) -> dict[str, Any]:
    row: dict[str, Any] = {"id": key}
    for name, _definition, first, second in COLUMNS:
        row[name] = None if which is None else (first, second)[which]
    return row


# The workload: ("ddl", sql) or (operation, table, values...) steps, run in order on both servers.
Step = tuple[Any, ...]
WORKLOAD: list[Step] = [
    ("ddl", _create_sql()),
    ("insert", TABLE, [_row(1, 0), _row(2, 1)]),
    ("insert", TABLE, [_row(3, None)]),
    ("update", TABLE, _row(1, 0), _row(1, 1)),
    ("update", TABLE, _row(3, None), _row(3, 0)),
    ("delete", TABLE, _row(2, 1)),
    ("ddl", f"ALTER TABLE `{TABLE}` ADD COLUMN `extra` VARCHAR(5) NOT NULL DEFAULT '' AFTER `id`"),
    ("insert", TABLE, [{**_row(4, 1), "extra": "new"}]),
    ("ddl", f"ALTER TABLE `{TABLE}` DROP COLUMN `bl`, MODIFY `vc` VARCHAR(40)"),
    (
        "ddl",
        f"ALTER TABLE `{TABLE}` CHANGE `vl` `vl2` VARCHAR(30) CHARACTER SET latin1 FIRST, RENAME COLUMN `c` TO `c2`",
    ),
    ("update", TABLE, {"id": 4}, {"vl2": "è", "c2": "z"}),
    ("ddl", f"RENAME TABLE `{TABLE}` TO `t2`"),
    ("delete", "t2", {"id": 4}),
    ("ddl", "CREATE TABLE `k` (`a` VARCHAR(8) NOT NULL, `b` INT NOT NULL, `v` INT, PRIMARY KEY (`b`, `a`))"),
    ("insert", "k", [{"a": "x", "b": 1, "v": 10}, {"a": "y", "b": 1, "v": None}]),
    ("update", "k", {"a": "x", "b": 1, "v": 10}, {"a": "x", "b": 2, "v": 11}),
    ("ddl", "ALTER TABLE `k` CONVERT TO CHARACTER SET utf8mb4"),
    ("ddl", "CREATE TABLE `k2` LIKE `k`"),
    ("insert", "k2", [{"a": "€", "b": 5, "v": 1}]),
    ("ddl", "TRUNCATE TABLE `k`"),
    ("ddl", "DROP TABLE `t2`"),
]


def _run_on_mariadb(db: MariaDBDatabase) -> None:
    conn = db.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")
            for step in WORKLOAD:
                if step[0] == "ddl":
                    cur.execute(step[1])
                    continue
                op, table = step[0], step[1]
                conn.begin()
                if op == "insert":
                    for row in step[2]:
                        names = ", ".join(f"`{n}`" for n in row)
                        cur.execute(
                            f"INSERT INTO `{table}` ({names}) VALUES ({', '.join(['%s'] * len(row))})",
                            list(row.values()),
                        )
                elif op == "update":
                    before, after = step[2], step[3]
                    where = " AND ".join(f"`{n}` = %s" for n in _keys(table))
                    sets = ", ".join(f"`{n}` = %s" for n in after)
                    cur.execute(
                        f"UPDATE `{table}` SET {sets} WHERE {where}",
                        [*after.values(), *(before[n] for n in _keys(table))],
                    )
                elif op == "delete":
                    where = " AND ".join(f"`{n}` = %s" for n in _keys(table))
                    cur.execute(f"DELETE FROM `{table}` WHERE {where}", [step[2][n] for n in _keys(table)])
                conn.commit()
    finally:
        conn.close()


def _keys(table: str) -> tuple[str, ...]:
    return ("b", "a") if table.startswith("k") else ("id",)


def _run_on_fake(fake: FakeMysql, schema: str) -> None:
    fake.execute(f"CREATE DATABASE `{schema}`")
    for step in WORKLOAD:
        if step[0] == "ddl":
            fake.execute(step[1], schema=schema)
            continue
        op, table = step[0], f"{schema}.{step[1]}"
        with fake.transaction() as tx:
            if op == "insert":
                for row in step[2]:
                    tx.insert(table, row)
            elif op == "update":
                tx.update(table, step[2], step[3])
            elif op == "delete":
                tx.delete(table, step[2])


def _config(master: MasterConfig, schema: str) -> InstanceConfig:
    return InstanceConfig(
        destination="diff",
        master=master,
        filter_regex=rf"{schema}\..*",
        store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=1024),
    )


def _entries(config: InstanceConfig, done: Callable[[list[Entry]], bool]) -> list[Entry]:
    inst = Instance(config)
    inst.start()
    try:
        seen: list[Entry] = []
        while not done(seen):
            msg = inst.get(1000, timeout=10.0, linger=0.05)  # not a full batch: the rest once the stream went quiet
            assert msg.id != EMPTY_MESSAGE_ID, f"timed out after {len(seen)} entries"
            seen.extend(msg.entries)
        return seen
    finally:
        inst.stop()


def _is_last_ddl(entries: list[Entry]) -> bool:
    return any(e.row_change is not None and e.row_change.sql.startswith("DROP TABLE") for e in entries)


def _view(entries: Sequence[Entry]) -> list[tuple[Any, ...]]:
    """What must be equal: everything but offsets, timestamps, server ids, GTIDs, thread ids and xids."""
    out: list[tuple[Any, ...]] = []
    for e in entries:
        h = e.header
        rc = e.row_change
        head = (e.entry_type.name, h.event_type.name, h.schema, h.table)
        if rc is None:
            out.append(head)
            continue
        if rc.is_ddl or e.entry_type is not EntryType.ROWDATA or not rc.rows:
            out.append((*head, rc.is_ddl, rc.sql, rc.ddl_schema))
            continue
        table = rc.table
        metas = (
            None
            if table is None
            else tuple(
                (m.name, m.mysql_type, m.sql_type, m.is_key, m.unsigned, m.nullable, m.charset, m.fsp, m.labels)
                for m in table.columns
            )
        )
        rows = tuple(
            tuple(
                tuple(
                    (c.index, c.name, c.sql_type, c.mysql_type, c.is_key, c.updated, c.is_null, c.value) for c in cols
                )
                for cols in (r.before_columns, r.after_columns)
            )
            for r in e.iter_rows()
        )
        out.append((*head, metas, rows))
    return out


def test_fake_and_mariadb_give_identical_entries(mariadb: MariaDBDatabase) -> None:
    schema = mariadb.database
    mariadb_master = mariadb.master()
    _run_on_mariadb(mariadb)
    from_mariadb = _entries(_config(mariadb_master, schema), _is_last_ddl)

    server_charset = str(mariadb.execute("SELECT @@character_set_server")[0][0])
    with FakeMysql(name=f"diff_{schema}", mariadb=True, charset=server_charset) as fake:
        _run_on_fake(fake, schema)
        master = MasterConfig(address=fake.address, journal_name="mysql-bin.000001", position=4)
        from_fake = _entries(_config(master, schema), _is_last_ddl)

    _check_python_types(from_mariadb)
    got_fake, got_mariadb = _view(from_fake), _view(from_mariadb)
    # the fake logs CREATE DATABASE first; MariaDB's database was created before the start position
    got_fake = [v for v in got_fake if not (len(v) > 4 and v[4] is True and str(v[5]).startswith("CREATE DATABASE"))]
    for i, (a, b) in enumerate(zip(got_fake, got_mariadb, strict=False)):
        assert a == b, f"entry {i} ({a[:4]}) differs at {_first_difference(a, b)}"
    assert len(got_fake) == len(got_mariadb)
    assert len(got_fake) > 20


def _check_python_types(entries: Sequence[Entry]) -> None:
    """Every value is of the Python type the type model names for its column (canal.sql.types.python_type)."""
    checked = 0
    for e in entries:
        for r in e.iter_rows():
            for c in (*r.before_columns, *r.after_columns):
                if c.value is not None:
                    expected = python_type(read_column_type(c.mysql_type), mariadb=True)
                    assert isinstance(c.value, expected), (c.name, c.mysql_type, type(c.value), expected)
                    checked += 1
    assert checked > 100


def _first_difference(a: Any, b: Any, path: str = "") -> str:
    """Where two nested tuples first differ, and the two values there (the whole entries are too long to read)."""
    if isinstance(a, tuple) and isinstance(b, tuple):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                return _first_difference(x, y, f"{path}[{i}]")
        return f"{path}: lengths {len(a)} (fake) vs {len(b)} (mariadb)"
    return f"{path}: fake {a!r} vs mariadb {b!r}"
