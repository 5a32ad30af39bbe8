"""The binlog range a batch covers (canal.lake.forms.ranges) and the mirror's rule on it (canal.lake.identity.admit):
a batch whose range begins after the end of the range the mirror applied, in the same server's binlog, is refused
with MirrorCheckpointError, nothing written; one that begins there or before is applied (what it holds that the
mirror has is skipped by lineage). Against a model (hypothesis): queries reading one server's stream in windows, the
filter leaving out some transactions, new queries starting anywhere -- the mirror never lacks a change silently."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from canal.lake.forms.ranges import Cursor, batch_range, cursor_after, cursor_before, marked, stamped
from canal.lake.identity.applied import applied_path, read_applied
from canal.position import EntryPosition
from canal.protocol import ColumnMeta, Entry, EntryType, EventType, Header, RowChange, RowData, TableSchema

pytest.importorskip("deltalake")

from canal.lake.forms.changes import entries_to_batch
from canal.spark import DeltaMirror, MirrorCheckpointError

T = TableSchema(
    "shop", "t", (ColumnMeta("id", mysql_type="int(11)", is_key=True), ColumnMeta("v", mysql_type="int(11)"))
)
FILE = "mysql-bin.000003"


@attrs.frozen
class Txn:
    """A transaction of the stream at ``offset`` (its end at ``offset + 50``): a change of key ``key`` to ``value``,
    or one of a table the filter leaves out (``key`` None)."""

    offset: int
    key: int | None
    value: int


def _stream(n: int, seed: int) -> list[Txn]:
    import random

    rng = random.Random(seed)
    return [Txn(1000 + 100 * i, None if rng.random() < 0.3 else rng.randrange(5), i) for i in range(n)]


def _cursor(offset: int, server: int = 1) -> Cursor:
    return Cursor(server, FILE, offset, True, 0)


def _entries(txns: Sequence[Txn], server: int = 1) -> list[Entry]:
    """The entries a destination makes of ``txns``: a row entry and the transaction's end for each captured one."""
    out = []
    for txn in txns:
        if txn.key is None:
            continue  # left out by the filter
        anchor = EntryPosition(FILE, txn.offset - 50, server_id=server, included=True)
        header = Header(FILE, txn.offset, 1, 1_700_000_000_000, "shop", "t", EventType.INSERT, event_length=40)
        rc = RowChange(EventType.INSERT, [RowData(T, after=(txn.key, txn.value))])
        out.append(Entry(header, EntryType.ROWDATA, rc, anchor=anchor, rows_done=1))
        end = EntryPosition(FILE, txn.offset + 50, server_id=server, included=True)
        closing = Header(FILE, txn.offset + 50, 1, 0, event_type=EventType.QUERY)
        out.append(Entry(closing, EntryType.TRANSACTIONEND, anchor=end))
    return out


def _batch(txns: Sequence[Txn], start: Cursor | None, end: Cursor | None, server: int = 1) -> Any:
    return entries_to_batch(stamped(_entries(txns, server), start, end), "d", 0)


def _state(mirror: DeltaMirror) -> dict[int, int]:
    if not mirror.table_path("shop", "t").exists():
        return {}
    return {r["id"]: r["v"] for r in mirror.read("shop", "t").to_pylist()}


def _model(txns: Sequence[Txn]) -> dict[int, int]:
    return {t.key: t.value for t in txns if t.key is not None}


def test_a_batch_carries_its_range_on_its_first_and_last_rows() -> None:
    txns = _stream(6, 1)
    start, end = _cursor(950), _cursor(1550)
    table = _batch(txns, start, end)
    assert batch_range(table) == (start, end)
    props = table.column("props")
    assert not marked(props).to_pylist().count(True)  # a range is no mark the mirror acts on
    assert Cursor.parse(start.text()) == start and Cursor.parse("x") is None
    entries = _entries(txns)
    anchor = next(t.offset for t in txns if t.key is not None) - 50  # the first captured transaction's
    assert cursor_after(entries[0]) == Cursor(1, FILE, anchor, True, 1)  # its transaction's anchor, one row done
    assert cursor_before(entries[0]) == Cursor(1, FILE, anchor, True, 0)
    assert batch_range(entries_to_batch(entries, "d", 0)) == (None, None)  # built by hand: none


