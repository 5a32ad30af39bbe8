"""The settings that make up an instance's configuration: ZooKeeper auth, the enums, TLS, the master, the store,
detecting, the filter flags and the retry policy."""

from __future__ import annotations

import enum
import random
import re
from collections.abc import Callable
from typing import Any, Final, TypeVar, cast

import attrs

from canal.address import split_address
from canal.config.fields import (
    _FAKE_PREFIX,
    _FILE_PREFIX,
    _MASK,
    _bool,
    _check,
    _FieldError,
    _is_int,
    _is_number,
    _mask_repr,
    _non_negative_number,
    _opt_non_negative_int,
    _opt_str,
    _opt_strip,
    _positive_int,
    _positive_number,
    _redacted,
    _str,
    _strip_str,
    _to_path_str,
    _validate_address,
    _validate_timestamp,
    _warn_once,
    canal_key,
    keyed,
)
from canal.errors import ConfigError
from canal.names import split_qualified

_ZK_AUTH_SCHEMES = ("digest",)


@attrs.frozen(slots=True)
class ZkAuth:
    """A ZooKeeper authentication: ``scheme`` (``digest``) and its credential (``user:password``)."""

    scheme: str
    credential: str = attrs.field(repr=lambda _value: "'***'")

    def __attrs_post_init__(self) -> None:
        if self.scheme not in _ZK_AUTH_SCHEMES:
            raise ConfigError(f"ZooKeeper auth scheme {self.scheme!r} is not supported (use one of {_ZK_AUTH_SCHEMES})")
        user, sep, password = self.credential.partition(":")
        if not sep or not user or not password:
            raise ConfigError("a ZooKeeper digest credential must be 'user:password' (both non-empty)")

    @classmethod
    def parse(cls, value: ZkAuth | tuple[str, str] | str) -> ZkAuth:
        """From a ZkAuth, a ``(scheme, credential)`` pair or ``"scheme:user:password"`` text."""
        if isinstance(value, ZkAuth):
            return value
        if isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, str) for v in value):
            return cls(value[0], value[1])
        if isinstance(value, str):
            scheme, sep, credential = value.partition(":")
            if sep:
                return cls(scheme.strip(), credential)
        raise ConfigError("ZooKeeper auth must be ('digest', 'user:password') or 'digest:user:password'")


def to_zk_auth(value: ZkAuth | tuple[str, str] | str | None) -> ZkAuth | None:
    """attrs converter for ``zk_auth`` settings."""
    return None if value is None or value == "" else ZkAuth.parse(value)


# --------------------------------------------------------------------------------------------------------------------
# enums
# --------------------------------------------------------------------------------------------------------------------


class BatchMode(enum.StrEnum):
    """How ``get(batch_size)`` and the store's capacity are counted (canal's ``canal.instance.memory.batch.mode``).

    * ``ITEMSIZE``: a batch is ``batch_size`` entries; the store is bounded by ``buffer_size`` entries.
    * ``MEMSIZE``: a batch is up to ``batch_size * memory_unit`` bytes of entries (always at least one entry); the
      store is bounded by ``buffer_size`` entries *and* ``buffer_size * memory_unit`` bytes.
    """

    MEMSIZE = "MEMSIZE"
    ITEMSIZE = "ITEMSIZE"

    @classmethod
    def parse(cls, value: BatchMode | str) -> BatchMode:
        """A BatchMode from itself or its name, case-insensitively (``"memsize"``)."""
        if isinstance(value, BatchMode):
            return value
        try:
            return cls[str(value).strip().upper()]
        except KeyError:
            raise ValueError(f"batch mode must be ITEMSIZE or MEMSIZE, got {value!r}") from None


class MetaMode(enum.StrEnum):
    """Where cursors, subscriptions and batch marks live."""

    MEMORY = "memory"
    FILE = "file"
    ZOOKEEPER = "zookeeper"
    PERIOD_MIXED = "period-mixed"


_E = TypeVar("_E", bound=enum.StrEnum)


def _enum_converter(enum_cls: type[_E], owner: str, field: str) -> Callable[[_E | str], _E]:
    choices = " | ".join(m.value for m in enum_cls)

    def convert(value: _E | str) -> _E:
        if isinstance(value, enum_cls):
            return value
        if isinstance(value, str):
            wanted = value.strip().lower()
            for member in enum_cls:
                if member.value.lower() == wanted or member.name.lower() == wanted.replace("-", "_"):
                    return member
        raise _FieldError(owner, field, value, f"must be one of {choices}")

    return convert


