"""How a mirror table follows the DDL of a batch: the layout after it, worked out by the one DDL code
(:class:`canal.schema.SchemaCatalog`), and where each column of that layout comes from.

The mirror knows its tables by their columns (names, in order, and Arrow types), not by MySQL definitions. The
catalog is seeded with those names (types unknown), the batch's statements for the table are applied in order, and
the result says, for each column after them: which column of the mirror table it was (following renames, CHANGE
and moves), or none (added), and its new type when a statement declared it (ADD, MODIFY, CHANGE). A table renamed
by RENAME TABLE / ALTER ... RENAME TO moves; DROP TABLE removes it; CREATE TABLE makes it anew (empty, with the
statement's columns), CREATE [OR REPLACE] TABLE ... LIKE with the columns and types of the mirror table it names
(``columns_of``). Where the columns are not the mirror's to know -- LIKE a table it does not hold, ``... SELECT`` --
the table is dropped (an OR REPLACE's old rows go), and its first rows create it.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any, Final

import attrs

from canal.errors import SchemaError
from canal.lake.ddl import converters as cv
from canal.lake.ddl.conversions import KEPT as _KEPT
from canal.lake.ddl.conversions import UNKNOWN_CHARSET as _UNKNOWN_CHARSET
from canal.lake.ddl.conversions import Conversion, family, fractions_rule, statement_conversions
from canal.lake.ddl.converters import time_text
from canal.lake.ddl.ddl_text import ddl_statement, statement_mode
from canal.lake.ddl.time_zones import MirrorTimeZoneError, StatementZone, literal_to_utc
from canal.lake.ddl.versioning import known_periods, period_fill, versioning_change
from canal.lake.types import MirrorConversionError, MirrorError, ZeroDates, arrow_type
from canal.names import qualified
from canal.parse.convert import RETYPED_FROM_PROP
from canal.schema import SchemaCatalog, TableColumn, TableDef, mysql_type_text
from canal.schema.catalog import drops_primary
from canal.sql import (
    DEFAULT_MODE,
    AddColumn,
    AlterTable,
    ChangeColumn,
    ColumnDef,
    CreateTable,
    DropColumn,
    DropIndexStatement,
    DropKey,
    RenameColumn,
    RenameTable,
    RenameTo,
    SqlMode,
    read_column_type,
)
from canal.sql.charsets import CHARSETS
from canal.sql.statements import Literal
from canal.sql.types import BLOB_TYPES, INTEGER_TYPES, TEXT_TYPES
from canal.sql.values import FIXED_BINARY_SIZES, canonical_text, fixed_binary_text, float_display, float_stored

__all__ = ["Evolution", "plan_evolution", "renamed_tables"]


@attrs.frozen(slots=True)
class Evolution:
    """The outcome of a batch's DDL for one mirror table.

    ``columns``: ``(name, source, arrow_type)`` after the DDL, in order; ``source`` is the mirror table's column it
    was (None: new), ``arrow_type`` its declared type (None: unchanged). ``renames``: ``(batch row, {old: new})`` of
    each statement that renamed columns. ``exists``: whether the table exists after the DDL; ``created``: made anew by
    a CREATE TABLE in the batch (start empty); ``moved_to``: ``(schema, table)`` after a table rename.
    """

    columns: tuple[tuple[str, str | None, Any], ...]
    renames: tuple[tuple[int, dict[str, str]], ...] = ()
    exists: bool = True
    created: bool = False
    moved_to: tuple[str, str] | None = None
    # column added by an ALTER -> the canal text its existing rows read (None: NULL), as the server fills them
    fills: tuple[tuple[str, str | None], ...] = ()
    # column -> the value conversions statements of the batch made of it, in order (canal.lake.ddl.conversions): a type
    # declared anew (MODIFY / CHANGE), CONVERT TO CHARACTER SET, NOT NULL; DATETIME <-> TIMESTAMP in the statement's
    # time zone
    conversions: tuple[tuple[str, tuple[Conversion, ...]], ...] = ()
    # DROP SYSTEM VERSIONING: the mirror table's row_end column, whose current versions alone stay
    current_only: str | None = None

    def changes(self, current: Sequence[tuple[str, Any]] | None) -> bool:
        """Whether the mirror table (``(name, arrow type)`` in order; None: it does not exist) must be rewritten."""
        if not self.exists or self.created or current is None:
            return True
        if any(source != name for name, source, _kind in self.columns):
            return True  # renamed, or added (even under a name just dropped: its old values must go)
        wanted = [
            (name, kind if kind is not None else dict(current).get(source or "")) for name, source, kind in self.columns
        ]
        return wanted != list(current)


ColumnsOf = Callable[[str, str], Sequence[tuple[str, Any]] | None]
"""``(schema, table)`` -> the ``(name, Arrow type)`` of the columns of that mirror table, None if it has none."""


def plan_evolution(
    schema: str,
    table: str,
    current: Sequence[str] | None,
    ddl: Sequence[tuple[int, str]],
    *,
    mariadb: bool = True,
    columns_of: ColumnsOf | None = None,
    fold_names: bool = False,
    props: Mapping[int, Mapping[str, str]] | None = None,
    zero_dates: ZeroDates = "error",
) -> Evolution:
    """The :class:`Evolution` of table ``schema.table`` (columns ``current``; None: the mirror has no such table)
    under the statements ``ddl`` (``(batch row, sql)`` in order); ``columns_of`` gives the columns of the tables a
    CREATE TABLE ... LIKE names; ``fold_names``: the statements
    come from a server with ``lower_case_table_names=1`` (:mod:`canal.lake.ddl.ddl_text`); ``props``: the session state
    each statement's row carries by batch row (its time zone: :mod:`canal.lake.ddl.time_zones`)."""
    catalog = SchemaCatalog(database=schema, mariadb=mariadb)
    key = qualified(schema, table)
    if current is not None:
        columns = tuple(TableColumn(name, _KEPT) for name in current)
        catalog.tables[key] = TableDef(schema, table, columns, (), _UNKNOWN_CHARSET)
    origin: dict[str, str | None] = {name: name for name in current or ()}
    renames: list[tuple[int, dict[str, str]]] = []
    created = False
    moved_to: tuple[str, str] | None = None
    added: dict[str, tuple[ColumnDef, StatementZone, str | None]] = {}  # ALTERs' columns: rows take their defaults
    like_types: dict[str, Any] = {}  # the column types of the table a CREATE ... LIKE copied
    conversions: dict[str, list[Conversion]] = {}  # column now -> the conversions of its values, in order
    periods: dict[str, str] = {}  # period columns ADD SYSTEM VERSIONING added -> what the rows held read in them
    current_only: str | None = None
    for row, sql in ddl:
        state = (props or {}).get(row, {})
        stmt = ddl_statement(sql, fold_names, statement_mode(state))
        if stmt is None:
            continue
        zone = StatementZone.of(state, key, sql)
        if isinstance(stmt, CreateTable) and _names(stmt.table, schema) == key and not stmt.temporary:
            if key in catalog.tables and stmt.if_not_exists and not stmt.or_replace:
                continue  # the server leaves the table as it is
            like = stmt.like.qualified(schema) if stmt.like is not None else None
            known = None if like is None or columns_of is None else columns_of(like.schema or schema, like.name)
            if like is not None and known is not None:
                like_key = _names(like, schema)
                if like_key != key:
                    copied = tuple(TableColumn(name, _KEPT) for name, _kind in known)
                    catalog.tables[like_key] = TableDef(like.schema or schema, like.name, copied, (), _UNKNOWN_CHARSET)
                like_types = dict(known)
            elif like is not None or stmt.as_select is not None:
                # columns the mirror cannot know: the table goes (an OR REPLACE's old rows with it), its rows remake it
                catalog.tables.pop(key, None)
                origin = {}
                continue
        if isinstance(stmt, AlterTable):
            rule = fractions_rule(state)
            added.update((a.column.name, (a.column, zone, rule)) for a in stmt.actions if isinstance(a, AddColumn))
        if key not in catalog.tables and not isinstance(stmt, CreateTable):
            continue  # a statement about a table the mirror does not hold: its first rows will create it
        made: dict[str, Conversion] = {}  # column before the statement -> what the statement converts of it
        before: TableDef | None = None
        versioning = versioning_change(stmt)
        if isinstance(stmt, AlterTable):
            catalog.tables[key] = known_periods(catalog.tables[key], stmt, state)  # a versioned table's, by name
            end = next((c.name for c in catalog.tables[key].columns if c.period == "END"), None)
            if versioning == "DROP" and end is not None and origin.get(end) is not None:
                current_only = origin[end]  # the history goes with the period columns
            stmt = _as_replay(stmt, catalog.tables.get(key))
            _check_zones(stmt, catalog.tables.get(key), state, zone)
            before = catalog.tables.get(key)
        elif (
            isinstance(stmt, DropIndexStatement)
            and stmt.name.upper() == "PRIMARY"
            and key in catalog.tables
            and not catalog.tables[key].primary
        ):
            stmt = attrs.evolve(stmt, if_exists=True)  # DROP INDEX `PRIMARY` ON t: as in _as_replay
        try:
            changes = catalog.apply(stmt, schema)
        except SchemaError as exc:
            if exc.table is not None and exc.table != key:
                continue  # about another table (the mirror holds only this one in this catalog)
            raise MirrorError(f"{key}: cannot follow {sql[:200]!r}: {exc}") from None
        for change in changes:
            if change.old != key and change.new != key:
                continue
            if change.kind == "alter" and isinstance(stmt, AlterTable) and change.new is not None:
                after = catalog.tables[change.new]
                made = statement_conversions(key, sql, stmt, state, zone, before, after, change.origin, mariadb)
            if change.kind == "drop":
                origin, conversions = {}, {}
            elif change.kind == "create":
                created = True
                origin, conversions = {c.name: None for c in catalog.tables[key].columns}, {}
            elif change.kind == "rename" or (change.kind == "alter" and change.new != key):
                assert change.new is not None
                if change.kind == "alter":
                    origin, renamed = _follow(origin, change.origin)
                    conversions = _chained(conversions, change.origin, made)
                    if renamed:
                        renames.append((row, renamed))
                key = change.new
                moved = catalog.tables[key]
                moved_to = (moved.db, moved.name)
            elif change.kind == "alter":
                origin, renamed = _follow(origin, change.origin)
                conversions = _chained(conversions, change.origin, made)
                if renamed:
                    renames.append((row, renamed))
        if versioning == "ADD" and key in catalog.tables:  # the rows it holds get their first version's period
            where = f"{key}: {sql[:200]!r}"
            periods.update(
                (c.name, period_fill(c.period, state, where))
                for c in catalog.tables[key].columns
                if c.period is not None and origin.get(c.name) is None and c.name not in periods
            )
    final = catalog.tables.get(key)
    if final is None:
        return Evolution((), tuple(renames), exists=False, created=created, moved_to=moved_to)
    fills: tuple[tuple[str, str | None], ...] = ()
    if not created:
        fills = tuple(
            (c.name, periods[c.name] if c.name in periods else _fill(key, *added[c.name], c, zero_dates, mariadb))
            for c in final.columns
            if origin.get(c.name) is None and (c.name in added or c.name in periods)
        )
    return Evolution(
        tuple(
            (
                c.name,
                origin.get(c.name),
                (like_types.get(c.name) if created else None)
                if c.base == _KEPT
                else arrow_type(mysql_type_text(c, mariadb)),
            )
            for c in final.columns
        ),
        tuple(renames),
        created=created,
        moved_to=moved_to,
        fills=fills,
        conversions=tuple(
            (name, tuple(done)) for name, done in conversions.items() if done and origin.get(name) is not None
        ),
        current_only=current_only,
    )


