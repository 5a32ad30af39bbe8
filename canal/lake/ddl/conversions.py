"""Every value conversion of an ALTER TABLE, modeled exactly or a typed stop: the mirror's contract for its DDL.

``ALTER TABLE ... MODIFY / CHANGE`` (and ``CONVERT TO CHARACTER SET``, and ``ADD PRIMARY KEY`` on a column holding
NULLs) rewrites every row of the table without logging one; the mirror converts the values it holds itself. Which
conversions it models is one allow-list, :data:`MODELED`, by the families of the column's type before and after the
statement (:func:`family`): a pair not in it -- or in it, with parameters its function does not model (a FLOAT(M,D)
target, a charset the mirror does not know) -- is a :class:`~canal.lake.types.MirrorConversionError` naming the
table, the column, both types and the statement, raised before anything of the step is written (for the pairs the
schema history names, before anything of the batch: :func:`check_batch_conversions`); so is a value a modeled
conversion meets outside what it models (text the server reads as a number in ways the mirror does not follow, a
fraction cut under a sql_mode it does not know). How each modeled conversion converts: :mod:`canal.lake.ddl.converters`.

A column's type before the statement is the schema history's (:data:`~canal.parse.convert.RETYPED_FROM_PROP`), and
its type after it too (:data:`~canal.parse.convert.RETYPED_TO_PROP`: the charset a MODIFY without one takes from the
table, what CONVERT TO makes of each text column), else what the statements of the step declared. Without a schema
history the type before is unknown: the mirror then converts only where the column's stored kind decides the result
whatever the type was (a 64-bit integer's values to another integer, DECIMAL or DOUBLE type; a DECIMAL's; a DATE's
to DATE / DATETIME / TIMESTAMP; a DATETIME's or TIMESTAMP's to DATE, DATETIME or TIMESTAMP), and stops elsewhere.
A statement that changes nothing but a column's comment, default, NULL-ness or position converts nothing (a column
made NOT NULL: its NULLs take the type's zero value, as the server gives them under a lax sql_mode).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any, Final

import attrs

from canal.lake.ddl import converters as cv
from canal.lake.ddl.ddl_text import statement_mode
from canal.lake.ddl.narrowing import fit_declared
from canal.lake.ddl.time_zones import StatementZone, shift
from canal.lake.types import MirrorConversionError, MirrorTypeError, ZeroDates, arrow_type
from canal.parse.convert import COMPUTED_PROP, RETYPED_FROM_PROP, RETYPED_TO_PROP
from canal.parse.statement_props import SERVER_VERSION_PROP, SQL_MODE_PROP
from canal.schema import TableColumn, TableDef, mysql_type_text, type_with_charset
from canal.schema.computed import numbering_why, parse_computed, reads_column, regenerated_why
from canal.schema.conversions import PAIRS, TEXT_CHARSETS, family, unmodeled
from canal.schema.conversions import fractions_rule as rule_of_fractions
from canal.sql import AlterTable, ChangeColumn, ConvertCharset, read_column_type
from canal.sql.types import ColumnType

__all__ = [
    "KEPT",
    "MODELED",
    "UNKNOWN_CHARSET",
    "Conversion",
    "check_batch_conversions",
    "family",
    "fractions_rule",
    "statement_conversions",
]

KEPT: Final = "?"
"""The base type of a column whose MySQL definition a mirror's catalog does not know (it keeps its type)."""
UNKNOWN_CHARSET: Final = "unknown"
"""The default charset of a table a mirror's catalog knows only by its columns' names."""


def fractions_rule(state: Mapping[str, str]) -> str | None:
    """How the statement of a DDL row's props cut fractional seconds
    (:func:`canal.schema.conversions.fractions_rule` of its sql_mode and server version)."""
    return rule_of_fractions(state.get(SQL_MODE_PROP), state.get(SERVER_VERSION_PROP, ""))


Build = Callable[[ColumnType, ColumnType, "Conversion"], "cv.Values | str"]
"""A modeled pair's conversion for two types of those families: the function of the column's values, or why these
types are not modeled (a stop)."""


