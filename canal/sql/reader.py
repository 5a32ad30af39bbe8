"""The statement reader: one recursive-descent pass from SQL text to typed statements.

:func:`read_statements` reads every statement of a text (``;``-separated). Statements the schema follows (CREATE /
ALTER / DROP / RENAME / TRUNCATE TABLE, CREATE / DROP INDEX, CREATE / ALTER / DROP DATABASE) are read whole; for
every other statement only what tells its kind and the object it is about (a DML's table, a view's schema, an XA
statement's xid) -- so a megabyte INSERT is tokenized only up to its table name.

Strict reads (the default) raise :class:`~canal.errors.SqlError` when a statement the schema follows cannot be read:
nothing is guessed. Lenient reads (``strict=False``, the DDL classifier's) never raise: such a statement becomes an
:class:`~canal.sql.statements.Unreadable` naming what its head said, an unreadable ALTER action an ``OtherAction``
carrying the error. Any other text becomes an :class:`~canal.sql.statements.OtherStatement` in both modes.

Compound statements (procedure, function, trigger and event bodies, ``BEGIN NOT ATOMIC``, ``IF``) hold ``;`` of their
own: reading stops after their head, so their body never reads as statements of the event.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Final

import attrs

from canal.errors import SqlError
from canal.sql.alter import read_alter_actions
from canal.sql.cursor import Cursor
from canal.sql.lexer import DSTRING, END, QUOTED, STRING, WORD, tokens
from canal.sql.maintenance import MAINTENANCE_OPTIONS, read_setting_list, read_settings
from canal.sql.modes import DEFAULT_MODE, LEXINGS, SqlMode
from canal.sql.statements import (
    AlterDatabase,
    AlterTable,
    CreateDatabase,
    CreateIndex,
    CreateTable,
    DmlStatement,
    DropDatabase,
    DropIndexStatement,
    DropTable,
    Grant,
    IndexDef,
    OtherStatement,
    QueryKind,
    RenameTable,
    Statement,
    TableMaintenance,
    TableName,
    TableOption,
    TransactionStatement,
    TruncateTable,
    Unreadable,
    named_tables,
    statement_verb,
)
from canal.sql.tables import read_create_table, read_key_parts, read_table_options

__all__ = ["READ_WHOLE", "TRACKED", "read_settings", "read_statements", "reads_alike"]

TRACKED: Final = (
    CreateTable,
    AlterTable,
    RenameTable,
    DropTable,
    TruncateTable,
    CreateIndex,
    DropIndexStatement,
    CreateDatabase,
    DropDatabase,
    AlterDatabase,
)
"""The statement classes the schema follows: read whole, and a strict read raises when they cannot be read."""

READ_WHOLE: Final = (*TRACKED, TableMaintenance)
"""The statement classes read whole: text the reader does not know, after them or inside them, is an error when
strict and an :class:`~canal.sql.statements.Unreadable` when lenient -- never left unread."""

# objects whose definition carries a compound body: whatever follows belongs to it
_COMPOUND_OBJECTS: Final = frozenset({"PROCEDURE", "FUNCTION", "TRIGGER", "EVENT", "PACKAGE"})
_NAMED_OBJECTS: Final = frozenset(
    {"VIEW", "PROCEDURE", "FUNCTION", "TRIGGER", "EVENT", "SEQUENCE", "PACKAGE", "SYNONYM"}
)
_DCL_OBJECTS: Final = frozenset({"USER", "ROLE"})
_ALTER_DB_OPTION_WORDS: Final = frozenset(
    {"DEFAULT", "CHARACTER", "CHARSET", "COLLATE", "ENCRYPTION", "READ", "COMMENT", "UPGRADE"}
)
_DELETE_TAIL: Final = frozenset({"WHERE", "ORDER", "LIMIT", "PARTITION", "RETURNING", ";"})
_XA_VERBS: Final = {
    "START": QueryKind.XA_START,
    "BEGIN": QueryKind.XA_START,
    "END": QueryKind.XA_END,
    "PREPARE": QueryKind.XA_PREPARE,
    "COMMIT": QueryKind.XA_COMMIT,
    "ROLLBACK": QueryKind.XA_ROLLBACK,
}


def read_statements(sql: str, *, strict: bool = True, mode: SqlMode = DEFAULT_MODE) -> list[Statement]:
    """Every statement of ``sql``, in order (none for empty text or text of comments only), read under the
    statement's sql_mode ``mode`` (:mod:`canal.sql.modes`; the default mode when it is not known)."""
    return _Reader(sql, strict, mode).statements()


