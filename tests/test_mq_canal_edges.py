"""The ``messages`` option's canal form at the edges production meets, against what canal 1.1.7 puts on a topic
(``MQMessageUtils.messageTopics`` / ``messageConverter`` / ``messagePartition``, ``LogEventConvert``): a DDL naming
another database than the session's, XA outcomes, a snapshot's rowless markers, cells whose canal text is not
``render_text``'s (and rows hashed by them), identifiers holding a line break, routing rules canal cannot use (refused
at start, typed), and Debezium's key of a table without a primary key."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest

from canal.config import InstanceConfig, MqConfig
from canal.errors import ConfigError
from canal.lake.forms.flat_messages import MessageMaker
from canal.lake.forms.mq_routing import Routing, java_hash
from canal.protocol import (
    ColumnMeta,
    Entry,
    EntryType,
    EventType,
    Header,
    RowChange,
    RowData,
    Rows,
    SqlType,
    TableSchema,
)


def _messages(config: MqConfig, entries: list[Entry]) -> list[tuple[str, int, dict[str, Any]]]:
    made = MessageMaker("canal", Routing(config), "d", now_ms=lambda: 0).make(entries, 1)
    return [
        (topic, partition, json.loads(value))
        for topic, partition, value in zip(
            made.column("topic").to_pylist(),
            made.column("partition").to_pylist(),
            made.column("value").to_pylist(),
            strict=True,
        )
    ]


def _statement(event: EventType, schema: str, table: str, session: str, sql: str) -> Entry:
    header = Header("mysql-bin.000003", 400, 1, 1700000000000, schema, table, event, 80)
    return Entry(header, EntryType.ROWDATA, RowChange(event, is_ddl=True, sql=sql, ddl_schema=session))


def test_a_ddl_is_routed_and_named_by_the_database_it_changes_not_the_sessions() -> None:
    """canal's FlatMessage of a DDL names the database of the header (the statement's table's, the session's only
    when the statement names none), and routes it by that: ``USE app; ALTER TABLE audit.log ...`` is audit's. The
    session's database is the RowChange's ``ddlSchemaName``, which the FlatMessage does not carry."""
    config = MqConfig(topic="rest", dynamic_topic="app_topic:app,audit_topic:audit")
    entry = _statement(EventType.ALTER, "audit", "log", "app", "ALTER TABLE audit.log ADD c INT")
    [(topic, partition, message)] = _messages(config, [entry])
    assert (topic, partition) == ("audit_topic", 0)
    assert (message["database"], message["table"], message["isDdl"], message["type"]) == ("audit", "log", True, "ALTER")


@pytest.mark.parametrize("event", [EventType.XACOMMIT, EventType.XAROLLBACK])
def test_an_xa_outcome_is_not_a_ddl_message(event: EventType) -> None:
    """canal makes ``XA COMMIT`` / ``XA ROLLBACK`` a ROWDATA entry of no database or table, not a DDL: its
    FlatMessage has ``isDdl`` false and database "" (to the default topic, partition 0). pycanal's entry is flagged
    DDL (a boundary a cursor can name): written as such, canal-adapter's mirror-database sync would run
    ``XA COMMIT 'x'`` on its target as the database's DDL."""
    sql = f"XA {'COMMIT' if event is EventType.XACOMMIT else 'ROLLBACK'} 'x1'"
    config = MqConfig(topic="rest", dynamic_topic="app", partition_hash="app\\..*", partitions_num=3)
    [(topic, partition, message)] = _messages(config, [_statement(event, "app", "", "app", sql)])
    assert (topic, partition) == ("rest", 0)
    assert (message["database"], message["table"], message["isDdl"]) == ("", "", False)
    assert (message["type"], message["sql"], message["data"]) == (event.name, sql, None)


def _snapshot_table() -> TableSchema:
    return TableSchema("s", "tb", (ColumnMeta("id", SqlType.INTEGER, "int(11)", is_key=True),))


def test_a_snapshots_rowless_marker_makes_no_message() -> None:
    """A snapshot marks a table's end with an entry of no rows: canal has no such entry, and a message of type
    SNAPSHOT is one no consumer of canal's knows (Flink's canal-json stops at an unknown type). Its rows are INSERT
    messages."""
    table = _snapshot_table()
    header = Header("mysql-bin.000003", 4, 1, 1700000000000, "s", "tb", EventType.SNAPSHOT, 64)
    marker = Entry(header, EntryType.ROWDATA, RowChange(EventType.SNAPSHOT, Rows(table, None, []), table=table))
    rows = Entry(header, EntryType.ROWDATA, RowChange(EventType.SNAPSHOT, Rows(table, None, [(1,)]), table=table))
    made = _messages(MqConfig(topic="t"), [rows, marker])
    assert [(m["type"], m["data"]) for _, _, m in made] == [("INSERT", [{"id": "1"}])]


