"""The embedded server: many destinations in one process, every call keyed by a :class:`ClientIdentity`.

canal's ``CanalServerWithEmbedded``. Destinations are added from configs (or a canal-style conf directory) and
started eagerly or on first use. With ZooKeeper hosts the server runs a destination only while it holds the
destination's running node (:class:`~canal.ha.ServerRunningMonitor`); its meta is then period-mixed (memory,
flushed to ZooKeeper), and every cursor write is fenced by the activation's token, so a process that lost the node
can neither serve nor move a cursor.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import attrs
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from canal.client import ClientIdentity
from canal.config import InstanceConfig, MasterConfig, ServerConfig, ZkAuth, load_conf_dir, to_zk_auth
from canal.errors import ConfigError, HAError, NotRunningError, ServerError, UnknownDestinationError
from canal.ha import ClusterRegistration, ServerRunningMonitor
from canal.instance import Instance, InstanceMetrics
from canal.log import destination_logger
from canal.meta.fence import ZkFence
from canal.meta.zkclient import make_client, run_or_stop
from canal.position import LogPosition
from canal.protocol import Message
from canal.snapshot.runner import SnapshotRunner
from canal.start_stop import StartStopContext


def default_server_address() -> str:
    """``host:pid``: unique per process on a host, stable for the process's life (canal uses ip:port)."""
    try:
        host = socket.gethostbyname(socket.gethostname())
    except OSError:
        host = "127.0.0.1"
    return f"{host}:{os.getpid()}"


class _HaDestination:
    """One destination under a running monitor: an Instance exists only while this process is active."""

    def __init__(
        self,
        server: EmbeddedServer,
        config: InstanceConfig,
        zk: KazooClient,
        members: tuple[MasterConfig, ...] | None = None,
    ) -> None:
        self.config = config
        self.members = members
        self._server = server
        self._zk = zk
        self._log = destination_logger(__name__, config.destination)
        self._lock = threading.Lock()
        self.instance: Instance | None = None
        self.serving = threading.Event()
        self.monitor = ServerRunningMonitor(
            zk,
            config.destination,
            server.address,
            on_active=self._activate,
            on_standby=self._deactivate,
            delay_s=server.ha_delay_s,
        )

    def _fence(self) -> ZkFence | None:
        token = self.monitor.token
        return None if token is None else ZkFence(self.monitor.epoch_path, token)

    def _activate(self, token: int) -> None:
        instance = Instance(
            self.config, members=self.members, zk=self._zk, fence=self._fence, guard=self.monitor.confirm_owner
        )
        try:
            instance.start()
        except BaseException:
            # the monitor gives the node up and retries later; leave nothing of this attempt running
            self._stop_instance(instance, "a failed start")
            raise
        with self._lock:
            self.instance = instance
        self.serving.set()
        self._log.info("serving with fencing token %d", token)

    def _deactivate(self, reason: str) -> None:
        # may run on kazoo's connection thread (SUSPENDED): stop serving now, stop the instance elsewhere
        self.serving.clear()
        with self._lock:
            instance, self.instance = self.instance, None
        if instance is not None:
            threading.Thread(target=self._stop_instance, args=(instance, reason), daemon=True).start()

    def _stop_instance(self, instance: Instance, reason: str) -> None:
        try:
            instance.stop()
        except Exception as exc:  # a fenced flush after losing the node is expected
            self._log.warning("instance stopped after %s; final meta flush refused: %s", reason, exc)

    def active_instance(self) -> Instance:
        with self._lock:
            instance = self.instance
        if instance is None or not self.serving.is_set() or not self.monitor.is_active:
            raise NotRunningError(
                f"destination {self.config.destination!r} is not running in this process "
                "(another process holds it, or the ZooKeeper session is suspended)"
            )
        return instance

    def start(self) -> None:
        self.monitor.start()

    def release(self) -> None:
        """Hand over on purpose: stop serving, flush meta while the fencing token is still valid, free the node."""
        self.serving.clear()
        with self._lock:
            instance, self.instance = self.instance, None
        if instance is not None:
            self._stop_instance(instance, "release")
        self.monitor.release()

    def stop(self) -> None:
        self.monitor.stop()  # releases: _deactivate runs
        with self._lock:
            instance, self.instance = self.instance, None
        if instance is not None:
            self._stop_instance(instance, "stop")


