"""Where a snapshot chunk joins the binlog stream, and which of its rows the stream has already overtaken.

DBLog reads a chunk between a low and a high watermark and drops the chunk rows whose keys the binlog changed
between them. Here the window is narrower and its lower end exact: the chunk is read in a transaction started
``WITH CONSISTENT SNAPSHOT``, and MariaDB reports the binlog position ``P`` that snapshot corresponds to (every
transaction before ``P`` visible, none after it; see :mod:`canal.snapshot.reader`). The chunk's rows are the table's
rows *at* ``P``. The parser hands them off at the first transaction boundary ``E`` at or after ``P`` it reaches:

* if the parser was still before ``P`` when the chunk arrived, ``E`` is the first boundary at or after ``P`` and no
  row of the table changed in between: every row is emitted;
* if it was already past ``P``, the transactions in ``[P, E)`` were handed off before the chunk: a row whose key
  one of them touched (its before or after image: an update may move a key) is stale or deleted, and the binlog
  already delivered what replaces it, so the row is dropped. The others did not change between ``P`` and ``E``:
  emitted at ``E``, they are exact there.

The window opens (the parser starts recording the table's keys) *before* the chunk's transaction starts, so the
parser's position at the opening is at or before ``P`` and every transaction after ``P`` is recorded.

A partial row image (``binlog_row_image`` MINIMAL / NOBLOB) is no whole state: an UPDATE that logs the columns it
changed, found by its key, tells nothing of the others. A copy that does not hold the row yet (its table is being
read) cannot apply it, so such an update does not overtake the chunk's row: the row is kept, with the columns the
update carries written over it, in order (:meth:`ChunkWindow.observe_partial`) -- the row as it is at the boundary
the chunk joins at. A change with a whole image (an INSERT, a DELETE, an UPDATE logged whole or moving its key) still
overtakes it.

Why a read-only low watermark alone would not do (and where this is exact): on MySQL a transaction is written to the
binlog before InnoDB makes it visible, so a position read before and after a ``SELECT`` brackets the read but does
not say which of the transactions in between it saw; DBLog therefore needs both watermarks and drops every key
changed between them. MariaDB's snapshot position names exactly which transactions the read saw, so nothing that
was not changed after the read is dropped, and nothing stale is kept.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

from canal.position import EntryPosition
from canal.protocol import ABSENT

__all__ = ["ChunkWindow", "entry_position_key", "position_key"]


def position_key(journal: str, offset: int) -> tuple[int, int]:
    """A comparable binlog position: the file's number, then the offset (names like ``mysql-bin.000012``)."""
    suffix = journal.rsplit(".", 1)[-1]
    return (int(suffix) if suffix.isdigit() else 0, offset)


def entry_position_key(position: EntryPosition) -> tuple[int, int]:
    """:func:`position_key` of a position that names its file and offset."""
    assert position.journal_name is not None and position.position is not None
    return position_key(position.journal_name, position.position)


class ChunkWindow:
    """The keys of one table changed in the binlog since the window opened, with the position of their last change.

    The parser thread calls :meth:`observe` for every row of the table it hands off; the snapshot reader opens the
    window before its read and calls :meth:`reconcile` with the chunk's rows and snapshot position when the parser
    reaches it. Thread-safe.
    """

    def __init__(self, schema: str, table: str, key_indexes: Sequence[int]) -> None:
        self.schema = schema
        self.table = table
        self.key_indexes = tuple(key_indexes)
        self._changed: dict[Hashable, tuple[int, int]] = {}
        # key -> the partial after images of its updates that kept it, with their positions, in order
        self._partial: dict[Hashable, list[tuple[tuple[int, int], Sequence[Any]]]] = {}
        self._lock = threading.Lock()

    def key(self, row: Sequence[Any]) -> Hashable:
        indexes = self.key_indexes
        if not indexes:  # a table without a key: the whole row is its identity
            return tuple(_hashable(v) for v in row)
        return tuple(_hashable(row[i]) for i in indexes)

    def observe(self, images: Iterable[Sequence[Any] | None], at: tuple[int, int]) -> None:
        """The images (before and after) of one handed-off row change at binlog position ``at``."""
        with self._lock:
            changed = self._changed
            for image in images:
                if image is not None:
                    changed[self.key(image)] = at

    def observe_partial(self, before: Sequence[Any], after: Sequence[Any], at: tuple[int, int]) -> None:
        """An UPDATE at ``at`` whose after image is partial and keeps the key its before image holds (a table with a
        key): the columns it carries are written over the chunk's row at :meth:`reconcile`."""
        with self._lock:
            self._partial.setdefault(self.key(before), []).append((at, after))

    def reconcile(self, rows: Sequence[Sequence[Any]], snapshot_at: EntryPosition) -> list[Sequence[Any]]:
        """The rows exact at the parser's current boundary: those whose key no change at or after ``snapshot_at``
        touched, and those only partial updates after it touched, with the columns those carry written over."""
        lower = entry_position_key(snapshot_at)
        with self._lock:
            changed, partial = self._changed, self._partial
            if not changed and not partial:
                return list(rows)
            key = self.key
            kept: list[Sequence[Any]] = []
            for row in rows:
                k = key(row)
                if changed.get(k, (-1, -1)) >= lower:
                    continue
                for at, after in partial.get(k, ()):
                    if at >= lower:
                        row = tuple(c if a is ABSENT else a for c, a in zip(row, after, strict=True))
                kept.append(row)
            return kept


def _hashable(value: Any) -> Hashable:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, bytearray):
        return bytes(value)
    return value  # type: ignore[no-any-return]
