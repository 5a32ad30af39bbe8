"""Tables a statement changed without logging a row: foreign-key actions (``ON DELETE CASCADE``, ``ON UPDATE
CASCADE``, ``SET NULL``).

The server logs the rows a statement changed itself, but not the rows InnoDB changed for a foreign key's action on a
child table. It does map every table the statement locked for writing, children with such actions included: a
table map in a statement's group of events with no rows event of its own is a table that statement may have
changed unseen. :class:`StatementTables` follows the table maps and rows events of each statement and names those
tables on the statement's last row entry, as the header prop :data:`CASCADE_TABLES` (a JSON list of
``[schema, table]``). A consumer that keeps copies of those tables must look them up again (or apply the foreign
key's action itself); the Delta mirror stops there (:mod:`canal.spark.mirror_stops`).

It names a child whether or not a row of it changed (the server maps it before it knows), and a table a trigger was
prepared to write but did not.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

CASCADE_TABLES: Final = "CASCADE_TABLES"


class StatementTables:
    """The tables mapped and the tables with rows in the statement being read."""

    __slots__ = ("_mapped", "_rowed")

    def __init__(self) -> None:
        self._mapped: dict[tuple[str, str], None] = {}  # in map order
        self._rowed: set[tuple[str, str]] = set()

    def reset(self) -> None:
        self._mapped.clear()
        self._rowed.clear()

    def mapped(self, schema: str, table: str) -> None:
        self._mapped[(schema, table)] = None

    def rows(self, schema: str, table: str, end_of_statement: bool) -> Mapping[str, str]:
        """A rows event of ``schema.table``; at the statement's last one, the props naming the tables it mapped and
        logged no rows of (empty when none)."""
        self._rowed.add((schema, table))
        if not end_of_statement:
            return {}
        silent = [list(name) for name in self._mapped if name not in self._rowed]
        self.reset()
        return {CASCADE_TABLES: json.dumps(silent, ensure_ascii=False)} if silent else {}
