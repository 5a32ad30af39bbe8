"""Typed change batches (:mod:`canal.lake.forms.typed_batch`) against the change rows: the same rows, and every
typed cell equal to what the mirror parses out of the change row's JSON image (``entries_to_batch`` and then
``canal.lake.planning.images.parse_images``, the function ``DeltaMirror`` types change rows' MERGE sources with) --
the equivalence that lets the mirror take typed batches instead.

The entries come from the fake binlog (``FakeMysql(mariadb=True)`` read by an ``Instance``: values as the decoder
gives them) for every type family, and from hypothesis for random layouts and rows. ``TYPED_CHANGES_EXAMPLES``
(default 60) sets the property test's example count, for a longer run.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import time
from collections.abc import Sequence
from decimal import Decimal
from typing import Any
from unittest import mock

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")

from canal.config import InstanceConfig, MasterConfig, StoreConfig  # noqa: E402
from canal.instance import Instance  # noqa: E402
from canal.lake.forms import typed_layout  # noqa: E402
from canal.lake.forms.changes import entries_to_batch  # noqa: E402
from canal.lake.forms.typed_batch import METADATA_COLUMNS, TypedBatch, entries_to_typed, metadata_schema  # noqa: E402
from canal.lake.forms.typed_layout import TypedChangeError, layout_id  # noqa: E402
from canal.lake.key_identity import key_value  # noqa: E402
from canal.lake.planning.images import parse_images  # noqa: E402
from canal.lake.types import MirrorTypeError, arrow_type  # noqa: E402
from canal.position import EntryPosition  # noqa: E402
from canal.protocol import (  # noqa: E402
    EMPTY_MESSAGE_ID,
    ColumnMeta,
    Entry,
    EntryType,
    EventType,
    Header,
    RowChange,
    RowData,
    TableSchema,
)
from canal.testing.fake import FakeMysql  # noqa: E402

EXAMPLES = int(os.environ.get("TYPED_CHANGES_EXAMPLES", "60"))

# name, definition, value in row 1, value in row 2 (row 3 is all NULL but the key)
COLUMNS: list[tuple[str, str, Any, Any]] = [
    ("ti", "TINYINT", -128, 127),
    ("tiu", "TINYINT UNSIGNED", 255, 0),
    ("iu", "INT UNSIGNED", 4294967295, 7),
    ("bi", "BIGINT", -9223372036854775808, 9223372036854775807),
    ("biu", "BIGINT UNSIGNED", 18446744073709551615, 0),
    ("d65", "DECIMAL(65,30)", Decimal("-" + "9" * 35 + "." + "9" * 30), Decimal("0.000000000000000000000000000001")),
    ("d38", "DECIMAL(38,10)", Decimal("9" * 28 + "." + "9" * 10), Decimal("-0.0000000001")),
    ("d102", "DECIMAL(10,2)", Decimal("12345678.91"), Decimal("-0.5")),
    ("f", "FLOAT", 1.5, -0.25),
    ("db", "DOUBLE", -1.7976931348623157e308, 0.1),
    ("b9", "BIT(9)", 257, 0),
    ("b64", "BIT(64)", 2**64 - 1, 1),
    ("y", "YEAR", 1901, 2155),
    ("dte", "DATE", dt.date(1000, 1, 1), dt.date(9999, 12, 31)),
    ("dt6", "DATETIME(6)", dt.datetime(2020, 2, 29, 23, 59, 59, 123456), dt.datetime(1000, 1, 1)),
    ("ts", "TIMESTAMP(6) NULL", dt.datetime(2038, 1, 19, 3, 14, 7, 999999), dt.datetime(1970, 1, 1, 0, 0, 1)),
    ("tm2", "TIME(2)", dt.timedelta(hours=838, minutes=59, seconds=59, microseconds=990000), -dt.timedelta(hours=1)),
    ("c", "CHAR(10)", "abc", ""),
    ("vc", "VARCHAR(20)", "ü€😀", "x" * 20),
    ("tx", "TEXT", "line\nbreak", ""),
    ("bn", "BINARY(4)", b"\x00\x01\x02\x03", b"\xff\xff\xff\xff"),
    ("vb", "VARBINARY(8)", b"\x00\xff", b""),
    ("bl", "BLOB", b"\x00" * 300, b"blob"),
    ("e", "ENUM('a','b','c d')", "c d", "a"),
    ("s", "SET('x','y','z')", "z,x", ""),
    ("j", "JSON", '{"k": [1, 2.5, "v"]}', "[]"),
]


def _row(key: int, which: int | None) -> dict[str, Any]:
    row: dict[str, Any] = {"id": key}
    for name, _definition, first, second in COLUMNS:
        row[name] = None if which is None else (first, second)[which]
    return row


def _read_all(fake: FakeMysql, until: str) -> list[Entry]:
    """The fake's entries read by an Instance, up to and including the DDL starting with ``until``."""
    master = MasterConfig(address=fake.address, journal_name="mysql-bin.000001", position=4)
    config = InstanceConfig(
        destination="typed", master=master, filter_regex=r"db\..*", store=StoreConfig(buffer_size=1024)
    )
    inst = Instance(config)
    inst.start()
    try:
        seen: list[Entry] = []
        deadline = time.monotonic() + 20
        while not any(e.row_change is not None and e.row_change.sql.startswith(until) for e in seen):
            msg = inst.get(1000, timeout=0.5)  # whatever arrived within 0.5 s
            assert msg.id != EMPTY_MESSAGE_ID or time.monotonic() < deadline, f"timed out after {len(seen)} entries"
            seen.extend(msg.entries)
        return seen
    finally:
        inst.stop()


