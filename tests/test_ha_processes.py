"""HA across real OS processes: three ``tests.procs.ha_consumer`` processes embed one destination through
EmbeddedServer(zk_hosts=...) against a real MariaDB and ZooKeeper (session timeout 2 s); only the active one serves.

* SIGKILL the active process 10 times at random points while a workload runs: nothing is lost, rows come twice only
  from batches that were not acked, and two processes never serve at once (fencing tokens increase, serving
  intervals do not overlap, every ack happened inside its own token's interval).
* SIGSTOP the active beyond the session timeout: another takes over; after SIGCONT the old one serves nothing and its
  late ack is refused, the cursor in ZooKeeper stays the new owner's.
* A clean ``release()`` hands over at once with no redelivery at all.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import random
import signal
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from procs.ha_harness import Child, ConsumerLog, kill_all
from procs.ha_harness import next_event as harness_next_event

from canal.client import ClientIdentity
from canal.meta import zkpaths
from canal.testing.plugin import MariaDBDatabase, ZooKeeperChroot

pytestmark = pytest.mark.integration

DEST = "ha"
SESSION_TIMEOUT_S = 2.0
CLIENT = ClientIdentity(DEST, 1001)
# a get asking for more entries than are left ends this long after the last came, not after its whole timeout (a
# small transaction goes to the store whole: never cut by it)
LINGER_S = 0.2
# the ack certainly wrote nothing
NOT_ACKED_ERRORS = {"FencedWriteError", "NotRunningError", "OwnershipLostError", "UnknownBatchError"}


def base_args(mariadb: MariaDBDatabase, zookeeper: ZooKeeperChroot, tmp_path: Path) -> dict[str, Any]:
    journal, position = mariadb.execute("SHOW MASTER STATUS")[0][:2]
    return {
        "zk_hosts": zookeeper.hosts,
        "mysql": mariadb.address,
        "user": mariadb.user,
        "password": mariadb.password,
        "table_regex": rf"{mariadb.database}\.t",
        "journal": journal,
        "position": position,
        "destination": DEST,
        "ha_delay_s": 0.5,
        "zk_timeout_s": SESSION_TIMEOUT_S,
    }


class Workload(threading.Thread):
    """Inserts rows with consecutive ids into ``t`` in transactions of varying sizes until stopped."""

    def __init__(self, db: MariaDBDatabase, seed: int) -> None:
        super().__init__(name="workload", daemon=True)
        self.db = db
        self.rng = random.Random(seed)
        self.next_id = 0
        self.stop_event = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with self.db.connect() as conn, conn.cursor() as cur:
                cur.execute("SET autocommit=0")
                while not self.stop_event.is_set():
                    size = self.rng.choice([1, 1, 2, 3, 5, 8, 20, 60])
                    rows = [(self.next_id + i, f"v{self.next_id + i}") for i in range(size)]
                    cur.executemany("INSERT INTO t VALUES (%s, %s)", rows)
                    conn.commit()
                    self.next_id += size
                    self.stop_event.wait(self.rng.uniform(0.01, 0.06))  # pacing, not synchronisation
        except BaseException as exc:
            self.error = exc

    def finish(self) -> int:
        self.stop_event.set()
        self.join(30)
        assert self.error is None, f"workload failed: {self.error!r}"
        return self.next_id


def acked_or_in_doubt_rows(logs: list[ConsumerLog], killed: set[str]) -> set[int]:
    """Rows of acked batches, plus those of batches whose ack may have been persisted without its log line."""
    out: set[int] = set()
    for log in logs:
        acked: set[tuple[int, int | None]] = {(b, t) for b, t, _, _ in log.acked}
        acked |= {(b, t) for b, t, err in log.failed if err not in NOT_ACKED_ERRORS}
        for b, t, _, ids in log.delivered:
            if (b, t) in acked:
                out.update(ids)
        if log.name in killed and log.delivered:
            out.update(log.delivered[-1][3])
    return out


def await_all_acked(
    events: queue.Queue[tuple[str, str]],
    children: dict[str, Child],
    active: str,
    total: int,
    in_doubt: set[str],
    timeout: float,
) -> None:
    """Until the consumers' logs show rows ``0 .. total - 1`` acked, counting as acked the last batch of each process
    in ``in_doubt`` (killed at any moment: its ack may have been persisted without its log line; a process killed
    while it held a batch unacked is not one). The active writes (and fsyncs) its log before it prints an ``A``
    (ack) or ``I`` (idle) line: the logs are read again after each such line, and the lines that queued up
    meanwhile are dropped (nothing awaits them any more)."""
    deadline = time.monotonic() + timeout
    while True:
        logs = [ConsumerLog.parse(n, Path(c.args["log"])) for n, c in children.items()]
        missing = set(range(total)) - acked_or_in_doubt_rows(logs, in_doubt)
        if not missing:
            return
        assert children[active].alive(), "the active died"
        harness_next_event(
            events,
            lambda n, line: n == active and line[:1] in ("A", "I"),
            deadline - time.monotonic(),
            f"ack of the last {len(missing)} rows",
        )
        with contextlib.suppress(queue.Empty):
            while True:
                events.get_nowait()


def test_sigkill_the_active_process_ten_times(
    mariadb: MariaDBDatabase, zookeeper: ZooKeeperChroot, tmp_path: Path
) -> None:
    rng = random.Random(20261121)
    args = base_args(mariadb, zookeeper, tmp_path)
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
    events: queue.Queue[tuple[str, str]] = queue.Queue()
    children: dict[str, Child] = {}
    kills: list[tuple[str, float]] = []

    def spawn() -> Child:
        name = f"p{len(children)}"
        child = Child(
            name,
            {
                **args,
                "mode": "loop",
                "address": f"127.0.0.1:{20000 + len(children)}",
                "log": str(tmp_path / f"{name}.log"),
                "seed": len(children),
            },
            events,
        )
        children[name] = child
        return child

    def next_event(pred: Any, timeout: float, what: str) -> tuple[str, str]:
        return harness_next_event(events, pred, timeout, what)

    workload = Workload(mariadb, seed=7)
    try:
        for _ in range(3):
            spawn()
        active, _ = next_event(lambda n, line: line.startswith("S "), 30, "first active")
        workload.start()
        takeovers: list[float] = []
        for kill_no in range(10):
            want = rng.choice([1, 2, 4, 10, 40])  # early in the backlog, or after it caught up
            acks = 0
            while acks < want:
                # follow a takeover that was not ours (e.g. the active's session expired under load)
                name, line = next_event(
                    lambda n, line, a=active: line.startswith("S ") or (n == a and line.startswith("A ")),
                    30,
                    f"an ack by {active}",
                )
                if line.startswith("S "):
                    active = name
                else:
                    acks += 1
            if kill_no % 3 == 0:
                # between a get and its ack, for certain: the active keeps its next batch unacked and says so
                children[active].send("hold")
                while True:
                    name, line = next_event(
                        lambda n, line, a=active: line.startswith("H " if n == a else "S "),
                        30,
                        f"a held batch at {active}",
                    )
                    if line.startswith("H "):
                        break
                    active = name  # a takeover that was not ours: ask the new active
                    children[active].send("hold")
            elif rng.random() < 0.6:
                # a random point: right after an ack line, or a little later (inside get, D line or ack)
                time.sleep(rng.uniform(0, 0.03))  # picks the kill moment only
            killed_at = children[active].kill()
            kills.append((active, killed_at))
            spawn()  # a new standby replaces it
            new_active, line = next_event(
                lambda n, line, a=active: n != a and line.startswith("S "), 30, "a new active after the kill"
            )
            takeovers.append(float(line.split()[2]) - killed_at)
            active = new_active
        total = workload.finish()

        await_all_acked(events, children, active, total, {n for n, _ in kills}, 60)  # the last active drains all
    finally:
        workload.stop_event.set()
        kill_all(list(children.values()))

    logs = [ConsumerLog.parse(n, Path(c.args["log"])) for n, c in children.items()]
    check_no_loss_no_acked_redelivery(logs, total, killed={n for n, _ in kills})
    check_serving_intervals(logs, expected_at_least=11)
    assert len(kills) == 10
    assert max(takeovers) < 15.0, takeovers


def check_no_loss_no_acked_redelivery(
    logs: list[ConsumerLog], total: int, killed: set[str], *, redelivered_at_least: int = 1
) -> None:
    # every batch: (process, token, batch id) -> (t before the get, row ids)
    batches: dict[tuple[str, int | None, int], tuple[float, list[int]]] = {}
    for log in logs:
        for b, t, t_get, ids in log.delivered:
            batches[(log.name, t, b)] = (t_get, ids)
    ack_time: dict[tuple[str, int | None, int], float] = {}
    for log in logs:
        for b, t, _t0, t1 in log.acked:
            assert (log.name, t, b) in batches, f"{log.name} acked batch {b} (token {t}) it did not log as delivered"
            ack_time[(log.name, t, b)] = t1
    # in doubt: an ack that failed without saying nothing was written, or the last unacked batch of a killed
    # process (the kill may land between ack() returning and its log line)
    in_doubt: set[tuple[str, int | None, int]] = set()
    for log in logs:
        for b, t, err in log.failed:
            if err not in NOT_ACKED_ERRORS:
                in_doubt.add((log.name, t, b))
        if log.name in killed and log.delivered:
            b, t, _, _ = log.delivered[-1]
            if (log.name, t, b) not in ack_time:
                in_doubt.add((log.name, t, b))

    deliveries: dict[int, list[tuple[float, tuple[str, int | None, int]]]] = defaultdict(list)
    for key, (t_get, ids) in batches.items():
        for i in ids:
            deliveries[i].append((t_get, key))
    for key in sorted(in_doubt, key=lambda k: batches[k][0]):
        t_get, ids = batches[key]
        again = {i for i in ids if any(t > t_get for t, _ in deliveries[i])}
        assert not again or again == set(ids), f"in-doubt batch {key} came again only in part"
        if not again:
            ack_time[key] = t_get  # it was acked after all (its cursor was persisted)

    acked_by_row: dict[int, list[tuple[str, int | None, int]]] = defaultdict(list)
    for key in ack_time:
        for i in batches[key][1]:
            acked_by_row[i].append(key)
    twice = {i: keys for i, keys in acked_by_row.items() if len(keys) > 1}
    assert not twice, f"rows acked more than once: {dict(list(twice.items())[:5])}"
    assert set(acked_by_row) == set(range(total)), (
        f"lost rows: {sorted(set(range(total)) - set(acked_by_row))[:20]}; "
        f"unknown rows: {sorted(set(acked_by_row) - set(range(total)))[:20]}"
    )
    # a row comes again only from batches that were not acked: nobody gets it after its ack
    redelivered = 0
    for i, (key,) in acked_by_row.items():
        for t_get, other in deliveries[i]:
            if other == key:
                continue
            redelivered += 1
            assert t_get < ack_time[key], f"row {i} acked in {key} was delivered again later in {other}"
    assert redelivered >= redelivered_at_least  # the kills that held a batch did catch it unacked


def check_serving_intervals(logs: list[ConsumerLog], expected_at_least: int) -> None:
    """Per (process, token): [S time, last sign of serving]; tokens rise in time and intervals never overlap."""
    intervals: list[tuple[float, float, int, str]] = []
    for log in logs:
        for token, start in log.serving:
            ops = [t for _, tok, t, _ in log.delivered if tok == token]
            ops += [t0 for _, tok, t0, _ in log.acked if tok == token]
            ops += [t for tok, t in log.ended if tok == token]
            intervals.append((start, max([start, *ops]), token, log.name))
        for b, tok, _t0, _ in log.acked:
            assert any(t == tok for t, _ in log.serving), f"{log.name} acked {b} under token {tok} it never served"
        # an ack happened under the token of the get that handed the batch out
        got = {(b, t) for b, t, _, _ in log.delivered}
        assert all((b, t) in got for b, t, _, _ in log.acked)
    intervals.sort()
    tokens = [token for _, _, token, _ in intervals]
    assert len(intervals) >= expected_at_least, intervals
    assert len(set(tokens)) == len(tokens), f"a token served twice: {intervals}"
    assert tokens == sorted(tokens), f"tokens do not increase in time: {intervals}"
    for (_s1, e1, t1, n1), (s2, _e2, t2, n2) in itertools.pairwise(intervals):
        assert e1 < s2, f"{n1} (token {t1}) still served at {e1} after {n2} (token {t2}) started at {s2}"


def zk_cursor(zookeeper: ZooKeeperChroot) -> bytes:
    data, _ = zookeeper.client().get(zkpaths.cursor_path(CLIENT))
    return bytes(data)


def got_ids(answer: str) -> tuple[int, list[int]]:
    assert answer.startswith("GOT "), answer
    batch, *ids = answer.split()[1:]
    return int(batch), [int(x) for x in ids]


def test_sigstopped_active_serves_nothing_after_sigcont_and_its_late_ack_is_fenced(
    mariadb: MariaDBDatabase, zookeeper: ZooKeeperChroot, tmp_path: Path
) -> None:
    args = base_args(mariadb, zookeeper, tmp_path)
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
    with mariadb.connect() as conn, conn.cursor() as cur:
        for start in range(0, 20, 4):
            cur.executemany("INSERT INTO t VALUES (%s, %s)", [(i, f"v{i}") for i in range(start, start + 4)])
            conn.commit()
    children: list[Child] = []
    try:
        first = Child("first", {**args, "mode": "script", "address": "127.0.0.1:21001"})
        children.append(first)
        first.expect(lambda line: line == "W", 30, "W")
        token1 = int(first.command("wait_active").split()[1])
        second = Child("second", {**args, "mode": "script", "address": "127.0.0.1:21002"})
        children.append(second)
        second.expect(lambda line: line == "W", 30, "W")
        assert second.command("token") == "TOKEN None"

        batch, ids = got_ids(first.command("get 3 5.0"))
        assert first.command(f"ack {batch}") == "ACKED"
        outstanding, held = got_ids(first.command("get 3 5.0"))  # handed out, not acked
        assert held and held[0] == ids[-1] + 1
        cursor_of_first = zk_cursor(zookeeper)

        session_before = first.command("session")
        assert session_before.startswith("SESSION True ")
        first.signal(signal.SIGSTOP)
        stopped_at = time.monotonic()
        answer = second.command("wait_active", timeout=30)
        took_over_after = time.monotonic() - stopped_at
        token2 = int(answer.split()[1])
        assert token2 > token1
        # not before the first's session could have expired (ZooKeeper counts from its last ping, ~timeout/3 apart)
        assert took_over_after >= SESSION_TIMEOUT_S * 0.6

        # the new owner gets the first's outstanding batch again (it was never acked) and acks it
        batch2, ids2 = got_ids(second.command("get 3 5.0"))
        assert ids2[: len(held)] == held
        assert second.command(f"ack {batch2}") == "ACKED"
        cursor_of_second = zk_cursor(zookeeper)
        assert cursor_of_second != cursor_of_first

        first.signal(signal.SIGCONT)
        # let it find its session expired and get a new one: from now on it could write to ZooKeeper again, so
        # only the fence (and standing by on the lost session) keeps its late ack out
        deadline = time.monotonic() + 30
        while True:
            session = first.command("session")
            if session.startswith("SESSION True ") and session != session_before:
                break
            assert time.monotonic() < deadline, f"no new ZooKeeper session after SIGCONT: {session}"
            time.sleep(0.05)
        late = first.command(f"ack {outstanding}")
        assert late.split()[:2] in (
            ["ERR", "FencedWriteError"],
            ["ERR", "NotRunningError"],
            ["ERR", "OwnershipLostError"],
        ), late
        assert "OwnershipLostError" not in late or "not applied" in late
        assert zk_cursor(zookeeper) == cursor_of_second  # the late write did not move the cursor
        assert first.command("get 3 1.0").split()[:2] == ["ERR", "NotRunningError"]
        assert first.command("token") == "TOKEN None"
        assert second.command("token") == f"TOKEN {token2}"  # the new owner kept serving throughout
        _batch3, ids3 = got_ids(second.command(f"get 100 5.0 {LINGER_S}"))
        assert ids3[0] == ids2[-1] + 1
    finally:
        kill_all(children)


def test_clean_release_hands_over_at_once_without_redelivery(
    mariadb: MariaDBDatabase, zookeeper: ZooKeeperChroot, tmp_path: Path
) -> None:
    args = base_args(mariadb, zookeeper, tmp_path)
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
    total = 0
    with mariadb.connect() as conn, conn.cursor() as cur:
        for size in (1, 7, 3, 12, 2, 9, 1, 5):
            cur.executemany("INSERT INTO t VALUES (%s, %s)", [(total + i, "x") for i in range(size)])
            conn.commit()
            total += size
    children: list[Child] = []
    try:
        a = Child("a", {**args, "mode": "script", "address": "127.0.0.1:22001"})
        children.append(a)
        a.expect(lambda line: line == "W", 30, "W")
        token_a = int(a.command("wait_active").split()[1])
        # b would wait 30 s after a crash: a clean release must not make it wait
        b = Child("b", {**args, "mode": "script", "address": "127.0.0.1:22002", "ha_delay_s": 30.0})
        children.append(b)
        b.expect(lambda line: line == "W", 30, "W")
        assert b.command("token") == "TOKEN None"

        consumed: list[int] = []
        for _ in range(4):
            batch, ids = got_ids(a.command("get 4 5.0"))
            assert a.command(f"ack {batch}") == "ACKED"
            consumed += ids
        assert consumed == list(range(len(consumed))) and 0 < len(consumed) < total

        released_at = time.monotonic()
        assert a.command("release") == "RELEASED"
        token_b = int(b.command("wait_active", timeout=20).split()[1])
        assert time.monotonic() - released_at < 10.0  # far less than b's 30 s delay
        assert token_b > token_a

        rest: list[int] = []
        while len(consumed) + len(rest) < total:
            batch, ids = got_ids(b.command(f"get 10 5.0 {LINGER_S}"))
            assert b.command(f"ack {batch}") == "ACKED"
            rest += ids
        assert rest == list(range(len(consumed), total))  # starts right after a's last ack; nothing twice
        assert b.command("get 10 0.3") == "EMPTY"
        assert a.command("get 4 0.3").split()[:2] == ["ERR", "NotRunningError"]
    finally:
        kill_all(children)


def test_a_get_waiting_when_the_active_froze_hands_out_nothing_after_sigcont(
    mariadb: MariaDBDatabase, zookeeper: ZooKeeperChroot, tmp_path: Path
) -> None:
    """The first process's get is waiting for rows when it is SIGSTOPped; the second takes over, serves and acks
    new rows. After SIGCONT the first process's parser stores those rows too, but its waiting get must not hand
    them out: it cannot prove it still owns the destination (OwnershipLostError), or it has already stopped."""
    args = base_args(mariadb, zookeeper, tmp_path)
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
    children: list[Child] = []
    try:
        first = Child("first", {**args, "mode": "script", "address": "127.0.0.1:21011"})
        children.append(first)
        first.expect(lambda line: line == "W", 30, "W")
        first.command("wait_active")
        second = Child("second", {**args, "mode": "script", "address": "127.0.0.1:21012"})
        children.append(second)
        second.expect(lambda line: line == "W", 30, "W")
        # the CREATE TABLE; then nothing: the get below waits
        while (answer := first.command(f"get 100 0.5 {LINGER_S}")) != "EMPTY":
            assert first.command(f"ack {got_ids(answer)[0]}") == "ACKED"

        first.send("get 3 120")  # waits for a full batch of three entries
        time.sleep(0.3)  # let the command reach the get's wait (the wait itself has no observable sign)
        first.signal(signal.SIGSTOP)
        second.command("wait_active", timeout=30)
        with mariadb.connect() as conn, conn.cursor() as cur:
            cur.executemany("INSERT INTO t VALUES (%s, %s)", [(i, f"v{i}") for i in range(6)])
            conn.commit()
        batch, ids = got_ids(second.command(f"get 100 5.0 {LINGER_S}"))
        assert ids == list(range(6))
        assert second.command(f"ack {batch}") == "ACKED"
        acked_cursor = zk_cursor(zookeeper)

        first.signal(signal.SIGCONT)
        answer = first.expect(lambda line: True, 60, "the answer to the waiting get")
        assert (
            answer.split()[:2]
            in (
                ["ERR", "OwnershipLostError"],
                ["ERR", "NotRunningError"],
                ["ERR", "StoreClosedError"],
            )
            or answer == "EMPTY"
        ), f"the frozen process handed out rows the new owner had acked: {answer}"
        assert zk_cursor(zookeeper) == acked_cursor
        assert first.command("token") == "TOKEN None" or first.command("get 3 1.0").startswith("ERR")
    finally:
        kill_all(children)
