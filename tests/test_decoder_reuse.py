"""A table that comes back under a new table id reuses its compiled decoders; the caches are bounded and evict
one entry at a time, not everything at once; reading a layout already compiled takes no lock (the parsers of every
destination of a process share the cache)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from test_mysql_events import _event, _rows_v2, _table_map

from canal.parse.events import RowsEvent, TableMapEvent
from canal.parse.mysql import EventDecoder
from canal.parse.mysql import binlog as binlog_module
from canal.parse.mysql import decoder as decoder_module
from canal.parse.mysql import packets as P


def _compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The kinds of the decoders generated from now on (the process-wide layout cache starts empty)."""
    monkeypatch.setattr(decoder_module, "_LAYOUTS", {})
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


class _CountingLock:
    """A lock that counts its acquisitions."""

    def __init__(self) -> None:
        self.taken = 0
        self._lock = threading.Lock()

    def __enter__(self) -> None:
        self.taken += 1
        self._lock.acquire()

    def __exit__(self, *exc: Any) -> None:
        self._lock.release()


def test_a_compiled_layout_is_read_without_the_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    _compiles(monkeypatch)
    lock = _CountingLock()
    monkeypatch.setattr(decoder_module, "_LAYOUTS_LOCK", lock)
    _read(EventDecoder("binlog.000001"), 1, 1, 1000)  # compiles the layout and its write decoder
    taken = lock.taken
    assert taken > 0
    for n in range(20):  # what every other destination's parser does with the same tables: no lock
        _read(EventDecoder("binlog.000001"), 1 + n, n, 1000)
    assert lock.taken == taken


def test_events_of_few_rows_are_decoded_as_tuples_when_columns_are_asked() -> None:
    # a wide table's events hold a row or two each: a list and a tuple per column of each event cost more than the
    # tuples of its rows (20 times at 1,000 columns), so only events of many rows are decoded column by column
    from canal.parse.mysql.binlog import COLUMNAR_MIN_ROWS
    from canal.parse.source import RowsForm
    from canal.protocol import ColumnarRows

    parser = EventDecoder("binlog.000001", rows_form=RowsForm(columnar=True))
    parser.parse(_event(P.TABLE_MAP_EVENT, _table_map(3), 1000))

    def rows_of(count: int, pos: int) -> Any:
        event = parser.parse(_event(P.WRITE_ROWS_EVENT_V2, _rows_v2(3, [(i, b"n%d" % i) for i in range(count)]), pos))
        assert isinstance(event, RowsEvent) and [r.after for r in event.rows] == [(i, f"n{i}") for i in range(count)]
        return event.rows

    assert not isinstance(rows_of(1, 2000), ColumnarRows)
    assert isinstance(rows_of(4 * COLUMNAR_MIN_ROWS, 3000), ColumnarRows)
    assert not isinstance(rows_of(COLUMNAR_MIN_ROWS // 2, 4000), ColumnarRows)  # by the bytes a row took last
    assert isinstance(rows_of(COLUMNAR_MIN_ROWS, 5000), ColumnarRows)
