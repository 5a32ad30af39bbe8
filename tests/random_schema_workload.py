"""Random DDL and DML for the differential tests: a strategy of abstract operations, played against a real MariaDB
with a small model of each table's columns so that most statements are valid (the server may still refuse one: it
is then left out of the workload and noted, never a failure).

An operation names its choices as numbers (which column, which type, where) and is read against the model when it
runs, so a shrunk list stays meaningful. :class:`Workload` runs them, records every row a DML statement changed as
``SELECT`` returned it right after (before, for a DELETE), and keeps the SQL it ran, for the failure report.

Besides the schema operations (:data:`SCHEMA_KINDS`) it plays what production does to a database
(:data:`OPERATION_KINDS`, in :mod:`random_operations`): partition maintenance, DROP and CREATE DATABASE, narrowing
MODIFYs under a lax ``sql_mode``, DDL in a session time zone, the statement sequences of pt-online-schema-change and
gh-ost, session row images, system versioning, DML logged as statements, XA on a table the capture leaves out, and
MariaDB's own types among the values. What the contract gives each of them is one table, :data:`OUTCOMES` (under
``heal="stop"``, :data:`HEALED` for what heals by default).

Families of operations beyond those are classes mixed into :class:`Workload` (:data:`FAMILIES`), each with its own
kinds and outcomes, drawn by a test of its own (tests/test_differential_reach_mariadb.py draws its family's) and,
once listed in :data:`SHARED_FAMILIES`, by every workload: :mod:`random_reach_operations` (statements that change
tables they do not name: views, triggers, routines, foreign keys, temporary tables, odd names, under ROW, STATEMENT
and MIXED) is the first, :mod:`random_alter_operations` (ALTERs the conversion model follows or heals -- AUTO_INCREMENT
made, generated columns, BINARY padding, hex and bit defaults -- and DDL under NO_BACKSLASH_ESCAPES and ANSI_QUOTES)
the second. A family that needs a session of its own takes one from the workload's ``connect``.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any, Final

import attrs
import pymysql
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from random_alter_operations import AlterOperations
from random_operations import NAMED_ZONE, OPERATION_KINDS, UTC, Operations, Stopped, base_type, placed
from random_reach_operations import ReachOperations

from canal.errors import UnmodeledStatementError
from canal.lake.apply.partial import MirrorPartialImageError
from canal.lake.types import MirrorConversionError, MirrorError

FUZZ_EXAMPLES = int(os.environ.get("PYCANAL_FUZZ_EXAMPLES", "20"))
"""How many random workloads a differential test plays (``PYCANAL_FUZZ_EXAMPLES``; a longer run sets it higher)."""


def fuzz_settings(examples: int) -> settings:
    """The Hypothesis settings of the differential tests: ``examples`` workloads, no deadline (a workload runs SQL
    on a real server), the reproduce blob printed on failure."""
    return settings(
        max_examples=examples,
        deadline=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


EQUAL: Final = "equal"
# What the contract (docs/concepts/fail-closed.md) gives each operation the workloads draw under the defaults
# (heal="snapshot"): EQUAL -- the entries and the mirror equal SELECT --, or the typed error the capture
# (UnmodeledStatementError, naming the tables) or the mirror (a MirrorError) stops with, nothing of the statement
# handed off or written. A mirror's stop is EQUAL for the entries, which carry what SELECT shows. What heals (issue
# 65: the capture reads the table again from the statement) is EQUAL here, and its stop under heal="stop" is HEALED's.
OUTCOMES: Final[dict[str, str | type[Exception]]] = {
    # partition maintenance, on a table partitioned by RANGE or HASH of its id
    "ADD PARTITION": EQUAL,
    "COALESCE PARTITION": EQUAL,
    "REORGANIZE PARTITION": EQUAL,
    "REBUILD PARTITION": EQUAL,
    "OPTIMIZE PARTITION": EQUAL,
    "ANALYZE PARTITION": EQUAL,
    "TRUNCATE PARTITION": EQUAL,  # healed
    "DROP PARTITION": EQUAL,  # healed
    "EXCHANGE PARTITION": EQUAL,  # healed: both tables
    # the workload's database, then CREATE DATABASE and CREATE TABLE IF NOT EXISTS of its old names, other layouts
    "DROP DATABASE": EQUAL,  # DROP DATABASE / SCHEMA [IF EXISTS]
    "CREATE OR REPLACE DATABASE": EQUAL,
    # SET STATEMENT sql_mode='' FOR ALTER TABLE ... MODIFY: converted as the server did (canal.lake.ddl.conversions)
    "narrowing MODIFY": EQUAL,  # INT -> TINYINT / UNSIGNED, a VARCHAR shortened, NOT NULL over NULLs
    "ENUM label removed": EQUAL,  # a row holds the label: ''
    "character set that cannot hold a value": EQUAL,  # '?'
    "TEXT shortened": EQUAL,  # a value longer than TINYTEXT holds: cut
    "FLOAT made DOUBLE": EQUAL,  # healed: a conversion the mirror does not model (it holds FLOAT's 6 digits)
    # the zero date: the mirror (zero_dates="error") holds it neither converted nor read again
    "temporal NOT NULL over NULLs": MirrorConversionError,
    # DDL in a session's time zone (an offset, a named zone, SYSTEM)
    "ADD COLUMN TIMESTAMP DEFAULT in a time zone": EQUAL,
    "MODIFY DATETIME <-> TIMESTAMP in a time zone": EQUAL,
    # online schema changes: the tools' statement sequences, the application writing between them
    "pt-online-schema-change, its tables captured": EQUAL,
    "pt-online-schema-change, its tables filtered out": EQUAL,  # healed at the cut-over RENAME
    "gh-ost, its tables captured": EQUAL,
    "gh-ost, its tables filtered out": EQUAL,  # healed at the cut-over RENAME
    # binlog_row_image set by a session
    "UPDATE / DELETE under a MINIMAL or NOBLOB image": EQUAL,
    "INSERT leaving columns to their defaults, the image carrying them": EQUAL,  # FULL, or NOBLOB without a BLOB
    "INSERT leaving columns to their defaults, MINIMAL image": EQUAL,  # healed
    "INSERT leaving a BLOB / TEXT to its default, NOBLOB image": EQUAL,  # healed
    # system versioning added and dropped in the stream
    "ADD SYSTEM VERSIONING": EQUAL,
    "DROP SYSTEM VERSIONING": EQUAL,
    # statements about rows
    "DML logged as a statement": EQUAL,  # healed
    "DML logged as a statement, its table filtered out": EQUAL,
    "XA transaction on a table filtered out": EQUAL,
}

HEALED: Final[dict[str, type[Exception]]] = {
    "TRUNCATE PARTITION": UnmodeledStatementError,
    "DROP PARTITION": UnmodeledStatementError,
    "EXCHANGE PARTITION": UnmodeledStatementError,  # naming both tables
    "FLOAT made DOUBLE": MirrorConversionError,
    "pt-online-schema-change, its tables filtered out": UnmodeledStatementError,
    "gh-ost, its tables filtered out": UnmodeledStatementError,
    "INSERT leaving columns to their defaults, MINIMAL image": MirrorPartialImageError,
    "INSERT leaving a BLOB / TEXT to its default, NOBLOB image": MirrorPartialImageError,
    "DML logged as a statement": UnmodeledStatementError,
}
"""The cases of :data:`OUTCOMES` that heal under the defaults, each with its typed stop under ``heal="stop"``."""

FAMILIES: Final = (ReachOperations, AlterOperations)
"""The families of operations beside the schema's and production's (:mod:`random_operations`), mixed into
:class:`Workload`: each a class of the workload's methods (``_`` and the kind) with its ``KINDS``, ``OUTCOMES``,
``HEALED`` and ``ENTRY_KINDS`` (:mod:`random_reach_operations` shows one). A family is added here; its kinds are drawn
by a test of its own, and by :data:`any_operation` once listed in :data:`SHARED_FAMILIES`."""
for _family in FAMILIES:
    OUTCOMES.update(_family.OUTCOMES)
    HEALED.update(_family.HEALED)


def outcome(case: str, layer: str = "mirror", heal: str = "snapshot") -> str | type[Exception]:
    """What the contract gives ``case`` at ``layer`` ("capture": the entries, "mirror": the Delta mirror) under the
    destination's ``heal`` setting."""
    expected = HEALED[case] if heal == "stop" and case in HEALED else OUTCOMES[case]
    if layer == "capture" and isinstance(expected, type) and issubclass(expected, MirrorError):
        return EQUAL
    return expected


