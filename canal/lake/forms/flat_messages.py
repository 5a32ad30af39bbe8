"""Entries as MQ messages: canal's FlatMessage JSON (canal-server's ``canal.mq.flatMessage=true``) or Debezium's
change-event envelope, each with the topic and partition canal's routing gives it (:mod:`canal.lake.forms.mq_routing`)
-- the rows of the ``canal`` source's ``messages`` option, which Spark's Kafka sink writes as they are (columns
``topic``, ``partition``, ``key``, ``value``).

**canal's FlatMessage** (canal 1.1.7's ``MQMessageUtils.messageConverter`` and ``messagePartition``): one message per
row entry (a rows event of one table, or a DDL), or, with ``canal.mq.partitionHash``, per entry and partition, its
rows in their order. Fields as canal's Kafka producer writes them (fastjson2 with ``WriteNulls``: every field,
``null`` where unset, in its order): ``data`` the rows' images (the after image; a DELETE's before image) as
column -> canal text, ``database``, ``es`` (the event's execute time, ms), ``gtid``, ``id`` (the micro-batch's number:
canal's is its get's batch id), ``isDdl``, ``mysqlType`` and ``sqlType`` (column -> the column's type text and
JDBC type), ``old`` (an UPDATE's before values of the columns updated -- in this row or, as canal keeps one set per
entry, an earlier row of the entry), ``pkNames``, ``sql`` (a DDL's text, else ""), ``table``, ``ts`` (when the
reader planned the message, ms: one reading of the clock a plan), ``type``. Transaction boundaries make no message.

**Debezium's envelope** (a MySQL connector's change event, JSON without schemas): one message per row, keyed by
the row's primary key (``{"id":1}``), its value ``{"before", "after", "source", "op", "ts_ms", "transaction"}``
with ``op`` ``c`` / ``u`` / ``d`` / ``r`` (a snapshot's rows) and ``source`` naming the position (``file``,
``pos``, ``row``, ``gtid``, ``server_id``, ``db``, ``table``, ``snapshot``). Values are typed as the connector types
them with ``decimal.handling.mode=string``, ``binary.handling.mode=base64`` and the default
``time.precision.mode=adaptive_time_microseconds``: integers and floating point as numbers (a BIGINT UNSIGNED
above 2^63-1 as its value, where Debezium's default ``bigint.unsigned.handling.mode=long`` wraps it negative),
DECIMAL as its plain text (``0.00000010``, never ``1.0E-7``), DATE as days since 1970-01-01, DATETIME as
milliseconds (precision up to 3) or microseconds since the epoch, TIMESTAMP as ISO-8601 UTC text with the column's
digits of fraction, TIME as microseconds, BIT(1) as a boolean and a wider BIT as its bytes, least significant first,
in base64 (Debezium's ``Bits``), binary as base64, the rest as text. A key's fields are the key's columns in the
table's column order (Debezium's follow the PRIMARY KEY clause's order: ``PRIMARY KEY (b, a)`` keys
``{"b":..,"a":..}``, a test marks the difference). DDL makes no message in this form (Debezium writes schema
changes to a topic of their own). As Debezium's connector with
its defaults: a delete (``op`` ``d``) is followed by a tombstone, a message of its key and a null value, with which
Kafka's log compaction drops the key (``tombstones.on.delete``; a keyless table's too, its key null); an update that
changes a row's primary key is a delete of the old key (and its tombstone), then a create (``c``) of the new key --
a consumer applying by key would otherwise keep the old key's row. Debezium's headers of a key change
(``__debezium.oldkey`` / ``newkey``) are not made: the rows have no headers column.

**Keys.** A canal message's key is ``FILE:OFFSET:BATCH:N`` -- its entry's binlog position, the micro-batch and its
number in the micro-batch --, unique, and equal when Spark writes the micro-batch again (a replay reads the
micro-batch's messages back from the spool, byte for byte). Kafka's sink is at least once: a consumer drops a
message whose key it has applied (see the Spark guide's MQ section).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import time
from array import array
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from itertools import accumulate
from typing import Any, Final

import attrs

from canal.errors import CanalError
from canal.lake.forms.cell_text import AbsentCellError, encode_str
from canal.lake.forms.changes import message_codec
from canal.lake.forms.message_columns import batch_images, column_texts_of
from canal.lake.forms.mq_routing import Routing
from canal.lake.types import base_type
from canal.protocol import ABSENT, ColumnarRows, Entry, EntryType, EventType, Rows, TableSchema


class MessageError(CanalError, ValueError):
    """An entry the form cannot carry faithfully: a partial JSON update's diffs (both forms hold values, not how a
    statement changed a document), or, in Debezium's envelope, a partial row image (the envelope holds whole images:
    Debezium's MySQL connector requires ``binlog_row_image=FULL``). Nothing of the batch is made."""


