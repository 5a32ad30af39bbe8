"""A consumer process that dies (SIGKILL, by itself) the moment its schema history is about to record a DDL: the DDL
was read from the binlog, its history write has not happened. The crash test then restarts the destination and checks
the rows are still named exactly.

Usage: python -m tests.procs.schema_crash_consumer '{"address": ..., "user": ..., "password": ..., "journal": ...,
"position": ..., "meta_dir": ...}'

Prints "R <json row>" after each acked row (the row's table and values by name), flushed.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

from canal.config import InstanceConfig, MasterConfig, StoreConfig
from canal.instance import Instance
from canal.protocol import EMPTY_MESSAGE_ID, EntryType
from canal.schema.history import FileHistoryStore

_real_save = FileHistoryStore.save
_saves = 0


def _save_then_die(self: FileHistoryStore, text: str) -> None:
    global _saves
    _saves += 1
    if _saves > 1:  # the first save is the bootstrap; the next one records a DDL
        os.kill(os.getpid(), signal.SIGKILL)
    _real_save(self, text)


def main() -> None:
    args: dict[str, Any] = json.loads(sys.argv[1])
    FileHistoryStore.save = _save_then_die  # type: ignore[method-assign]
    config = InstanceConfig(
        destination="history",
        master=MasterConfig(
            address=args["address"],
            username=args["user"],
            password=args["password"],
            journal_name=args["journal"],
            position=args["position"],
        ),
        filter_regex=r"app\..*",
        meta_mode="file",
        meta_dir=args["meta_dir"],
        flush_period_s=0,
        store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=1024),
    )
    with Instance(config) as inst:
        while True:
            msg = inst.get_without_ack(1, timeout=1.0)
            if msg.id == EMPTY_MESSAGE_ID:
                print("I", flush=True)
                continue
            rows = [
                {"table": e.header.table, "values": r.after_dict() or r.before_dict()}
                for e in msg.entries
                if e.entry_type is EntryType.ROWDATA and e.row_change is not None and not e.row_change.is_ddl
                for r in e.iter_rows()
            ]
            inst.ack(msg.id)
            for row in rows:
                print("R", json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
