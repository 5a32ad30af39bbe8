"""One writer per mirror root and app id: a lease, so that a second writer is refused instead of losing batches.

A mirror's step journal (``root/_pycanal_steps.{app_id}.json``), its staged files and the batch ids it commits to
its tables are all keyed by its app id. Two mirrors writing one root under one app id -- two destinations left at
the default ``app_id``, in one process or two -- read each other's journal: the second one's batches, whose ids are
not above the first one's, are recorded as skipped, and its tables never appear. So the mirror that writes with the
step journal holds a lease, ``root/_pycanal_lease.{app id as hex}.json``: who holds it (host, process id, the
process's start time, a random token) and when it was last renewed. A mirror finding another writer's lease refuses
with :class:`~canal.lake.types.MirrorLeaseError` (nothing written) unless that writer is gone:

* another mirror object in this process: gone once garbage-collected (a mirror dropped without ``close()``, as a
  restarted worker drops it);
* another process on this host: gone when no process with that id and start time runs (a killed writer);
* a process on another host (a mirror root on shared storage): gone when its lease was not renewed for
  :data:`LEASE_S` seconds. The holder renews it when a batch starts and, while the batch runs, from a thread of its
  own every ``LEASE_S / 4`` seconds, so a batch longer than the lease keeps it. A holder whose lease was taken over
  -- while it was idle that long, or while its process stood still (a pause longer than the lease) -- is fenced:
  before each commit the mirror asks :meth:`WriterLease.check`, which fails once the renewal thread found another
  writer's token, or when the last renewal is older than ``LEASE_S / 2`` and a renewal now finds it. Two writers
  never both go on;
* a lease copied on this host with the files of another root (a backup restored, a test's copy): it names that
  root, not this one, and is nobody's here.

``close()`` gives the lease up (the next batch takes it again).
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import socket
import threading
import time
import uuid
import weakref
from collections.abc import Iterator
from typing import Any

from canal.lake.store import fs
from canal.lake.types import MirrorLeaseError

LEASE_S = 60.0
"""How long a lease held from another host stays good without being renewed."""
_LIVE: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()  # token -> its mirror, in this process
_LOG = logging.getLogger(__name__)


def lease_path(root: str | os.PathLike[str], app_id: str) -> str:
    """The location of the lease (``root``: a local path or an object-store URI, :mod:`canal.lake.store.fs`)."""
    return fs.join(os.fspath(root), _lease_name(app_id))


def _lease_name(app_id: str) -> str:
    return f"_pycanal_lease.{app_id.encode().hex()}.json"


def _started(pid: int) -> str | None:
    """The start time of process ``pid`` (``/proc``'s clock ticks since boot), None where it cannot be read: with
    the pid it names one process, as a pid alone, reused, does not."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            stat = fh.read()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    return fields[19] if len(fields) > 19 else None


def _process_runs(pid: int, started: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it runs, as another user
    return started is None or _started(pid) in (None, started)


class WriterLease:
    """The lease of one mirror object (``owner``) on ``root`` for ``app_id``."""

    def __init__(self, root: str | os.PathLike[str], app_id: str, owner: object) -> None:
        text = os.fspath(root)
        self.location = text  # the root as the mirror was given it, for messages
        self.path = lease_path(text, app_id)
        # the root a lease names: a local one as this host resolves it (a copy elsewhere names its own), a URI as is
        self.root = text if fs.remote(text) else os.path.realpath(text)
        self.app_id = app_id
        self.token = uuid.uuid4().hex
        self._owner = weakref.ref(owner)
        self._held = False
        self._renewed = 0.0
        self._lock = threading.RLock()  # hold() by the writer and by the renewal thread
        self._lost: str | None = None  # why the lease is no longer this mirror's (another writer took it)
        self._renewing = False  # whether a batch runs: the renewal thread renews only then
        self._stopped: threading.Event | None = None  # set to end the renewal thread (the lease given up)
        self._renewer: threading.Thread | None = None

    def _record(self) -> dict[str, Any]:
        pid = os.getpid()
        return {
            "host": socket.gethostname(),
            "pid": pid,
            "started": _started(pid),
            "token": self.token,
            "renewed": time.time(),
            "root": self.root,
        }

    def _read(self) -> dict[str, Any] | None:
        try:
            data = json.loads(fs.read_text(self.path))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return {}  # a lease being created (or damaged): nobody's, taken over -- and its creator, finding the
            # token it reads back another's, refuses
        return data if isinstance(data, dict) else {}

    def hold(self, *, renew: bool = False) -> None:
        """Take the lease, or renew it; :class:`MirrorLeaseError` when another live writer holds it (or took it
        from this mirror). ``renew``: go on renewing it from a thread until :meth:`pause` (a batch's time)."""
        with self._lock:
            self._hold(force=False)
            if not renew:
                return
            self._renewing = True
            if self._renewer is None or not self._renewer.is_alive():  # one thread, idle between batches
                self._stopped = threading.Event()
                self._renewer = threading.Thread(
                    target=_renew_while_held,
                    args=(weakref.ref(self), self._stopped),
                    name=f"pycanal-lease-{self.app_id}",
                    daemon=True,
                )
                self._renewer.start()

    def _hold(self, *, force: bool) -> None:
        now = time.time()
        if self._held and not force and now - self._renewed < LEASE_S / 4:
            return  # renewed lately: a batch every few milliseconds need not read the file each time
        holder = self._read()
        if holder is not None and holder.get("token") == self.token:
            self._write(replace=True)
            return
        if self._held:
            self._held = False
            self._lost = self._refusal(holder or {}, "took the lease over from this mirror")
            raise MirrorLeaseError(self._lost)
        if holder is not None and self._alive(holder):
            raise MirrorLeaseError(self._refusal(holder, "holds the lease"))
        self._lost = None
        taken = self._write(replace=holder is not None)  # a lease whose holder is gone is taken over
        mine = self._read()
        if not taken or mine is None or mine.get("token") != self.token:
            raise MirrorLeaseError(self._refusal(mine or {}, "took the lease at the same moment"))

    @property
    def holding(self) -> bool:
        """Whether this mirror took the lease and has not given it up (lost counts: its commits are refused)."""
        return self._held or self._lost is not None

    def renew(self) -> None:
        """Renew the lease now (the renewal thread's turn); :class:`MirrorLeaseError` when another writer took it."""
        with self._lock:
            self._hold(force=True)

    def check(self) -> None:
        """:class:`MirrorLeaseError` unless this mirror still holds its lease: the fence before each commit. The
        renewal thread found another writer's token, or the last renewal is older than ``LEASE_S / 2`` (the process
        stood still, or the store refused the renewals) and a renewal now fails."""
        if self._lost is not None:
            raise MirrorLeaseError(self._lost)
        if not self._held:
            raise MirrorLeaseError(f"this mirror no longer holds its lease on {self.location} ({self.app_id!r})")
        if time.time() - self._renewed > LEASE_S / 2:
            self.renew()

    def pause(self) -> None:
        """Stop renewing (the batch ended): an idle holder on another host lets its lease lapse after LEASE_S."""
        self._renewing = False

    @property
    def renewing(self) -> bool:
        return self._renewing and self._held

    def _write(self, *, replace: bool) -> bool:
        data = json.dumps(self._record()).encode()
        # without ``replace`` created whole or not at all: an exclusive create locally (no hard link needed, as
        # some file systems have none), a conditional PUT in an object store
        written = fs.write_bytes(self.path, data, replace=replace)
        if written:
            owner = self._owner()
            if owner is not None:
                _LIVE[self.token] = owner
            self._held = True
            self._renewed = time.time()
        return written

    def _alive(self, holder: dict[str, Any]) -> bool:
        """Whether the writer named by the lease ``holder`` may still write (module docstring)."""
        pid, host = holder.get("pid"), holder.get("host")
        if not isinstance(pid, int) or not isinstance(host, str):
            return False  # not a lease this module wrote whole
        if host != socket.gethostname():  # (its path for the root may differ: another mount)
            renewed = holder.get("renewed")
            return isinstance(renewed, int | float) and time.time() - renewed < LEASE_S
        if holder.get("root") != self.root:
            return False  # a lease copied with another root's files: its holder writes that root, not this one
        if pid == os.getpid():
            token = str(holder.get("token"))
            if _LIVE.get(token) is None:
                return False
            gc.collect()  # a mirror dropped without close() may wait in a reference cycle
            return _LIVE.get(token) is not None
        started = holder.get("started")
        return _process_runs(pid, started if isinstance(started, str) else None)

    def _refusal(self, holder: dict[str, Any], what: str) -> str:
        who = f"process {holder.get('pid')} on {holder.get('host')}"
        if holder.get("pid") == os.getpid() and holder.get("host") == socket.gethostname():
            who = "another DeltaMirror of this process"
        return (
            f"{who} {what} of writing the mirror {self.location} as app id {self.app_id!r} "
            f"({_lease_name(self.app_id)}): "
            "give each destination mirrored into one root its own app_id, or close the other mirror"
        )

    def release(self) -> None:
        """Give the lease up (when this mirror still holds it)."""
        self.pause()
        with self._lock:
            if self._stopped is not None:
                self._stopped.set()
            self._stopped = self._renewer = None
        if not self._held:
            return
        self._held = False
        _LIVE.pop(self.token, None)
        holder = self._read()
        if holder is not None and holder.get("token") == self.token:
            fs.unlink(self.path)  # (a lease gone already is given up)


class MirrorFence:
    """A mirror's lease and the fence before its commits: its own lease (taken by a batch written with the step
    journal, or by a Spark driver), renewed while the batch runs; or, a Spark task's mirror, the lease token of the
    driver whose batch it writes (:attr:`token`), which the lease must still name (read at most once a second)."""

    def __init__(self, root: str, app_id: str, owner: object) -> None:
        self.root = root
        self.app_id = app_id
        self._owner = weakref.ref(owner)
        self.lease: WriterLease | None = None  # taken by the first batch that holds it
        self.token: str | None = None  # a Spark task's: its driver's lease token
        self._seen = 0.0  # when the task last saw that token in the lease

    def hold(self) -> None:
        """Take (or renew) the lease, renewed from a thread until :meth:`pause`."""
        owner = self._owner()
        if self.lease is None and owner is not None:
            self.lease = WriterLease(self.root, self.app_id, owner)
        if self.lease is not None:
            self.lease.hold(renew=True)

    @property
    def held_token(self) -> str | None:
        return None if self.lease is None else self.lease.token

    def pause(self) -> None:
        if self.lease is not None:
            self.lease.pause()

    @contextlib.contextmanager
    def renewed(self) -> Iterator[None]:
        """A batch: the lease it takes (:meth:`hold`) is renewed until it ends."""
        try:
            yield
        finally:
            self.pause()

    def release(self) -> None:
        if self.lease is not None:
            self.lease.release()

    def check(self) -> None:
        """:class:`MirrorLeaseError` unless the writer still holds its lease (the fence before a commit)."""
        if self.token is not None:
            if time.monotonic() - self._seen > 1.0:
                check_token(self.root, self.app_id, self.token)
                self._seen = time.monotonic()
        elif self.lease is not None and self.lease.holding:
            self.lease.check()


def check_token(root: str | os.PathLike[str], app_id: str, token: str) -> None:
    """:class:`MirrorLeaseError` unless the lease of ``app_id`` on ``root`` still names ``token``: the fence of a
    Spark task writing its part of a batch for the driver that holds that lease."""
    try:
        holder: Any = json.loads(fs.read_text(lease_path(root, app_id)))
    except (FileNotFoundError, ValueError):
        holder = {}
    if not isinstance(holder, dict) or holder.get("token") != token:
        raise MirrorLeaseError(
            f"the driver that gave this task its batch no longer holds the lease of the mirror {os.fspath(root)} as "
            f"app id {app_id!r} ({_lease_name(app_id)}): another writer took it over; nothing more is written"
        )


def _renew_while_held(lease_ref: weakref.ref[WriterLease], stop: threading.Event) -> None:
    """The renewal thread: while a batch runs, renew every ``LEASE_S / 4`` seconds, until ``stop`` (the lease given
    up) or its lease is gone; a lease taken over is recorded as lost (the next :meth:`WriterLease.check` fails), a
    store that refuses a renewal is tried again (the check fails once the last renewal is too old)."""
    while not stop.wait(LEASE_S / 4):
        lease = lease_ref()
        if lease is None:
            return
        if not lease.renewing:
            del lease
            continue
        try:
            lease.renew()
        except MirrorLeaseError:
            return  # lost: recorded, and the writer's next commit is refused
        except Exception as exc:  # a store that failed this renewal: the next one may pass, check() fences meanwhile
            _LOG.warning("renewing the mirror's lease %s failed: %s", lease.path, exc)
        finally:
            del lease
