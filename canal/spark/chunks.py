"""Snapshot chunks read on Spark executors: the driver plans key ranges, executors read them.

With ``snapshot.partitions`` set, the ``canal`` source does not read a snapshot's rows in its one reader process.
The driver plans each table's chunks as key ranges (:class:`ChunkPlanner`: the primary key, else a unique key over
NOT NULL columns; index-only boundary queries), at most ``snapshot.partitions`` of them per micro-batch, beside that
micro-batch's binlog rows. Each range becomes an input partition that an executor reads (:func:`read_chunk`) over its
own connection, in one read-only transaction ``WITH CONSISTENT SNAPSHOT``, and turns into SNAPSHOT change rows. An
initial load then scales with executors.

Why the mirror still ends equal to the source. The stream starts at the server's position ``S``, pinned before
anything is planned; every range is read at a position ``P`` after ``S`` and after the end ``E`` of the binlog rows of
its micro-batch (the executor reads after the driver planned the batch, and ``E`` was already in the binlog). A
range's rows are the table's rows at ``P``, exactly (MariaDB's consistent snapshot position), so they are newer than
every binlog row of their micro-batch: their ``seq`` numbers follow those rows' (:data:`PARTITION_SEQ_BASE`). Binlog
rows of positions between ``E`` and ``P`` reach the mirror in later micro-batches, after the range's rows. Each is a
full image applied as an upsert or a delete, so for every key the last one before ``P`` leaves the row as it was at
``P`` -- the state the range already wrote -- and everything after ``P`` applies as usual. Rows beyond a table's last
key at planning time (read after ``S``) come only through the binlog, which holds their inserts.

Servers without that position (MySQL). All the above needs of ``P`` is that it is not before ``E``: that the read
sees every transaction up to ``E``. MySQL writes a transaction to the binlog before InnoDB makes it visible, so a read
begun after ``E`` was in the binlog may still miss one just before ``E``. With the snapshot's watermark table
(``pycanal.snapshot.watermark.table``), each read therefore first commits a mark there and only then begins its
snapshot (:func:`~canal.snapshot.marks.begin_read_after_mark`): transactions become visible in binlog order and the
mark's commit has returned, so everything before the mark, ``E`` included, is visible to the read. One mark, not
DBLog's two: nothing here waits for the read's exact place (the parser drops the table's rows all the same). The
rows then carry the binlog end read after the mark as their position: a label, since the read may miss a
transaction written there but not yet visible, which the binlog delivers after the range as above.

What this gives up against the driver's snapshot (:mod:`canal.snapshot`): there, a chunk's rows join the stream at
their exact position, so the mirror only ever moves forward. Here, between the micro-batch holding a range and the
one holding the binlog up to ``P``, a mirror row can show a state older than one it showed before; it converges once
the stream passes ``P``.

DDL. A range is read under the table's layout at its read's position, not the one of its planning: the layout is read
before the read's snapshot begins and again when it ends, and the range is read again if it changed
(:func:`_layout_now`), so its rows always carry the columns they were read with; a table dropped since its planning
gives no rows (the DROP comes with the stream). A key column gone fails the range with
:class:`~canal.errors.SnapshotError`.

Replays. A micro-batch Spark planned but did not commit must come back identically, but a range read again would be
read at a newer position. So an executor writes the range's rows to the spool directory first (Arrow IPC, fsynced,
published only if no file is there: :func:`~canal.files.rename_if_absent`) and returns what the file holds; a replay
returns the file, and of attempts of one range running at once (speculative execution) the first to publish wins and
all return its rows. The spool directory must therefore be reachable from the executors (a shared file system in a
cluster, as the checkpoint is) and support renames that never replace a file, or hard links (local file systems and
NFS do).

Reading ahead. Spark takes seconds to start a micro-batch's tasks (the executors' Python workers, the job), the first
one of a query most. Meanwhile the reader process, which planned the ranges, reads them itself from the last one back
(:func:`read_ahead`, the source's ``prefetch`` option), publishing each as a task would, up to the first range a task
has published or is reading (a marker file beside the range's, :func:`task_marker`); a task whose range is published
returns the file. It starts as soon as the micro-batch is planned, after its binlog end: its reads are placed as a
task's are. That is before Spark logs the end offset, and a plan Spark never logs (the process died first) is made again
differently, so a range's file is named after the range as well as its micro-batch and index.

Reading fast. For a table whose key is its primary key and whose columns are all of the types below, the server
renders each row's key and image as the change row's JSON text (``CONCAT`` / ``JSON_QUOTE``) and joins a piece of
rows into one value (``GROUP_CONCAT``), which pyarrow splits: no Python work per row. The text is the same as the
Python encoder's (:mod:`canal.lake.forms.changes`) for these types: integers and DECIMAL (plain digits), DATE, DATETIME
and TIMESTAMP without fractional seconds (the session runs in UTC), and non-binary text, ENUM and JSON (MariaDB
writes the hex digits of a few control characters in upper case; those rows are re-encoded). Other tables are read
row by row through the snapshot's value readers and the same encoder as binlog rows.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from json.encoder import encode_basestring
from pathlib import Path
from typing import Any, BinaryIO

import attrs

from canal.errors import SnapshotError
from canal.files import HardLinksUnsupportedError
from canal.lake.forms.changes import arrow_schema, table_codec
from canal.lake.forms.typed_batch import SEQ_BITS
from canal.lake.store.storage import Storage
from canal.log import destination_logger
from canal.position import EntryPosition, KeyValue, key_from_json, key_to_json
from canal.protocol import ColumnMeta, TableSchema
from canal.schema.information_schema import TABLE_COLUMNS_SQL, TABLE_KEYS_SQL, catalog_from_columns
from canal.snapshot.marks import begin_read_after_mark
from canal.snapshot.reader import (
    ChunkReader,
    as_text,
    begin_consistent_read,
    key_after,
    key_after_arguments,
    key_arguments,
    prepare_snapshot_session,
)
from canal.snapshot.values import column_expression, rows_reader
from canal.spark.spool import discard_numbered, ipc_options
from canal.sql import quote_name, read_column_type
from canal.sql.types import INTEGER_TYPES, TEXT_TYPES

__all__ = [
    "PARTITION_SEQ_BASE",
    "PARTITION_SEQ_SPAN",
    "ChunkPartition",
    "ChunkPlanner",
    "ChunkRange",
    "discard_chunks_through",
    "read_ahead",
    "read_chunk",
    "task_marker",
]

PARTITION_SEQ_BASE = 1 << 31
"""A micro-batch's binlog rows take ``seq`` indexes below this; its chunk partitions' rows follow them."""
PARTITION_SEQ_SPAN = 1 << 22
"""``seq`` indexes of one chunk partition: the most rows a range may hold when it is read."""
MAX_PARTITIONS = PARTITION_SEQ_BASE // PARTITION_SEQ_SPAN
"""Chunk partitions one micro-batch may hold (512)."""

_TASK_MARK = ".task"  # beside a range's spool file while a task reads it (task_marker)
_CHUNKS = "chunks"  # the ranges' directory in the spool
_PIECE_ROWS = 8192  # rows an executor reads per query of a range: what its memory holds at once
_UPPER_HEX = r"\\u00[01][A-F]"  # MariaDB's JSON_QUOTE of U+000B, U+000E, U+000F, U+001A..U+001F
_ER_TABLE_DEF_CHANGED = 1412  # a table's definition changed after the transaction's snapshot began
_DEFINITION_RETRIES = 5  # reads of a range whose table's definition keeps changing before it fails


# -- planning (the driver) -------------------------------------------------------------------------------------------


@attrs.frozen
class ChunkRange:
    """Rows of table ``table`` (``db.table``) with key in ``(lo, hi]``; ``lo`` None: from the first row, ``hi``
    None: to the last. A table without a chunk key is one range with both None."""

    table: str
    lo: tuple[KeyValue, ...] | None
    hi: tuple[KeyValue, ...] | None

    def to_json(self) -> list[Any]:
        return [
            self.table,
            None if self.lo is None else key_to_json(self.lo),
            None if self.hi is None else key_to_json(self.hi),
        ]

    @classmethod
    def from_json(cls, data: Any) -> ChunkRange:
        table, lo, hi = data
        return cls(str(table), None if lo is None else key_from_json(lo), None if hi is None else key_from_json(hi))


class ChunkPlanner:
    """Plans the ranges of ``layouts``' tables, ``rows`` rows each, over connections from ``connect`` (pymysql,
    conversions off).

    The plan's progress (JSON, kept in the source's offsets): ``{"tables": [...], "table": i, "after": key | null,
    "last": key | null, "rows": n}`` -- the table being planned, the key its next range starts after, its last key
    when its planning began (ranges end there: later rows come through the binlog), and the rows planned so far.
    """

    def __init__(self, connect: Callable[[], Any], layouts: Sequence[TableSchema], rows: int) -> None:
        if rows < 1:
            raise ValueError("rows must be >= 1")
        self._connect = connect
        self.layouts = {t.full_name: t for t in layouts}
        self.rows = rows
        self._keys: dict[str, tuple[str, ...] | None] = {}

    @staticmethod
    def start(tables: Sequence[str]) -> dict[str, Any] | None:
        """The progress of a plan of ``tables`` that has not begun (None: nothing to plan)."""
        if not tables:
            return None
        return {"tables": list(tables), "table": 0, "after": None, "last": None, "rows": 0}

    def chunk_key(self, name: str) -> tuple[str, ...] | None:
        """The columns ``name``'s ranges follow (as the driver's snapshot chooses them), None: no key."""
        if name not in self._keys:
            reader = ChunkReader(self._connect, self.layouts[name])
            try:
                self._keys[name] = reader.chunk_key()
            finally:
                reader.close()
        return self._keys[name]

    def plan(self, progress: Mapping[str, Any] | None, limit: int) -> tuple[list[ChunkRange], dict[str, Any] | None]:
        """Up to ``limit`` ranges after ``progress``, and the progress after them (None: every table planned)."""
        if progress is None:
            return [], None
        tables: list[str] = list(progress["tables"])
        table = int(progress["table"])
        after = None if progress.get("after") is None else key_from_json(progress["after"])
        last = None if progress.get("last") is None else key_from_json(progress["last"])
        planned = int(progress.get("rows", 0))
        ranges: list[ChunkRange] = []
        conn = self._connect()
        try:
            while len(ranges) < limit and table < len(tables):
                name = tables[table]
                keys = self.chunk_key(name)
                if keys is None:  # read whole, in one transaction
                    ranges.append(ChunkRange(name, None, None))
                    table, after, last = table + 1, None, None
                    continue
                quoted = ", ".join(quote_name(k) for k in keys)
                relation = _relation(self.layouts[name])
                if last is None:
                    desc = ", ".join(f"{quote_name(k)} DESC" for k in keys)
                    last = _first_row(conn, f"SELECT {quoted} FROM {relation} ORDER BY {desc} LIMIT 1", [])
                    if last is None:  # empty now: whatever comes later is in the binlog
                        table, after = table + 1, None
                        continue
                comparable = key_arguments(self.layouts[name], keys)
                where = [f"NOT {key_after(keys, comparable)}"]
                args = key_after_arguments(last, comparable)
                if after is not None:
                    where.append(key_after(keys, comparable))
                    args += key_after_arguments(after, comparable)
                boundary = _first_row(
                    conn,
                    f"SELECT {quoted} FROM {relation} WHERE {' AND '.join(where)} ORDER BY {quoted} "
                    f"LIMIT 1 OFFSET {self.rows - 1}",
                    args,
                )
                hi = last if boundary is None else boundary
                ranges.append(ChunkRange(name, after, hi))
                planned += self.rows
                if hi == last:
                    table, after, last = table + 1, None, None
                else:
                    after = hi
        finally:
            conn.close()
        if table >= len(tables):
            return ranges, None
        return ranges, {
            "tables": tables,
            "table": table,
            "after": None if after is None else key_to_json(after),
            "last": None if last is None else key_to_json(last),
            "rows": planned,
        }


def _relation(table: TableSchema) -> str:
    return f"{quote_name(table.schema)}.{quote_name(table.table)}"


def _first_row(conn: Any, sql: str, args: Sequence[Any]) -> tuple[KeyValue, ...] | None:
    with conn.cursor() as cur:
        cur.execute(sql, list(args))
        row = cur.fetchone()
    return None if row is None else tuple(row)


# -- reading (an executor) -------------------------------------------------------------------------------------------


@attrs.frozen
class ChunkPartition:
    """One range to read on an executor as part of micro-batch ``batch`` (its ``index``-th chunk partition).

    ``connect`` opens the connection (pymysql, conversions off); it holds the source's credentials, so it is kept
    out of the repr. ``spool_dir`` is where the rows are kept until the batch is committed. ``watermark``: the
    snapshot's watermark table, where the read commits a mark before its snapshot begins (None: the read is placed
    by MariaDB's consistent snapshot position)."""

    connect: Callable[[], Any] = attrs.field(repr=False)
    spool: Storage
    destination: str
    batch: int
    index: int
    table: TableSchema
    key: tuple[str, ...] | None
    range: ChunkRange
    watermark: tuple[str, str] | None = None

    @property
    def spool_name(self) -> str:
        """Where the range's rows are spooled: named by micro-batch, index *and* the range itself, since a range read
        ahead of a plan that Spark never logged (the process died first) must not pass for the range planned again
        in its place (:func:`read_ahead`)."""
        digest = hashlib.sha256(json.dumps(self.range.to_json()).encode()).hexdigest()[:16]
        return f"{_CHUNKS}/{self.batch:012d}-{self.index:04d}-{digest}.arrow"

    @property
    def spool_path(self) -> Path:
        """The local path of :attr:`spool_name` (a local spool's)."""
        return self.spool.local_path(self.spool_name)


