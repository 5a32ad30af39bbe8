"""A snapshot row and a binlog row of the same table hold the same Python values, type for type: the snapshot reads
the server's text and turns it into what the binlog decoder gives (``canal.snapshot.values``). Checked on a real
MariaDB across the types, with NULLs, zero dates, negative times, and columns where some values take the slow path."""

from __future__ import annotations

from typing import Any

import pytest

from canal.config import InstanceConfig, StoreConfig
from canal.instance import Instance
from canal.protocol import EMPTY_MESSAGE_ID, EventType
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration

COLUMNS = (
    "id INT PRIMARY KEY, ti TINYINT, tu TINYINT UNSIGNED, bi BIGINT, bu BIGINT UNSIGNED, "
    "d DECIMAL(65,30), d2 DECIMAL(10,2) NOT NULL, f FLOAT, db DOUBLE, dt DATE, dtt DATETIME(6), "
    "ts TIMESTAMP(6) NULL, tm TIME(3), y YEAR, bt BIT(10), e ENUM('a','b c'), st SET('x','y','z'), "
    "c CHAR(4), v VARCHAR(20), bn BINARY(3), vb VARBINARY(8), bl BLOB, tx TEXT, js JSON"
)
ROWS = (
    "(1, -128, 255, -9223372036854775808, 18446744073709551615, "
    "12345678901234567890123456789012345.123456789012345678901234567890, 1.50, 1.25, -2.5e300, '2026-11-23', "
    "'2026-11-23 10:11:12.123456', '2026-11-23 10:11:12.654321', '-838:59:59.999', 2026, b'1010101010', 'b c', "
    "'x,z', 'ab', 'héllo wörld ✓', 'a\\0b', x'00ff10', x'deadbeef', 'long text', '{\"k\": [1, 2.5, null]}')",
    "(2, NULL, NULL, NULL, NULL, NULL, 0.00, NULL, NULL, '0000-00-00', '0000-00-00 00:00:00', NULL, NULL, NULL, "
    "NULL, NULL, '', NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
    "(3, 0, 0, 0, 0, -0.000000000000000000000000000001, -99999999.99, -0.0, 0, '1000-01-01', "
    "'9999-12-31 23:59:59.999999', '1970-01-01 00:00:01', '00:00:00', 1901, b'0', 'a', 'x,y,z', '', '', 'xyz', '', "
    "'', '', '[]')",
)


def _rows(inst: Instance, kind: EventType, n: int) -> dict[int, tuple[Any, ...]]:
    out: dict[int, tuple[Any, ...]] = {}
    for _ in range(200):
        msg = inst.get_without_ack(100, timeout=0.2)
        if msg.id == EMPTY_MESSAGE_ID:
            continue
        for entry in msg.entries:
            rc = entry.row_change
            if rc is not None and rc.event_type is kind:
                out.update((row.after[0], tuple(row.after)) for row in rc.rows if row.after is not None)
        inst.ack(msg.id)
        if len(out) >= n:
            return out
    raise AssertionError(f"only {len(out)} of {n} {kind.name} rows arrived")


def test_snapshot_values_equal_binlog_values(mariadb: MariaDBDatabase) -> None:
    mariadb.execute("SET GLOBAL sql_mode = ''")  # zero dates allowed, as older applications write them
    try:
        mariadb.execute(f"CREATE TABLE v ({COLUMNS})")
        config = InstanceConfig(
            destination="values",
            master=mariadb.master(),
            filter_regex=rf"{mariadb.database}\.v",
            store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=1024),
        )
        with Instance(config) as inst:
            with mariadb.connect() as conn, conn.cursor() as cur:
                cur.execute("SET SESSION sql_mode = '', time_zone = '+00:00'")
                cur.execute(f"INSERT INTO v VALUES {', '.join(ROWS)}")
            streamed = _rows(inst, EventType.INSERT, len(ROWS))
            inst.snapshot([f"{mariadb.database}.v"], chunk_rows=2)  # chunks of 2: the key carries on across them
            snapshot = _rows(inst, EventType.SNAPSHOT, len(ROWS))
    finally:
        mariadb.execute("SET GLOBAL sql_mode = DEFAULT")
    assert set(snapshot) == set(streamed) == {1, 2, 3}
    for key in streamed:
        assert [type(v) for v in snapshot[key]] == [type(v) for v in streamed[key]], key
        assert snapshot[key] == streamed[key], key
