"""run_batches into a DeltaMirror through a real process killed with SIGKILL part-way through a batch, on a real
MariaDB: the destination's file meta is flushed every ``flush_period_s`` (a second by default), so after the kill its
cursor may lie before batches fn already got and the instance acked -- the restart delivers them again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("deltalake")

from canal.spark import DeltaMirror
from canal.spark.testing import compare_tables, master_position
from tests.test_mirror_gaps_mariadb import _insert

pytestmark = [pytest.mark.integration]


def _consumer(args: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.procs.gap_consumer", json.dumps(args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _args(mariadb: Any, tmp_path: Path, start: Any, **more: Any) -> dict[str, Any]:
    """The consumer's arguments: the table a, from ``start`` (None: an initial snapshot's), file meta flushed every
    60 s (a second by default: the same window, only shorter), a mirror and journal in ``tmp_path``."""
    return {
        "address": mariadb.address,
        "user": mariadb.user,
        "password": mariadb.password,
        "start": None if start is None else list(start),
        "filter": rf"{mariadb.database}\.a",
        "meta_dir": str(tmp_path / "meta"),
        "flush_period_s": 60,
        "mirror": str(tmp_path / "m"),
        "journal": str(tmp_path / "journal.json"),
        **more,
    }


def _killed(args: dict[str, Any]) -> dict[str, Any]:
    """The consumer run until it killed itself (``kill_call``, ``kill_steps`` in ``args``); the journal it left."""
    killed = _consumer(args)
    assert killed.returncode == -9, killed.stdout + killed.stderr
    journal: dict[str, Any] = json.loads(Path(args["journal"]).read_text())
    return journal


def _exact_after_restart(conn: Any, db: str, args: dict[str, Any]) -> None:
    """The consumer restarted and run until the master's position now: the mirror equals SELECT."""
    done = _consumer({**args, "until": list(master_position(conn))})
    assert done.returncode == 0, done.stdout + done.stderr
    mirror = DeltaMirror(args["mirror"])
    for c in compare_tables(conn, mirror, db, ["a"]):
        assert c.equal, str(c)
    mirror.close()
    conn.close()


def test_a_batch_killed_part_way_is_replayed_alike_after_the_cursor_lagged(mariadb: Any, tmp_path: Path) -> None:
    """Batch 1 (a transaction) is applied and acked, then the process is killed after the mirror journaled batch 2's
    step, before it recorded batch 2 done; the meta file still holds the cursor before batch 1 (its flush had not come).
    The restart must hand the mirror batch 2 as it was -- not batch 1 and 2 under batch 2's id, which the mirror
    refused for ever (MirrorCheckpointError: another batch than the one it stopped part-way through)."""
    conn = mariadb.connect()
    db = mariadb.database
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE a (id INT PRIMARY KEY, x INT)")
    start = master_position(conn)
    _insert(conn, "a", 0, 1)  # BEGIN, a row, COMMIT: the first batch of 3 entries
    _insert(conn, "a", 10, 1)  # the second
    args = _args(mariadb, tmp_path, start, batch_size=3)
    assert _killed({**args, "kill_call": 2, "kill_steps": 1}).get("pending")  # batch 2 in flight
    _insert(conn, "a", 20, 1)
    _exact_after_restart(conn, db, args)


def test_a_replay_cut_inside_a_message_and_killed_again_is_replayed_again(mariadb: Any, tmp_path: Path) -> None:
    """The batch in flight (a transaction) is killed before the mirror saw it; the restart hands out other messages
    (a smaller batch size), so the replay's cut splits one -- and is killed too, before the mirror saw it. The next
    restart must replay that batch again: it had journaled the batch in flight as delivered already (``through`` its
    own end), and dropped it -- the mirror silently lacked its rows, with no error."""
    conn = mariadb.connect()
    db = mariadb.database
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE a (id INT PRIMARY KEY, x INT)")
    start = master_position(conn)
    _insert(conn, "a", 0, 1)  # BEGIN, a row, COMMIT
    _insert(conn, "a", 10, 1)
    args = _args(mariadb, tmp_path, start)
    for batch_size in (2, 3):  # 2: the first transaction's BEGIN and row; 3: the whole transaction
        assert _killed({**args, "batch_size": batch_size, "kill_call": 1, "kill_steps": 0}).get("pending")
    _exact_after_restart(conn, db, {**args, "batch_size": 3})


def test_a_kill_before_the_meta_flush_resumes_the_initial_snapshot_where_it_began(mariadb: Any, tmp_path: Path) -> None:
    """An initial snapshot's start (the server's position then, the snapshot pending) is made the cursor before
    anything is handed out, so that a crash before the first ack restarts there. The process is killed while the
    mirror writes the snapshot's first batch, before the file meta's first flush: the restart must snapshot again
    from that start, not from a later "now" -- whose stream skips what came between (a DELETE of a row the mirror has
    here), and which the mirror, holding the first batch's rows, refused for ever (MirrorCheckpointError)."""
    conn = mariadb.connect()
    db = mariadb.database
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE a (id INT PRIMARY KEY, x INT)")
    _insert(conn, "a", 0, 5)
    args = _args(mariadb, tmp_path, None, snapshot=True, batch_size=100)
    assert _killed({**args, "kill_call": 1, "kill_steps": 1}).get("spooled")  # the snapshot's batch in flight
    with conn.cursor() as cur:
        cur.execute("DELETE FROM a WHERE id = 3")
    conn.commit()
    _exact_after_restart(conn, db, args)


def test_a_journal_whose_through_names_the_batch_in_flight_replays_it(mariadb: Any, tmp_path: Path) -> None:
    """A journal written by an older version names the batch in flight itself as delivered already (``through`` at
    its end, after a replay's cut split a message): the restart replays it from the cursor rather than drop it."""
    conn = mariadb.connect()
    db = mariadb.database
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE a (id INT PRIMARY KEY, x INT)")
    start = master_position(conn)
    _insert(conn, "a", 0, 1)
    _insert(conn, "a", 10, 1)
    args = _args(mariadb, tmp_path, start, batch_size=3)
    journal = _killed({**args, "kill_call": 1, "kill_steps": 0})
    (tmp_path / "journal.json").write_text(json.dumps({**journal, "through": journal["end"]}))
    _exact_after_restart(conn, db, args)
