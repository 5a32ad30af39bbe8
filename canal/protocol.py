"""The change model handed to consumers: entries, row changes, rows, columns, messages.

Field names are canal's (``CanalEntry``) in snake_case. Rows are stored as tuples of values against one shared,
immutable :class:`TableSchema`; :class:`Column` objects are views built on access, so the decoder never allocates an
object per cell.

Values are typed Python objects: ``int`` (unsigned columns in their unsigned range), ``Decimal``, ``float``, ``str``
(decoded with the column's charset), ``bytes``, ``datetime``/``date``/``time``/``timedelta`` with microseconds
(TIMESTAMP values are UTC-aware datetimes), JSON as Python objects, ENUM as its label, SET as a ``frozenset`` of
labels, BIT as ``int``, GEOMETRY as WKB ``bytes``, MySQL 9's VECTOR as a ``list`` of ``float``. MySQL's binary JSON
may also hold ``Decimal``, ``date``, ``datetime``, ``timedelta`` and :class:`JsonOpaque` values. Zero dates that
Python cannot represent stay ``str``, as pymysql returns them. :attr:`Column.text` renders canal's string form of
each value.

Partial row images. Under ``binlog_row_image=MINIMAL`` or ``NOBLOB`` (a server or session setting) a rows event's
images carry only some columns: its columns-present bitmaps say which, once per event. A column an image does not
carry is *absent*, never NULL: its cell in the image tuple is :data:`ABSENT` (a sentinel that is not None and equals
only itself); :meth:`RowData.after_dict` / :meth:`RowData.before_dict` and the column lists leave it out, as canal's
protocol does; :attr:`RowData.after_absent` / :attr:`RowData.before_absent` name the absent columns, and
:meth:`Rows.absent` gives their indexes per rows event. Snapshot rows (``EventType.SNAPSHOT``) are always whole.

Partial JSON updates. MySQL's ``binlog_row_value_options=PARTIAL_JSON`` logs a JSON column an UPDATE changed with
JSON_SET / JSON_REPLACE / JSON_REMOVE as a diff of the document (:class:`~canal.mysql_json.JsonDiff`: REPLACE,
INSERT or REMOVE at a JSON path). Where the before image carries the document (``binlog_row_image=FULL``) the decoder
applies the diff and the after image holds the whole document. Where it does not (MINIMAL, NOBLOB) the after image
cannot: the column is :data:`ABSENT` there, and :attr:`RowData.diffs` (by column index) / :meth:`RowData.json_diffs`
(by name) hold its diffs -- the change the statement made, never the column's value. The rows of one such event
may differ in that column: one row logged whole beside one logged as a diff.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import repeat
from typing import Any, Final, NoReturn, overload

import attrs

from canal.errors import ParseError
from canal.mysql_json import JsonDiff as JsonDiff
from canal.mysql_json import JsonDiffOperation as JsonDiffOperation
from canal.mysql_json import JsonOpaque as JsonOpaque
from canal.mysql_json import json_text as json_text
from canal.position import EntryPosition, SnapshotCursor
from canal.value_text import render_fraction, render_text


class Absent:
    """The type of :data:`ABSENT`: one instance per process, kept so by pickling (a Spark worker's copy is the same
    object), equal only to itself, and neither true nor false -- a test of its truth is a bug (the value is not
    known), so it raises TypeError."""

    __slots__ = ()
    _made: Absent | None = None

    def __new__(cls) -> Absent:
        made = cls._made
        if made is None:
            made = cls._made = super().__new__(cls)
        return made

    def __repr__(self) -> str:
        return "ABSENT"

    def __reduce__(self) -> str:
        return "ABSENT"  # pickled by name: the module's ABSENT, the same object

    def __bool__(self) -> bool:
        raise TypeError("ABSENT (a column the row image does not carry) has no truth value")


ABSENT: Final[Absent] = Absent()
"""The cell of a column a row image does not carry (``binlog_row_image=MINIMAL`` / ``NOBLOB``): not None, which is SQL
NULL. ``value is ABSENT`` tests it."""


class EntryType(enum.IntEnum):
    """canal's ``EntryType`` with its protobuf numbers."""

    TRANSACTIONBEGIN = 1
    ROWDATA = 2
    TRANSACTIONEND = 3
    HEARTBEAT = 4
    GTIDLOG = 5


