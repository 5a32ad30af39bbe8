"""Snapshot ranges read on executors (``canal.spark.chunks``), on a real MariaDB and without Spark: the planner's
ranges cover every row once (integer, string, composite, unique and missing keys), the server's rendering of the
change-row JSON equals the Python encoder's for every type it renders, long rows fall back to smaller pieces, a range
is read once and replayed from its spool, and nothing in a repr holds the password. The Spark path itself runs in
``test_spark_snapshot.py``."""

from __future__ import annotations

import datetime as dt
import errno
import json
import os
import pickle
import threading
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_snapshot_marks import create_watermark_table

pytest.importorskip("pyarrow")

from canal import files
from canal.errors import SnapshotError
from canal.files import temp_files_of
from canal.instance import Instance
from canal.lake.store.storage import Storage
from canal.spark import chunks
from canal.spark.chunks import ChunkPartition, ChunkPlanner, ChunkRange, discard_chunks_through, read_chunk
from canal.spark.offsets import INITIAL_OFFSET
from canal.spark.sessions import session_of
from canal.spark.source import CanalStreamReader, SourceConnector, close_sessions, config_from_options
from canal.spark.testing import master_position

pytestmark = pytest.mark.integration


def _options(mariadb: Any) -> dict[str, str]:
    return {
        "destination": "chunks",
        "master.address": mariadb.address,
        "master.user": mariadb.user,
        "master.password": mariadb.password,
        "filter.regex": rf"{mariadb.database}\..*",
    }


def _layouts(mariadb: Any, *tables: str) -> dict[str, Any]:
    config = config_from_options(_options(mariadb))
    layouts = Instance(config).snapshot_layouts([f"{mariadb.database}.{t}" for t in tables])
    return {t.table: t for t in layouts}


def _marker(partition: ChunkPartition) -> Path:
    """The local path of the marker a task reading ``partition`` keeps."""
    return partition.spool.local_path(chunks.task_marker(partition.spool_name))


def _partition(
    mariadb: Any, spool: Path | Storage, layout: Any, key: tuple[str, ...] | None, rng: ChunkRange, index: int = 0
) -> ChunkPartition:
    storage = spool if isinstance(spool, Storage) else Storage.at(spool, "the spool directory")
    return ChunkPartition(SourceConnector(_options(mariadb)), storage, "chunks", 7, index, layout, key, rng)


def _rows(partition: ChunkPartition) -> list[dict[str, Any]]:
    return [row for batch in read_chunk(partition) for row in batch.to_pylist()]


