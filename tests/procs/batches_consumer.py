"""A consumer process for the run_batches kill test: embeds one destination (file meta) that snapshots ``k``, ``c`` and
``other`` on its first start, and runs :func:`~canal.spark.run_batches` (no Spark: Arrow tables) with a journal into a
:class:`~canal.spark.DeltaMirror` until told to stop or killed.

Usage: python -m tests.procs.batches_consumer '{"address": ..., "user": ..., "password": ..., "database": ...,
"meta_dir": ..., "mirror": ..., "journal": ..., "log": ..., "target": ..., "chunk_rows": 50, "phase": null | PHASE,
"at": 2}'

Log lines (fsynced one by one):
    F <batch id> <json>   fn applied the batch to the mirror; json: {"s": [table, keys] of its SNAPSHOT rows,
                          "b": [file, offset, row index] of its binlog rows}
    P <batch id>          this run parked at its phase holding that batch (written before it parks)
stdout: "W" once started, "P <phase>" when this run reached its phase (it then blocks until killed), "S" once the
snapshot is finished in the cursor. Once the file ``target`` exists (``file offset``), the run ends when every event
before that position was handed to fn, and the process exits 0.

Phases, each at the ``at``-th batch of this run holding snapshot rows (a replayed batch counts): "spooled" -- its
rows are in the spool, the journal does not say so yet; "journaled" -- the journal names it, the instance has not
acked it; "acked" -- acked, fn not called; "written" -- fn wrote it to the mirror, the journal does not say it is
done. "binlog_written": fn wrote the ``at``-th batch of binlog rows only, its ack has not happened.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

from canal.config import InstanceConfig, MasterConfig, SnapshotConfig, StoreConfig
from canal.instance import Instance
from canal.spark import DeltaMirror, RunStats, batches, run_batches
from canal.spark.spool import Spool
from tests.procs.ha_consumer import Log, say
from tests.procs.snapshot_consumer import snapshot_finished

PHASES = ("spooled", "journaled", "acked", "written", "binlog_written")


def main() -> None:
    args: dict[str, Any] = json.loads(sys.argv[1])
    phase, at = args.get("phase"), int(args.get("at", 1))
    db = args["database"]
    log = Log(args["log"])
    journal = Path(args["journal"])
    target = Path(args["target"])
    counts = {"snapshot": 0, "binlog": 0}
    current = [0]  # the batch id fn was last called with, or that the spool was last written for

    def park(name: str, batch_id: int) -> None:
        log(f"P {batch_id}")
        say(f"P {name}")
        threading.Event().wait()

    spool_write = Spool.write

    def writing(self: Spool, start: Any, end: Any, batch: Any) -> None:
        spool_write(self, start, end, batch)
        counts["snapshot"] += 1
        current[0] = int(start["batch"])
        if phase == "spooled" and counts["snapshot"] == at:
            park(phase, current[0])

    write_json = batches._JournalFile._write

    def journaling(self: Any, data: Any) -> None:
        write_json(self, data)
        if phase == "journaled" and data.get("spooled") and counts["snapshot"] == at:
            park(phase, int(data["pending"]))

    Spool.write = writing  # type: ignore[method-assign]
    batches._JournalFile._write = journaling  # type: ignore[method-assign]

    mirror = DeltaMirror(args["mirror"], log_history_s=3600)  # the test reads every batch id committed

    def fn(table: Any, batch_id: int) -> None:
        record = json.loads(journal.read_text())
        spooled = bool(record.get("spooled"))
        if spooled and current[0] != batch_id:  # a replay from the spool: this run's batch with snapshot rows
            counts["snapshot"] += 1
        if not spooled:
            counts["binlog"] += 1
        if phase == "acked" and spooled and counts["snapshot"] == at:
            park(phase, batch_id)
        mirror.apply(table, batch_id)
        columns = [table.column(name).to_pylist() for name in ("type", "table", "keys", "log_file", "log_offset")]
        snapshot_rows, binlog_rows = [], []
        for kind, name, keys, file, offset, index in zip(*columns, table.column("row_index").to_pylist(), strict=True):
            if kind == "SNAPSHOT":
                snapshot_rows.append([name, keys])
            elif index is not None:
                binlog_rows.append([file, offset, index])
        log(f"F {batch_id} {json.dumps({'s': snapshot_rows, 'b': binlog_rows}, separators=(',', ':'))}")
        if phase == "written" and spooled and counts["snapshot"] == at:
            park(phase, batch_id)
        if phase == "binlog_written" and not spooled and counts["binlog"] == at:
            park(phase, batch_id)

    config = InstanceConfig(
        destination="batchkill",
        master=MasterConfig(address=args["address"], username=args["user"], password=args["password"]),
        filter_regex=rf"{db}\.(k|c|other)",
        store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=2048),
        meta_mode="file",
        meta_dir=args["meta_dir"],
        flush_period_s=0,
        snapshot=SnapshotConfig(
            mode="initial", tables=[f"{db}.{t}" for t in ("k", "c", "other")], chunk_rows=args["chunk_rows"]
        ),
    )
    finished_said = [False]

    def until(stats: RunStats) -> bool:
        if not finished_said[0] and snapshot_finished(inst):
            finished_said[0] = True
            say("S")
        if not target.exists():
            return False
        file, offset = target.read_text().split()
        return stats.reached(file, int(offset))

    with Instance(config) as inst:
        say("W")
        run_batches(inst, None, fn, batch_size=256, timeout=0.2, journal=journal, until=until)


if __name__ == "__main__":
    main()
