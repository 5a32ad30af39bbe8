"""DeltaMirror's cost per micro-batch as the mirrored table grows: merge_on_read against copy_on_write.

Run: ``python benchmarks/bench_mirror_scale.py [--quick] [--sizes 100000,1600000,6400000] [--wide-sizes ...]``.

Workload (no server, no Spark): change rows of UPDATEs in the change-row schema, built directly as pyarrow arrays in
the text ``entries_to_batch`` renders (checked against it at start-up) -- 2,000 per batch, ``seq`` =
``batch_id << 32 | i``. Narrow rows: ``id`` BIGINT key, INT, VARCHAR(64), DATETIME, DECIMAL(12,2); wide rows: the same
plus a ~300-byte JSON text and a 200-byte random BLOB. Each table is loaded beforehand as the Delta table the mirror
would have made (``write_deltalake``, 1 MiB files, the mirror's Arrow types), which the mirror adopts; loading is
set-up, not measured. Five measurements, all in one run:

1. per-batch cost against table size: for each mode (``copy_on_write``, the baseline: MERGE every batch into the
   table; ``merge_on_read``: append to a change log, fold it in when it holds ``fold_ratio`` x the base's rows, in a
   background thread), each key pattern (``random``: uniformly random existing keys; ``recent``: keys from the newest
   1%) and each size, a fresh copy of the loaded table takes ``--batches`` batches of 2,000 updates: the median
   seconds of the whole ``apply`` call (the first batch included), the folds done, the data files (base + log), the
   time to read the current state (``mirror.read``) against a plain Delta read of a table of the same rows. Every
   case ends with ``mirror.read`` compared with the expected rows (all rows, all columns).
2. ``read_ratio``: a merge-on-read table whose change log holds 10% of its rows (distinct random keys, no fold):
   ``mirror.read`` seconds over ``DeltaTable(base).to_pyarrow_table()`` seconds (medians of 5, alternated). Goal <= 2.
3. ``tables_ratio``: batches of 2,000 changes spread over 50 tables of 10k rows (40 each) against the same changes to
   one table of the same 500k rows, merge_on_read, the two interleaved batch by batch: median whole-``apply`` seconds
   of the 50-table batches over the 1-table ones. Goal <= 3. With the mirror's defaults the 50 parts of a batch are
   staged, in one file (``stage_rows``: :mod:`canal.lake.store.staged`), and each batch appends the staged parts of a
   few tables to their change logs (``stage_spread``): the JSON lists how many of each, batch by batch. The first
   batches run before any log is compacted or folded, so ``--table-later-batches`` more batches of both follow,
   interleaved as before, while their logs are compacted (every 16 files) and folded (at 10% of a table's rows) in
   the background: the 50-table batches' median and maximum seconds (a batch must never wait for that maintenance),
   and ``tables_ratio_with_upkeep``, their median over the one table's (labelled, not the headline: the ratio once
   upkeep competes for the cores). Unstaged, a 50-table batch created 100 files, a 1-table batch 2, so the ratio
   also measured the file system -- on ext4 a file's creation looks at each inode freed recently near its directory
   before it reuses one (``recently_deleted`` in a kernel profile), which the machine's other work under the same
   parent directory decides: the same 50-table batch took 0.029 s and 0.062 s in one afternoon here. The case is
   repeated in ``/dev/shm`` (``tables_ratio_in_memory_fs``, labelled, not the headline: the mirror's own cost).
4. ``long_ratio``: ``--long-batches`` batches of 2,000 random updates to a 100k-row narrow table, merge_on_read with
   the default fold settings (background folds): the median of the last 10 batches over the median of the first 10.
   Goal <= 1.5. Also the parquet files on disk under the root (at the end, and the most seen after any batch) and the
   per-batch series.
5. ``flat_ratio``: the median per batch at the largest narrow size, merge_on_read, random keys, over the same at the
   smallest. Goal <= 1.5.

Each case starts once the file system has written out what the cases before it left in the page cache
(``os.sync()``): copy-on-write cases rewrite gigabytes, and while the kernel writes them back every file creation
waits for its journal -- 10 us becomes 170 us here, which a batch of 50 tables' appends (150 new files) pays 50
times more than a batch of one table's. A mirror shares its machine with other writers; the benchmark's cases need
not share theirs with each other. For the same reason a case's files are deleted at the end of the run, not before
the next case: on this machine's ext4 (no journal) a file's creation looks at each inode freed in the last minutes
in its block group (``recently_deleted`` in a kernel profile), and a case deletes thousands of files -- 100 new files
took 1.3 ms in a new directory and 11 ms after 5,000 deletions nearby. The mirror's own deletions (compactions,
trims, Delta's log clean-up) are measured as they come.

Headline: ratios within this run of what a user gets (each batch's whole ``apply``, none dropped; medians as stated).
Writes ``benchmarks/results/bench_mirror_scale.json``; the last line is
``RESULT flat_ratio=... read_ratio=... tables_ratio=... long_ratio=... tables_ratio_in_memory_fs=...
tables_ratio_with_upkeep=...``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from result_file import write_result  # noqa: E402

from canal.lake import DeltaMirror  # noqa: E402
from canal.lake.forms.changes import SEQ_BITS, arrow_schema, entries_to_batch  # noqa: E402
from canal.lake.settings import DEFAULT_FILE_BYTES  # noqa: E402
from canal.lake.store import changelog, delta_append  # noqa: E402
from canal.lake.store import names as naming  # noqa: E402
from canal.lake.types import arrow_type  # noqa: E402
from canal.protocol import ColumnMeta, Entry, EntryType, EventType, Header, RowChange, RowData, TableSchema  # noqa: E402

SCHEMA = "bench"
BATCH_ROWS = 2000
NARROW = (
    ("id", "bigint(20)", True),
    ("qty", "int(11)", False),
    ("name", "varchar(64)", False),
    ("at", "datetime", False),
    ("price", "decimal(12,2)", False),
)
WIDE = (*NARROW, ("doc", "json", False), ("blob_", "blob", False))
LAYOUTS = {"narrow": NARROW, "wide": WIDE}
EPOCH = dt.datetime(2024, 1, 1)
EPOCH_US = (EPOCH - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)
_DOC_HEAD = '{"id": '
_DOC_MID = ', "v": '
_DOC_TAIL = ', "tags": ["alpha", "beta", "gamma"], "note": "' + "lorem ipsum dolor sit amet " * 9 + '"}'
BLOB_BYTES = 200
MODES = ("copy_on_write", "merge_on_read")
PATTERNS = ("random", "recent")
MODE_SHORT = {"copy_on_write": "cow", "merge_on_read": "mor"}


def out(text: str) -> None:
    print(text, flush=True)


def rss_mb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


# -- rows ------------------------------------------------------------------------------------------------------------


def arrow_schema_of(layout: Sequence[tuple[str, str, bool]]) -> pa.Schema:
    return pa.schema([pa.field(name, arrow_type(mysql_type)) for name, mysql_type, _key in layout])


def initial_rows(kind: str, lo: int, hi: int, seed: int = 7) -> pa.Table:
    """Keys ``lo .. hi-1`` at version 0, built with Arrow kernels (the values :func:`values` gives for version 0)."""
    n = hi - lo
    ids = np.arange(lo, hi, dtype=np.int64)
    id_text = pa.array(ids).cast(pa.string())
    cents = (ids * 13) % 10**9
    whole = pa.array(cents // 100).cast(pa.string())
    frac = pc.utf8_lpad(pa.array(cents % 100).cast(pa.string()), 2, "0")
    columns: dict[str, Any] = {
        "id": pa.array(ids),
        "qty": pa.array((ids * 7) % 100_000),
        "name": pc.binary_join_element_wise("customer-", id_text, "-v0", ""),
        "at": pa.array(EPOCH_US + ids * 1_000_000).cast(pa.timestamp("us")),
        "price": pc.binary_join_element_wise(whole, frac, ".").cast(pa.decimal128(12, 2)),
    }
    if kind == "wide":
        columns["doc"] = pc.binary_join_element_wise(_DOC_HEAD, id_text, _DOC_MID + "0" + _DOC_TAIL, "")
        raw = np.random.default_rng(seed + lo).bytes(n * BLOB_BYTES)
        fixed = pa.FixedSizeBinaryArray.from_buffers(pa.binary(BLOB_BYTES), n, [None, pa.py_buffer(raw)])
        columns["blob_"] = fixed.cast(pa.binary())
    schema = arrow_schema_of(LAYOUTS[kind])
    return pa.Table.from_arrays([columns[f.name] for f in schema], schema=schema)


def values(kind: str, key: int, version: int, rng: random.Random) -> tuple[Any, ...]:
    """The decoded values (as the binlog reader yields them) of row ``key`` at ``version``."""
    cents = (key * 13 + version * 101) % 10**9
    row: tuple[Any, ...] = (
        key,
        (key * 7 + version) % 100_000,
        f"customer-{key}-v{version}",
        EPOCH + dt.timedelta(seconds=key + 60 * version),
        Decimal(f"{cents // 100}.{cents % 100:02d}"),
    )
    if kind == "wide":
        row = (*row, f"{_DOC_HEAD}{key}{_DOC_MID}{version}{_DOC_TAIL}", rng.randbytes(BLOB_BYTES))
    return row


def _cell(value: Any) -> str:
    """A value's canal text as a JSON string (entries_to_batch's rendering)."""
    if isinstance(value, int):
        return f'"{value}"'
    if isinstance(value, dt.datetime):
        return '"' + value.isoformat(" ") + '"'
    if isinstance(value, Decimal):
        return '"' + str(value) + '"'
    if isinstance(value, bytes):
        return json.dumps(value.decode("latin-1"), ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False)


def columns_text(kind: str) -> str:
    return json.dumps([list(c) for c in LAYOUTS[kind]], separators=(",", ":"))


def change_batch(
    kind: str, batch_id: int, changes: Sequence[tuple[str, tuple[Any, ...]]], destination: str = "bench"
) -> pa.Table:
    """UPDATE change rows (``(table, values)`` each, in order) as a pyarrow Table in the change-row schema. The
    ``before`` image is left null: the mirror does not read it."""
    names = [c[0] for c in LAYOUTS[kind]]
    n = len(changes)
    keys = [f'{{"id":"{row[0]}"}}' for _t, row in changes]
    after = ["{" + ",".join(f'"{c}":{_cell(v)}' for c, v in zip(names, row, strict=True)) + "}" for _t, row in changes]
    first = batch_id << SEQ_BITS
    schema = arrow_schema()
    constant: dict[str, Any] = {
        "destination": destination,
        "schema": SCHEMA,
        "type": "UPDATE",
        "is_ddl": False,
        "log_file": "mysql-bin.000001",
        "columns": columns_text(kind),
    }
    arrays: dict[str, Any] = {
        "seq": pa.array(np.arange(first, first + n, dtype=np.int64)),
        "table": pa.array([t for t, _row in changes], pa.string()),
        "keys": pa.array(keys, pa.string()),
        "after": pa.array(after, pa.string()),
        "log_offset": pa.array(np.arange(4, 4 + n, dtype=np.int64)),
        "row_index": pa.array(np.arange(n, dtype=np.int32)),
    }
    columns = []
    for field in schema:
        if field.name in arrays:
            columns.append(arrays[field.name])
        elif field.name in constant:
            columns.append(pa.array([constant[field.name]] * n, field.type))
        else:
            columns.append(pa.nulls(n, field.type))
    return pa.Table.from_arrays(columns, schema=schema)


def check_rendering() -> None:
    """The batches built here carry the text ``entries_to_batch`` makes of the same decoded rows."""
    rng = random.Random(1)
    for kind, layout in LAYOUTS.items():
        table = TableSchema(SCHEMA, "t", tuple(ColumnMeta(name, mysql_type=t, is_key=key) for name, t, key in layout))
        rows = [values(kind, key, version, rng) for key, version in ((0, 0), (17, 3), (123_456, 999), (5, 10**6))]
        header = Header("mysql-bin.000001", 4, 1, 1_700_000_000_000, SCHEMA, "t", EventType.UPDATE, 100)
        change = RowChange(EventType.UPDATE, tuple(RowData(table, r, r) for r in rows))
        theirs = entries_to_batch([Entry(header, EntryType.ROWDATA, change)], "bench", 3)
        ours = change_batch(kind, 3, [("t", r) for r in rows])
        for name in ("seq", "schema", "table", "type", "is_ddl", "keys", "old_keys", "after", "columns"):
            if ours.column(name).to_pylist() != theirs.column(name).to_pylist():
                raise RuntimeError(f"{kind}: column {name} differs from entries_to_batch")


def typed(kind: str, rows: Sequence[tuple[Any, ...]]) -> pa.Table:
    schema = arrow_schema_of(LAYOUTS[kind])
    columns = zip(*rows, strict=True)
    arrays = [pa.array(list(c), f.type) for c, f in zip(columns, schema, strict=True)]
    return pa.Table.from_arrays(arrays, schema=schema)


class Updates:
    """Batches of updates to one table of ``n`` rows, and the rows they leave (the last value per key wins)."""

    def __init__(self, kind: str, n: int, pattern: str, seed: int, lo: int = 0) -> None:
        self.kind, self.n, self.pattern, self.lo = kind, n, pattern, lo
        self.keys_rng = np.random.default_rng(seed)
        self.bytes_rng = random.Random(seed)
        self.version = 0
        self.latest: dict[int, tuple[Any, ...]] = {}

    def keys(self, count: int) -> list[int]:
        if self.pattern == "recent":
            recent = max(self.n // 100, 1)
            return (self.lo + self.keys_rng.integers(self.n - recent, self.n, count)).tolist()
        if self.pattern == "distinct":
            raise ValueError("distinct keys are drawn by the caller")
        return (self.lo + self.keys_rng.integers(0, self.n, count)).tolist()

    def rows(self, keys: Sequence[int]) -> list[tuple[Any, ...]]:
        out_rows = []
        for key in keys:
            self.version += 1
            row = values(self.kind, key, self.version, self.bytes_rng)
            self.latest[key] = row
            out_rows.append(row)
        return out_rows

    def expected(self, initial: pa.Table) -> pa.Table:
        if not self.latest:
            return initial
        changed = typed(self.kind, list(self.latest.values()))
        kept = initial.filter(pc.invert(pc.is_in(initial.column("id"), value_set=changed.column("id"))))
        return pa.concat_tables([kept, changed]).sort_by("id")


def same_rows(got: pa.Table, want: pa.Table) -> str | None:
    """None when the two tables hold the same rows in the same columns and types (order by id), else what differs."""
    got = got.sort_by("id")
    want = want.sort_by("id")
    if got.column_names != want.column_names:
        return f"columns {got.column_names} != {want.column_names}"
    if got.num_rows != want.num_rows:
        return f"{got.num_rows} rows, expected {want.num_rows}"
    for name in want.column_names:
        a, b = got.column(name), want.column(name)
        if a.type != b.type:
            return f"column {name}: type {a.type}, expected {b.type}"
        if not a.equals(b):
            bad = pc.indices_nonzero(pc.invert(pc.fill_null(pc.equal(a, b), False)))
            first = bad[0].as_py() if len(bad) else 0
            return (
                f"column {name}: {len(bad)} values differ, e.g. id {got.column('id')[first]}: {a[first]} != {b[first]}"
            )
    return None


# -- tables on disk ------------------------------------------------------------------------------------------------


def load(path: Path, rows: pa.Table) -> None:
    from deltalake import write_deltalake

    path.parent.mkdir(parents=True, exist_ok=True)
    write_deltalake(
        str(path),
        rows,
        configuration={"delta.targetFileSize": str(DEFAULT_FILE_BYTES)},
        target_file_size=DEFAULT_FILE_BYTES,
    )


def plain_read(path: Path) -> pa.Table:
    from deltalake import DeltaTable

    return DeltaTable(str(path)).to_pyarrow_table()


def timed(fn: Callable[[], Any], repeat: int = 1) -> tuple[float, Any]:
    """The median seconds of ``repeat`` calls of ``fn``, and the last call's value."""
    seconds, value = [], None
    for _ in range(repeat):
        began = time.perf_counter()
        value = fn()
        seconds.append(time.perf_counter() - began)
    return statistics.median(seconds), value


