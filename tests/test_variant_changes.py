"""Change rows in the ``images=variant`` form (:mod:`canal.lake.forms.variant_changes`): the same rows as the JSON form,
their images VARIANT values whose cells read back -- by pyspark's own variant reader, the outside reference -- as the
values the JSON form spells; and a DeltaMirror fed them ends equal to one fed the JSON rows (every type family, DDL
between rows, keys moved, XA through the change rows the variant batch renders, random layouts and rows).

``VARIANT_MIRROR_EXAMPLES`` (default 8) sets the property test's example count, for a longer run.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("deltalake")
pytest.importorskip("pyspark")

from pyspark.sql.types import VariantVal
from test_typed_changes import _entry, _one_column, batches
from test_typed_mirror import MODES, Fed, _feed, _one_layout_per_table, _state, _xa_rows, decoded  # noqa: F401

from canal.lake.forms.changes import entries_to_batch
from canal.lake.forms.typed_layout import TypedChangeError
from canal.lake.forms.variant_changes import (
    VARIANT_COLUMNS,
    VARIANT_SCHEMA_DDL,
    entries_to_variant_batch,
    json_rows_to_variant,
    variant_arrow_schema,
)
from canal.lake.forms.variant_rows import holds_variants, variant_rows_to_typed
from canal.lake.mirror import DeltaMirror
from canal.lake.types import MirrorError
from canal.protocol import ColumnMeta, Entry, EventType, RowData, TableSchema

EXAMPLES = int(os.environ.get("VARIANT_MIRROR_EXAMPLES", "8"))


def _python(cell: dict[str, Any] | None) -> Any:
    """A variant cell as pyspark's reader gives it (None for SQL NULL); with 38-digit decimals exact (its reader
    scales them in the current decimal context, 28 digits by default)."""
    if cell is None:
        return None
    with decimal.localcontext(prec=80):
        return VariantVal(cell["value"], cell["metadata"]).toPython()


def _same_value(variant_value: Any, canal_text: str | None) -> bool:
    """Whether a cell read from a variant is the value whose canal text the JSON form holds."""
    if canal_text is None or variant_value is None:
        return canal_text is None and variant_value is None
    if isinstance(variant_value, float):
        return variant_value == float(canal_text) or (variant_value != variant_value and canal_text.lower() == "nan")
    if isinstance(variant_value, Decimal):
        return variant_value == Decimal(canal_text)
    if isinstance(variant_value, bytes):
        return variant_value == canal_text.encode("latin-1")
    if isinstance(variant_value, dt.datetime):
        return variant_value == dt.datetime.fromisoformat(canal_text)
    if isinstance(variant_value, dt.date):
        return variant_value == dt.date.fromisoformat(canal_text)
    return str(variant_value) == canal_text


def _check_same_rows(entries: list[Entry]) -> int:
    """The variant rows of ``entries`` against their JSON rows: metadata equal, every image cell the same value."""
    variant = entries_to_variant_batch(entries, "d", 3)
    text = entries_to_batch(entries, "d", 3)
    assert variant.schema == variant_arrow_schema()
    assert variant.num_rows == text.num_rows
    for name in text.schema.names:
        if name not in VARIANT_COLUMNS:
            assert variant.column(name).to_pylist() == text.column(name).to_pylist(), name
    cells = 0
    for name in VARIANT_COLUMNS:
        for got, want in zip(variant.column(name).to_pylist(), text.column(name).to_pylist(), strict=True):
            read = _python(got)
            if want is None:
                assert read is None, name
                continue
            expected = json.loads(want)
            assert isinstance(read, dict) and set(read) == set(expected), name
            for column, canal_text in expected.items():
                assert _same_value(read[column], canal_text), (name, column, read[column], canal_text)
                cells += 1
    return cells


def test_every_type_family_reads_back_as_the_json_form_spells_it(decoded: list[Entry]) -> None:  # noqa: F811
    assert _check_same_rows(decoded) > 100
    assert "after VARIANT" in VARIANT_SCHEMA_DDL and "columns STRING" in VARIANT_SCHEMA_DDL


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries=batches())
def test_random_rows_read_back_as_the_json_form_spells_them(entries: list[Entry]) -> None:
    try:
        variant = entries_to_variant_batch(entries, "d", 0)
    except TypedChangeError:
        return  # a value with no typed form (a zero date): the variant form refuses it, the test below says how
    assert variant.num_rows == entries_to_batch(entries, "d", 0).num_rows
    _check_same_rows(entries)


def test_a_value_with_no_typed_form_is_refused_naming_it() -> None:
    with pytest.raises(TypedChangeError, match="zero date"):
        entries_to_variant_batch(_one_column("date", "0000-00-00"), "d", 0)


def test_a_table_without_a_key_has_empty_keys_and_no_old_keys() -> None:
    table = TableSchema("s", "nokey", (ColumnMeta("v", mysql_type="int"),))
    rows = [RowData(table, before=(1,), after=(2,))]
    batch = entries_to_variant_batch([_entry(table, rows)], "d", 0)
    assert [_python(k) for k in batch.column("keys").to_pylist()] == [{}]
    assert batch.column("old_keys").to_pylist() == [None]
    assert _python(batch.column("before").to_pylist()[0]) == {"v": 1}


def test_snapshot_ranges_json_rows_convert_to_the_same_variant_rows(decoded: list[Entry]) -> None:  # noqa: F811
    assert json_rows_to_variant(entries_to_batch(decoded, "d", 3)).equals(entries_to_variant_batch(decoded, "d", 3))


def _feed_variant(root: Path, chunks: list[list[Entry]], mode: str) -> Fed:
    fed = Fed()
    with DeltaMirror(str(root), mode=mode) as mirror:
        for batch_id, chunk in enumerate(chunks, start=1):
            batch = entries_to_variant_batch(chunk, "d", 0)
            assert holds_variants(batch)
            try:
                result = mirror.apply(batch, batch_id)
            except MirrorError as exc:
                fed.error = (type(exc).__name__, str(exc).replace(str(root), "<root>"))
                break
            fed.results.append(dict(result.tables))
        fed.tables = _state(mirror)
    return fed


def _json_and_variant(tmp: Path, chunks: list[list[Entry]], mode: str) -> tuple[Fed, Fed]:
    json_fed = _feed(tmp / "json", chunks, typed=False, mode=mode)
    variant_fed = _feed_variant(tmp / "variant", chunks, mode)
    assert variant_fed.tables == json_fed.tables
    assert variant_fed.error == json_fed.error
    assert variant_fed.results == json_fed.results
    return json_fed, variant_fed


@pytest.mark.parametrize("mode", MODES)
def test_a_mirror_fed_variant_rows_ends_equal_to_one_fed_json_rows(
    decoded: list[Entry],  # noqa: F811
    tmp_path: Path,
    mode: str,
) -> None:
    chunks = [decoded[i : i + 3] for i in range(0, len(decoded), 3)]
    json_fed, _ = _json_and_variant(tmp_path, chunks, mode)
    assert json_fed.error is None and len(json_fed.tables["db.t"]) == 3


@settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)
@given(entries=batches().filter(_one_layout_per_table), cut=st.integers(0, 4), mode=st.sampled_from(MODES))
def test_random_batches_of_variant_rows_end_equal(
    tmp_path_factory: pytest.TempPathFactory, entries: list[Entry], cut: int, mode: str
) -> None:
    try:
        entries_to_variant_batch(entries, "d", 0)
    except TypedChangeError:
        return
    tmp = tmp_path_factory.mktemp("variant_mirror")
    _json_and_variant(tmp, [c for c in (entries[:cut], entries[cut:]) if c], mode)


def test_xa_rows_in_the_variant_form_are_held_through_rendered_change_rows(tmp_path: Path) -> None:
    entries = _xa_rows()
    typed = variant_rows_to_typed(entries_to_variant_batch(entries, "d", 0))
    assert typed.rows is not None
    rendered = typed.rows()
    assert rendered.column("after").to_pylist()[0] == '{"id":"1"}'
    json_fed, _ = _json_and_variant(tmp_path, [entries], "merge_on_read")
    assert json_fed.error is None and json_fed.tables == {}  # held until its XA COMMIT


def test_a_variant_that_is_not_an_image_of_its_layout_fails_before_anything_is_written(tmp_path: Path) -> None:
    table = TableSchema("s", "t", (ColumnMeta("id", mysql_type="int", is_key=True), ColumnMeta("v", mysql_type="int")))
    batch = entries_to_variant_batch([_entry(table, [RowData(table, after=(1, 2))], EventType.INSERT)], "d", 0)
    wrong = json.dumps([["id", "int", True], ["v", "varchar(3)", False]], separators=(",", ":"))
    import pyarrow as pa

    lying = batch.set_column(batch.schema.get_field_index("columns"), "columns", pa.array([wrong]))
    with DeltaMirror(str(tmp_path / "m")) as mirror:
        with pytest.raises(MirrorError, match="'v'"):
            mirror.apply(lying, 1)
        assert mirror.tables() == []


def test_rendered_change_rows_hold_whole_before_images() -> None:
    # foreign keys' actions read a parent's whole before image: the typed batch keeps its key alone, the rows it
    # renders keep every column
    table = TableSchema("s", "p", (ColumnMeta("id", mysql_type="int", is_key=True), ColumnMeta("v", mysql_type="int")))
    update = _entry(table, [RowData(table, before=(1, 2), after=(1, 3))])
    typed = variant_rows_to_typed(entries_to_variant_batch([update], "d", 0))
    layout = next(iter(typed.images))
    assert typed.images[layout].column("before").type.names == ["id"]
    assert typed.rows is not None
    rendered = typed.rows()
    assert rendered.column("before").to_pylist() == ['{"id":"1","v":"2"}']
    assert rendered.column("keys").to_pylist() == ['{"id":"1"}'] and rendered.column("old_keys").to_pylist() == [None]


def test_a_spool_of_the_other_form_is_refused_naming_the_option(tmp_path: Path, decoded: list[Entry]) -> None:  # noqa: F811
    from canal.lake.forms.changes import arrow_schema
    from canal.spark.offsets import INITIAL_OFFSET
    from canal.spark.spool import Spool, SpoolError

    start, end = dict(INITIAL_OFFSET), {**INITIAL_OFFSET, "batch": 1}
    Spool(tmp_path / "spool", None, arrow_schema()).write(start, end, entries_to_batch(decoded, "d", 1))
    files = sorted(p.name for p in (tmp_path / "spool").iterdir())
    as_variant = Spool(tmp_path / "spool", None, variant_arrow_schema())
    for read in (as_variant.read, as_variant.rows, as_variant.inline):
        with pytest.raises(SpoolError, match="images=json, not images=variant"):
            read(start)
    assert sorted(p.name for p in (tmp_path / "spool").iterdir()) == files  # nothing dropped
    again = Spool(tmp_path / "spool", None, arrow_schema()).read(start)  # the form it was written in
    assert again is not None and again[0].num_rows == entries_to_batch(decoded, "d", 1).num_rows
