"""What a statement logged as a statement reaches, without a server: the definitions of views, triggers and routines
read for what they change (canal.sql.objects), kept in the schema history through renames, drops, rewinds and its
document (canal.schema.objects), followed for a statement (canal.schema.reach), the sessions' temporary tables
(canal.parse.sessions), and the capture's verdict on each (canal.parse.unmodeled): the captured tables it can reach
heal, what cannot be told heals every captured table or stops, a session's own tables change nothing."""

from __future__ import annotations

import doctest
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import canal.schema.reach
import canal.sql.objects
from canal.parse.convert import EntryConverter
from canal.parse.events import FormatDescriptionEvent, QueryEvent
from canal.parse.reach import StatementReach
from canal.parse.sessions import SessionTables
from canal.parse.unmodeled import capture_verdict
from canal.position import EntryPosition
from canal.schema import SchemaCatalog
from canal.schema.foreign_keys import action_index
from canal.schema.history import MemoryHistoryStore, SchemaHistory
from canal.schema.objects import EVERY_DATABASE, ObjectCatalog
from canal.schema.reach import reach
from canal.sql import TableName, read_statement, read_statements
from canal.sql.objects import read_object, read_uses

AT = EntryPosition("mysql-bin.000001", 4)
_WORDS = [
    "UPDATE",
    "DELETE",
    "INSERT",
    "FROM",
    "JOIN",
    "SET",
    "(",
    ")",
    "`q`",
    "t",
    "a.b",
    ",",
    "ON",
    "CALL",
    "f(",
    ";",
]


def test_the_modules_examples_run() -> None:
    for module in (canal.sql.objects, canal.schema.reach):
        assert doctest.testmod(module).failed == 0


# -- reading definitions ---------------------------------------------------------------------------------------------


def _writes(sql: str) -> list[tuple[str | None, str, list[str]]]:
    return [(w.table.schema, w.table.name, sorted(w.events)) for w in read_uses(sql).writes]


@pytest.mark.parametrize(
    ("sql", "writes"),
    [
        ("INSERT INTO s.t (a) VALUES (1)", [("s", "t", ["INSERT"])]),
        ("INSERT INTO t VALUES (1) ON DUPLICATE KEY UPDATE a = 2", [(None, "t", ["INSERT", "UPDATE"])]),
        ("REPLACE LOW_PRIORITY INTO t SELECT * FROM u", [(None, "t", ["DELETE", "INSERT"])]),
        # a multi-table UPDATE writes its tables, not their aliases; a DELETE the tables before FROM and after it
        ("UPDATE t AS a JOIN s.u b ON a.id = b.id SET a.x = 1", [(None, "t", ["UPDATE"]), ("s", "u", ["UPDATE"])]),
        (
            "DELETE a FROM t AS a JOIN u ON u.id = a.id WHERE a.q = 1",
            [(None, "t", ["DELETE"]), (None, "u", ["DELETE"])],
        ),
        ("DELETE QUICK FROM x.t WHERE id IN (SELECT id FROM y)", [("x", "t", ["DELETE"])]),
        ("TRUNCATE TABLE t", [(None, "t", ["TRUNCATE"])]),
        ("LOAD DATA INFILE 'f' REPLACE INTO TABLE t", [(None, "t", ["DELETE", "INSERT"])]),
        # functions and clauses that read like statements: none
        ("SELECT REPLACE(a, 'b', 'c'), INSERT(a, 1, 2, 'x') FROM t FOR UPDATE", []),
        ("CREATE TABLE c (p INT REFERENCES p (id) ON DELETE CASCADE ON UPDATE CASCADE)", []),
    ],
)
def test_what_a_text_writes(sql: str, writes: list[tuple[str | None, str, list[str]]]) -> None:
    assert _writes(sql) == writes


