"""Reading back what the ``canal`` source's messages put on Kafka: every message of some topics (a Python consumer,
``confluent-kafka``), their replay into tables as a consumer of canal's FlatMessage or Debezium's envelope applies
them -- dropping what a restart wrote twice, by message key --, and canal 1.1.7's own MQ classes reading the same
messages (``jars/canal-mq``: ``io.pycanal.jars.CanalMqCheck``)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Sequence
from typing import Any

import attrs


@attrs.frozen
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None  # None: a tombstone (Debezium's, after a delete)

    def json(self) -> Any:
        assert self.value is not None, f"a tombstone at {self.topic}:{self.partition}:{self.offset}"
        return json.loads(self.value)


def read_topics(bootstrap: str, topics: Sequence[str], timeout: float = 60.0) -> list[Record]:
    """Every message of ``topics`` from their start to their end now, partition by partition in offset order."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "pycanal-check", "enable.auto.commit": False})
    try:
        metadata = consumer.list_topics(timeout=timeout)
        parts = [TopicPartition(t, p) for t in topics for p in metadata.topics[t].partitions]
        ends = {(tp.topic, tp.partition): consumer.get_watermark_offsets(tp, timeout=timeout)[1] for tp in parts}
        wanted = {tp: end for tp, end in ends.items() if end > 0}
        consumer.assign([TopicPartition(t, p, 0) for (t, p) in wanted])
        out: list[Record] = []
        while wanted:
            message = consumer.poll(timeout)
            if message is None:
                raise AssertionError(f"no message within {timeout} s; still to read: {wanted}")
            if message.error():
                raise AssertionError(f"Kafka error: {message.error()}")
            where = (message.topic(), message.partition())
            out.append(Record(where[0], where[1], message.offset(), message.key(), message.value()))
            if message.offset() + 1 >= wanted.get(where, 0):
                wanted.pop(where, None)
        return out
    finally:
        consumer.close()


def by_position(records: Iterable[Record]) -> list[Record]:
    """canal messages in binlog order, from their keys (``FILE:OFFSET:BATCH:N``): the order a consumer of several
    partitions applies them in when a key may move between partitions (an UPDATE of a hashed key goes to the new
    key's partition, its row's INSERT was in the old key's)."""

    def place(record: Record) -> tuple[str, int, int, int]:
        assert record.key is not None
        file, offset, batch, n = record.key.decode().rsplit(":", 3)
        return file, int(offset), int(batch), int(n)

    return sorted(records, key=place)


def unique(records: Iterable[Record]) -> list[Record]:
    """The records with the duplicates a restart wrote dropped: a key seen before is applied already."""
    seen: set[bytes | None] = set()
    out = []
    for record in records:
        if record.key in seen:
            continue
        seen.add(record.key)
        out.append(record)
    return out


def replay_flat(records: Iterable[Record]) -> dict[str, dict[tuple[str | None, ...], dict[str, str | None]]]:
    """canal FlatMessages applied in order: ``{"db.table": {key: row}}`` (rows as canal text). An UPDATE whose
    ``old`` holds a key column moved the row; a DDL that drops or creates a table forgets its rows."""
    tables: dict[str, dict[tuple[str | None, ...], dict[str, str | None]]] = {}
    for record in records:
        message = record.json()
        name = f"{message['database']}.{message['table']}"
        if message["isDdl"]:
            if message["type"] in ("CREATE", "ERASE", "TRUNCATE"):
                tables.pop(name, None)
            continue
        rows = tables.setdefault(name, {})
        keys = message["pkNames"] or []
        for n, row in enumerate(message["data"] or []):
            key = tuple(row.get(k) for k in keys)
            if message["type"] == "DELETE":
                rows.pop(key, None)
                continue
            if message["type"] == "UPDATE":
                old = message["old"][n]
                before = tuple(old.get(k, row.get(k)) for k in keys)
                previous = rows.pop(before, {})
                rows[key] = {**previous, **row}
            else:
                rows[key] = dict(row)
    return tables


def replay_debezium(records: Iterable[Record]) -> dict[str, dict[str, dict[str, Any]]]:
    """Debezium change events applied in order as a JDBC sink (upsert and delete by key) or a compacted topic keeps
    them: by topic and message KEY only -- ``op: d`` deletes its key, a tombstone (a null value) deletes its key,
    anything else upserts its key with its ``after`` image. ``{topic: {key JSON, sorted: after}}``. The images'
    own key columns are not read: a consumer that gets an update keyed by the new key alone keeps the old key's
    row."""
    tables: dict[str, dict[str, dict[str, Any]]] = {}
    for record in records:
        assert record.key is not None, f"a record without a key (a table without a primary key): {record}"
        key = json.dumps(json.loads(record.key), sort_keys=True)
        rows = tables.setdefault(record.topic, {})
        if record.value is None:
            rows.pop(key, None)
            continue
        event = record.json()
        if event["op"] == "d":
            rows.pop(key, None)
        else:
            rows[key] = event["after"]
    return tables


def canal_check(bootstrap: str, topics: Sequence[str], **routing: Any) -> list[dict[str, Any]]:
    """canal 1.1.7's classes reading every message of ``topics``: per message, whether canal's FlatMessage gives its
    bytes back (``same``), and where canal's producer routes it (``topic_expected``, ``partitions_expected``)."""
    from canal.testing import jars

    settings = {"bootstrap": bootstrap, "topics": list(topics), **routing}
    done = subprocess.run(
        [
            "java",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-cp",
            jars.classpath("canal-mq"),
            "io.pycanal.jars.CanalMqCheck",
            json.dumps(settings),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines and lines[-1]["kind"] == "end", done.stdout[-2000:] + done.stderr[-2000:]
    return lines[:-1]
