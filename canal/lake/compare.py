"""Comparing a mirrored table with the source's rows, cell by cell in canal's text form (tests, checks, demos)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from canal.lake import changelog
from canal.protocol import render_text


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
        mirror_table = mirror_table.to_pyarrow_table()
    mirror_rows = mirror_table.to_pylist()
    mirror_cols = set(mirror_table.column_names)
    source_cols = set(rows_from_select[0].keys()) if rows_from_select else mirror_cols
    columns = sorted(mirror_cols & source_cols)

    def keyed(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[str | None, ...], dict[str, str | None]]:
        return {tuple(_text(r[k]) for k in key): {c: _text(r.get(c)) for c in columns} for r in rows}

    src = keyed(rows_from_select)
    mir = keyed(mirror_rows)
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