@attrs.frozen(slots=True)
class Conversion:
    """What one statement does to one column's values: ``old`` / ``new`` its type before and after (MySQL type text,
    with the charset where it holds text; ``old`` None: unknown, ``new`` None: the column's type is unknown and kept,
    only its charset converted -- CONVERT TO CHARACTER SET without a schema history), ``nullable`` whether the column
    takes NULL after it, ``fractions`` the statement's :func:`fractions_rule`; ``column`` / ``name`` the column's name
    before and after, ``table`` (``schema.table``), ``sql`` and ``zone`` the statement."""

    table: str
    column: str
    name: str
    old: str | None
    new: str | None
    nullable: bool
    sql: str
    zone: StatementZone
    fractions: str | None = None
    recharset: bool = False  # CONVERT TO CHARACTER SET of a column whose type is unknown (``new`` None)
    zero_dates: ZeroDates = "error"  # the mirror's (set by apply): how it holds the zero TIMESTAMP a value becomes
    # values the server computes again (canal.schema.computed): why, when it does every row's (a generated column);
    # and AUTO_INCREMENT made, which numbers the NULLs anew -- and the zeros, unless ``keeps_zero``
    recomputed: str | None = None
    numbered: bool = False
    keeps_zero: bool = False

    @property
    def identity(self) -> bool:
        """Whether the values stay as they are (the same type; its NULL-ness aside)."""
        return self.old is not None and self.old == self.new

    def stop(self, why: str, value: Any = None) -> MirrorConversionError:
        shown = "" if value is None else f" (the value {_shown(value)})"
        return MirrorConversionError(
            f"{self.table}: {self.sql[:200]!r} converts column {self.column!r} from {self.old or 'a type unknown'} "
            f"to {self.new or 'a type unknown'}: {why}{shown}, which the mirror does not reproduce exactly. Nothing of "
            "the step was written. Mirror the table anew from a snapshot taken after the statement.",
            table=self.table,
            column=self.column,
            from_type=self.old,
            to_type=self.new,
            statement=self.sql,
        )

    def check(self) -> None:
        """The typed stop when the pair of types is not modeled (the values aside); nothing when it is, or when the
        type before is unknown (decided by the column's values, :meth:`apply`)."""
        if self.old is not None and self.new is not None and not self.identity:
            self._values(read_column_type(self.old, strict=False))

    def _values(self, old: ColumnType) -> cv.Values:
        assert self.new is not None
        new = read_column_type(self.new, strict=False)
        why = unmodeled(old, new)  # (the pairs of PAIRS, and their parameters)
        if why is not None:
            raise self.stop(why)
        made = MODELED[(family(old), family(new))](old, new, self)
        if isinstance(made, str):
            raise self.stop(made)
        return made

    def apply(self, column: Any, zero_dates: ZeroDates) -> Any:
        """``column`` (the mirror's values of the column before the statement) as the server left them."""
        import pyarrow as pa

        if zero_dates != self.zero_dates:
            return attrs.evolve(self, zero_dates=zero_dates).apply(column, zero_dates)
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        if self.recomputed is not None and len(column):
            raise self.stop(self.recomputed)
        if self.numbered:
            self._check_numbering(column)
        sourced_nulls = column.null_count
        if self.new is None:  # a column whose type is unknown: converted to another charset, or made NOT NULL
            if self.recharset and (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
                raise self.stop("the column may hold text, converted to a charset")
            if not self.nullable and sourced_nulls:
                return self._zero_by_kind(column, zero_dates)
            return column
        new = read_column_type(self.new, strict=False)
        converted = column
        if not self.identity and _only_nulls(column):  # no value: NULL is NULL whatever the types
            dated = pa.types.is_date32(column.type) or pa.types.is_timestamp(column.type)
            if zero_dates == "null" and sourced_nulls and dated and family(new) not in _DATED:
                raise self.stop("a NULL the mirror holds may be a zero date (zero_dates='null'), which becomes a value")
            converted = pa.nulls(len(column), arrow_type(self.new))
        elif not self.identity:
            old = self._known_or_assumed(column, new)
            if zero_dates == "null" and sourced_nulls and family(old) in _DATED and family(new) not in _DATED:
                raise self.stop("a NULL the mirror holds may be a zero date (zero_dates='null'), which becomes a value")
            try:
                converted = self._values(old)(column)
            except cv.Unmodeled as exc:
                raise self.stop(exc.why, exc.value) from None
        if not self.nullable and sourced_nulls:
            converted = self._zero_filled(column, converted, new, zero_dates)
        return converted

    def _check_numbering(self, column: Any) -> None:
        """AUTO_INCREMENT made: the typed stop where the server numbered values anew -- a NULL, or a zero outside
        NO_AUTO_VALUE_ON_ZERO (:mod:`canal.schema.computed`); the values stay otherwise."""
        import pyarrow as pa
        import pyarrow.compute as pc

        held = "NULLs and zeros" if not self.keeps_zero else "NULLs"
        why = f"made AUTO_INCREMENT, the server numbers its {held} anew (in the order it copies the rows)"
        if column.null_count:
            raise self.stop(why, None)
        if self.keeps_zero or not len(column):
            return
        kind = column.type
        if not (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)):
            raise self.stop(why)
        if pc.any(pc.equal(column, pa.scalar(0).cast(column.type))).as_py():
            raise self.stop(why, 0)

    def _known_or_assumed(self, column: Any, new: ColumnType) -> ColumnType:
        """The type before the statement: known, or (no schema history) one of the types stored like ``column`` for
        which every such type converts alike to ``new``; a stop where none is."""
        import pyarrow as pa

        if self.old is not None:
            return read_column_type(self.old, strict=False)
        kind, target = column.type, family(new)
        assumed = None
        if target in _NUMBERS_UNKNOWN and pa.types.is_integer(kind):
            assumed = "bigint"  # an integer, YEAR or BIT: their number converts
        elif target in _NUMBERS_UNKNOWN and pa.types.is_decimal(kind):
            assumed = f"decimal({kind.precision},{kind.scale})"  # a DECIMAL, BIGINT UNSIGNED or BIT(64)
        elif target in _DATED and pa.types.is_date32(kind):
            assumed = "date"
        elif target in _DATED and pa.types.is_timestamp(kind):
            assumed = "datetime(6)"  # a TIMESTAMP's values are DATETIMEs within its range
        if assumed is None:
            raise self.stop(
                "its type before the statement is unknown (the entry names none: no schema history, or one that "
                "started after the statement)"
            )
        return read_column_type(assumed, strict=False)

    def _zero_by_kind(self, column: Any, zero_dates: ZeroDates) -> Any:
        """NULLs made the zero value of a column whose type is unknown, where its stored kind decides it (a number's
        0, a date's zero date)."""
        import pyarrow as pa

        kind = column.type
        if pa.types.is_integer(kind) or pa.types.is_decimal(kind) or pa.types.is_floating(kind):
            return self._zero_filled(column, column, _BIGINT if not pa.types.is_floating(kind) else _DOUBLE, zero_dates)
        if pa.types.is_date32(kind):
            return self._zero_filled(column, column, ColumnType("date", "date"), zero_dates)
        raise self.stop("NULLs become the zero value of a type the mirror does not know")

    def _zero_filled(self, source: Any, converted: Any, new: ColumnType, zero_dates: ZeroDates) -> Any:
        """The NULLs of ``source`` as the type's zero value in ``converted``: a column made NOT NULL."""
        import pyarrow as pa
        import pyarrow.compute as pc

        kind = family(new)
        if kind in ("date", "datetime"):
            if zero_dates == "null":
                return converted
            raise self.stop("NULLs become the zero date, which the mirror holds only with zero_dates='null'")
        zero = _ZERO.get(kind)
        if zero is None:
            raise self.stop(f"NULLs become {kind.upper()}'s value for NOT NULL (the current time, or none)")
        value = zero(new)
        target = converted.type
        return pc.if_else(pc.is_null(source), pa.scalar(value, target), converted)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


