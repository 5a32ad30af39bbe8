"""MySQL 8 and 9 binlog formats, on events built byte by byte (:mod:`mysql8_events`).

No MySQL 8/9 server can be installed here (Debian ships MariaDB only; nothing is downloaded at test time), so each
format is built from MySQL's documented layouts and read through the same parser the sources use, and, for
compressed transactions, through both sources and an :class:`~canal.instance.Instance` restarted inside one:

* ``TRANSACTION_PAYLOAD_EVENT`` (``binlog_transaction_compression=ON``, zstd or none) expanded into its events, the
  transaction's end placed at the payload's end so a cursor resumes exactly;
* ``PARTIAL_UPDATE_ROWS_EVENT`` (``binlog_row_value_options=PARTIAL_JSON``): the JSON diffs applied to the before
  image, so the after image is the whole document;
* MySQL's binary JSON with every value type (small and large containers, literals, int16/32/64, uint16/32/64,
  double, string, opaque DECIMAL/DATE/TIME/DATETIME and others), round-tripped with hypothesis;
* the ``VECTOR`` column type (MySQL 9);
* GTID events (MySQL 8's full layout and 8.4's tagged ``GTID_TAGGED_LOG_EVENT``) and previous-GTIDs sets, classic
  and tagged;
* event types that are refused, ignored on purpose, or unknown.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import struct
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import mysql8_events as M
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mysql_wire import event_packets, serving

from canal.config import InstanceConfig, MasterConfig, StoreConfig
from canal.errors import ParseError
from canal.gtid import GtidSet, decode_mysql_gtid_set, encode_mysql_gtid_set
from canal.instance import Instance
from canal.parse.convert import ConvertOptions, EntryConverter
from canal.parse.events import BinlogEvent, GtidEvent, GtidSetEvent, IgnoredEvent, QueryEvent, RowsEvent, XidEvent
from canal.parse.mysql import EventDecoder, LocalBinlogSource, MysqlBinlogSource
from canal.parse.mysql import packets as P
from canal.parse.mysql.json_binary import read_mysql_json
from canal.parse.source import DumpRequest
from canal.position import EntryPosition
from canal.protocol import EntryType, EventType, JsonOpaque, json_text

FILE = "binlog.000001"
SOURCE = uuid.UUID("3e11fa47-71ca-11e1-9e33-c80aa9429562")

T_LONG, T_VARCHAR, T_JSON, T_VECTOR = 3, 15, 245, 242
ORDERS = [("id", T_LONG, b"", False), ("note", T_VARCHAR, struct.pack("<H", 80), True)]


def _order(id_: int, note: str | None) -> bytes:
    if note is None:
        return b"\x02" + struct.pack("<i", id_)
    data = note.encode()
    return b"\x00" + struct.pack("<i", id_) + bytes([len(data)]) + data


def _parser() -> EventDecoder:
    parser = EventDecoder(FILE, verify_checksum=True)
    parser.parse(M.fde())
    return parser


def _parse(parser: EventDecoder, type_code: int, body: bytes, log_pos: int = 1000) -> BinlogEvent:
    return parser.parse(M.event(type_code, body, log_pos))


# -- compressed transactions -------------------------------------------------------------------------------------


def _inner_transaction(first_id: int, *, table_id: int = 70) -> list[bytes]:
    """BEGIN, the table map, an insert of two rows, an update of one, XID -- as MySQL puts them in a payload:
    without checksums."""
    return [
        M.event(P.QUERY_EVENT, M.query("BEGIN"), 0, checksum=False),
        M.event(P.TABLE_MAP_EVENT, M.table_map(table_id, "shop", "orders", ORDERS), 0, checksum=False),
        M.event(
            P.WRITE_ROWS_EVENT_V2,
            M.rows_v2(table_id, 2, _order(first_id, "é€") + _order(first_id + 1, None)),
            0,
            checksum=False,
        ),
        M.event(
            P.UPDATE_ROWS_EVENT_V2,
            M.rows_v2(table_id, 2, _order(first_id, "é€") + _order(first_id, "paid"), update=True),
            0,
            checksum=False,
        ),
        M.event(P.XID_EVENT, M.xid(first_id), 0, checksum=False),
    ]


def _mysql8_file(events: list[tuple[int, bytes]], *, checksum: bool = True) -> tuple[bytes, list[int]]:
    """A binlog file (magic, MySQL 8 format description, the events at consecutive positions) and the offset of
    each event."""
    out = bytearray(P.BINLOG_MAGIC) + M.fde(checksum=checksum)
    offsets = []
    for type_code, body in events:
        offsets.append(len(out))
        end = len(out) + 19 + len(body) + (4 if checksum else 0)
        out += M.event(type_code, body, end, checksum=checksum)
    return bytes(out), offsets


def _compressed_file(compression: str = "zstd") -> tuple[bytes, list[int]]:
    return _mysql8_file(
        [
            (P.PREVIOUS_GTIDS_LOG_EVENT, encode_mysql_gtid_set(f"{SOURCE}:1-9")),
            (P.GTID_LOG_EVENT, M.gtid_body(SOURCE, 10)),
            (P.TRANSACTION_PAYLOAD_EVENT, M.transaction_payload(_inner_transaction(1), compression=compression)),
            (P.GTID_LOG_EVENT, M.gtid_body(SOURCE, 11)),
            (P.TRANSACTION_PAYLOAD_EVENT, M.transaction_payload(_inner_transaction(10), compression=compression)),
            (P.ROTATE_EVENT, struct.pack("<Q", 4) + b"binlog.000002"),
        ]
    )


def _dump_files(directory: Path, position: int = 4) -> list[BinlogEvent]:
    source = LocalBinlogSource(directory)
    source.open()
    return list(source.dump(DumpRequest(FILE, position, blocking=False)))


def _row_changes(events: list[BinlogEvent]) -> list[tuple[Any, ...]]:
    return [(e.event_type, r.before, r.after) for e in events if isinstance(e, RowsEvent) for r in e.rows]


_EXPECTED_ROWS = [
    (EventType.INSERT, None, (1, "é€")),
    (EventType.INSERT, None, (2, None)),
    (EventType.UPDATE, (1, "é€"), (1, "paid")),
    (EventType.INSERT, None, (10, "é€")),
    (EventType.INSERT, None, (11, None)),
    (EventType.UPDATE, (10, "é€"), (10, "paid")),
]


@pytest.mark.parametrize("compression", ["zstd", "none"])
def test_compressed_transactions_expand_into_their_events(tmp_path: Path, compression: str) -> None:
    data, offsets = _compressed_file(compression)
    (tmp_path / FILE).write_bytes(data)
    events = _dump_files(tmp_path)
    assert _row_changes(events) == _EXPECTED_ROWS
    payload1, payload2 = offsets[2], offsets[4]
    inner1 = [e for e in events if e.offset == payload1]
    # BEGIN, table map, two rows events at the payload; the XID at the payload's end, occupying no bytes
    assert [type(e).__name__ for e in inner1] == ["QueryEvent", "TableMapEvent", "RowsEvent", "RowsEvent"]
    assert all(e.next_offset == offsets[3] for e in inner1)
    ends = [e for e in events if isinstance(e, XidEvent)]
    assert [(e.offset, e.next_offset, e.xid) for e in ends] == [
        (offsets[3], offsets[3], 1),
        (offsets[5], offsets[5], 10),
    ]
    assert payload2 > payload1


def test_a_cursor_at_a_compressed_transaction_end_resumes_with_the_next(tmp_path: Path) -> None:
    data, offsets = _compressed_file()
    (tmp_path / FILE).write_bytes(data)
    converter = EntryConverter(ConvertOptions(gtid_mode=True))
    converter.reset(EntryPosition(FILE, 4))
    entries = [e for e in (converter.convert(ev) for ev in _dump_files(tmp_path)) if e is not None]
    first_end = next(e for e in entries if e.entry_type is EntryType.TRANSACTIONEND)
    # the boundary sits where the next transaction's GTID event starts, with nothing there to skip
    assert (first_end.anchor.position, first_end.anchor.included) == (offsets[3], False)
    assert first_end.anchor.gtid == f"{SOURCE}:1-10"

    converter.reset(first_end.anchor)
    resumed = [e for e in (converter.convert(ev) for ev in _dump_files(tmp_path, offsets[3])) if e is not None]
    rows = [e.row_change.rows[0].after for e in resumed if e.entry_type is EntryType.ROWDATA and e.row_change]
    assert rows == [(10, "é€"), (10, "paid")]
    assert resumed[0].entry_type is EntryType.TRANSACTIONBEGIN
    assert resumed[-1].anchor.gtid == f"{SOURCE}:1-11"


def test_an_instance_restarted_inside_a_compressed_transaction_delivers_each_row_once(tmp_path: Path) -> None:
    data, _ = _compressed_file()
    binlogs = tmp_path / "binlogs"
    binlogs.mkdir()
    (binlogs / FILE).write_bytes(data)
    config = InstanceConfig(
        destination="mysql8",
        master=MasterConfig(address=f"file://{binlogs}", journal_name=FILE, position=4),
        meta_mode="file",
        meta_dir=str(tmp_path / "meta"),
        store=StoreConfig(batch_mode="ITEMSIZE"),
    )

    def rows(entries: Any) -> list[tuple[Any, ...]]:
        return [
            (r.before, r.after)
            for e in entries
            if e.entry_type is EntryType.ROWDATA and e.row_change
            for r in e.row_change.rows
        ]

    with Instance(config) as inst:
        # the first transaction (BEGIN, insert, update, END) and the start of the second (BEGIN, insert)
        first = inst.get_without_ack(batch_size=6, timeout=10.0)
        assert [e.entry_type for e in first.entries][-2:] == [EntryType.TRANSACTIONBEGIN, EntryType.ROWDATA]
        inst.ack(first.id)
    with Instance(config) as inst:
        rest = inst.get_without_ack(batch_size=100, timeout=2.0)
        inst.ack(rest.id)
    assert rows(first.entries) == [(None, (1, "é€")), (None, (2, None)), ((1, "é€"), (1, "paid")),
                                   (None, (10, "é€")), (None, (11, None))]  # fmt: skip
    assert rows(rest.entries) == [((10, "é€"), (10, "paid"))]
    assert rest.entries[-1].entry_type is EntryType.TRANSACTIONEND


def test_compressed_transactions_through_the_network_source() -> None:
    data, _ = _compressed_file()
    rotate = struct.pack("<Q", 4) + FILE.encode()
    dump_rotate = M.event(P.ROTATE_EVENT, rotate, 0, flags=P.LOG_EVENT_ARTIFICIAL_F)
    raw_events = [dump_rotate]
    pos = 4
    while pos < len(data):
        size = int.from_bytes(data[pos + 9 : pos + 13], "little")
        raw_events.append(data[pos : pos + size])
        pos += size
    with serving(event_packets(raw_events), version="8.0.36") as server:
        source = MysqlBinlogSource(server.address, "u", "p", schema_fallback=False, read_timeout=5.0)
        events = list(source.dump(DumpRequest(FILE, 4, blocking=False)))
        source.close()
    assert _row_changes(events) == _EXPECTED_ROWS


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (lambda inner: M.transaction_payload(inner)[:-3] + b"\x00\x00\x00", "compressed transaction"),
        (lambda inner: M.transaction_payload(inner[:-1]), "does not end with its commit"),
        (lambda inner: M.transaction_payload([*inner[:-1], inner[-1][:-2]]), "payload"),
        (
            lambda inner: M.transaction_payload(
                [M.event(P.TRANSACTION_PAYLOAD_EVENT, M.transaction_payload(inner), 0, checksum=False)]
            ),
            "inside a compressed",
        ),
        (lambda inner: M.lenenc(2) + M.lenenc(1) + M.lenenc(7) + M.lenenc(0) + b"x", "compression type 7"),
        (lambda inner: M.lenenc(1) + M.lenenc(1) + M.lenenc(99) + M.lenenc(0) + b"x", "its header says 99"),
    ],
)
def test_broken_payloads_are_parse_errors_naming_the_event(body: Any, message: str) -> None:
    parser = _parser()
    with pytest.raises(ParseError, match=message) as caught:
        event = _parse(parser, P.TRANSACTION_PAYLOAD_EVENT, body(_inner_transaction(1)), 5000)
        list(parser.expand(event))  # type: ignore[arg-type]
    assert f"{FILE}:" in str(caught.value)


# -- partial JSON updates ----------------------------------------------------------------------------------------

DOCS = [("id", T_LONG, b"", False), ("doc", T_JSON, b"\x04", True), ("other", T_JSON, b"\x04", True)]
BEFORE = {"a": 1, "b": [1, 2, 3], "c": {"d": "x"}, "key with space": True}


def _partial_update(diff: bytes, *, before: Any = BEFORE, value_options: int = 1, partial_bits: int = 0b01) -> bytes:
    before_doc = b"\x02" if before is None else b"\x00" + M.blob(M.json_doc(before))
    before_image = before_doc[:1] + struct.pack("<i", 1) + before_doc[1:] + M.blob(M.json_doc([1]))
    after_image = M.lenenc(value_options)
    if value_options:
        after_image += bytes([partial_bits])
    after_image += b"\x00" + struct.pack("<i", 1)
    after_image += diff if partial_bits & 1 else M.blob(M.json_doc({"full": "document"}))
    after_image += M.blob(M.json_doc([2]))
    return M.rows_v2(71, 3, before_image + after_image, update=True)


def _partial(diff: bytes, **kw: Any) -> RowsEvent:
    parser = _parser()
    _parse(parser, P.TABLE_MAP_EVENT, M.table_map(71, "shop", "docs", DOCS))
    event = _parse(parser, P.PARTIAL_UPDATE_ROWS_EVENT, _partial_update(diff, **kw), 2000)
    assert isinstance(event, RowsEvent)
    return event


def test_a_partial_json_update_yields_the_whole_document() -> None:
    diff = M.json_diff(
        (M.REPLACE, "$.a", 5),
        (M.INSERT, "$.b[1]", 9),
        (M.REMOVE, "$.c.d", None),
        (M.INSERT, "$.e", "new"),
        (M.REPLACE, "$.b[last]", 7),
        (M.REPLACE, '$."key with space"', {"nested": [Decimal("1.50")]}),
    )
    event = _partial(diff)
    assert event.event_type is EventType.UPDATE
    (row,) = event.rows
    assert row.before == (1, BEFORE, [1])
    expected = {"a": 5, "b": [1, 9, 2, 7], "c": {}, "key with space": {"nested": [Decimal("1.50")]}, "e": "new"}
    assert row.after == (1, expected, [2])
    assert BEFORE == {"a": 1, "b": [1, 2, 3], "c": {"d": "x"}, "key with space": True}  # the before image is intact
    # MySQL orders an object's members by their names' length, then bytes: the inserted "e" before "key with space"
    assert json_text(row.after[1]) == (
        '{"a": 5, "b": [1, 9, 2, 7], "c": {}, "e": "new", "key with space": {"nested": [1.50]}}'
    )


def test_a_partial_update_event_without_diffs_holds_full_images() -> None:
    event = _partial(b"", value_options=0, partial_bits=0)
    assert event.rows[0].after == (1, {"full": "document"}, [2])


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"diff": M.json_diff((M.REPLACE, "$.missing", 1))}, "does not apply to the document"),
        ({"diff": M.json_diff((M.INSERT, "$.a", 1))}, "does not apply"),
        ({"diff": M.json_diff((M.REMOVE, "$.b[7]", None))}, "does not apply"),
        ({"diff": M.json_diff((M.REPLACE, "$", 1))}, "whole document"),
        ({"diff": M.json_diff((M.REPLACE, "$.a[*]", 1))}, "unsupported array leg"),
        ({"diff": M.json_diff((M.REPLACE, "$.a", 1)), "before": None}, "not SQL NULL"),
        ({"diff": M.json_diff((M.REPLACE, "$.a", 1)), "value_options": 3}, "binlog_row_value_options"),
        ({"diff": b"\x05\x00\x00\x00\x07\x03$.a"}, "operation 7"),
    ],
)
def test_a_partial_update_that_cannot_apply_is_a_parse_error(kw: dict[str, Any], message: str) -> None:
    with pytest.raises(ParseError, match=rf"PARTIAL_UPDATE_ROWS_EVENT of shop\.docs at {FILE}:\d+: .*{message}"):
        _partial(**kw)


# -- MySQL binary JSON ---------------------------------------------------------------------------------------------

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(1 << 63), (1 << 64) - 1),
    st.sampled_from([-(1 << 15), (1 << 15) - 1, 1 << 15, (1 << 16) - 1, 1 << 16, -(1 << 31), (1 << 32) - 1, 1 << 63]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
    st.integers(0, 30).flatmap(
        lambda places: st.decimals(-(10**30), 10**30, allow_nan=False, allow_infinity=False, places=places)
    ),
    st.dates(min_value=dt.date(1000, 1, 1)),
    st.datetimes(min_value=dt.datetime(1000, 1, 1)),
    st.timedeltas(min_value=-dt.timedelta(hours=838), max_value=dt.timedelta(hours=838)),
    st.builds(JsonOpaque, st.sampled_from([13, 16, 252, 254, 255]), st.binary(max_size=20)),
)
_documents = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=6), st.dictionaries(st.text(max_size=10), inner, max_size=6)),
    max_leaves=30,
)


def _same(a: Any, b: Any) -> bool:
    """Equal values of equal types (True is not 1, 1.0 is not 1, Decimal('1.50') is not Decimal('1.5'))."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Decimal):
        return a.as_tuple() == b.as_tuple() or (a == 0 and b == 0)
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


