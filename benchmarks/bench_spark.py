"""MariaDB to a Delta mirror through the ``canal`` Spark source, timed as a user sees it.

Workload: 1,000,000 row changes (600k inserts, 250k updates, 150k deletes in 1,000-row statements) on a 10-column table
with the column mix of real tables -- JSON text, a BLOB, DATETIME(6), DECIMAL, ENUM, DOUBLE, text -- written to a
private MariaDB's binlog before the query starts.

Headline (``whole_rows_per_s``): one ``readStream.format("canal")`` -> ``foreachBatch(DeltaMirror)`` query with
``Trigger.AvailableNow`` and the source's defaults -- in this local-mode session ``spool.shared=true``: the executors
see the spool, so each micro-batch's task reads its rows from the spool file instead of getting them from the driver
inside its input partition (``--driver-rows`` turns it off) --, timed from ``start()`` until it has terminated: the
first micro-batch (reader process start, instance start, nothing prefetched) included, no warm-up over the same
data. The Spark session exists before (a user's job has one); nothing of the pipeline has run in this
process before (the baselines below run after the query, or in a process of their own). ``steady_rows_per_s``
(labelled: not what a user gets) leaves the first micro-batch out.

Same-run baselines, without Spark: ``decode`` -- an Instance decoding the binlog, rows counted, twice: in a new
process before the query (this one runs nothing of the pipeline before it) and in this process after it; its rate is
the faster run's (``before_query`` and ``after_query`` beside it). This machine's speed moves in phases of a minute or
more (one run of decoding alone gave 54,100 rows/s before a query and 86,500 after it): one run after the query made
the ratios below swing by a quarter between runs of the same code, and a mean would let a slow phase flatter them. A
slower phase only lowers decoding's rate, so the faster run is the nearer to its cost, and the stricter baseline.
``decode_encode`` -- after the query, each batch turned into change rows (``entries_to_batch``: what the reader
adds).
``encode_ratio`` = decode+encode rate / decode-only rate. The reader runs in a PySpark worker, where pyarrow (and the
pandas it loads on its first array) are loaded before the first batch; they are loaded here before both baselines,
so that the ratio compares per-row work, not a one-off 0.6-0.8 s of imports inside the encode baseline.

Stage costs per micro-batch (JSON): Spark's own durations (``latestOffset``: the reader preparing the batch, less
what prefetch hid; ``addBatch``: the foreachBatch call; ``walCommit`` / ``commitOffsets``), and inside addBatch the
mirror's call: ``foreachBatch(mirror)`` writes each table's part of a micro-batch in a Spark task (merge-on-read: an
append to the table's change log; folds as Spark jobs in the background), no row collected to the driver.

For comparison, ``embedded_no_jvm``: the same changes into a new DeltaMirror by an Instance in this process with
``run_batches(inst, None, mirror)`` -- no Spark, the mirror handed typed batches -- from the instance's start to the
last row applied, its store the Spark source's default (64 MB, larger than run_batches' 16 MB batches, as its
docstring advises). ``steady_embedded_ratio`` = ``steady_rows_per_s`` / ``embedded_rows_per_s``: what Spark's steady
micro-batches keep of the mirror's rate without a JVM.

Spark's own floor (``spark_floor_s``), in a new session after the run: an AvailableNow query of a simple reader that
returns one row, fetched with ``toArrow`` (:mod:`spark_floor`). ``whole_ceiling_rows_per_s`` = the run's rows over
those seconds: what the query could reach here if reading, encoding and merging cost nothing.

When the reader starts (``reader_start_s``): seconds from ``start()`` until Spark first asked the source for data --
the first micro-batch's offsets reached the checkpoint (the file's time) less that batch's ``latestOffset`` and
``walCommit``. Nothing can be decoded before: Spark starts the reader's process itself. ``decode_bound_rows_per_s`` =
the run's rows over ``reader_start_s`` plus the decode-only baseline's time for them: what the query could reach if
decoding began the moment the reader was asked and encoding, Spark's transfer and the MERGE cost nothing (decoding is
one thread: a binlog is one ordered stream).

The cluster (``--cluster``): the same query over the same binlog, after the local one, on a private standalone
cluster of a master and two one-core workers on this machine (:class:`canal.testing.services.SparkCluster`: each
worker in its own mount namespace, blind to the driver's temporary directory, as on another host; needs root), with
the source's defaults for that deployment -- ``spool.dir`` next to the checkpoint on the driver's host, so
``spool.shared`` is off and the driver sends each micro-batch's rows inside its task's partition -- and the mirror's
root in a directory every process sees (``/var/tmp``: a shared file system's stand-in; the local run's mirror is on
the same disk). Its driver is this process, in a new JVM, its executors registered before ``start()``.
``cluster_local_ratio`` = the cluster's ``steady_rows_per_s`` / local mode's (goal >= 0.7), with the cluster's
whole-run figure beside it; its micro-batches' costs under ``cluster`` in the JSON. The cluster, its JVMs and its
mirror are gone before the baselines run. ``--changes N`` runs a smaller workload (same proportions).

The rows' form (``--images``: the source's ``images`` option, default ``packed``, the form the Spark guide gives a
mirror): with ``packed`` the reader packs a typed batch of each instance batch into a few Spark rows of Arrow IPC
bytes (:mod:`canal.lake.forms.packed`), acked once packed, and the mirror's task unpacks them -- no change row crosses
the JVM; with ``variant`` the reader builds typed images straight from the decoded values and the mirror's tasks decode
them without text; ``json`` is the JSON-text form (the source's default, for consumers of a row per change). The
typed-batch figures: ``embedded_decode_ratio`` = embedded rows/s / decode-only rows/s (goal >= 0.8),
``steady_decode_ratio`` = steady rows/s / decode-only rows/s (>= 0.75), ``whole_bound_ratio`` = ``whole_rows_per_s``
/ ``decode_bound_rows_per_s`` (>= 0.75), and ``update_row_bytes``: the bytes per change row of a spool file of the
workload's first 1,000 UPDATE change rows, written by the reader's spool (LZ4-compressed Arrow IPC; packed, one
packed row; <= 700), with ``update_row_arrow_bytes`` beside it: the same rows' uncompressed Arrow bytes, what Spark
and the mirror's task hold. ``decode_encode`` then builds what the reader spools in that form.

The baseline decodes as a consumer that reads rows does: each row image a tuple of values. The embedded mirror and
the reader in a typed form (packed, variant) have their instance decode column by column
(:meth:`~canal.instance.Instance.decode_rows_by_column`), which costs about half as much a row, and so does
``decode_encode`` in those forms. The decode-only rate of that way (``columnar_decode_rows_per_s``) is beside the
figures, not their baseline: the ratios say what the main job keeps of the decoding every consumer gets.

Spark's transfer alone (``transfer``; :mod:`spark_transfer`), last, in a new session: the run's own change rows,
written to an Arrow IPC file beforehand (untimed), through a query of the same shape -- a reader on the executors,
``foreachBatch`` -> ``mapInArrow`` -> ``collect`` -- in micro-batches of the run's sizes, each task only counting its
rows. ``transfer_whole_rows_per_s`` / ``transfer_steady_rows_per_s``: what the query could reach here if decoding,
encoding and the mirror cost nothing. ``steady_transfer_ratio`` = ``steady_rows_per_s`` / the transfer's steady rate
(what the pipeline keeps of it); ``steady_decode_ceiling`` = the transfer's steady rate / decode-only rows/s and
``whole_bound_ceiling`` = its whole rate / ``decode_bound_rows_per_s``: the most ``steady_decode_ratio`` and
``whole_bound_ratio`` could be through Spark on this machine (a ceiling under 1 is Spark's, whatever pycanal does).

The machine's CPU (:mod:`machine_cpu`: every process's busy time, the server's too) per change row of each run:
``cpu_us_per_row_decode``, ``_decode_encode``, ``_embedded``, ``_spark`` (the local-mode query, from before its
``start()`` to its end) and ``_transfer``; with the cores busy on average under ``machine_cpu`` in the JSON. A
rate is bounded by the cores over that CPU.

Where the query's CPU went (``spark_cpu_s``: :class:`machine_cpu.ByProcess`, ``/proc`` sampled every 0.2 s): Spark's
JVM, the source's reader (the process Spark runs the streaming source in: decoding, typing, packing, spooling), the
Python workers (the mirror's tasks and folds, the source's read tasks), this process (the driver's Python: the
mirror's driver side) and the database; what no sample could attribute beside them (the sampling itself costs this
process about 2 ms of CPU a sample, 1% of a core, inside the timed run). Two ceilings of
``whole_bound_ratio`` on this machine follow, each ``decode_bound_rows_per_s``'s seconds over a least time for the
query: ``reader_path_ceiling`` -- ``reader_start_s`` plus the reader's CPU seconds (its work done on a core of its own,
everything after its last row free); ``cores_ceiling`` -- the query's busy CPU seconds over the cores (every core busy
every moment). The reader types and packs what it decodes, so its CPU exceeds the decode-only baseline's, and what
Spark's JVM and the mirror's tasks spend meanwhile has only the other core.

Into Kafka (``--kafka-only``: its own run, ``benchmarks/results/bench_spark_kafka.json``): the mirror's query as
above, then the same workload as canal's FlatMessages into a Kafka broker (``messages=canal`` ->
``writeStream.format("kafka")``, AvailableNow, each query in a Spark session of its own, started for it as the mirror
query's was), on 3,000,000 changes by default (``--changes``). Steady rates need a steady state: the source prepares
up to two micro-batches ahead while one runs, and with 1,000,000 changes the mirror's first micro-batch (7 s: the
table made, the JVMs' code compiled) left two of its four steady ones prepared -- its "steady" rate, 92,000 rows/s on
a quiet machine, was more than its own CPU (36 us of the machine's CPU a change) allows on two cores; with three times
the changes the prepared micro-batches are a small part of 24. ``kafka_rows_per_s`` / ``kafka_steady_rows_per_s``: the
query with the producer's settings the Spark guide gives canal's messages (``kafka.batch.size`` 512 KiB,
``kafka.linger.ms`` 20: :data:`KAFKA_BATCHED`; canal-server takes them from canal.properties), whole and after its
first micro-batch, in row changes a second; ``kafka_steady_ratio`` = its steady rate over the mirror query's (goal >=
0.8), ``kafka_whole_ratio`` its whole rate over the mirror query's. ``kafka_defaults_*``: the same with the producer's
defaults (run second; ``--kafka-defaults-first`` runs it first): batches of 16 KiB, less than most of the workload's
messages (a FlatMessage is a rows event's rows: some 12 KB here), so each goes alone in a produce request, which costs
Spark's JVM and the broker a request each. Each query's CPU by process (as ``spark_cpu_s``, the broker apart) is in
the JSON (``mirror_cpu_s``, ``kafka.cpu_s``, ``kafka_defaults.cpu_s``). It ends with ``RESULT kafka_rows_per_s=...
kafka_steady_rows_per_s=... kafka_steady_ratio=... kafka_whole_ratio=... kafka_defaults_steady_ratio=...
kafka_defaults_whole_ratio=... whole_rows_per_s=... steady_rows_per_s=...``.
``delta_current_ratio``: the mirrored table read back whole (a count and a sum, after a fold)
by Delta Lake's connector (``format("delta")``) over the time ``current_dataframe`` takes (``delta_read_back`` holds
both). These need the jars (``scripts/setup.sh`` with Maven): without them they are null, and ``--kafka-only`` stops.

Ends with ``RESULT whole_rows_per_s=... steady_rows_per_s=... encode_ratio=... spark_floor_s=...
whole_ceiling_rows_per_s=... reader_start_s=... decode_bound_rows_per_s=... columnar_decode_rows_per_s=...
embedded_rows_per_s=... steady_embedded_ratio=... embedded_decode_ratio=... steady_decode_ratio=...
whole_bound_ratio=... update_row_bytes=... update_row_arrow_bytes=... images=... transfer_whole_rows_per_s=...
transfer_steady_rows_per_s=... steady_transfer_ratio=... steady_decode_ceiling=... whole_bound_ceiling=...
cpu_us_per_row_decode=... cpu_us_per_row_decode_encode=... cpu_us_per_row_embedded=... cpu_us_per_row_spark=...
cpu_us_per_row_transfer=... reader_path_ceiling=... cores_ceiling=... spark_cpu_s_jvm=... spark_cpu_s_reader=...
spark_cpu_s_python_workers=... spark_cpu_s_driver=... spark_cpu_s_database=... spark_cpu_s_unattributed=...`` (with
``--cluster`` also ``cluster_local_ratio=... cluster_whole_rows_per_s=...
cluster_steady_rows_per_s=...``);
JSON in ``benchmarks/results/bench_spark.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Final

from machine_cpu import Busy, ByProcess
from result_file import write_result
from spark_floor import first_batch_s
from spark_transfer import transfer_run

TABLE_DDL = (
    "CREATE TABLE bench.t (id BIGINT PRIMARY KEY, qty INT NOT NULL, name VARCHAR(64), doc JSON, blob_ BLOB, "
    "at DATETIME(6), amount DECIMAL(12,2), state ENUM('new','paid','shipped','cancelled'), ratio DOUBLE, note TEXT)"
)
_STATES = ("new", "paid", "shipped", "cancelled")


def write_workload(conn: Any, inserts: int, updates: int, deletes: int, chunk: int = 1000) -> int:
    made = 0
    with conn.cursor() as cur:
        for base in range(0, inserts, chunk):
            rows = [
                (
                    i,
                    i % 1000,
                    f"customer-{i}",
                    json.dumps({"id": i, "tags": ["a", "b"], "address": {"city": f"c{i % 97}", "zip": i % 99999}}),
                    bytes((i + k) % 256 for k in range(200)),
                    f"2024-05-06 07:08:{i % 60:02d}.{i % 1000000:06d}",
                    f"{i % 10000}.{i % 100:02d}",
                    _STATES[i % 4],
                    i / 7,
                    f"a note about order {i}, " * 3,
                )
                for i in range(base, min(base + chunk, inserts))
            ]
            cur.executemany("INSERT INTO bench.t VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)", rows)
            made += len(rows)
        for base in range(0, updates, chunk):
            made += cur.execute(
                "UPDATE bench.t SET qty = qty + 1, state = 'paid', doc = JSON_SET(doc, '$.paid', true) "
                "WHERE id >= %s AND id < %s",
                (base, base + chunk),
            )
        for base in range(inserts - deletes, inserts, chunk):
            made += cur.execute("DELETE FROM bench.t WHERE id >= %s AND id < %s", (base, base + chunk))
    return made


def load_arrow() -> None:
    """Load what a PySpark worker has loaded before a reader's first batch: pyarrow, and what its first array loads."""
    import pyarrow as pa

    pa.array([0])