_DAY_US: Final = 86_400_000_000
_DATED: Final = frozenset({"date", "datetime", "timestamp"})
_NUMBERS_UNKNOWN: Final = frozenset({"integer", "decimal", "double", "float"})

_ZERO: Final[dict[str, Callable[[ColumnType], Any]]] = {
    "integer": lambda t: Decimal(0) if t.unsigned and t.base == "bigint" else 0,
    "decimal": lambda t: Decimal(0) if (t.precision or 10) <= 38 else cv.decimal_text(cv.to_decimal(0, t)),
    "float": lambda _t: 0.0,
    "double": lambda _t: 0.0,
    "year": lambda _t: 0,
    "bit": lambda t: Decimal(0) if (t.params[0] if t.params else 1) == 64 else 0,
    "text": lambda _t: "",
    "enum": lambda _t: "",
    "set": lambda _t: "",
    "binary": lambda t: cv.bytes_fit(b"", t),
    "time": lambda t: cv.time_text(0, cv.fsp(t)),
    "uuid": lambda _t: cv.fixed_zero("uuid"),
    "inet6": lambda _t: cv.fixed_zero("inet6"),
    "inet4": lambda _t: cv.fixed_zero("inet4"),
}


# -- numbers ------------------------------------------------------------------------------------------------------