_ZONED: Final = frozenset({"datetime", "timestamp"})


def _check_zones(stmt: AlterTable, table: TableDef | None, state: Mapping[str, str], zone: StatementZone) -> None:
    """A MirrorTimeZoneError for a column ``stmt`` converts in a time zone that is not UTC in a way the mirror does
    not model (DATETIME <-> TIMESTAMP it models: :mod:`canal.lake.ddl.conversions`), or may convert so (its type before
    is unknown). A column's type before is the catalog's when a statement of the batch declared it, else the schema
    history's (:data:`~canal.parse.convert.RETYPED_FROM_PROP`)."""
    if table is None:
        return
    before = {c.name.lower(): c for c in table.columns}
    known = {name.lower(): mysql_type for name, mysql_type in json.loads(state.get(RETYPED_FROM_PROP, "{}")).items()}
    for action in stmt.actions:
        if not isinstance(action, ChangeColumn) or action.old_name.lower() not in before:
            continue
        new = action.column.type.base
        old_column = before[action.old_name.lower()]
        old: str | None = old_column.base
        if old == _KEPT:
            text = known.get(action.old_name.lower())
            old = None if text is None else read_column_type(text, strict=False).base
        modeled = old is not None and ({old, new} == _ZONED or old == new or "timestamp" not in {old, new})
        if zone.identity or modeled:
            continue  # local time is UTC, DATETIME <-> TIMESTAMP, or no TIMESTAMP meets another type
        what = (
            "may have been a TIMESTAMP (the entry names no type before it: no schema history)"
            if old is None
            else (f"converts {old.upper()} to {new.upper()}, which the mirror converts only at UTC")
        )
        raise MirrorTimeZoneError(
            f"{zone.describe()}: column {action.old_name!r} {what}. Nothing of the step was written. Mirror the "
            "table anew from a snapshot taken after the statement.",
            table=zone.table,
            column=action.old_name,
            from_type=old,
            to_type=new,
            statement=zone.sql,
        )


