"""The fake server's catalog: the table layouts of a :class:`~canal.schema.SchemaCatalog` (the DDL code the schema
history uses) plus what only a server has -- table ids and rows.

Each change is computed in full before anything is replaced, so a statement that fails changes nothing.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import attrs

from canal.errors import SchemaError
from canal.names import split_qualified
from canal.protocol import TableSchema
from canal.schema import SchemaCatalog, TableChange, TableColumn, TableDef
from canal.sql import (
    CreateDatabase,
    DropDatabase,
    DropTable,
    OtherStatement,
    SqlError,
    Statement,
    read_table_name,
)
from canal.sql.objects import read_object
from canal.sql.types import INTEGER_TYPES, TEXT_TYPES
from canal.testing.fake.columns import coerce, implicit_default
from canal.testing.fake.errors import FakeMysqlError

__all__ = ["Catalog", "Table", "hashable"]


def hashable(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """A row key usable in a dict (JSON documents as their sorted text)."""
    return tuple(json.dumps(v, sort_keys=True, default=str) if isinstance(v, dict | list) else v for v in values)


@attrs.define(eq=False)
class Table:
    """A table as the fake server holds it: its layout, its current table id, the schema its rows carry, its rows."""

    definition: TableDef
    table_id: int
    schema: TableSchema
    data: dict[tuple[Any, ...], tuple[Any, ...]] = attrs.Factory(dict)

    @property
    def db(self) -> str:
        return self.definition.db

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def columns(self) -> tuple[TableColumn, ...]:
        return self.definition.columns

    @property
    def charset(self) -> str:
        return self.definition.charset

    @property
    def full_name(self) -> str:
        return self.definition.full_name

    def key_of(self, image: tuple[Any, ...]) -> tuple[Any, ...]:
        idx = self.schema.key_indexes
        return hashable(tuple(image[i] for i in idx) if idx else image)


class Catalog:
    """Databases, tables and rows; not thread-safe by itself (the server holds its lock around every call)."""

    def __init__(self, *, mariadb: bool, database: str, charset: str) -> None:
        self.mariadb = mariadb
        self.schemas = SchemaCatalog(charset=charset, database=database, mariadb=mariadb)
        self.tables: dict[str, Table] = {}
        self.next_table_id = 108

    @property
    def database(self) -> str:
        """The session's current database (USE)."""
        return self.schemas.database

    @property
    def databases(self) -> set[str]:
        return set(self.schemas.databases)

    def table(self, name: str) -> Table:
        """A table by ``db.table`` or ``table`` (quoted or not) in the current database."""
        try:
            ref = read_table_name(name)
            full = self.schemas.full_name(ref.schema, ref.name)
        except (SqlError, SchemaError) as exc:
            raise FakeMysqlError(f"not a table name: {name!r} ({exc})") from None
        table = self.tables.get(full)
        if table is None:
            raise FakeMysqlError(f"Table {full!r} doesn't exist (tables: {', '.join(sorted(self.tables)) or 'none'})")
        return table

    def use(self, database: str) -> None:
        self.schemas.use(database)

    def show_create(self, t: Table) -> str:
        return t.definition.show_create(mariadb=self.mariadb)

    def _new_table(self, definition: TableDef, data: dict[tuple[Any, ...], tuple[Any, ...]] | None = None) -> Table:
        # a server hands out a new table id whenever a table's definition is (re)loaded: after each DDL on it
        self.next_table_id += 1
        return Table(definition, self.next_table_id, definition.table_schema(mariadb=self.mariadb), data or {})

    # -- DDL ----------------------------------------------------------------------------------------------------------

    def apply(self, stmt: Statement, session: str, text: str) -> tuple[str, str]:
        """Change the schemas for one statement; returns the schema and SQL to log. Raises before changing anything."""
        schemas = self.schemas.copy()
        try:
            changes = schemas.apply(stmt, session or None)
            # a view, trigger or routine: kept as the schema history keeps them (what a statement reaches)
            made = read_object(text) if isinstance(stmt, OtherStatement) else None
            if made is not None:
                schemas.apply_object(made, session or None)
        except SchemaError as exc:
            raise FakeMysqlError(str(exc)) from None
        tables = dict(self.tables)
        next_id = self.next_table_id
        try:
            for change in changes:
                self._follow(change, schemas, tables)
        except FakeMysqlError:
            self.next_table_id = next_id
            raise
        self.schemas, self.tables = schemas, tables
        if isinstance(stmt, CreateDatabase | DropDatabase):
            return stmt.name, text
        if isinstance(stmt, DropTable) and not stmt.temporary:
            refs = ",".join(str(name) for name in stmt.tables)
            return session, f"DROP TABLE {'IF EXISTS ' if stmt.if_exists else ''}{refs} /* generated by server */"
        return session, text

    def _follow(self, change: TableChange, schemas: SchemaCatalog, tables: dict[str, Table]) -> None:
        """Carry the tables' ids and rows over one change of their layouts."""
        old = tables.pop(change.old, None) if change.old is not None else None
        if change.new is None:
            return
        if change.kind == "rename" and old is not None:
            # one pair of a RENAME TABLE: the name may be a passing one (a TO tmp, b TO a, tmp TO b), so the table
            # is the old one renamed, not whatever the statement's end leaves under that name
            db, name = split_qualified(change.new)
            tables[change.new] = self._new_table(attrs.evolve(old.definition, db=db, name=name), old.data)
            return
        definition = schemas.tables[change.new]
        if change.kind == "create" or old is None or change.kind == "truncate":
            tables[change.new] = self._new_table(definition)
        else:
            new_table = self._new_table(definition)
            new_table.data = self._migrate(old, new_table, change)
            tables[change.new] = new_table

    def _migrate(self, old: Table, new: Table, change: TableChange) -> dict[tuple[Any, ...], tuple[Any, ...]]:
        """The rows of ``old`` in the layout of ``new`` (after an ALTER): new columns get their implicit default."""
        old_index = {c.name: i for i, c in enumerate(old.columns)}
        data: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        for image in old.data.values():
            values = []
            for c in new.columns:
                src = change.origin.get(c.name)
                if src is None or src not in old_index:
                    values.append(implicit_default(c))
                    continue
                values.append(self._convert(c, image[old_index[src]], new))
            new_image = tuple(values)
            k = new.key_of(new_image)
            if k in data:
                raise FakeMysqlError(f"Duplicate entry {k!r} for key 'PRIMARY' while altering {old.full_name}")
            data[k] = new_image
        return data

    def _convert(self, col: TableColumn, value: Any, t: Table) -> Any:
        if value is None:
            return implicit_default(col)
        try:
            return coerce(col, value, t.full_name, t.charset, self.mariadb)
        except FakeMysqlError:
            if col.base in TEXT_TYPES and not isinstance(value, bytes):
                return coerce(col, str(value), t.full_name, t.charset, self.mariadb)
            if col.base in INTEGER_TYPES and isinstance(value, str | Decimal | float):
                return coerce(col, int(value), t.full_name, t.charset, self.mariadb)
            raise
