"""Row images decoded column by column (canal.parse.mysql.decoder.ColumnarGen) against the object decoder.

Random row images of every column form -- text in UTF-8 and latin1 (ASCII or not, valid or not), DATETIME2 of every
fsp (zero, invalid and impossible dates among them), DECIMALs (corrupt groups among them), NULLs anywhere -- are
decoded both ways: the rows' ``before`` / ``after`` tuples are the object decoder's, and the typed batch built of
them (canal.lake.forms.typed_batch) is the one built of the object decoder's rows, value for value and error for error.
Against a real server: tests/test_columnar_rows_mariadb.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("pyarrow")

from columnar_cells import column

from canal.errors import ParseError
from canal.lake.forms.typed_batch import entries_to_typed
from canal.lake.forms.typed_layout import TypedChangeError
from canal.parse.mysql.decoder import BinlogColumn, TableDecoder, TableMapInfo
from canal.protocol import ColumnarRows, Entry, EntryType, EventType, Header, RowChange, Rows


@st.composite
def _events(draw: st.DrawFn) -> list[tuple[list[BinlogColumn], str, bytes, int]]:
    """Rows events of one or two tables: per event its columns (the first the key), kind, rows' bytes (every column
    in both images) and row count. Events of one table share a layout: a batch's INSERTs, UPDATEs and DELETEs of it
    are typed together, the images an event has not (an INSERT's before) spread among those it has."""
    out = []
    for _table in range(draw(st.integers(1, 2))):
        drawn = [draw(column(i)) for i in range(draw(st.integers(1, 6)))]
        columns = [c for c, _ in drawn]
        columns[0].is_key = True

        def image(drawn: list[tuple[BinlogColumn, st.SearchStrategy[bytes]]] = drawn) -> bytes:
            cells = [None if c.nullable and draw(st.integers(0, 4)) == 0 else draw(cell) for c, cell in drawn]
            nulls = sum(1 << i for i, cell in enumerate(cells) if cell is None)
            nulls |= ((1 << (8 * ((len(cells) + 7) // 8))) - 1) ^ ((1 << len(cells)) - 1)  # the servers' padding
            return nulls.to_bytes((len(cells) + 7) // 8, "little") + b"".join(c for c in cells if c is not None)

        for _event in range(draw(st.integers(1, 3))):
            kind = draw(st.sampled_from("wud"))
            n = draw(st.integers(1, 6))
            body = b"".join(image() + (image() if kind == "u" else b"") for _ in range(n))
            out.append((columns, kind, body, n))
    return draw(st.permutations(out))


_EVENT_TYPES = {"w": EventType.INSERT, "u": EventType.UPDATE, "d": EventType.DELETE}


def _entry(rows: Rows, kind: str, offset: int) -> Entry:
    et = _EVENT_TYPES[kind]
    header = Header("mysql-bin.000001", offset, schema="s", table="t", event_type=et)
    return Entry(header, EntryType.ROWDATA, RowChange(et, rows, table=rows.table))


def _outcome(fn: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return "ok", fn()
    except (TypedChangeError, ParseError, ValueError, UnicodeError) as exc:
        return "error", f"{type(exc).__name__}: {exc}"


def _typed(entries: list[Entry], zero_dates: Any, collect: bool, keys_only: bool) -> Any:
    typed = entries_to_typed(entries, "d", 1, zero_dates=zero_dates, collect_errors=collect, before_keys_only=keys_only)
    return typed.changes, typed.images, typed.errors


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_events(), st.sampled_from(["error", "null"]), st.booleans(), st.booleans())
def test_columns_give_the_object_decoders_images_and_typed_batches(
    events: list[tuple[list[BinlogColumn], str, bytes, int]], zero_dates: Any, collect: bool, keys_only: bool
) -> None:
    by_object: list[Entry] = []
    by_column: list[Entry] = []
    refused = False
    for offset, (columns, kind, body, n) in enumerate(events):
        table = TableDecoder(TableMapInfo(1, "s", "t", columns, has_names=True))
        present = bytes([0xFF]) * ((len(columns) + 7) // 8)
        columnar = table.decoder(kind, present, present if kind == "u" else b"", columnar=True)(
            table.schema, body, 0, len(body)
        )
        assert isinstance(columnar, ColumnarRows)
        assert len(columnar) == n
        try:
            objects = table.decoder(kind, present, present if kind == "u" else b"")(table.schema, body, 0, len(body))
        except ValueError:  # a cell the object decoder refuses (corrupt bytes): columns refuse it where it is read
            refused = True
            refusal = _outcome(lambda rows=columnar: (rows.before, rows.after))
            assert refusal[0] == "error" and refusal[1].startswith("ParseError: a row of s.t holds a cell")
            by_column.append(_entry(columnar, kind, 4 + offset))
            continue
        assert columnar.before == objects.before
        assert columnar.after == objects.after
        by_object.append(_entry(objects, kind, 4 + offset))
        # a fresh decoding: the typed batch is built from the columns, not from the tuples made above
        again = table.decoder(kind, present, present if kind == "u" else b"", columnar=True)(
            table.schema, body, 0, len(body)
        )
        by_column.append(_entry(again, kind, 4 + offset))
    if refused:
        # every cell converted: the refused one is a typed error; with the before images' keys only, a refused
        # cell of another column of a before image is one nobody reads
        got = _outcome(lambda: _typed(by_column, zero_dates, collect, False))
        assert got[0] == "error" and got[1].startswith("TypedChangeError")
        if keys_only:
            got = _outcome(lambda: _typed(by_column, zero_dates, collect, True))
            assert got[0] == "ok" or got[1].startswith("TypedChangeError")
        return
    expected = _outcome(lambda: _typed(by_object, zero_dates, collect, keys_only))
    got = _outcome(lambda: _typed(by_column, zero_dates, collect, keys_only))
    assert got[0] == expected[0]
    if expected[0] == "ok":
        assert got[1][0].equals(expected[1][0])
        assert got[1][1].keys() == expected[1][1].keys()
        assert all(got[1][1][key].equals(images) for key, images in expected[1][1].items())
        assert got[1][2] == expected[1][2]
