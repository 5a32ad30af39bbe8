"""The shared reader: one dump of a server for the destinations of the process that read it
(:mod:`canal.parse.shared` tells what it does and how a destination joins and leaves it), and the process's readers
(:data:`READERS`)."""

from __future__ import annotations

import bisect
import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Final

import attrs

from canal.errors import SchemaError
from canal.gtid import gtid_step
from canal.parse.events import (
    UNDECODED,
    BinlogEvent,
    FormatDescriptionEvent,
    GtidEvent,
    HeartbeatEvent,
    IgnoredEvent,
    LayoutSeen,
    PassedEvent,
    PassedTransaction,
    QueryEvent,
    RotateEvent,
    RowsEvent,
    TableMapEvent,
    XidEvent,
)
from canal.parse.schema_tracking import SchemaTracker
from canal.parse.shared.groups import GroupTracker, Position
from canal.parse.shared.member import SharedMember, SharedReaderLeft, layout_seen
from canal.parse.shared.queue import PASSED_EVENTS, Subscription
from canal.parse.shared.routes import Routes
from canal.parse.source import BinlogSource, DumpRequest, RowsForm
from canal.position import journal_number

log = logging.getLogger(__name__)

QUEUE_EVENTS: Final = 8192
"""Events the reader holds for one destination before it waits for room."""
SLOW_WAIT_S: Final = 1.0
"""How long the reader waits for room in a full destination's queue before that destination leaves."""
REJOIN_AFTER_S: Final = 5.0
"""How long a destination that left for being slow reads alone before it may join again."""
PREFIX_EVENTS: Final = 4096
"""Events of an open transaction kept for a destination that turns out to capture a table of it; past that the
transaction goes to every destination (the memory stays bounded)."""
RING_EVENTS: Final = 8192
RING_BYTES: Final = 4 << 20
"""The reader's recent events (and their binlog bytes), from which a destination behind it can join."""
AHEAD_BYTES: Final = 1 << 20
"""A destination this far ahead of the reader in the same file waits for it rather than read alone."""
FLUSH_S: Final = 1.0
"""Each destination learns of the transactions left out of its stream at least this often."""
HEARTBEAT_S: Final = 1.0
"""The reader's dump asks the server for a heartbeat this often when idle (or as often as its first destination)."""

_PASSED_KINDS: Final = (GtidEvent, QueryEvent, XidEvent)


@attrs.define(slots=True)
class _Group:
    seq: int
    events: list[BinlogEvent]  # its events so far (None once given to everyone)
    begin_ms: int = 0
    everyone: bool = False  # given to every destination (not plain, or too long to keep)
    given: list[Subscription] = attrs.field(factory=list)


