"""Change rows whose images are VARIANT values (the ``canal`` source's ``images=variant`` form) as the mirror reads
them: a :class:`~canal.lake.forms.typed_batch.TypedBatch`.

Each layout's rows (by their ``columns`` text, :func:`~canal.lake.forms.typed_layout.layout_from_columns`) have their
``before`` and ``after`` variants decoded into the layout's typed columns by :mod:`canal.lake.forms.variant` -- with no
text on the way, and a :class:`~canal.lake.forms.variant.VariantError` for a variant that is not an image of that
layout, never a value turned into NULL. What the mirror follows only in JSON change rows (XA transactions, foreign keys'
actions) gets them from the typed images (``TypedBatch.rows``), each cell spelt as canal text as the mirror spells the
rows it reads back (:func:`canal.lake.forms.cell_text.column_texts`: rendered by Arrow, never through Python's dates,
which hold no year 0), so keys group alike within and across such batches.
"""

from __future__ import annotations

import json
from typing import Any

from canal.lake.forms.cell_text import column_texts
from canal.lake.forms.typed_batch import TypedBatch, metadata_schema
from canal.lake.forms.typed_layout import Layout, layout_from_columns
from canal.lake.forms.variant import decode, decode_partial
from canal.lake.key_identity import is_float_type, key_text
from canal.lake.planning.plan import in_order

IMAGE_COLUMNS = ("keys", "old_keys", "before", "after")


def holds_variants(table: Any) -> bool:
    """Whether change rows ``table`` (a pyarrow Table or RecordBatch) carry their images as VARIANT values."""
    import pyarrow as pa

    if "after" not in table.schema.names:
        return False
    kind = table.schema.field("after").type
    return bool(pa.types.is_struct(kind)) and {kind.field(i).name for i in range(kind.num_fields)} == {
        "value",
        "metadata",
    }


