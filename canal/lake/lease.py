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
  :data:`LEASE_S` seconds. The holder renews it with its batches, every ``LEASE_S / 4`` seconds at most; a holder
  whose lease was taken over while it was idle that long finds another token at its next batch and is refused
  too -- two writers never both go on;
* a lease copied on this host with the files of another root (a backup restored, a test's copy): it names that
  root, not this one, and is nobody's here.

``close()`` gives the lease up (the next batch takes it again).
"""

from __future__ import annotations

import gc
import json
import os
import socket
import time
import uuid
import weakref
from typing import Any

from canal.lake import fs
from canal.lake.types import MirrorLeaseError

LEASE_S = 60.0
"""How long a lease held from another host stays good without being renewed."""
_LIVE: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()  # token -> its mirror, in this process


def lease_path(root: str | os.PathLike[str], app_id: str) -> str:
    """The location of the lease (``root``: a local path or an object-store URI, :mod:`canal.lake.fs`)."""
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

    def hold(self) -> None:
        """Take the lease, or renew it; :class:`MirrorLeaseError` when another live writer holds it."""
        now = time.time()
        if self._held and now - self._renewed < LEASE_S / 4:
            return  # renewed lately: a batch every few milliseconds need not read the file each time
        holder = self._read()
        if holder is not None and holder.get("token") == self.token:
            self._write(replace=True)
            return
        if holder is not None and self._held:
            self._held = False
            raise MirrorLeaseError(self._refusal(holder, "took the lease over while this mirror was idle"))
        if holder is not None and self._alive(holder):
            raise MirrorLeaseError(self._refusal(holder, "holds the lease"))
        taken = self._write(replace=holder is not None)  # a lease whose holder is gone is taken over
        mine = self._read()
        if not taken or mine is None or mine.get("token") != self.token:
            raise MirrorLeaseError(self._refusal(mine or {}, "took the lease at the same moment"))

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
        if not self._held:
            return
        self._held = False
        _LIVE.pop(self.token, None)
        holder = self._read()
        if holder is not None and holder.get("token") == self.token:
            fs.unlink(self.path)  # (a lease gone already is given up)
