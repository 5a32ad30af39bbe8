"""The schema history against a simple model: the state at any position is the bootstrap catalog with every DDL
before that position applied, in order -- through snapshots, compaction, rewinds and reloads from its store."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from canal.errors import SchemaError
from canal.position import EntryPosition
from canal.schema import SchemaCatalog
from canal.schema.history import FileHistoryStore, MemoryHistoryStore, SchemaHistory, layout_statement
from canal.sql import read_statement

DB = "app"
TABLES = ["t1", "t2", "t3"]
COLUMNS = ["a", "b", "c"]


def pos(offset: int, journal: str = "mysql-bin.000001") -> EntryPosition:
    return EntryPosition(journal_name=journal, position=offset, timestamp=1_700_000_000_000 + offset)


def bootstrap_catalog() -> SchemaCatalog:
    catalog = SchemaCatalog(charset="utf8mb4", database=DB, mariadb=True)
    catalog.apply(read_statement("CREATE TABLE t1 (id INT PRIMARY KEY, a VARCHAR(5))"), DB)
    return catalog


ddl = st.one_of(
    st.builds(lambda t, c: f"ALTER TABLE {t} ADD COLUMN {c} INT", st.sampled_from(TABLES), st.sampled_from(COLUMNS)),
    st.builds(lambda t, c: f"ALTER TABLE {t} DROP COLUMN {c}", st.sampled_from(TABLES), st.sampled_from(COLUMNS)),
    st.builds(
        lambda t, c, d: f"ALTER TABLE {t} CHANGE {c} {d} BIGINT FIRST",
        st.sampled_from(TABLES),
        st.sampled_from(COLUMNS),
        st.sampled_from(COLUMNS),
    ),
    st.builds(lambda t: f"CREATE TABLE IF NOT EXISTS {t} (id INT PRIMARY KEY, a TEXT)", st.sampled_from(TABLES)),
    st.builds(lambda t, u: f"RENAME TABLE {t} TO {u}", st.sampled_from(TABLES), st.sampled_from(TABLES)),
    st.builds(lambda t: f"DROP TABLE IF EXISTS {t}", st.sampled_from(TABLES)),
    st.just("INSERT INTO t1 VALUES (1, 'x')"),  # not a layout statement: never recorded
)

action = st.one_of(
    st.tuples(st.just("ddl"), ddl),
    st.tuples(st.just("rewind"), st.integers(0, 40)),
    st.tuples(st.just("reload"), st.none()),
    st.tuples(st.just("check"), st.integers(0, 40)),
)


class Model:
    """The history's meaning, without snapshots: (position, sql) in order; a state is a replay from the bootstrap."""

    def __init__(self) -> None:
        self.statements: list[tuple[int, str]] = []

    def state_at(self, offset: int | None) -> tuple[dict[str, Any], set[str]]:
        catalog = bootstrap_catalog()
        unknown: set[str] = set()
        for at, sql in self.statements:
            if offset is not None and at >= offset:
                break
            stmt = layout_statement(sql)
            if stmt is None:
                continue
            try:
                changes = catalog.apply(stmt, DB)
            except SchemaError as exc:
                unknown.add(exc.table or "?")
                catalog.tables.pop(exc.table or "?", None)
                continue
            for change in changes:
                unknown.discard(change.old or "")
                unknown.discard(change.new or "")
        return dict(catalog.tables), unknown


def history_state(history: SchemaHistory, offset: int | None) -> tuple[dict[str, Any], set[str]]:
    if offset is None:
        tables: dict[str, Any] = {}
        unknown: set[str] = set()
        for name in {f"{DB}.{t}" for t in TABLES}:
            try:
                table = history.table(DB, name.split(".")[1])
            except SchemaError:
                unknown.add(name)
                continue
            if table is not None:
                tables[name] = table
        return tables, unknown
    return dict(history.at(pos(offset)).tables), set()


