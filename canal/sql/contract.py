"""The statement contract: what pycanal does with each kind of statement a query event holds.

Every statement shape the SQL reader knows is declared once in :data:`SHAPES`, with its class:

* ``followed`` (:attr:`Follow.MODELED`) -- the schema history and the mirror follow it, tested against ``SELECT``;
* ``no change`` (:attr:`Follow.NO_CHANGE`) -- known to change neither rows nor columns (an explicit allow-list);
* ``stop`` (:attr:`Follow.STOP`) -- a typed stop naming the statement and its tables
  (:class:`~canal.errors.UnmodeledStatementError`, raised by the capture: :mod:`canal.parse.unmodeled`), where it
  touches a captured table.

A shape that stops may *heal* (:attr:`Shape.heals`): its tables' rows changed in a way the binlog does not say, but
reading the tables again after it makes a copy of them exact. Under the default ``heal="snapshot"`` the capture then
reads those tables again in the stream instead of stopping (:mod:`canal.snapshot.heal`); the page's table shows it as
``healed``. The others stop whatever ``heal`` says: a re-read would not help (a table whose rows come from elsewhere,
or whose later changes its binlog does not show), or what the statement did cannot be told.

Nothing else: text the reader cannot read in full is a statement of its own shape, which stops. :func:`judge`
gives the verdict on the statements of one query event: the shapes they are made of (an ALTER TABLE: one per
action), the class that wins (``stop`` over ``followed`` over ``no change``) and the tables they touch.

The table of docs/concepts/fail-closed.md is :func:`contract_table`'s (``python -m canal.sql`` prints it;
a test compares the page with it).

    >>> from canal.sql import read_statements
    >>> judge(read_statements("ALTER TABLE t DROP PARTITION p0", strict=False)).follow
    <Follow.STOP: 'stop'>
    >>> judge(read_statements("OPTIMIZE TABLE t", strict=False)).follow
    <Follow.NO_CHANGE: 'no change'>
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Final

import attrs

from canal.sql.statements import (
    AddColumn,
    AddKey,
    AlterAction,
    AlterColumn,
    AlterDatabase,
    AlterOption,
    AlterTable,
    ChangeColumn,
    CheckDef,
    ConvertCharset,
    CreateDatabase,
    CreateIndex,
    CreateTable,
    DmlStatement,
    DropColumn,
    DropDatabase,
    DropIndexStatement,
    DropKey,
    DropTable,
    ForeignKeyDef,
    Grant,
    IndexDef,
    OtherAction,
    OtherStatement,
    PartitionAction,
    QueryKind,
    RenameColumn,
    RenameIndex,
    RenameTable,
    RenameTo,
    SetTableOptions,
    Statement,
    TableMaintenance,
    TableName,
    TransactionStatement,
    TruncateTable,
    Unreadable,
    named_tables,
)

__all__ = [
    "REACHING",
    "SHAPES",
    "Follow",
    "Shape",
    "Verdict",
    "contract_table",
    "judge",
    "shape",
    "statement_shapes",
]


class Follow(enum.Enum):
    """A statement shape's class."""

    MODELED = "followed"
    NO_CHANGE = "no change"
    STOP = "stop"


@attrs.frozen(slots=True)
class Shape:
    """One statement shape: ``name`` as the contract page shows it, its class, what it does to rows and columns,
    the page's ``section`` it is listed under, and ``by_head``: whether its head alone decides its class (objects
    that hold no rows, privileges, transaction control, and the shapes that stop whatever follows the head) -- the
    other shapes are read whole, and text the reader does not know in them makes them ``a statement the reader
    cannot read in full``. ``heals``: of a shape that stops, whether reading its tables again after it makes a copy
    of them exact (the capture heals it under ``heal="snapshot"``)."""

    name: str
    follow: Follow
    description: str
    section: str
    by_head: bool = False
    heals: bool = False

    @property
    def shown(self) -> str:
        """The class the contract page shows: ``healed`` for a shape that stops and heals (by default)."""
        return "healed" if self.follow is Follow.STOP and self.heals else self.follow.value


_TABLES = "Tables"
_ACTIONS = "ALTER TABLE actions"
_PARTITIONS = "Partitions (ALTER TABLE)"
_DATABASES = "Databases"
_ROWS = "Rows logged as statements"
_OTHER = "Everything else"
_M, _N, _S = Follow.MODELED, Follow.NO_CHANGE, Follow.STOP

