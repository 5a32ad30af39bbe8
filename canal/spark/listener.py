"""A ``StreamingQueryListener`` of the changes in each micro-batch of the ``canal`` source (imports pyspark).

The reader writes each micro-batch's change rows by type into its end offset (:mod:`canal.spark.progress` says why
there), and Spark shows the offsets in every progress it reports. So, on the driver -- or a Spark Connect client --
whatever the images form::

    from canal.spark import ChangeCountListener, micro_batch_changes

    listener = ChangeCountListener()              # collects every micro-batch's changes
    spark.streams.addListener(listener)
    ...
    listener.totals()                             # {"INSERT": 200000, "UPDATE": 3, ...}
    micro_batch_changes(query.lastProgress)       # the last micro-batch's: [MicroBatchChanges(...)]

A progress without new data (Spark reports one every ``spark.sql.streaming.noDataProgressEventInterval`` while idle)
has none. A micro-batch that Spark runs again after a failure is reported again, under the same ``batch_id``: the
listener counts each batch id of a run once.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from pyspark.sql.streaming.listener import StreamingQueryListener

from canal.spark.progress import MicroBatchChanges, micro_batch_changes

__all__ = ["ChangeCountListener"]


class ChangeCountListener(StreamingQueryListener):
    """A ``StreamingQueryListener`` that collects the ``canal`` sources' changes of every micro-batch
    (:func:`micro_batch_changes`), each batch id of a run once; ``on_batch`` is called with each as it comes.
    :attr:`batches` keeps the newest ``keep``; :meth:`totals` counts every one."""

    def __init__(self, on_batch: Callable[[MicroBatchChanges], object] | None = None, keep: int = 10_000) -> None:
        self.on_batch = on_batch
        self.batches: deque[MicroBatchChanges] = deque(maxlen=keep)
        self._totals: dict[str, int] = {}
        self._last: dict[tuple[str, str], int] = {}  # (run, source) -> the last batch id seen
        self._changed = threading.Condition()

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        for batch in micro_batch_changes(event.progress):
            key = (batch.run_id, batch.source)
            with self._changed:
                if self._last.get(key, -1) >= batch.batch_id:
                    continue  # reported again (batch ids grow within a run)
                self._last[key] = batch.batch_id
                self.batches.append(batch)
                for kind, rows in batch.changes.items():
                    self._totals[kind] = self._totals.get(kind, 0) + rows
                self._changed.notify_all()
            if self.on_batch is not None:
                self.on_batch(batch)

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        pass

    def totals(self) -> dict[str, int]:
        """Change rows by type of every micro-batch seen."""
        with self._changed:
            return dict(self._totals)

    def wait_for(self, run_id: str, batch_id: int, timeout: float) -> bool:
        """Wait until the micro-batch ``batch_id`` of run ``run_id`` was seen (Spark delivers progress to listeners
        asynchronously); whether it was within ``timeout`` seconds."""
        with self._changed:
            return self._changed.wait_for(
                lambda: any(run == run_id and last >= batch_id for (run, _source), last in self._last.items()), timeout
            )
