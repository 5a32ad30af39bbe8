"""A schema catalog: databases and their tables' layouts, changed by the DDL statements the SQL reader reads.

The one place pycanal applies DDL to table layouts: the schema history follows the binlog with it, and the fake
server keeps its tables with it, so a consumer's unit tests see schema changes exactly as production does.

:meth:`SchemaCatalog.apply` computes a statement's whole effect before it replaces anything: a statement that does
not apply (an unknown table or column, a duplicate name, a type that is not MySQL's) raises
:class:`~canal.errors.SchemaError` and changes nothing. It returns what changed (:class:`TableChange`), so a holder of
rows (the fake) can carry them over: for an ALTER, which old column each new column was.

What it models: CREATE TABLE (columns, types, UNSIGNED/ZEROFILL, NOT NULL, PRIMARY KEY inline or as a constraint,
CHARACTER SET/COLLATE on columns, tables and databases, ENUM/SET labels), CREATE [OR REPLACE] TABLE ... LIKE, ALTER
TABLE ADD/DROP/MODIFY/CHANGE/RENAME COLUMN (FIRST/AFTER, IF [NOT] EXISTS), ADD/DROP PRIMARY KEY, RENAME TO, CONVERT TO
CHARACTER SET, DEFAULT CHARSET, DROP INDEX / CONSTRAINT `PRIMARY`, DROP TABLE, RENAME TABLE (several pairs, applied
in order), TRUNCATE, CREATE/ALTER/DROP DATABASE, CREATE/DROP SEQUENCE (a MariaDB sequence is a table of a fixed
layout), and MariaDB's system versioning: ``WITH SYSTEM VERSIONING`` and ``ALTER TABLE ... ADD SYSTEM VERSIONING``
give the table its period columns -- ``row_start`` and ``row_end`` (``TIMESTAMP(6)``), invisible, after the others,
unless columns are declared ``AS ROW START`` / ``AS ROW END`` -- and append the ``row_end`` column to its primary
key, as the server does (the binlog logs every version of a row: the current one with ``row_end`` at TIMESTAMP's
maximum); columns added later go before the implicit ones, a primary key added later ends with ``row_end`` too;
``DROP SYSTEM VERSIONING`` drops them again.
The actions of one ALTER name columns of the table as it was before the statement, as the server resolves them
(``CHANGE a b ..., CHANGE b a ...`` swaps two columns). A layout statement the SQL reader could not read (or an ALTER
action it could not) is a SchemaError, never a layout left as it was. The other keys (ADD / DROP / RENAME INDEX,
CREATE UNIQUE INDEX, DROP INDEX, a column's inline UNIQUE) are kept in the server's order of keys, for the key a
table without a primary key is identified by (:mod:`canal.schema.keys`). Defaults, checks and table options do not
change a layout and are not kept. CREATE TABLE
... SELECT and temporary tables are not modeled: the caller decides (the history ignores temporary tables and takes
a CREATE ... SELECT's layout from the server).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Final, Literal

import attrs

from canal.errors import SchemaError
from canal.names import qualified, split_qualified
from canal.protocol import TableSchema
from canal.schema.columns import TableColumn, column_meta, column_sql, effective_charset, resolve_column
from canal.schema.foreign_keys import ForeignKey, generated_name, normal_action
from canal.schema.keys import TableKey, key_name, key_of, placed, row_key
from canal.schema.objects import ObjectCatalog
from canal.sql import (
    AddColumn,
    AddKey,
    AlterDatabase,
    AlterTable,
    ChangeColumn,
    ConvertCharset,
    CreateDatabase,
    CreateIndex,
    CreateTable,
    DropColumn,
    DropDatabase,
    DropIndexStatement,
    DropKey,
    DropTable,
    IndexDef,
    OtherAction,
    RenameColumn,
    RenameIndex,
    RenameTable,
    RenameTo,
    SetTableOptions,
    Statement,
    TableName,
    TruncateTable,
    Unreadable,
    quote_name,
)
from canal.sql.charsets import charset_named
from canal.sql.objects import ObjectStatement
from canal.sql.statements import ForeignKeyDef, PartitionAction

__all__ = ["DEFAULT_CHARSET", "LAYOUT_VERBS", "SchemaCatalog", "TableChange", "TableDef"]

LAYOUT_VERBS: Final = frozenset(
    {
        "CREATE TABLE",
        "ALTER TABLE",
        "DROP TABLE",
        "RENAME TABLE",
        "TRUNCATE TABLE",
        "CREATE DATABASE",
        "DROP DATABASE",
        "CREATE SEQUENCE",
        "DROP SEQUENCE",
    }
)
"""The statements that can change a table's layout: one of them the reader could not read is a SchemaError, never
a layout left as it was (CREATE/DROP INDEX, views, routines, grants ... change no layout)."""

DEFAULT_CHARSET = "utf8mb4"
"""MySQL 8's ``character_set_server`` (MariaDB before 11.6 defaults to latin1)."""