def _to_batch_mode(value: BatchMode | str) -> BatchMode:
    return _enum_converter(BatchMode, "StoreConfig", "batch_mode")(value)


def _to_meta_mode(value: MetaMode | str) -> MetaMode:
    return _enum_converter(MetaMode, "InstanceConfig", "meta_mode")(value)


# --------------------------------------------------------------------------------------------------------------------
# TLS to the master
# --------------------------------------------------------------------------------------------------------------------


class SslMode(enum.StrEnum):
    """How a connection to the master uses TLS: the MySQL client's ``--ssl-mode`` names and meaning (canal's
    ``canal.instance.master.sslMode``).

    * ``DISABLED``: never encrypted.
    * ``PREFERRED``: TLS when the server offers it, plain only when it does not; the server is not verified.
    * ``REQUIRED``: TLS or no connection; the server's certificate is not verified.
    * ``VERIFY_CA``: TLS, and the server's certificate must chain to a trusted CA (``SslConfig.ca``, else the
      system's trust store).
    * ``VERIFY_IDENTITY``: as VERIFY_CA, and the certificate must name the host of the master's address.
    """

    DISABLED = "DISABLED"
    PREFERRED = "PREFERRED"
    REQUIRED = "REQUIRED"
    VERIFY_CA = "VERIFY_CA"
    VERIFY_IDENTITY = "VERIFY_IDENTITY"

    @property
    def requires_tls(self) -> bool:
        """Whether a connection that is not encrypted must fail."""
        return self in (SslMode.REQUIRED, SslMode.VERIFY_CA, SslMode.VERIFY_IDENTITY)

    @property
    def verifies(self) -> bool:
        """Whether the server's certificate is checked against the trusted CAs."""
        return self in (SslMode.VERIFY_CA, SslMode.VERIFY_IDENTITY)


TLS_VERSIONS: Final = ("TLSv1.2", "TLSv1.3")
"""The TLS versions pycanal speaks (canal's default ``tlsVersions``); TLSv1 and TLSv1.1 are insecure and refused."""


def _to_ssl_mode(value: SslMode | str | None) -> SslMode | None:
    if value is None:
        return None
    return _enum_converter(SslMode, "SslConfig", "mode")(value)


def _to_tls_versions(value: object) -> object:
    if isinstance(value, str):
        value = [v for v in value.split(",") if v.strip()]
    if isinstance(value, list | tuple):
        named = {v.lower(): v for v in TLS_VERSIONS}
        out = []
        for item in value:
            text = item.strip() if isinstance(item, str) else item
            out.append(named.get(text.lower(), text) if isinstance(text, str) else text)
        return tuple(out)
    return value


def _validate_tls_versions(inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, tuple) or not all(v in TLS_VERSIONS for v in value):
        raise _FieldError(
            type(inst).__name__, attr.name, value, "must name TLSv1.2 and/or TLSv1.3 (older versions are insecure)"
        )


_opt_path = _check(lambda v: v is None or (isinstance(v, str) and v.strip() != ""), "must be None or a file path")


def _opt_path_str(value: object) -> object:
    value = _to_path_str(value)
    return value.strip() or None if isinstance(value, str) else value


