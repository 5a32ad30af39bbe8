"""The groups a shared reader routes whole (canal.parse.shared.groups): transactions and statements with their GTID
event, which of them are plain rows, and where a stream rests between them."""

from __future__ import annotations

from typing import Any

from canal.parse.events import (
    BinlogEvent,
    FormatDescriptionEvent,
    GtidEvent,
    HeartbeatEvent,
    QueryEvent,
    RotateEvent,
    RowsEvent,
    TableMapEvent,
    XidEvent,
)
from canal.parse.shared.groups import GroupTracker
from canal.protocol import EventType, TableSchema

FILE = "mysql-bin.000003"
TABLE = TableSchema("db", "t", ())


class Stream:
    """Events one after the other, each 10 bytes long."""

    def __init__(self, at: int = 100) -> None:
        self.at = at

    def _place(self, length: int = 10) -> dict[str, Any]:
        place = {"log_file": FILE, "offset": self.at, "next_offset": self.at + length, "timestamp": 1, "server_id": 1}
        self.at += length
        return place

    def gtid(self, *, mariadb: bool = True, standalone: bool = False, xa: str | None = None) -> GtidEvent:
        return GtidEvent(**self._place(), gtid="0-1-5", mariadb=mariadb, standalone=standalone, xa_xid=xa)

    def query(self, sql: str) -> QueryEvent:
        return QueryEvent(**self._place(), schema="db", sql=sql)

    def rows(self) -> list[BinlogEvent]:
        table_map = TableMapEvent(**self._place(), table_id=1, schema="db", table="t", table_schema=TABLE)
        rows = RowsEvent(**self._place(), event_type=EventType.INSERT, table_id=1, table=TABLE, rows=())
        return [table_map, rows]

    def xid(self) -> XidEvent:
        return XidEvent(**self._place(), xid=9)


def follow(events: list[BinlogEvent], start: int = 100) -> list[tuple[bool, bool, bool, bool]]:
    """(opened, ended, open after, plain) after each event."""
    tracker = GroupTracker((3, start))
    out = []
    for event in events:
        tracker.follow(event)
        out.append((tracker.opened, tracker.ended, tracker.open, tracker.plain))
    return out


def test_a_mariadb_transaction_of_rows_is_one_plain_group() -> None:
    s = Stream()
    seen = follow([s.gtid(), *s.rows(), s.xid()])
    assert seen[0][:3] == (True, False, True)
    assert seen[-1] == (False, True, False, True)


def test_a_mysql_transaction_with_begin_and_commit_is_plain() -> None:
    s = Stream()
    seen = follow([s.gtid(mariadb=False), s.query("BEGIN"), *s.rows(), s.query("COMMIT")])
    assert [o for o, *_ in seen] == [True, False, False, False, False]
    assert seen[-1] == (False, True, False, True)


def test_groups_that_every_destination_needs_are_not_plain() -> None:
    s = Stream()
    ddl = follow([s.gtid(standalone=True), s.query("ALTER TABLE t ADD COLUMN c INT")])
    assert ddl[-1] == (False, True, False, False)  # the statement its GTID event announced ends it
    s = Stream()
    saved = follow([s.gtid(), *s.rows(), s.query("SAVEPOINT a"), *s.rows(), s.xid()])
    assert saved[-1] == (False, True, False, False)
    s = Stream()
    xa = follow([s.gtid(xa="x1"), *s.rows(), s.query("XA END 'x1'")])
    assert xa[-1][1:] == (True, False, False)
    s = Stream()
    rolled_back = follow([s.gtid(), *s.rows(), s.query("ROLLBACK")])
    assert rolled_back[-1] == (False, True, False, False)


