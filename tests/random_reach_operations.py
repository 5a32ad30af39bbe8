"""The randomized workloads' statements that change tables they do not name (:mod:`random_schema_workload` mixes
them into its ``Workload``): DML through views (a view over a view too), INSERTs whose triggers write another
table, stored functions called in a statement (``INSERT ... VALUES (f())``, ``SELECT f()``, ``DO f()``), a parent's
DELETE / UPDATE whose foreign keys' actions change children -- of a captured parent, and of the table the capture
leaves out (``random_operations.OUTSIDE``) --, each in a session logging ROW, STATEMENT or MIXED; a session's
temporary tables shadowing captured names (DML, TRUNCATE, ALTER, RENAME, DROP of them, and an INSERT ... SELECT from
one into a captured table); and tables named with dots, quotes, spaces and non-ASCII characters.

Each operation runs its decisive statement through ``Workload._at`` with its case (:data:`OUTCOMES`); what a session
logs as a statement heals by default (the capture reads every captured table it reaches again) and stops typed
under ``heal="stop"`` (:data:`HEALED`), like a foreign key's action from the table left out, under ROW. The row
images of these statements are not recorded one by one (the tests compare whole tables): none is in
``ENTRY_KINDS``.

A family of operations is a class like :class:`ReachOperations`: its ``KINDS`` (the workload's method is ``_`` and
the name), ``OUTCOMES`` and ``HEALED`` by case, ``ENTRY_KINDS``; :data:`random_schema_workload.FAMILIES` lists them.
"""

from __future__ import annotations

import zlib
from typing import Any, ClassVar, Final

from random_operations import OUTSIDE, rare

from canal.errors import UnmodeledStatementError

EQUAL: Final = "equal"
STATEMENT_CASES: Final = {
    "view": "DML through a view, logged as a statement",
    "trigger": "an INSERT firing a trigger, logged as a statement",
    "function": "a stored function called in a statement logged as a statement",
    "cascade": "a parent's change cascading to its children, logged as a statement",
    "outside": "a change of the table left out cascading to captured children, logged as a statement",
    "temporary read": "DML logged as a statement reading a temporary table",
    # judged by the event's flag alone, as a restart inside its transaction judges it: the table it shadows heals
    "temporary dml": "DML of a temporary table shadowing a captured name, logged as a statement",
}
ROW_CASES: Final = {
    "view": "DML through a view, logged as rows",
    "trigger": "an INSERT firing a trigger, logged as rows",
    "function": "a stored function called in a statement logged as rows",
    "cascade": "a parent's change cascading to its children, logged as rows",
    "outside": "a change of the table left out cascading to captured children, logged as rows",
}
TEMPORARY: Final = "TRUNCATE, ALTER, RENAME, DROP of a session's temporary table shadowing a captured name"
ODD_NAME: Final = "a table named with dots, quotes, spaces or non-ASCII characters"
ODD_NAMES: Final = ("t.dot{}", "t'quote{}", 't"dq{}', "t ä ü{}", "tΩ€{}", "T.Mixed.{}")
FORMATS: Final = ("STATEMENT", "MIXED", "ROW")


