"""A process whose destinations share one reader of a MariaDB: it consumes them round-robin and records each acked
batch's entries before the ack, until every destination saw the end marker (then it prints "done") or it is killed.

Usage: python -m tests.procs.shared_consumer '{"configs": {name: InstanceConfig.to_properties text, ...},
"out": dir, "db": name}'

Each batch's entries (``repr`` of ``test_shared_reader.canonical``) are appended to ``{out}/{name}.log``, one per
line, in one write, fsynced, then the batch is acked: a kill between the two leaves a batch recorded that is delivered
again. A kill inside the write may leave the file's last line cut: the next start cuts it off before it appends.
stdout: "ready" once every destination has started, "shared" once they all read through the shared reader, "done".
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from canal.client import ClientIdentity
from canal.config import InstanceConfig
from canal.protocol import EMPTY_MESSAGE_ID, EntryType
from canal.server import EmbeddedServer
from tests.shared_entries import END_ID, canonical


def main() -> None:
    spec = json.loads(sys.argv[1])
    out = Path(spec["out"])
    configs = {name: InstanceConfig.from_properties(text, destination=name) for name, text in spec["configs"].items()}
    server = EmbeddedServer()
    server.start()
    for config in configs.values():
        server.start_destination(config)
    print("ready", flush=True)
    told = False
    finished: set[str] = set()
    logs = {name: _log(out / f"{name}.log") for name in configs}
    while len(finished) < len(configs):
        if not told and all(server.instance(n).parser.shared for n in configs):
            print("shared", flush=True)
            told = True
        for name in configs:
            if name in finished:
                continue
            client = ClientIdentity(name, 1001)
            msg = server.get_without_ack(client, 20, 0.02)
            if msg.id == EMPTY_MESSAGE_ID:
                continue
            lines = []
            for entry in msg.entries:
                lines.append(repr(canonical(entry)) + "\n")
                rc = entry.row_change
                if (
                    entry.entry_type is EntryType.ROWDATA
                    and entry.header.table == "marks"
                    and rc is not None
                    and any(r.after is not None and r.after[0] == END_ID for r in rc.rows)
                ):
                    finished.add(name)
            os.write(logs[name], "".join(lines).encode())
            os.fsync(logs[name])
            server.ack(client, msg.id)
        time.sleep(0.001)
    server.stop()
    print("done", flush=True)


def _log(path: Path) -> int:
    """``path`` opened to append whole lines: a last line a kill cut short is cut off."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
    text = os.pread(fd, os.fstat(fd).st_size, 0)
    os.ftruncate(fd, text.rfind(b"\n") + 1)
    return fd


if __name__ == "__main__":
    main()
