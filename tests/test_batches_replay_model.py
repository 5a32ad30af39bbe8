"""run_batches' replay after a crash, against a model (hypothesis): the instance redelivers from an acked cursor at or
before the batch in flight, binlog entries the same as before and snapshot entries read anew (at or after that
batch's end). A binlog batch is cut to end exactly where it ended; after a spooled batch, the binlog entries up to its
end are dropped and nothing else is; every message is acked once, in order."""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from canal.protocol import EMPTY_MESSAGE_ID, Entry, EntryType, EventType, Header, Message
from canal.spark.batches import CUT_PATIENCE_S, _Puller
from canal.spark.changes import position_id


def _binlog(offset: int) -> Entry:
    return Entry(Header("mysql-bin.000003", offset, 1, 0, "s", "t", EventType.INSERT, 10), EntryType.ROWDATA)


def _snapshot(offset: int, n: int) -> Entry:
    header = Header("mysql-bin.000003", offset, 1, 0, "s", "t", EventType.SNAPSHOT, 64, props={"n": str(n)})
    return Entry(header, EntryType.ROWDATA)


class _Redelivery:
    """The instance after a restart: ``entries`` in messages of the given sizes; records acks."""

    destination = "d"

    def __init__(self, entries: list[Entry], sizes: list[int]) -> None:
        self.messages: deque[Message] = deque()
        i = 0
        for mid, size in enumerate(sizes, 1):
            if i >= len(entries):
                break
            self.messages.append(Message(mid, entries[i : i + size]))
            i += size
        if i < len(entries):
            self.messages.append(Message(len(self.messages) + 1, entries[i:]))
        self.handed = len(self.messages)
        self.acked: list[int] = []

    def get_without_ack(self, batch_size: int, timeout: float, linger: float | None = None) -> Message:
        return self.messages.popleft() if self.messages else Message(EMPTY_MESSAGE_ID)

    def ack(self, batch_id: int) -> None:
        self.acked.append(batch_id)


@st.composite
def _replays(draw: st.DrawFn) -> tuple[list[Entry], int, int]:
    """(the redelivered stream, the index of the in-flight batch's last binlog entry in it, that entry's id)."""
    n = draw(st.integers(1, 30))
    offsets = [100 + 40 * i for i in range(n)]
    end_at = draw(st.integers(0, n - 1))
    stream: list[Entry] = []
    serial = 0
    for i, offset in enumerate(offsets):
        stream.append(_binlog(offset))
        # snapshot entries read after the restart join at a boundary at or after the in-flight batch's end
        if i >= end_at:
            for _ in range(draw(st.integers(0, 2))):
                serial += 1
                stream.append(_snapshot(offset, serial))
    end_index = next(j for j, e in enumerate(stream) if e.header.log_offset == offsets[end_at])
    return stream, end_index, position_id(stream[end_index])


_SIZES = st.lists(st.integers(1, 5), min_size=1, max_size=40)


@given(_replays(), _SIZES)
def test_a_binlog_batch_in_flight_comes_back_cut_exactly_at_its_end(
    replay: tuple[list[Entry], int, int], sizes: list[int]
) -> None:
    stream, end_index, end = replay
    instance = _Redelivery(stream, sizes)
    puller = _Puller(instance, 5, 0.0)  # type: ignore[arg-type]
    entries, ids, cut = puller.take(end)
    assert cut and entries == stream[: end_index + 1]
    rest: list[Entry] = []
    while True:
        more, more_ids, cut = puller.take(None)
        if not more and not more_ids:
            break
        assert not cut
        rest += more
        ids += more_ids
    assert entries + rest == stream
    assert ids == list(range(1, instance.handed + 1))  # every message acked once, in order


