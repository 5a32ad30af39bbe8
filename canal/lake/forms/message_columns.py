"""canal's text of the rows of a rows event decoded column by column (:class:`~canal.protocol.ColumnarRows`), made
column by column: the ``data`` and ``old`` objects of the FlatMessage maker (:mod:`canal.lake.forms.flat_messages`).

The maker's row-by-row path turns each row image into a tuple of the object decoder's values (``ColumnarRows.before``
/ ``after`` make them from the columns) and runs a generated encoder over each tuple. Here each column's cells become
their JSON texts in one comprehension -- the same expression per cell (:func:`~canal.lake.forms.changes.cell_code`,
the one spelling of a cell), with a text column's bytes decoded inline instead of through a reader call a cell -- and
each row's object is one ``%`` of the columns' texts into a template holding the quoted names. An UPDATE's ``old``
compares the images column by column, on the raw cells: equal raw cells are equal values of one type (a reader is a
function of its bytes); where they differ, the values are compared as the row path compares them. Only the columns an
UPDATE changed are encoded of its before images.

The images of a micro-batch's events are encoded together (:func:`batch_images`): the events of one layout, side
and columns present are one run of each column's encoder, so a column of DATETIME2 or DECIMAL cells is converted by
Arrow at once (:mod:`canal.lake.forms.typed_columns`, then its text cast) where that gives the row path's text: a
DATETIME of 0, 3 or 6 fraction digits as canal's FlatMessage spells it (exactly its declared digits: Arrow's six cut
to them), a DECIMAL of at most six fraction digits (plain notation, as ``str(Decimal)`` has them) but a negative
zero's bytes; anything else is converted cell by cell.

The texts are the row path's, byte for byte, and so are its errors: a cell its column cannot hold (corrupt bytes) is
the same :class:`~canal.errors.ParseError` (tests/test_message_columns.py compares both on random rows).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import chain
from typing import Any, Final

from canal.errors import ParseError
from canal.lake.forms.cell_text import encode_str, message_text
from canal.lake.forms.changes import GENERATED_GLOBALS, cell_code
from canal.lake.forms.typed_columns import raw_array
from canal.lake.forms.typed_layout import PerTableSchema
from canal.lake.types import base_type
from canal.parse.mysql.packed_decimal import decimal_size
from canal.protocol import ColumnarRows, ColumnForm, TableSchema, objects
from canal.sql import read_column_type

__all__ = ["batch_images", "column_texts_of"]

ARROW_CELLS: Final = 64
"""The fewest cells of a DATETIME2 or DECIMAL column converted by Arrow: fewer are cheaper cell by cell."""

_Encoder = Callable[[Sequence[Any]], list[str]]


class _ColumnTexts:
    """Per table layout: each column's encoder (by the kind of its form: its cells are of one kind in the events
    of a layout) and the row templates (by the columns an object holds)."""

    __slots__ = ("_encoders", "_templates", "table")

    def __init__(self, table: TableSchema) -> None:
        self.table = table
        self._encoders: dict[tuple[int, str], tuple[_Encoder, str]] = {}  # by column and form kind
        self._templates: dict[tuple[int, ...], str] = {}

    def images(self, rows: Sequence[ColumnarRows], side: str) -> list[str]:
        """The JSON object of each ``side`` image of each of ``rows`` (``"before"`` / ``"after"``, which they have),
        in order: the columns the images carry, in layout order (the same in each of ``rows``)."""
        sides: list[Any] = [r.columns_before if side == "before" else r.columns_after for r in rows]
        first = sides[0]
        kept = tuple(i for i, cells in enumerate(first) if cells is not None)
        if not kept:
            return ["{}"] * sum(map(len, rows))
        template = self.template(kept)
        if len(rows) == 1:
            texts = [self.texts(rows[0], i, first[i]) for i in kept]
        else:
            texts = [self.texts(rows[0], i, list(chain.from_iterable(one[i] for one in sides))) for i in kept]
        return [template % cells for cells in zip(*texts, strict=True)]

    def olds(self, rows: ColumnarRows) -> list[str]:
        """The ``old`` object of each row of an UPDATE (see ``flat_messages._olds``): its before values of the
        columns updated in it or in an earlier row, those its before images carry. A column is updated in the first
        row whose after value is not equal to its before value or not of its type; one the after images lack never
        is."""
        before, after = rows.columns_before, rows.columns_after
        assert before is not None and after is not None
        n = len(rows)
        first: dict[int, int] = {}  # column -> the row that first updates it
        for i, (was, now) in enumerate(zip(before, after, strict=True)):
            if now is None:  # the after images lack it: never updated
                if was is not None and rows.forms[i].to_object is not None:
                    self.values(rows, rows.forms[i], was)  # its cells are read all the same: corrupt ones refused
                continue
            if was is None:
                first[i] = 0  # ABSENT is equal to no value (and never written: the before images lack it)
                continue
            at = self.first_update(rows, i, was, now)
            if at is not None:
                first[i] = at
        shown = sorted((at, i) for i, at in first.items() if before[i] is not None)
        if not shown:
            return ["{}"] * n
        texts = {i: self.texts(rows, i, before[i] or ()) for _at, i in shown}
        olds: list[str] = ["{}"] * shown[0][0]
        for k, (at, _i) in enumerate(shown):
            end = shown[k + 1][0] if k + 1 < len(shown) else n
            if end == at:
                continue  # a later column is updated first in the same row
            kept = tuple(sorted(i for _at, i in shown[: k + 1]))
            template = self.template(kept)
            olds.extend(template % cells for cells in zip(*(texts[i][at:end] for i in kept), strict=True))
        return olds

    def first_update(self, rows: ColumnarRows, i: int, was: Sequence[Any], now: Sequence[Any]) -> int | None:
        """The first row whose after cell of column ``i`` is not its before cell's value, or not of its type."""
        form = rows.forms[i]
        if form.to_object is None:  # the cells are the values
            if was == now and list(map(type, was)) == list(map(type, now)):
                return None
            return next(
                (k for k, (b, a) in enumerate(zip(was, now, strict=True)) if b != a or type(b) is not type(a)), None
            )
        if was == now:  # raw cells: equal bytes are equal values of one type
            return None
        for k, (b, a) in enumerate(zip(was, now, strict=True)):
            if b != a:
                b, a = self.values(rows, form, (b, a))
                if b != a or type(b) is not type(a):
                    return k
        return None

    def values(self, rows: ColumnarRows, form: ColumnForm, cells: Sequence[Any]) -> list[Any]:
        """``cells`` in ``form`` as the object decoder's values, refused as ``ColumnarRows`` refuses them."""
        try:
            return objects(form, cells)
        except (ValueError, UnicodeError) as exc:
            raise _corrupt(rows, exc) from None

    def texts(self, rows: ColumnarRows, i: int, cells: Sequence[Any]) -> list[str]:
        """Each cell of column ``i`` of ``rows`` (in its form: ``rows`` or rows of its layout) as the JSON text of
        its canal text, ``null`` for NULL."""
        form = rows.forms[i]
        made = self._encoders.get((i, form.kind))
        if made is None:
            made = self._encoders[(i, form.kind)] = self.encoder(i, form)
        encode, raw = made
        if raw == "arrow" and len(cells) >= ARROW_CELLS:
            texts = _arrow_texts(form, cells)
            if texts is not None:
                return texts
        if raw != "text":
            return encode(cells if form.to_object is None else self.values(rows, form, cells))
        try:
            return encode(cells)
        except (ValueError, UnicodeError) as exc:
            raise _corrupt(rows, exc) from None

    def encoder(self, i: int, form: ColumnForm) -> tuple[_Encoder, str]:
        """Column ``i``'s encoder of cells in ``form``, and what it takes: ``text`` raw text cells, else their
        values -- ``arrow``: a column Arrow may convert first (:func:`_arrow_texts`). Text is decoded inline --
        what the readers of :func:`~canal.parse.mysql.decoder.column_form` do -- where the column's cell expression
        of a ``str`` is ``E(v)``: every type's but those the server spells itself."""
        mysql_type = self.table.columns[i].mysql_type
        namespace: dict[str, Any] = {**GENERATED_GLOBALS, "L": form.to_object}
        spelt = message_text(mysql_type) is not None
        takes = "values"
        if form.kind == "utf8" and not spelt:
            source, takes = "[('null' if r is None else E(r.decode('utf-8'))) for r in cells]", "text"
        elif form.kind == "latin1" and not spelt:
            source = "[('null' if r is None else E(r.decode('ascii') if r.isascii() else L(r))) for r in cells]"
            takes = "text"
        else:
            source = f"[{cell_code(mysql_type, i, namespace, message=True)} for v{i} in cells]"
            base = base_type(mysql_type)
            column_type = read_column_type(mysql_type, strict=False)
            declared = column_type.params[0] if column_type.params else 0
            dated = form.kind == "datetime2" and base in ("datetime", "timestamp") and declared == form.fsp in (0, 3, 6)
            if dated or (not spelt and form.kind == "decimal" and base in ("decimal", "numeric") and form.scale <= 6):
                takes = "arrow"
        code = compile(f"def encode(cells):\n    return {source}\n", "<canal.lake.forms.message_columns>", "exec")
        exec(code, namespace)
        return namespace["encode"], takes

    def template(self, kept: tuple[int, ...]) -> str:
        """``{"name":%s,...}`` of the columns ``kept``."""
        made = self._templates.get(kept)
        if made is None:
            names = self.table.names
            made = self._templates[kept] = (
                "{" + ",".join(encode_str(names[i]).replace("%", "%%") + ":%s" for i in kept) + "}"
            )
        return made


