"""Many destinations of one master in one process, against a real MariaDB: each dump registers a replica id of its
own when none is configured, a clash another replica causes is a typed stop naming ``slave_id`` (or, for a derived
id, another id), and ``stop()`` leaves no dump and no connection of the capture user on the server.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from canal.client import ClientIdentity
from canal.config import DetectingConfig, InstanceConfig, MasterConfig, RetryConfig
from canal.errors import ReplicaIdConflictError
from canal.instance import Instance
from canal.parse import schema_tracking
from canal.parse.mysql.binlog import EventDecoder
from canal.parse.mysql.replica_ids import REPLICA_IDS
from canal.parse.mysql.source import MysqlBinlogSource
from canal.parse.schema_tracking import read_layouts
from canal.protocol import EMPTY_MESSAGE_ID, EntryType, Message
from canal.server import EmbeddedServer
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration


def master_now(db: MariaDBDatabase) -> MasterConfig:
    return db.master()


def config(master: MasterConfig, destination: str, filter_regex: str, **kw: Any) -> InstanceConfig:
    # heartbeats every 10 s: a dump the server has not been told to end stays listed until its next one
    kw.setdefault("detecting", DetectingConfig(interval_s=10))
    kw.setdefault("retry", RetryConfig(initial_backoff_s=0.05, max_backoff_s=0.5, read_timeout_s=30))
    return InstanceConfig(destination=destination, master=master, filter_regex=filter_regex, **kw)


def capture_threads(db: MariaDBDatabase) -> dict[int, str]:
    """The capture user's connections on the server: id -> command (``Binlog Dump``, ``Sleep``, ...)."""
    rows = db.server.execute("SELECT ID, COMMAND FROM information_schema.PROCESSLIST WHERE USER = %s", (db.user,))
    return {int(r[0]): str(r[1]) for r in rows}


def wait_for(what: str, check: Callable[[], bool], limit_s: float = 10.0) -> None:
    deadline = time.monotonic() + limit_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def rows_of(msg: Message) -> list[int]:
    return [
        int(r.after_dict()["id"])
        for e in msg.entries
        if e.entry_type is EntryType.ROWDATA and e.row_change is not None and not e.row_change.is_ddl
        for r in e.iter_rows()
    ]


def take(get: Callable[[], Message], count: int, limit_s: float = 30.0) -> list[int]:
    seen: list[int] = []
    deadline = time.monotonic() + limit_s
    while len(seen) < count:
        assert time.monotonic() < deadline, f"only {len(seen)} of {count} rows"
        msg = get()
        if msg.id != EMPTY_MESSAGE_ID:
            seen += rows_of(msg)
    return seen


def test_destinations_without_a_slave_id_dump_side_by_side_and_stop_leaves_nothing(mariadb: MariaDBDatabase) -> None:
    n = 6
    for i in range(n):
        mariadb.execute(f"CREATE TABLE t{i} (id INT PRIMARY KEY)")
    before = set(capture_threads(mariadb))
    master = master_now(mariadb)
    db = mariadb.database
    server = EmbeddedServer()
    server.start()
    try:
        for i in range(n):  # each reading alone: a dump each
            server.start_destination(config(master, f"d{i}", rf"{db}\.t{i}", share_reader=False))
        wait_for(
            f"{n} binlog dumps",
            lambda: sum(c == "Binlog Dump" for t, c in capture_threads(mariadb).items() if t not in before) == n,
        )
        ids = {int(r[0]) for r in mariadb.server.execute("SHOW SLAVE HOSTS")}
        assert len(ids) >= n  # one replica id each (other tests' replicas may be listed too)
        for i in range(n):
            for k in range(3):
                mariadb.execute(f"INSERT INTO t{i} VALUES ({100 * i + k})")
        for i in range(n):
            client = ClientIdentity(f"d{i}", 1001)
            assert take(lambda client=client: server.get(client, 100, timeout=0.2), 3) == [
                100 * i + k for k in range(3)
            ]
        # all dumps stayed connected: none pushed another off (the same id would have, over and over)
        assert [server.instance(f"d{i}").parser.reconnects for i in range(n)] == [0] * n
    finally:
        server.stop()
    # stop() returned: the dumps are gone from the server, and so is every other connection pycanal opened
    # (a connection's COM_QUIT may take the server a moment to process)
    assert not {t for t, c in capture_threads(mariadb).items() if t not in before and c == "Binlog Dump"}
    wait_for("the capture user's connections to end", lambda: not set(capture_threads(mariadb)) - before, 2.0)


