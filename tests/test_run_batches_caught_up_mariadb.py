"""run_batches until a master position is reached (``RunStats.reached``), against a real MariaDB, when the binlog
ends with events that make no entry: a transaction of a table the filter leaves out, or the Binlog_checkpoint MariaDB
writes after the first commit in a new binlog file. The last entry handled then ends before the master's position,
and a wait for it to reach that position never ended (found by the schema differential once its workloads rotated
the binlog: ``FLUSH BINARY LOGS``). For a destination that snapshots, the position is reached only once the
snapshot's rows were handled too: its chunks join the stream at positions of their own (a run into the mirror's
crash differential stopped with the snapshot's last chunk not handed over, once its workload rotated the binlog)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from canal.config import InstanceConfig, MasterConfig, SnapshotConfig, StoreConfig
from canal.instance import Instance
from canal.snapshot.merge import SnapshotMerge
from canal.spark import RunStats, run_batches
from canal.spark.testing import master_position

pytestmark = pytest.mark.integration

SAFETY_S = 10.0  # a run that never reaches its target stops after this long idle, and the test fails


def _config(
    mariadb: Any, start: tuple[str, int] | None, meta: Path, filter_regex: str, snapshot: SnapshotConfig | None = None
) -> InstanceConfig:
    master = mariadb.master(start)
    if start is None:  # no configured position: a first start begins at the server's position then
        master = MasterConfig(address=master.address, username=master.username, password=master.password)
    return InstanceConfig(
        destination="caughtup",
        master=master,
        filter_regex=filter_regex,
        store=StoreConfig(batch_mode="ITEMSIZE"),
        meta_mode="file",
        meta_dir=str(meta),
        snapshot=snapshot or SnapshotConfig(),
    )


def _ids(rows: Any) -> list[int]:
    """The ids of change rows' images (each a JSON object of canal text values)."""
    return [int(json.loads(after)["id"]) for after in rows.column("after").to_pylist() if after is not None]


def _run_to(config: InstanceConfig, end: tuple[str, int], journal: Path | None = None) -> tuple[RunStats, list[int]]:
    """The ids of the rows handed to ``fn`` until every event before ``end`` was handled (or ``SAFETY_S`` idle)."""
    ids: list[int] = []

    def fn(rows: Any, batch_id: int) -> None:
        ids.extend(_ids(rows))

    with Instance(config) as inst:
        stats = run_batches(
            inst,
            None,
            fn,
            batch_size=50,
            timeout=0.5,
            journal=journal,
            until=lambda s: s.reached(*end),
            idle_stop_s=SAFETY_S,
        )
    return stats, ids


@pytest.mark.parametrize("snapshot", [False, True], ids=["stream", "snapshot"])
def test_a_run_reaches_a_master_position_after_a_filtered_transaction(
    mariadb: Any, tmp_path: Path, snapshot: bool
) -> None:
    """With an initial snapshot of the kept table too: once it is handled, the drained position counts."""
    db = mariadb.database
    conn = mariadb.connect()
    mariadb.execute(f"CREATE TABLE `{db}`.kept (id INT PRIMARY KEY)")
    mariadb.execute(f"CREATE TABLE `{db}`.skipped (id INT PRIMARY KEY)")
    mariadb.execute(f"INSERT INTO `{db}`.kept VALUES (10), (11), (12)")  # only a snapshot brings these
    start = None if snapshot else master_position(conn)
    config = _config(
        mariadb, start, tmp_path / "meta", rf"{db}\.kept", SnapshotConfig(mode="initial") if snapshot else None
    )
    with Instance(config):  # the destination's first start: it streams from the server's position now
        pass
    mariadb.execute(f"INSERT INTO `{db}`.kept VALUES (1), (2)")
    mariadb.execute(f"INSERT INTO `{db}`.skipped VALUES (3)")  # the binlog's last transaction: filtered out
    end = master_position(conn)
    stats, ids = _run_to(config, end, tmp_path / "journal.json")
    assert stats.reached(*end)
    assert stats.drained_file == end[0] and stats.drained_offset >= end[1]
    # the last entry handled is the kept table's: it ends before the master's position
    assert stats.last_file == end[0] and stats.last_next_offset < end[1]
    if snapshot:  # the snapshot's rows (read after the inserts, 1 and 2 too) and the binlog's
        assert set(ids) == {1, 2, 10, 11, 12}
    else:
        assert ids == [1, 2]
    assert stats.snapshots == stats.snapshots_handled == int(snapshot)


