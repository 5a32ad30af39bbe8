"""The binlog event parser: raw v4 events (bytes) in, normalized :mod:`canal.parse.events` out.

Shared by the network dump and local binlog files -- only the transport differs. The parser keeps the state a
binlog stream carries: the current file name, whether events end with a CRC32 checksum (from the format
description event), the post-header lengths, and the table maps by table id.

Hostile or broken bytes: every event must fill exactly the bytes its transport delivered (the packet, or the file
record its header declares), its CRC32 is checked before its body is read (``verify_checksum``), and a body that does
not decode -- a length past its end, an impossible count, a row image that does not end where the event ends --
raises :class:`~canal.errors.ParseError` naming the event type, the file and the offset. No other exception type
leaves :meth:`EventDecoder.parse`, nothing is allocated beyond what the event holds, and nothing loops or recurses
without bound. With checksums verified, a corrupted event is never decoded, so no corrupted row is delivered.

Event types: an event that could carry changes pycanal cannot decode (statement-based LOAD DATA, pre-GA rows
events, incidents, any type this parser does not know unless the server flagged it ignorable) stops the dump with a
``ParseError`` naming it: never skipped while the cursor moves past it. The types ignored on purpose are listed in
:data:`canal.parse.mysql.event_types.IGNORED` with the reason. An encrypted binlog (MariaDB ``encrypt_binlog=ON``)
reads through the server, which decrypts the events and flags the ``START_ENCRYPTION_EVENT`` before them ignorable;
the same event unflagged (a file copied from the server's disk, ciphertext after it) raises
:class:`~canal.errors.EncryptedBinlogError`.

Server versions: MySQL 8.4 and later write no v1 rows events and announce a post-header length of 0 for them
(such an event is refused); the format description's server version also picks the table maps' metadata rules
(:func:`~canal.parse.mysql.decoder.metadata_rules`).

MySQL 8 compressed transactions (``TRANSACTION_PAYLOAD_EVENT``, zstd) come out of :meth:`EventDecoder.parse` whole;
the sources expand them with :meth:`EventDecoder.expand` into the events they hold. Compressed content is read by
:mod:`canal.parse.mysql.compression`, the GTIDs of GTID event bodies by :mod:`canal.parse.mysql.gtid_events`.
"""

from __future__ import annotations

import logging
import re
import struct
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence

import attrs
import zstandard

from canal.errors import EncryptedBinlogError, ParseError, SchemaError
from canal.gtid import decode_mysql_gtid_set
from canal.parse.events import (
    UNDECODED,
    BinlogEvent,
    FormatDescriptionEvent,
    GtidEvent,
    GtidSetEvent,
    HeartbeatEvent,
    IgnoredEvent,
    QueryEvent,
    RotateEvent,
    RowsEvent,
    StartEncryptionEvent,
    TableMapEvent,
    TransactionPayloadEvent,
    XidEvent,
)
from canal.parse.mysql import packets as P
from canal.parse.mysql.compression import mariadb_uncompress, payload_events, transaction_payload
from canal.parse.mysql.decoder import (
    SameColumns,
    TableDecoder,
    declare_types,
    metadata_rules,
    needs_declared_type,
    parse_table_map_body,
)
from canal.parse.mysql.event_types import COMPRESSED_ROWS, HEARTBEATS, IGNORED, REFUSED, ROWS_KINDS
from canal.parse.mysql.gtid_events import mariadb_gtid_list, mysql_gtid, mysql_tagged_gtid
from canal.parse.mysql.map_columns import (
    cross_check,
    current_columns,
    history_columns,
    resolve_legacy_temporal,
    schema_columns,
    unreadable_problem,
)
from canal.parse.mysql.packets import event_name, read_lenenc
from canal.parse.mysql.query_status import QueryStatus, read_status
from canal.parse.source import RowsForm
from canal.parse.xa import mariadb_gtid_xid
from canal.protocol import RowData, Rows
from canal.schema.history import ColumnSource, SchemaColumn

log = logging.getLogger(__name__)

