"""Memory meta state, loaded lazily per destination from a backing store and flushed to it periodically.

The base of :class:`~canal.meta.file.FileMetaManager` and :class:`~canal.meta.period.PeriodMixedMetaManager`: all
semantics come from the in-memory :class:`~canal.meta.core.MetaCore`; subclasses only say how to load one
destination's :class:`~canal.meta.core.DestinationSnapshot` and how to write one. A destination is written only when
its snapshot differs from what was last loaded or written (dirty), every ``flush_period_s`` seconds on a background
thread, on :meth:`flush`, and on ``stop()``. ``flush_period_s=0`` writes through: every subscription or cursor
change is persisted before the call returns. Batch marks are never persisted, as in canal.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from canal.client import ClientIdentity
from canal.errors import MetaError
from canal.log import destination_logger
from canal.meta.core import DestinationSnapshot, Loader
from canal.meta.memory import MemoryMetaManager
from canal.meta.persist import PeriodicFlusher
from canal.position import LogPosition

FlushListener = Callable[[DestinationSnapshot], None]
"""Called after a destination was written, with the snapshot now persisted (tests and monitoring). It runs under
the flush lock, so reports arrive in write order; keep it short. Its exceptions are logged, not raised."""


class BufferedMetaManager(MemoryMetaManager):
    """Abstract: memory state + lazy load + periodic flush of dirty destinations."""

    def __init__(self, flush_period_s: float | None = 1.0, *, on_flush: FlushListener | None = None) -> None:
        self._persisted: dict[str, DestinationSnapshot] = {}
        self._flush_lock = threading.RLock()
        self._on_flush = on_flush
        super().__init__()
        self._write_through = flush_period_s == 0
        period = None if self._write_through else flush_period_s
        self._flusher = PeriodicFlusher(self._flush_all, period, name=f"{type(self).__name__}-flush")

    # -- to implement

    def _open(self) -> None:
        """Prepare the backing store (called by start)."""

    def _close(self) -> None:
        """Release the backing store (called by stop, after the final flush)."""

    def _load(self, destination: str) -> DestinationSnapshot:
        raise NotImplementedError

    def _write(self, snapshot: DestinationSnapshot, previous: DestinationSnapshot | None) -> None:
        raise NotImplementedError

    # -- machinery

    def _loader(self) -> Loader | None:
        return self._load_and_remember

    def _load_and_remember(self, destination: str) -> DestinationSnapshot:
        snapshot = self._load(destination)
        self._persisted[destination] = snapshot
        return snapshot

    def _on_start(self) -> None:
        self._open()
        self._flusher.start()

    def _on_stop(self) -> None:
        self._flusher.stop()
        try:
            self._flush_all()
        finally:
            self._core.clear()
            self._persisted.clear()
            self._close()

    def subscribe(self, client: ClientIdentity) -> None:
        super().subscribe(client)
        if self._write_through:
            self._flush_destination(client.destination)

    def unsubscribe(self, client: ClientIdentity) -> None:
        super().unsubscribe(client)
        if self._write_through:
            self._flush_destination(client.destination)

    def update_cursor(self, client: ClientIdentity, position: LogPosition) -> None:
        super().update_cursor(client, position)
        if self._write_through:
            self._flush_destination(client.destination)

    def flush(self) -> None:
        """Write every dirty destination now."""
        self._require_started()
        self._flush_all()

    def _flush_all(self) -> None:
        errors: list[MetaError] = []
        with self._flush_lock:
            for destination in self._core.loaded_destinations():
                try:
                    self._flush_destination(destination)
                except MetaError as exc:
                    errors.append(exc)
        if errors:
            raise errors[0]

    def _flush_destination(self, destination: str) -> None:
        with self._flush_lock:
            snapshot = self._core.snapshot(destination)
            previous = self._persisted.get(destination)
            if previous is not None and previous.to_dict() == snapshot.to_dict():
                return
            self._write(snapshot, previous)
            self._persisted[destination] = snapshot
            log = destination_logger(__name__, destination)
            log.debug("meta flushed: %d client(s)", len(snapshot.clients))
            if self._on_flush is not None:  # under the flush lock: reports come in write order
                try:
                    self._on_flush(snapshot)
                except Exception:
                    log.exception("meta flush listener failed")
