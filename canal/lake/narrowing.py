"""A column's existing values under a narrower declared type, as the server converts them in an ALTER.

``ALTER TABLE ... MODIFY`` to a narrower type rewrites every row without logging one. Under a strict ``sql_mode`` a
value that does not fit fails the ALTER (so none is logged); under a non-strict one (``''``, also set for one
statement by MariaDB's ``SET STATEMENT sql_mode='' FOR ALTER ...``) the server stores the nearest value that fits:
an integer clipped to the type's range (INT -> TINYINT: 1000 -> 127; INT -> INT UNSIGNED: -5 -> 0), a string cut to
the declared number of characters (VARCHAR(10) -> VARCHAR(3): 'abcdefgh' -> 'abc'), VARBINARY bytes cut to the
declared length, and a NULL in a column made NOT NULL its type's implicit default (0, '', the empty ENUM value). A
logged ALTER therefore always leaves the values :func:`converted` gives, whatever the session's mode: the mirror
applies it to every column whose definition a statement declared. What the mirror cannot repeat exactly is a
:class:`~canal.lake.types.MirrorTypeError` naming the column, the batch not written: an ENUM or SET value the new
labels lack, a TEXT or BLOB value longer than the new type holds, a value the new character set cannot hold, a BINARY
value of another length, a NULL made NOT NULL in a temporal or other column. (A DECIMAL value out of the new
precision is one when the column is retyped.)
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Final

from canal.lake.types import MirrorTypeError
from canal.schema import TableColumn, mysql_type_text
from canal.sql import read_column_type
from canal.sql.charsets import charset_named
from canal.sql.types import INTEGER_TYPES, TEXT_TYPES

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


def clipped(column: Any, definition: TableColumn | None) -> Any:
    """``column`` (the mirror's Arrow values, before a retype to the layout's type) clipped to the range of the
    integer type ``definition`` declares, as the server converts them: a BIGINT UNSIGNED (the mirror's
    DECIMAL(20,0)) of 2**64 - 1 made INT UNSIGNED is 4294967295 before it meets INT UNSIGNED's int64, which it would
    not fit. Other columns (and types) as they are; :func:`converted` then applies the rest of the declaration."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if definition is None or len(column) == 0:
        return column
    if pa.types.is_integer(column.type):
        return fit_declared(column, mysql_type_text(definition, True))
    bounds = integer_range(mysql_type_text(definition, True))
    if bounds is None or not pa.types.is_decimal(column.type) or column.type.scale != 0:
        return column
    low, high = (pa.scalar(Decimal(b), column.type) for b in bounds)
    too_low = pc.fill_null(pc.less(column, low), False)
    too_high = pc.fill_null(pc.greater(column, high), False)
    if not (pc.any(too_low).as_py() or pc.any(too_high).as_py()):
        return column
    return pc.if_else(too_low, low, pc.if_else(too_high, high, column))


def _within(bounds: tuple[int, int], arrow_type: Any) -> tuple[int, int]:
    """The bounds, kept inside what ``arrow_type`` holds (a mirror column holds no value beyond it anyway)."""
    import numpy as np

    info = np.iinfo(arrow_type.to_pandas_dtype())
    return max(bounds[0], int(info.min)), min(bounds[1], int(info.max))


def narrows(data: Any, columns: Any, declared: dict[str, TableColumn]) -> bool:
    """Whether a declared definition changes a value of ``data`` (the mirror table) among ``columns`` (``(name,
    source, kind)`` of an evolution), although the columns keep their Arrow types (INT -> TINYINT are both int64
    there); MirrorTypeError for a value the mirror cannot convert exactly (:func:`converted`)."""
    for name, source, _kind in columns:
        if source is not None and source in data.column_names and name in declared:
            column = data.column(source)
            if converted(column, declared[name], f"column {source!r}") is not column:
                return True
    return False


# the bytes the TEXT and BLOB types hold
_BYTE_LIMITS: Final = {
    "tinytext": 255,
    "text": 65535,
    "mediumtext": 16777215,
    "tinyblob": 255,
    "blob": 65535,
    "mediumblob": 16777215,
}
_UNICODE_CODECS: Final = frozenset({"utf-8", "utf-16", "utf-16-be", "utf-16-le", "utf-32", "utf-32-be", "gb18030"})


def converted(column: Any, definition: TableColumn | None, what: str) -> Any:
    """``column`` (the mirror's Arrow values) as the server leaves them when a statement declares ``definition``
    (None: it declared none) -- the same object when every value stays -- or a MirrorTypeError naming ``what``
    where the mirror cannot repeat the server's conversion exactly."""
    if definition is None or len(column) == 0:
        return column
    column = fit_declared(column, mysql_type_text(definition, True))
    column = _within_labels(column, definition, what)
    column = _within_bytes(column, definition, what)
    column = _encodable(column, definition, what)
    return _not_null(column, definition, what)


