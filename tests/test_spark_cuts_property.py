"""Where the canal source cuts micro-batches, against a model: random transaction shapes, caps, get sizes and store
modes, read the way Spark's runner reads (``read(start)`` from the last end, a replay of a spooled start).

Properties: every row comes once, in binlog order; no micro-batch holds more row events than ``max.entries``, nor more
rows than ``maxRowsPerTrigger`` unless it is one row event (caps keep whole events, at least one); consecutive
micro-batches meet (each starts where the one before ended); and a spooled micro-batch read again by a new reader
process (after its session is gone) is the same batch with the same end. With ``Trigger.AvailableNow``: a run
reads exactly the rows written before it began, however the caps (``maxBytesPerTrigger`` too) cut them, and the next
run goes on from there. Both in change rows and in packed batches (``images=packed``), whose reader acks each
instance batch once packed and ends a micro-batch before an instance batch that brings a table's rows in a second
layout (an ALTER between the transactions).
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyarrow")

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from canal.lake.forms.packed import is_packed, unpack_all
from canal.lake.forms.typed_batch import TypedBatch
from canal.spark.offsets import INITIAL_OFFSET, Offset, canonical
from canal.spark.source import CanalStreamReader, close_sessions
from canal.testing.fake import FakeMysql

_SERVERS = itertools.count()


@contextlib.contextmanager
def _server(factory: pytest.TempPathFactory) -> Iterator[tuple[FakeMysql, Path]]:
    """A new FakeMysql with the table ``shop.t``, and an empty spool directory; the reader sessions closed after."""
    with FakeMysql(name=f"cuts-{next(_SERVERS)}") as fake:
        fake.execute("CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(40))")
        try:
            yield fake, factory.mktemp("spool")
        finally:
            close_sessions()


def _options(
    fake: FakeMysql,
    spool: Path,
    max_entries: int,
    batch_size: int,
    mode: str,
    prefetch: bool,
    images: str = "json",
    **caps: int | None,
) -> dict[str, str]:
    """The source's options for reading ``fake``; ``caps`` (``maxRowsPerTrigger=...``) where not None."""
    return {
        "images": images,
        "destination": "cuts",
        "master.address": fake.address,
        "master.journal.name": "mysql-bin.000001",
        "master.position": "4",
        "spool.dir": str(spool),
        "batch.size": str(batch_size),
        "max.entries": str(max_entries),
        "canal.instance.memory.batch.mode": mode,
        "read.timeout": "0.5",
        "prefetch": "true" if prefetch else "false",
        **{name: str(value) for name, value in caps.items() if value is not None},
    }


def _write(fake: FakeMysql, shape: list[int], first: int) -> int:
    """One transaction, one row event of ``rows`` rows, for each of ``shape`` -- 0: an ALTER TABLE adding a column;
    ids from ``first``. Returns the next."""
    for rows in shape:
        if rows == 0:
            fake.execute(f"ALTER TABLE shop.t ADD COLUMN c{first}_{next(_SERVERS)} INT")
            continue
        fake.insert_many("shop.t", [{"id": first + i, "v": f"value {first + i}"} for i in range(rows)])
        first += rows
    return first


def _changes(batch: Any) -> list[dict[str, Any]]:
    """The change rows of a micro-batch (change rows, or packed batches unpacked) as ``is_ddl``, ``id`` (of the
    row's after image), ``log_file`` and ``log_offset``."""
    if is_packed(batch.schema.names):
        out = unpack_all(batch)
        if isinstance(out, TypedBatch):
            afters = {layout: images.column("after").to_pylist() for layout, images in out.images.items()}
            return [
                {**m, "id": None if m["layout"] is None else afters[m["layout"]][m["image_row"]]["id"]}
                for m in out.changes.to_pylist()
            ]
        batch = out
    rows = batch.to_pylist()
    return [{**row, "id": None if row["after"] is None else int(json.loads(row["after"])["id"])} for row in rows]


def _ids(batch: Any) -> list[int]:
    return [row["id"] for row in _changes(batch) if not row["is_ddl"]]


def _read(r: CanalStreamReader, start: Offset) -> tuple[Any, Offset]:
    import pyarrow as pa

    it, end = r.read(start)
    batches = list(it)
    return (pa.concat_batches(batches) if batches else None), end