_VERSIONING: Final = "WITH SYSTEM VERSIONING"
_PERIOD_COLUMNS: Final = (("row_start", "START"), ("row_end", "END"))  # what WITH SYSTEM VERSIONING adds by itself


def versioned(columns: list[TableColumn], primary: list[str]) -> tuple[list[TableColumn], list[str]]:
    """A table's columns and primary key once it is system-versioned: its period columns (declared ``AS ROW START``
    / ``AS ROW END``, else ``row_start`` and ``row_end`` appended) and the period's end in its primary key."""
    if not any(c.period is not None for c in columns):
        implicit = (
            TableColumn(n, "timestamp", (6,), nullable=False, period=p, hidden=True) for n, p in _PERIOD_COLUMNS
        )
        columns = [*columns, *implicit]
    end = next((c.name for c in columns if c.period == "END"), None)
    if primary and end is not None and end.lower() not in {p.lower() for p in primary}:
        primary = [*primary, end]
    return columns, primary


def unversioned(columns: list[TableColumn], primary: list[str]) -> tuple[list[TableColumn], list[str]]:
    """A table's columns and primary key after DROP SYSTEM VERSIONING: without its period columns."""
    period = {c.name.lower() for c in columns if c.period is not None}
    return [c for c in columns if c.name.lower() not in period], [p for p in primary if p.lower() not in period]


def drops_primary(action: DropKey) -> bool:
    """DROP PRIMARY KEY, and DROP INDEX / KEY / CONSTRAINT `PRIMARY`: the primary key's index is named PRIMARY."""
    if action.kind == "PRIMARY KEY":
        return True
    return action.kind in ("INDEX", "CONSTRAINT") and (action.name or "").upper() == "PRIMARY"


def _charset_of_collation(collation: str | None) -> str | None:
    if collation is None:
        return None
    return "binary" if collation == "binary" else collation.split("_", 1)[0]


# the TEXT types by the bytes they hold; CONVERT TO CHARACTER SET picks the smallest that keeps a column's characters
_TEXT_BYTES: Final = (("tinytext", 255), ("text", 65535), ("mediumtext", 16777215), ("longtext", 4294967295))


def _converted(col: TableColumn, charset: str) -> TableColumn:
    """``col`` after CONVERT TO CHARACTER SET ``charset``: a TEXT column whose characters no longer fit in its type
    (more bytes per character) becomes the smallest TEXT type that holds them, as the server does."""
    old = charset_named(col.charset or charset).maxlen
    new = charset_named(charset).maxlen
    sizes = dict(_TEXT_BYTES)
    if col.base in sizes and new > old:
        needed = sizes[col.base] // old * new
        base = next((name for name, size in _TEXT_BYTES if size >= needed), "longtext")
        return attrs.evolve(col, base=base, params=(), charset=charset)
    return attrs.evolve(col, charset=charset)


