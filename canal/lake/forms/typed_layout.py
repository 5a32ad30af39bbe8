"""A table layout of a typed change batch (:mod:`canal.lake.forms.typed_batch`): its columns, the Arrow type of its
images, and how the decoder's values of each column become one typed Arrow array.

Every value converts exactly or not at all: values of the Python type their column decodes to are built column by
column by pyarrow (which refuses, never rounds, a value beyond the type); any other value takes the mirror's own
conversion of its canal text (:func:`canal.lake.types.typed_array`), so a typed column equals what the mirror parses
from a change row's JSON image, value for value and error for error. A value that does not convert is a
:class:`TypedChangeError` -- or, when the caller collects them (``errors``), a :class:`CellError` beside a null cell,
which the mirror raises only if the cell is one it applies (as the JSON path types only the last change per key).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Callable, Sequence
from decimal import Decimal
from itertools import chain
from operator import itemgetter, ne
from typing import Any, Final, Generic, TypeVar

import attrs

from canal.lake.forms.cell_text import server_text
from canal.lake.forms.typed_columns import raw_array
from canal.lake.key_identity import key_value
from canal.lake.types import ColumnZeroDates, MirrorTypeError, ZeroDates, arrow_type, column_zero_dates, typed_array
from canal.protocol import ColumnForm, ColumnMeta, RawImage, TableSchema, objects
from canal.sql import read_column_type
from canal.sql.types import stored_type
from canal.value_text import render_text

_Made = TypeVar("_Made")


class TypedChangeError(MirrorTypeError):
    """A value of a decoded row does not convert exactly to its column's Arrow type; no typed batch was made (or, in
    the mirror, nothing of the batch was written). The message names the table, the column and the value."""


@attrs.frozen(slots=True)
class CellError:
    """A value that did not convert, collected instead of raised: its image (``before`` / ``after``), its row in the
    layout's images, its column's index, and the message (naming the column and the value)."""

    side: str
    row: int
    column: int
    message: str


LAYOUT_ID_CHARS: Final = 16
"""Hex digits of a layout id: the first 64 bits of the SHA-256 of the layout's ``columns`` JSON."""


def layout_id(columns_json: str) -> str:
    """The id of a layout given as its ``columns`` JSON (the text a change row's ``columns`` holds): equal layouts,
    of whichever table, have equal ids."""
    return hashlib.sha256(columns_json.encode("utf-8")).hexdigest()[:LAYOUT_ID_CHARS]


_NONE = type(None)

CHUNK_ROWS: Final = 1024
"""Images converted at a time. A chunk's values stay in the CPU's cache from the transpose through the type check to
pyarrow's conversion; a whole batch's (megabytes, parsed long before) missed it again on each of those passes, which
made them most of the cost of a typed batch."""


@attrs.frozen(slots=True)
class _ColumnBuilder:
    """How one column's values become an Arrow array: the Python types taken by ``fast`` as they are; everything
    else through ``text`` (the canal text a change row's image holds) and the mirror's conversion."""

    name: str
    target: Any
    fast_types: frozenset[type]
    fast: Callable[[Sequence[Any]], Any]
    text: Callable[[Any], str]


def load_conversions() -> None:
    """Load now what pyarrow loads at its first conversion of Python values: pandas, when it is installed (pyarrow
    checks each sequence it converts against pandas' array types, importing pandas the first time).

    Call it before a thread that decodes starts: the import then runs alone. Made by a batch's columns while the
    parser decodes beside it, it waited for the interpreter lock: the Spark reader's first micro-batch (20,000 of
    the benchmark's changes) took 1.45 s with it and 0.4 s after it, the import alone 0.25 s."""
    import pyarrow as pa

    pa.array([0], pa.int64())


