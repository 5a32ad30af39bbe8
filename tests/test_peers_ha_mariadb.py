"""canal and pycanal as HA peers of one destination on one ZooKeeper: real processes, a real ZooKeeper and MariaDB.

canal 1.1.7 runs the destination as its deployer does under ZooKeeper (``peers/``: ``CanalServerWithEmbedded`` started
by canal's ``ServerRunningMonitor`` when it wins ``/otter/canal/destinations/{dest}/running``; canal's default meta,
``PeriodMixedMetaManager``, which writes the cursor to ZooKeeper once a second), consuming and acking client 1001.
pycanal runs it through ``EmbeddedServer(zk_hosts=...)`` (``tests.procs.ha_consumer``). Each stands by while the
other holds the running node; the cursor one acked is where the other resumes; killing the owner hands over; a canal
owner paused past its session serves on beside pycanal (canal is not fenced).

What is delivered twice is measured against what canal itself persisted: canal's meta writes its cursor to ZooKeeper
once a second and not when it stops, so its successor (another canal as much as pycanal) starts from where canal was
up to a second before; and a cursor names the transaction it ends in, which is read again from its start. Which rows
that is depends on when canal's last write fell, so the tests watch canal's cursor node (:class:`CursorHistory`) and
take the version the successor read: the last one written before the successor created its running node.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from peer_harness import CanalPeer, skip_reason

from canal.position import journal_number
from canal.testing.plugin import MariaDBDatabase, ZooKeeperChroot
from canal.testing.services import free_port
from tests.procs.ha_harness import Child, ConsumerLog, kill_all

pytestmark = [pytest.mark.integration, pytest.mark.skipif(skip_reason() is not None, reason=str(skip_reason()))]

DEST = "peers_ha"
CLIENT_ID = 1001  # the client canal's harness consumes as


class Writer:
    """Inserts rows 1, 2, ... one transaction each, into ``table``: in bursts (:meth:`write`) or at a steady pace on a
    thread (:meth:`start` / :meth:`stop`)."""

    def __init__(self, mariadb: MariaDBDatabase, table: str) -> None:
        self.conn = mariadb.connect()
        self.table = table
        self.written = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def write(self, n: int) -> None:
        with self.conn.cursor() as cur:
            for _ in range(n):
                self.written += 1
                cur.execute(f"INSERT INTO {self.table} VALUES ({self.written})")

    def start(self, per_s: float = 50.0) -> None:
        def run() -> None:
            while not self._stop.wait(1 / per_s):
                self.write(1)

        self._thread = threading.Thread(target=run, name="writer", daemon=True)
        self._thread.start()

    def flow(self, rows: int) -> None:
        """Wait until the steady writer wrote ``rows`` more: what a peer reads while rows flow."""
        until = self.written + rows
        wait_until(f"{rows} more rows written", lambda: self.written >= until)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        self.conn.close()


class Setup:
    def __init__(self, mariadb: MariaDBDatabase, zookeeper: ZooKeeperChroot, tmp: Path) -> None:
        self.mariadb, self.zookeeper, self.tmp = mariadb, zookeeper, tmp
        self.table = f"`{mariadb.database}`.t"
        mariadb.execute(f"CREATE TABLE {self.table} (id INT PRIMARY KEY)")
        journal, position = mariadb.execute("SHOW MASTER STATUS")[0][:2]
        self.start = (str(journal), int(position))
        self.regex = rf"{mariadb.database}\.t"
        self.children: list[Child] = []
        self.canals: list[CanalPeer] = []
        self.addresses: dict[str, str] = {}  # the address each peer writes into the running node, by name

    def canal(self, name: str, zk_session_ms: int = 2000) -> CanalPeer:
        """A canal server process embedding the destination under ZooKeeper (its start: ``active`` or ``standby``),
        with a ZooKeeper session of ``zk_session_ms``: canal's default is ZkClient's 30 s, and a killed owner hands
        over once its session ends."""
        peer = CanalPeer(name=name, log_dir=self.tmp)
        self.canals.append(peer)
        self.addresses[name] = f"127.0.0.1:{free_port()}"
        peer.start_destination(
            DEST,
            ha=True,
            zk=self.zookeeper.hosts,
            zk_session_ms=zk_session_ms,
            server_address=self.addresses[name],
            delay_s=1,  # ServerRunningMonitor's anti-flapping delay (canal's default 5 s)
            meta="mixed",
            index="memory_meta_failback",
            address=self.mariadb.address,
            username=self.mariadb.user,
            password=self.mariadb.password,
            position={"journalName": self.start[0], "position": self.start[1], "timestamp": int(time.time() * 1000)},
            filter=self.regex,
            batch_size=5,
            batch_mode="ITEMSIZE",
            timeout_ms=100,
        )
        return peer

    def pycanal(self, name: str) -> Child:
        self.addresses[name] = f"127.0.0.1:{free_port()}"
        child = Child(
            name,
            {
                "zk_hosts": self.zookeeper.hosts,
                "address": self.addresses[name],
                "mysql": self.mariadb.address,
                "user": self.mariadb.user,
                "password": self.mariadb.password,
                "table_regex": self.regex,
                "journal": self.start[0],
                "position": self.start[1],
                "log": str(self.tmp / f"{name}.log"),
                "destination": DEST,
                "mode": "loop",
                "ha_delay_s": 1.0,
                "zk_timeout_s": 2.0,
                "seed": 7,
            },
        )
        self.children.append(child)
        child.expect(lambda line: line == "W", 60, "standing by or serving")
        return child

    def close(self) -> None:
        kill_all(self.children)
        for peer in self.canals:
            peer.close()


@pytest.fixture
def ha(mariadb: MariaDBDatabase, zookeeper: ZooKeeperChroot, tmp_path: Path) -> Any:
    setup = Setup(mariadb, zookeeper, tmp_path)
    try:
        yield setup
    finally:
        setup.close()


def canal_rows(peer: CanalPeer) -> tuple[dict[int, float], list[int]]:
    """The rows canal acked (row id -> when its ack line arrived) and every row it handed out, in order."""
    batches: dict[int, list[int]] = {}
    delivered: list[int] = []
    acked: dict[int, float] = {}
    for line in list(peer.lines):
        if line["kind"] == "entry" and line["header"]["eventType"] == "INSERT":
            ids = [int(r["afterColumns"][0]["value"]) for r in line["rowChange"]["rowDatas"]]
            batches.setdefault(line["batch"], []).extend(ids)
            delivered.extend(ids)
        elif line["kind"] == "ack":
            for row in batches.get(line["batch"], []):
                acked[row] = line["_t"]
    return acked, delivered


def pycanal_rows(child: Child, log: Path) -> tuple[set[int], list[int]]:
    """The rows a pycanal process acked and every row it handed out, in order (its log)."""
    parsed = ConsumerLog.parse(child.name, log)
    acked_batches = {batch for batch, *_rest in parsed.acked}
    delivered = [row for _b, _t, _at, ids in parsed.delivered for row in ids]
    acked = {row for batch, _t, _at, ids in parsed.delivered if batch in acked_batches for row in ids}
    return acked, delivered


def wait_until(what: str, check: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"no {what} within {timeout}s"
        time.sleep(0.05)


class CursorHistory:
    """The versions of client 1001's cursor node, as (version, mzxid, position, slaveId), from a watch set before any
    write. A watch sees the node's data at each trigger, so a version written before the watch re-read it is not
    seen (:meth:`read_before` says which can be missed)."""

    def __init__(self, zookeeper: ZooKeeperChroot) -> None:
        import json

        self.path = f"/otter/canal/destinations/{DEST}/{CLIENT_ID}/cursor"
        self.client: KazooClient = zookeeper.client(timeout=5.0)
        self.versions: list[tuple[int, int, dict[str, Any], int]] = []
        self._lock = threading.Lock()

        def seen(data: bytes | None, stat: Any) -> None:
            if data is not None and stat is not None:
                with self._lock:
                    cursor = json.loads(data)
                    self.versions.append((stat.version, stat.mzxid, cursor["postion"], cursor["identity"]["slaveId"]))

        self.client.DataWatch(self.path, seen)

    def furthest_before(self, zxid: int) -> dict[str, Any] | None:
        """The furthest position written before ``zxid``: with ``zxid`` taken once canal's process is gone, at least
        as far as canal's last write (canal's cursor only moves on; a write its stopping instance made after its
        successor took over counts; a successor's own writes can only make it further)."""
        with self._lock:
            written = [v[2] for v in self.versions if v[1] < zxid]
        return max(written, key=lambda p: (journal_number(p["journalName"]), int(p["position"])), default=None)

    def current(self) -> tuple[dict[str, Any] | None, int]:
        """The cursor node's data now (canal's LogPosition JSON) and the zxid that wrote it (None, 0: no node). Read
        once the last owner's process is gone and before its successor runs, it is exactly the owner's last write,
        which the watch can miss under load (it saw canal's versions 0, 2, 3 once)."""
        import json

        try:
            data, stat = self.client.get(self.path)
        except NoNodeError:
            return None, 0
        return json.loads(data), int(stat.mzxid)

    def now(self) -> int:
        """A zxid after every write ZooKeeper has made so far (a sequential node's creation)."""
        path = self.client.create("/test-marks/mark", sequence=True, makepath=True)
        return int(self.client.exists(path).czxid)

    def owner_since(self) -> int:
        """The zxid that created the running node (its owner's take-over)."""
        _data, stat = self.client.get(f"/otter/canal/destinations/{DEST}/running")
        return int(stat.czxid)

    def read_before(self, zxid: int) -> dict[str, Any] | None:
        """The position the node held just before ``zxid`` (None: not written yet). The versions seen before it must
        run 0, 1, ... with none missed; the one after the last of them cannot be missed either, as canal writes once
        a second and its successor only once it took over (its acks, which can follow each other faster than the
        watch: those are missed, and do not matter here)."""
        stat = self.client.exists(self.path)
        if stat is not None:
            wait_until("the cursor watch catching up", lambda: any(v[0] >= stat.version for v in self.versions))
        with self._lock:
            before = sorted(v for v in self.versions if v[1] < zxid)
        assert [v[0] for v in before] == list(range(len(before))), f"the cursor watch missed a version: {before}"
        return before[-1][2] if before else None


