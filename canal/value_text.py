"""canal's text form of a typed value: what canal's ``Column.getValue()`` holds for the same cell, as ``SELECT``
prints it (:attr:`canal.protocol.Column.text` renders each cell with it; the mirror's comparisons, its change rows'
cell text and ``canal tail`` too).

FLOAT / DOUBLE print as Java's ``Double.toString`` (canal's), binary values one character per byte (ISO-8859-1),
temporal values as MySQL prints them, a column's fraction digits with :func:`render_fraction`.
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any

from canal.mysql_json import json_text, render_timedelta


def _java_double(value: float) -> str:
    """Java's ``Double.toString``: canal renders FLOAT/DOUBLE columns with it (shortest round-trip digits)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    if 1e-3 <= abs(value) < 1e7:
        text = repr(value)
        return text if "." in text else text + ".0"
    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits)).rstrip("0") or "0"
    power = len(digits) - 1 + exponent
    mantissa = text[0] + "." + (text[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{power}"


def render_fraction(value: dt.datetime | dt.time | dt.timedelta, fsp: int) -> str:
    """:func:`render_text` of a temporal value with exactly ``fsp`` (1-6) fraction digits, as ``SELECT`` prints a
    column of that precision (the value holds no digit beyond them)."""
    if isinstance(value, dt.timedelta):
        total_us = value // dt.timedelta(microseconds=1)
        micros = abs(total_us) % 1_000_000
        whole = render_timedelta(value - dt.timedelta(microseconds=micros if total_us >= 0 else -micros))
    else:
        micros = value.microsecond
        whole = render_text(value.replace(microsecond=0))
    return f"{whole}.{micros:06d}"[: len(whole) + 1 + fsp]


def render_text(value: Any) -> str:
    """canal's text form of a typed value: what ``Column.getValue()`` holds in canal for the same cell."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, float):
        return _java_double(value)
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        # canal turns binary values into a String with ISO-8859-1, one char per byte
        return bytes(value).decode("latin-1")
    # isoformat, not strftime: it pads years below 1000 to four digits as MySQL does, and adds the six
    # fraction digits only when there is a fraction
    if isinstance(value, dt.datetime):
        moment: dt.datetime = value if value.tzinfo is None else value.astimezone(dt.UTC).replace(tzinfo=None)
        return moment.isoformat(" ")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dt.time):
        return value.replace(tzinfo=None).isoformat()
    if isinstance(value, dt.timedelta):
        return render_timedelta(value)
    if isinstance(value, frozenset | set):
        return ",".join(sorted(str(v) for v in value))
    if isinstance(value, dict | list):
        return json_text(value)
    return str(value)