def instance_config(server: Any, start: tuple[str, int], **settings: Any) -> Any:
    """The in-process runs' instance: the benchmark's tables from ``start``, with ``settings`` (InstanceConfig's)."""
    from canal.config import InstanceConfig, MasterConfig

    master = MasterConfig(
        address=server.address,
        username=server.user,
        password=server.password,
        journal_name=start[0],
        position=start[1],
    )
    return InstanceConfig(destination="bench", master=master, filter_regex=r"bench\..*", **settings)


def entry_batches(
    server: Any, start: tuple[str, int], end: tuple[str, int], columnar: bool = False
) -> Iterator[Sequence[Any]]:
    """The entries an Instance in this process decodes from ``start``, batch by batch as they are there (up to 1,024
    entries, never waiting for a full batch), through the one that reaches ``end``; with ``columnar``, decoded
    column by column (:meth:`Instance.decode_rows_by_column`)."""
    from canal.config import StoreConfig
    from canal.instance import Instance
    from canal.position import journal_number

    cfg = instance_config(server, start, store=StoreConfig(buffer_size=16384, batch_mode="ITEMSIZE"))
    stop = (journal_number(end[0]), end[1])
    with Instance(cfg) as inst:
        inst.decode_rows_by_column(columnar)
        while True:
            entries = inst.get(1024, timeout=0.05).entries
            if not entries:
                continue
            yield entries
            last = entries[-1].header
            if (journal_number(last.log_file), last.next_offset) >= stop:
                return