def rows_from(peer: CanalPeer, position: dict[str, Any] | None) -> set[int]:
    """The rows canal handed out in the transaction ``position`` names and after it: what a successor resuming there
    reads again (all of them when no position was persisted). A row's transaction is placed by its end (the
    TRANSACTIONEND entry after it, the cursor canal persists at an ack); a row whose end canal never handed out lies
    after every cursor it persisted."""
    at = None if position is None else (journal_number(position["journalName"]), int(position["position"]))
    included = position is not None and bool(position["included"])
    rows: set[int] = set()
    pending: list[int] = []
    for line in list(peer.lines):
        if line["kind"] != "entry":
            continue
        if line["header"]["eventType"] == "INSERT":
            pending.extend(int(r["afterColumns"][0]["value"]) for r in line["rowChange"]["rowDatas"])
        elif line["entryType"] == "TRANSACTIONEND":
            end = (journal_number(line["header"]["logfileName"]), int(line["header"]["logfileOffset"]))
            if at is None or end > at or (end == at and not included):
                rows.update(pending)
            pending = []
    return rows | set(pending)


def assert_redelivered_from_cursor(
    canal: CanalPeer,
    canal_acked: set[int],
    successor_delivered: set[int],
    read: dict[str, Any] | None,
    last: dict[str, Any] | None,
) -> None:
    """What canal's successor handed out again is what canal acked from the cursor the successor read on: at most
    from ``read``, the position written before the successor took over, at least from ``last``, canal's last write:
    the same one unless a write of canal's stopping instance landed after the take-over."""
    twice = canal_acked & successor_delivered
    most = canal_acked & rows_from(canal, read)
    assert twice <= most, f"handed out again before canal's persisted cursor {read}: {sorted(twice - most)}"
    least = canal_acked & rows_from(canal, last)
    assert twice >= least, f"not handed out again after canal's persisted cursor {last}: {sorted(least - twice)}"


