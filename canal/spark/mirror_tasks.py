"""The Delta mirror written by Spark tasks: no change row collected to the driver, tables in parallel.

Under ``foreachBatch``, :meth:`DeltaMirror.__call__ <canal.spark.mirror.DeltaMirror.__call__>` hands a DataFrame to
:func:`apply_on_executors`. A batch without DDL (nearly all of them) is written by Spark tasks through the mirror's
own code, so no change row is collected to the driver:

* a batch in one partition (the ``canal`` source's micro-batches) by its one task, tables in parallel threads
  (``mapInArrow``: one Spark job, no shuffle); the task answers instead, writing nothing, when the batch holds DDL;
* a batch in several partitions grouped by table, each group by a task (``applyInArrow``), so a cluster adds mirror
  throughput -- after a first job that looks for DDL (the batch is cached for the two).

Each task builds the mirror from :meth:`DeltaMirror.settings` (once per Python worker, kept for the next batches)
and applies its rows without the step journal: a table whose last
committed batch id is at least the batch's is skipped, so a retried task, a replayed micro-batch and a speculative
duplicate change nothing (merge-on-read: a duplicate append holds the same changes, and the latest change per key is
the same row; copy-on-write: the second MERGE fails on Delta's conflict check and its retry is skipped).

A batch that holds DDL is applied by the driver, in order, with the step journal (:meth:`DeltaMirror.apply`): DDL can
touch several tables at once (``RENAME TABLE a TO b, b TO a``), which per-table tasks could not order. The driver
waits for the folds under way first.

Folds run as Spark tasks too: the tasks report which tables' logs are due (:meth:`DeltaMirror.fold_due`), and the
driver starts one Spark job folding them, a table per task, in a background thread -- the next micro-batches land
meanwhile (appends and folds never block each other: :mod:`canal.spark.changelog`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from canal.spark.mirror import ApplyResult, DeltaMirror

RESULT_SCHEMA = "table string, status string, rows long, fold_due boolean, data binary"


def _result_arrow() -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            ("table", pa.string()),
            ("status", pa.string()),
            ("rows", pa.int64()),
            ("fold_due", pa.bool_()),
            ("data", pa.binary()),
        ]
    )

_WORKER_MIRRORS: dict[tuple[tuple[str, Any], ...], DeltaMirror] = {}
_WORKER_LOCK = threading.Lock()


def worker_mirror(kind: type[DeltaMirror], settings: dict[str, Any]) -> DeltaMirror:
    """The mirror a task writes with (``kind``: the driver's mirror class, so this module need not import it): one
    per settings in a Python worker, kept between tasks so its open Delta tables are reused; it starts no fold of its
    own and never writes on executors itself."""
    key = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in settings.items()))
    with _WORKER_LOCK:
        mirror = _WORKER_MIRRORS.get(key)
        if mirror is None:
            options = {**settings, "background_folds": False, "on_executors": False}
            root = options.pop("root")
            mirror = _WORKER_MIRRORS[key] = kind(root, **options)
            mirror.sole_log_writer = False  # folds run in other tasks: appends go through deltalake's checks
        return mirror


def write_group(kind: type[DeltaMirror], settings: dict[str, Any], batch_id: int, rows: Any) -> Any:
    """One table's change rows of a batch (a pyarrow Table), applied by a task: one result row per table."""
    import pyarrow as pa

    mirror = worker_mirror(kind, settings)
    result = mirror.apply(rows, batch_id, steps_journal=False, fold=False)
    due = set(result.folds)
    names = sorted(result.tables)
    return pa.table(
        {
            "table": pa.array(names, pa.string()),
            "status": pa.array([result.tables[n] for n in names], pa.string()),
            "rows": pa.array([result.rows if i == 0 else 0 for i in range(len(names))], pa.int64()),
            "fold_due": pa.array([n in due for n in names], pa.bool_()),
            "data": pa.nulls(len(names), pa.binary()),
        }
    )


def fold_in_task(kind: type[DeltaMirror], settings: dict[str, Any], name: str) -> None:
    """A Spark task's fold of one table (``schema.table``)."""
    from canal.spark.changelog import FoldRaceError

    schema, table = name.split(".", 1)
    # a speculative twin of this task folded the table, or appends kept it from trimming the log (the next fold
    # trims it): nothing to do now
    with contextlib.suppress(FoldRaceError):
        worker_mirror(kind, settings).fold(schema, table)


DDL_MARK = "ddl"  # the status a one-partition task answers for a batch with DDL, having written nothing


def write_partition(kind: type[DeltaMirror], settings: dict[str, Any], batch_id: int, batches: Any) -> Any:
    """A micro-batch held by one partition, applied by its task (tables in parallel threads) -- or, when it holds
    DDL, one row saying so that carries the batch (Arrow IPC), nothing written: the driver then applies it, in
    order, without reading the batch a second time."""
    import pyarrow as pa
    import pyarrow.compute as pc

    rows = pa.Table.from_batches(list(batches))
    if rows.num_rows == 0:
        return
    if pc.any(rows.column("is_ddl")).as_py():
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, rows.schema) as writer:
            writer.write_table(rows)
        yield pa.RecordBatch.from_pydict(
            {
                "table": [""],
                "status": [DDL_MARK],
                "rows": [rows.num_rows],
                "fold_due": [False],
                "data": [sink.getvalue().to_pybytes()],
            },
            schema=_result_arrow(),
        )
        return
    yield from write_group(kind, settings, batch_id, rows).to_batches()