_HEADER = P.EVENT_HEADER
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
# MariaDB GTID event flags: a statement outside any transaction; a group the server could roll back whole
_FL_STANDALONE = 0x01
_FL_TRANSACTIONAL = 0x04
_QUERY_POST = struct.Struct("<IIBHH")
_NO_STATUS = QueryStatus()

# Exceptions a handler raises on bytes that do not decode; parse() turns them into a ParseError naming the event.
_MALFORMED = (IndexError, KeyError, ValueError, OverflowError, struct.error, zlib.error, zstandard.ZstdError)
_MAP_CACHE_SIZE = 8192  # table layouts kept with their decoders (a schema of thousands of tables fits)
COLUMNAR_MIN_ROWS = 16
"""Rows an event must hold (estimated) to be decoded column by column when the consumer asks for columns; fewer are
decoded as tuples, which typed batches take as well (``EventDecoder._many_rows``)."""
_LEGACY_TEMPORAL = frozenset({7, 11, 12})  # TIMESTAMP, TIME, DATETIME (pre-5.6 formats)
_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")
_ENCRYPTION_BODY = 17  # scheme, key version, nonce
_ENCRYPTION_SCHEME = 1
_FDE_FIXED = 57  # binlog version, server version, create timestamp, header length
LOG_EVENT_THREAD_SPECIFIC_F = 0x04  # a query event's header flag: the statement used its session's temporary tables


def _checksum_aware(server_version: str) -> bool:
    """Whether a format description event carries the checksum algorithm byte and 4 checksum bytes: written by
    MySQL 5.6.1+ or MariaDB 5.3+ (whatever ``binlog_checksum`` says)."""
    match = _VERSION.match(server_version)
    if match is None:
        return True  # no version: a modern server
    version = tuple(int(x) for x in match.groups())
    return version >= ((5, 3, 0) if "mariadb" in server_version.lower() else (5, 6, 1))


Handler = Callable[[bytes, int, int, int, int, int, int, int], BinlogEvent]


