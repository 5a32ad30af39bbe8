"""Which value conversions of ALTER TABLE a copy of the table repeats exactly: the one model of them.

An ALTER rewrites the rows a table holds without logging one. The Delta mirror repeats it from the statement, the
types before and after it and its own rows (:mod:`canal.lake.ddl.conversions`, which converts the values); the capture
asks the same model before the statement reaches any copy, and under ``heal="snapshot"`` reads the table again after
a statement the mirror would not repeat (:mod:`canal.parse.healing`, :mod:`canal.snapshot.heal`) instead of letting
the mirror stop there. Both read it here:

* :data:`PAIRS` -- the modeled conversions, by the :func:`family` of the column's type before and after; a pair not
  in it is not modeled (``MirrorConversionError`` in the mirror);
* :func:`unmodeled` -- why two types of a modeled pair are not modeled after all (a FLOAT(M,D) target, a charset the
  mirror does not know);
* :func:`by_value` -- why a modeled conversion may meet a value it does not model (text read as a number, a label
  the column's collation decides, fractional seconds cut under a sql_mode not known, ...): the mirror stops at such
  a value only, which the capture cannot see in advance;
* :data:`NOT_NULL_ZEROS` -- the families whose zero value the mirror writes for the NULLs of a column made NOT NULL.

:func:`unrepeatable` is the capture's question: whether a copy may not repeat a statement exactly -- a pair of
:func:`unmodeled` or :func:`by_value`, NOT NULL of a type outside :data:`NOT_NULL_ZEROS`, a DATETIME / TIMESTAMP
conversion in a time zone whose rules are not known exactly, TIMESTAMP to or from another type outside UTC
(``MirrorTimeZoneError``), an added column whose values the server computes per row. It errs on the safe side: a
statement it names may have converted nothing a copy could not have, and its heal costs a re-read of the table. A
zero date an ALTER makes (a date made NOT NULL over NULLs, a DATETIME outside TIMESTAMP's range) is not asked: the
mirror holds it with ``zero_dates="null"`` and cannot without, re-read or not.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from canal.errors import SchemaError
from canal.schema.catalog import TableDef
from canal.schema.columns import mysql_type_text, resolve_column
from canal.schema.computed import recomputed
from canal.sql import DEFAULT_MODE, SqlMode, read_column_type
from canal.sql.statements import AddColumn, AlterTable, ChangeColumn
from canal.sql.types import BLOB_TYPES, GEOMETRY_TYPE_NAMES, INTEGER_TYPES, TEXT_TYPES, ColumnType

__all__ = [
    "NOT_NULL_ZEROS",
    "PAIRS",
    "TEXT_CHARSETS",
    "by_value",
    "family",
    "fractions_rule",
    "unmodeled",
    "unrepeatable",
    "zone_known",
]

TEXT_CHARSETS: Final = frozenset({"utf8mb4", "utf8mb3", "utf8", "latin1", "ascii"})
"""The character sets whose characters the mirror knows (it writes '?' for those a charset lacks)."""

_TIME_ROUND_FRACTIONAL: Final = 1 << 34  # MariaDB's sql_mode bit


def family(t: ColumnType) -> str:
    """The family of a column type by how its values convert: ``integer``, ``decimal``, ``float``, ``double``,
    ``bit``, ``year``, ``date``, ``datetime``, ``timestamp``, ``time``, ``text`` (character strings), ``binary`` (byte
    strings: BINARY, VARBINARY, BLOBs, text in the binary charset), ``enum``, ``set``, ``uuid``, ``inet6``, ``inet4``,
    ``json`` (MySQL's; MariaDB's JSON is LONGTEXT), ``geometry`` or ``vector``."""
    base = t.base
    if base in INTEGER_TYPES:
        return "integer"
    if base in TEXT_TYPES:
        return "binary" if t.charset == "binary" else "text"
    if base in BLOB_TYPES:
        return "binary"
    if base in GEOMETRY_TYPE_NAMES:
        return "geometry"
    return base


def fractions_rule(sql_mode: str | None, server_version: str) -> str | None:
    """How a statement cut fractional seconds, from its sql_mode and the server's version as logged: ``round``
    (MariaDB under ``TIME_ROUND_FRACTIONAL``), ``truncate`` (MariaDB without), None when unknown (no sql_mode logged,
    or a server that is not MariaDB: not measured)."""
    if sql_mode is None or not sql_mode.isdigit() or "mariadb" not in server_version.lower():
        return None
    return "round" if int(sql_mode) & _TIME_ROUND_FRACTIONAL else "truncate"


_NUMERIC_SOURCES: Final = ("integer", "decimal", "double", "year", "bit", "enum", "set")  # not FLOAT: held rounded
_NUMERIC_TARGETS: Final = ("integer", "decimal", "double", "float")
_DATED: Final = ("date", "datetime", "timestamp")
_AS_TEXT: Final = ("integer", "decimal", "year", "bit", "text", "binary", "enum", "set", "uuid", "inet6", "inet4",
                   "date", "datetime", "timestamp", "time")  # fmt: skip

PAIRS: Final[dict[tuple[str, str], str]] = {
    **{(s, t): "number" for s in _NUMERIC_SOURCES for t in _NUMERIC_TARGETS},
    **{(s, "year"): "year" for s in ("integer", "decimal", "year", "bit")},
    **{(s, "bit"): "bit" for s in ("integer", "year", "bit")},
    **{("integer", t): "labels_of_number" for t in ("enum", "set")},
    **{(s, "text"): "text" for s in _AS_TEXT},
    **{(s, "binary"): "binary" for s in _AS_TEXT},
    **{("text", t): "number_of_text" for t in _NUMERIC_TARGETS},
    **{(s, t): "labels" for s in ("text", "enum", "set") for t in ("enum", "set")},
    **{("text", t): "fixed" for t in ("uuid", "inet6", "inet4")},
    **{(s, t): "dated" for s in _DATED for t in _DATED},
    **{(s, "time"): "dated_to_time" for s in ("date", "datetime")},
    ("time", "time"): "time",
}
"""The modeled conversions: the families (:func:`family`) of a column's type before and after an ALTER, each with the
name of the conversion the mirror makes of them (:data:`canal.lake.ddl.conversions.MODELED` gives each its function).
Every pair not here is not modeled (a type to itself converts nothing: never looked up)."""

NOT_NULL_ZEROS: Final = frozenset(
    {"integer", "decimal", "float", "double", "year", "bit", "text", "enum", "set", "binary", "time", "uuid",
     "inet6", "inet4"}
)  # fmt: skip
"""The families whose zero value (0, '', the empty ENUM value, empty bytes, 00:00:00) the mirror writes for the NULLs
of a column made NOT NULL, as the server gives them under a lax sql_mode; a date's is the zero date (held only with
``zero_dates='null'``), a TIMESTAMP's the current time."""