@settings(max_examples=150, deadline=None)
@given(actions=st.lists(action, max_size=30), snapshot_every=st.integers(1, 4))
def test_the_history_equals_a_replay_of_its_ddl(actions: list[tuple[str, Any]], snapshot_every: int) -> None:
    store = MemoryHistoryStore()
    history = SchemaHistory(store, snapshot_every=snapshot_every)
    history.bootstrap(pos(4), bootstrap_catalog())
    model = Model()
    offset = 10
    for kind, arg in actions:
        if kind == "ddl":
            history.apply(pos(offset), DB, arg, next_offset=offset + 1)
            if layout_statement(arg) is not None:
                model.statements.append((offset, arg))
            offset += 2
        elif kind == "rewind":
            target = max(4, min(arg, offset))
            history.rewind(pos(target))
            model.statements = [(at, sql) for at, sql in model.statements if at < target]
            offset = max(target, 10) if target % 2 == 0 else target + 1
        elif kind == "reload":
            history = SchemaHistory(store, snapshot_every=snapshot_every)
        else:
            at = max(4, arg)
            tables, _unknown = model.state_at(at)
            assert history_state(history, at)[0] == tables, f"at {at}"
        assert history_state(history, None) == model.state_at(None)


def test_compaction_drops_what_expired_and_keeps_what_positions_after_the_horizon_need(tmp_path: Any) -> None:
    store = FileHistoryStore(tmp_path / "schema.json")
    history = SchemaHistory(store, snapshot_every=2, expire_s=10)
    history.bootstrap(pos(4), bootstrap_catalog())
    for i in range(10):
        at = 100 + i * 1000  # one DDL per simulated second
        history.apply(pos(at), DB, f"ALTER TABLE t1 ADD COLUMN c{i} INT", next_offset=at + 1)
    for i in range(10, 40):
        at = 100 + i * 1000
        history.apply(pos(at), DB, f"ALTER TABLE t1 ADD COLUMN c{i} INT", next_offset=at + 1)
    assert history.snapshots < 10 and history.records < 25
    reloaded = SchemaHistory(store)
    t1 = reloaded.table(DB, "t1")
    assert t1 is not None and [c.name for c in t1.columns][-1] == "c39" and len(t1.columns) == 42
    # positions inside the horizon still resolve exactly
    inside = reloaded.at(pos(100 + 35 * 1000))
    assert [c.name for c in inside.tables[f"{DB}.t1"].columns][-1] == "c34"


def test_a_ddl_the_history_cannot_apply_marks_the_table_unknown_until_it_is_created_again() -> None:
    history = SchemaHistory()
    history.bootstrap(pos(4), bootstrap_catalog())
    assert history.apply(pos(10), DB, "ALTER TABLE t1 DROP COLUMN nope", next_offset=11)
    with pytest.raises(SchemaError, match=r"app\.t1.*unknown.*canal schema rebuild") as caught:
        history.columns(DB, "t1")
    assert caught.value.table == "app.t1"
    assert history.table(DB, "t2") is None  # another table: simply not there
    history.apply(pos(20), DB, "CREATE TABLE t1 (id INT PRIMARY KEY)", next_offset=21)
    assert [c.name for c in history.columns(DB, "t1") or []] == ["id"]
    history.rewind(pos(15))
    with pytest.raises(SchemaError):
        history.columns(DB, "t1")


@pytest.mark.parametrize(
    "sql",
    [
        "ALTER TABLE t1 MODIFY a INT DEFAULT ^^^, ADD COLUMN x INT",  # one action not read: the others are not enough
        "ALTER TABLE t1 CHANGE a b FOO(3) WEIRD",
        "CREATE TABLE t1 (id INT PRIMARY KEY, q INT DEFAULT $$ $$",
    ],
)
def test_a_layout_ddl_the_reader_cannot_read_never_leaves_a_stale_layout(sql: str) -> None:
    history = SchemaHistory()
    history.bootstrap(pos(4), bootstrap_catalog())
    history.apply(pos(6), DB, "CREATE TABLE t2 (k INT PRIMARY KEY)", next_offset=7)
    history.apply(pos(10), DB, sql, next_offset=11)
    with pytest.raises(SchemaError, match=r"app\.t1.*cannot read") as caught:
        history.columns(DB, "t1")
    assert caught.value.table == "app.t1"
    assert [c.name for c in history.columns(DB, "t2") or []]  # other tables keep their layouts


def test_an_unreadable_layout_ddl_that_names_no_table_stops_the_history() -> None:
    history = SchemaHistory()
    history.bootstrap(pos(4), bootstrap_catalog())
    before = history.records
    with pytest.raises(SchemaError, match=r"cannot be applied.*names no table"):
        history.apply(pos(10), DB, "CREATE TABLE (", next_offset=11)
    assert history.records == before and [c.name for c in history.columns(DB, "t1") or []] == ["id", "a"]


