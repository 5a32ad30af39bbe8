"""DDL the schema history must follow exactly, on a private MariaDB that logs no column names (MINIMAL / NO_LOG
``binlog_row_metadata``): every row is named and valued as ``SELECT`` returned it right after its statement.

* one ALTER that swaps or rotates column names (CHANGE, RENAME COLUMN): every action names a column of the table as
  it was before the statement, as the server resolves them;
* DEFAULTs the SQL reader used to drop the statement over (``_latin1 X'41'``, ``_utf8mb4 0x41``, ``NEXT VALUE
  FOR seq``, ``@@var``), in CREATE and CHANGE;
* ``DROP INDEX `PRIMARY``` / ``DROP CONSTRAINT `PRIMARY``` followed by ``ADD PRIMARY KEY``;
* a destination started before ``CREATE TABLE t``, ``ALTER TABLE t ...``, ``RENAME TABLE t TO t2`` (and a swap of
  two tables through a third name): the binlog holds each table's whole life, so the start is not refused.

A statement that can change a layout but cannot be read is tested on the history itself (test_schema_history).
"""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from canal.instance import Instance
from canal.testing.plugin import MariaDBFactory
from tests.test_schema_history_mariadb import Row, Writer, _config, _consume

pytestmark = pytest.mark.integration


def _start(server: object, tmp_path: Path) -> tuple[str, int]:
    journal, position = server.execute("SHOW MASTER STATUS")[0][:2]  # type: ignore[attr-defined]
    return str(journal), int(position)


def _renames_and_defaults(w: Writer) -> None:
    w.ddl("CREATE SEQUENCE app.seq")
    w.ddl("CREATE TABLE app.t (id INT NOT NULL PRIMARY KEY, a INT, b VARCHAR(10), c DATE)")
    w.write("t", "INSERT", "INSERT INTO t VALUES (1, 10, 'bee', '2024-01-02')", "id", 1)
    w.ddl("ALTER TABLE app.t CHANGE a b INT, CHANGE b a VARCHAR(10)")  # the values stay; the names swap
    w.write("t", "INSERT", "INSERT INTO t VALUES (2, 20, 'two', '2024-02-03')", "id", 2)
    w.ddl("ALTER TABLE app.t RENAME COLUMN a TO c, RENAME COLUMN b TO a, RENAME COLUMN c TO b")  # a rotation
    w.write("t", "UPDATE", "UPDATE t SET c = 'one' WHERE id = 1", "id", 1)
    w.ddl("ALTER TABLE app.t CHANGE b b2 DATE FIRST, CHANGE c c2 VARCHAR(10) AFTER id")
    w.write("t", "INSERT", "INSERT INTO t (id, a, b2, c2) VALUES (3, 30, '2024-03-04', 'x')", "id", 3)
    w.ddl(
        "ALTER TABLE app.t ADD COLUMN l CHAR(1) DEFAULT _latin1 X'41' AFTER a, "
        "ADD COLUMN u CHAR(2) DEFAULT _utf8mb4 0x4142, ADD COLUMN n BIGINT DEFAULT NEXT VALUE FOR app.seq, "
        "ADD COLUMN v INT DEFAULT @@auto_increment_increment"
    )
    w.write("t", "INSERT", "INSERT INTO t (id, a) VALUES (4, 40)", "id", 4)
    w.ddl("ALTER TABLE app.t CHANGE l l2 CHAR(1) DEFAULT _latin1 X'42' FIRST")
    w.write("t", "INSERT", "INSERT INTO t (id, a) VALUES (5, 50)", "id", 5)
    w.ddl("CREATE TABLE app.d (k CHAR(1) DEFAULT _latin1 X'43', id INT NOT NULL PRIMARY KEY)")
    w.write("d", "INSERT", "INSERT INTO d (id) VALUES (1)", "id", 1)
    w.ddl("ALTER TABLE app.t DROP INDEX `PRIMARY`")
    w.write("t", "INSERT", "INSERT INTO t (id, a) VALUES (6, 60)", "id", 6)
    w.ddl("ALTER TABLE app.t ADD PRIMARY KEY (a)")
    w.write("t", "UPDATE", "UPDATE t SET c2 = 'sixty' WHERE a = 60", "a", 60)
    w.ddl("ALTER TABLE app.t DROP CONSTRAINT `PRIMARY`, ADD PRIMARY KEY (id)")
    w.write("t", "DELETE", "DELETE FROM t WHERE id = 6", "id", 6)


def _table_lives(w: Writer) -> None:
    w.ddl("CREATE TABLE app.t (id INT NOT NULL PRIMARY KEY, a INT)")
    w.write("t", "INSERT", "INSERT INTO t VALUES (1, 10)", "id", 1)
    w.ddl("ALTER TABLE app.t ADD COLUMN b VARCHAR(5) FIRST")
    w.write("t", "INSERT", "INSERT INTO t VALUES ('bb', 2, 20)", "id", 2)
    w.ddl("RENAME TABLE app.t TO app.t2")
    w.write("t2", "UPDATE", "UPDATE t2 SET a = 11 WHERE id = 1", "id", 1)
    w.ddl("CREATE TABLE app.u (k VARCHAR(3) NOT NULL PRIMARY KEY, n INT)")
    w.write("u", "INSERT", "INSERT INTO u VALUES ('x', 1)", "k", "x")
    w.ddl("RENAME TABLE app.t2 TO app.tmp, app.u TO app.t2, app.tmp TO app.u")  # a swap through a third name
    w.write("t2", "INSERT", "INSERT INTO t2 VALUES ('y', 2)", "k", "y")
    w.write("u", "INSERT", "INSERT INTO u VALUES ('cc', 3, 30)", "id", 3)
    w.ddl("ALTER TABLE app.u RENAME TO app.v, ADD COLUMN z INT")
    w.write("v", "INSERT", "INSERT INTO v VALUES ('dd', 4, 40, 4)", "id", 4)


@pytest.mark.parametrize("metadata", ["MINIMAL", "NO_LOG"])
@pytest.mark.parametrize("workload", [_renames_and_defaults, _table_lives], ids=["renames_and_defaults", "lives"])
def test_rows_are_named_as_written_from_a_start_before_all_ddl(
    mariadb_factory: MariaDBFactory, tmp_path: Path, metadata: str, workload: object
) -> None:
    server = mariadb_factory(extra_args=[f"--binlog-row-metadata={metadata}"])
    server.execute("CREATE DATABASE app")
    start = _start(server, tmp_path)
    writer = Writer(server)
    workload(writer)  # type: ignore[operator]
    # (heal="stop": the defaults a copy cannot compute -- a sequence's next value -- would heal the table, whose
    # snapshot rows are not what this test reads)
    inst = Instance(attrs.evolve(_config(server, tmp_path, start), heal="stop"))
    inst.start()
    try:
        # the sequence's own row (its next values, cached by the server) is a table of its own: left out here
        rows: list[Row] = []
        while len([r for r in rows if r[0] != "seq"]) < len(writer.rows):
            rows += _consume(inst, 1)
        assert [r for r in rows if r[0] != "seq"] == writer.rows
        assert all(set(r[2]) >= {"next_not_cached_value", "cycle_count"} for r in rows if r[0] == "seq")
    finally:
        inst.stop()
