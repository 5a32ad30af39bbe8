"""Typed row images (Arrow struct arrays, :mod:`canal.lake.forms.typed_layout`) to Spark 4's VARIANT binary encoding and
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

import itertools
import json
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
    if len(set(names)) < len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise VariantError(f"fields {twice} appear twice in the image; a variant object holds each name once")
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
    constant = np.broadcast_to(np.frombuffer(prefix, np.uint8), (rows, len(prefix)))
    head = np.concatenate([constant, offset_bytes.reshape(rows, (count + 1) * offset_size)], axis=1)
    width = head.shape[1]
    heads = _binary_from(np.full(rows, width, np.int64), head.reshape(-1))
    value = pc.binary_join_element_wise(heads, *cells, b"") if cells else heads
    metadatas = _binary_from(np.full(rows, len(metadata), np.int64), np.tile(np.frombuffer(metadata, np.uint8), rows))
    mask = None if images.null_count == 0 else pc.invert(images.is_valid())
    return pa.StructArray.from_arrays([value, metadatas], fields=list(variant_arrow_type()), mask=mask)


# ---------------------------------------------------------------------------------------------------- reading


def _describe(head: int) -> str:
    """What a value's header byte says it is, for messages."""
    basic = head & 3
    if basic == _SHORT_STR:
        return "string"
    if basic == _OBJECT:
        return "object"
    if basic == 3:
        return "array"
    return _HEAD_NAMES.get(head, f"primitive of type id {head >> 2}")


def _read_uint(data: np.ndarray[Any, Any], pos: np.ndarray[Any, Any], size: Any, width: int = 4) -> Any:
    """The little-endian unsigned integers of ``size`` bytes (0..width) at ``pos`` (already bounds-checked), as
    uint64: one fixed-width gather per distinct size (one for the sizes :func:`encode` writes)."""
    sizes = np.broadcast_to(np.asarray(size, np.int64), pos.shape)
    out = np.zeros(pos.shape, np.uint64)
    present = np.flatnonzero(np.bincount(sizes.reshape(-1), minlength=width + 1))
    for count in present[present > 0].tolist():
        padded = 1 << (count - 1).bit_length()  # a numpy integer width: 3 bytes are read as 4 with a zero byte
        chosen = sizes == count
        at = pos if len(present) == 1 else pos[chosen]
        index = np.minimum(at[..., None] + np.arange(count), len(data) - 1)
        taken = np.zeros((*at.shape, padded), np.uint8)
        taken[..., :count] = data[index]
        read = taken.view(f"<u{padded}")[..., 0].astype(np.uint64)
        if len(present) == 1:
            return read
        out[chosen] = read
    return out


def _read_int(data: np.ndarray[Any, Any], pos: np.ndarray[Any, Any], size: np.ndarray[Any, Any]) -> Any:
    """The little-endian signed integers of ``size`` bytes (0..8) at ``pos``, sign-extended to int64."""
    raw = _read_uint(data, pos, size, 8).view(np.int64)
    shift = (64 - 8 * np.maximum(size, 1)).astype(np.int64)
    return np.where(size > 0, (raw << shift) >> shift, 0)


def _read_metadata(metadata: bytes, row: int) -> list[str]:
    """The dictionary of a variant's metadata (per distinct metadata, not per row)."""

    def malformed(why: str) -> VariantError:
        return VariantError(f"variant row {row}: malformed metadata ({why})")

    if not metadata or metadata[0] & 0x0F != _METADATA_VERSION:
        raise malformed("not a version 1 metadata")
    size = (metadata[0] >> 6) + 1
    if len(metadata) < 1 + size:
        raise malformed("truncated")
    count = int.from_bytes(metadata[1 : 1 + size], "little")
    strings = 1 + (count + 2) * size
    if len(metadata) < strings:
        raise malformed("truncated offsets")
    ends = [int.from_bytes(metadata[1 + (i + 1) * size : 1 + (i + 2) * size], "little") for i in range(count + 1)]
    if ends[0] != 0 or any(a > b for a, b in itertools.pairwise(ends)) or strings + ends[-1] > len(metadata):
        raise malformed("offsets out of order or beyond its end")
    try:
        return [metadata[strings + a : strings + b].decode("utf-8") for a, b in itertools.pairwise(ends)]
    except UnicodeDecodeError:
        raise malformed("a key is not UTF-8") from None


