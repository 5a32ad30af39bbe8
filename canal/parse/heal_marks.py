"""The mark of a heal on the entry where it starts: which captured tables' rows are void from there, and why.

Where the server changed a captured table's rows without logging them, the capture (under the default
``heal="snapshot"``, :class:`~canal.config.HealMode`) hands the entry of that point off with the header prop
:data:`HEAL` and reads the tables again in the stream (:mod:`canal.snapshot.heal`). The prop is a JSON object:

``why``
    what made the rows unknown: the statement contract's shape (``TRUNCATE PARTITION``, ``RENAME TABLE onto a
    captured name``, ...; :mod:`canal.sql.contract`), :data:`PARTIAL_IMAGE`, :data:`CONVERSION` or
    :data:`RENAMED_WHILE_READ`;
``at``
    the event's position, ``file:offset``; ``statement``: the statement shortened, string literals left out;
``tables``
    one object per table: ``schema``, ``table``, ``pass`` (the index in the snapshot's list of tables of the read
    that heals it -- its SNAPSHOT entries carry it as ``snapshot.table_index``), and ``create``: the table's layout
    after the point as ``CREATE TABLE`` text from the schema history, ``null`` when the table no longer exists; no
    ``create`` when the layout is not known (no schema history, or one that already holds later DDL: a first start
    at an old position on a server that logs column names).

For a consumer keeping copies of tables: every row it holds of those tables is void at this entry (drop them, or the
table: its layout may have changed); the rows of later entries and the SNAPSHOT rows of the heal rebuild it, and the
table is whole again at its SNAPSHOT entry with ``snapshot.table_done`` ``true`` and ``snapshot.table_index`` equal to
its ``pass``. The statement itself (its ``sql``) need not be applied. The mirror does exactly that
(:mod:`canal.lake.apply.heals`).

Besides statements (:mod:`canal.parse.unmodeled`), two kinds of change heal, judged on the entry:

* :data:`PARTIAL_IMAGE` -- a rows event whose images a copy cannot apply (``binlog_row_image`` MINIMAL / NOBLOB): an
  INSERT that does not carry every column (the server filled the others with defaults the binlog does not say), or
  an image that carries no whole key (the row it changed cannot be found); :func:`partial_image`;
* :data:`CONVERSION` -- an ALTER TABLE whose conversion of existing values a copy cannot repeat exactly
  (:func:`canal.schema.conversions.unrepeatable`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Final

import attrs

from canal.errors import SchemaError
from canal.names import qualified
from canal.protocol import ColumnarRows, Entry, EventType, Rows
from canal.schema.catalog import TableDef
from canal.sql.contract import Follow, Shape

__all__ = [
    "CASCADE_OUT_OF_CAPTURE",
    "CONVERSION",
    "HEAL",
    "PARTIAL_IMAGE",
    "RENAMED_WHILE_READ",
    "SNAPSHOT_PENDING",
    "HealMark",
    "HealedTable",
    "heal_mark",
    "partial_image",
    "with_layouts",
]

HEAL: Final = "HEAL"
"""Header prop of the entry a heal starts at (module docstring)."""

SNAPSHOT_PENDING: Final = "SNAPSHOT_PENDING"
"""Header prop (``"true"``) of an UPDATE with partial after images (``binlog_row_image`` MINIMAL / NOBLOB) of a table a
snapshot in the stream -- a heal's, or any -- still reads: a copy that does not hold a row it updates skips that row,
for the snapshot brings it, the update's columns written over (:mod:`canal.snapshot.window`)."""

PARTIAL_IMAGE: Final = Shape(
    "partial row image",
    Follow.STOP,
    "an INSERT that does not carry every column (binlog_row_image MINIMAL / NOBLOB: the others took defaults the "
    "binlog does not say), or an image without its whole key: a copy cannot apply it",
    "Row images",
    heals=True,
)
RENAMED_WHILE_READ: Final = Shape(
    "RENAME of a table a snapshot still reads",
    Follow.STOP,
    "a captured table renamed to a captured name before the snapshot in the stream (the initial one, a heal's) "
    "read all of it: the read, which finds no table under the old name, goes on under the new one",
    "Tables",
    heals=True,
)
CASCADE_OUT_OF_CAPTURE: Final = Shape(
    "a foreign key's action from a table the filter leaves out",
    Follow.STOP,
    "MariaDB logs only the parent's row change of an ON DELETE / ON UPDATE CASCADE or SET NULL: with the parent "
    "left out of the capture, what the action did to its captured children is in no entry",
    "Rows logged as statements",
    heals=True,
)
CONVERSION: Final = Shape(
    "ALTER TABLE converting values a copy cannot repeat",
    Follow.STOP,
    "a type change, NOT NULL, character set, time zone or added column whose values the server computed for the "
    "existing rows in a way a copy cannot repeat exactly from the rows it holds",
    "ALTER TABLE actions",
    heals=True,
)


