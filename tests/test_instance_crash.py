"""A consumer process (file meta, write-through) SIGKILLed at random points while acking, against real MariaDB.

After each restart: rows of acked batches never come again, rows of batches handed out but not acked all come
again, and in the end every row of the source arrived (counted exactly). The one batch a kill may catch between
``ack()`` returning and its log line is "in doubt": it must come again entirely or not at all.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent


def write_workload(db: MariaDBDatabase, rng: random.Random) -> int:
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
    next_id = 0
    with db.connect() as conn, conn.cursor() as cur:
        for _ in range(40):
            size = rng.choice([1, 1, 2, 5, 30])  # big transactions put cursors inside them
            cur.executemany("INSERT INTO t VALUES (%s, %s)", [(next_id + i, f"v{next_id + i}") for i in range(size)])
            conn.commit()
            next_id += size
    return next_id


def parse_runs(log: Path) -> list[list[tuple[str, int, list[int]]]]:
    runs: list[list[tuple[str, int, list[int]]]] = []
    for line in log.read_text().splitlines():
        kind, *rest = line.split()
        if kind == "R":
            runs.append([])
        elif kind == "D":
            runs[-1].append(("D", int(rest[0]), [int(x) for x in rest[1:]]))
        else:
            runs[-1].append(("A", int(rest[0]), []))
    return runs


def test_sigkilled_consumer_never_sees_acked_rows_again_and_loses_nothing(
    mariadb: MariaDBDatabase, tmp_path: Path
) -> None:
    rng = random.Random(20261121)
    journal, position = mariadb.execute("SHOW MASTER STATUS")[0][:2]
    total = write_workload(mariadb, rng)
    log = tmp_path / "consumer.log"
    args = {
        "address": mariadb.address,
        "user": mariadb.user,
        "password": mariadb.password,
        "table_regex": rf"{mariadb.database}\.t",
        "journal": journal,
        "position": position,
        "meta_dir": str(tmp_path / "meta"),
        "log": str(log),
    }
    env = {**os.environ, "PYTHONPATH": str(ROOT)}

    def run(seed: int, kill_after_acks: int | None) -> None:
        with log.open("a") as f:
            f.write("R\n")
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.procs.acking_consumer", json.dumps({**args, "seed": seed})],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            assert proc.stdout is not None
            acks = 0
            for line in proc.stdout:
                if line.startswith("A"):
                    acks += 1
                    if kill_after_acks is not None and acks >= kill_after_acks:
                        break
                elif kill_after_acks is not None or confirmed_acked() >= set(range(total)):
                    break  # idle: caught up (and, in the last run, every row's ack is in the log)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)

    def confirmed_acked() -> set[int]:
        out: set[int] = set()
        for events in parse_runs(log):
            acked_ids = {batch_id for kind, batch_id, _ in events if kind == "A"}
            out.update(i for kind, batch_id, ids in events if kind == "D" and batch_id in acked_ids for i in ids)
        return out

    for kill in range(8):
        run(seed=kill, kill_after_acks=rng.randint(1, 12))
    run(seed=99, kill_after_acks=None)  # the last run consumes the rest

    runs = parse_runs(log)
    assert len(runs) == 9
    acked: set[int] = set()  # rows of batches whose ack returned
    owed: set[int] = set()  # rows handed out and not acked: they must come again
    for index, events in enumerate(runs):
        delivered_here = {i for kind, _, ids in events if kind == "D" for i in ids}
        assert not acked & delivered_here, f"run {index} redelivered acked rows {sorted(acked & delivered_here)}"
        owed -= delivered_here
        batches = {batch_id: ids for kind, batch_id, ids in events if kind == "D"}
        acked_ids = {batch_id for kind, batch_id, _ in events if kind == "A"}
        unacked = [b for b in batches if b not in acked_ids]
        # the kill may land between ack() and its log line: the last unacked batch is in doubt, decided by what
        # the following runs deliver (all of it again: it was not acked; none of it: it was)
        in_doubt = unacked[-1:] if index + 1 < len(runs) else []
        later = {i for run_ in runs[index + 1 :] for kind, _, ids in run_ if kind == "D" for i in ids}
        for batch_id, ids in batches.items():
            if batch_id in acked_ids or (batch_id in in_doubt and not set(ids) & later):
                acked.update(ids)
            else:
                assert batch_id not in in_doubt or set(ids) <= later, "an in-doubt batch came again only in part"
                owed.update(ids)
        owed -= acked
    assert not owed, f"rows handed out, never acked and never delivered again: {sorted(owed)}"
    assert acked == set(range(total)), f"missing rows: {sorted(set(range(total)) - acked)}"
