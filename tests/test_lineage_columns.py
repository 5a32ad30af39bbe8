"""The column that names a change's source lineage, ``log_server_id``: the server whose binlog holds the change's
position (its entry's anchor), alike in change rows and typed batches; and rows written before it was -- a spool file
or a packed batch of an older pycanal, replayed after an upgrade -- read with it null (positions of an unknown
server, compared as they were then)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from canal.gtid import GtidSet
from canal.lake.forms.changes import arrow_schema, conform, entries_to_batch
from canal.lake.forms.packed import pack, unpack_all
from canal.lake.forms.typed_batch import entries_to_typed
from canal.lake.identity.lineage import gtid_elements
from canal.position import EntryPosition
from canal.protocol import ColumnMeta, Entry, EntryType, EventType, Header, RowChange, RowData, TableSchema
from canal.spark.spool import Spool

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
    assert "log_server_id" in arrow_schema().names


def test_rows_spooled_or_packed_before_the_column_are_read_with_it_null(tmp_path: Path) -> None:
    rows = entries_to_batch(_entries(), "d", 0)
    kept = [name for name in rows.schema.names if name not in ("log_server_id", "before_absent", "after_absent")]
    old = rows.select(kept)  # as a pycanal before both columns wrote it
    assert conform(old).schema == arrow_schema() and conform(old).column("log_server_id").null_count == 2
    spool = Spool(tmp_path / "spool", form=arrow_schema())
    start, end = {"batch": 1}, {"batch": 2}
    spool.write(start, end, old)  # a file an older pycanal wrote
    found = spool.read(start)
    assert found is not None and found[0].schema == arrow_schema() and found[0].num_rows == 2
    typed = entries_to_typed(_entries(), "d", 0)
    without = typed.changes.drop_columns(["log_server_id", "before_absent", "after_absent"])
    packed = pack(type(typed)(without, typed.images, typed.layouts))
    unpacked = unpack_all(packed)
    assert unpacked.changes.column("log_server_id").to_pylist() == [None, None]


_UUIDS = ("3e11fa47-71ca-11e1-9e33-c80aa9429562", "00000000-0000-0000-0000-000000000001")


@settings(max_examples=60, deadline=None)
@given(
    mysql=st.lists(st.tuples(st.sampled_from(_UUIDS), st.sampled_from(["", "tag:"]), st.integers(1, 40)), max_size=30),
    mariadb=st.lists(st.tuples(st.integers(0, 2), st.integers(1, 3), st.integers(1, 40)), max_size=30),
)
def test_a_batchs_gtids_make_the_set_they_are_elements_of(
    mysql: list[tuple[str, str, int]], mariadb: list[tuple[int, int, int]]
) -> None:
    """Against a model: the set the compacted elements of a batch's GTIDs make
    (canal.lake.identity.lineage.gtid_elements) holds exactly those GTIDs (MySQL), or each domain up to its highest
    sequence number (MariaDB), as
    :class:`canal.gtid.GtidSet` built one GTID at a time does."""
    for gtids in ([f"{u}:{t}{n}" for u, t, n in mysql], [f"{d}-{s}-{q}" for d, s, q in mariadb]):
        if not gtids:
            continue
        made = GtidSet(",".join(gtid_elements(pa.array(sorted(set(gtids))))))
        one_by_one = GtidSet()
        for gtid in gtids:
            one_by_one.add(gtid)
        if ":" in gtids[0]:  # (a MariaDB domain's position names the server of its highest sequence number, either)
            assert str(made) == str(one_by_one)
        probes = (
            [f"{u}:{t}{n}" for u in _UUIDS for t in ("", "tag:") for n in range(1, 42)]
            if ":" in gtids[0]
            else [f"{d}-9-{q}" for d in range(3) for q in range(1, 42)]
        )
        assert [made.contains(p) for p in probes] == [one_by_one.contains(p) for p in probes]
