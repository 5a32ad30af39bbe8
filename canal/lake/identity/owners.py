"""One app id writes each mirror table: a table that holds another app id's batches is refused, before anything is
written.

Under one root, each app id numbers its batches, and a table's change log and fold point are ordered by those
numbers (:mod:`canal.lake.store.changelog`); two app ids writing one table would interleave two orders. The case that
led here: "mirror under a new app id from a snapshot" on the same root. The new app id's rows would merge into tables
that keep every row the source deleted since (a snapshot only upserts), so the tables end neither the old mirror's
nor the source's. A table of the root written under another app id (its Delta log holds that app id's transactions)
is refused with :class:`~canal.lake.types.MirrorLineageError`; a new root (from a snapshot) gives exact tables.
Destinations mirrored into one root under app ids of their own write tables of their own, and are not concerned.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from canal.lake.identity.applied import other_app_ids
from canal.lake.store import fs
from canal.lake.types import MirrorLineageError


def table_pairs(table: Any) -> list[tuple[str, str]]:
    """The distinct ``(schema, table)`` a batch of change rows names (rows of a database alone left out)."""
    pairs = table.select(["schema", "table"]).group_by(["schema", "table"]).aggregate([])
    schemas, tables = pairs.column("schema").to_pylist(), pairs.column("table").to_pylist()
    return [(str(s), str(t)) for s, t in zip(schemas, tables, strict=True) if s is not None and t]


class TableOwners:
    """The tables a mirror of ``root`` under ``app_id`` was seen to own (checked once per mirror object)."""

    def __init__(self, root: str, app_id: str) -> None:
        self.root = root
        self.app_id = app_id
        self._others: list[str] | None = None  # the root's other app ids, read at the first check
        self._checked: set[str] = set()
        self._lock = threading.Lock()

    def others(self) -> list[str]:
        """The root's other app ids (read once): none, and there is nothing to check."""
        with self._lock:
            if self._others is None:
                self._others = other_app_ids(self.root, self.app_id)
            return self._others

    def check(
        self, pairs: Iterable[tuple[str, str]], location: Callable[[str, str], str], logs: Callable[[str], Any]
    ) -> None:
        """:class:`MirrorLineageError` when a table of ``pairs`` (``(schema, table)``; ``location`` gives its path,
        ``logs`` its change log's DeltaTable or None) holds batches of another app id."""
        others = self.others()
        if not others:
            return
        for schema, table in pairs:
            path = location(schema, table)
            if path in self._checked:
                continue
            tables: list[Any] = []
            if fs.is_delta_table(path):
                tables.append(fs.delta_table(path))
                log = logs(path)
                if log is not None:
                    tables.append(log)
            for other in others:
                if any(t.transaction_version(other) is not None for t in tables):
                    raise MirrorLineageError(
                        f"mirror table {schema}.{table} under {self.root} holds batches of app id {other!r}, and this "
                        f"mirror's app id is {self.app_id!r}: two app ids cannot write one table (their batches are "
                        "numbered apart, and a snapshot mirrored under a new app id would keep every row the source "
                        "deleted). Nothing of the batch was written. Mirror into a new root from a snapshot, or go "
                        f"on with app id {other!r}."
                    )
            with self._lock:
                self._checked.add(path)
