"""An initial snapshot handed over between real processes: two ``tests.procs.ha_consumer`` processes embed one
destination through EmbeddedServer(zk_hosts=...) with ``SnapshotConfig(mode="initial")``; the active one is
SIGKILLed while it holds unacked snapshot rows. The standby takes over, resumes the snapshot from the cursor in
ZooKeeper, and every row -- the ones there before the start and the ones written meanwhile -- is acked exactly once;
the held rows come again, no acked row does."""

from __future__ import annotations

import queue
from collections.abc import Callable
from pathlib import Path

import pytest
from procs.ha_harness import Child, ConsumerLog, kill_all
from procs.ha_harness import next_event as harness_next_event
from test_ha_processes import (
    Workload,
    await_all_acked,
    base_args,
    check_no_loss_no_acked_redelivery,
    check_serving_intervals,
)

from canal.testing.plugin import MariaDBDatabase, ZooKeeperChroot

pytestmark = pytest.mark.integration

PRELOADED = 3000


def test_the_standby_resumes_the_snapshot_after_a_sigkill(
    mariadb: MariaDBDatabase, zookeeper: ZooKeeperChroot, tmp_path: Path
) -> None:
    # s: the rows there before the start (ids below PRELOADED), snapshotted; t: the workload's rows, streamed. Row ids
    # are unique across both, so "acked exactly once" is about one delivery per row. (A row the workload wrote into a
    # snapshotted table before its chunk was read comes twice by design: as its INSERT, then in the chunk.)
    mariadb.execute("CREATE TABLE s (id INT PRIMARY KEY, v VARCHAR(20))")
    mariadb.execute(f"INSERT INTO s SELECT seq, CONCAT('v', seq) FROM seq_0_to_{PRELOADED - 1}")
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
    args = {
        **base_args(mariadb, zookeeper, tmp_path),
        "journal": None,  # a first start with no position: the initial snapshot runs
        "position": None,
        "table_regex": rf"{mariadb.database}\.(s|t)",
        # chunks of 50 rows: a get (1 to 9 entries) takes at most 450 snapshot rows, so the snapshot is still
        # unfinished when the hold lands, however many batches the consumer takes before it reads the request
        "snapshot": {"tables": [f"{mariadb.database}.s"], "chunk_rows": 50},
        "mode": "loop",
    }
    events: queue.Queue[tuple[str, str]] = queue.Queue()
    children: dict[str, Child] = {}

    def spawn() -> Child:
        name = f"p{len(children)}"
        child = Child(
            name,
            {**args, "address": f"127.0.0.1:{22000 + len(children)}", "log": str(tmp_path / f"{name}.log")},
            events,
        )
        children[name] = child
        return child

    def next_event(pred: Callable[[str, str], bool], timeout: float, what: str) -> tuple[str, str]:
        return harness_next_event(events, pred, timeout, what)

    workload = Workload(mariadb, seed=3)
    workload.next_id = PRELOADED  # new rows after the preloaded ones
    try:
        spawn()
        active, _ = next_event(lambda n, line: line.startswith("S "), 30, "first active")
        spawn()
        workload.start()
        # some snapshot rows acked first (an ack line names the batch's lowest row id)
        next_event(
            lambda n, line, a=active: (
                n == a and line.startswith("A ") and line.split()[2] != "-" and int(line.split()[2]) < PRELOADED
            ),
            60,
            "an ack of snapshot rows",
        )
        children[active].send("hold")
        next_event(lambda n, line, a=active: n == a and line.startswith("H "), 30, "a held batch")
        children[active].kill()
        killed = active
        active, _ = next_event(lambda n, line, k=killed: n != k and line.startswith("S "), 30, "the takeover")
        total = workload.finish()
        # the killed process held its last batch unacked (never in doubt): wait until its rows came again and were
        # acked -- the binlog rows of that batch come back before its snapshot rows, which the resumed snapshot
        # reads again chunk by chunk
        await_all_acked(events, children, active, total, set(), 90)
    finally:
        workload.stop_event.set()
        kill_all(list(children.values()))

    logs = [ConsumerLog.parse(n, Path(c.args["log"])) for n, c in children.items()]
    check_no_loss_no_acked_redelivery(logs, total, killed={killed})
    check_serving_intervals(logs, expected_at_least=2)
    assert total > PRELOADED
    # the takeover landed inside the snapshot: each process delivered part of it
    by_name = {log.name: log for log in logs}
    first = {i for b, t, _, ids in by_name[killed].delivered for i in ids if i < PRELOADED}
    second = {i for log in logs if log.name != killed for _, _, _, ids in log.delivered for i in ids if i < PRELOADED}
    assert first and second and len(first | second) == PRELOADED