class EventType(enum.IntEnum):
    """canal's ``EventType`` with its protobuf numbers."""

    INSERT = 1
    UPDATE = 2
    DELETE = 3
    CREATE = 4
    ALTER = 5
    ERASE = 6
    QUERY = 7
    TRUNCATE = 8
    RENAME = 9
    CINDEX = 10
    DINDEX = 11
    GTID = 12
    XACOMMIT = 13
    XAROLLBACK = 14
    MHEARTBEAT = 15
    SNAPSHOT = 16  # pycanal's: a row read by a snapshot, after image only (apply as an upsert); not in canal

    @property
    def is_dml(self) -> bool:
        return self in _DML

    @property
    def is_ddl(self) -> bool:
        return self in _DDL


_DML = frozenset({EventType.INSERT, EventType.UPDATE, EventType.DELETE, EventType.SNAPSHOT})
_DDL = frozenset(
    {
        EventType.CREATE,
        EventType.ALTER,
        EventType.ERASE,
        EventType.TRUNCATE,
        EventType.RENAME,
        EventType.CINDEX,
        EventType.DINDEX,
    }
)


class SqlType(enum.IntEnum):
    """The JDBC ``java.sql.Types`` numbers canal reports as ``sqlType``."""

    BIT = -7
    TINYINT = -6
    SMALLINT = 5
    INTEGER = 4
    BIGINT = -5
    FLOAT = 6
    REAL = 7
    DOUBLE = 8
    DECIMAL = 3
    CHAR = 1
    VARCHAR = 12
    LONGVARCHAR = -1
    DATE = 91
    TIME = 92
    TIMESTAMP = 93
    BINARY = -2
    VARBINARY = -3
    LONGVARBINARY = -4
    BLOB = 2004
    CLOB = 2005
    NULL = 0
    OTHER = 1111


@attrs.frozen(slots=True)
class ColumnMeta:
    """One column of a table as the binlog (and the schema) describe it."""

    name: str
    sql_type: int = SqlType.OTHER  # JDBC type number
    mysql_type: str = ""  # as in SHOW CREATE TABLE, e.g. "decimal(10,2)", "int(10) unsigned"
    is_key: bool = False
    unsigned: bool = False
    nullable: bool = True
    charset: str | None = None  # Python codec name for text columns, None for binary/numeric
    fsp: int = 0  # fractional seconds precision of temporal columns
    labels: tuple[str, ...] = ()  # ENUM / SET labels in definition order


@attrs.frozen(slots=True)
class TableSchema:
    """The immutable column layout shared by every row of a table at one schema version."""

    schema: str
    table: str
    columns: tuple[ColumnMeta, ...]
    names: tuple[str, ...] = attrs.field(init=False)
    key_indexes: tuple[int, ...] = attrs.field(init=False)
    to_dict: Callable[[Sequence[Any]], dict[str, Any]] = attrs.field(init=False, repr=False, eq=False)
    """An image of this layout as ``{column name: value}``, every cell (:data:`ABSENT` ones too:
    :meth:`RowData.after_dict` leaves those out); ValueError for an image of another width."""
    _index: Mapping[str, int] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        names = tuple(c.name for c in self.columns)
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "key_indexes", tuple(i for i, c in enumerate(self.columns) if c.is_key))
        object.__setattr__(self, "to_dict", _image_to_dict(names))
        object.__setattr__(self, "_index", {n: i for i, n in enumerate(names)})

    def __reduce__(self) -> tuple[Any, ...]:
        # rebuilt from its fields: ``to_dict`` is generated code, which pickle cannot carry
        return (TableSchema, (self.schema, self.table, self.columns))

    def renamed(self, schema: str, table: str) -> TableSchema:
        """These columns as table ``schema.table``'s: what is derived from the columns alone (names, keys, the dict
        maker, the name index) is shared, not built again -- a stream over thousands of tables of one definition
        meets a new table at every other transaction."""
        twin: TableSchema = object.__new__(TableSchema)
        object.__setattr__(twin, "schema", schema)
        object.__setattr__(twin, "table", table)
        for shared in ("columns", "names", "key_indexes", "to_dict", "_index"):  # _index: read only
            object.__setattr__(twin, shared, getattr(self, shared))
        return twin

    @property
    def full_name(self) -> str:
        return f"{self.schema}.{self.table}"

    def index_of(self, name: str) -> int:
        """The position of a column by name; raises KeyError naming the table when absent."""
        try:
            return self._index[name]
        except KeyError:
            raise KeyError(f"{self.full_name} has no column {name!r} (columns: {', '.join(self.names)})") from None

    def __len__(self) -> int:
        return len(self.columns)