def test_ranges_cover_every_row_once_whatever_the_key(mariadb: Any, tmp_path: Path) -> None:
    db = mariadb.database
    conn = mariadb.connect()
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {db}.ints (id INT PRIMARY KEY, v INT)")
        cur.execute(f"CREATE TABLE {db}.strs (code VARCHAR(20) PRIMARY KEY, v INT)")
        cur.execute(f"CREATE TABLE {db}.pairs (a INT NOT NULL, b VARCHAR(8) NOT NULL, v INT, PRIMARY KEY (a, b))")
        cur.execute(f"CREATE TABLE {db}.uniq (u INT NOT NULL, v INT, UNIQUE KEY uu (u))")
        cur.execute(f"CREATE TABLE {db}.nokey (v INT)")
        cur.execute(f"CREATE TABLE {db}.empty (id INT PRIMARY KEY)")
        cur.executemany(f"INSERT INTO {db}.ints VALUES (%s, %s)", [(i * i - 40, i) for i in range(37)])
        cur.executemany(f"INSERT INTO {db}.strs VALUES (%s, %s)", [(f"{'ab'[i % 2]}{i:03}é", i) for i in range(29)])
        cur.executemany(f"INSERT INTO {db}.pairs VALUES (%s, %s, %s)", [(i % 5, f"k{i}", i) for i in range(31)])
        cur.executemany(f"INSERT INTO {db}.uniq VALUES (%s, %s)", [(i * 3, i) for i in range(23)])
        cur.executemany(f"INSERT INTO {db}.nokey VALUES (%s)", [(i % 4,) for i in range(11)])
    names = ["ints", "strs", "pairs", "uniq", "nokey", "empty"]
    layouts = _layouts(mariadb, *names)
    planner = ChunkPlanner(SourceConnector(_options(mariadb)), list(layouts.values()), 7)
    progress = ChunkPlanner.start([f"{db}.{n}" for n in names])
    ranges: list[ChunkRange] = []
    while progress is not None:  # three ranges per call, the progress through JSON as the offsets carry it
        planned, progress = planner.plan(json.loads(json.dumps(progress)), 3)
        assert len(planned) <= 3 and (planned or progress is None)  # an empty table needs no range
        ranges += [ChunkRange.from_json(json.loads(json.dumps(r.to_json()))) for r in planned]
    by_table: dict[str, list[dict[str, Any]]] = {}
    for index, rng in enumerate(ranges):
        layout = layouts[rng.table.split(".", 1)[1]]
        rows = _rows(_partition(mariadb, tmp_path, layout, planner.chunk_key(rng.table), rng, index))
        assert len(rows) <= 7 or rng.lo is rng.hi is None
        by_table.setdefault(layout.table, []).extend(rows)
    assert "empty" not in by_table and planner.chunk_key(f"{db}.nokey") is None
    assert planner.chunk_key(f"{db}.uniq") == ("u",)
    for name in names[:-1]:
        with conn.cursor() as cur:
            cur.execute(f"SELECT COUNT(*) FROM {db}.{name}")
            (count,) = cur.fetchone()
        got = [json.loads(r["after"]) for r in by_table[name]]
        assert len(got) == count  # every row once
        assert len({json.dumps(g, sort_keys=True) for g in got}) == len(got) or name == "nokey"
        assert {r["type"] for r in by_table[name]} == {"SNAPSHOT"}
    with conn.cursor() as cur:
        cur.execute(f"SELECT a, b FROM {db}.pairs ORDER BY a, b")
        expected = [{"a": str(a), "b": b} for a, b in cur.fetchall()]
    assert [json.loads(r["keys"]) for r in by_table["pairs"]] == expected  # key order, across ranges
    conn.close()


_TYPES = (
    "id BIGINT UNSIGNED PRIMARY KEY, i TINYINT, d DECIMAL(12,4), big DECIMAL(30,10), day DATE, at DATETIME, "
    "ts TIMESTAMP NULL, name VARCHAR(60), body TEXT, c CHAR(3), e ENUM('a','b c','\"q\"'), doc JSON"
)
_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)
_row = st.tuples(
    st.one_of(st.none(), st.integers(-128, 127)),
    st.one_of(st.none(), st.decimals(min_value=-99_999_999, max_value=99_999_999, places=4, allow_nan=False)),
    st.one_of(st.none(), st.decimals(min_value=-(10**19), max_value=10**19, places=10, allow_nan=False)),
    st.one_of(st.none(), st.dates(dt.date(1000, 1, 1), dt.date(9999, 12, 31))),
    st.one_of(
        st.none(),
        st.datetimes(dt.datetime(1000, 1, 1), dt.datetime(9999, 12, 31)).map(lambda d: d.replace(microsecond=0)),
    ),
    st.one_of(
        st.none(),
        st.datetimes(dt.datetime(1971, 1, 1), dt.datetime(2037, 12, 31)).map(lambda d: d.replace(microsecond=0)),
    ),
    st.one_of(st.none(), _text),
    st.one_of(st.none(), _text),
    st.one_of(st.none(), st.text(st.characters(codec="ascii", exclude_characters=" "), max_size=3)),
    st.one_of(st.none(), st.sampled_from(["a", "b c", '"q"'])),
    st.one_of(st.none(), _text.map(lambda t: json.dumps({"t": t}, ensure_ascii=False))),
)


@pytest.fixture
def typed_table(mariadb: Any) -> Any:
    mariadb.server.execute(f"CREATE TABLE {mariadb.database}.typed ({_TYPES}) DEFAULT CHARSET=utf8mb4")
    return _layouts(mariadb, "typed")["typed"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(_row, min_size=1, max_size=25))
