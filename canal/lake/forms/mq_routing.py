"""canal-server's MQ routing (canal 1.1.7's ``MQMessageUtils`` and ``CanalKafkaProducer``), for messages pycanal makes:
which topic a table's messages go to, how many partitions that topic is hashed over, and which partition each row
goes to. Read from :class:`~canal.config.mq.MqConfig` (``canal.mq.*``); ``tests/test_mq_routing.py`` checks it
against canal's own classes.

- **Topic** (``canal.mq.dynamicTopic``): the rules, separated by ``,`` or ``;``, are tried in order, first against
  ``schema.table``, then against ``schema``; the first that matches names the topic: ``topic:pattern`` that topic,
  a bare ``pattern`` the matched name itself in lower case. A pattern holding none of ``*?+|(){}[]\\$^`` is a name,
  compared without case; otherwise a regular expression matched whole without case, ``.`` matching a line break too
  (:data:`~canal.config.mq.PATTERN_FLAGS`) -- one with ``\\.`` only against
  ``schema.table``, one without only against ``schema``. No match, or an entry without schema or table: the default
  topic (``canal.mq.topic``). Dots in a topic become ``_``. Without dynamic topics every message goes to
  ``canal.mq.topic`` as written.
- **Partition**: without ``canal.mq.partitionHash``, ``canal.mq.partition``. With it, the first rule matching
  ``schema.table`` (as above, by name or pattern) decides: ``pattern:col1^col2`` hashes each row's text of those
  columns, ``pattern:$pk$`` the primary key's, a bare ``pattern`` the table's name (the whole message to one
  partition); a row's hash starts from its database name's (``canal.mq.database.hash``, on by default) and XORs in
  each column's, with Java's ``String.hashCode``; the partition is ``abs(abs(hash) % n)`` -- Java's ``abs``, so the
  hash of ``Integer.MIN_VALUE`` stays negative until the second. ``n`` is the topic's count in
  ``canal.mq.dynamicTopicPartitionNum`` (``topic:n``, by name or pattern: the first rule naming it), else
  ``canal.mq.partitionsNum``, else 1. DDL, statements and tables no rule matches go to partition 0.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

import attrs

from canal.config.mq import PATTERN_FLAGS, MqConfig
from canal.config.mq import is_pattern as _is_wild
from canal.config.mq import routing_rules as _rules


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, PATTERN_FLAGS)  # MqConfig refused a pattern that does not compile


def _matches(pattern: str, name: str) -> bool:
    if not _is_wild(pattern):
        return pattern.lower() == name.lower()
    return _compiled(pattern).fullmatch(name) is not None


def _dynamic_match(name: str, pattern: str) -> bool:
    """canal's ``matchDynamicTopic`` for one rule: a name, or a table pattern (with ``\\.``) for ``schema.table``,
    or a schema pattern for ``schema``."""
    if not pattern:
        return False
    if not _is_wild(pattern):
        return pattern.lower() == name.lower()
    if "." in name:
        return "\\." in pattern and _compiled(pattern).fullmatch(name) is not None
    return "\\." not in pattern and _compiled(pattern).fullmatch(name) is not None


def java_hash(text: str) -> int:
    """Java's ``String.hashCode`` of ``text`` (over its UTF-16 code units, in 32-bit arithmetic)."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


def java_abs(value: int) -> int:
    """Java's ``Math.abs`` of an int: ``Integer.MIN_VALUE`` stays itself."""
    return value if value == -0x80000000 else abs(value)


def java_mod(value: int, n: int) -> int:
    """Java's ``%`` (the sign of the dividend)."""
    r = abs(value) % n
    return -r if value < 0 else r


@attrs.frozen
class HashMode:
    """How one table's rows are hashed: by the table's name, by its primary key, or by named columns."""

    table_hash: bool = False
    auto_pk: bool = False
    columns: tuple[str, ...] = ()


@attrs.frozen
class Routing:
    """canal's routing of one destination's messages (:class:`MqConfig`)."""

    config: MqConfig

    def topic(self, schema: str | None, table: str | None) -> str:
        """The topic of a message of ``schema.table`` (canal's ``messageTopics``: one topic; the first rule wins)."""
        mq = self.config
        if not mq.dynamic_topic:
            return mq.topic
        if schema and table:
            for name in (f"{schema}.{table}", schema):
                found = self._match_topic(name)
                if found is not None:
                    return found.replace(".", "_")
        return mq.topic.replace(".", "_")

    def _match_topic(self, name: str) -> str | None:
        for item in _rules(self.config.dynamic_topic):
            topic, colon, pattern = item.partition(":")
            if colon:
                if any(_dynamic_match(name, p) for p in _rules(pattern.strip())):
                    return topic.strip()
            elif _dynamic_match(name, item):
                return name.lower()
        return None

    def partitions_of(self, topic: str) -> int:
        """How many partitions rows of ``topic`` are hashed over (canal's ``parseDynamicTopicPartition``, else
        ``canal.mq.partitionsNum``, else 1)."""
        for item in _rules(self.config.dynamic_topic_partition_num):
            i = item.rfind(":")
            if i > 0:
                name, number = item[:i], item[i + 1 :]
                if _matches(name, topic):  # the first rule naming the topic (MqConfig checked its count)
                    return int(number)
        return self.config.partitions_num or 1

    def hash_mode(self, schema: str, table: str) -> HashMode | None:
        """The first ``canal.mq.partitionHash`` rule matching ``schema.table`` (None: partition 0)."""
        name = f"{schema}.{table}"
        for item in _rules(self.config.partition_hash):
            i = item.rfind(":")
            if i > 0:
                pattern, columns = item[:i], item[i + 1 :]
                mode = (
                    HashMode(auto_pk=True)
                    if columns.lower() == "$pk$"
                    else HashMode(columns=tuple(c for c in columns.split("^") if c))
                )
            else:
                pattern, mode = item, HashMode(table_hash=True)
            if _matches(pattern, name):
                return mode
        return None

    @property
    def hashed(self) -> bool:
        return bool(self.config.partition_hash)

    def table_partition(self, table: str, n: int) -> int:
        return java_abs(java_mod(java_abs(java_hash(table)), n))

    def row_partition(self, database: str, values: Sequence[str | None], n: int) -> int:
        """The partition of a row whose hashed columns hold ``values`` (canal text; a missing one hashes as "")."""
        h = java_hash(database) if self.config.database_hash else 0
        for value in values:
            h ^= java_hash(value or "")
        return java_abs(java_mod(java_abs(h), n))


__all__ = ["HashMode", "Routing", "java_abs", "java_hash", "java_mod"]