def row_transactions(mariadb: MariaDBDatabase, since: tuple[str, int]) -> dict[int, tuple[tuple[int, int], ...]]:
    """Row id -> where its transaction lies in the binlog, as (journal number, offset) of its first event, its rows
    event and its end (the XID event): the writer's n-th transaction on ``t`` holds row n (SHOW BINLOG EVENTS from
    ``since`` on)."""
    marker = f"({mariadb.database}.t)"
    rows: dict[int, tuple[tuple[int, int], ...]] = {}
    begin: tuple[int, int] | None = None
    rows_event: tuple[int, int] | None = None
    for name, *_size in mariadb.execute("SHOW BINARY LOGS"):
        if journal_number(str(name)) < journal_number(since[0]):
            continue
        for _log, pos, kind, _server, _end, info in mariadb.execute(f"SHOW BINLOG EVENTS IN '{name}'"):
            here = (journal_number(str(name)), int(pos))
            if kind == "Gtid":
                begin, rows_event = here, None
            elif (kind == "Table_map" and marker in str(info)) or (kind.startswith("Write_rows") and rows_event):
                rows_event = here
            elif kind == "Xid":
                if begin is not None and rows_event is not None:
                    rows[len(rows) + 1] = (begin, rows_event, here)
                begin = rows_event = None
    return rows


