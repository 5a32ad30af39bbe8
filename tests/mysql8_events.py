"""MySQL 8/9 binlog events built byte by byte, for the formats no server installable here writes.

Debian ships MariaDB only and nothing can be downloaded at test time, so these builders follow MySQL's documented
layouts (libbinlogevents ``binlog_event.h``, ``control_events.h``, ``rows_event.h``; ``json_binary.h``;
``json_diff.cc``; the transaction payload codec ``codecs/binary.cpp``; the ``mysql::serialization`` format of
tagged GTID events). They are the tests' own encoders, independent of the decoder they check.
"""

from __future__ import annotations

import datetime as dt
import struct
import uuid
import zlib
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import zstandard

from canal.parse.mysql import packets as P
from canal.protocol import JsonOpaque

SERVER_ID = 8
TS = 1_760_000_000

# the post-header lengths MySQL 8.0 announces, indexed by event type - 1
_POST_HEADERS = [
    56, 13, 0, 8, 0, 18, 0, 4, 4, 4, 4, 18, 0, 0, 95, 0, 4, 26, 8, 0, 0, 0, 8, 8, 8, 2, 0, 0, 0, 10, 10, 10,
    42, 42, 0, 18, 52, 0, 10, 0, 0, 42,
]  # fmt: skip


def lenenc(n: int) -> bytes:
    if n < 0xFB:
        return bytes([n])
    if n < 1 << 16:
        return b"\xfc" + struct.pack("<H", n)
    if n < 1 << 24:
        return b"\xfd" + struct.pack("<I", n)[:3]
    return b"\xfe" + struct.pack("<Q", n)


def event(type_code: int, body: bytes, log_pos: int, *, checksum: bool = True, flags: int = 0) -> bytes:
    """A v4 event: 19-byte header, body, CRC32 when the stream has checksums."""
    size = 19 + len(body) + (4 if checksum else 0)
    raw = struct.pack("<IBIIIH", TS, type_code, SERVER_ID, size, log_pos, flags) + body
    return raw + struct.pack("<I", zlib.crc32(raw)) if checksum else raw


def fde(*, checksum: bool = True, version: str = "8.0.36") -> bytes:
    """MySQL 8's format description event (always with the algorithm byte and a CRC32, "FD is always
    checksummed"). From 8.4 on the removed v1 rows events (types 23-25) announce a post-header length of 0."""
    posts = list(_POST_HEADERS)
    if tuple(int(x) for x in version.split("-")[0].split(".")[:2]) >= (8, 4):
        posts[22:25] = [0, 0, 0]
    body = struct.pack("<H", 4) + version.encode().ljust(50, b"\x00") + struct.pack("<I", TS) + bytes([19])
    body += bytes(posts) + bytes([1 if checksum else 0])
    size = 19 + len(body) + 4
    raw = struct.pack("<IBIIIH", TS, P.FORMAT_DESCRIPTION_EVENT, SERVER_ID, size, 4 + size, 0) + body
    return raw + struct.pack("<I", zlib.crc32(raw))


def query(sql: str, schema: str = "shop") -> bytes:
    """A QUERY_EVENT body (no status variables)."""
    return struct.pack("<IIBHH", 7, 0, len(schema), 0, 0) + schema.encode() + b"\x00" + sql.encode()


def xid(n: int) -> bytes:
    return struct.pack("<Q", n)


