"""A Spark DataFrame's rows as one pyarrow Table, recognised by its methods (no pyspark import here)."""

from __future__ import annotations

from typing import Any


def to_arrow(df: Any) -> Any:
    """``df.toArrow()``, also for a DataFrame with VARIANT columns holding NULLs (the ``canal`` source's change rows
    with ``images=variant``): PySpark 4.3's ``toArrow`` casts its result to a schema whose variant fields are
    non-nullable, which pyarrow refuses wherever a NULL variant's fields are null (apache/arrow#37072), so a
    classic DataFrame with variants is collected as the record batches Spark sends, uncast."""
    import pyarrow as pa

    collect = getattr(df, "_collect_as_arrow", None)
    # (a Connect DataFrame has no such method: its schema is not asked for, a round trip to the server)
    if collect is None or not any(field.dataType.typeName() == "variant" for field in df.schema.fields):
        return df.toArrow()
    batches = collect(empty_list_if_zero_records=False)
    return pa.Table.from_batches(batches)
