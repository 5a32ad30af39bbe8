"""A fold reads its table's change log a file at a time (canal.lake.store.changelog._newer): it holds the changes it
merges and one file of the log, never the whole log -- whose rows are whole images, a file a batch, and more of them
while the table's folds rest (``fold_duty``). Six batches of updates, deletes and inserts again of 40 keys, each
appended as a file of its own, read and folded: the table equals a model of the source before and after the fold,
and no reduction of the log (``latest_changes.latest``) was handed more than one file's rows beside the changes so
far."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from canal.lake.forms.changes import entries_to_batch
from canal.lake.store import changelog, latest_changes
from canal.position import EntryPosition
from canal.protocol import ColumnMeta, Entry, EntryType, EventType, Header, RowChange, RowData, TableSchema
from canal.spark import DeltaMirror

pytest.importorskip("deltalake")

T = TableSchema(
    "shop", "t", (ColumnMeta("id", mysql_type="int(11)", is_key=True), ColumnMeta("v", mysql_type="int(11)"))
)
KEYS = 40


def _entry(offset: int, kind: str, key: int, before: int | None, after: int | None) -> Entry:
    header = Header("mysql-bin.000001", offset, 1, 1_700_000_000_000, "shop", "t", EventType[kind], event_length=50)
    rows = RowData(T, None if before is None else (key, before), None if after is None else (key, after))
    return Entry(
        header,
        EntryType.ROWDATA,
        RowChange(EventType[kind], [rows]),
        anchor=EntryPosition("mysql-bin.000001", 4, server_id=1),
    )


def test_a_fold_reads_the_log_a_file_at_a_time_and_folds_it_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mirror = DeltaMirror(tmp_path / "m", background_folds=False, fold_ratio=1e9, fold_files=10**6, stage_rows=0)
    model: dict[int, int] = {}
    offset = 1000

    def apply(batch_id: int, changes: list[tuple[str, int, int | None]]) -> None:
        nonlocal offset
        entries = []
        for kind, key, value in changes:
            offset += 100
            entries.append(_entry(offset, kind, key, model.get(key), value))
            if value is None:
                model.pop(key)
            else:
                model[key] = value
        mirror(entries_to_batch(entries, "d", 0), batch_id)

    apply(1, [("INSERT", k, k) for k in range(KEYS)])
    for n in range(2, 8):
        changes: list[tuple[str, int, int | None]] = []
        for k in range(KEYS):
            if k % 7 == n % 7 and k in model:
                changes.append(("DELETE", k, None))
            elif k in model:
                changes.append(("UPDATE", k, 100 * n + k))
            else:
                changes.append(("INSERT", k, 100 * n - k))
        apply(n, changes)

    location = str(mirror.table_path("shop", "t"))
    assert changelog.log_size(location).log_files >= 6  # the batches' files, not folded
    sizes: list[int] = []
    latest = latest_changes.latest

    def recorded(rows: Any, keys: Any) -> Any:
        sizes.append(rows.num_rows)
        return latest(rows, keys)

    monkeypatch.setattr(latest_changes, "latest", recorded)

    def state() -> dict[int, int]:
        return {r["id"]: r["v"] for r in mirror.read("shop", "t").to_pylist()}

    assert state() == model
    [result] = mirror.fold("shop", "t")
    assert result.folded_rows >= KEYS - 1
    assert state() == model
    assert changelog.log_size(location).log_rows == 0
    assert sizes and max(sizes) <= 2 * KEYS, sizes  # the changes so far (one per key) and one file: never the log
    mirror.close()


_KEY_KINDS = {
    "int": st.integers(0, 12),
    "float": st.sampled_from([0.0, -0.0, 1.5, -2.25, 3.0]),  # -0.0 and 0.0 are one key (canal.lake.key_identity)
    "text": st.sampled_from(["a", "b", "é", "ab", ""]),
}


@settings(max_examples=40, deadline=None)
@given(data=st.data(), kind=st.sampled_from([*_KEY_KINDS, "composite"]))
def test_pieces_reduce_to_the_latest_change_per_key_of_the_whole_log(data: st.DataObject, kind: str) -> None:
    """latest_changes.reduced, a piece at a time, gives what latest_changes.latest gives the whole log at once: pieces
    in any order of their changes, keys in several of them, copies of one change in two pieces (a replayed append)."""
    import pyarrow as pa

    from canal.lake.own_names import BATCH, OP, SEQ

    keys = ["k", "k2"] if kind == "composite" else ["k"]
    key = st.tuples(_KEY_KINDS["int"], _KEY_KINDS["text"]) if kind == "composite" else _KEY_KINDS[kind]
    seqs = iter(range(10**6))
    changes = [
        (
            data.draw(key),
            data.draw(st.integers(1, 4)),
            next(seqs),
            data.draw(st.integers(-(10**6), 10**6)),
            data.draw(st.sampled_from("ud")),
        )
        for _ in range(data.draw(st.integers(1, 30)))
    ]
    pieces: list[list[tuple[Any, ...]]] = [[] for _ in range(data.draw(st.integers(1, 5)))]
    for change in changes:
        for at in data.draw(st.sets(st.integers(0, len(pieces) - 1), min_size=1, max_size=2)):  # two: a copy
            pieces[at].append(change)

    def table(rows: list[tuple[Any, ...]]) -> Any:
        columns: dict[str, Any] = {}
        if kind == "composite":
            columns["k"] = pa.array([r[0][0] for r in rows], pa.int64())
            columns["k2"] = pa.array([r[0][1] for r in rows], pa.string())
        else:
            columns["k"] = pa.array(
                [r[0] for r in rows], {"int": pa.int64(), "float": pa.float64()}.get(kind, pa.string())
            )
        columns["v"] = pa.array([r[3] for r in rows], pa.int64())
        columns[BATCH] = pa.array([r[1] for r in rows], pa.int64())
        columns[SEQ] = pa.array([r[2] for r in rows], pa.int64())
        columns[OP] = pa.array([r[4] for r in rows], pa.string())
        return pa.table(columns)

    tables = [table(rows) for rows in pieces]
    expected = latest_changes.latest(pa.concat_tables(tables), keys)
    got = latest_changes.reduced(iter(tables), keys)
    assert got is not None
    assert got.to_pylist() == expected.to_pylist()
