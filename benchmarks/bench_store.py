"""Event store throughput: put + get + ack through MemoryEventStore against a plain collections.deque.

Run: ``python benchmarks/bench_store.py [--entries N] [--batch B] [--reps R]``.

Entries are real ``canal.protocol.Entry`` objects shaped like a binlog: transactions of BEGIN, three ROWDATA entries
(one INSERT row each on a 10-column table) and END, with anchors and rows_done as the parser sets them. Both loops
move the same entries in batches of ``--batch``: the store loop does ``put(batch)``, ``get(batch)`` (the default
MEMSIZE mode, with a byte budget large enough for a whole batch, plus an ITEMSIZE variant) and ``ack(end_seq)``; the
baseline loop does ``deque.extend(batch)`` and pops the same number of entries with ``popleft``. Repetitions are
interleaved (store, deque, store, ...) and medians reported. A producer/consumer thread variant of the store is
reported too (not part of the ratio).

Two data sets. The headline figure cycles a working set of ``buffer_size`` (16384) distinct entries -- the most a
pipeline has in flight, since the parser puts entries it has just built and the store never holds more. A second run
moves 200k distinct entries (137 MB of objects, far beyond the caches), where every header the store reads to size an
entry misses the cache while the deque never looks inside an entry; its ratio is printed and saved as ``cold``.
Writes ``benchmarks/results/bench_store.json``; the last line is
``RESULT ratio=<store cost per entry / deque cost per entry> store_entries_per_s=... deque_entries_per_s=...``.
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import statistics
import sys
import threading
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from result_file import write_result  # noqa: E402

from canal.position import EntryPosition  # noqa: E402
from canal.protocol import (  # noqa: E402
    ColumnMeta,
    Entry,
    EntryType,
    EventType,
    Header,
    RowChange,
    RowData,
    SqlType,
    TableSchema,
)
from canal.store import BatchMode, MemoryEventStore  # noqa: E402

TABLE = TableSchema(
    "shop",
    "orders",
    (
        ColumnMeta("id", SqlType.BIGINT, "bigint(20)", is_key=True),
        ColumnMeta("customer_id", SqlType.INTEGER, "int(11)"),
        ColumnMeta("amount", SqlType.DECIMAL, "decimal(10,2)"),
        ColumnMeta("currency", SqlType.CHAR, "char(3)", charset="utf-8"),
        ColumnMeta("note", SqlType.VARCHAR, "varchar(64)", charset="utf-8"),
        ColumnMeta("created", SqlType.TIMESTAMP, "datetime(6)", fsp=6),
        ColumnMeta("updated", SqlType.TIMESTAMP, "datetime(6)", fsp=6),
        ColumnMeta("qty", SqlType.SMALLINT, "smallint(6)"),
        ColumnMeta("flags", SqlType.BIT, "bit(8)"),
        ColumnMeta("payload", SqlType.BLOB, "blob"),
    ),
)


def build_entries(count: int, rows_per_tx: int = 3) -> list[Entry]:
    """``count`` entries (rounded up to whole transactions) of BEGIN / ROWDATA x rows_per_tx / END."""
    out: list[Entry] = []
    offset = 4
    tx = 0
    now = dt.datetime(2026, 1, 1, 12, 0, 0, 123456)
    anchor = EntryPosition("mysql-bin.000001", 4, 0, 1, None, False)
    while len(out) < count:
        tx += 1
        ts = 1_767_268_800_000 + tx
        out.append(
            Entry(
                Header("mysql-bin.000001", offset, 1, ts, "shop", "orders", EventType.QUERY, 80),
                EntryType.TRANSACTIONBEGIN,
                thread_id=7,
                anchor=anchor,
            )
        )
        offset += 80
        for r in range(rows_per_tx):
            key = tx * rows_per_tx + r
            row = RowData(
                TABLE,
                after=(key, 1000 + key % 97, Decimal("19.99"), "EUR", f"order {key}", now, now, 2, 5, b"\x00" * 16),
            )
            length = 210
            out.append(
                Entry(
                    Header("mysql-bin.000001", offset, 1, ts, "shop", "orders", EventType.INSERT, length),
                    EntryType.ROWDATA,
                    RowChange(EventType.INSERT, (row,), table_id=108, table=TABLE),
                    anchor=anchor,
                    rows_done=r + 1,
                )
            )
            offset += length
        end = Entry(
            Header("mysql-bin.000001", offset, 1, ts, "", "", EventType.QUERY, 31),
            EntryType.TRANSACTIONEND,
            xid=tx,
            anchor=anchor,
        )
        offset += 31
        out.append(end)
        anchor = end.position.with_included(True)
    return out


def run_store(entries: list[Entry], batch: int, mode: BatchMode) -> float:
    store = MemoryEventStore(buffer_size=16384, memory_unit=1024, batch_mode=mode)
    # get(batch): ITEMSIZE -> `batch` entries; MEMSIZE -> batch KiB, more than a chunk's ~180 bytes per entry
    store.start()
    put, get, ack = store.put, store.get, store.ack
    n = len(entries)
    t0 = time.perf_counter()
    for i in range(0, n, batch):
        chunk = entries[i : i + batch]
        put(chunk)
        got = get(batch)
        ack(got.end_seq)
    elapsed = time.perf_counter() - t0
    if store.get_sequence != n - 1 or store.ack_sequence != n - 1:
        raise AssertionError(f"store moved {store.ack_sequence + 1} of {n} entries")
    store.stop()
    return elapsed


def run_deque(entries: list[Entry], batch: int) -> float:
    dq: collections.deque[Entry] = collections.deque(maxlen=None)
    n = len(entries)
    moved = 0
    t0 = time.perf_counter()
    extend, popleft = dq.extend, dq.popleft
    for i in range(0, n, batch):
        chunk = entries[i : i + batch]
        extend(chunk)
        got = [popleft() for _ in range(len(dq) if len(dq) < batch else batch)]
        moved += len(got)
    elapsed = time.perf_counter() - t0
    if moved != n:
        raise AssertionError(f"deque moved {moved} of {n} entries")
    return elapsed


def run_threads(entries: list[Entry], batch: int) -> float:
    """One producer thread putting batches, the calling thread getting (blocking for full batches) and acking."""
    store = MemoryEventStore(buffer_size=16384, memory_unit=1024, batch_mode=BatchMode.ITEMSIZE)
    store.start()
    n = len(entries)

    def produce() -> None:
        for i in range(0, n, batch):
            store.put(entries[i : i + batch])

    producer = threading.Thread(target=produce)
    t0 = time.perf_counter()
    producer.start()
    moved = 0
    while moved < n:
        got = store.get(batch, timeout=0)
        moved += len(got)
        store.ack(got.end_seq)
    elapsed = time.perf_counter() - t0
    producer.join()
    store.stop()
    if moved != n:
        raise AssertionError(f"threaded store moved {moved} of {n} entries")
    return elapsed


def measure(entries: list[Entry], batch: int, reps: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"store_memsize": [], "store_itemsize": [], "deque": [], "store_threads": []}
    run_store(entries, batch, BatchMode.MEMSIZE)  # warm up
    run_deque(entries, batch)
    for _ in range(reps):
        times["store_memsize"].append(run_store(entries, batch, BatchMode.MEMSIZE))
        times["deque"].append(run_deque(entries, batch))
        times["store_itemsize"].append(run_store(entries, batch, BatchMode.ITEMSIZE))
        times["deque"].append(run_deque(entries, batch))
        times["store_threads"].append(run_threads(entries, batch))
    return times


def report(label: str, n: int, times: dict[str, list[float]]) -> dict[str, Any]:
    med = {k: statistics.median(v) for k, v in times.items()}
    rate = {k: n / v for k, v in med.items()}
    ns = {k: v / n * 1e9 for k, v in med.items()}
    ratio = med["store_memsize"] / med["deque"]
    ratio_item = med["store_itemsize"] / med["deque"]
    print(f"-- {label}")
    for key in times:
        print(f"{key:16s} {rate[key]:>14,.0f} entries/s  {ns[key]:8.1f} ns/entry  (median of {len(times[key])})")
    print(f"ratio store(MEMSIZE)/deque = {ratio:.2f}; store(ITEMSIZE)/deque = {ratio_item:.2f}")
    return {
        "median_seconds": med,
        "entries_per_s": rate,
        "ns_per_entry": ns,
        "ratio": ratio,
        "ratio_itemsize": ratio_item,
        "samples_seconds": times,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=200_000, help="entries moved per run")
    parser.add_argument(
        "--working-set",
        type=int,
        default=16384,
        help="distinct entries, cycled (default: the store's buffer_size, the most a pipeline has in flight)",
    )
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=9)
    parser.add_argument("--no-cold", action="store_true", help="skip the all-distinct (cache-cold) variant")
    args = parser.parse_args()

    working = build_entries(args.working_set)
    stream = [working[i % len(working)] for i in range(args.entries)]
    n = len(stream)
    batch = args.batch
    print(f"{n} entries in batches of {batch}; working set {len(working)} entries; {args.reps} interleaved reps")
    hot = report(f"working set of {len(working)} entries (the headline figure)", n, measure(stream, batch, args.reps))
    result: dict[str, Any] = {
        "benchmark": "bench_store",
        "entries": n,
        "working_set": len(working),
        "batch": batch,
        "repetitions": args.reps,
        **hot,
    }
    del working, stream
    if not args.no_cold:
        cold_entries = build_entries(args.entries)
        cold = report(
            f"{len(cold_entries)} distinct entries (cache-cold: every header read misses)",
            len(cold_entries),
            measure(cold_entries, batch, max(3, args.reps // 3)),
        )
        result["cold"] = cold
    write_result("bench_store", result, sort_keys=True)
    rate = hot["entries_per_s"]
    print(
        f"RESULT ratio={hot['ratio']:.3f} store_entries_per_s={rate['store_memsize']:.0f} "
        f"deque_entries_per_s={rate['deque']:.0f}"
    )


if __name__ == "__main__":
    main()