def running_address(zookeeper: ZooKeeperChroot) -> str | None:
    import json

    client: KazooClient = zookeeper.client(timeout=5.0)
    try:
        data, _stat = client.get(f"/otter/canal/destinations/{DEST}/running")
    except Exception:
        return None
    return str(json.loads(data)["address"])


def test_pycanal_takes_over_from_canal_without_downtime(ha: Setup) -> None:
    """The migration: pycanal starts as a standby of canal's destination (it serves nothing while canal runs it),
    canal stops, and pycanal goes on from canal's cursor: every row arrives, and what pycanal hands out again is
    exactly what canal acked from the cursor it last persisted on."""
    cursors = CursorHistory(ha.zookeeper)
    canal = ha.canal("canal1")
    assert canal.select("active", destination=DEST), "canal runs the destination"
    writer = Writer(ha.mariadb, ha.table)
    try:
        writer.write(30)
        wait_until("canal acking rows 1-30", lambda: len(canal_rows(canal)[0]) >= 30)
        child = ha.pycanal("pycanal1")
        canal_address = running_address(ha.zookeeper)
        writer.write(30)
        wait_until("canal acking rows 31-60", lambda: len(canal_rows(canal)[0]) >= 60)
        assert running_address(ha.zookeeper) == canal_address
        assert pycanal_rows(child, ha.tmp / "pycanal1.log") == (set(), []), "the standby served"
        writer.start()
        writer.flow(25)  # canal stops while rows flow
        canal.close()
        canal_gone = cursors.now()
        child.expect(lambda line: line.startswith("S "), 30, "pycanal serving")
        took_over = cursors.owner_since()
        writer.flow(25)  # pycanal serves while rows flow
    finally:
        writer.stop()
    total = writer.written
    log = ha.tmp / "pycanal1.log"
    wait_until(
        "pycanal acking every row",
        lambda: pycanal_rows(child, log)[0] >= set(range(1, total + 1)) - set(canal_rows(canal)[0]),
    )
    canal_acked, _canal_delivered = canal_rows(canal)
    ours_acked, ours_delivered = pycanal_rows(child, log)
    assert set(canal_acked) | ours_acked == set(range(1, total + 1)), "a row was lost"
    read, last = cursors.read_before(took_over), cursors.furthest_before(canal_gone)
    assert_redelivered_from_cursor(canal, set(canal_acked), set(ours_delivered), read, last)
    assert len(ours_delivered) == len(set(ours_delivered))
    assert running_address(ha.zookeeper) != canal_address


