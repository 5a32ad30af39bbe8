"""canal's table and field filters.

Table filters (``canal.instance.filter.regex`` / ``filter.black.regex``, a client's subscribe filter) are canal's
``AviaterRegexFilter``: a comma-separated list of Perl regular expressions, each matched case-insensitively against
the whole of ``"schema.table"``. Commas inside ``{}``, ``[]`` or ``()`` do not split (``order_\\d{1,2}`` is one
pattern); spaces around the patterns are dropped. An unescaped ``.`` is a regex dot, as in canal: ``test.a`` also
matches ``testxa``; write ``test\\.a`` for the literal dot. A doubled backslash before a dot (``test\\\\..*``, the
way canal's properties-file examples spell it) is read as an escaped dot. An empty filter matches every table when it
is a white list and no table when it is a black list.

Field filters (``canal.instance.filter.field`` / ``filter.black.field``) are ``schema.table:col1/col2,...``: exact
(case-insensitive) table names, each with the columns to keep (white) or to drop (black). As in canal, a table's
white list wins over its black list, and primary-key columns are not kept unless listed.

Matching results are memoized per (schema, table), table projections per :class:`TableSchema` object; both memos
are bounded.
"""

from __future__ import annotations

import abc
import operator
import re
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from canal.errors import FilterError
from canal.protocol import RowData, Rows, TableSchema

__all__ = [
    "FieldFilter",
    "NameFilter",
    "TableFilter",
    "TableFilters",
    "compile_field_filter",
    "compile_table_filter",
    "split_patterns",
]

_MEMO_MAX = 65536
_MATCH_ALL = frozenset({r".*\..*", ".*", ".+"})  # after _normalize
_FLAGS = re.IGNORECASE | re.DOTALL  # canal: CASE_INSENSITIVE | SINGLELINE


def split_patterns(text: str) -> list[str]:
    """Split a filter at commas outside ``{}``, ``[]`` and ``()`` (backslash escapes respected); trim; drop empties."""
    parts: list[str] = []
    depth = {"{": 0, "[": 0, "(": 0}
    closers = {"}": "{", "]": "[", ")": "("}
    start = 0
    i = 0
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c in depth:
            depth[c] += 1
        elif c in closers:
            opener = closers[c]
            if depth[opener] > 0:
                depth[opener] -= 1
        elif c == "," and not any(depth.values()):
            parts.append(text[start:i])
            start = i + 1
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _normalize(pattern: str) -> str:
    # canal's docs spell an escaped dot as `\\.` because properties files unescape it; a regex with a literal
    # backslash before any character is meaningless for a table name, so read `\\.` as `\.`
    return pattern.replace("\\\\.", "\\.")


class NameFilter(abc.ABC):
    """Something that says whether a table (schema, table) is selected."""

    @abc.abstractmethod
    def matches(self, schema: str, table: str) -> bool:
        """Whether ``schema.table`` is selected."""

    def narrowed(self, other: NameFilter) -> NameFilter:
        """A filter that selects a table only when this one and ``other`` both do."""
        return _AllOf((self, other))

    def may_select_in(self, schema: str) -> bool:
        """Whether some table of ``schema`` may be selected (a database-level DDL's test); True when unsure."""
        return True

    def selects_all_of(self, schema: str) -> bool:
        """Whether every table of ``schema`` is selected for sure; False when unsure."""
        return False


