"""A column's existing values under a narrower declared type, a column at once: the fast path of two conversions
:mod:`canal.lake.ddl.conversions` models.

``ALTER TABLE ... MODIFY`` to a narrower type rewrites every row without logging one. Under a strict ``sql_mode`` a
value that does not fit fails the ALTER (so none is logged); under a non-strict one (``''``) the server stores the
nearest value that fits: an integer clipped to the type's range (INT -> TINYINT: 1000 -> 127; INT -> INT UNSIGNED:
-5 -> 0), a string cut to the declared number of characters (VARCHAR(10) -> VARCHAR(3): 'abcdefgh' -> 'abc'). A
logged ALTER therefore always leaves the values :func:`fit_declared` gives, whatever the session's mode.
"""

from __future__ import annotations

from typing import Any

from canal.sql import read_column_type
from canal.sql.types import INTEGER_TYPES

_CHARACTER_TYPES = ("char", "varchar")


def integer_range(mysql_type: str) -> tuple[int, int] | None:
    """The values an integer column type holds; None for other types."""
    column_type = read_column_type(mysql_type, strict=False)
    size = INTEGER_TYPES.get(column_type.base)
    if size is None:
        return None
    bits = 8 * size
    return (0, 2**bits - 1) if column_type.unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def character_length(mysql_type: str) -> int | None:
    """The declared length (characters) of a CHAR / VARCHAR column type; None for other types."""
    column_type = read_column_type(mysql_type, strict=False)
    if column_type.base in _CHARACTER_TYPES:
        return column_type.params[0] if column_type.params else 1
    return None


def fit_declared(column: Any, mysql_type: str | None) -> Any:
    """``column`` (the mirror's Arrow values) as the server leaves them under ``mysql_type`` (None: not declared):
    the same object when every value fits."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if mysql_type is None or len(column) == 0:
        return column
    if pa.types.is_integer(column.type):
        bounds = integer_range(mysql_type)
        if bounds is None:
            return column
        low, high = (pa.scalar(b, column.type) for b in _within(bounds, column.type))
        too_low = pc.fill_null(pc.less(column, low), False)
        too_high = pc.fill_null(pc.greater(column, high), False)
        if not (pc.any(too_low).as_py() or pc.any(too_high).as_py()):
            return column
        return pc.if_else(too_low, low, pc.if_else(too_high, high, column))
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        length = character_length(mysql_type)
        if length is None:
            return column
        too_long = pc.fill_null(pc.greater(pc.utf8_length(column), length), False)
        if not pc.any(too_long).as_py():
            return column
        return pc.utf8_slice_codeunits(column, 0, length)
    return column


def _within(bounds: tuple[int, int], arrow_type: Any) -> tuple[int, int]:
    """The bounds, kept inside what ``arrow_type`` holds (a mirror column holds no value beyond it anyway)."""
    import numpy as np

    info = np.iinfo(arrow_type.to_pandas_dtype())
    return max(bounds[0], int(info.min)), min(bounds[1], int(info.max))
