"""Reading a table in chunks, each exact at a binlog position, without locks.

Each chunk is one read-only transaction started ``WITH CONSISTENT SNAPSHOT``: MariaDB then reports, in
``binlog_snapshot_file`` / ``binlog_snapshot_position``, the binlog position its snapshot corresponds to -- every
transaction before it is visible, none after it. So a chunk's rows are the table's rows *at that position*, exactly:
no watermark writes, no window to reconcile, no race between a transaction's binlog write and its InnoDB commit
(the reason DBLog's read-only watermarks are not exact on MySQL). Handed to the parser, the rows take effect when the
binlog stream reaches that position, before the events after it (see :mod:`canal.snapshot`).

Chunks follow the primary key (keyset pagination: ``WHERE key > last ORDER BY key LIMIT n``, the composite form
expanded into ORs the optimizer reads as a range); a table without one follows its unique key over NOT NULL columns
(:meth:`ChunkReader.chunk_key`). A table with neither is read in one consistent-snapshot transaction, streamed in
pieces (an unbuffered cursor, every piece exact at the same position). Memory is bounded by a chunk, never a table:
a chunk holds at most ``chunk_rows`` rows and, measured as they are read, about ``chunk_bytes`` of values, so
chunks of wide rows hold fewer rows (the first chunk of a table is small, to measure them).
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Callable, Sequence
from decimal import Decimal
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Final

import attrs
import pymysql  # type: ignore[import-untyped]

from canal.errors import SourceError
from canal.position import EntryPosition
from canal.protocol import TableSchema
from canal.snapshot.values import column_expression, rows_reader
from canal.sql import quote_name, read_column_type

if TYPE_CHECKING:
    from canal.snapshot.marks import MarkedRead

__all__ = [
    "BeginRead",
    "Chunk",
    "ChunkReader",
    "as_text",
    "begin_consistent_read",
    "key_after",
    "key_after_arguments",
    "key_arguments",
    "prepare_snapshot_session",
]


FIRST_CHUNK_ROWS = 256  # a table's first chunk: enough rows to measure their size before chunks grow
_VALUE_OVERHEAD = 48  # bytes a value costs in memory beyond its text (the Python object around it)
_SAMPLE_ROWS = 32  # rows of a chunk measured for the size of the next one
_NET_WRITE_TIMEOUT_S = 86_400  # a streamed table waits for its consumer between pieces: the server must not give up


def key_after(keys: Sequence[str], comparable: KeyArguments | None = None) -> str:
    """``(k1, k2, ...) > (%s, %s, ...)`` as ORs of equal prefixes and one greater column (a range the optimizer
    reads on the key's index), each placeholder in the form that compares as its column orders
    (:func:`key_arguments`); its arguments: :func:`key_after_arguments`."""
    quoted = [quote_name(k) for k in keys]
    marks = ["%s"] * len(keys) if comparable is None else [placeholder for placeholder, _ in comparable]
    terms = []
    for i in range(len(quoted)):
        equal = [f"{k} = {m}" for k, m in zip(quoted[:i], marks, strict=False)]
        terms.append("(" + " AND ".join([*equal, f"{quoted[i]} > {marks[i]}"]) + ")")
    return "(" + " OR ".join(terms) + ")"


def key_after_arguments(after: Sequence[Any], comparable: KeyArguments | None = None) -> list[Any]:
    """The arguments of :func:`key_after` for the raw key ``after`` (the server's text of each key column)."""
    values = after if comparable is None else [convert(v) for (_, convert), v in zip(comparable, after, strict=True)]
    return [value for i in range(len(values)) for value in values[: i + 1]]


KeyArguments = tuple[tuple[str, Callable[[Any], Any]], ...]
"""Per key column: its placeholder in :func:`key_after` and how a raw value becomes its argument (text or bytes:
a snapshot connection converts nothing, so numbers travel as text and the placeholder casts them)."""


def key_arguments(schema: TableSchema, keys: Sequence[str]) -> KeyArguments:
    """How each key column's raw value becomes an argument that compares as the column orders (its index order):

    * ENUM sorts by its index, SET by its bit mask, not by the label's text: compared as those numbers;
    * BIT sorts by its number: a byte string would compare as a string (and ``k > X'..'`` includes the boundary);
    * DECIMAL compares exactly with a decimal number (a string is compared as a DOUBLE).

    Other types (integers, temporals, text in the column's collation, binary strings) compare right as the server's
    text (or bytes) of the value, which is what the raw key holds."""
    return tuple(_key_argument(schema.columns[schema.index_of(k)]) for k in keys)


def _key_argument(meta: Any) -> tuple[str, Callable[[Any], Any]]:
    base = read_column_type(meta.mysql_type, strict=False).base
    labels: tuple[str, ...] = meta.labels
    if base == "enum":
        index = {label.lower(): i + 1 for i, label in enumerate(labels)}
        # '' is ENUM's error value, index 0; an ENUM compared with a number compares its index
        return _AS_NUMBER, lambda raw: str(index[as_text(raw).lower()] if as_text(raw) else 0)
    if base == "set":
        bits = {label.lower(): 1 << i for i, label in enumerate(labels)}
        return _AS_NUMBER, lambda raw: str(sum(bits[x.lower()] for x in as_text(raw).split(",") if x))
    if base == "bit":
        return _AS_NUMBER, lambda raw: str(int.from_bytes(bytes(raw), "big"))
    if base == "decimal":
        return "CAST(%s AS DECIMAL(65,30))", as_text
    return "%s", _unchanged


_AS_NUMBER = "CAST(%s AS UNSIGNED)"


def equal_arguments(schema: TableSchema, keys: Sequence[str], values: Sequence[Any]) -> list[tuple[str, Any]] | None:
    """``(placeholder, argument)`` per key column for ``column = placeholder`` to find the row whose key has
    ``values`` -- values as the binlog decoder gives them, each compared as its column compares (an integer as one,
    not as a DOUBLE; a DECIMAL exactly) --, or None for a value of a type it does not find rows by (a TIMESTAMP, a
    float, a SET, ...): read the table whole then."""
    out: list[tuple[str, Any]] = []
    for name, value in zip(keys, values, strict=True):
        meta = schema.columns[schema.index_of(name)]
        base = read_column_type(meta.mysql_type, strict=False).base
        if isinstance(value, bool) or value is None:
            return None
        if isinstance(value, int) and base in _INTEGERS:
            out.append(("CAST(%s AS UNSIGNED)" if meta.unsigned else "CAST(%s AS SIGNED)", str(value)))
        elif isinstance(value, Decimal) and base == "decimal":
            out.append(("CAST(%s AS DECIMAL(65,30))", str(value)))
        elif isinstance(value, str) and base in _TEXTS:
            out.append(("%s", value))
        elif isinstance(value, bytes | bytearray) and base in _BYTES:
            out.append(("%s", bytes(value)))
        elif isinstance(value, datetime.datetime) and base == "datetime" and value.tzinfo is None:
            out.append(("CAST(%s AS DATETIME(6))", value.isoformat(sep=" ")))
        elif isinstance(value, datetime.date) and not isinstance(value, datetime.datetime) and base == "date":
            out.append(("CAST(%s AS DATE)", value.isoformat()))
        else:
            return None
    return out


_INTEGERS: Final = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year"})
_TEXTS: Final = frozenset(
    {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "uuid", "inet4", "inet6"}
)
_BYTES: Final = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})


