"""Table-map optional metadata as a real MariaDB 10.11 counts it (issue #33, items 3 and 4), with
``binlog_row_metadata`` FULL and MINIMAL (both write the charset list and the signedness bitmap).

MariaDB gives GEOMETRY columns an entry in the charset list and YEAR columns a signedness bit; a reader that skips
them hands every later column its neighbour's collation or sign. Each test compares the decoded row with what
``SELECT`` returns, read through the network source and from the binlog files alone (no information_schema).
"""

from __future__ import annotations

from typing import Any

import pytest

from canal.parse.events import RowsEvent
from canal.parse.mysql import LocalBinlogSource, MysqlBinlogSource
from canal.parse.source import DumpRequest

pytestmark = pytest.mark.integration

METADATA = pytest.mark.parametrize("metadata", ["FULL", "MINIMAL"])


def _captured(server: Any, table: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The after images of ``d.<table>``'s rows, from a network dump and from the local files."""
    request = DumpRequest("mysql-bin.000001", 4, blocking=False)
    source = MysqlBinlogSource(server.address, server.user, server.password)
    source.open()
    try:
        net = list(source.dump(request))
    finally:
        source.close()
    local = list(LocalBinlogSource(server.datadir).dump(request))

    def rows(events: list[Any]) -> list[tuple[Any, ...]]:
        return [
            tuple(r.after) for ev in events if isinstance(ev, RowsEvent) and ev.table.table == table for r in ev.rows
        ]

    return rows(net), rows(local)


@METADATA
def test_a_json_and_a_longtext_after_a_geometry_arrive_as_text(mariadb_factory: Any, metadata: str) -> None:
    server = mariadb_factory(extra_args=[f"--binlog-row-metadata={metadata}"])
    server.execute("CREATE DATABASE d")
    server.execute(
        "CREATE TABLE d.g (id INT PRIMARY KEY, shape GEOMETRY, doc JSON, body LONGTEXT, tag VARCHAR(10)) "
        "CHARACTER SET utf8mb4"
    )
    server.execute("INSERT INTO d.g VALUES (1, ST_GeomFromText('POINT(1 2)'), '{\"a\": \"é\"}', 'héllo wörld', 'ü')")
    expected = server.execute("SELECT id, ST_AsBinary(shape), doc, body, tag FROM d.g")
    assert isinstance(expected[0][2], str) and isinstance(expected[0][3], str)
    net, local = _captured(server, "g")
    assert net == [tuple(expected[0])]
    assert local == net


@METADATA
def test_an_unsigned_int_after_a_year_keeps_its_values(mariadb_factory: Any, metadata: str) -> None:
    server = mariadb_factory(extra_args=[f"--binlog-row-metadata={metadata}"])
    server.execute("CREATE DATABASE d")
    server.execute("CREATE TABLE d.y (id INT PRIMARY KEY, y YEAR, big INT UNSIGNED, small INT, huge BIGINT UNSIGNED)")
    server.execute("INSERT INTO d.y VALUES (1, 2024, 3000000000, -5, 18446744073709551615)")
    server.execute("INSERT INTO d.y VALUES (2, NULL, 2147483648, -2147483648, 9223372036854775808)")
    expected = [tuple(r) for r in server.execute("SELECT id, y, big, small, huge FROM d.y ORDER BY id")]
    assert expected[0][2] == 3_000_000_000
    net, local = _captured(server, "y")
    assert net == expected
    assert local == net
