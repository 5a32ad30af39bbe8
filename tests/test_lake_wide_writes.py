"""Parquet files of wide tables are written without dictionary pages (canal.lake.store.fs.WIDE_COLUMNS): a writer
keeps a dictionary encoder for every column, a fixed cost a column that at 1,000 columns held some 60 MB a write."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import CommitProperties, DeltaTable

from canal.lake.own_names import OP
from canal.lake.store import changelog, fs


def _table(width: int, rows: int, shift: int = 0) -> pa.Table:
    columns = {"id": pa.array(range(rows), pa.int32())}
    for i in range(1, width):
        columns[f"c{i}"] = pa.array([f"v{(j + shift) % 3}" for j in range(rows)])  # few values: a dictionary's case
    return pa.table(columns)


def _dictionary_columns(directory: Path, but: frozenset[Path] = frozenset()) -> set[str]:
    """The columns of the Parquet files under ``directory`` (other than ``but``) that have dictionary pages."""
    found: set[str] = set()
    for file in set(directory.glob("*.parquet")) - but:
        meta = pq.ParquetFile(file).metadata
        for group in range(meta.num_row_groups):
            for index in range(meta.num_columns):
                column = meta.row_group(group).column(index)
                if column.has_dictionary_page:
                    found.add(column.path_in_schema)
    return found


@pytest.mark.parametrize("width", [10, fs.WIDE_COLUMNS, fs.WIDE_COLUMNS + 1, 1000])
def test_a_wide_tables_writes_and_merges_have_no_dictionary_pages(tmp_path: Path, width: int) -> None:
    wide = width > fs.WIDE_COLUMNS
    fs.write_delta(tmp_path / "t", _table(width, 50))
    assert bool(_dictionary_columns(tmp_path / "t")) is not wide
    # a fold's MERGE rewrites the rows it changes
    source = _table(width, 50, shift=1).append_column(OP, pa.array(["u"] * 50))
    before = frozenset((tmp_path / "t").glob("*.parquet"))
    table = DeltaTable(str(tmp_path / "t"))
    assert changelog.merge_changes(table, source, "t.id = s.id", CommitProperties())
    assert set((tmp_path / "t").glob("*.parquet")) - before  # the MERGE wrote files: theirs are read
    assert bool(_dictionary_columns(tmp_path / "t", but=before)) is not wide
    table.update_incremental()
    assert table.to_pyarrow_table().sort_by("id") == _table(width, 50, shift=1)
