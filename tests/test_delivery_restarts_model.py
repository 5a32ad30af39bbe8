"""Consumers restarted at random batch boundaries, with random acks and rollbacks, against an uninterrupted run
(hypothesis, on the fake binlog).

A random workload (transactions of random sizes, binlog rotations between them) is consumed twice: once without
interruption (get and ack), once by a consumer that draws its steps -- ``get_without_ack`` of a random size, ack of
the oldest batch, rollback of every batch or of one and those after it, a restart of the instance (the unacked
batches are lost and delivered again), and a purge of the binlog files before the cursor's. Random
``transaction_size`` and store sizes (smaller than a transaction too) cut the hand-offs differently each time.

What must hold: every batch handed out continues the stream exactly where the acked and outstanding batches end
(BEGIN and END entries included); the acked batches put together equal the uninterrupted run; and both runs end with
the same cursor (which follows a rotation at the end). ``PYCANAL_FUZZ_EXAMPLES`` sets the number of workloads
(default 20; a longer run sets it higher).
"""

from __future__ import annotations

import contextlib
import itertools
import tempfile
import time
from collections.abc import Iterator

import attrs
from hypothesis import given
from hypothesis import strategies as st
from random_schema_workload import FUZZ_EXAMPLES, fuzz_settings

from canal.config import InstanceConfig, MasterConfig, StoreConfig
from canal.instance import Instance
from canal.position import EntryPosition, LogPosition
from canal.protocol import Entry, Message
from canal.testing.fake import FakeMysql

_names = itertools.count()

Key = tuple[str, str, int]  # entry type, binlog file, offset


def _key(entry: Entry) -> Key:
    return entry.entry_type.name, entry.header.log_file, entry.header.log_offset


@attrs.frozen
class Workload:
    rows: tuple[int, ...]  # rows per transaction
    rotate_after: tuple[bool, ...]  # a FLUSH BINARY LOGS after each transaction
    transaction_size: int
    buffer_size: int

    def play(self, fake: FakeMysql) -> None:
        serial = itertools.count()
        for rows, rotate in zip(self.rows, self.rotate_after, strict=True):
            with fake.transaction() as tx:
                for _ in range(rows):
                    tx.insert("shop.orders", {"id": next(serial), "note": "x"})
            if rotate:
                fake.rotate()


@st.composite
def _workloads(draw: st.DrawFn) -> Workload:
    rows = tuple(draw(st.lists(st.integers(1, 9), min_size=1, max_size=7)))
    rotate_after = tuple(draw(st.lists(st.booleans(), min_size=len(rows), max_size=len(rows))))
    return Workload(
        rows=rows,
        rotate_after=rotate_after,
        transaction_size=draw(st.sampled_from([1, 2, 3, 5, 1024])),
        buffer_size=draw(st.sampled_from([4, 8, 4096])),
    )


_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("get"), st.integers(1, 6)),
        st.tuples(st.just("ack"), st.just(0)),
        st.tuples(st.just("rollback"), st.integers(-1, 3)),  # -1: every batch; k: the k-th outstanding and after
        st.tuples(st.just("restart"), st.just(0)),
        st.tuples(st.just("purge"), st.just(0)),
    ),
    max_size=30,
)


@attrs.define
class Consumer:
    """One consumer's view: what it acked and what is outstanding, checked against the uninterrupted run."""

    fake: FakeMysql
    config: InstanceConfig
    reference: list[Key]
    instance: Instance
    acked: list[Key] = attrs.field(factory=list)
    outstanding: list[Message] = attrs.field(factory=list)

    @property
    def handed(self) -> int:
        return len(self.acked) + sum(len(m.entries) for m in self.outstanding)

    def get(self, size: int) -> None:
        if self.handed >= len(self.reference):
            return
        msg = self.instance.get_without_ack(size, timeout=0.02)
        if msg.id == -1:
            return
        keys = [_key(e) for e in msg.entries]
        start = self.handed
        assert keys == self.reference[start : start + len(keys)], f"batch {msg.id} does not continue the stream"
        self.outstanding.append(msg)

    def ack(self) -> None:
        if self.outstanding:
            msg = self.outstanding.pop(0)
            self.instance.ack(msg.id)
            self.acked.extend(_key(e) for e in msg.entries)

    def rollback(self, which: int) -> None:
        if not self.outstanding:
            return
        if which < 0:
            self.instance.rollback()
            self.outstanding.clear()
            return
        index = min(which, len(self.outstanding) - 1)
        self.instance.rollback(self.outstanding[index].id)
        del self.outstanding[index:]

    def restart(self) -> None:
        self.instance.stop()
        self.outstanding.clear()  # never acked: delivered again from the cursor
        self.instance = Instance(self.config)
        self.instance.start()

    def purge(self) -> None:
        """PURGE BINARY LOGS TO the cursor's file: what a server's expiry does to files nobody needs."""
        if self.outstanding:
            return
        cursor = self.instance.get_cursor()
        if cursor is not None and cursor.position.journal_name:
            self.fake.purge_to(cursor.position.journal_name)

    def drain(self) -> None:
        deadline = time.monotonic() + 30
        while self.outstanding:
            self.ack()
        while self.handed < len(self.reference):
            assert time.monotonic() < deadline, f"only {self.handed} of {len(self.reference)} entries in 30 s"
            self.get(1000)
            self.ack()


