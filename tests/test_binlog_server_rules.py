"""What each server version writes differently, on events built byte by byte from the documented layouts
(:mod:`mysql8_events`), read through the decoder the sources use.

* MySQL 8.4 (and every 9.x) announces a post-header length of 0 for the v1 rows events it no longer writes;
* the table map's optional metadata lists count columns per server: MySQL 9 counts VECTOR columns in the
  COLUMN_CHARSET list, MariaDB (10.5 on) GEOMETRY columns, and the SIGNEDNESS bitmap has a bit for YEAR in MySQL
  8.0.23 and later and in MariaDB, none in MySQL 8.0.20 -- a decoder that counts otherwise shifts every later column;
* HEARTBEAT_LOG_EVENT_V2 (MySQL 8.0.26 on) ends its fields with a lone end marker byte.

The private MariaDB checks the MariaDB rules on real events in :mod:`test_decode_mariadb_metadata`.
"""

from __future__ import annotations

import struct
from typing import Any

import mysql8_events as M
import pytest
from mysql_wire import event_packets, serving

from canal.errors import ParseError
from canal.parse.events import FormatDescriptionEvent, HeartbeatEvent, RowsEvent, TableMapEvent
from canal.parse.mysql import EventDecoder, MysqlBinlogSource
from canal.parse.mysql import packets as P
from canal.parse.mysql.decoder import metadata_rules
from canal.parse.source import DumpRequest

T_LONG, T_YEAR, T_BLOB, T_VECTOR, T_JSON, T_GEOMETRY = 3, 13, 252, 242, 245, 255
UTF8MB4, BINARY = 45, 63


def _decoder(version: str) -> EventDecoder:
    decoder = EventDecoder("binlog.000001", verify_checksum=True)
    fde = decoder.parse(M.fde(version=version))
    assert isinstance(fde, FormatDescriptionEvent) and fde.server_version == version
    return decoder


def _parse(decoder: EventDecoder, type_code: int, body: bytes, log_pos: int = 1000) -> Any:
    return decoder.parse(M.event(type_code, body, log_pos))


@pytest.mark.parametrize("version", ["8.4.0", "8.4.3", "9.0.1", "9.6.0"])
def test_mysql_84_and_later_format_descriptions_are_read(version: str) -> None:
    decoder = _decoder(version)
    table = M.table_map(70, "shop", "t", [("id", T_LONG, b"", False)])
    _parse(decoder, P.TABLE_MAP_EVENT, table)
    rows = _parse(decoder, P.WRITE_ROWS_EVENT_V2, M.rows_v2(70, 1, b"\x00" + struct.pack("<i", 7)), 2000)
    assert isinstance(rows, RowsEvent) and [r.after for r in rows.rows] == [(7,)]


def test_a_v1_rows_event_from_a_server_that_announced_none_is_a_parse_error() -> None:
    decoder = _decoder("8.4.0")
    _parse(decoder, P.TABLE_MAP_EVENT, M.table_map(70, "shop", "t", [("id", T_LONG, b"", False)]))
    body = (70).to_bytes(6, "little") + b"\x01\x00" + M.lenenc(1) + b"\x01" + b"\x00" + struct.pack("<i", 7)
    with pytest.raises(ParseError, match="v1 rows event"):
        _parse(decoder, P.WRITE_ROWS_EVENT_V1, body, 2000)


def test_a_text_column_after_a_vector_keeps_its_charset_on_mysql_9() -> None:
    # MySQL 9 lists a collation for every VECTOR column (binary) before the TEXT's: both are blobs to the server
    decoder = _decoder("9.0.1")
    columns = [("id", T_LONG, b"", False), ("v", T_VECTOR, b"\x04", False), ("note", T_BLOB, b"\x02", True)]
    _parse(decoder, P.TABLE_MAP_EVENT, M.table_map(71, "ml", "items", columns, column_charsets=[BINARY, UTF8MB4]))
    text = "ok 😀".encode()
    image = b"\x00" + struct.pack("<i", 1) + M.blob(struct.pack("<2f", 1.5, -2.0)) + M.blob(text, 2)
    rows = _parse(decoder, P.WRITE_ROWS_EVENT_V2, M.rows_v2(71, 3, image), 2000)
    assert [r.after for r in rows.rows] == [(1, [1.5, -2.0], "ok 😀")]
    assert rows.table.columns[2].mysql_type == "text"


def test_a_json_and_a_text_column_after_a_geometry_keep_their_charsets_on_mariadb() -> None:
    # MariaDB lists the GEOMETRY column's (binary) collation in COLUMN_CHARSET; its JSON is a LONGTEXT
    decoder = _decoder("10.5.15-MariaDB-log")
    columns = [
        ("id", T_LONG, b"", False),
        ("g", T_GEOMETRY, b"\x04", True),
        ("doc", T_BLOB, b"\x04", True),
        ("note", T_BLOB, b"\x02", True),
    ]
    table = M.table_map(72, "geo", "places", columns, column_charsets=[BINARY, UTF8MB4, UTF8MB4])
    _parse(decoder, P.TABLE_MAP_EVENT, table)
    image = b"\x02" + struct.pack("<i", 1) + M.blob('{"a": "é"}'.encode(), 4) + M.blob("ünï".encode(), 2)
    rows = _parse(decoder, P.WRITE_ROWS_EVENT_V2, M.rows_v2(72, 4, image), 2000)
    assert [r.after for r in rows.rows] == [(1, None, '{"a": "é"}', "ünï")]


