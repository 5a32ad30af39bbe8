"""What a row decoder takes from a schema source for a table map that carries no column names
(:class:`SchemaColumn`), and the source's interface (:class:`ColumnSource`): the schema history
(:class:`canal.schema.history.SchemaHistory`, strict) or ``information_schema`` now."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import attrs

if TYPE_CHECKING:
    from canal.position import EntryPosition
    from canal.schema.catalog import TableDef

__all__ = ["ColumnSource", "SchemaColumn"]


@attrs.frozen(slots=True)
class SchemaColumn:
    """What a row decoder takes from the history for one column of a table map without names."""

    name: str
    is_key: bool
    labels: tuple[str, ...]
    unsigned: bool | None
    column_type: str
    charset: str | None = None  # the MySQL charset of a text column (a table map without metadata names none)


class ColumnSource(Protocol):
    """Where a row decoder takes the columns of a table map that carries no names.

    ``strict``: a table it does not know, or a table map whose column count or types differ from what it returns, is
    a :class:`~canal.errors.SchemaError` (the schema history) rather than ``UNKNOWN_COLn`` names with a warning
    (``information_schema`` now). ``version`` changes whenever what it returns may have changed, so decoders built
    from an older answer are rebuilt.
    """

    strict: bool
    version: int

    def columns(self, db: str, table: str) -> Sequence[SchemaColumn] | None: ...

    def repair(self, position: EntryPosition, table: TableDef) -> bool:
        """A strict source only: the binlog names ``table``'s columns (FULL metadata) and they differ from what it
        holds; take the binlog's layout from ``position`` on. Whether it changed anything."""
        ...
