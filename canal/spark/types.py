"""MySQL column types to Arrow / Spark types, and canal text back to typed Arrow arrays."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from canal.sql import read_column_type

_INTS = ("tinyint", "smallint", "mediumint", "int", "integer", "bigint")
_BINARY = ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob")


def base_type(mysql_type: str) -> str:
    """The lower-case type name of a column type text (synonyms resolved by :mod:`canal.sql`: integer -> int)."""
    return read_column_type(mysql_type, strict=False).base


def _decimal_digits(mysql_type: str) -> tuple[int, int]:
    """DECIMAL precision and scale, with MySQL's defaults (10, 0)."""
    column_type = read_column_type(mysql_type, strict=False)
    return column_type.precision or 10, column_type.scale or 0


def arrow_type(mysql_type: str) -> Any:
    """The Arrow type a mirror stores a MySQL column type as.

    Integers are int64 (BIGINT UNSIGNED decimal(20,0)), DECIMAL(p,s) decimal128(p,s), FLOAT/DOUBLE float64,
    DATE date32, DATETIME/TIMESTAMP timestamp[us] (naive; TIMESTAMP in UTC), binary strings binary, YEAR/BIT int64;
    everything else (text, ENUM, SET, JSON, TIME, GEOMETRY as text) string.
    """
    import pyarrow as pa

    text = mysql_type.strip().lower()
    base = base_type(text)
    if base in _INTS:
        if base == "bigint" and "unsigned" in text:
            return pa.decimal128(20, 0)
        return pa.int64()
    if base in ("decimal", "numeric", "dec", "fixed"):
        precision, scale = _decimal_digits(text)
        if precision > 38:
            return pa.string()
        return pa.decimal128(precision, scale)
    if base in ("float", "double", "real"):
        return pa.float64()
    if base == "date":
        return pa.date32()
    if base in ("datetime", "timestamp"):
        return pa.timestamp("us")
    if base in ("year", "bit", "bool", "boolean"):
        return pa.int64()
    if base in _BINARY:
        return pa.binary()
    return pa.string()


def typed_array(texts: Sequence[str | None], target: Any) -> Any:
    """canal text values as an Arrow array of ``target`` type; values that do not parse (zero dates) become null."""
    import pyarrow as pa

    if pa.types.is_binary(target):
        return pa.array([None if t is None else t.encode("latin-1") for t in texts], type=target)
    return typed_strings(pa.array(texts, type=pa.string()), target)


def typed_strings(strings: Any, target: Any) -> Any:
    """:func:`typed_array` for canal text already in an Arrow string array (or chunked array), without a trip
    through Python objects: same values, same nulls for text that does not parse, binary as latin-1 bytes."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_binary(target):
        # ASCII text is its own latin-1 encoding, so the UTF-8 bytes can be reinterpreted in place; other text
        # takes the per-value path, which also raises like typed_array for characters beyond latin-1
        if strings.null_count == len(strings) or pc.all(pc.string_is_ascii(strings)).as_py():
            return strings.cast(target)
        texts: list[str | None] = strings.to_pylist()
        return typed_array(texts, target)
    if pa.types.is_string(target):
        return strings
    try:
        return strings.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        if isinstance(strings, pa.ChunkedArray):
            strings = strings.combine_chunks()
        return _cast_or_null(strings, target)


_SMALL = 32  # below this many values a failed cast is retried value by value instead of by halves


def _cast_or_null(strings: Any, target: Any) -> Any:
    """Cast, nulling exactly the values whose own cast fails. Casts are value by value, so casting halves until
    they succeed gives the same values as casting each value alone, with a few casts for a few bad values."""
    import pyarrow as pa

    try:
        return strings.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    if len(strings) > _SMALL:
        half = len(strings) // 2
        parts = [_cast_or_null(strings.slice(0, half), target), _cast_or_null(strings.slice(half), target)]
        return pa.concat_arrays(parts)
    out: list[Any] = []
    for i in range(len(strings)):
        try:
            out.append(strings.slice(i, 1).cast(target)[0].as_py())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            out.append(None)
    return pa.array(out, type=target)


def spark_type_sql(mysql_type: str) -> str:
    """The Spark SQL type name for a MySQL column type (same mapping as :func:`arrow_type`)."""
    text = mysql_type.strip().lower()
    base = base_type(text)
    if base in _INTS:
        return "DECIMAL(20,0)" if base == "bigint" and "unsigned" in text else "BIGINT"
    if base in ("decimal", "numeric", "dec", "fixed"):
        precision, scale = _decimal_digits(text)
        return "STRING" if precision > 38 else f"DECIMAL({precision},{scale})"
    if base in ("float", "double", "real"):
        return "DOUBLE"
    if base == "date":
        return "DATE"
    if base in ("datetime", "timestamp"):
        return "TIMESTAMP_NTZ"
    if base in ("year", "bit", "bool", "boolean"):
        return "BIGINT"
    if base in _BINARY:
        return "BINARY"
    return "STRING"
