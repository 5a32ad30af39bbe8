"""canal's ``PeriodMixedMetaManager``: memory cursors and marks, cursors flushed to ZooKeeper periodically.

Subscriptions are written through to ZooKeeper at once; cursors are kept in memory and written every
``flush_period_s`` seconds (only the ones that changed), on :meth:`flush` and on ``stop()``, through the wrapped
:class:`~canal.meta.zookeeper.ZooKeeperMetaManager` -- so its fence guards them. Batch marks stay in memory. A
destination is loaded from ZooKeeper (subscriptions and cursors) the first time it is used.
"""

from __future__ import annotations

import attrs

from canal.client import ClientIdentity
from canal.meta.base import ClientNotSubscribedError
from canal.meta.buffered import BufferedMetaManager, FlushListener
from canal.meta.core import DestinationSnapshot
from canal.meta.zookeeper import ZooKeeperMetaManager
from canal.schema.history_store import HistoryStore


class PeriodMixedMetaManager(BufferedMetaManager):
    """A :class:`~canal.meta.base.MetaManager`: memory + periodic cursor flush to ``zk_manager``.

    ``zk_manager`` is started by ``start()`` if it is not running yet, and then stopped by ``stop()``.
    """

    def __init__(
        self,
        zk_manager: ZooKeeperMetaManager,
        flush_period_s: float | None = 1.0,
        *,
        on_flush: FlushListener | None = None,
    ) -> None:
        self._zk_manager = zk_manager
        self._owns_zk_manager = False
        super().__init__(flush_period_s, on_flush=on_flush)

    @property
    def zk_manager(self) -> ZooKeeperMetaManager:
        return self._zk_manager

    def schema_history_store(self, destination: str) -> HistoryStore:
        """In ZooKeeper, written through at once (a DDL is rare; the next owner must find it)."""
        return self._zk_manager.schema_history_store(destination)

    def _open(self) -> None:
        if not self._zk_manager.is_started:
            self._zk_manager.start()
            self._owns_zk_manager = True

    def _close(self) -> None:
        if self._owns_zk_manager:
            self._owns_zk_manager = False
            self._zk_manager.stop()

    def _load(self, destination: str) -> DestinationSnapshot:
        clients, cursors = self._zk_manager.load_destination(destination)
        return DestinationSnapshot(destination, tuple(clients), cursors)

    def _write(self, snapshot: DestinationSnapshot, previous: DestinationSnapshot | None) -> None:
        for client in snapshot.clients:
            cursor = snapshot.cursor_of(client.client_id)
            if cursor is None or (previous is not None and previous.cursor_of(client.client_id) == cursor):
                continue
            try:
                self._zk_manager.update_cursor(client, cursor)
            except ClientNotSubscribedError:
                continue  # unsubscribed meanwhile (by another process): nothing to keep

    # subscriptions: write through to ZooKeeper first, then memory

    def subscribe(self, client: ClientIdentity) -> None:
        self._require_started()
        with self._flush_lock:
            self._zk_manager.subscribe(client)
            super().subscribe(client)

    def unsubscribe(self, client: ClientIdentity) -> None:
        self._require_started()
        with self._flush_lock:
            self._zk_manager.unsubscribe(client)
            super().unsubscribe(client)
            # ZooKeeper dropped the cursor with the client node: what is persisted now has no cursor for it
            persisted = self._persisted.get(client.destination)
            if persisted is not None:
                cursors = {k: v for k, v in persisted.cursors.items() if k != client.client_id}
                clients = tuple(c for c in persisted.clients if c.client_id != client.client_id)
                self._persisted[client.destination] = attrs.evolve(persisted, clients=clients, cursors=cursors)
