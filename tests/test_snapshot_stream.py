"""Snapshots on a real MariaDB while the destination streams and writers change the tables: a consumer applying
SNAPSHOT / INSERT / UPDATE as upserts and DELETE as deletes ends equal to ``SELECT *``."""

from __future__ import annotations

import random
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from test_snapshot_marks import create_watermark_table

from canal.config import InstanceConfig, SnapshotConfig, StoreConfig
from canal.errors import ConfigError, NotRunningError, SnapshotError
from canal.instance import Instance
from canal.protocol import EMPTY_MESSAGE_ID, EntryType, EventType
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration

ROWS = 3000


class Mirror:
    """What a consumer keeps: per table, key -> row (tables without a key: a multiset of rows)."""

    def __init__(self) -> None:
        self.tables: dict[str, dict[Any, tuple[Any, ...]]] = {}
        self.bags: dict[str, Counter[tuple[Any, ...]]] = {}
        self.kinds: Counter[EventType] = Counter()

    def apply(self, entries: Any) -> None:
        for entry in entries:
            rc = entry.row_change
            if entry.entry_type is not EntryType.ROWDATA or rc is None or rc.is_ddl:
                continue
            name = f"{entry.header.schema}.{entry.header.table}"
            self.kinds[rc.event_type] += len(rc.rows)
            for row in rc.rows:
                keys = row.table.key_indexes
                if not keys:
                    bag = self.bags.setdefault(name, Counter())
                    if row.before is not None:
                        bag[row.before] -= 1
                    if row.after is not None:
                        bag[row.after] += 1
                    continue
                table = self.tables.setdefault(name, {})
                if row.before is not None:
                    table.pop(tuple(row.before[i] for i in keys), None)
                if row.after is not None:
                    table[tuple(row.after[i] for i in keys)] = row.after


def _select(db: MariaDBDatabase, table: str, keys: int) -> dict[Any, tuple[Any, ...]]:
    return {tuple(r[:keys]): tuple(r) for r in db.execute(f"SELECT * FROM {table}")}


def _config(db: MariaDBDatabase, watermark_table: str | None = None) -> InstanceConfig:
    return InstanceConfig(
        destination="snap",
        master=db.master(),
        filter_regex=rf"{db.database}\..*",
        store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=4096),
        snapshot=SnapshotConfig(watermark_table=watermark_table),
    )


class Writers:
    """Random inserts, updates (some moving a key) and deletes over the whole key range until stopped.

    ``paced``: a write waits for a permit the consumer hands out (:meth:`allow`), so writers never outrun a slow
    consumer. Unpaced writers outrun a consumer of small batches that runs Spark jobs for each (a few seconds a
    batch on a loaded machine): the store fills, and every snapshot chunk then joins the stream behind a full store
    -- thousands of entries, hundreds of batches later."""

    def __init__(self, db: MariaDBDatabase, seed: int, pause_s: float = 0.0, *, paced: bool = False) -> None:
        self.db = db
        self.pause_s = pause_s  # between writes
        self.rng = random.Random(seed)
        self.stop = threading.Event()
        self.writes = 0
        self.error: BaseException | None = None
        self.permits = threading.Semaphore(0) if paced else None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def allow(self, writes: int) -> None:
        """Let paced writers make ``writes`` more writes."""
        assert self.permits is not None, "allow() paces Writers(paced=True)"
        self.permits.release(writes)

    def _permitted(self) -> bool:
        """Wait for a permit (paced writers); False once stopped."""
        while self.permits is not None and not self.permits.acquire(timeout=0.1):
            if self.stop.is_set():
                return False
        return not self.stop.is_set()

    def __enter__(self) -> Writers:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(30)
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        rng = self.rng
        conn = self.db.connect()
        try:
            with conn.cursor() as cur:
                while self._permitted():
                    key = rng.randint(1, ROWS + 300)
                    op = rng.random()
                    if op < 0.4:
                        cur.execute("UPDATE k SET v = v + 1, s = %s WHERE id = %s", (f"u{rng.random():.5f}", key))
                    elif op < 0.6:
                        cur.execute("DELETE FROM k WHERE id = %s", (key,))
                    elif op < 0.8:
                        cur.execute("INSERT IGNORE INTO k VALUES (%s, %s, 'ins')", (key, rng.randint(0, 99)))
                    elif op < 0.9:
                        cur.execute("UPDATE IGNORE k SET id = %s WHERE id = %s", (rng.randint(1, ROWS + 300), key))
                    else:
                        a = f"s{rng.randint(0, 60):03d}"
                        cur.execute(
                            "INSERT INTO c VALUES (%s, %s, 0) ON DUPLICATE KEY UPDATE v = v + 1", (a, rng.randint(0, 9))
                        )
                        cur.execute("DELETE FROM c WHERE a = %s AND b = %s", (a, rng.randint(0, 9)))
                    self.writes += 1
                    cur.execute("INSERT INTO other VALUES (NULL, %s)", (self.writes,))
                    if self.pause_s:
                        self.stop.wait(self.pause_s)
        except BaseException as exc:
            self.error = exc
        finally:
            conn.close()