def _unchanged(raw: Any) -> Any:
    return raw


def prepare_snapshot_session(cur: Any) -> None:
    """Set up the session of a connection that reads snapshot chunks: UTC (TIMESTAMP text as the decoder gives it),
    REPEATABLE READ (a consistent snapshot), and a write timeout long enough for a consumer that reads slowly."""
    cur.execute("SET SESSION time_zone = '+00:00'")
    cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    cur.execute(f"SET SESSION net_write_timeout = {_NET_WRITE_TIMEOUT_S}")


def begin_consistent_read(cur: Any) -> EntryPosition:
    """Start a read-only transaction ``WITH CONSISTENT SNAPSHOT`` on ``cur``'s connection and return the binlog
    position its snapshot is exact at (MariaDB's ``binlog_snapshot_file`` / ``_position``)."""
    cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
    cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
    status = {as_text(name).lower(): as_text(value) for name, value in cur.fetchall()}
    if "binlog_snapshot_file" not in status:
        raise SourceError(
            "the server reports no binlog_snapshot_file (MariaDB's consistent snapshot position; MySQL has none): "
            "snapshot with watermarks instead (SnapshotConfig watermark_table / pycanal.snapshot.watermark.table)"
        )
    return EntryPosition(status["binlog_snapshot_file"], int(status["binlog_snapshot_position"]))