@attrs.frozen(slots=True)
class Column:
    """A view of one cell: built on access from a row tuple and its :class:`ColumnMeta`."""

    index: int
    name: str
    sql_type: int
    mysql_type: str
    is_key: bool
    updated: bool
    is_null: bool
    value: Any
    fsp: int = 0  # a temporal column's fractional seconds precision: its text shows that many digits

    @property
    def text(self) -> str:
        """canal's string form of the value (``""`` for NULL): what ``SELECT`` prints, as canal's ``getValue()``
        holds it -- a temporal column's fraction with the column's ``fsp`` digits (``.120`` for DATETIME(3),
        ``.000000`` for DATETIME(6)), a YEAR with four digits."""
        value = self.value
        if self.fsp and isinstance(value, dt.datetime | dt.time | dt.timedelta):
            return render_fraction(value, self.fsp)
        if value == 0 and type(value) is int and self.mysql_type.startswith("year"):
            return "0000"  # YEAR's zero (the only value under 1000 it holds) prints as 0000
        return render_text(value)


_TO_DICT: dict[tuple[str, ...], Callable[[Sequence[Any]], dict[str, Any]]] = {}  # by column list
_TO_DICT_LIMIT = 4096  # layouts come and go with DDL; the oldest generated function goes first


def _image_to_dict(names: tuple[str, ...]) -> Callable[[Sequence[Any]], dict[str, Any]]:
    """A function turning an image of these columns into a dict, generated once per column list (layouts with the
    same columns share one) and kept on the :class:`TableSchema`: unpacking into locals and one dict display cost
    well under half of ``dict(zip(names, image))``, and most users read rows as dicts. An image of another width
    raises ValueError."""
    built = _TO_DICT.get(names)
    if built is not None:
        return built
    if names:
        unpack = "".join(f"v{i}, " for i in range(len(names)))
        display = ", ".join(f"{name!r}: v{i}" for i, name in enumerate(names))
        source = f"def to_dict(image):\n    {unpack}= image\n    return {{{display}}}\n"
    else:
        source = "def to_dict(image):\n    () = image\n    return {}\n"
    namespace: dict[str, Any] = {}
    exec(compile(source, "<canal row to dict>", "exec"), namespace)
    made: Callable[[Sequence[Any]], dict[str, Any]] = namespace["to_dict"]
    if len(_TO_DICT) >= _TO_DICT_LIMIT:
        del _TO_DICT[next(iter(_TO_DICT))]
    _TO_DICT[names] = made
    return made


