"""The ``canal`` PySpark streaming data source.

```python
canal.spark.register(spark)
changes = (spark.readStream.format("canal")
           .option("master.address", "127.0.0.1:3306").option("master.user", "canal")
           .option("master.password", "canal").option("destination", "shop")
           .option("filter.regex", r"shop\\..*").option("spool.dir", checkpoint + ".canal-spool")
           .load())
changes.writeStream.foreachBatch(DeltaMirror(root)).option("checkpointLocation", checkpoint).start()
```

Options (strings, as Spark passes them) are declared, with their defaults, in :mod:`canal.spark.options`:
``properties`` (path to an ``instance.properties``) and/or short names of its keys (``master.address``, ...); any
``canal.*`` / ``pycanal.*`` key is passed through as a properties key. ``maxRowsPerTrigger`` (change rows) and
``maxBytesPerTrigger`` (binlog bytes) cap a micro-batch, as for Spark's Kafka source; a micro-batch holds whole binlog
events, at least one. The source applies them itself (PySpark passes read limits only to a
``DataSourceStreamReader``).

Where the rows reach Spark. The reader is a ``DataSourceStreamReader`` (:mod:`canal.spark.datasource`) whose input
partitions carry a micro-batch's rows to its task. By default the planner, on the driver beside the spool, reads the
batch's spool file and puts its rows in the partition (:class:`~canal.spark.spool.InlineRows`: LZ4-compressed Arrow
IPC), so no executor needs ``spool.dir``. With ``spool.shared=true`` -- ``spool.dir`` reachable from every executor
at the same path: one machine, a shared file system, an object store; the default when :func:`canal.spark.register`
was given a local-mode session or ``spool.dir`` is in an object store -- the partition names the spool file
(:class:`SpooledRows`), and the task memory-maps it: the rows skip the driver.

How it runs. Spark calls the reader in a long-lived ``python_streaming_source_runner`` process; the embedded
:class:`~canal.instance.Instance` is created there on the first ``read`` and kept in a module-level dict keyed by the
options (:mod:`canal.spark.sessions`). ``read(start)`` (and ``latestOffset``, :meth:`CanalStreamReader.latest`,
which Spark calls) pulls entries (``get_without_ack``) up to the caps, writes the batch's rows *and* end
offset to the spool file named by ``start`` (Arrow IPC, written atomically), acks the instance batches it holds,
then returns them. An instance batch a cap cuts carries its rest into the next micro-batch and is acked with that
one. ``commit(end)`` deletes the spool files up to ``end``. With ``prefetch``, as soon as ``read`` returns, a thread
prepares the batch after it: it takes entries as the instance decodes them, turning them into change rows as they
come, until the next ``read`` ends the batch (or a cap does) -- so decoding and encoding overlap Spark's work on
the current batch, and a micro-batch holds what arrived meanwhile, not only what the instance held when it began.

Why ack at the spool, not at ``commit``: Spark asks for micro-batch N+1 (``latestOffset``) before it commits N, so
if the instance's store kept N's entries until the commit, N and N+1 together could hold no more than the store
(``canal.instance.memory.buffer.size``), and a store full of N would end a ``Trigger.AvailableNow`` run at N+1
as if nothing were left. Once spooled, N is replayed from the spool and nothing needs the store's copy. The
instance's saved cursor therefore stands at the end of what is spooled: a query restarted with its checkpoint
resumes exactly (the checkpoint names where, the spool holds what Spark planned), while a query started with a new
checkpoint starts after the spooled batches, including one Spark may not have committed.

Exactly-once replay. The Spark checkpoint is the authority on positions: whenever ``read(start)`` finds the instance
somewhere other than ``start`` (a new runner process, a restart), it restarts the instance at the cursor ``start``
names (row-exact inside a transaction). A batch Spark planned but did not commit is replayed from the spool --
``readBetweenOffsets(start, end)`` and a repeated ``read(start)`` both return exactly the spooled rows and end offset,
so a replay never depends on how the binlog happens to be cut into batches the second time. The planner reads a
replayed micro-batch's rows from the spool like any other's (:meth:`CanalStreamReader.partition_values`), so without
``spool.shared`` executors never need the driver's ``spool.dir``.

Trigger.AvailableNow: ``prepareForTriggerAvailableNow`` records the master's current binlog position; reads stop at
the first entry past it. Spark ends the run at the first read that brings nothing, so an empty read waits while the
parser has not read up to that position (:attr:`canal.parse.parser.EventParser.read_position`).

Snapshots on executors. With ``pycanal.snapshot.mode=initial``, the reader process reads the snapshot's rows itself
(the instance's snapshot, :mod:`canal.snapshot`). With ``snapshot.partitions`` (ranges per micro-batch, at most 512)
the source instead plans each table's key ranges of ``snapshot.partition.rows`` rows (default 100000) on the driver and
executors read them, each over its own connection at its own consistent-snapshot position (MariaDB's; with
``pycanal.snapshot.watermark.table``, after a watermark it commits: MySQL), so an initial load scales
with executors (:mod:`canal.spark.chunks` says why the mirror still ends equal, and what the driver's snapshot gives
that this does not). The reader is then a ``DataSourceStreamReader`` (``spool.shared`` is implied): a micro-batch's
binlog rows are read from the spool by a task, and each range's rows are spooled by the executor that reads them,
under ``spool.dir`` -- which must then be reachable from the executors (in a cluster, a shared file system, as the
checkpoint is) and support hard links (the first of a range's attempts to publish its file wins:
:mod:`canal.spark.chunks`). With ``prefetch``, the reader process reads a micro-batch's ranges too, from the last one
back, while Spark starts their tasks; a task whose range it published returns that file. Snapshot modes other than
``initial`` and ``never`` are refused with this option. ``maxRowsPerTrigger`` / ``maxBytesPerTrigger`` cap a
micro-batch's binlog rows; its snapshot rows are bounded by ``snapshot.partitions`` x ``snapshot.partition.rows``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from canal.config import InstanceConfig, SnapshotMode, parse_bool
from canal.errors import CanalError
from canal.instance import Instance
from canal.lake.forms.variant_changes import (
    IMAGES_VARIANT,
    json_rows_to_variant,
)
from canal.log import destination_logger
from canal.parse.parser import EventParser
from canal.position import EntryPosition
from canal.protocol import EMPTY_MESSAGE_ID, Message
from canal.spark.batches import LINGER_S
from canal.spark.chunks import (
    MAX_PARTITIONS,
    ChunkPartition,
    ChunkPlanner,
    ChunkRange,
    discard_chunks_through,
    read_chunk,
)
from canal.spark.message_rows import rendered
from canal.spark.micro_batch import MicroBatchCut, at_or_past
from canal.spark.offsets import (
    INITIAL_OFFSET,
    Offset,
    canonical,
    has_position,
    moved,
    range_since,
    with_changes,
    with_covered,
)
from canal.spark.options import IMAGES_PACKED, READER_DEFAULTS
from canal.spark.packed_cut import FIRST_BATCH_BYTES, PACKED_BATCH_BYTES
from canal.spark.progress import handed
from canal.spark.runner_gc import tune_runner_gc
from canal.spark.sessions import Prepared, Session, close_sessions, session_of
from canal.spark.source_options import (
    STORE_SIZE,
    ReadCap,
    SourceConnector,
    SparkSourceError,
    cap_option,
    config_from_options,
    executor_snapshot,
    image_form,
    message_maker,
    reader_option,
    spool_shared,
    spooled_schema,
    storage_options,
)
from canal.spark.spool import InlineRows, Spool, read_inline, read_spooled

# the names moved to canal.spark.source_options and canal.spark.sessions that are imported from here
__all__ = [
    "STORE_SIZE",
    "CanalStreamReader",
    "SourceConnector",
    "SparkSourceError",
    "close_sessions",
    "config_from_options",
    "spool_shared",
]

_PARTITION_FIELDS = ("chunks", "planned", "spooled")  # offset fields of the executor snapshot (not the binlog's)

# AvailableNow: how long the parser may read nothing new before a run ends short (a server gone): ten read.timeouts,
# and never less than _STALLED_MIN_S -- on a loaded machine a parser can pause longer than ten short timeouts
_STALLED_WAITS, _STALLED_MIN_S = 10, 20.0
# a packed read lets the micro-batch being prepared fill while an instance batch comes every 0.3 s, for 10 s at most
_FILL_QUIET_S, _FILL_MOST_S = 0.3, 10.0
_PREFETCH_POLL_S = 0.02  # a prefetch that has taken all there is looks again this often (a read stops it at once)


@attrs.frozen
class VariantRows:
    """An input partition whose JSON change rows (a snapshot range's) the task turns into the ``images=variant``
    form as it reads them."""

    rows: Any


# -- the reader logic, independent of pyspark ----------------------------------------------------------------------


class CanalStreamReader:
    """The logic of the ``canal`` source's reader; :mod:`canal.spark.datasource` wraps it in pyspark's classes."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = {str(k): str(v) for k, v in options.items()}
        lower = {k.lower(): v for k, v in self.options.items()}
        spool_dir = lower.get("spool.dir")
        if not spool_dir:
            meta_dir = lower.get("meta.dir")
            if not meta_dir:
                raise SparkSourceError("the canal source needs option spool.dir (next to the checkpoint) or meta.dir")
            spool_dir = str(Path(meta_dir) / "spark-spool")
        # json, variant (canal.lake.forms.variant_changes) or packed (canal.lake.forms.packed)
        self.images = image_form(lower)
        self.spool = Spool(spool_dir, storage_options(lower), spooled_schema(self.images))
        self.batch_size = reader_option(lower, "batch.size", READER_DEFAULTS["batch.size"], int)
        self.max_entries = reader_option(lower, "max.entries", READER_DEFAULTS["max.entries"], int)
        self.read_timeout = reader_option(lower, "read.timeout", READER_DEFAULTS["read.timeout"], float)
        self.prefetch = reader_option(lower, "prefetch", READER_DEFAULTS["prefetch"], parse_bool)
        gc_default = READER_DEFAULTS["reader.gc.threshold"]
        self.gc_threshold = reader_option(lower, "reader.gc.threshold", gc_default, int, zero=True)  # 0: Python's
        self.shared = spool_shared(lower)  # a micro-batch's tasks read its spool file, else the driver inlines it
        self.limit = ReadCap(
            cap_option(lower, "maxRowsPerTrigger"),
            cap_option(lower, "maxBytesPerTrigger"),
        )
        config = config_from_options(self.options)  # validates the options early
        self.destination = config.destination
        self.messages = message_maker(self.images, config, lower)  # the messages option (None: change rows)
        # packed batches and message plans hold what they need of the entries: a micro-batch of them is bounded by
        # their bytes (PACKED_BATCH_BYTES), its entries acked as they are spooled, not by the instance's store
        self.by_bytes = self.images == IMAGES_PACKED or self.messages is not None
        self.target: EntryPosition | None = None  # Trigger.AvailableNow
        # executor snapshot partitions (canal.spark.chunks): ranges per micro-batch, rows per range; None: off
        self.partitions_per_batch: int | None = None
        rows_default = READER_DEFAULTS["snapshot.partition.rows"]
        self.partition_rows = reader_option(lower, "snapshot.partition.rows", rows_default, int)
        if executor_snapshot(self.options):
            if self.images == IMAGES_PACKED or self.messages is not None:
                raise SparkSourceError(
                    f"canal source option {'images = packed' if self.messages is None else 'messages'} cannot take "
                    "snapshot.partitions: executors read the snapshot's ranges as change rows (images=json or "
                    "variant); the reader's own snapshot (pycanal.snapshot.mode=initial without snapshot.partitions) "
                    "is read by the reader"
                )
            self.partitions_per_batch = reader_option(lower, "snapshot.partitions", "", int)
            if self.partitions_per_batch > MAX_PARTITIONS:
                raise SparkSourceError(
                    f"canal source option snapshot.partitions = '{self.partitions_per_batch}': at most {MAX_PARTITIONS}"
                )
            if config.snapshot.mode not in (SnapshotMode.NEVER, SnapshotMode.INITIAL):
                raise SparkSourceError(
                    f"canal source option snapshot.partitions takes snapshot mode initial or never, not "
                    f"{config.snapshot.mode.value}"
                )
        # executors commit a mark here before each read (servers without MariaDB's snapshot position: MySQL)
        self.watermark = config.snapshot.watermark
        tune_runner_gc(self.gc_threshold)  # in Spark's process of this reader only (canal.spark.runner_gc)

    def initialOffset(self) -> Offset:
        return dict(INITIAL_OFFSET)

    def read(self, start: Offset) -> tuple[Iterator[Any], Offset]:
        """The batch after ``start`` and its end offset: the one spooled for ``start`` if there is one (a replay, or
        prefetched), else a new one within the caps (``maxRowsPerTrigger`` / ``maxBytesPerTrigger``), spooled before
        it is returned."""
        session = session_of(self.options)
        prepared = self._batch_after(session, start, wait=True)
        if prepared is None:
            return iter([]), start
        self._prefetch(session, prepared.end)
        return self._rendered(prepared.batches), prepared.end

    def _batch_after(self, session: Session, start: Offset, *, wait: bool) -> Prepared | None:
        """The batch after ``start``: prepared ahead, spooled (a replay), else prepared now; None if none came."""
        prepared = session.take_prefetched(start)  # prepared ahead: the prefetch goes on with the next, if packed
        last = session.prefetch_rows == 0 and self._target_read(session.instance)  # AvailableNow: nothing to fill
        if prepared is None and self.by_bytes and not last:
            # while behind the server, let it fill: Spark's cost is per micro-batch
            session.let_prefetch_fill(start, _FILL_QUIET_S, _FILL_MOST_S)
            prepared = session.take_prefetched(start)
        if prepared is None:
            session.finish_prefetch()  # a batch being prepared for this start lands in the spool first
            prepared = session.take_prefetched(start)
        if prepared is None:
            spooled = self.spool.read(start)
            if spooled is not None:
                prepared = Prepared([spooled[0]] if spooled[0].num_rows else [], spooled[1])
        return handed(self.destination, start, prepared or self._prepare(session, start, wait=wait))

    def _prepare(
        self, session: Session, start: Offset, *, wait: bool, until: threading.Event | None = None
    ) -> Prepared | None:
        """Pull the entries after ``start``, turn them into a batch and spool it; None when nothing came.

        ``wait``: when nothing is there yet, wait up to ``read.timeout`` for a first instance batch. ``until`` (a
        prefetch): take what comes until the event is set -- the next ``read`` sets it -- so that the micro-batch
        holds everything decoded while Spark ran the one before. The caps (:class:`ReadCap`, ``max.entries``) bound
        the change rows and binlog bytes (always at least one entry); the rest of an instance batch they cut is
        carried into the next micro-batch, and that instance batch is acked with it. Entries are turned into change
        rows as they come, so a ``read`` that stops a prefetch waits for one instance batch's rows at most.
        """
        batch_no = int(start.get("batch", 0)) + 1
        with session.lock:
            if session.instance is None or session.pos is None or canonical(session.pos) != canonical(start):
                session.open_at(start)
        first = until is None and self.prefetch  # packed, a small first micro-batch: the prefetch makes the rest
        since = range_since(start, None if session.instance is None else session.instance.get_cursor())
        size = FIRST_BATCH_BYTES if first else PACKED_BATCH_BYTES
        cut = MicroBatchCut(start, self.spool, self.images, size, since, self.messages)
        try:
            return self._take(session, start, cut, batch_no, wait=wait, until=until)
        finally:
            cut.discard()

    def _take(
        self,
        session: Session,
        start: Offset,
        cut: MicroBatchCut,
        batch_no: int,
        *,
        wait: bool,
        until: threading.Event | None,
    ) -> Prepared | None:
        """The loop of :meth:`_prepare`."""
        waited = not wait
        while not cut.done(self.max_entries):
            with session.lock:  # released between instance batches, so a prefetch that waits for entries blocks no one
                instance = session.instance
                if instance is None:  # closed under a prefetch (the source stopping): the next read reopens
                    return None
                if session.carry:  # the rest of an instance batch the last cap cut: it comes first
                    mid, pending = session.carry_id, session.carry
                    session.carry, session.carry_id = [], None
                else:
                    # take() keeps max.entries; at least one more entry while none placed a cursor yet
                    size = max(1, min(self.batch_size, self.max_entries - cut.taken))
                    at_target = self._target_read(instance)  # asked first: the get below then has all up to it
                    msg = instance.get_without_ack(size, None)  # what is there now
                    if msg.id == EMPTY_MESSAGE_ID and not cut.count and not waited:
                        # nothing yet: wait up to read.timeout for a batch, then take what came -- or, once entries
                        # came, until the stream has been quiet for LINGER_S (a caught-up parser adds nothing more)
                        waited = True
                        if not at_target:  # AvailableNow with all up to its target in the store: nothing to wait for
                            msg = instance.get_without_ack(size, self.read_timeout, linger=LINGER_S)
                            if msg.id == EMPTY_MESSAGE_ID and self.target is not None:
                                msg = self._await_target(instance, size)
                    mid, pending = msg.id, list(msg.entries)
                if pending:
                    assert mid is not None
                    mark = cut.mark(session)
                    cut.take(session, mid, pending, self.limit, self.target, batch_no, self.max_entries)
            if pending:
                assert mid is not None
                if not cut.encode(self.destination, batch_no):  # outside the lock
                    with session.lock:
                        cut.give_back(session, mark, mid)
                elif self.by_bytes:
                    # packed or planned: nothing needs the entries again, so the store's room is freed now and a
                    # micro-batch is bounded by its packed rows' or plans' bytes (PACKED_BATCH_BYTES), not by the store
                    self._ack_spooled(session, start)
                if until is not None:
                    with session.prefetch_progress:
                        session.prefetch_rows = cut.chunk_rows
                        session.prefetch_progress.notify_all()
                continue
            if until is None or until.wait(_PREFETCH_POLL_S):
                break
        with session.lock:
            end = with_changes(cut.end, cut.changes) if cut.end is not None and moved(start, cut.end) else dict(start)
            if canonical(end) != canonical(start):
                end = with_covered(end, cut.covered, start)  # where the next micro-batch's range begins
            # entries past an AvailableNow target were handed out but not returned: reopen on the next read
            session.pos = None if cut.partial else end
        if canonical(end) == canonical(start):
            return None
        cut.publish(end)
        self._ack_spooled(session, start)
        return Prepared(cut.chunks, end)

    def _target_read(self, instance: Instance | None) -> bool:
        """Trigger.AvailableNow: whether all up to the target is in the instance's store (or was taken from it) and
        none is still to come -- no snapshot runs (its next chunk may be on its way) and the parser read that far."""
        if self.target is None or instance is None or instance.snapshot_running:
            return False
        reached = instance.read_position
        return reached is not None and at_or_past(reached, self.target)

    def _await_target(self, instance: Instance, size: int) -> Message:
        """Trigger.AvailableNow ends at the first empty micro-batch, so an empty wait is not the end while data
        available now is still on its way: a snapshot's rows (however long its next chunk takes), and the binlog up to
        the target while the parser has not read that far (a loaded machine decodes slower than ``read.timeout``).
        A parser that reads nothing new for :data:`_STALLED_WAITS` ``read.timeout`` s, and at least
        :data:`_STALLED_MIN_S`, (a server gone) ends the run."""
        patience = max(_STALLED_WAITS * self.read_timeout, _STALLED_MIN_S)
        since = time.monotonic()  # the parser's last progress
        reached = instance.read_position
        while True:
            if instance.snapshot_running:
                since = time.monotonic()
            elif self._target_read(instance):
                return instance.get_without_ack(size, None)  # read that far: what is handed off is in the store
            elif time.monotonic() - since >= patience or not _parser_running(instance):
                destination_logger(__name__, self.destination).warning(
                    "Trigger.AvailableNow: the parser has read to %s, short of the target %s, and has read nothing "
                    "for %.1f s: the run ends here and the next one goes on from its offset",
                    reached,
                    self.target,
                    time.monotonic() - since,
                )
                return instance.get_without_ack(size, None)
            msg = instance.get_without_ack(size, self.read_timeout)
            if msg.id != EMPTY_MESSAGE_ID:
                return msg
            now = instance.read_position
            if now != reached:
                since = time.monotonic()
            reached = now

    def _ack_spooled(self, session: Session, start: Offset) -> None:
        """Ack the instance batches whose entries are all in spool files now (``images=packed``: packed, to be
        spooled when the micro-batch ends): the spool holds them for a replay, and the instance's store needs the
        room for the entries after them. Spark's checkpoint, not the instance's cursor, says where a restarted query
        reads: a batch that was not spooled is read from the binlog again.

        A refused ack raises :class:`SparkSourceError` and closes the instance: the next ``read`` restarts it at the
        offset Spark asks for, and the batch just spooled is read from the spool, so nothing is lost.
        """
        failed: tuple[int, CanalError] | None = None
        with session.lock:
            instance = session.instance
            while instance is not None and session.outstanding:
                try:
                    instance.ack(session.outstanding[0])
                except CanalError as refused:
                    failed = session.outstanding[0], refused
                    break
                session.outstanding.pop(0)
        if failed is None:
            return
        batch_id, exc = failed
        destination_logger(__name__, self.destination).error(
            "ack of batch %d failed; closing the instance: %s", batch_id, exc
        )
        session.close()  # outside the lock: it waits for a prefetch, which takes the lock
        raise SparkSourceError(
            f"the batch after {canonical(start)} is spooled (or packed), but the ack of instance batch {batch_id} was "
            f"refused ({type(exc).__name__}: {exc}); its rows are read from the spool, or the binlog again"
        ) from exc

    def _prefetch(self, session: Session, start: Offset) -> None:
        """Prepare the batch after ``start`` in a thread while Spark runs the current one (``prefetch`` option).

        Only when the instance stands at ``start`` (or at the end of the batches prepared ahead of it). The thread
        takes entries as the instance decodes them until the next read stops it (:meth:`_prepare` with ``until``);
        with ``images=packed`` a batch that fills (``PACKED_BATCH_BYTES``) is followed by the next, two ahead at most
        (:meth:`Session.start_prefetch`). A prepared batch is spooled like any other, so whether or not it is asked
        for, a read of its start -- in this process or after a restart -- returns exactly it.
        """
        if not self.prefetch or session.instance is None or session.pos is None:
            return
        session.start_prefetch(
            start,
            lambda at, stop: self._prepare(session, at, wait=False, until=stop),
            chained=self.by_bytes,
            log=destination_logger(__name__, self.destination),
        )

    # -- executor snapshot partitions (option snapshot.partitions; see canal.spark.chunks) ---------------------------

    def latest(self, start: Offset) -> Offset:
        """The end of the micro-batch after ``start``: its binlog rows (prepared and spooled here, as :meth:`read`
        does) and up to ``snapshot.partitions`` planned ranges of the snapshot, recorded in the end offset
        (``planned``, with the plan's progress after them in ``chunks``, and ``spooled``, where the binlog rows are
        spooled) so that :meth:`partition_values` gives the same partitions for it on every call. ``start`` itself
        when nothing is new."""
        session = session_of(self.options)
        binlog_start = _binlog_view(start)
        progress = start.get("chunks")
        if "chunks" not in start and self.partitions_per_batch is not None:
            # the query's first micro-batch with executor snapshots: is an initial snapshot due?
            binlog_start, progress = self._initial(session, binlog_start)
        spooled = self._batch_after(session, binlog_start, wait=progress is None)
        binlog_end = binlog_start if spooled is None else spooled.end
        ranges: list[ChunkRange] = []
        after = None
        if progress is not None:
            assert self.partitions_per_batch is not None
            ranges, after = self._planner(session, progress["tables"]).plan(progress, self.partitions_per_batch)
        # nothing new -- but a new query's first micro-batch with executor snapshots records their plan
        first_plan = "chunks" not in start and self.partitions_per_batch is not None
        if spooled is None and not ranges and progress == after and not first_plan:
            return start
        end: Offset = {
            **binlog_end,
            "batch": int(start.get("batch", 0)) + 1,
            "chunks": after,
            "planned": [r.to_json() for r in ranges],
            "spooled": None if spooled is None else binlog_start,
            **({} if spooled else {"changes": {}}),  # no binlog rows: not those of the micro-batch before
        }
        with session.lock:
            if session.pos is not None and canonical(session.pos) == canonical(binlog_end):
                session.pos = _binlog_view(end)  # the next micro-batch's binlog rows start here
        self._read_ahead(end, self._ranges(end))  # read after the batch's binlog end, as its tasks will
        self._prefetch(session, _binlog_view(end))
        return end

    def _initial(self, session: Session, start: Offset) -> tuple[Offset, dict[str, Any] | None]:
        """Where a new query's binlog rows start and the snapshot plan it runs (None: none); decided once per
        session.

        An initial snapshot is due as for an instance: snapshot mode ``initial``, no configured position and no
        saved cursor. The stream is then pinned to the server's current position before anything is planned, so
        every range is read after it."""
        if session.initial is not None:
            return session.initial
        config = config_from_options(self.options)  # the user's config: its snapshot mode
        due = config.snapshot.mode is SnapshotMode.INITIAL and not has_position(start) and not config.master.has_start
        if due:
            due = Instance(config).get_cursor() is None  # read from meta: the instance starts once, below
        if not due:
            session.initial = (start, None)
            return session.initial
        now = _master_position(config)
        assert now is not None
        pinned: Offset = {
            **start,
            "file": now.journal_name,
            "offset": now.position,
            "included": False,
            "timestamp": now.timestamp,
            "server_id": now.server_id,
            "gtid": now.gtid,
        }
        with session.lock:
            session.open_at(pinned)
        planner = self._planner(session, config.snapshot.tables)
        destination_logger(__name__, self.destination).info(
            "snapshot of %d tables on executors, streaming from %s:%s",
            len(planner.layouts),
            now.journal_name,
            now.position,
        )
        session.initial = (pinned, ChunkPlanner.start(list(planner.layouts)))
        return session.initial

    def _planner(self, session: Session, tables: Sequence[str] | None) -> ChunkPlanner:
        """The planner of ``tables`` (None: the captured ones), their layouts read once per session."""
        planner = session.planner
        if planner is None or (tables is not None and not set(tables) <= set(planner.layouts)):
            # an instance that is not started reads the catalog over SQL and checks the tables, nothing else
            layouts = Instance(session.config).snapshot_layouts(tables)
            planner = session.planner = ChunkPlanner(SourceConnector(self.options), layouts, self.partition_rows)
        return planner

    def partition_values(self, start: Offset, end: Offset) -> list[Any]:
        """What the executors read for the micro-batch ``start`` .. ``end``: its binlog rows -- with
        ``spool.shared`` a :class:`SpooledRows` (the spool file's name: the task reads it), else
        :class:`InlineRows` (the rows themselves, read here from the spool, in pieces) -- and a
        :class:`~canal.spark.chunks.ChunkPartition` per planned range."""
        values: list[Any] = []
        spooled_from = end.get("spooled")
        if spooled_from is not None:
            found: list[Any] | None
            if self.shared:
                rows = self.spool.rows(spooled_from)
                found = None if rows is None else [self.spool.shared(spooled_from)] if rows else []
            else:
                found = self.spool.inline(spooled_from)
            if found is None:
                raise SparkSourceError(
                    f"no spooled batch starts at {canonical(spooled_from)} in {self.spool.root}: cannot replay "
                    f"{canonical(start)} .. {canonical(end)} deterministically"
                )
            values = found
        ranges = self._ranges(end)
        self._read_ahead(end, ranges)  # a replayed micro-batch was not planned by this process
        if self.images == IMAGES_VARIANT:  # ranges are read as JSON change rows: typed where they are read
            return values + [VariantRows(r) for r in ranges]
        return values + ranges

    def _ranges(self, end: Offset) -> list[ChunkPartition]:
        """The :class:`~canal.spark.chunks.ChunkPartition` of each range planned in ``end``."""
        planned = [ChunkRange.from_json(r) for r in end.get("planned") or ()]
        if not planned:
            return []
        planner = self._planner(session_of(self.options), sorted({r.table for r in planned}))
        batch_no = int(end.get("batch", 0))
        return [
            ChunkPartition(
                SourceConnector(self.options),
                self.spool.storage,
                self.destination,
                batch_no,
                index,
                planner.layouts[chunk.table],
                planner.chunk_key(chunk.table),
                chunk,
                self.watermark,
            )
            for index, chunk in enumerate(planned)
        ]

    def _read_ahead(self, end: Offset, ranges: list[ChunkPartition]) -> None:
        """With ``prefetch``, read the ranges of the micro-batch ending at ``end`` in this process while Spark starts
        their tasks (:func:`~canal.spark.chunks.read_ahead`), unless that is under way already."""
        if self.prefetch and ranges:
            session_of(self.options).read_ranges_ahead(int(end.get("batch", 0)), ranges, self.destination)

    def rows_of(self, value: Any) -> Iterator[Any]:
        """The rows of one value of :meth:`partition_values`, on the executor whose task reads it: the ``messages``
        option's plans made into messages there (:mod:`canal.spark.message_rows`)."""
        return self._rendered(self.read_value(value))

    def _rendered(self, batches: Iterable[Any]) -> Iterator[Any]:
        return iter(batches) if self.messages is None else rendered(batches, self.messages)

    @staticmethod
    def read_value(value: Any) -> Iterator[Any]:
        """The rows of one value of :meth:`partition_values` (on an executor)."""
        if isinstance(value, VariantRows):
            yield from (json_rows_to_variant(batch) for batch in CanalStreamReader.read_value(value.rows))
            return
        if isinstance(value, ChunkPartition):
            yield from read_chunk(value)
            return
        if isinstance(value, InlineRows):
            yield from read_inline(value)
            return
        yield from read_spooled(value)

    def readBetweenOffsets(self, start: Offset, end: Offset) -> Iterator[Any]:
        batches = []
        current = start
        for _ in range(1_000_000):
            if canonical(current) == canonical(end):
                break
            spooled = self.spool.read(current)
            if spooled is None:
                raise SparkSourceError(
                    f"no spooled batch starts at {canonical(current)} in {self.spool.root}: cannot replay "
                    f"{canonical(start)} .. {canonical(end)} deterministically"
                )
            batch, current = spooled
            if batch.num_rows:
                batches.append(batch)
        return self._rendered(batches)

    def commit(self, end: Offset) -> None:
        """Drop the spool files of the batches up to ``end``: Spark has written them and never reads them again.
        (Their instance batches were acked when they were spooled.)"""
        self.spool.discard_through(end)
        if self.partitions_per_batch is not None:
            discard_chunks_through(self.spool.storage, int(end.get("batch", 0)))

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = _master_position(config_from_options(self.options))

    def stop(self) -> None:
        close_sessions()


def _binlog_view(offset: Mapping[str, Any]) -> Offset:
    """An offset without the executor snapshot's fields: where the binlog rows stand."""
    return {k: v for k, v in offset.items() if k not in _PARTITION_FIELDS}


def _parser_running(instance: Instance) -> bool:
    parser = instance.parser
    return isinstance(parser, EventParser) and parser.is_running


def _master_position(config: InstanceConfig) -> EntryPosition | None:
    """The master's current binlog position (where an AvailableNow run stops)."""
    from canal.parse.sources import source_factory

    source = source_factory(config)(config.master)
    try:
        source.open()
        status: EntryPosition = source.master_status()
        return status
    finally:
        with contextlib.suppress(Exception):  # the status was read (or its error is propagating); closing is cleanup
            source.close()