MESSAGE_FORMS: Final = ("canal", "debezium")
"""The values of the source's ``messages`` option."""

MESSAGE_SCHEMA_DDL: Final = "topic STRING, partition INT, key BINARY, value BINARY"
"""The rows of the ``messages`` forms, in Spark's DDL: what Spark's Kafka sink writes."""


def message_schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("topic", pa.string()),
            pa.field("partition", pa.int32()),
            pa.field("key", pa.binary()),
            pa.field("value", pa.binary()),
        ]
    )


def _js(text: str | None) -> str:
    return "null" if text is None else encode_str(text)  # json.dumps(text, ensure_ascii=False), without its checks


class _Layout:
    """The per-table-layout parts of a FlatMessage: pkNames, mysqlType, sqlType (JSON text), per columns present
    (the same for every message of the layout: made once)."""

    __slots__ = ("_cache", "table")

    def __init__(self, table: TableSchema) -> None:
        self.table = table
        self._cache: dict[tuple[int, ...], tuple[str, str, str]] = {}

    def parts(self, absent: tuple[int, ...]) -> tuple[str, str, str]:
        made = self._cache.get(absent)
        if made is None:
            columns = [c for i, c in enumerate(self.table.columns) if i not in absent]
            keys = [c.name for c in columns if c.is_key]
            made = self._cache[absent] = (
                "[" + ",".join(_js(k) for k in keys) + "]" if keys else "null",
                "{" + ",".join(f"{_js(c.name)}:{_js(c.mysql_type)}" for c in columns) + "}",
                "{" + ",".join(f"{_js(c.name)}:{int(c.sql_type)}" for c in columns) + "}",
            )
        return made


_layouts: dict[int, _Layout] = {}


def _layout(table: TableSchema) -> _Layout:
    made = _layouts.get(id(table))
    if made is None or made.table is not table:
        if len(_layouts) > 4096:
            _layouts.clear()
        made = _layouts[id(table)] = _Layout(table)
    return made


def _olds(
    codec: Any,
    before_images: Sequence[Any],
    after_images: Sequence[Any],
    absent: tuple[int, ...],
    absent_before: set[int],
) -> list[str]:
    """The ``old`` objects of an UPDATE's rows: each row's before values of the columns updated in it or in an
    earlier row of the entry (canal keeps one set of ``updated`` flags per entry), those the before images carry. A
    column is updated where its after value is not equal to its before value or not of its type; a column the after
    images lack never is.

    The set only grows: a row compares only the columns not yet updated, and the encoder of the set is made again
    only when it grows (once or twice an entry), not a row."""
    width = len(codec.table.columns)
    open_ = [i for i in range(width) if i not in absent]  # columns not yet updated (absent ones never are)
    changed: set[int] = set()
    encode: Any = None  # the encoder of the columns updated so far (made on the first row, again when they grow)
    olds: list[str] = []
    append = olds.append
    for before, after in zip(before_images, after_images, strict=True):
        if before is not None and after is not None and open_:
            grew = [i for i in open_ if before[i] != after[i] or type(before[i]) is not type(after[i])]
            if grew:
                changed.update(grew)
                open_ = [i for i in open_ if i not in changed]
                encode = None
        if encode is None:
            # image_encoder leaves out the columns it is given: those not updated (and those the image lacks)
            encode = codec.image_encoder(tuple(i for i in range(width) if i not in changed or i in absent_before))
        append(encode(before) or "{}")
    return olds


