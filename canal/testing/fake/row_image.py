"""Which columns a fake rows event's images carry under ``binlog_row_image`` FULL, MINIMAL or NOBLOB, as MariaDB 10.11
logs them (measured on the test server, for tables with a primary key, with only a UNIQUE NOT NULL key -- which the
server treats as the primary key --, with only nullable unique keys, and with none):

* FULL: every column in every image.
* MINIMAL, a table with a key: a before image (UPDATE, DELETE) of the key's columns; an after image of the columns the
  statement wrote -- an INSERT's named columns (columns left to their defaults are not logged), an UPDATE's SET
  columns (the key's only when the statement sets it). A table without a key: every column, as FULL.
* NOBLOB, a table with a key: every column except the BLOB/TEXT ones (JSON, a LONGTEXT in MariaDB, and GEOMETRY
  included) that are not key columns, in the before image; the after image adds the BLOB/TEXT columns the statement
  wrote (an INSERT's named ones: an INSERT that leaves one to its default does not log it). Without a key: FULL.

The fake knows what a statement wrote from what the test names: ``tx.insert(t, row)``'s keys, ``tx.update(t,
before, after)``'s ``after`` keys.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final, Literal

from canal.protocol import ABSENT, EventType
from canal.sql.types import BLOB_TYPES, GEOMETRY_TYPE_NAMES, TEXT_TYPES
from canal.testing.fake.catalog import Table
from canal.testing.fake.errors import FakeMysqlError

RowImage = Literal["FULL", "MINIMAL", "NOBLOB"]
ROW_IMAGES: Final = ("FULL", "MINIMAL", "NOBLOB")

# the types MariaDB's NOBLOB leaves out (its Field_blob and Field_geom)
_BLOBS: Final = (TEXT_TYPES | BLOB_TYPES | {"json", *GEOMETRY_TYPE_NAMES}) - {"char", "varchar", "binary", "varbinary"}


def checked(row_image: str) -> RowImage:
    """``row_image`` upper-cased, or a FakeMysqlError naming the settings there are."""
    value = row_image.upper()
    if value not in ROW_IMAGES:
        raise FakeMysqlError(f"binlog_row_image must be one of {', '.join(ROW_IMAGES)}, got {row_image!r}")
    return value  # type: ignore[return-value]  # one of ROW_IMAGES


def carried(
    row_image: RowImage, t: Table, kind: EventType, written: Collection[str]
) -> tuple[frozenset[int] | None, frozenset[int] | None]:
    """The column indexes the (before, after) images of a row change of ``t`` carry (None: every column), for a
    statement of ``kind`` that wrote the columns ``written``."""
    keys = frozenset(t.schema.key_indexes)
    if row_image == "FULL" or not keys:
        return None, None
    names = t.schema.names
    wrote = frozenset(i for i, name in enumerate(names) if name in written)
    if row_image == "MINIMAL":
        return keys, (wrote | keys if kind is EventType.INSERT else wrote)
    blobs = frozenset(i for i, c in enumerate(t.columns) if c.base in _BLOBS) - keys
    everything = frozenset(range(len(names)))
    return everything - blobs, everything - (blobs - wrote)


def cut(image: tuple[object, ...] | None, kept: frozenset[int] | None) -> tuple[object, ...] | None:
    """``image`` with the cells of columns outside ``kept`` :data:`~canal.protocol.ABSENT`."""
    if image is None or kept is None:
        return image
    return tuple(value if i in kept else ABSENT for i, value in enumerate(image))
