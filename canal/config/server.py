"""The server's configuration (:class:`ServerConfig`, ``canal.properties``) and whole canal ``conf/`` directories."""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

import attrs

from canal.client import DESTINATION_RE
from canal.config.fields import (
    ZK_AUTH_KEY,
    _bool,
    _check,
    _FieldError,
    _is_int,
    _mask_repr,
    _opt_non_negative_int,
    _opt_strip,
    _positive_number,
    _redacted,
    _str,
    _strip_str,
    _to_path_str,
    _validate_meta_dir,
    _validate_zk,
    canal_key,
    keyed,
)
from canal.config.keys import (
    _build,
    _key,
    _key_names,
    _meta_mode_from_xml,
    _Props,
    _read_fields,
    _read_source,
    _report_keys,
    _resolve_dir,
    _spec_of,
)
from canal.config.properties import parse_properties
from canal.config.settings import MetaMode, RetryConfig, ZkAuth, _to_meta_mode, to_zk_auth

# --------------------------------------------------------------------------------------------------------------------
# server
# --------------------------------------------------------------------------------------------------------------------


def _validate_destinations(inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, tuple):
        raise _FieldError(type(inst).__name__, attr.name, value, "must be a tuple of destination names")
    for name in value:
        if not isinstance(name, str) or not DESTINATION_RE.fullmatch(name):
            raise _FieldError(type(inst).__name__, attr.name, value, f"{name!r} is not a valid destination name")
    if len(set(value)) != len(value):
        raise _FieldError(type(inst).__name__, attr.name, value, "names a destination twice")


def _to_tuple(value: object) -> object:
    if isinstance(value, str):
        return tuple(v.strip() for v in value.split(",") if v.strip())
    if isinstance(value, list | tuple):
        return tuple(value)
    return value


def _frozen_mapping(value: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(value))


def _validate_group(inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, str) or not DESTINATION_RE.fullmatch(value):
        raise _FieldError(
            type(inst).__name__,
            attr.name,
            value,
            "must be 1-128 letters, digits, '_', '.', '-' (it names a ZooKeeper node)",
        )


@keyed
@attrs.frozen(slots=True)
class BalanceConfig:
    """How the processes that embed the same destinations on one ZooKeeper share them (:mod:`canal.ha.balance`).

    Each process of a group serves within one of its share, a process that joins or leaves moves only what it must,
    and every move is a hand-over through the service's ``on_revoked`` / ``on_assigned`` (:mod:`canal.ha.destination`).
    Off, a destination runs in whichever process creates its running node first, as in canal's cluster mode.
    """

    enabled: bool = attrs.field(default=True, validator=_bool, metadata=canal_key("pycanal.ha.balance", "bool"))
    """Share the destinations across the processes of the group; off: the first process to start runs every
    destination and the others stand by (canal's cluster mode)."""
    group: str = attrs.field(
        default="default",
        converter=_strip_str,
        validator=_validate_group,
        metadata=canal_key("pycanal.ha.balance.group", "str"),
    )
    """The balance group: the processes of one group share its destinations; other groups on the same ZooKeeper
    balance apart."""
    max_destinations: int | None = attrs.field(
        default=None, validator=_opt_non_negative_int, metadata=canal_key("pycanal.ha.max.destinations", "opt_int")
    )
    """At most this many destinations run in this process (None: no cap); a destination no process has room for
    runs nowhere."""
    revoke_timeout_s: float = attrs.field(
        default=30.0, validator=_positive_number, metadata=canal_key("pycanal.ha.revoke.timeout", "float")
    )
    """How long a hand-over waits for `on_revoked` and for the batches handed out to be acked or rolled back, in
    seconds; then it hands over anyway and the next owner delivers them again."""

    def redacted(self) -> dict[str, Any]:
        return _redacted(self)


def to_balance_config(value: BalanceConfig | bool | None) -> BalanceConfig:
    """``EmbeddedServer(balance=...)``: a BalanceConfig, True / None (the default one) or False (off)."""
    if value is None or value is True:
        return BalanceConfig()
    if value is False:
        return BalanceConfig(enabled=False)
    if isinstance(value, BalanceConfig):
        return value
    raise _FieldError("EmbeddedServer", "balance", value, "must be a BalanceConfig, True, False or None")


