"""canal's ``FileMixedMetaManager``: memory, plus one JSON document per destination on disk.

``{data_dir}/{destination}/meta.dat`` holds the destination's subscriptions and cursors (canal's file name and
document shape, batch marks left out). It is replaced atomically every ``flush_period_s`` seconds when something
changed, at once when a subscription changes, and on ``stop()``; after a crash it holds the last flushed state.
"""

from __future__ import annotations

import os
from pathlib import Path

from canal.client import ClientIdentity, validate_destination
from canal.errors import MetaError
from canal.meta.base import CorruptMetaError
from canal.meta.buffered import BufferedMetaManager, FlushListener
from canal.meta.core import DestinationSnapshot
from canal.meta.persist import read_json, remove_stale_temp_files, write_json_atomic
from canal.schema.history_store import FileHistoryStore, HistoryStore

META_FILE_NAME = "meta.dat"
SCHEMA_HISTORY_FILE_NAME = "schema_history.json"


class FileMetaManager(BufferedMetaManager):
    """A :class:`~canal.meta.base.MetaManager` persisted to ``{data_dir}/{destination}/meta.dat``.

    ``flush_period_s=None`` flushes only on subscription changes, :meth:`flush` and ``stop()``.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        flush_period_s: float | None = 1.0,
        *,
        on_flush: FlushListener | None = None,
    ) -> None:
        self._dir = Path(data_dir)
        super().__init__(flush_period_s, on_flush=on_flush)

    @property
    def data_dir(self) -> Path:
        return self._dir

    def schema_history_store(self, destination: str) -> HistoryStore:
        """``{data_dir}/{destination}/schema_history.json``, replaced atomically on every change."""
        return FileHistoryStore(self._dir / validate_destination(destination) / SCHEMA_HISTORY_FILE_NAME)

    def path_of(self, destination: str) -> Path:
        """The meta document of ``destination``."""
        return self._dir / validate_destination(destination) / META_FILE_NAME

    def _open(self) -> None:
        try:
            self._dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise MetaError(f"cannot create meta directory {self._dir}: {exc.strerror or exc}") from exc
        if not os.access(self._dir, os.R_OK | os.W_OK | os.X_OK):
            raise MetaError(f"meta directory {self._dir} is not readable and writable")

    def _load(self, destination: str) -> DestinationSnapshot:
        path = self.path_of(destination)
        remove_stale_temp_files(path)
        document = read_json(path)
        if document is None:
            return DestinationSnapshot(destination)
        snapshot = DestinationSnapshot.from_dict(document, source=str(path))
        if snapshot.destination != destination:
            raise CorruptMetaError(f"{path} belongs to destination {snapshot.destination!r}, not {destination!r}")
        return snapshot

    def _write(self, snapshot: DestinationSnapshot, previous: DestinationSnapshot | None) -> None:
        write_json_atomic(self.path_of(snapshot.destination), snapshot.to_dict())

    # subscriptions change rarely: write them through, as canal does

    def subscribe(self, client: ClientIdentity) -> None:
        super().subscribe(client)
        self._flush_destination(client.destination)

    def unsubscribe(self, client: ClientIdentity) -> None:
        super().unsubscribe(client)
        self._flush_destination(client.destination)
