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
read's SNAPSHOT rows follow it. Rows a partial UPDATE inside the transaction leaves inexact (:mod:`canal.parse.rereads`:
what a VIRTUAL column is computed from) are read again at the XA COMMIT alone (:meth:`XAHeals.rereads`): read while
prepared, they came without the update, which a copy applies at the XA COMMIT over them.

The xids are kept across reconnects (as :class:`~canal.parse.xa_lookback.XAFollower` keeps them). An XA COMMIT whose
prepared group lies before the stream's start (a restart between the two) is read back
(:mod:`canal.parse.xa_lookback`): the statements in it that heal heal at the commit (:func:`commit_heal`), the mark
on their entries.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import attrs

from canal.names import qualified
from canal.parse.heal_marks import heal_mark
from canal.parse.rereads import RowRereads
from canal.parse.unmodeled import UnmodeledStatement
from canal.parse.xa import XA_TYPE, XA_XID, xid_key
from canal.position import EntryPosition
from canal.protocol import Entry
from canal.sql.contract import Follow, Shape

__all__ = ["XA_COMMIT_OF_A_HEAL", "AtCommit", "XAHeals", "commit_heal"]

Keys = Sequence[tuple[tuple[str, Any], ...]]

XA_COMMIT_OF_A_HEAL: Final = Shape(
    "XA COMMIT of a transaction that healed",
    Follow.STOP,
    "the XA COMMIT makes visible what its prepared transaction changed unlogged (a statement logged as a statement, "
    "a partial image, a foreign key's action): the heal read the tables while it was prepared",
    "Rows logged as statements",
    heals=True,
)


@attrs.frozen(slots=True)
class AtCommit:
    """What an XA COMMIT reads again: the heal of the tables marks inside its transaction healed (None: none), and
    the rows its partial UPDATEs left inexact (``(table, keys)``, as :data:`~canal.parse.rereads.RowRereads` takes
    them)."""

    heal: UnmodeledStatement | None
    rereads: tuple[tuple[str, Keys], ...] = ()


class XAHeals:
    """The tables heals marked inside each prepared XA transaction (by xid), and the rows to read again, until its
    XA COMMIT or XA ROLLBACK."""

    __slots__ = ("_rows", "_tables")

    def __init__(self) -> None:
        self._tables: dict[str, dict[str, None]] = {}
        self._rows: dict[str, list[tuple[str, Keys]]] = {}

    def rereads(self, xid: str) -> RowRereads:
        """The :data:`~canal.parse.rereads.RowRereads` of the entries of the prepared transaction ``xid``: kept for
        its XA COMMIT."""
        rows = self._rows.setdefault(xid_key(xid), [])

        def later(table: str, keys: Keys) -> None:
            rows.append((table, tuple(keys)))

        return later

    def follow(self, entry: Entry) -> AtCommit | None:
        """Follow ``entry`` (one handed off); at the XA COMMIT of a transaction that healed or left rows inexact,
        what is read again there."""
        props = entry.header.props
        xid = props.get(XA_XID) if props else None
        if xid is None:
            return None
        key = xid_key(xid)
        kind = props.get(XA_TYPE)
        if kind == "XA_ROLLBACK":
            self._tables.pop(key, None)
            self._rows.pop(key, None)
            return None
        if kind == "XA_COMMIT":
            tables = self._tables.pop(key, None)
            rows = self._rows.pop(key, None)
            if not tables and not rows:
                return None
            return AtCommit(commit_heal(xid, entry, tuple(tables)) if tables else None, tuple(rows or ()))
        mark = heal_mark(props)
        if mark is not None:
            held = self._tables.setdefault(key, {})
            for table in mark.tables:
                held[qualified(table.schema, table.table)] = None
        return None

    def clear(self) -> None:
        """The parser now reads another server."""
        self._tables.clear()
        self._rows.clear()


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
