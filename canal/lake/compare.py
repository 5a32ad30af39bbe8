"""Comparing a mirrored table with the source's rows, cell by cell in canal's text form (tests, checks, demos)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import attrs

from canal.lake.store import changelog, fs
from canal.value_text import render_text


@attrs.frozen(slots=True)
class Comparison:
    """The outcome of :func:`compare`: equal when nothing is missing, extra or different and the columns agree."""

    table: str
    source_rows: int
    mirror_rows: int
    missing: tuple[Any, ...]  # keys in the source, not in the mirror
    extra: tuple[Any, ...]  # keys in the mirror, not in the source
    different: tuple[Any, ...]  # keys whose values differ
    column_mismatch: tuple[str, ...]  # columns in one side only

    @property
    def equal(self) -> bool:
        return not (self.missing or self.extra or self.different or self.column_mismatch)

    def __str__(self) -> str:
        if self.equal:
            return f"{self.table}: {self.source_rows} rows equal"
        return (
            f"{self.table}: source {self.source_rows} rows, mirror {self.mirror_rows}; "
            f"missing {list(self.missing)[:5]}, extra {list(self.extra)[:5]}, "
            f"different {list(self.different)[:5]}, columns {list(self.column_mismatch)}"
        )


def _text(value: Any) -> str | None:
    return None if value is None else render_text(value)


_Unit = Literal["D", "us"]  # numpy's units for a mirror's date and timestamp columns


def _numpy_unit(arrow_type: Any) -> _Unit | None:
    """The numpy unit a date or timestamp column's cells are rendered in; None for other columns."""
    import pyarrow as pa

    if pa.types.is_date(arrow_type):
        return "D"
    if pa.types.is_timestamp(arrow_type):
        return "us"
    return None


def _dated_text(moment: Any, unit: _Unit) -> str:
    """A numpy datetime64 as ``render_text`` spells a date or datetime (isoformat: six fraction digits only when
    there is a fraction). numpy, not Python's ``datetime``: MySQL stores year 0 ('0000-01-01'), which Arrow and numpy
    hold and ``datetime`` does not."""
    import numpy as np

    text = str(np.datetime_as_string(moment, unit=unit)).replace("T", " ")
    return text.removesuffix(".000000")


def _dated_column(column: Any, unit: _Unit) -> list[str | None]:
    """A mirror's date or timestamp column in canal's text form, without Python's ``datetime`` (:func:`_dated_text`)."""
    import pyarrow.compute as pc

    valid = pc.is_valid(column).to_pylist()
    moments = column.to_numpy(zero_copy_only=False).astype(f"datetime64[{unit}]")
    return [_dated_text(m, unit) if ok else None for m, ok in zip(moments, valid, strict=True)]


def _source_dated(value: Any, unit: _Unit) -> str | None:
    """A ``SELECT`` cell of a date or timestamp column in the form of :func:`_dated_column`: a date or datetime as
    canal renders it; text (pymysql's form for a value ``datetime`` cannot hold: year 0, a zero date) through numpy
    when it reads as a date, else as it is -- a zero date stays text and differs from any value the mirror holds."""
    import numpy as np

    if not isinstance(value, str):
        return _text(value)
    try:
        return _dated_text(np.datetime64(value.replace(" ", "T"), unit), unit)
    except ValueError:
        return value


def compare(
    mirror_table: Any,
    rows_from_select: Sequence[Mapping[str, Any]],
    key: Sequence[str],
    *,
    name: str = "",
) -> Comparison:
    """Compare a mirror (a mirrored table's path -- its current state, :func:`changelog.current_state` --, a
    ``DeltaTable`` or a pyarrow Table) with ``SELECT *`` rows (dicts, e.g. from a pymysql ``DictCursor``), cell by
    cell in canal's text form. ``key`` names the primary-key columns."""
    import pyarrow as pa

    if isinstance(mirror_table, str | Path):
        mirror_table = changelog.current_state(mirror_table)
    if not isinstance(mirror_table, pa.Table):
        mirror_table = fs.delta_rows(mirror_table)
    units = {f.name: unit for f in mirror_table.schema if (unit := _numpy_unit(f.type)) is not None}
    dated = {name: _dated_column(mirror_table.column(name), unit) for name, unit in units.items()}
    mirror_rows = mirror_table.drop_columns(list(units)).to_pylist()
    for column, texts in dated.items():
        for row, text in zip(mirror_rows, texts, strict=True):
            row[column] = text  # already text: render_text keeps it
    mirror_cols = set(mirror_table.column_names)
    source_cols = set(rows_from_select[0].keys()) if rows_from_select else mirror_cols
    columns = sorted(mirror_cols & source_cols)

    def keyed(rows: Sequence[Mapping[str, Any]], source: bool) -> dict[tuple[str | None, ...], dict[str, str | None]]:
        def cell(row: Mapping[str, Any], name: str) -> str | None:
            value = row.get(name)
            unit = units.get(name)
            return _source_dated(value, unit) if source and unit is not None else _text(value)

        return {tuple(cell(r, k) for k in key): {c: cell(r, c) for c in columns} for r in rows}

    src = keyed(rows_from_select, True)
    mir = keyed(mirror_rows, False)
    missing = tuple(sorted((k for k in src if k not in mir), key=str))
    extra = tuple(sorted((k for k in mir if k not in src), key=str))
    different = tuple(sorted((k for k in src if k in mir and src[k] != mir[k]), key=str))
    return Comparison(
        table=name,
        source_rows=len(src),
        mirror_rows=len(mir),
        missing=missing,
        extra=extra,
        different=different,
        column_mismatch=tuple(sorted(mirror_cols ^ source_cols)) if rows_from_select else (),
    )
