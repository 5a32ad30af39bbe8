"""A stream that does not begin where the mirror's applied range ended is refused, on a real MariaDB
(canal.lake.forms.ranges, canal.lake.identity.admit): a destination restarted without its cursor (memory meta, no
position: it starts at the master's current position) through run_batches, and a Spark query with a new checkpoint
that starts after a batch the old query spooled (acking the instance) but never committed -- MirrorCheckpointError,
nothing written, where the mirror silently lacked those changes. What is no gap goes on: a restart whose cursor
followed the stream past transactions the filter leaves out, and the query or destination that wrote the mirror."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("deltalake")

from canal import Instance, InstanceConfig, MasterConfig
from canal.lake.identity.applied import applied_path
from canal.spark import DeltaMirror, MirrorCheckpointError, run_batches
from canal.spark.testing import compare_tables, master_position
from tests.test_spark_units import _mirror_available_now, _source_options

pytestmark = [pytest.mark.integration]


def _config(mariadb: Any, start: tuple[str, int] | None, tables: str, meta: Path | None) -> InstanceConfig:
    master = MasterConfig(
        address=mariadb.address,
        username=mariadb.user,
        password=mariadb.password,
        journal_name=None if start is None else start[0],
        position=None if start is None else start[1],
    )
    return InstanceConfig(
        destination="gaps",
        master=master,
        filter_regex=rf"{mariadb.database}\.({tables})",
        meta_mode="memory" if meta is None else "file",
        meta_dir=None if meta is None else str(meta),
    )


def _caught_up(conn: Any, inst: Instance, mirror: DeltaMirror) -> None:
    """Run ``inst`` into ``mirror`` until it handled everything the master had written when called."""
    until = master_position(conn)
    run_batches(inst, None, mirror, timeout=0.3, until=lambda s: s.reached(*until))


def _run(conn: Any, config: InstanceConfig, mirror: DeltaMirror, idle_s: float | None = None) -> None:
    with Instance(config) as inst:
        if idle_s is None:
            _caught_up(conn, inst, mirror)
        else:  # on after it, idle: the cursor follows the stream's rest past what the filter leaves out
            run_batches(inst, None, mirror, timeout=0.3, idle_stop_s=idle_s)


def _insert(conn: Any, table: str, first: int, count: int) -> None:
    with conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {table} VALUES (%s, %s)", [(i, i) for i in range(first, first + count)])
    conn.commit()


def _exact(conn: Any, mirror: DeltaMirror, db: str) -> None:
    for c in compare_tables(conn, mirror, db, ["a"]):
        assert c.equal, str(c)


def test_run_batches_refuses_a_destination_that_lost_its_cursor(mariadb: Any, tmp_path: Path) -> None:
    conn = mariadb.connect()
    db = mariadb.database
    start = master_position(conn)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE a (id INT PRIMARY KEY, x INT)")
    _insert(conn, "a", 0, 50)
    mirror = DeltaMirror(tmp_path / "m")
    _run(conn, _config(mariadb, start, "a", None), mirror)
    _exact(conn, mirror, db)
    _insert(conn, "a", 100, 20)  # changes the next destination never reads
    record = Path(applied_path(mirror.root, mirror.app_id)).read_bytes()
    rows = mirror.read(db, "a").to_pylist()
    # memory meta and no position: the destination starts at the master's position now, after those changes
    config = _config(mariadb, None, "a", None)
    with Instance(config) as inst:
        deadline = time.monotonic() + 60
        while inst.read_position is None:  # its dump began (where the master was then): the next rows come after it
            assert time.monotonic() < deadline
            time.sleep(0.05)
        _insert(conn, "a", 200, 5)
        with pytest.raises(MirrorCheckpointError, match="never applied"):
            run_batches(inst, None, mirror, timeout=0.3, idle_stop_s=5)
        assert inst.list_batch_ids()  # not acked: nothing of it is lost either
    assert mirror.read(db, "a").to_pylist() == rows
    assert Path(applied_path(mirror.root, mirror.app_id)).read_bytes() == record
    mirror.close()
    conn.close()


def test_restarts_over_what_the_filter_leaves_out_are_no_gap(mariadb: Any, tmp_path: Path) -> None:
    """The destination captures a; b's transactions move its cursor (it follows the stream's rest past them) and the
    range, not the newest change: restarted from that cursor, its range goes on from where the mirror's ended --
    the journal says the stream was read there with nothing for the mirror."""
    conn = mariadb.connect()
    db = mariadb.database
    start = master_position(conn)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE a (id INT PRIMARY KEY, x INT)")
        cur.execute("CREATE TABLE b (id INT PRIMARY KEY, x INT)")
    _insert(conn, "a", 0, 10)
    mirror = DeltaMirror(tmp_path / "m")
    config = _config(mariadb, start, "a", tmp_path / "meta")
    for round_ in range(3):
        _run(conn, config, mirror)
        _insert(conn, "b", 100 * round_, 5)
        _run(conn, config, mirror, idle_s=1.5)  # idle: the cursor follows the rest past b's transactions
        _insert(conn, "a", 1000 + 10 * round_, 3)
    _run(conn, config, mirror)
    _exact(conn, mirror, db)
    mirror.close()
    conn.close()


def _ten_rows(conn: Any, mariadb: Any, tmp_path: Path) -> tuple[DeltaMirror, InstanceConfig]:
    """Table a made with ten rows; a mirror, and a destination with file meta that captures a from before it."""
    start = master_position(conn)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE a (id INT PRIMARY KEY, x INT)")
    _insert(conn, "a", 0, 10)
    return DeltaMirror(tmp_path / "m"), _config(mariadb, start, "a", tmp_path / "meta")


def _rotated_and_resting(conn: Any, inst: Instance) -> str:
    """FLUSH BINARY LOGS, and the instance's stream resting in the new file (its cursor may follow it there)."""
    with conn.cursor() as cur:
        cur.execute("FLUSH BINARY LOGS")
    new_file = master_position(conn)[0]
    deadline = time.monotonic() + 30
    while (rest := inst.store.resting_position()) is None or rest.position.journal_name != new_file:
        assert time.monotonic() < deadline, f"the stream did not rest in {new_file}: {rest}"
        time.sleep(0.02)
    return new_file


