"""The mirror applies partial row images (``binlog_row_image`` MINIMAL / NOBLOB, written by the fake binlog) as
partial updates of the rows their keys name, in every form it takes batches -- change rows, typed batches, packed
batches, VARIANT change rows -- merge-on-read (through folds) and copy-on-write; and stops with
``MirrorPartialImageError``, nothing written, where it cannot complete an image. A hypothesis test plays random
inserts, partial updates (random columns, moved keys) and deletes under random row images against a dict model
(``PARTIAL_MODEL_EXAMPLES``, default 12, sets its example count for a longer run)."""

from __future__ import annotations

import functools
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("deltalake")

import pyarrow as pa

from canal.config import InstanceConfig, MasterConfig
from canal.instance import Instance
from canal.lake import DeltaMirror, MirrorPartialImageError
from canal.lake.forms.changes import entries_to_batch
from canal.lake.forms.typed_batch import entries_to_typed
from canal.lake.forms.variant_changes import entries_to_variant_batch
from canal.protocol import Entry, EntryType
from canal.spark.packed_cut import PackedCut
from canal.testing.fake import FakeMysql

FORMS = ("rows", "typed", "packed", "variant")
EXAMPLES = int(os.environ.get("PARTIAL_MODEL_EXAMPLES", "12"))
COLUMNS = ("id", "a", "b", "doc")
TABLE_DDL = "CREATE TABLE d.t (id INT PRIMARY KEY, a INT, b VARCHAR(20), doc TEXT)"


def _form(entries: list[Entry], form: str, batch: int) -> Any:
    """The batch of ``entries`` as the mirror gets it in ``form``."""
    if form == "rows":
        return entries_to_batch(entries, "d", batch)
    if form == "typed":  # as run_batches hands a DeltaMirror its batches: change rows made if asked
        typed = entries_to_typed(entries, "d", batch, collect_errors=True, before_keys_only=True)
        return attrs.evolve(typed, rows=functools.partial(entries_to_batch, entries, "d", batch))
    if form == "packed":
        cut = PackedCut()
        assert cut.add(entries, "d", batch, 0) is not None
        return cut.packed()
    return pa.Table.from_batches([entries_to_variant_batch(entries, "d", batch)])


class Reader:
    """The fake's binlog read by an Instance, a transaction at a time (its entries up to its end)."""

    def __init__(self, fake: FakeMysql) -> None:
        config = InstanceConfig(
            destination="partial",
            master=MasterConfig(address=fake.address, journal_name="mysql-bin.000001", position=4),
        )
        self.fake = fake
        self.inst = Instance(config)
        self.inst.start()

    def transactions(self) -> Iterator[list[Entry]]:
        """Each transaction (or DDL) written so far and not read yet, its entries in order (read until the entries
        reach the end of the fake's binlog)."""
        end = (self.fake.current_file, self.fake.end)
        entries: list[Entry] = []
        deadline = time.monotonic() + 30
        while not entries or (entries[-1].header.log_file, entries[-1].header.next_offset) < end:
            assert time.monotonic() < deadline, f"the instance did not reach {end}"
            entries.extend(self.inst.get(100_000, timeout=0.2, linger=0.05).entries)
        part: list[Entry] = []
        for entry in entries:
            part.append(entry)
            if entry.is_boundary:
                yield part
                part = []
        assert not part

    def close(self) -> None:
        self.inst.stop()


@pytest.fixture
def reader(fake_mysql: FakeMysql) -> Iterator[Reader]:
    fake_mysql.execute(TABLE_DDL)
    made = Reader(fake_mysql)
    yield made
    made.close()


def _rows(mirror: DeltaMirror) -> list[dict[str, Any]]:
    return sorted(mirror.read("d", "t").to_pylist(), key=lambda r: r["id"])


def _apply(mirror: DeltaMirror, reader: Reader, form: str, batch: int) -> Any:
    entries = [e for part in reader.transactions() for e in part]
    return mirror.apply(_form(entries, form, batch), batch)


