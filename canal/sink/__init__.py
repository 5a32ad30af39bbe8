"""Sinks: what happens to entries between the parser's transaction buffer and the event store."""

from __future__ import annotations

from canal.sink.entry_sink import EntrySink, PutTarget
from canal.sink.group_sink import GroupSink

__all__ = ["EntrySink", "GroupSink", "PutTarget"]
