"""Partial row images (``binlog_row_image`` MINIMAL / NOBLOB) as entries carry them: a column an image does not carry
is ``ABSENT`` -- never None --, left out of the dicts and the column lists, named by ``before_absent`` /
``after_absent``; decoded so by the object and the columnar decoders, and written so by the fake server."""

from __future__ import annotations

import copy
import pickle
import struct
from typing import Any

import pytest

from canal.config import InstanceConfig, MasterConfig
from canal.filter import FieldFilter
from canal.instance import Instance
from canal.parse.mysql.decoder import BinlogColumn, TableDecoder, TableMapInfo
from canal.protocol import ABSENT, ColumnarRows, ColumnMeta, Entry, EventType, RowData, Rows, TableSchema
from canal.testing.fake import FakeMysql, FakeMysqlError

_T_LONG, _T_VARCHAR, _T_BLOB = 3, 15, 252
_COLUMNS = [  # id INT NOT NULL (the key), a INT, b VARCHAR(10) utf8mb4, doc TEXT utf8mb4
    BinlogColumn(index=0, type=_T_LONG, nullable=False, name="id", is_key=True),
    BinlogColumn(index=1, type=_T_LONG, nullable=True, name="a"),
    BinlogColumn(index=2, type=_T_VARCHAR, nullable=True, length=40, collation=45, name="b"),
    BinlogColumn(index=3, type=_T_BLOB, nullable=True, length=2, collation=45, name="doc"),
]
TABLE = TableSchema(
    "s",
    "t",
    (
        ColumnMeta("id", mysql_type="int", is_key=True, nullable=False),
        ColumnMeta("a", mysql_type="int"),
        ColumnMeta("b", mysql_type="varchar(10)"),
        ColumnMeta("doc", mysql_type="text"),
    ),
)


def test_absent_is_one_value_that_is_not_none_and_has_no_truth() -> None:
    assert ABSENT is not None and ABSENT != None  # noqa: E711  (the point: it is not NULL)
    assert repr(ABSENT) == "ABSENT"
    assert pickle.loads(pickle.dumps(ABSENT)) is ABSENT
    assert copy.deepcopy((1, ABSENT))[1] is ABSENT
    assert type(ABSENT)() is ABSENT
    with pytest.raises(TypeError, match="no truth value"):
        bool(ABSENT)


def test_a_minimal_update_carries_its_columns_and_names_the_others() -> None:
    row = RowData(TABLE, (1, ABSENT, ABSENT, ABSENT), (ABSENT, ABSENT, "changed", ABSENT))
    assert row.before_dict() == {"id": 1}
    assert row.after_dict() == {"b": "changed"}
    assert row.before_absent == ("a", "b", "doc")
    assert row.after_absent == ("id", "a", "doc")
    assert [c.name for c in row.before_columns] == ["id"]
    after = row.after_columns
    assert [(c.name, c.value, c.updated, c.is_null) for c in after] == [("b", "changed", True, False)]
    assert row.updated_names() == ["b"]
    assert row.key() == (1,)  # the kept key, from the before image
    # a NULL is a value an image carries: not absent
    nulled = RowData(TABLE, (1, 5, "x", ABSENT), (1, None, "x", ABSENT))
    assert nulled.after_dict() == {"id": 1, "a": None, "b": "x"}
    assert nulled.after_absent == ("doc",)
    assert nulled.updated_names() == ["a"]
    # a whole image: nothing absent
    whole = RowData(TABLE, None, (2, 1, "y", "d"))
    assert whole.after_absent == () and whole.before_absent == ()
    assert whole.after_dict() == {"id": 2, "a": 1, "b": "y", "doc": "d"}


def test_rows_say_which_columns_their_event_lacks() -> None:
    rows = Rows(TABLE, [(1, ABSENT, ABSENT, ABSENT)] * 2, [(ABSENT, 7, ABSENT, ABSENT)] * 2)
    assert rows.absent("before") == (1, 2, 3)
    assert rows.absent("after") == (0, 2, 3)
    assert Rows(TABLE, None, [(1, 2, "x", "d")]).absent("after") == ()
    assert Rows(TABLE, None, [(1, 2, "x", "d")]).absent("before") == ()
    with pytest.raises(ValueError, match="side must be"):
        rows.absent("middle")
    # one rows event's images carry one set of columns: rows made of different ones are refused
    mixed = [RowData(TABLE, None, (1, ABSENT, "x", ABSENT)), RowData(TABLE, None, (2, 1, "y", "d"))]
    with pytest.raises(ValueError, match="carry different columns"):
        Rows.of(mixed)
    assert Rows.of(mixed[:1]).absent("after") == (1, 3)


def _row(values: tuple[Any, ...], present: list[int]) -> bytes:
    """One image of ``_COLUMNS`` of the ``present`` columns: its NULL bitmap, then their values."""
    chosen = [(i, values[i]) for i in present]
    out = bytes([sum(1 << n for n, (_i, v) in enumerate(chosen) if v is None)])
    for i, value in chosen:
        if value is None:
            continue
        if i in (0, 1):
            out += struct.pack("<i", value)
        elif i == 2:
            out += bytes([len(value)]) + value.encode()
        else:
            out += struct.pack("<H", len(value)) + value.encode()
    return out


