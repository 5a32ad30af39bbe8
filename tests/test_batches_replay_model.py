"""run_batches' replay after a crash, against a model (hypothesis): the instance redelivers from an acked cursor at or
before the batch in flight, binlog entries the same as before and snapshot entries read anew (at or after that
batch's end). A binlog batch is cut to end exactly where it ended; after a spooled batch, the binlog entries up to its
end are dropped and nothing else is; every message is acked once, in order. A message the cut splits goes back to
the instance: the puller holds nothing between batches, so a run that stops after the cut batch leaves nothing
outstanding, and the next run (or the next start, told by the journal how far fn got) hands on the rest once."""

from __future__ import annotations

import logging
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from canal.lake.forms.changes import position_id
from canal.protocol import EMPTY_MESSAGE_ID, Entry, EntryType, EventType, Header, Message
from canal.spark.batches import CUT_PATIENCE_S, _Puller


def _binlog(offset: int) -> Entry:
    return Entry(Header("mysql-bin.000003", offset, 1, 0, "s", "t", EventType.INSERT, 10), EntryType.ROWDATA)


def _snapshot(offset: int, n: int) -> Entry:
    header = Header("mysql-bin.000003", offset, 1, 0, "s", "t", EventType.SNAPSHOT, 64, props={"n": str(n)})
    return Entry(header, EntryType.ROWDATA)


class _Redelivery:
    """The instance after a restart, as its store hands out: the stream from the acked cursor, in messages of the
    given sizes (the last one repeated); a rollback hands out again from a message's first entry, a restart from
    the acked cursor. Records acks."""

    destination = "d"

    def __init__(self, entries: list[Entry], sizes: list[int]) -> None:
        self.stream = entries
        self.sizes = list(sizes)
        self.acked_to = 0  # entries before this index are acked
        self.next = 0  # the next entry to hand out
        self.outstanding: list[tuple[int, int, int]] = []  # (message id, first entry, entry after the last)
        self.handed = 0  # message ids handed out so far
        self.acked: list[int] = []

    def get_without_ack(self, batch_size: int, timeout: float, linger: float | None = None) -> Message:
        if self.next >= len(self.stream):
            return Message(EMPTY_MESSAGE_ID)
        size = self.sizes.pop(0) if len(self.sizes) > 1 else self.sizes[0]
        first, self.next = self.next, min(self.next + size, len(self.stream))
        self.handed += 1
        self.outstanding.append((self.handed, first, self.next))
        return Message(self.handed, self.stream[first : self.next])

    def ack(self, batch_id: int) -> None:
        mid, _first, end = self.outstanding.pop(0)
        assert mid == batch_id, f"acked {batch_id} before {mid}"
        self.acked.append(batch_id)
        self.acked_to = end

    def rollback(self, batch_id: int) -> None:
        at = next(i for i, (mid, _first, _end) in enumerate(self.outstanding) if mid == batch_id)
        self.next = self.outstanding[at][1]
        del self.outstanding[at:]

    def restart(self) -> None:
        self.outstanding.clear()
        self.next = self.acked_to


def _drain(puller: _Puller) -> list[Entry]:
    """What a run hands on, batch after batch, acking each (no cut)."""
    out: list[Entry] = []
    while True:
        more, ids, cut = puller.take(None)
        if not more and not ids:
            return out
        assert not cut and not puller.buffer
        out += more
        puller.ack(ids)


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
    assert not puller.buffer  # a message the cut split went back to the instance
    puller.ack(ids)
    assert entries + _drain(puller) == stream
    assert not instance.outstanding and instance.acked_to == len(stream)  # every message acked once, in order


@given(_replays(), _SIZES, st.booleans())
def test_a_run_that_stops_after_the_cut_batch_leaves_the_rest_to_the_next_run_once(
    replay: tuple[list[Entry], int, int], sizes: list[int], restart: bool
) -> None:
    """The run stops once the cut batch is handled (``until``, ``max_batches``): the next run on the instance --
    or, when the process stops there, on the instance started again -- hands on the rest, and not the cut batch's
    entries again (the journal's ``through``: how far fn got while the instance may deliver it again)."""
    stream, _end_index, end = replay
    instance = _Redelivery(stream, sizes)
    first = _Puller(instance, 5, 0.0)  # type: ignore[arg-type]
    entries, ids, _cut = first.take(end)
    first.ack(ids)
    through = first.behind  # what run_batches writes into the journal with the batch's done
    if restart:
        instance.restart()
    following = _Puller(instance, 5, 0.0)  # type: ignore[arg-type]
    following.redelivers(through)
    assert entries + _drain(following) == stream
    assert not instance.outstanding and instance.acked_to == len(stream)


@given(_replays(), _SIZES)
def test_after_a_spooled_batch_only_the_binlog_entries_it_held_are_dropped(
    replay: tuple[list[Entry], int, int], sizes: list[int]
) -> None:
    stream, _end_index, end = replay
    instance = _Redelivery(stream, sizes)
    puller = _Puller(instance, 5, 0.0)  # type: ignore[arg-type]
    puller.redelivers(end)
    delivered = _drain(puller)
    kept = [e for e in stream if e.header.event_type is EventType.SNAPSHOT or position_id(e) > end]
    assert delivered == kept
    assert instance.acked == list(range(1, instance.handed + 1))


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
