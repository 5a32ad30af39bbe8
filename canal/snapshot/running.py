"""The snapshots one destination runs in its stream since it started: their runners (the last one last), and the
heals and rereads that read tables or rows again in the stream from now on -- a pass of the running snapshot, or a
snapshot started for them (after the rest of an unfinished one).

:class:`~canal.snapshot.destination.DestinationSnapshots` plans which snapshot a start runs and checks a new one;
:class:`~canal.instance.Instance` starts them (at its start, by ``snapshot()``) and keeps the cursors. A heal (the
parser's step, through :mod:`canal.snapshot.heal`) and ``snapshot()`` start one snapshot at a time (:attr:`lock`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from canal.errors import SnapshotError
from canal.parse.mysql import MysqlBinlogSource
from canal.position import SnapshotCursor
from canal.schema.catalog import SchemaCatalog
from canal.snapshot.destination import DestinationSnapshots
from canal.snapshot.merge import SnapshotMerge
from canal.snapshot.runner import SnapshotRunner


class RunningSnapshots:
    """The snapshots of one destination's stream, planned by ``planning``; ``waiting`` tells the store a runner waits
    for the consumer, ``stored`` is the store's put sequence (:meth:`DestinationSnapshots.runner`)."""

    def __init__(self, planning: DestinationSnapshots, waiting: Callable[[], None], stored: Callable[[], int]) -> None:
        self.planning = planning
        self._waiting = waiting
        self._stored = stored
        self.runners: list[SnapshotRunner] = []
        self.rows_out = 0  # snapshot rows up to the last entry handed out (its progress says)
        self.heals = 0  # tables read again in the stream where the server changed rows unlogged
        self.rows_reread = 0  # rows read again where a partial UPDATE left a copy unable to make them exact
        self.lock = threading.Lock()  # a heal (the parser thread) and snapshot() start one snapshot at a time

    def runner(
        self,
        plan: SnapshotCursor,
        merge: SnapshotMerge,
        source: MysqlBinlogSource,
        catalog: SchemaCatalog | None,
        chunk_rows: int | None,
        max_rows_per_s: float | None,
    ) -> SnapshotRunner:
        """The runner of ``plan`` (:meth:`DestinationSnapshots.runner`), told what the store does."""
        return self.planning.runner(
            plan,
            merge,
            source,
            catalog,
            chunk_rows,
            max_rows_per_s,
            waiting=self._waiting,
            rows_out=lambda: self.rows_out,
            stored=self._stored,
        )

    def read_again(self, tables: Sequence[str]) -> dict[str, int]:
        """A heal (the parser's step -- its thread, or a shared reader's for a plain transaction -- through
        :mod:`canal.snapshot.heal`): ``tables`` are read again in the stream from now
        on -- in the running snapshot, or in one started now (after the rest of an unfinished one that failed or was
        stopped in this run). The index of each one's read in the snapshot's list of tables."""
        names = tuple(dict.fromkeys(tables))
        with self.lock:
            merge, source = self.planning.parts()
            if merge.stream_ended:
                raise SnapshotError("the stream ended with its snapshot (snapshot mode initial_only)")
            running = self.runners[-1] if self.runners else None
            passes = None if running is None else running.extend(names)
            if passes is not None:
                return passes
            left = merge.progress  # a snapshot of this run that failed or was stopped: it goes on first
            if left is not None and left.tables:
                plan = attrs.evolve(left, tables=(*left.tables, *names))
                passes = {name: len(left.tables) + i for i, name in enumerate(names)}
            else:
                plan = SnapshotCursor(names)
                passes = {name: i for i, name in enumerate(names)}
            runner = self.runner(plan, merge, source, None, None, None)
            runner.heals = True
            merge.begin(plan)  # the entries handed off from here (the heal's own included) carry it
            self.runners.append(runner)
            runner.start()
            return passes

    def reread(self, table: str, keys: Sequence[tuple[tuple[str, Any], ...]]) -> None:
        """Rows a partial UPDATE leaves a copy unable to make exact (the parser's step, through
        :mod:`canal.parse.rereads`): read again in the stream from now on -- a pass of the running snapshot that
        reads those keys only, or a snapshot started now for them (after the rest of an unfinished one)."""
        with self.lock:
            merge, source = self.planning.parts()
            if merge.stream_ended:
                raise SnapshotError("the stream ended with its snapshot (snapshot mode initial_only)")
            running = self.runners[-1] if self.runners else None
            if running is not None and running.reread(table, keys) is not None:
                self.rows_reread += len(keys)
                return
            left = merge.progress  # a snapshot of this run that failed or was stopped: it goes on first
            if left is not None and left.tables:
                plan = attrs.evolve(left, tables=(*left.tables, table))
            else:
                plan = SnapshotCursor((table,))
            runner = self.runner(plan, merge, source, None, None, None)
            runner.read_only(len(plan.tables) - 1, keys)
            merge.begin(plan)  # the entries handed off from here (the update's own included) carry it
            self.runners.append(runner)
            runner.start()
            self.rows_reread += len(keys)

    def count_heals(self, tables: int) -> None:
        """``tables`` more tables healed (:attr:`heals`)."""
        self.heals += tables
