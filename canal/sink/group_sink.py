"""The group sink: merges several parsers (e.g. shards on two servers) into one store in timestamp order.

Each parser hands off whole transactions through its own member sink. A hand-off stamped at time t passes once
every other member has shown it will produce nothing earlier -- its latest hand-off or heartbeat is later than t
(ties go to the lower member index) -- or has left the group. Idle members keep the group moving with heartbeats,
which the parser emits while its source is idle; they never reach the store. Transactions are never interleaved:
a hand-off is put whole while the barrier is held.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from canal.errors import StoreClosedError
from canal.protocol import Entry, EntryType


class GroupSink:
    """A timeline barrier in front of one downstream sink (usually an :class:`~canal.sink.EntrySink`)."""

    def __init__(self, downstream: Callable[[Sequence[Entry]], None], members: int) -> None:
        if members < 1:
            raise ValueError("a group sink needs at least one member")
        self._downstream = downstream
        self._latest_ms: list[int] = [-1] * members
        self._active = [True] * members
        self._cond = threading.Condition()
        self._stopped = False

    @property
    def members(self) -> int:
        return len(self._latest_ms)

    def member(self, index: int) -> Callable[[Sequence[Entry]], None]:
        """The sink callable for parser number ``index``."""
        if not 0 <= index < len(self._latest_ms):
            raise IndexError(f"group sink member {index} does not exist (members: {len(self._latest_ms)})")
        return lambda entries: self.sink(index, entries)

    def leave(self, index: int) -> None:
        """Member ``index`` stopped for good: nobody waits for it any more."""
        with self._cond:
            self._active[index] = False
            self._cond.notify_all()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def _may_pass(self, index: int, stamp: int) -> bool:
        me = (stamp, index)
        return all(
            (latest, other) > me
            for other, (latest, active) in enumerate(zip(self._latest_ms, self._active, strict=True))
            if other != index and active
        )

    def sink(self, index: int, entries: Sequence[Entry]) -> None:
        if not entries:
            return
        stamp = entries[0].header.execute_time
        heartbeat_only = all(e.entry_type is EntryType.HEARTBEAT for e in entries)
        with self._cond:
            self._latest_ms[index] = max(self._latest_ms[index], stamp)
            self._cond.notify_all()
            if heartbeat_only:
                return
            while not self._may_pass(index, stamp):
                if self._stopped:
                    raise StoreClosedError("the group sink was stopped while a member waited for its turn")
                self._cond.wait()
            if self._stopped:
                raise StoreClosedError("the group sink was stopped")
            self._downstream(entries)
