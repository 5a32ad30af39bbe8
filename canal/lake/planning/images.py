"""Images typed: a table's last changes (JSON images of canal text) as the typed columns of its MERGE source.

The fast path parses the images of a batch with ``pyarrow.json`` (:func:`parse_images`), all the tables of one
layout in one call (a sharded table's shards); what that path does not reproduce exactly (odd JSON, duplicate names,
null images) is parsed in Python value by value (:func:`source_slow`), with the same outcome, errors included. A
value that does not convert exactly is a :class:`~canal.lake.types.MirrorTypeError` naming the table, the column
and the value. :func:`retyped` converts a mirror column to a type a DDL declared.
"""

from __future__ import annotations

import json
from typing import Any

from canal.lake.planning.plan import TablePlan
from canal.lake.store.changelog import OP as OP_COLUMN
from canal.lake.types import (
    MirrorTypeError,
    ZeroDates,
    arrow_type,
    column_zero_dates,
    typed_array,
    typed_strings,
)

_BLOCK = 1 << 20  # pyarrow.json's default block size; a block must hold the longest image


def typed_column(name: str, convert: Any) -> Any:
    """``convert()`` with the column named in a MirrorTypeError."""
    try:
        return convert()
    except MirrorTypeError as exc:
        raise MirrorTypeError(f"column {name!r}: {exc}") from None


def parse_images(texts: Any, layout: Any, zero_dates: ZeroDates = "error") -> list[Any] | None:
    """The layout's columns of JSON images (one object of canal text per value), typed, parsed by pyarrow.json;
    None when the images or the layout are outside what this path reproduces exactly -- the caller then parses them
    in Python. pyarrow.json rejects duplicate names, non-string values, and everything ``json.loads`` rejects, so
    what it accepts reads the same; a null image or one that is not a lone object (checked by the first character
    and the row count) goes to Python."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pj

    n = len(texts)
    if n == 0 or texts.null_count:
        return None
    if not isinstance(layout, list) or not all(
        isinstance(c, list) and len(c) == 3 and isinstance(c[0], str) and isinstance(c[1], str) for c in layout
    ):
        return None
    names = [c[0] for c in layout]
    if len(set(names)) != len(names):
        return None
    if not pc.all(pc.starts_with(texts, "{")).as_py():
        # every line then yields at least one row or an error, so n rows means one object per image
        return None
    longest = pc.max(pc.binary_length(texts)).as_py()
    if longest >= (1 << 30):
        return None
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    # each image followed by a newline, all in one fresh data buffer: that buffer is the newline-delimited text
    wide = pa.large_string()  # 64-bit offsets: a batch's images may exceed 2 GiB together
    lines = pc.binary_join_element_wise(texts.cast(wide), pa.scalar("", wide), pa.scalar("\n", wide))
    _validity, offsets_buffer, data = lines.buffers()
    offsets = pa.Array.from_buffers(pa.int64(), n + 1, [None, offsets_buffer], offset=lines.offset)
    start, end = offsets[0].as_py(), offsets[n].as_py()
    joined = data.slice(start, end - start)
    schema = pa.schema([pa.field(name, pa.string()) for name in names])
    try:
        parsed = pj.read_json(
            pa.BufferReader(joined),
            read_options=pj.ReadOptions(block_size=max(_BLOCK, 2 * (longest + 1))),
            parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"),
        )
    except pa.ArrowException:
        return None
    if parsed.num_rows != n:
        return None
    return [
        typed_column(
            name,
            lambda n=name, t=type_text, k=key: typed_strings(
                parsed.column(n), arrow_type(t), column_zero_dates(zero_dates, bool(k))
            ),
        )
        for name, type_text, key in layout
    ]


def type_sources(plans: list[TablePlan], zero_dates: ZeroDates) -> None:
    """Each plan's MERGE source (``plan.source``, :func:`source`). The images of plans of one layout (a sharded
    table's shards: ``t00`` .. ``t49`` of one definition) are parsed in one call, whose fixed cost a batch spread
    over many such tables would otherwise pay per table; the same layout types them the same way."""
    groups: dict[str, list[TablePlan]] = {}
    for plan in plans:
        assert plan.layout is not None
        groups.setdefault(plan.layout, []).append(plan)
    for layout, group in groups.items():
        if len(group) > 1 and _type_together(layout, group, zero_dates):
            continue
        for plan in group:
            plan.source = source(plan, zero_dates)


def _type_together(layout_text: str, group: list[TablePlan], zero_dates: ZeroDates) -> bool:
    """The sources of ``group`` (plans of the layout ``layout_text``) typed by one parse; False when they were
    not (an image or a value the shared path does not take: each plan is then typed alone, and a value that does
    not convert is named with its table)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if any(plan.deletes is None or plan.keys is None or plan.after is None for plan in group):
        return False
    layout = json.loads(layout_text)

    def chunks(array: Any) -> list[Any]:
        return list(array.chunks) if isinstance(array, pa.ChunkedArray) else [array]

    deletes = pa.chunked_array([c for plan in group for c in chunks(plan.deletes)], pa.bool_())
    keys = pa.chunked_array([c for plan in group for c in chunks(plan.keys)], pa.string())
    after = pa.chunked_array([c for plan in group for c in chunks(plan.after)], pa.string())
    try:
        columns = parse_images(pc.if_else(deletes, keys, after), layout, zero_dates)
    except MirrorTypeError:
        return False
    if columns is None:
        return False
    names = [c[0] for c in layout]
    key_names = [c[0] for c in layout if c[2]]
    arrays = [*columns, pc.if_else(deletes, "d", "u")]
    arrays = [a if isinstance(a, pa.ChunkedArray) else pa.chunked_array([a]) for a in arrays]
    whole = pa.Table.from_arrays(arrays, names=[*names, OP_COLUMN])
    offset = 0
    for plan in group:
        assert plan.deletes is not None
        plan.source = (whole.slice(offset, len(plan.deletes)), key_names)
        offset += len(plan.deletes)
    return True


