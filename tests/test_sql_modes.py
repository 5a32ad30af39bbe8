"""A statement read under its own sql_mode (canal.sql.modes): the reader, the schema history, the converter's props,
the mirror's reading of a DDL row and the fake server, without a server (tests/test_sql_modes_mariadb.py checks
them against one)."""

from __future__ import annotations

import pytest

from canal.errors import SqlError
from canal.lake.ddl.ddl_text import statement_mode
from canal.lake.ddl.evolution import plan_evolution
from canal.parse.convert import EntryConverter
from canal.parse.events import QueryEvent
from canal.parse.statement_props import SERVER_VERSION_PROP, SQL_MODE_PROP
from canal.position import EntryPosition
from canal.schema import SchemaCatalog
from canal.schema.history import SchemaHistory
from canal.sql import DEFAULT_MODE, AddColumn, AlterTable, DropColumn, SqlMode, Unreadable, read_statement
from canal.sql.lexer import without_strings
from canal.sql.modes import ANSI_QUOTES, EMPTY_STRING_IS_NULL, NO_BACKSLASH_ESCAPES, mode_bits
from canal.testing import FakeMysql

NBE = SqlMode.named("NO_BACKSLASH_ESCAPES")
ANSI = SqlMode.named("ANSI_QUOTES")
PATH = "ALTER TABLE t ADD COLUMN path VARCHAR(40) DEFAULT 'C:\\', DROP COLUMN s"


def test_no_backslash_escapes_ends_a_string_at_its_quote() -> None:
    stmt = read_statement(PATH, mode=NBE)
    assert isinstance(stmt, AlterTable)
    added, dropped = stmt.actions
    assert isinstance(added, AddColumn) and added.column.default is not None
    assert added.column.default.value == "C:\\" and dropped == DropColumn("s")
    # read with escapes, the same text is one string default and no DROP: what the server did not do
    default = read_statement(PATH, strict=False)
    assert isinstance(default, AlterTable) and len(default.actions) == 1
    # doubled quotes still quote; '\\' is two backslashes
    doubled = read_statement("ALTER TABLE t ADD c VARCHAR(9) DEFAULT 'a''\\\\'", mode=NBE)
    assert isinstance(doubled, AlterTable) and isinstance(doubled.actions[0], AddColumn)
    assert doubled.actions[0].column.default is not None and doubled.actions[0].column.default.value == "a'\\\\"


def test_ansi_quotes_make_double_quotes_a_name() -> None:
    stmt = read_statement('ALTER TABLE "t" ADD COLUMN "b\\" INT, ADD COLUMN "q""r" INT DEFAULT "id"', mode=ANSI)
    assert isinstance(stmt, AlterTable) and stmt.table.name == "t"
    first, second = stmt.actions
    assert isinstance(first, AddColumn) and first.column.name == "b\\"  # no escapes in a name
    assert isinstance(second, AddColumn) and second.column.name == 'q"r'
    assert second.column.default is not None and not second.column.default.literal  # column id: computed
    plain = read_statement('ALTER TABLE t ADD COLUMN d INT DEFAULT "5"')
    assert isinstance(plain, AlterTable) and isinstance(plain.actions[0], AddColumn)
    assert plain.actions[0].column.default is not None and plain.actions[0].column.default.value == "5"


def test_empty_string_is_null_and_oracle() -> None:
    esin = SqlMode.of(EMPTY_STRING_IS_NULL)
    stmt = read_statement("ALTER TABLE t ADD a VARCHAR(5) DEFAULT ''", mode=esin)
    assert isinstance(stmt, AlterTable) and isinstance(stmt.actions[0], AddColumn)
    default = stmt.actions[0].column.default
    assert default is not None and default.literal and default.value is None
    # MySQL 8's bit 32 is TIME_TRUNCATE_FRACTIONAL, not EMPTY_STRING_IS_NULL
    assert SqlMode.of(EMPTY_STRING_IS_NULL, mariadb=False) == DEFAULT_MODE
    with pytest.raises(SqlError, match="ORACLE"):
        read_statement("CREATE TABLE t (d DATE)", mode=SqlMode.named("ORACLE"))
    lenient = read_statement("CREATE TABLE t (d DATE)", mode=SqlMode.named("ORACLE"), strict=False)
    assert isinstance(lenient, Unreadable) and lenient.verb == "CREATE TABLE"


