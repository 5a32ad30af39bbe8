"""Spark's own cost of a streaming query's first micro-batch: the floor under any Python source on this machine.

The Spark benchmarks time a query from ``start()``, its first micro-batch included. Part of that is Spark's, whatever
the source does: the query's start, the Python process that runs a Python data source's reader, the executors'
Python workers, the first job. :func:`first_batch_s` measures it with a source that reads nothing -- one row per
input partition -- consumed the way the benchmark consumes its batches, in a session that has run nothing yet (as
the benchmark's has not). Rows over those seconds is the rate no Python source could beat in that query here.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from typing import Any


def first_batch_s(
    spark: Any, consume: Callable[[Any], Any], *, partitions: int = 1, simple: bool, available_now: bool
) -> float:
    """Seconds from ``start()`` to the end of the first micro-batch of a source of ``partitions`` one-row input
    partitions, each micro-batch passed to ``consume`` in ``foreachBatch``. ``simple``: the source is a
    ``SimpleDataSourceStreamReader`` (its batches read in the reader's process, as the ``canal`` source without
    ``snapshot.partitions``), else a ``DataSourceStreamReader`` read on executors. ``available_now``: the query
    runs ``Trigger.AvailableNow`` until it ends, else the default trigger until its first batch is processed."""
    # defined here so that Spark's cloudpickle ships them by value (a benchmark is not importable in its workers)
    from pyspark.sql.datasource import (
        DataSource,
        DataSourceStreamReader,
        InputPartition,
        SimpleDataSourceStreamReader,
    )

    class OneRowReader(DataSourceStreamReader):
        def initialOffset(self) -> dict[str, int]:
            return {"batch": 0}

        def latestOffset(self, start: dict[str, int] | None = None, limit: Any = None) -> dict[str, int]:
            return {"batch": 1}

        def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
            return [InputPartition(i) for i in range(partitions if start != end else 0)]

        def read(self, partition: InputPartition) -> Any:
            yield (partition.value,)

    class OneRowSimpleReader(SimpleDataSourceStreamReader):
        def initialOffset(self) -> dict[str, int]:
            return {"batch": 0}

        def read(self, start: dict[str, int]) -> tuple[Any, dict[str, int]]:
            if start["batch"]:
                return iter([]), start
            return iter([(i,) for i in range(partitions)]), {"batch": 1}

        def readBetweenOffsets(self, start: dict[str, int], end: dict[str, int]) -> Any:
            return iter([(i,) for i in range(partitions)] if start != end else [])

    class FloorSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "pycanal_bench_floor"

        def schema(self) -> str:
            return "x int"

        def streamReader(self, schema: Any) -> DataSourceStreamReader:
            if simple:
                return super().streamReader(schema)  # not implemented: pyspark takes the simple reader
            return OneRowReader()

        def simpleStreamReader(self, schema: Any) -> SimpleDataSourceStreamReader:
            return OneRowSimpleReader()

    spark.dataSource.register(FloorSource)
    ended: list[float] = []

    def each(df: Any, batch_id: int) -> None:
        consume(df)
        ended.append(time.perf_counter())

    with tempfile.TemporaryDirectory(prefix="bench-spark-floor-") as work:
        writer = (
            spark.readStream.format("pycanal_bench_floor")
            .load()
            .writeStream.foreachBatch(each)
            .option("checkpointLocation", f"{work}/checkpoint")
        )
        if available_now:
            writer = writer.trigger(availableNow=True)
        began = time.perf_counter()
        query = writer.start()
        try:
            if available_now:
                if not query.awaitTermination(600):
                    raise RuntimeError("the floor's AvailableNow query did not end within 600 s")
            else:
                while not ended:
                    query.processAllAvailable()
        finally:
            query.stop()
    if not ended:
        raise RuntimeError("the floor's query ran no micro-batch")
    return ended[0] - began