@pytest.fixture(scope="module")
def decoded() -> list[Entry]:
    """Every type family inserted, updated (keys moved and not) and deleted, a second table, and an ALTER between
    rows of one table, so one batch holds three layouts."""
    cols = ", ".join(f"`{name}` {definition}" for name, definition, _, _ in COLUMNS)
    with FakeMysql(name="typed_changes", mariadb=True, charset="utf8mb4") as fake:
        fake.execute("CREATE DATABASE db")
        fake.execute(f"CREATE TABLE db.t (`id` INT NOT NULL PRIMARY KEY, {cols}) DEFAULT CHARSET=utf8mb4")
        fake.execute("CREATE TABLE db.k (a VARCHAR(8) NOT NULL, b DOUBLE NOT NULL, v INT, PRIMARY KEY (b, a))")
        with fake.transaction() as tx:
            tx.insert_many("db.t", [_row(1, 0), _row(2, 1), _row(3, None)])
            tx.insert_many("db.k", [{"a": "x", "b": 0.0, "v": 1}, {"a": "y", "b": 1.5, "v": None}])
        with fake.transaction() as tx:
            tx.update("db.t", _row(1, 0), _row(1, 1))
            tx.update("db.t", _row(3, None), _row(30, 0))  # the key moves
            tx.update("db.k", {"a": "x", "b": 0.0, "v": 1}, {"a": "x", "b": -0.0, "v": 2})  # only its text moves
            tx.delete("db.t", _row(2, 1))
        fake.execute("ALTER TABLE db.t ADD COLUMN extra VARCHAR(5) NOT NULL DEFAULT '' AFTER id", schema="db")
        with fake.transaction() as tx:
            tx.insert("db.t", {**_row(4, 1), "extra": "new"})
            tx.delete("db.k", {"a": "y", "b": 1.5, "v": None})
        fake.execute("DROP TABLE db.k", schema="db")
        return _read_all(fake, "DROP TABLE")


# -- the equivalence: typed cells against the mirror's parse of the JSON change rows --------------------------------


def _parsed(texts: list[str | None], layout: list[list[Any]]) -> list[list[Any]]:
    """The cells the mirror gets out of JSON images today, per column: ``parse_images`` (the Arrow path) on the
    non-null images; a null image is null in every column."""
    present = [i for i, t in enumerate(texts) if t is not None]
    columns: list[list[Any]] = [[None] * len(texts) for _ in layout]
    if not present:
        return columns
    parsed = parse_images(pa.array([texts[i] for i in present], pa.string()), layout)
    assert parsed is not None, "the mirror's Arrow path took these images"
    for column, array in zip(columns, parsed, strict=True):
        for i, value in zip(present, array.to_pylist(), strict=True):
            column[i] = value
    return columns


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    return type(a) is type(b) and a == b