def data_files(mirror: DeltaMirror, table: str) -> dict[str, int]:
    from deltalake import DeltaTable

    base = mirror.table_path(SCHEMA, table)
    log = changelog.log_path(base)
    files = {"base": len(DeltaTable(str(base)).file_uris()), "log": 0}
    if delta_append.is_table(log):
        files["log"] = len(DeltaTable(str(log)).file_uris())
    return files


def log_commits(log: Path) -> dict[str, int | None]:
    """The change log's Delta version and its last checkpoint's (opening the log replays the commits between)."""
    from deltalake import DeltaTable

    try:
        checkpoint = int(json.loads((log / "_delta_log" / "_last_checkpoint").read_text())["version"])
    except (FileNotFoundError, KeyError, ValueError):
        checkpoint = None
    return {"version": DeltaTable(str(log)).version(), "last_checkpoint": checkpoint}


def parquet_on_disk(root: Path) -> int:
    """Data files on disk under the root (referenced or not), Delta checkpoints (``_delta_log``) left out."""
    return sum(1 for p in root.rglob("*.parquet") if "_delta_log" not in p.parts)


def discard(path: Path) -> None:
    """Set a case's directory aside: deleted with the run's temporary directory at its end, not before the next case
    (module docstring)."""
    path.rename(path.with_name(f".discarded-{path.name}-{os.urandom(4).hex()}"))


