"""Snapshot progress in the consumer cursor, on a real MariaDB: a restart resumes an unfinished snapshot after the
last acked snapshot row (redelivering none of them), and ``SnapshotConfig(mode="initial")`` snapshots the captured
tables on a destination's first start only."""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs
import pytest
from test_snapshot_stream import Mirror, Writers, _load, _select

from canal.client import ClientIdentity
from canal.config import InstanceConfig, MasterConfig, SnapshotConfig, StoreConfig
from canal.errors import BinlogPurgedError, UnknownDestinationError
from canal.instance import Instance
from canal.position import SnapshotCursor
from canal.protocol import EMPTY_MESSAGE_ID, Entry, EntryType, EventType
from canal.server import EmbeddedServer
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration


def _config(db: MariaDBDatabase, meta_dir: Path, **snapshot: Any) -> InstanceConfig:
    return InstanceConfig(
        destination="resume",
        master=db.master(),
        filter_regex=rf"{db.database}\..*",
        store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=4096),
        meta_mode="file",
        meta_dir=str(meta_dir),
        snapshot=SnapshotConfig(**snapshot),
    )


def _snapshot_keys(entries: Iterable[Entry]) -> set[tuple[str, Any]]:
    out = set()
    for entry in entries:
        rc = entry.row_change
        if entry.entry_type is EntryType.ROWDATA and rc is not None and rc.event_type is EventType.SNAPSHOT:
            for row in rc.rows:
                assert row.after is not None
                out.add((entry.header.table, tuple(row.after[i] for i in row.table.key_indexes)))
    return out


def _cursor_snapshot(inst: Instance) -> SnapshotCursor | None:
    cursor = inst.meta.get_cursor(inst.default_client)
    return None if cursor is None else cursor.snapshot


_DEADLINE = [0.0]


def _consume(inst: Instance, mirror: Mirror, acked: set[tuple[str, Any]]) -> None:
    """One get, applied and acked (fails the test once it runs longer than 120 s)."""
    if not _DEADLINE[0]:
        _DEADLINE[0] = time.monotonic() + 120
    assert time.monotonic() < _DEADLINE[0], "the consumer waited too long"
    msg = inst.get_without_ack(300, timeout=0.2)
    if msg.id != EMPTY_MESSAGE_ID:
        mirror.apply(msg.entries)
        inst.ack(msg.id)
        acked |= _snapshot_keys(msg.entries)


def _until_snapshot_finished(inst: Instance, mirror: Mirror, acked: set[tuple[str, Any]]) -> None:
    """Consume until the last snapshot has finished and its end is acked (the cursor holds no snapshot)."""
    runner = inst.snapshots[-1]
    while not runner.progress().done or _cursor_snapshot(inst) is not None:
        _consume(inst, mirror, acked)
        assert runner.error is None, runner.error


def _until_marker(inst: Instance, db: MariaDBDatabase, mirror: Mirror, acked: set[tuple[str, Any]]) -> None:
    """Consume until a row written now arrived: everything before it is in the mirror."""
    db.execute("INSERT INTO other VALUES (NULL, -1)")
    while (-1,) not in {r[1:] for r in mirror.tables.get(f"{db.database}.other", {}).values()}:
        _consume(inst, mirror, acked)
    db.execute("DELETE FROM other WHERE w = -1")
    while any(r[1:] == (-1,) for r in mirror.tables.get(f"{db.database}.other", {}).values()):
        _consume(inst, mirror, acked)


@pytest.fixture(autouse=True)
def _deadline() -> None:
    _DEADLINE[0] = 0.0


def test_a_restart_resumes_the_snapshot_after_the_last_acked_row(mariadb: MariaDBDatabase, tmp_path: Path) -> None:
    _load(mariadb)
    db = mariadb.database
    config = _config(mariadb, tmp_path, chunk_rows=250)
    mirror = Mirror()
    acked_before: set[tuple[str, Any]] = set()
    with Writers(mariadb, seed=3) as writers:
        with Instance(config) as inst:
            while writers.writes < 30:
                _consume(inst, mirror, acked_before)
            inst.snapshot([f"{db}.k", f"{db}.c"])
            while (progress := _cursor_snapshot(inst)) is None or progress.rows < 800:
                _consume(inst, mirror, acked_before)
            held = inst.get_without_ack(300, timeout=5)  # handed out, never applied nor acked: comes again
            assert held.id != EMPTY_MESSAGE_ID
        assert progress.tables == (f"{db}.k", f"{db}.c") and progress.table == 0 and progress.after is not None
        resumed_after = int(progress.after[0])
        acked_k = {key for table, key in acked_before if table == "k"}
        assert acked_k and max(key[0] for key in acked_k) == resumed_after  # the cursor names the last acked row

        acked_after: set[tuple[str, Any]] = set()
        with Instance(config) as inst:  # no snapshot() call: the cursor's unfinished snapshot resumes by itself
            assert len(inst.snapshots) == 1 and inst.snapshots[0].plan == progress
            _until_snapshot_finished(inst, mirror, acked_after)
            writers.stop.set()
            _until_marker(inst, mariadb, mirror, acked_after)
        # nothing acked before the restart came again, and the resumed table went on after the acked key
        assert not acked_before & acked_after
        assert all(key[0] > resumed_after for table, key in acked_after if table == "k")
        assert {table for table, _ in acked_after} == {"k", "c"}
    assert mirror.tables[f"{db}.k"] == _select(mariadb, "k", 1)
    assert mirror.tables[f"{db}.c"] == _select(mariadb, "c", 2)
    assert mirror.tables[f"{db}.other"] == _select(mariadb, "other", 1)

    with Instance(config) as inst:  # finished: a later start runs no snapshot
        assert inst.snapshots == () and _cursor_snapshot(inst) is None


