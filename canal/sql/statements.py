"""The typed statements the SQL reader returns: frozen attrs values, one class per statement shape.

Names keep the case they were written in and are unquoted; an unqualified table name has ``schema`` None (the
statement's default database applies). Expressions (defaults, generated columns, checks) are kept as
:class:`Expression`: their text as written, and the value when they are a plain literal.
"""

from __future__ import annotations

import enum
from decimal import Decimal
from typing import TypeAlias, TypeVar

import attrs

from canal.sql.types import ColumnType

__all__ = [
    "AddColumn",
    "AddKey",
    "AlterAction",
    "AlterColumn",
    "AlterDatabase",
    "AlterOption",
    "AlterTable",
    "ChangeColumn",
    "CheckDef",
    "ColumnDef",
    "ConvertCharset",
    "CreateDatabase",
    "CreateIndex",
    "CreateTable",
    "DmlStatement",
    "DropColumn",
    "DropDatabase",
    "DropIndexStatement",
    "DropKey",
    "DropTable",
    "Expression",
    "ForeignKeyDef",
    "Grant",
    "IndexColumn",
    "IndexDef",
    "OtherAction",
    "OtherStatement",
    "PartitionAction",
    "QueryKind",
    "RenameColumn",
    "RenameIndex",
    "RenameTable",
    "RenameTo",
    "SetTableOptions",
    "Setting",
    "Statement",
    "TableMaintenance",
    "TableName",
    "TableOption",
    "TransactionStatement",
    "TruncateTable",
    "Unreadable",
    "fold_table_names",
    "named_tables",
    "quote_name",
    "statement_verb",
]


class QueryKind(enum.Enum):
    """What kind of statement a query event holds: transaction control, DML, DDL, DCL or other."""

    BEGIN = "begin"  # BEGIN [WORK], START TRANSACTION
    COMMIT = "commit"
    ROLLBACK = "rollback"  # a whole-transaction rollback (not ROLLBACK TO SAVEPOINT)
    SAVEPOINT = "savepoint"  # SAVEPOINT x, ROLLBACK TO [SAVEPOINT] x, RELEASE SAVEPOINT x
    XA_START = "xa_start"  # XA START | XA BEGIN
    XA_END = "xa_end"
    XA_PREPARE = "xa_prepare"
    XA_COMMIT = "xa_commit"
    XA_ROLLBACK = "xa_rollback"
    DML = "dml"  # INSERT / REPLACE / UPDATE / DELETE / LOAD DATA in statement form
    DDL = "ddl"  # table, index, database, view, routine, trigger, event, sequence, tablespace definitions
    DCL = "dcl"  # GRANT, REVOKE, users and roles, SET PASSWORD
    OTHER = "other"  # SET, FLUSH, ANALYZE/OPTIMIZE TABLE, CALL, SELECT, unparseable text ...

    @property
    def is_transaction_control(self) -> bool:
        """BEGIN, COMMIT, ROLLBACK, SAVEPOINT and the XA statements: the parser handles these itself."""
        return self in _TX_KINDS

    @property
    def filter_flag(self) -> str | None:
        """Which of canal's query filter flags covers the statement: ``"dml"``, ``"ddl"`` or ``"dcl"``.

        canal files every query that is neither table DDL nor DML under ``dcl`` (its ``filterQueryDcl``), so OTHER
        maps to ``"dcl"`` too. Transaction control statements are not filtered: None.
        """
        if self in _TX_KINDS:
            return None
        if self is QueryKind.DML:
            return "dml"
        if self is QueryKind.DDL:
            return "ddl"
        return "dcl"


_TX_KINDS = frozenset(
    {
        QueryKind.BEGIN,
        QueryKind.COMMIT,
        QueryKind.ROLLBACK,
        QueryKind.SAVEPOINT,
        QueryKind.XA_START,
        QueryKind.XA_END,
        QueryKind.XA_PREPARE,
        QueryKind.XA_COMMIT,
        QueryKind.XA_ROLLBACK,
    }
)


@attrs.frozen(slots=True)
class TableName:
    """A table (or other object) name: ``schema`` None when the statement did not qualify it."""

    schema: str | None
    name: str

    def qualified(self, default_schema: str | None) -> TableName:
        """The name with ``default_schema`` filled in when unqualified."""
        return self if self.schema is not None else TableName(default_schema, self.name)

    def __str__(self) -> str:
        return quote_name(self.name) if self.schema is None else f"{quote_name(self.schema)}.{quote_name(self.name)}"


