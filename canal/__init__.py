"""pycanal: an embeddable MySQL/MariaDB binlog change-capture server, after Alibaba canal's embedded server.

Import name ``canal``; distribution ``pycanal``. The public API is re-exported here.
"""

from __future__ import annotations

from canal.client import DEFAULT_CLIENT_ID, ClientIdentity
from canal.config import (
    BatchMode,
    DetectingConfig,
    FilterFlags,
    InstanceConfig,
    MasterConfig,
    MetaMode,
    RetryConfig,
    ServerConfig,
    SslConfig,
    SslMode,
    StoreConfig,
    load_conf_dir,
)
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
    TlsError,
    UnknownBatchError,
    UnknownDestinationError,
)
from canal.instance import Instance, InstanceMetrics
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
from canal.server import EmbeddedServer

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_CLIENT_ID",
    "BatchMode",
    "BatchOrderError",
    "BinlogPurgedError",
    "CanalError",
    "ClientIdentity",
    "Column",
    "ColumnMeta",
    "ConfigError",
    "DetectingConfig",
    "EmbeddedServer",
    "Entry",
    "EntryPosition",
    "EntryType",
    "EventType",
    "FilterError",
    "FilterFlags",
    "HAError",
    "Header",
    "Instance",
    "InstanceConfig",
    "InstanceMetrics",
    "LogIdentity",
    "LogPosition",
    "MasterConfig",
    "Message",
    "MetaError",
    "MetaMode",
    "NotRunningError",
    "NotSubscribedError",
    "ParseError",
    "PositionError",
    "PositionRange",
    "RetryConfig",
    "RowChange",
    "RowData",
    "ServerConfig",
    "ServerError",
    "SourceError",
    "SourceUnreachableError",
    "SqlType",
    "SslConfig",
    "SslMode",
    "StoreConfig",
    "StoreError",
    "TableSchema",
    "TlsError",
    "UnknownBatchError",
    "UnknownDestinationError",
    "__version__",
    "load_conf_dir",
]
