"""A table's change rows of a step bound for its change log: what the change-log writer
(:mod:`canal.lake.apply.log_writer`) appends and staging (:mod:`canal.lake.apply.staging`) may keep back instead --
its own module, so that neither of the two imports the other for it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs


@attrs.define(slots=True)
class LogAppend:
    """One table's change rows of a step, to be appended to its change log (:meth:`LogWriter.commit`)."""

    path: str  # the base table
    log: str
    rows: Any  # the change rows, with the log's batch and seq columns
    batch_id: int | None  # committed as the mirror's app transaction, when the append records the batch
    through_deltalake: Callable[[], None]  # the append through deltalake (a new log, new columns, another writer)
    direct: tuple[int, Any, Any] | None = None  # (the log's version, its Arrow schema, the rows in it): direct append
    flushed: list[int] | None = None  # a flush of staged parts: their batch ids (staged.FLUSHED_BATCHES)
