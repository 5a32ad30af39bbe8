"""MariaDB's system-versioned tables in the mirror: what ``ADD`` / ``DROP SYSTEM VERSIONING`` do to a mirror table.

A system-versioned table keeps every version of a row; the binlog logs them all as rows of the table -- an UPDATE
as the old version's ``row_end`` set to the statement's time plus the new version, a DELETE as its ``row_end`` set --
with the period columns ``row_start`` / ``row_end`` (``TIMESTAMP(6)``) and a primary key that ends with ``row_end``
(:mod:`canal.schema.catalog`). The mirror holds what the binlog holds: every version, keyed so; the current ones are
those whose ``row_end`` is TIMESTAMP's maximum, and they are what ``SELECT`` shows. Two statements change the table
without logging a row:

* ``ADD SYSTEM VERSIONING`` gives every row it holds ``row_start`` = the statement's start time (to the microsecond:
  its entry's ``TIMESTAMP``, :data:`canal.parse.statement_props.TIMESTAMP_PROP`) and ``row_end`` = the maximum;
* ``DROP SYSTEM VERSIONING`` drops the history -- every version that is not current -- with the period columns.

The mirror's own tables know their columns by name only (:mod:`canal.lake.ddl.evolution`). An ALTER of a table with
implicit period columns names them (its entry's ``IMPLICIT_COLUMNS``, from the schema history): the columns it adds
go before them, as on the server. Without that (no schema history), a statement that drops versioning finds them
under the names the server gives them, ``row_start`` and ``row_end`` (explicit ones must be dropped by the statement
that drops versioning, or the server refuses it).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import Any, Final

import attrs

from canal.lake.types import MirrorError
from canal.parse.convert import IMPLICIT_COLUMNS_PROP
from canal.parse.statement_props import SERVER_VERSION_PROP, TIMESTAMP_PROP
from canal.schema import TableDef
from canal.sql import AddColumn, AlterTable, OtherAction, Statement

__all__ = ["CURRENT_FROM", "current_rows", "known_periods", "period_fill", "versioning_change"]

CURRENT_FROM: Final = dt.datetime(2038, 1, 19, 3, 14, 7, 999999)
"""TIMESTAMP's maximum before MariaDB 11.5: a row version whose ``row_end`` is at or after it is current (11.5 and
later, on 64-bit systems, reach 2106-02-07 06:28:15.999999)."""
_CURRENT_FROM_11_5: Final = dt.datetime(2106, 2, 7, 6, 28, 15, 999999)
_IMPLICIT: Final = {"row_start": "START", "row_end": "END"}


def versioning_change(stmt: Statement | None) -> str | None:
    """``"ADD"`` / ``"DROP"`` for an ALTER TABLE that adds / drops system versioning, else None."""
    if not isinstance(stmt, AlterTable):
        return None
    for action in stmt.actions:
        if isinstance(action, OtherAction):
            words = " ".join(action.text.upper().split())
            if words in ("ADD SYSTEM VERSIONING", "DROP SYSTEM VERSIONING"):
                return words.split()[0]
    return None


def known_periods(table: TableDef, stmt: AlterTable, props: Mapping[str, str]) -> TableDef:
    """``table`` as the mirror knows it (columns by name, types unknown) with its implicit period columns marked for
    the ALTER ``stmt``: those its entry names (:data:`~canal.parse.convert.IMPLICIT_COLUMNS_PROP`, from the schema
    history), else -- for a statement that adds system versioning (a replay: the table has them already) or drops
    it -- the columns named as the server names them."""
    if any(c.period is not None for c in table.columns):
        return table
    names = props.get(IMPLICIT_COLUMNS_PROP)
    if names is not None:
        implicit = {name: ("START", "END")[i] for i, name in enumerate(json.loads(names)[:2])}
    elif versioning_change(stmt) is None:
        return table
    elif any(isinstance(a, AddColumn) and a.column.row_period for a in stmt.actions):
        return table  # its period columns are the ones it adds
    else:
        implicit = {c.name: _IMPLICIT[c.name.lower()] for c in table.columns if c.name.lower() in _IMPLICIT}
    columns = tuple(
        attrs.evolve(c, period=implicit[c.name], hidden=True) if c.name in implicit else c for c in table.columns
    )
    return attrs.evolve(table, columns=columns)


def period_fill(period: str, props: Mapping[str, str], where: str) -> str:
    """The canal text the rows a table holds read in a period column ``ADD SYSTEM VERSIONING`` gave it: its start
    time (``START``) or TIMESTAMP's maximum (``END``); a MirrorError when the entry lacks the start time."""
    if period == "END":
        version = props.get(SERVER_VERSION_PROP, "")
        return (_CURRENT_FROM_11_5 if _from_11_5(version) else CURRENT_FROM).isoformat(" ")
    stamp = props.get(TIMESTAMP_PROP)
    if stamp is None:
        raise MirrorError(
            f"{where} makes the table system-versioned, and its rows' row_start is the statement's start time to the "
            "microsecond, which its entry does not carry (a server that logs no Q_HRNOW, or an entry written by an "
            "older pycanal): the mirror cannot fill it. Mirror the table anew from a snapshot."
        )
    seconds, _, micros = stamp.partition(".")
    instant = dt.datetime(1970, 1, 1) + dt.timedelta(seconds=int(seconds), microseconds=int(micros or 0))
    return instant.isoformat(" ")


def _from_11_5(version: str) -> bool:
    if "mariadb" not in version.lower():
        return False
    parts = version.split("-", 1)[0].split(".")
    try:
        return (int(parts[0]), int(parts[1])) >= (11, 5)
    except (IndexError, ValueError):
        return False


def current_rows(data: Any, row_end: str) -> Any:
    """The current row versions of a mirror table (pyarrow): those whose ``row_end`` column is TIMESTAMP's maximum."""
    import pyarrow as pa
    import pyarrow.compute as pc

    column = data.column(row_end)
    if not pa.types.is_timestamp(column.type):
        raise MirrorError(f"column {row_end!r} is a system-versioned table's row_end, but holds {column.type}")
    return data.filter(pc.fill_null(pc.greater_equal(column, pa.scalar(CURRENT_FROM, column.type)), False))
