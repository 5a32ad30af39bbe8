"""The converter: entries, headers, cursor stamps (anchor + rows_done), filters, DDL, GTIDs, resume skipping."""

from __future__ import annotations

import attrs
import pytest
from test_parser_helpers import UUID, MiniMysql

from canal.config import FilterFlags
from canal.errors import UnmodeledStatementError
from canal.filter import FieldFilter, TableFilters
from canal.gtid import GtidSet
from canal.parse.convert import ConvertOptions, EntryConverter, NeedTransactionBeginError
from canal.parse.events import BinlogEvent, FormatDescriptionEvent, GtidSetEvent, QueryEvent, RowsEvent, XidEvent
from canal.parse.reach import StatementReach
from canal.parse.unmodeled import StatementPolicy, UnmodeledStatement
from canal.position import EntryPosition
from canal.protocol import Entry, EntryType, EventType
from canal.schema import SchemaCatalog
from canal.schema.history import SchemaHistory
from canal.sql import read_statement

START = EntryPosition("mysql-bin.000001", 4)


def convert_all(
    events: list[BinlogEvent],
    options: ConvertOptions | None = None,
    start: EntryPosition = START,
    rows_done: int = 0,
    policy: StatementPolicy | None = None,
    reach: StatementReach | None = None,
) -> list[Entry]:
    conv = EntryConverter(options)
    if policy is not None:
        conv.unmodeled = policy
    if reach is not None:
        conv.reach = reach
    conv.reset(start, rows_done)
    out = []
    for event in events:
        entry = conv.convert(event)
        if entry is not None:
            out.append(entry)
    return out


def _let_through(statement: UnmodeledStatement) -> dict[str, str]:
    """A statement policy that hands every statement off (as a healing policy would, after arranging a snapshot)."""
    return {}


def two_transactions() -> MiniMysql:
    db = MiniMysql()
    db.transaction([("insert", "shop.orders", [(1, 10, "a"), (2, 20, "b")]), ("insert", "shop.users", [(1, "x")])])
    db.advance_clock(5)
    db.execute("ALTER TABLE orders ADD COLUMN c INT")
    db.transaction([("delete", "shop.orders", [(1, 10, "a")])])
    return db


def test_entries_headers_and_cursor_stamps() -> None:
    db = two_transactions()
    events = db.all_events()
    entries = convert_all(events)
    kinds = [(e.entry_type, e.header.event_type) for e in entries]
    assert kinds == [
        (EntryType.TRANSACTIONBEGIN, EventType.QUERY),
        (EntryType.ROWDATA, EventType.INSERT),
        (EntryType.ROWDATA, EventType.INSERT),
        (EntryType.TRANSACTIONEND, EventType.QUERY),
        (EntryType.ROWDATA, EventType.ALTER),
        (EntryType.TRANSACTIONBEGIN, EventType.QUERY),
        (EntryType.ROWDATA, EventType.DELETE),
        (EntryType.TRANSACTIONEND, EventType.QUERY),
    ]
    begin, rows1, rows2, end, ddl, begin2, rows3, _end2 = entries
    # header fields come from the event
    rows_event = next(e for e in events if isinstance(e, RowsEvent))
    assert rows1.header.log_file == "mysql-bin.000001"
    assert rows1.header.log_offset == rows_event.offset
    assert rows1.header.event_length == rows_event.length > 0
    assert rows1.header.execute_time == rows_event.timestamp * 1000
    assert rows1.header.server_id == 1
    assert (rows1.header.schema, rows1.header.table) == ("shop", "orders")
    assert rows1.row_change is not None and len(rows1.row_change.rows) == 2
    assert rows1.row_change.table_id == rows_event.table_id
    assert begin.thread_id == 42
    xid = next(e for e in events if isinstance(e, XidEvent))
    assert end.xid == xid.xid and end.header.log_offset == xid.offset
    # cursor stamps: the first transaction is anchored at the dump start (not consumed)
    assert [e.rows_done for e in entries] == [0, 1, 2, 0, 0, 0, 1, 0]
    assert begin.anchor is not None and begin.anchor.journal_name == START.journal_name
    assert begin.anchor.position == 4 and not begin.anchor.included
    assert rows1.anchor == rows2.anchor == begin.anchor
    # a boundary is its own anchor, consumed
    assert end.anchor == EntryPosition("mysql-bin.000001", xid.offset, xid.timestamp * 1000, 1, None, True)
    assert ddl.anchor is not None and ddl.anchor.position == ddl.header.log_offset and ddl.anchor.included
    assert begin2.anchor == rows3.anchor == ddl.anchor
    assert end.is_boundary and ddl.is_boundary and not rows1.is_boundary