def quote_name(name: str) -> str:
    """A name in backticks, as SHOW CREATE TABLE writes it."""
    return "`" + name.replace("`", "``") + "`"


# -- parts of definitions ---------------------------------------------------------------------------------------------

Literal: TypeAlias = str | bytes | int | Decimal | float | bool | None


@attrs.frozen(slots=True)
class Expression:
    """An expression as written (``text``). ``literal`` tells whether it is a plain literal: a string (``value`` is
    its content), a number (int or Decimal; float for an exponent), TRUE/FALSE, or NULL (``value`` None). Hex and bit
    literals (``X'0f'``, ``b'1'``, ``0x0f``, ``0b1``) are literals whose ``value`` is their bytes (``X'0041'`` two of
    them): binary strings, which the server reads as text, bytes or their big-endian number as the column's type
    takes them."""

    text: str
    literal: bool = False
    value: Literal = None


@attrs.frozen(slots=True)
class ColumnDef:
    """One column definition of CREATE TABLE or ALTER TABLE ADD/MODIFY/CHANGE.

    ``nullable`` is None when neither NULL nor NOT NULL was said (the server's rule then applies: nullable unless
    the column is part of the primary key). ``generated`` is the expression of a generated column (``stored`` says
    STORED/PERSISTENT rather than VIRTUAL); MariaDB system-versioning columns (``AS ROW START``/``ROW END``) have
    ``generated`` None and ``row_period`` "START"/"END". ``attributes`` keeps, as written, attributes that change
    neither the type nor the layout (COLUMN_FORMAT, STORAGE, ENGINE_ATTRIBUTE, WITH SYSTEM VERSIONING, ...).
    """

    name: str
    type: ColumnType
    nullable: bool | None = None
    default: Expression | None = None
    on_update: Expression | None = None
    auto_increment: bool = False
    primary_key: bool = False  # inline PRIMARY KEY (or a bare KEY, which MySQL reads the same way)
    unique: bool = False  # inline UNIQUE [KEY]
    comment: str | None = None
    generated: Expression | None = None
    stored: bool = False
    row_period: str | None = None
    invisible: bool = False
    srid: int | None = None
    check: CheckDef | None = None
    references: ForeignKeyDef | None = None
    attributes: tuple[str, ...] = ()

    @property
    def is_nullable(self) -> bool:
        """Whether the column holds NULL as declared: NOT NULL, an inline PRIMARY KEY or SERIAL make it NOT NULL."""
        if self.primary_key or self.type.serial:
            return False
        return self.nullable is not False


@attrs.frozen(slots=True)
class IndexColumn:
    """One key part: a column (with an optional prefix length) or, for a functional key part, an expression."""

    name: str | None
    length: int | None = None
    descending: bool = False
    expression: str | None = None


@attrs.frozen(slots=True)
class IndexDef:
    """A key: ``kind`` is PRIMARY, UNIQUE, INDEX, FULLTEXT, SPATIAL or VECTOR (KEY reads as INDEX); ``constraint``
    the ``CONSTRAINT symbol`` name, if given; ``using`` the index type (BTREE, HASH, RTREE); ``options`` the index
    options as written (COMMENT, KEY_BLOCK_SIZE, VISIBLE, ...)."""

    kind: str
    name: str | None
    columns: tuple[IndexColumn, ...]
    constraint: str | None = None
    using: str | None = None
    options: tuple[str, ...] = ()

    @property
    def column_names(self) -> tuple[str, ...]:
        """The names of the key's column parts (functional parts have none)."""
        return tuple(c.name for c in self.columns if c.name is not None)


@attrs.frozen(slots=True)
class ForeignKeyDef:
    """A FOREIGN KEY (or an inline REFERENCES): ``on_delete`` / ``on_update`` are the actions upper-cased
    (RESTRICT, CASCADE, SET NULL, NO ACTION, SET DEFAULT)."""

    name: str | None
    columns: tuple[str, ...]
    ref_table: TableName
    ref_columns: tuple[str, ...]
    on_delete: str | None = None
    on_update: str | None = None
    index_name: str | None = None


@attrs.frozen(slots=True)
class CheckDef:
    """A CHECK constraint: its name (None when unnamed) and expression text; ``enforced`` False for NOT ENFORCED."""

    name: str | None
    expression: str
    enforced: bool = True


