"""Random schedules of destinations that share a reader, each beside a twin that reads alone, on the fake binlog or a
real MariaDB (:class:`Binlog`): every destination's acked entries must equal its twin's.

A schedule (:func:`make_schedule`, from a seed) mixes, for three destinations of random filters:

* starts from a file position, a GTID set (in GTID mode) and a time -- at a point behind the reader, where it rests,
  or ahead of it (the newest point while a destination that takes nothing holds the reader back);
* writes: transactions over random tables, long ones (more events than a queue holds: the reader waits for room, and
  destinations start and join meanwhile), DDL and rotations; points to start from are marked between them;
* consumers that take some batches, or nothing for a while (their queues fill: the reader waits, and they leave
  and rejoin);
* restarts with a batch taken and not acked (once both twins caught up and acked, so that both restart from one
  cursor), and purges of the files no destination (nor any later start) needs.

The twin is the same destination with ``share_reader=False``, started, consumed and restarted in the same steps, so
anything that depends on when a destination starts (its schema history's bootstrap, a purge) is the same for both.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any, Protocol

import attrs
from shared_entries import canonical, done, is_end, upto_end

from canal.client import ClientIdentity
from canal.config import DetectingConfig, InstanceConfig, MasterConfig, RetryConfig, StoreConfig
from canal.protocol import EMPTY_MESSAGE_ID
from canal.server import EmbeddedServer

TABLES = ("a.t", "a.u", "b.t", "c.t")
FILTERS = (r"a\..*", r"a\.t", r"b\..*", r"a\.u,c\.t", r".*\..*", r"c\..*", r"A\.T,C\.t")
SLOTS = 3
KINDS = ("file", "gtid", "time")


@attrs.frozen
class Mark:
    """A point of the binlog to start from: its file position, the GTID set executed before it, and a time after
    every event before it."""

    journal: str
    position: int
    gtid: str
    time_ms: int


class Binlog(Protocol):
    """What a schedule does to the binlog: the fake's or a MariaDB's. Tables are named as in :data:`TABLES` and
    ``m.marks``; a binlog maps them to its own."""

    def transaction(self, tables: list[str], first_key: int) -> int:
        """One transaction inserting a row into each table (updating some); the next free key."""
        ...

    def ddl(self, table: str, n: int) -> None: ...

    def rotate(self) -> None: ...

    def purge_to(self, journal: str) -> None:
        """Drop the files before ``journal`` (nothing when it is the oldest, or gone)."""
        ...

    def mark(self) -> Mark:
        """The point the binlog rests at now; what is written after it is at or after its time."""
        ...

    def end_position(self) -> tuple[int, int]:
        """Where the binlog ends now: its last file's number and size."""
        ...

    def end(self, key: int) -> None:
        """The end marker: a row of ``m.marks``."""
        ...

    def master(self, mark: Mark, kind: str) -> MasterConfig: ...

    def filter(self, regex: str) -> str:
        """A filter of :data:`FILTERS` (and the marks' table) in the binlog's names."""
        ...


@attrs.frozen
class Slot:
    regex: str
    kind: str  # file, gtid or time