def test_statements_that_change_no_layout_stay_harmless() -> None:
    history = SchemaHistory()
    history.bootstrap(pos(4), bootstrap_catalog())
    for i, sql in enumerate(["GRANT SELECT ON app.* TO u", "CREATE INDEX i ON t1 (a)"]):
        assert not history.apply(pos(10 + i), DB, sql, next_offset=11 + i)
    # a routine is kept (what a statement logged as a statement reaches), a layout is not changed
    assert history.apply(pos(20), DB, "CREATE FUNCTION f() $$", next_offset=21)
    assert [c.name for c in history.columns(DB, "t1") or []] == ["id", "a"]
    assert history.function_names() == {"f"}


def test_drop_index_primary_drops_the_key_so_a_new_one_can_be_added() -> None:
    history = SchemaHistory()
    history.bootstrap(pos(4), bootstrap_catalog())
    for i, sql in enumerate(
        [
            "ALTER TABLE t1 DROP INDEX `PRIMARY`",
            "ALTER TABLE t1 ADD PRIMARY KEY (a)",
            "ALTER TABLE t1 DROP CONSTRAINT `PRIMARY`, ADD PRIMARY KEY (id, a)",
            "DROP INDEX `PRIMARY` ON t1",
        ]
    ):
        history.apply(pos(10 * (i + 1)), DB, sql, next_offset=10 * (i + 1) + 1)
        keys = [c.name for c in history.columns(DB, "t1") or [] if c.is_key]
        assert keys == [[], ["a"], ["id", "a"], []][i], sql


def test_drop_database_and_system_versioning_change_the_layouts_and_reload(tmp_path: Any) -> None:
    """DROP DATABASE forgets its tables (a table of the name created again has its new layout); a system-versioned
    table has its implicit period columns last and row_end in its key, a column added later goes before them, and
    DROP SYSTEM VERSIONING drops them; what the history tells an ALTER's entry is the state before it; a reload from
    the store holds the same."""
    history = SchemaHistory(FileHistoryStore(tmp_path / "history.json"))
    history.bootstrap(pos(4), bootstrap_catalog())
    statements = [
        "CREATE TABLE t2 (id INT PRIMARY KEY, a INT) WITH SYSTEM VERSIONING",
        "ALTER TABLE t2 ADD COLUMN b DATETIME",
        "DROP DATABASE app",
        "CREATE DATABASE app",
        "CREATE TABLE IF NOT EXISTS t1 (id INT PRIMARY KEY, z TEXT)",
        "CREATE TABLE t3 (id INT PRIMARY KEY, a INT)",
        "ALTER TABLE t3 ADD SYSTEM VERSIONING",
    ]
    known = []
    for i, sql in enumerate(statements):
        known.append((history.retyped(DB, sql)[0], history.implicit_columns(DB, sql)))
        history.apply(pos(10 * (i + 1)), DB, sql, next_offset=10 * (i + 1) + 1)
    assert known[1] == ({}, ["row_start", "row_end"])
    columns = [(c.name, c.column_type, c.is_key) for c in history.columns(DB, "t3") or []]
    assert columns == [
        ("id", "int(11)", True),
        ("a", "int(11)", False),
        ("row_start", "timestamp(6)", False),
        ("row_end", "timestamp(6)", True),
    ]
    assert history.table(DB, "t2") is None  # dropped with its database, not created again
    assert [c.name for c in history.columns(DB, "t1") or []] == ["id", "z"]
    assert history.retyped(DB, "ALTER TABLE t3 MODIFY a TIMESTAMP, CHANGE id id BIGINT") == (
        {"a": "int(11)", "id": "int(11)"},
        {"a": "timestamp", "id": "bigint(20)"},
    )
    # text with its charset (the table's where the column declares none), and CONVERT TO's text columns
    added = "ALTER TABLE t3 ADD COLUMN s VARCHAR(5) CHARACTER SET latin1, ADD e ENUM('x')"
    history.apply(pos(90), DB, added, next_offset=91)
    assert history.retyped(DB, "ALTER TABLE t3 MODIFY s VARCHAR(3)") == (
        {"s": "varchar(5) character set latin1"},
        {"s": "varchar(3) character set utf8mb4"},
    )
    assert history.retyped(DB, "ALTER TABLE t3 CONVERT TO CHARACTER SET latin1") == (
        {"s": "varchar(5) character set latin1", "e": "enum('x') character set utf8mb4"},
        {"s": "varchar(5) character set latin1", "e": "enum('x') character set latin1"},
    )
    history.apply(pos(100), DB, "ALTER TABLE t3 DROP SYSTEM VERSIONING", next_offset=101)
    assert [c.name for c in history.columns(DB, "t3") or []] == ["id", "a", "s", "e"]
    reloaded = SchemaHistory(FileHistoryStore(tmp_path / "history.json"))
    assert reloaded.columns(DB, "t3") == history.columns(DB, "t3")
    assert reloaded.at(pos(75)).get(DB, "t3") == history.at(pos(75)).get(DB, "t3")  # versioned then


