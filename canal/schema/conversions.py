"""Which ALTER TABLE conversions of existing values a copy of the table cannot repeat exactly from the rows it holds.

An ALTER rewrites the rows a table holds without logging one. A copy (the Delta mirror: :mod:`canal.lake.evolve`)
repeats what the server did from the statement, the layout before it and its own rows: integers clipped to a
narrower range, strings cut to fewer characters, DECIMALs rounded to fewer decimals, DATETIME and TIMESTAMP
converted in the statement's time zone, an added column's constant default. Where the outcome depends on values in a
way it does not model, it stops typed at the statement (``MirrorTypeError``, ``MirrorTimeZoneError``,
``MirrorError``) -- and then only where a value actually falls outside, which the capture cannot see in advance.

:func:`unrepeatable` tells, before the statement reaches any copy, whether it *may* convert a value so: the capture
heals such a statement under ``heal="snapshot"`` (reads the table again after it, :mod:`canal.snapshot.heal`)
rather than let a copy stop there. It is read from the statement and the layout before it only, so it errs on the
safe side: a statement it names may have converted nothing a copy could not have, and a heal then costs a re-read
of the table, nothing more. What it names:

* a column declared anew (MODIFY / CHANGE) whose values may not survive as the copy converts them: another stored
  kind (TEXT to INT, DATE to VARCHAR, ...) except a widening that keeps every value (a larger integer, a DECIMAL with
  room for its digits, FLOAT to DOUBLE, text to text), fewer integer digits of a DECIMAL, ENUM / SET labels that do
  not keep every label, a BINARY(n) of another length, a TEXT / BLOB type that holds fewer bytes than the values
  may have, text moved to a character set that cannot hold every character, NOT NULL on a type whose implicit
  default a copy does not write (temporal and others), a DATETIME / TIMESTAMP conversion in a time zone whose rules
  are not known exactly (``SYSTEM`` on a server not in UTC, a zone Python's tz database does not hold), TIMESTAMP to
  or from another type in a zone that is not UTC;
* an added column whose values the server computes per row (a generated column, AUTO_INCREMENT, a DEFAULT that is
  an expression, a NOT NULL TIMESTAMP without a default) or a TIMESTAMP default read in a zone not known exactly;
* ``CONVERT TO CHARACTER SET`` of a character set that cannot hold every character (latin1, ascii, ...).
"""

from __future__ import annotations

import re
from typing import Final

from canal.errors import SchemaError
from canal.schema.catalog import TableDef
from canal.schema.columns import TableColumn, effective_charset, mysql_type_text, resolve_column
from canal.sql import read_column_type
from canal.sql.charsets import charset_named
from canal.sql.statements import AddColumn, AlterTable, ChangeColumn, ConvertCharset, SetTableOptions
from canal.sql.types import INTEGER_TYPES, TEXT_TYPES, StoredType, stored_type

__all__ = ["unrepeatable", "zone_known"]

_WHOLE_CHARSETS: Final = frozenset({"utf8mb4", "utf16", "utf16le", "utf32", "gb18030", "binary"})
_FRACTIONAL: Final = frozenset({"time", "datetime", "timestamp"})
_UTC_NAMES: Final = frozenset({"UTC", "ETC/UTC", "UNIVERSAL", "ETC/UNIVERSAL", "ZULU", "ETC/ZULU"})
_OFFSET: Final = re.compile(r"^([+-])(\d{1,2}):(\d{2})$")
_ZONED: Final = frozenset({"datetime", "timestamp"})
# the most bytes a value of each type holds
_BYTE_LIMITS: Final = {
    "tinytext": 255,
    "text": 65535,
    "mediumtext": 16777215,
    "longtext": 4294967295,
    "tinyblob": 255,
    "blob": 65535,
    "mediumblob": 16777215,
    "longblob": 4294967295,
}
# the types whose NOT NULL a copy fills with their implicit default (0, '', the empty ENUM value, empty bytes)
_NOT_NULL_FILLED: Final = frozenset(
    {*INTEGER_TYPES, "decimal", "float", "double", *TEXT_TYPES, "enum", "set", "varbinary", "tinyblob", "blob",
     "mediumblob", "longblob"}
)  # fmt: skip


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
    stmt: AlterTable, table: TableDef | None, *, zone: str | None, system_zone: str | None, mariadb: bool
) -> str | None:
    """Why a copy of ``table`` (its layout before ``stmt``) may not repeat ``stmt``'s conversion of the rows it holds
    exactly (module docstring), or None. ``zone`` / ``system_zone``: the statement's time zone as the server logged
    it. A table the layout of which is not known (None) gives None: a copy does what it can there."""
    if table is None:
        return None
    utc, known = zone_known(zone, system_zone)
    columns = {c.name.lower(): c for c in table.columns}
    for action in stmt.actions:
        if isinstance(action, ConvertCharset):
            if not _holds_every_character(action.charset):
                return f"CONVERT TO CHARACTER SET {action.charset}: text it cannot hold becomes '?'"
        elif isinstance(action, SetTableOptions):
            continue
        elif isinstance(action, AddColumn):
            why = _added(action, utc, known)
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
            why = _changed(old, new, table.charset, utc, known, mariadb)
            if why is not None:
                return f"column {action.old_name!r} becomes {mysql_type_text(new, mariadb)}: {why}"
    return None


