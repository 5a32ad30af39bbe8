"""Table maps and the fast row decoder.

A TABLE_MAP event describes one table's columns in binlog terms (types, type metadata, null flags and, with
``binlog_row_metadata=FULL``, names, signedness, charsets, ENUM/SET labels and the primary key).
:func:`parse_table_map` turns its body into a :class:`TableDecoder`: the immutable
:class:`~canal.protocol.TableSchema` built once, and row-image decoders generated as Python source specialised to
that table's column types and compiled with :func:`compile` -- one straight-line function per (event kind, present
columns), with runs of fixed-width non-null columns read by one precompiled :class:`struct.Struct` and the null
bitmap read as one integer. Decoders are cached by the table map's bytes, so a table map repeated for every
statement costs one dict lookup, and a table whose map describes the same columns as another's (shards, a schema
per tenant) takes that table's parsed columns and code under its own name (:class:`SameColumns`).

The optional metadata's SIGNEDNESS bitmap and charset lists name no columns: each server counts its own set of
column types in them (YEAR, VECTOR, GEOMETRY differ by flavour and version), and :class:`MetadataRules` says which,
from the FORMAT_DESCRIPTION event's server version -- decided once per format description, never per row.

This is the one module of ``canal/`` over 800 lines, on purpose: the table-map reader, the column metadata and the
code generators (of tuples, and of columns: :class:`ColumnarGen`) all hold the same per-type knowledge (how each
MySQL type is laid out in a row image and what value it becomes), and a type's reading must change in one place;
split apart, one type would be read in four.

Malformed bytes raise ``ValueError``/``IndexError``/``struct.error`` here (never a silently shortened value: a row
image must end exactly at the event's end), which the event parser turns into a :class:`~canal.errors.ParseError`
naming the event; the checks cost nothing per cell.

Value conversions (what ``SELECT`` through pymysql returns for the same cell, with these documented differences):

* TIMESTAMP -> UTC-aware ``datetime``; SET -> ``frozenset`` of labels; ENUM -> label ``str``; BIT -> ``int``;
  GEOMETRY -> WKB ``bytes`` (the 4-byte SRID prefix the server stores is stripped: ``ST_AsBinary(col)``).
* FLOAT -> the ``float`` of its 6-significant-digit rendering, as the server prints FLOAT columns.
* Zero or invalid dates (``0000-00-00``, ``2020-00-00 ...``) -> the ``str`` the server prints, like pymysql.
* BINARY(n) -> padded with zero bytes to n (the binlog stores it stripped); CHAR -> trailing spaces stripped.
* JSON: MariaDB's JSON is an alias of LONGTEXT that the binlog cannot tell from LONGTEXT, so MariaDB JSON columns
  arrive as ``str`` exactly as ``SELECT`` returns them (``json.loads`` them if you need objects). MySQL's binary
  JSON type (type 245) is decoded to Python objects (:mod:`canal.parse.mysql.json_binary`), and a MySQL partial
  update (``PARTIAL_UPDATE_ROWS_EVENT``) has its JSON diffs applied to the before image: the after image is always
  the whole document.
* VECTOR (MySQL 9) -> ``list`` of ``float`` (its float32 values).
* Temporal formats: MySQL 5.6+/MariaDB 10.1+ DATETIME2/TIME2/TIMESTAMP2 (any fsp) and the classic pre-5.6 formats.
  Columns created on MariaDB with ``mysql56_temporal_format=OFF`` and a fractional precision use MariaDB's own
  format, which the table map logs as a classic type without its precision: the network source takes the precision
  from information_schema (local files cannot, and will misread such columns).
"""

from __future__ import annotations

import codecs
import datetime as dt
import logging
import re
import struct
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Final

import attrs

from canal.errors import SchemaError
from canal.parse.mysql.compression import mariadb_column_value
from canal.parse.mysql.geometry import GEOMETRY_TYPE_NAMES
from canal.parse.mysql.json_binary import apply_json_diff, read_json_diffs, read_mysql_json
from canal.parse.mysql.packed_decimal import check_decimal_shape, decimal_size, make_decimal_reader
from canal.parse.mysql.packets import read_lenenc
from canal.protocol import ABSENT, ColumnarRows, ColumnForm, ColumnMeta, Rows, TableSchema
from canal.schema import TableColumn, TableDef
from canal.schema.history import SchemaColumn
from canal.sql import read_column_type
from canal.sql.charsets import charset_of_collation, collation_of_charset
from canal.sql.types import BLOB_TYPES, TEXT_TYPES, canal_sql_type
from canal.sql.types import GEOMETRY_TYPE_NAMES as _GEOMETRIES
from canal.sql.values import FIXED_BINARY_SIZES, fixed_binary_text, float_display

log = logging.getLogger(__name__)

# binlog column types
T_DECIMAL = 0
T_TINY = 1
T_SHORT = 2
T_LONG = 3
T_FLOAT = 4
T_DOUBLE = 5
T_NULL = 6
T_TIMESTAMP = 7
T_LONGLONG = 8
T_INT24 = 9
T_DATE = 10
T_TIME = 11
T_DATETIME = 12
T_YEAR = 13
T_NEWDATE = 14
T_VARCHAR = 15
T_BIT = 16
T_TIMESTAMP2 = 17
T_DATETIME2 = 18
T_TIME2 = 19
T_BLOB_COMPRESSED = 140  # MariaDB: TEXT/BLOB ... COMPRESSED
T_VARCHAR_COMPRESSED = 141  # MariaDB: VARCHAR/VARBINARY ... COMPRESSED
T_VECTOR = 242  # MySQL 9
T_JSON = 245
T_NEWDECIMAL = 246
T_ENUM = 247
T_SET = 248
T_TINY_BLOB = 249
T_MEDIUM_BLOB = 250
T_LONG_BLOB = 251
T_BLOB = 252
T_VAR_STRING = 253
T_STRING = 254
T_GEOMETRY = 255

_NUMERIC = frozenset({T_DECIMAL, T_TINY, T_SHORT, T_LONG, T_FLOAT, T_DOUBLE, T_LONGLONG, T_INT24, T_NEWDECIMAL})
_BLOBS = frozenset({T_TINY_BLOB, T_MEDIUM_BLOB, T_LONG_BLOB, T_BLOB})
_COMPRESSED = frozenset({T_BLOB_COMPRESSED, T_VARCHAR_COMPRESSED})
_CHARACTER = frozenset({T_STRING, T_VAR_STRING, T_VARCHAR, *_BLOBS, *_COMPRESSED})
_FLOATS = frozenset({T_FLOAT, T_DOUBLE})
# the binlog types the row decoders read (a table map with another type decodes no row: unreadable_columns)
_READABLE = frozenset(
    {T_TINY, T_SHORT, T_LONG, T_FLOAT, T_DOUBLE, T_NULL, T_TIMESTAMP, T_LONGLONG, T_INT24, T_DATE, T_TIME, T_DATETIME}
    | {T_YEAR, T_NEWDATE, T_VARCHAR, T_BIT, T_TIMESTAMP2, T_DATETIME2, T_TIME2, T_VECTOR, T_JSON, T_NEWDECIMAL, T_ENUM}
    | {T_SET, T_VAR_STRING, T_STRING, T_GEOMETRY, *_BLOBS, *_COMPRESSED}
)
# types whose table-map metadata is empty
_NO_METADATA = frozenset(
    {T_DECIMAL, T_TINY, T_SHORT, T_LONG, T_NULL, T_TIMESTAMP, T_LONGLONG, T_INT24, T_DATE, T_TIME, T_DATETIME, T_YEAR}
    | {T_NEWDATE}
)


@attrs.frozen
class MetadataRules:
    """Which columns a table map's optional metadata lists count, as the server that wrote the binlog counts them.

    The SIGNEDNESS bitmap holds one bit per column of ``signed`` types and the COLUMN_CHARSET / DEFAULT_CHARSET lists
    one entry per column of ``character`` types, in column order, without saying which column each belongs to: a
    decoder that counts one type more or less than the server shifts every later column's flag. The servers differ:

    * MySQL 8.0.23 and later count YEAR (and the pre-5.0 DECIMAL) in the signedness bitmap (the server's
      ``has_signedess_information_type``); MySQL 8.0.20 writes no bit for YEAR (measured on its binlog files), and
      8.0.29 and later do (reported); 8.0.23 is where the server's list took YEAR in.
    * MySQL 9 counts VECTOR columns in the charset list (binary collation): they are blobs to the server.
    * MariaDB (whose optional metadata starts with 10.5) counts YEAR in the signedness bitmap and GEOMETRY columns
      in the charset list (GEOMETRY is a blob to the server, with the binary collation), and its compressed columns
      (types 140, 141) there too.

    ``mariadb``: the server is MariaDB, which prints a FLOAT / DOUBLE negative zero as 0 (:mod:`canal.sql.values`).
    """

    signed: frozenset[int]
    character: frozenset[int]
    mariadb: bool = False


def metadata_rules(server_version: str) -> MetadataRules:
    """The rules of the server whose FORMAT_DESCRIPTION event carried ``server_version`` (``"8.0.39"``,
    ``"10.11.6-MariaDB-log"``, ``"9.0.1"``); an unreadable version gets MySQL 8.0's newest rules."""
    match = _SERVER_VERSION.match(server_version)
    version = tuple(int(x) for x in match.groups()) if match else (8, 0, 40)
    if "mariadb" in server_version.lower():
        return MetadataRules(_NUMERIC | {T_YEAR}, _CHARACTER | {T_GEOMETRY}, mariadb=True)
    signed = _NUMERIC | {T_YEAR} if version >= (8, 0, 23) else _NUMERIC
    character = _CHARACTER | {T_VECTOR} if version >= (9, 0, 0) else _CHARACTER
    return MetadataRules(frozenset(signed), frozenset(character))