def _partition_as_canal(database: str, row: dict[str, str | None], names: list[str], n: int) -> int:
    """canal's ``messagePartition`` of one FlatMessage row: its database's and its columns' texts' hashes XORed."""
    h = java_hash(database)
    for name in names:
        h ^= java_hash(row.get(name) or "")
    return abs(h) % n  # Math.abs(Math.abs(h) % n): Integer.MIN_VALUE's remainder is negative, then made positive


def test_rows_are_hashed_by_the_text_their_message_carries() -> None:
    """canal hashes a row's ``data`` texts: a TIME(3) column's ``12:00:00.500``, a SET's labels in definition
    order. The partition is the one a consumer recomputes from the message (rows of one key in one partition,
    co-partitioned topics), never that of another spelling of the value."""
    columns = (
        ColumnMeta("t", SqlType.TIME, "time(3)", is_key=True, fsp=3),
        ColumnMeta("s", SqlType.CHAR, "set('b','a','c')", is_key=True, labels=("b", "a", "c")),
    )
    table = TableSchema("s", "tb", columns)
    images = [
        (dt.timedelta(hours=h, microseconds=500_000 * (h % 2)), frozenset(labels))
        for h in range(12)
        for labels in (("a", "b"), ("c", "a"), ("b",))
    ]
    header = Header("mysql-bin.000003", 4, 1, 1700000000000, "s", "tb", EventType.INSERT, 64)
    entry = Entry(header, EntryType.ROWDATA, RowChange(EventType.INSERT, Rows(table, None, images), table=table))
    for rule in ("s.tb:$pk$", "s.tb:t^s"):
        made = _messages(MqConfig(topic="t", partition_hash=rule, partitions_num=5), [entry])
        rows = [(partition, row) for _, partition, message in made for row in message["data"]]
        assert len(rows) == len(images)
        assert {row["s"] for _, row in rows} == {"b,a", "a,c", "b"}  # the server's order, as the data says
        assert [p for p, _ in rows] == [_partition_as_canal("s", row, ["t", "s"], 5) for _, row in rows]
        assert len({p for p, _ in rows}) > 1


def test_patterns_match_names_holding_a_line_break_as_canals_do() -> None:
    """canal compiles routing patterns with ORO's SINGLELINE_MASK: ``.`` matches a line break too, which a quoted
    MySQL identifier may hold."""
    routing = Routing(MqConfig(topic="rest", dynamic_topic="t:app\\..*", partition_hash="app\\.a.b:id"))
    assert routing.topic("app", "a\nb") == "t"
    mode = routing.hash_mode("app", "a\nb")
    assert mode is not None and mode.columns == ("id",)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("canal.mq.dynamicTopic", "t:app\\.(orders", "canal.mq.dynamicTopic"),
        ("canal.mq.dynamicTopic", "app\\.[x", "canal.mq.dynamicTopic"),
        ("canal.mq.partitionHash", "app\\.(x:id", "canal.mq.partitionHash"),
        ("canal.mq.dynamicTopicPartitionNum", "t(:4", "canal.mq.dynamicTopicPartitionNum"),
        ("canal.mq.dynamicTopicPartitionNum", "orders:0", "canal.mq.dynamicTopicPartitionNum"),
        ("canal.mq.dynamicTopicPartitionNum", "orders:-2", "canal.mq.dynamicTopicPartitionNum"),
        ("canal.mq.dynamicTopicPartitionNum", "orders:x", "canal.mq.dynamicTopicPartitionNum"),
        ("canal.mq.dynamicTopicPartitionNum", "orders:\u00b2", "canal.mq.dynamicTopicPartitionNum"),
        ("canal.mq.dynamicTopicPartitionNum", "orders:99999999999", "canal.mq.dynamicTopicPartitionNum"),
    ],
)
def test_a_routing_rule_canal_cannot_use_is_refused_at_start(key: str, value: str, message: str) -> None:
    """canal compiles its rules at the first message and stops there for ever (a bad pattern, a count of 0: an
    exception, the batch rolled back and sent again); a count that is not a number it drops silently, taking
    ``canal.mq.partitionsNum``. pycanal refuses each when it reads the config, naming the key and the rule --
    before a message is made, not at the first row of the table mid-stream."""
    text = f"canal.instance.master.address=fake://mq\ncanal.mq.topic=t\n{key}={value}\n"
    with pytest.raises(ConfigError, match=message):
        InstanceConfig.from_properties(text, destination="mq")
    with pytest.raises(ConfigError):
        MqConfig(
            **{
                {
                    "canal.mq.dynamicTopic": "dynamic_topic",
                    "canal.mq.partitionHash": "partition_hash",
                    "canal.mq.dynamicTopicPartitionNum": "dynamic_topic_partition_num",
                }[key]: value
            }
        )


