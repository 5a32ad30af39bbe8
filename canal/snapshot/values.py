"""A snapshot row's values as the binlog decoder gives them, from what ``SELECT`` returns over the text protocol.

Snapshot rows and binlog rows of one table reach the same consumers, so a value must not depend on where it came
from: the same Python type and the same value (:func:`canal.sql.types.python_type`). The reader asks the server for
text (pymysql's conversions off: nothing is turned into None or rounded on the way) and each column's text is read
here by its :class:`~canal.protocol.ColumnMeta`:

* integers, YEAR: ``int``; BIT: the bytes' big-endian ``int``; DECIMAL: ``Decimal`` of the text (its scale kept);
* FLOAT: selected as ``CAST(col AS DOUBLE)`` by the reader (the float's exact value, as the binlog's 4 bytes give
  it), then rounded as the decoder rounds it (:func:`canal.sql.values.float_display`: what ``SELECT`` prints, 6
  significant digits or a ``FLOAT(M,D)``'s decimals; the server prints a negative zero as its flavour does, so its
  sign is already the decoder's); DOUBLE as is: ``float`` of the text the server prints (a ``DOUBLE(M,D)``'s
  decimals, MariaDB's 0 for -0.0);
* DATE, DATETIME: ``date`` / ``datetime``, but a zero or invalid date (``0000-00-00``, ``2020-00-15``) stays its text,
  as the decoder returns it; TIMESTAMP: UTC-aware ``datetime`` (the session runs in UTC), zero as text; TIME:
  ``timedelta``;
* text, ENUM, JSON on MariaDB, UUID, INET6, INET4: ``str``; SET: ``frozenset`` of its labels; binary strings, BLOBs:
  ``bytes``;
  geometries: selected as ``ST_AsBinary`` (WKB without the SRID, as the decoder hands them out).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from typing import Any, Final

from canal.protocol import ColumnMeta, TableSchema
from canal.sql import read_column_type
from canal.sql.types import BLOB_TYPES, GEOMETRY_TYPE_NAMES, INTEGER_TYPES, TEXT_TYPES
from canal.sql.values import float_display

__all__ = ["column_expression", "rows_reader"]

_TIME = re.compile(r"^(-)?(\d+):(\d{2}):(\d{2})(?:\.(\d+))?$")
_UTC: Final = dt.UTC


def _text(raw: Any) -> str:
    return raw.decode("ascii") if isinstance(raw, bytes | bytearray) else str(raw)


def _date(raw: Any) -> dt.date | str:
    text = _text(raw)
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        return text  # a zero or invalid date, as the decoder gives it


def _datetime(raw: Any) -> dt.datetime | str:
    text = _text(raw)
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:
        return text


def _timestamp(raw: Any) -> dt.datetime | str:
    value = _datetime(raw)
    return value.replace(tzinfo=_UTC) if isinstance(value, dt.datetime) else value


def _time(raw: Any) -> dt.timedelta:
    match = _TIME.match(_text(raw))
    if match is None:
        raise ValueError(f"not a TIME value: {raw!r}")
    sign, h, m, s, frac = match.groups()
    value = dt.timedelta(hours=int(h), minutes=int(m), seconds=int(s), microseconds=int((frac or "0").ljust(6, "0")))
    return -value if sign else value


def _float(meta: ColumnMeta) -> Callable[[Any], float]:
    """A FLOAT's exact float32 value (selected as DOUBLE), as the decoder rounds it (the sign of a zero is the
    server's already: MariaDB prints -0.0 as 0)."""
    show = float_display(True, read_column_type(meta.mysql_type, strict=False).scale, mariadb=False)
    assert show is not None
    return lambda raw: show(float(raw))


def _bit(raw: Any) -> int:
    return int.from_bytes(bytes(raw), "big")


def _set(raw: Any) -> frozenset[str]:
    text = raw if isinstance(raw, str) else bytes(raw).decode("utf-8")
    return frozenset(x for x in text.split(",") if x)


