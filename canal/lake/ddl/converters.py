"""The value conversions of an ALTER TABLE the mirror models, value by value, as MariaDB 10.11 makes them.

Each function here takes the values a mirror column holds (a pyarrow array of the column's stored type,
:func:`canal.lake.types.arrow_type`) and gives them as the server left them under the new type -- what ``SELECT``
shows after the statement, which rewrote every row without logging one. :mod:`canal.lake.ddl.conversions` chooses the
function (its allow-list, :data:`~canal.lake.ddl.conversions.MODELED`); a value outside what a function models is an
:class:`Unmodeled` raised with the value, which the caller turns into a typed stop naming table, column and types.

What was measured (under ``sql_mode=''``: a strict mode refuses what does not convert, so the ALTER fails and logs
nothing; the values a logged ALTER converted are those below):

* numbers to numbers: an integer or DECIMAL out of the new range becomes its nearest end (INT 1000 -> DECIMAL(3,1)
  99.9; -1 -> UNSIGNED 0); a DECIMAL rounds half away from zero (-1.235 -> -1.24, 2.5 -> INT 3); a DOUBLE becomes an
  integer by ``rint`` (half to even: 2.5 -> 2, 3.5 -> 4) and a DECIMAL through its shortest text (1.005 -> 1.01); a
  FLOAT is the float32 nearest the value, shown with 6 significant digits (DOUBLE 1e300 -> 3.40282e38);
* numbers to text: an integer's digits, a DECIMAL's text with its scale ('1.500'), YEAR with 4 digits ('0000'), BIT
  its number ('65', not 'A'); cut to the new length;
* text to numbers: the longest number the text begins with, after spaces or tabs ('12abc' -> 12, 'abc' -> 0); an
  integer takes digits only ('1.5' -> 1, '1e3' -> 1), a DECIMAL or DOUBLE a decimal number with an exponent ('1e3' ->
  1000, '12.345abc' -> DECIMAL(6,2) 12.35, rounded half away from zero);
* text to text: a character the new charset lacks becomes one '?' (latin1 is MariaDB's: cp1252, its five gaps
  the C1 controls of the same code); then cut to the new length (CHAR / VARCHAR: characters, TEXT types: bytes, at a
  character's end); a CHAR drops its trailing spaces;
* text to bytes: the text in its charset's bytes (not UTF-8 where the column is latin1), cut, a BINARY(n) padded
  with zero bytes; bytes to text: read in the new charset (bytes that are no character of it: not modeled);
* ENUM and SET: a label goes to the new label of the same text (a reordered list keeps the values); a label the new
  list lacks becomes '' (the ENUM's empty value; dropped from a SET); a number is the index (ENUM, 0 and beyond the
  labels are '') or the bitmap (SET, bits beyond the labels dropped); to a number, the index or bitmap;
* YEAR from a number: 1-69 -> 2001-2069, 70-99 -> 1970-1999, 0 and 1901-2155 as they are, others 0; BIT from a
  number: its bits, a value beyond the width (or negative) the largest;
* temporal: fractional seconds cut to fewer digits are truncated, or rounded half up under ``TIME_ROUND_FRACTIONAL``
  (a TIME towards / away from zero), then a value beyond the type's range is its end (a DATETIME at 9999-12-31
  23:59:59, a TIME at +-838:59:59) -- for a TIMESTAMP the zero TIMESTAMP (before 1970-01-01 00:00:01 or after
  2038-01-19 03:14:07.999999 UTC); a DATE becomes midnight, a DATETIME its DATE (truncated) or its time of day;
* UUID, INET6, INET4: their text, or their 16 / 16 / 4 bytes (a UUID in its text order), a BINARY(n) padded with
  zero bytes; text to them: the text read as one;
* a column made NOT NULL: its NULLs become the type's zero value (0, '', a zero date, 00:00:00, the zero UUID) --
  not its DEFAULT, and not an ENUM's first label.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import struct
from collections.abc import Callable, Sequence
from decimal import ROUND_HALF_UP, Context, Decimal
from typing import Any, Final

from canal.sql.types import BLOB_TYPES, INTEGER_TYPES, ColumnType
from canal.sql.values import FIXED_BINARY_SIZES, canonical_text, float_value

Values = Callable[[Any], Any]
"""A conversion of a column's values: pyarrow array in, pyarrow array out."""


class Unmodeled(ValueError):
    """A value the conversion does not model (``value``: the value, ``why``: what about it)."""

    def __init__(self, value: Any, why: str) -> None:
        super().__init__(why)
        self.value = value
        self.why = why


# -- limits -------------------------------------------------------------------------------------------------------

