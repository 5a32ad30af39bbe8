"""The step journal: how far the mirror's app id got in its last batch, so a replay goes on after the last step done.

One small file per app id beside the tables (``_pycanal_steps.{app_id}.json``: the batch id and the number of its
steps done), written whole after each step (:func:`canal.lake.store.fs.write_bytes`). A mirror without one (written by
an older pycanal) knows its replays by each table's last batch id only.
"""

from __future__ import annotations

import json

from canal.lake.store import fs
from canal.lake.types import MirrorError


class StepJournal:
    """The step journal of ``app_id`` under the mirror's ``root``."""

    def __init__(self, root: str, app_id: str) -> None:
        self.path = fs.join(root, f"_pycanal_steps.{app_id}.json")

    def read(self) -> tuple[int, int] | None:
        """(batch id, steps done) of the last batch this mirror's app id applied; None before its first."""
        path = self.path
        try:
            data = json.loads(fs.read_text(path))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise MirrorError(f"the mirror's step journal {path} cannot be read: {exc}") from exc
        if not isinstance(data, dict) or not all(isinstance(data.get(k), int) for k in ("batch", "done")):
            raise MirrorError(f"the mirror's step journal {path} is damaged: {data!r}")
        return int(data["batch"]), int(data["done"])

    def write(self, batch_id: int, done: int) -> None:
        """Record ``done`` steps of ``batch_id`` applied."""
        fs.write_bytes(self.path, json.dumps({"batch": batch_id, "done": done}).encode())
