"""The packed rows of an ``images=packed`` micro-batch, made as the ``canal`` source's reader takes its entries."""

from __future__ import annotations

from typing import Any, Final

from canal.lake.forms.changes import entries_to_batch
from canal.lake.forms.packed import FORM_TYPED, pack, pack_rows, packed_schema, table_layouts, two_layouts
from canal.lake.forms.typed_batch import entries_to_typed
from canal.lake.forms.typed_plan import needs_rows
from canal.protocol import Entry

PACKED_BATCH_BYTES: Final = 128 << 20
"""The most Arrow bytes of typed batches (or change rows) an ``images=packed`` micro-batch takes: what the mirror's
task holds once it has unpacked them (packed, LZ4 keeps about a fifth; 128 MB: 260,000 inserts of the benchmark's
10-column row, or 500,000 of its updates -- a JSON micro-batch of 160,000 inserts held 300 MB). Its entries are acked
as each instance batch is packed, so the instance's store no longer bounds such a micro-batch; this does. Spark's
cost is per micro-batch (over a second of CPU here), so the fewer the better."""

FIRST_BATCH_BYTES: Final = 8 << 20
"""The bytes of the micro-batch a read prepares itself, not prefetched: the first of a query (or after a restart).
Spark's first task of a query starts its Python worker and the mirror's tables, which takes seconds; a small first
micro-batch lets that begin while the reader prefetches the next one, rather than after it filled a whole one."""


class PackedCut:
    """The packed rows of one ``images=packed`` micro-batch (:mod:`canal.lake.forms.packed`): a packed row per instance
    batch taken, packed as it comes, so its entries are not needed again (the reader acks them at once). All the rows
    of a micro-batch are of one form, as the mirror joins them into one batch: typed while every one can be; an
    instance batch that cannot -- it holds XA transactions, foreign keys' actions or values that did not convert, or
    it brings a table's rows in a second layout -- is refused (:meth:`add` returns None) when typed rows are packed
    already, and opens the next micro-batch; one that comes first makes its micro-batch change rows."""

    def __init__(self, most_bytes: int = PACKED_BATCH_BYTES) -> None:
        self.most_bytes = most_bytes
        self.rows: list[Any] = []  # the packed rows
        self.layouts: set[tuple[str, str, str]] = set()  # (schema, table, layout) of the typed rows
        self.as_rows = False
        self.nbytes = 0  # the Arrow bytes of what was packed (PACKED_BATCH_BYTES)

    def add(self, entries: list[Entry], destination: str, batch_no: int, first_index: int) -> int | None:
        """Pack the change rows of ``entries`` (numbered from ``first_index``): how many there are; None, with
        nothing packed, when they cannot join this micro-batch's typed rows."""
        if self.as_rows:
            return self._add_rows(entries_to_batch(entries, destination, batch_no, first_index))
        typed = entries_to_typed(
            entries, destination, batch_no, first_index, collect_errors=True, before_keys_only=True
        )
        if not typed.num_rows:
            return 0
        found = self.layouts | table_layouts(typed)
        if typed.errors or needs_rows(typed) or two_layouts(found):  # form_of, with this micro-batch's layouts
            if self.rows:
                return None
            self.as_rows = True
            return self._add_rows(entries_to_batch(entries, destination, batch_no, first_index))
        self.layouts = found
        self.rows.append(pack(typed, FORM_TYPED))
        self.nbytes += typed.changes.nbytes + sum(images.nbytes for images in typed.images.values())
        count: int = typed.num_rows
        return count

    def _add_rows(self, rows: Any) -> int:
        if rows.num_rows:
            self.rows.append(pack_rows(rows))
            self.nbytes += rows.nbytes
        count: int = rows.num_rows
        return count

    def full(self) -> bool:
        return self.nbytes >= self.most_bytes

    def packed(self) -> Any:
        """The micro-batch's packed rows (a pyarrow Table of :func:`~canal.lake.forms.packed.packed_schema`)."""
        import pyarrow as pa

        return pa.concat_tables(self.rows) if self.rows else packed_schema().empty_table()