@keyed
@attrs.frozen(slots=True)
class ServerConfig:
    """canal.properties globals: destinations, ZooKeeper, meta defaults and this server's identity for HA.

    ``ip``/``register_ip``/``port`` form the address this process registers under
    ``/otter/canal/destinations/{dest}/cluster/{ip:port}`` (an empty ip: the HA module picks the local address).
    ``meta_mode`` is the global default (``canal.instance.global.spring.xml``); ``destination_meta_modes`` holds
    per-destination overrides (``canal.instance.{dest}.spring.xml``). ``properties`` keeps every raw key
    (hidden from repr) so instance loading sees canal.properties defaults.
    """

    destinations: tuple[str, ...] = attrs.field(
        default=(),
        converter=_to_tuple,
        validator=_validate_destinations,
        metadata=canal_key("canal.destinations", "list"),
    )
    """The destinations to serve (comma-separated in the key)."""
    zk_hosts: str | None = attrs.field(
        default=None, converter=_opt_strip, validator=_validate_zk, metadata=canal_key("canal.zkServers", "str")
    )
    """ZooKeeper `host:port[,host:port...][/chroot]` for HA and ZooKeeper meta."""
    # ZooKeeper authentication ("digest", "user:password"): the session authenticates and pycanal's nodes get an ACL
    # (canal.meta.zkclient); key pycanal.zookeeper.auth = digest:user:password. Never shown.
    zk_auth: ZkAuth | None = attrs.field(
        default=None,
        converter=to_zk_auth,
        repr=_mask_repr,
        metadata=canal_key(ZK_AUTH_KEY, "str", secret=True),
    )
    """ZooKeeper authentication (`digest:user:password` in the key): the session authenticates and pycanal's nodes get
    an ACL; never shown."""
    zk_flush_period_s: float = attrs.field(
        default=1.0, validator=_positive_number, metadata=canal_key("canal.zookeeper.flush.period", "ms")
    )
    """How often period-mixed meta is written to ZooKeeper, in seconds (the key is in ms)."""
    file_data_dir: str | None = attrs.field(
        default=None,
        converter=_to_path_str,
        validator=_validate_meta_dir,
        metadata=canal_key("canal.file.data.dir", "str"),
    )
    """Directory of file meta (`{dir}/{destination}/meta.dat`)."""
    file_flush_period_s: float = attrs.field(
        default=1.0, validator=_positive_number, metadata=canal_key("canal.file.flush.period", "ms")
    )
    """How often file meta is flushed, in seconds (the key is in ms)."""
    meta_mode: MetaMode = attrs.field(default=MetaMode.MEMORY, converter=_to_meta_mode)
    """Default meta mode: memory, file, zookeeper or period-mixed (canal's `canal.instance.global.spring.xml`, or
    `pycanal.meta.mode`)."""
    destination_meta_modes: Mapping[str, MetaMode] = attrs.field(factory=dict, converter=_frozen_mapping)
    """Per-destination meta modes (`canal.instance.{dest}.spring.xml`)."""
    conf_dir: str | None = attrs.field(
        default=None, converter=_to_path_str, validator=_validate_meta_dir, metadata=canal_key("canal.conf.dir", "str")
    )
    """The canal conf directory holding `{destination}/instance.properties`."""
    auto_scan: bool = attrs.field(default=True, validator=_bool, metadata=canal_key("canal.auto.scan", "bool"))
    """Watch the conf directory for added, changed and removed destinations."""
    auto_scan_interval_s: float = attrs.field(
        default=5, validator=_positive_number, metadata=canal_key("canal.auto.scan.interval", "float")
    )
    """Seconds between scans of the conf directory."""
    auto_reset_latest_pos: bool = attrs.field(
        default=False, validator=_bool, metadata=canal_key(_key(RetryConfig, "reset_on_purge"), "bool")
    )
    """Default of RetryConfig.reset_on_purge for every destination."""
    canal_id: int | None = attrs.field(
        default=None, validator=_opt_non_negative_int, metadata=canal_key("canal.id", "int")
    )
    """This server's id (canal's `canal.id`)."""
    ip: str = attrs.field(default="", converter=_strip_str, validator=_str, metadata=canal_key("canal.ip", "str"))
    """Address this process registers under in ZooKeeper (empty: the local address)."""
    register_ip: str = attrs.field(
        default="", converter=_strip_str, validator=_str, metadata=canal_key("canal.register.ip", "str")
    )
    """Address registered instead of `ip`, when set."""
    port: int = attrs.field(
        default=11111,
        validator=_check(lambda v: _is_int(v) and 0 < v < 65536, "must be a port in 1..65535"),
        metadata=canal_key("canal.port", "int"),
    )
    """Port registered in ZooKeeper with the address."""
    metrics_port: int | None = attrs.field(
        default=None,
        validator=_check(lambda v: v is None or (_is_int(v) and 0 <= v < 65536), "must be a port in 0..65535"),
        metadata=canal_key("canal.metrics.pull.port", "opt_int"),
    )
    """Port of the Prometheus exporter `canal serve` runs (None: canal's 11112; 0: a free one)."""
    balance: BalanceConfig = attrs.field(
        factory=BalanceConfig,
        validator=_check(lambda v: isinstance(v, BalanceConfig), "must be a BalanceConfig"),
    )
    """How the processes embedding these destinations on one ZooKeeper share them (BalanceConfig)."""
    base_dir: str | None = attrs.field(default=None, converter=_to_path_str, validator=_validate_meta_dir)
    """Directory relative paths of the properties resolve against (canal's working directory)."""
    properties: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_mapping, repr=False, eq=False)
    """Every raw key of canal.properties (hidden from repr), the defaults of instance loading."""

    def meta_mode_for(self, destination: str) -> MetaMode:
        """The meta mode of ``destination``: its own spring xml if set, else the global one."""
        return self.destination_meta_modes.get(destination, self.meta_mode)

    @property
    def registration_address(self) -> str:
        """``ip:port`` registered for HA (``register_ip`` before ``ip``); the ip part may be empty."""
        return f"{self.register_ip or self.ip}:{self.port}"

    def redacted(self) -> dict[str, Any]:
        """A JSON-friendly dict, safe to log (raw properties are left out)."""
        return _redacted(self)

    @classmethod
    def from_properties(
        cls, path_or_text: str | os.PathLike[str], *, base_dir: str | os.PathLike[str] | None = None
    ) -> ServerConfig:
        """Build from canal's ``canal.properties`` (a path, or the text itself). Relative directories are resolved
        against ``base_dir`` (canal's working directory) when given."""
        text, _path = _read_source(path_or_text)
        return _server_from_raw(parse_properties(text), None if base_dir is None else os.fspath(base_dir), None)