def check_equivalent(entries: Sequence[Entry], typed: TypedBatch | None = None) -> int:
    """Asserts ``entries_to_typed`` and ``entries_to_batch`` + the mirror's parse agree on every change row and
    cell; the number of cells compared."""
    rows = entries_to_batch(entries, "d", 7, 3)
    typed = typed if typed is not None else entries_to_typed(entries, "d", 7, 3)
    assert typed.changes.schema == metadata_schema()
    assert typed.num_rows == rows.num_rows
    for name in METADATA_COLUMNS:
        if name in rows.schema.names:
            assert typed.changes.column(name).to_pylist() == rows.column(name).to_pylist(), name
    text_rows = rows.to_pylist()
    meta = typed.changes.to_pylist()
    by_layout: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for row, m in zip(text_rows, meta, strict=True):
        if row["columns"] is None:
            assert m["layout"] is None and m["image_row"] is None and m["key_changed"] is None
            continue
        assert m["layout"] == layout_id(row["columns"])
        assert typed.layouts[m["layout"]].describe() == json.loads(row["columns"])
        assert m["key_changed"] is (row["old_keys"] is not None)
        by_layout.setdefault(m["layout"], []).append((m["image_row"], row))
    compared = 0
    for lid, members in by_layout.items():
        layout = typed.layouts[lid].describe()
        images = typed.images[lid]
        assert sorted(i for i, _ in members) == list(range(images.num_rows)), "each image row belongs to one change"
        members.sort(key=lambda m: m[0])
        key_layout = [c for c in layout if c[2]]
        keys = typed.keys(lid).to_pylist()
        for side in ("before", "after"):
            want = _parsed([row[side] for _, row in members], layout)
            got = images.column(side)
            assert got.type == pa.struct([pa.field(n, arrow_type(t)) for n, t, _k in layout])
            assert [v is None for v in got.to_pylist()] == [row[side] is None for _, row in members]
            for c, (name, _t, _k) in enumerate(layout):
                cells = got.field(name).to_pylist()
                for i, (a, b) in enumerate(zip(cells, want[c], strict=True)):
                    if members[i][1][side] is not None:
                        assert _same(a, b), (side, name, a, b)
                        compared += 1
        if key_layout:
            # the keys text spells each key's identity (-0.0 as 0.0), the typed keys hold the image's values
            want_keys = _parsed([row["keys"] for _, row in members], key_layout)
            for c, (name, _t, _k) in enumerate(key_layout):
                assert all(_same(key_value(k[name]), w) for k, w in zip(keys, want_keys[c], strict=True)), name
    return compared


def test_every_type_family_types_as_the_mirror_parses_it_today(decoded: list[Entry]) -> None:
    assert check_equivalent(decoded) > 150