@attrs.frozen(slots=True)
class RowData:
    """One changed row: the before image (UPDATE, DELETE) and the after image (INSERT, UPDATE).

    Images are tuples of values in the order of ``table.columns``. A column the image does not carry (a partial row
    image: ``binlog_row_image=MINIMAL`` or ``NOBLOB``) holds :data:`ABSENT`, never None: the dicts and column lists
    leave it out, :attr:`before_absent` / :attr:`after_absent` name it.
    """

    table: TableSchema
    before: tuple[Any, ...] | None = None
    after: tuple[Any, ...] | None = None
    diffs: Mapping[int, tuple[JsonDiff, ...]] | None = None
    """A partial JSON update's diffs of the JSON columns the after image holds as :data:`ABSENT`, by column index
    (None: the row has none)."""

    def _columns(self, image: tuple[Any, ...] | None, compare_to: tuple[Any, ...] | None, after: bool) -> list[Column]:
        # canal flags `updated` on after-image columns only: all of them for an INSERT, changed ones for an UPDATE
        # (a column the before image does not carry counts as changed, as in canal); absent columns are left out
        if image is None:
            return []
        cols = []
        for i, (meta, value) in enumerate(zip(self.table.columns, image, strict=True)):
            if value is ABSENT:
                continue
            updated = after and (compare_to is None or compare_to[i] is ABSENT or compare_to[i] != value)
            cols.append(
                Column(
                    i, meta.name, meta.sql_type, meta.mysql_type, meta.is_key, updated, value is None, value, meta.fsp
                )
            )
        return cols

    @property
    def before_columns(self) -> list[Column]:
        """The columns the before image carries (canal's ``beforeColumns``)."""
        return self._columns(self.before, self.after, after=False)

    @property
    def after_columns(self) -> list[Column]:
        """The columns the after image carries (canal's ``afterColumns``)."""
        return self._columns(self.after, self.before, after=True)

    def before_dict(self) -> dict[str, Any]:
        """The before image as ``{column name: value}`` (empty for an INSERT; absent columns left out)."""
        return {} if self.before is None else _image_dict(self.table, self.before)

    def after_dict(self) -> dict[str, Any]:
        """The after image as ``{column name: value}`` (empty for a DELETE; absent columns left out)."""
        return {} if self.after is None else _image_dict(self.table, self.after)

    @property
    def before_absent(self) -> tuple[str, ...]:
        """The columns the before image does not carry, in table order (empty: every column, or no before image)."""
        return _absent_names(self.table, self.before)

    @property
    def after_absent(self) -> tuple[str, ...]:
        """The columns the after image does not carry, in table order (empty: every column, or no after image)."""
        return _absent_names(self.table, self.after)

    def json_diffs(self) -> dict[str, tuple[JsonDiff, ...]]:
        """The diffs of a partial JSON update by column name (:attr:`diffs`; empty: none): the columns the after
        image holds as :data:`ABSENT` because the server logged how the statement changed them, not their value."""
        diffs = self.diffs
        if not diffs:
            return {}
        names = self.table.names
        return {names[i]: diffs[i] for i in sorted(diffs)}

    def updated_names(self) -> list[str]:
        """Columns whose value differs between before and after (UPDATE only; every column for INSERT): of a partial
        after image, the columns it carries whose before value differs or is not carried, and those a partial JSON
        update changed (:attr:`diffs`)."""
        after = self.after
        if after is None:
            return []
        names = self.table.names
        before = self.before
        diffs = self.diffs or {}
        if before is None:
            return [n for i, (n, a) in enumerate(zip(names, after, strict=True)) if a is not ABSENT or i in diffs]
        return [
            n
            for i, (n, b, a) in enumerate(zip(names, before, after, strict=True))
            if (a is not ABSENT and (b is ABSENT or b != a)) or i in diffs
        ]

    def key(self) -> tuple[Any, ...]:
        """Primary-key values after the change: from the after image, or the before image of a DELETE -- or where the
        after image does not carry a key column (a MINIMAL image of an UPDATE that kept its key), the before
        image's. A key column neither image carries is :data:`ABSENT`."""
        after, before = self.after, self.before
        image = after if after is not None else before
        if image is None:
            return ()
        if after is None or before is None:
            return tuple(image[i] for i in self.table.key_indexes)
        return tuple(after[i] if after[i] is not ABSENT else before[i] for i in self.table.key_indexes)


def _image_dict(table: TableSchema, image: tuple[Any, ...]) -> dict[str, Any]:
    made = table.to_dict(image)
    if ABSENT in made.values():  # a partial image: a scan in C, as cheap as the dict's building
        return {name: value for name, value in made.items() if value is not ABSENT}
    return made


def _absent_names(table: TableSchema, image: tuple[Any, ...] | None) -> tuple[str, ...]:
    if image is None or ABSENT not in image:
        return ()
    return tuple(name for name, value in zip(table.names, image, strict=True) if value is ABSENT)


# RowData is a frozen attrs class: its generated __init__ sets each slot through object.__setattr__. Rows built by the
# thousand set the three slots through their descriptors instead, about half the cost -- only while RowData has
# exactly these fields, none with a validator or converter.
_ROW_SLOTS: tuple[Callable[[RowData, Any], None], ...] = ()
if [f.name for f in attrs.fields(RowData)] == ["table", "before", "after", "diffs"] and not any(
    f.validator or f.converter for f in attrs.fields(RowData)
):
    _ROW_SLOTS = tuple(RowData.__dict__[name].__set__ for name in ("table", "before", "after", "diffs"))