def test_what_a_body_calls_and_whether_it_builds_sql_at_run_time() -> None:
    uses = read_uses("BEGIN DECLARE x INT; SET x = s.f(g(1)); CALL p(x); IF x THEN CALL s.q(); END IF; END")
    assert TableName("s", "f") in uses.calls and TableName(None, "g") in uses.calls and not uses.dynamic
    assert uses.procedures == (TableName(None, "p"), TableName("s", "q"))
    assert read_uses("BEGIN PREPARE st FROM @sql; EXECUTE st; END").dynamic
    # a derived table's query is read for its calls
    assert TableName(None, "h") in read_uses("DELETE a FROM t a JOIN (SELECT h(1) id) d USING (id)").calls
    # any text reads, cut short or not SQL at all
    for text in ("UPDATE t JOIN (SELECT ((", "DELETE FROM", "INSERT", "'unclosed", "`x", "CALL"):
        read_uses(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80) | st.lists(st.sampled_from(_WORDS)).map(" ".join))
def test_any_text_reads_without_an_error(text: str) -> None:
    read_uses(text)
    read_object(text)
    read_object("CREATE VIEW v AS " + text)
    read_object("CREATE TRIGGER tr AFTER INSERT ON t FOR EACH ROW " + text)


def test_views_triggers_and_routines_are_read() -> None:
    view = read_object(
        "CREATE OR REPLACE ALGORITHM=MERGE DEFINER=`root`@`%` SQL SECURITY INVOKER VIEW s.v (a) AS "
        "SELECT t.id FROM s.t JOIN u USING (id) WHERE f(t.id) WITH CHECK OPTION"
    )
    assert view is not None and view.kind == "VIEW" and view.or_replace and view.uses is not None
    assert {TableName("s", "t"), TableName(None, "u")} <= set(view.uses.names) and TableName(
        None, "f"
    ) in view.uses.calls
    alter = read_object("ALTER VIEW v AS SELECT 1")
    assert alter is not None and alter.or_replace and alter.changes_body
    trigger = read_object("CREATE TRIGGER IF NOT EXISTS s.tr BEFORE INSERT OR UPDATE ON t FOR EACH ROW "
                          "FOLLOWS other BEGIN INSERT INTO audit VALUES (NEW.id); END")  # fmt: skip
    assert trigger is not None and trigger.table == TableName(None, "t") and trigger.events == ("INSERT", "UPDATE")
    assert trigger.if_not_exists and trigger.uses is not None and trigger.uses.writes[0].table.name == "audit"
    function = read_object("CREATE DEFINER=root@localhost FUNCTION f(a INT) RETURNS INT(11) DETERMINISTIC RETURN a")
    assert function is not None and function.kind == "FUNCTION" and function.uses is not None
    udf = read_object("CREATE AGGREGATE FUNCTION udf RETURNS REAL SONAME 'u.so'")
    assert udf is not None and udf.udf and udf.uses is None
    characteristics = read_object("ALTER PROCEDURE p COMMENT 'x'")
    assert characteristics is not None and not characteristics.changes_body
    dropped = read_object("DROP VIEW IF EXISTS a, b.c")
    assert dropped is not None and dropped.names == (TableName(None, "a"), TableName("b", "c")) and dropped.if_exists
    unreadable = read_object("CREATE TRIGGER tr SOMETIME INSERT ON t")
    assert unreadable is not None and unreadable.uses is None and unreadable.error
    assert read_object("CREATE TABLE t (id INT)") is None and read_object("CREATE VIEW") is None


# -- the catalog's objects --------------------------------------------------------------------------------------------

