"""The one transaction-boundary rule, and the start-position search agreeing with the converter on XA and savepoints."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_parser_helpers import TABLES, MiniMysql

from canal.parse.boundary import Boundary, event_boundary, query_boundary
from canal.parse.ddl import query_kind
from canal.parse.events import BinlogEvent, GtidEvent, QueryEvent, RowsEvent, XidEvent
from canal.parse.start_position import search_file, transaction_begin
from canal.position import EntryPosition
from canal.protocol import EventType
from canal.sql import QueryKind

T0 = 1_700_000_000


def _query(sql: str) -> QueryEvent:
    return QueryEvent(log_file="f", offset=4, next_offset=90, timestamp=T0, server_id=1, schema="s", sql=sql)


@pytest.mark.parametrize(
    ("sql", "outside", "inside"),
    [
        ("BEGIN", Boundary.BEGIN, Boundary.BEGIN),
        ("START TRANSACTION", Boundary.BEGIN, Boundary.BEGIN),
        ("XA START 'x'", Boundary.BEGIN, Boundary.BEGIN),
        ("COMMIT", Boundary.END, Boundary.END),
        ("ROLLBACK", Boundary.END, Boundary.END),
        ("XA END 'x'", Boundary.END, Boundary.END),
        ("XA COMMIT 'x'", Boundary.XA_OUTCOME, Boundary.END),
        ("XA COMMIT 'x' ONE PHASE", Boundary.XA_OUTCOME, Boundary.END),
        ("/*!50000 XA ROLLBACK X'31',X'',1 */", Boundary.XA_OUTCOME, Boundary.END),
        ("XA PREPARE 'x'", Boundary.CONTROL, Boundary.CONTROL),
        ("SAVEPOINT s1", Boundary.CONTROL, Boundary.CONTROL),
        ("ROLLBACK TO SAVEPOINT s1", Boundary.CONTROL, Boundary.CONTROL),
        ("CREATE TABLE t (a INT)", Boundary.STATEMENT, Boundary.STATEMENT),
        ("INSERT INTO t VALUES (1)", Boundary.STATEMENT, Boundary.STATEMENT),
        ("XA RECOVER", Boundary.STATEMENT, Boundary.STATEMENT),
    ],
)
def test_query_boundaries(sql: str, outside: Boundary, inside: Boundary) -> None:
    assert event_boundary(_query(sql), False) is outside
    assert event_boundary(_query(sql), True) is inside


def test_event_boundaries() -> None:
    common = {"log_file": "f", "offset": 4, "next_offset": 50, "timestamp": T0, "server_id": 1}
    assert event_boundary(XidEvent(**common, xid=7), True) is Boundary.END
    assert event_boundary(GtidEvent(**common, gtid="0-1-5", mariadb=True), False) is Boundary.BEGIN
    assert event_boundary(GtidEvent(**common, gtid="0-1-5", mariadb=True, standalone=True), False) is None
    assert event_boundary(GtidEvent(**common, gtid="3e11fa47-71ca-11e1-9e33-c80aa9429562:5"), False) is None


def test_every_query_kind_has_a_boundary() -> None:
    for kind in QueryKind:
        for inside in (False, True):
            assert isinstance(query_boundary(kind, inside), Boundary)


def _xa_one_phase(db: MiniMysql) -> list[BinlogEvent]:
    """A transaction that MySQL's one-phase XA form ends with XA COMMIT ... ONE PHASE (the converter's END)."""
    with db.cond:
        events = [db._append(QueryEvent, 80, schema="shop", sql="XA START 'x'", thread_id=1)]
        db._append(RowsEvent, 50, event_type=EventType.INSERT, table_id=1, table=TABLES["shop.orders"], rows=())
        events.append(db._append(QueryEvent, 80, schema="shop", sql="XA COMMIT 'x' ONE PHASE", thread_id=1))
    return events


def test_timestamp_search_ends_a_transaction_at_xa_commit_one_phase_as_the_converter_does() -> None:
    db = MiniMysql(clock=T0)
    db.clock = T0 + 10
    _, commit = _xa_one_phase(db)
    db.clock = T0 + 20
    db.transaction([("insert", "shop.orders", [(1, 1, "a")])])
    # before T0+20 the last boundary is the end of the XA transaction, not its start
    found = search_file(db.connect(), "mysql-bin.000001", (T0 + 15) * 1000)
    assert found == EntryPosition("mysql-bin.000001", commit.next_offset, (T0 + 10) * 1000, 1)


def test_a_savepoint_inside_a_transaction_does_not_hide_its_begin() -> None:
    db = MiniMysql(clock=T0)
    db.transaction([("insert", "shop.orders", [(1, 1, "a")])], statements=["SAVEPOINT s1"])
    begin = next(e for e in db.file("mysql-bin.000001") if isinstance(e, QueryEvent) and e.sql == "BEGIN")
    rows = next(e for e in db.file("mysql-bin.000001") if isinstance(e, RowsEvent))
    assert transaction_begin(db.connect(), "mysql-bin.000001", rows.offset) == begin.offset


_WORDS = [
    "BEGIN",
    "begin",
    "COMMIT",
    "ROLLBACK",
    "XA",
    "START",
    "TRANSACTION",
    "SAVEPOINT",
    "RELEASE",
    "TO",
    "WORK",
    "INSERT",
    "CREATE",
    "TABLE",
    "t",
    "'x'",
    "END",
    "PREPARE",
    "/*!50000",
    "*/",
    "(",
    ")",
    "--",
    "#",
    "\n",
    "SET",
]


@given(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=6), st.sampled_from(["", " ", "\n\t"]))
def test_the_first_word_shortcut_agrees_with_the_reader(words: list[str], lead: str) -> None:
    sql = lead + " ".join(words)
    for inside in (False, True):
        assert event_boundary(_query(sql), inside) is query_boundary(query_kind(sql), inside)
