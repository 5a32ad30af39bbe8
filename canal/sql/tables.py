"""Reading keys, constraints, table options and the body of CREATE TABLE."""

from __future__ import annotations

from typing import Final

import attrs

from canal.sql.columns import read_check, read_column, read_references
from canal.sql.cursor import Cursor
from canal.sql.lexer import WORD
from canal.sql.partitions import read_partitioning
from canal.sql.statements import (
    CheckDef,
    ColumnDef,
    CreateTable,
    ForeignKeyDef,
    IndexColumn,
    IndexDef,
    TableName,
    TableOption,
)

__all__ = [
    "INDEX_WORDS",
    "TableElements",
    "read_create_table",
    "read_element",
    "read_index",
    "read_table_option",
    "read_table_options",
    "starts_table_option",
]

INDEX_WORDS: Final = frozenset({"PRIMARY", "UNIQUE", "INDEX", "KEY", "FULLTEXT", "SPATIAL"})
"""Words that open a key definition (VECTOR does when INDEX or KEY follows)."""

_CHARSET_WORDS: Final = frozenset({"CHARACTER", "CHARSET", "COLLATE"})
# options whose name is two words, and options without a value
_TWO_WORD_OPTIONS: Final = {("DATA", "DIRECTORY"), ("INDEX", "DIRECTORY")}
_AS_SELECT_WORDS: Final = frozenset({"AS", "SELECT", "IGNORE", "REPLACE", "WITH", "TABLE", "VALUES", "("})


@attrs.define(slots=True)
class TableElements:
    """What a CREATE TABLE body (or an ALTER TABLE ADD list) defines, in order of kind."""

    columns: list[ColumnDef] = attrs.field(factory=list)
    indexes: list[IndexDef] = attrs.field(factory=list)
    foreign_keys: list[ForeignKeyDef] = attrs.field(factory=list)
    checks: list[CheckDef] = attrs.field(factory=list)
    periods: list[str] = attrs.field(factory=list)


# -- keys -------------------------------------------------------------------------------------------------------------


def opens_index(c: Cursor) -> bool:
    """Whether a key definition starts here (not a column: key words are reserved, quoted names read as names)."""
    up = c.up()
    return up in INDEX_WORDS or (up == "VECTOR" and c.up(1) in ("INDEX", "KEY"))


def read_index(c: Cursor, constraint: str | None = None) -> tuple[IndexDef, bool]:
    """A key definition from its first word; returns it and whether IF NOT EXISTS was given."""
    word = c.next().up
    if word == "PRIMARY":
        c.expect("KEY")
        kind = "PRIMARY"
    elif word in ("INDEX", "KEY"):
        kind = "INDEX"
    else:
        kind = word  # UNIQUE, FULLTEXT, SPATIAL, VECTOR
        c.accept("INDEX", "KEY")
    if_not_exists = c.accept_seq("IF", "NOT", "EXISTS")
    name = None
    if c.up() not in ("(", "USING", "TYPE"):
        name = c.ident("an index name")
    using = _index_type(c)
    columns = read_key_parts(c)
    more_using, options = _index_options(c)
    return IndexDef(kind, name, columns, constraint, more_using or using, options), if_not_exists


def _index_type(c: Cursor) -> str | None:
    if c.accept("USING", "TYPE"):
        return c.ident("an index type").upper()
    return None


def read_key_parts(c: Cursor) -> tuple[IndexColumn, ...]:
    """``(part, ...)``: columns with an optional prefix length and ASC/DESC, or ``(expression)`` parts."""
    c.expect("(")
    parts: list[IndexColumn] = []
    while True:
        if c.up() == "(":
            part = IndexColumn(None, expression=c.group_text())
        else:
            name = c.ident("a key column")
            length = None
            if c.accept("("):
                length = c.integer("a key prefix length")
                c.expect(")")
            part = IndexColumn(name, length)
        if c.accept("DESC"):
            part = attrs.evolve(part, descending=True)
        else:
            c.accept("ASC")
        parts.append(part)
        if not c.accept(","):
            break
    c.expect(")")
    return tuple(parts)


