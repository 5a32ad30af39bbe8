"""The event parser: one thread per destination that finds the start, dumps, converts, buffers and hands off.

canal's ``AbstractEventParser`` / ``MysqlEventParser``, with these differences:

* failures back off exponentially with jitter, bounded by ``RetryConfig.max_attempts`` (canal sleeps 10-20 s and
  retries forever); every reconnect resumes from the last position handed off -- in memory, so nothing is lost or
  handed twice whatever the log-position manager does -- including "the first N rows of this transaction";
* a purged binlog (errno 1236) becomes a :class:`~canal.errors.BinlogPurgedError` naming the position after
  ``purge_threshold`` attempts, or, with ``reset_on_purge``, a loudly logged restart from the current position;
* a fatal error is kept in :attr:`EventParser.error`, logged and passed to ``on_error``, never swallowed. An event
  the parser refuses (a :class:`~canal.errors.ParseError` not of the source: undecodable bytes, a schema the history
  cannot know, a statement the capture cannot follow) is fatal at once: the destination stops, as a reconnect reads
  the same refusal;
* so is what no retry fixes (:func:`~canal.parse.retry.is_permanent`): a refused login, a missing grant, a server
  not set up for capture (binlog format or row image), a connection that cannot be secured as configured (TLS), a
  host name that does not resolve before the first connection. Network failures (a refused or lost connection: a
  server restarting) are retried, visibly: :attr:`EventParser.connected` is False meanwhile and
  :attr:`EventParser.last_error` names the failure.

Idle dumps yield heartbeats every ``detecting.interval_s`` (entries the sink drops); :mod:`canal.parse.detecting`
switches to the standby, whose dump starts by time (the last handed-off time minus ``fallback_interval_s``).
"""

from __future__ import annotations

import functools
import random
import threading
import time
from collections.abc import Callable, Sequence

import attrs

from canal.config import InstanceConfig, MasterConfig
from canal.errors import CanalError, SourceError
from canal.filter import FieldFilter, TableFilters
from canal.log import destination_logger
from canal.parse import healing
from canal.parse.convert import ConvertOptions, EntryConverter
from canal.parse.detecting import detect_master
from canal.parse.events import (
    BinlogEvent,
    FormatDescriptionEvent,
    GtidSetEvent,
    HeartbeatEvent,
    IgnoredEvent,
    PassedEvent,
    QueryEvent,
    RowsEvent,
    ends_before,
    read_end,
)
from canal.parse.heal_marks import HEAL
from canal.parse.reach import StatementReach
from canal.parse.rereads import RowRereads
from canal.parse.retry import ConflictWindow, Restart, RetryState, after_failure, describe_resume, missing_position
from canal.parse.schema_tracking import SchemaTracker
from canal.parse.shared import SharedMember, SharedReaderLeft, Sharing
from canal.parse.source import BinlogSource, RowsForm, SchemaReader
from canal.parse.start_position import (
    StartPosition,
    align_to_transaction,
    find_start_position,
    master_status_start,
    with_gtid_state,
)
from canal.parse.transaction import LogPositionManagerLike, Sink, StreamMerge, TransactionBuffer, restart_position
from canal.parse.unmodeled import StatementPolicy, stop
from canal.parse.watchdog import WATCHDOG
from canal.parse.xa import XA_XID
from canal.parse.xa_heals import AtCommit, XAHeals, commit_heal
from canal.parse.xa_lookback import XAFollower, healed, prepared_rows, recovered_entries
from canal.position import EntryPosition, LogIdentity, LogPosition
from canal.protocol import Entry, EntryType
from canal.schema.history import SchemaHistory
from canal.start_stop import StartStopContext

SourceFactory = Callable[[MasterConfig], BinlogSource]
ErrorCallback = Callable[[BaseException], None]


def default_source_factory(config: InstanceConfig) -> SourceFactory:
    """Sources by address scheme (fake://, file://, host:port): :func:`canal.parse.sources.source_factory`."""
    from canal.parse.sources import source_factory

    return source_factory(config)


class _Interrupted(Exception):
    """The dump was interrupted on purpose (stop or master/standby switch)."""


