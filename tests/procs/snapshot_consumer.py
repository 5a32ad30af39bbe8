"""A consumer process for the snapshot kill tests: embeds one destination (file meta) whose config snapshots the
tables ``k`` and ``other`` on its first start, applies and acks until killed, and resumes on the next start.

Usage: python -m tests.procs.snapshot_consumer '{"address": ..., "user": ..., "password": ..., "database": ...,
"meta_dir": ..., "log": ..., "chunk_rows": 200, "phase": null | "before_read" | "between_marks" | "after_read" |
"before_ack" | "between_chunks", "at": 2, "watermark_table": null | "db.table"}'

Log lines (fsynced one by one), one per batch:
    D <batch> <json>   the batch was handed out and applied: a list of [type, table, key, after, event] per row
                       (event: [file, offset, row index] of a binlog row, null for a snapshot row)
    A <batch>          its ack returned
stdout: "W" once started, "P <phase>" when this run reached its phase (it then blocks until killed: the test kills it
there), "I" while idle, "S" once the snapshot is finished in the cursor.

Phases: "before_read" -- the ``at``-th chunk read of this run is about to start (no snapshot transaction yet);
"between_marks" (with ``watermark_table``) -- that read's low watermark is committed, its read view and high mark
not yet; "after_read" -- it has read its rows and not handed them to the stream; "before_ack" -- this process holds an
unacked batch with snapshot rows (from the ``at``-th such batch of this run); "between_chunks" -- the ``at``-th chunk
of this run is in the stream and the next is not read yet.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

from canal.config import InstanceConfig, MasterConfig, SnapshotConfig, StoreConfig
from canal.instance import Instance
from canal.protocol import EMPTY_MESSAGE_ID, EntryType, EventType, Message
from canal.snapshot.marks import WatermarkWriter
from canal.snapshot.reader import ChunkReader
from canal.snapshot.runner import SnapshotRunner
from tests.procs.ha_consumer import Log, say


def rows_of(msg: Message) -> list[list[Any]]:
    out: list[list[Any]] = []
    for entry in msg.entries:
        rc = entry.row_change
        if entry.entry_type is not EntryType.ROWDATA or rc is None or rc.is_ddl:
            continue
        h = entry.header
        for index, row in enumerate(rc.rows):
            image = row.after if row.after is not None else row.before
            assert image is not None
            key = [image[i] for i in row.table.key_indexes]
            event = None if rc.event_type is EventType.SNAPSHOT else [h.log_file, h.log_offset, index]
            after = None if row.after is None else list(row.after)
            out.append([rc.event_type.name, h.table, key, after, event])
            if rc.event_type is EventType.UPDATE and row.before is not None:
                old = [row.before[i] for i in row.table.key_indexes]
                if old != key:  # the key moved: the old row is gone
                    out.append(["DELETE", h.table, old, None, event])
    return out


def snapshot_finished(inst: Instance) -> bool:
    """Whether the snapshot is finished in the cursor (acked to its end), not only read."""
    cursor = inst.get_cursor()
    finished = cursor is not None and cursor.snapshot is None
    return finished and (not inst.snapshots or inst.snapshots[-1].progress().done)


def park(phase: str) -> None:
    say(f"P {phase}")
    threading.Event().wait()


def install(phase: str | None, at: int) -> None:
    """Make this run stop dead at its phase (see the module docstring)."""
    calls = [0]
    if phase in ("before_read", "after_read"):
        read = ChunkReader.read

        def reading(self: ChunkReader, after: Any = None) -> Any:
            calls[0] += 1
            if phase == "before_read" and calls[0] == at:
                park(phase)
            chunk = read(self, after)
            if phase == "after_read" and calls[0] == at:
                park(phase)
            return chunk

        ChunkReader.read = reading  # type: ignore[method-assign]
    elif phase == "between_marks":
        write = WatermarkWriter._write

        def writing(self: WatermarkWriter, *, expect: bool = True) -> str:
            mark = write(self, expect=expect)
            if expect:
                calls[0] += 1
                if calls[0] == 2 * at - 1:  # the at-th read's low mark
                    park(phase)
            return mark

        WatermarkWriter._write = writing  # type: ignore[method-assign]
    elif phase == "between_chunks":
        throttle = SnapshotRunner._throttle

        def between(self: SnapshotRunner, rows: int, started: float) -> None:
            calls[0] += 1
            if calls[0] == at:
                park(phase)
            throttle(self, rows, started)

        SnapshotRunner._throttle = between  # type: ignore[method-assign]


def main() -> None:
    args: dict[str, Any] = json.loads(sys.argv[1])
    phase, at = args.get("phase"), int(args.get("at", 1))
    install(phase, at)
    config = InstanceConfig(
        destination="snapkill",
        master=MasterConfig(address=args["address"], username=args["user"], password=args["password"]),
        filter_regex=rf"{args['database']}\..*",
        store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=2048),
        meta_mode="file",
        meta_dir=args["meta_dir"],
        flush_period_s=0,
        snapshot=SnapshotConfig(
            mode="initial",
            tables=[f"{args['database']}.{t}" for t in ("k", "other")],
            chunk_rows=args["chunk_rows"],
            watermark_table=args.get("watermark_table"),
        ),
    )
    log = Log(args["log"])
    inst = Instance(config)
    inst.start()
    say("W")
    snapshot_batches = 0
    finished_said = False
    while True:
        msg = inst.get_without_ack(100, timeout=0.5)
        if msg.id == EMPTY_MESSAGE_ID:
            say("I")
            continue
        rows = rows_of(msg)
        log(f"D {msg.id} {json.dumps(rows, separators=(',', ':'))}")
        if phase == "before_ack" and any(r[0] == "SNAPSHOT" for r in rows):
            snapshot_batches += 1
            if snapshot_batches == at:
                park(phase)
        inst.ack(msg.id)
        log(f"A {msg.id}")
        if not finished_said and snapshot_finished(inst):
            finished_said = True
            say("S")


if __name__ == "__main__":
    main()
