"""Random binlog row image cells of every column form the columnar decoder keeps (canal.parse.mysql.decoder's
``column_form``): text in UTF-8 and latin1 (ASCII or not, valid or not), DATETIME2 of every fsp (zero, invalid and
impossible dates among them), DECIMALs (corrupt groups among them), and the object decoder's forms (integers, doubles,
BLOBs, ENUMs). Shared by tests/test_columnar_rows.py and tests/test_message_columns.py."""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from canal.parse.mysql.decoder import BinlogColumn
from canal.parse.mysql.packed_decimal import decimal_size

T_LONG, T_DOUBLE, T_LONGLONG, T_VARCHAR, T_DATETIME2, T_NEWDECIMAL, T_ENUM, T_BLOB, T_STRING = (
    3, 5, 8, 15, 18, 246, 247, 252, 254,
)  # fmt: skip
_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def lenenc_text(prefix: int) -> Callable[[bytes], bytes]:
    return lambda raw: len(raw).to_bytes(prefix, "little") + raw


def datetime2(fsp: int, parts: tuple[int, int, int, int, int, int, int]) -> bytes:
    y, mo, d, h, mi, s, us = parts
    fbytes = (fsp + 1) // 2
    ip = ((y * 13 + mo) << 22) | (d << 17) | (h << 12) | (mi << 6) | s
    frac = us // (0, 10_000, 100, 1)[fbytes] if fbytes else 0
    return (((ip + 0x80_0000_0000) << (8 * fbytes)) | frac).to_bytes(5 + fbytes, "big")


def decimal(precision: int, scale: int, unscaled: int) -> bytes:
    """MySQL's packed DECIMAL of ``unscaled`` / 10**scale."""
    digits = str(abs(unscaled)).rjust(precision, "0")
    intg = precision - scale
    out = b""
    whole, frac = digits[:intg], digits[intg:]
    lead = intg % 9
    if lead:
        out += int(whole[:lead]).to_bytes(_DIG2BYTES[lead], "big")
    for i in range(lead, intg, 9):
        out += int(whole[i : i + 9]).to_bytes(4, "big")
    for i in range(0, scale - scale % 9, 9):
        out += int(frac[i : i + 9]).to_bytes(4, "big")
    if scale % 9:
        out += int(frac[scale - scale % 9 :]).to_bytes(_DIG2BYTES[scale % 9], "big")
    packed = bytes([out[0] ^ 0x80]) + out[1:]
    return bytes(b ^ 0xFF for b in packed) if unscaled < 0 else packed


# a date's parts, mostly real ones, with zero, invalid (Feb 30) and impossible (month 13, hour 24) ones among them
_DATE_PARTS = st.one_of(
    st.datetimes(dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31)).map(
        lambda t: (t.year, t.month, t.day, t.hour, t.minute, t.second, t.microsecond)
    ),
    st.tuples(
        st.integers(0, 9999),
        st.integers(0, 13),
        st.integers(0, 31),
        st.integers(0, 24),
        st.integers(0, 60),
        st.integers(0, 59),
        st.integers(0, 999_999),
    ),
)
_TEXT_BYTES = st.one_of(
    st.text(st.characters(codec="ascii"), max_size=12).map(str.encode),
    st.text(max_size=8).map(lambda s: s.encode("utf-8", "surrogatepass")),
    st.binary(max_size=8),
)


@st.composite
def column(draw: st.DrawFn, index: int) -> tuple[BinlogColumn, st.SearchStrategy[bytes]]:
    """A column of a random form and a strategy of its non-NULL cells' bytes in a row image."""
    nullable = draw(st.booleans())

    def col(type_: int, **kw: Any) -> BinlogColumn:
        return BinlogColumn(index=index, type=type_, nullable=nullable, name=f"c{index}", **kw)

    kind = draw(st.sampled_from(["int", "bigint", "double", "varchar", "text", "blob", "datetime", "decimal", "enum"]))
    if kind == "int":
        return col(T_LONG), st.integers(-(2**31), 2**31 - 1).map(lambda v: struct.pack("<i", v))
    if kind == "bigint":
        return col(T_LONGLONG), st.integers(-(2**63), 2**63 - 1).map(lambda v: struct.pack("<q", v))
    if kind == "double":
        return col(T_DOUBLE), st.floats(allow_nan=False).map(lambda v: struct.pack("<d", v))
    if kind in ("varchar", "text"):
        collation = draw(st.sampled_from([8, 33, 45, 46, 224]))  # latin1, utf8mb3, utf8mb4 (and their _bin)
        if kind == "varchar":
            length = draw(st.sampled_from([40, 300]))
            return col(T_VARCHAR, length=length, collation=collation), _TEXT_BYTES.map(lenenc_text(length // 256 + 1))
        return col(T_BLOB, length=2, collation=collation), _TEXT_BYTES.map(lenenc_text(2))
    if kind == "blob":
        return col(T_BLOB, length=2, collation=63), st.binary(max_size=10).map(lenenc_text(2))
    if kind == "datetime":
        fsp = draw(st.integers(0, 6))
        return col(T_DATETIME2, fsp=fsp), _DATE_PARTS.map(lambda parts: datetime2(fsp, parts))
    if kind == "decimal":
        precision, scale = draw(st.sampled_from([(12, 2), (5, 0), (18, 9), (10, 10), (9, 4), (30, 5)]))
        size = decimal_size(precision, scale)
        good = st.integers(-(10**precision) + 1, 10**precision - 1).map(lambda v: decimal(precision, scale, v))
        negative_zero = st.just(b"\x7f" + b"\xff" * (size - 1))  # the server never writes one; the bytes can say it
        cells = good | negative_zero
        if draw(st.booleans()):  # corrupt groups among the column's cells (a column without any is read at once)
            cells |= st.binary(min_size=size, max_size=size)
        return col(T_NEWDECIMAL, precision=precision, scale=scale), cells
    labels = ("new", "paid", "shipped")
    return col(T_ENUM, length=1, collation=8, labels=labels), st.integers(0, 4).map(lambda v: bytes([v]))