@attrs.define(slots=True, eq=False, repr=False)
class TableFilter(NameFilter):
    """One compiled canal regex filter. Build it with :func:`compile_table_filter`."""

    text: str
    patterns: tuple[str, ...]
    _match: Callable[[str], bool] = attrs.field(alias="_match")
    match_empty: bool = True
    # the ``schema.table`` names (lower case) a filter of plain names selects, an ASCII name matching when its lower
    # case is one of them; None when a pattern is a regex
    literal_names: frozenset[str] | None = None
    _memo: dict[tuple[str, str], bool] = attrs.field(factory=dict, init=False)

    @property
    def is_empty(self) -> bool:
        return not self.patterns

    @property
    def matches_all(self) -> bool:
        """True when the filter selects every table (empty white list, or a ``.*\\..*`` pattern)."""
        return (self.is_empty and self.match_empty) or any(_normalize(p) in _MATCH_ALL for p in self.patterns)

    def matches(self, schema: str, table: str) -> bool:
        key = (schema, table)
        memo = self._memo
        hit = memo.get(key)
        if hit is not None:
            return hit
        result = self.matches_name(f"{schema}.{table}")
        if len(memo) >= _MEMO_MAX:
            memo.clear()
        memo[key] = result
        return result

    def matches_name(self, full_name: str) -> bool:
        """Match a ready-made ``schema.table`` string (not memoized)."""
        if not self.patterns:
            return self.match_empty
        return self._match(full_name)

    def may_select_in(self, schema: str) -> bool:
        if not self.patterns:
            return self.match_empty
        for pattern in self.patterns:
            parts = _schema_and_table(_normalize(pattern))
            if parts is None or re.fullmatch(parts[0], schema, _FLAGS):
                return True
        return False

    def selects_all_of(self, schema: str) -> bool:
        if not self.patterns:
            return self.match_empty
        if self.matches_all:
            return True
        for pattern in self.patterns:
            parts = _schema_and_table(_normalize(pattern))
            if parts is not None and parts[1] in (".*", ".+") and re.fullmatch(parts[0], schema, _FLAGS):
                return True
        return False

    def __repr__(self) -> str:
        return f"TableFilter({self.text!r})"

    def __str__(self) -> str:
        return self.text


def compile_table_filter(text: str | None, key: str = "filter", *, match_empty: bool = True) -> TableFilter:
    """Compile a canal table filter; a pattern Python's ``re`` rejects raises FilterError naming ``key`` and it.

    ``match_empty`` is what an empty filter answers: True for white lists (``filter.regex``, a client filter),
    False for black lists (``filter.black.regex``).
    """
    text = text or ""
    patterns = tuple(split_patterns(text))
    compiled: list[re.Pattern[str]] = []
    for p in patterns:
        try:
            compiled.append(re.compile(_normalize(p), _FLAGS))
        except (re.error, OverflowError, RecursionError) as e:
            raise FilterError(
                f"{key}: pattern {p!r} is not a valid regular expression ({e}); patterns are comma-separated "
                r"regexes over 'schema.table', e.g. 'test\..*,shop\.orders'",
                key=key,
            ) from None
    match: Callable[[str], bool]
    if any(_normalize(p) in _MATCH_ALL for p in patterns):
        match = _always
    elif len(compiled) == 1:
        match = _fullmatcher(compiled[0])
    elif all(c.groups == 0 for c in compiled):
        try:
            combined = re.compile("|".join(f"(?:{c.pattern})" for c in compiled), _FLAGS)
        except re.error:  # e.g. inline global flags inside one pattern
            match = _any_fullmatch(tuple(compiled))
        else:
            match = _fullmatcher(combined)
    else:  # groups: back-references would be renumbered in one combined regex
        match = _any_fullmatch(tuple(compiled))
    literals = [_literal(_normalize(p)) for p in patterns]
    names = None
    if patterns and all(name is not None for name in literals):
        names = frozenset(name.lower() for name in literals if name is not None)
        match = _literal_matcher(names, match)
    return TableFilter(text, patterns, _match=match, match_empty=match_empty, literal_names=names)


_METACHARACTERS = frozenset(".^$*+?{}[]|()")


def _literal(pattern: str) -> str | None:
    """The one name ``pattern`` matches when it is plain ASCII text (``shop\\.orders``: escaped punctuation, no
    metacharacter); else None."""
    if not pattern.isascii():
        return None
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            if i + 1 >= len(pattern) or pattern[i + 1].isalnum() or pattern[i + 1] == "_":
                return None  # \d, \b, \1 ... are classes, anchors or references
            out.append(pattern[i + 1])
            i += 2
            continue
        if c in _METACHARACTERS or not c.isprintable():
            return None
        out.append(c)
        i += 1
    return "".join(out)


def _literal_matcher(names: frozenset[str], regex: Callable[[str], bool]) -> Callable[[str], bool]:
    """A filter of plain names (a destination per table or database, as canal's deployments configure them): a set
    lookup in place of a regex, which a shared reader asks for each table and each of its destinations. The regex
    still answers for a name that is not ASCII, where its case-insensitive matching is more than ``lower()``."""

    def match(name: str) -> bool:
        if name.isascii():
            return name.lower() in names
        return regex(name)

    return match