def unmodeled(old: ColumnType, new: ColumnType) -> str | None:
    """Why the mirror does not model converting values of ``old`` to ``new`` (types with their charset where they
    hold text), whatever the values; None when it does."""
    pair = (family(old), family(new))
    if pair not in PAIRS:
        return f"{pair[0].upper()} to {pair[1].upper()} is not a conversion the mirror models"
    source, target = pair
    if target in ("double", "float") and new.scale is not None and source in (*_NUMERIC_SOURCES, "text"):
        return f"a {new.base.upper()}(M,D) rounds to its decimals and precision in ways not measured"
    if source == "double" and old.scale is not None and target in _NUMERIC_TARGETS:
        return f"the mirror holds {old.base.upper()} values rounded as SELECT shows them, not as stored"
    if target == "text" and new.charset not in TEXT_CHARSETS and new.charset != old.charset:
        return f"text in the charset {new.charset or 'the table has (unknown)'}"
    if target == "binary" and source in ("text", "enum", "set") and old.charset not in TEXT_CHARSETS:
        return f"text in the charset {old.charset or 'the table has (unknown)'} as bytes"
    return None


_ZERO_DATED: Final = ("date", "datetime")
"""The families whose values an ALTER may make the zero date (a NULL made NOT NULL; a DATETIME outside TIMESTAMP's
range is the zero TIMESTAMP): a mirror with ``zero_dates="null"`` holds it as NULL, as it converts; one with
``"error"`` cannot hold it, nor the zero dates a re-read would bring -- a heal helps neither, so none is asked."""

