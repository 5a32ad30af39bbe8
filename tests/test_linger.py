"""A get with a linger, run_batches and a read of the canal source that found nothing there (which linger by
default) hand on a batch once the stream is quiet rather than waiting ``timeout`` for a full one; a bad linger is a
typed error that hands out nothing."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyarrow")

from test_store import wait_until

from canal.errors import ServerError
from canal.instance import Instance
from canal.spark import run_batches
from canal.spark.batches import LINGER_S

LONG_TIMEOUT = 60.0  # what a batch far from full would wait without the linger


ROWS = 6  # the CREATE TABLE and the five inserts


def test_a_quiet_stream_is_handed_on_after_the_linger_not_the_timeout(shop_instance: Instance) -> None:
    got: list[Any] = []
    began = time.monotonic()
    # 16 MB batches: five rows never fill one; the stream then has nothing more to add
    stats = run_batches(
        shop_instance,
        None,
        lambda rows, batch_id: got.append(rows),
        timeout=LONG_TIMEOUT,
        until=lambda s: s.rows >= ROWS,
    )
    assert time.monotonic() - began < LONG_TIMEOUT / 2
    assert stats.rows == ROWS and sum(rows.num_rows for rows in got) == ROWS
    assert shop_instance.list_batch_ids() == []  # acked


def test_an_instance_get_with_a_linger_returns_once_the_stream_is_quiet(shop_instance: Instance) -> None:
    began = time.monotonic()
    msg = shop_instance.get(1 << 20, LONG_TIMEOUT, linger=0.05)  # 1 GB: never full
    assert time.monotonic() - began < LONG_TIMEOUT / 2
    assert msg.entries and shop_instance.list_batch_ids() == []  # handed out and acked
    with shop_instance.batch(1 << 20, 0.05, linger=0.01) as rest:  # nothing more: the timeout, not the linger, ends it
        assert not rest.entries


def test_without_a_linger_a_batch_waits_for_the_timeout(shop_instance: Instance) -> None:
    got: list[Any] = []
    began = time.monotonic()
    stats = run_batches(
        shop_instance, None, lambda rows, batch_id: got.append(rows), timeout=0.5, linger=None, max_batches=1
    )
    assert time.monotonic() - began >= 0.5  # canal's rule: a batch that is not full waits the whole timeout
    assert stats.rows == ROWS and LINGER_S < 0.5


@pytest.mark.parametrize("linger", [-1.0, float("nan"), True, "0.1"])
def test_a_bad_linger_is_a_server_error_and_hands_out_nothing(shop_instance: Instance, linger: Any) -> None:
    with pytest.raises(ServerError, match="linger"):
        run_batches(shop_instance, None, lambda rows, batch_id: None, linger=linger, max_batches=1)
    with pytest.raises(ServerError, match="linger"):
        shop_instance.get_without_ack(10, 0.1, linger=linger)
    # nothing acked, nothing outstanding
    assert shop_instance.get_cursor() is None and shop_instance.list_batch_ids() == []
    assert shop_instance.store.stats().get_sequence == -1  # nothing taken from the store
    stats = run_batches(shop_instance, None, lambda rows, batch_id: None, until=lambda s: s.rows >= ROWS)
    assert stats.rows == ROWS


def test_a_source_read_that_found_nothing_hands_on_a_quiet_stream_before_read_timeout(tmp_path: Path) -> None:
    """A read of the canal source that finds nothing there waits up to read.timeout for a full batch; once a change
    came and the stream is quiet -- a parser caught up with its server --, it hands it on after the linger."""
    import pyarrow as pa

    from canal.spark.offsets import INITIAL_OFFSET, canonical
    from canal.spark.sessions import session_of
    from canal.spark.source import CanalStreamReader, close_sessions
    from canal.testing.fake import FakeMysql

    with FakeMysql(name="linger-source") as fake:
        fake.execute("CREATE TABLE shop.t (id INT PRIMARY KEY, v VARCHAR(40))")
        options = {
            "destination": "linger",
            "master.address": fake.address,
            "master.journal.name": "mysql-bin.000001",
            "master.position": "4",
            "spool.dir": str(tmp_path / "spool"),
            "read.timeout": str(LONG_TIMEOUT),
            "prefetch": "false",
        }
        reader = CanalStreamReader(options)
        try:
            it, start = reader.read(dict(INITIAL_OFFSET))  # the CREATE TABLE: then the stream is caught up
            assert [r["is_ddl"] for r in pa.Table.from_batches(list(it)).to_pylist()] == [True]
            store = session_of(options).instance.store

            def insert_once_the_read_waits() -> None:
                wait_until(lambda: store.waiting_consumers == 1, "the read waits in the store")
                fake.insert_many("shop.t", [{"id": 1, "v": "one"}])

            insert = threading.Thread(target=insert_once_the_read_waits)
            began = time.monotonic()
            insert.start()
            it, end = reader.read(start)
            batches = list(it)
            waited = time.monotonic() - began
            insert.join()
        finally:
            close_sessions()
    assert waited < LONG_TIMEOUT / 2
    rows = pa.Table.from_batches(batches).to_pylist()
    assert [json.loads(r["after"])["id"] for r in rows] == ["1"]
    assert canonical(end) != canonical(start)
