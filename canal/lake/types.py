"""MySQL column types to Arrow / Spark types, and canal text back to typed Arrow arrays -- exactly or not at all.

The mapping (:func:`arrow_type`, :func:`spark_type_sql`) is the type model's :func:`canal.sql.types.stored_type`,
which holds every value of the MySQL type: integers int64, but BIGINT UNSIGNED and BIT(64) decimal(20,0); DECIMAL(p,s)
decimal128(p,s) up to 38 digits, beyond that (up to DECIMAL(65,30)) its exact text; FLOAT/DOUBLE float64; DATE
date32; DATETIME/TIMESTAMP timestamp[us] (naive; TIMESTAMP in UTC); TIME as text (-838:59:59 .. 838:59:59 fits no
Arrow time type); binary strings, BLOBs and spatial types (WKB as MySQL stores it) binary; text, ENUM, SET and JSON
string.

A value that does not convert is never turned into NULL: the batch fails with :class:`MirrorTypeError`, naming
the table, column and value. The one choice is MySQL's zero dates ('0000-00-00', '2020-00-00 ...') in DATE,
DATETIME and TIMESTAMP columns, which no date type holds: ``zero_dates="error"`` (the default) fails the batch,
``zero_dates="null"`` stores them as NULL -- an explicit, lossy choice (``DeltaMirror(root, zero_dates="null")``).
Never in a primary-key column, whatever the choice: keys that differ only in a zero date ('0000-00-00' and
'2020-01-00') would become one NULL key, and the mirror would merge rows the source keeps apart; such a key fails
the batch (:func:`column_zero_dates`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final, Literal

from canal.errors import CanalError
from canal.sql import read_column_type
from canal.sql.types import stored_type

ZeroDates = Literal["error", "null"]
ColumnZeroDates = Literal["error", "null", "key"]
"""How one column takes zero dates: a mirror's :data:`ZeroDates`, or ``key`` (a primary-key column: never NULL)."""
_ZERO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")


class MirrorError(CanalError):
    """A batch cannot be mirrored (e.g. a table without a primary key)."""


class MirrorTypeError(MirrorError, ValueError):
    """A value does not convert exactly to its column's Arrow type; nothing of the batch was written."""


class MirrorConversionError(MirrorError):
    """A DDL statement converted a table's values in a way the mirror does not reproduce exactly (an ALTER's MODIFY
    / CHANGE / CONVERT TO CHARACTER SET between types it does not model, a value outside what it models, a time zone
    it cannot know): the server rewrote the rows without logging them, so the mirror stops before writing anything
    of the step. ``table`` (``schema.table``), ``column``, ``from_type``, ``to_type`` and ``statement`` name what
    stopped (None where it is not one column's: a time zone); the table is what a heal reads again."""

    def __init__(
        self,
        message: str,
        *,
        table: str | None = None,
        column: str | None = None,
        from_type: str | None = None,
        to_type: str | None = None,
        statement: str | None = None,
    ) -> None:
        super().__init__(message)
        self.table = table
        self.column = column
        self.from_type = from_type
        self.to_type = to_type
        self.statement = statement

    def __reduce__(self) -> Any:  # pickles with its fields (a Spark task's error travels to the driver)
        fields = (self.table, self.column, self.from_type, self.to_type, self.statement)
        return _conversion_error, (type(self), str(self), fields)


def _conversion_error(cls: type[MirrorConversionError], message: str, fields: tuple[Any, ...]) -> Any:
    table, column, from_type, to_type, statement = fields
    return cls(message, table=table, column=column, from_type=from_type, to_type=to_type, statement=statement)


class MirrorStorageError(MirrorError):
    """A mirror's files cannot be read or written: a damaged Parquet file, a truncated Delta commit, a disk error.
    The error names the mirror's root and what failed; its cause is the error of the library that met it."""


class MirrorUnreachableError(MirrorStorageError):
    """The Spark executors do not see the mirror's root as the driver does (a local path on a cluster whose executors
    run on other hosts): the tasks would write the tables to their own disks. Raised before anything of the batch
    is written; the error names the root."""


class MirrorCheckpointError(MirrorError):
    """Another batch than the one the mirror was writing when it stopped: that batch (its query's, or its journal's)
    applied part of its steps, which a different batch cannot finish. Nothing of the batch was written; run the
    query that was writing the mirror until it goes on (:mod:`canal.lake.identity.applied`)."""


class MirrorLineageError(MirrorError):
    """A batch whose changes have no provable relation to what the mirror applied: positions in another server's
    binlog without GTIDs to tell which changes the mirror has (a failover to a replica), changes of another
    destination than the one the app id mirrors, or a table another app id writes. Nothing of the batch was written
    and none of it skipped; the error names both sides (:mod:`canal.lake.identity.lineage`)."""


