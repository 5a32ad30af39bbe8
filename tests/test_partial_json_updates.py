"""MySQL's partial JSON updates (``PARTIAL_UPDATE_ROWS_EVENT``, ``binlog_row_value_options=PARTIAL_JSON``) whose
before image does not carry the document (``binlog_row_image`` MINIMAL / NOBLOB): the after image holds the column
as ``ABSENT`` and the row carries its diffs (``RowData.diffs`` / ``json_diffs()``), in the object and the columnar
decoders, through an Instance, the field filter and every change-row form; and the diffs' semantics as MySQL's
``apply_json_diffs`` has them.

The events are built byte by byte from MySQL's layout (:mod:`partial_json_binlog`), the table and rows those of
``json.binlog.000001`` in rust_mysql_common's test data. That project's test (``binlog_event_roundtrip``) reads the
file's event into ``BinlogValue::JsonDiff`` values -- per row ``REPLACE $.age`` to 26, 34, 42 (and again), and the
generated columns ``name`` / ``age`` -- and writes it back byte for byte; the same values are asserted here, and the
event built here is the file's own bytes. With ``PYCANAL_PEER_BINLOGS`` naming a directory that holds the file (it
is never committed), the file itself is decoded too.
"""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path
from typing import Any

import mysql8_events as M
import partial_json_binlog as B
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from canal.config import InstanceConfig, MasterConfig
from canal.errors import ParseError
from canal.filter import FieldFilter
from canal.instance import Instance
from canal.mysql_json import (
    JsonDiff,
    JsonDiffError,
    JsonDiffOperation,
    apply_json_diffs,
    json_text,
    read_json_text,
)
from canal.parse.events import RowsEvent
from canal.parse.mysql import EventDecoder
from canal.parse.mysql import packets as P
from canal.protocol import ABSENT, ColumnarRows, Entry, EntryType, Rows

FILE = "json.binlog.000001"
REPLACE, INSERT, REMOVE = JsonDiffOperation.REPLACE, JsonDiffOperation.INSERT, JsonDiffOperation.REMOVE


def _decode(body: bytes, type_code: int = P.PARTIAL_UPDATE_ROWS_EVENT) -> RowsEvent:
    decoder = EventDecoder(FILE, verify_checksum=True)
    decoder.parse(M.fde(version="8.0.22"))
    decoder.parse(M.event(P.TABLE_MAP_EVENT, B.table_map(), 3691))
    event = decoder.parse(M.event(type_code, body, B.PEER_OFFSET + 19 + len(body) + 4))
    assert isinstance(event, RowsEvent)
    return event


NAMES = ("id", "json_col", "name", "age")


def _peer_expected(rows: Rows, names: tuple[str, ...] = NAMES) -> None:
    """The rows of json.binlog.000001's partial update, as its project reads them (``names``: the columns' names,
    which the file's table map does not log)."""
    id_name, json_name, name_name, age_name = names
    assert len(rows) == 6
    for row, (id_, diffs, name, age) in zip(rows, B.PEER_ROWS, strict=True):
        assert row.before == (id_, ABSENT, ABSENT, ABSENT)
        assert row.after == (ABSENT, ABSENT, name, age)  # json_col is a diff: not in the after image's values
        assert row.diffs == {1: (JsonDiff(REPLACE, "$.age", diffs[0][2]),)}
        assert row.json_diffs() == {json_name: (JsonDiff(REPLACE, "$.age", age),)}
        assert row.after_dict() == {name_name: name, age_name: age}  # never the column's value, nor NULL
        assert row.after_absent == (id_name, json_name)
        assert [c.name for c in row.after_columns] == [name_name, age_name]
        assert row.updated_names() == [json_name, name_name, age_name]
        assert row.key() == ((id_,) if names == NAMES else ())  # the file's table map names no primary key
        # the generated column age is json_col->'$.age': the value the diff sets
        assert row.diffs[1][0].value == row.after[3]


def test_the_peer_files_partial_update_decodes_to_its_diffs() -> None:
    event = _decode(B.minimal_update(B.PEER_ROWS))
    assert event.table.full_name == "mysql.t"
    _peer_expected(event.rows)
    assert event.rows.absent_of("after") == [(0, 1)] * 6
    assert event.rows.absent("before") == (1, 2, 3)