def _schema_and_table(pattern: str) -> tuple[str, str] | None:
    """A pattern ``S\\.T`` split at its first escaped dot outside groups and classes into the regexes of the schema
    and of the table; None when it has no such dot, or a top-level ``|`` (the split would not say what it matches)."""
    depth, in_class, i, split = 0, False, 0, None
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            if pattern[i + 1 : i + 2] == "." and depth == 0 and not in_class and split is None:
                split = i
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if pattern[i + 1 : i + 2] == "]":  # a ']' first in a class is a literal
                i += 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            return None
        i += 1
    if split is None:
        return None
    return pattern[:split], pattern[split + 2 :]


def _always(_: str) -> bool:
    return True


def _fullmatcher(rx: re.Pattern[str]) -> Callable[[str], bool]:
    fullmatch = rx.fullmatch

    def match(name: str) -> bool:
        return fullmatch(name) is not None

    return match


def _any_fullmatch(compiled: tuple[re.Pattern[str], ...]) -> Callable[[str], bool]:
    def match(name: str) -> bool:
        return any(c.fullmatch(name) is not None for c in compiled)

    return match


@attrs.define(slots=True, eq=False)
class _AllOf(NameFilter):
    parts: tuple[NameFilter, ...]

    def matches(self, schema: str, table: str) -> bool:
        return all(p.matches(schema, table) for p in self.parts)

    def may_select_in(self, schema: str) -> bool:
        return all(p.may_select_in(schema) for p in self.parts)

    def selects_all_of(self, schema: str) -> bool:
        return all(p.selects_all_of(schema) for p in self.parts)


@attrs.define(slots=True, eq=False)
class _AnyOf(NameFilter):
    parts: tuple[NameFilter, ...]

    def matches(self, schema: str, table: str) -> bool:
        return any(p.matches(schema, table) for p in self.parts)

    def may_select_in(self, schema: str) -> bool:
        return any(p.may_select_in(schema) for p in self.parts)

    def selects_all_of(self, schema: str) -> bool:
        return any(p.selects_all_of(schema) for p in self.parts)


def _unmemoized(f: NameFilter, schema: str, table: str) -> bool:
    """``f.matches(schema, table)`` for a caller that keeps its own memo: a stream over thousands of tables asks
    once for each, and a second memo of the same answer cost as much as the match."""
    if isinstance(f, TableFilter):
        return f.matches_name(f"{schema}.{table}") if f.patterns else f.match_empty
    return f.matches(schema, table)


_EVERYTHING = compile_table_filter("", "filter", match_empty=True)
_NOTHING = compile_table_filter("", "black_filter", match_empty=False)


@attrs.define(slots=True, eq=False)
class TableFilters:
    """A white and a black filter together: a table is included when white matches and black does not.

    ``narrowed`` combines an instance's filters with a client's: both white filters must match and neither black
    one may (canal instead let the client filter replace the instance filter).
    """

    white: NameFilter = _EVERYTHING
    black: NameFilter = _NOTHING
    _memo: dict[tuple[str, str], bool] = attrs.field(factory=dict, init=False, repr=False)

    def __attrs_post_init__(self) -> None:
        # an empty black list excludes nothing, however it was compiled
        if isinstance(self.black, TableFilter) and self.black.is_empty and self.black.match_empty:
            self.black = _NOTHING

    @classmethod
    def from_strings(
        cls,
        white: str | None = "",
        black: str | None = "",
        *,
        white_key: str = "filter_regex",
        black_key: str = "black_regex",
    ) -> TableFilters:
        return cls(
            compile_table_filter(white, white_key, match_empty=True),
            compile_table_filter(black, black_key, match_empty=False),
        )

    def includes(self, schema: str, table: str) -> bool:
        key = (schema, table)
        memo = self._memo
        hit = memo.get(key)
        if hit is not None:
            return hit
        result = _unmemoized(self.white, schema, table) and not _unmemoized(self.black, schema, table)
        if len(memo) >= _MEMO_MAX:
            memo.clear()
        memo[key] = result
        return result

    def matches(self, schema: str, table: str) -> bool:
        """Alias of :meth:`includes`, so a TableFilters can stand where a filter is expected."""
        return self.includes(schema, table)

    @property
    def literal_names(self) -> frozenset[str] | None:
        """The ``schema.table`` names (lower case) these filters include when the white list is plain names and
        the black list empty: an ASCII table is included exactly when its lower-cased name is one of them (a name
        outside ASCII is asked of :meth:`includes`). None otherwise."""
        white, black = self.white, self.black
        if isinstance(white, TableFilter) and isinstance(black, TableFilter) and black.is_empty:
            return white.literal_names  # (an empty black list excludes nothing: __attrs_post_init__)
        return None

    def may_include_schema(self, schema: str) -> bool:
        """Whether a table of ``schema`` may be included: what a database-level DDL (``CREATE/DROP DATABASE``)
        passes on. Decided from the patterns' schema parts (``shop\\..*`` -> ``shop``); a pattern that cannot be
        split that way (``.*orders``, a top-level ``|``) may match any schema, so the DDL passes."""
        return self.white.may_select_in(schema) and not self.black.selects_all_of(schema)

    def narrowed(self, other: TableFilters | NameFilter | None) -> TableFilters:
        """These filters further restricted by ``other`` (a client's filter, or another white/black pair)."""
        if other is None:
            return self
        if isinstance(other, TableFilters):
            white = _narrow_white(self.white, other.white)
            black = _widen_black(self.black, other.black)
            return TableFilters(white, black)
        return TableFilters(_narrow_white(self.white, other), self.black)