def _reader(old: ColumnType) -> Callable[[Any], int | Decimal | float] | None:
    """A value of a numeric family as a Python number; None for a family that is not one the mirror reads exactly
    (a FLOAT holds its float32 rounded to 6 digits; a DOUBLE(M,D) its value rounded to D decimals)."""
    kind = family(old)
    if kind in ("integer", "year", "bit"):
        return int
    if kind == "decimal":
        return Decimal
    if kind == "double" and old.scale is None:
        return float
    if kind == "enum":
        return lambda label: cv.enum_index(label, old.labels)
    if kind == "set":
        return lambda text: cv.set_bitmap(text, old.labels)
    return None


def _writer(new: ColumnType, conv: Conversion) -> Callable[[Any], Any] | str:
    """A number into a column of ``new``'s numeric family (its stored value), or why it is not modeled."""
    kind = family(new)
    if kind == "integer":
        wide = new.unsigned and new.base == "bigint"  # stored as decimal(20,0)
        return lambda n: Decimal(cv.to_integer(n, new)) if wide else cv.to_integer(n, new)
    if kind == "decimal":
        if (new.precision or 10) > 38:  # stored as its text
            return lambda n: cv.decimal_text(cv.to_decimal(n, new))
        return lambda n: cv.to_decimal(n, new)
    if kind == "double":
        return cv.to_double
    if kind == "float":
        return cv.to_float
    return f"a number into {kind.upper()}"


def _number_to_number(old: ColumnType, new: ColumnType, conv: Conversion) -> cv.Values | str:
    integers = family(old) in ("integer", "year", "bit") and family(new) == "integer"
    if integers and arrow_type(old.text) == arrow_type(new.text) == _INT64:  # clipped to the range, a column at once
        return lambda column: fit_declared(column, new.text)
    read = _reader(old)
    if read is None:
        return f"{old.base.upper()} read as a number"
    if family(old) == "bit" and family(new) in ("double", "float"):
        read = _signed_bits  # measured: BIT(64) b'11..1' becomes -1.0
    write = _writer(new, conv)
    if isinstance(write, str):
        return write
    return _each(new, lambda value: write(read(value)))


def _signed_bits(value: Any) -> int:
    if int(value) >= 2**63:
        raise cv.Unmodeled(value, "a BIT value of 2**63 or more into a floating type (the server reads it signed)")
    return int(value)


def _integer_to_year(old: ColumnType, new: ColumnType, conv: Conversion) -> cv.Values | str:
    read = _reader(old)
    if read is None or family(old) == "double":
        return f"{old.base.upper()} to YEAR is not measured"
    return _each(new, lambda value: cv.to_year(int(cv.to_integer(read(value), _BIGINT))))


def _integer_to_bit(old: ColumnType, new: ColumnType, conv: Conversion) -> cv.Values | str:
    wide = (new.params[0] if new.params else 1) == 64
    return _each(new, lambda value: (Decimal if wide else int)(cv.to_bit(int(value), new)))


def _integer_to_labels(old: ColumnType, new: ColumnType, conv: Conversion) -> cv.Values | str:
    if family(new) == "enum":
        return _each(new, lambda value: cv.enum_of_index(int(value), new.labels))
    return _each(new, lambda value: cv.set_of_bitmap(int(value), new.labels))


_BIGINT: Final = ColumnType("bigint", "bigint")
_INT64: Final = arrow_type("bigint")
_DOUBLE: Final = ColumnType("double", "double")


# -- text ---------------------------------------------------------------------------------------------------------