def variant_rows_to_typed(table: Any) -> TypedBatch:
    """Change rows with VARIANT images (a pyarrow Table or RecordBatch) as a typed batch of the same rows, in
    ``seq`` order."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    table = in_order(table).combine_chunks()
    n = table.num_rows
    described = table.column("columns").combine_chunks().dictionary_encode()
    texts = [str(t) for t in described.dictionary.to_pylist()]
    indices = described.indices.fill_null(0).to_numpy(zero_copy_only=False)
    valid = described.is_valid().to_numpy(zero_copy_only=False)
    dml = valid & ~table.column("is_ddl").combine_chunks().fill_null(False).to_numpy(zero_copy_only=False)
    image_row = np.zeros(n, dtype=np.int32)
    layout_of_row: list[str | None] = [None] * len(texts)
    images: dict[str, Any] = {}
    layouts: dict[str, Layout] = {}
    picked: dict[str, Any] = {}  # layout id -> the table's rows of its images, in image order
    for k, text in enumerate(texts):
        layout = layout_from_columns(text)
        rows = np.flatnonzero(dml & (indices == k))
        if rows.size == 0:
            continue
        at = pa.array(rows)
        image_row[rows] = np.arange(rows.size, dtype=np.int32)
        # the mirror reads only the key of a before image (a DELETE's, or an UPDATE's old key)
        before = _keys_of(_decoded(table, "before", at, layout), layout.key_names)
        after = _decoded(table, "after", at, layout)
        if layout.id in images:  # two spellings of one layout: one batch of images
            known = images[layout.id]
            image_row[rows] += known.num_rows
            picked[layout.id] = np.concatenate([picked[layout.id], rows])
            before = pa.concat_arrays([known.column("before"), before])
            after = pa.concat_arrays([known.column("after"), after])
        else:
            picked[layout.id] = rows
        images[layout.id] = pa.RecordBatch.from_arrays([before, after], names=["before", "after"])
        layouts[layout.id] = layout
        layout_of_row[k] = layout.id
    ids = pa.array(layout_of_row, pa.string()).take(pa.array(np.where(dml, indices, 0), mask=~dml))
    schema = metadata_schema()
    arrays: dict[str, Any] = {
        "layout": ids,
        "image_row": pa.array(image_row, mask=~dml),
        "key_changed": pa.array(
            pc.is_valid(table.column("old_keys")).combine_chunks().to_numpy(zero_copy_only=False), mask=~dml
        ),
    }
    columns = []
    for field in schema:
        if field.name in arrays:
            column = arrays[field.name]
        elif field.name in table.schema.names:
            column = table.column(field.name).combine_chunks()
        else:
            column = pa.nulls(n, pa.string() if pa.types.is_dictionary(field.type) else field.type)
        if pa.types.is_dictionary(field.type):
            column = column.cast(pa.string()).dictionary_encode()
        columns.append(column.cast(field.type))
    changes = pa.Table.from_arrays(columns, schema=schema)

    def rendered() -> Any:
        # the whole before images, which foreign keys' actions read (the typed batch holds their keys alone)
        whole = {
            layout_id: batch.set_column(
                0, "before", _decoded(table, "before", pa.array(picked[layout_id]), layouts[layout_id])
            )
            for layout_id, batch in images.items()
        }
        return _json_rows(table, changes, whole, layouts)

    return TypedBatch(changes, images, layouts, rows=rendered)


def _decoded(table: Any, side: str, at: Any, layout: Layout) -> Any:
    """The ``side`` images of ``table``'s rows ``at`` decoded into ``layout``'s typed columns: a partial image's
    object holds the columns it carries (``before_absent`` / ``after_absent`` name the others, nulls here)."""
    variants = table.column(side).take(at)
    if f"{side}_absent" not in table.schema.names:
        return decode(variants, layout.image_type)
    absent = table.column(f"{side}_absent").take(at).combine_chunks()
    return decode_partial(variants, layout.image_type, absent)


def _keys_of(images: Any, key_names: list[str]) -> Any:
    """The key columns of struct array ``images`` (all of them for a layout without a key), nulls kept."""
    import pyarrow as pa

    if not key_names:
        return images
    fields = [images.type.field(name) for name in key_names]
    mask = images.is_null() if images.null_count else None
    return pa.StructArray.from_arrays([images.field(name) for name in key_names], fields=fields, mask=mask)


def _json_rows(table: Any, changes: Any, images: dict[str, Any], layouts: dict[str, Layout]) -> Any:
    """``table`` with its images as JSON text of canal text (the change-row form the mirror's XA and cascade
    paths read), from the decoded images ``images``."""
    import pyarrow as pa

    values: dict[str, list[dict[str, str | None] | None]] = {}
    for layout_id, batch in images.items():
        values[f"{layout_id}.before"] = _image_texts(batch.column("before"))
        values[f"{layout_id}.after"] = _image_texts(batch.column("after"))
    out: dict[str, list[str | None]] = {name: [] for name in IMAGE_COLUMNS}
    for layout_id, row, moved, before_absent, after_absent in zip(
        changes.column("layout").to_pylist(),
        changes.column("image_row").to_pylist(),
        changes.column("key_changed").to_pylist(),
        changes.column("before_absent").to_pylist(),
        changes.column("after_absent").to_pylist(),
        strict=True,
    ):
        if layout_id is None:
            for name in IMAGE_COLUMNS:
                out[name].append(None)
            continue
        before = _carried(values[f"{layout_id}.before"][row], before_absent)
        after = _carried(values[f"{layout_id}.after"][row], after_absent)
        layout = layouts[layout_id]
        key_names = layout.key_names
        floats = {name for name, mysql_type, _key in layout.columns if is_float_type(mysql_type)}
        out["before"].append(_text(before))
        out["after"].append(_text(after))
        key = after if before is None else before if after is None else {**before, **after}  # after's, else before's
        out["keys"].append(_text(_pick(key, key_names, floats)))
        out["old_keys"].append(_text(_pick(before, key_names, floats)) if moved else None)
    replaced = table
    for name in IMAGE_COLUMNS:
        if name in replaced.schema.names:
            index = replaced.schema.get_field_index(name)
            replaced = replaced.set_column(index, name, pa.array(out[name], pa.string()))
    return replaced


def _image_texts(images: Any) -> list[dict[str, str | None] | None]:
    """A struct array of typed images as each image's cells in canal text (None: no image)."""
    fields = [images.type.field(i).name for i in range(images.type.num_fields)]
    columns = [column_texts(images.field(i)) for i in range(len(fields))]
    present = images.is_valid().to_pylist()
    return [
        dict(zip(fields, cells, strict=True)) if there else None
        for there, *cells in zip(present, *columns, strict=True)
    ]


def _carried(image: dict[str, str | None] | None, absent: str | None) -> dict[str, str | None] | None:
    """A decoded image without the columns it does not carry (``absent``: their JSON list, or None)."""
    if image is None or absent is None:
        return image
    left_out = set(json.loads(absent))
    return {name: value for name, value in image.items() if name not in left_out}


def _pick(image: dict[str, str | None] | None, names: list[str], floats: set[str]) -> dict[str, str | None] | None:
    """A key of ``image``: its cells as the key's identity (a FLOAT / DOUBLE's -0.0 as 0.0: ``floats`` names those
    columns), as the source spells keys (a key column the image does not carry is left out)."""
    if image is None:
        return None
    return {name: key_text(image[name]) if name in floats else image[name] for name in names if name in image}


def _text(image: dict[str, str | None] | None) -> str | None:
    """An image as a change row's JSON holds it: compact, each value its canal text, SQL NULL as null."""
    if image is None:
        return None
    return json.dumps(image, ensure_ascii=False, separators=(",", ":"))
