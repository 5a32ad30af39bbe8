"""MariaDB's system-versioned tables, made so in the stream (issue 64 item 6), followed by the schema history and
mirrored, on a real MariaDB: ``CREATE TABLE ... WITH SYSTEM VERSIONING`` (implicit period columns, and explicit
``AS ROW START`` / ``AS ROW END`` ones), ``ALTER TABLE ... ADD SYSTEM VERSIONING`` of a table holding rows (their
``row_start`` is the statement's start time), an ALTER of a versioned table (``system_versioning_alter_history =
KEEP``: added columns go before the implicit ones) and ``DROP SYSTEM VERSIONING`` (the history goes), beside a table
versioned before the stream's start.

The mirror holds what the binlog logs: every version of a row, keyed by the primary key and ``row_end`` -- equal
to ``SELECT ..., row_start, row_end FROM t FOR SYSTEM_TIME ALL`` -- and its current versions (``row_end`` at
TIMESTAMP's maximum) equal ``SELECT *``. Through change rows under FULL row metadata and typed batches under
MINIMAL (rows named by the schema history), in both of the mirror's modes; a batch that adds and drops versioning,
replayed after a crash between any step's commit and its journal write, ends the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("deltalake")

from canal.config import InstanceConfig, MasterConfig, StoreConfig
from canal.lake.ddl.versioning import CURRENT_FROM
from canal.spark import DeltaMirror, compare
from canal.spark.testing import master_position, run_caught_up
from canal.testing.plugin import MariaDBFactory

pytestmark = pytest.mark.integration

KEYS = {"pre": ["id"], "v": ["id"], "w": ["id"], "e": ["x"], "d": ["id"]}
ENDS = {"e": "e"}  # the period's end column (row_end unless declared)


def _select(conn: Any, sql: str) -> list[dict[str, Any]]:
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")  # TIMESTAMP values in UTC, as the mirror holds them
        cur.execute(sql)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _versioned(conn: Any, table: str) -> bool:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT table_type FROM information_schema.tables WHERE table_schema = 'app' AND table_name = %s", (table,)
        )
        return cur.fetchone()[0] == "SYSTEM VERSIONED"


@pytest.mark.parametrize(
    ("path", "metadata", "mode"), [("rows", "FULL", "merge_on_read"), ("typed", "MINIMAL", "copy_on_write")]
)
def test_tables_versioned_in_the_stream_mirror_every_version(
    mariadb_factory: MariaDBFactory, tmp_path: Path, path: str, metadata: str, mode: Any
) -> None:
    server = mariadb_factory(extra_args=[f"--binlog-row-metadata={metadata}"])
    conn = server.connect()
    server.execute("CREATE DATABASE app")
    server.execute("CREATE TABLE app.pre (id INT PRIMARY KEY, a INT) WITH SYSTEM VERSIONING")  # before the start
    journal, position = master_position(conn)
    config = InstanceConfig(
        destination="versioned",
        master=MasterConfig(
            address=server.address, username=server.user, password=server.password, journal_name=journal,
            position=position,
        ),
        filter_regex=r"app\..*",
        store=StoreConfig(batch_mode="ITEMSIZE"),
        meta_mode="file",
        meta_dir=str(tmp_path / "meta"),
    )  # fmt: skip
    mirror = DeltaMirror(tmp_path / "mirror", mode=mode)
    props: list[dict[str, str]] = []

    def apply(rows: Any, batch_id: int) -> None:
        import json

        for is_ddl, text in zip(rows.column("is_ddl").to_pylist(), rows.column("props").to_pylist(), strict=True):
            if is_ddl and text:
                props.append(json.loads(text))
        mirror.apply(rows, batch_id)

    def batch(*statements: str) -> None:
        with conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql)
        run_caught_up(conn, config, None, apply if path == "rows" else mirror)
        for table, key in KEYS.items():
            if not mirror.table_path("app", table).exists():
                continue
            mirrored = mirror.read("app", table)
            columns = ", ".join(f"`{c}`" for c in mirrored.column_names)
            if _versioned(conn, table):  # every version, and the current ones
                every = _select(conn, f"SELECT {columns} FROM app.{table} FOR SYSTEM_TIME ALL")
                end = ENDS.get(table, "row_end")
                result = compare(mirrored, every, [*key, end], name=table)
                assert result.equal, str(result)
                current = [row for row in mirrored.to_pylist() if row[end] >= CURRENT_FROM]
                shown = _select(conn, f"SELECT * FROM app.{table}")
                assert sorted(({n: r[n] for n in shown[0]} for r in current), key=str) == sorted(shown, key=str)
            else:
                assert mirrored.column_names == list(_select(conn, f"SELECT * FROM app.{table} LIMIT 1")[0])
                result = compare(mirrored, _select(conn, f"SELECT * FROM app.{table}"), key, name=table)
                assert result.equal, str(result)

    batch(
        "INSERT INTO app.pre VALUES (1, 1), (2, 2)",
        "CREATE TABLE app.v (id INT PRIMARY KEY, a INT) WITH SYSTEM VERSIONING",
        "INSERT INTO app.v VALUES (1, 10), (2, 20), (3, 30)",
        "CREATE TABLE app.w (id INT PRIMARY KEY, a INT)",
        "INSERT INTO app.w VALUES (1, 1), (2, 2)",
        "CREATE TABLE app.e (x INT PRIMARY KEY, s TIMESTAMP(6) GENERATED ALWAYS AS ROW START, "
        "e TIMESTAMP(6) GENERATED ALWAYS AS ROW END INVISIBLE, y INT, PERIOD FOR SYSTEM_TIME(s, e)) "
        "WITH SYSTEM VERSIONING",
        "INSERT INTO app.e (x, y) VALUES (1, 1), (2, 2)",
    )
    batch(
        "UPDATE app.pre SET a = 11 WHERE id = 1",
        "UPDATE app.v SET a = 11 WHERE id = 1",
        "DELETE FROM app.v WHERE id = 2",
        "ALTER TABLE app.w ADD SYSTEM VERSIONING",  # its rows' first versions start now
        "UPDATE app.w SET a = 12 WHERE id = 2",
        "INSERT INTO app.w VALUES (3, 3)",
        "UPDATE app.e SET y = 3 WHERE x = 2",
        "SET SESSION system_versioning_alter_history = KEEP",
        "ALTER TABLE app.v ADD COLUMN c INT",  # before the implicit row_start, row_end
        "INSERT INTO app.v VALUES (4, 40, 400)",
        "UPDATE app.v SET c = 1",
    )
    batch(
        "CREATE TABLE app.d (id INT PRIMARY KEY, a INT) WITH SYSTEM VERSIONING",
        "INSERT INTO app.d VALUES (1, 1), (2, 2)",
        "UPDATE app.d SET a = a + 10",
        "DELETE FROM app.d WHERE id = 2",
        "ALTER TABLE app.d DROP SYSTEM VERSIONING",  # the history goes: one row left
        "INSERT INTO app.d VALUES (3, 3)",
        "ALTER TABLE app.w DROP SYSTEM VERSIONING",
    )
    assert sorted(r["id"] for r in mirror.read("app", "d").to_pylist()) == [1, 3]
    if path == "rows":  # the entries: the start time ADD SYSTEM VERSIONING gave the rows, the implicit columns
        assert any("TIMESTAMP" in p and "SERVER_VERSION" in p for p in props)
        assert {"IMPLICIT_COLUMNS": '["row_start","row_end"]'}.items() <= next(
            p for p in props if "IMPLICIT_COLUMNS" in p
        ).items()
    mirror.close()


def test_a_replayed_batch_that_adds_and_drops_versioning_changes_nothing_twice(
    mariadb_factory: MariaDBFactory, tmp_path: Path
) -> None:
    import shutil

    from canal.lake.planning.plan import batch_steps, in_order

    server = mariadb_factory()
    conn = server.connect()
    server.execute("CREATE DATABASE app")
    start = master_position(conn)
    config = InstanceConfig(
        destination="replayed",
        master=MasterConfig(
            address=server.address, username=server.user, password=server.password, journal_name=start[0],
            position=start[1],
        ),
        filter_regex=r"app\..*",
        store=StoreConfig(batch_mode="ITEMSIZE"),
        meta_mode="file",
        meta_dir=str(tmp_path / "meta"),
    )  # fmt: skip
    mirror = DeltaMirror(tmp_path / "mirror")
    server.execute("CREATE TABLE app.w (id INT PRIMARY KEY, a INT)")
    server.execute("INSERT INTO app.w VALUES (1, 1), (2, 2)")
    run_caught_up(conn, config, None, mirror)
    for sql in (
        "ALTER TABLE app.w ADD SYSTEM VERSIONING",
        "UPDATE app.w SET a = 10 WHERE id = 1",
        "INSERT INTO app.w VALUES (3, 3)",
        "ALTER TABLE app.w DROP SYSTEM VERSIONING",
        "INSERT INTO app.w VALUES (4, 4)",
    ):
        server.execute(sql)
    batches: list[tuple[Any, int]] = []
    run_caught_up(conn, config, None, lambda rows, batch_id: batches.append((rows, batch_id)))
    rows, batch_id = _one_batch(batches)
    steps = len(batch_steps(in_order(rows), None))
    mirror.close()

    class Crash(Exception):
        pass

    expected = _select(conn, "SELECT * FROM app.w")
    for crash_at in range(1, steps + 1):
        root = tmp_path / f"replay{crash_at}"
        shutil.copytree(mirror.root, root)
        replayed = DeltaMirror(root)
        write = replayed._write_journal

        def crash_before(batch: int, done: int, at: int = crash_at, write: Any = write) -> None:
            if done >= at:
                raise Crash  # the step's commit is made, the journal does not say so
            write(batch, done)

        replayed._write_journal = crash_before  # type: ignore[method-assign]
        with pytest.raises(Crash):
            replayed.apply(rows, batch_id)
        replayed._write_journal = write  # type: ignore[method-assign]
        replayed.apply(rows, batch_id)
        result = compare(replayed.read("app", "w"), expected, ["id"], name="w")
        assert result.equal, (crash_at, str(result))
        replayed.close()


def _one_batch(batches: list[tuple[Any, int]]) -> tuple[Any, int]:
    """The batches a run made of the statements as one (a loaded machine may cut them in two), under the last id."""
    import pyarrow as pa

    return pa.concat_tables([rows for rows, _id in batches]), batches[-1][1]
