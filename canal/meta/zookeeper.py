"""canal's ``ZooKeeperMetaManager``: subscriptions, cursors and batch marks kept in ZooKeeper, in canal's layout.

* ``/otter/canal/destinations/{dest}/{clientId}``: the subscription; ``.../filter`` its filter text (absent when
  empty);
* ``.../cursor``: canal's cursor JSON (:meth:`~canal.position.LogPosition.to_json`; documents written by Java canal
  read as well);
* ``.../mark/{batchId:010d}``: one node per outstanding batch (persistent sequential), holding the batch's
  :class:`~canal.position.PositionRange` JSON.

Cursor writes can be fenced (:mod:`canal.meta.fence`): pass ``fence=`` or call :meth:`set_fence`; every cursor
write then commits only together with the fence check, or raises :class:`~canal.errors.FencedWriteError`.
"""

from __future__ import annotations

import random
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError, NotEmptyError
from kazoo.handlers.threading import KazooTimeoutError

from canal.client import ClientIdentity
from canal.config import ZkAuth
from canal.errors import CanalError, MetaError, PositionError, UnknownBatchError
from canal.meta import zkpaths
from canal.meta.base import ClientNotSubscribedError, CorruptMetaError, Lifecycle
from canal.meta.core import check_known, check_new_id, check_remove, sorted_ids
from canal.meta.fence import Fence, TxnOp, fenced_commit
from canal.meta.zkclient import make_client
from canal.position import LogPosition, PositionRange

_T = TypeVar("_T")

_RETRIES = 64  # optimistic retries when another writer changes a node between our read and our write


def _contention_backoff(attempt: int) -> None:
    """A short, jittered pause before retrying an optimistic write that lost a race (not synchronisation)."""
    if attempt:
        time.sleep(random.uniform(0, min(0.05, 0.001 * attempt)))


@contextmanager
def zk_errors(what: str) -> Iterator[None]:
    """Turn kazoo/connection failures into :class:`~canal.errors.MetaError` (ours pass through)."""
    try:
        yield
    except CanalError:
        raise
    except (KazooException, KazooTimeoutError) as exc:
        raise MetaError(f"ZooKeeper failed to {what}: {type(exc).__name__} {exc}".rstrip()) from exc


class ZooKeeperClientOwner(Lifecycle):
    """A component that uses a kazoo client: borrows a given one, or creates, starts and closes its own."""

    def __init__(self, zk: KazooClient | str, *, timeout_s: float = 10.0, auth: ZkAuth | None = None) -> None:
        super().__init__()
        self._auth = auth  # for a client of its own
        if isinstance(zk, str):
            self._hosts: str | None = zk
            self._zk: KazooClient | None = None
        else:
            self._hosts = None
            self._zk = zk
        self._timeout_s = timeout_s

    @property
    def zk(self) -> KazooClient:
        if self._zk is None:
            raise MetaError(f"{type(self).__name__} is not started: call start() first")
        return self._zk

    def _on_start(self) -> None:
        if self._hosts is not None:
            client = make_client(self._hosts, self._timeout_s, self._auth)
            try:
                with zk_errors(f"connect to {self._hosts}"):
                    client.start(timeout=self._timeout_s)
            except BaseException:
                with suppress(Exception):
                    client.stop()
                client.close()
                raise
            self._zk = client

    def _on_stop(self) -> None:
        if self._hosts is not None and self._zk is not None:
            client, self._zk = self._zk, None
            try:
                client.stop()
            finally:
                client.close()

    def _read(self, path: str) -> bytes | None:
        """The node's data, or None when the node does not exist."""
        with zk_errors(f"read {path}"):
            try:
                data, _stat = self.zk.get(path)
            except NoNodeError:
                return None
        return bytes(data) if data is not None else b""

    def _read_all(self, paths: list[str]) -> list[bytes | None]:
        """The nodes' data (None: no such node), every read sent at once: one round trip."""
        with zk_errors(f"read {', '.join(paths[:3])}{' ...' if len(paths) > 3 else ''}"):
            pending = [self.zk.get_async(path) for path in paths]
            out: list[bytes | None] = []
            for result in pending:
                try:
                    data, _stat = result.get()
                except NoNodeError:
                    out.append(None)
                    continue
                out.append(bytes(data) if data is not None else b"")
            return out

    def _write_fenced(self, path: str, data: bytes, fence: Fence | None, *, parent_must_exist: str | None) -> None:
        """Create or overwrite ``path`` with ``data`` in a transaction guarded by ``fence``.

        With ``parent_must_exist``, the write never creates that node (a vanished subscription stays vanished) and
        raises :class:`ClientNotSubscribedError` when it is missing; otherwise parents are created.
        """
        zk = self.zk
        with zk_errors(f"write {path}"):
            # the usual case first, in one round trip (a write-through cursor writes at every ack): the node is there
            # to overwrite, and the parent it must not create (-1: any version) too
            ops: list[TxnOp] = []
            if parent_must_exist is not None:
                ops.append(lambda txn: txn.check(parent_must_exist, -1))
            ops.append(lambda txn: txn.set_data(path, data))
            try:
                fenced_commit(zk, fence, ops)
                return
            except NoNodeError:
                pass  # the node or its parent is missing: look, as below
            for attempt in range(_RETRIES):
                _contention_backoff(attempt)
                if parent_must_exist is not None:
                    if zk.exists(parent_must_exist) is None:
                        raise ClientNotSubscribedError(
                            f"cannot write {path}: {parent_must_exist} does not exist (client not subscribed)"
                        )
                else:
                    parent = path.rsplit("/", 1)[0]
                    if parent:
                        zk.ensure_path(parent)
                exists = zk.exists(path) is not None

                def op(txn: Any, exists: bool = exists) -> object:
                    return txn.set_data(path, data) if exists else txn.create(path, data)

                try:
                    fenced_commit(zk, fence, [op])
                    return
                except (NoNodeError, NodeExistsError):
                    continue  # raced with another writer: look again
            raise MetaError(f"ZooKeeper write of {path} kept racing with other writers; gave up")


