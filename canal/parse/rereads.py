"""Rows a partial row image leaves a copy unable to make exact, read again by their keys.

A partial UPDATE (``binlog_row_image`` MINIMAL / NOBLOB) that carries its key is followed: a copy writes the columns it
carries over the row it holds (:mod:`canal.lake.apply.partial`). Two such updates leave a row a copy cannot make
exact from the entries alone, however it applies them:

* **a VIRTUAL column whose value changed**: MariaDB computes a VIRTUAL generated column when the row is read, and a
  partial image never carries it (MINIMAL: the columns the statement wrote and the stored generated ones; NOBLOB: all
  but the BLOB / TEXT ones, so a VIRTUAL TEXT column is left out too -- docs/concepts/row-images.md). An update that
  wrote a column the expression reads changed the value; a copy would keep the old one;
* **a key moved while a snapshot still reads the table**: the copy does not hold the rows the snapshot has not
  brought yet (a heal voided them), so it skips a partial update of such a row (``SNAPSHOT_PENDING``); an update that
  moved the row's key into the part of the table the snapshot has read already is in no chunk to come -- the row
  would be lost. (Whether the new key lies before or after the read's progress cannot be told in the server's order
  of keys from the binlog's values; every partial key move of a table being read is read again.)

The parser asks :func:`rereads` of every rows entry a copy follows, after the partial images that heal the table
(:func:`canal.parse.heal_marks.partial_image`), and hands the keys to the destination's re-read
(:data:`RowRereads`: a pass of the snapshot that reads those rows only, :meth:`canal.snapshot.runner.SnapshotRunner.
reread`), before the entry is handed off: its rows come as SNAPSHOT entries after it, exact at their place in the
stream, and the entry carries the snapshot's progress with that pass (a restart reads the table whole in it). Under
``heal="stop"``, or where no snapshot can be taken, the entry is a typed stop (:data:`~canal.parse.heal_marks.
PARTIAL_IMAGE`) rather than a copy left stale. The VIRTUAL columns come from the schema history; without one they are
not known.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

import attrs

from canal.names import qualified
from canal.protocol import ABSENT, ColumnarRows, Entry, EventType, Rows
from canal.schema.catalog import TableDef

__all__ = ["Reread", "RowRereads", "rereads"]

RowRereads = Callable[[str, Sequence[tuple[tuple[str, Any], ...]]], None]
"""``reread(table, keys)``: the destination reads the rows of ``table`` (``db.table``) with ``keys``
(``((column, value), ...)``, values as the binlog decoder gives them) again, in the stream after this point; raises
:class:`~canal.errors.CanalError` when no snapshot can be taken."""


@attrs.frozen(slots=True)
class Reread:
    """The rows of one rows entry to read again: the table (``db.table``), each row's key, and why."""

    table: str
    keys: tuple[tuple[tuple[str, Any], ...], ...]
    why: str


def rereads(entry: Entry, layout: TableDef | None, reading: Collection[str]) -> Reread | None:
    """The rows of ``entry`` a copy cannot make exact from its partial images (module docstring), or None.
    ``layout``: the table's layout from the schema history (its VIRTUAL columns); ``reading``: the tables a snapshot
    in the stream still reads (``db.table``)."""
    rc = entry.row_change
    if rc is None or rc.is_ddl or rc.event_type is not EventType.UPDATE:
        return None
    rows = rc.rows
    if not isinstance(rows, Rows | ColumnarRows) or not rows.absent("after"):
        return None
    table = rows.table
    key = table.key_indexes
    if not key:
        return None  # MariaDB logs every column of a table without a key, whatever the image
    name = qualified(entry.header.schema, entry.header.table)
    virtual = _virtual_bases(table.names, layout)
    moving = name in reading
    if not virtual and not moving:
        return None
    names = table.names
    found: dict[tuple[tuple[str, Any], ...], None] = {}
    whys: set[str] = set()
    for row in rows:
        before, after = row.before, row.after
        if before is None or after is None:
            continue
        old = tuple(before[i] for i in key)
        new = tuple(after[i] if after[i] is not ABSENT else before[i] for i in key)
        if ABSENT in new:
            continue  # an image without its whole key heals the table (canal.parse.heal_marks.partial_image)
        if moving and new != old:
            whys.add("a partial UPDATE moved a key while a snapshot still reads the table")
        elif not any(after[v] is ABSENT and _changed(before, after, bases) for v, bases in virtual):
            continue
        else:
            whys.add("a partial UPDATE changed what a VIRTUAL column is computed from, and does not carry its value")
        found[tuple((names[i], _hashable(value)) for i, value in zip(key, new, strict=True))] = None
    if not found:
        return None
    return Reread(name, tuple(found), "; ".join(sorted(whys)))


def _virtual_bases(names: Sequence[str], layout: TableDef | None) -> list[tuple[int, tuple[int, ...]]]:
    """Each VIRTUAL column of the table (its index in ``names``) with the indexes of the columns its expression
    reads."""
    if layout is None:
        return []
    index = {n.lower(): i for i, n in enumerate(names)}
    out = []
    for column in layout.columns:
        if column.virtual_of is None or column.name.lower() not in index:
            continue
        bases = tuple(index[n] for n in column.virtual_of if n in index)
        out.append((index[column.name.lower()], bases))
    return out


def _changed(before: Sequence[Any], after: Sequence[Any], bases: Sequence[int]) -> bool:
    """Whether the update wrote one of ``bases`` (MINIMAL carries in the after image what it wrote; NOBLOB carries
    it in both, so the values tell)."""
    return any(after[b] is not ABSENT and (before[b] is ABSENT or before[b] != after[b]) for b in bases)


def _hashable(value: Any) -> Any:
    return bytes(value) if isinstance(value, bytearray) else value
