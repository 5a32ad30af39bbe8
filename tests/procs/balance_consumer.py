"""A service process of a balance group: embeds destinations d00, d01, ... (each one table ``t<i>`` of one of the
masters, alternately) through EmbeddedServer(zk_hosts=..., on_assigned=..., on_revoked=...) and consumes each one it
serves on a thread of its own, started by on_assigned and stopped by on_revoked after it acked its batch. SIGTERM
stops it gracefully (``server.stop_on_signals()``: everything handed over, then the process ends by the signal).

Usage: python -m tests.procs.balance_consumer '{"zk_hosts", "address", "masters": [{"address", "user", "password",
"database", "journal", "position"}, ...], "destinations": M, "log", "ha_delay_s", "zk_timeout_s", "batch": 20,
"revoke_pause_s": 0}'

Log lines (one ``os.write`` each, appended; times are ``time.monotonic()``, one clock for every process of a host):
    S <dest> <token> <t>                  serving: the first batch of a serving interval (t: before its get)
    D <dest> <batch> <token> <t> <id> ... batch handed out (t: before the get)
    A <dest> <batch> <token> <t0> <t1>     ack returned (t0 before the call, t1 after)
    F <dest> <batch> <token> <error>       ack raised (nothing acked unless the error leaves it in doubt)
    R <dest> <t>                           on_revoked returned (its consumer acked and ended)
Its log records (INFO and up) go to ``<log>.err``, each with the same clock.
stdout: "W" once started, "A <dest> <highest id acked>" after each ack of rows, "r <dest>" when on_revoked begins
(it then waits ``revoke_pause_s``) and "R <dest>" when it returns.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from typing import Any

from canal.client import ClientIdentity
from canal.config import InstanceConfig, MasterConfig, StoreConfig
from canal.errors import CanalError, NotRunningError
from canal.protocol import EntryType, Message
from canal.server import EmbeddedServer


def row_ids(msg: Message) -> list[int]:
    return [
        row.after[0]
        for e in msg.entries
        if e.entry_type is EntryType.ROWDATA and e.row_change is not None and not e.row_change.is_ddl
        for row in e.iter_rows()
        if row.after is not None
    ]


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class Log:
    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def __call__(self, line: str) -> None:
        os.write(self._fd, (line + "\n").encode())  # a kill leaves whole lines: the kernel has each write


def configs(args: dict[str, Any]) -> list[InstanceConfig]:
    out = []
    masters = args["masters"]
    for i in range(args["destinations"]):
        m = masters[i % len(masters)]
        out.append(
            InstanceConfig(
                destination=f"d{i:02d}",
                master=MasterConfig(
                    address=m["address"],
                    username=m["user"],
                    password=m["password"],
                    journal_name=m["journal"],
                    position=m["position"],
                ),
                filter_regex=rf"{m['database']}\.t{i:02d}",
                flush_period_s=0,  # write-through: an ack returns once its cursor is in ZooKeeper (fenced)
                store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=1024),
                share_reader=args.get("share_reader", True),
            )
        )
    return out


class Service:
    def __init__(self, args: dict[str, Any]) -> None:
        self.log = Log(args["log"])
        self.batch = int(args.get("batch", 20))
        self.revoke_pause_s = float(args.get("revoke_pause_s", 0.0))
        self._consumers: dict[str, tuple[threading.Thread, threading.Event]] = {}
        self.server = EmbeddedServer(
            zk_hosts=args["zk_hosts"],
            address=args["address"],
            ha_delay_s=args.get("ha_delay_s", 0.5),
            zk_timeout_s=args.get("zk_timeout_s", 4.0),
            on_assigned=self.assigned,
            on_revoked=self.revoked,
        )

    def assigned(self, dest: str) -> None:
        stop = threading.Event()
        thread = threading.Thread(target=self.consume, args=(dest, stop), name=f"consume-{dest}", daemon=True)
        self._consumers[dest] = (thread, stop)
        thread.start()

    def revoked(self, dest: str) -> None:
        say(f"r {dest}")
        if self.revoke_pause_s:  # a service that takes its time to let go (a test pauses the process meanwhile)
            time.sleep(self.revoke_pause_s)
        thread, stop = self._consumers.pop(dest)
        stop.set()
        thread.join()
        self.log(f"R {dest} {time.monotonic()}")
        say(f"R {dest}")

    def consume(self, dest: str, stop: threading.Event) -> None:
        client = ClientIdentity(dest, 1001)
        monitor = self.server.running_monitor(dest)
        assert monitor is not None
        started = False
        while not stop.is_set():
            t_get = time.monotonic()
            try:
                msg = self.server.get_without_ack(client, self.batch, timeout=0.1)
            except NotRunningError:
                return  # handed over or lost: on_revoked follows
            if msg.id == -1:
                continue  # (an empty get proves nothing: a process just continued may not know yet it lost)
            token = monitor.token
            if not started:  # the first batch: handed out after a ZooKeeper round trip proved the ownership,
                started = True  # at some moment of the get (a pause may hold its return back for long)
                self.log(f"S {dest} {token} {t_get}")
            ids = row_ids(msg)
            self.log(f"D {dest} {msg.id} {token} {t_get} " + " ".join(map(str, ids)))
            t0 = time.monotonic()
            try:
                self.server.ack(client, msg.id)
            except CanalError as exc:
                self.log(f"F {dest} {msg.id} {token} {type(exc).__name__}")
                return
            self.log(f"A {dest} {msg.id} {token} {t0} {time.monotonic()}")
            if ids:
                say(f"A {dest} {max(ids)}")


class _Monotonic(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.mono = time.monotonic()  # the ledger's clock, to read the two side by side
        return True


def main() -> None:
    args: dict[str, Any] = json.loads(sys.argv[1])
    handler = logging.FileHandler(args["log"] + ".err")
    handler.addFilter(_Monotonic())
    handler.setFormatter(logging.Formatter("%(mono).6f %(threadName)s %(levelname)s %(name)s %(message)s"))
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    logging.getLogger("kazoo").setLevel(logging.WARNING)
    service = Service(args)
    service.server.stop_on_signals()
    service.server.start()
    for config in configs(args):
        service.server.start_destination(config)
    say("W")
    threading.Event().wait()  # until a signal ends the process


if __name__ == "__main__":
    main()