@attrs.frozen(slots=True, kw_only=True)
class SslConfig:
    """TLS to one master (MySQL client semantics; see :class:`SslMode`).

    ``ca`` is a PEM file of the CA certificates to trust (VERIFY_CA / VERIFY_IDENTITY; None: the system's trust
    store). ``cert`` is a PEM file with the client certificate (and its chain), for servers that require one; its
    private key is in ``key`` or in the same file, encrypted with ``key_password`` if it is. ``tls_versions`` limits the
    versions offered (canal's ``tlsVersions``; empty: TLSv1.2 and TLSv1.3). ``mode`` defaults, as in the MySQL client,
    to VERIFY_CA when a ``ca`` is given, else PREFERRED. Files are read when a connection is opened, so a renewed
    certificate is picked up at the next reconnect. The key password is never shown.
    """

    mode: SslMode = attrs.field(default=None, converter=_to_ssl_mode)
    """DISABLED, PREFERRED, REQUIRED, VERIFY_CA or VERIFY_IDENTITY (MySQL client semantics); default VERIFY_CA with a
    `ca`, else PREFERRED."""
    ca: str | None = attrs.field(default=None, converter=_opt_path_str, validator=_opt_path)
    """PEM file of the CA certificates to trust (None: the system's trust store)."""
    cert: str | None = attrs.field(default=None, converter=_opt_path_str, validator=_opt_path)
    """PEM file with the client certificate (and its chain), for servers that require one."""
    key: str | None = attrs.field(default=None, converter=_opt_path_str, validator=_opt_path)
    """PEM file with the client's private key (None: it is in `cert`'s file)."""
    key_password: str | None = attrs.field(
        default=None,
        repr=lambda v: "None" if v is None else repr(_MASK),
        validator=_check(lambda v: v is None or isinstance(v, str), "must be None or a string"),
        metadata={"secret": True},
    )
    """Password of an encrypted private key; never shown."""
    tls_versions: tuple[str, ...] = attrs.field(
        default=(), converter=_to_tls_versions, validator=_validate_tls_versions
    )
    """TLS versions offered, e.g. `("TLSv1.3",)` (empty: TLSv1.2 and TLSv1.3)."""

    def __attrs_post_init__(self) -> None:
        if cast("SslMode | None", self.mode) is None:  # not given: the MySQL client's default for these files
            object.__setattr__(self, "mode", SslMode.VERIFY_CA if self.ca is not None else SslMode.PREFERRED)
        if self.key is not None and self.cert is None:
            raise _FieldError("SslConfig", "key", self.key, "a private key needs its certificate (cert)")
        if self.key_password is not None and self.cert is None:
            raise _FieldError("SslConfig", "key_password", self.key_password, "needs cert", secret=True)
        if self.ca is not None and self.mode in (SslMode.PREFERRED, SslMode.REQUIRED):
            _warn_once(
                f"ssl-ca-unused:{self.mode}",
                "SslConfig(mode=%s) does not verify the server, so ca=%s is not used: use VERIFY_CA or "
                "VERIFY_IDENTITY to check the server's certificate",
                self.mode.value,
                self.ca,
            )

    @property
    def enabled(self) -> bool:
        """Whether connections try TLS at all (every mode but DISABLED)."""
        return self.mode is not SslMode.DISABLED

    def redacted(self) -> dict[str, Any]:
        """A JSON-friendly dict for logs: the key password is ``'***'``."""
        return _redacted(self)


def _to_ssl_config(value: object) -> object:
    if isinstance(value, SslMode | str):
        return SslConfig(mode=value)
    if value is None:
        return SslConfig()
    return value