@attrs.frozen(slots=True)
class TableOption:
    """One table option. ``name`` is upper-case with spaces between words; the character set is always
    ``CHARSET`` (whether written DEFAULT CHARSET, CHARACTER SET or CHARSET) and the collation ``COLLATE``. ``value``
    is the option's value as written (strings unquoted); ``DEFAULT`` for ``CHARSET=DEFAULT``."""

    name: str
    value: str


def _option(options: tuple[TableOption, ...], name: str) -> str | None:
    found = None
    for option in options:
        if option.name == name:
            found = option.value  # the last one counts, as on the server
    return found


def _lower_option(options: tuple[TableOption, ...], name: str) -> str | None:
    value = _option(options, name)
    return None if value is None else value.lower()


# -- statements -------------------------------------------------------------------------------------------------------


@attrs.frozen(slots=True)
class CreateTable:
    """CREATE [OR REPLACE] [TEMPORARY] TABLE [IF NOT EXISTS] name: columns, keys, checks and options; or LIKE
    another table; ``as_select`` is the query text of CREATE TABLE ... [AS] SELECT (the columns it adds are the
    query's, which only the server knows)."""

    table: TableName
    columns: tuple[ColumnDef, ...] = ()
    indexes: tuple[IndexDef, ...] = ()
    foreign_keys: tuple[ForeignKeyDef, ...] = ()
    checks: tuple[CheckDef, ...] = ()
    options: tuple[TableOption, ...] = ()
    partitioning: str | None = None
    like: TableName | None = None
    as_select: str | None = None
    if_not_exists: bool = False
    temporary: bool = False
    or_replace: bool = False
    periods: tuple[str, ...] = ()  # PERIOD FOR ... definitions as written

    kind = QueryKind.DDL

    @property
    def primary_key(self) -> tuple[str, ...]:
        """The primary key's columns: from a PRIMARY KEY definition, else from an inline PRIMARY KEY."""
        for index in self.indexes:
            if index.kind == "PRIMARY":
                return index.column_names
        return tuple(c.name for c in self.columns if c.primary_key)

    @property
    def charset(self) -> str | None:
        """The table's declared default character set (lower case), if any."""
        return _lower_option(self.options, "CHARSET")

    @property
    def collation(self) -> str | None:
        """The table's declared default collation (lower case), if any."""
        return _lower_option(self.options, "COLLATE")

    def option(self, name: str) -> str | None:
        """The value of a table option by its upper-case name (ENGINE, COMMENT, AUTO_INCREMENT, ...)."""
        return _option(self.options, name)


# ALTER TABLE actions, in the order written; a list ``ADD (a ..., b ...)`` is one AddColumn per column


@attrs.frozen(slots=True)
class AddColumn:
    column: ColumnDef
    first: bool = False
    after: str | None = None
    if_not_exists: bool = False


@attrs.frozen(slots=True)
class DropColumn:
    name: str
    if_exists: bool = False


@attrs.frozen(slots=True)
class ChangeColumn:
    """CHANGE [COLUMN] old new_definition, or MODIFY [COLUMN] definition (which is CHANGE with ``old_name`` the
    column's own name): the column's new definition, at its place or FIRST / AFTER another."""

    old_name: str
    column: ColumnDef
    first: bool = False
    after: str | None = None
    if_exists: bool = False


@attrs.frozen(slots=True)
class RenameColumn:
    old_name: str
    new_name: str
    if_exists: bool = False


@attrs.frozen(slots=True)
class AlterColumn:
    """ALTER [COLUMN] c SET DEFAULT expr | DROP DEFAULT | SET VISIBLE | SET INVISIBLE."""

    name: str
    default: Expression | None = None  # SET DEFAULT
    drop_default: bool = False
    visible: bool | None = None


@attrs.frozen(slots=True)
class AddKey:
    """ADD a key or constraint: PRIMARY KEY / UNIQUE / INDEX / FULLTEXT / SPATIAL (an IndexDef, with or without
    CONSTRAINT), FOREIGN KEY (a ForeignKeyDef) or CHECK (a CheckDef)."""

    key: IndexDef | ForeignKeyDef | CheckDef
    if_not_exists: bool = False


@attrs.frozen(slots=True)
class DropKey:
    """DROP PRIMARY KEY, DROP {INDEX|KEY} name, DROP FOREIGN KEY name, DROP CHECK name, DROP CONSTRAINT name:
    ``kind`` is PRIMARY KEY (``name`` None), INDEX, FOREIGN KEY, CHECK or CONSTRAINT."""

    kind: str
    name: str | None = None
    if_exists: bool = False


