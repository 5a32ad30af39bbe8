"""The randomized workloads' ALTERs the conversion model follows or heals, and DDL under sql_modes that change how a
statement reads (:mod:`random_schema_workload` mixes them into its ``Workload``):

* a DDL under ``NO_BACKSLASH_ESCAPES`` (a default ending in a backslash, then another action: read as one string it
  would swallow the action) or ``ANSI_QUOTES`` (a column named in double quotes, a backslash in its name) -- followed;
* AUTO_INCREMENT made on the key over a key of 0 (written under ``NO_AUTO_VALUE_ON_ZERO``): renumbered by the server,
  healed -- or under ``NO_AUTO_VALUE_ON_ZERO``, kept and followed;
* a generated column added, and its expression set anew (VIRTUAL or PERSISTENT): computed again, healed;
* ``BINARY(n)`` columns added (existing rows padded with zero bytes) and hexadecimal and bit literals as defaults
  (binary strings: text, bytes or a number by the column's type) -- followed.

What heals stops the mirror typed under ``heal="stop"`` (:data:`HEALED`): the capture hands the statement on as it
is, and the mirror meets a value it cannot repeat. A family as :mod:`random_reach_operations` describes one.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final

from canal.lake.types import MirrorConversionError, MirrorError

EQUAL: Final = "equal"
CASES: Final = {
    "backslash": "a DDL under NO_BACKSLASH_ESCAPES",
    "ansi": "a DDL under ANSI_QUOTES",
    "zero kept": "AUTO_INCREMENT made under NO_AUTO_VALUE_ON_ZERO",
    "renumbered": "AUTO_INCREMENT made over a key of 0",
    "generated added": "a generated column added",
    "generated anew": "a generated column's expression set anew",
    "binary": "BINARY(n) columns added",
    "hex": "hexadecimal and bit literals as defaults",
}
_PIECES: Final = ("a", "\\\\", "''", "é", " ", "\\\\n", "%", ",")  # (as the SQL text holds them: a backslash each)
_HEX: Final = ("x'4142'", "0x4142", "b'01000001'", "x''", "0x41")


class AlterOperations:
    """ALTERs of the conversion model and DDL under sql_modes (module docstring), on the workload's tables and model
    (``tables``, ``key``, ``ids``, ``_run``, ``_at``, ``_q``, ``_table``, ``_key_value``, ``_reread_ids``)."""

    KINDS: ClassVar[list[str]] = ["alter_modes", "alter_auto_increment", "alter_generated", "alter_defaults"]
    OUTCOMES: ClassVar[dict[str, str | type[Exception]]] = {case: EQUAL for case in CASES.values()}
    HEALED: ClassVar[dict[str, type[Exception]]] = {
        CASES["renumbered"]: MirrorConversionError,
        CASES["generated added"]: MirrorError,  # (the mirror cannot fill the rows it holds)
        CASES["generated anew"]: MirrorConversionError,
    }
    ENTRY_KINDS: ClassVar[frozenset[str]] = frozenset()

    # (set by the workload)
    db: str
    rng: Any
    tables: dict[str, list[tuple[str, str]]]
    key: dict[str, str]
    ids: dict[str, list[int]]
    names: int

    def _moded(self, mode: str | None, case: str, sql: str, table: str) -> bool:
        """``sql``, the statement of ``case``, in the session's sql_mode ``mode`` (None: the default)."""
        self._run(f"SET SESSION sql_mode = {'DEFAULT' if mode is None else repr(mode)}")  # type: ignore[attr-defined]
        try:
            return bool(self._at(case, sql, (table,)))  # type: ignore[attr-defined]
        finally:
            self._run("SET SESSION sql_mode = DEFAULT")  # type: ignore[attr-defined]

    def _new_column(self, prefix: str) -> str:
        self.names += 1
        return f"{prefix}{self.names}"

    def _alter_modes(self, a: int, b: int, c: int) -> None:
        table = self._table(a)  # type: ignore[attr-defined]
        text = "".join(_PIECES[(c >> (3 * i)) % len(_PIECES)] for i in range(b % 4))
        name, other = self._new_column("m"), self._new_column("m")
        q = self._q(table)  # type: ignore[attr-defined]
        if b % 2:  # the backslash is a character, the quote ends the string: the second action is read
            sql = f"ALTER TABLE {q} ADD COLUMN `{name}` VARCHAR(20) DEFAULT '{text}\\', ADD COLUMN `{other}` INT"
            if self._moded("NO_BACKSLASH_ESCAPES", CASES["backslash"], sql, table):
                self.tables[table] = [*self.tables[table], (name, "VARCHAR(20)"), (other, "INT")]
        else:  # "..." is a name, a backslash in it a character of it
            named = f"{name}\\"
            sql = f'ALTER TABLE "{self.db}"."{table}" ADD COLUMN "{named}" VARCHAR(20) DEFAULT \'{text}\''
            if self._moded("ANSI_QUOTES", CASES["ansi"], sql, table):
                self.tables[table] = [*self.tables[table], (named, "VARCHAR(20)")]

    def _alter_auto_increment(self, a: int, b: int, c: int) -> None:
        table = self._table(a)  # type: ignore[attr-defined]
        columns = dict(self.tables[table])
        if self.key.get(table) != "id" or columns.get("k2") != "INT NOT NULL" or "AUTO_INCREMENT" in columns["id"]:
            return
        q = self._q(table)  # type: ignore[attr-defined]
        if 0 not in self.ids[table]:  # a key of 0, as NO_AUTO_VALUE_ON_ZERO writes it
            self._run("SET SESSION sql_mode = 'NO_AUTO_VALUE_ON_ZERO'")  # type: ignore[attr-defined]
            try:
                if self._run(f"INSERT INTO {q} (id, k2) VALUES (0, {self._key_value(table, 0)})"):  # type: ignore[attr-defined]
                    self.ids[table] = sorted([0, *self.ids[table]])
            finally:
                self._run("SET SESSION sql_mode = DEFAULT")  # type: ignore[attr-defined]
        kept = b % 2 == 0
        mode, case = ("NO_AUTO_VALUE_ON_ZERO", CASES["zero kept"]) if kept else (None, CASES["renumbered"])
        if self._moded(mode, case, f"ALTER TABLE {q} MODIFY id INT NOT NULL AUTO_INCREMENT", table):
            self.tables[table] = [(n, "INT NOT NULL AUTO_INCREMENT" if n == "id" else t) for n, t in self.tables[table]]
            self._reread_ids(table)  # type: ignore[attr-defined]

    def _alter_generated(self, a: int, b: int, c: int) -> None:
        table = self._table(a)  # type: ignore[attr-defined]
        q = self._q(table)  # type: ignore[attr-defined]
        kind = ("VIRTUAL", "PERSISTENT")[c % 2]
        generated: dict[str, str] = self.__dict__.setdefault("generated", {})  # table -> its generated column
        column = generated.get(table)
        if column is None:  # the workload's inserts name every column of the model: it stays out of it
            column = self._new_column("g")
            sql = f"ALTER TABLE {q} ADD COLUMN `{column}` INT AS (id * 2) {kind}"
            if self._moded(None, CASES["generated added"], sql, table):
                generated[table] = column
            return
        sql = f"ALTER TABLE {q} MODIFY `{column}` INT AS (id * {3 + b % 5}) {kind}"
        self._moded(None, CASES["generated anew"], sql, table)

    def _alter_defaults(self, a: int, b: int, c: int) -> None:
        table = self._table(a)  # type: ignore[attr-defined]
        q = self._q(table)  # type: ignore[attr-defined]
        name = self._new_column("d")
        if b % 2:
            column = f"BINARY({2 + c % 4}) {('DEFAULT ' + repr('ab'), 'NOT NULL', 'DEFAULT ' + repr('a '))[c % 3]}"
            case = CASES["binary"]
        else:
            # (not BIT: SELECT gives its bytes, the mirror its number -- tests/test_alter_model_mariadb.py has it)
            target = ("VARCHAR(10)", "VARBINARY(10)", "INT", "CHAR(4)", "TEXT", "BINARY(3)")[c % 6]
            column = f"{target} DEFAULT {_HEX[b % len(_HEX)]}"
            case = CASES["hex"]
        # (left out of the model: the workload's inserts leave it to its default, which pads a BINARY)
        self._moded(None, case, f"ALTER TABLE {q} ADD COLUMN `{name}` {column}", table)