def apply_on_executors(mirror: DeltaMirror, df: Any, batch_id: int) -> ApplyResult:
    """Apply a micro-batch (a Spark DataFrame of change rows) with Spark tasks (module docstring)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    began = time.perf_counter()
    mirror.tasks_append = True  # the driver's own folds must not trim by whole files while tasks append
    kind = type(mirror)
    settings = mirror.settings()
    changes = df.select(*mirror.COLUMNS)
    if changes.rdd.getNumPartitions() == 1:
        # the whole batch in one partition (the canal source's micro-batches): one job, no shuffle -- its task
        # writes every table, in parallel threads, or answers that the batch holds DDL
        def write_all(batches: Any) -> Any:
            return write_partition(kind, settings, batch_id, batches)

        outcome = changes.mapInArrow(write_all, RESULT_SCHEMA).collect()
        ddl = [row["data"] for row in outcome if row["status"] == DDL_MARK]
        if ddl:
            import pyarrow as pa

            mirror.wait_for_folds()
            return mirror.apply(pa.ipc.open_stream(pa.py_buffer(ddl[0])).read_all(), batch_id)
    else:
        # two Spark jobs read the batch (is there DDL? write it, a table per task): cached, so the source is read
        # once
        changes = changes.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            if changes.where(F.col("is_ddl")).limit(1).count():
                mirror.wait_for_folds()
                return mirror.apply(changes, batch_id)

            def write(rows: Any) -> Any:
                return write_group(kind, settings, batch_id, rows)

            outcome = changes.groupBy("schema", "table").applyInArrow(write, RESULT_SCHEMA).collect()
        finally:
            changes.unpersist()
    result = mirror.new_result(batch_id)
    due: list[str] = []
    for row in outcome:
        result.tables[row["table"]] = row["status"]
        result.rows += row["rows"]
        stats = mirror.table_stats(row["table"])
        if row["status"] == "applied":
            stats.applied += 1
        else:
            stats.skipped += 1
        if row["fold_due"]:
            due.append(row["table"])
    result.merge_s = time.perf_counter() - began
    if due:
        result.folds = start_folds(mirror, df.sparkSession, due)
    mirror.history.append(result)
    return result


def start_folds(mirror: DeltaMirror, spark: Any, names: list[str]) -> list[str]:
    """Fold ``names`` (``schema.table``) in one Spark job, a table per task, from a background thread of the driver;
    tables whose fold is under way are left for a later batch. The tables started."""
    settings = mirror.settings()
    kind = type(mirror)
    paths = {name: str(mirror.root / name) for name in names}
    started = mirror.claim_folds(list(paths.values()))
    if not started:
        return []
    chosen = [name for name, path in paths.items() if path in started]

    def run() -> None:
        def fold(name: str) -> None:
            fold_in_task(kind, settings, name)

        spark.sparkContext.parallelize(chosen, len(chosen)).foreach(fold)

    mirror.run_folds(started, run)
    return chosen