def _final_cursor(fake: FakeMysql, workload: Workload, reference_last: EntryPosition) -> tuple[str, int, bool]:
    """Where a caught-up cursor ends: after the last END, or at the start of the file a final rotation began."""
    if workload.rotate_after[-1]:
        return fake.current_file, 4, False
    return reference_last.journal_name or "", reference_last.position or 0, True


def _wait_for_cursor(instance: Instance, want: tuple[str, int, bool]) -> LogPosition:
    """Empty gets until the cursor is ``want`` (a caught-up cursor follows the stream's rest after the last entry)."""
    deadline = time.monotonic() + 20
    while True:
        assert instance.get(100, timeout=0.02).id == -1
        cursor = instance.get_cursor()
        assert cursor is not None
        p = cursor.position
        if (p.journal_name, p.position, p.included) == want and cursor.rows_done == 0:
            return cursor
        assert time.monotonic() < deadline, f"the cursor stayed at {cursor}, not {want}"


@contextlib.contextmanager
def _fake(workload: Workload) -> Iterator[FakeMysql]:
    fake = FakeMysql(name=f"restarts{next(_names)}", server_id=1)
    try:
        fake.execute("CREATE TABLE shop.orders (id INT PRIMARY KEY, note VARCHAR(20))")
        workload.play(fake)
        yield fake
    finally:
        fake.unregister()


def _config(fake: FakeMysql, workload: Workload, meta_dir: str) -> InstanceConfig:
    return InstanceConfig(
        destination="restarts",
        master=MasterConfig(address=fake.address, journal_name="mysql-bin.000001", position=4),
        meta_mode="file",
        meta_dir=meta_dir,
        transaction_size=workload.transaction_size,
        store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=workload.buffer_size),
    )


def _uninterrupted(workload: Workload) -> tuple[list[Key], EntryPosition, LogPosition]:
    with _fake(workload) as fake, tempfile.TemporaryDirectory() as meta_dir:
        entries: list[Entry] = []
        expected = 1 + sum(rows + 2 for rows in workload.rows)  # the CREATE TABLE, then BEGIN, rows, END each
        with Instance(_config(fake, workload, meta_dir)) as inst:
            deadline = time.monotonic() + 30
            while len(entries) < expected:
                assert time.monotonic() < deadline, f"only {len(entries)} of {expected} entries in 30 s"
                entries.extend(inst.get(1000, timeout=0.02).entries)
            last = entries[-1].position
            cursor = _wait_for_cursor(inst, _final_cursor(fake, workload, last))
        return [_key(e) for e in entries], last, cursor


@fuzz_settings(FUZZ_EXAMPLES)
@given(_workloads(), _STEPS)
def test_restarts_acks_and_rollbacks_deliver_what_an_uninterrupted_run_does(
    workload: Workload, steps: list[tuple[str, int]]
) -> None:
    reference, last, reference_cursor = _uninterrupted(workload)
    assert len(reference) == 1 + sum(rows + 2 for rows in workload.rows)
    with _fake(workload) as fake, tempfile.TemporaryDirectory() as meta_dir:
        config = _config(fake, workload, meta_dir)
        consumer = Consumer(fake, config, reference, Instance(config))
        consumer.instance.start()
        try:
            for step, arg in steps:
                if step == "get":
                    consumer.get(arg)
                elif step == "ack":
                    consumer.ack()
                elif step == "rollback":
                    consumer.rollback(arg)
                elif step == "restart":
                    consumer.restart()
                else:
                    consumer.purge()
                assert consumer.instance.metrics().running, consumer.instance.metrics().last_error
            consumer.drain()
            assert consumer.acked == reference
            cursor = _wait_for_cursor(consumer.instance, _final_cursor(fake, workload, last))
            assert (cursor.position.journal_name, cursor.position.position, cursor.position.included) == (
                reference_cursor.position.journal_name,
                reference_cursor.position.position,
                reference_cursor.position.included,
            )
        finally:
            consumer.instance.stop()
