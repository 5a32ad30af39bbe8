"""The embedded server: many destinations in one process, every call keyed by a :class:`ClientIdentity`.

canal's ``CanalServerWithEmbedded``. Destinations are added from configs (or a canal-style conf directory) and
started eagerly or on first use. With ZooKeeper hosts the server runs a destination only while it holds the
destination's running node (:class:`~canal.ha.destination.HaDestination`); its meta is then period-mixed (memory,
flushed to ZooKeeper), and every cursor write is fenced by the activation's token, so a process that lost the node
can neither serve nor move a cursor.

Which process competes for which running node is the balance group's call (:mod:`canal.ha.balance`, on by
default): the processes embedding the same destinations share them, each within one of its share, and a
destination moves by a hand-over through the service's ``on_revoked`` and ``on_assigned``. With balancing off
every process competes for every destination it embeds, as canal's servers do. :meth:`EmbeddedServer.stop` hands
everything over before it returns; :meth:`EmbeddedServer.stop_on_signals` makes SIGTERM do that.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from canal.client import ClientIdentity
from canal.config import (
    BalanceConfig,
    InstanceConfig,
    MasterConfig,
    ServerConfig,
    ZkAuth,
    load_conf_dir,
    to_balance_config,
    to_zk_auth,
)
from canal.errors import ConfigError, HAError, NotRunningError, ServerError, UnknownDestinationError
from canal.ha import ClusterRegistration, ServerRunningMonitor
from canal.ha.assign import Placement
from canal.ha.balance import AssignmentDoc, Balancer
from canal.ha.destination import Callbacks, DestinationCallback, HaDestination
from canal.instance import Instance
from canal.instance_metrics import InstanceMetrics
from canal.log import destination_logger
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


@attrs.define(slots=True)
class _Slot:
    config: InstanceConfig
    lazy: bool
    members: tuple[MasterConfig, ...] | None = None  # a group destination's masters
    instance: Instance | None = None
    ha: HaDestination | None = None

    @property
    def placement(self) -> Placement:
        """What the balance group learns of this destination: its master (a group destination shares no read)
        and its preferred hosts."""
        master = self.config.master
        key = None if self.members is not None else f"{master.username}@{master.address}"
        return Placement(key, self.config.preferred_hosts)


@attrs.frozen(slots=True)
class BalanceState:
    """This process's part in HA (:meth:`EmbeddedServer.balance_state`): ``group`` and ``member_id`` (None without
    balancing), the group's ``members``, this process's ``share`` (its quota), the destinations ``assigned`` to it
    and those it is ``serving``, its ``moves_in`` (activations), ``moves_out`` (hand-overs) and ``losses`` (ends of
    serving it did not choose: a suspended or lost session), and for each destination it embeds whether some
    process holds the running node (``owned``, as this process last saw it)."""

    group: str | None
    member_id: str | None
    members: int
    share: int | None
    assigned: tuple[str, ...]
    serving: tuple[str, ...]
    moves_in: int
    moves_out: int
    losses: int
    owned: Mapping[str, bool]


class EmbeddedServer(StartStopContext):
    """``server = EmbeddedServer(); server.start(); server.start_destination(cfg)``.

    ``zk_hosts`` turns on HA: destinations run only in the process holding their running node. ``address`` names
    this process in ZooKeeper (default ``host:pid``). ``zk_auth`` (``("digest", "user:password")``) authenticates
    the session and protects every node pycanal creates with an ACL (:mod:`canal.meta.zkclient`).

    ``balance`` (a :class:`~canal.config.BalanceConfig`; True or None: the default one, on; False: off) shares the
    destinations among the processes of a balance group (:mod:`canal.ha.balance`). ``on_assigned(destination)``
    is called once this process serves a destination, ``on_revoked(destination)`` when it is about to stop (a
    hand-over: the service finishes and acks the batch in hand) or has stopped (a lost session), one at a time on
    one thread (:mod:`canal.ha.destination`).

    ZooKeeper that cannot be reached: :meth:`start` raises :class:`~canal.errors.HAError` naming the hosts after
    ``zk_timeout_s``. :meth:`stop` is bounded: it hands the destinations over (each through ``on_revoked``, its
    cursors flushed) while ZooKeeper answers, for at most ``stop_timeout_s``; past it (ZooKeeper unreachable, an
    ``on_revoked`` that hangs) it gives up on what needs ZooKeeper -- the running nodes die with the session, and
    cursors acked since the last flush (at most ``flush_period_s``) are delivered again by the next owner, as after
    a crash -- instead of waiting for ZooKeeper to come back.
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
        balance: BalanceConfig | bool | None = None,
        on_assigned: DestinationCallback | None = None,
        on_revoked: DestinationCallback | None = None,
    ) -> None:
        self.zk_hosts = zk_hosts
        self.stop_timeout_s = stop_timeout_s
        self.balance = to_balance_config(balance)
        self._log = destination_logger(__name__, "-")  # the server's own records (its destinations log their own)
        self._zk_auth = to_zk_auth(zk_auth)  # never shown (ZkAuth masks the credential)
        self.address = address or default_server_address()
        self.ha_delay_s = ha_delay_s
        self._zk_timeout_s = zk_timeout_s
        self._zk: KazooClient | None = None
        self._registration: ClusterRegistration | None = None
        self._balancer: Balancer | None = None
        self._callbacks = Callbacks(on_assigned, on_revoked, stuck_s=self.balance.revoke_timeout_s)
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
            balance=kwargs.pop("balance", server_config.balance),
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
                if self.balance.enabled:
                    self._balancer = Balancer(
                        zk,
                        group=self.balance.group,
                        address=self.address,
                        max_destinations=self.balance.max_destinations,
                        on_assignment=self._assigned,
                        timeout_s=self._zk_timeout_s,
                    )
                    self._balancer.start()
            self._started = True
            for name, slot in self._slots.items():
                if not slot.lazy:
                    self._start_slot(name, slot)

    def stop(self) -> None:
        """Stop every destination, handing over those this process serves first (under HA: each through
        ``on_revoked``, its batches acked or rolled back, its meta flushed; with balancing the group assigns them
        elsewhere first, so their next owners are waiting for them), then leave ZooKeeper -- bounded: see the class
        docstring."""
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
            self._callbacks.stop(self.stop_timeout_s)
            self._started = False

    def _stop_all(self) -> None:
        self._hand_over_all()
        balancer, self._balancer = self._balancer, None  # left the group: no member data to publish any more
        for name in list(self._slots):
            try:
                self._stop_slot(self._slots[name])
            except Exception as exc:  # ZooKeeper gone mid-way: stop the other destinations all the same
                destination_logger(__name__, name).warning("stopping failed: %s: %s", type(exc).__name__, exc)
        if balancer is not None:
            balancer.stop()
        if self._registration is not None:
            self._registration.stop()
            self._registration = None

    def _hand_over_all(self) -> None:
        """The graceful part of :meth:`stop`: leave the balance group, hand over what this process serves, all at
        once; within ``stop_timeout_s`` (skipped while ZooKeeper is unreachable)."""
        held = [slot.ha for slot in self._slots.values() if slot.ha is not None]
        if not held or self._zk is None or not self._zk.connected:
            return
        deadline = time.monotonic() + min(self.stop_timeout_s, self.balance.revoke_timeout_s + self._zk_timeout_s)
        if self._balancer is not None:
            self._balancer.leave()
            if not self._balancer.wait_left(max(0.0, deadline - time.monotonic())):
                destination_logger(__name__, ",".join(h.destination for h in held)).warning(
                    "the balance group did not take this process's leave within %.1fs", self._zk_timeout_s
                )
        for ha in held:
            ha.want(False)
        for ha in held:
            ha.wait_revoked(max(0.0, deadline - time.monotonic()))

    def stop_on_signals(self, *signals: int, exit: bool = True) -> None:
        """Make ``signals`` (default: SIGTERM) stop this server gracefully -- every destination handed over, as
        :meth:`stop` does -- on a thread of its own (``canal-stop``); then, with ``exit``, the signal is raised
        again, so the process ends as it would have, with the signal's status. The first signal restores the
        default action: a second one ends the process at once. Call it from the main thread (Python's rule for
        signal handlers)."""
        chosen = signals or (signal.SIGTERM,)

        def stop_then_exit(signum: int) -> None:
            try:
                self.stop()
            finally:
                if exit:
                    os.kill(os.getpid(), signum)

        def handler(signum: int, _frame: Any) -> None:
            signal.signal(signum, signal.SIG_DFL)  # the main thread: the next one ends the process
            threading.Thread(target=stop_then_exit, args=(signum,), name="canal-stop").start()

        for signum in chosen:
            signal.signal(signum, handler)

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
        """Start a destination now (adding it first when given a config). Under HA it competes for the running node
        (with balancing: joins the group's assignment), also after :meth:`release`."""
        with self._lock:
            if isinstance(config_or_name, InstanceConfig):
                if config_or_name.destination not in self._slots:
                    self.add_destination(config_or_name, lazy=False)
                name = config_or_name.destination
            else:
                name = config_or_name
            if not self._started:
                raise ServerError("start the server before starting destinations")
            slot = self._slot(name)
            if slot.ha is not None:  # released before: take part again
                if self._balancer is not None:
                    self._balancer.decline(name, False)
                else:
                    slot.ha.want(True)
            self._start_slot(name, slot)

    def stop_destination(self, destination: str) -> None:
        """Stop a destination in this process; under HA it is handed over first."""
        with self._lock:
            self._stop_slot(self._slot(destination), hand_over=True)

    def remove_destination(self, destination: str) -> None:
        with self._lock:
            self._stop_slot(self._slot(destination), hand_over=True)
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
                slot.ha = HaDestination(
                    slot.config,
                    self._zk,
                    address=self.address,
                    delay_s=self.ha_delay_s,
                    callbacks=self._callbacks,
                    balanced=self._balancer is not None,
                    revoke_timeout_s=self.balance.revoke_timeout_s,
                    members=slot.members,
                )
                slot.ha.start()
                if self._registration is not None:
                    self._registration.add(name)
                self._publish()
            return
        if slot.instance is None:
            slot.instance = Instance(slot.config, members=slot.members)
        slot.instance.start()

    def _stop_slot(self, slot: _Slot, *, hand_over: bool = False) -> None:
        if slot.ha is not None:
            if hand_over and self._zk is not None and self._zk.connected:
                self._hand_over(slot.config.destination, slot.ha, leaving=True)
            slot.ha.stop()
            if self._registration is not None:
                self._registration.remove(slot.config.destination)
            slot.ha = None
            self._publish()
        if slot.instance is not None:
            slot.instance.stop()

    def _publish(self) -> None:
        """Tell the balance group which destinations this process embeds."""
        if self._balancer is not None:
            self._balancer.publish({n: s.placement for n, s in self._slots.items() if s.ha is not None})

    def _assigned(self, doc: AssignmentDoc, member_id: str | None) -> None:
        # the balancer's thread: compete for what is assigned here, hand over the rest (neither blocks). No lock: a
        # stop holding the server's lock waits for the hand-overs this starts
        for name, slot in dict(self._slots).items():
            if slot.ha is not None:
                slot.ha.want(member_id is not None and doc.owners.get(name) == member_id)

    def _hand_over(self, destination: str, ha: HaDestination, *, leaving: bool = False) -> None:
        """Hand ``destination`` over and wait for it (bounded): with balancing the group assigns it elsewhere first
        (this process declines it, or ``leaving``: no longer embeds it)."""
        timeout = self.balance.revoke_timeout_s + self._zk_timeout_s
        balancer = self._balancer
        if balancer is None:
            ha.release()
            return
        deadline = time.monotonic() + timeout
        if leaving:
            self._balancer_publish_without(destination)
        else:
            balancer.decline(destination)
        if not balancer.wait(lambda doc, me: doc is not None and doc.owners.get(destination) != me, timeout):
            destination_logger(__name__, destination).warning(
                "the balance group did not assign it elsewhere within %.1fs", timeout
            )
        ha.want(False)
        ha.wait_revoked(max(0.0, deadline - time.monotonic()))

    def _balancer_publish_without(self, destination: str) -> None:
        if self._balancer is not None:
            self._balancer.publish(
                {n: s.placement for n, s in self._slots.items() if s.ha is not None and n != destination}
            )

    def _started_slot(self, destination: str) -> _Slot:
        """The slot of a destination, started if lazy (under HA: competing for the running node)."""
        slot = self._slots.get(destination)
        if self._started and slot is not None and (slot.ha is not None or (slot.instance and slot.instance.is_started)):
            return slot  # no lock: a callback acking during a stop's hand-over must not wait for the stop
        with self._lock:
            if not self._started:
                raise ServerError("the embedded server is not started")
            slot = self._slot(destination)
            if slot.ha is None and (slot.instance is None or not slot.instance.is_started):
                self._start_slot(destination, slot)
            return slot

    def instance(self, destination: str) -> Instance:
        """The running instance of a destination, starting a lazy one; NotRunningError while standing by."""
        return self._instance(destination)

    def _instance(self, destination: str, *, handing_out: bool = False) -> Instance:
        slot = self._started_slot(destination)
        if slot.ha is not None:
            return slot.ha.active_instance(handing_out=handing_out)
        assert slot.instance is not None
        return slot.instance

    def serving(self) -> frozenset[str]:
        """The destinations this process serves now (under HA: holds the running node of, its instance started)."""
        out = set()
        for name, slot in dict(self._slots).items():
            if slot.ha is not None:
                if slot.ha.serving.is_set():
                    out.add(name)
            elif slot.instance is not None and slot.instance.is_started:
                out.add(name)
        return frozenset(out)

    def wait_serving(self, destination: str, timeout: float | None = None) -> bool:
        """Wait until this process serves ``destination``; whether it does.

        Without HA a destination serves once started (a lazy one is started here), so this returns True at once.
        Under HA it waits until this process holds the running node *and* its instance has started -- False after
        ``timeout`` seconds (None: no limit) while another process holds it (with balancing: while it is assigned
        to another) or ZooKeeper cannot be reached. It is a snapshot: a suspended session or a hand-over can stop
        the serving right after (calls then raise NotRunningError).
        """
        slot = self._started_slot(destination)
        if slot.ha is None:
            return True
        return slot.ha.serving.wait(timeout)

    def running_monitor(self, destination: str) -> ServerRunningMonitor | None:
        slot = self._slot(destination)
        return None if slot.ha is None else slot.ha.monitor

    def release(self, destination: str) -> None:
        """HA: hand the destination over to another process on purpose, and return once it is (``on_revoked``
        runs, batches handed out are acked or rolled back, meta is flushed). This process then stays out of it
        until :meth:`start_destination` -- with balancing it declines it, and the group assigns it to another
        process (or to none, when no other embeds it)."""
        slot = self._slot(destination)
        if slot.ha is None:
            raise ServerError(f"destination {destination!r} does not run under ZooKeeper HA")
        self._hand_over(destination, slot.ha)

    def balance_state(self) -> BalanceState:
        """This process's part in HA now (see :class:`BalanceState`)."""
        slots = {n: s.ha for n, s in dict(self._slots).items() if s.ha is not None}
        balancer = self._balancer
        doc = None if balancer is None else balancer.doc
        member = None if balancer is None else balancer.member_id
        assigned = tuple(sorted(slots)) if balancer is None else tuple(doc.mine(member) if doc else ())
        return BalanceState(
            group=None if balancer is None else balancer.group,
            member_id=member,
            members=0 if balancer is None else balancer.members,
            share=None if doc is None or member is None else doc.quotas.get(member),
            assigned=assigned,
            serving=tuple(sorted(n for n, ha in slots.items() if ha.serving.is_set())),
            moves_in=sum(ha.moves_in for ha in slots.values()),
            moves_out=sum(ha.moves_out for ha in slots.values()),
            losses=sum(ha.losses for ha in slots.values()),
            owned={n: bool(ha.monitor.held) for n, ha in sorted(slots.items())},
        )

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
        return self._instance(client.destination, handing_out=True).get_without_ack(
            batch_size, timeout, client, linger=linger
        )

    def get(
        self,
        client: ClientIdentity,
        batch_size: int = 1000,
        timeout: float | None = None,
        *,
        linger: float | None = None,
    ) -> Message:
        return self._instance(client.destination, handing_out=True).get(batch_size, timeout, client, linger=linger)

    def ack(self, client: ClientIdentity, batch_id: int) -> None:
        self.instance(client.destination).ack(batch_id, client)
        self._settled(client.destination)

    def rollback(self, client: ClientIdentity, batch_id: int | None = None) -> None:
        self.instance(client.destination).rollback(batch_id, client)
        self._settled(client.destination)

    def _settled(self, destination: str) -> None:
        slot = self._slots.get(destination)
        if slot is not None and slot.ha is not None:
            slot.ha.settled()  # a hand-over waiting for the batches handed out looks again

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