class MirrorFoldError(MirrorError):
    """A table's folds failed ``max_fold_failures`` times in a row: the mirror refuses batches until a fold of the
    table succeeds (``DeltaMirror.fold``), so a log that cannot be folded does not grow behind batches acked as
    healthy."""


class MirrorLeaseError(MirrorError):
    """Another live mirror writes the same root under the same app id: two writers would share one step journal and
    one set of staged files, and record each other's batches as done."""


def column_zero_dates(zero_dates: ZeroDates | ColumnZeroDates, is_key: bool) -> ColumnZeroDates:
    """How a column takes zero dates: ``key`` for a primary-key column (a zero date there fails the batch, whatever
    the mirror's choice), else the mirror's ``zero_dates``."""
    return "key" if is_key else zero_dates


def is_zero_date(text: str) -> bool:
    """MySQL's zero date or a date with a zero month or day ('0000-00-00', '2020-00-15 10:00:00'). Year 0 with a
    month and a day ('0000-01-01') is a date like any other, for MySQL and for Arrow."""
    if not _ZERO_DATE.match(text):
        return False
    return text[5:7] == "00" or text[8:10] == "00"


def base_type(mysql_type: str) -> str:
    """The lower-case type name of a column type text (synonyms resolved by :mod:`canal.sql`: integer -> int)."""
    return read_column_type(mysql_type, strict=False).base


def arrow_type(mysql_type: str) -> Any:
    """The Arrow type a mirror stores a MySQL column type as (:func:`canal.sql.types.stored_type`)."""
    import pyarrow as pa

    stored = stored_type(read_column_type(mysql_type, strict=False))
    if stored.kind == "decimal":
        return pa.decimal128(stored.precision, stored.scale)
    simple = {
        "int64": pa.int64(),
        "float64": pa.float64(),
        "date": pa.date32(),
        "timestamp": pa.timestamp("us"),
        "binary": pa.binary(),
        "string": pa.string(),
    }
    return simple[stored.kind]


def check_stored_types(table: str, rows: Any, stored: Any) -> None:
    """A :class:`MirrorTypeError` when ``rows`` (a pyarrow schema: a batch's typed rows of ``table``) carry a column as
    bytes that the mirror table (``stored``, its pyarrow schema) holds as text, or the other way round: the rows' type
    is then not the one the table's DDL declared -- a MariaDB UUID / INET6 / INET4 read with no schema to name it is
    a BINARY(n) to the capture, and its bytes must never pass as a string (nor the mirror hold them as one)."""
    import pyarrow as pa

    def kind(arrow: Any) -> str | None:
        if pa.types.is_binary(arrow) or pa.types.is_large_binary(arrow):
            return "binary"
        if pa.types.is_string(arrow) or pa.types.is_large_string(arrow):
            return "text"
        return None

    stored = pa.schema(stored)  # deltalake's schema is an arro3 one
    names = set(stored.names)
    for field in rows:
        if field.name not in names:
            continue
        held, given = kind(stored.field(field.name).type), kind(field.type)
        if held is not None and given is not None and held != given:
            raise MirrorTypeError(
                f"{table}: column {field.name!r} is {held} in the mirror (as its DDL declared it), the rows carry "
                f"{given}: the capture could not know the column's type (a MariaDB UUID / INET type read without a "
                "schema history is a BINARY(n) to it); this step of the batch was not applied"
            )


def typed_array(texts: Sequence[str | None], target: Any, zero_dates: ColumnZeroDates = "error") -> Any:
    """canal text values as an Arrow array of ``target`` type, value for value; :class:`MirrorTypeError` for a value
    that does not convert (zero dates: see the module docstring)."""
    import pyarrow as pa

    if pa.types.is_binary(target):
        try:
            return pa.array([None if t is None else t.encode("latin-1") for t in texts], type=target)
        except UnicodeEncodeError as exc:
            raise MirrorTypeError(f"value {exc.object!r} is not binary text (a character beyond latin-1)") from None
    return typed_strings(pa.array(texts, type=pa.string()), target, zero_dates)