def source(plan: TablePlan, zero_dates: ZeroDates) -> tuple[Any, list[str]]:
    """The MERGE source: the plan's last changes as typed columns plus the operation column; a value that does
    not convert exactly is a MirrorTypeError naming the table, the column and the value."""
    try:
        return _typed_source(plan, zero_dates)
    except MirrorTypeError as exc:
        raise MirrorTypeError(f"{plan.schema}.{plan.table}: {exc}") from None


def _typed_source(plan: TablePlan, zero_dates: ZeroDates) -> tuple[Any, list[str]]:
    import pyarrow as pa
    import pyarrow.compute as pc

    assert plan.layout is not None
    layout = json.loads(plan.layout)
    names = [c[0] for c in layout]
    key_names = [c[0] for c in layout if c[2]]
    if plan.deletes is None:
        deletes, keys, after = pa.array([], pa.bool_()), pa.array([], pa.string()), pa.array([], pa.string())
    else:
        deletes, keys, after = plan.deletes, plan.keys, plan.after
    columns = parse_images(pc.if_else(deletes, keys, after), layout, zero_dates)
    if columns is None:
        return source_slow(layout, deletes, keys, after, zero_dates), key_names
    arrays = [*columns, pc.if_else(deletes, "d", "u")]
    arrays = [a if isinstance(a, pa.ChunkedArray) else pa.chunked_array([a]) for a in arrays]
    return pa.Table.from_arrays(arrays, names=[*names, OP_COLUMN]), key_names


def source_slow(layout: Any, deletes: Any, keys: Any, after: Any, zero_dates: ZeroDates = "error") -> Any:
    """The MERGE source built in Python, value by value: for the layouts and images the Arrow path does not
    take on (odd JSON, duplicate names, null images), with their original outcome, errors included."""
    import pyarrow as pa

    names = [c[0] for c in layout]
    values: dict[str, list[str | None]] = {n: [] for n in names}
    ops: list[str] = []
    for delete, key, image_text in zip(deletes.to_pylist(), keys.to_pylist(), after.to_pylist(), strict=True):
        image: dict[str, str | None]
        if delete:
            image = json.loads(key)
        else:
            assert image_text is not None
            image = json.loads(image_text)
        for n in names:
            values[n].append(image.get(n))
        ops.append("d" if delete else "u")
    arrays = [
        typed_column(
            n, lambda n=n, t=t, k=k: typed_array(values[n], arrow_type(t), column_zero_dates(zero_dates, bool(k)))
        )
        for n, t, k in layout
    ]
    arrays.append(pa.array(ops, type=pa.string()))
    return pa.Table.from_arrays(arrays, names=[*names, OP_COLUMN])


def retyped(column: Any, kind: Any, what: str) -> Any:
    """A mirror column in a type a DDL declared: a safe Arrow cast where the types allow it in general, else value by
    value through canal text (a BIGINT whose values fit DECIMAL(20,2)); MirrorTypeError for a value that does not
    fit exactly."""
    import pyarrow as pa
    import pyarrow.compute as pc

    source_type = column.type
    if pa.types.is_decimal(source_type) and (
        (pa.types.is_decimal(kind) and kind.scale < source_type.scale) or pa.types.is_integer(kind)
    ):
        # the server rounds a DECIMAL to fewer digits half away from zero (-1.2355 -> -1.24); a value that then
        # does not fit is refused by the server too (its ALTER fails, so none is logged)
        scale = kind.scale if pa.types.is_decimal(kind) else 0
        column = pc.round(column, ndigits=scale, round_mode="half_towards_infinity")
    try:
        return column.cast(kind)  # safe: overflow, truncation and bad text raise
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    try:
        return typed_strings(column.cast(pa.string()), kind)
    except (MirrorTypeError, pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise MirrorTypeError(f"{what} cannot become {kind}: {exc}") from None
