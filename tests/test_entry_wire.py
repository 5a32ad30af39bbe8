"""The ``messages`` option's plans (canal.spark.message_rows) and the bytes they travel as
(canal.lake.forms.entry_wire), without services: plans cut by bytes number their messages as one plan does, a plan
made again makes the same bytes (its clock included), a spool file of messages an older pycanal wrote passes as it
is, and the unpickler builds the entry classes only -- a pickle naming anything else is refused before it runs. Rows
decoded column by column from a real MariaDB through the same bytes: tests/test_columnar_rows_mariadb.py; random rows
events: tests/test_message_columns.py; on Spark and a real Kafka broker: tests/test_spark_mq_kafka.py."""

from __future__ import annotations

import itertools
import os
import pickle
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyarrow")

from canal.config import MqConfig
from canal.lake.forms import entry_wire
from canal.lake.forms.entry_wire import EntryWireError
from canal.lake.forms.flat_messages import MessageMaker
from canal.lake.forms.mq_routing import Routing
from canal.protocol import ColumnMeta, Entry, EntryType, EventType, Header, RowChange, Rows, SqlType, TableSchema
from canal.spark import message_rows
from canal.spark.message_rows import plan_rows, plan_schema, rendered

TABLE = TableSchema(
    "s", "t", (ColumnMeta("id", SqlType.INTEGER, "int(11)", is_key=True), ColumnMeta("v", SqlType.VARCHAR, "text"))
)


def _entries(count: int) -> list[Entry]:
    """``count`` rows entries of three rows each, every one 100 bytes of binlog, with transaction ends between."""
    out = []
    for n in range(count):
        kind = (EventType.INSERT, EventType.UPDATE, EventType.DELETE)[n % 3]
        rows = [(3 * n + i, f"v{n}-{i}") for i in range(3)]
        header = Header("mysql-bin.000002", 4 + 200 * n, 1, 1_700_000_000_000 + n, "s", "t", kind, 100)
        before = rows if kind is not EventType.INSERT else None
        after = rows if kind is not EventType.DELETE else None
        out.append(Entry(header, EntryType.ROWDATA, RowChange(kind, Rows(TABLE, before, after), table=TABLE)))
        end = Header("mysql-bin.000002", 104 + 200 * n, 1, 1_700_000_000_000 + n, event_type=EventType.QUERY)
        out.append(Entry(end, EntryType.TRANSACTIONEND, xid=n))
    return out


def _pairs(batches: Any) -> list[tuple[Any, ...]]:
    return [
        row
        for b in batches
        for row in zip(*(b.column(c).to_pylist() for c in ("topic", "partition", "key", "value")), strict=True)
    ]