SCHEMA = [
    "CREATE TABLE t (id INT PRIMARY KEY, v INT)",
    "CREATE TABLE audit (id INT PRIMARY KEY)",
    "CREATE TABLE tally (id INT PRIMARY KEY)",
    "CREATE TABLE par (id INT PRIMARY KEY, u INT UNIQUE)",
    "CREATE TABLE ch (id INT PRIMARY KEY, pid INT, FOREIGN KEY (pid) REFERENCES par (id) ON DELETE CASCADE "
    "ON UPDATE CASCADE)",
    "CREATE TABLE ch2 (id INT PRIMARY KEY, pu INT, FOREIGN KEY (pu) REFERENCES par (u) ON DELETE SET NULL)",
    "CREATE TABLE gch (id INT PRIMARY KEY, cid INT, FOREIGN KEY (cid) REFERENCES ch (id) ON DELETE CASCADE)",
    "CREATE TABLE keep (id INT PRIMARY KEY, pid INT, FOREIGN KEY (pid) REFERENCES par (id))",  # RESTRICT
]
OBJECTS = [
    "CREATE VIEW v AS SELECT id, v FROM t",
    "CREATE VIEW vv AS SELECT * FROM v WHERE v > 0",
    "CREATE TRIGGER t_ai AFTER INSERT ON t FOR EACH ROW INSERT INTO audit VALUES (NEW.id)",
    "CREATE TRIGGER t_ad AFTER DELETE ON t FOR EACH ROW CALL bump()",
    "CREATE PROCEDURE bump() UPDATE tally SET id = id + 1",
    "CREATE FUNCTION f(a INT) RETURNS INT MODIFIES SQL DATA BEGIN INSERT INTO d.audit VALUES (a); RETURN a; END",
]


def _catalog(*extra: str) -> SchemaCatalog:
    catalog = SchemaCatalog(database="d", mariadb=True)
    for sql in SCHEMA:
        catalog.apply(read_statement(sql))
    for sql in (*OBJECTS, *extra):
        found = read_object(sql)
        assert found is not None, sql
        catalog.apply_object(found)
    return catalog


def _reach(catalog: SchemaCatalog, sql: str, **kw: Any) -> tuple[list[str], str | None]:
    uses = read_uses(sql)
    index = action_index((t.db, t.name, t.foreign_keys) for t in catalog)
    found = reach(catalog, index, uses.writes, uses.calls, "d", reads=uses.names, **kw)
    return [f"{db}.{table}" for db, table in found.tables], found.unknown


@pytest.mark.parametrize(
    ("sql", "reached"),
    [
        ("UPDATE vv SET v = 1", ["d.t"]),  # a view over a view: its base table (no trigger on UPDATE)
        ("INSERT INTO v VALUES (1, 1)", ["d.t", "d.audit"]),  # ... and t's INSERT trigger
        ("DELETE FROM t", ["d.t", "d.tally"]),  # a trigger calling a procedure
        ("TRUNCATE TABLE t", ["d.t"]),  # fires no trigger
        ("INSERT INTO par VALUES (f(1), 1)", ["d.par", "d.audit"]),  # a stored function called
        ("DELETE FROM keep WHERE id = d.f(2)", ["d.keep", "d.audit"]),  # ... in a WHERE, qualified
        ("DELETE FROM par WHERE id = 1", ["d.par", "d.ch", "d.ch2", "d.gch"]),  # CASCADE, SET NULL, on and on
        ("UPDATE par SET id = 2", ["d.par", "d.ch"]),  # ON UPDATE CASCADE (ch2 has no ON UPDATE action)
        ("UPDATE keep SET pid = NOW()", ["d.keep"]),  # a built-in function
        ("SELECT sys.ps_thread_id(NULL)", []),  # the server's own routines write no captured table
    ],
)
def test_what_a_statement_reaches(sql: str, reached: list[str]) -> None:
    assert _reach(_catalog(), sql) == (reached, None)


def test_a_view_read_runs_the_functions_its_query_calls() -> None:
    """Reading a view (not writing it) runs the functions its query calls, through views over it too, from a
    statement or a routine's body; a view whose definition is not known may call one."""
    catalog = _catalog("CREATE VIEW vf AS SELECT f(id) AS x FROM t", "CREATE VIEW vvf AS SELECT x FROM vf",
                       "CREATE PROCEDURE copy_out() INSERT INTO keep SELECT x FROM vvf")  # fmt: skip
    assert _reach(catalog, "INSERT INTO keep SELECT x FROM vf") == (["d.keep", "d.audit"], None)
    assert _reach(catalog, "DELETE FROM keep WHERE id IN (SELECT x FROM vvf)") == (
        ["d.keep", "d.audit"],
        None,
    )
    assert _reach(catalog, "INSERT INTO keep SELECT id FROM v") == (["d.keep"], None)
    catalog.objects.views["d.v"] = attrs.evolve(catalog.objects.views["d.v"], uses=None)
    assert "whose definition is not known" in str(_reach(catalog, "INSERT INTO keep SELECT id FROM v")[1])


