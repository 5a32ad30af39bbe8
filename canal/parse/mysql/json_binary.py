"""MySQL's binary JSON (column type 245) and its partial updates (``binlog_row_value_options=PARTIAL_JSON``).

Layout (MySQL's ``json_binary.h``): a type byte, then the value. Objects and arrays come small (16-bit counts, sizes
and offsets) or large (32-bit); an object is ``count size key-entry* value-entry* key* value*``, an array
``count size value-entry* value*``; offsets count from the container's first byte; literals and 16-bit integers (and
32-bit ones in large containers) sit inline in their value entry. Strings are a variable-length size (7 bits a
byte, high bit = more) and UTF-8. "Opaque" values carry any other MySQL type: its field-type byte, a size, the bytes.

Python values: dict, list, str, int, float, True/False/None; opaque DECIMAL -> ``Decimal``, DATE -> ``date``,
DATETIME/TIMESTAMP -> ``datetime`` (naive, as MySQL stores them in JSON), TIME -> ``timedelta``, a zero or invalid
date -> the ``str`` MySQL prints; any other opaque type -> :class:`~canal.protocol.JsonOpaque` (type and bytes).

Hostile bytes cannot make the reader loop, recurse without bound or allocate more than the value holds: every offset
and size is checked against its container, nesting is limited to MySQL's 100 levels, and the number of values read
is limited by the document's size (a document whose entries point at one shared value many times is refused). Every
malformed document raises ``ValueError``; the binlog parser turns it into a :class:`~canal.errors.ParseError` naming
the event.

A partial update's diffs of a column (:func:`read_json_diffs`) are MySQL's ``Json_diff_vector``: a list of
(operation, path, value), which :func:`apply_json_diff` applies to the before image's document as MySQL's
``apply_json_diffs`` does (:mod:`canal.mysql_json`), so the after image is the whole document.
"""

from __future__ import annotations

import datetime as dt
import struct
from typing import Any

from canal.mysql_json import JsonDiff, JsonDiffOperation, JsonOpaque, apply_json_diffs, parse_json_path
from canal.parse.mysql.packed_decimal import check_decimal_shape, decimal_size, make_decimal_reader
from canal.parse.mysql.packets import read_lenenc

SMALL_OBJECT, LARGE_OBJECT, SMALL_ARRAY, LARGE_ARRAY = 0, 1, 2, 3
LITERAL, INT16, UINT16, INT32, UINT32, INT64, UINT64, DOUBLE, STRING, OPAQUE = 4, 5, 6, 7, 8, 9, 10, 11, 12, 15

MAX_DEPTH = 100  # MySQL's JSON_DOCUMENT_MAX_DEPTH

# MySQL field types an opaque value may carry that have a Python value of their own
_F_TIMESTAMP, _F_DATE, _F_TIME, _F_DATETIME, _F_NEWDATE, _F_NEWDECIMAL = 7, 10, 11, 12, 14, 246

_I16, _U16, _I32, _U32 = struct.Struct("<h"), struct.Struct("<H"), struct.Struct("<i"), struct.Struct("<I")
_I64, _U64, _F64 = struct.Struct("<q"), struct.Struct("<Q"), struct.Struct("<d")
_SCALARS = {INT16: (_I16, 2), UINT16: (_U16, 2), INT32: (_I32, 4), UINT32: (_U32, 4), INT64: (_I64, 8)}
_SCALARS |= {UINT64: (_U64, 8), DOUBLE: (_F64, 8)}
_LITERALS = {0: None, 1: True, 2: False}