def read_chunk(partition: ChunkPartition) -> Iterator[Any]:
    """The SNAPSHOT change rows of ``partition``'s range: read once, at one consistent-snapshot position, written to
    the spool, and returned from there -- so a replay returns the same rows."""
    import pyarrow as pa

    spool, name = partition.spool, partition.spool_name
    if not spool.exists(name):
        marker = task_marker(name)
        spool.write(marker, lambda fh: None)  # a read ahead leaves this range to its task
        try:
            _write_chunk(partition, stop=None)
        finally:
            spool.delete(marker)
    with spool.open(name) as source:
        table = pa.ipc.open_file(source).read_all()
    yield from table.to_batches()


def read_ahead(partitions: Sequence[ChunkPartition], stop: threading.Event) -> list[int]:
    """Read ``partitions``' ranges in this process before their tasks do, the last first, and publish them in the
    spool; the indexes of those this process published.

    Spark's tasks take a micro-batch's partitions in order, first to last, and the first ones wait for Spark to start
    them (seconds, for a query's first micro-batch). Read from the other end, a range is published here or by its
    task, whichever is first (:func:`_write_chunk`), and every attempt returns that file. Reading stops at the first
    range already published or being read by its task (:func:`task_marker`) -- the tasks have come that far -- or
    when ``stop`` is set. Each range is read after the micro-batch's binlog end, as a task reads it, so the reasoning
    of this module holds for it unchanged.
    """
    published: list[int] = []
    for partition in reversed(partitions):
        spool, name = partition.spool, partition.spool_name
        if stop.is_set() or spool.exists(name) or spool.exists(task_marker(name)):
            break
        try:
            if _write_chunk(partition, stop):
                published.append(partition.index)
        except _ReadAheadStopped:
            break  # between two pieces: its temporary file is gone, its task reads the range
    return published


