"""Packed typed batches (:mod:`canal.lake.packed`): what is unpacked is what was packed -- a typed batch whose every
cell equals the mirror's parse of the JSON change rows, or those change rows themselves where the typed form cannot
carry all the mirror needs -- and a mirror fed unpacked batches ends equal to one fed the change rows. A payload that
is not a packed batch is a typed error.

The entries come from the fake binlog (every type family, keys moved, an ALTER and a DROP between rows) and from
hypothesis (random layouts and rows, DDL and XA rows between; ``TYPED_CHANGES_EXAMPLES`` sets the count).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")
pytest.importorskip("deltalake")

from test_typed_changes import EXAMPLES, _entry, _one_column, batches, check_equivalent  # noqa: E402
from test_typed_mirror import _state, decoded  # noqa: E402, F401

from canal.lake.mirror import DeltaMirror  # noqa: E402
from canal.lake.packed import (  # noqa: E402
    FORM_ROWS,
    FORM_TYPED,
    PACKED_SCHEMA_DDL,
    PackedBatchError,
    concat_typed,
    form_of,
    pack,
    pack_rows,
    packed_schema,
    unpack,
    unpack_all,
)
from canal.lake.typed_batch import TypedBatch, entries_to_typed  # noqa: E402
from canal.lake.typed_plan import needs_rows  # noqa: E402
from canal.protocol import ColumnMeta, Entry, EventType, RowData, TableSchema  # noqa: E402
from canal.spark.changes import entries_to_batch  # noqa: E402
from canal.spark.packed_cut import PackedCut  # noqa: E402


def _typed(entries: Sequence[Entry], **kwargs: Any) -> TypedBatch:
    """The typed batch of ``entries`` with its change rows, as a reader builds it."""
    import attrs

    typed = entries_to_typed(entries, "d", 7, 3, collect_errors=True, **kwargs)
    return attrs.evolve(typed, rows=functools.partial(entries_to_batch, entries, "d", 7, 3))


def _round_trip(typed: TypedBatch) -> tuple[str, Any]:
    packed = pack(typed)
    assert packed.schema == packed_schema() and packed.num_rows == 1
    (row,) = packed.to_pylist()
    assert row["rows"] == typed.num_rows
    assert row["first_seq"] == (typed.changes.column("seq")[0].as_py() if typed.num_rows else None)
    return row["form"], unpack(row)


def _check(entries: Sequence[Entry]) -> str:
    typed = _typed(entries)
    form, out = _round_trip(typed)
    tables_in_two_layouts = len(
        {(c["schema"], c["table"], c["layout"]) for c in typed.changes.to_pylist() if c["layout"] is not None}
    ) > len({(c["schema"], c["table"]) for c in typed.changes.to_pylist() if c["layout"] is not None})
    assert (form == FORM_ROWS) is bool(typed.errors or needs_rows(typed) or tables_in_two_layouts)
    if form == FORM_ROWS:
        assert out.equals(pa.Table.from_batches([entries_to_batch(entries, "d", 7, 3)]))
        return form
    assert isinstance(out, TypedBatch) and out.rows is None and not out.errors
    assert out.changes.equals(typed.changes)
    assert dict(out.layouts) == dict(typed.layouts)
    assert {k: v.equals(typed.images[k]) for k, v in out.images.items()} == {k: True for k in typed.images}
    check_equivalent(entries, out)  # every cell as the mirror parses the JSON change rows
    return form


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches())
def test_random_batches_unpack_to_what_was_packed(entries: list[Entry]) -> None:
    _check(entries)


def test_every_type_family_travels_typed(decoded: list[Entry]) -> None:  # noqa: F811
    # the fixture's batch holds an ALTER between rows of one table (two layouts) and goes as rows; without the
    # ALTER's second layout each table's rows go typed
    assert _check(decoded) == FORM_ROWS
    alter = next(i for i, e in enumerate(decoded) if e.row_change is not None and e.row_change.sql.startswith("ALTER"))
    assert _check(decoded[:alter]) == FORM_TYPED


def test_what_the_typed_form_cannot_carry_goes_as_change_rows() -> None:
    # a value that did not convert (the mirror decides about it: zero_dates, or a later change superseding it)
    assert _check(_one_column("date", "0000-00-00")) == FORM_ROWS
    assert _check(_one_column("int(11)", 5)) == FORM_TYPED


def test_a_mirror_fed_unpacked_batches_equals_one_fed_change_rows(tmp_path: Path, decoded: list[Entry]) -> None:  # noqa: F811
    # one batch holds db.t's rows on both sides of its ALTER (two layouts: the rows form); the others go by three
    def of_t(e: Entry) -> bool:
        return (
            e.row_change is not None and not e.row_change.is_ddl and e.header.table == "t" and bool(e.row_change.rows)
        )

    alter = next(i for i, e in enumerate(decoded) if e.row_change is not None and e.row_change.sql.startswith("ALTER"))
    first = max(i for i in range(alter) if of_t(decoded[i]))
    last = min(i for i in range(alter, len(decoded)) if of_t(decoded[i])) + 1
    chunks = [
        *(decoded[i : min(i + 3, first)] for i in range(0, first, 3)),
        decoded[first:last],
        *(decoded[i : i + 3] for i in range(last, len(decoded), 3)),
    ]
    forms = []
    states = {}
    for fed in ("rows", "packed"):
        with DeltaMirror(str(tmp_path / fed)) as mirror:
            for batch_id, chunk in enumerate(chunks, start=1):
                if fed == "rows":
                    mirror.apply(entries_to_batch(chunk, "d", 0), batch_id)
                    continue
                form, batch = _round_trip(_typed(chunk, before_keys_only=True))
                forms.append(form)
                mirror.apply(batch, batch_id)
            states[fed] = _state(mirror)
    assert states["packed"] == states["rows"]
    assert FORM_TYPED in forms and FORM_ROWS in forms, forms


def test_a_batch_that_needs_its_change_rows_and_has_none_is_refused() -> None:
    typed = entries_to_typed(_one_column("date", "0000-00-00"), "d", 1, collect_errors=True)
    assert form_of(typed) == FORM_ROWS
    with pytest.raises(PackedBatchError, match="without its change rows"):
        pack(typed)


def test_what_is_not_a_packed_batch_is_a_typed_error() -> None:
    table = TableSchema("s", "t", (ColumnMeta("id", mysql_type="int", is_key=True), ColumnMeta("v", mysql_type="int")))
    (row,) = pack(_typed([_entry(table, [RowData(table, after=(1, 2))], EventType.INSERT)])).to_pylist()
    assert row["form"] == FORM_TYPED and isinstance(unpack(row), TypedBatch)
    spoilt: list[tuple[dict[str, Any], str]] = [
        ({**row, "form": "columns"}, "form 'columns'"),
        ({**row, "changes": b"not arrow"}, "not an Arrow stream"),
        ({**row, "changes": None}, "not bytes"),
        ({**row, "images": []}, "1 layouts and 0 image streams"),
        ({**row, "images": [row["changes"]]}, "images of layout"),
        ({**row, "changes": row["images"][0]}, "metadata has the schema"),
        ({**row, "layouts": ["[[1,2]"]}, "describe no layout"),
        ({**row, "layouts": ['[["id","int",true]]']}, "name layouts"),
    ]
    for bad, says in spoilt:
        with pytest.raises(PackedBatchError, match=says):
            unpack(bad)


def _micro_batch(chunks: Sequence[Sequence[Entry]]) -> Any:
    """The packed rows of a micro-batch whose reader took ``chunks`` (instance batches) one after another."""
    cut = PackedCut()
    taken = 0
    for chunk in chunks:
        taken += cut.add(list(chunk), "d", 7, 3 + taken)
    packed = cut.packed()
    assert packed.schema == packed_schema() and packed.num_rows == len([c for c in chunks if c])
    return packed


def _plain(changes: Any) -> Any:
    """A typed batch's metadata with its dictionary columns decoded (dictionaries differ between equal tables)."""
    return pa.table(
        {
            name: column.cast(column.type.value_type) if pa.types.is_dictionary(column.type) else column
            for name, column in zip(changes.column_names, changes.columns, strict=True)
        }
    )