def test_a_gap_is_refused_and_what_meets_or_overlaps_applied(tmp_path: Path) -> None:
    txns = _stream(12, 2)
    mirror = DeltaMirror(tmp_path / "m", background_folds=False)
    mirror.apply(_batch(txns[:4], _cursor(900), _cursor(1350)), 1)
    record = Path(applied_path(mirror.root, mirror.app_id)).read_bytes()
    state = _state(mirror)
    # a stream that begins after 1350: the transactions 4-5 (1400, 1500) were never applied
    refused = r"mysql-bin.000003:1350 \(consumed\).*begins at mysql-bin.000003:1550"
    with pytest.raises(MirrorCheckpointError, match=refused):
        mirror.apply(_batch(txns[6:8], _cursor(1550), _cursor(1750)), 2)
    assert _state(mirror) == state and Path(applied_path(mirror.root, mirror.app_id)).read_bytes() == record
    assert mirror.history[-1].batch_id == 1
    # the stream that meets it goes on, and one that begins before it (a replay, a restart from an older cursor) too
    mirror.apply(_batch(txns[4:8], _cursor(1350), _cursor(1750)), 2)
    mirror.apply(_batch(txns[2:10], _cursor(1150), _cursor(1950)), 0)
    assert _state(mirror) == _model(txns[:10])
    applied = read_applied(mirror.root, mirror.app_id)
    assert applied is not None and applied.through == _cursor(1950).text()
    # another server's binlog (a failover: GTIDs relate them), and a batch without a range, are not compared
    mirror.apply(_batch([], None, None), 3)
    mirror.close()


@attrs.frozen
class Step:
    how: str  # "next": the query goes on; "new": a new query (a new checkpoint) from a position; "again": replay
    at: int  # where a new query starts (an index into the stream's positions)
    length: int


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 100),
    steps=st.lists(
        st.builds(Step, st.sampled_from(["next", "next", "new", "again"]), st.integers(0, 20), st.integers(1, 5)),
        min_size=1,
        max_size=8,
    ),
)
def test_the_mirror_never_lacks_a_change_silently(seed: int, steps: list[Step]) -> None:
    """Queries reading one server's stream of 20 transactions in windows (a window with no captured transaction is
    handed to no one: the next one's range begins where the last one with rows ended); a new query starts at any
    position. A batch is refused exactly when its range begins past the end of what the mirror applied, and the
    mirror then holds the stream up to that end -- never a later change without an earlier one."""
    txns = _stream(20, seed)
    ends = [t.offset + 50 for t in txns]  # the cursor after each transaction
    starts = [900, *ends]  # where a query may begin: before the first, or after any
    with tempfile.TemporaryDirectory(prefix="ranges-") as tmp:
        mirror = DeltaMirror(Path(tmp), background_folds=False)
        # the model: where the mirror's applied range began (its first batch's: a change before that position it
        # takes for applied, by lineage) and ends
        origin: int | None = None
        through: int | None = None
        chain, position, batch_id = 900, 0, 0
        last: tuple[Sequence[Txn], int, int] | None = None
        for step in steps:
            if step.how == "new":
                position = min(step.at, len(txns))
                chain = starts[position]
            elif step.how == "again" and last is not None:  # the last batch again, its id too: a replay
                window, begin, finish = last
                assert not _apply(mirror, window, begin, finish, batch_id, through)
                continue
            window = txns[position : position + step.length]
            position += len(window)
            if not window:
                continue
            finish = window[-1].offset + 50
            if all(t.key is None for t in window):
                continue  # nothing captured: no batch; the range goes on from the last one with rows
            batch_id += 1
            refused = _apply(mirror, window, chain, finish, batch_id, through)
            assert refused == (through is not None and chain > through), (chain, through)
            if refused:
                break  # the query stops there
            last = (window, chain, finish)
            origin = chain if origin is None else origin
            through = finish if through is None else max(through, finish)
            chain = finish
            assert _state(mirror) == _model([t for t in txns if origin < t.offset and t.offset + 50 <= through])
        mirror.close()


def _apply(
    mirror: DeltaMirror, window: Sequence[Txn], begin: int, finish: int, batch_id: int, through: int | None
) -> bool:
    """Hand a window to the mirror; whether it refused it (nothing of it written)."""
    before = _state(mirror)
    try:
        mirror.apply(_batch(window, _cursor(begin), _cursor(finish)), batch_id)
    except MirrorCheckpointError:
        assert _state(mirror) == before
        return True
    return False