def _drain_until(inst: Instance, mirror: Mirror, done: threading.Event | None = None) -> Iterator[None]:
    while True:
        msg = inst.get_without_ack(500, timeout=0.2)
        if msg.id != EMPTY_MESSAGE_ID:
            mirror.apply(msg.entries)
            inst.ack(msg.id)
        yield


def _load(db: MariaDBDatabase) -> None:
    db.execute("CREATE TABLE k (id INT PRIMARY KEY, v INT, s VARCHAR(20))")
    db.execute("CREATE TABLE c (a VARCHAR(10), b INT, v INT, PRIMARY KEY (a, b))")
    db.execute("CREATE TABLE n (x INT, y VARCHAR(5))")  # no key
    db.execute("CREATE TABLE other (id INT AUTO_INCREMENT PRIMARY KEY, w INT)")
    db.execute(f"INSERT INTO k SELECT seq, MOD(seq, 97), CONCAT('r', seq) FROM seq_1_to_{ROWS}")
    db.execute(
        "INSERT INTO c SELECT CONCAT('s', LPAD(MOD(seq, 61), 3, '0')), MOD(seq, 10), seq FROM seq_1_to_600 "
        "ON DUPLICATE KEY UPDATE v = VALUES(v)"
    )
    db.execute("INSERT INTO n VALUES (1, 'a'), (1, 'a'), (2, NULL)")


@pytest.mark.parametrize(("seed", "watermarks"), [(1, False), (2, False), (3, True)])
def test_snapshot_under_concurrent_writes_ends_equal(mariadb: MariaDBDatabase, seed: int, watermarks: bool) -> None:
    """Chunks placed at MariaDB's snapshot position, or (``watermarks``) between DBLog's watermarks, written to a
    table the filter captures: its rows never reach the consumer."""
    _load(mariadb)
    marks = None
    if watermarks:
        marks = f"{mariadb.database}.canal_marks"
        create_watermark_table(mariadb)
    mirror = Mirror()
    with Instance(_config(mariadb, marks)) as inst:
        pump = _drain_until(inst, mirror)
        with Writers(mariadb, seed) as writers:
            while writers.writes < 50:  # the writers are going before the snapshot starts
                next(pump)
            db = mariadb.database
            snapshot = inst.snapshot([f"{db}.k", f"{db}.c", f"{db}.n"], chunk_rows=250)
            while not snapshot.progress().done:
                next(pump)
                assert snapshot.error is None, snapshot.error
            for _ in range(5):  # and after it
                next(pump)
        progress = snapshot.wait(0)
        assert progress.tables_done == 3 and progress.rows_read >= progress.rows_emitted > 0
        mariadb.execute("INSERT INTO other VALUES (NULL, -1)")  # a marker: everything before it is in the mirror
        while (-1,) not in {r[1:] for r in mirror.tables.get(f"{db}.other", {}).values()}:
            next(pump)
    assert writers.writes > 100
    assert mirror.kinds[EventType.SNAPSHOT] == progress.rows_emitted
    assert mirror.tables[f"{db}.k"] == _select(mariadb, "k", 1)
    assert mirror.tables[f"{db}.c"] == _select(mariadb, "c", 2)
    assert mirror.tables[f"{db}.other"] == _select(mariadb, "other", 1)  # streamed only, untouched by the snapshot
    assert mirror.bags[f"{db}.n"] == Counter(tuple(r) for r in mariadb.execute("SELECT * FROM n"))
    assert set(mirror.tables) | set(mirror.bags) == {f"{db}.k", f"{db}.c", f"{db}.n", f"{db}.other"}
    if watermarks:  # two marks per read: the table holds this destination's last one
        assert [r[0] for r in mariadb.execute("SELECT destination FROM canal_marks")] == ["snap"]


def test_snapshot_errors_change_nothing(mariadb: MariaDBDatabase) -> None:
    _load(mariadb)
    inst = Instance(_config(mariadb))
    with pytest.raises(NotRunningError):
        inst.snapshot([f"{mariadb.database}.k"])
    with inst:
        with pytest.raises(ConfigError, match=r"db\.table"):
            inst.snapshot(["k"])
        with pytest.raises(ConfigError, match=r"chunk_rows"):
            inst.snapshot([f"{mariadb.database}.k"], chunk_rows=0)
        with pytest.raises(ConfigError, match="no such table"):
            inst.snapshot([f"{mariadb.database}.k", f"{mariadb.database}.nope"])
        assert inst.snapshots == ()
        # the stream is unaffected: a write after the failures arrives, and no SNAPSHOT entry came
        mariadb.execute("INSERT INTO other VALUES (NULL, 7)")
        mirror = Mirror()
        pump = _drain_until(inst, mirror)
        while f"{mariadb.database}.other" not in mirror.tables:
            next(pump)
        assert mirror.kinds[EventType.SNAPSHOT] == 0
        # one snapshot at a time: a second one while the first is unfinished is refused and changes nothing
        first = inst.snapshot([f"{mariadb.database}.k"], chunk_rows=1, max_rows_per_s=1)
        with pytest.raises(SnapshotError, match="unfinished snapshot"):
            inst.snapshot([f"{mariadb.database}.other"])
        assert inst.snapshots == (first,)
        progress = inst.metrics().snapshot
        assert progress is not None and progress.tables == (f"{mariadb.database}.k",) and not progress.done
        assert first.progress().tables == (f"{mariadb.database}.k",)