PEER_DIR = os.environ.get("PYCANAL_PEER_BINLOGS")


@pytest.mark.skipif(
    not PEER_DIR or not (Path(PEER_DIR) / FILE).is_file(),
    reason="PYCANAL_PEER_BINLOGS does not name a directory holding json.binlog.000001 (rust_mysql_common's test data)",
)
def test_the_peer_file_itself() -> None:
    data = (Path(str(PEER_DIR)) / FILE).read_bytes()
    decoder = EventDecoder(FILE, verify_checksum=True)
    pos, found = 4, []
    while pos < len(data):
        size = int.from_bytes(data[pos + 9 : pos + 13], "little")
        raw = data[pos : pos + size]
        event = decoder.parse(raw)
        if pos == B.PEER_OFFSET:
            assert raw[4] == P.PARTIAL_UPDATE_ROWS_EVENT
            assert raw[19:-4] == B.minimal_update(B.PEER_ROWS)  # the event built here is the file's, byte for byte
        if isinstance(event, RowsEvent):
            found.append((pos, event))
        pos += size
    (partial,) = [event for at, event in found if at == B.PEER_OFFSET]
    _peer_expected(partial.rows, tuple(f"UNKNOWN_COL{i}" for i in range(4)))  # no names in its table map
    # the update before it (binlog_row_image=FULL) logs both documents whole: age 24 -> 25 for the first row
    before_it = found[-2][1]
    assert before_it.rows[0].after[1] == {"age": 25, "data": "xxxxxxxxxx", "name": "Joe"}


def test_a_row_logged_whole_beside_a_diff() -> None:
    """One event, two rows: the first logs its document whole (its partial bit clear), the second a diff."""
    doc = {"age": 1, "tags": ["a"]}
    event = _decode(B.minimal_update([(1, B.Whole(doc), "x", 1), (2, [(M.INSERT, "$.tags[0]", "z")], "y", 2)]))
    rows = event.rows
    first, second = rows
    assert first.after == (ABSENT, doc, "x", 1) and first.diffs is None and first.json_diffs() == {}
    assert second.after == (ABSENT, ABSENT, "y", 2)
    assert second.json_diffs() == {"json_col": (JsonDiff(INSERT, "$.tags[0]", "z"),)}
    assert rows.absent_of("after") == [(0,), (0, 1)]
    # the rows keep their diffs when taken apart, put together, sliced and pickled
    assert Rows.of(list(rows)) == rows
    assert rows[1:].diffs == (second.diffs,)
    assert pickle.loads(pickle.dumps(rows)) == rows
    assert list(pickle.loads(pickle.dumps(rows)))[1].diffs == second.diffs


def test_the_field_filter_moves_diffs_with_their_columns() -> None:
    event = _decode(B.minimal_update(B.PEER_ROWS[:2]))
    kept = FieldFilter.parse("mysql.t:id/json_col/age").project_rows(event.table, event.rows)
    assert [r.json_diffs() for r in kept] == [{"json_col": (JsonDiff(REPLACE, "$.age", age),)} for age in (26, 34)]
    assert [r.after for r in kept] == [(ABSENT, ABSENT, 26), (ABSENT, ABSENT, 34)]
    dropped = FieldFilter.parse("mysql.t:id/name").project_rows(event.table, event.rows)
    assert [r.diffs for r in dropped] == [None, None]
    assert isinstance(dropped, Rows) and dropped.diffs is None


def test_a_full_before_image_takes_the_diff() -> None:
    """binlog_row_image=FULL: the decoder applies the diffs, as MySQL's apply_json_diffs, to the before image's
    document; an inserted member takes MySQL's place for it (by its name's length, then bytes)."""
    before = (7, {"age": 3, "name": "Al", "tags": ["a", "b"]}, "Al", 3)
    diffs = [
        (M.REPLACE, "$.age", 4),
        (M.INSERT, "$.zz", True),
        (M.INSERT, "$.tags[last]", "c"),
        (M.REMOVE, "$.name", None),
    ]
    (row,) = _decode(B.full_update([(before, diffs, "Al", 4)])).rows
    assert row.diffs is None
    assert row.after[1] == {"age": 4, "zz": True, "tags": ["a", "c", "b"]}
    assert json_text(row.after[1]) == '{"zz": true, "age": 4, "tags": ["a", "c", "b"]}'