def test_initial_mode_snapshots_the_captured_tables_on_the_first_start_only(
    mariadb: MariaDBDatabase, tmp_path: Path
) -> None:
    _load(mariadb)
    db = mariadb.database
    config = _config(mariadb, tmp_path, mode="initial", chunk_rows=700)
    config = attrs.evolve(config, master=attrs.evolve(config.master, journal_name=None, position=None))
    mirror = Mirror()
    seen: set[tuple[str, Any]] = set()
    with Writers(mariadb, seed=4) as writers, Instance(config) as inst:
        assert len(inst.snapshots) == 1
        snapshot = inst.snapshots[0]
        _until_snapshot_finished(inst, mirror, seen)
        assert snapshot.tables == tuple(f"{db}.{t}" for t in ("c", "k", "n", "other"))  # the filter's tables
        metrics = inst.metrics().snapshot
        assert metrics is not None and metrics.done and metrics.tables_done == 4 and metrics.eta_s is None
        assert metrics.rows_emitted >= 3000 and metrics.rows_expected > 0
        assert inst.metrics().as_dict()["snapshot"]["tables_done"] == 4
        writers.stop.set()
        _until_marker(inst, mariadb, mirror, seen)
    assert writers.writes > 0
    for table, keys in (("k", 1), ("c", 2), ("other", 1)):
        assert mirror.tables[f"{db}.{table}"] == _select(mariadb, table, keys), table
    with Instance(config) as inst:  # the cursor exists now: no second initial snapshot
        assert inst.snapshots == ()
        _until_marker(inst, mariadb, mirror, seen)
    # a configured start position is not a first start either
    with Instance(_config(mariadb, tmp_path / "other-meta", mode="initial")) as inst:
        assert inst.snapshots == ()


def test_the_server_snapshots_a_destination_it_runs(mariadb: MariaDBDatabase, tmp_path: Path) -> None:
    _load(mariadb)
    db = mariadb.database
    config = _config(mariadb, tmp_path)
    with EmbeddedServer() as server:
        server.start_destination(config)
        with pytest.raises(UnknownDestinationError):
            server.snapshot("nope", [f"{db}.k"])
        runner = server.snapshot(config.destination, [f"{db}.c"], chunk_rows=50)
        mirror = Mirror()
        client = ClientIdentity(config.destination, 1001)
        while not runner.progress().done or server.get_cursor(client) is None or server.get_cursor(client).snapshot:
            msg = server.get_without_ack(client, 500, timeout=0.2)
            if msg.id != EMPTY_MESSAGE_ID:
                mirror.apply(msg.entries)
                server.ack(client, msg.id)
            assert runner.error is None, runner.error
        assert server.metrics()[config.destination].snapshot == runner.progress()
    assert mirror.tables[f"{db}.c"] == _select(mariadb, "c", 2)


