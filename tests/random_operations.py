"""The operations production does to a database, for the randomized workloads (:mod:`random_schema_workload`):
partition maintenance, DROP / CREATE DATABASE, narrowing MODIFYs under ``SET STATEMENT sql_mode='' FOR``, DDL in a
session's time zone, the statement sequences of pt-online-schema-change and gh-ost (the application writing between
them), session row images, system versioning added and dropped, DML logged as statements, XA on a table the capture
leaves out, and tables keyed by MariaDB's UUID / INET6 / INET4.

Each operation runs its decisive statement through ``Workload._at`` with the name of its case in
``random_schema_workload.OUTCOMES``, which says what the contract gives it; the rest of its statements (a session's
settings, the setup that makes a case bite: a row holding the ENUM label a MODIFY removes) run as plain statements.
An operation that draws a case the server may change rows for without logging them (TRUNCATE PARTITION, a lossy
narrowing, DML logged as a statement) does so for one value of its second number in ten (:func:`rare`), so that
most workloads go on past it while it stops the contract says it does; the choice does not depend on the outcome,
so a heal (issue 65) only changes the table.
"""

from __future__ import annotations

import contextlib
from typing import Any

from pymysql.converters import escape_item  # type: ignore[import-untyped]

OPERATION_KINDS = [
    "partitioned", "partition", "partition", "partition", "database", "narrow", "narrow", "zone", "zone", "pt_osc",
    "gh_ost", "image", "insert_defaults", "versioning", "statement", "xa_outside", "create_keyed",
]  # fmt: skip
"""The operations :class:`Operations` plays (the workload's method is ``_`` and the name)."""

OUTSIDE = "out_x"  # a table of the workload's database that the tests' capture leaves out (``black_regex``)
NAMED_ZONE = "Europe/Berlin"  # a zone from the server's time zone tables, where the test loaded them
ZONES = ("+05:00", "-08:30", NAMED_ZONE, "SYSTEM")  # SYSTEM: where the server's system zone is UTC
UTC = "+00:00"  # the workload's session zone between operations

# the narrowings the server converts values for and the mirror repeats (clipped integers, cut strings)
NARROWINGS: dict[str, tuple[str, ...]] = {
    "INT": ("TINYINT", "SMALLINT", "INT UNSIGNED"),
    "INT UNSIGNED": ("TINYINT UNSIGNED", "INT"),
    "BIGINT UNSIGNED": ("INT UNSIGNED", "SMALLINT UNSIGNED"),
    "BIGINT": ("INT",),
    "SMALLINT": ("TINYINT",),
    "VARCHAR(20) COLLATE utf8mb4_general_ci": ("VARCHAR(3) COLLATE utf8mb4_general_ci",),
}
# the types whose NULLs NOT NULL makes a value the mirror repeats (0, '', the empty ENUM value)
NOT_NULL_FILLS = {
    "INT", "INT UNSIGNED", "BIGINT UNSIGNED", "BIGINT", "TINYINT", "SMALLINT", "TINYINT UNSIGNED", "SMALLINT UNSIGNED",
    "DECIMAL(10,2)", "DECIMAL(14,4)", "FLOAT", "DOUBLE", "FLOAT(7,4)", "DOUBLE(12,5)",
    "VARCHAR(20) COLLATE utf8mb4_general_ci", "VARCHAR(3) COLLATE utf8mb4_general_ci", "TEXT", "BLOB",
    "ENUM('b','a','c')", "SET('x','y','z')",
}  # fmt: skip
# the narrowings that lose a value, made to bite: (case, the column's type, a value the narrowing loses, the new
# type) -- the mirror converts most as the server did, one it does not model heals (OUTCOMES says which)
LOSSY = [
    ("ENUM label removed", "ENUM('b','a','c')", "'c'", "ENUM('b','a')"),
    ("character set that cannot hold a value", "VARCHAR(20) COLLATE utf8mb4_general_ci", "'ok 😀'",
     "VARCHAR(20) CHARACTER SET latin1"),
    ("TEXT shortened", "TEXT", "REPEAT('x', 300)", "TINYTEXT"),
    ("temporal NOT NULL over NULLs", "DATE", "NULL", "DATE NOT NULL"),
    ("FLOAT made DOUBLE", "FLOAT", "1.1", "DOUBLE"),
]  # fmt: skip
BLOBS = {"TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT", "TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB", "JSON"}


