"""Foreign-key actions on a real MariaDB: the binlog logs only the parent's rows for ``ON DELETE CASCADE``,
``ON DELETE SET NULL`` and ``ON UPDATE CASCADE``. The Instance names, on the statement's last row entry, the tables
the statement mapped and logged no rows of (header prop ``CASCADE_TABLES``) and, from its schema history, the foreign
keys a DELETE / UPDATE row follows (``FOREIGN_KEY_ACTIONS``); without them the Delta mirror stops there with
:class:`MirrorCascadeError`, nothing written, instead of keeping the children's stale rows (with them it applies the
actions itself: tests/test_mirror_foreign_keys_mariadb.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("deltalake")

from capture_configs import capture_config

from canal.config import InstanceConfig, SchemaHistoryConfig
from canal.instance import Instance
from canal.lake.apply.stops import MirrorCascadeError
from canal.parse.cascade import CASCADE_TABLES, FOREIGN_KEY_ACTIONS
from canal.protocol import EntryType
from canal.spark import DeltaMirror
from canal.spark.testing import master_position, run_caught_up
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration


def _config(
    mariadb: MariaDBDatabase, tmp_path: Path, start: tuple[str, int], *, history: bool = True
) -> InstanceConfig:
    return capture_config(mariadb, tmp_path / "meta", start, "fk", schema_history=SchemaHistoryConfig(enable=history))


def _schema(mariadb: MariaDBDatabase) -> list[str]:
    db = mariadb.database
    return [
        f"CREATE TABLE `{db}`.p (id INT PRIMARY KEY, v INT)",
        f"CREATE TABLE `{db}`.c (id INT PRIMARY KEY, pid INT, FOREIGN KEY (pid) REFERENCES `{db}`.p (id) "
        "ON DELETE CASCADE ON UPDATE CASCADE)",
        f"CREATE TABLE `{db}`.n (id INT PRIMARY KEY, pid INT, FOREIGN KEY (pid) REFERENCES `{db}`.p (id) "
        "ON DELETE SET NULL)",
        f"INSERT INTO `{db}`.p VALUES (1, 1), (2, 2), (3, 3)",
        f"INSERT INTO `{db}`.c VALUES (10, 1), (20, 2)",
        f"INSERT INTO `{db}`.n VALUES (100, 1)",
    ]


def test_entries_name_the_tables_a_statement_changed_unlogged(mariadb: MariaDBDatabase, tmp_path: Path) -> None:
    db = mariadb.database
    conn = mariadb.connect(autocommit=True)
    config = _config(mariadb, tmp_path, master_position(conn))
    with conn.cursor() as cur:
        for sql in [
            *_schema(mariadb),
            f"UPDATE `{db}`.c SET pid = 2 WHERE id = 10",  # a child's own change: nothing unlogged
            f"DELETE FROM `{db}`.c WHERE id = 20",
            f"UPDATE `{db}`.p SET id = 4 WHERE id = 2",  # cascades to c
            f"DELETE FROM `{db}`.p WHERE id = 1",  # cascades to c, sets n.pid NULL
        ]:
            cur.execute(sql)
    end = master_position(conn)
    seen: list[tuple[str, str, Any]] = []
    actions: list[list[tuple[str, list[str], list[str], str, str]]] = []
    deadline = time.monotonic() + 30
    with Instance(config) as inst:
        while not any(kind == "DELETE" and table == "p" for kind, table, _ in seen):
            assert time.monotonic() < deadline, f"the parent's DELETE never came; got {seen}"
            for entry in inst.get(100, timeout=0.5).entries:
                if entry.entry_type is EntryType.ROWDATA and entry.row_change and entry.row_change.rows:
                    cascade = entry.header.props.get(CASCADE_TABLES)
                    seen.append((entry.header.event_type.name, entry.header.table, cascade and json.loads(cascade)))
                    edges = json.loads(entry.header.props.get(FOREIGN_KEY_ACTIONS, "[]"))
                    actions.append(
                        [(e["table"], e["columns"], e["ref_columns"], e["on_delete"], e["on_update"]) for e in edges]
                    )
    assert end is not None
    assert seen == [
        ("INSERT", "p", None),
        ("INSERT", "c", None),
        ("INSERT", "n", None),
        ("UPDATE", "c", None),
        ("DELETE", "c", None),
        ("UPDATE", "p", [[db, "c"]]),
        ("DELETE", "p", [[db, "c"], [db, "n"]]),
    ]
    # the foreign keys a parent's DELETE / UPDATE follows, from the schema history (FOREIGN_KEY_ACTIONS)
    edges = [("c", ["pid"], ["id"], "CASCADE", "CASCADE"), ("n", ["pid"], ["id"], "SET NULL", "RESTRICT")]
    assert actions == [[], [], [], [], [], edges[:1], edges]  # an UPDATE does not map n (no ON UPDATE action)
    rows = mariadb.execute(f"SELECT id, pid FROM `{db}`.c UNION ALL SELECT id, pid FROM `{db}`.n ORDER BY id")
    assert [tuple(r) for r in rows] == [(10, 4), (100, None)]  # what the binlog does not say


def test_without_foreign_keys_the_mirror_stops_at_a_cascading_delete(mariadb: MariaDBDatabase, tmp_path: Path) -> None:
    """Without a schema history the source cannot name the foreign keys (no FOREIGN_KEY_ACTIONS): the mirror stops
    at a DELETE whose statement mapped a child it holds."""
    db = mariadb.database
    conn = mariadb.connect(autocommit=True)
    config = _config(mariadb, tmp_path, master_position(conn), history=False)
    with conn.cursor() as cur:
        for sql in _schema(mariadb):
            cur.execute(sql)
    mirror = DeltaMirror(tmp_path / "mirror")
    run_caught_up(conn, config, None, mirror)
    children = sorted((r["id"], r["pid"]) for r in mirror.read(db, "c").to_pylist())
    assert children == [(10, 1), (20, 2)]
    with conn.cursor() as cur:
        cur.execute(f"UPDATE `{db}`.p SET v = 9 WHERE id = 3")  # the key kept: nothing cascades, no stop
        cur.execute(f"DELETE FROM `{db}`.p WHERE id = 1")
    for _ in range(2):  # a stop, not a skip
        with pytest.raises(MirrorCascadeError, match=rf"DELETE of {db}\.p at mysql-bin\.\d+:\d+ .* {db}\.c, {db}\.n"):
            run_caught_up(conn, config, None, mirror)
        assert sorted((r["id"], r["pid"]) for r in mirror.read(db, "c").to_pylist()) == children
        assert sorted(r["id"] for r in mirror.read(db, "p").to_pylist()) == [1, 2, 3]
