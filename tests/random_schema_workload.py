"""Random DDL and DML for the differential tests: a strategy of abstract operations, played against a real MariaDB
with a small model of each table's columns so that most statements are valid (the server may still refuse one: it
is then left out of the workload and noted, never a failure).

An operation names its choices as numbers (which column, which type, where) and is read against the model when it
runs, so a shrunk list stays meaningful. :class:`Workload` runs them, records every row a DML statement changed as
``SELECT`` returned it right after (before, for a DELETE), and keeps the SQL it ran, for the failure report.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import Any

import pymysql
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

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


# (SQL type, a literal of a random value) -- values at their limits, NULL included
TYPES: list[tuple[str, Callable[[random.Random], str]]] = [
    ("INT", lambda r: r.choice(["-2147483648", "2147483647", "0", str(r.randint(-99, 99)), "NULL"])),
    ("INT UNSIGNED", lambda r: r.choice(["4294967295", "2147483648", "0", str(r.randint(0, 99)), "NULL"])),
    ("BIGINT UNSIGNED", lambda r: r.choice(["18446744073709551615", "9223372036854775808", "1", "NULL"])),
    ("DECIMAL(10,2)", lambda r: r.choice(["-99999999.99", "0.01", "-0.5", f"{r.randint(-999, 999)}.25", "NULL"])),
    ("FLOAT", lambda r: r.choice(["1.1", "-3.25", "0.1", "3.40282e38", "NULL"])),
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
]
WIDER = {"INT": "BIGINT", "INT UNSIGNED": "BIGINT UNSIGNED", "DECIMAL(10,2)": "DECIMAL(14,4)", "DATE": "DATETIME(3)"}

_KINDS = [
    "insert", "insert", "insert", "update", "update", "delete", "add", "drop", "rename", "change", "modify",
    "swap", "key", "rename_table", "drop_table", "create_table", "rotate",
]  # fmt: skip

KEY_COLUMNS = ("id", "k2")  # every table's two unique columns, either of them its primary key (``_key``)

Op = tuple[str, int, int, int]
operation = st.tuples(st.sampled_from(_KINDS), st.integers(0, 99), st.integers(0, 99), st.integers(0, 99))
operations = st.lists(operation, max_size=30)


class Workload:
    """Plays operations on database ``db`` of ``conn``; ``rows`` are ``(table, event, values)`` as SELECT saw them."""

    def __init__(self, conn: Any, db: str, seed: int) -> None:
        self.conn = conn
        self.db = db
        self.rng = random.Random(seed)
        self.tables: dict[str, list[tuple[str, str]]] = {}  # name -> [(column, type)] in the table's order
        self.key: dict[str, str] = {}  # name -> its primary key column (id or k2)
        self.ids: dict[str, list[int]] = {}
        self.next_id = 1
        self.names = 0
        self.rows: list[tuple[str, str, dict[str, Any]]] = []
        self.sql: list[str] = []  # what ran, in order (the failure report)
        self.refused: list[str] = []
        self.changed = 0  # rows the last statement changed

    def _name(self, prefix: str) -> str:
        self.names += 1
        return f"{prefix}{self.names}"

    def _run(self, sql: str) -> bool:
        """Run one statement; False when the server refused it. ``changed`` says how many rows it changed (an
        UPDATE that sets a row's values again changes none, and the binlog logs no row for it)."""
        try:
            with self.conn.cursor() as cur:
                self.changed = cur.execute(sql)
            self.conn.commit()
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

    def create_table(self) -> None:
        name = self._name("t")
        columns = [("id", "INT NOT NULL"), ("k2", "INT NOT NULL")]
        for _ in range(self.rng.randint(1, 3)):
            columns.append((self._name("c"), self.rng.choice(TYPES)[0]))
        body = ", ".join(f"`{c}` {t}" for c, t in columns)
        if self._run(f"CREATE TABLE `{self.db}`.`{name}` ({body}, PRIMARY KEY (id), UNIQUE KEY (k2))"):
            self.tables[name], self.key[name], self.ids[name] = columns, "id", []

    def play(self, ops: list[Op]) -> None:
        self.create_table()
        for kind, a, b, c in ops:
            if not self.tables:
                self.create_table()
            getattr(self, "_" + kind)(a, b, c)

    # -- DML ------------------------------------------------------------------------------------------------------

    def _table(self, a: int) -> str:
        names = sorted(self.tables)
        return names[a % len(names)]

    def _others(self, table: str) -> list[int]:
        """Where the table's columns other than ``id`` and ``k2`` stand (FIRST can put one before them)."""
        return [i for i, (name, _type) in enumerate(self.tables[table]) if name not in KEY_COLUMNS]

    def _insert(self, a: int, b: int, c: int) -> None:
        table = self._table(a)
        row_id, self.next_id = self.next_id, self.next_id + 1
        values = [(col, self._literal(t)) for col, t in self.tables[table] if col not in KEY_COLUMNS]
        names = ", ".join(["id", "k2", *(f"`{col}`" for col, _ in values)])
        literals = ", ".join([str(row_id), str(row_id * 10), *(v for _, v in values)])
        if self._run(f"INSERT INTO `{self.db}`.`{table}` ({names}) VALUES ({literals})"):
            self.ids[table].append(row_id)
            self._record(table, "INSERT", row_id)

    def _update(self, a: int, b: int, c: int) -> None:
        table = self._table(a)
        ids, columns = self.ids[table], [self.tables[table][i] for i in self._others(table)]
        if not ids or not columns:
            return self._insert(a, b, c)
        row_id = ids[b % len(ids)]
        col, col_type = columns[c % len(columns)]
        sql = f"UPDATE `{self.db}`.`{table}` SET `{col}` = {self._literal(col_type)} WHERE id = {row_id}"
        if self._run(sql) and self.changed:
            self._record(table, "UPDATE", row_id)
        return None

    def _delete(self, a: int, b: int, c: int) -> None:
        table = self._table(a)
        ids = self.ids[table]
        if not ids:
            return
        row_id = ids[b % len(ids)]
        before = self._select(table, row_id)
        if self._run(f"DELETE FROM `{self.db}`.`{table}` WHERE id = {row_id}"):
            ids.remove(row_id)
            if before is not None:
                self.rows.append((table, "DELETE", before))

    def _record(self, table: str, event: str, row_id: int) -> None:
        found = self._select(table, row_id)
        if found is not None:
            self.rows.append((table, event, found))

    def _literal(self, sql_type: str) -> str:
        base = sql_type.replace(" NOT NULL", "")
        for name, make in TYPES:
            if name == base:
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

    def _alter(self, table: str, actions: str, columns: list[tuple[str, str]]) -> None:
        if self._run(f"ALTER TABLE `{self.db}`.`{table}` {actions}"):
            self.tables[table] = columns

    def _add(self, a: int, b: int, c: int) -> None:
        table = self._table(a)
        name, sql_type = self._name("c"), TYPES[b % len(TYPES)][0]
        position = self._position(table, c)
        columns = list(self.tables[table])
        self._alter(table, f"ADD COLUMN `{name}` {sql_type}{position}", _placed(columns, (name, sql_type), position))

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
        placed = (
            _placed(rest, (new, new_type), position) if position else [*columns[:i], (new, new_type), *columns[i + 1 :]]
        )
        self._alter(table, f"CHANGE `{old}` `{new}` {new_type}{position}", placed)

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
        self._alter(table, f"MODIFY `{name}` {new_type}{position}", _placed(rest, (name, new_type), position))

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

    def _rename_table(self, a: int, b: int, c: int) -> None:
        table = self._table(a)
        others = sorted(set(self.tables) - {table})
        if others and b % 2:  # a swap of two tables through a third name
            other, tmp = others[c % len(others)], self._name("tmp")
            d = self.db
            if self._run(f"RENAME TABLE `{d}`.`{table}` TO `{d}`.`{tmp}`, `{d}`.`{other}` TO `{d}`.`{table}`, "
                         f"`{d}`.`{tmp}` TO `{d}`.`{other}`"):  # fmt: skip
                for model in (self.tables, self.key, self.ids):
                    model[table], model[other] = model[other], model[table]  # type: ignore[index]
            return
        new = self._name("t")
        if self._run(f"RENAME TABLE `{self.db}`.`{table}` TO `{self.db}`.`{new}`"):
            for model in (self.tables, self.key, self.ids):
                model[new] = model.pop(table)  # type: ignore[attr-defined]

    def _drop_table(self, a: int, b: int, c: int) -> None:
        if len(self.tables) < 2:
            return
        table = self._table(a)
        if self._run(f"DROP TABLE `{self.db}`.`{table}`"):
            for model in (self.tables, self.key, self.ids):
                del model[table]  # type: ignore[attr-defined]

    def _create_table(self, a: int, b: int, c: int) -> None:
        if len(self.tables) < 4:
            self.create_table()

    # -- server operations -----------------------------------------------------------------------------------------

    def _rotate(self, a: int, b: int, c: int) -> None:
        """FLUSH BINARY LOGS: the server goes on in a new binlog file, as at ``max_binlog_size``, a restart or a
        routine flush -- a stream (and a mirror resumed from a position) goes on across it."""
        self._run("FLUSH BINARY LOGS")


def _placed(columns: list[tuple[str, str]], column: tuple[str, str], position: str) -> list[tuple[str, str]]:
    if not position:
        return [*columns, column]
    if position == " FIRST":
        return [column, *columns]
    after = position.split("`")[1]
    at = next(i for i, (name, _) in enumerate(columns) if name == after)
    return [*columns[: at + 1], column, *columns[at + 1 :]]
