"""The ``canal`` source's options read: the instance config they name (:func:`config_from_options`, with the
source's :data:`STORE_SIZE`), the object store's options (``spool.storage.*``), the reader's own options (the caps of
a micro-batch, :class:`ReadCap`; ``spool.shared``; ``snapshot.partitions``), and the connection to the master they
name that executors open (:class:`SourceConnector`, picklable). The options themselves are declared in
:mod:`canal.spark.options`; :mod:`canal.spark.source` reads with what this gives.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, TypeVar

import attrs

from canal.config import SSL_PROPERTY_KEYS, InstanceConfig, MqConfig, format_properties, parse_bool
from canal.errors import CanalError
from canal.secrets import is_secret_key, read_named
from canal.spark.options import CONNECTION_OPTIONS, IMAGE_FORMS, READER_DEFAULTS, READER_OPTIONS

__all__ = [
    "STORAGE_PREFIX",
    "STORE_SIZE",
    "ReadCap",
    "SourceConnector",
    "SparkSourceError",
    "cap_option",
    "config_from_options",
    "executor_snapshot",
    "image_form",
    "options_key",
    "reader_option",
    "rows_schema",
    "rows_schema_ddl",
    "spool_shared",
    "spooled_schema",
    "storage_options",
]

_SHORT_KEYS = {o.name: o.canal_key for o in CONNECTION_OPTIONS if o.canal_key is not None}
# Spark lower-cases option names; canal's camelCase keys are restored from this table
_CAMEL_KEYS = {
    k.lower(): k
    for k in (
        *SSL_PROPERTY_KEYS,
        "canal.instance.connectionCharset",
        "canal.instance.dbPassword",
        "canal.instance.dbUsername",
        "canal.instance.defaultDatabaseName",
        "canal.instance.detecting.heartbeatHaEnable",
        "canal.instance.enableDruid",
        "canal.instance.fallbackIntervalInSeconds",
        "canal.instance.memory.rawEntry",
        "canal.instance.mysql.slaveId",
        "canal.instance.network.soTimeout",
        "canal.instance.pwdPublicKey",
        "canal.serverMode",
        "canal.withoutNetty",
        "canal.zkServers",
        *(field.metadata["canal_key"] for field in attrs.fields(MqConfig)),  # canal.mq.dynamicTopic, ...
    )
}
_READER_KEYS = frozenset(o.name.lower() for o in READER_OPTIONS)
SOURCE_OPTION: Final = "canal source option"

_T = TypeVar("_T")


@attrs.frozen
class ReadCap:
    """The most a micro-batch may hold: change rows (``maxRowsPerTrigger``) and binlog bytes
    (``maxBytesPerTrigger``); None: no cap. A batch holds at least one entry whatever the cap."""

    rows: int | None = None
    bytes: int | None = None

    def exceeded(self, rows: int, nbytes: int) -> bool:
        return (self.rows is not None and rows > self.rows) or (self.bytes is not None and nbytes > self.bytes)


class SparkSourceError(CanalError):
    """The canal Spark source cannot do what Spark asked (bad options, a missing spool file)."""


STORE_SIZE: Final = 65536
"""The source's default ``canal.instance.memory.buffer.size``, four times canal's 16384 (16 MB of binlog events).
A micro-batch prepared ahead holds what the instance decoded while Spark ran the one before, and its entries stay in
the store until the batch is spooled, so the store bounds the micro-batch; each micro-batch also costs Spark a fixed
0.3-0.5 s here. With canal's 16 MB, steady micro-batches of 1 KB rows held 13,000-40,000 rows (updates, 3 KB of
binlog a row: 5,461); with 64 MB, 60,000-150,000, at about 230 MB more memory in the reader's process. The rows never
pass through the driver's JVM as rows: a task reads them from the spool (``spool.shared``) or gets them as Arrow
bytes inside its input partition (:class:`~canal.spark.spool.InlineRows`). A ``properties`` file or option sets
another."""


def config_from_options(options: Mapping[str, str]) -> InstanceConfig:
    """The instance config the source options name (with :data:`STORE_SIZE` unless they set the store's size). A
    secret option given by name (``master.password.env``, ``master.password.file``, ...: :mod:`canal.secrets`) is
    read here, in this process; the object store's (``spool.storage.*``) where the store is opened."""
    props: dict[str, str] = {}
    instance_options = {k: v for k, v in options.items() if not k.lower().startswith(STORAGE_PREFIX)}
    for key, value in read_named(instance_options, where=SOURCE_OPTION, may_name=is_secret_key).items():
        k = key.lower()
        if k in _READER_KEYS:
            continue
        if k in _SHORT_KEYS:
            props[_SHORT_KEYS[k]] = value
            if k == "meta.dir":
                props.setdefault("pycanal.meta.mode", "file")
        elif k.startswith(("canal.", "pycanal.")):
            props[_CAMEL_KEYS.get(k, key if key.lower() != key else k)] = value
        else:
            raise SparkSourceError(f"unknown canal source option {key!r}")
    text = format_properties(props)  # each value as given: its leading blanks too (a secret read from a file)
    # the keys after it set another
    default = f"canal.instance.memory.buffer.size={STORE_SIZE}\n"
    path = options.get("properties")
    if path:
        base = Path(path).read_text()
        text = default + base + "\n" + text
        return InstanceConfig.from_properties(text, destination=props.get("canal.instance.destination"))
    return InstanceConfig.from_properties(default + text)


STORAGE_PREFIX: Final = "spool.storage."
"""Options named ``spool.storage.<key>`` are the object store's (``deltalake``'s ``storage_options`` keys)."""


def storage_options(options: Mapping[str, str]) -> dict[str, str]:
    """The object-store options among the source's (``spool.storage.*``), by their key."""
    return {k[len(STORAGE_PREFIX) :]: v for k, v in options.items() if k.lower().startswith(STORAGE_PREFIX)}


def options_key(options: Mapping[str, str]) -> str:
    """The key of a set of options (names without case, in any order): one embedded instance per key."""
    return json.dumps(sorted((k.lower(), v) for k, v in options.items()))


def executor_snapshot(options: Mapping[str, str]) -> bool:
    """Whether the source options ask for snapshot ranges read on executors (``snapshot.partitions``)."""
    return any(k.lower() == "snapshot.partitions" for k in options)


MESSAGES_PREFIX: Final = "messages."
"""The rows' form with the ``messages`` option: ``messages.canal`` or ``messages.debezium``
(:mod:`canal.lake.forms.flat_messages`)."""


TOMBSTONES: Final = "tombstones.on.delete"
"""Debezium's property of that name, a source option with ``messages = debezium``: a tombstone after each delete."""


def image_form(options: Mapping[str, str]) -> str:
    """The ``images`` option: ``json``, ``variant`` (:mod:`canal.lake.forms.variant_changes`) or ``packed``
    (:mod:`canal.lake.forms.packed`); with the ``messages`` option, ``messages.canal`` or ``messages.debezium``
    (MQ messages, :mod:`canal.lake.forms.flat_messages`)."""
    from canal.lake.forms.flat_messages import MESSAGE_FORMS

    lower = {k.lower(): v for k, v in options.items()}
    messages = lower.get("messages")
    if messages is not None:
        form = messages.strip().lower()
        if form not in MESSAGE_FORMS:
            raise SparkSourceError(f"canal source option messages = {messages!r}: expected canal or debezium")
        if "images" in lower:
            raise SparkSourceError(
                "canal source options messages and images exclude each other: messages are rows of their own "
                "(topic, partition, key, value), not change rows"
            )
        return MESSAGES_PREFIX + form
    text = lower.get("images", READER_DEFAULTS["images"]).strip().lower()
    if text not in IMAGE_FORMS:
        raise SparkSourceError(
            f"canal source option images = {lower.get('images')!r}: expected json, variant or packed"
        )
    return text


def message_maker(images: str, config: InstanceConfig, lower: Mapping[str, str]) -> Any:
    """The :class:`~canal.lake.forms.flat_messages.MessageMaker` of the form ``images`` names with the ``messages``
    option, routed by the config's ``canal.mq.*`` keys, with Debezium's tombstones as the source's options ``lower``
    (names lower-cased) say (``tombstones.on.delete``); None for change rows."""
    from canal.lake.forms.flat_messages import MessageMaker
    from canal.lake.forms.mq_routing import Routing

    if TOMBSTONES in lower and images != MESSAGES_PREFIX + "debezium":
        made = "canal's FlatMessages" if images.startswith(MESSAGES_PREFIX) else "change rows"
        raise SparkSourceError(
            f"canal source option {TOMBSTONES} is Debezium's and takes messages = debezium: {made} have no "
            "tombstones (a delete is a message or row of its own)"
        )
    if not images.startswith(MESSAGES_PREFIX):
        return None
    if not config.mq.flat_message:
        raise SparkSourceError(
            "canal.mq.flatMessage = false asks for canal's protobuf messages, which the canal source does not make: "
            "its messages option makes canal's FlatMessage JSON (canal.mq.flatMessage=true)"
        )
    form = images.removeprefix(MESSAGES_PREFIX)
    if form == "debezium" and config.mq.partition_hash:
        raise SparkSourceError(
            "canal.mq.partitionHash spreads canal's FlatMessages over partitions; Debezium's envelopes go to "
            "canal.mq.partition, each: leave canal.mq.partitionHash out with messages = debezium"
        )
    tombstones = reader_option(lower, TOMBSTONES, READER_DEFAULTS[TOMBSTONES], parse_bool)
    return MessageMaker(form, Routing(config.mq), config.destination, tombstones=tombstones)


def rows_schema(images: str) -> Any:
    """The Arrow schema of the rows the source gives in the ``images`` form (:func:`image_form`)."""
    from canal.lake.forms.changes import arrow_schema
    from canal.lake.forms.flat_messages import message_schema
    from canal.lake.forms.packed import packed_schema
    from canal.lake.forms.variant_changes import variant_arrow_schema

    if images.startswith(MESSAGES_PREFIX):
        return message_schema()
    return {"variant": variant_arrow_schema, "packed": packed_schema}.get(images, arrow_schema)()


def spooled_schema(images: str) -> Any:
    """The Arrow schema of the rows the source spools in the ``images`` form: :func:`rows_schema`, but for the
    ``messages`` option's plans, which its tasks make into messages (:mod:`canal.spark.message_rows`)."""
    from canal.spark.message_rows import plan_schema

    return plan_schema() if images.startswith(MESSAGES_PREFIX) else rows_schema(images)


def rows_schema_ddl(images: str) -> str:
    """:func:`rows_schema` in Spark's DDL (the source's schema)."""
    from canal.lake.forms.changes import CHANGE_SCHEMA_DDL
    from canal.lake.forms.flat_messages import MESSAGE_SCHEMA_DDL
    from canal.lake.forms.packed import PACKED_SCHEMA_DDL
    from canal.lake.forms.variant_changes import VARIANT_SCHEMA_DDL

    if images.startswith(MESSAGES_PREFIX):
        return MESSAGE_SCHEMA_DDL
    return {"variant": VARIANT_SCHEMA_DDL, "packed": PACKED_SCHEMA_DDL}.get(images, CHANGE_SCHEMA_DDL)


def spool_shared(options: Mapping[str, str]) -> bool:
    """Whether executors read the micro-batches' rows from the spool themselves (``spool.shared``, implied by
    ``snapshot.partitions``); otherwise the driver reads them and they travel inside the input partitions."""
    if executor_snapshot(options):
        return True
    lower = {k.lower(): v for k, v in options.items()}
    return reader_option(lower, "spool.shared", READER_DEFAULTS["spool.shared"], parse_bool)


class SourceConnector:
    """Opens a snapshot connection (conversions off) to the master the source options name; picklable, for
    executors. Its repr names the destination only: the options hold credentials."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self._options = dict(options)

    def __repr__(self) -> str:
        return f"SourceConnector(destination={config_from_options(self._options).destination!r})"

    def __call__(self) -> Any:
        from canal.parse.sources import source_factory

        config = config_from_options(self._options)
        source = source_factory(config)(config.master)
        connect = getattr(source, "snapshot_connection", None)
        if connect is None:
            raise SparkSourceError(f"snapshot.partitions reads tables over SQL: {type(source).__name__} cannot")
        return connect()


def cap_option(options: Mapping[str, str], name: str) -> int | None:
    """A micro-batch cap (Spark passes option names lower-cased; errors use the documented name); None if unset."""
    text = options.get(name.lower())
    return None if text is None else reader_option({name: text}, name, text, int)


def reader_option(
    options: Mapping[str, str], key: str, default: str, parse: Callable[[str], _T], *, zero: bool = False
) -> _T:
    """A reader option parsed by ``parse``; numbers must be positive (or, with ``zero``, 0). SparkSourceError names
    the option otherwise."""
    text = options.get(key, default).strip()
    try:
        value = parse(text)
    except ValueError:
        value = None
    if value is None or (
        not isinstance(value, bool) and isinstance(value, int | float) and not (value > 0 or (zero and value == 0))
    ):
        expected = "true or false" if parse is parse_bool else f"a positive {getattr(parse, '__name__', 'number')}"
        raise SparkSourceError(f"canal source option {key} = {text!r}: expected {expected}{' or 0' if zero else ''}")
    return value