def typed_strings(strings: Any, target: Any, zero_dates: ColumnZeroDates = "error") -> Any:
    """:func:`typed_array` for canal text already in an Arrow string array (or chunked array), without a trip
    through Python objects: the same values, the same errors, binary as latin-1 bytes."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_binary(target):
        # ASCII text is its own latin-1 encoding, so the UTF-8 bytes can be reinterpreted in place; other text is
        # re-encoded all at once, and text with a character beyond latin-1 takes the per-value path, which raises
        # like typed_array
        if strings.null_count == len(strings) or pc.all(pc.string_is_ascii(strings)).as_py():
            return strings.cast(target)
        encoded = latin1_bytes(strings)
        if encoded is not None:
            return encoded
        texts: list[str | None] = strings.to_pylist()
        return typed_array(texts, target)
    if pa.types.is_string(target):
        return strings
    try:
        return strings.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        if isinstance(strings, pa.ChunkedArray):
            strings = strings.combine_chunks()
        return _cast_exact(strings, target, zero_dates)


def latin1_bytes(strings: Any) -> Any:
    """An Arrow string array (or chunked array) as the binary array of its values' latin-1 encodings; None when a
    value holds a character beyond latin-1 (or a null slot holds bytes, which Arrow allows): the caller then goes
    value by value. canal text spells a binary value as its bytes read as latin-1, one character a byte, so the
    array's whole UTF-8 buffer is decoded and encoded in one call each, and a value's offsets are its character
    offsets -- twice as fast as a call per value for 200-byte values, ten times for 16-byte ones."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(strings, pa.ChunkedArray):
        strings = strings.combine_chunks()
    if not pa.types.is_string(strings.type):  # 32-bit offsets only (a large_string goes value by value)
        return None
    n = len(strings)
    _validity, offsets_buffer, data_buffer = strings.buffers()
    offsets = np.frombuffer(offsets_buffer, np.int32)[strings.offset : strings.offset + n + 1]
    validity = None
    if strings.null_count:
        valid = pc.is_valid(strings)
        if np.diff(offsets)[~valid.to_numpy(zero_copy_only=False)].any():
            return None
        validity = valid.buffers()[1]
    text = b"" if data_buffer is None else memoryview(data_buffer)[offsets[0] : offsets[-1]]
    try:
        encoded = str(text, "utf-8").encode("latin-1")
    except UnicodeError:
        return None
    chars = pc.utf8_length(strings).fill_null(0).to_numpy()
    starts = np.zeros(n + 1, np.int32)
    np.cumsum(chars, out=starts[1:])
    return pa.Array.from_buffers(
        pa.binary(), n, [validity, pa.py_buffer(starts), pa.py_buffer(encoded)], null_count=strings.null_count
    )


_SMALL = 32  # below this many values a failed cast is retried value by value instead of by halves


def _cast_exact(strings: Any, target: Any, zero_dates: ColumnZeroDates) -> Any:
    """Cast value by value semantics, found by halves: a value whose own cast fails is a zero date turned into NULL
    (only with ``zero_dates="null"`` and a date target) or a :class:`MirrorTypeError`."""
    import pyarrow as pa

    try:
        return strings.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    if len(strings) > _SMALL:
        half = len(strings) // 2
        parts = [
            _cast_exact(strings.slice(0, half), target, zero_dates),
            _cast_exact(strings.slice(half), target, zero_dates),
        ]
        return pa.concat_arrays(parts)
    dated = pa.types.is_date(target) or pa.types.is_timestamp(target)
    # each value stays an Arrow array: a round trip through Python objects fails on what Arrow holds and Python's
    # datetime does not (year 0, which MySQL stores and the bulk cast accepts)
    out: list[Any] = []
    for i in range(len(strings)):
        try:
            out.append(strings.slice(i, 1).cast(target))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            text = strings[i].as_py()
            if dated and is_zero_date(text):
                if zero_dates == "null":
                    out.append(pa.nulls(1, target))
                    continue
                if zero_dates == "key":
                    raise MirrorTypeError(
                        f"zero date {text!r} in a primary-key column: no {target} holds it, and as NULL "
                        "(zero_dates='null') keys that differ only in a zero date would become one; the mirror cannot "
                        "hold this table exactly (leave it out, or replace the zero dates in the source)"
                    ) from None
                raise MirrorTypeError(
                    f"zero date {text!r} fits no {target} column; mirror with zero_dates='null' to store it as NULL"
                ) from None
            raise MirrorTypeError(f"value {text!r} does not convert to {target}: {exc}") from None
    return pa.concat_arrays(out) if out else pa.array([], type=target)


_SPARK_TYPES: Final = {
    "int64": "BIGINT",
    "float64": "DOUBLE",
    "date": "DATE",
    "timestamp": "TIMESTAMP_NTZ",
    "binary": "BINARY",
    "string": "STRING",
}


def spark_type_sql(mysql_type: str) -> str:
    """The Spark SQL type name for a MySQL column type (the same :func:`canal.sql.types.stored_type` as
    :func:`arrow_type`)."""
    stored = stored_type(read_column_type(mysql_type, strict=False))
    if stored.kind == "decimal":
        return f"DECIMAL({stored.precision},{stored.scale})"
    return _SPARK_TYPES[stored.kind]