class ZooKeeperHistoryStore:
    """A destination's schema history document in ZooKeeper (``.../destinations/{dest}/schema_history``), written
    through the meta manager's client and fence (a stale owner cannot overwrite it), zlib-compressed: ZooKeeper
    nodes hold at most 1 MB and a history of many tables compresses about tenfold."""

    def __init__(self, manager: ZooKeeperMetaManager, destination: str) -> None:
        self._manager = manager
        self._path = zkpaths.schema_history_path(destination)

    def __repr__(self) -> str:
        return f"ZooKeeperHistoryStore({self._path!r})"

    def load(self) -> str | None:
        data = self._manager._read(self._path)
        if not data:
            return None
        try:
            return zlib.decompress(data).decode("utf-8")
        except (zlib.error, UnicodeDecodeError) as exc:
            raise CorruptMetaError(f"ZooKeeper node {self._path} does not hold a schema history: {exc}") from None

    def save(self, text: str) -> None:
        data = zlib.compress(text.encode("utf-8"), 6)
        if len(data) > _MAX_NODE_BYTES:
            raise MetaError(
                f"the schema history of {self._path} is {len(data)} bytes compressed, over ZooKeeper's node limit; "
                "lower canal.instance.tsdb.snapshot.expire or pycanal.schema.snapshot.ddls"
            )
        self._manager._write_fenced(self._path, data, self._manager.fence, parent_must_exist=None)


_MAX_NODE_BYTES = 1_000_000


def _mark_create_ops(root: str, counter: bytes, version: int, path: str, data: bytes) -> list[TxnOp]:
    def advance(txn: Any) -> object:
        return txn.set_data(root, counter, version=version)

    def create(txn: Any) -> object:
        return txn.create(path, data)

    return [advance, create]


def _decode(data: bytes, path: str, parse: Callable[[bytes], _T]) -> _T:
    try:
        return parse(data)
    except PositionError as exc:
        raise CorruptMetaError(f"ZooKeeper node {path} does not hold a valid document: {exc}") from None


