"""A :class:`~canal.lake.forms.flat_messages.MessagePlan` as bytes, for the task that makes its messages.

The ``messages`` option's reader plans each chunk's messages and a task of the micro-batch renders them
(:mod:`canal.spark.message_rows`): the texts, two fifths of the reader's time a change when it made them itself, are
then made beside it, in Spark's Python workers. The plan travels pickled, its rows decoded column by column kept as
columns: a :class:`~canal.protocol.ColumnarRows` pickles by default as plain rows, image tuples of the object
decoder's values, made for it (15 us a row of bench_spark's, three times the maker's saving); here as each column's
tuple of raw cells and its form's fields (its ``to_object`` is generated code, made again where it is read). A
table's layout is read back as one object for all the plans a process reads, as the reader's parser keeps it: the
makers' encoders are made once per layout object.

The bytes are read back with an unpickler that builds pycanal's entry classes and the standard library's value types
only (:data:`_ALLOWED`), nothing else a pickle could name: a spool file is data, not code. What it refuses is an
:class:`EntryWireError`.
"""

from __future__ import annotations

import copyreg
import functools
import io
import pickle
from pickle import HIGHEST_PROTOCOL as _HIGHEST
from pickle import dumps as _dumps
from typing import Any, Final

from canal.errors import CanalError
from canal.protocol import (
    ColumnarRows,
    ColumnForm,
    ColumnMeta,
    Entry,
    EntryType,
    EventType,
    Header,
    RowChange,
    TableSchema,
)


class EntryWireError(CanalError):
    """Bytes that are not a plan :func:`dumps` wrote -- a global outside the entry classes, or no pickle at all."""


def dumps(obj: Any) -> bytes:
    """``obj`` pickled, its :class:`ColumnarRows` as columns."""
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = _DISPATCH
    pickler.dump(obj)
    return buffer.getvalue()


def loads(data: bytes) -> Any:
    """What :func:`dumps` wrote; an :class:`EntryWireError` for anything else."""
    try:
        return _Unpickler(io.BytesIO(data)).load()
    except EntryWireError:
        raise
    except Exception as exc:  # a truncated or foreign file: pickle raises many kinds
        raise EntryWireError(f"not a message plan: {type(exc).__name__}: {exc}") from None


def _entry_reduce(entry: Entry) -> tuple[Any, ...]:
    # one flat tuple an entry, rather than attrs' state dicts of its three objects (two fifths of the time); a plan's
    # entries hold what messages are made of (no cursor anchor, no snapshot progress: MessagePlan's)
    h, rc = entry.header, entry.row_change
    head = (h.log_file, h.log_offset, h.server_id, h.execute_time, h.schema, h.table, h.event_type, h.event_length)
    change = None if rc is None else (rc.event_type, rc.rows, rc.is_ddl, rc.sql, rc.ddl_schema, rc.table_id, rc.table)
    return (_entry, (head, h.gtid, h.props or None, entry.entry_type, change))


def _entry(
    head: tuple[str, int, int, int, str, str, EventType, int],
    gtid: str | None,
    props: dict[str, str] | None,
    kind: EntryType,
    change: tuple[EventType, Any, bool, str, str, int, TableSchema | None] | None,
) -> Entry:
    log_file, log_offset, server_id, execute_time, schema, table, event_type, event_length = head
    header = Header(
        log_file, log_offset, server_id, execute_time, schema, table, event_type, event_length, gtid, props or {}
    )
    if change is None:
        return Entry(header, kind)
    rc_type, rows, is_ddl, sql, ddl_schema, table_id, table_schema = change
    return Entry(header, kind, RowChange(rc_type, rows, is_ddl, sql, ddl_schema, table_id, table_schema))


def _columnar_reduce(rows: ColumnarRows) -> tuple[Any, ...]:
    # each side's cells pickled apart: a pickler's memo of every cell of a whole plan costs as much again as the cells
    sides = (rows.columns_before, rows.columns_after)
    before, after = (None if side is None else _dumps(side, _HIGHEST) for side in sides)
    return (_columnar, (rows.table, before, after, rows.forms, len(rows)))


def _columnar(
    table: TableSchema, before: bytes | None, after: bytes | None, forms: tuple[ColumnForm, ...], n: int
) -> ColumnarRows:
    return ColumnarRows(table, _cells(before), _cells(after), forms, n)


def _cells(side: bytes | None) -> Any:
    return None if side is None else _Unpickler(io.BytesIO(side)).load()


def _form_reduce(form: ColumnForm) -> tuple[Any, ...]:
    return (_form, (form.kind, form.fsp, form.precision, form.scale))


def _table_reduce(table: TableSchema) -> tuple[Any, ...]:
    return (_table, (table.schema, table.table, table.columns))


@functools.lru_cache(maxsize=4096)
def _table(schema: str, table: str, columns: tuple[ColumnMeta, ...]) -> TableSchema:
    # one object a layout in the process that reads plans: what is made once per layout and kept by identity (the
    # column encoders, canal's pkNames and types) is then made once, not again for every plan a worker renders --
    # a 1,000-column table's took 50 ms a plan, and the copies kept held 0.8 MB each, up to 4,096 of them
    return TableSchema(schema, table, columns)


@functools.cache
def _form(kind: str, fsp: int, precision: int, scale: int) -> ColumnForm:
    from canal.parse.mysql.decoder import raw_form

    return raw_form(kind, fsp, precision, scale)


_DISPATCH: Final[dict[type, Any]] = {
    **copyreg.dispatch_table,
    Entry: _entry_reduce,
    ColumnarRows: _columnar_reduce,
    ColumnForm: _form_reduce,
    TableSchema: _table_reduce,
}

_ALLOWED: Final = {
    "canal.protocol": {
        "ABSENT",
        "ColumnMeta",
        "EntryType",
        "EventType",
        "Rows",
        "SqlType",
        "TableSchema",
    },
    "canal.mysql_json": {"JsonOpaque"},
    "canal.lake.forms.entry_wire": {"_columnar", "_entry", "_form", "_table"},
    "canal.lake.forms.flat_messages": {"MessagePlan"},
    "datetime": {"date", "datetime", "time", "timedelta", "timezone"},
    "decimal": {"Decimal"},
    "builtins": {"set", "frozenset", "bytearray", "complex"},
}
"""The globals a plan's pickle may name: the entry classes and the values a decoded cell holds."""


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if name not in _ALLOWED.get(module, ()):
            raise EntryWireError(f"not a message plan: it names {module}.{name}, which no entry holds")
        return super().find_class(module, name)


__all__ = ["EntryWireError", "dumps", "loads"]
