"""Typed change batches packed into bytes, for the trip from the process that decoded them to the one that applies
them, so that no change row crosses between them one by one (Spark's JVM turns every row of a DataFrame into its own
form and back, which costs more than decoding the row did).

A packed batch is one row of :func:`packed_schema`: Arrow IPC streams (LZ4-compressed, as the spool's files) in
binary columns, in one of two forms:

* ``typed`` -- the batch as the mirror applies it without text: ``changes`` its metadata table
  (:func:`canal.lake.forms.typed_batch.metadata_schema`), and per layout its ``columns`` JSON (the layout, described
  once) and its ``images`` (the struct columns ``before`` and ``after``). :func:`unpack` gives the
  :class:`~canal.lake.forms.typed_batch.TypedBatch` back, equal to the one packed.
* ``rows`` -- ``changes`` holds the batch's JSON change rows instead (``TypedBatch.rows()``), and no layouts. A batch
  goes in this form when the typed one cannot carry all the mirror needs: it holds XA transactions or foreign keys'
  actions (:func:`canal.lake.forms.typed_plan.needs_rows`), a table's rows in two layouts, or values that did not
  convert
  (the mirror decides about those -- ``zero_dates``, or a later change of the row superseding the cell -- and only
  with the change rows can it).

So an unpacked batch never needs what it does not hold, and a packed typed batch is exact: every cell converted, as
:mod:`canal.lake.forms.typed_layout` converts it. A payload that is not a packed batch is a :class:`PackedBatchError`.

A batch may travel as several packed rows (the ``canal`` source's ``images=packed`` micro-batch: a row per instance
batch the reader took), all of one form -- the reader makes them so (:mod:`canal.spark.source`). :func:`unpack_all`
joins them into the one batch the mirror applies: typed batches into one :class:`TypedBatch` (a layout's images
appended, their rows renumbered), change rows into one table. Rows of both forms are a :class:`PackedBatchError`: the
typed rows' change rows are not there to join the others.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from canal.lake.forms.typed_batch import TypedBatch, conform_metadata, metadata_schema
from canal.lake.forms.typed_layout import TypedChangeError, layout_from_columns
from canal.lake.forms.typed_plan import needs_rows
from canal.lake.store.arrow_streams import read_stream, stream_bytes
from canal.lake.types import MirrorError

FORM_TYPED: Final = "typed"
FORM_ROWS: Final = "rows"
COMPRESSION: Final = "lz4"
"""The codec of the streams' buffers, as of the spool's files: a batch's rows repeat much of one another."""


class PackedBatchError(MirrorError):
    """A packed batch that cannot be unpacked: not a form this version writes, or bytes that are not its Arrow
    streams. Nothing of it was applied."""


def packed_schema() -> Any:
    """A packed batch's Arrow schema: ``form`` (``typed`` or ``rows``), ``first_seq`` (its first change row's
    ``seq``), ``rows`` (its change rows), ``changes`` (an Arrow IPC stream: the metadata table, or the JSON change
    rows), ``layouts`` and ``images`` (per layout of a typed batch, its ``columns`` JSON and an Arrow IPC stream of its
    images; null in the rows form)."""
    import pyarrow as pa

    # nullable, lists' items named "element": the schema Spark checks a data source's rows against
    return pa.schema(
        [
            pa.field("form", pa.string()),
            pa.field("first_seq", pa.int64()),
            pa.field("rows", pa.int64()),
            pa.field("changes", pa.binary()),
            pa.field("layouts", pa.list_(pa.field("element", pa.string()))),
            pa.field("images", pa.list_(pa.field("element", pa.binary()))),
        ]
    )


PACKED_SCHEMA_DDL: Final = (
    "form STRING, first_seq BIGINT, rows BIGINT, changes BINARY, layouts ARRAY<STRING>, images ARRAY<BINARY>"
)
""":func:`packed_schema` in Spark's DDL (the ``canal`` source's schema with ``images=packed``)."""


def is_packed(names: Iterable[str]) -> bool:
    """Whether columns named ``names`` (an Arrow schema's, a DataFrame's) are packed batches', not change rows'."""
    return {"form", "changes", "layouts", "images"} <= set(names)


