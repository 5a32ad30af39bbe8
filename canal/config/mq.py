"""canal's MQ settings (``canal.mq.*``): where canal-server in MQ mode sends each change, and in which form.

pycanal has no MQ producer of its own: the ``canal`` Spark source turns changes into canal's messages
(``.option("messages", "canal")``, :mod:`canal.lake.forms.flat_messages`) and Spark's Kafka sink writes them. These
settings route them the way canal-server's Kafka producer does (canal 1.1.7's ``MQMessageUtils``,
:mod:`canal.lake.forms.mq_routing`): a topic from ``canal.mq.topic`` or ``canal.mq.dynamicTopic``, a partition from
``canal.mq.partition`` or, with ``canal.mq.partitionHash``, hashed over ``canal.mq.partitionsNum`` (per topic:
``canal.mq.dynamicTopicPartitionNum``) partitions. They are read from ``instance.properties`` (``canal.mq.flatMessage``
and ``canal.mq.database.hash`` from ``canal.properties``, where canal reads them) or given as the source's options.
"""

from __future__ import annotations

import attrs

from canal.config.fields import _bool, _check, _is_int, _str, canal_key, keyed


@keyed
@attrs.frozen(slots=True)
class MqConfig:
    """canal-server's MQ routing of one destination (canal's ``MQDestination``)."""

    topic: str = attrs.field(default="", validator=_str, metadata=canal_key("canal.mq.topic", "str"))
    """The topic of every message a dynamic topic does not route (canal's default topic)."""
    dynamic_topic: str = attrs.field(default="", validator=_str, metadata=canal_key("canal.mq.dynamicTopic", "str"))
    """Topics by schema or table: ``schema``, ``schema\\..*`` (a topic named after each), ``topic:schema\\.table``,
    separated by commas or semicolons; the first that matches routes a table's messages."""
    partition: int = attrs.field(
        default=0,
        validator=_check(lambda v: _is_int(v) and v >= 0, "must be an integer >= 0"),
        metadata=canal_key("canal.mq.partition", "int"),
    )
    """The partition of every message when ``partition_hash`` is empty."""
    partitions_num: int | None = attrs.field(
        default=None,
        validator=_check(lambda v: v is None or (_is_int(v) and v > 0), "must be None or a positive integer"),
        metadata=canal_key("canal.mq.partitionsNum", "opt_int"),
    )
    """How many partitions ``partition_hash`` spreads over (None: one, as canal)."""
    partition_hash: str = attrs.field(default="", validator=_str, metadata=canal_key("canal.mq.partitionHash", "str"))
    """Rows to partitions by hash: ``schema.table:col1^col2``, ``regex:$pk$`` (the primary key), or ``regex`` alone
    (the table's name), separated by commas or semicolons; a table none matches goes to partition 0."""
    dynamic_topic_partition_num: str = attrs.field(
        default="", validator=_str, metadata=canal_key("canal.mq.dynamicTopicPartitionNum", "str")
    )
    """Partitions per topic for the hash (``topic:4,regex:6``); a topic none names takes ``partitions_num``."""
    flat_message: bool = attrs.field(default=True, validator=_bool, metadata=canal_key("canal.mq.flatMessage", "bool"))
    """canal's JSON FlatMessage (true, canal's default; pycanal writes no other canal form: false is refused where
    messages are made)."""
    database_hash: bool = attrs.field(
        default=True, validator=_bool, metadata=canal_key("canal.mq.database.hash", "bool")
    )
    """Whether a row's partition hash starts from its database's name (canal's default: true)."""
