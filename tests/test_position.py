"""Positions: a total order by journal number then offset, and stable JSON forms (canal's included)."""

from __future__ import annotations

import json

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from canal.errors import PositionError
from canal.position import EntryPosition, LogIdentity, LogPosition, PositionRange, SnapshotCursor, journal_number

journals = st.one_of(
    st.none(),
    st.integers(0, 999_999).map(lambda n: f"mysql-bin.{n:06d}"),
    st.integers(0, 99).map(lambda n: f"binlog.{n}"),
)
entry_positions = st.builds(
    EntryPosition,
    journal_name=journals,
    position=st.one_of(st.none(), st.integers(0, 2**40)),
    timestamp=st.one_of(st.none(), st.integers(0, 2**45)),
    server_id=st.one_of(st.none(), st.integers(0, 2**32 - 1)),
    gtid=st.one_of(st.none(), st.just("0-1-5"), st.just("3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5")),
    included=st.booleans(),
)
identities = st.builds(
    LogIdentity,
    source_address=st.one_of(st.none(), st.just("127.0.0.1:3306"), st.just("db.example:13306")),
    slave_id=st.integers(-1, 2**31),
)
table_names = st.lists(st.sampled_from(["shop.orders", "shop.items", "s.t"]), min_size=1, max_size=3)
key_values = st.lists(st.one_of(st.text(max_size=5), st.binary(max_size=5)), min_size=1, max_size=3)
snapshot_cursors = st.one_of(
    st.just(SnapshotCursor(())),  # the captured tables, not listed yet
    table_names.flatmap(
        lambda tables: st.builds(
            SnapshotCursor,
            tables=st.just(tuple(tables)),
            table=st.integers(0, len(tables) - 1),
            after=st.one_of(st.none(), key_values.map(tuple)),
            rows=st.integers(0, 10**9),
        )
    ),
)
log_positions = st.builds(
    LogPosition,
    identity=identities,
    position=entry_positions,
    rows_done=st.integers(0, 10**6),
    snapshot=st.one_of(st.none(), snapshot_cursors),
)


def test_journal_number_reads_the_numeric_suffix() -> None:
    assert journal_number("mysql-bin.000042") == 42
    assert journal_number("binlog.7") == 7
    assert journal_number(None) == -1
    assert journal_number("nosuffix") == -1


def test_order_is_by_journal_number_before_name_and_offset() -> None:
    # "mysql-bin.1000000" sorts after "mysql-bin.999999" although it is smaller as text
    a = EntryPosition("mysql-bin.999999", 9_000_000)
    b = EntryPosition("mysql-bin.1000000", 4)
    assert a < b
    assert EntryPosition("mysql-bin.000001", 120) < EntryPosition("mysql-bin.000001", 121)


@given(entry_positions, entry_positions, entry_positions)
def test_entry_position_order_is_total(a: EntryPosition, b: EntryPosition, c: EntryPosition) -> None:
    # exactly one of <, ==, > holds, and it agrees with equality
    assert sum([a < b, a == b, a > b]) == 1
    assert (a <= b) == (a < b or a == b)
    if a <= b and b <= c:
        assert a <= c
    if a == b:
        assert hash(a) == hash(b)


@given(entry_positions, entry_positions)
def test_entry_order_puts_journal_number_and_offset_first(a: EntryPosition, b: EntryPosition) -> None:
    ka = (a.journal_number, a.position if a.position is not None else -1)
    kb = (b.journal_number, b.position if b.position is not None else -1)
    if ka < kb:
        assert a < b


@given(log_positions, log_positions, log_positions)
def test_log_position_order_is_total(a: LogPosition, b: LogPosition, c: LogPosition) -> None:
    assert sum([a < b, a == b, a > b]) == 1
    if a <= b and b <= c:
        assert a <= c


@given(entry_positions)
def test_entry_position_json_round_trips(p: EntryPosition) -> None:
    assert EntryPosition.from_json(p.to_json()) == p
    assert EntryPosition.from_dict(json.loads(json.dumps(p.to_dict()))) == p


@given(log_positions)
def test_log_position_json_round_trips(p: LogPosition) -> None:
    assert LogPosition.from_json(p.to_json()) == p


@given(
    entry_positions,
    entry_positions,
    st.one_of(st.none(), entry_positions),
    entry_positions,
    st.integers(0, 999),
    st.one_of(st.none(), snapshot_cursors),
)
def test_position_range_json_round_trips(
    start: EntryPosition,
    end: EntryPosition,
    ack: EntryPosition | None,
    cursor: EntryPosition,
    rows: int,
    snapshot: SnapshotCursor | None,
) -> None:
    r = PositionRange(start, end, ack, cursor, rows, snapshot=snapshot)
    assert PositionRange.from_json(r.to_json()) == r
    assert r.ack_cursor.snapshot == snapshot  # acking the batch hands its snapshot progress to the cursor