def test_the_servers_rendering_equals_the_encoder(
    mariadb: Any, typed_table: Any, tmp_path_factory: Any, rows: list[Any]
) -> None:
    """Every type the server renders (a table of them takes the fast path) gives the text the Python encoder gives
    the same values read row by row (a range without a key takes that path)."""
    db = mariadb.database
    conn = mariadb.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SET SESSION time_zone = '+00:00'")
            cur.execute(f"DELETE FROM {db}.typed")
            cur.executemany(
                f"INSERT INTO {db}.typed VALUES ({', '.join(['%s'] * 12)})",
                [(n, *row) for n, row in enumerate(rows)],
            )
    finally:
        conn.close()
    spool = tmp_path_factory.mktemp("spool")
    whole = ChunkRange(f"{db}.typed", None, None)
    fast = _rows(_partition(mariadb, spool, typed_table, ("id",), whole, 0))
    slow = _rows(_partition(mariadb, spool, typed_table, None, whole, 1))
    assert [(r["keys"], r["after"]) for r in fast] == sorted(
        ((r["keys"], r["after"]) for r in slow), key=lambda kv: int(json.loads(kv[0])["id"])
    )
    assert [r["seq"] & 0xFFFFFFFF for r in fast] == [chunks.PARTITION_SEQ_BASE + i for i in range(len(rows))]


def test_control_characters_are_encoded_as_the_encoder_does(mariadb: Any, typed_table: Any, tmp_path: Path) -> None:
    """MariaDB writes the hex digits of some control characters in upper case; those rows are re-encoded."""
    db = mariadb.database
    text = "".join(chr(c) for c in range(32)) + '\\u001A "\\'
    mariadb.server.execute(f"INSERT INTO {db}.typed (id, name, body) VALUES (1, %s, 'plain')", (text[:60],))
    whole = ChunkRange(f"{db}.typed", None, None)
    fast = _rows(_partition(mariadb, tmp_path, typed_table, ("id",), whole, 0))
    slow = _rows(_partition(mariadb, tmp_path, typed_table, None, whole, 1))
    assert fast[0]["after"] == slow[0]["after"]
    assert json.loads(fast[0]["after"])["name"] == text[:60]
    assert "\\u001a" in fast[0]["after"] and "\\u001A" in fast[0]["after"]  # the character, then the literal text


def test_rows_longer_than_a_piece_come_in_smaller_pieces(mariadb: Any, tmp_path: Path) -> None:
    """A piece whose rendering is longer than ``group_concat_max_len`` (``max_allowed_packet``, 16 MB here) is read
    again in halves; every row comes once, as the encoder writes it."""
    db = mariadb.database
    mariadb.server.execute(f"CREATE TABLE {db}.wide (id INT PRIMARY KEY, body LONGTEXT)")
    conn = mariadb.connect()
    with conn.cursor() as cur:
        for i in range(9):
            cur.execute(f"INSERT INTO {db}.wide VALUES (%s, %s)", (i, chr(ord("a") + i) * 3_000_000))
    conn.close()
    layout = _layouts(mariadb, "wide")["wide"]
    whole = ChunkRange(f"{db}.wide", None, None)
    fast = _rows(_partition(mariadb, tmp_path, layout, ("id",), whole, 0))
    assert [json.loads(r["keys"])["id"] for r in fast] == [str(i) for i in range(9)]
    assert all(json.loads(r["after"])["body"] == chr(ord("a") + i) * 3_000_000 for i, r in enumerate(fast))


