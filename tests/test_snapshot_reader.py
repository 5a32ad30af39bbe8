"""The snapshot reader on a real MariaDB: chunks exact at the binlog position they report, keyset chunks over
composite and string keys (a unique key where there is no primary key; a table without a key read once, in
pieces), chunks of wide rows holding fewer rows, and rows whose values are exactly what the binlog decoder gives
for the same rows."""

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


def test_a_table_without_a_primary_key_is_chunked_by_the_unique_key_the_server_promotes(
    mariadb: MariaDBDatabase,
) -> None:
    """The server promotes its first UNIQUE key over NOT NULL columns without a prefix (in its order of keys) to the
    table's primary key: InnoDB clusters by it, a MINIMAL before image carries it, and the table's rows are keyed by
    it -- c_two here, not the narrower z_one made after it."""
    mariadb.execute(
        "CREATE TABLE u (a INT NULL, code VARCHAR(12) NOT NULL, n INT NOT NULL, body VARCHAR(40) NOT NULL, "
        "UNIQUE KEY a_nullable (a), UNIQUE KEY b_prefix (body(10)), UNIQUE KEY c_two (n, code), "
        "UNIQUE KEY z_one (code))"
    )
    mariadb.execute(
        "INSERT INTO u SELECT IF(MOD(seq, 7) = 0, NULL, seq), CONCAT('c', LPAD(1000 - seq, 4, '0')), seq, "
        "CONCAT(LPAD(seq, 10, '0'), 'x') FROM seq_1_to_230"
    )
    schema = _table_schema(mariadb, "u")
    assert schema.key_indexes == (1, 2)  # the table's key: c_two (n, code)
    reader = ChunkReader(_connect(mariadb), schema, chunk_rows=50)
    assert reader.chunk_key() == ("n", "code")  # not the nullable one, not the prefix one, in its index's order
    chunks = [reader.read()]
    while chunks[-1].next_key is not None:
        chunks.append(reader.read(chunks[-1].next_key))
    reader.close()
    assert [len(c.rows) for c in chunks] == [50, 50, 50, 50, 30]
    keys = [(row[2], row[1]) for c in chunks for row in c.rows]
    assert keys == sorted(keys) and len(set(keys)) == 230  # every row once, in key order
    assert chunks[0].next_key == (str(keys[49][0]), keys[49][1])

    mariadb.execute("CREATE TABLE none_ (a INT NULL, b INT NOT NULL, UNIQUE KEY (a), KEY (b))")
    assert ChunkReader(_connect(mariadb), _table_schema(mariadb, "none_")).chunk_key() is None


def test_a_table_without_any_key_is_read_once_in_pieces_at_one_position(mariadb: MariaDBDatabase) -> None:
    mariadb.execute("CREATE TABLE bag (x INT, y VARCHAR(5))")
    mariadb.execute("INSERT INTO bag SELECT MOD(seq, 10), IF(MOD(seq, 3) = 0, NULL, 'v') FROM seq_1_to_1050")
    reader = ChunkReader(_connect(mariadb), _table_schema(mariadb, "bag"), chunk_rows=200)
    pieces = [reader.read()]
    mariadb.execute("DELETE FROM bag WHERE x = 1")  # after the read began: not in any piece
    while pieces[-1].more:
        pieces.append(reader.read_more())
    reader.close()
    assert [len(p.rows) for p in pieces] == [200, 200, 200, 200, 200, 50]
    assert {p.position for p in pieces} == {pieces[0].position}  # one transaction, one position
    assert all(p.next_key is None and p.keys is None for p in pieces)
    assert sum(1 for p in pieces for row in p.rows if row[0] == 1) == 105


def test_chunks_of_wide_rows_hold_fewer_rows(mariadb: MariaDBDatabase) -> None:
    mariadb.execute("CREATE TABLE wide (id INT PRIMARY KEY, b MEDIUMBLOB)")
    mariadb.execute("INSERT INTO wide SELECT seq, REPEAT('x', 20000) FROM seq_1_to_600")
    reader = ChunkReader(_connect(mariadb), _table_schema(mariadb, "wide"), chunk_rows=10_000, chunk_bytes=256_000)
    chunks = [reader.read()]
    while chunks[-1].next_key is not None:
        chunks.append(reader.read(chunks[-1].next_key))
    reader.close()
    sizes = [len(c.rows) for c in chunks]
    assert sizes[0] == 256  # the first chunk measures the rows
    assert all(1 <= n <= 13 for n in sizes[1:])  # 256,000 bytes / ~20,000 bytes a row
    assert sum(sizes) == 600 and [row[0] for c in chunks for row in c.rows] == list(range(1, 601))
    assert ChunkReader(_connect(mariadb), reader.schema).rows_per_chunk == 10_000  # without chunk_bytes: chunk_rows
