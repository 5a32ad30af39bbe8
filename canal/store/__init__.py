"""The event store: a bounded ring buffer between the parser (put) and consumers (get / ack / rollback)."""

from __future__ import annotations

from canal.config import BatchMode
from canal.store.base import INIT_SEQUENCE, Events, EventStore, StoreStats
from canal.store.memory import MemoryEventStore, position_range

__all__ = [
    "INIT_SEQUENCE",
    "BatchMode",
    "EventStore",
    "Events",
    "MemoryEventStore",
    "StoreStats",
    "position_range",
]