_SERVER_SPEC: Final = _spec_of(ServerConfig)
_BALANCE_SPEC: Final = _spec_of(BalanceConfig)


def _server_from_raw(raw: dict[str, str], base: str | None, conf_dir: str | None) -> ServerConfig:
    props = _Props(dict(raw))
    kwargs = _read_fields(props, _SERVER_SPEC)
    destinations = kwargs.get("destinations", ())
    destinations = destinations if isinstance(destinations, str) else ()
    names = tuple(d.strip() for d in destinations.split(",") if d.strip()) if destinations else ()
    per_dest: dict[str, MetaMode] = {}
    for dest in names:
        key = f"canal.instance.{dest}.spring.xml"
        xml = props.get(key)
        if xml:
            per_dest[dest] = _meta_mode_from_xml(xml, key)
    xml_key = "canal.instance.global.spring.xml"
    global_xml = props.get(xml_key)
    if global_xml:
        kwargs["meta_mode"] = _meta_mode_from_xml(global_xml, xml_key)
    alias = props.get(_key(ServerConfig, "conf_dir")) or None
    if conf_dir is not None:
        kwargs["conf_dir"] = conf_dir
    elif "conf_dir" in kwargs:
        kwargs["conf_dir"] = _resolve_dir(kwargs["conf_dir"], base)
    if "file_data_dir" in kwargs:
        kwargs["file_data_dir"] = _resolve_dir(kwargs["file_data_dir"], base, alias, kwargs.get("conf_dir"))
    _report_keys(raw, None, names, "canal.properties")
    balance = _build(BalanceConfig, {f: k for f, k, _ in _BALANCE_SPEC}, props, **_read_fields(props, _BALANCE_SPEC))
    return _build(
        ServerConfig,
        _key_names(ServerConfig) | {"meta_mode": xml_key},
        props,
        destination_meta_modes=per_dest,
        balance=balance,
        base_dir=base,
        properties=raw,
        **kwargs,
    )