def test_a_run_reaches_a_master_position_only_once_the_snapshots_rows_are_handled(
    mariadb: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The snapshot's last chunk joins the stream only after the binlog's last change was handled (held back here):
    the position alone is reached before it, and a run that stopped there left the chunk's rows out."""
    db = mariadb.database
    conn = mariadb.connect()
    mariadb.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY)")
    mariadb.execute(f"INSERT INTO `{db}`.t VALUES {', '.join(f'({i})' for i in range(22))}")  # its last chunk: 20, 21
    config = _config(mariadb, None, tmp_path / "meta", rf"{db}\.t", SnapshotConfig(mode="initial", chunk_rows=5))
    handled = threading.Event()  # the binlog's change was handled
    submit = SnapshotMerge.submit

    def hold_the_last_chunk(self: SnapshotMerge, *args: Any, **kwargs: Any) -> Any:
        if kwargs["last"]:
            assert handled.wait(30)
        return submit(self, *args, **kwargs)

    monkeypatch.setattr(SnapshotMerge, "submit", hold_the_last_chunk)
    ids: list[int] = []

    def fn(rows: Any, batch_id: int) -> None:
        ids.extend(_ids(rows))
        if 100 in ids:
            handled.set()

    with Instance(config) as inst:
        mariadb.execute(f"INSERT INTO `{db}`.t VALUES (100)")
        end = master_position(conn)
        stats = run_batches(
            inst,
            None,
            fn,
            batch_size=50,
            timeout=0.5,
            journal=tmp_path / "journal.json",
            until=lambda s: s.reached(*end),
            idle_stop_s=SAFETY_S,
        )
        assert inst.snapshots[-1].progress().done
    assert stats.reached(*end)
    assert set(ids) == {*range(22), 100}  # the last chunk's rows too (20, 21, and 100: read after it)


def test_a_run_reaches_a_master_position_across_a_binlog_rotation(mariadb: Any, tmp_path: Path) -> None:
    db = mariadb.database
    conn = mariadb.connect()
    mariadb.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY)")
    start = master_position(conn)
    mariadb.execute(f"INSERT INTO `{db}`.t VALUES (1)")
    mariadb.execute("FLUSH BINARY LOGS")
    mariadb.execute(f"INSERT INTO `{db}`.t VALUES (2)")  # MariaDB may log a Binlog_checkpoint after it
    end = master_position(conn)
    assert end[0] != start[0]
    stats, ids = _run_to(_config(mariadb, start, tmp_path / "meta", rf"{db}\..*"), end)
    assert stats.reached(*end)
    assert ids == [1, 2]


def test_reached_is_false_before_anything_was_handled_and_compares_the_drained_position() -> None:
    stats = RunStats()
    assert not stats.reached("mysql-bin.000001", 4)
    stats.drained_file, stats.drained_offset = "mysql-bin.000001", 400
    assert stats.reached("mysql-bin.000001", 400)
    assert not stats.reached("mysql-bin.000001", 401)
    assert not stats.reached("mysql-bin.000002", 4)
    stats.snapshots = 1  # a snapshot whose rows were not all handled: no position is reached
    assert not stats.reached("mysql-bin.000001", 4)
    stats.snapshots_handled = 1
    assert stats.reached("mysql-bin.000001", 400)