def test_a_damaged_document_is_a_typed_error(tmp_path: Any) -> None:
    path = tmp_path / "schema.json"
    path.write_text('{"version": 1, "snapshots": [{"position": 3}]}')
    history = SchemaHistory(FileHistoryStore(path))  # read at first use (a ZooKeeper meta starts later)
    with pytest.raises(SchemaError, match="damaged"):
        _ = history.is_empty
    assert path.read_text().startswith('{"version": 1')  # untouched


def test_a_switch_to_another_server_restarts_the_history_at_the_time_of_its_start() -> None:
    """Positions in the standby's binlog do not compare with the master's: the state is the one at the standby
    start's time, and the history goes on in the standby's positions."""
    history = SchemaHistory()
    history.bootstrap(pos(4), bootstrap_catalog(), origin="master:3306")
    history.apply(pos(100), DB, "ALTER TABLE t1 ADD COLUMN b INT", next_offset=101)  # at time +100 ms
    history.apply(pos(300), DB, "ALTER TABLE t1 ADD COLUMN c INT", next_offset=301)  # at time +300 ms
    # the standby starts (by time) between the two: the second ALTER will be read again from it
    standby_start = EntryPosition("standby-bin.000007", 4, 1_700_000_000_000 + 200)
    history.rewind(standby_start, origin="standby:3306")
    assert [c.name for c in history.columns(DB, "t1") or []] == ["id", "a", "b"]
    assert history.origin == "standby:3306" and history.records == 0 and history.position == standby_start
    history.apply(
        EntryPosition("standby-bin.000007", 900, 1_700_000_000_300),
        DB,
        "ALTER TABLE t1 ADD COLUMN c INT",
        next_offset=950,
    )
    assert [c.name for c in history.columns(DB, "t1") or []] == ["id", "a", "b", "c"]
    history.rewind(EntryPosition("standby-bin.000007", 500), origin="standby:3306")  # same server: by position
    assert [c.name for c in history.columns(DB, "t1") or []] == ["id", "a", "b"]


def test_tables_of_one_layout_get_the_same_columns_until_one_changes() -> None:
    """The decoder's columns are made once per layout (a stream over thousands of tables of one definition asks for
    a new table's at every other transaction): tables of one layout get the very same tuple; a table a DDL changed
    gets its own, and the others keep theirs."""
    catalog = SchemaCatalog(charset="utf8mb4", database=DB, mariadb=True)
    for name in ("s1", "s2", "s3"):
        catalog.apply(read_statement(f"CREATE TABLE {name} (id INT PRIMARY KEY, a VARCHAR(5))"), DB)
    history = SchemaHistory(MemoryHistoryStore())
    history.bootstrap(pos(4), catalog)
    s1, s2 = history.columns(DB, "s1"), history.columns(DB, "s2")
    assert s1 is not None and s1 is s2
    assert [(c.name, c.is_key, c.column_type) for c in s1] == [("id", True, "int(11)"), ("a", False, "varchar(5)")]
    history.apply(pos(100), DB, "ALTER TABLE s2 MODIFY a VARCHAR(9)")
    s2 = history.columns(DB, "s2")
    assert s2 is not None and [c.column_type for c in s2] == ["int(11)", "varchar(9)"]
    assert history.columns(DB, "s1") is s1 and history.columns(DB, "s3") is s1
    history.apply(pos(200), DB, "ALTER TABLE s3 MODIFY a VARCHAR(9)")
    assert history.columns(DB, "s3") is s2  # the same layout again: the same columns
