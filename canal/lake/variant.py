"""Typed row images (Arrow struct arrays, :mod:`canal.lake.typed_layout`) to Spark 4's VARIANT binary encoding and
back, column by column with numpy and pyarrow kernels -- no Python loop over rows or cells.

In Arrow a VARIANT is ``struct<value: binary not null, metadata: binary not null>`` (:func:`variant_arrow_type`,
what pyspark's ``to_arrow_type(VariantType())`` gives). :func:`encode` writes each image as a variant object holding
every column of the image; a SQL NULL cell is the variant null (one ``0x00`` byte) with its field present, and a
null image (an INSERT's before) a null struct row. The metadata is the dictionary of the column names, sorted (so
the object's field ids are 0, 1, ... in field order) and the same bytes on every row.

Encodings chosen -- the smallest the spec offers that stay column-at-a-time kernels, as a change log spools every
image:

* object header: ``num_elements`` one byte up to 255 fields (else four), field ids one byte up to 256 fields (else
  two), field offsets of the fewest bytes (1..4) that hold the largest row of the batch (one size per batch, not per
  row: the offsets are one numpy matrix);
* int64: int8 / int16 / int32 / int64 by each value's range (1 + 1..8 bytes);
* decimal128(p, s): decimal4 / decimal8 / decimal16 by each value's unscaled range, never below the size whose
  maximum precision holds the column's scale (Spark rejects a decimal4 of scale > 9); the scale byte is the
  column's scale, so 1.50 of a DECIMAL(12,2) reads back as 1.50;
* float64: double (the 8 bytes as they are: -0.0 and NaN payloads survive); date32: date (int32 days);
  timestamp[us]: timestamp_ntz (int64 microseconds, the UTC wall time the mirror stores);
* string: short string (header holding the length) below 64 bytes, else long string (u32 length + bytes);
  binary: binary (u32 length + bytes).

:func:`decode` is the exact inverse, and reads any variant object of the image's fields whatever its header sizes,
field order or metadata (Spark's own re-encodings included; rows are grouped by distinct metadata, not walked one
by one). Anything else -- another field set, a value whose variant type does not fit its column (a string where
int64 is expected, a decimal of another scale or beyond the column's precision, invalid UTF-8), a malformed
variant -- is a :class:`VariantError` naming the field and the row: never a NULL or a coerced value.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from canal.lake.types import MirrorTypeError


class VariantError(MirrorTypeError):
    """A variant does not decode exactly to its image's type (another field set, a value of another type, a
    malformed variant), or an image holds a type the codec does not write. The message names the field and row."""


VARIANT_METADATA_KEY: Final = b"variant"

# basic types (the low two bits of a value's header byte) and primitive type ids (the high six)
_PRIMITIVE: Final = 0
_SHORT_STR: Final = 1
_OBJECT: Final = 2
_NULL: Final = 0x00
_INT_HEADS: Final = {1: 3 << 2, 2: 4 << 2, 4: 5 << 2, 8: 6 << 2}
_DOUBLE: Final = 7 << 2
_DECIMAL_HEADS: Final = {4: 8 << 2, 8: 9 << 2, 16: 10 << 2}
_DECIMAL_MAX_DIGITS: Final = {4: 9, 8: 18, 16: 38}
_DATE: Final = 11 << 2
_TIMESTAMP_NTZ: Final = 13 << 2
_BINARY: Final = 15 << 2
_LONG_STR: Final = 16 << 2
_SHORT_STR_MAX: Final = 63
_METADATA_VERSION: Final = 1
_SORTED_STRINGS: Final = 0x10

_HEAD_NAMES: Final = {
    _NULL: "null",
    4: "true",
    8: "false",
    **{head: f"int{8 * size}" for size, head in _INT_HEADS.items()},
    _DOUBLE: "double",
    **{head: f"decimal{size}" for size, head in _DECIMAL_HEADS.items()},
    _DATE: "date",
    12 << 2: "timestamp",
    _TIMESTAMP_NTZ: "timestamp_ntz",
    14 << 2: "float",
    _BINARY: "binary",
    _LONG_STR: "string",
}


def variant_arrow_type() -> pa.StructType:
    """The Arrow type of a Spark VARIANT column: ``struct<value: binary not null, metadata: binary not null>``, the
    metadata field marked ``{b"variant": b"true"}`` (as pyspark's ``to_arrow_type(VariantType())``)."""
    return pa.struct(
        [
            pa.field("value", pa.binary(), nullable=False),
            pa.field("metadata", pa.binary(), nullable=False, metadata={VARIANT_METADATA_KEY: b"true"}),
        ]
    )


def _sort_key(name: str) -> bytes:
    # Spark orders field names as Java strings (UTF-16 code units); UTF-16-BE bytes compare the same way
    return name.encode("utf-16-be", "surrogatepass")


def _uint_size(largest: int) -> int:
    """The fewest bytes (1..4) of an unsigned little-endian integer holding ``largest``."""
    for size in (1, 2, 3, 4):
        if largest < 1 << (8 * size):
            return size
    raise VariantError(f"a variant offset of {largest} bytes exceeds 4 GiB")


def _le(value: int, size: int) -> bytes:
    return value.to_bytes(size, "little")


def _metadata(names: list[str]) -> bytes:
    """The metadata of a dictionary of ``names`` (already sorted): header, size, offsets, the UTF-8 strings."""
    strings = [n.encode("utf-8") for n in names]
    ends = np.cumsum([0, *map(len, strings)]).tolist()
    size = _uint_size(max(ends[-1], len(names)))
    header = _METADATA_VERSION | _SORTED_STRINGS | (size - 1) << 6
    return bytes([header]) + _le(len(names), size) + b"".join(_le(e, size) for e in ends) + b"".join(strings)


# ---------------------------------------------------------------------------------------------------- building


def _bitmap(valid: np.ndarray[Any, Any]) -> pa.Buffer | None:
    if valid.all():
        return None
    return pa.py_buffer(np.packbits(valid, bitorder="little"))


def _binary_from(
    lengths: np.ndarray[Any, Any], data: np.ndarray[Any, Any], valid: np.ndarray[Any, Any] | None = None
) -> pa.Array:
    """A binary array of consecutive values of ``lengths`` bytes in ``data``."""
    offsets = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] > np.iinfo(np.int32).max:
        raise VariantError(f"variants of {offsets[-1]} bytes exceed the 2 GiB of an Arrow binary array")
    validity = None if valid is None else _bitmap(valid)
    buffers = [validity, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(np.ascontiguousarray(data, np.uint8))]
    return pa.Array.from_buffers(pa.binary(), len(lengths), buffers)