def test_the_stream_rests_between_groups_where_the_next_event_starts() -> None:
    s = Stream()
    tracker = GroupTracker((3, 100))
    assert tracker.between and tracker.next_start == (3, 100)
    for event in (s.gtid(), *s.rows()):
        tracker.follow(event)
        assert not tracker.between
    tracker.follow(s.xid())
    assert tracker.between and tracker.next_start == (3, 140) and tracker.continuous
    tracker.follow(HeartbeatEvent(log_file=FILE, offset=140, next_offset=140, timestamp=0, server_id=1))
    assert tracker.next_start == (3, 140) and not tracker.continuous and not tracker.jumped  # it names no event
    rotate = RotateEvent(**s._place(), next_file="mysql-bin.000004", next_position=4)
    tracker.follow(rotate)
    assert tracker.next_start == (4, 4)
    fde = FormatDescriptionEvent(log_file="mysql-bin.000004", offset=4, next_offset=120, timestamp=1, server_id=1)
    tracker.follow(fde)
    assert tracker.between and tracker.next_start == (4, 120) and tracker.continuous


def test_a_dump_that_leaves_events_out_jumps_past_its_place() -> None:
    """A dump from a GTID set leaves out the groups the set holds: the next event it sends, or the place a heartbeat
    names between groups, lies past where the stream stood -- no place before it continues the stream."""
    s = Stream()
    tracker = GroupTracker((3, 100))
    for event in (s.gtid(), *s.rows(), s.xid()):
        tracker.follow(event)
        assert tracker.continuous and not tracker.jumped
    s.at = 700  # groups left out
    tracker.follow(s.gtid())
    assert tracker.jumped and not tracker.continuous and tracker.next_start == (3, 710)
    for event in (*s.rows(), s.xid()):
        tracker.follow(event)
        assert tracker.continuous and not tracker.jumped
    assert tracker.between and tracker.next_start == (3, 740)
    inside = GroupTracker((3, 100))
    inside.follow(s.gtid())
    inside.follow(HeartbeatEvent(log_file=FILE, offset=900, next_offset=900, timestamp=0, server_id=1))
    assert not inside.jumped  # a heartbeat inside a group moves nothing
    tracker.follow(HeartbeatEvent(log_file=FILE, offset=900, next_offset=900, timestamp=0, server_id=1))
    assert tracker.jumped and tracker.between and tracker.next_start == (3, 900)
    tracker.follow(HeartbeatEvent(log_file="mysql-bin.000004", offset=950, next_offset=950, timestamp=0, server_id=1))
    assert not tracker.jumped and tracker.next_start == (3, 900)  # another file: the rotate into it tells
    s.at = 1000  # more left out, then the file ends
    tracker.follow(RotateEvent(**s._place(), next_file="mysql-bin.000004", next_position=4))
    assert tracker.jumped and not tracker.continuous and tracker.next_start == (4, 4)


def test_a_dump_start_places_the_stream_at_its_first_real_event() -> None:
    tracker = GroupTracker(None)
    artificial = RotateEvent(
        log_file=FILE,
        offset=0,
        next_offset=0,
        timestamp=0,
        server_id=1,
        next_file=FILE,
        next_position=100,
        artificial=True,
    )
    tracker.follow(artificial)
    assert tracker.next_start == (3, 100)
    # the format description a dump sends again from its file's start does not move it back
    tracker.follow(FormatDescriptionEvent(log_file=FILE, offset=4, next_offset=120, timestamp=1, server_id=1))
    assert tracker.next_start == (3, 100) and not tracker.continuous
    s = Stream(100)
    tracker.follow(s.gtid())
    assert tracker.continuous


def test_a_mysql_compressed_transaction_rests_only_at_its_end() -> None:
    # the events of a payload all sit at its place, the last one at its end (offset == next_offset)
    place = {"log_file": FILE, "offset": 100, "next_offset": 300, "timestamp": 1, "server_id": 1}
    tracker = GroupTracker((3, 100))
    tracker.follow(GtidEvent(log_file=FILE, offset=80, next_offset=100, timestamp=1, server_id=1, gtid="u:1"))
    for event in (
        QueryEvent(**place, schema="db", sql="BEGIN"),
        TableMapEvent(**place, table_id=1, schema="db", table="t", table_schema=TABLE),
        RowsEvent(**place, event_type=EventType.INSERT, table_id=1, table=TABLE, rows=()),
    ):
        tracker.follow(event)
        assert not tracker.between
    tracker.follow(XidEvent(log_file=FILE, offset=300, next_offset=300, timestamp=1, server_id=1, xid=1))
    assert tracker.between and tracker.next_start == (3, 300) and tracker.plain
