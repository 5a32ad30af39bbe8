"""Reading a table in chunks, each exact at a binlog position, without locks.

Each chunk is one read-only transaction started ``WITH CONSISTENT SNAPSHOT``: MariaDB then reports, in
``binlog_snapshot_file`` / ``binlog_snapshot_position``, the binlog position its snapshot corresponds to -- every
transaction before it is visible, none after it. So a chunk's rows are the table's rows *at that position*, exactly:
no watermark writes, no window to reconcile, no race between a transaction's binlog write and its InnoDB commit
(the reason DBLog's read-only watermarks are not exact on MySQL). Handed to the parser, the rows take effect when the
binlog stream reaches that position, before the events after it (see :mod:`canal.snapshot`).

Chunks follow the primary key (keyset pagination: ``WHERE key > last ORDER BY key LIMIT n``, the composite form
expanded into ORs the optimizer reads as a range); a table without one is read in one chunk. Memory is bounded by a
chunk, never a table.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import pymysql  # type: ignore[import-untyped]

from canal.errors import SourceError
from canal.position import EntryPosition
from canal.protocol import TableSchema
from canal.snapshot.values import column_expression, rows_reader
from canal.sql import quote_name

__all__ = ["Chunk", "ChunkReader"]


@attrs.frozen(slots=True)
class Chunk:
    """Rows of one table exact at ``position``: the decoder's value tuples in key order, each row's raw key (the
    server's text or bytes of the key columns; None for a table without a key), and the raw key of the last row
    (where the next chunk starts; None: the table is done)."""

    table: TableSchema
    position: EntryPosition
    rows: tuple[tuple[Any, ...], ...]
    next_key: tuple[Any, ...] | None
    keys: tuple[tuple[Any, ...], ...] | None = None


class ChunkReader:
    """Reads ``schema``'s table in chunks of ``chunk_rows`` over connections from ``connect`` (pymysql, conversions
    off: the server's text comes through untouched)."""

    def __init__(self, connect: Callable[[], Any], schema: TableSchema, *, chunk_rows: int = 10_000) -> None:
        if chunk_rows < 1:
            raise ValueError("chunk_rows must be >= 1")
        self._connect = connect
        self.schema = schema
        self.chunk_rows = chunk_rows
        self._keys = [schema.columns[i].name for i in schema.key_indexes]
        self._read = rows_reader(schema)
        self._conn: Any = None  # one connection for the table's chunks (a new one after an error)
        table = f"{quote_name(schema.schema)}.{quote_name(schema.table)}"
        columns = ", ".join(column_expression(m, quote_name(m.name)) for m in schema.columns)
        self._select = f"SELECT {columns} FROM {table}"
        self._order = " ORDER BY " + ", ".join(quote_name(k) for k in self._keys) if self._keys else ""

    def _where(self, after: Sequence[Any]) -> str:
        """``(k1, k2, ...) > (%s, %s, ...)`` as ORs of equal prefixes and one greater column."""
        keys = [quote_name(k) for k in self._keys]
        terms = []
        for i in range(len(keys)):
            equal = [f"{k} = %s" for k in keys[:i]]
            terms.append("(" + " AND ".join([*equal, f"{keys[i]} > %s"]) + ")")
        return " WHERE " + " OR ".join(terms)

    def _arguments(self, after: Sequence[Any]) -> list[Any]:
        return [value for i in range(len(after)) for value in after[: i + 1]]

    def read(self, after: Sequence[Any] | None = None) -> Chunk:
        """The chunk after raw key ``after`` (None: from the start), exact at the position it reports."""
        sql = self._select
        args: list[Any] = []
        if after is not None:
            sql += self._where(after)
            args = self._arguments(after)
        sql += self._order
        limited = bool(self._keys)
        if limited:
            sql += f" LIMIT {self.chunk_rows}"
        conn = self._conn
        if conn is None:
            conn = self._conn = self._connect()
            with conn.cursor() as cur:
                cur.execute("SET SESSION time_zone = '+00:00'")
                cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        try:
            with conn.cursor() as cur:
                cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
                cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
                status = {_str(name).lower(): _str(value) for name, value in cur.fetchall()}
                if "binlog_snapshot_file" not in status:
                    raise SourceError(
                        "the server reports no binlog_snapshot_file: an exact snapshot needs MariaDB's consistent "
                        "snapshot position (MySQL is not supported by the snapshot yet)"
                    )
                cur.execute(sql, args)
                raw_rows = cur.fetchall()
                cur.execute("COMMIT")
        except BaseException:
            self.close()  # whatever state the connection is in, the next read starts on a new one
            raise
        position = EntryPosition(status["binlog_snapshot_file"], int(status["binlog_snapshot_position"]))
        rows = tuple(self._read(raw_rows))
        keys = None
        next_key = None
        if limited:
            indexes = self.schema.key_indexes
            keys = tuple(tuple(row[i] for i in indexes) for row in raw_rows)
            if len(raw_rows) == self.chunk_rows:
                next_key = keys[-1]
        return Chunk(self.schema, position, rows, next_key, keys)

    def close(self) -> None:
        """Close the connection the chunks were read on (the next read opens a new one)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            # a broken connection is dropped either way; the reads it served are complete
            with contextlib.suppress(pymysql.err.Error, OSError):
                conn.close()


def _str(value: Any) -> str:
    return value.decode() if isinstance(value, bytes | bytearray) else str(value)