def _index_options(c: Cursor) -> tuple[str | None, tuple[str, ...]]:
    using = None
    options: list[str] = []
    while True:
        start = c.pos
        up = c.up()
        if up in ("USING", "TYPE"):
            using = _index_type(c)
            continue
        if up in ("KEY_BLOCK_SIZE", "CLUSTERING", "M", "DISTANCE") or up.endswith("ENGINE_ATTRIBUTE"):
            c.next()
            c.accept_equals()
            c.word_or_string()
        elif up == "COMMENT":
            c.next()
            c.string("a comment")
        elif up == "WITH" and c.up(1) == "PARSER":
            c.next()
            c.next()
            c.ident("a parser name")
        elif up in ("VISIBLE", "INVISIBLE", "IGNORED"):
            c.next()
        elif up == "NOT" and c.up(1) == "IGNORED":
            c.next()
            c.next()
        else:
            return using, tuple(options)
        options.append(c.text_from(start))


def read_foreign_key(c: Cursor, constraint: str | None) -> tuple[ForeignKeyDef, bool]:
    """After FOREIGN KEY: ``[IF NOT EXISTS] [index_name] (columns) REFERENCES ...``."""
    if_not_exists = c.accept_seq("IF", "NOT", "EXISTS")
    index = None if c.up() == "(" else c.ident("an index name")
    columns = c.name_list()
    c.expect("REFERENCES")
    return read_references(c, constraint, columns, index), if_not_exists


# -- table elements ---------------------------------------------------------------------------------------------------


def read_element(c: Cursor, into: TableElements, stop: frozenset[str] = frozenset()) -> bool:
    """One element of a table body into ``into``; returns the IF NOT EXISTS flag of a key (False otherwise)."""
    up = c.up()
    constraint = None
    constraint_if_not_exists = False
    if up == "CONSTRAINT":
        c.next()
        constraint_if_not_exists = c.accept_seq("IF", "NOT", "EXISTS")
        if c.up() not in ("PRIMARY", "UNIQUE", "FOREIGN", "CHECK"):
            constraint = c.ident("a constraint name")
        up = c.up()
        if up not in ("PRIMARY", "UNIQUE", "FOREIGN", "CHECK"):
            raise c.error("expected PRIMARY KEY, UNIQUE, FOREIGN KEY or CHECK")
    if opens_index(c):
        index, if_not_exists = read_index(c, constraint)
        into.indexes.append(index)
        return if_not_exists or constraint_if_not_exists
    if up == "FOREIGN":
        c.next()
        c.expect("KEY")
        fk, if_not_exists = read_foreign_key(c, constraint)
        into.foreign_keys.append(fk)
        return if_not_exists or constraint_if_not_exists
    if up == "CHECK":
        c.next()
        into.checks.append(read_check(c, constraint))
        return False
    if up == "PERIOD" and c.up(1) == "FOR":
        start = c.pos
        c.next()
        c.next()
        c.ident("a period name")
        c.skip_group()
        into.periods.append(c.text_from(start))
        return False
    into.columns.append(read_column(c, stop))
    return False


# -- table options ----------------------------------------------------------------------------------------------------


def starts_table_option(c: Cursor) -> bool:
    """Whether a table option (ENGINE=..., DEFAULT CHARSET=..., COMMENT ...) starts here."""
    tok = c.peek()
    if tok.kind != WORD:
        return False
    up = tok.up
    if up == "DEFAULT":
        return c.up(1) in _CHARSET_WORDS
    if up in _CHARSET_WORDS:
        return True
    if (up, c.up(1)) in _TWO_WORD_OPTIONS:
        return True
    if up == "WITH":
        return c.up(1) == "SYSTEM"
    if up in ("ALGORITHM", "LOCK"):
        return False  # how an ALTER runs (canal.sql.alter), never a table option
    # NAME = value, or one of the options MySQL allows without '='
    return c.up(1) == "=" or up in ("ENGINE", "TYPE", "COMMENT", "AUTO_INCREMENT", "ROW_FORMAT", "TABLESPACE",
                                    "UNION", "CONNECTION", "PASSWORD", "CHECKSUM", "KEY_BLOCK_SIZE",
                                    "MAX_ROWS", "MIN_ROWS", "AVG_ROW_LENGTH", "PACK_KEYS", "DELAY_KEY_WRITE",
                                    "INSERT_METHOD", "STATS_PERSISTENT", "STATS_AUTO_RECALC", "STATS_SAMPLE_PAGES",
                                    "COMPRESSION", "ENCRYPTION", "ENGINE_ATTRIBUTE", "SECONDARY_ENGINE",
                                    "SECONDARY_ENGINE_ATTRIBUTE", "AUTOEXTEND_SIZE", "PAGE_CHECKSUM",
                                    "PAGE_COMPRESSED", "PAGE_COMPRESSION_LEVEL", "TRANSACTIONAL", "SEQUENCE",
                                    "ENCRYPTED", "ENCRYPTION_KEY_ID", "TABLE_CHECKSUM", "IETF_QUOTES")  # fmt: skip


