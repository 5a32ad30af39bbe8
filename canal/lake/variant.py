"""Typed images <-> Spark ``VARIANT`` values, column by column in Arrow and numpy: no value passes through Python.

A VARIANT in Arrow is ``struct<value: binary, metadata: binary>`` (:func:`variant_arrow_type`, as pyspark carries it
into and out of Python). :func:`encode` turns a struct array of an image's typed columns (those of
:func:`canal.lake.types.arrow_type`: int64, float64, decimal128(p,s), date32, timestamp[us], binary, string) into
variant objects; :func:`decode` turns them back, exactly, into the struct of a given type.

The encoding (Spark's variant binary format, version 1):

* ``metadata``: the image's column names, sorted (the ``sorted_strings`` flag), offsets of the narrowest width that
  holds them; the same bytes for every row of a layout.
* ``value``: an object of every column (an SQL NULL is the variant null, so every row of a layout has the same field
  ids), its fields in name order, field ids one byte wide (two beyond 256 columns), offsets of the narrowest width
  that holds the batch's longest row. Cells: an integer column as int8/16/32/64, the narrowest that holds the batch's
  values of that column; DOUBLE as double; a DECIMAL(p,s) as decimal4/8/16 by its precision, scale ``s`` always
  (1.50 stays 1.50); DATE as date; DATETIME / TIMESTAMP (the mirror's UTC wall time) as timestamp_ntz; text as a
  short string under 64 bytes, else a string; bytes as binary.

:func:`decode` reads what :func:`encode` writes column by column with numpy gathers -- each batch of rows may have
its own widths, as the batches of a spooled micro-batch do -- and anything else (a variant Spark wrote itself, other
field names) value by value. A value that is not an image of the type asked for -- another field set, a string
where a number is expected, a decimal of another scale, an integer beyond its column -- is a :class:`VariantError`
naming the field and the row: never a NULL or a coerced value in its place.
"""

from __future__ import annotations

import datetime as dt
import itertools
import struct
from decimal import Decimal
from typing import Any, Final

from canal.lake.types import MirrorTypeError

_NULL: Final = 0x00
_INT_HEADERS: Final = {1: 3 << 2, 2: 4 << 2, 4: 5 << 2, 8: 6 << 2}
_DOUBLE: Final = 7 << 2
_DECIMAL_HEADERS: Final = {4: 8 << 2, 8: 9 << 2, 16: 10 << 2}
_DATE: Final = 11 << 2
_TIMESTAMP_NTZ: Final = 13 << 2
_BINARY: Final = 15 << 2
_LONG_STRING: Final = 16 << 2
_OBJECT: Final = 2
_SHORT_STRING: Final = 1
_EPOCH: Final = dt.date(1970, 1, 1)


class VariantError(MirrorTypeError):
    """A VARIANT value that is not an image of the layout it is read as."""


def variant_arrow_type() -> Any:
    """A VARIANT as Arrow carries it between Spark and Python."""
    import pyarrow as pa

    return pa.struct(
        [
            pa.field("value", pa.binary(), nullable=False),
            pa.field("metadata", pa.binary(), nullable=False, metadata={b"variant": b"true"}),
        ]
    )


def _width(largest: int) -> int:
    return 1 if largest <= 0xFF else 2 if largest <= 0xFFFF else 4


def metadata_bytes(names: list[str]) -> bytes:
    """The variant metadata of an object whose fields are ``names``: the sorted names dictionary."""
    encoded = [n.encode("utf-8") for n in sorted(names)]
    ends = [0]
    for name in encoded:
        ends.append(ends[-1] + len(name))
    width = _width(max(ends[-1], len(encoded)))
    header = 0x01 | 0x10 | ((width - 1 if width < 4 else 3) << 6)
    return bytes([header]) + b"".join(n.to_bytes(width, "little") for n in (len(encoded), *ends)) + b"".join(encoded)


# -- encoding ------------------------------------------------------------------------------------------------------


def _fixed_cells(header: int, payload: Any, valid: Any) -> Any:
    """Cells of one header byte and a fixed-width little-endian payload per row (``payload``: a numpy (n, w) uint8
    array), the variant null where not ``valid``: a pyarrow binary array."""
    import numpy as np
    import pyarrow as pa

    n, width = payload.shape
    cells = np.empty((n, width + 1), dtype=np.uint8)
    cells[:, 0] = header
    cells[:, 1:] = payload
    fixed = pa.FixedSizeBinaryArray.from_buffers(pa.binary(width + 1), n, [None, pa.py_buffer(cells.tobytes())])
    return _with_nulls(fixed.cast(pa.binary()), valid)


