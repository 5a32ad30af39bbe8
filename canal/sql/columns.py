"""Reading data types and column definitions (the part of CREATE TABLE and ALTER TABLE the schema depends on)."""

from __future__ import annotations

from typing import Any, Final

import attrs

from canal.sql.cursor import Cursor
from canal.sql.lexer import WORD
from canal.sql.statements import CheckDef, ColumnDef, Expression, ForeignKeyDef
from canal.sql.types import ColumnType

__all__ = ["read_check", "read_column", "read_references", "read_type"]

_ALIASES: Final = {
    "INTEGER": "int",
    "INT1": "tinyint",
    "INT2": "smallint",
    "INT3": "mediumint",
    "MIDDLEINT": "mediumint",
    "INT4": "int",
    "INT8": "bigint",
    "BOOL": "tinyint",
    "BOOLEAN": "tinyint",
    "SERIAL": "bigint",
    "DEC": "decimal",
    "NUMERIC": "decimal",
    "FIXED": "decimal",
    "REAL": "double",
    "FLOAT4": "float",
    "FLOAT8": "double",
    "CHARACTER": "char",
}
_NATIONAL_CHARSET: Final = "utf8mb3"  # NCHAR / NATIONAL CHAR: MySQL's and MariaDB's national charset
_LABELLED: Final = frozenset({"enum", "set"})
_REFERENCE_ACTIONS: Final = ("RESTRICT", "CASCADE", "SET NULL", "NO ACTION", "SET DEFAULT")


def read_type(c: Cursor) -> ColumnType:
    """A data type: name (one or more words), parameters or ENUM/SET labels, and the type's own attributes
    (UNSIGNED, ZEROFILL, CHARACTER SET, COLLATE, BINARY, ASCII, UNICODE)."""
    first = c.pos
    tok = c.peek()
    if tok.kind != WORD:
        raise c.error("expected a data type")
    c.next()
    word = tok.up
    charset: str | None = None
    base: str
    if word == "NATIONAL":
        word = c.expect("CHAR", "CHARACTER", "VARCHAR")
        charset = _NATIONAL_CHARSET
    elif word in ("NCHAR", "NVARCHAR"):
        charset = _NATIONAL_CHARSET
        word = "VARCHAR" if word == "NVARCHAR" or c.accept("VARCHAR", "VARYING") else "CHAR"
    if word in ("CHAR", "CHARACTER") and c.accept("VARYING"):
        word = "VARCHAR"
    if word == "DOUBLE":
        c.accept("PRECISION")
    if word == "LONG":
        if c.accept("VARBINARY"):
            base = "mediumblob"
        else:
            c.accept("VARCHAR", "VARCHARACTER")
            base = "mediumtext"
    else:
        base = _ALIASES.get(word, word.lower())
    params: tuple[int, ...] = ()
    labels: tuple[str, ...] = ()
    if c.up() == "(":
        if base in _LABELLED:
            labels = c.paren_list(lambda: c.string("an ENUM/SET label"))
        else:
            params = c.paren_list(lambda: c.integer("a type parameter"))
    if word in ("BOOL", "BOOLEAN") and not params:
        params = (1,)
    if base == "float" and len(params) == 1:  # FLOAT(p): a FLOAT up to 24 bits of precision, else a DOUBLE
        base = "double" if params[0] > 24 else "float"
        params = ()
    unsigned = word == "SERIAL"
    zerofill = binary = False
    collation: str | None = None
    while True:
        up = c.up()
        if up == "UNSIGNED":
            unsigned = True
        elif up == "SIGNED":
            unsigned = False
        elif up == "ZEROFILL":
            zerofill = unsigned = True
        elif up == "CHARSET" or (up in ("CHARACTER", "CHAR") and c.up(1) == "SET"):
            c.next()
            if up != "CHARSET":
                c.next()  # SET
            charset = _charset_name(c)
            continue
        elif up == "COLLATE":
            c.next()
            collation = c.word_or_string("a collation").lower()
            continue
        elif up == "BINARY":
            binary = True
        elif up == "ASCII":
            charset = "latin1"
        elif up == "UNICODE":
            charset = "ucs2"
        elif up == "BYTE":
            charset = "binary"
        else:
            break
        c.next()
    return ColumnType(
        text=c.text_from(first),
        base=base,
        params=params,
        labels=labels,
        unsigned=unsigned,
        zerofill=zerofill,
        charset=charset,
        collation=collation,
        binary=binary,
        serial=word == "SERIAL",
    )


def _charset_name(c: Cursor) -> str:
    c.accept_equals()
    return c.word_or_string("a character set").lower()