def _column_builder(name: str, mysql_type: str) -> _ColumnBuilder:
    import pyarrow as pa

    column_type = read_column_type(mysql_type, strict=False)
    target = arrow_type(mysql_type)
    as_server = server_text(mysql_type)
    if as_server is not None:  # SET, TIME: the server's text, whatever the value
        return _ColumnBuilder(name, target, frozenset({frozenset, dt.timedelta, str}), _texts(as_server), as_server)
    kind = stored_type(column_type).kind
    if kind == "string":  # text types, ENUM and JSON as str; DECIMAL beyond 38 digits as its plain digits (text)
        return _ColumnBuilder(name, target, frozenset({str}), lambda v: pa.array(v, pa.string()), render_text)
    if kind == "decimal" and column_type.base in ("bigint", "bit"):  # BIGINT UNSIGNED, BIT(64): decimal(20,0)
        return _ColumnBuilder(
            name, target, frozenset({int}), lambda v: pa.array(v, pa.uint64()).cast(target), render_text
        )
    fast_types: dict[str, frozenset[type]] = {
        "int64": frozenset({int}),
        "decimal": frozenset({Decimal}),
        "float64": frozenset({float}),
        "date": frozenset({dt.date}),
        "timestamp": frozenset({dt.datetime}),  # UTC-aware TIMESTAMP values become their UTC wall time
        "binary": frozenset({bytes}),
    }
    return _ColumnBuilder(name, target, fast_types[kind], lambda v: pa.array(v, target), render_text)


def _texts(text: Callable[[Any], str]) -> Callable[[Sequence[Any]], Any]:
    """A column builder of string columns: str values as they are, others as ``text`` gives them."""
    import pyarrow as pa

    def build(values: Sequence[Any]) -> Any:
        return pa.array([None if v is None else v if type(v) is str else text(v) for v in values], pa.string())

    return build


