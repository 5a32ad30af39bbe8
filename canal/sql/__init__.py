"""The one SQL reader: MySQL/MariaDB statements to typed, frozen statement objects.

Everything in pycanal that reads SQL reads it here: the DDL classifier of binlog query events
(:mod:`canal.parse.ddl`), the transaction-boundary rule, the fake server (:mod:`canal.testing.fake`), the Delta
mirror's schema evolution and the Spark projection.

    >>> from canal.sql import read_statement
    >>> stmt = read_statement("CREATE TABLE shop.t (id INT UNSIGNED PRIMARY KEY, note VARCHAR(20) NOT NULL)")
    >>> stmt.table, stmt.primary_key
    (TableName(schema='shop', name='t'), ('id',))
    >>> [(c.name, c.type.base, c.type.params, c.type.unsigned, c.is_nullable) for c in stmt.columns]
    [('id', 'int', (), True, False), ('note', 'varchar', (20,), False, False)]
    >>> read_statement("/*M!100301 ALTER TABLE t ADD COLUMN IF NOT EXISTS c INT AFTER id */").actions[0].after
    'id'

What it reads: see :mod:`canal.sql.reader` (statements; MariaDB's ``SET STATEMENT ... FOR`` reads as its statement,
:func:`read_settings` gives the settings), :mod:`canal.sql.tables` and :mod:`canal.sql.columns` (definitions),
:mod:`canal.sql.alter` (ALTER TABLE actions), :mod:`canal.sql.partitions` (partitioning), :mod:`canal.sql.lexer`
(comments, version comments, quoting), :mod:`canal.sql.modes` (what of a statement's sql_mode changes how it
reads). What pycanal does with each statement it reads -- follows it, knows it changes
nothing, or stops -- is :mod:`canal.sql.contract`. Why not a general SQL parser such as sqlglot (30.30, measured
here): it drops ``/*! */`` and ``/*M! */`` version comments (the statement inside is lost), falls back to an opaque
command for ``ADD COLUMN (a, b)``, ``WAIT n``, ``CONVERT TO CHARACTER SET`` and ``RENAME TABLE``, rejects ``POINT`` /
``INET6`` columns, and takes about 2 ms per mysqldump CREATE TABLE -- ten times this reader. A binlog needs only DDL
and statement heads, exactly.
"""

from __future__ import annotations

import functools

from canal.errors import SqlError
from canal.sql import statements
from canal.sql.columns import read_type
from canal.sql.cursor import Cursor
from canal.sql.modes import DEFAULT_MODE, SqlMode
from canal.sql.reader import TRACKED, read_settings, read_statements
from canal.sql.statements import *  # noqa: F403 -- the statement classes are this package's API
from canal.sql.statements import Statement, TableName
from canal.sql.types import ColumnType

__all__ = [
    "DEFAULT_MODE",
    "TRACKED",
    "ColumnType",
    "Cursor",
    "SqlError",
    "SqlMode",
    "read_column_type",
    "read_settings",
    "read_statement",
    "read_statements",
    "read_table_name",
]
__all__ += statements.__all__


def read_statement(sql: str, *, strict: bool = True, mode: SqlMode = DEFAULT_MODE) -> Statement:
    """The first statement of ``sql`` (see :func:`read_statements`; ``mode``: the statement's sql_mode,
    :mod:`canal.sql.modes`); SqlError when there is none."""
    statements = read_statements(sql, strict=strict, mode=mode)
    if not statements:
        raise SqlError(f"no statement in {sql[:60]!r}", offset=0)
    return statements[0]


@functools.lru_cache(maxsize=4096)
def read_column_type(text: str, *, strict: bool = True) -> ColumnType:
    """A data type alone (``int(10) unsigned``, ``decimal(12,2)``, ``enum('a','b')``, as information_schema and
    ColumnMeta.mysql_type show them). SqlError when it cannot be read; ``strict=False`` gives instead a type whose
    ``base`` is the text's first word in lower case and nothing else. MariaDB's column compression, which
    information_schema shows after the type (``varchar(10) /*M!100301 COMPRESSED*/``), is storage, not type: read
    past."""
    c = Cursor(text)
    try:
        column_type = read_type(c)
        if c.accept("COMPRESSED") and c.accept("="):
            c.word_or_string("a compression method")
        if not c.at_end():
            raise c.error("expected only a data type")
    except SqlError:
        if strict:
            raise
        first = text.strip().split("(", 1)[0].split(None, 1)
        return ColumnType(text, first[0].lower() if first else "")
    return column_type


def read_table_name(text: str) -> TableName:
    """``name`` or ``schema.name`` (quoted or not), and nothing else; SqlError otherwise."""
    c = Cursor(text)
    name = c.table_name()
    if not c.at_end() or c.accept(";"):
        raise c.error("expected only a table name")
    return name
