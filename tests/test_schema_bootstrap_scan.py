"""A first start's check of the binlog between its start and the table layouts' read (canal.parse.schema_tracking),
either way it is made: by a scan that runs while the layouts are read (a server that does not log column names), or
by the dump itself as it reads (one that does: the history bootstrapped in memory at the start, tables the range
creates left out as the dump meets their CREATE, the history started at the read at a statement of an older table,
and persisted once the dump has read the whole range). What it finds decides the history alike, and both ways make
the same history of a whole range: what the binlog grew by while the layouts were read is checked too, a failed scan
fails the bootstrap, leaving the history empty, and where the binlog names its rows the parser's dump is the only
one."""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Iterator
from typing import Any

import attrs
import pytest

from canal.errors import SchemaError, SourceError
from canal.parse import schema_tracking
from canal.parse.events import QueryEvent, RowsEvent
from canal.parse.source import DumpRequest
from canal.parse.start_position import StartPosition
from canal.position import EntryPosition
from canal.schema.history import MemoryHistoryStore, SchemaHistory, layout_statement
from canal.testing.fake import FakeMysql

_names = itertools.count()
# the two ways: the fake's table maps name their columns; told otherwise, the tracker scans as for such a server
WAYS = pytest.mark.parametrize("names", [True, False], ids=["by-the-dump", "by-a-scan"])


@pytest.fixture
def fake() -> Iterator[FakeMysql]:
    with FakeMysql(name=f"bootstrap_scan{next(_names)}", server_id=1) as server:
        server.execute("CREATE DATABASE d")
        server.execute("CREATE TABLE d.t (id INT PRIMARY KEY, a INT)")
        yield server


def _tracker(history: SchemaHistory) -> schema_tracking.SchemaTracker:
    return schema_tracking.SchemaTracker(history, logging.LoggerAdapter(logging.getLogger(__name__), {}))


def _read(tracker: schema_tracking.SchemaTracker, source: Any, request: DumpRequest, *, whole: bool = False) -> None:
    """What the parser's dump does for the history: each query event settled before the history answers for it
    (and followed, with ``whole``), each event passed after it; up to the first layout statement it is about to
    follow (the history then is what the bootstrap made of the range), or with ``whole`` the binlog's end."""
    for event in source.dump(attrs.evolve(request, blocking=False)):
        if isinstance(event, QueryEvent):
            tracker.settle(event)
            if whole:
                tracker.observe(event)
            elif layout_statement(event.sql) is not None:
                return
        tracker.passed(event)


def _bootstrap(
    fake: FakeMysql,
    start: EntryPosition,
    *,
    names: bool = True,
    after_first_status: str | None = None,
    history: SchemaHistory | None = None,
    whole: bool = False,
) -> SchemaHistory:
    """The history a first start at ``start`` bootstraps; ``after_first_status``: a DDL run on the server just after
    the first master status was taken (the scan's end, or the layouts' first read)."""
    source = fake.source()
    source.open()
    real_status = source.master_status
    calls = itertools.count()

    def master_status() -> EntryPosition:
        status = real_status()
        if next(calls) == 0 and after_first_status is not None:
            fake.execute(after_first_status)
        return status

    source.master_status = master_status  # type: ignore[method-assign]
    if not names:
        type(source).logs_column_names = False  # type: ignore[misc]  (restored below)
    history = history if history is not None else SchemaHistory()
    tracker = _tracker(history)
    try:
        request = tracker.prepare(source, StartPosition(start), DumpRequest(start.journal_name, start.position or 4))
        _read(tracker, source, request, whole=whole)
    finally:
        if not names:
            del type(source).logs_column_names  # type: ignore[misc]
        source.close()
    return history


@pytest.fixture(autouse=True)
def _restore_logs_column_names() -> Iterator[None]:
    from canal.testing.fake.source import FakeBinlogSource

    prop = FakeBinlogSource.__dict__["logs_column_names"]
    yield
    FakeBinlogSource.logs_column_names = prop  # type: ignore[misc]


@WAYS
def test_what_the_scan_finds_before_the_read_decides_where_the_history_starts(fake: FakeMysql, names: bool) -> None:
    start = fake.master_status()
    fake.execute("CREATE TABLE d.born (id INT PRIMARY KEY)")  # created after the start: replayed, not bootstrapped
    history = _bootstrap(fake, start, names=names)
    assert history.position == start
    assert history.table("d", "born") is None and history.table("d", "t") is not None


