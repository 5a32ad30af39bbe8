"""A new checkpoint on an existing mirror (canal.lake.applied): Spark's batch ids start again at 0, so a batch id
the mirror finished already may hold changes it never saw. Those are refused with MirrorCheckpointError before
anything is written -- never skipped as replays -- while a true replay (changes at or before the position the
mirror reached) is still skipped, and the query that wrote the mirror goes on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from canal.lake.applied import Applied, applied_path, read_applied
from canal.position import EntryPosition
from canal.protocol import ColumnMeta, Entry, EntryType, EventType, Header, RowChange, RowData, TableSchema
from canal.spark import DeltaMirror, MirrorCheckpointError
from canal.spark.changes import entries_to_batch

T = TableSchema(
    "shop", "t", (ColumnMeta("id", mysql_type="int(11)", is_key=True), ColumnMeta("v", mysql_type="int(11)"))
)


def _batch(file: str, first_offset: int, rows: dict[int, int]) -> object:
    """Upserts of ``rows`` at increasing offsets of binlog ``file`` from ``first_offset``."""
    entries = []
    for i, (key, value) in enumerate(sorted(rows.items())):
        header = Header(file, first_offset + 100 * i, 1, 1_700_000_000_000, "shop", "t", EventType.INSERT)
        entries.append(
            Entry(
                header,
                EntryType.ROWDATA,
                RowChange(EventType.INSERT, [RowData(T, after=(key, value))]),
                anchor=EntryPosition(file, 4),
            )
        )
    return entries_to_batch(entries, "d", 0)


def _state(mirror: DeltaMirror) -> dict[int, int]:
    return {r["id"]: r["v"] for r in mirror.read("shop", "t").to_pylist()}


def test_a_new_querys_batches_are_refused_and_true_replays_skipped(tmp_path: Path) -> None:
    mirror = DeltaMirror(tmp_path / "m")
    mirror.apply(_batch("mysql-bin.000001", 1000, {1: 1, 2: 2}), 0)
    mirror.apply(_batch("mysql-bin.000001", 2000, {3: 3}), 1)
    mirror.apply(_batch("mysql-bin.000002", 500, {1: 10}), 2)
    assert _state(mirror) == {1: 10, 2: 2, 3: 3}
    record = read_applied(mirror.root, mirror.app_id)
    assert record is not None and (record.batch, record.log_file, record.log_offset) == (2, "mysql-bin.000002", 500)

    # true replays: the last batch again, an older one again -- skipped, nothing changes
    assert set(mirror.apply(_batch("mysql-bin.000002", 500, {1: 10}), 2).tables.values()) == {"skipped"}
    assert set(mirror.apply(_batch("mysql-bin.000001", 2000, {3: 3}), 1).tables.values()) == {"skipped"}
    before = Path(applied_path(mirror.root, mirror.app_id)).read_bytes()

    # a new checkpoint: batch 0 again, with the changes after those applied
    with pytest.raises(MirrorCheckpointError) as refused:
        mirror.apply(_batch("mysql-bin.000002", 900, {2: 20, 4: 4}), 0)
    message = str(refused.value)
    assert "batch 0" in message and "mysql-bin.000002:500" in message and "new checkpoint" in message
    assert _state(mirror) == {1: 10, 2: 2, 3: 3}  # nothing of it written
    assert Path(applied_path(mirror.root, mirror.app_id)).read_bytes() == before
    assert mirror.history[-1].batch_id == 1  # the refused batch is not recorded

    # the query that wrote the mirror goes on
    mirror.apply(_batch("mysql-bin.000002", 900, {2: 20, 4: 4}), 3)
    assert _state(mirror) == {1: 10, 2: 20, 3: 3, 4: 4}
    assert json.loads(Path(applied_path(mirror.root, mirror.app_id)).read_text())["batch"] == 3
    mirror.close()


def test_a_new_query_that_starts_with_old_changes_is_refused_at_its_first_new_one(tmp_path: Path) -> None:
    mirror = DeltaMirror(tmp_path / "m")
    for batch_id, offset in enumerate((1000, 2000, 3000)):
        mirror.apply(_batch("mysql-bin.000001", offset, {batch_id: batch_id}), batch_id)
    # a new checkpoint whose source starts early: its batch 0 holds changes the mirror has -- skipped, rightly
    assert set(mirror.apply(_batch("mysql-bin.000001", 1000, {0: 0}), 0).tables.values()) == {"skipped"}
    with pytest.raises(MirrorCheckpointError):  # its batch 1 brings one it has not: refused, not skipped
        mirror.apply(_batch("mysql-bin.000001", 4000, {9: 9}), 1)
    assert 9 not in _state(mirror)
    mirror.close()


def test_a_new_mirror_or_rows_without_positions_are_not_compared(tmp_path: Path) -> None:
    mirror = DeltaMirror(tmp_path / "m")
    batch = _batch("mysql-bin.000001", 1000, {1: 1})
    no_positions = batch.drop_columns(["log_file", "log_offset"])  # type: ignore[attr-defined]
    mirror.apply(no_positions, 0)
    assert read_applied(mirror.root, mirror.app_id) == Applied(0, None, 0)  # finished, at no position
    # batch 0 again, now with a position: nothing to compare it with -- a replay, skipped by batch id
    assert set(mirror.apply(_batch("mysql-bin.000001", 2000, {1: 1}), 0).tables.values()) == {"skipped"}
    mirror.apply(_batch("mysql-bin.000001", 2000, {2: 2}), 1)
    assert _state(mirror) == {1: 1, 2: 2}
    assert read_applied(mirror.root, mirror.app_id) == Applied(1, "mysql-bin.000001", 2000)
    mirror.close()
