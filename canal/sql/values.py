"""Values whose stored form is not what ``SELECT`` shows: FLOAT and DOUBLE as the server prints them, and MariaDB's
``UUID``, ``INET6`` and ``INET4`` from the bytes a row image holds.

Every reader of a column's values -- the binlog decoder, the snapshot reader, the fake server, the mirror's DDL path
(an added column's DEFAULT) -- takes them from here, so a value is the same whichever path it came by.

**FLOAT and DOUBLE.** A column's value is the Python float of the text ``SELECT`` prints, the value a client reads
(pymysql parses that text): a FLOAT is its float32 printed with 6 significant digits (1.1, not 1.100000023841858), a
``FLOAT(M,D)`` or ``DOUBLE(M,D)`` its stored value printed with ``D`` decimals (123.4568 in a FLOAT(7,4), 1234.567 in
a FLOAT(10,3); the 6-digit rule would give 123.457 and 1234.57), a DOUBLE its own value. MariaDB prints a negative
zero as ``0`` (a FLOAT that underflows, ``-1e-50``, is stored and logged as -0.0); MySQL keeps its sign (``-0``).
The exact float32 value was the other choice: it is what the row holds, but not what any client shows, and a
mirror compared with ``SELECT`` would differ in every FLOAT cell.

**UUID, INET6, INET4** (MariaDB 10.7+ / 10.10+). A row image holds 16 / 16 / 4 bytes, logged as ``BINARY(n)``: the
binlog does not say the type, the schema does. A UUID is logged in its text order (``llllllll-mmmm-Vhhh-vsss-nnnnn``;
MariaDB 10.11 stores version 1-5 UUIDs with the time segments swapped in the row and its index, and writes the
unswapped order to the binlog, as a BINARY(16) replica expects), printed as lower-case hex in 8-4-4-4-12 groups.
INET6 is printed as the server's ``Inet6::to_string`` does: the longest run of zero groups (the first of equal ones,
a single zero group too) as ``::``, groups in lower-case hex without leading zeros, and an IPv4-compatible
(``::a.b.c.d``) or IPv4-mapped (``::ffff:a.b.c.d``) address with its last 32 bits dotted. INET4 is dotted decimal.
"""

from __future__ import annotations

import ipaddress
import math
import struct
from collections.abc import Callable
from typing import Final

__all__ = [
    "FIXED_BINARY_SIZES",
    "canonical_text",
    "fixed_binary_text",
    "float_display",
    "float_stored",
    "float_value",
    "inet4_text",
    "inet6_text",
    "uuid_text",
]

FLOAT_DIGITS: Final = 6
"""The significant digits the server prints of a FLOAT without declared decimals (FLT_DIG)."""

FIXED_BINARY_SIZES: Final = {"uuid": 16, "inet6": 16, "inet4": 4}
"""MariaDB's types stored as fixed-size binary strings, and their size in a row image (the binlog's BINARY(n))."""


def float_value(exact: float) -> float:
    """A FLOAT column's value (no declared decimals) from its float32 ``exact`` value, as MySQL prints it: rounded to
    6 significant digits (``SELECT`` shows 1.1 for the float32 nearest 1.1)."""
    return float(f"{exact:.{FLOAT_DIGITS}g}")


def float_display(single: bool, scale: int | None, *, mariadb: bool) -> Callable[[float], float] | None:
    """The function giving a FLOAT (``single``) or DOUBLE column's value as ``SELECT`` shows it from its stored value
    (see the module): ``scale`` its declared decimals (``FLOAT(M,D)``; None: not declared), ``mariadb`` whether the
    server prints a negative zero as 0. None when the stored value is the value (a MySQL DOUBLE)."""
    if scale is not None:
        if mariadb:
            return lambda exact: float(f"{exact:.{scale}f}") + 0.0
        return lambda exact: float(f"{exact:.{scale}f}")
    if single:
        return _float_mariadb if mariadb else float_value
    return _no_negative_zero if mariadb else None


def float_stored(number: float, single: bool, scale: int | None) -> float:
    """What a FLOAT (``single``) or DOUBLE column stores when ``number`` is assigned to it (a DEFAULT the server
    writes into the rows an ``ADD COLUMN`` gives it): with declared decimals its fraction rounded to them first, half
    to even (the server's ``rint``), then, for a FLOAT, the nearest float32. :func:`float_display` of it is what
    ``SELECT`` shows."""
    if scale is not None and math.isfinite(number):
        whole = math.floor(number)
        number = whole + round((number - whole) * 10**scale) / 10**scale
    if single:
        (number,) = struct.unpack("<f", struct.pack("<f", number))
    return number


