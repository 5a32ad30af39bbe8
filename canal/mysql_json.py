"""MySQL's JSON values as pycanal hands them out: the values only MySQL's JSON has, the text MySQL prints, and the
partial updates MySQL logs (``binlog_row_value_options=PARTIAL_JSON``).

A partial update logs a JSON column's change as a list of :class:`JsonDiff` -- MySQL's ``Json_diff``: an
operation (REPLACE, INSERT, REMOVE), a JSON path and, but for REMOVE, the new value -- which MySQL applied to the
document it held. :func:`apply_json_diffs` applies them as MySQL's ``apply_json_diffs`` (``sql/json_diff.cc``) does:

* a path is ``$`` and legs without wildcards or ranges: ``.name`` / ``."any name"`` (an object's member) and
  ``[n]`` / ``[last]`` / ``[last-n]`` (an array's cell); the whole document (``$``) is never a diff's path;
* REPLACE replaces the value the path names, which must exist;
* INSERT adds a member the object does not have, or inserts a value into an array before cell ``n`` (``n`` past the
  end: at the end; ``last-n`` before the first cell: at the start) -- JSON_SET of a new member or past an array's
  end, JSON_INSERT, JSON_ARRAY_INSERT and JSON_ARRAY_APPEND log these;
* REMOVE removes the member or cell the path names, which must exist.

MySQL keeps an object's members ordered by their names' length, then their UTF-8 bytes (its binary JSON and what
it prints): an inserted member takes its place in that order, so a document a diff made prints as the one MySQL
logged whole would. A diff that does not apply is a :class:`JsonDiffError` (MySQL only logs diffs that applied to
the document it held, so the document is not that one).

:func:`read_json_text` reads text :func:`json_text` printed back into the values that print as that text again
(a DECIMAL's scale kept), so a document held as text takes a diff and prints as MySQL would print it.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
import enum
import json
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

import attrs


@attrs.frozen(slots=True)
class JsonOpaque:
    """A value of another MySQL type inside a MySQL JSON document (MySQL's "opaque" JSON values: a BLOB, BIT,
    YEAR, GEOMETRY ...): the MySQL field type number and the bytes. Rendered as MySQL prints it,
    ``"base64:type<N>:<base64 of the bytes>"``."""

    field_type: int
    data: bytes


def render_timedelta(value: dt.timedelta) -> str:
    """A TIME value as MySQL prints it: ``[-]HH:MM:SS`` and ``.ffffff`` when it has microseconds (hours past 24)."""
    total_us = value // dt.timedelta(microseconds=1)
    sign = "-" if total_us < 0 else ""
    total_us = abs(total_us)
    seconds, micros = divmod(total_us, 1_000_000)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    frac = f".{micros:06d}" if micros else ""
    return f"{sign}{hours:02d}:{minutes:02d}:{secs:02d}{frac}"


def json_text(value: Any) -> str:
    """A JSON value as MySQL prints it (``{"a": 1, "b": [true, "x"]}``), including the values only MySQL's JSON has:
    DECIMAL as a number with its scale, DATE/DATETIME/TIME as strings (``"2024-05-06 07:08:09.000000"``), opaque
    values as ``"base64:typeN:..."``."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int | float | str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, dict):
        items = (f"{json.dumps(str(k), ensure_ascii=False)}: {json_text(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(json_text(v) for v in value) + "]"
    if isinstance(value, dt.datetime):
        return '"' + value.replace(tzinfo=None).isoformat(" ", timespec="microseconds") + '"'
    if isinstance(value, dt.date):
        return '"' + value.isoformat() + '"'
    if isinstance(value, dt.timedelta):
        text = render_timedelta(value)
        return '"' + (text if "." in text else text + ".000000") + '"'
    if isinstance(value, JsonOpaque):
        return f'"base64:type{value.field_type}:{base64.b64encode(value.data).decode("ascii")}"'
    raise TypeError(f"{type(value).__name__} is not a MySQL JSON value")