SHAPES: Final[tuple[Shape, ...]] = (
    # -- tables
    Shape("CREATE TABLE", _M, "a new table (also OR REPLACE, LIKE, and the columns MariaDB logs for a CREATE ... "
          "SELECT under row logging): the history takes its columns, the mirror makes it empty; its rows follow as "
          "row events", _TABLES),
    Shape("CREATE TABLE ... SELECT", _S, "the query itself, logged so under statement-based logging: the rows it "
          "copied are not in the binlog", _TABLES, heals=True),
    Shape("CREATE TEMPORARY TABLE", _N, "a session's own table, never in a row event", _TABLES, by_head=True),
    Shape("DROP TABLE", _M, "the tables and their rows are gone", _TABLES),
    Shape("DROP TEMPORARY TABLE", _N, "a session's own table, never in a row event", _TABLES, by_head=True),
    Shape("a statement on a session's temporary table", _N, "a session's own table shadows the table of its name: "
          "what that session does to it (TRUNCATE, ALTER TABLE, RENAME, DROP, DML) changes nothing else -- the "
          "capture follows each session's temporary tables by the thread id its statements are logged with (a DML "
          "of one shadowing a captured table reads that one again: a restart inside its transaction could not tell)",
          _TABLES),
    Shape("TRUNCATE of a name a session may hold as temporary", _S, "the event's thread-specific flag says the "
          "statement used a temporary table, and the capture did not see one of that name created (before the "
          "dump's start): the table of the schema is read again, whichever it was", _TABLES, heals=True),
    Shape("a layout change of a name a session may hold as temporary", _S, "ALTER TABLE, RENAME TABLE, DROP INDEX "
          "`PRIMARY` or CREATE TABLE ... LIKE with the thread-specific flag, naming a table the capture did not see "
          "a session create a temporary table of: whether the table of the schema changed cannot be told (a CREATE OR "
          "REPLACE of an existing table is flagged by its drop, whatever the session holds: it is followed)",
          _TABLES),
    Shape("a statement on a session's temporary tables and others", _S, "CREATE TABLE ... LIKE a temporary table, "
          "or a RENAME TABLE moving both kinds: a temporary table's layout is not kept", _TABLES),
    Shape("RENAME TABLE", _M, "each pair moves a table with its rows, in order; a captured table renamed to a name "
          "the filter leaves out leaves the capture (the mirror drops it)", _TABLES),
    Shape("RENAME TABLE onto a captured name", _S, "a table the filter leaves out (its rows never captured) "
          "renamed to a captured name: the cut-over of gh-ost or pt-online-schema-change with their own tables "
          "filtered out", _TABLES, heals=True),
    Shape("TRUNCATE TABLE", _M, "every row is gone", _TABLES),
    Shape("CREATE INDEX", _N, "an index (a UNIQUE one the rows fit: a duplicate fails the statement)", _TABLES),
    Shape("DROP INDEX", _N, "an index", _TABLES),
    Shape("DROP INDEX `PRIMARY`", _M, "the primary key goes (the mirror needs one to apply changes)", _TABLES),
    Shape("OPTIMIZE TABLE", _N, "rebuilds the table's storage (InnoDB: recreate and analyze); rows stay", _TABLES),
    Shape("ANALYZE TABLE", _N, "statistics", _TABLES),
    Shape("CHECK TABLE", _N, "reads the table", _TABLES),
    Shape("CHECKSUM TABLE", _N, "reads the table", _TABLES),
    Shape("REPAIR TABLE", _S, "rebuilds a MyISAM, Aria, Archive or CSV table from what it can read: rows it cannot "
          "recover are gone, unlogged", _TABLES, heals=True),
    Shape("ALTER SEQUENCE", _S, "sets a sequence's row (RESTART, ...) without logging it", _TABLES, by_head=True),
    # -- ALTER TABLE actions
    Shape("ADD COLUMN", _M, "the rows take the column's default; the mirror refuses typed a default it cannot "
          "compute (an expression, AUTO_INCREMENT numbering, a generated column)", _ACTIONS),
    Shape("ADD COLUMN ... AS ROW START / ROW END", _M, "a system-versioning period column: the mirror gives the "
          "rows it holds their first version (row_start the statement's start time, row_end TIMESTAMP's maximum)",
          _ACTIONS),
    Shape("DROP COLUMN", _M, "the column and its values are gone", _ACTIONS),
    Shape("CHANGE / MODIFY COLUMN", _M, "a new name, place or type: the values convert as the server converts "
          "them (a narrower type clips or cuts them under a lax sql_mode); the mirror refuses typed a conversion "
          "it cannot repeat exactly", _ACTIONS),
    Shape("RENAME COLUMN", _M, "a new name", _ACTIONS),
    Shape("ALTER COLUMN ... DEFAULT / VISIBLE", _N, "the default of rows inserted later, or whether SELECT * shows "
          "the column", _ACTIONS),
    Shape("ADD PRIMARY KEY", _M, "the key the mirror applies changes by (rows that do not fit fail the ALTER)",
          _ACTIONS),
    Shape("DROP PRIMARY KEY", _M, "the key the mirror applies changes by", _ACTIONS),
    Shape("ADD FOREIGN KEY", _M, "the history keeps its ON DELETE / ON UPDATE actions, which the mirror applies",
          _ACTIONS),
    Shape("DROP FOREIGN KEY / CONSTRAINT", _M, "the history forgets the key's actions", _ACTIONS),
    Shape("ADD INDEX / UNIQUE / FULLTEXT / SPATIAL", _N, "an index (a UNIQUE one the rows fit: a duplicate fails "
          "the ALTER)", _ACTIONS),
    Shape("DROP INDEX / KEY", _N, "an index", _ACTIONS),
    Shape("RENAME INDEX / KEY", _N, "an index's name", _ACTIONS),
    Shape("ADD / DROP CHECK", _N, "a constraint the rows satisfy (one that does not fails the ALTER)", _ACTIONS),
    Shape("ADD / DROP PERIOD", _N, "an application-time period over two columns", _ACTIONS),
    Shape("ALTER INDEX ... IGNORED / VISIBLE, ALTER CHECK ... ENFORCED", _N, "how the optimizer or the "
          "server uses a key or a check", _ACTIONS),
    Shape("RENAME TO", _M, "the table moves with its rows (out of the capture, or onto a captured name, as RENAME "
          "TABLE)", _ACTIONS),
    Shape("CONVERT TO CHARACTER SET", _M, "text columns convert to the character set (TEXT types grow to keep "
          "their characters)", _ACTIONS),
    Shape("DEFAULT CHARSET / COLLATE", _M, "the default of columns added later", _ACTIONS),
    Shape("ENGINE = a row-keeping engine", _N, "InnoDB, MyISAM, Aria, MEMORY, RocksDB, Archive or CSV: the rows "
          "move to it", _ACTIONS),
    Shape("ENGINE = another engine", _S, "BLACKHOLE keeps no rows; FEDERATED, CONNECT, MERGE and others read "
          "rows from elsewhere (in CREATE TABLE too)", _ACTIONS),
    Shape("table options", _N, "COMMENT, AUTO_INCREMENT, ROW_FORMAT, KEY_BLOCK_SIZE, STATS_*, compression, "
          "encryption, directories and the like", _ACTIONS),
    Shape("a table option pycanal does not know", _S, "UNION (MERGE), CONNECTION (FEDERATED), SEQUENCE, or any "
          "other (in CREATE TABLE too): what it does to rows cannot be told", _ACTIONS),
    Shape("ALGORITHM / LOCK / FORCE / VALIDATION", _N, "how the server runs the ALTER (FORCE rebuilds the table)",
          _ACTIONS),
    Shape("ORDER BY", _N, "the rows' order on disk", _ACTIONS),
    Shape("ENABLE / DISABLE KEYS", _N, "index maintenance", _ACTIONS),
    Shape("SECONDARY_LOAD / SECONDARY_UNLOAD", _N, "MySQL HeatWave's copy of the table", _ACTIONS),
    Shape("DISCARD / IMPORT TABLESPACE", _S, "the table's rows leave with its tablespace file, or arrive with "
          "another one", _ACTIONS),
    Shape("ADD / DROP SYSTEM VERSIONING", _M, "adds the row_start / row_end columns (also WITH SYSTEM VERSIONING in "
          "CREATE TABLE): the mirror holds every row version, the rows it holds getting their first one; DROP drops "
          "the history rows with the period columns", _ACTIONS),
    Shape("ALTER IGNORE TABLE ... a unique key", _S, "deletes all but one of the rows that share a key, unlogged",
          _ACTIONS, heals=True),
    Shape("ALTER IGNORE TABLE ... repartitioning", _S, "deletes the rows no new partition takes, unlogged",
          _ACTIONS, heals=True),
    Shape("ALTER TABLE without actions", _N, "nothing", _ACTIONS),
    Shape("an ALTER TABLE action the reader cannot read", _S, "what it does cannot be told", _ACTIONS),
    # -- partitions
    Shape("ADD PARTITION", _N, "new, empty partitions (of HASH / KEY partitioning: the rows spread over them, all "
          "kept)", _PARTITIONS),
    Shape("DROP PARTITION", _S, "deletes the partitions' rows, unlogged", _PARTITIONS, heals=True),
    Shape("TRUNCATE PARTITION", _S, "deletes the partitions' rows, unlogged", _PARTITIONS, heals=True),
    Shape("EXCHANGE PARTITION ... WITH TABLE", _S, "swaps a partition's rows with the other table's, unlogged "
          "(both tables named)", _PARTITIONS, heals=True),
    Shape("CONVERT PARTITION ... TO TABLE", _S, "moves a partition's rows into a new table, unlogged (both "
          "tables named)", _PARTITIONS, heals=True),
    Shape("CONVERT TABLE ... TO PARTITION", _S, "moves a table's rows into a new partition, unlogged (both "
          "tables named)", _PARTITIONS, heals=True),
    Shape("COALESCE PARTITION", _N, "fewer HASH / KEY partitions: the rows spread over the rest, all kept",
          _PARTITIONS),
    Shape("REORGANIZE PARTITION", _N, "RANGE partitions split or merged (the new ones cover the old ones' ranges: "
          "the server refuses otherwise), or HASH / KEY partitioning rebuilt: every row is kept", _PARTITIONS),
    Shape("REORGANIZE PARTITION ... VALUES IN", _S, "LIST partitions reorganized: MariaDB deletes the rows whose "
          "values the new lists lack, unlogged and without an error (measured on 10.11)", _PARTITIONS, heals=True),
    Shape("ANALYZE / CHECK / OPTIMIZE / REBUILD PARTITION", _N, "statistics, reads, or a rebuild of the "
          "partitions' storage; rows stay", _PARTITIONS),
    Shape("REPAIR PARTITION", _S, "as REPAIR TABLE: rows it cannot recover are gone", _PARTITIONS, heals=True),
    Shape("DISCARD / IMPORT PARTITION ... TABLESPACE", _S, "the partitions' rows leave with their tablespace "
          "files, or arrive with others", _PARTITIONS),
    Shape("PARTITION BY", _N, "new partitioning: every row goes to its new partition (the server refuses a row "
          "none takes)", _PARTITIONS),
    Shape("REMOVE PARTITIONING", _N, "one partition again, with every row", _PARTITIONS),
    Shape("UPGRADE PARTITIONING", _N, "MySQL 5.7's native partitioning; rows stay", _PARTITIONS),
    # -- databases
    Shape("CREATE DATABASE", _M, "the history keeps its default character set (OR REPLACE drops the tables of "
          "the one it replaces)", _DATABASES, by_head=True),
    Shape("DROP DATABASE", _M, "every table in it is dropped", _DATABASES, by_head=True),
    Shape("ALTER DATABASE", _M, "the default character set of tables created later (a database's options "
          "change no rows)", _DATABASES, by_head=True),
    # -- rows logged as statements
    Shape("INSERT / REPLACE / UPDATE / DELETE / LOAD DATA", _S, "a session with binlog_format STATEMENT or MIXED: "
          "the rows it changed are not in the binlog. Every captured table it can reach heals: its tables (a "
          "view's base tables), what its table's triggers and the stored functions it calls write, and the "
          "children its foreign keys' ON DELETE / ON UPDATE actions change -- or every captured table, where that "
          "cannot be told (no schema history, a definition the capture user cannot read, SQL built at run time)",
          _ROWS, by_head=True, heals=True),
    Shape("SELECT / DO calling stored functions", _S, "logged as a statement when a stored function it calls "
          "writes: every captured table those functions can reach heals, as for DML", _ROWS, by_head=True,
          heals=True),
    # -- everything else
    Shape("transaction control", _M, "BEGIN, COMMIT, ROLLBACK, savepoints and XA: the boundaries the capture "
          "hands transactions out by", _OTHER, by_head=True),
    Shape("views, routines, triggers, events, servers, tablespaces", _N, "CREATE / ALTER / DROP of objects that "
          "hold no rows. The schema history keeps views, triggers, functions and procedures: what a statement "
          "logged as a statement reaches through them heals (under row logging their writes are logged as rows)",
          _OTHER, by_head=True),
    Shape("users, roles and privileges", _N, "GRANT, REVOKE, CREATE / ALTER / DROP / RENAME USER and ROLE, SET "
          "PASSWORD (their text is never shown)", _OTHER, by_head=True),
    Shape("FLUSH", _N, "caches, logs and locks", _OTHER, by_head=True),
    Shape("SET, USE", _N, "a session's variables and database", _OTHER, by_head=True),
    Shape("no statement", _N, "an event of comments only", _OTHER, by_head=True),
    Shape("a statement pycanal does not know", _S, "which tables it changes, and how, cannot be told", _OTHER,
          by_head=True),
    Shape("a statement the reader cannot read in full", _S, "text the reader does not know after its head: what "
          "it does cannot be told", _OTHER, by_head=True),
)  # fmt: skip

