"""The one way pycanal opens a ZooKeeper client, with optional authentication and the ACL its nodes get.

With ``auth`` (e.g. ``ZkAuth("digest", "canal:secret")``) the session authenticates, and every node pycanal creates --
running nodes, fencing epochs, cursors, batch marks, cluster registrations -- gets this ACL: all permissions for the
authenticated identity, read for everyone. canal's tools (and ``canal ha status``) can still read the layout; a
client without the credentials cannot delete a running node or write a cursor. Nodes that existed before keep their
ACL. The credential never appears in reprs, logs or error messages.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient
from kazoo.protocol.serialization import Auth
from kazoo.security import make_acl, make_digest_acl

from canal.config import ZkAuth


def zk_acl(auth: ZkAuth) -> list[Any]:
    """The ACL of the nodes pycanal creates: everything for this identity, read for the world."""
    user, _, password = auth.credential.partition(":")
    return [make_digest_acl(user, password, all=True), make_acl("world", "anyone", read=True)]


class _RedactAuth(logging.Filter):
    """kazoo logs every request at DEBUG, the authentication packet included, credential and all: mask it."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and any(isinstance(a, Auth) for a in args):
            record.args = tuple(Auth(a.auth_type, a.scheme, "***") if isinstance(a, Auth) else a for a in args)
        return True


_redacting = False
_redacting_lock = threading.Lock()


def _redact_kazoo_logs() -> None:
    global _redacting
    with _redacting_lock:
        if not _redacting:
            logging.getLogger("kazoo.client").addFilter(_RedactAuth())
            _redacting = True


def make_client(hosts: str, timeout_s: float, auth: ZkAuth | None = None, *, read_only: bool = False) -> KazooClient:
    """An unstarted kazoo client for ``hosts``, authenticated and creating nodes with :func:`zk_acl` when ``auth``
    is given."""
    if auth is None:
        return KazooClient(hosts=hosts, timeout=timeout_s, read_only=read_only)
    _redact_kazoo_logs()
    return KazooClient(
        hosts=hosts,
        timeout=timeout_s,
        read_only=read_only,
        auth_data=[(auth.scheme, auth.credential)],
        default_acl=zk_acl(auth),
    )


def run_or_stop(client: KazooClient, work: Callable[[], None], timeout_s: float, *, name: str) -> bool:
    """Run ``work`` (which calls ZooKeeper) on a thread named ``name`` for at most ``timeout_s`` seconds; whether it
    ended in time. While ZooKeeper cannot be reached kazoo queues every request until the session comes back, so a
    call can wait for ever: past the time, the client is stopped, which fails every waiting request at once
    (``ConnectionClosedError``), and ``work`` is given as long again to finish what needs no ZooKeeper. Use it where
    giving up is safe: a stop (an ephemeral node dies with the session; a fenced write fails anyway)."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # handed back to the caller's thread
            errors.append(exc)

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    thread.join(timeout_s)
    in_time = not thread.is_alive()
    if not in_time:
        client.stop()
        thread.join(max(timeout_s, 1.0))
    if errors:
        raise errors[0]
    return in_time
