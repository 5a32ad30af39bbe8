"""Random workloads of the heals' families on a real MariaDB, compared with ``SELECT``: writers in FULL, MINIMAL and
NOBLOB sessions moving keys and updating columns while heals read the tables, a table keyed only by a UNIQUE NOT NULL
key, generated columns (VIRTUAL and PERSISTENT) under partial images, and database and table names that hold dots,
backquotes, quotes and non-ASCII letters. Under the default ``heal="snapshot"`` the mirror ends equal to ``SELECT``;
under ``heal="stop"`` a workload that holds what only a heal or a re-read follows stops typed, and one that does not
ends equal.

A seed per run (``PYCANAL_FUZZ_SEED`` replays one), printed, and in every failure's message; each run plays
``PYCANAL_HEAL_FUZZ_EXAMPLES`` workloads (2 by default: each is a few seconds of writes racing a heal). Written to
fold into ``tests/random_schema_workload.py``'s families.
"""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import pymysql
import pytest

from canal.config import HealMode, InstanceConfig, SnapshotConfig, StoreConfig
from canal.errors import NotRunningError, UnmodeledStatementError
from canal.instance import Instance
from canal.lake.apply.partial import MirrorPartialImageError
from canal.sql import quote_name
from canal.testing.plugin import MariaDBDatabase

pytest.importorskip("deltalake")

from canal.spark import DeltaMirror, run_batches
from canal.spark.testing import compare_tables, healed_by, master_position

pytestmark = pytest.mark.integration

EXAMPLES = int(os.environ.get("PYCANAL_HEAL_FUZZ_EXAMPLES", "2"))
ROWS = 400
IMAGES = ("FULL", "MINIMAL", "NOBLOB")
# database names: a dot, a backquote and quotes, non-ASCII letters; each table's name holds something of its own
DATABASES = (".eu", "`q'\"", "é.ü")
TABLES = {
    "k": ("k.1", "CREATE TABLE {t} (id INT PRIMARY KEY, v INT, s VARCHAR(20))"),
    "u": ("u`2", "CREATE TABLE {t} (a INT NOT NULL, v INT, s VARCHAR(20), n INT, UNIQUE KEY (n), UNIQUE KEY ua (a))"),
    "g": (
        "gé",
        "CREATE TABLE {t} (id INT PRIMARY KEY, v INT, s TEXT, gv INT AS (v * 2) VIRTUAL, "
        "gt TEXT AS (CONCAT(s, '!')) VIRTUAL, gp INT AS (v * 3) PERSISTENT)",
    ),
}
KEY = {"k": "id", "u": "a", "g": "id"}


class Workload:
    """One random workload: its database (an odd name), three tables, and the writes a thread plays while the
    consumer runs (each write in a session of a random row image; now and then DML logged as a statement, which
    heals its table)."""

    def __init__(self, db: MariaDBDatabase, rng: random.Random) -> None:
        self.db = db
        self.rng = rng
        self.schema = f"{db.database}{rng.choice(DATABASES)}"
        self.names = {alias: name for alias, (name, _) in TABLES.items()}
        self.heals = 0  # statements that heal
        self.rereads = 0  # partial UPDATEs of what a VIRTUAL column is computed from
        self.partial_inserts = 0  # INSERTs a partial image logs without a VIRTUAL column: they heal the table
        self.writes: list[tuple[str, str, str, tuple[Any, ...]]] = []  # (image, kind, sql, args)
        for _ in range(rng.randint(60, 160)):
            self._draw()
        self.error: BaseException | None = None

    def table(self, alias: str) -> str:
        return f"{quote_name(self.schema)}.{quote_name(self.names[alias])}"

    def create(self) -> None:
        conn = self.db.connect(autocommit=True)
        try:
            with conn.cursor() as cur:
                cur.execute(f"CREATE DATABASE {quote_name(self.schema)}")
                for alias, (_, ddl) in TABLES.items():
                    cur.execute(ddl.format(t=self.table(alias)))
                    columns = "a, v, s, n" if alias == "u" else "id, v, s"
                    values = "seq, seq, CONCAT('r', seq)" + (", seq" if alias == "u" else "")
                    cur.execute(f"INSERT INTO {self.table(alias)} ({columns}) SELECT {values} FROM seq_1_to_{ROWS}")
        finally:
            conn.close()

    def drop(self) -> None:
        self.db.server.execute(f"DROP DATABASE IF EXISTS {quote_name(self.schema)}")

    def _draw(self) -> None:
        rng = self.rng
        alias = rng.choice(tuple(TABLES))
        table, key = self.table(alias), KEY[alias]
        image = rng.choice(IMAGES)
        k = rng.randint(1, ROWS + 20)
        op = rng.random()
        if op < 0.35:
            column = rng.choice(("v", "s"))
            value: Any = rng.randint(0, 999) if column == "v" else f"x{rng.randint(0, 999)}"
            self.writes.append((image, "update", f"UPDATE {table} SET {column} = %s WHERE {key} = %s", (value, k)))
            if alias == "g" and (image == "MINIMAL" or (image == "NOBLOB" and column == "s")):
                self.rereads += 1  # gv / gt are computed from it, and the image does not carry them
        elif op < 0.5:  # a key moved (IGNORE: the target may be taken)
            target = rng.randint(1, ROWS + 20)
            self.writes.append((image, "move", f"UPDATE IGNORE {table} SET {key} = %s WHERE {key} = %s", (target, k)))
        elif op < 0.65:
            self.writes.append((image, "delete", f"DELETE FROM {table} WHERE {key} = %s", (k,)))
        elif op < 0.8:
            columns = f"{key}, v, s" + (", n" if alias == "u" else "")
            marks = "%s, %s, %s" + (", %s" if alias == "u" else "")
            args = (k, k, "ins", *((k + 10_000,) if alias == "u" else ()))
            self.writes.append((image, "insert", f"INSERT IGNORE INTO {table} ({columns}) VALUES ({marks})", args))
            if alias == "g" and image != "FULL":
                self.partial_inserts += 1
        elif op < 0.84:  # DML logged as a statement: its rows are not in the binlog, so the table heals
            self.heals += 1
            self.writes.append(
                ("STATEMENT", "heal", f"DELETE FROM {table} WHERE MOD({key}, %s) = 0", (rng.randint(5, 40),))
            )
        else:
            self.writes.append(
                (image, "update", f"UPDATE {table} SET v = v + 1 WHERE {key} BETWEEN %s AND %s", (k, k + 20))
            )
            if alias == "g" and image == "MINIMAL":
                self.rereads += 1

    def play(self, pause_s: float) -> None:
        """The writes, one session per row image (and one logging statements), a pause between them."""
        sessions: dict[str, pymysql.Connection] = {}
        try:
            for image, _kind, sql, args in self.writes:
                conn = sessions.get(image)
                if conn is None:
                    conn = sessions[image] = self.db.connect(autocommit=True)
                    with conn.cursor() as cur:
                        if image == "STATEMENT":
                            cur.execute("SET SESSION binlog_format = 'STATEMENT'")
                        else:
                            cur.execute(f"SET SESSION binlog_row_image = '{image}'")
                with conn.cursor() as cur:
                    cur.execute(sql, args)
                time.sleep(pause_s)
        except BaseException as exc:
            self.error = exc
        finally:
            for conn in sessions.values():
                conn.close()

    def stops_under_heal_stop(self) -> bool:
        """Whether ``heal="stop"`` may stop at something of it: a statement that heals, a partial UPDATE of what a
        VIRTUAL column is computed from (the capture's stops), or an INSERT a partial image logs without a VIRTUAL
        column (the mirror's). Counted as drawn: a write of a row not there changes nothing, so this may say True of
        a workload that stops nowhere -- the test then accepts either."""
        return self.heals > 0 or self.rereads > 0 or self.partial_inserts > 0


