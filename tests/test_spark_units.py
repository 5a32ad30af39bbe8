"""Smaller pieces of canal.spark: DDL parsing, offsets, the spool, DDL in the mirror, project(), current_rows(),
AvailableNow."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import threading
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("deltalake")

from canal.config import InstanceConfig, MasterConfig, StoreConfig
from canal.files import temp_files_of, write_file_atomic
from canal.instance import Instance
from canal.lake.forms.changes import arrow_schema
from canal.lake.types import MirrorError
from canal.position import EntryPosition
from canal.protocol import ColumnMeta, Entry, EntryType, EventType, Header, RowChange, RowData, TableSchema
from canal.spark import DeltaMirror, Spool, current_rows, entries_to_batch, project
from canal.spark.offsets import INITIAL_OFFSET, canonical, cursor_key, offset_of
from canal.spark.project import parse_create_table
from canal.spark.source import (
    STORE_SIZE,
    CanalStreamReader,
    SparkSourceError,
    close_sessions,
    config_from_options,
    spool_shared,
)
from canal.spark.spool import InlineRows, SpooledRows, SpoolError, read_spooled
from canal.spark.testing import compare_tables, master_position

pytestmark = [pytest.mark.spark]


def test_evolution_follows_each_kind_of_column_change_through_the_schema_catalog() -> None:
    """A mirror table's layout after a batch's DDL comes from the one DDL code: renames keep their data (origin),
    moves reorder, added columns are new, declared types are Arrow types, RENAME TABLE moves the table."""
    import pyarrow as pa

    from canal.lake.ddl.evolution import plan_evolution

    ddl = [
        (3, "ALTER TABLE t ADD COLUMN tier VARCHAR(10) AFTER id, DROP COLUMN `old``x`"),
        (5, "ALTER TABLE t RENAME COLUMN a TO b, MODIFY id BIGINT UNSIGNED"),
        (6, "ALTER TABLE t CHANGE b c DECIMAL(10,2) FIRST"),
        (8, "RENAME TABLE t TO t2"),
    ]
    evolution = plan_evolution("app", "t", ["id", "a", "old`x"], ddl)
    assert evolution.columns == (
        ("c", "a", pa.decimal128(10, 2)),
        ("id", "id", pa.decimal128(20, 0)),  # BIGINT UNSIGNED: every value fits
        ("tier", None, pa.string()),
    )
    assert evolution.moved_to == ("app", "t2") and evolution.exists and not evolution.created
    assert evolution.renames == ((5, {"a": "b"}), (6, {"b": "c"}))
    dropped = plan_evolution("app", "t", ["id"], [(1, "DROP TABLE t"), (2, "CREATE TABLE t (k INT PRIMARY KEY)")])
    assert dropped.created and dropped.columns == (("k", None, pa.int64()),)
    gone = plan_evolution("app", "t", ["id"], [(1, "DROP TABLE IF EXISTS t")])
    assert not gone.exists
    assert plan_evolution("app", "t", ["id"], [(1, "ALTER TABLE other ADD x INT")]).columns == (("id", "id", None),)
    assert plan_evolution("app", "t", None, [(1, "ALTER TABLE t ADD x INT")]).exists is False  # not mirrored yet


@pytest.mark.parametrize(
    "sql",
    [
        "ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (k2)",
        "ALTER TABLE t DROP INDEX `PRIMARY`, ADD x INT",
        "ALTER TABLE t DROP CONSTRAINT `PRIMARY`",
        "DROP INDEX `PRIMARY` ON t",
    ],
)
def test_evolution_drops_a_primary_key_it_learned_in_an_earlier_batch(sql: str) -> None:
    """The mirror seeds its catalog with a table's columns, not its keys: a primary key dropped in a later batch than
    the table's CREATE (found by the random schema differential) changes no column and is no error."""
    import pyarrow as pa

    from canal.lake.ddl.evolution import plan_evolution

    evolution = plan_evolution("app", "t", ["id", "k2"], [(1, sql)])
    added = (("x", None, pa.int64()),) if "ADD x" in sql else ()
    assert evolution.columns == (("id", "id", None), ("k2", "k2", None), *added)


def test_parse_create_table() -> None:
    schema, table, cols = parse_create_table(
        "CREATE TABLE IF NOT EXISTS `shop`.`orders` (id INT PRIMARY KEY, total DECIMAL(12, 2) NOT NULL, "
        "n BIGINT UNSIGNED, PRIMARY KEY (id), KEY k (total)) ENGINE=InnoDB"
    )
    assert (schema, table) == ("shop", "orders")
    assert cols == [("id", "INT"), ("total", "DECIMAL(12, 2)"), ("n", "BIGINT UNSIGNED")]


def _entry(offset: int, rows_done: int, anchor_offset: int, rows: list[RowData]) -> Entry:
    header = Header("mysql-bin.000002", offset, 1, 1_700_000_000_000, "shop", "t", EventType.INSERT, 40)
    anchor = EntryPosition("mysql-bin.000002", anchor_offset, 1_700_000_000_000, 1, None, True)
    return Entry(header, EntryType.ROWDATA, RowChange(EventType.INSERT, rows), anchor=anchor, rows_done=rows_done)


TABLE = TableSchema(
    "shop",
    "t",
    (
        ColumnMeta("id", mysql_type="int(11)", is_key=True),
        ColumnMeta("amount", mysql_type="decimal(10,2)"),
        ColumnMeta("note", mysql_type="varchar(20)"),
    ),
)


def test_offsets_are_json_native_and_ordered() -> None:
    e1 = _entry(500, 1, 400, [RowData(TABLE, after=(1, Decimal("2.50"), 'a "q"'))])
    e2 = _entry(600, 2, 400, [RowData(TABLE, after=(2, None, None))])
    o1, o2 = offset_of(e1, 1), offset_of(e2, 1)
    assert o1 is not None and o2 is not None
    assert json.loads(json.dumps(o1)) == o1
    assert cursor_key(INITIAL_OFFSET) < cursor_key(o1) < cursor_key(o2)
    batch = entries_to_batch([e1, e2], "dest", 3)
    assert batch.schema.equals(arrow_schema())
    rows = batch.to_pylist()
    assert [r["seq"] for r in rows] == [3 << 32, (3 << 32) + 1]
    assert json.loads(rows[0]["after"]) == {"id": "1", "amount": "2.50", "note": 'a "q"'}
    assert json.loads(rows[1]["after"]) == {"id": "2", "amount": None, "note": None}
    assert json.loads(rows[0]["keys"]) == {"id": "1"}
    assert json.loads(rows[0]["columns"]) == [
        ["id", "int(11)", True],
        ["amount", "decimal(10,2)", False],
        ["note", "varchar(20)", False],
    ]


