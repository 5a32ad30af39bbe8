"""The status variables of a query event: the session state the server logged with a statement.

A Query event's post-header is followed by ``status_vars_len`` bytes of ``(code, value)`` pairs; each code's value
has a fixed layout (MySQL's and MariaDB's ``log_event.h``). pycanal reads three of them:

* ``Q_TIME_ZONE_CODE`` (5): the session's ``time_zone`` (``+05:00``, ``Europe/Berlin``, ``SYSTEM``), written when the
  statement used it -- a DDL that converted DATETIME values to TIMESTAMP or evaluated a TIMESTAMP default does;
  a statement logged without it did not depend on the zone;
* ``Q_SQL_MODE_CODE`` (1): the statement's ``sql_mode`` as the server's bit set (always logged; ``SET STATEMENT
  sql_mode=... FOR`` logs the statement's): how an ALTER converted the values it rewrote (MariaDB rounds fractional
  seconds it narrows under ``TIME_ROUND_FRACTIONAL``, else truncates them);
* MariaDB's ``Q_HRNOW`` (128): the microseconds of the statement's start time (the event header holds its seconds):
  the time the server gave the statement's ``NOW()``, the ``row_start`` of the rows ``ADD SYSTEM VERSIONING`` made
  versions of.

The server writes the codes it knows in its own order; a reader that meets a code it does not know cannot tell its
length and stops there (as the server's own reader does). Every code either server writes is read here, so that
stop comes only after the ones pycanal wants. A value that runs past the variables' end is a ``ValueError``.
"""

from __future__ import annotations

from typing import Final

import attrs

__all__ = ["QueryStatus", "read_status"]

_FIXED: Final = {
    0: 4,  # Q_FLAGS2_CODE
    1: 8,  # Q_SQL_MODE_CODE
    3: 4,  # Q_AUTO_INCREMENT: increment, offset
    4: 6,  # Q_CHARSET_CODE: client charset, connection collation, server collation
    7: 2,  # Q_LC_TIME_NAMES_CODE
    8: 2,  # Q_CHARSET_DATABASE_CODE
    9: 8,  # Q_TABLE_MAP_FOR_UPDATE_CODE
    10: 4,  # Q_MASTER_DATA_WRITTEN_CODE
    13: 3,  # MySQL Q_MICROSECONDS
    16: 1,  # MySQL Q_EXPLICIT_DEFAULTS_FOR_TIMESTAMP
    17: 8,  # MySQL Q_DDL_LOGGED_WITH_XID
    18: 2,  # MySQL Q_DEFAULT_COLLATION_FOR_UTF8MB4
    19: 1,  # MySQL Q_SQL_REQUIRE_PRIMARY_KEY
    20: 1,  # MySQL Q_DEFAULT_TABLE_ENCRYPTION
    128: 3,  # MariaDB Q_HRNOW
    129: 8,  # MariaDB Q_XID
}
_SQL_MODE: Final = 1
_TIME_ZONE: Final = 5
_HRNOW: Final = 128
_OVER_MAX_DBS: Final = 254  # Q_UPDATED_DB_NAMES: more databases than it lists (none follow)


@attrs.frozen(slots=True)
class QueryStatus:
    """What pycanal reads of a query event's status variables (None: not logged)."""

    time_zone: str | None = None
    micros: int | None = None
    sql_mode: int | None = None


def read_status(b: bytes | memoryview, start: int, end: int) -> QueryStatus:
    """The status variables in ``b[start:end]``."""
    time_zone: str | None = None
    micros: int | None = None
    sql_mode: int | None = None
    p = start
    while p < end:
        code = b[p]
        p += 1
        size = _FIXED.get(code)
        if size is not None:
            if code == _HRNOW and p + 3 <= end:
                micros = int.from_bytes(b[p : p + 3], "little")
            elif code == _SQL_MODE and p + 8 <= end:
                sql_mode = int.from_bytes(b[p : p + 8], "little")
        elif code in (_TIME_ZONE, 6):  # Q_TIME_ZONE_CODE, Q_CATALOG_NZ_CODE: a length byte, then the text
            size = 1 + _byte(b, p, end)
            if code == _TIME_ZONE:
                time_zone = bytes(b[p + 1 : p + size]).decode("ascii", "replace")
        elif code == 2:  # Q_CATALOG_CODE (servers before 5.0.4): a length byte, the text, a NUL
            size = 2 + _byte(b, p, end)
        elif code == 11:  # Q_INVOKER: user and host, each after a length byte
            size = 1 + _byte(b, p, end)
            size += 1 + _byte(b, p + size, end)
        elif code == 12:  # MySQL Q_UPDATED_DB_NAMES: a count, then as many NUL-terminated names
            count = _byte(b, p, end)
            size = 1
            for _ in range(0 if count == _OVER_MAX_DBS else count):
                nul = bytes(b[p + size : end]).find(b"\0")
                if nul < 0:
                    raise ValueError("a database name of Q_UPDATED_DB_NAMES runs past the status variables")
                size += nul + 1
        elif code == 130:  # MariaDB Q_GTID_FLAGS3: flags, and a sequence number for a COMMIT / ROLLBACK ALTER
            size = 1 + (8 if _byte(b, p, end) & (4 | 8) else 0)
        else:
            break  # a code this reader does not know: its length is unknown, nothing after it can be read
        p += size
        if p > end:
            raise ValueError(f"status variable {code} runs past the status variables' end")
    return QueryStatus(time_zone, micros, sql_mode)


def _byte(b: bytes | memoryview, p: int, end: int) -> int:
    if p >= end:
        raise ValueError("a status variable's length runs past the status variables' end")
    return int(b[p])