def _config(db: MariaDBDatabase, tmp_path: Path, start: Any, heal: HealMode) -> InstanceConfig:
    return InstanceConfig(
        destination="randomheals",
        master=db.master(start),
        filter_regex=rf"{db.database}.*\..*",
        store=StoreConfig(batch_mode="ITEMSIZE"),
        meta_mode="file",
        meta_dir=str(tmp_path / "meta"),
        snapshot=SnapshotConfig(chunk_rows=40, max_rows_per_s=2000),
        heal=heal,
    )


def _run(db: MariaDBDatabase, tmp_path: Path, seed: int, heal: HealMode) -> None:
    rng = random.Random(seed)
    workload = Workload(db, rng)
    conn = db.connect(autocommit=True)
    start = master_position(conn)
    try:
        workload.create()
        mirror = DeltaMirror(tmp_path / "mirror")
        journal = tmp_path / "journal"
        writer = threading.Thread(target=workload.play, args=(0.01,), daemon=True)
        stopped: BaseException | None = None
        with Instance(_config(db, tmp_path, start, heal)) as inst:
            writer.start()
            try:
                run_batches(inst, None, mirror, timeout=0.2, journal=journal, until=lambda _: not writer.is_alive())
                run_batches(
                    inst, None, mirror, timeout=0.2, journal=journal, until=healed_by(inst, master_position(conn))
                )
            except (NotRunningError, MirrorPartialImageError) as exc:
                stopped = exc  # the capture's typed stop, or the mirror's
            writer.join(60)
        if workload.error is not None:
            raise workload.error
        if heal is HealMode.STOP and stopped is not None:
            cause = stopped if isinstance(stopped, MirrorPartialImageError) else stopped.__cause__
            assert isinstance(cause, UnmodeledStatementError | MirrorPartialImageError), f"seed {seed}: {stopped!r}"
            assert workload.stops_under_heal_stop(), f"seed {seed}: stopped at {cause}"
            return
        assert stopped is None, f"seed {seed}: {stopped!r} (cause {stopped.__cause__!r})"
        assert heal is HealMode.SNAPSHOT or workload.heals == 0, f"seed {seed}: a statement heals, nothing stopped"
        for comparison in compare_tables(conn, mirror, workload.schema, list(workload.names.values())):
            assert comparison.equal, f"seed {seed}: {comparison}"
        mirror.close()
    finally:
        conn.close()
        workload.drop()


def _seeds() -> list[int]:
    first = int(os.environ.get("PYCANAL_FUZZ_SEED") or random.SystemRandom().randrange(2**32))
    print(f"random heals: seed {first} (PYCANAL_FUZZ_SEED={first} replays it)")
    return [first + i for i in range(EXAMPLES)]


@pytest.mark.parametrize("heal", [HealMode.SNAPSHOT, HealMode.STOP])
def test_random_writers_racing_heals_end_equal_to_select(
    mariadb: MariaDBDatabase, tmp_path: Path, heal: HealMode
) -> None:
    for i, seed in enumerate(_seeds()):
        _run(mariadb, tmp_path / str(i), seed, heal)
