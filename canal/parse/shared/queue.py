"""A destination's queue from its master's shared reader (:mod:`canal.parse.shared.reader`), read by its parser
thread -- or, while that thread waits, taken through the parser's steps on the reader's own thread.

Read through its own thread, a destination given a transaction now and then costs a wake of that thread and a
hand-over of the interpreter to it per transaction: on these machines more than converting the transaction. So when
the reader ends a transaction it gave to a destination whose parser thread waits, and whose store takes what the
queued events make without waiting (:attr:`SharedMember.ready <canal.parse.shared.member.SharedMember.ready>`), it
runs the parser's step (:attr:`SharedMember.step <canal.parse.shared.member.SharedMember.step>`) for each of them
itself, outside its lock. The parser's state belongs to one thread at a time through :attr:`Subscription.turn`,
which the parser thread holds except while it waits: the steps run one at a time and in order, as on the parser's
thread, and what a step raises on the reader's thread the parser thread raises in its place. Only plain transactions
(rows, and the passed transactions told with them) are taken so: a parser woken for anything else -- a DDL, whose
schema history may be written, an XA COMMIT read back from the server, a heartbeat -- takes what is queued on its own
thread, as does one whose stream a snapshot merges into, one that stops, or one whose store has no room.

Either way, before a step takes the table map of a table the destination captures, the layout the reader decoded it
with is checked against the destination's own schema history (:mod:`canal.parse.shared.member`); where they differ
the destination leaves the reader and reads alone.

The queue knows of its reader only what :class:`Hub` names: the reader module imports this one, never the reverse.
"""

from __future__ import annotations

import collections
import copy
import threading
from collections.abc import Iterator
from typing import Final, Protocol

from canal.parse.events import BinlogEvent, LayoutSeen, PassedEvent, TableMapEvent
from canal.parse.shared.member import SharedMember, SharedReaderLeft, layout_seen

__all__ = ["PASSED_EVENTS", "PASSED_EVENT_BYTES", "WAKE_EVENTS", "Hub", "Subscription"]

WAKE_EVENTS: Final = 256
"""Events queued for a waiting destination inside a transaction before its parser is woken; otherwise it is woken
(or its events are taken on the reader's thread) once the transaction ends: once per transaction, not per event."""
PASSED_EVENTS: Final = 3
"""The most events a passed transaction holds: its GTID, BEGIN and end (a plain group's,
:mod:`canal.parse.shared.groups`: table maps, rows and annotations are not kept)."""
PASSED_EVENT_BYTES: Final = 1024
"""Bytes allowed for each of them when the reader asks whether a store has room (their entries carry the event's
length: a few dozen bytes each)."""
_LAYOUTS_KEPT: Final = 4096
"""Tables whose checked layout a subscription remembers."""


class Hub(Protocol):
    """What a subscription asks of its reader (:class:`~canal.parse.shared.reader.SharedReader`)."""

    # the subscription the reader waits for room in (None: it waits for none), and at how many queued events there
    # is room again
    waiting_for: Subscription | None
    room_at: int
    # whether the reader is inside a group, and the subscriptions given events of it while their parser waited
    in_group: bool
    unwoken: set[Subscription]
    inlined: int  # runs of a destination's steps on the reader's thread
    last_read: float  # monotonic: when its dump last received an event from the server

    def room(self) -> None:
        """The subscription the reader waits for has room again."""
        ...

    def leave(self, sub: Subscription) -> None:
        """``sub`` leaves (its destination stops or switches)."""
        ...

    def diverged(self, sub: Subscription, why: str) -> None:
        """``sub`` leaves: its destination's own history holds another layout than the reader decoded with."""
        ...


