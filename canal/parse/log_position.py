"""Where the parser restarts: canal's log-position managers (``CanalLogPositionManager``).

The parser persists the position of the last transaction it handed to the sink and, on start, asks for the latest
persisted position of its destination. Implementations:

* :class:`MemoryLogPositionManager` -- in memory only;
* :class:`MetaLogPositionManager` -- read-only: the smallest cursor among the destination's subscribed clients,
  from a :class:`~canal.meta.base.MetaManager` (canal's choice for the embedded server: restart where the slowest
  consumer acked);
* :class:`FailbackLogPositionManager` -- a primary, falling back to a secondary for reads (and for writes the
  primary refuses);
* :class:`FileLogPositionManager` -- memory, flushed to ``{data_dir}/{destination}/parse.dat`` (atomic JSON);
* :class:`ZooKeeperLogPositionManager` -- canal's ``/otter/canal/destinations/{dest}/parse`` node, optionally fenced;
* :class:`PeriodMixedLogPositionManager` -- memory, flushed to a ZooKeeper manager periodically.

The buffered ones (file, period-mixed) write a destination only when its position changed, every ``flush_period_s``
seconds on a background thread, on ``flush()`` and on ``stop()``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, runtime_checkable

from kazoo.client import KazooClient

from canal.client import validate_destination
from canal.errors import CanalError, MetaError, PositionError
from canal.log import destination_logger
from canal.meta import zkpaths
from canal.meta.base import CorruptMetaError, Lifecycle, MetaManager
from canal.meta.fence import Fence
from canal.meta.persist import PeriodicFlusher, read_json, remove_stale_temp_files, write_json_atomic
from canal.meta.zookeeper import ZooKeeperClientOwner
from canal.position import LogPosition
from canal.start_stop import StartStopComponent

PARSE_FILE_NAME = "parse.dat"

PositionFlushListener = Callable[[str, LogPosition], None]
"""Called after a destination's position was written (tests and monitoring), under the flush lock; its exceptions
are logged, not raised."""

__all__ = [
    "PARSE_FILE_NAME",
    "BufferedLogPositionManager",
    "FailbackLogPositionManager",
    "FileLogPositionManager",
    "LogPositionManager",
    "MemoryLogPositionManager",
    "MetaLogPositionManager",
    "PeriodMixedLogPositionManager",
    "PositionFlushListener",
    "ZooKeeperLogPositionManager",
]


@runtime_checkable
class LogPositionManager(StartStopComponent, Protocol):
    """The parser's restart point per destination (canal's ``CanalLogPositionManager``)."""

    def get_latest_position(self, destination: str) -> LogPosition | None: ...

    def persist_position(self, destination: str, position: LogPosition) -> None: ...


def _check_position(position: LogPosition) -> None:
    if not isinstance(position, LogPosition):
        raise TypeError(f"a log position must be a LogPosition, got {type(position).__name__}")


class MemoryLogPositionManager(Lifecycle):
    """Positions in memory; stopping forgets them."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._positions: dict[str, LogPosition] = {}

    def _on_stop(self) -> None:
        with self._lock:
            self._positions.clear()

    def get_latest_position(self, destination: str) -> LogPosition | None:
        self._require_started()
        with self._lock:
            return self._positions.get(destination)

    def persist_position(self, destination: str, position: LogPosition) -> None:
        self._require_started()
        _check_position(position)
        validate_destination(destination)
        with self._lock:
            self._positions[destination] = position

    def destinations(self) -> list[str]:
        with self._lock:
            return list(self._positions)


class MetaLogPositionManager(Lifecycle):
    """The smallest cursor of the destination's subscribed clients; ``persist_position`` does nothing.

    Starts ``meta`` if it is not running, and then stops it on ``stop()``.
    """

    def __init__(self, meta: MetaManager) -> None:
        super().__init__()
        self._meta = meta
        self._owns_meta = False

    def _on_start(self) -> None:
        if not self._meta.is_started:
            self._meta.start()
            self._owns_meta = True

    def _on_stop(self) -> None:
        if self._owns_meta:
            self._owns_meta = False
            self._meta.stop()

    def get_latest_position(self, destination: str) -> LogPosition | None:
        self._require_started()
        cursors = [self._meta.get_cursor(c) for c in self._meta.list_all_subscribe_info(destination)]
        present = [c for c in cursors if c is not None]
        return min(present) if present else None

    def persist_position(self, destination: str, position: LogPosition) -> None:
        self._require_started()
        _check_position(position)  # the consumers' acks move the position; nothing to write