@keyed
@attrs.frozen(slots=True)
class MasterConfig:
    """The MySQL/MariaDB server to replicate from.

    ``address`` is ``host:port`` (``[v6addr]:port`` for IPv6), ``file://DIR`` (a directory of binlog files) or
    ``fake://NAME``, which names the in-memory
    :class:`canal.testing.FakeMysql` registered under NAME in this process. The start position is optional:
    ``journal_name`` (+ ``position``, an offset in that file), or ``timestamp`` (milliseconds since the epoch, canal's
    unit), or ``gtid`` (a GTID set, used when the instance runs in GTID mode); with none of them the parser starts
    from the stored cursor, else from the server's current position. The password is never shown.

    ``ssl`` is how connections to this server use TLS (an :class:`SslConfig`, or just a mode name such as
    ``"VERIFY_IDENTITY"``); the default is the MySQL client's, PREFERRED. It applies to every connection pycanal opens
    to the server (the binlog dump, metadata queries, detecting, ``canal check``) and is ignored for ``fake://`` and
    ``file://``.
    """

    address: str = attrs.field(
        converter=_strip_str, validator=_validate_address, metadata=canal_key("canal.instance.{prefix}.address", "str")
    )
    """The server: `host:port`, `file://DIR` (a directory of binlog files) or `fake://NAME` (an in-memory FakeMysql)."""
    username: str = attrs.field(default="canal", validator=_str, metadata=canal_key("canal.instance.dbUsername", "str"))
    """The capture user (needs SELECT, REPLICATION SLAVE, REPLICATION CLIENT; MariaDB also BINLOG MONITOR; SHOW VIEW
    and TRIGGER where a session may log DML as statements)."""
    password: str = attrs.field(
        default="canal",
        repr=_mask_repr,
        validator=_str,
        metadata=canal_key("canal.instance.dbPassword", "str", secret=True),
    )
    """The capture user's password; never shown in reprs, logs or errors."""
    journal_name: str | None = attrs.field(
        default=None,
        converter=_opt_strip,
        validator=_opt_str,
        metadata=canal_key("canal.instance.{prefix}.journal.name", "opt_str"),
    )
    """Start position: the binlog file, e.g. `mysql-bin.000003` (None: no configured start)."""
    position: int | None = attrs.field(
        default=None, validator=_opt_non_negative_int, metadata=canal_key("canal.instance.{prefix}.position", "opt_int")
    )
    """Start position: the offset in `journal_name` (needs `journal_name`)."""
    timestamp: int | None = attrs.field(
        default=None, validator=_validate_timestamp, metadata=canal_key("canal.instance.{prefix}.timestamp", "opt_int")
    )
    """Start position: milliseconds since the epoch (canal's unit); the first transaction at or after it."""
    gtid: str | None = attrs.field(
        default=None,
        converter=_opt_strip,
        validator=_opt_str,
        metadata=canal_key("canal.instance.{prefix}.gtid", "opt_str"),
    )
    """Start position: a GTID set, used when the instance runs in GTID mode (`gtid_mode`)."""
    ssl: SslConfig = attrs.field(
        factory=SslConfig,
        converter=_to_ssl_config,
        validator=_check(lambda v: isinstance(v, SslConfig), "must be an SslConfig or an SslMode name"),
    )
    """How every connection to this server uses TLS: an SslConfig or a mode name; default PREFERRED. Keys: see
    [TLS](#tls-keys)."""

    def __attrs_post_init__(self) -> None:
        if self.journal_name is not None and re.search(r"[\s/\\]", self.journal_name):
            raise _FieldError("MasterConfig", "journal_name", self.journal_name, "must be a binlog file name")
        if self.position is not None and self.journal_name is None:
            raise _FieldError("MasterConfig", "position", self.position, "a position needs journal_name (its file)")

    @property
    def has_start(self) -> bool:
        """Whether a start position is configured (a binlog file, a timestamp or a GTID set)."""
        return bool(self.journal_name or self.timestamp is not None or self.gtid)

    @property
    def is_fake(self) -> bool:
        """Whether the address names an in-memory FakeMysql (``fake://NAME``)."""
        return self.address.startswith(_FAKE_PREFIX)

    @property
    def fake_name(self) -> str | None:
        """NAME of ``fake://NAME``, else None."""
        return self.address[len(_FAKE_PREFIX) :] if self.is_fake else None

    @property
    def is_local(self) -> bool:
        """Whether the address names a directory of binlog files (``file://DIR``)."""
        return self.address.startswith(_FILE_PREFIX)

    @property
    def host(self) -> str:
        """Host part of the address (the fake name for ``fake://``, the directory for ``file://``)."""
        if self.is_local:
            return self.address[len(_FILE_PREFIX) :]
        return self.fake_name or split_address(self.address)[0]

    @property
    def port(self) -> int:
        """Port of the address (0 for ``fake://`` and ``file://``)."""
        return 0 if self.is_fake or self.is_local else split_address(self.address)[1]

    def redacted(self) -> dict[str, Any]:
        """A JSON-friendly dict for logs: the password is ``'***'``."""
        return _redacted(self)


PART_OF_STORE = 4
"""A transaction goes to the store in parts of at most this fraction of the store's bytes: while the store is full,
the parser holds one part decoded (a row decodes to several times its binlog bytes), and a part of a quarter of the
store leaves room for the next to come in while a consumer handles a batch."""


