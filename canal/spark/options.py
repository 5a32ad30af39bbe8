"""The options of the ``canal`` Spark source, declared once: :mod:`canal.spark.source` and
:mod:`canal.spark.source_options` read their names and defaults from here, and the documentation's reference of the
source options is generated from here.

Options are strings, as Spark passes them (Spark lower-cases their names; the source matches them without case).
Besides the options below, any ``canal.*`` / ``pycanal.*`` key of ``instance.properties`` is passed through as that
key (e.g. ``pycanal.snapshot.mode``).
"""

from __future__ import annotations

from typing import Final

import attrs

__all__ = ["CONNECTION_OPTIONS", "IMAGES_PACKED", "IMAGE_FORMS", "READER_DEFAULTS", "READER_OPTIONS", "SourceOption"]

IMAGE_FORMS: Final = ("json", "variant", "packed")
"""The values of the ``images`` option: how change rows carry their images (:mod:`canal.lake.forms.variant_changes`), or
``packed``: typed batches packed for the mirror (:mod:`canal.lake.forms.packed`), not a row per change."""

IMAGES_PACKED: Final = "packed"
"""The ``images`` option's value of packed batches: the reader's typed batches, a few Spark rows a micro-batch."""


@attrs.frozen
class SourceOption:
    """One option of the ``canal`` source: its name, default (None: unset), what it does and, for a short name of an
    ``instance.properties`` key, that key."""

    name: str
    default: str | None
    description: str
    canal_key: str | None = None


CONNECTION_OPTIONS: Final[tuple[SourceOption, ...]] = (
    SourceOption("destination", None, "The destination's name.", "canal.instance.destination"),
    SourceOption("master.address", None, "The server, `host:port`.", "canal.instance.master.address"),
    SourceOption("master.user", None, "The capture user.", "canal.instance.dbUsername"),
    SourceOption("master.username", None, "The capture user (same as `master.user`).", "canal.instance.dbUsername"),
    SourceOption("master.password", None, "The capture user's password.", "canal.instance.dbPassword"),
    SourceOption("master.journal.name", None, "Start position: binlog file.", "canal.instance.master.journal.name"),
    SourceOption("master.position", None, "Start position: offset in that file.", "canal.instance.master.position"),
    SourceOption("master.timestamp", None, "Start position: ms since the epoch.", "canal.instance.master.timestamp"),
    SourceOption("master.gtid", None, "Start position: a GTID set.", "canal.instance.master.gtid"),
    SourceOption("filter.regex", None, "Tables to capture (canal's table filter).", "canal.instance.filter.regex"),
    SourceOption("filter.black.regex", None, "Tables to leave out.", "canal.instance.filter.black.regex"),
    SourceOption("meta.dir", None, "Directory of file meta (sets meta mode `file`).", "canal.file.data.dir"),
    SourceOption("slave.id", None, "Server id of the replica connection.", "canal.instance.mysql.slaveId"),
    SourceOption("zk.servers", None, "ZooKeeper hosts.", "canal.zkServers"),
    SourceOption("meta.mode", None, "Meta mode: memory, file, zookeeper, period-mixed.", "pycanal.meta.mode"),
)
"""Short names of ``instance.properties`` keys."""

