"""The Delta mirror's Spark entry point: :class:`DeltaMirror` as ``foreachBatch`` hands it a micro-batch's DataFrame.

:class:`canal.lake.DeltaMirror` applies Arrow and needs no Spark; this subclass adds what only the Spark side can do
with a DataFrame: with ``on_executors`` (the default) its rows are written by Spark tasks, a table per task
(:mod:`canal.spark.mirror_tasks`). The lake never imports :mod:`canal.spark`: this module hands it the DataFrame's
parts as Arrow, task by task.
"""

from __future__ import annotations

from typing import Any

from canal.lake.mirror import DeltaMirror as LakeMirror
from canal.lake.results import ApplyResult


class DeltaMirror(LakeMirror):
    """:class:`canal.lake.DeltaMirror`, whose ``foreachBatch`` entry point writes a Spark DataFrame with Spark tasks
    (``on_executors``; ``on_executors=False``: the driver applies it, as Arrow)."""

    def apply_dataframe(self, df: Any, batch_id: int) -> ApplyResult:
        from canal.spark.mirror_tasks import apply_on_executors  # pyspark: imported with the first DataFrame

        return apply_on_executors(self, df, batch_id)
