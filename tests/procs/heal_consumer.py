"""A consumer process for the heal kill test: embeds one destination (file meta, the default heal="snapshot") from a
given position and runs :func:`~canal.spark.run_batches` (no Spark) with a journal into a
:class:`~canal.spark.DeltaMirror` until told to stop or killed.

Usage: python -m tests.procs.heal_consumer '{"address": ..., "user": ..., "password": ..., "database": ...,
"start": [file, offset], "meta_dir": ..., "mirror": ..., "journal": ..., "statement": ..., "target": ...,
"chunk_rows": 50}'

stdout: "W" once started; "H" once a heal is in this run's stream (its snapshot unfinished in the cursor, or read);
"S" once the file ``statement`` exists (``file offset``: just after the statement that heals), everything before it
was handled and no snapshot is unfinished -- the heal is over. Once the file ``target`` exists (``file offset``),
the run ends when every event before it was handled and no snapshot is left, and the process exits 0.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from canal.config import InstanceConfig, MasterConfig, SnapshotConfig, StoreConfig
from canal.instance import Instance
from canal.spark import DeltaMirror, RunStats, run_batches
from tests.procs.ha_consumer import say


def main() -> None:
    args: dict[str, Any] = json.loads(sys.argv[1])
    db = args["database"]
    statement, target = Path(args["statement"]), Path(args["target"])
    journal_name, position = args["start"]
    config = InstanceConfig(
        destination="healkill",
        master=MasterConfig(
            address=args["address"],
            username=args["user"],
            password=args["password"],
            journal_name=journal_name,
            position=int(position),
        ),
        filter_regex=rf"{db}\.(k|c|other)",
        store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=2048),
        meta_mode="file",
        meta_dir=args["meta_dir"],
        flush_period_s=0,
        snapshot=SnapshotConfig(chunk_rows=args["chunk_rows"]),
    )
    mirror = DeltaMirror(args["mirror"], log_history_s=3600)  # the test reads every batch id committed
    said: set[str] = set()

    def once(line: str) -> None:
        if line not in said:
            said.add(line)
            say(line)

    def until(stats: RunStats) -> bool:
        cursor = inst.get_cursor()
        unfinished = inst.snapshot_running or (cursor is not None and cursor.snapshot is not None)
        if unfinished:
            once("H")
        for path, line in ((statement, "S"), (target, "")):
            if not path.exists():
                return False
            file, offset = path.read_text().split()
            if not stats.reached(file, int(offset)) or unfinished:
                return False
            if line:
                once(line)
        return True

    with Instance(config) as inst:
        say("W")
        run_batches(inst, None, mirror, batch_size=64, timeout=0.2, journal=args["journal"], until=until)
    mirror.close()


if __name__ == "__main__":
    main()
