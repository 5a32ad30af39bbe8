"""High availability through ZooKeeper: running monitors, cluster registration and fenced writes."""

from __future__ import annotations

from canal.ha.monitors import ClientRunningMonitor, ClusterRegistration, ServerRunningMonitor
from canal.ha.running import RunningMonitor

__all__ = ["ClientRunningMonitor", "ClusterRegistration", "RunningMonitor", "ServerRunningMonitor"]