_TEXT_BYTES: Final = {"tinytext": 255, "text": 65535, "mediumtext": 16777215, "longtext": 4294967295}
_BLOB_BYTES: Final = {"tinyblob": 255, "blob": 65535, "mediumblob": 16777215, "longblob": 4294967295}
_FLT_MAX: Final = struct.unpack("<f", b"\xff\xff\x7f\x7f")[0]
_DAY_US: Final = 86_400_000_000
_TIME_MAX_S: Final = 838 * 3600 + 59 * 60 + 59
_DATETIME_MAX_US: Final = int((dt.datetime(9999, 12, 31, 23, 59, 59) - dt.datetime(1970, 1, 1)).total_seconds()) * 10**6
_TIMESTAMP_FIRST_S: Final = 1  # 1970-01-01 00:00:01 UTC: 00:00:00 is the zero TIMESTAMP
_TIMESTAMP_LAST_S: Final = 2**31 - 1  # 2038-01-19 03:14:07 UTC
_INT64_MAX: Final = 2**63 - 1


def integer_bounds(t: ColumnType) -> tuple[int, int]:
    """The values an integer type holds."""
    bits = 8 * INTEGER_TYPES[t.base]
    return (0, 2**bits - 1) if t.unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


_EXACT: Final = Context(prec=100)  # holds every DECIMAL(65,30) exactly (the default context rounds to 28 digits)


def decimal_bounds(t: ColumnType) -> tuple[Decimal, Decimal, int]:
    """A DECIMAL type's smallest and largest values, and its scale."""
    precision, scale = t.precision or 10, t.scale or 0
    largest = Decimal(10 ** (precision - scale) * 10**scale - 1).scaleb(-scale, context=_EXACT)
    return (Decimal(0).scaleb(-scale) if t.unsigned else largest.copy_negate()), largest, scale


def fsp(t: ColumnType) -> int:
    """The fractional digits of a TIME / DATETIME / TIMESTAMP type."""
    return t.params[0] if t.params else 0


# -- charsets -----------------------------------------------------------------------------------------------------


def _latin1_table() -> str:
    chars = []
    for byte in range(256):
        try:
            chars.append(bytes([byte]).decode("cp1252"))
        except UnicodeDecodeError:
            chars.append(chr(byte))  # cp1252's five gaps: MariaDB maps them to the C1 control of the same code
    return "".join(chars)


_LATIN1: Final = _latin1_table()
_LATIN1_BYTES: Final = {char: byte for byte, char in enumerate(_LATIN1)}


def _holds(charset: str, char: str) -> bool:
    if charset == "utf8mb4":
        return True
    if charset in ("utf8mb3", "utf8"):
        return ord(char) <= 0xFFFF
    if charset == "latin1":
        return char in _LATIN1_BYTES
    return ord(char) < 0x80  # ascii


def in_charset(text: str, charset: str) -> str:
    """``text`` stored in a column of ``charset`` (one of :data:`canal.schema.conversions.TEXT_CHARSETS`): a
    character it lacks is '?'."""
    if charset == "utf8mb4" or text.isascii():
        return text
    return "".join(c if _holds(charset, c) else "?" for c in text)


def encoded(text: str, charset: str) -> bytes:
    """``text`` as the bytes ``charset`` stores it in (every character is one of the charset's)."""
    if charset == "latin1":
        return bytes(_LATIN1_BYTES[c] for c in text)
    return text.encode("ascii" if charset == "ascii" else "utf-8")


def decoded(raw: bytes, charset: str) -> str:
    """Bytes read as ``charset``'s characters; :class:`Unmodeled` for bytes that are no character of it (the server
    stores '?' for them, a count the mirror does not model)."""
    if charset == "latin1":
        return "".join(_LATIN1[b] for b in raw)
    try:
        text = raw.decode("ascii" if charset == "ascii" else "utf-8")
    except UnicodeDecodeError:
        raise Unmodeled(raw, f"bytes that are no {charset} text") from None
    if charset in ("utf8mb3", "utf8") and any(ord(c) > 0xFFFF for c in text):
        raise Unmodeled(raw, "a character utf8mb3 lacks")
    return text


def text_fit(text: str, t: ColumnType) -> str:
    """Text (in the charset of ``t``) cut to what a text type holds: CHAR / VARCHAR its length in characters, TEXT
    types their bytes (at a character's end); a CHAR without trailing spaces."""
    if t.base in ("char", "varchar"):
        text = text[: t.params[0] if t.params else 1]
    else:
        limit = _TEXT_BYTES.get(t.base, 0)
        charset = t.charset or "utf8mb4"
        if len(text) * (1 if charset in ("latin1", "ascii") else 4) > limit:
            raw = encoded(text, charset)[:limit]
            text = raw.decode("utf-8", "ignore") if charset not in ("latin1", "ascii") else decoded(raw, charset)
    return text.rstrip(" ") if t.base == "char" else text


