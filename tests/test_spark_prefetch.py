"""The canal source's reader prepares the next batch in the background: same rows, same replay; a batch's instance
batches are acked once it is spooled.

The reader logic (:class:`~canal.spark.source.CanalStreamReader`) runs here in-process against a FakeMysql, the way
Spark's runner process calls it: ``read(start)`` returns a batch and its end, the next read starts at that end,
``commit(end)`` comes after the sink wrote.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyarrow")

from canal.errors import MetaError
from canal.spark.offsets import INITIAL_OFFSET, Offset, canonical
from canal.spark.sessions import session_of
from canal.spark.source import CanalStreamReader, SparkSourceError, Spool, close_sessions
from canal.testing.fake import FakeMysql

ROWS = 60


@pytest.fixture
def fake(fake_mysql: FakeMysql) -> Iterator[FakeMysql]:
    fake_mysql.execute("CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(10))")
    for i in range(ROWS):  # one transaction per row: many small entries
        fake_mysql.insert("shop.t", {"id": i, "v": f"v{i}"})
    yield fake_mysql
    close_sessions()


def reader(fake: FakeMysql, spool: Path, prefetch: bool) -> CanalStreamReader:
    return CanalStreamReader(
        {
            "destination": "pf",
            "master.address": fake.address,
            "master.journal.name": "mysql-bin.000001",
            "master.position": "4",
            "spool.dir": str(spool),
            "batch.size": "3",
            "max.entries": "7",
            "read.timeout": "2",
            "prefetch": "true" if prefetch else "false",
        }
    )


def one_batch(it: Iterator[Any]) -> Any:
    """The record batches a read returned (Spark takes several) joined into one, None when there were none."""
    import pyarrow as pa

    batches = list(it)
    assert all(b.num_rows for b in batches)  # Spark is handed no empty batch
    return pa.concat_batches(batches) if batches else None


def assert_spooled_batch_then_the_rest(
    r: CanalStreamReader, start: Offset, spooled: tuple[Any, Offset], got: list[tuple[Offset, Any, Offset]]
) -> None:
    """A read of ``start`` returns exactly the ``spooled`` batch and end; the reads after it bring every row that
    neither it nor ``got`` (the batches read before) held, each once."""
    it, end = r.read(start)
    batch = one_batch(it)
    assert batch is not None and batch.equals(spooled[0]) and canonical(end) == canonical(spooled[1])
    before = ids([b for _, b, _ in got]) + ids([batch])
    rest, _ = read_until(r, end, ROWS - len(before))
    assert before + ids([b for _, b, _ in rest]) == list(range(ROWS))


def ids(batches: list[Any]) -> list[int]:
    out = []
    for batch in batches:
        for row in batch.to_pylist():
            if not row["is_ddl"]:
                out.append(int(json.loads(row["after"])["id"]))
    return out


def read_until(r: CanalStreamReader, start: Offset, want: int) -> tuple[list[tuple[Offset, Any, Offset]], Offset]:
    """Read batches until ``want`` row ids came; each as (start, batch, end)."""
    got: list[tuple[Offset, Any, Offset]] = []
    for _ in range(200):
        if len(ids([b for _, b, _ in got])) >= want:
            break
        it, end = r.read(start)
        batch = one_batch(it)
        if batch is not None:
            got.append((start, batch, end))
        start = end
    return got, start


def test_prefetched_batches_are_the_stream_in_order_and_spooled(fake: FakeMysql, tmp_path: Path) -> None:
    r = reader(fake, tmp_path / "spool", prefetch=True)
    got, _ = read_until(r, dict(INITIAL_OFFSET), ROWS)
    assert ids([b for _, b, _ in got]) == list(range(ROWS))
    seqs = [s for _, b, _ in got for s in b.column("seq").to_pylist()]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    # every batch handed out (and the one prepared after the last) is in the spool under its start
    session_of(r.options).finish_prefetch()
    spool = Spool(tmp_path / "spool")
    for start, batch, batch_end in got:
        spooled = spool.read(start)
        assert spooled is not None and spooled[0].equals(batch) and canonical(spooled[1]) == canonical(batch_end)


@pytest.mark.parametrize("prefetch", [False, True], ids=["read", "prefetch"])
def test_max_entries_caps_every_micro_batch_whatever_a_get_returns(
    fake: FakeMysql, tmp_path: Path, prefetch: bool
) -> None:
    # batch.size 3 asks for 3 KiB in the store's MEMSIZE mode: one get returns dozens of these small entries, and a
    # micro-batch used to take them all (21 rows where max.entries is 7)
    r = reader(fake, tmp_path / "spool", prefetch=prefetch)
    got, _ = read_until(r, dict(INITIAL_OFFSET), ROWS)
    assert ids([b for _, b, _ in got]) == list(range(ROWS))
    # one-row transactions are three entries each (BEGIN, the row event, COMMIT): 7 entries hold at most 3 rows
    assert max(b.num_rows for _, b, _ in got) <= 3
    # the rest of a cut instance batch opens the next micro-batch: the batches follow each other with no gap
    assert all(canonical(end) == canonical(nxt) for (_, _, end), (nxt, _, _) in pairwise(got))


def test_a_batch_is_acked_once_spooled_and_commit_drops_its_file(fake: FakeMysql, tmp_path: Path) -> None:
    # max.entries above all there is: the micro-batch ends with whole instance batches (one a cap cuts is acked with
    # the micro-batch that takes its rest)
    r = CanalStreamReader({**reader(fake, tmp_path / "spool", prefetch=False).options, "max.entries": "1000"})
    start = dict(INITIAL_OFFSET)
    it, end = r.read(start)
    assert ids(list(it))
    session = session_of(r.options)
    assert session.instance is not None
    # the spool holds the batch for a replay: the instance keeps nothing outstanding, its cursor is at the batch's end
    assert session.outstanding == [] and session.instance.list_batch_ids() == []
    cursor = session.instance.get_cursor()
    assert cursor is not None and cursor.position is not None
    assert (cursor.position.journal_name, cursor.position.position) == (end["file"], end["offset"])
    assert Spool(tmp_path / "spool").read(start) is not None
    r.commit(end)
    assert Spool(tmp_path / "spool").read(start) is None
    assert session.instance.get_cursor() == cursor  # commit changes nothing in the instance


def test_reads_go_on_without_commits_when_the_store_is_smaller_than_a_batch(fake: FakeMysql, tmp_path: Path) -> None:
    """Spark asks for batch N+1 before it commits batch N: the store must not hold batch N until then. With a store
    of 4 entries and micro-batches of up to 7, every row still comes, though nothing is committed."""
    r = CanalStreamReader(
        {
            **reader(fake, tmp_path / "spool", prefetch=True).options,
            "canal.instance.memory.buffer.size": "4",
            "canal.instance.memory.batch.mode": "ITEMSIZE",
            "read.timeout": "0.2",
        }
    )
    got, _ = read_until(r, dict(INITIAL_OFFSET), ROWS)
    assert ids([b for _, b, _ in got]) == list(range(ROWS))


def test_a_prefetch_takes_what_comes_until_the_next_read(fake: FakeMysql, tmp_path: Path) -> None:
    """The batch prepared in the background holds the rows that arrived while Spark ran the one before, not only
    those there when it began."""
    r = CanalStreamReader({**reader(fake, tmp_path / "spool", prefetch=True).options, "max.entries": "1000"})
    got, end = read_until(r, dict(INITIAL_OFFSET), ROWS)
    assert ids([b for _, b, _ in got]) == list(range(ROWS))
    session = session_of(r.options)
    assert session.prefetcher is not None and session.prefetcher.is_alive()  # waiting for more
    for i in range(ROWS, ROWS + 5):  # one transaction each, arriving one after another
        fake.insert("shop.t", {"id": i, "v": f"v{i}"})
    with session.prefetch_progress:  # the prefetch has turned the five rows into change rows
        assert session.prefetch_progress.wait_for(lambda: session.prefetch_rows >= 5, timeout=60)
    it, _ = r.read(end)
    assert ids(list(it)) == list(range(ROWS, ROWS + 5))  # in one batch


def test_after_the_reader_process_dies_a_prepared_batch_is_replayed_exactly(fake: FakeMysql, tmp_path: Path) -> None:
    r = reader(fake, tmp_path / "spool", prefetch=True)
    got, end = read_until(r, dict(INITIAL_OFFSET), 10)
    session_of(r.options).finish_prefetch()
    prepared = Spool(tmp_path / "spool").read(end)
    assert prepared is not None, "the batch after the last read was prepared and spooled"
    close_sessions()  # the runner process is gone: no instance, nothing acked after the last commit
    again = reader(fake, tmp_path / "spool", prefetch=True)
    assert_spooled_batch_then_the_rest(again, end, prepared, got)


def test_prefetch_off_gives_the_same_rows(fake: FakeMysql, tmp_path: Path) -> None:
    with_prefetch, _ = read_until(reader(fake, tmp_path / "a", prefetch=True), dict(INITIAL_OFFSET), ROWS)
    close_sessions()
    without, _ = read_until(reader(fake, tmp_path / "b", prefetch=False), dict(INITIAL_OFFSET), ROWS)
    assert ids([b for _, b, _ in with_prefetch]) == ids([b for _, b, _ in without]) == list(range(ROWS))
    assert not session_of(reader(fake, tmp_path / "b", prefetch=False).options).ready


def packed_ids(batches: list[Any]) -> list[int]:
    """The row ids of packed micro-batches (``images=packed``), in stream order."""
    import pyarrow as pa

    from canal.lake.forms.packed import unpack_all

    out: list[int] = []
    for batch in batches:
        typed = unpack_all(pa.Table.from_batches([batch]))
        for images in typed.images.values():
            out += [image["id"] for image in images.column("after").to_pylist() if image is not None]
    return out


def test_a_packed_prefetch_prepares_full_batches_ahead_two_at_most(fake: FakeMysql, tmp_path: Path) -> None:
    """``images=packed``: a prefetched batch that ended by itself (here ``max.entries``) is followed by the next,
    while Spark has not asked for it yet -- two ahead at most; each is spooled and read as prepared."""
    from canal.spark.sessions import READY_MOST

    r = CanalStreamReader({**reader(fake, tmp_path / "spool", prefetch=True).options, "images": "packed"})
    session = session_of(r.options)
    it, end = r.read(dict(INITIAL_OFFSET))
    got = [one_batch(it)]
    thread = session.prefetcher
    assert thread is not None
    thread.join(30)  # two batches prepared ahead, then it stops by itself: no read stopped it
    assert not thread.is_alive() and len(session.ready) == READY_MOST
    ahead = list(session.ready)
    assert ahead[0][0] == canonical(end) and ahead[1][0] == canonical(ahead[0][1].end)
    spool = Spool(tmp_path / "spool")
    for start, prepared in ahead:  # spooled as they were prepared
        spooled = spool.read(json.loads(start))
        assert spooled is not None and spooled[0].equals(one_batch(iter(prepared.batches)))
    it, end = r.read(end)  # the first of them, at once; the prefetch goes on after the second
    got.append(one_batch(it))
    assert got[-1].equals(one_batch(iter(ahead[0][1].batches))) and canonical(end) == canonical(ahead[0][1].end)
    assert [key for key, _ in session.ready][:1] == [ahead[1][0]]
    for _ in range(200):
        if len(packed_ids(got)) >= ROWS:
            break
        it, end = r.read(end)
        batch = one_batch(it)
        if batch is not None:
            got.append(batch)
    assert packed_ids(got) == list(range(ROWS))


def test_a_refused_ack_fails_the_read_and_loses_nothing(
    fake: FakeMysql, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ack failure surfaces as a SparkSourceError (the query fails); the batch it followed stays spooled, the
    instance is closed, and the next read of the same start returns exactly that batch, then every row after it."""
    # gets of 3 entries (ITEMSIZE), micro-batches of up to 7: every micro-batch ends an instance batch, so every read
    # acks one (in MEMSIZE mode a 3 KiB get holds dozens of these entries, acked when max.entries let them all in)
    options = {
        **reader(fake, tmp_path / "spool", prefetch=False).options,
        "canal.instance.memory.batch.mode": "ITEMSIZE",
    }
    r = CanalStreamReader(options)
    got, start = read_until(r, dict(INITIAL_OFFSET), 10)
    session = session_of(r.options)
    assert session.instance is not None

    def refuse(*_args: Any) -> None:
        raise MetaError("the meta store refused the cursor write (injected)")

    monkeypatch.setattr(session.instance.meta, "update_cursor", refuse)
    with pytest.raises(SparkSourceError, match="refused"):
        r.read(start)
    assert session.instance is None and session.outstanding == []  # closed: the next read restarts at its start
    spooled = Spool(tmp_path / "spool").read(start)
    assert spooled is not None and ids([spooled[0]])
    monkeypatch.undo()
    assert_spooled_batch_then_the_rest(r, start, spooled, got)