def task_marker(name: str) -> str:
    """The file a task reading the range spooled as ``name`` keeps while it reads (it says nothing to other tasks:
    only a read ahead leaves the range alone, so that two do not read it at once for nothing)."""
    return name + _TASK_MARK


class _ReadAheadStopped(Exception):
    """A range read ahead was given up between two pieces (the source is stopping)."""


def discard_chunks_through(spool: Storage, batch: int) -> None:
    """Delete the spooled ranges of micro-batches up to ``batch`` (committed: never read again)."""
    discard_numbered(spool, _CHUNKS, batch)


def _write_chunk(partition: ChunkPartition, stop: threading.Event | None = None) -> bool:
    """Read the range and publish its rows in the spool, unless another attempt published first (False).

    Spark may run a range's task more than once at the same time (speculative execution, an executor thought lost),
    and each attempt reads its own snapshot. The file is published without replacing one
    (:meth:`~canal.lake.store.storage.Storage.write` with ``replace=False``): the first attempt to finish wins, every
    attempt returns the file's rows, so whichever attempt Spark keeps returned what a replay reads. The spool directory
    therefore needs renames that never replace a file, or hard links (local and NFS file systems have them), or, in
    an object store, conditional writes (:class:`~canal.lake.store.storage.Storage`).
    """
    import pymysql  # type: ignore[import-untyped]

    conn = partition.connect()
    try:
        with conn.cursor() as cur:
            prepare_snapshot_session(cur)
            cur.execute("SET SESSION group_concat_max_len = @@max_allowed_packet")
            # the pieces' separators are written '\t' and '\n': backslash escapes must be on
            cur.execute("SET SESSION sql_mode = REPLACE(@@sql_mode, 'NO_BACKSLASH_ESCAPES', '')")

        def fill(fh: BinaryIO) -> None:
            for _ in range(_DEFINITION_RETRIES):
                fh.seek(0)
                fh.truncate()
                try:
                    if _read_into(conn, partition, fh, stop):
                        return
                except pymysql.err.MySQLError as exc:
                    if exc.args[0] != _ER_TABLE_DEF_CHANGED:
                        raise
                # the table's definition changed while the range was read (a DDL): read it again, at a new position
                with conn.cursor() as cur:
                    cur.execute("ROLLBACK")
            raise SnapshotError(
                f"the definition of {partition.table.full_name} changed during each of {_DEFINITION_RETRIES} reads "
                "of a snapshot range"
            )

        try:
            published = partition.spool.write(partition.spool_name, fill, replace=False)
        except HardLinksUnsupportedError as exc:
            raise SnapshotError(
                f"spool.dir cannot hold executor ranges: {exc.strerror}; a range's file is published with a rename "
                "that never replaces a file, or a hard link, so that of two attempts the first wins. Put spool.dir "
                "on a file system with either (local, NFS)"
            ) from exc
        if not published:
            log = destination_logger(__name__, partition.destination)
            log.info("range %s was published by another attempt first: returning its rows", partition.spool_name)
        return published
    finally:
        with contextlib.suppress(Exception):  # the rows are written (or the error is on its way): closing is cleanup
            conn.close()


