"""The writer lease across a batch longer than the lease (canal.lake.identity.lease), with a short lease and a second
writer on "another host" (a process whose host name differs, so only the lease's renewal time tells whether the first
writer lives): a long batch renews its lease from a thread, so the second writer is refused throughout and the
first one's batch lands whole; a writer whose renewals stopped (its process stood still) and whose lease another
writer took is stopped before its next commit, and the other writer's batch lands."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from canal.lake.identity import lease
from canal.spark import DeltaMirror, MirrorLeaseError
from tests.mirror_rows import batch, upsert, values

pytest.importorskip("deltalake")

LEASE_S = 1.0
_OTHER_HOST = """
import sys, time
import canal.lake.identity.lease as lease
lease.LEASE_S = float(sys.argv[3])
lease.socket.gethostname = lambda: "another-host.invalid"
from canal.spark import DeltaMirror, MirrorLeaseError
from tests.mirror_rows import batch, upsert
mirror = DeltaMirror(sys.argv[1], background_folds=False)
deadline, refused = time.monotonic() + float(sys.argv[2]), 0
while time.monotonic() < deadline:
    try:
        mirror.apply(batch(upsert("b", 1, "theirs")), 1)
    except MirrorLeaseError:
        refused += 1
        time.sleep(0.1)  # a writer trying again, as a restarted driver would
        continue
    print("took", refused, flush=True)
    sys.exit(0)
print("refused", refused, flush=True)
"""


def _other_host(root: Path, seconds: float) -> subprocess.Popen[str]:
    """A writer on another host trying to write ``root`` for ``seconds``: it prints ``took N`` (taken after N
    refusals) or ``refused N``."""
    repo = Path(__file__).resolve().parent.parent
    return subprocess.Popen(
        [sys.executable, "-c", _OTHER_HOST, str(root), str(seconds), str(LEASE_S)],
        cwd=repo,
        stdout=subprocess.PIPE,
        text=True,
    )


def _slowed(mirror: DeltaMirror, table: str) -> tuple[threading.Event, threading.Event]:
    """Make ``mirror``'s next commit of ``table`` wait (before its fence) until the returned ``go`` is set; ``inside``
    is set once it waits."""
    inside, go = threading.Event(), threading.Event()
    real = mirror._apply_table

    def slow(plan: Any, *args: Any, **kwargs: Any) -> bool:
        if plan.table == table:
            inside.set()
            assert go.wait(60)
        return real(plan, *args, **kwargs)

    mirror._apply_table = slow  # type: ignore[method-assign]
    return inside, go


def test_a_batch_longer_than_the_lease_keeps_it_and_the_other_writer_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lease, "LEASE_S", LEASE_S)
    mirror = DeltaMirror(tmp_path, background_folds=False)
    mirror.apply(batch(upsert("a", 1, "first")), 1)
    inside, go = _slowed(mirror, "a")
    failed: list[BaseException] = []

    def long_batch() -> None:
        try:
            mirror.apply(batch(upsert("a", 2, "long")), 2)
        except BaseException as exc:  # reported below
            failed.append(exc)

    writer = threading.Thread(target=long_batch)
    writer.start()
    assert inside.wait(60)
    other = _other_host(tmp_path, 4 * LEASE_S)  # tries for four lease periods while the batch runs
    out, _ = other.communicate(timeout=120)
    go.set()
    writer.join(60)
    assert out.split()[0] == "refused" and int(out.split()[1]) >= 10, out
    assert not failed
    assert values(mirror.read("s", "a")) == {1: "first", 2: "long"}
    assert not mirror.table_path("s", "b").exists()  # the other writer wrote nothing
    mirror.close()


def test_a_writer_whose_lease_was_taken_over_stops_before_its_next_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lease, "LEASE_S", LEASE_S)
    monkeypatch.setattr(lease, "_renew_while_held", lambda *_: None)  # its process stands still: no renewals
    mirror = DeltaMirror(tmp_path, background_folds=False)
    mirror.apply(batch(upsert("a", 1, "first"), upsert("c", 1, "first")), 1)
    inside, go = _slowed(mirror, "c")  # the batch commits a, then stands still before c
    failed: list[BaseException] = []

    def stalled_batch() -> None:
        try:
            mirror.apply(batch(upsert("a", 2, "stalled"), upsert("c", 2, "stalled")), 2)
        except BaseException as exc:  # checked below
            failed.append(exc)

    writer = threading.Thread(target=stalled_batch)
    writer.start()
    assert inside.wait(60)
    other = _other_host(tmp_path, 30)
    out, _ = other.communicate(timeout=120)
    assert out.split()[0] == "took", out  # once the stalled writer's lease lapsed
    go.set()
    writer.join(60)
    assert len(failed) == 1 and isinstance(failed[0], MirrorLeaseError), failed
    assert "took the lease over" in str(failed[0])
    assert values(mirror.read("s", "c")) == {1: "first"}  # its commit after the takeover never happened
    assert values(mirror.read("s", "a")) == {1: "first", 2: "stalled"}  # (committed before it stood still)
    assert values(mirror.read("s", "b")) == {1: "theirs"}  # the other writer's batch landed
