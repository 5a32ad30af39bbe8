"""The change model: shared table schemas, column views built on access, canal's text rendering."""

from __future__ import annotations

import datetime as dt
import pickle
from decimal import Decimal

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from canal import protocol
from canal.position import EntryPosition
from canal.protocol import (
    Column,
    ColumnMeta,
    Entry,
    EntryType,
    EventType,
    Header,
    Message,
    RowChange,
    RowData,
    Rows,
    SqlType,
    TableSchema,
)
from canal.value_text import render_text

ORDERS = TableSchema(
    "shop",
    "orders",
    (
        ColumnMeta("id", SqlType.INTEGER, "int(11)", is_key=True, nullable=False),
        ColumnMeta("amount", SqlType.DECIMAL, "decimal(10,2)"),
        ColumnMeta("note", SqlType.VARCHAR, "varchar(20)", charset="utf-8"),
    ),
)


def test_table_schema_derives_names_and_keys() -> None:
    assert ORDERS.names == ("id", "amount", "note")
    assert ORDERS.key_indexes == (0,)
    assert ORDERS.index_of("note") == 2
    assert ORDERS.full_name == "shop.orders"
    with pytest.raises(KeyError, match=r"shop\.orders has no column 'nope'"):
        ORDERS.index_of("nope")


def test_rows_share_one_schema_and_build_columns_on_access() -> None:
    before = (1, Decimal("9.99"), "a")
    after = (1, Decimal("5.00"), "a")
    row = RowData(ORDERS, before, after)
    assert row.before_dict() == {"id": 1, "amount": Decimal("9.99"), "note": "a"}
    assert row.after_dict()["amount"] == Decimal("5.00")
    cols = row.after_columns
    assert [c.name for c in cols] == ["id", "amount", "note"]
    assert [c.updated for c in cols] == [False, True, False]
    assert cols[0].is_key and not cols[1].is_key
    assert [c.updated for c in row.before_columns] == [False, False, False]
    assert row.updated_names() == ["amount"]
    assert row.key() == (1,)


def test_insert_marks_every_column_updated_and_delete_none() -> None:
    insert = RowData(ORDERS, None, (2, None, "x"))
    assert all(c.updated for c in insert.after_columns)
    assert insert.after_columns[1].is_null
    assert insert.before_columns == []
    delete = RowData(ORDERS, (2, None, "x"), None)
    assert delete.after_columns == []
    assert delete.key() == (2,)
    assert not any(c.updated for c in delete.before_columns)