def test_when_needed_snapshots_again_when_the_cursor_binlog_was_purged(mariadb_factory: Any, tmp_path: Path) -> None:
    server = mariadb_factory()
    server.execute("CREATE DATABASE shop")
    server.execute("CREATE TABLE shop.k (id INT PRIMARY KEY, v INT)")
    journal, position = server.execute("SHOW MASTER STATUS")[0][:2]
    master = MasterConfig(
        address=server.address, username=server.user, password=server.password, journal_name=journal, position=position
    )
    config = InstanceConfig(
        destination="purged",
        master=master,
        filter_regex=r"shop\..*",
        meta_mode="file",
        meta_dir=str(tmp_path),
        flush_period_s=0,
        snapshot=SnapshotConfig(mode="when_needed", chunk_rows=50),
    )
    server.execute("INSERT INTO shop.k SELECT seq, seq FROM shop.seq_1_to_100")
    mirror = Mirror()
    seen: set[tuple[str, Any]] = set()
    with Instance(config) as inst:  # a configured position: not a first start, nothing to snapshot
        assert inst.snapshots == ()
        while len(mirror.tables.get("shop.k", {})) < 100:
            _consume(inst, mirror, seen)
    # while the destination is down: more rows, and the binlog they went to is purged
    server.execute("INSERT INTO shop.k SELECT seq, seq FROM shop.seq_101_to_250")
    server.execute("UPDATE shop.k SET v = -v WHERE id <= 10")
    server.execute("FLUSH BINARY LOGS")
    now = server.execute("SHOW MASTER STATUS")[0][0]
    deadline = time.monotonic() + 30
    while journal in {str(r[0]) for r in server.execute("SHOW BINARY LOGS")}:
        # the server keeps a file a dump thread still reads (the stopped instance's, until it notices): purge again
        assert time.monotonic() < deadline, f"{journal} was not purged"
        server.execute(f"PURGE BINARY LOGS TO '{now}'")
        time.sleep(0.1)

    never = attrs.evolve(config, snapshot=SnapshotConfig())
    with Instance(never) as inst:  # canal's behaviour: the purged cursor is an error, and no snapshot
        deadline = time.monotonic() + 30
        while not isinstance(inst.parser.error or inst.parser.last_error, BinlogPurgedError):
            assert time.monotonic() < deadline, f"the purged cursor was not reported: {inst.parser.last_error!r}"
            time.sleep(0.05)  # the parser thread reports it; no event to await from here
        assert inst.snapshots == () and inst.get_cursor().position.journal_name == journal  # nothing changed
    with Instance(config) as inst:  # when_needed: snapshot again and stream from now
        assert len(inst.snapshots) == 1
        _until_snapshot_finished(inst, mirror, seen)
        server.execute("INSERT INTO shop.k VALUES (999, 999)")  # streaming goes on after it
        while 999 not in {key[0] for key in mirror.tables["shop.k"]}:
            _consume(inst, mirror, seen)
    assert mirror.tables["shop.k"] == {(r[0],): tuple(r) for r in server.execute("SELECT * FROM shop.k")}


def test_a_resumed_snapshot_skips_a_table_dropped_meanwhile(mariadb: MariaDBDatabase, tmp_path: Path) -> None:
    _load(mariadb)
    db = mariadb.database
    config = _config(mariadb, tmp_path, chunk_rows=250)
    mirror = Mirror()
    seen: set[tuple[str, Any]] = set()
    with Instance(config) as inst:
        inst.snapshot([f"{db}.k", f"{db}.c", f"{db}.other"])
        while (progress := _cursor_snapshot(inst)) is None or progress.rows < 500:
            _consume(inst, mirror, seen)
    assert progress.table == 0  # stopped inside k
    mariadb.execute("DROP TABLE c")
    mariadb.execute("INSERT INTO other VALUES (NULL, 5)")
    with Instance(config) as inst:
        runner = inst.snapshots[0]
        _until_snapshot_finished(inst, mirror, seen)
        assert runner.progress().tables_done == 3  # c counted as done: there was nothing left to read
    assert mirror.tables[f"{db}.k"] == _select(mariadb, "k", 1)
    assert mirror.tables[f"{db}.other"] == _select(mariadb, "other", 1)


def test_after_a_restart_at_a_consumed_boundary_an_idle_server_takes_a_chunk_at_once(
    mariadb: MariaDBDatabase, tmp_path: Path
) -> None:
    """The cursor names a transaction end already consumed (``included``): the resumed dump skips it and the stream
    rests right after it, which is where a chunk read on an idle server is exact. The chunk joins there, without
    waiting for the server's next heartbeat (60 s here)."""
    from canal.config import DetectingConfig, RetryConfig

    _load(mariadb)
    db = mariadb.database
    config = attrs.evolve(
        _config(mariadb, tmp_path),
        detecting=DetectingConfig(interval_s=60),
        retry=RetryConfig(read_timeout_s=180, heartbeat_period_s=60),
    )
    with Instance(config) as inst:
        mariadb.execute("INSERT INTO other VALUES (NULL, 7)")
        # (a caught-up cursor may first follow the stream to where the dump started resting: not yet the INSERT)
        while (cursor := inst.meta.get_cursor(inst.default_client)) is None or not cursor.position.included:
            _consume(inst, Mirror(), set())
    assert cursor.position.position is not None  # a transaction end, consumed
    with Instance(config) as inst:
        began = time.monotonic()
        progress = inst.snapshot([f"{db}.c"]).wait(20)  # a heartbeat would take 60 s
        assert progress.rows_emitted == 600 and time.monotonic() - began < 20