def read_table_option(c: Cursor) -> TableOption:
    """One table (or database) option; the character set and collation under the names CHARSET and COLLATE."""
    c.accept("DEFAULT")
    up = c.next().up
    if up in ("CHARACTER", "CHARSET"):
        if up == "CHARACTER":
            c.expect("SET")
        c.accept_equals()
        return TableOption("CHARSET", c.word_or_string("a character set"))
    if up == "COLLATE":
        c.accept_equals()
        return TableOption("COLLATE", c.word_or_string("a collation"))
    if up == "WITH":
        c.expect_seq("SYSTEM", "VERSIONING")
        return TableOption("WITH SYSTEM VERSIONING", "")
    name = up
    if up in ("DATA", "INDEX"):
        c.expect("DIRECTORY")
        name = f"{up} DIRECTORY"
    if not name:
        raise c.error("expected a table option")
    c.accept_equals()
    if up == "UNION":
        return TableOption(name, c.group_text())
    value = c.word_or_string(f"a value for {name}")
    if up == "TABLESPACE" and c.accept("STORAGE"):
        c.expect("DISK", "MEMORY")
    return TableOption(name, value)


def read_table_options(c: Cursor) -> tuple[TableOption, ...]:
    """Table options separated by blanks or commas, as long as they come."""
    options: list[TableOption] = []
    while True:
        if c.up() == "," and _option_after_comma(c):
            c.next()
        if not starts_table_option(c):
            return tuple(options)
        options.append(read_table_option(c))


def _option_after_comma(c: Cursor) -> bool:
    start = c.pos
    c.next()
    found = starts_table_option(c)
    c.pos = start
    return found


# -- CREATE TABLE -----------------------------------------------------------------------------------------------------


def read_create_table(
    c: Cursor, table: TableName, *, if_not_exists: bool, temporary: bool, or_replace: bool
) -> CreateTable:
    """The rest of CREATE TABLE after its name: LIKE, or a body, options, partitioning and an optional query."""
    if c.up() == "LIKE" or (c.up() == "(" and c.up(1) == "LIKE"):
        paren = c.accept("(")
        c.expect("LIKE")
        like = c.table_name("the table to copy")
        if paren:
            c.expect(")")
        return CreateTable(table, like=like, if_not_exists=if_not_exists, temporary=temporary, or_replace=or_replace)
    elements = TableElements()
    if c.up() == "(" and c.up(1) not in ("SELECT", "WITH", "VALUES", "TABLE", "("):
        c.next()
        while True:
            read_element(c, elements)
            if not c.accept(","):
                break
        c.expect(")")
    options = read_table_options(c)
    partitioning = None
    if c.up() == "PARTITION" and c.up(1) == "BY":
        partitioning = _read_partitioning(c)
    # MySQL 8.0.21+ logs the CREATE of an atomic CREATE TABLE ... SELECT so (its rows follow as row events)
    c.accept_seq("START", "TRANSACTION")
    as_select = None
    if not c.at_end() and c.up() in _AS_SELECT_WORDS:
        c.accept("IGNORE", "REPLACE")
        c.accept("AS")
        start = c.pos
        while not c.at_end():
            if c.up() == "(":
                c.skip_group()
            else:
                c.next()
        as_select = c.text_from(start)
        if not as_select:
            raise c.error("expected a query")
    if not elements.columns and as_select is None:
        raise c.error("expected column definitions")
    return CreateTable(
        table,
        columns=tuple(elements.columns),
        indexes=tuple(elements.indexes),
        foreign_keys=tuple(elements.foreign_keys),
        checks=tuple(elements.checks),
        options=options,
        partitioning=partitioning,
        as_select=as_select,
        periods=tuple(elements.periods),
        if_not_exists=if_not_exists,
        temporary=temporary,
        or_replace=or_replace,
    )


def _read_partitioning(c: Cursor) -> str:
    """``PARTITION BY ...`` with its partition definitions (read whole: :mod:`canal.sql.partitions`), as written."""
    start = c.pos
    read_partitioning(c)
    return c.text_from(start)
