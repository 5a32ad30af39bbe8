"""Table layouts as the server holds them now, read from ``information_schema``: the queries of the schema history's
bootstrap (every table, or one table), the foreign keys read from ``SHOW CREATE TABLE``, and the
:class:`~canal.schema.SchemaCatalog` built from their rows (:func:`catalog_from_columns`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Final

import attrs

from canal.errors import CanalError, SchemaError
from canal.names import qualified, split_qualified
from canal.schema.catalog import SchemaCatalog, TableDef
from canal.schema.columns import TableColumn, expression_names
from canal.schema.foreign_keys import ForeignKey, normal_action
from canal.schema.history import SchemaColumn, layout_statement
from canal.schema.keys import TableKey
from canal.schema.objects import EVERY_DATABASE, ObjectCatalog, Routine, Trigger, View
from canal.sql import CreateTable
from canal.sql.objects import read_uses

log = logging.getLogger(__name__)

__all__ = [
    "BOOTSTRAP_DATABASES_SQL",
    "BOOTSTRAP_FOREIGN_KEYS_SQL",
    "BOOTSTRAP_GRANTS_SQL",
    "BOOTSTRAP_KEYS_SQL",
    "BOOTSTRAP_ROUTINES_SQL",
    "BOOTSTRAP_SCHEMA_GRANTS_SQL",
    "BOOTSTRAP_SQL",
    "BOOTSTRAP_TRIGGERS_SQL",
    "BOOTSTRAP_VERSIONED_SQL",
    "BOOTSTRAP_VIEWS_SQL",
    "COLUMN_SOURCE_SQL",
    "ROUTINES_VISIBLE_SQL",
    "TABLE_COLUMNS_SQL",
    "TABLE_KEYS_SQL",
    "catalog_from_columns",
    "foreign_key_rows",
    "objects_from_rows",
    "read_objects",
    "schema_columns",
    "versioned_table",
]


def catalog_from_columns(
    rows: Sequence[Sequence[Any]],
    key_rows: Sequence[Sequence[Any]],
    *,
    charset: str,
    mariadb: bool,
    foreign_key_rows: Sequence[Sequence[Any]] = (),
) -> SchemaCatalog:
    """A catalog from ``information_schema`` rows: columns (:data:`BOOTSTRAP_SQL`; rows without its last two
    fields, ``EXTRA`` and ``GENERATION_EXPRESSION``, know no computed columns), keys (:data:`BOOTSTRAP_KEYS_SQL`)
    and foreign keys (:data:`BOOTSTRAP_FOREIGN_KEYS_SQL`)."""
    from canal.sql import read_column_type

    catalog = SchemaCatalog(charset=charset, mariadb=mariadb)
    columns: dict[str, list[TableColumn]] = {}
    primary, others = _keys(key_rows)
    promoted: dict[str, set[str]] = {}  # COLUMN_KEY 'PRI' of a table without a primary key: the key it promotes
    charsets: dict[str, str] = {}
    for db, table, name, column_type, nullable, key, column_charset, table_collation, *computed in rows:
        full = qualified(str(db), str(table))
        if str(key) == "PRI":
            promoted.setdefault(full, set()).add(str(name).lower())
        ct = read_column_type(str(column_type), strict=False)
        extra, expression = (str(computed[0] or ""), computed[1]) if len(computed) == 2 else ("", None)
        columns.setdefault(full, []).append(
            TableColumn(
                str(name),
                ct.base,
                ct.params,
                ct.labels,
                ct.unsigned,
                ct.zerofill,
                str(nullable) == "YES",
                None if column_charset is None else str(column_charset),
                auto_increment="auto_increment" in extra.lower(),
                generated=str(expression) if expression and "generated" in extra.lower() else None,
                virtual_of=expression_names(str(expression or "")) if "virtual" in extra.lower() else None,
            )
        )
        if table_collation:
            charsets[full] = str(table_collation).split("_", 1)[0]
        catalog.databases.setdefault(str(db), None)
    keys: dict[str, dict[str, ForeignKey]] = {}
    for db, table, name, column, ref_db, ref_table, ref_column, on_delete, on_update in foreign_key_rows:
        of_table = keys.setdefault(qualified(str(db), str(table)), {})
        key = of_table.get(str(name)) or ForeignKey(
            str(name), (), str(ref_db), str(ref_table), (), normal_action(on_delete), normal_action(on_update)
        )
        of_table[str(name)] = attrs.evolve(
            key, columns=(*key.columns, str(column)), ref_columns=(*key.ref_columns, str(ref_column))
        )
    for full, cols in columns.items():
        db, table = split_qualified(full)
        found = others.get(full, [])
        if full not in primary and full in promoted:
            # the key the server promotes first, whatever order information_schema listed the keys in
            found.sort(key=lambda k: {c.lower() for c in k.columns} != promoted[full])
        catalog.tables[full] = TableDef(
            db,
            table,
            tuple(cols),
            tuple(primary.get(full, ())),
            charsets.get(full, charset),
            tuple(keys.get(full, {}).values()),
            tuple(found),  # the server's order, as information_schema lists it
        )
    return catalog


def _keys(key_rows: Sequence[Sequence[Any]]) -> tuple[dict[str, list[str]], dict[str, list[TableKey]]]:
    """Each table's primary key and its other keys (in the order information_schema lists them: the server's), from
    rows of :data:`BOOTSTRAP_KEYS_SQL`, each key's parts in their order."""
    parts: dict[str, dict[str, list[tuple[int, str, int | None]]]] = {}
    unique: dict[tuple[str, str], bool] = {}
    for db, table, index, seq, column, sub_part, non_unique in key_rows:
        full, name = qualified(str(db), str(table)), str(index)
        parts.setdefault(full, {}).setdefault(name, []).append(
            (int(seq), str(column), None if sub_part is None else int(sub_part))
        )
        unique[(full, name)] = str(non_unique) == "0"
    primary: dict[str, list[str]] = {}
    others: dict[str, list[TableKey]] = {}
    for full, indexes in parts.items():
        for name, found in indexes.items():
            ordered = sorted(found)
            if name == "PRIMARY":
                primary[full] = [column for _, column, _ in ordered]
            else:
                key = TableKey(name, tuple((column, length) for _, column, length in ordered), unique[(full, name)])
                others.setdefault(full, []).append(key)
    return primary, others