def _with_nulls(cells: Any, valid: Any) -> Any:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if bool(np.all(valid)):
        return cells
    return pc.if_else(pa.array(valid), cells, pa.scalar(bytes([_NULL]), pa.binary()))


def _le(values: Any, width: int) -> Any:
    """Integers (numpy) as (n, width) little-endian bytes."""
    import numpy as np

    return np.ascontiguousarray(values.astype(f"<i{width}")).view(np.uint8).reshape(-1, width)


def _cells(column: Any, field_name: str) -> Any:
    """One typed column as variant cells (a binary array, the variant null where the column is null)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = column.type
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    n = len(column)
    if pa.types.is_int64(kind):
        values = column.fill_null(0).to_numpy(zero_copy_only=False)
        low, high = (int(values.min()), int(values.max())) if n else (0, 0)
        width = next(w for w in (1, 2, 4, 8) if -(1 << (8 * w - 1)) <= low and high < (1 << (8 * w - 1)))
        return _fixed_cells(_INT_HEADERS[width], _le(values, width), valid)
    if pa.types.is_float64(kind):
        values = column.fill_null(0.0).to_numpy(zero_copy_only=False).astype("<f8")
        return _fixed_cells(_DOUBLE, values.view(np.uint8).reshape(-1, 8), valid)
    if pa.types.is_decimal128(kind):
        width = 4 if kind.precision <= 9 else 8 if kind.precision <= 18 else 16
        raw = np.frombuffer(column.buffers()[1], dtype=np.uint8)[column.offset * 16 : (column.offset + n) * 16]
        payload = np.empty((n, width + 1), dtype=np.uint8)
        payload[:, 0] = kind.scale
        payload[:, 1:] = raw.reshape(n, 16)[:, :width]  # two's complement, little-endian: the low bytes
        return _fixed_cells(_DECIMAL_HEADERS[width], payload, valid)
    if pa.types.is_date32(kind):
        values = column.cast(pa.int32()).fill_null(0).to_numpy(zero_copy_only=False)
        return _fixed_cells(_DATE, _le(values, 4), valid)
    if pa.types.is_timestamp(kind) and kind.unit == "us" and kind.tz is None:
        values = column.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False)
        return _fixed_cells(_TIMESTAMP_NTZ, _le(values, 8), valid)
    if pa.types.is_string(kind) or pa.types.is_binary(kind):
        data = column.cast(pa.binary()).fill_null(b"")
        lengths = pc.binary_length(data).to_numpy(zero_copy_only=False).astype(np.int64)
        long_header = _LONG_STRING if pa.types.is_string(kind) else _BINARY
        prefix = _fixed_cells(long_header, _le(lengths, 4), np.ones(n, dtype=bool))
        if pa.types.is_string(kind):  # under 64 bytes: a short string, its length in the header byte
            short = lengths < 64
            headers = ((np.minimum(lengths, 63) << 2) | _SHORT_STRING).astype(np.uint8).reshape(n, 1)
            one_byte = pa.FixedSizeBinaryArray.from_buffers(pa.binary(1), n, [None, pa.py_buffer(headers.tobytes())])
            prefix = pc.if_else(pa.array(short), one_byte.cast(pa.binary()), prefix)
        return _with_nulls(pc.binary_join_element_wise(prefix, data, pa.scalar(b"", pa.binary())), valid)
    raise VariantError(f"column {field_name!r}: no variant encoding for Arrow type {kind}")


def encode(images: Any) -> Any:
    """A struct array of typed columns as VARIANT objects (a null struct row: a null variant)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(images, pa.ChunkedArray):
        images = images.combine_chunks()
    n = len(images)
    kind = images.type
    names = [kind.field(i).name for i in range(kind.num_fields)]
    order = sorted(range(len(names)), key=lambda i: names[i])
    cells = [_cells(images.field(i), names[i]) for i in order]
    k = len(cells)
    lengths = (
        np.stack([pc.binary_length(c).to_numpy(zero_copy_only=False) for c in cells], axis=1).astype(np.int64)
        if k
        else np.zeros((n, 0), dtype=np.int64)
    )
    ends = np.zeros((n, k + 1), dtype=np.int64)
    np.cumsum(lengths, axis=1, out=ends[:, 1:])
    width = _width(int(ends[:, -1].max()) if n else 0)
    id_width = 1 if k <= 0x100 else 2
    large = k > 0xFF
    header = _OBJECT | (((width - 1 if width < 4 else 3) | ((id_width - 1) << 2) | (int(large) << 4)) << 2)
    head = (
        bytes([header])
        + k.to_bytes(4 if large else 1, "little")
        + b"".join(i.to_bytes(id_width, "little") for i in range(k))
    )
    offsets = np.ascontiguousarray(ends.astype(f"<u{width}")).view(np.uint8).reshape(n, (k + 1) * width)
    offset_cells = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary((k + 1) * width), n, [None, pa.py_buffer(offsets.tobytes())]
    ).cast(pa.binary())
    value = pc.binary_join_element_wise(pa.scalar(head, pa.binary()), offset_cells, *cells, pa.scalar(b"", pa.binary()))
    metadata = pa.repeat(pa.scalar(metadata_bytes(names), pa.binary()), n)
    mask = images.is_valid()
    fields = list(variant_arrow_type())
    return pa.StructArray.from_arrays(
        [value, metadata], fields=fields, mask=pc.invert(mask) if images.null_count else None
    )


