"""One destination's configuration (:class:`InstanceConfig`) and its loading from ``instance.properties``."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from canal.config.fields import (
    _MYSQL_CHARSETS,
    DEFAULT_FILTER_REGEX,
    ZK_AUTH_KEY,
    _bool,
    _check,
    _FieldError,
    _is_int,
    _mask_repr,
    _non_negative_number,
    _opt_strip,
    _positive_int,
    _redacted,
    _str,
    _to_charset,
    _to_path_str,
    _validate_destination,
    _validate_meta_dir,
    _validate_zk,
    canal_key,
    keyed,
)
from canal.config.keys import (
    _CREDENTIAL_SPEC,
    _DETECTING_SPEC,
    _FLAGS_SPEC,
    _MQ_SPEC,
    _MS,
    _RETRY_SPEC,
    _SCHEMA_HISTORY_SPEC,
    _SNAPSHOT_SPEC,
    _STORE_SPEC,
    _T,
    _build,
    _fmt_ms,
    _format_fields,
    _format_ssl,
    _key,
    _key_names,
    _master_spec,
    _meta_mode_from_xml,
    _parse_bool_or_error,
    _Props,
    _read_fields,
    _read_source,
    _report_keys,
    _resolve_dir,
    _Spec,
    _spec_of,
    _ssl_from_props,
)
from canal.config.mq import MqConfig
from canal.config.properties import format_properties, parse_properties
from canal.config.server import ServerConfig, _to_tuple
from canal.config.settings import (
    DetectingConfig,
    FilterFlags,
    HealMode,
    MasterConfig,
    MetaMode,
    RetryConfig,
    SchemaHistoryConfig,
    SnapshotConfig,
    StoreConfig,
    ZkAuth,
    _enum_converter,
    _to_meta_mode,
    to_heal_mode,
    to_zk_auth,
)
from canal.errors import ConfigError
from canal.filter import FieldFilter, TableFilters
from canal.log import destination_logger

logger = logging.getLogger(__name__)


@keyed
@attrs.frozen(slots=True)
class InstanceConfig:
    """Everything one destination needs: source, filters, store, meta and parser policy.

    ``filter_regex``/``black_regex`` use canal's table filter syntax and ``field_filter``/``black_field_filter``
    canal's field filter syntax (both implemented in :mod:`canal.filter`). Both are checked on construction;
    the compiled forms are :attr:`table_filters` and :attr:`field_filters`.

    ``meta_mode`` ``file`` needs ``meta_dir`` (canal's ``canal.file.data.dir``: the file meta manager keeps
    ``{meta_dir}/{destination}/meta.dat``); ``zookeeper`` and ``period-mixed`` need ``zk_hosts``. ``flush_period_s``
    is how often the file and period-mixed managers persist; 0 writes through (an ack returns once its cursor is
    persisted, so a crash never redelivers an acked batch). ``slave_id`` None lets the parser pick one.
    """

    destination: str = attrs.field(
        validator=_validate_destination, metadata=canal_key("canal.instance.destination", "str", custom=True)
    )
    """The destination's name (a ZooKeeper node and a directory name)."""
    master: MasterConfig = attrs.field(
        validator=_check(lambda v: isinstance(v, MasterConfig), "must be a MasterConfig")
    )
    """The server to capture from."""
    standby: MasterConfig | None = attrs.field(
        default=None, validator=_check(lambda v: v is None or isinstance(v, MasterConfig), "must be a MasterConfig")
    )
    """The standby server a detecting switch or a failover moves to (keys `canal.instance.standby.*`)."""
    slave_id: int | None = attrs.field(
        default=None,
        validator=_check(lambda v: v is None or (_is_int(v) and 0 < v < 2**32), "must be None or in 1..4294967295"),
        metadata=canal_key("canal.instance.mysql.slaveId", "slave_id"),
    )
    """Server id the replica connection uses (None: the parser picks one)."""
    charset: str = attrs.field(
        default="utf8mb4",
        converter=_to_charset,
        validator=_check(lambda v: v in _MYSQL_CHARSETS, "must be a MySQL character set name, e.g. utf8mb4"),
        metadata=canal_key("canal.instance.connectionCharset", "str"),
    )
    """Connection character set (MySQL names; Java names such as UTF-8 are converted)."""
    gtid_mode: bool = attrs.field(default=False, validator=_bool, metadata=canal_key("canal.instance.gtidon", "bool"))
    """Start and keep positions by GTID set."""
    filter_regex: str = attrs.field(
        default=DEFAULT_FILTER_REGEX, validator=_str, metadata=canal_key("canal.instance.filter.regex", "str")
    )
    """Tables to capture: canal's table filter syntax, comma-separated regexes of `schema.table`."""
    black_regex: str = attrs.field(
        default="", validator=_str, metadata=canal_key("canal.instance.filter.black.regex", "str")
    )
    """Tables to leave out, same syntax."""
    field_filter: str = attrs.field(
        default="", validator=_str, metadata=canal_key("canal.instance.filter.field", "str")
    )
    """Columns to keep per table, canal's field filter syntax (`db.table:col1/col2`)."""
    black_field_filter: str = attrs.field(
        default="", validator=_str, metadata=canal_key("canal.instance.filter.black.field", "str")
    )
    """Columns to drop per table, same syntax."""
    filter_flags: FilterFlags = attrs.field(
        factory=FilterFlags, validator=_check(lambda v: isinstance(v, FilterFlags), "must be a FilterFlags")
    )
    """canal's event filter switches (FilterFlags)."""
    store: StoreConfig = attrs.field(
        factory=StoreConfig, validator=_check(lambda v: isinstance(v, StoreConfig), "must be a StoreConfig")
    )
    """The ring-buffer store (StoreConfig)."""
    meta_mode: MetaMode = attrs.field(default=MetaMode.MEMORY, converter=_to_meta_mode)
    """Where cursors, subscriptions and batch marks live: memory, file (needs `meta_dir`), zookeeper or period-mixed
    (need `zk_hosts`)."""
    meta_dir: str | None = attrs.field(
        default=None,
        converter=_to_path_str,
        validator=_validate_meta_dir,
        metadata=canal_key(_key(ServerConfig, "file_data_dir"), "str", custom=True),
    )
    """Directory of file meta: `{meta_dir}/{destination}/meta.dat`."""
    zk_hosts: str | None = attrs.field(
        default=None,
        converter=_opt_strip,
        validator=_validate_zk,
        metadata=canal_key(_key(ServerConfig, "zk_hosts"), "str", custom=True),
    )
    """ZooKeeper hosts for zookeeper / period-mixed meta."""
    # ZooKeeper authentication ("digest", "user:password"): the session authenticates and pycanal's nodes get an ACL
    # (canal.meta.zkclient); key pycanal.zookeeper.auth = digest:user:password. Never shown.
    zk_auth: ZkAuth | None = attrs.field(
        default=None,
        converter=to_zk_auth,
        repr=_mask_repr,
        metadata=canal_key(ZK_AUTH_KEY, "str", custom=True, secret=True),
    )
    """ZooKeeper authentication (`digest:user:password` in the key); never shown."""
    flush_period_s: float = attrs.field(default=1.0, validator=_non_negative_number)
    """How often file and period-mixed meta persist, in seconds; 0 writes through (an ack returns once its cursor is
    persisted)."""
    detecting: DetectingConfig = attrs.field(
        factory=DetectingConfig,
        validator=_check(lambda v: isinstance(v, DetectingConfig), "must be a DetectingConfig"),
    )
    """Heartbeat detection (DetectingConfig)."""
    fallback_interval_s: float = attrs.field(
        default=60,
        validator=_non_negative_number,
        metadata=canal_key("canal.instance.fallbackIntervalInSeconds", "float"),
    )
    """After a switch to another server, start by time this many seconds before the last handed-off time."""
    transaction_size: int = attrs.field(
        default=1024, validator=_positive_int, metadata=canal_key("canal.instance.transaction.size", "int")
    )
    """Entries after which a large transaction is handed to the store in parts (at most the store's `buffer_size`:
    a part is put whole, so a larger one could never be put). A part also holds at most a quarter of the store's
    bytes (`canal.config.settings.PART_OF_STORE`, `StoreConfig.part_bytes`)."""
    share_reader: bool = attrs.field(
        default=True, validator=_bool, metadata=canal_key("pycanal.instance.shared.reader", "bool")
    )
    """Read the binlog through the process's shared reader of the master when another destination of it, with the same
    login, TLS and connection settings, runs here: one dump and one decode for all of them (`canal.parse.shared`).
    Off: this destination always reads alone."""
    preferred_hosts: tuple[str, ...] = attrs.field(
        default=(),
        converter=_to_tuple,
        validator=_check(
            lambda v: isinstance(v, tuple) and all(isinstance(h, str) and h.strip() for h in v),
            "must be a tuple of host names or addresses",
        ),
        metadata=canal_key("pycanal.instance.preferred.hosts", "list"),
    )
    """Under balancing, the hosts (or `host:port` addresses) of the processes that should run this destination when
    one of them is in the group; any other process runs it otherwise."""
    retry: RetryConfig = attrs.field(
        factory=RetryConfig, validator=_check(lambda v: isinstance(v, RetryConfig), "must be a RetryConfig")
    )
    """Reconnect, purged-binlog and idle policy (RetryConfig)."""
    schema_history: SchemaHistoryConfig = attrs.field(
        factory=SchemaHistoryConfig,
        validator=_check(lambda v: isinstance(v, SchemaHistoryConfig), "must be a SchemaHistoryConfig"),
    )
    """The schema history (SchemaHistoryConfig)."""
    snapshot: SnapshotConfig = attrs.field(
        factory=SnapshotConfig, validator=_check(lambda v: isinstance(v, SnapshotConfig), "must be a SnapshotConfig")
    )
    """Snapshots of tables that already hold rows (SnapshotConfig)."""
    mq: MqConfig = attrs.field(
        factory=MqConfig, validator=_check(lambda v: isinstance(v, MqConfig), "must be an MqConfig")
    )
    """canal's MQ routing (``canal.mq.*``), for the ``canal`` source's messages (MqConfig)."""
    heal: HealMode = attrs.field(
        default=HealMode.SNAPSHOT, converter=to_heal_mode, metadata=canal_key("pycanal.heal", "enum")
    )
    """Where the server changed a captured table's rows without logging them: `snapshot` reads the table again in
    the stream from that point (a heal), `stop` stops typed (HealMode)."""

    _table_filters: TableFilters = attrs.field(init=False, repr=False, eq=False)
    _field_filters: FieldFilter = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "_table_filters", TableFilters.from_strings(self.filter_regex, self.black_regex))
        set_(self, "_field_filters", FieldFilter.parse(self.field_filter, self.black_field_filter))
        if self.meta_mode is MetaMode.FILE and self.meta_dir is None:
            raise _FieldError("InstanceConfig", "meta_dir", None, "meta_mode 'file' needs meta_dir")
        if self.meta_mode in (MetaMode.ZOOKEEPER, MetaMode.PERIOD_MIXED) and self.zk_hosts is None:
            raise _FieldError("InstanceConfig", "zk_hosts", None, f"meta_mode {self.meta_mode.value!r} needs zk_hosts")

    @property
    def table_filters(self) -> TableFilters:
        """``filter_regex`` and ``black_regex`` compiled: ``table_filters.includes(schema, table)``."""
        return self._table_filters

    @property
    def field_filters(self) -> FieldFilter:
        """``field_filter`` and ``black_field_filter`` compiled."""
        return self._field_filters

    def redacted(self) -> dict[str, Any]:
        """A JSON-friendly dict of every setting, safe to log: passwords are ``'***'``."""
        return _redacted(self)

    @classmethod
    def from_properties(
        cls,
        path_or_text: str | os.PathLike[str],
        *,
        destination: str | None = None,
        canal_properties: str | os.PathLike[str] | Mapping[str, str] | ServerConfig | None = None,
        base_dir: str | os.PathLike[str] | None = None,
    ) -> InstanceConfig:
        """Build from canal's ``instance.properties`` (a path, or the text itself).

        ``canal_properties`` (a path, text, mapping or :class:`ServerConfig`) supplies the global keys and defaults,
        overridden by the instance file's keys. ``destination`` defaults to ``canal.instance.destination``, else the
        name of the directory holding the file (canal's layout ``conf/{destination}/instance.properties``).
        Relative directories (``canal.file.data.dir``) are resolved against ``base_dir`` when given (canal's working
        directory, its ``bin/``); :func:`load_conf_dir` passes it. Raises ConfigError naming the bad key.
        """
        text, path = _read_source(path_or_text)
        instance_props = parse_properties(text)
        global_props: dict[str, str]
        if canal_properties is None:
            global_props = {}
        elif isinstance(canal_properties, ServerConfig):
            global_props = dict(canal_properties.properties)
            if base_dir is None and canal_properties.base_dir is not None:
                base_dir = canal_properties.base_dir
        elif isinstance(canal_properties, Mapping):
            global_props = dict(canal_properties)
        else:
            global_props = parse_properties(_read_source(canal_properties)[0])
        merged = {**global_props, **instance_props}
        props = _Props(merged)
        dest = destination
        if dest is None:
            dest = props.get(_key(InstanceConfig, "destination")) or None
        if dest is None and path is not None:
            dest = path.resolve().parent.name
        if not dest:
            raise ConfigError(
                "no destination: pass destination=..., set canal.instance.destination, or load from "
                "conf/{destination}/instance.properties",
                key=_key(InstanceConfig, "destination"),
            )
        props.raw[_key(InstanceConfig, "destination")] = dest
        _report_keys(instance_props, dest, _destinations_of(props, dest), "instance.properties")
        if global_props and not isinstance(canal_properties, ServerConfig):
            _report_keys(global_props, dest, _destinations_of(props, dest), "canal.properties")
        conf_dir = canal_properties.conf_dir if isinstance(canal_properties, ServerConfig) else None
        base = None if base_dir is None else os.fspath(base_dir)
        if conf_dir is None and base is not None:
            conf_dir = _resolve_dir(props.get(_key(ServerConfig, "conf_dir")) or None, base)
        return _instance_from_props(props, dest, base, conf_dir)

    def to_properties(self, *, include_password: bool = False) -> str:
        """canal ``instance.properties`` text for this config (plus ``pycanal.*`` keys for settings canal lacks).

        The password is written only with ``include_password=True``. ``from_properties`` of the result gives an
        equal config (with the password when it was included).
        """
        values: dict[str, str] = {_key(InstanceConfig, "destination"): self.destination}
        for prefix, master in (("master", self.master), ("standby", self.standby)):
            if master is not None:
                values.update(_format_fields(master, _master_spec(prefix)))
                values.update(_format_ssl(master.ssl, prefix, include_password=include_password))
        credentials = _format_fields(self.master, _CREDENTIAL_SPEC)
        if not include_password:
            credentials.pop(_key(MasterConfig, "password"))
        values.update(credentials)
        values.update(_format_fields(self, _INSTANCE_SPEC))
        values.update(_format_fields(self.filter_flags, _FLAGS_SPEC))
        values.update(_format_fields(self.store, _STORE_SPEC))
        values.update(_format_fields(self.detecting, _DETECTING_SPEC))
        values.update(_format_fields(self.retry, _RETRY_SPEC))
        values.update(_format_fields(self.schema_history, _SCHEMA_HISTORY_SPEC))
        values.update(_format_fields(self.snapshot, _SNAPSHOT_SPEC))
        values.update(_format_fields(self.mq, _MQ_SPEC))
        values["pycanal.meta.mode"] = self.meta_mode.value
        keys = _key_names(InstanceConfig)
        if self.meta_dir is not None:
            values[keys["meta_dir"]] = self.meta_dir
        if self.zk_hosts is not None:
            values[keys["zk_hosts"]] = self.zk_hosts
        if self.zk_auth is not None and include_password:
            values[keys["zk_auth"]] = f"{self.zk_auth.scheme}:{self.zk_auth.credential}"
        values[_flush_key(self.meta_mode)] = _fmt_ms(self.flush_period_s)
        return format_properties(values)