def test_dump_start_anchor_gets_time_and_server_of_first_event() -> None:
    db = two_transactions()
    events = db.all_events()
    entries = convert_all(events)
    anchor = entries[0].anchor
    assert anchor is not None
    first = next(e for e in events if not isinstance(e, FormatDescriptionEvent | GtidSetEvent))
    assert anchor.timestamp == first.timestamp * 1000 and anchor.server_id == 1


def test_dump_start_anchor_is_not_stamped_by_the_files_preamble() -> None:
    """A dump read alone opens with the file's format description and GTID list, stamped when the file was made; a
    destination joining a shared reader at the same start sees neither. Both stamp the start with the time of its
    first transaction (a shared and a lone destination hand out the same entries)."""
    db = MiniMysql()
    db.advance_clock(7)
    db.transaction([("insert", "shop.users", [(1, "x")])])
    events = db.all_events()
    preamble = [e for e in events if isinstance(e, FormatDescriptionEvent | GtidSetEvent)]
    stream = [e for e in events if not isinstance(e, FormatDescriptionEvent | GtidSetEvent)]
    assert preamble and all(e.timestamp < stream[0].timestamp for e in preamble)
    alone, joined = convert_all(events), convert_all(stream)
    assert alone[0].anchor is not None and alone[0].anchor.timestamp == stream[0].timestamp * 1000
    assert alone == joined


def test_ddl_entry() -> None:
    db = MiniMysql()
    db.execute("ALTER TABLE orders ADD COLUMN c INT", schema="shop")
    db.execute("CREATE TABLE other.t (id INT)", schema="shop")
    db.execute("GRANT SELECT ON *.* TO 'u'@'%'", schema="")
    entries = convert_all(db.all_events())
    alter, create, grant = entries
    assert alter.row_change is not None and alter.row_change.is_ddl
    assert alter.row_change.event_type is EventType.ALTER
    assert alter.row_change.sql == "ALTER TABLE orders ADD COLUMN c INT"
    assert alter.row_change.ddl_schema == "shop"
    assert (alter.header.schema, alter.header.table) == ("shop", "orders")
    assert (create.header.schema, create.header.table, create.header.event_type) == ("other", "t", EventType.CREATE)
    assert grant.header.event_type is EventType.QUERY and grant.is_boundary


def test_drop_database_is_an_erase_of_the_database_and_a_ddl_says_its_session_state() -> None:
    """DROP DATABASE drops every table of it: ERASE (canal: QUERY), the database as schema, no table. A DDL carries
    the time zone its session converted values in (with the server's system zone beside SYSTEM) and its start time
    to the microsecond, when the server logged them; a BEGIN or a GRANT carries none."""
    db = MiniMysql()
    db.execute("DROP DATABASE `Shop 1`", schema="other")
    event = db.all_events()[-1]
    assert isinstance(event, QueryEvent)
    events = [
        event,
        attrs.evolve(event, sql="ALTER TABLE t MODIFY c TIMESTAMP", time_zone="SYSTEM", offset=500, next_offset=600),
        attrs.evolve(event, sql="ALTER TABLE t ADD SYSTEM VERSIONING", micros=42, offset=600, next_offset=700),
        attrs.evolve(event, sql="GRANT SELECT ON *.* TO 'u'@'%'", time_zone="+05:00", offset=700, next_offset=800),
    ]
    conv = EntryConverter()
    conv.reset(START)
    conv.system_time_zone = "UTC"
    erase, modify, versioned, grant = (conv.convert(e) for e in events)
    assert erase is not None and erase.row_change is not None and erase.row_change.is_ddl
    assert (erase.header.event_type, erase.header.schema, erase.header.table) == (EventType.ERASE, "Shop 1", "")
    assert erase.row_change.ddl_schema == "other" and dict(erase.header.props) == {}
    assert modify is not None and dict(modify.header.props) == {"TIME_ZONE": "SYSTEM", "SYSTEM_TIME_ZONE": "UTC"}
    assert versioned is not None and dict(versioned.header.props) == {"TIMESTAMP": f"{event.timestamp}.000042"}
    assert grant is not None and dict(grant.header.props) == {}


