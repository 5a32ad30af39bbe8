"""Change rows: the generated per-layout encoders against a plain model (``render_text`` per cell, ``json.dumps``):
any value in any column (the fallbacks), and columns of the values their MySQL types decode to, at their edges (the
fast branches), in inserts, updates (keys moved or not) and deletes."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("pyarrow")

from canal.lake.forms.changes import COLUMN_NAMES, arrow_schema, change_rows, entries_to_batch
from canal.lake.forms.typed_batch import SEQ_BITS
from canal.lake.key_identity import is_float_type, key_value
from canal.position import EntryPosition
from canal.protocol import ColumnMeta, Entry, EntryType, EventType, Header, RowChange, RowData, TableSchema
from canal.value_text import render_text

# MySQL types whose encoders take a fast branch, and one that does not (bit)
MYSQL_TYPES = (
    "int(11)",
    "bigint(20) unsigned",
    "varchar(20)",
    "text",
    "decimal(30,10)",
    "double",
    "float",
    "datetime(6)",
    "timestamp",
    "date",
    "bit(8)",
    "enum('a','b')",
    "blob",
    "json",
)

# any value may arrive in any column: a fast branch must fall back correctly on a surprising type
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.text(),
    st.decimals(allow_nan=False, allow_infinity=False, places=None),
    st.floats(),
    st.datetimes(),
    st.datetimes(timezones=st.just(dt.UTC)),
    st.dates(),
    st.times(),
    st.binary(max_size=8),
)
NAMES = st.text(min_size=1, max_size=6)


def model_object(names: list[str], image: tuple[Any, ...]) -> dict[str, Any]:
    return {n: None if v is None else render_text(v) for n, v in zip(names, image, strict=True)}


def model_keys(table: TableSchema, image: tuple[Any, ...]) -> dict[str, Any]:
    """The ``keys`` of an image: its key cells as text, a FLOAT / DOUBLE column's float as its key identity (-0.0 is
    the key 0.0)."""
    cells = [key_value(v) if is_float_type(c.mysql_type) else v for c, v in zip(table.columns, image, strict=True)]
    keys = {table.names[i] for i in table.key_indexes}
    return {k: v for k, v in model_object(list(table.names), tuple(cells)).items() if k in keys}


@st.composite
def layouts_and_images(draw: st.DrawFn) -> tuple[TableSchema, list[tuple[Any, ...]]]:
    names = draw(st.lists(NAMES, min_size=1, max_size=6, unique=True))
    types = [draw(st.sampled_from(MYSQL_TYPES)) for _ in names]
    keys = draw(st.lists(st.booleans(), min_size=len(names), max_size=len(names)))
    table = TableSchema(
        "s", "t", tuple(ColumnMeta(n, mysql_type=t, is_key=k) for n, t, k in zip(names, types, keys, strict=True))
    )
    images = draw(st.lists(st.tuples(*[VALUES for _ in names]), min_size=1, max_size=5))
    return table, images


def _entry(table: TableSchema, rows: list[RowData], event: EventType = EventType.UPDATE) -> Entry:
    header = Header("mysql-bin.000003", 900, 1, 1_700_000_000_000, table.schema, table.table, event, 40)
    anchor = EntryPosition("mysql-bin.000003", 800, 1_700_000_000_000, 1, None, True)
    return Entry(header, EntryType.ROWDATA, RowChange(event, rows), anchor=anchor, rows_done=len(rows))


@settings(max_examples=300, deadline=None)
@given(layouts_and_images())
def test_row_images_render_every_cell_as_canal_text(case: tuple[TableSchema, list[tuple[Any, ...]]]) -> None:
    table, images = case
    rows = [RowData(table, before=img, after=img[::-1] if len(set(map(type, img))) == 1 else img) for img in images]
    batch = entries_to_batch([_entry(table, rows)], "d", 2, 5)
    names = list(table.names)
    for row, out in zip(rows, batch.to_pylist(), strict=True):
        assert row.after is not None and row.before is not None
        assert json.loads(out["after"]) == model_object(names, row.after)
        assert json.loads(out["before"]) == model_object(names, row.before)
        assert json.loads(out["keys"]) == model_keys(table, row.after)
        assert json.loads(out["columns"]) == [[c.name, c.mysql_type, c.is_key] for c in table.columns]


# what each MySQL type decodes to, at its edges (the fast branches must give what the fallbacks give)
TYPED = {
    "bigint(20) unsigned": st.integers(min_value=0, max_value=2**64 - 1),
    "int(11)": st.integers(min_value=-(2**31), max_value=2**31 - 1),
    "year": st.integers(min_value=1901, max_value=2155),
    "varchar(20)": st.text(),
    "json": st.text(),
    "varbinary(16)": st.binary(max_size=16),
    "blob": st.binary(max_size=300),
    "enum('a','b')": st.sampled_from(["a", "b", ""]),
    "decimal(30,10)": st.decimals(
        allow_nan=False, allow_infinity=False, places=10, min_value=-(10**19), max_value=10**19
    ),
    "double": st.sampled_from([0.0, -0.0]) | st.floats(allow_nan=False),  # both zeros often: one key
    "datetime(6)": st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31, 23, 59, 59)),
    "datetime": st.datetimes().map(lambda d: d.replace(microsecond=0)) | st.just("0000-00-00 00:00:00"),
    "timestamp": st.datetimes(timezones=st.just(dt.UTC)),
    "date": st.dates() | st.just("0000-00-00"),
}


@st.composite
def typed_rows(draw: st.DrawFn) -> tuple[TableSchema, list[RowData]]:
    types = draw(st.lists(st.sampled_from(sorted(TYPED)), min_size=1, max_size=6))
    names = [f"c{i}" for i in range(len(types))]
    keys = draw(st.lists(st.booleans(), min_size=len(names), max_size=len(names)))
    table = TableSchema(
        "s", "t", tuple(ColumnMeta(n, mysql_type=t, is_key=k) for n, t, k in zip(names, types, keys, strict=True))
    )
    image = st.tuples(*[st.none() | TYPED[t] for t in types])
    shapes = st.sampled_from(["insert", "update", "delete"])
    rows = []
    for shape in draw(st.lists(shapes, min_size=1, max_size=12)):
        before = None if shape == "insert" else draw(image)
        after = None if shape == "delete" else draw(image)
        rows.append(RowData(table, before=before, after=after))
    return table, rows


@settings(max_examples=300, deadline=None)
@given(typed_rows())
def test_typed_columns_render_as_the_model(case: tuple[TableSchema, list[RowData]]) -> None:
    table, rows = case
    batch = entries_to_batch([_entry(table, rows)], "d", 1)
    assert change_rows(_entry(table, rows)) == batch.num_rows == len(rows)
    names = list(table.names)

    def keys_of(image: tuple[Any, ...]) -> dict[str, Any]:
        return model_keys(table, image)

    for row, out in zip(rows, batch.to_pylist(), strict=True):
        for field, image in (("before", row.before), ("after", row.after)):
            assert (out[field] is None) == (image is None)
            if image is not None:
                assert json.loads(out[field]) == model_object(names, image)
        expected_key = keys_of(row.after if row.after is not None else row.before)
        assert json.loads(out["keys"]) == expected_key
        moved = row.before is not None and row.after is not None and keys_of(row.before) != expected_key
        assert (out["old_keys"] is not None) == moved
        if moved:
            assert row.before is not None and json.loads(out["old_keys"]) == keys_of(row.before)


def test_rows_of_several_layouts_and_ddl_keep_their_order() -> None:
    one = TableSchema("s", "a", (ColumnMeta("id", mysql_type="int", is_key=True),))
    two = TableSchema("s", "b", (ColumnMeta("k", mysql_type="varchar(5)", is_key=True), ColumnMeta("v", "date")))
    ddl = Entry(
        Header("mysql-bin.000003", 950, 1, 1_700_000_000_000, "s", "a", EventType.ALTER, 40),
        EntryType.ROWDATA,
        RowChange(EventType.ALTER, (), sql="ALTER TABLE a ADD x INT", is_ddl=True, ddl_schema="s"),
    )
    entries = [
        _entry(one, [RowData(one, after=(1,)), RowData(one, after=(2,))], EventType.INSERT),
        _entry(two, [RowData(two, after=("x", dt.date(2024, 1, 2)))], EventType.INSERT),
        ddl,
        _entry(one, [RowData(one, before=(2,))], EventType.DELETE),
    ]
    out = entries_to_batch(entries, "d", 1).to_pylist()
    assert sum(map(change_rows, entries)) == len(out)  # what maxRowsPerTrigger counts
    assert [(r["table"], r["type"], r["keys"]) for r in out] == [
        ("a", "INSERT", '{"id":"1"}'),
        ("a", "INSERT", '{"id":"2"}'),
        ("b", "INSERT", '{"k":"x"}'),
        ("a", "ALTER", None),
        ("a", "DELETE", '{"id":"2"}'),
    ]
    assert out[2]["after"] == '{"k":"x","v":"2024-01-02"}' and out[3]["before"] is None and out[4]["after"] is None


def test_an_image_of_another_width_is_refused() -> None:
    table = TableSchema("s", "t", (ColumnMeta("id", mysql_type="int", is_key=True), ColumnMeta("v")))
    with pytest.raises(ValueError):
        entries_to_batch([_entry(table, [RowData(table, after=(1, 2, 3))], EventType.INSERT)], "d", 1)


def test_entry_fields_spread_over_rows_and_ddl_rows_stand_alone() -> None:
    t1 = TableSchema("s", "t", (ColumnMeta("id", mysql_type="int", is_key=True), ColumnMeta("x", mysql_type="double")))
    rows1 = [RowData(t1, after=(i, i / 7)) for i in range(3)]
    ddl_header = Header("mysql-bin.000003", 950, 1, 1_700_000_001_000, "s", "t", EventType.ALTER, 40)
    ddl = Entry(
        ddl_header,
        EntryType.ROWDATA,
        RowChange(EventType.ALTER, is_ddl=True, sql="ALTER TABLE t ADD y INT", ddl_schema="s"),
        anchor=EntryPosition("mysql-bin.000003", 950, 1_700_000_001_000, 1, None, False),
    )
    heartbeat = Entry(ddl_header, EntryType.HEARTBEAT)
    rows2 = [RowData(t1, before=(7, None)), RowData(t1, before=(8, Decimal("1.5")))]
    batch = entries_to_batch(
        [_entry(t1, rows1, EventType.INSERT), heartbeat, ddl, _entry(t1, rows2, EventType.DELETE)], "dest", 4, 10
    )
    assert batch.schema.equals(arrow_schema()) and batch.schema.names == list(COLUMN_NAMES)
    out = batch.to_pylist()
    assert [r["seq"] for r in out] == [(4 << SEQ_BITS) + 10 + i for i in range(6)]
    assert [r["type"] for r in out] == ["INSERT"] * 3 + ["ALTER"] + ["DELETE"] * 2
    assert [r["row_index"] for r in out] == [0, 1, 2, 0, 0, 1]
    assert [r["log_offset"] for r in out] == [900] * 3 + [950] + [900] * 2
    assert {r["destination"] for r in out} == {"dest"}
    assert out[3]["is_ddl"] and out[3]["sql"] == "ALTER TABLE t ADD y INT" and out[3]["columns"] is None
    assert out[3]["execute_time"] == dt.datetime(2023, 11, 14, 22, 13, 21, tzinfo=dt.UTC)
    assert json.loads(out[2]["after"]) == {"id": "2", "x": render_text(2 / 7)} and out[2]["before"] is None
    assert out[5]["after"] is None and json.loads(out[5]["before"]) == {"id": "8", "x": "1.5"}
    assert json.loads(out[4]["keys"]) == {"id": "7"}


def test_an_empty_batch_has_the_schema() -> None:
    batch = entries_to_batch([], "d", 1)
    assert batch.num_rows == 0 and batch.schema.equals(arrow_schema())
