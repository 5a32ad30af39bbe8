"""canal's MQ settings and routing without services: ``canal.mq.*`` keys read into ``InstanceConfig.mq`` (no longer
reported as unused), typed errors for bad values and for options the ``messages`` form refuses, Java's hash
arithmetic, and the topic and partition rules of canal 1.1.7's ``MQMessageUtils`` (checked against canal's own classes
on a real broker in ``test_spark_mq_kafka.py``)."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from canal.config import InstanceConfig, MqConfig
from canal.errors import ConfigError
from canal.lake.forms.mq_routing import Routing, java_abs, java_hash, java_mod


def test_canal_mq_keys_are_read_and_not_reported(caplog: pytest.LogCaptureFixture) -> None:
    text = (
        "canal.instance.master.address=fake://mq\n"
        "canal.mq.topic=example\n"
        "canal.mq.dynamicTopic=mytest1.user,topic2:mytest2\\\\..*,.*\\\\..*\n"
        "canal.mq.partition=1\n"
        "canal.mq.partitionsNum=3\n"
        "canal.mq.partitionHash=test.table:id^name,.*\\\\..*\n"
        "canal.mq.dynamicTopicPartitionNum=test.*:4,mycanal:6\n"
        "canal.mq.database.hash=false\n"
    )
    with caplog.at_level(logging.DEBUG, logger="canal.config"):
        config = InstanceConfig.from_properties(text, destination="mq")
    assert config.mq == MqConfig(
        topic="example",
        dynamic_topic=r"mytest1.user,topic2:mytest2\..*,.*\..*",
        partition=1,
        partitions_num=3,
        partition_hash=r"test.table:id^name,.*\..*",
        dynamic_topic_partition_num="test.*:4,mycanal:6",
        database_hash=False,
    )
    assert not [r for r in caplog.records if "canal.mq." in r.getMessage()]
    again = InstanceConfig.from_properties(config.to_properties(), destination="mq")
    assert again.mq == config.mq


def test_a_bad_mq_value_is_a_config_error_naming_its_key() -> None:
    with pytest.raises(ConfigError, match=r"canal\.mq\.partitionsNum"):
        InstanceConfig.from_properties(
            "canal.instance.master.address=fake://mq\ncanal.mq.partitionsNum=zero\n", destination="mq"
        )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"messages": "avro"}, "expected canal or debezium"),
        ({"messages": "canal", "images": "json"}, "exclude each other"),
        ({"messages": "canal", "canal.mq.flatmessage": "false"}, "protobuf"),
        ({"messages": "debezium", "canal.mq.partitionHash": r".*\..*:$pk$"}, "partitionHash"),
        ({"messages": "canal", "snapshot.partitions": "2", "pycanal.snapshot.mode": "initial"}, "messages cannot"),
    ],
)
def test_the_messages_option_refuses_what_it_cannot_make(options: dict[str, str], message: str, tmp_path) -> None:
    from canal.spark import CanalStreamReader, SparkSourceError

    base = {"master.address": "fake://mq-refused", "destination": "mq", "spool.dir": str(tmp_path / "spool")}
    with pytest.raises(SparkSourceError, match=message):
        CanalStreamReader({**base, **options})
    assert not (tmp_path / "spool").exists() or not any((tmp_path / "spool").iterdir())


def test_java_hash_and_arithmetic() -> None:
    assert java_hash("") == 0
    assert java_hash("hello") == 99162322
    assert java_hash("orders") == -1008770331
    assert java_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert java_hash("\U0001f600") == 1772899  # two UTF-16 code units
    assert java_abs(-(2**31)) == -(2**31)
    assert java_mod(-7, 3) == -1 and java_mod(7, 3) == 1  # the sign of the dividend
    routing = Routing(MqConfig(partition_hash="a.b", partitions_num=3))
    assert routing.table_partition("polygenelubricants", 3) == 2  # abs(MIN_VALUE % 3): Java's -2, then abs


@given(st.text(max_size=30))
def test_java_hash_is_the_polynomial_over_utf16_units(text: str) -> None:
    units = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (h * 31 + int.from_bytes(units[i : i + 2], "big")) % 2**32
    assert java_hash(text) == (h - 2**32 if h >= 2**31 else h)


def test_dynamic_topics_as_canal_routes_them() -> None:
    routing = Routing(MqConfig(topic="example", dynamic_topic=r"mytest1.user,topic2:mytest2\..*,shop,.*\..*"))
    assert routing.topic("mytest1", "user") == "mytest1_user"  # a name: the matched name, dots as _
    assert routing.topic("MyTest1", "User") == "mytest1_user"  # compared without case, lower-cased
    assert routing.topic("mytest2", "orders") == "topic2"
    assert routing.topic("shop", "orders") == "shop_orders"  # the table rules first: .*\..* matches
    assert routing.topic("other", "t") == "other_t"
    assert routing.topic("", "") == "example"  # an entry without schema or table: the default topic
    schema_only = Routing(MqConfig(topic="example.x", dynamic_topic="shop"))
    assert schema_only.topic("shop", "orders") == "shop"  # the schema rule, tried second
    assert schema_only.topic("other", "t") == "example_x"  # the default, dots as _ with dynamic topics
    assert Routing(MqConfig(topic="example.x")).topic("shop", "t") == "example.x"  # as written without them


def test_partition_rules_as_canal_reads_them() -> None:
    routing = Routing(
        MqConfig(
            partition_hash=r"shop.orders:id^name,shop\.items:$PK$,shop\..*",
            partitions_num=3,
            dynamic_topic_partition_num="big.*:8,small:2",
        )
    )
    orders = routing.hash_mode("shop", "orders")
    assert orders is not None and orders.columns == ("id", "name") and not orders.table_hash
    items = routing.hash_mode("SHOP", "items")
    assert items is not None and items.auto_pk
    other = routing.hash_mode("shop", "other")
    assert other is not None and other.table_hash
    assert routing.hash_mode("elsewhere", "t") is None  # partition 0
    assert routing.partitions_of("bigtopic") == 8 and routing.partitions_of("small") == 2
    assert routing.partitions_of("medium") == 3
    row = routing.row_partition("shop", ["1", None], 3)
    assert row == java_abs(java_mod(java_abs(java_hash("shop") ^ java_hash("1") ^ java_hash("")), 3))
    no_db = Routing(MqConfig(partition_hash="a.b:id", partitions_num=3, database_hash=False))
    assert no_db.row_partition("shop", ["1"], 3) == java_hash("1") % 3