def make_schedule(rng: random.Random) -> tuple[list[Slot], list[tuple[Any, ...]]]:
    """Three destinations and the steps: ``("write", ops)`` marks a point after its ops; ``("start", i, mark)``,
    ``("consume", i, batches)``, ``("restart", i)``, ``("purge",)``."""
    slots = [Slot(rng.choice(FILTERS), rng.choice(KINDS)) for _ in range(SLOTS)]
    if all(slot.kind != "gtid" for slot in slots):
        slots[rng.randrange(SLOTS)] = attrs.evolve(slots[0], kind="gtid")  # a reader from a GTID set, most often
    steps: list[tuple[Any, ...]] = [("write", [("txn", [rng.choice(TABLES)])])]
    marks = 1
    started: set[int] = set()
    for _ in range(rng.randint(6, 14)):
        roll = rng.random()
        idle = [i for i in range(SLOTS) if i not in started]
        if roll < 0.35:
            ops: list[tuple[Any, ...]] = []
            for _ in range(rng.randint(1, 3)):
                op = rng.random()
                if op < 0.55:
                    ops.append(("txn", rng.sample(TABLES, rng.randint(1, 3))))
                elif op < 0.7:
                    ops.append(("big", rng.choice(TABLES)))
                elif op < 0.85:
                    ops.append(("ddl", rng.choice(TABLES)))
                else:
                    ops.append(("rotate",))
            if rng.random() < 0.25:
                ops.append(("rotate",))  # a point after a new file's header events: a GTID dump skips what follows
            steps.append(("write", ops))
            marks += 1
        elif roll < 0.55 and idle:
            # behind (an older point), at or ahead (the newest: ahead when the reader is held back)
            steps.append(("start", rng.choice(idle), rng.choice([marks - 1, rng.randrange(marks)])))
            started.add(steps[-1][1])
        elif roll < 0.8 and started:
            steps.append(("consume", rng.choice(sorted(started)), rng.randint(1, 6)))
        elif roll < 0.9:
            restartable = sorted(started)
            if restartable:
                steps.append(("restart", rng.choice(restartable)))
        else:
            steps.append(("purge",))
    for i in range(SLOTS):
        if i not in started:
            steps.append(("start", i, marks - 1))
    return slots, steps