_BY_NAME: Final = {s.name: s for s in SHAPES}

REACHING: Final = frozenset({"INSERT / REPLACE / UPDATE / DELETE / LOAD DATA", "SELECT / DO calling stored functions"})
"""The shapes of statements logged as statements whose rows are not in the binlog: what they change is what they can
reach (:mod:`canal.schema.reach`), not only the tables they name."""
assert len(_BY_NAME) == len(SHAPES), "two shapes of one name"


def shape(name: str) -> Shape:
    """The shape of that name (KeyError for a name :data:`SHAPES` does not declare)."""
    return _BY_NAME[name]


@attrs.frozen(slots=True)
class Verdict:
    """What the contract says about the statements of one query event.

    ``shapes``: what they are made of, in order, without repeats; ``follow``: the class that wins (``stop`` over
    ``followed`` over ``no change``); ``stops``: the shapes that stop; ``tables``: the tables they touch, as
    written (unqualified names take the event's database); ``tables_known``: False when which tables they touch
    cannot be told (an unknown statement, a multi-table DML, an unreadable part that may name one)."""

    shapes: tuple[Shape, ...]
    tables: tuple[TableName, ...]
    tables_known: bool

    @property
    def follow(self) -> Follow:
        classes = {s.follow for s in self.shapes}
        for follow in (Follow.STOP, Follow.MODELED):
            if follow in classes:
                return follow
        return Follow.NO_CHANGE

    @property
    def stops(self) -> tuple[Shape, ...]:
        return tuple(s for s in self.shapes if s.follow is Follow.STOP)

    @property
    def heals(self) -> bool:
        """Whether reading the tables again after the statements makes a copy of them exact: every shape that stops
        heals, and the statements say which tables they touch."""
        stops = self.stops
        return bool(stops) and self.tables_known and all(s.heals for s in stops)