@attrs.frozen(slots=True)
class Layout:
    """A table layout: its columns as ``(name, mysql_type, is_key)`` and the Arrow type of its images."""

    id: str
    columns: tuple[tuple[str, str, bool], ...]
    image_type: Any = attrs.field(eq=False, repr=False)  # pa.StructType of the typed columns
    key_indexes: tuple[int, ...] = attrs.field(eq=False, repr=False)
    _builders: tuple[_ColumnBuilder, ...] = attrs.field(eq=False, repr=False)
    key_changed: Callable[[Any, Any], bool] = attrs.field(init=False, eq=False, repr=False)
    """Whether a row's before and after images hold different primary keys (False without either image)."""

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "key_changed", _key_changer(self.key_indexes, self._builders))

    def keys_changed(
        self, befores: Sequence[tuple[Any, ...] | None], afters: Sequence[tuple[Any, ...] | None]
    ) -> list[bool]:
        """:attr:`key_changed` of each pair of images of a row event. Keys of plain values (int, str, bytes, date:
        equal exactly when their texts are) are compared in C, a whole column at a time; others row by row."""
        if not self.key_indexes:
            return [False] * len(befores)
        if None not in befores and None not in afters:
            # one key column: its value; several: a tuple of them
            get: Callable[[Any], Any] = itemgetter(*self.key_indexes)
            plain = self._plain_keys_changed(list(map(get, befores)), list(map(get, afters)))
            if plain is not None:
                return plain
        return list(map(self.key_changed, befores, afters))

    def _plain_keys_changed(self, old: list[Any], new: list[Any]) -> list[bool] | None:
        """Each row's old key against its new one (a value, or a tuple of several), compared in C when every value
        is plain; None when one is not (key_changed then compares them row by row)."""
        keys = chain(old, new)
        if _PLAIN_KEYS.issuperset(map(type, keys if len(self.key_indexes) == 1 else chain.from_iterable(keys))):
            return list(map(ne, old, new))
        return None

    @property
    def names(self) -> list[str]:
        return [c[0] for c in self.columns]

    @property
    def key_names(self) -> list[str]:
        return [c[0] for c in self.columns if c[2]]

    def describe(self) -> list[list[Any]]:
        """The layout as a change row's ``columns`` holds it: ``[[name, mysql_type, is_key], ...]``."""
        return [list(c) for c in self.columns]

    def typed_image(
        self,
        images: Sequence[tuple[Any, ...] | None],
        where: str,
        zero_dates: ZeroDates,
        errors: list[CellError] | None = None,
        side: str = "after",
        keys_only: bool = False,
    ) -> Any:
        """``images`` (tuples of this layout's width, or None: no image) as a struct array of typed columns (with
        ``keys_only``, of the primary key's columns alone). A value that does not convert raises
        :class:`TypedChangeError`, or with ``errors`` is a null cell and a :class:`CellError` of ``side`` appended
        there."""
        import pyarrow as pa

        width = len(self.columns)
        # a layout without a key keeps its whole before image (a struct of no fields would have no length)
        chosen = self.key_indexes if keys_only and self.key_indexes else range(width)
        fields = [self.image_type.field(index) for index in chosen]
        missing = images.count(None)
        if missing == len(images):  # no image at all (an INSERT's before, a DELETE's after): nothing to convert
            return pa.nulls(len(images), pa.struct(fields))
        widths = set(map(len, filter(None, images)))  # the images there (none is empty: a layout has columns)
        if widths != {width}:
            raise TypedChangeError(f"{where}: images of widths {sorted(widths)} in a layout of {width} columns")
        parts: list[list[Any]] = [[] for _ in chosen]
        for start in range(0, len(images), CHUNK_ROWS):
            chunk = images[start : start + CHUNK_ROWS]
            columns: Sequence[Sequence[Any]]
            if len(chosen) < width:  # the key's columns alone: a pass over the rows per key column, not a transpose
                columns = [[None if image is None else image[index] for image in chunk] for index in chosen]
            else:
                rows = chunk if not missing else [(None,) * width if image is None else image for image in chunk]
                columns = list(zip(*rows, strict=True))  # column by column, transposed in C
            for part, index, cells in zip(parts, chosen, columns, strict=True):
                found: list[tuple[int, str]] | None = None if errors is None else []
                of_column = column_zero_dates(zero_dates, index in self.key_indexes)
                part.append(_typed(self._builders[index], cells, where, of_column, found))
                if errors is not None and found:
                    errors.extend(CellError(side, start + row, index, message) for row, message in found)
        arrays = [part[0] if len(part) == 1 else pa.concat_arrays(part) for part in parts]
        mask = pa.array([image is None for image in images], pa.bool_()) if missing else None
        return pa.StructArray.from_arrays(arrays, fields=fields, mask=mask)

    def typed_columns(
        self,
        forms: Sequence[ColumnForm],
        segments: Sequence[tuple[int, RawImage | None]],
        where: str,
        zero_dates: ZeroDates,
        errors: list[CellError] | None = None,
        side: str = "after",
        keys_only: bool = False,
    ) -> Any:
        """:meth:`typed_image` of the images of columnar rows events (:class:`~canal.protocol.ColumnarRows`):
        ``segments`` holds each event's row count and its raw columns of this side (every column there; None: the
        event has no such images), ``forms`` their forms. The same array, value for value and error for error."""
        import numpy as np
        import pyarrow as pa

        width = len(self.columns)
        chosen = self.key_indexes if keys_only and self.key_indexes else range(width)
        fields = [self.image_type.field(index) for index in chosen]
        total = sum(n for n, _image in segments)
        present = [image for _n, image in segments if image is not None]
        if not present:
            return pa.nulls(total, pa.struct(fields))
        # the columns of the rows with images, converted without NULL padding; then, if some rows have none (an
        # INSERT's before, a DELETE's after), spread over all rows by a take with null indices there
        missing = np.repeat(np.array([image is None for _n, image in segments]), [n for n, _image in segments])
        spread = rows = None
        if missing.any():
            rows = np.flatnonzero(~missing)  # each converted cell's row among all
            places = np.zeros(total, dtype=np.int64)
            places[rows] = np.arange(len(rows))
            spread = pa.array(places, mask=missing)
        arrays = []
        for index in chosen:
            cells: Sequence[Any] = (
                present[0][index] or ()
                if len(present) == 1
                else list(chain.from_iterable(image[index] or () for image in present))
            )
            found: list[tuple[int, str]] | None = None if errors is None else []
            of_column = column_zero_dates(zero_dates, index in self.key_indexes)
            typed = self._typed_raw(index, forms[index], cells, where, of_column, found)
            arrays.append(typed if spread is None else typed.take(spread))
            if errors is not None and found:
                errors.extend(
                    CellError(side, row if rows is None else int(rows[row]), index, message) for row, message in found
                )
        mask = None if spread is None else pa.array(missing)
        return pa.StructArray.from_arrays(arrays, fields=fields, mask=mask)

    def _typed_raw(
        self,
        index: int,
        form: ColumnForm,
        cells: Sequence[Any],
        where: str,
        zero_dates: ColumnZeroDates,
        found: list[tuple[int, str]] | None,
    ) -> Any:
        builder = self._builders[index]
        if form.to_object is None:
            return _typed(builder, cells, where, zero_dates, found)
        fast = raw_array(form, builder.target, cells)
        if fast is not None:
            return fast
        try:
            values = objects(form, cells)
        except (ValueError, UnicodeError) as exc:  # bytes the object decoder refuses at parse time: corrupt
            raise TypedChangeError(f"{where} column {builder.name!r}: {exc}") from None
        return _typed(builder, values, where, zero_dates, found)

    def keys_changed_columns(
        self, forms: Sequence[ColumnForm], before: RawImage, after: RawImage, n: int, where: str
    ) -> list[bool]:
        """:meth:`keys_changed` of an update's raw columns (every key column in both images). A key cell the object
        decoder refuses is a :class:`TypedChangeError`."""
        if not self.key_indexes:
            return [False] * n
        try:
            old = [objects(forms[i], before[i] or ()) for i in self.key_indexes]
            new = [objects(forms[i], after[i] or ()) for i in self.key_indexes]
        except (ValueError, UnicodeError) as exc:  # bytes the object decoder refuses at parse time: corrupt
            raise TypedChangeError(f"{where} primary key: {exc}") from None
        olds, news = (old[0], new[0]) if len(old) == 1 else (list(zip(*old, strict=True)), list(zip(*new, strict=True)))
        plain = self._plain_keys_changed(olds, news)
        if plain is not None:
            return plain
        # keys of other values: as key_changed compares them, in images holding the keys alone
        width = len(self.columns)

        def image(keys: Sequence[Any]) -> tuple[Any, ...]:
            cells: list[Any] = [None] * width
            for i, v in zip(self.key_indexes, keys, strict=True):
                cells[i] = v
            return tuple(cells)

        pairs = zip(zip(*old, strict=True), zip(*new, strict=True), strict=True)
        return [self.key_changed(image(b), image(a)) for b, a in pairs]


