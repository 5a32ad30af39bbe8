"""DBLog's watermarks, written to a table: where a chunk's read sits in the binlog on a server that does not say.

MariaDB reports the binlog position of a consistent snapshot (``binlog_snapshot_file`` / ``_position``), which
places a chunk exactly (:mod:`canal.snapshot.reader`). MySQL does not, and a position read with ``SHOW MASTER
STATUS`` before and after a read does not place it either: MySQL writes a transaction to the binlog before InnoDB
makes it visible, so a transaction just before the position read may still be invisible to the read, and nothing
after that position would bring its row up to date. With ``SnapshotConfig(watermark_table="db.table")`` each read
is instead bracketed by two writes to that table, on a connection of their own, in their own transactions:

1. the *low* mark (a new random value) is committed;
2. the chunk's connection starts ``START TRANSACTION WITH CONSISTENT SNAPSHOT``: its read view is fixed now;
3. the *high* mark is committed; the chunk is then read in that transaction at leisure.

The parser recognises the marks' row events (and hands none of the table's rows to consumers). The chunk joins the
stream at the first transaction boundary at or after the high mark, without the rows whose keys a change at or
after the low mark touched -- the binlog delivers those, with full images, in their order.

Why that is exact (InnoDB, ``binlog_order_commits`` on, MySQL's default; MariaDB commits in binlog order too):

* every transaction before the low mark in the binlog is visible to the read: transactions become visible in their
  binlog order, the low mark's commit returned before the read view was made, so they were visible by then;
* no transaction after the high mark is: it was written to the binlog after the high mark, which was written after
  the read view was made, and a transaction becomes visible only after its binlog write;
* a transaction between the marks may or may not be visible: every key it touched is dropped from the chunk, and the
  binlog, which the consumer has already been given up to the chunk's place, holds what replaces it.

So each row kept is the table's row as of the high mark. It costs INSERT and UPDATE on one table and two small
transactions per chunk in the binlog (DBLog's price). The table is the user's to create (``WATERMARK_TABLE_DDL``):
one row per destination, overwritten. Its row events never reach consumers, even when the filter captures it; its
DDL would, so create it before the destination starts or outside the captured tables.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable
from typing import Any

import attrs
import pymysql  # type: ignore[import-untyped]

from canal.errors import SnapshotError
from canal.parse.mysql import MysqlBinlogSource
from canal.parse.mysql.source import binlog_status
from canal.position import EntryPosition
from canal.snapshot.reader import as_text
from canal.sql import quote_name

__all__ = [
    "WATERMARK_COLUMNS",
    "WATERMARK_TABLE_DDL",
    "MarkedRead",
    "WatermarkWriter",
    "begin_read_after_mark",
    "mark_of",
    "write_mark",
]

_TABLE_ACCESS_DENIED = 1142  # ER_TABLEACCESS_DENIED_ERROR: "INSERT command denied to user ..."
_DATABASE_ACCESS_DENIED = 1044  # ER_DBACCESS_DENIED_ERROR
_NO_SUCH_TABLE = 1146  # ER_NO_SUCH_TABLE

WATERMARK_COLUMNS = ("destination", "mark")
WATERMARK_TABLE_DDL = "CREATE TABLE {table} (destination VARCHAR(191) NOT NULL PRIMARY KEY, mark CHAR(32) NOT NULL)"
"""The watermark table's layout (``{table}``: its quoted name); the parser reads the mark as the second column."""


@attrs.frozen(slots=True)
class MarkedRead:
    """A read whose view was made between the commits of the watermarks ``low`` and ``high``; ``written_by`` is the
    end of the binlog after the high mark (a parser past it that has not seen both marks never will)."""

    low: str
    high: str
    written_by: EntryPosition

    def __str__(self) -> str:
        return f"between watermarks {self.low} and {self.high}"


def write_mark(cur: Any, table: tuple[str, str], destination: str, mark: str) -> None:
    """Write ``destination``'s watermark ``mark`` to ``table`` (its one row, overwritten) on ``cur``'s connection;
    committed when that connection commits. A table this user cannot write (or that is missing) is a
    :class:`SnapshotError` naming the grant and the table's DDL."""
    name = f"{quote_name(table[0])}.{quote_name(table[1])}"
    try:
        cur.execute(f"INSERT INTO {name} VALUES (%s, %s) ON DUPLICATE KEY UPDATE mark = %s", (destination, mark, mark))
    except pymysql.err.MySQLError as exc:
        if not exc.args or exc.args[0] not in (_NO_SUCH_TABLE, _TABLE_ACCESS_DENIED, _DATABASE_ACCESS_DENIED):
            raise
        raise SnapshotError(
            f"the snapshot cannot write its watermarks to {'.'.join(table)}: "
            f"{exc.args[1] if len(exc.args) > 1 else exc} (grant this user INSERT and UPDATE on it; create it, if "
            f"missing, with {WATERMARK_TABLE_DDL.format(table=name)})"
        ) from None