# the statements a SET STATEMENT may hold whose text is read only up to their table (canal.sql.reader's docstring)
_READ_TO_TABLE: Final = frozenset({"INSERT", "REPLACE", "UPDATE", "DELETE", "LOAD", "WITH", "SELECT", "CALL", "DO"})


def reads_alike(sql: str) -> bool:
    """Whether ``sql`` reads the same under every session mode (:data:`canal.sql.modes.LEXINGS`): the same tokens,
    whether a backslash escapes or not and whether ``"`` quotes a string or a name, and no ``DEFAULT ''`` that
    EMPTY_STRING_IS_NULL would make NULL."""
    seen: list[tuple[int, str]] | None = None
    for lexing in LEXINGS:
        found: list[tuple[int, str]] = []
        previous = ""
        for tok in tokens(sql, lexing):
            if tok.kind in (STRING, DSTRING) and not tok.text and previous == "DEFAULT":
                return False
            found.append((tok.kind, tok.text))
            previous = tok.up
        if seen is not None and found != seen:
            return False
        seen = found
    return True


class _Reader:
    __slots__ = ("c", "stop", "strict")

    def __init__(self, sql: str, strict: bool, mode: SqlMode = DEFAULT_MODE) -> None:
        self.c = Cursor(sql, mode)
        self.strict = strict
        self.stop = False  # the rest of the text belongs to a compound body

    def statements(self) -> list[Statement]:
        out: list[Statement] = []
        c = self.c
        while c.peek() is not END:
            if c.accept(";"):
                continue
            start = c.pos
            stmt = self.statement()
            out.append(stmt)
            if self.stop:
                break
            if not c.at_end() and isinstance(stmt, READ_WHOLE):
                error = c.error("unexpected text after the statement")
                if self.strict:
                    raise error
                tables = named_tables(stmt)
                stmt = out[-1] = Unreadable(
                    stmt.kind, statement_verb(stmt), tables[0] if tables else None, str(error), tables
                )
            if c.mode.oracle and isinstance(stmt, TRACKED):
                # MariaDB's ORACLE mode reads DDL by another grammar (DATE is a DATETIME, NUMBER a DECIMAL, ...)
                error = c.error("a statement under sql_mode ORACLE, whose grammar the reader does not model")
                if self.strict:
                    raise error
                tables = named_tables(stmt)
                stmt = out[-1] = Unreadable(
                    stmt.kind, statement_verb(stmt), tables[0] if tables else None, str(error), tables
                )
            if isinstance(stmt, Unreadable):
                c.pos = start  # skip the whole statement, whatever the parentheses where reading stopped
            self.skip_statement()
        return out

    def skip_statement(self) -> None:
        """Skip to just after the next ``;`` outside parentheses (or to the end)."""
        c = self.c
        while c.peek() is not END:
            if c.accept(";"):
                return
            c.skip_tolerant()

    def statement(self) -> Statement:
        c = self.c
        tok = c.peek()
        handler = _HANDLERS.get(tok.up) if tok.kind == WORD else None
        if handler is None:
            self.stop = True  # unknown text may hold a compound body: read no further statements
            return OtherStatement(QueryKind.OTHER, tok.up if tok.kind == WORD else "")
        c.next()
        stmt = handler(self)
        if isinstance(stmt, DmlStatement):
            self.stop = True  # a statement-form DML can be megabytes long: never tokenize its values
        return stmt

    def guarded(
        self, verb: str, table: TableName | None, read: Callable[[], Statement], kind: QueryKind = QueryKind.DDL
    ) -> Statement:
        """Read a statement read whole; a lenient read turns an SqlError into an Unreadable."""
        try:
            return read()
        except SqlError as exc:
            if self.strict:
                raise
            return Unreadable(kind, verb, table, str(exc), () if table is None else (table,))

    def table_list(self) -> tuple[list[TableName], bool]:
        """``name [, name ...]``, as long as names come; and whether a ``,`` came with no name after it."""
        c = self.c
        names: list[TableName] = []
        while (name := c.opt_table_name()) is not None:
            names.append(name)
            if not c.accept(","):
                return names, False
        return names, bool(names)

    def cut_short(self, verb: str, tables: list[TableName], what: str) -> Statement:
        """A list of tables or renames that stops where another must come: an error, or an Unreadable naming the
        tables read."""
        if self.strict:
            raise self.c.error(f"expected {what}")
        return Unreadable(QueryKind.DDL, verb, tables[0], f"expected {what}", tuple(tables))

    def missing_name(self, verb: str, what: str) -> Statement:
        if self.strict:
            raise self.c.error(f"expected {what}")
        return Unreadable(QueryKind.DDL, verb, None, f"expected {what}")

    # -- shared pieces ------------------------------------------------------------------------------------------------

    def skip_wait(self) -> None:
        c = self.c
        if c.accept("WAIT"):
            c.next()
        else:
            c.accept("NOWAIT")

    def named_object(self, verb: str, obj: str, kind: QueryKind = QueryKind.DDL) -> OtherStatement:
        """A view, routine, trigger ...: its schema when qualified."""
        c = self.c
        if obj in _COMPOUND_OBJECTS:
            self.stop = True
        if not c.accept_seq("IF", "NOT", "EXISTS"):
            c.accept_seq("IF", "EXISTS")
        name = c.opt_table_name()
        schema = name.schema if name is not None else None
        tables = (name,) if obj == "SEQUENCE" and name is not None else ()  # a sequence is a table (ALTER SEQUENCE)
        return OtherStatement(kind, f"{verb} {obj}", schema, tables)

    def other_object(self, verb: str, obj: str) -> Statement:
        """CREATE / ALTER / DROP of anything but a table, an index or a database."""
        if obj in _DCL_OBJECTS:
            return OtherStatement(QueryKind.DCL, f"{verb} {obj}")
        if obj in _NAMED_OBJECTS:
            return self.named_object(verb, obj)
        if verb == "DROP":
            return OtherStatement(QueryKind.OTHER if obj == "PREPARE" else QueryKind.DDL, f"DROP {obj}".strip())
        self.stop = True  # an object this reader does not know may have a compound body
        return OtherStatement(QueryKind.DDL, f"{verb} {obj}".strip())

    def index_table(self, first: int) -> TableName | None:
        """For a lenient read of CREATE/DROP INDEX that failed: the table after the top-level ON, if any."""
        self.c.pos = first
        return self.c.opt_table_name() if self.skip_to("ON") else None

    def skip_to(self, *words: str) -> bool:
        """Move just past the next ``words`` outside parentheses in this statement; False (at its end) if none."""
        c = self.c
        while not c.at_end():
            if c.accept_seq(*words):
                return True
            c.skip_tolerant()
        return False

    # -- CREATE / ALTER / DROP ----------------------------------------------------------------------------------------

    def create(self) -> Statement:
        c = self.c
        mods = self.c.create_modifiers()
        obj = c.next().up
        if obj == "TABLE":
            if_not_exists = c.accept_seq("IF", "NOT", "EXISTS")
            name = c.opt_table_name()
            if name is None:
                return self.missing_name("CREATE TABLE", "a table name")
            return self.guarded(
                "CREATE TABLE",
                name,
                lambda: read_create_table(
                    c,
                    name,
                    if_not_exists=if_not_exists,
                    temporary="TEMPORARY" in mods,
                    or_replace="OR REPLACE" in mods,
                ),
            )
        if obj == "INDEX":
            first = c.pos
            try:
                return self.create_index(mods)
            except SqlError as exc:
                if self.strict:
                    raise
                return Unreadable(QueryKind.DDL, "CREATE INDEX", self.index_table(first), str(exc))
        if obj in ("DATABASE", "SCHEMA"):
            return self.create_database("OR REPLACE" in mods)
        if obj == "SEQUENCE":
            return self.create_sequence(mods)
        return self.other_object("CREATE", obj)

    def create_sequence(self, mods: set[str]) -> Statement:
        """MariaDB's CREATE SEQUENCE makes a table of one row, whose changes the binlog logs as row events: it is
        read as the CREATE TABLE of that table. Its options (START WITH, INCREMENT BY, CACHE, ...) change no layout;
        ``AS type`` (MariaDB 11.5) changes the value columns' type, which this reader does not model: refused."""
        c = self.c
        if_not_exists = c.accept_seq("IF", "NOT", "EXISTS")
        name = c.opt_table_name()
        if name is None:
            return self.missing_name("CREATE SEQUENCE", "a sequence name")

        def read() -> Statement:
            while not c.at_end():
                if c.up() == "AS":
                    raise c.error("a sequence of another value type (AS ...) is not modeled")
                c.skip_tolerant()
            template = _sequence_table()
            return attrs.evolve(
                template,
                table=name,
                if_not_exists=if_not_exists,
                or_replace="OR REPLACE" in mods,
                temporary="TEMPORARY" in mods,
            )

        return self.guarded("CREATE SEQUENCE", name, read)

    def create_index(self, mods: set[str]) -> CreateIndex:
        c = self.c
        if_not_exists = c.accept_seq("IF", "NOT", "EXISTS")
        name = c.ident("an index name")
        using = c.ident("an index type").upper() if c.accept("USING", "TYPE") else None
        c.expect("ON")
        table = c.table_name()
        columns = read_key_parts(c)
        kind = next((k for k in ("UNIQUE", "FULLTEXT", "SPATIAL", "VECTOR") if k in mods), "INDEX")
        options: list[str] = []
        while not c.at_end():
            start = c.pos
            up = c.next().up
            if up in ("USING", "TYPE"):
                using = c.ident("an index type").upper()
                continue
            if up in ("ALGORITHM", "LOCK", "KEY_BLOCK_SIZE", "M", "DISTANCE") or up.endswith("ENGINE_ATTRIBUTE"):
                c.accept_equals()
                c.word_or_string()
            elif up == "COMMENT":
                c.string("a comment")
            elif up == "WITH":
                c.expect("PARSER")
                c.ident("a parser name")
            elif up == "NOT":
                c.expect("IGNORED")
            elif up not in ("VISIBLE", "INVISIBLE", "IGNORED"):
                c.pos = start
                raise c.error("unexpected text in CREATE INDEX")
            options.append(c.text_from(start))
        index = IndexDef(kind, name, columns, None, using, tuple(options))
        return CreateIndex(table, index, if_not_exists, "OR REPLACE" in mods)

    def create_database(self, or_replace: bool) -> Statement:
        c = self.c
        if_not_exists = c.accept_seq("IF", "NOT", "EXISTS")
        name = c.opt_ident()
        if name is None:
            return self.missing_name("CREATE DATABASE", "a database name")
        return CreateDatabase(name, if_not_exists, or_replace, self.options())

    def options(self) -> tuple[TableOption, ...]:
        """Database options; a lenient read keeps none of them when one cannot be read (the name still counts)."""
        start = self.c.pos
        try:
            return read_table_options(self.c)
        except SqlError:
            if self.strict:
                raise
            self.c.pos = start
            return ()

    def alter(self) -> Statement:
        c = self.c
        mods = self.c.create_modifiers()
        obj = c.next().up
        if obj == "TABLE":
            if_exists = c.accept_seq("IF", "EXISTS")
            name = c.opt_table_name()
            if name is None:
                return self.missing_name("ALTER TABLE", "a table name")
            self.skip_wait()
            actions = read_alter_actions(c, self.strict)
            return AlterTable(name, actions, if_exists, "ONLINE" in mods, "IGNORE" in mods)
        if obj in ("DATABASE", "SCHEMA"):
            tok = c.peek()
            db = None
            if tok.kind in (QUOTED, DSTRING) or (tok.kind == WORD and tok.up not in _ALTER_DB_OPTION_WORDS):
                db = c.opt_ident()
            return AlterDatabase(db, self.options())
        return self.other_object("ALTER", obj)

    def drop(self) -> Statement:
        c = self.c
        mods = self.c.create_modifiers()
        obj = c.next().up
        if obj in ("TABLE", "TABLES"):
            if_exists = c.accept_seq("IF", "EXISTS")
            names, dangling = self.table_list()
            if not names:
                return self.missing_name("DROP TABLE", "a table name")
            if dangling:
                return self.cut_short("DROP TABLE", names, "a table name")
            c.accept("RESTRICT", "CASCADE")
            return DropTable(tuple(names), if_exists, "TEMPORARY" in mods)
        if obj == "INDEX":
            first = c.pos
            try:
                if_exists = c.accept_seq("IF", "EXISTS")
                index = c.ident("an index name")
                c.expect("ON")
                table = c.table_name()
                while c.up() in ("ALGORITHM", "LOCK"):
                    c.next()
                    c.accept_equals()
                    c.word_or_string()
                return DropIndexStatement(table, index, if_exists)
            except SqlError as exc:
                if self.strict:
                    raise
                return Unreadable(QueryKind.DDL, "DROP INDEX", self.index_table(first), str(exc))
        if obj == "SEQUENCE":  # a sequence is a table (CREATE SEQUENCE)
            if_exists = c.accept_seq("IF", "EXISTS")
            sequences, dangling = self.table_list()
            if not sequences:
                return self.missing_name("DROP SEQUENCE", "a sequence name")
            if dangling:
                return self.cut_short("DROP SEQUENCE", sequences, "a sequence name")
            return DropTable(tuple(sequences), if_exists, "TEMPORARY" in mods)
        if obj in ("DATABASE", "SCHEMA"):
            if_exists = c.accept_seq("IF", "EXISTS")
            db = c.opt_ident()
            if db is None:
                return self.missing_name("DROP DATABASE", "a database name")
            return DropDatabase(db, if_exists)
        return self.other_object("DROP", obj)

    def rename(self) -> Statement:
        c = self.c
        obj = c.next().up
        if obj in _DCL_OBJECTS:
            return OtherStatement(QueryKind.DCL, f"RENAME {obj}")
        if obj not in ("TABLE", "TABLES"):
            return OtherStatement(QueryKind.OTHER, f"RENAME {obj}".strip())
        if_exists = c.accept_seq("IF", "EXISTS")
        pairs: list[tuple[TableName, TableName]] = []
        while True:
            old = c.opt_table_name()
            if old is None:
                break
            self.skip_wait()
            new = c.opt_table_name() if c.accept("TO") else None
            if new is None:
                break
            pairs.append((old, new))
            if not c.accept(","):
                return RenameTable(tuple(pairs), if_exists)
        if not pairs:
            return self.missing_name("RENAME TABLE", "old_name TO new_name")
        return self.cut_short("RENAME TABLE", [n for pair in pairs for n in pair], "old_name TO new_name")

    def truncate(self) -> Statement:
        c = self.c
        c.accept("TABLE")
        name = c.opt_table_name()
        if name is None:
            return self.missing_name("TRUNCATE TABLE", "a table name")
        self.skip_wait()
        return TruncateTable(name)

    # -- statement-form DML (heads only) ------------------------------------------------------------------------------

    def insert(self, head: str = "") -> Statement:
        c = self.c
        while c.accept("LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE"):
            pass
        c.accept("INTO")
        return DmlStatement("INSERT", c.opt_table_name(), head)

    def update(self) -> Statement:
        c = self.c
        while c.accept("LOW_PRIORITY", "IGNORE"):
            pass
        name = c.opt_table_name()
        if name is not None:
            if c.accept("AS"):
                c.next()
            elif c.peek().kind in (WORD, QUOTED) and c.up() not in ("SET", "PARTITION"):
                c.next()  # alias
            if c.up() in ("SET", "PARTITION"):
                return DmlStatement("UPDATE", name)
        return DmlStatement("UPDATE", None)

    def delete(self) -> Statement:
        c = self.c
        while c.accept("LOW_PRIORITY", "QUICK", "IGNORE"):
            pass
        if c.accept("FROM"):
            name = c.opt_table_name()
            if name is not None:
                if c.accept("AS"):
                    c.next()
                elif c.peek().kind in (WORD, QUOTED) and c.up() not in _DELETE_TAIL:
                    c.next()  # alias
                if c.at_end() or c.up() in _DELETE_TAIL:
                    return DmlStatement("DELETE", name)
        return DmlStatement("DELETE", None)

    def load(self) -> Statement:
        c = self.c
        if not c.accept("DATA", "XML"):
            return OtherStatement(QueryKind.OTHER, "LOAD")
        return DmlStatement("INSERT", c.opt_table_name() if self.skip_to("INTO", "TABLE") else None, "LOAD")

    def with_(self) -> Statement:
        c = self.c
        c.accept("RECURSIVE")
        while True:
            if c.opt_ident() is None:
                return OtherStatement(QueryKind.OTHER, "WITH")
            if c.up() == "(":
                c.skip_tolerant()
            if not c.accept("AS") or c.up() != "(":
                return OtherStatement(QueryKind.OTHER, "WITH")
            c.skip_tolerant()
            if not c.accept(","):
                break
        if c.up() in ("UPDATE", "DELETE", "INSERT", "REPLACE"):
            return self.statement()
        return OtherStatement(QueryKind.OTHER, "WITH")

    # -- transaction control and the rest -----------------------------------------------------------------------------

    def begin(self) -> Statement:
        c = self.c
        c.accept("WORK")
        if c.at_end():
            return TransactionStatement(QueryKind.BEGIN)
        self.stop = True  # BEGIN NOT ATOMIC ... END: a compound statement
        return OtherStatement(QueryKind.OTHER, "BEGIN")

    def start(self) -> Statement:
        if self.c.accept("TRANSACTION"):
            return TransactionStatement(QueryKind.BEGIN)
        return OtherStatement(QueryKind.OTHER, "START")

    def commit(self) -> Statement:
        return TransactionStatement(QueryKind.COMMIT)

    def rollback(self) -> Statement:
        c = self.c
        c.accept("WORK")
        if c.accept("TO"):
            c.accept("SAVEPOINT")
            return self._savepoint_named("ROLLBACK TO")
        return TransactionStatement(QueryKind.ROLLBACK)

    def savepoint(self) -> Statement:
        return self._savepoint_named("SAVEPOINT")

    def release(self) -> Statement:
        if self.c.accept("SAVEPOINT"):
            return self._savepoint_named("RELEASE")
        return OtherStatement(QueryKind.OTHER, "RELEASE")

    def _savepoint_named(self, verb: str) -> Statement:
        # SAVEPOINT x / ROLLBACK [WORK] TO [SAVEPOINT] x / RELEASE SAVEPOINT x: the name the parser tracks
        return TransactionStatement(QueryKind.SAVEPOINT, savepoint=self.c.opt_ident(), savepoint_verb=verb)

    def xa(self) -> Statement:
        c = self.c
        kind = _XA_VERBS.get(c.up())
        if kind is None:
            return OtherStatement(QueryKind.OTHER, f"XA {c.up()}".strip())
        c.next()
        start = c.pos
        while not c.at_end():
            c.next()
        return TransactionStatement(kind, c.text_from(start))

    def grant(self) -> Statement:
        c = self.c
        privileges: list[str] = []
        words: list[str] = []
        while not c.at_end() and c.up() != "ON":
            tok = c.next()
            if tok.up == ",":
                privileges.append(" ".join(words))
                words = []
            elif tok.up == "(":  # a column list: SELECT (a, b)
                c.pos -= 1
                c.skip_tolerant()
            elif tok.kind == WORD:
                words.append(tok.up)
            else:
                return OtherStatement(QueryKind.DCL, "GRANT")
        if not c.accept("ON") or not words:
            return OtherStatement(QueryKind.DCL, "GRANT")
        privileges.append(" ".join(words))
        c.accept("TABLE", "FUNCTION", "PROCEDURE", "PACKAGE")
        start = c.pos
        while not c.at_end() and c.up() != "TO":
            c.next()
        if c.up() != "TO" or c.pos == start:
            return OtherStatement(QueryKind.DCL, "GRANT")
        return Grant(tuple(privileges), c.text_from(start))

    def revoke(self) -> Statement:
        return OtherStatement(QueryKind.DCL, "REVOKE")

    def set_(self) -> Statement:
        c = self.c
        if c.accept("STATEMENT"):
            # MariaDB's SET STATEMENT var = value [, ...] FOR statement: the statement, run under those settings
            # (read_settings gives them)
            try:
                settings = read_setting_list(c)
                c.expect("FOR")
            except SqlError as exc:
                if self.strict:
                    raise
                self.stop = True  # what follows is not known to be one statement
                return Unreadable(QueryKind.OTHER, "SET STATEMENT", None, str(exc))
            # the server read the text under its session's sql_mode, which the binlog does not hold (it logs the one
            # SET STATEMENT sets): a text that would read otherwise under another mode cannot be known
            unknown = any(setting.name == "sql_mode" for setting in settings) and c.up() not in _READ_TO_TABLE
            if unknown and not reads_alike(c.sql):
                error = c.error(
                    "text that reads differently under the sql_modes its session may have had (the binlog logs the "
                    "sql_mode SET STATEMENT sets, not the session's the server read the text under)"
                )
                if self.strict:
                    raise error
                try:
                    stmt = self.statement()
                except SqlError:
                    stmt = OtherStatement(QueryKind.OTHER, "SET STATEMENT")
                self.stop = True
                tables = named_tables(stmt)
                return Unreadable(stmt.kind, statement_verb(stmt), tables[0] if tables else None, str(error), tables)
            return self.statement()
        if c.up() in ("PASSWORD", "ROLE") or (c.up() == "DEFAULT" and c.up(1) == "ROLE"):
            return OtherStatement(QueryKind.DCL, "SET")
        return OtherStatement(QueryKind.OTHER, "SET")

    def maintenance(self, verb: str) -> Statement:
        """OPTIMIZE / ANALYZE / CHECK / CHECKSUM / REPAIR [NO_WRITE_TO_BINLOG | LOCAL] TABLE t [, ...] [options]."""
        c = self.c
        c.accept("NO_WRITE_TO_BINLOG", "LOCAL")
        if not c.accept("TABLE", "TABLES"):
            return OtherStatement(QueryKind.OTHER, verb)  # ANALYZE SELECT ..., CHECK VIEW ...: not known
        tables: list[TableName] = []

        def read() -> Statement:
            tables.append(c.table_name())
            while c.accept(","):
                tables.append(c.table_name())
            start = c.pos
            MAINTENANCE_OPTIONS[verb](c)
            options = c.text_from(start)
            if not c.at_end():
                raise c.error(f"unexpected text in {verb} TABLE")
            return TableMaintenance(verb, tuple(tables), (options,) if options else ())

        try:
            return read()
        except SqlError as exc:
            if self.strict:
                raise
            return Unreadable(QueryKind.OTHER, f"{verb} TABLE", tables[0] if tables else None, str(exc), tuple(tables))

    def flush(self) -> Statement:
        return OtherStatement(QueryKind.OTHER, "FLUSH")

    def use(self) -> Statement:
        return OtherStatement(QueryKind.OTHER, "USE", self.c.opt_ident())