def _narrow_white(a: NameFilter, b: NameFilter) -> NameFilter:
    if isinstance(b, TableFilter) and b.matches_all:
        return a
    if isinstance(a, TableFilter) and a.matches_all:
        return b
    return _AllOf((a, b))


def _widen_black(a: NameFilter, b: NameFilter) -> NameFilter:
    if isinstance(b, TableFilter) and b.is_empty and not b.match_empty:
        return a
    if isinstance(a, TableFilter) and a.is_empty and not a.match_empty:
        return b
    return _AnyOf((a, b))


# --------------------------------------------------------------------------------------------------------------------
# field filters


@attrs.frozen(slots=True)
class _Projection:
    indexes: tuple[int, ...]
    table: TableSchema
    take: Callable[[tuple[Any, ...]], tuple[Any, ...]]


def _taker(indexes: tuple[int, ...]) -> Callable[[tuple[Any, ...]], tuple[Any, ...]]:
    if not indexes:
        return lambda image: ()
    if len(indexes) == 1:
        i = indexes[0]
        return lambda image: (image[i],)
    getter = operator.itemgetter(*indexes)
    return getter


def _parse_field_spec(text: str | None, key: str) -> dict[str, frozenset[str]]:
    """canal's ``schema.table:col1/col2,schema2.table2:col3``; table names are literal and compared case-insensitively.

    Stricter than canal, which silently skips malformed entries: every mistake raises FilterError. A table named
    twice gets the union of its columns (canal keeps the last entry).
    """
    spec: dict[str, frozenset[str]] = {}
    for raw in (text or "").split(","):
        entry = raw.strip()
        if not entry:
            continue

        def bad(reason: str, entry: str = entry) -> FilterError:
            return FilterError(f"{key}: entry {entry!r} {reason} (expected 'schema.table:col1/col2,...')", key=key)

        table, sep, cols = entry.partition(":")
        if not sep:
            raise bad("has no ':'")
        if ":" in cols:
            raise bad("has more than one ':'")
        schema, dot, name = table.strip().partition(".")
        if not dot or not schema.strip() or not name.strip():
            raise bad("does not name schema.table")
        columns = [c.strip().casefold() for c in cols.split("/")]
        if any(not c for c in columns):
            raise bad("has an empty column name")
        table_key = f"{schema.strip()}.{name.strip()}".casefold()
        spec[table_key] = spec.get(table_key, frozenset()) | frozenset(columns)  # repeated tables add up
    return spec