_COLUMNS_SQL = (
    "SELECT c.TABLE_SCHEMA, c.TABLE_NAME, c.COLUMN_NAME, c.COLUMN_TYPE, c.IS_NULLABLE, c.COLUMN_KEY, "
    "c.CHARACTER_SET_NAME, t.TABLE_COLLATION, c.EXTRA, c.GENERATION_EXPRESSION "
    "FROM information_schema.COLUMNS c JOIN information_schema.TABLES t "
    "ON t.TABLE_SCHEMA = c.TABLE_SCHEMA AND t.TABLE_NAME = c.TABLE_NAME "
    "WHERE t.TABLE_TYPE = 'BASE TABLE' AND c.TABLE_SCHEMA NOT IN "
    "('mysql', 'information_schema', 'performance_schema', 'sys') "
)
_COLUMNS_ORDER = "ORDER BY c.TABLE_SCHEMA, c.TABLE_NAME, c.ORDINAL_POSITION"
_KEYS_SQL = (
    "SELECT TABLE_SCHEMA, TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX, COLUMN_NAME, SUB_PART, NON_UNIQUE "
    "FROM information_schema.STATISTICS WHERE COLUMN_NAME IS NOT NULL "
    "AND TABLE_SCHEMA NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys') "
)

BOOTSTRAP_SQL: Final = _COLUMNS_SQL + _COLUMNS_ORDER
"""One query for every table's columns (the server's own schemas aside): the history's bootstrap."""

TABLE_COLUMNS_SQL: Final = _COLUMNS_SQL + "AND c.TABLE_SCHEMA = %s AND c.TABLE_NAME = %s " + _COLUMNS_ORDER
""":data:`BOOTSTRAP_SQL` for one table (arguments: database, table)."""