def test_a_batch_holds_tables_layouts_and_ddl_rows_in_stream_order(decoded: list[Entry]) -> None:
    typed = entries_to_typed(decoded, "d", 7)
    meta = typed.changes.to_pylist()
    assert [m["seq"] for m in meta] == [(7 << 32) + i for i in range(len(meta))]
    dml = [m for m in meta if m["layout"] is not None]
    t_layouts = [m["layout"] for m in dml if m["table"] == "t"]
    k_layouts = {m["layout"] for m in dml if m["table"] == "k"}
    assert len(set(t_layouts)) == 2 and len(k_layouts) == 1, "two layouts of t (the ALTER between), one of k"
    assert len(typed.images) == len(typed.layouts) == 3
    first, second = dict.fromkeys(t_layouts)
    assert "extra" not in typed.layouts[first].names and "extra" in typed.layouts[second].names
    ddl = [(m["type"], m["sql"].split(" ")[0]) for m in meta if m["is_ddl"]]
    assert ("ALTER", "ALTER") in ddl and ("ERASE", "DROP") in ddl
    # the ALTER sits between the rows of the two layouts
    alter = next(i for i, m in enumerate(meta) if m["type"] == "ALTER")
    assert all(m["layout"] != second for m in meta[:alter]) and all(m["layout"] != first for m in meta[alter:])
    kinds = [(m["table"], m["type"], m["key_changed"]) for m in dml]
    assert kinds.count(("t", "UPDATE", True)) == 1
    assert kinds.count(("k", "UPDATE", False)) == 1, "0.0 -> -0.0 keeps the key (one key, as the server compares)"
    # the after image of the key-moving update, and its keys, typed
    images = typed.images[first]
    moved = next(m for m in dml if m["key_changed"] and m["table"] == "t")
    after = images.column("after")[moved["image_row"]].as_py()
    assert after["id"] == 30 and after["biu"] == Decimal(2**64 - 1) and after["b64"] == Decimal(2**64 - 1)
    assert after["tm2"] == "838:59:59.99" and after["s"] == "x,z" and after["d65"] == "-" + "9" * 35 + "." + "9" * 30
    assert after["ts"] == dt.datetime(2038, 1, 19, 3, 14, 7, 999999) and after["f"] == 1.5
    assert images.column("before")[moved["image_row"]].as_py()["id"] == 3
    assert typed.keys(first)[moved["image_row"]].as_py() == {"id": 30}
    deleted = next(m for m in dml if m["type"] == "DELETE" and m["table"] == "t")
    assert images.column("after")[deleted["image_row"]].as_py() is None
    assert typed.keys(first)[deleted["image_row"]].as_py() == {"id": 2}


def test_the_layout_is_described_once_per_batch_and_shared_by_tables_of_one_layout() -> None:
    columns = (ColumnMeta("id", mysql_type="int(11)", is_key=True), ColumnMeta("v", mysql_type="varchar(5)"))
    shards = [TableSchema("s", f"t{i:02d}", columns) for i in range(3)]
    entries = [_entry(t, [RowData(t, after=(i, f"v{i}"))], EventType.INSERT) for i, t in enumerate(shards)]
    typed = entries_to_typed(entries, "d", 1)
    assert len(typed.layouts) == 1
    (lid,) = typed.layouts
    assert typed.changes.column("table").to_pylist() == ["t00", "t01", "t02"]
    assert typed.changes.column("image_row").to_pylist() == [0, 1, 2]
    assert typed.images[lid].column("after").field("v").to_pylist() == ["v0", "v1", "v2"]
    assert check_equivalent(entries) == 6


# -- values that do not convert: a typed error, as the mirror gives today -----------------------------------------


def _entry(table: TableSchema, rows: list[RowData], event: EventType = EventType.UPDATE) -> Entry:
    header = Header("mysql-bin.000003", 900, 1, 1_700_000_000_000, table.schema, table.table, event, 40)
    anchor = EntryPosition("mysql-bin.000003", 800, 1_700_000_000_000, 1, None, True)
    return Entry(header, EntryType.ROWDATA, RowChange(event, rows), anchor=anchor, rows_done=len(rows))


def _one_column(mysql_type: str, value: Any) -> list[Entry]:
    columns = (ColumnMeta("id", mysql_type="int", is_key=True), ColumnMeta("v", mysql_type=mysql_type))
    table = TableSchema("s", "t", columns)
    return [_entry(table, [RowData(table, after=(1, value))], EventType.INSERT)]


@pytest.mark.parametrize(
    ("mysql_type", "value", "says"),
    [
        ("int(11)", 2**63, "9223372036854775808"),  # beyond int64
        ("bigint(20) unsigned", 10**20, "100000000000000000000"),  # beyond decimal(20,0)
        ("decimal(10,2)", Decimal("1.234"), "1.234"),  # more scale than the column: never rounded
        ("decimal(10,2)", Decimal("123456789.5"), "123456789.5"),  # more digits than the column
        ("date", "0000-00-00", "zero date"),
        ("datetime(6)", "2020-00-15 10:00:00", "zero date"),
        ("int(11)", "twelve", "twelve"),
        ("blob", "€", "latin-1"),
    ],
)
def test_a_value_that_does_not_convert_is_a_typed_error_naming_it(mysql_type: str, value: Any, says: str) -> None:
    entries = _one_column(mysql_type, value)
    with pytest.raises(TypedChangeError, match=r"s\.t column 'v'") as info:
        entries_to_typed(entries, "d", 1)
    assert says in str(info.value)
    # the mirror refuses the same value today
    row = entries_to_batch(entries, "d", 1).to_pylist()[0]
    layout = json.loads(row["columns"])
    with pytest.raises(MirrorTypeError):
        _parsed([row["after"]], layout)


