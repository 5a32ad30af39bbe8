"""Turn a configured server address into a :class:`~canal.parse.source.BinlogSource`: the registry of address
schemes, the one place that knows which address means which source.

* ``file:///path/to/dir`` -- a directory of binlog files (:class:`~canal.parse.mysql.files.LocalBinlogSource`);
* ``host:port`` -- a MySQL/MariaDB server over the replication protocol;
* any scheme registered with :func:`register_source_scheme`: ``fake://NAME`` is registered by ``canal.testing``
  (its :class:`~canal.testing.FakeMysql` servers) when it is imported, so production code never imports the test
  support; a config naming ``fake://`` in a process that did not import it gets a ConfigError saying so.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Final

from canal.config import InstanceConfig, MasterConfig
from canal.errors import ConfigError
from canal.parse.source import BinlogSource

__all__ = [
    "FAKE_SCHEME",
    "FILE_SCHEME",
    "SourceFactoryType",
    "SourceOpener",
    "open_source",
    "register_source_scheme",
    "source_factory",
]

FAKE_SCHEME: Final = "fake://"
FILE_SCHEME: Final = "file://"

SourceFactoryType = Callable[[MasterConfig], BinlogSource]
SourceOpener = Callable[[str], BinlogSource]
"""Builds an unopened source from an address of its scheme."""

_OPENERS: dict[str, SourceOpener] = {}
_LOCK = threading.Lock()


def register_source_scheme(scheme: str, opener: SourceOpener) -> None:
    """Addresses starting with ``scheme`` (``"fake://"``) open with ``opener`` from now on, in this process."""
    if not scheme.endswith("://") or scheme == FILE_SCHEME:
        raise ConfigError(f"a source scheme looks like 'name://' and is not {FILE_SCHEME!r}: {scheme!r}")
    with _LOCK:
        _OPENERS[scheme] = opener


def _opener(address: str) -> SourceOpener | None:
    with _LOCK:
        for scheme, opener in _OPENERS.items():
            if address.startswith(scheme):
                return opener
    return None


def _check_resolvable(master: MasterConfig) -> None:
    address = master.address
    if address.startswith(FAKE_SCHEME) and _opener(address) is None:
        raise ConfigError(
            f"{address!r} names an in-memory FakeMysql, but nothing in this process registered the fake:// scheme: "
            "import canal.testing (which registers it) before building an instance from this config",
            key="canal.instance.master.address",
        )


def open_source(master: MasterConfig, config: InstanceConfig) -> BinlogSource:
    """An unopened source for ``master`` with the instance's connection settings."""
    address = master.address
    opener = _opener(address)
    if opener is not None:
        return opener(address)
    _check_resolvable(master)
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
        replica_name=config.destination,
    )


def source_factory(config: InstanceConfig) -> SourceFactoryType:
    """The parser's ``source_factory`` for this instance; a ConfigError now for an address no source can serve."""
    _check_resolvable(config.master)
    if config.standby is not None:
        _check_resolvable(config.standby)
    return lambda master: open_source(master, config)
