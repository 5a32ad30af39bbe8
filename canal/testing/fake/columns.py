"""The fake server's column model: a column definition resolved for the catalog, the type text and JDBC type it
reports, and how values are checked, normalized (as a decoder returns them) and sized in a rows event.

Definitions are read by the one SQL reader (:mod:`canal.sql`); :func:`from_definition` resolves one.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation
from typing import Any

import attrs

from canal.parse.mysql.charsets import charset_named
from canal.protocol import ColumnMeta
from canal.sql import ColumnDef, quote_name
from canal.sql.types import (
    BLOB_TYPES,
    GEOMETRY_TYPE_NAMES,
    INTEGER_TYPES,
    KNOWN_TYPES,
    TEMPORAL_TYPES,
    TEXT_TYPES,
    canal_sql_type,
)
from canal.testing.fake.errors import FakeMysqlError

INT_TYPES = INTEGER_TYPES
_INT_WIDTH = {"tinyint": (4, 3), "smallint": (6, 5), "mediumint": (9, 8), "int": (11, 10), "bigint": (20, 20)}
GEOMETRY_TYPES = frozenset(GEOMETRY_TYPE_NAMES)
_TEMPORAL = TEMPORAL_TYPES

_DECIMAL_CONTEXT = Context(prec=100, rounding=ROUND_HALF_UP)


def charset_codec(charset: str) -> str | None:
    """The Python codec for a MySQL charset name (None for ``binary``), as the binlog decoder uses it."""
    return charset_named(charset).codec


@attrs.frozen(slots=True)
class ColDef:
    """One column as the catalog keeps it: the type resolved, nullability decided."""

    name: str
    base: str  # normalized lowercase base type: "int", "varchar", "decimal", ...
    params: tuple[int, ...] = ()
    labels: tuple[str, ...] = ()
    unsigned: bool = False
    zerofill: bool = False
    nullable: bool = True
    charset: str | None = None  # the MySQL charset declared on the column (None: the table's)
    primary: bool = False  # inline PRIMARY KEY

    def renamed(self, name: str) -> ColDef:
        return attrs.evolve(self, name=name)


def from_definition(col: ColumnDef) -> ColDef:
    """A column definition read by the SQL reader, resolved: FakeMysqlError for a type the fake does not model."""
    t = col.type
    if t.base not in KNOWN_TYPES:
        raise FakeMysqlError(f"unknown column type {t.text!r} for column {col.name!r}")
    if t.base in ("enum", "set") and not t.labels:
        raise FakeMysqlError(f"{t.base.upper()} column {col.name!r} needs its labels")
    charset = t.charset
    if charset is None and t.collation is not None:
        charset = "binary" if t.collation == "binary" else t.collation.split("_", 1)[0]
    return ColDef(
        col.name,
        t.base,
        t.params,
        t.labels,
        t.unsigned,
        t.zerofill,
        col.is_nullable,
        charset,
        col.primary_key,
    )


def effective_charset(col: ColDef, table_charset: str) -> str | None:
    """The column's MySQL charset when it holds text (None for numbers, temporals and binary types)."""
    if col.base in TEXT_TYPES or col.base in ("enum", "set"):
        return col.charset or table_charset
    if col.base == "json":
        return "utf8mb4"
    return None


def _quote_label(label: str) -> str:
    return "'" + label.replace("'", "''") + "'"


def mysql_type_text(col: ColDef, mariadb: bool) -> str:
    """The type as ``SHOW CREATE TABLE`` prints it (MariaDB keeps integer display widths, MySQL 8 drops them)."""
    b, p = col.base, col.params
    if b in INT_TYPES:
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
            raise FakeMysqlError(f"column {col.name!r}: {b.upper()} needs a length")
        text = f"{b}({p[0]})"
    elif b in ("enum", "set"):
        text = f"{b}({','.join(_quote_label(x) for x in col.labels)})"
    elif b in _TEMPORAL:
        text = f"{b}({p[0]})" if p and p[0] else b
    elif b == "year":
        text = "year(4)" if mariadb else "year"
    elif b == "json" and mariadb:
        text = "longtext"
    else:
        text = b
    if col.unsigned and (b in INT_TYPES or b in ("decimal", "float", "double")):
        text += " unsigned"
    if col.zerofill:
        text += " zerofill"
    return text