@pytest.mark.parametrize("images", ["json", "packed"])
def test_an_available_now_run_ends_at_once_when_all_up_to_its_target_was_taken(
    fake: FakeMysql, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, images: str
) -> None:
    """Trigger.AvailableNow ends at the first read that brings nothing. Once the parser has read to the target and
    every entry up to it was taken, that read has nothing to wait for: it neither lets a packed micro-batch fill nor
    waits ``read.timeout`` for entries (each wait was added to every run's end). The reads before it bring every
    row."""
    from canal.instance import Instance
    from canal.spark.sessions import Session

    timed: list[float | None] = []  # the timeouts of the instance gets, and a fill as -1
    get = Instance.get_without_ack
    fill = Session.let_prefetch_fill

    def recorded_get(self: Instance, size: int, timeout: float | None = None, **kw: Any) -> Any:
        timed.append(timeout)
        return get(self, size, timeout, **kw)

    def recorded_fill(self: Session, *args: Any) -> None:
        timed.append(-1.0)
        fill(self, *args)

    monkeypatch.setattr(Instance, "get_without_ack", recorded_get)
    monkeypatch.setattr(Session, "let_prefetch_fill", recorded_fill)
    options = {**reader(fake, tmp_path / "spool", prefetch=True).options, "images": images, "read.timeout": "30"}
    r = CanalStreamReader(options)
    r.prepareForTriggerAvailableNow()
    start, got = dict(INITIAL_OFFSET), []
    for _ in range(200):
        timed.clear()
        it, end = r.read(start)
        batch = one_batch(it)
        if batch is None:
            break
        got.append(batch)
        start = end
    assert canonical(end) == canonical(start)  # the empty read: the run's end
    assert timed and all(timeout is None for timeout in timed)  # it looked, and waited for nothing
    assert (packed_ids(got) if images == "packed" else ids(got)) == list(range(ROWS))


