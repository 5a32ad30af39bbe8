"""Snapshot options on a real MariaDB: ``initial_only`` (a copy of the tables, then the stream ends), tables
without a primary key (chunked by a unique key; refused with ``keyless=refuse`` before anything changes), unknown
tables (refused before anything changes)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import attrs
import pytest
from test_snapshot_resume import (
    _config,
    _consume,
    _cursor_snapshot,
    _deadline,  # noqa: F401 (autouse: each test here gets _consume's 120 s anew)
    _until_snapshot_finished,
)
from test_snapshot_stream import Mirror, _load, _select

from canal.errors import ConfigError, SnapshotError
from canal.instance import Instance
from canal.protocol import EMPTY_MESSAGE_ID, EventType
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration


def test_initial_only_copies_the_tables_then_ends_the_stream(mariadb: MariaDBDatabase, tmp_path: Path) -> None:
    _load(mariadb)
    db = mariadb.database
    config = _config(mariadb, tmp_path, mode="initial_only", tables=[f"{db}.k", f"{db}.c"], chunk_rows=100)
    mirror = Mirror()
    acked: set[tuple[str, Any]] = set()
    with Instance(config) as inst:
        runner = inst.snapshots[0]
        while mirror.kinds[EventType.SNAPSHOT] == 0:
            _consume(inst, mirror, acked)
        # changes while the snapshot runs: before its last chunk, so the copy holds them
        mariadb.execute("UPDATE k SET v = -5 WHERE id IN (1, 2999)")  # a chunk already read, one not read yet
        mariadb.execute("DELETE FROM k WHERE id IN (3, 2998)")
        mariadb.execute("INSERT INTO c VALUES ('new', 1, 7)")
        _until_snapshot_finished(inst, mirror, acked)
        assert runner.progress().done
        assert inst.parser.join(30), "the parser did not stop after the snapshot's last entry"
        assert inst.parser.error is None
        metrics = inst.metrics()
        assert metrics.stream_ended and metrics.running  # ended by design, not by an error
        mariadb.execute("UPDATE k SET v = -6 WHERE id = 5")  # after the end: never delivered
        assert inst.get_without_ack(100, timeout=0.5).id == EMPTY_MESSAGE_ID
        with pytest.raises(SnapshotError, match="initial_only"):
            inst.snapshot([f"{db}.k"])
        assert _cursor_snapshot(inst) is None
    mariadb.execute("UPDATE k SET v = 5 WHERE id = 5")  # back to what the copy holds
    assert mirror.tables[f"{db}.k"] == _select(mariadb, "k", 1)
    assert mirror.tables[f"{db}.c"] == _select(mariadb, "c", 2)
    assert mirror.tables[f"{db}.k"][(1,)][1] == -5 and (3,) not in mirror.tables[f"{db}.k"]

    with Instance(config) as inst:  # the copy is done: a later start snapshots nothing and streams nothing
        assert inst.snapshots == () and not inst.parser.is_running and inst.metrics().stream_ended
        mariadb.execute("UPDATE k SET v = -7 WHERE id = 6")
        assert inst.get_without_ack(100, timeout=0.5).id == EMPTY_MESSAGE_ID


def test_a_table_without_a_primary_key_resumes_after_its_unique_key(mariadb: MariaDBDatabase, tmp_path: Path) -> None:
    mariadb.execute("CREATE TABLE other (id INT AUTO_INCREMENT PRIMARY KEY, w INT)")
    config = _config(mariadb, tmp_path, chunk_rows=100)
    db = mariadb.database
    mirror: dict[str, tuple[Any, ...]] = {}
    acked: set[str] = set()

    def consume(inst: Instance) -> None:
        msg = inst.get_without_ack(300, timeout=0.2)
        if msg.id == EMPTY_MESSAGE_ID:
            return
        for entry in msg.entries:
            rc = entry.row_change
            if rc is None or rc.is_ddl or entry.header.table != "u":
                continue
            for row in rc.rows:
                if row.before is not None:
                    mirror.pop(row.before[0], None)
                if row.after is not None:
                    mirror[row.after[0]] = row.after
        inst.ack(msg.id)
        for entry in msg.entries:
            rc = entry.row_change
            if rc is not None and rc.event_type is EventType.SNAPSHOT and entry.header.table == "u":
                codes = {row.after[0] for row in rc.rows if row.after is not None}
                assert not codes & acked, "an acked snapshot row came again"
                acked.update(codes)

    with Instance(config) as inst:
        # created while the destination runs: its layout comes from the DDL, which has no primary key
        mariadb.execute("CREATE TABLE u (code VARCHAR(12) NOT NULL, v INT, UNIQUE KEY uk (code))")
        mariadb.execute("INSERT INTO u SELECT CONCAT('c', LPAD(seq, 4, '0')), seq FROM seq_1_to_700")
        inst.snapshot([f"{db}.u"])
        while (progress := _cursor_snapshot(inst)) is None or progress.rows < 300:
            consume(inst)
        mariadb.execute("UPDATE u SET v = -1 WHERE code IN ('c0001', 'c0700')")
    assert progress.after is not None and len(progress.after) == 1  # the unique key's one column
    resumed_after = str(progress.after[0])
    assert max(acked) == resumed_after
    with Instance(config) as inst:
        assert inst.snapshots[0].plan == progress
        while _cursor_snapshot(inst) is not None or not inst.snapshots[0].progress().done:
            consume(inst)
        mariadb.execute("DELETE FROM u WHERE code = 'c0002'")
        mariadb.execute("INSERT INTO other VALUES (NULL, 1)")
        while "c0002" in mirror:
            consume(inst)
    assert mirror == {r[0]: tuple(r) for r in mariadb.execute("SELECT * FROM u")}


def test_keyless_refuse_fails_before_anything_changes(mariadb: MariaDBDatabase, tmp_path: Path) -> None:
    _load(mariadb)  # table n has no key at all
    db = mariadb.database
    with Instance(_config(mariadb, tmp_path / "a", keyless="refuse")) as inst:
        before = inst.meta.get_cursor(inst.default_client)
        with pytest.raises(SnapshotError, match=rf"{db}\.n"):
            inst.snapshot([f"{db}.k", f"{db}.n"])
        assert inst.snapshots == () and inst.parser.merge is not None and inst.parser.merge.progress is None
        assert inst.meta.get_cursor(inst.default_client) == before
        inst.snapshot([f"{db}.k"]).wait(60)  # a table with a key is taken

    config = _config(mariadb, tmp_path / "b", mode="initial", keyless="refuse")
    config = attrs.evolve(config, master=attrs.evolve(config.master, journal_name=None, position=None))
    inst = Instance(config)
    with pytest.raises(SnapshotError, match=rf"{db}\.n"):
        inst.start()
    assert not inst.is_started
    unknown = attrs.evolve(config, snapshot=attrs.evolve(config.snapshot, keyless="read_whole", tables=[f"{db}.nope"]))
    with pytest.raises(ConfigError, match=rf"{db}\.nope"):
        Instance(unknown).start()
    with Instance(_config(mariadb, tmp_path / "b")) as plain:  # nothing was written: no cursor, no snapshot
        assert plain.meta.get_cursor(plain.default_client) is None and plain.snapshots == ()


def test_a_get_waiting_for_a_full_batch_is_not_held_by_the_snapshot_read_ahead(
    mariadb: MariaDBDatabase, tmp_path: Path
) -> None:
    """The reader stops four chunks ahead of the consumer; a get asking for more entries than that, with a timeout,
    must get what is there instead of waiting out its timeout (it once did, for every batch of the snapshot)."""
    _load(mariadb)
    db = mariadb.database
    with Instance(_config(mariadb, tmp_path, chunk_rows=100)) as inst:
        runner = inst.snapshot([f"{db}.k"])
        got = 0
        while got < 3000:
            began = time.monotonic()
            msg = inst.get_without_ack(500, timeout=60)  # 500 entries: more than four chunks of 100 rows hold
            assert time.monotonic() - began < 30, "the get waited for a batch the snapshot could not fill"
            got += sum(
                len(e.row_change.rows) for e in msg.entries if e.row_change is not None and e.header.table == "k"
            )
            inst.ack(msg.id)
        assert runner.wait(30).rows_emitted == 3000
