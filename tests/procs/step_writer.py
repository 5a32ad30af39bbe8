"""A process that mirrors the DDL batches of :mod:`tests.test_mirror_step_faults`, for the kill tests.

Usage: python -m tests.procs.step_writer ROOT FIRST LAST [BATCH BOUNDARY]

Applies batches FIRST..LAST, printing ``A <b>`` once batch ``b`` was applied; with BATCH and BOUNDARY, SIGKILLs itself
at that boundary of that batch (the boundary's name, as the uninterrupted run records it: ``before journal 2``,
``moved _changes/s.a``, ...), its Delta commits and files as they are then.
"""

from __future__ import annotations

import os
import signal
import sys

import pytest

from canal.spark import DeltaMirror
from tests.mirror_rows import batch
from tests.test_mirror_step_faults import BATCHES, OPTIONS, _Boundaries, _watched


class _Killing(_Boundaries):
    def __init__(self, kill_at: str | None) -> None:
        super().__init__()
        self.kill_at = kill_at

    def cross(self, name: str) -> None:
        if name == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)


def main(argv: list[str]) -> None:
    root, first, last = argv[0], int(argv[1]), int(argv[2])
    kill_batch, kill_at = (int(argv[3]), argv[4]) if len(argv) > 4 else (None, None)
    writer = DeltaMirror(root, **OPTIONS)
    patch = pytest.MonkeyPatch()
    for number in range(first, last + 1):
        with _watched(patch, _Killing(kill_at if number == kill_batch else None)):
            writer.apply(batch(*BATCHES[number - 1]), number)
        print(f"A {number}", flush=True)
    writer.close()


if __name__ == "__main__":
    main(sys.argv[1:])