def _chained(
    conversions: dict[str, list[Conversion]], step: Mapping[str, str | None], made: Mapping[str, Conversion]
) -> dict[str, list[Conversion]]:
    """The columns' conversions after one ALTER (``step``: new name -> the name before; ``made``: what it converted,
    by the name before), its own added."""
    out = {new: list(conversions.get(old, ())) for new, old in step.items() if old is not None}
    for new, old in step.items():
        if old is not None and old in made:
            out[new].append(made[old])
    return out


def _fill(
    key: str,
    definition: ColumnDef,
    zone: StatementZone,
    rule: str | None,
    column: TableColumn,
    zero_dates: ZeroDates,
    mariadb: bool,
) -> Any:
    """The value an added column's existing rows read (:func:`existing_rows_value`) as the column stores it
    (:func:`stored_default`: fractional seconds cut by the statement's ``rule``, ...); a
    TIMESTAMP's DEFAULT names a local time in the statement's zone, which the server stores as the UTC instant."""
    value = existing_rows_value(key, definition, column, mariadb=mariadb, sql=zone.sql)
    if definition.default is not None and definition.default.literal:
        literal = _as_column_takes(definition.default.value, column, key, zone.sql)
        value = stored_default(value, literal, mysql_type_text(column, mariadb), rule, key, column.name, zone.sql)
    if column.base != "timestamp" or zone.identity:
        return value
    return literal_to_utc(value, zone, zero_dates, f"{key}: column {column.name!r}")


