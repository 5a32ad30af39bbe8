"""Change rows with typed images: the ``canal`` source's ``images=variant`` form.

The same rows as :func:`~canal.lake.forms.changes.entries_to_batch`, in the same order, with the same ``seq`` and the
same metadata columns, except that ``keys``, ``old_keys``, ``before`` and ``after`` are Spark ``VARIANT`` values
(objects of the table's columns, each cell typed: BIGINT, DOUBLE, DECIMAL(p,s), DATE, TIMESTAMP_NTZ, BINARY or
STRING as :func:`canal.lake.types.spark_type_sql` maps the MySQL type; SQL NULL is a variant null) rather than JSON
text of canal text. A reader gets a cell with ``after:qty::int`` or ``variant_get(after, '$.qty', 'int')``, and
:func:`canal.spark.project` types a table's columns without parsing text. ``columns`` still describes the layout. A
partial image's object leaves out the columns it does not carry, which ``before_absent`` / ``after_absent`` name
(``variant_get`` of such a field is SQL NULL: read those columns to tell it from a NULL).

The rows are built from a :class:`~canal.lake.forms.typed_batch.TypedBatch` -- the decoder's values straight into typed
Arrow columns, one layout at a time -- and the variants from those columns by :mod:`canal.lake.forms.variant`'s
vectorized encoder: no value becomes text on the way. A value that has no typed form (a zero date) is a
:class:`~canal.lake.forms.typed_layout.TypedChangeError` naming it; such a source is read with ``images=json``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Final

from canal.lake.forms.changes import CHANGE_SCHEMA_DDL, COLUMN_NAMES, arrow_schema
from canal.lake.forms.typed_batch import TypedBatch, entries_to_typed
from canal.lake.forms.variant import encode, encode_partial, variant_arrow_type
from canal.lake.key_identity import identity_array
from canal.protocol import Entry

IMAGES_VARIANT: Final = "variant"  # the images option's value for this form (canal.spark.options.IMAGE_FORMS)

VARIANT_COLUMNS: Final = ("keys", "old_keys", "before", "after")
"""The change-row columns that are VARIANT values in the ``images=variant`` form."""

_JSON_TYPES: Final = dict(part.split(" ", 1) for part in CHANGE_SCHEMA_DDL.split(", "))
VARIANT_SCHEMA_DDL: Final = ", ".join(
    f"{name} {'VARIANT' if name in VARIANT_COLUMNS else _JSON_TYPES[name]}" for name in COLUMN_NAMES
)
"""The change-row schema of the ``images=variant`` form as a Spark DDL string."""


def variant_arrow_schema() -> Any:
    """:data:`VARIANT_SCHEMA_DDL` as a pyarrow schema (a VARIANT is a struct of two binaries in Arrow)."""
    import pyarrow as pa

    variant = variant_arrow_type()
    return pa.schema([pa.field(f.name, variant) if f.name in VARIANT_COLUMNS else f for f in arrow_schema()])


def entries_to_variant_batch(entries: Iterable[Entry], destination: str, batch: int, first_index: int = 0) -> Any:
    """The change rows of ``entries`` in the ``images=variant`` form, one pyarrow RecordBatch of
    :func:`variant_arrow_schema`."""
    return typed_to_variant_rows(entries_to_typed(entries, destination, batch, first_index))


def typed_to_variant_rows(typed: TypedBatch) -> Any:
    """A typed batch as change rows of :func:`variant_arrow_schema`, in its order."""
    import numpy as np
    import pyarrow as pa

    schema = variant_arrow_schema()
    changes = typed.changes.combine_chunks()
    n = changes.num_rows
    layout_column = changes.column("layout").combine_chunks()
    if not isinstance(layout_column, pa.DictionaryArray):
        layout_column = layout_column.dictionary_encode()
    order = [str(v) for v in layout_column.dictionary.to_pylist()]
    # each layout's encoded images, one after another; a row's image is at its layout's base plus its image_row
    parts: dict[str, list[Any]] = {name: [] for name in VARIANT_COLUMNS}
    bases = np.zeros(len(order) + 1, dtype=np.int64)
    described: list[str] = []
    indices = layout_column.indices.fill_null(0).to_numpy(zero_copy_only=False)
    valid = layout_column.is_valid().to_numpy(zero_copy_only=False)
    image_row = changes.column("image_row").fill_null(0).to_numpy(zero_copy_only=False)
    key_changed = changes.column("key_changed").fill_null(False).to_numpy(zero_copy_only=False)
    for i, layout_id in enumerate(order):
        layout = typed.layouts[layout_id]
        images = typed.images[layout_id]
        count = images.num_rows
        bases[i + 1] = bases[i] + count
        described.append(json.dumps(layout.describe(), separators=(",", ":"), ensure_ascii=False))
        of_layout = valid & (indices == i)
        for side in ("before", "after"):  # a partial image's object leaves out the columns it does not carry
            absent = _by_image_row(changes.column(f"{side}_absent"), of_layout, image_row, count)
            parts[side].append(encode_partial(images.column(side), absent))
        if not layout.key_names:  # a table without a primary key: keys {} (as in JSON), never old keys
            parts["keys"].append(_empty_objects(count))
            parts["old_keys"].append(pa.nulls(count, variant_arrow_type()))
            continue
        parts["keys"].append(encode(_identities(typed.keys(layout_id))))
        # an UPDATE that moved the key: its before image's key, on the image row of that change
        moved = np.zeros(count, dtype=bool)
        moved[image_row[of_layout]] = key_changed[of_layout]
        before_keys = _key_struct(images.column("before"), layout.key_names, ~moved)
        parts["old_keys"].append(encode(_identities(before_keys)))
    at = pa.array(np.where(valid, bases[np.where(valid, indices, 0)] + image_row, 0), mask=~valid)
    columns: dict[str, Any] = {}
    for name in VARIANT_COLUMNS:
        whole = pa.concat_arrays(parts[name]) if parts[name] else pa.array([], variant_arrow_type())
        columns[name] = _whole_fields(whole.take(at)) if n else whole
    columns["columns"] = pa.array(described, pa.string()).take(pa.array(np.where(valid, indices, 0), mask=~valid))
    arrays = [
        columns[field.name] if field.name in columns else changes.column(field.name).combine_chunks().cast(field.type)
        for field in schema
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _by_image_row(column: Any, of_layout: Any, image_row: Any, count: int) -> Any:
    """A change rows' column (strings) as the values of one layout's image rows (``of_layout``: that layout's change
    rows, ``image_row``: each one's image row); null for image rows no change row names."""
    import numpy as np
    import pyarrow as pa

    values = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_dictionary(values.type):
        values = values.cast(pa.string())
    if values.null_count == len(values):
        return pa.nulls(count, pa.string())
    rows = np.flatnonzero(of_layout)
    at = np.full(count, -1, np.int64)
    at[image_row[rows]] = rows
    return values.take(pa.array(at, mask=at < 0))


def _whole_fields(variants: Any) -> Any:
    """Variants whose null rows (no image: a DDL row's, an INSERT's before) hold empty bytes in their fields rather
    than nulls: a VARIANT's fields are not nullable (Spark checks them when it takes the rows as a DataFrame)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not variants.null_count:
        return variants
    fields = list(variant_arrow_type())
    children = [pc.fill_null(variants.field(f.name), pa.scalar(b"", pa.binary())) for f in fields]
    return pa.StructArray.from_arrays(children, fields=fields, mask=pc.invert(variants.is_valid()))


_EMPTY_OBJECT: Final = b"\x02\x00\x00"  # an object (offsets 1 byte wide) of no fields
_NO_NAMES: Final = b"\x11\x00\x00"  # metadata: version 1, sorted, an empty dictionary


def _empty_objects(count: int) -> Any:
    """``count`` variants ``{}``: the keys of a table without a primary key."""
    import pyarrow as pa

    fields = list(variant_arrow_type())
    value = pa.repeat(pa.scalar(_EMPTY_OBJECT, pa.binary()), count)
    metadata = pa.repeat(pa.scalar(_NO_NAMES, pa.binary()), count)
    return pa.StructArray.from_arrays([value, metadata], fields=fields)


def _identities(keys: Any) -> Any:
    """Key cells as the key's identity, as the JSON form's ``keys`` spell them: a float's -0.0 as 0.0
    (:mod:`canal.lake.key_identity`)."""
    import pyarrow as pa

    fields = [keys.type.field(i) for i in range(keys.type.num_fields)]
    arrays = [identity_array(keys.field(i)) for i in range(len(fields))]
    return pa.StructArray.from_arrays(arrays, fields=fields, mask=keys.is_null() if keys.null_count else None)


def _key_struct(before: Any, key_names: list[str], absent: Any) -> Any:
    """The key columns of ``before`` as a struct array, null where ``absent`` (a numpy bool array) is true."""
    import pyarrow as pa

    fields = [before.type.field(name) for name in key_names]
    mask = pa.array(absent | ~before.is_valid().to_numpy(zero_copy_only=False))
    return pa.StructArray.from_arrays([before.field(name) for name in key_names], fields=fields, mask=mask)


assert set(VARIANT_COLUMNS) <= set(COLUMN_NAMES)


def json_rows_to_variant(batch: Any) -> Any:
    """Change rows with JSON images (a RecordBatch of :func:`~canal.lake.forms.changes.arrow_schema`: snapshot ranges
    read by executors, :mod:`canal.spark.chunks`) in the ``images=variant`` form: each layout's images typed by the
    mirror's own parse of canal text (:func:`canal.lake.planning.images.parse_images`), then encoded. A value that does
    not convert is a :class:`~canal.lake.types.MirrorTypeError` naming the column."""
    import numpy as np
    import pyarrow as pa

    described = batch.column("columns").dictionary_encode()
    texts = [str(t) for t in described.dictionary.to_pylist()]
    indices = described.indices.fill_null(0).to_numpy(zero_copy_only=False)
    valid = described.is_valid().to_numpy(zero_copy_only=False)
    n = batch.num_rows
    variant = variant_arrow_type()
    out = {name: pa.nulls(n, variant) for name in VARIANT_COLUMNS}
    for k, text in enumerate(texts):
        layout = json.loads(text)
        keys = [c for c in layout if c[2]]
        rows = np.flatnonzero(valid & (indices == k))
        for name in VARIANT_COLUMNS:
            of_column = keys if name in ("keys", "old_keys") else layout
            images = batch.column(name).take(pa.array(rows))
            present = np.flatnonzero(images.is_valid().to_numpy(zero_copy_only=False))
            if present.size == 0:
                continue
            encoded = (
                _empty_objects(present.size)
                if not of_column
                else encode(_parsed(images.take(pa.array(present)), of_column))
            )
            out[name] = _scatter(out[name], rows[present], encoded)
    arrays = [out[f.name] if f.name in out else batch.column(f.name) for f in variant_arrow_schema()]
    return pa.RecordBatch.from_arrays(arrays, schema=variant_arrow_schema())


def _parsed(texts: Any, columns: list[list[Any]]) -> Any:
    """JSON images (no nulls) of the layout ``columns`` as a struct array of its typed columns."""
    import pyarrow as pa

    from canal.lake.planning.images import parse_images, typed_column
    from canal.lake.types import arrow_type, typed_array

    typed = parse_images(texts, columns)
    if typed is None:  # what the fast parse does not take: value by value, with the same conversion
        objects = [json.loads(t) for t in texts.to_pylist()]
        typed = [
            typed_column(name, lambda n=name, t=mysql_type: typed_array([o.get(n) for o in objects], arrow_type(t)))
            for name, mysql_type, _key in columns
        ]
    fields = [pa.field(name, arrow_type(mysql_type)) for name, mysql_type, _key in columns]
    arrays = [c.combine_chunks() if isinstance(c, pa.ChunkedArray) else c for c in typed]
    return pa.StructArray.from_arrays(arrays, fields=fields)


def _scatter(into: Any, at: Any, values: Any) -> Any:
    """``into`` with its rows ``at`` (ascending numpy positions) replaced by ``values``."""
    import numpy as np
    import pyarrow as pa

    source = np.full(len(into), -1, dtype=np.int64)
    source[at] = np.arange(len(at), dtype=np.int64)
    keep = source < 0
    return pa.concat_arrays([values, into]).take(pa.array(np.where(keep, len(values) + np.arange(len(into)), source)))