def bytes_fit(raw: bytes, t: ColumnType) -> bytes:
    """Bytes cut to what a binary type holds; a BINARY(n) (or CHAR(n) in the binary charset) padded with zero bytes."""
    if t.base in BLOB_TYPES and t.base not in ("binary", "varbinary"):
        return raw[: _BLOB_BYTES[t.base]]
    if t.base in _TEXT_BYTES:  # a TEXT type in the binary charset: a BLOB
        return raw[: _TEXT_BYTES[t.base]]
    size = t.params[0] if t.params else 1
    raw = raw[:size]
    return raw.ljust(size, b"\0") if t.base in ("binary", "char") else raw


# -- numbers ------------------------------------------------------------------------------------------------------

_LEADING: Final = " \t"  # measured: spaces and tabs before a number are read past
_INT_PREFIX: Final = re.compile(r"[+-]?[0-9]+")
_NUMBER_PREFIX: Final = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _number_text(text: str, pattern: re.Pattern[str]) -> str | None:
    """The number ``text`` begins with (after spaces and tabs), None when it begins with none (a letter, any
    character that is neither a space nor a digit nor a sign); Unmodeled where the server may read more than the
    mirror."""
    rest = text.lstrip(_LEADING)
    match = pattern.match(rest)
    if match is not None:
        return match.group()
    if _NUMBER_PREFIX.match(rest) is not None:
        return None  # a number without leading digits, into an integer ('.5' is 0)
    if rest and (rest[0].isspace() or rest[0].isdigit() or rest[0] in "+-."):
        # another space character (a newline, U+00A0), a digit that is not ASCII (U+FF15), a sign the server may read
        # past: what it reads there is not measured
        raise Unmodeled(text, "text that begins with a space character, a digit or a sign the mirror does not read")
    return None


def text_integer(text: str) -> int:
    """The integer the server reads from text going to an integer column: its leading digits ('1.5' -> 1)."""
    number = _number_text(text, _INT_PREFIX)
    return 0 if number is None else int(number)


def text_decimal(text: str) -> Decimal:
    """The decimal number the server reads from text going to a DECIMAL or DOUBLE column."""
    number = _number_text(text, _NUMBER_PREFIX)
    return Decimal(0) if number is None else Decimal(number)


def clip_integer(value: int, t: ColumnType) -> int:
    low, high = integer_bounds(t)
    return min(max(value, low), high)


def to_integer(value: int | Decimal | float, t: ColumnType) -> int:
    """A number in an integer column: a DECIMAL rounded half away from zero, a DOUBLE to even (``rint``), then its
    range's nearest end. A BIGINT UNSIGNED from a DECIMAL or DOUBLE at or past 2**63: Unmodeled (the server gives
    2**63-1 for 1e30)."""
    if isinstance(value, float):
        whole: int | Decimal = round(value) if math.isfinite(value) else (_INT64_MAX if value > 0 else -_INT64_MAX)
    elif isinstance(value, Decimal):
        whole = value.to_integral_value(rounding=ROUND_HALF_UP)
    else:
        whole = value
    if not isinstance(value, int) and t.unsigned and t.base == "bigint" and whole > _INT64_MAX:
        raise Unmodeled(value, "a number at or past 2**63 into BIGINT UNSIGNED")
    return clip_integer(int(whole), t)


def to_decimal(value: int | Decimal | float, t: ColumnType) -> Decimal:
    """A number in a DECIMAL column: a DOUBLE through its shortest text, rounded half away from zero to the scale,
    then the range's nearest end."""
    low, high, scale = decimal_bounds(t)
    number = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    if number > high:
        return high
    if number < low:
        return low
    rounded = number.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP, context=_EXACT)
    rounded = min(max(rounded, low), high)
    return abs(rounded) if rounded == 0 else rounded  # no negative zero


def to_double(value: int | Decimal | float) -> float:
    number = float(value)
    if not math.isfinite(number):
        raise Unmodeled(value, "a number beyond DOUBLE's range")
    return number


def to_float(value: int | Decimal | float) -> float:
    """A number in a FLOAT column (no declared decimals), as ``SELECT`` shows it: the nearest float32 (within
    FLOAT's range), 6 significant digits, no negative zero."""
    number = float(value)
    if math.isnan(number):
        raise Unmodeled(value, "not a number")
    number = min(max(number, -_FLT_MAX), _FLT_MAX)
    (single,) = struct.unpack("<f", struct.pack("<f", number))
    return float_value(single) + 0.0