_SERVER_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")

# optional metadata field types (binlog_row_metadata)
_OM_SIGNEDNESS = 1
_OM_DEFAULT_CHARSET = 2
_OM_COLUMN_CHARSET = 3
_OM_COLUMN_NAME = 4
_OM_SET_STR_VALUE = 5
_OM_ENUM_STR_VALUE = 6
_OM_GEOMETRY_TYPE = 7
_OM_SIMPLE_PRIMARY_KEY = 8
_OM_PRIMARY_KEY_WITH_PREFIX = 9
_OM_ENUM_AND_SET_DEFAULT_CHARSET = 10
_OM_ENUM_AND_SET_COLUMN_CHARSET = 11


def _latin1_errors(exc: UnicodeError) -> tuple[str, int]:
    # MySQL's latin1 is cp1252 with the five bytes cp1252 leaves undefined mapped to the same code points
    assert isinstance(exc, UnicodeDecodeError)
    return "".join(chr(b) for b in exc.object[exc.start : exc.end]), exc.end


codecs.register_error("canal-latin1", _latin1_errors)


def _text_lines(var: str, codec: str, strip: str) -> list[str]:
    """Generated lines decoding the ``n`` bytes at ``p`` as ``codec`` into ``var`` (then ``strip``). latin1 (cp1252)
    text that is ASCII -- nearly all of it -- decodes as ASCII, the same characters: ``bytes.decode`` has no fast path
    for cp1252, whose Python codec costs ten times as much a value (a third of a column's decoding)."""
    if codec != "cp1252":
        return [f"{var} = b[p:p + n].decode({codec!r}){strip}; p += n"]
    return [
        "t = b[p:p + n]; p += n",
        f"{var} = (t.decode('ascii') if t.isascii() else t.decode('cp1252', 'canal-latin1')){strip}",
    ]


@attrs.define(slots=True)
class BinlogColumn:
    """One column as the table map describes it (mutable while the table map is parsed)."""

    index: int
    type: int  # the real type (ENUM/SET resolved from a STRING column's metadata)
    nullable: bool
    length: int = 0  # VARCHAR/CHAR max bytes, BLOB length-prefix bytes, ENUM/SET storage bytes, BIT bytes
    precision: int = 0
    scale: int = 0
    fsp: int = 0
    bits: int = 0
    unsigned: bool = False
    collation: int | None = None
    name: str | None = None
    labels: tuple[str, ...] = ()
    geometry_type: int = 0
    is_key: bool = False
    hires: bool = False  # MariaDB's pre-10.1 fractional DATETIME/TIME/TIMESTAMP format (fsp from information_schema)
    # the type the schema declares, where the binlog type does not say it all: a FLOAT/DOUBLE's decimals, MariaDB's
    # UUID / INET6 / INET4 logged as BINARY(n) (canal.sql.values); "" when not known
    declared: str = ""
    negative_zero: bool = True  # a FLOAT/DOUBLE's -0.0 keeps its sign as the server prints it (MySQL; not MariaDB)


# --- value helpers used by generated code -------------------------------------------------------------------------

_UTC = dt.UTC
_date = dt.date
_datetime = dt.datetime
_timedelta = dt.timedelta
_fromtimestamp = dt.datetime.fromtimestamp


def _fmt_zero_datetime(y: int, mo: int, d: int, h: int, mi: int, s: int, us: int, fsp: int) -> str:
    text = f"{y:04d}-{mo:02d}-{d:02d} {h:02d}:{mi:02d}:{s:02d}"
    if fsp:
        text += "." + f"{us:06d}"[:fsp]
    return text


def read_date(v: int) -> dt.date | str:
    try:
        return _date(v >> 9, (v >> 5) & 15, v & 31)
    except ValueError:  # a zero or invalid date the server stored (sql_mode): its text, as SELECT shows it
        _check_date(v >> 9, (v >> 5) & 15)
        return f"{v >> 9:04d}-{(v >> 5) & 15:02d}-{v & 31:02d}"


def _check_date(y: int, mo: int) -> None:
    # the server stores zero and invalid days, never a month past 12 nor a year past 9999: those are corrupt bytes
    if mo > 12 or y > 9999:
        raise ValueError(f"impossible date {y:04d}-{mo:02d}")


def _check_time(h: int, mi: int, s: int, us: int) -> None:
    if h > 23 or mi > 59 or s > 59 or us > 999_999:
        raise ValueError(f"impossible time of day {h:02d}:{mi:02d}:{s:02d}.{us}")


