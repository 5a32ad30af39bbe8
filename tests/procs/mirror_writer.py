"""A process that writes a merge-on-read :class:`~canal.spark.DeltaMirror` batch by batch, for the mirror kill tests.

Usage: python -m tests.procs.mirror_writer ROOT FIRST LAST [KILL_AT [DELAY_MS]]

Applies the batches FIRST..LAST of :func:`batch` (deterministic: batch ``b`` is the same rows in every process) with
small folds (``fold_ratio=0.05``) in background threads, printing ``A <b>`` once batch ``b`` was applied. With
KILL_AT, the process SIGKILLs itself at that point of its first occurrence (after the first batch, so a fold has
something to do):

* ``append``: DELAY_MS after a change-log append started writing (its files written or not, its commit not yet),
  through deltalake or written directly (:mod:`canal.lake.store.delta_append`);
* ``publish``: a direct append's data file written, its commit file about to be published;
* ``fold``: DELAY_MS after a fold started its MERGE into the base;
* ``between``: after a fold committed the base, before it trims the log (a fold's two steps);
* ``stage``: DELAY_MS after a batch's staged file started being written (:mod:`canal.lake.store.staged`);
* ``flushed``: after a flush appended a table's staged parts to its log, before their staged files are deleted.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import threading
from decimal import Decimal
from typing import Any

from canal.lake.forms.changes import entries_to_batch
from canal.lake.store import changelog, delta_append, latest_changes, staged
from canal.position import EntryPosition
from canal.protocol import ColumnMeta, Entry, EntryType, EventType, Header, RowChange, RowData, TableSchema
from canal.spark import DeltaMirror

TABLES = tuple(
    TableSchema(
        "shop",
        name,
        (
            ColumnMeta("id", mysql_type="int(11)", is_key=True),
            ColumnMeta("amount", mysql_type="decimal(10,2)"),
            ColumnMeta("note", mysql_type="varchar(20)"),
        ),
    )
    for name in ("a", "b")
)
KEYS = 60

Row = tuple[int, Decimal, str]


def batch(number: int, state: dict[str, dict[int, Row]]) -> list[Entry]:
    """Batch ``number``'s entries, from the source state before it (which it updates): inserts, updates (some of the
    key) and deletes of random keys of both tables."""
    rng = random.Random(number)
    entries: list[Entry] = []
    for table in TABLES:
        rows = state.setdefault(table.table, {})
        for _ in range(rng.randint(1, 12)):
            key = rng.randrange(KEYS)
            value = (key, Decimal(rng.randint(0, 99999)) / 100, f"b{number}")
            if key not in rows:
                event, data = EventType.INSERT, RowData(table, after=value)
                rows[key] = value
            elif rng.random() < 0.3:
                event, data = EventType.DELETE, RowData(table, before=rows.pop(key))
            elif rng.random() < 0.2 and (moved := rng.randrange(KEYS)) not in rows:
                new = (moved, value[1], value[2])
                event, data = EventType.UPDATE, RowData(table, before=rows.pop(key), after=new)
                rows[moved] = new
            else:
                event, data = EventType.UPDATE, RowData(table, before=rows[key], after=value)
                rows[key] = value
            at = number * 10_000 + len(entries)  # a stream's batches: each after the one before
            header = Header("mysql-bin.000001", at, 1, 1_700_000_000_000, "shop", table.table, event)
            anchor = EntryPosition("mysql-bin.000001", 4)
            entries.append(Entry(header, EntryType.ROWDATA, RowChange(event, [data]), anchor=anchor))
    return entries


def source_after(last: int) -> dict[str, dict[int, Row]]:
    """The source tables after batches 1..last."""
    state: dict[str, dict[int, Row]] = {}
    for number in range(1, last + 1):
        batch(number, state)
    return state


def _kill_after(ms: float) -> None:
    threading.Timer(ms / 1000, os.kill, (os.getpid(), signal.SIGKILL)).start()


def _arm(kill_at: str, delay_ms: float) -> None:
    armed = threading.Event()
    armed.set()

    def once() -> bool:
        if armed.is_set():
            armed.clear()
            return True
        return False

    if kill_at == "append":
        real_append, real_direct = changelog.append, delta_append.append

        def append(log: Any, rows: Any, commit: Any, *rest: Any) -> Any:
            if once():
                _kill_after(delay_ms)
            return real_append(log, rows, commit, *rest)

        def direct(*args: Any, **kwargs: Any) -> Any:
            if once():
                _kill_after(delay_ms)
            return real_direct(*args, **kwargs)

        changelog.append = append  # type: ignore[assignment]
        delta_append.append = direct  # type: ignore[assignment]
    elif kill_at == "publish":

        def publish(staged: Any, commit: Any) -> bool:
            os.kill(os.getpid(), signal.SIGKILL)
            raise AssertionError("killed")

        delta_append.rename_if_absent = publish  # type: ignore[assignment]
    elif kill_at == "fold":
        real_latest = latest_changes.latest

        def latest(rows: Any, keys: Any) -> Any:
            if once():
                _kill_after(delay_ms)  # the MERGE starts right after the latest changes are known
            return real_latest(rows, keys)

        latest_changes.latest = latest  # type: ignore[assignment]
    elif kill_at == "between":
        real_trim = changelog.trim

        def trim(log: Any, through: Any, *args: Any, **kwargs: Any) -> int:
            if through != changelog.NOT_FOLDED:
                os.kill(os.getpid(), signal.SIGKILL)
            return real_trim(log, through, *args, **kwargs)

        changelog.trim = trim  # type: ignore[assignment]
    elif kill_at == "stage":
        real_write = staged.write

        def write(*args: Any) -> str:
            if once():
                _kill_after(delay_ms)
            return real_write(*args)

        staged.write = write  # type: ignore[assignment]
    elif kill_at == "flushed":

        def flushed(self: staged.Staged, path: str) -> None:
            os.kill(os.getpid(), signal.SIGKILL)

        staged.Staged.flushed = flushed  # type: ignore[method-assign]
    else:
        raise SystemExit(f"unknown kill point {kill_at!r}")


def main(argv: list[str]) -> None:
    root, first, last = argv[0], int(argv[1]), int(argv[2])
    state = source_after(first - 1)
    mirror = DeltaMirror(root, fold_ratio=0.05, fold_files=4)
    for number in range(first, last + 1):
        if number == first + 1 and len(argv) > 3:
            _arm(argv[3], float(argv[4]) if len(argv) > 4 else 0.0)
        mirror.apply(entries_to_batch(batch(number, state), "d", number), number)
        print(f"A {number}", flush=True)
    mirror.close()


if __name__ == "__main__":
    main(sys.argv[1:])
