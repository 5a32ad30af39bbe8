"""Arrow arrays of the raw columns of :class:`~canal.protocol.ColumnarRows`: a whole column converted at once.

Each conversion gives exactly the array that the column's values from the object decoder would give (what
:meth:`~canal.lake.forms.typed_layout.Layout.typed_image` builds of them), or None when it cannot be sure of that -- a
value outside what it handles (a zero or invalid date, text that is not plain ASCII in a latin1 column, a DECIMAL
group beyond its digits, another Arrow type than it makes); the caller then converts the column's values one by one
through the object decoder's readers, which decide as they always did.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from canal.parse.mysql.packed_decimal import decimal_size
from canal.protocol import ColumnForm

# bytes and decimal digits of a DECIMAL's leading/trailing group of d digits (MySQL's dig2bytes)
_DIG2BYTES: Final = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
_EPOCH_DAYS: Final = 719_468  # days from 0000-03-01 to 1970-01-01 in the proleptic Gregorian calendar


def raw_array(form: ColumnForm, target: Any, cells: Sequence[Any]) -> Any:
    """``cells`` (raw, in ``form``; None: NULL) as an Arrow array of type ``target``, or None (see the module)."""
    import pyarrow as pa

    kind = form.kind
    if kind in ("utf8", "latin1"):
        return _text(cells, target, ascii_only=kind == "latin1") if target == pa.string() else None
    if kind == "datetime2":
        return _datetime2(cells, form.fsp) if target == pa.timestamp("us") else None
    if kind == "decimal":
        return (
            _decimal(cells, form.precision, form.scale) if target == pa.decimal128(form.precision, form.scale) else None
        )
    return None


def _text(cells: Sequence[Any], target: Any, ascii_only: bool) -> Any:
    """UTF-8 bytes as strings (Arrow checks each value is UTF-8, as ``bytes.decode`` does); latin1 bytes only when
    all are ASCII, which reads the same in both."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        strings = pa.array(cells, pa.binary()).cast(target)
    except (pa.ArrowInvalid, pa.ArrowCapacityError):
        return None
    if ascii_only and not pc.all(pc.string_is_ascii(strings), skip_nulls=True, min_count=0).as_py():
        return None
    return strings


def _ints(cells: Sequence[Any], dtype: str) -> tuple[Any, Any]:
    """``cells`` as a numpy array (0 for NULL) and the NULL mask (None without NULLs)."""
    import numpy as np

    if None not in cells:
        return np.array(cells, dtype=dtype), None
    mask = np.fromiter((c is None for c in cells), dtype=bool, count=len(cells))
    return np.array([0 if c is None else c for c in cells], dtype=dtype), mask


def _datetime2(cells: Sequence[Any], fsp: int) -> Any:
    """DATETIME2 packed integers as microseconds since the epoch (MySQL's layout: a sign bit, year*13+month in 17
    bits, day 5, hour 5, minute 6, second 6, then the fraction's bytes)."""
    import numpy as np
    import pyarrow as pa

    packed, mask = _ints(cells, "uint64")
    fbytes = (fsp + 1) // 2
    fshift = 8 * fbytes
    frac = (packed & np.uint64((1 << fshift) - 1)).astype(np.int64) * (0, 10_000, 100, 1)[fbytes]
    ip = (packed >> np.uint64(fshift)).astype(np.int64) - 0x80_0000_0000
    ym = ip >> 22
    y, m, d = ym // 13, ym % 13, (ip >> 17) & 31
    hh, mi, ss = (ip >> 12) & 31, (ip >> 6) & 63, ip & 63
    leap = (y % 4 == 0) & ((y % 100 != 0) | (y % 400 == 0))
    month_days = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], dtype=np.int64)[np.clip(m, 0, 12)]
    valid = (
        (y >= 1) & (y <= 9999) & (m >= 1) & (d >= 1) & (d <= month_days + ((m == 2) & leap))
        & (hh <= 23) & (mi <= 59) & (ss <= 59) & (frac <= 999_999)
    )  # fmt: skip
    if not (valid if mask is None else valid | mask).all():
        return None  # a zero or invalid date (its text), or corrupt bytes: the object decoder's reader decides
    # days from the civil date (March-based years: the leap day ends a year)
    y = y - (m <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * ((m + 9) % 12) + 2) // 5 + d - 1
    days = era * 146_097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - _EPOCH_DAYS
    micros = ((days * 86_400 + hh * 3_600 + mi * 60 + ss) * 1_000_000 + frac).astype("datetime64[us]")
    return pa.array(micros, mask=mask)


def _decimal(cells: Sequence[Any], precision: int, scale: int) -> Any:
    """DECIMAL packed bytes (groups of nine digits in four bytes, big-endian, the sign in the top bit, negatives
    inverted) as a decimal128 array, through their unscaled values (at most 18 digits: an int64)."""
    import numpy as np
    import pyarrow as pa

    size = decimal_size(precision, scale)
    n = len(cells)
    mask = None
    if None in cells:
        mask = np.fromiter((c is None for c in cells), dtype=bool, count=n)
        zero = b"\x80" + bytes(size - 1)
        cells = [zero if c is None else c for c in cells]
    raw = b"".join(cells)
    if len(raw) != n * size:
        return None
    digits = np.frombuffer(raw, dtype=np.uint8).reshape(n, size).astype(np.int64)
    negative = (digits[:, 0] & 0x80) == 0
    digits = np.where(negative[:, None], 255 - digits, digits)
    digits[:, 0] ^= 0x80
    intg = precision - scale
    groups = ([(_DIG2BYTES[intg % 9], intg % 9)] if intg % 9 else []) + [(4, 9)] * (intg // 9 + scale // 9)
    if scale % 9:
        groups.append((_DIG2BYTES[scale % 9], scale % 9))
    unscaled = np.zeros(n, dtype=np.int64)
    at = 0
    for nbytes, ndigits in groups:
        group = np.zeros(n, dtype=np.int64)
        for i in range(at, at + nbytes):
            group = (group << 8) | digits[:, i]
        if (group >= 10**ndigits).any():
            return None  # corrupt bytes: the object decoder's reader makes of them what it makes
        unscaled = unscaled * 10**ndigits + group
        at += nbytes
    unscaled = np.where(negative, -unscaled, unscaled)
    words = np.empty(2 * n, dtype=np.int64)
    words[0::2] = unscaled
    words[1::2] = unscaled >> 63  # the high 64 bits: the sign extended
    validity = None if mask is None else pa.array(~mask).buffers()[1]
    return pa.Array.from_buffers(pa.decimal128(precision, scale), n, [validity, pa.py_buffer(words)])