COLUMN_SOURCE_SQL: Final = (
    "SELECT COLUMN_NAME, COLUMN_KEY, COLUMN_TYPE FROM information_schema.COLUMNS "
    "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION"
)
"""One table's columns (name, key, type) for a table map without names, when no schema history is kept: read as
:func:`schema_columns`."""


def schema_columns(rows: Sequence[Sequence[Any]]) -> list[SchemaColumn]:
    """The columns of :data:`COLUMN_SOURCE_SQL`'s rows, as a row decoder takes them for a table map without names
    (:meth:`canal.parse.mysql.source.MysqlBinlogSource.columns`): an ENUM's or SET's labels read from its type."""
    out = []
    for name, key, ctype in rows:
        ctype = str(ctype)
        labels: tuple[str, ...] = ()
        if ctype.startswith(("enum(", "set(")):
            inner = ctype[ctype.index("(") + 1 : -1]
            labels = tuple(x[1:-1].replace("''", "'") for x in _split_labels(inner))
        out.append(
            SchemaColumn(
                name=str(name),
                is_key=str(key) == "PRI",
                labels=labels,
                unsigned=("unsigned" in ctype) if not ctype.startswith(("enum", "set")) else None,
                column_type=ctype,
            )
        )
    return out


def _split_labels(inner: str) -> list[str]:
    out: list[str] = []
    cur = ""
    quoted = False
    i = 0
    while i < len(inner):
        ch = inner[i]
        if ch == "'":
            if quoted and i + 1 < len(inner) and inner[i + 1] == "'":
                cur += "''"
                i += 2
                continue
            quoted = not quoted
            cur += ch
        elif ch == "," and not quoted:
            out.append(cur)
            cur = ""
        else:
            cur += ch
        i += 1
    if cur:
        out.append(cur)
    return out


BOOTSTRAP_KEYS_SQL: Final = _KEYS_SQL
"""Every table's keys: the primary one (``PRIMARY``) and the others, a row per part. Unordered on purpose: the server
lists a table's keys in its own order of keys, which decides the UNIQUE key it promotes to a primary key where the
table has none (:mod:`canal.schema.keys`); ``COLUMNS.COLUMN_KEY`` (``PRI`` for that key's columns) confirms it."""

TABLE_KEYS_SQL: Final = _KEYS_SQL + "AND TABLE_SCHEMA = %s AND TABLE_NAME = %s"
""":data:`BOOTSTRAP_KEYS_SQL` for one table (arguments: database, table)."""

BOOTSTRAP_FOREIGN_KEYS_SQL: Final = (
    "SELECT DISTINCT TABLE_SCHEMA, TABLE_NAME FROM information_schema.KEY_COLUMN_USAGE "
    "WHERE REFERENCED_TABLE_NAME IS NOT NULL AND TABLE_SCHEMA NOT IN "
    "('mysql', 'information_schema', 'performance_schema', 'sys') ORDER BY TABLE_SCHEMA, TABLE_NAME"
)
"""The tables with foreign keys, whose ``SHOW CREATE TABLE`` tells their keys' actions (:func:`foreign_key_rows`):
``REFERENTIAL_CONSTRAINTS``, which holds the actions, shows a user with only SELECT nothing."""


def foreign_key_rows(db: str, create_table: str) -> list[tuple[str, str, str, str, str, str, str, str, str]]:
    """The foreign keys of ``SHOW CREATE TABLE`` text ``create_table`` of a table in ``db``, a row per column, as
    :func:`catalog_from_columns` takes them: (db, table, name, column, ref_db, ref_table, ref_column, on_delete,
    on_update)."""
    stmt = layout_statement(create_table)
    if not isinstance(stmt, CreateTable):
        raise SchemaError(f"cannot read the foreign keys of {db}: {create_table[:200]!r}")
    scratch = SchemaCatalog(database=db)
    scratch.apply(attrs.evolve(stmt, table=attrs.evolve(stmt.table, schema=db)))
    table = scratch.get(db, stmt.table.name)
    assert table is not None
    return [
        (db, table.name, k.name, column, k.ref_db, k.ref_table, ref, k.on_delete, k.on_update)
        for k in table.foreign_keys
        for column, ref in zip(k.columns, k.ref_columns, strict=True)
    ]