def test_killing_the_owner_hands_over_both_ways(ha: Setup) -> None:
    """canal runs the destination, pycanal stands by; canal is SIGKILLed and pycanal goes on from canal's cursor;
    a new canal stands by, pycanal is SIGKILLed holding a batch it never acked and canal goes on from pycanal's
    cursor. No row is lost; what is handed out twice is what the killed owner had acked from its last cursor write
    on (canal: what it acked after the cursor it last persisted; pycanal, which writes the cursor in the ack: the
    rows of the transaction its cursor ends inside, which canal reads again -- it ignores ``rowsDone``).

    pycanal is killed while it holds a batch (between a get and its ack), not at a random moment: a kill between
    ``ack()`` writing the cursor and the consumer's log line saying so would leave rows acked in ZooKeeper that the
    log does not show (counted lost, the test failed 3 runs of 24 under load)."""
    cursors = CursorHistory(ha.zookeeper)
    # a session of 4 s: with 2 s, a canal starved under load lost it once in 96 runs before it was killed, pycanal
    # took the running node and canal (not fenced) served on beside it
    canal1 = ha.canal("canal1", zk_session_ms=4000)
    assert canal1.select("active", destination=DEST)
    child = ha.pycanal("pycanal1")
    writer = Writer(ha.mariadb, ha.table)
    log = ha.tmp / "pycanal1.log"
    try:
        writer.start()
        wait_until("canal acking 40 rows", lambda: len(canal_rows(canal1)[0]) >= 40)
        killed_at = time.monotonic()
        canal1.kill()
        # canal's last cursor write, read at once: pycanal cannot run the destination before canal's session ends
        canal_cursor, canal_cursor_zxid = cursors.current()
        child.expect(lambda line: line.startswith("S "), 30, "pycanal serving after canal's death")
        assert canal_cursor_zxid < cursors.owner_since(), "the cursor read at canal's kill was written after " + (
            f"pycanal ran\n{ownership_story(ha, cursors, [canal1], log, killed_at)}"
        )
        wait_until("pycanal acking 40 rows", lambda: len(pycanal_rows(child, log)[0]) >= 40)
        canal2 = ha.canal("canal2")
        assert canal2.select("standby", destination=DEST), "the new canal stands by while pycanal runs it"
        time.sleep(1.0)
        assert not canal_rows(canal2)[1], "the standby canal served"
        child.send("hold")
        held_batch = int(child.expect(lambda line: line.startswith("H "), 30, "pycanal holding a batch").split()[1])
        killed_at = time.monotonic()
        child.proc.send_signal(signal.SIGKILL)
        child.proc.wait(30)
        # pycanal's last cursor write: canal2 cannot run the destination before pycanal's session ends (2 s)
        ours_cursor, ours_cursor_zxid = cursors.current()
        assert ours_cursor is not None, "pycanal wrote no cursor"
        canal2.wait_for(lambda line: line["kind"] == "active", 30, "canal serving after pycanal's death")
        assert ours_cursor_zxid < cursors.owner_since(), "the cursor read at pycanal's kill was written after " + (
            f"canal2 ran\n{ownership_story(ha, cursors, [canal1, canal2], log, killed_at)}"
        )
        writer.flow(50)  # canal2 serves while rows flow
    finally:
        writer.stop()
    total = writer.written
    wait_until("canal acking the last row", lambda: total in canal_rows(canal2)[0])
    first_acked, _ = canal_rows(canal1)
    ours_acked, ours_delivered = pycanal_rows(child, log)
    second_acked, second_delivered = canal_rows(canal2)
    parsed = ConsumerLog.parse(child.name, log)
    held = {row for batch, _t, _at, ids in parsed.delivered if batch == held_batch for row in ids}
    lost = set(range(1, total + 1)) - set(first_acked) - ours_acked - set(second_acked)
    story = handover_story(ha, canal2, log, ours_cursor, held | lost)
    # pycanal -> canal, against the cursor pycanal left in ZooKeeper, each row's transaction placed in the binlog
    placed = row_transactions(ha.mariadb, ha.start)
    at = (journal_number(ours_cursor["postion"]["journalName"]), int(ours_cursor["postion"]["position"]))
    past = {row for row, (_begin, _rows, end) in placed.items() if end <= at}  # transactions ended at the cursor
    after = sorted(set(placed) - past)
    partly = set(after[: ours_cursor["rowsDone"]])  # rows of the next transaction acked (one row each here)
    # pycanal's side: the cursor is where its acks left it, no further (an ack returns once its cursor is written)
    unacked = (past | partly) - ours_acked - set(first_acked)
    assert not unacked, f"pycanal's cursor is past rows never acked: {sorted(unacked)}\n{story}"
    assert held and not held & (past | partly), f"pycanal's cursor is past the batch it held\n{story}"
    behind = ours_acked - set(first_acked) - past - partly
    assert not behind, f"pycanal's cursor is not past rows it acked: {sorted(behind)}\n{story}"
    # canal's side: it resumes at the cursor's event (a lone TRANSACTIONEND), hands out every row after it and none
    # before; the rows pycanal acked of the transaction its cursor ends inside come again (canal ignores rowsDone)
    first = next(line["header"] for line in list(canal2.lines) if line["kind"] == "entry")
    began = (first["logfileName"], first["logfileOffset"])
    assert began == (ours_cursor["postion"]["journalName"], at[1]), f"canal did not resume at the cursor\n{story}"
    skipped = set(after) - set(second_delivered)
    assert not skipped, f"canal skipped rows after pycanal's cursor: {sorted(skipped)}\n{story}"
    assert not set(second_delivered) & past, f"canal handed out rows before pycanal's cursor\n{story}"
    assert set(second_delivered) & ours_acked == partly, story
    assert not lost, f"a row was lost: {sorted(lost)}\n{story}"
    # canal -> pycanal: again exactly what canal acked from the cursor it last persisted on
    canal_position = None if canal_cursor is None else canal_cursor["postion"]
    assert_redelivered_from_cursor(canal1, set(first_acked), set(ours_delivered), canal_position, canal_position)