CASES_SEEN: Counter[str] = Counter()
"""How many workloads ran each case of :data:`OUTCOMES` (and how many stopped: ``stop: <case>``), over the
process: a test prints it (``-s``) to show what a run covered."""


# (SQL type, a literal of a random value) -- values at their limits, NULL included
TYPES: list[tuple[str, Callable[[random.Random], str]]] = [
    ("INT", lambda r: r.choice(["-2147483648", "2147483647", "0", str(r.randint(-99, 99)), "NULL"])),
    ("INT UNSIGNED", lambda r: r.choice(["4294967295", "2147483648", "0", str(r.randint(0, 99)), "NULL"])),
    ("BIGINT UNSIGNED", lambda r: r.choice(["18446744073709551615", "9223372036854775808", "1", "NULL"])),
    ("DECIMAL(10,2)", lambda r: r.choice(["-99999999.99", "0.01", "-0.5", f"{r.randint(-999, 999)}.25", "NULL"])),
    # -1e-50 underflows: MariaDB logs -0.0, SELECT shows 0
    ("FLOAT", lambda r: r.choice(["1.1", "-3.25", "0.1", "3.40282e38", "-1e-50", "NULL"])),
    ("DOUBLE", lambda r: r.choice(["1.7976931348623157e308", "-0.1", "2.5", "NULL"])),
    ("VARCHAR(20) COLLATE utf8mb4_general_ci", lambda r: r.choice(["'ok 😀'", "'Ωμέγα'", "''", "'abc'", "NULL"])),
    ("TEXT", lambda r: r.choice(["'long text ü'", "''", "NULL"])),
    # year 0 with a month and a day: MySQL stores it, Arrow holds it, Python's datetime does not
    (
        "DATETIME(3)",
        lambda r: r.choice(
            ["'1000-01-01 00:00:00.001'", "'9999-12-31 23:59:59.999'", "'0000-01-01 00:00:00.5'", "NULL"]
        ),
    ),
    ("DATE", lambda r: r.choice(["'2024-02-29'", "'1000-01-01'", "'0000-01-01'", "NULL"])),
    ("TIME", lambda r: r.choice(["'838:59:59'", "'-12:00:00'", "'00:00:01'", "NULL"])),
    ("ENUM('b','a','c')", lambda r: r.choice(["'a'", "'b'", "'c'", "NULL"])),
    ("SET('x','y','z')", lambda r: r.choice(["'x,z'", "''", "'y'", "NULL"])),
    ("YEAR", lambda r: r.choice(["1901", "2155", "2024", "NULL"])),
    ("BLOB", lambda r: r.choice(["X'00FF10'", "''", "NULL"])),
    # MariaDB's own types (logged as their stored bytes: 16, 16 and 4)
    (
        "UUID",
        lambda r: r.choice(
            [
                "'123e4567-e89b-12d3-a456-426655440000'",
                "'ffffffff-ffff-ffff-ffff-ffffffffffff'",
                "'00000000-0000-0000-0000-000000000001'",
                "NULL",
            ]
        ),
    ),
    ("INET6", lambda r: r.choice(["'2001:db8::1:1:1:1:1'", "'::'", "'::ffff:192.0.2.1'", "'fe80::1'", "NULL"])),
    ("INET4", lambda r: r.choice(["'0.0.0.0'", "'255.255.255.255'", "'192.0.2.1'", "NULL"])),
    # rounded to D decimals where SELECT shows them (123.4568), at the edges of M digits
    ("FLOAT(7,4)", lambda r: r.choice(["123.45678", "999.9999", "-999.9999", "0.00005", "1.23455", "NULL"])),
    ("DOUBLE(12,5)", lambda r: r.choice(["1234567.123456", "-0.000005", "9999999.99999", "0.000015", "NULL"])),
    # compressed columns (binlog types 140 and 141): values long enough to be stored compressed, and short ones
    ("VARCHAR(300) COMPRESSED", lambda r: r.choice(["REPEAT('ab', 120)", "'short'", "''", "NULL"])),
    ("BLOB COMPRESSED", lambda r: r.choice(["REPEAT(X'00FF', 200)", "X'01'", "''", "NULL"])),
    # local times and instants (the time zone operations convert between them); Berlin repeats and skips 02:30
    (
        "DATETIME",
        lambda r: r.choice(
            ["'2024-06-01 12:00:00'", "'2024-10-27 02:30:00'", "'1999-12-31 23:59:59'", "'2024-03-31 02:30:00'", "NULL"]
        ),
    ),
    (
        "TIMESTAMP NULL",
        lambda r: r.choice(["'2024-06-01 12:00:00'", "'1970-01-01 00:00:01'", "'2038-01-19 03:14:07'", "NULL"]),
    ),
]
WIDER = {"INT": "BIGINT", "INT UNSIGNED": "BIGINT UNSIGNED", "DECIMAL(10,2)": "DECIMAL(14,4)", "DATE": "DATETIME(3)"}
# values of the types narrowing MODIFYs leave (never drawn for a new column)
NARROW_TYPES: dict[str, Callable[[random.Random], str]] = {
    "TINYINT": lambda r: r.choice(["-128", "127", "0", "NULL"]),
    "SMALLINT": lambda r: r.choice(["-32768", "32767", "NULL"]),
    "TINYINT UNSIGNED": lambda r: r.choice(["0", "255", "NULL"]),
    "SMALLINT UNSIGNED": lambda r: r.choice(["65535", "1", "NULL"]),
    "VARCHAR(3) COLLATE utf8mb4_general_ci": lambda r: r.choice(["'abc'", "'é😀'", "''", "NULL"]),
}

