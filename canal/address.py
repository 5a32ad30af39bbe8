"""The one ``host:port`` reader: master addresses, cursor identities and the dump connection all use it."""

from __future__ import annotations

import functools
import re
import socket
from typing import Final

_HOST_RE: Final = re.compile(
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?"
)
_V6_RE: Final = re.compile(r"[0-9A-Fa-f:.%A-Za-z]+")


def split_address(address: str, default_port: int | None = None) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` -> (host, port); ``host`` alone only with ``default_port``.

    Raises ValueError saying what is wrong: a missing or bad port, a bad host name.
    """
    text = address.strip()
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise ValueError("expected host:port, e.g. 127.0.0.1:3306 or [::1]:3306")
        host, rest = text[1:end], text[end + 1 :]
        if not host or not _V6_RE.fullmatch(host) or ":" not in host:
            raise ValueError("bad IPv6 host")
        if not rest and default_port is not None:
            return host, default_port
        if not rest.startswith(":"):
            raise ValueError("expected host:port, e.g. 127.0.0.1:3306 or [::1]:3306")
        port_text = rest[1:]
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep:
            if default_port is None or not text:
                raise ValueError("expected host:port, e.g. 127.0.0.1:3306, or fake://NAME")
            host, port_text = text, str(default_port)
        if not host:
            raise ValueError("expected host:port, e.g. 127.0.0.1:3306, or fake://NAME")
        if not _HOST_RE.fullmatch(host):
            raise ValueError(f"bad host name {host!r}")
    if not port_text.isdigit():
        raise ValueError(f"port {port_text!r} is not a number")
    port = int(port_text)
    if not 1 <= port <= 65535:
        raise ValueError(f"port {port} is out of range 1..65535")
    return host, port


def host_and_port(address: str | None) -> tuple[str | None, int]:
    """canal's ``sourceAddress`` fields of a position identity: (host, port) of a ``host:port`` address, else the
    address itself (``fake://name``, a directory of binlog files) and port 0."""
    if address is None:
        return None, 0
    if "://" not in address:
        try:
            return split_address(address)
        except ValueError:
            pass  # not host:port (a directory of local binlog files): canal's form keeps it whole, port 0
    return address, 0


def same_endpoint(saved: str | None, current: str) -> bool:
    """Whether a position's ``sourceAddress`` (``saved``) names the server at ``current``.

    The same text is; otherwise two ``host:port`` addresses with the same port whose hosts resolve to a common
    address are: Java canal writes the host its ``InetSocketAddress`` resolved to (``localhost`` for a configured
    ``127.0.0.1``, a reverse-DNS name for an IP), so a cursor canal acked names the same server under another
    spelling. A host that does not resolve matches only its own spelling. Anything else (``fake://``, a directory of
    binlog files) matches only itself.
    """
    if saved is None or saved == current:
        return True
    try:
        saved_host, saved_port = split_address(saved)
        host, port = split_address(current)
    except ValueError:
        return False
    if saved_port != port:
        return False
    if saved_host.lower() == host.lower():
        return True
    return bool(_resolved(saved_host) & _resolved(host))


@functools.lru_cache(maxsize=256)
def _resolved(host: str) -> frozenset[str]:
    """The IP addresses ``host`` resolves to (an IP address: itself); empty when it does not resolve."""
    try:
        return frozenset(str(info[4][0]) for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP))
    except (OSError, UnicodeError):
        return frozenset()
