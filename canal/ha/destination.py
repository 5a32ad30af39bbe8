"""One destination of an :class:`~canal.server.EmbeddedServer` under ZooKeeper HA, and the service's callbacks.

A :class:`HaDestination` runs an :class:`~canal.instance.Instance` only while its
:class:`~canal.ha.ServerRunningMonitor` holds the destination's running node, built at each activation from the
acked cursor in ZooKeeper and fenced by the activation's token. Whether it competes for the node at all is the
server's call: always without balancing, only while the balance group assigns it here with balancing
(:meth:`HaDestination.want`).

**The hand-over** of a destination this process serves and no longer wants (:meth:`HaDestination.want` False, a
graceful stop, :meth:`~canal.server.EmbeddedServer.release`), in order:

1. when its ``on_revoked`` is due (callbacks run one at a time: until then the destination serves as before), new
   batches are refused (a get raises :class:`~canal.errors.NotRunningError`; one that was waiting for entries when
   it began ends at once, empty or raising it: what it would have taken is put back); acks and rollbacks go on;
2. ``on_revoked(destination)`` runs: the service finishes the batch in hand, acks it or rolls it back, and stops
   its consumer of the destination;
3. batches still outstanding get until ``revoke_timeout_s`` (counted from the hand-over's start) to be acked or
   rolled back;
4. the meta is persisted while the fencing token is still valid; the running node is deleted with the epoch node
   saying "released", so the next owner competes at once (no ``ha_delay_s``) and starts from the acked cursor,
   while this process stops the rest of the instance; ``on_assigned(destination)`` runs there once it serves.

Nothing acked is lost or delivered again; what was handed out and not acked by the deadline is delivered again by
the next owner. Every other end of serving (a suspended or lost ZooKeeper session, a fenced write) cannot wait for
the service: the instance stops at once and ``on_revoked`` is called after the fact, where an ack fails.

**Callbacks** run on one thread of the server (``canal-ha-callbacks``), one at a time, in the order of the events:
for each destination, ``on_assigned`` and ``on_revoked`` alternate, starting with ``on_assigned``. A callback that
raises is logged and the hand-over goes on; one that has not returned after ``revoke_timeout_s`` is left running,
and the callbacks after it run on a new thread (:class:`Callbacks`).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

from kazoo.client import KazooClient

from canal.config import InstanceConfig, MasterConfig
from canal.errors import CanalError, NotRunningError
from canal.ha.monitors import ServerRunningMonitor
from canal.instance import Instance
from canal.log import destination_logger
from canal.meta.fence import ZkFence

DestinationCallback = Callable[[str], None]
DRAIN_CHECK_S = 0.05  # how often a hand-over looks again at batches acked outside the server's calls


class Callbacks:
    """The service's ``on_assigned`` / ``on_revoked``, run one at a time on the ``canal-ha-callbacks`` thread.

    A callback that has not returned after ``stuck_s`` seconds (the hand-over's ``revoke_timeout_s``: a service's
    bug) is left running on its thread, and the callbacks after it run on a new one: the hand-over it was part of
    goes on without it, and later ones -- an ``on_assigned`` of a destination given back to this process -- must not
    wait for it for ever.
    """

    def __init__(
        self, on_assigned: DestinationCallback | None, on_revoked: DestinationCallback | None, *, stuck_s: float = 30.0
    ) -> None:
        self._on = {"assigned": on_assigned, "revoked": on_revoked}
        self._stuck_s = stuck_s
        self._items: deque[tuple[DestinationCallback, str, str, threading.Event, Callable[[], None] | None]] = deque()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None  # the one thread that takes the next callback
        self._stopping = False

    def submit(self, event: str, destination: str, before: Callable[[], None] | None = None) -> threading.Event:
        """Queue the callback of ``event`` (``assigned`` or ``revoked``); the returned event is set once it ran.
        ``before`` runs just before it, when its turn comes (at once without a callback)."""
        done = threading.Event()
        callback = self._on[event]
        if callback is None:
            if before is not None:
                before()
            done.set()
            return done
        with self._changed:
            self._items.append((callback, event, destination, done, before))
            self._stopping = False
            if self._thread is None:
                self._start_thread()
            self._changed.notify_all()
        return done

    def _start_thread(self) -> None:
        self._thread = threading.Thread(target=self._run, name="canal-ha-callbacks", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        me = threading.current_thread()
        while True:
            with self._changed:
                while self._thread is me and not self._items and not self._stopping:
                    self._changed.wait()
                if self._thread is not me:
                    return  # replaced while its callback hung: the new thread has the queue
                if not self._items:
                    self._thread = None  # stopped, and nothing left
                    self._changed.notify_all()
                    return
                callback, event, destination, done, before = self._items.popleft()
            watch = threading.Timer(self._stuck_s, self._stuck, args=(me, event, destination))
            watch.daemon = True
            watch.start()
            try:
                if before is not None:
                    before()
                callback(destination)
            except Exception:  # the service's error: logged; the hand-over must go on
                destination_logger(__name__, destination).exception("on_%s(%r) raised", event, destination)
            finally:
                watch.cancel()
                done.set()

    def _stuck(self, thread: threading.Thread, event: str, destination: str) -> None:
        with self._changed:
            if self._thread is not thread:
                return
            destination_logger(__name__, destination).error(
                "on_%s(%r) has not returned after %.1fs: the callbacks after it run on a new thread",
                event,
                destination,
                self._stuck_s,
            )
            self._start_thread()

    def stop(self, timeout: float) -> None:
        """Run what is queued (up to ``timeout`` seconds), then end the thread."""
        deadline = time.monotonic() + timeout
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
            self._changed.wait_for(lambda: self._thread is None, max(0.0, deadline - time.monotonic()))


class HaDestination:
    """One destination under a running monitor: an Instance exists only while this process is active."""

    def __init__(
        self,
        config: InstanceConfig,
        zk: KazooClient,
        *,
        address: str,
        delay_s: float,
        callbacks: Callbacks,
        balanced: bool,
        revoke_timeout_s: float,
        members: Sequence[MasterConfig] | None = None,
    ) -> None:
        self.config = config
        self.destination = config.destination
        self.members = None if members is None else tuple(members)
        self._zk = zk
        self._callbacks = callbacks
        self._revoke_timeout_s = revoke_timeout_s
        self._log = destination_logger(__name__, config.destination)
        self._lock = threading.Lock()
        self._settled = threading.Condition()  # notified when a batch is acked or rolled back through the server
        self.instance: Instance | None = None
        self.serving = threading.Event()
        self._draining = False
        self._wanted = not balanced
        self._revoker: threading.Thread | None = None
        self._told = True  # on_revoked was queued for the last activation (or there was none)
        self.moves_in = 0  # activations: this process started serving it
        self.moves_out = 0  # hand-overs: it stopped serving it on purpose
        self.losses = 0  # it stopped serving it otherwise (session suspended or lost, ownership gone)
        self.monitor = ServerRunningMonitor(
            zk,
            config.destination,
            address,
            on_active=self._activate,
            on_standby=self._deactivate,
            delay_s=delay_s,
        )

    # -- the monitor's callbacks
    def _activate(self, token: int) -> None:
        # the instance's writes and calls are this activation's: fenced by its token and refused once it ended,
        # even when this process holds the destination again by then (a later activation, a later instance)
        monitor = self.monitor

        def fence() -> ZkFence | None:
            return ZkFence(monitor.epoch_path, token) if monitor.token == token else None

        def guard() -> None:
            monitor.confirm_owner(token)

        instance = Instance(
            self.config, members=self.members, zk=self._zk, fence=fence, guard=guard, hand_out=self._hand_out
        )
        try:
            instance.start()
        except BaseException:
            # the monitor gives the node up and retries later; leave nothing of this attempt running
            self._stop_instance(instance, "a failed start")
            raise
        with self._lock:
            self.instance = instance
            self._draining = False
            self._told = False
        self.serving.set()
        self.moves_in += 1
        self._log.info("serving with fencing token %d", token)
        self._callbacks.submit("assigned", self.destination)

    def _deactivate(self, reason: str) -> None:
        # may run on kazoo's connection thread (SUSPENDED): stop serving now, stop the instance elsewhere
        self.serving.clear()
        with self._lock:
            instance, self.instance = self.instance, None
            told, self._told = self._told, True
        if instance is not None:
            threading.Thread(target=self._stop_instance, args=(instance, reason), daemon=True).start()
        if not told:  # not a hand-over the service took part in: it learns after the fact
            if reason == "released":
                self.moves_out += 1
            else:
                self.losses += 1
            self._callbacks.submit("revoked", self.destination)

    def _stop_instance(self, instance: Instance, reason: str, *, follow: bool = True) -> None:
        try:
            instance.stop(follow=follow)
        except Exception as exc:  # a fenced flush after losing the node is expected
            self._log.warning("instance stopped after %s; final meta flush refused: %s", reason, exc)

    # -- what the server asks
    def active_instance(self, *, handing_out: bool = False) -> Instance:
        """The instance while this process serves the destination; NotRunningError otherwise, and for a call that
        hands out batches (``handing_out``) once a hand-over began."""
        with self._lock:
            instance, draining = self.instance, self._draining
        if instance is None or not self.serving.is_set() or not self.monitor.is_active:
            raise NotRunningError(
                f"destination {self.destination!r} is not running in this process "
                "(another process holds it, or the ZooKeeper session is suspended)"
            )
        if handing_out and draining:
            raise NotRunningError(
                f"destination {self.destination!r} is being handed over to another process: no new batches here; "
                "batches handed out can still be acked or rolled back until it is"
            )
        return instance

    def _hand_out(self) -> None:
        # the instance asks after a get's wait: a get that began before the hand-over hands out nothing after it
        # began (the hand-over's drain does not wait for it, and the meta it persists is from before its batch)
        with self._lock:
            draining = self._draining
        if draining:
            raise NotRunningError(
                f"destination {self.destination!r} is being handed over to another process: no new batches here; "
                "batches handed out can still be acked or rolled back until it is"
            )

    def settled(self) -> None:
        """A batch was acked or rolled back (a hand-over waiting for the outstanding batches looks again)."""
        with self._settled:
            self._settled.notify_all()

    @property
    def revoking(self) -> bool:
        with self._lock:
            return self._revoker is not None

    @property
    def wanted(self) -> bool:
        with self._lock:
            return self._wanted

    def start(self) -> None:
        self.monitor.start(compete=self.wanted)

    def want(self, wanted: bool) -> None:
        """Compete for the destination (True), or hand it over and stop competing (False). Returns at once."""
        with self._lock:
            self._wanted = wanted
            if self._revoker is not None:
                return  # the hand-over under way looks at ``_wanted`` when it ends
            if wanted:
                rejoin = not self.monitor.competing
            else:
                rejoin = False
                if self.monitor.competing:
                    self._revoker = threading.Thread(
                        target=self._revoke, name=f"canal-revoke-{self.destination}", daemon=True
                    )
                    self._revoker.start()
        if rejoin:
            self.monitor.rejoin()

    def wait_revoked(self, timeout: float | None) -> bool:
        """Wait until no hand-over is under way and this process does not serve the destination; whether so."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                revoker = self._revoker
            if revoker is None:
                return not self.serving.is_set()
            revoker.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if revoker.is_alive():
                return False

    def release(self) -> None:
        """Hand over now (on this thread) and stay out until :meth:`want` True."""
        with self._lock:
            self._wanted = False
            busy = self._revoker
        if busy is not None:
            busy.join()
            return
        self._revoke()

    def _revoke(self) -> None:
        try:
            self.monitor.call(_nothing)  # an activation under way finishes first
            with self._lock:
                instance = self.instance
                serving = instance is not None and self.serving.is_set()
                if serving:
                    self._told = True
            if serving:
                assert instance is not None
                deadline = time.monotonic() + self._revoke_timeout_s
                # new batches are refused from the moment on_revoked's turn comes (callbacks run one at a time: a
                # destination waiting behind another's on_revoked keeps serving meanwhile)
                done = self._callbacks.submit("revoked", self.destination, before=self._drain_begins)
                if not done.wait(max(0.0, deadline - time.monotonic())):
                    self._log.warning(
                        "on_revoked did not return within %.1fs: handing over anyway", self._revoke_timeout_s
                    )
                self._drain(instance, deadline)
                handed: list[bool] = []
                self.monitor.call(lambda: handed.append(self._hand_over(instance)))
                if handed and handed[0]:
                    self.moves_out += 1
                    self._log.info("handed over")
                else:  # its session was suspended or lost meanwhile: not a hand-over, whatever came after
                    self.losses += 1
                    self._log.warning(
                        "stopped serving before the hand-over ended (ZooKeeper session suspended or lost): the next "
                        "owner delivers again what was acked since the last flush"
                    )
            else:
                self.monitor.release()  # not serving: just stop competing
        finally:
            with self._lock:
                self._revoker = None
                self._draining = False
                again = self._wanted
            if again:
                self.monitor.rejoin()

    def _drain_begins(self) -> None:
        with self._lock:
            self._draining = True
            instance = self.instance
        if instance is not None:
            # a get waiting for entries ends now (and hands out nothing): the service's on_revoked, which waits for
            # its consumer to return from it, need not wait out the get's timeout -- part of every hand-over's gap
            instance.store.wake_getters()
        self._log.info("handing over: no new batches here")

    def _drain(self, instance: Instance, deadline: float) -> None:
        """Wait until nothing handed out is outstanding, or ``deadline``."""
        with self._settled:
            while True:
                try:
                    left = instance.outstanding()
                except CanalError:
                    return  # stopped meanwhile: nothing to wait for
                if not left:
                    return
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self._log.warning(
                        "%d batches still outstanding after %.1fs: handing over anyway (the next owner delivers "
                        "them again)",
                        left,
                        self._revoke_timeout_s,
                    )
                    return
                self._settled.wait(min(remaining, DRAIN_CHECK_S))  # acks through the instance itself notify nobody

    def _hand_over(self, expected: Instance) -> bool:
        # on the monitor's thread: persist the meta while the token is valid, free the node ("released") for the
        # next owner, then stop the instance -- its parser and store -- elsewhere: the next owner need not wait.
        # Whether it handed over ``expected``, the instance whose hand-over began (not: that activation ended
        # meanwhile, and any activation since is released without one)
        self.serving.clear()
        with self._lock:
            instance, self.instance = self.instance, None
        if instance is not None:
            try:
                instance.persist()
            except Exception as exc:  # what was not persisted is delivered again by the next owner
                self._log.warning("meta not persisted before the hand-over: %s: %s", type(exc).__name__, exc)
        self.monitor.release()
        if instance is not None:
            threading.Thread(
                target=self._stop_instance, args=(instance, "a hand-over"), kwargs={"follow": False}, daemon=True
            ).start()
        return instance is expected

    def stop(self) -> None:
        """Stop competing and release at once (the server hands over first when it can)."""
        with self._lock:
            self._wanted = False
        self.monitor.stop()  # releases: _deactivate runs
        with self._lock:
            instance, self.instance = self.instance, None
        if instance is not None:
            self._stop_instance(instance, "stop")


def _nothing() -> None:
    return None
