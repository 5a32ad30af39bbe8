"""DeltaMirror's Arrow planning and source building against a row-by-row model of a batch.

The model walks the change rows in ``seq`` order with plain dicts (the mirror's documented semantics) and converts
canal text with Python's own parsers; the mirror does the same work with Arrow kernels and ``pyarrow.json``. Random
batches (several tables, small key spaces, TRUNCATE/ERASE, ALTER, null values, odd names, images with missing or
extra names, rows arriving out of order, several record batches) must plan to the same per-table changes, and a few
must leave the same rows in Delta.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from canal.lake import DeltaMirror
from canal.lake.compare import compare
from canal.lake.planning.images import OP_COLUMN, source, source_slow
from canal.lake.planning.plan import DropSchema, batch_steps, in_order, plan_tables
from canal.lake.store import names
from canal.lake.types import MirrorError, MirrorTypeError, typed_array, typed_strings

Row = dict[str, Any]

ARROW_SCHEMA = pa.schema(
    [
        ("seq", pa.int64()),
        ("schema", pa.string()),
        ("table", pa.string()),
        ("type", pa.string()),
        ("is_ddl", pa.bool_()),
        ("sql", pa.string()),
        ("keys", pa.string()),
        ("old_keys", pa.string()),
        ("after", pa.string()),
        ("columns", pa.string()),
    ]
)

# -- canal text by MySQL type, and the value the mirror should store for it (parsed without Arrow) -------------------


def _datetime(text: str) -> dt.datetime | None:
    return None if text.startswith("0000") else dt.datetime.fromisoformat(text)


def _date(text: str) -> dt.date | None:
    return None if text.startswith("0000") else dt.date.fromisoformat(text)


_datetimes = st.datetimes(min_value=dt.datetime(1970, 1, 1), max_value=dt.datetime(2100, 1, 1))
TYPES: dict[str, tuple[st.SearchStrategy[str], Callable[[str], Any]]] = {
    "int(11)": (st.integers(-(2**31), 2**31 - 1).map(str), int),
    "bigint(20) unsigned": (st.integers(0, 2**64 - 1).map(str), Decimal),
    "decimal(8,2)": (
        st.decimals(min_value=-999999, max_value=999999, places=2, allow_nan=False).map(str),
        Decimal,
    ),
    "datetime": (
        st.one_of(
            _datetimes.map(lambda d: d.isoformat(" ", timespec="seconds")),
            _datetimes.map(lambda d: d.isoformat(" ", timespec="microseconds")),
            st.just("0000-00-00 00:00:00"),
        ),
        _datetime,
    ),
    "date": (st.one_of(st.dates().map(dt.date.isoformat), st.just("0000-00-00")), _date),
    "varchar(20)": (st.text(max_size=6), str),
    "varbinary(8)": (st.binary(max_size=5).map(lambda b: b.decode("latin-1")), lambda t: t.encode("latin-1")),
}

# column names that need JSON escaping or are not ASCII; Delta rejects " ,;{}()\n\t=" in names and deltalake's
# MERGE a backtick, so those only go through planning
DELTA_NAMES = ["c", 'q"uote', "back\\slash", "ünï", "日本", "x\u2028y", "dot.ted", "😀", "_canal"]
NAMES = [*DELTA_NAMES, "tick`", "a b", "tab\t", ""]
TABLES = [("db", "t"), ("db", "tä"), ("db2", "t"), ("db", 'we"ird')]


@dataclass
class Spec:
    schema: str
    table: str
    layout: list[list[Any]]  # [name, mysql_type, is_key]

    @property
    def full(self) -> str:
        return f"{self.schema}.{self.table}"

    @property
    def keys(self) -> list[str]:
        return [c[0] for c in self.layout if c[2]]


@st.composite
def specs(draw: st.DrawFn, names: list[str] = NAMES) -> list[Spec]:
    chosen = draw(st.lists(st.sampled_from(TABLES), min_size=1, max_size=3, unique=True))
    out = []
    for schema, table in chosen:
        key = [["id", "int(11)", True]]
        if draw(st.booleans()):
            key.append([draw(st.sampled_from(["k", "ké", 'k"'])), "varchar(20)", True])
        columns = draw(st.lists(st.sampled_from(names), min_size=1, max_size=4, unique=True))
        types = [draw(st.sampled_from(sorted(TYPES))) for _ in columns]
        out.append(Spec(schema, table, key + [[n, t, False] for n, t in zip(columns, types, strict=True)]))
    return out


def _image_text(draw: st.DrawFn, image: dict[str, str | None]) -> str:
    """An after image as some JSON encoder might write it (the mirror must read them all alike)."""
    form = draw(st.integers(0, 9))
    if form == 0:
        return json.dumps(image, ensure_ascii=True)
    if form == 1:
        return json.dumps(image, ensure_ascii=False, separators=(", ", ": "))
    if form == 2 and image:  # a repeated name: the last one counts (json.loads) -- Arrow refuses, Python reads
        name = next(iter(image))
        return '{"' + name.replace("\\", "\\\\").replace('"', '\\"') + '":"junk",' + json.dumps(image)[1:]
    if form == 3:  # leading whitespace: fine JSON that the Arrow path leaves to Python
        return " " + json.dumps(image)
    return json.dumps(image, ensure_ascii=False, separators=(",", ":"))


@st.composite
def batches(draw: st.DrawFn, specs_: list[Spec], first_seq: int = 1) -> list[Row]:
    rows: list[Row] = []
    for seq in range(first_seq, first_seq + draw(st.integers(1, 40))):
        spec = draw(st.sampled_from(specs_))
        columns = json.dumps(spec.layout)
        base: Row = {
            "seq": seq,
            "schema": spec.schema,
            "table": spec.table,
            "is_ddl": False,
            "sql": None,
            "old_keys": None,
        }
        kind = draw(st.sampled_from(["INSERT"] * 4 + ["UPDATE"] * 4 + ["DELETE"] * 3 + ["DDL", "ODD"]))
        if kind == "DDL":
            ddl = draw(st.sampled_from(["TRUNCATE", "ERASE", "ALTER", "CREATE"]))
            sql = None if ddl == "CREATE" else f"{ddl} TABLE x"
            rows.append(base | {"type": ddl, "is_ddl": True, "sql": sql, "keys": None, "after": None, "columns": None})
            continue
        if kind == "ODD":  # rows the mirror ignores, and a row of another table (no name)
            odd = draw(st.sampled_from(["null keys", "null columns", "no table"]))
            row = base | {"type": "INSERT", "keys": '{"id":"1"}', "after": '{"id":"1"}', "columns": columns}
            if odd == "null keys":
                row["keys"] = None
            elif odd == "null columns":
                row["columns"] = None
            else:
                row["table"] = draw(st.sampled_from(["", None]))
            rows.append(row)
            continue
        key = {"id": str(draw(st.integers(0, 4)))}
        for name in spec.keys[1:]:
            key[name] = draw(st.sampled_from(["a", "b"]))
        image: dict[str, str | None] = dict(key)
        for name, type_text, is_key in spec.layout:
            if not is_key:
                image[name] = draw(st.none() | TYPES[type_text][0])
        if draw(st.integers(0, 9)) == 0:  # an image without some column: null there
            image.pop(draw(st.sampled_from([c[0] for c in spec.layout if not c[2]])))
        if draw(st.integers(0, 9)) == 0:  # an image with a column the layout does not have: ignored
            image["not in layout"] = draw(st.sampled_from(["1", None]))
        keys_text = json.dumps(key, ensure_ascii=False, separators=(",", ":"))
        after = None if kind == "DELETE" else _image_text(draw, image)
        row = base | {"type": kind, "keys": keys_text, "after": after, "columns": columns}
        if kind == "UPDATE" and draw(st.integers(0, 2)) == 0:  # the update changed the primary key
            old_id = (int(key["id"]) + draw(st.integers(1, 4))) % 5
            old = dict(key, id=str(old_id))
            row["old_keys"] = json.dumps(old, ensure_ascii=False, separators=(",", ":"))
        rows.append(row)
    return rows


def to_table(rows: list[Row], data: st.DataObject) -> pa.Table:
    """The rows as Arrow, shuffled (the mirror orders by seq) and cut into a few record batches."""
    shuffled = data.draw(st.permutations(rows)) if data.draw(st.booleans()) else rows
    table = pa.Table.from_pylist(shuffled, schema=ARROW_SCHEMA)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(rows)), max_size=3)))
    pieces = [table.slice(a, b - a) for a, b in zip([0, *cuts], [*cuts, len(rows)], strict=True)]
    return pa.concat_tables([p for p in pieces if p.num_rows] or [table])


# -- the model -------------------------------------------------------------------------------------------------------


@dataclass
class ModelPlan:
    schema: str
    table: str
    rows: int = 0
    layout: str | None = None
    ddl: list[tuple[int, str, str]] = field(default_factory=list)
    truncate: bool = False
    changes: dict[str, tuple[bool, str | None]] = field(default_factory=dict)  # keys text -> (delete, after)


def model_plan(rows: list[Row], only: frozenset[str] | None = None) -> dict[str, ModelPlan]:
    plans: dict[str, ModelPlan] = {}
    kept = -1  # the row's index among the rows the planner keeps (its batch row)
    for row in sorted(rows, key=lambda r: r["seq"]):
        full = f"{row['schema']}.{row['table']}"
        if not row["table"] or (only is not None and full not in only):
            continue
        kept += 1
        # a plan is named by its table's directory (canal.lake.store.names), filtered by ``schema.table``
        plan = plans.setdefault(names.directory(row["schema"], row["table"]), ModelPlan(row["schema"], row["table"]))
        plan.rows += 1
        if row["is_ddl"]:
            if row["type"] in ("TRUNCATE", "ERASE"):
                plan.changes.clear()
                plan.truncate = True
            plan.ddl.append((kept, row["type"], row["sql"] or ""))
        elif row["keys"] is not None and row["columns"] is not None:
            plan.layout = row["columns"]
            if row["old_keys"] is not None:  # a changed primary key: the old row goes
                plan.changes.pop(row["old_keys"], None)
                plan.changes[row["old_keys"]] = (True, None)
            plan.changes.pop(row["keys"], None)
            plan.changes[row["keys"]] = (row["type"] == "DELETE", row["after"])
    return plans


def typed_row(layout: list[list[Any]], image: dict[str, str | None]) -> Row:
    out: Row = {}
    for name, type_text, _key in layout:
        text = image.get(name)
        out[name] = None if text is None else TYPES[type_text][1](text)
    return out


def model_source(plan: ModelPlan) -> list[Row]:
    assert plan.layout is not None
    layout = json.loads(plan.layout)
    out = []
    for keys, (delete, after) in plan.changes.items():
        image = json.loads(keys if delete else after or "")
        out.append(typed_row(layout, image) | {OP_COLUMN: "d" if delete else "u"})
    return out


# -- planning without Delta ------------------------------------------------------------------------------------------


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_plan_and_source_match_the_model(data: st.DataObject) -> None:
    specs_ = data.draw(specs())
    rows = data.draw(batches(specs_))
    only = None
    if data.draw(st.integers(0, 4)) == 0:
        only = frozenset(data.draw(st.lists(st.sampled_from([s.full for s in specs_]), max_size=2)))
    plans = plan_tables(to_table(rows, data), only)
    expected = model_plan(rows, only)
    assert list(plans) == list(expected)
    for name, want in expected.items():
        got = plans[name]
        assert (got.schema, got.table, got.rows) == (want.schema, want.table, want.rows)
        assert (got.layout, got.ddl, got.truncate) == (want.layout, want.ddl, want.truncate)
        if want.layout is None:
            assert got.deletes is None
            continue
        typed, key_names = source(got, "null")  # the model reads zero dates as null
        assert key_names == [c[0] for c in json.loads(want.layout) if c[2]]
        assert typed.column_names[-1] == OP_COLUMN
        assert typed.to_pylist() == model_source(want)
        if got.deletes is not None:  # the Python path, kept for odd images, agrees with the Arrow path
            slow = source_slow(json.loads(want.layout), got.deletes, got.keys, got.after, "null")
            assert slow.equals(typed.combine_chunks()) or slow.to_pylist() == typed.to_pylist()


def test_truncate_drops_only_the_changes_before_it() -> None:
    layout = json.dumps([["id", "int(11)", True], ["v", "varchar(9)", False]])
    base = {"schema": "s", "table": "t", "sql": None, "columns": layout}

    def dml(seq: int, kind: str, key: int, value: str | None) -> Row:
        after = None if kind == "DELETE" else json.dumps({"id": str(key), "v": value})
        return base | {"seq": seq, "type": kind, "is_ddl": False, "keys": json.dumps({"id": str(key)}), "after": after}

    rows = [
        dml(1, "INSERT", 1, "before"),
        dml(2, "INSERT", 2, "before"),
        base | {"seq": 3, "type": "TRUNCATE", "is_ddl": True, "sql": "TRUNCATE t", "keys": None, "after": None},
        dml(4, "INSERT", 2, "after"),
        dml(5, "DELETE", 3, None),
    ]
    table = pa.Table.from_pylist(rows[::-1], schema=ARROW_SCHEMA)  # out of order: planned by seq
    plan = plan_tables(table, None)["s.t"]
    assert plan.truncate and plan.ddl == [(2, "TRUNCATE", "TRUNCATE t")] and plan.rows == 5
    typed, _keys = source(plan, "error")
    assert typed.to_pylist() == [{"id": 2, "v": "after", OP_COLUMN: "u"}, {"id": 3, "v": None, OP_COLUMN: "d"}]


def test_a_drop_database_is_a_step_after_the_rows_of_its_tables() -> None:
    """The rows of the database's tables before it are applied first; another database's rows wait for their own
    step; the statement names no table (its database is in its SQL, in any case: a database name is case sensitive)."""
    layout = json.dumps([["id", "int(11)", True]])

    def dml(seq: int, schema: str) -> dict[str, Any]:
        keys = json.dumps({"id": str(seq)})
        row = {"seq": seq, "schema": schema, "table": "t", "type": "INSERT", "is_ddl": False, "sql": None}
        return row | {"keys": keys, "after": keys, "columns": layout}

    drop = {"seq": 3, "schema": "other", "table": "", "type": "ERASE", "is_ddl": True, "sql": "DROP DATABASE `D`"}
    rows = [dml(1, "D"), dml(2, "d"), drop | {"keys": None, "after": None}, dml(4, "D")]
    steps = batch_steps(in_order(pa.Table.from_pylist(rows, schema=ARROW_SCHEMA)), None)
    shown = [step if isinstance(step, DropSchema) else step.to_pylist() for step in steps]
    assert shown == [[0], DropSchema("D"), [1], [3]]


def test_a_keyless_row_names_its_table() -> None:
    layout = json.dumps([["v", "int(11)", False]])
    rows = [
        {"seq": 2, "schema": "s", "table": "b", "type": "INSERT", "keys": "{}", "after": '{"v":"1"}'},
        {"seq": 1, "schema": "s", "table": "a", "type": "INSERT", "keys": "{}", "after": '{"v":"1"}'},
        {"seq": 0, "schema": "s", "table": "c", "type": "INSERT", "keys": "{}", "after": None},
    ]
    rows = [r | {"is_ddl": False, "sql": None, "columns": None if r["table"] == "c" else layout} for r in rows]
    with pytest.raises(MirrorError, match=r"^s\.a has no primary key"):
        plan_tables(pa.Table.from_pylist(rows, schema=ARROW_SCHEMA), None)
    # outside tables= it does not matter
    assert list(plan_tables(pa.Table.from_pylist(rows, schema=ARROW_SCHEMA), frozenset(["s.c"])))


@pytest.mark.parametrize(
    ("texts", "target", "want"),
    [
        (
            ["2024-01-02 03:04:05", "0000-00-00 00:00:00", None],
            pa.timestamp("us"),
            [dt.datetime(2024, 1, 2, 3, 4, 5), None, None],
        ),
        (["2024-01-02", "2024-00-00"] * 40, pa.date32(), [dt.date(2024, 1, 2), None] * 40),
        (["ab", None, "\xff\x00"], pa.binary(), [b"ab", None, b"\xff\x00"]),
        (["ab", None], pa.binary(), [b"ab", None]),
        (["é", None], pa.string(), ["é", None]),
    ],
)
def test_typed_strings_is_typed_array_from_arrow(texts: list[str | None], target: Any, want: list[Any]) -> None:
    """With zero_dates='null' (the explicit choice) zero dates are NULL; everything else converts exactly."""
    assert typed_array(texts, target, "null").to_pylist() == want
    chunked = pa.chunked_array([pa.array(texts[:1], pa.string()), pa.array(texts[1:], pa.string())])
    assert typed_strings(chunked, target, "null").to_pylist() == want
    assert typed_strings(pa.array(texts, pa.string()), target, "null").to_pylist() == want


@pytest.mark.parametrize(
    ("target", "year0", "unit"),
    [(pa.timestamp("us"), "0000-01-01 10:00:00.5", "us"), (pa.date32(), "0000-01-01", "D")],
)
def test_year_0_is_a_date_whatever_else_the_batch_holds(target: Any, year0: str, unit: str) -> None:
    """MySQL stores year 0 with a month and a day ('0000-01-01'): not a zero date. Arrow holds it and Python's datetime
    does not, so it stays a value whether the batch casts at once or value by value (a zero date beside it)."""
    want = int(np.datetime64(year0.replace(" ", "T"), unit).astype(np.int64))
    for zero_dates, texts in (("error", [year0]), ("null", [year0]), ("null", ["0000-00-00", year0])):
        typed = typed_strings(pa.array(texts, pa.string()), target, zero_dates)  # type: ignore[arg-type]
        assert typed.type == target
        assert typed.cast(pa.int64() if unit == "us" else pa.int32()).to_pylist()[-1] == want
        assert typed.null_count == len(texts) - 1
    with pytest.raises(MirrorTypeError, match="zero date '0000-00-00'"):
        typed_array(["0000-00-00", year0], target)


def test_compare_reads_dates_python_cannot_hold() -> None:
    """A mirror's year-0 cells compare with SELECT's (pymysql gives them as the server's text: datetime has no year
    0); other dates as canal renders them; a zero date SELECT gives as text differs from the mirror's NULL."""
    mirror = pa.table(
        {
            "id": [1, 2, 3],
            "d": pa.array(np.array(["0000-01-01", "2024-02-29", "NaT"], "datetime64[D]")),
            "t": pa.array(
                np.array(["0000-01-01T10:00:00.5", "1000-01-01T00:00:00.001", "2024-01-02"], "datetime64[us]")
            ),
        }
    )
    rows = [
        {"id": 1, "d": "0000-01-01", "t": "0000-01-01 10:00:00.500"},
        {"id": 2, "d": dt.date(2024, 2, 29), "t": dt.datetime(1000, 1, 1, 0, 0, 0, 1000)},
        {"id": 3, "d": None, "t": dt.datetime(2024, 1, 2)},
    ]
    assert compare(mirror, rows, ["id"]).equal
    changes = [(0, {"t": "0000-01-01 10:00:00.501"}), (0, {"d": "0000-00-00"}), (2, {"d": "0000-00-00"})]
    for at, changed in [*changes, (2, {"t": dt.datetime(2024, 1, 2, 0, 0, 1)})]:
        other = [row | changed if i == at else row for i, row in enumerate(rows)]
        result = compare(mirror, other, ["id"])
        assert result.different == ((str(at + 1),),), changed


