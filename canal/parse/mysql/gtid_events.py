"""The GTIDs binlog event bodies carry, as text: MySQL's GTID event (:func:`mysql_gtid`) and its tagged form of
MySQL 8.3+ (:func:`mysql_tagged_gtid`, a ``mysql::serialization`` message), and MariaDB's GTID list
(:func:`mariadb_gtid_list`). :class:`~canal.parse.mysql.binlog.EventDecoder` builds the events around them.

Each reads ``buf[pos:end]`` (the event body) and raises ``ValueError`` on bytes that do not decode, which the event
decoder turns into a :class:`~canal.errors.ParseError` naming the event.
"""

from __future__ import annotations

import struct
import uuid

from canal.gtid import GTID_TAG

__all__ = ["mariadb_gtid_list", "mysql_gtid", "mysql_tagged_gtid"]

_U32 = struct.Struct("<I")


def mysql_gtid(b: bytes, p: int, end: int) -> str:
    """``uuid:number`` of a MySQL GTID event body."""
    # flags, the source UUID, the transaction number; logical clock and timestamps after them
    if end - p < 25:
        raise ValueError(f"a GTID event body of {end - p} bytes")
    sid_text = str(uuid.UUID(bytes=bytes(b[p + 1 : p + 17])))
    (gno,) = struct.unpack_from("<q", b, p + 17)
    if gno < 1:
        raise ValueError(f"GTID number {gno}")
    return f"{sid_text}:{gno}"


def mysql_tagged_gtid(b: bytes, p: int, end: int) -> str:
    """``uuid:tag:number`` (``uuid:number`` untagged) of a MySQL 8.3+ tagged GTID event body."""
    # a mysql::serialization message whose first fields are the flags, the source UUID (16 one-byte integers), the
    # transaction number and the tag; the fields after them are not needed
    _version, p = _varlen(b, p, end)
    _size, p = _varlen(b, p, end)
    _last_non_ignorable, p = _varlen(b, p, end)
    p = _serialized_field(b, p, end, 0)
    _flags, p = _varlen(b, p, end)
    p = _serialized_field(b, p, end, 1)
    raw = bytearray()
    for _ in range(16):
        byte, p = _varlen(b, p, end)
        if byte > 0xFF:
            raise ValueError("tagged GTID UUID byte over 255")
        raw.append(byte)
    source = uuid.UUID(bytes=bytes(raw))
    p = _serialized_field(b, p, end, 2)
    gno, p = _varlen(b, p, end, signed=True)
    if gno < 1:
        raise ValueError(f"GTID number {gno}")
    p = _serialized_field(b, p, end, 3)
    n, p = _varlen(b, p, end)
    if n > 32 or p + n > end:
        raise ValueError(f"a GTID tag of {n} bytes")
    tag = bytes(b[p : p + n]).decode("ascii")
    if tag and not GTID_TAG.fullmatch(tag):
        raise ValueError(f"malformed GTID tag {tag!r}")
    return f"{source}:{tag.lower()}:{gno}" if tag else f"{source}:{gno}"


def mariadb_gtid_list(b: bytes, p: int, end: int) -> str:
    """The ``domain-server-sequence`` GTIDs of a MariaDB GTID list event body, comma-separated."""
    (count,) = _U32.unpack_from(b, p)
    count &= 0x0FFFFFFF
    p += 4
    if p + 16 * count > end:
        raise ValueError(f"a GTID list of {count} entries in {end - p} bytes")
    parts = []
    for _ in range(count):
        domain, server, seq = struct.unpack_from("<IIQ", b, p)
        p += 16
        parts.append(f"{domain}-{server}-{seq}")
    return ",".join(parts)


def _varlen(buf: bytes, pos: int, end: int, *, signed: bool = False) -> tuple[int, int]:
    """One mysql::serialization variable-length integer: the count of trailing 1 bits of the first byte, plus one,
    is its length in bytes (1-9); the value follows those bits, little-endian. Signed values keep the sign in the
    lowest bit."""
    if pos >= end:
        raise ValueError("a serialized integer runs past the event")
    first = buf[pos]
    size = 1
    while size < 9 and first >> (size - 1) & 1:
        size += 1
    if pos + size > end:
        raise ValueError("a serialized integer runs past the event")
    if size == 9:
        value = int.from_bytes(buf[pos + 1 : pos + 9], "little")
    else:
        value = (first >> size) | int.from_bytes(buf[pos + 1 : pos + size], "little") << (8 - size)
    if signed:
        value = ~(value >> 1) if value & 1 else value >> 1
    return value, pos + size


def _serialized_field(buf: bytes, pos: int, end: int, want: int) -> int:
    """Past the id of the next field of a mysql::serialization message, which must be ``want``."""
    got, pos = _varlen(buf, pos, end)
    if got != want:
        raise ValueError(f"serialized field {got} where field {want} was due")
    return pos