def to_year(value: int) -> int:
    """An integer in a YEAR column: 1-69 and 70-99 are 2001-2069 and 1970-1999; 0 and 1901-2155 themselves; others
    0."""
    if value == 0 or 1901 <= value <= 2155:
        return value
    if 1 <= value <= 69:
        return 2000 + value
    if 70 <= value <= 99:
        return 1900 + value
    return 0


def to_bit(value: int, t: ColumnType) -> int:
    """An integer in a BIT(n) column: its bits; negative or beyond the width, the largest value -- but a BIT(64) takes
    a negative one's 64-bit two's complement (measured on 10.11: BIGINT -5 becomes 2**64 - 5, -2**63 becomes 2**63,
    where a BIT(63) or BIT(8) takes its largest value)."""
    bits = t.params[0] if t.params else 1
    if bits == 64 and -(2**63) <= value < 0:
        return value + 2**64
    largest = 2**bits - 1
    return largest if value < 0 or value > largest else value


def decimal_text(value: Decimal) -> str:
    """A DECIMAL's text as the server prints it (its scale's digits, never an exponent)."""
    return format(value, "f")


# -- ENUM and SET -------------------------------------------------------------------------------------------------

_PLAIN: Final = re.compile(r"[\x20-\x7e]*")  # printable ASCII: no collation makes two such texts equal unless ...


def label_of(text: str, labels: Sequence[str]) -> str | None:
    """The label of ``labels`` a text stores as in an ENUM (or a SET member), None for none ('' in an ENUM, left
    out of a SET). Certain where the text is a label (a column's collation never makes two labels equal), or where
    the text and the labels are printable ASCII, equal to none even ignoring case, and not a number (an ENUM reads
    digits as an index): anything else depends on the collation, and is Unmodeled."""
    text = text.rstrip(" ")
    if text in labels:
        return text
    if text == "":
        return None
    if not _PLAIN.fullmatch(text) or not all(_PLAIN.fullmatch(label) for label in labels):
        raise Unmodeled(text, "text that is no label, compared by the column's collation")
    if any(label.lower() == text.lower() for label in labels):
        raise Unmodeled(text, "a label in another case (the collation decides)")
    if text.lstrip(" ").isdigit():
        raise Unmodeled(text, "digits, which the server reads as an index")
    return None


def set_labels(text: str, labels: Sequence[str]) -> str:
    """A SET's value for text: its members' labels, in the new list's order, those it lacks left out."""
    if text.strip(" ").isdigit():
        raise Unmodeled(text, "digits, which the server reads as a bitmap")
    found = {label_of(member, labels) for member in text.split(",") if member}
    return ",".join(label for label in labels if label in found)


def enum_index(text: str, labels: Sequence[str]) -> int:
    """An ENUM's value as a number: its label's index from 1 ('' is 0)."""
    return labels.index(text) + 1 if text in labels else 0


def set_bitmap(text: str, labels: Sequence[str]) -> int:
    """A SET's value as a number: the bits of its labels."""
    members = set(text.split(",")) if text else set()
    return sum(1 << i for i, label in enumerate(labels) if label in members)


def enum_of_index(value: int, labels: Sequence[str]) -> str:
    return labels[value - 1] if 1 <= value <= len(labels) else ""


def set_of_bitmap(value: int, labels: Sequence[str]) -> str:
    bits = value % 2**64  # a negative number is its 64-bit two's complement
    return ",".join(label for i, label in enumerate(labels) if bits >> i & 1)


# -- UUID / INET --------------------------------------------------------------------------------------------------


def fixed_bytes(text: str, base: str) -> bytes:
    """The stored bytes of a UUID / INET6 / INET4 value (its text; a UUID in its text order)."""
    import ipaddress

    if base == "uuid":
        return bytes.fromhex(text.replace("-", ""))
    if base == "inet6":
        return ipaddress.IPv6Address(text).packed
    return bytes(int(part) for part in text.split("."))


def fixed_text(text: str, base: str) -> str:
    """Text read as a UUID / INET6 / INET4 value (its printed form); Unmodeled for text the mirror does not read as
    one (the server stores NULL, or reads more forms than the mirror)."""
    try:
        return canonical_text(base, text)
    except ValueError:
        raise Unmodeled(text, f"text the mirror does not read as {base.upper()}") from None


def fixed_zero(base: str) -> str:
    return canonical_text(base, {"uuid": "0" * 32, "inet6": "::", "inet4": "0.0.0.0"}[base])


