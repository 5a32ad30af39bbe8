"""MySQL's packed binary DECIMAL: the form of DECIMAL columns in row images and of DECIMAL values inside MySQL's
binary JSON.

Digits are stored in groups of nine per 4 bytes (a shorter leading/trailing group takes 1-4 bytes), big-endian, the
sign in the top bit (inverted), negative values with every bit flipped. :func:`make_decimal_reader` compiles one
straight-line reader per (precision, scale), since the row decoder calls it once per cell.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from decimal import MAX_EMAX, MIN_EMIN, Context, Decimal
from typing import Any

_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)

MAX_PRECISION = 65  # MySQL and MariaDB
MAX_SCALE = 38  # MariaDB (MySQL stops at 30)

_EXACT = Context(prec=MAX_PRECISION, Emax=MAX_EMAX, Emin=MIN_EMIN, traps=[])
"""The context a reader scales its digits in: wide enough for any DECIMAL's, so nothing rounds (a thread's own context
-- 28 digits by default, or what the application set -- could)."""


def check_decimal_shape(precision: int, scale: int) -> None:
    """Raise ``ValueError`` for a (precision, scale) no server can declare (a corrupt table map or JSON value)."""
    if not 1 <= precision <= MAX_PRECISION or not 0 <= scale <= min(precision, MAX_SCALE):
        raise ValueError(f"impossible DECIMAL({precision},{scale})")


def decimal_size(precision: int, scale: int) -> int:
    """Bytes of a packed DECIMAL(precision, scale)."""
    intg = precision - scale
    return (intg // 9) * 4 + _DIG2BYTES[intg % 9] + (scale // 9) * 4 + _DIG2BYTES[scale % 9]


@functools.cache  # at most 65 x 39 shapes; binary JSON asks for one per DECIMAL value
def make_decimal_reader(precision: int, scale: int) -> Callable[[bytes], Decimal]:
    """A function decoding the packed DECIMAL(precision, scale) bytes."""
    check_decimal_shape(precision, scale)
    intg = precision - scale
    size = decimal_size(precision, scale)
    # groups from the most significant end: (bytes, digits)
    groups: list[tuple[int, int]] = []
    if intg % 9:
        groups.append((_DIG2BYTES[intg % 9], intg % 9))
    groups += [(4, 9)] * (intg // 9 + scale // 9)
    if scale % 9:
        groups.append((_DIG2BYTES[scale % 9], scale % 9))
    total_bits = size * 8
    sign_bit = 1 << (total_bits - 1)
    all_ones = (1 << total_bits) - 1
    # the value's digits as one integer (the groups' values times their places), then its exponent: Decimal's C code
    # makes that exactly, in a third less time than formatting the digits as text and parsing it again
    parts: list[tuple[int, int, int]] = []  # (shift, mask, multiplier)
    shift = total_bits
    digits_after = precision
    for nbytes, digits in groups:
        shift -= nbytes * 8
        digits_after -= digits
        parts.append((shift, (1 << (nbytes * 8)) - 1, 10**digits_after))
    terms = []
    for s, m, mul in parts:
        term = f"(v >> {s})" if s else "v"
        if s + m.bit_length() < total_bits or s == 0:
            term = f"({term} & {m})"
        terms.append(f"{term} * {mul}" if mul != 1 else term)
    scaled = " + ".join(terms) or "0"
    # copy_negate, not a negative integer: a negative zero keeps its sign, as the server's bytes have it
    exact = f".scaleb({-scale}, _EXACT)" if scale else ""
    src = (
        "def read(raw):\n"
        "    v = _from_bytes(raw, 'big')\n"
        f"    if v & {sign_bit}:\n"
        f"        v ^= {sign_bit}\n"
        f"        return _Decimal({scaled}){exact}\n"
        f"    v ^= {all_ones ^ sign_bit}\n"
        f"    return _Decimal({scaled}){exact}.copy_negate()\n"
    )
    ns: dict[str, Any] = {"_from_bytes": int.from_bytes, "_Decimal": Decimal, "_EXACT": _EXACT}
    exec(compile(src, f"<canal decimal({precision},{scale}) reader>", "exec"), ns)
    read: Callable[[bytes], Decimal] = ns["read"]
    return read