def test_a_messages_micro_batch_is_bounded_by_its_plans_bytes_not_by_the_store(
    fake: FakeMysql, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``messages``: a micro-batch's entries are acked as they are planned (the plans hold what their messages need),
    so the micro-batch prepared ahead is bounded by its plans' bytes -- as a packed one by its packed rows' --, not by
    the instance's store: with a store of 4 entries (one transaction and a bit) and ``max.entries`` above the whole
    stream, micro-batches take many transactions each and end once their plans pass the cap; every row's message
    comes, in order, once."""
    import canal.spark.source as source_module

    for cap in ("FIRST_BATCH_BYTES", "PACKED_BATCH_BYTES"):
        monkeypatch.setattr(source_module, cap, 8000)
    r = CanalStreamReader(
        {
            **reader(fake, tmp_path / "spool", prefetch=True).options,
            "messages": "canal",
            "max.entries": "1000",
            "canal.instance.memory.buffer.size": "4",
            "canal.instance.memory.batch.mode": "ITEMSIZE",
            "read.timeout": "0.2",
        }
    )
    start: Offset = dict(INITIAL_OFFSET)
    per_batch: list[list[int]] = []
    for _ in range(200):
        if sum(map(len, per_batch)) >= ROWS:
            break
        it, start = r.read(start)
        batch = one_batch(it)
        if batch is not None:
            values = [json.loads(v) for v in batch.column("value").to_pylist()]
            per_batch.append([int(row["id"]) for v in values if v["type"] == "INSERT" for row in v["data"]])
    assert [i for ids_ in per_batch for i in ids_] == list(range(ROWS))
    assert max(map(len, per_batch)) > 4  # more transactions than the store holds
    assert len(per_batch) >= 3  # and ended by the plans' bytes: max.entries alone would have taken all 60