_ZERO_TEXT: Final = {"date": "0000-00-00", "datetime": "0000-00-00 00:00:00", "time": "00:00:00", "year": "0"}


def existing_rows_value(
    table: str, definition: ColumnDef, column: TableColumn, *, mariadb: bool = True, sql: str = ""
) -> str | None:
    """The canal text the rows a table already holds read in a column ``ALTER TABLE ... ADD`` gives them (None:
    NULL): its constant DEFAULT (as the column stores and ``SELECT`` shows it: a FLOAT's rounded, a UUID's or INET's
    canonical text, a hexadecimal or bit literal's bytes as the type takes them -- text, bytes or their number), else
    for a NOT NULL column the type's implicit default (0, '', an ENUM's first label, a zero date, the zero UUID or
    address, a BINARY(n)'s n zero bytes), else NULL -- what the server writes into them without logging a row. A
    default the mirror cannot compute (an expression, CURRENT_TIMESTAMP, a sequence, AUTO_INCREMENT numbering, a
    generated column) is a MirrorError naming the table and column: never a NULL where the source has a value."""
    default = definition.default
    if (
        definition.generated is not None
        or definition.auto_increment
        or (column.base == "timestamp" and (default is None and not column.nullable))
    ):
        raise MirrorError(
            f"{table}: column {column.name!r} is added with values the server computes for each existing row "
            f"({definition.type.text}{' AUTO_INCREMENT' if definition.auto_increment else ''}"
            f"{' AS (' + definition.generated.text + ')' if definition.generated else ''}): the mirror cannot fill them"
        )
    if default is not None:
        if not default.literal:
            raise MirrorError(
                f"{table}: column {column.name!r} is added with DEFAULT {default.text}, an expression the mirror "
                "cannot compute for the rows it already holds"
            )
        value = _as_column_takes(default.value, column, table, sql)
        if value is None:
            return None
        if isinstance(value, bool):
            return "1" if value else "0"
        return _stored_text(table, column, value, mariadb)
    if column.nullable:
        return None
    if _fixed_bytes(column):  # BINARY(n): n zero bytes (canal's text of bytes: a character a byte)
        return "\0" * (column.params[0] if column.params else 1)
    if column.base in FIXED_BINARY_SIZES:  # the value of zero bytes
        text = fixed_binary_text(column.base)
        assert text is not None
        return text(bytes(FIXED_BINARY_SIZES[column.base]))
    if column.base == "enum":
        return column.labels[0] if column.labels else ""
    if column.base == "time":
        return time_text(0, column.params[0] if column.params else 0)  # as the mirror holds a TIME: its digits
    if column.base in _ZERO_TEXT:
        return _ZERO_TEXT[column.base]
    if column.base in INTEGER_TYPES or column.base in ("decimal", "float", "double", "bit"):
        return "0"
    return ""


