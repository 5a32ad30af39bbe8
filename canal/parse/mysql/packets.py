"""Wire-level helpers shared by the binlog parser and the replication connection: the packet layer, length-encoded
integers, replication command packets, GTID-set encoding (classic and MySQL 8.3's tagged form), event type codes.

Formats follow the MySQL client/server protocol and binlog documentation (and MariaDB's KB for its additions).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable

from canal.gtid import encode_mysql_gtid_set

# --- commands ---------------------------------------------------------------------------------------------------
COM_BINLOG_DUMP = 0x12
COM_REGISTER_SLAVE = 0x15
COM_BINLOG_DUMP_GTID = 0x1E

BINLOG_DUMP_NON_BLOCK = 0x01
BINLOG_SEND_ANNOTATE_ROWS_EVENT = 0x02  # MariaDB
BINLOG_THROUGH_GTID = 0x04  # MySQL COM_BINLOG_DUMP_GTID

MARIA_SLAVE_CAPABILITY_GTID = 4

# --- event types --------------------------------------------------------------------------------------------------
UNKNOWN_EVENT = 0
START_EVENT_V3 = 1
QUERY_EVENT = 2
STOP_EVENT = 3
ROTATE_EVENT = 4
INTVAR_EVENT = 5
LOAD_EVENT = 6
SLAVE_EVENT = 7
CREATE_FILE_EVENT = 8
APPEND_BLOCK_EVENT = 9
EXEC_LOAD_EVENT = 10
DELETE_FILE_EVENT = 11
NEW_LOAD_EVENT = 12
RAND_EVENT = 13
USER_VAR_EVENT = 14
FORMAT_DESCRIPTION_EVENT = 15
XID_EVENT = 16
BEGIN_LOAD_QUERY_EVENT = 17
EXECUTE_LOAD_QUERY_EVENT = 18
TABLE_MAP_EVENT = 19
PRE_GA_WRITE_ROWS_EVENT = 20
PRE_GA_UPDATE_ROWS_EVENT = 21
PRE_GA_DELETE_ROWS_EVENT = 22
WRITE_ROWS_EVENT_V1 = 23
UPDATE_ROWS_EVENT_V1 = 24
DELETE_ROWS_EVENT_V1 = 25
INCIDENT_EVENT = 26
HEARTBEAT_LOG_EVENT = 27
IGNORABLE_LOG_EVENT = 28
ROWS_QUERY_LOG_EVENT = 29
WRITE_ROWS_EVENT_V2 = 30
UPDATE_ROWS_EVENT_V2 = 31
DELETE_ROWS_EVENT_V2 = 32
GTID_LOG_EVENT = 33
ANONYMOUS_GTID_LOG_EVENT = 34
PREVIOUS_GTIDS_LOG_EVENT = 35
TRANSACTION_CONTEXT_EVENT = 36
VIEW_CHANGE_EVENT = 37
XA_PREPARE_LOG_EVENT = 38
PARTIAL_UPDATE_ROWS_EVENT = 39
TRANSACTION_PAYLOAD_EVENT = 40
HEARTBEAT_LOG_EVENT_V2 = 41
GTID_TAGGED_LOG_EVENT = 42
# MariaDB
ANNOTATE_ROWS_EVENT = 160
BINLOG_CHECKPOINT_EVENT = 161
MARIADB_GTID_EVENT = 162
MARIADB_GTID_LIST_EVENT = 163
START_ENCRYPTION_EVENT = 164
QUERY_COMPRESSED_EVENT = 165
WRITE_ROWS_COMPRESSED_EVENT_V1 = 166
UPDATE_ROWS_COMPRESSED_EVENT_V1 = 167
DELETE_ROWS_COMPRESSED_EVENT_V1 = 168
WRITE_ROWS_COMPRESSED_EVENT = 169
UPDATE_ROWS_COMPRESSED_EVENT = 170
DELETE_ROWS_COMPRESSED_EVENT = 171

EVENT_HEADER = struct.Struct("<IBIIIH")  # timestamp, type, server_id, event_size, log_pos, flags
EVENT_HEADER_LEN = 19
LOG_EVENT_ARTIFICIAL_F = 0x20
LOG_EVENT_IGNORABLE_F = 0x80  # a replica that does not know the event type may skip it
BINLOG_MAGIC = b"\xfebin"
MAX_EVENT_SIZE = 1 << 30  # max_allowed_packet's ceiling: no server sends a larger event to a replica

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")

EVENT_NAMES = {
    code: name
    for name, code in list(globals().items())
    if re.fullmatch(r"[A-Z][A-Z0-9_]*_EVENT(?:_V\d)?", name) and isinstance(code, int)
}


def event_name(type_code: int) -> str:
    """The event type's constant name for messages (``WRITE_ROWS_EVENT_V2``), or ``event type 123``."""
    return EVENT_NAMES.get(type_code) or f"event type {type_code}"