class Rows(Sequence[RowData]):
    """The rows of one change of one table (``RowChange.rows``), held as images: ``before`` and ``after`` are
    sequences of image tuples, one per row (None: the change has no such images -- an INSERT's before, a DELETE's
    after; an element None: that row has none); ``diffs``, of a partial JSON update, each row's
    :attr:`RowData.diffs` (None: no row has any). A :class:`RowData` is built each time a row is read and kept by
    nobody here.

    Why not a tuple of RowData: every RowData is an object the cyclic garbage collector tracks for as long as it
    lives, and the rows of a store full of entries live long enough to reach its oldest generation, whose
    collections then scan them again and again (a third of a snapshot's time). Image tuples of plain values are
    untracked by the collector the first time it sees them. Immutable by contract, like the entries holding it.
    """

    __slots__ = ("after", "before", "diffs", "table")

    def __init__(
        self,
        table: TableSchema,
        before: Sequence[tuple[Any, ...] | None] | None,
        after: Sequence[tuple[Any, ...] | None] | None,
        diffs: Sequence[Mapping[int, tuple[JsonDiff, ...]] | None] | None = None,
    ) -> None:
        if before is not None and after is not None and len(before) != len(after):
            raise ValueError(f"{len(before)} before images against {len(after)} after images")
        if diffs is not None and (after is None or len(diffs) != len(after)):
            raise ValueError("JSON diffs of rows without an after image apiece")
        self.table = table
        self.before = before
        self.after = after
        self.diffs = diffs

    @classmethod
    def of(cls, rows: Sequence[RowData]) -> Rows:
        """``rows`` as :class:`Rows`: itself when it is one; else its images, with its first row's table."""
        if isinstance(rows, Rows):
            return rows
        if not rows:
            raise ValueError("Rows.of needs at least one row (it takes the table from the first)")
        table = rows[0].table
        if any(r.table is not table for r in rows):
            raise ValueError(f"rows of more than one table in one change (the first: {table.full_name})")
        before = [r.before for r in rows]
        after = [r.after for r in rows]
        diffs = [r.diffs or None for r in rows]
        for images, diffed in ((before, ()), (after, {i for d in diffs if d for i in d})):
            shapes = {
                tuple(v is ABSENT and i not in diffed for i, v in enumerate(image))
                for image in images
                if image is not None and ABSENT in image
            }
            if shapes and (len(shapes) > 1 or any(image is not None and ABSENT not in image for image in images)):
                raise ValueError(
                    f"rows of {table.full_name} whose images carry different columns: one rows event's images carry "
                    "the same columns (its columns-present bitmap; a partial JSON update's diffs aside)"
                )
        return cls(
            table,
            None if before.count(None) == len(before) else before,
            None if after.count(None) == len(after) else after,
            None if diffs.count(None) == len(diffs) else diffs,
        )

    def __len__(self) -> int:
        images = self.after if self.after is not None else self.before
        return 0 if images is None else len(images)

    def absent(self, side: str) -> tuple[int, ...]:
        """The indexes of the columns the ``side`` (``"before"`` / ``"after"``) images of these rows do not carry:
        one set per rows event, as its columns-present bitmap says (empty: every column, or no such images). Read
        from the side's first image; :meth:`of` refuses rows whose images differ in it. Of rows with partial JSON
        updates (``diffs``), the after images' columns differ row by row: :meth:`absent_of` gives each row's."""
        images = self.before if side == "before" else self.after if side == "after" else _no_side(side)
        if not images:
            return ()
        first = next((image for image in images if image is not None), None)
        if first is None or ABSENT not in first:
            return ()
        return tuple(i for i, value in enumerate(first) if value is ABSENT)

    def absent_of(self, side: str) -> list[tuple[int, ...]] | None:
        """Row by row, the indexes of the columns its ``side`` image does not carry, where these rows' images differ
        in them (the after images of a partial JSON update: a column one row logs as a diff, another whole); None
        where :meth:`absent` holds for every row."""
        if side == "before" or self.diffs is None:
            return None
        images = self.after if side == "after" else _no_side(side)
        assert images is not None
        return [() if image is None else tuple(i for i, v in enumerate(image) if v is ABSENT) for image in images]

    def __iter__(self) -> Iterator[RowData]:
        table, n = self.table, len(self)
        befores = repeat(None, n) if self.before is None else self.before
        afters = repeat(None, n) if self.after is None else self.after
        diffs = repeat(None, n) if self.diffs is None else self.diffs
        if not _ROW_SLOTS:
            for b, a, d in zip(befores, afters, diffs, strict=True):
                yield RowData(table, b, a, d)
            return
        new, set_table, set_before, set_after, set_diffs = object.__new__, *_ROW_SLOTS
        for b, a, d in zip(befores, afters, diffs, strict=True):
            row = new(RowData)
            set_table(row, table)
            set_before(row, b)
            set_after(row, a)
            set_diffs(row, d)
            yield row

    @overload
    def __getitem__(self, index: int) -> RowData: ...

    @overload
    def __getitem__(self, index: slice) -> Rows: ...

    def __getitem__(self, index: int | slice) -> RowData | Rows:
        before, after, diffs = self.before, self.after, self.diffs
        if isinstance(index, slice):
            return Rows(
                self.table,
                None if before is None else tuple(before[index]),
                None if after is None else tuple(after[index]),
                None if diffs is None else tuple(diffs[index]),
            )
        return RowData(
            self.table,
            None if before is None else before[index],
            None if after is None else after[index],
            None if diffs is None else diffs[index],
        )

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Rows):
            return (
                self.table == other.table
                and _frozen(self.before) == _frozen(other.before)
                and _frozen(self.after) == _frozen(other.after)
                and _frozen(self.diffs) == _frozen(other.diffs)
            )
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.table, _frozen(self.before), _frozen(self.after)))

    def __repr__(self) -> str:
        return f"Rows({self.table.full_name}, {len(self)} rows)"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Rows, (self.table, _frozen(self.before), _frozen(self.after), _frozen(self.diffs)))