@WAYS
def test_what_the_binlog_grew_by_while_the_layouts_were_read_is_scanned_too(fake: FakeMysql, names: bool) -> None:
    """A DDL written after the first master status (the scan's end, or the layouts' first read) is checked too: the
    ALTER of a table that existed at the start moves the history's start to the read where the binlog names its
    rows, and refuses the start where it does not, as an in-line scan would."""
    start = fake.master_status()
    if not names:
        with pytest.raises(SchemaError, match=r"ALTER TABLE d\.t ADD COLUMN b INT"):
            _bootstrap(fake, start, names=False, after_first_status="ALTER TABLE d.t ADD COLUMN b INT")
        return
    history = _bootstrap(fake, start, after_first_status="ALTER TABLE d.t ADD COLUMN b INT")
    position = history.position
    assert position is not None and position != start and position.position is not None
    assert start.position is not None and position.position > start.position
    table = history.table("d", "t")
    assert table is not None and [c.name for c in table.columns] == ["id", "a", "b"]


@WAYS
def test_a_failed_scan_fails_the_bootstrap_and_leaves_the_history_empty(
    fake: FakeMysql, monkeypatch: pytest.MonkeyPatch, names: bool
) -> None:
    """By a scan beside the layouts' read; by the dump, the scan of the rest of the range that an entry naming its
    tables' layouts from the history (a heal's) asks for before the range was read."""
    start = fake.master_status()
    fake.execute("CREATE TABLE d.born (id INT PRIMARY KEY)")
    fake.insert("d.t", {"id": 1, "a": 1})
    real = schema_tracking.layout_ddl_between

    def failing(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread().name == "canal-ddl-scan" or (names and not kwargs.get("first_only")):
            raise SourceError("the dump connection broke", errno=2013)
        return real(*args, **kwargs)

    monkeypatch.setattr(schema_tracking, "layout_ddl_between", failing)
    store = MemoryHistoryStore()
    history = SchemaHistory(store)
    with pytest.raises(SourceError, match="the dump connection broke"):
        if not names:
            _bootstrap(fake, start, names=False, history=history)
        else:
            source = fake.source()
            source.open()
            tracker = _tracker(history)
            try:
                request = tracker.prepare(source, StartPosition(start), DumpRequest(start.journal_name, start.position))
                events = source.dump(attrs.evolve(request, blocking=False))
                rows = next(event for event in events if isinstance(event, RowsEvent))
                tracker.settle(rows, layouts=True)
            finally:
                source.close()
    assert history.is_empty and history.position is None
    assert not store.load()  # nothing persisted: the next start bootstraps again
    monkeypatch.undo()
    assert _bootstrap(fake, start, names=names, history=history).position == start


def test_both_ways_make_the_same_history_of_a_range(fake: FakeMysql) -> None:
    """Tables created in the range, altered, renamed and dropped there, with rows between: the history the dump's
    check persists once it read the range is the one a scan's bootstrap makes and the dump then follows."""
    start = fake.master_status()
    fake.execute("CREATE TABLE d.born (id INT PRIMARY KEY)")
    fake.insert("d.t", {"id": 1, "a": 1})
    fake.execute("ALTER TABLE d.born ADD COLUMN b INT")
    fake.execute("CREATE TABLE d.gone (id INT PRIMARY KEY)")
    fake.execute("RENAME TABLE d.born TO d.renamed")
    fake.execute("DROP TABLE d.gone")
    fake.insert("d.t", {"id": 2, "a": 2})
    stores = {names: MemoryHistoryStore() for names in (True, False)}
    for names, store in stores.items():
        history = _bootstrap(fake, start, names=names, history=SchemaHistory(store), whole=True)
        assert history.position is not None and history.position != start  # the DDL followed
        assert [s.position for s in history._snapshots] == [start]
    assert stores[True].load() == stores[False].load()


def test_a_statement_of_a_table_older_than_the_start_after_created_ones_starts_the_history_at_the_read(
    fake: FakeMysql,
) -> None:
    start = fake.master_status()
    fake.execute("CREATE TABLE d.born (id INT PRIMARY KEY)")
    fake.execute("ALTER TABLE d.t ADD COLUMN b INT")
    read = fake.master_status()
    stores = {names: MemoryHistoryStore() for names in (True, False)}
    for names, store in stores.items():
        if not names:  # a server that names no rows refuses such a start
            with pytest.raises(SchemaError, match=r"ALTER TABLE d\.t"):
                _bootstrap(fake, start, names=False, history=SchemaHistory(store), whole=True)
            continue
        history = _bootstrap(fake, start, history=SchemaHistory(store), whole=True)
        assert history.position == read
        assert [c.name for c in history.table("d", "t").columns] == ["id", "a", "b"]  # type: ignore[union-attr]


def test_where_the_binlog_names_its_rows_the_dump_is_the_only_one(fake: FakeMysql) -> None:
    """No layout statement between the start and the read: the parser's own dump checks the range as it reads it,
    the history is held in memory meanwhile and persisted once the dump has read the whole range."""
    start = fake.master_status()
    fake.insert("d.t", {"id": 1, "a": 1})
    fake.insert("d.t", {"id": 2, "a": 2})
    source = fake.source()
    source.open()
    dumps: list[DumpRequest] = []
    real_dump = source.dump

    def counted(request: DumpRequest) -> Any:
        dumps.append(request)
        return real_dump(request)

    source.dump = counted  # type: ignore[method-assign]
    store = MemoryHistoryStore()
    history = SchemaHistory(store)
    tracker = _tracker(history)
    try:
        request = tracker.prepare(source, StartPosition(start), DumpRequest(start.journal_name, start.position or 4))
        assert history.position == start and not store.load() and tracker.checking
        events = list(source.dump(attrs.evolve(request, blocking=False)))
        for event in events[:-1]:  # every event of the range but the last: still checking, nothing persisted
            assert tracker.passed(event)
        assert not store.load()
        assert not tracker.passed(events[-1])  # the last one read: the layouts held from the start
    finally:
        source.close()
    assert store.load() and not tracker.checking and history.position == start
    assert [d.decode_rows for d in dumps] == [True]  # the parser's dump only: no scan


def test_a_switch_before_the_check_ended_bootstraps_from_the_other_server(fake: FakeMysql) -> None:
    start = fake.master_status()
    fake.insert("d.t", {"id": 1, "a": 1})
    history = SchemaHistory()
    tracker = _tracker(history)
    source = fake.source()
    source.open()
    try:
        tracker.prepare(source, StartPosition(start), DumpRequest(start.journal_name, start.position or 4))
    finally:
        source.close()
    assert tracker.checking
    with FakeMysql(name=f"bootstrap_scan{next(_names)}", server_id=2) as standby:
        standby.execute("CREATE DATABASE d")
        standby.execute("CREATE TABLE d.other (id INT PRIMARY KEY)")
        other = standby.source()
        other.open()
        try:
            at = standby.master_status()
            tracker.prepare(other, StartPosition(at), DumpRequest(at.journal_name, at.position or 4))
        finally:
            other.close()
    assert not tracker.checking  # the standby's layouts, read at its start
    assert history.table("d", "other") is not None and history.table("d", "t") is None


@WAYS
def test_views_the_range_drops_or_replaces_are_not_known_at_the_start(fake: FakeMysql, names: bool) -> None:
    """The layouts' read holds the views as they are after the range: a view it replaces or drops is not known at the
    start (forgotten, as main's scan has it), and from the statement on it is what the statement made -- both ways,
    a rewind to the start included (the dump's check forgets it at the bootstrap, when it meets the statement)."""
    fake.execute("CREATE TABLE d.u (id INT PRIMARY KEY)")
    fake.execute("CREATE VIEW d.v AS SELECT id FROM d.t")
    fake.execute("CREATE VIEW d.w AS SELECT id FROM d.t")
    fake.execute("CREATE VIEW d.kept AS SELECT id FROM d.t")
    start = fake.master_status()
    fake.execute("CREATE OR REPLACE VIEW d.v AS SELECT id FROM d.u")
    fake.execute("DROP VIEW d.w")
    history = _bootstrap(fake, start, names=names, whole=True)
    assert history.position is not None and start < history.position
    at_start = history.at(start).objects
    v, w, kept = (at_start.view("d", name) for name in ("v", "w", "kept"))
    assert v is not None and v.uses is None and w is not None and w.uses is None, (v, w)
    assert kept is not None and kept.uses is not None
    now = history.at(fake.master_status()).objects
    replaced = now.view("d", "v")
    assert replaced is not None and replaced.uses is not None and now.view("d", "w") is None
    assert "u" in {n.name for n in replaced.uses.names} and "t" not in {n.name for n in replaced.uses.names}
