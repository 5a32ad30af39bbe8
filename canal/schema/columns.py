"""A table's columns as a schema catalog keeps them, and what each reports: the type text ``SHOW CREATE TABLE``
prints (MariaDB's or MySQL 8's spelling), the JDBC type (canal's rule, :func:`canal.sql.types.canal_sql_type`), the
:class:`~canal.protocol.ColumnMeta` a decoder gives, and the column's definition as ``SHOW CREATE TABLE`` writes it.

Definitions are read by the one SQL reader (:mod:`canal.sql`); :func:`resolve_column` resolves one.
"""

from __future__ import annotations

import attrs

from canal.errors import SchemaError
from canal.protocol import ColumnMeta
from canal.sql import ColumnDef, quote_name
from canal.sql.charsets import charset_named
from canal.sql.lexer import END, QUOTED, WORD, TokenStream
from canal.sql.types import INTEGER_TYPES, KNOWN_TYPES, TEMPORAL_TYPES, TEXT_TYPES, canal_sql_type

__all__ = [
    "TableColumn",
    "column_meta",
    "column_sql",
    "effective_charset",
    "mysql_type_text",
    "resolve_column",
    "sql_type_of",
    "type_with_charset",
]

_INT_WIDTH = {"tinyint": (4, 3), "smallint": (6, 5), "mediumint": (9, 8), "int": (11, 10), "bigint": (20, 20)}


def charset_codec(charset: str) -> str | None:
    """The Python codec for a MySQL charset name (None for ``binary``), as the binlog decoder uses it."""
    return charset_named(charset).codec


@attrs.frozen(slots=True)
class TableColumn:
    """One column as a catalog keeps it: the type resolved, nullability decided."""

    name: str
    base: str  # normalized lowercase base type: "int", "varchar", "decimal", ...
    params: tuple[int, ...] = ()
    labels: tuple[str, ...] = ()
    unsigned: bool = False
    zerofill: bool = False
    nullable: bool = True
    charset: str | None = None  # the MySQL charset declared on the column (None: the table's)
    primary: bool = False  # inline PRIMARY KEY
    period: str | None = None  # "START" / "END": a system-versioned table's row_start / row_end (AS ROW START / END)
    hidden: bool = False  # added by the server itself (WITH SYSTEM VERSIONING's row_start, row_end): kept last
    # values the server computes (canal.schema.computed): AUTO_INCREMENT numbering; a generated column's expression
    # (VIRTUAL or STORED / PERSISTENT alike), as written or as information_schema shows it
    auto_increment: bool = False
    generated: str | None = None
    # a VIRTUAL generated column: the names its expression reads (lower case; a superset of the columns it is computed
    # from). Partial row images never carry its value (canal.parse.rereads); None: a stored column
    virtual_of: tuple[str, ...] | None = None

    def renamed(self, name: str) -> TableColumn:
        return attrs.evolve(self, name=name)


_BINARY_OF = {
    "char": "binary",
    "varchar": "varbinary",
    "tinytext": "tinyblob",
    "text": "blob",
    "mediumtext": "mediumblob",
    "longtext": "longblob",
}
"""The byte-string type a character type in the binary charset is (the server makes it so)."""


def resolve_column(col: ColumnDef) -> TableColumn:
    """A column definition read by the SQL reader, resolved; SchemaError for a type that is not MySQL's or MariaDB's
    or an ENUM/SET without labels."""
    t = col.type
    if t.base not in KNOWN_TYPES:
        raise SchemaError(f"unknown column type {t.text!r} for column {col.name!r}")
    if t.base in ("enum", "set") and not t.labels:
        raise SchemaError(f"{t.base.upper()} column {col.name!r} needs its labels")
    charset = t.charset
    if charset is None and t.collation is not None:
        charset = "binary" if t.collation == "binary" else t.collation.split("_", 1)[0]
    base = t.base
    if charset == "binary" and base in _BINARY_OF:
        base, charset = _BINARY_OF[base], None  # CHAR(3) CHARACTER SET binary is a BINARY(3) (SHOW CREATE TABLE's)
    return TableColumn(
        col.name,
        base,
        t.params,
        t.labels,
        t.unsigned,
        t.zerofill,
        col.is_nullable and col.row_period is None,
        charset,
        col.primary_key,
        col.row_period,
        auto_increment=col.auto_increment,
        generated=None if col.generated is None else col.generated.text,
        virtual_of=None if col.generated is None or col.stored else expression_names(col.generated.text),
    )


def expression_names(text: str) -> tuple[str, ...]:
    """The names an expression reads (lower case), in order, once each: every identifier but a function's name (a
    superset of the columns it reads -- keywords are among them, and no column's name is a string)."""
    stream = TokenStream(text)
    names: dict[str, None] = {}
    token = stream.next()
    while token is not END:
        following = stream.peek()
        if token.kind == QUOTED or (token.kind == WORD and not token.text[0].isdigit() and following.up != "("):
            names[token.text.lower()] = None
        token = stream.next()
    return tuple(names)