def test_shared_destinations_dump_once_decode_only_their_tables_and_stop_leaves_nothing(
    mariadb: MariaDBDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    n = 4
    for i in range(n):
        mariadb.execute(f"CREATE TABLE t{i} (id INT PRIMARY KEY)")
    mariadb.execute("CREATE TABLE other (id INT PRIMARY KEY)")  # no destination captures it
    decoded: list[str] = []
    real = EventDecoder._decode

    def counting(self: EventDecoder, dec: Any, *args: Any) -> Any:
        decoded.append(dec.schema.table)
        return real(self, dec, *args)

    monkeypatch.setattr(EventDecoder, "_decode", counting)
    before = set(capture_threads(mariadb))
    master = master_now(mariadb)
    db = mariadb.database
    server = EmbeddedServer()
    server.start()
    try:
        for i in range(n):
            server.start_destination(config(master, f"s{i}", rf"{db}\.t{i}"))
        wait_for("sharing", lambda: all(server.instance(f"s{i}").parser.shared for i in range(n)))
        decoded.clear()
        for k in range(5):
            mariadb.execute(f"INSERT INTO other VALUES ({k})")
            for i in range(n):
                mariadb.execute(f"INSERT INTO t{i} VALUES ({10 * i + k})")
        for i in range(n):
            client = ClientIdentity(f"s{i}", 1001)
            assert take(lambda client=client: server.get(client, 100, timeout=0.2), 5) == [10 * i + k for k in range(5)]
        # one dump for all of them; their own connections closed while they share
        running = {t: c for t, c in capture_threads(mariadb).items() if t not in before}
        assert list(running.values()).count("Binlog Dump") == 1, running
        assert len(running) <= 2, running  # the reader's dump and its side connection
        # each captured table's rows decoded once, the other table's never
        assert "other" not in decoded and sorted(set(decoded)) == [f"t{i}" for i in range(n)]
        assert all(decoded.count(f"t{i}") == 5 for i in range(n)), decoded
    finally:
        server.stop()
    assert not {t for t, c in capture_threads(mariadb).items() if t not in before and c == "Binlog Dump"}
    wait_for("the capture user's connections to end", lambda: not set(capture_threads(mariadb)) - before, 2.0)


def test_instance_stop_ends_its_dump_on_the_server(mariadb: MariaDBDatabase) -> None:
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    before = set(capture_threads(mariadb))
    inst = Instance(config(master_now(mariadb), "solo", rf"{mariadb.database}\.t"))
    inst.start()
    try:
        mariadb.execute("INSERT INTO t VALUES (1)")
        assert take(lambda: inst.get(10, timeout=0.2), 1) == [1]
        assert "Binlog Dump" in {c for t, c in capture_threads(mariadb).items() if t not in before}
    finally:
        inst.stop()
    assert not {t for t, c in capture_threads(mariadb).items() if t not in before and c == "Binlog Dump"}
    wait_for("the capture user's connections to end", lambda: not set(capture_threads(mariadb)) - before, 2.0)


def test_destinations_starting_together_read_the_layouts_once(
    mariadb: MariaDBDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    monkeypatch.setattr(schema_tracking, "_SHARED_READS", {})
    reads: list[str] = []
    real = MysqlBinlogSource.schema_catalog

    def counted(self: MysqlBinlogSource, *args: Any, **kwargs: Any) -> Any:
        reads.append(self.address)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(MysqlBinlogSource, "schema_catalog", counted)

    def layouts() -> tuple[list[str], Any]:
        with MysqlBinlogSource(mariadb.address, mariadb.user, mariadb.password) as source:
            catalog, at = read_layouts(source)
        table = catalog.get(mariadb.database, "t")
        assert table is not None
        return [c.name for c in table.columns], at

    first = layouts()
    assert first[0] == ["id"] and len(reads) == 1
    assert layouts() == first and len(reads) == 1  # another destination's start: the same read
    mariadb.execute("INSERT INTO t VALUES (1)")
    names, at = layouts()
    assert names == ["id"] and len(reads) == 1 and at.position > first[1].position  # no DDL since: still valid
    mariadb.execute("ALTER TABLE t ADD COLUMN v INT")
    assert layouts()[0] == ["id", "v"] and len(reads) == 2  # a DDL since: read again


# -- a replica id another replica takes ---------------------------------------------------------------------------

_OTHER_REPLICA = textwrap.dedent(
    """
    import sys, time
    from canal.parse.mysql.source import MysqlBinlogSource
    from canal.parse.source import DumpRequest

    address, user, password, slave_id = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    print("ready", flush=True)
    while True:  # what a replica does: connect again whenever its dump ends
        source = MysqlBinlogSource(address, user, password, slave_id=slave_id)
        try:
            source.open()
            start = source.master_status()
            for _ in source.dump(DumpRequest(journal_name=start.journal_name, position=start.position)):
                pass
        except Exception as exc:
            print("ended:", exc, flush=True)
        finally:
            source.close()
        time.sleep(0.2)
    """
)


@pytest.fixture
def other_replica(mariadb: MariaDBDatabase) -> Iterator[Callable[[int], None]]:
    """Starts a replica in another process that dumps with a given replica id and reconnects when pushed off."""
    procs: list[subprocess.Popen[str]] = []

    def start(slave_id: int) -> None:
        proc = subprocess.Popen(
            [sys.executable, "-c", _OTHER_REPLICA, mariadb.address, mariadb.user, mariadb.password, str(slave_id)],
            stdout=subprocess.PIPE,
            text=True,
        )
        procs.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def replica_ids(db: MariaDBDatabase) -> set[int]:
    return {int(r[0]) for r in db.server.execute("SHOW SLAVE HOSTS")}


def test_a_configured_slave_id_another_replica_uses_is_a_typed_stop(
    mariadb: MariaDBDatabase, other_replica: Callable[[int], None]
) -> None:
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    slave_id = 424242
    inst = Instance(config(master_now(mariadb), "clash", rf"{mariadb.database}\.t", slave_id=slave_id))
    inst.start()
    try:
        wait_for("the dump", lambda: slave_id in replica_ids(mariadb))
        cursor = inst.get_cursor()
        other_replica(slave_id)  # pushes the dump off; the dump pushes it off again, and so on
        wait_for("the typed stop", lambda: inst.parser.error is not None, 30.0)
        error = inst.parser.error
        assert isinstance(error, ReplicaIdConflictError) and error.replica_id == slave_id
        assert "slave_id" in str(error) and mariadb.password not in str(error)
        metrics = inst.metrics()
        assert not metrics.running and metrics.errors == 1
        assert inst.get_cursor() == cursor
        # a clash is retried twice (the other dump may be this destination's own predecessor), not forever
        assert inst.parser.reconnects <= 3
    finally:
        inst.stop()


def test_a_derived_id_another_replica_takes_is_given_up_for_another(
    mariadb: MariaDBDatabase, other_replica: Callable[[int], None]
) -> None:
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    inst = Instance(config(master_now(mariadb), "derived", rf"{mariadb.database}\.t"))
    inst.start()
    try:
        wait_for("the dump", lambda: "derived" in REPLICA_IDS.held(mariadb.address).values())
        first = next(i for i, name in REPLICA_IDS.held(mariadb.address).items() if name == "derived")
        other_replica(first)
        wait_for(
            "another id",
            lambda: (
                "derived" in REPLICA_IDS.held(mariadb.address).values()
                and first not in REPLICA_IDS.held(mariadb.address)
            ),
        )
        second = next(i for i, name in REPLICA_IDS.held(mariadb.address).items() if name == "derived")
        wait_for("both replicas connected", lambda: {first, second} <= replica_ids(mariadb))
        mariadb.execute("INSERT INTO t VALUES (7)")
        assert take(lambda: inst.get(10, timeout=0.2), 1) == [7]
        assert inst.parser.error is None and inst.parser.reconnects == 1
    finally:
        inst.stop()
