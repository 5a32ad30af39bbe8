"""The metrics of a destination that stopped on an error, once they count it."""

from __future__ import annotations

import time

from canal.instance import Instance
from canal.instance_metrics import InstanceMetrics


def failed_metrics(instance: Instance, timeout: float = 5.0) -> InstanceMetrics:
    """``instance.metrics()`` once its ``errors`` counts the fatal error (or ``timeout`` passed). The parser records
    the error -- which a consumer's get raises at once -- just before its callback counts it in the instance's
    counter, on the parser's thread: a test that saw the error waits for the count, not for a time."""
    deadline = time.monotonic() + timeout
    while True:
        m = instance.metrics()
        if m.errors or time.monotonic() > deadline:
            return m
        time.sleep(0.01)
