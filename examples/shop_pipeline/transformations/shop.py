"""The shop database's change rows as a streaming table, and ``customers`` as they leave it.

The connection comes from the environment: SHOP_MYSQL_ADDRESS (host:port), SHOP_MYSQL_USER, SHOP_MYSQL_PASSWORD,
and SHOP_DATABASE (default ``shop``). The first run snapshots the tables (the rows already there, then the binlog);
each later run reads what was written since, up to the server's position when it began (Trigger.AvailableNow).
"""

import os
from pathlib import Path

from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession

from canal.spark import current_rows, register

spark = SparkSession.active()
register(spark)

DATABASE = os.environ.get("SHOP_DATABASE", "shop")
CUSTOMERS = f"CREATE TABLE {DATABASE}.customers (id INT PRIMARY KEY, name VARCHAR(40), tier INT)"
# the source's spool (each micro-batch's rows until its commit), kept from run to run like the checkpoints
SPOOL = Path(__file__).resolve().parent.parent / "canal-spool"


@dp.table(comment="every change of the shop's tables: SNAPSHOT rows of the rows already there, then the binlog")
def shop_changes() -> DataFrame:
    return (
        spark.readStream.format("canal")
        .option("destination", DATABASE)
        .option("master.address", os.environ["SHOP_MYSQL_ADDRESS"])
        .option("master.user", os.environ["SHOP_MYSQL_USER"])
        .option("master.password", os.environ["SHOP_MYSQL_PASSWORD"])
        .option("filter.regex", rf"{DATABASE}\..*")
        .option("pycanal.snapshot.mode", "initial")
        .option("spool.dir", str(SPOOL))
        .load()
    )


@dp.materialized_view(comment="customers as the changes leave them")
def customers() -> DataFrame:
    return current_rows(spark.read.table("shop_changes"), CUSTOMERS, keys=["id"])
