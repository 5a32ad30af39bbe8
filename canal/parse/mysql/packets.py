"""Wire-level helpers shared by the binlog parser and the replication connection: length-encoded integers,
replication command packets, GTID-set encoding, event type codes.

Formats follow the MySQL client/server protocol and binlog documentation (and MariaDB's KB for its additions).
"""

from __future__ import annotations

import struct
import uuid

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
FORMAT_DESCRIPTION_EVENT = 15
XID_EVENT = 16
TABLE_MAP_EVENT = 19
WRITE_ROWS_EVENT_V1 = 23
UPDATE_ROWS_EVENT_V1 = 24
DELETE_ROWS_EVENT_V1 = 25
INCIDENT_EVENT = 26
HEARTBEAT_LOG_EVENT = 27
WRITE_ROWS_EVENT_V2 = 30
UPDATE_ROWS_EVENT_V2 = 31
DELETE_ROWS_EVENT_V2 = 32
GTID_LOG_EVENT = 33
ANONYMOUS_GTID_LOG_EVENT = 34
PREVIOUS_GTIDS_LOG_EVENT = 35
PARTIAL_UPDATE_ROWS_EVENT = 39
TRANSACTION_PAYLOAD_EVENT = 40
HEARTBEAT_LOG_EVENT_V2 = 41
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
BINLOG_MAGIC = b"\xfebin"

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


def read_lenenc(buf: bytes, pos: int) -> tuple[int, int]:
    """A length-encoded integer at ``pos``: (value, position after it)."""
    first = buf[pos]
    if first < 0xFB:
        return first, pos + 1
    if first == 0xFC:
        return buf[pos + 1] | (buf[pos + 2] << 8), pos + 3
    if first == 0xFD:
        return int.from_bytes(buf[pos + 1 : pos + 4], "little"), pos + 4
    if first == 0xFE:
        return _U64.unpack_from(buf, pos + 1)[0], pos + 9
    raise ValueError(f"bad length-encoded integer prefix 0x{first:02x} at {pos}")


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


def encode_mysql_gtid_set(gtid_set: str) -> bytes:
    """A MySQL GTID set (``uuid:1-5:7,uuid2:3``) in the binary form of COM_BINLOG_DUMP_GTID / previous-GTIDs."""
    sids: list[tuple[bytes, list[tuple[int, int]]]] = []
    for part in gtid_set.replace("\n", "").split(","):
        part = part.strip()
        if not part:
            continue
        sid, *ranges = part.split(":")
        intervals = []
        for r in ranges:
            if "-" in r:
                a, b = r.split("-", 1)
                intervals.append((int(a), int(b) + 1))
            else:
                intervals.append((int(r), int(r) + 1))
        sids.append((uuid.UUID(sid).bytes, intervals))
    out = [_U64.pack(len(sids))]
    for sid_bytes, intervals in sids:
        out.append(sid_bytes)
        out.append(_U64.pack(len(intervals)))
        for lo, hi in intervals:
            out.append(struct.pack("<qq", lo, hi))
    return b"".join(out)


def decode_mysql_gtid_set(buf: bytes, pos: int = 0) -> str:
    """The binary GTID set of a previous-GTIDs event as text."""
    (n_sids,) = _U64.unpack_from(buf, pos)
    pos += 8
    parts = []
    for _ in range(n_sids):
        sid = str(uuid.UUID(bytes=bytes(buf[pos : pos + 16])))
        pos += 16
        (n_int,) = _U64.unpack_from(buf, pos)
        pos += 8
        ranges = []
        for _ in range(n_int):
            a, b = struct.unpack_from("<qq", buf, pos)
            pos += 16
            ranges.append(str(a) if b == a + 1 else f"{a}-{b - 1}")
        parts.append(":".join([sid, *ranges]))
    return ",".join(parts)


def binlog_dump_gtid_packet(server_id: int, gtid_set: str, flags: int) -> bytes:
    """COM_BINLOG_DUMP_GTID payload (without the command byte): dump everything not in ``gtid_set``."""
    data = encode_mysql_gtid_set(gtid_set)
    return (
        struct.pack("<HII", flags | BINLOG_THROUGH_GTID, server_id, 0)  # flags, server id, empty file name
        + _U64.pack(4)
        + _U32.pack(len(data))
        + data
    )