@pytest.mark.parametrize(
    ("texts", "target", "bad"),
    [
        (["1.5", "x", "2"] * 40, pa.decimal128(4, 1), "'x'"),
        (["1.55"], pa.decimal128(4, 1), "'1.55'"),  # would round
        (["123456789012345678901"], pa.decimal128(20, 0), "123456789012345678901"),  # 21 digits
        (["9223372036854775808"], pa.int64(), "9223372036854775808"),
        (["2024-13-01"], pa.date32(), "2024-13-01"),
        (["0000-00-00 00:00:00"], pa.timestamp("us"), "zero date"),  # the default: zero dates are errors
        (["ā"], pa.binary(), "latin-1"),
    ],
)
def test_a_value_that_does_not_convert_is_an_error_never_null(texts: list[str], target: Any, bad: str) -> None:
    for convert in (
        lambda: typed_array(texts, target),
        lambda: typed_strings(pa.array(texts, pa.string()), target),
        lambda: typed_strings(pa.chunked_array([pa.array(texts, pa.string())]), target),
    ):
        with pytest.raises(MirrorTypeError, match=bad):
            convert()


def test_the_mirror_names_table_column_and_value_and_writes_nothing(tmp_path: Path) -> None:
    layout = json.dumps([["id", "int(11)", True], ["d", "date", False]])
    row = {"seq": 1, "schema": "s", "table": "t", "type": "INSERT", "is_ddl": False, "sql": None}
    rows = [row | {"keys": '{"id":"1"}', "after": '{"id":"1","d":"0000-00-00"}', "columns": layout, "old_keys": None}]
    mirror = DeltaMirror(tmp_path)
    with pytest.raises(MirrorTypeError, match=r"^s\.t: column 'd': zero date '0000-00-00'"):
        mirror.apply(pa.Table.from_pylist(rows, schema=ARROW_SCHEMA), 1)
    assert not (tmp_path / "s.t").exists()  # nothing written
    mirror.close()  # another mirror writes the root next (one at a time: canal.lake.identity.lease)
    DeltaMirror(tmp_path, zero_dates="null").apply(pa.Table.from_pylist(rows, schema=ARROW_SCHEMA), 1)
    assert DeltaMirror(tmp_path).read("s", "t").to_pylist() == [{"id": 1, "d": None}]
    with pytest.raises(MirrorError, match="zero_dates"):
        DeltaMirror(tmp_path, zero_dates="string")  # type: ignore[arg-type]