class FailbackLogPositionManager(Lifecycle):
    """Reads the primary, and the secondary when the primary has nothing; writes the primary.

    A write the primary refuses with a :class:`~canal.errors.CanalError` goes to the secondary (logged), as canal
    does. Starts and stops whichever of the two were not running.
    """

    def __init__(self, primary: LogPositionManager, secondary: LogPositionManager) -> None:
        super().__init__()
        self._primary = primary
        self._secondary = secondary
        self._owned: list[LogPositionManager] = []

    def _on_start(self) -> None:
        for manager in (self._primary, self._secondary):
            if not manager.is_started:
                manager.start()
                self._owned.append(manager)

    def _on_stop(self) -> None:
        owned, self._owned = self._owned, []
        for manager in reversed(owned):
            manager.stop()

    def get_latest_position(self, destination: str) -> LogPosition | None:
        self._require_started()
        position = self._primary.get_latest_position(destination)
        if position is not None:
            return position
        return self._secondary.get_latest_position(destination)

    def persist_position(self, destination: str, position: LogPosition) -> None:
        self._require_started()
        try:
            self._primary.persist_position(destination, position)
        except CanalError as exc:
            destination_logger(__name__, destination).warning(
                "primary log position manager refused %s (%s); persisting to the secondary", position.position, exc
            )
            self._secondary.persist_position(destination, position)


class ZooKeeperLogPositionManager(ZooKeeperClientOwner):
    """canal's ``/otter/canal/destinations/{dest}/parse`` node holding the position JSON.

    ``zk`` is a kazoo client (borrowed) or a hosts string (own client). ``fence`` guards writes like the meta
    manager's cursor writes.
    """

    def __init__(self, zk: KazooClient | str, *, fence: Fence | None = None, timeout_s: float = 10.0) -> None:
        super().__init__(zk, timeout_s=timeout_s)
        self._fence = fence

    def set_fence(self, fence: Fence | None) -> None:
        self._fence = fence

    def get_latest_position(self, destination: str) -> LogPosition | None:
        self._require_started()
        path = zkpaths.parse_path(destination)
        data = self._read(path)
        if not data:
            return None
        try:
            return LogPosition.from_json(data)
        except PositionError as exc:
            raise CorruptMetaError(f"ZooKeeper node {path} does not hold a valid position: {exc}") from None

    def persist_position(self, destination: str, position: LogPosition) -> None:
        self._require_started()
        _check_position(position)
        self._write_fenced(
            zkpaths.parse_path(destination), position.to_json().encode("utf-8"), self._fence, parent_must_exist=None
        )


