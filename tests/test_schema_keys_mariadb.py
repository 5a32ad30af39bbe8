"""The key a table's rows are identified by, followed through DDL and held against a real MariaDB: random CREATE
TABLE / ALTER TABLE / CREATE UNIQUE INDEX / DROP INDEX sequences over unique keys (nullable or NOT NULL columns,
prefix parts, keys dropped, renamed, columns dropped, renamed and made NOT NULL), each applied to the schema catalog
and to the server; after each statement the catalog's key (the primary key, else the UNIQUE key the server promotes to
one) is the columns ``information_schema.COLUMNS.COLUMN_KEY`` says ``PRI`` for, and a bootstrap from
``information_schema`` holds the same."""

from __future__ import annotations

import pymysql
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from canal.parse.mysql.source import MysqlBinlogSource
from canal.schema.catalog import SchemaCatalog
from canal.schema.followed import history_statement
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration

COLUMNS = ("a", "b", "c", "d")
STATEMENTS = st.lists(
    st.one_of(
        st.tuples(st.just("unique"), st.lists(st.sampled_from(COLUMNS), min_size=1, max_size=2, unique=True),
                  st.booleans()),
        st.tuples(st.just("drop_key"), st.integers(0, 5)),
        st.tuples(st.just("not_null"), st.sampled_from(COLUMNS), st.booleans()),
        st.tuples(st.just("drop_column"), st.sampled_from(COLUMNS)),
        st.tuples(st.just("rename_column"), st.sampled_from(COLUMNS)),
        st.tuples(st.just("rename_key"), st.integers(0, 5)),
        st.tuples(st.just("primary"), st.booleans()),
    ),
    max_size=8,
)  # fmt: skip


def _promoted(conn: pymysql.Connection, db: str) -> set[str]:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = 't' "
            "AND COLUMN_KEY = 'PRI'",
            (db,),
        )
        return {str(r[0]).lower() for r in cur.fetchall()}


def _keys(conn: pymysql.Connection, db: str) -> list[str]:
    with conn.cursor() as cur:
        cur.execute(f"SHOW INDEX FROM `{db}`.t")
        return list(dict.fromkeys(str(r[2]) for r in cur.fetchall() if str(r[2]) != "PRIMARY"))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=st.lists(st.sampled_from(COLUMNS), min_size=1, max_size=2, unique=True), statements=STATEMENTS)
def test_the_key_a_table_is_identified_by_is_the_one_the_server_promotes(
    mariadb: MariaDBDatabase, first: list[str], statements: list[tuple[object, ...]]
) -> None:
    db = mariadb.database
    conn = mariadb.connect(autocommit=True)
    catalog = SchemaCatalog(database=db, mariadb=True)
    columns = {c: c for c in COLUMNS}  # original name -> name now
    texts = [
        "DROP TABLE IF EXISTS t",
        "CREATE TABLE t (a INT NOT NULL, b VARCHAR(20) NOT NULL, c INT, d TEXT NOT NULL, e INT, "
        f"UNIQUE KEY ({', '.join(first)}) , KEY (e))",
    ]
    for statement in statements:
        kind = statement[0]
        if kind == "unique":
            # a prefix part on the text columns now and then (always on the TEXT one: it needs one)
            prefix = bool(statement[2])
            parts = [
                f"`{columns[c]}`" + ("(8)" if c == "d" else "(5)" if c == "b" and prefix else "") for c in statement[1]
            ]
            texts.append(
                f"CREATE UNIQUE INDEX u{len(texts)} ON t ({', '.join(parts)})"
                if statement[2]
                else f"ALTER TABLE t ADD UNIQUE ({', '.join(parts)})"
            )
        elif kind == "not_null":
            name = columns[str(statement[1])]
            base = {"a": "INT", "b": "VARCHAR(20)", "c": "INT", "d": "TEXT"}[str(statement[1])]
            texts.append(f"ALTER TABLE t MODIFY `{name}` {base} {'NOT NULL' if statement[2] else 'NULL'}")
        elif kind == "drop_column":
            texts.append(f"ALTER TABLE t DROP COLUMN `{columns[str(statement[1])]}`")
        elif kind == "rename_column":
            old = columns[str(statement[1])]
            columns[str(statement[1])] = old + "x"
            texts.append(f"ALTER TABLE t RENAME COLUMN `{old}` TO `{old}x`")
        elif kind in ("drop_key", "rename_key", "primary"):
            texts.append(f"probe {kind} {statement[1]}")
    try:
        for text in texts:
            if text.startswith("probe"):
                _, kind, arg = text.split()
                names = _keys(conn, db)
                if kind == "primary":
                    text = "ALTER TABLE t ADD PRIMARY KEY (e)" if arg == "True" else "ALTER TABLE t DROP PRIMARY KEY"
                elif not names:
                    continue
                elif kind == "drop_key":
                    name = names[int(arg) % len(names)]
                    text = f"DROP INDEX `{name}` ON t" if int(arg) % 2 else f"ALTER TABLE t DROP INDEX `{name}`"
                else:
                    name = names[int(arg) % len(names)]
                    text = f"ALTER TABLE t RENAME INDEX `{name}` TO `{name}_r`"
            try:
                with conn.cursor() as cur:
                    cur.execute(text)
            except pymysql.err.MySQLError:
                continue  # the server refused it (a duplicate, a column gone, a NULL in a NOT NULL column ...)
            stmt = history_statement(text)
            assert stmt is not None, text
            catalog.apply(stmt, db)
            if text.startswith("DROP TABLE"):
                continue
            table = catalog.get(db, "t")
            assert table is not None
            assert {c.lower() for c in table.row_key} == _promoted(conn, db), (text, table.keys)
            # (the promoted key is what matters; the order of the others deviates in one case: canal.schema.keys)
            assert sorted(k.name for k in table.keys) == sorted(_keys(conn, db)), text
        source = MysqlBinlogSource(mariadb.address, mariadb.user, mariadb.password)
        source.open()
        try:
            found = source.schema_catalog()
            bootstrapped = found.get(db, "t")
            assert bootstrapped is not None, sorted(found.tables)
        finally:
            source.close()
        assert bootstrapped is not None and bootstrapped.row_key == catalog.get(db, "t").row_key  # type: ignore[union-attr]
    finally:
        conn.close()
