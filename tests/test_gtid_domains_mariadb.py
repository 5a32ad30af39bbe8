"""GTID mode on a MariaDB with two replication domains: the cursor carries the whole GTID state of the start.

A destination that starts (at the master's position, a configured file and offset, or a timestamp) while domain 1
already has transactions, and then sees only domain 0's, must restart asking for domain 1 from where the server was
-- not from domain 1's beginning, which would hand out its old rows again.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from canal.config import InstanceConfig, MasterConfig
from canal.gtid import parse_mariadb_gtid_pos
from canal.instance import Instance
from canal.protocol import EntryType
from canal.testing.plugin import MariaDBFactory

pytestmark = pytest.mark.integration


def _write(server: Any, domain: int, ident: int, timestamp: int | None = None) -> None:
    conn = server.connect("d")
    try:
        with conn.cursor() as cur:
            if timestamp is not None:
                cur.execute(f"SET timestamp = {timestamp}")  # the binlog time of the write
            cur.execute(f"SET SESSION gtid_domain_id = {domain}")
            cur.execute(f"INSERT INTO t VALUES ({ident}, {domain})")
    finally:
        conn.close()


def _ids(inst: Instance, want: int) -> list[int]:
    ids: list[int] = []
    deadline = time.monotonic() + 30
    while len(ids) < want:
        assert time.monotonic() < deadline, f"only {ids} arrived"
        error = inst.parser.error
        if error is not None:
            raise error
        msg = inst.get(100, timeout=0.2)
        for entry in msg.entries:
            if entry.entry_type is EntryType.ROWDATA and entry.row_change is not None:
                ids += [row.after[0] for row in entry.row_change.rows]
    return ids


@pytest.mark.parametrize("start", ["master status", "file and offset", "timestamp"])
def test_a_restart_in_gtid_mode_keeps_every_domain_of_the_start(
    mariadb_factory: MariaDBFactory, tmp_path: Path, start: str
) -> None:
    server = mariadb_factory(server_id=100)
    past = int(time.time()) - 100  # what is written before the start is older than the configured timestamp
    conn = server.connect()
    with conn.cursor() as cur:
        cur.execute(f"SET timestamp = {past}")
        cur.execute("CREATE DATABASE d")
        cur.execute("CREATE TABLE d.t (id INT PRIMARY KEY, domain INT)")
    conn.close()
    _write(server, 0, 1, past)
    _write(server, 1, 2, past)
    _write(server, 1, 3, past)
    journal, position = server.execute("SHOW MASTER STATUS")[0][:2]
    at_start = str(server.execute("SELECT @@GLOBAL.gtid_binlog_pos")[0][0])
    assert set(parse_mariadb_gtid_pos(at_start)) == {0, 1}
    master = MasterConfig(address=server.address, username=server.user, password=server.password)
    if start == "file and offset":
        master = MasterConfig(
            address=server.address,
            username=server.user,
            password=server.password,
            journal_name=str(journal),
            position=int(position),
        )
    elif start == "timestamp":
        stamp = (past + 50) * 1000
        master = MasterConfig(address=server.address, username=server.user, password=server.password, timestamp=stamp)
    config = InstanceConfig(
        destination="gtid",
        master=master,
        gtid_mode=True,
        filter_regex=r"d\..*",
        meta_mode="file",
        meta_dir=str(tmp_path),
        flush_period_s=0,
    )
    with Instance(config) as inst:
        if start == "master status":
            deadline = time.monotonic() + 30
            while inst.parser.position is None:  # the start (the master's position) is taken
                assert time.monotonic() < deadline, "the parser never found its start"
                time.sleep(0.01)
        _write(server, 0, 4)
        assert _ids(inst, 1) == [4]
    _write(server, 0, 5)
    with Instance(config) as inst:
        assert _ids(inst, 1) == [5]  # not 2 and 3 of domain 1 again
        cursor = inst.get_cursor()
    assert cursor is not None and cursor.position.gtid is not None
    assert set(parse_mariadb_gtid_pos(cursor.position.gtid)) == {0, 1}, cursor
