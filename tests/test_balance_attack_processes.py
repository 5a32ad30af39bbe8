"""A balance group of real processes (``tests.procs.balance_consumer``) on a real MariaDB and ZooKeeper, attacked
where a hand-over is weakest: a process SIGSTOPped while its on_revoked runs, for longer than its session, then
continued -- its late flush and acks are fenced, it joins again as a new member, and the ledgers show nothing lost,
no acked row delivered twice and no two processes serving one destination at once."""

from __future__ import annotations

import queue
import signal
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from procs.balance_harness import Ownership, parse_service_log
from procs.ha_harness import Child, ConsumerLog, kill_all
from test_balance_processes import Source
from test_ha_processes import check_no_loss_no_acked_redelivery, check_serving_intervals

from canal.testing.plugin import MariaDBDatabase, ZooKeeperChroot

pytestmark = pytest.mark.integration

SESSION_S = 3.0


def test_a_process_paused_past_its_session_while_it_revokes_is_fenced_and_joins_again(
    mariadb: MariaDBDatabase, zookeeper: ZooKeeperChroot, tmp_path: Path
) -> None:
    m = 4
    source = Source(mariadb.address, mariadb.user, mariadb.password, mariadb.database, mariadb.connect)
    for i in range(m):
        source.create(i)
    base: dict[str, Any] = {
        "zk_hosts": zookeeper.hosts,
        "masters": [source.args()],
        "destinations": m,
        "ha_delay_s": 0.5,
        "zk_timeout_s": SESSION_S,
        "revoke_pause_s": 1.0,
    }
    dests = [f"d{i:02d}" for i in range(m)]
    owners = Ownership(zookeeper.client(), dests)
    events: queue.Queue[tuple[str, str]] = queue.Queue()
    children: dict[str, Child] = {}

    def spawn(name: str, port: int) -> Child:
        args = {**base, "address": f"127.0.0.1:{port}", "log": str(tmp_path / f"{name}.log")}
        child = children[name] = Child(name, args, events, module="tests.procs.balance_consumer")
        child.expect(lambda line: line == "W", 60, "started")
        return child

    try:
        first = spawn("p0", 24000)
        owners.wait(lambda o: o.settled(["127.0.0.1:24000"]), 30, "the first serving all")
        source.start(seed=1)
        spawn("p1", 24001)
        # the first process hands two destinations over; pause it inside its first on_revoked ...
        first.expect(lambda line: line.startswith("r "), 30, "on_revoked begun")
        first.signal(signal.SIGSTOP)
        # ... until its session expired and the second serves everything
        owners.wait(lambda o: o.settled(["127.0.0.1:24001"]), 30, "the second serving all")
        first.signal(signal.SIGCONT)
        owners.wait(lambda o: o.settled(["127.0.0.1:24000", "127.0.0.1:24001"]), 60, "balanced again")
        source.finish()
        totals = {f"d{t:02d}": source.next[t] for t in source.tables}
        acked: dict[str, int] = {}

        def behind() -> bool:
            return any(acked.get(d, -1) < n - 1 for d, n in totals.items())

        while behind():  # each ack is a stdout line
            _name, line = events.get(timeout=60)
            if line.startswith("A "):
                _, dest, top = line.split()
                acked[dest] = max(acked.get(dest, -1), int(top))
    finally:
        source.stop.set()
        kill_all(list(children.values()))
    per_dest: dict[str, list[ConsumerLog]] = defaultdict(list)
    for name, child in children.items():
        logs, _revoked = parse_service_log(name, Path(child.args["log"]))
        for dest, log in logs.items():
            per_dest[dest].append(log)
    for dest, total in totals.items():
        logs = per_dest[dest]
        check_no_loss_no_acked_redelivery(logs, total, killed=set(children), redelivered_at_least=0)
        check_serving_intervals(logs, expected_at_least=1)
