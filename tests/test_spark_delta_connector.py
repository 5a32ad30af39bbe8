"""Delta Lake's own Spark connector (delta-spark, from Maven Central through ``jars/``) reads what the mirror writes:
``format("delta")`` of every table in both modes, time travel, ``DESCRIBE HISTORY``, and Delta's ``OPTIMIZE`` and
``VACUUM`` on a merge-on-read table's base leave the mirror exact (real MariaDB, the suite's session with the jars)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import needs_jars

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(600)]

TYPES = (
    "CREATE TABLE kinds (id INT PRIMARY KEY, big BIGINT UNSIGNED, amount DECIMAL(12,2), wide DECIMAL(50,20), "
    "name VARCHAR(40), body TEXT, at DATETIME(6), stamp TIMESTAMP(3) NULL, day DATE, span TIME(2), ratio DOUBLE, "
    "raw BLOB, state ENUM('new','paid','done'), tags SET('a','b','c'), doc JSON, flags BIT(5), "
    "`odd name.x` VARCHAR(10))"
)


def _workload(mariadb: Any) -> None:
    mariadb.execute(TYPES)
    mariadb.execute(
        "INSERT INTO kinds SELECT seq, 18446744073709551615 - seq, seq * 1.25, seq / 7, CONCAT('n', seq), "
        "REPEAT('b', seq), '2024-02-29 10:11:12.123456' + INTERVAL seq DAY, '2024-03-01 00:00:01.5', "
        "'2024-01-01' + INTERVAL seq DAY, '-12:34:56.78', seq / 3, UNHEX('00FF10'), 'new', 'a,c', "
        "JSON_OBJECT('k', seq), b'10101', 'o d' FROM seq_1_to_40"
    )
    mariadb.execute("UPDATE kinds SET state = 'paid', body = NULL WHERE id % 3 = 0")
    mariadb.execute("DELETE FROM kinds WHERE id % 7 = 0")
    mariadb.execute("UPDATE kinds SET id = id + 1000 WHERE id = 5")  # a key change
    mariadb.execute("ALTER TABLE kinds ADD COLUMN extra INT DEFAULT 9")
    mariadb.execute("INSERT INTO kinds (id, name, extra) VALUES (2000, 'after', 1)")
    mariadb.execute("UPDATE kinds SET extra = id WHERE id < 10")


def _mirror(mariadb: Any, root: Path, start: Any, meta: Path | None = None, **settings: Any) -> Any:
    """The mirror of ``root`` after a run from ``start`` to the end of the binlog; with ``meta``, the instance keeps
    its cursor there and a later run resumes from it (a run from a position after the mirror's last range would be a
    gap: :class:`~canal.lake.types.MirrorCheckpointError`)."""
    from canal import InstanceConfig
    from canal.spark import DeltaMirror
    from canal.spark.testing import run_caught_up

    config = InstanceConfig(
        destination="delta-connector",
        master=mariadb.master(start),
        filter_regex=rf"{mariadb.database}\..*",
        meta_mode="memory" if meta is None else "file",
        meta_dir=None if meta is None else str(meta),
    )
    mirror = DeltaMirror(root, background_folds=False, **settings)
    with mariadb.connect() as conn:  # until it handled what the server had written (not a wait for no data)
        run_caught_up(conn, config, None, mirror, batch_size=60)
    return mirror


def _equal(table: Any, mariadb: Any, what: str) -> None:
    from canal.lake import compare
    from canal.spark.testing import primary_key

    with mariadb.connect() as conn:
        key = primary_key(conn, mariadb.database, "kinds")
        with conn.cursor() as cur:
            # TIME and BIT as the mirror holds them (text, an integer), not as pymysql hands them
            cur.execute("SELECT *, CAST(span AS CHAR) AS `span`, flags + 0 AS `flags` FROM kinds")
            names = [d[0] for d in cur.description]
            rows = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    result = compare(table, rows, key, name=what)
    if not result.equal:  # name the columns: each compared alone
        columns = [c for c in table.column_names if c not in key and c in rows[0]]
        differing = [
            c
            for c in columns
            if not compare(table.select([*key, c]), [{k: r[k] for k in [*key, c]} for r in rows], key).equal
        ]
        raise AssertionError(f"{what}: columns {differing} differ: {result}")


def _delta(spark: Any, path: Path, **options: Any) -> Any:
    from canal.spark import to_arrow

    reader = spark.read.format("delta")
    for name, value in options.items():
        reader = reader.option(name, value)
    return to_arrow(reader.load(str(path)))


def _history(spark: Any, path: Path) -> list[tuple[int, str]]:
    rows = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").select("version", "operation").collect()
    return sorted((int(r["version"]), str(r["operation"])) for r in rows)


def test_copy_on_write_reads_as_select_with_its_history(spark: Any, mariadb: Any, tmp_path: Path) -> None:
    needs_jars()
    from deltalake import DeltaTable

    start = mariadb.execute("SHOW MASTER STATUS")[0][:2]
    _workload(mariadb)
    mirror = _mirror(mariadb, tmp_path / "mirror", start, mode="copy_on_write")
    path = mirror.table_path(mariadb.database, "kinds")
    mirror.close()
    _equal(_delta(spark, path), mariadb, "format('delta'), copy-on-write")
    table = DeltaTable(str(path))
    history = _history(spark, path)
    assert [v for v, _ in history] == list(range(table.version() + 1))  # every commit, as Delta's log has them
    for version in (1, len(history) // 2):  # time travel: a version as delta-rs reads it
        theirs = _delta(spark, path, versionAsOf=version)
        ours = DeltaTable(str(path), version=version).to_pyarrow_table()
        assert theirs.num_rows == ours.num_rows
        assert sorted(theirs.column("id").to_pylist()) == sorted(ours.column("id").to_pylist())


def test_merge_on_read_reads_as_of_its_last_fold_and_delta_upkeep_leaves_it_exact(
    spark: Any, mariadb: Any, tmp_path: Path
) -> None:
    """A merge-on-read table read by Delta's connector as of its last fold; Delta's OPTIMIZE (ZORDER: it rewrites
    the base whatever its files) and VACUUM of the base; the mirror goes on over what Delta rewrote, exact before
    and after its next fold."""
    needs_jars()
    from deltalake import DeltaTable

    from canal.spark import current_dataframe, to_arrow

    start = mariadb.execute("SHOW MASTER STATUS")[0][:2]
    _workload(mariadb)
    root, meta = tmp_path / "mirror", tmp_path / "meta"
    unfolded = {"fold_ratio": 100.0, "fold_files": 10_000}  # nothing folds until fold() is called
    mirror = _mirror(mariadb, root, start, meta, **unfolded)
    path = mirror.table_path(mariadb.database, "kinds")
    base = DeltaTable(str(path)).to_pyarrow_table()
    # not folded: Delta's connector sees the base as of its last fold (here its creation), the mirror's readers see
    # the current state
    assert _delta(spark, path).num_rows == base.num_rows
    _equal(mirror.read(mariadb.database, "kinds"), mariadb, "mirror.read before the fold")
    _equal(to_arrow(current_dataframe(spark, path)), mariadb, "current_dataframe before the fold")
    mirror.fold()
    mirror.close()
    _equal(_delta(spark, path), mariadb, "format('delta') after the fold")

    spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
    try:
        assert spark.sql(f"OPTIMIZE delta.`{path}` ZORDER BY (name)").collect()
        spark.sql(f"VACUUM delta.`{path}` RETAIN 0 HOURS").collect()  # the files the fold and OPTIMIZE replaced
    finally:
        spark.conf.unset("spark.databricks.delta.retentionDurationCheck.enabled")
    _equal(_delta(spark, path), mariadb, "format('delta') after OPTIMIZE and VACUUM")
    # the mirror goes on over what Delta rewrote, from its cursor: more changes, folded and not
    mariadb.execute("UPDATE kinds SET name = 'again' WHERE id < 20")
    mariadb.execute("DELETE FROM kinds WHERE id = 2000")
    mariadb.execute("INSERT INTO kinds (id, name) VALUES (3000, 'later')")
    mirror = _mirror(mariadb, root, start, meta, **unfolded)
    _equal(mirror.read(mariadb.database, "kinds"), mariadb, "mirror.read after OPTIMIZE and VACUUM")
    _equal(to_arrow(current_dataframe(spark, path)), mariadb, "current_dataframe after OPTIMIZE and VACUUM")
    mirror.fold()
    mirror.close()
    _equal(_delta(spark, path), mariadb, "format('delta') after the next fold")
    history = _history(spark, path)
    operations = [operation for _v, operation in history]
    assert "OPTIMIZE" in operations and "VACUUM END" in operations and operations[-1] == "MERGE"
    assert operations[operations.index("OPTIMIZE") - 1] == "MERGE"  # the first fold, which OPTIMIZE rewrote
    assert len(history) == DeltaTable(str(path)).version() + 1


def test_auto_cdc_cannot_target_delta_tables(spark: Any, tmp_path: Path) -> None:
    """Where a Declarative Pipeline's AUTO CDC flow stops (the Spark guide says so): Spark 4.2's flow loads its target
    from the catalog and needs a table that supports row-level operations (``SupportsRowLevelOperations``); Delta
    Lake 4.4.0's catalog gives none -- not its table (``DeltaTableV2``), nor its Kernel-based one
    (``spark.databricks.delta.v2.enableMode=STRICT``: ``DeltaV2Table``, which has a row-level operation builder but
    does not declare the interface), whatever the table's features (row tracking, deletion vectors, the change data
    feed) -- so a run fails with ``AUTOCDC_TARGET_DOES_NOT_SUPPORT_MERGE`` naming the Delta target. A Delta Lake whose
    table does fails this test: then the guide's recipe can become a flow."""
    needs_jars()
    jvm = spark.sparkContext._jvm
    loader = jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader()  # spark.jars' too
    row_level = loader.loadClass("org.apache.spark.sql.connector.catalog.SupportsRowLevelOperations")
    for name in ("org.apache.spark.sql.delta.catalog.DeltaTableV2", "io.delta.spark.internal.v2.catalog.DeltaV2Table"):
        assert not row_level.isAssignableFrom(loader.loadClass(name)), name
    # the tables the session catalog (Delta's DeltaCatalog) loads, as the flow loads its target
    path = str(tmp_path / "target")
    features = {
        "delta.enableRowTracking": "true",
        "delta.enableDeletionVectors": "true",
        "delta.enableChangeDataFeed": "true",
    }
    props = ", ".join(f"'{k}' = '{v}'" for k, v in features.items())
    spark.sql(f"CREATE TABLE delta.`{path}` (id INT, name STRING) USING delta TBLPROPERTIES ({props})")
    catalog = spark._jsparkSession.sessionState().catalogManager().catalog("spark_catalog")
    namespace = spark.sparkContext._gateway.new_array(jvm.java.lang.String, 1)
    namespace[0] = "delta"
    ident = jvm.org.apache.spark.sql.connector.catalog.Identifier.of(namespace, path)
    loaded = {}
    for mode in ("AUTO", "STRICT"):
        spark.conf.set("spark.databricks.delta.v2.enableMode", mode)
        try:
            table = catalog.loadTable(ident)
        finally:
            spark.conf.unset("spark.databricks.delta.v2.enableMode")
        loaded[mode] = table.getClass().getName()
        assert {k: table.properties().get(k) for k in features} == features
        assert not row_level.isInstance(table), loaded
    assert set(loaded.values()) == {
        "org.apache.spark.sql.delta.catalog.DeltaTableV2",
        "io.delta.spark.internal.v2.catalog.DeltaV2Table",
    }, loaded