@settings(max_examples=300, deadline=None)
@given(value=_documents, large=st.booleans())
def test_binary_json_round_trips_every_value_type(value: Any, large: bool) -> None:
    decoded = read_mysql_json(M.json_doc(value, large=large))
    assert _same(decoded, value), (decoded, value)
    json_text(decoded)  # every decoded value renders as MySQL's JSON text


def test_binary_json_opaque_values_and_their_text() -> None:
    doc = {
        "price": Decimal("-12345678901234567890.123456789012345678"),
        "day": dt.date(2024, 2, 29),
        "at": dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
        "took": -dt.timedelta(hours=838, minutes=59, seconds=59),
        "bits": JsonOpaque(16, b"\x01\x02"),
    }
    decoded = read_mysql_json(M.json_doc(doc))
    assert _same(decoded, doc)
    assert json_text(decoded) == (
        '{"price": -12345678901234567890.123456789012345678, "day": "2024-02-29", '
        '"at": "9999-12-31 23:59:59.999999", "took": "-838:59:59.000000", "bits": "base64:type16:AQI="}'
    )
    zero_date = b"\x0f\x0a\x08" + bytes(8)  # opaque DATE 0000-00-00: the text MySQL prints
    assert read_mysql_json(zero_date) == "0000-00-00"


