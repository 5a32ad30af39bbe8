"""run_batches + DeltaMirror against a real MariaDB: a crash in foreachBatch after the Delta write."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("deltalake")

from canal.config import InstanceConfig, StoreConfig
from canal.instance import Instance
from canal.spark import DeltaMirror, RunStats, run_batches
from canal.spark.testing import (
    SHOP_TABLES,
    ShopWorkload,
    compare_tables,
    master_position,
    no_batch_twice,
)

pytestmark = [pytest.mark.spark, pytest.mark.integration]


class Crash(Exception):
    pass


def _config(mariadb: Any, start: tuple[str, int], meta_dir: Path) -> InstanceConfig:
    return InstanceConfig(
        destination="shop",
        master=mariadb.master(start),
        filter_regex=rf"{mariadb.database}\..*",
        store=StoreConfig(batch_mode="ITEMSIZE"),
        meta_mode="file",
        meta_dir=str(meta_dir),
    )


def test_crash_after_write_replays_only_what_the_mirror_recognises(mariadb: Any, spark: Any, tmp_path: Path) -> None:
    conn = mariadb.connect()
    start = master_position(conn)
    ShopWorkload(conn, mariadb.database, seed=3).run(120, alter_at=60)
    end = master_position(conn)
    cfg = _config(mariadb, start, tmp_path / "meta")
    mirror = DeltaMirror(tmp_path / "mirror", log_history_s=3600)
    journal = tmp_path / "journal.json"
    written: list[int] = []

    def crash_on_fourth(df: Any, batch_id: int) -> None:
        mirror(df, batch_id)
        written.append(batch_id)
        if len(written) == 4:
            raise Crash(batch_id)

    with Instance(cfg) as inst, pytest.raises(Crash):
        run_batches(inst, spark, crash_on_fourth, batch_size=60, timeout=0.5, journal=journal)
    crashed = written[-1]
    applied_before = len(mirror.history)
    assert all(state == "applied" for state in mirror.history[-1].tables.values())

    def done(stats: RunStats) -> bool:
        return stats.reached(*end)

    with Instance(cfg) as inst:  # a new process would do the same: the cursor is in meta_dir
        stats = run_batches(inst, spark, mirror, batch_size=60, timeout=0.5, journal=journal, until=done)
    # the batch in flight comes back under the same id, and the mirror skips it for every table
    assert stats.batch_ids[0] == crashed
    replayed = mirror.history[applied_before]
    assert replayed.batch_id == crashed and set(replayed.tables.values()) == {"skipped"}
    assert all(set(r.tables.values()) == {"applied"} for r in mirror.history[applied_before + 1 :])
    assert stats.batch_ids == sorted(set(stats.batch_ids)) and stats.batches > 3

    for comparison in compare_tables(conn, mirror, mariadb.database, SHOP_TABLES):
        assert comparison.equal, str(comparison)
    ids = no_batch_twice(mirror, mariadb.database, SHOP_TABLES)
    assert crashed in ids["orders"] or crashed in ids["customers"] or crashed in ids["order_items"]
    assert "tier" in mirror.read(mariadb.database, "customers").column_names
    conn.close()
