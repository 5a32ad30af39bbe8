"""A narrowing ``MODIFY`` under a non-strict ``sql_mode`` on a real MariaDB: the server converts every existing value
without logging a row (INT -> TINYINT 1000 -> 127, INT -> INT UNSIGNED -5 -> 0, VARCHAR(10) -> VARCHAR(3)
'abcdefgh' -> 'abc', BIGINT UNSIGNED -> INT UNSIGNED 2**64 - 1 -> 4294967295, a NULL made NOT NULL the empty ENUM
value, which later ALTERs of the labels keep); the mirror converts them the same way and equals ``SELECT *``, with
the rows and the ALTER in one batch or in two."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("deltalake")

from canal.config import InstanceConfig, MasterConfig, StoreConfig
from canal.lake.settings import MODES
from canal.spark import DeltaMirror, MirrorMode
from canal.spark.testing import master_position, run_caught_up
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("one_batch", [False, True])
@pytest.mark.parametrize("mode", MODES)
def test_a_narrowing_modify_under_a_lax_sql_mode_converts_as_the_server(
    mariadb: MariaDBDatabase, tmp_path: Path, mode: MirrorMode, one_batch: bool
) -> None:
    db = mariadb.database
    conn = mariadb.connect(autocommit=True)
    master = mariadb.master()
    journal, position = master_position(conn)
    config = InstanceConfig(
        destination="narrow",
        master=MasterConfig(
            address=master.address,
            username=master.username,
            password=master.password,
            journal_name=journal,
            position=position,
        ),
        filter_regex=rf"{db}\..*",
        store=StoreConfig(batch_mode="ITEMSIZE"),
        meta_mode="file",
        meta_dir=str(tmp_path / "meta"),
    )
    mirror = DeltaMirror(tmp_path / "mirror", mode=mode)

    def execute(*statements: str) -> None:
        with conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql)

    execute(
        "SET SESSION sql_mode = ''",
        f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, a INT, b INT, c VARCHAR(10), d VARCHAR(10), e BIGINT, "
        "f BIGINT UNSIGNED, g ENUM('x', 'y'))",
        f"INSERT INTO `{db}`.t VALUES (1, 1000, -5, 'abcdefgh', 'ok', 40000, 18446744073709551615, 'x'), "
        "(2, -1000, 7, 'ünïcödé!', NULL, -1, 9223372036854775808, NULL), (3, NULL, NULL, NULL, 'xyz', NULL, NULL, "
        "'y'), (4, 127, 0, 'abc', 'abcd', 32767, 5, NULL)",
    )
    if not one_batch:
        run_caught_up(conn, config, None, mirror)
    execute(
        f"ALTER TABLE `{db}`.t MODIFY a TINYINT, MODIFY b INT UNSIGNED, MODIFY c VARCHAR(3), MODIFY d CHAR(2),"
        " MODIFY e SMALLINT, MODIFY f INT UNSIGNED, MODIFY g ENUM('x', 'y') NOT NULL",
        f"INSERT INTO `{db}`.t VALUES (5, 1, 2, 'new', 'ne', 3, 4, 'y')",
        # the empty ENUM value its NULLs became stays through an ALTER of the labels
        f"ALTER TABLE `{db}`.t MODIFY g ENUM('y', 'x', 'z') NOT NULL",
    )
    run_caught_up(conn, config, None, mirror)
    rows = mariadb.execute(f"SELECT id, a, b, c, d, e, f, g FROM `{db}`.t ORDER BY id")
    assert rows[0] == (1, 127, 0, "abc", "ok", 32767, 4294967295, "x")  # what the server did
    assert rows[1] == (2, -128, 7, "ünï", None, -1, 4294967295, "")
    columns = ("id", "a", "b", "c", "d", "e", "f", "g")
    got = sorted(tuple(r[c] for c in columns) for r in mirror.read(db, "t").to_pylist())
    assert got == [tuple(r) for r in rows]
