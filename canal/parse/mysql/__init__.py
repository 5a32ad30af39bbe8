"""MySQL/MariaDB binlog sources: the replication-protocol dump and local binlog files, sharing one event parser
and one generated row decoder."""

from canal.parse.mysql.binlog import EventParser
from canal.parse.mysql.files import LocalBinlogSource
from canal.parse.mysql.source import MysqlBinlogSource

__all__ = ["EventParser", "LocalBinlogSource", "MysqlBinlogSource"]