_PLAIN: Final = re.compile(r"[\x20-\x7e]*")  # printable ASCII (canal.lake.ddl.converters.label_of reads such labels)


def by_value(old: ColumnType, new: ColumnType, fractions: str | None) -> str | None:
    """Why a modeled conversion of ``old`` to ``new`` may meet a value the mirror does not model (it stops at such a
    value: :class:`canal.lake.ddl.converters.Unmodeled`, or a value outside TIMESTAMP's range); None when it converts
    every value. ``fractions``: the statement's :func:`fractions_rule`."""
    source, target = family(old), family(new)
    timed = ("datetime", "timestamp", "time")
    if source in timed and target in timed and fractions is None and _fsp(new) < _fsp(old):
        return "fractional seconds cut under a sql_mode the mirror does not know"
    if source == "text" and target in (*_NUMERIC_TARGETS, "enum", "set", "uuid", "inet6", "inet4"):
        return f"text the server reads as {target.upper()} in ways the mirror may not follow"
    if source == "binary" and target == "text":
        return f"bytes that may be no {new.charset} text"
    if (
        source == "text"
        and target == "text"
        and new.charset not in TEXT_CHARSETS
        and new.base not in ("char", "varchar")
    ):
        return f"text cut to a {new.base.upper()} in a charset the mirror does not know"
    if source in ("enum", "set") and target in ("enum", "set"):
        gone = [label for label in old.labels if label not in new.labels]
        if gone and (source != target or not _labels_plain(gone, new.labels)):
            return "labels the values hold go, and the column's collation decides what they become"
    wide = source == "double" or (source == "decimal" and (old.precision or 10) - (old.scale or 0) >= 19)
    if wide and target == "integer" and new.base == "bigint" and new.unsigned:
        return "a number at or past 2**63 into BIGINT UNSIGNED"
    if source == "bit" and target in ("double", "float") and (old.params[0] if old.params else 1) == 64:
        return "a BIT value of 2**63 or more into a floating type"
    return None


def _labels_plain(gone: list[str], labels: tuple[str, ...]) -> bool:
    """Whether labels that go become '' (left out of a SET) whatever the collation: printable ASCII, no new label
    equal to them ignoring case, not digits."""
    lower = {label.lower() for label in labels}
    return all(_PLAIN.fullmatch(label) for label in (*gone, *labels)) and not any(
        label.lower() in lower or label.strip(" ").isdigit() for label in gone
    )


def _fsp(t: ColumnType) -> int:
    return t.params[0] if t.params else 0


_UTC_NAMES: Final = frozenset({"UTC", "ETC/UTC", "UNIVERSAL", "ETC/UNIVERSAL", "ZULU", "ETC/ZULU"})
_OFFSET: Final = re.compile(r"^([+-])(\d{1,2}):(\d{2})$")


def zone_known(name: str | None, system: str | None) -> tuple[bool, bool]:
    """Of a statement's time zone as the server logged it (``name`` None: none; ``system``: the server's
    ``system_time_zone`` for ``SYSTEM``): whether local time is UTC there, and whether its rules are known exactly."""
    if name is None:
        return True, True
    upper = name.upper()
    if upper == "SYSTEM":
        utc = system is not None and system.upper() in _UTC_NAMES
        return utc, utc
    offset = _OFFSET.match(name)
    if offset is not None:
        return int(offset[2]) == int(offset[3]) == 0, True
    if upper in _UTC_NAMES:
        return True, True
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False, False
    return False, True