def _as_text(old: ColumnType) -> Callable[[Any], str] | None:
    """A value as the text the server converts it through (a number's digits, a temporal's text, a label)."""
    kind = family(old)
    if kind in ("integer", "bit"):  # (a BIT into a TEXT or BLOB type: its bytes, _bit_bytes)
        return lambda n: str(int(n))
    if kind == "year":
        return lambda n: f"{int(n):04d}"
    if kind == "decimal":
        return lambda d: cv.decimal_text(Decimal(d))
    if kind in ("text", "enum", "set", "uuid", "inet6", "inet4", "time"):
        return str
    return None


def _to_text(old: ColumnType, new: ColumnType, conv: Conversion) -> cv.Values | str:
    charset = new.charset
    same = charset is not None and charset == old.charset
    kind = family(old)
    if kind == "binary":
        return _each(new, lambda raw: cv.text_fit(cv.decoded(raw, charset or ""), new))
    if kind in ("date", "datetime", "timestamp"):
        return _dated_text(old, new, lambda text: cv.text_fit(text, new))
    if kind == "bit" and new.base not in ("char", "varchar"):  # measured: a TEXT type takes the BIT's bytes
        return _each(new, lambda n: cv.text_fit(cv.decoded(_bit_bytes(n, old), charset or ""), new))
    text = _as_text(old)
    if text is None:
        return f"{old.base.upper()} as text (its digits depend on the column's width)"
    if kind == "text" and charset == "utf8mb4" and new.base in ("char", "varchar"):
        return lambda column: _fit_characters(column, new)
    if same and charset not in TEXT_CHARSETS:
        return _each(new, lambda value: _fit_unknown(text(value), new))
    return _each(new, lambda value: cv.text_fit(cv.in_charset(text(value), charset or ""), new))


def _fit_characters(column: Any, new: ColumnType) -> Any:
    """Text cut to a CHAR / VARCHAR's length (a CHAR without trailing spaces), a column at once."""
    import pyarrow.compute as pc

    column = fit_declared(column, new.text)
    return pc.utf8_rtrim(column, characters=" ") if new.base == "char" else column


def _fit_unknown(text: str, new: ColumnType) -> str:
    """Text cut to a type of a charset the mirror does not know (kept: the same charset before and after)."""
    if new.base in ("char", "varchar") or len(text) * 4 <= 255:
        return cv.text_fit(text, attrs.evolve(new, charset="utf8mb4"))
    raise cv.Unmodeled(text, f"text whose bytes in {new.charset} the mirror does not know")


def _to_binary(old: ColumnType, new: ColumnType, conv: Conversion) -> cv.Values | str:
    kind = family(old)
    if kind == "binary":
        return _each(new, lambda raw: cv.bytes_fit(raw, new))
    if kind in cv.FIXED:
        return _each(new, lambda text: cv.bytes_fit(cv.fixed_bytes(text, kind), new))
    if kind in ("text", "enum", "set"):
        charset = old.charset
        return _each(new, lambda text: cv.bytes_fit(cv.encoded(text, charset or ""), new))
    if kind in ("date", "datetime", "timestamp"):
        return _dated_text(old, new, lambda text: cv.bytes_fit(text.encode("ascii"), new))
    if kind == "bit" and new.base not in ("binary", "varbinary"):  # measured: a BLOB takes the BIT's bytes
        return _each(new, lambda n: cv.bytes_fit(_bit_bytes(n, old), new))
    text = _as_text(old)
    if text is None:
        return f"{old.base.upper()} as bytes (its digits depend on the column's width)"
    return _each(new, lambda value: cv.bytes_fit(text(value).encode("ascii"), new))