# -- decoding ------------------------------------------------------------------------------------------------------


def decode(variants: Any, image_type: Any, only: list[str] | None = None) -> Any:
    """VARIANT objects (a struct array, or a chunked one) as a struct array of ``image_type`` (a null variant: a null
    row); a :class:`VariantError` for a value that is not an image of that type. ``only``: the struct holds these
    fields of ``image_type`` alone (each value is still checked to be an image of the whole type)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(variants, pa.ChunkedArray):
        variants = variants.combine_chunks() if variants.num_chunks else pa.array([], variant_arrow_type())
    n = len(variants)
    names = [image_type.field(i).name for i in range(image_type.num_fields)]
    valid = variants.is_valid().to_numpy(zero_copy_only=False) if variants.null_count else np.ones(n, dtype=bool)
    values = variants.field("value")
    expected_metadata = pa.scalar(metadata_bytes(names), pa.binary())
    same_names = pc.fill_null(pc.equal(variants.field("metadata"), expected_metadata), False)
    fast = valid & same_names.to_numpy(zero_copy_only=False)
    chosen = list(range(len(names))) if only is None else [names.index(name) for name in only]
    columns = _fast_columns(values, np.flatnonzero(fast), names, image_type, chosen)
    slow = np.flatnonzero(valid & ~fast)
    if slow.size:  # written otherwise (Spark itself, other names): value by value
        columns = _merge_slow(columns, variants, slow, names, image_type, chosen)
    mask = pa.array(~valid) if not bool(np.all(valid)) else None
    return pa.StructArray.from_arrays(columns, fields=[image_type.field(i) for i in chosen], mask=mask)


def _bytes_at(data: Any, starts: Any, width: int) -> Any:
    """``width`` bytes at each of ``starts`` in ``data`` (numpy uint8): an (n, width) array."""
    import numpy as np

    at = starts[:, None] + np.arange(width)[None, :]
    if at.size and int(at.max()) >= len(data):
        raise VariantError("malformed variant: a value runs past the end of its row")
    return data[at]


def _uint(data: Any, starts: Any, width: int) -> Any:
    """Unsigned little-endian integers of ``width`` bytes at ``starts``."""
    import numpy as np

    raw = _bytes_at(data, starts, width).astype(np.uint64)
    return (raw << (8 * np.arange(width, dtype=np.uint64))[None, :]).sum(axis=1).astype(np.int64)


def _fast_columns(values: Any, rows: Any, names: list[str], image_type: Any, chosen: list[int]) -> list[Any]:
    """The columns of the object rows ``rows`` of ``values`` (whose metadata is the sorted ``names``), the other
    rows null; read with numpy gathers, a group of rows per object header (the widths of the batch it came in)."""
    import numpy as np

    n = len(values)
    k = len(names)
    order = sorted(range(k), key=lambda i: names[i])  # field id -> column
    buffers = values.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int32)[values.offset : values.offset + n + 1].astype(np.int64)
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.zeros(0, dtype=np.uint8)
    starts = offsets[rows]
    if rows.size and bool(np.any(offsets[rows + 1] - starts < 3)):
        _fail(names, rows[np.argmax(offsets[rows + 1] - starts < 3)], "not an object")
    cell_starts = np.zeros((n, k), dtype=np.int64)
    for header in np.unique(data[starts]) if rows.size else []:
        group = rows[data[starts] == header]
        at = offsets[group]
        info = int(header) >> 2
        if int(header) & 0x3 != _OBJECT:
            _fail(names, group[0], "not an object")
        width, id_width, large = (info & 0x3) + 1, ((info >> 2) & 0x3) + 1, bool(info >> 4 & 1)
        size_width = 4 if large else 1
        counts = _uint(data, at + 1, size_width)
        if bool(np.any(counts != k)):
            _fail(names, group[np.argmax(counts != k)], f"an object of {int(counts.max())} fields, not {k}")
        ids_at = at + 1 + size_width
        ids = np.stack([_uint(data, ids_at + j * id_width, id_width) for j in range(k)], axis=1) if k else None
        if ids is not None and bool(np.any(ids != np.arange(k)[None, :])):
            _fail(names, group[np.argmax(np.any(ids != np.arange(k)[None, :], axis=1))], "fields out of order")
        offsets_at = ids_at + k * id_width
        data_at = offsets_at + (k + 1) * width
        for j in range(k):
            cell_starts[group, order[j]] = data_at + _uint(data, offsets_at + j * width, width)
    return [
        _column(data, rows, cell_starts[rows, i] if rows.size else np.zeros(0, np.int64), n, names[i], kind)
        for i, kind in ((i, image_type.field(i).type) for i in chosen)
    ]


def _column(data: Any, rows: Any, at: Any, n: int, name: str, kind: Any) -> Any:
    """The typed column ``kind`` of the cells at ``at`` (of rows ``rows``; the other rows null)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    headers = data[at] if at.size else np.zeros(0, dtype=np.uint8)
    present = headers != _NULL
    got = np.zeros(n, dtype=bool)
    got[rows[present]] = True
    cells_rows, cells = rows[present], at[present]
    heads = headers[present]

    def refuse(bad: Any, what: str) -> None:
        if bool(np.any(bad)):
            row = int(cells_rows[np.argmax(bad)])
            head = int(heads[np.argmax(bad)])
            raise VariantError(f"field {name!r}, row {row}: {what} (variant header 0x{head:02x})")

    def fixed(out: Any, type_: Any) -> Any:
        full = np.zeros(n, dtype=out.dtype)
        full[cells_rows] = out
        return pa.array(full, type=type_, mask=~got)

    if pa.types.is_int64(kind):
        out = np.zeros(cells.size, dtype=np.int64)
        known = np.zeros(cells.size, dtype=bool)
        for width, header in _INT_HEADERS.items():
            these = heads == header
            raw = _uint(data, cells[these] + 1, width)
            out[these] = np.where(raw >= 1 << (8 * width - 1), raw - (1 << (8 * width)), raw) if width < 8 else raw
            known |= these
        refuse(~known, "not an integer")
        return fixed(out, pa.int64())
    if pa.types.is_float64(kind):
        refuse(heads != _DOUBLE, "not a double")
        return fixed(_bytes_at(data, cells + 1, 8).copy().view("<f8").reshape(-1), pa.float64())
    if pa.types.is_decimal128(kind):
        wide = np.zeros((cells.size, 16), dtype=np.uint8)
        known = np.zeros(cells.size, dtype=bool)
        for width, header in _DECIMAL_HEADERS.items():
            these = heads == header
            raw = _bytes_at(data, cells[these] + 2, width)
            negative = (raw[:, -1] & 0x80) != 0 if width < 16 else np.zeros(len(raw), dtype=bool)
            wide[these, :width] = raw
            wide[these, width:] = np.where(negative[:, None], 0xFF, 0x00)
            known |= these
        refuse(~known, "not a decimal")
        scales = data[cells + 1] if cells.size else np.zeros(0, dtype=np.uint8)
        refuse(scales != kind.scale, f"a decimal of another scale than {kind.scale}")
        found = pa.Array.from_buffers(kind, cells.size, [None, pa.py_buffer(wide.tobytes())])
        if kind.precision < 38 and cells.size:  # a value of more digits than the column holds
            limit = pa.scalar(
                Decimal(10**kind.precision).scaleb(-kind.scale), pa.decimal128(kind.precision + 1, kind.scale)
            )
            refuse(pc.greater_equal(pc.abs(found), limit).to_numpy(zero_copy_only=False), f"beyond {kind}")
        return _spread(found, cells_rows, n)
    if pa.types.is_date32(kind):
        refuse(heads != _DATE, "not a date")
        raw = _uint(data, cells + 1, 4)
        return fixed(np.where(raw >= 1 << 31, raw - (1 << 32), raw).astype(np.int32), pa.int32()).cast(pa.date32())
    if pa.types.is_timestamp(kind):
        refuse(heads != _TIMESTAMP_NTZ, "not a timestamp_ntz")
        return fixed(_bytes_at(data, cells + 1, 8).copy().view("<i8").reshape(-1), pa.int64()).cast(kind)
    if pa.types.is_string(kind) or pa.types.is_binary(kind):
        short = (heads & 0x3) == _SHORT_STRING
        long_header = _LONG_STRING if pa.types.is_string(kind) else _BINARY
        refuse(~((heads == long_header) | (short & pa.types.is_string(kind))), f"not a {kind}")
        lengths = (heads >> 2).astype(np.int64)
        lengths[~short] = _uint(data, cells[~short] + 1, 4)
        begins = cells + np.where(short, 1, 5)
        return _spread(_slices(data, begins, lengths, kind, name), cells_rows, n)
    raise VariantError(f"field {name!r}: no variant decoding for Arrow type {kind}")