@st.composite
def cut_batches(draw: st.DrawFn) -> list[list[Entry]]:
    """A micro-batch's entries -- one or two random batches, so tables recur across its instance batches -- cut into
    instance batches at random."""
    entries = [e for batch in draw(st.lists(batches(), min_size=1, max_size=2)) for e in batch]
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(entries) - 1)), max_size=3)))
    return [entries[a:b] for a, b in itertools.pairwise([0, *cuts, len(entries)]) if a < b]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cut_batches())
def test_a_micro_batch_of_packed_rows_unpacks_to_the_batch_of_all_its_entries(chunks: list[list[Entry]]) -> None:
    """However the reader's instance batches cut a micro-batch, its packed rows unpack into the one batch of all its
    entries: typed when every instance batch can be and no table is in two layouts, else the change rows."""
    entries = [e for chunk in chunks for e in chunk]
    whole = _typed(entries, before_keys_only=True)  # as the reader builds them
    out = unpack_all(_micro_batch(chunks))
    if isinstance(out, TypedBatch):
        assert form_of(whole) == FORM_TYPED
        assert _plain(out.changes).equals(_plain(whole.changes))
        assert dict(out.layouts) == dict(whole.layouts)
        assert {k: v.equals(whole.images[k]) for k, v in out.images.items()} == {k: True for k in whole.images}
        # and every cell as the mirror parses the change rows, the images whole (the reader keeps befores' keys only)
        taken = [0, *itertools.accumulate(len(entries_to_batch(c, "d", 7, 3)) for c in chunks)]
        whole_images = [entries_to_typed(c, "d", 7, 3 + n) for c, n in zip(chunks, taken, strict=False)]
        check_equivalent(entries, concat_typed(whole_images))
        for name in ("schema", "table", "type", "layout"):  # one dictionary entry per value, as group-bys need
            dictionary = out.changes.column(name).chunk(0).dictionary
            assert len(dictionary) == len(set(dictionary.to_pylist()))
    else:
        chunk_forms = [form_of(_typed(chunk)) for chunk in chunks]
        assert form_of(whole) == FORM_ROWS or FORM_ROWS in chunk_forms
        assert out.equals(pa.Table.from_batches([entries_to_batch(entries, "d", 7, 3)]))


