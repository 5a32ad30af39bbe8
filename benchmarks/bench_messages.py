"""The ``messages`` option's maker alone: canal's FlatMessage JSON made of decoded entries, no Spark, no Kafka.

Workload: bench_spark's (a 10-column table with JSON text, a BLOB, DATETIME(6), DECIMAL, ENUM, DOUBLE and text;
inserts, updates and deletes in 1,000-row statements, 60/25/15), 100,000 row changes by default (``--changes``),
written to a private MariaDB's binlog and decoded by an Instance in this process as the reader decodes them for the
``messages`` option (each row image a tuple of values), kept in memory. Then, over the same entries, in the
instance's batches (up to 1,024 entries each), after one untimed pass of the maker that counts its messages,
three passes of each, the two in turn, the fastest pass of each kept (a per-row cost, not a first batch's: the
micro-benchmark of one part):

- ``canal``: :class:`~canal.lake.forms.flat_messages.MessageMaker` in canal's form (one message per row entry, the
  routing's defaults: one topic, one partition), the RecordBatch of ``topic, partition, key, value`` included;
- ``json_rows``: the baseline, the change rows of the ``images=json`` form
  (:func:`~canal.lake.forms.changes.entries_to_batch`) of the same entries.

``canal_us_per_message`` / ``canal_us_per_row``: the maker's time per message and per row change;
``json_us_per_row``: the baseline's; ``canal_json_ratio`` = the maker's time over the baseline's. ``--profile``
prints cProfile's top functions of one maker pass (not timed). What the maker makes is checked byte for byte by
``tests/test_flat_messages.py`` (and on Kafka by ``tests/test_spark_mq_kafka.py``), not here: the messages carry the
binlog's execute times, which differ from run to run.

Ends with ``RESULT canal_us_per_message=... canal_us_per_row=... json_us_per_row=... canal_json_ratio=...
messages=... rows=...``; JSON in ``benchmarks/results/bench_messages.json``.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench_spark import TABLE_DDL, entry_batches, load_arrow, workload_sizes, write_workload
from result_file import write_result


def decoded(changes: int) -> list[Sequence[Any]]:
    """bench_spark's workload of ``changes`` row changes, decoded in the instance's batches."""
    from canal.spark.testing import master_position
    from canal.testing.services import MariaDBServer

    inserts, updates, deletes = workload_sizes(changes)
    with MariaDBServer(server_id=1) as server:
        conn = server.connect()
        start = master_position(conn)
        server.execute("CREATE DATABASE bench")
        server.execute(TABLE_DDL)
        write_workload(conn, inserts, updates, deletes)
        end = master_position(conn)
        return [list(batch) for batch in entry_batches(server, start, end)]


def fastest(passes: int, *runs: Callable[[], Any]) -> list[float]:
    """The fastest of ``passes`` timed calls of each of ``runs``, called in turn (this machine's speed moves in
    phases: one run's passes all after the other's would compare two phases)."""
    best = [float("inf")] * len(runs)
    for _ in range(passes):
        for n, run in enumerate(runs):
            t0 = time.perf_counter()
            run()
            best[n] = min(best[n], time.perf_counter() - t0)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--changes", type=int, default=100_000, help="row changes in all (60/25/15)")
    parser.add_argument("--passes", type=int, default=3, help="timed passes of each; the fastest is kept")
    parser.add_argument("--profile", action="store_true", help="print cProfile's top functions of a maker pass")
    args = parser.parse_args(argv)

    from canal.config.mq import MqConfig
    from canal.lake.forms.changes import change_rows, entries_to_batch
    from canal.lake.forms.flat_messages import MessageMaker
    from canal.lake.forms.mq_routing import Routing

    load_arrow()
    batches = decoded(args.changes)
    rows = sum(change_rows(e) for batch in batches for e in batch)
    maker = MessageMaker("canal", Routing(MqConfig()), "bench", now_ms=lambda: 0)

    def canal() -> list[Any]:
        return [maker.make(batch, n, 0) for n, batch in enumerate(batches)]

    def json_rows() -> list[Any]:
        return [entries_to_batch(batch, "bench", n, 0) for n, batch in enumerate(batches)]

    made = canal()
    messages = sum(m.num_rows for m in made)
    if args.profile:
        profile = cProfile.Profile()
        profile.runcall(canal)
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)
    canal_s, json_s = fastest(args.passes, canal, json_rows)
    out = {
        "changes": args.changes,
        "rows": rows,
        "messages": messages,
        "canal_s": round(canal_s, 3),
        "json_rows_s": round(json_s, 3),
        "canal_us_per_message": round(canal_s / messages * 1e6, 1),
        "canal_us_per_row": round(canal_s / rows * 1e6, 2),
        "json_us_per_row": round(json_s / rows * 1e6, 2),
        "canal_json_ratio": round(canal_s / json_s, 3),
    }
    print(json.dumps(out, indent=2))
    write_result("bench_messages", out)
    print(
        "RESULT "
        + " ".join(
            f"{k}={out[k]}"
            for k in (
                "canal_us_per_message",
                "canal_us_per_row",
                "json_us_per_row",
                "canal_json_ratio",
                "messages",
                "rows",
            )
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