def _spread(found: Any, rows: Any, n: int) -> Any:
    """``found`` (the values of rows ``rows``) as a column of ``n`` rows, null elsewhere."""
    import numpy as np
    import pyarrow as pa

    if len(found) == n:
        return found
    where = np.full(n, -1, dtype=np.int64)
    where[rows] = np.arange(len(rows), dtype=np.int64)
    return found.take(pa.array(where, mask=where < 0))


def _slices(data: Any, begins: Any, lengths: Any, kind: Any, name: str) -> Any:
    """The byte ranges ``begins`` / ``lengths`` (ascending, not overlapping) of ``data`` as an array of ``kind``:
    one binary array over ``data`` whose elements alternate between a range and the gap before the next, of which
    the ranges are taken (copied once, in C)."""
    import numpy as np
    import pyarrow as pa

    m = len(begins)
    if m == 0:
        return pa.array([], kind)
    bounds = np.empty(2 * m, dtype=np.int64)
    bounds[0::2] = begins
    bounds[1::2] = begins + lengths
    if bool(np.any(np.diff(bounds) < 0)) or int(bounds[-1]) > len(data):
        raise VariantError(f"field {name!r}: malformed variant (a value beyond its row)")
    wide = pa.Array.from_buffers(
        pa.large_binary(), 2 * m - 1, [None, pa.py_buffer(bounds.tobytes()), pa.py_buffer(data)]
    )
    taken = wide.take(pa.array(np.arange(0, 2 * m, 2, dtype=np.int64))).cast(pa.binary())
    if pa.types.is_string(kind):
        try:
            return taken.cast(pa.string())
        except pa.ArrowInvalid:
            raise VariantError(f"field {name!r}: a string that is not UTF-8") from None
    return taken