def read_lenenc(buf: bytes, pos: int) -> tuple[int, int]:
    """A length-encoded integer at ``pos``: (value, position after it). ``ValueError`` for the NULL (0xFB) and error
    (0xFF) prefixes, ``IndexError`` when the buffer ends inside the integer."""
    first = buf[pos]
    if first < 0xFB:
        return first, pos + 1
    width = _LENENC_WIDTH.get(first)
    if width is None:
        raise ValueError(f"bad length-encoded integer prefix 0x{first:02x} at {pos}")
    if pos + 1 + width > len(buf):
        raise IndexError(f"length-encoded integer at {pos} runs past its buffer")
    return int.from_bytes(buf[pos + 1 : pos + 1 + width], "little"), pos + 1 + width


_LENENC_WIDTH = {0xFC: 2, 0xFD: 3, 0xFE: 8}


def register_slave_packet(server_id: int, host: str, user: str, port: int) -> bytes:
    """COM_REGISTER_SLAVE payload (without the command byte). No password is sent."""
    h = host.encode()[:255]
    u = user.encode()[:255]
    return (
        _U32.pack(server_id)
        + bytes([len(h)])
        + h
        + bytes([len(u)])
        + u
        + b"\x00"  # password: never sent
        + _U16.pack(port & 0xFFFF)
        + _U32.pack(0)  # replication rank
        + _U32.pack(0)  # master id
    )


def binlog_dump_packet(file: str, position: int, server_id: int, flags: int) -> bytes:
    """COM_BINLOG_DUMP payload (without the command byte)."""
    return struct.pack("<IHI", position & 0xFFFFFFFF, flags, server_id) + file.encode()


def binlog_dump_gtid_packet(server_id: int, gtid_set: str, flags: int) -> bytes:
    """COM_BINLOG_DUMP_GTID payload (without the command byte): dump everything not in ``gtid_set``."""
    data = encode_mysql_gtid_set(gtid_set)
    return (
        struct.pack("<HII", flags | BINLOG_THROUGH_GTID, server_id, 0)  # flags, server id, empty file name
        + _U64.pack(4)
        + _U32.pack(len(data))
        + data
    )


# --- the client/server packet layer --------------------------------------------------------------------------------

MAX_PACKET_CHUNK = 0xFFFFFF  # a payload this long continues in the next packet


def read_packet(read: Callable[[int], bytes], seq: int, limit: int = MAX_EVENT_SIZE + 1) -> tuple[bytes, int]:
    """One logical packet of the client/server protocol: (payload, the sequence id the next packet must carry).

    ``read(n)`` returns exactly ``n`` bytes or raises (pymysql's ``Connection._read_bytes``). Payloads of 16 MiB - 1
    continue in the next packet and are joined. ``ValueError`` when a packet carries another sequence id than ``seq``
    (the stream lost its framing) or the joined payload would exceed ``limit`` bytes; memory is bounded by ``limit``
    and by what actually arrived, never by a declared length alone.
    """
    parts: list[bytes] = []
    total = 0
    while True:
        header = read(4)
        length = header[0] | header[1] << 8 | header[2] << 16
        if header[3] != seq:
            raise ValueError(f"packet sequence id {header[3]} where {seq} was due")
        seq = (seq + 1) & 0xFF
        total += length
        if total > limit:
            raise ValueError(f"a packet of more than {limit} bytes")
        parts.append(read(length) if length else b"")
        if length < MAX_PACKET_CHUNK:
            break
    data = parts[0] if len(parts) == 1 else b"".join(parts)
    return bytes(data), seq


def parse_error_packet(data: bytes) -> tuple[int, str]:
    """An ERR packet (0xFF, error code, optional ``#`` + SQL state, message) as (code, message); a packet too short
    to hold a code is reported as a protocol error (2027, CR_MALFORMED_PACKET)."""
    if len(data) < 3:
        return 2027, f"malformed error packet {data.hex()}"
    (code,) = _U16.unpack_from(data, 1)
    text = data[9:] if data[3:4] == b"#" else data[3:]
    return code, text.decode("utf-8", "replace")
