"""Randomized differential test of capture (hypothesis): random DDL -- ADD / DROP / RENAME / CHANGE / MODIFY column
with FIRST / AFTER, one-ALTER name swaps, key changes, RENAME (swaps through a third name) / DROP / CREATE TABLE --
interleaved with DML on a real MariaDB, under ``binlog_row_metadata`` FULL and MINIMAL, consumed by an Instance from
a position before all of it: every row image must carry the names and values ``SELECT`` returned right after its
statement.

CI runs a few examples of each (``PYCANAL_FUZZ_EXAMPLES``, default 20); a longer run sets it higher. A failure prints
the shrunk operations, the SQL they ran (hypothesis' ``note``) and a blob that reproduces it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, note
from hypothesis import strategies as st
from random_schema_workload import FUZZ_EXAMPLES, Op, Workload, fuzz_settings, operations

from canal.config import InstanceConfig, MasterConfig, StoreConfig
from canal.instance import Instance
from canal.testing.plugin import MariaDBDatabase
from tests.test_schema_history_mariadb import _consume

pytestmark = pytest.mark.integration


@pytest.fixture(params=["FULL", "MINIMAL"])
def metadata(request: pytest.FixtureRequest, mariadb: MariaDBDatabase) -> Iterator[str]:
    before = mariadb.execute("SELECT @@GLOBAL.binlog_row_metadata")[0][0]
    mariadb.execute(f"SET GLOBAL binlog_row_metadata = {request.param}")
    try:
        yield str(request.param)
    finally:
        mariadb.execute(f"SET GLOBAL binlog_row_metadata = {before}")


def test_random_ddl_and_dml_are_captured_as_select_saw_them(
    mariadb: MariaDBDatabase, metadata: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    runs = iter(range(1_000_000))

    @fuzz_settings(FUZZ_EXAMPLES)
    @given(ops=operations, seed=st.integers(0, 2**32 - 1))
    # found by this test: two CHANGE ... FIRST put columns before id and k2, and the workload then dropped id and
    # deleted by it
    @example(
        ops=[("insert", 0, 0, 0), ("change", 0, 0, 1), ("change", 0, 0, 1), ("drop", 0, 0, 0), ("delete", 0, 0, 0)],
        seed=0,
    )
    # the server rotates its binlog between a table's rows and after an ALTER of it: the stream crosses files
    @example(
        ops=[
            *[("insert", 0, 0, 0), ("rotate", 0, 0, 0), ("insert", 0, 0, 0), ("add", 0, 0, 0), ("rotate", 0, 0, 0)],
            *[("update", 0, 0, 0), ("delete", 0, 0, 0)],
        ],
        seed=0,
    )
    def check(ops: list[Op], seed: int) -> None:
        db = f"fz{next(runs)}"
        mariadb.execute(f"DROP DATABASE IF EXISTS `{db}`")
        mariadb.execute(f"CREATE DATABASE `{db}`")
        try:
            journal, position = mariadb.execute("SHOW MASTER STATUS")[0][:2]
            conn = mariadb.connect()
            try:
                workload = Workload(conn, db, seed)
                workload.play(ops)
            finally:
                conn.close()
            note(f"metadata={metadata} seed={seed}\nSQL:\n" + ";\n".join(workload.sql))
            note("refused by the server:\n" + "\n".join(workload.refused))
            expected = [(t, e, _plain(v)) for t, e, v in workload.rows]
            inst = Instance(_config(mariadb, db, str(journal), int(position), tmp_path_factory.mktemp("meta")))
            inst.start()
            try:
                got = [(t, e, _plain(v)) for t, e, v in _consume(inst, len(expected), limit_s=20)] if expected else []
            finally:
                inst.stop()
            assert got == expected
        finally:
            mariadb.execute(f"DROP DATABASE IF EXISTS `{db}`")

    check()


def _config(db: MariaDBDatabase, name: str, journal: str, position: int, meta: Path) -> InstanceConfig:
    master = db.master()
    return InstanceConfig(
        destination="fuzz",
        master=MasterConfig(
            address=master.address,
            username=master.username,
            password=master.password,
            journal_name=journal,
            position=position,
        ),
        filter_regex=rf"{name}\..*",
        meta_mode="file",
        meta_dir=str(meta),
        flush_period_s=0,
        store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=1024),
    )


def _plain(values: dict[str, Any]) -> dict[str, Any]:
    """SELECT's and the decoder's values in one form: a SET as its text (pymysql gives the server's text, the decoder
    a frozenset; the workload's SET labels sort in their definition order)."""
    return {k: ",".join(sorted(v)) if isinstance(v, set | frozenset) else v for k, v in values.items()}
