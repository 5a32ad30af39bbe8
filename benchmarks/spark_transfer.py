"""What Spark's own handling of a run's change rows costs, with nothing else to do: the ceiling of a pipeline's rates.

The ``canal`` query hands each micro-batch's change rows from its reader (a Python worker reading the spool file) to
the mirror's task (another Python worker, ``mapInArrow`` in ``foreachBatch``) through the JVM, which turns every
Arrow batch into its rows and back. :func:`transfer_run` times a query of the same shape over rows already made --
the run's own change rows, read from an Arrow IPC file written before -- in micro-batches of the same sizes, each
counted in a ``mapInArrow`` task and collected, as ``DeltaMirror`` writes it: no decoding, no encoding, no merge.
Its rates are what the pipeline could reach here if those cost nothing.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from typing import Any


def transfer_run(
    spark: Any, rows_path: str, schema_ddl: str, batch_rows: Sequence[int], counted_by: str | None = None
) -> dict[str, Any]:
    """A query of micro-batches of ``batch_rows`` rows each, taken in order from the Arrow IPC file ``rows_path``
    (rows in ``schema_ddl``), read on executors, each counted by a ``mapInArrow`` task and collected in
    ``foreachBatch``, from ``start()`` in a session that has run nothing yet. Returns the whole query's seconds and
    rows/s, its first micro-batch's seconds, and the steady rows/s of the others (the first left out). Rows are
    change rows: with ``counted_by`` (packed batches' ``rows``) each row counts as that column says."""
    # defined here so that Spark's cloudpickle ships them by value (a benchmark is not importable in its workers)
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    starts = [sum(batch_rows[:i]) for i in range(len(batch_rows) + 1)]

    class RowsReader(DataSourceStreamReader):
        def initialOffset(self) -> dict[str, int]:
            return {"batch": 0}

        def latestOffset(self, start: dict[str, int] | None = None, limit: Any = None) -> dict[str, int]:
            done = 0 if start is None else start["batch"]
            return {"batch": min(done + 1, len(batch_rows))}  # one micro-batch at a time, as the canal source

        def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
            first, last = starts[start["batch"]], starts[end["batch"]]
            return [InputPartition((first, last - first))] if last > first else []

        def read(self, partition: InputPartition) -> Any:
            import pyarrow as pa

            first, count = partition.value
            with pa.memory_map(rows_path) as source:
                rows = pa.ipc.open_file(source).read_all().slice(first, count)
                yield from rows.to_batches()

    class RowsSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "pycanal_bench_transfer"

        def schema(self) -> str:
            return schema_ddl

        def streamReader(self, schema: Any) -> DataSourceStreamReader:
            return RowsReader()

    def count(batches: Any) -> Any:
        import pyarrow as pa
        import pyarrow.compute as pc

        def rows_of(batch: Any) -> int:
            return int(pc.sum(batch.column(counted_by)).as_py() or 0) if counted_by else batch.num_rows

        yield pa.RecordBatch.from_pydict({"rows": [sum(rows_of(b) for b in batches)]})

    spark.dataSource.register(RowsSource)
    ended: list[tuple[float, int]] = []

    def each(df: Any, batch_id: int) -> None:
        counted = df.mapInArrow(count, "rows long").collect()
        ended.append((time.perf_counter(), sum(r["rows"] for r in counted)))

    with tempfile.TemporaryDirectory(prefix="bench-spark-transfer-") as work:
        began = time.perf_counter()
        query = (
            spark.readStream.format("pycanal_bench_transfer")
            .load()
            .writeStream.foreachBatch(each)
            .option("checkpointLocation", f"{work}/checkpoint")
            .start()
        )
        try:
            query.processAllAvailable()
        finally:
            query.stop()
    rows = [n for _, n in ended]
    if counted_by is None and rows != list(batch_rows):
        raise RuntimeError(f"the transfer query's micro-batches held {rows} rows, not {list(batch_rows)}")
    whole_s = ended[-1][0] - began
    steady_s = ended[-1][0] - ended[0][0]
    return {
        "micro_batches": len(rows),
        "rows": sum(rows),
        "whole_s": round(whole_s, 3),
        "whole_rows_per_s": round(sum(rows) / whole_s),
        "first_batch_s": round(ended[0][0] - began, 3),
        "steady_rows_per_s": round(sum(rows[1:]) / steady_s) if steady_s > 0 else None,
    }
