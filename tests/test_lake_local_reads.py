"""A local mirror table is read through Arrow's own file system (canal.lake.store.fs.delta_rows / delta_pieces).

Read through a Python one (``pyarrow.fs.PyFileSystem`` over deltalake's handler), a process that read a table and
then exited aborted now and then with "terminate called without an active exception" (the README's quick start
about one run in seven; a table of 40 files read and the interpreter left at once, 3 runs in 15): the scan's
read-ahead was still finishing on Arrow's threads after ``to_table`` returned, the thread that dropped the last
reference to the Python file system took the GIL to release it, and during the interpreter's exit Python ends such
a thread inside C++. Arrow's file system needs no GIL, whichever thread releases it. An object store's table is still
read through deltalake's handler (tests/test_mirror_s3.py reads those).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pa_fs
import pytest
from deltalake import DeltaTable

from canal.lake.store import fs


@pytest.mark.parametrize("name", ["plain", "odd dir é %x #/t b"], ids=["plain", "odd"])  # escaped in a URI
def test_a_local_tables_files_are_read_without_a_python_file_system(tmp_path: Path, name: str) -> None:
    location = tmp_path / name
    for part in range(3):  # three data files
        fs.write_delta(location, pa.table({"id": [part * 10, part * 10 + 1], "v": [f"a{part}", None]}), mode="append")
    table = DeltaTable(str(location))
    fragments, _schema, _format, store = fs._fragments(table)
    assert isinstance(store, pa_fs.LocalFileSystem)
    assert len(fragments) == 3 and all(Path(f.path).is_file() and Path(f.path).parent == location for f in fragments)
    want = sorted(table.to_pyarrow_table().to_pylist(), key=lambda r: r["id"])
    assert sorted(fs.delta_rows(table).to_pylist(), key=lambda r: r["id"]) == want
    pieces = [row for piece in fs.delta_pieces(table) for row in piece.to_pylist()]
    assert sorted(pieces, key=lambda r: r["id"]) == want