def sql_type_of(col: ColDef, charset: str | None, *, mariadb: bool = False) -> int:
    """The JDBC type number canal reports for a column (:func:`canal.sql.types.canal_sql_type`, the decoder's rule).
    MariaDB's JSON is a LONGTEXT column: its binlog type, and so its JDBC type, is LONGTEXT's (CLOB)."""
    base = "longtext" if mariadb and col.base == "json" else col.base
    return canal_sql_type(base, unsigned=col.unsigned, binary=charset == "binary")


def column_meta(col: ColDef, *, is_key: bool, table_charset: str, mariadb: bool) -> ColumnMeta:
    cs = effective_charset(col, table_charset)
    fsp = col.params[0] if col.base in _TEMPORAL and col.params else 0
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


def column_sql(col: ColDef, table_charset: str, mariadb: bool) -> str:
    """A column definition as SHOW CREATE TABLE would print it."""
    text = f"{quote_name(col.name)} {mysql_type_text(col, mariadb)}"
    if col.charset and col.charset != table_charset and effective_charset(col, table_charset) is not None:
        text += f" CHARACTER SET {col.charset}"
    text += "" if col.nullable and not col.primary else " NOT NULL"
    return text


# -- values ---------------------------------------------------------------------------------------------------------


def _int_range(col: ColDef) -> tuple[int, int]:
    bits = INT_TYPES[col.base] * 8
    return (0, 2**bits - 1) if col.unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def implicit_default(col: ColDef) -> Any:
    """The value MySQL gives existing rows for a new NOT NULL column without a usable default."""
    b = col.base
    if col.nullable:
        return None
    if b in INT_TYPES or b in ("bit", "year"):
        return 0
    if b == "decimal":
        scale = col.params[1] if len(col.params) > 1 else 0
        return Decimal(0).scaleb(-scale) if scale else Decimal(0)
    if b in ("float", "double"):
        return 0.0
    if b in TEXT_TYPES:
        return ""
    if b == "enum":
        return col.labels[0]
    if b == "set":
        return frozenset()
    if b in BLOB_TYPES or b in GEOMETRY_TYPES:
        return b"\0" * col.params[0] if b == "binary" and col.params else b""
    if b == "json":
        return None
    return None