def _no_side(side: str) -> NoReturn:
    raise ValueError(f"side must be 'before' or 'after', not {side!r}")


def _frozen(images: Sequence[Any] | None) -> tuple[Any, ...] | None:
    return None if images is None else tuple(images)


@attrs.frozen(slots=True)
class ColumnForm:
    """What a column of a :class:`ColumnarRows` holds: ``"value"`` -- the object decoder's values; ``"utf8"`` /
    ``"latin1"`` -- the text's bytes in that charset; ``"datetime2"`` -- a DATETIME2's packed integer (``fsp``);
    ``"decimal"`` -- a DECIMAL(``precision``, ``scale``)'s packed bytes. ``to_object`` reads one raw cell as the
    object decoder does (None for ``"value"``); None cells are NULLs in every form."""

    kind: str
    fsp: int = 0
    precision: int = 0
    scale: int = 0
    to_object: Callable[[Any], Any] | None = attrs.field(default=None, eq=False, repr=False)


_Images = Sequence[tuple[Any, ...] | None] | None

RawImage = tuple[tuple[Any, ...] | None, ...]
"""One side's cells of a rows event: per column of the table, the tuple of its cells (one per row), or None for a
column the image leaves out (:data:`ABSENT` in the image tuples)."""


class ColumnarRows(Rows):
    """The rows of one rows event as columns (``columns_before`` / ``columns_after``: a :data:`RawImage` or None for
    a side the event has not), each column in its :class:`ColumnForm` (``forms``). ``before`` and ``after`` are the
    object decoder's image tuples, made on first use."""

    __slots__ = ("_images", "_n", "columns_after", "columns_before", "forms")

    def __init__(
        self,
        table: TableSchema,
        columns_before: RawImage | None,
        columns_after: RawImage | None,
        forms: tuple[ColumnForm, ...],
        n: int,
    ) -> None:
        self.table = table
        self.diffs = None  # a partial JSON update has the object decoder only
        self.columns_before = columns_before
        self.columns_after = columns_after
        self.forms = forms
        self._n = n
        self._images: tuple[_Images, _Images] | None = None

    def _made(self) -> tuple[_Images, _Images]:
        images = self._images
        if images is None:
            images = self._images = (self._tuples(self.columns_before), self._tuples(self.columns_after))
        return images

    def _tuples(self, image: RawImage | None) -> _Images:
        if image is None:
            return None
        n = self._n
        try:
            cells = [
                repeat(ABSENT, n) if col is None else col if form.to_object is None else objects(form, col)
                for col, form in zip(image, self.forms, strict=True)
            ]
        except (ValueError, UnicodeError) as exc:  # what the object decoder refuses at parse time: corrupt bytes
            raise ParseError(f"a row of {self.table.full_name} holds a cell its column cannot hold: {exc}") from None
        return list(zip(*cells, strict=True))

    @property
    def before(self) -> Sequence[tuple[Any, ...] | None] | None:
        return self._made()[0]

    @before.setter
    def before(self, value: Any) -> None:
        raise AttributeError("ColumnarRows are immutable")

    @property
    def after(self) -> Sequence[tuple[Any, ...] | None] | None:
        return self._made()[1]

    @after.setter
    def after(self, value: Any) -> None:
        raise AttributeError("ColumnarRows are immutable")

    def __len__(self) -> int:
        return self._n

    def absent(self, side: str) -> tuple[int, ...]:
        columns = self.columns_before if side == "before" else self.columns_after if side == "after" else _no_side(side)
        if columns is None or self._n == 0 or None not in columns:  # (asked of every rows event: whole images first)
            return ()
        return tuple(i for i, cells in enumerate(columns) if cells is None)