def test_set_statement_sql_mode_reads_only_text_alike_under_every_session_mode() -> None:
    alike = read_statement("SET STATEMENT sql_mode='' FOR ALTER TABLE t ADD c VARCHAR(5) DEFAULT 'x'")
    assert isinstance(alike, AlterTable)
    for text in ("DEFAULT 'C:\\\\'", 'DEFAULT "x"', "DEFAULT ''"):
        sql = f"SET STATEMENT sql_mode='' FOR ALTER TABLE t ADD c VARCHAR(5) {text}"
        with pytest.raises(SqlError, match="session"):
            read_statement(sql)
        unreadable = read_statement(sql, strict=False)
        assert isinstance(unreadable, Unreadable) and unreadable.verb == "ALTER TABLE", text
        assert unreadable.table is not None and unreadable.table.name == "t"
    # another setting: the logged mode is the session's
    assert isinstance(read_statement("SET STATEMENT max_statement_time=5 FOR " + PATH, mode=NBE), AlterTable)


def test_mode_bits_are_the_servers() -> None:
    default = "STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_AUTO_CREATE_USER,NO_ENGINE_SUBSTITUTION"
    assert mode_bits(default) == 1411383296  # as MariaDB 10.11 logs its default mode
    assert mode_bits("NO_BACKSLASH_ESCAPES") == NO_BACKSLASH_ESCAPES == 1048576
    assert mode_bits("ANSI_QUOTES,PIPES_AS_CONCAT") == 6 == ANSI_QUOTES | 2
    with pytest.raises(ValueError, match="NOPE"):
        mode_bits("NOPE")
    assert SqlMode.of(mode_bits(default)).reads_as_default and SqlMode.of(None) == DEFAULT_MODE


def test_error_messages_leave_out_what_is_a_string_under_any_mode() -> None:
    # under NO_BACKSLASH_ESCAPES this holds two strings; read with escapes, 'secret' would be shown as a word
    sql = "ALTER TABLE t COMMENT 'x\\' , CONNECTION 'secret'"
    assert "secret" not in without_strings(sql)
    assert without_strings(sql, mode=NBE) == "ALTER TABLE t COMMENT '***' , CONNECTION '***'"


def test_the_history_and_the_mirror_read_each_statement_under_its_mode() -> None:
    history = SchemaHistory()
    history.bootstrap(EntryPosition("mysql-bin.000001", 4), SchemaCatalog())
    history.apply(EntryPosition("mysql-bin.000001", 100), "d", "CREATE TABLE d.t (id INT PRIMARY KEY, s INT)")
    history.apply(EntryPosition("mysql-bin.000001", 200), "d", PATH, sql_mode=NO_BACKSLASH_ESCAPES)
    table = history.table("d", "t")
    assert table is not None and [c.name for c in table.columns] == ["id", "path"]
    reloaded = SchemaHistory(history.store)
    replayed = reloaded.table("d", "t")  # the record keeps its mode: replayed the same
    assert replayed is not None and [c.name for c in replayed.columns] == ["id", "path"]
    props = {SQL_MODE_PROP: str(NO_BACKSLASH_ESCAPES), SERVER_VERSION_PROP: "10.11.6-MariaDB-log"}
    assert statement_mode(props) == NBE and statement_mode({}) == DEFAULT_MODE
    evolution = plan_evolution("d", "t", ["id", "s"], [(7, PATH)], props={7: props})
    assert [name for name, _source, _kind in evolution.columns] == ["id", "path"]
    assert evolution.fills == (("path", "C:\\"),)


def test_a_ddl_entry_carries_the_mode_it_reads_under() -> None:
    converter = EntryConverter()
    converter.reset(EntryPosition("mysql-bin.000001", 4))

    def entry(sql: str, bits: int) -> dict[str, str]:
        event = QueryEvent(
            log_file="mysql-bin.000001", offset=500, next_offset=600, timestamp=1, server_id=1, schema="d", sql=sql,
            sql_mode=bits,
        )  # fmt: skip
        made = converter.convert(event)
        assert made is not None and made.header.table == "t"
        return dict(made.header.props)

    assert entry(PATH, NO_BACKSLASH_ESCAPES)[SQL_MODE_PROP] == str(NO_BACKSLASH_ESCAPES)
    assert entry('CREATE TABLE "t" (id INT)', ANSI_QUOTES)[SQL_MODE_PROP] == str(ANSI_QUOTES)
    assert SQL_MODE_PROP not in entry("CREATE TABLE t (id INT)", 1411383296)  # reads as the default


def test_the_fake_reads_and_logs_the_mode() -> None:
    fake = FakeMysql(name="modes")
    fake.execute("CREATE TABLE d.t (id INT PRIMARY KEY, s INT)", schema="d")
    events = fake.execute(PATH, schema="d", sql_mode="NO_BACKSLASH_ESCAPES")
    (event,) = [e for e in events if isinstance(e, QueryEvent)]
    assert event.sql_mode == NO_BACKSLASH_ESCAPES and event.mode == NBE
    assert fake.table("d.t").names == ("id", "path")
