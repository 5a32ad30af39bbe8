"""XA transactions on a real MariaDB: delivered at XA PREPARE (as canal does), then an XACOMMIT / XAROLLBACK entry."""

from __future__ import annotations

import time
from typing import Any

import pytest

from canal.config import InstanceConfig
from canal.instance import Instance
from canal.protocol import EntryType, EventType
from canal.spark.testing import master_position

pytestmark = pytest.mark.integration


def test_xa_commit_and_rollback_are_delivered_in_binlog_order(mariadb: Any) -> None:
    conn = mariadb.connect()
    db = mariadb.database
    start = master_position(conn)
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY)")
        for xid, ids, outcome in (("x1", (1, 2), "COMMIT"), ("x2", (3,), "ROLLBACK")):
            cur.execute(f"XA START '{xid}'")
            cur.execute(f"INSERT INTO `{db}`.t VALUES " + ", ".join(f"({i})" for i in ids))
            cur.execute(f"XA END '{xid}'")
            cur.execute(f"XA PREPARE '{xid}'")
            cur.execute(f"XA {outcome} '{xid}'")
        cur.execute(f"INSERT INTO `{db}`.t VALUES (4)")
    config = InstanceConfig(
        destination="xa",
        master=mariadb.master(start),
        filter_regex=rf"{db}\..*",
    )
    seen: list[tuple[EntryType, EventType | None, Any]] = []
    deadline = time.monotonic() + 30
    with Instance(config) as inst:
        while not any(item == [(4,)] for _, _, item in seen):
            assert time.monotonic() < deadline, f"the last insert never came; got {seen}"
            msg = inst.get(100, timeout=0.1)  # what came within 0.1 s
            for entry in msg.entries:
                rc = entry.row_change
                item = [row.after for row in rc.rows] if rc is not None and rc.rows else (rc.sql if rc else None)
                seen.append((entry.entry_type, entry.header.event_type, item))
    kinds = [(t, e) for t, e, _ in seen if t is EntryType.ROWDATA]
    assert kinds == [
        (EntryType.ROWDATA, EventType.CREATE),
        (EntryType.ROWDATA, EventType.INSERT),  # x1's rows, at its XA PREPARE
        (EntryType.ROWDATA, EventType.XACOMMIT),
        (EntryType.ROWDATA, EventType.INSERT),  # x2's rows, at its XA PREPARE
        (EntryType.ROWDATA, EventType.XAROLLBACK),  # ...which the consumer must undo, as with canal
        (EntryType.ROWDATA, EventType.INSERT),
    ]
    rows = [item for t, e, item in seen if e is EventType.INSERT]
    assert rows == [[(1,), (2,)], [(3,)], [(4,)]]
    xa = [item for _, e, item in seen if e in (EventType.XACOMMIT, EventType.XAROLLBACK)]
    assert xa[0].startswith("XA COMMIT") and xa[1].startswith("XA ROLLBACK")
    # every prepared part and the plain insert are whole transactions
    assert [t for t, _, _ in seen].count(EntryType.TRANSACTIONBEGIN) == 3