BOOTSTRAP_VERSIONED_SQL: Final = (
    "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES WHERE TABLE_TYPE = 'SYSTEM VERSIONED' AND "
    "TABLE_SCHEMA NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys') ORDER BY TABLE_SCHEMA, TABLE_NAME"
)
"""MariaDB's system-versioned tables, whose layouts their ``SHOW CREATE TABLE`` tells (:func:`versioned_table`):
``COLUMNS`` lists no implicit ``row_start`` / ``row_end`` and ``STATISTICS`` no ``row_end`` in the primary key, where
the binlog's row images and keys have them."""


def versioned_table(db: str, create_table: str, *, mariadb: bool) -> TableDef:
    """The layout of a system-versioned table of ``db`` from its ``SHOW CREATE TABLE`` text, as the one DDL code
    (:class:`SchemaCatalog`) makes it: its period columns, and the period's end in its primary key."""
    stmt = layout_statement(create_table)
    if not isinstance(stmt, CreateTable):
        raise SchemaError(f"cannot read the layout of a system-versioned table of {db}: {create_table[:200]!r}")
    scratch = SchemaCatalog(database=db, mariadb=mariadb)
    scratch.apply(attrs.evolve(stmt, table=attrs.evolve(stmt.table, schema=db)))
    table = scratch.get(db, stmt.table.name)
    assert table is not None
    return table


BOOTSTRAP_DATABASES_SQL: Final = (
    "SELECT SCHEMA_NAME, DEFAULT_CHARACTER_SET_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME NOT IN "
    "('mysql', 'information_schema', 'performance_schema', 'sys')"
)
"""The databases and their default charsets (a table created later without a charset takes its database's)."""


_NOT_SYSTEM: Final = "NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')"

BOOTSTRAP_VIEWS_SQL: Final = (
    f"SELECT TABLE_SCHEMA, TABLE_NAME, VIEW_DEFINITION FROM information_schema.VIEWS WHERE TABLE_SCHEMA {_NOT_SYSTEM}"
)
"""Every view and its query (empty where the user lacks SHOW VIEW on it: its definition is then not known)."""

BOOTSTRAP_TRIGGERS_SQL: Final = (
    "SELECT TRIGGER_SCHEMA, TRIGGER_NAME, EVENT_MANIPULATION, EVENT_OBJECT_TABLE, ACTION_STATEMENT "
    f"FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA {_NOT_SYSTEM}"
)
"""The triggers the user may see (those of tables it has the TRIGGER privilege on) and their bodies."""

BOOTSTRAP_ROUTINES_SQL: Final = (
    "SELECT ROUTINE_SCHEMA, ROUTINE_NAME, ROUTINE_TYPE, ROUTINE_DEFINITION FROM information_schema.ROUTINES "
    f"WHERE ROUTINE_SCHEMA {_NOT_SYSTEM} AND ROUTINE_TYPE IN ('FUNCTION', 'PROCEDURE')"
)
"""Stored functions and procedures and their bodies (NULL where the user may not read it)."""

ROUTINES_VISIBLE_SQL: Final = "SELECT 1 FROM mysql.proc LIMIT 0"
"""Succeeds when the user may read MariaDB's ``mysql.proc``: ``ROUTINES`` then lists every routine (as it does to a
user with SELECT on every database, MySQL's rule too)."""

BOOTSTRAP_GRANTS_SQL: Final = (
    "SELECT PRIVILEGE_TYPE FROM information_schema.USER_PRIVILEGES WHERE GRANTEE = %s "
    "AND PRIVILEGE_TYPE IN ('TRIGGER', 'SELECT')"
)
"""The user's global TRIGGER and SELECT privileges (argument: the grantee, ``'user'@'host'`` of
``CURRENT_USER()``)."""

