"""Which changes of a batch the mirror applied already, decided by their source lineage and never by the batch's id
(canal.lake.identity.admit, canal.lake.identity.lineage), on change rows made from hand-built entries: a new query (its
batch ids starting again) from an older position applies exactly what the mirror lacks, DDL in the old range included;
the same batch again is a replay; a failover to a server whose binlog numbering is behind is followed by GTID, and
without GTIDs stops typed with nothing written, as does one that lost transactions the mirror applied (MariaDB's
numbers reused by the promoted server); another destination under the same app id, and another batch than
the one left half-applied, are refused; a record of the old form is read with its old rules and rewritten; a new
app id on a root numbers its batches past the others and may not write their tables."""

from __future__ import annotations

import json
import random
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from canal.lake.forms.changes import entries_to_batch
from canal.lake.identity.applied import applied_path, read_applied
from canal.position import EntryPosition
from canal.protocol import ColumnMeta, Entry, EntryType, EventType, Header, RowChange, RowData, TableSchema
from canal.spark import DeltaMirror, MirrorCheckpointError, MirrorLineageError

pytest.importorskip("deltalake")

T = TableSchema(
    "shop", "t", (ColumnMeta("id", mysql_type="int(11)", is_key=True), ColumnMeta("v", mysql_type="int(11)"))
)
T2 = TableSchema(
    "shop",
    "t",
    (
        ColumnMeta("id", mysql_type="int(11)", is_key=True),
        ColumnMeta("v", mysql_type="int(11)"),
        ColumnMeta("w", mysql_type="int(11)"),
    ),
)


@attrs.frozen
class Change:
    """One change of a source's stream: its transaction's GTID, where its server's binlog holds it."""

    kind: str  # INSERT, UPDATE, DELETE, or ALTER (adds column w)
    key: int
    value: int | None
    before: int | None
    server: int
    file: str
    offset: int
    gtid: str | None
    altered: bool = False  # written after the ALTER: in the layout with column w


def _entry(change: Change) -> Entry:
    header = Header(
        change.file,
        change.offset,
        change.server,
        1_700_000_000_000,
        "shop",
        "t",
        EventType[change.kind],
        event_length=50,
        gtid=change.gtid,
    )
    anchor = EntryPosition(change.file, 4, server_id=change.server)
    if change.kind == "ALTER":
        rc = RowChange(EventType.ALTER, is_ddl=True, sql="ALTER TABLE t ADD COLUMN w INT", ddl_schema="shop")
        return Entry(header, EntryType.ROWDATA, rc, anchor=anchor)
    layout = T2 if change.altered else T
    pad = (None,) if change.altered else ()
    before = None if change.before is None else (change.key, change.before, *pad)
    after = None if change.value is None else (change.key, change.value, *pad)
    rc = RowChange(EventType[change.kind], [RowData(layout, before=before, after=after)])
    return Entry(header, EntryType.ROWDATA, rc, anchor=anchor)


def _batch(changes: Sequence[Change], destination: str = "d") -> Any:
    return entries_to_batch([_entry(change) for change in changes], destination, 0)


def _stream(
    n: int, *, server: int = 1, file: str = "mysql-bin.000004", first_offset: int = 1000, first_seq: int = 1,
    gtids: bool = True, seed: int = 7, state: dict[int, int] | None = None, alter_at: int | None = None,
    altered: bool = False,
) -> list[Change]:  # fmt: skip
    """``n`` changes of keys 0-5 (a change a transaction), at increasing offsets of ``file``; ``state`` is the
    source's rows before them, updated. ``alter_at``: that change adds column w (``altered``: it was added before)."""
    rng = random.Random(seed)
    rows = {} if state is None else state
    out: list[Change] = []
    for i in range(n):
        offset, gtid = first_offset + 100 * i, f"0-{server}-{first_seq + i}" if gtids else None
        if i == alter_at:
            out.append(Change("ALTER", 0, None, None, server, file, offset, gtid))
            continue
        key = rng.randrange(6)
        if key not in rows:
            value = rng.randrange(1000)
            out.append(Change("INSERT", key, value, None, server, file, offset, gtid))
            rows[key] = value
        elif rng.random() < 0.3:
            out.append(Change("DELETE", key, None, rows.pop(key), server, file, offset, gtid))
        else:
            value = rng.randrange(1000)
            out.append(Change("UPDATE", key, value, rows[key], server, file, offset, gtid))
            rows[key] = value
    return [attrs.evolve(c, altered=altered or (alter_at is not None and i > alter_at)) for i, c in enumerate(out)]