_MOMENT: Final = re.compile(r"(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?")
_TIME: Final = re.compile(r"-?\d{1,3}:\d{2}:\d{2}(?:\.\d{1,6})?")


def stored_default(
    text: str | None, literal: Any, column_type: str, rule: str | None, table: str, column: str, sql: str
) -> str | None:
    """A column's literal DEFAULT (canal text; ``literal`` the value the SQL reader read) as the rows ``ADD COLUMN``
    gives it store it (measured): fractional seconds beyond the type's cut by the statement's ``rule`` (a typed stop
    where it is unknown), a CHAR without trailing spaces, a SET's labels in the definition's order, an ENUM's label
    as written, a YEAR given as 1-99 in 2001-2069 / 1970-1999, a DECIMAL rounded half away from zero."""
    if text is None:
        return None
    t = read_column_type(column_type, strict=False)
    kind = family(t)
    try:
        if kind in ("datetime", "timestamp") and (moment := _MOMENT.fullmatch(text)) is not None and moment[7]:
            year, month, day, hour, minute, second = (int(part) for part in moment.groups()[:6])
            days = (dt.date(year, month, day) - dt.date(1970, 1, 1)).days if year else None
            if days is None:
                raise cv.Unmodeled(text, "a DEFAULT in year 0 with fractional seconds")
            micros = ((days * 86400 + hour * 3600 + minute * 60 + second) * 10**6) + int(moment[7].ljust(6, "0"))
            return cv.datetime_text(cv.narrow_fraction(micros, cv.fsp(t), rule, signed=False), cv.fsp(t))
        if kind == "time":
            if not _TIME.fullmatch(text):
                raise cv.Unmodeled(text, "a TIME DEFAULT not written as [-]HH:MM:SS[.ffffff]")
            return cv.time_text(cv.narrow_fraction(cv.time_micros(text), cv.fsp(t), rule, signed=True), cv.fsp(t))
        if kind == "binary" and t.base in ("binary", "char"):  # BINARY(n) pads with zero bytes (a CHAR(n) BINARY)
            return text.ljust(t.params[0] if t.params else 1, "\0")
        if kind == "text" and t.base == "char":
            return text.rstrip(" ")
        if kind == "set":
            return cv.set_labels(text, t.labels)
        if kind == "enum":
            if text.rstrip(" ") not in t.labels:
                raise cv.Unmodeled(text, "a DEFAULT that is no label as written (the collation decides)")
            return text.rstrip(" ")
        if kind == "year":
            if isinstance(literal, int) and not isinstance(literal, bool):
                return str(cv.to_year(literal))
            if not (len(text) == 4 and text.isdigit()):
                raise cv.Unmodeled(text, "a YEAR DEFAULT given as text other than four digits")
        if kind == "decimal" and isinstance(literal, int | Decimal | float) and not isinstance(literal, bool):
            return cv.decimal_text(cv.to_decimal(literal, t))
    except (cv.Unmodeled, ValueError) as exc:
        why = exc.why if isinstance(exc, cv.Unmodeled) else str(exc)
        raise MirrorConversionError(
            f"{table}: {sql[:200]!r} adds column {column!r} ({column_type}) with DEFAULT {text!r}: {why}, which the "
            "mirror does not reproduce exactly for the rows the table holds. Nothing of the step was written. Mirror "
            "the table anew from a snapshot taken after the statement.",
            table=table,
            column=column,
            to_type=column_type,
            statement=sql,
        ) from None
    return text


