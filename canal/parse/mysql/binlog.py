"""The binlog event parser: raw v4 events (bytes) in, normalized :mod:`canal.parse.events` out.

Shared by the network dump and local binlog files -- only the transport differs. The parser keeps the state a
binlog stream carries: the current file name, whether events end with a CRC32 checksum (from the format
description event), the post-header lengths, and the table maps by table id.
"""

from __future__ import annotations

import logging
import struct
import zlib
from collections.abc import Callable

from canal.errors import ParseError
from canal.parse.events import (
    BinlogEvent,
    FormatDescriptionEvent,
    GtidEvent,
    GtidSetEvent,
    HeartbeatEvent,
    IgnoredEvent,
    QueryEvent,
    RotateEvent,
    RowsEvent,
    TableMapEvent,
    XidEvent,
)
from canal.parse.mysql import packets as P
from canal.parse.mysql.decoder import (
    BinlogColumn,
    FallbackColumn,
    SchemaLookup,
    TableDecoder,
    parse_table_map_body,
)
from canal.parse.mysql.packets import read_lenenc
from canal.protocol import EventType
from canal.sql import read_column_type

log = logging.getLogger(__name__)

_HEADER = P.EVENT_HEADER
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_QUERY_POST = struct.Struct("<IIBHH")
_ROWS_KINDS = {
    P.WRITE_ROWS_EVENT_V1: ("w", EventType.INSERT, False),
    P.UPDATE_ROWS_EVENT_V1: ("u", EventType.UPDATE, False),
    P.DELETE_ROWS_EVENT_V1: ("d", EventType.DELETE, False),
    P.WRITE_ROWS_EVENT_V2: ("w", EventType.INSERT, True),
    P.UPDATE_ROWS_EVENT_V2: ("u", EventType.UPDATE, True),
    P.DELETE_ROWS_EVENT_V2: ("d", EventType.DELETE, True),
    # MariaDB log_bin_compress=ON: the row images are zlib-compressed
    P.WRITE_ROWS_COMPRESSED_EVENT_V1: ("w", EventType.INSERT, False),
    P.UPDATE_ROWS_COMPRESSED_EVENT_V1: ("u", EventType.UPDATE, False),
    P.DELETE_ROWS_COMPRESSED_EVENT_V1: ("d", EventType.DELETE, False),
    P.WRITE_ROWS_COMPRESSED_EVENT: ("w", EventType.INSERT, True),
    P.UPDATE_ROWS_COMPRESSED_EVENT: ("u", EventType.UPDATE, True),
    P.DELETE_ROWS_COMPRESSED_EVENT: ("d", EventType.DELETE, True),
}
_COMPRESSED_ROWS = frozenset(range(P.WRITE_ROWS_COMPRESSED_EVENT_V1, P.DELETE_ROWS_COMPRESSED_EVENT + 1))


def mariadb_uncompress(buf: bytes, where: str) -> bytes:
    """A MariaDB compressed binlog payload: a header byte (0x80 | algorithm << 4 | length bytes), the uncompressed
    length big-endian, then the zlib stream."""
    head = buf[0]
    if not head & 0x80 or (head >> 4) & 0x07 != 0:
        raise ParseError(f"unknown MariaDB binlog compression header 0x{head:02x} in event at {where}")
    lenlen = head & 0x07
    size = int.from_bytes(buf[1 : 1 + lenlen], "big")
    try:
        data = zlib.decompress(buf[1 + lenlen :])
    except zlib.error as e:
        raise ParseError(f"corrupt compressed event at {where}: {e}") from None
    if len(data) != size:
        raise ParseError(f"compressed event at {where} inflates to {len(data)} bytes, expected {size}")
    return data


_UNSUPPORTED = {
    P.TRANSACTION_PAYLOAD_EVENT: "MySQL compressed transaction payloads (binlog_transaction_compression=ON)",
    P.PARTIAL_UPDATE_ROWS_EVENT: "MySQL partial JSON updates (binlog_row_value_options=PARTIAL_JSON)",
    P.START_ENCRYPTION_EVENT: "encrypted binlog files (encrypt_binlog=ON; read them through the server instead)",
}