@pytest.mark.parametrize("slots", [True, False], ids=["slot setters", "constructor"])
def test_rows_hold_images_and_build_rows_as_the_constructor(slots: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A change's rows are held as images; each read builds RowData equal (and hashing, pickling, freezing) as
    constructed ones, through the slots or, were RowData's fields to change, its constructor."""
    if not slots:
        monkeypatch.setattr(protocol, "_ROW_SLOTS", ())
    a, b = (1, Decimal("9.99"), "a"), (2, None, "b")
    inserts, deletes, updates = Rows(ORDERS, None, [a, b]), Rows(ORDERS, (a, b), None), Rows(ORDERS, [a], [b])
    made = (RowData(ORDERS, None, a), RowData(ORDERS, None, b))
    assert tuple(inserts) == made and inserts == made and list(made) == inserts and len(inserts) == 2
    assert [hash(r) for r in inserts] == [hash(r) for r in made] and inserts[1] == made[1] and inserts[-1:] == made[1:]
    assert tuple(deletes) == (RowData(ORDERS, a, None), RowData(ORDERS, b, None))
    assert tuple(updates) == (RowData(ORDERS, a, b),) and updates[0].updated_names() == ["id", "amount", "note"]
    assert inserts != deletes  # the sides count, not only the values
    assert hash(inserts) == hash(Rows(ORDERS, None, (a, b))) and inserts == Rows(ORDERS, None, (a, b))
    assert pickle.loads(pickle.dumps(inserts)) == inserts and len(Rows(ORDERS, None, None)) == 0
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        inserts[0].after = None  # type: ignore[misc]
    with pytest.raises(ValueError, match="1 before images against 2 after images"):
        Rows(ORDERS, [a], [a, b])
    assert repr(inserts) == "Rows(shop.orders, 2 rows)"
    mixed = Rows.of([RowData(ORDERS, None, a), RowData(ORDERS, a, b)])  # made by hand: shapes may differ
    assert (mixed.before, mixed.after) == ([None, a], [a, b]) and Rows.of(mixed) is mixed
    assert Rows.of(list(deletes)).after is None and Rows.of(list(deletes)) == deletes
    other = TableSchema("shop", "other", ORDERS.columns)
    with pytest.raises(ValueError, match=r"more than one table in one change \(the first: shop\.orders\)"):
        Rows.of([RowData(ORDERS, None, a), RowData(other, None, b)])


def test_values_are_immutable() -> None:
    row = RowData(ORDERS, None, (1, Decimal(1), "a"))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        row.after = None  # type: ignore[misc]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, ""),
        (True, "1"),
        (-(2**63), "-9223372036854775808"),
        (2**64 - 1, "18446744073709551615"),
        (Decimal("-12.50"), "-12.50"),
        (Decimal("1E+3"), "1000"),
        (1.5, "1.5"),
        (1e7, "1.0E7"),
        (1.0e-5, "1.0E-5"),
        (123456789.0, "1.23456789E8"),
        (float("nan"), "NaN"),
        (-0.0, "-0.0"),
        ("héllo", "héllo"),
        (b"\x00\xff", "\x00\xff"),
        (dt.date(2024, 2, 29), "2024-02-29"),
        (dt.datetime(2024, 1, 2, 3, 4, 5), "2024-01-02 03:04:05"),
        (dt.datetime(2024, 1, 2, 3, 4, 5, 120), "2024-01-02 03:04:05.000120"),
        (dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone(dt.timedelta(hours=2))), "2024-01-02 01:04:05"),
        (dt.timedelta(hours=-838, minutes=-59, seconds=-59), "-838:59:59"),
        (dt.timedelta(seconds=1, microseconds=500), "00:00:01.000500"),
        (frozenset({"b", "a"}), "a,b"),
        ({"k": [1, 2]}, '{"k": [1, 2]}'),
        ("0000-00-00 00:00:00", "0000-00-00 00:00:00"),
    ],
)
def test_text_renders_canal_string_form(value: object, text: str) -> None:
    assert render_text(value) == text


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_double_text_round_trips_like_java(value: float) -> None:
    text = render_text(value)
    assert float(text) == value  # Java's Double.toString is a shortest round-trip form too
    assert "." in text


def test_column_text_uses_render() -> None:
    row = RowData(ORDERS, None, (1, Decimal("9.90"), None))
    assert [c.text for c in row.after_columns] == ["1", "9.90", ""]


@pytest.mark.parametrize(
    ("mysql_type", "fsp", "value", "text"),
    [
        # what SELECT prints, and canal's text (measured side by side: tests/test_peers_canal_mariadb.py)
        ("datetime(3)", 3, dt.datetime(2024, 1, 2, 3, 4, 5, 120000), "2024-01-02 03:04:05.120"),
        ("datetime(3)", 3, dt.datetime(1000, 1, 1), "1000-01-01 00:00:00.000"),
        ("datetime(6)", 6, dt.datetime(2024, 1, 2, 3, 4, 5), "2024-01-02 03:04:05.000000"),
        ("timestamp(4)", 4, dt.datetime(1970, 1, 1, 0, 0, 1, 100, tzinfo=dt.UTC), "1970-01-01 00:00:01.0001"),
        ("time(2)", 2, dt.timedelta(hours=12, microseconds=500000), "12:00:00.50"),
        ("time(2)", 2, -dt.timedelta(hours=838, minutes=59, seconds=59), "-838:59:59.00"),
        ("time(1)", 1, -dt.timedelta(seconds=1, microseconds=500000), "-00:00:01.5"),
        ("datetime", 0, dt.datetime(2024, 1, 2, 3, 4, 5), "2024-01-02 03:04:05"),
        ("datetime(3)", 3, "0000-00-00 00:00:00.000", "0000-00-00 00:00:00.000"),
        ("year(4)", 0, 0, "0000"),
        ("year(4)", 0, 2024, "2024"),
        ("int(11)", 0, 0, "0"),
    ],
)
def test_column_text_has_the_columns_fraction_digits(mysql_type: str, fsp: int, value: object, text: str) -> None:
    column = Column(0, "c", 0, mysql_type, False, False, value is None, value, fsp)
    assert column.text == text