def test_zero_dates_null_is_the_mirrors_explicit_choice() -> None:
    typed = entries_to_typed(_one_column("date", "0000-00-00"), "d", 1, zero_dates="null")
    (images,) = typed.images.values()
    assert images.column("after").field("v").to_pylist() == [None]
    assert images.column("after").field("id").to_pylist() == [1]


def test_a_surprising_value_takes_the_mirrors_conversion_of_its_text() -> None:
    # a bool in an int column, an int in a double column, a datetime at midnight in a date column: whatever the
    # mirror makes of their canal text
    for mysql_type, value in (("int(11)", True), ("double", 3), ("varchar(5)", 12), ("json", {"a": [1]})):
        assert check_equivalent(_one_column(mysql_type, value)) == 2


def test_an_image_of_another_width_is_refused() -> None:
    table = TableSchema("s", "t", (ColumnMeta("id", mysql_type="int", is_key=True), ColumnMeta("v", mysql_type="int")))
    rows = [RowData(table, after=(1, 2)), RowData(table, after=(1, 2, 3))]
    with pytest.raises(TypedChangeError, match="widths"):
        entries_to_typed([_entry(table, rows, EventType.INSERT)], "d", 1)


# -- the property: random layouts, random rows -------------------------------------------------------------------

TYPED_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "tinyint(4)": st.integers(-128, 127),
    "int(10) unsigned": st.integers(0, 2**32 - 1),
    "bigint(20)": st.integers(-(2**63), 2**63 - 1),
    "bigint(20) unsigned": st.integers(0, 2**64 - 1),
    "bit(64)": st.integers(0, 2**64 - 1),
    "bit(3)": st.integers(0, 7),
    "year(4)": st.integers(1901, 2155),
    "decimal(30,10)": st.decimals(min_value=-(10**19), max_value=10**19, places=10, allow_nan=False),
    "decimal(65,30)": st.decimals(min_value=-(10**34), max_value=10**34, places=30, allow_nan=False),
    "decimal(5,0) unsigned": st.decimals(min_value=0, max_value=99999, places=0, allow_nan=False),
    # both zeros often: one key spelt two ways (a key moved 0.0 -> -0.0, or inserted as one and touched as the other)
    "double": st.sampled_from([0.0, -0.0]) | st.floats(allow_nan=False),
    "float": st.sampled_from([0.0, -0.0])
    | st.floats(width=32, allow_nan=False, allow_infinity=False).map(lambda f: float(f"{f:.6g}")),
    "date": st.dates(),
    "datetime(6)": st.datetimes(),
    "timestamp(3)": st.datetimes(
        min_value=dt.datetime(1970, 1, 2), max_value=dt.datetime(2038, 1, 1), timezones=st.just(dt.UTC)
    ).map(lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000)),
    "time(6)": st.timedeltas(min_value=-dt.timedelta(hours=838), max_value=dt.timedelta(hours=838)),
    "char(3)": st.text(max_size=3),
    "varchar(20)": st.text(st.characters(codec="utf-8"), max_size=20),
    "longtext": st.text(st.characters(codec="utf-8")),
    "binary(2)": st.binary(min_size=2, max_size=2),
    "blob": st.binary(max_size=40),
    "enum('a','b')": st.sampled_from(["a", "b", ""]),
    "set('x','y','z')": st.frozensets(st.sampled_from(["x", "y", "z"])),
    "json": st.sampled_from(['{"a": 1}', "[1, 2.5]", '"s"', "null"]),
    "point": st.binary(min_size=21, max_size=21),
}
TYPES = sorted(TYPED_VALUES)


