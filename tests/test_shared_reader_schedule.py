"""Random schedules of destinations sharing a reader (tests/shared_schedule.py), each beside a twin that reads
alone: on the fake binlog with MySQL and MariaDB GTIDs, and on a real MariaDB (fewer, cheaper examples). Each prints
its seed; ``shared_schedule.run(binlog, meta, seed)`` plays one again."""

from __future__ import annotations

import itertools
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from shared_schedule import Mark, run

from canal.config import MasterConfig
from canal.parse.shared import reader as shared
from canal.testing import FakeMysql
from canal.testing.plugin import MariaDBFactory
from canal.testing.services import MariaDBServer

_names = itertools.count()


class FakeBinlog:
    """The schedule's binlog on a FakeMysql."""

    def __init__(self, mariadb: bool) -> None:
        self.fake = FakeMysql(name=f"shared_schedule_{next(_names)}", mariadb=mariadb, gtid=True)
        for table in ("a.t", "a.u", "b.t", "c.t", "m.marks"):
            self.fake.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, v VARCHAR(20))")

    def transaction(self, tables: list[str], first_key: int) -> int:
        key = first_key
        with self.fake.transaction() as tx:
            for table in tables:
                tx.insert(table, {"id": key, "v": f"row {key}"})
                if key % 3 == 0:
                    tx.update(table, {"id": key, "v": f"row {key}"}, {"id": key, "v": f"changed {key}"})
                key += 1
        return key

    def ddl(self, table: str, n: int) -> None:
        self.fake.execute(f"ALTER TABLE {table} COMMENT 'c{n}'")

    def rotate(self) -> None:
        self.fake.rotate()

    def purge_to(self, journal: str) -> None:
        if journal in [f.name for f in self.fake.binlog_files()]:  # (an older one is gone already)
            self.fake.purge_to(journal)

    def mark(self) -> Mark:
        status = self.fake.master_status()
        assert status.journal_name is not None and status.position is not None
        mark = Mark(status.journal_name, status.position, self.fake.gtid_executed(), (self.fake.now + 1) * 1000)
        self.fake.advance_clock(1)  # what is written from now on is at or after the mark's time
        return mark

    def end_position(self) -> tuple[int, int]:
        status = self.fake.master_status()
        return status.journal_number, status.position or 0

    def end(self, key: int) -> None:
        self.fake.insert("m.marks", {"id": key, "v": "end"})

    def master(self, mark: Mark, kind: str) -> MasterConfig:
        if kind == "gtid":
            return MasterConfig(address=self.fake.address, gtid=mark.gtid)
        if kind == "time":
            return MasterConfig(address=self.fake.address, timestamp=mark.time_ms)
        return MasterConfig(address=self.fake.address, journal_name=mark.journal, position=mark.position)

    def filter(self, regex: str) -> str:
        return f"{regex},m\\.marks"


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(seed=st.integers(0, 2**32 - 1))
@pytest.mark.parametrize("mariadb", [False, True], ids=["mysql-gtids", "mariadb-gtids"])
def test_random_schedules_on_the_fake_binlog(mariadb: bool, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # small queues, short waits: the reader waits for room and destinations leave and rejoin within a schedule
    monkeypatch.setattr(shared, "QUEUE_EVENTS", 32)
    monkeypatch.setattr(shared, "SLOW_WAIT_S", 0.2)
    monkeypatch.setattr(shared, "REJOIN_AFTER_S", 0.3)
    binlog = FakeBinlog(mariadb)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            run(binlog, Path(tmp), seed)
    finally:
        binlog.fake.unregister()
        assert not shared.READERS._readers


class MariaDBBinlog:
    """The schedule's binlog on a private MariaDB: the tables of one example in databases of its own, each statement
    stamped with the example's clock (``SET timestamp``), which a mark moves on by a second."""

    def __init__(self, server: MariaDBServer, example: int) -> None:
        self.server = server
        self.prefix = f"ex{example}"
        self.now = int(time.time())
        self.conn = server.connect(None)
        for db in ("a", "b", "c", "m"):
            self._run(f"CREATE DATABASE {self.prefix}_{db}")
        for table in ("a.t", "a.u", "b.t", "c.t", "m.marks"):
            self._run(f"CREATE TABLE {self.name(table)} (id INT PRIMARY KEY, v VARCHAR(20))")

    def name(self, table: str) -> str:
        return f"{self.prefix}_{table}"

    def _run(self, *statements: str) -> None:
        with self.conn.cursor() as cur:
            cur.execute(f"SET timestamp = {self.now}")
            for sql in statements:
                cur.execute(sql)

    def transaction(self, tables: list[str], first_key: int) -> int:
        statements = ["BEGIN"]
        key = first_key
        for table in tables:
            statements.append(f"INSERT INTO {self.name(table)} VALUES ({key}, 'row {key}')")
            if key % 3 == 0:
                statements.append(f"UPDATE {self.name(table)} SET v = 'changed {key}' WHERE id = {key}")
            key += 1
        self._run(*statements, "COMMIT")
        return key

    def ddl(self, table: str, n: int) -> None:
        self._run(f"ALTER TABLE {self.name(table)} COMMENT 'c{n}'")

    def rotate(self) -> None:
        self._run("FLUSH BINARY LOGS")

    def purge_to(self, journal: str) -> None:
        with self.conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            present = [str(row[0]) for row in cur.fetchall()]
        if journal in present:  # (an older one is gone already)
            self._run(f"PURGE BINARY LOGS TO '{journal}'")

    def mark(self) -> Mark:
        with self.conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            journal, position = cur.fetchone()[:2]
            cur.execute("SELECT @@GLOBAL.gtid_binlog_pos")
            (gtid,) = cur.fetchone()
        self.now += 1  # what is written from now on is at or after the mark's time
        return Mark(str(journal), int(position), str(gtid), self.now * 1000)

    def end_position(self) -> tuple[int, int]:
        with self.conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            journal, position = cur.fetchone()[:2]
        return int(str(journal).rpartition(".")[2]), int(position)

    def end(self, key: int) -> None:
        self._run(f"INSERT INTO {self.name('m.marks')} VALUES ({key}, 'end')")

    def master(self, mark: Mark, kind: str) -> MasterConfig:
        server = self.server
        login = {"address": server.address, "username": server.user, "password": server.password}
        if kind == "gtid":
            return MasterConfig(**login, gtid=mark.gtid)
        if kind == "time":
            return MasterConfig(**login, timestamp=mark.time_ms)
        return MasterConfig(**login, journal_name=mark.journal, position=mark.position)

    def filter(self, regex: str) -> str:
        parts = [f"{self.prefix}_{part}" for part in regex.split(",")]
        return ",".join([*parts, rf"{self.prefix}_m\.marks"])


_examples = itertools.count()


@pytest.mark.integration
@settings(
    max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(seed=st.integers(0, 2**32 - 1))
def test_random_schedules_on_mariadb(
    seed: int, mariadb_factory: MariaDBFactory, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(shared, "QUEUE_EVENTS", 32)
    monkeypatch.setattr(shared, "SLOW_WAIT_S", 0.2)
    monkeypatch.setattr(shared, "REJOIN_AFTER_S", 0.3)
    if not mariadb_factory.servers:
        mariadb_factory(extra_args=["--gtid-strict-mode=ON"])
    example = next(_examples)
    binlog = MariaDBBinlog(mariadb_factory.servers[0], example)
    try:
        run(binlog, tmp_path / str(example), seed, limit_s=60)
    finally:
        binlog.conn.close()
        assert not shared.READERS._readers