class SharedReader:
    """One dump of a server for the destinations subscribed to it (:mod:`canal.parse.shared`), made for ``first``:
    from its request, and -- when it decodes with a schema history -- with a fork of its history."""

    def __init__(
        self,
        readers: SharedReaders,
        key: str,
        source: BinlogSource,
        request: DumpRequest,
        start: Position | None,
        first: SharedMember,
    ) -> None:
        self.key = key
        self._readers = readers
        self._source = source
        # its dump is no one destination's: a replica id of its own, not the configured one of the destination whose
        # source it is (which that destination takes with it when it leaves the process)
        dump_as = getattr(source, "dump_as", None)
        if dump_as is not None:
            dump_as(f"shared reader of {key}")
        self._form = RowsForm()
        # its own schema history (None: it decodes as a destination without one does): a fork of the first
        # destination's, which follows every DDL it reads before it decodes the next event (canal.parse.shared.member)
        self._schemas: SchemaTracker | None = None if first.schemas is None else first.schemas.fork()
        self._seen: dict[tuple[str, str], tuple[int, LayoutSeen]] = {}  # by table: its history's version, what it held
        self._gtid_text = request.gtid_set  # the GTID set its dump starts from (None: a file position)
        # heartbeats as often as the most often any destination of its key asks for them (SharedReaders.open)
        self.heartbeat_s = min(request.heartbeat_period_s or HEARTBEAT_S, HEARTBEAT_S)
        self._request = attrs.evolve(
            request,
            schema=None if self._schemas is None else self._schemas.history,
            rows_form=self._form,
            decode_table=self._decodes,
            heartbeat_period_s=self.heartbeat_s,
            blocking=True,
        )
        # when its dump last received an event (a heartbeat included): a destination's watchdog counts that as its
        # own dump's reads (canal.parse.parser), since it is the connection it reads through
        self.last_read = time.monotonic()
        self._cond = threading.Condition()
        self._subs: tuple[Subscription, ...] = ()
        self._ahead: dict[Position, list[Subscription]] = {}
        self._waiting: tuple[Subscription, ...] = ()  # the subscriptions in _ahead
        self._routes: Routes[Subscription] = Routes(())
        # the subscriptions whose own dump starts otherwise than the reader's (a file position, another GTID set):
        # a group their dump would leave out, and a jump of the reader's dump past one, make them leave
        self._other_starts: tuple[Subscription, ...] = ()
        self._tracker = GroupTracker(start)
        self._group: _Group | None = None
        # whether it is inside a group of events (destinations given some of it are woken at its end): _group is not
        # None, as a flag for Subscription.push, which asks at every event it queues
        self.in_group = False
        # the destinations given events of the open group while their parser waited, woken when it ends
        self.unwoken: set[Subscription] = set()
        self._inline_due: list[Subscription] = []  # given a whole group while parked: converted here
        self.inlined = 0  # runs of a destination's steps on this thread (canal.parse.shared.queue)
        self.room_at = QUEUE_EVENTS // 2  # a queue the reader waits for has room again at this many events
        self._seq = 0  # groups opened
        # the plain groups no one (or not everyone) got, in binlog order: their sequence numbers, the transactions
        # and their begin times side by side, so that telling a destination of a run of them is two bisections and
        # slices rather than a walk over every sequence number
        self._passed_seqs: list[int] = []
        self._passed: list[PassedTransaction] = []
        self._passed_begins: list[int] = []
        # each: the event, the place between groups it starts at (None: inside one) and its bytes -- a tuple, not an
        # object of a class: thousands are held, and every collection of the interpreter's garbage walks them
        self._ring: collections.deque[tuple[BinlogEvent, Position | None, int]] = collections.deque()
        self._ring_index: dict[Position, int] = {}
        self._ring_base = 0  # the index of _ring[0] since the reader began
        self._ring_bytes = 0
        self._flushed = time.monotonic()
        self._unshared: set[tuple[str, str]] = set()  # tables whose rows need a schema history
        # the statement being read maps a table some destination captures: its rows of every table are decoded (a
        # parent's rows tell a destination capturing its child whether a foreign key's action reached it)
        self._maps_captured = False
        self._statement_maps: list[tuple[str, str]] = []  # the tables the statement being read maps
        self._fdes: dict[int, BinlogEvent] = {}  # the format description of each recent file, by journal number
        self.waiting_for: Subscription | None = None
        self.ended = False
        self._quiet = False  # it ends because no one is left: its dump's end is no news
        self.error: BaseException | None = None
        self.events_read = 0
        # named by the server and login it reads (the rest of the key: its settings)
        self._thread = threading.Thread(
            target=self._run, name=f"canal-shared-reader-{key.split(' ', 1)[0]}", daemon=True
        )

    # -- lifecycle -----------------------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    @property
    def subscriptions(self) -> tuple[Subscription, ...]:
        return self._subs

    def _run(self) -> None:
        error: BaseException | None = None
        ended = False  # the dump ended of itself (a server shutting down sends its end): each stream ends so too
        try:
            self._source.open()
            for event in self._source.dump(self._request):
                with self._cond:
                    if not self._subs and not self._ahead:
                        break
                    self._dispatch(event)
                    due, self._inline_due = self._inline_due, []
                for sub in due:  # outside the lock: a step may call back into the reader (a destination leaving)
                    if not sub.run_inline():
                        sub.wake.set()
            else:
                ended = True
        except BaseException as exc:  # every subscriber gets it, as its own dump would have raised it
            error = exc
        finally:
            self._end(error, ended=ended)
            try:
                self._source.close()
            except Exception as exc:  # closing a broken connection may fail: it is dropped either way
                log.debug("shared reader %s: closing its source failed: %s", self.key, exc)

    def _end(self, error: BaseException | None, *, ended: bool = False) -> None:
        """No more events: every subscription ends with ``error``, or -- when the dump ``ended`` of itself -- just ends,
        as a destination's own dump would (its parser takes that for a failed dump); else it leaves the reader."""
        self._readers.forget(self)
        with self._cond:
            self.ended = True
            self.error = error
            subs = [*self._subs, *self._waiting]
            self._subs = ()
            self._ahead.clear()
            self._waiting = ()
            self._cond.notify_all()
        if error is not None and not self._quiet:
            log.info("shared reader %s ended: %s: %s", self.key, type(error).__name__, error)
        end = error if error is not None or ended else SharedReaderLeft(f"the shared reader of {self.key} ended")
        for sub in subs:
            sub.finish(end)

    def leave(self, sub: Subscription) -> None:
        """``sub`` leaves (its destination stops or switches); the reader ends when no one is left."""
        with self._cond:
            self._drop(sub)
            empty = not self._subs and not self._ahead and not self.ended
            if empty:
                self.ended = True  # no one joins a reader that is ending
                self._quiet = True
            self._cond.notify_all()
        if empty:
            self._readers.forget(self)
            self._source.close()  # ends the dump (its server thread too): the reader thread ends

    def _drop(self, sub: Subscription) -> None:
        sub.active = False
        if sub in self._subs:
            self._subs = tuple(s for s in self._subs if s is not sub)
        for place, waiting in list(self._ahead.items()):
            if sub in waiting:
                waiting.remove(sub)
                if not waiting:
                    del self._ahead[place]
        self._changed()

    def _eject(self, sub: Subscription, why: str, *, rejoin_after_s: float = 0.0) -> None:
        """``sub`` leaves and reads alone (for at least ``rejoin_after_s``) from its last handed-off position."""
        log.info("[%s] leaves the shared reader of %s: %s", sub.member.destination, self.key, why)
        if rejoin_after_s:
            sub.member.rejoin_at = time.monotonic() + rejoin_after_s
        self._drop(sub)
        sub.finish(SharedReaderLeft(f"left the shared reader of {self.key}: {why}"))

    def diverged(self, sub: Subscription, why: str) -> None:
        """``sub``'s destination holds another layout of a table it captures than the reader decoded with (its
        parser found it, :mod:`canal.parse.shared.queue`): it reads alone, where its own history decodes, and may
        join again :data:`REJOIN_AFTER_S` later."""
        with self._cond:
            if sub.active:
                self._eject(sub, why, rejoin_after_s=REJOIN_AFTER_S)
            self._cond.notify_all()

    def _changed(self) -> None:
        """The subscriptions changed: routes (:mod:`canal.parse.shared.routes`: a filter per table and destination
        once, not again on every join), the rows form and the subscriptions whose dump starts otherwise follow."""
        self._waiting = tuple(s for w in self._ahead.values() for s in w)
        self._routes = Routes((*self._subs, *self._waiting), self._routes)
        self._form.columnar = any(s.member.rows_form.columnar for s in (*self._subs, *self._waiting))
        self._other_starts = tuple(s for s in self._subs if s.member.gtid_text != self._gtid_text)

    def room(self) -> None:
        """The subscription the reader waits for has room again (called from its parser thread)."""
        with self._cond:
            self._cond.notify_all()

    # -- joining -------------------------------------------------------------------------------------------------

    def may_join(self, at: Position) -> bool:
        """A quick look, without the lock, whether a destination at ``at`` could join now."""
        tracker = self._tracker
        return not self.ended and ((tracker.between and tracker.next_start == at) or at in self._ring_index)

    def subscribe(
        self, member: SharedMember, at: Position | None, *, first: bool = False, starts: bool = True
    ) -> Subscription | None:
        """A subscription for a destination whose next event starts at ``at`` (between groups): from where the reader
        stands or stood, or from ahead of it; None when it cannot join there (it reads alone). ``starts``: its dump
        starts there (it is given what a dump begins with, :meth:`_prelude`); else its own dump went on to there."""
        with self._cond:
            if self.ended:
                return None
            if member.tables is not None and any(member.wants(*name) for name in self._unshared):
                return None
            if 0 < member.heartbeat_s < self.heartbeat_s:
                return None  # its dump would hear from an idle server more often: alone, it never counts it dead
            sub = Subscription(self, member)
            tracker = self._tracker
            if first:
                self._attach(sub)
                return sub
            if at is None:
                return None
            prelude = self._prelude(at) if starts else []
            if prelude is None:
                return None
            if tracker.between and tracker.next_start == at:
                for event in prelude:
                    sub.push(event)
                self._attach(sub)
                return sub
            index = self._ring_index.get(at)
            if index is not None:
                held = [h[0] for h in list(self._ring)[index - self._ring_base :]]
                undecoded = _undecoded_for(member, held)
                if undecoded:
                    return None  # rows it needs were not decoded then: it joins later
                if member.gtid_text != self._gtid_text and any(
                    isinstance(e, GtidEvent) and member.skips(e.gtid) for e in held
                ):
                    return None  # its own dump leaves out a group held there: it goes on alone past it
                if undecoded is None:
                    self._maps_captured = True  # it joins inside a statement mapping a table it captures
                for event in prelude:
                    sub.push(event)
                for event in held:
                    sub.push(event)
                self._attach(sub)
                return sub
            here = tracker.next_start
            if here is not None and at[0] == here[0] and 0 < at[1] - here[1] <= AHEAD_BYTES:
                for event in prelude:
                    sub.push(event)
                self._ahead.setdefault(at, []).append(sub)
                self._changed()
                return sub
            return None

    def _prelude(self, at: Position) -> list[BinlogEvent] | None:
        """What a dump of the server starting at ``at`` begins with: the artificial rotate naming the place, and --
        past the file's start, where the dump reads it -- the format description event of its file, sent as a server
        sends it there (no place of its own; its time gives a configured start its time). None when the reader has
        not read that file's format description (it cannot give the joiner what its own dump would)."""
        fde = self._fdes.get(at[0])
        if fde is None:
            return None
        rotate = RotateEvent(
            log_file=fde.log_file,
            offset=0,
            next_offset=0,
            timestamp=0,
            server_id=fde.server_id,
            next_file=fde.log_file,
            next_position=at[1],
            artificial=True,
        )
        return [rotate] if at[1] <= 4 else [rotate, attrs.evolve(fde, offset=0, next_offset=0)]

    def _attach(self, sub: Subscription) -> None:
        """``sub`` from now on, having been given everything of the stream up to where the reader stands."""
        group = self._group
        sub.attached = True
        sub.next_seq = self._seq + 1 if group is None else group.seq + 1
        if group is not None:
            # it joined where the reader held the group's start: it has every event of it so far
            sub.group_seq = group.seq
            group.given.append(sub)
        self._subs = (*self._subs, sub)
        self._changed()

    # -- routing (the reader thread, under the lock) -------------------------------------------------------------

    def _decodes(self, schema: str, table: str) -> bool:
        """DumpRequest.decode_table: rows of a table some destination captures (or waits to), and every row of a
        statement that maps such a table. A destination reading alone decodes every row: an UPDATE of a parent it
        leaves out, whose rows change no column a captured child references, reached no child
        (:func:`canal.parse.cascade.references_unchanged`) -- undecoded, it would heal (or stop) the child."""
        return self._maps_captured or bool(self._route(schema, table))

    def _route(self, schema: str, table: str) -> tuple[Subscription, ...]:
        """The subscriptions capturing a table (those waiting ahead included); also called by the decoder, without
        the lock (:mod:`canal.parse.shared.routes`)."""
        return self._routes(schema, table)

    def _dispatch(self, event: BinlogEvent) -> None:
        self.events_read += 1
        cls = event.__class__
        ends_statement = False
        if cls is FormatDescriptionEvent:
            fdes = self._fdes
            fdes[journal_number(event.log_file)] = event
            if len(fdes) > 8:
                del fdes[min(fdes)]
        elif cls is TableMapEvent:
            assert isinstance(event, TableMapEvent)
            self._statement_maps.append((event.schema, event.table))
            if not self._maps_captured and self._route(event.schema, event.table):
                self._maps_captured = True  # the statement's rows, the tables it does not capture included, decode
            if self._schemas is not None:
                event = self._stamped(event)
        elif cls is RowsEvent:
            assert isinstance(event, RowsEvent)
            if event.end_of_statement:
                self._maps_captured = False
                ends_statement = True
        elif cls is QueryEvent and self._schemas is not None:
            assert isinstance(event, QueryEvent)
            self._follow(event)
        tracker = self._tracker
        before = tracker.next_start if tracker.between else None
        tracker.follow(event)
        if tracker.jumped:
            self._jumped(event)
        at = before if tracker.continuous else None
        if self._ahead:
            self._arrive(at, event)
        if tracker.opened and self._statement_maps:  # a statement that never ended (a group that never did)
            self._statement_maps.clear()
            self._maps_captured = False
        if tracker.opened and self._group is not None:
            # a group that never ended, before this event is held: a destination joining from the events held
            # while the reader waits for room here has the group's events, and not this one
            self._abandon(self._group)
        self._hold(event, at)
        if tracker.opened:
            if cls is GtidEvent and self._other_starts:
                assert isinstance(event, GtidEvent)
                self._skipped_by_some(event)
            self._open()
        group = self._group
        if group is None:
            self._to_everyone(event)
        else:
            self._in_group(group, event)
            if tracker.ended:
                self._close(group)
        if ends_statement:  # what a destination is given of the statement was checked against its maps (_give)
            self._statement_maps.clear()
        now = self.last_read = time.monotonic()
        if now - self._flushed >= FLUSH_S:
            self._flush_all(now)
        if self._group is None and self.unwoken:
            if group is not None and not group.everyone:
                # a plain transaction ended: converted on this thread for the parsers that wait (shared.queue). Any
                # other group (a DDL, XA, a statement) goes to their own threads: what it does there -- a schema
                # history written, a binlog read back -- may wait on I/O
                self._inline_due.extend(self.unwoken)
                self.unwoken.clear()
            else:
                self._wake_unwoken()

    def _stamped(self, event: TableMapEvent) -> TableMapEvent:
        """The table map with what the reader's schema history holds of its table -- what the decoder was given for
        it (:class:`~canal.parse.events.LayoutSeen`): each destination capturing the table checks it against its own
        history before it takes the map (:mod:`canal.parse.shared.member`)."""
        schemas = self._schemas
        assert schemas is not None
        history = schemas.history
        key = (event.schema, event.table)
        known = self._seen.get(key)
        if known is None or known[0] != history.version:
            if len(self._seen) >= RING_EVENTS:
                self._seen.clear()
            known = self._seen[key] = (history.version, layout_seen(history, *key))
        return TableMapEvent(
            log_file=event.log_file,
            offset=event.offset,
            next_offset=event.next_offset,
            timestamp=event.timestamp,
            server_id=event.server_id,
            table_id=event.table_id,
            schema=event.schema,
            table=event.table,
            table_schema=event.table_schema,
            seen=known[1],
        )

    def _follow(self, event: QueryEvent) -> None:
        """The reader's history follows a statement before the next event is decoded, as a destination's does alone.
        One it cannot follow leaves its decode unknown from here: every destination reads alone past it (its own
        history decides), and may join again :data:`REJOIN_AFTER_S` later."""
        schemas = self._schemas
        assert schemas is not None
        try:
            schemas.follow(event)
        except SchemaError as exc:
            for sub in (*self._subs, *self._waiting):
                sub.member.rejoin_at = time.monotonic() + REJOIN_AFTER_S
            raise SharedReaderLeft(
                f"the shared reader of {self.key} cannot follow the statement at {event.log_file}:{event.offset} "
                f"in its schema history ({exc})"
            ) from exc

    def _jumped(self, event: BinlogEvent) -> None:
        """The dump went on past where it stood: it is one from a GTID set, which left out the groups the set holds.
        A destination whose own dump starts otherwise may not have left them out: it leaves before this event, and
        no destination joins at a place before it."""
        self._ring_index.clear()
        for sub in self._other_starts:
            self._eject(sub, f"the reader's dump left out what lies before {event.log_file}:{event.offset}")

    def _skipped_by_some(self, event: GtidEvent) -> None:
        """A group opens: a destination whose own dump would leave it out (its GTID set holds it) leaves first."""
        step = gtid_step(event.gtid)  # read once for every destination
        for sub in self._other_starts:
            if sub.member.skips(event.gtid, step):
                self._eject(sub, f"its own dump leaves out the group of GTID {event.gtid}")

    def _wake_unwoken(self) -> None:
        for sub in self.unwoken:
            sub.wake.set()
        self.unwoken.clear()

    def _arrive(self, at: Position | None, event: BinlogEvent) -> None:
        """Destinations waiting ahead: the ones at ``at`` join -- or, at a heartbeat, those where the reader rests
        (a dump from a GTID set reads on over what it leaves out, and its heartbeats say where it got to) --; the
        ones the reader passed read alone."""
        tracker = self._tracker
        here = tracker.next_start
        rests = event.__class__ is HeartbeatEvent and tracker.between
        for place in list(self._ahead):
            if at == place or (rests and place == here):
                for sub in self._ahead.pop(place):
                    self._attach(sub)
            elif here is not None and (place[0] < here[0] or (place[0] == here[0] and place[1] < here[1])):
                for sub in self._ahead.pop(place):
                    self._eject(sub, "the reader passed the point it waited at")

    def _hold(self, event: BinlogEvent, joinable: Position | None) -> None:
        ring = self._ring
        length = event.next_offset - event.offset  # BinlogEvent.length, without its call: it runs for every event
        if length < 0:
            length = 0
        ring.append((event, joinable, length))
        if joinable is not None:
            self._ring_index[joinable] = self._ring_base + len(ring) - 1
        self._ring_bytes += length
        while len(ring) > RING_EVENTS or self._ring_bytes > RING_BYTES:
            _, place, length = ring.popleft()
            self._ring_base += 1
            self._ring_bytes -= length
            if place is not None:
                self._ring_index.pop(place, None)

    def _abandon(self, group: _Group) -> None:
        """A group that never ended (another opens): whoever reads the stream reads it whole."""
        if not group.everyone:
            self._give_everyone(group)
        self._wake_unwoken()  # and the parsers' own threads take it

    def _open(self) -> None:
        self._seq += 1
        self._group = _Group(self._seq, [])
        self.in_group = True

    def _in_group(self, group: _Group, event: BinlogEvent) -> None:
        tracker = self._tracker
        if tracker.begin is event:
            group.begin_ms = event.timestamp * 1000
        given = len(group.given)
        if not group.everyone:
            if not tracker.plain or len(group.events) >= PREFIX_EVENTS:
                self._give_everyone(group)  # what came before this event; this one follows below
                given = len(group.given)
            else:
                cls = event.__class__
                if cls is IgnoredEvent:
                    # an annotation of rows (MariaDB logs one for each statement): no destination makes an entry of
                    # it, nor moves a position it hands off; it is left out of the plain transaction it is given
                    return
                group.events.append(event)
                if cls is RowsEvent or cls is TableMapEvent:
                    # a table's capturers get the transaction from its first event, this one included
                    self._give_capturers(group, event)
        # those given the group before this event (not those just given it with their prefix), as they are now: a
        # wait for room in one's queue lets a destination join, and one joining from the events the reader holds
        # gets this event there and is added to the group's list
        for sub in group.given[:given]:
            self._give(sub, event)

    def _give_capturers(self, group: _Group, event: BinlogEvent) -> None:
        table: Any = event.table if isinstance(event, RowsEvent) else event
        name = (table.schema, table.table)
        if isinstance(event, RowsEvent) and event.schema_error is not None:
            for sub in self._route(*name):
                self._eject(sub, f"its rows of {name[0]}.{name[1]} need its schema history")
            self._unshared.add(name)
            return
        for sub in self._route(*name):  # not those waiting ahead: the group lies before their place
            if sub.attached and sub.group_seq != group.seq and sub.active:
                self._start(sub, group, list(group.events))

    def _give_everyone(self, group: _Group) -> None:
        group.everyone = True
        prefix = group.events
        group.events = []
        for sub in self._subs:
            if sub.group_seq != group.seq:
                self._start(sub, group, list(prefix))

    def _start(self, sub: Subscription, group: _Group, prefix: list[BinlogEvent]) -> None:
        """Give ``sub`` the group from its first event (``prefix``: its events so far)."""
        self._tell_passed(sub, group.seq, rests=False)
        sub.group_seq = group.seq
        sub.next_seq = group.seq + 1
        group.given.append(sub)
        self._give(sub, prefix, len(prefix))

    def _close(self, group: _Group) -> None:
        self._group = None
        self.in_group = False
        if not group.everyone:
            events = tuple(e for e in group.events if e.__class__ in _PASSED_KINDS)
            assert (
                len(events) <= PASSED_EVENTS
            )  # what a destination's store is asked room for (canal.parse.shared.queue._bound)
            gtids = [e.gtid for e in events if isinstance(e, GtidEvent)]
            gtid = gtid_step(gtids[0]) if len(gtids) == 1 else None
            passed = self._passed
            run_offset = 0
            if gtid is not None and passed:
                previous = passed[-1]
                if previous.gtid is not None and gtid.follows(previous.gtid):
                    run_offset = previous.run_offset + 1
            self._passed_seqs.append(group.seq)
            passed.append(PassedTransaction(events=events, begin_ms=group.begin_ms, gtid=gtid, run_offset=run_offset))
            self._passed_begins.append(group.begin_ms)

    def _to_everyone(self, event: BinlogEvent) -> None:
        for sub in self._subs:
            self._tell_passed(sub, self._seq + 1)
            self._give(sub, event)

    def _tell_passed(self, sub: Subscription, upto: int, *, rests: bool = True) -> None:
        """Give ``sub`` a PassedEvent of the groups left out of its stream before group ``upto`` (``rests``: False
        when group ``upto`` follows it at once)."""
        first = sub.next_seq
        if first >= upto:
            return
        sub.next_seq = upto
        seqs = self._passed_seqs
        lo = bisect.bisect_left(seqs, first)
        hi = bisect.bisect_left(seqs, upto, lo)
        if lo < hi:
            found = tuple(self._passed[lo:hi])
            end = found[-1].events[-1]
            self._give(
                sub,
                PassedEvent(
                    log_file=end.log_file,
                    offset=end.offset,
                    next_offset=end.next_offset,
                    timestamp=end.timestamp,
                    server_id=end.server_id,
                    transactions=found,
                    begins_ms=tuple(self._passed_begins[lo:hi]),
                    rests=rests,
                ),
            )

    def _flush_all(self, now: float) -> None:
        """Every destination learns of the groups left out of its stream; the reader forgets what all know."""
        self._flushed = now
        group = self._group
        upto = self._seq + 1 if group is None else group.seq
        for sub in self._subs:
            self._tell_passed(sub, upto)
        low = min((s.next_seq for s in self._subs), default=upto)
        known = bisect.bisect_left(self._passed_seqs, low)
        if known:
            del self._passed_seqs[:known], self._passed[:known], self._passed_begins[:known]
        self._form.columnar = any(s.member.rows_form.columnar for s in self._subs)

    def _give(self, sub: Subscription, item: BinlogEvent | list[BinlogEvent], count: int = 1) -> None:
        if not sub.active:
            return
        if item.__class__ is RowsEvent and item.rows is UNDECODED:
            table = item.table
            member = sub.member
            if member.wants(table.schema, table.table) or any(member.wants(*t) for t in self._statement_maps):
                self._eject(sub, f"it joined after rows of {table.schema}.{table.table} were read undecoded")
                return
        if sub.pushed - sub.popped >= QUEUE_EVENTS and not self._wait_for(sub):
            return
        sub.push(item, count)

    def _wait_for(self, sub: Subscription) -> bool:
        """Wait (the lock released) for room in ``sub``'s queue; past SLOW_WAIT_S it leaves, unless it is the only
        destination left. Whether it is still subscribed."""
        deadline = time.monotonic() + SLOW_WAIT_S
        self.waiting_for = sub
        self._wake_unwoken()  # room comes from the parsers reading what they hold
        try:
            while sub.active and sub.queued >= QUEUE_EVENTS and not self.ended:
                left = deadline - time.monotonic()
                if left <= 0:
                    if len(self._subs) > 1:
                        sub.member.rejoin_at = time.monotonic() + REJOIN_AFTER_S
                        self._eject(sub, f"its queue stayed full ({QUEUE_EVENTS} events) for {SLOW_WAIT_S} s")
                        return False
                    left = SLOW_WAIT_S  # the only one: the reader reads for it alone, and waits
                self._cond.wait(min(left, 0.5))
                self.last_read = time.monotonic()  # it does not read, on purpose: no dead connection to the others
        finally:
            self.waiting_for = None
        return sub.active


