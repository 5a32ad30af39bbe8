"""The ``messages=debezium`` form's deletes and key changes without services: a tombstone (the delete's key, a null
value) after each delete unless ``tombstones.on.delete=false``, an update that changes a primary key as a delete of
the old key (and its tombstone) and a create of the new one, the option's typed refusals and the reader's state after
them, and a tombstone's null value kept by the spool a replayed micro-batch is read from. The same records against
Debezium's own engine on a real MariaDB: tests/test_peers_debezium_mariadb.py; on a real Kafka broker:
tests/test_spark_mq_kafka.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from canal.config import MqConfig
from canal.lake.forms.flat_messages import MessageMaker
from canal.lake.forms.mq_routing import Routing
from canal.protocol import ColumnMeta, Entry, EntryType, EventType, Header, RowChange, Rows, SqlType, TableSchema

KEYED = TableSchema(
    "s", "t", (ColumnMeta("id", SqlType.INTEGER, "int(11)", is_key=True), ColumnMeta("v", SqlType.VARCHAR, "text"))
)
KEYLESS = TableSchema("s", "n", (ColumnMeta("a", SqlType.INTEGER, "int(11)"), ColumnMeta("v", SqlType.VARCHAR, "text")))


def _entry(kind: EventType, table: TableSchema, before: Any, after: Any, offset: int = 4) -> Entry:
    header = Header("mysql-bin.000003", offset, 1, 1700000000000, table.schema, table.table, kind, 64)
    return Entry(header, EntryType.ROWDATA, RowChange(kind, Rows(table, before, after), table=table))


def _records(entries: list[Entry], *, tombstones: bool = True) -> list[tuple[Any, ...]]:
    """``(key, op or "tombstone", before, after)`` of each message the form makes of ``entries``."""
    maker = MessageMaker("debezium", Routing(MqConfig(topic="t")), "d", now_ms=lambda: 0, tombstones=tombstones)
    made = maker.make(entries, 1)
    out = []
    for key, value in zip(made.column("key").to_pylist(), made.column("value").to_pylist(), strict=True):
        key = None if key is None else json.loads(key)
        if value is None:
            out.append((key, "tombstone", None, None))
        else:
            event = json.loads(value)
            out.append((key, event["op"], event["before"], event["after"]))
    return out


ENTRIES = [
    _entry(EventType.INSERT, KEYED, None, [(1, "a"), (2, "b")]),
    _entry(EventType.UPDATE, KEYED, [(1, "a"), (2, "b")], [(1, "z"), (12, "b")]),  # 2 -> 12; 1 keeps its key
    _entry(EventType.DELETE, KEYED, [(12, "b")], None),
    _entry(EventType.DELETE, KEYLESS, [(5, "x")], None),
    _entry(EventType.UPDATE, KEYLESS, [(6, "y")], [(7, "y")]),  # no key: an update whatever changes
]


def test_deletes_have_tombstones_and_key_changes_are_a_delete_and_a_create() -> None:
    assert _records(ENTRIES) == [
        ({"id": 1}, "c", None, {"id": 1, "v": "a"}),
        ({"id": 2}, "c", None, {"id": 2, "v": "b"}),
        ({"id": 1}, "u", {"id": 1, "v": "a"}, {"id": 1, "v": "z"}),
        ({"id": 2}, "d", {"id": 2, "v": "b"}, None),
        ({"id": 2}, "tombstone", None, None),
        ({"id": 12}, "c", None, {"id": 12, "v": "b"}),
        ({"id": 12}, "d", {"id": 12, "v": "b"}, None),
        ({"id": 12}, "tombstone", None, None),
        (None, "d", {"a": 5, "v": "x"}, None),
        (None, "tombstone", None, None),  # Debezium's engine makes it too (its key null)
        (None, "u", {"a": 6, "v": "y"}, {"a": 7, "v": "y"}),
    ]


def test_tombstones_off_drops_the_tombstones_only() -> None:
    made = _records(ENTRIES, tombstones=False)
    assert made == [record for record in _records(ENTRIES) if record[1] != "tombstone"]
    assert [op for _k, op, _b, _a in made] == ["c", "c", "u", "d", "c", "d", "d", "u"]


def test_the_canal_form_takes_no_tombstones_setting() -> None:
    with pytest.raises(ValueError, match="tombstones"):
        MessageMaker("canal", Routing(MqConfig(topic="t")), "d", tombstones=False)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"messages": "debezium", "tombstones.on.delete": "maybe"}, r"tombstones\.on\.delete = 'maybe': expected true"),
        ({"messages": "canal", "tombstones.on.delete": "true"}, r"tombstones\.on\.delete .*canal's FlatMessages"),
        ({"tombstones.on.delete": "false"}, r"tombstones\.on\.delete .*change rows"),
        ({"images": "packed", "Tombstones.On.Delete": "false"}, r"tombstones\.on\.delete"),
    ],
)
def test_the_tombstones_option_refuses_what_it_cannot_mean(
    options: dict[str, str], message: str, tmp_path: Path
) -> None:
    from canal.spark import CanalStreamReader, SparkSourceError

    base = {"master.address": "fake://tombstones", "destination": "dbz", "spool.dir": str(tmp_path / "spool")}
    with pytest.raises(SparkSourceError, match=message):
        CanalStreamReader({**base, **options})
    assert not (tmp_path / "spool").exists() or not any((tmp_path / "spool").iterdir())
    # nothing kept: the same options with a good value make a reader
    good = {k: v for k, v in options.items() if k.lower() != "tombstones.on.delete"}
    reader = CanalStreamReader({**base, **good})
    assert reader.messages is None or reader.messages.tombstones


@pytest.mark.parametrize(("text", "want"), [(None, True), ("true", True), (" FALSE ", False), ("false", False)])
def test_the_tombstones_option_as_read(text: str | None, want: bool, tmp_path: Path) -> None:
    from canal.spark import CanalStreamReader

    options = {"master.address": "fake://tombstones", "destination": "dbz", "spool.dir": str(tmp_path / "spool")}
    options["messages"] = "debezium"
    if text is not None:
        options["tombstones.on.delete"] = text
    assert CanalStreamReader(options).messages.tombstones is want


def test_a_spooled_tombstone_stays_null(tmp_path: Path) -> None:
    """A micro-batch replayed after a restart is read back from the spool -- whole, or as the inline pieces a task
    gets, or by the task from the spool file -- and its plans made into messages: its tombstones' values are still
    null, not empty bytes."""
    from canal.spark.message_rows import plan_rows, plan_schema, rendered
    from canal.spark.spool import Spool, read_inline, read_spooled

    maker = MessageMaker("debezium", Routing(MqConfig(topic="t")), "d", now_ms=lambda: 0)
    want = maker.make(ENTRIES, 1).column("value").to_pylist()
    assert want.count(None) == 3 and b"" not in want
    plans, _ = plan_rows(maker, ENTRIES, 1, 0)
    spool = Spool(tmp_path / "spool", form=plan_schema())
    start, end = {"batch": 0}, {"batch": 1}
    spool.write(start, end, plans)

    def values(batches: Any) -> list[Any]:
        return [v for b in rendered(batches, maker) for v in b.column("value").to_pylist()]

    read = spool.read(start)
    assert read is not None and values([read[0]]) == want
    pieces = spool.inline(start)
    assert pieces is not None
    assert values(b for piece in pieces for b in read_inline(piece)) == want
    assert values(read_spooled(spool.shared(start))) == want


TYPED = TableSchema(
    "s",
    "k",
    (
        ColumnMeta("d", SqlType.DECIMAL, "decimal(12,8)", is_key=True),
        ColumnMeta("ts", SqlType.TIMESTAMP, "timestamp(3)", is_key=True),
        ColumnMeta("t0", SqlType.TIMESTAMP, "timestamp"),
        ColumnMeta("t6", SqlType.TIMESTAMP, "timestamp(6)"),
        ColumnMeta("b", SqlType.BIT, "bit(12)"),
        ColumnMeta("b1", SqlType.BIT, "bit(1)"),
    ),
)


def test_key_and_value_texts_are_debeziums() -> None:
    """The texts Debezium's engine gives these types (tests/test_peers_debezium_mariadb.py holds them equal on a real
    MariaDB), as keys too: a DECIMAL's plain text, a TIMESTAMP with its column's digits of fraction, a wide BIT's
    bytes least significant first. A key change between two texts of one number is still a key change."""
    import datetime as dt
    from decimal import Decimal

    utc = dt.UTC
    old = (Decimal("0E-8"), dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=utc), dt.datetime(2024, 1, 2, tzinfo=utc))
    row = (*old, dt.datetime(2024, 1, 2, 3, 4, 5, 10, tzinfo=utc), 2049, 1)
    new = (Decimal("1.0E-7"), dt.datetime(2024, 1, 2, 3, 4, 5, 100000, tzinfo=utc), *row[2:])
    made = _records([_entry(EventType.UPDATE, TYPED, [row], [new])])
    assert made[0][0] == {"d": "0.00000000", "ts": "2024-01-02T03:04:05.000Z"}
    assert made[1] == (made[0][0], "tombstone", None, None)
    assert made[2][0] == {"d": "0.00000010", "ts": "2024-01-02T03:04:05.100Z"}
    assert made[0][2] == {
        "d": "0.00000000",
        "ts": "2024-01-02T03:04:05.000Z",
        "t0": "2024-01-02T00:00:00Z",
        "t6": "2024-01-02T03:04:05.000010Z",
        "b": "AQg=",  # 0x801: bytes 01 08
        "b1": True,
    }