def _fixed_bytes(column: TableColumn) -> bool:
    """A BINARY(n) (or a CHAR(n) in the binary charset): its values padded with zero bytes to n."""
    return column.base == "binary" or (column.base == "char" and column.charset == "binary")


_NUMERIC_BASES: Final = frozenset({*INTEGER_TYPES, "decimal", "float", "double", "year", "bit"})


def _as_column_takes(value: Literal, column: TableColumn, table: str, sql: str) -> Literal:
    """A DEFAULT's literal as the column takes it: a hexadecimal or bit literal (its bytes) is a binary string, read
    as its big-endian number by a numeric type, as a UUID's or INET's stored bytes by those types, as text in the
    column's character set by a text type (a charset it does not declare: ASCII bytes only, which every character
    set the mirror knows reads alike), as bytes by a binary one (measured); other literals as they are. A value
    the mirror cannot read so is a MirrorConversionError -- so is a string of characters beyond ASCII for a binary
    type, whose bytes are the text in the statement's connection character set (not logged to the mirror)."""
    base = column.base
    binary = base in BLOB_TYPES or base in ("binary", "varbinary") or column.charset == "binary"
    if isinstance(value, str) and binary and not value.isascii():
        raise MirrorConversionError(
            f"{table}: {sql[:200]!r} adds column {column.name!r} ({base.upper()}) with DEFAULT {value!r}: text beyond "
            "ASCII as bytes, which are its encoding in the session's connection character set. Nothing of the step "
            "was written. Mirror the table anew from a snapshot taken after the statement.",
            table=table,
            column=column.name,
            to_type=base,
            statement=sql,
        )
    if not isinstance(value, bytes):
        return value
    if base in _NUMERIC_BASES:
        return int.from_bytes(value, "big")
    fixed = fixed_binary_text(base)
    if fixed is not None and len(value) == FIXED_BINARY_SIZES[base]:
        return fixed(value)
    if binary:
        return value.decode("latin-1")  # canal's text of bytes: a character a byte
    known = None if column.charset is None else CHARSETS.get(column.charset.lower())
    codec = None if known is None else known.codec
    if base in TEXT_TYPES or base in ("enum", "set", "json"):
        try:
            if codec is not None:
                return value.decode(codec)
            if value.isascii():
                return value.decode("ascii")
        except (UnicodeDecodeError, LookupError):
            pass
    raise MirrorConversionError(
        f"{table}: {sql[:200]!r} adds column {column.name!r} ({base.upper()}) with DEFAULT of the bytes "
        f"{value.hex()!r}, which the mirror does not read as that column's value exactly"
        f"{' (in a character set the statement does not declare)' if codec is None else ''}. "
        "Nothing of the step was written. Mirror the table anew from a snapshot taken after the statement.",
        table=table,
        column=column.name,
        to_type=base,
        statement=sql,
    )


