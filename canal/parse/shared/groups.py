"""Where a binlog stream stands between the groups of events that belong together: what the shared reader
(:mod:`canal.parse.shared.reader`) routes whole, and where a destination may join or leave it.

A *group* is a transaction -- from its GTID event (or its BEGIN when none comes before it) to its end (an XID event, or
a ``COMMIT`` / ``ROLLBACK`` / ``XA END`` statement) -- or a statement outside any transaction with the GTID event
before it. Events outside every group (rotates, format descriptions, heartbeats, GTID lists, a statement without a
GTID event) stand alone. The transaction boundaries are :func:`canal.parse.boundary.event_boundary`'s, the rule the
converter follows, so a point between two groups is one between two transactions for every destination.

A *plain* group is a transaction of rows only: a GTID event without an XA xid, ``BEGIN``, table maps, rows events,
annotations and an XID or ``COMMIT``. Only a plain group may be left out of the stream of a destination that captures
none of its tables; anything else (a DDL, an XA statement, a savepoint, a rolled-back transaction, a statement) goes
to every destination, which each need it (schema history, XA follower, savepoints).
"""

from __future__ import annotations

from typing import Final

from canal.parse.boundary import Boundary, event_boundary
from canal.parse.events import (
    BinlogEvent,
    GtidEvent,
    HeartbeatEvent,
    IgnoredEvent,
    QueryEvent,
    RotateEvent,
    RowsEvent,
    TableMapEvent,
    XidEvent,
)
from canal.position import journal_number

__all__ = ["GroupTracker", "Position", "position_of"]

Position = tuple[int, int]
"""A place in a binlog: (journal number, offset)."""

_ROWS_KINDS: Final = (TableMapEvent, RowsEvent, IgnoredEvent)


def position_of(journal: str | None, offset: int | None) -> Position | None:
    """The :data:`Position` of a file and offset (None when either is unknown)."""
    if not journal or offset is None:
        return None
    return (journal_number(journal), offset)


class GroupTracker:
    """Follows a stream's events: the group open (if any), whether it is plain, and where the next event starts.

    ``follow(event)`` is called for every event in order; afterwards :attr:`between` says whether the stream rests
    between groups and :attr:`next_start` where its next event starts (None when unknown: inside a MySQL compressed
    transaction, before the first positioned event).

    :attr:`continuous` says whether the event started exactly where the stream stood, and :attr:`jumped` whether it
    started past that place: the bytes between were not sent. A dump from a GTID set does that -- the server leaves out
    the groups the set holds -- so a place before such a jump is no place a dump from a file position continues from.
    """

    __slots__ = (
        "begin",
        "continuous",
        "ended",
        "in_txn",
        "jumped",
        "next_start",
        "open",
        "opened",
        "plain",
        "statement",
    )

    def __init__(self, start: Position | None = None) -> None:
        self.open = False  # a group is open
        self.in_txn = False  # ... and it is a transaction (BEGIN or MariaDB's GTID event seen)
        self.statement = False  # ... and it is a GTID event waiting for its statement (no BEGIN after it)
        self.plain = True  # the open group holds only rows so far
        self.begin: BinlogEvent | None = None  # the open transaction's event of its TRANSACTIONBEGIN entry
        self.opened = False  # the last event opened a group
        self.ended = False  # the last event ended a group
        self.continuous = False  # the last event started where the stream stood (a real event, in order)
        self.jumped = False  # the last event started past where the stream stood (what lay between was skipped)
        self.next_start = start

    @property
    def between(self) -> bool:
        """The stream rests between groups, at :attr:`next_start` (known)."""
        return not self.open and self.next_start is not None

    def follow(self, event: BinlogEvent) -> None:
        self.opened = self.ended = False
        self._place(event)
        cls = event.__class__
        if cls in _ROWS_KINDS:
            return
        if cls is GtidEvent:
            assert isinstance(event, GtidEvent)
            if self.open:
                self.plain = False  # a group that never ended: whoever reads the stream reads it whole
            self._open()
            self.in_txn = event.mariadb and not event.standalone
            self.statement = not self.in_txn
            self.begin = event if self.in_txn else None
            if event.xa_xid is not None:
                self.plain = False
            return
        boundary = event_boundary(event, self.in_txn)
        if boundary is None:
            if self.open and cls is not XidEvent:
                self.plain = False  # a rotate, heartbeat or other event inside a group: nothing expected there
            return
        if boundary is Boundary.BEGIN:
            assert isinstance(event, QueryEvent)
            if self.open and (self.in_txn or not self.statement):
                self.plain = False
            if not self.open:
                self._open()
            self.in_txn = True
            self.statement = False
            self.begin = event
            if event.sql != "BEGIN":
                self.plain = False  # START TRANSACTION ..., XA START
            return
        if not self.open:
            return  # a statement (or an end met before any start) outside every group
        if boundary is Boundary.END and self.in_txn:
            if cls is not XidEvent and (not isinstance(event, QueryEvent) or event.sql != "COMMIT"):
                self.plain = False  # ROLLBACK, XA END, ...
            self._close()
            return
        self.plain = False  # a statement, savepoint or XA phase in a group
        if self.statement:
            self._close()  # the statement a GTID event announced

    def _open(self) -> None:
        self.open = True
        self.opened = True
        self.plain = True
        self.in_txn = False
        self.statement = False
        self.begin = None

    def _close(self) -> None:
        self.open = False
        self.ended = True
        self.in_txn = False
        self.statement = False

    def _place(self, event: BinlogEvent) -> None:
        """Where the next event starts, and whether this one continued the stream where it stood."""
        self.jumped = False
        cls = event.__class__
        if cls is HeartbeatEvent:
            # the server's place in the binlog: past where the stream stood (between groups, in its file), the dump
            # read on without sending what lay between -- a dump from a GTID set over the groups the set holds
            self.continuous = False
            known = self.next_start
            if not self.open and known is not None and event.log_file:
                rests = (journal_number(event.log_file), event.offset)
                if rests[0] == known[0] and rests[1] > known[1]:
                    self.jumped = True
                    self.next_start = rests
            return
        if cls is RotateEvent:
            assert isinstance(event, RotateEvent)
            here = position_of(event.log_file, event.offset)
            known = self.next_start
            self.continuous = not event.artificial and here is not None and here == known
            # the rotate that ends a file, past where the stream stood: what lay between was left out
            self.jumped = not event.artificial and here is not None and known is not None and here > known
            self.next_start = position_of(event.next_file, event.next_position)
            return
        here = (journal_number(event.log_file), event.offset)
        known = self.next_start
        if event.next_offset <= event.offset or event.timestamp == 0:
            # an artificial event (it occupies no bytes, or a dump made it up), or the last event of a MySQL
            # compressed transaction (at its payload's end, where the stream stands): the place does not move
            self.continuous = event.next_offset == event.offset and here == known
            return
        if known is None or here == known:
            self.continuous = True
            self.next_start = (here[0], event.next_offset)
        elif here > known:
            # past the place the stream stood: the events between were left out (a dump from a GTID set skips the
            # groups the set holds, its first sent event included). The place before is no join point
            self.continuous = False
            self.jumped = True
            self.next_start = (here[0], event.next_offset)
        else:
            self.continuous = False  # a format description a dump sends again from its file's start
