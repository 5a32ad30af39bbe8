"""Which rows of a partial UPDATE the capture reads again (canal.parse.rereads), without a server: an update of what a
VIRTUAL column is computed from, whose image (MINIMAL; NOBLOB for a BLOB / TEXT one) lacks the column; a key moved
while a snapshot still reads the table; nothing else -- whole images, a table without VIRTUAL columns, an update of
other columns. The keys go to a re-read, or stop typed without one (heal="stop")."""

from __future__ import annotations

from typing import Any

import pytest

from canal.errors import UnmodeledStatementError
from canal.parse import healing
from canal.parse.rereads import rereads
from canal.protocol import ABSENT, ColumnMeta, Entry, EntryType, EventType, Header, RowChange, Rows, TableSchema
from canal.schema.catalog import SchemaCatalog
from canal.sql import read_statement

_SCHEMA = TableSchema(
    "d",
    "g",
    (ColumnMeta("id", is_key=True), ColumnMeta("v"), ColumnMeta("b"), ColumnMeta("gv"), ColumnMeta("gt")),
)
_A = ABSENT


def _layout() -> Any:
    catalog = SchemaCatalog(database="d", mariadb=True)
    catalog.apply(
        read_statement(
            "CREATE TABLE g (id INT PRIMARY KEY, v INT, b TEXT, gv INT AS (v * 2) VIRTUAL, "
            "gt TEXT AS (CONCAT(`b`, '!')) VIRTUAL)"
        )
    )
    return catalog.get("d", "g")


def _update(before: list[tuple[Any, ...]], after: list[tuple[Any, ...]]) -> Entry:
    header = Header("mysql-bin.000001", 4, schema="d", table="g", event_type=EventType.UPDATE)
    return Entry(header, EntryType.ROWDATA, RowChange(EventType.UPDATE, Rows(_SCHEMA, before, after)))


@pytest.mark.parametrize(
    ("before", "after", "reading", "keys"),
    [
        ([(1, _A, _A, _A, _A)], [(_A, 5, _A, _A, _A)], False, [1]),  # MINIMAL: v written, gv not carried
        ([(1, _A, _A, _A, _A)], [(_A, _A, "x", _A, _A)], False, [1]),  # b written: gt
        ([(1, 1, _A, 2, _A)], [(1, 5, _A, 10, _A)], False, []),  # NOBLOB: gv carried, b (and gt) unchanged
        ([(1, 1, _A, 2, _A)], [(1, 1, "y", 2, _A)], False, [1]),  # NOBLOB: b written, gt (TEXT) not carried
        ([(1, 1, "x", 2, "x!")], [(1, 5, "x", 10, "x!")], False, []),  # FULL
        ([(1, _A, _A, _A, _A), (2, _A, _A, _A, _A)], [(_A, 7, _A, _A, _A)] * 2, False, [1, 2]),
        ([(1, _A, _A, _A, _A)], [(9, _A, _A, _A, _A)], True, [9]),  # a key moved while the table is read
        ([(1, _A, _A, _A, _A)], [(9, _A, _A, _A, _A)], False, []),  # ... and while it is not: followed
    ],
)
def test_the_rows_a_copy_cannot_make_exact_are_read_again(
    before: list[tuple[Any, ...]], after: list[tuple[Any, ...]], reading: bool, keys: list[int]
) -> None:
    found = rereads(_update(before, after), _layout(), {"d.g"} if reading else set())
    assert (found.keys if found else ()) == tuple((("id", k),) for k in keys)


def test_without_virtual_columns_or_a_layout_nothing_is_read_again() -> None:
    entry = _update([(1, _A, _A, _A, _A)], [(_A, 5, _A, _A, _A)])
    assert rereads(entry, None, set()) is None  # no schema history: its VIRTUAL columns are not known
    catalog = SchemaCatalog(database="d", mariadb=True)
    catalog.apply(read_statement("CREATE TABLE g (id INT PRIMARY KEY, v INT, b TEXT, gv INT, gt TEXT)"))
    assert rereads(entry, catalog.get("d", "g"), set()) is None


def test_a_re_read_is_asked_for_or_the_update_stops_typed() -> None:
    entry = _update([(1, _A, _A, _A, _A)], [(_A, 5, _A, _A, _A)])
    asked: list[tuple[str, Any]] = []

    class History:
        def table(self, db: str, name: str) -> Any:
            return _layout()

    healing.reread_rows(entry, History(), None, lambda table, keys: asked.append((table, keys)))  # type: ignore[arg-type]
    assert asked == [("d.g", ((("id", 1),),))]
    with pytest.raises(UnmodeledStatementError, match="VIRTUAL") as caught:
        healing.reread_rows(entry, History(), None, None)  # type: ignore[arg-type]
    assert caught.value.shape == "partial row image" and caught.value.tables == ("d.g",)