class Loaded:
    """One loaded table per (kind, rows), kept for the cases that copy it, with its plain-read time and rows."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.tables: dict[tuple[str, int], tuple[Path, float, pa.Table]] = {}

    def get(self, kind: str, n: int) -> tuple[Path, float, pa.Table]:
        if (kind, n) not in self.tables:
            root = self.tmp / f"loaded-{kind}-{n}"
            began = time.perf_counter()
            load(naming.table_path(root, SCHEMA, "t"), initial_rows(kind, 0, n))
            load_s = time.perf_counter() - began
            read_s, rows = timed(lambda: plain_read(naming.table_path(root, SCHEMA, "t")), repeat=3)
            out(f"  (loaded {kind} {n:,} rows in {load_s:.1f}s; plain read {read_s:.3f}s)")
            self.tables[kind, n] = (root, read_s, rows)
        return self.tables[kind, n]

    def drop(self, kind: str, n: int) -> None:
        entry = self.tables.pop((kind, n), None)
        if entry is not None:
            discard(entry[0])


# -- 1. per-batch cost against table size ------------------------------------------------------------------------


def scale_case(loaded: Loaded, kind: str, n: int, mode: str, pattern: str, batches: int, check: bool) -> dict[str, Any]:
    source, plain_s, initial = loaded.get(kind, n)
    root = loaded.tmp / f"case-{kind}-{n}-{mode}-{pattern}"
    shutil.copytree(source, root)
    os.sync()  # not the writeback of earlier cases, nor of the set-up (module docstring)
    updates = Updates(kind, n, pattern, seed=zlib.crc32(f"{kind}-{n}-{pattern}".encode()))
    mirror = DeltaMirror(root, mode=mode)  # type: ignore[arg-type]
    seconds: list[float] = []
    for batch_id in range(1, batches + 1):
        rows = updates.rows(updates.keys(BATCH_ROWS))
        batch = change_batch(kind, batch_id, [("t", r) for r in rows])
        began = time.perf_counter()
        mirror.apply(batch, batch_id)
        seconds.append(time.perf_counter() - began)
    mirror.wait_for_folds()
    files = data_files(mirror, "t")
    read_s, state = timed(lambda: mirror.read(SCHEMA, "t"), repeat=3)
    folds = [round(f.seconds, 3) for f in mirror.folds]
    mirror.close()
    problem = same_rows(state, updates.expected(initial)) if check else None
    del state
    discard(root)
    case = {
        "kind": kind,
        "rows": n,
        "mode": mode,
        "keys": pattern,
        "batches": batches,
        "median_batch_s": round(statistics.median(seconds), 4),
        "first_batch_s": round(seconds[0], 4),
        "max_batch_s": round(max(seconds), 4),
        "batch_s": [round(s, 4) for s in seconds],
        "folds": len(folds),
        "fold_s": folds,
        "fold_errors": list(mirror.fold_errors),
        "data_files": files,
        "read_s": round(read_s, 4),
        "plain_read_s": round(plain_s, 4),
        "checked": check,
        "exact": None if not check else problem is None,
    }
    if problem is not None:
        case["problem"] = problem
    flag = "-" if not check else ("ok" if problem is None else f"WRONG: {problem}")
    out(
        f"{kind:6} {n:>10,} {MODE_SHORT[mode]:4} {pattern:7} {case['median_batch_s']:9.4f} "
        f"{case['first_batch_s']:9.4f} {case['max_batch_s']:9.4f} {len(folds):5} {sum(folds):7.2f} "
        f"{files['base']:5}+{files['log']:<4} {read_s:8.3f} {plain_s:8.3f}  {flag}"
    )
    return case


SCALE_HEADER = (
    f"{'kind':6} {'rows':>10} {'mode':4} {'keys':7} {'median_s':>9} {'first_s':>9} {'max_s':>9} {'folds':>5} "
    f"{'fold_s':>7} {'files':>10} {'read_s':>8} {'plain_s':>8}  exact"
)


# -- 2. reading a table whose log holds 10% of its rows ------------------------------------------------------------


def read_case(loaded: Loaded, n: int) -> dict[str, Any]:
    source, _plain_s, initial = loaded.get("narrow", n)
    root = loaded.tmp / f"read-{n}"
    shutil.copytree(source, root)
    os.sync()  # not the writeback of earlier cases, nor of the set-up (module docstring)
    mirror = DeltaMirror(root, fold_ratio=1e9, fold_files=1_000_000, background_folds=False)
    updates = Updates("narrow", n, "random", seed=11)
    keys = updates.keys_rng.permutation(n)[: n // 10].tolist()
    began = time.perf_counter()
    for batch_id, start in enumerate(range(0, len(keys), BATCH_ROWS), 1):
        rows = updates.rows(keys[start : start + BATCH_ROWS])
        mirror.apply(change_batch("narrow", batch_id, [("t", r) for r in rows]), batch_id)
    append_s = time.perf_counter() - began
    base = mirror.table_path(SCHEMA, "t")
    files = data_files(mirror, "t")
    log_rows = changelog.log_size(base).log_rows
    plain, current = [], []
    for _ in range(5):  # alternated, so both see the same machine
        plain.append(timed(lambda: plain_read(base))[0])
        began = time.perf_counter()
        state = mirror.read(SCHEMA, "t")
        current.append(time.perf_counter() - began)
    plain_s, read_s = statistics.median(plain), statistics.median(current)
    mirror.close()
    problem = same_rows(state, updates.expected(initial))
    del state
    discard(root)
    case = {
        "rows": n,
        "log_rows": log_rows,
        "log_batches": len(range(0, len(keys), BATCH_ROWS)),
        "append_s": round(append_s, 2),
        "data_files": files,
        "read_s": round(read_s, 4),
        "plain_read_s": round(plain_s, 4),
        "read_ratio": round(read_s / plain_s, 3),
        "read_ratio_is": "median of 5 mirror.read s / median of 5 DeltaTable(base).to_pyarrow_table() s, alternated",
        "read_s_all": [round(x, 4) for x in current],
        "plain_read_s_all": [round(x, 4) for x in plain],
        "folds": len(mirror.folds),
        "exact": problem is None,
    }
    if problem is not None:
        case["problem"] = problem
    out(
        f"read_ratio: {n:,} rows, log {log_rows:,} rows in {files['log']} files: read {read_s:.3f}s, "
        f"plain {plain_s:.3f}s -> {case['read_ratio']:.3f}  {'ok' if problem is None else 'WRONG: ' + problem}"
    )
    return case


# -- 3. one batch over 50 tables against the same changes to one table -------------------------------------------


def tables_case(tmp: Path, tables: int, rows_per_table: int, batches: int, later: int) -> dict[str, Any]:
    per_table = BATCH_ROWS // tables
    one_root, many_root = tmp / "tables-one", tmp / "tables-many"
    total = tables * rows_per_table
    initial = initial_rows("narrow", 0, total)
    load(naming.table_path(one_root, SCHEMA, "t"), initial)
    for j in range(tables):
        load(naming.table_path(many_root, SCHEMA, f"t{j:02d}"), initial.slice(j * rows_per_table, rows_per_table))
    os.sync()  # not the writeback of earlier cases, nor of the set-up (module docstring)
    one = DeltaMirror(one_root)
    many = DeltaMirror(many_root)
    updates = Updates("narrow", total, "random", seed=5)
    rng = np.random.default_rng(3)
    one_s: list[float] = []
    many_s: list[float] = []
    staged: list[int] = []  # per 50-table batch: the tables whose part it staged, and those whose parts it flushed
    flushed: list[int] = []

    def interleaved(batch_ids: range, many_s: list[float], one_s: list[float]) -> None:
        """Batches of ``per_table`` random keys of each table, each applied to the 50 tables and then as the same
        rows to the one table: the seconds of each apply call."""
        for batch_id in batch_ids:
            keys = [
                j * rows_per_table + int(k) for j in range(tables) for k in rng.integers(0, rows_per_table, per_table)
            ]
            rows = updates.rows(keys)
            spread = change_batch("narrow", batch_id, [(f"t{r[0] // rows_per_table:02d}", r) for r in rows])
            single = change_batch("narrow", batch_id, [("t", r) for r in rows])
            for mirror, batch, seconds in ((many, spread, many_s), (one, single, one_s)):
                began = time.perf_counter()
                result = mirror.apply(batch, batch_id)
                seconds.append(time.perf_counter() - began)
                if mirror is many:
                    staged.append(len(result.staged))
                    flushed.append(len(result.flushed))

    interleaved(range(1, batches + 1), many_s, one_s)
    # both go on, their logs compacted and folded in the background meanwhile: what a batch costs while that
    # maintenance runs (a batch must never wait for it)
    later_s: list[float] = []
    later_one_s: list[float] = []
    interleaved(range(batches + 1, batches + later + 1), later_s, later_one_s)
    one.wait_for_folds()
    problem = same_rows(one.read(SCHEMA, "t"), updates.expected(initial))
    many.wait_for_folds()
    expected = updates.expected(initial)
    for j in (0, tables // 2, tables - 1):
        ids = expected.column("id")
        lo, hi = j * rows_per_table, (j + 1) * rows_per_table
        part = expected.filter(pc.and_(pc.greater_equal(ids, lo), pc.less(ids, hi)))
        problem = problem or same_rows(many.read(SCHEMA, f"t{j:02d}"), part)
    folds = len(one.folds) + len(many.folds)
    later_folds = len(many.folds)
    fold_errors = list(many.fold_errors)
    for mirror in (one, many):
        mirror.close()
    discard(one_root)
    discard(many_root)
    ratio = statistics.median(many_s) / statistics.median(one_s)
    case = {
        "tables": tables,
        "rows_per_table": rows_per_table,
        "changes_per_table": per_table,
        "one_table_rows": total,
        "batches": batches,
        "tables_batch_s": [round(s, 4) for s in many_s],
        "one_table_batch_s": [round(s, 4) for s in one_s],
        "tables_median_s": round(statistics.median(many_s), 4),
        "one_table_median_s": round(statistics.median(one_s), 4),
        "tables_ratio": round(ratio, 3),
        "tables_staged_per_batch": staged,
        "tables_flushed_per_batch": flushed,
        "folds": folds,
        "later_batches": later,
        "later_is": f"the {tables} tables and the one table after the ratio's batches, interleaved as before, their "
        "logs compacted and folded in the background",
        "later_batch_s": [round(s, 4) for s in later_s],
        "later_median_s": round(statistics.median(later_s), 4) if later_s else None,
        "later_max_s": round(max(later_s), 4) if later_s else None,
        "later_one_table_median_s": round(statistics.median(later_one_s), 4) if later_one_s else None,
        "tables_ratio_with_upkeep": round(statistics.median(later_s) / statistics.median(later_one_s), 3)
        if later_s
        else None,
        "later_folds": later_folds,
        "later_fold_errors": fold_errors,
        "exact": problem is None,
    }
    if problem is not None:
        case["problem"] = problem
    out(
        f"tables_ratio: {tables} tables x {per_table} changes {case['tables_median_s']:.4f}s, 1 table "
        f"{case['one_table_median_s']:.4f}s -> {ratio:.3f} (in {tmp})  "
        f"{'ok' if problem is None else 'WRONG: ' + problem}"
    )
    if later_s:
        out(
            f"  then {later} batches while the logs are compacted and folded: {tables} tables median "
            f"{case['later_median_s']:.4f}s, max {case['later_max_s']:.4f}s, {later_folds} folds, "
            f"{len(fold_errors)} fold errors; 1 table median {case['later_one_table_median_s']:.4f}s -> "
            f"{case['tables_ratio_with_upkeep']:.3f}"
        )
    return case


# -- 4. a long stream ------------------------------------------------------------------------------------------------


def long_case(loaded: Loaded, n: int, batches: int, ends: int = 10) -> dict[str, Any]:
    source, _plain_s, initial = loaded.get("narrow", n)
    root = loaded.tmp / f"long-{n}"
    shutil.copytree(source, root)
    os.sync()  # not the writeback of earlier cases, nor of the set-up (module docstring)
    mirror = DeltaMirror(root)
    updates = Updates("narrow", n, "random", seed=23)
    seconds: list[float] = []
    files_max = 0
    folds_started = 0
    for batch_id in range(1, batches + 1):
        rows = updates.rows(updates.keys(BATCH_ROWS))
        batch = change_batch("narrow", batch_id, [("t", r) for r in rows])
        began = time.perf_counter()
        result = mirror.apply(batch, batch_id)
        seconds.append(time.perf_counter() - began)
        folds_started += len(result.folds)
        files_max = max(files_max, parquet_on_disk(root))
        if batch_id % 50 == 0 or batch_id == batches:
            out(
                f"  long run: batch {batch_id}: median of the last 10 {statistics.median(seconds[-10:]):.4f}s, "
                f"{len(mirror.folds)} folds done, {parquet_on_disk(root)} parquet files"
            )
    mirror.wait_for_folds()
    files_end = parquet_on_disk(root)
    commits = log_commits(Path(changelog.log_path(mirror.table_path(SCHEMA, "t"))))
    files = data_files(mirror, "t")
    state = mirror.read(SCHEMA, "t")
    problem = same_rows(state, updates.expected(initial))
    del state
    fold_s = [f.seconds for f in mirror.folds]
    mirror.close()
    discard(root)
    ends = min(ends, batches // 2)
    first, last = statistics.median(seconds[:ends]), statistics.median(seconds[-ends:])
    case = {
        "rows": n,
        "batches": batches,
        "long_ratio_is": f"median of batches {batches - ends + 1}-{batches} / median of batches 1-{ends}",
        "first_median_s": round(first, 4),
        "last_median_s": round(last, 4),
        "long_ratio": round(last / first, 3),
        "median_batch_s": round(statistics.median(seconds), 4),
        "max_batch_s": round(max(seconds), 4),
        "folds": len(fold_s),
        "folds_started": folds_started,
        "fold_median_s": round(statistics.median(fold_s), 3) if fold_s else None,
        "fold_max_s": round(max(fold_s), 3) if fold_s else None,
        "fold_errors": list(mirror.fold_errors),
        "parquet_files_on_disk_end": files_end,
        "parquet_files_on_disk_max": files_max,
        "data_files_end": files,
        "change_log_commits": commits,
        "exact": problem is None,
        "batch_s": [round(s, 4) for s in seconds],
    }
    if problem is not None:
        case["problem"] = problem
    out(
        f"long_ratio: {batches} batches on {n:,} rows: first {ends} {first:.4f}s, last {ends} {last:.4f}s -> "
        f"{case['long_ratio']:.3f}; {len(fold_s)} folds; parquet files {files_end} at the end, {files_max} max; "
        f"change log at Delta version {commits['version']}, last checkpoint {commits['last_checkpoint']}  "
        f"{'ok' if problem is None else 'WRONG: ' + problem}"
    )
    return case


# -- the run -----------------------------------------------------------------------------------------------------


def sizes_arg(text: str) -> list[int]:
    return sorted(int(float(part)) for part in text.split(",") if part.strip())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only (a smoke run)")
    parser.add_argument("--sizes", type=sizes_arg, default=None, help="narrow table sizes (rows), comma-separated")
    parser.add_argument("--wide-sizes", type=sizes_arg, default=None, help="wide table sizes (rows), comma-separated")
    parser.add_argument("--batches", type=int, default=8, help="batches per size case")
    parser.add_argument("--long-batches", type=int, default=None)
    parser.add_argument("--long-rows", type=int, default=100_000)
    parser.add_argument("--read-rows", type=int, default=None, help="rows of the read_ratio table")
    parser.add_argument("--tables", type=int, default=50)
    parser.add_argument("--table-rows", type=int, default=10_000)
    parser.add_argument("--table-batches", type=int, default=7)
    parser.add_argument(
        "--table-later-batches",
        type=int,
        default=None,
        help="batches of both afterwards, while their logs are compacted and folded (default 60)",
    )
    parser.add_argument(
        "--skip-cow-above",
        type=int,
        default=None,
        help="skip copy_on_write with recent keys at this many narrow rows or more (to save time; default: never)",
    )
    args = parser.parse_args(argv)
    quick = args.quick
    sizes = args.sizes or ([20_000, 80_000] if quick else [100_000, 1_600_000, 6_400_000])
    wide_sizes = args.wide_sizes if args.wide_sizes is not None else ([20_000] if quick else [100_000, 400_000])
    long_batches = args.long_batches or (30 if quick else 300)
    long_rows = 20_000 if quick else args.long_rows
    read_rows = args.read_rows or (80_000 if quick else 1_600_000)
    table_rows = 2_000 if quick else args.table_rows

    began = time.perf_counter()
    check_rendering()
    cases: list[dict[str, Any]] = []
    skipped: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-mirror-scale-") as tmp_name:
        tmp = Path(tmp_name)
        loaded = Loaded(tmp)
        out(f"1. per-batch cost ({args.batches} batches of {BATCH_ROWS:,} updates; seconds per apply call)")
        out(SCALE_HEADER)
        plan = [("narrow", n) for n in sizes] + [("wide", n) for n in wide_sizes]
        for kind, n in plan:
            for pattern in PATTERNS:
                for mode in MODES:
                    big = kind == "narrow" and args.skip_cow_above is not None and n >= args.skip_cow_above
                    if mode == "copy_on_write" and pattern == "recent" and big:
                        skipped.append(f"{kind} {n} {mode} {pattern}")
                        out(f"{kind:6} {n:>10,} {MODE_SHORT[mode]:4} {pattern:7} skipped (time)")
                        continue
                    cases.append(scale_case(loaded, kind, n, mode, pattern, args.batches, check=True))
            if kind == "narrow" and n == read_rows:
                continue  # kept for read_ratio
            if not (kind == "narrow" and n == long_rows):
                loaded.drop(kind, n)
        out("2. read_ratio")
        read = read_case(loaded, read_rows)
        loaded.drop("narrow", read_rows)
        out("3. tables_ratio")
        later = args.table_later_batches if args.table_later_batches is not None else (20 if quick else 60)
        tables = tables_case(tmp, args.tables, table_rows, args.table_batches, later)
        in_memory = None
        if Path("/dev/shm").is_dir():  # the same without a disk file system's cost of creating files (labelled)
            with tempfile.TemporaryDirectory(prefix="bench-mirror-tables-", dir="/dev/shm") as shm:
                in_memory = tables_case(Path(shm), args.tables, table_rows, args.table_batches, 0)
        out("4. long_ratio")
        long = long_case(loaded, long_rows, long_batches)
    run_s = time.perf_counter() - began

    def median_of(kind: str, n: int, mode: str, pattern: str) -> float:
        (case,) = [c for c in cases if (c["kind"], c["rows"], c["mode"], c["keys"]) == (kind, n, mode, pattern)]
        return float(case["median_batch_s"])

    small, large = min(sizes), max(sizes)
    flat_ratio = median_of("narrow", large, "merge_on_read", "random") / median_of(
        "narrow", small, "merge_on_read", "random"
    )
    cow_growth = median_of("narrow", large, "copy_on_write", "random") / median_of(
        "narrow", small, "copy_on_write", "random"
    )
    exact = all(c.get("exact") is not False for c in [*cases, read, tables, long, in_memory or {}])
    document = {
        "benchmark": "bench_mirror_scale",
        "quick": quick,
        "batch_changes": BATCH_ROWS,
        "file_bytes": DEFAULT_FILE_BYTES,
        "flat_ratio": round(flat_ratio, 3),
        "flat_ratio_is": f"median s per batch, merge_on_read, random keys: {large:,} rows / {small:,} rows (narrow)",
        "read_ratio": read["read_ratio"],
        "tables_ratio": tables["tables_ratio"],
        "tables_ratio_in_memory_fs": None if in_memory is None else in_memory["tables_ratio"],
        "tables_ratio_with_upkeep": tables["tables_ratio_with_upkeep"],
        "tables_ratio_with_upkeep_is": "the same batches after the ratio's, while the logs are compacted and folded "
        "in the background (not the headline)",
        "tables_ratio_in_memory_fs_is": "tables_ratio with the tables in /dev/shm (tmpfs): the mirror's own cost, "
        "without the disk file system's cost of the 100 files a 50-table batch creates (not the headline)",
        "long_ratio": long["long_ratio"],
        "long_ratio_is": long["long_ratio_is"],
        "goals": {"flat_ratio": 1.5, "read_ratio": 2, "tables_ratio": 3, "long_ratio": 1.5},
        "copy_on_write_growth": round(cow_growth, 3),
        "copy_on_write_growth_is": "the same ratio as flat_ratio for copy_on_write (the baseline)",
        "all_exact": exact,
        "run_s": round(run_s, 1),
        "max_rss_mb": rss_mb(),
        "skipped": skipped,
        "scale": cases,
        "read": read,
        "tables": tables,
        "tables_in_memory_fs": in_memory,
        "long": long,
    }
    write_result("bench_mirror_scale", document)
    upkeep = tables["tables_ratio_with_upkeep"]
    out(f"run {run_s:.0f}s, max RSS {rss_mb()} MB, all exact: {exact}")
    out(
        f"RESULT flat_ratio={flat_ratio:.3f} read_ratio={read['read_ratio']:.3f} "
        f"tables_ratio={tables['tables_ratio']:.3f} long_ratio={long['long_ratio']:.3f}"
        + ("" if in_memory is None else f" tables_ratio_in_memory_fs={in_memory['tables_ratio']:.3f}")
        + ("" if upkeep is None else f" tables_ratio_with_upkeep={upkeep:.3f}")
    )
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