_LEGACY_TEMPORAL = frozenset({7, 11, 12})  # TIMESTAMP, TIME, DATETIME (pre-5.6 formats)


class EventParser:
    """Parses one binlog stream's events in order.

    ``schema_lookup`` (network sources only) supplies column names from information_schema for table maps that
    carry none (``binlog_row_metadata`` below FULL); it is consulted once per table map and warned about once per
    table.

    ``decode_rows=False`` (``DumpRequest.decode_rows``) turns table maps and rows events into
    :class:`IgnoredEvent`: the row images are never decoded nor decompressed, and table maps neither build decoders
    nor query ``schema_lookup``, since nothing will use them.
    """

    def __init__(
        self,
        log_file: str = "",
        *,
        checksum: bool = False,
        verify_checksum: bool = False,
        schema_lookup: SchemaLookup | None = None,
        decode_rows: bool = True,
    ) -> None:
        self.log_file = log_file
        self.position = 4
        self.checksum = checksum
        self.verify_checksum = verify_checksum
        self.schema_lookup = schema_lookup
        self.table_id_len = 6
        self.tables: dict[int, TableDecoder] = {}
        self._map_cache: dict[bytes, TableDecoder] = {}
        self._warned: set[tuple[str, str]] = set()
        self._rows_post = {P.WRITE_ROWS_EVENT_V1: 8, P.WRITE_ROWS_EVENT_V2: 10}
        self.server_version = ""
        self._handlers: dict[int, Callable[[bytes, int, int, int, int, int, int, int], BinlogEvent]] = {
            P.ROTATE_EVENT: self._rotate,
            P.FORMAT_DESCRIPTION_EVENT: self._fde,
            P.QUERY_EVENT: self._query,
            P.QUERY_COMPRESSED_EVENT: self._query,
            P.XID_EVENT: self._xid,
            P.TABLE_MAP_EVENT: self._table_map,
            P.GTID_LOG_EVENT: self._mysql_gtid,
            P.ANONYMOUS_GTID_LOG_EVENT: self._ignored,
            P.PREVIOUS_GTIDS_LOG_EVENT: self._previous_gtids,
            P.MARIADB_GTID_EVENT: self._mariadb_gtid,
            P.MARIADB_GTID_LIST_EVENT: self._mariadb_gtid_list,
            P.HEARTBEAT_LOG_EVENT: self._heartbeat,
            P.HEARTBEAT_LOG_EVENT_V2: self._heartbeat_v2,
        }
        for code in _ROWS_KINDS:
            self._handlers[code] = self._rows
        if not decode_rows:
            # swapping handlers leaves the per-event path of a decoding parser without any extra test
            for code in (P.TABLE_MAP_EVENT, *_ROWS_KINDS):
                self._handlers[code] = self._ignored

    # -- entry point -------------------------------------------------------------------------------------------------

    def parse(self, buf: bytes, start: int = 0) -> BinlogEvent:
        """Parse the event whose header begins at ``buf[start]`` (the buffer may hold more after it)."""
        timestamp, type_code, server_id, size, log_pos, flags = _HEADER.unpack_from(buf, start)
        end = start + size
        if type_code == P.FORMAT_DESCRIPTION_EVENT:
            # the checksum algorithm byte sits before the (possible) CRC at the end of this event
            alg = buf[end - 5] if size >= P.EVENT_HEADER_LEN + 57 + 5 else 0
            self.checksum = alg == 1
        if self.checksum:
            if self.verify_checksum:
                (crc,) = _U32.unpack_from(buf, end - 4)
                body = buf[start : end - 4]
                if type_code == P.FORMAT_DESCRIPTION_EVENT and flags & 1:
                    # the server sets LOG_EVENT_BINLOG_IN_USE_F in an open file after computing the checksum
                    body = body[:17] + bytes([body[17] & 0xFE]) + body[18:]
                if zlib.crc32(body) != crc:
                    raise ParseError(f"checksum mismatch in event at {self.log_file}:{log_pos - size}")
            end -= 4
        if log_pos and not flags & P.LOG_EVENT_ARTIFICIAL_F:
            offset = log_pos - size
            next_offset = log_pos
        else:  # artificial events (sent by the server, not in the file) occupy no bytes
            offset = next_offset = log_pos or self.position
        handler = self._handlers.get(type_code)
        if handler is None:
            if type_code in _UNSUPPORTED:
                raise ParseError(
                    f"{_UNSUPPORTED[type_code]} are not supported (event at {self.log_file}:{offset}); "
                    "turn the setting off on the server"
                )
            ev: BinlogEvent = IgnoredEvent(
                log_file=self.log_file,
                offset=offset,
                next_offset=next_offset,
                timestamp=timestamp,
                server_id=server_id,
                type_code=type_code,
            )
        else:
            ev = handler(buf, start + P.EVENT_HEADER_LEN, end, timestamp, server_id, offset, next_offset, type_code)
        if log_pos and type_code != P.ROTATE_EVENT:
            self.position = log_pos
        return ev

    # -- handlers ------------------------------------------------------------------------------------------------------

    def _ignored(self, b: bytes, p: int, end: int, ts: int, sid: int, off: int, nxt: int, t: int) -> BinlogEvent:
        return IgnoredEvent(
            log_file=self.log_file, offset=off, next_offset=nxt, timestamp=ts, server_id=sid, type_code=t
        )

    def _rotate(self, b: bytes, p: int, end: int, ts: int, sid: int, off: int, nxt: int, t: int) -> BinlogEvent:
        (position,) = _U64.unpack_from(b, p)
        name = bytes(b[p + 8 : end]).decode()
        artificial = ts == 0 or nxt == off
        if artificial:
            off = nxt = position
        ev = RotateEvent(
            log_file=name if artificial else self.log_file,
            offset=off,
            next_offset=nxt,
            timestamp=ts,
            server_id=sid,
            next_file=name,
            next_position=position,
            artificial=artificial,
        )
        self.log_file = name
        self.position = position
        return ev

    def _fde(self, b: bytes, p: int, end: int, ts: int, sid: int, off: int, nxt: int, t: int) -> BinlogEvent:
        (version,) = _U16.unpack_from(b, p)
        server_version = bytes(b[p + 2 : p + 52]).split(b"\x00", 1)[0].decode("ascii", "replace")
        header_len = b[p + 56]
        if header_len != P.EVENT_HEADER_LEN:
            raise ParseError(f"unsupported binlog event header length {header_len} (binlog v{version})")
        post = b[p + 57 : end - 1]  # the last byte is the checksum algorithm
        # post-header lengths are indexed by event type - 1
        if len(post) >= P.TABLE_MAP_EVENT:
            self.table_id_len = 4 if post[P.TABLE_MAP_EVENT - 1] == 6 else 6
        for code in (P.WRITE_ROWS_EVENT_V1, P.WRITE_ROWS_EVENT_V2):
            if len(post) >= code:
                self._rows_post[code] = post[code - 1]
        self.server_version = server_version
        self.tables.clear()
        return FormatDescriptionEvent(
            log_file=self.log_file,
            offset=off,
            next_offset=nxt,
            timestamp=ts,
            server_id=sid,
            binlog_version=version,
            server_version=server_version,
            checksum=self.checksum,
        )

    def _query(self, b: bytes, p: int, end: int, ts: int, sid: int, off: int, nxt: int, t: int) -> BinlogEvent:
        thread_id, _exec, schema_len, error_code, status_len = _QUERY_POST.unpack_from(b, p)
        p += 13 + status_len
        schema = bytes(b[p : p + schema_len]).decode("utf-8", "replace")
        p += schema_len + 1
        if t == P.QUERY_COMPRESSED_EVENT:
            sql = mariadb_uncompress(bytes(b[p:end]), f"{self.log_file}:{off}").decode("utf-8", "replace")
        else:
            sql = bytes(b[p:end]).decode("utf-8", "replace")
        return QueryEvent(
            log_file=self.log_file,
            offset=off,
            next_offset=nxt,
            timestamp=ts,
            server_id=sid,
            schema=schema,
            sql=sql,
            thread_id=thread_id,
            error_code=error_code,
        )

    def _xid(self, b: bytes, p: int, end: int, ts: int, sid: int, off: int, nxt: int, t: int) -> BinlogEvent:
        (xid,) = _U64.unpack_from(b, p)
        return XidEvent(log_file=self.log_file, offset=off, next_offset=nxt, timestamp=ts, server_id=sid, xid=xid)

    def _table_map(self, b: bytes, p: int, end: int, ts: int, sid: int, off: int, nxt: int, t: int) -> BinlogEvent:
        key = bytes(b[p:end])
        dec = self._map_cache.get(key)
        if dec is None:
            info = parse_table_map_body(key, 0, len(key), self.table_id_len)
            fallback: list[FallbackColumn] | None = None
            if not info.has_names and self.schema_lookup is not None:
                found = self.schema_lookup(info.schema, info.table)
                if found is not None and len(found) == len(info.columns):
                    fallback = list(found)
                if (info.schema, info.table) not in self._warned:
                    self._warned.add((info.schema, info.table))
                    log.warning(
                        "binlog table map of %s.%s carries no column names (binlog_row_metadata is not FULL): "
                        "names %s from information_schema now; rows written before a later DDL may get wrong "
                        "names. Set binlog_row_metadata=FULL on the server.",
                        info.schema,
                        info.table,
                        "taken" if fallback is not None else "NOT found (UNKNOWN_COLn used)",
                    )
            legacy = [c for c in info.columns if c.type in _LEGACY_TEMPORAL]
            if legacy and self.schema_lookup is not None:
                self._resolve_legacy_temporal(info.schema, info.table, legacy)
            dec = TableDecoder(info, fallback)
            if len(self._map_cache) > 4096:
                self._map_cache.clear()
            self._map_cache[key] = dec
        self.tables[dec.table_id] = dec
        return TableMapEvent(
            log_file=self.log_file,
            offset=off,
            next_offset=nxt,
            timestamp=ts,
            server_id=sid,
            table_id=dec.table_id,
            schema=dec.schema.schema,
            table=dec.schema.table,
            table_schema=dec.schema,
        )

    def _resolve_legacy_temporal(self, schema: str, table: str, legacy: list[BinlogColumn]) -> None:
        # MariaDB's pre-10.1 fractional temporal formats (mysql56_temporal_format=OFF when the column was created)
        # are logged as plain DATETIME/TIME/TIMESTAMP without their precision: take it from information_schema
        assert self.schema_lookup is not None
        found = self.schema_lookup(schema, table)
        if not found:
            return
        for c in legacy:
            if c.index < len(found):
                fsp = read_column_type(found[c.index].column_type, strict=False).fsp
                if fsp:
                    c.hires = True
                    c.fsp = fsp

    def _rows(self, b: bytes, p: int, end: int, ts: int, sid: int, off: int, nxt: int, t: int) -> BinlogEvent:
        kind, event_type, v2 = _ROWS_KINDS[t]
        tid_len = self.table_id_len
        table_id = int.from_bytes(b[p : p + tid_len], "little")
        flags = b[p + tid_len] | b[p + tid_len + 1] << 8
        p += self._rows_post[P.WRITE_ROWS_EVENT_V2 if v2 else P.WRITE_ROWS_EVENT_V1]
        if v2:
            # the extra-data block starts with its own 2-byte length (included in it)
            extra = b[p - 2] | b[p - 1] << 8
            p += extra - 2
        ncols, p = read_lenenc(b, p)
        nb = (ncols + 7) >> 3
        present = b[p : p + nb]
        p += nb
        present2 = b""
        if kind == "u":
            present2 = b[p : p + nb]
            p += nb
        dec = self.tables.get(table_id)
        if dec is None:
            raise ParseError(
                f"rows event at {self.log_file}:{off} refers to table id {table_id} with no table map before it "
                "(a dump started inside a statement?)"
            )
        if t in _COMPRESSED_ROWS:
            b = mariadb_uncompress(bytes(b[p:end]), f"{self.log_file}:{off}")
            p, end = 0, len(b)
        rows = dec.decoder(kind, bytes(present), bytes(present2))(b, p, end)
        return RowsEvent(
            log_file=self.log_file,
            offset=off,
            next_offset=nxt,
            timestamp=ts,
            server_id=sid,
            event_type=event_type,
            table_id=table_id,
            table=dec.schema,
            rows=rows,
            end_of_statement=bool(flags & 1),
        )

    def _mysql_gtid(self, b: bytes, p: int, end: int, ts: int, sid: int, off: int, nxt: int, t: int) -> BinlogEvent:
        import uuid

        sid_text = str(uuid.UUID(bytes=bytes(b[p + 1 : p + 17])))
        (gno,) = _U64.unpack_from(b, p + 17)
        return GtidEvent(
            log_file=self.log_file, offset=off, next_offset=nxt, timestamp=ts, server_id=sid, gtid=f"{sid_text}:{gno}"
        )

    def _previous_gtids(self, b: bytes, p: int, end: int, ts: int, sid: int, off: int, nxt: int, t: int) -> BinlogEvent:
        text = P.decode_mysql_gtid_set(bytes(b[p:end]))
        return GtidSetEvent(
            log_file=self.log_file, offset=off, next_offset=nxt, timestamp=ts, server_id=sid, gtid_set=text
        )

    def _mariadb_gtid(self, b: bytes, p: int, end: int, ts: int, sid: int, off: int, nxt: int, t: int) -> BinlogEvent:
        seq, domain, flags = struct.unpack_from("<QIB", b, p)
        return GtidEvent(
            log_file=self.log_file,
            offset=off,
            next_offset=nxt,
            timestamp=ts,
            server_id=sid,
            gtid=f"{domain}-{sid}-{seq}",
            mariadb=True,
            standalone=bool(flags & 1),
        )

    def _mariadb_gtid_list(
        self, b: bytes, p: int, end: int, ts: int, sid: int, off: int, nxt: int, t: int
    ) -> BinlogEvent:
        (count,) = _U32.unpack_from(b, p)
        count &= 0x0FFFFFFF
        p += 4
        parts = []
        for _ in range(count):
            domain, server, seq = struct.unpack_from("<IIQ", b, p)
            p += 16
            parts.append(f"{domain}-{server}-{seq}")
        return GtidSetEvent(
            log_file=self.log_file,
            offset=off,
            next_offset=nxt,
            timestamp=ts,
            server_id=sid,
            gtid_set=",".join(parts),
            mariadb=True,
        )

    def _heartbeat(self, b: bytes, p: int, end: int, ts: int, sid: int, off: int, nxt: int, t: int) -> BinlogEvent:
        name = bytes(b[p:end]).decode("utf-8", "replace")
        # the header's log_pos is the server's current position in that file
        return HeartbeatEvent(log_file=name, offset=nxt, next_offset=nxt, timestamp=ts, server_id=sid)

    def _heartbeat_v2(self, b: bytes, p: int, end: int, ts: int, sid: int, off: int, nxt: int, t: int) -> BinlogEvent:
        name = self.log_file
        pos = nxt
        while p < end:
            ftype = b[p]
            flen, p = read_lenenc(b, p + 1)
            if ftype == 1:
                name = bytes(b[p : p + flen]).decode("utf-8", "replace")
            elif ftype == 2:
                pos, _ = read_lenenc(b, p)
            p += flen
        return HeartbeatEvent(log_file=name, offset=pos, next_offset=pos, timestamp=ts, server_id=sid)