def _read_into(conn: Any, partition: ChunkPartition, fh: BinaryIO, stop: threading.Event | None = None) -> bool:
    """Read the range in one consistent-snapshot transaction, under the table's layout, into ``fh`` (Arrow IPC);
    False when the layout changed meanwhile (then nothing is committed: read again). ``stop`` set between two
    pieces: :class:`_ReadAheadStopped`."""
    import pyarrow as pa

    with conn.cursor() as cur:
        layout = _layout_now(cur, partition.table)  # before the snapshot: a DDL after this shows at the end
        if partition.watermark is None:
            position = begin_consistent_read(cur)
        else:
            position = begin_read_after_mark(cur, partition.watermark, partition.destination)
    read_ms = int(time.time() * 1000)
    with pa.ipc.new_file(fh, arrow_schema(), options=ipc_options()) as writer:
        rows = 0
        pieces = iter(()) if layout is None else _RangeReader(conn, partition, layout).pieces()
        for keys, images in pieces:
            if stop is not None and stop.is_set():
                raise _ReadAheadStopped
            if rows + len(keys) > PARTITION_SEQ_SPAN:
                advice = (
                    "lower snapshot.partition.rows"
                    if partition.key is not None
                    else "a table without a key is one range: give it a primary key or read it without "
                    "snapshot.partitions"
                )
                raise SnapshotError(
                    f"a snapshot range of {partition.table.full_name} holds more than {PARTITION_SEQ_SPAN} "
                    f"rows: {advice}"
                )
            assert layout is not None
            writer.write_batch(_snapshot_rows(partition, layout, position, read_ms, rows, keys, images))
            rows += len(keys)
    with conn.cursor() as cur:
        if _layout_now(cur, partition.table) != layout:
            return False
        cur.execute("COMMIT")
    return True