@pytest.mark.parametrize(
    ("diffs", "message"),
    [
        ([(M.REPLACE, "$", 1)], "whole document"),
        ([(M.REPLACE, "$.a[*]", 1)], "unsupported array leg"),
        ([(M.REPLACE, "$.*", 1)], "wildcard"),
    ],
)
def test_a_diff_no_update_can_log_is_a_parse_error(diffs: list[Any], message: str) -> None:
    with pytest.raises(ParseError, match=rf"PARTIAL_UPDATE_ROWS_EVENT of mysql\.t at {FILE}:\d+: .*{message}"):
        _decode(B.minimal_update([(1, diffs, "x", 1)]))


def _instance_rows(tmp_path: Path, by_column: bool) -> list[Any]:
    binlogs = tmp_path / ("columns" if by_column else "objects")
    binlogs.mkdir()
    docs = [(i, {"age": 20 + i, "name": n}, n, 20 + i) for i, n in ((1, "Joe"), (2, "Sue"))]
    (binlogs / "binlog.000001").write_bytes(
        B.binlog_file(
            [
                [(P.WRITE_ROWS_EVENT_V2, B.insert(docs))],
                [(P.PARTIAL_UPDATE_ROWS_EVENT, B.minimal_update([(1, [(M.REPLACE, "$.age", 30)], "Joe", 30)]))],
            ]
        )
    )
    config = InstanceConfig(
        destination="partial-json",
        master=MasterConfig(address=f"file://{binlogs}", journal_name="binlog.000001", position=4),
    )
    inst = Instance(config)
    inst.decode_rows_by_column(by_column)  # before the parser starts: every rows event is read in this form
    with inst:
        entries: list[Entry] = []
        while len([e for e in entries if e.entry_type is EntryType.TRANSACTIONEND]) < 2:
            entries.extend(inst.get(100, timeout=10.0, linger=0.05).entries)
    changes = [e.row_change for e in entries if e.entry_type is EntryType.ROWDATA and e.row_change is not None]
    # the columnar decoder reads the insert; a partial update, the object decoder
    assert [isinstance(rc.rows, ColumnarRows) for rc in changes] == [by_column, False]
    return [row for rc in changes for row in rc.rows]


