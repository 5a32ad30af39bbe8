"""The ``messages`` option's canal maker against a simple model of canal's FlatMessage: each message a dict in
canal's field order, its cells as canal text (:attr:`canal.protocol.Column.text`), dumped by ``json``
-- the maker builds the same bytes from per-layout parts. What lands on Kafka is checked with canal's own classes in
tests/test_spark_mq_kafka.py."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from canal.config.mq import MqConfig
from canal.lake.forms.flat_messages import MessageError, MessageMaker
from canal.lake.forms.mq_routing import Routing
from canal.protocol import (
    ABSENT,
    Column,
    ColumnMeta,
    Entry,
    EntryType,
    EventType,
    Header,
    JsonDiff,
    JsonDiffOperation,
    RowChange,
    Rows,
    SqlType,
    TableSchema,
)

_TYPES = (
    ("bigint(20)", SqlType.BIGINT, st.integers(-3, 3)),
    ("varchar(8)", SqlType.VARCHAR, st.sampled_from(["", "a", 'q"\\', "é\n\x01", "\u2028"])),
    # 1 and 1.0 are equal and of other types: an update from one to the other updates the column
    ("double", SqlType.DOUBLE, st.sampled_from([0.5, -0.0, 1e-5, 1.0, 1, 1e22, float("nan")])),
    # the rest of bench_spark's column mix
    ("blob", SqlType.LONGVARBINARY, st.sampled_from([b"", b'\x00\xff"', b"ab"])),
    ("datetime(6)", SqlType.TIMESTAMP, st.sampled_from([dt.datetime(2024, 5, 6, 7, 8, 9, 10), dt.datetime(1, 1, 1)])),
    ("decimal(12,2)", SqlType.DECIMAL, st.sampled_from([Decimal("-1.50"), Decimal("0.00"), Decimal("1E-7")])),
)
_ROUTINGS = (
    MqConfig(topic="t"),
    MqConfig(topic="t", partition=2),
    MqConfig(topic="t", partition_hash="s.tb:$pk$", partitions_num=3),
    MqConfig(topic="t", partition_hash="s.tb:c1", partitions_num=2),
    MqConfig(topic="t", partition_hash="s.tb", partitions_num=4),
)


@st.composite
def tables(draw: Any) -> TableSchema:
    names = draw(
        st.lists(st.text(st.sampled_from('ab"é\\.'), min_size=1, max_size=3), min_size=1, max_size=4, unique=True)
    )
    names = ["c" + str(i) if i < 2 else name for i, name in enumerate(names)]  # c0, c1: named by the routings
    kinds = [draw(st.integers(0, len(_TYPES) - 1)) for _ in names]
    keys = draw(st.sets(st.integers(0, len(names) - 1)))
    columns = tuple(
        ColumnMeta(name, sql_type=_TYPES[k][1], mysql_type=_TYPES[k][0], is_key=i in keys)
        for i, (name, k) in enumerate(zip(names, kinds, strict=True))
    )
    return TableSchema("s", "tb", columns)


def _value(kind: int) -> Any:
    return st.one_of(st.none(), _TYPES[kind][2])


@st.composite
def row_entries(draw: Any, table: TableSchema, offset: int) -> Entry:
    kinds = [next(k for k, t in enumerate(_TYPES) if t[0] == c.mysql_type) for c in table.columns]
    event = draw(st.sampled_from([EventType.INSERT, EventType.UPDATE, EventType.DELETE, EventType.SNAPSHOT]))
    width = len(table.columns)
    absent = draw(st.sets(st.integers(0, width - 1), max_size=width - 1))
    absent_before = draw(st.sets(st.integers(0, width - 1), max_size=width - 1))
    n = draw(st.integers(1, 4))

    def images(lacking: set[int]) -> list[tuple[Any, ...]]:
        return [tuple(ABSENT if i in lacking else draw(_value(kinds[i])) for i in range(width)) for _ in range(n)]

    before = (
        images(absent_before if event is EventType.UPDATE else set())
        if event
        in (
            EventType.UPDATE,
            EventType.DELETE,
        )
        else None
    )
    after = images(absent) if event is not EventType.DELETE else None
    if event is EventType.UPDATE and draw(st.booleans()):
        assert before is not None and after is not None  # some rows the same as before where both carry a column
        after = [
            tuple(ABSENT if i in absent else a[i] if b[i] is ABSENT else b[i] for i in range(width))
            if draw(st.booleans())
            else a
            for b, a in zip(before, after, strict=True)
        ]
    header = Header(
        "mysql-bin.000007",
        offset,
        1,
        1700000000000 + offset,
        "s",
        "tb",
        event,
        100,
        draw(st.sampled_from([None, "0-1-5"])),
    )
    change = RowChange(event, Rows(table, before, after), table=table)
    return Entry(header, EntryType.ROWDATA, change)


def _ddl(offset: int) -> Entry:
    header = Header("mysql-bin.000007", offset, 1, 1700000000000, "s", "tb", EventType.ALTER, 50)
    change = RowChange(EventType.ALTER, is_ddl=True, sql='ALTER TABLE tb ADD x INT -- "é"', ddl_schema="s")
    return Entry(header, EntryType.ROWDATA, change)


def _text(v: Any, column: ColumnMeta) -> str | None:
    """canal's ``Column.getValue()`` of a cell (None: NULL), as the peers' test holds pycanal's equal to canal's."""
    return None if v is None else Column(0, "", 0, column.mysql_type, False, False, False, v, _fsp(column)).text


def _fsp(column: ColumnMeta) -> int:
    digits = column.mysql_type.partition("(")[2].rstrip(")")
    return int(digits) if column.mysql_type.startswith(("datetime", "timestamp", "time")) and digits else 0


def model(entries: list[Entry], config: MqConfig, batch_no: int, first: int) -> list[tuple[int, bytes, bytes]]:
    """(partition, key, value) of each message: the key ``FILE:OFFSET:BATCH:N``, the value a dict in canal's field
    order dumped by json."""
    routing = Routing(config)
    out: list[tuple[int, Header, dict[str, Any]]] = []
    for entry in entries:
        rc, h = entry.row_change, entry.header
        if entry.entry_type is not EntryType.ROWDATA or rc is None:
            continue
        message: dict[str, Any] = {"data": None, "database": h.schema, "es": h.execute_time, "gtid": h.gtid or ""}
        message |= {"id": batch_no, "isDdl": rc.is_ddl, "mysqlType": None, "old": None, "pkNames": None}
        message |= {"sql": rc.sql, "sqlType": None, "table": h.table, "ts": 0, "type": rc.event_type.name}
        if rc.is_ddl:
            message["database"] = h.schema or rc.ddl_schema
            out.append((0 if config.partition_hash else config.partition, h, message))
            continue
        rows = Rows.of(rc.rows)
        table = rows.table
        deleting = rc.event_type is EventType.DELETE
        images = rows.before if deleting else rows.after
        assert images is not None
        absent = set(rows.absent("before" if deleting else "after"))
        present = [i for i in range(len(table.columns)) if i not in absent]
        data = [{table.names[i]: _text(image[i], table.columns[i]) for i in present} for image in images]
        olds: list[Any] = []
        if rc.event_type is EventType.UPDATE:
            assert rows.before is not None and rows.after is not None
            changed: set[int] = set()
            for before, after in zip(rows.before, rows.after, strict=True):
                changed |= {i for i in present if before[i] != after[i] or type(before[i]) is not type(after[i])}
                olds.append(
                    {
                        table.names[i]: _text(before[i], table.columns[i])
                        for i in present
                        if i in changed and before[i] is not ABSENT
                    }
                )
        keys = [table.names[i] for i in present if table.columns[i].is_key]
        message |= {
            "mysqlType": {table.names[i]: table.columns[i].mysql_type for i in present},
            "pkNames": keys or None,
            "sqlType": {table.names[i]: int(table.columns[i].sql_type) for i in present},
            "type": "INSERT" if rc.event_type is EventType.SNAPSHOT else rc.event_type.name,
        }
        if config.partition_hash == "s.tb":  # the table's name: every row to one partition
            parts = [routing.table_partition("tb", 4)] * len(data)
        elif config.partition_hash:
            hashed = [table.names[i] for i in table.key_indexes] if config.partition_hash.endswith("$pk$") else ["c1"]
            parts = [
                routing.row_partition("s", [row.get(c) for c in hashed], config.partitions_num or 1) for row in data
            ]
        else:
            parts = [config.partition] * len(data)
        for partition in sorted(set(parts)):
            picked = [i for i, p in enumerate(parts) if p == partition]
            old = [olds[i] for i in picked] if olds else None
            out.append((partition, h, message | {"data": [data[i] for i in picked], "old": old}))
    return [
        (
            partition,
            f"{h.log_file}:{h.log_offset}:{batch_no}:{first + n}".encode(),
            json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode(),
        )
        for n, (partition, h, message) in enumerate(out)
    ]


@settings(max_examples=150, deadline=None)
@given(st.data(), tables(), st.sampled_from(_ROUTINGS), st.integers(0, 3), st.integers(0, 5))
def test_canal_messages_are_canals_flat_message_as_a_model_dumps_it(
    data: Any, table: TableSchema, config: MqConfig, batch_no: int, first: int
) -> None:
    entries: list[Entry] = []
    for offset in range(4, 4 + 100 * data.draw(st.integers(1, 5)), 100):
        entries.append(_ddl(offset) if data.draw(st.integers(0, 5)) == 0 else data.draw(row_entries(table, offset)))
    made = MessageMaker("canal", Routing(config), "d", now_ms=lambda: 0).make(entries, batch_no, first)
    columns = (made.column(name).to_pylist() for name in ("partition", "key", "value"))
    assert list(zip(*columns, strict=True)) == model(entries, config, batch_no, first)
    assert set(made.column("topic").to_pylist()) <= {"t"}


def _doc_table() -> TableSchema:
    columns = (
        ColumnMeta("id", sql_type=SqlType.BIGINT, mysql_type="bigint(20)", is_key=True),
        ColumnMeta("doc", sql_type=SqlType.LONGVARCHAR, mysql_type="json"),
    )
    return TableSchema("s", "tb", columns)


def _update(table: TableSchema, before: list[Any], after: list[Any], diffs: list[Any] | None) -> Entry:
    header = Header("mysql-bin.000007", 4, 1, 1700000000000, "s", "tb", EventType.UPDATE, 100)
    return Entry(header, EntryType.ROWDATA, RowChange(EventType.UPDATE, Rows(table, before, after, diffs), table=table))


@pytest.mark.parametrize("diffed_first", [True, False])
@pytest.mark.parametrize("form", ["canal", "debezium"])
def test_a_partial_json_update_is_refused_naming_its_column(diffed_first: bool, form: str) -> None:
    """A partial JSON update (MySQL's PARTIAL_JSON under a MINIMAL before image) logs how the statement changed a
    document, not its value, and one event may log one row's document whole and another's as a diff: neither form
    carries a diff, so the maker stops naming the column -- never the document left out of a row that has it, nor
    the absent one written as a value (the first row's columns used to decide every row's)."""
    table = _doc_table()
    diff = {1: (JsonDiff(JsonDiffOperation.REPLACE, "$.a", 2),)}
    rows = [((1, ABSENT), (1, ABSENT), diff), ((2, ABSENT), (2, '{"a": 3}'), None)]
    rows = rows if diffed_first else rows[::-1]
    entry = _update(table, [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])
    maker = MessageMaker(form, Routing(MqConfig(topic="t")), "d", now_ms=lambda: 0)
    with pytest.raises(MessageError, match=r"s\.tb: a partial JSON update.*'doc'"):
        maker.make([entry], 1)
    # the maker keeps nothing of the refused entry: the next batch's messages are whole
    whole = _update(table, [(3, '{"a": 1}')], [(3, '{"a": 2}')], None)
    value = json.loads(maker.make([whole], 2).column("value")[0].as_py())
    if form == "canal":
        assert (value["data"], value["old"]) == ([{"id": "3", "doc": '{"a": 2}'}], [{"doc": '{"a": 1}'}])
    else:
        assert value["after"] == {"id": 3, "doc": '{"a": 2}'}


def test_debezium_refuses_a_partial_row_image_naming_its_columns() -> None:
    """Debezium's envelope holds whole row images (its MySQL connector requires binlog_row_image=FULL): a MINIMAL
    image's absent columns stop the maker, named -- they used to be written as the text "ABSENT"."""
    table = _doc_table()
    entry = _update(table, [(1, ABSENT)], [(ABSENT, '{"a": 2}')], None)
    maker = MessageMaker("debezium", Routing(MqConfig(topic="t")), "d", now_ms=lambda: 0)
    with pytest.raises(MessageError, match=r"s\.tb.*before image.*'doc'.*binlog_row_image=FULL"):
        maker.make([entry], 1)


@pytest.mark.parametrize(
    ("after", "column"),
    [
        ([(1, '{"a": 1}'), (2, ABSENT)], "doc"),  # a whole first image, then one lacking a column
        ([(1, ABSENT), (2, '{"a": 1}')], "doc"),  # a first image lacking a column another carries
        ([(1, '{"a": 1}'), (ABSENT, '{"a": 1}')], "id"),
    ],
)
def test_rows_whose_images_carry_other_columns_are_refused(after: list[Any], column: str) -> None:
    """One rows event's images carry the same columns (its columns-present bitmap), and the maker reads them from
    the first image: rows built otherwise stop it, naming the column -- never one written as the text ABSENT, nor a
    value a row has left out."""
    table = _doc_table()
    header = Header("mysql-bin.000007", 4, 1, 1700000000000, "s", "tb", EventType.INSERT, 100)
    entry = Entry(header, EntryType.ROWDATA, RowChange(EventType.INSERT, Rows(table, None, after), table=table))
    maker = MessageMaker("canal", Routing(MqConfig(topic="t")), "d", now_ms=lambda: 0)
    with pytest.raises(MessageError, match=rf"s\.tb: .*{column!r}"):
        maker.make([entry], 1)