SCHEMA_KINDS = [
    "insert", "insert", "insert", "update", "update", "delete", "add", "drop", "rename", "change", "modify",
    "swap", "key", "rename_table", "drop_table", "create_table", "rotate",
]  # fmt: skip
_KINDS = SCHEMA_KINDS  # (the name the first tests used)
SHARED_FAMILIES: tuple[type, ...] = ()
"""The families of :data:`FAMILIES` whose kinds every workload draws (:data:`KINDS`)."""
KINDS = [*SCHEMA_KINDS, *OPERATION_KINDS, *(kind for family in SHARED_FAMILIES for kind in family.KINDS)]
"""Every operation: the schema's and production's, and the shared families'."""
CAPTURE_KINDS = [
    *SCHEMA_KINDS,
    *(k for k in OPERATION_KINDS if k in Operations.ENTRY_KINDS),
    *(k for family in SHARED_FAMILIES for k in family.KINDS if k in family.ENTRY_KINDS),
]
"""The operations whose entries the capture test compares with SELECT's rows (the others write rows the workload
does not record -- an online schema change's copies -- or images that leave columns out)."""

KEY_COLUMNS = ("id", "k2")  # every table's two unique columns, either of them its primary key (``_key``)
OWN_NAMES = ("_canal_op", "_canal_seq", "_canal_batch")  # the mirror's internal column names of old, as source names