class Run:
    """One schedule against ``binlog`` in ``server``: destination ``d{i}`` shares, ``d{i}_alone`` is its twin."""

    def __init__(self, binlog: Binlog, server: EmbeddedServer, meta: Path, slots: list[Slot]) -> None:
        self.binlog = binlog
        self.server = server
        self.meta = meta
        self.slots = slots
        self.marks: list[Mark] = []
        self.keys = 1
        self.got: dict[str, list[tuple[Any, ...]]] = {}
        self.start_of: dict[str, tuple[str, int]] = {}  # the kind and mark each destination started from
        self.ddl = 0

    def names(self, i: int) -> tuple[str, str]:
        return f"d{i}", f"d{i}_alone"

    def config(self, name: str, slot: Slot, mark: Mark, *, share: bool) -> InstanceConfig:
        return InstanceConfig(
            destination=name,
            master=self.binlog.master(mark, slot.kind),
            filter_regex=self.binlog.filter(slot.regex),
            share_reader=share,
            gtid_mode=slot.kind == "gtid",
            meta_mode="file",
            meta_dir=str(self.meta),
            flush_period_s=0,
            transaction_size=3,
            store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=64),
            detecting=DetectingConfig(interval_s=0.2),
            retry=RetryConfig(initial_backoff_s=0.01, max_backoff_s=0.1, heartbeat_period_s=0.2, read_timeout_s=10),
        )

    def step(self, step: tuple[Any, ...], future: list[tuple[Any, ...]]) -> None:
        kind = step[0]
        if kind == "write":
            for op in step[1]:
                if op[0] == "txn":
                    self.keys = self.binlog.transaction(op[1], self.keys)
                elif op[0] == "big":
                    self.keys = self.binlog.transaction([op[1]] * 40, self.keys)
                elif op[0] == "ddl":
                    self.ddl += 1
                    self.binlog.ddl(op[1], self.ddl)
                else:
                    self.binlog.rotate()
            self.marks.append(self.binlog.mark())
        elif kind == "start":
            _, i, index = step
            mark = self.marks[index]
            for name, share in zip(self.names(i), (True, False), strict=True):
                self.got[name] = []
                self.start_of[name] = (self.slots[i].kind, index)
                self.server.start_destination(self.config(name, self.slots[i], mark, share=share))
            self.started(i)
        elif kind == "consume":
            for name in self.names(step[1]):
                for _ in range(step[2]):
                    self.take(name)
        elif kind == "restart":
            # both caught up and acked (a restart then resumes both from one cursor), a transaction of every table
            # taken and not acked: it comes again after the restart
            names = self.names(step[1])
            for name in names:
                self.catch_up(name)
            self.keys = self.binlog.transaction(list(TABLES), self.keys)
            for name in names:
                client = ClientIdentity(name, 1001)
                deadline = time.monotonic() + 10
                while self.server.get_without_ack(client, 5, 0.05).id == EMPTY_MESSAGE_ID:
                    assert time.monotonic() < deadline, f"{name} got nothing to leave outstanding"
                self.server.stop_destination(name)
                self.server.start_destination(name)
            self.started(step[1])
        else:
            self.purge(future)

    def started(self, i: int) -> None:
        """Wait until both twins found where they start and began to read there: what that depends on (a start
        by time or GTID set, the schema history's bootstrap) is then the same binlog for both."""
        deadline = time.monotonic() + 20
        while not all(self.server.instance(name).parser.read_position is not None for name in self.names(i)):
            assert time.monotonic() < deadline, f"d{i} did not start"
            time.sleep(0.002)

    def catch_up(self, name: str) -> None:
        """Take and ack ``name``'s entries until it has read the whole binlog and handed everything off."""
        end = self.binlog.end_position()
        parser = self.server.instance(name).parser
        deadline = time.monotonic() + 20
        while True:
            assert time.monotonic() < deadline, f"{name} did not catch up"
            read = parser.read_position
            caught = read is not None and (read.journal_number, read.position or 0) >= end
            if not self.take(name) and caught:
                return

    def take(self, name: str) -> bool:
        """A batch of ``name``'s, acked; whether there was one."""
        client = ClientIdentity(name, 1001)
        msg = self.server.get_without_ack(client, 5, 0.01)
        if msg.id == EMPTY_MESSAGE_ID:
            return False
        self.server.ack(client, msg.id)
        self.got[name] += [canonical(e) for e in msg.entries]
        return True

    def floor(self, kind: str, index: int) -> str:
        """The oldest file a start from mark ``index`` may read: its own; for a start by time (the boundary before
        the first event at or after it, which a server finds from each file's first event) the first mark's."""
        return self.marks[0 if kind == "time" else index].journal

    def purge(self, future: list[tuple[Any, ...]]) -> None:
        """Drop the files no destination needs: each dumps again from its restart point (the last position it handed
        off, or its start), and the later starts from their points."""
        marks = self.marks
        needed = [
            self.floor(self.slots[step[1]].kind, step[2])
            for step in future
            if step[0] == "start" and step[2] < len(marks)
        ]
        for name, (kind, index) in self.start_of.items():
            # the last position it handed off (a dump again after leaving a reader), and its cursor (a restart)
            resume = self.server.instance(name).parser.position
            if resume is not None and resume.position.journal_name:
                needed.append(resume.position.journal_name)
            acked = [e[14].journal_name or e[1] if e[14] is not None else e[1] for e in self.got[name] if e[1]]
            needed.append(acked[-1] if acked else self.floor(kind, index))
        needed.append(marks[-1].journal)
        self.binlog.purge_to(min(needed, key=lambda journal: int(journal.rpartition(".")[2])))

    def finish(self, limit_s: float) -> None:
        end = self.keys + 1_000_000
        self.binlog.end(end)
        deadline = time.monotonic() + limit_s
        while not all(done(out, end) for out in self.got.values()):
            assert time.monotonic() < deadline, {n: len(out) for n, out in self.got.items()}
            for name, out in self.got.items():
                if not done(out, end):
                    self.take(name)
        for i in range(SLOTS):
            shared, alone = self.names(i)
            got, want = upto_end(self.got[shared], end), upto_end(self.got[alone], end)
            assert is_end(got[-1], end) and is_end(want[-1], end)
            for n, (a, b) in enumerate(zip(got, want, strict=False)):
                assert a == b, f"{shared} ({self.slots[i]}): entry {n} differs:\nshared {a}\nalone  {b}"
            assert len(got) == len(want), f"{shared} ({self.slots[i]}): {len(got)} entries shared, {len(want)} alone"


def run(binlog: Binlog, meta: Path, seed: int, *, limit_s: float = 30) -> None:
    """The schedule of ``seed`` against ``binlog``; fails naming the seed when a destination's entries differ."""
    slots, steps = make_schedule(random.Random(seed))
    print(f"schedule seed {seed}: {slots} {steps}")
    server = EmbeddedServer()
    server.start()
    try:
        schedule = Run(binlog, server, meta, slots)
        for n, step in enumerate(steps):
            schedule.step(step, steps[n + 1 :])
        schedule.finish(limit_s)
    finally:
        server.stop()
