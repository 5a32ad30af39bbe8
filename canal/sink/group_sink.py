"""The group sink: merges several parsers (e.g. shards on two servers) into one store in timestamp order.

Each parser hands off whole transactions through its own member sink. A hand-off stamped at time t passes once
every other member has shown it will produce nothing earlier -- its latest hand-off or heartbeat is later than t
(ties go to the lower member index) -- or has left the group. Idle members keep the group moving with heartbeats,
which the parser emits while its source is idle; they never reach the store. Transactions are never interleaved:
a hand-off is put whole while the barrier is held, and a member that handed off part of a large transaction (the
parser splits them by ``transaction_size``) keeps the barrier until that transaction's end, as canal's
``TimelineTransactionBarrier`` does.

Server heartbeats carry no usable time (MySQL and MariaDB stamp them 0), so with ``heartbeat_clock`` (ms since the
epoch, e.g. wall-clock now, canal's choice) a heartbeat-only hand-off stamped 0 counts as that time: "this member is
idle now" (one that carries a binlog time -- the rest after a binlog rotate -- counts as that time). Binlog times
have 1-second resolution and name a statement's start, so a transaction that began before such a heartbeat and
committed after it can arrive out of time order; the merge is ordered modulo that.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from canal.errors import StoreClosedError
from canal.position import LogIdentity
from canal.protocol import Entry, EntryType

MemberSink = Callable[[Sequence[Entry], LogIdentity | None], None]


class GroupSink:
    """A timeline barrier in front of one downstream sink (usually an :class:`~canal.sink.EntrySink`)."""

    def __init__(
        self,
        downstream: MemberSink,
        members: int,
        *,
        heartbeat_clock: Callable[[], int] | None = None,
    ) -> None:
        if members < 1:
            raise ValueError("a group sink needs at least one member")
        self._downstream = downstream
        self._heartbeat_clock = heartbeat_clock
        self._latest_ms: list[int] = [-1] * members
        self._active = [True] * members
        self._owner: int | None = None  # a member inside a transaction it handed off in parts
        self._cond = threading.Condition()
        self._stopped = False

    def reset(self) -> None:
        """Forget every member's time and stop state (a restarted group instance reuses its sink)."""
        with self._cond:
            self._latest_ms = [-1] * len(self._latest_ms)
            self._active = [True] * len(self._active)
            self._owner = None
            self._stopped = False

    @property
    def members(self) -> int:
        return len(self._latest_ms)

    def member(self, index: int) -> MemberSink:
        """The sink callable for parser number ``index``."""
        if not 0 <= index < len(self._latest_ms):
            raise IndexError(f"group sink member {index} does not exist (members: {len(self._latest_ms)})")

        def member_sink(entries: Sequence[Entry], origin: LogIdentity | None = None) -> None:
            self.sink(index, entries, origin)

        return member_sink

    def leave(self, index: int) -> None:
        """Member ``index`` stopped for good: nobody waits for it any more."""
        with self._cond:
            self._active[index] = False
            if self._owner == index:
                self._owner = None
            self._cond.notify_all()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def _may_pass(self, index: int, stamp: int) -> bool:
        if self._owner is not None:
            return self._owner == index
        me = (stamp, index)
        return all(
            (latest, other) > me
            for other, (latest, active) in enumerate(zip(self._latest_ms, self._active, strict=True))
            if other != index and active
        )

    def sink(self, index: int, entries: Sequence[Entry], origin: LogIdentity | None = None) -> None:
        if not entries:
            return
        stamp = entries[0].header.execute_time
        heartbeat_only = all(e.entry_type is EntryType.HEARTBEAT for e in entries)
        if heartbeat_only and self._heartbeat_clock is not None and not stamp:
            stamp = max(stamp, self._heartbeat_clock())
        with self._cond:
            self._latest_ms[index] = max(self._latest_ms[index], stamp)
            self._cond.notify_all()
            if heartbeat_only:
                return
            if self._owner == index and entries[0].entry_type is EntryType.TRANSACTIONBEGIN:
                self._owner = None  # the previous transaction never ended (a dump that started inside it)
            while not self._may_pass(index, stamp):
                if self._stopped:
                    raise StoreClosedError("the group sink was stopped while a member waited for its turn")
                self._cond.wait()
            if self._stopped:
                raise StoreClosedError("the group sink was stopped")
            try:
                self._downstream(entries, origin)
            except BaseException:
                # the member's parser re-reads from its last recorded position; others must not wait on it
                if self._owner == index:
                    self._owner = None
                    self._cond.notify_all()
                raise
            if _opens_transaction(entries):
                self._owner = index
            elif self._owner == index:
                self._owner = None
                self._cond.notify_all()


def _opens_transaction(entries: Sequence[Entry]) -> bool:
    """The hand-off leaves a transaction open: a part of a large one (its last entry is not a boundary)."""
    for entry in reversed(entries):
        kind = entry.entry_type
        if kind is EntryType.HEARTBEAT:
            continue
        if entry.is_boundary:
            return False
        return kind is EntryType.ROWDATA or kind is EntryType.TRANSACTIONBEGIN
    return False
