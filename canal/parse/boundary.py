"""The transaction-boundary rule: which binlog events open and close a transaction.

One rule for the entry converter (which turns boundaries into TRANSACTIONBEGIN / TRANSACTIONEND entries) and the
start-position search (which looks for the last boundary before a time, or for the start of the transaction a
position lies in), so both agree on every event -- XA statements included.

* BEGIN: a ``BEGIN`` / ``START TRANSACTION`` / ``XA START`` query, or MariaDB's GTID event of a transaction (MariaDB
  logs no BEGIN query);
* END: an XID event, a ``COMMIT`` / ``ROLLBACK`` / ``XA END`` query, and ``XA COMMIT`` / ``XA ROLLBACK`` inside an
  open transaction (MySQL's one-phase form);
* XA_OUTCOME: ``XA COMMIT`` / ``XA ROLLBACK`` outside any transaction, the second phase of a transaction whose rows
  came at its ``XA PREPARE``: a boundary of its own (canal's XACOMMIT / XAROLLBACK entry);
* CONTROL: ``SAVEPOINT``, ``ROLLBACK TO``, ``RELEASE SAVEPOINT``, ``XA PREPARE``: neither opens nor closes;
* STATEMENT: any other query: a statement of its own outside a transaction, part of the transaction inside one.
"""

from __future__ import annotations

import enum
from typing import Final

from canal.parse.ddl import query_kind
from canal.parse.events import BinlogEvent, GtidEvent, QueryEvent, XidEvent
from canal.sql import QueryKind

__all__ = ["Boundary", "event_boundary", "query_boundary"]


class Boundary(enum.Enum):
    BEGIN = "begin"
    END = "end"
    XA_OUTCOME = "xa_outcome"
    CONTROL = "control"
    STATEMENT = "statement"


_BY_KIND: Final = {
    QueryKind.BEGIN: Boundary.BEGIN,
    QueryKind.XA_START: Boundary.BEGIN,
    QueryKind.COMMIT: Boundary.END,
    QueryKind.ROLLBACK: Boundary.END,
    QueryKind.XA_END: Boundary.END,
    QueryKind.SAVEPOINT: Boundary.CONTROL,
    QueryKind.XA_PREPARE: Boundary.CONTROL,
}


def query_boundary(kind: QueryKind, in_transaction: bool) -> Boundary:
    """The boundary a query of ``kind`` makes, inside an open transaction or not."""
    if kind is QueryKind.XA_COMMIT or kind is QueryKind.XA_ROLLBACK:
        return Boundary.END if in_transaction else Boundary.XA_OUTCOME
    return _BY_KIND.get(kind, Boundary.STATEMENT)


# the first words of every transaction-control statement: a query that starts with a letter and another word is a
# STATEMENT without being parsed (scans classify every query of a file); anything else (comments, version
# comments, parentheses) takes the full reader
_CONTROL_HEADS: Final = ("BEGIN", "COMMIT", "ROLLBACK", "XA", "SAVEPOINT", "RELEASE", "START")


def event_boundary(event: BinlogEvent, in_transaction: bool) -> Boundary | None:
    """The boundary an event makes; None for events that are none (rows, table maps, MySQL GTID events, ...)."""
    if isinstance(event, XidEvent):
        return Boundary.END
    if isinstance(event, QueryEvent):
        head = event.sql.lstrip()[:9]
        if head[:1].isalpha() and not head.upper().startswith(_CONTROL_HEADS):
            return Boundary.STATEMENT
        return query_boundary(query_kind(event.sql), in_transaction)
    if isinstance(event, GtidEvent) and event.mariadb and not event.standalone:
        return Boundary.BEGIN
    return None
