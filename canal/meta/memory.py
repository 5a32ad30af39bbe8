"""canal's ``MemoryMetaManager``: everything in memory, gone when stopped."""

from __future__ import annotations

from canal.client import ClientIdentity
from canal.meta.base import Lifecycle
from canal.meta.core import Loader, MetaCore
from canal.position import LogPosition, PositionRange
from canal.schema.history_store import HistoryStore, MemoryHistoryStore


class MemoryMetaManager(Lifecycle):
    """A :class:`~canal.meta.base.MetaManager` in memory. Stopping forgets everything.

    The file and period-mixed managers extend it: they give the core a loader and flush its state.
    """

    def __init__(self) -> None:
        super().__init__()
        self._core = MetaCore(self._loader())
        self._histories: dict[str, MemoryHistoryStore] = {}

    def schema_history_store(self, destination: str) -> HistoryStore:
        """In this process only (memory meta): the history lives as long as this manager."""
        return self._histories.setdefault(destination, MemoryHistoryStore())

    def _loader(self) -> Loader | None:
        return None

    def _on_stop(self) -> None:
        self._core.clear()

    # -- subscriptions

    def subscribe(self, client: ClientIdentity) -> None:
        self._require_started()
        self._core.subscribe(client)

    def unsubscribe(self, client: ClientIdentity) -> None:
        self._require_started()
        self._core.unsubscribe(client)

    def has_subscribe(self, client: ClientIdentity) -> bool:
        self._require_started()
        return self._core.has_subscribe(client)

    def list_all_subscribe_info(self, destination: str) -> list[ClientIdentity]:
        self._require_started()
        return self._core.list_all_subscribe_info(destination)

    # -- cursors

    def get_cursor(self, client: ClientIdentity) -> LogPosition | None:
        self._require_started()
        return self._core.get_cursor(client)

    def update_cursor(self, client: ClientIdentity, position: LogPosition) -> None:
        self._require_started()
        self._core.update_cursor(client, position)

    # -- batch marks

    def add_batch(self, client: ClientIdentity, position_range: PositionRange, batch_id: int | None = None) -> int:
        self._require_started()
        return self._core.add_batch(client, position_range, batch_id)

    def get_batch(self, client: ClientIdentity, batch_id: int) -> PositionRange | None:
        self._require_started()
        return self._core.get_batch(client, batch_id)

    def remove_batch(self, client: ClientIdentity, batch_id: int) -> PositionRange:
        self._require_started()
        return self._core.remove_batch(client, batch_id)

    def remove_batchs_from(self, client: ClientIdentity, batch_id: int) -> dict[int, PositionRange]:
        self._require_started()
        return self._core.remove_batchs_from(client, batch_id)

    def batch_ids(self, client: ClientIdentity) -> list[int]:
        self._require_started()
        return self._core.batch_ids(client)

    def get_first_batch(self, client: ClientIdentity) -> PositionRange | None:
        self._require_started()
        return self._core.get_first_batch(client)

    def get_last_batch(self, client: ClientIdentity) -> PositionRange | None:
        self._require_started()
        return self._core.get_last_batch(client)

    def list_all_batchs(self, client: ClientIdentity) -> dict[int, PositionRange]:
        self._require_started()
        return self._core.list_all_batchs(client)

    def clear_all_batchs(self, client: ClientIdentity) -> None:
        self._require_started()
        self._core.clear_all_batchs(client)

    def flush(self) -> None:
        """Nothing to persist: it keeps everything in memory (the file and period-mixed managers write here)."""