def _typed(
    builder: _ColumnBuilder,
    values: Sequence[Any],
    where: str,
    zero_dates: ColumnZeroDates,
    found: list[tuple[int, str]] | None,
) -> Any:
    import pyarrow as pa

    kinds = set(map(type, values))
    kinds.discard(_NONE)
    if kinds <= builder.fast_types:
        try:
            # as a list: pyarrow 26 reads a tuple of ints or floats 20-50 times slower than a list of them (1.6 ms
            # against 35 us for 1,000 ints), and the columns come as tuples (transposed images, columnar rows)
            return builder.fast(values if values.__class__ is list else list(values))
        except (pa.ArrowException, OverflowError, TypeError, ValueError):
            pass  # a value beyond the type (pyarrow refuses, never rounds): the exact path below names it
    texts = [None if v is None else builder.text(v) for v in values]
    try:
        return typed_array(texts, builder.target, zero_dates)
    except (MirrorTypeError, pa.ArrowException, UnicodeError) as exc:  # UnicodeError: a lone surrogate
        if found is None:
            raise TypedChangeError(f"{where} column {builder.name!r}: {exc}") from None
    assert found is not None
    # collected: each value alone, to find those that do not convert (a rare path: such a batch fails in the mirror
    # unless those cells are superseded by later changes of their rows)
    kept: list[str | None] = []
    for row, text in enumerate(texts):
        if text is not None:
            try:
                typed_array([text], builder.target, zero_dates)
            except (MirrorTypeError, pa.ArrowException, UnicodeError) as exc:
                found.append((row, f"column {builder.name!r}: {exc}"))
                text = None
        kept.append(text)
    return typed_array(kept, builder.target, zero_dates)


