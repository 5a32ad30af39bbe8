"""The Delta tables a mirror keeps open between batches, each brought up to date on use.

Opening a table anew replays its log from the last checkpoint (up to 100 commits, tens of milliseconds), which every
micro-batch would pay twice per table (base and change log); a handle kept open reads only the commits made since
(its own or anyone's). Statements that rewrite, drop or move a table forget its handles (:meth:`Handles.forget`).
"""

from __future__ import annotations

import uuid
from typing import Any

from canal.lake.store import changelog, delta_append, fs


class Handles:
    """Open ``DeltaTable`` objects by location: bases and change logs."""

    def __init__(self) -> None:
        self._open: dict[str, Any] = {}
        # new whenever a table is forgotten (rewritten, moved, dropped): a Spark task's mirror, whose handles outlive
        # the task, reads its tables anew when the driver's epoch is not the one it saw last (canal.spark.mirror_tasks)
        self.epoch = uuid.uuid4().hex

    def table(self, path: str) -> Any:
        """The Delta table at ``path``, opened once and brought up to date on each use by reading only the commits
        since."""
        handle = self._open.get(path)
        if handle is None:
            handle = self._open[path] = fs.delta_table(path)
        else:
            handle.update_incremental()
        return handle

    def log(self, path: str) -> Any:
        """The change log of the table at ``path``, kept open between batches and brought up to date (None: it has
        none)."""
        log = changelog.log_path(path)
        handle = self._open.get(log)
        if handle is not None:
            handle = changelog.refreshed(handle, log)
        elif delta_append.is_table(log):
            handle = changelog.open_table(log)
        else:
            return None
        self._open[log] = handle
        return handle

    def get(self, location: str) -> Any:
        """The handle held for ``location`` as it is (None: none), not brought up to date."""
        return self._open.get(location)

    def put(self, location: str, handle: Any) -> None:
        self._open[location] = handle

    def locations(self) -> list[str]:
        """Where the handles held are (bases and change logs)."""
        return list(self._open)

    def forget(self, path: str) -> None:
        """Drop the handles of the table at ``path`` and of its change log."""
        self._open.pop(path, None)
        self._open.pop(changelog.log_path(path), None)
        self.epoch = uuid.uuid4().hex
