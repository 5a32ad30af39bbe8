"""A table that comes back under a new table id reuses its compiled decoders; tables with the same columns share
their parsed columns and generated code under their own names; the caches are bounded and evict the least recently
used entry, not everything at once; reading a layout already compiled takes no lock (the parsers of every
destination of a process share the cache)."""

from __future__ import annotations

import struct
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from test_mysql_events import _event, _lenenc_str, _rows_v2, _table_map

from canal.errors import ParseError
from canal.parse.events import RowsEvent, TableMapEvent
from canal.parse.mysql import EventDecoder, map_columns
from canal.parse.mysql import binlog as binlog_module
from canal.parse.mysql import decoder as decoder_module
from canal.parse.mysql import packets as P
from canal.position import EntryPosition
from canal.schema import SchemaCatalog, TableDef
from canal.schema.history import SchemaColumn, SchemaHistory
from canal.sql import read_statement


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


def test_a_table_is_decoded_one_way_when_columns_are_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    # a typed batch keeps a layout's columns only while every rows event of it comes as columns: a table decodes one
    # way, by columns when a full event holds COLUMNAR_MIN_ROWS row images or more (estimated from the bytes an
    # image of its first rows event took), else as tuples -- whatever the rows each event holds
    from canal.parse.source import RowsForm
    from canal.protocol import ColumnarRows

    # full events of 1 KB: a table of images over 128 bytes is "wide" (the helper's VARCHAR takes 255 bytes at most)
    monkeypatch.setattr(binlog_module, "FULL_EVENT_BYTES", 8 * 128)
    parser = EventDecoder("binlog.000001", rows_form=RowsForm(columnar=True))
    narrow, shard = 3, 4
    parser.parse(_event(P.TABLE_MAP_EVENT, _table_map(narrow), 1000))
    parser.parse(_event(P.TABLE_MAP_EVENT, _table_map(shard).replace(b"\x06orders", b"\x06shard2"), 1100))

    def rows_of(table_id: int, count: int, size: int, pos: int, on: EventDecoder = parser) -> Any:
        values = [(i, b"n%d" % i + b"x" * size) for i in range(count)]
        event = on.parse(_event(P.WRITE_ROWS_EVENT_V2, _rows_v2(table_id, values), pos))
        assert isinstance(event, RowsEvent)
        assert [r.after for r in event.rows] == [(i, v.decode()) for i, v in values]
        return event.rows

    # the narrow table's first event, of one row, decides: every event after it by columns, however few its rows
    assert all(isinstance(rows_of(narrow, n, 4, 2000 + 100 * n), ColumnarRows) for n in (1, 1, 64, 2, 1))
    # a table of the same columns (a shard: one layout of a typed batch) is decided with it, whatever its images
    assert isinstance(rows_of(shard, 9, 200, 9000), ColumnarRows)
    # a wide table's first event holds many rows, but each image takes 200 bytes: tuples, that event too (decoded by
    # columns to find out, then again), and every event after it, however many rows or few bytes
    wide = EventDecoder("binlog.000001", rows_form=RowsForm(columnar=True))
    wide.parse(_event(P.TABLE_MAP_EVENT, _table_map(narrow), 1000))
    sizes = ((9, 200), (40, 0), (1, 0))
    assert not any(isinstance(rows_of(narrow, n, size, 9000 + 100 * n, wide), ColumnarRows) for n, size in sizes)
    # a consumer that asks for tuples gets tuples of a table decided by columns, and asks for columns again
    parser.rows_form = RowsForm(columnar=False)
    assert not isinstance(rows_of(narrow, 3, 4, 20000), ColumnarRows)
    parser.rows_form = RowsForm(columnar=True)
    assert isinstance(rows_of(narrow, 3, 4, 21000), ColumnarRows)


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


def _float_rows(table_id: int, values: list[float]) -> bytes:
    """A WRITE_ROWS_EVENT_V2 body of ``_float_map``'s one FLOAT column."""
    body = table_id.to_bytes(6, "little") + b"\x01\x00" + struct.pack("<H", 2)
    body += bytes([1, 0b1])
    for v in values:
        body += b"\x00" + struct.pack("<f", v)
    return body


