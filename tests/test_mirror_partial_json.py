"""The mirror applies MySQL's partial JSON updates whose before image does not carry the document
(``binlog_row_value_options=PARTIAL_JSON`` under ``binlog_row_image=MINIMAL``): each diff to the document the key's
state just before holds -- the batch's earlier rows of the key (a chain of diffs of a key the batch never saw whole
carried one after the other) or the mirror's row -- in every form it takes batches (change rows, typed, packed,
VARIANT) and through ``run_batches`` (the columnar decoder's path), merge-on-read through a fold and copy-on-write;
and stops with ``MirrorPartialImageError``, nothing written, for a row it does not hold or a diff that does not
apply to the document it holds. The binlog is MySQL 8's, built from its documented layout (:mod:`partial_json_binlog`)
and read by an Instance; the expected documents are MySQL's ``apply_json_diffs`` of the same diffs, printed as
MySQL prints them."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import mysql8_events as M
import partial_json_binlog as B
import pytest

pytest.importorskip("deltalake")

from test_mirror_partial_images import FORMS, _form

from canal.config import InstanceConfig, MasterConfig, StoreConfig
from canal.instance import Instance
from canal.lake import DeltaMirror, MirrorPartialImageError
from canal.mysql_json import JsonDiff, JsonDiffOperation, apply_json_diffs, json_text
from canal.parse.mysql import packets as P
from canal.protocol import Entry, EntryType
from canal.spark.batches import run_batches

SCHEMA = "shop"
W, U = P.WRITE_ROWS_EVENT_V2, P.PARTIAL_UPDATE_ROWS_EVENT


class Model:
    """The table as MySQL holds it: documents changed by MySQL's apply_json_diffs."""

    def __init__(self) -> None:
        self.rows: dict[int, tuple[Any, str, int]] = {}

    def insert(self, rows: list[tuple[int, Any, str, int]]) -> bytes:
        for id_, doc, name, age in rows:
            self.rows[id_] = (copy.deepcopy(doc), name, age)
        return B.insert(rows)

    def update(self, rows: list[tuple[int, Any, str, int]]) -> bytes:
        """A MINIMAL partial update: a list of diffs, or a document logged whole (B.Whole)."""
        for id_, json_col, name, age in rows:
            doc = (
                json_col.doc if isinstance(json_col, B.Whole) else apply_json_diffs(self.rows[id_][0], _diffs(json_col))
            )
            self.rows[id_] = (doc, name, age)
        return B.minimal_update(rows)

    def full_update(self, id_: int, diffs: list[Any], name: str, age: int) -> bytes:
        before = (id_, *self.rows[id_])
        self.rows[id_] = (apply_json_diffs(self.rows[id_][0], _diffs(diffs)), name, age)
        return B.full_update([(before, diffs, name, age)])

    def expected(self) -> list[dict[str, Any]]:
        return [
            {"id": id_, "json_col": json_text(doc), "name": name, "age": age}
            for id_, (doc, name, age) in sorted(self.rows.items())
        ]


def _diffs(diffs: list[tuple[int, str, Any]]) -> list[JsonDiff]:
    return [JsonDiff(JsonDiffOperation(op), path, value) for op, path, value in diffs]


def _transactions(tmp_path: Path, transactions: list[list[tuple[int, bytes]]]) -> list[list[Entry]]:
    """The transactions' entries, each transaction's apart, read from a MySQL 8 binlog file by an Instance."""
    binlogs = tmp_path / "binlogs"
    binlogs.mkdir()
    (binlogs / "binlog.000001").write_bytes(B.binlog_file(transactions, schema=SCHEMA))
    config = InstanceConfig(
        destination="d", master=MasterConfig(address=f"file://{binlogs}", journal_name="binlog.000001", position=4)
    )
    entries: list[Entry] = []
    with Instance(config) as inst:
        while sum(e.entry_type is EntryType.TRANSACTIONEND for e in entries) < len(transactions):
            entries.extend(inst.get(1000, timeout=10.0, linger=0.05).entries)
    out: list[list[Entry]] = [[]]
    for entry in entries:
        out[-1].append(entry)
        if entry.entry_type is EntryType.TRANSACTIONEND:
            out.append([])
    return out[:-1]


def _rows(mirror: DeltaMirror) -> list[dict[str, Any]]:
    return sorted(mirror.read(SCHEMA, "t").to_pylist(), key=lambda r: r["id"])