def read_column(c: Cursor, stop: frozenset[str] = frozenset()) -> ColumnDef:
    """``name type [attributes ...]``, up to a ``,``, ``)``, the end, or a word in ``stop`` (ALTER's FIRST/AFTER)."""
    name = c.ident("a column name")
    col_type = read_type(c)
    # attributes as keyword arguments of the ColumnDef (built once: columns come by the hundred in a dump)
    found: dict[str, Any] = {}
    extra: list[str] = []
    while not c.at_end():
        tok = c.peek()
        up = tok.up
        if up in (",", ")") or up in stop:
            break
        start = c.pos
        c.next()
        if up == "NOT" and c.accept("NULL"):
            found["nullable"] = False
        elif up == "NULL":
            found["nullable"] = True
        elif up == "DEFAULT":
            found["default"] = c.expression()
        elif up == "ON" and c.accept("UPDATE"):
            found["on_update"] = c.expression()
        elif up == "AUTO_INCREMENT":
            found["auto_increment"] = True
        elif up == "SERIAL":  # SERIAL DEFAULT VALUE: NOT NULL AUTO_INCREMENT UNIQUE
            c.expect_seq("DEFAULT", "VALUE")
            found.update(nullable=False, auto_increment=True, unique=True)
        elif up == "PRIMARY" or up == "KEY":
            if up == "PRIMARY":
                c.expect("KEY")
            found["primary_key"] = True
        elif up == "UNIQUE":
            c.accept("KEY")
            found["unique"] = True
        elif up == "COMMENT":
            found["comment"] = c.string("a comment")
        elif up == "COLLATE":
            col_type = attrs.evolve(col_type, collation=c.word_or_string("a collation").lower())
        elif up in ("CHARACTER", "CHARSET"):
            if up == "CHARACTER":
                c.expect("SET")
            col_type = attrs.evolve(col_type, charset=_charset_name(c))
        elif up == "GENERATED" or up == "AS":
            if up == "GENERATED":
                c.expect_seq("ALWAYS", "AS")
            if c.accept("ROW"):
                found["row_period"] = c.expect("START", "END")
            else:
                found["generated"] = Expression(c.group_text())
        elif up in ("VIRTUAL", "STORED", "PERSISTENT"):
            found["stored"] = up != "VIRTUAL"
        elif up in ("INVISIBLE", "VISIBLE"):
            found["invisible"] = up == "INVISIBLE"
        elif up == "SRID":
            found["srid"] = c.integer("an SRID")
        elif up == "CHECK" or up == "CONSTRAINT":
            symbol = None
            if up == "CONSTRAINT":
                symbol = None if c.up() == "CHECK" else c.ident("a constraint name")
                c.expect("CHECK")
            found["check"] = read_check(c, symbol)
        elif up == "REFERENCES":
            found["references"] = read_references(c, None, (name,))
        elif tok.kind == WORD:
            _skip_attribute(c, up)
            extra.append(c.text_from(start))
        else:
            c.pos = start
            raise c.error(f"unexpected text in the definition of column {name!r}")
    return ColumnDef(name, col_type, attributes=tuple(extra), **found)


def _skip_attribute(c: Cursor, word: str) -> None:
    """An attribute that changes neither type nor layout: COLUMN_FORMAT x, STORAGE x, WITH[OUT] SYSTEM VERSIONING,
    COMPRESSED[=method], [SECONDARY_]ENGINE_ATTRIBUTE [=] 'x', NOT SECONDARY, or an engine-defined ``NAME = value``.
    Any other word is an error: it may mean something this reader does not know."""
    if word in ("WITH", "WITHOUT"):
        c.expect_seq("SYSTEM", "VERSIONING")
    elif word in ("COLUMN_FORMAT", "STORAGE"):
        c.word_or_string()
    elif word == "NOT":
        c.expect("SECONDARY")
    elif word == "COMPRESSED" and c.up() != "=":
        return
    elif word.endswith("ENGINE_ATTRIBUTE") or c.up() == "=":
        c.accept_equals()
        c.word_or_string()
    else:
        c.pos -= 1
        raise c.error("unknown column attribute")


def read_check(c: Cursor, name: str | None) -> CheckDef:
    """After CHECK: ``(expr) [[NOT] ENFORCED]``."""
    expression = c.group_text()
    enforced = True
    if c.accept_seq("NOT", "ENFORCED"):
        enforced = False
    else:
        c.accept("ENFORCED")
    return CheckDef(name, expression, enforced)


def read_references(c: Cursor, name: str | None, columns: tuple[str, ...], index: str | None = None) -> ForeignKeyDef:
    """After REFERENCES: ``table (columns) [MATCH ...] [ON DELETE action] [ON UPDATE action]``."""
    table = c.table_name("the referenced table")
    ref_columns = c.name_list() if c.up() == "(" else ()
    on_delete = on_update = None
    while True:
        if c.accept("MATCH"):
            c.expect("FULL", "PARTIAL", "SIMPLE")
        elif c.up() == "ON" and c.up(1) in ("DELETE", "UPDATE"):
            c.next()
            which = c.next().up
            action = _reference_action(c)
            if which == "DELETE":
                on_delete = action
            else:
                on_update = action
        else:
            break
    return ForeignKeyDef(name, columns, table, ref_columns, on_delete, on_update, index)


def _reference_action(c: Cursor) -> str:
    for action in _REFERENCE_ACTIONS:
        if c.accept_seq(*action.split()):
            return action
    raise c.error("expected RESTRICT, CASCADE, SET NULL, NO ACTION or SET DEFAULT")
