"""Randomized differential test of the ALTERs the conversion model follows or heals and of DDL under sql_modes that
change how a statement reads (real MariaDB): the workload of ``random_schema_workload`` with the family of
``random_alter_operations`` -- AUTO_INCREMENT made over a key of 0 (renumbered, or kept under NO_AUTO_VALUE_ON_ZERO),
generated columns added and set anew, BINARY(n) columns padded, hexadecimal and bit literals as defaults, DDL under
NO_BACKSLASH_ESCAPES and ANSI_QUOTES -- beside inserts, updates and deletes.

Each workload is captured (``db.*``) into a ``DeltaMirror``, which must equal ``SELECT`` under the default
``heal="snapshot"``. One workload in three runs under ``heal="stop"``: the first statement that heals by default
stops the mirror typed (``MirrorConversionError``, or the ``MirrorError`` of an added column the server computes),
with every table as it was just before.

A seed per run, printed (``-s``; and in a failure's message): ``PYCANAL_SEED`` replays one. ``PYCANAL_FUZZ_EXAMPLES``
(default 20) sets how many workloads: a tenth of it here, at least two.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from random_schema_workload import FUZZ_EXAMPLES, Op, Workload, play_seeded

pytest.importorskip("deltalake")

from random_alter_operations import AlterOperations

from canal.config import InstanceConfig, StoreConfig
from canal.instance import Instance
from canal.spark import DeltaMirror, compare, run_batches
from canal.spark.testing import healed_by, master_position
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration

EXAMPLES = max(2, FUZZ_EXAMPLES // 10)
BESIDE = ["insert", "insert", "update", "delete"]  # the workload's kinds drawn beside the family's


def test_random_alters_and_sql_modes_are_mirrored_healed_or_stop_typed(
    mariadb: MariaDBDatabase, tmp_path_factory: pytest.TempPathFactory
) -> None:
    def play(example: int, ops: list[Op], heal: str, seed: int) -> None:
        _play(mariadb, tmp_path_factory.mktemp("alters"), f"aw{example}", ops, heal, seed)

    play_seeded(play, [*AlterOperations.KINDS, *BESIDE], EXAMPLES, (6, 16), 3)


def _play(mariadb: MariaDBDatabase, tmp: Path, db: str, ops: list[Op], heal: str, seed: int) -> None:
    mariadb.execute(f"DROP DATABASE IF EXISTS `{db}`")
    mariadb.execute(f"CREATE DATABASE `{db}`")
    conn = mariadb.connect()
    mirror = DeltaMirror(tmp / "mirror")
    config = InstanceConfig(
        destination="alterfuzz",
        master=mariadb.master(master_position(conn)),
        filter_regex=rf"{db}\..*",
        store=StoreConfig(batch_mode="ITEMSIZE"),
        meta_mode="file",
        meta_dir=str(tmp / "meta"),
        heal=heal,
    )

    def caught_up() -> None:  # the mirror holds everything before the statement it must stop at
        _run(conn, config, mirror)

    try:
        workload = Workload(conn, db, seed, heal=heal, before_stop=caught_up)
        workload.create_table()
        for op in ops:
            if not workload.step(op):
                break
        stop = workload.stop
        if stop is not None:
            with pytest.raises(stop.error) as stopped:
                _run(conn, config, mirror)
            assert f"{db}." in str(stopped.value), stopped.value
            state = stop.state
        else:
            _run(conn, config, mirror)
            state = workload.state()
        for table, selected in state.items():
            if not selected.rows and not mirror.table_path(db, table).exists():
                continue
            result = compare(mirror.read(db, table), selected.rows, selected.key, name=table)
            assert result.equal, f"the mirror of {table}: {result}\nSQL: {';'.join(workload.sql)}"
    finally:
        mirror.close()
        conn.close()
        mariadb.execute(f"DROP DATABASE IF EXISTS `{db}`")


def _run(conn: Any, config: InstanceConfig, mirror: DeltaMirror) -> None:
    end = master_position(conn)
    with Instance(config) as inst:
        run_batches(inst, None, mirror, batch_size=50, timeout=0.3, until=healed_by(inst, end))
        metrics = inst.metrics()
    assert metrics.errors == 0, metrics.last_error
