"""Which batch ids a mirror table committed: read from the commits of its Delta logs (its base's and its change
log's), as ``DeltaMirror.committed_batch_ids`` reports them."""

from __future__ import annotations

import json

from canal.lake import fs, staged


def logged_batch_ids(log: str, app_id: str) -> list[int]:
    """The batch ids the Delta log directory ``log`` holds commits of for ``app_id``: each commit's ``txn``
    action, or for a flush of staged parts every batch it appended (:data:`~canal.lake.staged.FLUSHED_BATCHES`). A
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