def baseline(
    server: Any,
    start: tuple[str, int],
    end: tuple[str, int],
    *,
    encode: bool,
    images: str = "json",
    columnar: bool | None = None,
) -> dict[str, float]:
    """Decode the binlog (and, with ``encode``, turn it into change rows of the ``images`` form, as the reader
    spools them) in this process, no Spark. With ``encode``: also the bytes of UPDATE change rows per row
    (:func:`update_row_bytes`). Rows are decoded column by column with ``columnar``, by default when they are
    encoded in a typed form (as the reader decodes them then)."""
    from canal.protocol import EventType

    make = encoder(images)
    updates: list[Any] = []  # the first 1,000 UPDATE rows' entries: measured after the timed run
    update_rows = 0

    rows = 0
    began = time.perf_counter()
    by_column = encode and images != "json" if columnar is None else columnar
    for entries in entry_batches(server, start, end, by_column):
        if encode:
            rows += make(entries)[0]
            if update_rows < 1000:  # a pass over the entries only until they are found: this loop is timed
                for e in entries:
                    if e.row_change is not None and e.row_change.event_type is EventType.UPDATE:
                        updates.append(e)
                        update_rows += len(e.row_change.rows)
                        if update_rows >= 1000:
                            break
        else:
            rows += sum(len(e.row_change.rows) or 1 for e in entries if e.row_change is not None)
    seconds = time.perf_counter() - began
    out: dict[str, Any] = {"rows": rows, "seconds": round(seconds, 3), "rows_per_s": round(rows / seconds)}
    if updates:
        out.update(update_row_bytes(*make(updates)))
    return out