def _model(changes: Sequence[Change]) -> dict[int, int]:
    rows: dict[int, int] = {}
    for change in changes:
        if change.kind == "DELETE":
            rows.pop(change.key, None)
        elif change.kind != "ALTER":
            assert change.value is not None
            rows[change.key] = change.value
    return rows


def _state(mirror: DeltaMirror) -> dict[int, int]:
    if not mirror.table_path("shop", "t").exists():
        return {}
    return {r["id"]: r["v"] for r in mirror.read("shop", "t").to_pylist()}


@settings(max_examples=12, deadline=None)
@given(
    windows=st.lists(
        st.tuples(st.integers(0, 30), st.integers(1, 9), st.sampled_from(["next", "again", "new query"])),
        min_size=1,
        max_size=6,
    )
)
def test_any_windows_of_one_stream_leave_the_mirror_as_the_stream_up_to_the_furthest(
    windows: list[tuple[int, int, str]],
) -> None:
    """Against a model: batches that are windows of one stream, each starting at or before the furthest change
    applied (a query restarted from an older position, a replay, the same batch id for other changes), numbered
    as Spark numbers a query's batches (``new query``: from 0 again); after each the mirror is the stream up to the
    furthest change any batch brought, every change once."""
    stream = _stream(30)
    with tempfile.TemporaryDirectory(prefix="lineage-model-") as tmp:
        mirror = DeltaMirror(Path(tmp), background_folds=False)
        furthest, batch_id, last = 0, -1, None
        for start, length, how in windows:
            if how == "again" and last is not None:
                start, end = last  # the same batch again, under its id
            else:
                start = min(start, furthest)
                end = min(start + length, len(stream))
                batch_id = 0 if how == "new query" else batch_id + 1
            mirror.apply(_batch(stream[start:end]), batch_id)
            last = (start, end)
            furthest = max(furthest, end)
            assert _state(mirror) == _model(stream[:furthest]), (start, end, batch_id)
        mirror.close()


def test_a_new_query_from_before_a_ddl_applies_nothing_twice_and_the_old_query_goes_on(tmp_path: Path) -> None:
    """The production report: a new checkpoint from an older position, batches of a few changes, a DDL in the old
    range. Its first batches are applied already (skipped), the one holding new changes applies only those (no row
    comes back, none reverts, no schema mismatch), and the query that wrote the mirror goes on exactly."""
    state: dict[int, int] = {}
    stream = _stream(24, alter_at=8, state=state)
    mirror = DeltaMirror(tmp_path / "m", background_folds=False)
    for batch_id, start in enumerate(range(0, 18, 6)):  # query A: batches 0-2, changes 0-17
        mirror.apply(_batch(stream[start : start + 6]), batch_id)
    assert _state(mirror) == _model(stream[:18])
    # query B, a new checkpoint from change 3: batch 0 is old, batch 1 half old, batch 2 all new
    for batch_id, start in enumerate(range(3, 24, 6)):
        result = mirror.apply(_batch(stream[start : start + 6]), batch_id)
        furthest = min(start + 6, 24)
        assert _state(mirror) == _model(stream[: max(18, furthest)]), batch_id
        if start + 6 <= 18:
            assert set(result.tables.values()) == {"skipped"}
    assert "w" in mirror.read("shop", "t").column_names
    # query A goes on from its own checkpoint: its batch 3 (changes 18-23) is applied already
    assert set(mirror.apply(_batch(stream[18:24]), 3).tables.values()) == {"skipped"}
    more = _stream(4, first_offset=5000, first_seq=100, seed=9, state=state, altered=True)
    mirror.apply(_batch(more), 4)
    assert _state(mirror) == _model([*stream, *more])
    mirror.close()


def test_the_same_batch_again_is_a_replay_and_another_with_its_id_is_not(tmp_path: Path) -> None:
    stream = _stream(12)
    mirror = DeltaMirror(tmp_path / "m", background_folds=False)
    mirror.apply(_batch(stream[:6]), 5)
    record = Path(applied_path(mirror.root, mirror.app_id)).read_bytes()
    assert set(mirror.apply(_batch(stream[:6]), 5).tables.values()) == {"skipped"}
    assert Path(applied_path(mirror.root, mirror.app_id)).read_bytes() == record  # a replay writes nothing
    mirror.apply(_batch(stream[4:12]), 5)  # id 5 again, other changes (a new query): its new ones applied
    assert _state(mirror) == _model(stream)
    assert mirror.version("shop", "t") == 6  # numbered past the batch before, whatever the id said
    mirror.close()