def test_statement_inside_a_transaction_is_a_row_entry() -> None:
    db = MiniMysql()
    # MariaDB logs CREATE TABLE ... SELECT under row logging as the CREATE with its columns, then the rows
    db.transaction([("insert", "shop.users", [(1, "a")])], statements=["CREATE TABLE shop.log (x INT)"])
    entries = convert_all(db.all_events())
    assert [e.entry_type for e in entries] == [
        EntryType.TRANSACTIONBEGIN,
        EntryType.ROWDATA,
        EntryType.ROWDATA,
        EntryType.TRANSACTIONEND,
    ]
    stmt = entries[1]
    assert stmt.row_change is not None and stmt.row_change.is_ddl
    assert stmt.header.event_type is EventType.CREATE and stmt.row_change.sql.startswith("CREATE")
    assert [e.rows_done for e in entries] == [0, 1, 2, 0]


def _shop_history() -> StatementReach:
    """What statements reach, from a schema history holding shop.users and shop.log (no views, triggers, routines
    or foreign keys)."""
    catalog = SchemaCatalog(database="shop", mariadb=True)
    for sql in ("CREATE TABLE users (id INT PRIMARY KEY, name TEXT)", "CREATE TABLE log (what TEXT, n INT)"):
        catalog.apply(read_statement(sql))
    history = SchemaHistory()
    history.bootstrap(START, catalog)
    return StatementReach(history)


def test_dml_logged_as_a_statement_on_a_captured_table_stops_before_it_is_handed_off() -> None:
    db = MiniMysql()
    db.transaction([("insert", "shop.users", [(1, "a")])])
    db.transaction([("insert", "shop.users", [(2, "b")])], statements=["INSERT INTO shop.log VALUES ('secret', 1)"])
    events = db.all_events()
    conv = EntryConverter()
    conv.reach = _shop_history()
    conv.reset(START)
    handed: list[Entry] = []
    with pytest.raises(UnmodeledStatementError) as caught:
        for event in events:
            entry = conv.convert(event)
            if entry is not None:
                handed.append(entry)
    error = caught.value
    statement = next(e for e in events if isinstance(e, QueryEvent) and e.sql.startswith("INSERT"))
    assert error.tables == ("shop.log",) and error.position == f"mysql-bin.000001:{statement.offset}"
    assert error.shape == "INSERT / REPLACE / UPDATE / DELETE / LOAD DATA"
    assert error.statement == "INSERT INTO shop.log VALUES ('***', 1)" and "secret" not in str(error)
    # nothing after the statement's transaction began was converted; the cursor stays at the boundary before it
    end = [e for e in handed if e.entry_type is EntryType.TRANSACTIONEND][-1]
    assert handed[-1].entry_type is EntryType.TRANSACTIONBEGIN and conv.anchor == end.anchor == handed[-1].anchor
    # a table the filter leaves out, which reaches no captured table, never stops; the query_dml flag only hides
    # what is delivered
    only_users = ConvertOptions(tables=TableFilters.from_strings(r"shop\.users", ""))
    assert [e.entry_type for e in convert_all(events, only_users, reach=_shop_history())] == [
        EntryType.TRANSACTIONBEGIN,
        EntryType.ROWDATA,
        EntryType.TRANSACTIONEND,
    ] * 2
    with pytest.raises(UnmodeledStatementError):
        convert_all(events, ConvertOptions(flags=FilterFlags(query_dml=True)), reach=_shop_history())
    # without a schema history what it reaches cannot be told (a trigger of shop.log may write shop.users): a stop
    with pytest.raises(UnmodeledStatementError, match="keeps no schema history"):
        convert_all(events, only_users)
    # a policy that takes care of it (issue "heal": an in-stream snapshot) gets the statement and marks its entry
    seen: list[UnmodeledStatement] = []

    def heal(statement: UnmodeledStatement) -> dict[str, str]:
        seen.append(statement)
        return {"HEALED": "snapshot"}

    healed = convert_all(events, policy=heal, reach=_shop_history())
    marked = [e for e in healed if e.header.props.get("HEALED")]
    assert len(marked) == 1 and marked[0].row_change is not None and marked[0].row_change.sql.startswith("INSERT")
    assert seen[0].captured == ("shop.log",) and seen[0].in_transaction