Op = tuple[str, int, int, int]
operation = st.tuples(st.sampled_from(SCHEMA_KINDS), st.integers(0, 99), st.integers(0, 99), st.integers(0, 99))
operations = st.lists(operation, max_size=30)
any_operation = st.tuples(st.sampled_from(KINDS), st.integers(0, 99), st.integers(0, 99), st.integers(0, 99))
capture_operation = st.tuples(
    st.sampled_from(CAPTURE_KINDS), st.integers(0, 99), st.integers(0, 99), st.integers(0, 99)
)


@attrs.frozen
class TableState:
    """A table as SELECT showed it: its column names, rows (dicts) and key (a system-versioned table: every version,
    its period columns last, keyed by the key and ``row_end``)."""

    names: list[str]
    rows: list[dict[str, Any]]
    key: list[str]


@attrs.frozen
class Stop:
    """The statement the workload ended at: its case, the error the contract gives it, the tables it must name
    (``db.table``; empty: not checked) and every table as SELECT showed it just before."""

    case: str
    error: type[Exception]
    tables: tuple[str, ...]
    state: dict[str, TableState]


class Workload(*FAMILIES, Operations):  # type: ignore[misc]
    """Plays operations on database ``db`` of ``conn``; ``rows`` are ``(table, event, values)`` as SELECT saw them.

    ``layer`` is what the test compares ("capture": entries, "mirror") and ``heal`` the destination's setting, for
    :func:`outcome`; ``helpers_captured``
    whether the capture takes the online schema change tools' tables (``_t_new``, ``_t_gho``, ...);
    ``before_stop`` runs before a statement the mirror stops at (a test catches the mirror up there, so that what it
    then holds is known). A statement whose outcome is a stop ends the workload: :attr:`stop` says what it was."""

    types = TYPES
    wider = WIDER

    def __init__(
        self,
        conn: Any,
        db: str,
        seed: int,
        *,
        layer: str = "mirror",
        heal: str = "snapshot",
        helpers_captured: bool = True,
        before_stop: Callable[[], None] | None = None,
        connect: Callable[[], Any] | None = None,
    ) -> None:
        self.conn = conn
        self.connect = connect  # a new autocommit connection (a session of its own), where a family needs one
        self.db = db
        self.rng = random.Random(seed)
        self.layer = layer
        self.heal = heal
        self.helpers_captured = helpers_captured
        self.before_stop = before_stop
        self.tables: dict[str, list[tuple[str, str]]] = {}  # name -> [(column, type)] in the table's order
        self.key: dict[str, str] = {}  # name -> its primary key column (id or k2)
        self.ids: dict[str, list[int]] = {}
        self.partitioned: dict[str, str] = {}  # name -> RANGE or HASH (of id)
        self.versioned: set[str] = set()
        self.next_id = 1
        self.names = 0
        self.rows: list[tuple[str, str, dict[str, Any]]] = []
        self.sql: list[str] = []  # what ran, in order (the failure report)
        self.refused: list[str] = []
        self.changed = 0  # rows the last statement changed
        self.image = "FULL"  # the session's binlog_row_image
        self.cases: set[str] = set()
        self.stop: Stop | None = None
        # a versioned table's ALTERs keep its history (the server refuses them otherwise); TIMESTAMPs read and
        # written in UTC, as the entries and the mirror hold them (a time zone operation sets another for its DDL)
        self._run(f"SET SESSION system_versioning_alter_history = KEEP, time_zone = '{UTC}'")

    def _name(self, prefix: str) -> str:
        self.names += 1
        return f"{prefix}{self.names}"

    def _column_name(self, taken: list[tuple[str, str]]) -> str:
        """A new column's name: now and then one the mirror used for its own columns once (``_canal_op``)."""
        name = self._name("c")
        own = OWN_NAMES[self.names % len(OWN_NAMES)]
        if self.names % 5 == 0 and own not in {c for c, _t in taken}:
            return own
        return name

    def _run(self, sql: str, commit: bool = True, conn: Any = None) -> bool:
        """Run one statement (on ``conn``: another session's connection); False when the server refused it.
        ``changed`` says how many rows it changed (an UPDATE that sets a row's values again changes none, and the
        binlog logs no row for it)."""
        conn = self.conn if conn is None else conn
        try:
            with conn.cursor() as cur:
                self.changed = cur.execute(sql)
            if commit:
                conn.commit()
        except pymysql.err.MySQLError as exc:
            self.refused.append(f"{sql} -- {exc.args[0]}")
            return False
        self.sql.append(sql)
        return True

    def _select(self, table: str, row_id: int) -> dict[str, Any] | None:
        with self.conn.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute(f"SELECT * FROM `{self.db}`.`{table}` WHERE id = %s", (row_id,))
            found = cur.fetchall()
        return dict(found[0]) if found else None

    def create_table(self, name: str | None = None, *, if_not_exists: bool = False, k2: str = "INT") -> None:
        """A new table (or ``name``, with ``CREATE TABLE IF NOT EXISTS``): ``id``, ``k2`` (of type ``k2``), one to
        three columns of random types, keyed by ``id`` (by ``k2`` when that is not an INT)."""
        name = name or self._name("t")
        columns = [("id", "INT NOT NULL"), ("k2", f"{k2} NOT NULL")]
        for _ in range(self.rng.randint(1, 3)):
            columns.append((self._column_name(columns), self.rng.choice(self.types)[0]))
        body = ", ".join(f"`{c}` {t}" for c, t in columns)
        key, unique = ("id", "k2") if k2 == "INT" else ("k2", "id")
        verb = "CREATE TABLE IF NOT EXISTS" if if_not_exists else "CREATE TABLE"
        if self._run(f"{verb} `{self.db}`.`{name}` ({body}, PRIMARY KEY ({key}), UNIQUE KEY ({unique}))"):
            if name in self.tables:
                return  # it existed: the statement changed nothing
            self.tables[name], self.key[name], self.ids[name] = columns, key, []

    def play(self, ops: list[Op]) -> None:
        self.create_table()
        for op in ops:
            if not self.step(op):
                break

    def step(self, op: Op) -> bool:
        """Play one operation; False once the workload has stopped (:attr:`stop`)."""
        if self.stop is not None:
            return False
        kind, a, b, c = op
        if not self.tables:
            self.create_table()
        try:
            getattr(self, "_" + kind)(a, b, c)
        except Stopped:
            return False
        return True

    # -- the outcomes ---------------------------------------------------------------------------------------------

    def _at(self, case: str, sql: str, tables: tuple[str, ...] = (), conn: Any = None) -> bool:
        """Run ``sql``, the statement of ``case`` (:data:`OUTCOMES`; on ``conn``: another session's connection);
        False when the server refused it. Where the contract stops at it, the workload ends there
        (:class:`Stopped`), :attr:`stop` holding what the tests check: ``tables`` (names in :attr:`db`) the error
        must name, and every table as it was before."""
        expected = outcome(case, self.layer, self.heal)
        if expected == EQUAL:
            if self._run(sql, conn=conn):
                self._seen(case)
                return True
            return False
        assert isinstance(expected, type)
        if issubclass(expected, MirrorError) and self.before_stop is not None:
            self.before_stop()
        state = self.state()
        if not self._run(sql, conn=conn):
            return False
        self._seen(case)
        CASES_SEEN[f"stop: {case}"] += 1
        self.stop = Stop(case, expected, tuple(f"{self.db}.{t}" for t in tables), state)
        raise Stopped(case)

    def _seen(self, case: str) -> None:
        if case not in self.cases:
            self.cases.add(case)
            CASES_SEEN[case] += 1

    def state(self) -> dict[str, TableState]:
        """Every table of the workload as SELECT shows it now, TIMESTAMP values in UTC (as the mirror holds them)."""
        found = {}
        with self.conn.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute("SET @wl_zone = @@session.time_zone, time_zone = '+00:00'")
            try:
                for table, key in self.key.items():
                    versions = "*, row_start, row_end" if table in self.versioned else "*"
                    every = " FOR SYSTEM_TIME ALL" if table in self.versioned else ""
                    cur.execute(f"SELECT {versions} FROM `{self.db}`.`{table}`{every}")
                    keys = [key, "row_end"] if table in self.versioned else [key]
                    found[table] = TableState([d[0] for d in cur.description], list(cur.fetchall()), keys)
            finally:
                cur.execute("SET time_zone = @wl_zone")
        return found

    # -- DML ------------------------------------------------------------------------------------------------------

    def _table(self, a: int) -> str:
        names = sorted(self.tables)
        return names[a % len(names)]

    def _others(self, table: str) -> list[int]:
        """Where the table's columns other than ``id`` and ``k2`` stand (FIRST can put one before them)."""
        return [i for i, (name, _type) in enumerate(self.tables[table]) if name not in KEY_COLUMNS]

    def _key_value(self, table: str, row_id: int) -> str:
        """Row ``row_id``'s ``k2``: distinct per row, in an order unlike the ids'."""
        k2 = base_type(dict(self.tables[table])["k2"])
        if k2 == "UUID":
            return f"'{uuid.UUID(int=row_id * 0x9E3779B97F4A7C15 % 2**128)}'"
        if k2 == "INET6":
            return f"'2001:db8::{row_id * 7919 % 65536:x}:{row_id:x}'"
        if k2 == "INET4":
            return f"'10.{row_id % 251}.{row_id // 251 % 256}.{row_id * 13 % 256}'"
        return str(row_id * 10)

    def _insert(self, a: int, b: int, c: int) -> None:
        self._insert_into(self._table(a))

    def _insert_into(self, table: str) -> int | None:
        """A row of every column; its id, None when the server refused it."""
        row_id, self.next_id = self.next_id, self.next_id + 1
        values = [(col, self._literal(t)) for col, t in self.tables[table] if col not in KEY_COLUMNS]
        names = ", ".join(["id", "k2", *(f"`{col}`" for col, _ in values)])
        literals = ", ".join([str(row_id), self._key_value(table, row_id), *(v for _, v in values)])
        if not self._run(f"INSERT INTO `{self.db}`.`{table}` ({names}) VALUES ({literals})"):
            return None
        self.ids[table].append(row_id)
        self._record(table, "INSERT", row_id)
        return row_id

    def _update(self, a: int, b: int, c: int) -> None:
        table = self._table(a)
        ids, columns = self.ids[table], self._others(table)
        if not ids or not columns:
            return self._insert(a, b, c)
        self._update_in(table, ids[b % len(ids)], c)
        return None

    def _update_in(self, table: str, row_id: int, c: int) -> None:
        columns = [self.tables[table][i] for i in self._others(table)]
        if not columns:
            return
        col, col_type = columns[c % len(columns)]
        sql = f"UPDATE `{self.db}`.`{table}` SET `{col}` = {self._literal(col_type)} WHERE id = {row_id}"
        if self._run(sql) and self.changed:
            self._record(table, "UPDATE", row_id)
            self._partial_dml()

    def _delete(self, a: int, b: int, c: int) -> None:
        table = self._table(a)
        ids = self.ids[table]
        if ids:
            self._delete_in(table, ids[b % len(ids)])

    def _delete_in(self, table: str, row_id: int) -> None:
        ids = self.ids[table]
        before = self._select(table, row_id)
        if self._run(f"DELETE FROM `{self.db}`.`{table}` WHERE id = {row_id}"):
            ids.remove(row_id)
            self._partial_dml()
            if before is not None:
                self.rows.append((table, "DELETE", before))

    def _partial_dml(self) -> None:
        if self.image != "FULL":
            self._seen("UPDATE / DELETE under a MINIMAL or NOBLOB image")

    def _record(self, table: str, event: str, row_id: int) -> None:
        found = self._select(table, row_id)
        if found is not None:
            self.rows.append((table, event, found))

    def _literal(self, sql_type: str) -> str:
        base = base_type(sql_type)
        for name, make in [*self.types, *NARROW_TYPES.items()]:
            if base_type(name) == base:
                return make(self.rng)
        for narrow, wide in WIDER.items():
            if wide == base:
                return self._literal(narrow)
        return "NULL"

    # -- DDL ------------------------------------------------------------------------------------------------------

    def _position(self, table: str, choice: int) -> str:
        columns = self.tables[table]
        if choice % 3 == 0:
            return ""
        if choice % 3 == 1:
            return " FIRST"
        return f" AFTER `{columns[choice % len(columns)][0]}`"

    def _alter(self, table: str, actions: str, columns: list[tuple[str, str]]) -> bool:
        if self._run(f"ALTER TABLE `{self.db}`.`{table}` {actions}"):
            self.tables[table] = columns
            return True
        return False

    def _add(self, a: int, b: int, c: int) -> None:
        table = self._table(a)
        name, sql_type = self._column_name(self.tables[table]), self.types[b % len(self.types)][0]
        position = self._position(table, c)
        columns = list(self.tables[table])
        self._alter(table, f"ADD COLUMN `{name}` {sql_type}{position}", placed(columns, (name, sql_type), position))

    def _drop(self, a: int, b: int, c: int) -> None:
        table = self._table(a)
        columns, others = self.tables[table], self._others(table)
        if not others:
            return
        name = columns[others[b % len(others)]][0]
        self._alter(table, f"DROP COLUMN `{name}`", [col for col in columns if col[0] != name])

    def _rename(self, a: int, b: int, c: int) -> None:
        table = self._table(a)
        columns, others = self.tables[table], self._others(table)
        if not others:
            return
        i = others[b % len(others)]
        new = self._name("r")
        renamed = [*columns[:i], (new, columns[i][1]), *columns[i + 1 :]]
        self._alter(table, f"RENAME COLUMN `{columns[i][0]}` TO `{new}`", renamed)

    def _change(self, a: int, b: int, c: int) -> None:
        table = self._table(a)
        columns, others = self.tables[table], self._others(table)
        if not others:
            return
        i = others[b % len(others)]
        old, old_type = columns[i]
        new, new_type = self._name("h"), WIDER.get(old_type, old_type)
        position = self._position(table, c)
        if position.endswith(f"`{old}`"):
            position = " FIRST"  # AFTER names the table being built, where the column has its new name
        rest = [*columns[:i], *columns[i + 1 :]]
        layout = (
            placed(rest, (new, new_type), position) if position else [*columns[:i], (new, new_type), *columns[i + 1 :]]
        )
        self._alter(table, f"CHANGE `{old}` `{new}` {new_type}{position}", layout)

    def _modify(self, a: int, b: int, c: int) -> None:
        table = self._table(a)
        columns, others = self.tables[table], self._others(table)
        if not others:
            return
        i = others[b % len(others)]
        name, old_type = columns[i]
        new_type = WIDER.get(old_type, old_type)
        position = self._position(table, c) or " FIRST"
        if position.endswith(f"`{name}`"):
            position = " FIRST"
        rest = [*columns[:i], *columns[i + 1 :]]
        self._alter(table, f"MODIFY `{name}` {new_type}{position}", placed(rest, (name, new_type), position))

    def _swap(self, a: int, b: int, c: int) -> None:
        table = self._table(a)
        columns, others = self.tables[table], self._others(table)
        if len(others) < 2:
            return
        i, j = others[b % len(others)], others[c % len(others)]
        if i == j:
            return
        (x, tx), (y, ty) = columns[i], columns[j]
        swapped = list(columns)
        swapped[i], swapped[j] = (y, tx), (x, ty)  # the names swap, each column keeps its type and values
        self._alter(table, f"CHANGE `{x}` `{y}` {tx}, CHANGE `{y}` `{x}` {ty}", swapped)

    def _key(self, a: int, b: int, c: int) -> None:
        table = self._table(a)
        new = "k2" if self.key[table] == "id" else "id"
        if self._run(f"ALTER TABLE `{self.db}`.`{table}` DROP PRIMARY KEY, ADD PRIMARY KEY (`{new}`)"):
            self.key[table] = new

    def _models(self) -> list[dict[str, Any]]:
        return [self.tables, self.key, self.ids]

    def _moved(self, old: str, new: str) -> None:
        """Table ``old`` is now named ``new`` in the model."""
        for model in self._models():
            model[new] = model.pop(old)
        if old in self.partitioned:
            self.partitioned[new] = self.partitioned.pop(old)
        if old in self.versioned:
            self.versioned.discard(old)
            self.versioned.add(new)

    def _forget(self, table: str) -> None:
        for model in self._models():
            del model[table]
        self.partitioned.pop(table, None)
        self.versioned.discard(table)

    def _rename_table(self, a: int, b: int, c: int) -> None:
        table = self._table(a)
        others = sorted(set(self.tables) - {table})
        if others and b % 2:  # a swap of two tables through a third name
            other, tmp = others[c % len(others)], self._name("tmp")
            d = self.db
            if self._run(f"RENAME TABLE `{d}`.`{table}` TO `{d}`.`{tmp}`, `{d}`.`{other}` TO `{d}`.`{table}`, "
                         f"`{d}`.`{tmp}` TO `{d}`.`{other}`"):  # fmt: skip
                self._moved(table, tmp)
                self._moved(other, table)
                self._moved(tmp, other)
            return
        new = self._name("t")
        if self._run(f"RENAME TABLE `{self.db}`.`{table}` TO `{self.db}`.`{new}`"):
            self._moved(table, new)

    def _drop_table(self, a: int, b: int, c: int) -> None:
        if len(self.tables) < 2:
            return
        table = self._table(a)
        if self._run(f"DROP TABLE `{self.db}`.`{table}`"):
            self._forget(table)

    def _create_table(self, a: int, b: int, c: int) -> None:
        if len(self.tables) < 4:
            self.create_table()

    # -- server operations -----------------------------------------------------------------------------------------

    def _rotate(self, a: int, b: int, c: int) -> None:
        """FLUSH BINARY LOGS: the server goes on in a new binlog file, as at ``max_binlog_size``, a restart or a
        routine flush -- a stream (and a mirror resumed from a position) goes on across it."""
        self._run("FLUSH BINARY LOGS")