def decode_elsewhere(server: Any, start: tuple[str, int], end: tuple[str, int]) -> dict[str, float]:
    """:func:`baseline` (decode only) in a new Python process, as this one runs it (pyarrow loaded first)."""
    spec = {"address": server.address, "user": server.user, "password": server.password, "start": start, "end": end}
    done = subprocess.run(
        [sys.executable, __file__, "--decode-baseline"],
        input=json.dumps(spec),  # the password on stdin, not in a process list
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode:
        raise RuntimeError(f"the decode baseline's process failed: {done.stderr[-2000:]}")
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def decode_baseline_process() -> None:
    """The body of :func:`decode_elsewhere`'s process: the server and positions on stdin, the figures on stdout."""
    from types import SimpleNamespace

    spec = json.loads(sys.stdin.read())
    server = SimpleNamespace(address=spec["address"], user=spec["user"], password=spec["password"])
    load_arrow()
    print(json.dumps(baseline(server, tuple(spec["start"]), tuple(spec["end"]), encode=False)))


def both_sides(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    """The decode-only baseline of the runs before and after the query: the faster one's."""
    faster = max(before, after, key=lambda run: run["rows_per_s"])
    return {
        "rows": faster["rows"],
        "seconds": faster["seconds"],
        "rows_per_s": faster["rows_per_s"],
        "before_query": before,
        "after_query": after,
    }


def encoder(images: str) -> Callable[[list[Any]], tuple[int, Any]]:
    """What the reader makes of an instance batch's entries in the ``images`` form: ``(change rows, a record batch
    of them)`` -- with ``packed`` one packed row (:class:`canal.spark.packed_cut.PackedCut`)."""
    from canal.lake.forms.changes import entries_to_batch
    from canal.lake.forms.variant_changes import entries_to_variant_batch
    from canal.spark.packed_cut import PackedCut

    if images == "packed":

        def packed(entries: list[Any]) -> tuple[int, Any]:
            cut = PackedCut()
            rows = cut.add(entries, "bench", 1, 0)
            return rows, cut.packed().combine_chunks().to_batches()[0]

        return packed
    make = entries_to_variant_batch if images == "variant" else entries_to_batch

    def rows_of(entries: list[Any]) -> tuple[int, Any]:
        batch = make(entries, "bench", 1)
        return batch.num_rows, batch

    return rows_of


def update_row_bytes(changes: int, rows: Any) -> dict[str, int]:
    """``update_row_bytes``: the bytes per change row of a spool file of ``rows`` (``changes`` change rows: as many
    record-batch rows, or one packed row), written as the reader writes one (:class:`canal.spark.spool.Spool`);
    ``update_row_arrow_bytes``: their uncompressed Arrow bytes."""
    import pyarrow as pa

    from canal.spark.offsets import INITIAL_OFFSET
    from canal.spark.spool import Spool

    with tempfile.TemporaryDirectory(prefix="bench-spool-") as tmp:
        spool = Spool(tmp)
        spool.write(dict(INITIAL_OFFSET), {**INITIAL_OFFSET, "batch": 1}, rows)
        spooled = spool.path_for(dict(INITIAL_OFFSET)).stat().st_size
    return {
        "update_row_bytes": round(spooled / changes),
        "update_row_arrow_bytes": round(pa.ipc.get_record_batch_size(rows) / changes),
        "update_rows_measured": changes,
    }


def write_rows(server: Any, start: tuple[str, int], end: tuple[str, int], path: Path, images: str) -> list[int]:
    """The workload's change rows of the ``images`` form, as the reader makes them, into the Arrow IPC file ``path``
    (untimed: the transfer run's input). Uncompressed, unlike a spool file: each transfer task memory-maps the one
    file and slices its micro-batch's rows out of it, which would otherwise decompress every row. Returns the change
    rows of each row written (1, or a packed row's)."""
    import pyarrow as pa

    from canal.spark.source_options import rows_schema

    make = encoder(images)
    schema = rows_schema(images)
    written: list[int] = []
    with pa.ipc.new_file(str(path), schema) as out:
        for entries in entry_batches(server, start, end, images != "json"):
            changes, batch = make(entries)
            if changes:
                out.write_batch(batch)
                written.extend([changes] if images == "packed" else [1] * changes)
    return written


def grouped(written: list[int], batch_rows: list[int]) -> list[int]:
    """How many of the rows ``written`` (each holding that many change rows) make micro-batches of about
    ``batch_rows`` change rows each, in order (a packed row is not cut)."""
    groups: list[int] = []
    at = 0
    for want in batch_rows:
        taken = got = 0
        while at < len(written) and (got < want or not taken):
            got += written[at]
            taken += 1
            at += 1
        if taken:
            groups.append(taken)
    if at < len(written):
        groups.append(len(written) - at)
    return groups


def embedded(server: Any, start: tuple[str, int], work: Path, rows: int) -> dict[str, Any]:
    """The same changes into a new DeltaMirror with no JVM: an Instance in this process (its store the Spark
    source's default size), ``run_batches`` handing the mirror typed batches (``spark=None``), from the instance's
    start to the last row merged."""
    from canal.config import StoreConfig
    from canal.instance import Instance
    from canal.spark import DeltaMirror, run_batches
    from canal.spark.source_options import STORE_SIZE

    cfg = instance_config(server, start, store=StoreConfig(buffer_size=STORE_SIZE))
    began = time.perf_counter()
    mirror = DeltaMirror(work)
    with Instance(cfg) as inst:
        stats = run_batches(inst, None, mirror, until=lambda done: done.rows >= rows)
    seconds = time.perf_counter() - began
    mirror.close()  # folds still under way: off the stream's path, not in its time
    mirrored = mirror.read("bench", "t").num_rows
    return {
        "rows": stats.rows,
        "batches": stats.batches,
        "seconds": round(seconds, 3),
        "rows_per_s": round(stats.rows / seconds),
        "mirror_rows": mirrored,
    }


def stream(
    spark: Any,
    server: Any,
    start: tuple[str, int],
    work: Path,
    max_entries: int,
    buffer_size: int | None,
    options: dict[str, str],
    mirror_root: Path | None = None,
) -> dict[str, Any]:
    """One AvailableNow query from the workload's start into a new Delta mirror (in ``work``, or at
    ``mirror_root``), with the source's defaults but for ``options``: its timing, batches and progress."""
    from canal.spark import DeltaMirror

    mirror = DeltaMirror(mirror_root or work / "mirror")
    batches: list[dict[str, float]] = []

    def apply(df: Any, batch_id: int) -> None:  # foreachBatch(mirror), timed
        began = time.perf_counter()
        mirror(df, batch_id)
        result = mirror.history[-1]
        batches.append(
            {
                "batch_id": batch_id,
                "rows": result.rows,
                "mirror_s": time.perf_counter() - began,
                "prepare_s": result.prepare_s,
                "merge_s": result.merge_s,
                "folds": len(result.folds),
                "done_at": time.perf_counter(),
            }
        )

    options = {
        **options,
        "destination": "bench",
        "master.address": server.address,
        "master.user": server.user,
        "master.password": server.password,
        "master.journal.name": start[0],
        "master.position": str(start[1]),
        "filter.regex": r"bench\..*",
        "spool.dir": str(work / "checkpoint.canal-spool"),
        "max.entries": str(max_entries),
        **({} if buffer_size is None else {"canal.instance.memory.buffer.size": str(buffer_size)}),
    }
    began = time.perf_counter()
    began_wall = time.time()
    query = (
        spark.readStream.format("canal")
        .options(**options)
        .load()
        .writeStream.foreachBatch(apply)
        .option("checkpointLocation", str(work / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    if not query.awaitTermination(900):
        query.stop()
        raise RuntimeError("the AvailableNow query did not end within 900 s")
    ended = time.perf_counter()
    progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    # Spark writes a micro-batch's offsets to the checkpoint right after the source's latestOffset returned them
    first_offsets_s = (work / "checkpoint" / "offsets" / "0").stat().st_mtime - began_wall
    return {
        "began": began,
        "ended": ended,
        "batches": batches,
        "progress": progress,
        "mirror": mirror,
        "first_offsets_s": first_offsets_s,
    }


KAFKA_BATCHED: Final = {"kafka.batch.size": "524288", "kafka.linger.ms": "20"}
"""The producer's settings the Spark guide gives canal's messages (its MQ section): batches of up to 512 KiB."""

KAFKA_CHANGES: Final = 3_000_000
"""``--kafka-only``'s workload unless ``--changes``: long enough for steady rates (see the module docstring)."""


def kafka_stream(
    spark: Any,
    server: Any,
    start: tuple[str, int],
    work: Path,
    max_entries: int,
    buffer_size: int | None,
    kafka: Any,
    sink_options: dict[str, str] | None = None,
    name: str = "kafka",
) -> dict[str, Any]:
    """The same workload as canal's FlatMessages into Kafka (``messages=canal`` -> ``writeStream.format("kafka")``,
    AvailableNow, one topic of one partition; ``sink_options`` the sink's, Spark's defaults but for them): whole and
    steady rates in row changes a second, counted from the micro-batches' end offsets (a message holds a rows
    event's rows). ``name``: its topic's, spool's and checkpoint's."""
    from canal.spark import micro_batch_changes

    topic = "bench" if name == "kafka" else f"bench-{name}"
    kafka.create_topic(topic, partitions=1)
    options = {
        "destination": f"bench-{name}",
        "master.address": server.address,
        "master.user": server.user,
        "master.password": server.password,
        "master.journal.name": start[0],
        "master.position": str(start[1]),
        "filter.regex": r"bench\..*",
        "spool.dir": str(work / f"{name}.canal-spool"),
        "max.entries": str(max_entries),
        "messages": "canal",
        "canal.mq.topic": topic,
        **({} if buffer_size is None else {"canal.instance.memory.buffer.size": str(buffer_size)}),
    }
    began = time.perf_counter()
    began_wall = time.time()
    query = (
        spark.readStream.format("canal")
        .options(**options)
        .load()
        .writeStream.format("kafka")
        .options(**(sink_options or {}))
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("checkpointLocation", str(work / f"{name}.checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    if not query.awaitTermination(900):
        query.stop()
        raise RuntimeError("the AvailableNow Kafka query did not end within 900 s")
    whole_s = time.perf_counter() - began
    ends, rows = [], []
    for progress in query.recentProgress:
        counted = sum(
            v
            for changes in micro_batch_changes(progress)  # one per canal source: this query has one
            for k, v in changes.changes.items()
            if k in ("INSERT", "UPDATE", "DELETE")
        )
        if not counted:
            continue
        started = dt.datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()
        ends.append(started + progress["durationMs"].get("triggerExecution", 0) / 1000)
        rows.append(counted)
    steady_s = ends[-1] - ends[0] if len(ends) > 1 else 0.0
    return {
        "sink_options": sink_options or {},
        "micro_batches": len(rows),
        "rows": sum(rows),
        "whole_s": round(whole_s, 3),
        "whole_rows_per_s": round(sum(rows) / whole_s),
        "first_batch_s": round(ends[0] - began_wall, 3) if ends else None,
        "steady_rows": sum(rows[1:]),
        "steady_s": round(steady_s, 3),
        "steady_rows_per_s": round(sum(rows[1:]) / steady_s) if steady_s > 0 else None,
    }


def delta_read_back(spark: Any, mirror: Any) -> dict[str, Any]:
    """The mirrored table read back whole by Delta Lake's connector (``format("delta")``, after a fold: the current
    state) and by ``current_dataframe`` (the base and its change log, no Delta jar), each a count and a sum over
    every row, best of two."""
    from pyspark.sql import functions as F

    from canal.spark import current_dataframe

    mirror.fold()
    path = str(mirror.table_location("bench", "t"))

    def timed(make: Any) -> tuple[float, int]:
        best, rows = float("inf"), 0
        for _ in range(2):
            t = time.perf_counter()
            rows, _qty = make().agg(F.count(F.lit(1)), F.sum("qty")).collect()[0]
            best = min(best, time.perf_counter() - t)
        return best, int(rows)

    delta_s, delta_rows = timed(lambda: spark.read.format("delta").load(path))
    current_s, current_rows = timed(lambda: current_dataframe(spark, path))
    if delta_rows != current_rows:
        raise RuntimeError(f"Delta's connector read {delta_rows} rows, current_dataframe {current_rows}")
    return {
        "rows": delta_rows,
        "delta_read_s": round(delta_s, 3),
        "current_dataframe_s": round(current_s, 3),
        "delta_current_ratio": round(delta_s / current_s, 3),
    }


def figures(run_: dict[str, Any]) -> dict[str, Any]:
    """A query's headline (from ``start()`` until it ended), its steady micro-batches (the first left out) and each
    micro-batch's costs."""
    batches = run_["batches"]
    total_rows = sum(b["rows"] for b in batches)
    whole_s = run_["ended"] - run_["began"]
    steady = batches[1:]
    steady_rows = sum(b["rows"] for b in steady)
    steady_s = batches[-1]["done_at"] - batches[0]["done_at"] if steady else 0.0
    by_id = {int(p["batchId"]): p for p in run_["progress"]}
    return {
        "micro_batches": len(batches),
        "rows": total_rows,
        "whole_s": round(whole_s, 3),
        "whole_rows_per_s": round(total_rows / whole_s),
        "first_batch_s": round(batches[0]["done_at"] - run_["began"], 3),
        "steady_rows": steady_rows,
        "steady_s": round(steady_s, 3),
        "steady_rows_per_s": round(steady_rows / steady_s) if steady_s > 0 else None,
        "batches": [
            {
                "batch_id": int(b["batch_id"]),
                "rows": int(b["rows"]),
                "mirror_s": round(b["mirror_s"], 3),
                "mirror_prepare_s": round(b["prepare_s"], 3),
                "mirror_write_s": round(b["merge_s"], 3),
                "folds_started": b["folds"],
                "duration_ms": by_id.get(int(b["batch_id"]), {}).get("durationMs", {}),
            }
            for b in batches
        ],
    }


def cluster_stream(
    server: Any,
    start: tuple[str, int],
    work: Path,
    max_entries: int,
    buffer_size: int | None,
    expected: int,
    images: str = "json",
) -> dict[str, Any]:
    """The same query on a private two-worker standalone cluster (:class:`~canal.testing.services.SparkCluster`:
    each worker in its own mount namespace, blind to the driver's temporary directory) with the source's defaults
    for that deployment: ``spool.dir`` next to the checkpoint on the driver's host, so ``spool.shared`` is off and
    the rows reach the tasks through Spark; the mirror's root in a directory every process sees (outside the
    temporary directory the workers cannot see), as a shared file system is. The driver is this process, in a new
    JVM (the local session's has ended); its executors have registered before the query starts, as a user's job
    has its session. Every server and JVM started here is stopped before it returns."""
    import os
    import shutil
    import uuid

    from pyspark.sql import SparkSession

    from canal.spark import register
    from canal.spark.testing import stop_spark
    from canal.testing.services import SparkCluster

    shared = Path("/var/tmp") / f"bench-spark-cluster-{uuid.uuid4().hex}"
    try:
        with SparkCluster() as cluster:
            print(f"cluster: master and two workers ready in {cluster.ready_seconds:.1f} s", flush=True)
            os.environ.update(cluster.driver_env())
            builder = SparkSession.builder.appName("pycanal-bench-cluster")
            # the local session's settings (local_spark) where the cluster's do not say otherwise
            same = {"spark.sql.execution.arrow.pyspark.enabled": "true", "spark.sql.streaming.stopTimeout": "30s"}
            for key, value in {**cluster.driver_conf(), **same, **spark_conf(None)}.items():
                builder = builder.config(key, value)
            spark = builder.getOrCreate()
            spark.sparkContext.setLogLevel("ERROR")
            try:
                wait_for_executors(spark, len(cluster.workers))
                register(spark)
                options = {"images": images}
                run_ = stream(
                    spark, server, start, work, max_entries, buffer_size, options, mirror_root=shared / "mirror"
                )
                run_["mirror"].close()
                mirrored = run_["mirror"].read("bench", "t").num_rows
            finally:
                stop_spark(spark)
    finally:
        shutil.rmtree(shared, ignore_errors=True)
    if mirrored != expected:
        raise RuntimeError(f"the cluster's mirror has {mirrored} rows, the source {expected}")
    return {**figures(run_), "mirror_rows": mirrored}


def wait_for_executors(spark: Any, executors: int, timeout_s: float = 120.0) -> None:
    """Wait until ``executors`` executors have registered with the driver (polling Spark, with a deadline)."""
    status = spark.sparkContext._jsc.sc().getExecutorMemoryStatus
    deadline = time.monotonic() + timeout_s
    while status().size() < executors + 1:  # the driver's block manager is listed too
        if time.monotonic() > deadline:
            raise RuntimeError(f"{executors} executors did not register within {timeout_s:.0f} s")
        time.sleep(0.1)


def run(
    inserts: int,
    updates: int,
    deletes: int,
    max_entries: int,
    buffer_size: int | None,
    driver_memory: str | None,
    *,
    spool_shared: bool,
    cluster: bool,
    images: str = "json",
    kafka_only: bool = False,
    kafka_defaults_first: bool = False,
) -> dict[str, Any]:
    from canal.spark import register
    from canal.spark.testing import local_spark, master_position, stop_spark
    from canal.testing import jars
    from canal.testing.services import MariaDBServer

    with_jars = jars.skip_reason() is None  # Delta's and Kafka's connectors, a Kafka broker: scripts/setup.sh
    if kafka_only and not with_jars:
        raise RuntimeError(f"--kafka-only needs the Kafka jars: {jars.skip_reason()}")
    read_back: dict[str, Any] | None = None

    expected = inserts - deletes
    with MariaDBServer(server_id=1) as server, tempfile.TemporaryDirectory(prefix="bench-spark-") as tmp:
        work = Path(tmp)
        conn = server.connect()
        start = master_position(conn)
        server.execute("CREATE DATABASE bench")
        server.execute(TABLE_DDL)
        t0 = time.perf_counter()
        changes = write_workload(conn, inserts, updates, deletes)
        end = master_position(conn)
        binlog_mb = (end[1] - start[1]) / 1e6 if end[0] == start[0] else None
        print(f"workload: {changes} row changes written in {time.perf_counter() - t0:.1f} s; binlog to {end}")
        if not kafka_only:
            decode_before = decode_elsewhere(server, start, end)
            print(f"baseline decode, before the query (a new process): {decode_before['rows_per_s']:,} rows/s")

        # the query first: its driver has run nothing of the pipeline before (as a user's has not)
        spark = local_spark("pycanal-bench", extra=spark_conf(driver_memory))
        spark.sparkContext.setLogLevel("ERROR")
        # the source's default in a local-mode session is spool.shared=true; --driver-rows turns it off
        local_options = {"images": images} if spool_shared else {"spool.shared": "false", "images": images}
        try:
            register(spark)
            with ByProcess() as spark_parts:
                run_ = stream(spark, server, start, work / "run", max_entries, buffer_size, local_options)
            run_["mirror"].close()  # the folds under way (Spark jobs) end before the session does
            if with_jars and not kafka_only:
                read_back = delta_read_back(spark, run_["mirror"])
                print(
                    f"read back: Delta's connector {read_back['delta_read_s']} s, current_dataframe "
                    f"{read_back['current_dataframe_s']} s",
                    flush=True,
                )
        finally:
            stop_spark(spark)
        spark_cpu = spark_parts.busy
        local = figures(run_)
        print(f"local mode: {local['whole_rows_per_s']:,} rows/s, steady {local['steady_rows_per_s']}", flush=True)
        if kafka_only:
            kafkas = kafka_queries(server, start, work, max_entries, buffer_size, driver_memory, kafka_defaults_first)
            return kafka_figures(local, kafkas, spark_parts.cpu_s)
        on_cluster = None
        if cluster:
            on_cluster = cluster_stream(server, start, work / "cluster", max_entries, buffer_size, expected, images)
            print(
                f"cluster: {on_cluster['whole_rows_per_s']:,} rows/s, steady {on_cluster['steady_rows_per_s']}",
                flush=True,
            )
        # Spark's own floor, in a new session: an AvailableNow query of a simple reader with one row, its batch
        # fetched with toArrow as DeltaMirror fetches it (spark_floor)
        spark = local_spark("pycanal-bench-floor", extra=spark_conf(driver_memory))
        spark.sparkContext.setLogLevel("ERROR")
        try:
            floor_s = first_batch_s(spark, lambda df: df.toArrow(), simple=True, available_now=True)
        finally:
            stop_spark(spark)
        print(f"Spark's floor (first micro-batch of a one-row source): {floor_s:.2f} s", flush=True)

        load_arrow()
        with Busy() as decode_cpu:
            decode_after = baseline(server, start, end, encode=False)
        decode = both_sides(decode_before, decode_after)
        print(f"baseline decode, after the query: {decode_after['rows_per_s']:,} rows/s", flush=True)
        decode_columns = baseline(server, start, end, encode=False, columnar=True)
        print(f"decode column by column (not a baseline): {decode_columns['rows_per_s']:,} rows/s", flush=True)
        with Busy() as decode_encode_cpu:
            decode_encode = baseline(server, start, end, encode=True, images=images)
        print(f"baseline decode + encode: {decode_encode['rows_per_s']:,} rows/s", flush=True)
        with Busy() as embedded_cpu:
            no_jvm = embedded(server, start, work / "embedded", int(decode["rows"]))
        print(f"embedded, no JVM (run_batches into DeltaMirror): {no_jvm['rows_per_s']:,} rows/s", flush=True)
        mirrored = run_["mirror"].read("bench", "t").num_rows
        # Spark's transfer alone, in a new session: the run's own change rows in micro-batches of its sizes
        from canal.spark.source_options import rows_schema_ddl

        rows_path = work / "rows.arrow"
        written = write_rows(server, start, end, rows_path, images)
        micro_batches = [b["rows"] for b in local["batches"]]
        spark = local_spark("pycanal-bench-transfer", extra=spark_conf(driver_memory))
        spark.sparkContext.setLogLevel("ERROR")
        try:
            with Busy() as transfer_cpu:
                transfer = transfer_run(
                    spark,
                    str(rows_path),
                    rows_schema_ddl(images),
                    grouped(written, micro_batches) if images == "packed" else micro_batches,
                    counted_by="rows" if images == "packed" else None,
                )
        finally:
            stop_spark(spark)
        rows_path.unlink()
        print(
            f"Spark's transfer alone: {transfer['whole_rows_per_s']:,} rows/s, steady {transfer['steady_rows_per_s']}",
            flush=True,
        )
        if mirrored != expected or no_jvm["mirror_rows"] != expected:
            raise RuntimeError(f"mirrors have {mirrored} and {no_jvm['mirror_rows']} rows, source {expected}")

    total_rows = local["rows"]
    steady_s = local["steady_s"]
    by_id = {int(p["batchId"]): p for p in run_["progress"]}
    first_ms = by_id.get(int(run_["batches"][0]["batch_id"]), {}).get("durationMs", {})
    reader_start_s = run_["first_offsets_s"] - (first_ms.get("latestOffset", 0) + first_ms.get("walCommit", 0)) / 1000
    decode_bound_s = reader_start_s + total_rows / decode["rows_per_s"]
    out: dict[str, Any] = {
        "benchmark": "bench_spark",
        "workload": {
            "inserts": inserts,
            "updates": updates,
            "deletes": deletes,
            "changes": changes,
            "columns": "id BIGINT, qty INT, name VARCHAR, doc JSON, blob_ BLOB(200 B), at DATETIME(6), "
            "amount DECIMAL(12,2), state ENUM, ratio DOUBLE, note TEXT",
            "binlog_mb": None if binlog_mb is None else round(binlog_mb, 1),
        },
        "trigger": "AvailableNow",
        "max_entries": max_entries,
        "buffer_size": buffer_size,
        "spool_shared": spool_shared,
        "driver_memory": driver_memory,
        **{k: v for k, v in local.items() if k != "batches"},
        "spark_floor_s": round(floor_s, 3),
        "whole_ceiling_rows_per_s": round(total_rows / floor_s),
        "reader_start_s": round(reader_start_s, 3),
        "decode_bound_rows_per_s": round(total_rows / decode_bound_s),
        "baseline_decode": decode,
        "columnar_decode_rows_per_s": decode_columns["rows_per_s"],
        "baseline_decode_encode": decode_encode,
        "encode_ratio": round(decode_encode["rows_per_s"] / decode["rows_per_s"], 3),
        "images": images,
        "update_row_bytes": decode_encode.get("update_row_bytes"),
        "update_row_arrow_bytes": decode_encode.get("update_row_arrow_bytes"),
        "embedded_no_jvm": no_jvm,
        "embedded_decode_ratio": round(no_jvm["rows_per_s"] / decode["rows_per_s"], 3),
        "steady_decode_ratio": round(local["steady_rows"] / steady_s / decode["rows_per_s"], 3)
        if steady_s > 0
        else None,
        "whole_bound_ratio": round(local["whole_rows_per_s"] / (total_rows / decode_bound_s), 3),
        "steady_embedded_ratio": round(local["steady_rows"] / steady_s / no_jvm["rows_per_s"], 3)
        if steady_s > 0
        else None,
        "transfer": transfer,
        "transfer_whole_rows_per_s": transfer["whole_rows_per_s"],
        "transfer_steady_rows_per_s": transfer["steady_rows_per_s"],
        "steady_transfer_ratio": round(local["steady_rows"] / steady_s / transfer["steady_rows_per_s"], 3)
        if steady_s > 0 and transfer["steady_rows_per_s"]
        else None,
        "steady_decode_ceiling": round(transfer["steady_rows_per_s"] / decode["rows_per_s"], 3)
        if transfer["steady_rows_per_s"]
        else None,
        "whole_bound_ceiling": round(transfer["whole_rows_per_s"] / (total_rows / decode_bound_s), 3),
        "mirror_rows": mirrored,
        "delta_read_back": read_back,
        "delta_current_ratio": None if read_back is None else read_back["delta_current_ratio"],
        "batches": local["batches"],
    }
    # the whole machine's CPU per row, every process counted (machine_cpu): what bounds a rate on two cores
    cpu = {
        "decode": decode_cpu.figures(total_rows),
        "decode_encode": decode_encode_cpu.figures(total_rows),
        "embedded": embedded_cpu.figures(total_rows),
        "spark": spark_cpu.figures(total_rows),
        "transfer": transfer_cpu.figures(total_rows),
    }
    cores = os.cpu_count() or 1
    out["machine_cpu"] = {**cpu, "cores": cores}
    # where the query's CPU went, and the whole_bound_ratio it leaves room for on this machine (see the docstring)
    out["spark_cpu_s"] = spark_parts.cpu_s
    out["reader_path_ceiling"] = round(decode_bound_s / (reader_start_s + spark_parts.cpu_s["reader"]), 3)
    out["cores_ceiling"] = round(decode_bound_s / (spark_cpu.cpu_s / cores), 3)
    for name, figs in cpu.items():
        out[f"cpu_us_per_row_{name}"] = figs["cpu_us_per_row"]
    goals = {
        "whole_rows_per_s": ">= 45000",
        "steady_rows_per_s": ">= 60000",
        "encode_ratio": ">= 0.6",
        "steady_embedded_ratio": ">= 0.8",
        "embedded_decode_ratio": ">= 0.8",
        "steady_decode_ratio": ">= 0.75",
        "whole_bound_ratio": ">= 0.75",
        "update_row_bytes": "<= 700",
    }
    if on_cluster is not None:
        ratio = None
        if on_cluster["steady_rows_per_s"] and local["steady_rows_per_s"]:
            ratio = round(on_cluster["steady_rows_per_s"] / local["steady_rows_per_s"], 3)
        out["cluster"] = on_cluster
        out["cluster_whole_rows_per_s"] = on_cluster["whole_rows_per_s"]
        out["cluster_steady_rows_per_s"] = on_cluster["steady_rows_per_s"]
        out["cluster_local_ratio"] = ratio
        goals["cluster_local_ratio"] = ">= 0.7"
    out["goals"] = goals
    return out


def kafka_queries(
    server: Any,
    start: tuple[str, int],
    work: Path,
    max_entries: int,
    buffer_size: int | None,
    driver_memory: str | None,
    defaults_first: bool,
) -> dict[str, dict[str, Any]]:
    """The Kafka queries (:func:`kafka_stream`) into one broker: the guide's producer settings (``kafka``), then the
    producer's defaults (``defaults``), each in a Spark session of its own, started for it as the mirror query's was
    (its JVM and reader have run nothing before), with its CPU by process."""
    from canal.spark import register
    from canal.spark.testing import local_spark, stop_spark
    from canal.testing.services import KafkaServer

    queries = [("kafka", KAFKA_BATCHED), ("defaults", None)]
    kafkas: dict[str, dict[str, Any]] = {}
    kafka = KafkaServer().start()
    try:
        for name, sink_options in queries[::-1] if defaults_first else queries:
            spark = local_spark(f"pycanal-bench-{name}", extra=spark_conf(driver_memory))
            spark.sparkContext.setLogLevel("ERROR")
            try:
                register(spark)
                with ByProcess() as parts:
                    made = kafka_stream(spark, server, start, work, max_entries, buffer_size, kafka, sink_options, name)
            finally:
                stop_spark(spark)
            kafkas[name] = {**made, "cpu_s": parts.cpu_s}
            print(f"into Kafka ({name}): {made['whole_rows_per_s']:,} rows/s, steady {made['steady_rows_per_s']}")
    finally:
        kafka.stop()
    return kafkas


def kafka_figures(
    local: dict[str, Any], kafkas: dict[str, dict[str, Any]], mirror_cpu_s: dict[str, float]
) -> dict[str, Any]:
    """``--kafka-only``'s figures: the mirror query's and the Kafka queries' rates, their ratios to the mirror
    query's, each query's CPU by process (:class:`machine_cpu.ByProcess`) and the goal."""
    out: dict[str, Any] = {
        "benchmark": "bench_spark --kafka-only",
        "rows": local["rows"],
        "micro_batches": local["micro_batches"],
        "whole_rows_per_s": local["whole_rows_per_s"],
        "steady_rows_per_s": local["steady_rows_per_s"],
        "first_batch_s": local["first_batch_s"],
        "mirror_cpu_s": mirror_cpu_s,
    }
    for name, prefix in (("kafka", "kafka"), ("defaults", "kafka_defaults")):
        made = kafkas[name]
        whole, steady = made["whole_rows_per_s"], made["steady_rows_per_s"]
        out[prefix] = made
        out[f"{prefix}_rows_per_s"] = whole
        out[f"{prefix}_steady_rows_per_s"] = steady
        out[f"{prefix}_steady_ratio"] = (
            round(steady / local["steady_rows_per_s"], 3) if steady and local["steady_rows_per_s"] else None
        )
        out[f"{prefix}_whole_ratio"] = round(whole / local["whole_rows_per_s"], 3)
    out["goals"] = {"kafka_steady_ratio": ">= 0.8"}
    return out


def spark_conf(driver_memory: str | None) -> dict[str, str]:
    # the JVMs' own defaults, as a user's job has them (the test helpers' sessions and cluster trade the optimizing
    # compiler for less CPU on short test jobs)
    conf = {
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.extraJavaOptions": "",
        "spark.executor.extraJavaOptions": "",
    }
    if driver_memory is not None:
        conf["spark.driver.memory"] = driver_memory
    return conf


def workload_sizes(changes: int) -> tuple[int, int, int]:
    """Inserts, updates and deletes of ``changes`` row changes in the default run's proportions (60/25/15), each a
    whole number of 1,000-row statements."""
    thousands = max(changes // 1000, 4)
    updates, deletes = thousands // 4, max(thousands * 3 // 20, 1)
    return (thousands - updates - deletes) * 1000, updates * 1000, deletes * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # seven or eight micro-batches after the first (each up to the 64 MB store the source uses): with half as many
    # changes, three steady micro-batches made the steady rates swing with which of them a fold overlapped (the
    # cluster's over local mode's 0.54 and 0.78 in two runs of the same code)
    parser.add_argument("--inserts", type=int, default=600_000)
    parser.add_argument("--updates", type=int, default=250_000)
    parser.add_argument("--deletes", type=int, default=150_000)
    parser.add_argument(
        "--changes",
        type=int,
        help="row changes in all, split 60/25/15 into inserts, updates and deletes (instead of those three)",
    )
    parser.add_argument(
        "--max-entries", type=int, default=50_000, help="binlog entries per micro-batch (the source's default)"
    )
    parser.add_argument(
        "--buffer-size",
        type=int,
        help="the instance store's size (canal.instance.memory.buffer.size; default the source's, 65536)",
    )
    parser.add_argument(
        "--driver-rows",
        action="store_true",
        help="leave spool.shared off: the driver reads the rows and sends them inside the tasks' partitions",
    )
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="also run the query on a private two-worker standalone cluster (cluster_local_ratio)",
    )
    parser.add_argument("--driver-memory", help="spark.driver.memory (default Spark's, 1g)")
    parser.add_argument(
        "--images",
        choices=("json", "variant", "packed"),
        default="packed",
        help="the source's images option (the rows' form)",
    )
    parser.add_argument(
        "--kafka-only",
        action="store_true",
        help="run the mirror's query and the Kafka queries after it (kafka_steady_ratio; 3,000,000 changes unless "
        "--changes): results/bench_spark_kafka.json",
    )
    parser.add_argument(
        "--kafka-defaults-first",
        action="store_true",
        help="run the Kafka query with the producer's defaults before the one with the guide's settings",
    )
    parser.add_argument("--decode-baseline", action="store_true", help=argparse.SUPPRESS)  # decode_elsewhere's
    args = parser.parse_args(argv)
    if args.decode_baseline:
        decode_baseline_process()
        return 0
    inserts, updates, deletes = args.inserts, args.updates, args.deletes
    if args.changes is not None or args.kafka_only:
        inserts, updates, deletes = workload_sizes(args.changes or KAFKA_CHANGES)
    out = run(
        inserts,
        updates,
        deletes,
        args.max_entries,
        args.buffer_size,
        args.driver_memory,
        spool_shared=not args.driver_rows,
        cluster=args.cluster,
        images=args.images,
        kafka_only=args.kafka_only,
        kafka_defaults_first=args.kafka_defaults_first,
    )
    print(json.dumps(out, indent=2))
    if args.kafka_only:
        write_result("bench_spark_kafka", out)
        print(
            "RESULT "
            + " ".join(
                f"{key}={out[key]}"
                for key in (
                    "kafka_rows_per_s",
                    "kafka_steady_rows_per_s",
                    "kafka_steady_ratio",
                    "kafka_whole_ratio",
                    "kafka_defaults_steady_ratio",
                    "kafka_defaults_whole_ratio",
                    "whole_rows_per_s",
                    "steady_rows_per_s",
                )
            )
        )
        return 0
    write_result("bench_spark", out)
    cluster = ""
    if "cluster" in out:
        cluster = (
            f" cluster_local_ratio={out['cluster_local_ratio']} "
            f"cluster_whole_rows_per_s={out['cluster_whole_rows_per_s']} "
            f"cluster_steady_rows_per_s={out['cluster_steady_rows_per_s']}"
        )
    print(
        f"RESULT whole_rows_per_s={out['whole_rows_per_s']} steady_rows_per_s={out['steady_rows_per_s']} "
        f"encode_ratio={out['encode_ratio']} spark_floor_s={out['spark_floor_s']} "
        f"whole_ceiling_rows_per_s={out['whole_ceiling_rows_per_s']} reader_start_s={out['reader_start_s']} "
        f"decode_bound_rows_per_s={out['decode_bound_rows_per_s']} "
        f"columnar_decode_rows_per_s={out['columnar_decode_rows_per_s']} "
        f"embedded_rows_per_s={out['embedded_no_jvm']['rows_per_s']} "
        f"steady_embedded_ratio={out['steady_embedded_ratio']} embedded_decode_ratio={out['embedded_decode_ratio']} "
        f"steady_decode_ratio={out['steady_decode_ratio']} whole_bound_ratio={out['whole_bound_ratio']} "
        f"update_row_bytes={out['update_row_bytes']} update_row_arrow_bytes={out['update_row_arrow_bytes']} "
        f"images={out['images']} "
        f"transfer_whole_rows_per_s={out['transfer_whole_rows_per_s']} "
        f"transfer_steady_rows_per_s={out['transfer_steady_rows_per_s']} "
        f"steady_transfer_ratio={out['steady_transfer_ratio']} steady_decode_ceiling={out['steady_decode_ceiling']} "
        f"whole_bound_ceiling={out['whole_bound_ceiling']} "
        f"delta_current_ratio={out['delta_current_ratio']} "
        f"cpu_us_per_row_decode={out['cpu_us_per_row_decode']} "
        f"cpu_us_per_row_decode_encode={out['cpu_us_per_row_decode_encode']} "
        f"cpu_us_per_row_embedded={out['cpu_us_per_row_embedded']} cpu_us_per_row_spark={out['cpu_us_per_row_spark']} "
        f"cpu_us_per_row_transfer={out['cpu_us_per_row_transfer']} "
        f"reader_path_ceiling={out['reader_path_ceiling']} cores_ceiling={out['cores_ceiling']} "
        + " ".join(f"spark_cpu_s_{part}={seconds}" for part, seconds in out["spark_cpu_s"].items())
        + cluster
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
