"""``project`` and ``current_rows`` (canal.spark.project) over change rows with partial row images (``binlog_row_image``
MINIMAL / NOBLOB, written by the fake binlog), in the JSON and VARIANT forms: a column an image does not carry is
named in ``absent`` (and taken from the before image where that carries it), never passed off as a NULL; the rows
the changes leave merge each column from the last change that carries it -- and refuse a JSON column a partial JSON
update (MySQL's PARTIAL_JSON under MINIMAL) changed by a diff after that change, which they cannot apply."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mysql8_events as M
import partial_json_binlog as B
import pytest
from test_partial_images import fake_entries

pytest.importorskip("pyspark")

import pyarrow as pa

from canal.config import InstanceConfig, MasterConfig
from canal.instance import Instance
from canal.lake.forms.variant_changes import entries_to_variant_batch
from canal.parse.mysql import packets as P
from canal.protocol import EntryType
from canal.spark import current_rows, entries_to_batch, project
from canal.testing.fake import FakeMysql

pytestmark = [pytest.mark.spark]

COLUMNS = [("id", "int"), ("a", "int"), ("b", "varchar(20)"), ("doc", "text")]


def _changes(spark: Any, fake: FakeMysql, images: str) -> Any:
    entries = fake_entries(fake, 10_000)
    make = entries_to_batch if images == "json" else entries_to_variant_batch
    return spark.createDataFrame(pa.Table.from_batches([make(entries, "d", 1)]))


def _workload(fake: FakeMysql) -> None:
    fake.execute("CREATE TABLE d.t (id INT PRIMARY KEY, a INT, b VARCHAR(20), doc TEXT)")
    fake.insert_many("d.t", [{"id": 1, "a": 1, "b": "x", "doc": "d1"}, {"id": 2, "a": 2, "b": "y", "doc": "d2"}])
    with fake.transaction(row_image="MINIMAL") as tx:
        tx.update("d.t", {"id": 1}, {"b": None})  # set NULL: carried, not absent
        tx.update("d.t", {"id": 2}, {"id": 3, "a": 30})  # the key moved
    with fake.transaction(row_image="NOBLOB") as tx:
        tx.update("d.t", {"id": 1}, {"a": 10})  # doc left out of both images
        tx.delete("d.t", {"id": 3})


@pytest.mark.parametrize("images", ["json", "variant"])
def test_project_names_what_no_image_carries_and_current_rows_merge_partial_images(
    spark: Any, fake_mysql: FakeMysql, images: str
) -> None:
    _workload(fake_mysql)
    df = _changes(spark, fake_mysql, images)
    typed = project(df, COLUMNS, table="d.t", images=images)
    assert [f.name for f in typed.schema.fields] == ["op", "seq", "execute_time", "absent", "id", "a", "b", "doc"]
    got = [(r.op, list(r.absent), r.id, r.a, r.b, r.doc) for r in typed.orderBy("seq").collect()]
    assert got == [
        ("INSERT", [], 1, 1, "x", "d1"),
        ("INSERT", [], 2, 2, "y", "d2"),
        ("UPDATE", ["a", "doc"], 1, None, None, None),  # b set NULL: carried; the key from the before image
        ("UPDATE", ["b", "doc"], 3, 30, None, None),
        ("UPDATE", ["doc"], 1, 10, None, None),
        ("DELETE", ["doc"], 3, 30, "y", None),
    ]
    left = current_rows(df, COLUMNS, ["id"], table="d.t", images=images).collect()
    assert [r.asDict() for r in left] == fake_mysql.rows("d.t") == [{"id": 1, "a": 10, "b": None, "doc": "d1"}]


def test_current_rows_refuse_a_row_no_change_carries_whole(spark: Any, fake_mysql: FakeMysql) -> None:
    fake_mysql.execute("CREATE TABLE d.t (id INT PRIMARY KEY, a INT, b VARCHAR(20), doc TEXT)")
    with fake_mysql.transaction(row_image="MINIMAL") as tx:
        tx.insert("d.t", {"id": 1, "a": 1})  # b and doc left to their defaults: not logged
    df = _changes(spark, fake_mysql, "json")
    with pytest.raises(Exception, match="no change carries column b of a row"):
        current_rows(df, COLUMNS, ["id"], table="d.t").collect()


def _mysql_changes(spark: Any, tmp_path: Path, transactions: list[Any], images: str) -> Any:
    """Change rows of a MySQL 8 binlog file (partial JSON updates: :mod:`partial_json_binlog`)."""
    binlogs = tmp_path / "binlogs"
    binlogs.mkdir(parents=True)
    (binlogs / "binlog.000001").write_bytes(B.binlog_file(transactions, schema="d"))
    config = InstanceConfig(
        destination="partial",
        master=MasterConfig(address=f"file://{binlogs}", journal_name="binlog.000001", position=4),
    )
    entries: list[Any] = []
    with Instance(config) as inst:
        while sum(e.entry_type is EntryType.TRANSACTIONEND for e in entries) < len(transactions):
            entries.extend(inst.get(1000, timeout=10.0, linger=0.05).entries)
    make = entries_to_batch if images == "json" else entries_to_variant_batch
    return spark.createDataFrame(pa.Table.from_batches([make(entries, "d", 1)]))


@pytest.mark.parametrize("images", ["json", "variant"])
def test_current_rows_refuse_a_json_diff_they_cannot_apply(spark: Any, tmp_path: Path, images: str) -> None:
    """A partial JSON update's diff (MySQL's PARTIAL_JSON under MINIMAL) changes the document without carrying it:
    project names the column absent, and current_rows fails naming it rather than give the document before the diff
    -- until a later change carries the document again."""
    layout = [("id", "int"), ("json_col", "json"), ("name", "varchar(100)"), ("age", "int")]
    inserted = [(P.WRITE_ROWS_EVENT_V2, B.insert([(1, {"age": 1}, "a", 1)]))]
    diffed = [(P.PARTIAL_UPDATE_ROWS_EVENT, B.minimal_update([(1, [(M.REPLACE, "$.age", 2)], "a", 2)]))]
    rewritten = [(P.PARTIAL_UPDATE_ROWS_EVENT, B.minimal_update([(1, B.Whole({"age": 3}), "a", 3)]))]
    df = _mysql_changes(spark, tmp_path / "diffed", [inserted, diffed], images)
    typed = project(df, layout, table="d.t", images=images).orderBy("seq").collect()
    assert [(r.op, list(r.absent), r.json_col, r.age) for r in typed] == [
        ("INSERT", [], '{"age": 1}', 1),
        ("UPDATE", ["json_col"], None, 2),
    ]
    with pytest.raises(Exception, match="a partial JSON update changed column json_col of a row by a diff"):
        current_rows(df, layout, ["id"], table="d.t", images=images).collect()
    df = _mysql_changes(spark, tmp_path / "rewritten", [inserted, diffed, rewritten], images)
    left = current_rows(df, layout, ["id"], table="d.t", images=images).collect()
    assert [r.asDict() for r in left] == [{"id": 1, "json_col": '{"age": 3}', "name": "a", "age": 3}]


def test_a_partial_insert_stops_the_mirror_written_by_spark_tasks_typed(
    spark: Any, fake_mysql: FakeMysql, tmp_path: Path
) -> None:
    """A batch without DDL is written by a Spark task; an INSERT whose MINIMAL image left columns to their defaults is
    refused there before anything is written, and the driver raises the typed error with its fields (found by the
    randomized mirror differential through Spark: the driver raised Spark's PythonException)."""
    from canal.spark import DeltaMirror, MirrorPartialImageError

    fake_mysql.execute("CREATE TABLE d.t (id INT PRIMARY KEY, a INT, b VARCHAR(20), doc TEXT)")
    fake_mysql.insert_many("d.t", [{"id": 1, "a": 1, "b": "x", "doc": "d1"}])
    with fake_mysql.transaction(row_image="MINIMAL") as tx:
        tx.insert("d.t", {"id": 2, "b": "y"})
    df = _changes(spark, fake_mysql, "json")
    first, second = df.filter("after_absent IS NULL").coalesce(1), df.filter("after_absent IS NOT NULL").coalesce(1)
    mirror = DeltaMirror(tmp_path / "mirror")
    mirror(first, 1)
    version = mirror.version("d", "t")
    with pytest.raises(MirrorPartialImageError) as stop:
        mirror(second, 2)
    assert (stop.value.schema, stop.value.table, stop.value.columns) == ("d", "t", ("a", "doc"))
    assert mirror.version("d", "t") == version and mirror.read("d", "t").to_pylist() == [
        {"id": 1, "a": 1, "b": "x", "doc": "d1"}
    ]
    mirror.close()