def make_datetime2_reader(fsp: int) -> Callable[[int], dt.datetime | str]:
    fbytes = (fsp + 1) // 2
    fshift = fbytes * 8
    fmask = (1 << fshift) - 1
    fmul = {0: 0, 1: 10000, 2: 100, 3: 1}[fbytes]
    off = 0x8000000000

    def read(v: int) -> dt.datetime | str:
        us = (v & fmask) * fmul if fbytes else 0
        ip = (v >> fshift) - off
        ym = ip >> 22
        try:
            return _datetime(ym // 13, ym % 13, (ip >> 17) & 31, (ip >> 12) & 31, (ip >> 6) & 63, ip & 63, us)
        except ValueError:  # a zero or invalid date: its text (an impossible time is corrupt bytes)
            _check_date(ym // 13, ym % 13)
            _check_time((ip >> 12) & 31, (ip >> 6) & 63, ip & 63, us)
            return _fmt_zero_datetime(
                ym // 13, ym % 13, (ip >> 17) & 31, (ip >> 12) & 31, (ip >> 6) & 63, ip & 63, us, fsp
            )

    return read


def make_timestamp2_reader(fsp: int) -> Callable[[int], dt.datetime | str]:
    fbytes = (fsp + 1) // 2
    fshift = fbytes * 8
    fmask = (1 << fshift) - 1
    fmul = {0: 0, 1: 10000, 2: 100, 3: 1}[fbytes]
    zero = _fmt_zero_datetime(0, 0, 0, 0, 0, 0, 0, fsp)

    def read(v: int) -> dt.datetime | str:
        secs = v >> fshift
        us = (v & fmask) * fmul
        if not secs and not us:
            return zero
        t = _fromtimestamp(secs, _UTC)
        return t.replace(microsecond=us) if us else t

    return read


def make_time2_reader(fsp: int) -> Callable[[bytes], dt.timedelta]:
    fbytes = (fsp + 1) // 2

    def unpack(packed: int) -> dt.timedelta:
        neg = packed < 0
        if neg:
            packed = -packed
        hms = packed >> 24
        frac = packed & 0xFFFFFF
        td = _timedelta(hours=(hms >> 12) & 0x3FF, minutes=(hms >> 6) & 63, seconds=hms & 63, microseconds=frac)
        return -td if neg else td

    if fbytes == 0:

        def read0(raw: bytes) -> dt.timedelta:
            return unpack((int.from_bytes(raw, "big") - 0x800000) << 24)

        return read0
    if fbytes == 1:

        def read1(raw: bytes) -> dt.timedelta:
            ip = int.from_bytes(raw[:3], "big") - 0x800000
            frac = raw[3]
            if ip < 0 and frac:
                ip += 1
                frac -= 0x100
            return unpack((ip << 24) + frac * 10000)

        return read1
    if fbytes == 2:

        def read2(raw: bytes) -> dt.timedelta:
            ip = int.from_bytes(raw[:3], "big") - 0x800000
            frac = raw[3] << 8 | raw[4]
            if ip < 0 and frac:
                ip += 1
                frac -= 0x10000
            return unpack((ip << 24) + frac * 100)

        return read2

    def read3(raw: bytes) -> dt.timedelta:
        return unpack(int.from_bytes(raw, "big") - 0x800000000000)

    return read3


_DATETIME_HIRES_BYTES = (5, 6, 6, 7, 7, 7, 8)
_TIME_HIRES_BYTES = (3, 4, 4, 5, 5, 5, 6)
_SEC_PART_BYTES = (0, 1, 1, 2, 2, 3, 3)


def make_mariadb_datetime_hires_reader(fsp: int) -> Callable[[int], dt.datetime | str]:
    """MariaDB's own DATETIME(fsp) format (columns created with mysql56_temporal_format=OFF)."""
    scale = 10 ** (6 - fsp)

    def read(v: int) -> dt.datetime | str:
        packed, us = divmod(v * scale, 1_000_000)
        packed, s = divmod(packed, 60)
        packed, mi = divmod(packed, 60)
        packed, h = divmod(packed, 24)
        packed, d = divmod(packed, 32)
        y, mo = divmod(packed, 13)
        try:
            return _datetime(y, mo, d, h, mi, s, us)
        except ValueError:  # a zero or invalid date: its text (an impossible time is corrupt bytes)
            _check_date(y, mo)
            _check_time(h, mi, s, us)
            return _fmt_zero_datetime(y, mo, d, h, mi, s, us, fsp)

    return read


def make_mariadb_time_hires_reader(fsp: int) -> Callable[[int], dt.timedelta]:
    """MariaDB's own TIME(fsp) format: microseconds shifted to fsp digits, offset by a zero point."""
    scale = 10 ** (6 - fsp)
    zero = (3020399 + 1) * 1_000_000 // scale  # TIME_MAX_VALUE_SECONDS + 1

    def read(v: int) -> dt.timedelta:
        packed = (v - zero) * scale
        if packed < 0:
            secs, us = divmod(-packed, 1_000_000)
            return -_timedelta(seconds=secs, microseconds=us)
        secs, us = divmod(packed, 1_000_000)
        return _timedelta(seconds=secs, microseconds=us)

    return read


def make_mariadb_timestamp_hires_reader(fsp: int) -> Callable[[int], dt.datetime | str]:
    """MariaDB's own TIMESTAMP(fsp) format: 4 bytes of seconds, then the fraction in fsp digits."""
    shift = _SEC_PART_BYTES[fsp] * 8
    scale = 10 ** (6 - fsp)
    zero = _fmt_zero_datetime(0, 0, 0, 0, 0, 0, 0, fsp)

    def read(v: int) -> dt.datetime | str:
        secs = v >> shift
        us = (v & ((1 << shift) - 1)) * scale
        if not secs and not us:
            return zero
        t = _fromtimestamp(secs, _UTC)
        return t.replace(microsecond=us) if us else t

    return read


def read_old_time(v: int) -> dt.timedelta:
    neg = v < 0
    v = abs(v)
    td = _timedelta(hours=v // 10000, minutes=(v // 100) % 100, seconds=v % 100)
    return -td if neg else td


def read_old_datetime(v: int) -> dt.datetime | str:
    d, t = divmod(v, 1000000)
    y, md = divmod(d, 10000)
    mo, dd = divmod(md, 100)
    h, ms = divmod(t, 10000)
    mi, s = divmod(ms, 100)
    try:
        return _datetime(y, mo, dd, h, mi, s)
    except ValueError:  # a zero or invalid date: its text (an impossible time is corrupt bytes)
        _check_date(y, mo)
        _check_time(h, mi, s, 0)
        return _fmt_zero_datetime(y, mo, dd, h, mi, s, 0, 0)


def read_old_timestamp(v: int) -> dt.datetime | str:
    if not v:
        return "0000-00-00 00:00:00"
    return _fromtimestamp(v, _UTC)


def read_vector(raw: bytes) -> list[float]:
    """MySQL 9's VECTOR: little-endian float32 values."""
    if len(raw) % 4:
        raise ValueError(f"VECTOR value of {len(raw)} bytes (a multiple of 4 expected)")
    return list(struct.unpack(f"<{len(raw) // 4}f", raw))


def make_set_reader(labels: tuple[str, ...]) -> Callable[[int], frozenset[str]]:
    cache: dict[int, frozenset[str]] = {}

    def read(mask: int) -> frozenset[str]:
        try:
            return cache[mask]
        except KeyError:  # not cached yet
            value = frozenset(label for i, label in enumerate(labels) if mask >> i & 1)
            if len(cache) < 4096:
                cache[mask] = value
            return value

    return read


# --- table map parsing --------------------------------------------------------------------------------------------


def _read_bitmap_msb(buf: bytes, pos: int, end: int) -> list[bool]:
    out: list[bool] = []
    for b in buf[pos:end]:
        for i in range(7, -1, -1):
            out.append(bool(b >> i & 1))
    return out


def _read_str_list(buf: bytes, pos: int, end: int) -> list[tuple[bytes, ...]]:
    """ENUM/SET labels as bytes: their charset (ENUM_AND_SET_*_CHARSET) follows them in the table map."""
    lists: list[tuple[bytes, ...]] = []
    while pos < end:
        count, pos = read_lenenc(buf, pos)
        values = []
        for _ in range(count):
            n, pos = read_lenenc(buf, pos)
            values.append(bytes(buf[pos : pos + n]))
            pos += n
        lists.append(tuple(values))
    return lists


def _decode_labels(c: BinlogColumn, raw: tuple[bytes, ...], where: str) -> tuple[str, ...]:
    """ENUM/SET labels in the column's charset (utf8mb4 when the table map names none); never guessed."""
    charset = charset_of_collation(c.collation)
    codec = charset.codec or "latin-1"
    try:
        return tuple(label.decode(codec) for label in raw)
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"table map of {where}: an ENUM/SET label of column {c.index} is not {charset.name} text: {exc}"
        ) from None


def _read_charsets(buf: bytes, pos: int, end: int, default: bool) -> tuple[int | None, dict[int, int], list[int]]:
    if default:
        dflt, pos = read_lenenc(buf, pos)
        pairs: dict[int, int] = {}
        while pos < end:
            idx, pos = read_lenenc(buf, pos)
            coll, pos = read_lenenc(buf, pos)
            pairs[idx] = coll
        return dflt, pairs, []
    ids = []
    while pos < end:
        coll, pos = read_lenenc(buf, pos)
        ids.append(coll)
    return None, {}, ids


@attrs.define(slots=True)
class TableMapInfo:
    table_id: int
    schema: str
    table: str
    columns: list[BinlogColumn]
    has_names: bool
    has_signedness: bool = False  # MINIMAL and FULL metadata say which numeric columns are unsigned; NO_LOG does not


def read_table_names(buf: bytes, pos: int, table_id_len: int) -> tuple[str, str, int]:
    """A table map's database and table names (its body's table id at ``pos``) and where its columns start."""
    pos += table_id_len + 2  # flags
    n = buf[pos]
    schema = bytes(buf[pos + 1 : pos + 1 + n]).decode("utf-8")
    pos += n + 2
    n = buf[pos]
    table = bytes(buf[pos + 1 : pos + 1 + n]).decode("utf-8")
    return schema, table, pos + n + 2


def parse_table_map_body(
    buf: bytes, pos: int, end: int, table_id_len: int = 6, rules: MetadataRules | None = None
) -> TableMapInfo:
    """Parse a TABLE_MAP event from its post-header at ``pos`` to ``end`` (checksum excluded), its optional metadata
    counted by the ``rules`` of the server that wrote it (:func:`metadata_rules`; MySQL 8.0's by default).

    Raises ``ValueError`` (or ``IndexError`` for a body cut short) when the body cannot describe a table: counts and
    lengths beyond the event, type metadata no server writes (DECIMAL(0,0), fsp 7, BIT(65), ...), metadata of
    another length than the column types need.
    """
    table_id = int.from_bytes(buf[pos : pos + table_id_len], "little")
    schema, table, pos = read_table_names(buf, pos, table_id_len)
    ncols, pos = read_lenenc(buf, pos)
    if not 1 <= ncols <= end - pos:
        raise ValueError(f"table map of {schema}.{table} declares {ncols} columns")
    types = list(buf[pos : pos + ncols])
    pos += ncols
    meta_len, pos = read_lenenc(buf, pos)
    meta_end = pos + meta_len
    if meta_end + (ncols + 7) // 8 > end:
        raise ValueError(f"table map of {schema}.{table}: {meta_len} bytes of column metadata overrun the event")
    cols: list[BinlogColumn] = []
    known = True
    for i, t in enumerate(types):
        c = BinlogColumn(index=i, type=t, nullable=False)
        if t in (T_FLOAT, T_DOUBLE):
            pos += 1
        elif t in (T_BLOB, T_TINY_BLOB, T_MEDIUM_BLOB, T_LONG_BLOB, T_GEOMETRY, T_JSON, T_VECTOR, T_BLOB_COMPRESSED):
            c.length = buf[pos]
            pos += 1
            if not 1 <= c.length <= 4:
                raise ValueError(f"column {i} of {schema}.{table}: a {c.length}-byte length prefix")
        elif t in (T_TIMESTAMP2, T_DATETIME2, T_TIME2):
            c.fsp = buf[pos]
            pos += 1
            if c.fsp > 6:
                raise ValueError(f"column {i} of {schema}.{table}: fractional precision {c.fsp}")
        elif t in (T_VARCHAR, T_VAR_STRING, T_VARCHAR_COMPRESSED):
            c.length = buf[pos] | (buf[pos + 1] << 8)
            pos += 2
            if t == T_VARCHAR_COMPRESSED and c.length < 1:
                raise ValueError(f"column {i} of {schema}.{table}: a compressed VARCHAR of {c.length} bytes")
        elif t == T_NEWDECIMAL:
            c.precision, c.scale = buf[pos], buf[pos + 1]
            pos += 2
            check_decimal_shape(c.precision, c.scale)
        elif t == T_BIT:
            if buf[pos] > 7 or buf[pos + 1] > 8:
                raise ValueError(f"column {i} of {schema}.{table}: BIT metadata {buf[pos]},{buf[pos + 1]}")
            c.bits = buf[pos + 1] * 8 + buf[pos]
            c.length = (c.bits + 7) // 8
            pos += 2
            if not 1 <= c.bits <= 64:
                raise ValueError(f"column {i} of {schema}.{table}: BIT({c.bits})")
        elif t in (T_STRING, T_ENUM, T_SET):
            b0, b1 = buf[pos], buf[pos + 1]
            pos += 2
            if b0 & 0x30 != 0x30 and b0:
                c.type = b0 | 0x30
                c.length = b1 | (((b0 & 0x30) ^ 0x30) << 4)
            else:
                c.type = b0 or t
                c.length = b1
            if (c.type == T_ENUM and c.length not in (1, 2)) or (c.type == T_SET and not 1 <= c.length <= 8):
                raise ValueError(f"column {i} of {schema}.{table}: {c.length}-byte ENUM/SET")
        elif t not in _NO_METADATA:
            known = False  # its metadata length is unknown: the decoder refuses the column if rows need it
        cols.append(c)
    if known and pos != meta_end:
        need = pos - meta_end + meta_len
        raise ValueError(f"table map of {schema}.{table}: {meta_len} bytes of column metadata, its types need {need}")
    pos = meta_end
    nb = (ncols + 7) // 8
    nulls = int.from_bytes(buf[pos : pos + nb], "little")
    pos += nb
    for c in cols:
        c.nullable = bool(nulls >> c.index & 1)

    if rules is None:
        rules = _DEFAULT_RULES
    for c in cols:
        if c.type in _FLOATS:
            c.negative_zero = not rules.mariadb
    numeric = [c for c in cols if c.type in rules.signed]
    character = [c for c in cols if c.type in rules.character]
    enumset = [c for c in cols if c.type in (T_ENUM, T_SET)]
    raw_labels: dict[int, tuple[bytes, ...]] = {}
    has_names = False
    has_signedness = False
    while pos < end:
        ftype = buf[pos]
        flen, pos = read_lenenc(buf, pos + 1)
        fend = pos + flen
        if fend > end:
            raise ValueError(f"table map of {schema}.{table}: optional metadata field {ftype} overruns the event")
        if ftype == _OM_SIGNEDNESS:
            has_signedness = True
            for c, flag in zip(numeric, _read_bitmap_msb(buf, pos, fend), strict=False):
                # YEAR takes a bit (MySQL writes 0, MariaDB 1) but has no sign to declare: never "unsigned"
                c.unsigned = flag and c.type != T_YEAR
        elif ftype in (_OM_DEFAULT_CHARSET, _OM_ENUM_AND_SET_DEFAULT_CHARSET):
            target = character if ftype == _OM_DEFAULT_CHARSET else enumset
            dflt, pairs, _ = _read_charsets(buf, pos, fend, True)
            for i, c in enumerate(target):
                c.collation = pairs.get(i, dflt)
        elif ftype in (_OM_COLUMN_CHARSET, _OM_ENUM_AND_SET_COLUMN_CHARSET):
            target = character if ftype == _OM_COLUMN_CHARSET else enumset
            _, _, ids = _read_charsets(buf, pos, fend, False)
            for c, coll in zip(target, ids, strict=False):
                c.collation = coll
        elif ftype == _OM_COLUMN_NAME:
            p = pos
            for c in cols:
                ln, p = read_lenenc(buf, p)
                c.name = bytes(buf[p : p + ln]).decode("utf-8")
                p += ln
            if p > fend:
                raise ValueError(f"table map of {schema}.{table}: column names overrun their field")
            has_names = True
        elif ftype in (_OM_SET_STR_VALUE, _OM_ENUM_STR_VALUE):
            want = T_SET if ftype == _OM_SET_STR_VALUE else T_ENUM
            for c, raw in zip([c for c in cols if c.type == want], _read_str_list(buf, pos, fend), strict=False):
                raw_labels[c.index] = raw
        elif ftype == _OM_GEOMETRY_TYPE:
            p = pos
            for c in cols:
                if c.type == T_GEOMETRY and p < fend:
                    c.geometry_type, p = read_lenenc(buf, p)
        elif ftype == _OM_SIMPLE_PRIMARY_KEY:
            p = pos
            while p < fend:
                idx, p = read_lenenc(buf, p)
                if idx < ncols:
                    cols[idx].is_key = True
        elif ftype == _OM_PRIMARY_KEY_WITH_PREFIX:
            p = pos
            while p < fend:
                idx, p = read_lenenc(buf, p)
                _, p = read_lenenc(buf, p)
                if idx < ncols:
                    cols[idx].is_key = True
        pos = fend
    for c in cols:
        if c.index in raw_labels:
            c.labels = _decode_labels(c, raw_labels[c.index], f"{schema}.{table}")
    return TableMapInfo(table_id, schema, table, cols, has_names, has_signedness)


_DEFAULT_RULES = metadata_rules("")


# --- schema -------------------------------------------------------------------------------------------------------

_INT_TYPES = {  # type -> (name, display width, unsigned display width)
    T_TINY: ("tinyint", 4, 3),
    T_SHORT: ("smallint", 6, 5),
    T_INT24: ("mediumint", 9, 8),
    T_LONG: ("int", 11, 10),
    T_LONGLONG: ("bigint", 20, 20),
}
_TEXT_NAMES = {1: "tiny", 2: "", 3: "medium", 4: "long"}
_UNSIGNABLE = frozenset({*_INT_TYPES, T_FLOAT, T_DOUBLE, T_NEWDECIMAL, T_DECIMAL})  # types UNSIGNED applies to


def _column_meta(c: BinlogColumn, fb: SchemaColumn | None) -> ColumnMeta:
    t = c.type
    unsigned = c.unsigned if fb is None or fb.unsigned is None else fb.unsigned
    charset = charset_of_collation(c.collation)
    codec = charset.codec if t in _CHARACTER or t in (T_ENUM, T_SET) else None
    labels = c.labels or (fb.labels if fb is not None else ())
    name = c.name if c.name is not None else (fb.name if fb is not None else f"UNKNOWN_COL{c.index}")
    is_key = c.is_key or (fb.is_key if fb is not None else False)
    fsp = 0
    if t in _INT_TYPES:
        base, w, uw = _INT_TYPES[t]
        mysql_type = f"{base}({uw}) unsigned" if unsigned else f"{base}({w})"
    elif t in _FLOATS:
        mysql_type = c.declared or ("float" if t == T_FLOAT else "double")
    elif t in (T_NEWDECIMAL, T_DECIMAL):
        mysql_type = f"decimal({c.precision},{c.scale})"
        if unsigned:
            mysql_type += " unsigned"
    elif t == T_YEAR:
        mysql_type = "year(4)"
    elif t in (T_DATE, T_NEWDATE):
        mysql_type = "date"
    elif t in (T_DATETIME, T_DATETIME2, T_TIMESTAMP, T_TIMESTAMP2, T_TIME, T_TIME2):
        fsp = c.fsp
        base = {T_DATETIME: "datetime", T_DATETIME2: "datetime", T_TIME: "time", T_TIME2: "time"}.get(t, "timestamp")
        mysql_type = f"{base}({fsp})" if fsp else base
    elif t == T_BIT:
        mysql_type = f"bit({c.bits})"
    elif t in (T_ENUM, T_SET):
        kind = "enum" if t == T_ENUM else "set"
        mysql_type = kind + "(" + ",".join("'" + lb.replace("'", "''") + "'" for lb in labels) + ")"
    elif t in (T_VARCHAR, T_VAR_STRING):
        mysql_type = f"varbinary({c.length})" if codec is None else f"varchar({c.length // charset.maxlen})"
    elif t == T_VARCHAR_COMPRESSED:  # its maximum bytes count the compression header's byte
        mysql_type = f"varbinary({c.length - 1})" if codec is None else f"varchar({(c.length - 1) // charset.maxlen})"
    elif t == T_STRING and c.declared:  # MariaDB's UUID / INET6 / INET4, logged as BINARY(n)
        mysql_type = c.declared
    elif t == T_STRING:
        mysql_type = f"binary({c.length})" if codec is None else f"char({c.length // charset.maxlen})"
    elif t in _BLOBS or t == T_BLOB_COMPRESSED:
        size = _TEXT_NAMES.get(c.length, "")
        # as canal reports them: every TEXT is a CLOB, every BLOB a BLOB
        mysql_type = f"{size}blob" if codec is None else f"{size}text"
    elif t == T_JSON:
        mysql_type = "json"
    elif t == T_GEOMETRY:
        mysql_type = GEOMETRY_TYPE_NAMES[c.geometry_type % 8]
    elif t == T_VECTOR:
        # the table map does not carry the declared dimension: the type is named without it
        mysql_type = "vector"
    elif t == T_NULL:
        mysql_type = "null"
    else:
        mysql_type = f"type{t}"
    # canal's JDBC type, from the type as the binlog describes it (information_schema's name may say more)
    sql_type = canal_sql_type(mysql_type.split("(", 1)[0].split(" ", 1)[0], unsigned=unsigned and t in _INT_TYPES)
    if fb is not None and fb.column_type:
        mysql_type = fb.column_type
    return ColumnMeta(
        name=name,
        sql_type=sql_type,
        mysql_type=mysql_type,
        is_key=is_key,
        unsigned=unsigned,
        nullable=c.nullable,
        charset=codec,
        fsp=fsp,
        labels=labels,
    )


# --- code generation ----------------------------------------------------------------------------------------------

_FIXED: dict[int, tuple[str, str, int]] = {  # type -> (signed fmt, unsigned fmt, size)
    T_TINY: ("b", "B", 1),
    T_SHORT: ("h", "H", 2),
    T_LONG: ("i", "I", 4),
    T_LONGLONG: ("q", "Q", 8),
    T_FLOAT: ("f", "f", 4),
    T_DOUBLE: ("d", "d", 8),
    T_YEAR: ("B", "B", 1),
}


def _length_line(c: BinlogColumn) -> str:
    """The generated line reading the length before a string's or a BLOB-like column's bytes into ``n``: one byte or
    two for a VARCHAR/CHAR (by its maximum bytes), the metadata's 1-4 bytes for the others."""
    strings = (T_VARCHAR, T_VAR_STRING, T_STRING, T_VARCHAR_COMPRESSED)
    width = (2 if c.length > 255 else 1) if c.type in strings else c.length
    if width == 1:
        return "n = b[p]; p += 1"
    if width == 2:
        return "n = b[p] | b[p + 1] << 8; p += 2"
    return f"n = _from_bytes(b[p:p + {width}], 'little'); p += {width}"


class _CodeGen:
    """Builds the Python source of the row decoders of one column layout (every table with these column types).

    The code depends on the columns' types and type metadata only, never on names: each generated function
    ``decode(T, b, p, end)`` takes the table's ``TableSchema`` (the ``table`` of its rows) with the event's bytes, so
    tables of one layout (a schema sharded into thousands of like tables) generate, compile and keep one function
    for all of them, not one bound to each.
    """

    def __init__(self, cols: list[BinlogColumn]) -> None:
        self.cols = cols
        self.ns: dict[str, Any] = {
            "Rows": Rows,
            "ABSENT": ABSENT,
            "_from_bytes": int.from_bytes,
        }
        self._n = 0
        self._partial: _PartialImage | None = None

    def const(self, value: Any, prefix: str = "K") -> str:
        self._n += 1
        name = f"{prefix}{self._n}"
        self.ns[name] = value
        return name

    def column(self, c: BinlogColumn, var: str) -> list[str]:
        """Lines reading column ``c`` (known non-null) into ``var`` and advancing ``p``."""
        t = c.type
        codec = charset_of_collation(c.collation).codec
        if t in _FIXED:
            fmt, ufmt, size = _FIXED[t]
            s = self.const(struct.Struct("<" + (ufmt if c.unsigned else fmt)), "S")
            lines = [f"{var}, = {s}.unpack_from(b, p)", f"p += {size}"]
            return lines + self.post(c, var)
        if t == T_INT24:
            return [f"{var} = _from_bytes(b[p:p + 3], 'little', signed={not c.unsigned}); p += 3"]
        if t == T_NEWDECIMAL:
            size = decimal_size(c.precision, c.scale)
            f = self.const(make_decimal_reader(c.precision, c.scale), "D")
            return [f"{var} = {f}(b[p:p + {size}]); p += {size}"]
        if t in (T_DATE, T_NEWDATE):
            f = self.const(read_date, "F")
            return [f"{var} = {f}(b[p] | b[p + 1] << 8 | b[p + 2] << 16); p += 3"]
        if t == T_DATETIME2:
            n = 5 + (c.fsp + 1) // 2
            f = self.const(make_datetime2_reader(c.fsp), "F")
            return [f"{var} = {f}(_from_bytes(b[p:p + {n}], 'big')); p += {n}"]
        if t == T_TIMESTAMP2:
            n = 4 + (c.fsp + 1) // 2
            f = self.const(make_timestamp2_reader(c.fsp), "F")
            return [f"{var} = {f}(_from_bytes(b[p:p + {n}], 'big')); p += {n}"]
        if t == T_TIME2:
            n = 3 + (c.fsp + 1) // 2
            f = self.const(make_time2_reader(c.fsp), "F")
            return [f"{var} = {f}(b[p:p + {n}]); p += {n}"]
        if c.hires and t == T_DATETIME:
            n = _DATETIME_HIRES_BYTES[c.fsp]
            f = self.const(make_mariadb_datetime_hires_reader(c.fsp), "F")
            return [f"{var} = {f}(_from_bytes(b[p:p + {n}], 'big')); p += {n}"]
        if c.hires and t == T_TIME:
            n = _TIME_HIRES_BYTES[c.fsp]
            f = self.const(make_mariadb_time_hires_reader(c.fsp), "F")
            return [f"{var} = {f}(_from_bytes(b[p:p + {n}], 'big')); p += {n}"]
        if c.hires and t == T_TIMESTAMP:
            n = 4 + _SEC_PART_BYTES[c.fsp]
            f = self.const(make_mariadb_timestamp_hires_reader(c.fsp), "F")
            return [f"{var} = {f}(_from_bytes(b[p:p + {n}], 'big')); p += {n}"]
        if t == T_TIME:
            f = self.const(read_old_time, "F")
            return [f"{var} = {f}(_from_bytes(b[p:p + 3], 'little', signed=True)); p += 3"]
        if t == T_DATETIME:
            f = self.const(read_old_datetime, "F")
            return [f"{var} = {f}(_from_bytes(b[p:p + 8], 'little')); p += 8"]
        if t == T_TIMESTAMP:
            f = self.const(read_old_timestamp, "F")
            return [f"{var} = {f}(_from_bytes(b[p:p + 4], 'little')); p += 4"]
        if t == T_STRING and c.declared:  # UUID / INET6 / INET4: the text of its bytes (zero bytes stripped)
            f = self.const(fixed_binary_text(read_column_type(c.declared, strict=False).base), "F")
            return [_length_line(c), f"{var} = {f}(b[p:p + n].ljust({c.length}, b'\\x00')); p += n"]
        if t in _COMPRESSED:
            f = self.const(mariadb_column_value, "F")
            # the most bytes a value holds: a VARCHAR's maximum counts the compression header's byte
            limit = c.length - 1 if t == T_VARCHAR_COMPRESSED else (1 << (8 * c.length)) - 1
            lines = [_length_line(c), f"t = {f}(b[p:p + n], {limit}); p += n"]
            if codec is None:
                return [*lines, f"{var} = t"]
            if codec == "cp1252":
                return [*lines, f"{var} = t.decode('ascii') if t.isascii() else t.decode('cp1252', 'canal-latin1')"]
            return [*lines, f"{var} = t.decode({codec!r})"]
        if t in (T_VARCHAR, T_VAR_STRING, T_STRING):
            lines = [_length_line(c)]
            if codec is None:
                if t == T_STRING:
                    lines.append(f"{var} = b[p:p + n].ljust({c.length}, b'\\x00'); p += n")
                else:
                    lines.append(f"{var} = b[p:p + n]; p += n")
            else:
                strip = ".rstrip(' ')" if t == T_STRING else ""
                lines += _text_lines(var, codec, strip)
            return lines
        if t == T_JSON and self._partial is not None:
            return self._partial_json(c, var, self._partial)
        if t in _BLOBS or t in (T_JSON, T_GEOMETRY, T_VECTOR):
            lines = [_length_line(c)]
            if t == T_GEOMETRY:
                lines.append(f"{var} = b[p + 4:p + n]; p += n")
            elif t == T_JSON:
                f = self.const(read_mysql_json, "F")
                lines.append(f"{var} = {f}(b[p:p + n]); p += n")
            elif t == T_VECTOR:
                f = self.const(read_vector, "F")
                lines.append(f"{var} = {f}(b[p:p + n]); p += n")
            elif codec is None:
                lines.append(f"{var} = b[p:p + n]; p += n")
            else:
                lines += _text_lines(var, codec, "")
            return lines
        if t == T_ENUM:
            labels = self.const(("", *c.labels), "L")
            idx = "b[p]" if c.length == 1 else "(b[p] | b[p + 1] << 8)"
            return [f"x = {idx}", f"{var} = {labels}[x] if x < len({labels}) else ''; p += {c.length}"]
        if t == T_SET:
            f = self.const(make_set_reader(c.labels), "F")
            return [f"{var} = {f}(_from_bytes(b[p:p + {c.length}], 'little')); p += {c.length}"]
        if t == T_BIT:
            return [f"{var} = _from_bytes(b[p:p + {c.length}], 'big'); p += {c.length}"]
        if t == T_NULL:
            return [f"{var} = None"]
        raise ValueError(f"column {c.index} has binlog type {t}, which pycanal cannot read")

    def _partial_json(self, c: BinlogColumn, var: str, partial: _PartialImage) -> list[str]:
        """A JSON column of a partial update's after image: the full document, or (its partial bit set) a diff of
        the document (MySQL's ``Json_diff_vector``: a 4-byte length, then the diffs) -- applied to the before
        image's document where that carries it (``binlog_row_image=FULL``); else (MINIMAL, NOBLOB) the cell is
        ``ABSENT`` and the row's diffs (``dd``, by column index) hold the column's."""
        saved, self._partial = self._partial, None
        try:
            full = self.column(c, var)
        finally:
            self._partial = saved
        bit = 1 << partial.json_ordinal[c.index]
        diff = ["n = _from_bytes(b[p:p + 4], 'little'); p += 4"]
        if c.index in partial.before_present:
            f = self.const(apply_json_diff, "F")
            diff.append(f"{var} = {f}(v{c.index}, b[p:p + n]); p += n")
        else:
            f = self.const(read_json_diffs, "F")
            diff += [f"{var} = ABSENT", "if dd is None: dd = {}", f"dd[{c.index}] = {f}(b[p:p + n]); p += n"]
        return [f"if pbits & {bit}:", *("    " + ln for ln in diff), "else:", *("    " + ln for ln in full)]

    def post(self, c: BinlogColumn, var: str) -> list[str]:
        if c.type == T_YEAR:
            return [f"if {var}: {var} += 1900"]
        if c.type in _FLOATS:
            scale = read_column_type(c.declared, strict=False).scale if c.declared else None
            if c.type == T_DOUBLE and scale is None:  # its own value; MariaDB prints -0.0 as 0 (-0.0 + 0.0 is 0.0)
                return [] if c.negative_zero else [f"{var} += 0.0"]
            show = float_display(c.type == T_FLOAT, scale, mariadb=not c.negative_zero)
            f = self.const(show, "F")
            return [f"{var} = {f}({var})"]
        return []

    def image(self, present: list[int], suffix: str) -> tuple[list[str], str]:
        """Lines reading one row image of the ``present`` columns; returns (lines, tuple expression). A column the
        image does not carry (a partial image: ``binlog_row_image=MINIMAL`` / ``NOBLOB``) is ``ABSENT`` in the
        tuple, never None (SQL NULL)."""
        cols = [self.cols[i] for i in present]
        nb = (len(cols) + 7) // 8
        names = [f"v{c.index}{suffix}" for c in cols]
        full = [f"v{i}{suffix}" if i in present else "ABSENT" for i in range(len(self.cols))]
        tup = "(" + ", ".join(full) + ("," if len(full) == 1 else "") + ")"
        # the servers set the bitmap's bits past the last column (MySQL's and MariaDB's pack_row start from all ones):
        # masked off, a row without NULLs takes the fast path below
        mask = "" if len(cols) % 8 == 0 else f" & {(1 << len(cols)) - 1}"
        bitmap = "b[p]" if nb == 1 else f"_from_bytes(b[p:p + {nb}], 'little')"
        lines = [f"nulls = {bitmap}{mask}; p += {nb}"]
        # fast path: no NULL in this image -> runs of fixed-width columns in one struct
        fast = self._runs(cols, names, lambda c: True)
        # with NULLs: NOT NULL fixed-width columns still go in runs, nullable ones test their bit
        bits = {c.index: bit for bit, c in enumerate(cols)}
        slow = self._runs(cols, names, lambda c: not c.nullable, bits)
        if any(c.nullable for c in cols):
            lines.append("if not nulls:")
            lines += ["    " + ln for ln in fast]
            lines.append("else:")
            lines += ["    " + ln for ln in slow]
        else:
            lines += fast
        return lines, tup

    def _runs(
        self,
        cols: list[BinlogColumn],
        names: list[str],
        ok: Callable[[BinlogColumn], bool],
        null_bits: dict[int, int] | None = None,
    ) -> list[str]:
        lines: list[str] = []
        run: list[tuple[BinlogColumn, str]] = []

        def flush() -> None:
            if not run:
                return
            if len(run) == 1:
                lines.extend(self.column(*run[0]))
            else:
                fmt = "<" + "".join(_FIXED[c.type][1] if c.unsigned else _FIXED[c.type][0] for c, _ in run)
                s = self.const(struct.Struct(fmt), "S")
                size = struct.calcsize(fmt)
                lines.append(", ".join(v for _, v in run) + f", = {s}.unpack_from(b, p)")
                lines.append(f"p += {size}")
                for c, v in run:
                    lines.extend(self.post(c, v))
            run.clear()

        for c, var in zip(cols, names, strict=True):
            if c.type in _FIXED and ok(c):
                run.append((c, var))
            elif null_bits is not None and c.nullable:
                flush()
                lines.append(f"if nulls & {1 << null_bits[c.index]}:")
                lines.append(f"    {var} = None")
                lines.append("else:")
                lines.extend("    " + ln for ln in self.column(c, var))
            else:
                flush()
                lines.extend(self.column(c, var))
        flush()
        return lines

    def rows_function(self, kind: str, present: list[int], present2: list[int] | None) -> RowsDecoder:
        """``decode(T, b, p, end) -> Rows`` (rows of table ``T``) for one rows event kind:
        'w', 'u', 'd', or 'p' (a MySQL partial update: an update whose after image may hold JSON diffs). The images
        must fill ``b[p:end]`` exactly: a last row that runs past ``end`` raises ``ValueError`` (its bytes were
        misread)."""
        if not present or (kind in "up" and not present2):
            raise ValueError("rows event with no column in its row image")
        # the images go to one list per side (Rows: no RowData per row), the after images of an update to a second
        src = ["def decode(T, b, p, end):", "    out = []", "    append = out.append"]
        if kind in "up":
            src += ["    out2 = []", "    append2 = out2.append"]
        if kind == "p":  # each row's JSON diffs the after image does not apply (ABSENT cells), or None
            src += ["    out3 = []", "    append3 = out3.append"]
        src.append("    while p < end:")
        img, tup = self.image(present, "")
        src += ["        " + ln for ln in img]
        if kind in "up":
            assert present2 is not None
            if kind == "p":
                json_cols = [c.index for c in self.cols if c.type == T_JSON]
                self._partial = _PartialImage({i: n for n, i in enumerate(json_cols)}, frozenset(present))
                src += ["        " + ln for ln in self._value_options((len(json_cols) + 7) // 8)]
                src.append("        dd = None")
            try:
                img2, tup2 = self.image(present2, "_a")
            finally:
                self._partial = None
            src += ["        " + ln for ln in img2]
            src += [f"        append({tup})", f"        append2({tup2})"]
            if kind == "p":
                src.append("        append3(dd)")
                result = "Rows(T, out, out2, out3 if any(out3) else None)"
            else:
                result = "Rows(T, out, out2)"
        else:
            src.append(f"        append({tup})")
            result = "Rows(T, None, out)" if kind == "w" else "Rows(T, out, None)"
        return self._function(src, result, f"<canal rows decoder {kind}>")

    def _function(self, src: list[str], result: str, label: str) -> RowsDecoder:
        """The decoder whose loop over the images is ``src``: the images must end at ``end``, and it returns
        ``result``."""
        src = [
            *src,
            "    if p != end:",
            "        raise ValueError(f'the last row image ends {p - end} bytes past the event')",
            f"    return {result}",
        ]
        code = "\n".join(src)
        ns = dict(self.ns)
        exec(compile(code, label, "exec"), ns)
        decode: RowsDecoder = ns["decode"]
        decode.__source__ = code  # type: ignore[attr-defined]
        return decode

    def _value_options(self, partial_bytes: int) -> list[str]:
        """A partial update's after image starts with MySQL's value options (a length-encoded integer; bit 0:
        PARTIAL_JSON) and, when set, one bit per JSON column of the table: that column holds a diff."""
        lenenc = self.const(read_lenenc, "F")
        return [
            f"vo, p = {lenenc}(b, p)",
            "if vo & ~1:",
            "    raise ValueError(f'unknown binlog_row_value_options bits {vo:#x} in a partial update')",
            "if vo:",
            f"    pbits = _from_bytes(b[p:p + {partial_bytes}], 'little'); p += {partial_bytes}",
            "else:",
            "    pbits = 0",
        ]


# --- column by column -----------------------------------------------------------------------------------------
#
# Row images decoded column by column, for consumers that build typed columns (the Delta mirror, the Spark source's
# packed and variant rows): the object decoder makes a Python value of every cell -- a ``datetime``, a ``Decimal``,
# a ``str`` -- and a tuple of every image, which a typed batch then takes apart again, column by column, for pyarrow
# to read back into buffers. For the columns that cost most, the columnar decoder keeps what the row image holds
# instead: a DATETIME2 as its packed integer, a DECIMAL of up to 18 digits as its bytes, text as its bytes (one tuple
# a column: the collector untracks tuples of plain values). ``canal.lake.forms.typed_columns`` turns a whole column of
# them into an Arrow array at once; every other column's cells are the object decoder's values. A ColumnarRows'
# ``before`` and ``after`` are exactly the object decoder's tuples, made from the columns on first use (each raw cell
# through the object decoder's reader of its type). The one difference: a cell the object decoder refuses at parse time
# -- text that is not its column's charset, an impossible date: corrupt bytes -- is refused where it is converted.

RAW_DECIMAL_DIGITS: Final = 18
"""The most digits of a DECIMAL kept raw: its unscaled value fits an int64, so numpy can add up its groups."""


def _latin1(raw: bytes) -> str:
    # what _text_lines generates for a cp1252 column, as a function (the generated code inlines it: no call a cell)
    return raw.decode("ascii") if raw.isascii() else raw.decode("cp1252", "canal-latin1")


def _utf8(raw: bytes) -> str:
    return raw.decode("utf-8")


_VALUE: Final = ColumnForm("value")


_RAW_TEXT: Final = {"utf-8": "utf8", "cp1252": "latin1"}  # the text codecs kept as bytes, by their form's kind


def column_form(c: BinlogColumn) -> ColumnForm:
    """The form the columnar decoder keeps column ``c`` in."""
    t = c.type
    if t in (T_VARCHAR, T_VAR_STRING) or t in _BLOBS:  # not CHAR: its trailing spaces are stripped
        codec = charset_of_collation(c.collation).codec
        return raw_form(_RAW_TEXT.get(codec or "", "value"))
    if t == T_DATETIME2 and not c.hires:
        return raw_form("datetime2", fsp=c.fsp)
    if t == T_NEWDECIMAL and 0 < c.precision <= RAW_DECIMAL_DIGITS:
        return raw_form("decimal", precision=c.precision, scale=c.scale)
    return _VALUE


def raw_form(kind: str, fsp: int = 0, precision: int = 0, scale: int = 0) -> ColumnForm:
    """The :class:`ColumnForm` of a column kept as ``kind``, made of its fields -- by :func:`column_form`, and again
    where a form sent to another process arrives (its ``to_object`` is generated: it travels as its fields)."""
    if kind == "value":
        return _VALUE
    if kind == "utf8":
        return ColumnForm("utf8", to_object=_utf8)
    if kind == "latin1":
        return ColumnForm("latin1", to_object=_latin1)
    if kind == "datetime2":
        return ColumnForm("datetime2", fsp=fsp, to_object=make_datetime2_reader(fsp))
    if kind == "decimal":
        reader = make_decimal_reader(precision, scale)
        return ColumnForm("decimal", precision=precision, scale=scale, to_object=reader)
    raise ValueError(f"no column form {kind!r}")


class ColumnarGen(_CodeGen):
    """The object decoder's code generator with the raw forms of :func:`column_form`: the same reading of every
    row image (bitmap, runs of fixed widths, the end check), each cell appended to its column's list."""

    def __init__(self, cols: list[BinlogColumn]) -> None:
        super().__init__(cols)
        self.forms = tuple(column_form(c) for c in cols)
        self.ns["ColumnarRows"] = ColumnarRows
        self.ns["FORMS"] = self.forms

    def column(self, c: BinlogColumn, var: str) -> list[str]:
        kind = self.forms[c.index].kind
        if kind in ("utf8", "latin1"):
            return [_length_line(c), f"{var} = b[p:p + n]; p += n"]
        if kind == "datetime2":
            n = 5 + (c.fsp + 1) // 2
            return [f"{var} = _from_bytes(b[p:p + {n}], 'big'); p += {n}"]
        if kind == "decimal":
            size = decimal_size(c.precision, c.scale)
            return [f"{var} = b[p:p + {size}]; p += {size}"]
        return super().column(c, var)

    def rows_function(self, kind: str, present: list[int], present2: list[int] | None) -> RowsDecoder:
        """``decode(T, b, p, end) -> ColumnarRows`` for an event of ``kind`` 'w', 'u' or 'd' (a
        MySQL partial update, 'p', has the object decoder only)."""
        if kind not in "wud" or not present or (kind == "u" and not present2):
            raise ValueError(f"no columnar decoder of rows events of kind {kind!r}")
        sides = [(present, "")] + ([(present2 or [], "_a")] if kind == "u" else [])
        src = ["def decode(T, b, p, end):"]
        for cols, suffix in sides:
            for i in cols:
                src += [f"    c{i}{suffix} = []", f"    a{i}{suffix} = c{i}{suffix}.append"]
        src.append("    while p < end:")
        for cols, suffix in sides:
            img, _tup = self.image(cols, suffix)
            src += ["        " + ln for ln in img]
            src += [f"        a{i}{suffix}(v{i}{suffix})" for i in cols]

        def image(cols: list[int], suffix: str) -> str:
            # tuples: the collector untracks a tuple of plain values, never a list, and the store holds many
            cells = [f"tuple(c{i}{suffix})" if i in cols else "None" for i in range(len(self.cols))]
            return "(" + ", ".join(cells) + ("," if len(cells) == 1 else "") + ")"

        first = f"c{present[0]}"
        if kind == "w":
            result = f"ColumnarRows(T, None, {image(present, '')}, FORMS, len({first}))"
        elif kind == "d":
            result = f"ColumnarRows(T, {image(present, '')}, None, FORMS, len({first}))"
        else:
            result = f"ColumnarRows(T, {image(present, '')}, {image(present2 or [], '_a')}, FORMS, len({first}))"
        return self._function(src, result, f"<canal columnar rows decoder {kind}>")


@attrs.frozen
class _PartialImage:
    """While a partial update's after image is generated: each JSON column's ordinal among the table's JSON columns
    (its bit in the partial bitmap), and the columns the before image holds (a diff applies to one of them)."""

    json_ordinal: dict[int, int]
    before_present: frozenset[int]


_MAX_DECODERS = 64  # per table map: present-column bitmaps vary only with hostile or unusual (MINIMAL) images


_BLOBS = frozenset({T_BLOB, T_TINY_BLOB, T_MEDIUM_BLOB, T_LONG_BLOB})
_STRINGS = frozenset({T_VARCHAR, T_VAR_STRING, T_STRING})
# the binlog types a column of each declared type is logged as (old and new temporal formats; ENUM and SET as
# themselves or as the STRING they are stored in)
_LOGGED_AS: dict[str, frozenset[int]] = {
    "tinyint": frozenset({T_TINY}),
    "smallint": frozenset({T_SHORT}),
    "mediumint": frozenset({T_INT24}),
    "int": frozenset({T_LONG}),
    "bigint": frozenset({T_LONGLONG}),
    "decimal": frozenset({T_NEWDECIMAL, T_DECIMAL}),
    "float": frozenset({T_FLOAT}),
    "double": frozenset({T_DOUBLE}),
    "bit": frozenset({T_BIT}),
    "year": frozenset({T_YEAR}),
    "date": frozenset({T_DATE, T_NEWDATE}),
    "time": frozenset({T_TIME, T_TIME2}),
    "datetime": frozenset({T_DATETIME, T_DATETIME2}),
    "timestamp": frozenset({T_TIMESTAMP, T_TIMESTAMP2}),
    "char": frozenset({T_STRING}),
    "binary": frozenset({T_STRING}),
    "varchar": frozenset({T_VARCHAR, T_VAR_STRING, T_VARCHAR_COMPRESSED}),
    "varbinary": frozenset({T_VARCHAR, T_VAR_STRING, T_VARCHAR_COMPRESSED}),
    "enum": frozenset({T_ENUM, T_STRING}),
    "set": frozenset({T_SET, T_STRING}),
    "json": frozenset({T_JSON, T_BLOB_COMPRESSED}) | _BLOBS,
    **{
        name: _BLOBS | {T_BLOB_COMPRESSED}
        for name in (*TEXT_TYPES - {"char", "varchar"}, *BLOB_TYPES - {"binary", "varbinary"})
    },
    **{name: frozenset({T_GEOMETRY}) for name in _GEOMETRIES},
    **{name: frozenset({T_STRING}) for name in FIXED_BINARY_SIZES},  # MariaDB's UUID / INET6 / INET4: BINARY(n)
}
_BLOB_LENGTH_BYTES = {"tinytext": 1, "tinyblob": 1, "text": 2, "blob": 2, "mediumtext": 3, "mediumblob": 3}


_BINARY_COLLATION: Final = 63


def _binary_string(column_type: str) -> bool:
    """Whether a declared type is a binary string (BINARY, VARBINARY, the BLOBs; MariaDB's UUID / INET types)."""
    base = read_column_type(column_type, strict=False).base
    return base in BLOB_TYPES or base in FIXED_BINARY_SIZES


def needs_declared_type(c: BinlogColumn) -> bool:
    """Whether column ``c``'s value depends on a type its binlog type does not say: a FLOAT/DOUBLE's declared decimals,
    or a BINARY(16) / BINARY(4) that may be MariaDB's UUID, INET6 or INET4 (:func:`declare_types`)."""
    if c.type in _FLOATS:
        return True
    binary = c.collation is None or charset_of_collation(c.collation).codec is None
    return c.type == T_STRING and c.length in (16, 4) and binary


def declare_types(columns: Sequence[BinlogColumn], found: Sequence[SchemaColumn]) -> None:
    """Give the columns that need one (:func:`needs_declared_type`) their declared type from ``found``, a schema's
    columns in the same order (the schema history, or information_schema with the history off): a FLOAT/DOUBLE its
    type text (its decimals), a BINARY(n) that is a UUID / INET6 / INET4 that type's name. A column whose name the
    binlog gives and the schema names otherwise is left as it is."""
    if len(found) != len(columns):
        return
    for c, f in zip(columns, found, strict=True):
        if not needs_declared_type(c) or (c.name is not None and c.name.lower() != f.name.lower()):
            continue
        declared = read_column_type(f.column_type, strict=False)
        if c.type in _FLOATS and declared.base in ("float", "double"):
            c.declared = f.column_type
        elif c.type == T_STRING and FIXED_BINARY_SIZES.get(declared.base) == c.length:
            c.declared = declared.base


def unreadable_columns(columns: Sequence[BinlogColumn]) -> list[BinlogColumn]:
    """The columns whose binlog type no row decoder reads (the pre-5.0 DECIMAL, a type code no server version known
    here writes): their table's rows are never decoded, and stop a destination that captures the table."""
    return [c for c in columns if c.type not in _READABLE]


def binlog_layout(info: TableMapInfo, schema: TableSchema, previous: TableDef | None) -> TableDef:
    """The layout a table map with names (FULL metadata) describes, as a schema history keeps it: types as the
    decoder names them, column charsets from their collations, the table's default charset from ``previous``."""
    columns = []
    # what the binlog does not tell -- which columns the server computes -- is kept from the layout before, by name
    kept = {} if previous is None else {col.name.lower(): col for col in previous.columns}
    for c, meta in zip(info.columns, schema.columns, strict=True):
        declared = read_column_type(meta.mysql_type, strict=False)
        text = c.type in _CHARACTER or c.type in (T_ENUM, T_SET)
        charset = charset_of_collation(c.collation).name if text and c.collation is not None else None
        before = kept.get(meta.name.lower())
        columns.append(
            TableColumn(
                meta.name,
                declared.base,
                declared.params,
                declared.labels,
                declared.unsigned,
                False,
                c.nullable and not meta.is_key,
                charset,
                auto_increment=before is not None and before.auto_increment,
                generated=None if before is None else before.generated,
            )
        )
    primary = tuple(m.name for m in schema.columns if m.is_key)
    default = previous.charset if previous is not None else "utf8mb4"
    return TableDef(info.schema, info.table, tuple(columns), primary, default)


def schema_mismatch(columns: Sequence[BinlogColumn], found: Sequence[SchemaColumn]) -> str | None:
    """Why a table map's columns are not the ones a schema history gives (count, types, DECIMAL digits, TEXT/BLOB
    size), or None when they match."""
    if len(columns) != len(found):
        return f"the binlog has {len(columns)} columns, the schema history {len(found)}"
    for c, f in zip(columns, found, strict=True):
        declared = read_column_type(f.column_type, strict=False)
        allowed = _LOGGED_AS.get(declared.base)
        if allowed is not None and c.type not in allowed:
            return f"column {c.index + 1} ({f.name} {f.column_type}) is logged as binlog type {c.type}"
        if c.type == T_NEWDECIMAL and declared.base == "decimal":
            digits = (declared.precision or 10, declared.scale or 0)
            if (c.precision, c.scale) != digits:
                return f"column {c.index + 1} ({f.name} {f.column_type}) is DECIMAL({c.precision},{c.scale})"
        fixed = FIXED_BINARY_SIZES.get(declared.base)
        if fixed is not None and c.length != fixed:
            return f"column {c.index + 1} ({f.name} {f.column_type}) is BINARY({c.length}) in the binlog"
        size = _BLOB_LENGTH_BYTES.get(declared.base, 4 if declared.base in ("longtext", "longblob") else None)
        blob_like = c.type in _BLOBS or c.type == T_BLOB_COMPRESSED
        if blob_like and size is not None and declared.base != "json" and c.length != size:
            return f"column {c.index + 1} ({f.name} {f.column_type}) has a {c.length}-byte length in the binlog"
    return None


RowsDecoder = Callable[[TableSchema, bytes, int, int], Rows]
"""``decode(T, b, p, end)``: the rows of table ``T`` in ``b[p:end]`` (one rows event's images)."""


class _Layout:
    """The generated decoders of one column layout, shared by every table map with it (any table, any table id)."""

    __slots__ = ("columnar", "decoders", "gen")

    def __init__(self, cols: list[BinlogColumn]) -> None:
        self.gen = _CodeGen(cols)
        self.columnar: _CodeGen | None = None  # the ColumnarGen, made when first asked
        self.decoders: dict[tuple[str, bytes, bytes, bool], RowsDecoder] = {}  # oldest inserted first


class SameColumns:
    """Table maps known by what they say of their columns alone (their body after the table's name), so that a table
    whose columns are those of a table seen before -- shards, a schema per tenant -- takes that table's parsed
    columns, column metadata and generated code under its own name (:meth:`TableDecoder.renamed`) instead of
    building them again. Each new table of a stream over 2,000 tables of one definition cost about as much as one
    of its transactions, most of it there. Holds only decoders that nothing but those bytes made (the caller's
    choice: names from the binlog, nothing taken from a schema, no problem); least recently used first.

    It also remembers the schema-history layout such columns were last found to agree with (:meth:`agreed`):
    each table is still checked against the history, but a table whose history layout is that one -- the history
    hands tables of one layout the same tuple -- needs no second comparison."""

    __slots__ = ("_agreed", "_known", "size")

    def __init__(self, size: int) -> None:
        self.size = size
        self._known: OrderedDict[bytes, tuple[TableMapInfo, TableDecoder]] = OrderedDict()
        self._agreed: dict[bytes, Sequence[Any]] = {}

    def clear(self) -> None:
        self._known.clear()
        self._agreed.clear()

    def add(self, buf: bytes, pos: int, end: int, table_id_len: int, info: TableMapInfo, dec: TableDecoder) -> None:
        """Keep ``dec``, made from the table map body ``buf[pos:end]`` (``info``), for tables of the same columns."""
        if len(self._known) >= self.size:
            self._known.popitem(last=False)
        self._known[bytes(buf[read_table_names(buf, pos, table_id_len)[2] : end])] = (info, dec)

    def get(self, buf: bytes, pos: int, end: int, table_id_len: int) -> tuple[TableMapInfo, TableDecoder, bytes] | None:
        """The table map body ``buf[pos:end]`` as its table's info and decoder, when a table with the same columns
        was kept, and the key its columns are known by (None otherwise)."""
        if not self._known:
            return None
        schema, table, columns_at = read_table_names(buf, pos, table_id_len)
        key = bytes(buf[columns_at:end])
        known = self._known.get(key)
        if known is None:
            return None
        self._known.move_to_end(key)
        info, dec = known
        table_id = int.from_bytes(buf[pos : pos + table_id_len], "little")
        mine = TableMapInfo(table_id, schema, table, info.columns, info.has_names, info.has_signedness)
        return mine, dec.renamed(table_id, schema, table), key

    def agreed(self, key: bytes, found: Sequence[Any]) -> bool:
        """Whether the columns known by ``key`` were found to agree with the history's columns ``found`` (that very
        sequence: the history hands out one per layout, so this is no comparison)."""
        return self._agreed.get(key) is found

    def agree(self, key: bytes, found: Sequence[Any]) -> None:
        """The columns known by ``key`` agree with the history's columns ``found``."""
        if len(self._agreed) >= self.size:
            self._agreed.clear()
        self._agreed[key] = found


def _layout_key(cols: Sequence[BinlogColumn]) -> tuple[object, ...]:
    """Everything the generated code reads of the columns (not their names or keys)."""
    return tuple(
        (
            c.type,
            c.nullable,
            c.length,
            c.precision,
            c.scale,
            c.fsp,
            c.bits,
            c.unsigned,
            c.collation,
            c.labels,
            c.geometry_type,
            c.hires,
            c.declared,
            c.negative_zero,
        )
        for c in cols
    )


# process-wide, as compiled code is, and read without a lock: the parsers of every destination of the process (one
# thread each) read these on every table map they have not seen, and a lock held there serialised them all. A dict
# lookup is one atomic operation in CPython, and the values are never changed once in (a _Layout's decoders are a
# dict of its own, written the same way). Only insertion takes the lock, so that two threads never evict under each
# other; the oldest inserted goes first (a layout in use stays in every TableDecoder that holds it, so one evicted
# costs only its next new table map a compilation).
_LAYOUTS: dict[tuple[object, ...], _Layout] = {}
_LAYOUTS_LOCK = threading.Lock()
_MAX_LAYOUTS = 4096


def _layout(cols: list[BinlogColumn]) -> _Layout:
    key = _layout_key(cols)
    layout = _LAYOUTS.get(key)
    if layout is not None:
        return layout
    with _LAYOUTS_LOCK:
        layout = _LAYOUTS.get(key)
        if layout is None:
            layout = _LAYOUTS[key] = _Layout(cols)
            if len(_LAYOUTS) > _MAX_LAYOUTS:
                del _LAYOUTS[next(iter(_LAYOUTS))]
        return layout


class TableDecoder:
    """One table map: its schema and its row decoders (generated once per column layout, handed the schema)."""

    __slots__ = ("_decoders", "_layout", "columns", "lookup_version", "problem", "schema", "table_id", "unreadable")

    def __init__(
        self,
        info: TableMapInfo,
        fallback: Sequence[SchemaColumn] | None = None,
        *,
        problem: SchemaError | None = None,
        lookup_version: int | None = None,
        unreadable: bool = False,
    ) -> None:
        self.table_id = info.table_id  # of the map it was made from (it serves every id its table comes back under)
        self.columns = info.columns
        self.problem = problem  # the columns could not be known exactly: rows of a captured table must not pass
        self.unreadable = unreadable  # a column no decoder reads: rows are never decoded (``problem`` says why)
        self.lookup_version = lookup_version  # the ColumnSource version the names came from (None: the binlog)
        fb: list[SchemaColumn | None] = [None] * len(info.columns)
        if fallback is not None and len(fallback) == len(info.columns):
            fb = list(fallback)
            for c, f in zip(info.columns, fallback, strict=True):
                if not c.labels and f.labels and c.type in (T_ENUM, T_SET):
                    c.labels = f.labels
                if c.collation is None and f.charset is not None:
                    c.collation = collation_of_charset(f.charset)  # NO_LOG: the binlog names no charsets
                elif c.collation is None and c.type in _CHARACTER and _binary_string(f.column_type):
                    c.collation = _BINARY_COLLATION  # NO_LOG: a BINARY, VARBINARY, BLOB (the history names no charset)
                if not info.has_signedness and f.unsigned is not None and c.type in _UNSIGNABLE:
                    c.unsigned = f.unsigned  # NO_LOG: the binlog says no column is unsigned; the history knows
        self.schema = TableSchema(
            info.schema, info.table, tuple(_column_meta(c, f) for c, f in zip(info.columns, fb, strict=True))
        )
        self._layout = _layout(info.columns)
        # least recently used first: a full cache drops its oldest decoder, not all of them
        self._decoders: OrderedDict[tuple[str, bytes, bytes, bool], RowsDecoder] = OrderedDict()

    def renamed(self, table_id: int, schema: str, table: str) -> TableDecoder:
        """This table map's columns as another table's (:class:`SameColumns`): its column metadata and decoders
        shared, its own schema (the names its rows carry, which the decoders are handed)."""
        twin = object.__new__(TableDecoder)
        twin.table_id = table_id
        twin.columns = self.columns
        twin.problem = self.problem
        twin.unreadable = self.unreadable
        twin.lookup_version = self.lookup_version
        twin.schema = self.schema.renamed(schema, table)
        twin._layout = self._layout
        twin._decoders = self._decoders  # the layout's code, which takes the table's schema when called
        return twin

    def _compile(self, key: tuple[str, bytes, bytes, bool]) -> RowsDecoder:
        """The generated code of rows events ``key`` (kind, column bitmaps, columnar) for this table's layout, kept
        with the layout for every table map that has it."""
        kind, present, present2, columnar = key
        ncols = len(self.columns)

        def bits(bm: bytes) -> list[int]:
            return [i for i in range(ncols) if bm[i >> 3] >> (i & 7) & 1]

        layout = self._layout
        gen = layout.gen
        if columnar:
            if layout.columnar is None:
                layout.columnar = ColumnarGen(gen.cols)
            gen = layout.columnar
        try:
            fn = gen.rows_function(kind, bits(present), bits(present2) if kind in "up" else None)
        except ValueError as exc:
            raise ValueError(f"{self.schema.full_name}: {exc}") from exc
        with _LAYOUTS_LOCK:
            decoders = layout.decoders
            decoders[key] = fn
            if len(decoders) > _MAX_DECODERS:
                del decoders[next(iter(decoders))]
        return fn

    def decoder(self, kind: str, present: bytes, present2: bytes = b"", columnar: bool = False) -> RowsDecoder:
        """The decoder of rows events of ``kind`` with these column bitmaps, ``decode(T, b, p, end)`` (``T``: this
        table's :attr:`schema`); with ``columnar`` (and a kind that has one: not a partial update) a
        :class:`~canal.protocol.ColumnarRows` decoder (:class:`ColumnarGen`)."""
        columnar = columnar and kind != "p"
        key = (kind, present, present2, columnar)
        fn = self._decoders.get(key)
        if fn is not None:
            self._decoders.move_to_end(key)
            return fn
        fn = self._layout.decoders.get(key)  # read without the lock, as _LAYOUTS is
        if fn is None:
            fn = self._compile(key)
        if len(self._decoders) >= _MAX_DECODERS:
            self._decoders.popitem(last=False)
        self._decoders[key] = fn
        return fn
