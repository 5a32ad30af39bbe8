"""Compressed binlog content: MariaDB's zlib-compressed query and rows events (:func:`mariadb_uncompress`), the
values of MariaDB's compressed columns (:func:`mariadb_column_value`), and MySQL 8's compressed transactions
(``TRANSACTION_PAYLOAD_EVENT``): the payload event's header (:func:`transaction_payload`) and the raw events its
payload holds, inflated as they are read (:func:`payload_events`). :class:`~canal.parse.mysql.binlog.EventDecoder`
decodes the events these give.

Malformed content raises ``ValueError`` (or ``zlib.error`` / ``zstandard.ZstdError``), which the event decoder turns
into a :class:`~canal.errors.ParseError` naming the event; what the event decoder would refuse by name (an unknown
compression header or type) raises ``ParseError`` here.
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Iterator
from typing import Any, BinaryIO

import zstandard

from canal.errors import ParseError
from canal.parse.events import TransactionPayloadEvent
from canal.parse.mysql import packets as P
from canal.parse.mysql.packets import read_lenenc

__all__ = [
    "PAYLOAD_NONE",
    "PAYLOAD_ZSTD",
    "mariadb_column_value",
    "mariadb_uncompress",
    "payload_events",
    "transaction_payload",
]

_U32 = struct.Struct("<I")
PAYLOAD_ZSTD, PAYLOAD_NONE = 0, 255  # a compressed transaction's compression types
_CHUNK = 1 << 20  # decompressed payload is read in pieces: memory follows the bytes that really exist


def mariadb_uncompress(buf: bytes, where: str) -> bytes:
    """A MariaDB compressed binlog payload: a header byte (0x80 | algorithm << 4 | length bytes), the uncompressed
    length big-endian, then the zlib stream."""
    head = buf[0]
    if not head & 0x80 or (head >> 4) & 0x07 != 0 or not 1 <= head & 0x07 <= 4:
        raise ParseError(f"unknown MariaDB binlog compression header 0x{head:02x} in event at {where}")
    lenlen = head & 0x07
    size = int.from_bytes(buf[1 : 1 + lenlen], "big")
    try:
        # max_length: never inflate past the declared size (a corrupt stream cannot claim more memory than that)
        inflater = zlib.decompressobj()
        data = inflater.decompress(buf[1 + lenlen :], size + 1)
    except zlib.error as e:
        raise ParseError(f"corrupt compressed event at {where}: {e}") from None
    if len(data) != size:
        raise ParseError(f"compressed event at {where} inflates to {len(data)}+ bytes, expected {size}")
    return data


_ZLIB_METHOD = 8  # the one compression method of MariaDB's column compression (its compression_methods[8])


def mariadb_column_value(stored: bytes, limit: int) -> bytes:
    """The value of a MariaDB compressed column (``VARCHAR/TEXT/BLOB ... COMPRESSED``, binlog types 141 and 140) from
    the bytes a row image holds for it: nothing for an empty value; else a header byte, whose high nibble names the
    method (0: the value follows as it is; 8: zlib), and for zlib, in its low bits, how many bytes of the value's
    length follow (big-endian, 1-4) and (bit 3) a raw deflate stream rather than a zlib one. ``limit`` is the most
    bytes the column holds; ``ValueError`` for anything else (corrupt bytes: the server stores no other form)."""
    if not stored:
        return b""
    head = stored[0]
    method = head >> 4
    if method == 0:  # stored as it is (shorter than column_compression_threshold, or not smaller compressed)
        return bytes(stored[1:])
    if method != _ZLIB_METHOD:
        raise ValueError(f"compressed column header 0x{head:02x}: no compression method {method}")
    lenlen = head & 0x07
    if not 1 <= lenlen <= 4 or len(stored) < 1 + lenlen:
        raise ValueError(f"compressed column header 0x{head:02x} with {len(stored)} bytes")
    size = int.from_bytes(stored[1 : 1 + lenlen], "big")
    if size > limit:
        raise ValueError(f"a compressed column value of {size} bytes, the column holds {limit}")
    inflater = zlib.decompressobj(-zlib.MAX_WBITS if head & 0x08 else zlib.MAX_WBITS)
    try:
        data = inflater.decompress(stored[1 + lenlen :], size + 1)  # never more than it declares (+1: too long)
    except zlib.error as e:
        raise ValueError(f"corrupt compressed column value: {e}") from None
    if len(data) != size or not inflater.eof:
        raise ValueError(f"a compressed column value inflates to {len(data)} bytes, {size} declared")
    return data


def transaction_payload(b: bytes, p: int, end: int, where: str) -> tuple[int, bytes, int]:
    """The compression type, the payload and its uncompressed size of the ``TRANSACTION_PAYLOAD_EVENT`` body
    ``b[p:end]`` (the event at ``where``)."""
    # a header of (type, length, value) fields, each a length-encoded integer, up to an end mark (type 0)
    compression, size, uncompressed = PAYLOAD_NONE, None, None
    while True:
        field, p = read_lenenc(b, p)
        if field == 0:
            break
        length, p = read_lenenc(b, p)
        if p + length > end:
            raise ValueError(f"payload header field {field} overruns the event")
        if field in (1, 2, 3):
            value, after = read_lenenc(b, p)
            if after != p + length:
                raise ValueError(f"payload header field {field} is {after - p} bytes, declared {length}")
            if field == 1:
                size = value
            elif field == 2:
                compression = value
            else:
                uncompressed = value
        p += length  # an unknown field: skipped, as MySQL does
    payload = bytes(b[p:end])
    if size is not None and size != len(payload):
        raise ValueError(f"the payload is {len(payload)} bytes, its header says {size}")
    if compression not in (PAYLOAD_ZSTD, PAYLOAD_NONE):
        raise ParseError(
            f"compressed transaction at {where} uses compression type {compression}; pycanal reads zstd (0) and none "
            "(255)"
        )
    if compression == PAYLOAD_NONE:
        uncompressed = len(payload)
    if uncompressed is None:
        raise ValueError("a zstd payload without its uncompressed size")
    return compression, payload, uncompressed


def payload_events(payload: TransactionPayloadEvent) -> Iterator[bytes]:
    """The raw events (header and body, no checksum) of a compressed transaction, one at a time, decompressed as they
    are read; ``ValueError`` when the payload does not hold whole events filling exactly its declared size."""
    reader: BinaryIO | Any
    if payload.compression == PAYLOAD_ZSTD:
        reader = zstandard.ZstdDecompressor().stream_reader(payload.payload, read_across_frames=True)
    else:
        reader = io.BytesIO(payload.payload)
    left = payload.uncompressed_size
    while True:
        header = _read_exact(reader, P.EVENT_HEADER_LEN)
        if not header:
            break
        if len(header) < P.EVENT_HEADER_LEN:
            raise ValueError("the payload ends inside an event header")
        size = _U32.unpack_from(header, 9)[0]
        if not P.EVENT_HEADER_LEN <= size <= left:
            raise ValueError(f"an inner event of {size} bytes with {left} bytes of payload left")
        body = _read_exact(reader, size - P.EVENT_HEADER_LEN)
        if len(body) < size - P.EVENT_HEADER_LEN:
            raise ValueError("the payload ends inside an event")
        left -= size
        yield header + body
    if left:
        raise ValueError(f"the payload holds {left} bytes fewer than it declares")


def _read_exact(reader: Any, n: int) -> bytes:
    """Up to ``n`` bytes from a (decompressing) reader, fewer only at its end; read in pieces so that a declared
    size never allocates more than the bytes that arrive."""
    parts = []
    left = n
    while left:
        piece = reader.read(min(left, _CHUNK))
        if not piece:
            break
        parts.append(piece)
        left -= len(piece)
    return b"".join(parts)
