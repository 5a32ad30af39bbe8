"""Randomized differential test (hypothesis, real MariaDB) of XA transactions prepared before a destination's start
position and committed or rolled back after it: what the Instance hands out, applied to a dict model that follows
XA as documented (prepared rows held until their XACOMMIT, dropped at XAROLLBACK; rows marked ``XA_RECOVERED``
applied at their commit unless the rows of that PREPARE were seen), equals ``SELECT`` -- starting from the table as
``SELECT`` showed it at the start position (as a snapshot would), across restarts of the destination at random
batches and hand-offs in parts (``transaction_size``).

CI runs a few examples (``PYCANAL_FUZZ_EXAMPLES``, default 20, a quarter of them here; set it higher for a longer
run).
"""

from __future__ import annotations

import contextlib
import itertools
import time
from typing import Any

import pymysql
import pytest
from hypothesis import given, note
from hypothesis import strategies as st
from random_schema_workload import FUZZ_EXAMPLES, fuzz_settings

from canal.config import InstanceConfig, StoreConfig
from canal.instance import Instance
from canal.parse.xa import XA_XID, xid_key
from canal.parse.xa_lookback import XA_RECOVERED
from canal.protocol import Entry, EntryType, EventType
from canal.spark.testing import master_position
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration

EXAMPLES = max(2, FUZZ_EXAMPLES // 4)
_RUNS = itertools.count()

# one XA transaction: prepared before the start?, committed?, its statements over its own keys (1..4)
_op = st.tuples(st.sampled_from(["upsert", "upsert", "del"]), st.integers(1, 4), st.integers(0, 99))
_xa = st.tuples(st.booleans(), st.booleans(), st.lists(_op, min_size=1, max_size=4))
# the XA transactions; FLUSH BINARY LOGS between the PREPAREs and the start (the read-back then searches an older
# file than the commit's); the order of the second phases
_workload = st.tuples(st.lists(_xa, min_size=1, max_size=4), st.booleans(), st.randoms(use_true_random=False))
_consumer = st.tuples(st.sampled_from([1, 2, 1024]), st.lists(st.integers(1, 5), min_size=1), st.integers(0, 6))


class _Model:
    """A consumer that follows XA as the capture guide says, over ``{id: v}``."""

    def __init__(self, rows: dict[int, int], table: str) -> None:
        self.rows = rows
        self.table = table
        self.held: dict[str, list[Entry]] = {}  # rows of PREPAREs seen in the stream
        self.recovered: dict[str, list[Entry]] = {}  # rows read back for a commit

    def take(self, entry: Entry) -> None:
        rc = entry.row_change
        if entry.entry_type is not EntryType.ROWDATA or rc is None:
            return
        props = entry.header.props
        xid = xid_key(props[XA_XID]) if XA_XID in props else None
        if rc.event_type is EventType.XACOMMIT:
            assert xid is not None
            seen = self.held.pop(xid, None)
            read_back = self.recovered.pop(xid, [])
            for held in seen if seen is not None else read_back:
                self._apply(held)
        elif rc.event_type is EventType.XAROLLBACK:
            assert xid is not None
            self.held.pop(xid, None)
            assert xid not in self.recovered  # nothing is read back for a rollback
        elif entry.header.table != self.table:
            return
        elif xid is not None:
            (self.recovered if XA_RECOVERED in props else self.held).setdefault(xid, []).append(entry)
        else:
            self._apply(entry)

    def _apply(self, entry: Entry) -> None:
        rc = entry.row_change
        assert rc is not None
        for row in rc.rows:
            if row.before is not None:
                self.rows.pop(row.before[0], None)
            if row.after is not None:
                self.rows[row.after[0]] = row.after[1]


def _statements(table: str, n: int, ops: list[tuple[str, int, int]]) -> list[str]:
    out = []
    for verb, key, value in ops:
        k = n * 10 + key
        if verb == "upsert":
            out.append(f"INSERT INTO {table} VALUES ({k}, {value}) ON DUPLICATE KEY UPDATE v = {value}")
        else:
            out.append(f"DELETE FROM {table} WHERE id = {k}")
    return out


def _prepare(session: Any, xid: str, statements: list[str], log: list[str]) -> None:
    with session.cursor() as cur:
        for sql in [f"XA START '{xid}'", *statements, f"XA END '{xid}'", f"XA PREPARE '{xid}'"]:
            log.append(sql)
            cur.execute(sql)


@fuzz_settings(EXAMPLES)
@given(workload=_workload, consumer=_consumer)
def test_xa_prepared_before_the_start_hands_out_what_select_shows(
    mariadb: MariaDBDatabase, tmp_path_factory: pytest.TempPathFactory, workload: Any, consumer: Any
) -> None:
    run = next(_RUNS)
    db = mariadb.database
    table, done = f"t{run}", f"done{run}"
    xas, rotate, rng = workload
    log: list[str] = []
    sessions: list[Any] = []

    def session() -> Any:
        sessions.append(mariadb.connect(autocommit=True))
        sessions[-1].select_db(db)
        return sessions[-1]

    def play(conn: Any, *statements: str) -> None:
        with conn.cursor() as cur:
            for sql in statements:
                log.append(sql)
                cur.execute(sql)

    conn = session()
    try:
        # the read-back reads the commit's binlog file from its start (some 5 MB/s): the shared server's current
        # file can hold hundreds of MB of earlier tests' events by now, more than the consumer below waits for
        play(conn, "FLUSH BINARY LOGS")
        play(conn, f"CREATE TABLE {table} (id INT PRIMARY KEY, v INT)", f"CREATE TABLE {done} (id INT PRIMARY KEY)")
        play(conn, *(f"INSERT INTO {table} VALUES ({n * 10 + 1}, 1), ({n * 10 + 2}, 2)" for n in range(len(xas))))
        owners: dict[int, Any] = {}
        for n, (before, _, ops) in enumerate(xas):
            if before:
                owners[n] = session()
                _prepare(owners[n], f"run{run}x{n}", _statements(table, n, ops), log)
        if rotate:
            play(conn, "FLUSH BINARY LOGS")
        start = master_position(conn)
        initial = {int(r[0]): int(r[1]) for r in mariadb.execute(f"SELECT id, v FROM `{db}`.{table}")}
        log.append(f"-- start {start}")
        for n, (before, _, ops) in enumerate(xas):
            if not before:
                owners[n] = session()
                _prepare(owners[n], f"run{run}x{n}", _statements(table, n, ops), log)
        order = list(range(len(xas)))
        rng.shuffle(order)
        for n in order:
            play(owners[n], f"XA {'COMMIT' if xas[n][1] else 'ROLLBACK'} 'run{run}x{n}'")
        play(conn, f"INSERT INTO {done} VALUES (1)")
        expected = {int(r[0]): int(r[1]) for r in mariadb.execute(f"SELECT id, v FROM `{db}`.{table}")}
    finally:
        for s in sessions:  # a failure left prepared transactions: roll them back (they would hold their locks)
            with s.cursor() as cur:
                cur.execute("XA RECOVER")
                for row in cur.fetchall():
                    name = row[3].decode() if isinstance(row[3], bytes) else str(row[3])
                    if name.startswith(f"run{run}x"):
                        with contextlib.suppress(pymysql.err.OperationalError):  # another session's
                            cur.execute(f"XA ROLLBACK '{name}'")
            s.close()
    note("\n".join(log))
    transaction_size, sizes, restart_after = consumer
    master = mariadb.master()
    config = InstanceConfig(
        destination=f"xafuzz{run}",
        master=master.__class__(
            address=master.address,
            username=master.username,
            password=master.password,
            journal_name=start[0],
            position=start[1],
        ),
        filter_regex=rf"{db}\..*",
        store=StoreConfig(batch_mode="ITEMSIZE"),
        transaction_size=transaction_size,
        meta_mode="file",
        meta_dir=str(tmp_path_factory.mktemp("meta")),
    )
    model = _Model(dict(initial), table)
    finished = _consume(config, model, done, sizes, restart_after)
    assert finished, "the done marker never came"
    assert model.rows == expected
    assert not model.held and not model.recovered


def _consume(config: InstanceConfig, model: _Model, done: str, sizes: list[int], restart_after: int) -> bool:
    """Batches of ``sizes`` (cycled), acked; the destination restarts once after ``restart_after`` batches."""
    sizes_cycle = itertools.cycle(sizes)
    batches = 0
    for _ in range(2):
        deadline = time.monotonic() + 30
        with Instance(config) as inst:
            while time.monotonic() < deadline:
                msg = inst.get_without_ack(next(sizes_cycle), timeout=0.1)
                finished = False
                for entry in msg.entries:
                    model.take(entry)
                    finished = finished or (entry.header.table == done and entry.entry_type is EntryType.ROWDATA)
                if msg.entries:
                    inst.ack(msg.id)
                    batches += 1
                if finished:
                    return True
                if batches == restart_after and msg.entries:
                    break  # a restart at this batch boundary
    return False