class _Budget:
    """How many more values a document may yield: at most one per byte, which no honest document exceeds."""

    __slots__ = ("left",)

    def __init__(self, size: int) -> None:
        self.left = size

    def take(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise ValueError("JSON document refers to its values more often than it has bytes (corrupt offsets)")


def read_mysql_json(raw: bytes) -> Any:
    """The Python value of one binary JSON document (an empty one is JSON null, as MySQL reads it)."""
    if not raw:
        return None
    return _value(raw[0], raw, 1, len(raw), 0, _Budget(len(raw)))


def _varlen(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """A string/opaque size: 7 bits a byte, at most 5 bytes (sizes are 32-bit)."""
    n = 0
    for i in range(5):
        if pos >= end:
            raise ValueError("JSON value size runs past its container")
        b = buf[pos]
        pos += 1
        n |= (b & 0x7F) << (7 * i)
        if not b & 0x80:
            return n, pos
    raise ValueError("JSON value size longer than 5 bytes")


def _value(t: int, buf: bytes, pos: int, end: int, depth: int, budget: _Budget) -> Any:
    """The value of type ``t`` at ``pos``; it must lie before ``end`` (its container's end)."""
    budget.take()
    if t <= LARGE_ARRAY:
        return _container(t, buf, pos, end, depth + 1, budget)
    if t == STRING:
        n, p = _varlen(buf, pos, end)
        if p + n > end:
            raise ValueError("JSON string runs past its container")
        return buf[p : p + n].decode("utf-8")
    if t in _SCALARS:
        fmt, size = _SCALARS[t]
        if pos + size > end:
            raise ValueError("JSON number runs past its container")
        return fmt.unpack_from(buf, pos)[0]
    if t == LITERAL:
        if pos >= end or buf[pos] not in _LITERALS:
            raise ValueError("bad JSON literal")
        return _LITERALS[buf[pos]]
    if t == OPAQUE:
        if pos >= end:
            raise ValueError("JSON opaque value runs past its container")
        n, p = _varlen(buf, pos + 1, end)
        if p + n > end:
            raise ValueError("JSON opaque value runs past its container")
        return _opaque(buf[pos], bytes(buf[p : p + n]))
    raise ValueError(f"unknown JSON value type {t}")


def _container(t: int, buf: bytes, pos: int, end: int, depth: int, budget: _Budget) -> Any:
    if depth > MAX_DEPTH:
        raise ValueError(f"JSON document nested deeper than {MAX_DEPTH} levels")
    large = t in (LARGE_OBJECT, LARGE_ARRAY)
    is_object = t in (SMALL_OBJECT, LARGE_OBJECT)
    w = 4 if large else 2
    unpack = (_U32 if large else _U16).unpack_from
    if pos + 2 * w > end:
        raise ValueError("JSON container header runs past its parent")
    count = unpack(buf, pos)[0]
    size = unpack(buf, pos + w)[0]
    base = pos
    limit = base + size
    entries = 2 * w + count * ((w + 2 if is_object else 0) + 1 + w)
    if limit > end or entries > size:
        raise ValueError(f"JSON container of {count} elements does not fit its {size} bytes")
    p = base + 2 * w
    keys: list[str] = []
    if is_object:
        for _ in range(count):
            koff = unpack(buf, p)[0]
            klen = _U16.unpack_from(buf, p + w)[0]
            if koff < entries or base + koff + klen > limit:
                raise ValueError("JSON object key outside its object")
            keys.append(buf[base + koff : base + koff + klen].decode("utf-8"))
            p += w + 2
    values = []
    for _ in range(count):
        vt = buf[p]
        if vt == LITERAL or vt in (INT16, UINT16) or (large and vt in (INT32, UINT32)):
            # inlined in the value entry
            values.append(_value(vt, buf, p + 1, p + 1 + w, depth, budget))
        else:
            voff = unpack(buf, p + 1)[0]
            if voff < entries or voff >= size:
                raise ValueError("JSON value offset outside its container")
            values.append(_value(vt, buf, base + voff, limit, depth, budget))
        p += 1 + w
    if is_object:
        return dict(zip(keys, values, strict=True))
    return values


def _opaque(field_type: int, data: bytes) -> Any:
    if field_type == _F_NEWDECIMAL:
        if len(data) < 2:
            raise ValueError("JSON DECIMAL value without precision and scale")
        precision, scale = data[0], data[1]
        check_decimal_shape(precision, scale)
        if len(data) - 2 != decimal_size(precision, scale):
            raise ValueError(f"JSON DECIMAL({precision},{scale}) value has {len(data) - 2} bytes")
        return make_decimal_reader(precision, scale)(data[2:])
    if field_type in (_F_DATE, _F_NEWDATE, _F_DATETIME, _F_TIMESTAMP, _F_TIME):
        if len(data) != 8:
            raise ValueError(f"JSON temporal value of {len(data)} bytes (8 expected)")
        return _packed_temporal(field_type, _I64.unpack(data)[0])
    return JsonOpaque(field_type, data)


def _packed_temporal(field_type: int, v: int) -> Any:
    """MySQL's packed 64-bit temporal form (``TIME_to_longlong_*_packed``): (date << 17 | hms) << 24 | microseconds."""
    neg = v < 0
    if neg:
        v = -v
    us = v & 0xFFFFFF
    hms = (v >> 24) & 0x1FFFF
    if us > 999_999:
        raise ValueError(f"JSON temporal value with {us} microseconds")
    h, mi, s = hms >> 12, (hms >> 6) & 63, hms & 63
    if field_type == _F_TIME:
        hours = (v >> 24) >> 12  # a TIME's day part is folded into its hours
        td = dt.timedelta(hours=hours, minutes=mi, seconds=s, microseconds=us)
        return -td if neg else td
    if neg:
        raise ValueError("negative JSON date")
    ymd = v >> 41
    ym, d = ymd >> 5, ymd & 31
    y, mo = divmod(ym, 13)
    try:
        if field_type in (_F_DATE, _F_NEWDATE):
            return dt.date(y, mo, d)
        return dt.datetime(y, mo, d, h, mi, s, us)
    except ValueError:  # a zero or invalid date: the text MySQL prints for it
        if field_type in (_F_DATE, _F_NEWDATE):
            return f"{y:04d}-{mo:02d}-{d:02d}"
        return f"{y:04d}-{mo:02d}-{d:02d} {h:02d}:{mi:02d}:{s:02d}.{us:06d}"


# --- partial updates --------------------------------------------------------------------------------------------

_OPERATIONS = {op.value: op for op in JsonDiffOperation}


def read_json_diffs(raw: bytes) -> tuple[JsonDiff, ...]:
    """The diffs of one JSON column of a partial update (``raw``: MySQL's ``Json_diff_vector`` without its length):
    per diff the operation byte, the path (length-encoded text) and, but for REMOVE, the value (length-encoded
    binary JSON). ``ValueError`` for bytes that are not that, or a path no diff may have."""
    out = []
    p, end = 0, len(raw)
    while p < end:
        op = _OPERATIONS.get(raw[p])
        if op is None:
            raise ValueError(f"unknown JSON diff operation {raw[p]}")
        n, p = read_lenenc(raw, p + 1)
        if p + n > end:
            raise ValueError("JSON diff path runs past the diff")
        path = raw[p : p + n].decode("utf-8")
        if not parse_json_path(path):
            raise ValueError(f"JSON diff {op.name} of the whole document ({path!r})")
        p += n
        value = None
        if op is not JsonDiffOperation.REMOVE:
            n, p = read_lenenc(raw, p)
            if p + n > end:
                raise ValueError("JSON diff value runs past the diff")
            value = read_mysql_json(raw[p : p + n])
            p += n
        out.append(JsonDiff(op, path, value))
    if p != end:
        raise ValueError("JSON diff overruns its length")
    return tuple(out)


def apply_json_diff(before: Any, raw: bytes) -> Any:
    """The document ``before`` with the diffs of one partial update (``raw``: the diff vector without its length)
    applied (:func:`canal.mysql_json.apply_json_diffs`); ``before`` is not changed. A diff that does not apply
    raises ``ValueError``: MySQL only logs diffs that applied to this very before image, so the before image or the
    diff is corrupt."""
    return apply_json_diffs(before, read_json_diffs(raw))