class EventDecoder:
    """Parses one binlog stream's events in order.

    ``verify_checksum`` checks each event's CRC32 (when the stream has checksums) before its body is read.

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
        schema_lookup: ColumnSource | None = None,
        decode_rows: bool = True,
        rows_form: RowsForm | None = None,
        decode_table: Callable[[str, str], bool] | None = None,
    ) -> None:
        self.log_file = log_file
        self.rows_form = rows_form if rows_form is not None else RowsForm()
        self.decode_table = decode_table  # DumpRequest.decode_table: rows of other tables come UNDECODED
        self.position = 4
        self.checksum = checksum
        self.verify_checksum = verify_checksum
        self.schema_lookup = schema_lookup
        self.table_id_len = 6
        self.tables: dict[int, TableDecoder] = {}
        # keyed by the table map's body after the table id: a table that comes back under a new id (it left the
        # server's table_definition_cache) reuses its decoders; least recently used first
        self._map_cache: OrderedDict[bytes, TableDecoder] = OrderedDict()
        self._same_columns = SameColumns(_MAP_CACHE_SIZE)  # another table's map with those columns: shared
        self._warned: set[tuple[str, str]] = set()
        self._row_bytes: dict[int, int] = {}  # bytes a row of a table's last rows event took (its column list's id)
        self._rows_post = {P.WRITE_ROWS_EVENT_V1: 8, P.WRITE_ROWS_EVENT_V2: 10}
        self.server_version = ""
        self._metadata_rules = metadata_rules("")
        self._handlers: dict[int, Handler] = {
            P.ROTATE_EVENT: self._rotate,
            P.FORMAT_DESCRIPTION_EVENT: self._fde,
            P.QUERY_EVENT: self._query,
            P.QUERY_COMPRESSED_EVENT: self._query,
            P.EXECUTE_LOAD_QUERY_EVENT: self._execute_load_query,
            P.XID_EVENT: self._xid,
            P.TABLE_MAP_EVENT: self._table_map,
            P.GTID_LOG_EVENT: self._mysql_gtid,
            P.GTID_TAGGED_LOG_EVENT: self._mysql_tagged_gtid,
            P.PREVIOUS_GTIDS_LOG_EVENT: self._previous_gtids,
            P.MARIADB_GTID_EVENT: self._mariadb_gtid,
            P.MARIADB_GTID_LIST_EVENT: self._mariadb_gtid_list,
            P.HEARTBEAT_LOG_EVENT: self._heartbeat,
            P.HEARTBEAT_LOG_EVENT_V2: self._heartbeat_v2,
            P.TRANSACTION_PAYLOAD_EVENT: self._transaction_payload,
            P.START_ENCRYPTION_EVENT: self._start_encryption,
        }
        for code in ROWS_KINDS:
            self._handlers[code] = self._rows
        for code in IGNORED:
            self._handlers[code] = self._ignored
        if not decode_rows:
            # swapping handlers leaves the per-event path of a decoding parser without any extra test
            for code in (P.TABLE_MAP_EVENT, *ROWS_KINDS):
                self._handlers[code] = self._ignored

    # -- entry point -------------------------------------------------------------------------------------------------

    def parse(self, buf: bytes, start: int = 0) -> BinlogEvent:
        """Parse the one event that fills ``buf[start:]`` (the packet without its status byte, or the file record).

        Any failure is a :class:`ParseError` naming the event and its position (``self.position``, where the
        previous event ended, until the header's own position can be trusted).
        """
        n = len(buf) - start
        if n < P.EVENT_HEADER_LEN:
            raise ParseError(f"truncated event at {self.log_file}:{self.position}: {n} bytes, less than a header")
        timestamp, type_code, server_id, size, log_pos, flags = _HEADER.unpack_from(buf, start)
        if size != n:
            raise ParseError(
                f"{event_name(type_code)} at {self.log_file}:{self.position} declares {size} bytes but {n} arrived "
                "(a corrupt or cut event)"
            )
        end = start + size
        if type_code == P.FORMAT_DESCRIPTION_EVENT:
            end = self._fde_checksum(buf, start, end, flags)
        elif self.checksum:
            if size < P.EVENT_HEADER_LEN + 4:
                raise ParseError(f"{event_name(type_code)} at {self.log_file}:{self.position} too short for its CRC32")
            if self.verify_checksum:
                crc = _U32.unpack_from(buf, end - 4)[0]
                if zlib.crc32(memoryview(buf)[start : end - 4]) != crc:
                    raise ParseError(
                        f"checksum mismatch in {event_name(type_code)} at {self.log_file}:{self.position}: the "
                        "event is corrupt"
                    )
            end -= 4
        if log_pos and not flags & P.LOG_EVENT_ARTIFICIAL_F:
            if log_pos < size and type_code not in HEARTBEATS:  # a heartbeat's position is the server's, not its own
                raise ParseError(
                    f"{event_name(type_code)} at {self.log_file}:{self.position} ends at {log_pos}, before its own "
                    f"{size} bytes"
                )
            offset = log_pos - size
            next_offset = log_pos
        else:  # artificial events (sent by the server, not in the file) occupy no bytes
            offset = next_offset = log_pos or self.position
        try:
            handler = self._handlers.get(type_code)
            if handler is None:
                ev = self._unhandled(type_code, flags, timestamp, server_id, offset, next_offset)
            else:
                ev = handler(buf, start + P.EVENT_HEADER_LEN, end, timestamp, server_id, offset, next_offset, type_code)
        except _MALFORMED as e:
            raise ParseError(f"malformed {event_name(type_code)} at {self.log_file}:{offset}: {e}") from e
        if log_pos and type_code != P.ROTATE_EVENT:
            self.position = log_pos
        return ev

    def _fde_checksum(self, buf: bytes, start: int, end: int, flags: int) -> int:
        """A format description event says whether the events after it carry checksums; its own checksum area
        (algorithm byte + 4 bytes) is present whenever its server is checksum-aware. Returns the body's end."""
        body = start + P.EVENT_HEADER_LEN
        server_version = bytes(buf[body + 2 : body + 52]).split(b"\x00", 1)[0].decode("ascii", "replace")
        if not _checksum_aware(server_version):
            self.checksum = False
            return end
        if end - body < _FDE_FIXED + 5:
            raise ParseError(f"format description event at {self.log_file}:{self.position} is too short")
        alg = buf[end - 5]
        if alg not in (0, 1):
            raise ParseError(
                f"format description event at {self.log_file}:{self.position} names checksum algorithm {alg} "
                "(0 none and 1 CRC32 exist): a corrupt event"
            )
        self.checksum = alg == 1
        # "the FD event is always checksummed" (MySQL and MariaDB): its CRC32 is there even when the events after it
        # carry none, so a flipped algorithm byte is caught too
        if self.verify_checksum:
            raw = bytearray(buf[start : end - 4])
            # the server sets LOG_EVENT_BINLOG_IN_USE_F in an open file after computing the checksum
            raw[17] &= 0xFE
            if zlib.crc32(raw) != _U32.unpack_from(buf, end - 4)[0]:
                raise ParseError(
                    f"checksum mismatch in FORMAT_DESCRIPTION_EVENT at {self.log_file}:{self.position}: corrupt"
                )
        return end - 4

    def _unhandled(self, t: int, flags: int, ts: int, sid: int, off: int, nxt: int) -> BinlogEvent:
        if t in REFUSED:
            raise ParseError(f"{event_name(t)} at {self.log_file}:{off}: {REFUSED[t]}")
        if flags & P.LOG_EVENT_IGNORABLE_F:
            return IgnoredEvent(
                log_file=self.log_file, offset=off, next_offset=nxt, timestamp=ts, server_id=sid, type_code=t
            )
        raise ParseError(
            f"unknown binlog {event_name(t)} at {self.log_file}:{off}, not flagged ignorable: it may carry changes "
            "pycanal cannot read, so the dump stops here (is the server newer than this pycanal?)"
        )

    # -- compressed transactions -------------------------------------------------------------------------------------

    def expand(self, payload: TransactionPayloadEvent) -> Iterator[BinlogEvent]:
        """The events of a MySQL compressed transaction, decompressed as they are read (memory holds one inner
        event at a time). Inner events carry no checksum (the payload's was checked); each is placed at the payload
        (``offset``/``next_offset`` of the payload), the last -- the transaction's end -- at the payload's end, so a
        cursor after it resumes with the next event. ``ParseError`` naming the payload on any malformed content."""
        where = f"{self.log_file}:{payload.offset}"
        try:
            pending: BinlogEvent | None = None
            for raw in payload_events(payload):
                event = self._parse_inner(raw, payload)
                if pending is not None:
                    yield pending
                pending = event
            if not isinstance(pending, XidEvent | QueryEvent):
                raise ValueError("the compressed transaction does not end with its commit")
            yield attrs.evolve(pending, offset=payload.next_offset, next_offset=payload.next_offset)
        except _MALFORMED as e:
            raise ParseError(f"malformed compressed transaction (TRANSACTION_PAYLOAD_EVENT) at {where}: {e}") from e

    def _parse_inner(self, raw: bytes, payload: TransactionPayloadEvent) -> BinlogEvent:
        timestamp, t, server_id, size, _log_pos, flags = _HEADER.unpack_from(raw, 0)
        if t in (P.FORMAT_DESCRIPTION_EVENT, P.ROTATE_EVENT, P.TRANSACTION_PAYLOAD_EVENT):
            raise ValueError(f"{event_name(t)} inside a compressed transaction")
        off, nxt = payload.offset, payload.next_offset
        handler = self._handlers.get(t)
        if handler is None:
            return self._unhandled(t, flags, timestamp, server_id, off, nxt)
        return handler(raw, P.EVENT_HEADER_LEN, size, timestamp, server_id, off, nxt, t)

    def _transaction_payload(
        self, b: bytes, p: int, end: int, ts: int, sid: int, off: int, nxt: int, t: int
    ) -> BinlogEvent:
        compression, payload, uncompressed = transaction_payload(b, p, end, f"{self.log_file}:{off}")
        return TransactionPayloadEvent(
            log_file=self.log_file,
            offset=off,
            next_offset=nxt,
            timestamp=ts,
            server_id=sid,
            compression=compression,
            payload=payload,
            uncompressed_size=uncompressed,
        )

    # -- handlers ------------------------------------------------------------------------------------------------------

    def _ignored(self, b: bytes, p: int, end: int, ts: int, sid: int, off: int, nxt: int, t: int) -> BinlogEvent:
        return IgnoredEvent(
            log_file=self.log_file, offset=off, next_offset=nxt, timestamp=ts, server_id=sid, type_code=t
        )

    def _start_encryption(
        self, b: bytes, p: int, end: int, ts: int, sid: int, off: int, nxt: int, t: int
    ) -> BinlogEvent:
        # scheme (1 byte), key version (4), nonce (12): MariaDB's Start_encryption_log_event
        if end - p != _ENCRYPTION_BODY:
            raise ValueError(f"{end - p} bytes of body, not {_ENCRYPTION_BODY}")
        scheme = b[p]
        (key_version,) = _U32.unpack_from(b, p + 1)
        if scheme != _ENCRYPTION_SCHEME:
            raise ValueError(f"encryption scheme {scheme} (MariaDB writes only scheme {_ENCRYPTION_SCHEME})")
        (flags,) = _U16.unpack_from(b, p - 2)  # the header's last field, the same in a file and a payload
        if not flags & P.LOG_EVENT_IGNORABLE_F:
            # as written to disk: only a server that sends the events decrypted flags it ignorable
            raise EncryptedBinlogError(
                f"{event_name(t)} at {self.log_file}:{off}: this binlog file is encrypted (encrypt_binlog=ON, key "
                f"version {key_version}) and the events after it are ciphertext only the server can decrypt; read "
                "the binlog through the server (its master address), or save decrypted copies with "
                "mariadb-binlog --read-from-remote-server --raw",
                key_version=key_version,
            )
        return StartEncryptionEvent(
            log_file=self.log_file,
            offset=off,
            next_offset=nxt,
            timestamp=ts,
            server_id=sid,
            type_code=t,
            scheme=scheme,
            key_version=key_version,
            nonce=bytes(b[p + 5 : end]),
        )

    def _rotate(self, b: bytes, p: int, end: int, ts: int, sid: int, off: int, nxt: int, t: int) -> BinlogEvent:
        (position,) = _U64.unpack_from(b, p)
        name = bytes(b[p + 8 : end]).decode()
        if not name or position < 4:
            raise ValueError(f"rotate to {name!r}:{position}")
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
        if version != 4 or header_len != P.EVENT_HEADER_LEN:
            raise ValueError(f"unsupported binlog v{version} with {header_len}-byte event headers (v4 and 19 expected)")
        post = b[p + _FDE_FIXED : end - 1 if _checksum_aware(server_version) else end]  # minus the algorithm byte
        # post-header lengths are indexed by event type - 1
        table_id_len = self.table_id_len
        if len(post) >= P.TABLE_MAP_EVENT:
            table_id_len = 4 if post[P.TABLE_MAP_EVENT - 1] == 6 else 6
        rows_post = dict(self._rows_post)
        for code in (P.WRITE_ROWS_EVENT_V1, P.WRITE_ROWS_EVENT_V2):
            if len(post) >= code:
                rows_post[code] = post[code - 1]
        # the table id (4 or 6 bytes) and 2 flag bytes, + the 2-byte extra-data length in v2. MySQL 8.4 removed the v1
        # rows events and writes 0 as their post-header length: such a server never writes them (one that did
        # anyway is refused at that event, in _rows)
        v1 = rows_post[P.WRITE_ROWS_EVENT_V1]
        if v1 not in (0, table_id_len + 2) or rows_post[P.WRITE_ROWS_EVENT_V2] != 10:
            raise ValueError(f"rows event post-header lengths {rows_post} do not fit {table_id_len}-byte table ids")
        self.table_id_len = table_id_len
        self._rows_post = rows_post
        if server_version != self.server_version:
            self._metadata_rules = metadata_rules(server_version)
            self._map_cache.clear()  # table maps read under another server's rules
            self._same_columns.clear()
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
            created=_U32.unpack_from(b, p + 52)[0],
        )

    def _execute_load_query(
        self, b: bytes, p: int, end: int, ts: int, sid: int, off: int, nxt: int, t: int
    ) -> BinlogEvent:
        """A statement-format LOAD DATA's statement: a query event whose post-header has 13 more bytes (the file's
        id, where its name is in the text, how duplicates go). Its rows are not in the binlog; the capture judges
        the statement as DML logged as a statement."""
        return self._query(b, p, end, ts, sid, off, nxt, t, extra=13)

    def _query(
        self, b: bytes, p: int, end: int, ts: int, sid: int, off: int, nxt: int, t: int, extra: int = 0
    ) -> BinlogEvent:
        start = p
        thread_id, _exec, schema_len, error_code, status_len = _QUERY_POST.unpack_from(b, p)
        status_at = p + 13 + extra
        p = status_at + status_len
        if p + schema_len + 1 > end:
            raise ValueError("status variables and schema name overrun the event")
        # statement text is not row data: a byte the client's charset put there that is not UTF-8 is replaced
        schema = bytes(b[p : p + schema_len]).decode("utf-8", "replace")
        p += schema_len + 1
        if t == P.QUERY_COMPRESSED_EVENT:
            sql = mariadb_uncompress(bytes(b[p:end]), f"{self.log_file}:{off}").decode("utf-8", "replace")
        else:
            sql = bytes(b[p:end]).decode("utf-8", "replace")
        # the session state logged with a statement (its time zone, its start's microseconds): not of a BEGIN
        status = _NO_STATUS if sql == "BEGIN" else read_status(b, status_at, status_at + status_len)
        (flags,) = _U16.unpack_from(b, start - 2)  # the header's last field, the same in a file and a payload
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
            time_zone=status.time_zone,
            micros=status.micros,
            sql_mode=status.sql_mode,
            thread_specific=bool(flags & LOG_EVENT_THREAD_SPECIFIC_F),
            mariadb="mariadb" in self.server_version.lower() or not self.server_version,
        )

    def _xid(self, b: bytes, p: int, end: int, ts: int, sid: int, off: int, nxt: int, t: int) -> BinlogEvent:
        if end - p != 8:
            raise ValueError(f"an XID of {end - p} bytes")
        (xid,) = _U64.unpack_from(b, p)
        return XidEvent(log_file=self.log_file, offset=off, next_offset=nxt, timestamp=ts, server_id=sid, xid=xid)

    def _table_map(self, b: bytes, p: int, end: int, ts: int, sid: int, off: int, nxt: int, t: int) -> BinlogEvent:
        id_end = p + self.table_id_len
        key = bytes(b[id_end:end])
        table_id = int.from_bytes(b[p:id_end], "little")
        dec = self._map_cache.get(key)
        lookup = self.schema_lookup
        if (
            dec is not None
            and dec.lookup_version is not None
            and lookup is not None
            and dec.lookup_version != lookup.version
        ):
            dec = None  # a DDL since: the names it took may have changed
        if dec is None and (same := self._same_columns.get(b, p, end, self.table_id_len)) is not None:
            info, dec, columns_key = same  # the columns of a table seen before, under this table's name
            if lookup is not None and lookup.strict:
                cross_check(lookup, info, dec, self.log_file, off, (self._same_columns, columns_key))
            self._keep_map(key, dec)
        elif dec is None:
            info = parse_table_map_body(b, p, end, self.table_id_len, self._metadata_rules)
            fallback: list[SchemaColumn] | None = None
            problem: SchemaError | None = None
            version: int | None = None
            if not info.has_names and lookup is not None:
                version = lookup.version
                if lookup.strict:
                    fallback, problem = history_columns(lookup, info, f"{self.log_file}:{off}")
                else:
                    fallback = current_columns(lookup, info, self._warned)
            legacy = [c for c in info.columns if c.type in _LEGACY_TEMPORAL]
            if legacy and lookup is not None:
                resolve_legacy_temporal(lookup, info.schema, info.table, legacy)
            declared = lookup is not None and any(needs_declared_type(c) for c in info.columns)
            if declared and lookup is not None:
                found = fallback if fallback is not None or not info.has_names else schema_columns(lookup, info)
                if found is not None:
                    declare_types(info.columns, found)
                    version = lookup.version  # a DDL may change a declared type under the same table map
            unreadable = unreadable_problem(info, f"{self.log_file}:{off}")
            if unreadable is not None:
                problem = unreadable
            dec = TableDecoder(
                info, fallback, problem=problem, lookup_version=version, unreadable=unreadable is not None
            )
            if info.has_names and lookup is not None and lookup.strict and unreadable is None:
                cross_check(
                    lookup, info, dec, self.log_file, off
                )  # (a type no decoder reads is no layout to repair the history with)
            if info.has_names and problem is None and not legacy and not declared:  # made of the map's bytes alone
                self._same_columns.add(b, p, end, self.table_id_len, info, dec)
            self._keep_map(key, dec)
        else:
            # the same table under a new id (it left the server's table_definition_cache): the same decoder, whose
            # compiled code regenerated for each id made a schema of thousands of tables ten times slower
            self._map_cache.move_to_end(key)
        self.tables[table_id] = dec
        return TableMapEvent(
            log_file=self.log_file,
            offset=off,
            next_offset=nxt,
            timestamp=ts,
            server_id=sid,
            table_id=table_id,
            schema=dec.schema.schema,
            table=dec.schema.table,
            table_schema=dec.schema,
        )

    def _keep_map(self, key: bytes, dec: TableDecoder) -> None:
        if len(self._map_cache) >= _MAP_CACHE_SIZE:
            self._map_cache.popitem(last=False)
        self._map_cache[key] = dec

    def _rows(self, b: bytes, p: int, end: int, ts: int, sid: int, off: int, nxt: int, t: int) -> BinlogEvent:
        kind, event_type, v2 = ROWS_KINDS[t]
        tid_len = self.table_id_len
        post = self._rows_post[P.WRITE_ROWS_EVENT_V2 if v2 else P.WRITE_ROWS_EVENT_V1]
        if not post:
            raise ValueError("a v1 rows event from a server whose format description says it writes none")
        if end - p < post:
            raise ValueError("shorter than its post-header")
        table_id = int.from_bytes(b[p : p + tid_len], "little")
        flags = b[p + tid_len] | b[p + tid_len + 1] << 8
        p += post
        if v2:
            # the extra-data block starts with its own 2-byte length (included in it)
            extra = b[p - 2] | b[p - 1] << 8
            if extra < 2 or p + extra - 2 > end:
                raise ValueError(f"extra-data length {extra}")
            p += extra - 2
        ncols, p = read_lenenc(b, p)
        dec = self.tables.get(table_id)
        if dec is None:
            raise ParseError(
                f"rows event at {self.log_file}:{off} refers to table id {table_id} with no table map before it "
                "(a dump started inside a statement?)"
            )
        if ncols != len(dec.columns):
            raise ParseError(
                f"{event_name(t)} at {self.log_file}:{off} has {ncols} columns, the table map of "
                f"{dec.schema.full_name} {len(dec.columns)}: a corrupt event"
            )
        decode_table = self.decode_table
        rows: Sequence[RowData]
        if decode_table is not None and not decode_table(dec.schema.schema, dec.schema.table):
            rows = UNDECODED  # a table no destination of the reader captures
        else:
            nb = (ncols + 7) >> 3
            present = bytes(b[p : p + nb])
            p += nb
            present2 = b""
            if kind in "up":
                present2 = bytes(b[p : p + nb])
                p += nb
            if p > end:
                raise ValueError("column bitmaps overrun the event")
            if dec.unreadable:  # a column no decoder reads: no rows, and its error for the converter (if captured)
                rows = Rows(dec.schema, None, [])
            else:
                rows = self._decode(dec, t, kind, b, p, end, (present, present2), off)
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
            schema_error=dec.problem,
        )

    def _decode(
        self, dec: TableDecoder, t: int, kind: str, b: bytes, p: int, end: int, bitmaps: tuple[bytes, bytes], off: int
    ) -> Rows:
        """The row images of a rows event (of type ``t``) whose column ``bitmaps`` ended at ``p``."""
        present, present2 = bitmaps
        if t in COMPRESSED_ROWS:
            b = mariadb_uncompress(bytes(b[p:end]), f"{self.log_file}:{off}")
            p, end = 0, len(b)
        wanted = self.rows_form.columnar
        try:
            rows = dec.decoder(kind, present, present2, wanted and self._many_rows(dec, end - p))(dec.schema, b, p, end)
        except _MALFORMED as e:
            raise ParseError(
                f"malformed {event_name(t)} of {dec.schema.full_name} at {self.log_file}:{off}: {e}"
            ) from e
        if wanted and rows:
            sizes = self._row_bytes
            if len(sizes) >= _MAP_CACHE_SIZE:
                sizes.clear()
            sizes[id(dec.columns)] = (end - p) // len(rows)
        return rows

    def _many_rows(self, dec: TableDecoder, size: int) -> bool:
        """Whether a rows event of ``size`` bytes of ``dec``'s table holds enough rows to decode column by column.
        The columnar decoder makes a list (and a tuple) per column of each event: a wide table's events hold a row
        or two each (a server cuts them at binlog_row_event_max_size, 8 KB by default), and at 1,000 columns those
        lists made the decoding 17 times slower than tuples and the mirror's run hold 1.7 GB. The rows per event are
        estimated from the table's last event (before one: four bytes a cell)."""
        per_row = self._row_bytes.get(id(dec.columns)) or 4 * len(dec.columns)
        return size >= COLUMNAR_MIN_ROWS * per_row

    def _mysql_gtid(self, b: bytes, p: int, end: int, ts: int, sid: int, off: int, nxt: int, t: int) -> BinlogEvent:
        gtid = mysql_gtid(b, p, end)
        return GtidEvent(log_file=self.log_file, offset=off, next_offset=nxt, timestamp=ts, server_id=sid, gtid=gtid)

    def _mysql_tagged_gtid(
        self, b: bytes, p: int, end: int, ts: int, sid: int, off: int, nxt: int, t: int
    ) -> BinlogEvent:
        gtid = mysql_tagged_gtid(b, p, end)
        return GtidEvent(log_file=self.log_file, offset=off, next_offset=nxt, timestamp=ts, server_id=sid, gtid=gtid)

    def _previous_gtids(self, b: bytes, p: int, end: int, ts: int, sid: int, off: int, nxt: int, t: int) -> BinlogEvent:
        text = decode_mysql_gtid_set(b, p, end)
        return GtidSetEvent(
            log_file=self.log_file, offset=off, next_offset=nxt, timestamp=ts, server_id=sid, gtid_set=text
        )

    def _mariadb_gtid(self, b: bytes, p: int, end: int, ts: int, sid: int, off: int, nxt: int, t: int) -> BinlogEvent:
        if p + 13 > end:
            raise ValueError("a MariaDB GTID event cut short")
        seq, domain, flags = struct.unpack_from("<QIB", b, p)
        return GtidEvent(
            log_file=self.log_file,
            offset=off,
            next_offset=nxt,
            timestamp=ts,
            server_id=sid,
            gtid=f"{domain}-{sid}-{seq}",
            mariadb=True,
            standalone=bool(flags & _FL_STANDALONE),
            xa_xid=mariadb_gtid_xid(b, p, end, flags),
            non_transactional=not flags & _FL_TRANSACTIONAL,
        )

    def _mariadb_gtid_list(
        self, b: bytes, p: int, end: int, ts: int, sid: int, off: int, nxt: int, t: int
    ) -> BinlogEvent:
        gtid_set = mariadb_gtid_list(b, p, end)
        return GtidSetEvent(
            log_file=self.log_file,
            offset=off,
            next_offset=nxt,
            timestamp=ts,
            server_id=sid,
            gtid_set=gtid_set,
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
            if ftype == 0:  # the end-of-fields marker: a lone type byte, no length follows (MySQL 8.0.26+)
                break
            flen, p = read_lenenc(b, p + 1)
            if p + flen > end:
                raise ValueError(f"heartbeat field {ftype} overruns the event")
            if ftype == 1:
                name = bytes(b[p : p + flen]).decode("utf-8", "replace")
            elif ftype == 2:
                pos, _ = read_lenenc(b, p)
            p += flen
        return HeartbeatEvent(log_file=name, offset=pos, next_offset=pos, timestamp=ts, server_id=sid)