def _layout_now(cur: Any, planned: TableSchema) -> TableSchema | None:
    """The table's layout now (None: the table is gone).

    A range is planned under the layout of its planning but read later, and a DDL in between (a column added, say)
    must not leave its rows under a layout that is not theirs: an upsert of a row without a column would null the
    column in a mirror whose batch also holds rows that have it. So the layout is read just before the read's
    snapshot begins and again when the read ends (information_schema is not part of a snapshot: it shows the layout
    now); unchanged, it is the layout at the snapshot's position. Changed, the range is read again -- as it is when
    InnoDB refuses to read a table rebuilt after the snapshot began (``ER_TABLE_DEF_CHANGED``)."""
    cur.execute("SELECT @@character_set_server, @@version")
    charset, version = cur.fetchone()
    mariadb = "mariadb" in as_text(version).lower()  # the server's flavour types some columns (JSON) its own way
    args = (planned.schema, planned.table)
    cur.execute(TABLE_COLUMNS_SQL, args)
    columns = cur.fetchall()
    cur.execute(TABLE_KEYS_SQL, args)
    primary = cur.fetchall()
    found = catalog_from_columns(columns, primary, charset=as_text(charset), mariadb=mariadb).tables
    table = found.get(planned.full_name)
    if table is None:
        return None  # dropped: its rows go with the DROP TABLE in the stream
    layout = table.table_schema(mariadb=mariadb)
    return planned if layout == planned else layout


