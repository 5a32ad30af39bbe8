"""Randomized differential test of the mirror and transactions as the server commits them (hypothesis, real MariaDB):
random DML on a table, XA transactions (committed later, rolled back, one phase; each prepared in a session of its own,
its outcome after any number of other operations) on it and on a table the capture leaves out, narrowing MODIFYs under a
lax ``sql_mode``, DML a session logs as statements, deletes that cascade through foreign keys, binlog rotations (an XA
transaction's PREPARE and its COMMIT may lie on either side) -- mirrored by ``DeltaMirror`` (each of its modes) through
``run_batches`` in runs of random batch sizes, a new mirror object each run (held XA rows live on disk).

Where the workload holds a statement-logged DML, the capture must stop with the typed error
(``UnmodeledStatementError``, the cause of the ``NotRunningError`` the run ends with); otherwise (cascading deletes
included: the mirror applies them) it must equal ``SELECT *`` after every run.

CI runs a few examples (``PYCANAL_FUZZ_EXAMPLES``, default 20, a quarter of them here); a longer run sets it higher.
A failure prints the SQL and a blob that reproduces it.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, note
from hypothesis import strategies as st
from random_schema_workload import FUZZ_EXAMPLES, fuzz_settings

pytest.importorskip("deltalake")

from capture_configs import capture_config

from canal.errors import CanalError, NotRunningError, UnmodeledStatementError
from canal.lake.settings import MODES
from canal.spark import DeltaMirror, MirrorMode
from canal.spark.testing import master_position, run_caught_up
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration

EXAMPLES = max(2, FUZZ_EXAMPLES // 4)

OPS = ["ins", "ins", "upd", "del", "xa_commit", "xa_rollback", "xa_one_phase", "outcome", "narrow", "run"]
OPS.append("cascade")  # the mirror follows a cascading delete (canal.lake.apply.cascade)
OPS += ["rotate", "outside_commit", "outside_rollback", "outside_one_phase"]  # FLUSH BINARY LOGS; XA on `outside`
RARE = ["statement"]  # ops after which the mirror must stop


@pytest.mark.parametrize("mode", MODES)
def test_mirror_follows_xa_narrowing_and_cascades_and_stops_at_statements(
    mariadb: MariaDBDatabase, tmp_path_factory: pytest.TempPathFactory, mode: MirrorMode
) -> None:
    runs = iter(range(1_000_000))

    @fuzz_settings(EXAMPLES)
    @given(
        ops=st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 99)), max_size=25),
        rare=st.one_of(st.none(), st.tuples(st.sampled_from(RARE), st.integers(0, 25))),
        seed=st.integers(0, 2**32 - 1),
    )
    # found by this test: rows of t, a cascading delete from p, then an UPDATE of t logged as a statement
    @example(ops=[("ins", 0)] * 7 + [("cascade", 0), ("run", 0)], rare=("statement", 8), seed=825197)
    def check(ops: list[tuple[str, int]], rare: tuple[str, int] | None, seed: int) -> None:
        db = f"tx{next(runs)}"
        mariadb.execute(f"DROP DATABASE IF EXISTS `{db}`")
        mariadb.execute(f"CREATE DATABASE `{db}`")
        workload = _Workload(mariadb, db, tmp_path_factory.mktemp("txmirror"), mode, random.Random(seed))
        try:
            if rare is not None:
                ops = [*ops[: rare[1]], (rare[0], 0), *ops[rare[1] :]]
            workload.play(ops)
        finally:
            workload.close()
            mariadb.execute(f"DROP DATABASE IF EXISTS `{db}`")

    check()


class _Workload:
    def __init__(self, mariadb: MariaDBDatabase, db: str, tmp: Path, mode: MirrorMode, rng: random.Random) -> None:
        self.mariadb, self.db, self.tmp, self.mode, self.rng = mariadb, db, tmp, mode, rng
        self.conn = mariadb.connect(autocommit=True)
        self.sql: list[str] = []
        # (its session, xid, its rows' ids) of XA transactions awaiting their outcome
        self.prepared: list[tuple[Any, str, list[int]]] = []
        self.sessions: list[Any] = []
        self.ids: list[int] = []
        self.next_id = 1
        self.xids = 0
        self.outside_rows = 0
        self.v_type, self.s_len = "INT", 12
        self.stop: type[CanalError] | None = None  # the error the mirror must stop with, once the op ran
        # heal="stop": a statement-format UPDATE stops typed here (heals are tested in test_fail_closed_mariadb.py)
        self.config = capture_config(
            mariadb,
            tmp / "meta",
            master_position(self.conn),
            "txfuzz",
            schema=db,
            black_regex=rf"{db}\.outside",
            heal="stop",
        )
        self.run(self.conn, "SET SESSION sql_mode = ''")
        self.run(self.conn, f"CREATE TABLE `{db}`.p (id INT PRIMARY KEY)")
        self.run(self.conn, f"CREATE TABLE `{db}`.mark (id INT AUTO_INCREMENT PRIMARY KEY)")
        self.run(self.conn, f"CREATE TABLE `{db}`.outside (id INT PRIMARY KEY, v INT)")  # the capture leaves it out
        self.run(self.conn, f"INSERT INTO `{db}`.p VALUES (1), (2)")
        self.run(
            self.conn,
            f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v INT, s VARCHAR(12), pid INT, "
            f"FOREIGN KEY (pid) REFERENCES `{db}`.p (id) ON DELETE CASCADE)",
        )

    def run(self, session: Any, statement: str) -> None:
        self.sql.append(statement)
        with session.cursor() as cur:
            cur.execute(statement)

    def row(self, x: int, held: list[int] | None = None) -> str:
        """A new row; an XA transaction's rows (``held``: their ids, counted once committed) reference no parent,
        so that a cascading delete never waits for their locks."""
        n = self.next_id
        self.next_id += 1
        (self.ids if held is None else held).append(n)
        pid = "NULL" if x % 3 or held is not None else str(1 + x % 2)
        return f"({n}, {(x - 50) * 37}, '{'abcdefghijkl'[: 1 + x % 12]}', {pid})"

    def dml(self, session: Any, kind: str, x: int) -> None:
        db = self.db
        if kind == "ins" or not self.ids:
            self.run(session, f"INSERT INTO `{db}`.t VALUES {self.row(x)}")
        elif kind == "upd":
            self.run(session, f"UPDATE `{db}`.t SET v = v + {x}, s = 'u{x}' WHERE id = {self.ids[x % len(self.ids)]}")
        else:
            self.run(session, f"DELETE FROM `{db}`.t WHERE id = {self.ids.pop(x % len(self.ids))}")

    def xa(self, x: int, outcome: str, table: str = "t") -> None:
        """An XA transaction of its own session on ``table``: ``t``, or ``outside``, which the capture leaves out
        (its XA COMMIT must neither pass the filter nor stop the mirror)."""
        session = self.mariadb.connect(autocommit=True)
        self.sessions.append(session)
        self.run(session, "SET SESSION sql_mode = ''")
        self.xids += 1
        xid = f"x{self.xids}"
        held: list[int] = []  # rows no other session touches until the outcome (the transaction holds their locks)
        self.run(session, f"XA START '{xid}'")
        for i in range(1 + x % 3):
            if table == "t":
                self.run(session, f"INSERT INTO `{self.db}`.t VALUES {self.row(x + i, held)}")
            else:
                self.outside_rows += 1
                self.run(session, f"INSERT INTO `{self.db}`.outside VALUES ({self.outside_rows}, {x})")
        self.run(session, f"XA END '{xid}'")
        if outcome == "one_phase":
            self.run(session, f"XA COMMIT '{xid}' ONE PHASE")
            self.ids.extend(held)
            return
        self.run(session, f"XA PREPARE '{xid}'")
        if outcome == "rollback":
            self.run(session, f"XA ROLLBACK '{xid}'")
        else:
            self.prepared.append((session, xid, held))

    def commit(self, index: int) -> None:
        session, xid, held = self.prepared.pop(index)
        self.run(session, f"XA COMMIT '{xid}'")
        self.ids.extend(held)

    def play(self, ops: list[tuple[str, int]]) -> None:
        for kind, x in ops:
            if kind in ("ins", "upd", "del"):
                self.dml(self.conn, kind, x)
            elif kind.startswith("xa_"):
                self.xa(x, kind[3:])
            elif kind.startswith("outside_"):
                self.xa(x, kind[8:], "outside")
            elif kind == "rotate":  # a prepared XA transaction may lie across it
                self.run(self.conn, "FLUSH BINARY LOGS")
            elif kind == "outcome" and self.prepared:
                self.commit(x % len(self.prepared))
            elif kind == "narrow":
                self.narrow(x)
            elif kind == "statement":
                self.run(self.conn, "SET SESSION binlog_format = 'STATEMENT'")
                target = self.ids[0] if self.ids else 0  # a committed row (or none): never one an XA holds
                self.run(self.conn, f"UPDATE `{self.db}`.t SET v = 0 WHERE id = {target}")
                self.run(self.conn, "SET SESSION binlog_format = 'ROW'")
                self.stop = self.stop or UnmodeledStatementError
            elif kind == "cascade":
                self.run(self.conn, f"DELETE FROM `{self.db}`.p WHERE id = 1")
                self.run(self.conn, f"INSERT INTO `{self.db}`.p VALUES (1)")
            elif kind == "run":
                self.mirror_and_compare()
        while self.prepared:
            self.commit(0)
        self.mirror_and_compare()

    def narrow(self, x: int) -> None:
        if self.prepared:
            return  # the prepared transactions hold the table's metadata lock: the ALTER would wait for them
        if x % 2 and self.v_type != "TINYINT":
            self.v_type = {"INT": "SMALLINT", "SMALLINT": "TINYINT"}[self.v_type]
            unsigned = " UNSIGNED" if x % 4 == 1 else ""
            self.run(self.conn, f"ALTER TABLE `{self.db}`.t MODIFY v {self.v_type}{unsigned}")
        elif self.s_len > 1:
            self.s_len = max(1, self.s_len - 1 - x % 5)
            self.run(self.conn, f"ALTER TABLE `{self.db}`.t MODIFY s VARCHAR({self.s_len})")

    def mirror_and_compare(self) -> None:
        note("SQL:\n" + ";\n".join(self.sql))
        # a committed row last: the run ends at an entry (an XA PREPARE, the binlog's last event, makes none)
        self.run(self.conn, f"INSERT INTO `{self.db}`.mark VALUES ()")
        mirror = DeltaMirror(self.tmp / "mirror", mode=self.mode)  # a restart: only what is on disk carries over
        try:
            run_caught_up(self.conn, self.config, None, mirror, batch_size=self.rng.choice([1, 3, 7, 500]))
        except NotRunningError as exc:
            assert self.stop is not None and isinstance(exc.__cause__, self.stop), exc
            return
        finally:
            mirror.close()
        assert self.stop is None, f"the mirror did not stop with {self.stop}"
        want = sorted(tuple(r) for r in self.mariadb.execute(f"SELECT id, v, s, pid FROM `{self.db}`.t"))
        reader = DeltaMirror(self.tmp / "mirror", mode=self.mode)
        try:
            path = reader.table_path(self.db, "t")
            rows = reader.read(self.db, "t").to_pylist() if path.exists() else []
        finally:
            reader.close()
        assert sorted((r["id"], r["v"], r["s"], r["pid"]) for r in rows) == want

    def close(self) -> None:
        for session, xid, _held in self.prepared:
            self.run(session, f"XA ROLLBACK '{xid}'")
        for session in self.sessions:
            session.close()
        self.conn.close()