READER_OPTIONS: Final[tuple[SourceOption, ...]] = (
    SourceOption("properties", None, "Path of an `instance.properties` the other options add to."),
    SourceOption(
        "spool.dir",
        None,
        "Where uncommitted micro-batches are spooled for an identical replay; put it next to the checkpoint. "
        "Required unless `meta.dir` is set (then `{meta.dir}/spark-spool`). A local path or an object-store URI "
        "(`s3://bucket/prefix`, `gs://`, `az://`, `abfss://`). With `spool.shared` it must be reachable from the "
        "executors, with `snapshot.partitions` also support hard links or renames that never replace (local "
        "file systems) or conditional writes (object stores).",
    ),
    SourceOption(
        "spool.storage.<key>",
        None,
        "Options of the object store `spool.dir` is in: the keys `deltalake` takes as `storage_options` "
        "(`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ALLOW_HTTP`, "
        "`GOOGLE_SERVICE_ACCOUNT`, `AZURE_STORAGE_ACCOUNT_NAME`, ...; any case). Where not given, the store's "
        "environment variables apply.",
    ),
    SourceOption(
        "<secret>.env",
        None,
        "Instead of an option that holds a secret, the name of an environment variable that holds it, read where "
        "the option is used (the reader's process, and the executors that open the spool or snapshot connections): "
        "`master.password.env`, `canal.instance.dbPassword.env`, the TLS key's password, `pycanal.zookeeper.auth`, "
        "any `spool.storage.<key>.env` (`spool.storage.AWS_SECRET_ACCESS_KEY.env`). The query's plan, and so Spark's "
        "event log, holds the name only. An unset or empty variable is a `SecretError` naming the option and the "
        "variable, never the secret.",
    ),
    SourceOption(
        "<secret>.file",
        None,
        "As `<secret>.env`, the path of a file that holds the secret (one line end at its end is dropped), read "
        "each time a connection or the store is opened.",
    ),
    SourceOption(
        "spool.shared",
        "false",
        "`spool.dir` is reachable from every executor at the same path (one machine, or a shared file system): a "
        "micro-batch's change rows are read by its task from the spool file instead of being read by the driver "
        "and sent to the task inside its input partition. Implied by `snapshot.partitions`. Default: "
        "`true` when `spool.dir` is in an object store or `canal.spark.register` was given a local-mode session "
        "(`spark.master` `local...`), else `false`.",
    ),
    SourceOption(
        "images",
        "json",
        "How rows carry their images (`keys`, `old_keys`, `before`, `after`): `json`, JSON objects of canal text "
        "(strings); or `variant`, Spark `VARIANT` values whose cells are typed (`after:qty::int`), built from the "
        "decoded values without text. `variant` refuses a value with no typed form (a zero date) with a typed error; "
        "PySpark 4.2's `DataFrame.toArrow` fails on its rows (a VARIANT column holding NULLs): read them with "
        "`canal.spark.to_arrow(df)`. Or `packed`, for a `DeltaMirror` only: each micro-batch is a few rows of typed "
        "batches packed in Arrow streams (`canal.lake.forms.packed`), not a row per change, so no change row crosses "
        "Spark's JVM -- the mirror's fastest path. Not with `snapshot.partitions`.",
    ),
    SourceOption(
        "messages",
        None,
        "Rows as MQ messages instead of change rows, for Spark's Kafka sink (`writeStream.format(\"kafka\")`): "
        "`canal`, canal's FlatMessage JSON as canal-server writes it with `canal.mq.flatMessage=true` (a message "
        "per row entry, or per entry and partition); `debezium`, Debezium's change-event envelope (a message per "
        "row; a key change is a delete and a create, a delete is followed by a tombstone: `tombstones.on.delete`). "
        "The rows are `topic`, `partition`, `key`, `value`, routed by canal's `canal.mq.topic`, "
        "`canal.mq.dynamicTopic`, `canal.mq.partition`, `canal.mq.partitionHash`, `canal.mq.partitionsNum` and "
        "`canal.mq.dynamicTopicPartitionNum` (given as options, or in the `properties` file). Not with `images` nor "
        "`snapshot.partitions`.",
    ),
    SourceOption(
        "tombstones.on.delete",
        "true",
        "With `messages=debezium`, as Debezium's property of that name: each delete's envelope is followed by a "
        "tombstone, a message of the same key and a null value, with which Kafka's log compaction drops the key "
        "(an update that changes a primary key is a delete of the old key, its tombstone, and a create of the new "
        "one, either way). `false`: no tombstones. Not with `messages=canal` nor without `messages`.",
    ),
    SourceOption(
        "batch.size",
        "4096",
        "What the reader asks the instance for at a time: in the store's MEMSIZE mode (the default) units of "
        "`canal.instance.memory.buffer.memunit` bytes of binlog events (4096: 4 MB), in ITEMSIZE mode entries.",
    ),
    SourceOption(
        "max.entries",
        "50000",
        "Entries per micro-batch at most (a snapshot entry counts its rows; at least one entry, and never a "
        "transaction's BEGIN alone, which moves no cursor: a micro-batch ending with it would end where it began).",
    ),
    SourceOption(
        "read.timeout",
        "0.5",
        "Seconds a read waits when nothing is there yet: for a full batch, or, once changes came, until the stream "
        "has been quiet for 0.1 s (a stream caught up with its server adds nothing more).",
    ),
    SourceOption(
        "prefetch",
        "true",
        "Prepare the next batch while Spark runs this one (it takes what the instance decodes until Spark asks for "
        "it; with images=packed, one that fills is followed by the next, two ahead at most), and read a "
        "micro-batch's snapshot ranges while Spark starts their tasks.",
    ),
    SourceOption(
        "reader.gc.threshold",
        "50000",
        "In the process Spark starts to run the reader (its streaming source's runner, which runs nothing else): "
        "the first threshold of Python's garbage collector (`gc.set_threshold`), set as the reader starts there, "
        "with the objects alive then frozen (`gc.freeze`). Decoding allocates a tuple per row image, and at Python's "
        "700 the collector took an eighth of decoding's time. `0` leaves the collector as it is; other processes' "
        "collectors are never touched (`canal.spark.runner_gc`).",
    ),
    SourceOption(
        "reader.log.level",
        "WARNING",
        "In the process Spark starts to run the reader: the level from which the `canal` logger's records go to its "
        "stderr, which Spark forwards to the driver's log (the Connect server's). `INFO` adds a line per "
        "micro-batch: its changes by type, its binlog range and its lag (`canal.spark.progress`).",
    ),
    SourceOption(
        "maxRowsPerTrigger",
        None,
        "Cap of change rows per micro-batch (whole binlog events; as max.entries, at least one).",
    ),
    SourceOption(
        "maxBytesPerTrigger", None, "Cap of binlog bytes per micro-batch (whole events; as max.entries, at least one)."
    ),
    SourceOption(
        "snapshot.partitions",
        None,
        "Snapshot key ranges per micro-batch read by executors (at most 512); snapshot mode `initial` or `never`.",
    ),
    SourceOption("snapshot.partition.rows", "100000", "Rows per snapshot key range (with `snapshot.partitions`)."),
    SourceOption(
        "metrics.port",
        None,
        "Serve Prometheus metrics from the process that runs the reader (Spark's `python_streaming_source_runner` "
        "of the query, on the driver's host; over Spark Connect, the server's): the instance's `canal_instance_*` "
        "series and the micro-batches' changes, `canal_source_*` (`canal.spark.progress`). Each query its own port; "
        "one that is taken fails the query's first read.",
    ),
    SourceOption("metrics.address", "127.0.0.1", "The address `metrics.port` listens on."),
    SourceOption("path", None, "Ignored (Spark's `load(path)`)."),
)
"""Options of the reader itself (not passed to the instance config)."""

READER_DEFAULTS: Final[dict[str, str]] = {o.name: o.default for o in READER_OPTIONS if o.default is not None}
"""Default text of each reader option that has one."""
