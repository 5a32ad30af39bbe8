"""UNSIGNED columns hold their values whatever ``binlog_row_metadata`` the server logs.

MariaDB's default, NO_LOG, writes no signedness into table maps: only the schema history knows that a column is
UNSIGNED, and the row decoder must read the bytes as such (INT UNSIGNED 4,000,000,000 is not -294,967,296). Checked
from a fresh start and across a restart between two ALTERs, against ``SELECT``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from canal.instance import Instance
from canal.testing.plugin import MariaDBFactory
from tests.test_schema_history_mariadb import _config, _consume

pytestmark = pytest.mark.integration

_CREATE = (
    "CREATE TABLE app.u (id INT NOT NULL PRIMARY KEY, ti TINYINT UNSIGNED, si SMALLINT UNSIGNED, "
    "mi MEDIUMINT UNSIGNED, i INT UNSIGNED, bi BIGINT UNSIGNED, s INT, d DECIMAL(12,2) UNSIGNED)"
)
_MAXIMA = "255, 65535, 16777215, 4294967295, 18446744073709551615, -5, 1234567890.12"


def _select(server: Any, table: str) -> list[dict[str, Any]]:
    conn = server.connect("app")
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM {table} ORDER BY id")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


@pytest.mark.parametrize("metadata", ["NO_LOG", "MINIMAL", "FULL"])
def test_unsigned_values_from_a_fresh_start(mariadb_factory: MariaDBFactory, tmp_path: Path, metadata: str) -> None:
    server = mariadb_factory(extra_args=[f"--binlog-row-metadata={metadata}"])
    server.execute("CREATE DATABASE app")
    server.execute(_CREATE)
    inst = Instance(_config(server, tmp_path))
    inst.start()
    try:
        server.execute(f"INSERT INTO app.u VALUES (1, {_MAXIMA})")
        server.execute("INSERT INTO app.u VALUES (2, 128, 32768, 8388608, 4000000000, 9223372036854775808, 1, 0.5)")
        rows = _consume(inst, 2)
    finally:
        inst.stop()
    assert [image for _, _, image in rows] == _select(server, "u")


@pytest.mark.parametrize("metadata", ["NO_LOG", "MINIMAL"])
def test_unsigned_values_across_a_restart_between_two_alters(
    mariadb_factory: MariaDBFactory, tmp_path: Path, metadata: str
) -> None:
    server = mariadb_factory(extra_args=[f"--binlog-row-metadata={metadata}"])
    server.execute("CREATE DATABASE app")
    server.execute("CREATE TABLE app.t (id INT NOT NULL PRIMARY KEY, a INT)")
    server.execute("SET GLOBAL sql_mode = ''")  # -1 becomes 0 under the MODIFY instead of failing it
    config = _config(server, tmp_path)
    inst = Instance(config)
    inst.start()
    try:
        server.execute("INSERT INTO app.t VALUES (0, -1)")
        assert _consume(inst, 1)[0][2] == {"id": 0, "a": -1}  # the history is bootstrapped before the ALTERs
        server.execute("ALTER TABLE app.t MODIFY a INT UNSIGNED DEFAULT NULL")
        server.execute("INSERT INTO app.t VALUES (1, 4000000000)")
        first = _consume(inst, 1)
    finally:
        inst.stop()
    server.execute("ALTER TABLE app.t ADD COLUMN b BIGINT UNSIGNED FIRST")
    server.execute("INSERT INTO app.t VALUES (18446744073709551615, 2, 4000000001)")
    again = Instance(config)
    again.start()
    try:
        second = _consume(again, 1)
    finally:
        again.stop()
    assert first[0][2] == {"id": 1, "a": 4000000000}
    assert second[0][2] == _select(server, "t")[2]
    assert second[0][2]["b"] == 18446744073709551615
