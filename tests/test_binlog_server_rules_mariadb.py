"""The private MariaDB's own table maps: a GEOMETRY column counts in the charset list and a YEAR column in the
signedness bitmap (MariaDB 10.5 on), under FULL and MINIMAL ``binlog_row_metadata`` alike, so the columns after them
decode to what SELECT returns: text as ``str``, an unsigned INT above 2^31 as a positive number."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from canal.parse.events import RowsEvent
from canal.parse.mysql import MysqlBinlogSource
from canal.parse.source import DumpRequest

pytestmark = pytest.mark.integration


@pytest.fixture(params=["FULL", "MINIMAL"])
def row_metadata(request: pytest.FixtureRequest, mariadb: Any) -> Iterator[str]:
    before = mariadb.execute("SELECT @@GLOBAL.binlog_row_metadata")[0][0]
    mariadb.execute(f"SET GLOBAL binlog_row_metadata = {request.param}")
    try:
        yield str(request.param)
    finally:
        mariadb.execute(f"SET GLOBAL binlog_row_metadata = {before}")


def test_columns_after_geometry_and_year_decode_as_select_returns_them(mariadb: Any, row_metadata: str) -> None:
    table = f"`{mariadb.database}`.places"
    conn = mariadb.connect()
    with conn.cursor() as cur:
        cur.execute(
            f"CREATE TABLE {table} (id INT PRIMARY KEY, g GEOMETRY NULL, doc JSON, note LONGTEXT, y YEAR,"
            " big INT UNSIGNED, small SMALLINT) CHARACTER SET utf8mb4"
        )
        cur.execute("SHOW MASTER STATUS")
        start_file, start_pos = cur.fetchone()[:2]
        cur.execute(
            f"INSERT INTO {table} VALUES (1, ST_GeomFromText('POINT(1 2)'), '{{\"a\": \"é\"}}', 'ünï 😀', 2024,"
            " 4000000000, -5), (2, NULL, NULL, NULL, NULL, 2147483648, 7)"
        )
        cur.execute(f"SELECT id, doc, note, y, big, small FROM {table} ORDER BY id")
        selected = [tuple(row) for row in cur.fetchall()]
    conn.close()

    source = MysqlBinlogSource(mariadb.address, mariadb.user, mariadb.password)
    source.open()
    try:
        events = list(source.dump(DumpRequest(start_file, start_pos, blocking=False)))
    finally:
        source.close()
    rows = [r.after for ev in events if isinstance(ev, RowsEvent) and ev.table.table == "places" for r in ev.rows]
    decoded = [(r[0], r[2], r[3], r[4], r[5], r[6]) for r in rows if r is not None]
    assert decoded == selected
    assert decoded[0][2] == "ünï 😀" and decoded[1][4] == 2147483648