def _failover(gtids: bool) -> tuple[list[Change], list[Change], list[Change]]:
    """The primary's stream (server 1, mysql-bin.000004), and the promoted replica's (server 2, mysql-bin.000001:
    numbering behind): its binlog holds the primary's last changes again at its own positions (the destination
    restarted by time, back a fallback interval), then the changes made on it."""
    state: dict[int, int] = {}
    primary = _stream(10, server=1, file="mysql-bin.000004", gtids=gtids, state=state)
    again = [
        attrs.evolve(c, server=2, file="mysql-bin.000001", offset=400 + 100 * i) for i, c in enumerate(primary[6:])
    ]
    made = _stream(
        6, server=2, file="mysql-bin.000001", first_offset=900, first_seq=11, gtids=gtids, seed=3, state=state
    )
    return primary, again, made


def test_a_failover_to_a_replica_whose_binlog_is_behind_is_followed_by_gtid(tmp_path: Path) -> None:
    primary, again, made = _failover(gtids=True)
    mirror = DeltaMirror(tmp_path / "m", background_folds=False)
    mirror.apply(_batch(primary[:5]), 17179870594)  # run_batches' ids: the primary's positions
    mirror.apply(_batch(primary[5:]), 17179870995)
    # the replica's ids are far lower; its batch repeats four changes the mirror has, then brings new ones
    result = mirror.apply(_batch([*again, *made[:3]]), 4294969365)
    assert result.tables == {"shop.t": "applied"}
    mirror.apply(_batch(made[3:]), 4294969765)
    assert _state(mirror) == _model([*primary, *made])
    record = read_applied(mirror.root, mirror.app_id)
    assert record is not None and (record.server_id, record.log_file) == (2, "mysql-bin.000001")
    assert record.gtids == "0-2-16"
    mirror.close()


def test_a_failover_without_gtids_stops_naming_both_lineages_with_nothing_written(tmp_path: Path) -> None:
    primary, again, made = _failover(gtids=False)
    mirror = DeltaMirror(tmp_path / "m", background_folds=False)
    mirror.apply(_batch(primary), 17179870594)
    before = (_state(mirror), Path(applied_path(mirror.root, mirror.app_id)).read_bytes())
    with pytest.raises(MirrorLineageError) as stopped:
        mirror.apply(_batch([*again, *made]), 4294969365)
    message = str(stopped.value)
    assert "server_id 1 at mysql-bin.000004:1900" in message and "server_id 2 (from mysql-bin.000001:400)" in message
    assert "none of it was skipped" in message
    assert (_state(mirror), Path(applied_path(mirror.root, mirror.app_id)).read_bytes()) == before
    mirror.close()


def test_another_destination_under_the_same_app_id_is_refused_before_writing(tmp_path: Path) -> None:
    first = DeltaMirror(tmp_path / "m", background_folds=False)
    first.apply(_batch(_stream(5), destination="shop"), 0)
    first.close()  # (the lease refuses two live ones; one after the other is what this catches)
    second = DeltaMirror(tmp_path / "m", background_folds=False)
    other = _stream(5, file="mysql-bin.000009", first_seq=50, seed=2)
    state = _state(second)
    with pytest.raises(MirrorLineageError, match=r"mirrors destination 'shop'.*'billing'.*its own app_id"):
        second.apply(_batch(other, destination="billing"), 0)
    assert _state(second) == state
    second.close()


class _Crash(Exception):
    pass