class ReachOperations:
    """Statements that change tables they do not name (module docstring), on the workload's tables and model
    (``tables``, ``key``, ``ids``, ``_run``, ``_at``, ``_q``, ``_new_id``, ``_reread_ids``, ``create_table``)."""

    KINDS: ClassVar[list[str]] = [
        "reach_view", "reach_trigger", "reach_function", "reach_cascade", "reach_outside", "reach_temporary",
        "odd_name",
    ]  # fmt: skip
    OUTCOMES: ClassVar[dict[str, str | type[Exception]]] = {
        **{case: EQUAL for case in (*STATEMENT_CASES.values(), *ROW_CASES.values(), TEMPORARY, ODD_NAME)},
    }
    HEALED: ClassVar[dict[str, type[Exception]]] = {
        **{case: UnmodeledStatementError for case in STATEMENT_CASES.values()},
        # under ROW: the parent's rows, left out, carry the action the children's copies would apply
        ROW_CASES["outside"]: UnmodeledStatementError,
    }
    ENTRY_KINDS: ClassVar[frozenset[str]] = frozenset()

    # (set by the workload)
    conn: Any
    db: str
    rng: Any
    tables: dict[str, list[tuple[str, str]]]
    key: dict[str, str]
    ids: dict[str, list[int]]
    names: int
    next_id: int
    connect: Any  # a new autocommit connection to the server

    # -- the family's objects ------------------------------------------------------------------------------------------

    def _reach_table(self, name: str, extra: str = "") -> str | None:
        """A table of the workload's kind (``id``, ``k2``, keyed by ``id``) made for the family, with ``extra``
        columns (``pid INT``); None when the server refused it."""
        if name in self.tables:
            return name
        columns = [("id", "INT NOT NULL"), ("k2", "INT NOT NULL"), *([("pid", "INT")] if extra else [])]
        body = ", ".join(f"`{c}` {t}" for c, t in columns)
        if not self._run(f"CREATE TABLE {self._q(name)} ({body}, PRIMARY KEY (id), UNIQUE KEY (k2){extra})"):
            return None
        self.tables[name], self.key[name], self.ids[name] = columns, "id", []
        return name

    def _audit(self) -> str | None:
        return self._reach_table("aud")

    def _in_format(self, fmt: str, case_key: str, sql: str, tables: tuple[str, ...]) -> bool:
        """``sql`` in a session logging ``fmt``: the case of ``case_key`` under that format."""
        cases = ROW_CASES if fmt == "ROW" else STATEMENT_CASES
        self._run(f"SET SESSION binlog_format = '{fmt}'")
        try:
            return self._at(cases[case_key], sql, tables)
        finally:
            self._run("SET SESSION binlog_format = 'ROW'")

    def _format(self, b: int) -> str:
        """The session's binlog_format: STATEMENT, MIXED (what heals, or stops under heal="stop") or ROW, a third each
        (for the workloads of the family's own test: a shared one draws it rarely)."""
        return FORMATS[b % 3]

    def _row_of(self, table: str, c: int) -> int | None:
        ids = self.ids.get(table, [])
        return ids[c % len(ids)] if ids else None

    def _key_for(self, row_id: int) -> int:
        return row_id * 10 + 3  # a k2 no other workload row has (theirs are multiples of 10)

    # -- views ---------------------------------------------------------------------------------------------------------

    def _reach_view(self, a: int, b: int, c: int) -> None:
        table = self._table(a)
        if self.key.get(table) != "id":
            return
        view = f"v_{table}"
        # made again each time: a view's columns are the table's when it was made
        if not self._run(f"CREATE OR REPLACE VIEW {self._q(view)} AS SELECT * FROM {self._q(table)} WHERE id >= 0"):
            return
        if c % 3 == 0:  # a view over the view
            over = f"vv_{table}"
            if self._run(f"CREATE OR REPLACE VIEW {self._q(over)} AS SELECT * FROM {self._q(view)}"):
                view = over
        row = self._row_of(table, c)
        if c % 4 == 0 or row is None:
            new = self._new_id()
            sql = f"INSERT INTO {self._q(view)} (id, k2) VALUES ({new}, {self._key_for(new)})"
        elif c % 4 == 1:
            sql = f"DELETE FROM {self._q(view)} WHERE id = {row}"
        else:
            sql = f"UPDATE {self._q(view)} SET k2 = {self._key_for(self._new_id())} WHERE id = {row}"
        if self._in_format(self._format(b), "view", sql, (view,)):
            self._reread_ids(table)

    # -- triggers and functions ----------------------------------------------------------------------------------------

    def _reach_trigger(self, a: int, b: int, c: int) -> None:
        audit, table = self._audit(), self._table(a)
        if audit is None or table == audit or self.key.get(table) != "id":
            return
        trigger = f"tr_{zlib.crc32(table.encode())}"
        values = "NEW.id + 5000000, NEW.id + 5000000"
        self._run(
            f"CREATE TRIGGER IF NOT EXISTS `{self.db}`.`{trigger}` AFTER INSERT ON {self._q(table)} FOR EACH ROW "
            f"REPLACE INTO {self._q(audit)} (id, k2) VALUES ({values})"
        )
        new = self._new_id()
        sql = f"INSERT INTO {self._q(table)} (id, k2) VALUES ({new}, {self._key_for(new)})"
        if self._in_format(self._format(b), "trigger", sql, (table,)):
            self._reread_ids(table)
            self._reread_ids(audit)

    def _reach_function(self, a: int, b: int, c: int) -> None:
        audit, table = self._audit(), self._table(a)
        if audit is None or self.key.get(table) != "id":
            return
        self._run(
            f"CREATE FUNCTION IF NOT EXISTS `{self.db}`.fw(a INT) RETURNS INT DETERMINISTIC MODIFIES SQL DATA "
            f"BEGIN REPLACE INTO {self._q(audit)} (id, k2) VALUES (a + 6000000, a + 6000000); RETURN a; END"
        )
        new = self._new_id()
        if c % 3 == 0:
            sql = f"INSERT INTO {self._q(table)} (id, k2) VALUES (`{self.db}`.fw({new}), {self._key_for(new)})"
        else:
            sql = f"{('SELECT', 'DO')[c % 3 - 1]} `{self.db}`.fw({new})"
        if self._in_format(self._format(b), "function", sql, (table,) if c % 3 == 0 else ()):
            self._reread_ids(table)
            self._reread_ids(audit)

    # -- foreign keys ----------------------------------------------------------------------------------------------

    def _cascade_tables(self, parent: str) -> tuple[str, str] | None:
        """A child of ``parent`` (ON DELETE CASCADE, ON UPDATE CASCADE) with a row referencing each parent row."""
        child = f"{parent}_child"
        reference = f", FOREIGN KEY (pid) REFERENCES {self._q(parent)} (id) ON DELETE CASCADE ON UPDATE CASCADE"
        if self._reach_table(child, reference) is None:
            return None
        self._reread_ids(parent)
        for parent_id in self.ids[parent][:3]:
            new = self._new_id()
            self._run(f"INSERT INTO {self._q(child)} (id, k2, pid) VALUES ({new}, {self._key_for(new)}, {parent_id})")
        self._reread_ids(child)
        return parent, child

    def _cascade_change(self, parent: str, case_key: str, b: int, c: int) -> None:
        found = self._cascade_tables(parent)
        row = self._row_of(parent, c)
        if found is None or row is None:
            return
        child = found[1]
        if c % 2:
            sql = f"DELETE FROM {self._q(parent)} WHERE id = {row}"
        else:
            sql = f"UPDATE {self._q(parent)} SET id = {self._new_id()} WHERE id = {row}"
        fmt = self._format(b)
        named = (parent,) if parent != OUTSIDE or fmt != "ROW" else (f"{OUTSIDE}", child)
        if self._in_format(fmt, case_key, sql, named):
            self._reread_ids(child)
            if parent in self.key:
                self._reread_ids(parent)

    def _reach_cascade(self, a: int, b: int, c: int) -> None:
        parent = self._reach_table("fkp")
        if parent is not None:
            for _ in range(2):
                new = self._new_id()
                self._run(f"INSERT INTO {self._q(parent)} (id, k2) VALUES ({new}, {self._key_for(new)})")
            self._cascade_change(parent, "cascade", b, c)

    def _reach_outside(self, a: int, b: int, c: int) -> None:
        outside = self._outside()
        for _ in range(2):
            self._run(f"INSERT INTO {self._q(outside)} VALUES ({self._new_id()}, {c})")
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT id FROM {self._q(outside)}")
            self.ids.setdefault(outside, [])
            self.ids[outside] = sorted(int(r[0]) for r in cur.fetchall())
        self._cascade_change(outside, "outside", b, c)
        self.ids.pop(outside, None)  # not a table of the workload's model

    # -- temporary tables ------------------------------------------------------------------------------------------

    def _reach_temporary(self, a: int, b: int, c: int) -> None:
        """In a session of its own (its temporary tables end with it): a temporary table named as a captured one,
        and what that session does to it; now and then an INSERT ... SELECT from it into another captured table."""
        table = self._table(a)
        session = self._session()
        q = self._q(table)
        fmt = FORMATS[b % 2]
        try:
            temporary = self._q(table + "_tmp")
            dml = STATEMENT_CASES["temporary dml"]
            for sql, case in (
                (f"SET SESSION binlog_format = '{fmt}'", None),
                (f"CREATE TEMPORARY TABLE {q} (id INT PRIMARY KEY, k2 INT)", None),
                (f"TRUNCATE TABLE {q}", TEMPORARY),
                (f"ALTER TABLE {q} ADD COLUMN w INT", TEMPORARY),
                (f"ALTER TABLE {q} RENAME TO {temporary}", TEMPORARY),
                (f"INSERT INTO {temporary} VALUES ({self._new_id()}, 3, 3)", None),  # a name no table has
                (f"RENAME TABLE {temporary} TO {q}", TEMPORARY),
                *(
                    [(f"INSERT INTO {q} VALUES ({self._new_id()}, 1, 1), ({self._new_id()}, 2, 2)", dml)]
                    if c % 2
                    else []
                ),
            ):
                if not (self._run(sql, conn=session) if case is None else self._at(case, sql, (table,), conn=session)):
                    return
            other = self._table(a + 1)
            if rare(b) and other != table and self.key.get(other) == "id":
                self._reach_temporary_read(session, q, other)
            self._run(f"DROP TABLE {q}", conn=session)
        finally:
            session.close()

    def _reach_temporary_read(self, session: Any, temporary: str, into: str) -> None:
        """INSERT ... SELECT from the session's temporary table into a captured table: that one heals."""
        offset = self._new_id() + 10_000
        self.next_id = offset + 1000
        sql = f"INSERT INTO {self._q(into)} (id, k2) SELECT id + {offset}, (id + {offset}) * 10 + 3 FROM {temporary}"
        if self._at(STATEMENT_CASES["temporary read"], sql, (into, temporary.split("`")[3]), conn=session):
            self._reread_ids(into)

    def _session(self) -> Any:
        """A connection of its own to the workload's server (``connect``, set by the test)."""
        return self.connect()

    # -- names ---------------------------------------------------------------------------------------------------------

    def _odd_name(self, a: int, b: int, c: int) -> None:
        if len(self.tables) >= 6:
            return
        self.names += 1
        name = ODD_NAMES[b % len(ODD_NAMES)].format(self.names)
        self.create_table(name)
        if name in self.tables:
            self._seen(ODD_NAME)
            for _ in range(1 + c % 3):
                self._insert_into(name)
