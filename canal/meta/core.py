"""The one in-memory implementation of meta semantics, and the batch-order rules every implementation shares.

:class:`MetaCore` holds subscriptions, cursors and batch marks behind one lock. The memory, file and period-mixed
managers wrap it; the ZooKeeper manager keeps its state in ZooKeeper but decides with the same rule functions
(:func:`check_remove`, :func:`check_new_id`), so an unknown or out-of-order id is refused the same way everywhere.

A core can be given a *loader*: the first time a destination is touched, the loader supplies its persisted
subscriptions and cursors (batch marks are never persisted, as in canal).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs

from canal.client import ClientIdentity, validate_destination
from canal.errors import BatchOrderError, PositionError, UnknownBatchError
from canal.meta.base import ClientNotSubscribedError, CorruptMetaError
from canal.position import LogPosition, PositionRange

# ---------------------------------------------------------------------------------------------- shared batch rules


def check_remove(client: ClientIdentity, outstanding: Sequence[int], batch_id: int) -> None:
    """Refuse to remove ``batch_id`` unless it is the oldest outstanding id (``outstanding`` sorted ascending)."""
    if batch_id not in outstanding:
        raise UnknownBatchError(
            f"batch {batch_id} is not outstanding for client {client} "
            f"(outstanding: {_ids_text(outstanding)}); it was never handed out or was already acked/rolled back"
        )
    if outstanding[0] != batch_id:
        raise BatchOrderError(
            f"batch {batch_id} of client {client} acked out of order: ack batch {outstanding[0]} first "
            "(batches must be acked in the order they were handed out)"
        )


def check_known(client: ClientIdentity, outstanding: Sequence[int], batch_id: int) -> None:
    """Refuse ``batch_id`` unless it is outstanding."""
    if batch_id not in outstanding:
        raise UnknownBatchError(
            f"batch {batch_id} is not outstanding for client {client} (outstanding: {_ids_text(outstanding)})"
        )


def check_new_id(client: ClientIdentity, outstanding: Sequence[int], batch_id: int) -> None:
    """Refuse an explicit new id that is negative or not greater than every outstanding id."""
    if isinstance(batch_id, bool) or not isinstance(batch_id, int) or batch_id < 0:
        raise BatchOrderError(f"a batch id must be a non-negative integer, got {batch_id!r}")
    if outstanding and batch_id <= outstanding[-1]:
        raise BatchOrderError(
            f"batch {batch_id} of client {client} is not newer than outstanding batch {outstanding[-1]}; "
            "batch ids must increase"
        )


def _ids_text(ids: Sequence[int]) -> str:
    if not ids:
        return "none"
    if len(ids) > 6:
        return f"{ids[0]}..{ids[-1]} ({len(ids)} batches)"
    return ", ".join(str(i) for i in ids)


# ---------------------------------------------------------------------------------------------- persisted form


@attrs.frozen(slots=True)
class DestinationSnapshot:
    """What is persisted of one destination: its subscribed clients (by id) and their cursors.

    The document form follows canal's ``FileMixedMetaManager`` (``clientDatas`` of ``clientIdentity`` + ``cursor``),
    without batch marks.
    """

    destination: str
    clients: tuple[ClientIdentity, ...] = ()
    cursors: Mapping[int, LogPosition] = attrs.field(factory=dict)

    def cursor_of(self, client_id: int) -> LogPosition | None:
        return self.cursors.get(client_id)

    def to_dict(self) -> dict[str, Any]:
        datas: list[dict[str, Any]] = []
        for client in self.clients:
            cursor = self.cursors.get(client.client_id)
            datas.append(
                {
                    "clientIdentity": {
                        "destination": client.destination,
                        "clientId": client.client_id,
                        "filter": client.filter,
                    },
                    "cursor": None if cursor is None else cursor.to_dict(),
                }
            )
        return {"destination": self.destination, "clientDatas": datas}

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "meta document") -> DestinationSnapshot:
        if not isinstance(data, Mapping):
            raise CorruptMetaError(f"{source}: expected a JSON object, got {type(data).__name__}")
        destination = data.get("destination")
        datas = data.get("clientDatas") or []
        if not isinstance(destination, str) or not isinstance(datas, list):
            raise CorruptMetaError(f"{source}: needs a string 'destination' and a list 'clientDatas'")
        clients: list[ClientIdentity] = []
        cursors: dict[int, LogPosition] = {}
        try:
            for item in datas:
                ident = item["clientIdentity"]
                client = ClientIdentity(destination, int(ident.get("clientId", 1001)), str(ident.get("filter") or ""))
                clients.append(client)
                if item.get("cursor") is not None:
                    cursors[client.client_id] = LogPosition.from_dict(item["cursor"])
        except (KeyError, TypeError, ValueError, AttributeError, PositionError) as exc:
            raise CorruptMetaError(f"{source}: malformed client entry: {exc}") from None
        clients.sort(key=lambda c: c.client_id)
        return cls(destination, tuple(clients), cursors)


Loader = Callable[[str], DestinationSnapshot]


# ---------------------------------------------------------------------------------------------- the core


@attrs.define(slots=True)
class _Marks:
    """Outstanding marks of one client, oldest first, and the next id to hand out."""

    ranges: dict[int, PositionRange] = attrs.field(factory=dict)
    next_id: int = 1

    def ids(self) -> list[int]:
        return list(self.ranges)  # insertion order == id order (ids only ever increase)


class MetaCore:
    """Thread-safe in-memory subscriptions, cursors and batch marks; the semantics of every meta manager."""

    def __init__(self, loader: Loader | None = None) -> None:
        self._lock = threading.RLock()
        self._loader = loader
        self._subs: dict[str, dict[int, ClientIdentity]] = {}
        self._cursors: dict[ClientIdentity, LogPosition] = {}
        self._marks: dict[ClientIdentity, _Marks] = {}

    # -- loading and snapshots

    def _dest(self, destination: str) -> dict[int, ClientIdentity]:
        subs = self._subs.get(destination)
        if subs is None:
            validate_destination(destination)
            subs = {}
            if self._loader is not None:
                snap = self._loader(destination)
                for client in snap.clients:
                    subs[client.client_id] = client
                    cursor = snap.cursors.get(client.client_id)
                    if cursor is not None:
                        self._cursors[client] = cursor
            self._subs[destination] = subs
        return subs

    def loaded_destinations(self) -> list[str]:
        with self._lock:
            return list(self._subs)

    def snapshot(self, destination: str) -> DestinationSnapshot:
        with self._lock:
            subs = self._dest(destination)
            clients = tuple(subs[i] for i in sorted(subs))
            cursors = {c.client_id: self._cursors[c] for c in clients if c in self._cursors}
            return DestinationSnapshot(destination, clients, cursors)

    def clear(self) -> None:
        with self._lock:
            self._subs.clear()
            self._cursors.clear()
            self._marks.clear()

    # -- subscriptions

    def subscribe(self, client: ClientIdentity) -> None:
        with self._lock:
            self._dest(client.destination)[client.client_id] = client

    def unsubscribe(self, client: ClientIdentity) -> None:
        with self._lock:
            self._dest(client.destination).pop(client.client_id, None)
            self._cursors.pop(client, None)
            self._marks.pop(client, None)

    def has_subscribe(self, client: ClientIdentity) -> bool:
        with self._lock:
            return client.client_id in self._dest(client.destination)

    def list_all_subscribe_info(self, destination: str) -> list[ClientIdentity]:
        with self._lock:
            subs = self._dest(destination)
            return [subs[i] for i in sorted(subs)]

    def _require_subscribed(self, client: ClientIdentity, what: str) -> None:
        if client.client_id not in self._dest(client.destination):
            raise ClientNotSubscribedError(f"cannot {what}: client {client} has not subscribed; subscribe first")

    # -- cursors

    def get_cursor(self, client: ClientIdentity) -> LogPosition | None:
        with self._lock:
            self._dest(client.destination)
            return self._cursors.get(client)

    def update_cursor(self, client: ClientIdentity, position: LogPosition) -> None:
        if not isinstance(position, LogPosition):
            raise TypeError(f"a cursor must be a LogPosition, got {type(position).__name__}")
        with self._lock:
            self._require_subscribed(client, "update the cursor")
            self._cursors[client] = position

    # -- batch marks

    def _marks_of(self, client: ClientIdentity) -> _Marks:
        marks = self._marks.get(client)
        if marks is None:
            marks = self._marks[client] = _Marks()
        return marks

    def add_batch(self, client: ClientIdentity, position_range: PositionRange, batch_id: int | None = None) -> int:
        if not isinstance(position_range, PositionRange):
            raise TypeError(f"a batch mark must be a PositionRange, got {type(position_range).__name__}")
        with self._lock:
            self._require_subscribed(client, "add a batch mark")
            marks = self._marks_of(client)
            if batch_id is None:
                batch_id = marks.next_id
            else:
                check_new_id(client, marks.ids(), batch_id)
            marks.ranges[batch_id] = position_range
            marks.next_id = max(marks.next_id, batch_id + 1)
            return batch_id

    def get_batch(self, client: ClientIdentity, batch_id: int) -> PositionRange | None:
        with self._lock:
            marks = self._marks.get(client)
            return None if marks is None else marks.ranges.get(batch_id)

    def remove_batch(self, client: ClientIdentity, batch_id: int) -> PositionRange:
        with self._lock:
            marks = self._marks.get(client)
            check_remove(client, [] if marks is None else marks.ids(), batch_id)
            assert marks is not None
            return marks.ranges.pop(batch_id)

    def remove_batchs_from(self, client: ClientIdentity, batch_id: int) -> dict[int, PositionRange]:
        with self._lock:
            marks = self._marks.get(client)
            ids = [] if marks is None else marks.ids()
            check_known(client, ids, batch_id)
            assert marks is not None
            return {i: marks.ranges.pop(i) for i in ids if i >= batch_id}

    def batch_ids(self, client: ClientIdentity) -> list[int]:
        with self._lock:
            marks = self._marks.get(client)
            return [] if marks is None else marks.ids()

    def get_first_batch(self, client: ClientIdentity) -> PositionRange | None:
        with self._lock:
            marks = self._marks.get(client)
            return next(iter(marks.ranges.values()), None) if marks is not None else None

    def get_last_batch(self, client: ClientIdentity) -> PositionRange | None:
        with self._lock:
            marks = self._marks.get(client)
            return next(reversed(marks.ranges.values()), None) if marks is not None else None

    def list_all_batchs(self, client: ClientIdentity) -> dict[int, PositionRange]:
        with self._lock:
            marks = self._marks.get(client)
            return {} if marks is None else dict(marks.ranges)

    def clear_all_batchs(self, client: ClientIdentity) -> None:
        with self._lock:
            marks = self._marks.get(client)
            if marks is not None:
                marks.ranges.clear()


def sorted_ids(names: Iterable[str]) -> list[int]:
    """Numeric node names as sorted ids; other names are ignored."""
    return sorted(int(n) for n in names if n.isdigit())