BOOTSTRAP_SCHEMA_GRANTS_SQL: Final = (
    "SELECT TABLE_SCHEMA FROM information_schema.SCHEMA_PRIVILEGES WHERE GRANTEE = %s AND PRIVILEGE_TYPE = 'TRIGGER'"
)
"""The databases the user has the TRIGGER privilege on (argument: the grantee)."""


def grantee(current_user: str) -> str:
    """``CURRENT_USER()``'s ``user@host`` as information_schema's privilege tables name it: ``'user'@'host'``."""
    user, _, host = current_user.rpartition("@")
    return f"'{user}'@'{host}'"


def objects_from_rows(
    views: Sequence[Sequence[Any]],
    triggers: Sequence[Sequence[Any]],
    routines: Sequence[Sequence[Any]] | None,
    *,
    databases: Sequence[str],
    triggers_seen: Sequence[str] | None,
) -> ObjectCatalog:
    """The views, triggers and routines of the bootstrap's rows (:data:`BOOTSTRAP_VIEWS_SQL`,
    :data:`BOOTSTRAP_TRIGGERS_SQL`, :data:`BOOTSTRAP_ROUTINES_SQL`; ``routines`` None when the user could not list
    them all). ``triggers_seen``: the databases whose triggers the user may see (None: all of them), of
    ``databases``; the others' are not known."""
    objects = ObjectCatalog()
    for db, name, definition in views:
        text = "" if definition is None else str(definition)
        objects.add(View(str(db), str(name), read_uses(text) if text.strip() else None))
    for db, name, event, table, body in triggers:
        uses = None if body is None else attrs.evolve(read_uses(str(body)), names=())
        objects.add(Trigger(str(db), str(name), str(table), (str(event).upper(),), uses))
    if routines is None:
        objects.unseen_routines.add(EVERY_DATABASE)
    for db, name, kind, body in routines or ():
        uses = None if body is None else attrs.evolve(read_uses(str(body)), names=())
        objects.add(Routine(str(db), str(name), str(kind).upper(), uses))
    if triggers_seen is not None:
        objects.unseen_triggers = {db for db in databases if db not in set(triggers_seen)}
    return objects


Run = Callable[..., Sequence[Sequence[Any]]]
"""``run(sql, *args)``: the rows of a query on the server (a failure raises :class:`~canal.errors.CanalError`)."""


def read_objects(run: Run, databases: Sequence[str]) -> ObjectCatalog:
    """The server's views, triggers and routines now (:func:`objects_from_rows`), and what of them the user cannot
    see: triggers without the TRIGGER privilege, view definitions without SHOW VIEW, routines without SELECT on
    ``mysql.proc`` (each logged)."""
    who = grantee(str(run("SELECT CURRENT_USER()")[0][0]))
    granted = {str(row[0]) for row in run(BOOTSTRAP_GRANTS_SQL, who)}
    seen: list[str] | None = None
    if "TRIGGER" not in granted:
        seen = [str(row[0]) for row in run(BOOTSTRAP_SCHEMA_GRANTS_SQL, who)]
    routines: list[Sequence[Any]] | None = None
    try:
        if "SELECT" not in granted:
            run(ROUTINES_VISIBLE_SQL)
    except CanalError as exc:  # ROUTINES lists only the routines the user may run
        log.warning("the capture user cannot list every routine: %s", exc)
    else:
        routines = list(run(BOOTSTRAP_ROUTINES_SQL))
    objects = objects_from_rows(
        run(BOOTSTRAP_VIEWS_SQL), run(BOOTSTRAP_TRIGGERS_SQL), routines, databases=databases, triggers_seen=seen
    )
    unseen = [f"the definition of view {v.db}.{v.name}" for v in objects.views.values() if v.uses is None]
    unseen += [f"the triggers of {db}" for db in sorted(objects.unseen_triggers)]
    if unseen:
        log.warning(
            "the capture user cannot see %s (grant it TRIGGER and SHOW VIEW): a statement logged as a statement "
            "that may reach them heals every captured table",
            ", ".join(unseen[:5]) + (f" and {len(unseen) - 5} more" if len(unseen) > 5 else ""),
        )
    return objects
