"""Randomized differential test of capture (hypothesis): random DDL -- ADD / DROP / RENAME / CHANGE / MODIFY column
with FIRST / AFTER, one-ALTER name swaps, key changes, RENAME (swaps through a third name) / DROP / CREATE TABLE --
and the operations of production whose entries carry what SELECT shows (``random_schema_workload.CAPTURE_KINDS``:
partition maintenance, DROP / CREATE DATABASE, narrowing MODIFYs under a lax ``sql_mode``, DDL in a session time
zone, DML logged as statements, XA on a table the capture leaves out, tables keyed by UUID / INET6 / INET4), with
values of MariaDB's own types among the others, interleaved with DML on a real MariaDB, under
``binlog_row_metadata`` FULL and MINIMAL, consumed by an Instance from a position before all of it: every row image
must carry the names and values ``SELECT`` returned right after its statement. A workload that reaches a statement
the capture stops at under ``heal="stop"`` (``random_schema_workload.outcome``) ends there: the destination must hand
out every row before it, then stop with the typed error naming the statement's tables. (What heals by default reads
tables again: the mirror differential expects equality with ``SELECT`` there.)

CI runs a few examples of each (``PYCANAL_FUZZ_EXAMPLES``, default 20); a longer run sets it higher. A failure prints
the shrunk operations, the SQL they ran (hypothesis' ``note``) and a blob that reproduces it.
"""

from __future__ import annotations

import datetime as dt
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, note
from hypothesis import strategies as st
from random_operations import OUTSIDE
from random_schema_workload import CASES_SEEN, FUZZ_EXAMPLES, Op, Workload, capture_operation, fuzz_settings

from canal.config import InstanceConfig, MasterConfig, StoreConfig
from canal.errors import NotRunningError
from canal.instance import Instance
from canal.protocol import EMPTY_MESSAGE_ID, Entry
from canal.testing.plugin import MariaDBDatabase
from tests.test_schema_history_mariadb import Row, _consume, _rows

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
    @given(ops=st.lists(capture_operation, max_size=30), seed=st.integers(0, 2**32 - 1))
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
        journal, position = mariadb.execute("SHOW MASTER STATUS")[0][:2]
        inst = Instance(_config(mariadb, db, str(journal), int(position), tmp_path_factory.mktemp("meta")))
        try:
            if any(op[0] == "database" for op in ops):
                # a destination running as the database is dropped and created again: a first start at a position
                # before a CREATE TABLE IF NOT EXISTS stops typed under MINIMAL metadata (the table may have been
                # there before it, its layout then unknown); the workload waits for the history's bootstrap (the
                # parser's first event read), which refuses to read the layouts while DDL runs
                inst.start()
                deadline = time.monotonic() + 30
                while inst.read_position is None:
                    assert time.monotonic() < deadline and inst.parser.error is None, inst.parser.error
                    time.sleep(0.05)
            conn = mariadb.connect()
            try:
                workload = Workload(conn, db, seed, layer="capture", heal="stop")
                workload.play(ops)
            finally:
                conn.close()
            note(f"metadata={metadata} seed={seed}\nSQL:\n" + ";\n".join(workload.sql))
            note("refused by the server:\n" + "\n".join(workload.refused))
            expected = [(t, e, _plain(v)) for t, e, v in workload.rows]
            if not inst.is_started:
                inst.start()
            try:
                if workload.stop is not None:  # every row before the statement, then the typed stop naming it
                    handed, error = _until_stopped(inst, limit_s=20)
                    assert isinstance(error, workload.stop.error), repr(error)
                    assert set(error.tables) == set(workload.stop.tables), error
                else:
                    handed = _consume(inst, len(expected), limit_s=20) if expected else []
            finally:
                inst.stop()
            got = [(t, e, _plain(v)) for t, e, v in handed]
            assert got == expected
        finally:
            if inst.is_started:
                inst.stop()
            mariadb.execute(f"DROP DATABASE IF EXISTS `{db}`")

    seen = Counter(CASES_SEEN)
    check()
    print(f"\n{metadata}: workloads per case: {dict(sorted((CASES_SEEN - seen).items()))}")


def _until_stopped(inst: Instance, limit_s: float) -> tuple[list[Row], BaseException | None]:
    """Every row the destination hands out, each batch acked, until it stops: the rows, and the error it stopped
    with."""
    entries: list[Entry] = []
    deadline = time.monotonic() + limit_s
    with pytest.raises(NotRunningError) as caught:
        while True:
            assert time.monotonic() < deadline, f"no stop after {len(_rows(entries))} rows"
            msg = inst.get_without_ack(100, timeout=0.5)
            if msg.id != EMPTY_MESSAGE_ID:
                entries.extend(msg.entries)
                inst.ack(msg.id)
    return _rows(entries), caught.value.__cause__


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
        black_regex=rf"{name}\.{OUTSIDE}",
        meta_mode="file",
        meta_dir=str(meta),
        flush_period_s=0,
        store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=1024),
        # the row images as SELECT saw them, statement by statement: a heal's re-read is the mirror differential's
        # (tests/test_differential_schema_mirror_mariadb.py expects equality there)
        heal="stop",
    )


def _plain(values: dict[str, Any]) -> dict[str, Any]:
    """SELECT's and the decoder's values in one form: a SET as its text (pymysql gives the server's text, the decoder
    a frozenset; the workload's SET labels sort in their definition order), a TIMESTAMP as its UTC time (the decoder
    gives the instant, SELECT the session's local time: the workload reads in the server's zone, UTC here)."""
    return {k: _plain_value(v) for k, v in values.items()}


def _plain_value(value: Any) -> Any:
    if isinstance(value, set | frozenset):
        return ",".join(sorted(value))
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    return value
