"""Randomized differential test of names and the DDL forms that name several tables (hypothesis, a real MariaDB):
databases, tables and columns named from a pool holding dots, slashes, ``..``, backticks, quotes, spaces, ``%``, ``#``,
non-ASCII letters and differing case; random CREATE, CREATE OR REPLACE (plain and LIKE), multi-table DROP, multi-pair
RENAME (across databases), INSERT, UPDATE and DELETE, binlog rotations (``FLUSH BINARY LOGS``), caught up into a
``DeltaMirror`` (a random mode) through ``run_batches`` at random points. At the end every table of the server equals
its mirror (``SELECT *``), ``table_names()`` lists exactly the server's tables, as it spells them, and nothing was
written outside the root. It runs twice: on the session's server, and on a private one with
``lower_case_table_names=1``, where the statements keep the pool's mixed case and the server folds them (its rows events
name tables in lower case, its DDL as typed).

A statement the server refuses (a name taken, a table gone) is left out of the workload. CI runs a few examples
(``PYCANAL_FUZZ_EXAMPLES``, default 20, a quarter of them here); a longer run sets it higher.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pymysql
import pytest
from hypothesis import given, note
from hypothesis import strategies as st
from random_schema_workload import FUZZ_EXAMPLES, fuzz_settings

pytest.importorskip("deltalake")

from canal.config import InstanceConfig, StoreConfig
from canal.lake.settings import MODES
from canal.spark import DeltaMirror
from canal.spark.testing import run_caught_up
from canal.testing.plugin import MariaDBDatabase, MariaDBFactory

pytestmark = pytest.mark.integration

EXAMPLES = max(2, FUZZ_EXAMPLES // 4)
PREFIX = "h3r"
# names as a server may spell them (MariaDB takes any character but NUL; a name does not end in a space)
POOL = ["t", "T", "a.b", "a/b", "x/../..", "sp ace", "p%20q", "h#1", "b`t", "q'\"", "Ωμέγα", "é", "_u", "~7E", "%"]
# database names: the pool without dots (two databases whose names join to the same ``db.table`` text share one
# entry of the schema history, which keys tables by that text: the mirror's names are tested here, not the history's)
DATABASES = [f"{PREFIX}{suffix}" for suffix in ["", "X", "x", "/..", " é#`%"]]
MARKS = f"{PREFIX}marks"  # a row here ends every stretch caught up: the last event is one the filter hands out
KINDS = ["create", "create", "replace", "like", "drop", "rename", "insert", "insert", "update", "delete", "catch_up"]
KINDS.append("rotate")  # FLUSH BINARY LOGS: the stream and a mirror resumed from a position go on in the next file


def ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def odd_name_statements(db: str, picks: list[tuple[str, str]], seed: int) -> list[str]:
    """A table per distinct (table, column) pick of :data:`POOL` names in database ``db``: made, written, renamed,
    emptied and dropped -- the peers' side-by-side workload of odd names."""
    statements: list[str] = []
    for i, (table, column) in enumerate(dict.fromkeys(picks)):
        t = ident(db) + "." + ident(table)
        moved = ident(db) + "." + ident(table + "2")
        statements += [
            f"CREATE TABLE {t} (id INT PRIMARY KEY, {ident(column + 'c')} VARCHAR(20))",
            f"INSERT INTO {t} VALUES ({i + 1}, {seed + i})",
            f"UPDATE {t} SET {ident(column + 'c')} = 'ü{i}' WHERE id = {i + 1}",
            f"RENAME TABLE {t} TO {moved}",
            f"DELETE FROM {moved}",
            f"DROP TABLE {moved}",
        ]
    return statements


@pytest.mark.parametrize("lower_case", [False, True], ids=["as-typed", "lower_case_table_names=1"])
def test_mirror_equals_select_through_random_names_and_multi_table_ddl(
    mariadb: MariaDBDatabase,
    mariadb_factory: MariaDBFactory,
    tmp_path_factory: pytest.TempPathFactory,
    lower_case: bool,
) -> None:
    runs = iter(range(1_000_000))
    server = mariadb
    if lower_case:
        flag = "--lower-case-table-names=1"
        private = mariadb_factory(install_args=[flag], extra_args=[flag])
        assert private.execute("SELECT @@lower_case_table_names")[0][0] == 1
        private.execute("CREATE DATABASE lcnames")
        server = MariaDBDatabase(server=private, database="lcnames")
    # the databases as the server keeps them (two pool names may fold to one)
    databases = sorted({d.lower() for d in DATABASES}) if lower_case else DATABASES

    @fuzz_settings(EXAMPLES)
    @given(
        ops=st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 10**6)), min_size=5, max_size=30),
        mode=st.sampled_from(MODES),
        seed=st.integers(0, 2**32 - 1),
    )
    def check(ops: list[tuple[str, int]], mode: Any, seed: int) -> None:
        tmp = tmp_path_factory.mktemp(f"names{next(runs)}")
        for db in [*databases, MARKS]:
            server.execute(f"DROP DATABASE IF EXISTS {ident(db)}")
            server.execute(f"CREATE DATABASE {ident(db)}")
        server.execute(f"CREATE TABLE {MARKS}.m (id INT AUTO_INCREMENT PRIMARY KEY)")
        try:
            _play(server, databases, tmp, ops, mode, random.Random(seed))
        finally:
            for db in [*databases, MARKS]:
                server.execute(f"DROP DATABASE IF EXISTS {ident(db)}")

    check()


