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