def _snapshot_rows(
    partition: ChunkPartition,
    table: TableSchema,
    position: EntryPosition,
    read_ms: int,
    first: int,
    keys: Any,
    images: Any,
) -> Any:
    """Change rows (:func:`~canal.lake.forms.changes.arrow_schema`) of ``table``'s SNAPSHOT rows: ``keys`` / ``images``
    their JSON."""
    import numpy as np
    import pyarrow as pa

    n = len(keys)
    seq0 = (partition.batch << SEQ_BITS) + PARTITION_SEQ_BASE + partition.index * PARTITION_SEQ_SPAN + first
    zeros = pa.array(np.zeros(n, dtype=np.int64))

    def same(value: Any, type_: Any) -> Any:
        return pa.array([value], type_).take(zeros)

    arrays = {
        "destination": same(partition.destination, pa.string()),
        "seq": pa.array(np.arange(seq0, seq0 + n, dtype=np.int64)),
        "schema": same(table.schema, pa.string()),
        "table": same(table.table, pa.string()),
        "type": same("SNAPSHOT", pa.string()),
        "is_ddl": same(False, pa.bool_()),
        "sql": pa.nulls(n, pa.string()),
        "execute_time": same(read_ms * 1000, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        "log_file": same(position.journal_name, pa.string()),
        "log_offset": same(position.position, pa.int64()),
        "row_index": pa.array(np.arange(first, first + n, dtype=np.int32)),
        "gtid": pa.nulls(n, pa.string()),
        "keys": pa.array(keys, pa.string()) if isinstance(keys, list) else keys,
        "old_keys": pa.nulls(n, pa.string()),
        "before": pa.nulls(n, pa.string()),
        "after": pa.array(images, pa.string()) if isinstance(images, list) else images,
        "columns": same(table_codec(table).columns_json, pa.string()),
        "props": pa.nulls(n, pa.string()),
        "log_server_id": same(position.server_id, pa.int64()),
        "before_absent": pa.nulls(n, pa.string()),  # a snapshot's rows are whole
        "after_absent": pa.nulls(n, pa.string()),
        "json_diffs": pa.nulls(n, pa.string()),
    }
    schema = arrow_schema()
    return pa.RecordBatch.from_arrays([arrays[f.name] for f in schema], schema=schema)


def _json_cell(meta: ColumnMeta, quoted: str) -> str | None:
    """SQL rendering ``meta``'s column as the change row's JSON value, as the Python encoder does; None: a type
    whose server text differs from the encoder's (read in Python)."""
    base = read_column_type(meta.mysql_type, strict=False).base
    plain = f"IFNULL(CONCAT('\"', {quoted}, '\"'), 'null')"
    if base in INTEGER_TYPES or base in ("decimal", "numeric", "date"):
        return plain
    if base in ("datetime", "timestamp") and meta.fsp == 0:
        return plain
    if (base in TEXT_TYPES and meta.charset is not None) or base in ("enum", "json"):
        return f"IFNULL(JSON_QUOTE({quoted}), 'null')"
    return None


def _json_object(conn: Any, table: TableSchema, indexes: Sequence[int]) -> str | None:
    """SQL rendering the columns at ``indexes`` as the encoder's JSON object; None if a column cannot be."""
    parts: list[str] = []
    for n, i in enumerate(indexes):
        meta = table.columns[i]
        cell = _json_cell(meta, quote_name(meta.name))
        if cell is None:
            return None
        parts.append(conn.escape(("{" if n == 0 else ",") + encode_basestring(meta.name) + ":"))
        parts.append(cell)
    parts.append("'}'" if indexes else "'{}'")
    return f"CONCAT({', '.join(parts)})"


def _canonical_object(text: str) -> str:
    """A JSON object of text values in the encoder's form (the key order kept)."""
    cells = (
        f"{encode_basestring(k)}:{'null' if v is None else encode_basestring(v)}" for k, v in json.loads(text).items()
    )
    return "{" + ",".join(cells) + "}"


class _RangeReader:
    """Reads one partition's range in pieces inside the transaction its connection has open."""

    def __init__(self, conn: Any, partition: ChunkPartition, table: TableSchema) -> None:
        self.conn = conn
        self.table = table
        self.key = partition.key
        missing = [k for k in self.key or () if k not in table.names]
        if missing:
            raise SnapshotError(
                f"{table.full_name} has no column {', '.join(missing)} any more: its snapshot ranges were planned "
                "by a key a DDL changed; restart the query to plan them again"
            )
        self.range = partition.range
        self.relation = _relation(table)
        self.order = "" if self.key is None else ", ".join(quote_name(k) for k in self.key)
        primary = tuple(table.names[i] for i in table.key_indexes)
        self.json_keys = self.json_image = None
        if self.key is not None and self.key == primary:  # the piece's last key is read back from its keys JSON
            self.json_keys = _json_object(conn, table, table.key_indexes)
            self.json_image = _json_object(conn, table, range(len(table.columns)))
        self.decode = rows_reader(table)
        self.codec = table_codec(table)
        self.key_indexes = () if self.key is None else tuple(table.index_of(k) for k in self.key)
        self.columns = ", ".join(column_expression(m, quote_name(m.name)) for m in table.columns)
        self.names = ", ".join(quote_name(m.name) for m in table.columns)

    def _where(self, after: tuple[KeyValue, ...] | None) -> tuple[str, list[Any]]:
        assert self.key is not None
        where: list[str] = []
        args: list[Any] = []
        comparable = key_arguments(self.table, self.key)
        if after is not None:
            where.append(key_after(self.key, comparable))
            args += key_after_arguments(after, comparable)
        if self.range.hi is not None:
            where.append(f"NOT {key_after(self.key, comparable)}")
            args += key_after_arguments(self.range.hi, comparable)
        return (" WHERE " + " AND ".join(where) if where else ""), args

    def pieces(self) -> Iterator[tuple[Any, Any]]:
        """(keys JSON, images JSON) of each piece of rows, in key order."""
        if self.key is None:
            yield from self._streamed()
            return
        after = self.range.lo
        size = _PIECE_ROWS  # halved while a piece's rendering is longer than group_concat_max_len (wide rows)
        while True:
            piece = None
            if self.json_image is not None:
                piece = self._rendered(after, size)
                if piece is None and size > 1:
                    size //= 2
                    continue
            if piece is None:  # a row too long to render in one value: read it as values
                piece = self._decoded(after, size)
            keys, images, n, last = piece
            if n:
                yield keys, images
            if n < size:
                return
            after = last

    def _rendered(self, after: tuple[KeyValue, ...] | None, size: int) -> tuple[Any, Any, int, Any] | None:
        """A piece rendered by the server; None when its text was cut at ``group_concat_max_len``."""
        import pyarrow as pa
        import pyarrow.compute as pc

        where, args = self._where(after)
        sql = (
            f"SELECT COUNT(*), GROUP_CONCAT(CONCAT({self.json_keys}, '\\t', {self.json_image}) ORDER BY {self.order} "
            f"SEPARATOR '\\n') FROM (SELECT {self.names} FROM {self.relation}{where} ORDER BY {self.order} "
            f"LIMIT {size}) AS piece"
        )
        with self.conn.cursor() as cur:
            cur.execute(sql, args)
            count_text, text = cur.fetchone()
        count = int(count_text)
        if count == 0:
            return [], [], 0, None
        lines = pc.split_pattern(pa.array([as_text(text)], pa.large_string()), "\n").flatten()
        if len(lines) != count:
            return None
        pairs = pc.split_pattern(lines, "\t", max_splits=1)
        keys = pc.list_element(pairs, 0).cast(pa.string())
        images = pc.list_element(pairs, 1).cast(pa.string())
        if pc.any(pc.match_substring_regex(lines, _UPPER_HEX)).as_py():
            keys = pa.array([_canonical_object(k) for k in keys.to_pylist()], pa.string())
            images = pa.array([_canonical_object(v) for v in images.to_pylist()], pa.string())
        last_keys = json.loads(keys[count - 1].as_py())
        last = tuple(last_keys[k] for k in self.key or ())
        return keys, images, count, last

    def _decoded(self, after: tuple[KeyValue, ...] | None, size: int) -> tuple[Any, Any, int, Any]:
        """A piece read as values and encoded in Python (as binlog rows are)."""
        where, args = self._where(after)
        with self.conn.cursor() as cur:
            cur.execute(f"SELECT {self.columns} FROM {self.relation}{where} ORDER BY {self.order} LIMIT {size}", args)
            raw = cur.fetchall()
        if not raw:
            return [], [], 0, None
        keys, images = self._encode(raw)
        last = tuple(raw[-1][i] for i in self.key_indexes)
        return keys, images, len(raw), last

    def _encode(self, raw: Sequence[Sequence[Any]]) -> tuple[list[str | None], list[str | None]]:
        rows = self.decode(raw)
        codec = self.codec
        return [codec.keys(r) for r in rows], [codec.image(r) for r in rows]

    def _streamed(self) -> Iterator[tuple[Any, Any]]:
        """A table without a chunk key: one unbuffered read of it, in pieces."""
        import pymysql.cursors  # type: ignore[import-untyped]

        cur = self.conn.cursor(pymysql.cursors.SSCursor)
        try:
            cur.execute(f"SELECT {self.columns} FROM {self.relation}")
            while raw := cur.fetchmany(_PIECE_ROWS):
                yield self._encode(raw)
        finally:
            cur.close()