@pytest.mark.parametrize("where", ["local", "s3"])
def test_a_range_is_read_once_and_replayed_from_its_spool(
    mariadb: Any, tmp_path: Path, where: str, request: pytest.FixtureRequest
) -> None:
    """A range's rows are read once and spooled: a replay, or another attempt at the range, returns those (the
    first attempt to publish wins: a rename that never replaces locally, a conditional PUT in an object store); the
    micro-batch's commit deletes them."""
    if where == "s3":
        bucket = request.getfixturevalue("s3_bucket")
        spool = Storage.at(f"{bucket.url}/spool", "the spool directory", bucket.storage_options)
    else:
        spool = Storage.at(tmp_path, "the spool directory")
    db = mariadb.database
    mariadb.server.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(10))")
    mariadb.server.execute(f"INSERT INTO {db}.t VALUES (1, 'one'), (2, 'two'), (3, 'three')")
    layout = _layouts(mariadb, "t")["t"]
    partition = _partition(mariadb, spool, layout, ("id",), ChunkRange(f"{db}.t", ("1",), ("3",)))
    first = _rows(partition)
    assert [json.loads(r["after"])["v"] for r in first] == ["two", "three"]  # (lo, hi]
    mariadb.server.execute(f"UPDATE {db}.t SET v = 'changed'")
    assert _rows(partition) == first  # the micro-batch replays: the same rows, read at the same position
    assert chunks._write_chunk(partition) is False  # a second attempt read the range anew, and lost
    assert _rows(partition) == first
    assert spool.names("chunks") == [partition.spool_name.split("/")[-1]]  # no marker, nothing half-written
    discard_chunks_through(spool, 6)  # an earlier batch's commit leaves it
    assert spool.exists(partition.spool_name)
    discard_chunks_through(spool, 7)
    assert not spool.exists(partition.spool_name)
    assert [json.loads(r["after"])["v"] for r in _rows(partition)] == ["changed", "changed"]


def test_a_range_with_a_watermark_table_is_read_after_a_mark_it_commits(mariadb: Any, tmp_path: Path) -> None:
    """With a watermark table (servers without MariaDB's snapshot position: MySQL), a range commits a mark before its
    snapshot begins, so its read sees every transaction its micro-batch holds; its rows carry the binlog end after
    the mark. A table it cannot write fails the range by name, and leaves no file."""
    db = mariadb.database
    mariadb.server.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(10))")
    mariadb.server.execute(f"INSERT INTO {db}.t VALUES (1, 'one'), (2, 'two')")
    create_watermark_table(mariadb, "marks")
    layout = _layouts(mariadb, "t")["t"]
    conn = mariadb.connect()
    before = master_position(conn)
    marked = attrs.evolve(
        _partition(mariadb, tmp_path, layout, ("id",), ChunkRange(f"{db}.t", None, None)), watermark=(db, "marks")
    )
    rows = _rows(marked)
    assert [json.loads(r["after"])["v"] for r in rows] == ["one", "two"]
    with conn.cursor() as cur:
        cur.execute(f"SELECT destination, mark FROM {db}.marks")
        ((destination, mark),) = cur.fetchall()
    assert destination == "chunks" and len(mark) == 32
    after_mark = (rows[0]["log_file"], rows[0]["log_offset"])
    assert after_mark > before and after_mark == master_position(conn)  # the mark moved the binlog; nothing since
    missing = attrs.evolve(marked, watermark=(db, "no_such_marks"), index=1)
    with pytest.raises(SnapshotError, match=rf"to {db}\.no_such_marks: .*create it, if missing, with CREATE TABLE"):
        _rows(missing)
    assert sorted(p.name for p in missing.spool_path.parent.iterdir()) == [marked.spool_path.name]
    conn.close()


