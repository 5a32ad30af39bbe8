"""``project`` and ``current_rows`` (canal.spark.project) over change rows with partial row images (``binlog_row_image``
MINIMAL / NOBLOB, written by the fake binlog), in the JSON and VARIANT forms: a column an image does not carry is
named in ``absent`` (and taken from the before image where that carries it), never passed off as a NULL; the rows
the changes leave merge each column from the last change that carries it."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pyspark")

import pyarrow as pa

from canal.config import InstanceConfig, MasterConfig
from canal.instance import Instance
from canal.spark import current_rows, entries_to_batch, project
from canal.spark.variant_changes import entries_to_variant_batch
from canal.testing.fake import FakeMysql

pytestmark = [pytest.mark.spark]

COLUMNS = [("id", "int"), ("a", "int"), ("b", "varchar(20)"), ("doc", "text")]


def _changes(spark: Any, fake: FakeMysql, images: str) -> Any:
    config = InstanceConfig(
        destination="partial", master=MasterConfig(address=fake.address, journal_name="mysql-bin.000001", position=4)
    )
    with Instance(config) as inst:
        entries = list(inst.get(10_000, timeout=2.0).entries)
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
