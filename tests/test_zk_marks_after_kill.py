"""meta_mode "zookeeper": batch marks left by a SIGKILLed process are rolled back when the destination starts again.

The marks persist in ZooKeeper (canal's layout), so before the fix the first ack after a restart raised
BatchOrderError (an older mark was still there) and ``inst.batch()`` could loop. A real child process gets two
batches without acking and is killed; a new instance in this process starts, is handed the same rows again, and
acks them in order.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from canal.client import ClientIdentity
from canal.config import InstanceConfig, StoreConfig
from canal.instance import Instance
from canal.protocol import EntryType, Message
from canal.testing.plugin import MariaDBDatabase, ZooKeeperChroot

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parent.parent


def _config(mariadb: MariaDBDatabase, zookeeper: ZooKeeperChroot, start: tuple[str, int]) -> InstanceConfig:
    return InstanceConfig(
        destination="marks",
        master=mariadb.master(start),
        filter_regex=rf"{mariadb.database}\.t",
        meta_mode="zookeeper",
        zk_hosts=zookeeper.hosts,
        store=StoreConfig(batch_mode="ITEMSIZE"),
    )


def _ids(msg: Message) -> list[int]:
    return [
        row.after[0]
        for e in msg.entries
        if e.entry_type is EntryType.ROWDATA and e.row_change is not None and not e.row_change.is_ddl
        for row in e.iter_rows()
        if row.after is not None
    ]


_CHILD = r"""
import sys
from canal.config import InstanceConfig
from canal.instance import Instance

config = InstanceConfig.from_properties(sys.argv[1])
inst = Instance(config)
inst.start()
for _ in range(2):
    msg = inst.get_without_ack(3, timeout=30)
    ids = [row.after[0] for e in msg.entries if e.row_change is not None and not e.row_change.is_ddl
           for row in e.iter_rows() if row.after is not None]
    print("HELD", msg.id, *ids, flush=True)
sys.stdin.readline()  # hold the marks until killed
"""


def test_marks_of_a_killed_process_are_rolled_back_on_start(
    mariadb: MariaDBDatabase, zookeeper: ZooKeeperChroot, tmp_path: Path
) -> None:
    start = mariadb.execute("SHOW MASTER STATUS")[0][:2]
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    with mariadb.connect() as conn, conn.cursor() as cur:
        for i in range(12):
            cur.execute("INSERT INTO t VALUES (%s)", (i,))
            conn.commit()
    config = _config(mariadb, zookeeper, (str(start[0]), int(start[1])))
    properties = tmp_path / "instance.properties"
    properties.write_text(config.to_properties(include_password=True))
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(properties)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=str(ROOT),
    )
    try:
        assert child.stdout is not None
        held: list[tuple[int, list[int]]] = []
        for _ in range(2):
            line = child.stdout.readline().split()
            assert line and line[0] == "HELD", line
            held.append((int(line[1]), [int(x) for x in line[2:]]))
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    client = ClientIdentity("marks", 1001)
    with Instance(config) as inst:
        assert inst.list_batch_ids(client) == []  # the killed process's marks are gone
        redelivered: list[int] = []
        while len(redelivered) < 12:
            msg = inst.get_without_ack(3, timeout=10)
            assert msg.id != -1, f"only {redelivered} within the wait"
            assert msg.id > held[-1][0]  # ids never repeat those handed out before
            redelivered += _ids(msg)
            inst.ack(msg.id)  # in order: no BatchOrderError from a leftover mark
        assert redelivered[: len(held[0][1] + held[1][1])] == held[0][1] + held[1][1]
        assert redelivered == list(range(12))
        assert inst.list_batch_ids(client) == []