@attrs.frozen(slots=True)
class TableDef:
    """One table's layout: its columns in order, its primary key (column names), its default charset, its foreign
    keys (which change no layout, but tell what the server changes unlogged: :mod:`canal.schema.foreign_keys`) and
    its other keys in the server's order (:mod:`canal.schema.keys`: a table without a primary key is identified by
    its first UNIQUE NOT NULL one, :attr:`row_key`)."""

    db: str
    name: str
    columns: tuple[TableColumn, ...]
    primary: tuple[str, ...]
    charset: str
    foreign_keys: tuple[ForeignKey, ...] = ()
    keys: tuple[TableKey, ...] = ()

    @property
    def full_name(self) -> str:
        """The catalog's key of the table (:func:`canal.names.qualified`)."""
        return qualified(self.db, self.name)

    @property
    def row_key(self) -> tuple[str, ...]:
        """The columns the table's rows are identified by: its primary key, else the UNIQUE NOT NULL key the server
        promotes to one (:func:`canal.schema.keys.row_key`); () for a table with neither."""
        return row_key(self.primary, self.keys, self.columns)

    def table_schema(self, *, mariadb: bool) -> TableSchema:
        """The :class:`~canal.protocol.TableSchema` a decoder reports for rows of this layout: its key is the
        :attr:`row_key`, as a table map with FULL metadata names it."""
        keyed = {k.lower() for k in self.row_key}
        metas = tuple(
            column_meta(c, is_key=c.name.lower() in keyed, table_charset=self.charset, mariadb=mariadb)
            for c in self.columns
        )
        return TableSchema(self.db, self.name, metas)

    def show_create(self, *, mariadb: bool, qualified: bool = False) -> str:
        """The table as ``SHOW CREATE TABLE`` prints it (columns, primary key, unique keys, foreign keys, default
        charset); ``qualified`` names it with its database."""
        lines = [column_sql(c, self.charset, mariadb) for c in self.columns]
        if self.primary:
            lines.append("PRIMARY KEY (" + ",".join(quote_name(p) for p in self.primary) + ")")
        for unique in (k for k in self.keys if k.unique):
            parts = ",".join(quote_name(c) + ("" if n is None else f"({n})") for c, n in unique.parts)
            lines.append(f"UNIQUE KEY {quote_name(unique.name)} ({parts})")
        for key in self.foreign_keys:
            ref = (
                quote_name(key.ref_table)
                if key.ref_db == self.db
                else f"{quote_name(key.ref_db)}.{quote_name(key.ref_table)}"
            )
            lines.append(
                f"CONSTRAINT {quote_name(key.name)} FOREIGN KEY ("
                + ", ".join(quote_name(c) for c in key.columns)
                + f") REFERENCES {ref} ("
                + ", ".join(quote_name(c) for c in key.ref_columns)
                + ")"
                + ("" if key.on_delete == "RESTRICT" else f" ON DELETE {key.on_delete}")
                + ("" if key.on_update == "RESTRICT" else f" ON UPDATE {key.on_update}")
            )
        period = {c.period: c.name for c in self.columns if c.period is not None}
        if period:
            lines.append(f"PERIOD FOR SYSTEM_TIME ({quote_name(period['START'])}, {quote_name(period['END'])})")
        body = ",\n  ".join(lines)
        name = f"{quote_name(self.db)}.{quote_name(self.name)}" if qualified else quote_name(self.name)
        versioning = f" {_VERSIONING}" if period else ""
        return f"CREATE TABLE {name} (\n  {body}\n) ENGINE=InnoDB DEFAULT CHARSET={self.charset}{versioning}"


@attrs.frozen(slots=True)
class TableChange:
    """What one statement did to one table.

    ``kind`` is ``create``, ``alter``, ``drop``, ``rename`` or ``truncate``; ``old`` / ``new`` are the ``db.table``
    names before and after (None where there is none). For ``alter``, ``origin`` maps each column of the new layout to
    the column it was before (None for a new column).
    """

    kind: Literal["create", "alter", "drop", "rename", "truncate"]
    old: str | None
    new: str | None
    origin: Mapping[str, str | None] = attrs.field(factory=dict)