def test_another_batch_than_the_one_left_half_applied_is_refused_until_that_one_is_done(tmp_path: Path) -> None:
    state: dict[int, int] = {}
    stream = _stream(12, alter_at=6, state=state)
    mirror = DeltaMirror(tmp_path / "m", background_folds=False)
    mirror.apply(_batch(stream[:3]), 0)
    write = mirror._write_journal

    def crash_after_the_ddl(number: int, done: int) -> None:
        write(number, done)
        if done == 2:  # the rows before the ALTER, and the ALTER, are done
            raise _Crash

    mirror._write_journal = crash_after_the_ddl  # type: ignore[method-assign]
    with pytest.raises(_Crash):
        mirror.apply(_batch(stream[3:9]), 1)
    mirror._write_journal = write  # type: ignore[method-assign]
    with pytest.raises(MirrorCheckpointError, match="was applying batch 1 when it stopped, after 2 of its steps"):
        mirror.apply(_batch(stream[2:12]), 0)  # a new query from an older position
    mirror.apply(_batch(stream[3:9]), 1)  # the query that was writing it goes on
    mirror.apply(_batch(stream[2:12]), 0)  # then the other one: its new changes only
    assert _state(mirror) == _model(stream)
    mirror.close()


def test_a_record_of_the_old_form_is_followed_by_its_rules_and_rewritten(tmp_path: Path) -> None:
    stream = _stream(12)
    mirror = DeltaMirror(tmp_path / "m", background_folds=False)
    mirror.apply(_batch(stream[:6]), 3)
    path = Path(applied_path(mirror.root, mirror.app_id))
    last = stream[5]
    path.write_text(json.dumps({"batch": 3, "log_file": last.file, "log_offset": last.offset}))  # as pycanal wrote it
    record = read_applied(mirror.root, mirror.app_id)
    assert record is not None and record.legacy and record.server_id is None and record.number == 3
    assert set(mirror.apply(_batch(stream[:6]), 3).tables.values()) == {"skipped"}  # its batch, by its id
    mirror.apply(_batch(stream[4:12]), 4)  # positions compared as the old record's server's
    assert _state(mirror) == _model(stream)
    rewritten = json.loads(path.read_text())
    assert rewritten["version"] == 2 and rewritten["server_id"] == 1 and rewritten["number"] == 4
    mirror.close()


def test_a_new_app_id_on_a_root_is_numbered_past_it_and_may_not_write_its_tables(tmp_path: Path) -> None:
    from tests.mirror_rows import batch, upsert, values

    old = DeltaMirror(tmp_path / "m", background_folds=False)
    old.apply(_batch(_stream(6)), 40)
    old.close()
    new = DeltaMirror(tmp_path / "m", app_id="fresh", background_folds=False)
    state = _state(new)
    with pytest.raises(MirrorLineageError, match=r"holds batches of app id 'pycanal-mirror'.*new root"):
        new.apply(_batch(_stream(3, first_offset=9000, first_seq=90)), 0)  # "under a new app_id from a snapshot"
    assert _state(new) == state
    new.apply(batch(upsert("other", 1, "a")), 0)  # a table of its own: numbered past the root's 40
    assert values(new.read("s", "other")) == {1: "a"} and new.version("s", "other") == 41
    new.close()


def test_a_switch_of_servers_inside_one_batch_applies_each_change_once(tmp_path: Path) -> None:
    """The destination switches to the promoted replica mid-batch (canal's standby switch, issue 65's in-process
    failover): the batch holds the primary's changes, then the replica's from a point back in time -- the primary's
    last changes again, a DDL among them, under the replica's positions -- then changes made on the replica. Each is
    applied once: the replica's copies of this very batch's changes count as applied."""
    state: dict[int, int] = {}
    primary = _stream(10, alter_at=7, state=state)
    again = [
        attrs.evolve(c, server=2, file="mysql-bin.000001", offset=400 + 100 * i) for i, c in enumerate(primary[5:])
    ]
    made = _stream(
        4, server=2, file="mysql-bin.000001", first_offset=900, first_seq=11, seed=3, state=state, altered=True
    )
    mirror = DeltaMirror(tmp_path / "m", background_folds=False)
    mirror.apply(_batch(primary[:4]), 1)
    mirror.apply(_batch([*primary[4:], *again, *made]), 2)
    assert _state(mirror) == _model([*primary, *made])
    assert mirror.read("shop", "t").column_names == ["id", "v", "w"]
    mirror.close()