def _str(raw: Any) -> str:
    return raw if isinstance(raw, str) else bytes(raw).decode("utf-8")


def _reader(meta: ColumnMeta) -> Callable[[Any], Any]:
    base = read_column_type(meta.mysql_type, strict=False).base
    if base in INTEGER_TYPES or base == "year":
        return int  # reads the text or the bytes of a number
    if base == "bit":
        return _bit
    if base == "decimal":
        return lambda raw: Decimal(_text(raw))
    if base == "float":
        return _float(meta)
    if base == "double":
        return float  # reads the text or the bytes of a number
    if base == "date":
        return _date
    if base == "datetime":
        return _datetime
    if base == "timestamp":
        return _timestamp
    if base == "time":
        return _time
    if base == "set":
        return _set
    if base in BLOB_TYPES or base in GEOMETRY_TYPE_NAMES or (base in TEXT_TYPES and meta.charset is None):
        return bytes
    return _str  # text, ENUM, JSON (MariaDB's is text), UUID and INET as text


def _decoded(column: Sequence[Any]) -> Iterable[str]:
    """The column as text: pymysql decodes most columns already; bytes are decoded here (a TypeError if the two
    mix: the caller then reads the values one by one)."""
    return column if column[0].__class__ is str else map(bytes.decode, column)


def _fast(meta: ColumnMeta) -> Callable[[Sequence[Any]], list[Any]] | None:
    """A whole column without NULLs in C-level calls (``map`` of builtins), for the common types; it raises
    ValueError / TypeError on anything unusual (a zero date, text where bytes were expected), and the caller then
    reads the column value by value."""
    base = read_column_type(meta.mysql_type, strict=False).base
    if base in INTEGER_TYPES or base == "year":
        return lambda column: list(map(int, column))
    if base == "float":
        read = _float(meta)
        return lambda column: list(map(read, column))
    if base == "double":
        return lambda column: list(map(float, column))
    if base == "decimal":
        return lambda column: list(map(Decimal, _decoded(column)))
    if base == "datetime":
        return lambda column: list(map(dt.datetime.fromisoformat, _decoded(column)))
    if base == "date":
        return lambda column: list(map(dt.date.fromisoformat, _decoded(column)))
    return None


def _read_column(
    reader: Callable[[Any], Any], fast: Callable[[Sequence[Any]], list[Any]] | None, column: Sequence[Any]
) -> Sequence[Any]:
    if reader is _str:  # pymysql hands text columns over decoded already
        return [v if v is None or v.__class__ is str else _str(v) for v in column]
    if fast is not None and None not in column:
        try:
            return fast(column)
        except (ValueError, TypeError):
            # an unusual value somewhere (a zero date, text where bytes were expected): read value by value
            return [reader(v) for v in column]
    return [None if v is None else reader(v) for v in column]


def column_expression(meta: ColumnMeta, quoted: str) -> str:
    """What the reader selects for a column: FLOAT widened to DOUBLE (its exact value), geometries as WKB."""
    base = read_column_type(meta.mysql_type, strict=False).base
    if base == "float":
        return f"CAST({quoted} AS DOUBLE)"
    if base in GEOMETRY_TYPE_NAMES:
        return f"ST_AsBinary({quoted})"
    return quoted


def rows_reader(schema: TableSchema) -> Callable[[Sequence[Sequence[Any]]], list[tuple[Any, ...]]]:
    """Turns text-protocol rows of :func:`column_expression` columns into the decoder's value tuples, a column at a
    time (a chunk is thousands of rows: one comprehension per column costs far less than a call per value)."""
    readers = [(_reader(meta), _fast(meta)) for meta in schema.columns]

    def read(rows: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
        if not rows:
            return []
        columns: list[Sequence[Any]] = []
        columns = [
            _read_column(reader, fast, column)
            for (reader, fast), column in zip(readers, zip(*rows, strict=True), strict=True)
        ]
        return list(zip(*columns, strict=True))

    return read