class SchemaCatalog:
    """Databases and table layouts; not thread-safe by itself.

    ``mariadb`` says whose DDL semantics apply where MySQL and MariaDB differ (MariaDB's JSON is a LONGTEXT).
    ``charset`` is the server's default charset (``character_set_server``): a database's default unless CREATE
    DATABASE declares one, and a table's unless CREATE TABLE or its database does. ``database`` is the session's
    current database (USE), for unqualified names.
    """

    def __init__(self, *, charset: str = DEFAULT_CHARSET, database: str = "", mariadb: bool = False) -> None:
        self.charset = charset
        self.mariadb = mariadb
        self.database = database
        self.databases: dict[str, str | None] = {database: None} if database else {}  # name -> declared charset
        self.tables: dict[str, TableDef] = {}  # "db.table" -> layout
        self.objects = ObjectCatalog()  # views, triggers, routines (canal.schema.objects)

    # -- reading ------------------------------------------------------------------------------------------------------

    def full_name(self, db: str | None, name: str) -> str:
        db = db if db is not None else self.database
        if not db:
            raise SchemaError(f"No database selected for table {name!r}: qualify it (db.table) or USE a database")
        return qualified(db, name)

    def get(self, db: str, name: str) -> TableDef | None:
        """The layout of ``db.name``, or None."""
        return self.tables.get(qualified(db, name))

    def __iter__(self) -> Iterator[TableDef]:
        return iter(self.tables.values())

    def copy(self) -> SchemaCatalog:
        """An independent catalog with the same state (layouts are immutable and shared)."""
        other = SchemaCatalog(charset=self.charset, database=self.database, mariadb=self.mariadb)
        other.databases = dict(self.databases)
        other.tables = dict(self.tables)
        other.objects = self.objects.copy()
        return other

    def use(self, database: str) -> None:
        self.database = database
        self.databases.setdefault(database, None)

    # -- DDL ----------------------------------------------------------------------------------------------------------

    def apply(self, stmt: Statement, session: str | None = None) -> list[TableChange]:
        """Apply one statement read by :func:`canal.sql.read_statement` in session database ``session`` (None: the
        catalog's current database); what changed. Raises SchemaError before changing anything. Statements that change
        no layout (views, routines, grants, indexes, ...) change nothing and return []."""
        sess = session if session else (self.database or None)

        def full(name: TableName) -> str:
            return self.full_name(name.schema if name.schema is not None else sess, name.name)

        if isinstance(stmt, CreateTable):
            return self._create_table(stmt, full)
        if isinstance(stmt, AlterTable):
            return self._alter_table(stmt, full)
        if isinstance(stmt, DropTable):
            return self._drop_tables(stmt, full)
        if isinstance(stmt, RenameTable):
            return self._rename_tables(stmt, full)
        if isinstance(stmt, TruncateTable):
            key = full(stmt.table)
            if key not in self.tables:
                raise SchemaError(f"Table {key!r} doesn't exist", table=key)
            return [TableChange("truncate", key, key)]
        if isinstance(stmt, DropIndexStatement):
            # DROP INDEX name ON t is ALTER TABLE t DROP INDEX name (`PRIMARY`: the primary key)
            alter = AlterTable(stmt.table, (DropKey("INDEX", stmt.name, stmt.if_exists),))
            return self._alter_table(alter, full)
        if isinstance(stmt, CreateIndex):
            # CREATE [UNIQUE] INDEX name ON t (...) is ALTER TABLE t ADD [UNIQUE] INDEX name (...); OR REPLACE drops
            # the index of that name first
            index = stmt.index
            drop = (DropKey("INDEX", index.name, True),) if stmt.or_replace and index.name else ()
            alter = AlterTable(stmt.table, (*drop, AddKey(index, stmt.if_not_exists)))
            return self._alter_table(alter, full)
        if isinstance(stmt, Unreadable) and stmt.verb in LAYOUT_VERBS:
            table = full(stmt.table) if stmt.table is not None else None
            raise SchemaError(f"cannot read this {stmt.verb} statement: {stmt.error}", table=table)
        if isinstance(stmt, CreateDatabase):
            # databases are lenient: a table may live in a database the catalog never saw created (a bootstrap
            # reads tables, and the fake lets tests skip CREATE DATABASE); the binlog holds only what succeeded
            declared = stmt.charset or _charset_of_collation(stmt.collation)
            changes = self._drop_database(stmt.name) if stmt.or_replace else []
            if stmt.or_replace or stmt.name not in self.databases:
                self.databases[stmt.name] = declared
            return changes
        if isinstance(stmt, DropDatabase):
            return self._drop_database(stmt.name)
        if isinstance(stmt, AlterDatabase):
            # the default of tables created later in it (the tables it holds keep theirs)
            name = stmt.name or sess
            declared = stmt.charset or _charset_of_collation(stmt.collation)
            if name and declared and declared != "default":
                self.databases[name] = declared
            elif name and declared == "default":
                self.databases[name] = None
            return []
        return []

    def apply_object(self, stmt: ObjectStatement, session: str | None = None) -> bool:
        """A CREATE / ALTER / DROP of a view, trigger or routine (:func:`canal.sql.objects.read_object`), run in
        ``session`` (None: the catalog's database); whether it changed the catalog's objects."""
        sess = session if session else self.database
        if not sess and any(name.schema is None for name in stmt.names):
            raise SchemaError(f"No database selected for {stmt.kind.lower()} {stmt.names[0].name!r}")
        return self.objects.apply(stmt, sess)

    def _drop_database(self, name: str) -> list[TableChange]:
        dropped = [key for key, t in self.tables.items() if t.db == name]
        for key in dropped:
            del self.tables[key]
        self.databases.pop(name, None)
        self.objects.database_dropped(name)
        return [TableChange("drop", key, None) for key in dropped]

    def _database_charset(self, db: str) -> str:
        return self.databases.get(db) or self.charset

    def _check(self, db: str, name: str, columns: tuple[TableColumn, ...], primary: tuple[str, ...]) -> None:
        names = [c.name.lower() for c in columns]
        if len(set(names)) != len(names):
            raise SchemaError(
                f"Duplicate column name in {db}.{name}: {[c.name for c in columns]}", table=f"{db}.{name}"
            )
        for p in primary:
            if p.lower() not in names:
                raise SchemaError(f"Key column {p!r} doesn't exist in table {db}.{name}", table=qualified(db, name))

    @staticmethod
    def _materialize_charset(col: TableColumn, table_charset: str) -> TableColumn:
        # a text column's charset is fixed when it is defined: a later change of the table's default does not move it
        if col.charset is None and effective_charset(col, table_charset) is not None and col.base != "json":
            return attrs.evolve(col, charset=table_charset)
        return col

    def _table(
        self,
        db: str,
        name: str,
        columns: list[TableColumn],
        primary: list[str],
        cs: str,
        others: Sequence[TableKey] = (),
    ) -> TableDef:
        keyed = {p.lower() for p in primary}
        cols = tuple(attrs.evolve(c, nullable=False) if c.name.lower() in keyed else c for c in columns)
        names = {c.name.lower(): c.name for c in cols}
        keys = tuple(names.get(p.lower(), p) for p in primary)
        self._check(db, name, cols, keys)
        # the keys' parts under the columns' own spelling, in the server's order (canal.schema.keys)
        others = [
            attrs.evolve(k, parts=tuple((names.get(c.lower(), c), n) for c, n in k.parts)) for k in others
        ]
        return TableDef(db, name, cols, keys, cs, keys=placed(others, cols))

    def _create_table(self, stmt: CreateTable, full: Callable[[TableName], str]) -> list[TableChange]:
        key = full(stmt.table)
        db_name, name = split_qualified(key)
        if stmt.temporary:
            return []  # a session's own table: never in the binlog's row events as a table of the schema
        exists = key in self.tables
        if exists and not stmt.or_replace:
            if stmt.if_not_exists:
                return []
            raise SchemaError(f"Table {key!r} already exists", table=key)
        if stmt.like is not None:
            src = self.tables.get(full(stmt.like))
            if src is None:
                raise SchemaError(f"Table {full(stmt.like)!r} doesn't exist", table=full(stmt.like))
            # LIKE copies the keys, no foreign key
            table = TableDef(db_name, name, src.columns, src.primary, src.charset, keys=src.keys)
        else:
            if stmt.as_select is not None:
                raise SchemaError(
                    f"CREATE TABLE {key} ... SELECT: its columns come from the query, which is not modeled", table=key
                )
            charset = stmt.charset or _charset_of_collation(stmt.collation) or self._database_charset(db_name)
            columns = [self._materialize_charset(resolve_column(c), charset) for c in stmt.columns]
            declared = [index for index in stmt.indexes if index.kind == "PRIMARY"]
            primary = list(declared[0].column_names) if declared else [c.name for c in columns if c.primary]
            if any(option.name == _VERSIONING for option in stmt.options):
                columns, primary = versioned(columns, primary)
            table = self._table(db_name, name, columns, primary, charset, _created_keys(stmt))
            keys: list[ForeignKey] = []
            for fk in stmt.foreign_keys:  # a column's inline REFERENCES makes no key in InnoDB
                keys.append(self._foreign_key(fk, db_name, name, [k.name for k in keys], key))
            table = attrs.evolve(table, foreign_keys=tuple(keys))
        changes = [TableChange("drop", key, None)] if exists else []
        if exists:
            self.objects.table_dropped(key)  # OR REPLACE: the table replaced goes with its triggers
        self.tables[key] = table
        return [*changes, TableChange("create", None, key)]

    def _alter_table(self, stmt: AlterTable, full: Callable[[TableName], str]) -> list[TableChange]:
        """One ALTER TABLE as the server runs it: every column an action names (CHANGE, MODIFY, RENAME COLUMN, DROP)
        is the ORIGINAL table's column of that name, so ``CHANGE a b ..., CHANGE b a ...`` swaps two columns and
        ``DROP COLUMN x, ADD COLUMN x`` replaces one. The original columns are walked in order (dropped ones left
        out, changed and renamed ones replaced in place); then, in statement order, added columns and changed
        columns with FIRST / AFTER are placed, AFTER naming a column of the table being built (its new name)."""
        key = full(stmt.table)
        t = self.tables.get(key)
        if t is None:
            if stmt.if_exists:
                return []
            raise SchemaError(f"Table {key!r} doesn't exist", table=key)
        charset = t.charset
        new_db, new_name = t.db, t.name
        convert: str | None = None
        for action in stmt.actions:
            if isinstance(action, RenameTo):
                # an unqualified new name is in the session's database, as MariaDB and MySQL resolve it (ALTER TABLE
                # db1.t RENAME TO t2 from db2 makes db2.t2); without one the server refuses the statement
                new_db, new_name = split_qualified(full(action.table))
            elif isinstance(action, ConvertCharset):
                charset = convert = action.charset
            elif isinstance(action, SetTableOptions):
                for option in action.options:
                    if option.name == "CHARSET":
                        charset = option.value.lower()

        other = {" ".join(a.text.upper().split()) for a in stmt.actions if isinstance(a, OtherAction)}
        unread = [a for a in stmt.actions if isinstance(a, OtherAction) and a.error is not None]
        if unread:  # an action not read may change any column: never a layout that silently misses it
            raise SchemaError(f"cannot read the ALTER TABLE action {unread[0].text!r}: {unread[0].error}", table=key)
        original = {c.name.lower(): c for c in t.columns}
        dropped: set[str] = set()
        changed: dict[str, ChangeColumn | RenameColumn] = {}  # original column (lower-case) -> its one change
        for action in stmt.actions:
            if isinstance(action, DropColumn | ChangeColumn | RenameColumn):
                name = action.name if isinstance(action, DropColumn) else action.old_name
                k = name.lower()
                if k not in original:
                    if action.if_exists:
                        continue
                    raise SchemaError(f"Unknown column {name!r} in {key}", table=key)
                if k in dropped or k in changed:
                    raise SchemaError(f"Column {name!r} of {key} is changed or dropped twice in one ALTER", table=key)
                if isinstance(action, DropColumn):
                    dropped.add(k)
                else:
                    changed[k] = action

        cols: list[TableColumn] = []
        origin: dict[str, str | None] = {}  # new column -> the old column it was
        placed_later: list[tuple[ChangeColumn, TableColumn]] = []
        changed_primary: list[list[str]] = []  # CHANGE / MODIFY ... PRIMARY KEY
        for old in t.columns:
            k = old.name.lower()
            if k in dropped:
                continue
            change = changed.get(k)
            if change is None:
                col = old
            elif isinstance(change, RenameColumn):
                col = old.renamed(change.new_name)
            else:
                col = self._materialize_charset(resolve_column(change.column), charset)
            origin[col.name] = old.name
            if isinstance(change, ChangeColumn) and col.primary:
                changed_primary.append([col.name])
            if isinstance(change, ChangeColumn) and (change.first or change.after is not None):
                placed_later.append((change, col))
            else:
                cols.append(col)

        def place(col: TableColumn, first: bool, after: str | None) -> None:
            if any(c.name.lower() == col.name.lower() for c in cols):
                raise SchemaError(f"Duplicate column name {col.name!r} in {key}", table=key)
            if first:
                cols.insert(0, col)
            elif after is not None:
                at = next((i for i, c in enumerate(cols) if c.name.lower() == after.lower()), None)
                if at is None:
                    raise SchemaError(f"Unknown column {after!r} in {key}", table=key)
                cols.insert(at + 1, col)
            else:  # last, but before what the server keeps last (a system-versioned table's implicit columns)
                cols.insert(next((i for i, c in enumerate(cols) if c.hidden), len(cols)), col)

        later = {id(change): col for change, col in placed_later}
        primary = [
            self._renamed_key(p, changed) for p in t.primary if p.lower() not in dropped
        ]  # key columns keep their place in the key under their new names
        declared_primary = changed_primary
        drop_primary = False
        for action in stmt.actions:
            if isinstance(action, AddColumn):
                d = self._materialize_charset(resolve_column(action.column), charset)
                if any(c.name.lower() == d.name.lower() for c in cols) or any(
                    c.name.lower() == d.name.lower() for c in later.values()
                ):
                    if action.if_not_exists:
                        continue
                    raise SchemaError(f"Duplicate column name {d.name!r} in {key}", table=key)
                origin[d.name] = None
                place(d, action.first, action.after)
                if d.primary:
                    declared_primary.append([d.name])
            elif isinstance(action, ChangeColumn) and id(action) in later:
                place(later.pop(id(action)), action.first, action.after)
            elif isinstance(action, AddKey) and isinstance(action.key, IndexDef) and action.key.kind == "PRIMARY":
                if action.if_not_exists and primary and not drop_primary:
                    continue
                declared_primary.append([n for n in action.key.column_names if n is not None])
            elif isinstance(action, DropKey) and drops_primary(action):
                if not primary and not action.if_exists:
                    raise SchemaError(f"Can't DROP INDEX `PRIMARY` of {key}: no primary key", table=key)
                drop_primary = True
        if drop_primary:
            primary = []
        for declared in declared_primary:
            if primary:
                raise SchemaError(f"Multiple primary key defined in {key}", table=key)
            primary = declared
        if "ADD SYSTEM VERSIONING" in other:
            before = {c.name for c in cols}
            cols, primary = versioned(cols, primary)
            origin.update((c.name, None) for c in cols if c.name not in before)  # the period columns it adds itself
        elif "DROP SYSTEM VERSIONING" in other:
            cols, primary = unversioned(cols, primary)
            kept = {c.name for c in cols}
            origin = {name: was for name, was in origin.items() if name in kept}
        elif any(c.period is not None for c in cols):
            cols, primary = versioned(cols, primary)  # a primary key added to a versioned table ends with row_end
        if convert is not None:
            # MariaDB's JSON is a LONGTEXT and converts with the text columns; MySQL's JSON has no charset
            cols = [
                _converted(c, convert) if c.charset is not None or (self.mariadb and c.base == "json") else c
                for c in cols
            ]
        # ALTER COLUMN ... DEFAULT, other indexes, checks, ENGINE=, ALGORITHM=, LOCK=, FORCE, ...: the layout stays
        new_key = qualified(new_db, new_name)
        if new_key != key and new_key in self.tables:
            raise SchemaError(f"Table {new_key!r} already exists", table=new_key)
        others = _altered_keys(t.keys, stmt.actions, dropped, changed)
        table = self._table(new_db, new_name, cols, primary, charset, others)
        keys = [
            attrs.evolve(k, columns=tuple(self._renamed_key(c, changed) for c in k.columns)) for k in t.foreign_keys
        ]
        for action in stmt.actions:
            if isinstance(action, AddKey) and isinstance(action.key, ForeignKeyDef):
                keys.append(self._foreign_key(action.key, t.db, t.name, [k.name for k in keys], key))
            elif isinstance(action, DropKey) and action.kind in ("FOREIGN KEY", "CONSTRAINT") and action.name:
                # the binlog holds only what the server ran: a key not known here is one the history never saw
                keys = [k for k in keys if k.name.lower() != action.name.lower()]
        table = attrs.evolve(table, foreign_keys=tuple(keys))
        del self.tables[key]
        self.tables[new_key] = table
        if new_key != key:
            self.objects.table_renamed(key, new_key)
        renamed = {k: self._renamed_key(c.name, changed) for k, c in original.items()}
        self._retarget(key, new_key, renamed)
        return [TableChange("alter", key, new_key, origin), *self._partition_tables(stmt, table, full)]

    def _partition_tables(
        self, stmt: AlterTable, table: TableDef, full: Callable[[TableName], str]
    ) -> list[TableChange]:
        """The tables partition actions make or take: ``CONVERT PARTITION p TO TABLE t`` makes ``t`` with the
        partitioned table's columns, key and charset (MariaDB 10.7+), ``CONVERT TABLE t TO PARTITION`` takes ``t``
        into it (``t`` is gone)."""
        changes: list[TableChange] = []
        for action in stmt.actions:
            if not isinstance(action, PartitionAction) or action.table is None:
                continue
            other = full(action.table)
            db, name = split_qualified(other)
            if action.verb == "CONVERT PARTITION":
                if other in self.tables:
                    raise SchemaError(f"Table {other!r} already exists", table=other)
                made = self._table(db, name, list(table.columns), list(table.primary), table.charset, table.keys)
                self.tables[other] = made
                changes.append(TableChange("create", None, other))
            elif action.verb == "CONVERT TABLE" and self.tables.pop(other, None) is not None:
                changes.append(TableChange("drop", other, None))
        return changes

    def _foreign_key(self, fk: ForeignKeyDef, db: str, table: str, taken: list[str], key: str) -> ForeignKey:
        """A FOREIGN KEY clause of ``db.table`` as the server keeps it (a generated name when it has none)."""
        if len(fk.columns) != len(fk.ref_columns):
            raise SchemaError(f"a foreign key of {key} names {fk.columns} referencing {fk.ref_columns}", table=key)
        return ForeignKey(
            fk.name or generated_name(table, taken),
            fk.columns,
            fk.ref_table.schema if fk.ref_table.schema is not None else db,
            fk.ref_table.name,
            fk.ref_columns,
            normal_action(fk.on_delete),
            normal_action(fk.on_update),
        )

    def _retarget(self, old: str, new: str, columns: Mapping[str, str] | None = None) -> None:
        """The foreign keys referencing table ``old`` reference ``new`` (renamed) and its renamed ``columns``
        (lower-case old name -> new name), as InnoDB follows a rename."""
        old_db, old_name = split_qualified(old)
        new_db, new_name = split_qualified(new)
        for name, t in list(self.tables.items()):
            if not any((k.ref_db, k.ref_table) == (old_db, old_name) for k in t.foreign_keys):
                continue
            keys = tuple(
                attrs.evolve(
                    k,
                    ref_db=new_db,
                    ref_table=new_name,
                    ref_columns=tuple((columns or {}).get(c.lower(), c) for c in k.ref_columns),
                )
                if (k.ref_db, k.ref_table) == (old_db, old_name)
                else k
                for k in t.foreign_keys
            )
            self.tables[name] = attrs.evolve(t, foreign_keys=keys)

    @staticmethod
    def _renamed_key(name: str, changed: Mapping[str, ChangeColumn | RenameColumn]) -> str:
        change = changed.get(name.lower())
        if change is None:
            return name
        return change.new_name if isinstance(change, RenameColumn) else change.column.name

    def _drop_tables(self, stmt: DropTable, full: Callable[[TableName], str]) -> list[TableChange]:
        if stmt.temporary:
            return []
        keys = [full(name) for name in stmt.tables]
        missing = [k for k in keys if k not in self.tables]
        if missing and not stmt.if_exists:
            raise SchemaError(f"Unknown table {', '.join(missing)}", table=missing[0])
        changes = [TableChange("drop", k, None) for k in keys if k in self.tables]
        for k in keys:
            if self.tables.pop(k, None) is not None:
                self.objects.table_dropped(k)
        return changes

    def _rename_tables(self, stmt: RenameTable, full: Callable[[TableName], str]) -> list[TableChange]:
        tables = dict(self.tables)
        objects = self.objects.copy()
        changes = []
        for old, new in stmt.pairs:
            src, dst = full(old), full(new)
            if dst in tables or objects.view(*split_qualified(dst)) is not None:
                raise SchemaError(f"Table {dst!r} already exists", table=dst)
            t = tables.pop(src, None)
            if t is None:
                if objects.rename_view(src, dst):  # RENAME TABLE renames views too
                    continue
                raise SchemaError(f"Table {src!r} doesn't exist", table=src)
            ddb, dname = split_qualified(dst)
            tables[dst] = attrs.evolve(t, db=ddb, name=dname)
            objects.table_renamed(src, dst)
            changes.append(TableChange("rename", src, dst))
        self.tables = tables
        self.objects = objects
        for change in changes:
            assert change.old is not None and change.new is not None
            self._retarget(change.old, change.new)
        return changes


