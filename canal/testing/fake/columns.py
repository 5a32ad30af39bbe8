"""The fake server's values: how a value is checked against its column and normalized as a decoder returns it, the
implicit default a new NOT NULL column gives existing rows, and a value's size in a rows event. Columns themselves
are :class:`canal.schema.TableColumn` (the schema catalog's model).
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation
from typing import Any

from canal.schema import TableColumn, effective_charset, mysql_type_text
from canal.schema.columns import charset_codec
from canal.sql.types import BLOB_TYPES, GEOMETRY_TYPE_NAMES, INTEGER_TYPES, TEMPORAL_TYPES, TEXT_TYPES
from canal.sql.values import FIXED_BINARY_SIZES, canonical_text, fixed_binary_text
from canal.testing.fake.errors import FakeMysqlError

INT_TYPES = INTEGER_TYPES
GEOMETRY_TYPES = frozenset(GEOMETRY_TYPE_NAMES)

_DECIMAL_CONTEXT = Context(prec=100, rounding=ROUND_HALF_UP)


# -- values ---------------------------------------------------------------------------------------------------------


def _int_range(col: TableColumn) -> tuple[int, int]:
    bits = INT_TYPES[col.base] * 8
    return (0, 2**bits - 1) if col.unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def implicit_default(col: TableColumn) -> Any:
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
    if b in FIXED_BINARY_SIZES:  # the value of zero bytes, as text
        text = fixed_binary_text(b)
        assert text is not None
        return text(bytes(FIXED_BINARY_SIZES[b]))
    if b == "enum":
        return col.labels[0]
    if b == "set":
        return frozenset()
    if b in BLOB_TYPES or b in GEOMETRY_TYPES:
        return b"\0" * col.params[0] if b == "binary" and col.params else b""
    if b == "json":
        return None
    return None


def coerce(col: TableColumn, value: Any, table: str, table_charset: str, mariadb: bool) -> Any:
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
    if b in FIXED_BINARY_SIZES:  # MariaDB's UUID / INET types: the text the server prints (canal.sql.values)
        try:
            if isinstance(value, bytes | bytearray | memoryview):
                of_bytes = fixed_binary_text(b)
                assert of_bytes is not None
                return of_bytes(bytes(value))
            if isinstance(value, str):
                return canonical_text(b, value)
        except ValueError as exc:
            raise bad(str(exc)) from None
        raise bad("a str (or its stored bytes) is expected")
    if b in BLOB_TYPES or b in GEOMETRY_TYPES:
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


def value_size(col: TableColumn, value: Any) -> int:
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
    if b in TEMPORAL_TYPES:
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