def _undecoded_for(member: SharedMember, events: list[BinlogEvent]) -> bool | None:
    """Whether ``events`` (from a place between groups) hold rows ``member`` needs decoded that were not: rows of a
    table it captures, or of a statement that maps one (:meth:`SharedReader._decodes`). None: they do not, and end
    inside a statement that maps one (the rest of its rows must decode)."""
    maps_captured = False
    for event in events:
        if isinstance(event, TableMapEvent):
            maps_captured = maps_captured or member.wants(event.schema, event.table)
        elif isinstance(event, RowsEvent):
            table = event.table
            if event.rows is UNDECODED and (maps_captured or member.wants(table.schema, table.table)):
                return True
            if event.end_of_statement:
                maps_captured = False
    return None if maps_captured else False


class SharedReaders:
    """The process's shared readers, one per server and login (:data:`READERS`), and the destinations that may
    share them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._readers: dict[str, SharedReader] = {}
        self._members: dict[str, list[SharedMember]] = {}

    def reader(self, key: str) -> SharedReader | None:
        return self._readers.get(key)

    def register(self, key: str, member: SharedMember) -> None:
        with self._lock:
            members = self._members.setdefault(key, [])
            if member not in members:
                members.append(member)

    def unregister(self, key: str, member: SharedMember) -> None:
        with self._lock:
            members = self._members.get(key, [])
            if member in members:
                members.remove(member)
            if not members:
                self._members.pop(key, None)

    def forget(self, reader: SharedReader) -> None:
        with self._lock:
            if self._readers.get(reader.key) is reader:
                del self._readers[reader.key]

    def open(
        self,
        key: str,
        member: SharedMember,
        at: Position | None,
        make_source: Callable[[], BinlogSource],
        request: DumpRequest,
    ) -> Subscription | None:
        """A subscription for a dump that starts at ``at`` with ``request``: to the running reader when it can take
        it there, or to a new reader made at ``at`` when another destination of the server runs here; None: the
        destination reads alone."""
        if time.monotonic() < member.rejoin_at:
            return None
        with self._lock:
            reader = self._readers.get(key)
            if reader is None or reader.ended:
                others = [m for m in self._members.get(key, []) if m is not member]
                if not others:
                    return None
                # heartbeats as often as any of them asks (alone, each counts a dump silent for its read timeout dead)
                periods = [m.heartbeat_s for m in (member, *others) if m.heartbeat_s > 0]
                if periods:
                    request = attrs.evolve(request, heartbeat_period_s=min(periods))
                reader = SharedReader(self, key, make_source(), request, at, member)
                self._readers[key] = reader
                sub = reader.subscribe(member, at, first=True)
                reader.start()
                log.info("[%s] reads %s through a new shared reader", member.destination, key)
                return sub
        sub = reader.subscribe(member, at)
        if sub is not None:
            log.info("[%s] reads %s through its shared reader", member.destination, key)
        return sub

    def join(self, key: str, member: SharedMember, at: Position) -> Subscription | None:
        """A subscription for a destination reading alone whose next event starts at ``at``, when the reader is
        there (or still holds it); None: it goes on alone."""
        reader = self._readers.get(key)
        if reader is None or time.monotonic() < member.rejoin_at or not reader.may_join(at):
            return None
        sub = reader.subscribe(member, at, starts=False)
        if sub is not None:
            log.info("[%s] joins the shared reader of %s", member.destination, key)
        return sub


READERS = SharedReaders()


__all__ = ["READERS", "SharedReader", "SharedReaders"]
