"""The mirror's own column names: none of them can be the name of a MySQL or MariaDB column.

A change log holds a table's columns beside the mirror's own (the batch id, the change's ``seq``, the operation), a
batch's MERGE source the table's columns beside the operation, and the mirror adds columns of its own to tables of
the source's columns while it works (a key's identity, a row's place in an order). A source column of the same name
would be dropped or taken for the mirror's. MySQL allows almost any character in a column name, but not more than
64 of them (MariaDB too), so each name here is longer: a source column named like any of them cannot exist.

Until this scheme the change log's columns were ``_canal_batch``, ``_canal_seq`` and ``_canal_op``, which a source
column may well be named (every batch of such a table then failed): :data:`LEGACY_LOG_COLUMNS`. A log or staged part
written with them is read as if it had the new names (:func:`canal.lake.store.changelog.current_names`), and the first
append to such a log folds it and starts it anew under the new ones; no data moves otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

MYSQL_NAME_CHARACTERS: Final = 64
"""The most characters a MySQL or MariaDB column name has."""

_TAIL: Final = "own_column_named_beyond_the_64_characters_of_a_mysql_column"


def own_name(purpose: str) -> str:
    """The mirror's column for ``purpose`` (``batch``, ``seq``, ``op``, ``key_0``, ...): longer than any MySQL
    column name, so it never meets one."""
    name = f"__pycanal_{purpose}__{_TAIL}"
    assert len(name) > MYSQL_NAME_CHARACTERS
    return name


BATCH: Final = own_name("batch")
"""The change-log column holding each change's batch id."""
SEQ: Final = own_name("seq")
"""The change-log column holding each change's ``seq`` (its order within its batch)."""
OP: Final = own_name("op")
"""The change-log column holding each change's operation: ``u`` (upsert the row) or ``d`` (delete its key)."""
LOG_COLUMNS: Final = (BATCH, SEQ, OP)
"""The change log's own columns (and a MERGE source's, which holds :data:`OP`)."""

LEGACY_LOG_COLUMNS: Final = ("_canal_batch", "_canal_seq", "_canal_op")
"""The change log's batch, seq and operation columns as pycanal named them before these names (see the module)."""


def log_columns(names: Sequence[str]) -> tuple[str, str, str]:
    """The (batch, seq, op) columns of a change log or staged part whose columns are ``names``: the mirror's own
    (:data:`LOG_COLUMNS`), or :data:`LEGACY_LOG_COLUMNS` in one an older pycanal wrote."""
    held = set(names)
    if BATCH not in held and set(LEGACY_LOG_COLUMNS) <= held:
        return LEGACY_LOG_COLUMNS
    return LOG_COLUMNS


def current_names(rows: Any) -> Any:
    """Log rows (a pyarrow Table) with the mirror's own column names: in rows an older pycanal wrote, its batch, seq
    and op columns renamed (no source column of their table had those names: its batches failed)."""
    if log_columns(rows.column_names) == LOG_COLUMNS:
        return rows
    renamed = dict(zip(LEGACY_LOG_COLUMNS, LOG_COLUMNS, strict=True))
    return rows.rename_columns([renamed.get(name, name) for name in rows.column_names])