def _key_changer(key_indexes: tuple[int, ...], builders: Sequence[_ColumnBuilder]) -> Callable[[Any, Any], bool]:
    """Whether the before and after images of a row hold different keys -- as their keys' canal texts differ, so a
    key is "changed" exactly when a change row has ``old_keys``: each cell as its key identity (-0.0 as 0.0,
    :mod:`canal.lake.key_identity`), equal NaNs equal."""
    if not key_indexes:
        return lambda before, after: False
    texts = [builders[i].text for i in key_indexes]
    get: Callable[[Sequence[Any]], tuple[Any, ...]] = (
        itemgetter(*key_indexes) if len(key_indexes) > 1 else lambda image: (image[key_indexes[0]],)
    )

    def changed(before: Any, after: Any) -> bool:
        if before is None or after is None:
            return False
        b, a = get(before), get(after)
        if _TEXT_COMPARED.isdisjoint(map(type, b)):
            return bool(b != a)
        return [None if v is None else t(key_value(v)) for t, v in zip(texts, b, strict=True)] != [
            None if v is None else t(key_value(v)) for t, v in zip(texts, a, strict=True)
        ]

    return changed


_TEXT_COMPARED: Final = frozenset({float, Decimal, frozenset, dt.timedelta, dt.datetime})
# key values that key_changed compares as values, whose != between any two of them is a bool; other values (a bool,
# equal to 1; a float or a Decimal, compared by their texts) take key_changed row by row
_PLAIN_KEYS: Final = frozenset({int, str, bytes, dt.date, _NONE})


def _make_layout(table: TableSchema) -> Layout:
    import pyarrow as pa

    columns = tuple((c.name, c.mysql_type, c.is_key) for c in table.columns)
    columns_json = json.dumps([list(c) for c in columns], separators=(",", ":"), ensure_ascii=False)
    builders = tuple(_column_builder(name, mysql_type) for name, mysql_type, _key in columns)
    image_type = pa.struct([pa.field(b.name, b.target) for b in builders])
    return Layout(layout_id(columns_json), columns, image_type, table.key_indexes, builders)


class PerTableSchema(Generic[_Made]):
    """What ``make`` builds from a :class:`TableSchema`, made once per schema object and kept for its next rows
    (keyed by identity: a schema object stands for one layout of one table; at most 4,096 kept)."""

    def __init__(self, make: Callable[[TableSchema], _Made]) -> None:
        self._make = make
        self._made: dict[int, tuple[TableSchema, _Made]] = {}

    def __call__(self, table: TableSchema) -> _Made:
        hit = self._made.get(id(table))
        if hit is not None and hit[0] is table:
            return hit[1]
        if len(self._made) > 4096:
            self._made.clear()
        made = self._make(table)
        self._made[id(table)] = (table, made)
        return made


layout_of: Final = PerTableSchema(_make_layout)
"""The :class:`Layout` of ``table`` (made once per TableSchema, kept for its next rows)."""


def _described_layout(columns_json: str) -> Layout:
    try:
        described = json.loads(columns_json)
        columns = tuple(
            ColumnMeta(name=str(name), mysql_type=str(mysql_type), is_key=bool(is_key))
            for name, mysql_type, is_key in described
        )
    except (ValueError, TypeError) as exc:
        raise TypedChangeError(f"a change row's columns {columns_json[:200]!r} describe no layout ({exc})") from None
    made = _make_layout(TableSchema("", "", columns))
    if made.id != layout_id(columns_json):  # the text is not spelt as the source spells it: keep its own id
        made = attrs.evolve(made, id=layout_id(columns_json))
    return made


_DESCRIBED: dict[str, Layout] = {}


def layout_from_columns(columns_json: str) -> Layout:
    """The :class:`Layout` a change row's ``columns`` JSON describes (``[[name, mysql_type, is_key], ...]``), kept
    for the next rows (at most 4,096); a :class:`TypedChangeError` when the text describes no layout."""
    made = _DESCRIBED.get(columns_json)
    if made is None:
        if len(_DESCRIBED) > 4096:
            _DESCRIBED.clear()
        made = _DESCRIBED[columns_json] = _described_layout(columns_json)
    return made