# -- a few round trips through Delta ---------------------------------------------------------------------------------


def _rows_of(table: pa.Table, keys: list[str]) -> list[Row]:
    return sorted(table.to_pylist(), key=lambda r: tuple(str(r[k]) for k in keys))


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_delta_contents_match_the_model(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    root: Path = tmp_path_factory.mktemp("mirror")
    specs_ = data.draw(specs(DELTA_NAMES))
    mirror = DeltaMirror(root, zero_dates="null")
    state: dict[str, dict[str, Row]] = {s.full: {} for s in specs_}
    seq = 1
    for batch_id in range(data.draw(st.integers(1, 3))):
        rows = [r for r in data.draw(batches(specs_, seq)) if r["type"] != "ALTER"]  # no schema changes here
        seq += len(rows) + 1
        mirror.apply(to_table(rows, data), batch_id)
        for row in sorted(rows, key=lambda r: r["seq"]):
            if not row["table"]:
                continue
            spec = next(s for s in specs_ if s.schema == row["schema"] and s.table == row["table"])
            table_state = state[spec.full]
            if row["type"] in ("TRUNCATE", "ERASE"):
                table_state.clear()
            elif not row["is_ddl"] and row["keys"] is not None and row["columns"] is not None:
                if row["old_keys"] is not None:
                    table_state.pop(row["old_keys"], None)
                if row["type"] == "DELETE":
                    table_state.pop(row["keys"], None)
                else:
                    table_state[row["keys"]] = typed_row(spec.layout, json.loads(row["after"]))
    for spec in specs_:
        want = sorted(state[spec.full].values(), key=lambda r: tuple(str(r[k]) for k in spec.keys))
        if not mirror.table_path(spec.schema, spec.table).exists():
            assert want == []
            continue
        got = mirror.read(spec.schema, spec.table)
        assert _rows_of(got, spec.keys) == want


def test_images_take_the_arrow_path_unless_odd() -> None:
    from canal.lake.planning.images import parse_images

    layout = [["id", "int(11)", True], ['q"', "varchar(5)", False], ["d", "date", False]]
    plain = pa.array(['{"id":"1","q\\"":"é","d":"0000-00-00"}', '{"id":"2","extra":{"x":1}}'])
    columns = parse_images(plain, layout, "null")
    assert columns is not None
    assert [c.to_pylist() for c in columns] == [[1, 2], ["é", None], [None, None]]
    for odd in ['{"id":"1","id":"2"}', ' {"id":"1"}', '{"id":1}', '{"id":"1"} {"id":"2"}']:
        assert parse_images(pa.array([odd, '{"id":"3"}']), layout) is None, odd
    assert parse_images(pa.array(['{"id":"1"}', None]), layout) is None
    assert parse_images(plain, [*layout, ["id", "int(11)", False]]) is None  # a name twice: Python's outcome
