"""The event parser on hand-built MySQL-format events (paths a MariaDB server never produces): v2 rows events with
extra data, MySQL GTID and previous-GTIDs events, heartbeat v2, checksum verification, unsupported events, a query
event's status variables in MySQL's order and codes; MariaDB's START_ENCRYPTION_EVENT as a server sends it and as it
lies on disk."""

from __future__ import annotations

import struct
import uuid
import zlib

import pytest

from canal.errors import EncryptedBinlogError, ParseError
from canal.gtid import decode_mysql_gtid_set, encode_mysql_gtid_set
from canal.parse.events import (
    GtidEvent,
    GtidSetEvent,
    HeartbeatEvent,
    IgnoredEvent,
    QueryEvent,
    RowsEvent,
    StartEncryptionEvent,
    TableMapEvent,
)
from canal.parse.mysql import EventDecoder
from canal.parse.mysql import packets as P
from canal.protocol import EventType

SID = uuid.UUID("3e11fa47-71ca-11e1-9e33-c80aa9429562")


def _event(type_code: int, body: bytes, log_pos: int, *, checksum: bool = False, flags: int = 0) -> bytes:
    size = 19 + len(body) + (4 if checksum else 0)
    raw = struct.pack("<IBIIIH", 1_700_000_000, type_code, 7, size, log_pos, flags) + body
    return raw + struct.pack("<I", zlib.crc32(raw)) if checksum else raw


def _lenenc_str(s: bytes) -> bytes:
    return bytes([len(s)]) + s


def _table_map(table_id: int) -> bytes:
    # id INT UNSIGNED NOT NULL (primary key), name VARCHAR(10) utf8mb4 NULL
    meta = struct.pack("<H", 40)
    optional = (
        bytes([1, 1, 0b10000000])  # signedness: the first numeric column is unsigned
        + bytes([2, 1, 45])  # default charset utf8mb4_general_ci
        + bytes([4, 8])
        + _lenenc_str(b"id")
        + _lenenc_str(b"name")
        + bytes([8, 1, 0])  # simple primary key: column 0
    )
    return (
        table_id.to_bytes(6, "little")
        + b"\x01\x00"
        + _lenenc_str(b"shop")
        + b"\x00"
        + _lenenc_str(b"orders")
        + b"\x00"
        + bytes([2, 3, 15])
        + bytes([len(meta)])
        + meta
        + bytes([0b10])
        + optional
    )


def _rows_v2(table_id: int, rows: list[tuple[int, bytes | None]]) -> bytes:
    body = table_id.to_bytes(6, "little") + b"\x01\x00"  # STMT_END_F
    body += struct.pack("<H", 2 + 3) + b"\x00\x01\x00"  # extra data: length (self-inclusive) + 3 bytes
    body += bytes([2, 0b11])
    for id_, name in rows:
        body += bytes([0b10 if name is None else 0])
        body += struct.pack("<I", id_)
        if name is not None:
            body += bytes([len(name)]) + name
    return body


