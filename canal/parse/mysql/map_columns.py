"""A table map's columns against the schema: names from the schema history (or information_schema with the history
off) for a map that carries none, the cross-check of one that names its own (the binlog wins and repairs the
history), the declared types the binlog does not say, the precision of pre-5.6 temporal columns, and the error of a
column type no decoder reads. :class:`~canal.parse.mysql.binlog.EventDecoder` asks these for each new table map."""

from __future__ import annotations

import logging

from canal.errors import ColumnTypeError, SchemaError
from canal.parse.mysql.decoder import (
    BinlogColumn,
    SameColumns,
    TableDecoder,
    TableMapInfo,
    binlog_layout,
    schema_mismatch,
    unreadable_columns,
)
from canal.position import EntryPosition
from canal.schema.history import RECOVERY, ColumnSource, SchemaColumn, SchemaHistory
from canal.sql import read_column_type

log = logging.getLogger("canal.parse.mysql.binlog")  # the decoder's records, as before this module was split off


def history_columns(
    lookup: ColumnSource, info: TableMapInfo, where: str
) -> tuple[list[SchemaColumn] | None, SchemaError | None]:
    """Names from the schema history, checked against the table map: a table it does not hold, or one whose
    columns differ, gets no names and the SchemaError its captured rows will raise."""
    full = f"{info.schema}.{info.table}"
    try:
        found = lookup.columns(info.schema, info.table)
    except SchemaError as exc:
        return None, SchemaError(f"{exc} (rows at {where})", table=full, position=where)
    if found is None:
        why = "the schema history has no such table"
    else:
        why = schema_mismatch(info.columns, found) or ""
        if not why:
            return list(found), None
    return None, SchemaError(
        f"the table map of {full} at {where} carries no column names and does not match the schema history: "
        f"{why}; {RECOVERY}",
        table=full,
        position=where,
    )


def schema_columns(lookup: ColumnSource, info: TableMapInfo) -> list[SchemaColumn] | None:
    """The schema's columns of a table map that names its own (FULL metadata), for the types the binlog does not
    say (:func:`~canal.parse.mysql.decoder.declare_types`); None when the schema does not know the table."""
    try:
        found = lookup.columns(info.schema, info.table)
    except SchemaError:
        return None  # unknown since a DDL the history could not apply: the cross-check says so
    return None if found is None else list(found)


def unreadable_problem(info: TableMapInfo, where: str) -> ColumnTypeError | None:
    """The error of a table map with a column whose binlog type no decoder reads: its rows are not decoded, and
    stop a destination that captures the table (the converter raises it), never one that filters it out."""
    bad = unreadable_columns(info.columns)
    if not bad:
        return None
    c = bad[0]
    column = f"{info.schema}.{info.table}.{c.name if c.name is not None else f'<column {c.index + 1}>'}"
    return ColumnTypeError(
        f"{column} has binlog column type {c.type}, which pycanal cannot decode (table map at {where}): its rows "
        "cannot be captured; filter the table out, or change the column's type",
        table=f"{info.schema}.{info.table}",
        position=where,
        column=column,
        column_type=f"binlog type {c.type}",
    )


def cross_check(
    lookup: ColumnSource,
    info: TableMapInfo,
    dec: TableDecoder,
    log_file: str,
    off: int,
    known: tuple[SameColumns, bytes] | None = None,
) -> None:
    """A table map with names (FULL metadata) against the schema history: the binlog wins; a divergence is
    logged and repairs the history (from this position on). ``known``: the map's columns are those the
    :class:`SameColumns` knows by that key (a history layout they were found to agree with is not compared again)."""
    try:
        found = lookup.columns(info.schema, info.table)
    except SchemaError:
        found = None  # unknown since a DDL it could not apply: the binlog tells it now
    if found is not None:
        if known is not None and known[0].agreed(known[1], found):
            return
        if tuple(f.name for f in found) == dec.schema.names and schema_mismatch(info.columns, found) is None:
            if known is not None:
                known[0].agree(known[1], found)
            return
    previous = None
    if found is not None and isinstance(lookup, SchemaHistory):
        previous = lookup.table(info.schema, info.table)
    layout = binlog_layout(info, dec.schema, previous)
    where = EntryPosition(log_file, off)
    if lookup.repair(where, layout):
        why = "it has no such table" if found is None else schema_mismatch(info.columns, found) or "other names"
        log.warning(
            "the table map of %s.%s at %s:%d differs from the schema history (%s); the binlog wins: the history "
            "takes its layout from here on",
            info.schema,
            info.table,
            log_file,
            off,
            why,
        )


def current_columns(
    lookup: ColumnSource, info: TableMapInfo, warned: set[tuple[str, str]]
) -> list[SchemaColumn] | None:
    """Names from information_schema now (the schema history is off), with a warning once per table."""
    found = lookup.columns(info.schema, info.table)
    fallback = list(found) if found is not None and len(found) == len(info.columns) else None
    if (info.schema, info.table) not in warned:
        warned.add((info.schema, info.table))
        log.warning(
            "binlog table map of %s.%s carries no column names (binlog_row_metadata is not FULL) and the schema "
            "history is off: names %s from information_schema now; rows written before a later DDL may get "
            "wrong names. Turn the schema history on, or set binlog_row_metadata=FULL on the server.",
            info.schema,
            info.table,
            "taken" if fallback is not None else "NOT found (UNKNOWN_COLn used)",
        )
    return fallback


def resolve_legacy_temporal(lookup: ColumnSource, schema: str, table: str, legacy: list[BinlogColumn]) -> None:
    # MariaDB's pre-10.1 fractional temporal formats (mysql56_temporal_format=OFF when the column was created)
    # are logged as plain DATETIME/TIME/TIMESTAMP without their precision: take it from the schema history (or
    # information_schema with the history off)
    try:
        found = lookup.columns(schema, table)
    except SchemaError:
        return  # unknown to the history: its rows of a captured table fail with that error anyway
    if not found:
        return
    for c in legacy:
        if c.index < len(found):
            fsp = read_column_type(found[c.index].column_type, strict=False).fsp
            if fsp and 0 < fsp <= 6:
                c.hires = True
                c.fsp = fsp