def test_entry_position_and_boundaries() -> None:
    header = Header("mysql-bin.000002", 400, server_id=3, execute_time=1_700_000_000_000, event_length=31)
    end = Entry(header, EntryType.TRANSACTIONEND, xid=77)
    assert end.is_boundary
    assert end.position == EntryPosition("mysql-bin.000002", 400, 1_700_000_000_000, 3)
    assert header.next_offset == 431
    assert end.byte_size == 31
    ddl = Entry(header, EntryType.ROWDATA, RowChange(EventType.ALTER, is_ddl=True, sql="ALTER TABLE t ADD c INT"))
    assert ddl.is_boundary
    rows = Entry(header, EntryType.ROWDATA, RowChange(EventType.INSERT, rows=[RowData(ORDERS, None, (1, None, None))]))
    assert not rows.is_boundary
    assert len(list(rows.iter_rows())) == 1
    assert EventType.INSERT.is_dml and EventType.RENAME.is_ddl and not EventType.QUERY.is_ddl


def test_message_is_empty_with_id_minus_one() -> None:
    empty = Message(-1)
    assert empty.is_empty and len(empty) == 0
    assert list(Message(3, [Entry(Header("f", 4), EntryType.HEARTBEAT)])) != []


def test_enums_carry_canal_protobuf_numbers() -> None:
    assert EntryType.ROWDATA == 2 and EntryType.GTIDLOG == 5
    assert EventType.INSERT == 1 and EventType.MHEARTBEAT == 15 and EventType.DINDEX == 11


@given(
    st.lists(st.text(max_size=8), max_size=12, unique=True).flatmap(
        lambda names: st.tuples(
            st.just(names), st.lists(st.integers() | st.none() | st.text(), min_size=len(names), max_size=len(names))
        )
    ),
    st.integers(min_value=1, max_value=3),
)
def test_images_as_dicts_are_dict_of_zip_and_refuse_another_width(
    case: tuple[list[str], list[object]], extra: int
) -> None:
    names, values = case
    table = TableSchema("s", "t", tuple(ColumnMeta(n) for n in names))
    image = tuple(values)
    row = RowData(table, before=image, after=image)
    assert row.before_dict() == row.after_dict() == dict(zip(names, image, strict=True))
    assert list(row.after_dict()) == names  # column order
    with pytest.raises(ValueError):
        RowData(table, after=image + (None,) * extra).after_dict()
    if image:
        with pytest.raises(ValueError):
            RowData(table, before=image[:-1]).before_dict()
    assert RowData(table, after=image).before_dict() == {} == RowData(table, before=image).after_dict()


def test_rows_pickle_with_their_layout_and_layouts_share_one_dict_function() -> None:
    table = TableSchema("s", "t", (ColumnMeta("id", is_key=True), ColumnMeta("note")))
    row = RowData(table, before=(1, "a"), after=(1, "b"))
    copy = pickle.loads(pickle.dumps(row))  # users hand entries to other processes
    assert copy == row and copy.after_dict() == {"id": 1, "note": "b"} and copy.table.key_indexes == (0,)
    same_columns = TableSchema("other", "u", (ColumnMeta("id"), ColumnMeta("note")))
    assert same_columns.to_dict is table.to_dict  # generated once per column list


def test_the_dict_functions_are_bounded_and_drop_the_oldest_first(monkeypatch: pytest.MonkeyPatch) -> None:
    from canal import protocol

    monkeypatch.setattr(protocol, "_TO_DICT", {})
    monkeypatch.setattr(protocol, "_TO_DICT_LIMIT", 3)
    layouts = [TableSchema("s", f"t{i}", (ColumnMeta(f"c{i}"),)) for i in range(5)]
    assert list(protocol._TO_DICT) == [("c2",), ("c3",), ("c4",)]
    assert [t.to_dict((i,)) for i, t in enumerate(layouts)] == [{f"c{i}": i} for i in range(5)]  # layouts keep theirs


def test_a_renamed_schema_is_the_schema_built_under_that_name() -> None:
    """What tables of one definition share (names, keys, the dict maker, the name index) is shared, and the copy
    is what building it under its own name gives: equal, hashed alike, pickled, indexed."""
    renamed = ORDERS.renamed("shop2", "orders7")
    built = TableSchema("shop2", "orders7", ORDERS.columns)
    assert renamed == built and hash(renamed) == hash(built) and renamed != ORDERS
    assert (renamed.schema, renamed.table, renamed.full_name) == ("shop2", "orders7", "shop2.orders7")
    assert renamed.names == built.names and renamed.key_indexes == (0,) and renamed.columns is ORDERS.columns
    assert renamed.index_of("note") == 2 and renamed.to_dict((1, None, "x")) == {"id": 1, "amount": None, "note": "x"}
    with pytest.raises(KeyError, match=r"shop2\.orders7 has no column 'nope'"):
        renamed.index_of("nope")
    assert pickle.loads(pickle.dumps(renamed)) == built
    assert ORDERS.full_name == "shop.orders"  # the original keeps its name