_HANDLERS: Final[dict[str, Callable[[_Reader], Statement]]] = {
    "CREATE": _Reader.create,
    "ALTER": _Reader.alter,
    "DROP": _Reader.drop,
    "RENAME": _Reader.rename,
    "TRUNCATE": _Reader.truncate,
    "INSERT": _Reader.insert,
    "REPLACE": functools.partial(_Reader.insert, head="REPLACE"),
    "UPDATE": _Reader.update,
    "DELETE": _Reader.delete,
    "LOAD": _Reader.load,
    "WITH": _Reader.with_,
    "BEGIN": _Reader.begin,
    "START": _Reader.start,
    "COMMIT": _Reader.commit,
    "ROLLBACK": _Reader.rollback,
    "SAVEPOINT": _Reader.savepoint,
    "RELEASE": _Reader.release,
    "XA": _Reader.xa,
    "GRANT": _Reader.grant,
    "REVOKE": _Reader.revoke,
    "SET": _Reader.set_,
    "USE": _Reader.use,
    "FLUSH": _Reader.flush,
    **{
        verb: functools.partial(_Reader.maintenance, verb=verb)
        for verb in ("OPTIMIZE", "ANALYZE", "CHECK", "CHECKSUM", "REPAIR")
    },
}


# MariaDB's sequence table, as SHOW CREATE TABLE shows it for a sequence
_SEQUENCE_TABLE: Final = (
    "CREATE TABLE s (next_not_cached_value BIGINT(21) NOT NULL, minimum_value BIGINT(21) NOT NULL, "
    "maximum_value BIGINT(21) NOT NULL, start_value BIGINT(21) NOT NULL, increment BIGINT(21) NOT NULL, "
    "cache_size BIGINT(21) UNSIGNED NOT NULL, cycle_option TINYINT(1) UNSIGNED NOT NULL, "
    "cycle_count BIGINT(21) NOT NULL)"
)


@functools.cache
def _sequence_table() -> CreateTable:
    (stmt,) = read_statements(_SEQUENCE_TABLE)
    assert isinstance(stmt, CreateTable)
    return stmt