def _packed(heads: np.ndarray[Any, Any], payload: np.ndarray[Any, Any], sizes: np.ndarray[Any, Any]) -> pa.Array:
    """Cells of one header byte each followed by the first ``sizes[i]`` bytes of row ``i`` of ``payload``."""
    full = np.concatenate([heads.astype(np.uint8)[:, None], payload.astype(np.uint8, copy=False)], axis=1)
    keep = np.arange(full.shape[1]) <= sizes[:, None]
    return _binary_from(sizes + 1, full[keep])  # a row-major boolean selection keeps the cells' order


def _bytes_of(values: np.ndarray[Any, Any], width: int) -> np.ndarray[Any, Any]:
    return np.ascontiguousarray(values).view(np.uint8).reshape(-1, width)


def _int_cells(column: pa.Array) -> pa.Array:
    valid = np.asarray(column.is_valid())
    values = np.asarray(column.fill_null(0), np.int64)
    sizes = np.full(len(values), 8, np.int64)
    for size in (4, 2, 1):
        bound = 1 << (8 * size - 1)
        sizes[(values >= -bound) & (values < bound)] = size
    heads = np.select([sizes == s for s in (1, 2, 4)], [_INT_HEADS[s] for s in (1, 2, 4)], _INT_HEADS[8])
    return _packed(np.where(valid, heads, _NULL), _bytes_of(values.astype("<i8"), 8), np.where(valid, sizes, 0))


def _fixed_cells(column: pa.Array, head: int, dtype: str, width: int) -> pa.Array:
    valid = np.asarray(column.is_valid())
    raw = np.frombuffer(column.buffers()[1], dtype)[column.offset : column.offset + len(column)]
    return _packed(np.where(valid, head, _NULL), _bytes_of(raw.astype(dtype), width), np.where(valid, width, 0))


def _decimal_cells(column: pa.Array) -> pa.Array:
    scale = column.type.scale
    valid = np.asarray(column.is_valid())
    raw = np.frombuffer(column.buffers()[1], "<i8")[2 * column.offset : 2 * (column.offset + len(column))]
    low, high = raw[0::2], raw[1::2]
    fits64 = high == (low >> 63)
    sizes = np.full(len(column), 16, np.int64)
    for size in (8, 4):  # the smallest size whose range holds the value and whose precision holds the scale
        digits = _DECIMAL_MAX_DIGITS[size]
        if scale <= digits:
            bound = 10**digits
            sizes[fits64 & (low > -bound) & (low < bound)] = size
    heads = np.select([sizes == 4, sizes == 8], [_DECIMAL_HEADS[4], _DECIMAL_HEADS[8]], _DECIMAL_HEADS[16])
    payload = np.concatenate([np.full((len(column), 1), scale, np.uint8), _bytes_of(raw, 16)], axis=1)
    return _packed(np.where(valid, heads, _NULL), payload, np.where(valid, sizes + 1, 0))


