"""DeltaMirror's cost per micro-batch over a long stream, against the mirror as it was: one file per table, reopened.

Run: ``python benchmarks/bench_mirror.py [--batches N] [--rows R]``.

Workload (no server, no Spark: change rows built with ``entries_to_batch`` from decoded values): the column mix of
``bench_spark`` (BIGINT key, INT, VARCHAR, JSON text, a 200-byte BLOB, DATETIME(6), DECIMAL(12,2), ENUM, DOUBLE,
TEXT). A first batch inserts ``--rows`` rows; then ``--batches`` micro-batches each update 1,000 rows of a moving key
range, insert 200 new rows and delete 100, as a stream does.

Three mirrors take the same batches, interleaved batch by batch so that all see the same machine:

* ``mirror``: ``DeltaMirror`` as shipped -- data files of ``DEFAULT_FILE_BYTES`` (a MERGE rewrites only the files
  holding changed keys), each table opened once and brought up to date with the commits since;
* ``reopen``: the same, made to open its tables anew for every batch (each open replays the Delta log from its last
  checkpoint, up to 100 commits);
* ``previous``, the baseline: the mirror as it was -- reopened every batch, and Delta's default file size (100 MB),
  which keeps a table of this size in one file that every batch rewrites whole.

The headline is each mirror's whole run: every ``apply``, the load included, none dropped, no warm-up. The shipped
mirror goes first, so its load also pays the libraries' start-up in this process (against it). Beside it: the mean
per stream batch (the load left out) and over the last fifth of the batches, labelled steady. All mirrors must end
with the same rows.

Writes ``benchmarks/results/bench_mirror.json``; the last line is
``RESULT mirror_run_s=... previous_run_s=... mirror_speedup=... mirror_batch_s=... previous_batch_s=...`` (seconds;
the speedup is the baseline's whole run over ours).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from result_file import write_result  # noqa: E402

from canal.lake.forms.changes import entries_to_batch  # noqa: E402
from canal.lake.settings import DEFAULT_FILE_BYTES  # noqa: E402
from canal.protocol import ColumnMeta, Entry, EntryType, EventType, Header, RowChange, RowData, TableSchema  # noqa: E402
from canal.spark import DeltaMirror  # noqa: E402

TABLE = TableSchema(
    "bench",
    "t",
    (
        ColumnMeta("id", mysql_type="bigint(20)", is_key=True),
        ColumnMeta("qty", mysql_type="int(11)"),
        ColumnMeta("name", mysql_type="varchar(64)"),
        ColumnMeta("doc", mysql_type="json"),
        ColumnMeta("blob_", mysql_type="blob"),
        ColumnMeta("at", mysql_type="datetime(6)"),
        ColumnMeta("amount", mysql_type="decimal(12,2)"),
        ColumnMeta("state", mysql_type="enum('new','paid','shipped','cancelled')"),
        ColumnMeta("ratio", mysql_type="double"),
        ColumnMeta("note", mysql_type="text"),
    ),
)
_STATES = ("new", "paid", "shipped", "cancelled")
UPDATES, INSERTS, DELETES = 1000, 200, 100


def image(i: int, version: int) -> tuple[Any, ...]:
    return (
        i,
        (i + version) % 1000,
        f"customer-{i}",
        json.dumps({"id": i, "tags": ["a", "b"], "v": version}),
        bytes((i + k) % 256 for k in range(200)),
        dt.datetime(2024, 5, 6, 7, 8, i % 60, i % 1_000_000),
        Decimal(f"{i % 10000}.{i % 100:02d}"),
        _STATES[(i + version) % 4],
        i / 7,
        f"a note about order {i}, " * 3,
    )


def _entry(event: EventType, rows: list[RowData], offset: int) -> Entry:
    header = Header("mysql-bin.000001", offset, 1, 1_700_000_000_000, "bench", "t", event, 100)
    return Entry(header, EntryType.ROWDATA, RowChange(event, tuple(rows)))


def batches(rows: int, count: int) -> list[Any]:
    """The change-row batches: the first inserts ``rows`` rows, each later one updates, inserts and deletes."""
    out = [
        entries_to_batch(
            [_entry(EventType.INSERT, [RowData(TABLE, None, image(i, 0)) for i in range(rows)], 4)], "b", 1
        )
    ]
    next_id, first_live = rows, 0
    for b in range(1, count + 1):
        lo = first_live + (b * UPDATES) % max(next_id - first_live - UPDATES, 1)
        updated = [RowData(TABLE, image(i, b - 1), image(i, b)) for i in range(lo, lo + UPDATES)]
        inserted = [RowData(TABLE, None, image(i, b)) for i in range(next_id, next_id + INSERTS)]
        deleted = [RowData(TABLE, image(i, 0), None) for i in range(first_live, first_live + DELETES)]
        next_id, first_live = next_id + INSERTS, first_live + DELETES
        entries = [
            _entry(EventType.UPDATE, updated, 1000 * b),
            _entry(EventType.INSERT, inserted, 1000 * b + 100),
            _entry(EventType.DELETE, deleted, 1000 * b + 200),
        ]
        out.append(entries_to_batch(entries, "b", b + 1))
    return out


def run(rows: int, count: int) -> dict[str, Any]:
    work = batches(rows, count)
    with tempfile.TemporaryDirectory(prefix="bench-mirror-") as tmp:
        mirrors = {
            "mirror": DeltaMirror(Path(tmp) / "mirror"),
            "reopen": DeltaMirror(Path(tmp) / "reopen"),
            "previous": DeltaMirror(Path(tmp) / "previous", file_bytes=100 << 20),
        }
        seconds: dict[str, list[float]] = {name: [] for name in mirrors}
        stages: list[tuple[float, float]] = []
        for batch_id, batch in enumerate(work, 1):
            for name, mirror in mirrors.items():
                if name != "mirror":
                    mirror._forget(*mirror._handles.locations())  # every batch opens its tables anew
                began = time.perf_counter()
                result = mirror.apply(batch, batch_id)
                seconds[name].append(time.perf_counter() - began)
                if name == "mirror":
                    stages.append((result.prepare_s, result.merge_s))
        tables = [m.read("bench", "t").sort_by("id") for m in mirrors.values()]
        if any(t != tables[0] for t in tables) or tables[0].num_rows != rows + count * (INSERTS - DELETES):
            raise RuntimeError("the mirrors differ")
        files = {
            name: len(m._handles.table(str(m.table_path("bench", "t"))).file_uris()) for name, m in mirrors.items()
        }
    steady = max(len(work) // 5, 1)
    whole = {name: sum(s) for name, s in seconds.items()}
    mean = {name: statistics.mean(s[1:]) for name, s in seconds.items()}  # the stream's batches, after the load
    tail = {name: statistics.mean(s[-steady:]) for name, s in seconds.items()}
    return {
        "benchmark": "bench_mirror",
        "rows": rows,
        "batches": count,
        "batch_changes": {"updates": UPDATES, "inserts": INSERTS, "deletes": DELETES},
        "file_bytes": DEFAULT_FILE_BYTES,
        "mirror_run_s": round(whole["mirror"], 2),
        "reopen_run_s": round(whole["reopen"], 2),
        "previous_run_s": round(whole["previous"], 2),
        "mirror_speedup": round(whole["previous"] / whole["mirror"], 2),
        "load_s": {name: round(s[0], 3) for name, s in seconds.items()},
        "mirror_batch_s": round(mean["mirror"], 4),
        "reopen_batch_s": round(mean["reopen"], 4),
        "previous_batch_s": round(mean["previous"], 4),
        "steady_last_batches": steady,
        "steady_batch_s": {name: round(v, 4) for name, v in tail.items()},
        "mirror_prepare_s": round(statistics.mean(p for p, _m in stages[1:]), 4),
        "mirror_merge_s": round(statistics.mean(m for _p, m in stages[1:]), 4),
        "data_files_at_end": files,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--batches", type=int, default=150)
    parser.add_argument("--rows", type=int, default=90_000)
    args = parser.parse_args(argv)
    out = run(args.rows, args.batches)
    print(json.dumps(out, indent=2))
    write_result("bench_mirror", out)
    print(
        f"RESULT mirror_run_s={out['mirror_run_s']} previous_run_s={out['previous_run_s']} "
        f"mirror_speedup={out['mirror_speedup']} mirror_batch_s={out['mirror_batch_s']} "
        f"previous_batch_s={out['previous_batch_s']}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