_INSTANCE_SPEC: Final = _spec_of(InstanceConfig)


def _flush_key(mode: MetaMode) -> str:
    """The key of the flush period of ``mode``'s meta manager (ZooKeeper's or the file's)."""
    field = "zk_flush_period_s" if mode in (MetaMode.ZOOKEEPER, MetaMode.PERIOD_MIXED) else "file_flush_period_s"
    return _key(ServerConfig, field)


def _destinations_of(props: _Props, dest: str) -> tuple[str, ...]:
    """``dest`` and the destinations canal.properties lists (for per-destination keys)."""
    raw = props.raw.get(_key(ServerConfig, "destinations"), "")
    return (dest, *(d.strip() for d in raw.split(",") if d.strip()))


def _instance_from_props(props: _Props, dest: str, base_dir: str | None, conf_dir: str | None) -> InstanceConfig:
    log = destination_logger(__name__, dest)
    druid_key = "canal.instance.enableDruid"
    druid = props.get(druid_key)
    if druid and _parse_bool_or_error(druid, druid_key):
        raise ConfigError(
            f"invalid {druid_key} = {druid!r}: encrypted passwords are not supported; give the plain password, "
            "e.g. canal.instance.dbPassword=${CANAL_DB_PASSWORD}",
            key=druid_key,
        )

    credentials = _read_fields(props, _CREDENTIAL_SPEC)
    masters: dict[str, MasterConfig | None] = {}
    for prefix in ("master", "standby"):
        spec = _master_spec(prefix)
        fields = _read_fields(props, spec)
        if "address" not in fields:
            if prefix == "master":
                raise ConfigError(
                    "canal.instance.master.address is required (host:port or fake://NAME)",
                    key="canal.instance.master.address",
                )
            masters[prefix] = None
            continue
        keys = {field: key for field, key, _ in (*spec, *_CREDENTIAL_SPEC)}
        ssl = _ssl_from_props(props, prefix)
        masters[prefix] = _build(MasterConfig, keys, props, **credentials, **fields, ssl=ssl)

    def sub(cls: Callable[..., _T], spec: _Spec) -> _T:
        return _build(cls, {field: key for field, key, _ in spec}, props, **_read_fields(props, spec))

    flags = sub(FilterFlags, _FLAGS_SPEC)
    store = sub(StoreConfig, _STORE_SPEC)
    detecting = sub(DetectingConfig, _DETECTING_SPEC)
    retry = sub(RetryConfig, _RETRY_SPEC)
    schema_history = sub(SchemaHistoryConfig, _SCHEMA_HISTORY_SPEC)
    snapshot = sub(SnapshotConfig, _SNAPSHOT_SPEC)
    mq = sub(MqConfig, _MQ_SPEC)

    keys = _key_names(InstanceConfig)
    kwargs = _read_fields(props, _INSTANCE_SPEC)
    mode_key: str | None = "pycanal.meta.mode"
    mode_value: MetaMode | str = MetaMode.MEMORY
    mode_text = props.get("pycanal.meta.mode")
    if mode_text:
        mode_value = mode_text
    else:
        mode_key = None
        for xml_key in (f"canal.instance.{dest}.spring.xml", "canal.instance.global.spring.xml"):
            xml = props.get(xml_key)
            if xml:
                mode_key, mode_value = xml_key, _meta_mode_from_xml(xml, xml_key)
                break
    try:
        meta_mode = _enum_converter(MetaMode, "InstanceConfig", "meta_mode")(mode_value)
    except _FieldError as exc:
        raise ConfigError(f"invalid pycanal.meta.mode = {mode_text!r}: {exc.reason}", key="pycanal.meta.mode") from None
    kwargs["meta_mode"] = meta_mode
    if mode_key is not None:
        keys["meta_mode"] = mode_key

    data_dir = props.get(keys["meta_dir"])
    if not data_dir and meta_mode is MetaMode.FILE and base_dir is not None:
        data_dir = "../conf"  # canal's default, relative to its working directory
    if data_dir:
        kwargs["meta_dir"] = _resolve_dir(
            data_dir, base_dir, props.get(_key(ServerConfig, "conf_dir")) or "../conf", conf_dir
        )
    zk = props.get(keys["zk_hosts"])
    if zk:
        kwargs["zk_hosts"] = zk
    zk_auth = props.get(keys["zk_auth"])
    if zk_auth:
        kwargs["zk_auth"] = zk_auth
    flush_key = _flush_key(meta_mode)
    flush = _read_fields(props, (("flush_period_s", flush_key, _MS),))
    kwargs.update(flush)
    keys["flush_period_s"] = flush_key
    config = _build(
        InstanceConfig,
        keys,
        props,
        destination=dest,
        master=masters["master"],
        standby=masters["standby"],
        filter_flags=flags,
        store=store,
        detecting=detecting,
        retry=retry,
        schema_history=schema_history,
        snapshot=snapshot,
        mq=mq,
        **kwargs,
    )
    log.debug("loaded instance config %s", config.redacted())
    return config