@pytest.mark.parametrize(
    ("form", "mq"),
    [
        ("canal", MqConfig(topic="t")),
        ("canal", MqConfig(topic="t", partition_hash="s.t:$pk$", partitions_num=3)),
        ("debezium", MqConfig(topic="t")),
    ],
)
def test_plans_cut_by_bytes_number_their_messages_as_one_plan(
    form: str, mq: MqConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An instance batch of large rows is planned in several plans (each a task's input and one pickle); their
    messages, keys and ordinals included, are those one plan makes, and the ordinal after them the next one's."""
    entries = _entries(7)
    maker = MessageMaker(form, Routing(mq), "d", now_ms=lambda: 5)
    whole = maker.make(entries, 3, 11)
    monkeypatch.setattr(message_rows, "PLAN_BYTES", 250)  # two rows entries (and their ends) a plan
    plans, after = plan_rows(maker, entries, 3, 11)
    assert plans.schema == plan_schema() and plans.num_rows == 4
    assert _pairs(rendered([plans], maker)) == _pairs([whole])
    if form == "canal":
        assert after == 11 + whole.num_rows
        assert [k.decode().rsplit(":", 1)[1] for k in whole.column("key").to_pylist()] == [
            str(n) for n in range(11, after)
        ]
    else:  # Debezium's keys are the rows': the count is the rows'
        assert after == 11 + 3 * 7


def test_a_plan_made_again_makes_the_same_bytes() -> None:
    """A replayed micro-batch renders its spooled plans again: the same messages byte for byte, ``ts`` included (the
    clock is read once, planning), however late the task runs."""
    clock = itertools.count(1_700_000_000_000, 1000)
    for form in ("canal", "debezium"):
        maker = MessageMaker(form, Routing(MqConfig(topic="t")), "d", now_ms=lambda: next(clock))
        plans, _ = plan_rows(maker, _entries(4), 1, 0)
        first = _pairs(rendered([plans], maker))
        assert _pairs(rendered([plans], maker)) == first
        stamps = {b'"ts":' in value for *_, value in first if value is not None}
        assert stamps == {form == "canal"}


def test_a_spool_of_messages_an_older_pycanal_wrote_passes_as_it_is(tmp_path: Path) -> None:
    """A query upgraded across this change replays its last micro-batch from a spool file of messages: the spool
    reads it under the plans' form, and the messages pass unchanged."""
    from canal.lake.forms.flat_messages import message_schema
    from canal.spark.spool import Spool

    maker = MessageMaker("canal", Routing(MqConfig(topic="t")), "d", now_ms=lambda: 5)
    messages = maker.make(_entries(3), 1)
    Spool(tmp_path, form=message_schema()).write({"batch": 0}, {"batch": 1}, messages)
    read = Spool(tmp_path, form=plan_schema()).read({"batch": 0})
    assert read is not None
    assert _pairs(rendered([read[0]], maker)) == _pairs([messages])


class _Mkdir:
    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.mkdir, (str(self.path),))


def test_bytes_not_a_plan_are_refused_before_anything_runs(tmp_path: Path) -> None:
    """A spool file is data: a pickle naming a global beyond the entry classes and cells' value types is refused
    (what it names said), not run; bytes cut short or of no pickle are the same typed error."""
    target = tmp_path / "made"
    for blob, named in (
        (pickle.dumps(_Mkdir(target)), f"{os.mkdir.__module__}.mkdir"),
        (pickle.dumps(eval), "builtins.eval"),
        (pickle.dumps([Path("x")]), "pathlib."),
    ):
        with pytest.raises(EntryWireError, match=rf"not a message plan: it names {named}"):
            entry_wire.loads(blob)
    assert not target.exists()
    good = entry_wire.dumps(MessageMaker("canal", Routing(MqConfig()), "d").plan(_entries(2), 1))
    for blob in (good[: len(good) // 2], b"not a pickle", b""):
        with pytest.raises(EntryWireError, match="not a message plan: "):
            entry_wire.loads(blob)
    assert entry_wire.loads(good).count == 2  # the whole bytes still read
    import pyarrow as pa

    maker = MessageMaker("canal", Routing(MqConfig()), "d")
    for value in ([1, 2], {"entries": ()}, None):  # plain values need no global: the unpickler builds them
        plans = pa.RecordBatch.from_arrays([pa.array([pickle.dumps(value)], pa.binary())], schema=plan_schema())
        with pytest.raises(EntryWireError, match=f"not a message plan: a {type(value).__name__}"):
            list(rendered([plans], maker))


def test_plans_of_one_layout_share_its_encoders_where_they_are_rendered() -> None:
    """A Python worker renders plan after plan, each unpickled afresh: the encoders made once per table layout and
    kept by identity (canal's column texts, pkNames and types) are made once for all its plans -- with a new table
    object a plan, a 1,000-column table's were compiled again for each (50 ms a plan) and kept, up to 4,096 copies
    (3 GB)."""
    from canal.lake.forms.message_columns import column_texts_of
    from canal.protocol import ColumnarRows, ColumnForm

    columns = tuple(ColumnMeta(f"c{i}", SqlType.VARCHAR, "varchar(9)") for i in range(40))
    wide = TableSchema("s", "wide", (ColumnMeta("id", SqlType.INTEGER, "int(11)", is_key=True), *columns))
    forms = (ColumnForm("value"),) * len(wide.columns)
    cells = ((1, 2), *((f"a{i}", None) for i in range(40)))
    header = Header("mysql-bin.000002", 4, 1, 1, "s", "wide", EventType.INSERT, 100)
    rows = ColumnarRows(wide, None, cells, forms, 2)
    entry = Entry(header, EntryType.ROWDATA, RowChange(EventType.INSERT, rows, table=wide))
    maker = MessageMaker("canal", Routing(MqConfig(topic="t")), "d", now_ms=lambda: 5)
    blobs = [entry_wire.dumps(maker.plan([entry], n)) for n in range(6)]
    made = len(column_texts_of._made)
    plans = [entry_wire.loads(blob) for blob in blobs]
    rendered_values = [maker.render(plan).column("value").to_pylist() for plan in plans]
    assert len({value for values in rendered_values for value in values}) == 6  # each plan its id
    assert len({id(plan.entries[0].row_change.table) for plan in plans}) == 1
    assert len(column_texts_of._made) - made <= 1


def test_a_snapshots_rows_are_planned_by_what_they_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    """A snapshot's entries have no binlog event (their length is 64 bytes a row): planned by it, a micro-batch of
    snapshot rows of 20 KB was one plan of any size -- 50,000 rows (max.entries), 1 GB: a task over Spark's limit,
    its inline partition not cut. They weigh their values, and their messages are one plan's."""
    big = "x" * 2000
    entries = []
    for n in range(10):
        header = Header("mysql-bin.000002", 4, 1, 1, "s", "t", EventType.SNAPSHOT, 64 * 5)
        rows = Rows(TABLE, None, [(5 * n + i, big) for i in range(5)])
        entries.append(Entry(header, EntryType.ROWDATA, RowChange(EventType.SNAPSHOT, rows, table=TABLE)))
    monkeypatch.setattr(message_rows, "PLAN_BYTES", 25_000)  # two entries of 10 KB a plan
    for form in ("canal", "debezium"):
        maker = MessageMaker(form, Routing(MqConfig(topic="t")), "d", now_ms=lambda: 5)
        plans, _ = plan_rows(maker, entries, 1, 0)
        assert plans.num_rows == 5
        assert max(len(blob) for blob in plans.column(0).to_pylist()) < 25_000
        assert _pairs(rendered([plans], maker)) == _pairs([maker.make(entries, 1)])


def test_a_plan_replayed_under_other_options_is_made_as_it_was_planned() -> None:
    """A query restarted from its checkpoint with other options (a topic, canal.mq.partitionHash, the form,
    Debezium's tombstones) replays its last micro-batch from the spool: its messages are those the first run made, where
    it sent them -- rendered with the new options, they went to the new topic at the old hash's partitions, and a
    canal plan rendered as Debezium's failed an assertion in the task."""
    entries = _entries(3)
    ddl = Header("mysql-bin.000002", 9000, 1, 1, "s", "t", EventType.ALTER, 50)
    entries.append(Entry(ddl, EntryType.ROWDATA, RowChange(EventType.ALTER, (), True, "ALTER TABLE t ADD c INT", "s")))
    hashed = MqConfig(topic="a", partition=1, partition_hash="s.t:$pk$", partitions_num=3)
    makers = [
        MessageMaker("canal", Routing(hashed), "d", now_ms=lambda: 5),
        MessageMaker("canal", Routing(MqConfig(topic="b", partition=2)), "d", now_ms=lambda: 6),
        MessageMaker("debezium", Routing(MqConfig(topic="c")), "d", now_ms=lambda: 7),
        MessageMaker("debezium", Routing(MqConfig(topic="e")), "e", now_ms=lambda: 8, tombstones=False),
    ]
    for planned in makers:
        plans, _ = plan_rows(planned, entries, 1, 0)
        made = _pairs([planned.make(entries, 1)])
        for replaying in makers:
            assert _pairs(rendered([plans], replaying)) == made


def test_entries_holding_more_than_their_length_are_planned_in_halves(monkeypatch: pytest.MonkeyPatch) -> None:
    """Events the server compressed (MariaDB's log_bin_compress: 300 rows of 220 KB text in 121 KB of binlog) hold
    more than their length says: a plan whose bytes pass PLAN_INFLATION x PLAN_BYTES is planned again in halves (it was
    one plan of 64 MB), its messages and ordinals those of one plan."""
    entries = []
    for n in range(16):
        header = Header("mysql-bin.000002", 4 + 100 * n, 1, 1, "s", "t", EventType.INSERT, 100)
        rows = Rows(TABLE, None, [(n, "x" * 5000)])
        entries.append(Entry(header, EntryType.ROWDATA, RowChange(EventType.INSERT, rows, table=TABLE)))
    monkeypatch.setattr(message_rows, "PLAN_BYTES", 5_000)  # every entry in one group; a plan up to 20 KB
    for form in ("canal", "debezium"):
        maker = MessageMaker(form, Routing(MqConfig(topic="t")), "d", now_ms=lambda: 5)
        plans, after = plan_rows(maker, entries, 1, 7)
        assert plans.num_rows == 8 and max(len(b) for b in plans.column(0).to_pylist()) < 20_000
        assert _pairs(rendered([plans], maker)) == _pairs([maker.make(entries, 1, 7)])
        assert after == 7 + 16
