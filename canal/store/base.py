"""The event store interface and its small value types.

The store is the one hand-off point between the parser thread (which puts) and the consumers (which get, ack and
roll back). It follows canal's ring-buffer design: three monotonically increasing sequences --

* ``put_sequence``: the last entry written by the producer,
* ``get_sequence``: the last entry handed out to a consumer,
* ``ack_sequence``: the last entry a consumer confirmed as done,

with ``ack_sequence <= get_sequence <= put_sequence``. Sequences number entries from 0 in put order; before the first
put all three are ``-1``. ``rollback()`` moves ``get`` back to ``ack``; ``ack(seq)`` moves ``ack`` forward and frees
the space (and the references) of the entries up to ``seq``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import attrs

from canal.position import EntryPosition, LogIdentity, LogPosition, PositionRange
from canal.protocol import Entry

INIT_SEQUENCE = -1


@attrs.frozen(slots=True)
class Events:
    """One batch handed out by :meth:`EventStore.get`.

    ``entries`` are in put order; ``start_seq`` / ``end_seq`` are the sequences of the first and last of them
    (inclusive), so ``store.ack(events.end_seq)`` acks this batch and every earlier one. An empty batch has
    no ``range``, ``end_seq = start_seq - 1`` (the store's get sequence at the time) and nothing to ack.

    ``range`` (see :class:`~canal.position.PositionRange`):

    * ``start`` / ``end``: the positions of the first and last entry;
    * ``ack``: the position (``included=True``) of the last transaction end or DDL in the batch, None if none;
    * ``cursor`` / ``rows_done``: from the last entry of the batch -- ``cursor`` is its ``anchor`` (or, when it has
      none, its own position with ``included`` = whether it is a boundary) and ``rows_done`` its ``rows_done``;
    * ``identity``: the ``origin`` the last entry was put with; ``seqs``: ``(start_seq, end_seq)``.
    """

    entries: Sequence[Entry]
    range: PositionRange | None
    start_seq: int
    end_seq: int

    @property
    def is_empty(self) -> bool:
        return not self.entries

    def __len__(self) -> int:
        return len(self.entries)


@attrs.frozen(slots=True)
class StoreStats:
    """A consistent snapshot of a store's counters (for metrics). Byte figures are cumulative since start."""

    put_sequence: int
    get_sequence: int
    ack_sequence: int
    put_bytes: int
    get_bytes: int
    ack_bytes: int
    buffer_size: int
    byte_capacity: int | None  # None in ITEMSIZE mode: bytes are counted but not limited

    @property
    def entries_held(self) -> int:
        """Entries put and not yet acked (handed out or not)."""
        return self.put_sequence - self.ack_sequence

    @property
    def bytes_held(self) -> int:
        return self.put_bytes - self.ack_bytes

    @property
    def unread(self) -> int:
        """Entries put and not yet handed out."""
        return self.put_sequence - self.get_sequence


@runtime_checkable
class EventStore(Protocol):
    """A bounded, thread-safe store of entries between one producer and any number of consumers.

    Lifecycle: ``start()``, ``stop()``, ``is_started``, context manager. Operations on a store that is not started,
    and callers blocked in it when it stops, raise :class:`~canal.errors.StoreClosedError`.
    """

    def start(self) -> None: ...

    def stop(self) -> None: ...

    @property
    def is_started(self) -> bool: ...

    def put(self, entries: Sequence[Entry], timeout: float | None = None, origin: LogIdentity | None = None) -> bool:
        """Append a batch read from server ``origin`` atomically, waiting for space (None: forever); False when
        ``timeout`` ran out."""
        ...

    def try_put(self, entries: Sequence[Entry], origin: LogIdentity | None = None) -> bool:
        """Append a batch atomically if it fits now; never blocks."""
        ...

    def fits(self, entries: int, byte_size: int) -> bool:
        """Whether a batch of that many entries and binlog bytes would be put now, without waiting."""
        ...

    def producer_waiting(self) -> None:
        """A producer outside the store waits for the consumer: a get waiting for a full batch returns what is there."""
        ...

    def input_ended(self) -> None:
        """Nothing more will be put: gets return what is there at once, until the store starts again."""
        ...

    def wake_getters(self) -> None:
        """End the waits of the gets waiting now: each returns what is there (possibly nothing). Later gets wait as
        usual."""
        ...

    def get(self, batch_size: int, timeout: float | None = None, linger: float | None = None) -> Events:
        """Hand out the next batch (None: at once; <= 0: wait for a full batch; > 0: wait up to timeout); with
        ``linger``, a wait also ends once nothing was put for that many seconds while entries are there."""
        ...

    def ack(self, end_seq: int) -> None:
        """Confirm every entry up to ``end_seq`` (inclusive) and release it."""
        ...

    def rollback(self, to_seq: int | None = None) -> None:
        """Hand out again what was handed out and not acked: all of it (None) or what lies after ``to_seq``."""
        ...

    def clear(self) -> None:
        """Drop every entry held, handed out or not."""
        ...

    def rest_at(self, position: LogPosition) -> None:
        """The stream rests at cursor ``position`` after every entry put so far (forgotten at the next put)."""
        ...

    def resting_position(self) -> LogPosition | None:
        """The last rest when every entry put was acked and nothing was put after it; else None."""
        ...

    def first_position(self) -> EntryPosition | None:
        """Position of the first entry not yet acked, None when nothing is held."""
        ...

    def latest_position(self) -> EntryPosition | None:
        """Position of the last entry put, None before the first put."""
        ...

    def stats(self) -> StoreStats: ...
