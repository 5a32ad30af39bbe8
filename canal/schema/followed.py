"""The statements the schema history follows, read once: what changes a table's layout or the key its rows are
identified by, and what changes what a statement logged as a statement reaches (a view, trigger or routine)."""

from __future__ import annotations

import functools
from typing import Final

from canal.errors import SqlError
from canal.schema.catalog import LAYOUT_VERBS
from canal.sql import (
    DEFAULT_MODE,
    AlterDatabase,
    AlterTable,
    CreateDatabase,
    CreateIndex,
    CreateTable,
    DropDatabase,
    DropIndexStatement,
    DropTable,
    RenameTable,
    SqlMode,
    Statement,
    TruncateTable,
    Unreadable,
    read_statement,
)
from canal.sql.objects import ObjectStatement, read_object

__all__ = ["history_statement", "layout_statement"]

_LAYOUT_STATEMENTS: Final = (
    CreateTable,
    AlterTable,
    DropTable,
    RenameTable,
    TruncateTable,
    CreateDatabase,
    DropDatabase,
    AlterDatabase,  # the default character set of tables created later
)


def layout_statement(sql: str, mode: SqlMode = DEFAULT_MODE) -> Statement | None:
    """The statement of ``sql`` if it can change a table layout (CREATE/ALTER/DROP/RENAME/TRUNCATE TABLE,
    CREATE/ALTER/DROP DATABASE), else None (DML, grants, views, routines, indexes on their own...); read under the
    statement's sql_mode ``mode`` (:mod:`canal.sql.modes`)."""
    if len(sql) <= _CACHED_SQL:
        return _layout_statement_cached(sql, mode)  # BEGIN / COMMIT / the same DDL again: read once (frozen)
    return _layout_statement(sql, mode)


_CACHED_SQL: Final = 4096


def _layout_statement(sql: str, mode: SqlMode = DEFAULT_MODE) -> Statement | None:
    try:
        stmt = read_statement(sql, strict=False, mode=mode)
    except SqlError:
        return None
    if isinstance(stmt, _LAYOUT_STATEMENTS):
        return stmt
    if isinstance(stmt, Unreadable) and stmt.verb in LAYOUT_VERBS:
        return stmt  # the catalog refuses it: the history must never keep a layout that misses a DDL
    if isinstance(stmt, DropIndexStatement) and stmt.name.upper() == "PRIMARY":
        return stmt  # DROP INDEX `PRIMARY` ON t drops the primary key
    return None


_layout_statement_cached = functools.lru_cache(maxsize=1024)(_layout_statement)


def history_statement(sql: str, mode: SqlMode = DEFAULT_MODE) -> Statement | ObjectStatement | None:
    """The statement of ``sql`` if the history follows it: a :func:`layout_statement`; a CREATE UNIQUE INDEX or a
    DROP INDEX (a UNIQUE key made or dropped may make or unmake the key a table without a primary key is identified
    by: :mod:`canal.schema.keys`); or a CREATE / ALTER / DROP of a view, trigger, function or procedure
    (:func:`canal.sql.objects.read_object`: what statements reach); read under the statement's sql_mode ``mode``."""
    stmt = layout_statement(sql, mode)
    if stmt is not None:
        return stmt
    if len(sql) <= _CACHED_SQL:
        return _object_statement_cached(sql, mode)
    return _object_statement(sql, mode)


def _object_statement(sql: str, mode: SqlMode) -> Statement | ObjectStatement | None:
    try:
        stmt = read_statement(sql, strict=False, mode=mode)
    except SqlError:
        return None
    if isinstance(stmt, CreateIndex):
        return stmt if stmt.index.kind == "UNIQUE" else None
    if isinstance(stmt, DropIndexStatement):
        return stmt
    try:
        return read_object(sql)
    except SqlError:
        return None


_object_statement_cached = functools.lru_cache(maxsize=256)(_object_statement)
