"""Staging (merge-on-read): which of a step's small appends are staged instead of appended, and which are due.

A table's part of a batch of at most ``stage_rows`` rows is staged -- every such part of the batch written as one
file (:mod:`canal.lake.store.staged`, which keeps them) -- and appended to the table's change log later: a few tables a
batch (``stage_spread``: each batch flushes at least one in that many of the tables staged), the oldest first once
more than ``stage_bytes`` are held, or before anything else writes the table. A batch spread over many tables then
costs about what one table's would. Only a mirror that is its logs' only writer stages
(:mod:`canal.lake.upkeep.writers`); the flush itself is an append (:meth:`canal.lake.apply.log_writer.LogWriter.flush`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from canal.lake.apply.appends import LogAppend
from canal.lake.settings import MirrorSettings
from canal.lake.store import fs, staged
from canal.lake.upkeep.writers import LogWriters


class Staging:
    """The parts staged under a mirror's root for its app id; ``log_batch(path)``: the last batch id the change log of
    the table at ``path`` recorded (where a mirror starting where another stopped takes the staged parts up)."""

    def __init__(self, settings: MirrorSettings, writers: LogWriters, log_batch: Callable[[str], int | None]) -> None:
        self._settings = settings
        self._writers = writers
        self._log_batch = log_batch
        self._parts: staged.Staged | None = None  # loaded by the first batch that stages or flushes
        self.staged_by_batch: list[str] = []  # the batch's staged tables (base paths), for its ApplyResult
        self.flushed_by_batch: list[str] = []  # the tables whose staged parts it flushed (the same)

    def new_batch(self) -> None:
        self.staged_by_batch, self.flushed_by_batch = [], []

    @property
    def loaded(self) -> staged.Staged | None:
        """The parts as loaded so far (None: not loaded yet), without reading the root."""
        return self._parts

    def parts(self) -> staged.Staged:
        """What this mirror has staged (read from the root by the first call: a mirror starting where another
        stopped)."""
        if self._parts is None:
            self._parts = staged.load(self._settings.root, self._settings.app_id, self._log_batch)
        return self._parts

    def parts_if_any(self) -> staged.Staged | None:
        """What this mirror has staged, None when it cannot have staged anything (another writer of its logs, or
        nothing staged under its root ever); a mirror that is not its logs' only writer never flushes a part
        another process staged: that one flushes them before anything else appends."""
        if not self._writers.sole:
            return None
        if self._parts is None and not fs.is_dir(staged.staged_dir(self._settings.root)):
            return None
        return self.parts()

    def stage(self, appends: Sequence[LogAppend]) -> list[LogAppend]:
        """Stage the small ones of a step's appends, all in one file; the appends taken (staged now, or staged
        already by this batch before a crash), which the caller does not append."""
        settings = self._settings
        if settings.stage_rows == 0 or not self._writers.sole or self._writers.tasks_append:
            return []
        small = [
            a
            for a in appends
            if a.direct is not None and a.batch_id is not None and a.rows.num_rows <= settings.stage_rows
        ]
        room = settings.stage_bytes  # a batch stages at most stage_bytes (wide rows are held by their bytes)
        for append in list(small):
            room -= append.rows.nbytes
            if room < 0:
                small.remove(append)
        if not small or any(a.batch_id != small[0].batch_id for a in small):
            return []
        batch_id = small[0].batch_id
        assert batch_id is not None
        parts = self.parts()
        # a replay after a crash: the parts staged already are not staged (nor appended) twice
        late = [a for a in small if (last := parts.last_batch(a.path)) is not None and last >= batch_id]
        small = [a for a in small if a not in late]
        if small and not parts.has_batch(batch_id):  # (else the rest are appended, as before staging)
            parts.stage(batch_id, {a.path: a.direct[2] for a in small if a.direct is not None})
            self.staged_by_batch.extend(a.path for a in small)
        else:
            small = []
        return small + late

    def due(self) -> list[str]:
        """The tables whose staged parts the batch flushes at its end."""
        parts = self._parts
        if parts is None or not parts.tables:
            return []
        settings = self._settings
        return list(parts.due(settings.stage_rows, settings.stage_spread, settings.stage_bytes))

    def tables(self) -> list[str]:
        """The tables (base paths) with staged parts."""
        parts = self.parts_if_any()
        return [] if parts is None else list(parts.tables)
