"""A table's keys beside its primary key, and the key its rows are identified by.

A table without a primary key is not keyless to the server: MariaDB and MySQL promote its first UNIQUE key over NOT
NULL columns -- in the server's order of keys, one with no prefix part -- to the table's primary key
(``TABLE_SHARE::primary_key``). InnoDB clusters the table by it, ``information_schema.COLUMNS.COLUMN_KEY`` says
``PRI`` for its columns, a table map with ``binlog_row_metadata=FULL`` names it as the primary key, and a
``binlog_row_image=MINIMAL`` before image carries its columns. So pycanal identifies such a table's rows by it too
(:attr:`TableDef.row_key <canal.schema.catalog.TableDef.row_key>`): its columns are the key of the table's
:class:`~canal.protocol.TableSchema` wherever the layout comes from -- the binlog, the schema history, a snapshot --,
the snapshot chunks by it, and the mirror merges by it.

The server's order of keys (``sort_keys``, at every CREATE and ALTER TABLE, CREATE / DROP INDEX too): unique keys
first, those the server keeps as a hash of their values (a BLOB / TEXT part without a prefix length) last of them;
among the others, those with no nullable column first, then those with no prefix part; otherwise in the order they
were made (an ALTER keeps the table's keys in their order and appends the ones it adds). :func:`placed` sorts so,
stably, by the columns after the statement. The key the server promotes is the first of that order that is UNIQUE
with every column NOT NULL and no prefix part (:func:`row_key`): a differential test holds it against
``COLUMN_KEY`` through random DDL (tests/test_schema_keys_mariadb.py). The order of the keys that cannot be promoted
is the server's but for one case measured on MariaDB 10.11 and not modeled: an ALTER that makes a column of a
prefixed key nullable leaves that key before the nullable keys without a prefix, until the next ALTER. A key without
a name is named as the server names it (:func:`key_name`): its first column, then ``_2``, ``_3`` ... while that is
taken.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from canal.schema.columns import TableColumn
from canal.sql import IndexDef

__all__ = ["TableKey", "eligible", "key_name", "placed", "row_key"]

_LENGTHS_WHOLE = frozenset({"char", "varchar", "binary", "varbinary"})  # a part this long is the whole value
_HASHED = frozenset(
    {"tinytext", "text", "mediumtext", "longtext", "tinyblob", "blob", "mediumblob", "longblob", "json"}
)


@attrs.frozen(slots=True)
class TableKey:
    """A key of a table other than its primary key: its name, its parts ``(column, prefix length or None)`` in key
    order, whether it is UNIQUE."""

    name: str
    parts: tuple[tuple[str, int | None], ...]
    unique: bool = False

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.parts)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "parts": [list(p) for p in self.parts], "unique": self.unique}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any]) -> TableKey:
        parts = tuple((str(name), None if length is None else int(length)) for name, length in doc["parts"])
        return cls(str(doc["name"]), parts, bool(doc.get("unique", False)))


def _prefixed(key: TableKey, columns: Mapping[str, TableColumn]) -> bool:
    """A part shorter than its column's values (a BLOB / TEXT column's always is)."""
    for name, length in key.parts:
        column = columns.get(name.lower())
        if column is None or column.base in _HASHED:
            return True
        if length is not None and not (column.base in _LENGTHS_WHOLE and column.params and length >= column.params[0]):
            return True
    return False


def _hashed(key: TableKey, columns: Mapping[str, TableColumn]) -> bool:
    """A UNIQUE key the server keeps as a hash of its values (a BLOB / TEXT part without a prefix length): it sorts
    after the other unique keys."""
    if not key.unique:
        return False
    for name, length in key.parts:
        column = columns.get(name.lower())
        if length is None and column is not None and column.base in _HASHED:
            return True
    return False


def _nullable(key: TableKey, columns: Mapping[str, TableColumn]) -> bool:
    return any(c is None or c.nullable for c in (columns.get(name.lower()) for name in key.columns))


def eligible(key: TableKey, columns: Sequence[TableColumn]) -> bool:
    """Whether the server promotes ``key`` to a table's primary key when it comes first: UNIQUE, every column NOT
    NULL, no prefix part."""
    by_name = {c.name.lower(): c for c in columns}
    return key.unique and not _nullable(key, by_name) and not _prefixed(key, by_name)


def placed(keys: Iterable[TableKey], columns: Sequence[TableColumn]) -> tuple[TableKey, ...]:
    """``keys`` (in the order they were made) in the server's order of keys, by ``columns`` (module docstring)."""
    by_name = {c.name.lower(): c for c in columns}

    def rank(k: TableKey) -> tuple[bool, bool, bool, bool]:
        return (not k.unique, _hashed(k, by_name), _nullable(k, by_name), _prefixed(k, by_name))

    return tuple(sorted(keys, key=rank))


def row_key(primary: Sequence[str], keys: Sequence[TableKey], columns: Sequence[TableColumn]) -> tuple[str, ...]:
    """The columns a table's rows are identified by: its primary key, else the first key (in the server's order,
    :func:`placed`) the server promotes to one; () when it has neither."""
    if primary:
        return tuple(primary)
    return next((k.columns for k in keys if eligible(k, columns)), ())


def key_name(index: IndexDef | None, first_column: str, taken: Iterable[str]) -> str:
    """The name the server gives a key: its own (or its CONSTRAINT's), else its first column's, ``_2``, ``_3`` ...
    while another key of the table (or PRIMARY) has it."""
    if index is not None and (index.name or index.constraint):
        return str(index.name or index.constraint)
    used = {name.lower() for name in taken} | {"primary"}
    if first_column.lower() not in used:
        return first_column
    n = 2
    while f"{first_column}_{n}".lower() in used:
        n += 1
    return f"{first_column}_{n}"


def key_of(index: IndexDef, taken: Iterable[str]) -> TableKey | None:
    """The :class:`TableKey` an index definition makes (None: a primary key, or one of expressions only)."""
    if index.kind == "PRIMARY":
        return None
    parts = tuple((c.name, c.length) for c in index.columns if c.name is not None)
    if not parts:
        return None
    # a key with an expression among its parts (MySQL's functional key parts) identifies no row by its columns
    unique = index.kind == "UNIQUE" and len(parts) == len(index.columns)
    return TableKey(key_name(index, parts[0][0], taken), parts, unique)