@keyed
@attrs.frozen(slots=True)
class StoreConfig:
    """The bounded ring-buffer event store (canal's MemoryEventStoreWithBuffer)."""

    buffer_size: int = attrs.field(
        default=16384,
        validator=_check(lambda v: _is_int(v) and v > 0 and v & (v - 1) == 0, "must be a power of two, e.g. 16384"),
        metadata=canal_key("canal.instance.memory.buffer.size", "int"),
    )
    """Capacity of the ring buffer in entries (a power of two)."""
    memory_unit: int = attrs.field(
        default=1024, validator=_positive_int, metadata=canal_key("canal.instance.memory.buffer.memunit", "int")
    )
    """Bytes per unit in MEMSIZE mode: a batch is up to `batch_size * memory_unit` bytes, the store holds at most
    `buffer_size * memory_unit` bytes."""
    batch_mode: BatchMode = attrs.field(
        default=BatchMode.MEMSIZE,
        converter=_to_batch_mode,
        metadata=canal_key("canal.instance.memory.batch.mode", "enum"),
    )
    """How batches and the store are counted: `MEMSIZE` (bytes) or `ITEMSIZE` (entries)."""
    ddl_isolation: bool = attrs.field(
        default=False, validator=_bool, metadata=canal_key("canal.instance.get.ddl.isolation", "bool")
    )
    """Hand out each DDL in a batch of its own."""

    @property
    def max_bytes(self) -> int:
        """The byte bound of the store in MEMSIZE mode: ``buffer_size * memory_unit``."""
        return self.buffer_size * self.memory_unit

    @property
    def part_bytes(self) -> int:
        """The most binlog bytes of one part a large transaction is handed to the store in (as well as at most
        ``transaction_size`` entries): :data:`PART_OF_STORE` of :attr:`max_bytes`."""
        return max(1, self.max_bytes // PART_OF_STORE)

    def redacted(self) -> dict[str, Any]:
        return _redacted(self)


@keyed
@attrs.frozen(slots=True)
class DetectingConfig:
    """canal's heartbeat detection: run ``sql`` on the master every ``interval_s`` seconds; after ``retry_threshold``
    consecutive failures and with ``ha_switch``, switch to the standby master."""

    enable: bool = attrs.field(
        default=False, validator=_bool, metadata=canal_key("canal.instance.detecting.enable", "bool")
    )
    """Run the heartbeat `sql` on the master."""
    sql: str = attrs.field(
        default="SELECT 1",
        converter=_strip_str,
        validator=_check(lambda v: isinstance(v, str) and v != "", "must be a non-empty SQL statement"),
        metadata=canal_key("canal.instance.detecting.sql", "str"),
    )
    """The heartbeat statement."""
    interval_s: float = attrs.field(
        default=3, validator=_positive_number, metadata=canal_key("canal.instance.detecting.interval.time", "float")
    )
    """Seconds between heartbeats."""
    retry_threshold: int = attrs.field(
        default=3, validator=_positive_int, metadata=canal_key("canal.instance.detecting.retry.threshold", "int")
    )
    """Consecutive failed heartbeats before the master counts as down."""
    ha_switch: bool = attrs.field(
        default=False, validator=_bool, metadata=canal_key("canal.instance.detecting.heartbeatHaEnable", "bool")
    )
    """Switch to the standby master when the master is down."""

    def redacted(self) -> dict[str, Any]:
        return _redacted(self)


def _filter_flag(suffix: str) -> Any:
    """A FilterFlags switch: off by default, canal's key ``canal.instance.filter.{suffix}``."""
    return attrs.field(default=False, validator=_bool, metadata=canal_key(f"canal.instance.filter.{suffix}", "bool"))


@keyed
@attrs.frozen(slots=True)
class FilterFlags:
    """canal's event filter switches; True drops that kind of event. All default to False.

    ``query_dml``/``query_ddl``/``query_dcl``: drop statement (QUERY) events of that class; ``rows``: drop row data;
    ``table_error``: skip tables whose metadata cannot be read instead of failing; ``transaction_entry``: drop
    TRANSACTIONBEGIN/END entries; ``dml_insert``/``dml_update``/``dml_delete``: drop row changes of that type.
    """

    query_dml: bool = _filter_flag("query.dml")
    """Drop statement (QUERY) events of DML."""
    query_ddl: bool = _filter_flag("query.ddl")
    """Drop DDL statement events."""
    query_dcl: bool = _filter_flag("query.dcl")
    """Drop DCL statement events (GRANT, ...)."""
    rows: bool = _filter_flag("rows")
    """Drop row data."""
    table_error: bool = _filter_flag("table.error")
    """Skip tables whose metadata cannot be read instead of failing."""
    transaction_entry: bool = _filter_flag("transaction.entry")
    """Drop TRANSACTIONBEGIN / TRANSACTIONEND entries."""
    dml_insert: bool = _filter_flag("dml.insert")
    """Drop INSERT row changes."""
    dml_update: bool = _filter_flag("dml.update")
    """Drop UPDATE row changes."""
    dml_delete: bool = _filter_flag("dml.delete")
    """Drop DELETE row changes."""

    def redacted(self) -> dict[str, Any]:
        return _redacted(self)


@keyed
@attrs.frozen(slots=True)
class RetryConfig:
    """The parser's reconnect, purged-binlog and idle policy.

    Reconnects back off exponentially: attempt ``n`` (1-based) waits ``min(max_backoff_s, initial_backoff_s *
    multiplier ** (n - 1))``, spread by +-``jitter`` (a fraction) -- see :meth:`backoff_s`. ``max_attempts``
    consecutive failures end the parser with the last error (None: retry forever).

    A purged binlog (MySQL errno 1236) is declared after ``purge_threshold`` consecutive 1236 errors at the same
    position. Then, with ``reset_on_purge`` (canal's ``canal.auto.reset.latest.pos.mode``), the parser drops the lost
    position and restarts from the server's current position -- the changes in between are lost; without it (the
    default) it stops with :class:`~canal.errors.BinlogPurgedError`.

    ``connect_timeout_s`` bounds a connection attempt; the dump connection is considered dead when nothing (not even a
    heartbeat) arrived for ``read_timeout_s`` (canal's ``canal.instance.network.soTimeout``); ``heartbeat_period_s``
    is the master heartbeat period asked of the server (0 disables), and must be below ``read_timeout_s``.
    """

    initial_backoff_s: float = attrs.field(
        default=0.1, validator=_positive_number, metadata=canal_key("pycanal.retry.backoff.initial", "float")
    )
    """Wait before the first reconnect, in seconds."""
    max_backoff_s: float = attrs.field(
        default=5.0, validator=_positive_number, metadata=canal_key("pycanal.retry.backoff.max", "float")
    )
    """Longest wait between reconnects, in seconds."""
    multiplier: float = attrs.field(
        default=2.0,
        validator=_check(lambda v: _is_number(v) and v >= 1, "must be a number >= 1"),
        metadata=canal_key("pycanal.retry.backoff.multiplier", "float"),
    )
    """Growth of the wait per failed attempt."""
    jitter: float = attrs.field(
        default=0.2,
        validator=_check(lambda v: _is_number(v) and 0 <= v <= 1, "must be a fraction in 0..1"),
        metadata=canal_key("pycanal.retry.jitter", "float"),
    )
    """Spread of each wait, a fraction (+-)."""
    max_attempts: int | None = attrs.field(
        default=None,
        validator=_check(lambda v: v is None or (_is_int(v) and v > 0), "must be None or >= 1"),
        metadata=canal_key("pycanal.retry.max.attempts", "opt_int"),
    )
    """Consecutive failed attempts before the parser stops with the last error (None: retry forever)."""
    purge_threshold: int = attrs.field(
        default=3, validator=_positive_int, metadata=canal_key("pycanal.retry.purge.threshold", "int")
    )
    """Consecutive errno 1236 errors at one position before the binlog counts as purged."""
    reset_on_purge: bool = attrs.field(
        default=False, validator=_bool, metadata=canal_key("canal.auto.reset.latest.pos.mode", "bool")
    )
    """On a purged binlog, restart from the server's current position (losing the changes between) instead of stopping
    with BinlogPurgedError."""
    connect_timeout_s: float = attrs.field(
        default=10.0, validator=_positive_number, metadata=canal_key("pycanal.retry.connect.timeout", "float")
    )
    """Bound of one connection attempt, in seconds."""
    read_timeout_s: float = attrs.field(
        default=30.0, validator=_positive_number, metadata=canal_key("canal.instance.network.soTimeout", "float")
    )
    """The dump connection counts as dead when nothing (not even a heartbeat) arrived for this long, in seconds."""
    heartbeat_period_s: float = attrs.field(
        default=15.0, validator=_non_negative_number, metadata=canal_key("pycanal.retry.heartbeat.period", "float")
    )
    """Master heartbeat period asked of the server, in seconds (0: off); below `read_timeout_s`."""

    def __attrs_post_init__(self) -> None:
        if self.max_backoff_s < self.initial_backoff_s:
            raise _FieldError("RetryConfig", "max_backoff_s", self.max_backoff_s, "must be >= initial_backoff_s")
        if self.heartbeat_period_s >= self.read_timeout_s:
            raise _FieldError(
                "RetryConfig", "heartbeat_period_s", self.heartbeat_period_s, "must be below read_timeout_s"
            )

    def backoff_s(self, attempt: int, rng: random.Random | None = None) -> float:
        """Seconds to wait before reconnect ``attempt`` (1-based), jittered with ``rng`` (default: ``random``)."""
        exponent = max(0, attempt - 1)
        try:
            base = min(self.max_backoff_s, self.initial_backoff_s * self.multiplier**exponent)
        except OverflowError:
            base = self.max_backoff_s
        if self.jitter == 0:
            return base
        spread = (rng or random).uniform(-self.jitter, self.jitter)
        return max(0.0, min(self.max_backoff_s, base * (1 + spread)))

    def redacted(self) -> dict[str, Any]:
        return _redacted(self)


@keyed
@attrs.frozen(slots=True)
class SchemaHistoryConfig:
    """The schema history (canal's table-meta TSDB): every table's layout at any binlog position, so rows are named
    right whatever ``binlog_row_metadata`` the server logs. On by default (canal's ``canal.instance.tsdb.enable``).

    It is persisted with the destination's meta. A snapshot of all layouts is taken every ``snapshot_ddls`` DDLs or
    when the newest one is ``snapshot_interval_h`` hours old (by binlog event time; canal's
    ``canal.instance.tsdb.snapshot.interval``); snapshots and DDLs older than ``snapshot_expire_h`` hours are dropped
    (``canal.instance.tsdb.snapshot.expire``): a restart at a cursor older than that cannot be served exactly.
    Off, table maps without names take them from information_schema now, with a warning (wrong for rows written before
    a later DDL).
    """

    enable: bool = attrs.field(default=True, validator=_bool, metadata=canal_key("canal.instance.tsdb.enable", "bool"))
    """Keep the schema history (every table's layout at any binlog position); off, unnamed table maps take names from
    information_schema now."""
    snapshot_interval_h: float = attrs.field(
        default=24, validator=_positive_number, metadata=canal_key("canal.instance.tsdb.snapshot.interval", "float")
    )
    """Snapshot all layouts when the newest snapshot is this many hours old (binlog event time)."""
    snapshot_expire_h: float = attrs.field(
        default=360, validator=_positive_number, metadata=canal_key("canal.instance.tsdb.snapshot.expire", "float")
    )
    """Drop snapshots and DDLs older than this many hours; a restart at an older cursor cannot be served exactly."""
    snapshot_ddls: int = attrs.field(
        default=1000, validator=_positive_int, metadata=canal_key("pycanal.schema.snapshot.ddls", "int")
    )
    """Snapshot all layouts every this many DDLs."""

    def redacted(self) -> dict[str, Any]:
        return _redacted(self)


# --------------------------------------------------------------------------------------------------------------------
# the snapshot of tables that already hold rows
# --------------------------------------------------------------------------------------------------------------------


class SnapshotMode(enum.StrEnum):
    """When a destination snapshots its tables into the stream (Debezium's ``snapshot.mode``).

    * ``never``: only changes after the start position (canal's behaviour).
    * ``initial``: on a destination's first start -- no consumer cursor and no configured start position -- snapshot
      the captured tables while streaming from the server's current position, without a gap.
    * ``when_needed``: ``initial``, and also when the consumer cursor names a binlog file the server no longer has
      (purged): instead of failing with :class:`~canal.errors.BinlogPurgedError`, stream from the server's current
      position and snapshot the captured tables again. Rows deleted while the binlog was missing are not in a
      snapshot: a consumer that applies SNAPSHOT rows as upserts keeps them (start its copy afresh to drop them).
    """

    NEVER = "never"
    INITIAL = "initial"
    INITIAL_ONLY = "initial_only"
    WHEN_NEEDED = "when_needed"


def _to_snapshot_mode(value: SnapshotMode | str) -> SnapshotMode:
    return _enum_converter(SnapshotMode, "SnapshotConfig", "mode")(value)


class HealMode(enum.StrEnum):
    """What the capture does where the server changed a captured table's rows without logging them (partition
    maintenance, a table renamed onto a captured name, DML logged as a statement, an ALTER whose conversions a copy
    cannot repeat, a partial row image a copy cannot apply; docs/concepts/fail-closed.md lists them).

    * ``snapshot`` (the default): heal -- the statement's entry says the tables' rows are void from there
      (:data:`canal.parse.heal_marks.HEAL`), and the capture reads the tables again in the stream, from that point
      (an in-stream snapshot, :mod:`canal.snapshot.heal`); a mirror replaces each table with what the read gives,
      merged with the changes after it. Needs a MariaDB source (or a ``watermark_table``), as a snapshot does.
    * ``stop``: the typed stop of "fail closed" (:class:`~canal.errors.UnmodeledStatementError`), and the changes a
      mirror cannot follow reach it as they are (it stops typed there).
    """

    SNAPSHOT = "snapshot"
    STOP = "stop"


def to_heal_mode(value: HealMode | str) -> HealMode:
    return _enum_converter(HealMode, "InstanceConfig", "heal")(value)


class KeylessTables(enum.StrEnum):
    """What a snapshot does with a table that has no primary key and no unique key over NOT NULL columns (one
    with such a unique key is chunked by it).

    * ``read_whole``: read it in one consistent-snapshot transaction, streamed in pieces of ``chunk_rows`` (memory
      holds a piece, not the table), with a warning. Without a key there is nothing to resume after: a restart
      reads the table again from its first row, so rows acked before it come again (as upserts of equal rows).
    * ``refuse``: the snapshot fails with :class:`~canal.errors.SnapshotError` before reading anything.
    """

    READ_WHOLE = "read_whole"
    REFUSE = "refuse"


def _to_keyless(value: KeylessTables | str) -> KeylessTables:
    return _enum_converter(KeylessTables, "SnapshotConfig", "keyless")(value)


def _to_snapshot_tables(value: object) -> tuple[str, ...] | None:
    if value is None or value == "":
        return None
    names = [n.strip() for n in value.split(",")] if isinstance(value, str) else list(cast(Any, value))
    for name in names:
        if not _is_table_name(name):
            why = f"names tables as db.table (`shop.eu`.t where a name holds a dot), got {name!r}"
            raise _FieldError("SnapshotConfig", "tables", value, why)
    return tuple(names)


def _is_table_name(name: object) -> bool:
    """Whether ``name`` is ``db.table`` as :func:`canal.names.qualified` writes it, both parts named."""
    if not isinstance(name, str):
        return False
    try:
        db, table = split_qualified(name)
    except ValueError:
        return False
    return bool(db and table)


def _to_watermark_table(value: object) -> str | None:
    if value is None or value == "":
        return None
    if not _is_table_name(value):
        raise _FieldError("SnapshotConfig", "watermark_table", value, f"names a table as db.table, got {value!r}")
    return str(value)


def _optional_positive(inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
    if value is not None:
        _positive_number(inst, attr, value)


@keyed
@attrs.frozen(slots=True)
class SnapshotConfig:
    """The snapshot of tables that already hold rows (see ``canal.snapshot``).

    ``tables``: ``db.table`` names, None for every table the instance filter captures. ``chunk_rows``: the most rows
    read per chunk. ``chunk_bytes``: the most bytes of values a chunk should hold -- chunks of wide rows (BLOBs, long
    text) hold fewer rows, measured as they are read, so memory is bounded by bytes whatever the row size.
    ``max_rows_per_s``: a ceiling on the read rate, to protect the source. ``keyless``: tables without a key (see
    :class:`KeylessTables`). ``watermark_table``: ``db.table`` for DBLog's watermarks, written around each read
    (servers that do not report a consistent snapshot's binlog position, such as MySQL; see
    ``canal.snapshot.marks``); None (the default) reads without writing, at MariaDB's snapshot position.
    """

    mode: SnapshotMode = attrs.field(
        default=SnapshotMode.NEVER, converter=_to_snapshot_mode, metadata=canal_key("pycanal.snapshot.mode", "enum")
    )
    """When tables that already hold rows are snapshotted into the stream: `never`, `initial`, `initial_only`,
    `when_needed`."""
    tables: tuple[str, ...] | None = attrs.field(
        default=None, converter=_to_snapshot_tables, metadata=canal_key("pycanal.snapshot.tables", "opt_list")
    )
    """`db.table` names to snapshot (None: every table the instance filter captures)."""
    chunk_rows: int = attrs.field(
        default=10_000, validator=_positive_int, metadata=canal_key("pycanal.snapshot.chunk.rows", "int")
    )
    """Most rows read per chunk."""
    max_rows_per_s: float | None = attrs.field(
        default=None, validator=_optional_positive, metadata=canal_key("pycanal.snapshot.max.rows.per.s", "opt_float")
    )
    """Ceiling on the read rate, to protect the source (None: none)."""
    chunk_bytes: int = attrs.field(
        default=8 << 20, validator=_positive_int, metadata=canal_key("pycanal.snapshot.chunk.bytes", "int")
    )
    """Most bytes of values per chunk (chunks of wide rows hold fewer rows)."""
    keyless: KeylessTables = attrs.field(
        default=KeylessTables.READ_WHOLE, converter=_to_keyless, metadata=canal_key("pycanal.snapshot.keyless", "enum")
    )
    """Tables without a primary or NOT NULL unique key: `read_whole` (one transaction, streamed in pieces) or
    `refuse`."""
    watermark_table: str | None = attrs.field(
        default=None,
        converter=_to_watermark_table,
        metadata=canal_key("pycanal.snapshot.watermark.table", "opt_str"),
    )
    """`db.table` for DBLog's watermarks, for servers without MariaDB's consistent snapshot position (MySQL); None: no
    writes."""

    @property
    def watermark(self) -> tuple[str, str] | None:
        """``watermark_table`` as (database, table)."""
        if self.watermark_table is None:
            return None
        return split_qualified(self.watermark_table)

    def redacted(self) -> dict[str, Any]:
        return _redacted(self)