def begin_read_after_mark(cur: Any, table: tuple[str, str], destination: str) -> EntryPosition:
    """Commit a watermark to ``table`` on ``cur``'s connection, then start a read-only ``WITH CONSISTENT SNAPSHOT``
    transaction there; returns the binlog end read between the two. The read sees everything up to the mark; of
    transactions between the mark and that end, it may miss those InnoDB had not yet made visible (MySQL writes the
    binlog first), so the position labels the read rather than placing it exactly.

    A low mark alone, for a reader that needs its read to be *at or after* a position it knows (the Spark source's
    executor ranges, read after their micro-batch's binlog end: :mod:`canal.spark.chunks`), not at an exact place:
    transactions become visible in binlog order and the mark's commit has returned, so every transaction before the
    mark in the binlog is visible to the read. No parser waits for this mark (it drops the table's rows all the
    same)."""
    write_mark(cur, table, destination, uuid.uuid4().hex)
    cur.execute("COMMIT")
    status = binlog_status(cur)
    if status is None:
        raise SnapshotError("SHOW MASTER STATUS is empty (binary logging off?): a watermark has no place to be read")
    cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
    return EntryPosition(as_text(status[0]), int(status[1]))


def mark_of(image: Any) -> str | None:
    """The mark in a row image of the watermark table (None when the image has no such column)."""
    if image is None or len(image) < len(WATERMARK_COLUMNS):
        return None
    mark = image[1]
    return mark if isinstance(mark, str) else None


class WatermarkWriter:
    """Writes one destination's watermarks to ``table`` (``db``, ``table``) through ``source`` (its own
    connection, opened when first needed; the binlog end after each high mark from its ``master_status``), telling
    ``expect`` each mark before it is written. :meth:`close` closes both."""

    def __init__(
        self, source: MysqlBinlogSource, table: tuple[str, str], destination: str, expect: Callable[[str], None]
    ) -> None:
        self._source = source
        self.table = table
        self._name = f"{quote_name(table[0])}.{quote_name(table[1])}"
        self.destination = destination
        self._expect = expect
        self._conn: Any = None

    def check(self) -> None:
        """:class:`SnapshotError` unless the table exists with the layout the parser reads and this user can write
        it (a probe mark, which no read waits for, is written)."""
        with self._connection().cursor() as cur:
            cur.execute(
                "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s "
                "ORDER BY ORDINAL_POSITION",
                self.table,
            )
            columns = tuple(as_text(row[0]).lower() for row in cur.fetchall())
        if columns != WATERMARK_COLUMNS:
            found = f"its columns are ({', '.join(columns)})" if columns else "it does not exist"
            raise SnapshotError(
                f"the snapshot's watermark table {'.'.join(self.table)} must have the columns "
                f"({', '.join(WATERMARK_COLUMNS)}): {found}; create it with "
                f"{WATERMARK_TABLE_DDL.format(table=self._name)}"
            )
        self._write(expect=False)

    def begin_read(self, cur: Any) -> MarkedRead:
        """Commit the low mark, start ``cur``'s read-only consistent-snapshot transaction, commit the high mark."""
        low = self._write()
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
        high = self._write()
        return MarkedRead(low, high, self._source.master_status())

    def _write(self, *, expect: bool = True) -> str:
        mark = uuid.uuid4().hex
        if expect:
            self._expect(mark)  # before the write: the parser may reach it before this call returns
        conn = self._connection()
        try:
            with conn.cursor() as cur:
                write_mark(cur, self.table, self.destination, mark)
        except BaseException:
            self.close()
            raise
        return mark

    def _connection(self) -> Any:
        if self._conn is None:
            self._conn = self._source.snapshot_connection()
            self._conn.autocommit(True)
        return self._conn

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(pymysql.err.Error, OSError):  # a broken connection is dropped either way
                conn.close()
        self._source.close()