def objects(form: ColumnForm, cells: Sequence[Any]) -> list[Any]:
    """``cells`` of a column in ``form`` as the object decoder's values."""
    read = form.to_object
    if read is None:
        return list(cells)
    return [None if v is None else read(v) for v in cells]


@attrs.frozen(slots=True)
class Header:
    """canal's ``Header``: where an entry came from and what it is about."""

    log_file: str
    log_offset: int
    server_id: int = 0
    execute_time: int = 0  # milliseconds since the epoch
    schema: str = ""
    table: str = ""
    event_type: EventType = EventType.QUERY
    event_length: int = 0
    gtid: str | None = None
    props: Mapping[str, str] = attrs.field(factory=dict)

    @property
    def next_offset(self) -> int:
        return self.log_offset + self.event_length


@attrs.frozen(slots=True)
class RowChange:
    """canal's ``RowChange``: the rows of one row event, or one DDL / query statement."""

    event_type: EventType
    rows: Sequence[RowData] = ()
    is_ddl: bool = False
    sql: str = ""
    ddl_schema: str = ""
    table_id: int = 0
    table: TableSchema | None = None


@attrs.frozen(slots=True)
class Entry:
    """canal's ``Entry``: one transaction begin/end, row change, DDL or heartbeat, with its position.

    ``anchor`` and ``rows_done`` place the entry for cursors (see :mod:`canal.position`): the boundary a restart
    after this entry resumes from, and how many row entries of the open transaction lie at or before it.
    """

    header: Header
    entry_type: EntryType
    row_change: RowChange | None = None
    thread_id: int | None = None  # TRANSACTIONBEGIN
    xid: int | None = None  # TRANSACTIONEND
    anchor: EntryPosition | None = None
    rows_done: int = 0
    snapshot: SnapshotCursor | None = None  # an unfinished snapshot's progress up to this entry (canal.snapshot)

    @property
    def position(self) -> EntryPosition:
        h = self.header
        return EntryPosition(h.log_file, h.log_offset, h.execute_time, h.server_id, h.gtid)

    @property
    def is_boundary(self) -> bool:
        """A transaction end or a DDL outside a transaction: a point a cursor may name as fully consumed.

        A DDL logged inside a transaction (MariaDB's ``CREATE TABLE ... SELECT``: the CREATE, then the rows, then the
        commit) is a row of that transaction (``rows_done`` >= 1), not a boundary."""
        if self.entry_type is EntryType.TRANSACTIONEND:
            return True
        rc = self.row_change
        return self.entry_type is EntryType.ROWDATA and rc is not None and rc.is_ddl and self.rows_done == 0

    @property
    def byte_size(self) -> int:
        """The size the store accounts for in MEMSIZE mode: the binlog event's length, as canal does."""
        return self.header.event_length

    def iter_rows(self) -> Iterator[RowData]:
        return iter(self.row_change.rows) if self.row_change is not None else iter(())


@attrs.frozen(slots=True)
class Message:
    """A batch handed to a consumer: ``id`` is -1 when there was nothing to hand out."""

    id: int
    entries: Sequence[Entry] = ()

    @property
    def is_empty(self) -> bool:
        return not self.entries

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.entries)


EMPTY_MESSAGE_ID = -1
