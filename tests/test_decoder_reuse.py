"""A table that comes back under a new table id reuses its compiled decoders; tables with the same columns share
their parsed columns and generated code under their own names; the caches are bounded and evict the least recently
used entry, not everything at once."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import pytest
from test_mysql_events import _event, _lenenc_str, _rows_v2, _table_map

from canal.parse.events import RowsEvent, TableMapEvent
from canal.parse.mysql import EventDecoder
from canal.parse.mysql import binlog as binlog_module
from canal.parse.mysql import decoder as decoder_module
from canal.parse.mysql import packets as P
from canal.position import EntryPosition
from canal.schema import TableDef
from canal.schema.history import SchemaColumn


def _compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The kinds of the decoders generated from now on (the process-wide layout cache starts empty)."""
    monkeypatch.setattr(decoder_module, "_LAYOUTS", OrderedDict())
    calls: list[str] = []
    real = decoder_module._CodeGen.rows_function

    def counting(self: object, kind: str, *args: object) -> object:
        calls.append(kind)
        return real(self, kind, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(decoder_module._CodeGen, "rows_function", counting)
    return calls


def _read(parser: EventDecoder, table_id: int, value: int, pos: int) -> RowsEvent:
    tm = parser.parse(_event(P.TABLE_MAP_EVENT, _table_map(table_id), pos))
    assert isinstance(tm, TableMapEvent) and tm.table_id == table_id
    rows = parser.parse(_event(P.WRITE_ROWS_EVENT_V2, _rows_v2(table_id, [(value, b"n")]), pos + 100))
    assert isinstance(rows, RowsEvent)
    return rows


def test_new_table_ids_of_the_same_table_compile_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _compiles(monkeypatch)
    parser = EventDecoder("binlog.000001")
    for n in range(50):  # what FLUSH TABLES or a full table_definition_cache does: a new id for every map
        rows = _read(parser, 100 + n, n, 1000 + 300 * n)
        assert rows.table_id == 100 + n
        assert rows.rows[0].after == (n, "n")
    assert calls == ["w"]


def test_tables_of_one_layout_share_the_generated_code(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _compiles(monkeypatch)
    parser = EventDecoder("binlog.000001")
    pos = 1000
    for n in range(20):  # shards: like tables under other names
        body = _table_map(40 + n).replace(b"\x06orders", b"\x08orders" + f"{n:02d}".encode())
        tm = parser.parse(_event(P.TABLE_MAP_EVENT, body, pos))
        assert isinstance(tm, TableMapEvent) and tm.table == f"orders{n:02d}"
        rows = parser.parse(_event(P.WRITE_ROWS_EVENT_V2, _rows_v2(40 + n, [(n, b"v")]), pos + 100))
        assert isinstance(rows, RowsEvent)
        assert rows.rows[0].table.table == f"orders{n:02d}" and rows.rows[0].after == (n, "v")
        pos += 300
    assert calls == ["w"]


def test_the_map_cache_evicts_the_least_recently_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(binlog_module, "_MAP_CACHE_SIZE", 2)
    parser = EventDecoder("binlog.000001")
    maps = []
    for name in (b"a", b"b", b"c"):
        body = _table_map(7).replace(b"\x06orders", b"\x07orders" + name)
        maps.append(body)
    pos = 1000
    for body in (maps[0], maps[1], maps[0], maps[2]):  # a is used again before c arrives: b goes
        parser.parse(_event(P.TABLE_MAP_EVENT, body, pos))
        pos += 100
    cached = [bytes(k) for k in parser._map_cache]
    assert len(cached) == 2
    assert any(b"ordersa" in k for k in cached) and any(b"ordersc" in k for k in cached)


def test_the_decoder_cache_evicts_one_decoder_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(decoder_module, "_MAX_DECODERS", 2)
    _compiles(monkeypatch)
    parser = EventDecoder("binlog.000001")
    parser.parse(_event(P.TABLE_MAP_EVENT, _table_map(5), 1000))
    dec = parser.tables[5]
    first = dec.decoder("w", b"\x03")
    dec.decoder("w", b"\x01")
    assert dec.decoder("w", b"\x03") is first  # used again: the most recent
    dec.decoder("w", b"\x02")  # evicts b"\x01" only
    assert [key[1] for key in dec._decoders] == [b"\x03", b"\x02"]
    assert dec.decoder("w", b"\x03") is first


def test_a_reused_layout_keeps_its_own_table_id() -> None:
    parser = EventDecoder("binlog.000001")
    _read(parser, 1, 10, 1000)
    _read(parser, 2, 20, 2000)
    # both ids stay valid: a rows event under the first id still decodes (ids are per-map, not per-layout)
    rows = parser.parse(_event(P.WRITE_ROWS_EVENT_V2, _rows_v2(1, [(30, b"z")]), 3000))
    assert isinstance(rows, RowsEvent) and rows.table_id == 1 and rows.rows[0].after == (30, "z")


def _parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tables whose table maps are parsed from now on."""
    parsed: list[str] = []
    real = binlog_module.parse_table_map_body

    def counting(*args: Any) -> decoder_module.TableMapInfo:
        info = real(*args)
        parsed.append(f"{info.schema}.{info.table}")
        return info

    monkeypatch.setattr(binlog_module, "parse_table_map_body", counting)
    return parsed


def _named(body: bytes, schema: bytes, table: bytes) -> bytes:
    return body.replace(_lenenc_str(b"shop"), _lenenc_str(schema), 1).replace(
        _lenenc_str(b"orders"), _lenenc_str(table), 1
    )


class _Columns:
    """A strict column source (as the schema history is) that counts what it is asked; ``types`` gives a table's
    second column another declared type."""

    strict = True
    version = 0

    def __init__(self, types: dict[str, str] | None = None) -> None:
        self.asked: list[str] = []
        self.types = types or {}

    def columns(self, db: str, table: str) -> Sequence[SchemaColumn] | None:
        self.asked.append(f"{db}.{table}")
        second = self.types.get(table, "varchar(10)")
        return [SchemaColumn("id", True, (), True, "int(10) unsigned"), SchemaColumn("name", False, (), None, second)]

    def repair(self, position: EntryPosition, table: TableDef) -> bool:
        raise AssertionError(f"{table.name} matched the binlog")


def test_tables_with_the_same_columns_parse_them_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shards (or a schema per tenant) of one definition: the first table map is parsed and its decoders generated,
    the others take them under their own names (each table's first map costs a lookup, not a parse); the schema
    history still checks each table."""
    parsed = _parses(monkeypatch)
    compiled = _compiles(monkeypatch)
    lookup = _Columns()
    parser = EventDecoder("binlog.000001", schema_lookup=lookup)
    pos = 1000
    seen = []
    for n in range(20):
        schema, table = f"tenant{n % 4}".encode(), f"orders{n:02d}".encode()
        tm = parser.parse(_event(P.TABLE_MAP_EVENT, _named(_table_map(40 + n), schema, table), pos))
        assert isinstance(tm, TableMapEvent) and (tm.schema, tm.table) == (schema.decode(), table.decode())
        rows = parser.parse(_event(P.WRITE_ROWS_EVENT_V2, _rows_v2(40 + n, [(n, b"v")]), pos + 100))
        assert isinstance(rows, RowsEvent) and rows.table_id == 40 + n
        row = rows.rows[0]
        assert (row.table.schema, row.table.table, row.after) == (schema.decode(), table.decode(), (n, "v"))
        assert row.table.names == ("id", "name") and row.table.key_indexes == (0,)
        seen.append(row.table)
        pos += 300
    assert parsed == ["tenant0.orders00"]
    assert compiled == ["w"]
    assert all(t.columns is seen[0].columns for t in seen)  # one column metadata for them all
    assert lookup.asked == [f"tenant{n % 4}.orders{n:02d}" for n in range(20)]  # each table checked
    # the first table again, under its first id: its own decoder, not a later table's
    rows = parser.parse(_event(P.WRITE_ROWS_EVENT_V2, _rows_v2(40, [(99, b"z")]), pos))
    assert isinstance(rows, RowsEvent) and rows.rows[0].table.table == "orders00" and rows.rows[0].after == (99, "z")


def _float_map(table_id: int, table: bytes) -> bytes:
    """``shop.<table> (f FLOAT)`` with its name (FULL metadata)."""
    optional = bytes([4, 2]) + _lenenc_str(b"f")
    return (
        table_id.to_bytes(6, "little")
        + b"\x01\x00"
        + _lenenc_str(b"shop")
        + b"\x00"
        + _lenenc_str(table)
        + b"\x00"
        + bytes([1, 4])  # one column: FLOAT
        + bytes([1, 4])  # its metadata: 4 bytes
        + bytes([0b1])  # nullable
        + optional
    )


def test_columns_that_take_from_the_schema_are_not_shared(monkeypatch: pytest.MonkeyPatch) -> None:
    """A table map whose decoder took something from the schema history -- a FLOAT's declared decimals, names for a
    map without them -- is parsed for each table: another table with the same bytes may be declared otherwise."""
    parsed = _parses(monkeypatch)

    class Floats(_Columns):
        def columns(self, db: str, table: str) -> Sequence[SchemaColumn] | None:
            self.asked.append(f"{db}.{table}")
            return [SchemaColumn("f", False, (), None, {"a": "float(7,3)", "b": "float(7,1)"}[table])]

    parser = EventDecoder("binlog.000001", schema_lookup=Floats())
    types = []
    for n, table in enumerate((b"a", b"b")):
        tm = parser.parse(_event(P.TABLE_MAP_EVENT, _float_map(70 + n, table), 1000 + 100 * n))
        assert isinstance(tm, TableMapEvent)
        types.append(tm.table_schema.columns[0].mysql_type)
    assert types == ["float(7,3)", "float(7,1)"]
    assert parsed == ["shop.a", "shop.b"]

    # a map without names (MINIMAL / NO_LOG metadata) takes them from the schema: parsed for each table too
    nameless = _table_map(80)
    at = nameless.index(bytes([4, 8]))
    nameless = nameless[:at] + nameless[at + 10 :]  # the column names field: type, length and two names
    parser = EventDecoder("binlog.000001", schema_lookup=_Columns())
    for n, table in enumerate((b"orders", b"orders2")):
        tm = parser.parse(_event(P.TABLE_MAP_EVENT, _named(nameless, b"shop", table), 2000 + 100 * n))
        assert isinstance(tm, TableMapEvent) and tm.table_schema.names == ("id", "name")
    assert parsed[2:] == ["shop.orders", "shop.orders2"]