class FieldFilter:
    """Which columns of which tables to deliver: canal's field white list and black list together."""

    __slots__ = ("_cache", "exclude", "include")

    def __init__(
        self,
        include: Mapping[str, Iterable[str]] | None = None,
        exclude: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        self.include: Mapping[str, frozenset[str]] = {
            k.casefold(): frozenset(c.casefold() for c in v) for k, v in (include or {}).items()
        }
        self.exclude: Mapping[str, frozenset[str]] = {
            k.casefold(): frozenset(c.casefold() for c in v) for k, v in (exclude or {}).items()
        }
        self._cache: dict[int, tuple[weakref.ref[TableSchema], _Projection | None]] = {}

    @classmethod
    def parse(
        cls,
        include: str | None = "",
        exclude: str | None = "",
        *,
        include_key: str = "field_filter",
        exclude_key: str = "black_field_filter",
    ) -> FieldFilter:
        """From canal's ``filter.field`` / ``filter.black.field`` strings; malformed entries raise FilterError."""
        return cls(_parse_field_spec(include, include_key), _parse_field_spec(exclude, exclude_key))

    @property
    def is_empty(self) -> bool:
        return not self.include and not self.exclude

    def keep_indexes(self, table: TableSchema) -> tuple[int, ...] | None:
        """The indexes of the columns to keep, or None when the table is delivered whole."""
        proj = self._projection(table)
        return None if proj is None else proj.indexes

    def project_schema(self, table: TableSchema) -> TableSchema:
        """The narrowed schema rows of ``table`` are delivered with (the same object when nothing is dropped)."""
        proj = self._projection(table)
        return table if proj is None else proj.table

    def project(self, row: RowData) -> RowData:
        """The row with only the kept columns, against the (cached, shared) projected schema."""
        return self.project_rows(row.table, (row,))[0]

    def project_rows(self, table: TableSchema, rows: Sequence[RowData]) -> Sequence[RowData]:
        """The rows of one change of ``table`` with only the kept columns (:meth:`project`, image by image: no
        RowData is built); ``rows`` itself when nothing is dropped."""
        proj = self._projection(table)
        if proj is None:
            return rows
        if not rows:
            return Rows(proj.table, None, ())
        images = Rows.of(rows)
        take = proj.take

        def side(images: Sequence[tuple[Any, ...] | None] | None) -> list[tuple[Any, ...] | None] | None:
            if images is None:
                return None
            if None in images:  # rows of mixed shapes (made by hand): the ones without this image keep none
                return [None if image is None else take(image) for image in images]
            return list(map(take, images))  # type: ignore[arg-type]  # no None in it

        diffs = images.diffs
        if diffs is not None:  # a partial JSON update's diffs follow their columns to their new indexes, or go
            at = {old: new for new, old in enumerate(proj.indexes)}
            kept = [None if d is None else {at[i]: c for i, c in d.items() if i in at} or None for d in diffs]
            diffs = None if kept.count(None) == len(kept) else kept
        return Rows(proj.table, side(images.before), side(images.after), diffs)

    def _projection(self, table: TableSchema) -> _Projection | None:
        if not self.include and not self.exclude:
            return None
        cache = self._cache
        ident = id(table)
        entry = cache.get(ident)
        if entry is not None and entry[0]() is table:
            return entry[1]
        proj = self._compute(table)
        if len(cache) >= 4096:
            cache.clear()

        def forget(_: object, ident: int = ident) -> None:
            current = cache.get(ident)
            if current is not None and current[0]() is None:
                cache.pop(ident, None)

        cache[ident] = (weakref.ref(table, forget), proj)
        return proj

    def _compute(self, table: TableSchema) -> _Projection | None:
        full = f"{table.schema}.{table.table}".casefold()
        keep = self.include.get(full)
        if keep:
            indexes = tuple(i for i, n in enumerate(table.names) if n.casefold() in keep)
        else:
            drop = self.exclude.get(full)
            if not drop:
                return None
            indexes = tuple(i for i, n in enumerate(table.names) if n.casefold() not in drop)
        if len(indexes) == len(table.columns):
            return None
        narrowed = TableSchema(table.schema, table.table, tuple(table.columns[i] for i in indexes))
        return _Projection(indexes, narrowed, _taker(indexes))


def compile_field_filter(
    include: str | None = "",
    exclude: str | None = "",
    *,
    include_key: str = "field_filter",
    exclude_key: str = "black_field_filter",
) -> FieldFilter:
    """Same as :meth:`FieldFilter.parse`; config.py calls it to validate the two settings."""
    return FieldFilter.parse(include, exclude, include_key=include_key, exclude_key=exclude_key)