@pytest.mark.parametrize(
    ("form", "mode"),
    [*((form, "merge_on_read") for form in FORMS), ("rows", "copy_on_write"), ("typed", "copy_on_write")],
)
def test_partial_updates_merge_with_the_rows_state_through_folds(
    fake_mysql: FakeMysql, reader: Reader, tmp_path: Path, form: str, mode: str
) -> None:
    """insert whole, update one column (MINIMAL), another (NOBLOB), fold, update again: each batch reads exactly,
    before and after the fold, as the source's rows."""
    fake = fake_mysql
    mirror = DeltaMirror(tmp_path / "m", mode=mode, background_folds=False)  # type: ignore[arg-type]
    fake.insert_many("d.t", [{"id": i, "a": i, "b": f"b{i}", "doc": f"doc{i}"} for i in range(1, 4)])
    _apply(mirror, reader, form, 1)
    with fake.transaction(row_image="MINIMAL") as tx:
        tx.update("d.t", {"id": 1}, {"b": "changed"})
    _apply(mirror, reader, form, 2)
    assert _rows(mirror) == fake.rows("d.t")
    with fake.transaction(row_image="NOBLOB") as tx:
        tx.update("d.t", {"id": 1}, {"a": 100})  # doc (TEXT) left out of both images
        tx.update("d.t", {"id": 2}, {"doc": "new doc"})  # a TEXT column written: carried
    _apply(mirror, reader, form, 3)
    assert _rows(mirror) == fake.rows("d.t")
    mirror.fold()
    assert _rows(mirror) == fake.rows("d.t")
    with fake.transaction(row_image="MINIMAL") as tx:
        tx.update("d.t", {"id": 1}, {"id": 10, "a": None})  # the key moved, a column set NULL: the rest kept
        tx.update("d.t", {"id": 3}, {"b": None})
        tx.update("d.t", {"id": 3}, {"doc": "d3"})  # two partial updates of one key in one batch
    _apply(mirror, reader, form, 4)
    assert _rows(mirror) == fake.rows("d.t")
    mirror.fold()
    assert (
        _rows(mirror)
        == fake.rows("d.t")
        == [
            {"id": 2, "a": 2, "b": "b2", "doc": "new doc"},
            {"id": 3, "a": 3, "b": None, "doc": "d3"},
            {"id": 10, "a": None, "b": "changed", "doc": "doc1"},
        ]
    )
    mirror.close()


def test_a_partial_update_after_a_ddl_in_its_batch_reads_the_evolved_row(
    fake_mysql: FakeMysql, reader: Reader, tmp_path: Path
) -> None:
    fake = fake_mysql
    mirror = DeltaMirror(tmp_path / "m", background_folds=False)
    fake.insert("d.t", {"id": 1, "a": 1, "b": "x", "doc": "d"})
    _apply(mirror, reader, "rows", 1)
    with fake.transaction(row_image="MINIMAL") as tx:
        tx.update("d.t", {"id": 1}, {"a": 2})
    fake.execute("ALTER TABLE d.t ADD COLUMN e INT, DROP COLUMN b")
    with fake.transaction(row_image="MINIMAL") as tx:
        tx.update("d.t", {"id": 1}, {"e": 7})
    _apply(mirror, reader, "rows", 2)
    assert _rows(mirror) == fake.rows("d.t") == [{"id": 1, "a": 2, "doc": "d", "e": 7}]


def _state(mirror: DeltaMirror) -> tuple[list[dict[str, Any]], int | None]:
    return _rows(mirror), mirror.version("d", "t")


@pytest.mark.parametrize("form", FORMS)
def test_what_cannot_be_completed_stops_typed_with_nothing_written(
    fake_mysql: FakeMysql, reader: Reader, tmp_path: Path, form: str
) -> None:
    fake = fake_mysql
    mirror = DeltaMirror(tmp_path / "m", background_folds=False)
    fake.insert("d.t", {"id": 1, "a": 1, "b": "x", "doc": "d"})
    _apply(mirror, reader, form, 1)
    before = _state(mirror)
    # an INSERT that leaves columns to their defaults: MINIMAL logs only the ones it names
    fake.insert("d.t", {"id": 5, "a": 5})
    with fake.transaction(row_image="MINIMAL") as tx:
        tx.update("d.t", {"id": 1}, {"b": "y"})  # completable, in the same batch: not written either
        tx.insert("d.t", {"id": 2, "b": "q"})
    entries = [e for part in reader.transactions() for e in part]
    with pytest.raises(MirrorPartialImageError) as stop:
        mirror.apply(_form(entries, form, 2), 2)
    assert (stop.value.schema, stop.value.table) == ("d", "t")
    assert stop.value.columns == ("a", "doc") and stop.value.key == '{"id":"2"}'
    assert "INSERT that does not carry every column" in str(stop.value)
    assert _state(mirror) == before