def _created_keys(stmt: CreateTable) -> list[TableKey]:
    """The keys (but the primary one) a CREATE TABLE makes, in the order the server makes them: a column's inline
    UNIQUE (or SERIAL) as its column is read, then the key definitions (a statement writing keys before columns is
    read as if it did not)."""
    keys: list[TableKey] = []
    for column in stmt.columns:
        if column.unique or column.type.serial:
            keys.append(TableKey(key_name(None, column.name, [k.name for k in keys]), ((column.name, None),), True))
    for index in stmt.indexes:
        made = key_of(index, [k.name for k in keys])
        if made is not None:
            keys.append(made)
    return keys


def _altered_keys(
    keys: Sequence[TableKey],
    actions: Sequence[object],
    dropped: set[str],
    changed: Mapping[str, ChangeColumn | RenameColumn],
) -> list[TableKey]:
    """A table's keys (but the primary one) after an ALTER TABLE, as the server does it: its keys in their order,
    their columns renamed, a dropped column left out of them (a key left with none is dropped), the keys it drops
    gone and the ones it renames renamed; then the keys it adds, in statement order (a column's inline UNIQUE too)."""
    out: list[TableKey] = []
    for key in keys:
        parts = tuple(
            (SchemaCatalog._renamed_key(c, changed), n) for c, n in key.parts if c.lower() not in dropped
        )
        if parts:
            out.append(attrs.evolve(key, parts=parts))
    for action in actions:
        if isinstance(action, DropKey) and action.name and action.kind in ("INDEX", "CONSTRAINT"):
            out = [k for k in out if k.name.lower() != action.name.lower()]
        elif isinstance(action, RenameIndex):
            old = action.old_name.lower()
            out = [attrs.evolve(k, name=action.new_name) if k.name.lower() == old else k for k in out]
    for action in actions:
        if isinstance(action, AddColumn | ChangeColumn) and (action.column.unique or action.column.type.serial):
            name = action.column.name
            out.append(TableKey(key_name(None, name, [k.name for k in out]), ((name, None),), True))
        elif isinstance(action, AddKey) and isinstance(action.key, IndexDef):
            named = action.key.name or action.key.constraint
            if action.if_not_exists and named and any(k.name.lower() == named.lower() for k in out):
                continue
            made = key_of(action.key, [k.name for k in out])
            if made is not None:
                out.append(made)
    return out