def test_what_cannot_be_told_is_said() -> None:
    catalog = _catalog("CREATE TRIGGER par_ad AFTER DELETE ON par FOR EACH ROW BEGIN PREPARE s FROM @q; END")
    assert "runs SQL built at run time" in str(_reach(catalog, "DELETE FROM par")[1])
    assert "knows as no table and no view" in str(_reach(catalog, "INSERT INTO nowhere VALUES (1)")[1])
    assert "a function the schema history does not know" in str(_reach(catalog, "INSERT INTO t VALUES (x.g(1))")[1])
    unseen = _catalog()
    unseen.objects.unseen_triggers.add("d")
    assert "the triggers of d.t are not known" in str(_reach(unseen, "UPDATE t SET v = 1")[1])
    unseen.objects.unseen_routines.add(EVERY_DATABASE)
    assert "the routines of d are not known" in str(_reach(unseen, "SELECT g(1)")[1])
    blind = _catalog()
    blind.objects.forget(read_object("DROP VIEW v"), "d")  # type: ignore[arg-type]
    assert "the view d.v, whose definition is not known" in str(_reach(blind, "UPDATE vv SET v = 1")[1])
    # a session's temporary table of the name: nothing of the schema (a function it calls still runs)
    temporary = _reach(_catalog(), "INSERT INTO t VALUES (f(1))", temporary=lambda db, t: t == "t")
    assert temporary == (["d.audit"], None)


def test_objects_follow_their_tables_and_databases() -> None:
    catalog = _catalog()
    catalog.apply(read_statement("RENAME TABLE t TO t2, v TO v2"))  # a view renames as a table does
    assert catalog.objects.view("d", "v2") is not None and catalog.objects.view("d", "v") is None
    assert [tr.table for tr in catalog.objects.triggers.values()] == ["t2", "t2"]
    catalog.apply(read_statement("ALTER TABLE t2 RENAME TO t3"))
    assert {tr.table for tr in catalog.objects.triggers.values()} == {"t3"}
    catalog.apply(read_statement("DROP TABLE t3"))
    assert not catalog.objects.triggers and catalog.objects.view("d", "v2") is not None
    catalog.apply_object(read_object("DROP FUNCTION IF EXISTS f"))  # type: ignore[arg-type]
    assert catalog.objects.routine("FUNCTION", "d", "F") is None and catalog.objects.routine("PROCEDURE", "d", "bump")
    catalog.apply(read_statement("DROP DATABASE d"))
    assert not catalog.objects


def test_the_history_keeps_objects_through_rewinds_and_its_document() -> None:
    store = MemoryHistoryStore()
    history = SchemaHistory(store)
    history.bootstrap(AT, _catalog())
    at = EntryPosition("mysql-bin.000001", 100)
    history.apply(at, "d", "CREATE FUNCTION g() RETURNS INT RETURN (SELECT COUNT(*) FROM d.t)", next_offset=150)
    assert history.function_names() == {"f", "g"}
    reloaded = SchemaHistory(store)
    assert reloaded.function_names() == {"f", "g"}
    assert reloaded.reach([], [TableName(None, "f")], "d").tables == (("d", "audit"),)
    reloaded.rewind(EntryPosition("mysql-bin.000001", 50))  # before the CREATE FUNCTION: read again later
    assert reloaded.function_names() == {"f"}
    assert reloaded.captured_tables(lambda db, t: t.startswith("ch")) == ("d.ch", "d.ch2")


# -- sessions' temporary tables ---------------------------------------------------------------------------------------