@pytest.mark.parametrize("form", ["rows", "typed"])
@pytest.mark.parametrize("ddl_first", [False, True], ids=["no_ddl", "after_ddl"])
def test_a_partial_update_of_a_row_the_mirror_lacks_stops_before_it_is_written(
    fake_mysql: FakeMysql, reader: Reader, tmp_path: Path, form: str, ddl_first: bool
) -> None:
    """A mirror that started after the row was inserted (no snapshot): the update cannot be completed. Without a DDL
    of the table in the batch nothing of the batch is written; after one, the steps before it are."""
    fake = fake_mysql
    fake.insert("d.t", {"id": 1, "a": 1, "b": "x", "doc": "d"})
    list(reader.transactions())  # not mirrored
    mirror = DeltaMirror(tmp_path / "m", background_folds=False)
    fake.insert("d.t", {"id": 2, "a": 2, "b": "y", "doc": "e"})
    _apply(mirror, reader, form, 1)
    before = _state(mirror)
    fake.insert("d.t", {"id": 3, "a": 3, "b": "z", "doc": "f"})
    if ddl_first:
        fake.execute("ALTER TABLE d.t ADD COLUMN e INT")
    with fake.transaction(row_image="MINIMAL") as tx:
        tx.update("d.t", {"id": 1}, {"b": "changed"})
    entries = [e for part in reader.transactions() for e in part]
    with pytest.raises(MirrorPartialImageError, match="the mirror does not hold the row it updates") as stop:
        mirror.apply(_form(entries, form, 2), 2)
    assert stop.value.key == '{"id":"1"}' and stop.value.columns == ("id", "a", "doc", *(("e",) if ddl_first else ()))
    if not ddl_first:
        assert _state(mirror) == before
    else:  # the steps before the DDL and the DDL are applied (and journaled): the update's own is not
        rows, _version = _state(mirror)
        assert rows == [
            {"id": 2, "a": 2, "b": "y", "doc": "e", "e": None},
            {"id": 3, "a": 3, "b": "z", "doc": "f", "e": None},
        ]


def test_a_partial_update_of_a_key_the_batch_deleted_stops(tmp_path: Path) -> None:
    """Hand-made change rows (a server never logs it): an UPDATE of a row a DELETE before it removed."""
    layout = json.dumps([["id", "int", True], ["a", "int", False]], separators=(",", ":"))
    rows = pa.table(
        {
            "seq": pa.array([1, 2], pa.int64()),
            "schema": ["d", "d"],
            "table": ["t", "t"],
            "type": ["DELETE", "UPDATE"],
            "is_ddl": [False, False],
            "sql": pa.nulls(2, pa.string()),
            "keys": ['{"id":"1"}', '{"id":"1"}'],
            "old_keys": pa.nulls(2, pa.string()),
            "after": [None, '{"a":"2"}'],
            "columns": [layout, layout],
            "after_absent": [None, '["id"]'],
        }
    )
    mirror = DeltaMirror(tmp_path / "m", background_folds=False)
    with pytest.raises(MirrorPartialImageError, match="an UPDATE of a row the batch deleted before it"):
        mirror.apply(rows, 1)
    no_key = rows.set_column(6, "keys", pa.array(["{}", "{}"]))
    with pytest.raises(MirrorPartialImageError, match=r"neither of its images carries the whole key \(id\)"):
        mirror.apply(no_key, 1)
    assert mirror.table_names() == []


# -- the model ------------------------------------------------------------------------------------------------------


