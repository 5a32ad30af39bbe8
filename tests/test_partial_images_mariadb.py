"""Partial row images on a real MariaDB: sessions set ``binlog_row_image`` to MINIMAL, NOBLOB or FULL. Each entry
carries exactly the columns the image does (checked against what MariaDB 10.11 logs, for a table with a primary key,
one with only a UNIQUE NOT NULL key, one without a key, a key holding a TEXT neighbour, BLOB/TEXT/JSON columns), each
carried value equals ``SELECT``; and the mirror -- fed change rows, typed, packed and VARIANT batches, merge-on-read
through folds and copy-on-write, and through the ``canal`` source with the mirror written by Spark tasks -- equals
``SELECT``. An INSERT whose image lacks the columns it left to their defaults heals under the default
``heal="snapshot"`` (the capture reads its table again from there: the mirror equals ``SELECT``, no stop); under
``heal="stop"`` the mirror stops with ``MirrorPartialImageError`` there, having written nothing."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("deltalake")

from test_mirror_partial_images import FORMS, _form

from canal.config import InstanceConfig
from canal.config.mq import MqConfig
from canal.instance import Instance
from canal.lake import MirrorPartialImageError, compare
from canal.lake.forms.flat_messages import MessageError, MessageMaker
from canal.lake.forms.mq_routing import Routing
from canal.protocol import Entry, EntryType
from canal.spark import DeltaMirror, run_batches
from canal.spark.testing import healed_by, master_position, select_all
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration

# the image forms the Spark test reads (each ~10 s here): json by default; PARTIAL_SPARK_FORMS=json,variant,packed
SPARK_FORMS = os.environ.get("PARTIAL_SPARK_FORMS", "json").split(",")

TABLES = {  # name -> (DDL columns, key columns)
    "pk": ("id INT PRIMARY KEY, a INT, b VARCHAR(20), doc TEXT, j JSON, d INT DEFAULT 7", ["id"]),
    "uk": ("x INT NOT NULL, a INT, b VARCHAR(20), doc TEXT, UNIQUE KEY (x)", ["x"]),
    "nokey": ("x INT, a INT, doc TEXT", []),
    "tk": ("id VARCHAR(10) NOT NULL, t TEXT, a INT NOT NULL, PRIMARY KEY (id, a)", ["id", "a"]),
}
# (row image, table, statement, the columns its rows' before / after images lack)
STATEMENTS: list[tuple[str, str, str, tuple[str, ...] | None, tuple[str, ...] | None]] = [
    ("FULL", "pk", "INSERT INTO pk VALUES (1, 1, 'x', 'doc1', '{\"k\": 1}', 1)", None, ()),
    ("FULL", "pk", "INSERT INTO pk VALUES (2, 2, 'y', 'doc2', '[]', 2)", None, ()),
    ("FULL", "uk", "INSERT INTO uk VALUES (1, 1, 'u', 'udoc')", None, ()),
    ("FULL", "nokey", "INSERT INTO nokey VALUES (1, 1, 'ndoc')", None, ()),
    ("FULL", "tk", "INSERT INTO tk VALUES ('k', 'text', 1)", None, ()),
    (
        "MINIMAL",
        "pk",
        "UPDATE pk SET b = 'changed' WHERE id = 1",
        ("a", "b", "doc", "j", "d"),
        ("id", "a", "doc", "j", "d"),
    ),
    (
        "MINIMAL",
        "pk",
        "UPDATE pk SET a = NULL, doc = 'doc1b' WHERE id = 1",
        ("a", "b", "doc", "j", "d"),
        ("id", "b", "j", "d"),
    ),
    ("MINIMAL", "pk", "UPDATE pk SET id = 3 WHERE id = 2", ("a", "b", "doc", "j", "d"), ("a", "b", "doc", "j", "d")),
    ("MINIMAL", "uk", "UPDATE uk SET b = 'v' WHERE x = 1", ("a", "b", "doc"), ("x", "a", "doc")),
    ("MINIMAL", "nokey", "UPDATE nokey SET a = 2 WHERE x = 1", (), ()),
    ("MINIMAL", "tk", "UPDATE tk SET t = 'text2' WHERE id = 'k'", ("t",), ("id", "a")),
    ("MINIMAL", "pk", "INSERT INTO pk VALUES (4, 4, 'z', 'doc4', '{}', 4)", None, ()),
    ("NOBLOB", "pk", "UPDATE pk SET a = 10 WHERE id = 1", ("doc", "j"), ("doc", "j")),
    ("NOBLOB", "pk", "UPDATE pk SET j = '[1]' WHERE id = 3", ("doc", "j"), ("doc",)),
    ("NOBLOB", "uk", "UPDATE uk SET a = 5 WHERE x = 1", ("doc",), ("doc",)),
    ("NOBLOB", "nokey", "UPDATE nokey SET doc = 'n2' WHERE x = 1", (), ()),
    ("NOBLOB", "tk", "UPDATE tk SET a = 2 WHERE id = 'k'", ("t",), ("t",)),
    ("NOBLOB", "pk", "INSERT INTO pk (id, a, doc, j) VALUES (5, 5, 'doc5', '{}')", None, ()),
    ("MINIMAL", "pk", "DELETE FROM pk WHERE id = 4", ("a", "b", "doc", "j", "d"), None),
    ("NOBLOB", "uk", "DELETE FROM uk WHERE x = 1", ("doc",), None),
]


def _entries(inst: Instance, until: tuple[str, int]) -> list[Entry]:
    entries: list[Entry] = []
    while not entries or (entries[-1].header.log_file, entries[-1].header.next_offset) < until:
        got = inst.get(10_000, timeout=1.0, linger=0.05).entries  # not the whole second: the stream went quiet
        assert got, f"nothing more before {until}"
        entries.extend(got)
    return entries


def test_entries_carry_what_each_row_image_logs_and_the_mirror_equals_select(
    mariadb: MariaDBDatabase, tmp_path: Path
) -> None:
    db = mariadb.database
    conn = mariadb.connect()
    with conn.cursor() as cur:
        for name, (columns, _key) in TABLES.items():
            cur.execute(f"CREATE TABLE `{db}`.{name} ({columns})")
    start = origin = master_position(conn)
    seen_after: list[dict[str, Any] | None] = []  # SELECT of each statement's row after it
    for image, table, sql, _before, _after in STATEMENTS:
        with conn.cursor() as cur:
            cur.execute(f"SET SESSION binlog_row_image = {image}")
            cur.execute(f"USE `{db}`")
            cur.execute(sql)
        conn.commit()
        key = TABLES[table][1] or ["x"]
        rows = {tuple(r[k] for k in key): r for r in select_all(conn, db, table)}
        seen_after.append(rows)
    end = master_position(conn)
    config = InstanceConfig(destination="images", master=mariadb.master(start), filter_regex=rf"{db}\..*")
    with Instance(config) as inst:
        entries = _entries(inst, end)
    changes = [(e, row) for e in entries if e.entry_type is EntryType.ROWDATA for row in e.iter_rows()]
    assert len(changes) == len(STATEMENTS)
    for (entry, row), (image, table, sql, before, after), state in zip(changes, STATEMENTS, seen_after, strict=True):
        assert entry.header.table == table, sql
        assert (row.before_absent if row.before is not None else None) == before, (image, sql)
        assert (row.after_absent if row.after is not None else None) == after, (image, sql)
        if row.after is not None:  # every carried value is the one SELECT shows
            selected = state[row.key() if TABLES[table][1] else (row.after[0],)]
            for name, value in row.after_dict().items():
                assert value == selected[name], (sql, name)
    # Debezium's envelope holds whole images: the messages=debezium form stops at each partial one MariaDB logged
    # (MINIMAL's and NOBLOB's, a keyless table's MINIMAL images are whole), naming the table, and makes the rest
    maker = MessageMaker("debezium", Routing(MqConfig(topic="t")), "d", now_ms=lambda: 0)
    for (entry, row), (image, table, sql, _before, _after) in zip(changes, STATEMENTS, strict=True):
        if row.before_absent or row.after_absent:
            with pytest.raises(MessageError, match=rf"{db}\.{table}: a partial row image"):
                maker.make([entry], 1)
        else:
            assert maker.make([entry], 1).num_rows >= 1, (image, sql)
    # the mirror of the keyed tables, in every form, in batches of three transactions, folded midway
    keyed = [t for t, (_c, key) in TABLES.items() if key]
    only = [f"{db}.{t}" for t in keyed]
    transactions: list[list[Entry]] = []
    part: list[Entry] = []
    for entry in entries:
        part.append(entry)
        if entry.is_boundary:
            transactions.append(part)
            part = []
    for form in FORMS:
        for mode in ("merge_on_read", "copy_on_write") if form == "rows" else ("merge_on_read",):
            mirror = DeltaMirror(tmp_path / f"{form}-{mode}", mode=mode, tables=only, background_folds=False)  # type: ignore[arg-type]
            for batch, first in enumerate(range(0, len(transactions), 3), start=1):
                mirror.apply(_form([e for t in transactions[first : first + 3] for e in t], form, batch), batch)
                if batch == 3 and mode == "merge_on_read":
                    mirror.fold()
            for table in keyed:
                result = compare(mirror.read(db, table), select_all(conn, db, table), TABLES[table][1], name=table)
                assert result.equal, f"{form} {mode}: {result}"
            mirror.close()
    # an INSERT under MINIMAL that leaves columns to their defaults, not healed (heal="stop"): the mirror stops,
    # nothing written
    mirror = DeltaMirror(tmp_path / "rows-merge_on_read", tables=only, background_folds=False)
    before = {t: (mirror.read(db, t).to_pylist(), mirror.version(db, t)) for t in keyed}
    start = master_position(conn)
    with conn.cursor() as cur:
        cur.execute("SET SESSION binlog_row_image = MINIMAL")
        cur.execute(f"UPDATE `{db}`.pk SET b = 'again' WHERE id = 1")
        cur.execute(f"INSERT INTO `{db}`.pk (id, b) VALUES (9, 'partial')")
    conn.commit()
    end = master_position(conn)
    with Instance(
        InstanceConfig(destination="images2", master=mariadb.master(start), filter_regex=rf"{db}\..*", heal="stop")
    ) as inst:
        more = _entries(inst, end)
    with pytest.raises(MirrorPartialImageError) as stop:
        mirror.apply(_form(more, "rows", 10), 10)
    assert (stop.value.table, stop.value.columns, stop.value.key) == ("pk", ("a", "doc", "j", "d"), '{"id":"9"}')
    assert {t: (mirror.read(db, t).to_pylist(), mirror.version(db, t)) for t in keyed} == before
    mirror.close()
    # healing (the default): the capture reads pk again from that INSERT on, and a mirror built from the first
    # statement equals SELECT, with no stop
    with conn.cursor() as cur:
        cur.execute(f"UPDATE `{db}`.pk SET b = 'after' WHERE id = 9")  # (MINIMAL: an update the mirror applies)
    conn.commit()
    healed = DeltaMirror(tmp_path / "healed", tables=only)
    config = InstanceConfig(
        destination="healing",
        master=mariadb.master(origin),
        filter_regex=rf"{db}\..*",
        meta_mode="file",
        meta_dir=str(tmp_path / "meta"),
    )
    end = master_position(conn)
    with Instance(config) as inst:
        run_batches(inst, None, healed, batch_size=50, timeout=0.5, journal=tmp_path / "j", until=healed_by(inst, end))
        assert inst.metrics().heals == 1
    for table in keyed:
        result = compare(healed.read(db, table), select_all(conn, db, table), TABLES[table][1], name=table)
        assert result.equal, f"healed: {result}"
    assert healed.metrics().heals == 1
    healed.close()
    conn.close()


@pytest.mark.spark
@pytest.mark.parametrize("images", SPARK_FORMS)
def test_the_canal_source_into_a_mirror_written_by_spark_tasks_equals_select(
    mariadb: MariaDBDatabase, spark: Any, tmp_path: Path, images: str
) -> None:
    """The ``canal`` source read by a streaming query whose ``foreachBatch`` is the mirror, writing on Spark's
    executors (a table per task; a batch with DDL by the driver), sessions switching their row image: equal to
    ``SELECT`` after every micro-batch's run."""
    from test_spark_units import _mirror_available_now, _source_options

    db = mariadb.database
    conn = mariadb.connect()
    start = master_position(conn)
    keyed = {t: v for t, v in TABLES.items() if v[1]}
    with conn.cursor() as cur:
        cur.execute(f"USE `{db}`")
        for name, (columns, _key) in keyed.items():
            cur.execute(f"CREATE TABLE {name} ({columns})")
        for image, _table, sql, _before, _after in STATEMENTS:
            if not sql.startswith("INSERT") or image == "FULL":  # partial INSERTs stop the mirror (tested above)
                cur.execute(f"SET SESSION binlog_row_image = {image}")
                if "nokey" not in sql:
                    cur.execute(sql)
        cur.execute("SET SESSION binlog_row_image = MINIMAL")
        for i in range(10, 40):  # enough rows for several micro-batches, some updated under MINIMAL
            cur.execute("SET SESSION binlog_row_image = FULL")
            cur.execute(f"INSERT INTO pk VALUES ({i}, {i}, 'r{i}', 'doc{i}', '[]', {i})")
            cur.execute("SET SESSION binlog_row_image = MINIMAL" if i % 2 else "SET SESSION binlog_row_image = NOBLOB")
            cur.execute(f"UPDATE pk SET b = 'u{i}' WHERE id = {i - 1}")
        cur.execute("ALTER TABLE pk ADD COLUMN e INT")  # a DDL between: its batch goes to the driver
        cur.execute("SET SESSION binlog_row_image = MINIMAL")
        cur.execute("UPDATE pk SET e = id WHERE id > 30")
    conn.commit()
    mirror = DeltaMirror(tmp_path / "m")
    options = _source_options(mariadb, start, tmp_path, maxRowsPerTrigger="25", images=images)
    assert _mirror_available_now(spark, options, mirror, tmp_path / "ckpt").awaitTermination(180)
    mirror.wait_for_folds()
    for table, (_columns, key) in keyed.items():
        result = compare(mirror.read(db, table), select_all(conn, db, table), key, name=table)
        assert result.equal, f"{images}: {result}"
    mirror.close()
    conn.close()
