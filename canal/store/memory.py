"""The in-memory ring-buffer event store (canal's ``MemoryEventStoreWithBuffer``, with exact limits).

Layout. A list of slots (a power of two) holds the entries; sequence ``s`` lives in slot ``s & (slots - 1)``. A parallel
list holds each slot's byte size, and running byte totals are kept for the put, get and ack sequences. The ring starts
at :data:`FIRST_SLOTS` slots and doubles, up to ``buffer_size``, when a put needs more (its entries move to their slots
in the larger ring): a store that never holds many entries never has ``buffer_size`` slots, which the garbage collector
would walk at each collection (16,384 per store by default, twice, for every destination of the process) and which take
memory. Puts and acks are slice assignments; the only per-entry Python work on the hot path is one comprehension over
the incoming batch for its sizes. A get hands out a slice; when everything unread fits the byte budget (the usual case
for a consumer that keeps up) its cut is O(1), otherwise a binary search over running sums of the entries it hands out.
Acking what was handed out frees its bytes in O(1). The position range of a batch is computed from its first and last
entry and a backward scan for its last transaction boundary.

Limits. The store never holds more than ``buffer_size`` entries, and in MEMSIZE mode never more than
``buffer_size * memory_unit`` bytes, counting the incoming batch (canal checks before adding and may overshoot; we do
not). A batch is put atomically -- all of it or none. Two oversized cases:

* a batch of more than ``buffer_size`` entries can never fit: ``put``/``try_put`` raise
  :class:`~canal.errors.StoreBatchTooLargeError` at once and change nothing;
* a batch of more than ``buffer_size * memory_unit`` bytes (MEMSIZE) is accepted only when the store is empty (every
  entry acked), alone. This is the one case where the byte limit is exceeded; it cannot deadlock, because consumers
  drain and ack the store, and while a put waits for space a blocking ``get`` hands out partial batches.

Cuts. A batch never ends with a TRANSACTIONBEGIN that has an entry after it: a cursor names a boundary and the rows
acked after it, not "the BEGIN and no row", so such a BEGIN would be handed out again after a restart (see ``get``).

Threads. One lock and two conditions on it (not-full for the producer, not-empty for consumers). Designed for one
producer thread and any number of consumer threads; concurrent producers are safe but their batches interleave.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_right
from collections.abc import Sequence
from itertools import accumulate
from typing import TypeVar, cast

from canal.config import BatchMode
from canal.errors import ConfigError, StoreBatchTooLargeError, StoreClosedError, StoreSequenceError
from canal.log import destination_logger
from canal.position import EntryPosition, LogIdentity, LogPosition, PositionRange
from canal.protocol import Entry, EntryType
from canal.start_stop import StartStopContext
from canal.store.base import INIT_SEQUENCE, Events, StoreStats

_T = TypeVar("_T")

FIRST_SLOTS = 256
"""The ring's slots when a store starts (or ``buffer_size``, when smaller); it doubles as puts need."""

_ROWDATA = EntryType.ROWDATA
_BEGIN = EntryType.TRANSACTIONBEGIN


def _is_ddl(entry: Entry) -> bool:
    rc = entry.row_change
    return entry.entry_type is _ROWDATA and rc is not None and rc.is_ddl


def _position(entry: Entry, included: bool) -> EntryPosition:
    # Entry.position with ``included`` set, without the cost of attrs.evolve
    h = entry.header
    return EntryPosition(h.log_file, h.log_offset, h.execute_time, h.server_id, h.gtid, included)


def position_range(
    entries: Sequence[Entry], identity: LogIdentity | None = None, seqs: tuple[int, int] | None = None
) -> PositionRange:
    """The :class:`PositionRange` of a non-empty batch (see :class:`~canal.store.base.Events` for the rules)."""
    last = entries[-1]
    end = _position(last, False)
    start = end if len(entries) == 1 else _position(entries[0], False)
    ack: EntryPosition | None = None
    last_is_boundary = last.is_boundary
    if last_is_boundary:
        ack = _position(last, True)
    else:
        for i in range(len(entries) - 2, -1, -1):
            entry = entries[i]
            if entry.is_boundary:
                ack = _position(entry, True)
                break
    cursor = last.anchor
    if cursor is None:
        cursor = ack if last_is_boundary and ack is not None else end
    return PositionRange(start, end, ack, cursor, last.rows_done, identity, seqs, last.snapshot)


