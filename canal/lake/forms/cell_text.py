"""Values as a change row's image holds them: each as canal's text, a JSON string (SQL NULL is JSON null).

The Spark source writes the images of its change rows with these encoders (:mod:`canal.lake.forms.changes`, whose
per-table codecs fall back to :func:`encode_any` for a value of a surprising type), and the mirror writes the rows a
foreign key's action adds with them (:mod:`canal.lake.apply.cascade`): one encoding, so the mirror reads both alike.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from decimal import Decimal
from json.encoder import encode_basestring as encode_str
from typing import Any

from canal.errors import CanalError
from canal.protocol import ABSENT, Absent
from canal.sql import read_column_type
from canal.value_text import render_fraction, render_text

__all__ = [
    "AbsentCellError",
    "column_texts",
    "encode_any",
    "encode_float",
    "encode_str",
    "encode_value",
    "message_text",
    "rows_texts",
    "server_text",
]


class AbsentCellError(CanalError, ValueError):
    """A cell of a column the row image does not carry (:data:`~canal.protocol.ABSENT`) was to be written: it has
    no text (an image's encoder leaves such columns out)."""


def _refuse_absent(v: Any) -> str:
    raise AbsentCellError("a column the row image does not carry (ABSENT) has no canal text")


def _enc_int(v: Any) -> str:
    return f'"{v}"'


def _enc_str(v: Any) -> str:
    return encode_str(v)


def _enc_decimal(v: Any) -> str:
    return f'"{v:f}"'


def encode_float(v: float) -> str:
    if 1e-3 <= abs(v) < 1e7:  # Java prints these like Python's repr, which always has a "." in this range
        return '"' + repr(v) + '"'
    return '"' + render_text(v) + '"'


def _enc_datetime(v: dt.datetime) -> str:
    if v.tzinfo is not None:
        v = v.astimezone(dt.UTC).replace(tzinfo=None)
    return '"' + v.isoformat(" ") + '"'


def _enc_date(v: dt.date) -> str:
    return '"' + v.isoformat() + '"'


def _enc_bytes(v: bytes) -> str:
    return encode_str(v.decode("latin-1"))  # canal's text of binary: one char per byte (render_text)


def _enc_other(v: Any) -> str:
    return encode_str(render_text(v))


_ENCODERS: dict[type, Callable[[Any], str]] = {
    int: _enc_int,
    str: _enc_str,
    Decimal: _enc_decimal,
    float: encode_float,
    dt.datetime: _enc_datetime,
    dt.date: _enc_date,
    bytes: _enc_bytes,
    Absent: _refuse_absent,
}


def encode_any(v: Any) -> str:
    """A value as the JSON string of its canal text."""
    return _ENCODERS.get(type(v), _enc_other)(v)


def encode_value(v: Any) -> str:
    """A Python value (a cell the mirror read back) as canal text, as a change row's image holds it."""
    text: str = json.loads(encode_any(v))
    return text


def column_texts(column: Any) -> list[str | None]:
    """An Arrow column the mirror holds (or a typed image's field) as the canal text of each value, as
    :func:`encode_value` spells it (None: SQL NULL). Dates and timestamps are rendered by Arrow, never through
    Python's ``date``, which holds no year 0 (MySQL stores '0000-01-01'): a timestamp as ``YYYY-MM-DD HH:MM:SS`` with
    its microseconds when it has some, as ``datetime.isoformat(" ")`` spells it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = column.type
    if pa.types.is_date(kind):
        texts: list[str | None] = column.cast(pa.string()).to_pylist()
        return texts
    if pa.types.is_timestamp(kind):
        text = column.cast(pa.timestamp("us")).cast(pa.string())  # six fraction digits, always
        whole = pc.replace_substring_regex(text, pattern=r"\.000000$", replacement="")
        texts = whole.to_pylist()
        return texts
    return [None if value is None else encode_value(value) for value in column.to_pylist()]


def rows_texts(table: Any) -> list[dict[str, str | None]]:
    """A pyarrow Table's rows, each a dict of its cells' canal text (:func:`column_texts`)."""
    columns = {name: column_texts(table.column(name).combine_chunks()) for name in table.column_names}
    return [dict(zip(columns, cells, strict=True)) for cells in zip(*columns.values(), strict=True)]


def server_text(mysql_type: str) -> Callable[[Any], str] | None:
    """The text of a column's values as the server prints them, for the types whose canal text (render_text) is
    not that: a SET's labels in the column's definition order (canal text sorts them), a TIME with exactly its
    declared fraction digits. None for the other types."""
    column_type = read_column_type(mysql_type, strict=False)
    if column_type.base == "set":
        order = {label: n for n, label in enumerate(column_type.labels)}
        return lambda value: ",".join(sorted(value, key=lambda label: order.get(label, len(order))))
    if column_type.base == "time":
        fsp = column_type.params[0] if column_type.params else 0
        return lambda value: _time_text(value, fsp)
    return None


def message_text(mysql_type: str) -> Callable[[Any], str] | None:
    """:func:`server_text`, and for the other types whose text in canal's FlatMessage (canal's
    ``Column.getValue()``, :attr:`canal.protocol.Column.text`) is not :func:`encode_any`'s: a DATETIME / TIMESTAMP
    with exactly its declared fraction digits (``.500`` for DATETIME(3), ``.000000`` for a whole DATETIME(6)), a YEAR
    0 as ``0000``. None for the other types. Change rows keep :func:`encode_any`'s text: the mirror reads it."""
    as_server = server_text(mysql_type)
    if as_server is not None:
        return as_server
    column_type = read_column_type(mysql_type, strict=False)
    if column_type.base in ("datetime", "timestamp") and column_type.params and column_type.params[0]:
        fsp = column_type.params[0]
        return lambda value: render_fraction(value, fsp) if isinstance(value, dt.datetime) else render_text(value)
    if column_type.base == "year":
        return lambda value: "0000" if value == 0 and type(value) is int else render_text(value)
    return None


def _time_text(value: Any, fsp: int) -> str:
    if not isinstance(value, dt.timedelta):
        return _refuse_absent(value) if value is ABSENT else render_text(value)
    text = render_text(value)
    whole, _, fraction = text.partition(".")
    return whole + ("." + fraction.ljust(6, "0")[:fsp] if fsp else "")
