"""run_batches until a master position is reached (``RunStats.reached``), against a real MariaDB, when the binlog
ends with events that make no entry: a transaction of a table the filter leaves out, or the Binlog_checkpoint MariaDB
writes after the first commit in a new binlog file. The last entry handled then ends before the master's position,
and a wait for it to reach that position never ended (found by the schema differential once its workloads rotated
the binlog: ``FLUSH BINARY LOGS``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from canal.config import InstanceConfig, StoreConfig
from canal.instance import Instance
from canal.spark import RunStats, run_batches
from canal.spark.testing import master_position

pytestmark = pytest.mark.integration

SAFETY_S = 10.0  # a run that never reaches its target stops after this long idle, and the test fails


def _config(mariadb: Any, start: tuple[str, int], meta: Path, filter_regex: str) -> InstanceConfig:
    return InstanceConfig(
        destination="caughtup",
        master=mariadb.master(start),
        filter_regex=filter_regex,
        store=StoreConfig(batch_mode="ITEMSIZE"),
        meta_mode="file",
        meta_dir=str(meta),
    )


def _run_to(config: InstanceConfig, end: tuple[str, int]) -> tuple[RunStats, list[int]]:
    """The ids of the rows handed to ``fn`` until every event before ``end`` was handled (or ``SAFETY_S`` idle)."""
    ids: list[int] = []

    def fn(rows: Any, batch_id: int) -> None:  # change rows: each image a JSON object of canal text values
        ids.extend(int(json.loads(after)["id"]) for after in rows.column("after").to_pylist() if after is not None)

    with Instance(config) as inst:
        stats = run_batches(
            inst, None, fn, batch_size=50, timeout=0.5, until=lambda s: s.reached(*end), idle_stop_s=SAFETY_S
        )
    return stats, ids


def test_a_run_reaches_a_master_position_after_a_filtered_transaction(mariadb: Any, tmp_path: Path) -> None:
    db = mariadb.database
    conn = mariadb.connect()
    mariadb.execute(f"CREATE TABLE `{db}`.kept (id INT PRIMARY KEY)")
    mariadb.execute(f"CREATE TABLE `{db}`.skipped (id INT PRIMARY KEY)")
    start = master_position(conn)
    mariadb.execute(f"INSERT INTO `{db}`.kept VALUES (1), (2)")
    mariadb.execute(f"INSERT INTO `{db}`.skipped VALUES (3)")  # the binlog's last transaction: filtered out
    end = master_position(conn)
    stats, ids = _run_to(_config(mariadb, start, tmp_path / "meta", rf"{db}\.kept"), end)
    assert stats.reached(*end)
    assert stats.drained_file == end[0] and stats.drained_offset >= end[1]
    # the last entry handled is the kept table's: it ends before the master's position
    assert stats.last_file == end[0] and stats.last_next_offset < end[1]
    assert ids == [1, 2]


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
