"""Change rows: the flat, Spark-friendly form of canal entries (the ``canal`` source's ``images=json``).

One row per changed row (INSERT / UPDATE / DELETE) and one row per DDL statement. Values travel as canal text inside
JSON objects (``{"id": "1", "note": null}``; SQL NULL is JSON null), so one schema fits every table; :func:`project`
(in :mod:`canal.spark.project`) and :class:`~canal.lake.mirror.DeltaMirror` turn them back into typed columns with
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
keys               string      primary-key values, JSON object name -> text (of the after image; the before
                               image for a DELETE), each the key's identity: equal text for one key, as the
                               server compares keys (a FLOAT / DOUBLE -0.0 is spelt 0.0; the images keep -0.0)
old_keys           string      for an UPDATE that changed the primary key: the key before it (the mirror deletes
                               that row); null otherwise (also for a key moved between 0.0 and -0.0: one key)
before, after      string      row images, JSON object name -> text (null when the image does not exist); a
                               partial image (``binlog_row_image`` MINIMAL / NOBLOB) leaves out the columns it
                               does not carry, as canal does -- never a null in their place
columns            string      JSON list of ``[name, mysql_type, is_key]`` for DML rows
props              string      the entry's header props as a JSON object, null when it has none: ``XA_XID`` on
                               the rows of an XA transaction (prepared, not committed: they count from the
                               XACOMMIT row of that xid on, never after its XAROLLBACK), ``XA_TYPE`` / ``XA_XID``
                               on XACOMMIT / XAROLLBACK / XAPREPARE rows (:mod:`canal.parse.xa`); also
                               ``XA_RECOVERED`` on the rows an XACOMMIT brings whose XA PREPARE lies before the
                               start, and on that XACOMMIT (:mod:`canal.parse.xa_lookback`); ``RANGE_FROM`` /
                               ``RANGE_TO`` on the rows of a batch's first and last entries with change rows: the
                               binlog range it covers (:mod:`canal.lake.forms.ranges`)
log_server_id      bigint      the ``server_id`` of the server whose binlog ``log_file`` / ``log_offset`` are in
                               (the one the destination reads; a replica's binlog keeps the id of the server that
                               first wrote each event, canal's ``Header.server_id``, which this is not): positions
                               compare only within one server's binlog (:mod:`canal.lake.identity.lineage`)
before_absent,     string      the columns of ``columns`` a partial image does not carry, a JSON list of names in
after_absent                   layout order (``["a","doc"]``); null when the image carries every column or does
                               not exist. The key is then taken per column from the after image, else the
                               before image (a MINIMAL UPDATE that kept its key logs it in the before image only);
                               a key column neither carries is left out of ``keys``
json_diffs         string      a partial JSON update's diffs of the JSON columns ``after_absent`` names because
                               the server logged how the statement changed them, not their value (MySQL's
                               ``binlog_row_value_options=PARTIAL_JSON`` where the before image does not carry
                               the document): ``{"doc":[["REPLACE","$.age","26"]]}``
                               (:mod:`canal.lake.forms.json_diffs`); null otherwise. The rows of one such event may
                               differ in ``after_absent``
=================  ==========  =================================================================================

Besides DML and DDL rows: a DML statement logged as a statement (a session with ``binlog_format`` STATEMENT or
MIXED) is a row with ``is_ddl`` false, its ``sql`` and no images (a mirror cannot replay SQL text: it stops there,
:mod:`canal.lake.apply.stops`); the end of an XA transaction's first phase is an ``XAPREPARE`` row (no table), so
a consumer knows which xids were prepared in its stream.

The offsets that place a micro-batch of change rows in the binlog are the ``canal`` source's:
:mod:`canal.spark.offsets`.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any, ClassVar, Final

from canal.lake.forms.cell_text import encode_any, encode_float, encode_str, message_text, server_text
from canal.lake.forms.json_diffs import diffs_json
from canal.lake.forms.typed_batch import SEQ_BITS
from canal.lake.forms.typed_layout import PerTableSchema
from canal.lake.key_identity import is_float_type
from canal.lake.types import base_type
from canal.parse.xa import XA_PREPARE_TYPE
from canal.position import journal_number
from canal.protocol import Entry, EntryType, Rows, TableSchema
from canal.sql import read_column_type

_COLUMNS: tuple[tuple[str, str], ...] = (  # name, Spark SQL type; see the table in the module docstring
    ("destination", "STRING"),
    ("seq", "BIGINT"),
    ("schema", "STRING"),
    ("table", "STRING"),
    ("type", "STRING"),
    ("is_ddl", "BOOLEAN"),
    ("sql", "STRING"),
    ("execute_time", "TIMESTAMP"),
    ("log_file", "STRING"),
    ("log_offset", "BIGINT"),
    ("row_index", "INT"),
    ("gtid", "STRING"),
    ("keys", "STRING"),
    ("old_keys", "STRING"),
    ("before", "STRING"),
    ("after", "STRING"),
    ("columns", "STRING"),
    ("props", "STRING"),
    ("log_server_id", "BIGINT"),
    ("before_absent", "STRING"),
    ("after_absent", "STRING"),
    ("json_diffs", "STRING"),
)

CHANGE_SCHEMA_DDL = ", ".join(f"{name} {sql_type}" for name, sql_type in _COLUMNS)
"""The change-row schema as a Spark DDL string."""

COLUMN_NAMES: tuple[str, ...] = tuple(name for name, _ in _COLUMNS)


def arrow_schema() -> Any:
    """The change-row schema as a pyarrow schema, as Spark expects Python data sources to return it."""
    import pyarrow as pa

    arrow_types = {
        "STRING": pa.string(),
        "BIGINT": pa.int64(),
        "INT": pa.int32(),
        "BOOLEAN": pa.bool_(),
        "TIMESTAMP": pa.timestamp("us", tz="UTC"),  # Spark's TIMESTAMP: an instant, read in the session time zone
    }
    return pa.schema([pa.field(name, arrow_types[sql_type]) for name, sql_type in _COLUMNS])


LATER_COLUMNS: Final = ("log_server_id", "before_absent", "after_absent", "json_diffs")
"""Change-row columns added since spool files were first written (:func:`conform` adds them to older rows)."""


def conform(rows: Any) -> Any:
    """Change rows (a RecordBatch or Table, JSON or VARIANT images) in today's schema: rows written before a column of
    :data:`LATER_COLUMNS` was (a spool file of an older pycanal) get it as nulls -- positions of an unknown server,
    which the mirror compares as it did then (:mod:`canal.lake.identity.lineage`), and whole images."""
    import pyarrow as pa

    names = rows.schema.names
    missing = [name for name in LATER_COLUMNS if name not in names]
    if not missing or "gtid" not in names:  # today's, or packed batches
        return rows
    wanted = arrow_schema()
    columns = [*rows.columns, *(pa.nulls(rows.num_rows, wanted.field(name).type) for name in missing)]
    schema = pa.schema([*rows.schema, *(wanted.field(name) for name in missing)], metadata=rows.schema.metadata)
    order = [name for name in schema.names if name not in LATER_COLUMNS] + list(LATER_COLUMNS)
    if isinstance(rows, pa.RecordBatch):
        return pa.RecordBatch.from_arrays(columns, schema=schema).select(order)
    return pa.Table.from_arrays(columns, schema=schema).select(order)


def position_id(entry: Entry) -> int:
    """A strictly increasing integer for an entry's binlog event: ``journal_number << 32 | offset``.

    Row entries are whole row events, so two entries never share an id; :func:`~canal.spark.batches.run_batches`
    names a batch by the id of its last entry.
    """
    h = entry.header
    return (max(journal_number(h.log_file), 0) << 32) | (h.log_offset & 0xFFFFFFFF)


# -- rows ----------------------------------------------------------------------------------------------------------
#
# Row images become JSON text on the reader's hot path (one call per image), so each table layout gets an encoder
# generated for it: the image is unpacked into locals and formatted with one ``%`` into a template holding the quoted
# column names. Each cell takes a fast branch for the Python type its MySQL type decodes to and falls back to the
# generic per-type encoders (:mod:`canal.lake.forms.cell_text`) for anything else, so a surprising value is still
# rendered correctly, just slower.


# the fast branch per MySQL base type: (guard, expression) on the cell variable {v}; {s} is a spare local
_INT_CELL = ("type({v}) is int", "'\"%d\"' % {v}")
_TEXT_CELL = ("type({v}) is str", "E({v})")
_BINARY_CELL = ("type({v}) is bytes", "E({v}.decode('latin-1'))")
_DATETIME_CELL = ("type({v}) is DT and {v}.tzinfo is None", "'\"' + {v}.isoformat(' ') + '\"'")
_FAST_CELLS: dict[str, tuple[str, str]] = {
    **dict.fromkeys(("tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year"), _INT_CELL),
    **dict.fromkeys(("char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "json"), _TEXT_CELL),
    **dict.fromkeys(("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"), _BINARY_CELL),
    # str() of a binlog DECIMAL is its plain digits unless tiny enough for exponent notation
    **dict.fromkeys(("decimal", "numeric"), ("type({v}) is D and 'E' not in ({s} := str({v}))", "'\"' + {s} + '\"'")),
    **dict.fromkeys(("float", "double"), ("type({v}) is float", "F({v})")),
    "datetime": _DATETIME_CELL,
    "timestamp": _DATETIME_CELL,
    "date": ("type({v}) is DA", "'\"' + {v}.isoformat() + '\"'"),
}
# canal's FlatMessage text of the DATETIME / TIMESTAMP precisions isoformat spells exactly (timespec): a whole
# DATETIME(6) as .000000, a DATETIME(3) with three digits (its value holds no more); the others take message_text
_MESSAGE_DATETIME_CELLS: dict[int, tuple[str, str]] = {
    fsp: ("type({v}) is DT and {v}.tzinfo is None", f"'\"' + {{v}}.isoformat(' ', '{spec}') + '\"'")
    for fsp, spec in ((3, "milliseconds"), (6, "microseconds"))
}
GENERATED_GLOBALS: Final = {
    "E": encode_str,
    "F": encode_float,
    "G": encode_any,
    "D": Decimal,
    "DT": dt.datetime,
    "DA": dt.date,
}
"""The names the generated cell expressions (:func:`cell_code`) read."""


def cell_code(mysql_type: str, i: int, namespace: dict[str, Any], *, keys: bool = False, message: bool = False) -> str:
    """The generated expression giving the JSON text of the cell ``v{i}`` of a column of ``mysql_type`` (``null`` for
    SQL NULL), in a namespace holding :data:`GENERATED_GLOBALS` (what else it uses is added to ``namespace``); with
    ``keys``, a float cell as its key identity (-0.0 spelt 0.0, :mod:`canal.lake.key_identity`); with ``message``,
    the cell as canal's FlatMessage holds it (:func:`~canal.lake.forms.cell_text.message_text`). The one spelling
    of a cell: the row encoders here and the column encoders of :mod:`canal.lake.forms.message_columns` use it."""
    var = f"v{i}"
    fast = _FAST_CELLS.get(base_type(mysql_type))
    if keys and fast is not None and is_float_type(mysql_type):
        fast = (fast[0], "F({v} + 0.0)")  # -0.0 + 0.0 is 0.0: the key MySQL compares
    as_server = (message_text if message else server_text)(mysql_type)
    if message and as_server is not None and base_type(mysql_type) in ("datetime", "timestamp"):
        # a naive value of a precision isoformat spells inline; any other through message_text
        fast = _MESSAGE_DATETIME_CELLS.get(read_column_type(mysql_type, strict=False).params[0])
    else:
        fast = None if as_server is not None else fast
    if as_server is not None:
        namespace[f"T{i}"] = as_server
        if fast is None:
            return f"('null' if {var} is None else E(T{i}({var})))"
        guard, expr = (part.format(v=var, s=f"s{i}") for part in fast)
        return f"('null' if {var} is None else {expr} if {guard} else E(T{i}({var})))"
    if fast is None:
        return f"('null' if {var} is None else G({var}))"
    guard, expr = (part.format(v=var, s=f"s{i}") for part in fast)
    return f"('null' if {var} is None else {expr} if {guard} else G({var}))"


def _object_encoder(
    names: Sequence[str],
    mysql_types: Sequence[str],
    indexes: Sequence[int],
    width: int,
    *,
    keys: bool = False,
    message: bool = False,
) -> Callable[[Sequence[Any]], str]:
    """A function rendering the cells at ``indexes`` of a ``width``-long image as a JSON object keyed by ``names``
    (a ``ValueError`` for an image of another width); with ``keys``, a float cell as its key identity (-0.0 spelt
    0.0, :mod:`canal.lake.key_identity`); with ``message``, each cell as canal's FlatMessage holds it
    (:func:`~canal.lake.forms.cell_text.message_text`)."""
    template = "{" + ",".join(encode_str(n).replace("%", "%%") + ":%s" for n in names) + "}"
    namespace: dict[str, Any] = dict(GENERATED_GLOBALS)
    cells = [
        cell_code(mysql_type, i, namespace, keys=keys, message=message)
        for i, mysql_type in zip(indexes, mysql_types, strict=True)
    ]
    used = set(indexes)
    unpack = ", ".join(f"v{i}" if i in used else "_" for i in range(width))
    source = (
        f"def encode(image):\n    {unpack}, = image\n    return {template!r} % ({''.join(c + ', ' for c in cells)})\n"
    )
    exec(compile(source, "<canal.lake.forms.changes encoder>", "exec"), namespace)
    encode: Callable[[Sequence[Any]], str] = namespace["encode"]
    return encode


class _TableCodec:
    """Per-table-layout helpers: the ``columns`` JSON and JSON encoders for row images and their keys -- of whole
    images, and (made when first met) of partial ones by the columns they lack."""

    __slots__ = ("_image", "_keys", "_partial", "columns_json", "table")
    message: ClassVar[bool] = False  # images as canal's FlatMessage holds them (_MessageCodec)

    def __init__(self, table: TableSchema) -> None:
        self.table = table
        types = [c.mysql_type for c in table.columns]
        width = len(table.columns)
        self._image = _object_encoder(table.names, types, range(width), width, message=self.message)
        keys = table.key_indexes
        self._keys = _object_encoder([table.names[i] for i in keys], [types[i] for i in keys], keys, width, keys=True)
        self._partial: dict[tuple[str, tuple[int, ...]], Callable[[Sequence[Any]], str]] = {}
        self.columns_json = json.dumps(
            [[c.name, c.mysql_type, c.is_key] for c in table.columns], separators=(",", ":"), ensure_ascii=False
        )

    def image(self, image: Sequence[Any] | None) -> str | None:
        """A row image as a JSON object of canal text (SQL NULL as null)."""
        return None if image is None else self._image(image)

    def keys(self, image: Sequence[Any] | None) -> str | None:
        """The primary-key cells of an image as a JSON object, each as its key identity (a float's -0.0 as 0.0)."""
        return None if image is None else self._keys(image)

    def image_encoder(self, absent: tuple[int, ...]) -> Callable[[Sequence[Any] | None], str | None]:
        """:meth:`image` of images that do not carry the columns ``absent``: they are left out of the object."""
        if not absent:
            return self.image
        encode = self._encoder("image", absent)
        return lambda image: None if image is None else encode(image)

    def keys_encoder(self, absent: tuple[int, ...]) -> Callable[[Sequence[Any] | None], str | None]:
        """:meth:`keys` of key images that do not carry the key columns ``absent`` (left out of the object)."""
        if not absent:
            return self.keys
        encode = self._encoder("keys", absent)
        return lambda image: None if image is None else encode(image)

    def _encoder(self, kind: str, absent: tuple[int, ...]) -> Callable[[Sequence[Any]], str]:
        made = self._partial.get((kind, absent))
        if made is None:
            table = self.table
            chosen = table.key_indexes if kind == "keys" else range(len(table.columns))
            kept = [i for i in chosen if i not in absent]
            made = self._partial[(kind, absent)] = _object_encoder(
                [table.names[i] for i in kept],
                [table.columns[i].mysql_type for i in kept],
                kept,
                len(table.columns),
                keys=kind == "keys",
                message=self.message,
            )
        return made

    def absent_json(self, absent: tuple[int, ...]) -> str | None:
        """The ``before_absent`` / ``after_absent`` text of images lacking the columns ``absent`` (None: none)."""
        if not absent:
            return None
        names = [self.table.names[i] for i in absent]
        return json.dumps(names, separators=(",", ":"), ensure_ascii=False)


table_codec: Final = PerTableSchema(_TableCodec)
"""The encoders of ``table``'s layout (made once per layout, kept for the next rows)."""


class _MessageCodec(_TableCodec):
    """A :class:`_TableCodec` whose images hold each cell as canal's FlatMessage does (a DATETIME(3)'s fraction with
    three digits): the ``messages`` option's (:mod:`canal.lake.forms.flat_messages`)."""

    __slots__ = ()
    message = True


message_codec: Final = PerTableSchema(_MessageCodec)
"""The encoders of ``table``'s layout for canal's FlatMessage (made once per layout, kept for the next rows)."""


# Entry-level fields (one value per binlog event) are collected once per entry and spread over the entry's rows
# with one ``take`` per column in pyarrow; only keys and images are built per row.
_ENTRY_FIELDS = (
    "schema",
    "table",
    "type",
    "is_ddl",
    "sql",
    "execute_time",
    "log_file",
    "log_offset",
    "gtid",
    "columns",
    "props",
    "log_server_id",
    "before_absent",
    "after_absent",
)


def log_server_id(entry: Entry) -> int | None:
    """The id of the server whose binlog holds ``entry``'s position: its anchor's (the parser stamps every anchor
    with the server it reads, :meth:`canal.parse.convert.EntryConverter.reset`); None where an entry has none."""
    anchor = entry.anchor
    return None if anchor is None else anchor.server_id


def _props_json(props: Mapping[str, str]) -> str | None:
    return json.dumps(dict(props), sort_keys=True, ensure_ascii=False, separators=(",", ":")) if props else None


def _is_xa_end(entry: Entry) -> bool:
    return entry.entry_type is EntryType.TRANSACTIONEND and entry.header.props.get("XA_TYPE") == "XA_END"


def change_rows(entry: Entry) -> int:
    """How many change rows :func:`entries_to_batch` makes of ``entry``: its rows, one for a DDL or a statement,
    one for an XA transaction's end (``XAPREPARE``), none for other transaction boundaries and heartbeats."""
    rc = entry.row_change
    if entry.entry_type is not EntryType.ROWDATA or rc is None:
        return 1 if _is_xa_end(entry) else 0
    if rc.is_ddl:
        return 1
    if rc.event_type.is_dml and rc.rows:
        return len(rc.rows)
    return 1 if rc.sql and not rc.rows else 0


def change_type(entry: Entry) -> str:
    """The ``type`` of the change rows :func:`entries_to_batch` makes of ``entry`` (with :func:`change_rows` of
    them): its event type's name (``INSERT``, ``SNAPSHOT``, ``ALTER``, ...), ``XAPREPARE`` for an XA transaction's
    end."""
    rc = entry.row_change
    if entry.entry_type is not EntryType.ROWDATA or rc is None:
        return XA_PREPARE_TYPE if _is_xa_end(entry) else entry.entry_type.name
    return rc.event_type.name


def entries_to_batch(entries: Iterable[Entry], destination: str, batch: int, first_index: int = 0) -> Any:
    """Change rows of ``entries`` (see the module docstring) as one pyarrow RecordBatch in :func:`arrow_schema`,
    ``seq`` numbered from ``batch << SEQ_BITS | first_index``."""
    import numpy as np
    import pyarrow as pa

    per_entry: dict[str, list[Any]] = {name: [] for name in _ENTRY_FIELDS}
    (
        e_schema,
        e_table,
        e_type,
        e_ddl,
        e_sql,
        e_time,
        e_file,
        e_off,
        e_gtid,
        e_cols,
        e_props,
        e_server,
        e_babs,
        e_aabs,
    ) = per_entry.values()
    counts: list[int] = []
    keys: list[str | None] = []
    old_keys: list[str | None] = []
    before: list[str | None] = []
    after: list[str | None] = []
    diffed: list[tuple[int, str | None, str | None]] = []  # (row, after_absent, json_diffs) of partial JSON updates
    for entry in entries:
        rc = entry.row_change
        h = entry.header
        if entry.entry_type is not EntryType.ROWDATA or rc is None:
            if _is_xa_end(entry):  # the XA transaction's rows are prepared: say so, with its xid
                _statement_row(per_entry, counts, (keys, old_keys, before, after), entry, XA_PREPARE_TYPE, False)
            continue
        if rc.is_ddl:
            e_schema.append(rc.ddl_schema or h.schema)
            e_ddl.append(True)
            e_sql.append(rc.sql)
            e_cols.append(None)
            e_babs.append(None)
            e_aabs.append(None)
            counts.append(1)
            keys.append(None)
            old_keys.append(None)
            before.append(None)
            after.append(None)
        elif rc.event_type.is_dml and rc.rows:
            rows = Rows.of(rc.rows)  # image by image, a side at a time: no RowData is built
            codec = table_codec(rows.table)
            nones = [None] * len(rows)
            befores = nones if rows.before is None else rows.before
            afters = nones if rows.after is None else rows.after
            absent_before, absent_after = rows.absent("before"), rows.absent("after")
            if absent_before or absent_after:  # a partial image (binlog_row_image MINIMAL / NOBLOB)
                after_keys, before_keys = _partial_keys(codec, befores, afters, absent_before, absent_after)
            else:
                after_keys = list(map(codec.keys, afters))
                before_keys = list(map(codec.keys, befores))
            keys.extend(a if a is not None else b for a, b in zip(after_keys, before_keys, strict=True))
            old_keys.extend(None if a is None or b == a else b for a, b in zip(after_keys, before_keys, strict=True))
            before.extend(map(codec.image_encoder(absent_before), befores))
            shapes = rows.absent_of("after")
            if shapes is not None:  # a partial JSON update: its rows' after images differ in the columns they carry
                assert rows.diffs is not None
                start = len(after)
                after.extend(codec.image_encoder(shape)(image) for shape, image in zip(shapes, afters, strict=True))
                diffed.extend(
                    (start + n, codec.absent_json(shape), diffs_json(rows.table, diffs))
                    for n, (shape, diffs) in enumerate(zip(shapes, rows.diffs, strict=True))
                )
                e_aabs.append(None)  # each row's, above
            else:
                after.extend(map(codec.image_encoder(absent_after), afters))
                e_aabs.append(codec.absent_json(absent_after))
            e_schema.append(h.schema)
            e_ddl.append(False)
            e_sql.append(None)
            e_cols.append(codec.columns_json)
            e_babs.append(codec.absent_json(absent_before))
            counts.append(len(rc.rows))
        elif rc.sql and not rc.rows:  # a statement inside a transaction (statement-format DML, ...)
            _statement_row(per_entry, counts, (keys, old_keys, before, after), entry, rc.event_type.name, False)
            continue
        else:
            continue  # an empty row event: nothing to mirror
        e_props.append(_props_json(h.props))
        e_table.append(h.table)
        e_type.append(rc.event_type.name)
        e_time.append(h.execute_time * 1000)
        e_file.append(h.log_file)
        e_off.append(h.log_offset)
        e_gtid.append(h.gtid)
        e_server.append(log_server_id(entry))

    schema = arrow_schema()
    n_rows = len(keys)
    counts_np = np.asarray(counts, dtype=np.int64)
    spread = pa.array(np.repeat(np.arange(len(counts), dtype=np.int64), counts_np))
    starts = np.cumsum(counts_np) - counts_np
    row_index = np.arange(n_rows, dtype=np.int64) - np.repeat(starts, counts_np)
    first = (batch << SEQ_BITS) + first_index
    arrays: dict[str, Any] = {
        "destination": pa.array([destination], pa.string()).take(pa.array(np.zeros(n_rows, dtype=np.int64))),
        "seq": pa.array(np.arange(first, first + n_rows, dtype=np.int64)),
        "row_index": pa.array(row_index.astype(np.int32)),
        "keys": pa.array(keys, pa.string()),
        "old_keys": pa.array(old_keys, pa.string()),
        "before": pa.array(before, pa.string()),
        "after": pa.array(after, pa.string()),
    }
    for name, values in per_entry.items():
        field = schema.field(name)
        column = (
            pa.array(values, pa.int64()).cast(field.type) if name == "execute_time" else pa.array(values, field.type)
        )
        arrays[name] = column.take(spread)
    arrays["json_diffs"] = pa.nulls(n_rows, pa.string())
    if diffed:
        after_absent = arrays["after_absent"].to_pylist()
        json_diffs: list[str | None] = [None] * n_rows
        for row, absent, diffs in diffed:
            after_absent[row], json_diffs[row] = absent, diffs
        arrays["after_absent"] = pa.array(after_absent, pa.string())
        arrays["json_diffs"] = pa.array(json_diffs, pa.string())
    return pa.RecordBatch.from_arrays([arrays[f.name] for f in schema], schema=schema)


def _partial_keys(
    codec: _TableCodec,
    befores: Sequence[Sequence[Any] | None],
    afters: Sequence[Sequence[Any] | None],
    absent_before: tuple[int, ...],
    absent_after: tuple[int, ...],
) -> tuple[list[str | None], list[str | None]]:
    """The keys text of partial images' rows, after and before: the after image's key takes each key column it does
    not carry from the before image (a MINIMAL UPDATE logs a key it kept in the before image only); a key column
    neither image carries is left out of the text (the mirror stops at such a key)."""
    key_indexes = codec.table.key_indexes
    before_keys = list(map(codec.keys_encoder(tuple(i for i in absent_before if i in key_indexes)), befores))
    lacking = [i for i in key_indexes if i in absent_after]
    if not lacking:
        return list(map(codec.keys_encoder(()), afters)), before_keys
    unknown = tuple(i for i in lacking if i in absent_before)
    encode = codec.keys_encoder(unknown)

    def after_key(before: Sequence[Any] | None, after: Sequence[Any] | None) -> str | None:
        if after is None:
            return None
        if before is None:
            return codec.keys_encoder(tuple(lacking))(after)
        merged = list(after)
        for i in lacking:
            merged[i] = before[i]
        return encode(merged)

    return list(map(after_key, befores, afters)), before_keys


def _statement_row(
    per_entry: dict[str, list[Any]],
    counts: list[int],
    per_row: tuple[list[str | None], ...],
    entry: Entry,
    kind: str,
    is_ddl: bool,
) -> None:
    """One change row without images for ``entry``: a statement (its ``sql``) or an XA boundary."""
    h = entry.header
    rc = entry.row_change
    values = {
        "schema": (rc.ddl_schema if rc is not None else "") or h.schema,
        "table": h.table,
        "type": kind,
        "is_ddl": is_ddl,
        "sql": rc.sql if rc is not None else None,
        "execute_time": h.execute_time * 1000,
        "log_file": h.log_file,
        "log_offset": h.log_offset,
        "gtid": h.gtid,
        "columns": None,
        "props": _props_json(h.props),
        "log_server_id": log_server_id(entry),
        "before_absent": None,
        "after_absent": None,
    }
    for name, column in per_entry.items():
        column.append(values[name])
    counts.append(1)
    for column in per_row:
        column.append(None)