def table_layouts(batch: TypedBatch) -> set[tuple[str, str, str]]:
    """``(schema, table, layout id)`` of the batch's row changes."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if batch.tables is not None:  # noted as the batch was made: no pass over its changes
        return set(batch.tables)
    changes = batch.changes
    dml = changes.filter(pc.is_valid(changes.column("layout")))
    named = pa.table({name: dml.column(name).cast(pa.string()) for name in ("schema", "table", "layout")})
    found = named.group_by(["schema", "table", "layout"]).aggregate([])
    return set(zip(*(found.column(n).to_pylist() for n in ("schema", "table", "layout")), strict=True))


def two_layouts(found: set[tuple[str, str, str]]) -> bool:
    """Whether ``found`` (:func:`table_layouts`) has a table's rows in two layouts (several tables may share one)."""
    return len({(schema, table) for schema, table, _ in found}) < len(found)


def form_of(batch: TypedBatch) -> str:
    """The form :func:`pack` gives ``batch``: ``rows`` where the typed form cannot carry all the mirror needs (see
    the module docstring), else ``typed``."""
    if batch.errors or needs_rows(batch):
        return FORM_ROWS
    if len(batch.layouts) > 1 and two_layouts(table_layouts(batch)):
        return FORM_ROWS
    return FORM_TYPED


def pack(batch: TypedBatch, form: str | None = None) -> Any:
    """``batch`` as one packed row (a pyarrow Table of :func:`packed_schema`), in the form :func:`form_of` says, or
    in ``form`` when the caller has decided it (``rows``: a batch that travels with others of that form; ``typed``:
    one it found :func:`form_of` would give that). The rows form needs the batch's change rows (``TypedBatch.rows``);
    a :class:`PackedBatchError` when it has none."""
    if form is None:
        form = form_of(batch)
    if form == FORM_ROWS:
        if batch.rows is None:
            raise PackedBatchError(
                "this typed batch goes in the rows form (XA transactions, foreign keys' actions, a table in two "
                "layouts, or values that did not convert) but was built without its change rows (rows=)"
            )
        return pack_rows(batch.rows())
    ids = list(batch.layouts)
    layouts = [_columns_json(batch, layout_id) for layout_id in ids]
    images = [stream_bytes(batch.images[layout_id], COMPRESSION) for layout_id in ids]
    return _packed_row(FORM_TYPED, batch.changes, layouts, images)


def pack_rows(rows: Any) -> Any:
    """Change rows (a pyarrow Table or RecordBatch of ``canal.lake.forms.changes`` rows) as one packed row of the rows
    form."""
    return _packed_row(FORM_ROWS, rows, None, None)


def _packed_row(form: str, changes: Any, layouts: list[str] | None, images: list[bytes] | None) -> Any:
    """One packed row: ``changes`` (the metadata table, or the change rows) as its stream, with ``layouts`` and
    ``images`` as given."""
    import pyarrow as pa

    first = changes.column("seq")[0].as_py() if changes.num_rows else None
    row = {
        "form": form,
        "first_seq": first,
        "rows": changes.num_rows,
        "changes": stream_bytes(changes, COMPRESSION),
        "layouts": layouts,
        "images": images,
    }
    return pa.Table.from_pylist([row], schema=packed_schema())


