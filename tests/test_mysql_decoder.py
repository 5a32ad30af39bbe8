"""Unit tests of the binlog row decoder's value readers (no server)."""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from canal.parse.mysql.decoder import (
    BinlogColumn,
    TableDecoder,
    TableMapInfo,
    make_datetime2_reader,
    make_time2_reader,
    read_date,
)
from canal.parse.mysql.json_binary import read_mysql_json
from canal.parse.mysql.packed_decimal import decimal_size, make_decimal_reader


def _pack_decimal(text: str, precision: int, scale: int) -> bytes:
    """Encode like the server: groups of 9 digits, sign by inverting every byte, top bit flipped."""
    dig2bytes = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
    neg = text.startswith("-")
    ip, _, fp = text.lstrip("-").partition(".")
    intg = precision - scale
    ip = ip.rjust(intg, "0")
    fp = fp.ljust(scale, "0")
    out = b""
    lead = intg % 9
    if lead:
        out += int(ip[:lead]).to_bytes(dig2bytes[lead], "big")
    for i in range(lead, intg, 9):
        out += int(ip[i : i + 9]).to_bytes(4, "big")
    for i in range(0, scale - scale % 9, 9):
        out += int(fp[i : i + 9]).to_bytes(4, "big")
    if scale % 9:
        out += int(fp[scale - scale % 9 :]).to_bytes(dig2bytes[scale % 9], "big")
    raw = bytearray(out)
    raw[0] ^= 0x80
    if neg:
        raw = bytearray(b ^ 0xFF for b in raw)
    assert len(raw) == decimal_size(precision, scale)
    return bytes(raw)


@pytest.mark.parametrize(
    ("text", "precision", "scale"),
    [
        ("0.00", 5, 2),
        ("-999.99", 5, 2),
        ("12345678901234567890", 20, 0),
        ("-1", 1, 0),
        ("-" + "9" * 35 + "." + "9" * 30, 65, 30),
        ("0.000000000000000000000000000001", 65, 30),
        ("-123456789.123456789", 18, 9),
        ("1.5", 10, 1),
    ],
)
def test_decimal_reader(text: str, precision: int, scale: int) -> None:
    value = make_decimal_reader(precision, scale)(_pack_decimal(text, precision, scale))
    assert value == Decimal(text)
    assert value.as_tuple().exponent == -scale


@st.composite
def _decimals(draw: st.DrawFn) -> tuple[str, int, int]:
    precision = draw(st.integers(1, 65))
    scale = draw(st.integers(0, min(precision, 38)))
    digits = draw(st.text("0123456789", min_size=precision, max_size=precision))
    whole, fraction = digits[: precision - scale].lstrip("0") or "0", digits[precision - scale :]
    sign = draw(st.sampled_from(["", "-"]))
    return sign + whole + ("." + fraction if scale else ""), precision, scale


@given(_decimals())
def test_decimal_reader_gives_the_text_exactly(shape: tuple[str, int, int]) -> None:
    """Every digit, the scale and the sign (a negative zero too) of any DECIMAL's bytes, whatever the thread's decimal
    context (28 digits by default: digits beyond it must not round)."""
    import decimal

    text, precision, scale = shape
    with decimal.localcontext(decimal.Context(prec=3)):
        value = make_decimal_reader(precision, scale)(_pack_decimal(text, precision, scale))
    assert str(value) == str(Decimal(text)) and value.as_tuple() == Decimal(text).as_tuple()


def test_dates_and_times() -> None:
    assert read_date(2024 << 9 | 2 << 5 | 29) == dt.date(2024, 2, 29)
    assert read_date(0) == "0000-00-00"
    ym = 2024 * 13 + 5
    packed = (0x8000000000 + (ym << 22 | 6 << 17 | 7 << 12 | 8 << 6 | 9)) << 24 | 123456
    assert make_datetime2_reader(6)(packed) == dt.datetime(2024, 5, 6, 7, 8, 9, 123456)
    assert make_datetime2_reader(0)(0x8000000000) == "0000-00-00 00:00:00"
    # TIME(6) -00:00:00.000001
    raw = (0x800000000000 - 1).to_bytes(6, "big")
    assert make_time2_reader(6)(raw) == -dt.timedelta(microseconds=1)
    # TIME(0) 838:59:59
    raw = (0x800000 + (838 << 12 | 59 << 6 | 59)).to_bytes(3, "big")
    assert make_time2_reader(0)(raw) == dt.timedelta(hours=838, minutes=59, seconds=59)


