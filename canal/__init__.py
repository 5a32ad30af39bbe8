"""pycanal: an embeddable MySQL/MariaDB binlog change-capture server, after Alibaba canal's embedded server.

Import name ``canal``; distribution ``pycanal``. The public API is re-exported here.
"""

from __future__ import annotations

from canal.errors import (
    BatchOrderError,
    BinlogPurgedError,
    CanalError,
    ConfigError,
    FilterError,
    HAError,
    MetaError,
    NotRunningError,
    NotSubscribedError,
    ParseError,
    PositionError,
    ServerError,
    SourceError,
    SourceUnreachableError,
    StoreError,
    UnknownBatchError,
    UnknownDestinationError,
)
from canal.position import EntryPosition, LogIdentity, LogPosition, PositionRange
from canal.protocol import (
    Column,
    ColumnMeta,
    Entry,
    EntryType,
    EventType,
    Header,
    Message,
    RowChange,
    RowData,
    SqlType,
    TableSchema,
)

__version__ = "0.1.0"

__all__ = [
    "BatchOrderError",
    "BinlogPurgedError",
    "CanalError",
    "Column",
    "ColumnMeta",
    "ConfigError",
    "Entry",
    "EntryPosition",
    "EntryType",
    "EventType",
    "FilterError",
    "HAError",
    "Header",
    "LogIdentity",
    "LogPosition",
    "Message",
    "MetaError",
    "NotRunningError",
    "NotSubscribedError",
    "ParseError",
    "PositionError",
    "PositionRange",
    "RowChange",
    "RowData",
    "ServerError",
    "SourceError",
    "SourceUnreachableError",
    "SqlType",
    "StoreError",
    "TableSchema",
    "UnknownBatchError",
    "UnknownDestinationError",
    "__version__",
]
