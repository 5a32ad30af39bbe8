"""The ``canal`` source with ``images=variant`` on a real MariaDB and a local SparkSession: the rows' images are
VARIANT values Spark reads with ``variant_get`` / ``:`` paths, :func:`canal.spark.project` types a table from them,
and ``foreachBatch(DeltaMirror)`` -- its tasks decoding the variants, an ALTER's batch handed to the driver -- keeps
every mirror table equal to ``SELECT``, through a replay of a batch that failed after its write."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("deltalake")

from test_spark_source import start_query, wait_mirrored, written_workload

from canal.spark import project, to_arrow
from canal.spark.testing import SHOP_DDL, SHOP_TABLES, no_batch_twice

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def test_variant_images_mirror_and_project(mariadb: Any, spark: Any, tmp_path: Path) -> None:
    conn, checkpoint, mirror, options = written_workload(mariadb, tmp_path, 120, alter_at=40)
    options["images"] = "variant"
    db = mariadb.database
    orders_ddl = SHOP_DDL[1].format(db=db)
    seen: dict[str, Any] = {"totals": [], "paths": [], "failed": False, "types": set(), "nulls": 0}

    def each(df: Any, batch_id: int) -> None:
        seen["types"].add(df.schema["after"].dataType.simpleString())
        typed = project(df, orders_ddl).where("op != 'DELETE'").select("seq", "id", "total").collect()
        seen["totals"] += [(row["seq"], row["id"], row["total"]) for row in typed]
        seen["paths"] += (
            df.where("`table` = 'orders' AND after IS NOT NULL")
            .selectExpr("after:total::decimal(12,2) AS total", "variant_get(after, '$.id', 'int') AS id")
            .collect()
        )
        seen["nulls"] += to_arrow(df).column("after").null_count  # DELETE and DDL rows: NULL images
        mirror(df, batch_id)
        if batch_id == 1 and not seen["failed"]:
            seen["failed"] = True
            raise RuntimeError("fail after the write")  # the batch is replayed and skipped by the mirror

    query = start_query(spark, options, checkpoint, each)
    with pytest.raises(Exception, match="fail after the write"):
        query.awaitTermination(120)
    query = start_query(spark, options, checkpoint, each)
    try:
        wait_mirrored(query, conn, mirror, db)
    finally:
        query.stop()
    no_batch_twice(mirror, db, SHOP_TABLES)
    assert seen["types"] == {"variant"} and seen["nulls"] > 0
    totals = sorted(seen["totals"])  # by seq: stream order
    assert totals and all(isinstance(total, Decimal) and total.as_tuple().exponent == -2 for _, _, total in totals)
    assert {(row["id"], row["total"]) for row in seen["paths"]} == {(key, total) for _, key, total in totals}
    with conn.cursor() as cur:
        cur.execute(f"SELECT id, total FROM `{db}`.orders")
        now = dict(cur.fetchall())
    latest = {key: total for _, key, total in totals}  # the last total each order got
    assert now and all(latest[key] == total for key, total in now.items())
    conn.close()
