"""Randomized differential test of the mirror through random DDL, values of every family and the operations production
does to a database (hypothesis, real MariaDB): the workload of ``random_schema_workload`` -- ADD / DROP / RENAME /
CHANGE / MODIFY column with FIRST / AFTER, name swaps, primary-key switches, table renames, swaps, drops and
creations, values at their types' limits (year 0, MariaDB's UUID / INET6 / INET4 as values and keys, FLOAT(M,D) at
its rounding edges, a FLOAT that underflows, compressed columns, columns named like the mirror's old internal ones),
binlog rotations -- and production's operations (``random_operations``): partition maintenance, DROP / CREATE
DATABASE, narrowing MODIFYs under a lax ``sql_mode``, DDL in a session time zone, pt-online-schema-change's and
gh-ost's statement sequences with their tables captured or filtered out, session row images, system versioning added
and dropped, DML logged as statements, XA on a table the capture leaves out. It is mirrored by ``DeltaMirror`` (a
random mode; typed batches, change rows, or Spark's DataFrames) through ``run_batches`` in two runs of a random
batch size, a new mirror object each, under FULL or MINIMAL row metadata.

After each run every live table must equal ``SELECT *`` read at ``time_zone = '+00:00'`` (values, column set and
order; a system-versioned table every version, ``FOR SYSTEM_TIME ALL``), and no other table may be mirrored. A
workload that reaches a statement the contract stops at (``random_schema_workload.OUTCOMES``) ends there: the next
run must stop with that typed error -- the capture's naming the statement's tables -- and the mirror must hold every
table as ``SELECT`` showed it just before the statement (a statement the mirror stops at comes right after a run
caught up, so that what the mirror then holds is known). The destination heals by default (issue 65): what changes
rows unlogged -- partition maintenance, an online schema change's cut-over with its tables filtered out, DML logged
as a statement, a partial INSERT image, a conversion the mirror does not model -- is read again in the stream and
equal to ``SELECT``; explicit examples under ``heal="stop"`` expect the typed stops.

CI runs a few examples (``PYCANAL_FUZZ_EXAMPLES``, default 20, a quarter of them here); a failure prints the SQL and
a blob that reproduces it; ``-s`` prints how many workloads reached each case.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, note
from hypothesis import strategies as st
from random_operations import OUTSIDE
from random_schema_workload import (
    CASES_SEEN,
    FUZZ_EXAMPLES,
    Op,
    Stop,
    TableState,
    Workload,
    any_operation,
    fuzz_settings,
    load_time_zone,
)

pytest.importorskip("deltalake")

from canal.config import InstanceConfig, StoreConfig
from canal.errors import NotRunningError, UnmodeledStatementError
from canal.lake.settings import MODES
from canal.spark import DeltaMirror, compare
from canal.spark.testing import master_position, run_caught_up
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration

EXAMPLES = max(2, FUZZ_EXAMPLES // 4)
MARK = "mark"  # a table of a database of its own: a row there ends each run (the workload may drop its database)


@pytest.mark.parametrize("path", ["rows", "typed", pytest.param("spark", marks=pytest.mark.spark)])
def test_random_ddl_and_values_mirror_equal_to_select(
    mariadb: MariaDBDatabase, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest, path: str
) -> None:
    spark = request.getfixturevalue("spark") if path == "spark" else None
    runs = iter(range(1_000_000))
    default_metadata = mariadb.execute("SELECT @@GLOBAL.binlog_row_metadata")[0][0]
    load_time_zone(mariadb.server)

    @fuzz_settings(EXAMPLES)
    # longer workloads than the capture test's: a mirror's defects show where many rows meet many statements
    @given(
        ops=st.lists(any_operation, min_size=10, max_size=40),
        cut=st.integers(0, 40),
        mode=st.sampled_from(MODES),
        metadata=st.sampled_from(["FULL", "MINIMAL"]),  # MINIMAL: rows named by the schema history
        helpers=st.sampled_from([True, True, True, False]),  # the online schema change tools' tables captured
        seed=st.integers(0, 2**32 - 1),
        heal=st.just("snapshot"),  # the default: what changes rows unlogged heals (the examples below: "stop" too)
    )
    # found by this test: a swap of two columns' names and types rewrites the table, and a Spark task's mirror kept
    # the old table open in its Python worker -- its next batch read the new table's log on top of the old one's
    @example(
        ops=[("add", 0, 0, 0), *[("insert", 0, 0, 0)] * 8, ("swap", 0, 0, 11), ("insert", 0, 0, 0)],
        cut=0,
        mode="merge_on_read",
        metadata="FULL",
        helpers=True,
        seed=0,
        heal="snapshot",
    )
    # the server rotates its binlog before and after the mirror's first run ends: the second resumes in an older file
    @example(
        ops=[
            *[("insert", 0, 0, 0)] * 3,
            *[("rotate", 0, 0, 0), ("update", 0, 0, 0), ("add", 0, 0, 0), ("rotate", 0, 0, 0), ("insert", 0, 0, 0)],
            *[("delete", 0, 0, 0), ("rotate", 0, 0, 0), ("insert", 0, 0, 0)],
        ],
        cut=5,
        mode="merge_on_read",
        metadata="MINIMAL",
        helpers=True,
        seed=0,
        heal="snapshot",
    )
    # found by this test: a first start before rows of a UUID-keyed table and a later ALTER of it, on a server logging
    # column names -- the history started at the read, and the rows before the ALTER carried the UUID's bytes
    @example(
        ops=[("create_keyed", 0, 0, 0), ("insert", 1, 0, 0), ("add", 1, 0, 0), ("insert", 1, 0, 0)],
        cut=4,
        mode="merge_on_read",
        metadata="FULL",
        helpers=True,
        seed=0,
        heal="snapshot",
    )
    # the stops under heal="stop", on every path: a MINIMAL image's INSERT that leaves columns to their defaults (the
    # mirror's, right after a run caught up), then gh-ost's cut-over with its tables filtered out (the capture's)
    @example(
        ops=[*[("insert", 0, 0, 0)] * 2, ("image", 0, 1, 0), ("update", 0, 0, 0), ("insert_defaults", 0, 0, 0)],
        cut=2,
        mode="copy_on_write",
        metadata="FULL",
        helpers=True,
        seed=0,
        heal="stop",
    )
    @example(
        ops=[*[("insert", 0, 0, 0)] * 5, ("gh_ost", 0, 0, 1), ("insert", 0, 0, 0)],
        cut=1,
        mode="merge_on_read",
        metadata="MINIMAL",
        helpers=False,
        seed=0,
        heal="stop",
    )
    # ... and the same cut-over healed by default: the table read again in the stream, equal to SELECT, no stop
    @example(
        ops=[*[("insert", 0, 0, 0)] * 5, ("gh_ost", 0, 0, 1), ("insert", 0, 0, 0)],
        cut=1,
        mode="merge_on_read",
        metadata="MINIMAL",
        helpers=False,
        seed=0,
        heal="snapshot",
    )
    # found by this test: an INSERT of a MINIMAL image heals t19, which is renamed to t28 before the heal reads it;
    # the read skipped t19 as dropped, and the mirror's t28 held none of its rows
    @example(
        ops=[
            *[("partitioned", 39, 35, 33), ("insert", 37, 72, 0), ("partition", 69, 20, 35), ("image", 70, 10, 24)],
            *[("insert", 0, 43, 17), ("insert", 33, 83, 86), ("insert_defaults", 90, 58, 30)],
            *[("rename_table", 51, 43, 73), ("insert", 16, 88, 72), ("partition", 0, 40, 19)],
            *[("statement", 38, 81, 29), ("gh_ost", 96, 99, 63), ("insert", 94, 34, 16), ("narrow", 89, 14, 74)],
            *[("rename_table", 83, 29, 90), ("pt_osc", 18, 99, 38), ("database", 21, 77, 25)],
            *[("partition", 58, 71, 70), ("rotate", 69, 0, 0), ("insert", 97, 47, 44), ("insert", 33, 93, 85)],
            *[("gh_ost", 57, 28, 18), ("insert", 39, 40, 0), ("versioning", 98, 16, 54), ("zone", 46, 52, 23)],
            *[("insert_defaults", 70, 92, 90), ("create_table", 24, 67, 17), *[("insert", 0, 0, 0)] * 11],
            ("rename_table", 21, 0, 0),
        ],
        cut=0,
        mode="merge_on_read",
        metadata="FULL",
        helpers=True,
        seed=0,
        heal="snapshot",
    )
    def check(ops: list[Op], cut: int, mode: Any, metadata: str, helpers: bool, seed: int, heal: str) -> None:
        db = f"mm{next(runs)}"
        marks = f"{db}_marks"
        for name in (db, marks):
            mariadb.execute(f"DROP DATABASE IF EXISTS `{name}`")
            mariadb.execute(f"CREATE DATABASE `{name}`")
        tmp = tmp_path_factory.mktemp("schema_mirror")
        conn = mariadb.connect()
        mariadb.execute(f"SET GLOBAL binlog_row_metadata = {metadata}")
        workload: Workload | None = None
        try:
            black = [rf"{db}\.{OUTSIDE}", *([] if helpers else [rf"{db}\._.*"])]
            config = InstanceConfig(
                destination="schemamirror",
                master=mariadb.master(master_position(conn)),
                filter_regex=rf"{db}\..*,{marks}\..*",
                black_regex=",".join(black),
                store=StoreConfig(batch_mode="ITEMSIZE"),
                meta_mode="file",
                meta_dir=str(tmp / "meta"),
                heal=heal,
            )
            mariadb.execute(f"CREATE TABLE `{marks}`.`{MARK}` (id INT AUTO_INCREMENT PRIMARY KEY)")
            mirror_runs = _Runs(conn, config, spark, path, tmp / "mirror", mode, marks, random.Random(seed))
            workload = Workload(conn, db, seed, heal=heal, helpers_captured=helpers)
            workload.before_stop = lambda: mirror_runs.caught_up(workload)
            workload.create_table()
            if any(op[0] == "database" for op in ops):
                # a first run before the database is dropped and created again: a first start at a position before
                # a CREATE TABLE IF NOT EXISTS stops typed under MINIMAL metadata (the table may have been there
                # before it, its layout then unknown)
                mirror_runs.caught_up(workload)
            for part in (ops[:cut], ops[cut:]):
                if not all(workload.step(op) for op in part):
                    break
                mirror_runs.caught_up(workload)
            if workload.stop is not None:
                mirror_runs.stopped(workload, workload.stop)
        finally:
            if workload is not None:
                note(f"mode={mode} metadata={metadata} helpers={helpers} seed={seed} heal={heal}")
                note("SQL:\n" + ";\n".join(workload.sql))
                note("refused by the server:\n" + "\n".join(workload.refused))
            conn.close()
            mariadb.execute(f"SET GLOBAL binlog_row_metadata = {default_metadata}")
            for name in (db, marks):
                mariadb.execute(f"DROP DATABASE IF EXISTS `{name}`")

    seen = Counter(CASES_SEEN)
    check()
    print(f"\n{path}: workloads per case: {dict(sorted((CASES_SEEN - seen).items()))}")


class _Runs:
    """The mirror's runs of one workload: each a new ``DeltaMirror`` (a restart: only what is on disk carries
    over), run until it caught up with the server, then compared."""

    def __init__(
        self, conn: Any, config: InstanceConfig, spark: Any, path: str, root: Path, mode: Any, marks: str, rng: Any
    ) -> None:
        self.conn, self.config, self.spark, self.path = conn, config, spark, path
        self.root, self.mode, self.marks, self.rng = root, mode, marks, rng

    def _run(self, mirror: DeltaMirror) -> None:
        # a committed row last: the run ends at an entry (the workload may end with DDL, or with a statement the
        # server refused)
        with self.conn.cursor() as cur:
            cur.execute(f"INSERT INTO `{self.marks}`.`{MARK}` VALUES ()")

        def apply(batch: Any, batch_id: int) -> None:
            mirror.apply(batch, batch_id)  # not a DeltaMirror: run_batches hands it change rows

        target = apply if self.path == "rows" else mirror  # typed batches, or Spark's change rows
        # a batch an entry on the paths without Spark only: there each costs microseconds, through Spark a job each
        # (a workload's hundreds of entries took minutes); Spark's batches hold a few entries, or the whole run
        size = self.rng.choice([7, 500] if self.spark is not None else [1, 7, 500])
        run_caught_up(self.conn, self.config, self.spark, target, batch_size=size, journal=self.root.parent / "journal")

    def caught_up(self, workload: Workload) -> None:
        mirror = DeltaMirror(self.root, mode=self.mode)
        try:
            self._run(mirror)
            _assert_mirrors(mirror, workload.db, self.marks, workload.state())
        finally:
            mirror.close()

    def stopped(self, workload: Workload, stop: Stop) -> None:
        """The run stops at the statement with the error the contract gives it, the mirror holding every table as
        it was before the statement."""
        mirror = DeltaMirror(self.root, mode=self.mode)
        try:
            with pytest.raises(Exception) as caught:
                self._run(mirror)
            error = caught.value.__cause__ if isinstance(caught.value, NotRunningError) else caught.value
            assert isinstance(error, stop.error), f"{stop.case}: {caught.value!r} (caused by {error!r})"
            if isinstance(error, UnmodeledStatementError):
                assert set(error.tables) == set(stop.tables), error
            _assert_mirrors(mirror, workload.db, self.marks, stop.state)
        finally:
            mirror.close()


def _assert_mirrors(mirror: DeltaMirror, db: str, marks: str, state: dict[str, TableState]) -> None:
    unmade = set()
    for table, selected in state.items():
        if not mirror.table_path(db, table).exists():
            # a table healed at a mark that knew no layout has no mirror table until its next rows make it
            # (canal.lake.apply.heals): only right for a table with no rows (a pt-online-schema-change cut-over
            # onto an emptied copy met it: the heal's read brought no row to make it)
            assert not selected.rows, f"{db}.{table} is not mirrored"
            unmade.add(table)
            continue
        mirrored = mirror.read(db, table)
        result = compare(mirrored, selected.rows, selected.key, name=table)
        assert result.equal, str(result)
        assert mirrored.column_names == selected.names, table  # the source's column order
    assert {(schema, table) for schema, table in mirror.tables()} == {
        *((db, t) for t in state if t not in unmade),
        (marks, MARK),
    }