def judge(statements: Sequence[Statement]) -> Verdict:
    """The verdict on a query event's statements (as :func:`canal.sql.read_statements` read them, leniently)."""
    if not statements:
        return Verdict((shape("no statement"),), (), True)
    shapes: list[Shape] = []
    tables: list[TableName] = []
    known = True
    for stmt in statements:
        shapes.extend(statement_shapes(stmt))
        tables.extend(named_tables(stmt))
        known = known and _tables_known(stmt)
    return Verdict(tuple(dict.fromkeys(shapes)), tuple(dict.fromkeys(tables)), known)


def statement_shapes(stmt: Statement) -> tuple[Shape, ...]:
    """The shapes one statement is made of: one, or an ALTER TABLE's actions' (in order, without repeats)."""
    if isinstance(stmt, AlterTable):
        if not stmt.actions:
            return (shape("ALTER TABLE without actions"),)
        found = [s for action in stmt.actions for s in _action_shapes(action, stmt.ignore)]
        return tuple(dict.fromkeys(found))
    first = shape(_statement_shape(stmt))
    if isinstance(stmt, CreateTable) and first.name == "CREATE TABLE":
        # a new table's engine and options decide whether SELECT shows the rows its row events log (BLACKHOLE:
        # none of them)
        stops = [shape(_option_shape(o.name, o.value)) for o in stmt.options]
        return tuple(dict.fromkeys([first, *(s for s in stops if s.follow is Follow.STOP)]))
    return (first,)