@pytest.mark.parametrize("images", ["json", "packed"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    shape=st.lists(st.integers(0, 12), min_size=1, max_size=20),
    max_entries=st.integers(1, 12),
    max_rows=st.none() | st.integers(1, 30),
    batch_size=st.integers(1, 8),
    mode=st.sampled_from(["MEMSIZE", "ITEMSIZE"]),
    prefetch=st.booleans(),
)
# an ALTER between the rows of one micro-batch: packed, the rows in the second layout open the next one
@example(shape=[3, 0, 3, 2], max_entries=12, max_rows=None, batch_size=1, mode="ITEMSIZE", prefetch=False)
@example(shape=[3, 0, 3, 2], max_entries=12, max_rows=None, batch_size=1, mode="ITEMSIZE", prefetch=True)
def test_micro_batches_keep_the_caps_and_the_stream(
    tmp_path_factory: pytest.TempPathFactory,
    shape: list[int],
    max_entries: int,
    max_rows: int | None,
    batch_size: int,
    mode: str,
    prefetch: bool,
    images: str,
) -> None:
    with _server(tmp_path_factory) as (fake, spool):
        total = _write(fake, shape, 0)
        options = _options(fake, spool, max_entries, batch_size, mode, prefetch, images, maxRowsPerTrigger=max_rows)
        r = CanalStreamReader(options)
        start: Offset = dict(INITIAL_OFFSET)
        got: list[tuple[Offset, Any, Offset]] = []
        seen: list[int] = []
        quiet = 0  # reads in a row that brought nothing: the rows written are all there, so a few at most
        for _ in range(500):  # each read moves on by at least one entry (four a transaction at most)
            if len(seen) == total:
                break
            batch, end = _read(r, start)
            if canonical(end) != canonical(start):  # a micro-batch (rows or only transaction boundaries)
                got.append((start, batch, end))
                quiet = 0
            else:
                quiet += 1
                assert quiet < 5, f"rows {seen[-1] + 1 if seen else 0}.. of {total} never came"
            if batch is not None:
                rows = _changes(batch)
                changes = [row for row in rows if not row["is_ddl"]]
                seen += [row["id"] for row in changes]
                events = {(row["log_file"], row["log_offset"]) for row in changes}
                assert len(events) <= max_entries
                if max_rows is not None:
                    assert len(rows) <= max_rows or len(events) <= 1
            start = end
        assert seen == list(range(total))
        assert all(canonical(a[2]) == canonical(b[0]) for a, b in itertools.pairwise(got))

        # a new reader process (the sessions gone) replays each spooled start exactly
        close_sessions()
        again = CanalStreamReader(options)
        for first, batch, end in got:
            replayed, replayed_end = _read(again, first)
            assert (replayed is None) if batch is None else (replayed is not None and replayed.equals(batch))
            assert canonical(replayed_end) == canonical(end)

        # and one with no spool, started at a micro-batch's end, reads from the binlog exactly the rows after it
        if len(got) > 1:
            middle = len(got) // 2
            before = sum(len(_ids(batch)) for _, batch, _ in got[:middle] if batch is not None)
            close_sessions()
            fresh = CanalStreamReader({**options, "spool.dir": str(spool) + "-fresh"})
            after, start, quiet = [], got[middle][0], 0
            while len(after) < total - before and quiet < 5:
                batch, end = _read(fresh, start)
                quiet = quiet + 1 if canonical(end) == canonical(start) else 0
                after += [] if batch is None else _ids(batch)
                start = end
            assert after == list(range(before, total))


@pytest.mark.parametrize("images", ["json", "packed"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    before=st.lists(st.integers(0, 6), min_size=1, max_size=8),
    after=st.lists(st.integers(0, 6), min_size=1, max_size=8),
    max_entries=st.integers(1, 8),
    max_bytes=st.none() | st.integers(1, 300),
    batch_size=st.integers(1, 4),
    mode=st.sampled_from(["MEMSIZE", "ITEMSIZE"]),
    prefetch=st.booleans(),
)
def test_an_available_now_run_reads_what_was_there_when_it_began(
    tmp_path_factory: pytest.TempPathFactory,
    before: list[int],
    after: list[int],
    max_entries: int,
    max_bytes: int | None,
    batch_size: int,
    mode: str,
    prefetch: bool,
    images: str,
) -> None:
    with _server(tmp_path_factory) as (fake, spool):
        first_run = _write(fake, before, 0)
        options = _options(fake, spool, max_entries, batch_size, mode, prefetch, images, maxBytesPerTrigger=max_bytes)
        # run 1 begins (its target: the master's position now), then the rows of `after` are written
        first = CanalStreamReader(options)
        first.prepareForTriggerAvailableNow()
        total = _write(fake, after, first_run)
        seen, end = _run(first, dict(INITIAL_OFFSET))
        assert seen == list(range(first_run))
        close_sessions()  # run 2: a new reader process, from the checkpoint's last end
        second = CanalStreamReader(options)
        second.prepareForTriggerAvailableNow()
        seen, _ = _run(second, end)
        assert seen == list(range(first_run, total))


def _run(r: CanalStreamReader, start: Offset) -> tuple[list[int], Offset]:
    """Read micro-batches from ``start`` as an AvailableNow run does, each committed, until one is empty (which ends
    the run). Returns the row ids read and where the run ended."""
    seen: list[int] = []
    for _ in range(500):
        batch, end = _read(r, start)
        if canonical(end) == canonical(start):
            return seen, start
        if batch is not None:
            seen += _ids(batch)
        r.commit(end)
        start = end
    pytest.fail("the AvailableNow run did not end")
