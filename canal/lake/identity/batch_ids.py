"""Which batch ids a mirror table committed: read from the commits of its Delta logs (its base's and its change
log's), as ``DeltaMirror.committed_batch_ids`` reports them."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from canal.lake.store import changelog, fs, staged
from canal.lake.store.handles import Handles


def logged_batch_ids(log: str, app_id: str) -> list[int]:
    """The batch ids the Delta log directory ``log`` holds commits of for ``app_id``: each commit's ``txn``
    action, or for a flush of staged parts every batch it appended (:data:`~canal.lake.store.staged.FLUSHED_BATCHES`). A
    commit cleaned up behind a checkpoint since it was listed is not seen."""
    ids: list[int] = []
    for name in fs.listdir(log):
        if not name.endswith(".json"):
            continue
        commit_ids: list[int] = []
        listed: list[int] = []
        try:
            text = fs.read_text(fs.join(log, name))
        except FileNotFoundError:
            continue  # cleaned up behind a checkpoint since it was listed
        for line in text.splitlines():
            if not line.strip():
                continue
            action = json.loads(line)
            txn = action.get("txn")
            if txn and txn.get("appId") == app_id:
                commit_ids.append(int(txn["version"]))
            flushed = (action.get("commitInfo") or {}).get(staged.FLUSHED_BATCHES)
            if flushed:  # a flush of staged parts: every batch it appended
                listed = [int(b) for b in str(flushed).split(",")]
        ids.extend(listed if listed else commit_ids)
    return ids


class BatchVersions:
    """The batch numbers a mirror (``app_id``) committed to its tables: to a base, to its change log (kept open in
    ``handles``), or staged (``staged_parts``: what the mirror's staging holds, None when it cannot hold anything --
    a callable, so that this record of what was committed does not depend on how appends are applied)."""

    def __init__(self, app_id: str, handles: Handles, staged_parts: Callable[[], staged.Staged | None]) -> None:
        self.app_id = app_id
        self._handles = handles
        self._staged_parts = staged_parts

    def last(self, path: str, base: Any = None) -> int | None:
        """The last batch number committed to the table at ``path``: to its base or (merge-on-read) its change log."""
        versions: list[int] = []
        base = base if base is not None else fs.delta_table(path)
        if (done := base.transaction_version(self.app_id)) is not None:
            versions.append(int(done))
        log = self._handles.log(path)
        if log is not None and (done := log.transaction_version(self.app_id)) is not None:
            versions.append(int(done))
        parts = self._staged_parts()
        if parts is not None and (last := parts.last_batch(path)) is not None:
            versions.append(last)
        return max(versions) if versions else None

    def in_log(self, path: str) -> int | None:
        """The last batch number the change log of the table at ``path`` recorded (None: none, or no log)."""
        log = self._handles.log(path)
        done = None if log is None else log.transaction_version(self.app_id)
        return None if done is None else int(done)

    def committed(self, base: str) -> list[int]:
        """Every batch number committed to the table at ``base``, in order (its base's and change log's ``txn``
        actions -- a change log's kept ``log_history_s`` only -- and its staged parts)."""
        ids: list[int] = []
        for log in (fs.join(base, "_delta_log"), fs.join(changelog.log_path(base), "_delta_log")):
            ids.extend(logged_batch_ids(log, self.app_id))
        parts = self._staged_parts()
        if parts is not None:
            ids.extend(parts.batch_ids(base))
        return sorted(set(ids))