def _float_mariadb(exact: float) -> float:
    return float(f"{exact:.{FLOAT_DIGITS}g}") + 0.0  # -0.0 + 0.0 is 0.0


def _no_negative_zero(exact: float) -> float:
    return exact + 0.0


def uuid_text(raw: bytes) -> str:
    """A UUID's 16 bytes (as the binlog holds them) as the server prints the value."""
    h = _full(raw, 16).hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def inet4_text(raw: bytes) -> str:
    """An INET4's 4 bytes as the server prints the address (dotted decimal)."""
    a, b, c, d = _full(raw, 4)
    return f"{a}.{b}.{c}.{d}"


def inet6_text(raw: bytes) -> str:
    """An INET6's 16 bytes as the server prints the address (see the module)."""
    data = _full(raw, 16)
    words = [data[i] << 8 | data[i + 1] for i in range(0, 16, 2)]
    gap_at, gap_len = -1, 0  # the longest run of zero words, the first of equal ones
    run_at = -1
    for i, word in enumerate([*words, 1]):  # a non-zero sentinel ends a run at the end
        if word == 0 and run_at < 0:
            run_at = i
        elif word != 0 and run_at >= 0:
            if i - run_at > gap_len:
                gap_at, gap_len = run_at, i - run_at
            run_at = -1
    if gap_at == 0 and (gap_len == 6 or (gap_len == 5 and words[5] == 0xFFFF)):
        prefix = "::" if gap_len == 6 else "::ffff:"
        return prefix + inet4_text(data[12:])  # IPv4-compatible or IPv4-mapped
    if gap_len == 0:
        return ":".join(f"{w:x}" for w in words)
    head = ":".join(f"{w:x}" for w in words[:gap_at])
    tail = ":".join(f"{w:x}" for w in words[gap_at + gap_len :])
    return f"{head}::{tail}"


def _full(raw: bytes, size: int) -> bytes:
    """The value's bytes: the binlog stores a BINARY(n) without its trailing zero bytes, the decoder pads them back;
    anything else than ``size`` bytes is not such a value (corrupt bytes)."""
    if len(raw) != size:
        raise ValueError(f"a {len(raw)}-byte value where {size} bytes are stored")
    return bytes(raw)


_TEXT: Final = {"uuid": uuid_text, "inet6": inet6_text, "inet4": inet4_text}


def fixed_binary_text(base: str) -> Callable[[bytes], str] | None:
    """The text of a ``base`` type's stored bytes (``uuid``, ``inet6``, ``inet4``); None for other types."""
    return _TEXT.get(base)


def canonical_text(base: str, text: str) -> str:
    """A UUID / INET6 / INET4 value given as text (a DEFAULT, a value handed to the fake) as the server prints it;
    ValueError when the server would not take the text as such a value."""
    if base == "uuid":
        return uuid_text(_uuid_bytes(text))
    if base == "inet6":
        return inet6_text(ipaddress.IPv6Address(text.strip()).packed)
    if base == "inet4":
        return inet4_text(_inet4_bytes(text))
    raise ValueError(f"no canonical text of a {base} value")


def _inet4_bytes(text: str) -> bytes:
    """The bytes of an IPv4 address's text as the server reads it: four decimal numbers of 1-3 digits each, leading
    zeros allowed (``010.1.1.1`` is 10.1.1.1; Python's ipaddress refuses them)."""
    parts = text.strip().split(".")
    if len(parts) != 4 or not all(p.isdigit() and p.isascii() and len(p) <= 3 and int(p) <= 255 for p in parts):
        raise ValueError(f"{text!r} is not an IPv4 address")
    return bytes(int(p) for p in parts)


def _uuid_bytes(text: str) -> bytes:
    """The bytes of a UUID's text as the server reads it: 32 hex digits, hyphens anywhere between two of them."""
    if len(text) < 32 or text.startswith("-") or text.endswith("-"):
        raise ValueError(f"{text!r} is not a UUID")
    digits = text.replace("-", "")
    if len(digits) != 32:
        raise ValueError(f"{text!r} is not a UUID")
    try:
        return bytes.fromhex(digits)
    except ValueError:
        raise ValueError(f"{text!r} is not a UUID") from None
