"""Test support for pycanal and for code that embeds it.

- :class:`FakeMysql`: an in-memory MySQL/MariaDB server and binlog for unit tests (``canal.testing.fake``).
- :class:`MariaDBServer`, :class:`ZooKeeperServer`: private servers on free loopback ports (``canal.testing.services``).
- pytest fixtures ``mariadb``, ``mariadb_server``, ``mariadb_factory``, ``zookeeper``, ``zookeeper_server``,
  ``fake_mysql``: registered automatically through the ``pytest11`` entry point (``canal.testing.plugin``) once
  pycanal is installed.
"""

from __future__ import annotations

from canal.testing.fake import FakeMysql
from canal.testing.services import MariaDBServer, ZooKeeperServer

__all__ = [
    "FakeMysql",
    "MariaDBServer",
    "ZooKeeperServer",
]
