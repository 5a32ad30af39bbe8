"""Row images decoded column by column (canal.parse.mysql.decoder.ColumnarGen) against the object decoder.

Random row images of every column form -- text in UTF-8 and latin1 (ASCII or not, valid or not), DATETIME2 of every
fsp (zero, invalid and impossible dates among them), DECIMALs (corrupt groups among them), NULLs anywhere -- are
decoded both ways: the rows' ``before`` / ``after`` tuples are the object decoder's, and the typed batch built of
them (canal.lake.forms.typed_batch) is the one built of the object decoder's rows, value for value and error for error.
Against a real server: tests/test_columnar_rows_mariadb.py.
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("pyarrow")

from canal.errors import ParseError
from canal.lake.forms.typed_batch import entries_to_typed
from canal.lake.forms.typed_layout import TypedChangeError
from canal.parse.mysql.decoder import BinlogColumn, TableDecoder, TableMapInfo
from canal.parse.mysql.packed_decimal import decimal_size
from canal.protocol import ColumnarRows, Entry, EntryType, EventType, Header, RowChange, Rows

T_LONG, T_DOUBLE, T_LONGLONG, T_VARCHAR, T_DATETIME2, T_NEWDECIMAL, T_ENUM, T_BLOB, T_STRING = (
    3, 5, 8, 15, 18, 246, 247, 252, 254,
)  # fmt: skip
_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def _lenenc_text(prefix: int) -> Callable[[bytes], bytes]:
    return lambda raw: len(raw).to_bytes(prefix, "little") + raw


def _datetime2(fsp: int, parts: tuple[int, int, int, int, int, int, int]) -> bytes:
    y, mo, d, h, mi, s, us = parts
    fbytes = (fsp + 1) // 2
    ip = ((y * 13 + mo) << 22) | (d << 17) | (h << 12) | (mi << 6) | s
    frac = us // (0, 10_000, 100, 1)[fbytes] if fbytes else 0
    return (((ip + 0x80_0000_0000) << (8 * fbytes)) | frac).to_bytes(5 + fbytes, "big")


def _decimal(precision: int, scale: int, unscaled: int) -> bytes:
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
def _column(draw: st.DrawFn, index: int) -> tuple[BinlogColumn, st.SearchStrategy[bytes]]:
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
            return col(T_VARCHAR, length=length, collation=collation), _TEXT_BYTES.map(_lenenc_text(length // 256 + 1))
        return col(T_BLOB, length=2, collation=collation), _TEXT_BYTES.map(_lenenc_text(2))
    if kind == "blob":
        return col(T_BLOB, length=2, collation=63), st.binary(max_size=10).map(_lenenc_text(2))
    if kind == "datetime":
        fsp = draw(st.integers(0, 6))
        return col(T_DATETIME2, fsp=fsp), _DATE_PARTS.map(lambda parts: _datetime2(fsp, parts))
    if kind == "decimal":
        precision, scale = draw(st.sampled_from([(12, 2), (5, 0), (18, 9), (10, 10), (9, 4), (30, 5)]))
        size = decimal_size(precision, scale)
        good = st.integers(-(10**precision) + 1, 10**precision - 1).map(lambda v: _decimal(precision, scale, v))
        return col(T_NEWDECIMAL, precision=precision, scale=scale), good | st.binary(min_size=size, max_size=size)
    labels = ("new", "paid", "shipped")
    return col(T_ENUM, length=1, collation=8, labels=labels), st.integers(0, 4).map(lambda v: bytes([v]))


@st.composite
def _events(draw: st.DrawFn) -> list[tuple[list[BinlogColumn], str, bytes, int]]:
    """Rows events of one or two tables: per event its columns (the first the key), kind, rows' bytes (every column
    in both images) and row count. Events of one table share a layout: a batch's INSERTs, UPDATEs and DELETEs of it
    are typed together, the images an event has not (an INSERT's before) spread among those it has."""
    out = []
    for _table in range(draw(st.integers(1, 2))):
        drawn = [draw(_column(i)) for i in range(draw(st.integers(1, 6)))]
        columns = [c for c, _ in drawn]
        columns[0].is_key = True

        def image(drawn: list[tuple[BinlogColumn, st.SearchStrategy[bytes]]] = drawn) -> bytes:
            cells = [None if c.nullable and draw(st.integers(0, 4)) == 0 else draw(cell) for c, cell in drawn]
            nulls = sum(1 << i for i, cell in enumerate(cells) if cell is None)
            nulls |= ((1 << (8 * ((len(cells) + 7) // 8))) - 1) ^ ((1 << len(cells)) - 1)  # the servers' padding
            return nulls.to_bytes((len(cells) + 7) // 8, "little") + b"".join(c for c in cells if c is not None)

        for _event in range(draw(st.integers(1, 3))):
            kind = draw(st.sampled_from("wud"))
            n = draw(st.integers(1, 6))
            body = b"".join(image() + (image() if kind == "u" else b"") for _ in range(n))
            out.append((columns, kind, body, n))
    return draw(st.permutations(out))


_EVENT_TYPES = {"w": EventType.INSERT, "u": EventType.UPDATE, "d": EventType.DELETE}


def _entry(rows: Rows, kind: str, offset: int) -> Entry:
    et = _EVENT_TYPES[kind]
    header = Header("mysql-bin.000001", offset, schema="s", table="t", event_type=et)
    return Entry(header, EntryType.ROWDATA, RowChange(et, rows, table=rows.table))


def _outcome(fn: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", fn()
    except (TypedChangeError, ParseError, ValueError, UnicodeError) as exc:
        return "error", f"{type(exc).__name__}: {exc}"


def _typed(entries: list[Entry], zero_dates: Any, collect: bool, keys_only: bool) -> Any:
    typed = entries_to_typed(entries, "d", 1, zero_dates=zero_dates, collect_errors=collect, before_keys_only=keys_only)
    return typed.changes, typed.images, typed.errors


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_events(), st.sampled_from(["error", "null"]), st.booleans(), st.booleans())
def test_columns_give_the_object_decoders_images_and_typed_batches(
    events: list[tuple[list[BinlogColumn], str, bytes, int]], zero_dates: Any, collect: bool, keys_only: bool
) -> None:
    by_object: list[Entry] = []
    by_column: list[Entry] = []
    refused = False
    for offset, (columns, kind, body, n) in enumerate(events):
        table = TableDecoder(TableMapInfo(1, "s", "t", columns, has_names=True))
        present = bytes([0xFF]) * ((len(columns) + 7) // 8)
        columnar = table.decoder(kind, present, present if kind == "u" else b"", columnar=True)(
            table.schema, body, 0, len(body)
        )
        assert isinstance(columnar, ColumnarRows)
        assert len(columnar) == n
        try:
            objects = table.decoder(kind, present, present if kind == "u" else b"")(table.schema, body, 0, len(body))
        except ValueError:  # a cell the object decoder refuses (corrupt bytes): columns refuse it where it is read
            refused = True
            refusal = _outcome(lambda rows=columnar: (rows.before, rows.after))
            assert refusal[0] == "error" and refusal[1].startswith("ParseError: a row of s.t holds a cell")
            by_column.append(_entry(columnar, kind, 4 + offset))
            continue
        assert columnar.before == objects.before
        assert columnar.after == objects.after
        by_object.append(_entry(objects, kind, 4 + offset))
        # a fresh decoding: the typed batch is built from the columns, not from the tuples made above
        again = table.decoder(kind, present, present if kind == "u" else b"", columnar=True)(
            table.schema, body, 0, len(body)
        )
        by_column.append(_entry(again, kind, 4 + offset))
    if refused:
        # every cell converted: the refused one is a typed error; with the before images' keys only, a refused
        # cell of another column of a before image is one nobody reads
        got = _outcome(lambda: _typed(by_column, zero_dates, collect, False))
        assert got[0] == "error" and got[1].startswith("TypedChangeError")
        if keys_only:
            got = _outcome(lambda: _typed(by_column, zero_dates, collect, True))
            assert got[0] == "ok" or got[1].startswith("TypedChangeError")
        return
    expected = _outcome(lambda: _typed(by_object, zero_dates, collect, keys_only))
    got = _outcome(lambda: _typed(by_column, zero_dates, collect, keys_only))
    assert got[0] == expected[0]
    if expected[0] == "ok":
        assert got[1][0].equals(expected[1][0])
        assert got[1][1].keys() == expected[1][1].keys()
        assert all(got[1][1][key].equals(images) for key, images in expected[1][1].items())
        assert got[1][2] == expected[1][2]