@attrs.define(slots=True)
class _Slot:
    config: InstanceConfig
    lazy: bool
    members: tuple[MasterConfig, ...] | None = None  # a group destination's masters
    instance: Instance | None = None
    ha: _HaDestination | None = None


class EmbeddedServer(StartStopContext):
    """``server = EmbeddedServer(); server.start(); server.start_destination(cfg)``.

    ``zk_hosts`` turns on HA: destinations run only in the process holding their running node. ``address`` names
    this process in ZooKeeper (default ``host:pid``). ``zk_auth`` (``("digest", "user:password")``) authenticates
    the session and protects every node pycanal creates with an ACL (:mod:`canal.meta.zkclient`).

    ZooKeeper that cannot be reached: :meth:`start` raises :class:`~canal.errors.HAError` naming the hosts after
    ``zk_timeout_s``. :meth:`stop` is bounded: it hands the destinations over (flushing their cursors) while
    ZooKeeper answers, for at most ``stop_timeout_s``; with ZooKeeper unreachable it gives up on what needs it --
    the running nodes die with the session, and cursors acked since the last flush (at most ``flush_period_s``) are
    delivered again by the next owner, as after a crash -- instead of waiting for ZooKeeper to come back.
    """

    def __init__(
        self,
        *,
        zk_hosts: str | None = None,
        address: str | None = None,
        ha_delay_s: float = 5.0,
        zk_timeout_s: float = 10.0,
        zk_auth: ZkAuth | tuple[str, str] | str | None = None,
        stop_timeout_s: float = 10.0,
    ) -> None:
        self.zk_hosts = zk_hosts
        self.stop_timeout_s = stop_timeout_s
        self._log = destination_logger(__name__, "-")  # the server's own records (its destinations log their own)
        self._zk_auth = to_zk_auth(zk_auth)  # never shown (ZkAuth masks the credential)
        self.address = address or default_server_address()
        self.ha_delay_s = ha_delay_s
        self._zk_timeout_s = zk_timeout_s
        self._zk: KazooClient | None = None
        self._registration: ClusterRegistration | None = None
        self._slots: dict[str, _Slot] = {}
        self._lock = threading.RLock()
        self._started = False
        self.server_config: ServerConfig | None = None  # set when loaded from a conf dir

    @classmethod
    def from_conf_dir(cls, path: str | os.PathLike[str], **kwargs: Any) -> EmbeddedServer:
        """A server with the destinations of a canal conf dir: ``canal.properties`` + ``{dest}/instance.properties``."""
        server_config, instances = load_conf_dir(path)
        server = cls(
            zk_hosts=kwargs.pop("zk_hosts", server_config.zk_hosts),
            zk_auth=kwargs.pop("zk_auth", server_config.zk_auth),
            **kwargs,
        )
        server.server_config = server_config
        for config in instances.values():
            server.add_destination(config, lazy=True)
        return server

    # -- lifecycle -----------------------------------------------------------------------------------------------

    def is_started(self, destination: str | None = None) -> bool:
        """Whether the server (no argument) or a destination is running in this process."""
        if destination is None:
            return self._started
        slot = self._slot(destination)
        if slot.ha is not None:
            return slot.ha.serving.is_set()
        return slot.instance is not None and slot.instance.is_started

    def start(self) -> None:
        with self._lock:
            if self._started:
                return
            if self.zk_hosts:
                zk = make_client(self.zk_hosts, self._zk_timeout_s, self._zk_auth)
                try:
                    zk.start(timeout=self._zk_timeout_s)
                    registration = ClusterRegistration(zk, self.address)
                    registration.start()
                except (KazooException, KazooTimeoutError) as exc:
                    zk.stop()
                    zk.close()
                    raise HAError(
                        f"cannot reach ZooKeeper at {self.zk_hosts} within {self._zk_timeout_s:g} s "
                        f"({type(exc).__name__}): is it running, and are the hosts right?"
                    ) from None
                self._zk, self._registration = zk, registration
            self._started = True
            for name, slot in self._slots.items():
                if not slot.lazy:
                    self._start_slot(name, slot)

    def stop(self) -> None:
        """Stop every destination, and leave ZooKeeper (bounded by ``stop_timeout_s``: see the class docstring)."""
        with self._lock:
            if not self._started:
                return
            zk = self._zk
            if zk is None:
                self._stop_all()
            else:
                budget = self.stop_timeout_s if zk.connected else 0.0
                if not run_or_stop(zk, self._stop_all, budget, name="canal-server-stop"):
                    self._log.warning(
                        "ZooKeeper at %s did not answer: stopped without it (running nodes expire with the session; "
                        "cursors acked since the last flush are delivered again by the next owner)",
                        self.zk_hosts,
                    )
                zk.stop()
                zk.close()
                self._zk = None
            self._started = False

    def _stop_all(self) -> None:
        for name in list(self._slots):
            try:
                self._stop_slot(self._slots[name])
            except Exception as exc:  # ZooKeeper gone mid-way: stop the other destinations all the same
                destination_logger(__name__, name).warning("stopping failed: %s: %s", type(exc).__name__, exc)
        if self._registration is not None:
            self._registration.stop()
            self._registration = None

    # -- destinations --------------------------------------------------------------------------------------------

    @property
    def destinations(self) -> list[str]:
        with self._lock:
            return sorted(self._slots)

    def add_destination(
        self, config: InstanceConfig, *, lazy: bool = True, members: Sequence[MasterConfig] | None = None
    ) -> None:
        """Register a destination; it starts on first use (``lazy``) or with the server.

        ``members``: a group destination -- several masters merged into it, as :meth:`Instance.group` describes.
        """
        with self._lock:
            if config.destination in self._slots:
                raise ServerError(f"destination {config.destination!r} is already configured")
            if members is not None and not members:
                raise ConfigError("a group destination needs at least one member master", key="members")
            self._slots[config.destination] = slot = _Slot(config, lazy, None if members is None else tuple(members))
            if self._started and not lazy:
                self._start_slot(config.destination, slot)

    def start_destination(self, config_or_name: InstanceConfig | str) -> None:
        """Start a destination now (adding it first when given a config)."""
        with self._lock:
            if isinstance(config_or_name, InstanceConfig):
                if config_or_name.destination not in self._slots:
                    self.add_destination(config_or_name, lazy=False)
                name = config_or_name.destination
            else:
                name = config_or_name
            if not self._started:
                raise ServerError("start the server before starting destinations")
            self._start_slot(name, self._slot(name))

    def stop_destination(self, destination: str) -> None:
        with self._lock:
            self._stop_slot(self._slot(destination))

    def remove_destination(self, destination: str) -> None:
        with self._lock:
            self._stop_slot(self._slot(destination))
            del self._slots[destination]

    def _slot(self, destination: str) -> _Slot:
        slot = self._slots.get(destination)
        if slot is None:
            known = ", ".join(sorted(self._slots)) or "none"
            raise UnknownDestinationError(f"unknown destination {destination!r} (configured: {known})")
        return slot

    def _start_slot(self, name: str, slot: _Slot) -> None:
        if self._zk is not None:
            if slot.ha is None:
                slot.ha = _HaDestination(self, slot.config, self._zk, slot.members)
                slot.ha.start()
                if self._registration is not None:
                    self._registration.add(name)
            return
        if slot.instance is None:
            slot.instance = Instance(slot.config, members=slot.members)
        slot.instance.start()

    def _stop_slot(self, slot: _Slot) -> None:
        if slot.ha is not None:
            slot.ha.stop()
            if self._registration is not None:
                self._registration.remove(slot.config.destination)
            slot.ha = None
        if slot.instance is not None:
            slot.instance.stop()

    def _started_slot(self, destination: str) -> _Slot:
        """The slot of a destination, started if lazy (under HA: competing for the running node)."""
        with self._lock:
            if not self._started:
                raise ServerError("the embedded server is not started")
            slot = self._slot(destination)
            if slot.ha is None and (slot.instance is None or not slot.instance.is_started):
                self._start_slot(destination, slot)
            return slot

    def instance(self, destination: str) -> Instance:
        """The running instance of a destination, starting a lazy one; NotRunningError while standing by."""
        slot = self._started_slot(destination)
        if slot.ha is not None:
            return slot.ha.active_instance()
        assert slot.instance is not None
        return slot.instance

    def wait_serving(self, destination: str, timeout: float | None = None) -> bool:
        """Wait until this process serves ``destination``; whether it does.

        Without HA a destination serves once started (a lazy one is started here), so this returns True at once.
        Under HA it waits until this process holds the running node *and* its instance has started -- False after
        ``timeout`` seconds (None: no limit) while another process holds it or ZooKeeper cannot be reached. It is a
        snapshot: a suspended session can stop the serving right after (calls then raise NotRunningError).
        """
        slot = self._started_slot(destination)
        if slot.ha is None:
            return True
        return slot.ha.serving.wait(timeout)

    def running_monitor(self, destination: str) -> ServerRunningMonitor | None:
        slot = self._slot(destination)
        return None if slot.ha is None else slot.ha.monitor

    def release(self, destination: str) -> None:
        """HA: hand the destination over to another process on purpose (meta is flushed first)."""
        slot = self._slot(destination)
        if slot.ha is None:
            raise ServerError(f"destination {destination!r} does not run under ZooKeeper HA")
        slot.ha.release()

    # -- client calls --------------------------------------------------------------------------------------------

    def subscribe(self, client: ClientIdentity, filter: str | None = None) -> None:
        self.instance(client.destination).subscribe(client.filter if filter is None else filter, client)

    def unsubscribe(self, client: ClientIdentity) -> None:
        self.instance(client.destination).unsubscribe(client)

    def get_without_ack(
        self,
        client: ClientIdentity,
        batch_size: int = 1000,
        timeout: float | None = None,
        *,
        linger: float | None = None,
    ) -> Message:
        return self.instance(client.destination).get_without_ack(batch_size, timeout, client, linger=linger)

    def get(
        self,
        client: ClientIdentity,
        batch_size: int = 1000,
        timeout: float | None = None,
        *,
        linger: float | None = None,
    ) -> Message:
        return self.instance(client.destination).get(batch_size, timeout, client, linger=linger)

    def ack(self, client: ClientIdentity, batch_id: int) -> None:
        self.instance(client.destination).ack(batch_id, client)

    def rollback(self, client: ClientIdentity, batch_id: int | None = None) -> None:
        self.instance(client.destination).rollback(batch_id, client)

    def list_batch_ids(self, client: ClientIdentity) -> list[int]:
        return self.instance(client.destination).list_batch_ids(client)

    def get_cursor(self, client: ClientIdentity) -> LogPosition | None:
        return self.instance(client.destination).get_cursor(client)

    def snapshot(
        self,
        destination: str,
        tables: Sequence[str],
        *,
        chunk_rows: int | None = None,
        max_rows_per_s: float | None = None,
    ) -> SnapshotRunner:
        """Snapshot ``tables`` of a running destination into its stream (:meth:`Instance.snapshot
        <canal.instance.Instance.snapshot>`); under HA only the process that serves it can."""
        return self.instance(destination).snapshot(tables, chunk_rows=chunk_rows, max_rows_per_s=max_rows_per_s)

    def running_instances(self) -> dict[str, Instance]:
        """The instances that run in this process now, by destination. Unlike :meth:`instance` it starts nothing: a
        lazy destination never used, or one stopped with :meth:`stop_destination`, is not among them (nor, under
        HA, one this process does not serve)."""
        out = {}
        with self._lock:
            slots = list(self._slots.items()) if self._started else []
        for name, slot in slots:
            if slot.ha is not None:
                try:
                    out[name] = slot.ha.active_instance()
                except NotRunningError:
                    continue
            elif slot.instance is not None and slot.instance.is_started:
                out[name] = slot.instance
        return out

    @property
    def zookeeper_connected(self) -> bool | None:
        """Whether the ZooKeeper session is connected now (None: no ZooKeeper, or the server is not started).
        While it is not, this process serves no destination (a suspended session stops serving at once)."""
        zk = self._zk
        return None if zk is None else bool(zk.connected)

    def metrics(self) -> dict[str, InstanceMetrics]:
        """The metrics of the destinations running in this process (:meth:`running_instances`: reading them starts
        nothing, so a scrape never starts a destination)."""
        return {name: instance.metrics() for name, instance in sorted(self.running_instances().items())}

    def __iter__(self) -> Iterator[str]:
        return iter(self.destinations)
