"""One destination, embedded: parser -> sink -> store, with meta, and the get / ack / rollback API.

canal's ``CanalInstanceWithManager`` plus the per-destination half of ``CanalServerWithEmbedded``. The store is the
only hand-off between the parser thread and the consumers; consumer calls on one instance are serialised (canal
synchronises on the instance too). Semantics are canal's, with these improvements (docs/architecture.md):

* a client filter narrows the instance filter (canal's replaced it);
* ``rollback(batch_id)`` rewinds exactly that batch and the ones after it;
* a cursor is row-exact inside a transaction, so a restart redelivers nothing that was acked;
* unknown, duplicate or out-of-order batch ids raise a typed error and change nothing.

:meth:`Instance.group` builds canal's group mode: one parser per member master, merged in time order by a
:class:`~canal.sink.GroupSink` into this one store (restart semantics in its docstring).

One client id consumes a destination at a time (the store has one read cursor, as canal's has); subscribing a second
client id while another is subscribed raises :class:`~canal.errors.ServerError`.

Which snapshot a start runs, the checks before a new one and its runner are planned by
:class:`~canal.snapshot.destination.DestinationSnapshots`; the snapshots it runs in the stream (heals and rereads
included) are kept by :class:`~canal.snapshot.running.RunningSnapshots`, the cursors by the instance. Its counters
are :class:`~canal.instance_metrics.InstanceMetrics`.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from canal.assembly import ParserGroup, assemble
from canal.client import DEFAULT_CLIENT_ID, ClientIdentity
from canal.config import HealMode, InstanceConfig, MasterConfig, SnapshotMode
from canal.errors import (
    ConfigError,
    NotRunningError,
    NotSubscribedError,
    ServerError,
    SnapshotError,
    UnknownBatchError,
)
from canal.filter import TableFilters, compile_table_filter
from canal.instance_metrics import InstanceMetrics, RateWindow, rows_of, state_of
from canal.log import destination_logger
from canal.meta import MetaManager
from canal.meta.core import check_known, check_remove
from canal.meta.fence import Fence
from canal.parse.heal_marks import HEAL, heal_mark
from canal.parse.log_position import LogPositionManager
from canal.parse.mysql import MysqlBinlogSource
from canal.parse.parser import EventParser, SourceFactory
from canal.position import EntryPosition, LogIdentity, LogPosition, PositionRange, SnapshotCursor
from canal.protocol import EMPTY_MESSAGE_ID, Entry, EntryType, Message, TableSchema
from canal.snapshot.destination import DestinationSnapshots
from canal.snapshot.heal import Healer
from canal.snapshot.merge import SnapshotMerge
from canal.snapshot.runner import SnapshotRunner, split_table_name
from canal.snapshot.running import RunningSnapshots
from canal.start_stop import StartStopContext


class Instance(StartStopContext):
    """One destination: ``with Instance(cfg) as inst: msg = inst.get(100, timeout=1.0)``.

    Every consumer call takes an optional ``client``; the default is canal's client 1001 of this destination,
    subscribed on start. Components can be injected (tests, the HA server); by default they follow the config.
    """

    def __init__(
        self,
        config: InstanceConfig,
        *,
        start: LogPosition | None = None,
        meta: MetaManager | None = None,
        log_positions: LogPositionManager | None = None,
        source_factory: SourceFactory | None = None,
        on_error: Callable[[BaseException], None] | None = None,
        members: Sequence[MasterConfig] | None = None,
        zk: Any = None,
        fence: Fence | None = None,
        guard: Callable[[], None] | None = None,
        hand_out: Callable[[], None] | None = None,
    ) -> None:
        self.config = config
        self.destination = config.destination
        self._log = destination_logger(__name__, self.destination)
        parts = assemble(
            config,
            self._parser_failed,
            start=start,
            meta=meta,
            log_positions=log_positions,
            source_factory=source_factory,
            members=members,
            zk=zk,
            fence=fence,
        )
        self.meta: MetaManager = parts.meta
        self._own_meta = parts.own_meta
        self.log_positions: LogPositionManager = parts.log_positions
        self.store = parts.store
        self.sink = parts.sink
        self.parser: EventParser | ParserGroup = parts.parser
        self._start_cursor = parts.start
        self._on_error = on_error
        # proves this process may still act for the destination (the HA server's ZooKeeper ownership check); called
        # after a get's wait and before an ack or rollback changes anything, so a process that was paused while
        # another took over hands out nothing and writes nothing
        self._guard = guard
        # whether batches may still be handed out (raises NotRunningError once an HA hand-over began): asked, with
        # the guard, after a get's wait -- a get that began waiting before the hand-over must not hand out a batch
        # the hand-over no longer waits for
        self._hand_out = hand_out
        self.default_client = ClientIdentity(self.destination, DEFAULT_CLIENT_ID)
        self._lock = threading.RLock()  # serialises consumer calls, like canal's synchronized(instance)
        self._client_filters: dict[int, TableFilters] = {}
        self._started = False
        self._rates = RateWindow()
        self._last_get_ms: int | None = None
        self._last_ack_ms: int | None = None
        self._followed: dict[int, LogPosition] = {}  # per client id: the last rest its cursor was checked against
        # told where a client's cursor is about to follow the stream's rest, before it moves there (run_batches
        # journals how far the stream was read with nothing for its function: canal.lake.forms.ranges)
        self.following: Callable[[LogPosition], None] | None = None
        self._planning = DestinationSnapshots(config, self.parser, self._log)
        # the snapshots run in the stream since the start, heals' and rereads' included
        self._running = RunningSnapshots(
            self._planning, self.store.producer_waiting, lambda: self.store.stats().put_sequence
        )
        if config.heal is HealMode.SNAPSHOT and isinstance(self.parser, EventParser):
            self.parser.heal = Healer(self._running.read_again, self._running.count_heals, self._log)
            self.parser.rereads = self._running.reread

    # -- construction helpers ------------------------------------------------------------------------------------

    @classmethod
    def from_properties(
        cls, path_or_text: str | os.PathLike[str], *, canal_properties: Any = None, **kwargs: Any
    ) -> Instance:
        """An instance from canal's ``instance.properties`` (and optionally ``canal.properties``)."""
        return cls(InstanceConfig.from_properties(path_or_text, canal_properties=canal_properties), **kwargs)

    @classmethod
    def at(cls, config: InstanceConfig, start: LogPosition, **kwargs: Any) -> Instance:
        """An instance whose first entry is the first one after cursor ``start`` (see :mod:`canal.assembly`)."""
        return cls(config, start=start, **kwargs)

    @classmethod
    def group(cls, config: InstanceConfig, members: Sequence[MasterConfig], **kwargs: Any) -> Instance:
        """canal's group mode: several masters (e.g. shards on several servers) merged into this one destination.

        Each member master gets its own parser thread (``config`` with ``master`` replaced, no standby, and
        ``slave_id + index`` when ``slave_id`` is set) and its own restart point, named
        :func:`member_destination` ``(destination, index)`` in the log-position manager. A
        :class:`~canal.sink.GroupSink` merges their transactions into the one store in execute-time order, each
        transaction whole (a large one split by ``transaction_size`` keeps the others waiting until its end). An idle
        member lets the others pass with its heartbeats, so merged changes wait up to one heartbeat period
        (``min(detecting.interval_s, retry.heartbeat_period_s)``) for an idle member: lower it for low latency. The
        consumer API is the Instance's. ``config.master`` is not dumped; pass it among ``members`` if wanted.

        Restarts (the same limits as canal's group mode): the store, batches and consumer cursors are as for one
        master, but a cursor names a position on one member's server, so it cannot say where the *other* members
        stand. By default (memory log positions, cleared on ``stop()``) every start dumps each member from its
        configured start -- ``journal_name``/``position``, ``timestamp`` or ``gtid`` in its MasterConfig, else the
        server's current position: a restart delivers again what came after the configured starts (or skips what
        was written while stopped, without one). A ``log_positions`` manager that persists (e.g.
        :class:`~canal.parse.log_position.FileLogPositionManager`) resumes each member after what it had handed to
        the store, which skips what was in the store but not acked when the instance stopped. Exact
        resumption needs per-member cursors, which neither canal nor this group mode keeps.
        """
        return cls(config, members=members, **kwargs)

    # -- lifecycle -----------------------------------------------------------------------------------------------

    @property
    def is_started(self) -> bool:
        return self._started

    def start(self) -> None:
        """Start meta, the store and the parser. A failure part-way stops what was started, then propagates.

        Batch marks left by an earlier run (a crash, or another process that held the destination) are dropped:
        what they cover was never acked, so it is delivered again from the cursor (canal's semantics). With a start
        cursor, it becomes the default client's cursor before the parser starts.
        """
        with self._lock:
            if self._started:
                return
            try:
                self.meta.start()
                self.log_positions.start()
                self.store.start()
                self.sink.reset()
                # the subscriptions read once (in ZooKeeper each read is a round trip, and an HA takeover's gap waits
                # for this start): with none, the default client subscribes
                clients = self._subscribed_clients()
                if not clients:
                    self.meta.subscribe(self.default_client)
                    clients = self._subscribed_clients()
                for client in clients:
                    self._client_filters[client.client_id] = self._narrowed(client.filter)
                    if self.meta.batch_ids(client):
                        self._log.info("rolling back batches of client %s left by an earlier run", client.client_id)
                        self.meta.clear_all_batchs(client)
                if self._start_cursor is not None:
                    self.meta.update_cursor(self.default_client, self._start_cursor)
                cursors = [self.meta.get_cursor(c) for c in clients]
                due = self._planning.due(cursors)
                ends = self.config.snapshot.mode is SnapshotMode.INITIAL_ONLY  # the stream ends with the snapshot
                runner = None
                if due is not None:
                    merge, source = self._planning.parts()
                    fresh = all(c is None or c.snapshot is None for c in cursors)  # a first start, or a purged cursor
                    catalog = None
                    if fresh or not due.tables:
                        catalog = self._planning.catalog(source)
                        if not due.tables:
                            due = SnapshotCursor(tuple(self._planning.captured_tables(catalog)), 0, None, due.rows)
                            self._log.info("snapshot of the captured tables: %s", ", ".join(due.tables) or "none")
                        if fresh:
                            self._planning.check_tables(due.tables, source, catalog)
                    runner = self._running.runner(due, merge, source, catalog, None, None)
                    if fresh:
                        self._begin_initial_snapshot(source, due if due.tables else None)
                    # before the parser hands off anything: every entry carries the snapshot's progress
                    merge.begin(due if due.tables else None, end_stream=ends)
                    self._running.runners.append(runner)
                elif ends:
                    self._planning.parts()[0].begin(None, end_stream=True)
                    self._log.info("snapshot mode initial_only: the snapshot is complete; there is nothing to stream")
                if due is not None or not ends:
                    self.parser.start()
                if runner is not None:
                    assert due is not None
                    resumed = due.table > 0 or due.after is not None
                    self._log.info("snapshot %s", f"resumed at {due.to_dict()}" if resumed else "started")
                    runner.start()
            except BaseException:
                self._shut_down()
                raise
            self._started = True
            self._log.info("started (master %s)", self.config.master.redacted().get("address"))

    def stop(self, *, follow: bool = True) -> None:
        """Stop the parser, drop what the store holds (unacked batches are redelivered after a restart), flush meta.

        ``follow=False``: the clients' cursors stay where they are rather than following the stream to where it
        rests (after :meth:`persist` did, and the destination was handed over: this process may not write any more).
        """
        with self._lock:
            if not self._started:
                return
            self._started = False
            for client in self._subscribed_clients() if follow else ():
                try:
                    self._follow_rest(client)  # a restart right after a rotate starts in the new file
                except Exception as exc:  # the cursor stays where it was (a valid restart point); stop goes on
                    self._log.warning("client %s: the cursor could not follow the stream: %s", client.client_id, exc)
            self._shut_down()
            self._log.info("stopped")

    def persist(self) -> None:
        """Persist the meta as :meth:`stop` does (each client with nothing outstanding following the stream where it
        rests, then the meta flushed), without stopping. An HA hand-over persists under its fencing token, frees the
        destination for the next owner at once, and stops the rest of the instance after."""
        with self._lock:
            if not self._started:
                return
            for client in self._subscribed_clients():
                try:
                    self._follow_rest(client)
                except Exception as exc:  # the cursor stays where it was (a valid restart point)
                    self._log.warning("client %s: the cursor could not follow the stream: %s", client.client_id, exc)
            self.meta.flush()

    def snapshot(
        self, tables: Sequence[str], *, chunk_rows: int | None = None, max_rows_per_s: float | None = None
    ) -> SnapshotRunner:
        """Snapshot ``tables`` (``db.table``) into the stream while it runs: their current rows arrive as SNAPSHOT
        entries (after images; apply them as upserts) at the point of the stream where they are exact, so a
        consumer applying everything in order ends equal to the source (see :mod:`canal.snapshot.window`).
        Returns the running snapshot (``progress()``, ``wait()``). Needs a MariaDB source (its consistent-snapshot
        binlog position), or a ``watermark_table`` in the config's ``snapshot`` (DBLog's watermarks, for servers
        without that position such as MySQL; :mod:`canal.snapshot.marks`). ``chunk_rows`` / ``max_rows_per_s``
        default to the config's ``snapshot`` settings.

        Progress rides with the entries: once an entry handed out after this call is acked, the consumer cursor
        holds the unfinished snapshot, and a restart (or an HA takeover) resumes it after the last acked snapshot
        row. One snapshot at a time: while one is unfinished this raises :class:`~canal.errors.SnapshotError`.
        Unknown tables raise :class:`~canal.errors.ConfigError`; neither error changes anything.
        """
        names = tuple(tables)
        if not names:
            raise ConfigError("a snapshot needs at least one table", key="snapshot.tables")
        for name in names:
            split_table_name(name)
        with self._lock, self._running.lock:
            if not self._started:
                raise NotRunningError(f"destination {self.destination} is not running")
            merge, source = self._planning.parts()
            if merge.stream_ended:
                raise SnapshotError(
                    f"destination {self.destination} streams nothing more (snapshot mode initial_only): a snapshot "
                    "would never join the stream"
                )
            if merge.progress is not None or self.snapshot_running:
                raise SnapshotError(
                    f"destination {self.destination} has an unfinished snapshot "
                    f"({', '.join(merge.progress.tables) if merge.progress else 'starting'}): wait for it first"
                )
            catalog = self._planning.catalog(source)
            self._planning.check_tables(names, source, catalog)
            plan = SnapshotCursor(names)
            runner = self._running.runner(plan, merge, source, catalog, chunk_rows, max_rows_per_s)
            merge.begin(plan)
            self._running.runners.append(runner)
            return runner.start()

    def snapshot_layouts(self, tables: Sequence[str] | None = None) -> list[TableSchema]:
        """The layouts a snapshot of ``tables`` (``db.table``; None: the configured snapshot tables, else the
        captured ones) reads, checked as :meth:`snapshot` checks them (:class:`~canal.errors.ConfigError` for an
        unknown table; :class:`~canal.errors.SnapshotError` for a table without a chunk key under
        ``keyless=refuse``). For readers that plan a snapshot's chunks themselves (the Spark source's executor
        partitions); nothing changes here."""
        _merge, source = self._planning.parts()
        catalog = self._planning.catalog(source)
        names = tuple(tables or self.config.snapshot.tables or self._planning.captured_tables(catalog))
        for name in names:
            split_table_name(name)
        self._planning.check_tables(names, source, catalog)
        return [catalog.tables[name].table_schema(mariadb=catalog.mariadb) for name in names]

    @property
    def read_position(self) -> EntryPosition | None:
        """How far the parser has read (:attr:`canal.parse.parser.EventParser.read_position`: every event before it
        made no entry or was handed to the store, but for the transaction still being read, whose entries wait for
        its end); None before its first event, and for a parser group, which reads no single binlog."""
        parser = self.parser
        return parser.read_position if isinstance(parser, EventParser) else None

    @property
    def snapshots(self) -> tuple[SnapshotRunner, ...]:
        """The snapshots this instance ran since it started (the last one last)."""
        return tuple(self._running.runners)

    @property
    def snapshot_running(self) -> bool:
        """Whether a snapshot is still reading: its chunks join the stream as they are read, so an empty store
        does not mean that all of its rows were handed out."""
        return any(runner.running for runner in self._running.runners)

    def _begin_initial_snapshot(self, source: MysqlBinlogSource, due: SnapshotCursor | None) -> None:
        """Make the initial snapshot and its start durable before anything is handed out: the server's position now,
        with the snapshot pending, becomes the cursor the parser starts from. A crash before the first ack then
        restarts from that same position (delivering again what came after it) instead of from a later "now",
        which would skip changes a consumer may already have applied (e.g. a DELETE of a row it has)."""
        source.open()
        try:
            now = source.master_status()
        finally:
            source.close()
        start = LogPosition(LogIdentity(source.address, -1), now, 0, due)
        for client in self._subscribed_clients():
            self.meta.update_cursor(client, start)
        # durable now: a meta that flushes every flush_period_s (file, period-mixed) holds cursors in memory until
        # then, and a process killed before that first flush snapshotted again from a later "now"
        self.meta.flush()
        self._log.info("initial snapshot: streaming from %s", now)

    def _shut_down(self) -> None:
        # every step is a no-op on a component that is not started, so this also undoes a partial start
        for runner in self._running.runners:
            runner.stop()
        self._running.runners.clear()
        self.sink.stop()  # release a parser blocked on a full store
        self.parser.stop()
        if self.store.is_started:
            self.store.stop()
        self.log_positions.stop()
        if self._own_meta:
            self.meta.stop()

    def _parser_failed(self, error: BaseException) -> None:
        self._log.error("parser stopped on a fatal error: %s", error)
        self.store.input_ended()  # a get waiting for entries returns now, and raises the error
        if self._on_error is not None:
            self._on_error(error)

    # -- subscriptions -------------------------------------------------------------------------------------------

    def _subscribed_clients(self) -> list[ClientIdentity]:
        return self.meta.list_all_subscribe_info(self.destination)

    def _narrowed(self, client_filter: str) -> TableFilters:
        if not client_filter:
            return self.config.table_filters
        return self.config.table_filters.narrowed(compile_table_filter(client_filter, "filter"))

    def _client(self, client: ClientIdentity | None) -> ClientIdentity:
        if client is None:
            return self.default_client
        if client.destination != self.destination:
            raise ServerError(
                f"client {client} belongs to destination {client.destination!r}, not {self.destination!r}"
            )
        return client

    def subscribe(self, filter: str = "", client: ClientIdentity | None = None) -> None:
        """Subscribe (or re-subscribe with a new filter). The filter narrows the instance filter."""
        with self._lock:
            me = self._client(client).with_filter(filter)
            narrowed = self._narrowed(filter)  # a bad regex raises here, before anything changes
            others = [c for c in self._subscribed_clients() if c.client_id != me.client_id]
            if others:
                raise ServerError(
                    f"destination {self.destination!r} is consumed by client {others[0].client_id}; "
                    f"unsubscribe it before subscribing client {me.client_id}"
                )
            self.meta.subscribe(me)
            self._client_filters[me.client_id] = narrowed

    def unsubscribe(self, client: ClientIdentity | None = None) -> None:
        with self._lock:
            me = self._client(client)
            self._require_subscribed(me)
            self.meta.unsubscribe(me)
            self._client_filters.pop(me.client_id, None)
            if self._started:
                self.store.rollback()

    def _require_subscribed(self, client: ClientIdentity) -> None:
        if not self.meta.has_subscribe(client):
            raise NotSubscribedError(f"client {client} has not subscribed to destination {self.destination!r}")

    def _require_started(self) -> None:
        if not self._started:
            raise NotRunningError(f"destination {self.destination!r} is not running in this process")

    def _stopped_on(self, error: BaseException) -> NotRunningError:
        stopped = NotRunningError(f"destination {self.destination!r} stopped on an error: {error}")
        stopped.__cause__ = error
        return stopped

    # -- the consumer API ----------------------------------------------------------------------------------------

    def decode_rows_by_column(self, columnar: bool = True) -> None:
        """From the next rows event the parser reads on, decode row images column by column
        (:class:`~canal.parse.mysql.decoder.ColumnarGen`) -- for a consumer that builds typed columns of them
        (:func:`~canal.lake.forms.typed_batch.entries_to_typed`, which :func:`~canal.spark.batches.run_batches` into a
        DeltaMirror and the Spark source's packed and variant rows call on): the main job's rows then cost half as
        much. The entries are the same either way; reading a row's ``before`` / ``after`` tuples of such an entry
        costs more than it did. ``columnar=False`` goes back to tuples. The fake binlog has one form only."""
        self.parser.rows_form.columnar = columnar

    def get_without_ack(
        self,
        batch_size: int = 1000,
        timeout: float | None = None,
        client: ClientIdentity | None = None,
        *,
        linger: float | None = None,
    ) -> Message:
        """The next batch, left outstanding until :meth:`ack` or :meth:`rollback`.

        ``timeout`` None returns at once; <= 0 blocks until a full batch; > 0 waits up to that many seconds and
        returns what is there. ``linger`` (seconds) ends a wait for a full batch early, once entries are there and
        the parser has handed over nothing new for that long: the stream went quiet (it caught up with the
        server), so the entries go now instead of waiting for the server's next writes. An empty message has id -1.

        After the parser stopped on an error (an event it refuses: ``metrics().running`` is False), the entries it
        handed off before still go out, at once; then :class:`~canal.errors.NotRunningError` is raised, the error
        its ``__cause__``. Batches handed out can still be acked or rolled back.
        """
        if batch_size <= 0:
            raise ServerError(f"batch_size must be positive, got {batch_size}")
        if linger is not None and (isinstance(linger, bool) or not isinstance(linger, (int, float)) or not linger >= 0):
            raise ServerError(f"linger must be a number of seconds >= 0, got {linger!r}")
        with self._lock:
            me = self._client(client)
            self._require_started()
            self._require_subscribed(me)
            failed = self.parser.error
            if failed is not None:
                # the parser stopped on an error: what it handed off before goes out (up to the event it refused),
                # then the error -- without waiting for more, which will not come
                timeout, linger = None, None
            events = self.store.get(batch_size, timeout, linger)
            if events.is_empty or events.range is None:
                failed = self.parser.error  # (it may have stopped during the wait, which its error ended)
                if failed is not None:
                    raise self._stopped_on(failed)
                self._follow_rest(me)
                return Message(EMPTY_MESSAGE_ID, ())
            if self._guard is not None or self._hand_out is not None:
                try:
                    if self._guard is not None:
                        self._guard()
                    if self._hand_out is not None:
                        self._hand_out()
                except BaseException:
                    self.store.rollback(events.start_seq - 1)  # not handed out: put back as it was
                    raise
            batch_id = self.meta.add_batch(me, events.range)  # the mark carries the batch's server and sequences
            if events.range.snapshot is not None:
                self._running.rows_out = events.range.snapshot.rows
                if self._running.runners:
                    self._running.runners[-1].consumer_took()  # a reader waiting for the consumer goes on
            entries = self._client_view(me, events.entries)
            last_ms = events.entries[-1].header.execute_time
            self._last_get_ms = last_ms
            self._rates.add(rows_of(entries), time.time())
            return Message(batch_id, entries)

    def _follow_rest(self, client: ClientIdentity) -> None:
        """A client with nothing outstanding follows the stream where it rests past its cursor (after a binlog
        rotate, or after transactions dropped as empty): its cursor moves there, so a restart or a purge of the
        files before it finds nothing it needs gone. Nothing is skipped: the store says where the stream rests only
        while every entry put was acked and nothing was put since."""
        rest = self.store.resting_position()
        if rest is None or self._followed.get(client.client_id) == rest or self.meta.batch_ids(client):
            return  # (a rest already followed is not read from meta again: one read per rest, not per empty get)
        cursor = self.meta.get_cursor(client)
        if cursor is not None:
            here, there = cursor.position, rest.position
            same = (here.journal_name, here.position) == (there.journal_name, there.position)
            if same or cursor.snapshot is not None:  # an unfinished snapshot's progress rides only with its entries
                self._followed[client.client_id] = rest
                return
        if self._guard is not None:
            self._guard()
        if self.following is not None:
            self.following(rest)
        self.meta.update_cursor(client, rest)
        self._followed[client.client_id] = rest
        self._log.debug("client %s is caught up; its cursor follows the stream to %s", client.client_id, rest.position)

    def _client_view(self, client: ClientIdentity, entries: Sequence[Entry]) -> Sequence[Entry]:
        narrowed = self._client_filters.get(client.client_id)
        if narrowed is None or narrowed is self.config.table_filters:
            return entries
        kept = []
        for entry in entries:
            if entry.entry_type is EntryType.ROWDATA:
                h = entry.header
                if h.table and not narrowed.includes(h.schema, h.table) and not _heals_any(h.props, narrowed):
                    continue
            kept.append(entry)
        return kept

    def ack(self, batch_id: int, client: ClientIdentity | None = None) -> None:
        """Confirm a batch: the cursor moves past it and the store frees it. Batches are acked in order.

        Every check comes before the first change: an unknown, out-of-order or foreign batch id raises and changes
        nothing. The cursor is written before the mark is removed, so a failed write (e.g. fenced) leaves the batch
        outstanding and the cursor where it was.
        """
        with self._lock:
            me = self._client(client)
            self._require_started()  # batches handed out before a fatal error can still be acked
            self._require_subscribed(me)
            mark = self._outstanding(me, batch_id)
            outstanding = self.meta.batch_ids(me)
            check_remove(me, outstanding, batch_id)
            if self._guard is not None:
                self._guard()
            assert mark.seqs is not None and mark.identity is not None  # checked by _outstanding
            self.meta.update_cursor(me, mark.ack_cursor)
            self.meta.remove_batch(me, batch_id)
            self.store.ack(mark.seqs[1])
            self._last_ack_ms = mark.end.timestamp

    def _outstanding(self, client: ClientIdentity, batch_id: int) -> PositionRange:
        """The mark of batch ``batch_id``, which this process must have handed out."""
        mark = self.meta.get_batch(client, batch_id)
        if mark is None:
            check_known(client, self.meta.batch_ids(client), batch_id)  # raises, naming what is outstanding
        if mark is None or mark.seqs is None or mark.identity is None:
            raise UnknownBatchError(f"batch {batch_id} of client {client} was not handed out by this process")
        return mark

    def rollback(self, batch_id: int | None = None, client: ClientIdentity | None = None) -> None:
        """Hand out again: every outstanding batch (no id), or batch ``batch_id`` and every one after it."""
        with self._lock:
            me = self._client(client)
            self._require_started()
            self._require_subscribed(me)
            if batch_id is None:
                if self._guard is not None:
                    self._guard()
                self.meta.clear_all_batchs(me)
                self.store.rollback()
                return
            mark = self._outstanding(me, batch_id)
            if self._guard is not None:
                self._guard()
            assert mark.seqs is not None  # checked by _outstanding
            self.meta.remove_batchs_from(me, batch_id)
            self.store.rollback(mark.seqs[0] - 1)

    def get(
        self,
        batch_size: int = 1000,
        timeout: float | None = None,
        client: ClientIdentity | None = None,
        *,
        linger: float | None = None,
    ) -> Message:
        """Get and ack in one call (the arguments as :meth:`get_without_ack`'s)."""
        with self._lock:
            msg = self.get_without_ack(batch_size, timeout, client, linger=linger)
            if msg.id != EMPTY_MESSAGE_ID:
                self.ack(msg.id, client)
            return msg

    def outstanding(self) -> int:
        """Batches handed out and neither acked nor rolled back, over every client. Read from the meta without the
        consumer lock, so it does not wait for a get that waits for entries (an HA hand-over asks while one may)."""
        return sum(len(self.meta.batch_ids(c)) for c in self._subscribed_clients())

    def list_batch_ids(self, client: ClientIdentity | None = None) -> list[int]:
        """Outstanding batch ids, oldest first."""
        with self._lock:
            return list(self.meta.list_all_batchs(self._client(client)))

    def get_cursor(self, client: ClientIdentity | None = None) -> LogPosition | None:
        """The client's saved cursor (None: none). Before :meth:`start` it is read from meta without starting the
        instance (no connection to the master), e.g. to decide whether a first start is due."""
        with self._lock:
            if self._started or self.meta.is_started:
                return self.meta.get_cursor(self._client(client))
            with self.meta:
                return self.meta.get_cursor(self._client(client))

    @contextlib.contextmanager
    def batch(
        self,
        batch_size: int = 1000,
        timeout: float | None = None,
        client: ClientIdentity | None = None,
        *,
        linger: float | None = None,
    ) -> Iterator[Message]:
        """``with inst.batch(100, timeout=1.0) as msg:`` acks on normal exit, rolls back on an exception."""
        msg = self.get_without_ack(batch_size, timeout, client, linger=linger)
        try:
            yield msg
        except BaseException:
            if msg.id != EMPTY_MESSAGE_ID and self._started:
                self.rollback(msg.id, client)
            raise
        if msg.id != EMPTY_MESSAGE_ID:
            self.ack(msg.id, client)

    def messages(
        self,
        batch_size: int = 1000,
        timeout: float = 1.0,
        client: ClientIdentity | None = None,
        *,
        linger: float | None = None,
    ) -> Iterator[Message]:
        """Non-empty messages for a simple loop, until the instance stops.

        A message is acked when the loop asks for the next one; leaving the loop (``break`` or an exception) rolls
        the current message back, so it is delivered again.
        """
        while self._started:
            msg = self.get_without_ack(batch_size, timeout, client, linger=linger)
            if msg.id == EMPTY_MESSAGE_ID:
                continue
            try:
                yield msg
            except GeneratorExit:
                if self._started:
                    self.rollback(msg.id, client)
                raise
            self.ack(msg.id, client)

    def __iter__(self) -> Iterator[Message]:
        return self.messages()

    # -- metrics -------------------------------------------------------------------------------------------------

    def metrics(self) -> InstanceMetrics:
        stats = self.store.stats()
        now = time.time()
        now_ms = int(now * 1000)
        parser = self.parser
        error = parser.error or parser.last_error
        connected = self._started and parser.connected
        ended = self._stream_ended()
        latest = self.store.latest_position() if self._started else None
        return InstanceMetrics(
            destination=self.destination,
            running=self._started and parser.error is None,
            put_sequence=stats.put_sequence,
            get_sequence=stats.get_sequence,
            ack_sequence=stats.ack_sequence,
            store_entries=stats.entries_held,
            store_bytes=stats.bytes_held,
            rows_per_s=self._rates.rate(now),
            delay_get_ms=None if self._last_get_ms is None else now_ms - self._last_get_ms,
            delay_ack_ms=None if self._last_ack_ms is None else now_ms - self._last_ack_ms,
            reconnects=self.parser.reconnects,
            errors=parser.fatal_errors,
            last_error=None if error is None else f"{type(error).__name__}: {error}",
            snapshot=self._running.runners[-1].progress() if self._running.runners else None,
            stream_ended=ended,
            heals=self._running.heals,
            state=state_of(self._started, parser.error is not None, ended, connected),
            connected=connected,
            last_error_type=None if error is None else type(error).__name__,
            ack_lag_ms=None if not self._started or ended else self._ack_lag_ms(now_ms),
            delay_put_ms=None if latest is None or not latest.timestamp else now_ms - latest.timestamp,
            rows_reread=self._running.rows_reread,
        )

    def _ack_lag_ms(self, now_ms: int) -> int | None:
        """:attr:`InstanceMetrics.ack_lag_ms`."""
        waiting = self.store.first_position()  # the first entry not acked
        if waiting is not None and waiting.timestamp:
            return max(0, now_ms - waiting.timestamp)
        through = self.parser.read_through_ms
        return None if through is None else max(0, now_ms - through)

    def _stream_ended(self) -> bool:
        merge = self.parser.merge if isinstance(self.parser, EventParser) else None
        return isinstance(merge, SnapshotMerge) and merge.stream_ended


def _heals_any(props: Mapping[str, str], tables: TableFilters) -> bool:
    """Whether an entry marks a heal of a table ``tables`` include: a statement names the tables it names, and may
    heal others it reaches (a view's base table, a trigger's), which the client must see voided."""
    mark = heal_mark(props) if HEAL in props else None
    return mark is not None and any(tables.includes(t.schema, t.table) for t in mark.tables)