def _follow(sessions: SessionTables, sql: str, thread: int = 7, *, flagged: bool = False) -> Any:
    return sessions.follow(read_statements(sql), "d", 1, thread, flagged=flagged)


def test_a_session_s_temporary_tables_shadow_the_tables_of_their_names() -> None:
    sessions = SessionTables()
    assert not _follow(sessions, "TRUNCATE TABLE t").temporary  # no session holds one
    assert _follow(sessions, "CREATE TEMPORARY TABLE t (id INT)", flagged=True).session_only
    assert sessions.holds(1, 7, "d", "t") and not sessions.holds(1, 8, "d", "t")  # another session's t is the schema's
    assert not _follow(sessions, "TRUNCATE TABLE t", thread=8).temporary
    for sql in ("TRUNCATE TABLE t", "ALTER TABLE t ADD COLUMN w INT", "INSERT INTO d.t VALUES (1)"):
        assert _follow(sessions, sql, flagged=True).session_only, sql
    assert _follow(sessions, "ALTER TABLE t RENAME TO t2", flagged=True).session_only
    assert sessions.holds(1, 7, "d", "t2") and not sessions.holds(1, 7, "d", "t")
    assert _follow(sessions, "RENAME TABLE t2 TO t3").session_only  # logged without the flag
    mixed = _follow(sessions, "CREATE TABLE c LIKE t3", flagged=True)
    assert mixed.temporary == {("d", "t3")} and not mixed.session_only  # c is the schema's
    assert not _follow(sessions, "CREATE TABLE t3 (id INT)").session_only  # a table of the schema, beside it
    assert _follow(sessions, "DROP TEMPORARY TABLE IF EXISTS `d`.`t3` /* generated by server */").session_only
    assert not sessions.holds(1, 7, "d", "t3")
    _follow(sessions, "CREATE TEMPORARY TABLE u (id INT)")
    sessions.clear()  # a dump's start, a server's start
    assert not sessions.holds(1, 7, "d", "u")


def _query(sql: str, offset: int, *, thread: int = 7, flagged: bool = False) -> QueryEvent:
    return QueryEvent(log_file="mysql-bin.000001", offset=offset, next_offset=offset + 10, timestamp=1, server_id=1,
                      schema="d", sql=sql, thread_id=thread, thread_specific=flagged)  # fmt: skip


def test_the_converter_leaves_a_session_s_own_tables_out_and_forgets_them_when_the_server_starts() -> None:
    conv = EntryConverter()
    conv.reach = StatementReach(None)
    conv.reset(AT)
    assert conv.convert(_query("CREATE TEMPORARY TABLE t (id INT)", 100, flagged=True)) is None
    assert conv.convert(_query("TRUNCATE TABLE t", 200, flagged=True)) is None and conv.session_only
    restart = FormatDescriptionEvent(log_file="mysql-bin.000002", offset=4, next_offset=120, timestamp=2,
                                     server_id=1, created=2)  # fmt: skip
    conv.convert(restart)
    truncate = conv.convert(_query("TRUNCATE TABLE t", 300))  # the schema's t now: followed
    assert truncate is not None and truncate.row_change is not None and not conv.session_only


# -- the capture's verdict --------------------------------------------------------------------------------------------


def _history_reach() -> StatementReach:
    history = SchemaHistory()
    history.bootstrap(AT, _catalog())
    return StatementReach(history)


def _verdict(sql: str, captured: set[str], reach_: StatementReach | None = None, **kw: Any) -> Any:
    return capture_verdict(
        sql,
        "d",
        lambda db, t: f"{db}.{t}" in captured,
        AT,
        in_transaction=True,
        reach=_history_reach() if reach_ is None else reach_,
        **kw,
    )