@attrs.frozen(slots=True)
class RenameIndex:
    old_name: str
    new_name: str


@attrs.frozen(slots=True)
class RenameTo:
    """RENAME [TO|AS] new_name."""

    table: TableName


@attrs.frozen(slots=True)
class ConvertCharset:
    """CONVERT TO CHARACTER SET x [COLLATE y]: ``charset`` is lower case, ``default`` for CHARACTER SET DEFAULT."""

    charset: str
    collation: str | None = None


@attrs.frozen(slots=True)
class SetTableOptions:
    """Table options (ENGINE=, DEFAULT CHARSET=, COMMENT=, ...)."""

    options: tuple[TableOption, ...]


@attrs.frozen(slots=True)
class AlterOption:
    """How the server runs the ALTER (ALGORITHM, LOCK, FORCE, WITH/WITHOUT VALIDATION): changes no definition."""

    name: str
    value: str = ""


@attrs.frozen(slots=True)
class OtherAction:
    """An action that changes no column, read whole: ORDER BY, ENABLE/DISABLE KEYS, ALTER INDEX ... [NOT] IGNORED,
    DISCARD/IMPORT TABLESPACE, system versioning, periods ... ``head`` is its first words upper-cased (``"ORDER BY"``,
    ``"ADD SYSTEM"``), ``text`` as written. ``error`` is set only by a lenient read that could not read the action
    (its ``head`` then is its first two words, whatever they are): it says why."""

    head: str
    text: str
    error: str | None = None


@attrs.frozen(slots=True)
class PartitionAction:
    """A partition action of ALTER TABLE, read whole: ``verb`` its leading words upper-cased (``"DROP PARTITION"``,
    ``"EXCHANGE PARTITION"``, ``"CONVERT TABLE"``, ``"PARTITION BY"``, ``"REMOVE PARTITIONING"``, ...),
    ``partitions`` the partition names it names (``("ALL",)`` for ALL), ``table`` the other table of EXCHANGE
    PARTITION ... WITH TABLE, CONVERT PARTITION ... TO TABLE and CONVERT TABLE ... TO PARTITION (None for the
    rest), ``text`` as written; ``value_lists`` whether a partition it defines lists its values (``VALUES IN``: a
    LIST partitioning's)."""

    verb: str
    partitions: tuple[str, ...] = ()
    table: TableName | None = None
    text: str = ""
    value_lists: bool = False


AlterAction: TypeAlias = (
    AddColumn
    | DropColumn
    | ChangeColumn
    | RenameColumn
    | AlterColumn
    | AddKey
    | DropKey
    | RenameIndex
    | RenameTo
    | ConvertCharset
    | SetTableOptions
    | AlterOption
    | OtherAction
    | PartitionAction
)


@attrs.frozen(slots=True)
class AlterTable:
    """ALTER [ONLINE] [IGNORE] TABLE [IF EXISTS] name [WAIT n | NOWAIT] action, ..."""

    table: TableName
    actions: tuple[AlterAction, ...] = ()
    if_exists: bool = False
    online: bool = False
    ignore: bool = False

    kind = QueryKind.DDL


@attrs.frozen(slots=True)
class RenameTable:
    """RENAME TABLE a TO b [, c TO d ...]: the pairs in order (each sees the renames before it)."""

    pairs: tuple[tuple[TableName, TableName], ...]
    if_exists: bool = False

    kind = QueryKind.DDL


@attrs.frozen(slots=True)
class DropTable:
    tables: tuple[TableName, ...]
    if_exists: bool = False
    temporary: bool = False

    kind = QueryKind.DDL


@attrs.frozen(slots=True)
class TruncateTable:
    table: TableName

    kind = QueryKind.DDL


@attrs.frozen(slots=True)
class CreateDatabase:
    name: str
    if_not_exists: bool = False
    or_replace: bool = False
    options: tuple[TableOption, ...] = ()

    kind = QueryKind.DDL

    @property
    def charset(self) -> str | None:
        """The database's declared default character set (lower case), if any."""
        return _lower_option(self.options, "CHARSET")

    @property
    def collation(self) -> str | None:
        """The database's declared default collation (lower case), if any."""
        return _lower_option(self.options, "COLLATE")


@attrs.frozen(slots=True)
class DropDatabase:
    name: str
    if_exists: bool = False

    kind = QueryKind.DDL


