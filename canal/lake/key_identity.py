"""One identity for a primary key's cells wherever the mirror decides "same key": a FLOAT / DOUBLE cell's -0.0 is the
key 0.0.

MySQL and MariaDB compare keys by value, so -0.0 and 0.0 are one key (a table cannot hold both; an UPDATE from one to
the other changes the row in place) and Delta's MERGE condition ``t.k = s.k`` matches them too; but their canal
text differs (``-0.0``) and Arrow's hashing kernels (``group_by``, ``join``, ``is_in``, ``dictionary_encode``) keep
them apart. Grouping by either would leave two "last changes" of one key (a MERGE then fails with "matched a target
row with multiple source rows", a read shows the row twice) or call an UPDATE a key move onto itself. So the
grouping reads keys through this module: ``-0.0 + 0.0`` is ``0.0`` under IEEE rounding, NaN and every other value
stay as they are. Images keep their exact values: only the identity is canonical.

MariaDB 10.11 stores a FLOAT / DOUBLE -0.0 as 0.0, but a FLOAT that underflows (``-1e-50``) as -0.0, which its
binlog holds and ``SELECT`` prints as 0: the decoder gives 0.0 there (:mod:`canal.sql.values`), so -0.0 reaches the
mirror only from a source that keeps it (MySQL, which prints it ``-0``) or a hand-made binlog.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from canal.lake.own_names import own_name
from canal.lake.types import base_type

FLOAT_TYPES = frozenset({"float", "double"})
"""MySQL base types (:func:`~canal.lake.types.base_type`, REAL and DOUBLE PRECISION read as double) whose -0.0 is
the key 0.0."""


def identity_name(n: int) -> str:
    """The temporary column :func:`with_identity` adds for the ``n``-th key column: a name no source column has
    (:mod:`canal.lake.own_names`)."""
    return own_name(f"key_{n}")


def is_float_type(mysql_type: str) -> bool:
    return base_type(mysql_type) in FLOAT_TYPES


def key_value(value: Any) -> Any:
    """A key cell as its identity: a float's -0.0 as 0.0, anything else as it is."""
    return value + 0.0 if type(value) is float else value


def key_text(text: str | None) -> str | None:
    """The canal text of a FLOAT / DOUBLE key cell as its identity: ``-0.0`` spelt as ``0.0`` is, any other text
    (and null) as it is."""
    if text is None or not text.startswith("-"):
        return text
    try:
        zero = float(text) == 0.0
    except ValueError:
        return text
    return text[1:] if zero else text


def identity_array(array: Any) -> Any:
    """A key column (Arrow) as its identity: a floating-point column with -0.0 as 0.0, any other as it is."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not pa.types.is_floating(array.type):
        return array
    return pc.add(array, pa.scalar(0.0, array.type))


def with_identity(table: Any, keys: Sequence[str]) -> tuple[Any, list[str]]:
    """``table`` and the names of its key columns to group or join on: the keys themselves when none is a
    floating-point column, else ``table`` with their identities added as temporary columns (:func:`identity_name`;
    drop them after) and those columns' names."""
    import pyarrow as pa

    if not any(pa.types.is_floating(table.schema.field(k).type) for k in keys):
        return table, list(keys)
    names = [identity_name(n) for n in range(len(keys))]
    for name, key in zip(names, keys, strict=True):
        table = table.append_column(name, identity_array(table.column(key)))
    return table, names


def drop_identity(table: Any) -> Any:
    """``table`` without the columns :func:`with_identity` added."""
    added = {identity_name(n) for n in range(len(table.column_names))}
    extra = [name for name in table.column_names if name in added]
    return table.drop_columns(extra) if extra else table