@st.composite
def random_table(draw: st.DrawFn) -> TableSchema:
    types = draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=7))
    keys = draw(st.lists(st.booleans(), min_size=len(types), max_size=len(types)))
    pairs = enumerate(zip(types, keys, strict=True))
    columns = tuple(ColumnMeta(f"c{i}", mysql_type=t, is_key=k) for i, (t, k) in pairs)
    return TableSchema("s", draw(st.sampled_from(["a", "b"])), columns)


def _ddl(sql: str) -> Entry:
    header = Header("mysql-bin.000003", 700, 1, 1_700_000_000_000, "s", "a", EventType.ALTER, 40)
    anchor = EntryPosition("mysql-bin.000003", 700, 1_700_000_000_000, 1, None, True)
    change = RowChange(EventType.ALTER, is_ddl=True, sql=sql, ddl_schema="s")
    return Entry(header, EntryType.ROWDATA, change, anchor=anchor)


def _xa_end() -> Entry:
    props = {"XA_TYPE": "XA_END", "XA_XID": "x1"}
    header = Header("mysql-bin.000003", 750, 1, 1_700_000_000_000, "", "", EventType.QUERY, 40, None, props)
    return Entry(header, EntryType.TRANSACTIONEND, anchor=EntryPosition("mysql-bin.000003", 750))


@st.composite
def batches(draw: st.DrawFn) -> list[Entry]:
    """One or two random layouts (tables a / b, or two layouts of one table), their INSERTs, UPDATEs (keys moved or
    not) and DELETEs, with DDL and XA rows between."""
    tables = draw(st.lists(random_table(), min_size=1, max_size=2))

    def image(table: TableSchema) -> tuple[Any, ...]:
        return tuple(
            draw(TYPED_VALUES[c.mysql_type] if c.is_key else st.none() | TYPED_VALUES[c.mysql_type])
            for c in table.columns
        )

    entries = []
    for _ in range(draw(st.integers(1, 4))):
        table = draw(st.sampled_from(tables))
        if draw(st.integers(0, 5)) == 0:
            entries.append(draw(st.sampled_from([_ddl("ALTER TABLE a ADD COLUMN z INT"), _xa_end()])))
        event = draw(st.sampled_from([EventType.INSERT, EventType.UPDATE, EventType.DELETE]))
        n = draw(st.integers(1, 3))
        if event is EventType.INSERT:
            rows = [RowData(table, after=image(table)) for _ in range(n)]
        elif event is EventType.DELETE:
            rows = [RowData(table, before=image(table)) for _ in range(n)]
        else:
            rows = []
            for _ in range(n):
                before = image(table)
                after = before if draw(st.booleans()) else image(table)  # same keys, or (likely) moved ones
                rows.append(RowData(table, before=before, after=after))
        entries.append(_entry(table, rows, event))
    return _in_binlog_order(entries)


def _in_binlog_order(entries: list[Entry]) -> list[Entry]:
    """``entries`` at increasing binlog offsets, each its own transaction, as a stream has them: a mirror fed them in
    several batches tells what it applied by position (canal.lake.identity.lineage), so one position twice is a
    replay."""
    placed = []
    for i, entry in enumerate(entries):
        offset = 1000 + 200 * i
        header = attrs.evolve(entry.header, log_offset=offset)
        anchor = attrs.evolve(entry.anchor, position=offset - 100) if entry.anchor is not None else None
        placed.append(attrs.evolve(entry, header=header, anchor=anchor))
    return placed


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches(), st.sampled_from([1, 2, 3, typed_layout.CHUNK_ROWS]))
def test_random_rows_of_random_layouts_type_as_the_mirror_parses_them(entries: list[Entry], chunk_rows: int) -> None:
    # images are converted CHUNK_ROWS at a time: chunks of one to three images cut these batches' layouts anywhere
    with mock.patch.object(typed_layout, "CHUNK_ROWS", chunk_rows):
        check_equivalent(entries)