def _play(
    mariadb: MariaDBDatabase, databases: list[str], tmp: Path, ops: list[tuple[str, int]], mode: Any, rng: random.Random
) -> None:
    """``ops`` name databases from :data:`DATABASES` as typed; ``databases`` are those the server holds."""
    conn = mariadb.connect()
    config = InstanceConfig(
        destination="namesfuzz",
        master=mariadb.master(),
        filter_regex=rf"{PREFIX}.*",
        store=StoreConfig(batch_mode="ITEMSIZE"),
        meta_mode="file",
        meta_dir=str(tmp / "meta"),
    )
    root = tmp / "mirror"
    mirror = DeltaMirror(root, mode=mode, background_folds=False, fold_ratio=0.5)
    sql: list[str] = []

    def run(statement: str) -> None:
        try:
            with conn.cursor() as cur:
                cur.execute(statement)
            conn.commit()
            sql.append(statement)
        except pymysql.MySQLError as exc:  # refused by the server: not part of the workload
            sql.append(f"-- refused ({exc.args[0]}): {statement}")

    def tables() -> list[tuple[str, str]]:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT table_schema, table_name FROM information_schema.tables WHERE table_schema IN ("
                + ", ".join(["%s"] * len(databases))
                + ") ORDER BY table_schema, table_name",
                databases,
            )
            return [(str(s), str(t)) for s, t in cur.fetchall()]

    def catch_up(batch_size: int) -> None:
        run(f"INSERT INTO {MARKS}.m VALUES ()")
        run_caught_up(conn, config, None, mirror, batch_size=batch_size)

    def name(x: int) -> str:
        return f"{ident(DATABASES[x % len(DATABASES)])}.{ident(POOL[(x // 7) % len(POOL)])}"

    def existing(x: int) -> str | None:
        present = tables()
        return None if not present else ".".join(ident(p) for p in present[x % len(present)])

    for n, (kind, x) in enumerate(ops):
        column = ident(POOL[(x // 3) % len(POOL)])
        if kind in ("create", "replace"):
            verb = "CREATE TABLE" if kind == "create" else "CREATE OR REPLACE TABLE"
            run(f"{verb} {name(x)} (id INT PRIMARY KEY, {column} VARCHAR(20))")
        elif kind == "like" and (source := existing(x)) is not None:
            run(f"CREATE OR REPLACE TABLE {name(x // 11)} LIKE {source}")
        elif kind == "drop":
            run(f"DROP TABLE IF EXISTS {', '.join(name(x // k) for k in (1, 13, 17)[: 1 + x % 3])}")
        elif kind == "rename" and (first := existing(x)) is not None:
            pairs = [f"{first} TO {name(x // 5)}"]
            if (second := existing(x // 3)) is not None and second != first:
                pairs.append(f"{second} TO {name(x // 19)}")
            run(f"RENAME TABLE {', '.join(pairs)}")
        elif kind == "insert" and (target := existing(x)) is not None:
            values = ", ".join(f"({x % 50 + i * 50}, 'v{n}{i}')" for i in range(1 + x % 3))
            run(f"INSERT IGNORE INTO {target} VALUES {values}")
        elif kind == "update" and (target := existing(x)) is not None:
            run(f"UPDATE {target} SET id = id + 1000 WHERE id % 2 = {x % 2}")
        elif kind == "delete" and (target := existing(x)) is not None:
            run(f"DELETE FROM {target} WHERE id % 3 = {x % 3}")
        elif kind == "rotate":
            run("FLUSH BINARY LOGS")
        if kind == "catch_up" or rng.random() < 0.1:
            catch_up(rng.choice([5, 100_000]))
    catch_up(100_000)
    mirror.close()
    note("SQL:\n" + ";\n".join(sql))
    present = tables()
    assert [n for n in mirror.table_names() if n != f"{MARKS}.m"] == sorted(f"{s}.{t}" for s, t in present)
    assert sorted(p.name for p in tmp.iterdir()) == ["meta", "mirror"]  # nothing outside the root
    for schema, table in present:
        path = mirror.table_path(schema, table)
        assert path.parent == root
        with conn.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute(f"SELECT * FROM {ident(schema)}.{ident(table)}")
            rows = sorted(cur.fetchall(), key=lambda r: r["id"])
        mirrored = mirror.read(schema, table)
        assert mirrored.column_names == list(rows[0]) if rows else True, (schema, table)
        assert sorted(mirrored.to_pylist(), key=lambda r: r["id"]) == rows, (schema, table)
    conn.close()