class _Reader:
    """The rows of one decode: the bytes of their values, where each row starts and ends, their original row
    numbers (for messages), and each row's metadata dictionary."""

    def __init__(self, values: pa.Array, rows: np.ndarray[Any, Any], dictionaries: list[list[str]], group: Any):
        data_buffer = values.buffers()[2]
        self.data = np.frombuffer(data_buffer, np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
        offsets = np.frombuffer(values.buffers()[1], np.int32)[values.offset : values.offset + len(values) + 1]
        self.start = offsets[:-1].astype(np.int64)
        self.end = offsets[1:].astype(np.int64)
        self.rows = rows
        self.dictionaries = dictionaries
        self.group = group

    def fail(self, bad: Any, message: Any) -> None:
        """Raise :class:`VariantError` for the first row where ``bad`` holds: ``message(i)`` after its row."""
        if np.any(bad):
            i = int(np.argmax(bad))
            why = message if isinstance(message, str) else message(i)
            raise VariantError(f"variant row {int(self.rows[i])}{why}")

    def field_names(self, i: int) -> list[str] | None:
        """The field names of row ``i``'s object (for messages; None when it cannot be read)."""
        value = bytes(self.data[self.start[i] : self.end[i]])
        names = self.dictionaries[int(self.group[i])]
        try:
            vh = value[0] >> 2
            nsize = 4 if vh >> 4 & 1 else 1
            id_size = (vh >> 2 & 3) + 1
            count = int.from_bytes(value[1 : 1 + nsize], "little")
            at = 1 + nsize
            return [
                names[int.from_bytes(value[at + j * id_size : at + (j + 1) * id_size], "little")] for j in range(count)
            ]
        except IndexError:
            return None


def _field_set_message(reader: _Reader, targets: list[str]) -> Any:
    def message(i: int) -> str:
        found = reader.field_names(i)
        if found is None:
            return ": a malformed object"
        missing = [n for n in targets if n not in found]
        extra = [n for n in found if n not in targets or found.count(n) > 1]
        return f": its fields do not match the image's: missing {missing}, not in the image {extra}"

    return message


def _cell_positions(reader: _Reader, targets: list[str]) -> tuple[Any, Any]:
    """Where each target field's value starts in each row (rows x fields) and where each row's field data ends."""
    data, start, end = reader.data, reader.start, reader.end
    reader.fail(end <= start, ": an empty value")
    head = data[np.minimum(start, len(data) - 1)].astype(np.int64)
    reader.fail(head & 3 != _OBJECT, lambda i: f": a value of variant type {_describe(int(head[i]))}, not an object")
    vh = head >> 2
    nsize = np.where(vh >> 4 & 1, 4, 1)
    id_size = (vh >> 2 & 3) + 1
    off_size = (vh & 3) + 1
    reader.fail(start + 1 + nsize > end, ": a truncated object")
    count = _read_uint(data, start + 1, nsize).astype(np.int64)
    n = len(targets)
    reader.fail(count != n, _field_set_message(reader, targets))
    ids_at = start + 1 + nsize
    data_start = ids_at + n * id_size + (n + 1) * off_size
    reader.fail(data_start > end, ": a truncated object")
    j = np.arange(n + 1)
    ids = _read_uint(data, ids_at[:, None] + j[:n] * id_size[:, None], id_size[:, None]).astype(np.int64)
    offsets = _read_uint(data, (ids_at + n * id_size)[:, None] + j * off_size[:, None], off_size[:, None])
    offsets = offsets.astype(np.int64)
    area_end = data_start + offsets[:, n]
    reader.fail(area_end > end, ": a field offset beyond the value")
    reader.fail(np.any(offsets[:, :n] >= offsets[:, n:], axis=1), ": a field offset beyond the value")
    # each metadata's ids of the target names (-1: not in its dictionary); rows of one object hold them, in any order
    expected = np.full((len(reader.dictionaries), n), -1, np.int64)
    for g, names in enumerate(reader.dictionaries):
        ids_of = {name: i for i, name in reversed(list(enumerate(names)))}
        expected[g] = [ids_of.get(name, -1) for name in targets]
    wanted = expected[reader.group]
    by_id = np.argsort(ids, axis=1, kind="stable")
    wanted_order = np.argsort(wanted, axis=1, kind="stable")
    same = np.take_along_axis(ids, by_id, axis=1) == np.take_along_axis(wanted, wanted_order, axis=1)
    reader.fail(~same.all(axis=1) | (wanted < 0).any(axis=1), _field_set_message(reader, targets))
    # target c's id has rank rank[r, c] among the row's ids; the object field of that rank is by_id[r, rank]
    rank = np.argsort(wanted_order, axis=1)
    position = np.take_along_axis(by_id, rank, axis=1)
    return data_start[:, None] + np.take_along_axis(offsets, position, axis=1), area_end


def _validity(valid: np.ndarray[Any, Any]) -> pa.Buffer | None:
    return _bitmap(valid) if len(valid) else None


def _fixed(kind: pa.DataType, values: np.ndarray[Any, Any], valid: np.ndarray[Any, Any]) -> pa.Array:
    return pa.Array.from_buffers(kind, len(valid), [_validity(valid), pa.py_buffer(np.ascontiguousarray(values))])


def _decimal_fits(low: Any, high: Any, digits: int) -> Any:
    """Whether the 128-bit integers ``high:low`` have at most ``digits`` digits."""
    negative = high < 0
    lo, hi = low.view(np.uint64), high.view(np.uint64)
    carry = (lo == 0).astype(np.uint64)
    mag_lo = np.where(negative, ~lo + np.uint64(1), lo)
    mag_hi = np.where(negative, ~hi + carry, hi)
    bound = 10**digits
    bound_hi, bound_lo = np.uint64(bound >> 64), np.uint64(bound & (1 << 64) - 1)
    return (mag_hi < bound_hi) | ((mag_hi == bound_hi) & (mag_lo < bound_lo))


def _column(reader: _Reader, name: str, kind: pa.DataType, at: Any, limit: Any) -> pa.Array:
    """Target column ``name`` from the values starting at ``at`` (each ending by ``limit``)."""
    data = reader.data
    head = data[at].astype(np.int64)
    valid = head != _NULL

    def check(sizes: dict[int, int], expected: str, short: Any = None) -> Any:
        """The payload sizes of the column's headers ``sizes`` (0 for variant nulls and ``short`` strings)."""
        size_of = np.full(256, -1, np.int64)
        size_of[_NULL] = 0
        for h, s in sizes.items():
            size_of[h] = s
        size = size_of[head] if short is None else np.where(short, 0, size_of[head])

        def found(i: int) -> str:
            return f", field {name!r}: a value of variant type {_describe(int(head[i]))} where {expected} is expected"

        reader.fail(size < 0, found)
        return size

    def bounded(end: Any) -> None:
        """Each non-null value ends by its object's end (a variant null is its one header byte)."""
        reader.fail(valid & (end > limit), f", field {name!r}: a value beyond its object")

    if pa.types.is_int64(kind) or pa.types.is_date32(kind) or pa.types.is_timestamp(kind):
        if pa.types.is_int64(kind):
            size = check({h: s for s, h in _INT_HEADS.items()}, "an integer")
        elif pa.types.is_date32(kind):
            size = check({_DATE: 4}, "a date")
        else:
            size = check({_TIMESTAMP_NTZ: 8}, "a timestamp_ntz")
        bounded(at + 1 + size)
        values = _read_int(data, at + 1, size)
        dtype = np.int32 if pa.types.is_date32(kind) else np.int64
        return _fixed(kind, values.astype(dtype), valid)
    if pa.types.is_float64(kind):
        size = check({_DOUBLE: 8}, "a double")
        bounded(at + 1 + size)
        return _fixed(kind, _read_uint(data, at + 1, size, 8).view(np.float64), valid)
    if pa.types.is_decimal128(kind):
        size = check({h: s for s, h in _DECIMAL_HEADS.items()}, f"a decimal of scale {kind.scale}")
        bounded(at + 2 + size)
        scale = data[np.minimum(at + 1, len(data) - 1)]
        reader.fail(
            valid & (scale != kind.scale),
            lambda i: f", field {name!r}: a decimal of scale {scale[i]} where scale {kind.scale} is expected",
        )
        low = _read_int(data, at + 2, np.minimum(size, 8))
        high = np.where(size == 16, _read_int(data, at + 10, np.where(size == 16, 8, 0)), low >> 63)
        reader.fail(
            valid & ~_decimal_fits(low, high, kind.precision),
            f", field {name!r}: a decimal of more than {kind.precision} digits",
        )
        return _fixed(kind, np.stack([low, high], axis=1), valid)
    if pa.types.is_binary(kind) or pa.types.is_string(kind):
        if pa.types.is_binary(kind):
            size = check({_BINARY: 4}, "a binary")
            short = np.zeros(len(head), bool)
        else:
            short = head & 3 == _SHORT_STR
            size = check({_LONG_STR: 4}, "a string", short)
        bounded(at + 1 + size)
        lengths = np.where(short, head >> 2, _read_uint(data, at + 1, size).astype(np.int64))
        begins = at + 1 + size
        bounded(begins + lengths)
        out_offsets = np.zeros(len(lengths) + 1, np.int64)
        np.cumsum(lengths, out=out_offsets[1:])
        index = np.repeat(begins - out_offsets[:-1], lengths) + np.arange(out_offsets[-1])
        raw = _binary_from(lengths, data[index], valid)
        if pa.types.is_binary(kind):
            return raw
        try:
            return raw.cast(pa.string())
        except pa.ArrowInvalid as exc:
            bad = np.array([v is not None and not _is_utf8(v) for v in raw.to_pylist()])  # the error path alone
            reader.fail(bad, f", field {name!r}: a string that is not UTF-8")
            raise VariantError(f"field {name!r}: {exc}") from exc
    raise VariantError(f"field {name!r}: type {kind} has no variant encoding here")


def _is_utf8(value: bytes) -> bool:
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _supported(kind: pa.DataType) -> bool:
    return (
        pa.types.is_int64(kind)
        or pa.types.is_float64(kind)
        or pa.types.is_decimal128(kind)
        or pa.types.is_date32(kind)
        or (pa.types.is_timestamp(kind) and kind.unit == "us" and kind.tz is None)
        or pa.types.is_string(kind)
        or pa.types.is_binary(kind)
    )


def decode(variants: pa.StructArray | pa.ChunkedArray, image_type: pa.StructType) -> pa.StructArray:
    """Variant objects as typed images of ``image_type`` -- the inverse of :func:`encode`: a null variant is a null
    image, a variant null a null cell. :class:`VariantError`, naming the field and row, for a variant that is not
    an object of exactly the image's fields with values of their columns' types."""
    array = variants.combine_chunks() if isinstance(variants, pa.ChunkedArray) else variants
    kind = array.type
    if not (
        pa.types.is_struct(kind)
        and {f.name for f in kind} == {"value", "metadata"}
        and all(pa.types.is_binary(f.type) for f in kind)
    ):
        raise VariantError(f"not a variant column: type {kind}, expected {variant_arrow_type()}")
    targets = [field.name for field in image_type]
    for field in image_type:
        if not _supported(field.type):
            raise VariantError(f"field {field.name!r}: type {field.type} has no variant encoding here")
    valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), bool)
    present = np.flatnonzero(valid)
    index = pa.array(present)
    values = array.field("value").take(index)
    metadatas = array.field("metadata").take(index)
    for part, what in ((values, "value"), (metadatas, "metadata")):
        if part.null_count:
            row = int(present[np.argmax(~np.asarray(part.is_valid().to_numpy(zero_copy_only=False), bool))])
            raise VariantError(f"variant row {row}: a null {what} in a non-null variant")
    if not len(present):
        columns = [pa.nulls(0, field.type) for field in image_type]
    else:
        encoded = metadatas.dictionary_encode()
        group = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), np.int64)
        first_rows = present[np.unique(group, return_index=True)[1]]
        dictionaries = [
            _read_metadata(m, int(r)) for m, r in zip(encoded.dictionary.to_pylist(), first_rows, strict=True)
        ]
        reader = _Reader(values, present, dictionaries, group)
        at, limit = _cell_positions(reader, targets)
        columns = [_column(reader, f.name, f.type, at[:, c], limit) for c, f in enumerate(image_type)]
    if len(present) < len(array):
        spread = pa.array(np.cumsum(valid) - 1, pa.int64(), mask=~valid)
        columns = [column.take(spread) for column in columns]
    mask = None if valid.all() else pa.array(~valid)
    return pa.StructArray.from_arrays(columns, fields=list(image_type), mask=mask)