_MAINTENANCE: Final = {"OPTIMIZE", "ANALYZE", "CHECK", "CHECKSUM", "REPAIR"}
# objects that hold no rows, whose CREATE / ALTER / DROP the reader reads by their head
_NO_ROW_OBJECTS: Final = frozenset(
    {"VIEW", "PROCEDURE", "FUNCTION", "TRIGGER", "EVENT", "PACKAGE", "SYNONYM", "SERVER", "TABLESPACE", "LOGFILE"}
)


def _statement_shape(stmt: Statement) -> str:
    if isinstance(stmt, CreateTable):
        if stmt.temporary:
            return "CREATE TEMPORARY TABLE"
        return "CREATE TABLE ... SELECT" if stmt.as_select is not None else "CREATE TABLE"
    if isinstance(stmt, DropTable):
        return "DROP TEMPORARY TABLE" if stmt.temporary else "DROP TABLE"
    if isinstance(stmt, RenameTable):
        return "RENAME TABLE"
    if isinstance(stmt, TruncateTable):
        return "TRUNCATE TABLE"
    if isinstance(stmt, CreateIndex):
        return "CREATE INDEX"
    if isinstance(stmt, DropIndexStatement):
        return "DROP INDEX `PRIMARY`" if stmt.name.upper() == "PRIMARY" else "DROP INDEX"
    if isinstance(stmt, CreateDatabase):
        return "CREATE DATABASE"
    if isinstance(stmt, DropDatabase):
        return "DROP DATABASE"
    if isinstance(stmt, AlterDatabase):
        return "ALTER DATABASE"
    if isinstance(stmt, TableMaintenance):
        return f"{stmt.verb} TABLE"
    if isinstance(stmt, DmlStatement):
        return "INSERT / REPLACE / UPDATE / DELETE / LOAD DATA"
    if isinstance(stmt, TransactionStatement):
        return "transaction control"
    if isinstance(stmt, Grant):
        return "users, roles and privileges"
    if isinstance(stmt, Unreadable):
        return "a statement the reader cannot read in full"
    assert isinstance(stmt, OtherStatement)
    return _other_shape(stmt)


