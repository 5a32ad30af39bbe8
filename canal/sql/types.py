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
from canal.sql.values import float_value

__all__ = [
    "BLOB_TYPES",
    "GEOMETRY_TYPE_NAMES",
    "INTEGER_TYPES",
    "KNOWN_TYPES",
    "TEMPORAL_TYPES",
    "TEXT_TYPES",
    "ColumnType",
    "StoredType",
    "canal_sql_type",
    "float_value",
    "python_type",
    "stored_type",
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
    # MariaDB's UUID / INET types: their values are the text the server prints (canal.sql.values)
    "uuid": SqlType.VARCHAR,
    "inet4": SqlType.VARCHAR,
    "inet6": SqlType.VARCHAR,
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


# -- values: the Python type a decoder returns, and the exact type a mirror stores ------------------------------------

_DECIMAL_MAX_EXACT: Final = 38  # the widest decimal Arrow's decimal128 (and Spark's DECIMAL) holds


@attrs.frozen(slots=True)
class StoredType:
    """The type that holds every value of a MySQL column type exactly in a columnar store (Arrow, Spark, Delta).

    ``kind`` is one of ``int64``, ``decimal`` (with ``precision`` and ``scale``), ``float64``, ``date``,
    ``timestamp`` (microseconds, no time zone; TIMESTAMP values in UTC), ``binary`` or ``string``. Integers are int64,
    but BIGINT UNSIGNED and BIT(64) decimal(20,0); DECIMAL(p,s) decimal up to 38 digits, its exact text beyond
    (up to DECIMAL(65,30)); TIME is text (-838:59:59 .. 838:59:59 fits no time type); binary strings, BLOBs and
    geometries (WKB) binary; text, ENUM, SET, JSON and MariaDB's UUID, INET6 and INET4 (their printed text) string.
    """

    kind: str
    precision: int = 0
    scale: int = 0


_INT64: Final = StoredType("int64")
_UNSIGNED_64: Final = StoredType("decimal", 20, 0)


def stored_type(column_type: ColumnType) -> StoredType:
    """The :class:`StoredType` of a column type (as :func:`canal.sql.read_column_type` returns it)."""
    base = column_type.base
    if base in INTEGER_TYPES:
        return _UNSIGNED_64 if base == "bigint" and column_type.unsigned else _INT64
    if base == "decimal":
        precision, scale = column_type.precision or 10, column_type.scale or 0
        return StoredType("string") if precision > _DECIMAL_MAX_EXACT else StoredType("decimal", precision, scale)
    if base in ("float", "double"):
        return StoredType("float64")
    if base == "date":
        return StoredType("date")
    if base in ("datetime", "timestamp"):
        return StoredType("timestamp")
    if base == "bit":
        return _UNSIGNED_64 if (column_type.length or 1) == 64 else _INT64
    if base == "year":
        return _INT64
    if base in BLOB_TYPES or base in GEOMETRY_TYPE_NAMES or (base in TEXT_TYPES and column_type.charset == "binary"):
        return StoredType("binary")
    return StoredType("string")


def python_type(column_type: ColumnType, *, mariadb: bool = True) -> type:
    """The Python type of a non-NULL value the row decoder (and the fake) returns for a column type.

    Integers, BIT and YEAR ``int``; DECIMAL ``Decimal``; FLOAT/DOUBLE ``float``; DATE ``date``; DATETIME and
    TIMESTAMP ``datetime`` (TIMESTAMP UTC-aware); TIME ``timedelta``; text and ENUM ``str`` (text in the binary
    charset ``bytes``); SET ``frozenset``; binary strings, BLOBs and geometries ``bytes``; JSON ``str`` on MariaDB
    (a LONGTEXT), MySQL's binary JSON decoded to ``object`` (dict, list, str, number, bool or None).
    """
    import datetime as dt
    from decimal import Decimal

    base = column_type.base
    if base in INTEGER_TYPES or base in ("bit", "year"):
        return int
    simple: dict[str, type] = {
        "decimal": Decimal,
        "float": float,
        "double": float,
        "date": dt.date,
        "datetime": dt.datetime,
        "timestamp": dt.datetime,
        "time": dt.timedelta,
        "enum": str,
        "set": frozenset,
        "uuid": str,
        "inet4": str,
        "inet6": str,
    }
    if base in simple:
        return simple[base]
    if base in TEXT_TYPES:
        return bytes if column_type.charset == "binary" else str
    if base == "json":
        return str if mariadb else object
    return bytes