def _number(text: str) -> float | Decimal:
    # a DOUBLE prints as Python's repr of the float, a DECIMAL as its digits with its scale: a number whose text is
    # not the float's was a DECIMAL (1.50, or more digits than a double holds)
    value = float(text)
    return value if json.dumps(value) == text else Decimal(text)


def _no_constant(text: str) -> Any:
    raise ValueError(f"{text} is not a MySQL JSON value")


def read_json_text(text: str) -> Any:
    """The JSON value ``text`` (as :func:`json_text` prints it) as values :func:`json_text` prints as ``text`` again:
    a number is a float where the float prints as it, else a Decimal (its scale kept); dates, times and opaque values
    stay the strings they print as. ``ValueError`` for text that is not JSON."""
    return json.loads(text, parse_float=_number, parse_constant=_no_constant)


class JsonDiffOperation(enum.IntEnum):
    """The operation of a :class:`JsonDiff`, with MySQL's numbers (``enum_json_diff_operation``)."""

    REPLACE = 0
    INSERT = 1
    REMOVE = 2


@attrs.frozen(slots=True)
class JsonDiff:
    """One change of a JSON document in a partial update (MySQL's ``Json_diff``): ``operation`` at ``path`` (MySQL's
    path text, as logged), with the new ``value`` for REPLACE and INSERT (a JSON value as a full image's cell holds
    one; None is JSON null there) -- None for REMOVE."""

    operation: JsonDiffOperation
    path: str
    value: Any = None

    def to_list(self) -> list[Any]:
        """``[operation, path, value text]`` (the value as :func:`json_text` prints it; null for REMOVE): the form
        the change rows carry (:mod:`canal.lake.forms.json_diffs`)."""
        value = None if self.operation is JsonDiffOperation.REMOVE else json_text(self.value)
        return [self.operation.name, self.path, value]

    @classmethod
    def from_list(cls, item: Any) -> JsonDiff:
        """The diff :meth:`to_list` gave (its value read by :func:`read_json_text`); ``ValueError`` for anything
        else."""
        if not isinstance(item, list) or len(item) != 3 or not isinstance(item[1], str):
            raise ValueError(f"not a JSON diff: {item!r}")
        name, path, value = item
        try:
            operation = JsonDiffOperation[name]
        except KeyError:
            raise ValueError(f"unknown JSON diff operation {name!r}") from None
        if (value is None) != (operation is JsonDiffOperation.REMOVE) or not isinstance(value, str | None):
            raise ValueError(f"JSON diff {name} {path!r} with value {value!r}")
        parse_json_path(path)
        return cls(operation, path, None if value is None else read_json_text(value))


class JsonDiffError(ValueError):
    """A :class:`JsonDiff` that does not apply to the document: its path names no value to replace or remove, a
    member to insert that is there already, or its path or the document is not one a diff applies to."""


def apply_json_diffs(document: Any, diffs: Iterable[JsonDiff]) -> Any:
    """``document`` with ``diffs`` applied in order, as MySQL applies them (see the module docstring); ``document``
    itself is not changed. :class:`JsonDiffError` when one does not apply."""
    if not isinstance(document, dict | list):
        raise JsonDiffError(
            "a JSON diff applies to an object or an array, not "
            + ("SQL NULL" if document is None else f"the scalar {json_text(document)}")
        )
    doc = copy.deepcopy(document)
    for diff in diffs:
        try:
            legs = parse_json_path(diff.path)
        except ValueError as exc:
            raise JsonDiffError(str(exc)) from None
        if not legs:
            raise JsonDiffError(f"JSON diff {diff.operation.name} of the whole document ({diff.path!r})")
        _apply(doc, diff, legs)
    return doc


class _Last:
    """An array leg counted from the end: ``[last]`` (offset 0) or ``[last-N]``."""

    __slots__ = ("offset",)

    def __init__(self, offset: int) -> None:
        self.offset = offset


Leg = str | int | _Last


def _index(leg: int | _Last, size: int) -> tuple[int, bool]:
    """MySQL's ``Json_array_index``: the position (from the start: clamped to the size; from the end: 0 when before
    the first cell) and whether the cell exists."""
    if isinstance(leg, _Last):
        return (size - leg.offset - 1 if leg.offset < size else 0), leg.offset < size
    return min(leg, size), leg < size


