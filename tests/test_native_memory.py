"""Freed native memory goes back to the system (canal.lake.native_memory), and run_batches gives it back after each
large batch."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from canal.lake import native_memory


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.mark.skipif(native_memory._malloc_trim() is None, reason="the C library has no malloc_trim")
def test_free_pages_a_thread_left_in_its_arena_go_back_to_the_system() -> None:
    kept: list[bytes] = []

    def allocate() -> None:
        # 8 KB blocks (too large for Python's own allocator), every fourth one kept: the freed ones are holes in the
        # thread's arena, which glibc does not return by itself
        blocks = [bytes(8192) for _ in range(16_000)]
        kept.extend(blocks[::4])
        del blocks

    thread = threading.Thread(target=allocate)
    thread.start()
    thread.join()
    before = _rss_mb()
    assert native_memory.give_back_freed()
    after = _rss_mb()
    assert before - after > 30, (before, after)  # about 96 MB were freed, in holes of 24 KB
    assert len(kept) == 4_000


def test_run_batches_gives_back_after_a_large_batch_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from canal.config import InstanceConfig, MasterConfig
    from canal.instance import Instance
    from canal.spark import batches
    from canal.testing import FakeMysql

    fake = FakeMysql(name="give_back")
    try:
        fake.execute("CREATE TABLE a.t (id INT PRIMARY KEY, v VARCHAR(20))")
        start = fake.master_status()
        for k in range(20):
            fake.insert("a.t", {"id": k, "v": f"row {k}"})
        config = InstanceConfig(
            destination="give_back",
            master=MasterConfig(address=fake.address, journal_name=start.journal_name, position=start.position),
            filter_regex=r"a\.t",
        )
        calls: list[int] = []

        def give_back() -> bool:
            calls.append(1)
            return True

        monkeypatch.setattr(batches, "give_back_freed", give_back)
        seen: list[int] = []
        for threshold, expected in ((1 << 30, 0), (1, 1)):
            monkeypatch.setattr(batches, "GIVE_BACK_BYTES", threshold)
            calls.clear()
            with Instance(config) as inst:
                stats = batches.run_batches(
                    inst, None, lambda rows, batch_id: seen.append(rows.num_rows), until=lambda s: s.rows >= 20
                )
            assert stats.rows == 20
            assert (len(calls) >= 1) if expected else not calls
    finally:
        fake.unregister()