# ---------------------------------------------------------------------------------------------------- partial images


def _by_absent(absent: pa.Array) -> list[tuple[tuple[str, ...], np.ndarray[Any, Any]]]:
    """The rows of each distinct ``absent`` value (a JSON list of names, or null: none)."""
    encoded = absent.dictionary_encode() if not pa.types.is_dictionary(absent.type) else absent
    indices = np.asarray(encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False), np.int64)
    groups = []
    for code in np.unique(indices).tolist():
        names = () if code < 0 else tuple(json.loads(encoded.dictionary[code].as_py()))
        groups.append((names, np.flatnonzero(indices == code)))
    return groups


def _joined(parts: list[tuple[np.ndarray[Any, Any], pa.Array]], rows: int) -> pa.Array:
    """Arrays of the rows ``parts`` name, put back in row order."""
    at = np.empty(rows, np.int64)
    start = 0
    for chosen, _array in parts:
        at[chosen] = np.arange(start, start + len(chosen))
        start += len(chosen)
    return pa.concat_arrays([array for _chosen, array in parts]).take(pa.array(at))


def encode_partial(images: pa.StructArray, absent: pa.Array) -> pa.StructArray:
    """:func:`encode` of images some of which are partial: ``absent`` names, per row, the fields its image does not
    carry (a JSON list of names; null: every field), which its object then leaves out -- a field it does not carry is
    never a variant null."""
    if absent.null_count == len(absent):
        return encode(images)
    parts = []
    for names, chosen in _by_absent(absent):
        part = images.take(pa.array(chosen))
        kept = [f for f in images.type if f.name not in names]
        mask = None if part.null_count == 0 else pc.invert(part.is_valid())
        fields = pa.StructArray.from_arrays([part.field(f.name) for f in kept], fields=kept, mask=mask)
        parts.append((chosen, encode(fields)))
    return _joined(parts, len(images))


def decode_partial(variants: pa.StructArray, image_type: pa.StructType, absent: pa.Array) -> pa.StructArray:
    """:func:`decode` of variants some of which are objects of partial images (``absent``: per row, the JSON list of
    the fields its image does not carry, or null): each must hold exactly the fields it carries; a field it does not
    carry is a null cell of the typed image (the change row names it)."""
    array = variants.combine_chunks() if isinstance(variants, pa.ChunkedArray) else variants
    if absent.null_count == len(absent):
        return decode(array, image_type)
    parts = []
    for names, chosen in _by_absent(absent):
        part = array.take(pa.array(chosen))
        carried = pa.struct([f for f in image_type if f.name not in names])
        read = decode(part, carried)
        columns = [read.field(f.name) if f.name not in names else pa.nulls(len(part), f.type) for f in image_type]
        mask = None if read.null_count == 0 else pc.invert(read.is_valid())
        parts.append((chosen, pa.StructArray.from_arrays(columns, fields=list(image_type), mask=mask)))
    return _joined(parts, len(array))