@attrs.frozen(slots=True)
class AlterDatabase:
    """ALTER DATABASE [name] options: ``name`` None means the default database."""

    name: str | None
    options: tuple[TableOption, ...] = ()

    kind = QueryKind.DDL

    @property
    def charset(self) -> str | None:
        """The database's new default character set (lower case), if the statement sets one."""
        return _lower_option(self.options, "CHARSET")

    @property
    def collation(self) -> str | None:
        """The database's new default collation (lower case), if the statement sets one."""
        return _lower_option(self.options, "COLLATE")


@attrs.frozen(slots=True)
class CreateIndex:
    """CREATE [OR REPLACE] [UNIQUE|FULLTEXT|SPATIAL] INDEX [IF NOT EXISTS] name ON table (key parts)."""

    table: TableName
    index: IndexDef
    if_not_exists: bool = False
    or_replace: bool = False

    kind = QueryKind.DDL


@attrs.frozen(slots=True)
class DropIndexStatement:
    """DROP INDEX [IF EXISTS] name ON table."""

    table: TableName
    name: str
    if_exists: bool = False

    kind = QueryKind.DDL


@attrs.frozen(slots=True)
class DmlStatement:
    """INSERT / REPLACE / UPDATE / DELETE / LOAD DATA in statement form: ``verb`` is INSERT (also for REPLACE and
    LOAD), UPDATE or DELETE; ``table`` the one table it changes, None for multi-table forms or when unreadable;
    ``head`` the statement's own first word where it is not ``verb`` (``REPLACE``, ``LOAD``: they may delete rows
    too). Only the head is read: the values of a huge INSERT are never tokenized."""

    verb: str
    table: TableName | None
    head: str = ""

    kind = QueryKind.DML


@attrs.frozen(slots=True)
class TableMaintenance:
    """OPTIMIZE / ANALYZE / CHECK / CHECKSUM / REPAIR [NO_WRITE_TO_BINLOG | LOCAL] TABLE t [, t2 ...] [options],
    read whole: ``verb`` upper-cased (``"OPTIMIZE"``), ``tables`` as named, ``options`` what follows them as written
    (``"PERSISTENT FOR ALL"``, ``"QUICK"``, ``"WAIT 5"``)."""

    verb: str
    tables: tuple[TableName, ...]
    options: tuple[str, ...] = ()

    kind = QueryKind.OTHER


@attrs.frozen(slots=True)
class TransactionStatement:
    """BEGIN, COMMIT, ROLLBACK, SAVEPOINT and XA statements; ``xid`` is the text after an XA verb, as written.

    For the savepoint statements (kind SAVEPOINT) ``savepoint`` is the name as written (without quotes) and
    ``savepoint_verb`` says which: ``"SAVEPOINT"``, ``"ROLLBACK TO"`` or ``"RELEASE"``."""

    kind: QueryKind
    xid: str | None = None
    savepoint: str | None = None
    savepoint_verb: str | None = None


@attrs.frozen(slots=True)
class Grant:
    """GRANT privileges ON target TO ...: ``privileges`` upper-cased (``"REPLICATION SLAVE"``, ``"ALL PRIVILEGES"``;
    column lists dropped), ``target`` as written (``*.*``, ```shop`.*``, ``shop.orders``). A GRANT of roles (no ON)
    reads as an OtherStatement."""

    privileges: tuple[str, ...]
    target: str

    kind = QueryKind.DCL


@attrs.frozen(slots=True)
class OtherStatement:
    """Any other statement: ``verb`` is its head upper-cased (``"CREATE VIEW"``, ``"GRANT"``, ``"SET"``, ``"USE"``),
    ``schema`` the database it names (a view's or routine's schema, USE's database), if any; ``tables`` the tables
    it is about where its head names them (``ALTER SEQUENCE s``: a sequence is a table)."""

    kind: QueryKind
    verb: str
    schema: str | None = None
    tables: tuple[TableName, ...] = ()


@attrs.frozen(slots=True)
class Unreadable:
    """A statement whose head was read but whose rest was not (lenient reads only; a strict read raises SqlError).

    ``verb`` is e.g. ``"CREATE TABLE"``, ``table`` the table it names when that much was read, ``error`` why the
    rest could not be read. ``tables`` holds every table it was read to name (``table`` first) when the statement
    was read whole but text the reader does not know follows it; otherwise just ``table``, if any."""

    kind: QueryKind
    verb: str
    table: TableName | None
    error: str
    tables: tuple[TableName, ...] = ()


