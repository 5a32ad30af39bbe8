"""A consumer process for the crash test: gets batches, logs what it got and acked (fsynced), until killed.

Usage: python -m tests.procs.acking_consumer '{"address": ..., "user": ..., "password": ..., "table_regex": ...,
"journal": ..., "position": ..., "meta_dir": ..., "log": ..., "seed": ...}'

Log lines (one per event, fsynced before the next step):
    D <batch_id> <id> <id> ...   the batch was handed out with these row ids (before ack)
    A <batch_id>                 ack(batch_id) returned
It also prints "A <batch_id>" on stdout after each ack, so the parent can pick a moment to kill it, and "I" every
second while there is nothing to get.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time

from canal.config import InstanceConfig, MasterConfig, StoreConfig
from canal.instance import Instance
from canal.protocol import EntryType, Message


def row_ids(msg: Message) -> list[int]:
    ids = []
    for entry in msg.entries:
        if entry.entry_type is EntryType.ROWDATA and entry.row_change is not None and not entry.row_change.is_ddl:
            ids.extend(row.after[0] for row in entry.iter_rows() if row.after is not None)
    return ids


def main() -> None:
    args = json.loads(sys.argv[1])
    rng = random.Random(args["seed"])
    config = InstanceConfig(
        destination="crash",
        master=MasterConfig(
            address=args["address"],
            username=args["user"],
            password=args["password"],
            journal_name=args["journal"],
            position=args["position"],
        ),
        filter_regex=args["table_regex"],
        meta_mode="file",
        meta_dir=args["meta_dir"],
        flush_period_s=0,  # write-through: an ack returns once the cursor is on disk
        store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=1024),
    )
    fd = os.open(args["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def log(line: str) -> None:
        os.write(fd, (line + "\n").encode())
        os.fsync(fd)

    with Instance(config) as inst:
        idle_since = time.monotonic()
        while True:
            msg = inst.get_without_ack(rng.randint(1, 9), timeout=0.05)
            if msg.id == -1:
                if time.monotonic() - idle_since >= 1.0:
                    print("I", flush=True)
                    idle_since = time.monotonic()
                continue
            idle_since = time.monotonic()
            log(f"D {msg.id} " + " ".join(map(str, row_ids(msg))))
            inst.ack(msg.id)
            log(f"A {msg.id}")
            print(f"A {msg.id}", flush=True)


if __name__ == "__main__":
    main()
