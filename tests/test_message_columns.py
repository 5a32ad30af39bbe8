"""canal's FlatMessages of rows decoded column by column (canal.lake.forms.message_columns) against those of the same
rows decoded row by row: random rows events -- every column form, NULLs anywhere, corrupt cells, partial images
(MINIMAL-like bitmaps: the key alone in a before image, some columns in an after image), UPDATEs whose after cells
are often their before cells, a batch's events of one layout encoded together (DATETIME2 and DECIMAL columns through
Arrow or cell by cell) -- make the same messages, byte for byte, with canal's routings; a cell the object decoder
refuses is the same ParseError. The row path itself is checked against a model of canal's FlatMessage in
tests/test_flat_messages.py."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("pyarrow")

from columnar_cells import column

from canal.config.mq import MqConfig
from canal.errors import ParseError
from canal.lake.forms import entry_wire, message_columns
from canal.lake.forms.flat_messages import MessageMaker
from canal.lake.forms.mq_routing import Routing
from canal.parse.mysql.decoder import BinlogColumn, TableDecoder, TableMapInfo
from canal.protocol import ColumnarRows, Entry, EntryType, EventType, Header, RowChange, Rows

_EVENT_TYPES = {"w": EventType.INSERT, "u": EventType.UPDATE, "d": EventType.DELETE}
_ROUTINGS = (MqConfig(topic="t"), MqConfig(topic="t", partition_hash="s.t:$pk$", partitions_num=3))


def _bitmap(present: list[int], width: int) -> bytes:
    return sum(1 << i for i in present).to_bytes((width + 7) // 8, "little")


@st.composite
def _events(draw: st.DrawFn) -> list[tuple[TableDecoder, str, list[int], list[int], bytes]]:
    """Rows events of one or two tables, in a random order: per event its table, kind, the columns present in its
    first and (an UPDATE's) second image, and its rows' bytes."""
    out = []
    for number in range(draw(st.integers(1, 2))):
        drawn = [draw(column(i)) for i in range(draw(st.integers(1, 7)))]
        columns: list[BinlogColumn] = [c for c, _ in drawn]
        columns[0].is_key = True
        table = TableDecoder(TableMapInfo(number + 1, "s", "t", columns, has_names=True))
        every = list(range(len(columns)))

        def image(
            present: list[int],
            like: dict[int, bytes | None] | None = None,
            drawn: list[tuple[BinlogColumn, st.SearchStrategy[bytes]]] = drawn,
        ) -> tuple[bytes, dict[int, Any]]:
            cells: dict[int, bytes | None] = {}
            for i in present:
                c, cell = drawn[i]
                if like is not None and i in like and draw(st.integers(0, 2)):
                    cells[i] = like[i]  # an UPDATE that leaves the cell as it was
                else:
                    cells[i] = None if c.nullable and draw(st.integers(0, 4)) == 0 else draw(cell)
            nulls = sum(1 << n for n, i in enumerate(present) if cells[i] is None)
            size = (len(present) + 7) // 8
            nulls |= ((1 << (8 * size)) - 1) ^ ((1 << len(present)) - 1)  # the servers' padding
            return nulls.to_bytes(size, "little") + b"".join(c for c in cells.values() if c is not None), cells

        for _event in range(draw(st.integers(1, 4))):
            kind = draw(st.sampled_from("wud"))
            partial = draw(st.integers(0, 3)) == 0
            first = [0, *(i for i in every[1:] if draw(st.booleans()))] if partial else every
            second = sorted(draw(st.sets(st.sampled_from(every), min_size=1))) if partial and kind == "u" else every
            body = b""
            for _row in range(draw(st.integers(1, 20))):
                raw, cells = image(first)
                body += raw + (image(second, cells)[0] if kind == "u" else b"")
            out.append((table, kind, first, second, body))
    return draw(st.permutations(out))


def _entry(rows: Rows, kind: str, offset: int) -> Entry:
    et = _EVENT_TYPES[kind]
    header = Header("mysql-bin.000001", offset, execute_time=7, schema="s", table="t", event_type=et, gtid="g:1")
    return Entry(header, EntryType.ROWDATA, RowChange(et, rows, table=rows.table))


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_events(), st.sampled_from(_ROUTINGS), st.sampled_from([1, message_columns.ARROW_CELLS]))
def test_columns_make_the_messages_rows_make(
    events: list[tuple[TableDecoder, str, list[int], list[int], bytes]], mq: MqConfig, arrow_cells: int
) -> None:
    by_row: list[Entry] = []
    by_column: list[Entry] = []
    refused = False
    for offset, (table, kind, first, second, body) in enumerate(events):
        width = len(table.schema.columns)
        present, present2 = _bitmap(first, width), _bitmap(second, width) if kind == "u" else b""
        columnar = table.decoder(kind, present, present2, columnar=True)(table.schema, body, 0, len(body))
        assert isinstance(columnar, ColumnarRows)
        by_column.append(_entry(columnar, kind, 4 + offset))
        try:
            rows = table.decoder(kind, present, present2)(table.schema, body, 0, len(body))
        except ValueError:  # a cell the object decoder refuses (corrupt bytes)
            refused = True
            continue
        by_row.append(_entry(rows, kind, 4 + offset))
    maker = MessageMaker("canal", Routing(mq), "d", now_ms=lambda: 11)
    default, message_columns.ARROW_CELLS = message_columns.ARROW_CELLS, arrow_cells
    try:
        # and planned, sent as a Spark task gets them (canal.lake.forms.entry_wire), made there: the same, or the same
        # error -- raised planning on the reader where partitions by key read the cells, else by the task
        sent = lambda: maker.render(entry_wire.loads(entry_wire.dumps(maker.plan(by_column, 3, 5))))  # noqa: E731
        if refused:
            for make in (lambda: maker.make(by_column, 3, 5), sent):
                with pytest.raises(ParseError, match=r"^a row of s\.t holds a cell its column cannot hold: "):
                    make()
            return
        got = maker.make(by_column, 3, 5)
        assert sent().to_pydict() == got.to_pydict()
    finally:
        message_columns.ARROW_CELLS = default
    expected = maker.make(by_row, 3, 5)
    assert got.to_pydict() == expected.to_pydict()
    if not mq.partition_hash:  # (partitions by column read the rows' values: their image tuples)
        assert all(isinstance(e.row_change.rows, ColumnarRows) and e.row_change.rows._images is None for e in by_column)