def test_a_rotation_after_the_last_batch_is_no_gap(mariadb: Any, tmp_path: Path) -> None:
    """A run ends, the server rotates, and the instance's stop moves the cursor into the new file (a restart right
    after a rotate starts there): the journal says the stream was read there with nothing for the mirror, and the next
    run's range goes on from the mirror's end. Found by the randomized mirror test: the next run was refused as a gap
    (MirrorCheckpointError) -- a false stop of a healthy mirror after every FLUSH BINARY LOGS at a run's end."""
    conn, db = mariadb.connect(), mariadb.database
    mirror, config = _ten_rows(conn, mariadb, tmp_path)
    with Instance(config) as inst:
        _caught_up(conn, inst, mirror)
        new_file = _rotated_and_resting(conn, inst)
    with Instance(config) as inst:
        cursor = inst.get_cursor()
        assert cursor is not None and cursor.position.journal_name == new_file  # the stop followed the rotation
    _insert(conn, "a", 100, 5)
    _run(conn, config, mirror)
    _exact(conn, mirror, db)
    mirror.close()
    conn.close()


def test_what_another_consumer_acked_after_a_run_is_a_gap(mariadb: Any, tmp_path: Path) -> None:
    """After a run, entries another consumer of the instance took and acked were never the mirror's: the stream's
    rest the stop then follows is not journaled as read with nothing for it, and the next run is refused."""
    conn, db = mariadb.connect(), mariadb.database
    mirror, config = _ten_rows(conn, mariadb, tmp_path)
    with Instance(config) as inst:
        _caught_up(conn, inst, mirror)
        _insert(conn, "a", 100, 5)
        taken = 0
        deadline = time.monotonic() + 30
        while taken < 5:  # taken and acked by hand: the mirror never gets these rows
            assert time.monotonic() < deadline
            message = inst.get(100, 0.2)
            taken += sum(len(e.row_change.rows) for e in message.entries if e.row_change is not None)
        _rotated_and_resting(conn, inst)
    record = Path(applied_path(mirror.root, mirror.app_id)).read_bytes()
    rows = mirror.read(db, "a").to_pylist()
    _insert(conn, "a", 200, 5)
    with pytest.raises(MirrorCheckpointError, match="never applied"), Instance(config) as inst:
        run_batches(inst, None, mirror, timeout=0.3, idle_stop_s=5)
    assert mirror.read(db, "a").to_pylist() == rows
    assert Path(applied_path(mirror.root, mirror.app_id)).read_bytes() == record
    mirror.close()
    conn.close()


