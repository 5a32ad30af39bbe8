"""The statement of a DDL change row, its database and table names compared as its server compares them.

A server with ``lower_case_table_names=1`` keeps database and table names in lower case and its row events name them
so, while a statement's SQL keeps the case it was typed in (``CREATE TABLE `Orders```). Its DDL rows carry the prop
``lower_case_table_names`` = ``"1"`` (:data:`canal.parse.statement_props.LOWER_CASE_PROP`, in the ``props``
column). The mirror reads every DDL row's statement through :func:`ddl_statement`, with that row's
:func:`fold_flags`: the names are folded (column names and literals keep their case), so one server table is one
mirror table.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from canal.lake.types import MirrorError
from canal.parse.convert import COMPUTED_PROP, IMPLICIT_COLUMNS_PROP, RETYPED_FROM_PROP, RETYPED_TO_PROP
from canal.parse.statement_props import (
    LOWER_CASE_PROP,
    SERVER_VERSION_PROP,
    SQL_MODE_PROP,
    TIME_ZONE_PROP,
    TIMESTAMP_PROP,
)
from canal.schema.history import layout_statement
from canal.sql import DEFAULT_MODE, SqlMode, Statement, fold_table_names

__all__ = ["ddl_modes", "ddl_props", "ddl_statement", "fold_flags", "statement_mode"]

_STATE_PROPS = (
    COMPUTED_PROP,
    TIME_ZONE_PROP,
    TIMESTAMP_PROP,
    RETYPED_FROM_PROP,
    RETYPED_TO_PROP,
    SQL_MODE_PROP,
    IMPLICIT_COLUMNS_PROP,
)


def ddl_statement(sql: str | None, fold_names: bool, mode: SqlMode = DEFAULT_MODE) -> Statement | None:
    """The layout statement of a DDL row's ``sql`` (:func:`canal.schema.history.layout_statement`) read under its
    sql_mode ``mode`` (the row's :func:`statement_mode`), its database and table names in lower case when
    ``fold_names`` (the row's :func:`fold_flags`)."""
    stmt = layout_statement(sql or "", mode)
    return fold_table_names(stmt) if fold_names and stmt is not None else stmt


def statement_mode(props: Mapping[str, str] | None) -> SqlMode:
    """How the statement of a DDL row whose props are ``props`` reads: under the sql_mode the server logged with it
    (:data:`~canal.parse.statement_props.SQL_MODE_PROP`, with
    :data:`~canal.parse.statement_props.SERVER_VERSION_PROP` saying whose bits they are); the default mode where none
    is given."""
    bits = (props or {}).get(SQL_MODE_PROP)
    if bits is None or not bits.isdigit():
        return DEFAULT_MODE
    version = (props or {}).get(SERVER_VERSION_PROP)
    return SqlMode.of(int(bits), mariadb=version is None or "mariadb" in version.lower())


def ddl_modes(table: Any) -> dict[int, SqlMode]:
    """The sql_mode of each DDL row of ``table`` (Arrow, rows by position) whose statement reads otherwise than
    under the default mode (:func:`statement_mode`)."""
    found = {row: statement_mode(props) for row, props in ddl_props(table).items()}
    return {row: mode for row, mode in found.items() if not mode.reads_as_default}


def ddl_props(table: Any) -> dict[int, dict[str, str]]:
    """The props of each DDL row of ``table`` (Arrow, rows by position) that carries the session state its effect
    depends on (:data:`~canal.parse.statement_props.TIME_ZONE_PROP`,
    :data:`~canal.parse.statement_props.TIMESTAMP_PROP`, :data:`~canal.parse.convert.RETYPED_FROM_PROP`,
    :data:`~canal.parse.convert.RETYPED_TO_PROP`, :data:`~canal.parse.statement_props.SQL_MODE_PROP`,
    :data:`~canal.parse.convert.IMPLICIT_COLUMNS_PROP`): what the mirror converts the table's values and places its
    columns with."""
    import pyarrow.compute as pc

    if "props" not in table.column_names or "is_ddl" not in table.column_names:
        return {}
    rows = pc.indices_nonzero(pc.and_(pc.fill_null(table.column("is_ddl"), False), pc.is_valid(table.column("props"))))
    found: dict[int, dict[str, str]] = {}
    for row, text in zip(rows.to_pylist(), table.column("props").take(rows).to_pylist(), strict=True):
        if any(name in text for name in _STATE_PROPS):
            props = _props(text)
            found[row] = {k: str(v) for k, v in props.items()} if isinstance(props, dict) else {}
    return found


def fold_flags(table: Any) -> list[bool]:
    """For each change row of ``table`` (Arrow), whether its server folds table names (its props say so); all False
    when the batch has no ``props`` column."""
    if "props" not in table.column_names:
        return [False] * table.num_rows
    return [_folds(text) for text in table.column("props").to_pylist()]


def _folds(props_text: str | None) -> bool:
    if not props_text or LOWER_CASE_PROP not in props_text:
        return False
    props = _props(props_text)
    return isinstance(props, dict) and props.get(LOWER_CASE_PROP) == "1"


def _props(props_text: str) -> Any:
    try:
        return json.loads(props_text)
    except ValueError as exc:
        raise MirrorError(f"a change row's props are not JSON ({exc}): {props_text[:80]!r}") from None
