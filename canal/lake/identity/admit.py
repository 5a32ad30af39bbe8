"""Which part of a batch a mirror applies, and under which number: its record (:mod:`canal.lake.identity.applied`) and
the batch's rows (:mod:`canal.lake.identity.lineage`) decide, before anything of the batch is written.

:func:`admit` is the driver's (a mirror applying with its step journal): the same last batch again is skipped whole;
the batch in flight again goes on after its journaled steps; any other batch keeps the rows the mirror has not
applied, is numbered past everything before it, and is recorded as in flight before its first write. A batch that
would have to finish another batch's steps (that batch stopped part-way, its journal says so), or whose binlog range
begins after the end of the one applied (a gap: :func:`check_range`), is refused with
:class:`~canal.lake.types.MirrorCheckpointError`. :func:`admit_rows` is a Spark task's: the rows of its part of a
batch the driver admitted, filtered by the record as it was before the batch.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import attrs

from canal.lake.forms.ranges import Cursor, batch_range
from canal.lake.identity.applied import (
    Applied,
    Decision,
    Pending,
    decide,
    read_applied,
    root_number,
    with_pending,
    write_applied,
)
from canal.lake.identity.lineage import Advance, fingerprint, follow
from canal.lake.types import MirrorCheckpointError


@attrs.frozen(slots=True)
class Admitted:
    """A batch as the mirror applies it: ``table`` (its rows not applied yet), its ``number``, the steps of it done
    before (``done``: a resume), or ``skip`` (nothing to apply: the same batch again, or every row applied)."""

    table: Any
    number: int
    done: int = 0
    skip: bool = False
    replay: bool = False  # the last batch finished, again
    records: bool = True  # whether the mirror writes the record after it (not for a replay, nor a Spark task's part)
    recorded: Applied | None = None  # the record before the batch
    advance: Advance = attrs.field(factory=Advance)
    batch_id: int = 0
    fingerprint: str | None = None
    through: str | None = None  # the end of the batch's binlog range, when the record moves to it (range_end)

    def after(self) -> Applied:
        """The record once the batch is applied."""
        return self.advance.recorded(self.recorded, self.batch_id, self.fingerprint, self.number, self.through)


def admit(
    table: Any,
    batch_id: int,
    root: str | os.PathLike[str],
    app_id: str,
    journal: tuple[int, int] | None,
    *,
    filtered: bool = True,
    check: Callable[[Any], None] | None = None,
) -> Admitted:
    """The batch ``batch_id`` (a pyarrow Table of change rows, a typed batch's metadata or its planner table) as
    the mirror of ``root`` / ``app_id`` applies it, by its record and its step journal (``journal``: (number, steps
    done)). ``filtered=False``: ``table`` is left whole (a Spark task filters the rows it applies itself,
    :func:`admit_rows`, from the record as it was before the batch: :attr:`Admitted.recorded`). ``check``: called
    with the rows to apply before anything is written (the mirror refuses tables of another app id there)."""
    root = os.fspath(root)
    recorded = read_applied(root, app_id)
    mark = fingerprint(table)
    decision = decide(recorded, batch_id, mark, lambda: root_number(root, app_id))
    if decision.replay:
        return Admitted(
            table,
            decision.number,
            skip=True,
            replay=True,
            records=False,
            recorded=recorded,
            batch_id=batch_id,
            fingerprint=mark,
        )
    start, end = batch_range(table)
    check_range(recorded, start, batch_id, root, app_id)
    followed = follow(table, recorded, root, app_id)
    check_interrupted(decision, journal, batch_id, root, app_id)
    legacy = recorded is None or recorded.legacy  # a journal of the old form: its batch id is the batch's number
    done = journal[1] if journal is not None and journal[0] == decision.number and (decision.resume or legacy) else 0
    admitted = Admitted(
        # (every row applied: the batch as it came, whose tables the mirror reports skipped)
        table if followed.keep is None or not filtered or followed.kept == 0 else table.filter(followed.keep),
        decision.number,
        done,
        skip=followed.kept == 0,
        recorded=recorded,
        advance=followed.advance,
        batch_id=batch_id,
        fingerprint=mark,
        through=range_end(recorded, end),
    )
    if check is not None and not admitted.skip:
        check(admitted.table)
    if not admitted.skip and not decision.resume:
        # in flight from here on: the same batch again goes on with this number, another one is numbered past it
        write_applied(root, app_id, with_pending(recorded, Pending(batch_id, mark, decision.number)), synced=False)
    return admitted


def check_interrupted(
    decision: Decision, journal: tuple[int, int] | None, batch_id: int, root: str, app_id: str
) -> None:
    """:class:`MirrorCheckpointError` when a new batch would follow one that stopped part-way through its steps
    (its step journal counts some for its number): that batch's DDL may be half done, which only it can finish."""
    stopped = decision.interrupted
    if stopped is None or journal is None or journal[0] != stopped.number or journal[1] == 0:
        return
    raise MirrorCheckpointError(
        f"mirror {root} (app id {app_id!r}) was applying batch {stopped.batch} when it stopped, after {journal[1]} "
        f"of its steps; batch {batch_id} is another batch (a new checkpoint location, or another query), which "
        "cannot finish those steps. Nothing of it was written. Run the query that was writing the mirror (from its "
        "checkpoint, or run_batches with its journal) until that batch is done, then this one: the changes the "
        "mirror has by then are skipped."
    )


def check_range(recorded: Applied | None, start: Cursor | None, batch_id: int, root: str, app_id: str) -> None:
    """:class:`MirrorCheckpointError` when a batch's binlog range begins (``start``) after the end of the range the
    mirror applied (``recorded.through``) in the same server's binlog: the stream it comes from skipped what lies
    between, which the mirror never applied (:mod:`canal.lake.forms.ranges`). A batch or a record without a range, or
    a range of another server (a failover: the lineage's GTID rules relate the two), is not checked."""
    through = Cursor.parse(None if recorded is None else recorded.through)
    if start is None or through is None or start.server_id != through.server_id or start.key <= through.key:
        return
    raise MirrorCheckpointError(
        f"mirror {root} (app id {app_id!r}) applied the binlog up to {through}; batch {batch_id} comes from a stream "
        f"that begins at {start}, after it: the changes between were never applied, and the mirror would silently "
        "lack them (a query with a new checkpoint that starts after batches the old one spooled but did not commit, "
        "or a destination that lost its cursor). Nothing of the batch was written. Run the query or destination "
        "that wrote the mirror from its checkpoint or cursor, start this one at or before that position, or mirror "
        "into a new root from a snapshot."
    )


def range_end(recorded: Applied | None, end: Cursor | None) -> str | None:
    """The record's new ``through`` once a batch whose binlog range ends at ``end`` is applied (its text), or None
    to keep the one recorded -- a batch without a range, or one ending before it in the same binlog (a replay from
    an older position)."""
    through = Cursor.parse(None if recorded is None else recorded.through)
    if end is None or (through is not None and end.server_id == through.server_id and end.key < through.key):
        return None
    return end.text()


def admit_rows(
    table: Any,
    number: int,
    recorded: Applied | None,
    root: str | os.PathLike[str],
    app_id: str,
    *,
    check: Callable[[Any], None] | None = None,
    skip: bool = False,
) -> Admitted:
    """A Spark task's part of a batch its driver admitted as ``number``: the rows the record before the batch
    (``recorded``; None: every row) does not hold (``check``: as :func:`admit`'s), or none (``skip``: the batch was
    admitted as a replay; its tables are reported skipped). The driver records the batch."""
    if skip:
        return Admitted(table, number, skip=True, records=False)
    if recorded is not None:
        followed = follow(table, recorded, os.fspath(root), app_id)
        table = table if followed.keep is None else table.filter(followed.keep)
    if check is not None and table.num_rows:
        check(table)
    return Admitted(table, number, records=False)