def _workload(model: Model) -> list[list[list[tuple[int, bytes]]]]:
    """Batches of transactions of events."""
    first = [
        [
            (
                W,
                model.insert(
                    [(1, {"age": 1, "tags": ["a"]}, "a", 1), (2, {"age": 2}, "b", 2), (3, {"n": [1, 2]}, "c", 3)]
                ),
            )
        ]
    ]
    second = [
        # one event: a diff of row 1, row 2 logged whole
        [
            (
                U,
                model.update(
                    [
                        (
                            1,
                            [(M.REPLACE, "$.age", 10), (M.INSERT, "$.tags[9]", "z"), (M.INSERT, "$.ab", True)],
                            "a",
                            10,
                        ),
                        (2, B.Whole({"age": 20, "x": None}), "b", 20),
                    ]
                ),
            )
        ],
        # row 1 again, in the same batch: its diffs follow the ones before them, from the mirror's document
        [(U, model.update([(1, [(M.REMOVE, "$.tags[0]", None), (M.REPLACE, "$.ab", [1.5])], "a", 10)]))],
        # a FULL image's diffs: applied by the decoder, the after image whole
        [(U, model.full_update(3, [(M.INSERT, "$.n[last]", 9), (M.INSERT, "$.m", "x")], "c", 3))],
    ]
    third = [
        [(W, model.insert([(4, {"k": {"deep": [1]}}, "d", 4)]))],
        # a diff of a row the batch inserted: applied to that row's document, then one of row 2 written whole before
        [
            (
                U,
                model.update(
                    [(4, [(M.REPLACE, "$.k.deep[0]", {"x": 1})], "d", 5), (2, [(M.REMOVE, "$.x", None)], "b", 21)]
                ),
            )
        ],
    ]
    return [first, second, third]


@pytest.mark.parametrize(
    ("form", "mode"),
    [*((form, "merge_on_read") for form in FORMS), ("rows", "copy_on_write"), ("typed", "copy_on_write")],
)
def test_partial_json_updates_apply_to_the_documents_the_mirror_holds(tmp_path: Path, form: str, mode: str) -> None:
    model = Model()
    batches = _workload(model)
    read = _transactions(tmp_path, [t for batch in batches for t in batch])
    mirror = DeltaMirror(tmp_path / "m", mode=mode, background_folds=False)  # type: ignore[arg-type]
    at = 0
    for n, batch in enumerate(batches, start=1):
        entries = [e for t in read[at : at + len(batch)] for e in t]
        at += len(batch)
        mirror.apply(_form(entries, form, n), n)
        mirror.fold()
    assert _rows(mirror) == model.expected()
    assert _rows(mirror)[0]["json_col"] == '{"ab": [1.5], "age": 10, "tags": ["z"]}'
    mirror.close()


def test_run_batches_decodes_by_column_and_applies_the_diffs(tmp_path: Path) -> None:
    model = Model()
    transactions = [t for batch in _workload(model) for t in batch]
    binlogs = tmp_path / "binlogs"
    binlogs.mkdir()
    (binlogs / "binlog.000001").write_bytes(B.binlog_file(transactions, schema=SCHEMA))
    config = InstanceConfig(
        destination="d",
        master=MasterConfig(address=f"file://{binlogs}", journal_name="binlog.000001", position=4),
        store=StoreConfig(batch_mode="ITEMSIZE"),  # batches of a few entries: a diff across batches, from the mirror
    )
    mirror = DeltaMirror(tmp_path / "m", background_folds=False)
    end = len((binlogs / "binlog.000001").read_bytes())
    with Instance(config) as inst:
        stats = run_batches(inst, None, mirror, batch_size=4, until=lambda s: s.reached("binlog.000001", end))
    assert stats.batches >= 4
    assert _rows(mirror) == model.expected()
    mirror.close()


def _state(mirror: DeltaMirror) -> tuple[list[dict[str, Any]], int | None]:
    return _rows(mirror), mirror.version(SCHEMA, "t")


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize(
    ("diffs", "key", "reason"),
    [
        ([(M.REPLACE, "$.age", 5)], 9, "the mirror does not hold the row it updates"),
        ([(M.REMOVE, "$.missing", None)], 1, "its JSON diff of json_col does not apply to the document"),
        ([(M.INSERT, "$.age", 5)], 1, "does not apply"),
    ],
    ids=["row_not_held", "no_such_member", "member_there"],
)
def test_a_diff_the_mirror_cannot_apply_stops_with_nothing_written(
    tmp_path: Path, form: str, diffs: list[Any], key: int, reason: str
) -> None:
    model = Model()
    transactions = [
        [(W, model.insert([(1, {"age": 1}, "a", 1)]))],
        [(U, B.minimal_update([(1, [(M.REPLACE, "$.age", 2)], "a", 2)]))],  # completable, same batch: not written
        [(U, B.minimal_update([(key, diffs, "z", 0)]))],
    ]
    first, *rest = _transactions(tmp_path, transactions)
    mirror = DeltaMirror(tmp_path / "m", background_folds=False)
    mirror.apply(_form(first, form, 1), 1)
    before = _state(mirror)
    with pytest.raises(MirrorPartialImageError, match=reason) as stop:
        mirror.apply(_form([e for t in rest for e in t], form, 2), 2)
    assert (stop.value.schema, stop.value.table, stop.value.key) == (SCHEMA, "t", f'{{"id":"{key}"}}')
    assert "json_col" in stop.value.columns
    assert _state(mirror) == before
    mirror.close()
