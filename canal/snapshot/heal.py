"""Heal: where the server changed a captured table's rows without logging them, read the table again in the stream.

DBLog reads a table in key chunks between watermarks while the binlog streams, and merges them with it exactly
(:mod:`canal.snapshot.merge`). A heal is such a read, started at the point of the stream where the table's rows
became unknown: the entry there carries the :data:`~canal.parse.heal_marks.HEAL` mark (the tables, why, where), and
the table's chunks are read after it. For a copy of the table (the mirror, or a consumer's own) that drops the
table's rows at the mark and then applies every entry in order, the table is exact again once the heal's read of it
ends (its SNAPSHOT entry with ``snapshot.table_done``):

* every chunk is read at a position ``P`` after the mark (the mark's event is in the binlog before the read starts),
  and joins the stream at a boundary ``E >= P`` without the rows a change in ``[P, E)`` touched -- those changes,
  handed off before it, already hold them (the rule of :mod:`canal.snapshot.window`);
* every change after the mark reaches the copy after its rows were dropped: an UPDATE of a row it no longer holds
  writes the whole row (full row images), a DELETE of one deletes nothing;
* a row the table lost at the mark (TRUNCATE PARTITION, ...) is in no chunk and in no later change: gone, as it must.

A chunk read before the mark that would join after it (its rows older than the point) is read again: the mark
counts as a DDL of its tables for the merge's layout check.

:class:`Healer` is the destination's :class:`~canal.parse.unmodeled.StatementPolicy` under ``heal="snapshot"``: a
statement that heals (:attr:`~canal.parse.unmodeled.UnmodeledStatement.healable`) is handed off marked, others stop
typed as before. The parser also gives it the changes it judges on the entry (a partial row image a copy cannot
apply, an ALTER whose conversions a copy cannot repeat: :mod:`canal.parse.healing`). The read goes into the running
snapshot when there is one (:meth:`~canal.snapshot.runner.SnapshotRunner.extend`), else starts one; its progress
rides with the entries from the mark on (the mark's own entry included), so a restart resumes it, and a restart
before the mark was acked reads the statement and heals again. Each heal is logged (the tables, why, the statement
and its position) and counted (``Instance.metrics().heals``). Where no snapshot can be taken (a source that is not a
server, group mode) a statement stops typed as under ``heal="stop"``, and a change judged on its entry goes on as it
is (a mirror stops typed there), with a warning.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from canal.errors import CanalError
from canal.log import DestinationAdapter
from canal.names import split_qualified
from canal.parse.heal_marks import CONVERSION, HEAL, PARTIAL_IMAGE, RENAMED_WHILE_READ, HealedTable, HealMark
from canal.parse.unmodeled import UnmodeledStatement

__all__ = ["Healer"]

_ON_ENTRIES = frozenset({PARTIAL_IMAGE.name, CONVERSION.name})  # what the parser judges on entries

HealTables = Callable[[Sequence[str]], Mapping[str, int]]
"""``read_again(tables)``: the snapshot reads ``tables`` (``db.table``) again from now on; the index of each one's
read in the snapshot's list. Raises :class:`~canal.errors.CanalError` when no snapshot can be taken (a source that is
not a server, group mode)."""


class Healer:
    """The statement policy of a destination that heals (module docstring). ``read_again`` starts or extends the
    destination's snapshot; ``healed`` counts a heal."""

    def __init__(self, read_again: HealTables, healed: Callable[[int], None], log: DestinationAdapter) -> None:
        self._read_again = read_again
        self._healed = healed
        self._log = log

    def __call__(self, statement: UnmodeledStatement) -> Mapping[str, str]:
        """The props marking the statement's entry once its tables are being read again; the typed stop for a
        statement that does not heal, or when no snapshot can be taken."""
        if not statement.healable or not statement.heal_tables:
            raise statement.error()
        try:
            passes = self._read_again(statement.heal_tables)
        except CanalError as exc:
            if statement.shape.name in _ON_ENTRIES:
                # judged on the entry, not a statement the capture stops at: it goes on as it is, and a mirror stops
                # typed there (what heal="stop" does)
                self._log.warning(
                    "%s at %s cannot be healed (%s): handed off as it is", statement.shown, statement.where, exc
                )
                return {}
            raise statement.error(str(exc)) from exc
        self._healed(len(statement.heal_tables))
        self._log.warning(
            "healing %s: %s at %s (%s) %s; reading %s again in the stream from here",
            ", ".join(statement.heal_tables),
            statement.shape.name,
            statement.where,
            statement.shown,
            "moved a table the snapshot had not read all of"
            if statement.shape is RENAMED_WHILE_READ
            else "changed rows the binlog does not hold",
            "it" if len(statement.heal_tables) == 1 else "them",
        )
        mark = HealMark(
            statement.shape.name,
            statement.where,
            statement.shown,
            tuple(HealedTable(*split_qualified(name), passes.get(name, 0)) for name in statement.heal_tables),
        )
        return {HEAL: mark.prop()}