def test_table_filters() -> None:
    db = two_transactions()
    events = db.all_events()
    white = convert_all(events, ConvertOptions(tables=TableFilters.from_strings(r"shop\.users", "")))
    tables = [e.header.table for e in white if e.entry_type is EntryType.ROWDATA]
    assert tables == ["users"]  # orders rows and the orders DDL are filtered
    black = convert_all(events, ConvertOptions(tables=TableFilters.from_strings(r".*\..*", r"shop\.orders")))
    assert [e.header.table for e in black if e.entry_type is EntryType.ROWDATA] == ["users"]
    # filtered rows are not counted; the boundary still moves the anchor
    rows = [e for e in white if e.entry_type is EntryType.ROWDATA]
    assert rows[0].rows_done == 1
    begin2 = [e for e in white if e.entry_type is EntryType.TRANSACTIONBEGIN][1]
    ddl_event = next(e for e in events if isinstance(e, QueryEvent) and e.sql.startswith("ALTER"))
    assert begin2.anchor is not None and begin2.anchor.position == ddl_event.offset


def test_field_filters_project_rows() -> None:
    db = two_transactions()
    options = ConvertOptions(fields=FieldFilter.parse("shop.orders:id/note", "shop.users:name"))
    entries = convert_all(db.all_events(), options)
    orders = entries[1]
    assert orders.row_change is not None
    assert orders.row_change.table is not None and orders.row_change.table.names == ("id", "note")
    assert [r.after for r in orders.row_change.rows] == [(1, "a"), (2, "b")]
    users = entries[2]
    assert users.row_change is not None and [r.after_dict() for r in users.row_change.rows] == [{"id": 1}]
    deleted = entries[6]
    assert deleted.row_change is not None and [r.before for r in deleted.row_change.rows] == [(1, "a")]


def test_filter_flags() -> None:
    db = two_transactions()
    db.transaction([("insert", "shop.users", [(9, "z")])], statements=["UPDATE shop.log SET x = 1"])
    events = db.all_events()
    no_ddl = convert_all(events, ConvertOptions(flags=FilterFlags(query_ddl=True)), policy=_let_through)
    assert not any(e.row_change is not None and e.row_change.is_ddl for e in no_ddl)
    no_rows = convert_all(events, ConvertOptions(flags=FilterFlags(rows=True)), policy=_let_through)
    assert not any(e.entry_type is EntryType.ROWDATA and e.row_change and e.row_change.rows for e in no_rows)
    no_dml = convert_all(events, ConvertOptions(flags=FilterFlags(query_dml=True)), policy=_let_through)
    assert not any(e.row_change is not None and e.row_change.sql.startswith("UPDATE") for e in no_dml)
    passed = convert_all(events, policy=_let_through)
    assert any(e.row_change is not None and e.row_change.sql.startswith("UPDATE") for e in passed)
    no_insert = convert_all(events, ConvertOptions(flags=FilterFlags(dml_insert=True)), policy=_let_through)
    assert [
        e.header.event_type
        for e in no_insert
        if e.entry_type is EntryType.ROWDATA and e.row_change and e.row_change.rows
    ] == [EventType.DELETE]
    grants = MiniMysql()
    grants.execute("GRANT SELECT ON *.* TO 'u'@'%'")
    assert convert_all(grants.all_events(), ConvertOptions(flags=FilterFlags(query_dcl=True))) == []
    assert len(convert_all(grants.all_events())) == 1


def test_a_statement_marked_for_a_heal_goes_out_whatever_the_query_filter_flags() -> None:
    """The flags choose which statements are delivered, not what a copy follows: a statement a heal marks (its
    tables' rows are void from there) is delivered with them set; one no heal marks is not."""
    from canal.parse.heal_marks import HEAL

    db = two_transactions()
    db.transaction([("insert", "shop.users", [(9, "z")])], statements=["UPDATE shop.log SET x = 1"])
    events = db.all_events()

    def heal(statement: UnmodeledStatement) -> dict[str, str]:
        return {HEAL: '{"why":"x","at":"","statement":"","tables":[]}'}

    no_dml = ConvertOptions(flags=FilterFlags(query_dml=True))
    marked = [e for e in convert_all(events, no_dml, policy=heal) if HEAL in e.header.props]
    assert [e.row_change.sql for e in marked if e.row_change] == ["UPDATE shop.log SET x = 1"]
    assert HEAL in marked[0].header.props
    assert not any(
        e.row_change is not None and e.row_change.sql.startswith("UPDATE")
        for e in convert_all(events, no_dml, policy=_let_through)
    )


