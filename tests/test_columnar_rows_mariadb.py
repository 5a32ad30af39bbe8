"""Rows decoded column by column from a real MariaDB's binlog, against the object decoder's reading of the same binlog.

Random rows of every column form the columnar decoder keeps raw -- utf8mb4 text (emoji among it), latin1 text (with
the characters cp1252 adds), DATETIME of each precision (zero and invalid dates among them: ``ALLOW_INVALID_DATES``),
DECIMALs up to 18 digits and beyond -- and of the forms it leaves to the object decoder are inserted, updated (the
key moved too) and deleted. Two instances read the binlog: one decoding column by column
(:meth:`Instance.decode_rows_by_column`), one not. Their entries hold the same images, and the typed batches built of
them are equal, value for value and error for error, in both zero-date modes; so are their canal FlatMessages
(:mod:`canal.lake.forms.message_columns`), and so are both forms' messages of the columns sent as a Spark task gets
them (:mod:`canal.lake.forms.entry_wire`).
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("pyarrow")

from canal.config import InstanceConfig, StoreConfig
from canal.config.mq import MqConfig
from canal.instance import Instance
from canal.lake.forms import entry_wire
from canal.lake.forms.flat_messages import MessageMaker
from canal.lake.forms.mq_routing import Routing
from canal.lake.forms.typed_batch import entries_to_typed
from canal.lake.forms.typed_layout import TypedChangeError
from canal.parse.mysql import binlog
from canal.position import journal_number
from canal.protocol import ColumnarRows, Entry, EntryType
from canal.spark.testing import master_position

pytestmark = pytest.mark.integration

DDL = """CREATE TABLE t (
  id BIGINT PRIMARY KEY,
  i INT,
  d DOUBLE,
  v8 VARCHAR(40) CHARACTER SET utf8mb4,
  v1 VARCHAR(300) CHARACTER SET latin1,
  t8 TEXT CHARACTER SET utf8mb4,
  t1 TEXT CHARACTER SET latin1,
  b BLOB,
  j JSON,
  dt0 DATETIME,
  dt3 DATETIME(3),
  dt6 DATETIME(6),
  m1 DECIMAL(12,2),
  m2 DECIMAL(18,9),
  m3 DECIMAL(10,10),
  m4 DECIMAL(30,5),
  e ENUM('new','paid','shipped') CHARACTER SET latin1,
  c CHAR(5) CHARACTER SET latin1
)"""
COLUMNS = ("i", "d", "v8", "v1", "t8", "t1", "b", "j", "dt0", "dt3", "dt6", "m1", "m2", "m3", "m4", "e", "c")

_UTF8 = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_LATIN1 = st.text(st.characters(codec="cp1252"), max_size=12)
_DATE = st.one_of(
    st.datetimes(min_value=dt.datetime(1000, 1, 1)).map(str),
    st.sampled_from(["0000-00-00 00:00:00", "2021-00-15 10:00:00", "2021-02-30 23:59:59.5", "2020-04-31 00:00:00"]),
)


def _decimal(precision: int, scale: int) -> st.SearchStrategy[Decimal]:
    bound = Decimal(10) ** (precision - scale) - Decimal(1).scaleb(-scale)
    return st.decimals(-bound, bound, places=scale, allow_nan=False, allow_infinity=False)


_CELLS: dict[str, st.SearchStrategy[Any]] = {
    "i": st.integers(-(2**31), 2**31 - 1),
    "d": st.floats(allow_nan=False, allow_infinity=False, width=64),
    "v8": _UTF8,
    "v1": _LATIN1,
    "t8": _UTF8,
    "t1": _LATIN1,
    "b": st.binary(max_size=12),
    "j": st.sampled_from(['{"a": 1}', "[1, 2.5, null]", '"\\u00e9t\\u00e9 \\ud83d\\ude00"', "{}"]),
    "dt0": _DATE,
    "dt3": _DATE,
    "dt6": _DATE,
    "m1": _decimal(12, 2),
    "m2": _decimal(18, 9),
    "m3": _decimal(10, 10),
    "m4": _decimal(30, 5),
    "e": st.sampled_from(["new", "paid", "shipped"]),
    "c": st.text(st.characters(codec="ascii", exclude_characters=" "), max_size=5),
}
_ROW = st.fixed_dictionaries({name: st.none() | cell for name, cell in _CELLS.items()})
_IDS = itertools.count(1)


def _entries(mariadb: Any, start: tuple[str, int], end: tuple[str, int], columnar: bool, meta: Path) -> list[Entry]:
    config = InstanceConfig(
        destination=f"columnar{int(columnar)}",
        master=mariadb.master(start),
        filter_regex=rf"{mariadb.database}\..*",
        store=StoreConfig(batch_mode="ITEMSIZE"),
        meta_mode="file",
        meta_dir=str(meta / str(columnar)),
    )
    stop = (journal_number(end[0]), end[1])
    out: list[Entry] = []
    inst = Instance(config)
    inst.decode_rows_by_column(columnar)  # before the parser starts: every rows event is read in this form
    with inst:
        while not out or (journal_number(out[-1].header.log_file), out[-1].header.next_offset) < stop:
            out.extend(inst.get(1000, timeout=0.1).entries)
    return out


def _outcome(entries: list[Entry], zero_dates: Any, keys_only: bool, collect: bool) -> Any:
    try:
        typed = entries_to_typed(
            entries, "d", 1, zero_dates=zero_dates, before_keys_only=keys_only, collect_errors=collect
        )
    except TypedChangeError as exc:
        return str(exc)
    return typed.changes, typed.images, typed.errors


@pytest.fixture
def table(mariadb: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    mariadb.execute(DDL)
    # a table of wide rows is decoded as tuples unless told otherwise (binlog.COLUMNAR_MIN_ROWS): these tests compare
    # the two decoders, so every table is decoded column by column when columns are asked
    monkeypatch.setattr(binlog, "COLUMNAR_MIN_ROWS", 0)
    yield mariadb


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=st.lists(_ROW, min_size=1, max_size=12), data=st.data())
def test_columns_read_from_mariadb_give_the_object_decoders_rows(
    table: Any, tmp_path: Path, rows: list[dict[str, Any]], data: st.DataObject
) -> None:
    conn = table.connect()
    with conn.cursor() as cur:
        cur.execute("SET SESSION sql_mode = 'ALLOW_INVALID_DATES'")
    start = master_position(conn)
    ids = [next(_IDS) for _ in rows]
    marks = ", ".join(["%s"] * (len(COLUMNS) + 1))
    with conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO t (id, {', '.join(COLUMNS)}) VALUES ({marks})",
            [(key, *(row[name] for name in COLUMNS)) for key, row in zip(ids, rows, strict=True)],
        )
        for key in data.draw(st.lists(st.sampled_from(ids), max_size=4, unique=True), label="updated"):
            row = data.draw(_ROW, label="new values")
            moved = next(_IDS) if data.draw(st.booleans(), label="key moved") else key
            sets = ", ".join(f"{name} = %s" for name in COLUMNS)
            cur.execute(f"UPDATE t SET id = %s, {sets} WHERE id = %s", (moved, *(row[n] for n in COLUMNS), key))
        cur.execute("DELETE FROM t WHERE id % 3 = 0")
    end = master_position(conn)
    conn.close()

    by_column = _entries(table, start, end, True, tmp_path)
    by_object = _entries(table, start, end, False, tmp_path)
    rows_of = [e for e in by_column if e.entry_type is EntryType.ROWDATA and e.row_change is not None]
    assert rows_of and all(isinstance(e.row_change.rows, ColumnarRows) for e in rows_of if e.row_change)
    zero_dates = data.draw(st.sampled_from(["error", "null"]), label="zero_dates")
    keys_only, collect = data.draw(st.booleans(), label="keys_only"), data.draw(st.booleans(), label="collect")
    # the typed batch of fresh columns (before their tuples are made below), then the tuples
    got = _outcome(by_column, zero_dates, keys_only, collect)
    expected = _outcome(by_object, zero_dates, keys_only, collect)
    if isinstance(expected, str):
        assert got == expected
    else:
        assert not isinstance(got, str), got
        assert got[0].equals(expected[0])
        assert got[1].keys() == expected[1].keys()
        assert all(got[1][key].equals(images) for key, images in expected[1].items())
        assert got[2] == expected[2]
    # canal's FlatMessages of the columns (canal.lake.forms.message_columns), before their tuples are made below
    maker = MessageMaker("canal", Routing(MqConfig(topic="t")), "d", now_ms=lambda: 1)
    assert maker.make(by_column, 1).to_pydict() == maker.make(by_object, 1).to_pydict()
    # and planned, sent as a Spark task gets them (the columns, their forms made again) and made there, in both forms
    for form in ("canal", "debezium"):
        maker = MessageMaker(form, Routing(MqConfig(topic="t")), "d", now_ms=lambda: 1)
        sent = entry_wire.loads(entry_wire.dumps(maker.plan(by_column, 1)))
        sent_rows = [e.row_change.rows for e in sent.entries if e.row_change and e.row_change.rows]
        assert sent_rows and all(isinstance(rows, ColumnarRows) for rows in sent_rows)
        assert maker.render(sent).to_pydict() == maker.make(by_object, 1).to_pydict(), form
    assert len(by_column) == len(by_object)
    for a, b in zip(by_column, by_object, strict=True):
        assert a.header == b.header
        if a.row_change is not None and b.row_change is not None:
            assert a.row_change.rows.before == b.row_change.rows.before  # type: ignore[attr-defined]
            assert a.row_change.rows.after == b.row_change.rows.after  # type: ignore[attr-defined]


def test_the_form_changes_at_the_next_rows_event_and_run_batches_asks_for_columns(table: Any, tmp_path: Path) -> None:
    """``decode_rows_by_column`` takes effect from the next rows event the parser reads, either way; the entries are
    the same rows in both forms. ``run_batches`` into a DeltaMirror turns it on."""
    pytest.importorskip("deltalake")
    from canal.spark import DeltaMirror, run_batches

    conn = table.connect()
    start = master_position(conn)
    config = InstanceConfig(
        destination="switch",
        master=table.master(start),
        filter_regex=rf"{table.database}\..*",
        store=StoreConfig(batch_mode="ITEMSIZE"),
        meta_mode="file",
        meta_dir=str(tmp_path / "meta"),
    )

    def rows_entries(inst: Instance, count: int) -> list[Entry]:
        got: list[Entry] = []
        while len(got) < count:
            got += [e for e in inst.get(100, timeout=0.1).entries if e.entry_type is EntryType.ROWDATA]
        return got

    with Instance(config) as inst:
        assert not inst.parser.rows_form.columnar
        conn.cursor().execute("INSERT INTO t (id, v1, dt6) VALUES (1, 'caf\u00e9', '2024-02-29 12:00:00.5')")
        first = rows_entries(inst, 1)
        inst.decode_rows_by_column()
        conn.cursor().execute("INSERT INTO t (id, v1, dt6) VALUES (2, 'na\u00efve', '0000-00-00 00:00:00')")
        second = rows_entries(inst, 1)
        inst.decode_rows_by_column(False)
        conn.cursor().execute("UPDATE t SET v1 = 'x' WHERE id = 2")
        third = rows_entries(inst, 1)
    assert [type(e.row_change.rows).__name__ for e in first + second + third if e.row_change] == [
        "Rows",
        "ColumnarRows",
        "Rows",
    ]
    second_rows = second[0].row_change.rows if second[0].row_change else None
    assert second_rows is not None and second_rows.after is not None
    assert second_rows.after[0][0] == 2 and "na\u00efve" in second_rows.after[0]
    assert "0000-00-00 00:00:00.000000" in second_rows.after[0]

    mirror = DeltaMirror(tmp_path / "mirror", zero_dates="null")
    with Instance(attrs.evolve(config, destination="switch-mirror", meta_dir=str(tmp_path / "meta2"))) as inst:
        run_batches(inst, None, mirror, until=lambda stats: stats.rows >= 3)
        assert inst.parser.rows_form.columnar
    mirror.close()
    assert mirror.read(table.database, "t").num_rows == 2
