"""The column that names a change's source lineage, ``log_server_id``: the server whose binlog holds the change's
position (its entry's anchor), alike in change rows and typed batches; and rows written before it was -- a spool file
or a packed batch of an older pycanal, replayed after an upgrade -- read with it null (positions of an unknown
server, compared as they were then)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from canal.lake.packed import pack, unpack_all
from canal.position import EntryPosition
from canal.protocol import ColumnMeta, Entry, EntryType, EventType, Header, RowChange, RowData, TableSchema
from canal.spark.changes import arrow_schema, conform, entries_to_batch
from canal.spark.spool import Spool
from canal.spark.typed_changes import entries_to_typed

T = TableSchema("s", "t", (ColumnMeta("id", mysql_type="int(11)", is_key=True),))


def _entries() -> list[Entry]:
    """Two row events replicated from server 1, in the binlog of server 2 (their headers keep server 1)."""
    return [
        Entry(
            Header("mysql-bin.000001", offset, 1, 1_700_000_000_000, "s", "t", EventType.INSERT, 30, gtid=f"0-1-{n}"),
            EntryType.ROWDATA,
            RowChange(EventType.INSERT, [RowData(T, after=(n,))]),
            anchor=EntryPosition("mysql-bin.000001", offset - 50, server_id=2),
        )
        for n, offset in ((1, 400), (2, 500))
    ]


def test_change_rows_and_typed_batches_name_the_server_whose_binlog_holds_the_position() -> None:
    rows = entries_to_batch(_entries(), "d", 0)
    typed = entries_to_typed(_entries(), "d", 0)
    assert rows.column("log_server_id").to_pylist() == [2, 2]  # the anchor's server, not the event's
    assert typed.changes.column("log_server_id").to_pylist() == [2, 2]
    assert arrow_schema().names[-1] == "log_server_id"


def test_rows_spooled_or_packed_before_the_column_are_read_with_it_null(tmp_path: Path) -> None:
    rows = entries_to_batch(_entries(), "d", 0)
    old = pa.RecordBatch.from_arrays(rows.columns[:-1], schema=rows.schema.remove(len(rows.schema) - 1))
    assert conform(old).schema == arrow_schema() and conform(old).column("log_server_id").null_count == 2
    spool = Spool(tmp_path / "spool", form=arrow_schema())
    start, end = {"batch": 1}, {"batch": 2}
    spool.write(start, end, old)  # a file an older pycanal wrote
    found = spool.read(start)
    assert found is not None and found[0].schema == arrow_schema() and found[0].num_rows == 2
    typed = entries_to_typed(_entries(), "d", 0)
    without = typed.changes.drop_columns(["log_server_id"])
    packed = pack(type(typed)(without, typed.images, typed.layouts))
    unpacked = unpack_all(packed)
    assert unpacked.changes.column("log_server_id").to_pylist() == [None, None]
