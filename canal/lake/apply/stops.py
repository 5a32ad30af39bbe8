"""Changes a mirror cannot follow from the change rows alone: it stops there with a typed error, nothing written.

* A DML statement logged as a statement (a session with ``binlog_format`` STATEMENT or MIXED): the rows it changed
  are not in the binlog, and SQL text replayed against the mirror need not change the rows it changed on the source
  (functions, triggers, ``LIMIT`` without ``ORDER BY``, the session's state). pycanal's capture stops before such a
  statement on a captured table (:class:`~canal.errors.UnmodeledStatementError`, :mod:`canal.parse.unmodeled`); change
  rows that hold one anyway (:mod:`canal.lake.forms.changes` makes a row with its ``sql`` and no images of a statement
  entry a policy let through, or of entries from elsewhere) stop the batch: :class:`MirrorStatementError` names the
  statement and its position. ``canal check`` warns when sessions may switch their ``binlog_format``.
* A DELETE (or an UPDATE that changed a primary key) whose statement may have changed a mirrored table through a
  foreign key's action, which the binlog does not log (:mod:`canal.parse.cascade`), where the source did not name
  the foreign keys that explain it (``FOREIGN_KEY_ACTIONS``: no schema history, or a table a trigger was ready to
  write): :class:`MirrorCascadeError` names the statement's table, the tables it may have changed and its
  position. The actions the source names the mirror applies itself (:mod:`canal.lake.apply.cascade`), and stops
  with the same error where it cannot.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from canal.lake.types import MirrorError
from canal.parse.cascade import CASCADE_TABLES, FOREIGN_KEY_ACTIONS
from canal.parse.ddl import QueryKind, query_kind

_DML_TYPES = ("INSERT", "UPDATE", "DELETE")


class MirrorStatementError(MirrorError):
    """A DML statement arrived as SQL text (statement-based logging): the mirror cannot know the rows it changed."""


def check_statements(table: Any) -> None:
    """A :class:`MirrorStatementError` for the first DML statement among ``table``'s change rows (in order)."""
    import pyarrow.compute as pc

    statement = pc.and_(
        pc.invert(pc.fill_null(table.column("is_ddl"), False)),
        pc.and_(pc.is_valid(table.column("sql")), pc.is_null(table.column("columns"))),
    )
    if not pc.any(statement).as_py():
        return
    for row in pc.indices_nonzero(statement).to_pylist():
        sql = table.column("sql")[row].as_py() or ""
        kind = table.column("type")[row].as_py()
        if kind in _DML_TYPES or query_kind(sql) is QueryKind.DML:
            raise MirrorStatementError(_message(table, row, sql))


def _message(table: Any, row: int, sql: str) -> str:
    where = ""
    if "log_file" in table.column_names and "log_offset" in table.column_names:
        where = f" at {table.column('log_file')[row].as_py()}:{table.column('log_offset')[row].as_py()}"
    schema, name = table.column("schema")[row].as_py(), table.column("table")[row].as_py()
    target = f" on {schema}.{name}" if name else ""
    shown = sql if len(sql) <= 200 else sql[:200] + "..."
    return (
        f"the statement {shown!r}{target}{where} was logged as SQL text (its session's binlog_format is STATEMENT or "
        "MIXED), not as rows: the mirror cannot know which rows it changed, and replaying the text need not change "
        "the same ones. Nothing of the batch was written. Make every writing session log rows (binlog_format=ROW; "
        "`canal check` warns when sessions may change it), then mirror into a new root from a snapshot."
    )


class MirrorCascadeError(MirrorError):
    """A statement may have changed rows of a mirrored table through a foreign key's action (ON DELETE CASCADE /
    SET NULL, ON UPDATE CASCADE), which the binlog does not log."""


def check_cascades(table: Any, holds: Callable[[str, str], bool]) -> None:
    """A :class:`MirrorCascadeError` for the first DELETE, or UPDATE that changed a primary key, whose statement
    mapped a table it logged no rows of (:data:`canal.parse.cascade.CASCADE_TABLES`) that the mirror holds
    (``holds(schema, table)``) and that no foreign key the row names (``FOREIGN_KEY_ACTIONS``) explains."""
    import pyarrow.compute as pc

    if "props" not in table.column_names:
        return
    marked = pc.fill_null(pc.match_substring(table.column("props"), CASCADE_TABLES), False)
    if not pc.any(marked).as_py():
        return
    rows_of = set(zip(table.column("schema").to_pylist(), table.column("table").to_pylist(), strict=True))
    for row in pc.indices_nonzero(marked).to_pylist():
        kind = table.column("type")[row].as_py()
        if kind != "DELETE" and not (kind == "UPDATE" and table.column("old_keys")[row].is_valid):
            continue  # an insert cascades nothing; an update that kept the key keeps what references it
        props = json.loads(table.column("props")[row].as_py())
        named = json.loads(props.get(CASCADE_TABLES, "[]"))
        # the children the source named the foreign keys of were followed (canal.lake.apply.cascade); others
        # (no schema history, a trigger's table) stop
        followed = {(e["db"], e["table"]) for e in json.loads(props.get(FOREIGN_KEY_ACTIONS, "[]"))}
        children = [
            (s, t) for s, t in named if (s, t) not in followed and (holds(s, t) or (s, t) in rows_of)
        ]  # held, or made by the batch
        if children:
            raise MirrorCascadeError(_cascade_message(table, row, kind, children))


def _cascade_message(table: Any, row: int, kind: str, children: list[tuple[str, str]]) -> str:
    where = ""
    if "log_file" in table.column_names and "log_offset" in table.column_names:
        where = f" at {table.column('log_file')[row].as_py()}:{table.column('log_offset')[row].as_py()}"
    parent = f"{table.column('schema')[row].as_py()}.{table.column('table')[row].as_py()}"
    names = ", ".join(f"{s}.{t}" for s, t in children)
    return (
        f"a {kind} of {parent}{where} may have changed rows of {names} through a foreign key's action (ON DELETE "
        "CASCADE / SET NULL, ON UPDATE CASCADE), which the binlog does not log: the mirror of "
        f"{names} cannot follow it. Nothing of the batch was written. Mirror into a new root from a snapshot, or "
        "change the foreign key's action to RESTRICT / NO ACTION (the application then deletes the children itself, "
        "and the binlog logs those rows)."
    )
