"""Replica ids (the ``server_id`` a binlog dump registers with) for destinations that set no ``slave_id``.

A server keeps one dump per replica id: a dump that registers an id already connected ends the older one (which
gets MariaDB's error 4052, or MySQL's 1236, "A slave with the same server_uuid/server_id ..."). Two dumps sharing an
id therefore push each other off in a loop. The scheme here gives every dump of this process its own id, and makes a
clash with another process or host improbable:

* **Derived**: ``0x10000 + blake2b(process salt, master address, destination, redraws) mod (2**32 - 0x10000)``.
  The salt is 16 random bytes drawn when the process imports this module, so two processes -- on one host, on two
  hosts, or in containers that share a host name and pid 1 -- draw independently; ids below 0x10000 are left to real
  replicas, which operators number from 1. The master's own ``server_id`` is never used.
* **Unique in the process**: every dump leases its id from the process's :class:`ReplicaIds` for its master address,
  and an id leased by another dump of that master is stepped over. A destination's reconnect (same address, same
  destination) leases the same id again, so it replaces a dump of its own the server has not noticed closing yet.
* **Across processes**: ``k`` dumps of other processes on one master clash with probability about
  ``k * (k - 1) / 2 / 4.29e9``: 1.2e-6 for 100 dumps, 1.2e-4 for 1,000. A clash the server reports makes the
  destination draw another id (``redraw``) and reconnect, logged; nothing for the user to do.
* **Restarts**: a new process draws new ids. Nothing on the server depends on an id staying the same: a master keeps
  no per-replica state from one dump to the next beyond the list of connected replicas (``SHOW SLAVE HOSTS``); its
  GTID positions are the replica's to send, and semi-sync acknowledgement is asked by a replica per connection (which
  pycanal never does). A dump left on the server by a killed process ends when the server's next heartbeat to it
  fails (within the dump's heartbeat period).

A configured ``slave_id`` is used as given (canal's ``canal.instance.mysql.slaveId``): two destinations of this
process configured with the same id for one master are refused at once with
:class:`~canal.errors.ReplicaIdConflictError`; a clash the server reports is that error too (after a retry or two:
see :mod:`canal.parse.parser`), naming the setting to change.
"""

from __future__ import annotations

import hashlib
import secrets
import threading

from canal.errors import ReplicaIdConflictError

FIRST_DERIVED_ID = 0x10000
"""Derived ids start here: lower ids are left to real replicas."""
MAX_ID = 0xFFFFFFFF
_SPAN = MAX_ID - FIRST_DERIVED_ID + 1
_SALT = secrets.token_bytes(16)


def derive_replica_id(address: str, name: str, redraw: int = 0, *, salt: bytes | None = None) -> int:
    """The derived id of destination ``name`` on master ``address`` in this process (``redraw``: after clashes)."""
    digest = hashlib.blake2b(
        f"{address}\0{name}\0{redraw}".encode(), digest_size=8, key=_SALT if salt is None else salt
    ).digest()
    return FIRST_DERIVED_ID + int.from_bytes(digest, "big") % _SPAN


def _next_id(replica_id: int) -> int:
    return replica_id + 1 if replica_id < MAX_ID else FIRST_DERIVED_ID


class ReplicaIds:
    """The replica ids this process's dumps hold, per master address (one per process: :data:`REPLICA_IDS`)."""

    def __init__(self, salt: bytes | None = None) -> None:
        self._salt = salt
        self._lock = threading.Lock()
        self._held: dict[str, dict[int, str]] = {}  # address -> id -> destination holding it
        self._redraws: dict[tuple[str, str], int] = {}

    def lease(self, address: str, name: str, *, configured: int | None = None, master_id: int | None = None) -> int:
        """An id for a new dump of destination ``name`` on ``address``: ``configured`` when set (another dump of the
        same destination while it holds it -- an XA read-back beside its stream -- takes a derived id; a shared
        reader's dump sets none: :meth:`canal.parse.mysql.source.MysqlBinlogSource.dump_as`), else the derived one,
        stepping over ids held here and the master's ``master_id``. Release it with :meth:`release`.

        Raises :class:`ReplicaIdConflictError` when another destination of this process holds ``configured``.
        """
        with self._lock:
            held = self._held.setdefault(address, {})
            if configured is not None:
                owner = held.get(configured)
                if owner is not None and owner != name:
                    raise ReplicaIdConflictError(
                        f"destinations {owner!r} and {name!r} both set slave_id {configured} for {address}: the server "
                        "keeps one dump per replica id, so they would end each other's. Give each its own "
                        "slave_id (canal.instance.mysql.slaveId), or leave it unset to have one derived",
                        replica_id=configured,
                        certain=True,
                    )
                if owner is None and configured != master_id:
                    held[configured] = name
                    return configured
            # a derived id; also for another dump of a destination whose configured id its first dump holds: the
            # next number could be the id another destination of this process has set (7101 stepped onto 7102)
            replica_id = derive_replica_id(address, name, self._redraws.get((address, name), 0), salt=self._salt)
            while replica_id in held or replica_id == master_id:
                replica_id = _next_id(replica_id)
            held[replica_id] = name
            return replica_id

    def release(self, address: str, replica_id: int) -> None:
        with self._lock:
            held = self._held.get(address)
            if held is not None:
                held.pop(replica_id, None)
                if not held:
                    del self._held[address]

    def redraw(self, address: str, name: str) -> None:
        """The server reported a clash with a derived id of ``name``: its next lease derives another."""
        with self._lock:
            key = (address, name)
            self._redraws[key] = self._redraws.get(key, 0) + 1

    def held(self, address: str) -> dict[int, str]:
        """The ids leased now for ``address`` (a copy), with the destination holding each."""
        with self._lock:
            return dict(self._held.get(address, {}))


REPLICA_IDS = ReplicaIds()
"""The process's registry: every :class:`~canal.parse.mysql.source.MysqlBinlogSource` dump leases here."""
