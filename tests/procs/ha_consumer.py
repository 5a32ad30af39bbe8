"""An HA consumer process: embeds one destination through EmbeddedServer(zk_hosts=...) and consumes client 1001.

Usage: python -m tests.procs.ha_consumer '{"zk_hosts": ..., "address": ..., "mysql": ..., "user": ..., "password": ...,
"table_regex": ..., "journal": ..., "position": ..., "log": ..., "seed": ..., "mode": "loop" | "script",
"ha_delay_s": 0.5, "zk_timeout_s": 2.0, "destination": "ha"[, "break": [...]][, "snapshot": {"tables": [...],
"chunk_rows": N}]}' ("break": see break_ha; "snapshot": an initial snapshot of those tables, with journal and
position null)

Times are ``time.monotonic()`` (CLOCK_MONOTONIC: one clock for every process on a Linux host).

mode "loop" (the kill test and the failover benchmark) -- consumes until killed. Log lines, fsynced one by one:
    S <token> <t>                    serving: the first get after standing by succeeded (t: after it returned)
    E <token> <t>                    a get raised NotRunningError (t: before that call)
    D <batch> <token> <t> <id> ...   batch handed out with these row ids (t: before the get call)
    A <batch> <token> <t0> <t1>      ack returned (t0 before the call, t1 after; token read before the call)
    F <batch> <token> <error class>  ack raised (nothing acked unless the error is in doubt, e.g. a lost connection)
stdout: "W" once standing by or serving, "S <token> <t>" on serving, "G <token> <t>" when the first non-empty batch
of a serving interval was handed out, "A <batch> <lowest row id or ->" after each ack, "I" while idle, "H <batch>"
(see below).
stdin: a line "hold" asks the process to keep the next batch it is handed: it logs the D line, says "H <batch>" and
never acks (it blocks until killed), so a test can kill it exactly between a get and its ack.

mode "script" (the SIGSTOP and release tests) -- one command per stdin line, one answer per stdout line:
    wait_active            -> "ACTIVE <token>" (blocks until this process is active and its instance serves)
    get <n> <timeout> [<linger>]
                           -> "GOT <batch> <id> ..." | "EMPTY" | "ERR <error class>" (linger: the batch goes once
                              nothing new came for that long, fewer than n entries, not after the whole timeout)
    ack <batch>            -> "ACKED" | "ERR <error class>"
    release                -> "RELEASED"
    token                  -> "TOKEN <token or None>"
    session                -> "SESSION <connected> <ZooKeeper session id>"
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
from typing import Any

from canal.client import ClientIdentity
from canal.config import InstanceConfig, MasterConfig, SnapshotConfig, StoreConfig
from canal.errors import CanalError, FencedWriteError, NotRunningError, UnknownBatchError
from canal.protocol import EntryType, Message
from canal.server import EmbeddedServer


def row_ids(msg: Message) -> list[int]:
    ids = []
    for entry in msg.entries:
        if entry.entry_type is EntryType.ROWDATA and entry.row_change is not None and not entry.row_change.is_ddl:
            ids.extend(row.after[0] for row in entry.iter_rows() if row.after is not None)
    return ids


def say(line: str) -> None:
    print(line, flush=True)


class Log:
    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def __call__(self, line: str) -> None:
        os.write(self._fd, (line + "\n").encode())
        os.fsync(self._fd)


def hold_requests() -> threading.Event:
    """Set once stdin says "hold" (read by a thread: the loop never blocks on stdin)."""
    requested = threading.Event()

    def read() -> None:
        for line in sys.stdin:
            if line.strip() == "hold":
                requested.set()

    threading.Thread(target=read, name="stdin", daemon=True).start()
    return requested


def loop(server: EmbeddedServer, client: ClientIdentity, log: Log, rng: random.Random) -> None:
    monitor = server.running_monitor(client.destination)
    assert monitor is not None
    hold = hold_requests()
    current: int | None = None  # the token this process is serving under, as far as it has seen
    first_batch_of: int | None = None
    idle_since = time.monotonic()
    say("W")
    while True:
        t_get = time.monotonic()
        try:
            msg = server.get_without_ack(client, rng.randint(1, 9), timeout=0.05)
        except NotRunningError:
            hold.clear()  # a hold asked for a serving interval that has ended
            if current is not None:
                log(f"E {current} {t_get}")
                current = None
            server.wait_serving(client.destination, 0.05)  # standing by: wake up as soon as this process serves
            continue
        token = monitor.token
        if token is None:  # lost the node while the get ran: the batch cannot be acked; next get says so
            if msg.id != -1:
                log(f"D {msg.id} - {t_get} " + " ".join(map(str, row_ids(msg))))
            continue
        if token != current:
            hold.clear()  # asked for an earlier serving interval (the test asks after seeing this one's S line)
            if current is not None:
                log(f"E {current} {t_get}")
            current = token
            now = time.monotonic()
            log(f"S {token} {now}")
            say(f"S {token} {now}")
        if msg.id == -1:
            if time.monotonic() - idle_since >= 0.5:
                say("I")
                idle_since = time.monotonic()
            continue
        idle_since = time.monotonic()
        if first_batch_of != current:
            first_batch_of = current
            say(f"G {token} {time.monotonic()}")  # the first batch of this serving interval was handed out
        ids = row_ids(msg)
        log(f"D {msg.id} {token} {t_get} " + " ".join(map(str, ids)))
        if hold.is_set() and ids:  # keep this batch (it has rows) unacked until the test kills this process
            say(f"H {msg.id}")
            threading.Event().wait()
        t0 = time.monotonic()
        ack_token = monitor.token
        try:
            server.ack(client, msg.id)
        except CanalError as exc:
            log(f"F {msg.id} {ack_token} {type(exc).__name__}")
            continue
        t1 = time.monotonic()
        log(f"A {msg.id} {ack_token} {t0} {t1}")
        say(f"A {msg.id} {min(ids) if ids else '-'}")


def script(server: EmbeddedServer, client: ClientIdentity) -> None:
    monitor = server.running_monitor(client.destination)
    assert monitor is not None
    say("W")
    for line in sys.stdin:
        cmd, *args = line.split()
        try:
            if cmd == "wait_active":  # active and serving (the instance is built just after activation)
                server.wait_serving(client.destination)
                say(f"ACTIVE {monitor.token}")
            elif cmd == "get":
                linger = float(args[2]) if len(args) > 2 else None
                msg = server.get_without_ack(client, int(args[0]), timeout=float(args[1]), linger=linger)
                say("EMPTY" if msg.id == -1 else f"GOT {msg.id} " + " ".join(map(str, row_ids(msg))))
            elif cmd == "ack":
                server.ack(client, int(args[0]))
                say("ACKED")
            elif cmd == "release":
                server.release(client.destination)
                say("RELEASED")
            elif cmd == "token":
                say(f"TOKEN {monitor.token}")
            elif cmd == "session":  # this process's ZooKeeper session: "SESSION <connected> <session id>"
                zk = server._zk
                assert zk is not None
                say(f"SESSION {zk.connected} {zk.client_id[0] if zk.client_id else None}")
            else:
                say(f"ERR unknown command {cmd}")
        except (NotRunningError, FencedWriteError, UnknownBatchError, CanalError) as exc:
            say(f"ERR {type(exc).__name__} {exc}".replace("\n", " "))


def break_ha(what: list[str]) -> None:
    """Knock out a protection in this process, to check the tests catch it (never used by the suite itself):
    "fence" (unguarded cursor writes), "standby" (never stop serving), "write-through" (meta flushed every 5 s)."""
    import canal.server
    from canal.ha.running import RunningMonitor
    from canal.meta import ZooKeeperMetaManager

    if "fence" in what:  # cursor writes unguarded
        canal.server.ZooKeeperMetaManager = lambda zk, fence=None: ZooKeeperMetaManager(zk)  # type: ignore[assignment,misc]
    if "standby" in what:  # never stop serving once active
        RunningMonitor._standby = lambda self, reason: None  # type: ignore[method-assign]


def main() -> None:
    args: dict[str, Any] = json.loads(sys.argv[1])
    if args.get("break"):
        break_ha(args["break"])
    config = InstanceConfig(
        destination=args.get("destination", "ha"),
        master=MasterConfig(
            address=args["mysql"],
            username=args["user"],
            password=args["password"],
            journal_name=args["journal"],
            position=args["position"],
        ),
        filter_regex=args["table_regex"],
        snapshot=SnapshotConfig(mode="initial", **args["snapshot"]) if args.get("snapshot") else SnapshotConfig(),
        # write-through: an ack returns once the cursor is in ZooKeeper (fenced); "break" knocks that out
        flush_period_s=5.0 if "write-through" in args.get("break", ()) else 0,
        store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=1024),
    )
    server = EmbeddedServer(
        zk_hosts=args["zk_hosts"],
        address=args["address"],
        ha_delay_s=args.get("ha_delay_s", 0.5),
        zk_timeout_s=args.get("zk_timeout_s", 2.0),
    )
    server.start()
    server.start_destination(config)
    client = ClientIdentity(config.destination, 1001)
    if args.get("mode", "loop") == "loop":
        loop(server, client, Log(args["log"]), random.Random(args.get("seed", 0)))
    else:
        script(server, client)
        server.stop()


if __name__ == "__main__":
    main()