def test_a_micro_batch_packed_in_both_forms_is_refused() -> None:
    table = TableSchema("s", "t", (ColumnMeta("id", mysql_type="int", is_key=True), ColumnMeta("v", mysql_type="int")))
    typed = _typed([_entry(table, [RowData(table, after=(1, 2))], EventType.INSERT)])
    both = pa.concat_tables([pack(typed), pack(typed, FORM_ROWS)])
    with pytest.raises(PackedBatchError, match="both forms"):
        unpack_all(both)
    assert isinstance(unpack_all(pa.concat_tables([pack(typed), pack(typed)])), TypedBatch)
    assert unpack_all(pa.concat_tables([pack_rows(typed.rows()), pack(typed, FORM_ROWS)])).num_rows == 2
    empty = unpack_all(packed_schema().empty_table())
    assert isinstance(empty, TypedBatch) and empty.num_rows == 0


def test_the_packed_schema_in_sparks_ddl_is_the_arrow_one() -> None:
    pytest.importorskip("pyspark")
    from pyspark.sql.pandas.types import from_arrow_schema

    spark_schema = from_arrow_schema(packed_schema())
    assert ", ".join(f"{f.name} {f.dataType.simpleString().upper()}" for f in spark_schema) == PACKED_SCHEMA_DDL
