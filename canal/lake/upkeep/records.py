"""Bounded records of what a long-running mirror did: its batches' results, its folds and its fold errors.

A mirror applies a batch every few milliseconds for months; a record kept per batch (or per fold) without a bound
is a leak. :class:`Recent` is a list that keeps the newest entries only -- at most ``count`` of them, and at most
``weight`` in all by a measure of their size (the table names a batch's result holds, the characters of an error)
-- dropping the oldest as new ones come. It is a list (indexing and slicing from the newest end stay as they were);
only :meth:`Recent.append` adds to it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class Recent(list[T]):
    """The newest entries appended, at most ``count`` and at most ``weight`` by ``weigh`` (an entry heavier than
    ``weight`` alone is kept, alone, until the next)."""

    def __init__(self, count: int, weight: int, weigh: Callable[[T], int]) -> None:
        super().__init__()
        if count < 1 or weight < 1:
            raise ValueError(f"count and weight must be >= 1, got {count} and {weight}")
        self.most = count
        self.weight = weight
        self._weigh = weigh
        self._weights: list[int] = []
        self._total = 0
        self.dropped = 0  # entries dropped as old

    def append(self, entry: T) -> None:
        super().append(entry)
        w = max(0, self._weigh(entry))
        self._weights.append(w)
        self._total += w
        drop = 0
        total = self._total
        while len(self) - drop > self.most or (total > self.weight and len(self) - drop > 1):
            total -= self._weights[drop]
            drop += 1
        if drop:
            del self[:drop]
            del self._weights[:drop]
            self._total = total
            self.dropped += drop
