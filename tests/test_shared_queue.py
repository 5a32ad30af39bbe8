"""A destination's queue from a shared reader, taken through its parser's steps on the reader's thread while the
parser thread waits (canal.parse.shared.queue): in order, one thread at a time, what a step raises raised by the
parser thread, and nothing taken there when the parser is busy, its store has no room, or a snapshot begins; and the
table maps of captured tables checked against the destination's own schema history on either thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from canal.errors import CanalError
from canal.filter import TableFilters
from canal.log import destination_logger
from canal.parse.events import (
    BinlogEvent,
    GtidEvent,
    LayoutSeen,
    PassedEvent,
    PassedTransaction,
    TableMapEvent,
    XidEvent,
)
from canal.parse.schema_tracking import SchemaTracker
from canal.parse.shared.member import SharedMember, SharedReaderLeft, layout_seen
from canal.parse.shared.queue import PASSED_EVENT_BYTES, PASSED_EVENTS, Subscription, _bound
from canal.position import EntryPosition
from canal.protocol import TableSchema
from canal.schema import SchemaCatalog
from canal.schema.history import SchemaHistory


class _Reader:
    """What a subscription asks of its reader (inside a transaction: a waiting parser given events is woken, or taken
    here, at its end)."""

    def __init__(self) -> None:
        self.in_group = True
        self.unwoken: set[Subscription] = set()
        self.waiting_for: Subscription | None = None
        self.room_at = 4096
        self.inlined = 0
        self.last_read = 0.0
        self.left: list[Subscription] = []

    def room(self) -> None:
        pass

    def leave(self, sub: Subscription) -> None:
        self.left.append(sub)

    def diverged(self, sub: Subscription, why: str) -> None:
        self.left.append(sub)


def _xid(n: int) -> XidEvent:
    return XidEvent(log_file="b.000001", offset=100 * n, next_offset=100 * n + 31, timestamp=0, server_id=1, xid=n)


class _Parser:
    """A parser thread reading the subscription's events, with the steps the reader may run instead."""

    def __init__(self, sub: Subscription) -> None:
        self.sub = sub
        self.own: list[int] = []  # events taken on the parser thread
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            for event in self.sub.events():
                assert isinstance(event, XidEvent)
                self.own.append(event.xid)
        except BaseException as exc:
            self.error = exc

    def start(self) -> None:
        self.thread.start()
        _await("the parser thread to wait", lambda: self.sub.waiting)

    def end(self) -> None:
        self.sub.close()
        self.thread.join(5)
        assert not self.thread.is_alive()


def _await(what: str, check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.001)


def _subscription(step: Callable[[BinlogEvent], None] | None, ready: Callable[[int, int], bool]) -> Subscription:
    member = SharedMember("d", None)
    member.step, member.ready = step, ready
    return Subscription(_Reader(), member)  # type: ignore[arg-type]


def test_a_waiting_parsers_events_are_taken_through_its_steps_on_the_callers_thread_in_order() -> None:
    taken: list[tuple[int, int]] = []
    asked: list[tuple[int, int]] = []

    def ready(entries: int, size: int) -> bool:
        asked.append((entries, size))
        return True

    sub = _subscription(lambda e: taken.append((threading.get_ident(), e.xid)), ready)  # type: ignore[attr-defined]
    parser = _Parser(sub)
    parser.start()
    try:
        sub.push([_xid(1), _xid(2)], 2)
        sub.push(_xid(3))
        assert sub.run_inline()
        assert taken == [(threading.get_ident(), 1), (threading.get_ident(), 2), (threading.get_ident(), 3)]
        assert asked[0] == (3, 93)  # three entries at most, of the events' bytes; then (0, 0) before each later one
        assert parser.own == [] and sub.queued == 0 and sub.reader.inlined == 1  # type: ignore[attr-defined]
        assert not sub.turn.locked()  # handed back: the parser thread takes what comes next
        sub.push(_xid(4))
        sub.wake.set()
        _await("the parser thread's event", lambda: parser.own == [4])
    finally:
        parser.end()
    assert parser.error is None


def test_what_a_step_raises_on_the_readers_thread_the_parser_thread_raises_and_nothing_after_it_is_taken() -> None:
    taken: list[int] = []

    def step(event: BinlogEvent) -> None:
        assert isinstance(event, XidEvent)
        if event.xid == 2:
            raise CanalError("refused at 2")
        taken.append(event.xid)

    sub = _subscription(step, lambda entries, size: True)
    parser = _Parser(sub)
    parser.start()
    sub.push([_xid(1), _xid(2), _xid(3)], 3)
    assert not sub.run_inline()
    sub.wake.set()  # what the reader does when run_inline says no
    parser.thread.join(5)
    assert isinstance(parser.error, CanalError) and str(parser.error) == "refused at 2"
    assert taken == [1] and parser.own == []  # 3 came after the error: no one took it