@pytest.mark.spark
def test_a_new_checkpoint_after_a_batch_the_mirror_never_applied_is_refused(
    mariadb: Any, spark: Any, tmp_path: Path
) -> None:
    from pyspark.errors import StreamingQueryException

    conn = mariadb.connect()
    db = mariadb.database
    start = master_position(conn)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE a (id INT PRIMARY KEY, x INT)")
    _insert(conn, "a", 0, 50)
    # the destination's cursor is flushed to its meta file every 50 ms: the ack at the spool is there once the query
    # that spooled a micro-batch fails
    extra = {"meta.dir": str(tmp_path / "meta"), "canal.file.flush.period": "50"}
    options = _source_options(mariadb, start, tmp_path, **extra)
    mirror = DeltaMirror(tmp_path / "m")
    caught_up, lose = threading.Event(), threading.Event()

    def old_query(df: Any, batch_id: int) -> None:
        """The old query: its micro-batches applied, until one is spooled -- the instance acked -- but lost with the
        driver: never applied."""
        if lose.is_set() and not df.isEmpty():
            raise RuntimeError("the driver died before it wrote this micro-batch")
        mirror(df, batch_id)
        if mirror.table_path(db, "a").exists() and mirror.read(db, "a").num_rows == 50:
            caught_up.set()

    old = (
        spark.readStream.format("canal").options(**options).load().writeStream.foreachBatch(old_query)
        .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(processingTime="0.2 seconds").start()
    )  # fmt: skip
    try:
        assert caught_up.wait(120), old.exception()
        lose.set()
        _insert(conn, "a", 100, 20)
        with pytest.raises(StreamingQueryException):
            old.awaitTermination(120)
    finally:
        old.stop()
    _insert(conn, "a", 200, 5)
    record = Path(applied_path(mirror.root, mirror.app_id)).read_bytes()
    rows = mirror.read(db, "a").to_pylist()
    # a new checkpoint (and spool), the destination's cursor: it begins after the 20 rows the mirror never applied
    fresh = {**options, "spool.dir": str(tmp_path / "ckpt2.canal-spool")}
    with pytest.raises(StreamingQueryException, match="MirrorCheckpointError"):
        _mirror_available_now(spark, fresh, mirror, tmp_path / "ckpt2").awaitTermination(120)
    assert mirror.read(db, "a").to_pylist() == rows
    assert Path(applied_path(mirror.root, mirror.app_id)).read_bytes() == record
    mirror.close()
    conn.close()


def test_a_run_after_one_whose_fn_raised_begins_with_that_batch(mariadb: Any, tmp_path: Path) -> None:
    """fn raises (a transient error): the batch stays outstanding on the instance, and a retry -- run_batches again on
    the same instance -- must begin with it. The instance hands out what follows outstanding batches: the retry gave
    fn the next changes first, then failed to ack them (BatchOrderError), and after a restart the mirror, which had
    applied the later changes, took the earlier ones for applied -- it silently lacked them."""
    conn = mariadb.connect()
    db = mariadb.database
    mirror, config = _ten_rows(conn, mariadb, tmp_path)
    _run(conn, config, mirror)
    calls: list[int] = []

    def fn(batch: Any, batch_id: int) -> None:
        calls.append(batch_id)
        if len(calls) == 1:
            raise RuntimeError("a transient error")
        mirror(batch, batch_id)

    with Instance(config) as inst:
        _insert(conn, "a", 100, 3)
        with pytest.raises(RuntimeError):
            run_batches(inst, None, fn, timeout=0.3, journal=tmp_path / "j.json", idle_stop_s=5)
        assert inst.list_batch_ids()  # the batch fn raised on is outstanding
        _insert(conn, "a", 200, 3)
        until = master_position(conn)
        run_batches(inst, None, fn, timeout=0.3, journal=tmp_path / "j.json", until=lambda s: s.reached(*until))
    _exact(conn, mirror, db)
    mirror.close()
    conn.close()
