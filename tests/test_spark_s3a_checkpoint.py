"""A Spark checkpoint on object storage through Hadoop's S3A (``jars/spark``: hadoop-aws and the AWS SDK's S3
modules), against the suite's S3-compatible server: a ``canal`` -> ``foreachBatch(DeltaMirror)`` query whose
checkpoint is ``s3a://``, whose spool and mirror are in the same bucket, killed (SIGKILL of its driver process) after
writing a micro-batch it had not committed, then restarted from the checkpoint in another process (the suite's
session): the mirror ends equal to ``SELECT``, and Spark reads it in the bucket through S3A (``current_dataframe``,
and Delta Lake's connector after a fold)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import needs_jars

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(600)]


def s3a_conf(bucket: Any, prefix: str = "spark.hadoop.") -> dict[str, str]:
    """S3A's settings for one bucket of an S3-compatible server (per bucket: other buckets keep their own): a new
    session's (``spark.hadoop.*``), or with ``prefix=""`` a running session's (its SQL conf reaches the Hadoop
    configuration a query's checkpoint is opened with)."""
    options = bucket.storage_options
    prefix = f"{prefix}fs.s3a.bucket.{bucket.name}"
    return {
        f"{prefix}.endpoint": options["AWS_ENDPOINT_URL"],
        f"{prefix}.endpoint.region": options["AWS_REGION"],
        f"{prefix}.path.style.access": "true",
        f"{prefix}.connection.ssl.enabled": "false",
        f"{prefix}.access.key": options["AWS_ACCESS_KEY_ID"],
        f"{prefix}.secret.key": options["AWS_SECRET_ACCESS_KEY"],
    }


DRIVER = textwrap.dedent(
    """
    import json, os, signal, sys
    from canal.spark import DeltaMirror, register
    from canal.spark.testing import local_spark

    settings = json.loads(sys.argv[1])
    spark = local_spark("s3a-driver", connectors=True, extra=settings["conf"])
    register(spark)
    mirror = DeltaMirror(settings["mirror"], storage_options=settings["store"])

    def each(df, batch_id):
        mirror(df, batch_id)
        os.kill(os.getpid(), signal.SIGKILL)  # the micro-batch is in the mirror, not in the checkpoint's commits

    changes = (
        spark.readStream.format("canal").options(**settings["source"])
        .options(**{f"spool.storage.{k}": v for k, v in settings["store"].items()})
        .option("images", "packed").load()
    )
    query = (
        changes.writeStream.foreachBatch(each).option("checkpointLocation", settings["checkpoint"])
        .trigger(availableNow=True).start()
    )
    query.awaitTermination()  # not reached: the first micro-batch kills the process
    """
)


def test_a_query_killed_and_restarted_from_an_s3a_checkpoint_ends_exact(
    spark: Any, mariadb: Any, s3_bucket: Any, tmp_path: Path
) -> None:
    needs_jars()
    import json

    from canal.spark import DeltaMirror, current_dataframe
    from canal.spark.testing import compare_tables, select_all

    start = mariadb.execute("SHOW MASTER STATUS")[0][:2]
    mariadb.execute("CREATE TABLE orders (id INT PRIMARY KEY, qty INT, note VARCHAR(20))")
    mariadb.execute("INSERT INTO orders SELECT seq, seq, 'first' FROM seq_1_to_200")
    mariadb.execute("UPDATE orders SET qty = 0 WHERE id % 3 = 0")
    store = s3_bucket.storage_options
    settings = {
        "conf": s3a_conf(s3_bucket),
        "store": store,
        "mirror": f"{s3_bucket.url}/mirror",
        "checkpoint": f"s3a://{s3_bucket.name}/checkpoint",
        "source": {
            "destination": "s3a",
            "master.address": mariadb.address,
            "master.user": mariadb.user,
            "master.password": mariadb.password,
            "master.journal.name": str(start[0]),
            "master.position": str(start[1]),
            "filter.regex": rf"{mariadb.database}\.orders",
            "spool.dir": f"{s3_bucket.url}/spool",
        },
    }
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    killed = subprocess.run(
        [sys.executable, str(script), json.dumps(settings)], env=env, capture_output=True, text=True, timeout=500
    )
    assert killed.returncode == -9, (killed.stdout + killed.stderr)[-4000:]
    keys = [o["Key"] for o in s3_bucket.server.client().list_objects_v2(Bucket=s3_bucket.name)["Contents"]]
    assert "checkpoint/offsets/0" in keys and "checkpoint/commits/0" not in keys  # planned, not committed
    mariadb.execute("UPDATE orders SET note = 'second' WHERE id > 150")
    mariadb.execute("DELETE FROM orders WHERE id <= 10")

    # the restart: this process, from the checkpoint the killed one left
    conf = {**s3a_conf(s3_bucket, prefix=""), "fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem"}
    for key, value in conf.items():
        spark.conf.set(key, value)
    mirror = DeltaMirror(settings["mirror"], storage_options=store)
    try:
        changes = (
            spark.readStream.format("canal")
            .options(**settings["source"])
            .options(**{f"spool.storage.{k}": v for k, v in store.items()})
            .option("images", "packed")
            .load()
        )
        query = (
            changes.writeStream.foreachBatch(mirror)
            .option("checkpointLocation", settings["checkpoint"])
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        keys = [o["Key"] for o in s3_bucket.server.client().list_objects_v2(Bucket=s3_bucket.name)["Contents"]]
        assert "checkpoint/commits/0" in keys
        with mariadb.connect() as conn:
            (result,) = compare_tables(conn, mirror, mariadb.database, ["orders"])
            assert result.equal, result
            want = sorted(tuple(r.values()) for r in select_all(conn, mariadb.database, "orders"))
        # Spark reads the mirror in the bucket through S3A too: the current state (current_dataframe, s3:// data
        # files), and Delta Lake's connector after a fold
        location = mirror.table_location(mariadb.database, "orders")
        assert location.startswith("s3://")
        # a background fold that trims the log while Spark lists and reads its files fails the job on a missing file
        # (current_dataframe's documented retry): the folds the query's batches started end first
        mirror.wait_for_folds()
        current = current_dataframe(spark, location).select("id", "qty", "note").collect()
        assert sorted(tuple(r) for r in current) == want
        mirror.fold()
        folded = spark.read.format("delta").load("s3a://" + location.removeprefix("s3://"))
        assert sorted(tuple(r) for r in folded.select("id", "qty", "note").collect()) == want
    finally:
        mirror.close()
        for key in conf:
            spark.conf.unset(key)
