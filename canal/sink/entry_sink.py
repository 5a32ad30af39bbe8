"""The entry sink: drops heartbeats, applies the transaction-entry filter and canal's empty-transaction policy,
and puts what is left into the store, blocking (in bounded waits, so stop() is honoured) while the store is full.

An XA transaction's PREPARE group is never dropped as empty (none of its rows captured): its ``XA COMMIT`` /
``XA ROLLBACK`` comes later as an entry of its own, which a consumer -- the mirror above all
(:mod:`canal.lake.apply.xa`) -- must be able to tell from the commit of a transaction prepared before the stream's
start.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Sequence
from typing import Protocol

from canal.errors import StoreClosedError
from canal.log import destination_logger
from canal.parse.xa import XA_TYPE
from canal.position import LogIdentity, LogPosition, journal_number
from canal.protocol import Entry, EntryType

# canal's EntryEventSink defaults: let one empty transaction through every 5 s of binlog time or every 8192 of
# them, so cursors and the log position keep advancing when every row of a busy stream is filtered out.
EMPTY_TRANSACTION_INTERVAL_MS = 5_000
EMPTY_TRANSACTION_THRESHOLD = 8_192
_TXN_MARKERS = (EntryType.TRANSACTIONBEGIN, EntryType.TRANSACTIONEND)

JUDGED_KEPT = 4096
"""Judgements of empty transactions whose state before them an :class:`EntrySink` keeps, for a parser that reads
them again (:meth:`EntrySink._judge_empty`): more than a restarted destination reads again between its cursor and
where it stopped, unless its consumer acked nothing for that many empty transactions."""


class PutTarget(Protocol):
    """What the sink needs of a store."""

    def put(
        self, entries: Sequence[Entry], timeout: float | None = None, origin: LogIdentity | None = None
    ) -> bool: ...

    def rest_at(self, position: LogPosition) -> None: ...

    def fits(self, entries: int, byte_size: int) -> bool: ...


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
        self._judged: collections.deque[tuple[tuple[int, int], int, int | None]] = collections.deque(maxlen=JUDGED_KEPT)
        self._judged_origin: LogIdentity | None = None
        self._log = destination_logger(__name__, destination)
        # counters for metrics
        self.entries_put = 0
        self.empty_transactions_dropped = 0
        self.heartbeats = 0
        self.last_heartbeat_ms = 0

    def room(self, entries: int, byte_size: int) -> bool:
        """Whether a hand-off of at most that many entries and binlog bytes goes into the store now, without waiting."""
        return not self._stopped.is_set() and self._store.fits(entries, byte_size)

    def stop(self) -> None:
        """Wake a sink() blocked on a full store; it raises StoreClosedError."""
        self._stopped.set()

    def reset(self) -> None:
        """Allow sinking again after stop() (a restarted instance reuses its sink)."""
        self._stopped.clear()

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
        if not has_rows and whole and not xa and self._filter_empty and self._judge_empty(kept[0], origin):
            self.empty_transactions_dropped += 1
            return
        self._put(kept, origin)

    def _judge_empty(self, begin: Entry, origin: LogIdentity | None) -> bool:
        """:meth:`_skip_empty` of the empty transaction beginning with ``begin``, judged in the policy's state before
        it when it was judged before: a parser restarted from a cursor reads again transactions it handed off (or
        dropped) after that cursor, and judged against the state they left -- the last empty transaction kept, later
        in the binlog -- one dropped before would be kept now, where a destination that never stopped drops it. The
        state before each judgement is kept by position (the newest :data:`JUDGED_KEPT`, of one server's binlog)."""
        h = begin.header
        if not h.log_file or h.log_offset <= 0:  # no place in a binlog (made, not read): judged as it comes
            return self._skip_empty(h.execute_time)
        key = (journal_number(h.log_file), h.log_offset)
        judged = self._judged
        if origin != self._judged_origin:
            judged.clear()  # another server's positions: not comparable
            self._judged_origin = origin
        while judged and judged[-1][0] >= key:  # read again from before them: the state before the first
            _, self._empty_count, self._empty_last_ms = judged.pop()
        judged.append((key, self._empty_count, self._empty_last_ms))
        return self._skip_empty(h.execute_time)

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
