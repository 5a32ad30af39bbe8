"""A table's background folds take at most ``fold_duty`` of the time: after a fold of T seconds the table rests
``T * (1 / fold_duty - 1)`` before the next is claimed. The clock is the folds module's, stepped by the test."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from canal.lake.types import MirrorError
from canal.spark import DeltaMirror


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    made = _Clock()
    monkeypatch.setattr(time, "monotonic", made.monotonic)  # the folds module reads time.monotonic()
    return made


def _fold_taking(clock: _Clock, seconds: float, fail: bool = False) -> Callable[[], None]:
    def fold() -> None:
        clock.now += seconds
        if fail:
            raise OSError("the store went away")

    return fold


@pytest.mark.parametrize(("duty", "rest"), [(0.5, 4.0), (0.25, 12.0), (1.0, 0.0)])
def test_a_table_rests_after_a_fold_as_its_duty_says(tmp_path: Path, clock: _Clock, duty: float, rest: float) -> None:
    mirror = DeltaMirror(tmp_path, fold_duty=duty)
    path, other = str(tmp_path / "s.t"), str(tmp_path / "s.u")
    assert mirror.claim_folds([path]) == [path]
    assert mirror.claim_folds([path]) == []  # under way
    mirror.run_folds([path], _fold_taking(clock, 4.0))
    mirror.wait_for_folds()
    if rest:
        clock.now += rest - 0.5
        assert mirror.claim_folds([path, other]) == [other]  # resting; another table is not
        mirror.run_folds([other], _fold_taking(clock, 0.0))
        mirror.wait_for_folds()
        clock.now += 0.5
    assert mirror.claim_folds([path]) == [path]
    mirror.run_folds([path], _fold_taking(clock, 0.0))
    mirror.close()


def test_a_failed_fold_does_not_rest_and_compactions_are_not_paced(tmp_path: Path, clock: _Clock) -> None:
    mirror = DeltaMirror(tmp_path, fold_duty=0.1)
    path = str(tmp_path / "s.t")
    assert mirror.claim_folds([path]) == [path]
    mirror.run_folds([path], _fold_taking(clock, 5.0, fail=True))
    mirror.wait_for_folds()
    assert mirror.fold_errors and "the store went away" in mirror.fold_errors[-1]
    assert mirror.claim_folds([path]) == [path]  # tried again after the next batch, as before
    mirror.run_folds([path], _fold_taking(clock, 5.0))
    mirror.wait_for_folds()
    assert mirror.claim_folds([path]) == []  # 45 s of rest ahead
    folding = mirror._folding  # compactions of scattered logs: cheap, and not folds
    assert folding.claim([path], paced=False) == [path]
    folding.run([path], _fold_taking(clock, 1.0), paced=False)
    mirror.wait_for_folds()
    clock.now += 45.0
    assert mirror.claim_folds([path]) == [path]  # the compaction added no rest
    mirror.run_folds([path], _fold_taking(clock, 0.0))
    mirror.close()


@pytest.mark.parametrize("duty", [0.0, -0.5, 1.5])
def test_a_duty_outside_zero_to_one_is_refused_before_anything_is_written(tmp_path: Path, duty: float) -> None:
    root = tmp_path / "mirror"
    with pytest.raises(MirrorError, match="fold_duty must be > 0 and <= 1"):
        DeltaMirror(root, fold_duty=duty)
    assert not root.exists()


def test_a_fold_under_a_second_does_not_rest_the_table(tmp_path: Path, clock: _Clock) -> None:
    from canal.lake.settings import FOLD_REST_MIN_S

    mirror = DeltaMirror(tmp_path, fold_duty=0.1)
    path = str(tmp_path / "s.t")
    for took, claimable in ((FOLD_REST_MIN_S * 0.9, True), (FOLD_REST_MIN_S, False)):
        assert mirror.claim_folds([path]) == [path]
        mirror.run_folds([path], _fold_taking(clock, took))
        mirror.wait_for_folds()
        assert (mirror.claim_folds([path]) == [path]) is claimable
        if claimable:
            mirror.run_folds([path], _fold_taking(clock, 0.0))
            mirror.wait_for_folds()
    clock.now += 9 * FOLD_REST_MIN_S
    assert mirror.claim_folds([path]) == [path]
    mirror.run_folds([path], _fold_taking(clock, 0.0))
    mirror.close()