class EventParser(StartStopContext):
    """Reads one destination's binlog on its own thread and hands whole transactions to ``sink(entries, origin)``,
    which blocks until they are stored (if it raises, the parser retries from the last handed-off position); after
    each hand-off the restart point goes to ``log_position_manager``. ``source_factory(master_config)`` builds an
    unopened :class:`BinlogSource` for the master or the standby (None: :func:`default_source_factory`)."""

    def __init__(
        self,
        destination: str,
        config: InstanceConfig,
        source_factory: SourceFactory | None,
        sink: Sink,
        log_position_manager: LogPositionManagerLike,
        *,
        on_error: ErrorCallback | None = None,
        rng: random.Random | None = None,
        schema_history: SchemaHistory | None = None,
    ) -> None:
        self.destination = destination
        self.config = config
        self.source_factory = source_factory or default_source_factory(config)
        self.sink = sink
        self.log_position_manager = log_position_manager
        self.on_error = on_error
        self.rows_form = RowsForm()  # how the dumps decode row images (Instance.decode_rows_by_column)
        self._log = destination_logger(__name__, destination)
        self._schemas = None if schema_history is None else SchemaTracker(schema_history, self._log)
        self._retry = RetryState(config.retry, rng or random.Random())
        self._conflicts = ConflictWindow()  # replica-id clashes the server reported
        options = ConvertOptions(
            tables=TableFilters.from_strings(config.filter_regex, config.black_regex),
            fields=None
            if not (config.field_filter or config.black_field_filter)
            else FieldFilter.parse(config.field_filter, config.black_field_filter),
            flags=config.filter_flags,
            gtid_mode=config.gtid_mode,
        )
        self._converter = EntryConverter(options)
        self._buffer = TransactionBuffer(
            destination,
            self._hand_off,
            log_position_manager,
            transaction_size=config.transaction_size,
            part_bytes=config.store.part_bytes,
            on_recorded=self._recorded,
        )
        self._converter.savepoints = self._buffer.savepoint  # rows a ROLLBACK TO undid are never handed off
        self._options = options
        self._xa = XAFollower()  # XA COMMITs whose PREPARE lies before the start: their rows are read back
        self._xa_heals = XAHeals()  # heals inside a prepared XA transaction: read again at its XA COMMIT
        # the empty-transaction policy of the sink (EntrySink.drops_empty), set by the assembly: transactions a shared
        # reader left out of this stream count against it without being made into entries
        self.empty_transactions: Callable[[Sequence[int], int], int] | None = None
        # the sink's: whether a hand-off of that many entries and bytes goes in now (None: unknown, and a shared
        # reader never runs this parser's steps on its thread -- it could wait there for room)
        self.room: Callable[[int, int], bool] | None = None
        self._lock = threading.Lock()
        # sharing the master's binlog with the process's other destinations of it (canal.parse.shared)
        member = SharedMember(destination, options.tables) if config.share_reader else None
        self._sharing = Sharing(member, self._lock)
        self._stop = threading.Event()
        self._wake = threading.Event()  # cuts a backoff short (a switch)
        self._thread: threading.Thread | None = None
        self._detector: threading.Thread | None = None
        self._watch_key: int | None = None  # its check on the process's watchdog (canal.parse.watchdog)
        self._last_read = time.monotonic()
        self._dump_began = self._last_read  # when the current dump began reading (connected: an event came since)
        self._dumping = False
        self._connected_once = False  # a dump of this parser opened its source once (a name resolved then)
        self._read_through: int | None = None  # read_through_ms, as far as it was worked out
        self._source: BinlogSource | None = None
        self._active: MasterConfig = config.master
        self._resume: LogPosition | None = None
        self._reset_to_master = False
        self._interrupt_reason: str | None = None
        self._started = False
        self._done = threading.Event()
        self.reconnects = 0
        self.switches = 0
        self.last_error: BaseException | None = None
        self.error: BaseException | None = None
        self.fatal_errors = 0  # counted before `error` is published: a get that raised it sees it counted
        self.handed_off = 0
        # what joins the stream at boundaries (snapshot chunks: canal.snapshot.merge), set by the assembly
        self._merge: StreamMerge | None = None
        # one hand-off at a time (the parser thread's, or a due snapshot chunk's from its reader thread), and where
        # the last one left the stream: (origin, its entries) when it ended at a boundary or heartbeat, else None
        self._hand_off_lock = threading.Lock()
        self._rest: tuple[LogIdentity, list[Entry]] | None = None
        # the last event read, set once its entry is handed off (or it made none); read_position works it out if asked
        self._last_event: BinlogEvent | None = None
        self._read_to: EntryPosition | None = None
        self._read_server_id: int | None = None  # the server_id of the server the dump reads
        # heal="snapshot": the destination's heal policy (canal.snapshot.heal.Healer), set by the instance; None: the
        # changes a copy cannot follow stop typed (statements) or reach it as they are (canal.parse.healing)
        self._heal: StatementPolicy | None = None

    @property
    def heal(self) -> StatementPolicy | None:
        """The heal policy (None: heal=stop)."""
        return self._heal

    @heal.setter
    def heal(self, policy: StatementPolicy | None) -> None:
        self._heal = policy
        self._converter.unmodeled = stop if policy is None else policy

    # -- lifecycle ------------------------------------------------------------------------------------------------

    @property
    def is_started(self) -> bool:
        return self._started

    @property
    def is_running(self) -> bool:
        """The parser thread is alive (started, not stopped, no fatal error)."""
        thread = self._thread
        return thread is not None and thread.is_alive() and self.error is None

    @property
    def active_master(self) -> MasterConfig:
        """The server dumped from now (the master, or the standby after a switch)."""
        return self._active

    @property
    def position(self) -> LogPosition | None:
        """The restart point: the last position handed off (or the first start position)."""
        return self._resume

    @property
    def read_position(self) -> EntryPosition | None:
        """How far the dump has read: the end of the furthest event read (a rotate's next file, a heartbeat's
        coordinates), None before the first. Every event before it has been handed off, or made no entry (a filtered
        table, an XA PREPARE): a reader that wants everything up to a master position waits for this to reach it,
        since its restart point (:attr:`position`) stays at the last boundary's *start*. Its ``server_id`` is the
        server's whose binlog it is in (after a switch to the standby, the standby's)."""
        event = self._last_event
        if event is None:
            return self._read_to
        reached = read_end(event, self._read_server_id)
        known = self._read_to
        if known is None or ends_before(known, reached):
            self._read_to = known = reached  # artificial events (offset 0) and re-reads after a reconnect go back
        return known

    @property
    def connected(self) -> bool:
        """Whether a dump is reading from the server now: it opened and an event (a heartbeat included) came since.
        False before the first, while a failed one waits to be retried, and after a fatal error."""
        return self._dumping and self._last_read > self._dump_began and self.error is None

    @property
    def read_through_ms(self) -> int | None:
        """The master's time (ms since the epoch) up to which this parser has read its binlog: the execute time of
        the last event it read or, when that was a heartbeat -- the server had nothing more to send --, the time the
        heartbeat came. It stands still while the server cannot be read. None before the first event."""
        event, known = self._last_event, self._read_through
        if event is not None:
            if event.__class__ is HeartbeatEvent:
                at: int | None = int((time.time() - (time.monotonic() - self._last_read)) * 1000)
            else:
                at = event.timestamp * 1000 or None  # artificial events carry 0
            if at is not None and (known is None or at > known):
                self._read_through = known = at
        return known

    def start(self) -> None:
        if self._started:
            return
        self._stop.clear()
        self._done.clear()
        self.error = None
        self._resume = self.log_position_manager.get_latest_position(self.destination)
        self._started = True
        self._thread = threading.Thread(target=self._run, name=f"canal-parser-{self.destination}", daemon=True)
        self._thread.start()
        self._watch_key = WATCHDOG.watch(min(self.config.retry.read_timeout_s / 4, 1.0), self._watch)
        if self.config.detecting.enable:
            detect = functools.partial(
                detect_master,
                self.config,
                self.source_factory,
                lambda: self._active,
                self._stop,
                self.switch,
                self._log,
            )
            self._detector = threading.Thread(target=detect, name=f"canal-detecting-{self.destination}", daemon=True)
            self._detector.start()

    def stop(self, timeout: float | None = 10.0) -> None:
        """Stop the thread: closes the source so a blocked dump ends promptly. A blocking sink must be released by
        its owner (stopping the store does)."""
        if not self._started:
            return
        self._started = False
        self._stop.set()
        self._wake.set()
        self._close_source("stop")
        if self._merge is not None:
            with self._hand_off_lock:
                self._rest = None
            self._merge.abort("the parser stopped")
        if self._watch_key is not None:
            WATCHDOG.unwatch(self._watch_key)
            self._watch_key = None
        current = threading.current_thread()
        for thread in (self._thread, self._detector):
            if thread is not None and thread is not current:
                thread.join(timeout)
                if thread.is_alive():
                    self._log.warning(
                        "thread %s did not end within %s s (a sink still blocking?)", thread.name, timeout
                    )
        self._thread = None
        self._detector = None
        self._sharing.unshare()

    @property
    def shared(self) -> bool:
        """Whether the dump reads through the process's shared reader of its master now (:mod:`canal.parse.shared`)."""
        return self._sharing.shared

    def join(self, timeout: float | None = None) -> bool:
        """Wait until the parser thread ends (stop or fatal error); True if it did."""
        return self._done.wait(timeout)

    # -- the dump loop --------------------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            first = True
            while not self._stop.is_set():
                if not first:
                    self.reconnects += 1
                first = False
                try:
                    self._dump_once()
                except _Interrupted as why:
                    if self._stop.is_set():
                        break
                    self._log.info("dump interrupted (%s); reconnecting", why)
                except SharedReaderLeft as why:
                    if self._stop.is_set():
                        break
                    self._log.info("%s; dumping again from the last position handed off", why)
                except Exception as exc:
                    if self._stop.is_set():
                        break
                    self._failed(exc)
        except BaseException as exc:
            self._fatal(exc)
        finally:
            self._done.set()

    def _failed(self, exc: Exception) -> None:
        """A failed dump: decide between retrying (after a backoff) and giving up (raise):
        :func:`~canal.parse.retry.after_failure`."""
        self.last_error = exc
        reason = self._take_interrupt()
        if reason is not None:
            # a switch closed the source under the dump: not a failure
            self._log.info("dump interrupted (%s); reconnecting", reason)
            return
        then = after_failure(
            exc,
            self._retry,
            self._conflicts,
            connected_before=self._connected_once,
            address=self._active.address,
            switched=bool(self.switches) and self.config.gtid_mode,
            resume_at=lambda: describe_resume(self._resume, self._active),
            not_on_server=lambda: missing_position(
                self.source_factory, self._resume, self._active, self.config.gtid_mode, self._log
            ),
            log=self._log,
        )
        if then is Restart.AT_BEGIN:
            self._need_begin = True
        elif then is Restart.AT_MASTER:
            self._resume = None
            self._reset_to_master = True
        else:
            self._backoff(then)

    def _take_interrupt(self) -> str | None:
        with self._lock:
            reason, self._interrupt_reason = self._interrupt_reason, None
        return reason

    def _backoff(self, delay: float) -> None:
        self._wake.clear()
        if self._stop.is_set():
            return
        self._wake.wait(delay)  # set by stop() and by a switch

    def _fatal(self, exc: BaseException) -> None:
        self.fatal_errors += 1
        self.error = exc
        self.last_error = exc
        self._log.error("parser stopped by a fatal error: %s: %s", type(exc).__name__, exc)
        if self.on_error is not None:
            try:
                self.on_error(exc)
            except Exception:
                self._log.exception("the on_error callback failed")

    _need_begin = False

    def _dump_once(self) -> None:
        with self._lock:
            if self._stop.is_set():
                raise _Interrupted("stop")
            active = self._active
            self._interrupt_reason = None  # a switch during a backoff is already taken into account
            source = self.source_factory(active)
            self._source = source
        try:
            source.open()
            self._connected_once = True
            start = self._find_start(source, active)
            if self._resume is None:
                # nothing handed off yet: a reconnect must come back here, not to a newer master position
                self._resume = LogPosition(self._identity(active), start.position, start.rows_done)
            self._log.info("dumping from %s at %s", source.address, start)
            self._converter.reset(start.position, start.rows_done, server_id=source.server_id())
            self._read_server_id = source.server_id()
            # names as the server stores them (lower_case_table_names=1): DDL entries and the history fold them
            lower_case = isinstance(source, SchemaReader) and source.lower_case_names
            self._converter.lower_case_names = lower_case
            self._converter.system_time_zone = source.system_time_zone if isinstance(source, SchemaReader) else None
            self._buffer.clear()
            identity = self._identity(active)
            # where this dump resumes: a heartbeat's rest moves the restart point only past it
            self._buffer.last_position = LogPosition(identity, start.position, start.rows_done)
            if identity != self._buffer.identity:
                self._last_event = self._read_to = None  # another server's binlog: its positions are not comparable
            if self._merge is not None and identity != self._buffer.identity:
                with self._hand_off_lock:
                    self._rest = None
                self._merge.abort(f"the parser now reads {active.address}")  # chunk positions name the old binlog
            if identity != self._buffer.identity:
                self._xa.clear()
                self._xa_heals.clear()
            self._buffer.identity = identity
            request = start.dump_request(heartbeat_period_s=self._heartbeat_period())
            schemas = self._schemas
            if schemas is not None:
                schemas.history.lower_case_names = lower_case
                self._converter.foreign_key_actions = schemas.history.foreign_key_actions
                self._converter.foreign_keys = schemas.history.known_foreign_keys
                marks_table = None if self._merge is None else self._merge.watermark_table
                reach = self._converter.reach
                if reach.history is not schemas.history or reach.skipped != marks_table:
                    self._converter.reach = StatementReach(schemas.history, marks_table)
                request = schemas.prepare(source, start, request)
            converter = self._converter
            convert = converter.convert
            xa = self._xa
            xa_heals = self._xa_heals
            # a restart inside an XA COMMIT's read-back rows (a cursor at its anchor with rows_done N) skips N of them
            recovering_at_start = start.rows_done > 0
            add = self._buffer.add
            rests = start.rows_done == 0 and not start.position.included and start.position.journal_name
            self._converter.rest_after_skip = self._merge is not None  # an included start rests after its boundary
            if rests and self._merge is not None:
                # between transactions with nothing read at the start yet: say the stream rests there, so what waits
                # for a boundary at or before it (a snapshot chunk of an idle server) need not wait for a heartbeat.
                # Only for the merge: a group sink takes a heartbeat for "this member is caught up", which a dump
                # start is not.
                add(self._converter.resting_at(start.position))
            stop = self._stop
            clock = time.monotonic
            heal = self._heal
            tables = self._options.tables
            assert tables is not None  # (the parser's options always filter)
            merge = self._merge
            marks = None if merge is None else merge.watermark_table
            self._last_read = self._dump_began = clock()
            self._dumping = True
            request = attrs.evolve(request, rows_form=self.rows_form)
            events = self._sharing.events(
                source, request, marks, self.rows_form, self._schemas, lambda: self.source_factory(active), self._stop
            )

            checking = schemas is not None and schemas.checking

            def take(event: BinlogEvent) -> None:
                nonlocal recovering_at_start, checking
                self._last_read = clock()
                if event.__class__ is PassedEvent:
                    assert isinstance(event, PassedEvent)
                    passed_merge = self._merge
                    converter.take_passed(
                        event, add, self.empty_transactions, passed_merge is not None and passed_merge.active
                    )
                    if checking:
                        assert schemas is not None
                        checking = schemas.passed(event)
                    self._last_event = event
                    if stop.is_set():
                        raise _Interrupted("stop")
                    return
                if marks is not None and event.__class__ is RowsEvent:
                    table = event.table
                    if table.table == marks[1] and table.schema == marks[0]:
                        assert merge is not None
                        merge.observe_marks(event)
                        return  # a snapshot's watermark (canal.snapshot.marks): not a change to hand off
                before = converter.anchor
                entry = convert(event)  # a statement the capture cannot follow stops here (canal.parse.unmodeled)
                filtered = converter.take_filtered() if entry is None else None  # a query filter flag's
                if heal is not None or (schemas is not None and event.__class__ is QueryEvent):
                    # the history follows a DDL before its entry goes out; a change a copy cannot follow is healed
                    # (not a statement on a session's temporary tables alone: no table of the schema changed)
                    own = converter.session_only and event.__class__ is QueryEvent
                    entry = healing.followed(filtered or entry, event, None if own else schemas, heal, tables.matches)
                    if filtered is not None and (entry is None or HEAL not in entry.header.props):
                        entry = None  # the flags choose what is delivered, not what is followed: a heal goes out
                if entry is not None and event.__class__ is RowsEvent:
                    # rows a partial UPDATE leaves a copy unable to make exact are read again (or stop typed)
                    history = None if schemas is None else schemas.history
                    reread = self.rereads
                    if reread is not None and (xid := entry.header.props.get(XA_XID)) is not None:
                        reread = xa_heals.rereads(xid)  # prepared: read at its XA COMMIT (canal.parse.xa_heals)
                    healing.reread_rows(entry, history, converter.reading, reread)
                if entry is not None:
                    if heal is not None and entry.header.props and (again := xa_heals.follow(entry)) is not None:
                        self._read_at_commit(heal, again)  # read again after the XA COMMIT (canal.parse.xa_heals)
                    if entry.header.props and (xid := xa.unseen_commit(entry)) is not None:
                        # an XA COMMIT whose PREPARE lies before the start: its rows, read back, go with it
                        skip = start.rows_done if recovering_at_start else 0
                        self._hand_off_recovered(source, xid, entry, before, skip)
                    else:
                        add(entry)
                    recovering_at_start = False
                elif merge is not None and event.__class__ in _HEADER_EVENTS and not len(self._buffer):
                    self._rest_after(event, merge)
                if checking:  # a first start's layouts, checked as the dump reads (parse.schema_tracking)
                    assert schemas is not None
                    checking = schemas.passed(event)
                self._last_event = event
                if stop.is_set():
                    raise _Interrupted("stop")

            member = self._sharing.member
            if member is not None:  # a reader may take its events through these steps on its own thread
                member.step, member.ready = take, self._steps_ready
            try:
                for event in events:
                    take(event)
            finally:
                if member is not None:
                    member.step = None
            if stop.is_set():
                raise _Interrupted("stop")
            reason = self._take_interrupt()
            if reason is not None:
                raise _Interrupted(reason)
            raise SourceError(f"the dump from {source.address} ended")
        finally:
            self._dumping = False
            with self._lock:
                self._source = None
                stream, self._sharing.stream = self._sharing.stream, None
            if stream is not None:
                stream.close()
            try:
                source.close()
            except Exception as exc:  # a broken connection may fail to close; it is dropped either way
                self._log.debug("closing the source failed: %s", exc)

    def _steps_ready(self, entries: int, size: int) -> bool:
        """Whether a shared reader may take events through this parser's steps on its own thread now: no snapshot
        merges into the stream (its hand-offs may wait for a chunk's turn) and no stop, and -- for ``entries`` --
        the store takes what they make with what the buffer holds, without waiting."""
        room, merge = self.room, self._merge
        if room is None or self._stop.is_set() or (merge is not None and merge.active):
            return False
        return not entries or room(entries + len(self._buffer), size + self._buffer.byte_size)

    def _hand_off_recovered(
        self, source: BinlogSource, xid: str, commit: Entry, anchor: EntryPosition, skip: int
    ) -> None:
        """Hand off the XA COMMIT ``commit`` after the rows of its PREPARE (read back from the server's binlog), as
        entries of its transaction: a part of them handed off leaves the cursor at ``anchor`` with that many rows done,
        and a dump resumed there skips them (``skip``)."""
        where = EntryPosition(commit.header.log_file, commit.header.log_offset)
        self._in_sink = True  # the dump waits while the binlog is read back: not a stalled server (_watch)
        try:
            group = prepared_rows(source, self._options, xid, where, self._log, self._converter.reach)
        finally:
            self._in_sink = False
            self._last_read = time.monotonic()
        if group.heals:  # statements that heal: at the commit, where their changes become visible
            if self._heal is None:
                raise group.heals[0].error()
            tables = tuple(dict.fromkeys(t for statement in group.heals for t in statement.heal_tables))
            group = healed(group, self._heal(commit_heal(xid, commit, tables)))
        add = self._buffer.add
        for entry in recovered_entries(group, commit, anchor, skip):
            add(entry)

    def _read_at_commit(self, heal: StatementPolicy, again: AtCommit) -> None:
        """What an XA COMMIT reads again (:class:`~canal.parse.xa_heals.AtCommit`), before its entry goes out."""
        if again.heal is not None:
            heal(again.heal)  # no mark: the one inside the transaction voids the tables at the XA COMMIT
        rereads = self.rereads
        for table, keys in again.rereads:
            if rereads is not None:
                rereads(table, keys)

    def _heartbeat_period(self) -> float:
        """Idle dumps get a server heartbeat (and the sink a HEARTBEAT entry) this often: the detecting interval,
        or the retry heartbeat period if shorter, and always well inside the read timeout."""
        period = self.config.detecting.interval_s
        retry = self.config.retry
        if retry.heartbeat_period_s > 0:
            period = min(period, retry.heartbeat_period_s)
        return min(period, retry.read_timeout_s / 2)

    def _identity(self, server: MasterConfig) -> LogIdentity:
        """Positions name the server by its configured address (as consumer cursors do), not the source's form."""
        return LogIdentity(server.address, self.config.slave_id if self.config.slave_id is not None else -1)

    def _find_start(self, source: BinlogSource, active: MasterConfig) -> StartPosition:
        if self._reset_to_master:
            self._reset_to_master = False
            return master_status_start(source, "reset after a purged binlog: master status")
        start = find_start_position(
            source,
            address=active.address,
            saved=self._resume,
            configured=active,
            gtid_mode=self.config.gtid_mode,
            fallback_interval_s=self.config.fallback_interval_s,
            log=self._log,
        )
        if self._need_begin:
            self._need_begin = False
            moved = align_to_transaction(source, start, self._log)
            if moved.position == start.position:
                raise CanalError(f"the dump start {start} lies inside a transaction whose start cannot be found")
            start = moved
            self._resume = LogPosition(self._identity(active), moved.position, 0)
        if self.config.gtid_mode:
            # the cursor carries the server's whole GTID state at the start, every replication domain included
            start = with_gtid_state(source, start, self._log)
        return start

    # -- hand-off -------------------------------------------------------------------------------------------------

    _in_sink = False

    @property
    def merge(self) -> StreamMerge | None:
        return self._merge

    @merge.setter
    def merge(self, merge: StreamMerge | None) -> None:
        self._merge = merge
        self._converter.reading = None if merge is None else merge.reading  # a RENAME of one it reads heals
        if merge is not None:
            merge.attach(self._hand_off_due)

    rereads: RowRereads | None = None
    """How the destination reads rows again that a partial UPDATE leaves a copy unable to make exact
    (:mod:`canal.parse.rereads`); None: such an UPDATE stops typed (``heal="stop"``, or no snapshots)."""

    @property
    def schema_history(self) -> SchemaHistory | None:
        """The schema history the parser follows the binlog with (None: none is kept)."""
        return None if self._schemas is None else self._schemas.history

    def _hand_off(self, entries: list[Entry], origin: LogIdentity) -> None:
        self._in_sink = True
        try:
            with self._hand_off_lock:
                merge = self._merge
                if merge is not None and merge.stream_ended:
                    # snapshot mode initial_only: the stream ended with the snapshot's last entry
                    self._log.info("the snapshot is complete and the stream ends with it: the parser stops")
                    self._stop.set()
                    raise _Interrupted("the stream ended with the snapshot")
                active = merge is not None and merge.active
                if active:
                    assert merge is not None
                    entries = merge.tag(entries)  # an unfinished snapshot's progress rides with every entry
                self.sink(entries, origin)
                last = entries[-1]
                self._rest = (origin, entries) if last.entry_type is EntryType.HEARTBEAT or last.is_boundary else None
                if active:
                    assert merge is not None
                    resume = restart_position(entries, origin) or self._resume
                    self.handed_off += merge.after_hand_off(entries, resume, lambda chunk: self.sink(chunk, origin))
        finally:
            self._in_sink = False
            self._last_read = time.monotonic()
        self.handed_off += len(entries)

    def _hand_off_due(self) -> None:
        """Hand off, from the calling thread, the merge's entries due at the boundary the parser rests at (none
        while it is inside a transaction or has handed off nothing since the merge became active)."""
        merge = self._merge
        if merge is None:
            return
        with self._hand_off_lock:
            rest = self._rest
            if rest is None or not self._started:
                return
            origin, entries = rest
            resume = restart_position(entries, origin) or self._resume
            self.handed_off += merge.due(entries[-1], resume, lambda chunk: self.sink(chunk, origin))

    def _rest_after(self, event: BinlogEvent, merge: StreamMerge) -> None:
        """An event between transactions that makes no entry -- a binlog file's header events (its format
        description, GTID list, MariaDB's Binlog_checkpoint), which follow a rotation's rest at the file's start: the
        stream rests after it. So a snapshot chunk placed there (read just after the rotation, on a server that
        writes nothing more) joins now, not at the next transaction or server heartbeat."""
        if not merge.active or not self._converter.between_transactions:
            return
        with self._hand_off_lock:
            rest = self._rest
            if rest is None or not self._started:
                return
            origin, entries = rest
            last = entries[-1].header
            at = EntryPosition(event.log_file, event.next_offset)
            rested = EntryPosition(last.log_file, last.next_offset if entries[-1].is_boundary else last.log_offset)
            if not last.log_file or not ends_before(rested, at):
                return  # only forward (a dump's artificial events carry offset 0)
            resting = self._converter.resting_at(at)
            self._rest = (origin, [resting])
            resume = restart_position(entries, origin) or self._resume
            self.handed_off += merge.due(resting, resume, lambda chunk: self.sink(chunk, origin))

    def _recorded(self, position: LogPosition) -> None:
        self._resume = position
        self._retry.progress()

    # -- detecting and the master/standby switch -----------------------------------------------------------------

    def _close_source(self, reason: str) -> None:
        with self._lock:
            source = self._source
            stream = self._sharing.stream
        if stream is not None:
            stream.close()
        if source is not None:
            try:
                source.close()
            except Exception as exc:  # closing only cuts a dump short; the dump itself reports and retries
                self._log.debug("closing the source (%s) failed: %s", reason, exc)

    def switch(self) -> MasterConfig:
        """Switch to the other configured server now (as a detecting failure would); returns the new one."""
        standby = self.config.standby
        if standby is None:
            raise CanalError(f"destination {self.destination!r} has no standby to switch to")
        with self._lock:
            self._active = standby if self._active is self.config.master else self.config.master
            new = self._active
            self._interrupt_reason = f"switch to {new.address}"
            self.switches += 1
        self._log.warning("switching the dump to %s", new.address)
        self._wake.set()
        self._close_source("switch")
        return new

    def _watch(self) -> None:
        """The watchdog's check, every quarter of ``read_timeout_s`` (at most a second): a dump that received nothing
        (not even a heartbeat) for that long is a dead connection, closed on a thread of its own (closing may wait on
        the network; the watchdog checks every parser of the process)."""
        if not self._dumping or self._stop.is_set():
            return
        timeout = self.config.retry.read_timeout_s
        last = self._last_read
        stream = self._sharing.stream
        if stream is not None:
            # sharing: the reader's connection is the one it reads through, and it is alive while the reader receives
            # (a transaction of other destinations' tables goes on, or heartbeats come), whatever it passes on here
            read_at = stream.read_at
            if read_at is not None and read_at > last:
                last = read_at
        idle = time.monotonic() - last
        # the sink may block (a full store): only a dump waiting on the server counts as stalled
        if idle > timeout and not self._in_sink:
            self._log.warning("nothing received from %s for %.1f s: reconnecting", self._active.address, idle)
            self._last_read = time.monotonic()
            name = f"canal-read-timeout-{self.destination}"
            threading.Thread(target=self._close_source, args=("read timeout",), name=name, daemon=True).start()


_HEADER_EVENTS = frozenset({FormatDescriptionEvent, GtidSetEvent, IgnoredEvent})
"""Events that make no entry between transactions: a rest moves past them (:meth:`EventParser._rest_after`)."""
