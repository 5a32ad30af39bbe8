"""Each key's last change in change-log rows (:mod:`canal.lake.store.changelog`): what a fold merges into the base
and a read overlays on it. Rows are ordered by (``BATCH``, ``SEQ``); rows with equal batch, seq and key are copies of
one change (a replayed or duplicated append); keys are grouped by their identity (:mod:`canal.lake.key_identity`:
-0.0 and 0.0 are one key).

A log is read a file at a time (:func:`reduced`): each file is reduced alone and joined to the changes so far by its
keys, so a row is copied when a later file's change supersedes another of its file's, not at every file.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from canal.lake.key_identity import identity_array, with_identity
from canal.lake.own_names import BATCH, SEQ, own_name

__all__ = ["latest", "reduced"]


def latest(rows: Any, keys: Sequence[str]) -> Any:
    """Each key's last change, by (batch, seq) (rows with equal batch, seq and key are copies of one change: a
    replayed or duplicated append); keys are grouped by their identity (:mod:`canal.lake.key_identity`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if rows.num_rows <= 1:
        return rows
    # the change order as indices: only the key columns follow it, and the rows (whole images) are taken once, at last
    order = pc.sort_indices(rows.select([BATCH, SEQ]), sort_keys=[(BATCH, "ascending"), (SEQ, "ascending")])
    index = _ROW
    numbered = pa.table(
        {
            **{f"k{n}": identity_array(rows.column(k).take(order)) for n, k in enumerate(keys)},
            index: pa.array(range(rows.num_rows), pa.int64()),
        }
    )
    last = (
        numbered.group_by([f"k{n}" for n in range(len(keys))], use_threads=False)
        .aggregate([(index, "max")])
        .column(f"{index}_max")
    )
    return rows.take(order.take(last.take(pc.sort_indices(last))))  # in change order


_ROW = own_name("row")


def reduced(pieces: Iterable[Any], keys: Sequence[str]) -> Any:
    """:func:`latest` of the rows of ``pieces`` (tables of change-log rows) together, in change order, taken a piece at
    a time: each piece reduced alone, then joined to the changes so far by its keys (:func:`_merged`), so a row is
    copied when a later piece's change supersedes another of its piece's, not at every piece; None without pieces."""
    import pyarrow as pa
    import pyarrow.compute as pc

    changes = None
    for piece in pieces:
        rows = latest(piece, keys)
        changes = rows if changes is None else _merged(changes, rows, keys)
    if changes is not None and changes.num_rows > 1:  # pieces of a log come in its add actions' order, not its commits'
        order = pc.sort_indices(changes.select([BATCH, SEQ]), sort_keys=[(BATCH, "ascending"), (SEQ, "ascending")])
        if not pc.all(pc.equal(order, pa.array(range(changes.num_rows), pa.uint64()))).as_py():
            changes = changes.take(order)
    return changes


def _merged(changes: Any, rows: Any, keys: Sequence[str]) -> Any:
    """The last change per key of ``changes`` and ``rows``, each holding a key at most once: their rows but those
    that a change of the other to the same key supersedes (the later by batch and seq; of two copies of one change,
    the one in ``changes``), found by joining the two on their keys' identities and change order alone. Neither is
    copied when no key is in both."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if not rows.num_rows or not changes.num_rows:
        return rows if not changes.num_rows else changes
    old, on = with_identity(changes.select([*keys, BATCH, SEQ]), keys)
    new, _ = with_identity(rows.select([*keys, BATCH, SEQ]), keys)
    old = old.select([*on, BATCH, SEQ]).append_column(_OLD_ROW, pa.array(np.arange(old.num_rows)))
    new = new.select(on).append_column(_NEW_ROW, pa.array(np.arange(new.num_rows)))
    new = new.append_column(_NEW_BATCH, rows.column(BATCH)).append_column(_NEW_SEQ, rows.column(SEQ))
    both = old.join(new, keys=on, join_type="inner", use_threads=False)
    if not both.num_rows:
        return pa.concat_tables([changes, rows])
    later = pc.or_(
        pc.greater(both.column(_NEW_BATCH), both.column(BATCH)),
        pc.and_(
            pc.equal(both.column(_NEW_BATCH), both.column(BATCH)), pc.greater(both.column(_NEW_SEQ), both.column(SEQ))
        ),
    )
    return pa.concat_tables(
        [
            _without(changes, both.column(_OLD_ROW).filter(later)),
            _without(rows, both.column(_NEW_ROW).filter(pc.invert(later))),
        ]
    )


def _without(table: Any, rows: Any) -> Any:
    """``table`` without the rows at the positions ``rows`` (an Arrow array): ``table`` itself when it names none."""
    import numpy as np

    if not len(rows):
        return table
    keep = np.ones(table.num_rows, dtype=bool)
    keep[rows.to_numpy(zero_copy_only=False)] = False
    return table.filter(keep)


_OLD_ROW, _NEW_ROW, _NEW_BATCH, _NEW_SEQ = (own_name(n) for n in ("old_row", "new_row", "new_batch", "new_seq"))
