"""A ``canal serve --consumer`` for tests: prints ``<destination> <id>`` for each inserted row of a batch, then takes
``SERVE_CONSUMER_S`` seconds (default 0.1) before returning -- a consumer that is slow, so that it holds a batch most of
the time while the source writes."""

from __future__ import annotations

import os
import sys
import time

from canal.protocol import EntryType, Message

PAUSE_S = float(os.environ.get("SERVE_CONSUMER_S", "0.1"))


def rows(destination: str, message: Message) -> None:
    lines = [
        f"{destination} {row.after[0]}"
        for e in message.entries
        if e.entry_type is EntryType.ROWDATA and e.row_change is not None and not e.row_change.is_ddl
        for row in e.iter_rows()
        if row.after is not None
    ]
    if lines:
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()
    time.sleep(PAUSE_S)  # the work a slow consumer does with the batch (not synchronisation)