def test_ranges_are_read_ahead_from_the_last_until_a_task_has_come_that_far(mariadb: Any, tmp_path: Path) -> None:
    """The reader process reads a micro-batch's ranges from the last one back, and stops at the first one a task has
    published or is reading. Tasks then return those files: the rows as they were read ahead, not as the table is
    by then."""
    db = mariadb.database
    mariadb.server.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(10))")
    mariadb.server.execute(f"INSERT INTO {db}.t VALUES " + ", ".join(f"({i}, 'old')" for i in range(1, 9)))
    layout = _layouts(mariadb, "t")["t"]
    bounds = [None, ("2",), ("4",), ("6",), None]
    partitions = [
        _partition(mariadb, tmp_path, layout, ("id",), ChunkRange(f"{db}.t", bounds[i], bounds[i + 1]), index=i)
        for i in range(4)
    ]
    stopped = threading.Event()
    stopped.set()
    assert chunks.read_ahead(partitions, stopped) == []  # the source stopped: nothing is read
    assert not any(p.spool_path.exists() for p in partitions)
    by_task = _rows(partitions[1])  # a task got to range 1 first
    assert not _marker(partitions[1]).exists()  # gone once the task has published
    reading = _marker(partitions[2])
    reading.touch()  # a task is reading range 2
    assert chunks.read_ahead(partitions, threading.Event()) == [3]
    assert not partitions[2].spool_path.exists() and not partitions[0].spool_path.exists()  # left to their tasks
    reading.unlink()
    assert _rows(partitions[2])  # its task reads it
    mariadb.server.execute(f"UPDATE {db}.t SET v = 'new'")
    assert [json.loads(r["after"])["v"] for r in _rows(partitions[3])] == ["old", "old"]  # (6, last]
    assert [json.loads(r["keys"])["id"] for p in partitions[2:] for r in _rows(p)] == ["5", "6", "7", "8"]
    assert [json.loads(r["after"])["v"] for r in _rows(partitions[2])] == ["old", "old"]  # read before the UPDATE
    assert _rows(partitions[1]) == by_task
    assert [json.loads(r["after"])["v"] for r in _rows(partitions[0])] == ["new", "new"]  # read by its task, now


@pytest.mark.parametrize("prefetch", [True, False])
def test_the_source_reads_a_planned_micro_batchs_ranges_ahead_unless_prefetch_is_off(
    mariadb: Any, tmp_path: Path, prefetch: bool
) -> None:
    """Once it has planned a micro-batch, the source process reads its ranges itself, before any task runs; with
    ``prefetch`` off it leaves them all to the tasks."""
    db = mariadb.database
    mariadb.server.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(10))")
    mariadb.server.execute(f"INSERT INTO {db}.t VALUES " + ", ".join(f"({i}, 'v')" for i in range(1, 31)))
    options = {
        **_options(mariadb),
        "spool.dir": str(tmp_path / "spool"),
        "pycanal.snapshot.mode": "initial",
        "snapshot.partitions": "3",
        "snapshot.partition.rows": "10",
        "prefetch": str(prefetch).lower(),
    }
    reader = CanalStreamReader(options)
    try:
        end = reader.latest(dict(INITIAL_OFFSET))
        ahead = session_of(options).ranges_ahead  # started by the planning, before Spark asks for the partitions
        assert (ahead is not None) == prefetch
        values = reader.partition_values(dict(INITIAL_OFFSET), end)
        assert session_of(options).ranges_ahead is ahead  # the same batch's: not started again
        ranges = [v for v in values if isinstance(v, ChunkPartition)]
        assert [p.range.hi for p in ranges] == [("10",), ("20",), ("30",)]
        if ahead is not None:
            ahead[1].join(60)
            assert not ahead[1].is_alive()
        assert [p.spool_path.exists() for p in ranges] == [prefetch] * 3
        rows = [json.loads(r["keys"])["id"] for p in ranges for b in reader.read_value(p) for r in b.to_pylist()]
        assert rows == [str(i) for i in range(1, 31)]
    finally:
        close_sessions()


def test_a_stopping_source_gives_up_the_range_it_reads_ahead(
    mariadb: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped between two pieces of a range, the read-ahead leaves neither the range's file nor a temporary one;
    the range's task then reads it whole."""
    db = mariadb.database
    mariadb.server.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(10))")
    mariadb.server.execute(f"INSERT INTO {db}.t VALUES " + ", ".join(f"({i}, 'v')" for i in range(1, 11)))
    layout = _layouts(mariadb, "t")["t"]
    partition = _partition(mariadb, tmp_path, layout, ("id",), ChunkRange(f"{db}.t", None, None))
    monkeypatch.setattr(chunks, "_PIECE_ROWS", 4)
    stop = threading.Event()
    pieces = chunks._RangeReader.pieces
    read: list[int] = []

    def stopped_after_the_first(reader: Any) -> Any:
        for keys, images in pieces(reader):
            read.append(len(keys))
            yield keys, images
            stop.set()  # the source stops while this piece is written

    monkeypatch.setattr(chunks._RangeReader, "pieces", stopped_after_the_first)
    assert chunks.read_ahead([partition], stop) == []
    assert read == [4, 4]  # given up at the piece after the stop, not after all three
    assert not partition.spool_path.exists()
    assert not temp_files_of(partition.spool_path)
    assert [json.loads(r["keys"])["id"] for r in _rows(partition)] == [str(i) for i in range(1, 11)]