def batch_images(rows: Sequence[tuple[ColumnarRows, str]]) -> dict[int, list[str]]:
    """The ``data`` objects of each of ``rows`` (a micro-batch's rows events and the side each shows), by the id of
    its ColumnarRows: those of one layout, side and columns present encoded together. An event whose cells its
    column cannot hold is left out with the others encoded with it (the maker encodes them one by one, and refuses
    it where it comes)."""
    groups: dict[tuple[int, int, str, tuple[int, ...]], list[ColumnarRows]] = {}
    for one, side in rows:
        columns = one.columns_before if side == "before" else one.columns_after
        if columns is None or not len(one):
            continue
        absent = tuple(i for i, cells in enumerate(columns) if cells is None) if None in columns else ()
        groups.setdefault((id(one.table), id(one.forms), side, absent), []).append(one)
    out: dict[int, list[str]] = {}
    for (_table, _forms, side, _absent), members in groups.items():
        try:
            texts = column_texts_of(members[0].table).images(members, side)
        except ParseError:
            continue
        at = 0
        for one in members:
            out[id(one)] = texts[at : at + len(one)]
            at += len(one)
    return out


def _arrow_texts(form: ColumnForm, cells: Sequence[Any]) -> list[str] | None:
    """DATETIME2 or DECIMAL ``cells`` (raw) as their JSON texts through Arrow, or None where Arrow's text would not
    be the row path's (see the module docstring)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if form.kind == "datetime2":
        array = raw_array(form, pa.timestamp("us"), cells)
        if array is None:
            return None
        text = array.cast(pa.string())  # six fraction digits, always: canal's of a DATETIME(6)
        if form.fsp < 6:  # a DATETIME(3)'s three (its value holds no more); a DATETIME's none (it holds none)
            text = pc.utf8_slice_codeunits(text, 0, form.fsp - 6 - (form.fsp == 0))
    else:
        size = decimal_size(form.precision, form.scale)
        if b"\x7f" + b"\xff" * (size - 1) in cells:
            return None  # a negative zero: Arrow's has no sign
        array = raw_array(form, pa.decimal128(form.precision, form.scale), cells)
        if array is None:
            return None
        text = array.cast(pa.string())
    texts: list[str] = pc.binary_join_element_wise('"', text, '"', "").fill_null("null").to_pylist()
    return texts


def _corrupt(rows: ColumnarRows, exc: Exception) -> ParseError:
    # ColumnarRows' words for a cell the object decoder refuses at parse time
    return ParseError(f"a row of {rows.table.full_name} holds a cell its column cannot hold: {exc}")


column_texts_of: Final = PerTableSchema(_ColumnTexts)
"""The column encoders of ``table``'s layout (made once per layout, kept for the next rows)."""