@pytest.mark.parametrize(
    ("version", "year_has_a_bit"),
    [("8.0.20", False), ("8.0.39", True), ("8.4.0", True), ("9.6.0", True), ("10.5.15-MariaDB", True)],
)
def test_an_unsigned_int_after_a_year_stays_unsigned(version: str, year_has_a_bit: bool) -> None:
    decoder = _decoder(version)
    columns = [("id", T_LONG, b"", False), ("y", T_YEAR, b"", True), ("big", T_LONG, b"", True)]
    # signed id, then YEAR's own bit where the server writes one (MySQL writes 0, MariaDB 1), then big: unsigned
    bits = [False, version.endswith("MariaDB"), True] if year_has_a_bit else [False, True]
    _parse(decoder, P.TABLE_MAP_EVENT, M.table_map(73, "shop", "t", columns, signedness=bits))
    image = b"\x00" + struct.pack("<i", -1) + bytes([124]) + struct.pack("<I", 3_000_000_000)
    rows = _parse(decoder, P.WRITE_ROWS_EVENT_V2, M.rows_v2(73, 3, image), 2000)
    assert [r.after for r in rows.rows] == [(-1, 2024, 3_000_000_000)]
    assert [c.unsigned for c in rows.table.columns] == [False, False, True]  # YEAR declares no sign


def test_metadata_rules_follow_flavour_and_version() -> None:
    assert T_YEAR not in metadata_rules("8.0.20").signed
    assert T_YEAR in metadata_rules("8.0.23").signed and T_YEAR in metadata_rules("10.11.6-MariaDB-log").signed
    assert T_VECTOR not in metadata_rules("8.4.3").character and T_VECTOR in metadata_rules("9.0.1").character
    assert T_GEOMETRY in metadata_rules("10.5.15-MariaDB").character
    assert T_GEOMETRY not in metadata_rules("9.6.0").character
    assert T_JSON not in metadata_rules("8.0.39").character


def test_table_maps_read_again_after_a_format_description_of_another_server() -> None:
    # a table map body seen under one server's rules must not be reused under another's (the decoder caches maps)
    columns = [("id", T_LONG, b"", False), ("y", T_YEAR, b"", True), ("big", T_LONG, b"", True)]
    body = M.table_map(74, "shop", "t", columns, signedness=[False, False, True])
    decoder = _decoder("8.0.39")
    _parse(decoder, P.TABLE_MAP_EVENT, body)
    assert isinstance(decoder.parse(M.fde(version="8.0.20")), FormatDescriptionEvent)
    table_map = _parse(decoder, P.TABLE_MAP_EVENT, body)
    assert isinstance(table_map, TableMapEvent)
    # under 8.0.20's rules the third bit belongs to nobody: big is the second numeric column, whose bit is 0
    assert [c.unsigned for c in table_map.table_schema.columns] == [False, False, False]


def test_heartbeat_v2_stops_at_its_end_marker() -> None:
    decoder = _decoder("8.0.39")
    name = b"binlog.000008"
    body = bytes([1, len(name)]) + name + bytes([2, 3, 0xFC]) + struct.pack("<H", 1234) + b"\x00"
    heartbeat = decoder.parse(M.event(P.HEARTBEAT_LOG_EVENT_V2, body, 0))
    assert isinstance(heartbeat, HeartbeatEvent)
    assert (heartbeat.log_file, heartbeat.offset) == ("binlog.000008", 1234)


def test_a_mysql_84_server_is_captured_through_the_network_source() -> None:
    rotate = M.event(P.ROTATE_EVENT, struct.pack("<Q", 4) + b"binlog.000001", 0, flags=P.LOG_EVENT_ARTIFICIAL_F)
    columns = [("id", T_LONG, b"", False), ("big", T_LONG, b"", True)]
    table = M.table_map(70, "shop", "t", columns, signedness=[False, True])
    rows = M.rows_v2(70, 2, b"\x00" + struct.pack("<i", 1) + struct.pack("<I", 3_000_000_000))
    dump = [rotate, M.fde(version="8.4.3"), M.event(P.TABLE_MAP_EVENT, table, 300)]
    dump.append(M.event(P.WRITE_ROWS_EVENT_V2, rows, 400))
    with serving(event_packets(dump), version="8.4.3-log") as server:
        source = MysqlBinlogSource(server.address, "u", "p", schema_fallback=False, read_timeout=5.0)
        try:
            events = list(source.dump(DumpRequest("binlog.000001", 4, blocking=False)))
        finally:
            source.close()
        queries = " ".join(server.queries)
    written = [r.after for ev in events if isinstance(ev, RowsEvent) for r in ev.rows]
    assert written == [(1, 3_000_000_000)]
    # the 8.0.26+ names of the dump's session variables, beside the old ones MariaDB still needs
    assert "@source_binlog_checksum" in queries and "@master_binlog_checksum" in queries
    assert "@replica_uuid" in queries
