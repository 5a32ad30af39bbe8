"""Where the canal source cuts micro-batches, against a model: random transaction shapes, caps, get sizes and store
modes, read the way Spark's runner reads (``read(start)`` from the last end, a replay of a spooled start).

Properties: every row comes once, in binlog order; no micro-batch holds more row events than ``max.entries``, nor more
rows than ``maxRowsPerTrigger`` unless it is one row event (caps keep whole events, at least one); consecutive
micro-batches meet (each starts where the one before ended); and a spooled micro-batch read again by a new reader
process (after its session is gone) is the same batch with the same end.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

pytest.importorskip("pyarrow")

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from canal.spark.changes import INITIAL_OFFSET, Offset, canonical
from canal.spark.source import CanalStreamReader, close_sessions
from canal.testing.fake import FakeMysql

_SERVERS = itertools.count()


def _read(r: CanalStreamReader, start: Offset) -> tuple[Any, Offset]:
    import pyarrow as pa

    it, end = r.read(start)
    batches = list(it)
    return (pa.concat_batches(batches) if batches else None), end


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    shape=st.lists(st.integers(1, 12), min_size=1, max_size=20),
    max_entries=st.integers(1, 12),
    max_rows=st.none() | st.integers(1, 30),
    batch_size=st.integers(1, 8),
    mode=st.sampled_from(["MEMSIZE", "ITEMSIZE"]),
    prefetch=st.booleans(),
)
def test_micro_batches_keep_the_caps_and_the_stream(
    tmp_path_factory: pytest.TempPathFactory,
    shape: list[int],
    max_entries: int,
    max_rows: int | None,
    batch_size: int,
    mode: str,
    prefetch: bool,
) -> None:
    spool = tmp_path_factory.mktemp("spool")
    with FakeMysql(name=f"cuts-{next(_SERVERS)}") as fake:
        fake.execute("CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(40))")
        total = 0
        for rows in shape:  # one transaction, one row event of `rows` rows
            fake.insert_many("shop.t", [{"id": total + i, "v": f"value {total + i}"} for i in range(rows)])
            total += rows
        options = {
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
            **({} if max_rows is None else {"maxRowsPerTrigger": str(max_rows)}),
        }
        try:
            r = CanalStreamReader(options)
            start: Offset = dict(INITIAL_OFFSET)
            got: list[tuple[Offset, Any, Offset]] = []
            seen: list[int] = []
            for _ in range(500):  # each read moves on by at least one entry (four a transaction at most)
                if len(seen) == total:
                    break
                batch, end = _read(r, start)
                if canonical(end) != canonical(start):  # a micro-batch (rows or only transaction boundaries)
                    got.append((start, batch, end))
                if batch is not None:
                    changes = [row for row in batch.to_pylist() if not row["is_ddl"]]
                    seen += [int(json.loads(row["after"])["id"]) for row in changes]
                    events = {(row["log_file"], row["log_offset"]) for row in changes}
                    assert len(events) <= max_entries
                    if max_rows is not None:
                        assert batch.num_rows <= max_rows or len(events) <= 1
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
        finally:
            close_sessions()