@pytest.mark.parametrize("by_column", [False, True], ids=["objects", "columns"])
def test_an_instance_delivers_the_diffs(tmp_path: Path, by_column: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through an Instance reading a MySQL 8 binlog file, by the object decoder and by the columnar one (which
    reads a partial update with the object decoder)."""
    # every table by columns when they are asked (the parser decodes a table of wide rows as tuples otherwise)
    monkeypatch.setattr("canal.parse.mysql.binlog.COLUMNAR_MIN_ROWS", 0)
    inserted_1, inserted_2, updated = _instance_rows(tmp_path, by_column)
    assert inserted_1.after == (1, {"age": 21, "name": "Joe"}, "Joe", 21)
    assert inserted_2.after == (2, {"age": 22, "name": "Sue"}, "Sue", 22)
    assert updated.before_dict() == {"id": 1}
    assert updated.after_dict() == {"name": "Joe", "age": 30}
    assert updated.json_diffs() == {"json_col": (JsonDiff(REPLACE, "$.age", 30),)}


# -- the change-row forms --------------------------------------------------------------------------------------------


def test_change_rows_and_typed_batches_carry_the_diffs_apart() -> None:
    pytest.importorskip("pyarrow")
    from canal.lake.forms.changes import entries_to_batch
    from canal.lake.forms.typed_batch import entries_to_typed
    from canal.lake.forms.variant_changes import entries_to_variant_batch
    from canal.protocol import Header, RowChange

    doc = {"age": 1}
    rows = _decode(B.minimal_update([(1, B.Whole(doc), "x", 1), (2, [(M.REMOVE, "$.age", None)], "y", 2)])).rows
    header = Header("binlog.000001", 4, 1, 0, "mysql", "t", rows_event_type(), 10)
    entry = Entry(header, EntryType.ROWDATA, RowChange(rows_event_type(), rows, table=rows.table))
    batch = entries_to_batch([entry], "d", 1)
    got = batch.select(["after", "after_absent", "json_diffs"]).to_pylist()
    assert got == [
        {"after": '{"json_col":"{\\"age\\": 1}","name":"x","age":"1"}', "after_absent": '["id"]', "json_diffs": None},
        {
            "after": '{"name":"y","age":"2"}',
            "after_absent": '["id","json_col"]',
            "json_diffs": '{"json_col":[["REMOVE","$.age",null]]}',
        },
    ]
    typed = entries_to_typed([entry], "d", 1)
    meta = typed.changes.select(["after_absent", "json_diffs"]).to_pylist()
    assert meta == [{"after_absent": r["after_absent"], "json_diffs": r["json_diffs"]} for r in got]
    after = typed.images[typed.changes.column("layout")[0].as_py()].column("after").to_pylist()
    assert after[1]["json_col"] is None  # a null cell the change row's after_absent names: no value
    variant = entries_to_variant_batch([entry], "d", 1)
    assert variant.column("json_diffs").to_pylist() == [r["json_diffs"] for r in got]
    assert json.loads(variant.column("after_absent").to_pylist()[1]) == ["id", "json_col"]


def rows_event_type() -> Any:
    from canal.protocol import EventType

    return EventType.UPDATE


# -- the diffs' semantics ---------------------------------------------------------------------------------------------


DOC = {"a": 1, "b": [10, 20, 30], "c": {"d": None}}


@pytest.mark.parametrize(
    ("diff", "expected"),
    [
        (JsonDiff(REPLACE, "$.a", [1]), {"a": [1], "b": [10, 20, 30], "c": {"d": None}}),
        (JsonDiff(REPLACE, "$.b[last]", 0), {"a": 1, "b": [10, 20, 0], "c": {"d": None}}),
        (JsonDiff(REPLACE, "$.b[last-2]", 0), {"a": 1, "b": [0, 20, 30], "c": {"d": None}}),
        (JsonDiff(REPLACE, '$."c".d', 5), {"a": 1, "b": [10, 20, 30], "c": {"d": 5}}),
        (JsonDiff(INSERT, "$.b[1]", 15), {"a": 1, "b": [10, 15, 20, 30], "c": {"d": None}}),
        (JsonDiff(INSERT, "$.b[9]", 40), {"a": 1, "b": [10, 20, 30, 40], "c": {"d": None}}),  # past the end: appended
        (JsonDiff(INSERT, "$.b[last-9]", 0), {"a": 1, "b": [0, 10, 20, 30], "c": {"d": None}}),  # before the first
        (JsonDiff(INSERT, "$.c.e", "x"), {"a": 1, "b": [10, 20, 30], "c": {"d": None, "e": "x"}}),
        (JsonDiff(REMOVE, "$.b[0]", None), {"a": 1, "b": [20, 30], "c": {"d": None}}),
        (JsonDiff(REMOVE, "$.c", None), {"a": 1, "b": [10, 20, 30]}),
    ],
)
def test_each_operation_applies_as_mysql_applies_it(diff: JsonDiff, expected: Any) -> None:
    assert apply_json_diffs(DOC, [diff]) == expected
    assert DOC == {"a": 1, "b": [10, 20, 30], "c": {"d": None}}  # the document given is not changed


@pytest.mark.parametrize(
    "diff",
    [
        JsonDiff(REPLACE, "$.z", 1),  # no such member
        JsonDiff(REPLACE, "$.b[3]", 1),  # no such cell
        JsonDiff(REPLACE, "$.b[last-3]", 1),  # before the first cell
        JsonDiff(REPLACE, "$.a.x", 1),  # a scalar has no members
        JsonDiff(REPLACE, "$.b.x", 1),  # an array has no members
        JsonDiff(INSERT, "$.a", 2),  # a member that is there
        JsonDiff(INSERT, "$.z.y", 2),  # under a member that is not
        JsonDiff(REMOVE, "$.z", None),
        JsonDiff(REMOVE, "$.b[3]", None),
        JsonDiff(REMOVE, "$", None),
    ],
)
def test_a_diff_that_does_not_apply_is_refused(diff: JsonDiff) -> None:
    with pytest.raises(JsonDiffError):
        apply_json_diffs(DOC, [diff])


def test_a_diff_applies_to_no_scalar_nor_null() -> None:
    for doc in (None, 1, "x"):
        with pytest.raises(JsonDiffError, match="applies to an object or an array"):
            apply_json_diffs(doc, [JsonDiff(REPLACE, "$[0]", 1)])


def test_members_keep_mysqls_order() -> None:
    doc = apply_json_diffs({"b": 1, "aaa": 2}, [JsonDiff(INSERT, "$.cc", 3), JsonDiff(INSERT, "$.a", 0)])
    assert list(doc) == ["a", "b", "cc", "aaa"]
    # two UTF-8 bytes each: compared by their bytes, "a" (0x61) before "é" (0xc3 0xa9)
    assert list(apply_json_diffs({"é": 1}, [JsonDiff(INSERT, "$.ab", 2)])) == ["ab", "é"]


def test_diffs_round_trip_as_change_rows_carry_them() -> None:
    import datetime as dt
    from decimal import Decimal

    diffs = [JsonDiff(REPLACE, "$.a", {"x": [Decimal("1.50"), dt.date(2024, 1, 2)]}), JsonDiff(REMOVE, "$.b", None)]
    lists = [d.to_list() for d in diffs]
    assert lists == [["REPLACE", "$.a", '{"x": [1.50, "2024-01-02"]}'], ["REMOVE", "$.b", None]]
    back = [JsonDiff.from_list(item) for item in json.loads(json.dumps(lists))]
    assert [json_text(d.value) for d in back] == ['{"x": [1.50, "2024-01-02"]}', "null"]
    for bad in (["SET", "$.a", "1"], ["REMOVE", "$.a", "1"], ["REPLACE", "$.a", None], ["REPLACE", "a", "1"]):
        with pytest.raises(ValueError):
            JsonDiff.from_list(bad)


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(1 << 63), (1 << 64) - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=10),
    st.decimals(-(10**20), 10**20, allow_nan=False, allow_infinity=False, places=3),
)
_documents = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=4)),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(_documents)
def test_a_documents_text_reads_back_to_the_same_text(doc: Any) -> None:
    """The mirror holds a JSON cell as MySQL prints it; read back, a diff applied and printed again, every value
    untouched prints as it did (a DECIMAL keeps its scale, a DOUBLE its digits)."""
    text = json_text(doc)
    assert json_text(read_json_text(text)) == text


# json.binlog.000001's PARTIAL_UPDATE_ROWS_EVENT at 3750 (its body: no header, no checksum), as the file holds it
PEER_BODY = bytes.fromhex(
    "7700000000000100020004010e"
    "00010000000101000b0000000005242e61676503051a0003004a6f651a000000"
    "00020000000101000b0000000005242e6167650305220003005375652200000000030000000101000b0000000005242e61676503052a"
    "000400506574652a00000000040000000101000b0000000005242e61676503051a0003004a6f651a00000000050000000101000b0000"
    "000005242e6167650305220003005375652200000000060000000101000b0000000005242e61676503052a000400506574652a000000"
)


def test_the_layout_built_here_is_the_files() -> None:
    assert B.minimal_update(B.PEER_ROWS) == PEER_BODY


def test_canal_tail_shows_the_diff_not_a_value() -> None:
    from canal.cli.tail import json_line, row_line
    from canal.protocol import EventType, Header, RowChange

    rows = _decode(B.minimal_update([(1, [(M.REPLACE, "$.age", 26), (M.REMOVE, "$.x", None)], "Joe", 26)])).rows
    header = Header("binlog.000001", 3750, 1, 1_700_000_000_000, "mysql", "t", EventType.UPDATE, 230)
    entry = Entry(header, EntryType.ROWDATA, RowChange(EventType.UPDATE, rows, table=rows.table))
    (row,) = rows
    assert row_line(entry, row, utc=True) == (
        "2023-11-14 22:13:20 UPDATE mysql.t id=1 json_col: REPLACE $.age 26; REMOVE $.x name: -> 'Joe' age: -> 26"
    )
    doc = json.loads(json_line("d", entry, row))
    assert doc["after"] == {"name": "Joe", "age": 26}
    assert doc["json_diffs"] == {"json_col": [["REPLACE", "$.age", "26"], ["REMOVE", "$.x", None]]}