def effective_charset(col: TableColumn, table_charset: str) -> str | None:
    """The column's MySQL charset when it holds text (None for numbers, temporals and binary types)."""
    if col.base in TEXT_TYPES or col.base in ("enum", "set"):
        return col.charset or table_charset
    if col.base == "json":
        return col.charset or "utf8mb4"  # MariaDB's JSON is a LONGTEXT: CONVERT TO CHARACTER SET moves it
    return None


def _quote_label(label: str) -> str:
    return "'" + label.replace("'", "''") + "'"


def mysql_type_text(col: TableColumn, mariadb: bool) -> str:
    """The type as ``SHOW CREATE TABLE`` prints it (MariaDB keeps integer display widths, MySQL 8 drops them)."""
    b, p = col.base, col.params
    if b in INTEGER_TYPES:
        if mariadb:
            text = f"{b}({p[0] if p else _INT_WIDTH[b][1 if col.unsigned else 0]})"
        else:
            text = "tinyint(1)" if b == "tinyint" and p == (1,) else b
    elif b == "decimal":
        prec = p[0] if p else 10
        scale = p[1] if len(p) > 1 else 0
        text = f"decimal({prec},{scale})"
    elif b in ("float", "double"):
        text = f"{b}({p[0]},{p[1]})" if len(p) > 1 else b
    elif b in ("bit", "char", "binary"):
        text = f"{b}({p[0] if p else 1})"
    elif b in ("varchar", "varbinary"):
        if not p:
            raise SchemaError(f"column {col.name!r}: {b.upper()} needs a length")
        text = f"{b}({p[0]})"
    elif b in ("enum", "set"):
        text = f"{b}({','.join(_quote_label(x) for x in col.labels)})"
    elif b in TEMPORAL_TYPES:
        text = f"{b}({p[0]})" if p and p[0] else b
    elif b == "year":
        text = "year(4)" if mariadb else "year"
    elif b == "json" and mariadb:
        text = "longtext"
    else:
        text = b
    if col.unsigned and (b in INTEGER_TYPES or b in ("decimal", "float", "double")):
        text += " unsigned"
    if col.zerofill:
        text += " zerofill"
    return text


def type_with_charset(col: TableColumn, table_charset: str, mariadb: bool) -> str:
    """:func:`mysql_type_text` with the column's charset where it holds text (``varchar(10) character set latin1``):
    what a conversion of its values depends on (text becomes the charset's bytes, characters the charset lacks
    become ``?``)."""
    charset = effective_charset(col, table_charset)
    text = mysql_type_text(col, mariadb)
    return text if charset is None else f"{text} character set {charset}"


def sql_type_of(col: TableColumn, charset: str | None, *, mariadb: bool = False) -> int:
    """The JDBC type number canal reports for a column (:func:`canal.sql.types.canal_sql_type`, the decoder's rule).
    MariaDB's JSON is a LONGTEXT column: its binlog type, and so its JDBC type, is LONGTEXT's (CLOB)."""
    base = "longtext" if mariadb and col.base == "json" else col.base
    return canal_sql_type(base, unsigned=col.unsigned, binary=charset == "binary")


def column_meta(col: TableColumn, *, is_key: bool, table_charset: str, mariadb: bool) -> ColumnMeta:
    cs = effective_charset(col, table_charset)
    fsp = col.params[0] if col.base in TEMPORAL_TYPES and col.params else 0
    return ColumnMeta(
        name=col.name,
        sql_type=int(sql_type_of(col, cs, mariadb=mariadb)),
        mysql_type=mysql_type_text(col, mariadb),
        is_key=is_key,
        unsigned=col.unsigned,
        nullable=col.nullable and not is_key,
        charset=None if cs is None else charset_codec(cs),
        fsp=fsp,
        labels=col.labels,
    )


def column_sql(col: TableColumn, table_charset: str, mariadb: bool) -> str:
    """A column definition as SHOW CREATE TABLE would print it."""
    text = f"{quote_name(col.name)} {mysql_type_text(col, mariadb)}"
    if col.charset and col.charset != table_charset and effective_charset(col, table_charset) is not None:
        text += f" CHARACTER SET {col.charset}"
    if col.period is not None:
        return text + f" GENERATED ALWAYS AS ROW {col.period} INVISIBLE"
    if col.generated is not None:
        return text + f" GENERATED ALWAYS AS ({col.generated}) VIRTUAL"
    text += "" if col.nullable and not col.primary else " NOT NULL"
    return text + (" AUTO_INCREMENT" if col.auto_increment else "")
