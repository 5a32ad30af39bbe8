"""Typed change batches for Spark-side code: the builder and its types live in the Delta mirror's package
(:mod:`canal.lake.forms.typed_batch`, :mod:`canal.lake.forms.typed_layout`), which the mirror consumes without importing
``canal.spark``; this module names them beside :mod:`canal.lake.forms.changes`."""

from __future__ import annotations

from canal.lake.forms.typed_batch import METADATA_COLUMNS, SEQ_BITS, TypedBatch, entries_to_typed, metadata_schema
from canal.lake.forms.typed_layout import CellError, Layout, TypedChangeError, layout_id, layout_of

__all__ = [
    "METADATA_COLUMNS",
    "SEQ_BITS",
    "CellError",
    "Layout",
    "TypedBatch",
    "TypedChangeError",
    "entries_to_typed",
    "layout_id",
    "layout_of",
    "metadata_schema",
]
