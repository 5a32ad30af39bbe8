"""canal's two running monitors and cluster registration, on top of :class:`~canal.ha.running.RunningMonitor`.

* :class:`ServerRunningMonitor`: who runs a destination (``/otter/canal/destinations/{dest}/running``).
* :class:`ClientRunningMonitor`: who consumes a destination's client id (``.../{clientId}/running``).
* :class:`ClusterRegistration`: the ephemeral ``cluster/{ip:port}`` nodes that say which servers are up, recreated
  whenever ZooKeeper gives this process a new session.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NodeExistsError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState

from canal.client import ClientIdentity
from canal.ha.running import ActiveCallback, RunningMonitor, StandbyCallback
from canal.log import destination_logger
from canal.meta import zkpaths


class ServerRunningMonitor(RunningMonitor):
    """Competes for running a destination; canal's node content ``{"cid", "address", "active"}``."""

    def __init__(
        self,
        client: KazooClient,
        destination: str,
        address: str,
        *,
        on_active: ActiveCallback,
        on_standby: StandbyCallback,
        cid: int = 1,
        delay_s: float = 5.0,
    ) -> None:
        super().__init__(
            client,
            zkpaths.destination_running_path(destination),
            {"cid": cid, "address": address},
            epoch_path=zkpaths.destination_epoch_path(destination),
            on_active=on_active,
            on_standby=on_standby,
            delay_s=delay_s,
            destination=destination,
        )
        self.destination = destination
        self.address = address


class ClientRunningMonitor(RunningMonitor):
    """Competes for consuming ``client_id`` of a destination; canal's content ``{"clientId", "address", "active"}``."""

    def __init__(
        self,
        client: KazooClient,
        destination: str,
        client_id: int,
        address: str,
        *,
        on_active: ActiveCallback,
        on_standby: StandbyCallback,
        delay_s: float = 5.0,
    ) -> None:
        super().__init__(
            client,
            zkpaths.client_running_path(ClientIdentity(destination, client_id)),
            {"clientId": client_id, "address": address},
            epoch_path=zkpaths.client_epoch_path(ClientIdentity(destination, client_id)),
            on_active=on_active,
            on_standby=on_standby,
            delay_s=delay_s,
            destination=destination,
        )
        self.destination = destination
        self.client_id = client_id


class ClusterRegistration:
    """Keeps ``/otter/canal/cluster/{address}`` and each ``destinations/{dest}/cluster/{address}`` alive."""

    def __init__(self, client: KazooClient, address: str, destinations: Iterable[str] = ()) -> None:
        self._client = client
        self.address = address
        self._destinations: set[str] = set(destinations)
        self._lock = threading.Lock()
        self._started = False
        self._log = destination_logger(__name__, ",".join(sorted(self._destinations)) or "-")

    def _nodes(self) -> list[str]:
        with self._lock:
            dests = sorted(self._destinations)
        return [zkpaths.cluster_member_path(self.address)] + [
            zkpaths.destination_cluster_path(d, self.address) for d in dests
        ]

    def _register(self, node: str) -> None:
        try:
            self._client.create(node, b"", ephemeral=True, makepath=True)
        except NodeExistsError:
            _data, stat = self._client.get(node)
            if stat.ephemeralOwner != (self._client.client_id or (0,))[0]:
                # left over from our previous session until it expires: replace it with one of this session
                self._client.delete(node)
                self._client.create(node, b"", ephemeral=True, makepath=True)

    def _register_all(self) -> None:
        for node in self._nodes():
            try:
                self._register(node)
            except Exception:  # a connection drop mid-way: the next CONNECTED registers again
                self._log.warning("could not register %s in ZooKeeper; will retry on reconnect", node, exc_info=True)
                return

    def _on_state(self, state: str) -> None:
        if state == KazooState.CONNECTED and self._started:
            self._client.handler.spawn(self._register_all)

    def start(self) -> None:
        self._started = True
        self._client.add_listener(self._on_state)
        self._register_all()

    def add(self, destination: str) -> None:
        with self._lock:
            self._destinations.add(destination)
        if self._started:
            self._register(zkpaths.destination_cluster_path(destination, self.address))

    def remove(self, destination: str) -> None:
        with self._lock:
            self._destinations.discard(destination)
        if self._started:
            self._unregister(zkpaths.destination_cluster_path(destination, self.address))

    def stop(self) -> None:
        self._started = False
        self._client.remove_listener(self._on_state)
        for node in self._nodes():
            self._unregister(node)

    def _unregister(self, node: str) -> None:
        """Delete an ephemeral registration; one that cannot be deleted now (ZooKeeper unreachable, the client
        stopped) dies with the session."""
        if not self._client.connected:
            return
        try:
            if self._client.exists(node):
                self._client.delete(node)
        except (KazooException, KazooTimeoutError) as exc:
            self._log.info("%s is left to expire with the session: %s", node, type(exc).__name__)