def _fail(names: list[str], row: Any, what: str) -> None:
    raise VariantError(f"row {int(row)}: {what}, not an image of the columns {names}")


def _merge_slow(
    columns: list[Any], variants: Any, rows: Any, names: list[str], image_type: Any, chosen: list[int]
) -> list[Any]:
    """``columns`` with the rows ``rows`` read value by value (:func:`read_object`)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(variants)
    values = variants.field("value")
    metadata = variants.field("metadata")
    read: dict[str, list[Any]] = {name: [None] * n for name in names}
    for row in rows.tolist():
        image = read_object(values[row].as_py(), metadata[row].as_py(), row)
        if sorted(image) != sorted(names):
            _fail(names, row, f"an object of the fields {sorted(image)}")
        for name, value in image.items():
            read[name][row] = value
    taken = np.zeros(n, dtype=bool)
    taken[rows] = True
    merged = []
    for column, field in zip(columns, [image_type.field(i) for i in chosen], strict=True):
        cells = read[field.name]
        for row in rows.tolist():
            _check_python(cells[row], field, row)
        try:
            slow = pa.array(cells, field.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
            raise VariantError(f"field {field.name!r}: {exc}") from None
        merged.append(pc.if_else(pa.array(taken), slow, column))
    return merged


_PYTHON_TYPES: Final = {"int64": (int,), "double": (float,), "date32[day]": (dt.date,), "string": (str,)}


def _check_python(value: Any, field: Any, row: int) -> None:
    """A value read value by value must be of the column's Python type (bool is no integer, a datetime no date)."""
    import pyarrow as pa

    if value is None:
        return
    kind = field.type
    if pa.types.is_decimal(kind):
        ok = isinstance(value, Decimal | int) and not isinstance(value, bool)
    elif pa.types.is_timestamp(kind):
        ok = isinstance(value, dt.datetime)
    elif pa.types.is_binary(kind):
        ok = isinstance(value, bytes)
    elif pa.types.is_date32(kind):
        ok = isinstance(value, dt.date) and not isinstance(value, dt.datetime)
    else:
        ok = isinstance(value, _PYTHON_TYPES.get(str(kind), ())) and not isinstance(value, bool)
    if not ok:
        raise VariantError(f"field {field.name!r}, row {row}: {type(value).__name__} {value!r} is no {kind} value")