def test_mysql_binary_json() -> None:
    # {"a": 1, "b": [true, "xy"]}
    arr = struct.pack("<HH", 2, 4 + 3 + 3 + 3) + bytes([4, 1, 0]) + bytes([12]) + struct.pack("<H", 10) + b"\x02xy"
    keys = b"ab"
    header = 4 + 2 * 4 + 2 * 3
    arr_off = header + len(keys)
    obj = (
        struct.pack("<HH", 2, arr_off + len(arr))
        + struct.pack("<HH", header, 1)
        + struct.pack("<HH", header + 1, 1)
        + bytes([5])
        + struct.pack("<H", 1)
        + bytes([2])
        + struct.pack("<H", arr_off)
        + keys
        + arr
    )
    assert read_mysql_json(b"\x00" + obj) == {"a": 1, "b": [True, "xy"]}
    assert read_mysql_json(b"\x0c\x03abc") == "abc"
    assert read_mysql_json(b"\x04\x00") is None


# --- row images: the NULL bitmap ----------------------------------------------------------------------------------

_T_LONG, _T_LONGLONG, _T_DOUBLE, _T_VARCHAR = 3, 8, 5, 15
_IMAGE_COLUMNS = [  # INT NOT NULL, then nullable BIGINT, DOUBLE (a run of fixed widths) and a latin1 VARCHAR(64)
    BinlogColumn(index=0, type=_T_LONG, nullable=False, name="a"),
    BinlogColumn(index=1, type=_T_LONGLONG, nullable=True, name="b"),
    BinlogColumn(index=2, type=_T_DOUBLE, nullable=True, name="c"),
    BinlogColumn(index=3, type=_T_VARCHAR, nullable=True, length=64, collation=8, name="d"),
]
_ROWS_OF_IMAGE = st.lists(
    st.tuples(
        st.integers(-(2**31), 2**31 - 1),
        st.none() | st.integers(-(2**63), 2**63 - 1),
        st.none() | st.floats(allow_nan=False),
        st.none() | st.text(st.characters(codec="ascii"), max_size=64),
    ),
    min_size=1,
    max_size=20,
)


def _image(row: tuple[Any, ...], padding: int) -> bytes:
    """One after image as a server writes it: the NULL bitmap (``padding`` in its bits past the last column), then
    the values of the columns that are not NULL."""
    nulls = sum(1 << i for i, value in enumerate(row) if value is None) | padding << len(row)
    out = bytes([nulls])
    formats = ("<i", "<q", "<d")
    for value, fmt in zip(row[:3], formats, strict=True):
        if value is not None:
            out += struct.pack(fmt, value)
    if row[3] is not None:
        text = row[3].encode("ascii")
        out += bytes([len(text)]) + text
    return out


@given(_ROWS_OF_IMAGE, st.integers(0, 15))
def test_rows_read_the_same_whatever_bits_the_null_bitmap_holds_past_its_columns(
    rows: list[tuple[Any, ...]], padding: int
) -> None:
    """MySQL and MariaDB set the bitmap's bits past the last column (pack_row starts from all ones); the decoder
    masks them off so that a row without NULLs takes the fast path (its runs of fixed-width columns read in one
    unpack), and a NULL in the last column is still read as NULL."""
    table = TableDecoder(TableMapInfo(1, "s", "t", _IMAGE_COLUMNS, has_names=True))
    decode = table.decoder("w", bytes([0b1111]))  # every column in the image
    body = b"".join(_image(row, padding) for row in rows)
    decoded = decode(table.schema, body, 0, len(body))
    assert decoded.before is None
    assert list(decoded.after or ()) == rows
