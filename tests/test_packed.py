"""Packed typed batches (:mod:`canal.lake.forms.packed`): what is unpacked is what was packed -- a typed batch whose
every cell equals the mirror's parse of the JSON change rows, or those change rows themselves where the typed form
cannot carry all the mirror needs -- and a mirror fed unpacked batches ends equal to one fed the change rows. A payload
that is not a packed batch is a typed error.

The entries come from the fake binlog (every type family, keys moved, an ALTER and a DROP between rows) and from
hypothesis (random layouts and rows, DDL and XA rows between; ``TYPED_CHANGES_EXAMPLES`` sets the count).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")
pytest.importorskip("deltalake")

from test_typed_changes import EXAMPLES, _entry, _one_column, batches, check_equivalent  # noqa: E402
from test_typed_mirror import _state, decoded  # noqa: E402, F401

from canal.lake.forms.changes import entries_to_batch  # noqa: E402
from canal.lake.forms.packed import (  # noqa: E402
    FORM_ROWS,
    FORM_TYPED,
    PACKED_SCHEMA_DDL,
    PackedBatchError,
    concat_typed,
    form_of,
    pack,
    pack_rows,
    packed_schema,
    table_layouts,
    two_layouts,
    unpack,
    unpack_all,
)
from canal.lake.forms.typed_batch import TypedBatch, entries_to_typed  # noqa: E402
from canal.lake.forms.typed_plan import needs_rows  # noqa: E402
from canal.lake.mirror import DeltaMirror  # noqa: E402
from canal.protocol import ColumnMeta, Entry, EventType, RowData, TableSchema  # noqa: E402
from canal.spark.packed_cut import PackedCut  # noqa: E402


def _typed(entries: Sequence[Entry], **kwargs: Any) -> TypedBatch:
    """The typed batch of ``entries`` with its change rows, as a reader builds it."""
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
    found = {(c["schema"], c["table"], c["layout"]) for c in typed.changes.to_pylist() if c["layout"] is not None}
    # what the maker noted as it went is what the changes hold (and what is found without the note)
    assert typed.tables == found == table_layouts(attrs.evolve(typed, tables=None)) == table_layouts(typed)
    tables_in_two_layouts = len(found) > len({(schema, table) for schema, table, _ in found})
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


def _micro_batches(chunks: Sequence[Sequence[Entry]]) -> list[tuple[list[list[Entry]], Any]]:
    """The micro-batches a reader packs taking ``chunks`` (instance batches) one after another: a chunk the packer
    refuses opens the next one. Each as (its chunks, its packed rows)."""
    out: list[tuple[list[list[Entry]], Any]] = []
    cut, taken, mine = PackedCut(), 0, []
    for chunk in chunks:
        added = cut.add(list(chunk), "d", 7, 3 + taken)
        if added is None:
            assert mine and cut.rows and not cut.as_rows, "only typed rows packed already refuse an instance batch"
            out.append((mine, cut.packed()))
            cut, taken, mine = PackedCut(), 0, []
            added = cut.add(list(chunk), "d", 7, 3)
            assert added is not None, "an instance batch opening a micro-batch is always taken"
        taken += added
        mine.append(list(chunk))
    out.append((mine, cut.packed()))
    for its_chunks, packed in out:
        assert packed.schema == packed_schema() and packed.num_rows == len([c for c in its_chunks if c])
    return out


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
    """However the reader's instance batches cut the stream, each micro-batch's packed rows unpack into the one batch
    of all its entries: typed while every instance batch can be and no table is in two layouts; an instance batch
    that cannot join typed rows opens the next micro-batch, which is change rows when it cannot be typed itself."""
    batches = _micro_batches(chunks)
    assert [c for its_chunks, _ in batches for c in its_chunks] == chunks  # each in one micro-batch, in order
    for its_chunks, packed in batches:
        _check_micro_batch(its_chunks, unpack_all(packed))
    for (before, _), (after, _) in itertools.pairwise(batches):  # a refused chunk: rows, or a second layout
        typed_before = _typed([e for c in before for e in c], before_keys_only=True)
        opener = _typed(after[0])
        assert form_of(typed_before) == FORM_TYPED
        assert form_of(opener) == FORM_ROWS or two_layouts(table_layouts(typed_before) | table_layouts(opener))


def _check_micro_batch(chunks: list[list[Entry]], out: Any) -> None:
    entries = [e for chunk in chunks for e in chunk]
    whole = _typed(entries, before_keys_only=True)  # as the reader builds them
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
        assert form_of(_typed(chunks[0])) == FORM_ROWS  # a micro-batch of change rows: its first could not be typed
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


def test_a_spool_of_change_rows_is_refused_to_a_packed_reader_and_back(tmp_path: Path, decoded: list[Entry]) -> None:  # noqa: F811
    from canal.lake.forms.changes import arrow_schema
    from canal.spark.offsets import INITIAL_OFFSET
    from canal.spark.spool import Spool, SpoolError

    start, end = dict(INITIAL_OFFSET), {**INITIAL_OFFSET, "batch": 1}
    rows = entries_to_batch(decoded, "d", 1)
    Spool(tmp_path / "json", None, arrow_schema()).write(start, end, rows)
    packed = _micro_batches([decoded[:4], decoded[4:]])[0][1].combine_chunks().to_batches()[0]
    Spool(tmp_path / "packed", None, packed_schema()).write(start, end, packed)
    for where, reader_form, says in (
        ("json", packed_schema(), "images=json, not images=packed"),
        ("packed", arrow_schema(), "images=packed, not images=json"),
    ):
        spool = Spool(tmp_path / where, None, reader_form)
        for read in (spool.read, spool.rows, spool.inline):
            with pytest.raises(SpoolError, match=says):
                read(start)
        assert [p.name for p in (tmp_path / where).iterdir()]  # nothing dropped
    again = Spool(tmp_path / "packed", None, packed_schema()).read(start)
    assert again is not None and again[0].equals(packed) and again[1] == end  # replayed byte for byte


def test_packed_images_are_for_the_mirror_only(tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    from canal.spark.project import _cells
    from canal.spark.source import CanalStreamReader, SparkSourceError

    options = {"destination": "d", "master.address": "127.0.0.1:3306", "spool.dir": str(tmp_path / "spool")}
    with pytest.raises(SparkSourceError, match=r"images = packed cannot take snapshot\.partitions"):
        CanalStreamReader({**options, "images": "packed", "snapshot.partitions": "2"})
    with pytest.raises(SparkSourceError, match="expected json, variant or packed"):
        CanalStreamReader({**options, "images": "arrow"})
    assert not (tmp_path / "spool").exists()
    assert CanalStreamReader({**options, "images": "packed"}).spool.form == packed_schema()
    with pytest.raises(ValueError, match="images=packed is the mirror's form"):
        _cells("packed")