def _bit_bytes(value: Any, old: ColumnType) -> bytes:
    """A BIT(n) value's bytes as the column stores them (big-endian, (n + 7) // 8 of them)."""
    bits = old.params[0] if old.params else 1
    return int(value).to_bytes((bits + 7) // 8, "big")


def _text_to_number(old: ColumnType, new: ColumnType, conv: Conversion) -> cv.Values | str:
    write = _writer(new, conv)
    if isinstance(write, str):
        return write
    if family(new) == "integer":
        unsigned_64 = new.unsigned and new.base == "bigint"

        def integer(text: str) -> Any:
            number = cv.text_integer(text)
            if unsigned_64 and number > 2**63 - 1:
                raise cv.Unmodeled(text, "a number at or past 2**63 into BIGINT UNSIGNED")
            return write(number)

        return _each(new, integer)
    return _each(new, lambda text: write(cv.text_decimal(text)))


def _text_to_labels(old: ColumnType, new: ColumnType, conv: Conversion) -> cv.Values | str:
    if family(new) == "enum":
        return _each(new, lambda text: cv.label_of(text, new.labels) or "")
    return _each(new, lambda text: cv.set_labels(text, new.labels))


def _text_to_fixed(old: ColumnType, new: ColumnType, conv: Conversion) -> cv.Values | str:
    return _each(new, lambda text: cv.fixed_text(text, new.base))


# -- temporal -----------------------------------------------------------------------------------------------------


def _dated(old: ColumnType, new: ColumnType, conv: Conversion) -> cv.Values | str:
    """DATE / DATETIME / TIMESTAMP to DATE / DATETIME / TIMESTAMP: a DATE is midnight, a DATETIME's DATE its day;
    fractional digits cut by the statement's rule; DATETIME <-> TIMESTAMP in its time zone; a TIMESTAMP out of
    range the zero TIMESTAMP."""
    import pyarrow as pa

    source, target = family(old), family(new)
    if target == "date":
        if source == "date":
            return lambda column: column
        return lambda column: cv.each_int(column, pa.date32(), lambda us: us // 86_400_000_000)
    digits = cv.fsp(new)

    def narrowed(column: Any) -> Any:
        if source == "date":
            return cv.each_int(column, pa.timestamp("us"), lambda days: days * 86_400_000_000)
        if source == "timestamp" and target == "datetime" and not conv.zone.identity:
            column = shift(column, conv.zone, False, "error", f"{conv.table}: column {conv.column!r}")
        rule = conv.fractions

        def one(us: int) -> int:
            us = cv.narrow_fraction(us, digits, rule, signed=False)
            return cv.datetime_clip(us, digits) if target == "datetime" else us

        return cv.each_int(column, pa.timestamp("us"), one)

    if target == "datetime":
        return narrowed

    what = f"{conv.table}: column {conv.column!r}"

    def in_range(us: int) -> int | None:
        if cv.timestamp_in_range(us):
            return us
        if us % 10**6:  # the server makes the seconds 0 and keeps the fraction (canal.lake.ddl.time_zones.shift)
            return us % 10**6
        if conv.zero_dates == "null":
            return None
        raise MirrorTypeError(
            f"{what}: {cv.datetime_text(us, 6)} lies outside TIMESTAMP's range: the server made it the zero "
            "TIMESTAMP, which the mirror holds only with zero_dates='null'"
        )

    def to_timestamp(column: Any) -> Any:
        column = narrowed(column)
        if source == "timestamp":  # an instant already: only its range
            return cv.each_int(column, pa.timestamp("us"), in_range)
        # local time in the statement's zone to UTC (out of range: the zero TIMESTAMP, as zero_dates holds it)
        return shift(column, conv.zone, True, conv.zero_dates, what)

    return to_timestamp


def _dated_to_time(old: ColumnType, new: ColumnType, conv: Conversion) -> cv.Values | str:
    import pyarrow as pa

    digits = cv.fsp(new)
    if family(old) == "date":
        return lambda column: cv.each_int(column, pa.string(), lambda _days: cv.time_text(0, digits))
    rule = conv.fractions
    return lambda column: cv.each_int(
        column,
        pa.string(),
        lambda us: cv.time_text(cv.narrow_fraction(us % 86_400_000_000, digits, rule, signed=False), digits),
    )


def _time_to_time(old: ColumnType, new: ColumnType, conv: Conversion) -> cv.Values | str:
    digits, rule = cv.fsp(new), conv.fractions
    return _each(new, lambda text: cv.time_text(cv.narrow_fraction(cv.time_micros(text), digits, rule, True), digits))


def _dated_text(old: ColumnType, new: ColumnType, fit: Callable[[str], Any]) -> cv.Values:

    digits, kind = cv.fsp(old) if old.base != "date" else 0, family(old)
    target = arrow_type(new.text)
    if kind == "date":
        return lambda column: cv.each_int(column, target, lambda days: fit(cv.datetime_text(days * _DAY_US, 0, True)))
    return lambda column: cv.each_int(column, target, lambda us: fit(cv.datetime_text(us, digits)))


# -- the allow-list -----------------------------------------------------------------------------------------------


def _each(new: ColumnType, convert: Callable[[Any], Any]) -> cv.Values:
    target = arrow_type(new.text)
    return lambda column: cv.each(column, target, convert)


_BUILDS: Final[dict[str, Build]] = {
    "number": _number_to_number,
    "year": _integer_to_year,
    "bit": _integer_to_bit,
    "labels_of_number": _integer_to_labels,
    "text": _to_text,
    "binary": _to_binary,
    "number_of_text": _text_to_number,
    "labels": _text_to_labels,
    "fixed": _text_to_fixed,
    "dated": _dated,
    "dated_to_time": _dated_to_time,
    "time": _time_to_time,
}

MODELED: Final[dict[tuple[str, str], Build]] = {pair: _BUILDS[name] for pair, name in PAIRS.items()}
"""The modeled conversions (:data:`canal.schema.conversions.PAIRS`, the model the capture asks too) with the function
of the column's values each gives, or why two types of its families are not modeled. Every pair not here is a stop (a
type to itself converts nothing: never looked up)."""

_NAMES: Final = {
    "integer": "TINYINT ... BIGINT [UNSIGNED]",
    "decimal": "DECIMAL",
    "double": "DOUBLE",
    "float": "FLOAT",
    "bit": "BIT",
    "year": "YEAR",
    "date": "DATE",
    "datetime": "DATETIME",
    "timestamp": "TIMESTAMP",
    "time": "TIME",
    "text": "text (CHAR, VARCHAR, TEXT types; JSON on MariaDB)",
    "binary": "bytes (BINARY, VARBINARY, BLOB types)",
    "enum": "ENUM",
    "set": "SET",
    "uuid": "UUID",
    "inet6": "INET6",
    "inet4": "INET4",
    "json": "JSON (MySQL's)",
    "geometry": "spatial types",
    "vector": "VECTOR",
}

_SHORT: Final = {"integer": "integers", "text": "text", "binary": "bytes"}


def conversions_table() -> str:
    """The allow-list as the markdown table of the contract page (docs/concepts/fail-closed.md; a test compares
    them): for each family of the type before an ALTER, the families of the type after it the mirror converts to."""
    lines = ["| from | to (modeled; any other type: a stop) |", "|---|---|"]
    for source, name in _NAMES.items():
        targets = [_SHORT.get(target, _NAMES[target]) for target in _NAMES if (source, target) in MODELED]
        lines.append(f"| {name} | {', '.join(targets) if targets else 'the same type only'} |")
    return "\n".join(lines) + "\n"


# -- a batch's statements -----------------------------------------------------------------------------------------


def statement_conversions(
    key: str,
    sql: str,
    stmt: AlterTable,
    state: Mapping[str, str],
    zone: StatementZone,
    before: TableDef | None,
    after: TableDef,
    origin: Mapping[str, str | None],
    mariadb: bool,
) -> dict[str, Conversion]:
    """The conversions one ALTER of table ``key`` makes, by each column's name before it: of the columns it declares
    anew (MODIFY / CHANGE), of its text columns (CONVERT TO CHARACTER SET), of a column it makes NOT NULL (ADD PRIMARY
    KEY). ``before`` / ``after``: the table in a mirror's catalog before and after it (a column it does not know is
    of type :data:`KEPT`, a table whose charset it does not know has :data:`UNKNOWN_CHARSET`), ``origin`` the
    statement's columns after it by their names before; the schema history's types in ``state`` win where it names
    them (:data:`~canal.parse.convert.RETYPED_FROM_PROP`, :data:`~canal.parse.convert.RETYPED_TO_PROP`)."""
    known_from = {k.lower(): v for k, v in _json_object(state.get(RETYPED_FROM_PROP)).items()}
    known_to = {k.lower(): v for k, v in _json_object(state.get(RETYPED_TO_PROP)).items()}
    definitions = {a.old_name.lower(): a.column for a in stmt.actions if isinstance(a, ChangeColumn)}
    declared = set(definitions)
    computed = parse_computed(state.get(COMPUTED_PROP))
    keeps_zero = statement_mode(state).no_auto_value_on_zero
    converts = any(isinstance(a, ConvertCharset) for a in stmt.actions)
    was = {c.name.lower(): c for c in before.columns} if before is not None else {}
    rule = fractions_rule(state)
    out: dict[str, Conversion] = {}
    for column in after.columns:
        name = origin.get(column.name)
        if name is None:
            continue  # added
        k, old_column = name.lower(), was.get(name.lower())
        old = known_from.get(k) or _text_of(old_column, before, mariadb)
        new = known_to.get(k) or _text_of(column, after, mariadb)
        retyped = k in declared or (converts and (k in known_from or not known_from))
        made_not_null = not column.nullable and (old_column is None or old_column.nullable)
        if not retyped and not made_not_null:
            continue
        if not retyped:  # the type stays: only its NULLs change
            old = new = old if old is not None else new
        out[name] = Conversion(
            table=key,
            column=name,
            name=column.name,
            old=old,
            new=new,
            nullable=column.nullable,
            sql=sql,
            zone=zone,
            fractions=rule,
            recharset=retyped and k not in declared and new is None,
        )
        definition = definitions.get(k)
        if definition is not None:
            before_computed = computed.get(k)
            numbered = numbering_why(definition, before_computed, True, statement_mode(state)) is not None
            again = regenerated_why(definition, before_computed, old is not None and old == new)
            out[name] = attrs.evolve(out[name], recomputed=again, numbered=numbered, keeps_zero=keeps_zero)
    converted = {n.lower() for n, c in out.items() if not c.identity}
    for column in after.columns:  # a generated column reading converted values: computed again
        name = origin.get(column.name)
        gen = None if name is None else computed.get(name.lower())
        if name is None or gen is None or gen.generated is None:
            continue
        read = sorted(c for c in converted if reads_column(gen.generated, c))
        if not read:
            continue
        why = f"it is generated from {', '.join(repr(c) for c in read)}, which the statement converts"
        found = out.get(name)
        if found is None:
            text = known_from.get(name.lower()) or _text_of(was.get(name.lower()), before, mariadb)
            found = Conversion(key, name, column.name, text, text, column.nullable, sql, zone, rule)
        out[name] = attrs.evolve(found, recomputed=found.recomputed or why)
    return out


def _text_of(column: TableColumn | None, table: TableDef | None, mariadb: bool) -> str | None:
    """A column's type text in a mirror's catalog, with its charset where it holds text; None where it is unknown."""
    if column is None or table is None or column.base == KEPT:
        return None
    if column.charset == UNKNOWN_CHARSET or (column.charset is None and table.charset == UNKNOWN_CHARSET):
        return mysql_type_text(column, mariadb)  # the table's charset, which the catalog does not know
    return type_with_charset(column, table.charset, mariadb)


def _json_object(text: str | None) -> dict[str, str]:
    if not text:
        return {}
    value = json.loads(text)
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def check_batch_conversions(steps: Sequence[Any], rows_now: Callable[[str, str], Any]) -> None:
    """Before anything of a batch is written: the typed stop for the first ALTER of ``steps`` (the batch's planned
    steps: plans by table, renames, drops) that converts a column between types the schema history names
    (RETYPED_FROM and RETYPED_TO) and the mirror does not model -- where the mirror holds values of it (``rows_now``:
    a held table's current rows, None for a table not held; a column of NULLs converts exactly whatever the types).
    A conversion of a column whose types the history does not name, or that stops on a value, stops when its step
    is applied, before that step writes anything."""
    plans = [plan for step in steps if isinstance(step, dict) for plan in step.values()]
    for plan in plans:
        for row, _kind, sql in plan.ddl:
            state = plan.ddl_props.get(row, {})
            if RETYPED_FROM_PROP not in state or RETYPED_TO_PROP not in state:
                continue
            key = f"{plan.schema}.{plan.table}"
            zone = StatementZone.of(state, key, sql)
            known_from = _json_object(state.get(RETYPED_FROM_PROP))
            rule = fractions_rule(state)
            for column, new in _json_object(state.get(RETYPED_TO_PROP)).items():
                try:
                    Conversion(key, column, column, known_from.get(column), new, True, sql, zone, rule).check()
                except MirrorConversionError:
                    held = rows_now(plan.schema, plan.table)
                    if held is None or column not in held.column_names or _only_nulls(held.column(column)):
                        continue  # nothing to convert (yet: the step looks again at the values it meets)
                    raise


def _only_nulls(column: Any) -> bool:
    return bool(column.null_count == len(column))
