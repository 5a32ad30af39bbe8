"""Test support for pycanal and for code that embeds it.

- :class:`MariaDBServer`, :class:`ZooKeeperServer`: private servers on free loopback ports (``canal.testing.services``).
- pytest fixtures ``mariadb``, ``mariadb_server``, ``mariadb_factory``, ``zookeeper``, ``zookeeper_server``: registered
  automatically through the ``pytest11`` entry point (``canal.testing.plugin``) once pycanal is installed.
"""

from __future__ import annotations

from canal.testing.services import MariaDBServer, ZooKeeperServer

# The in-memory fake binlog (canal/testing/fake.py) is exported here too:
# from canal.testing.fake import FakeMysql

__all__ = [
    # "FakeMysql",
    "MariaDBServer",
    "ZooKeeperServer",
]