def test_a_statement_heals_the_captured_tables_it_reaches() -> None:
    through_view = _verdict("UPDATE vv SET v = 1", {"d.t", "d.vv"}).unmodeled
    assert through_view is not None and through_view.healable and through_view.heal_tables == ("d.t",)
    assert through_view.tables == ("d.vv",) and "reaching d.t" in str(through_view.error())
    cascade = _verdict("DELETE FROM par WHERE id = 1", {"d.gch"}).unmodeled
    assert cascade is not None and cascade.heal_tables == ("d.gch",)
    function = _verdict("SELECT f(1)", {"d.audit"}).unmodeled
    assert function is not None and function.heal_tables == ("d.audit",) and function.shape.name.startswith("SELECT")
    # a comment between a function's name and its parenthesis is a blank (the text was searched for "f(" alone)
    for call in ("f/* c */(1)", "f -- c\n(1)", "f# c\n(1)", "`f` /*!(1)*/", "d.f/*M!100000 (1)*/"):
        commented = _verdict(f"INSERT INTO keep VALUES ({call}, 1)", {"d.audit"}).unmodeled
        assert commented is not None and commented.heal_tables == ("d.audit",), call
    # reaching no captured table: left out, like a statement on tables the filter leaves out
    assert _verdict("UPDATE keep SET pid = 1", {"d.t"}).captures_nothing
    # a multi-table UPDATE says which tables it may change: they heal
    multi = _verdict("UPDATE t JOIN keep ON keep.id = t.id SET t.v = 1", {"d.t"}).unmodeled
    assert multi is not None and multi.healable and multi.heal_tables == ("d.t",)


def test_what_cannot_be_told_heals_every_captured_table_or_stops() -> None:
    reach_ = _history_reach()
    assert reach_.history is not None
    reach_.history._catalog.objects.unseen_triggers.add("d")
    unknown = _verdict("UPDATE keep SET pid = 1", {"d.t", "d.ch"}, reach_).unmodeled
    assert unknown is not None and unknown.healable and unknown.heal_tables == ("d.ch", "d.t")
    assert "the triggers of d.keep are not known" in str(unknown.error())
    # without a schema history nothing can be told, nor which tables are captured: a stop
    blind = _verdict("UPDATE keep SET pid = 1", {"d.t"}, StatementReach(None)).unmodeled
    assert blind is not None and not blind.healable and "keeps no schema history" in str(blind.error())


def test_a_session_s_temporary_tables_change_nothing_and_what_the_flag_cannot_tell_heals_or_stops() -> None:
    sessions = SessionTables()
    scope = _follow(sessions, "CREATE TEMPORARY TABLE t (id INT)", flagged=True)

    def verdict(sql: str, *, flagged: bool = True, thread: int = 7) -> Any:
        statements = read_statements(sql, strict=False)
        scope = sessions.follow(statements, "d", 1, thread, flagged=flagged)
        return _verdict(sql, {"d.t", "d.c"}, statements=statements, scope=scope,
                        temporary=lambda db, t: sessions.holds(1, thread, db, t))  # fmt: skip

    assert scope.session_only and verdict("TRUNCATE TABLE t").captures_nothing
    assert verdict("INSERT INTO t VALUES (1)").captures_nothing
    assert verdict("INSERT INTO t VALUES (f(1))").unmodeled is None  # audit is not captured here
    like = verdict("CREATE TABLE c LIKE t").unmodeled
    assert like is not None and like.shape.name == "a statement on a session's temporary tables and others"
    # another session, flagged (a temporary table of the name made before the capture's start?): TRUNCATE heals,
    # a layout change stops
    truncate = verdict("TRUNCATE TABLE t", thread=9).unmodeled
    assert truncate is not None and truncate.healable and truncate.shape.name.startswith("TRUNCATE of a name")
    alter = verdict("ALTER TABLE t ADD COLUMN w INT", thread=9).unmodeled
    assert alter is not None and not alter.healable and alter.shape.name.startswith("a layout change")
    assert verdict("ALTER TABLE t ADD COLUMN w INT", thread=9, flagged=False).unmodeled is None  # followed