def coerce(col: ColDef, value: Any, table: str, table_charset: str, mariadb: bool) -> Any:
    """Check a value against its column, loosely, and return it as a decoder would produce it."""
    where = f"{table}.{col.name} ({mysql_type_text(col, mariadb)})"

    def bad(why: str = "") -> FakeMysqlError:
        return FakeMysqlError(f"value {value!r} does not fit {where}{': ' + why if why else ''}")

    if value is None:
        if not col.nullable or col.primary:
            raise FakeMysqlError(f"{where} is NOT NULL: a value is required")
        return None
    b = col.base
    if b in INT_TYPES:
        if isinstance(value, bool):
            value = int(value)
        if not isinstance(value, int):
            raise bad("an int is expected")
        lo, hi = _int_range(col)
        if not lo <= value <= hi:
            raise bad(f"out of range {lo}..{hi}")
        return value
    if b == "decimal":
        if isinstance(value, bool) or not isinstance(value, Decimal | int | float | str):
            raise bad("a Decimal is expected")
        try:
            d = Decimal(str(value)) if not isinstance(value, Decimal) else value
        except InvalidOperation:
            raise bad("not a number") from None
        prec = col.params[0] if col.params else 10
        scale = col.params[1] if len(col.params) > 1 else 0
        # MySQL keeps up to 65 digits and rounds half away from zero; the default context (28 digits, half even)
        # would raise InvalidOperation for DECIMAL(65,30) values and round differently
        d = d.quantize(Decimal(1).scaleb(-scale), context=_DECIMAL_CONTEXT)
        if len(d.as_tuple().digits) > prec and d != 0:
            raise bad(f"more than {prec} digits")
        if col.unsigned and d < 0:
            raise bad("negative value in an unsigned column")
        return d
    if b in ("float", "double"):
        if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
            raise bad("a float is expected")
        return float(value)
    if b == "bit":
        if isinstance(value, bytes | bytearray):
            value = int.from_bytes(value, "big")
        if isinstance(value, bool):
            value = int(value)
        if not isinstance(value, int) or value < 0 or value >= 2 ** (col.params[0] if col.params else 1):
            raise bad()
        return value
    if b == "year":
        if not isinstance(value, int) or isinstance(value, bool) or not (value == 0 or 1901 <= value <= 2155):
            raise bad("a year 1901..2155 (or 0) is expected")
        return value
    if b in TEXT_TYPES:
        cs = effective_charset(col, table_charset)
        if cs == "binary":
            if isinstance(value, str):
                value = value.encode()
            if not isinstance(value, bytes | bytearray):
                raise bad("bytes are expected")
            return bytes(value)
        if not isinstance(value, str):
            raise bad("a str is expected")
        if b in ("char", "varchar") and len(value) > (col.params[0] if col.params else 1):
            raise bad(f"longer than {col.params[0] if col.params else 1} characters")
        if b == "char":
            value = value.rstrip(" ")  # CHAR values come back without trailing spaces
        codec = charset_codec(cs or "utf8mb4")
        try:
            value.encode(codec or "utf-8")
        except UnicodeEncodeError:
            raise bad(f"not representable in {cs}") from None
        return value
    if b in BLOB_TYPES or b in GEOMETRY_TYPES or b in ("uuid", "inet4", "inet6"):
        if isinstance(value, str) and b in ("uuid", "inet4", "inet6"):
            return value
        if not isinstance(value, bytes | bytearray | memoryview):
            raise bad("bytes are expected")
        data = bytes(value)
        size = col.params[0] if col.params else (1 if b == "binary" else None)
        if size is not None and b in ("binary", "varbinary") and len(data) > size:
            raise bad(f"longer than {size} bytes")
        if b == "binary" and size is not None:
            data = data.ljust(size, b"\0")
        return data
    if b == "enum":
        if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= len(col.labels):
            return col.labels[value - 1]
        if value not in col.labels:
            raise bad(f"labels are {col.labels}")
        return value
    if b == "set":
        items: frozenset[Any]
        if isinstance(value, str):
            items = frozenset(x for x in value.split(",") if x)
        elif isinstance(value, set | frozenset | list | tuple):
            items = frozenset(value)
        else:
            raise bad("a set of labels is expected")
        if not items <= set(col.labels):
            raise bad(f"labels are {col.labels}")
        return items
    if b == "date":
        if isinstance(value, str):
            try:
                value = dt.date.fromisoformat(value)
            except ValueError:
                raise bad() from None
        if isinstance(value, dt.datetime) or not isinstance(value, dt.date):
            raise bad("a datetime.date is expected")
        return value
    if b in ("datetime", "timestamp"):
        if isinstance(value, str):
            try:
                value = dt.datetime.fromisoformat(value)
            except ValueError:
                raise bad() from None
        if b == "timestamp" and isinstance(value, int | float) and not isinstance(value, bool):
            value = dt.datetime.fromtimestamp(value, dt.UTC)
        if not isinstance(value, dt.datetime):
            raise bad("a datetime.datetime is expected")
        fsp = col.params[0] if col.params else 0
        micro = value.microsecond - value.microsecond % (10 ** (6 - fsp))
        value = value.replace(microsecond=micro)
        if b == "timestamp":
            value = value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)
        return value
    if b == "time":
        if not isinstance(value, dt.timedelta | dt.time):
            raise bad("a datetime.timedelta (or datetime.time) is expected")
        return value
    if b == "json":
        try:
            text = json.dumps(value)
        except (TypeError, ValueError):
            raise bad("not JSON-serializable") from None
        if mariadb:  # MariaDB's JSON is LONGTEXT: the binlog holds the text
            return value if isinstance(value, str) else text
        return value
    return value


_FIXED_SIZES = {"float": 4, "double": 8, "date": 3, "year": 1}


def value_size(col: ColDef, value: Any) -> int:
    """Bytes a value takes in a rows event (an estimate good enough for realistic offsets)."""
    if value is None:
        return 0
    b = col.base
    if b in INT_TYPES:
        return INT_TYPES[b]
    if b in _FIXED_SIZES:
        return _FIXED_SIZES[b]
    if b == "decimal":
        prec = col.params[0] if col.params else 10
        return (prec + 8) // 9 * 4
    if b == "bit":
        return ((col.params[0] if col.params else 1) + 7) // 8
    if b in _TEMPORAL:
        fsp = col.params[0] if col.params else 0
        return {"time": 3, "datetime": 5, "timestamp": 4}[b] + (fsp + 1) // 2
    if b == "enum":
        return 1 if len(col.labels) < 256 else 2
    if b == "set":
        return (len(col.labels) + 7) // 8
    if isinstance(value, str):
        n = len(value.encode("utf-8", "replace"))
    elif isinstance(value, bytes):
        n = len(value)
    elif isinstance(value, frozenset):
        n = 8
    else:
        n = len(json.dumps(value, default=str))
    prefix = 1 if b in ("char", "varchar", "binary", "varbinary", "tinytext", "tinyblob") and n < 256 else 4
    if b in ("text", "blob"):
        prefix = 2
    return n + prefix