def test_a_table_id_the_server_hands_to_another_table_decodes_that_tables_rows() -> None:
    """Table ids are the server's table_definition_cache slots, not tables: an id seen for one table comes back for
    another (of the same columns, shared as SameColumns shares them, or of others), and back again; each rows event
    is decoded and named by the table map just before it, never by a decoder kept for another table."""
    parser = EventDecoder("binlog.000001")
    pos = 1000

    def rows_after(body: bytes, rows: bytes) -> RowsEvent:
        nonlocal pos
        assert isinstance(parser.parse(_event(P.TABLE_MAP_EVENT, body, pos)), TableMapEvent)
        event = parser.parse(_event(P.WRITE_ROWS_EVENT_V2, rows, pos + 100))
        pos += 300
        assert isinstance(event, RowsEvent) and event.table_id == 9
        return event

    for table in (b"orders", b"orders2", b"orders"):  # the same columns: the second shares the first's
        event = rows_after(_named(_table_map(9), b"shop", table), _rows_v2(9, [(pos, b"v")]))
        assert event.rows[0].table.table == table.decode() and event.rows[0].after == (pos - 300, "v")
    event = rows_after(_float_map(9, b"prices"), _float_rows(9, [1.5]))  # other columns under the same id
    assert event.rows[0].table.full_name == "shop.prices" and event.rows[0].table.names == ("f",)
    assert event.rows[0].after == (1.5,)
    event = rows_after(_named(_table_map(9), b"shop", b"orders2"), _rows_v2(9, [(3, b"w")]))
    assert event.rows[0].table.table == "orders2" and event.rows[0].after == (3, "w")


def test_a_table_whose_layout_changed_under_the_same_id_gets_its_new_columns() -> None:
    """After a DDL the server may map the table under the id it had: its new table map is another map (another
    key), and its rows are decoded with the new columns, not the decoder the old map made."""
    parser = EventDecoder("binlog.000001")
    parser.parse(_event(P.TABLE_MAP_EVENT, _named(_table_map(9), b"shop", b"t"), 1000))
    before = parser.parse(_event(P.WRITE_ROWS_EVENT_V2, _rows_v2(9, [(1, b"a")]), 1100))
    assert isinstance(before, RowsEvent) and before.rows[0].table.names == ("id", "name")
    parser.parse(_event(P.TABLE_MAP_EVENT, _float_map(9, b"t"), 1200))  # ALTER TABLE t: one FLOAT column now
    after = parser.parse(_event(P.WRITE_ROWS_EVENT_V2, _float_rows(9, [2.25]), 1300))
    assert isinstance(after, RowsEvent) and after.rows[0].table.names == ("f",) and after.rows[0].after == (2.25,)
    assert after.rows[0].table.full_name == "shop.t"
    with pytest.raises(ParseError, match=r"has 2 columns, the table map of shop\.t 1"):  # an old-layout event now
        parser.parse(_event(P.WRITE_ROWS_EVENT_V2, _rows_v2(9, [(1, b"a")]), 1400))


def test_each_table_is_checked_against_the_history_and_a_known_agreement_is_not_compared_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Shards in a real schema history: the history hands tables of one layout the same columns, so a shard whose
    layout is one already found to agree with these columns is not compared again -- but every shard is looked up,
    and one whose layout the history holds otherwise (another column name) is compared, found to differ and
    repaired from the binlog, as any table is."""
    compared: list[str] = []
    real = map_columns.schema_mismatch

    def counting(columns: Any, found: Sequence[SchemaColumn]) -> str | None:
        compared.append(",".join(f.name for f in found))
        return real(columns, found)

    monkeypatch.setattr(map_columns, "schema_mismatch", counting)
    catalog = SchemaCatalog(charset="utf8mb4", database="shop", mariadb=True)
    for n in range(4):
        second = "title" if n == 2 else "name"
        catalog.apply(read_statement(f"CREATE TABLE s{n} (id INT UNSIGNED PRIMARY KEY, {second} VARCHAR(10))"), "shop")
    history = SchemaHistory()
    history.bootstrap(EntryPosition("binlog.000001", 4), catalog)
    asked: list[str] = []
    real_columns = history.columns

    def columns(db: str, table: str) -> tuple[SchemaColumn, ...] | None:
        asked.append(table)
        return real_columns(db, table)

    monkeypatch.setattr(history, "columns", columns)
    parser = EventDecoder("binlog.000001", schema_lookup=history)
    for n in range(4):
        tm = parser.parse(
            _event(P.TABLE_MAP_EVENT, _named(_table_map(20 + n), b"shop", f"s{n}".encode()), 1000 + 100 * n)
        )
        assert isinstance(tm, TableMapEvent) and tm.table_schema.names == ("id", "name")
    assert asked == ["s0", "s1", "s2", "s3"]  # each table looked up
    # s0 made the decoder (compared), s1 found the agreement (compared once), s2 differs (its names, then compared
    # for the warning that says why), s3 agrees as s1 did: not compared
    assert compared == ["id,name", "id,name", "id,title"]
    repaired = history.table("shop", "s2")
    assert repaired is not None and [c.name for c in repaired.columns] == ["id", "name"]
    assert history.records == 1
