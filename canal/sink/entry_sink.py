"""The entry sink: drops heartbeats, applies the transaction-entry filter and canal's empty-transaction policy,
and puts what is left into the store, blocking (in bounded waits, so stop() is honoured) while the store is full.

An XA transaction's PREPARE group is never dropped as empty (none of its rows captured): its ``XA COMMIT`` /
``XA ROLLBACK`` comes later as an entry of its own, which a consumer -- the mirror above all
(:mod:`canal.lake.apply.xa`) -- must be able to tell from the commit of a transaction prepared before the stream's
start.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Protocol

from canal.errors import StoreClosedError
from canal.log import destination_logger
from canal.parse.xa import XA_TYPE
from canal.position import LogIdentity, LogPosition
from canal.protocol import Entry, EntryType

# canal's EntryEventSink defaults: let one empty transaction through every 5 s of binlog time or every 8192 of
# them, so cursors and the log position keep advancing when every row of a busy stream is filtered out.
EMPTY_TRANSACTION_INTERVAL_MS = 5_000
EMPTY_TRANSACTION_THRESHOLD = 8_192
_TXN_MARKERS = (EntryType.TRANSACTIONBEGIN, EntryType.TRANSACTIONEND)


class PutTarget(Protocol):
    """What the sink needs of a store."""

    def put(
        self, entries: Sequence[Entry], timeout: float | None = None, origin: LogIdentity | None = None
    ) -> bool: ...

    def rest_at(self, position: LogPosition) -> None: ...


class EntrySink:
    """Filters one parser's hand-offs and puts them into the store."""

    def __init__(
        self,
        store: PutTarget,
        *,
        destination: str = "",
        filter_transaction_entry: bool = False,
        filter_empty_transaction: bool = True,
        empty_transaction_interval_ms: int = EMPTY_TRANSACTION_INTERVAL_MS,
        empty_transaction_threshold: int = EMPTY_TRANSACTION_THRESHOLD,
        put_wait_s: float = 0.2,
    ) -> None:
        self._store = store
        self._filter_transaction_entry = filter_transaction_entry
        self._filter_empty = filter_empty_transaction
        self._empty_interval_ms = empty_transaction_interval_ms
        self._empty_threshold = empty_transaction_threshold
        self._put_wait_s = put_wait_s
        self._stopped = threading.Event()
        self._empty_count = 0
        self._empty_last_ms: int | None = None
        self._log = destination_logger(__name__, destination)
        # counters for metrics
        self.entries_put = 0
        self.empty_transactions_dropped = 0
        self.heartbeats = 0
        self.last_heartbeat_ms = 0

    def stop(self) -> None:
        """Wake a sink() blocked on a full store; it raises StoreClosedError."""
        self._stopped.set()

    def reset(self) -> None:
        """Allow sinking again after stop() (a restarted instance reuses its sink). The empty-transaction policy
        starts afresh, as in a new process: the restarted parser reads again from the cursor, and a transaction
        judged against the last one kept before the restart -- which may lie after it in the binlog -- would be kept
        where a destination that never stopped dropped it."""
        self._stopped.clear()
        self._empty_count = 0
        self._empty_last_ms = None

    def sink(self, entries: Sequence[Entry], origin: LogIdentity | None = None) -> None:
        """Put one hand-off (a whole transaction, or part of a large one) read from ``origin`` into the store."""
        kept: list[Entry] = []
        has_rows = False
        heartbeat: Entry | None = None
        for entry in entries:
            kind = entry.entry_type
            if kind is EntryType.HEARTBEAT:
                self.heartbeats += 1
                self.last_heartbeat_ms = entry.header.execute_time
                heartbeat = entry
                continue
            if self._filter_transaction_entry and kind in _TXN_MARKERS:
                continue
            has_rows = has_rows or kind is EntryType.ROWDATA
            kept.append(entry)
        if not kept:
            if heartbeat is not None:
                self._rest(heartbeat, origin)
            return
        # an empty transaction is a whole one, BEGIN first; an END handed off alone closes a transaction whose rows
        # went in an earlier part (or were acked before a restart) and must reach the consumer
        whole = kept[0].entry_type is EntryType.TRANSACTIONBEGIN
        xa = XA_TYPE in kept[0].header.props  # a PREPARE group: its outcome follows (see the module)
        if not has_rows and whole and not xa and self._filter_empty and self._skip_empty(kept[0].header.execute_time):
            self.empty_transactions_dropped += 1
            return
        self._put(kept, origin)

    def _rest(self, heartbeat: Entry, origin: LogIdentity | None) -> None:
        """A heartbeat handed off alone rests between transactions (``rows_done`` 0) at its anchor: the store learns
        it, so a consumer that acked everything may move its cursor there (past a binlog rotate, or past
        transactions dropped here as empty)."""
        anchor = heartbeat.anchor
        if anchor is None or heartbeat.rows_done or heartbeat.snapshot is not None:
            return
        self._store.rest_at(LogPosition(origin or LogIdentity(), anchor, 0))

    def drops_empty(self, begins_ms: Sequence[int], start: int = 0) -> int:
        """How many of the empty transactions beginning at ``begins_ms[start:]``, in order, would be dropped if handed
        off now, up to the first that would be kept: those are counted as dropped (the policy's state moves as
        :meth:`sink` would move it); the one kept changes nothing, and :meth:`sink` keeps it when it comes. For a
        parser that knows transactions make empty ones without making them (a shared reader's
        :class:`~canal.parse.events.PassedEvent`)."""
        end = len(begins_ms)
        if self._filter_transaction_entry:
            return end - start  # their BEGIN and END are filtered: nothing of them is put, nothing is counted
        if not self._filter_empty or start >= end:
            return 0
        count, threshold, interval = self._empty_count, self._empty_threshold, self._empty_interval_ms
        last = self._empty_last_ms if self._empty_last_ms is not None else begins_ms[start]
        i = start
        room = min(end - start, threshold - count)
        if room > 0:
            # the common case, in C rather than a step per transaction: all of them until the threshold within the
            # interval of the last kept one
            window = begins_ms[start : start + room]
            if last - interval <= min(window) and max(window) <= last + interval:
                count += room
                i += room
        while i < end and count < threshold and abs(begins_ms[i] - last) <= interval:
            count += 1
            i += 1
        if i > start:
            self._empty_count = count
            self._empty_last_ms = last
            self.empty_transactions_dropped += i - start
        return i - start

    def _skip_empty(self, execute_ms: int) -> bool:
        if self._empty_last_ms is None:
            self._empty_last_ms = execute_ms
        self._empty_count += 1
        recent = abs(execute_ms - self._empty_last_ms) <= self._empty_interval_ms
        if self._empty_count <= self._empty_threshold and recent:
            return True
        self._empty_count = 0
        self._empty_last_ms = execute_ms
        return False

    def _put(self, entries: list[Entry], origin: LogIdentity | None) -> None:
        while not self._stopped.is_set():
            if self._store.put(entries, timeout=self._put_wait_s, origin=origin):
                self.entries_put += len(entries)
                return
        raise StoreClosedError("the sink was stopped while waiting for room in the store; the entries were not stored")