class BufferedLogPositionManager(Lifecycle):
    """Abstract: positions in memory, loaded from and flushed to a backing store (see the module doc)."""

    def __init__(self, flush_period_s: float | None = 1.0, *, on_flush: PositionFlushListener | None = None) -> None:
        super().__init__()
        self._on_flush = on_flush
        self._lock = threading.RLock()
        self._flush_lock = threading.Lock()
        self._positions: dict[str, LogPosition] = {}
        self._persisted: dict[str, LogPosition | None] = {}
        self._flusher = PeriodicFlusher(self._flush_all, flush_period_s, name=f"{type(self).__name__}-flush")

    def _open(self) -> None:
        """Prepare the backing store."""

    def _close(self) -> None:
        """Release the backing store (after the final flush)."""

    def _load(self, destination: str) -> LogPosition | None:
        raise NotImplementedError

    def _store(self, destination: str, position: LogPosition) -> None:
        raise NotImplementedError

    def _on_start(self) -> None:
        self._open()
        self._flusher.start()

    def _on_stop(self) -> None:
        self._flusher.stop()
        try:
            self._flush_all()
        finally:
            with self._lock:
                self._positions.clear()
                self._persisted.clear()
            self._close()

    def get_latest_position(self, destination: str) -> LogPosition | None:
        self._require_started()
        with self._lock:
            if destination in self._positions:
                return self._positions[destination]
            if destination not in self._persisted:
                self._persisted[destination] = self._load(validate_destination(destination))
            return self._persisted[destination]

    def persist_position(self, destination: str, position: LogPosition) -> None:
        self._require_started()
        _check_position(position)
        validate_destination(destination)
        with self._lock:
            self._positions[destination] = position

    def flush(self) -> None:
        """Write every changed position now."""
        self._require_started()
        self._flush_all()

    def _flush_all(self) -> None:
        errors: list[tuple[str, MetaError]] = []
        with self._flush_lock:
            with self._lock:
                pending = [(d, p) for d, p in self._positions.items() if self._persisted.get(d) != p]
            for destination, position in pending:
                try:
                    self._store(destination, position)
                except MetaError as exc:  # the other destinations are still flushed; this one stays pending
                    errors.append((destination, exc))
                    continue
                with self._lock:
                    self._persisted[destination] = position
                log = destination_logger(__name__, destination)
                log.debug("log position flushed: %s", position.position)
                if self._on_flush is not None:
                    try:
                        self._on_flush(destination, position)
                    except Exception:  # a listener (tests, monitoring) must not undo a write that happened
                        log.exception("log position flush listener failed")
        if errors:
            for destination, other in errors[1:]:  # raised below is the first; the others are said here
                destination_logger(__name__, destination).warning("log position flush failed: %s", other)
            raise errors[0][1]


class FileLogPositionManager(BufferedLogPositionManager):
    """Positions flushed to ``{data_dir}/{destination}/parse.dat`` (canal's ``FileMixedLogPositionManager``)."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        flush_period_s: float | None = 1.0,
        *,
        on_flush: PositionFlushListener | None = None,
    ) -> None:
        self._dir = Path(data_dir)
        super().__init__(flush_period_s, on_flush=on_flush)

    def path_of(self, destination: str) -> Path:
        return self._dir / validate_destination(destination) / PARSE_FILE_NAME

    def _open(self) -> None:
        try:
            self._dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise MetaError(f"cannot create position directory {self._dir}: {exc.strerror or exc}") from exc

    def _load(self, destination: str) -> LogPosition | None:
        path = self.path_of(destination)
        remove_stale_temp_files(path)
        document = read_json(path)
        if document is None:
            return None
        try:
            return LogPosition.from_dict(document)
        except PositionError as exc:
            raise CorruptMetaError(f"{path} does not hold a valid position: {exc}") from None

    def _store(self, destination: str, position: LogPosition) -> None:
        write_json_atomic(self.path_of(destination), position.to_dict())


class PeriodMixedLogPositionManager(BufferedLogPositionManager):
    """Positions in memory, flushed to a :class:`ZooKeeperLogPositionManager` periodically.

    Starts ``zk_manager`` if it is not running, and then stops it on ``stop()``.
    """

    def __init__(
        self,
        zk_manager: ZooKeeperLogPositionManager,
        flush_period_s: float | None = 1.0,
        *,
        on_flush: PositionFlushListener | None = None,
    ) -> None:
        self._zk_manager = zk_manager
        self._owns_zk = False
        super().__init__(flush_period_s, on_flush=on_flush)

    def _open(self) -> None:
        if not self._zk_manager.is_started:
            self._zk_manager.start()
            self._owns_zk = True

    def _close(self) -> None:
        if self._owns_zk:
            self._owns_zk = False
            self._zk_manager.stop()

    def _load(self, destination: str) -> LogPosition | None:
        return self._zk_manager.get_latest_position(destination)

    def _store(self, destination: str, position: LogPosition) -> None:
        self._zk_manager.persist_position(destination, position)