class ZooKeeperMetaManager(ZooKeeperClientOwner):
    """A :class:`~canal.meta.base.MetaManager` in ZooKeeper.

    ``zk`` is a kazoo client (borrowed: started by the caller and left running by ``stop()``) or a hosts string
    (``"host:port[,host:port][/chroot]"``: the manager starts and closes its own client). ``fence`` guards cursor
    writes (see :mod:`canal.meta.fence`).
    """

    def __init__(
        self,
        zk: KazooClient | str,
        *,
        fence: Fence | None = None,
        timeout_s: float = 10.0,
        auth: ZkAuth | None = None,
    ) -> None:
        super().__init__(zk, timeout_s=timeout_s, auth=auth)
        self._fence = fence

    @property
    def fence(self) -> Fence | None:
        return self._fence

    def schema_history_store(self, destination: str) -> ZooKeeperHistoryStore:
        """Where ``destination``'s schema history lives (beside its cursors, behind the same fence)."""
        return ZooKeeperHistoryStore(self, destination)

    def set_fence(self, fence: Fence | None) -> None:
        """Guard every later cursor write with ``fence`` (None: unguarded)."""
        self._fence = fence

    # -- subscriptions

    def subscribe(self, client: ClientIdentity) -> None:
        self._require_started()
        zk = self.zk
        with zk_errors(f"subscribe {client}"):
            zk.ensure_path(zkpaths.client_path(client))
            path = zkpaths.filter_path(client)
            if client.filter:
                data = client.filter.encode("utf-8")
                try:
                    zk.create(path, data)
                except NodeExistsError:
                    zk.set(path, data)
            else:
                with suppress(NoNodeError):
                    zk.delete(path)

    def unsubscribe(self, client: ClientIdentity) -> None:
        self._require_started()
        with zk_errors(f"unsubscribe {client}"):
            for _ in range(_RETRIES):
                try:
                    self.zk.delete(zkpaths.client_path(client), recursive=True)
                    return
                except NoNodeError:
                    return
                except NotEmptyError:
                    continue  # a child appeared while deleting
            raise MetaError(f"could not unsubscribe {client}: its nodes kept changing")

    def has_subscribe(self, client: ClientIdentity) -> bool:
        self._require_started()
        with zk_errors(f"check subscription of {client}"):
            return self.zk.exists(zkpaths.client_path(client)) is not None

    def _subscribed(self, destination: str) -> list[ClientIdentity]:
        """The clients with a node under ``destination`` (without their filters): one round trip."""
        self._require_started()
        with zk_errors(f"list subscriptions of {destination}"):
            try:
                children = self.zk.get_children(zkpaths.destination_path(destination))
            except NoNodeError:
                return []
        return [ClientIdentity(destination, i) for i in sorted_ids(children) if i <= 32767]

    def list_all_subscribe_info(self, destination: str) -> list[ClientIdentity]:
        clients = self._subscribed(destination)
        filters = self._read_all([zkpaths.filter_path(c) for c in clients])
        return [c.with_filter(data.decode("utf-8")) if data else c for c, data in zip(clients, filters, strict=True)]

    def load_destination(self, destination: str) -> tuple[list[ClientIdentity], dict[int, LogPosition]]:
        """The subscribed clients of ``destination`` (with their filters) and their cursors, in two round trips (the
        list, then every filter and cursor at once): what an HA takeover's start reads."""
        clients = self._subscribed(destination)
        paths = [p for c in clients for p in (zkpaths.filter_path(c), zkpaths.cursor_path(c))]
        read = self._read_all(paths)
        out, cursors = [], {}
        for client, filter_data, cursor_data, cursor_path in zip(
            clients, read[0::2], read[1::2], paths[1::2], strict=True
        ):
            out.append(client.with_filter(filter_data.decode("utf-8")) if filter_data else client)
            if cursor_data:
                cursors[client.client_id] = _decode(cursor_data, cursor_path, LogPosition.from_json)
        return out, cursors

    # -- cursors

    def get_cursor(self, client: ClientIdentity) -> LogPosition | None:
        self._require_started()
        path = zkpaths.cursor_path(client)
        data = self._read(path)
        if not data:
            return None
        return _decode(data, path, LogPosition.from_json)

    def update_cursor(self, client: ClientIdentity, position: LogPosition) -> None:
        self._require_started()
        if not isinstance(position, LogPosition):
            raise TypeError(f"a cursor must be a LogPosition, got {type(position).__name__}")
        self._write_fenced(
            zkpaths.cursor_path(client),
            position.to_json().encode("utf-8"),
            self._fence,
            parent_must_exist=zkpaths.client_path(client),
        )

    # -- batch marks

    def _mark_ids(self, client: ClientIdentity) -> list[int]:
        with zk_errors(f"list batch marks of {client}"):
            try:
                return sorted_ids(self.zk.get_children(zkpaths.mark_root_path(client)))
            except NoNodeError:
                return []

    def add_batch(self, client: ClientIdentity, position_range: PositionRange, batch_id: int | None = None) -> int:
        """Add a mark; a new id is one more than the highest id this client was ever given.

        The next id is kept in the ``mark`` node's data and advanced in the same transaction that creates the mark
        node (canal numbers marks with ZooKeeper's sequence instead, which an explicitly numbered mark can
        overtake); node names are canal's 10-digit form either way.
        """
        self._require_started()
        if not isinstance(position_range, PositionRange):
            raise TypeError(f"a batch mark must be a PositionRange, got {type(position_range).__name__}")
        zk = self.zk
        data = position_range.to_json().encode("utf-8")
        root = zkpaths.mark_root_path(client)
        owner = zkpaths.client_path(client)
        with zk_errors(f"add a batch mark for {client}"):
            for attempt in range(_RETRIES):
                _contention_backoff(attempt)
                try:
                    raw, stat = zk.get(root)
                except NoNodeError:
                    if zk.exists(owner) is None:
                        raise ClientNotSubscribedError(
                            f"cannot add a batch mark: client {client} has not subscribed"
                        ) from None
                    with suppress(NodeExistsError):
                        zk.create(root, b"")
                    continue
                text = bytes(raw or b"").decode("ascii", "replace").strip()
                ids = self._mark_ids(client)
                next_id = max(int(text) if text.isdigit() else 1, ids[-1] + 1 if ids else 1)
                if batch_id is None:
                    new_id = next_id
                else:
                    check_new_id(client, ids, batch_id)
                    new_id = batch_id
                counter = str(max(next_id, new_id + 1)).encode("ascii")
                ops = _mark_create_ops(root, counter, stat.version, zkpaths.mark_path(client, new_id), data)
                try:
                    fenced_commit(zk, None, ops)
                    return new_id
                except (BadVersionError, NodeExistsError, NoNodeError):
                    continue  # another writer moved the counter, or the client vanished: look again
            raise MetaError(f"could not add a batch mark for {client}: the marks kept changing")

    def get_batch(self, client: ClientIdentity, batch_id: int) -> PositionRange | None:
        self._require_started()
        path = zkpaths.mark_path(client, batch_id)
        data = self._read(path)
        if data is None:
            return None
        return _decode(data, path, PositionRange.from_json)

    def remove_batch(self, client: ClientIdentity, batch_id: int) -> PositionRange:
        self._require_started()
        check_remove(client, self._mark_ids(client), batch_id)
        path = zkpaths.mark_path(client, batch_id)
        data = self._read(path)
        if data is None:
            raise UnknownBatchError(f"batch {batch_id} of client {client} was removed concurrently")
        position_range = _decode(data, path, PositionRange.from_json)
        with zk_errors(f"remove batch mark {path}"):
            try:
                self.zk.delete(path)
            except NoNodeError:
                raise UnknownBatchError(f"batch {batch_id} of client {client} was removed concurrently") from None
        return position_range

    def remove_batchs_from(self, client: ClientIdentity, batch_id: int) -> dict[int, PositionRange]:
        self._require_started()
        ids = self._mark_ids(client)
        check_known(client, ids, batch_id)
        removed: dict[int, PositionRange] = {}
        for bid in reversed([i for i in ids if i >= batch_id]):  # newest first: never leaves a hole
            path = zkpaths.mark_path(client, bid)
            data = self._read(path)
            if data is None:
                continue
            removed[bid] = _decode(data, path, PositionRange.from_json)
            with zk_errors(f"remove batch mark {path}"):
                try:
                    self.zk.delete(path)
                except NoNodeError:
                    removed.pop(bid)
        return dict(sorted(removed.items()))

    def list_all_batchs(self, client: ClientIdentity) -> dict[int, PositionRange]:
        self._require_started()
        result: dict[int, PositionRange] = {}
        for bid in self._mark_ids(client):
            path = zkpaths.mark_path(client, bid)
            data = self._read(path)
            if data is not None:  # None: acked between the listing and the read
                result[bid] = _decode(data, path, PositionRange.from_json)
        return result

    def batch_ids(self, client: ClientIdentity) -> list[int]:
        self._require_started()
        return self._mark_ids(client)

    def get_first_batch(self, client: ClientIdentity) -> PositionRange | None:
        self._require_started()
        for bid in self._mark_ids(client):
            found = self.get_batch(client, bid)
            if found is not None:
                return found
        return None

    def get_last_batch(self, client: ClientIdentity) -> PositionRange | None:
        self._require_started()
        for bid in reversed(self._mark_ids(client)):
            found = self.get_batch(client, bid)
            if found is not None:
                return found
        return None

    def clear_all_batchs(self, client: ClientIdentity) -> None:
        self._require_started()
        for bid in reversed(self._mark_ids(client)):
            with zk_errors(f"clear batch marks of {client}"), suppress(NoNodeError):
                self.zk.delete(zkpaths.mark_path(client, bid))

    def flush(self) -> None:
        """Nothing to persist: every change is written to ZooKeeper as it is made."""