def unpack(row: Mapping[str, Any]) -> Any:
    """A packed row (a mapping of :func:`packed_schema`'s fields: ``form``, ``changes``, ``layouts``, ``images``) as
    what the mirror applies: a :class:`~canal.lake.forms.typed_batch.TypedBatch` (typed form), or a pyarrow Table of
    JSON change rows (rows form)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    form = row.get("form")
    if form == FORM_ROWS:
        return _read_stream(row.get("changes"), "change rows")
    if form != FORM_TYPED:
        raise PackedBatchError(f"a packed batch of form {form!r}: this version reads 'typed' and 'rows'")
    changes = conform_metadata(_read_stream(row.get("changes"), "metadata"))
    if changes.schema != metadata_schema():
        raise PackedBatchError(f"a packed typed batch whose metadata has the schema {changes.schema}")
    described, streams = row.get("layouts") or [], row.get("images") or []
    if len(described) != len(streams):
        raise PackedBatchError(f"a packed typed batch with {len(described)} layouts and {len(streams)} image streams")
    layouts, images = {}, {}
    for columns_json, stream in zip(described, streams, strict=True):
        try:
            layout = layout_from_columns(columns_json)
        except TypedChangeError as exc:
            raise PackedBatchError(f"a packed typed batch's layout: {exc}") from None
        table = _read_stream(stream, f"images of layout {layout.id}")
        if table.schema.names != ["before", "after"]:
            raise PackedBatchError(f"a packed typed batch whose images of layout {layout.id} have {table.schema}")
        layouts[layout.id] = layout
        images[layout.id] = pa.record_batch([column.combine_chunks() for column in table.columns], schema=table.schema)
    named = set(pc.unique(changes.column("layout").combine_chunks().dictionary_decode().drop_null()).to_pylist())
    if not named <= set(layouts):
        raise PackedBatchError(f"a packed typed batch whose rows name layouts {sorted(named - set(layouts))} it lacks")
    return TypedBatch(changes, images, layouts)


def unpack_all(packed: Any) -> Any:
    """The rows of ``packed`` (a pyarrow Table or RecordBatch of packed batches, in stream order) as the one batch the
    mirror applies: a :class:`TypedBatch` when they are typed (none: an empty one), else a table of change rows."""
    import pyarrow as pa

    found = [unpack(row) for row in packed.to_pylist()]
    typed = [batch for batch in found if isinstance(batch, TypedBatch)]
    if len(typed) == len(found):
        return concat_typed(typed)
    if typed:
        raise PackedBatchError(
            f"a batch of {len(found)} packed rows in both forms ({len(typed)} typed): its typed rows' change rows are "
            "not there to join the others"
        )
    return pa.concat_tables(found, promote_options="default") if len(found) > 1 else found[0]


def concat_typed(batches: Sequence[TypedBatch]) -> TypedBatch:
    """Typed batches, in stream order, joined into one: a layout's images appended, the change rows' ``image_row``
    renumbered to where their images are now."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if len(batches) == 1:
        return batches[0]
    if not batches:
        schema = metadata_schema()
        return TypedBatch(schema.empty_table(), {}, {})
    layouts: dict[str, Any] = {}
    parts: dict[str, list[Any]] = {}
    held: dict[str, int] = {}  # per layout, the image rows of the batches before
    changes = []
    for batch in batches:
        shift = {lid: held.get(lid, 0) for lid in batch.layouts}
        for lid, images in batch.images.items():
            parts.setdefault(lid, []).append(images)
            held[lid] = held.get(lid, 0) + images.num_rows
        layouts.update(batch.layouts)
        part = batch.changes
        if any(shift.values()):
            layout = part.column("layout").combine_chunks()
            offsets = pa.array([shift[v] for v in layout.dictionary.to_pylist()], pa.int32()).take(layout.indices)
            where = part.schema.get_field_index("image_row")
            part = part.set_column(where, part.schema.field(where), pc.add(part.column("image_row"), offsets))
        changes.append(part)
    images = {lid: pa.concat_batches(found) for lid, found in parts.items()}
    joined = pa.concat_tables(changes).unify_dictionaries().combine_chunks()
    return TypedBatch(joined, images, layouts)


def _columns_json(batch: TypedBatch, layout_id: str) -> str:
    # spelt as the layout's id was hashed from (canal.lake.forms.typed_layout), so the unpacked layout has the same id
    return json.dumps(batch.layouts[layout_id].describe(), separators=(",", ":"), ensure_ascii=False)


def _read_stream(data: Any, what: str) -> Any:
    import pyarrow as pa

    if not isinstance(data, bytes | bytearray | memoryview):
        raise PackedBatchError(f"a packed batch's {what} are {type(data).__name__}, not bytes")
    try:
        return read_stream(data)
    except (pa.ArrowInvalid, pa.ArrowIOError, OSError) as exc:
        raise PackedBatchError(f"a packed batch's {what} are not an Arrow stream: {exc}") from None