def _stored_text(table: str, column: TableColumn, value: object, mariadb: bool) -> str:
    """A literal DEFAULT as the column stores it and ``SELECT`` shows it (:mod:`canal.sql.values`)."""
    try:
        if column.base in FIXED_BINARY_SIZES:
            return canonical_text(column.base, str(value))
        if column.base in ("float", "double") and isinstance(value, int | float | Decimal):
            scale = column.params[1] if len(column.params) > 1 else None
            single = column.base == "float"
            stored = float_stored(float(value), single, scale)
            show = float_display(single, scale, mariadb=mariadb)
            return repr(stored if show is None else show(stored))
    except (ValueError, OverflowError) as exc:
        raise MirrorError(
            f"{table}: column {column.name!r} is added with DEFAULT {value!r}, which the mirror cannot read as "
            f"{column.base.upper()}: {exc}"
        ) from None
    return str(value)


def _follow(
    origin: dict[str, str | None], step: dict[str, str | None] | Any
) -> tuple[dict[str, str | None], dict[str, str]]:
    """Compose the mirror columns' origins with one ALTER's (new name -> name before it); the renames it made."""
    renamed = {old: new for new, old in step.items() if old is not None and old != new}
    return {new: (origin.get(old) if old is not None else None) for new, old in step.items()}, renamed


def _names(name: Any, session: str) -> str:
    """The catalog's key of a table name a statement wrote (its schema defaulting to the session's)."""
    return qualified(name.schema if name.schema is not None else session, name.name)


def renamed_tables(sql: str, session: str, fold_names: bool, mode: SqlMode = DEFAULT_MODE) -> list[tuple[str, str]]:
    """``(schema, table)`` of each table a statement renames (RENAME TABLE, ALTER TABLE ... RENAME TO), old names
    (``fold_names``, ``mode``: as :func:`canal.lake.ddl.ddl_text.ddl_statement`)."""
    stmt = ddl_statement(sql, fold_names, mode)
    if isinstance(stmt, RenameTable):
        pairs = [old for old, _new in stmt.pairs]
    elif isinstance(stmt, AlterTable) and any(isinstance(a, RenameTo) for a in stmt.actions):
        pairs = [stmt.table]
    else:
        return []
    return [(name.schema if name.schema is not None else session, name.name) for name in pairs]


def _as_replay(stmt: AlterTable, table: TableDef | None) -> AlterTable:
    """An ALTER made safe to apply to a table that may already have it (a batch replayed after a crash between the
    rewrite and the MERGE): adding a column it has, dropping one it lacks, renaming one it already renamed, are
    no-ops. And to a table whose primary key the catalog does not know (seeded from the mirror's columns): dropping
    the primary key is a no-op there -- the server dropped one, and keys change no column."""
    if table is None:
        return stmt
    names = {c.name.lower() for c in table.columns}
    actions = []
    for action in stmt.actions:
        if isinstance(action, DropKey) and not table.primary and drops_primary(action):
            action = attrs.evolve(action, if_exists=True)
        elif isinstance(action, AddColumn) and action.column.name.lower() in names:
            action = attrs.evolve(action, if_not_exists=True)
        elif isinstance(action, DropColumn) and action.name.lower() not in names:
            action = attrs.evolve(action, if_exists=True)
        elif isinstance(action, RenameColumn) and action.old_name.lower() not in names:
            if action.new_name.lower() in names:
                continue
        elif (
            isinstance(action, ChangeColumn)
            and action.old_name.lower() not in names
            and action.column.name.lower() in names
        ):
            action = attrs.evolve(action, old_name=action.column.name)
        actions.append(action)
    return attrs.evolve(stmt, actions=tuple(actions))