def table_map(
    table_id: int,
    schema: str,
    table: str,
    columns: Sequence[tuple[str, int, bytes, bool]],
    *,
    primary_key: Sequence[int] = (0,),
    collation: int | None = None,
    signedness: Sequence[bool] | None = None,
    column_charsets: Sequence[int] | None = None,
) -> bytes:
    """A TABLE_MAP body: ``columns`` are (name, binlog type, type metadata, nullable), with FULL optional metadata
    (column names, the primary key, and ``collation`` as the character columns' default: 63 makes BLOBs binary).
    ``signedness`` is the SIGNEDNESS bitmap's bits (most significant first) and ``column_charsets`` the
    COLUMN_CHARSET list, one entry per column the writing server counts (the caller decides which)."""
    types = bytes(t for _, t, _, _ in columns)
    meta = b"".join(m for _, _, m, _ in columns)
    nulls = 0
    for i, (_, _, _, nullable) in enumerate(columns):
        nulls |= nullable << i
    names = b"".join(lenenc(len(n.encode())) + n.encode() for n, _, _, _ in columns)
    keys = b"".join(lenenc(i) for i in primary_key)
    optional = bytes([4]) + lenenc(len(names)) + names + bytes([8]) + lenenc(len(keys)) + keys
    if collation is not None:
        optional += bytes([2]) + lenenc(len(lenenc(collation))) + lenenc(collation)
    if signedness is not None:
        bits = 0
        for i, flag in enumerate(signedness):
            bits |= flag << (7 - i % 8) << (8 * (i // 8))
        bitmap = bits.to_bytes((len(signedness) + 7) // 8, "little")
        optional += bytes([1]) + lenenc(len(bitmap)) + bitmap
    if column_charsets is not None:
        ids = b"".join(lenenc(c) for c in column_charsets)
        optional += bytes([3]) + lenenc(len(ids)) + ids
    return (
        table_id.to_bytes(6, "little")
        + b"\x01\x00"
        + bytes([len(schema)])
        + schema.encode()
        + b"\x00"
        + bytes([len(table)])
        + table.encode()
        + b"\x00"
        + lenenc(len(columns))
        + types
        + lenenc(len(meta))
        + meta
        + nulls.to_bytes((len(columns) + 7) // 8, "little")
        + optional
    )


def rows_v2(
    table_id: int,
    ncols: int,
    images: bytes,
    *,
    update: bool = False,
    present: Sequence[int] | None = None,
    present_after: Sequence[int] | None = None,
) -> bytes:
    """A v2 rows event body with every column present in both images, or (a partial row image:
    ``binlog_row_image`` MINIMAL / NOBLOB) the columns ``present`` in the (before) image and ``present_after`` in an
    update's after image."""

    def bitmap(columns: Sequence[int] | None) -> bytes:
        bits = (1 << ncols) - 1 if columns is None else sum(1 << i for i in columns)
        return bits.to_bytes((ncols + 7) // 8, "little")

    return (
        table_id.to_bytes(6, "little")
        + b"\x01\x00"  # STMT_END_F
        + struct.pack("<H", 2)  # no extra data
        + lenenc(ncols)
        + bitmap(present)
        + (bitmap(present_after) if update else b"")
        + images
    )


def blob(value: bytes, length_bytes: int = 4) -> bytes:
    return len(value).to_bytes(length_bytes, "little") + value


# -- MySQL binary JSON --------------------------------------------------------------------------------------------


def json_doc(value: Any, *, large: bool = False) -> bytes:
    """A binary JSON document (type byte + value) as MySQL's serializer lays it out."""
    t, data = _json_value(value, large)
    return bytes([t]) + data


def _varlen(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _json_value(value: Any, large: bool) -> tuple[int, bytes]:
    if isinstance(value, dict):
        return _json_container(value, True, large)
    if isinstance(value, list):
        return _json_container(value, False, large)
    if value is None:
        return 4, b"\x00"
    if value is True:
        return 4, b"\x01"
    if value is False:
        return 4, b"\x02"
    if isinstance(value, int):
        if -(1 << 15) <= value < 1 << 15:
            return 5, struct.pack("<h", value)
        if 0 <= value < 1 << 16:
            return 6, struct.pack("<H", value)
        if -(1 << 31) <= value < 1 << 31:
            return 7, struct.pack("<i", value)
        if 0 <= value < 1 << 32:
            return 8, struct.pack("<I", value)
        if -(1 << 63) <= value < 1 << 63:
            return 9, struct.pack("<q", value)
        return 10, struct.pack("<Q", value)
    if isinstance(value, float):
        return 11, struct.pack("<d", value)
    if isinstance(value, str):
        data = value.encode()
        return 12, _varlen(len(data)) + data
    if isinstance(value, Decimal):
        return 15, _opaque(246, _packed_decimal(value))
    if isinstance(value, dt.datetime):
        return 15, _opaque(12, struct.pack("<q", _packed_datetime(value)))
    if isinstance(value, dt.date):
        return 15, _opaque(10, struct.pack("<q", _packed_datetime(dt.datetime(value.year, value.month, value.day))))
    if isinstance(value, dt.timedelta):
        return 15, _opaque(11, struct.pack("<q", _packed_time(value)))
    if isinstance(value, JsonOpaque):
        return 15, _opaque(value.field_type, value.data)
    raise TypeError(type(value))


def _opaque(field_type: int, data: bytes) -> bytes:
    return bytes([field_type]) + _varlen(len(data)) + data


def _json_container(value: dict[str, Any] | list[Any], is_object: bool, large: bool) -> tuple[int, bytes]:
    w = 4 if large else 2
    fmt = "<I" if large else "<H"
    items = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
    count = len(items)
    header = 2 * w + count * ((w + 2 if is_object else 0) + 1 + w)
    keys = b""
    key_entries = b""
    if is_object:
        offset = header
        for k, _ in items:
            kb = str(k).encode()
            key_entries += struct.pack(fmt, offset) + struct.pack("<H", len(kb))
            keys += kb
            offset += len(kb)
    value_entries = b""
    values = b""
    base = header + len(keys)
    inline = {4, 5, 6} | ({7, 8} if large else set())
    for _, v in items:
        t, data = _json_value(v, large)
        if t in inline:
            value_entries += bytes([t]) + data.ljust(w, b"\x00")
        else:
            value_entries += bytes([t]) + struct.pack(fmt, base + len(values))
            values += data
    size = header + len(keys) + len(values)
    body = struct.pack(fmt, count) + struct.pack(fmt, size) + key_entries + value_entries + keys + values
    return (1 if large else 0) if is_object else (3 if large else 2), body


def _packed_decimal(value: Decimal) -> bytes:
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    scale = max(-exponent, 0)
    text = "".join(map(str, digits)).rjust(scale + 1, "0")
    int_part, frac = text[: len(text) - scale], text[len(text) - scale :]
    precision = len(int_part) + scale
    dig2bytes = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
    out = bytearray()
    lead = len(int_part) % 9
    if lead:
        out += int(int_part[:lead]).to_bytes(dig2bytes[lead], "big")
    for i in range(lead, len(int_part), 9):
        out += int(int_part[i : i + 9]).to_bytes(4, "big")
    for i in range(0, scale - scale % 9, 9):
        out += int(frac[i : i + 9]).to_bytes(4, "big")
    if scale % 9:
        out += int(frac[scale - scale % 9 :]).to_bytes(dig2bytes[scale % 9], "big")
    out[0] ^= 0x80
    if sign:
        out = bytearray(b ^ 0xFF for b in out)
    return bytes([precision, scale]) + bytes(out)


def _packed_datetime(value: dt.datetime) -> int:
    ymd = ((value.year * 13 + value.month) << 5) | value.day
    hms = (value.hour << 12) | (value.minute << 6) | value.second
    return (((ymd << 17) | hms) << 24) + value.microsecond


def _packed_time(value: dt.timedelta) -> int:
    neg = value < dt.timedelta(0)
    value = abs(value)
    seconds = value.days * 86400 + value.seconds
    h, rest = divmod(seconds, 3600)
    mi, s = divmod(rest, 60)
    packed = (((h << 12) | (mi << 6) | s) << 24) + value.microseconds
    return -packed if neg else packed


# -- partial JSON updates -------------------------------------------------------------------------------------------

REPLACE, INSERT, REMOVE = 0, 1, 2


def json_diff(*diffs: tuple[int, str, Any]) -> bytes:
    """A ``Json_diff_vector`` as written in a partial update's after image: a 4-byte length, then per diff the
    operation byte, the path (length-encoded) and, except for REMOVE, the value (length-encoded binary JSON)."""
    body = b""
    for op, path, value in diffs:
        body += bytes([op]) + lenenc(len(path.encode())) + path.encode()
        if op != REMOVE:
            doc = json_doc(value)
            body += lenenc(len(doc)) + doc
    return struct.pack("<I", len(body)) + body


# -- compressed transactions -----------------------------------------------------------------------------------------


def transaction_payload(inner: Sequence[bytes], *, compression: str = "zstd") -> bytes:
    """A TRANSACTION_PAYLOAD_EVENT body: type/length/value header fields (each a length-encoded integer, in MySQL's
    order: compression type, uncompressed size, payload size), the end mark, the compressed inner events (which
    carry no checksums)."""
    raw = b"".join(inner)
    payload = zstandard.ZstdCompressor(level=3).compress(raw) if compression == "zstd" else raw
    fields = b""
    code = 0 if compression == "zstd" else 255
    fields += lenenc(2) + lenenc(len(lenenc(code))) + lenenc(code)
    if compression == "zstd":
        fields += lenenc(3) + lenenc(len(lenenc(len(raw)))) + lenenc(len(raw))
    fields += lenenc(1) + lenenc(len(lenenc(len(payload)))) + lenenc(len(payload))
    return fields + lenenc(0) + payload


# -- GTIDs ---------------------------------------------------------------------------------------------------------


def gtid_body(source: uuid.UUID, gno: int) -> bytes:
    """A MySQL 8.0 GTID_LOG_EVENT body with its logical clock, commit timestamps, transaction length and server
    versions after the GTID itself."""
    body = b"\x01" + source.bytes + struct.pack("<q", gno)
    body += b"\x02" + struct.pack("<qq", 41, 42)  # logical timestamps: last_committed, sequence_number
    body += (1_760_000_000_000_000 | 1 << 55).to_bytes(7, "little")  # immediate commit ts, original one follows
    body += (1_760_000_000_000_000).to_bytes(7, "little")
    body += lenenc(1234)  # transaction length
    body += struct.pack("<I", 80036 | 1 << 31) + struct.pack("<I", 80036)  # server versions
    return body


def varlen_unsigned(n: int) -> bytes:
    """mysql::serialization's variable-length unsigned integer."""
    bits = n.bit_length()
    size = ((bits * 575) >> 12) + 1
    if size == 9:
        return b"\xff" + n.to_bytes(8, "little")
    first = ((1 << (size - 1)) - 1) | ((n << size) & 0xFF)
    rest = (n >> (8 - size)).to_bytes(size - 1, "little") if size > 1 else b""
    return bytes([first]) + rest


def varlen_signed(n: int) -> bytes:
    return varlen_unsigned((n << 1) if n >= 0 else (((-(n + 1)) << 1) | 1))


def tagged_gtid_body(source: uuid.UUID, tag: str, gno: int) -> bytes:
    """A GTID_TAGGED_LOG_EVENT body: a mysql::serialization message (version, size, last non-ignorable field,
    then id + value per field) with the fields MySQL 8.4 defines."""
    fields = [
        varlen_unsigned(0) + varlen_unsigned(1),  # gtid_flags
        varlen_unsigned(1) + b"".join(varlen_unsigned(b) for b in source.bytes),  # uuid, 16 one-byte integers
        varlen_unsigned(2) + varlen_signed(gno),
        varlen_unsigned(3) + varlen_unsigned(len(tag)) + tag.encode(),
        varlen_unsigned(4) + varlen_signed(41),  # last_committed
        varlen_unsigned(5) + varlen_signed(42),  # sequence_number
        varlen_unsigned(6) + varlen_unsigned(1_760_000_000_000_000),  # immediate_commit_timestamp
        varlen_unsigned(8) + varlen_unsigned(1234),  # transaction_length (7, the original timestamp, omitted)
        varlen_unsigned(9) + varlen_unsigned(80400),  # immediate_server_version
    ]
    payload = b"".join(fields)
    size = len(payload) + 3
    return varlen_unsigned(1) + varlen_unsigned(size) + varlen_unsigned(9) + payload