@given(_replays(), _SIZES)
def test_after_a_spooled_batch_only_the_binlog_entries_it_held_are_dropped(
    replay: tuple[list[Entry], int, int], sizes: list[int]
) -> None:
    stream, _end_index, end = replay
    instance = _Redelivery(stream, sizes)
    puller = _Puller(instance, 5, 0.0)  # type: ignore[arg-type]
    puller.drop_through = end
    delivered: list[Entry] = []
    ids: list[int] = []
    while True:
        more, more_ids, _cut = puller.take(None)
        if not more and not more_ids:
            break
        delivered += more
        ids += more_ids
    kept = [e for e in stream if e.header.event_type is EventType.SNAPSHOT or position_id(e) > end]
    assert delivered == kept
    assert ids == list(range(1, instance.handed + 1))


class _SlowRedelivery(_Redelivery):
    """A restarted instance that takes ``seconds`` of a fake clock per fetch, arrivals or not."""

    def __init__(self, entries: list[Entry], seconds: float) -> None:
        super().__init__(entries, [1] * len(entries))
        self.now = 0.0
        self.seconds = seconds

    def clock(self) -> float:
        return self.now

    def get_without_ack(self, batch_size: int, timeout: float, linger: float | None = None) -> Message:
        self.now += self.seconds
        return super().get_without_ack(batch_size, timeout)


def test_a_slow_redelivery_is_waited_for_while_entries_keep_arriving() -> None:
    stream = [_binlog(100 + 40 * i) for i in range(50)]
    instance = _SlowRedelivery(stream, seconds=CUT_PATIENCE_S / 3)  # 50 entries: many times the patience in all
    puller = _Puller(instance, 5, 0.0, clock=instance.clock)  # type: ignore[arg-type]
    entries, ids, cut = puller.take(position_id(stream[40]))
    assert cut and entries == stream[:41] and ids == list(range(1, 42))
    assert instance.now > 10 * CUT_PATIENCE_S


def test_a_redelivery_that_stops_short_is_cut_where_it_ends_after_the_patience(caplog: Any) -> None:
    stream = [_binlog(100 + 40 * i) for i in range(5)]
    instance = _SlowRedelivery(stream, seconds=1.0)
    puller = _Puller(instance, 5, 0.0, clock=instance.clock)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="canal.spark.batches"):
        entries, ids, cut = puller.take(position_id(_binlog(100 + 40 * 9)))  # never redelivered
    assert cut and entries == stream and ids == [1, 2, 3, 4, 5]
    assert CUT_PATIENCE_S < instance.now - 5 <= CUT_PATIENCE_S + 2  # gave up once nothing came for the patience
    assert "nothing arrived for 30 s" in caplog.text and "[d]" in caplog.text


def _on(server: int, offset: int) -> Entry:
    """A binlog entry of server ``server``'s binlog (its anchor names the server, as the parser stamps it)."""
    from canal.position import EntryPosition

    header = Header("mysql-bin.000001", offset, 1, 0, "s", "t", EventType.INSERT, 10)
    return Entry(header, EntryType.ROWDATA, anchor=EntryPosition("mysql-bin.000001", 4, server_id=server))


def test_after_a_failover_the_batch_in_flight_neither_cuts_nor_drops_another_servers_entries() -> None:
    """The journal's batch in flight ended at a position of server 1's binlog; the instance now reads server 2's
    (a promoted replica, its binlog numbering behind): those entries are no part of that batch, whatever their
    position ids, so the first batch is neither cut short at the old end nor emptied by it."""
    replica = [_on(2, offset) for offset in (100, 140, 180)]
    end = position_id(_on(1, 5000)) + (4 << 32)  # far past the replica's ids, as the primary's were
    puller = _Puller(_Redelivery(replica, [2, 1]), 100, 0.0)  # type: ignore[arg-type]
    puller.lineage = 1
    entries, ids, replaying = puller.take(end)
    assert (entries, replaying) == (replica[:2], False) and ids == [1]
    dropping = _Puller(_Redelivery(replica, [3]), 100, 0.0)  # type: ignore[arg-type]
    dropping.drop_through, dropping.lineage = end, 1  # after a spooled batch was replayed
    assert dropping.take(None)[0] == replica
    old = _Puller(_Redelivery(replica, [3]), 100, 0.0)  # type: ignore[arg-type]
    old.drop_through = end  # a journal of the old form: no server, ids compared as before
    assert old.take(None)[0] == []