def test_gtid_in_header_and_executed_set_in_gtid_mode() -> None:
    db = MiniMysql(gtid=True)
    db.transaction([("insert", "shop.orders", [(1, 1, "a")])])
    db.execute("CREATE TABLE shop.t (id INT)")
    db.transaction([("insert", "shop.orders", [(2, 1, "a")])])
    plain = convert_all(db.all_events())
    assert [e.header.gtid for e in plain] == [f"{UUID}:1"] * 3 + [f"{UUID}:2"] + [f"{UUID}:3"] * 3
    assert all(e.anchor is not None and e.anchor.gtid is None for e in plain)
    gtid = convert_all(db.all_events(), ConvertOptions(gtid_mode=True))
    ends = [e for e in gtid if e.is_boundary]
    assert [e.anchor.gtid for e in ends if e.anchor] == [f"{UUID}:1", f"{UUID}:1-2", f"{UUID}:1-3"]


def test_resume_skips_the_consumed_boundary_begin_and_rows() -> None:
    db = MiniMysql()
    db.transaction([("insert", "shop.orders", [(1, 1, "a")])])
    db.transaction([("insert", "shop.orders", [(i, i, "x")]) for i in range(2, 7)])
    events = db.all_events()
    full = convert_all(events)
    end1 = full[2]
    assert end1.entry_type is EntryType.TRANSACTIONEND and end1.anchor is not None
    # resume after the first transaction with "3 rows of the next one done"
    tail = convert_all([e for e in events if e.offset >= end1.header.log_offset], start=end1.anchor, rows_done=3)
    expected = [e for e in full[3:] if not (e.entry_type is EntryType.TRANSACTIONBEGIN or 0 < e.rows_done <= 3)]
    assert tail == expected
    assert [e.rows_done for e in tail] == [4, 5, 0]
    # resume at the consumed boundary itself with nothing done: everything after it, nothing before
    assert convert_all([e for e in events if e.offset >= end1.header.log_offset], start=end1.anchor) == full[3:]


def test_start_inside_a_transaction_is_detected() -> None:
    db = MiniMysql()
    db.transaction([("insert", "shop.orders", [(1, 1, "a")]), ("insert", "shop.orders", [(2, 1, "a")])])
    events = db.all_events()
    rows = [e for e in events if isinstance(e, RowsEvent)]
    start = EntryPosition("mysql-bin.000001", rows[1].offset)
    with pytest.raises(NeedTransactionBeginError) as info:
        convert_all([e for e in events if e.offset >= rows[1].offset], start=start)
    assert info.value.start == start


def test_gtid_set_arithmetic() -> None:
    s = GtidSet(f"{UUID}:1-5:7")
    s.add(f"{UUID}:6")
    s.add("aaaaaaaa-71ca-11e1-9e33-c80aa9429562:3")
    assert str(s) == f"{UUID}:1-7,aaaaaaaa-71ca-11e1-9e33-c80aa9429562:3"
    s.add(f"{UUID}:9")
    assert str(s).startswith(f"{UUID}:1-7:9")
    m = GtidSet("0-1-5,1-2-3")
    m.add("0-1-6")
    m.add("2-1-1")
    assert str(m) == "0-1-6,1-2-3,2-1-1" and m.is_mariadb
    empty = GtidSet()
    assert not empty
    empty.add("0-1-1")
    assert str(empty) == "0-1-1"


def test_positions_carry_the_binlog_owners_server_id_headers_the_events() -> None:
    # in a replication chain a server's binlog holds events with the originating server's id
    db = MiniMysql(server_id=5)
    db.transaction([("insert", "shop.orders", [(1, 1, "a")])])
    conv = EntryConverter()
    conv.reset(START, server_id=1)
    entries = [e for e in map(conv.convert, db.all_events()) if e is not None]
    assert {e.header.server_id for e in entries} == {5}
    assert {e.anchor.server_id for e in entries if e.anchor is not None} == {1}
