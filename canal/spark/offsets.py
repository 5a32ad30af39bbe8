"""The offsets of the ``canal`` source: where a micro-batch of change rows (:mod:`canal.lake.forms.changes`) ends in
the binlog, as Spark's checkpoint keeps it, and the instance cursor it names.

Offsets (JSON-native dicts, :func:`offset_of`): the consumer cursor after a batch -- the anchor boundary
(``file``, ``offset``, ``included``, ``timestamp``, ``server_id``, ``gtid``) and ``rows_done`` row entries of the
transaction after it, and ``snapshot``, an unfinished snapshot's progress (:class:`~canal.position.SnapshotCursor`
as JSON, or null) -- plus ``batch``, a counter of non-empty batches, and ``covered``: where the binlog range of the
micro-batches with change rows ended (:mod:`canal.lake.forms.ranges`; the next one's begins there). The cursor
fields are exactly what an :class:`~canal.instance.Instance` restarts from (:func:`cursor_of`). SNAPSHOT entries
move ``snapshot`` only, so offsets are ordered by ``batch`` (:func:`moved` says whether entries moved the cursor at
all).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from canal.lake.forms.ranges import Cursor
from canal.position import EntryPosition, LogIdentity, LogPosition, SnapshotCursor, journal_number
from canal.protocol import Entry, EntryType

Offset = dict[str, Any]

INITIAL_OFFSET: Offset = {
    "batch": 0,
    "file": None,
    "offset": None,
    "included": False,
    "rows_done": 0,
    "timestamp": None,
    "server_id": None,
    "gtid": None,
    "snapshot": None,
}
"""Where a new query starts: wherever the instance starts (its saved cursor, else the configured position)."""


def offset_of(entry: Entry, batch: int) -> Offset | None:
    """The offset (cursor) just after ``entry``; None for entries that do not place a cursor (heartbeats)."""
    anchor = entry.anchor
    if anchor is None or entry.entry_type is EntryType.HEARTBEAT:
        return None
    return {
        "batch": batch,
        "file": anchor.journal_name,
        "offset": anchor.position,
        "included": anchor.included,
        "rows_done": entry.rows_done,
        "timestamp": anchor.timestamp,
        "server_id": anchor.server_id,
        "gtid": anchor.gtid,
        "snapshot": None if entry.snapshot is None else entry.snapshot.to_dict(),
    }


def has_position(offset: Mapping[str, Any]) -> bool:
    return offset.get("file") is not None and offset.get("offset") is not None


def cursor_of(offset: Mapping[str, Any]) -> LogPosition:
    """The instance cursor an offset names (the source address is left open: the configured master)."""
    position = EntryPosition(
        journal_name=offset["file"],
        position=offset["offset"],
        timestamp=offset.get("timestamp"),
        server_id=offset.get("server_id"),
        gtid=offset.get("gtid"),
        included=bool(offset.get("included", False)),
    )
    snapshot = offset.get("snapshot")
    return LogPosition(
        LogIdentity(None, -1),
        position,
        int(offset.get("rows_done", 0)),
        None if snapshot is None else SnapshotCursor.from_dict(snapshot),
    )


def cursor_key(offset: Mapping[str, Any]) -> tuple[int, int, int, str, int]:
    """An order on offsets by binlog position (the batch counter is ignored); the initial offset sorts first."""
    if not has_position(offset):
        return (-2, -1, 0, "", -1)
    return (
        journal_number(offset["file"]),
        int(offset["offset"]),
        1 if offset.get("included") else 0,
        str(offset["file"]),
        int(offset.get("rows_done", 0)),
    )


def moved(start: Mapping[str, Any], end: Mapping[str, Any]) -> bool:
    """Whether the cursor ``end`` names lies past ``start``'s: a later binlog position, or the same one with a
    snapshot that went on (SNAPSHOT entries sit at the boundary they follow)."""
    if cursor_key(start) != cursor_key(end):
        return True
    return start.get("snapshot") != end.get("snapshot")


def with_changes(end: Offset, changes: Mapping[str, int]) -> Offset:
    """``end`` carrying its micro-batch's change rows by type, field ``changes`` (:mod:`canal.spark.progress`)."""
    return {**end, "changes": {kind: rows for kind, rows in sorted(changes.items()) if rows}}


def range_since(start: Mapping[str, Any], saved: LogPosition | None) -> Cursor | None:
    """Where the binlog range of the micro-batch after ``start`` begins (:mod:`canal.lake.forms.ranges`): where the
    last one with change rows ended (``covered``), else ``start``'s cursor -- or, for a query's first (a new
    checkpoint), the instance's cursor it opened at (``saved``; None: the batch's first entry says)."""
    covered = Cursor.parse(start.get("covered"))
    if covered is not None:
        return covered
    return Cursor.of_offset(start) if has_position(start) else Cursor.of_saved(saved)


def with_covered(end: Offset, covered: str | None, start: Mapping[str, Any]) -> Offset:
    """``end`` with field ``covered``: where the micro-batch's change rows said its range ended (``covered``), else
    (none) where the last one's with rows did (``start``'s): the next micro-batch's range begins there."""
    kept = covered or start.get("covered")
    if kept is None:
        cursor = Cursor.of_offset(start)
        kept = None if cursor is None else cursor.text()
    return end if kept is None else {**end, "covered": kept}


def canonical(offset: Mapping[str, Any]) -> str:
    return json.dumps(dict(offset), sort_keys=True, separators=(",", ":"))
