"""run_batches' journal: a file it cannot read is a typed error before anything is consumed, never ignored; and the
batch in flight before a crash, replayed cut inside a message the instance hands out again, leaves nothing
outstanding and comes to fn once (on the fake binlog)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyarrow")

from canal.config import InstanceConfig, MasterConfig, StoreConfig
from canal.instance import Instance
from canal.spark import JournalError, run_batches
from canal.testing import FakeMysql


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        "not json",
        "[]",
        '{"pending": "7"}',
        '{"pending": true}',
        '{"other": 1}',
        '{"pending": 1, "done": 2}',
        '{"done": 1, "through": "9"}',
        '{"pending": 1, "end": 9, "through": true}',
        '{"through": 9}',
    ],
)
def test_a_corrupt_journal_fails_before_anything_is_consumed(
    shop_instance: Instance, tmp_path: Path, text: str
) -> None:
    journal = tmp_path / "journal.json"
    journal.write_text(text)
    with pytest.raises(JournalError, match="journal"):
        run_batches(shop_instance, None, lambda df, batch_id: None, journal=journal, max_batches=1)
    # nothing acked, nothing outstanding
    assert shop_instance.get_cursor() is None and shop_instance.list_batch_ids() == []
    assert shop_instance.store.stats().get_sequence == -1  # nothing taken from the store
    assert journal.read_text() == text  # the evidence is left for the user


def test_an_unreadable_journal_is_a_journal_error(shop_instance: Instance, tmp_path: Path) -> None:
    journal = tmp_path / "journal.json"
    journal.mkdir()  # a directory where the file should be: reading it fails
    with pytest.raises(JournalError, match="cannot read"):
        run_batches(shop_instance, None, lambda df, batch_id: None, journal=journal, max_batches=1)
    assert shop_instance.get_cursor() is None


class Crash(Exception):
    pass


ROWS = 12  # one-row transactions after a CREATE TABLE: 1 + 3 * 12 entries (BEGIN, the row, END)


@pytest.mark.parametrize("restart", [False, True], ids=["same-instance", "restarted"])
def test_a_replay_cut_inside_a_message_leaves_the_rest_to_the_next_run_once(
    fake_mysql: FakeMysql, tmp_path: Path, restart: bool
) -> None:
    """A crash in fn, then a run whose first message reaches past the batch in flight: the replay is cut inside that
    message, and the run stops right after it (``max_batches=1``; ``until`` does the same). The rest of the message
    goes back to the instance, and the next run -- on the same instance, or after a restart -- hands on the rest,
    without the replayed batch's rows again (the journal says how far fn got). Before, the rest stayed with the
    stopped run, its message outstanding: the next run on the instance never got those rows (the store hands out
    what follows an outstanding message), and after a restart the replayed rows came to fn a second time."""
    fake_mysql.execute("CREATE TABLE shop.t (id INT PRIMARY KEY)")
    for i in range(ROWS):
        fake_mysql.insert("shop.t", {"id": i})
    config = InstanceConfig(
        destination="cut",
        master=MasterConfig(address=fake_mysql.address, journal_name="mysql-bin.000001", position=4),
        store=StoreConfig(batch_mode="ITEMSIZE"),
        meta_mode="file",
        meta_dir=str(tmp_path / "meta"),
        flush_period_s=0,
    )
    journal = tmp_path / "journal.json"
    calls: list[tuple[int, list[int]]] = []

    def fn(rows: Any, batch_id: int) -> None:
        ids = [int(json.loads(after)["id"]) for after in rows.column("after").to_pylist() if after is not None]
        calls.append((batch_id, ids))
        if len(calls) == 2:
            raise Crash

    with Instance(config) as inst, pytest.raises(Crash):  # batches of 4 entries: full ones, in binlog order
        run_batches(inst, None, fn, batch_size=4, timeout=10, linger=None, journal=journal)
    crashed = calls[-1]
    assert json.loads(journal.read_text())["pending"] == crashed[0]
    with Instance(config) as inst:
        # redelivered from the acked cursor (after the first batch) in one message that holds all the rest
        run_batches(inst, None, fn, batch_size=3 * ROWS - 3, timeout=10, linger=None, journal=journal, max_batches=1)
        assert calls[-1] == crashed  # the batch in flight, the same rows under the same id
        assert inst.list_batch_ids() == []  # the rest of the message went back to the instance
        record = json.loads(journal.read_text())
        assert {k: record[k] for k in ("done", "through", "server")} == {
            "done": crashed[0],
            "through": crashed[0],
            "server": 1,
        }
        assert set(record) - {"done", "through", "server"} <= {"from", "to", "next", "reach"}  # the binlog range
        if not restart:
            run_batches(inst, None, fn, batch_size=100, timeout=0.2, journal=journal, idle_stop_s=0.5)
    if restart:
        with Instance(config) as inst:
            run_batches(inst, None, fn, batch_size=100, timeout=0.2, journal=journal, idle_stop_s=0.5)
    handed = [i for _batch, ids in calls[:1] + calls[2:] for i in ids]
    assert handed == list(range(ROWS))  # every row once, in order
    ids = [batch for batch, _ids in calls[2:]]
    assert ids == sorted(set(ids)) and ids[0] == crashed[0]
