"""A destination's counters: :class:`InstanceMetrics` (what ``Instance.metrics()`` returns, and the Prometheus export
of :mod:`canal.metrics` reads), the states it names (:data:`STATES`), and the sliding window of rows handed out per
second its ``rows_per_s`` is read from.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import attrs

from canal.protocol import Entry
from canal.snapshot.runner import SnapshotProgress


@attrs.frozen(slots=True)
class InstanceMetrics:
    """A snapshot of one destination's counters (``Instance.metrics()``)."""

    destination: str
    running: bool
    put_sequence: int
    get_sequence: int
    ack_sequence: int
    store_entries: int
    store_bytes: int
    rows_per_s: float  # row changes handed out per second, over the last minute
    delay_get_ms: int | None  # now minus the execute time of the last entry handed out
    delay_ack_ms: int | None  # now minus the execute time of the last entry acked
    reconnects: int
    errors: int  # fatal parser errors (each stops the destination)
    last_error: str | None  # the last error, fatal or retried
    snapshot: SnapshotProgress | None = None  # the last snapshot started here (None: none)
    stream_ended: bool = False  # snapshot mode initial_only: the copy is complete and nothing more will come
    heals: int = 0  # tables read again in the stream where the server changed rows unlogged (canal.snapshot.heal)
    # the state, one of STATES: "streaming" (a dump reads from the master), "connecting" (the first connection, or a
    # reconnect backing off after last_error), "failed" (stopped on last_error: no retry fixes it), "ended" (an
    # initial_only copy is complete), "stopped"
    state: str = "stopped"
    connected: bool = False  # a dump reads from the master now (an event or heartbeat came since it opened)
    last_error_type: str | None = None  # the class of last_error (SourceUnreachableError, MissingPrivilegeError, ...)
    # now minus the master's time up to which the consumer acked everything: the execute time of the first entry not
    # acked, or -- with everything acked -- the time up to which the parser read the binlog, which the master's
    # heartbeats refresh while it writes nothing. It grows while the consumer does not ack what waits, and while the
    # master cannot be read. None until the parser read an event
    ack_lag_ms: int | None = None
    delay_put_ms: int | None = None  # now minus the execute time of the newest entry the parser put into the store
    rows_reread: int = 0  # rows read again where a partial UPDATE left a copy unable to make them exact

    def as_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


STATES = ("streaming", "connecting", "failed", "ended", "stopped")
"""The values of :attr:`InstanceMetrics.state`."""


def state_of(started: bool, failed: bool, ended: bool, connected: bool) -> str:
    """The :attr:`InstanceMetrics.state` of a destination."""
    if not started:
        return "stopped"
    if failed:
        return "failed"
    if ended:
        return "ended"
    return "streaming" if connected else "connecting"


class RateWindow:
    """Rows handed out per second over a sliding window of whole seconds. Thread-safe: gets add while a scrape (a
    metrics() call, under no lock of the instance) reads."""

    def __init__(self, window_s: int = 60) -> None:
        self._window = window_s
        self._buckets: OrderedDict[int, int] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, rows: int, now: float) -> None:
        second = int(now)
        with self._lock:
            self._buckets[second] = self._buckets.get(second, 0) + rows
            while self._buckets and next(iter(self._buckets)) <= second - self._window:
                self._buckets.popitem(last=False)

    def rate(self, now: float) -> float:
        second = int(now)
        with self._lock:  # a get adding a second's bucket meanwhile failed the scrape (OrderedDict mutated)
            total = sum(n for s, n in self._buckets.items() if s > second - self._window)
            first = next(iter(self._buckets), second)
        span = max(1, min(self._window, second - first + 1))
        return total / span


def rows_of(entries: Sequence[Entry]) -> int:
    """The row changes ``entries`` hold (DDL left out): what :class:`RateWindow` counts."""
    return sum(len(e.row_change.rows) for e in entries if e.row_change is not None and not e.row_change.is_ddl)