@attrs.frozen(slots=True)
class HealedTable:
    """One table a heal reads again: ``pass`` is the index of that read in the snapshot's list of tables;
    ``create`` its layout after the point (``CREATE TABLE`` text), None when it no longer exists; ``known``: False
    when the layout is not known (then ``create`` is None too)."""

    schema: str
    table: str
    pass_: int = 0
    create: str | None = None
    known: bool = False

    @property
    def full_name(self) -> str:
        return qualified(self.schema, self.table)

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"schema": self.schema, "table": self.table, "pass": self.pass_}
        if self.known:
            out["create"] = self.create
        return out


@attrs.frozen(slots=True)
class HealMark:
    """A :data:`HEAL` prop, read."""

    why: str
    at: str
    statement: str
    tables: tuple[HealedTable, ...]

    def prop(self) -> str:
        return json.dumps(
            {"why": self.why, "at": self.at, "statement": self.statement, "tables": [t.to_dict() for t in self.tables]},
            ensure_ascii=False,
            separators=(",", ":"),
        )


def heal_mark(props: Mapping[str, str] | None) -> HealMark | None:
    """The heal an entry's (or change row's) props mark; None without one."""
    text = None if not props else props.get(HEAL)
    if not text:
        return None
    doc = json.loads(text)
    tables = tuple(
        HealedTable(
            str(t["schema"]),
            str(t["table"]),
            int(t.get("pass", 0)),
            None if t.get("create") is None else str(t["create"]),
            "create" in t,
        )
        for t in doc.get("tables", ())
    )
    return HealMark(str(doc.get("why", "")), str(doc.get("at", "")), str(doc.get("statement", "")), tables)


LayoutOf = Callable[[str, str], TableDef | None]
"""``layout(schema, table)``: the table's layout now (None: no such table); SchemaError when it is not known."""


def with_layouts(entry: Entry, layout: LayoutOf | None, *, mariadb: bool) -> Entry:
    """``entry`` with its :data:`HEAL` mark's tables given their layouts after it (``layout``, the schema history's,
    asked once the history followed the entry's statement): what a copy creates each table anew with. Without a
    history (``layout`` None) the layouts stay unknown."""
    mark = heal_mark(entry.header.props)
    if mark is None or layout is None:
        return entry
    tables = []
    for healed in mark.tables:
        try:
            found = layout(healed.schema, healed.table)
        except SchemaError:  # the history lost the table's layout: unknown
            tables.append(attrs.evolve(healed, create=None, known=False))
            continue
        create = None if found is None else found.show_create(mariadb=mariadb, qualified=True)
        tables.append(attrs.evolve(healed, create=create, known=True))
    marked = attrs.evolve(mark, tables=tuple(tables)).prop()
    header = attrs.evolve(entry.header, props={**entry.header.props, HEAL: marked})
    return attrs.evolve(entry, header=header)


def partial_image(entry: Entry) -> str | None:
    """Why a copy cannot apply a rows entry's images (a partial row image: ``binlog_row_image`` MINIMAL / NOBLOB),
    or None (whole images, or partial ones a copy applies: an UPDATE or DELETE found by its key)."""
    rc = entry.row_change
    if rc is None or rc.is_ddl or not rc.event_type.is_dml:
        return None
    rows = rc.rows
    if not isinstance(rows, Rows | ColumnarRows) or not len(rows):
        return None
    after = rows.absent("after")
    if rc.event_type is EventType.INSERT:
        if not after:
            return None
        names = rows.table.names
        return f"an INSERT that does not carry {', '.join(names[i] for i in after)}"
    before = rows.absent("before")
    if not before and not after:
        return None
    keys = rows.table.key_indexes
    if not keys:
        return None  # a table without a key: a copy refuses it (it needs one) whatever its images
    has_after = rc.event_type is EventType.UPDATE  # (a DELETE logs its before image only)
    missing = [k for k in keys if k in before and (not has_after or k in after)]
    if not missing:
        return None
    names = rows.table.names
    return f"an image without its whole key ({', '.join(names[i] for i in keys)})"


def tables_of(mark: HealMark) -> Sequence[str]:
    """The ``db.table`` names a mark heals, in order."""
    return [t.full_name for t in mark.tables]