def test_a_drop_s_flag_tells_nothing_of_a_session_s_temporary_tables() -> None:
    """MariaDB flags every statement that drops a table of the schema, whatever its session holds (a DROP TABLE; a
    CREATE OR REPLACE TABLE of a table that exists): that flag stops nothing. Of a new name the flag says the LIKE's
    source was a temporary table (made before the capture's start): a stop."""
    sessions = SessionTables()

    def verdict(sql: str, reach_: StatementReach | None = None) -> Any:
        statements = read_statements(sql, strict=False)
        scope = sessions.follow(statements, "d", 1, 9, flagged=True)
        return _verdict(sql, {"d.t", "d.new"}, reach_, statements=statements, scope=scope,
                        temporary=lambda db, t: sessions.holds(1, 9, db, t)).unmodeled  # fmt: skip

    assert verdict("CREATE OR REPLACE TABLE t LIKE keep") is None
    for stopping in (
        verdict("CREATE OR REPLACE TABLE new LIKE keep"),
        verdict("CREATE TABLE new LIKE keep"),
        # without a schema history whether t exists is not known: the flag may be the LIKE's
        verdict("CREATE OR REPLACE TABLE t LIKE keep", StatementReach(None)),
    ):
        assert stopping is not None and stopping.shape.name.startswith("a layout change"), stopping


def test_an_object_catalog_document_reads_back() -> None:
    objects = _catalog().objects
    objects.unseen_triggers.add("x")
    again = ObjectCatalog.from_dict(objects.to_dict())
    assert again.to_dict() == objects.to_dict()
    # a history written before it kept objects knows none, and could not see any database's triggers or routines
    old = ObjectCatalog.from_dict(None)
    assert old.triggers_of("d", "t") is None and not old.routines_seen("d") and not old.views


def test_a_restart_inside_a_transaction_judges_its_statements_as_before() -> None:
    """Statements inside a transaction are judged without the sessions' temporary tables made before it: a restart
    inside the transaction (at its start, skipping the row entries acked) knows none of them, and the entries it
    skips must be the ones handed off before. A DML on a temporary table shadowing a captured one heals that one; on
    one no table of the schema is named after (the flag says it used a temporary table), nothing."""
    history = SchemaHistory()
    history.bootstrap(AT, _catalog())
    policy_seen: list[str] = []

    def heal(statement: Any) -> dict[str, str]:
        policy_seen.append(statement.sql)
        return {"HEAL": "{}"}

    def converter() -> EntryConverter:
        conv = EntryConverter()
        conv.reach = StatementReach(history)
        conv.unmodeled = heal
        return conv

    events: list[Any] = [
        _query("CREATE TEMPORARY TABLE t (id INT)", 100, flagged=True),
        _query("CREATE TEMPORARY TABLE scratch (id INT)", 200, flagged=True),
        _query("BEGIN", 300),
        _query("INSERT INTO t VALUES (1)", 400, flagged=True),  # shadowing captured d.t: heals it
        _query("INSERT INTO scratch VALUES (1)", 500, flagged=True),  # no table of the schema: left out
        _query("INSERT INTO audit VALUES (2)", 600),
        _query("COMMIT", 700),
    ]
    conv = converter()
    conv.reset(AT)
    entries = [e for e in map(conv.convert, events) if e is not None]
    rows = [e for e in entries if e.row_change is not None and e.entry_type.name == "ROWDATA"]
    assert [e.row_change.sql for e in rows if e.row_change] == [
        "INSERT INTO t VALUES (1)",
        "INSERT INTO audit VALUES (2)",
    ]
    assert [e.rows_done for e in rows] == [1, 2]
    # a restart at the transaction's start, one row entry acked: the next is the same one
    begin = next(e for e in entries if e.entry_type.name == "TRANSACTIONBEGIN")
    again = converter()
    again.reset(begin.anchor, rows_done=1)
    resumed = [e for e in map(again.convert, events[2:]) if e is not None and e.entry_type.name == "ROWDATA"]
    assert [(e.row_change.sql, e.rows_done) for e in resumed if e.row_change] == [("INSERT INTO audit VALUES (2)", 2)]
