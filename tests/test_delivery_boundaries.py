"""Transaction boundaries through get / ack / restart on the fake binlog (issue 43, items 2, 3, 8 and 10).

* every transaction keeps its TRANSACTIONEND, also when the END is handed off alone (a transaction of exactly
  ``transaction_size - 1`` rows, or a restart after acking ``[BEGIN, INSERT]``);
* an acked TRANSACTIONBEGIN is never handed out again after a restart (a batch never ends right after a BEGIN);
* a caught-up cursor follows a binlog rotate, so a purge of the old files does not stop the destination;
* a store smaller than one transaction receives it in pieces instead of retrying forever.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from canal.config import InstanceConfig, MasterConfig, StoreConfig
from canal.instance import Instance
from canal.protocol import Entry, EntryType, Message
from canal.testing.fake import FakeMysql

_names = itertools.count()


@pytest.fixture
def fake() -> Iterator[FakeMysql]:
    fake = FakeMysql(name=f"bound{next(_names)}", server_id=1)
    fake.execute("CREATE TABLE shop.orders (id INT PRIMARY KEY, note VARCHAR(20))")
    yield fake
    fake.unregister()


def _config(fake: FakeMysql, tmp_path: Path, **kw: Any) -> InstanceConfig:
    kw.setdefault("store", StoreConfig(batch_mode="ITEMSIZE", buffer_size=4096))
    return InstanceConfig(
        destination="bound",
        master=MasterConfig(address=fake.address, journal_name="mysql-bin.000001", position=4),
        meta_mode="file",
        meta_dir=str(tmp_path),
        **kw,
    )


def _transaction(fake: FakeMysql, first: int, rows: int) -> None:
    with fake.transaction() as tx:
        for i in range(first, first + rows):
            tx.insert("shop.orders", {"id": i, "note": "x"})


def _kinds(entries: list[Entry]) -> str:
    """B(egin), E(nd), R(ow) per entry; the CREATE TABLE the fixture logged first is left out."""
    names = {EntryType.TRANSACTIONBEGIN: "B", EntryType.TRANSACTIONEND: "E", EntryType.ROWDATA: "R"}
    return "".join(names[e.entry_type] for e in entries if not _is_ddl(e))


def _is_ddl(entry: Entry) -> bool:
    return entry.row_change is not None and entry.row_change.is_ddl


def _take(inst: Instance, count: int, batch: int, *, ack: bool = True) -> list[Message]:
    """Messages until ``count`` entries arrived (get with ack, or without)."""
    got: list[Message] = []
    deadline = time.monotonic() + 20
    while len(_kinds(_entries(got))) < count:
        assert time.monotonic() < deadline, f"only {len(_kinds(_entries(got)))} of {count} entries in 20 s"
        msg = inst.get(batch, timeout=0.05) if ack else inst.get_without_ack(batch, timeout=0.05)
        if msg.id != -1:
            got.append(msg)
    return got


def _entries(messages: list[Message]) -> list[Entry]:
    return [e for m in messages for e in m.entries]


def test_a_transaction_one_row_short_of_transaction_size_keeps_its_end(fake: FakeMysql, tmp_path: Path) -> None:
    _transaction(fake, 0, 1023)  # BEGIN + 1023 rows = the default transaction_size: the END is handed off alone
    _transaction(fake, 5000, 2)
    with Instance(_config(fake, tmp_path)) as inst:
        got = _entries(_take(inst, 1025 + 4, 500))
    assert _kinds(got) == "B" + "R" * 1023 + "E" + "BRRE"


@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5, 7])
def test_every_transaction_keeps_its_end_with_a_small_transaction_size(
    fake: FakeMysql, tmp_path: Path, rows: int
) -> None:
    for t in range(8):
        _transaction(fake, 100 * t, rows)
    with Instance(_config(fake, tmp_path, transaction_size=3)) as inst:
        got = _entries(_take(inst, 8 * (rows + 2), 5))
    assert _kinds(got) == ("B" + "R" * rows + "E") * 8


def test_the_end_comes_after_a_restart_that_acked_begin_and_the_row(fake: FakeMysql, tmp_path: Path) -> None:
    _transaction(fake, 0, 1)
    _transaction(fake, 10, 1)
    cfg = _config(fake, tmp_path)
    with Instance(cfg) as inst:
        assert _is_ddl(inst.get(1, timeout=5.0).entries[0])  # the fixture's CREATE TABLE
        first = inst.get(2, timeout=5.0)
        assert _kinds(list(first.entries)) == "BR"
    with Instance(cfg) as inst:
        rest = _entries(_take(inst, 4, 100))
    assert _kinds(rest) == "EBRE"


@pytest.mark.parametrize("batch", [1, 4])
def test_an_acked_begin_is_not_handed_out_again_after_a_restart(fake: FakeMysql, tmp_path: Path, batch: int) -> None:
    for t in range(3):
        _transaction(fake, 10 * t, 1)
    cfg = _config(fake, tmp_path)
    with Instance(cfg) as inst:
        acked = _entries(_take(inst, 4, batch))  # BEGIN, INSERT, END, BEGIN (maybe more: the cut decides)
    with Instance(cfg) as inst:
        rest = _entries(_take(inst, 9 - len(acked), 100))
    assert _kinds(acked + rest) == "BRE" * 3
    assert [e.header.log_offset for e in acked + rest] == sorted(e.header.log_offset for e in acked + rest)


def test_a_batch_never_ends_with_a_begin_that_has_entries_after_it(fake: FakeMysql, tmp_path: Path) -> None:
    for t in range(6):
        _transaction(fake, 10 * t, 2)
    with Instance(_config(fake, tmp_path)) as inst:
        got = _take(inst, 24, 4)
    assert all(m.entries[-1].entry_type is not EntryType.TRANSACTIONBEGIN for m in got)
    assert _kinds(_entries(got)) == "BRRE" * 6


@pytest.mark.parametrize("mode", ["ITEMSIZE", "MEMSIZE"])
def test_a_store_smaller_than_a_transaction_gets_it_in_pieces(fake: FakeMysql, tmp_path: Path, mode: str) -> None:
    _transaction(fake, 0, 40)
    _transaction(fake, 100, 3)
    cfg = _config(fake, tmp_path, store=StoreConfig(batch_mode=mode, buffer_size=16))
    with Instance(cfg) as inst:
        got = _entries(_take(inst, 42 + 5, 8))
        assert inst.metrics().running
        assert inst.metrics().reconnects == 0
    assert _kinds(got) == "B" + "R" * 40 + "E" + "BRRRE"


def test_a_caught_up_cursor_follows_a_rotate_and_survives_a_purge(fake: FakeMysql, tmp_path: Path) -> None:
    _transaction(fake, 0, 2)
    cfg = _config(fake, tmp_path)
    with Instance(cfg) as inst:
        assert _kinds(_entries(_take(inst, 4, 100))) == "BRRE"
        new_file = fake.rotate()
        fake.purge_to(new_file)
        deadline = time.monotonic() + 20
        while True:  # the parser reads the rotate; an empty get then moves the caught-up cursor
            assert inst.get(100, timeout=0.05).id == -1
            cursor = inst.get_cursor()
            assert cursor is not None
            if cursor.position.journal_name == new_file:
                break
            assert time.monotonic() < deadline, f"the cursor stayed at {cursor}"
        assert cursor.rows_done == 0 and not cursor.position.included
    _transaction(fake, 10, 1)
    with Instance(cfg) as inst:  # a restart dumps from the new file: nothing purged is asked for
        after = _entries(_take(inst, 3, 100))
        assert inst.metrics().running
    assert _kinds(after) == "BRE"
    assert {e.header.log_file for e in after} == {new_file}


def test_a_restart_right_after_the_rotate_resumes_from_the_new_file(fake: FakeMysql, tmp_path: Path) -> None:
    """stop() moves a caught-up cursor too: a restart needs no get in between."""
    _transaction(fake, 0, 1)
    cfg = _config(fake, tmp_path)
    with Instance(cfg) as inst:
        assert _kinds(_entries(_take(inst, 3, 100))) == "BRE"
        new_file = fake.rotate()
        deadline = time.monotonic() + 20
        while inst.parser.position is None or inst.parser.position.position.journal_name != new_file:
            assert time.monotonic() < deadline, "the parser never read the rotate"
            time.sleep(0.01)
    fake.purge_to(new_file)
    with Instance(cfg) as inst:
        cursor = inst.get_cursor()
        assert cursor is not None and cursor.position.journal_name == new_file
        _transaction(fake, 10, 1)
        assert _kinds(_entries(_take(inst, 3, 100))) == "BRE"


def test_a_rotate_while_a_batch_is_outstanding_does_not_move_the_cursor(fake: FakeMysql, tmp_path: Path) -> None:
    _transaction(fake, 0, 1)
    cfg = _config(fake, tmp_path)
    with Instance(cfg) as inst:
        msg = _take(inst, 3, 100, ack=False)[0]
        before = inst.get_cursor()
        new_file = fake.rotate()
        deadline = time.monotonic() + 20
        while inst.parser.position is None or inst.parser.position.position.journal_name != new_file:
            assert time.monotonic() < deadline, "the parser never read the rotate"
            time.sleep(0.01)
        assert inst.get(100, timeout=0.05).id == -1
        assert inst.get_cursor() == before  # the batch is not acked: the cursor cannot pass it
        inst.rollback(msg.id)
        again = _take(inst, 3, 100)
        assert _kinds(_entries(again)) == "BRE"
        assert inst.get(100, timeout=0.05).id == -1
        cursor = inst.get_cursor()
        assert cursor is not None and cursor.position.journal_name == new_file
