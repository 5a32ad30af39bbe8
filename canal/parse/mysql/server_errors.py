"""The server's error numbers a MySQL/MariaDB source meets, and the typed errors the refusals that only a GRANT
changes become (:func:`privilege_error`). :class:`~canal.parse.mysql.source.MysqlBinlogSource` decides with them
what a failure is: a lost connection (:data:`LOST`), a purged position, a replica-id clash, a missing privilege.
"""

from __future__ import annotations

import re

from canal.errors import MissingPrivilegeError

CR_SERVER_LOST = 2013
CR_SERVER_GONE_ERROR = 2006
CR_CONN_HOST_ERROR = 2003
ER_PARSE_ERROR = 1064
ER_MASTER_FATAL_ERROR_READING_BINLOG = 1236
ER_NO_SUCH_THREAD = 1094
LOST = frozenset({CR_SERVER_LOST, CR_SERVER_GONE_ERROR, CR_CONN_HOST_ERROR})
"""The client's error numbers of a connection lost or never made."""

ER_SLAVE_SAME_ID = 4052  # MariaDB; MySQL reports the same clash as 1236 with this text:
SAME_ID_TEXT = "same server_uuid/server_id"

ER_SPECIFIC_ACCESS_DENIED = 1227  # "Access denied; you need (at least one of) the X privilege(s)"
QUERY_DENIED = frozenset(
    {
        1044,  # ER_DBACCESS_DENIED_ERROR
        1142,  # ER_TABLEACCESS_DENIED_ERROR: "SELECT command denied to user ..."
        1143,  # ER_COLUMNACCESS_DENIED_ERROR
        ER_SPECIFIC_ACCESS_DENIED,
    }
)
"""Refusals of a statement after the login that only a GRANT changes (:class:`~canal.errors.MissingPrivilegeError`)."""
DUMP_DENIED = frozenset({1045, ER_SPECIFIC_ACCESS_DENIED})
"""Refusals of a logged-in user's replica registration or binlog dump (MariaDB answers COM_REGISTER_SLAVE without
REPLICATION SLAVE with 1045): the user lacks REPLICATION SLAVE."""
_NEEDED = re.compile(r"you need \(at least one of\) the (.+?) privilege", re.IGNORECASE)
_COMMAND = re.compile(r"^(\w+) command denied", re.IGNORECASE)


def privilege_error(address: str, user: str, what: str, code: int, text: str, *, dump: bool) -> MissingPrivilegeError:
    """The typed refusal of ``what`` (a statement, or the binlog dump when ``dump``) for a missing privilege: the
    privilege the server's message names (or REPLICATION SLAVE for the dump), and the GRANT that gives it."""
    needed = _NEEDED.search(text) or (None if dump else _COMMAND.search(text))
    privilege = needed.group(1).upper() if needed is not None else "REPLICATION SLAVE" if dump else "SELECT"
    grant = privilege.split(",")[-1].strip()  # of "SUPER, BINLOG MONITOR": the narrower one, named last
    return MissingPrivilegeError(
        f"{address}: {what} failed for user {user!r} (errno {code}: {text}): it needs {privilege}; run GRANT "
        f"{grant} ON *.* TO the user ('canal check' lists every grant capture needs)",
        privilege=privilege,
        errno=code,
    )


def errno_of(exc: BaseException) -> int | None:
    """The error number a pymysql error carries (its first argument), None for other errors."""
    args = getattr(exc, "args", ())
    if args and isinstance(args[0], int):
        return args[0]
    return None
