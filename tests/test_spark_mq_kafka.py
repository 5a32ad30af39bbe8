"""canal's MQ mode through Spark: the ``canal`` source's ``messages`` rows written by Spark's Kafka sink to a real
Kafka broker (KRaft, from Maven Central's jars), routed by canal's ``canal.mq.*`` keys; read back by canal 1.1.7's own
FlatMessage classes and routing (``jars/canal-mq``) and by a Python consumer that replays them to ``SELECT`` -- key
changes and DDL included; Debezium's envelope as a second form; and Kafka's sink at least once: a driver killed in
the middle of a micro-batch's write, restarted from its checkpoint, writes part of it twice, and the consumer drops
those by message key."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from conftest import needs_jars
from mq_check import by_position, canal_check, read_topics, replay_debezium, replay_flat, unique

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(600)]


FLAT_FIELDS = [
    "data",
    "database",
    "es",
    "gtid",
    "id",
    "isDdl",
    "mysqlType",
    "old",
    "pkNames",
    "sql",
    "sqlType",
    "table",
    "ts",
    "type",
]


def _workload(mariadb: Any) -> None:
    mariadb.execute("CREATE TABLE orders (id INT PRIMARY KEY, status VARCHAR(12), total DECIMAL(10,2))")
    mariadb.execute(
        "CREATE TABLE items (order_id INT, line INT, sku VARCHAR(10), qty INT, PRIMARY KEY (order_id, line))"
    )
    mariadb.execute("INSERT INTO orders SELECT seq, 'new', seq * 1.5 FROM seq_1_to_30")
    mariadb.execute("INSERT INTO items SELECT seq % 30 + 1, seq, CONCAT('s', seq), seq FROM seq_1_to_60")
    mariadb.execute("UPDATE orders SET status = 'paid' WHERE id <= 10")  # one event, rows over the partitions
    mariadb.execute("UPDATE orders SET total = total + 1, status = 'x' WHERE id BETWEEN 11 AND 14")
    mariadb.execute("DELETE FROM items WHERE qty > 50")
    mariadb.execute("UPDATE orders SET id = 100 WHERE id = 3")  # a key change
    mariadb.execute("UPDATE items SET line = line + 1000 WHERE order_id = 2")  # key changes of a compound key
    mariadb.execute("ALTER TABLE orders ADD COLUMN note VARCHAR(10)")
    mariadb.execute("UPDATE orders SET note = 'late' WHERE id % 4 = 0")
    mariadb.execute("INSERT INTO orders VALUES (200, 'new', 0.5, 'x\"y\\\\z')")


def _source(spark: Any, mariadb: Any, start: Any, tmp_path: Path, **options: str) -> Any:
    reader = (
        spark.readStream.format("canal")
        .option("destination", "mq")
        .option("master.address", mariadb.address)
        .option("master.user", mariadb.user)
        .option("master.password", mariadb.password)
        .option("master.journal.name", start[0])
        .option("master.position", str(start[1]))
        .option("filter.regex", rf"{mariadb.database}\..*")
        .option("spool.dir", str(tmp_path / "spool"))
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _to_kafka(df: Any, kafka: Any, checkpoint: Path) -> None:
    query = (
        df.writeStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def _select(mariadb: Any, table: str) -> dict[tuple[str | None, ...], dict[str, str | None]]:
    """The table as canal text rows by key (the test's tables hold integers, text and decimals only)."""
    from canal.spark.testing import primary_key, select_all

    with mariadb.connect() as conn:
        key = primary_key(conn, mariadb.database, table)
        rows = select_all(conn, mariadb.database, table)
    text = [{k: None if v is None else str(v) for k, v in row.items()} for row in rows]
    return {tuple(row[k] for k in key): row for row in text}


def _filled(rows: dict[Any, dict[str, str | None]], columns: list[str]) -> dict[Any, dict[str, str | None]]:
    """Replayed rows with every column (a column added by DDL is NULL in a row no change carried since)."""
    return {key: {c: row.get(c) for c in columns} for key, row in rows.items()}


def test_canal_flat_messages_routed_by_canals_keys(spark: Any, mariadb: Any, kafka_server: Any, tmp_path: Path) -> None:
    needs_jars()
    db = mariadb.database
    start = mariadb.execute("SHOW MASTER STATUS")[0][:2]
    _workload(mariadb)
    orders_topic, default_topic = f"{db}-orders", f"{db}-default"
    routing = {
        "topic": default_topic,
        "dynamicTopic": f"{orders_topic}:{db}\\.orders,{db}",  # orders to their topic, the rest to the db's name
        "partitionHash": f"{db}\\.orders:$pk$,{db}\\.items:order_id",
        "partitionsNum": 3,
    }
    topics = {orders_topic: 3, db: 3, default_topic: 1}
    for name, partitions in topics.items():
        kafka_server.create_topic(name, partitions)
    options = {f"canal.mq.{k}": str(v) for k, v in routing.items()}
    _to_kafka(_source(spark, mariadb, start, tmp_path, messages="canal", **options), kafka_server, tmp_path / "ck")

    records = read_topics(kafka_server.bootstrap, list(topics))
    assert len({r.key for r in records}) == len(records)  # one write: every key once
    # the binlog range the source stamps on a micro-batch's first and last entries (canal.lake.forms.ranges) is the
    # mirror's, not a message's
    assert not [r for r in records if b"RANGE_" in r.value]
    by_topic = {t: sum(r.topic == t for r in records) for t in topics}
    assert by_topic[orders_topic] and by_topic[db] and not by_topic[default_topic], (by_topic, records[:3])
    assert {r.partition for r in records if r.topic == orders_topic} == {0, 1, 2}  # hashed over the three

    # canal's own classes: each message is one canal's producer writes, where canal's producer routes it
    checked = canal_check(kafka_server.bootstrap, list(topics), **routing)
    assert len(checked) == len(records)
    values = {(r.topic, r.partition, r.offset): r.value.decode() for r in records}
    wrong = [(values[c["topic"], c["partition"], c["offset"]], c["canal"]) for c in checked if not c["same"]]
    assert not wrong, f"{len(wrong)} messages differ from canal's: ours, canal's:\n" + "\n".join(wrong[0])
    misrouted = [
        c for c in checked if c["topic_expected"] != [c["topic"]] or c["partitions_expected"] != [c["partition"]]
    ]
    assert not misrouted, misrouted[:3]
    assert {c["type"] for c in checked} >= {"INSERT", "UPDATE", "DELETE", "CREATE", "ALTER"}

    # canal's producer writes the fields in this order and each row's columns in the table's order (LinkedHashMap),
    # which the structural comparison above does not see
    for record in records:
        message = record.json()
        assert list(message) == FLAT_FIELDS
        columns = list(message["mysqlType"] or {})
        for row in (message["data"] or []) + (message["old"] or []):
            assert list(row) == [c for c in columns if c in row]

    # a consumer replaying the messages in binlog order ends at SELECT (in each partition's order alone it would
    # not: the key change 3 -> 100 went to 100's partition, the row's INSERT to 3's)
    replayed = replay_flat(by_position(records))
    for table in ("orders", "items"):
        want = _select(mariadb, table)
        columns = list(next(iter(want.values())))
        assert _filled(replayed[f"{db}.{table}"], columns) == want, table


def test_debezium_envelopes_replay_to_select(spark: Any, mariadb: Any, kafka_server: Any, tmp_path: Path) -> None:
    """Debezium's envelopes, a topic per table, applied by message key as a JDBC sink or a compacted topic does
    (:func:`mq_check.replay_debezium`) end at SELECT: a delete is followed by a tombstone -- a Kafka record of null
    value, as Spark's sink writes a null ``value`` --, and a key change is a delete of the old key, its tombstone and
    a create of the new one (an update keyed by the new key alone left the old key's row)."""
    needs_jars()
    import json

    db = mariadb.database
    start = mariadb.execute("SHOW MASTER STATUS")[0][:2]
    _workload(mariadb)
    mariadb.execute("UPDATE orders SET id = id + 1000 WHERE id BETWEEN 20 AND 22")  # a multi-row key change
    mariadb.execute("DELETE FROM orders WHERE id = 1021")  # a moved row deleted
    with mariadb.connect() as conn, conn.cursor() as cur:  # a key change and a delete of the moved row, one transaction
        cur.execute("UPDATE orders SET id = 300 WHERE id = 5")
        cur.execute("DELETE FROM orders WHERE id = 300")
        conn.commit()
    mariadb.execute("UPDATE orders SET id = id - 1 WHERE id BETWEEN 23 AND 25 ORDER BY id")  # each onto a vacated key
    mariadb.execute("INSERT INTO orders (id, status) VALUES (6, 'dup') ON DUPLICATE KEY UPDATE id = 600")
    mariadb.execute("REPLACE INTO orders (id, status, total) VALUES (12, 'replaced', 2)")
    topics = {table: f"{db}-dbz-{table}" for table in ("orders", "items")}
    for topic in topics.values():
        kafka_server.create_topic(topic, 1)
    dynamic = ",".join(f"{topic}:{db}\\.{table}" for table, topic in topics.items())
    options = {"canal.mq.topic": f"{db}-dbz", "canal.mq.dynamicTopic": dynamic}
    _to_kafka(_source(spark, mariadb, start, tmp_path, messages="debezium", **options), kafka_server, tmp_path / "ck")
    records = read_topics(kafka_server.bootstrap, list(topics.values()))
    events = [r.json() for r in records if r.value is not None]
    assert not [r for r in records if r.value is not None and b"RANGE_" in r.value]  # the binlog range stays out
    assert {e["op"] for e in events} == {"c", "u", "d"}
    assert all(e["source"]["file"] and e["source"]["pos"] for e in events)
    for topic in topics.values():  # a tombstone (a record of null value) right after each delete, and only there
        mine = [r for r in records if r.topic == topic]
        deleted = [n for n, r in enumerate(mine) if r.value is not None and r.json()["op"] == "d"]
        assert [n for n, r in enumerate(mine) if r.value is None] == [n + 1 for n in deleted] and deleted
        assert all(mine[n + 1].key == mine[n].key for n in deleted)
    # key changes: 3 -> 100, 20..22 -> 1020..1022, 5 -> 300, 23 -> 22, 24 -> 23, 25 -> 24, 6 -> 600, and items' lines of
    # order 2: a delete of the old key, a create; and the deletes of 1021 and 300
    assert sum(e["op"] == "d" and e["source"]["table"] == "orders" for e in events) == 9 + 2
    replayed = replay_debezium(records)
    for table, topic in topics.items():
        want = {
            json.dumps({k: int(v) for k, v in zip(key_names, key, strict=True)}, sort_keys=True): row
            for key_names in [list(json.loads(next(r.key for r in records if r.topic == topic)))]
            for key, row in _select(mariadb, table).items()
        }
        got = {key: {c: None if v is None else str(v) for c, v in row.items()} for key, row in replayed[topic].items()}
        assert {k: {c: r.get(c) for c in want.get(k, r)} for k, r in got.items()} == want, table


def test_a_query_stopped_mid_write_writes_some_messages_twice_and_keys_drop_them(
    spark: Any, mariadb: Any, kafka_server: Any, tmp_path: Path
) -> None:
    """A query stopped in the middle of a micro-batch's write (its tasks interrupted: the micro-batch is not
    committed), then started again from its checkpoint: it writes the micro-batch again, read back from the spool,
    and the consumer drops what was written twice by message key. (A driver killed by SIGKILL and restarted from its
    checkpoint in another process: tests/test_spark_s3a_checkpoint.py.)"""
    needs_jars()
    from confluent_kafka import Consumer, TopicPartition

    db = mariadb.database
    start = mariadb.execute("SHOW MASTER STATUS")[0][:2]
    mariadb.execute("CREATE TABLE orders (id INT PRIMARY KEY, status VARCHAR(12), total DECIMAL(10,2))")
    with mariadb.connect() as conn, conn.cursor() as cur:
        for i in range(1, 301):  # 300 transactions: 300 messages
            cur.execute("INSERT INTO orders VALUES (%s, 'new', %s)", (i, i / 4))
    mariadb.execute("UPDATE orders SET status = 'done' WHERE id % 5 = 0")
    kafka_server.create_topic("killed", 1)
    options = {"messages": "canal", "canal.mq.topic": "killed"}
    checkpoint = tmp_path / "checkpoint"

    def written() -> int:
        consumer = Consumer({"bootstrap.servers": kafka_server.bootstrap, "group.id": "watch"})
        try:
            return int(consumer.get_watermark_offsets(TopicPartition("killed", 0), timeout=30)[1])
        finally:
            consumer.close()

    def slowly(batches: Any) -> Any:  # the test's hand on the clock: messages reach the sink 20 ms apart
        import time

        for batch in batches:
            for i in range(batch.num_rows):
                time.sleep(0.02)
                yield batch.slice(i, 1)

    source = _source(spark, mariadb, start, tmp_path, **options)
    query = (
        source.mapInArrow(slowly, source.schema)
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka_server.bootstrap)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        deadline = time.monotonic() + 300
        while written() < 40:  # the micro-batch is being written
            assert query.isActive, query.exception()
            assert time.monotonic() < deadline, "the query wrote nothing"
            time.sleep(0.2)
    finally:
        query.stop()
    first = written()
    assert 40 <= first < 301  # part of the micro-batch, not all of it
    assert not (checkpoint / "commits" / "0").exists()
    _to_kafka(_source(spark, mariadb, start, tmp_path, **options), kafka_server, checkpoint)  # the restart

    records = read_topics(kafka_server.bootstrap, ["killed"])
    kept = unique(records)
    assert len(records) > len(kept)  # the restart wrote what the stopped query had written once more
    assert len(records) - len(kept) >= 40
    replayed = replay_flat(kept)
    assert replayed[f"{db}.orders"] == _select(mariadb, "orders")
