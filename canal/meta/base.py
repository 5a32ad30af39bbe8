"""The meta manager interface (canal's ``CanalMetaManager``), the shared lifecycle, and meta-specific errors.

A meta manager records, per destination, which clients subscribed (with their filters), each client's cursor (the
last acked position, a :class:`~canal.position.LogPosition`) and each client's outstanding batch marks (what every
``get`` handed out and not yet acked, a :class:`~canal.position.PositionRange` per batch id).

Batch marks follow canal's streaming API: every ``get`` adds a mark with a new, increasing id; acks remove marks in
the order they were added (removing any other id raises :class:`~canal.errors.BatchOrderError`, an id that is not
outstanding raises :class:`~canal.errors.UnknownBatchError`; neither changes anything); a rollback clears them.

Cursor and mark writes need a subscription (:class:`ClientNotSubscribedError` otherwise); unsubscribing drops the
client's cursor and marks, as canal's ZooKeeper manager does.
"""

from __future__ import annotations

import threading
from typing import Protocol, runtime_checkable

from canal.client import ClientIdentity
from canal.errors import MetaError
from canal.position import LogPosition, PositionRange
from canal.schema.history_store import HistoryStore
from canal.start_stop import StartStopComponent, StartStopContext


class ClientNotSubscribedError(MetaError):
    """A cursor or batch mark was written for a client that has not subscribed to the destination."""


class CorruptMetaError(MetaError):
    """A persisted meta or position document cannot be read: not JSON, or not the expected shape."""


class MetaNotStartedError(MetaError):
    """A meta or log-position manager was used before ``start()`` or after ``stop()``."""


class Lifecycle(StartStopContext):
    """canal's lifecycle shape: ``start()`` / ``stop()`` / ``is_started``, and a context manager.

    Subclasses override :meth:`_on_start` and :meth:`_on_stop`. Starting a started component or stopping a stopped
    one does nothing. If ``_on_stop`` raises, the component is still stopped and the error propagates.
    """

    def __init__(self) -> None:
        self._started = False
        self._lifecycle_lock = threading.RLock()

    @property
    def is_started(self) -> bool:
        return self._started

    def start(self) -> None:
        with self._lifecycle_lock:
            if self._started:
                return
            self._on_start()
            self._started = True

    def stop(self) -> None:
        with self._lifecycle_lock:
            if not self._started:
                return
            self._started = False
            self._on_stop()

    def _on_start(self) -> None:
        """Acquire resources; raising leaves the component stopped."""

    def _on_stop(self) -> None:
        """Release resources."""

    def _require_started(self) -> None:
        if not self._started:
            raise MetaNotStartedError(f"{type(self).__name__} is not started: call start() first")


@runtime_checkable
class MetaManager(StartStopComponent, Protocol):
    """Subscriptions, cursors and batch marks of the clients of one or more destinations (canal's
    ``CanalMetaManager``)."""

    # -- subscriptions
    def subscribe(self, client: ClientIdentity) -> None:
        """Subscribe ``client``; subscribing again replaces its filter."""
        ...

    def unsubscribe(self, client: ClientIdentity) -> None:
        """Drop the subscription with the client's cursor and marks; unknown clients are ignored."""
        ...

    def has_subscribe(self, client: ClientIdentity) -> bool: ...

    def list_all_subscribe_info(self, destination: str) -> list[ClientIdentity]:
        """The subscribed clients of ``destination`` with their filters, ordered by client id."""
        ...

    # -- cursors
    def get_cursor(self, client: ClientIdentity) -> LogPosition | None: ...

    def update_cursor(self, client: ClientIdentity, position: LogPosition) -> None: ...

    # -- schema history
    def schema_history_store(self, destination: str) -> HistoryStore:
        """Where ``destination``'s schema history document lives, beside its cursors (same medium, same fence)."""
        ...

    # -- batch marks
    def add_batch(self, client: ClientIdentity, position_range: PositionRange, batch_id: int | None = None) -> int:
        """Add a mark and return its id: a new id greater than every id handed out before, or ``batch_id``, which
        must be greater than every outstanding id (:class:`~canal.errors.BatchOrderError` otherwise)."""
        ...

    def get_batch(self, client: ClientIdentity, batch_id: int) -> PositionRange | None: ...

    def remove_batch(self, client: ClientIdentity, batch_id: int) -> PositionRange:
        """Remove the oldest mark, which must be ``batch_id`` (ack order)."""
        ...

    def remove_batchs_from(self, client: ClientIdentity, batch_id: int) -> dict[int, PositionRange]:
        """Remove mark ``batch_id`` and every later one (rollback of one batch and its successors)."""
        ...

    def get_first_batch(self, client: ClientIdentity) -> PositionRange | None: ...

    def batch_ids(self, client: ClientIdentity) -> list[int]:
        """Outstanding mark ids, oldest first (without reading the marks)."""
        ...

    def get_last_batch(self, client: ClientIdentity) -> PositionRange | None: ...

    def list_all_batchs(self, client: ClientIdentity) -> dict[int, PositionRange]:
        """Outstanding marks, oldest first."""
        ...

    def clear_all_batchs(self, client: ClientIdentity) -> None:
        """Drop every outstanding mark (rollback)."""
        ...

    def flush(self) -> None:
        """Persist what is held now (a no-op for a manager that writes through, or keeps nothing)."""
        ...
