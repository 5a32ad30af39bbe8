"""The packed rows of an ``images=packed`` micro-batch, made as the ``canal`` source's reader takes its entries."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from canal.lake.packed import FORM_ROWS, form_of, pack, pack_rows, packed_schema, table_layouts, two_layouts
from canal.lake.typed_batch import entries_to_typed
from canal.protocol import Entry
from canal.spark.changes import entries_to_batch


class PackedCut:
    """The packed rows of one ``images=packed`` micro-batch (:mod:`canal.lake.packed`): a typed batch per instance
    batch taken, packed as it comes. All the rows of a micro-batch are of one form, as the mirror joins them into one
    batch: typed while every one can be, else -- a batch with XA transactions, foreign keys' actions, values that did
    not convert, or a table in two layouts -- every one as change rows, made from the entries kept for that."""

    def __init__(self) -> None:
        self.typed: list[Any] = []  # the packed typed rows, while every one is typed
        self.makers: list[Callable[[], Any]] = []  # per packed row, its change rows, made on demand
        self.layouts: set[tuple[str, str, str]] = set()  # (schema, table, layout) of the typed rows
        self.as_rows = False

    def add(self, entries: list[Entry], destination: str, batch_no: int, first_index: int) -> int:
        """Pack the change rows of ``entries`` (numbered from ``first_index``); how many there are."""
        typed = entries_to_typed(
            entries, destination, batch_no, first_index, collect_errors=True, before_keys_only=True
        )
        if not typed.num_rows:
            return 0
        self.makers.append(functools.partial(entries_to_batch, entries, destination, batch_no, first_index))
        if not self.as_rows:
            self.layouts |= table_layouts(typed)
            self.as_rows = form_of(typed) == FORM_ROWS or two_layouts(self.layouts)
            if self.as_rows:
                self.typed = []
            else:
                self.typed.append(pack(typed))
        rows: int = typed.num_rows
        return rows

    def packed(self) -> Any:
        """The micro-batch's packed rows (a pyarrow Table of :func:`~canal.lake.packed.packed_schema`)."""
        import pyarrow as pa

        found = [pack_rows(make()) for make in self.makers] if self.as_rows else self.typed
        return pa.concat_tables(found) if found else packed_schema().empty_table()