def unrepeatable(
    stmt: AlterTable,
    table: TableDef | None,
    retyped: tuple[Mapping[str, str], Mapping[str, str]],
    *,
    zone: str | None,
    system_zone: str | None,
    fractions: str | None,
    mariadb: bool,
    mode: SqlMode = DEFAULT_MODE,
) -> str | None:
    """Why a copy of ``table`` (its layout before ``stmt``) may not repeat ``stmt``'s conversion of the rows it holds
    exactly (module docstring), or None. ``retyped``: the types before and after it of each column it converts, by
    its name before (:meth:`canal.schema.history.SchemaHistory.retyped`: what the mirror is given); ``zone`` /
    ``system_zone``: the statement's time zone as the server logged it; ``fractions``: its :func:`fractions_rule`;
    ``mode``: its sql_mode (whether a zero made AUTO_INCREMENT stays: :mod:`canal.schema.computed`). A table whose
    layout is not known (None) gives None: a copy does what it can there."""
    if table is None:
        return None
    utc, known = zone_known(zone, system_zone)
    columns = {c.name.lower(): c for c in table.columns}
    for action in stmt.actions:
        if isinstance(action, AddColumn):
            why = _added(action, utc, known) or _default_bytes(action, table)
            if why is not None:
                return why
        elif isinstance(action, ChangeColumn):
            old = columns.get(action.old_name.lower())
            if old is None or action.column.row_period is not None:
                continue
            try:
                new = resolve_column(action.column)
            except SchemaError as exc:
                return f"column {action.old_name!r}: {exc}"
            made = family(read_column_type(mysql_type_text(new, mariadb), strict=False))
            if old.nullable and not new.nullable and made not in (*NOT_NULL_ZEROS, *_ZERO_DATED):
                return f"column {action.old_name!r} made NOT NULL: the server gives a NULL {made.upper()}'s zero value"
    before, after = retyped
    converted = [name for name, old_text in before.items() if after.get(name) not in (None, old_text)]
    computed = recomputed(stmt, table, converted, converted, mode)
    if computed is not None:
        return computed
    for name, old_text in before.items():
        new_text = after.get(name)
        if new_text is None or new_text == old_text:
            continue  # converts nothing (or the history cannot follow it: neither can a copy's catalog)
        old_type, new_type = read_column_type(old_text, strict=False), read_column_type(new_text, strict=False)
        why = _zoned(old_type, new_type, utc, known) or unmodeled(old_type, new_type)
        why = why or by_value(old_type, new_type, fractions)
        if why is not None:
            return f"column {name!r} from {old_text} to {new_text}: {why}"
    return None


def _zoned(old: ColumnType, new: ColumnType, utc: bool, known: bool) -> str | None:
    pair = {old.base, new.base}
    if pair == {"datetime", "timestamp"} and not known:
        return "DATETIME and TIMESTAMP converted in a time zone whose rules are not known exactly"
    if "timestamp" in pair and len(pair) == 2 and pair != {"datetime", "timestamp"} and not utc:
        return "a TIMESTAMP converted to or from another type in a time zone that is not UTC"
    return None


def _default_bytes(action: AddColumn, table: TableDef) -> str | None:
    """Why a copy may not read a DEFAULT of an added column as the server stored it, between text and bytes: a
    hexadecimal or bit literal (bytes) as text in a character set a copy does not know, or bytes beyond ASCII in one
    the column does not declare (a copy without the table's charset reads only those alike); text beyond ASCII as
    bytes (its encoding in the connection's character set, which a copy is not told)."""
    column = action.column
    default = column.default
    value = None if default is None else default.value
    if default is None or not isinstance(value, str | bytes):
        return None
    declared = column.type.charset or (None if column.type.collation is None else column.type.collation.split("_")[0])
    base = column.type.base
    binary = declared == "binary" or base in BLOB_TYPES or base in ("binary", "varbinary")
    if isinstance(value, str):
        return None if value.isascii() or not binary else f"column {column.name!r} is added with text as bytes"
    if binary or base not in (*TEXT_TYPES, "enum", "set"):
        return None
    charset = declared or table.charset
    if charset in TEXT_CHARSETS and (declared is not None or value.isascii()):
        return None
    return f"column {column.name!r} is added with DEFAULT {default.text} in the character set {charset}"


def _added(action: AddColumn, utc: bool, known: bool) -> str | None:
    column = action.column
    if column.row_period is not None:
        return None  # a system-versioning period column: its values are the statement's (a copy follows them)
    name = column.name
    if column.generated is not None or column.auto_increment:
        return f"column {name!r} is added with values the server computes for each row"
    default = column.default
    if default is not None and not default.literal:
        return f"column {name!r} is added with DEFAULT {default.text}, computed for each row"
    if column.type.base == "timestamp":
        if default is None and column.nullable is False:
            return f"column {name!r} is added as a NOT NULL TIMESTAMP without a default (the server's time)"
        if default is not None and default.value is not None and not utc and not known:
            return f"column {name!r} is added with a TIMESTAMP default read in a time zone not known exactly"
    return None