def _seek(doc: Any, legs: list[Leg]) -> Any:
    node = doc
    for leg in legs:
        if isinstance(node, list) and not isinstance(leg, str):
            i, there = _index(leg, len(node))
            if not there:
                return _MISSING
            node = node[i]
        elif isinstance(node, dict) and isinstance(leg, str):
            if leg not in node:
                return _MISSING
            node = node[leg]
        else:
            return _MISSING
    return node


_MISSING = object()


def _member_order(name: str) -> tuple[int, bytes]:
    raw = name.encode("utf-8")
    return len(raw), raw


def _apply(doc: Any, diff: JsonDiff, legs: list[Leg]) -> None:
    op = diff.operation
    parent = _seek(doc, legs[:-1])
    last = legs[-1]
    if isinstance(parent, dict) and isinstance(last, str):
        there = last in parent
        if op is JsonDiffOperation.REPLACE and there:
            parent[last] = copy.deepcopy(diff.value)
            return
        if op is JsonDiffOperation.INSERT and not there:
            parent[last] = copy.deepcopy(diff.value)
            ordered = sorted(parent.items(), key=lambda item: _member_order(item[0]))  # MySQL's order of members
            parent.clear()
            parent.update(ordered)
            return
        if op is JsonDiffOperation.REMOVE and there:
            del parent[last]
            return
    elif isinstance(parent, list) and not isinstance(last, str):
        i, there = _index(last, len(parent))
        if op is JsonDiffOperation.INSERT:
            parent.insert(i, copy.deepcopy(diff.value))
            return
        if there and op is JsonDiffOperation.REPLACE:
            parent[i] = copy.deepcopy(diff.value)
            return
        if there and op is JsonDiffOperation.REMOVE:
            del parent[i]
            return
    raise JsonDiffError(f"JSON diff {op.name} {diff.path!r} does not apply to the document")


def parse_json_path(text: str) -> list[Leg]:
    """The legs of a MySQL JSON path without wildcards or ranges (``$.a."b c"[3][last-1]``): member names and array
    cells. ``ValueError`` for any other path."""
    s = text.strip()
    if not s.startswith("$"):
        raise ValueError(f"JSON path {text!r} does not start with $")
    legs: list[Leg] = []
    i, n = 1, len(s)
    while i < n:
        ch = s[i]
        if ch.isspace():
            i += 1
        elif ch == ".":
            i += 1
            while i < n and s[i].isspace():
                i += 1
            if i < n and s[i] == '"':
                name, i = _quoted(s, i, text)
            else:
                j = i
                while j < n and s[j] not in '.[" \t\r\n*':
                    j += 1
                if j == i:
                    raise ValueError(f"JSON path {text!r} has an empty or wildcard member at {i}")
                name, i = s[i:j], j
            legs.append(name)
        elif ch == "[":
            j = s.find("]", i)
            if j < 0:
                raise ValueError(f"JSON path {text!r} has an unclosed [")
            legs.append(_array_leg(s[i + 1 : j].strip(), text))
            i = j + 1
        else:
            raise ValueError(f"JSON path {text!r}: unexpected {ch!r} at {i}")
    return legs


def _quoted(s: str, i: int, text: str) -> tuple[str, int]:
    j = i + 1
    while j < len(s):
        if s[j] == "\\":
            j += 2
            continue
        if s[j] == '"':
            name = json.loads(s[i : j + 1])
            assert isinstance(name, str)
            return name, j + 1
        j += 1
    raise ValueError(f"JSON path {text!r} has an unclosed quoted member")


def _array_leg(inner: str, text: str) -> int | _Last:
    if inner.isdigit():
        return int(inner)
    if inner.startswith("last"):
        rest = inner[4:].replace(" ", "")
        if not rest:
            return _Last(0)
        if rest.startswith("-") and rest[1:].isdigit():
            return _Last(int(rest[1:]))
    raise ValueError(f"JSON path {text!r} has an unsupported array leg [{inner}]")