def _other_shape(stmt: OtherStatement) -> str:
    if stmt.kind is QueryKind.DCL:
        return "users, roles and privileges"
    words = stmt.verb.split()
    if stmt.verb == "ALTER SEQUENCE":
        return "ALTER SEQUENCE"
    if len(words) == 2 and words[0] in ("CREATE", "ALTER", "DROP") and words[1] in _NO_ROW_OBJECTS:
        return "views, routines, triggers, events, servers, tablespaces"
    if stmt.verb in ("SET", "USE"):
        return "SET, USE"
    if stmt.verb in ("SELECT", "DO"):  # the server logs one only when a stored function it calls writes
        return "SELECT / DO calling stored functions"
    if stmt.verb == "FLUSH":
        return "FLUSH"
    return "a statement pycanal does not know"


# engines a table's rows move into when ALTER TABLE ... ENGINE = names them
_ROW_KEEPING_ENGINES: Final = frozenset(
    {"INNODB", "XTRADB", "MYISAM", "ARIA", "MEMORY", "HEAP", "ROCKSDB", "ARCHIVE", "CSV"}
)
# table options that change neither rows nor columns
_HARMLESS_OPTIONS: Final = frozenset(
    {"AUTO_INCREMENT", "AVG_ROW_LENGTH", "CHECKSUM", "TABLE_CHECKSUM", "COMMENT", "COMPRESSION", "DATA DIRECTORY",
     "INDEX DIRECTORY", "DELAY_KEY_WRITE", "ENCRYPTED", "ENCRYPTION", "ENCRYPTION_KEY_ID", "IETF_QUOTES",
     "INSERT_METHOD", "KEY_BLOCK_SIZE", "MAX_ROWS", "MIN_ROWS", "PACK_KEYS", "PAGE_CHECKSUM", "PAGE_COMPRESSED",
     "PAGE_COMPRESSION_LEVEL", "ROW_FORMAT", "STATS_AUTO_RECALC", "STATS_PERSISTENT", "STATS_SAMPLE_PAGES",
     "TABLESPACE", "TRANSACTIONAL", "ENGINE_ATTRIBUTE", "SECONDARY_ENGINE", "SECONDARY_ENGINE_ATTRIBUTE",
     "AUTOEXTEND_SIZE"}
)  # fmt: skip
_PARTITION_SHAPES: Final = {
    "ADD PARTITION": "ADD PARTITION",
    "DROP PARTITION": "DROP PARTITION",
    "TRUNCATE PARTITION": "TRUNCATE PARTITION",
    "EXCHANGE PARTITION": "EXCHANGE PARTITION ... WITH TABLE",
    "CONVERT PARTITION": "CONVERT PARTITION ... TO TABLE",
    "CONVERT TABLE": "CONVERT TABLE ... TO PARTITION",
    "COALESCE PARTITION": "COALESCE PARTITION",
    "REORGANIZE PARTITION": "REORGANIZE PARTITION",
    "ANALYZE PARTITION": "ANALYZE / CHECK / OPTIMIZE / REBUILD PARTITION",
    "CHECK PARTITION": "ANALYZE / CHECK / OPTIMIZE / REBUILD PARTITION",
    "OPTIMIZE PARTITION": "ANALYZE / CHECK / OPTIMIZE / REBUILD PARTITION",
    "REBUILD PARTITION": "ANALYZE / CHECK / OPTIMIZE / REBUILD PARTITION",
    "REPAIR PARTITION": "REPAIR PARTITION",
    "DISCARD PARTITION": "DISCARD / IMPORT PARTITION ... TABLESPACE",
    "IMPORT PARTITION": "DISCARD / IMPORT PARTITION ... TABLESPACE",
    "PARTITION BY": "PARTITION BY",
    "REMOVE PARTITIONING": "REMOVE PARTITIONING",
    "UPGRADE PARTITIONING": "UPGRADE PARTITIONING",
}
_OTHER_ACTION_SHAPES: Final = {
    "ORDER BY": "ORDER BY",
    "ENABLE KEYS": "ENABLE / DISABLE KEYS",
    "DISABLE KEYS": "ENABLE / DISABLE KEYS",
    "SECONDARY_LOAD": "SECONDARY_LOAD / SECONDARY_UNLOAD",
    "SECONDARY_UNLOAD": "SECONDARY_LOAD / SECONDARY_UNLOAD",
    "DISCARD TABLESPACE": "DISCARD / IMPORT TABLESPACE",
    "IMPORT TABLESPACE": "DISCARD / IMPORT TABLESPACE",
    "ADD SYSTEM VERSIONING": "ADD / DROP SYSTEM VERSIONING",
    "DROP SYSTEM VERSIONING": "ADD / DROP SYSTEM VERSIONING",
    "ADD PERIOD": "ADD / DROP PERIOD",
    "DROP PERIOD": "ADD / DROP PERIOD",
    "ALTER INDEX": "ALTER INDEX ... IGNORED / VISIBLE, ALTER CHECK ... ENFORCED",
    "ALTER CHECK": "ALTER INDEX ... IGNORED / VISIBLE, ALTER CHECK ... ENFORCED",
    "ALTER CONSTRAINT": "ALTER INDEX ... IGNORED / VISIBLE, ALTER CHECK ... ENFORCED",
}
_UNIQUE_UNDER_IGNORE: Final = "ALTER IGNORE TABLE ... a unique key"


