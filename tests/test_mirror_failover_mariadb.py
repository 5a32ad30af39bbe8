"""A failover to a promoted replica whose binlog numbering is behind the primary's, followed by the mirror: two private
MariaDB servers, the second a real replica of the first (``log_slave_updates``, MariaDB's GTIDs), built while the
primary's binlog was already at ``mysql-bin.000005`` -- so the replica's positions, and ``run_batches``' ids made of
them (``4294969365``), are far below those the mirror applied (``21474837000``). The primary dies after changes the
mirror has not seen yet, the replica is promoted and takes writes (updates and deletes of rows the primary wrote
too), and the destination is restarted against it by file and position (the search by time goes back a fallback
interval: it brings again changes the mirror applied) or by GTID. The mirror ends equal to ``SELECT`` on the
replica: what it had is skipped by GTID, nothing else (canal.lake.identity.lineage)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from canal import Instance, InstanceConfig, MasterConfig
from canal.lake.identity.applied import read_applied
from canal.spark import DeltaMirror, run_batches
from canal.spark.testing import compare_tables, master_position
from canal.testing.services import MariaDBServer

pytestmark = pytest.mark.integration


def _config(server: MariaDBServer, meta: Path, gtid_mode: bool, start: tuple[str, int] | None = None) -> InstanceConfig:
    master = MasterConfig(
        address=server.address,
        username=server.user,
        password=server.password,
        journal_name=None if start is None else start[0],
        position=None if start is None else start[1],
    )
    return InstanceConfig(
        destination="shop",
        master=master,
        filter_regex=r"d\..*",
        meta_mode="file",
        meta_dir=str(meta),
        gtid_mode=gtid_mode,
    )


def _mirror_until_caught_up(config: InstanceConfig, server: MariaDBServer, mirror: DeltaMirror) -> list[int]:
    conn = server.connect()
    try:
        until = master_position(conn)
    finally:
        conn.close()
    with Instance(config) as inst:
        # no journal: its ids would go on past the primary's (the last id plus one), and the replica's lower ones are
        # what this test hands the mirror
        stats = run_batches(inst, None, mirror, until=lambda s: s.reached(*until), idle_stop_s=60, journal=False)
    assert stats.reached(*until)
    return stats.batch_ids


@pytest.mark.parametrize("restart", ["file and position", "gtid"])
def test_a_mirror_follows_a_failover_to_a_replica_whose_binlog_numbering_is_behind(
    mariadb_factory: Any, tmp_path: Path, restart: str
) -> None:
    primary: MariaDBServer = mariadb_factory(server_id=1)
    for _ in range(4):
        primary.execute("FLUSH BINARY LOGS")  # the primary's binlog is at mysql-bin.000005
    start = master_position(primary.connect())
    replica: MariaDBServer = mariadb_factory(server_id=2, replica_of=primary)  # its own binlog: mysql-bin.000001
    primary.execute("CREATE DATABASE d")
    primary.execute("CREATE TABLE d.t (id INT PRIMARY KEY, v VARCHAR(20))")
    primary.execute("INSERT INTO d.t VALUES " + ", ".join(f"({i}, 'p{i}')" for i in range(40)))
    primary.execute("UPDATE d.t SET v = 'p-updated' WHERE id % 4 = 0")

    gtid_mode = restart == "gtid"
    mirror = DeltaMirror(tmp_path / "m")
    before = _mirror_until_caught_up(_config(primary, tmp_path / "meta", gtid_mode, start), primary, mirror)
    assert min(before) > 5 << 32  # run_batches' ids: the primary's positions

    primary.execute("DELETE FROM d.t WHERE id % 5 = 0")  # replicated, not yet mirrored when the primary dies
    replica.wait_for_replication()
    primary.kill()
    replica.execute("STOP SLAVE")
    replica.execute("RESET SLAVE ALL")  # promoted
    replica.execute("UPDATE d.t SET v = 'on the replica' WHERE id % 3 = 0")
    replica.execute("DELETE FROM d.t WHERE id > 30")
    replica.execute("INSERT INTO d.t VALUES (100, 'new'), (101, 'new')")

    after = _mirror_until_caught_up(_config(replica, tmp_path / "meta", gtid_mode), replica, mirror)
    assert max(after) < min(before)  # the replica's ids are far lower: a lower id proves nothing
    conn = replica.connect()
    try:
        for c in compare_tables(conn, mirror, "d", ["t"]):
            assert c.equal, str(c)
    finally:
        conn.close()
    record = read_applied(mirror.root, mirror.app_id)
    assert record is not None and record.server_id == 2 and record.log_file == "mysql-bin.000001"
    mirror.close()