def handover_story(ha: Setup, canal: CanalPeer, log: Path, cursor: dict[str, Any], rows: set[int]) -> str:
    """What a failed pycanal -> canal hand-over check needs to say which side lost a row: pycanal's cursor in
    ZooKeeper at its kill, where canal's successor began, where ``rows`` (and the rows around the cursor) lie in the
    binlog, and pycanal's last log lines."""
    placed = row_transactions(ha.mariadb, ha.start)
    at = (journal_number(cursor["postion"]["journalName"]), int(cursor["postion"]["position"]))
    past = [row for row, (_begin, _rows, end) in placed.items() if end <= at]
    ahead = sorted(set(placed) - set(past))
    rows = rows | set(past[-1:]) | set(ahead[:1])  # and the transactions on either side of the cursor
    first = next((line for line in list(canal.lines) if line["kind"] == "entry"), None)
    began = (
        None
        if first is None
        else (first["entryType"], first["header"]["logfileName"], first["header"]["logfileOffset"])
    )
    tail = log.read_text().split("\n")[-8:] if log.exists() else []
    lines = [
        f"pycanal's cursor in ZooKeeper at its kill: {json_text(cursor)}",
        f"canal's first entry after it took over: {began}",
        *(f"row {row}: (journal, offset) of its GTID, rows and XID events: {placed.get(row)}" for row in sorted(rows)),
        f"canal's first rows: {canal_rows(canal)[1][:5]}",
        "pycanal's last log lines:",
        *tail,
    ]
    return "\n".join(lines)