def load_time_zone(server: Any, zone: str = NAMED_ZONE) -> None:
    """MariaDB's time zone tables for ``zone`` on ``server`` (once; kept out of the binlog), so that the workload's
    time zone operations can name it."""
    if server.execute("SELECT COUNT(*) FROM mysql.time_zone_name WHERE name = %s", (zone,))[0][0]:
        return
    sql = subprocess.run(
        ["mariadb-tzinfo-to-sql", f"/usr/share/zoneinfo/{zone}", zone], capture_output=True, text=True, check=True
    ).stdout
    subprocess.run(
        ["mariadb", "--no-defaults", "-uroot", "-h", server.host, "-P", str(server.port), "mysql"],
        input="SET SESSION sql_log_bin=0;\n" + sql,
        capture_output=True,
        text=True,
        check=True,
    )


SEED: Final = int(os.environ.get("PYCANAL_SEED") or random.SystemRandom().randrange(2**32))
"""The seed of this run's seeded workloads (:func:`play_seeded`): ``PYCANAL_SEED`` replays a run."""


def play_seeded(
    play: Callable[[int, list[Op], str, int], None],
    kinds: list[str],
    examples: int,
    lengths: tuple[int, int],
    stop_every: int,
) -> None:
    """Play ``examples`` workloads drawn from :data:`SEED`: each ``play(example, ops, heal, seed)`` with ops of
    ``kinds`` (as many as ``lengths`` allows), every ``stop_every``-th under ``heal="stop"``. The seed is printed
    first, and a failure names it with the workload's ops; the cases played are printed at the end."""
    print(f"\nPYCANAL_SEED={SEED}", file=sys.stderr)
    rng = random.Random(SEED)
    seen = Counter(CASES_SEEN)
    for example in range(examples):
        ops: list[Op] = [
            (rng.choice(kinds), rng.randrange(100), rng.randrange(100), rng.randrange(100))
            for _ in range(rng.randint(*lengths))
        ]
        heal = "stop" if example % stop_every == stop_every - 1 else "snapshot"
        try:
            play(example, ops, heal, rng.randrange(2**32))
        except BaseException as exc:
            raise AssertionError(f"PYCANAL_SEED={SEED}, workload {example} ({heal}), ops {ops}: {exc}") from exc
    print(f"workloads per case: {dict(sorted((CASES_SEEN - seen).items()))}")
