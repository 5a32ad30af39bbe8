"""Turn a configured server address into a :class:`~canal.parse.source.BinlogSource`: the one place that knows
which address scheme means which source.

* ``fake://NAME`` -- the :class:`~canal.testing.FakeMysql` registered under NAME in this process;
* ``file:///path/to/dir`` -- a directory of binlog files (:class:`~canal.parse.mysql.files.LocalBinlogSource`);
* ``host:port`` -- a MySQL/MariaDB server over the replication protocol.
"""

from __future__ import annotations

from collections.abc import Callable

from canal.config import InstanceConfig, MasterConfig
from canal.parse.source import BinlogSource

FAKE_SCHEME = "fake://"
FILE_SCHEME = "file://"

SourceFactoryType = Callable[[MasterConfig], BinlogSource]


def open_source(master: MasterConfig, config: InstanceConfig) -> BinlogSource:
    """An unopened source for ``master`` with the instance's connection settings."""
    address = master.address
    if address.startswith(FAKE_SCHEME):
        from canal.testing.fake import fake_source  # the testing package is only imported when a fake is named

        return fake_source(address)
    if address.startswith(FILE_SCHEME):
        from canal.parse.mysql.files import LocalBinlogSource

        return LocalBinlogSource(address[len(FILE_SCHEME) :])
    from canal.parse.mysql.source import MysqlBinlogSource

    return MysqlBinlogSource(
        address,
        master.username,
        master.password,
        slave_id=config.slave_id,
        charset=config.charset,
        connect_timeout=config.retry.connect_timeout_s,
        read_timeout=config.retry.read_timeout_s,
        ssl=master.ssl,
    )


def source_factory(config: InstanceConfig) -> SourceFactoryType:
    """The parser's ``source_factory`` for this instance."""
    return lambda master: open_source(master, config)