def _refused(what: str, definition: TableColumn, why: str) -> MirrorTypeError:
    return MirrorTypeError(
        f"{what} becomes {mysql_type_text(definition, True)}{'' if definition.nullable else ' NOT NULL'}: {why}, "
        "which the server converted (a lax sql_mode) in a way the mirror does not repeat exactly; nothing of the "
        "batch was written. Mirror the table anew from a snapshot taken after the ALTER"
    )


def _within_labels(column: Any, definition: TableColumn, what: str) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    if definition.base not in ("enum", "set") or not pa.types.is_string(column.type):
        return column
    values = column if definition.base == "enum" else pc.list_flatten(pc.split_pattern(column, ","))
    values = pc.drop_null(values)
    labels = pa.array(definition.labels, pa.string())
    # the empty set; an ENUM's '' is its error value (index 0: a NULL made NOT NULL, a value no label held under a
    # lax sql_mode), which an ALTER keeps whatever the labels
    known = pc.or_(pc.is_in(values, value_set=labels), pc.equal(values, ""))
    if pc.all(known).as_py() is False:  # (None: no value at all)
        value = values.filter(pc.invert(known))[0].as_py()
        raise _refused(what, definition, f"it holds {value!r}, not among the new labels")
    return column


def _within_bytes(column: Any, definition: TableColumn, what: str) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    base = definition.base
    binary = pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type)
    if base in ("binary", "varbinary") and binary:
        length = definition.params[0] if definition.params else 1
        lengths = pc.binary_length(column)
        if base == "varbinary":
            if not pc.any(pc.fill_null(pc.greater(lengths, length), False)).as_py():
                return column
            return pc.binary_slice(column, 0, length)  # the server keeps the first bytes
        if pc.any(pc.fill_null(pc.not_equal(lengths, length), False)).as_py():
            raise _refused(what, definition, f"it holds values of another length than {length} bytes")
        return column
    limit = _BYTE_LIMITS.get(base)
    if limit is None or not (binary or pa.types.is_string(column.type)):
        return column
    longest = pc.max(pc.binary_length(column)).as_py()  # a string's UTF-8 bytes: at least its bytes in any charset
    if longest is not None and longest > limit // 4 and _longest_stored(column, definition) > limit:
        raise _refused(what, definition, f"it holds values longer than the {limit} bytes the type holds")
    return column


def _longest_stored(column: Any, definition: TableColumn) -> int:
    """The most bytes a value of the column takes in its character set."""
    import pyarrow.compute as pc

    codec = charset_named(definition.charset or "utf8mb4").codec
    if codec is None or codec == "utf-8" or not hasattr(column, "to_pylist"):
        return int(pc.max(pc.binary_length(column)).as_py() or 0)
    return max((len(v.encode(codec, "replace")) for v in column.to_pylist() if v is not None), default=0)


def _encodable(column: Any, definition: TableColumn, what: str) -> Any:
    if definition.base not in TEXT_TYPES and definition.base != "enum":
        return column
    value = unencodable(column, definition.charset or "utf8mb4")
    if value is not None:
        raise _refused(what, definition, f"it holds {value!r}, which {definition.charset} cannot hold")
    return column


def unencodable(column: Any, charset: str) -> str | None:
    """A text value of ``column`` (the mirror's Arrow values) the MySQL character set ``charset`` cannot hold (the
    server stores '?' for its characters under a lax sql_mode); None when there is none."""
    import pyarrow as pa
    import pyarrow.compute as pc

    codec = charset_named(charset).codec
    if not pa.types.is_string(column.type) or codec is None or codec in _UNICODE_CODECS:
        return None
    foreign = pc.invert(pc.fill_null(pc.string_is_ascii(column), True))
    for value in column.filter(foreign).to_pylist():
        try:
            value.encode(codec)
        except UnicodeEncodeError:
            return str(value)
    return None


def _not_null(column: Any, definition: TableColumn, what: str) -> Any:
    import pyarrow as pa

    if definition.nullable or column.null_count == 0:
        return column
    kind = column.type
    base = definition.base
    if base in INTEGER_TYPES or base in ("decimal", "float", "double"):
        if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)):
            raise _refused(what, definition, "it holds NULLs")
        fill = pa.scalar(Decimal(0), kind) if pa.types.is_decimal(kind) else pa.scalar(0, kind)
    elif base in TEXT_TYPES or base in ("enum", "set"):
        if not pa.types.is_string(kind):
            raise _refused(what, definition, "it holds NULLs")
        fill = pa.scalar("", kind)
    elif base == "varbinary" or base in ("tinyblob", "blob", "mediumblob", "longblob"):
        fill = pa.scalar(b"", kind)
    else:  # a zero date, BINARY's zero bytes, ...: the mirror's forms of them differ by setting
        raise _refused(what, definition, "it holds NULLs, which the server made its type's implicit default")
    return column.fill_null(fill)