def _length_cells(column: pa.Array, short_strings: bool) -> pa.Array:
    """Strings or binaries: a header (and a u32 length unless a short string) joined with the bytes."""
    valid = np.asarray(column.is_valid())
    data = column.cast(pa.binary()) if pa.types.is_string(column.type) else column
    lengths = np.asarray(pc.binary_length(data).fill_null(0), np.int64)
    if short_strings:
        short = lengths <= _SHORT_STR_MAX
        heads = np.where(short, (lengths << 2) | _SHORT_STR, _LONG_STR)
        sizes = np.where(short | ~valid, 0, 4)
    else:
        heads = np.full(len(column), _BINARY)
        sizes = np.where(valid, 4, 0)
    prefix = _packed(np.where(valid, heads, _NULL), _bytes_of(lengths.astype("<u4"), 4), sizes)
    return pc.binary_join_element_wise(prefix, data.fill_null(b""), b"")


def _cells(column: pa.Array, name: str) -> pa.Array:
    kind = column.type
    if pa.types.is_int64(kind):
        return _int_cells(column)
    if pa.types.is_float64(kind):
        return _fixed_cells(column, _DOUBLE, "<u8", 8)
    if pa.types.is_decimal128(kind):
        return _decimal_cells(column)
    if pa.types.is_date32(kind):
        return _fixed_cells(column, _DATE, "<i4", 4)
    if pa.types.is_timestamp(kind) and kind.unit == "us" and kind.tz is None:
        return _fixed_cells(column, _TIMESTAMP_NTZ, "<i8", 8)
    if pa.types.is_string(kind):
        return _length_cells(column, short_strings=True)
    if pa.types.is_binary(kind):
        return _length_cells(column, short_strings=False)
    raise VariantError(f"field {name!r}: type {kind} has no variant encoding here")


def encode(images: pa.StructArray) -> pa.StructArray:
    """Typed images as variants (:func:`variant_arrow_type`): each image an object of all its fields, a null cell
    the variant null, a null image a null variant; :class:`VariantError` for a field of a type not encoded."""
    rows = len(images)
    names = [field.name for field in images.type]
    order = sorted(range(len(names)), key=lambda i: _sort_key(names[i]))
    metadata = _metadata([names[i] for i in order])
    columns = images.flatten()  # the parent's nulls merged in: a null image is an object of variant nulls
    cells = [_cells(columns[i], names[i]) for i in order]
    count = len(cells)
    lengths = np.zeros((rows, count + 1), np.int64)
    for j, cell in enumerate(cells):
        lengths[:, j + 1] = np.asarray(pc.binary_length(cell), np.int64)
    ends = np.cumsum(lengths, axis=1)  # the field offsets: each field's start, then the data's size
    offset_size = _uint_size(int(ends[:, -1].max(initial=0)))
    large = count > 0xFF
    header = bytes([_OBJECT | (offset_size - 1 | (_uint_size(max(count - 1, 0)) - 1) << 2 | large << 4) << 2])
    prefix = (
        header + _le(count, 4 if large else 1) + b"".join(_le(i, _uint_size(max(count - 1, 0))) for i in range(count))
    )
    offset_bytes = _bytes_of(ends.astype("<u4"), 4 * (count + 1)).reshape(rows, count + 1, 4)[:, :, :offset_size]
    head = np.concatenate(
        [np.broadcast_to(np.frombuffer(prefix, np.uint8), (rows, len(prefix))), offset_bytes.reshape(rows, -1)], axis=1
    )
    width = head.shape[1]
    heads = _binary_from(np.full(rows, width, np.int64), head.reshape(-1))
    value = pc.binary_join_element_wise(heads, *cells, b"") if cells else heads
    metadatas = _binary_from(np.full(rows, len(metadata), np.int64), np.tile(np.frombuffer(metadata, np.uint8), rows))
    mask = None if images.null_count == 0 else pc.invert(images.is_valid())
    return pa.StructArray.from_arrays([value, metadatas], fields=list(variant_arrow_type()), mask=mask)
