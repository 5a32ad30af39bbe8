"""``canal serve`` as production runs it: several replicas of it on one ZooKeeper (a balance group) while the source
writes, a consumer that is slow, SIGTERM while a batch is in hand. Real processes, a real MariaDB and ZooKeeper;
the consumer prints ``<destination> <id>`` for each row (tests.procs.serve_consumer), the ledger checked against
what was written."""

from __future__ import annotations

import os
import queue
import signal
import threading
from collections import Counter
from pathlib import Path

import pytest
from procs.balance_harness import Ownership
from test_cli_serve import Served

from canal.testing.plugin import MariaDBDatabase, ZooKeeperChroot

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent


def conf_dir(tmp_path: Path, mariadb: MariaDBDatabase, destinations: list[str], extra: str = "") -> Path:
    """A canal conf directory: each destination captures its own table ``t_<destination>``."""
    master = mariadb.master()
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "canal.properties").write_text(f"canal.destinations = {', '.join(destinations)}\n{extra}")
    for dest in destinations:
        (conf / dest).mkdir()
        (conf / dest / "instance.properties").write_text(
            f"canal.instance.master.address = {master.address}\n"
            f"canal.instance.master.journal.name = {master.journal_name}\n"
            f"canal.instance.master.position = {master.position}\n"
            f"canal.instance.dbUsername = {master.username}\n"
            "canal.instance.dbPassword = ${CANAL_PASSWORD}\n"
            f"canal.instance.filter.regex = {mariadb.database}\\\\.t_{dest}\n"
        )
    return conf


class Writer:
    """Inserts consecutive ids into each destination's table on a thread, until stopped."""

    def __init__(self, mariadb: MariaDBDatabase, destinations: list[str]) -> None:
        self.mariadb, self.destinations = mariadb, destinations
        self.next = dict.fromkeys(destinations, 0)
        for dest in destinations:
            mariadb.execute(f"CREATE TABLE t_{dest} (id INT PRIMARY KEY)")
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        with self.mariadb.connect() as conn, conn.cursor() as cur:
            while not self.stop.is_set():
                for dest in self.destinations:
                    cur.execute(f"INSERT INTO t_{dest} VALUES (%s)", (self.next[dest],))
                    self.next[dest] += 1
                self.stop.wait(0.01)  # pacing, not synchronisation

    def finish(self) -> dict[str, int]:
        self.stop.set()
        self.thread.join(30)
        return dict(self.next)


def serve(
    conf: Path, mariadb: MariaDBDatabase, name: str, out: queue.Queue[str], more: dict[str, str] | None = None
) -> Served:
    """``canal serve`` with the printing consumer, its lines into ``out`` (``more``: environment variables)."""
    env = {
        **os.environ,
        **(more or {}),
        "CANAL_PASSWORD": mariadb.password,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]),
    }
    return Served(conf, env, ["--consumer", "procs.serve_consumer:rows", "--address", name], out)


class Ledger:
    """How many times each ``(destination, id)`` was printed, by any replica."""

    def __init__(self, out: queue.Queue[str]) -> None:
        self.out = out
        self.printed: Counter[tuple[str, int]] = Counter()

    def take(self) -> None:
        dest, value = self.out.get(timeout=30).split()
        self.printed[(dest, int(value))] += 1

    def until(self, expected: set[tuple[str, int]]) -> None:
        """Until every row of ``expected`` was printed (each line awaited from the replicas' stdout)."""
        while not expected <= set(self.printed):
            self.take()

    def rest(self) -> None:
        while not self.out.empty():
            self.take()


def test_replicas_of_canal_serve_hand_a_destination_over_without_printing_a_row_twice(
    mariadb: MariaDBDatabase, zookeeper: ZooKeeperChroot, tmp_path: Path
) -> None:
    # the consumer of `canal serve` took its batches from the instance, past the hand-over's refusal of new
    # batches: a replica joining took a destination over while the first still printed batches of it, which the
    # new owner delivered again
    dests = ["a", "b"]
    conf = conf_dir(
        tmp_path,
        mariadb,
        dests,
        f"canal.zkServers = {zookeeper.hosts}\npycanal.ha.revoke.timeout = 20\n",
    )
    writer = Writer(mariadb, dests)
    owners = Ownership(zookeeper.client(), dests)
    out: queue.Queue[str] = queue.Queue()
    printed = Ledger(out)
    first = serve(conf, mariadb, "first:1", out)
    second: Served | None = None
    try:
        first.err_line("canal serve: 2 destinations")
        owners.wait(lambda o: o.settled(["first:1"]), 30, "the first replica serving both")
        writer.thread.start()
        printed.take()  # rows flow
        second = serve(conf, mariadb, "second:1", out)
        owners.wait(lambda o: o.settled(["first:1", "second:1"]), 30, "one destination handed over")
        totals = writer.finish()
        expected = {(d, i) for d, n in totals.items() for i in range(n)}
        printed.until(expected)
        for served in (first, second):
            assert served.terminate() == 0
        printed.rest()
    finally:
        writer.stop.set()
        first.kill()
        if second is not None:
            second.kill()
    assert set(printed.printed) == expected
    twice = sorted(k for k, n in printed.printed.items() if n > 1)
    assert not twice, f"{len(twice)} rows printed twice: {twice[:10]}"


@pytest.mark.parametrize(
    ("sig", "pause"),
    [
        pytest.param(signal.SIGTERM, "3", id="SIGTERM-slow-consumer"),
        pytest.param(signal.SIGHUP, "0.1", id="SIGHUP"),  # a closed terminal (a JVM's canal stops cleanly on it)
    ],
)
def test_a_stop_signal_while_the_consumer_holds_a_batch_waits_for_it(
    mariadb: MariaDBDatabase, tmp_path: Path, sig: signal.Signals, pause: str
) -> None:
    # canal serve waited 2 s for the consumers, then stopped the server under the batch in hand: its ack failed,
    # and the next run printed it again. SIGHUP ended it at once, nothing flushed
    conf = conf_dir(
        tmp_path,
        mariadb,
        ["a"],
        "canal.instance.global.spring.xml = classpath:spring/file-instance.xml\n"
        f"canal.file.data.dir = {tmp_path / 'meta'}\n",
    )
    Writer(mariadb, ["a"])
    out: queue.Queue[str] = queue.Queue()
    printed = Ledger(out)
    slow = {"SERVE_CONSUMER_S": pause}
    first = serve(conf, mariadb, "one:1", out, slow)
    try:
        first.err_line("canal serve: 1 destinations")
        mariadb.execute("INSERT INTO t_a VALUES (1)")
        printed.take()  # the consumer printed the batch and works on it before it returns
        assert first.terminate(sig) == 0
    finally:
        first.kill()
    mariadb.execute("INSERT INTO t_a VALUES (2)")
    again = serve(conf, mariadb, "one:1", out)
    try:
        again.err_line("canal serve: 1 destinations")
        printed.until({("a", 2)})
        assert again.terminate() == 0
    finally:
        again.kill()
    printed.rest()
    assert printed.printed == {("a", 1): 1, ("a", 2): 1}