@st.composite
def _workload(draw: st.DrawFn) -> list[tuple[str, list[tuple[str, Any]]]]:
    """Transactions, each a row image and its statements: ("ins", id), ("upd", (id, {column: value}), new id or
    None), ("del", id); ids are resolved against the model as it plays (an id drawn is taken modulo the live ones)."""
    txs = []
    for _ in range(draw(st.integers(1, 10))):
        image = draw(st.sampled_from(["FULL", "MINIMAL", "NOBLOB"]))
        ops = []
        for _ in range(draw(st.integers(1, 4))):
            kind = draw(st.sampled_from(["ins", "upd", "upd", "upd", "del"]))
            if kind == "upd":
                columns = draw(st.lists(st.sampled_from(("a", "b", "doc")), min_size=1, max_size=3, unique=True))
                values = {c: draw(st.none() | st.integers(0, 99).map(int if c == "a" else str)) for c in columns}
                moved = draw(st.none() | st.integers(0, 30)) if draw(st.integers(0, 4)) == 0 else None
                ops.append(("upd", (draw(st.integers(0, 1000)), values, moved)))
            else:
                ops.append((kind, draw(st.integers(0, 1000))))
        txs.append((image, ops))
    return txs


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    workload=_workload(),
    cuts=st.lists(st.integers(1, 4), min_size=10, max_size=10),
    folds=st.lists(st.booleans(), min_size=10, max_size=10),
    form=st.sampled_from(FORMS),
    mode=st.sampled_from(["merge_on_read", "copy_on_write"]),
)
def test_random_partial_images_leave_the_mirror_equal_to_a_dict_model(
    tmp_path_factory: pytest.TempPathFactory,
    workload: list[tuple[str, list[tuple[str, Any]]]],
    cuts: list[int],
    folds: list[bool],
    form: str,
    mode: str,
) -> None:
    with FakeMysql(name="partialmodel", mariadb=True) as fake:
        fake.execute(TABLE_DDL)
        reader = Reader(fake)
        list(reader.transactions())  # the CREATE TABLE
        try:
            _play(fake, reader, tmp_path_factory.mktemp("model"), workload, cuts, folds, form, mode)
        finally:
            reader.close()


def _play(
    fake: FakeMysql,
    reader: Reader,
    root: Path,
    workload: list[tuple[str, list[tuple[str, Any]]]],
    cuts: list[int],
    folds: list[bool],
    form: str,
    mode: str,
) -> None:
    model: dict[int, dict[str, Any]] = {}
    states: list[dict[int, dict[str, Any]]] = []  # the model after each transaction
    next_id = 1
    for image, ops in workload:
        with fake.transaction(row_image=image) as tx:  # type: ignore[arg-type]
            for kind, arg in ops:
                if kind == "ins" or not model:
                    row = {"id": next_id, "a": arg if kind == "ins" else 0, "b": f"v{next_id}", "doc": f"d{next_id}"}
                    tx.insert("d.t", row)  # every column named: whole under any row image
                    model[next_id] = row
                    next_id += 1
                    continue
                live = sorted(model)
                if kind == "del":
                    victim = live[arg % len(live)]
                    tx.delete("d.t", {"id": victim})
                    del model[victim]
                    continue
                pick, values, moved = arg
                key = live[pick % len(live)]
                change = dict(values)
                if moved is not None and 1000 + moved not in model:
                    change["id"] = 1000 + moved
                tx.update("d.t", {"id": key}, change)
                row = {**model.pop(key), **change}
                model[row["id"]] = row
        states.append({k: dict(v) for k, v in model.items()})
    transactions = list(reader.transactions())
    assert len(transactions) == len(workload)
    mirror = DeltaMirror(root / "m", mode=mode, background_folds=False)  # type: ignore[arg-type]
    start, batch = 0, 0
    while start < len(transactions):
        take = cuts[batch % len(cuts)]
        entries = [e for part in transactions[start : start + take] for e in part]
        start += take
        batch += 1
        if any(e.entry_type is EntryType.ROWDATA for e in entries):
            mirror.apply(_form(entries, form, batch), batch)
        expected = sorted(states[min(start, len(states)) - 1].values(), key=lambda r: r["id"])
        assert _rows(mirror) == expected, f"after batch {batch} ({form}, {mode})"
        if folds[batch % len(folds)] and mode == "merge_on_read":
            mirror.fold()
            assert _rows(mirror) == expected, f"after the fold of batch {batch}"
    assert _rows(mirror) == fake.rows("d.t")
    mirror.close()
