"""A batch handed to the mirror -- a Spark DataFrame (recognised by its methods: no pyspark import here), record
batches or a pyarrow Table -- as one pyarrow Table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from canal.lake.forms.packed import is_packed
from canal.lake.planning.plan import mirror_columns


def to_arrow(df: Any) -> Any:
    """``df.toArrow()``, also for a DataFrame with VARIANT columns holding NULLs (the ``canal`` source's change rows
    with ``images=variant``): PySpark 4.2's ``toArrow`` casts its result to a schema whose variant fields are
    non-nullable, which pyarrow refuses wherever a NULL variant's fields are null (apache/arrow#37072), so a
    classic DataFrame with variants is collected as the record batches Spark sends, uncast."""
    import pyarrow as pa

    collect = getattr(df, "_collect_as_arrow", None)
    # (a Connect DataFrame has no such method: its schema is not asked for, a round trip to the server)
    if collect is None or not any(field.dataType.typeName() == "variant" for field in df.schema.fields):
        return df.toArrow()
    batches = collect(empty_list_if_zero_records=False)
    return pa.Table.from_batches(batches)


def batch_table(changes: Any) -> Any:
    """A batch as one pyarrow Table (None: an empty list of record batches). A Spark DataFrame applied on the driver
    is recognised by its ``toArrow`` (no pyspark import here): only the columns the mirror reads cross over."""
    import pyarrow as pa

    if isinstance(changes, pa.Table):
        return changes
    if isinstance(changes, pa.RecordBatch):
        return pa.Table.from_batches([changes])
    if isinstance(changes, Sequence) and all(isinstance(b, pa.RecordBatch) for b in changes):
        return pa.Table.from_batches(list(changes)) if changes else None
    if hasattr(changes, "toArrow"):  # a Spark DataFrame: only the columns the mirror reads cross over
        return to_arrow(changes if is_packed(changes.columns) else changes.select(*mirror_columns(changes.columns)))
    raise TypeError(f"cannot mirror {type(changes).__name__}: pass a pyarrow Table/RecordBatch or a DataFrame")
