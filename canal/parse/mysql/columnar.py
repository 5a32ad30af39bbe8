"""Row images decoded column by column, for consumers that build typed columns (the Delta mirror, the Spark
source's packed and variant rows).

The object decoder (:mod:`canal.parse.mysql.decoder`) makes a Python value of every cell -- a ``datetime``, a
``Decimal``, a ``str`` -- and a tuple of every image; a typed batch then takes the tuples apart again, column by
column, and hands the values to pyarrow, which reads them back into buffers. For the columns that cost most, the
columnar decoder keeps instead what the row image holds: a DATETIME2 as its packed integer, a DECIMAL of up to 18
digits as its bytes, text as its bytes. :mod:`canal.lake.typed_columns` turns a whole column of them into an Arrow
array at once (numpy arithmetic, one UTF-8 check), and every other column's values are the object decoder's own.

A :class:`ColumnarRows` is a :class:`~canal.protocol.Rows`: a consumer that reads its ``before`` / ``after`` images
gets exactly the object decoder's tuples, made from the columns on first use (each raw cell through the object
decoder's reader of its type). The parser decodes column by column only when its consumer asks
(:meth:`canal.instance.Instance.decode_rows_by_column`): tuples made from columns cost more than tuples decoded.

The one difference: a cell the object decoder refuses at parse time -- text that is not its column's charset, an
impossible date: corrupt bytes -- is refused when it is converted (a typed batch's
:class:`~canal.lake.typed_layout.TypedChangeError`, or the reader's error where ``before`` / ``after`` are read).
"""

from __future__ import annotations

from typing import Final

from canal.parse.mysql.decoder import (
    _BLOBS,
    T_DATETIME2,
    T_NEWDECIMAL,
    T_VAR_STRING,
    T_VARCHAR,
    BinlogColumn,
    DecoderFactory,
    _CodeGen,
    make_datetime2_reader,
)
from canal.parse.mysql.packed_decimal import decimal_size, make_decimal_reader
from canal.protocol import ColumnarRows, ColumnForm
from canal.sql.charsets import charset_of_collation

RAW_DECIMAL_DIGITS: Final = 18
"""The most digits of a DECIMAL kept raw: its unscaled value fits an int64, so numpy can add up its groups."""


def _latin1(raw: bytes) -> str:
    return raw.decode("ascii") if raw.isascii() else raw.decode("cp1252", "canal-latin1")


def _utf8(raw: bytes) -> str:
    return raw.decode("utf-8")


_VALUE: Final = ColumnForm("value")


def column_form(c: BinlogColumn) -> ColumnForm:
    """The form the columnar decoder keeps column ``c`` in."""
    t = c.type
    if t in (T_VARCHAR, T_VAR_STRING) or t in _BLOBS:  # not CHAR: its trailing spaces are stripped
        codec = charset_of_collation(c.collation).codec
        if codec == "utf-8":
            return ColumnForm("utf8", to_object=_utf8)
        if codec == "cp1252":
            return ColumnForm("latin1", to_object=_latin1)
        return _VALUE
    if t == T_DATETIME2 and not c.hires:
        return ColumnForm("datetime2", fsp=c.fsp, to_object=make_datetime2_reader(c.fsp))
    if t == T_NEWDECIMAL and 0 < c.precision <= RAW_DECIMAL_DIGITS:
        reader = make_decimal_reader(c.precision, c.scale)
        return ColumnForm("decimal", precision=c.precision, scale=c.scale, to_object=reader)
    return _VALUE


class ColumnarGen(_CodeGen):
    """The object decoder's code generator with the raw forms of :func:`column_form`: the same reading of every
    row image (bitmap, runs of fixed widths, the end check), each cell appended to its column's list."""

    def __init__(self, cols: list[BinlogColumn]) -> None:
        super().__init__(cols)
        self.forms = tuple(column_form(c) for c in cols)
        self.ns["ColumnarRows"] = ColumnarRows
        self.ns["FORMS"] = self.forms

    def column(self, c: BinlogColumn, var: str) -> list[str]:
        kind = self.forms[c.index].kind
        if kind in ("utf8", "latin1"):
            width = (2 if c.length > 255 else 1) if c.type in (T_VARCHAR, T_VAR_STRING) else c.length
            read = {1: "n = b[p]; p += 1", 2: "n = b[p] | b[p + 1] << 8; p += 2"}.get(
                width, f"n = _from_bytes(b[p:p + {width}], 'little'); p += {width}"
            )
            return [read, f"{var} = b[p:p + n]; p += n"]
        if kind == "datetime2":
            n = 5 + (c.fsp + 1) // 2
            return [f"{var} = _from_bytes(b[p:p + {n}], 'big'); p += {n}"]
        if kind == "decimal":
            size = decimal_size(c.precision, c.scale)
            return [f"{var} = b[p:p + {size}]; p += {size}"]
        return super().column(c, var)

    def rows_function(self, kind: str, present: list[int], present2: list[int] | None) -> DecoderFactory:
        """``make(T)`` returning ``decode(b, p, end) -> ColumnarRows`` for an event of ``kind`` 'w', 'u' or 'd' (a
        MySQL partial update, 'p', has the object decoder only)."""
        if kind not in "wud" or not present or (kind == "u" and not present2):
            raise ValueError(f"no columnar decoder of rows events of kind {kind!r}")
        sides = [(present, "")] + ([(present2 or [], "_a")] if kind == "u" else [])
        src = ["def decode(b, p, end):"]
        for cols, suffix in sides:
            for i in cols:
                src += [f"    c{i}{suffix} = []", f"    a{i}{suffix} = c{i}{suffix}.append"]
        src.append("    while p < end:")
        for cols, suffix in sides:
            img, _tup = self.image(cols, suffix)
            src += ["        " + ln for ln in img]
            src += [f"        a{i}{suffix}(v{i}{suffix})" for i in cols]
        src.append("    if p != end:")
        src.append("        raise ValueError(f'the last row image ends {p - end} bytes past the event')")

        def image(cols: list[int], suffix: str) -> str:
            # tuples: the collector untracks a tuple of plain values, never a list, and the store holds many
            cells = [f"tuple(c{i}{suffix})" if i in cols else "None" for i in range(len(self.cols))]
            return "(" + ", ".join(cells) + ("," if len(cells) == 1 else "") + ")"

        first = f"c{present[0]}"
        if kind == "w":
            result = f"ColumnarRows(T, None, {image(present, '')}, FORMS, len({first}))"
        elif kind == "d":
            result = f"ColumnarRows(T, {image(present, '')}, None, FORMS, len({first}))"
        else:
            result = f"ColumnarRows(T, {image(present, '')}, {image(present2 or [], '_a')}, FORMS, len({first}))"
        src.append(f"    return {result}")
        src.append("return decode")
        code = "def make(T):\n" + "\n".join("    " + line for line in src)
        ns = dict(self.ns)
        exec(compile(code, f"<canal columnar rows decoder {kind}>", "exec"), ns)
        make: DecoderFactory = ns["make"]
        make.__source__ = code  # type: ignore[attr-defined]
        return make