def test_a_large_binary_json_document() -> None:
    doc = {"k" + str(i): "v" * 700 for i in range(120)}  # > 64 KiB: only the large format can hold it
    raw = M.json_doc(doc, large=True)
    assert len(raw) > 1 << 16
    assert read_mysql_json(raw) == doc


def test_binary_json_that_refers_to_one_value_over_and_over_is_refused() -> None:
    # 30 nested arrays whose two entries both point at the next array: 2**30 values from 305 bytes
    inner = b"\x00\x00\x04\x00"  # []
    for _ in range(30):
        body_len = 4 + 2 * 3
        inner = struct.pack("<HH", 2, body_len + len(inner)) + (b"\x02" + struct.pack("<H", body_len)) * 2 + inner
    with pytest.raises(ValueError, match="refers to its values more often"):
        read_mysql_json(b"\x02" + inner)


def test_binary_json_nesting_is_limited_to_mysqls_depth() -> None:
    assert read_mysql_json(M.json_doc(_nested(100))) == _nested(100)
    with pytest.raises(ValueError, match="deeper than 100"):
        read_mysql_json(M.json_doc(_nested(101)))


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@settings(max_examples=400, deadline=None)
@given(value=_documents, data=st.data())
def test_corrupt_binary_json_raises_value_error_only(value: Any, data: st.DataObject) -> None:
    raw = bytearray(M.json_doc(value))
    for _ in range(data.draw(st.integers(1, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    with contextlib.suppress(ValueError):  # the row decoder turns it into a ParseError naming the event
        read_mysql_json(bytes(raw))


# -- VECTOR ----------------------------------------------------------------------------------------------------------


def test_vector_columns_read_as_lists_of_floats() -> None:
    parser = _parser()
    table = M.table_map(72, "ml", "items", [("id", T_LONG, b"", False), ("embedding", T_VECTOR, b"\x04", True)])
    tm = _parse(parser, P.TABLE_MAP_EVENT, table)
    column = tm.table_schema.columns[1]  # type: ignore[attr-defined]
    assert (column.name, column.mysql_type) == ("embedding", "vector")
    values = [1.5, -2.25, 3.4028234663852886e38, 0.0]
    image = b"\x00" + struct.pack("<i", 1) + M.blob(struct.pack("<4f", *values))
    image += b"\x02" + struct.pack("<i", 2)  # a NULL vector
    rows = _parse(parser, P.WRITE_ROWS_EVENT_V2, M.rows_v2(72, 2, image), 2000)
    assert [r.after for r in rows.rows] == [(1, values), (2, None)]  # type: ignore[attr-defined]
    bad = b"\x00" + struct.pack("<i", 3) + M.blob(b"\x00\x00\x80\x3f\x00")
    with pytest.raises(ParseError, match=r"WRITE_ROWS_EVENT_V2 of ml\.items at .*a multiple of 4"):
        _parse(parser, P.WRITE_ROWS_EVENT_V2, M.rows_v2(72, 2, bad), 3000)


# -- GTIDs -----------------------------------------------------------------------------------------------------------


def test_mysql8_gtid_events_and_previous_gtids() -> None:
    parser = _parser()
    gtid = _parse(parser, P.GTID_LOG_EVENT, M.gtid_body(SOURCE, 42))
    assert isinstance(gtid, GtidEvent) and gtid.gtid == f"{SOURCE}:42" and not gtid.mariadb
    tagged = _parse(parser, P.GTID_TAGGED_LOG_EVENT, M.tagged_gtid_body(SOURCE, "Batch_7", 1 << 40), 1100)
    assert isinstance(tagged, GtidEvent) and tagged.gtid == f"{SOURCE}:batch_7:{1 << 40}"
    text = f"{SOURCE}:1-41:43:batch_7:1-5,4e11fa47-71ca-11e1-9e33-c80aa9429562:tb:10"
    prev = _parse(parser, P.PREVIOUS_GTIDS_LOG_EVENT, encode_mysql_gtid_set(text), 1200)
    assert isinstance(prev, GtidSetEvent) and prev.gtid_set == text
    anonymous = _parse(parser, P.ANONYMOUS_GTID_LOG_EVENT, M.gtid_body(uuid.UUID(int=0), 1), 1300)
    assert isinstance(anonymous, IgnoredEvent)


def test_tagged_gtids_join_the_executed_set() -> None:
    executed = GtidSet(f"{SOURCE}:1-41:batch_7:1-5")
    executed.add(f"{SOURCE}:42")
    executed.add(f"{SOURCE}:batch_7:6")
    executed.add(f"{SOURCE}:other:1")
    assert str(executed) == f"{SOURCE}:1-42:batch_7:1-6:other:1"
    assert decode_mysql_gtid_set(encode_mysql_gtid_set(str(executed))) == str(executed)


@given(
    st.lists(
        st.tuples(
            st.uuids(),
            st.sampled_from(["", "a", "tag_1", "_x" * 16]),
            st.lists(st.tuples(st.integers(1, 1 << 40), st.integers(0, 1000)), min_size=1, max_size=4),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_gtid_sets_round_trip_through_their_binary_form(entries: list[tuple[uuid.UUID, str, list[Any]]]) -> None:
    executed = GtidSet(mariadb=False)
    for source, tag, spans in entries:
        for first, extra in spans:
            for gno in (first, first + extra):
                executed.add(f"{source}:{tag}:{gno}" if tag else f"{source}:{gno}")
    text = str(executed)
    assert decode_mysql_gtid_set(encode_mysql_gtid_set(text)) == text
    assert str(GtidSet(text)) == text


@pytest.mark.parametrize(
    ("type_code", "body", "message"),
    [
        (P.GTID_LOG_EVENT, M.gtid_body(SOURCE, 0), "GTID number 0"),
        (P.GTID_LOG_EVENT, M.gtid_body(SOURCE, 1)[:20], "GTID event body of 20 bytes"),
        (P.GTID_TAGGED_LOG_EVENT, M.tagged_gtid_body(SOURCE, "bad-tag", 1), "malformed GTID tag"),
        (P.GTID_TAGGED_LOG_EVENT, M.tagged_gtid_body(SOURCE, "t", 5)[:12], "runs past the event"),
        (P.PREVIOUS_GTIDS_LOG_EVENT, struct.pack("<Q", 1 << 40), "sources in 0 bytes"),
        (P.PREVIOUS_GTIDS_LOG_EVENT, struct.pack("<Q", 7 << 56), "unknown GTID set format 7"),
    ],
)
def test_malformed_gtid_events_are_parse_errors(type_code: int, body: bytes, message: str) -> None:
    with pytest.raises(ParseError, match=rf"{P.event_name(type_code)} at {FILE}:\d+: .*{message}"):
        _parse(_parser(), type_code, body)


# -- the event switch ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("type_code", "flags", "outcome"),
    [
        (99, 0, "unknown binlog event type 99 .* not flagged ignorable"),
        (99, P.LOG_EVENT_IGNORABLE_F, IgnoredEvent),
        (P.INCIDENT_EVENT, 0, "INCIDENT_EVENT .*changes may be missing"),
        (P.CREATE_FILE_EVENT, 0, "LOAD DATA events of servers before 5.0.3"),
        (P.BEGIN_LOAD_QUERY_EVENT, 0, IgnoredEvent),
        (P.PRE_GA_WRITE_ROWS_EVENT, 0, "pre-GA"),
        (P.XA_PREPARE_LOG_EVENT, 0, IgnoredEvent),
        (P.ROWS_QUERY_LOG_EVENT, P.LOG_EVENT_IGNORABLE_F, IgnoredEvent),
        (P.TRANSACTION_CONTEXT_EVENT, 0, IgnoredEvent),
    ],
)
def test_event_types_are_refused_or_ignored_by_name(type_code: int, flags: int, outcome: Any) -> None:
    raw = M.event(type_code, b"\x00" * 12, 1000, flags=flags)
    if isinstance(outcome, str):
        with pytest.raises(ParseError, match=rf"{outcome}") as caught:
            _parser().parse(raw)
        assert f"{FILE}:" in str(caught.value)
    else:
        assert isinstance(_parser().parse(raw), outcome)


def test_a_transaction_payload_is_never_ignored_by_the_position_finder(tmp_path: Path) -> None:
    """``decode_rows=False`` dumps (start-position searches) still see the compressed transaction's BEGIN and XID."""
    data, offsets = _compressed_file()
    (tmp_path / FILE).write_bytes(data)
    source = LocalBinlogSource(tmp_path)
    source.open()
    events = list(source.dump(DumpRequest(FILE, 4, blocking=False, decode_rows=False)))
    assert [e.next_offset for e in events if isinstance(e, XidEvent)] == [offsets[3], offsets[5]]
    assert sum(isinstance(e, QueryEvent) and e.sql == "BEGIN" for e in events) == 2
    assert not any(isinstance(e, RowsEvent) for e in events)