def ownership_story(ha: Setup, cursors: CursorHistory, canals: list[CanalPeer], log: Path, killed_at: float) -> str:
    """Who held the running node and who wrote the cursor, for a failed take-over check: the running node now, the
    cursor versions the watch saw, each canal's lifecycle lines and pycanal's serving lines, on one clock
    (``time.monotonic``) with the kill at ``killed_at``."""
    import json

    try:
        data, stat = cursors.client.get(f"/otter/canal/destinations/{DEST}/running")
        running = f"{json.loads(data)} (czxid {stat.czxid})"
    except NoNodeError:
        running = "none"
    with cursors._lock:
        versions = " ".join(f"v{v}@{zxid}:{at['position']}" for v, zxid, at, _slave in cursors.versions)
    lines = [
        f"the running node now: {running}; the peers' addresses: {ha.addresses}",
        f"the kill at {killed_at:.3f}",
        f"cursor versions seen (version@zxid:offset): {versions}",
    ]
    for canal in canals:
        kinds = ("active", "inactive", "standby", "error", "alarm")
        lines += [
            f"{canal.name}: {line['kind']} at {line['_t']:.3f} {line.get('message', '')}"
            for line in list(canal.lines)
            if line["kind"] in kinds
        ]
    if log.exists():
        lines += [f"pycanal: {line}" for line in log.read_text().split("\n") if line[:2] in ("S ", "E ")]
    return "\n".join(lines)


def json_text(value: Any) -> str:
    import json

    return json.dumps(value, sort_keys=True)


def test_a_paused_canal_serves_beside_its_successor(ha: Setup) -> None:
    """canal's HA is not fenced (alibaba/canal #464, #2859): an owner paused past its ZooKeeper session (a long GC
    pause, a frozen VM: SIGSTOP here) loses the running node to a standby, and when it runs again it goes on serving
    the destination beside its successor -- nothing stops its instance when the node it held is gone. Both hand out
    the same rows. pycanal's owner in the same place serves nothing after it resumes and its late ack is fenced
    (``test_sigstopped_active_serves_nothing_after_sigcont_and_its_late_ack_is_fenced``, in test_ha_processes)."""
    canal = ha.canal("canal1")
    assert canal.select("active", destination=DEST)
    canal_address = running_address(ha.zookeeper)
    child = ha.pycanal("pycanal1")
    log = ha.tmp / "pycanal1.log"
    writer = Writer(ha.mariadb, ha.table)
    try:
        writer.write(10)
        wait_until("canal acking rows 1-10", lambda: len(canal_rows(canal)[0]) >= 10)
        os.kill(canal.pid, signal.SIGSTOP)
        try:
            child.expect(lambda line: line.startswith("S "), 30, "pycanal serving while canal is paused")
            writer.write(10)
            wait_until("pycanal acking rows 11-20", lambda: pycanal_rows(child, log)[0] >= set(range(11, 21)))
        finally:
            os.kill(canal.pid, signal.SIGCONT)
        writer.write(10)
        wait_until("pycanal acking rows 21-30", lambda: pycanal_rows(child, log)[0] >= set(range(21, 31)))
        wait_until("canal handing out rows 21-30", lambda: set(canal_rows(canal)[1]) >= set(range(21, 31)))
    finally:
        writer.stop()
    # two owners: canal acked rows written after pycanal took the running node from it, and says nothing of it
    assert set(canal_rows(canal)[0]) & set(range(21, 31))
    assert not canal.select("inactive", destination=DEST)
    assert running_address(ha.zookeeper) not in (None, canal_address)
