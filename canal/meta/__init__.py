"""Subscription, cursor and batch-mark managers (canal's ``CanalMetaManager``): memory, file, ZooKeeper and
period-mixed, all with the semantics of one in-memory core; plus the shared persistence and fencing helpers."""

from __future__ import annotations

from canal.meta.base import (
    ClientNotSubscribedError,
    CorruptMetaError,
    Lifecycle,
    MetaManager,
    MetaNotStartedError,
)
from canal.meta.buffered import BufferedMetaManager, FlushListener
from canal.meta.core import DestinationSnapshot, MetaCore
from canal.meta.fence import Fence, ZkFence, fenced_commit, resolve_fence
from canal.meta.file import FileMetaManager
from canal.meta.memory import MemoryMetaManager
from canal.meta.period import PeriodMixedMetaManager
from canal.meta.persist import PeriodicFlusher, read_json, remove_stale_temp_files, write_json_atomic
from canal.meta.zookeeper import ZooKeeperMetaManager

__all__ = [
    "BufferedMetaManager",
    "ClientNotSubscribedError",
    "CorruptMetaError",
    "DestinationSnapshot",
    "Fence",
    "FileMetaManager",
    "FlushListener",
    "Lifecycle",
    "MemoryMetaManager",
    "MetaCore",
    "MetaManager",
    "MetaNotStartedError",
    "PeriodMixedMetaManager",
    "PeriodicFlusher",
    "ZkFence",
    "ZooKeeperMetaManager",
    "fenced_commit",
    "read_json",
    "remove_stale_temp_files",
    "resolve_fence",
    "write_json_atomic",
]