def test_a_store_without_room_leaves_the_events_to_the_parser_thread() -> None:
    taken: list[BinlogEvent] = []
    sub = _subscription(taken.append, lambda entries, size: entries == 0)
    parser = _Parser(sub)
    parser.start()
    try:
        sub.push([_xid(1), _xid(2)], 2)
        assert not sub.run_inline()
        assert taken == [] and sub.queued == 2 and not sub.turn.locked()
        sub.wake.set()
        _await("the parser thread's events", lambda: parser.own == [1, 2])
    finally:
        parser.end()


@pytest.mark.parametrize("split", [False, True])
def test_a_snapshot_beginning_mid_way_leaves_the_rest_to_the_parser_thread_in_order(split: bool) -> None:
    """Checked before every event: inside one queued list of events, and between two queued items (``split``)."""
    merging = threading.Event()
    taken: list[int] = []

    def step(event: BinlogEvent) -> None:
        assert isinstance(event, XidEvent)
        taken.append(event.xid)
        if event.xid == 1:
            merging.set()  # as a heal would: a snapshot merges into the stream from here

    sub = _subscription(step, lambda entries, size: not merging.is_set())
    parser = _Parser(sub)
    parser.start()
    try:
        if split:
            sub.push(_xid(1))
            sub.push(_xid(2))
        else:
            sub.push([_xid(1), _xid(2)], 2)
        sub.push(_xid(3))
        assert not sub.run_inline()
        assert taken == [1] and sub.queued == 2
        sub.wake.set()
        _await("the parser thread's events", lambda: parser.own == [2, 3])
    finally:
        parser.end()


@pytest.mark.parametrize("state", ["busy", "no steps", "closed", "woken"])
def test_nothing_is_taken_from_a_parser_that_is_busy_has_no_steps_left_or_was_woken(state: str) -> None:
    taken: list[BinlogEvent] = []
    sub = _subscription(None if state == "no steps" else taken.append, lambda entries, size: True)
    if state == "busy":  # its thread holds the turn between two events
        events = sub.events()
        sub.push(_xid(1))
        next(events)
    else:
        sub.waiting = True
    if state == "closed":
        sub.active = False
    if state == "woken":  # for an event before (outside a transaction, or of a DDL): its own thread takes the queue
        sub.reader.in_group = False  # type: ignore[attr-defined]
        sub.push(_xid(1))
        assert sub.wake.is_set()
    sub.push(_xid(2))
    assert not sub.run_inline()
    assert taken == [] and sub.reader.inlined == 0  # type: ignore[attr-defined]


def test_the_bound_counts_an_entry_an_event_and_the_most_a_passed_transaction_makes() -> None:
    gtid: Any = GtidEvent(log_file="b", offset=4, next_offset=46, timestamp=0, server_id=1, gtid="0-1-5")
    passed = PassedEvent(
        log_file="b",
        offset=4,
        next_offset=77,
        timestamp=0,
        server_id=1,
        transactions=(PassedTransaction(events=(gtid, _xid(1)), begin_ms=0),) * 3,
        begins_ms=(0, 0, 0),
    )
    sub = _subscription(None, lambda entries, size: True)
    sub.push(passed)
    sub.push([_xid(2)], 1)
    assert _bound(sub.items) == (3 * PASSED_EVENTS + 1 + 1, 3 * PASSED_EVENTS * PASSED_EVENT_BYTES + 31)


def _map(table: str, seen: LayoutSeen, offset: int) -> TableMapEvent:
    return TableMapEvent(
        log_file="b.000001",
        offset=offset,
        next_offset=offset + 40,
        timestamp=0,
        server_id=1,
        table_id=offset,
        schema="db",
        table=table,
        table_schema=TableSchema("db", table, ()),
        seen=seen,
    )


@pytest.mark.parametrize("inline", [False, True], ids=["parser thread", "reader thread"])
def test_a_table_map_decoded_with_another_layout_than_the_destinations_makes_it_leave(inline: bool) -> None:
    history = SchemaHistory(mariadb=True)
    history.bootstrap(EntryPosition("b.000001", 4), SchemaCatalog(mariadb=True))
    history.apply(EntryPosition("b.000001", 10), "db", "CREATE TABLE t (id INT PRIMARY KEY, f FLOAT(7,4))")
    taken: list[BinlogEvent] = []
    sub = _subscription(taken.append, lambda entries, size: True)
    sub.member.tables = TableFilters.from_strings(r"db\.t", "")
    sub.member.schemas = SchemaTracker(history, destination_logger(__name__, "d"))
    mine = layout_seen(history, "db", "t")
    other = LayoutSeen(None)  # what a history without the table holds
    for event in (_map("t", mine, 100), _map("u", other, 200), _map("t", mine, 300), _map("t", other, 400)):
        sub.push(event)
    if inline:
        sub.waiting = True
        assert not sub.run_inline()  # the last map stops it; its parser thread raises that
        with pytest.raises(SharedReaderLeft, match=r"another layout of db\.t"):
            next(sub.events())
    else:
        events = sub.events()
        taken += [next(events), next(events), next(events)]  # db.u is not captured: not checked
        with pytest.raises(SharedReaderLeft, match=r"another layout of db\.t"):
            next(events)
    assert [e.offset for e in taken] == [100, 200, 300]
    assert sub.reader.left == [sub]  # type: ignore[attr-defined]
