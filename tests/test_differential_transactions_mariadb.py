"""Randomized differential test of transactions (hypothesis, real MariaDB): what the Instance hands out, applied to
a dict model, equals ``SELECT *`` of every table.

A workload is a list of transactions over an InnoDB and a MyISAM table: plain commits and rollbacks, savepoints (names
differing in case only), ``ROLLBACK TO`` and ``RELEASE SAVEPOINT`` mixing both engines (the server logs the rows a
``ROLLBACK TO`` undid when a non-transactional change came after the savepoint), XA transactions (on the InnoDB tables)
committed, rolled back or committed in one phase, the same on a table the destination leaves out (their outcomes must
hand out nothing: an XAROLLBACK entry would undo the transaction before it), and ``CREATE TABLE ... SELECT``; the server
rotates its binlog (``FLUSH BINARY LOGS``) after a transaction or between an XA transaction's PREPARE and its COMMIT.
Statements the server refuses (a duplicate key, an unknown savepoint) are left out, as the server leaves them. A
destination then reads it all with a random ``transaction_size``, in batches of random sizes, some rolled back and
fetched again, restarted at random batch boundaries (a file meta keeps the cursor); the consumer applies each row entry,
a CREATE entry starts an empty table, and an XAROLLBACK entry undoes the transaction before it (the workload never
interleaves XA transactions).

CI runs a few examples (``PYCANAL_FUZZ_EXAMPLES``, default 20, a quarter of them here; set it higher for a longer
run); a failure prints the SQL and a blob that reproduces it.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import pymysql
import pytest
from hypothesis import example, given, note
from hypothesis import strategies as st
from random_schema_workload import FUZZ_EXAMPLES, fuzz_settings

from canal.config import InstanceConfig, StoreConfig
from canal.instance import Instance
from canal.protocol import Entry, EntryType, EventType
from canal.spark.testing import master_position
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration

EXAMPLES = max(2, FUZZ_EXAMPLES // 4)
_RUNS = itertools.count()
_MAX_RESTARTS = 3  # per workload (a restart costs a connection and a dump)
SAVEPOINTS = ["s1", "s2", "S1"]  # savepoint names compare case-insensitively

# an operation: (verb, table index 0 = InnoDB / 1 = MyISAM, key, value) or (savepoint verb, name index)
_row_op = st.tuples(st.sampled_from(["ins", "upd", "del"]), st.integers(0, 1), st.integers(1, 6), st.integers(0, 99))
_savepoint_op = st.tuples(st.sampled_from(["savepoint", "rollback_to", "release"]), st.integers(0, 2))
_ops = st.lists(st.one_of(_row_op, _row_op, _savepoint_op), max_size=8)
_transaction = st.tuples(
    st.sampled_from(
        [
            *["commit", "commit", "rollback", "xa_commit", "xa_rollback", "xa_one_phase", "ctas", "rotate"],
            "xa_rotate",
            # XA transactions on a table the destination leaves out: their outcomes hand out nothing
            *["out_commit", "out_rollback", "out_one_phase"],
        ]
    ),
    _ops,
)
ROTATE = "FLUSH BINARY LOGS"  # run on a connection of its own: a session with a prepared XA transaction can't
_workload = st.lists(_transaction, min_size=1, max_size=8)
_consumer = st.tuples(
    st.sampled_from([1, 2, 3, 1024]),  # transaction_size
    st.lists(st.tuples(st.integers(1, 7), st.sampled_from(["ack", "ack", "rollback", "restart"])), min_size=1),
)


class _Tables:
    def __init__(self, db: str, run: int) -> None:
        self.db = db
        self.inno = f"inno{run}"
        self.myi = f"myi{run}"
        self.done = f"done{run}"
        self.xalog = f"xalog{run}"
        self.outside = f"outside{run}"  # left out by the destination's filter
        self.copies: list[str] = []

    def name(self, index: int) -> str:
        return self.inno if index == 0 else self.myi


def _statements(tables: _Tables, kind: str, ops: list[tuple[Any, ...]], n: int) -> list[str]:
    body: list[str] = []
    outside = kind.startswith("out_")  # an XA transaction on the table the destination leaves out, alone
    if outside:
        kind = "xa_" + kind[4:]
    xa = kind.startswith("xa")  # xa_rotate: the server rotates its binlog between XA PREPARE and XA COMMIT
    if xa and not outside:
        # a row every XA transaction writes: its prepared part is never empty, so the XAROLLBACK follows its rows
        body.append(f"INSERT INTO {tables.xalog} VALUES ({n}, 0)")
    for op in ops:
        verb = op[0]
        table = tables.outside if outside else tables.name(0 if xa else op[1])  # XA: on transactional tables only
        if verb == "ins":
            body.append(f"INSERT INTO {table} VALUES ({op[2]}, {op[3]})")
        elif verb == "upd":
            body.append(f"UPDATE {table} SET v = {op[3]} WHERE id = {op[2]}")
        elif verb == "del":
            body.append(f"DELETE FROM {table} WHERE id = {op[2]}")
        elif kind in ("commit", "rollback", "ctas", "rotate"):  # savepoints in plain transactions only
            name = SAVEPOINTS[op[1]]
            body.append(
                {
                    "savepoint": f"SAVEPOINT {name}",
                    "rollback_to": f"ROLLBACK TO {name}",
                    "release": f"RELEASE SAVEPOINT {name}",
                }[verb]
            )
    xid = f"'x{n}'"
    if kind == "commit":
        return ["BEGIN", *body, "COMMIT"]
    if kind == "rollback":
        return ["BEGIN", *body, "ROLLBACK"]
    if kind == "rotate":  # a transaction, then the next binlog file (a routine FLUSH, max_binlog_size, a restart)
        return ["BEGIN", *body, "COMMIT", ROTATE]
    if kind == "ctas":
        copy = f"copy{len(tables.copies)}_{tables.inno}"
        tables.copies.append(copy)
        return ["BEGIN", *body, "COMMIT", f"CREATE TABLE {copy} (PRIMARY KEY (id)) SELECT id, v FROM {tables.inno}"]
    if kind == "xa_one_phase":
        return [f"XA START {xid}", *body, f"XA END {xid}", f"XA COMMIT {xid} ONE PHASE"]
    outcome = "ROLLBACK" if kind == "xa_rollback" else "COMMIT"
    rotated = [ROTATE] if kind == "xa_rotate" else []
    return [f"XA START {xid}", *body, f"XA END {xid}", f"XA PREPARE {xid}", *rotated, f"XA {outcome} {xid}"]


def _play(conn: Any, statements: list[str], log: list[str], side: Any = None) -> None:
    """Run ``statements`` on ``conn`` (a rotation on ``side``), logging each, or that the server refused it."""
    with conn.cursor() as cur, (side or conn).cursor() as side_cur:
        for sql in statements:
            try:
                (side_cur if sql == ROTATE else cur).execute(sql)
                log.append(sql)
            except pymysql.err.MySQLError as exc:  # refused (a duplicate key, an unknown savepoint): not logged
                log.append(f"-- refused: {sql} ({exc.args[0]})")


class _Model:
    """Tables as the handed-out entries build them: {table: {id: row}}; an XAROLLBACK undoes the transaction
    before it."""

    def __init__(self) -> None:
        self.tables: dict[str, dict[Any, tuple[Any, ...]]] = {}
        self._undo: list[tuple[str, Any, tuple[Any, ...] | None]] = []
        self._closed = True

    def apply(self, entry: Entry) -> None:
        kind = entry.entry_type
        if kind is EntryType.TRANSACTIONBEGIN:
            self._undo = []
            self._closed = False
            return
        if kind is EntryType.TRANSACTIONEND:
            self._closed = True
            return
        rc = entry.row_change
        if kind is not EntryType.ROWDATA or rc is None:
            return
        event = entry.header.event_type
        if event is EventType.XAROLLBACK:  # (a boundary of its own: is_ddl is set, as on every XA outcome)
            for table, key, old in reversed(self._undo):
                self._set(table, key, old)
            self._undo = []
            return
        if rc.is_ddl:
            if event is EventType.CREATE:
                self.tables[entry.header.table] = {}
            return
        if rc.sql:
            return
        self._open()
        table = entry.header.table
        for row in rc.rows:
            if row.before is not None:
                self._change(table, row.before[0], None)
            if row.after is not None:
                self._change(table, row.after[0], tuple(row.after))

    def _open(self) -> None:
        if self._closed:
            self._undo = []
            self._closed = False

    def _change(self, table: str, key: Any, row: tuple[Any, ...] | None) -> None:
        self._undo.append((table, key, self.tables.get(table, {}).get(key)))
        self._set(table, key, row)

    def _set(self, table: str, key: Any, row: tuple[Any, ...] | None) -> None:
        rows = self.tables.setdefault(table, {})
        if row is None:
            rows.pop(key, None)
        else:
            rows[key] = row


def _consume(config: InstanceConfig, plan: list[tuple[int, str]], done: str) -> tuple[_Model, int]:
    model = _Model()
    restarts = 0
    steps = itertools.cycle(plan)
    deadline = time.monotonic() + 120
    finished = False
    rolled_back = False
    while not finished:
        with Instance(config) as inst:
            while not finished:
                assert time.monotonic() < deadline, "the marker row never came"
                error = inst.parser.error
                if error is not None:
                    raise error
                size, action = next(steps)
                msg = inst.get_without_ack(size, timeout=0.2)
                if msg.id == -1:
                    continue
                if action == "rollback" and not rolled_back:
                    inst.rollback(msg.id)  # handed out again by the next get, which is taken
                    rolled_back = True
                    continue
                rolled_back = False
                for entry in msg.entries:
                    model.apply(entry)
                    finished = finished or (entry.header.table == done and entry.entry_type is EntryType.ROWDATA)
                inst.ack(msg.id)
                if action == "restart" and not finished and restarts < _MAX_RESTARTS:
                    restarts += 1
                    break
    return model, restarts


@fuzz_settings(EXAMPLES)
@given(workload=_workload, consumer=_consumer)
# found by this test: the savepoint's ROLLBACK TO after a MyISAM row makes MariaDB log the InnoDB rows, then ROLLBACK
@example(
    workload=[("commit", [("upd", 0, 1, 0), ("savepoint", 2), ("ins", 0, 1, 0), ("ins", 1, 1, 0), ("rollback_to", 2)])],
    consumer=(1, [(1, "ack")]),
)
def test_random_transactions_hand_out_what_select_shows(
    mariadb: MariaDBDatabase, tmp_path_factory: pytest.TempPathFactory, workload: Any, consumer: Any
) -> None:
    run = next(_RUNS)
    tables = _Tables(mariadb.database, run)
    conn, side = mariadb.connect(), mariadb.connect()
    conn.select_db(mariadb.database)
    log: list[str] = []
    try:
        _play(
            conn,
            [
                f"CREATE TABLE {tables.inno} (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
                f"CREATE TABLE {tables.myi} (id INT PRIMARY KEY, v INT) ENGINE=MyISAM",
                f"CREATE TABLE {tables.done} (id INT PRIMARY KEY) ENGINE=InnoDB",
                f"CREATE TABLE {tables.xalog} (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
                f"CREATE TABLE {tables.outside} (id INT PRIMARY KEY, v INT) ENGINE=InnoDB",
            ],
            [],
        )
        start = master_position(conn)
        for n, (kind, ops) in enumerate(workload):
            _play(conn, _statements(tables, kind, list(ops), n), log, side)
        _play(conn, [f"INSERT INTO {tables.done} VALUES (1)"], log)
    finally:
        conn.close()
        side.close()
    note("\n".join(log))
    transaction_size, plan = consumer
    config = InstanceConfig(
        destination=f"fuzz{run}",
        master=mariadb.master(start),
        filter_regex=rf"{mariadb.database}\..*",
        black_regex=rf"{mariadb.database}\.{tables.outside}",
        transaction_size=transaction_size,
        meta_mode="file",
        meta_dir=str(tmp_path_factory.mktemp("meta")),
        flush_period_s=0,
        store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=1024),
    )
    model, restarts = _consume(config, plan, tables.done)
    note(f"restarts: {restarts}")
    for table in [tables.inno, tables.myi, tables.xalog, *tables.copies]:
        selected = {row[0]: tuple(row) for row in mariadb.execute(f"SELECT id, v FROM `{table}`")}
        assert model.tables.get(table, {}) == selected, f"{table} differs"
    assert tables.outside not in model.tables, "rows of the table the destination leaves out were handed out"