def _action_shapes(action: AlterAction, ignore: bool) -> list[Shape]:
    names = _action_shape_names(action)
    if ignore and _adds_unique_key(action):
        names.append(_UNIQUE_UNDER_IGNORE)
    if ignore and isinstance(action, PartitionAction) and action.verb in ("PARTITION BY", "REORGANIZE PARTITION"):
        names.append("ALTER IGNORE TABLE ... repartitioning")
    return [shape(name) for name in names]


def _action_shape_names(action: AlterAction) -> list[str]:
    if isinstance(action, AddColumn | ChangeColumn):
        if action.column.row_period is not None:
            return ["ADD COLUMN ... AS ROW START / ROW END"]
        return ["ADD COLUMN" if isinstance(action, AddColumn) else "CHANGE / MODIFY COLUMN"]
    if isinstance(action, DropColumn):
        return ["DROP COLUMN"]
    if isinstance(action, RenameColumn):
        return ["RENAME COLUMN"]
    if isinstance(action, AlterColumn):
        return ["ALTER COLUMN ... DEFAULT / VISIBLE"]
    if isinstance(action, AddKey):
        key = action.key
        if isinstance(key, ForeignKeyDef):
            return ["ADD FOREIGN KEY"]
        if isinstance(key, CheckDef):
            return ["ADD / DROP CHECK"]
        return ["ADD PRIMARY KEY" if key.kind == "PRIMARY" else "ADD INDEX / UNIQUE / FULLTEXT / SPATIAL"]
    if isinstance(action, DropKey):
        if action.kind == "PRIMARY KEY" or (action.name or "").upper() == "PRIMARY":
            return ["DROP PRIMARY KEY"]
        if action.kind in ("FOREIGN KEY", "CONSTRAINT"):
            return ["DROP FOREIGN KEY / CONSTRAINT"]
        return ["ADD / DROP CHECK" if action.kind == "CHECK" else "DROP INDEX / KEY"]
    if isinstance(action, RenameIndex):
        return ["RENAME INDEX / KEY"]
    if isinstance(action, RenameTo):
        return ["RENAME TO"]
    if isinstance(action, ConvertCharset):
        return ["CONVERT TO CHARACTER SET"]
    if isinstance(action, SetTableOptions):
        return [_option_shape(option.name, option.value) for option in action.options]
    if isinstance(action, AlterOption):
        return ["ALGORITHM / LOCK / FORCE / VALIDATION"]
    if isinstance(action, PartitionAction):
        if action.verb == "REORGANIZE PARTITION" and action.value_lists:
            return ["REORGANIZE PARTITION ... VALUES IN"]
        return [_PARTITION_SHAPES[action.verb]]
    assert isinstance(action, OtherAction)
    if action.error is not None or action.head not in _OTHER_ACTION_SHAPES:
        return ["an ALTER TABLE action the reader cannot read"]
    return [_OTHER_ACTION_SHAPES[action.head]]