Statement: TypeAlias = (
    CreateTable
    | AlterTable
    | RenameTable
    | DropTable
    | TruncateTable
    | CreateDatabase
    | DropDatabase
    | AlterDatabase
    | CreateIndex
    | DropIndexStatement
    | DmlStatement
    | TableMaintenance
    | TransactionStatement
    | Grant
    | OtherStatement
    | Unreadable
)


@attrs.frozen(slots=True)
class Setting:
    """One ``name = value`` of MariaDB's ``SET STATEMENT name = value [, ...] FOR statement``: the system
    variable's name in lower case, its value as written (``Expression``)."""

    name: str
    value: Expression


_VERBS: dict[type, str] = {
    CreateTable: "CREATE TABLE",
    AlterTable: "ALTER TABLE",
    RenameTable: "RENAME TABLE",
    DropTable: "DROP TABLE",
    TruncateTable: "TRUNCATE TABLE",
    CreateIndex: "CREATE INDEX",
    DropIndexStatement: "DROP INDEX",
    CreateDatabase: "CREATE DATABASE",
    DropDatabase: "DROP DATABASE",
    AlterDatabase: "ALTER DATABASE",
    Grant: "GRANT",
}


def statement_verb(stmt: Statement) -> str:
    """The statement's head as its SQL starts (``"ALTER TABLE"``, ``"OPTIMIZE TABLE"``, ``"INSERT"``, ...)."""
    if isinstance(stmt, OtherStatement | Unreadable):
        return stmt.verb
    if isinstance(stmt, TableMaintenance):
        return f"{stmt.verb} TABLE"
    if isinstance(stmt, DmlStatement):
        return stmt.verb
    if isinstance(stmt, TransactionStatement):
        return stmt.savepoint_verb or stmt.kind.name.replace("_", " ")
    return _VERBS[type(stmt)]


def named_tables(stmt: Statement) -> tuple[TableName, ...]:
    """Every table the statement names, in order and without repeats, as written (a RENAME's old and new names, an
    ALTER's RENAME TO and the other table of a partition exchange or conversion; a CREATE ... LIKE's source)."""
    found: list[TableName] = []
    if isinstance(stmt, CreateTable):
        found = [stmt.table, *([stmt.like] if stmt.like is not None else [])]
    elif isinstance(stmt, AlterTable):
        found = [stmt.table]
        for action in stmt.actions:
            other = action.table if isinstance(action, RenameTo | PartitionAction) else None
            if other is not None:
                found.append(other)
    elif isinstance(stmt, RenameTable):
        found = [name for pair in stmt.pairs for name in pair]
    elif isinstance(stmt, DropTable | TableMaintenance):
        found = list(stmt.tables)
    elif isinstance(stmt, TruncateTable | CreateIndex | DropIndexStatement):
        found = [stmt.table]
    elif isinstance(stmt, DmlStatement):
        found = [stmt.table] if stmt.table is not None else []
    elif isinstance(stmt, OtherStatement | Unreadable):
        found = list(stmt.tables)
        if isinstance(stmt, Unreadable) and stmt.table is not None and stmt.table not in found:
            found.insert(0, stmt.table)
    return tuple(dict.fromkeys(found))


_Folded = TypeVar("_Folded")


def fold_table_names(stmt: _Folded) -> _Folded:
    """``stmt`` (a statement, or any frozen attrs value holding :class:`TableName`) with every database and table name
    in lower case, as a server with ``lower_case_table_names=1`` stores and compares them (column, index and other
    names keep their case)."""
    folded = _fold(stmt)
    assert isinstance(folded, type(stmt))
    return folded


def _fold(value: object) -> object:
    if isinstance(value, TableName):
        return TableName(None if value.schema is None else value.schema.lower(), value.name.lower())
    if isinstance(value, tuple):
        items = tuple(_fold(v) for v in value)
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    cls = type(value)
    if not attrs.has(cls):
        return value
    changes: dict[str, object] = {}
    if isinstance(value, CreateDatabase | DropDatabase | AlterDatabase) and value.name is not None:
        changes["name"] = value.name.lower()
    for field in attrs.fields(cls):
        if field.name in changes:
            continue
        current = getattr(value, field.name)
        new = _fold(current)
        if new is not current:
            changes[field.name] = new
    return attrs.evolve(value, **changes) if changes else value  # type: ignore[misc]
