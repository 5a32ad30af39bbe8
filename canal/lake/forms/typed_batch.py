"""Typed change batches: decoded rows straight to typed Arrow columns, one record batch per table layout.

The counterpart of the Spark source's change rows (``canal.lake.forms.changes.entries_to_batch``) without text in
between, and what :class:`~canal.lake.mirror.DeltaMirror` applies without parsing JSON. Where a change row there
carries its images as JSON objects of canal text and its layout as a JSON list on every row, a :class:`TypedBatch`
holds

* ``changes``: one Arrow table of the change metadata, one row per change row, in stream order -- the columns of
  :func:`metadata_schema` (those of a change row without ``keys``, ``old_keys``, ``before``, ``after`` and
  ``columns``, plus ``layout``, ``image_row`` and ``key_changed``);
* ``images``: per layout id, a RecordBatch of two struct columns ``before`` and ``after`` whose fields are the
  layout's columns, typed as a mirror stores them (:func:`canal.lake.types.arrow_type`); a null struct is an image
  the change does not have (an INSERT's before, a DELETE's after). Row ``image_row`` of the batch of layout
  ``layout`` holds the images of a change row; rows of every table of one layout (a sharded table's shards) share
  the batch, in stream order;
* ``layouts``: per layout id, the :class:`~canal.lake.forms.typed_layout.Layout` -- its ``[name, mysql_type, is_key]``
  list, described once per batch.

A partial row image (``binlog_row_image`` MINIMAL / NOBLOB) has a null cell for each column it does not carry, and
its change row names those columns in ``before_absent`` / ``after_absent`` (as a change row does: a JSON list of
names; null for a whole image): a null cell is SQL NULL only where that list does not name its column. A partial
JSON update's diffs of a column its after image does not carry are in ``json_diffs``, as in a change row
(:mod:`canal.lake.forms.json_diffs`). The mirror applies a batch with partial images from its change rows
(:func:`canal.lake.forms.typed_plan.needs_rows`).

The primary key is not copied: it is the key columns of the after image, or of the before image for a DELETE
(:meth:`TypedBatch.keys`); ``key_changed`` says an UPDATE moved it (a change row's ``old_keys`` is then the key
columns of the before image).

Values convert exactly (:mod:`canal.lake.forms.typed_layout`): a value that does not is a
:class:`~canal.lake.forms.typed_layout.TypedChangeError`, or with ``collect_errors=True`` a null cell and a
:class:`~canal.lake.forms.typed_layout.CellError` in ``errors`` (the mirror fails the batch only when it applies that
cell, as it types only each key's last change). Zero dates follow ``zero_dates`` as in the mirror.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import attrs

from canal.lake.forms.json_diffs import diffs_json
from canal.lake.forms.typed_layout import CellError, Layout, layout_of
from canal.lake.types import ZeroDates
from canal.parse.xa import XA_PREPARE_TYPE
from canal.protocol import ColumnarRows, ColumnForm, Entry, EntryType, Rows

SEQ_BITS = 32
"""``seq = batch << SEQ_BITS | index``: at most 2**32 rows per batch."""


def metadata_schema() -> Any:
    """The schema of :attr:`TypedBatch.changes`. Its text columns are dictionary-encoded: their values are the same for
    all the rows of a row event (and mostly for a whole batch), so each row holds a 4-byte index, not the text."""
    import pyarrow as pa

    text = pa.dictionary(pa.int32(), pa.string())
    return pa.schema(
        [
            pa.field("destination", text),
            pa.field("seq", pa.int64()),
            pa.field("schema", text),
            pa.field("table", text),
            pa.field("type", text),
            pa.field("is_ddl", pa.bool_()),
            pa.field("sql", text),
            pa.field("execute_time", pa.timestamp("us", tz="UTC")),
            pa.field("log_file", text),
            pa.field("log_offset", pa.int64()),
            pa.field("row_index", pa.int32()),
            pa.field("gtid", text),
            pa.field("props", text),
            pa.field("layout", text),  # the layout id of a DML row's images, else null
            pa.field("image_row", pa.int32()),  # the row of those images in the layout's batch, else null
            pa.field("key_changed", pa.bool_()),  # an UPDATE that moved the primary key; null for non-DML rows
            pa.field("log_server_id", pa.int64()),  # the server whose binlog holds the position (a change row's)
            pa.field("before_absent", text),  # the columns a partial before image does not carry (JSON), else null
            pa.field("after_absent", text),  # the columns a partial after image does not carry (JSON), else null
            # a partial JSON update's diffs (canal.lake.forms.json_diffs), else null
            pa.field("json_diffs", pa.string()),
        ]
    )


def conform_metadata(changes: Any) -> Any:
    """``changes`` in :func:`metadata_schema`: a batch's metadata written before ``log_server_id`` or the absent
    columns were (a packed batch spooled by an older pycanal) gets them as nulls -- positions of an unknown server,
    which the mirror compares as it did then (:mod:`canal.lake.identity.lineage`), and whole images. Any other schema is
    returned as it is (its reader refuses it)."""
    import pyarrow as pa

    wanted = metadata_schema()
    for name in ("log_server_id", "before_absent", "after_absent", "json_diffs"):
        if name not in changes.column_names:
            changes = changes.append_column(wanted.field(name), pa.nulls(changes.num_rows, wanted.field(name).type))
    return changes.select(wanted.names) if set(wanted.names) == set(changes.column_names) else changes


METADATA_COLUMNS: Final = (
    "destination",
    "seq",
    "schema",
    "table",
    "type",
    "is_ddl",
    "sql",
    "execute_time",
    "log_file",
    "log_offset",
    "row_index",
    "gtid",
    "props",
    "layout",
    "image_row",
    "key_changed",
    "log_server_id",
    "before_absent",
    "after_absent",
    "json_diffs",
)


@attrs.frozen(slots=True)
class TypedBatch:
    """Change rows of a batch, typed (see the module docstring)."""

    changes: Any  # pa.Table in metadata_schema()
    images: Mapping[str, Any]  # layout id -> pa.RecordBatch of struct columns before, after
    layouts: Mapping[str, Layout]
    errors: Mapping[str, tuple[CellError, ...]] = attrs.field(factory=dict)  # layout id -> values not converted
    rows: Callable[[], Any] | None = attrs.field(default=None, eq=False, repr=False)
    """The same batch as JSON change rows, made on demand: what the mirror applies instead when the batch holds what
    only the change-row path follows (XA transactions, foreign keys' actions); None when the maker cannot give them."""
    tables: frozenset[tuple[str, str, str]] | None = attrs.field(default=None, eq=False, repr=False)
    """``(schema, table, layout id)`` of its row changes, where its maker noted them as it went (a reader asks for
    them of every batch it packs: :func:`canal.lake.forms.packed.table_layouts`); None: found from ``changes`` when
    asked."""

    @property
    def num_rows(self) -> int:
        rows: int = self.changes.num_rows
        return rows

    def keys(self, layout: str) -> Any:
        """The primary keys of the rows of ``layout``'s batch: a struct array of the key columns of the after image,
        or of the before image where there is no after image (a DELETE) or the after image does not carry the column
        (a partial image: a key column is never NULL, so its null cell there is one the image lacks)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        images = self.images[layout]
        before, after = images.column("before"), images.column("after")
        names = self.layouts[layout].key_names
        fields = [after.type.field(n) for n in names]
        has_after = pc.is_valid(after)
        arrays = [pc.if_else(has_after, pc.coalesce(after.field(n), before.field(n)), before.field(n)) for n in names]
        return pa.StructArray.from_arrays(arrays, fields=fields)


# the order of the values of _Collector.entries' tuples
_ENTRY_FIELDS: Final = (
    "schema",
    "table",
    "type",
    "is_ddl",
    "sql",
    "execute_time",
    "log_file",
    "log_offset",
    "gtid",
    "props",
    "layout",
    "image_start",
    "log_server_id",
    "before_absent",
    "after_absent",
)


class _Collector:
    """The growing columns of one batch: entry-level fields once per entry (a tuple an entry, transposed and spread
    over its rows at the end), the images per layout, ``key_changed`` per row.

    A layout whose rows all come as whole columns (:class:`~canal.protocol.ColumnarRows` of one form, every column
    in their images) keeps them as they are, in ``columnar``, and its images are typed from them; the first rows of
    it that do not (tuples, a partial image) turn what it kept into tuples."""

    def __init__(self) -> None:
        self.entries: list[tuple[Any, ...]] = []  # per entry, its values in _ENTRY_FIELDS' order
        self.counts: list[int] = []
        self.key_changed: list[bool | None] = []
        self.before: dict[str, list[tuple[Any, ...] | None]] = {}
        self.after: dict[str, list[tuple[Any, ...] | None]] = {}
        self.where: dict[str, str] = {}  # a table of each layout, to name in errors
        self.layouts: dict[str, Layout] = {}
        self.tables: set[tuple[str, str, str]] = set()  # (schema, table, layout id) of the row changes
        self.columnar: dict[str, list[ColumnarRows]] = {}
        self.forms: dict[str, tuple[ColumnForm, ...]] = {}
        self.counts_of: dict[str, int] = {}  # rows of each layout so far
        self.n_rows = 0
        self.diffed: list[tuple[int, str | None, str | None]] = []  # (row, after_absent, json_diffs) of partial JSON

    def entry(
        self,
        entry: Entry,
        schema: str,
        kind: str,
        is_ddl: bool,
        sql: str | None,
        rows: int,
        layout: str | None = None,
        image_start: int | None = None,
        absent: tuple[str | None, str | None] = (None, None),
    ) -> None:
        h = entry.header
        self.entries.append(
            (
                schema,
                h.table,
                kind,
                is_ddl,
                sql,
                h.execute_time * 1000,
                h.log_file,
                h.log_offset,
                h.gtid,
                json.dumps(dict(h.props), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
                if h.props
                else None,
                layout,
                image_start,
                None if entry.anchor is None else entry.anchor.server_id,
                *absent,
            )
        )
        self.counts.append(rows)
        self.n_rows += rows

    def statement(self, entry: Entry, kind: str) -> None:
        rc = entry.row_change
        schema = (rc.ddl_schema if rc is not None else "") or entry.header.schema
        self.entry(entry, schema, kind, False, rc.sql if rc is not None else None, 1)
        self.key_changed.append(None)

    def ddl(self, entry: Entry) -> None:
        rc = entry.row_change
        assert rc is not None
        self.entry(entry, rc.ddl_schema or entry.header.schema, rc.event_type.name, True, rc.sql, 1)
        self.key_changed.append(None)

    def dml(self, entry: Entry, rows: Rows) -> None:
        rc = entry.row_change
        assert rc is not None
        layout = layout_of(rows.table)
        key = layout.id
        n = len(rows)
        absent_before, absent_after = rows.absent("before"), rows.absent("after")  # (of columns: no tuple made)
        forms = rows.forms if isinstance(rows, ColumnarRows) and not absent_before and not absent_after else None
        if key not in self.layouts:
            self.layouts[key] = layout
            self.where[key] = rows.table.full_name
            self.counts_of[key] = 0
            if forms is not None:
                self.columnar[key] = []
                self.forms[key] = forms
            else:
                self.before[key], self.after[key] = [], []
        elif key in self.columnar and forms != self.forms[key]:
            self._to_tuples(key)
        self.tables.add((entry.header.schema, entry.header.table, key))
        codec_absent = (_absent_json(rows, absent_before), _absent_json(rows, absent_after))
        shapes = rows.absent_of("after")
        if shapes is not None:  # a partial JSON update: its rows' after images differ in the columns they carry
            assert rows.diffs is not None
            self.diffed.extend(
                (self.n_rows + i, _absent_json(rows, shape), diffs_json(rows.table, diffs))
                for i, (shape, diffs) in enumerate(zip(shapes, rows.diffs, strict=True))
            )
            codec_absent = (codec_absent[0], None)  # each row's, above
        self.entry(
            entry, entry.header.schema, rc.event_type.name, False, None, n, key, self.counts_of[key], codec_absent
        )
        self.counts_of[key] += n
        if key in self.columnar:
            assert isinstance(rows, ColumnarRows)
            self.columnar[key].append(rows)
            before, after = rows.columns_before, rows.columns_after
            if before is None or after is None:  # an INSERT or a DELETE moves no key
                self.key_changed.extend([False] * n)
            else:
                self.key_changed.extend(layout.keys_changed_columns(rows.forms, before, after, n, self.where[key]))
            return
        nones: list[tuple[Any, ...] | None] = [None] * n
        befores = nones if rows.before is None else list(rows.before)
        afters = nones if rows.after is None else list(rows.after)
        if absent_before or absent_after or shapes is not None:  # a partial image: absent cells typed as nulls, named
            befores = [_nulled(image, absent_before) for image in befores]  # by the change row
            if shapes is None:
                afters = [_nulled(image, absent_after) for image in afters]
            else:
                afters = [_nulled(image, shape) for image, shape in zip(afters, shapes, strict=True)]
        self.before[key].extend(befores)
        self.after[key].extend(afters)
        if rows.before is None or rows.after is None:  # an INSERT or a DELETE moves no key
            self.key_changed.extend([False] * n)
        else:
            kept = [i for i in layout.key_indexes if i in absent_after]  # a key the after image does not carry: kept
            self.key_changed.extend(
                layout.keys_changed(befores, _with_cells(afters, befores, kept) if kept else afters)
            )

    def _to_tuples(self, key: str) -> None:
        before: list[tuple[Any, ...] | None] = []
        after: list[tuple[Any, ...] | None] = []
        for rows in self.columnar.pop(key):
            n = len(rows)
            before.extend([None] * n if rows.before is None else rows.before)
            after.extend([None] * n if rows.after is None else rows.after)
        self.before[key], self.after[key] = before, after
        del self.forms[key]

    def typed(
        self, key: str, zero_dates: ZeroDates, found: list[CellError] | None, before_keys_only: bool
    ) -> tuple[Any, Any]:
        """The typed before and after images of layout ``key``."""
        layout, where = self.layouts[key], self.where[key]
        kept = self.columnar.get(key)
        if kept is None:
            before = layout.typed_image(self.before[key], where, zero_dates, found, "before", before_keys_only)
            return before, layout.typed_image(self.after[key], where, zero_dates, found, "after")
        forms = self.forms[key]
        sides = [[(len(r), r.columns_before) for r in kept], [(len(r), r.columns_after) for r in kept]]
        before = layout.typed_columns(forms, sides[0], where, zero_dates, found, "before", before_keys_only)
        return before, layout.typed_columns(forms, sides[1], where, zero_dates, found, "after")


def _absent_json(rows: Rows, absent: tuple[int, ...]) -> str | None:
    """The names of the columns ``absent`` as a change row's ``before_absent`` / ``after_absent`` text."""
    if not absent:
        return None
    names = rows.table.names
    return json.dumps([names[i] for i in absent], separators=(",", ":"), ensure_ascii=False)


def _nulled(image: tuple[Any, ...] | None, absent: tuple[int, ...]) -> tuple[Any, ...] | None:
    """A partial image with a null cell for each column it does not carry (its change row names them)."""
    if image is None or not absent:
        return image
    cells = list(image)
    for i in absent:
        cells[i] = None
    return tuple(cells)


def _with_cells(
    images: list[tuple[Any, ...] | None], others: list[tuple[Any, ...] | None], indexes: list[int]
) -> list[tuple[Any, ...] | None]:
    """``images`` with the cells at ``indexes`` taken from ``others`` (row by row)."""
    out: list[tuple[Any, ...] | None] = []
    for image, other in zip(images, others, strict=True):
        if image is None or other is None:
            out.append(image)
            continue
        cells = list(image)
        for i in indexes:
            cells[i] = other[i]
        out.append(tuple(cells))
    return out


def _is_xa_end(entry: Entry) -> bool:
    return entry.entry_type is EntryType.TRANSACTIONEND and entry.header.props.get("XA_TYPE") == "XA_END"


def entries_to_typed(
    entries: Iterable[Entry],
    destination: str,
    batch: int,
    first_index: int = 0,
    *,
    zero_dates: ZeroDates = "error",
    collect_errors: bool = False,
    before_keys_only: bool = False,
) -> TypedBatch:
    """The change rows of ``entries`` -- the same rows ``canal.lake.forms.changes.entries_to_batch`` makes, in the same
    order, ``seq`` numbered alike -- as a :class:`TypedBatch`; a
    :class:`~canal.lake.forms.typed_layout.TypedChangeError` for a value that does not convert exactly (nothing is
    returned then), or with ``collect_errors`` a null cell and its :class:`~canal.lake.forms.typed_layout.CellError` in
    ``errors``. ``before_keys_only``: the before images hold the primary key's columns alone (all a mirror reads of
    them: the key a DELETE removes, or an UPDATE moved away from), which halves the work of an UPDATE's images."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    out = _Collector()
    for entry in entries:
        rc = entry.row_change
        if entry.entry_type is not EntryType.ROWDATA or rc is None:
            if _is_xa_end(entry):  # the XA transaction's rows are prepared: say so, with its xid
                out.statement(entry, XA_PREPARE_TYPE)
            continue
        if rc.is_ddl:
            out.ddl(entry)
        elif rc.event_type.is_dml and rc.rows:
            out.dml(entry, Rows.of(rc.rows))
        elif rc.sql and not rc.rows:  # a statement inside a transaction (statement-format DML, ...)
            out.statement(entry, rc.event_type.name)

    images: dict[str, Any] = {}
    errors: dict[str, tuple[CellError, ...]] = {}
    for key in out.layouts:
        found: list[CellError] | None = [] if collect_errors else None
        before, after = out.typed(key, zero_dates, found, before_keys_only)
        images[key] = pa.RecordBatch.from_arrays([before, after], names=["before", "after"])
        if found:
            errors[key] = tuple(found)

    schema = metadata_schema()
    counts = np.asarray(out.counts, dtype=np.int64)
    n_rows = int(counts.sum())
    spread = pa.array(np.repeat(np.arange(len(counts), dtype=np.int64), counts))
    starts = np.cumsum(counts) - counts
    row_index = np.arange(n_rows, dtype=np.int64) - np.repeat(starts, counts)
    first = (batch << SEQ_BITS) + first_index
    by_field = list(zip(*out.entries, strict=True)) or [()] * len(_ENTRY_FIELDS)  # no entries: every field empty
    per_entry = dict(zip(_ENTRY_FIELDS, by_field, strict=True))
    image_start = pa.array(per_entry.pop("image_start"), pa.int64()).take(spread)
    arrays: dict[str, Any] = {
        "destination": pa.DictionaryArray.from_arrays(
            pa.array(np.zeros(n_rows, dtype=np.int32)), pa.array([destination], pa.string())
        ),
        "seq": pa.array(np.arange(first, first + n_rows, dtype=np.int64)),
        "row_index": pa.array(row_index.astype(np.int32)),
        # rows of one entry are consecutive in their layout's batch: its first row plus the row's index
        "image_row": pc.add(image_start, pa.array(row_index)).cast(pa.int32()),
        "key_changed": pa.array(out.key_changed, pa.bool_()),
    }
    for name, values in per_entry.items():
        field = schema.field(name)
        if pa.types.is_dictionary(field.type):
            # one dictionary entry per distinct value (a dictionary with repeated values would split group-bys)
            encoded = pa.array(values, pa.string()).dictionary_encode()
            arrays[name] = pa.DictionaryArray.from_arrays(encoded.indices.take(spread), encoded.dictionary)
            continue
        column = (
            pa.array(values, pa.int64()).cast(field.type) if name == "execute_time" else pa.array(values, field.type)
        )
        arrays[name] = column.take(spread)
    arrays["json_diffs"] = pa.nulls(n_rows, pa.string())
    if out.diffed:
        after_absent = arrays["after_absent"].cast(pa.string()).to_pylist()
        json_diffs: list[str | None] = [None] * n_rows
        for row, absent, diffs in out.diffed:
            after_absent[row], json_diffs[row] = absent, diffs
        arrays["after_absent"] = pa.array(after_absent, pa.string()).dictionary_encode()
        arrays["json_diffs"] = pa.array(json_diffs, pa.string())
    changes = pa.Table.from_arrays([arrays[f.name] for f in schema], schema=schema)
    return TypedBatch(changes, images, dict(out.layouts), errors, tables=frozenset(out.tables))