def test_cdc_rows_kept_by_key_in_a_delta_table_with_merge(spark: Any, mariadb: Any, tmp_path: Path) -> None:
    """The recipe in AUTO CDC's place: each micro-batch's ``cdc_rows`` (``project()``'s typed rows, and a DELETE of
    each old key an UPDATE moved), the latest change per key, MERGEd into a Delta table by Delta Lake's connector --
    key changes (one row, and five in one event) and a column the layout does not declare included."""
    needs_jars()
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from canal.spark import cdc_rows

    db = mariadb.database
    start = mariadb.execute("SHOW MASTER STATUS")[0][:2]
    layout = "CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR(40), tier INT)"
    mariadb.execute(layout)
    mariadb.execute("INSERT INTO customers SELECT seq, CONCAT('c', seq), seq % 3 FROM seq_1_to_100")
    mariadb.execute("UPDATE customers SET tier = 9 WHERE id <= 10")
    mariadb.execute("DELETE FROM customers WHERE id BETWEEN 11 AND 20")
    mariadb.execute("UPDATE customers SET id = 2000 WHERE id = 30")
    mariadb.execute("UPDATE customers SET id = id + 5000, tier = 7 WHERE id BETWEEN 40 AND 44")
    mariadb.execute("ALTER TABLE customers ADD COLUMN note VARCHAR(10)")
    mariadb.execute("UPDATE customers SET note = 'n', name = 'after' WHERE id <= 3")
    mariadb.execute("INSERT INTO customers VALUES (30, 'back', 1, NULL)")  # the moved key in use again
    target = str(tmp_path / "customers_cdc")
    spark.sql(f"CREATE TABLE delta.`{target}` (id INT, name STRING, tier INT) USING delta")

    def merge(df: Any, batch_id: int) -> None:
        rows = cdc_rows(df, layout, table=f"{db}.customers", keys=["id"])
        latest = rows.withColumn("_n", F.row_number().over(Window.partitionBy("id").orderBy(F.col("seq").desc())))
        latest.where("_n = 1").drop("_n").createOrReplaceTempView("changes")
        df.sparkSession.sql(
            f"MERGE INTO delta.`{target}` t USING changes s ON t.id = s.id "
            "WHEN MATCHED AND s.op = 'DELETE' THEN DELETE "
            "WHEN MATCHED THEN UPDATE SET t.name = s.name, t.tier = s.tier "
            "WHEN NOT MATCHED AND s.op != 'DELETE' THEN INSERT (id, name, tier) VALUES (s.id, s.name, s.tier)"
        )

    query = (
        spark.readStream.format("canal")
        .option("destination", "cdc")
        .option("master.address", mariadb.address)
        .option("master.user", mariadb.user)
        .option("master.password", mariadb.password)
        .option("master.journal.name", str(start[0]))
        .option("master.position", str(start[1]))
        .option("filter.regex", rf"{db}\.customers")
        .option("spool.dir", str(tmp_path / "spool"))
        .option("maxRowsPerTrigger", "40")  # several micro-batches: the moves fall in different ones
        .load()
        .writeStream.foreachBatch(merge)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    got = sorted(tuple(r) for r in spark.read.format("delta").load(target).select("id", "name", "tier").collect())
    want = sorted(tuple(r) for r in mariadb.execute("SELECT id, name, tier FROM customers"))
    assert got == want
