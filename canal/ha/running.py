"""Competing for an ephemeral "running" node in ZooKeeper, without split brain.

:class:`RunningMonitor` is the mechanism behind canal's ServerRunningMonitor (who runs a destination) and
ClientRunningMonitor (who consumes a destination's client id). Several processes create the same ephemeral node; the
one whose create succeeds is active, the others stand by and watch it. When it disappears, its former owner competes
again at once and the others after ``delay_s`` (canal's anti-flapping delay). A clean :meth:`RunningMonitor.release`
deletes the node in a transaction that writes ``<released>`` into the epoch node (below), so watchers compete at once
instead of waiting out the delay.

What canal does not do, and this does:

* On a SUSPENDED ZooKeeper session the active side stops serving at once (``on_standby`` is called synchronously from
  the connection listener, so it must only flip flags), because another process may take over as soon as the session
  expires on the server, which this process cannot observe while disconnected.
* On RECONNECTED (same session) it serves again only if the node still belongs to its session; on LOST it stands by
  and competes again with its new session.
* Every activation gets a fencing token: the new version of a persistent ``epoch`` node, bumped in a ZooKeeper
  transaction that also checks the running node is still ours. Writes fenced with
  ``ZkFence(epoch_path, token)`` (:mod:`canal.meta.fence`) fail once anyone else has been activated since, so a
  paused or partitioned former owner cannot move a cursor.

All ZooKeeper work runs on one worker thread per monitor, in order; kazoo's own threads only enqueue (its one event
thread serves every watch of the process: a read there would make each monitor's takeover wait for the others').
A takeover is two round trips after the release's notification: the node and the epoch read at once, then the node
created (and marked: its data set once more, version 1) and the epoch bumped in one transaction. The release is one:
a transaction that checks the epoch is still at the token and the node still at its mark, and deletes it.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError, RolledBackError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import EventType, KazooState, WatchedEvent, ZnodeStat

from canal.errors import HAError, NotRunningError, OwnershipLostError
from canal.log import destination_logger

RELEASED = b"<released>"
RETRY_FIRST_S = 0.05  # a failed monitor step is retried after this, doubling up to RETRY_MAX_S
RETRY_MAX_S = 2.0
ActiveCallback = Callable[[int], None]
StandbyCallback = Callable[[str], None]


class RunningMonitor:
    """One process's side of the competition for ``path``.

    ``data`` is what this process writes into the node (JSON); ``address`` in it identifies this process, so a
    former owner recognises its own node after a restart of its session. ``on_active(token)`` is called on the
    worker thread when this process becomes active; ``on_standby(reason)`` when it stops being active (from the
    connection listener on SUSPENDED, so it must not block there).
    """

    def __init__(
        self,
        client: KazooClient,
        path: str,
        data: dict[str, Any],
        *,
        epoch_path: str,
        on_active: ActiveCallback,
        on_standby: StandbyCallback,
        delay_s: float = 5.0,
        destination: str = "",
    ) -> None:
        self._client = client
        self.path = path
        self.epoch_path = epoch_path
        self._data = dict(data)
        self._address = str(data.get("address", ""))
        self._on_active = on_active
        self._on_standby = on_standby
        self.delay_s = delay_s
        self._log = destination_logger(__name__, destination)
        self._tasks: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self._active = threading.Event()
        self._token: int | None = None
        self._running = False
        self._released = False
        self._retry_pending = False  # a failed activation released the node; compete again after the delay
        # the running node of the current activation as it made it: (session, data version). A version of 1 or more
        # is this process's mark (its creation sets the data once more; no other writer of running nodes does):
        # the release checks it instead of reading the node first
        self._made: tuple[int, int] | None = None
        self.attempts = 0  # finished attempts to create the node (tests await the first one)
        self.held: bool | None = None  # whether anyone holds the node, as last seen (None: not read yet)

    # -- public state
    @property
    def is_active(self) -> bool:
        return self._active.is_set()

    @property
    def token(self) -> int | None:
        """The fencing token of the current activation (None while standing by)."""
        return self._token if self._active.is_set() else None

    def confirm_owner(self, token: int | None = None) -> None:
        """Prove with a ZooKeeper round trip that this process still owns the node, or raise OwnershipLostError.

        The owner holds the running node with its current session and no one has been activated since (the epoch
        node's version is still this activation's token). A process that was paused (SIGSTOP, a long GC, a frozen
        VM) learns of a lost session only some time after it resumes; this check lets it refuse to act meanwhile.
        With ``token``, the ownership must be that activation's: what an earlier activation left running (an
        instance still stopping when the process was activated again) cannot act under a later one.
        """
        current = self.token
        if current is None:
            raise OwnershipLostError(f"this process does not own {self.path}; the call was not applied")
        if token is not None and token != current:
            raise OwnershipLostError(
                f"the activation with fencing token {token} of {self.path} has ended (this process now holds it "
                f"under {current}); the call was not applied"
            )
        token = current
        try:
            # both reads sent at once, in this order (ZooKeeper answers a session's requests in order): one round
            # trip, made before every batch handed out and every ack
            epoch_read = self._client.get_async(self.epoch_path)
            running_read = self._client.exists_async(self.path)
            _data, epoch = epoch_read.get()
            running = running_read.get()
        except (KazooException, KazooTimeoutError) as exc:
            raise OwnershipLostError(
                f"cannot confirm that this process still owns {self.path} ({type(exc).__name__}: {exc}); "
                "the call was not applied"
            ) from exc
        if epoch.version != token or running is None or running.ephemeralOwner != self._session_id():
            raise OwnershipLostError(
                f"this process no longer owns {self.path}: another process was activated since (fencing token "
                f"{token}, epoch now {epoch.version}); the call was not applied"
            )

    def check_active(self) -> int:
        """The current token, or NotRunningError when this process is not the active one."""
        token = self.token
        if token is None:
            raise NotRunningError(f"this process does not run {self.path} (standing by or disconnected from ZooKeeper)")
        return token

    def wait_active(self, timeout: float | None = None) -> bool:
        return self._active.wait(timeout)

    @property
    def competing(self) -> bool:
        """Whether this process competes for the node (or holds it): started, and not released."""
        with self._lock:
            return self._running and not self._released

    # -- lifecycle
    def start(self, *, compete: bool = True) -> None:
        """Start watching the node; compete for it now, or (``compete=False``) only after :meth:`rejoin`."""
        with self._lock:
            if self._running:
                return
            self._running = True
            self._released = not compete
        self._worker = threading.Thread(target=self._work, name=f"running-monitor:{self.path}", daemon=True)
        self._worker.start()
        self._client.add_listener(self._on_state)
        self._tasks.put(self._look)  # sets the watch, and acts on the node as it is
        if compete:
            self._tasks.put(self._compete)

    def stop(self) -> None:
        """Release (if active) and stop competing."""
        with self._lock:
            if not self._running:
                return
        try:
            self._call(self._release_now)
        finally:  # a release ZooKeeper failed (its client stopped under it) still ends the worker
            with self._lock:
                self._running = False
                if self._timer is not None:
                    self._timer.cancel()
            self._client.remove_listener(self._on_state)
            self._tasks.put(None)
            if self._worker is not None and self._worker is not threading.current_thread():
                self._worker.join(10)

    def release(self) -> None:
        """Hand over on purpose: stop serving, free the node, and stay out until :meth:`rejoin`."""
        self._retry_pending = False
        self._call(self._release_now)

    def rejoin(self) -> None:
        """Compete again after a :meth:`release`."""
        with self._lock:
            self._released = False
        self._tasks.put(self._compete)

    def call(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the monitor's thread, after the steps queued before it (an activation under way ends
        first), and wait for it; what it raises is raised here. Inside ``fn``, :meth:`release` runs at once."""
        self._call(fn)

    # -- worker
    def _call(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the worker thread and wait for it."""
        if self._worker is None or not self._worker.is_alive() or threading.current_thread() is self._worker:
            fn()
            return
        done = threading.Event()
        errors: list[BaseException] = []

        def task() -> None:
            try:
                fn()
            except BaseException as exc:  # handed back to the caller
                errors.append(exc)
            finally:
                done.set()

        self._tasks.put(task)
        done.wait()
        if errors:
            raise errors[0]

    def _work(self) -> None:
        failures: dict[Callable[[], None], int] = {}  # consecutive failures of each step
        while True:
            task = self._tasks.get()
            if task is None:
                return
            try:
                task()
            except Exception as exc:
                # A failed step (e.g. ConnectionLoss while competing) is retried until it succeeds or the monitor
                # stops: dropping it could leave a standby that never competes again, and the destination unserved.
                count = failures[task] = failures.get(task, 0) + 1
                delay = min(RETRY_MAX_S, RETRY_FIRST_S * 2 ** (count - 1))
                self._log.warning(
                    "running monitor step %s failed for %s (attempt %d), retrying in %.2fs: %s: %s",
                    getattr(task, "__name__", task),
                    self.path,
                    count,
                    delay,
                    type(exc).__name__,
                    exc,
                )
                self._retry_later(task, delay)
            else:
                failures.pop(task, None)

    def _retry_later(self, task: Callable[[], None], delay: float) -> None:
        def enqueue() -> None:
            with self._lock:
                running = self._running
            if running:
                self._tasks.put(task)

        timer = threading.Timer(delay, enqueue)
        timer.daemon = True
        timer.start()

    def _schedule_compete(self, delay: float) -> None:
        with self._lock:
            if not self._running or self._released:
                return
            if self._timer is not None:
                self._timer.cancel()
            self._timer = threading.Timer(delay, lambda: self._tasks.put(self._compete))
            self._timer.daemon = True
            self._timer.start()

    def _compete(self) -> None:
        if self._running and self._released:
            self._free_own_node()  # released while disconnected: the node may still be this session's
            return
        if not self._running or self._active.is_set() or not self._client.connected:
            return
        try:
            self._try_create()
        finally:
            self.attempts += 1

    def _try_create(self) -> None:
        # one round trip: the node's creation and the epoch's bump in one transaction, so the creation is the
        # activation (the epoch's new version its token) -- each round trip is part of a hand-over's gap, and
        # waits for a core and the GIL twice on a loaded machine. Only the holder of the node writes the epoch (here,
        # and in a transaction that checks the node: _bump_epoch, _free_own_node), so the bump needs no version
        # check: it is ordered after every earlier activation's and before every later one's
        body = json.dumps({**self._data, "active": True}, separators=(",", ":")).encode()
        session = self._session_id()
        tx = self._client.transaction()
        tx.create(self.path, body, ephemeral=True)
        tx.set_data(self.path, body)  # version 1: this activation's node, whoever creates one at the path later
        tx.set_data(self.epoch_path, self._address.encode())
        created, marked, bumped = tx.commit()
        if not isinstance(created, Exception) and isinstance(marked, ZnodeStat) and isinstance(bumped, ZnodeStat):
            # the session the transaction ran in, unless it changed meanwhile (then the release reads the node)
            self._made = (session, int(marked.version)) if self._session_id() == session else None
            self._activated(int(bumped.version))
            return
        if isinstance(created, NodeExistsError):
            stat = self._client.exists(self.path)
            if stat is None:  # vanished between the create and the read: try again now
                self._tasks.put(self._compete)
                return
            if stat.ephemeralOwner == self._session_id():  # ours from before a reconnection: a new activation
                self._activate(stat)
            return
        if isinstance(created, NoNodeError) or isinstance(bumped, NoNodeError):
            # the destination's first activation: make its node and the epoch node, then compete again
            self._client.ensure_path(self.epoch_path)
            self._tasks.put(self._compete)
            return
        # the operation that failed (the others read as rolled back): the worker tries the step again
        results = (created, marked, bumped)
        failed = [r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError)]
        raise failed[0] if failed else HAError(f"unexpected result competing for {self.path}: {results}")

    def _activate(self, running_stat: ZnodeStat) -> None:
        token = self._bump_epoch(running_stat)
        if token is not None:
            self._made = (int(running_stat.ephemeralOwner), int(running_stat.version))
            self._activated(token)

    def _activated(self, token: int) -> None:
        self._token = token
        # held, as this process saw it make or keep the node: the watch's own look is queued behind this activation
        # on the worker, and an instance start that hangs must not leave the destination reported as unowned
        self.held = True
        self._active.set()
        self._log.info("became active for %s (fencing token %d)", self.path, token)
        try:
            self._on_active(token)
        except Exception:
            # holding the node without serving would keep every standby out: hand it over, try again after the delay
            self._log.exception("activation failed for %s; releasing it, retrying in %.1fs", self.path, self.delay_s)
            self._release_now()
            self._retry_pending = True
            retry = threading.Timer(self.delay_s, self._retry_after_failed_activation)
            retry.daemon = True
            retry.start()

    def _retry_after_failed_activation(self) -> None:
        with self._lock:
            if not self._running or not self._retry_pending:  # stopped, or released on purpose meanwhile
                return
            self._retry_pending = False
        self.rejoin()

    def _bump_epoch(self, running_stat: ZnodeStat) -> int | None:
        # the epoch node holds the owner's address (or RELEASED after a clean hand-over); its version is the token.
        # Made once per destination: a takeover reads it at once (each round trip is part of a hand-over's gap)
        for _ in range(10):
            try:
                _data, epoch = self._client.get(self.epoch_path)
            except NoNodeError:
                self._client.ensure_path(self.epoch_path)
                continue
            tx = self._client.transaction()
            tx.check(self.path, running_stat.version)
            tx.set_data(self.epoch_path, self._address.encode(), version=epoch.version)
            results = tx.commit()
            if not any(isinstance(r, Exception) for r in results):
                new_stat = results[1]
                return int(new_stat.version)
            if isinstance(results[0], BadVersionError | NoNodeError):
                return None  # the running node changed under us: not ours any more
            # otherwise the epoch moved between get and commit (another activation racing): read it again
        raise HAError(f"could not bump the fencing epoch {self.epoch_path}: too much contention")

    def _standby(self, reason: str) -> None:
        # called from kazoo's thread (SUSPENDED, LOST) and the worker: exactly one caller sees the transition
        with self._lock:
            if not self._active.is_set():
                return
            self._active.clear()
            self._token = None
        # a release is chosen (a hand-over); anything else happened to this process
        (self._log.info if reason == "released" else self._log.warning)("stopped serving %s: %s", self.path, reason)
        self._on_standby(reason)

    def _release_now(self) -> None:
        with self._lock:
            self._released = True
            if self._timer is not None:
                self._timer.cancel()
        token, made = self._token if self._active.is_set() else None, self._made
        self._standby("released")
        self._free_own_node(None if token is None or made is None else (*made, token))

    def _free_own_node(self, claim: tuple[int, int, int] | None = None) -> None:
        """Delete the running node if this session holds it (released: this process does not want it). Also when
        this process had already stopped serving -- its session suspended, then back --: the node outlived that
        stop, and nobody else could take the destination while it stood.

        ``claim`` (session, node version, token): the activation that ends, to release in one round trip."""
        if not self._client.connected:
            return  # the CONNECTED that follows comes here again (``_compete``)
        if claim is not None and claim[0] == self._session_id() and claim[1] > 0 and self._free_claimed(*claim[1:]):
            return
        try:
            _raw, stat = self._client.get(self.path)
            if stat.ephemeralOwner != self._session_id():
                return
            # say "clean hand-over" where watchers will read it after the node is gone (a watch may never see an
            # intermediate write), which also invalidates our own token; then free the node
            tx = self._client.transaction()
            tx.check(self.path, stat.version)
            tx.set_data(self.epoch_path, RELEASED)
            tx.delete(self.path, version=stat.version)
            tx.commit()
        except NoNodeError:
            pass

    def _free_claimed(self, version: int, token: int) -> bool:
        """Release the node this activation made, without reading it first: whether it did. No one was activated
        since (the epoch's version is still the token), and the node is the one this session marked (a node made
        anew at the path -- deleted by hand, created by canal or another process -- has version 0); this session is
        the one that made it, and a session that expired cannot commit. Otherwise nothing is written, and the node
        is read as before."""
        tx = self._client.transaction()
        tx.check(self.epoch_path, token)
        tx.check(self.path, version)
        tx.set_data(self.epoch_path, RELEASED)
        tx.delete(self.path, version=version)
        return not any(isinstance(r, Exception) for r in tx.commit())

    # -- kazoo callbacks (kazoo threads: flip flags, enqueue, return)
    def _on_state(self, state: str) -> None:
        if state == KazooState.SUSPENDED:
            self._standby("ZooKeeper connection suspended")
        elif state == KazooState.LOST:
            self._standby("ZooKeeper session lost")
        elif state == KazooState.CONNECTED:
            # after LOST this is a new session: the node died with the old one (and kazoo dropped the watch: set it
            # again); otherwise check it is still ours
            self._tasks.put(self._look)
            self._tasks.put(self._compete)

    def _on_watch(self, event: WatchedEvent) -> None:
        # kazoo's one event thread, shared by every watch of the process: only enqueue. (kazoo's DataWatch reads the
        # node there, two round trips per event in turn: a hand-over of ten destinations made the tenth next owner
        # wait for the other watches' forty reads.) A session lost fires it too (EventType.NONE): CONNECTED looks
        if event.type != EventType.NONE:
            self._tasks.put(self._look)

    def _look(self) -> None:
        """Read the node, leaving the watch on it, and act on it: stand by when another session holds it (or
        nobody, while this process was active); compete when it is free. In order with the steps, on the worker."""
        if not self._running or not self._client.connected:
            return  # stopped, or the CONNECTED that follows looks again
        node = self._client.exists_async(self.path, watch=self._on_watch)
        # a standby that may compete reads the epoch in the same round trip: whom it names decides when to compete
        may_compete = not self._released and not self._active.is_set()
        epoch = self._client.get_async(self.epoch_path) if may_compete else None
        stat = node.get()
        self.held = stat is not None
        if stat is not None:
            if self._active.is_set() and stat.ephemeralOwner != self._session_id():
                self._standby("the running node belongs to another process")
            return
        if self._active.is_set():
            self._standby("the running node was deleted")
        if not self._running or self._released:
            return
        if epoch is None:  # active until just now
            epoch = self._client.get_async(self.epoch_path)
        try:
            last_owner, _ = epoch.get()
        except NoNodeError:  # the destination's first activation: the epoch node is made once, here
            self._client.ensure_path(self.epoch_path)
            last_owner = b""
        # canal: the former owner competes at once, others wait out the delay; a clean hand-over needs no delay
        if last_owner in (RELEASED, self._address.encode()):
            self._compete()
        else:
            self._schedule_compete(self.delay_s)

    def _session_id(self) -> int:
        cid = self._client.client_id
        return int(cid[0]) if cid else -1
