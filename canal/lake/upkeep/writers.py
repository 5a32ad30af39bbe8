"""Who writes a mirror's change logs besides this mirror object: what decides how its appends and folds go.

A mirror alone with its logs appends as direct Delta commits (:mod:`canal.lake.store.delta_append`), stages small parts
(:mod:`canal.lake.store.staged`) and trims folded logs by whole files; once Spark tasks append to them
(:mod:`canal.spark.mirror_tasks` says so) or another process folds them, appends go through ``deltalake``'s
conflict checks and folds trim through Delta's DELETE (:func:`canal.lake.store.changelog.trim`).
"""

from __future__ import annotations

import attrs


@attrs.define(slots=True)
class LogWriters:
    """``sole``: this mirror object is the only writer of its change logs (appends, folds, compactions); Spark
    tasks' mirrors are not (folds run in other tasks). ``tasks_append``: Spark tasks have appended to this mirror's
    change logs."""

    sole: bool = True
    tasks_append: bool = False

    @property
    def trim_by_files(self) -> bool:
        """Whether a fold may trim the log by removing whole files (no other writer appends meanwhile)."""
        return self.sole and not self.tasks_append
