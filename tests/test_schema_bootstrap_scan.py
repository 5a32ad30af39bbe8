"""A first start's scan of the binlog between its start and the table layouts' read runs while the layouts are read
(canal.parse.schema_tracking): what it finds is what an in-line scan finds, what the binlog grew by meanwhile is
scanned too, and a failed scan fails the bootstrap, leaving the history empty."""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from canal.errors import SourceError
from canal.parse import schema_tracking
from canal.parse.source import DumpRequest
from canal.parse.start_position import StartPosition
from canal.position import EntryPosition
from canal.schema.history import SchemaHistory
from canal.testing.fake import FakeMysql

_names = itertools.count()


@pytest.fixture
def fake() -> Iterator[FakeMysql]:
    with FakeMysql(name=f"bootstrap_scan{next(_names)}", server_id=1) as server:
        server.execute("CREATE DATABASE d")
        server.execute("CREATE TABLE d.t (id INT PRIMARY KEY, a INT)")
        yield server


def _bootstrap(fake: FakeMysql, start: EntryPosition, *, after_first_status: str | None = None) -> SchemaHistory:
    """The history a first start at ``start`` bootstraps; ``after_first_status``: a DDL run on the server just after
    the scan took its end (while the layouts are about to be read)."""
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
    history = SchemaHistory()
    tracker = schema_tracking.SchemaTracker(history, logging.LoggerAdapter(logging.getLogger(__name__), {}))
    try:
        tracker.prepare(source, StartPosition(start), DumpRequest(start.journal_name, start.position or 4))
    finally:
        source.close()
    return history


def test_what_the_scan_finds_before_the_read_decides_where_the_history_starts(fake: FakeMysql) -> None:
    start = fake.master_status()
    fake.execute("CREATE TABLE d.born (id INT PRIMARY KEY)")  # created after the start: replayed, not bootstrapped
    history = _bootstrap(fake, start)
    assert history.position == start
    assert history.table("d", "born") is None and history.table("d", "t") is not None


def test_what_the_binlog_grew_by_while_the_layouts_were_read_is_scanned_too(fake: FakeMysql) -> None:
    """A DDL written after the scan took its end and before the layouts' read is in no part the thread scanned: the
    rest is scanned after it, and the ALTER of a table that existed at the start moves the history's start to the
    read (the fake logs column names), as an in-line scan would."""
    start = fake.master_status()
    history = _bootstrap(fake, start, after_first_status="ALTER TABLE d.t ADD COLUMN b INT")
    position = history.position
    assert position is not None and position != start and position.position is not None
    assert start.position is not None and position.position > start.position
    table = history.table("d", "t")
    assert table is not None and [c.name for c in table.columns] == ["id", "a", "b"]


def test_a_failed_scan_fails_the_bootstrap_and_leaves_the_history_empty(
    fake: FakeMysql, monkeypatch: pytest.MonkeyPatch
) -> None:
    start = fake.master_status()
    fake.execute("CREATE TABLE d.born (id INT PRIMARY KEY)")
    real = schema_tracking.layout_ddl_between

    def failing(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread().name == "canal-ddl-scan":
            raise SourceError("the dump connection broke", errno=2013)
        return real(*args, **kwargs)

    monkeypatch.setattr(schema_tracking, "layout_ddl_between", failing)
    history = SchemaHistory()
    with pytest.raises(SourceError, match="the dump connection broke"):
        _bootstrap_into(fake, start, history)
    assert history.is_empty and history.position is None


def _bootstrap_into(fake: FakeMysql, start: EntryPosition, history: SchemaHistory) -> None:
    source = fake.source()
    source.open()
    tracker = schema_tracking.SchemaTracker(history, logging.LoggerAdapter(logging.getLogger(__name__), {}))
    try:
        tracker.prepare(source, StartPosition(start), DumpRequest(start.journal_name, start.position or 4))
    finally:
        source.close()
