"""Column data types as the reader returns them: :class:`ColumnType`, and the families of MySQL/MariaDB type names.

The reader resolves the synonyms MySQL resolves when it stores a definition, so ``base`` is the name
``information_schema.COLUMNS.DATA_TYPE`` shows: INTEGER -> int, BOOL -> tinyint(1), DEC/NUMERIC/FIXED -> decimal,
REAL -> double, DOUBLE PRECISION -> double, FLOAT(p) -> float (p <= 24) or double, CHARACTER [VARYING] -> char /
varchar, NCHAR/NATIONAL ... -> char/varchar in utf8mb3, LONG [VARCHAR] -> mediumtext, LONG VARBINARY -> mediumblob,
SERIAL -> bigint unsigned (NOT NULL AUTO_INCREMENT UNIQUE). One exception: JSON stays ``json`` (MariaDB stores it
as longtext with a JSON_VALID check; MySQL as json).
"""

from __future__ import annotations

from typing import Final

import attrs

from canal.protocol import SqlType

__all__ = [
    "BLOB_TYPES",
    "GEOMETRY_TYPE_NAMES",
    "INTEGER_TYPES",
    "KNOWN_TYPES",
    "TEMPORAL_TYPES",
    "TEXT_TYPES",
    "ColumnType",
    "canal_sql_type",
]

# Indexed by the geometry type code a table map's optional metadata carries (0 = plain GEOMETRY).
GEOMETRY_TYPE_NAMES: Final = (
    "geometry",
    "point",
    "linestring",
    "polygon",
    "multipoint",
    "multilinestring",
    "multipolygon",
    "geometrycollection",
)

INTEGER_TYPES: Final = {"tinyint": 1, "smallint": 2, "mediumint": 3, "int": 4, "bigint": 8}
"""The integer types and their size in bytes."""
TEXT_TYPES: Final = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext"})
BLOB_TYPES: Final = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
TEMPORAL_TYPES: Final = frozenset({"time", "datetime", "timestamp"})
"""The types with fractional seconds."""
KNOWN_TYPES: Final = frozenset(
    {
        *INTEGER_TYPES,
        "decimal",
        "float",
        "double",
        "bit",
        *TEXT_TYPES,
        *BLOB_TYPES,
        "enum",
        "set",
        "date",
        *TEMPORAL_TYPES,
        "year",
        "json",
        *GEOMETRY_TYPE_NAMES,
        "uuid",
        "inet4",
        "inet6",
        "vector",
    }
)


@attrs.frozen(slots=True)
class ColumnType:
    """A column's data type as declared.

    ``text`` is the type as written (``DECIMAL(12, 2) UNSIGNED``), ``base`` the lower-case type name after
    synonyms (see the module), ``params`` the numbers in its parentheses (length, display width, precision and
    scale, or fractional digits, by type), ``labels`` the ENUM/SET values. ``charset`` / ``collation`` are the
    ones declared on the column (lower case; None: the table's), ``binary`` the BINARY attribute of a character
    type (its charset's binary collation). ``serial`` is set for the SERIAL shorthand.
    """

    text: str
    base: str
    params: tuple[int, ...] = ()
    labels: tuple[str, ...] = ()
    unsigned: bool = False
    zerofill: bool = False
    charset: str | None = None
    collation: str | None = None
    binary: bool = False
    serial: bool = False

    @property
    def known(self) -> bool:
        """Whether ``base`` is a MySQL/MariaDB built-in type name."""
        return self.base in KNOWN_TYPES

    @property
    def length(self) -> int | None:
        """The declared length (CHAR/VARCHAR characters, BINARY/VARBINARY bytes, BIT bits, TEXT/BLOB(n)) or
        display width (integers, YEAR); None when not declared or not a length."""
        if self.params and self.base not in ("decimal", "float", "double") and self.base not in TEMPORAL_TYPES:
            return self.params[0]
        return None

    @property
    def precision(self) -> int | None:
        """DECIMAL/FLOAT/DOUBLE precision as declared (None: not declared)."""
        if self.params and self.base in ("decimal", "float", "double"):
            return self.params[0]
        return None

    @property
    def scale(self) -> int | None:
        """DECIMAL/FLOAT/DOUBLE scale as declared (None: not declared)."""
        if len(self.params) > 1 and self.base in ("decimal", "float", "double"):
            return self.params[1]
        return None

    @property
    def fsp(self) -> int | None:
        """Fractional seconds digits of TIME/DATETIME/TIMESTAMP (0 when not declared); None for other types."""
        if self.base in TEMPORAL_TYPES:
            return self.params[0] if self.params else 0
        return None

    @property
    def is_integer(self) -> bool:
        return self.base in INTEGER_TYPES

    @property
    def holds_text(self) -> bool:
        """Whether values are character strings in a charset (CHAR, VARCHAR, TEXT types, ENUM, SET)."""
        return self.base in TEXT_TYPES or self.base in ("enum", "set")


# The JDBC type number (java.sql.Types) canal reports for a column: the type canal's row decoder (RowsLogBuffer)
# gives the value, as its converter (LogEventConvert) adjusts it -- unsigned integers one size wider, every binary
# string, BLOB and geometry BLOB, every TEXT CLOB. The decoder and the fake both name types through this table.
_SQL_TYPES: Final = {
    "decimal": SqlType.DECIMAL,
    "float": SqlType.REAL,
    "double": SqlType.DOUBLE,
    "bit": SqlType.BIT,
    "date": SqlType.DATE,
    "time": SqlType.TIME,
    "datetime": SqlType.TIMESTAMP,
    "timestamp": SqlType.TIMESTAMP,
    "year": SqlType.VARCHAR,  # canal passes YEAR as text
    "enum": SqlType.INTEGER,  # the index
    "set": SqlType.BIT,  # the bitmap
    "json": SqlType.VARCHAR,
    "char": SqlType.CHAR,
    "varchar": SqlType.VARCHAR,
    "vector": SqlType.OTHER,
    "null": SqlType.NULL,
}
_INT_SQL_TYPES: Final = {
    "tinyint": SqlType.TINYINT,
    "smallint": SqlType.SMALLINT,
    "mediumint": SqlType.INTEGER,
    "int": SqlType.INTEGER,
    "bigint": SqlType.BIGINT,
}
_UNSIGNED_INT_SQL_TYPES: Final = {
    "tinyint": SqlType.SMALLINT,
    "smallint": SqlType.INTEGER,
    "mediumint": SqlType.INTEGER,
    "int": SqlType.BIGINT,
    "bigint": SqlType.DECIMAL,
}


def canal_sql_type(base: str, *, unsigned: bool = False, binary: bool = False) -> int:
    """The JDBC type number canal reports for a column of type ``base`` (``ColumnType.base``); ``binary`` for a
    CHAR/VARCHAR/TEXT column in the binary character set (a BINARY, VARBINARY or BLOB in all but name)."""
    if base in INTEGER_TYPES:
        return (_UNSIGNED_INT_SQL_TYPES if unsigned else _INT_SQL_TYPES)[base]
    if base in ("char", "varchar") and binary:
        return SqlType.BLOB
    if base in _SQL_TYPES:
        return _SQL_TYPES[base]
    if base in ("binary", "varbinary") or base in BLOB_TYPES or base in GEOMETRY_TYPE_NAMES:
        return SqlType.BLOB
    if base in TEXT_TYPES:
        return SqlType.BLOB if binary else SqlType.CLOB
    return SqlType.OTHER
