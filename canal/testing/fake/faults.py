"""Failure injection on the fake server: dropped dumps, refused connections, stalls, a server that is down."""

from __future__ import annotations

from typing import Final

import attrs

from canal.errors import (
    BinlogPurgedError,
    MissingPrivilegeError,
    SourceAccessDeniedError,
    SourceError,
    SourceUnreachableError,
)

__all__ = ["Faults"]

_UNREACHABLE_ERRNOS: Final = frozenset({1040, 1129, 1130, 2002, 2003, 2005, 2006, 2013})
_DENIED_ERRNOS: Final = frozenset({1044, 1045, 1698})  # a login refused: as MysqlBinlogSource types it
_PRIVILEGE_ERRNO: Final = 1227


@attrs.define(slots=True)
class Faults:
    """What the server does wrong next; the server holds its lock around every use."""

    fail_after: int | None = None  # the next dump drops after this many events
    refuse_left: int = 0  # connect / dump attempts still to refuse
    refuse_errno: int = 1040
    refuse_message: str | None = None
    stalled: bool = False  # dumps yield nothing, not even heartbeats
    down: bool = False  # unreachable: errno 2003 for open/dump/query, open dumps drop with 2013

    def check_up(self, address: str) -> None:
        if self.down:
            raise SourceUnreachableError(
                f"Can't connect to MySQL server on '{address}' (111 \"Connection refused\"; FakeMysql.down())",
                errno=2003,
            )

    def check_connect(self, address: str) -> None:
        """A connect or dump attempt: raise when the server is down or the attempt is to be refused."""
        self.check_up(address)
        if self.refuse_left > 0:
            self.refuse_left -= 1
            errno = self.refuse_errno
            message = self.refuse_message or f"{address} refused the connection (FakeMysql.refuse, errno {errno})"
            if errno == _PRIVILEGE_ERRNO:
                raise MissingPrivilegeError(message, privilege="REPLICATION SLAVE", errno=errno)
            cls: type[SourceError] = SourceError
            if errno in _DENIED_ERRNOS:
                cls = SourceAccessDeniedError
            elif errno in _UNREACHABLE_ERRNOS:
                cls = SourceUnreachableError
            elif errno == 1236:
                cls = BinlogPurgedError
            raise cls(message, errno=errno)

    def take_budget(self) -> int | None:
        """The event budget of the dump starting now (fail_after applies to one dump only)."""
        budget, self.fail_after = self.fail_after, None
        return budget
