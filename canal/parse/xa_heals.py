"""Heals inside a prepared XA transaction: its tables read again once its XA COMMIT is read.

MariaDB logs an XA transaction's changes at its ``XA PREPARE``, in an event group of its own, and makes them visible
at its ``XA COMMIT``, a later group (:mod:`canal.parse.xa`). A heal marked inside the prepared group -- a statement
logged as a statement, a partial image, a cascade from a table the filter leaves out -- reads its tables while the
transaction is still prepared: the read cannot see what the transaction changed, and the XA COMMIT logs no rows. A
copy that holds the prepared entries until the XA COMMIT, as it must (the mirror: :mod:`canal.lake.apply.xa`), voids
the tables there, where the mark then stands, and the rows read before are void with them: the mirror ended with
none of the table's rows. So :class:`XAHeals` remembers the tables such marks heal, per xid, and the parser has
them read again when the XA COMMIT of that xid is read (an XA ROLLBACK forgets them: what was read is what stands).
The XA COMMIT's entry carries no mark of its own (the mark inside the transaction voids the tables there): the
read's SNAPSHOT rows follow it.

The xids are kept across reconnects (as :class:`~canal.parse.xa_lookback.XAFollower` keeps them). An XA COMMIT whose
prepared group lies before the stream's start (a restart between the two) is read back
(:mod:`canal.parse.xa_lookback`): the statements in it that heal heal at the commit (:func:`commit_heal`), the mark
on their entries.
"""

from __future__ import annotations

from typing import Final

from canal.names import qualified
from canal.parse.heal_marks import heal_mark
from canal.parse.unmodeled import UnmodeledStatement
from canal.parse.xa import XA_TYPE, XA_XID, xid_key
from canal.position import EntryPosition
from canal.protocol import Entry
from canal.sql.contract import Follow, Shape

__all__ = ["XA_COMMIT_OF_A_HEAL", "XAHeals", "commit_heal"]

XA_COMMIT_OF_A_HEAL: Final = Shape(
    "XA COMMIT of a transaction that healed",
    Follow.STOP,
    "the XA COMMIT makes visible what its prepared transaction changed unlogged (a statement logged as a statement, "
    "a partial image, a foreign key's action): the heal read the tables while it was prepared",
    "Rows logged as statements",
    heals=True,
)


class XAHeals:
    """The tables heals marked inside each prepared XA transaction (by xid) until its XA COMMIT or XA ROLLBACK."""

    __slots__ = ("_tables",)

    def __init__(self) -> None:
        self._tables: dict[str, dict[str, None]] = {}

    def follow(self, entry: Entry) -> UnmodeledStatement | None:
        """Follow ``entry`` (one handed off); at the XA COMMIT of a transaction that healed, the heal of its tables
        there."""
        props = entry.header.props
        xid = props.get(XA_XID) if props else None
        if xid is None:
            return None
        key = xid_key(xid)
        kind = props.get(XA_TYPE)
        if kind == "XA_ROLLBACK":
            self._tables.pop(key, None)
            return None
        if kind == "XA_COMMIT":
            tables = self._tables.pop(key, None)
            if not tables:
                return None
            return commit_heal(xid, entry, tuple(tables))
        mark = heal_mark(props)
        if mark is not None:
            held = self._tables.setdefault(key, {})
            for table in mark.tables:
                held[qualified(table.schema, table.table)] = None
        return None

    def clear(self) -> None:
        """The parser now reads another server."""
        self._tables.clear()


def commit_heal(xid: str, commit: Entry, tables: tuple[str, ...]) -> UnmodeledStatement:
    """The heal of ``tables`` (``db.table``) at the XA COMMIT ``commit`` of ``xid``."""
    header = commit.header
    return UnmodeledStatement(
        f"XA COMMIT {xid}",
        header.schema,
        XA_COMMIT_OF_A_HEAL,
        tables,
        tables,
        EntryPosition(header.log_file, header.log_offset, header.execute_time, header.server_id),
        False,
        True,
        tables,
    )
