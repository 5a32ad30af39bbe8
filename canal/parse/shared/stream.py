"""A destination's dump when it may share its master's binlog (:mod:`canal.parse.shared`): through the process's
reader of that master, or alone -- from where its cursor rests -- until its own dump reaches a place between
transactions where it can join one (looking at least every :data:`~canal.parse.shared.reader.HEARTBEAT_S`: an idle
server sends only heartbeats).

A dump from a GTID set leaves out the groups the set holds, wherever they lie (MySQL) or until the set's position in
each domain (MariaDB): such a dump joins only after it received a group, with nothing left out since -- the reader
then sends a destination past a group its own dump would leave out only to make it leave there
(:mod:`canal.parse.shared.member`)."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator

import attrs

from canal.parse.events import BinlogEvent, GtidEvent, RotateEvent
from canal.parse.shared.groups import GroupTracker, Position, position_of
from canal.parse.shared.member import SharedMember
from canal.parse.shared.queue import Subscription
from canal.parse.shared.reader import HEARTBEAT_S, SharedReaders
from canal.parse.source import BinlogSource, DumpRequest

__all__ = ["SharedStream", "share_key"]


class SharedStream:
    """The events of one dump of a destination that may share: through a reader, or alone until it can join one.

    Iterate it as a source's dump; :meth:`close` ends it (and leaves the reader).
    """

    def __init__(
        self,
        readers: SharedReaders,
        key: str,
        member: SharedMember,
        source: BinlogSource,
        request: DumpRequest,
        make_source: Callable[[], BinlogSource],
    ) -> None:
        self._readers = readers
        self._key = key
        self._member = member
        self._source = source
        self._request = request
        self._make_source = make_source
        self._sub: Subscription | None = None
        self._closed = False

    @property
    def shared(self) -> bool:
        """Subscribed to a reader now (one that left still reads what was queued for it)."""
        sub = self._sub
        return sub is not None and sub.active and not self._closed

    @property
    def read_at(self) -> float | None:
        """While it shares: when (monotonic) the reader's dump last received an event from the server -- the
        connection this destination reads through, whether or not the event was one for it."""
        sub = self._sub
        return sub.reader.last_read if sub is not None and sub.active and not self._closed else None

    def close(self) -> None:
        self._closed = True
        sub = self._sub
        if sub is not None:
            sub.close()

    def __iter__(self) -> Iterator[BinlogEvent]:
        request = self._request
        self._member.starts_from(request.gtid_set)
        at = None if request.gtid_set is not None else position_of(request.journal_name, request.position)
        sub = self._readers.open(self._key, self._member, at, self._make_source, request)
        if sub is None:
            sub = yield from self._alone(at)
            if sub is None:
                return
        self._sub = sub
        if self._closed:
            sub.close()
            return
        # its connections are not needed while it shares (one that is, such as an XA read-back, opens again)
        self._source.close()
        yield from sub.events()

    def _alone(self, at: Position | None) -> Generator[BinlogEvent, None, Subscription | None]:
        """The destination's own dump, until it can join a reader (the subscription then) or ends (None)."""
        readers, key, member = self._readers, self._key, self._member
        tracker = GroupTracker(at)
        # an idle server sends nothing but heartbeats: the dump looks for a reader to join at each, so at least this
        # often (a reader may start after it, at the place it rests)
        request = self._request
        if not 0 < request.heartbeat_period_s <= HEARTBEAT_S:
            request = attrs.evolve(request, heartbeat_period_s=HEARTBEAT_S)
        dump = self._source.dump(request)
        # a dump from a file position sends every group after it; one from a GTID set may leave groups out until it
        # has sent one, and again after each place it left some out (GroupTracker.jumped)
        settled = request.gtid_set is None
        try:
            for event in dump:
                yield event
                tracker.follow(event)
                # after the rotate that opens a dump comes the file's format description, which the destination must
                # read (its converter takes the server's version from it, which its DDL entries name) before it joins
                # a reader: a joiner going on from its own dump is given none
                opening = event.__class__ is RotateEvent and event.artificial
                if request.gtid_set is not None:
                    if tracker.jumped:
                        settled = False
                    if event.__class__ is GtidEvent:
                        settled = True
                if tracker.between and settled and not opening:
                    place = tracker.next_start
                    assert place is not None
                    sub = readers.join(key, member, place)
                    if sub is not None:
                        # the dump's server thread ends now, not at its next heartbeat
                        self._source.close()
                        return sub
                if self._closed:
                    return None
        finally:
            close = getattr(dump, "close", None)
            if close is not None:
                close()
        return None


def share_key(source: BinlogSource, request: DumpRequest) -> str | None:
    """Which reader of the process a dump of ``source`` with ``request`` may read through (None: it reads alone):
    the source's ``share_key`` -- for a server, everything that decides what its connections are and how they
    read (:attr:`MysqlBinlogSource.share_key <canal.parse.mysql.source.MysqlBinlogSource.share_key>`) -- and how
    its rows are decoded: with a schema history (the reader's own, which each destination's is checked against), or
    by the source alone."""
    key = getattr(source, "share_key", None)
    if not isinstance(key, str):
        return None
    return key if request.schema is None else f"{key} with a schema history"
