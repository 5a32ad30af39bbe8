"""A process dumping a MariaDB's binlog with a given replica id (``server_id``), as a destination's process does: the
other process an HA handover moves a destination to.

Usage: python -m tests.procs.replica_dump '{"address": "host:port", "user": ..., "password": ..., "slave_id": N}'

stdout: "dumping" once the server sent the dump's first event (it registered the id), then nothing; it dumps until
killed, or prints "ended <error>" when the server ends its dump.
"""

from __future__ import annotations

import json
import sys

from canal.parse.mysql.source import MysqlBinlogSource
from canal.parse.source import DumpRequest


def main() -> None:
    spec = json.loads(sys.argv[1])
    source = MysqlBinlogSource(spec["address"], spec["user"], spec["password"], slave_id=spec["slave_id"])
    source.open()
    at = source.master_status()
    request = DumpRequest(journal_name=at.journal_name, position=at.position or 4, heartbeat_period_s=0.5)
    told = False
    try:
        for _event in source.dump(request):
            if not told:
                print("dumping", flush=True)
                told = True
    except Exception as exc:
        print(f"ended {type(exc).__name__}: {exc}", flush=True)


if __name__ == "__main__":
    main()