def _added(action: AddColumn, utc: bool, known: bool) -> str | None:
    column = action.column
    if column.row_period is not None:
        return None  # a system-versioning period column: its values are the statement's (a copy follows them)
    base = column.type.base
    name = column.name
    if column.generated is not None or column.auto_increment:
        return f"column {name!r} is added with values the server computes for each row"
    default = column.default
    if default is not None and not default.literal:
        return f"column {name!r} is added with DEFAULT {default.text}, computed for each row"
    if base == "timestamp":
        if default is None and column.nullable is False:
            return f"column {name!r} is added as a NOT NULL TIMESTAMP without a default (the server's time)"
        if default is not None and default.value is not None and not utc and not known:
            return f"column {name!r} is added with a TIMESTAMP default read in a time zone not known exactly"
    return None


def _changed(old: TableColumn, new: TableColumn, charset: str, utc: bool, known: bool, mariadb: bool) -> str | None:
    before = read_column_type(mysql_type_text(old, mariadb), strict=False)
    after = read_column_type(mysql_type_text(new, mariadb), strict=False)
    was, now = stored_type(before), stored_type(after)
    old_base, new_base = old.base, new.base
    zoned = {old_base, new_base} == _ZONED
    if zoned and not known:
        return "DATETIME and TIMESTAMP converted in a time zone whose rules are not known exactly"
    if "timestamp" in {old_base, new_base} and old_base != new_base and not zoned and not utc:
        return "a TIMESTAMP converted to or from another type in a time zone that is not UTC"
    if was != now and not zoned and not _widens(old, new, was, now):
        return "its values change kind, and the server converts what does not fit in ways a copy does not repeat"
    if was.kind == "decimal" and now.kind == "decimal" and now.precision - now.scale < was.precision - was.scale:
        return "fewer integer digits: a value that does not fit is clipped"
    widened = old_base == "float" and new_base == "double" and not new.params and not old.params
    if new_base in ("float", "double") and (old_base, old.params) != (new_base, new.params) and not widened:
        return "a floating-point value rounded to another precision"
    if old_base == new_base and old_base in _FRACTIONAL and _fsp(new) < _fsp(old):
        return "fewer fractional digits of a second"
    if new_base in ("enum", "set") and (old_base != new_base or not set(old.labels) <= set(new.labels)):
        return "labels the values may hold go"
    if new_base == "binary" and (old_base != "binary" or old.params[:1] != new.params[:1]):
        return "BINARY values of another length"
    limit = _BYTE_LIMITS.get(new_base)
    if limit is not None and _most_bytes(old, charset) > limit:
        return f"values may hold more than the {limit} bytes the type holds"
    new_charset = effective_charset(new, charset)
    old_charset = effective_charset(old, charset)
    if new_charset is not None and new_charset != old_charset and not _holds_every_character(new_charset):
        return f"text moved to {new_charset}, which cannot hold every character"
    if old.nullable and not new.nullable and new_base not in _NOT_NULL_FILLED:
        return "NOT NULL: the server gives a NULL its type's implicit default, which a copy does not write"
    return None


def _fsp(column: TableColumn) -> int:
    return column.params[0] if column.params else 0


def _widens(old: TableColumn, new: TableColumn, was: StoredType, now: StoredType) -> bool:
    """Whether every value of the old stored kind keeps its value in the new one (or is cut as a copy cuts it)."""
    if was.kind == now.kind == "string":
        return old.base not in ("time", "json") and new.base not in ("time", "json", "uuid", "inet4", "inet6")
    if old.base in INTEGER_TYPES and new.base in INTEGER_TYPES:  # (BIGINT UNSIGNED: a decimal kind)
        low, high = _integer_range(old)
        new_low, new_high = _integer_range(new)
        return new_low <= low and high <= new_high
    if old.base == "date" and new.base == "datetime":
        return True  # midnight of the day (a TIMESTAMP would read it in the session's zone)
    if old.base in INTEGER_TYPES and new.base == "decimal":  # (BIGINT UNSIGNED is a decimal kind too: not this)
        digits = 20 if old.base == "bigint" else 10
        return now.precision - now.scale >= digits and (not new.unsigned or old.unsigned)
    if was.kind == "decimal" and now.kind == "decimal" and old.base == new.base == "decimal":
        return not new.unsigned or old.unsigned  # (fewer integer digits: checked after)
    return False


def _integer_range(column: TableColumn) -> tuple[int, int]:
    bits = 8 * INTEGER_TYPES[column.base]
    return (0, 2**bits - 1) if column.unsigned else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def _most_bytes(column: TableColumn, charset: str) -> int:
    """The most bytes a value of ``column`` may hold."""
    limit = _BYTE_LIMITS.get(column.base)
    if limit is not None:
        return limit
    if column.base in ("char", "varchar", "binary", "varbinary"):
        length = column.params[0] if column.params else 1
        text = effective_charset(column, charset)
        return length * (1 if text is None else charset_named(text).maxlen)
    return 1 << 32  # anything else held as text or bytes: as much as any type holds


def _holds_every_character(charset: str) -> bool:
    """Whether a MySQL character set holds every character (others store '?' for what they lack, under a lax
    sql_mode); ``binary`` holds bytes."""
    return charset_named(charset).name in _WHOLE_CHARSETS
