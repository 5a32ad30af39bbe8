"""Change rows: the flat, Spark-friendly form of canal entries, and the offsets that place them.

One row per changed row (INSERT / UPDATE / DELETE) and one row per DDL statement. Values travel as canal text inside
JSON objects (``{"id": "1", "note": null}``; SQL NULL is JSON null), so one schema fits every table; :func:`project`
(in :mod:`canal.spark.project`) and :class:`~canal.spark.mirror.DeltaMirror` turn them back into typed columns with
the ``columns`` field, which describes the table layout the row was written under.

Columns (:data:`CHANGE_SCHEMA_DDL`):

=================  ==========  =================================================================================
destination        string      the canal destination
seq                bigint      a per-stream change number, strictly increasing, equal on replay
schema, table      string      source database and table (the DDL's schema for statements)
type               string      INSERT, UPDATE, DELETE, or the DDL kind (CREATE, ALTER, ERASE, TRUNCATE, ...)
is_ddl             boolean     true for statements
sql                string      the statement text (DDL rows), else null
execute_time       timestamp   when the master executed the event (UTC)
log_file           string      binlog file of the event
log_offset         bigint      offset of the event in that file
row_index          int         index of the row inside its row event
gtid               string      the event's GTID when the master has them
keys               string      primary-key values, JSON object name -> text
before, after      string      row images, JSON object name -> text (null when the image does not exist)
columns            string      JSON list of ``[name, mysql_type, is_key]`` for DML rows
=================  ==========  =================================================================================

Offsets (JSON-native dicts, :func:`offset_of`): the consumer cursor after a batch -- the anchor boundary
(``file``, ``offset``, ``included``, ``timestamp``, ``server_id``, ``gtid``) and ``rows_done`` row entries of the
transaction after it -- plus ``batch``, a counter of non-empty batches. The cursor fields are exactly what an
:class:`~canal.instance.Instance` restarts from (:func:`cursor_of`).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from json.encoder import encode_basestring as _encode_str
from typing import Any

from canal.position import EntryPosition, LogIdentity, LogPosition, journal_number
from canal.protocol import Entry, EntryType, TableSchema, render_text

CHANGE_SCHEMA_DDL = (
    "destination STRING, seq BIGINT, schema STRING, table STRING, type STRING, is_ddl BOOLEAN, sql STRING, "
    "execute_time TIMESTAMP, log_file STRING, log_offset BIGINT, row_index INT, gtid STRING, keys STRING, "
    "before STRING, after STRING, columns STRING"
)
"""The change-row schema as a Spark DDL string."""

COLUMN_NAMES: tuple[str, ...] = (
    "destination",
    "seq",
    "schema",
    "table",
    "type",
    "is_ddl",
    "sql",
    "execute_time",
    "log_file",
    "log_offset",
    "row_index",
    "gtid",
    "keys",
    "before",
    "after",
    "columns",
)

SEQ_BITS = 32
"""``seq = batch << SEQ_BITS | index``: at most 2**32 rows per batch."""

Offset = dict[str, Any]

INITIAL_OFFSET: Offset = {
    "batch": 0,
    "file": None,
    "offset": None,
    "included": False,
    "rows_done": 0,
    "timestamp": None,
    "server_id": None,
    "gtid": None,
}
"""Where a new query starts: wherever the instance starts (its saved cursor, else the configured position)."""


def arrow_schema() -> Any:
    """The change-row schema as a pyarrow schema, as Spark expects Python data sources to return it."""
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("destination", pa.string()),
            pa.field("seq", pa.int64()),
            pa.field("schema", pa.string()),
            pa.field("table", pa.string()),
            pa.field("type", pa.string()),
            pa.field("is_ddl", pa.bool_()),
            pa.field("sql", pa.string()),
            pa.field("execute_time", pa.timestamp("us", tz="UTC")),
            pa.field("log_file", pa.string()),
            pa.field("log_offset", pa.int64()),
            pa.field("row_index", pa.int32()),
            pa.field("gtid", pa.string()),
            pa.field("keys", pa.string()),
            pa.field("before", pa.string()),
            pa.field("after", pa.string()),
            pa.field("columns", pa.string()),
        ]
    )


# -- offsets -------------------------------------------------------------------------------------------------------


def offset_of(entry: Entry, batch: int) -> Offset | None:
    """The offset (cursor) just after ``entry``; None for entries that do not place a cursor (heartbeats)."""
    anchor = entry.anchor
    if anchor is None or entry.entry_type is EntryType.HEARTBEAT:
        return None
    return {
        "batch": batch,
        "file": anchor.journal_name,
        "offset": anchor.position,
        "included": anchor.included,
        "rows_done": entry.rows_done,
        "timestamp": anchor.timestamp,
        "server_id": anchor.server_id,
        "gtid": anchor.gtid,
    }


def has_position(offset: Mapping[str, Any]) -> bool:
    return offset.get("file") is not None and offset.get("offset") is not None


def cursor_of(offset: Mapping[str, Any]) -> LogPosition:
    """The instance cursor an offset names (the source address is left open: the configured master)."""
    position = EntryPosition(
        journal_name=offset["file"],
        position=offset["offset"],
        timestamp=offset.get("timestamp"),
        server_id=offset.get("server_id"),
        gtid=offset.get("gtid"),
        included=bool(offset.get("included", False)),
    )
    return LogPosition(LogIdentity(None, -1), position, int(offset.get("rows_done", 0)))


def cursor_key(offset: Mapping[str, Any]) -> tuple[int, int, int, str, int]:
    """An order on offsets by binlog position (the batch counter is ignored); the initial offset sorts first."""
    if not has_position(offset):
        return (-2, -1, 0, "", -1)
    return (
        journal_number(offset["file"]),
        int(offset["offset"]),
        1 if offset.get("included") else 0,
        str(offset["file"]),
        int(offset.get("rows_done", 0)),
    )


def same_cursor(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return cursor_key(a) == cursor_key(b)


def canonical(offset: Mapping[str, Any]) -> str:
    return json.dumps(dict(offset), sort_keys=True, separators=(",", ":"))


def position_id(entry: Entry) -> int:
    """A strictly increasing integer for an entry's binlog event: ``journal_number << 32 | offset``.

    Row entries are whole row events, so two entries never share an id; :func:`~canal.spark.batches.run_batches`
    names a batch by the id of its last entry.
    """
    h = entry.header
    return (max(journal_number(h.log_file), 0) << 32) | (h.log_offset & 0xFFFFFFFF)


# -- rows ----------------------------------------------------------------------------------------------------------


def _enc_int(v: Any) -> str:
    return f'"{v}"'


def _enc_str(v: Any) -> str:
    return _encode_str(v)


def _enc_decimal(v: Any) -> str:
    return f'"{v:f}"'


def _enc_datetime(v: dt.datetime) -> str:
    if v.tzinfo is not None:
        v = v.astimezone(dt.UTC).replace(tzinfo=None)
    return '"' + v.isoformat(" ") + '"'


def _enc_date(v: dt.date) -> str:
    return '"' + v.isoformat() + '"'


def _enc_other(v: Any) -> str:
    return _encode_str(render_text(v))


_ENCODERS: dict[type, Callable[[Any], str]] = {
    int: _enc_int,
    str: _enc_str,
    Decimal: _enc_decimal,
    dt.datetime: _enc_datetime,
    dt.date: _enc_date,
}


class _TableCodec:
    """Per-table-layout helpers: the ``columns`` JSON, key names, and a fast JSON encoder for row images."""

    __slots__ = ("columns_json", "key_indexes", "key_names", "key_prefixes", "names", "prefixes")

    def __init__(self, table: TableSchema) -> None:
        self.names = table.names
        self.key_indexes = table.key_indexes
        self.key_names = tuple(table.names[i] for i in table.key_indexes)
        self.prefixes = tuple(_encode_str(n) + ":" for n in table.names)
        self.key_prefixes = tuple(self.prefixes[i] for i in table.key_indexes)
        self.columns_json = json.dumps(
            [[c.name, c.mysql_type, c.is_key] for c in table.columns], separators=(",", ":"), ensure_ascii=False
        )

    def image(self, image: Sequence[Any] | None) -> str | None:
        """A row image as a JSON object of canal text (SQL NULL as null), built without json.dumps."""
        if image is None:
            return None
        get = _ENCODERS.get
        parts = []
        for prefix, v in zip(self.prefixes, image, strict=True):
            if v is None:
                parts.append(prefix + "null")
            else:
                parts.append(prefix + get(type(v), _enc_other)(v))
        return "{" + ",".join(parts) + "}"

    def keys(self, image: Sequence[Any] | None) -> str | None:
        if image is None:
            return None
        get = _ENCODERS.get
        parts = []
        for prefix, i in zip(self.key_prefixes, self.key_indexes, strict=True):
            v = image[i]
            parts.append(prefix + ("null" if v is None else get(type(v), _enc_other)(v)))
        return "{" + ",".join(parts) + "}"


_CODECS: dict[int, tuple[TableSchema, _TableCodec]] = {}


def _codec(table: TableSchema) -> _TableCodec:
    hit = _CODECS.get(id(table))
    if hit is not None and hit[0] is table:
        return hit[1]
    if len(_CODECS) > 4096:
        _CODECS.clear()
    codec = _TableCodec(table)
    _CODECS[id(table)] = (table, codec)
    return codec


def entries_to_columns(
    entries: Iterable[Entry], destination: str, batch: int, first_index: int = 0
) -> dict[str, list[Any]]:
    """Change rows of ``entries`` as column lists (see the module docstring), ``seq`` numbered from ``first_index``."""
    cols: dict[str, list[Any]] = {name: [] for name in COLUMN_NAMES}
    (
        c_dest,
        c_seq,
        c_schema,
        c_table,
        c_type,
        c_ddl,
        c_sql,
        c_time,
        c_file,
        c_off,
        c_idx,
        c_gtid,
        c_keys,
        c_before,
        c_after,
        c_cols,
    ) = (cols[n] for n in COLUMN_NAMES)
    seq = (batch << SEQ_BITS) + first_index
    for entry in entries:
        rc = entry.row_change
        if entry.entry_type is not EntryType.ROWDATA or rc is None:
            continue
        h = entry.header
        micros = h.execute_time * 1000
        if rc.is_ddl or not rc.event_type.is_dml:
            if not rc.is_ddl:
                continue  # a DML statement in statement form (QUERY): nothing to mirror
            c_dest.append(destination)
            c_seq.append(seq)
            seq += 1
            c_schema.append(rc.ddl_schema or h.schema)
            c_table.append(h.table)
            c_type.append(rc.event_type.name)
            c_ddl.append(True)
            c_sql.append(rc.sql)
            c_time.append(micros)
            c_file.append(h.log_file)
            c_off.append(h.log_offset)
            c_idx.append(0)
            c_gtid.append(h.gtid)
            c_keys.append(None)
            c_before.append(None)
            c_after.append(None)
            c_cols.append(None)
            continue
        type_name = rc.event_type.name
        for i, row in enumerate(rc.rows):
            codec = _codec(row.table)
            image = row.after if row.after is not None else row.before
            c_dest.append(destination)
            c_seq.append(seq)
            seq += 1
            c_schema.append(h.schema)
            c_table.append(h.table)
            c_type.append(type_name)
            c_ddl.append(False)
            c_sql.append(None)
            c_time.append(micros)
            c_file.append(h.log_file)
            c_off.append(h.log_offset)
            c_idx.append(i)
            c_gtid.append(h.gtid)
            c_keys.append(codec.keys(image))
            c_before.append(codec.image(row.before))
            c_after.append(codec.image(row.after))
            c_cols.append(codec.columns_json)
    return cols


def columns_to_batch(cols: Mapping[str, list[Any]]) -> Any:
    """A pyarrow RecordBatch in :func:`arrow_schema` from :func:`entries_to_columns` output."""
    import pyarrow as pa

    schema = arrow_schema()
    arrays = []
    for field in schema:
        values = cols[field.name]
        if field.name == "execute_time":
            arrays.append(pa.array(values, type=pa.int64()).cast(field.type))
        else:
            arrays.append(pa.array(values, type=field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def entries_to_batch(entries: Iterable[Entry], destination: str, batch: int, first_index: int = 0) -> Any:
    """Change rows of ``entries`` as one pyarrow RecordBatch."""
    return columns_to_batch(entries_to_columns(entries, destination, batch, first_index))
