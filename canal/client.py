"""Who consumes a destination: canal's ``ClientIdentity``.

A client is named by its destination and a numeric client id (canal's default and, in practice, only id is 1001).
The subscription filter travels with the identity but is not part of it: two identities that differ only in their
filter are the same client, as in canal, so re-subscribing with a new filter replaces the old one.
"""

from __future__ import annotations

import re
from typing import Any, Final

import attrs

from canal.errors import ConfigError

DEFAULT_CLIENT_ID = 1001
"""canal's fixed client id."""

_MAX_CLIENT_ID = 32767  # canal stores client ids as a Java short


DESTINATION_RE: Final = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.#-]{0,127}")
"""The one destination-name rule: it names a ZooKeeper node and a directory (``#`` for a group member's name)."""


def validate_destination(destination: str) -> str:
    """Check ``destination`` against :data:`DESTINATION_RE`; return it unchanged."""
    if not isinstance(destination, str) or not DESTINATION_RE.fullmatch(destination):
        raise ConfigError(
            f"destination {destination!r} must be 1-128 letters, digits, '_', '.', '-' starting with a letter, "
            "digit or '_' (it names a ZooKeeper node and a directory)",
            key="destination",
        )
    return destination


def _check_destination(_inst: Any, _attr: attrs.Attribute[str], value: str) -> None:
    validate_destination(value)


def _check_client_id(_inst: Any, _attr: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _MAX_CLIENT_ID:
        raise ConfigError(f"a client id must be an integer in 0..{_MAX_CLIENT_ID}, got {value!r}", key="client_id")


def _check_filter(_inst: Any, _attr: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str):
        raise ConfigError(f"a client filter must be a string, got {value!r}", key="filter")


@attrs.frozen(slots=True)
class ClientIdentity:
    """A consumer of one destination: ``ClientIdentity("example")`` is canal's client 1001 of ``example``.

    Equality and hashing use ``destination`` and ``client_id`` only; ``filter`` (canal's subscription filter
    regex, empty for none) rides along.
    """

    destination: str = attrs.field(validator=_check_destination)
    client_id: int = attrs.field(default=DEFAULT_CLIENT_ID, validator=_check_client_id)
    filter: str = attrs.field(default="", eq=False, validator=_check_filter)

    @property
    def has_filter(self) -> bool:
        return bool(self.filter)

    def with_filter(self, filter: str) -> ClientIdentity:
        return attrs.evolve(self, filter=filter)

    def __str__(self) -> str:
        return f"{self.destination}/{self.client_id}"