PLAIN_KEY_VALUES = st.integers(-2, 2) | st.sampled_from(["1", "a", b"1", None, dt.date(2020, 1, 1)])
KEY_VALUES = PLAIN_KEY_VALUES | st.sampled_from(
    [True, 1.0, -0.0, 0.0, float("nan"), Decimal("1"), Decimal("1.0"), dt.datetime(2020, 1, 1), dt.timedelta(0)]
)


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=3), st.data())
def test_keys_changed_of_a_row_event_is_key_changed_of_each_row(keys: list[bool], data: st.DataObject) -> None:
    # the C path (plain key values) and the row-by-row one agree, whatever values and missing images a row event holds
    table = TableSchema("s", "t", tuple(ColumnMeta(f"c{i}", mysql_type="int", is_key=k) for i, k in enumerate(keys)))
    layout = typed_layout.layout_of(table)
    values = data.draw(st.sampled_from([PLAIN_KEY_VALUES, KEY_VALUES]))  # plain values alone: the C path
    image = st.tuples(*[values] * len(keys))
    n = data.draw(st.integers(0, 6))
    missing = st.none() if data.draw(st.booleans()) else st.nothing()  # rows without an image, or none
    befores = data.draw(st.lists(image | missing, min_size=n, max_size=n))
    afters = data.draw(st.lists(image | missing, min_size=n, max_size=n))
    assert layout.keys_changed(befores, afters) == list(map(layout.key_changed, befores, afters))


def test_collected_errors_name_their_rows_across_chunks() -> None:
    table = TableSchema("s", "t", (ColumnMeta("id", mysql_type="int", is_key=True), ColumnMeta("v", mysql_type="int")))
    values: list[Any] = [1, "x", 2, 3, 2**63, 4, "y"]  # rows 1, 4 and 6 do not convert to an int column
    rows = [RowData(table, after=(i, v)) for i, v in enumerate(values)]
    entries = [_entry(table, rows, EventType.INSERT)]
    whole = entries_to_typed(entries, "d", 1, collect_errors=True)
    with mock.patch.object(typed_layout, "CHUNK_ROWS", 2):
        chunked = entries_to_typed(entries, "d", 1, collect_errors=True)
    (layout,) = chunked.layouts
    assert [(e.side, e.row, e.column) for e in chunked.errors[layout]] == [("after", r, 1) for r in (1, 4, 6)]
    assert chunked.errors == whole.errors
    assert chunked.images[layout].equals(whole.images[layout])
    assert chunked.images[layout].column("after").field("v").to_pylist() == [1, None, 2, 3, None, 4, None]


def test_no_change_rows_is_an_empty_typed_batch() -> None:
    typed = entries_to_typed([], "d", 1)
    assert typed.num_rows == 0 and typed.changes.schema == metadata_schema()
    assert dict(typed.images) == {} and dict(typed.layouts) == {}


_CONVERSIONS_PROBE = """
import datetime, decimal, json, sys
import pyarrow as pa
from canal.lake.forms.typed_layout import load_conversions
if sys.argv[1] == "loaded":
    load_conversions()
before = set(sys.modules)
columns = [
    ([datetime.datetime(2024, 1, 1)], pa.timestamp("us")),
    ([decimal.Decimal("1.5")], pa.decimal128(12, 2)),
    ([datetime.date(2024, 1, 1)], pa.date32()),
    (["x"], pa.string()),
    ([b"x"], pa.binary()),
    ([1.5], pa.float64()),
    ([1], pa.int64()),
]
for values, kind in columns:
    pa.array(values, kind)
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def test_after_load_conversions_building_columns_imports_nothing() -> None:
    """:func:`~canal.lake.forms.typed_layout.load_conversions` loads what pyarrow's first conversion of Python values
    loads (pandas, when installed), so the Spark reader does it before its parser's thread starts: after it, the
    conversions a typed batch's columns make import no module; without it, the first one does (what it spares)."""
    import importlib.util
    import json
    import subprocess
    import sys

    def imported(mode: str) -> list[str]:
        done = subprocess.run(
            [sys.executable, "-c", _CONVERSIONS_PROBE, mode], capture_output=True, text=True, timeout=120, check=True
        )
        found: list[str] = json.loads(done.stdout)
        return found

    assert imported("loaded") == []
    cold = imported("cold")
    assert cold and ("pandas" in cold) == (importlib.util.find_spec("pandas") is not None)