def test_mysql_events() -> None:
    parser = EventDecoder("binlog.000007", verify_checksum=True, checksum=True)
    tm = parser.parse(_event(P.TABLE_MAP_EVENT, _table_map(91), 200, checksum=True))
    assert isinstance(tm, TableMapEvent) and tm.offset == 200 - tm.length
    cols = tm.table_schema.columns
    assert [c.name for c in cols] == ["id", "name"] and cols[0].is_key and cols[0].unsigned
    assert cols[0].mysql_type == "int(10) unsigned" and cols[1].mysql_type == "varchar(10)"
    rows = parser.parse(
        _event(P.WRITE_ROWS_EVENT_V2, _rows_v2(91, [(4294967295, "é".encode()), (1, None)]), 300, checksum=True)
    )
    assert isinstance(rows, RowsEvent) and rows.event_type is EventType.INSERT and rows.end_of_statement
    assert [r.after for r in rows.rows] == [(4294967295, "é"), (1, None)]

    gtid_body = b"\x01" + SID.bytes + struct.pack("<Q", 42) + b"\x02" + bytes(16)
    gtid = parser.parse(_event(P.GTID_LOG_EVENT, gtid_body, 400, checksum=True))
    assert isinstance(gtid, GtidEvent) and gtid.gtid == f"{SID}:42" and not gtid.mariadb

    gtid_set = f"{SID}:1-41:43"
    prev = parser.parse(_event(P.PREVIOUS_GTIDS_LOG_EVENT, encode_mysql_gtid_set(gtid_set), 500, checksum=True))
    assert isinstance(prev, GtidSetEvent) and prev.gtid_set == gtid_set

    hb_body = bytes([1, 13]) + b"binlog.000008" + bytes([2, 3, 0xFC]) + struct.pack("<H", 1234)
    hb = parser.parse(_event(P.HEARTBEAT_LOG_EVENT_V2, hb_body, 0, checksum=True))
    assert isinstance(hb, HeartbeatEvent) and hb.log_file == "binlog.000008" and hb.offset == 1234

    other = parser.parse(_event(P.INTVAR_EVENT, b"\x02" + bytes(8), 600, checksum=True))
    assert isinstance(other, IgnoredEvent) and other.type_code == P.INTVAR_EVENT


def test_corrupt_checksum_and_unsupported_events_raise() -> None:
    parser = EventDecoder("binlog.000001", checksum=True, verify_checksum=True)
    raw = bytearray(_event(P.XID_EVENT, struct.pack("<Q", 5), 100, checksum=True))
    raw[20] ^= 0xFF
    with pytest.raises(ParseError, match="checksum mismatch"):
        parser.parse(bytes(raw))
    with pytest.raises(ParseError, match="no table map"):
        parser.parse(_event(P.WRITE_ROWS_EVENT_V2, _rows_v2(5, [(1, b"x")]), 300, checksum=True))


NONCE = bytes(range(12))


def _start_encryption(scheme: int = 1, key_version: int = 3, nonce: bytes = NONCE) -> bytes:
    return bytes([scheme]) + struct.pack("<I", key_version) + nonce


def test_a_start_encryption_event_is_read_when_the_server_decrypted_the_stream() -> None:
    """A server flags it ignorable in a dump, whose events after it it decrypted; so does a file saved from a dump."""
    parser = EventDecoder("binlog.000001", checksum=True, verify_checksum=True)
    flagged = _event(P.START_ENCRYPTION_EVENT, _start_encryption(), 296, checksum=True, flags=P.LOG_EVENT_IGNORABLE_F)
    ev = parser.parse(flagged)
    assert isinstance(ev, StartEncryptionEvent) and isinstance(ev, IgnoredEvent)
    assert (ev.offset, ev.next_offset, ev.scheme, ev.key_version, ev.nonce) == (256, 296, 1, 3, NONCE)
    assert NONCE.hex() not in repr(ev)
    # the position the dump started at, when it started inside the file: the server sends it with no position
    artificial = _event(P.START_ENCRYPTION_EVENT, _start_encryption(), 0, checksum=True, flags=P.LOG_EVENT_IGNORABLE_F)
    parser.position = 368
    ev = parser.parse(artificial)
    assert (ev.offset, ev.next_offset, ev.length) == (368, 368, 0)


