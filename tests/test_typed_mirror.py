"""DeltaMirror fed typed batches (:class:`~canal.lake.forms.typed_batch.TypedBatch`, planned by
:mod:`canal.lake.forms.typed_plan`) ends equal to a DeltaMirror fed the JSON change rows of the same entries: every
table, value for value, and the same errors -- across DDL, every type family, keys moved, merge_on_read and
copy_on_write.

The entries come from the fake binlog read by an ``Instance`` (every type family, an ALTER between rows, a DROP), and
from hypothesis (random layouts and rows, DDL and XA rows between).
``TYPED_MIRROR_EXAMPLES`` (default 10) sets the property test's example count, for a longer run. The batches the typed
mirror takes from XA or two layouts of one table in a step go through their change rows (``TypedBatch.rows``); the
others must not, which the tests count.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from unittest import mock

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("deltalake")

from test_typed_changes import COLUMNS, _entry, _one_column, _read_all, _row, _xa_end, batches

from canal.config import InstanceConfig, MasterConfig, StoreConfig
from canal.instance import Instance
from canal.lake.forms import typed_layout
from canal.lake.forms.changes import entries_to_batch
from canal.lake.forms.typed_batch import TypedBatch, entries_to_typed
from canal.lake.forms.typed_plan import RowsNeeded
from canal.lake.mirror import DeltaMirror
from canal.lake.types import MirrorError
from canal.protocol import ColumnMeta, Entry, EventType, RowData, TableSchema
from canal.spark.batches import run_batches
from canal.testing.fake import FakeMysql

EXAMPLES = int(os.environ.get("TYPED_MIRROR_EXAMPLES", "10"))
MODES = ("merge_on_read", "copy_on_write")


@attrs.define
class Fed:
    """What a mirror ended with: its tables' rows (``repr`` of each value: NaN equal to NaN, -0.0 apart from 0.0), or
    the error that stopped it; and how many typed batches went through their change rows."""

    tables: dict[str, list[tuple[str, ...]]] = attrs.field(factory=dict)
    error: tuple[str, str] | None = None
    results: list[dict[str, str]] = attrs.field(factory=list)
    through_rows: int = 0


def _state(mirror: DeltaMirror) -> dict[str, list[tuple[str, ...]]]:
    """Each table's rows; or the error reading it gives (a table whose layout changed with no DDL between, which
    random layouts make, may not read back: it must fail alike on both paths)."""
    mirror.flush_staged()
    out = {}
    for schema, table in mirror.tables():
        try:
            rows = mirror.read(schema, table)
        except MirrorError as exc:
            out[f"{schema}.{table}"] = [(type(exc).__name__, str(exc).replace(mirror.root, "<root>"))]
            continue
        names = sorted(rows.column_names)
        out[f"{schema}.{table}"] = sorted(tuple(repr(r[n]) for n in names) for r in rows.to_pylist())
        out[f"{schema}.{table}:columns"] = [tuple(names)]
    return out


def _typed(chunk: Sequence[Entry], zero_dates: Any, fed: Fed) -> TypedBatch:
    def rows() -> Any:
        fed.through_rows += 1
        return entries_to_batch(chunk, "d", 0)

    # the before images of half the batches hold the key columns alone (as run_batches builds them for a mirror);
    # images are converted in chunks of one to three (the errors collected must name their rows across chunks)
    with mock.patch.object(typed_layout, "CHUNK_ROWS", 1 + len(chunk) % 3):
        typed = entries_to_typed(
            chunk, "d", 0, zero_dates=zero_dates, collect_errors=True, before_keys_only=len(chunk) % 2 == 1
        )
    return attrs.evolve(typed, rows=rows)


def _feed(root: Path, chunks: Sequence[Sequence[Entry]], *, typed: bool, mode: str, zero_dates: Any = "error") -> Fed:
    fed = Fed()
    with DeltaMirror(str(root), mode=mode, zero_dates=zero_dates) as mirror:
        for batch_id, chunk in enumerate(chunks, start=1):
            batch = _typed(chunk, zero_dates, fed) if typed else entries_to_batch(chunk, "d", 0)
            try:
                result = mirror.apply(batch, batch_id)
            except MirrorError as exc:
                kind = type(exc).__name__.replace("TypedChangeError", "MirrorTypeError")
                fed.error = (kind, str(exc).replace(str(root), "<root>"))
                break
            fed.results.append(dict(result.tables))
        fed.tables = _state(mirror)
    return fed


def _both(tmp: Path, chunks: Sequence[Sequence[Entry]], mode: str, zero_dates: Any = "error") -> tuple[Fed, Fed]:
    json_fed = _feed(tmp / "json", chunks, typed=False, mode=mode, zero_dates=zero_dates)
    typed_fed = _feed(tmp / "typed", chunks, typed=True, mode=mode, zero_dates=zero_dates)
    assert typed_fed.tables == json_fed.tables
    assert typed_fed.error == json_fed.error
    assert typed_fed.results == json_fed.results
    return json_fed, typed_fed


@pytest.fixture(scope="module")
def decoded() -> list[Entry]:
    """Every type family inserted, updated (keys moved and not) and deleted, a second table, an ALTER between rows of
    one table and a DROP, read from the fake binlog."""
    cols = ", ".join(f"`{name}` {definition}" for name, definition, _, _ in COLUMNS)
    with FakeMysql(name="typed_mirror_types", mariadb=True, charset="utf8mb4") as fake:
        fake.execute("CREATE DATABASE db")
        fake.execute(f"CREATE TABLE db.t (`id` INT NOT NULL PRIMARY KEY, {cols}) DEFAULT CHARSET=utf8mb4")
        fake.execute("CREATE TABLE db.k (a VARCHAR(8) NOT NULL, b DOUBLE NOT NULL, v INT, PRIMARY KEY (b, a))")
        with fake.transaction() as tx:
            tx.insert_many("db.t", [_row(1, 0), _row(2, 1), _row(3, None)])
            tx.insert_many("db.k", [{"a": "x", "b": 0.5, "v": 1}, {"a": "y", "b": 1.5, "v": None}])
        with fake.transaction() as tx:
            tx.update("db.t", _row(1, 0), _row(1, 1))
            tx.update("db.t", _row(3, None), _row(30, 0))  # the key moves
            tx.update("db.k", {"a": "x", "b": 0.5, "v": 1}, {"a": "x", "b": -2.0, "v": 2})  # a compound key moves
            tx.delete("db.t", _row(2, 1))
        with fake.transaction() as tx:
            tx.update("db.k", {"a": "y", "b": 1.5, "v": None}, {"a": "y", "b": 1.5, "v": 3})
        fake.execute("ALTER TABLE db.t ADD COLUMN extra VARCHAR(5) NOT NULL DEFAULT '' AFTER id", schema="db")
        with fake.transaction() as tx:
            tx.insert("db.t", {**_row(4, 1), "extra": "new"})
            tx.update("db.t", _row(30, 0) | {"extra": ""}, _row(31, 1) | {"extra": "m"})
        fake.execute("CREATE TABLE db.z (id BIGINT UNSIGNED NOT NULL PRIMARY KEY, v INT)")
        with fake.transaction() as tx:
            tx.insert("db.z", {"id": 2**64 - 1, "v": 1})
        fake.execute("DROP TABLE db.z", schema="db")
        return _read_all(fake, "DROP TABLE")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("cut", [3, 1000])
def test_every_type_family_with_ddl_ends_equal(decoded: list[Entry], tmp_path: Path, mode: str, cut: int) -> None:
    chunks = [decoded[i : i + cut] for i in range(0, len(decoded), cut)]
    json_fed, typed_fed = _both(tmp_path, chunks, mode)
    assert json_fed.error is None
    assert typed_fed.through_rows == 0  # no XA, no foreign keys' actions: typed all the way
    assert "db.t" in json_fed.tables and "db.k" in json_fed.tables and "db.z" not in json_fed.tables  # DROP followed
    assert len(json_fed.tables["db.t"]) == 3  # 1, 31 and 4 (2 deleted, 30 moved)
    assert len(json_fed.tables["db.k"]) == 2


def _one_layout_per_table(entries: list[Entry]) -> bool:
    """Whether each table's rows have one layout: a table whose rows change layout with no DDL in the stream (which
    no server writes) leaves a mirror table that deltalake may refuse to merge or read in data-dependent ways; a
    step holding two layouts of a table is tested on its own below."""
    layouts: dict[str, set[Any]] = {}
    for entry in entries:
        change = entry.row_change
        if change is not None and change.rows:
            table = change.rows[0].table
            layouts.setdefault(table.full_name, set()).add(table.columns)
    return all(len(found) == 1 for found in layouts.values())


@settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)
@given(entries=batches().filter(_one_layout_per_table), cut=st.integers(0, 4), mode=st.sampled_from(MODES))
def test_random_batches_end_equal(
    tmp_path_factory: pytest.TempPathFactory, entries: list[Entry], cut: int, mode: str
) -> None:
    tmp = tmp_path_factory.mktemp("typed_mirror")
    chunks = [c for c in (entries[:cut], entries[cut:]) if c]
    _both(tmp, chunks, mode)


def _dated(key: int, value: Any, event: EventType, before: Any = None) -> Entry:
    table = TableSchema("s", "t", (ColumnMeta("id", mysql_type="int", is_key=True), ColumnMeta("v", mysql_type="date")))
    if event is EventType.INSERT:
        row = RowData(table, after=(key, value))
    elif event is EventType.DELETE:
        row = RowData(table, before=(key, value))
    else:
        row = RowData(table, before=(key, before), after=(key, value))
    return _entry(table, [row], event)


ZERO = "0000-00-00"
GOOD = dt.date(2020, 1, 2)


@pytest.mark.parametrize(
    "entries",
    [
        [_dated(1, ZERO, EventType.INSERT), _dated(1, GOOD, EventType.UPDATE, ZERO)],  # superseded: applied
        [_dated(1, GOOD, EventType.INSERT), _dated(1, ZERO, EventType.DELETE)],  # a delete reads the key only
        [_dated(1, ZERO, EventType.INSERT)],  # the last change: the batch fails, nothing written
        [_dated(1, GOOD, EventType.INSERT), _dated(2, ZERO, EventType.UPDATE, GOOD)],
    ],
)
@pytest.mark.parametrize("zero_dates", ["error", "null"])
def test_values_that_do_not_convert_fail_where_the_json_path_fails(
    tmp_path: Path, entries: list[Entry], zero_dates: str
) -> None:
    json_fed, typed_fed = _both(tmp_path, [entries], "merge_on_read", zero_dates)
    if json_fed.error is not None:
        assert json_fed.error[0] == "MirrorTypeError" and "zero date" in json_fed.error[1]
        assert json_fed.tables == {}  # nothing of the batch written
    assert typed_fed.through_rows == 0


def test_a_value_beyond_its_type_fails_the_typed_batch_with_the_json_paths_message(tmp_path: Path) -> None:
    json_fed, _typed_fed = _both(tmp_path, [_one_column("int(11)", 2**63)], "copy_on_write")
    assert json_fed.error is not None and "s.t: column 'v'" in json_fed.error[1]


def _xa_rows() -> list[Entry]:
    """An insert inside an XA transaction (its row carries the xid) and the end of its first phase (an XAPREPARE row):
    the mirror holds the row until its XA COMMIT."""
    table = TableSchema("s", "x", (ColumnMeta("id", mysql_type="int", is_key=True),))
    insert = _entry(table, [RowData(table, after=(1,))], EventType.INSERT)
    insert = attrs.evolve(insert, header=attrs.evolve(insert.header, props={"XA_XID": "x1"}))
    return [insert, _xa_end()]


def test_xa_goes_through_the_change_rows_and_without_them_fails_before_writing(tmp_path: Path) -> None:
    entries = _xa_rows()
    json_fed, typed_fed = _both(tmp_path, [entries], "merge_on_read")
    assert typed_fed.through_rows == 1
    assert json_fed.error is None and json_fed.tables == {}  # held until its XA COMMIT
    with DeltaMirror(str(tmp_path / "bare")) as mirror:
        with pytest.raises(RowsNeeded, match="change rows"):
            mirror.apply(entries_to_typed(entries, "d", 0), 1)
        assert mirror.tables() == [] and mirror.committed_batch_ids("s", "x") == []


def _fake_entries(fake: FakeMysql) -> None:
    fake.execute("CREATE DATABASE db")
    fake.execute("CREATE TABLE db.t (id INT NOT NULL PRIMARY KEY, d DECIMAL(10,2), s VARCHAR(10), b BLOB)")
    for n in range(5):
        with fake.transaction() as tx:
            tx.insert_many("db.t", [{"id": n * 10 + i, "d": None, "s": f"r{i}", "b": b"\x00"} for i in range(10)])
            tx.update(
                "db.t",
                {"id": n * 10, "d": None, "s": "r0", "b": b"\x00"},
                {"id": n * 10 + 100, "d": None, "s": "m", "b": b"x"},
            )
            tx.delete("db.t", {"id": n * 10 + 1, "d": None, "s": "r1", "b": b"\x00"})
    fake.execute("ALTER TABLE db.t ADD COLUMN e INT NOT NULL DEFAULT 0", schema="db")
    with fake.transaction() as tx:
        tx.insert("db.t", {"id": 999, "d": None, "s": "new", "b": b"", "e": 7})


class _Counting(DeltaMirror):
    """A DeltaMirror counting the typed batches it is handed."""

    typed_batches = 0

    def apply(self, changes: Any, batch_id: int, **kwargs: Any) -> Any:
        if isinstance(changes, TypedBatch):
            type(self).typed_batches += 1
        return super().apply(changes, batch_id, **kwargs)


def _run(fake: FakeMysql, fn: Callable[[Any, int], Any]) -> None:
    master = MasterConfig(address=fake.address, journal_name="mysql-bin.000001", position=4)
    config = InstanceConfig(destination="d", master=master, filter_regex=r"db\..*", store=StoreConfig(buffer_size=64))
    end = fake.master_status()
    inst = Instance(config)
    inst.start()
    try:
        deadline = time.monotonic() + 60
        run_batches(
            inst,
            None,
            fn,
            batch_size=7,
            timeout=0.2,
            until=lambda stats: stats.reached(end.journal_name, end.position) or time.monotonic() > deadline,
        )
    finally:
        inst.stop()


def test_run_batches_hands_a_mirror_typed_batches(tmp_path: Path) -> None:
    with FakeMysql(name="typed_mirror", mariadb=True) as fake:
        _fake_entries(fake)
        with DeltaMirror(str(tmp_path / "json")) as json_mirror:
            _run(fake, lambda df, batch_id: json_mirror.apply(df, batch_id))  # not a DeltaMirror: change rows
            expected = _state(json_mirror)
        with _Counting(str(tmp_path / "typed")) as typed_mirror:
            _run(fake, typed_mirror)
            got = _state(typed_mirror)
    assert _Counting.typed_batches >= 1
    assert got == expected
    assert len(expected["db.t"]) == 5 * 9 + 1


def test_a_tables_rows_in_two_layouts_of_one_step_go_through_the_change_rows(tmp_path: Path) -> None:
    # the DDL between the layouts is not in the batch: the change rows' path reads the rows under the last layout
    one = TableSchema("s", "a", (ColumnMeta("id", mysql_type="int", is_key=True), ColumnMeta("v", mysql_type="int")))
    two = TableSchema("s", "a", (*one.columns, ColumnMeta("w", mysql_type="varchar(4)")))
    entries = [
        _entry(one, [RowData(one, after=(1, 10)), RowData(one, after=(2, 20))], EventType.INSERT),
        _entry(two, [RowData(two, after=(3, 30, "x")), RowData(two, before=(1, 10, None), after=(1, 11, "y"))]),
    ]
    json_fed, typed_fed = _both(tmp_path, [entries], "copy_on_write")
    assert typed_fed.through_rows == 1
    assert json_fed.error is None and len(json_fed.tables["s.a"]) == 3


def test_a_typed_batch_replayed_is_skipped_and_an_empty_one_changes_nothing(
    tmp_path: Path, decoded: list[Entry]
) -> None:
    fed = Fed()
    with DeltaMirror(str(tmp_path / "m")) as mirror:
        first = mirror.apply(_typed(decoded, "error", fed), 5)
        state = _state(mirror)
        again = mirror.apply(_typed(decoded, "error", fed), 5)
        assert set(again.tables.values()) == {"skipped"} and set(first.tables.values()) == {"applied"}
        empty = mirror.apply(entries_to_typed([], "d", 0), 6)
        assert empty.tables == {} and empty.rows == 0
        assert _state(mirror) == state
    assert fed.through_rows == 0