@pytest.mark.parametrize("columnar", [False, True], ids=["objects", "columns"])
def test_both_decoders_give_absent_for_the_columns_an_image_leaves_out(columnar: bool) -> None:
    table = TableDecoder(TableMapInfo(1, "s", "t", _COLUMNS, has_names=True))
    # MINIMAL: the before image holds the key, the after image the columns written (a NULL among them)
    body = _row((1, None, None, None), [0]) + _row((None, None, "new", None), [1, 2])
    rows = table.decoder("u", bytes([0b0001]), bytes([0b0110]), columnar=columnar)(table.schema, body, 0, len(body))
    assert isinstance(rows, ColumnarRows) is columnar
    assert list(rows.before or ()) == [(1, ABSENT, ABSENT, ABSENT)]
    assert list(rows.after or ()) == [(ABSENT, None, "new", ABSENT)]
    assert rows.absent("before") == (1, 2, 3) and rows.absent("after") == (0, 3)
    row = rows[0]
    assert row.after_dict() == {"a": None, "b": "new"}
    assert row.key() == (1,)
    # NOBLOB: every column but the TEXT one
    body = _row((2, 5, "x", None), [0, 1, 2])
    rows = table.decoder("d", bytes([0b0111]), columnar=columnar)(table.schema, body, 0, len(body))
    assert list(rows.before or ()) == [(2, 5, "x", ABSENT)]
    assert rows[0].before_absent == ("doc",)


def test_a_field_filter_keeps_absence() -> None:
    rows = Rows(TABLE, [(1, ABSENT, ABSENT, ABSENT)], [(ABSENT, ABSENT, "n", ABSENT)])
    projected = FieldFilter({"s.t": ["id", "b"]}).project_rows(TABLE, rows)
    assert list(projected.before or ()) == [(1, ABSENT)]
    assert list(projected.after or ()) == [(ABSENT, "n")]
    assert projected[0].after_dict() == {"b": "n"}


def fake_entries(fake: FakeMysql, batch_size: int = 1000) -> list[Entry]:
    """Every entry of ``fake``'s binlog from its start to its end, each get over once the stream went quiet."""
    config = InstanceConfig(
        destination="partial", master=MasterConfig(address=fake.address, journal_name="mysql-bin.000001", position=4)
    )
    end = fake.master_status()
    entries: list[Entry] = []
    with Instance(config) as inst:
        while not entries or (entries[-1].header.log_file, entries[-1].header.next_offset) < (
            end.journal_name,
            end.position,
        ):
            got = inst.get(batch_size, timeout=2.0, linger=0.05).entries
            assert got, f"nothing more before {end}"
            entries.extend(got)
    return entries


def _fake_rows(fake: FakeMysql) -> list[tuple[EventType, RowData]]:
    return [(e.header.event_type, row) for e in fake_entries(fake) for row in e.iter_rows()]


def test_the_fake_writes_minimal_and_noblob_images_as_mariadb_does(fake_mysql: FakeMysql) -> None:
    fake = fake_mysql
    fake.execute("CREATE TABLE d.t (id INT PRIMARY KEY, a INT, b VARCHAR(10), doc TEXT, j JSON)")
    fake.execute("CREATE TABLE d.nokey (x INT, doc TEXT)")
    fake.insert("d.t", {"id": 1, "a": 1, "b": "x", "doc": "d", "j": "{}"})
    with fake.transaction(row_image="MINIMAL") as tx:
        tx.update("d.t", {"id": 1}, {"b": "changed"})  # before: the key; after: the column set
        tx.insert("d.t", {"id": 2, "b": "q"})  # after: the columns named (a, doc, j left to their defaults)
        tx.update("d.t", {"id": 2}, {"id": 3})  # the key moved: in the after image
        tx.delete("d.t", {"id": 3})  # before: the key
        tx.insert("d.nokey", {"x": 1, "doc": "n"})  # a table without a key: every column
        tx.update("d.nokey", {"x": 1, "doc": "n"}, {"doc": "m"})
    fake.row_image = "NOBLOB"  # the server's setting, for later transactions
    with fake.transaction() as tx:
        tx.update("d.t", {"id": 1}, {"a": 5})  # the TEXT and JSON columns left out of both images
        tx.insert("d.t", {"id": 4, "a": 1, "doc": "e"})  # the JSON column left to its default: not logged
    with fake.transaction(row_image="FULL") as tx:
        tx.update("d.t", {"id": 1}, {"j": "[]"})
    seen = [(kind, row.before, row.after) for kind, row in _fake_rows(fake)]
    A = ABSENT
    assert seen == [
        (EventType.INSERT, None, (1, 1, "x", "d", "{}")),
        (EventType.UPDATE, (1, A, A, A, A), (A, A, "changed", A, A)),
        (EventType.INSERT, None, (2, A, "q", A, A)),
        (EventType.UPDATE, (2, A, A, A, A), (3, A, A, A, A)),
        (EventType.DELETE, (3, A, A, A, A), None),
        (EventType.INSERT, None, (1, "n")),
        (EventType.UPDATE, (1, "n"), (1, "m")),
        (EventType.UPDATE, (1, 1, "changed", A, A), (1, 5, "changed", A, A)),
        (EventType.INSERT, None, (4, 1, None, "e", A)),
        (EventType.UPDATE, (1, 5, "changed", "d", "{}"), (1, 5, "changed", "d", "[]")),
    ]
    # the fake's own rows are whole, whatever its binlog carries
    assert fake.rows("d.t") == [
        {"id": 1, "a": 5, "b": "changed", "doc": "d", "j": "[]"},
        {"id": 4, "a": 1, "b": None, "doc": "e", "j": None},
    ]


def test_the_fake_refuses_a_row_image_it_does_not_know(fake_mysql: FakeMysql) -> None:
    with pytest.raises(FakeMysqlError, match="binlog_row_image must be one of FULL, MINIMAL, NOBLOB"):
        fake_mysql.row_image = "PARTIAL"  # type: ignore[assignment]
    with pytest.raises(FakeMysqlError, match="binlog_row_image"), fake_mysql.transaction(row_image="x"):  # type: ignore[arg-type]
        pass
    assert fake_mysql.row_image == "FULL"
