"""run_batches delivers snapshot rows, on a real MariaDB into a DeltaMirror: batch ids stay increasing when many
batches end at one binlog position, a batch holding snapshot rows comes back identical from the spool after a crash,
and a consumer process SIGKILLed at each step of such a batch ends equal to the source."""

from __future__ import annotations

import itertools
import json
import queue
from pathlib import Path
from typing import Any

import pytest
from procs.batches_consumer import PHASES
from procs.ha_harness import Runs, kill_all
from test_snapshot_stream import Writers, _load

from canal.config import InstanceConfig, MasterConfig, SnapshotConfig, StoreConfig
from canal.errors import SnapshotError
from canal.instance import Instance
from canal.testing.plugin import MariaDBDatabase, S3Bucket

pytest.importorskip("deltalake")

from canal.spark import DeltaMirror, RunStats, run_batches
from canal.spark.testing import compare_tables, healed_by, master_position, no_batch_twice

pytestmark = pytest.mark.integration

TABLES = ("k", "c", "other")


class Crash(Exception):
    pass


def _config(db: MariaDBDatabase, meta_dir: Path, chunk_rows: int = 250) -> InstanceConfig:
    return InstanceConfig(
        destination="batches",
        master=MasterConfig(address=db.address, username=db.user, password=db.password),  # no position
        filter_regex=rf"{db.database}\.(k|c|other)",  # n has no key: a mirror refuses it
        store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=4096),
        meta_mode="file",
        meta_dir=str(meta_dir),
        flush_period_s=0,
        snapshot=SnapshotConfig(mode="initial", tables=[f"{db.database}.{t}" for t in TABLES], chunk_rows=chunk_rows),
    )


def _without_range(record: dict[str, Any]) -> dict[str, Any]:
    """A journal's record without the binlog range it keeps (canal.lake.forms.ranges)."""
    return {k: v for k, v in record.items() if k not in ("from", "to", "next", "reach")}


def _assert_equal(db: MariaDBDatabase, mirror: DeltaMirror) -> None:
    conn = db.connect()
    try:
        for comparison in compare_tables(conn, mirror, db.database, TABLES):
            assert comparison.equal, str(comparison)
    finally:
        conn.close()
    no_batch_twice(mirror, db.database, TABLES)


def test_snapshot_rows_need_a_journal_and_nothing_is_acked_without_one(
    mariadb: MariaDBDatabase, tmp_path: Path
) -> None:
    _load(mariadb)
    called: list[int] = []
    with Instance(_config(mariadb, tmp_path / "meta")) as inst:
        before = inst.get_cursor()
        with pytest.raises(SnapshotError, match="journal"):
            run_batches(inst, None, lambda df, batch_id: called.append(batch_id), idle_stop_s=30)
        assert inst.get_cursor() == before and inst.list_batch_ids()  # refused batches stay outstanding
    assert called == []


def test_the_defaults_heal_with_the_journal_a_mirror_keeps_beside_its_records(
    mariadb: MariaDBDatabase, tmp_path: Path
) -> None:
    """``run_batches(inst, None, mirror)`` as the README shows it, no journal given: the initial snapshot's rows and a
    heal's (a DELETE logged as a statement: ``heal="snapshot"``, the default) are delivered through the journal the
    run keeps beside the mirror's records -- it failed with ``SnapshotError: run_batches needs a journal``."""
    _load(mariadb)
    mirror = DeltaMirror(tmp_path / "mirror", log_history_s=3600)
    conn = mariadb.connect(autocommit=True)
    with Instance(_config(mariadb, tmp_path / "meta")) as inst:
        run_batches(inst, None, mirror, batch_size=200, timeout=0.2, until=healed_by(inst, master_position(conn)))
        with conn.cursor() as cur:
            cur.execute("SET SESSION binlog_format = 'STATEMENT'")
            cur.execute(f"DELETE FROM `{mariadb.database}`.k WHERE MOD(id, 7) = 0")
        run_batches(inst, None, mirror, batch_size=200, timeout=0.2, until=healed_by(inst, master_position(conn)))
        assert inst.metrics().heals == 1
    conn.close()
    journal = Path(mirror.root) / f"_pycanal_run.{mirror.app_id.encode().hex()}.json"
    assert set(_without_range(json.loads(journal.read_text()))) <= {"done", "through", "server"}
    _assert_equal(mariadb, mirror)
    # journal=False: none, and snapshot rows are refused as before
    with Instance(_config(mariadb, tmp_path / "meta2")) as inst, pytest.raises(SnapshotError, match="journal"):
        run_batches(inst, None, DeltaMirror(tmp_path / "other"), journal=False, idle_stop_s=30)


