"""The fake server's catalog: databases, tables and their rows, changed by DDL statements the SQL reader read.

Each change is computed in full before anything is replaced, so a statement that fails changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import attrs

from canal.protocol import TableSchema
from canal.sql import (
    AddColumn,
    AddKey,
    AlterTable,
    ChangeColumn,
    ConvertCharset,
    CreateDatabase,
    CreateTable,
    DropColumn,
    DropDatabase,
    DropKey,
    DropTable,
    IndexDef,
    RenameColumn,
    RenameTable,
    RenameTo,
    SetTableOptions,
    SqlError,
    Statement,
    TableName,
    TruncateTable,
    quote_name,
    read_table_name,
)
from canal.sql.types import INTEGER_TYPES, TEXT_TYPES
from canal.testing.fake.columns import (
    ColDef,
    coerce,
    column_meta,
    column_sql,
    effective_charset,
    from_definition,
    implicit_default,
)
from canal.testing.fake.errors import FakeMysqlError

__all__ = ["Catalog", "Table", "hashable"]

_DEFAULT_CHARSET = "utf8mb4"


def hashable(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """A row key usable in a dict (JSON documents as their sorted text)."""
    return tuple(json.dumps(v, sort_keys=True, default=str) if isinstance(v, dict | list) else v for v in values)


@attrs.define(eq=False)
class Table:
    db: str
    name: str
    columns: list[ColDef]
    primary: list[str]
    charset: str
    table_id: int
    schema: TableSchema
    data: dict[tuple[Any, ...], tuple[Any, ...]] = attrs.Factory(dict)

    @property
    def full_name(self) -> str:
        return f"{self.db}.{self.name}"

    def key_of(self, image: tuple[Any, ...]) -> tuple[Any, ...]:
        idx = self.schema.key_indexes
        return hashable(tuple(image[i] for i in idx) if idx else image)


def _charset_of_collation(collation: str | None) -> str | None:
    if collation is None:
        return None
    return "binary" if collation == "binary" else collation.split("_", 1)[0]


class Catalog:
    """Databases and tables; not thread-safe by itself (the server holds its lock around every call)."""

    def __init__(self, *, mariadb: bool, database: str, charset: str = _DEFAULT_CHARSET) -> None:
        self.mariadb = mariadb
        self.charset = charset  # the server's character_set_server: a database's default charset
        self.database = database  # the session's current database (USE)
        self.databases: set[str] = {database} if database else set()
        self.database_charsets: dict[str, str] = {}  # declared by CREATE DATABASE ... CHARACTER SET / COLLATE
        self.tables: dict[str, Table] = {}
        self.next_table_id = 108

    # -- names --------------------------------------------------------------------------------------------------------

    def full_name(self, db: str | None, name: str) -> str:
        db = db if db is not None else self.database
        if not db:
            raise FakeMysqlError(f"No database selected for table {name!r}: qualify it (db.table) or USE a database")
        return f"{db}.{name}"

    def table(self, name: str) -> Table:
        """A table by ``db.table`` or ``table`` (quoted or not) in the current database."""
        try:
            ref = read_table_name(name)
        except SqlError as exc:
            raise FakeMysqlError(f"not a table name: {name!r} ({exc})") from None
        full = self.full_name(ref.schema, ref.name)
        table = self.tables.get(full)
        if table is None:
            raise FakeMysqlError(f"Table {full!r} doesn't exist (tables: {', '.join(sorted(self.tables)) or 'none'})")
        return table

    def use(self, database: str) -> None:
        self.database = database
        self.databases.add(database)

    # -- tables -------------------------------------------------------------------------------------------------------

    def make_table(
        self, db: str, name: str, columns: list[ColDef], primary: list[str], charset: str
    ) -> tuple[TableSchema, int]:
        names = [c.name for c in columns]
        if len(set(names)) != len(names):
            raise FakeMysqlError(f"Duplicate column name in {db}.{name}: {names}")
        for p in primary:
            if p not in names:
                raise FakeMysqlError(f"Key column {p!r} doesn't exist in table {db}.{name}")
        metas = tuple(
            column_meta(c, is_key=c.name in primary, table_charset=charset, mariadb=self.mariadb) for c in columns
        )
        self.next_table_id += 1
        return TableSchema(db, name, metas), self.next_table_id

    def show_create(self, t: Table) -> str:
        lines = [column_sql(c, t.charset, self.mariadb) for c in t.columns]
        if t.primary:
            lines.append("PRIMARY KEY (" + ",".join(quote_name(p) for p in t.primary) + ")")
        body = ",\n  ".join(lines)
        return f"CREATE TABLE {quote_name(t.name)} (\n  {body}\n) ENGINE=InnoDB DEFAULT CHARSET={t.charset}"

    @staticmethod
    def _materialize_charset(col: ColDef, table_charset: str) -> ColDef:
        if col.charset is None and effective_charset(col, table_charset) is not None and col.base != "json":
            return attrs.evolve(col, charset=table_charset)
        return col

    # -- DDL ----------------------------------------------------------------------------------------------------------

    def apply(self, stmt: Statement, session: str, text: str) -> tuple[str, str]:
        """Change the schemas for one statement; returns the schema and SQL to log. Raises before changing anything."""
        sess: str | None = session or None

        def full(name: TableName) -> str:
            return self.full_name(name.schema if name.schema is not None else sess, name.name)

        if isinstance(stmt, CreateTable):
            self._create_table(stmt, full)
        elif isinstance(stmt, CreateDatabase):
            self.databases.add(stmt.name)
            declared = stmt.charset or _charset_of_collation(stmt.collation)
            if declared is not None:
                self.database_charsets[stmt.name] = declared
            return stmt.name, text
        elif isinstance(stmt, AlterTable):
            self._alter_table(stmt, full, text)
        elif isinstance(stmt, DropTable):
            return session, self._drop_tables(stmt, full)
        elif isinstance(stmt, DropDatabase):
            for key in [k for k, t in self.tables.items() if t.db == stmt.name]:
                del self.tables[key]
            self.databases.discard(stmt.name)
            self.database_charsets.pop(stmt.name, None)
            return stmt.name, text
        elif isinstance(stmt, TruncateTable):
            t = self.tables.get(full(stmt.table))
            if t is None:
                raise FakeMysqlError(f"Table {full(stmt.table)!r} doesn't exist")
            t.data.clear()
            self.next_table_id += 1
            t.table_id = self.next_table_id
        elif isinstance(stmt, RenameTable):
            self._rename_tables(stmt, full)
        # any other statement (views, routines, grants, indexes ...) is logged and changes no table layout
        return session, text

    def _create_table(self, stmt: CreateTable, full: Callable[[TableName], str]) -> None:
        key = full(stmt.table)
        db_name = key.split(".", 1)[0]
        name = stmt.table.name
        if key in self.tables and not stmt.or_replace:
            if stmt.if_not_exists:
                return
            raise FakeMysqlError(f"Table {key!r} already exists")
        if stmt.like is not None:
            src = self.tables.get(full(stmt.like))
            if src is None:
                raise FakeMysqlError(f"Table {full(stmt.like)!r} doesn't exist")
            schema, tid = self.make_table(db_name, name, list(src.columns), list(src.primary), src.charset)
            self.tables[key] = Table(db_name, name, list(src.columns), list(src.primary), src.charset, tid, schema)
            return
        if stmt.as_select is not None:
            raise FakeMysqlError("CREATE TABLE ... SELECT is not modeled by FakeMysql")
        # a table's default charset is its database's, which is the server's unless CREATE DATABASE declared one
        default = self.database_charsets.get(db_name, self.charset)
        charset = stmt.charset or _charset_of_collation(stmt.collation) or default
        columns = [self._materialize_charset(from_definition(c), charset) for c in stmt.columns]
        declared = [index for index in stmt.indexes if index.kind == "PRIMARY"]
        if len(declared) > 1:
            raise FakeMysqlError(f"Multiple primary key defined in {key}")
        primary = list(declared[0].column_names) if declared else []
        inline = [c.name for c in columns if c.primary]
        if (inline and primary and inline != primary) or len(inline) > 1:
            raise FakeMysqlError(f"Multiple primary key defined in {key}")
        primary = primary or inline
        columns = [attrs.evolve(c, nullable=False) if c.name in primary else c for c in columns]
        if not columns:
            raise FakeMysqlError(f"A table must have at least 1 column: {key}")
        schema, tid = self.make_table(db_name, name, columns, primary, charset)
        self.tables[key] = Table(db_name, name, columns, primary, charset, tid, schema)

    def _alter_table(self, stmt: AlterTable, full: Callable[[TableName], str], sql: str) -> None:
        key = full(stmt.table)
        t = self.tables.get(key)
        if t is None:
            raise FakeMysqlError(f"Table {key!r} doesn't exist")
        cols = list(t.columns)
        origin: dict[str, str | None] = {c.name: c.name for c in cols}  # new column -> the old column it was
        primary = list(t.primary)
        charset = t.charset
        new_db, new_name = t.db, t.name

        def find(col_name: str) -> int | None:
            for i, c in enumerate(cols):
                if c.name.lower() == col_name.lower():
                    return i
            return None

        def index_of(col_name: str) -> int:
            i = find(col_name)
            if i is None:
                raise FakeMysqlError(f"Unknown column {col_name!r} in {key} ({sql!r})")
            return i

        def place(col: ColDef, first: bool, after: str | None, replace: int | None) -> None:
            if replace is not None:
                cols.pop(replace)
            if first:
                cols.insert(0, col)
            elif after is not None:
                cols.insert(index_of(after) + 1, col)
            elif replace is not None:
                cols.insert(replace, col)
            else:
                cols.append(col)

        for action in stmt.actions:
            if isinstance(action, AddColumn):
                d = self._materialize_charset(from_definition(action.column), charset)
                if find(d.name) is not None:
                    if action.if_not_exists:
                        continue
                    raise FakeMysqlError(f"Duplicate column name {d.name!r} in {key}")
                origin[d.name] = None
                if d.primary:
                    primary = [d.name]
                place(d, action.first, action.after, None)
            elif isinstance(action, AddKey) and isinstance(action.key, IndexDef) and action.key.kind == "PRIMARY":
                if primary:
                    raise FakeMysqlError(f"Multiple primary key defined in {key}")
                primary = list(action.key.column_names)
            elif isinstance(action, DropKey):
                if action.kind == "PRIMARY KEY":
                    primary = []
            elif isinstance(action, DropColumn):
                i = find(action.name)
                if i is None:
                    if action.if_exists:
                        continue
                    index_of(action.name)
                    continue
                dropped = cols.pop(i)
                origin.pop(dropped.name, None)
                primary = [p for p in primary if p != dropped.name]
            elif isinstance(action, ChangeColumn):
                old = action.old_name
                if action.if_exists and find(old) is None:
                    continue
                d = self._materialize_charset(from_definition(action.column), charset)
                i = index_of(old)
                previous = cols[i]
                origin[d.name] = origin.pop(previous.name, None)
                primary = [d.name if p == previous.name else p for p in primary]
                if d.primary:
                    primary = [d.name]
                place(d, action.first, action.after, i)
            elif isinstance(action, RenameColumn):
                if action.if_exists and find(action.old_name) is None:
                    continue
                i = index_of(action.old_name)
                prev = cols[i]
                cols[i] = prev.renamed(action.new_name)
                origin[action.new_name] = origin.pop(prev.name, None)
                primary = [action.new_name if p == prev.name else p for p in primary]
            elif isinstance(action, RenameTo):
                new_db = action.table.schema if action.table.schema is not None else t.db
                new_name = action.table.name
            elif isinstance(action, ConvertCharset):
                charset = action.charset
                cols = [attrs.evolve(c, charset=charset) if c.charset is not None else c for c in cols]
            elif isinstance(action, SetTableOptions):
                for option in action.options:
                    if option.name == "CHARSET":
                        charset = option.value.lower()
            # ALTER COLUMN ... DEFAULT, indexes, checks, ENGINE=, ALGORITHM=, LOCK=, FORCE, ...: the layout stays
        new_key = f"{new_db}.{new_name}"
        if new_key != key and new_key in self.tables:
            raise FakeMysqlError(f"Table {new_key!r} already exists")
        primary_cols = set(primary)
        cols = [attrs.evolve(c, nullable=False) if c.name in primary_cols else c for c in cols]
        schema, tid = self.make_table(new_db, new_name, cols, primary, charset)
        new_table = Table(new_db, new_name, cols, primary, charset, tid, schema)
        old_index = {c.name: i for i, c in enumerate(t.columns)}
        data: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        for image in t.data.values():
            values = []
            for c in cols:
                src = origin.get(c.name)
                if src is None or src not in old_index:
                    values.append(implicit_default(c))
                    continue
                values.append(self._convert(c, image[old_index[src]], new_table))
            new_image = tuple(values)
            k = new_table.key_of(new_image)
            if k in data:
                raise FakeMysqlError(f"Duplicate entry {k!r} for key 'PRIMARY' while altering {key}")
            data[k] = new_image
        new_table.data = data
        del self.tables[key]
        self.tables[new_key] = new_table

    def _convert(self, col: ColDef, value: Any, t: Table) -> Any:
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

    def _drop_tables(self, stmt: DropTable, full: Callable[[TableName], str]) -> str:
        keys = [full(name) for name in stmt.tables]
        missing = [k for k in keys if k not in self.tables]
        if missing and not stmt.if_exists:
            raise FakeMysqlError(f"Unknown table {', '.join(missing)}")
        for k in keys:
            self.tables.pop(k, None)
        refs = ",".join(str(name) for name in stmt.tables)
        return f"DROP TABLE {'IF EXISTS ' if stmt.if_exists else ''}{refs} /* generated by server */"

    def _rename_tables(self, stmt: RenameTable, full: Callable[[TableName], str]) -> None:
        tables = dict(self.tables)
        for old, new in stmt.pairs:
            src, dst = full(old), full(new)
            t = tables.pop(src, None)
            if t is None:
                raise FakeMysqlError(f"Table {src!r} doesn't exist")
            if dst in tables:
                raise FakeMysqlError(f"Table {dst!r} already exists")
            ddb = dst.split(".", 1)[0]
            schema, tid = self.make_table(ddb, new.name, t.columns, t.primary, t.charset)
            tables[dst] = Table(ddb, new.name, t.columns, t.primary, t.charset, tid, schema, t.data)
        self.tables = tables