def _one_row_batch() -> tuple[dict[str, Any], dict[str, Any], Any]:
    """(start, end, change rows) of a batch of one INSERT, from the query's start."""
    e1 = _entry(500, 1, 400, [RowData(TABLE, after=(1, Decimal("2.50"), "a"))])
    start, end = dict(INITIAL_OFFSET), offset_of(e1, 1)
    assert end is not None
    return start, end, entries_to_batch([e1], "dest", 1)


def test_spool_round_trip_and_discard(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    start, end, batch = _one_row_batch()
    spool.write(start, end, batch)
    got = spool.read(start)
    assert got is not None and got[1] == end and got[0].equals(batch)
    assert spool.read(end) is None
    spool.discard_through(end)
    assert spool.read(start) is None


def test_a_batch_spooled_in_chunks_reads_back_as_one_and_is_invisible_until_published(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    entries = [_entry(500 + i, 1, 400 + 100 * i, [RowData(TABLE, after=(i, Decimal("2.50"), "a"))]) for i in range(3)]
    start, end = dict(INITIAL_OFFSET), offset_of(entries[-1], 1)
    assert end is not None
    chunks = [entries_to_batch(entries[:2], "dest", 1), entries_to_batch(entries[2:], "dest", 1, 2)]
    writer = spool.open(start, chunks[0].schema)
    for chunk in chunks:
        writer.write(chunk)
        assert spool.read(start) is None  # a reader sees no part of it
    writer.publish(end)
    got = spool.read(start)
    assert got is not None and got[1] == end and got[0].equals(entries_to_batch(entries, "dest", 1))
    assert temp_files_of(spool.path_for(start)) == []


def test_a_damaged_spool_file_is_a_typed_error_and_stays(tmp_path: Path) -> None:
    """A spool file cut short (a disk that lost its tail) cannot replay its batch identically: reading it, counting
    its rows for a task, or a task reading its rows raises SpoolError naming the file, which is left as it was."""
    spool = Spool(tmp_path)
    start, end, batch = _one_row_batch()
    spool.write(start, end, batch)
    assert spool.rows(start) == batch.num_rows
    path = spool.path_for(start)
    cut = path.read_bytes()[:-40]
    path.write_bytes(cut)
    for read in (spool.read, spool.rows, lambda start: list(read_spooled(spool.shared(start)))):
        with pytest.raises(SpoolError, match="is unreadable"):
            read(start)
    assert path.read_bytes() == cut
    assert spool.rows({**start, "batch": 99}) is None  # no file: nothing spooled there


def test_committed_batches_take_the_temporary_files_of_killed_writers_with_them(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    _start, _end, batch = _one_row_batch()
    starts = [{**INITIAL_OFFSET, "batch": n} for n in range(3)]
    for start in starts:
        spool.write(start, {**start, "batch": start["batch"] + 1}, batch)
    # writers killed while writing the batches after starts[0] and starts[2] (AtomicFile's temporary names)
    left = [spool.path_for(starts[0]), spool.path_for(starts[2])]
    for path in left:
        path.with_name(f".{path.name}.tmp-0123").write_bytes(b"partial")
    spool.discard_through({**INITIAL_OFFSET, "batch": 2})  # Spark committed the batches numbered 0 and 1
    assert [spool.read(start) is None for start in starts] == [True, True, False]
    assert temp_files_of(left[0]) == [] and len(temp_files_of(left[1])) == 1  # a writer of a later batch: kept


def test_a_discarded_spool_writer_leaves_nothing(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    start, _end, batch = _one_row_batch()
    writer = spool.open(start, batch.schema)
    writer.write(batch)
    writer.discard()
    assert spool.read(start) is None and list(tmp_path.iterdir()) == []


def test_a_spool_file_of_the_earlier_format_is_read(tmp_path: Path) -> None:
    """Before batches were spooled in chunks, a file was one record batch with the end offset in the schema."""
    import pyarrow as pa

    spool = Spool(tmp_path)
    start, end, batch = _one_row_batch()
    schema = batch.schema.with_metadata({b"start": canonical(start).encode(), b"end": canonical(end).encode()})

    def fill(fh: Any) -> None:
        with pa.ipc.new_file(fh, schema) as writer:
            writer.write_batch(batch)

    write_file_atomic(spool.path_for(start), fill)
    got = spool.read(start)
    assert got is not None and got[1] == end and got[0].equals(batch)


def _repeated_rows(n: int) -> tuple[dict[str, Any], dict[str, Any], Any]:
    """(start, end, change rows) of ``n`` INSERTs of one row each."""
    entries = [
        _entry(500 + i, 1, 400 + 100 * i, [RowData(TABLE, after=(i, Decimal("2.50"), "a note " * 20))])
        for i in range(n)
    ]
    start, end = dict(INITIAL_OFFSET), offset_of(entries[-1], 1)
    assert end is not None
    return start, end, entries_to_batch(entries, "dest", 1)


def test_a_spool_file_is_compressed_and_names_its_row_count(tmp_path: Path) -> None:
    """Change rows repeat most of the row before (columns text, metadata, much of their images): the spool's Arrow
    buffers are LZ4-compressed, and the writer records the row count, which the driver reads without decompressing
    the rows."""
    import pyarrow as pa

    spool = Spool(tmp_path)
    start, end, batch = _repeated_rows(2000)
    writer = spool.open(start, batch.schema)
    for chunk in (batch.slice(0, 1500), batch.slice(1500)):
        writer.write(chunk)
    writer.publish(end)
    path = spool.path_for(start)
    assert path.stat().st_size * 4 < pa.ipc.get_record_batch_size(batch)
    with pa.ipc.open_file(path) as reader:
        assert reader.get_batch_with_custom_metadata(reader.num_record_batches - 1)[1][b"rows"] == b"2000"
    assert spool.rows(start) == 2000
    got = spool.read(start)
    assert got is not None and got[1] == end and got[0].equals(batch)
    assert pa.Table.from_batches(list(read_spooled(spool.shared(start)))).equals(pa.Table.from_batches([batch]))
    spool.write({**start, "batch": 7}, end, batch.slice(0, 0))
    assert spool.rows({**start, "batch": 7}) == 0


def test_a_spool_file_written_before_compression_is_read(tmp_path: Path) -> None:
    """A spool file written in chunks before the compression came: plain buffers, and no row count beside the
    end offset. It is read, counted and handed to a task as it was."""
    import pyarrow as pa

    spool = Spool(tmp_path)
    start, end, batch = _repeated_rows(30)
    schema = batch.schema.with_metadata({b"start": canonical(start).encode()})

    def fill(fh: Any) -> None:
        with pa.ipc.new_file(fh, schema) as writer:
            writer.write_batch(batch.slice(0, 20))
            writer.write_batch(batch.slice(20))
            writer.write_batch(batch.slice(0, 0), custom_metadata={b"end": canonical(end).encode()})

    write_file_atomic(spool.path_for(start), fill)
    assert spool.rows(start) == 30
    got = spool.read(start)
    assert got is not None and got[1] == end and got[0].equals(batch)
    assert pa.Table.from_batches(list(read_spooled(spool.shared(start)))).equals(pa.Table.from_batches([batch]))


def test_options_restore_canal_key_case() -> None:
    cfg = config_from_options(
        {
            "destination": "d",
            "master.address": "127.0.0.1:3306",
            "canal.zkservers": "127.0.0.1:2181",
            "meta.mode": "zookeeper",
            "canal.instance.dbusername": "u",
            "spool.dir": "/tmp/x",
        }
    )
    assert cfg.zk_hosts == "127.0.0.1:2181" and cfg.master.username == "u" and cfg.meta_mode.value == "zookeeper"


@pytest.mark.integration
def test_mirror_applies_drop_column_and_truncate(mariadb: Any, tmp_path: Path) -> None:
    conn = mariadb.connect()
    db = mariadb.database
    start = master_position(conn)
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE `{db}`.a (id INT PRIMARY KEY, x VARCHAR(5), y INT)")
        cur.execute(f"CREATE TABLE `{db}`.b (id INT PRIMARY KEY, v DATETIME(3))")
        cur.executemany(f"INSERT INTO `{db}`.a VALUES (%s, %s, %s)", [(i, f"x{i}", i) for i in range(10)])
        cur.executemany(f"INSERT INTO `{db}`.b VALUES (%s, '2024-01-02 03:04:05.678')", [(i,) for i in range(5)])
    cfg = InstanceConfig(
        destination="d",
        master=MasterConfig(mariadb.address, mariadb.user, mariadb.password, journal_name=start[0], position=start[1]),
        filter_regex=rf"{db}\..*",
    )
    mirror = DeltaMirror(tmp_path / "m")

    def drain(inst: Instance, batch_id: int, until: tuple[str, int]) -> None:
        entries: list[Entry] = []
        while not entries or (entries[-1].header.log_file, entries[-1].header.next_offset) < until:
            msg = inst.get(1000, timeout=5.0, linger=0.05)  # the entries there once the stream went quiet
            assert msg.entries, "no entries arrived"
            entries.extend(msg.entries)
        mirror.apply(entries_to_batch(entries, "d", batch_id), batch_id)

    with Instance(cfg) as inst:
        drain(inst, 1, master_position(conn))
        assert all(c.equal for c in compare_tables(conn, mirror, db, ["a", "b"]))
        with conn.cursor() as cur:  # DDL only, no row after it: the mirror must still follow
            cur.execute(f"ALTER TABLE `{db}`.a DROP COLUMN y")
            cur.execute(f"TRUNCATE TABLE `{db}`.b")
        drain(inst, 2, master_position(conn))
        assert "y" not in mirror.read(db, "a").column_names
        assert mirror.read(db, "b").num_rows == 0
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO `{db}`.b VALUES (7, '2025-01-01 00:00:00')")
            cur.execute(f"UPDATE `{db}`.a SET x = 'z' WHERE id < 3")
        drain(inst, 3, master_position(conn))
    for c in compare_tables(conn, mirror, db, ["a", "b"]):
        assert c.equal, str(c)
    assert mirror.committed_batch_ids(db, "a") == [1, 2, 3] and mirror.committed_batch_ids(db, "b") == [1, 2, 3]
    # a replayed batch is skipped
    assert mirror.apply(entries_to_batch([], "d", 3), 3).tables == {}
    conn.close()


def test_project_types_one_table(spark: Any) -> None:
    rows = [RowData(TABLE, after=(1, Decimal("2.50"), "a")), RowData(TABLE, after=(2, None, "b"))]
    batch = entries_to_batch([_entry(500, 2, 400, rows)], "dest", 1)
    import pyarrow as pa

    df = spark.createDataFrame(pa.Table.from_batches([batch]))
    typed = project(df, TABLE)
    assert [f.name for f in typed.schema.fields] == ["op", "seq", "execute_time", "absent", "id", "amount", "note"]
    assert typed.schema["amount"].dataType.simpleString() == "decimal(10,2)"
    got = sorted((r.id, r.amount, r.note) for r in typed.collect())
    assert got == [(1, Decimal("2.50"), "a"), (2, None, "b")]
    same = project(df, "CREATE TABLE shop.t (id INT, amount DECIMAL(10,2), note VARCHAR(20))").collect()
    assert sorted((r.id, r.amount, r.note) for r in same) == got
    assert project(df, TABLE, table="shop.other").count() == 0


def test_current_rows_leave_what_the_changes_leave(spark: Any) -> None:
    """current_rows() against a model: a seeded run of snapshot rows, inserts, updates (some moving the key, one
    moving it away and back within one event) and deletes, over several batches."""
    import random

    import pyarrow as pa

    rng = random.Random(7)
    model: dict[int, tuple[Any, ...]] = {}
    entries: list[Entry] = []

    def add(kind: EventType, rows: list[RowData]) -> None:
        header = Header("mysql-bin.000002", 100 + 10 * len(entries), 1, 1_700_000_000_000, "shop", "t", kind, 40)
        entries.append(Entry(header, EntryType.ROWDATA, RowChange(kind, tuple(rows))))

    add(EventType.SNAPSHOT, [RowData(TABLE, after=(k, Decimal(k), f"s{k}")) for k in range(10)])
    model.update({k: (k, Decimal(k), f"s{k}") for k in range(10)})
    for step in range(200):
        key = rng.randrange(20)
        if key not in model:
            row = (key, Decimal(step), f"i{step}")
            add(EventType.INSERT, [RowData(TABLE, after=row)])
            model[key] = row
        elif rng.random() < 0.3:
            add(EventType.DELETE, [RowData(TABLE, before=model.pop(key))])
        else:
            target = rng.randrange(20) if rng.random() < 0.4 else key
            if target != key and target in model:
                target = key
            row = (target, Decimal(step), f"u{step}")
            add(EventType.UPDATE, [RowData(TABLE, before=model.pop(key), after=row)])
            model[target] = row
    away = next(k for k in range(20) if k not in model)  # one event moves a row to a free key and back
    some = next(iter(model))
    there, back = (away, Decimal(1), "away"), (some, Decimal(2), "back")
    add(EventType.UPDATE, [RowData(TABLE, before=model[some], after=there), RowData(TABLE, before=there, after=back)])
    model[some] = back
    batches = [entries_to_batch(entries[i : i + 50], "d", 1 + i // 50) for i in range(0, len(entries), 50)]
    df = spark.createDataFrame(pa.Table.from_batches(batches))
    got = {r.id: (r.id, r.amount, r.note) for r in current_rows(df, TABLE, ["id"]).collect()}
    assert got == model
    with pytest.raises(ValueError, match="keys must name columns"):
        current_rows(df, TABLE, ["nope"])


def _mirror_available_now(spark: Any, options: dict[str, str], mirror: DeltaMirror, checkpoint: Path) -> Any:
    """A started ``Trigger.AvailableNow`` query of the canal source into ``mirror``."""
    return (
        spark.readStream.format("canal")
        .options(**options)
        .load()
        .writeStream.foreachBatch(mirror)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )


def _source_options(mariadb: Any, start: tuple[str, int], tmp_path: Path, **extra: str) -> dict[str, str]:
    """``canal`` source options reading ``mariadb``'s test database from binlog position ``start``."""
    return {
        "destination": "d",
        "master.address": mariadb.address,
        "master.user": mariadb.user,
        "master.password": mariadb.password,
        "master.journal.name": start[0],
        "master.position": str(start[1]),
        "filter.regex": rf"{mariadb.database}\..*",
        "spool.dir": str(tmp_path / "ckpt.canal-spool"),
        **extra,
    }


@pytest.mark.integration
def test_trigger_available_now_stops_at_the_master_position(mariadb: Any, spark: Any, tmp_path: Path) -> None:
    conn = mariadb.connect()
    db = mariadb.database
    start = master_position(conn)
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE `{db}`.a (id INT PRIMARY KEY, x INT)")
        cur.executemany(f"INSERT INTO `{db}`.a VALUES (%s, %s)", [(i, i) for i in range(50)])
    options = _source_options(mariadb, start, tmp_path, **{"max.entries": "40"})  # a few micro-batches a run
    mirror = DeltaMirror(tmp_path / "m")

    def run_once() -> None:
        assert _mirror_available_now(spark, options, mirror, tmp_path / "ckpt").awaitTermination(120)  # ends itself

    run_once()
    assert all(c.equal for c in compare_tables(conn, mirror, db, ["a"]))
    first = len(mirror.history)
    with conn.cursor() as cur:
        cur.execute(f"UPDATE `{db}`.a SET x = x + 100 WHERE id < 25")
        cur.execute(f"DELETE FROM `{db}`.a WHERE id >= 40")
    run_once()
    assert len(mirror.history) > first
    for c in compare_tables(conn, mirror, db, ["a"]):
        assert c.equal, str(c)
    conn.close()


@pytest.mark.integration
def test_trigger_available_now_waits_for_the_parser_to_read_up_to_the_target(mariadb: Any, tmp_path: Path) -> None:
    """Spark ends an AvailableNow run at a micro-batch that brings nothing. One transaction of 300,000 rows (60 MB)
    on a table the filter leaves out gives the parser a second of reading with nothing to hand off, twenty times a
    ``read.timeout`` of 0.05 s: a read must not come back empty before the parser has read up to the master's
    position, or the rows after the noise wait for the next run (a loaded machine did this with the default
    timeout). Driven through the reader as Spark drives it, without Spark: reads until the first empty one."""
    from canal.spark.offsets import INITIAL_OFFSET
    from canal.spark.source import CanalStreamReader, close_sessions

    conn = mariadb.connect()
    db = mariadb.database
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE `{db}`.noise (id INT PRIMARY KEY, pad VARCHAR(200))")
        cur.execute(f"CREATE TABLE `{db}`.a (id INT PRIMARY KEY, x INT)")
    start = master_position(conn)
    with conn.cursor() as cur:
        cur.execute(f"INSERT INTO `{db}`.noise SELECT seq, REPEAT('n', 200) FROM seq_1_to_300000")
        cur.executemany(f"INSERT INTO `{db}`.a VALUES (%s, %s)", [(i, i) for i in range(30)])
    options = _source_options(
        mariadb, start, tmp_path, **{"filter.black.regex": rf"{db}\.noise", "read.timeout": "0.05", "prefetch": "false"}
    )
    reader = CanalStreamReader(options)
    try:
        reader.prepareForTriggerAvailableNow()
        offset, ids = dict(INITIAL_OFFSET), []
        while True:
            batches, end = reader.read(offset)
            rows = [r for b in batches for r in b.to_pylist()]
            if end == offset:
                break
            ids += [json.loads(r["keys"])["id"] for r in rows if r["table"] == "a" and r["type"] == "INSERT"]
            reader.commit(end)
            offset = end
    finally:
        close_sessions()
    assert ids == [str(i) for i in range(30)]
    conn.close()


@pytest.mark.integration
@pytest.mark.parametrize("images", ["json", "packed"])
def test_trigger_available_now_ends_only_after_a_running_snapshot(mariadb: Any, tmp_path: Path, images: str) -> None:
    """A first start in snapshot mode ``initial`` of tables ``a`` and ``b``, with ``b`` locked by another session:
    the snapshot hands over ``a``'s rows, then waits on ``b``. Nothing is written after the AvailableNow target, so
    the parser stands at it and the store is empty -- but the run ends at its first empty read, and that read must not
    come while a snapshot runs: the reads wait until ``b`` is unlocked, and every row comes. Driven through the reader
    as Spark drives it, without Spark."""
    import pyarrow.compute as pc

    from canal.spark.offsets import INITIAL_OFFSET
    from canal.spark.source import CanalStreamReader, close_sessions

    conn, locker = mariadb.connect(), mariadb.connect()
    db = mariadb.database
    with conn.cursor() as cur:
        for table in ("a", "b"):
            cur.execute(f"CREATE TABLE `{db}`.{table} (id INT PRIMARY KEY, x INT)")
            cur.execute(f"INSERT INTO `{db}`.{table} SELECT seq, seq FROM seq_1_to_100")
    with locker.cursor() as cur:
        cur.execute(f"LOCK TABLES `{db}`.b WRITE")
    options = _source_options(mariadb, master_position(conn), tmp_path, **{"pycanal.snapshot.mode": "initial"})
    del options["master.journal.name"], options["master.position"]  # a first start: the snapshot is due
    options.update({"pycanal.snapshot.chunk.rows": "10", "images": images, "read.timeout": "0.2"})
    reader = CanalStreamReader(options)
    counted: list[int] = []
    failed: list[BaseException] = []

    def run() -> None:
        offset = dict(INITIAL_OFFSET)
        try:
            while True:
                batches, end = reader.read(offset)
                if end == offset:
                    return
                # json: a row per change; packed: a row per packed batch, which counts its change rows
                for batch in batches:
                    counted.append(batch.num_rows if images == "json" else pc.sum(batch.column("rows")).as_py())
                reader.commit(end)
                offset = end
        except BaseException as exc:  # the test's thread reports it below
            failed.append(exc)

    try:
        reader.prepareForTriggerAvailableNow()
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 60
        while not _waits_for_lock(conn, "b"):  # the snapshot reached b (a's rows handed over)
            ended = f"the run ended before the snapshot reached b ({sum(counted)} rows), or failed: {failed}"
            assert not failed and thread.is_alive() and time.monotonic() < deadline, ended
        thread.join(3.0)  # an empty read now would end the run, with a's rows only
        assert thread.is_alive() and sum(counted) <= 100 and not failed
        with locker.cursor() as cur:
            cur.execute("UNLOCK TABLES")
        thread.join(120)
        assert not failed and not thread.is_alive() and sum(counted) == 200
    finally:
        locker.close()
        close_sessions()
    conn.close()


def _waits_for_lock(conn: Any, table: str) -> bool:
    """Whether a session's query naming `` `table` `` waits for its metadata lock (another session locked it)."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE LIKE %s AND INFO LIKE %s",
            ("%metadata lock%", f"%`{table}`%"),
        )
        (count,) = cur.fetchone()
    return bool(count)


@pytest.mark.integration
def test_trigger_available_now_reads_everything_through_a_store_smaller_than_a_micro_batch(
    mariadb: Any, spark: Any, tmp_path: Path
) -> None:
    """Spark asks for micro-batch N+1 before it commits N. A store of 64 entries, filled by N until its commit,
    would leave N+1 empty, and an empty micro-batch ends an AvailableNow run with rows still to read: the source
    acks N once it is spooled, so the run reads every row however small the store."""
    conn = mariadb.connect()
    db = mariadb.database
    start = master_position(conn)
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE `{db}`.a (id INT PRIMARY KEY, x INT)")
        for i in range(100):  # one event, and one transaction, per row: five stores full
            cur.execute(f"INSERT INTO `{db}`.a VALUES (%s, %s)", (i, i))
    store = {"canal.instance.memory.buffer.size": "64", "canal.instance.memory.batch.mode": "ITEMSIZE"}
    options = _source_options(mariadb, start, tmp_path, **store, **{"batch.size": "16", "read.timeout": "0.5"})
    mirror = DeltaMirror(tmp_path / "m")
    query = _mirror_available_now(spark, options, mirror, tmp_path / "ckpt")
    assert query.awaitTermination(180)
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 1 + 100 and len(sizes) > 3, sizes  # 3 entries a row (begin, row, commit): 64 hold 21
    for c in compare_tables(conn, mirror, db, ["a"]):
        assert c.equal, str(c)
    conn.close()


@pytest.mark.parametrize(("option", "value"), [("maxRowsPerTrigger", "300"), ("maxBytesPerTrigger", "20000")])
def test_read_limits_cap_each_micro_batch_and_lose_nothing(
    mariadb: Any, spark: Any, tmp_path: Path, option: str, value: str
) -> None:
    """``maxRowsPerTrigger`` / ``maxBytesPerTrigger``: every micro-batch holds at most the cap (whole binlog events),
    the rest of an instance batch a cap cuts opens the next micro-batch, nothing is lost or doubled (the mirror ends
    equal), under Trigger.AvailableNow with prefetch on."""
    conn = mariadb.connect()
    db = mariadb.database
    start = master_position(conn)
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE `{db}`.a (id INT PRIMARY KEY, x VARCHAR(40))")
        for i in range(1000):  # 1,000 one-row events (executemany would make one multi-row INSERT)
            cur.execute(f"INSERT INTO `{db}`.a VALUES (%s, %s)", (i, f"v{i}"))
        cur.execute(f"INSERT INTO `{db}`.a SELECT seq + 1000, 'bulk' FROM seq_1_to_100")  # one event of 100 rows
        cur.execute(f"UPDATE `{db}`.a SET x = 'u' WHERE id < 250")  # one event of 250 rows
    options = _source_options(mariadb, start, tmp_path, **{option: value})
    mirror = DeltaMirror(tmp_path / "m")
    query = _mirror_available_now(spark, options, mirror, tmp_path / "ckpt")
    assert query.awaitTermination(180)
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 1 + 1000 + 100 + 250  # CREATE TABLE, the inserts, the bulk insert, the updates
    if option == "maxRowsPerTrigger":
        assert len(sizes) >= 5 and max(sizes) <= 300, sizes
    else:
        assert len(sizes) >= 3, sizes  # tens of bytes an event: a few hundred events a batch
    for c in compare_tables(conn, mirror, db, ["a"]):
        assert c.equal, str(c)
    conn.close()


def test_options_from_a_properties_file_with_overrides(tmp_path: Path) -> None:
    props = tmp_path / "instance.properties"
    props.write_text(
        "canal.instance.destination=fromfile\n"
        "canal.instance.master.address=127.0.0.1:3306\n"
        "canal.instance.dbUsername=canal\n"
        "canal.instance.filter.regex=shop\\\\..*\n"
    )
    cfg = config_from_options({"properties": str(props), "master.address": "127.0.0.1:3307", "spool.dir": "/x"})
    assert cfg.destination == "fromfile" and cfg.master.address == "127.0.0.1:3307"
    assert cfg.filter_regex == r"shop\..*" and cfg.master.username == "canal"
    with pytest.raises(Exception, match="unknown canal source option"):
        config_from_options({"destination": "d", "master.address": "127.0.0.1:3306", "bogus": "1"})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("batch.size", "many"),
        ("max.entries", "0"),
        ("read.timeout", "-1"),
        ("read.timeout", "nan"),
        ("prefetch", "maybe"),
        ("maxRowsPerTrigger", "0"),
        ("maxBytesPerTrigger", "lots"),
        ("snapshot.partitions", "0"),
        ("snapshot.partitions", "513"),
        ("snapshot.partition.rows", "-5"),
    ],
)
def test_bad_reader_options_are_refused_by_name(tmp_path: Path, key: str, value: str) -> None:
    options = {"destination": "d", "master.address": "127.0.0.1:3306", "spool.dir": str(tmp_path / "spool"), key: value}
    with pytest.raises(SparkSourceError, match=rf"{re.escape(key)} = '{re.escape(value)}'"):
        CanalStreamReader(options)
    assert not (tmp_path / "spool").exists()
    good = CanalStreamReader({**options, key: {"prefetch": "off"}.get(key, "2")})
    assert good.prefetch is (key != "prefetch")


def test_executor_partitions_take_only_the_initial_snapshot_mode(tmp_path: Path) -> None:
    options = {
        "destination": "d",
        "master.address": "127.0.0.1:3306",
        "spool.dir": str(tmp_path / "spool"),
        "snapshot.partitions": "4",
    }
    for mode in ("when_needed", "initial_only"):
        with pytest.raises(SparkSourceError, match=f"snapshot mode initial or never, not {mode}"):
            CanalStreamReader({**options, "pycanal.snapshot.mode": mode})
    assert not (tmp_path / "spool").exists()
    reader = CanalStreamReader({**options, "pycanal.snapshot.mode": "initial"})
    assert reader.partitions_per_batch == 4 and reader.partition_rows == 100_000 and reader.watermark is None
    marked = CanalStreamReader(
        {**options, "pycanal.snapshot.mode": "initial", "pycanal.snapshot.watermark.table": "d.m"}
    )
    assert marked.watermark == ("d", "m")  # executors commit a mark before each read (MySQL)


def test_vacuum_deletes_rewritten_files_and_replays_are_still_skipped(tmp_path: Path) -> None:
    mirror = DeltaMirror(tmp_path / "mirror", mode="copy_on_write")
    for batch_id in (1, 2, 3):  # every MERGE rewrites the table's file
        rows = [RowData(TABLE, after=(i, Decimal(batch_id), f"b{batch_id}")) for i in range(5)]
        mirror.apply(entries_to_batch([_entry(500 + batch_id, 5, 400, rows)], "d", batch_id), batch_id)

    def data_files() -> list[str]:
        return sorted(p.name for p in mirror.table_path("shop", "t").glob("*.parquet"))

    before = data_files()
    with pytest.raises(MirrorError):
        mirror.vacuum(-1)
    assert mirror.vacuum(168) == {"shop.t": 0}  # everything is younger than a week
    deleted = mirror.vacuum(0)
    assert deleted["shop.t"] > 0 and len(data_files()) == len(before) - deleted["shop.t"]
    assert sorted(r["note"] for r in mirror.read("shop", "t").to_pylist()) == ["b3"] * 5
    replay = [RowData(TABLE, after=(0, Decimal(9), "replayed"))]
    assert mirror.apply(entries_to_batch([_entry(503, 5, 400, replay)], "d", 3), 3).tables == {"shop.t": "skipped"}


def test_a_batch_that_changes_nothing_is_recorded_and_its_replay_skipped(tmp_path: Path) -> None:
    """Deleting rows the mirror does not hold is a MERGE without changes, which Delta does not commit: the batch id
    is committed on its own, so a replay is recognised."""
    mirror = DeltaMirror(tmp_path / "mirror")
    rows = [RowData(TABLE, after=(i, Decimal(1), "a")) for i in range(3)]
    mirror.apply(entries_to_batch([_entry(500, 3, 400, rows)], "d", 1), 1)
    absent = [RowData(TABLE, before=(7, Decimal(1), "a"))]
    delete = _change(TABLE, EventType.DELETE, absent)
    assert mirror.apply(entries_to_batch([delete], "d", 2), 2).tables == {"shop.t": "applied"}
    assert mirror.committed_batch_ids("shop", "t") == [1, 2]
    assert mirror.apply(entries_to_batch([delete], "d", 2), 2).tables == {"shop.t": "skipped"}
    assert len(mirror.read("shop", "t")) == 3


_OFFSETS = itertools.count(10_000, 100)


def _change(table: TableSchema, event: EventType, rows: list[RowData]) -> Entry:
    """An entry of ``rows`` after every one made before (as a stream's entries are)."""
    header = Header("mysql-bin.000002", next(_OFFSETS), 1, 1_700_000_000_000, table.schema, table.table, event, 40)
    return Entry(header, EntryType.ROWDATA, RowChange(event, rows), anchor=EntryPosition("mysql-bin.000002", 4))


@pytest.mark.parametrize("key_type", ["int", "varchar(12)"])
def test_a_merge_skips_the_files_outside_the_batch_key_range(tmp_path: Path, key_type: str) -> None:
    from deltalake import DeltaTable

    def key(k: int) -> Any:
        return k if key_type == "int" else f"o'k\\{k:05d}"  # a quote and a backslash in string keys

    table = TableSchema(
        "s", "t", (ColumnMeta("id", mysql_type=key_type, is_key=True), ColumnMeta("v", mysql_type="varchar(10)"))
    )
    mirror = DeltaMirror(tmp_path, mode="copy_on_write")
    for b in range(8):  # eight batches of new keys: eight data files, each with its own key range
        rows = [RowData(table, after=(key(k), "a")) for k in range(b * 100, (b + 1) * 100)]
        mirror.apply(entries_to_batch([_change(table, EventType.INSERT, rows)], "d", b + 1), b + 1)
    updates = [RowData(table, before=(key(k), "a"), after=(key(k), "b")) for k in (305, 306, 390)]
    deletes = [RowData(table, before=(key(310), "a"))]
    batch = entries_to_batch(
        [_change(table, EventType.UPDATE, updates), _change(table, EventType.DELETE, deletes)], "d", 9
    )
    mirror.apply(batch, 9)
    metrics = DeltaTable(str(mirror.table_path("s", "t"))).history(1)[0]["operationMetrics"]
    assert metrics["num_target_files_skipped_during_scan"] >= 6, metrics  # only the file of keys 300..399 is read
    rows = {r["id"]: r["v"] for r in mirror.read("s", "t").to_pylist()}
    expected = {str(key(k)) if key_type != "int" else k: "a" for k in range(800) if k != 310}
    expected.update({(str(key(k)) if key_type != "int" else k): "b" for k in (305, 306, 390)})
    assert rows == expected


def test_a_batch_rewrites_only_the_data_files_that_hold_its_keys(tmp_path: Path) -> None:
    """One batch loads a table bigger than ``file_bytes``: it lands in several files, each a range of keys, and a
    later batch that changes a few keys rewrites the file that holds them, not the table. Delta's default file size
    (what the mirror used before) keeps the table in one file that every batch rewrites whole."""
    from deltalake import DeltaTable

    with pytest.raises(MirrorError, match="file_bytes"):
        DeltaMirror(tmp_path / "bad", file_bytes=0)
    assert not (tmp_path / "bad").exists()
    table = TableSchema(
        "s", "t", (ColumnMeta("id", mysql_type="int", is_key=True), ColumnMeta("v", mysql_type="varchar(80)"))
    )
    load = [RowData(table, after=(k, f"{k:08d}" * 10)) for k in range(20_000)]
    change = [RowData(table, before=(k, "x"), after=(k, "changed")) for k in (10_001, 10_002)]
    rewritten = {}
    for name, file_bytes in (("small", 64 << 10), ("default", 100 << 20)):
        mirror = DeltaMirror(tmp_path / name, file_bytes=file_bytes, mode="copy_on_write")
        mirror.apply(entries_to_batch([_change(table, EventType.INSERT, load)], "d", 1), 1)
        mirror.apply(entries_to_batch([_change(table, EventType.UPDATE, change)], "d", 2), 2)
        dt = DeltaTable(str(mirror.table_path("s", "t")))
        assert dt.metadata().configuration["delta.targetFileSize"] == str(file_bytes)
        metrics = dt.history(1)[0]["operationMetrics"]
        rewritten[name] = (metrics["num_target_files_removed"], len(dt.file_uris()))
        rows = {r["id"]: r["v"] for r in mirror.read("s", "t").to_pylist()}
        assert len(rows) == 20_000 and rows[10_001] == rows[10_002] == "changed" and rows[10_000] != "changed"
    removed, files = rewritten["small"]
    assert removed == 1 and files >= 10, rewritten  # one file of many rewritten
    assert rewritten["default"] == (1, 1), rewritten  # the whole table, in one file


def test_scheduled_compaction_and_vacuum_keep_the_rows_and_the_batch_ids(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    with pytest.raises(MirrorError, match="optimize_every"):
        DeltaMirror(tmp_path / "bad", optimize_every=0)
    with pytest.raises(MirrorError, match="retention_hours"):
        DeltaMirror(tmp_path / "bad", retention_hours=-1)
    assert not (tmp_path / "bad").exists()

    # folds back to back (fold_duty=1): each batch's fold adds a base file for the compaction to join
    mirror = DeltaMirror(tmp_path / "mirror", optimize_every=3, vacuum_every=6, retention_hours=0, fold_duty=1.0)
    path = str(mirror.table_path("shop", "t"))

    def operations() -> list[str]:
        return [h["operation"] for h in reversed(DeltaTable(path).history())]

    for batch_id in range(1, 7):  # new keys each batch: each MERGE adds a file
        rows = [RowData(TABLE, after=(batch_id * 10 + i, Decimal(batch_id), f"b{batch_id}")) for i in range(3)]
        result = mirror.apply(entries_to_batch([_entry(500 + batch_id, 3, 400, rows)], "d", batch_id), batch_id)
        if batch_id == 3:
            assert operations().count("OPTIMIZE") == 1 and result.maintenance_s > 0
            assert len(DeltaTable(path).file_uris()) == 1  # three files compacted into one
    # a fold the sixth batch started may commit after the vacuum: its file is referenced once it has
    mirror.wait_for_folds()
    assert operations().count("OPTIMIZE") == 2
    assert any(op.startswith("VACUUM") for op in operations())  # the sixth batch vacuumed (retention 0)
    assert len(list(Path(path).glob("*.parquet"))) == len(DeltaTable(path).file_uris())  # no unreferenced file left
    assert sorted(r["id"] for r in mirror.read("shop", "t").to_pylist()) == sorted(
        b * 10 + i for b in range(1, 7) for i in range(3)
    )
    assert mirror.version("shop", "t") == 6
    replay = [RowData(TABLE, after=(11, Decimal(9), "replayed"))]
    assert mirror.apply(entries_to_batch([_entry(504, 3, 400, replay)], "d", 4), 4).tables == {"shop.t": "skipped"}


def test_the_source_store_is_bigger_than_canals(tmp_path: Path) -> None:
    """The source's instance store defaults to STORE_SIZE (a micro-batch is bounded by it) whether the tasks read
    the spool or get the rows inside their partitions; an option or a properties file sets another."""
    base = {"destination": "d", "master.address": "127.0.0.1:3306"}
    shared = {**base, "spool.shared": "true"}
    assert StoreConfig().buffer_size < STORE_SIZE
    assert config_from_options(base).store.buffer_size == STORE_SIZE
    assert config_from_options({**base, "spool.shared": "false"}).store.buffer_size == STORE_SIZE
    assert config_from_options(shared).store.buffer_size == STORE_SIZE
    assert config_from_options({**base, "snapshot.partitions": "2"}).store.buffer_size == STORE_SIZE
    assert config_from_options({**shared, "canal.instance.memory.buffer.size": "1024"}).store.buffer_size == 1024
    props = tmp_path / "instance.properties"
    props.write_text("canal.instance.memory.buffer.size = 2048\ncanal.instance.master.address = 127.0.0.1:3306\n")
    options = {"destination": "d", "properties": str(props), "spool.shared": "true"}
    assert config_from_options(options).store.buffer_size == 2048


@pytest.mark.integration
def test_a_shared_spool_hands_the_task_the_file_not_the_rows(mariadb: Any, tmp_path: Path) -> None:
    """With ``spool.shared`` a micro-batch's partition names its spool file and the task reads the rows from it; a
    second planning of the same offsets (a replay, another process) names the same file; a file the task cannot
    reach is a typed error, and so is a bad option value."""
    conn = mariadb.connect()
    db = mariadb.database
    start = master_position(conn)
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v VARCHAR(10))")
        cur.executemany(f"INSERT INTO `{db}`.t VALUES (%s, %s)", [(i, f"v{i}") for i in range(20)])
    conn.close()
    options = _source_options(mariadb, start, tmp_path, **{"spool.shared": "true"})
    assert spool_shared(options) and not spool_shared({**options, "spool.shared": "false"})
    with pytest.raises(SparkSourceError, match=r"spool\.shared = 'maybe'"):
        CanalStreamReader({**options, "spool.shared": "maybe"})

    def planned(end: dict[str, Any] | None) -> tuple[dict[str, Any], list[Any], list[str]]:
        reader = CanalStreamReader(options)
        # as Trigger.AvailableNow plans: the first micro-batch reaches the master's position (the rows written
        # above), however long the parser takes to read that far -- a plain latest() may end before (seen once)
        reader.prepareForTriggerAvailableNow()
        try:
            end = end or reader.latest(dict(INITIAL_OFFSET))
            values = reader.partition_values(dict(INITIAL_OFFSET), end)
            keys = [r["keys"] for v in values for b in reader.read_value(v) for r in b.to_pylist()]
            return end, values, keys
        finally:
            close_sessions()

    end, values, keys = planned(None)
    spool = Spool(tmp_path / "ckpt.canal-spool")
    assert values == [SpooledRows(spool.storage, spool.name_for(dict(INITIAL_OFFSET)))]
    assert [json.loads(k)["id"] for k in keys if k] == [str(i) for i in range(20)]
    assert planned(end)[1:] == (values, keys)  # replayed: the same file, the same rows
    spool.path_for(dict(INITIAL_OFFSET)).unlink()  # a task on an executor that does not see spool.dir
    with pytest.raises(SpoolError, match="reachable from every executor"):
        list(CanalStreamReader.read_value(values[0]))
    with pytest.raises(SparkSourceError, match="no spooled batch starts at"):
        planned(end)


def test_register_makes_spool_shared_the_default_of_a_local_session_only() -> None:
    """A local-mode session's executors run on this machine and see the spool at the driver's path: registered with
    one, the source reads micro-batches from the spool unless told otherwise; with any other master it does not."""
    pytest.importorskip("pyspark")
    from canal.spark import register
    from canal.spark.datasource import CanalDataSource, CanalLocalDataSource

    class Session:
        def __init__(self, master: str) -> None:
            self.registered: list[type] = []
            self.conf = self
            self.dataSource = self
            self.master = master
            self.settings: dict[str, str] = {}

        def get(self, key: str, default: str | None = None) -> str | None:
            return self.master if key == "spark.master" else self.settings.get(key, default)

        def set(self, key: str, value: str) -> None:  # the redaction patterns (tests/test_spark_redaction.py)
            self.settings[key] = value

        def register(self, cls: type) -> None:
            self.registered.append(cls)

    for master, kind in (
        ("local[*]", CanalLocalDataSource),
        ("local-cluster[2,1,1024]", CanalLocalDataSource),
        ("spark://head:7077", CanalDataSource),
        ("yarn", CanalDataSource),
        ("", CanalDataSource),  # a Spark Connect session that does not say
    ):
        session = Session(master)
        register(session)
        assert session.registered == [kind], master
    options = {"destination": "d", "master.address": "127.0.0.1:3306", "spool.dir": "/tmp/s"}
    assert CanalLocalDataSource(options).reader_options()["spool.shared"] == "true"
    assert CanalLocalDataSource({**options, "Spool.Shared": "false"}).reader_options()["Spool.Shared"] == "false"
    assert "spool.shared" not in CanalLocalDataSource({**options, "Spool.Shared": "false"}).reader_options()
    assert CanalDataSource(options).reader_options()["spool.shared"] == "false"


def test_without_a_shared_spool_the_partitions_carry_the_rows_read_beside_the_spool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``spool.shared`` off (the default on a cluster) the planner, on the driver beside the spool, reads a
    micro-batch's rows -- prefetched or replayed after a restart alike -- and hands them to Spark inside the input
    partition (in pieces when too big for one task): a task reads them with no access to ``spool.dir``. With
    ``spool.shared`` the partition names the file instead. A micro-batch with no spool file is a typed error."""
    import pickle

    import pyarrow as pa

    from canal.spark.datasource import CanalDataSource, CanalPartitionedStreamReader

    options = {"destination": "d", "master.address": "127.0.0.1:3306", "spool.dir": str(tmp_path / "spool")}
    start = dict(INITIAL_OFFSET)
    rows = entries_to_batch(
        [_entry(100 + i, 1, 10, [RowData(TABLE, after=(i, Decimal(i), "x" * 500))]) for i in range(300)], "d", 1
    )
    Spool(tmp_path / "spool").write(start, {**start, "batch": 1}, rows)
    end = {**start, "batch": 1, "spooled": start}
    reader = CanalDataSource(options).streamReader(None)
    assert isinstance(reader, CanalPartitionedStreamReader) and not reader.shared
    whole = reader.partitions(start, end)
    assert len(whole) == 1 and isinstance(whole[0].value, InlineRows)  # one task: the mirror's one-partition path
    monkeypatch.setattr("canal.spark.spool.INLINE_PIECE_BYTES", len(whole[0].value.data) // 3)
    values = [pickle.loads(pickle.dumps(p.value)) for p in reader.partitions(start, end)]  # as Spark ships them
    assert len(values) > 2 and all(isinstance(v, InlineRows) for v in values)
    shutil.rmtree(tmp_path / "spool")  # a task on an executor that does not see spool.dir
    read = pa.Table.from_batches([b for v in values for b in CanalPartitionedStreamReader.read_value(v)])
    assert read.to_pylist() == rows.to_pylist()
    with pytest.raises(SparkSourceError, match="no spooled batch starts at"):
        reader.partitions(start, end)
    Spool(tmp_path / "spool").write(start, {**start, "batch": 1}, rows)
    shared = CanalDataSource({**options, "spool.shared": "true"}).streamReader(None)
    assert [p.value for p in shared.partitions(start, end)] == [Spool(tmp_path / "spool").shared(start)]
