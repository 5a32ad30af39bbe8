"""The canal source's reader prepares the next batch in the background: same rows, same replay, no early ack.

The reader logic (:class:`~canal.spark.source.CanalStreamReader`) runs here in-process against a FakeMysql, the way
Spark's runner process calls it: ``read(start)`` returns a batch and its end, the next read starts at that end,
``commit(end)`` comes after the sink wrote.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyarrow")

from canal.errors import MetaError
from canal.spark.changes import INITIAL_OFFSET, Offset, canonical
from canal.spark.source import CanalStreamReader, SparkSourceError, Spool, _session, close_sessions
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
        batches = list(it)
        assert len(batches) <= 1
        if batches:
            got.append((start, batches[0], end))
        start = end
    return got, start


def test_prefetched_batches_are_the_stream_in_order_and_spooled(fake: FakeMysql, tmp_path: Path) -> None:
    r = reader(fake, tmp_path / "spool", prefetch=True)
    got, _ = read_until(r, dict(INITIAL_OFFSET), ROWS)
    assert ids([b for _, b, _ in got]) == list(range(ROWS))
    seqs = [s for _, b, _ in got for s in b.column("seq").to_pylist()]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    # every batch handed out (and the one prepared after the last) is in the spool under its start
    _session(r.options).finish_prefetch()
    spool = Spool(tmp_path / "spool")
    for start, batch, batch_end in got:
        spooled = spool.read(start)
        assert spooled is not None and spooled[0].equals(batch) and canonical(spooled[1]) == canonical(batch_end)


def test_commit_acks_only_up_to_its_end_while_the_next_batch_is_prepared(fake: FakeMysql, tmp_path: Path) -> None:
    r = reader(fake, tmp_path / "spool", prefetch=True)
    got, _ = read_until(r, dict(INITIAL_OFFSET), 20)
    first_end = got[0][2]
    session = _session(r.options)
    session.finish_prefetch()
    handed_out = [batch_id for batch_id, _ in session.outstanding]
    r.commit(first_end)
    assert session.instance is not None
    left = session.instance.list_batch_ids()
    assert left and left == [batch_id for batch_id, _ in session.outstanding] and len(left) < len(handed_out)
    assert left == handed_out[len(handed_out) - len(left) :]  # the oldest were acked, the prepared ones are not


def test_after_the_reader_process_dies_a_prepared_batch_is_replayed_exactly(fake: FakeMysql, tmp_path: Path) -> None:
    r = reader(fake, tmp_path / "spool", prefetch=True)
    got, end = read_until(r, dict(INITIAL_OFFSET), 10)
    _session(r.options).finish_prefetch()
    prepared = Spool(tmp_path / "spool").read(end)
    assert prepared is not None, "the batch after the last read was prepared and spooled"
    close_sessions()  # the runner process is gone: no instance, nothing acked after the last commit
    again = reader(fake, tmp_path / "spool", prefetch=True)
    it, again_end = again.read(end)
    batches = list(it)
    assert batches and batches[0].equals(prepared[0]) and canonical(again_end) == canonical(prepared[1])
    rest, _ = read_until(again, again_end, ROWS - len(ids([b for _, b, _ in got])) - len(ids(batches)))
    assert ids([b for _, b, _ in got]) + ids(batches) + ids([b for _, b, _ in rest]) == list(range(ROWS))


def test_prefetch_off_gives_the_same_rows(fake: FakeMysql, tmp_path: Path) -> None:
    with_prefetch, _ = read_until(reader(fake, tmp_path / "a", prefetch=True), dict(INITIAL_OFFSET), ROWS)
    close_sessions()
    without, _ = read_until(reader(fake, tmp_path / "b", prefetch=False), dict(INITIAL_OFFSET), ROWS)
    assert ids([b for _, b, _ in with_prefetch]) == ids([b for _, b, _ in without]) == list(range(ROWS))
    assert not _session(reader(fake, tmp_path / "b", prefetch=False).options).prefetched


def test_a_refused_ack_fails_the_commit_and_loses_nothing(
    fake: FakeMysql, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ack failure surfaces as a SparkSourceError (the query fails); the batch stays spooled and outstanding, and
    the next read -- from the offset Spark's checkpoint holds -- delivers every row after it."""
    r = reader(fake, tmp_path / "spool", prefetch=False)
    got, _ = read_until(r, dict(INITIAL_OFFSET), 10)
    first_start, first_batch, first_end = got[0]
    session = _session(r.options)
    assert session.instance is not None
    owed = list(session.outstanding)

    def refuse(*_args: Any) -> None:
        raise MetaError("the meta store refused the cursor write (injected)")

    monkeypatch.setattr(session.instance.meta, "update_cursor", refuse)
    with pytest.raises(SparkSourceError, match="refused"):
        r.commit(first_end)
    assert session.instance is None  # closed: the next read restarts at the checkpoint's offset
    assert owed and session.outstanding == []
    spooled = Spool(tmp_path / "spool").read(first_start)
    assert spooled is not None and spooled[0].equals(first_batch)  # kept: commit did not discard it
    monkeypatch.undo()
    rest, _ = read_until(r, first_end, ROWS - len(ids([first_batch])))
    assert ids([first_batch]) + ids([b for _, b, _ in rest]) == list(range(ROWS))