def test_reads_a_cursor_exactly_as_java_canal_writes_it() -> None:
    java = (
        '{"@type":"com.alibaba.otter.canal.protocol.position.LogPosition","identity":{"slaveId":-1,'
        '"sourceAddress":{"address":"127.0.0.1","port":3306}},"postion":{"gtid":"","included":false,'
        '"journalName":"mysql-bin.000001","position":4,"serverId":1,"timestamp":1700000000000}}'
    )
    cursor = LogPosition.from_json(java)
    assert cursor.identity == LogIdentity("127.0.0.1:3306", -1)
    assert cursor.position == EntryPosition("mysql-bin.000001", 4, 1700000000000, 1, None, False)
    assert cursor.rows_done == 0
    # and what we write has canal's shape (its misspelt "postion" key, its type tag)
    ours = json.loads(cursor.to_json())
    assert ours["@type"] == "com.alibaba.otter.canal.protocol.position.LogPosition"
    assert ours["postion"]["journalName"] == "mysql-bin.000001"
    assert ours["identity"]["sourceAddress"] == {"address": "127.0.0.1", "port": 3306}


def test_json_form_is_stable() -> None:
    # persisted cursors depend on this exact text: change it only with a migration
    p = LogPosition(LogIdentity("10.0.0.5:3306", 1234), EntryPosition("mysql-bin.000003", 1570, 1, 7, None, True), 2)
    assert p.to_json() == (
        '{"@type":"com.alibaba.otter.canal.protocol.position.LogPosition","anchorIncluded":true,"identity":'
        '{"slaveId":1234,"sourceAddress":{"address":"10.0.0.5","port":3306}},"postion":{"included":false,'
        '"journalName":"mysql-bin.000003","position":1570,"serverId":7,"timestamp":1},"rowsDone":2}'
    )
    # a cursor pycanal wrote before anchorIncluded (its postion marked included) reads the same
    before = (
        '{"@type":"com.alibaba.otter.canal.protocol.position.LogPosition","identity":{"slaveId":1234,'
        '"sourceAddress":{"address":"10.0.0.5","port":3306}},"postion":{"included":true,'
        '"journalName":"mysql-bin.000003","position":1570,"serverId":7,"timestamp":1},"rowsDone":2}'
    )
    assert LogPosition.from_json(before) == p


def test_the_cursor_canal_reads_is_never_marked_included() -> None:
    """Java canal's store hands out the event at an included cursor again, and fails when it is not in the store: a
    NullPointerException on every get (measured against canal 1.1.7: tests/test_peers_ha_mariadb.py)."""
    consumed = LogPosition(LogIdentity("10.0.0.5:3306"), EntryPosition("mysql-bin.000003", 1570, 1, 7, None, True))
    document = json.loads(consumed.to_json())
    assert document["postion"]["included"] is False and document["anchorIncluded"] is True
    with pytest.raises(PositionError, match="anchorIncluded"):
        LogPosition.from_dict({**document, "anchorIncluded": "yes"})


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        '{"journalName": 5}',
        '{"journalName": "mysql-bin.000001", "position": "x"}',
        '{"journalName": "mysql-bin.000001", "included": "yes"}',
        '{"position": true}',
    ],
)
def test_bad_entry_position_json_raises_position_error(text: str) -> None:
    with pytest.raises(PositionError):
        EntryPosition.from_json(text)


def test_bad_log_position_documents_raise_position_error() -> None:
    with pytest.raises(PositionError, match="postion"):
        LogPosition.from_json('{"identity": {}}')
    with pytest.raises(PositionError, match="rows_done"):
        LogPosition(position=EntryPosition("mysql-bin.000001", 4), rows_done=-1)
    with pytest.raises(PositionError, match="start"):
        PositionRange.from_json('{"end": {}, "cursor": {}}')


@pytest.mark.parametrize(
    "snapshot",
    [
        {"tables": "shop.orders"},
        {"tables": ["shop.orders"], "table": 1},
        {"tables": ["shop.orders"], "after": [["x", "1"]]},
        {"tables": ["shop.orders"], "after": [["b", "zz"]]},
        {"tables": ["shop.orders"], "rows": -1},
        {"tables": [], "table": 0, "after": [["s", "1"]]},
        [],
    ],
)
def test_bad_snapshot_cursors_raise_position_error(snapshot: object) -> None:
    document = {"postion": {"journalName": "mysql-bin.000001", "position": 4}, "snapshot": snapshot}
    with pytest.raises(PositionError, match="snapshot"):
        LogPosition.from_dict(document)


def test_a_cursor_without_a_snapshot_keeps_canal_s_document() -> None:
    plain = LogPosition(position=EntryPosition("mysql-bin.000001", 4))
    assert "snapshot" not in plain.to_dict()
    with_snapshot = attrs.evolve(plain, snapshot=SnapshotCursor(("shop.orders",), 0, (b"\x00", "a"), 7))
    assert with_snapshot.to_dict()["snapshot"] == {
        "tables": ["shop.orders"],
        "table": 0,
        "after": [["b", "00"], ["s", "a"]],
        "rows": 7,
    }
    assert plain < with_snapshot  # at one binlog position: progress breaks the tie