def _lost() -> tuple[list[Change], list[Change], list[Change], list[Change]]:
    """A failover that lost the primary's last three transactions: the replica received 0-1-1..7 of the primary's
    0-1-1..10 (the mirror applied them all), then, promoted, numbered its own from 0-2-8."""
    state: dict[int, int] = {}
    primary = _stream(10, server=1, file="mysql-bin.000004", state=state)
    received: dict[int, int] = {}
    _stream(7, server=1, state=received)  # the same draws: the replica's rows after 0-1-7
    again = [
        attrs.evolve(c, server=2, file="mysql-bin.000001", offset=400 + 100 * i) for i, c in enumerate(primary[:7])
    ]
    made = _stream(4, server=2, file="mysql-bin.000001", first_offset=1200, first_seq=8, seed=3, state=received)
    return primary[:6], primary[6:], again, made


@pytest.mark.parametrize("switch_inside", [False, True], ids=["across batches", "inside a batch"])
def test_a_failover_that_lost_transactions_stops_naming_both_servers(tmp_path: Path, switch_inside: bool) -> None:
    """MariaDB numbers a domain's transactions across servers: the promoted replica's 0-2-8 is numbered as the
    primary's 0-1-8, which the mirror applied and the replica never had. It was skipped as applied, silently; it
    stops the batch now (canal.lake.identity.forks), nothing of it written -- also where the switch falls inside one
    batch."""
    first, rest, again, made = _lost()
    mirror = DeltaMirror(tmp_path / "m", background_folds=False)
    mirror.apply(_batch(first), 1)
    if not switch_inside:
        mirror.apply(_batch(rest), 2)
    before = (_state(mirror), Path(applied_path(mirror.root, mirror.app_id)).read_bytes())
    batch = [*rest, *again, *made] if switch_inside else [*again, *made]
    with pytest.raises(MirrorLineageError) as stopped:
        mirror.apply(_batch(batch), 3)
    message = str(stopped.value)
    assert "binlog of server_id 2, which holds transaction 0-2-8" in message
    assert "domain 0 (server 1: 1-" in message and "histories forked" in message and "server_id 1 at" in message
    assert (_state(mirror), Path(applied_path(mirror.root, mirror.app_id)).read_bytes()) == before
    mirror.close()


def test_a_record_without_origins_and_changes_before_the_start_are_followed_as_before(tmp_path: Path) -> None:
    """What a record written before origins were kept applied counts by the domain's position, as it did; and a
    transaction of another writing server numbered below everything the mirror applied in the domain (from before
    its start, brought again by a search by time) counts as applied: neither stops."""
    primary, again, made = _failover(gtids=True)
    mirror = DeltaMirror(tmp_path / "m", background_folds=False)
    mirror.apply(_batch(primary[3:]), 1)  # the mirror started at 0-1-4
    record = read_applied(mirror.root, mirror.app_id)
    assert record is not None and record.origins == "0-1-4-10"
    older = [
        attrs.evolve(c, gtid=f"0-3-{n}", server=2, file="mysql-bin.000001", offset=300 + n)
        for n, c in enumerate(primary[:3], start=1)
    ]  # fmt: skip  (written on server 3 when it was the primary)
    mirror.apply(_batch([*older, *again, *made[:3]]), 2)
    path = Path(applied_path(mirror.root, mirror.app_id))
    data = json.loads(path.read_bytes())
    del data["origins"]  # a record written before origins were kept
    path.write_text(json.dumps(data))
    mirror.apply(_batch(made[3:]), 3)
    assert _state(mirror) == _model([*primary[3:], *made])
    record = read_applied(mirror.root, mirror.app_id)
    assert record is not None and record.origins == "0-2-14-16"  # kept from here on
    mirror.close()


@pytest.mark.spark
def test_the_spark_driver_stops_at_the_fork_too(spark: Any, tmp_path: Path) -> None:
    """Through Spark, a DataFrame of several partitions (the driver admits it from an aggregation, its tasks write a
    table each) stops alike, nothing written. (The canal source's one partition is admitted by its task with the
    rules above.)"""
    partitions = 3
    first, rest, again, made = _lost()
    mirror = DeltaMirror(tmp_path / "m", background_folds=False)
    mirror.apply(_batch([*first, *rest]), 1)
    before = (_state(mirror), Path(applied_path(mirror.root, mirror.app_id)).read_bytes())
    df = spark.createDataFrame(pa.table(_batch([*again, *made])))
    df = df.repartition(partitions)
    with pytest.raises(MirrorLineageError, match=r"which holds transaction 0-2-8.*histories forked"):
        mirror(df, 2)
    assert (_state(mirror), Path(applied_path(mirror.root, mirror.app_id)).read_bytes()) == before
    mirror.close()
