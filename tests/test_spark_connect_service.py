"""The private Spark Connect server: a client session on its ``sc://`` URL runs queries, and leaves this process's
classic PySpark as it found it. And the documented pipeline over it: ``writeStream.foreachBatch(DeltaMirror(root))``
from a Connect client session, the mirror pickled into the server's Python process and written by Spark tasks with
DataFrame APIs only (Connect has no RDDs), DDL included, its spool and tables in the object store; every mirror
table equals ``SELECT``. And ``current_dataframe`` over Connect."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

from canal.spark import DeltaMirror
from canal.spark.testing import compare_tables, master_position
from canal.testing.plugin import S3Bucket, connect_session
from canal.testing.services import SparkConnectServer
from tests.test_spark_units import _mirror_available_now, _source_options

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_a_remote_session_runs_a_query(spark_connect: Any, spark_connect_server: SparkConnectServer) -> None:
    assert spark_connect_server.url == f"sc://127.0.0.1:{spark_connect_server.port}"
    assert type(spark_connect).__module__ == "pyspark.sql.connect.session"
    rows = spark_connect.range(100).selectExpr("id % 3 AS k").groupBy("k").count().orderBy("k").collect()
    assert [(row["k"], row["count"]) for row in rows] == [(0, 34), (1, 33), (2, 33)]


def test_the_process_is_not_left_in_connect_mode(spark_connect_server: SparkConnectServer) -> None:
    from pyspark.sql.utils import is_remote

    with connect_session(spark_connect_server.url) as session:
        assert session.sql("SELECT 1 AS one").collect()[0]["one"] == 1
        assert is_remote()
    assert not is_remote()  # a classic SparkSession later in this process is classic again


def test_a_mirror_pickles_as_its_settings_and_holds_no_lock(tmp_path: Path) -> None:
    mirror = DeltaMirror(tmp_path / "m", app_id="shop", mode="copy_on_write", fold_workers=3)
    copy = pickle.loads(pickle.dumps(mirror))
    assert type(copy) is DeltaMirror and copy is not mirror
    assert copy.settings() == mirror.settings()


@pytest.mark.parametrize("images", ["json", "packed"])
def test_foreach_batch_mirror_over_spark_connect(
    mariadb: Any, spark_connect: Any, s3_bucket: S3Bucket, tmp_path: Path, images: str
) -> None:
    """The source's spool and the mirror in the object store, over Connect: the mirror pickles with its root's
    storage options, and the server's Python process and its tasks reach the store with them. Packed batches too
    (a Connect client cannot ask a DataFrame's partitions: the mirror takes them as one)."""
    from canal.spark import register

    conn = mariadb.connect()
    db = mariadb.database
    start = master_position(conn)
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE `{db}`.a (id INT PRIMARY KEY, x INT)")
        cur.executemany(f"INSERT INTO `{db}`.a VALUES (%s, %s)", [(i, i) for i in range(40)])
        cur.execute(f"CREATE TABLE `{db}`.b (id INT PRIMARY KEY, note VARCHAR(20))")
        cur.execute(f"INSERT INTO `{db}`.b VALUES (1, 'one'), (2, 'two')")
        cur.execute(f"UPDATE `{db}`.a SET x = x + 100 WHERE id < 10")
        cur.execute(f"ALTER TABLE `{db}`.b ADD COLUMN extra INT DEFAULT 7")
        cur.execute(f"DELETE FROM `{db}`.a WHERE id >= 30")
    register(spark_connect)
    storage = s3_bucket.storage_options
    mirror = DeltaMirror(f"{s3_bucket.url}/mirror", storage_options=storage)
    spool = {"spool.dir": f"{s3_bucket.url}/spool", **{f"spool.storage.{k}": v for k, v in storage.items()}}
    options = {**_source_options(mariadb, start, tmp_path), **spool, "images": images}
    query = _mirror_available_now(spark_connect, options, mirror, tmp_path / "ckpt")
    assert query.awaitTermination(180)
    assert query.exception() is None
    for c in compare_tables(conn, mirror, db, ["a", "b"]):
        assert c.equal, str(c)
    assert len(mirror.read(db, "a")) == 30
    conn.close()


def test_current_dataframe_over_spark_connect(spark_connect: Any, tmp_path: Path) -> None:
    """The current state of a merge-on-read table (a base and a change log) read by the Connect server's Spark
    equals pyarrow's."""
    from canal.spark import current_dataframe
    from tests.mirror_rows import CREATE, batch, ddl, delete, upsert

    mirror = DeltaMirror(tmp_path / "mirror", background_folds=False, fold_ratio=1000.0, stage_rows=0)
    mirror.apply(batch(ddl("t", "CREATE", CREATE.format(table="t")), *(upsert("t", i, f"v{i}") for i in range(5))), 1)
    mirror.apply(batch(upsert("t", 1, "changed", "UPDATE"), delete("t", 2), upsert("t", 9, "new")), 2)
    want = sorted((r["id"], r["v"]) for r in mirror.read("s", "t").to_pylist())
    got = current_dataframe(spark_connect, mirror.table_path("s", "t")).select("id", "v").collect()
    assert sorted((r["id"], r["v"]) for r in got) == want
    assert want == [(0, "v0"), (1, "changed"), (3, "v3"), (4, "v4"), (9, "new")]
    mirror.close()