class MemoryEventStore(StartStopContext):
    """A bounded in-memory ring buffer of entries with put / get / ack sequences. See the module docstring.

    ``buffer_size`` entries (a power of two) and, in MEMSIZE mode, ``buffer_size * memory_unit`` bytes of capacity;
    ``batch_mode`` decides how ``get(batch_size)`` counts; with ``ddl_isolation`` a DDL entry is always handed out
    alone. ``destination`` only names the store in log records.
    """

    def __init__(
        self,
        buffer_size: int = 16384,
        memory_unit: int = 1024,
        batch_mode: BatchMode | str = BatchMode.MEMSIZE,
        ddl_isolation: bool = False,
        destination: str = "",
    ) -> None:
        if isinstance(buffer_size, bool) or not isinstance(buffer_size, int) or buffer_size <= 0:
            raise ConfigError(f"buffer_size must be a positive integer, got {buffer_size!r}", key="buffer_size")
        if buffer_size & (buffer_size - 1):
            raise ConfigError(f"buffer_size must be a power of two (e.g. 16384), got {buffer_size}", key="buffer_size")
        if isinstance(memory_unit, bool) or not isinstance(memory_unit, int) or memory_unit <= 0:
            raise ConfigError(f"memory_unit must be a positive integer, got {memory_unit!r}", key="memory_unit")
        try:
            mode = BatchMode.parse(batch_mode)
        except ValueError as exc:
            raise ConfigError(str(exc), key="batch_mode") from None
        self._size = buffer_size
        self._unit = memory_unit
        self._mode = mode
        self._memsize = mode is BatchMode.MEMSIZE
        self._byte_capacity = buffer_size * memory_unit
        self._ddl_isolation = bool(ddl_isolation)
        self._destination = destination
        self._log = destination_logger(__name__, destination)
        self._lock = threading.Lock()
        self._not_full = threading.Condition(self._lock)
        self._not_empty = threading.Condition(self._lock)
        self._put_waiters = 0
        self._get_waiters = 0
        self._started = False
        self._reset()

    def _reset(self) -> None:
        self._slots = min(self._size, FIRST_SLOTS)  # the ring's length: it grows up to _size (_grow)
        self._mask = self._slots - 1
        self._buf: list[Entry | None] = [None] * self._slots
        self._sizes: list[int] = [0] * self._slots
        self._put = self._get = self._ack = INIT_SEQUENCE
        self._put_mem = self._get_mem = self._ack_mem = 0
        self._starved = False  # the last put attempt found no room (cleared by the next successful put)
        self._input_ended = False  # nothing more will be put until the store starts again (input_ended)
        self._wakes = 0  # wake_getters() calls: a wait that sees the count change ends
        self._put_at = time.monotonic()  # when entries were last put (a get with a linger hands out a quiet store's)
        self._latest: EntryPosition | None = None
        # (put sequence, position): the stream rested at position when everything up to that sequence was put
        self._rest: tuple[int, LogPosition] | None = None
        # where each run of entries from one server begins: (first sequence, origin), oldest first. Origins change
        # only on a master/standby switch, so this stays a list of one or two.
        self._origins: list[tuple[int, LogIdentity | None]] = []

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start the store. Starting a stopped store gives an empty store with its sequences back at -1."""
        with self._lock:
            if self._started:
                return
            self._reset()
            self._started = True
        self._log.debug(
            "store started: %d entries, %s, batch mode %s", self._size, self._byte_capacity, self._mode.name
        )

    def stop(self) -> None:
        """Stop the store: drop every entry and wake every blocked caller with StoreClosedError."""
        with self._lock:
            if not self._started:
                return
            self._started = False
            self._buf = [None] * self._slots
            self._not_full.notify_all()
            self._not_empty.notify_all()
        self._log.debug("store stopped")

    @property
    def is_started(self) -> bool:
        return self._started

    def _closed(self) -> StoreClosedError:
        name = f" of destination {self._destination!r}" if self._destination else ""
        return StoreClosedError(f"the event store{name} is not running (stopped or never started)")

    # ------------------------------------------------------------------ put

    def put(self, entries: Sequence[Entry], timeout: float | None = None, origin: LogIdentity | None = None) -> bool:
        """Append ``entries`` atomically, waiting while they do not fit.

        ``origin`` is the server they were read from; a batch handed out names the origin of its last entry.

        ``timeout`` None waits as long as it takes; 0 (or less) does not wait; a positive value waits up to that
        many seconds. Returns False when the batch was not put because the time ran out. Raises
        StoreBatchTooLargeError for a batch of more than ``buffer_size`` entries, StoreClosedError when the store
        is not running or stops while waiting.
        """
        n = len(entries)
        if n > self._size:
            raise self._too_large(n)
        if not n:
            if not self._started:
                raise self._closed()
            return True
        # Entry.byte_size (the binlog event length), read inline: a property call per entry costs twice as much
        sizes = [entry.header.event_length for entry in entries]
        batch_bytes = sum(sizes)
        latest = entries[-1].position
        with self._lock:
            if not self._started:
                raise self._closed()
            if not self._fits(n, batch_bytes):
                self._starve()
                if timeout is not None and timeout <= 0:
                    return False
                deadline = None if timeout is None else time.monotonic() + timeout
                self._put_waiters += 1
                try:
                    while True:
                        if deadline is None:
                            self._not_full.wait()
                        else:
                            remaining = deadline - time.monotonic()
                            if remaining <= 0:
                                return False
                            self._not_full.wait(remaining)
                        if not self._started:
                            raise self._closed()
                        if self._fits(n, batch_bytes):
                            break
                finally:
                    self._put_waiters -= 1
            self._write(entries, n, sizes, batch_bytes, latest, origin)
        return True

    def try_put(self, entries: Sequence[Entry], origin: LogIdentity | None = None) -> bool:
        """Append ``entries`` atomically if they fit now; False (nothing put) when they do not. Never blocks."""
        return self.put(entries, 0, origin)

    def fits(self, entries: int, byte_size: int) -> bool:
        """Whether a batch of ``entries`` entries and ``byte_size`` binlog bytes would be put now, without waiting."""
        with self._lock:
            return self._started and entries <= self._size and self._fits(entries, byte_size)

    def _too_large(self, n: int) -> StoreBatchTooLargeError:
        return StoreBatchTooLargeError(
            f"a batch of {n} entries can never fit a store of {self._size} entries; "
            "put smaller batches or raise buffer_size"
        )

    def _fits(self, n: int, batch_bytes: int) -> bool:
        if self._put - self._ack + n > self._size:
            return False
        if not self._memsize:
            return True
        # an oversized batch (more bytes than the whole store) goes in alone, into an empty store
        return self._put_mem - self._ack_mem + batch_bytes <= self._byte_capacity or self._put == self._ack

    def _starve(self) -> None:
        # consumers blocked for a full batch must not wait for one that cannot arrive: hand out what is there
        self._starved = True
        if self._get_waiters:
            self._not_empty.notify_all()

    def producer_waiting(self) -> None:
        """A producer outside the store waits for the consumer to take entries (a snapshot reader at its read-ahead
        limit): as when the store is full, a get waiting for a full batch gets what is there now instead of waiting
        for entries that will not come until it takes these."""
        with self._lock:
            self._starve()

    def input_ended(self) -> None:
        """Nothing more will be put (the producer stopped on a fatal error): every get waiting now, and every get
        until the store starts again, returns what is there at once (possibly nothing) instead of waiting."""
        with self._lock:
            self._input_ended = True
            if self._get_waiters:
                self._not_empty.notify_all()

    def wake_getters(self) -> None:
        """End the waits of the gets waiting now: each returns what is there (possibly nothing), so a consumer
        waiting in a get sees at once what a caller changed (an HA hand-over refuses new batches: its service's
        on_revoked need not wait out the get's timeout). Later gets wait as usual."""
        with self._lock:
            self._wakes += 1
            if self._get_waiters:
                self._not_empty.notify_all()

    def _write(
        self,
        entries: Sequence[Entry],
        n: int,
        sizes: list[int],
        batch_bytes: int,
        latest: EntryPosition,
        origin: LogIdentity | None,
    ) -> None:
        origins = self._origins
        if not origins or origins[-1][1] != origin:
            origins.append((self._put + 1, origin))
        if self._put - self._ack + n > self._slots:
            self._grow(self._put - self._ack + n)
        # _place, twice, written out: the put path of every transaction
        s = (self._put + 1) & self._mask
        e = s + n
        buf, ring_sizes, slots = self._buf, self._sizes, self._slots
        if e <= slots:
            buf[s:e] = entries
            ring_sizes[s:e] = sizes
        else:
            k = slots - s
            buf[s:] = entries[:k]
            buf[: n - k] = entries[k:]
            ring_sizes[s:] = sizes[:k]
            ring_sizes[: n - k] = sizes[k:]
        self._put += n
        self._put_mem += batch_bytes
        self._latest = latest
        self._rest = None
        self._starved = False
        self._put_at = time.monotonic()
        if self._get_waiters:
            self._not_empty.notify_all()

    def _grow(self, held: int) -> None:
        """Ring of at least ``held`` slots (<= buffer_size, which _fits checks): the entries not acked move over."""
        first, live = self._ack + 1, self._put - self._ack
        entries, sizes = self._taken(self._buf, first, live), self._taken(self._sizes, first, live)
        slots = self._slots
        while slots < held:
            slots *= 2
        self._slots, self._mask = slots, slots - 1
        self._buf, self._sizes = [None] * slots, [0] * slots
        self._place(self._buf, first, entries)
        self._place(self._sizes, first, sizes)

    def _taken(self, ring: list[_T], first: int, n: int) -> list[_T]:
        """The slots of sequences ``first`` .. ``first + n - 1`` of ``ring``, in order (a new list)."""
        s = first & self._mask
        e = s + n
        return ring[s:e] if e <= self._slots else ring[s:] + ring[: e - self._slots]

    def _place(self, ring: list[_T], first: int, items: Sequence[_T]) -> None:
        """``items`` into the slots of sequences ``first`` on of ``ring``."""
        n = len(items)
        s = first & self._mask
        e = s + n
        if e <= self._slots:
            ring[s:e] = items
        else:
            k = self._slots - s
            ring[s:] = items[:k]
            ring[: n - k] = items[k:]

    # ------------------------------------------------------------------ get

    def get(self, batch_size: int, timeout: float | None = None, linger: float | None = None) -> Events:
        """Hand out the next batch after the get sequence.

        A batch is ``batch_size`` entries (ITEMSIZE) or the entries that fit in ``batch_size * memory_unit`` bytes,
        at least one (MEMSIZE); with ``ddl_isolation`` a DDL ends the batch before it and is then handed out alone.
        A batch never ends with a TRANSACTIONBEGIN that has an entry after it (acking it would leave a cursor that
        cannot say the BEGIN was handed out): the cut moves before the BEGIN, or, for a batch of the BEGIN alone,
        after the entry that follows it (one entry over ``batch_size``).
        ``timeout`` None returns at once with what is there (possibly nothing); <= 0 waits for a full batch;
        > 0 waits up to that many seconds for a full batch, then returns what is there (possibly nothing).
        A wait also ends when a producer is waiting for room (the store is full, or :meth:`producer_waiting`): a full
        batch could not arrive then, so the entries that are there are handed out. (A consumer whose own unacked
        batches fill the store waits forever for a full batch: ack or roll back first.) With ``linger`` (seconds), a
        wait also ends once entries are there and none was put for ``linger`` seconds: the stream went quiet (the
        parser caught up with the server), and a full batch would wait for the server's next writes. The
        :class:`Events` result documents the range.
        """
        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        if linger is not None and not linger >= 0:  # (NaN too)
            raise ValueError(f"linger must be a number of seconds >= 0, got {linger}")
        with self._lock:
            if not self._started:
                raise self._closed()
            if timeout is not None and not self._ready(batch_size):
                self._wait_ready(batch_size, timeout, linger)
            start = self._get + 1
            avail = self._put - self._get
            if avail <= 0:
                return Events([], None, start, self._get)
            if self._memsize:
                n, nbytes = self._cut_bytes(start, avail, batch_size * self._unit)
            elif batch_size < avail:
                n = batch_size
                nbytes = -1
            else:
                n = avail
                nbytes = self._put_mem - self._get_mem
            s = start & self._mask  # _taken written out: the get path of every batch
            e = s + n
            slots = self._slots
            entries = self._buf[s:e] if e <= slots else self._buf[s:] + self._buf[: e - slots]
            if self._ddl_isolation:
                for i, entry in enumerate(cast("list[Entry]", entries)):
                    if _is_ddl(entry):
                        if (i or 1) < n:
                            n = i or 1
                            nbytes = -1
                            del entries[n:]
                        break
            if entries[n - 1].entry_type is _BEGIN:  # type: ignore[union-attr]
                # a cursor cannot say "the BEGIN was handed out but nothing after it": a batch never ends with a
                # TRANSACTIONBEGIN that has an entry after it -- the BEGIN goes with the next batch, or, alone in
                # this one, takes the entry after it along
                if n > 1:
                    n -= 1
                    del entries[n:]
                elif avail > 1:
                    n = 2
                    entries.append(self._buf[(start + 1) & self._mask])
                nbytes = -1
            end = start + n - 1
            self._get = end
            self._get_mem += nbytes if nbytes >= 0 else self._bytes_of(start, n)
            origin = self._origin_of(end)
        batch = cast("list[Entry]", entries)  # slots between ack and put are never None
        return Events(batch, position_range(batch, origin, (start, end)), start, end)

    def _origin_of(self, seq: int) -> LogIdentity | None:
        for first, origin in reversed(self._origins):
            if first <= seq:
                return origin
        return None

    def _ready(self, batch_size: int) -> bool:
        unread = self._put - self._get
        if unread <= 0:
            return False
        if self._memsize:
            if self._put_mem - self._get_mem >= batch_size * self._unit:
                return True
        elif unread >= batch_size:
            return True
        if self._starved:
            return True
        if self._ddl_isolation:
            # a DDL cuts the batch short anyway: no point waiting for more
            buf, mask = self._buf, self._mask
            for seq in range(self._get + 1, self._put + 1):
                entry = buf[seq & mask]
                if entry is not None and _is_ddl(entry):
                    return True
        return False

    def _wait_ready(self, batch_size: int, timeout: float, linger: float | None) -> None:
        """Wait (under the lock) until a full batch is there, ``timeout`` ran out (never, for <= 0), or with
        ``linger`` the entries there were put ``linger`` seconds ago or more."""
        deadline = None if timeout <= 0 else time.monotonic() + timeout
        wakes = self._wakes
        self._get_waiters += 1
        try:
            while True:
                if self._input_ended or self._wakes != wakes:
                    return
                now = time.monotonic()
                wait = None if deadline is None else deadline - now
                if wait is not None and wait <= 0:
                    return
                if linger is not None and self._put > self._get:
                    quiet_for = linger - (now - self._put_at)
                    if quiet_for <= 0:
                        return
                    wait = quiet_for if wait is None else min(wait, quiet_for)
                self._not_empty.wait(wait)
                if not self._started:
                    raise self._closed()
                if self._ready(batch_size):
                    return
        finally:
            self._get_waiters -= 1

    def _cut_bytes(self, start: int, avail: int, budget: int) -> tuple[int, int]:
        """How many of the ``avail`` unread entries from ``start`` fit in ``budget`` bytes (at least one), and their
        bytes."""
        unread_bytes = self._put_mem - self._get_mem
        if unread_bytes <= budget:
            return avail, unread_bytes
        sizes = self._sizes
        mask = self._mask
        size = self._slots
        taken = 0
        total = 0
        chunk = 256
        while taken < avail:
            s = (start + taken) & mask
            k = min(avail - taken, size - s, chunk)
            sums = list(accumulate(sizes[s : s + k]))
            i = bisect_right(sums, budget - total)
            if i < k:
                if i:
                    return taken + i, total + sums[i - 1]
                if taken:
                    return taken, total
                return 1, sizes[s]  # the first entry alone is over budget: it goes out alone
            taken += k
            total += sums[-1]
            chunk *= 2
        return taken, total  # not reached: the unread bytes exceed the budget

    def _bytes_of(self, first: int, n: int) -> int:
        """Bytes of the ``n`` entries from sequence ``first``."""
        s = first & self._mask
        e = s + n
        if e <= self._slots:
            return sum(self._sizes[s:e])
        return sum(self._sizes[s:]) + sum(self._sizes[: e - self._slots])

    # ------------------------------------------------------------------ ack / rollback / clear

    def ack(self, end_seq: int) -> None:
        """Confirm every entry up to sequence ``end_seq`` (inclusive): free its room and drop the references.

        Acking the current ack sequence again does nothing. A sequence beyond the get sequence (not handed out)
        or below the ack sequence (already acked) raises StoreSequenceError and changes nothing.
        """
        with self._lock:
            if not self._started:
                raise self._closed()
            ack = self._ack
            if end_seq > self._get or end_seq < ack:
                raise StoreSequenceError(
                    f"cannot ack sequence {end_seq}: only {ack + 1}..{self._get} are handed out and not acked"
                )
            n = end_seq - ack
            if not n:
                return
            s = (ack + 1) & self._mask  # _place of Nones written out: the ack path of every batch
            e = s + n
            buf, slots = self._buf, self._slots
            if e <= slots:
                buf[s:e] = [None] * n
            else:
                buf[s:] = [None] * (slots - s)
                buf[: e - slots] = [None] * (e - slots)
            self._ack_mem = self._get_mem if end_seq == self._get else self._ack_mem + self._bytes_of(ack + 1, n)
            self._ack = end_seq
            origins = self._origins
            while len(origins) > 1 and origins[1][0] <= end_seq + 1:
                del origins[0]  # every entry of the oldest run is acked
            if self._put_waiters:
                self._not_full.notify_all()

    def rollback(self, to_seq: int | None = None) -> None:
        """Rewind the get sequence so entries handed out and not acked are handed out again.

        ``to_seq`` None rewinds to the ack sequence (everything outstanding). Otherwise the get sequence becomes
        ``to_seq`` (``ack_sequence <= to_seq <= get_sequence``): the batch starting at ``to_seq + 1`` and every one
        after it are handed out again. Any other value raises StoreSequenceError and changes nothing.
        """
        with self._lock:
            if not self._started:
                raise self._closed()
            ack = self._ack
            if to_seq is None:
                to_seq = ack
            elif to_seq < ack or to_seq > self._get:
                raise StoreSequenceError(
                    f"cannot roll back to sequence {to_seq}: it must lie between the ack sequence {ack} "
                    f"and the get sequence {self._get}"
                )
            if to_seq == self._get:
                return
            self._get = to_seq
            self._get_mem = self._ack_mem + self._bytes_of(ack + 1, to_seq - ack)
            if self._get_waiters:
                self._not_empty.notify_all()

    def clear(self) -> None:
        """Drop every entry held (handed out or not). Sequences stay monotonic: get and ack jump to put, so acking
        a batch handed out before the clear raises StoreSequenceError (or does nothing if it ended at put)."""
        with self._lock:
            if not self._started:
                raise self._closed()
            self._buf[:] = [None] * self._slots
            self._get = self._ack = self._put
            self._get_mem = self._ack_mem = self._put_mem
            self._rest = None
            del self._origins[:-1]  # the next put starts a run unless it comes from the same server
            if self._put_waiters:
                self._not_full.notify_all()

    # ------------------------------------------------------------------ where the stream rests

    def rest_at(self, position: LogPosition) -> None:
        """The stream rests at cursor ``position`` after every entry put so far (a producer between transactions with
        nothing more to put, e.g. after a binlog rotate). Forgotten at the next put."""
        with self._lock:
            if self._started:
                self._rest = (self._put, position)

    def resting_position(self) -> LogPosition | None:
        """Where a consumer's cursor may move with nothing to hand out: the last :meth:`rest_at` position when
        every entry put was acked and nothing was put after it; else None."""
        with self._lock:
            rest = self._rest
            if rest is None or rest[0] != self._put or self._ack != self._put:
                return None
            return rest[1]

    # ------------------------------------------------------------------ positions and sizes

    def first_position(self) -> EntryPosition | None:
        """Position of the first entry not yet acked (handed out or not); None when the store holds nothing."""
        with self._lock:
            if self._put == self._ack:
                return None
            entry = self._buf[(self._ack + 1) & self._mask]
        return None if entry is None else entry.position

    def latest_position(self) -> EntryPosition | None:
        """Position of the last entry put (even if already acked); None before the first put since start."""
        return self._latest

    @property
    def buffer_size(self) -> int:
        return self._size

    @property
    def memory_unit(self) -> int:
        return self._unit

    @property
    def batch_mode(self) -> BatchMode:
        return self._mode

    @property
    def ddl_isolation(self) -> bool:
        return self._ddl_isolation

    @property
    def byte_capacity(self) -> int | None:
        """``buffer_size * memory_unit`` in MEMSIZE mode; None in ITEMSIZE mode (bytes counted, not limited)."""
        return self._byte_capacity if self._memsize else None

    @property
    def put_sequence(self) -> int:
        return self._put

    @property
    def get_sequence(self) -> int:
        return self._get

    @property
    def ack_sequence(self) -> int:
        return self._ack

    @property
    def size(self) -> int:
        """Entries held: put and not yet acked."""
        with self._lock:
            return self._put - self._ack

    @property
    def bytes_held(self) -> int:
        """Bytes of the entries held (``Entry.byte_size``), counted in both batch modes."""
        with self._lock:
            return self._put_mem - self._ack_mem

    @property
    def unread(self) -> int:
        """Entries put and not yet handed out."""
        with self._lock:
            return self._put - self._get

    @property
    def waiting_producers(self) -> int:
        """Threads blocked in put, waiting for room."""
        return self._put_waiters

    @property
    def waiting_consumers(self) -> int:
        """Threads blocked in get, waiting for a full batch."""
        return self._get_waiters

    def stats(self) -> StoreStats:
        with self._lock:
            return StoreStats(
                put_sequence=self._put,
                get_sequence=self._get,
                ack_sequence=self._ack,
                put_bytes=self._put_mem,
                get_bytes=self._get_mem,
                ack_bytes=self._ack_mem,
                buffer_size=self._size,
                byte_capacity=self._byte_capacity if self._memsize else None,
            )

    def __repr__(self) -> str:
        return (
            f"MemoryEventStore(buffer_size={self._size}, memory_unit={self._unit}, batch_mode={self._mode.name}, "
            f"ddl_isolation={self._ddl_isolation}, destination={self._destination!r}, put={self._put}, "
            f"get={self._get}, ack={self._ack})"
        )
