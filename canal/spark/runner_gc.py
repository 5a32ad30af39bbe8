"""Python's garbage collector in the process Spark starts to run the ``canal`` source's reader.

Spark runs a Python streaming source's reader in a process of its own (``python -m
pyspark.sql.streaming.python_streaming_source_runner``) that runs nothing else, and there the reader decodes the
binlog. Decoding allocates a tuple for every row image, and each stays alive until its micro-batch is packed, so at
Python's default first threshold (700 allocations) the collector runs every few dozen rows. Each run examines every
young object. Full collections come every few seconds and also examine every entry the instance's store holds and
every object the imports left (pyspark's, pyarrow's, pandas'). Timed with ``gc.callbacks`` while decoding the
Spark benchmark's workload, the collector took an eighth of the time.

In that process only, :func:`tune_runner_gc` freezes what the imports left (``gc.freeze``: the collector no longer
examines it) and raises the first threshold (the source's ``reader.gc.threshold`` option, 50,000 by default), so most
row tuples are freed before a collection examines them. The other thresholds stay Python's. In any other process --
an application embedding an :class:`~canal.instance.Instance`, a test calling the reader directly, Spark's planner
and executor processes -- the collector is the application's to set, and is left alone.
"""

from __future__ import annotations

import gc
import sys
import threading
from typing import Final

RUNNER_MODULE: Final = "pyspark.sql.streaming.python_streaming_source_runner"
"""The module Spark runs (``python -m``) as a Python streaming source's process."""

_tuned = threading.Lock()
_done = False


def main_module() -> str | None:
    """The name of the module this process runs as ``__main__`` (``python -m``), else None."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    name = getattr(spec, "name", None)
    return name if isinstance(name, str) else None


def tune_runner_gc(threshold: int, running: str | None = None) -> bool:
    """In the streaming source's process (``running``: the ``__main__`` module's name; None: this process's), once:
    freeze the objects alive and set the collector's first threshold to ``threshold`` (0: leave the collector as it
    is). Whether it did now."""
    global _done
    if threshold <= 0 or (running if running is not None else main_module()) != RUNNER_MODULE:
        return False
    with _tuned:
        if _done:
            return False
        _done = True
    gc.freeze()
    _, second, third = gc.get_threshold()
    gc.set_threshold(threshold, second, third)
    return True