def test_an_encrypted_file_is_a_typed_stop() -> None:
    """Unflagged, as the server writes it to disk: the events after it are ciphertext."""
    parser = EventDecoder("binlog.000001", checksum=True, verify_checksum=True)
    with pytest.raises(
        EncryptedBinlogError,
        match=r"START_ENCRYPTION_EVENT at binlog\.000001:256: this binlog file "
        r"is encrypted \(encrypt_binlog=ON, key version 3\).*through the server",
    ) as caught:
        parser.parse(_event(P.START_ENCRYPTION_EVENT, _start_encryption(), 296, checksum=True))
    assert caught.value.key_version == 3
    assert parser.position == 4  # nothing read past it


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (_start_encryption(scheme=2), "encryption scheme 2"),
        (_start_encryption()[:-1], "16 bytes of body, not 17"),
        (_start_encryption() + b"\x00", "18 bytes of body, not 17"),
    ],
    ids=["scheme", "short", "long"],
)
def test_a_malformed_start_encryption_event_is_a_parse_error(body: bytes, message: str) -> None:
    parser = EventDecoder("binlog.000001", checksum=True, verify_checksum=True)
    flags = P.LOG_EVENT_IGNORABLE_F
    with pytest.raises(ParseError, match=rf"malformed START_ENCRYPTION_EVENT at binlog\.000001:\d+: {message}"):
        parser.parse(_event(P.START_ENCRYPTION_EVENT, body, 296, checksum=True, flags=flags))


def test_gtid_set_encoding_round_trips() -> None:
    text = "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7,4e11fa47-71ca-11e1-9e33-c80aa9429562:10"
    assert decode_mysql_gtid_set(encode_mysql_gtid_set(text)) == text


def _query_event(status: bytes, sql: str = "ALTER TABLE t MODIFY c TIMESTAMP") -> bytes:
    return struct.pack("<IIBHH", 7, 0, 4, 0, len(status)) + status + b"shop\x00" + sql.encode()


def test_query_status_variables_give_the_time_zone_and_the_start_microseconds() -> None:
    """MySQL 8 writes flags2, sql_mode, the catalog, auto-increment, charsets, the time zone, the databases it
    updated and its own codes; MariaDB adds the start's microseconds (128) and an xid (129). A code the reader does
    not know ends the reading; a value running past the variables' end is a ParseError."""
    parser = EventDecoder("binlog.000001")
    mysql = (
        b"\x00" + bytes(4)  # Q_FLAGS2_CODE
        + b"\x01" + bytes(8)  # Q_SQL_MODE_CODE
        + b"\x06" + _lenenc_str(b"std")  # Q_CATALOG_NZ_CODE
        + b"\x03" + bytes(4)  # Q_AUTO_INCREMENT
        + b"\x04" + bytes(6)  # Q_CHARSET_CODE
        + b"\x05" + _lenenc_str(b"Europe/Berlin")  # Q_TIME_ZONE_CODE
        + b"\x0b" + _lenenc_str(b"root") + _lenenc_str(b"localhost")  # Q_INVOKER
        + b"\x0c\x02shop\x00crm\x00"  # Q_UPDATED_DB_NAMES
        + b"\x10\x01" + b"\x12" + bytes(2)  # explicit_defaults_for_timestamp, utf8mb4 collation
    )  # fmt: skip
    event = parser.parse(_event(P.QUERY_EVENT, _query_event(mysql), 1000))
    assert isinstance(event, QueryEvent)
    assert (event.sql, event.schema, event.time_zone, event.micros) == (
        "ALTER TABLE t MODIFY c TIMESTAMP", "shop", "Europe/Berlin", None
    )  # fmt: skip
    mariadb = b"\x05" + _lenenc_str(b"+05:00") + b"\x80" + (972055).to_bytes(3, "little") + b"\x81" + bytes(8)
    event = parser.parse(_event(P.QUERY_EVENT, _query_event(mariadb + b"\x0e" + bytes(8)), 2000))
    assert isinstance(event, QueryEvent) and (event.time_zone, event.micros) == ("+05:00", 972055)
    none = parser.parse(_event(P.QUERY_EVENT, _query_event(b"\x00" + bytes(4)), 3000))
    assert isinstance(none, QueryEvent) and (none.time_zone, none.micros) == (None, None)
    with pytest.raises(ParseError, match="QUERY_EVENT"):
        parser.parse(_event(P.QUERY_EVENT, _query_event(b"\x05\x30+05:00"), 4000))