def test_a_range_planned_again_differently_is_not_given_the_first_plans_file(mariadb: Any, tmp_path: Path) -> None:
    """A range read ahead of a plan that Spark never logged stays in the spool; the range planned in its place, with
    the same micro-batch and index, reads its own rows."""
    db = mariadb.database
    mariadb.server.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY)")
    mariadb.server.execute(f"INSERT INTO {db}.t VALUES (1), (2), (3), (4)")
    layout = _layouts(mariadb, "t")["t"]
    unlogged = _partition(mariadb, tmp_path, layout, ("id",), ChunkRange(f"{db}.t", None, ("2",)))
    assert len(_rows(unlogged)) == 2
    again = _partition(mariadb, tmp_path, layout, ("id",), ChunkRange(f"{db}.t", None, ("3",)))
    assert again.spool_path != unlogged.spool_path
    assert [json.loads(r["keys"])["id"] for r in _rows(again)] == ["1", "2", "3"]
    left = _marker(again)
    left.touch()  # as a killed task leaves it
    discard_chunks_through(Storage(str(tmp_path)), 7)  # all go with their micro-batch's commit
    assert not unlogged.spool_path.exists() and not again.spool_path.exists() and not left.exists()


def test_attempts_of_one_range_at_once_all_return_the_first_published(
    mariadb: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spark may run a range's task twice at the same time (speculation). Here a second attempt starts while the first
    is reading and publishes first, after an UPDATE: the first attempt then returns the second's rows, as a replay
    does, whichever attempt Spark keeps."""
    db = mariadb.database
    mariadb.server.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(10))")
    mariadb.server.execute(f"INSERT INTO {db}.t VALUES (1, 'one'), (2, 'two')")
    layout = _layouts(mariadb, "t")["t"]
    partition = _partition(mariadb, tmp_path, layout, ("id",), ChunkRange(f"{db}.t", None, None))
    read_into = chunks._read_into
    second: list[list[dict[str, Any]]] = []

    def with_a_second_attempt(conn: Any, part: ChunkPartition, tmp: Path, stop: Any) -> bool:
        done = read_into(conn, part, tmp, stop)
        if not second:  # the first attempt has read, not published: the second one runs to its end
            second.append([])
            mariadb.server.execute(f"UPDATE {db}.t SET v = 'changed'")
            second[0] = _rows(partition)
        return done

    monkeypatch.setattr(chunks, "_read_into", with_a_second_attempt)
    first = _rows(partition)
    assert [json.loads(r["after"])["v"] for r in second[0]] == ["changed", "changed"]
    assert first == second[0] == _rows(partition)  # the replay reads the same file
    assert not temp_files_of(partition.spool_path)


def test_a_spool_dir_without_renames_or_hard_links_fails_the_range_by_name(
    mariadb: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = mariadb.database
    mariadb.server.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY)")
    mariadb.server.execute(f"INSERT INTO {db}.t VALUES (1)")
    layout = _layouts(mariadb, "t")["t"]
    partition = _partition(mariadb, tmp_path, layout, ("id",), ChunkRange(f"{db}.t", None, None))

    def no_links(src: object, dst: object) -> None:
        raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))

    monkeypatch.setattr(files, "_rename_noreplace", lambda source, target: None)  # no RENAME_NOREPLACE either
    monkeypatch.setattr(os, "link", no_links)
    with pytest.raises(SnapshotError, match=r"spool\.dir cannot hold executor ranges: .* has no hard links"):
        _rows(partition)
    assert not partition.spool_path.exists() and not temp_files_of(partition.spool_path)


def test_a_range_too_large_for_its_seq_numbers_is_refused(
    mariadb: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = mariadb.database
    mariadb.server.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY)")
    mariadb.server.execute(f"INSERT INTO {db}.t SELECT seq FROM seq_1_to_10", database=db)
    layout = _layouts(mariadb, "t")["t"]
    monkeypatch.setattr(chunks, "PARTITION_SEQ_SPAN", 6)
    partition = _partition(mariadb, tmp_path, layout, ("id",), ChunkRange(f"{db}.t", None, None))
    with pytest.raises(SnapshotError, match=r"more than 6 rows: lower snapshot\.partition\.rows"):
        _rows(partition)
    assert not partition.spool_path.exists()
    assert not temp_files_of(partition.spool_path)  # nothing half-written is left


def test_partitions_pickle_and_show_no_password(mariadb: Any, tmp_path: Path) -> None:
    db = mariadb.database
    mariadb.server.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY)")
    layout = _layouts(mariadb, "t")["t"]
    partition = _partition(mariadb, tmp_path, layout, ("id",), ChunkRange(f"{db}.t", None, ("5",)))
    copy = pickle.loads(pickle.dumps(partition))  # executors get them pickled
    assert copy.range == partition.range and copy.table == partition.table
    assert _rows(copy) == []
    for text in (repr(partition), repr(partition.connect), str(partition)):
        assert mariadb.password not in text
    assert "chunks" in repr(partition.connect)


def test_a_server_without_backslash_escapes_renders_the_same(mariadb: Any, typed_table: Any, tmp_path: Path) -> None:
    db = mariadb.database
    mariadb.server.execute(
        f"INSERT INTO {db}.typed (id, name, body) VALUES (1, 'tab\\there', 'a\\\\b'), (2, 'x', NULL)"
    )
    whole = ChunkRange(f"{db}.typed", None, None)
    expected = _rows(_partition(mariadb, tmp_path, typed_table, None, whole, 1))
    (mode,) = mariadb.server.execute("SELECT @@GLOBAL.sql_mode")[0]
    mariadb.server.execute("SET GLOBAL sql_mode = CONCAT(@@GLOBAL.sql_mode, ',NO_BACKSLASH_ESCAPES')")
    try:
        fast = _rows(_partition(mariadb, tmp_path, typed_table, ("id",), whole, 0))
    finally:
        mariadb.server.execute("SET GLOBAL sql_mode = %s", (mode,))
    assert [(r["keys"], r["after"]) for r in fast] == [(r["keys"], r["after"]) for r in expected]
    assert json.loads(fast[0]["after"])["name"] == "tab\there"


def test_a_ddl_while_a_range_is_read_reads_it_again(
    mariadb: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A column added after a range's read took the table's layout: the layout read again at the end differs, so
    the range is read again in a new transaction, and its rows carry the new layout (it was planned under the old
    one)."""
    db = mariadb.database
    mariadb.server.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(10))")
    mariadb.server.execute(f"INSERT INTO {db}.t VALUES (1, 'one'), (2, 'two')")
    planned = _layouts(mariadb, "t")["t"]
    layout_now = chunks._layout_now
    calls: list[int] = []

    def alter_after_the_first(cur: Any, table: Any) -> Any:
        layout = layout_now(cur, table)
        calls.append(1)
        if len(calls) == 1:  # the first read took the old layout; the table changes before it ends
            mariadb.server.execute(f"ALTER TABLE {db}.t ADD COLUMN tier VARCHAR(10) NOT NULL DEFAULT 'gold'")
        return layout

    monkeypatch.setattr(chunks, "_layout_now", alter_after_the_first)
    rows = _rows(_partition(mariadb, tmp_path, planned, ("id",), ChunkRange(f"{db}.t", None, None)))
    assert len(calls) == 4  # two reads, each taking the layout at its start and its end
    assert [json.loads(r["after"]) for r in rows] == [
        {"id": "1", "v": "one", "tier": "gold"},
        {"id": "2", "v": "two", "tier": "gold"},
    ]
    assert [c[0] for c in json.loads(rows[0]["columns"])] == ["id", "v", "tier"]