@attrs.frozen(slots=True)
class MessagePlan:
    """What the reader decides of a chunk's messages (:meth:`MessageMaker.plan`), for a task to make them
    (:meth:`MessageMaker.render`): the ``entries`` that make messages, the micro-batch ``batch_no``, the ordinal of the
    first message ``first``, the clock's ``made_ms`` (a plan rendered again makes the same bytes), and of each entry
    canal's row partitions with ``canal.mq.partitionHash`` (None: one message of ``partition``) and its topic
    (``topics``). ``count``: canal's messages (the next plan's ``first``); Debezium's keys are the rows' keys, and its
    count the rows. The ``form``, the ``destination`` and Debezium's ``tombstones`` are the plan's too: a micro-batch
    replayed by a query restarted with other options is made as it was first, its messages where they first went."""

    entries: tuple[Entry, ...]
    batch_no: int
    first: int
    made_ms: int
    parts: tuple[tuple[int, ...] | None, ...]
    count: int
    form: str
    topics: tuple[str, ...]
    partition: int
    destination: str
    tombstones: bool


class MessageMaker:
    """Makes the messages of a micro-batch's entries: ``make(entries, batch_no, first)`` gives a pyarrow
    RecordBatch in :func:`message_schema`, in two steps: :meth:`plan` -- on the reader: the refusals, the routing of
    canal's rows over partitions, the count and the clock -- and :meth:`render` -- the texts, on the task that reads
    the plan (:mod:`canal.lake.forms.entry_wire` carries it). ``form``: ``canal`` or ``debezium``; ``now_ms`` the
    clock (tests)."""

    def __init__(
        self, form: str, routing: Routing, destination: str, now_ms: Any = None, *, tombstones: bool = True
    ) -> None:
        if form not in MESSAGE_FORMS:
            raise ValueError(f"messages = {form!r}: expected canal or debezium")
        if not tombstones and form != "debezium":
            raise ValueError("tombstones are Debezium's (tombstones.on.delete): canal's FlatMessages have none")
        self.form = form
        self.routing = routing
        self.destination = destination
        self.now_ms = now_ms or (lambda: int(time.time() * 1000))
        self.tombstones = tombstones  # Debezium's tombstones.on.delete: a null value after each delete

    def make(self, entries: Iterable[Entry], batch_no: int, first: int = 0) -> Any:
        return self.render(self.plan(entries, batch_no, first))

    def plan(self, entries: Iterable[Entry], batch_no: int, first: int = 0) -> MessagePlan:
        """The :class:`MessagePlan` of ``entries``; a :class:`MessageError` for what neither form carries, here, on
        the reader, as the stream's other refusals."""
        kept: list[Entry] = []
        parts: list[tuple[int, ...] | None] = []
        topics: list[str] = []
        count = 0
        routing = self.routing
        named: dict[tuple[str, str], str] = {}  # topics by table: one string each, which the pickle writes once

        def topic(schema: str, table: str) -> str:
            made = named.get((schema, table))
            if made is None:
                made = named[schema, table] = routing.topic(schema, table)
            return made

        for entry in entries:
            if self.form == "canal":
                shape = _canal_shape(entry)
                if shape is None:
                    continue
                rows, named_topic = shape[4], topic(shape[0], shape[1])
                if rows is not None:
                    _refuse_json_diffs(rows)
                routed = None if rows is None else self._canal_parts(entry, rows, named_topic)
                count += 1 if routed is None else len(set(routed))
                parts.append(routed)
                topics.append(named_topic)
            else:
                rows = _debezium_rows(entry)
                if rows is None:
                    continue
                _refuse_json_diffs(rows)
                _refuse_partial_images(rows)
                count += len(rows)
                parts.append(None)
                topics.append(topic(entry.header.schema, entry.header.table))
            kept.append(_slim(entry))
        # hashed, only a DDL's message has no row partitions: canal sends it to partition 0
        partition = 0 if routing.hashed else routing.config.partition
        return MessagePlan(
            tuple(kept),
            batch_no,
            first,
            self.now_ms(),
            tuple(parts),
            count,
            self.form,
            tuple(topics),
            partition,
            self.destination,
            self.tombstones,
        )

    def render(self, plan: MessagePlan) -> Any:
        """The messages of ``plan``, a RecordBatch in :func:`message_schema`: as the maker that planned it makes them
        (its form, routing and destination are the plan's)."""
        import pyarrow as pa

        topics: list[str] = []
        partitions: list[int] = []
        keys: list[str] = []
        values: list[str] = []
        out = (topics, partitions, keys, values)
        entries = list(plan.entries)
        if plan.form == "canal":
            encoded = _columnar_images(entries)  # images encoded together, by rows id
            for entry, routed, topic in zip(entries, plan.parts, plan.topics, strict=True):
                self._canal(entry, routed, topic, plan, plan.first + len(values), out, encoded)
        else:
            for entry, topic in zip(entries, plan.topics, strict=True):
                self._debezium(entry, topic, plan, out)
        # keys (ASCII) are built as text and viewed as bytes in one go
        return pa.RecordBatch.from_arrays(
            [
                pa.array(topics, pa.string()),
                pa.array(partitions, pa.int32()),
                pa.array(keys, pa.string()).view(pa.binary()),
                _utf8_array(values) if plan.form == "canal" else _nullable_utf8(values),
            ],
            schema=message_schema(),
        )

    # -- canal's FlatMessage ---------------------------------------------------------------------------------------

    def _canal_parts(self, entry: Entry, rows: Rows, topic: str) -> tuple[int, ...] | None:
        """The partition of each row of ``entry`` (routed to ``topic``) with ``canal.mq.partitionHash`` (None
        without): canal's ``messagePartition`` hashes the text its message's ``data`` holds."""
        routing = self.routing
        if not routing.hashed:
            return None
        h = entry.header
        mode = routing.hash_mode(h.schema, h.table)
        if mode is None:
            return (0,) * len(rows)
        n = routing.partitions_of(topic)
        if mode.table_hash:
            return (routing.table_partition(h.table, n),) * len(rows)
        side = _side(entry)
        absent = rows.absent(side)
        names = [rows.table.columns[i].name for i in rows.table.key_indexes] if mode.auto_pk else mode.columns
        at = [rows.table.names.index(c) if c in rows.table.names else -1 for c in names]
        images = rows.before if side == "before" else rows.after
        assert images is not None
        cells = _text_cells(rows.table, images, at, absent)
        return tuple(routing.row_partition(h.schema, row, n) for row in cells)

    def _canal(
        self,
        entry: Entry,
        routed: tuple[int, ...] | None,
        topic: str,
        plan: MessagePlan,
        ordinal: int,
        out: tuple[list[Any], ...],
        encoded: dict[int, list[str]],
    ) -> None:
        shape = _canal_shape(entry)
        assert shape is not None  # the plan kept the entries that make messages
        schema, table, kind, xa, rows = shape
        h = entry.header
        rc = entry.row_change
        assert rc is not None
        batch_no = plan.batch_no
        # a message is '{"data":[' DATA ']' HEAD MIDDLE OLD PK_PART TAIL_END, joined once: the parts but DATA and OLD
        # are the entry's (HEAD, TAIL, END) or its layout's (MIDDLE, PK_PART, sqlType in TAIL_END)
        head = f',"database":{_js(schema)},"es":{h.execute_time},"gtid":{_js(h.gtid or "")},"id":{batch_no},"isDdl":'
        tail = f',"sql":{_js(rc.sql or "")},"sqlType":'
        end = f',"table":{_js(table)},"ts":{plan.made_ms},"type":{_js(kind)}}}'
        prefix = f"{h.log_file}:{h.log_offset}:{batch_no}:"
        topics, partitions, keys, values = out
        if rows is None:  # DDL, statements: a message without data
            topics.append(topic)
            partitions.append(plan.partition)
            keys.append(prefix + str(ordinal))
            ddl = "true" if rc.is_ddl and not xa else "false"
            values.append(f'{{"data":null{head}{ddl},"mysqlType":null,"old":null,"pkNames":null{tail}null{end}')
            return
        side = _side(entry)
        absent = rows.absent(side)
        pk, mysql, sql_type = _layout(rows.table).parts(absent)
        middle = f'false,"mysqlType":{mysql},"old":'
        pk_part = f',"pkNames":{pk}'
        tail_end = tail + sql_type + end
        texts, olds = _data_and_olds(rows, side, absent, kind == "UPDATE", encoded)
        if routed is None:
            topics.append(topic)
            partitions.append(plan.partition)
            keys.append(prefix + str(ordinal))
            old = "[" + ",".join(olds) + "]" if olds else "null"
            values.append("".join(('{"data":[', ",".join(texts), "]", head, middle, old, pk_part, tail_end)))
            return
        start = len(values)
        for partition in sorted(set(routed)):  # canal's order: by partition
            picked = [i for i, p in enumerate(routed) if p == partition]
            old = "[" + ",".join(olds[i] for i in picked) + "]" if olds else "null"
            data = ",".join(texts[i] for i in picked)
            topics.append(topic)
            partitions.append(partition)
            keys.append(prefix + str(ordinal + len(values) - start))
            values.append("".join(('{"data":[', data, "]", head, middle, old, pk_part, tail_end)))

    # -- Debezium's envelope ---------------------------------------------------------------------------------------

    def _debezium(self, entry: Entry, topic: str, plan: MessagePlan, out: tuple[list[Any], ...]) -> None:
        rows = _debezium_rows(entry)
        assert rows is not None  # the plan kept the entries that make messages
        rc = entry.row_change
        assert rc is not None
        op = _DEBEZIUM_OPS[rc.event_type.name]
        h = entry.header
        table = rows.table
        typers = [_debezium_typer(c.mysql_type) for c in table.columns]
        topics, partitions, keys, values = out
        partition, ts, tombstones = plan.partition, plan.made_ms, plan.tombstones
        key_indexes = table.key_indexes

        def emit(key: dict[str, Any], value: dict[str, Any]) -> None:
            # a table without a primary key: Debezium's key is null (not {})
            text = json.dumps(key, ensure_ascii=False, separators=(",", ":")) if key else None
            topics.append(topic)
            partitions.append(partition)
            keys.append(text)
            values.append(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
            if value["op"] == "d" and tombstones:
                # Debezium's tombstone (tombstones.on.delete): the delete's key and a null value, which lets Kafka's
                # log compaction drop the key -- made for a keyless table's delete too, its key null, as Debezium does
                topics.append(topic)
                partitions.append(partition)
                keys.append(text)
                values.append(None)

        befores = rows.before or [None] * len(rows)
        afters = rows.after or [None] * len(rows)
        for n, (before, after) in enumerate(zip(befores, afters, strict=True)):
            source = {
                "version": "pycanal",
                "connector": "mysql",
                "name": plan.destination,
                "ts_ms": h.execute_time,
                "snapshot": "true" if op == "r" else "false",
                "db": h.schema,
                "table": h.table,
                "server_id": h.server_id,
                "gtid": h.gtid or None,
                "file": h.log_file,
                "pos": h.log_offset,
                "row": n,
            }
            image = after if after is not None else before
            assert image is not None
            key = {table.names[i]: typers[i](image[i]) for i in key_indexes}
            typed_before, typed_after = _typed(table, typers, before), _typed(table, typers, after)
            if op == "u" and key and before is not None:
                old_key = {table.names[i]: typers[i](before[i]) for i in key_indexes}
                if old_key != key:
                    # a primary key changed: Debezium's RelationalChangeRecordEmitter makes a delete of the old key
                    # (with its tombstone) and a create of the new one, so that a consumer applying by key drops the
                    # old row (Debezium's Kafka headers __debezium.newkey / oldkey are not made)
                    emit(old_key, _envelope(typed_before, None, source, "d", ts))
                    emit(key, _envelope(None, typed_after, source, "c", ts))
                    continue
            emit(key, _envelope(typed_before, typed_after, source, op, ts))


_DEBEZIUM_OPS: Final = {"INSERT": "c", "UPDATE": "u", "DELETE": "d", "SNAPSHOT": "r"}


def _canal_shape(entry: Entry) -> tuple[str, str, str, bool, Rows | None] | None:
    """Of an entry that makes canal messages: its database and table as the message names them, its type, whether it
    is an XA COMMIT / ROLLBACK, and its rows (None: a message without data -- a DDL, a statement); None for an
    entry that makes none."""
    rc = entry.row_change
    if entry.entry_type is not EntryType.ROWDATA or rc is None:
        return None  # transaction boundaries and heartbeats: canal's converter makes no message of them
    h = entry.header
    # a DDL's database is the header's, the one the statement changes (canal's FlatMessage has no ddlSchemaName,
    # the session's): USE app; ALTER TABLE audit.log ... is audit's
    schema, table = (h.schema or rc.ddl_schema) if rc.is_ddl else h.schema, h.table
    # canal's XA COMMIT / XA ROLLBACK is a ROWDATA entry of no database or table, and not a DDL (pycanal's is
    # flagged DDL, a boundary a cursor names): as a DDL message, canal-adapter's mirror sync would run it
    xa = rc.event_type in (EventType.XACOMMIT, EventType.XAROLLBACK)
    if xa:
        schema = table = ""
    kind = rc.event_type.name
    if rc.is_ddl or not rc.event_type.is_dml or not rc.rows or kind not in ("INSERT", "UPDATE", "DELETE"):
        # DDL, statements, snapshot rows (canal has no such event type: they are sent as INSERTs)
        if rc.event_type is EventType.SNAPSHOT and not rc.rows:
            return None  # a snapshot's rowless marker (a table's end): canal has no such entry, nor a SNAPSHOT type
        if not (rc.rows and rc.event_type is EventType.SNAPSHOT):
            return schema, table, kind, xa, None
        kind = "INSERT"
    return schema, table, kind, xa, Rows.of(rc.rows)


def _debezium_rows(entry: Entry) -> Rows | None:
    """The rows of an entry that makes Debezium envelopes (DDL makes none in this form); None: it makes none."""
    rc = entry.row_change
    if entry.entry_type is not EntryType.ROWDATA or rc is None or rc.is_ddl or not rc.rows:
        return None
    return Rows.of(rc.rows) if rc.event_type.name in _DEBEZIUM_OPS else None


def _side(entry: Entry) -> str:
    """The image a message's ``data`` holds: a DELETE's before image, else the after image."""
    rc = entry.row_change
    return "before" if rc is not None and rc.event_type is EventType.DELETE else "after"


def _slim(entry: Entry) -> Entry:
    """``entry`` with what its messages are made of: not its cursor's anchor nor a snapshot's progress, which a task
    would be sent for nothing."""
    return Entry(entry.header, entry.entry_type, entry.row_change)


def _envelope(
    before: dict[str, Any] | None, after: dict[str, Any] | None, source: dict[str, Any], op: str, ts: int
) -> dict[str, Any]:
    return {"before": before, "after": after, "source": source, "op": op, "ts_ms": ts, "transaction": None}


def _nullable_utf8(texts: Sequence[str | None]) -> Any:
    """``texts`` as an Arrow binary array of their UTF-8 bytes, None as null (a Debezium tombstone's value, which
    Spark's Kafka sink writes as a record of null value)."""
    import pyarrow as pa

    nulls = texts.count(None)
    plain = _utf8_array([text or "" for text in texts])
    if not nulls:
        return plain
    valid = pa.array([text is not None for text in texts], pa.bool_()).buffers()[1]
    return pa.Array.from_buffers(pa.binary(), len(texts), [valid, *plain.buffers()[1:]], null_count=nulls)


def _columnar_images(entries: list[Entry]) -> dict[int, list[str]]:
    """The ``data`` objects of the rows events of ``entries`` decoded column by column, encoded together
    (:func:`~canal.lake.forms.message_columns.batch_images`), by the id of their rows."""
    picked = []
    for entry in entries:
        rc = entry.row_change
        if rc is not None and isinstance(rc.rows, ColumnarRows) and not rc.is_ddl:
            picked.append((rc.rows, "before" if rc.event_type is EventType.DELETE else "after"))
    return batch_images(picked) if picked else {}


def _data_and_olds(
    rows: Rows, side: str, absent: tuple[int, ...], update: bool, encoded: dict[int, list[str]]
) -> tuple[list[str], list[str] | None]:
    """The ``data`` objects of ``rows`` (their ``side`` images, which lack the columns ``absent``) and, of an
    ``update``, their ``old`` objects (None: none). Rows decoded column by column are encoded column by column
    (:mod:`canal.lake.forms.message_columns`: the same text), without the image tuples the row path reads; their
    ``data`` objects are taken from ``encoded`` (the batch's, made together) when they are there."""
    if isinstance(rows, ColumnarRows):
        columns = column_texts_of(rows.table)
        texts = encoded.get(id(rows))
        if texts is None:
            texts = columns.images([rows], side)
        has_both = rows.columns_before is not None and rows.columns_after is not None
        return texts, columns.olds(rows) if update and has_both else None
    codec = message_codec(rows.table)  # cells as canal's Column.getValue() (a DATETIME(3)'s fraction: 3 digits)
    images = rows.before if side == "before" else rows.after
    assert images is not None
    encode = codec.image_encoder(absent)
    texts = _carried(rows.table, images, absent, lambda: [encode(image) or "{}" for image in images])
    if not (update and rows.before is not None and rows.after is not None):
        return texts, None
    before, after, absent_before = rows.before, rows.after, rows.absent("before")
    olds = _carried(rows.table, before, absent_before, lambda: _olds(codec, before, after, absent, set(absent_before)))
    return texts, olds


def _utf8_array(texts: list[str]) -> Any:
    """``texts`` as an Arrow binary array of their UTF-8 bytes. A message holding a character past ASCII (a BLOB's
    canal text has one a byte above 127) is encoded once here, into bytes joined into the array's one buffer:
    ``pa.array`` of the text would have Python keep a UTF-8 copy inside each string, memory allocated afresh for
    every batch (a quarter of the maker's time on bench_spark's rows)."""
    import pyarrow as pa

    data = [text.encode() for text in texts]
    ends = array("i")  # Arrow's binary offsets: int32
    try:
        ends.extend(accumulate(map(len, data), initial=0))
    except OverflowError:
        raise MessageError(f"{len(data)} messages of {sum(map(len, data))} bytes: over 2 GiB in one batch") from None
    return pa.Array.from_buffers(pa.binary(), len(data), [None, pa.py_buffer(ends), pa.py_buffer(b"".join(data))])


def _carried(
    table: TableSchema, images: Sequence[Any], absent: tuple[int, ...], encode: Callable[[], list[str]]
) -> list[str]:
    """``encode()``, the texts of ``images``, whose columns are read from the first: each lacks the columns
    ``absent``, and only those (one rows event's columns-present bitmap), or ``MessageError`` names the first
    column that differs -- checked image by image where they are partial; in whole ones, by the encoders, which
    refuse an ABSENT cell."""
    try:
        if absent:
            for image in images:
                if image is not None and _absent_of(image) != absent:
                    raise AbsentCellError
        return encode()
    except AbsentCellError:
        odd = ((i, image) for image in images if image is not None for i in range(len(image)))
        column = next((table.names[i] for i, image in odd if (image[i] is ABSENT) != (i in absent)), "?")
        raise MessageError(
            f"{table.full_name}: column {column!r} is carried by one row image of a rows event and not "
            "by another (one rows event's images carry the same columns)"
        ) from None


def _absent_of(image: Sequence[Any]) -> tuple[int, ...]:
    return tuple(i for i, value in enumerate(image) if value is ABSENT)


def _refuse_json_diffs(rows: Rows) -> None:
    """Stop at a partial JSON update's rows: their after images lack the documents the statement changed (logged as
    diffs, row by row), and neither form can carry a diff as a value."""
    if rows.diffs is None or not any(rows.diffs):
        return
    names = sorted({rows.table.names[i] for diffs in rows.diffs if diffs for i in diffs})
    raise MessageError(
        f"{rows.table.full_name}: a partial JSON update (binlog_row_value_options=PARTIAL_JSON without the "
        f"documents in the before image) logs how the statement changed {', '.join(map(repr, names))}, not the "
        "value, and MQ messages carry values: log whole documents (binlog_row_image=FULL, where the diffs are "
        "applied as they are read, or binlog_row_value_options='')"
    )


def _refuse_partial_images(rows: Rows) -> None:
    """Stop at partial row images (``binlog_row_image`` MINIMAL or NOBLOB), which Debezium's envelope cannot hold."""
    for side in ("before", "after"):
        absent = rows.absent(side)
        if absent:
            names = ", ".join(repr(rows.table.names[i]) for i in absent)
            raise MessageError(
                f"{rows.table.full_name}: a partial row image (binlog_row_image MINIMAL or NOBLOB): its {side} image "
                f"lacks {names}, and Debezium's envelope holds whole images (its MySQL connector requires "
                "binlog_row_image=FULL)"
            )


def _text_cells(
    table: TableSchema, images: Sequence[Any], at: Sequence[int], absent: tuple[int, ...]
) -> list[list[str | None]]:
    """The canal text of the columns ``at`` (-1: not a column) of each image (absent: None): the text its message's
    ``data`` holds, which canal hashes (a SET's labels in definition order, a DATETIME(3) with three digits)."""
    from canal.lake.forms.cell_text import encode_any, message_text

    as_server = [None if i < 0 else message_text(table.columns[i].mysql_type) for i in at]
    out = []
    for image in images:
        row: list[str | None] = []
        for i, text in zip(at, as_server, strict=True):
            if i < 0 or i in absent or image[i] is None:
                row.append(None)
            else:
                row.append(json.loads(encode_any(image[i])) if text is None else text(image[i]))
        out.append(row)
    return out


_EPOCH_DAY = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1)


