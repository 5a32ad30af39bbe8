"""The snapshot reader on a real MariaDB: chunks exact at the binlog position they report, keyset chunks over
composite and string keys, and rows whose values are exactly what the binlog decoder gives for the same rows."""

from __future__ import annotations

from typing import Any

import pymysql
import pytest

from canal.parse.events import RowsEvent
from canal.parse.mysql import MysqlBinlogSource
from canal.parse.source import DumpRequest
from canal.position import EntryPosition
from canal.schema.history import SchemaHistory
from canal.snapshot import ChunkReader
from canal.testing.plugin import MariaDBDatabase
from tests.test_fake_vs_mariadb import COLUMNS, _create_sql, _row

pytestmark = pytest.mark.integration


def _connect(db: MariaDBDatabase) -> Any:
    return lambda: db.connect(conv={})  # the server's text, untouched


def _table_schema(db: MariaDBDatabase, table: str) -> Any:
    source = MysqlBinlogSource(db.address, db.user, db.password)
    source.open()
    try:
        history = SchemaHistory()
        history.bootstrap(EntryPosition("mysql-bin.000001", 4), source.schema_catalog())
    finally:
        source.close()
    schema = history.table_schema(db.database, table)
    assert schema is not None
    return schema


def test_snapshot_rows_equal_the_binlog_rows_value_for_value(mariadb: MariaDBDatabase) -> None:
    """Every type: the rows a chunk reads are the tuples the decoder gives for the INSERTs that wrote them, under the
    same TableSchema (so a consumer cannot tell a snapshot row's values from a binlog row's)."""
    conn = mariadb.connect()
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        cur.execute(_create_sql())
        journal, position = mariadb.execute("SHOW MASTER STATUS")[0][:2]
        for key, which in ((1, 0), (2, 1), (3, None)):
            row = _row(key, which)
            names = ", ".join(f"`{n}`" for n in row)
            cur.execute(f"INSERT INTO t ({names}) VALUES ({', '.join(['%s'] * len(row))})", list(row.values()))
        cur.execute("INSERT INTO t (id, d65, dte, dt3) VALUES (4, 0, '0000-00-00', '2020-00-15 10:00:00')")
    conn.close()
    schema = _table_schema(mariadb, "t")
    chunk = ChunkReader(_connect(mariadb), schema, chunk_rows=100).read()
    assert chunk.next_key is None and len(chunk.rows) == 4

    source = MysqlBinlogSource(mariadb.address, mariadb.user, mariadb.password)
    source.open()
    try:
        events = [
            e for e in source.dump(DumpRequest(str(journal), int(position), blocking=False)) if isinstance(e, RowsEvent)
        ]
    finally:
        source.close()
    binlog = [r.after for e in events for r in e.rows]
    assert events[0].table == schema  # the same names, types, keys, charsets
    for got, want in zip(chunk.rows, binlog, strict=True):
        for meta, a, b in zip(schema.columns, got, want, strict=True):
            assert (a, type(a)) == (b, type(b)), meta.name
    assert len(COLUMNS) > 25


def test_chunks_follow_composite_and_string_keys_and_each_is_exact_at_its_position(
    mariadb: MariaDBDatabase,
) -> None:
    mariadb.execute("CREATE TABLE k (b INT NOT NULL, a VARCHAR(8) NOT NULL, v INT, PRIMARY KEY (b, a))")
    keys = [(b, a) for b in (1, 2, 3) for a in ("x", "Y", "é", "z-long")]
    for b, a in keys:
        mariadb.execute("INSERT INTO k VALUES (%s, %s, %s)", (b, a, b * 10))
    server_order = [(int(b), str(a)) for b, a in mariadb.execute("SELECT b, a FROM k ORDER BY b, a")]
    reader = ChunkReader(_connect(mariadb), _table_schema(mariadb, "k"), chunk_rows=5)
    seen: list[tuple[int, str]] = []
    after = None
    while True:
        mariadb.execute("UPDATE k SET v = v + 1 WHERE b = 3")  # a write before each chunk
        end = EntryPosition(*(mariadb.execute("SHOW MASTER STATUS")[0][:2]))
        chunk = reader.read(after)
        # exact: with no write since, the snapshot is at the binlog's end, and the rows show every write before it
        assert (chunk.position.journal_name, chunk.position.position) == (end.journal_name, int(str(end.position)))
        seen.extend((row[0], row[1]) for row in chunk.rows)
        if chunk.next_key is None:
            break
        after = chunk.next_key
    assert seen == server_order  # keyset chunks: every row once, in the server's key order (its collation)
    rows = ChunkReader(_connect(mariadb), reader.schema, chunk_rows=100).read().rows
    assert {row[2] for row in rows if row[0] == 3} == {33}  # three chunks, three updates before them


def test_a_snapshot_without_a_consistent_position_is_a_typed_error(mariadb: MariaDBDatabase) -> None:
    """(MariaDB always reports it; the check guards servers that do not.)"""
    mariadb.execute("CREATE TABLE p (id INT PRIMARY KEY)")

    class NoStatus:
        def __init__(self) -> None:
            self.conn = mariadb.connect(conv={})

        def cursor(self) -> Any:
            outer = self.conn.cursor()

            class Cursor:
                def __enter__(self) -> Any:
                    return self

                def __exit__(self, *exc: object) -> None:
                    outer.close()

                def execute(self, sql: str, args: Any = None) -> Any:
                    if sql.startswith("SHOW STATUS"):
                        return outer.execute("SELECT 1, 1 FROM DUAL WHERE FALSE")
                    return outer.execute(sql, args)

                def fetchall(self) -> Any:
                    return outer.fetchall()

            return Cursor()

        def close(self) -> None:
            self.conn.close()

    from canal.errors import SourceError

    with pytest.raises(SourceError, match="binlog_snapshot_file"):
        ChunkReader(NoStatus, _table_schema(mariadb, "p")).read()
    assert pymysql  # (the reader takes any DB-API connection factory)