def test_a_debezium_envelope_of_a_table_without_a_primary_key_has_a_null_key() -> None:
    """Debezium keys a change event by the row's primary key, and a table without one by null (Kafka's partitioner
    then spreads them): never the empty object ``{}``, which keys every row of the table alike."""
    table = TableSchema("s", "log", (ColumnMeta("msg", SqlType.VARCHAR, "varchar(8)"),))
    header = Header("mysql-bin.000003", 4, 1, 1700000000000, "s", "log", EventType.INSERT, 64)
    entry = Entry(header, EntryType.ROWDATA, RowChange(EventType.INSERT, Rows(table, None, [("a",)]), table=table))
    made = MessageMaker("debezium", Routing(MqConfig(topic="t")), "d", now_ms=lambda: 0).make([entry], 1)
    assert made.column("key").to_pylist() == [None]
    assert json.loads(made.column("value")[0].as_py())["after"] == {"msg": "a"}


def test_a_flat_messages_data_is_canals_column_text() -> None:
    """canal's FlatMessage ``data`` holds each column's ``Column.getValue()``: a DATETIME(3)'s fraction with three
    digits, a DATETIME(6)'s zero fraction as ``.000000``, a YEAR 0 as ``0000`` -- :attr:`canal.protocol.Column.text`,
    which tests/test_peers_canal_mariadb.py holds equal to canal's. Rows hashed by such a column go where canal's do."""
    columns = (
        ColumnMeta("id", SqlType.INTEGER, "int(11)", is_key=True),
        ColumnMeta("d0", SqlType.TIMESTAMP, "datetime"),
        ColumnMeta("d2", SqlType.TIMESTAMP, "datetime(2)", fsp=2),
        ColumnMeta("d3", SqlType.TIMESTAMP, "datetime(3)", fsp=3),
        ColumnMeta("d6", SqlType.TIMESTAMP, "datetime(6)", fsp=6),
        ColumnMeta("ts3", SqlType.TIMESTAMP, "timestamp(3)", fsp=3),
        ColumnMeta("t2", SqlType.TIME, "time(2)", fsp=2),
        ColumnMeta("y", SqlType.DATE, "year(4)"),
    )
    table = TableSchema("s", "tb", columns)
    half = dt.datetime(2024, 2, 29, 23, 59, 58, 500_000)
    whole = dt.datetime(1000, 1, 1)
    images = [
        (1, whole, half, half, half, half.replace(tzinfo=dt.UTC), dt.timedelta(seconds=-1.5), 0),
        (2, half.replace(microsecond=0), whole, whole, whole, whole, dt.timedelta(hours=838), 2155),
        (3, None, None, None, None, None, None, None),
    ]
    header = Header("mysql-bin.000003", 4, 1, 1700000000000, "s", "tb", EventType.INSERT, 64)
    entry = Entry(header, EntryType.ROWDATA, RowChange(EventType.INSERT, Rows(table, None, images), table=table))
    want = [
        {c.name: None if c.is_null else c.text for c in RowData(table, None, image).after_columns} for image in images
    ]
    [(_, _, message)] = _messages(MqConfig(topic="t"), [entry])
    assert message["data"] == want
    assert want[0]["d3"] == "2024-02-29 23:59:58.500" and want[1]["d6"] == "1000-01-01 00:00:00.000000"
    made = _messages(MqConfig(topic="t", partition_hash="s.tb:d3^y", partitions_num=7), [entry])
    assert [(p, row) for _, p, m in made for row in m["data"]] == sorted(
        ((_partition_as_canal("s", row, ["d3", "y"], 7), row) for row in want), key=lambda pair: pair[0]
    )