def test_many_batches_at_one_position_get_increasing_ids(mariadb: MariaDBDatabase, tmp_path: Path) -> None:
    """An idle server: every chunk joins the stream at the same boundary, so the batch ids count up from it."""
    _load(mariadb)
    mirror = DeltaMirror(tmp_path / "mirror", log_history_s=3600)
    journal = tmp_path / "journal.json"
    with Instance(_config(mariadb, tmp_path / "meta")) as inst:

        def done(stats: RunStats) -> bool:  # no binlog event comes: the snapshot's end, acked, is the end
            cursor = inst.get_cursor()
            return cursor is not None and cursor.snapshot is None and inst.snapshots[-1].progress().done

        stats = run_batches(inst, None, mirror, batch_size=2, timeout=0.2, journal=journal, until=done)
    ids = stats.batch_ids
    assert ids == sorted(set(ids)) and len(ids) > 5
    assert any(b == a + 1 for a, b in itertools.pairwise(ids))  # ids that no binlog position gave
    assert _without_range(json.loads(journal.read_text())) == {"done": ids[-1]}
    assert not list((tmp_path / "journal.json.spool").glob("*.arrow"))
    _assert_equal(mariadb, mirror)


@pytest.mark.spark
def test_a_crash_after_writing_snapshot_rows_replays_them_identically(
    mariadb: MariaDBDatabase, spark: Any, tmp_path: Path
) -> None:
    _load(mariadb)
    mirror = DeltaMirror(tmp_path / "mirror", log_history_s=3600)
    journal = tmp_path / "journal.json"
    config = _config(mariadb, tmp_path / "meta")
    spooled: dict[int, list[tuple[Any, ...]]] = {}

    def crash_on_second_spooled_batch(df: Any, batch_id: int) -> None:
        writers.allow(1)  # about 6 entries a write: the batches of 8 keep ahead of the writers
        mirror(df, batch_id)
        if json.loads(journal.read_text()).get("spooled"):
            spooled[batch_id] = sorted(tuple(row) for row in df.collect())
            if len(spooled) == 2:
                raise Crash(batch_id)

    conn = mariadb.connect()
    # paced writers, so the test's work does not grow with the machine's load: unpaced, they wrote about 50 times
    # what batches of 8 entries (two or three Spark jobs each) took, for as long as the first run lasted -- every
    # second of it left a backlog the second run had to consume, and a snapshot chunk read once the store was full
    # joined the stream thousands of entries later
    with Writers(mariadb, seed=5, pause_s=0.02, paced=True) as writers:
        writers.allow(4)
        with Instance(config) as inst, pytest.raises(Crash) as crash:
            run_batches(inst, spark, crash_on_second_spooled_batch, batch_size=8, timeout=0.2, journal=journal)
        crashed = crash.value.args[0]
        record = json.loads(journal.read_text())
        assert record["pending"] == crashed and record["spooled"] is True
        assert any(row[4] == "SNAPSHOT" for row in spooled[crashed])
        applied_before = len(mirror.history)

        first: list[tuple[int, list[tuple[Any, ...]]]] = []
        end: list[tuple[str, int]] = []

        def fn(df: Any, batch_id: int) -> None:
            writers.allow(20)  # batches of 256 entries keep ahead of 20 writes
            if not first:
                first.append((batch_id, sorted(tuple(row) for row in df.collect())))
            mirror(df, batch_id)

        with Instance(config) as inst:

            def until(stats: RunStats) -> bool:
                if writers.writes > stop_after:
                    writers.stop.set()
                if not end:
                    cursor = inst.get_cursor()
                    finished = cursor is not None and cursor.snapshot is None and inst.snapshots[-1].progress().done
                    if finished and writers.stop.is_set():
                        writers.thread.join(30)
                        end.append(master_position(conn))
                    return False
                return stats.reached(*end[0])

            stop_after = writers.writes + 100
            writers.allow(20)
            stats = run_batches(inst, spark, fn, batch_size=256, timeout=0.2, journal=journal, until=until)
        assert writers.writes > 100
    conn.close()
    # the batch in flight came back first, with the same id and the same rows, and the mirror skipped it
    assert first[0] == (crashed, spooled[crashed])
    replayed = mirror.history[applied_before]
    assert replayed.batch_id == crashed and set(replayed.tables.values()) == {"skipped"}
    assert stats.batch_ids[0] == crashed and stats.batch_ids == sorted(set(stats.batch_ids))
    assert _without_range(json.loads(journal.read_text())) == {"done": stats.batch_ids[-1]}
    _assert_equal(mariadb, mirror)


def _log(path: Path) -> list[tuple[str, int, dict[str, list[list[Any]]]]]:
    """(kind, batch id, {"s": snapshot rows, "b": binlog rows}) of one run's log lines."""
    out: list[tuple[str, int, dict[str, list[list[Any]]]]] = []
    if path.exists():
        for line in path.read_text().splitlines():
            kind, batch, *rest = line.split(" ", 2)
            out.append((kind, int(batch), json.loads(rest[0]) if rest else {}))
    return out