FIXED: Final = frozenset(FIXED_BINARY_SIZES)


# -- temporal -----------------------------------------------------------------------------------------------------


def narrow_fraction(micros: int, digits: int, rule: str | None, signed: bool) -> int:
    """A time (``micros``, since the epoch or, ``signed``, a TIME's duration) with ``digits`` fractional digits:
    truncated, or rounded half up (``rule`` 'round'; a TIME half away from zero); None as ``rule`` (the statement's
    sql_mode is unknown): Unmodeled when digits are cut."""
    unit: int = 10 ** (6 - digits)
    if micros % unit == 0:
        return micros
    if rule is None:
        raise Unmodeled(micros, "fractional seconds cut under a sql_mode the mirror does not know")
    if signed:
        magnitude = abs(micros)
        magnitude = magnitude - magnitude % unit + (unit if rule == "round" and magnitude % unit * 2 >= unit else 0)
        return magnitude if micros >= 0 else -magnitude
    return micros - micros % unit + (unit if rule == "round" and micros % unit * 2 >= unit else 0)


def datetime_clip(micros: int, digits: int) -> int:
    """A DATETIME rounded past 9999-12-31 23:59:59 is its last value (the server warns, and keeps it)."""
    last: int = _DATETIME_MAX_US + (10**6 - 10 ** (6 - digits))
    return min(micros, last)


def timestamp_in_range(micros: int) -> bool:
    seconds = micros // 10**6
    return _TIMESTAMP_FIRST_S <= seconds <= _TIMESTAMP_LAST_S


def time_micros(text: str) -> int:
    """A TIME's text ('-838:59:59.5') as signed microseconds."""
    sign = -1 if text.startswith("-") else 1
    whole, _, fraction = text.lstrip("-").partition(".")
    hours, minutes, seconds = (int(part) for part in whole.split(":"))
    return sign * ((hours * 3600 + minutes * 60 + seconds) * 10**6 + int(fraction.ljust(6, "0")[:6] or 0))


def time_text(micros: int, digits: int) -> str:
    """Signed microseconds as a TIME's text with ``digits`` fractional digits (clipped to +-838:59:59)."""
    last = _TIME_MAX_S * 10**6 + (10**6 - 10 ** (6 - digits))
    magnitude = min(abs(micros), last)
    seconds, fraction = divmod(magnitude, 10**6)
    hours, rest = divmod(seconds, 3600)
    text = f"{'-' if micros < 0 and magnitude else ''}{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
    return text + (f".{fraction:06d}"[: digits + 1] if digits else "")


def datetime_text(micros: int, digits: int, date_only: bool = False) -> str:
    """Microseconds since the epoch as a DATETIME's (or DATE's) text, year 0 included."""
    days, of_day = divmod(micros, _DAY_US)
    date = _date_text(days)
    if date_only:
        return date
    seconds, fraction = divmod(of_day, 10**6)
    text = f"{date} {seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    return text + (f".{fraction:06d}"[: digits + 1] if digits else "")


def _date_text(days: int) -> str:
    """Days since the epoch as 'YYYY-MM-DD' (proleptic Gregorian, year 0 -- which Python's date lacks -- too)."""
    cycles, rest = divmod(days, 146097)  # the calendar repeats every 400 years (146097 days)
    date = dt.date(1970, 1, 1) + dt.timedelta(days=rest)
    return f"{date.year + 400 * cycles:04d}-{date.month:02d}-{date.day:02d}"


# -- the Arrow side -----------------------------------------------------------------------------------------------


def each(column: Any, target: Any, convert: Callable[[Any], Any]) -> Any:
    """``column``'s values (Python objects; NULL stays NULL) mapped by ``convert`` into an array of ``target``."""
    import pyarrow as pa

    out = [None if value is None else convert(value) for value in column.to_pylist()]
    return pa.array(out, target)


def each_int(column: Any, target: Any, convert: Callable[[int], Any]) -> Any:
    """``column`` (date32 or timestamp[us]: days or microseconds) as integers mapped by ``convert`` (None: NULL),
    cast to ``target`` -- through integers, so that year 0 (which Python's date lacks) converts too."""
    import pyarrow as pa

    numbers = column.cast(pa.int32() if pa.types.is_date32(column.type) else pa.int64()).to_pylist()
    out = [None if n is None else convert(n) for n in numbers]
    if pa.types.is_date32(target) or pa.types.is_timestamp(target):  # days or microseconds: through integers
        return pa.array(out, pa.int32() if pa.types.is_date32(target) else pa.int64()).cast(target)
    return pa.array(out, target)
