"""Which step of which batch created (or converted) a mirror table, so that a step replayed after a crash is known.

A step's Delta commit and the step journal's write after it are two writes: a process that dies between them leaves
the step done and the journal saying it is not, and the replay runs the step again. Every other kind of step finds
its work done (a MERGE of the same images, an ALTER against a table that has it, a RENAME whose table moved); a
CREATE TABLE finds its table -- which the mirror must refuse when the source creates a table the mirror holds from
before. So the commit that creates the table names the step (``(app id, batch id, step number)`` in its
``commitInfo``), and the replay of that very step knows the table is its own. Likewise a step that converted a
column's values in a time zone (:mod:`canal.lake.ddl.time_zones`: a DATETIME that became a TIMESTAMP keeps its Arrow
type, so the table's layout cannot tell the work done) names itself in its rewrite's commit, and its replay does
not convert them twice.
"""

from __future__ import annotations

import json
import os
from typing import Any

from canal.lake.store import fs

CREATED_STEP = "pycanal.created_step"
"""The ``commitInfo`` entry of the commit that created a mirror table by a CREATE TABLE step."""
REWRITTEN_STEP = "pycanal.rewritten_step"
"""The ``commitInfo`` entry of the commit that rewrote a mirror table by a DDL step."""
_RECENT = 20  # commits a replay looks back through for its rewrite (the step's own commits come after it)
_FIRST_COMMIT = ("_delta_log", f"{0:020d}.json")


def _mark(app_id: str, batch_id: int, step: int) -> str:
    return json.dumps([app_id, batch_id, step])


def created_metadata(app_id: str, batch_id: int, step: int) -> dict[str, str]:
    """The custom commit metadata of a table created by step ``step`` of batch ``batch_id``."""
    return {CREATED_STEP: _mark(app_id, batch_id, step)}


def created_by(path: str | os.PathLike[str], app_id: str, batch_id: int, step: int) -> bool:
    """Whether the Delta table at ``path`` (a local path or an object-store URI, :mod:`canal.lake.store.fs`) was created
    by that step (its first commit, version 0, names it). A table whose first commit is gone (cleaned up behind a
    checkpoint, long after any replay) reads as not."""
    try:
        lines = fs.read_text(fs.join(os.fspath(path), *_FIRST_COMMIT)).splitlines()
    except FileNotFoundError:
        return False
    want = _mark(app_id, batch_id, step)
    for line in lines:
        if CREATED_STEP not in line:
            continue
        try:
            action: Any = json.loads(line)
        except ValueError:
            return False
        info = action.get("commitInfo") if isinstance(action, dict) else None
        if isinstance(info, dict) and info.get(CREATED_STEP) == want:
            return True
    return False


def rewritten_metadata(app_id: str, batch_id: int, step: int) -> dict[str, str]:
    """The custom commit metadata of a table's rewrite by step ``step`` of batch ``batch_id``."""
    return {REWRITTEN_STEP: _mark(app_id, batch_id, step)}


def rewritten_by(table: Any, app_id: str, batch_id: int, step: int) -> bool:
    """Whether one of the newest commits of the Delta table ``table`` (a ``DeltaTable``) is that step's rewrite."""
    want = _mark(app_id, batch_id, step)
    return any(commit.get(REWRITTEN_STEP) == want for commit in table.history(_RECENT))