BeginRead = Callable[[Any], "EntryPosition | MarkedRead"]
"""Starts a consistent read on a cursor and says where it sits in the binlog: :func:`begin_consistent_read`
(MariaDB's exact position) or :meth:`canal.snapshot.marks.WatermarkWriter.begin_read` (between two watermarks)."""


@attrs.frozen(slots=True)
class Chunk:
    """Rows of one table exact at ``position`` (a :class:`~canal.snapshot.marks.MarkedRead`: as of its high
    watermark, once the stream drops the keys changed between the marks): the decoder's value tuples in key order,
    each row's raw key (the server's text or bytes of the key columns; None for a table without a key), and the raw
    key of the last row (where the next chunk starts; None: the table is done, unless ``more``: a table without a
    key has more rows in the same read, at the same position -- :meth:`ChunkReader.read_more`)."""

    table: TableSchema
    position: EntryPosition | MarkedRead
    rows: tuple[tuple[Any, ...], ...]
    next_key: tuple[Any, ...] | None
    keys: tuple[tuple[Any, ...], ...] | None = None
    more: bool = False


class ChunkReader:
    """Reads ``schema``'s table in chunks over one connection from ``connect`` (pymysql, conversions off: the
    server's text comes through untouched): at most ``chunk_rows`` rows and, once measured, about ``chunk_bytes``
    bytes of values each (None: rows only). ``begin_read`` starts each read's transaction and places it in the binlog
    (default: MariaDB's consistent snapshot position)."""

    def __init__(
        self,
        connect: Callable[[], Any],
        schema: TableSchema,
        *,
        chunk_rows: int = 10_000,
        chunk_bytes: int | None = None,
        begin_read: BeginRead = begin_consistent_read,
    ) -> None:
        if chunk_rows < 1:
            raise ValueError("chunk_rows must be >= 1")
        if chunk_bytes is not None and chunk_bytes < 1:
            raise ValueError("chunk_bytes must be >= 1")
        self._connect = connect
        self._begin_read = begin_read
        self.schema = schema
        self.chunk_rows = chunk_rows
        self.chunk_bytes = chunk_bytes
        self.rows_per_chunk = chunk_rows if chunk_bytes is None else min(chunk_rows, FIRST_CHUNK_ROWS)
        self._read = rows_reader(schema)
        self._conn: Any = None  # one connection for the table's chunks (a new one after an error)
        self._streaming: Any = None  # the open unbuffered cursor of a table read without a key
        self._streaming_at: EntryPosition | MarkedRead | None = None
        self._key_indexes: tuple[int, ...] | None = None
        self._key_known = False  # the key and its order come from information_schema once
        self._key_arguments: KeyArguments = ()
        table = f"{quote_name(schema.schema)}.{quote_name(schema.table)}"
        columns = ", ".join(column_expression(m, quote_name(m.name)) for m in schema.columns)
        self._select = f"SELECT {columns} FROM {table}"

    # -- the chunk key ---------------------------------------------------------------------------------------------

    def chunk_key(self) -> tuple[str, ...] | None:
        """The columns chunks follow, in their index's order (which may differ from the table's column order: the
        ORDER BY must be the index's, or every chunk is a full scan and a filesort): the primary key, else the
        unique key over NOT NULL columns the server promotes to one (``COLUMN_KEY`` ``PRI``: the key InnoDB
        clusters by, a MINIMAL row image's before image carries and the table's rows are identified by,
        :mod:`canal.schema.keys`), else None (no key: the table is read whole). Chosen from ``information_schema``,
        the same way on every run, so a resumed snapshot continues after the key it stopped at."""
        if not self._key_known:
            self._key_indexes = self._unique_key()
            self._key_known = True
            if self._key_indexes is not None:
                keys = tuple(self.schema.columns[i].name for i in self._key_indexes)
                self._key_arguments = key_arguments(self.schema, keys)
        if self._key_indexes is None:
            return None
        return tuple(self.schema.columns[i].name for i in self._key_indexes)

    def _unique_key(self) -> tuple[int, ...] | None:
        schema = self.schema
        with self._connection().cursor() as cur:
            cur.execute(
                "SELECT s.INDEX_NAME, s.COLUMN_NAME, s.SUB_PART, c.IS_NULLABLE, c.COLUMN_KEY "
                "FROM information_schema.STATISTICS s JOIN information_schema.COLUMNS c "
                "ON c.TABLE_SCHEMA = s.TABLE_SCHEMA AND c.TABLE_NAME = s.TABLE_NAME AND c.COLUMN_NAME = s.COLUMN_NAME "
                "WHERE s.TABLE_SCHEMA = %s AND s.TABLE_NAME = %s AND s.NON_UNIQUE = 0 "
                "ORDER BY s.INDEX_NAME, s.SEQ_IN_INDEX",
                (schema.schema, schema.table),
            )
            found = cur.fetchall()
        position = {c.name.lower(): i for i, c in enumerate(schema.columns)}
        indexes: dict[str, list[int | None]] = {}
        promoted: set[int | None] = set()
        for index, column, sub_part, nullable, key in found:
            usable = sub_part is None and as_text(nullable).upper() == "NO"
            indexes.setdefault(as_text(index), []).append(position.get(as_text(column).lower()) if usable else None)
            if as_text(key) == "PRI":
                promoted.add(position.get(as_text(column).lower()))
        # the primary key (named PRIMARY), else the unique key the server promotes to one (its columns say PRI),
        # else the narrowest unique key (then the first by name)
        candidates = [
            (name.upper() != "PRIMARY", set(cols) != promoted, len(cols), name, cols)
            for name, cols in indexes.items()
            if None not in cols
        ]
        if not candidates:
            return None
        chosen = min(candidates, key=lambda c: c[:4])[4]
        return tuple(i for i in chosen if i is not None)

    # -- reading ---------------------------------------------------------------------------------------------------

    def _connection(self) -> Any:
        conn = self._conn
        if conn is None:
            conn = self._conn = self._connect()
            with conn.cursor() as cur:
                prepare_snapshot_session(cur)
        return conn

    def read(self, after: Sequence[Any] | None = None) -> Chunk:
        """The chunk after raw key ``after`` (None: from the start), exact at the position it reports. A table
        without a chunk key starts its one streamed read here (continued by :meth:`read_more`)."""
        keys = self.chunk_key()
        if keys is None:
            return self._start_streaming()
        if after is not None and len(after) != len(keys):
            raise SourceError(
                f"cannot resume the snapshot of {self.schema.full_name} after {len(after)} key values: its chunk key "
                f"is now ({', '.join(keys)})"
            )
        sql = self._select
        args: list[Any] = []
        if after is not None:
            sql += " WHERE " + key_after(keys, self._key_arguments)
            args = key_after_arguments(after, self._key_arguments)
        limit = self.rows_per_chunk
        sql += " ORDER BY " + ", ".join(quote_name(k) for k in keys) + f" LIMIT {limit}"
        conn = self._connection()
        try:
            with conn.cursor() as cur:
                position = self._begin_read(cur)
                cur.execute(sql, args)
                raw_rows = cur.fetchall()
                cur.execute("COMMIT")
        except BaseException:
            self.close()  # whatever state the connection is in, the next read starts on a new one
            raise
        rows = tuple(self._read(raw_rows))
        assert self._key_indexes is not None
        row_keys = _raw_keys(raw_rows, self._key_indexes)
        next_key = row_keys[-1] if len(raw_rows) == limit else None
        self._measure(raw_rows)
        return Chunk(self.schema, position, rows, next_key, row_keys)

    def read_keys(self, keys: Sequence[Sequence[tuple[str, Any]]]) -> Chunk:
        """The rows whose chunk key is one of ``keys`` (each key a list of :func:`equal_arguments`, in the chunk
        key's order), in key order, exact at the position it reports: a key no row has makes no row (no keys: no
        rows). The chunk names no next key, and no key of its rows to go on after."""
        names = self.chunk_key()
        assert names is not None, "a read of rows by their keys needs a chunk key"
        ors = [
            "("
            + " AND ".join(f"{quote_name(n)} = {placeholder}" for n, (placeholder, _) in zip(names, key, strict=True))
            + ")"
            for key in keys
        ]
        sql = f"{self._select} WHERE {' OR '.join(ors) or '1 = 0'} ORDER BY {', '.join(quote_name(k) for k in names)}"
        args = [argument for key in keys for _, argument in key]
        conn = self._connection()
        try:
            with conn.cursor() as cur:
                position = self._begin_read(cur)
                cur.execute(sql, args)
                raw_rows = cur.fetchall()
                cur.execute("COMMIT")
        except BaseException:
            self.close()
            raise
        return Chunk(self.schema, position, tuple(self._read(raw_rows)), None, None)

    def _start_streaming(self) -> Chunk:
        self.close()  # a read of the whole table starts afresh
        conn = self._connection()
        try:
            cur = conn.cursor(pymysql.cursors.SSCursor)
            self._streaming_at = self._begin_read(cur)
            cur.execute(self._select)
            self._streaming = cur
        except BaseException:
            self.close()
            raise
        return self.read_more()

    def read_more(self) -> Chunk:
        """The next piece of a table read without a key (same position as its first)."""
        cur, position = self._streaming, self._streaming_at
        if cur is None or position is None:
            raise SourceError(f"no read of {self.schema.full_name} is under way to continue")
        limit = self.rows_per_chunk
        try:
            raw_rows = cur.fetchmany(limit)
            more = len(raw_rows) == limit
            if not more:
                cur.close()
                self._streaming = None
                with self._conn.cursor() as done:
                    done.execute("COMMIT")
        except BaseException:
            self.close()
            raise
        self._measure(raw_rows)
        return Chunk(self.schema, position, tuple(self._read(raw_rows)), None, None, more)

    def _measure(self, raw_rows: Sequence[Sequence[Any]]) -> None:
        """Size the next chunk so it holds about ``chunk_bytes`` of values (sampled from this one's rows)."""
        if self.chunk_bytes is None or not raw_rows:
            return
        step = max(1, len(raw_rows) // _SAMPLE_ROWS)
        sample = raw_rows[::step]
        size = sum(_VALUE_OVERHEAD + (0 if v is None else len(v)) for row in sample for v in row) / len(sample)
        self.rows_per_chunk = max(1, min(self.chunk_rows, int(self.chunk_bytes / max(size, 1.0))))

    def close(self) -> None:
        """Close the connection the chunks were read on (the next read opens a new one)."""
        conn, self._conn = self._conn, None
        self._streaming = self._streaming_at = None
        if conn is not None:
            # a broken connection is dropped either way; the reads it served are complete
            with contextlib.suppress(pymysql.err.Error, OSError):
                conn.close()


def _raw_keys(raw_rows: Sequence[Sequence[Any]], indexes: tuple[int, ...]) -> tuple[tuple[Any, ...], ...]:
    """Each row's key columns, as a tuple per row (``map``/``zip`` in C: a chunk is thousands of rows)."""
    if len(indexes) == 1:
        return tuple(zip(map(itemgetter(indexes[0]), raw_rows)))
    return tuple(map(itemgetter(*indexes), raw_rows))


def as_text(value: Any) -> str:
    """A value of a connection without conversions as text (the server sends some as bytes)."""
    return value.decode() if isinstance(value, bytes | bytearray) else str(value)
