"""The parser's switch to the standby, inside one running process, followed by the mirror: ``run_batches`` writes a
DeltaMirror while a workload writes to the primary (server id 1); the primary is killed, its replica (server id 2,
``log_slave_updates``, built after the primary's binlog reached ``mysql-bin.000005``, so its own numbering is far
behind) is promoted and takes the writes, and the parser's detecting thread switches the dump to it -- by GTID, or
by file and position with the search by time (``fallback_interval_s`` reaching back over every change of the run:
the standby delivers them all again). The mirror ends equal to ``SELECT`` on the promoted server, and each change is
applied once: the re-delivered ones are skipped by their GTIDs (canal.lake.identity.lineage), counted here -- except the
newest transaction applied before the switch, which the lineage applies again whole, in order (a batch may have
ended inside it), leaving its rows as they were. A ``run_batches`` waiting for the promoted server's position names
its server (``RunStats.reached(..., server_id=2)``): the old primary's positions, numbered higher, prove nothing."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from canal import Instance, InstanceConfig, MasterConfig
from canal.config import DetectingConfig, RetryConfig
from canal.errors import BinlogPurgedError, NotRunningError
from canal.lake.identity.applied import read_applied
from canal.lake.types import MirrorLineageError
from canal.spark import DeltaMirror, run_batches
from canal.spark.batches import RunStats
from canal.spark.testing import compare_tables, master_position
from canal.testing.services import MariaDBServer

pytestmark = pytest.mark.integration

FALLBACK_S = 120  # wider than the whole run: the standby delivers every change of it again


class Writer:
    """Single-row transactions (updates, inserts, deletes by key) on one server, in a thread, counted."""

    def __init__(self, server: MariaDBServer, first_id: int) -> None:
        self.server = server
        self.next_id = first_id
        self.changes = 0  # rows the statements changed
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"writer-{server.server_id}", daemon=True)

    def start(self) -> Writer:
        self._thread.start()
        return self

    def _run(self) -> None:
        conn = self.server.connect("d")
        n = 0
        try:
            with conn.cursor() as cur:
                while not self.stop.is_set():
                    n += 1
                    if n % 3 == 0:
                        cur.execute("INSERT INTO t VALUES (%s, %s)", (self.next_id, f"w{n}"))
                        self.next_id += 1
                    elif n % 7 == 0:
                        cur.execute("DELETE FROM t WHERE id = (SELECT MIN(id) FROM (SELECT id FROM t) k)")
                    else:
                        cur.execute("UPDATE t SET v = %s WHERE id = %s", (f"s{self.server.server_id}-{n}", n % 40))
                    self.changes += cur.rowcount
                    time.sleep(0.01)
        except BaseException as exc:  # the server went away, or a real failure: the test reads it
            self.error = exc
        finally:
            conn.close()

    def finish(self) -> None:
        self.stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive()


def _server(server: MariaDBServer, **start: Any) -> MasterConfig:
    return MasterConfig(address=server.address, username=server.user, password=server.password, **start)


def _until(predicate: Any, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.parametrize("gtid_mode", [False, True], ids=["file and position", "gtid"])
def test_the_mirror_follows_the_parsers_switch_to_the_promoted_replica(
    mariadb_factory: Any, tmp_path: Path, gtid_mode: bool
) -> None:
    primary: MariaDBServer = mariadb_factory(server_id=1)
    for _ in range(4):
        primary.execute("FLUSH BINARY LOGS")  # the primary's binlog is at mysql-bin.000005
    replica: MariaDBServer = mariadb_factory(server_id=2, replica_of=primary)  # its own: mysql-bin.000001
    primary.execute("CREATE DATABASE d")
    primary.execute("CREATE TABLE d.t (id INT PRIMARY KEY, v VARCHAR(20))")
    start = master_position(primary.connect())
    primary.execute("INSERT INTO d.t VALUES " + ", ".join(f"({i}, 'p{i}')" for i in range(40)))
    config = InstanceConfig(
        destination="shop",
        master=_server(primary, journal_name=start[0], position=start[1]),
        standby=_server(replica),
        filter_regex=r"d\..*",
        meta_mode="file",
        meta_dir=str(tmp_path / "meta"),
        gtid_mode=gtid_mode,
        detecting=DetectingConfig(enable=True, sql="SELECT 1", interval_s=0.2, retry_threshold=2, ha_switch=True),
        fallback_interval_s=FALLBACK_S,
        retry=RetryConfig(
            initial_backoff_s=0.01,
            max_backoff_s=0.1,
            max_attempts=None,  # the primary stays unreachable until the detecting thread switches
            connect_timeout_s=1.0,
            read_timeout_s=2.0,
            heartbeat_period_s=0.2,
        ),
    )
    mirror = DeltaMirror(tmp_path / "m")
    stop = threading.Event()
    target: list[tuple[str, int]] = []  # the promoted server's position to reach, once known
    ran: list[RunStats] = []
    with Instance(config) as inst:

        def mirror_it() -> None:
            def until(stats: RunStats) -> bool:
                return bool(target) and stats.reached(*target[0], server_id=2)

            ran.append(run_batches(inst, None, mirror, stop=stop, until=until, journal=tmp_path / "journal"))

        runner = threading.Thread(target=mirror_it, name="run_batches", daemon=True)
        runner.start()
        try:
            writer = Writer(primary, 1000).start()
            _until(lambda: writer.changes >= 60 and len(mirror.history) >= 3, "the mirror to follow the primary")
            # the primary dies between two of its transactions, every one of them replicated: nothing is lost in the
            # failover (a lost transaction the mirror applied is another matter: the stop of the lineage's tests)
            writer.stop.set()
            writer.finish()
            replica.wait_for_replication()
            primary_changes = writer.changes
            primary.kill()
            replica.execute("STOP SLAVE")
            replica.execute("RESET SLAVE ALL")  # promoted: the writes go on there
            promoted = Writer(replica, 5000).start()
            _until(lambda: inst.parser.switches == 1, "the parser to switch to the standby")
            _until(lambda: promoted.changes >= 60, "writes on the promoted replica")
            promoted.finish()
            assert writer.error is None and promoted.error is None
            until = master_position(replica.connect())
            target.append(until)
            runner.join(120)  # run_batches ends once it has handled everything before the promoted server's position
            assert not runner.is_alive(), "the mirror did not catch up with the promoted replica"
        finally:
            stop.set()
            runner.join(60)
        (stats,) = ran
        assert inst.parser.error is None and inst.parser.active_master.address == replica.address
    assert stats.reached(*until, server_id=2)
    assert not stats.reached(*until, server_id=1)  # the primary's positions are not the replica's

    conn = replica.connect()
    try:
        for c in compare_tables(conn, mirror, "d", ["t"]):
            assert c.equal, str(c)
    finally:
        conn.close()
    record = read_applied(mirror.root, mirror.app_id)
    assert record is not None and record.server_id == 2 and record.log_file == "mysql-bin.000001"
    # each change applied once: the rows the mirror admitted are the changes the servers made, plus (by file and
    # position) the newest transaction before the switch, one row, applied again whole
    admitted = sum(result.rows for result in mirror.history)
    changes = 40 + primary_changes + promoted.changes
    assert admitted == changes + (0 if gtid_mode else 1), (admitted, changes)
    if not gtid_mode:  # the search by time brought the primary's changes again: skipped, all but that one
        assert stats.rows >= admitted + primary_changes
    mirror.close()


def _state(mirror: DeltaMirror) -> tuple[list[dict[str, Any]], int | None]:
    return sorted(mirror.read("d", "t").to_pylist(), key=lambda r: r["id"]), mirror.version("d", "t")


@pytest.mark.parametrize("gtid_mode", [False, True], ids=["file and position", "gtid"])
def test_transactions_a_failover_lost_stop_the_mirror(mariadb_factory: Any, tmp_path: Path, gtid_mode: bool) -> None:
    """The primary writes transactions its replica never receives, the mirror applies them, the primary dies and the
    promoted replica numbers its own transactions as those (MariaDB: 0-2-4 after the mirror's 0-1-4): by file and
    position, the mirror stops with MirrorLineageError naming both servers before it writes anything of the batch --
    it skipped those transactions as applied before; by GTID, the promoted server refuses the dump (it has not the
    GTIDs the cursor holds), a typed stop of the parser naming the loss."""
    primary: MariaDBServer = mariadb_factory(server_id=1)
    replica: MariaDBServer = mariadb_factory(server_id=2, replica_of=primary)
    primary.execute("CREATE DATABASE d")
    primary.execute("CREATE TABLE d.t (id INT PRIMARY KEY, v VARCHAR(20))")
    start = master_position(primary.connect())
    primary.execute("INSERT INTO d.t VALUES " + ", ".join(f"({i}, 'p{i}')" for i in range(10)))
    replica.wait_for_replication()
    replica.execute("STOP SLAVE IO_THREAD")  # what the primary writes now never reaches the replica
    for i in range(3):
        primary.execute("UPDATE d.t SET v = 'lost' WHERE id = %s", (i,))
    config = InstanceConfig(
        destination="shop",
        master=_server(primary, journal_name=start[0], position=start[1]),
        standby=_server(replica),
        filter_regex=r"d\..*",
        gtid_mode=gtid_mode,
        fallback_interval_s=FALLBACK_S,
        retry=RetryConfig(initial_backoff_s=0.01, max_backoff_s=0.1, connect_timeout_s=1.0),
    )
    mirror = DeltaMirror(tmp_path / "m")
    with Instance(config) as inst:
        until = master_position(primary.connect())
        run_batches(inst, None, mirror, until=lambda s: s.reached(*until), idle_stop_s=60)
        before = _state(mirror)
        primary.kill()
        replica.execute("STOP SLAVE")
        replica.execute("RESET SLAVE ALL")  # promoted
        for i in range(5, 9):
            replica.execute("UPDATE d.t SET v = 'promoted' WHERE id = %s", (i,))
        inst.parser.switch()  # as the detecting thread does once the primary stops answering
        until = master_position(replica.connect())
        if gtid_mode:
            with pytest.raises(NotRunningError):
                run_batches(inst, None, mirror, until=lambda s: s.reached(*until, server_id=2), idle_stop_s=60)
            error = inst.parser.error
            assert isinstance(error, BinlogPurgedError)
            assert f"is not on {replica.address}, the server the parser switched to" in str(error)
            assert "lost in the failover" in str(error)
        else:
            with pytest.raises(MirrorLineageError) as stop:
                run_batches(inst, None, mirror, until=lambda s: s.reached(*until, server_id=2), idle_stop_s=60)
            message = str(stop.value)
            assert "server_id 1 at mysql-bin.000001" in message and "binlog of server_id 2" in message
            assert "transaction 0-2-4" in message and "histories forked" in message
    assert _state(mirror) == before  # nothing of the batch written, the lost changes not passed over
    mirror.close()