def _option_shape(name: str, value: str) -> str:
    if name in ("CHARSET", "COLLATE"):
        return "DEFAULT CHARSET / COLLATE"
    if name in ("ENGINE", "TYPE"):
        return "ENGINE = a row-keeping engine" if value.upper() in _ROW_KEEPING_ENGINES else "ENGINE = another engine"
    if name == "WITH SYSTEM VERSIONING":
        return "ADD / DROP SYSTEM VERSIONING"
    return "table options" if name in _HARMLESS_OPTIONS else "a table option pycanal does not know"


def _adds_unique_key(action: AlterAction) -> bool:
    """A unique key the ALTER builds over existing rows (a column's inline UNIQUE / PRIMARY KEY, or a key)."""
    if isinstance(action, AddColumn | ChangeColumn):
        return action.column.unique or action.column.primary_key
    return isinstance(action, AddKey) and isinstance(action.key, IndexDef) and action.key.kind in ("PRIMARY", "UNIQUE")


# the first word of an ALTER TABLE action that can name no table but the altered one
_ACTIONS_ON_ONE_TABLE: Final = frozenset(
    {"ADD", "DROP", "MODIFY", "CHANGE", "ALTER", "ALGORITHM", "LOCK", "FORCE", "ORDER", "ENABLE", "DISABLE",
     "TRUNCATE", "COALESCE", "REORGANIZE", "ANALYZE", "CHECK", "OPTIMIZE", "REBUILD", "REPAIR", "DISCARD", "IMPORT",
     "REMOVE", "PARTITION", "UPGRADE", "WITH", "WITHOUT", ","}
)  # fmt: skip


def _tables_known(stmt: Statement) -> bool:
    """Whether :func:`~canal.sql.statements.named_tables` names every table the statement may change."""
    if isinstance(stmt, DmlStatement):
        return stmt.table is not None
    if isinstance(stmt, Unreadable):
        # read whole and followed by unknown text (its tables known), or cut short where a RENAME's next pair
        # or the name itself would be
        return bool(stmt.tables) and stmt.verb != "RENAME TABLE"
    if isinstance(stmt, OtherStatement):
        # a SELECT / DO names no table the functions it calls write
        return _other_shape(stmt) not in ("a statement pycanal does not know", "SELECT / DO calling stored functions")
    if isinstance(stmt, AlterTable):
        return all(
            action.head.split(" ", 1)[0] in _ACTIONS_ON_ONE_TABLE
            for action in stmt.actions
            if isinstance(action, OtherAction) and action.error is not None
        )
    return True


# -- the contract page's table ----------------------------------------------------------------------------------------


def contract_table() -> str:
    """The statement table of docs/concepts/fail-closed.md, in markdown: one table per section of :data:`SHAPES`."""
    out: list[str] = []
    sections = list(dict.fromkeys(s.section for s in SHAPES))
    for section in sections:
        out += [f"**{section}**", "", "| statement | pycanal | what it does to rows and columns |", "|---|---|---|"]
        for s in SHAPES:
            if s.section == section:
                out.append(f"| {_cell(s.name)} | {s.shown} | {_cell(s.description)} |")
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
