"""A process that mirrors one destination through :func:`~canal.spark.run_batches` (file meta, a journal) and may
SIGKILL itself part-way through a batch, for the kill tests of :mod:`tests.test_mirror_gaps_kill`.

Usage: python -m tests.procs.gap_consumer '{"address": ..., "user": ..., "password": ...,
"start": [file, offset] | null, "snapshot": false, "filter": ..., "meta_dir": ..., "flush_period_s": 60,
"mirror": ..., "journal": ..., "batch_size": 3, "kill_call": 2, "kill_steps": 1, "until": [file, offset] | null}'

The store hands out ``batch_size`` entries at a time (ITEMSIZE); ``snapshot``: an initial snapshot (without
``start``). With ``kill_call``, the process SIGKILLs itself once the mirror journaled ``kill_steps`` steps of the
batch of fn's ``kill_call``-th call (0: as fn is called, before the mirror sees the batch): the meta file holds the
cursor of its last flush, the mirror and the journal what they held then. Without it, the run goes on until every
event before ``until`` was handed to fn, prints "done", and exits 0 (MirrorCheckpointError: "refused", exit 3).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

from canal.config import InstanceConfig, MasterConfig, SnapshotConfig, StoreConfig
from canal.instance import Instance
from canal.lake.types import MirrorCheckpointError
from canal.spark import DeltaMirror, run_batches


def main() -> None:
    args: dict[str, Any] = json.loads(sys.argv[1])
    master = MasterConfig(
        address=args["address"],
        username=args["user"],
        password=args["password"],
        journal_name=None if args.get("start") is None else args["start"][0],
        position=None if args.get("start") is None else args["start"][1],
    )
    config = InstanceConfig(
        destination="gapkill",
        master=master,
        filter_regex=args["filter"],
        meta_mode="file",
        meta_dir=args["meta_dir"],
        flush_period_s=args["flush_period_s"],
        store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=1024),
        snapshot=SnapshotConfig(mode="initial" if args.get("snapshot") else "never"),
    )
    mirror = DeltaMirror(args["mirror"])
    calls = [0]
    write = mirror._write_journal

    def journaled(batch_id: int, done: int) -> None:
        write(batch_id, done)
        if calls[0] == args.get("kill_call") and done == args.get("kill_steps"):
            os.kill(os.getpid(), signal.SIGKILL)

    mirror._write_journal = journaled  # type: ignore[method-assign]

    def fn(batch: Any, batch_id: int) -> None:
        calls[0] += 1
        if calls[0] == args.get("kill_call") and args.get("kill_steps") == 0:
            os.kill(os.getpid(), signal.SIGKILL)
        mirror.apply(batch, batch_id)

    until = args.get("until")
    try:
        with Instance(config) as inst:
            run_batches(
                inst,
                None,
                fn,
                batch_size=args["batch_size"],
                timeout=0.3,
                journal=args["journal"],
                until=None if until is None else (lambda s: s.reached(*until)),
                idle_stop_s=None if until is None else 60,
            )
    except MirrorCheckpointError as exc:
        print(f"refused: {exc}", flush=True)
        sys.exit(3)
    print("done", flush=True)


if __name__ == "__main__":
    main()