def rare(b: int) -> bool:
    """One value in ten, and not one a generator favours (0, 99): an operation's draw of a case that changes rows
    the binlog does not log."""
    return b % 10 == 3


class Stopped(Exception):
    """The workload ended at a statement the contract stops at (``Workload.stop`` says which)."""


def base_type(sql_type: str) -> str:
    """A column type without its NULL-ness and default: ``TIMESTAMP NOT NULL DEFAULT '...'`` is ``TIMESTAMP``."""
    base = sql_type.split(" DEFAULT ", 1)[0]
    for suffix in (" NOT NULL", " NULL"):
        base = base.removesuffix(suffix)
    return base


def placed(columns: list[tuple[str, str]], column: tuple[str, str], position: str) -> list[tuple[str, str]]:
    """``columns`` with ``column`` added at ``position`` (``""``, `` FIRST`` or `` AFTER `name```)."""
    if not position:
        return [*columns, column]
    if position == " FIRST":
        return [column, *columns]
    after = position.split("`")[1]
    at = next(i for i, (name, _) in enumerate(columns) if name == after)
    return [*columns[: at + 1], column, *columns[at + 1 :]]


class Operations:
    """The production operations of ``random_schema_workload.Workload`` (its model and helpers: ``tables``, ``key``,
    ``ids``, ``partitioned``, ``versioned``, ``_run``, ``_at``, ...)."""

    ENTRY_KINDS = frozenset(
        {"partitioned", "partition", "database", "narrow", "zone", "statement", "xa_outside", "create_keyed"}
    )
    """The operations whose entries the capture test compares with what SELECT showed."""

    # (set by the workload)
    conn: Any
    db: str
    rng: Any
    tables: dict[str, list[tuple[str, str]]]
    key: dict[str, str]
    ids: dict[str, list[int]]
    partitioned: dict[str, str]
    versioned: set[str]
    image: str
    helpers_captured: bool
    next_id: int
    types: list[Any]
    wider: dict[str, str]

    def _q(self, table: str) -> str:
        return f"`{self.db}`.`{table}`"

    def _new_id(self) -> int:
        row_id, self.next_id = self.next_id, self.next_id + 1
        return row_id

    def _reread_ids(self, table: str) -> None:
        """The ids the table holds, from the server (an operation that moved rows, followed)."""
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT id FROM {self._q(table)}")
            self.ids[table] = sorted(int(row[0]) for row in cur.fetchall())

    def _outside(self) -> str:
        """The table the capture leaves out, created the first time (a plain CREATE: a first start at an older
        position replays a table born since, not one that may have been there before)."""
        with self.conn.cursor() as cur:
            cur.execute(
                "SELECT 1 FROM information_schema.tables WHERE table_schema = %s AND table_name = %s",
                (self.db, OUTSIDE),
            )
            if not cur.fetchall():
                self._run(f"CREATE TABLE {self._q(OUTSIDE)} (id INT PRIMARY KEY, v INT)")
        return OUTSIDE

    # -- tables keyed by MariaDB's types ------------------------------------------------------------------------

    def _create_keyed(self, a: int, b: int, c: int) -> None:
        if len(self.tables) < 5:
            self.create_table(k2=("UUID", "INET6", "INET4")[b % 3])

    # -- partition maintenance -------------------------------------------------------------------------------------

    def _partitioned(self, a: int, b: int, c: int) -> None:
        """A table partitioned by RANGE or HASH of its id (its unique key holds the id: the server asks for it)."""
        if len(self.tables) >= 5:
            return
        name = self._name("t")
        columns = [("id", "INT NOT NULL"), ("k2", "INT NOT NULL")]
        for i in range(1 + c % 2):
            columns.append((self._column_name(columns), self.types[(b + 7 * i) % len(self.types)][0]))
        body = ", ".join(f"`{col}` {t}" for col, t in columns)
        if b % 2:
            first = self.next_id
            method, partitions = (
                "RANGE",
                (
                    f"PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN ({first + 3}), PARTITION p1 VALUES LESS "
                    f"THAN ({first + 9}), PARTITION p2 VALUES LESS THAN (1000000))"
                ),
            )
        else:
            method, partitions = "HASH", f"PARTITION BY HASH (id) PARTITIONS {2 + c % 3}"
        if self._run(f"CREATE TABLE {self._q(name)} ({body}, PRIMARY KEY (id), UNIQUE KEY (k2, id)) {partitions}"):
            self.tables[name], self.key[name], self.ids[name] = columns, "id", []
            self.partitioned[name] = method

    def _partitions(self, table: str) -> list[tuple[str, str | None]]:
        """The table's partitions as the server has them now: (name, RANGE's bound)."""
        with self.conn.cursor() as cur:
            cur.execute(
                "SELECT partition_name, partition_description FROM information_schema.partitions WHERE "
                "table_schema = %s AND table_name = %s ORDER BY partition_ordinal_position",
                (self.db, table),
            )
            return [(str(name), description) for name, description in cur.fetchall()]

    def _partition(self, a: int, b: int, c: int) -> None:
        if not self.partitioned:
            self._partitioned(a, b // 2, c)  # (a HASH table for an even b: b itself stays the draw below)
        names = sorted(self.partitioned)
        if not names:
            return None
        table = names[a % len(names)]
        ranged = self.partitioned[table] == "RANGE"
        parts = self._partitions(table)
        if rare(b):  # the server changes the rows without logging them
            cases = ["TRUNCATE PARTITION", "DROP PARTITION", "EXCHANGE PARTITION"]
        else:
            cases = ["ADD PARTITION", "REORGANIZE PARTITION", "REBUILD PARTITION", "OPTIMIZE PARTITION"]
            cases += ["ANALYZE PARTITION"] + ([] if ranged else ["COALESCE PARTITION"])
        case = cases[(b + c) % len(cases)]
        i = c // 7 % len(parts)
        part = parts[i][0]
        named = [table]
        if case == "ADD PARTITION":
            last = int(parts[-1][1] or 0)
            add = f"(PARTITION {self._name('p')} VALUES LESS THAN ({last + 1000000}))" if ranged else "PARTITIONS 1"
            actions = f"ADD PARTITION {add}"
        elif case == "COALESCE PARTITION":
            if len(parts) < 2:
                return None
            actions = "COALESCE PARTITION 1"
        elif case == "REORGANIZE PARTITION":
            actions = "REORGANIZE PARTITION"  # HASH: rebuilt
            if ranged:
                high = int(parts[i][1] or 0)
                if i + 1 < len(parts) and c % 2:  # two merged
                    merged = f"PARTITION {self._name('p')} VALUES LESS THAN ({parts[i + 1][1]})"
                    actions = f"REORGANIZE PARTITION {part}, {parts[i + 1][0]} INTO ({merged})"
                else:  # one split
                    split = high - 1 - c % 3
                    actions = (
                        f"REORGANIZE PARTITION {part} INTO (PARTITION {self._name('p')} VALUES LESS THAN ({split}), "
                        f"PARTITION {self._name('p')} VALUES LESS THAN ({high}))"
                    )
        elif case in ("REBUILD PARTITION", "OPTIMIZE PARTITION", "ANALYZE PARTITION", "TRUNCATE PARTITION"):
            actions = f"{case.split()[0]} PARTITION {part}"
        elif case == "DROP PARTITION":
            if not ranged or len(parts) < 2:
                return None
            actions = f"DROP PARTITION {part}"
        else:  # EXCHANGE PARTITION, with a table of the same layout, unpartitioned
            other = self._name("t")
            if not self._run(f"CREATE TABLE {self._q(other)} LIKE {self._q(table)}"):
                return None
            self.tables[other], self.key[other], self.ids[other] = list(self.tables[table]), "id", []
            self.partitioned[other] = self.partitioned[table]
            if not self._run(f"ALTER TABLE {self._q(other)} REMOVE PARTITIONING"):
                return None
            del self.partitioned[other]
            actions = f"EXCHANGE PARTITION {part} WITH TABLE {self._q(other)}"
            named.append(other)
        if self._at(case, f"ALTER TABLE {self._q(table)} {actions}", tuple(named)):
            for name in named:
                self._reread_ids(name)
        return None

    # -- the workload's database -----------------------------------------------------------------------------------

    def _database(self, a: int, b: int, c: int) -> None:
        """DROP DATABASE / SCHEMA [IF EXISTS] and CREATE, or CREATE OR REPLACE DATABASE; then CREATE TABLE IF NOT
        EXISTS of some of its old names in other layouts (and of one it holds again: a statement that changes
        nothing)."""
        old = sorted(self.tables)
        db = f"`{self.db}`"
        if b % 3 == 2:
            if not self._at("CREATE OR REPLACE DATABASE", f"CREATE OR REPLACE DATABASE {db}"):
                return
        else:
            verb = ("DROP DATABASE", "DROP SCHEMA", "DROP DATABASE IF EXISTS", "DROP SCHEMA IF EXISTS")[c % 4]
            if not self._at("DROP DATABASE", f"{verb} {db}"):
                return
            self._run(f"CREATE {('DATABASE', 'SCHEMA')[c % 2]} {db}")
        for table in list(self.tables):
            self._forget(table)
        for name in old[: 1 + c % 2]:
            self.create_table(name, if_not_exists=True)
        if self.tables:
            self.create_table(sorted(self.tables)[0], if_not_exists=True)

    # -- narrowing under a lax sql_mode ----------------------------------------------------------------------------

    def _narrow(self, a: int, b: int, c: int) -> None:
        table = self._table(a)
        if rare(b):
            return self._lossy_narrowing(table, b // 10 + c)
        columns = self.tables[table]
        choices = []
        for i in self._others(table):
            sql_type = columns[i][1]
            base, not_null = base_type(sql_type), " NOT NULL" in sql_type
            choices += [(i, new + (" NOT NULL" if not_null else "")) for new in NARROWINGS.get(base, ())]
            if not not_null and " DEFAULT " not in sql_type and base in NOT_NULL_FILLS:
                choices.append((i, f"{base} NOT NULL"))
        if not choices:
            return None
        i, new = choices[c % len(choices)]
        name = columns[i][0]
        sql = f"SET STATEMENT sql_mode='' FOR ALTER TABLE {self._q(table)} MODIFY `{name}` {new}"
        if self._at("narrowing MODIFY", sql):
            self.tables[table] = [*columns[:i], (name, new), *columns[i + 1 :]]
        return None

    def _lossy_narrowing(self, table: str, c: int) -> None:
        """A narrowing that loses a value, made to bite: a row holds the value it loses."""
        case, column_type, value, new = LOSSY[c % len(LOSSY)]
        columns = self.tables[table]
        found = [i for i in self._others(table) if columns[i][1] == column_type]
        if found:
            i = found[c // len(LOSSY) % len(found)]
        else:
            name = self._column_name(columns)
            if not self._alter(table, f"ADD COLUMN `{name}` {column_type}", [*columns, (name, column_type)]):
                return
            i = len(columns)
        name = self.tables[table][i][0]
        if not self.ids[table]:
            self._insert_into(table)
        if not self.ids[table]:
            return
        row_id = self.ids[table][0]
        if not self._run(f"UPDATE {self._q(table)} SET `{name}` = {value} WHERE id = {row_id}"):
            return
        if self.changed:
            self._record(table, "UPDATE", row_id)
        sql = f"SET STATEMENT sql_mode='' FOR ALTER TABLE {self._q(table)} MODIFY `{name}` {new}"
        if self._at(case, sql, (table,)):
            self.tables[table] = [(n, new if n == name else t) for n, t in self.tables[table]]

    # -- DDL in a time zone ----------------------------------------------------------------------------------------

    def _system_utc(self) -> bool:
        """Whether the server's system zone is UTC (the mirror knows ``SYSTEM`` exactly only then)."""
        with self.conn.cursor() as cur:
            cur.execute("SELECT @@system_time_zone")
            return str(cur.fetchone()[0]).upper() in ("UTC", "ETC/UTC")

    def _named_zone(self) -> bool:
        with self.conn.cursor() as cur:
            cur.execute("SELECT COUNT(*) FROM mysql.time_zone_name WHERE name = %s", (NAMED_ZONE,))
            return bool(cur.fetchone()[0])

    def _zone(self, a: int, b: int, c: int) -> None:
        """ADD COLUMN ... TIMESTAMP DEFAULT a local time, or MODIFY between DATETIME and TIMESTAMP, in a session
        time zone that is not UTC (or SYSTEM: the server's, UTC here)."""
        table = self._table(a)
        zone = ZONES[(b // 2 + c) % len(ZONES)]
        if (zone == NAMED_ZONE and not self._named_zone()) or (zone == "SYSTEM" and not self._system_utc()):
            zone = ZONES[0]
        columns = self.tables[table]
        if b % 2 == 0:
            case = "ADD COLUMN TIMESTAMP DEFAULT in a time zone"
            name = self._column_name(columns)
            new = f"TIMESTAMP NOT NULL DEFAULT '{('2024-01-01 00:00:00', '2024-10-27 02:30:00')[b // 2 % 2]}'"
            position = self._position(table, b // 4)
            sql, after = f"ADD COLUMN `{name}` {new}{position}", placed(columns, (name, new), position)
        else:
            case = "MODIFY DATETIME <-> TIMESTAMP in a time zone"
            found = [i for i in self._others(table) if base_type(columns[i][1]) in ("DATETIME", "TIMESTAMP")]
            if not found:
                name = self._column_name(columns)
                self._alter(table, f"ADD COLUMN `{name}` DATETIME", [*columns, (name, "DATETIME")])
                return
            i = found[c // len(ZONES) % len(found)]
            name, old = columns[i]
            new = "TIMESTAMP NULL" if base_type(old) == "DATETIME" else "DATETIME"
            sql, after = f"MODIFY `{name}` {new}", [*columns[:i], (name, new), *columns[i + 1 :]]
        self._run(f"SET time_zone = '{zone}'")
        try:
            if self._at(case, f"ALTER TABLE {self._q(table)} {sql}"):
                self.tables[table] = after
        finally:
            self._run(f"SET time_zone = '{UTC}'")

    # -- online schema changes -------------------------------------------------------------------------------------

    def _migration(self, table: str, b: int, c: int) -> tuple[list[tuple[str, str]], str, list[str]]:
        """A migration's new layout, its ALTER's actions and the columns both layouts hold."""
        columns, others = self.tables[table], self._others(table)
        names = [name for name, _type in columns]
        if b % 3 == 1 and others:
            gone = columns[others[c % len(others)]][0]
            return [col for col in columns if col[0] != gone], f"DROP COLUMN `{gone}`", [n for n in names if n != gone]
        if b % 3 == 2 and others and columns[others[c % len(others)]][1] in self.wider:
            name, old = columns[others[c % len(others)]]
            wide = self.wider[old]
            return [(n, wide if n == name else t) for n, t in columns], f"MODIFY `{name}` {wide}", names
        name = self._column_name(columns)
        new = "INT NOT NULL DEFAULT 7" if c % 2 else self.types[c % len(self.types)][0]
        return [*columns, (name, new)], f"ADD COLUMN `{name}` {new}", names

    def _key_chunks(self, table: str, size: int) -> list[tuple[str, str]]:
        """The table's key range in chunks of ``size`` rows: (low, high) literals, as the tools copy by."""
        key = self.key[table]
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT `{key}` FROM {self._q(table)} ORDER BY `{key}`")
            values = [escape_item(row[0], "utf8mb4") for row in cur.fetchall()]
        return [(values[i], values[min(i + size, len(values)) - 1]) for i in range(0, len(values), size)]

    def _application(self, table: str, n: int) -> tuple[str, int] | None:
        """One write of the application on ``table`` while a migration runs: (its verb, the row)."""
        ids = self.ids[table]
        if n % 3 == 0 or not ids:
            row_id = self._insert_into(table)
            return None if row_id is None else ("insert", row_id)
        row_id = ids[n % len(ids)]
        if n % 3 == 1:
            self._update_in(table, row_id, n)
            return "update", row_id
        self._delete_in(table, row_id)
        return "delete", row_id

    @contextlib.contextmanager
    def _full_image(self) -> Any:
        """The application's writes during a migration log FULL images (a trigger's rows under a partial image are
        the row-image cases' concern)."""
        image = self.image
        if image != "FULL":
            self._run("SET SESSION binlog_row_image = FULL")
        try:
            yield
        finally:
            if image != "FULL":
                self._run(f"SET SESSION binlog_row_image = {image}")

    def _pt_osc(self, a: int, b: int, c: int) -> None:
        """pt-online-schema-change's statements: the new table, its triggers on the old one, the copy in chunks of
        the key (the application writing between them), the swap, the old table and triggers dropped."""
        table = self._table(a)
        if table in self.versioned:
            return
        case = "pt-online-schema-change, its tables " + ("captured" if self.helpers_captured else "filtered out")
        new, old = f"_{table}_new", f"_{table}_old"
        layout, actions, common = self._migration(table, b, c)
        key = self.key[table]
        cols = ", ".join(f"`{n}`" for n in common)
        values = ", ".join(f"NEW.`{n}`" for n in common)
        handler = "DECLARE CONTINUE HANDLER FOR 1146 begin end"
        trigger = f"pt_osc_{self.db}_{table}"
        with self._full_image():
            if not self._run(f"CREATE TABLE {self._q(new)} LIKE {self._q(table)}"):
                return
            self._run(f"ALTER TABLE {self._q(new)} {actions}")
            for event, body in (
                ("DELETE", f"DELETE IGNORE FROM {self._q(new)} WHERE {self._q(new)}.`{key}` <=> OLD.`{key}`;"),
                (
                    "UPDATE",
                    f"DELETE IGNORE FROM {self._q(new)} WHERE !(OLD.`{key}` <=> NEW.`{key}`) AND "
                    f"{self._q(new)}.`{key}` <=> OLD.`{key}`; REPLACE INTO {self._q(new)} ({cols}) VALUES ({values});",
                ),
                ("INSERT", f"REPLACE INTO {self._q(new)} ({cols}) VALUES ({values});"),
            ):
                self._run(
                    f"CREATE TRIGGER `{self.db}`.`{trigger}_{event[:3].lower()}` AFTER {event} ON {self._q(table)} "
                    f"FOR EACH ROW BEGIN {handler}; {body} END"
                )
            for n, (low, high) in enumerate(self._key_chunks(table, 2 + c % 4)):
                self._run(
                    f"INSERT LOW_PRIORITY IGNORE INTO {self._q(new)} ({cols}) SELECT {cols} FROM {self._q(table)} "
                    f"FORCE INDEX(`PRIMARY`) WHERE ((`{key}` >= {low})) AND ((`{key}` <= {high})) LOCK IN SHARE MODE"
                )
                self._application(table, b + n)
            self._run(f"ANALYZE TABLE {self._q(new)}")
            swap = f"RENAME TABLE {self._q(table)} TO {self._q(old)}, {self._q(new)} TO {self._q(table)}"
            if not self._at(case, swap, (table, old, new)):
                return
            self.tables[table] = layout
            self._run(f"DROP TABLE IF EXISTS {self._q(old)}")
            for suffix in ("del", "upd", "ins"):
                self._run(f"DROP TRIGGER IF EXISTS `{self.db}`.`{trigger}_{suffix}`")
            self._reread_ids(table)

    def _gh_ost(self, a: int, b: int, c: int) -> None:
        """gh-ost's statements (doc/cut-over.md, go/logic/applier.go): its changelog and ghost tables, the copy in
        chunks of the key, the application's writes applied to the ghost table as gh-ost reads them from the binlog,
        the sentry table, the atomic cut-over, and the old table dropped (``--ok-to-drop-table``)."""
        table = self._table(a)
        if table in self.versioned:
            return
        case = "gh-ost, its tables " + ("captured" if self.helpers_captured else "filtered out")
        ghc, gho, sentry = (self._q(f"_{table}_{suffix}") for suffix in ("ghc", "gho", "del"))
        layout, actions, common = self._migration(table, b, c)
        key = self.key[table]
        cols = ", ".join(f"`{n}`" for n in common)
        with self._full_image():
            if not self._run(
                f"create /* gh-ost */ table {ghc} (id bigint auto_increment, last_update timestamp not null DEFAULT "
                "CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, hint varchar(64) charset ascii not null, value "
                "varchar(4096) charset ascii not null, primary key(id), unique key hint_uidx(hint)) auto_increment=256"
            ):
                return
            self._run(f"create /* gh-ost */ table {gho} like {self._q(table)}")
            self._run(f"alter /* gh-ost */ table {gho} {actions}")
            self._run(
                f"insert /* gh-ost */ into {ghc} (id, hint, value) values (NULLIF(2, 0), 'state', 'migrating') "
                "on duplicate key update last_update=NOW(), value=VALUES(value)"
            )
            for n, (low, high) in enumerate(self._key_chunks(table, 2 + c % 4)):
                self._run(
                    f"insert /* gh-ost */ ignore into {gho} ({cols}) (select {cols} from {self._q(table)} force index "
                    f"(`PRIMARY`) where (`{key}` >= {low} and `{key}` <= {high}) lock in share mode)"
                )
                written = self._application(table, b + n)
                if written is not None:  # applied from the binlog, as gh-ost does
                    verb, row_id = written
                    if verb == "delete":
                        self._run(f"delete /* gh-ost */ from {gho} where id = {row_id}")
                    else:
                        self._run(
                            f"replace /* gh-ost */ into {gho} ({cols}) select {cols} from {self._q(table)} "
                            f"where id = {row_id}"
                        )
            self._run(
                f"create /* gh-ost */ table {sentry} (id int auto_increment primary key) engine=InnoDB "
                "comment='ghost-cut-over-sentry'"
            )
            self._run(f"drop /* gh-ost */ table if exists {sentry}")  # the lock holder drops it, then the rename runs
            swap = f"rename /* gh-ost */ table {self._q(table)} to {sentry}, {gho} to {self._q(table)}"
            if not self._at(case, swap, (table, f"_{table}_del", f"_{table}_gho")):
                return
            self.tables[table] = layout
            self._run(f"drop /* gh-ost */ table if exists {ghc}")
            self._run(f"drop /* gh-ost */ table if exists {sentry}")
            self._reread_ids(table)

    # -- row images ------------------------------------------------------------------------------------------------

    def _image(self, a: int, b: int, c: int) -> None:
        image = ("FULL", "MINIMAL", "NOBLOB")[b % 3]
        if self._run(f"SET SESSION binlog_row_image = {image}"):
            self.image = image

    def _insert_defaults(self, a: int, b: int, c: int) -> None:
        """An INSERT that names some of the columns (the bits of ``c`` pick them): the others take their defaults,
        which a partial image does not carry."""
        table = self._table(a)
        others = [self.tables[table][i] for i in self._others(table)]
        named = [col for j, col in enumerate(others) if (c >> j) & 1]
        left = [col for col in others if col not in named]
        if self.image == "MINIMAL" and left:
            case = "INSERT leaving columns to their defaults, MINIMAL image"
        elif self.image == "NOBLOB" and any(base_type(t).split()[0] in BLOBS for _n, t in left):
            case = "INSERT leaving a BLOB / TEXT to its default, NOBLOB image"
        else:
            case = "INSERT leaving columns to their defaults, the image carrying them"
        row_id = self._new_id()
        names = ", ".join(["id", "k2", *(f"`{n}`" for n, _t in named)])
        literals = ", ".join([str(row_id), self._key_value(table, row_id), *(self._literal(t) for _n, t in named)])
        if self._at(case, f"INSERT INTO {self._q(table)} ({names}) VALUES ({literals})", (table,)):
            self.ids[table].append(row_id)
            self._record(table, "INSERT", row_id)

    # -- system versioning -----------------------------------------------------------------------------------------

    def _versioning(self, a: int, b: int, c: int) -> None:
        table = self._table(a)
        if table in self.partitioned:
            return
        verb = "DROP" if table in self.versioned else "ADD"
        if self._at(f"{verb} SYSTEM VERSIONING", f"ALTER TABLE {self._q(table)} {verb} SYSTEM VERSIONING"):
            (self.versioned.discard if verb == "DROP" else self.versioned.add)(table)

    # -- statements about rows -------------------------------------------------------------------------------------

    def _statement(self, a: int, b: int, c: int) -> None:
        """A DELETE logged as a statement (binlog_format STATEMENT or MIXED): of a captured table's row, or of the
        table the capture leaves out."""
        captured = rare(b)
        table = self._table(a) if captured else self._outside()
        if not captured:
            self._run(f"INSERT INTO {self._q(table)} VALUES ({self._new_id()}, {c})")
        self._run(f"SET SESSION binlog_format = '{('STATEMENT', 'MIXED')[c % 2]}'")
        try:
            if captured:
                ids = self.ids[table]
                row_id = ids[c % len(ids)] if ids else 0
                if self._at("DML logged as a statement", f"DELETE FROM {self._q(table)} WHERE id = {row_id}", (table,)):
                    self._reread_ids(table)
            else:
                self._at("DML logged as a statement, its table filtered out", f"DELETE FROM {self._q(table)}")
        finally:
            self._run("SET SESSION binlog_format = 'ROW'")

    def _xa_outside(self, a: int, b: int, c: int) -> None:
        """An XA transaction on the table the capture leaves out: committed, rolled back or committed in one
        phase."""
        table = self._outside()
        xid = f"'{self._name('xa')}'"
        one_phase = b % 3 == 2
        statements = [
            f"XA START {xid}",
            f"INSERT INTO {self._q(table)} VALUES ({self._new_id()}, {c})",
            f"XA END {xid}",
        ]
        statements += [] if one_phase else [f"XA PREPARE {xid}"]
        for sql in statements:
            if not self._run(sql, commit=False):
                for cleanup in (f"XA END {xid}", f"XA ROLLBACK {xid}"):
                    self._run(cleanup, commit=False)
                return
        end = f"XA COMMIT {xid} ONE PHASE" if one_phase else f"XA {('COMMIT', 'ROLLBACK')[b % 3]} {xid}"
        self._at("XA transaction on a table filtered out", end)