def test_sigkill_at_each_step_of_a_batch_with_snapshot_rows(mariadb: MariaDBDatabase, tmp_path: Path) -> None:
    _load(mariadb)
    db = mariadb.database
    events: queue.Queue[tuple[str, str]] = queue.Queue()
    target = tmp_path / "target"
    base = {
        "address": mariadb.address,
        "user": mariadb.user,
        "password": mariadb.password,
        "database": db,
        "meta_dir": str(tmp_path / "meta"),
        "mirror": str(tmp_path / "mirror"),
        "journal": str(tmp_path / "journal.json"),
        "target": str(target),
        "chunk_rows": 50,
        "at": 2,
    }
    processes = Runs("tests.procs.batches_consumer", base, tmp_path, events)
    children, logs, run = processes.children, processes.logs, processes.run

    try:
        with Writers(mariadb, seed=17, pause_s=0.05) as writers:
            for phase in PHASES:
                child = run(phase)
                # the snapshot phases must come before the snapshot finishes; binlog batches come either way
                ends = (f"P {phase}",) if phase == "binlog_written" else (f"P {phase}", "S")
                line = child.expect(lambda line, ends=ends: line in ends, 120, f"P {phase}")
                assert line == f"P {phase}", f"the snapshot finished before {phase}"
                child.kill()
            assert writers.writes > 50
        last = run(None)  # the writers stopped: this run catches up
        last.expect(lambda line: line == "S", 180, "S")  # the snapshot is finished in the cursor
        conn = mariadb.connect()
        file, offset = master_position(conn)
        target.write_text(f"{file} {offset}")
        conn.close()
        assert last.proc.wait(120) == 0
    finally:
        kill_all(children)

    runs = [_log(path) for path in logs]
    parked = {
        phase: next(b for kind, b, _ in run_log if kind == "P") for phase, run_log in zip(PHASES, runs, strict=False)
    }
    for phase, following in zip(PHASES, runs[1:], strict=True):
        first_fn = next(b for kind, b, _ in following if kind == "F")
        if phase != "spooled":  # a batch spooled but not yet named by the journal was not acked: it comes anew
            assert first_fn == parked[phase], f"after a kill at {phase!r} the batch in flight did not come first"
    # a batch written before the kill came back with the same rows
    written = parked["written"]
    rows_of = [rows for run_log in runs for kind, b, rows in run_log if kind == "F" and b == written]
    assert len(rows_of) == 2 and rows_of[0] == rows_of[1]

    delivered_in: dict[tuple[str, str], int] = {}
    event_in: dict[tuple[Any, ...], int] = {}
    ids: list[int] = []
    for run_log in runs:
        for kind, batch, rows in run_log:
            if kind != "F":
                continue
            assert not ids or batch >= ids[-1], f"batch {batch} after {ids[-1]}"
            ids.append(batch)
            for table, key in rows["s"]:
                before = delivered_in.get((table, key))
                # a snapshot row handed to fn in a batch that was acked never comes in another batch; the batch held
                # at "journaled" was not acked, so its rows may come again (read anew)
                assert before in (None, batch, parked["journaled"]), f"{table} {key}: in batch {before}, then {batch}"
                delivered_in[(table, key)] = batch
            for event in rows["b"]:  # a binlog row comes in one batch only, even the one the journaled batch held
                before = event_in.setdefault(tuple(event), batch)
                assert before == batch, f"binlog row {event}: in batch {before}, then {batch}"
    assert len({key for table, key in delivered_in if table == "k"}) > 2000
    _assert_equal(mariadb, DeltaMirror(tmp_path / "mirror", log_history_s=3600))


def test_the_default_journal_of_a_mirror_in_an_object_store_is_kept_there(
    mariadb: MariaDBDatabase, s3_bucket: S3Bucket, tmp_path: Path
) -> None:
    """A mirror whose root is in an object store: the journal run_batches keeps beside its records, and the spool of
    a batch holding snapshot rows, are written there through the mirror's store options."""
    _load(mariadb)
    root = f"{s3_bucket.url}/mirror"
    mirror = DeltaMirror(root, storage_options=s3_bucket.storage_options)
    with Instance(_config(mariadb, tmp_path / "meta")) as inst:
        conn = mariadb.connect()
        run_batches(inst, None, mirror, batch_size=500, timeout=0.2, until=healed_by(inst, master_position(conn)))
        conn.close()
    name = f"{s3_bucket.name}/mirror/_pycanal_run.{mirror.app_id.encode().hex()}.json"
    with s3_bucket.filesystem().open_input_stream(name) as stream:
        record = json.loads(stream.read())
    assert "done" in record and record.get("next")  # the last batch, and where the next one's range begins
    _assert_equal(mariadb, mirror)
    mirror.close()
