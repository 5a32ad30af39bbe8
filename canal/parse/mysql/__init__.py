"""MySQL/MariaDB binlog sources: the replication-protocol dump and local binlog files, sharing one event parser
(:class:`EventDecoder`, bytes in, :mod:`canal.parse.events` out) and one generated row decoder
(:mod:`canal.parse.mysql.decoder`).

```python
source = MysqlBinlogSource("127.0.0.1:3306", "canal", "canal")   # slave_id derived when not given
source.open()                     # ServerNotReadyError says which SET GLOBAL / my.cnf line to change
end = source.master_status()      # EntryPosition(journal, offset, gtid=...)
for event in source.dump(DumpRequest("mysql-bin.000001", 4, blocking=False)):
    ...                           # RotateEvent, FormatDescriptionEvent, GtidEvent, QueryEvent, TableMapEvent,
                                  # RowsEvent (rows: RowData tuples), XidEvent, HeartbeatEvent, IgnoredEvent
source.dump(DumpRequest(gtid_set="0-1-42"))                  # MariaDB GTID state / MySQL GTID set
files = LocalBinlogSource("/var/lib/mysql")                  # file://DIR, same events as the network dump
```
"""

from canal.parse.mysql.binlog import EventDecoder
from canal.parse.mysql.files import LocalBinlogSource
from canal.parse.mysql.source import MysqlBinlogSource, default_slave_id

__all__ = ["EventDecoder", "LocalBinlogSource", "MysqlBinlogSource", "default_slave_id"]