class Subscription:
    """One destination's queue from a reader, read by its parser thread (:meth:`events`) or taken on the reader's
    thread (:meth:`run_inline`)."""

    def __init__(self, reader: Hub, member: SharedMember) -> None:
        self.reader = reader
        self.member = member
        self.items: collections.deque[BinlogEvent | list[BinlogEvent]] = collections.deque()
        self.pushed = 0  # events appended (the reader thread only)
        self.popped = 0  # events taken (whichever thread holds the turn)
        self.waiting = False  # the parser thread waits for events (it does not hold the turn)
        self.wake = threading.Event()
        # the parser's state is the thread's that holds this: its own thread's, except while it waits
        self.turn = threading.Lock()
        self.failed: BaseException | None = None  # what a step raised on the reader's thread
        self.end: BaseException | None = None  # what the stream ends with after the queued events
        self.closed = False
        self.active = True  # the reader routes to it
        self.attached = False  # it is given the stream (not waiting ahead of the reader for its place)
        # routing state, the reader's (under its lock)
        self.next_seq = 0  # the first group it has neither been given nor told of
        self.group_seq = -1  # the group it is being given
        # the layouts checked against its history: by table, the reader's LayoutSeen and its history's version then
        self._layouts: dict[tuple[str, str], tuple[LayoutSeen, int]] = {}

    @property
    def queued(self) -> int:
        return self.pushed - self.popped

    def push(self, item: BinlogEvent | list[BinlogEvent], count: int = 1) -> None:
        self.items.append(item)
        self.pushed += count
        if self.waiting:
            reader = self.reader
            if reader.in_group and self.pushed - self.popped < WAKE_EVENTS:
                reader.unwoken.add(self)  # woken (or taken on the reader's thread) when the transaction ends
            else:
                self.wake.set()

    def finish(self, end: BaseException | None) -> None:
        """No more events after the queued ones: the stream ends with ``end`` (None: it just ends)."""
        self.active = False
        if self.end is None:
            self.end = end
        self.wake.set()

    def close(self) -> None:
        """The destination stops reading (its parser stops or switches): leave the reader."""
        self.closed = True
        self.wake.set()
        self.reader.leave(self)

    def events(self) -> Iterator[BinlogEvent]:
        """The parser thread's events; it holds the turn from its first step on, except while it waits."""
        items = self.items
        reader = self.reader
        turn = self.turn
        turn.acquire()
        try:
            while True:
                failed = self.failed
                if failed is not None:
                    raise failed
                if items:
                    item = items.popleft()
                    if item.__class__ is list:
                        assert isinstance(item, list)
                        self.popped += len(item)
                        for event in item:
                            if event.__class__ is TableMapEvent:
                                self._check(event)
                            yield event
                    else:
                        assert isinstance(item, BinlogEvent)
                        self.popped += 1
                        if item.__class__ is TableMapEvent:
                            self._check(item)
                        yield item
                    if reader.waiting_for is self and self.queued <= reader.room_at:
                        reader.room()
                    continue
                if self.closed:
                    return
                end = self.end
                if end is not None:
                    raise _copy(end)
                if not self.active:
                    return
                self.waiting = True
                turn.release()
                try:
                    if not items and self.end is None and self.active and not self.closed:
                        self.wake.wait(1.0)
                finally:
                    turn.acquire()  # waits while the reader's thread takes events through the steps
                self.wake.clear()
                self.waiting = False
        finally:
            turn.release()

    def run_inline(self) -> bool:
        """The reader's thread, outside its lock: take the queued events through the parser's steps here while its
        thread waits. Whether it did; if not (the parser thread is busy, not ready, or a step raised -- which its
        thread then raises), the caller wakes the parser thread."""
        member = self.member
        step, ready = member.step, member.ready
        if step is None or ready is None or not self.waiting or self.wake.is_set() or not self.turn.acquire(False):
            return False  # busy, not sharing, or woken for what it was given before (only its own thread takes that)
        items = self.items
        try:
            if not self.waiting or not self.active or self.failed is not None or not items:
                return False
            if not ready(*_bound(items)):
                return False  # its store cannot take them now: its own thread waits for room, not the reader
            first = True  # the check above holds for the first event
            while items:
                item = items.popleft()
                events = item if isinstance(item, list) else [item]
                self.popped += len(events)
                for i, event in enumerate(events):
                    if not first and not ready(0, 0):  # a snapshot began, or a stop: the rest on the parser's thread
                        items.appendleft(events[i:])
                        self.popped -= len(events) - i
                        return False
                    first = False
                    if event.__class__ is TableMapEvent:
                        self._check(event)
                    step(event)
            self.reader.inlined += 1
            return True
        except BaseException as exc:  # the parser thread raises it, as it would have from its own step
            self.failed = exc
            return False
        finally:
            self.turn.release()

    def _check(self, event: BinlogEvent) -> None:
        """Before the step of a table map: for a table the destination captures, its own schema history must hold
        what the reader's did when it decoded the map (:mod:`canal.parse.shared.member`); else it leaves the reader
        (SharedReaderLeft) and dumps alone from its last handed-off position. Checked again only when the reader's
        layout or the history changed."""
        assert isinstance(event, TableMapEvent)
        seen = event.seen
        if seen is None:
            return  # the reader decodes without a schema history, as the destination does alone
        key = (event.schema, event.table)
        tracker = self.member.schemas
        version = -1 if tracker is None else tracker.history.version
        known = self._layouts.get(key)
        if known is not None and known[0] is seen and known[1] == version:
            return
        if self.member.wants(*key):
            mine = None if tracker is None else layout_seen(tracker.history, *key)
            if mine != seen:
                why = (
                    f"its schema history holds another layout of {key[0]}.{key[1]} than the reader decoded its rows "
                    f"with at {event.log_file}:{event.offset}"
                )
                self.reader.diverged(self, why)
                raise SharedReaderLeft(f"left the shared reader: {why}")
        if len(self._layouts) >= _LAYOUTS_KEPT:
            self._layouts.clear()
        self._layouts[key] = (seen, version)


def _bound(items: collections.deque[BinlogEvent | list[BinlogEvent]]) -> tuple[int, int]:
    """At most how many entries, of how many bytes, the queued events make (an event makes at most one entry; a
    PassedEvent one per event of its transactions, and a rest)."""
    entries = size = 0
    for item in items:
        for event in item if isinstance(item, list) else (item,):
            if event.__class__ is PassedEvent:
                assert isinstance(event, PassedEvent)
                passed = PASSED_EVENTS * len(event.transactions)  # not a sum over them: it runs per transaction
                entries += passed + 1
                size += passed * PASSED_EVENT_BYTES
            else:
                entries += 1
                length = event.next_offset - event.offset  # BinlogEvent.length, without its call
                if length > 0:
                    size += length
    return entries, size


def _copy(error: BaseException) -> BaseException:
    """The reader's error for one more destination to raise (its own object, where the error can be copied)."""
    try:
        return copy.copy(error)
    except Exception:  # an error made with arguments copy cannot give again: the one object, then
        return error
