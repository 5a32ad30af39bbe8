"""Snapshots placed by DBLog's watermarks (``SnapshotConfig(watermark_table=...)``) on a real MariaDB: what is
refused before anything changes, and marks that never reach the binlog fail the snapshot instead of hanging it.
(Concurrent writers with watermarks: ``test_snapshot_stream``; the placement rule: ``test_snapshot_marks_model``.)"""

from __future__ import annotations

from typing import Any

import pytest

from canal.config import InstanceConfig, SnapshotConfig, StoreConfig
from canal.errors import ConfigError, SnapshotError
from canal.instance import Instance
from canal.protocol import EMPTY_MESSAGE_ID, EventType
from canal.snapshot.marks import WATERMARK_TABLE_DDL, WatermarkWriter
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration


def _config(db: MariaDBDatabase, marks: str) -> InstanceConfig:
    return InstanceConfig(
        destination="marks",
        master=db.master(),
        filter_regex=rf"{db.database}\.k",
        store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=1024),
        snapshot=SnapshotConfig(watermark_table=f"{db.database}.{marks}"),
    )


def create_watermark_table(db: MariaDBDatabase, name: str = "canal_marks") -> None:
    """The table, and the write grant DBLog's watermarks need (the test user only reads otherwise)."""
    db.execute(WATERMARK_TABLE_DDL.format(table=name))
    db.execute(f"GRANT INSERT, UPDATE ON {db.database}.{name} TO %s@'%%'", (db.server.user,))


def _snapshot_rows(inst: Instance, snapshot: Any, want: int) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    while len(rows) < want:
        if not snapshot.running:
            snapshot.wait(0)  # raises its error
        msg = inst.get(100, timeout=0.2)
        if msg.id == EMPTY_MESSAGE_ID:
            continue
        for entry in msg.entries:
            if entry.row_change is not None and entry.row_change.event_type is EventType.SNAPSHOT:
                rows.extend(tuple(r.after) for r in entry.row_change.rows)
    return rows


def test_a_missing_or_wrong_watermark_table_is_refused_before_anything_changes(mariadb: MariaDBDatabase) -> None:
    db = mariadb.database
    mariadb.execute("CREATE TABLE k (id INT PRIMARY KEY, v INT)")
    mariadb.execute("INSERT INTO k VALUES (1, 10), (2, 20)")
    with pytest.raises(ConfigError, match=r"watermark_table"):
        SnapshotConfig(watermark_table="no_dot")
    with Instance(_config(mariadb, "canal_marks")) as inst:
        with pytest.raises(SnapshotError, match=r"does not exist; create it with CREATE TABLE"):
            inst.snapshot([f"{db}.k"])
        mariadb.execute("CREATE TABLE canal_marks (destination VARCHAR(191) PRIMARY KEY, value CHAR(32))")
        with pytest.raises(SnapshotError, match=r"its columns are \(destination, value\)"):
            inst.snapshot([f"{db}.k"])
        mariadb.execute("DROP TABLE canal_marks")
        mariadb.execute(WATERMARK_TABLE_DDL.format(table="canal_marks"))
        with pytest.raises(ConfigError, match="watermark table"):
            inst.snapshot([f"{db}.canal_marks"])
        with pytest.raises(SnapshotError, match="grant this user INSERT and UPDATE"):
            inst.snapshot([f"{db}.k"])
        # nothing changed: no snapshot ran, none is pending, nothing was written to the table
        assert inst.snapshots == () and inst.metrics().snapshot is None
        assert mariadb.execute("SELECT COUNT(*) FROM canal_marks")[0][0] == 0
        # and with the table in place and writable the snapshot runs
        mariadb.execute(f"GRANT INSERT, UPDATE ON {db}.canal_marks TO %s@'%%'", (mariadb.server.user,))
        snapshot = inst.snapshot([f"{db}.k"])
        assert sorted(_snapshot_rows(inst, snapshot, 2)) == [(1, 10), (2, 20)]
        assert snapshot.wait(30).done


def test_marks_that_never_reach_the_binlog_fail_the_snapshot(
    mariadb: MariaDBDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A watermark table the binlog leaves out (``binlog_ignore_db``; here: the marks written with
    ``sql_log_bin = 0``): once the parser passes the binlog's end after the marks, the chunk fails with a
    :class:`SnapshotError` saying why, and the stream goes on."""
    db = mariadb.database
    mariadb.execute("CREATE TABLE k (id INT PRIMARY KEY, v INT)")
    mariadb.execute("INSERT INTO k VALUES (1, 10)")
    create_watermark_table(mariadb)

    def without_binlog(self: WatermarkWriter) -> Any:  # as root: sql_log_bin needs BINLOG ADMIN
        if self._conn is None:
            self._conn = mariadb.server.connect()
            self._conn.autocommit(True)
            with self._conn.cursor() as cur:
                cur.execute("SET SESSION sql_log_bin = 0")
        return self._conn

    monkeypatch.setattr(WatermarkWriter, "_connection", without_binlog)
    with Instance(_config(mariadb, "canal_marks")) as inst:
        snapshot = inst.snapshot([f"{db}.k"])
        mariadb.execute("INSERT INTO k VALUES (2, 20)")  # the stream moves past the marks' place
        got: list[Any] = []
        while snapshot.running:
            msg = inst.get(100, timeout=0.2)
            got.extend(e.row_change.event_type for e in msg.entries if e.row_change is not None)
        with pytest.raises(SnapshotError, match="did not reach the binlog"):
            snapshot.wait(0)
        assert EventType.SNAPSHOT not in got and EventType.INSERT in got
        assert mariadb.execute("SELECT COUNT(*) FROM canal_marks")[0][0] == 1  # written, not logged
        assert inst.parser.merge.expected_marks == 0  # the failed snapshot's marks are watched no more