def read_object(value: bytes, metadata: bytes, row: int = 0) -> dict[str, Any]:
    """One variant object's fields as Python values (value by value: variants :func:`encode` did not write)."""
    try:
        width = ((metadata[0] >> 6) & 0x3) + 1
        size = int.from_bytes(metadata[1 : 1 + width], "little")
        ends = [int.from_bytes(metadata[1 + i * width : 1 + (i + 1) * width], "little") for i in range(1, size + 2)]
        strings = 1 + (size + 2) * width
        keys = [metadata[strings + a : strings + b].decode("utf-8") for a, b in itertools.pairwise(ends)]
        header = value[0]
        if header & 0x3 != _OBJECT:
            raise VariantError(f"row {row}: not an object")
        info = header >> 2
        offset_width, id_width, large = (info & 0x3) + 1, ((info >> 2) & 0x3) + 1, bool(info >> 4 & 1)
        at = 1 + (4 if large else 1)
        count = int.from_bytes(value[1:at], "little")
        ids = [int.from_bytes(value[at + i * id_width : at + (i + 1) * id_width], "little") for i in range(count)]
        at += count * id_width
        offsets = [
            int.from_bytes(value[at + i * offset_width : at + (i + 1) * offset_width], "little") for i in range(count)
        ]
        data = at + (count + 1) * offset_width
        return {keys[i]: _read_cell(value, data + offsets[j], row) for j, i in enumerate(ids)}
    except (IndexError, UnicodeDecodeError, struct.error) as exc:
        raise VariantError(f"row {row}: malformed variant ({exc})") from None


def _read_cell(value: bytes, at: int, row: int) -> Any:
    header = value[at]
    basic, info = header & 0x3, header >> 2
    if basic == _SHORT_STRING:
        return value[at + 1 : at + 1 + info].decode("utf-8")
    if basic != 0:
        raise VariantError(f"row {row}: a cell that is an object or an array")
    if info == 0:
        return None
    if info in (1, 2):
        return info == 1
    if 3 <= info <= 6:
        width = 1 << (info - 3)
        return int.from_bytes(value[at + 1 : at + 1 + width], "little", signed=True)
    if info == 7:
        return struct.unpack_from("<d", value, at + 1)[0]
    if 8 <= info <= 10:
        width = 4 << (info - 8) if info < 10 else 16
        unscaled = int.from_bytes(value[at + 2 : at + 2 + width], "little", signed=True)
        return Decimal(unscaled).scaleb(-value[at + 1])
    if info == 11:
        return _EPOCH + dt.timedelta(days=int.from_bytes(value[at + 1 : at + 5], "little", signed=True))
    if info in (12, 13):  # timestamp (UTC) or timestamp_ntz: both the wall time in UTC the mirror keeps
        micros = int.from_bytes(value[at + 1 : at + 9], "little", signed=True)
        return dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=micros)
    if info == 14:
        return struct.unpack_from("<f", value, at + 1)[0]
    if info in (15, 16):
        length = int.from_bytes(value[at + 1 : at + 5], "little")
        raw = value[at + 5 : at + 5 + length]
        return raw if info == 15 else raw.decode("utf-8")
    raise VariantError(f"row {row}: a variant of type {info}, which no column holds")
