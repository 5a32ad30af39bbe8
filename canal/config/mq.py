"""canal's MQ settings (``canal.mq.*``): where canal-server in MQ mode sends each change, and in which form.

pycanal has no MQ producer of its own: the ``canal`` Spark source turns changes into canal's messages
(``.option("messages", "canal")``, :mod:`canal.lake.forms.flat_messages`) and Spark's Kafka sink writes them. These
settings route them the way canal-server's Kafka producer does (canal 1.1.7's ``MQMessageUtils``,
:mod:`canal.lake.forms.mq_routing`): a topic from ``canal.mq.topic`` or ``canal.mq.dynamicTopic``, a partition from
``canal.mq.partition`` or, with ``canal.mq.partitionHash``, hashed over ``canal.mq.partitionsNum`` (per topic:
``canal.mq.dynamicTopicPartitionNum``) partitions. They are read from ``instance.properties`` (``canal.mq.flatMessage``
and ``canal.mq.database.hash`` from ``canal.properties``, where canal reads them) or given as the source's options.

A routing rule canal cannot use is refused here, naming its key: a pattern that does not compile, a partition count
that is not an integer from 1 (canal compiles its rules at the first message and then stops there for ever, and drops
a count that is not a number silently).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final

import attrs

from canal.config.fields import _bool, _check, _FieldError, _is_int, _str, canal_key, keyed

PATTERN_FLAGS: Final = re.IGNORECASE | re.DOTALL
"""How canal compiles a routing pattern (ORO's Perl5 ``CASE_INSENSITIVE_MASK | SINGLELINE_MASK``): without case, and
``.`` matching a line break too (a quoted identifier may hold one). It is matched whole."""

_WILD: Final = frozenset("*?+|(){}[]\\$^")
_MAX_PARTITIONS: Final = 2**31 - 1  # a Java Integer


def routing_rules(text: str) -> list[str]:
    """The rules of a routing key's value: separated by ``,`` or ``;``, empty ones left out (canal's split)."""
    return [part for part in re.split(r"[,;]", text) if part]


def is_pattern(rule: str) -> bool:
    """Whether canal reads ``rule`` as a regular expression (it holds one of ``*?+|(){}[]\\$^``), not a name."""
    return any(ch in _WILD for ch in rule)


def _pattern_problem(pattern: str) -> str | None:
    if not is_pattern(pattern):
        return None
    try:
        re.compile(pattern, PATTERN_FLAGS)
    except re.error as e:
        return f"the pattern {pattern!r} is not a regular expression ({e})"
    return None


def _topic_rule_problem(rule: str) -> str | None:
    _topic, colon, pattern = rule.partition(":")
    return _pattern_problem(pattern.strip() if colon else rule)


def _hash_rule_problem(rule: str) -> str | None:
    i = rule.rfind(":")
    return _pattern_problem(rule[:i] if i > 0 else rule)


def _count_rule_problem(rule: str) -> str | None:
    i = rule.rfind(":")
    if i <= 0:
        return f"the rule {rule!r} names no topic:count"
    number = rule[i + 1 :]
    if not re.fullmatch(r"[0-9]+", number) or not 0 < int(number) <= _MAX_PARTITIONS:
        return f"the rule {rule!r}: its count of partitions must be an integer in 1..{_MAX_PARTITIONS}"
    return _pattern_problem(rule[:i])


def _rules_check(problem_of: Callable[[str], str | None]) -> Callable[[Any, Any, Any], None]:
    """A validator of a routing key: a string whose every rule canal can use, else the first rule's problem."""

    def validate(inst: Any, attr: Any, value: Any) -> None:
        _str(inst, attr, value)
        for rule in routing_rules(value):
            problem = problem_of(rule)
            if problem is not None:
                raise _FieldError(type(inst).__name__, attr.name, value, problem)

    return validate


@keyed
@attrs.frozen(slots=True)
class MqConfig:
    """canal-server's MQ routing of one destination (canal's ``MQDestination``)."""

    topic: str = attrs.field(default="", validator=_str, metadata=canal_key("canal.mq.topic", "str"))
    """The topic of every message a dynamic topic does not route (canal's default topic)."""
    dynamic_topic: str = attrs.field(
        default="", validator=_rules_check(_topic_rule_problem), metadata=canal_key("canal.mq.dynamicTopic", "str")
    )
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
    partition_hash: str = attrs.field(
        default="", validator=_rules_check(_hash_rule_problem), metadata=canal_key("canal.mq.partitionHash", "str")
    )
    """Rows to partitions by hash: ``schema.table:col1^col2``, ``regex:$pk$`` (the primary key), or ``regex`` alone
    (the table's name), separated by commas or semicolons; a table none matches goes to partition 0."""
    dynamic_topic_partition_num: str = attrs.field(
        default="",
        validator=_rules_check(_count_rule_problem),
        metadata=canal_key("canal.mq.dynamicTopicPartitionNum", "str"),
    )
    """Partitions per topic for the hash (``topic:4,regex:6``); a topic none names takes ``partitions_num``."""
    flat_message: bool = attrs.field(default=True, validator=_bool, metadata=canal_key("canal.mq.flatMessage", "bool"))
    """canal's JSON FlatMessage (true, canal's default; pycanal writes no other canal form: false is refused where
    messages are made)."""
    database_hash: bool = attrs.field(
        default=True, validator=_bool, metadata=canal_key("canal.mq.database.hash", "bool")
    )
    """Whether a row's partition hash starts from its database's name (canal's default: true)."""