def _debezium_typer(mysql_type: str) -> Any:
    """A function turning a value of ``mysql_type`` into Debezium's JSON value (see the module docstring)."""
    from canal.lake.forms.cell_text import encode_any
    from canal.sql import read_column_type

    base = base_type(mysql_type)
    column = read_column_type(mysql_type, strict=False)
    fsp = getattr(column, "fsp", None) or 0

    def text(v: Any) -> Any:
        return json.loads(encode_any(v))

    if base in ("tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year"):
        return lambda v: v if isinstance(v, int) else text(v)
    if base in ("float", "double", "real"):
        return lambda v: v
    if base in ("decimal", "numeric"):
        # the plain text, as Debezium's BigDecimal.toPlainString(): str() writes 0.00000000 as 0E-8, 0.0000001 as
        # 1E-7 -- another key's bytes to a consumer keyed on them
        return lambda v: format(v, "f") if isinstance(v, Decimal) else text(v)
    if base == "date":
        return lambda v: (v - _EPOCH_DAY).days if isinstance(v, dt.date) else text(v)
    if base == "datetime":
        scale = 1000 if fsp <= 3 else 1_000_000
        return lambda v: (
            (v - _EPOCH) // dt.timedelta(microseconds=1_000_000 // scale) if isinstance(v, dt.datetime) else text(v)
        )
    if base == "timestamp":
        return lambda v: _zoned_text(v, fsp) if isinstance(v, dt.datetime) else text(v)
    if base == "time":
        return lambda v: v // dt.timedelta(microseconds=1) if isinstance(v, dt.timedelta) else text(v)
    if base == "bit":
        width = getattr(column, "length", None) or 1
        if width == 1:
            return lambda v: bool(v) if isinstance(v, int) else text(v)
        # Debezium's io.debezium.data.Bits: the value's bytes, least significant first, (width + 7) // 8 of them
        size = (width + 7) // 8
        return lambda v: base64.b64encode(v.to_bytes(size, "little")).decode() if isinstance(v, int) else text(v)
    if base in ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"):
        return lambda v: base64.b64encode(v).decode() if isinstance(v, bytes) else text(v)
    return lambda v: v if isinstance(v, str) else text(v)


def _zoned_text(value: dt.datetime, fsp: int) -> str:
    """A TIMESTAMP as Debezium's ``ZonedTimestamp``: ISO-8601 in UTC with the column's ``fsp`` digits of fraction
    (``.100`` of a TIMESTAMP(3), ``.000000`` of a TIMESTAMP(6)'s whole second), none for a TIMESTAMP(0)."""
    utc = value if value.tzinfo is None else value.astimezone(dt.UTC).replace(tzinfo=None)
    text = utc.isoformat(timespec="seconds")
    return (text + "." + f"{utc.microsecond:06d}"[:fsp] if fsp else text) + "Z"


def _typed(table: TableSchema, typers: Sequence[Any], image: Sequence[Any] | None) -> dict[str, Any] | None:
    if image is None:
        return None
    return {name: (None if v is None else typer(v)) for name, typer, v in zip(table.names, typers, image, strict=True)}


__all__ = ["MESSAGE_FORMS", "MESSAGE_SCHEMA_DDL", "MessageError", "MessageMaker", "MessagePlan", "message_schema"]
