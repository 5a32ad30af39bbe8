"""Configuration: attrs classes for one instance (destination) and the server, and loading canal's own files.

The classes are frozen values that validate on construction; a bad value raises :class:`~canal.errors.ConfigError`
(or :class:`~canal.errors.FilterError` for filters) whose ``key`` names the field -- or, when the value came from a
``.properties`` file, canal's key -- and whose message shows the offending value. Passwords never appear in a
``repr``, ``str``, log record or error message; use :meth:`InstanceConfig.redacted` for a loggable form.

Loading canal's files
---------------------
:meth:`InstanceConfig.from_properties` reads canal's ``instance.properties`` keys (optionally on top of
``canal.properties``, whose keys act as defaults, as in canal's Spring mode), :meth:`ServerConfig.from_properties`
reads ``canal.properties``, and :func:`load_conf_dir` loads a whole canal ``conf/`` directory. The syntax is Java's
``.properties`` (:func:`parse_properties`); values may hold ``${name}`` / ``${name:default}`` placeholders, resolved
as canal's Spring placeholder configurer does: another key first, then the environment variable ``name`` (or its
upper-case form with ``.``/``-`` turned into ``_``), then the default. An empty value means "not set" (the default).

Meta mode comes from ``canal.instance.global.spring.xml`` (or the per-destination ``canal.instance.{dest}.spring.xml``):
``file-instance.xml`` -> ``file``, ``default-instance.xml`` -> ``period-mixed`` (canal's default-instance.xml is a
ZooKeeper meta manager behind a periodic flush), ``memory-instance.xml`` and ``group-instance.xml`` -> ``memory``.
pycanal adds a few keys of its own, all under ``pycanal.``: ``pycanal.meta.mode`` (memory | file | zookeeper |
period-mixed, overrides the spring xml) and ``pycanal.retry.*`` (see :class:`RetryConfig`).

TLS to the master comes from canal's ``canal.instance.{master,standby}.sslMode``, ``tlsVersions`` and key-store keys
(:class:`SslConfig`; PEM files only: Java JKS/PKCS12 stores raise ConfigError saying how to convert them).

Keys pycanal knowingly does not use (tsdb, rds, mq, network buffers, parallel parser, admin, ...) are logged at debug;
any other unknown key is warned about once per process.
"""

from __future__ import annotations

import enum
import logging
import math
import os
import random
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, TypeVar, cast

import attrs

from canal.address import split_address
from canal.client import DESTINATION_RE
from canal.errors import ConfigError, FilterError
from canal.filter import FieldFilter, TableFilters
from canal.log import destination_logger

__all__ = [
    "DEFAULT_FILTER_REGEX",
    "BatchMode",
    "DetectingConfig",
    "FilterFlags",
    "InstanceConfig",
    "MasterConfig",
    "MetaMode",
    "RetryConfig",
    "ServerConfig",
    "SslConfig",
    "SslMode",
    "StoreConfig",
    "format_properties",
    "load_conf_dir",
    "parse_properties",
    "resolve_placeholders",
]

logger = logging.getLogger(__name__)

DEFAULT_FILTER_REGEX: Final = r".*\..*"
_MASK: Final = "***"

# --------------------------------------------------------------------------------------------------------------------
# errors raised by field validation
# --------------------------------------------------------------------------------------------------------------------


class _FieldError(ConfigError):
    """A field of a config class has a bad value. ``key`` is the field name; loaders re-key it to canal's key."""

    def __init__(self, owner: str, field: str, value: object, reason: str, *, secret: bool = False) -> None:
        shown = repr(_MASK) if secret else repr(value)
        super().__init__(f"invalid {owner}.{field} = {shown}: {reason}", key=field)
        self.field = field
        self.reason = reason


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)) and math.isfinite(value)


_Validator = Callable[[Any, "attrs.Attribute[Any]", Any], None]


def _check(pred: Callable[[Any], bool], reason: str) -> _Validator:
    def validate(inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
        if not pred(value):
            raise _FieldError(type(inst).__name__, attr.name, value, reason, secret=bool(attr.metadata.get("secret")))

    return validate


_bool = _check(lambda v: isinstance(v, bool), "must be a bool")
_str = _check(lambda v: isinstance(v, str), "must be a string")
_opt_str = _check(lambda v: v is None or (isinstance(v, str) and v.strip() != ""), "must be None or a non-empty string")
_positive_int = _check(lambda v: _is_int(v) and v > 0, "must be a positive integer")
_non_negative_int = _check(lambda v: _is_int(v) and v >= 0, "must be a non-negative integer")
_opt_non_negative_int = _check(lambda v: v is None or (_is_int(v) and v >= 0), "must be None or an integer >= 0")
_positive_number = _check(lambda v: _is_number(v) and v > 0, "must be a positive number")
_non_negative_number = _check(lambda v: _is_number(v) and v >= 0, "must be a number >= 0")


def _mask_repr(_value: object) -> str:
    return repr(_MASK)


_ZK_AUTH_SCHEMES = ("digest",)


@attrs.frozen(slots=True)
class ZkAuth:
    """A ZooKeeper authentication: ``scheme`` (``digest``) and its credential (``user:password``)."""

    scheme: str
    credential: str = attrs.field(repr=lambda _value: "'***'")

    def __attrs_post_init__(self) -> None:
        if self.scheme not in _ZK_AUTH_SCHEMES:
            raise ConfigError(
                f"ZooKeeper auth scheme {self.scheme!r} is not supported (use one of {_ZK_AUTH_SCHEMES})"
            )
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
# master address
# --------------------------------------------------------------------------------------------------------------------

_FAKE_PREFIX: Final = "fake://"
_FILE_PREFIX: Final = "file://"
_FAKE_NAME_RE: Final = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


def _address_problem(address: object) -> str | None:
    if not isinstance(address, str):
        return "must be a string"
    if address.startswith(_FAKE_PREFIX):
        if not _FAKE_NAME_RE.fullmatch(address[len(_FAKE_PREFIX) :]):
            return "fake://NAME needs a NAME of letters, digits, '_', '.', '-'"
        return None
    if address.startswith(_FILE_PREFIX):
        return None if address[len(_FILE_PREFIX) :] else "file://DIR needs the directory holding the binlog files"
    try:
        split_address(address)
    except ValueError as exc:
        return str(exc)
    return None


def _validate_address(inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
    problem = _address_problem(value)
    if problem is not None:
        raise _FieldError(type(inst).__name__, attr.name, value, problem)


def _validate_timestamp(inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    if not _is_int(value) or value < 0:
        raise _FieldError(type(inst).__name__, attr.name, value, "must be None or milliseconds since the epoch (>= 0)")
    if 0 < value < 100_000_000_000:
        _warn_once(
            f"timestamp-unit:{value}",
            "MasterConfig.timestamp=%d is before 1973 in milliseconds; canal's unit is ms since the epoch, not seconds",
            value,
        )


def _strip_str(value: object) -> object:
    return value.strip() if isinstance(value, str) else value


def _opt_strip(value: object) -> object:
    if isinstance(value, str):
        value = value.strip()
        return value or None
    return value


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
    ca: str | None = attrs.field(default=None, converter=_opt_path_str, validator=_opt_path)
    cert: str | None = attrs.field(default=None, converter=_opt_path_str, validator=_opt_path)
    key: str | None = attrs.field(default=None, converter=_opt_path_str, validator=_opt_path)
    key_password: str | None = attrs.field(
        default=None,
        repr=lambda v: "None" if v is None else repr(_MASK),
        validator=_check(lambda v: v is None or isinstance(v, str), "must be None or a string"),
        metadata={"secret": True},
    )
    tls_versions: tuple[str, ...] = attrs.field(
        default=(), converter=_to_tls_versions, validator=_validate_tls_versions
    )

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

    address: str = attrs.field(converter=_strip_str, validator=_validate_address)
    username: str = attrs.field(default="canal", validator=_str)
    password: str = attrs.field(default="canal", repr=_mask_repr, validator=_str, metadata={"secret": True})
    journal_name: str | None = attrs.field(default=None, converter=_opt_strip, validator=_opt_str)
    position: int | None = attrs.field(default=None, validator=_opt_non_negative_int)
    timestamp: int | None = attrs.field(default=None, validator=_validate_timestamp)
    gtid: str | None = attrs.field(default=None, converter=_opt_strip, validator=_opt_str)
    ssl: SslConfig = attrs.field(
        factory=SslConfig,
        converter=_to_ssl_config,
        validator=_check(lambda v: isinstance(v, SslConfig), "must be an SslConfig or an SslMode name"),
    )

    def __attrs_post_init__(self) -> None:
        if self.journal_name is not None and re.search(r"[\s/\\]", self.journal_name):
            raise _FieldError("MasterConfig", "journal_name", self.journal_name, "must be a binlog file name")
        if self.position is not None and self.journal_name is None:
            raise _FieldError("MasterConfig", "position", self.position, "a position needs journal_name (its file)")

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


@attrs.frozen(slots=True)
class StoreConfig:
    """The bounded ring-buffer event store (canal's MemoryEventStoreWithBuffer)."""

    buffer_size: int = attrs.field(
        default=16384,
        validator=_check(lambda v: _is_int(v) and v > 0 and v & (v - 1) == 0, "must be a power of two, e.g. 16384"),
    )
    memory_unit: int = attrs.field(default=1024, validator=_positive_int)
    batch_mode: BatchMode = attrs.field(default=BatchMode.MEMSIZE, converter=_to_batch_mode)
    ddl_isolation: bool = attrs.field(default=False, validator=_bool)

    @property
    def max_bytes(self) -> int:
        """The byte bound of the store in MEMSIZE mode: ``buffer_size * memory_unit``."""
        return self.buffer_size * self.memory_unit

    def redacted(self) -> dict[str, Any]:
        return _redacted(self)


@attrs.frozen(slots=True)
class DetectingConfig:
    """canal's heartbeat detection: run ``sql`` on the master every ``interval_s`` seconds; after ``retry_threshold``
    consecutive failures and with ``ha_switch``, switch to the standby master."""

    enable: bool = attrs.field(default=False, validator=_bool)
    sql: str = attrs.field(
        default="SELECT 1",
        converter=_strip_str,
        validator=_check(lambda v: isinstance(v, str) and v != "", "must be a non-empty SQL statement"),
    )
    interval_s: float = attrs.field(default=3, validator=_positive_number)
    retry_threshold: int = attrs.field(default=3, validator=_positive_int)
    ha_switch: bool = attrs.field(default=False, validator=_bool)

    def redacted(self) -> dict[str, Any]:
        return _redacted(self)


@attrs.frozen(slots=True)
class FilterFlags:
    """canal's event filter switches; True drops that kind of event. All default to False.

    ``query_dml``/``query_ddl``/``query_dcl``: drop statement (QUERY) events of that class; ``rows``: drop row data;
    ``table_error``: skip tables whose metadata cannot be read instead of failing; ``transaction_entry``: drop
    TRANSACTIONBEGIN/END entries; ``dml_insert``/``dml_update``/``dml_delete``: drop row changes of that type.
    """

    query_dml: bool = attrs.field(default=False, validator=_bool)
    query_ddl: bool = attrs.field(default=False, validator=_bool)
    query_dcl: bool = attrs.field(default=False, validator=_bool)
    rows: bool = attrs.field(default=False, validator=_bool)
    table_error: bool = attrs.field(default=False, validator=_bool)
    transaction_entry: bool = attrs.field(default=False, validator=_bool)
    dml_insert: bool = attrs.field(default=False, validator=_bool)
    dml_update: bool = attrs.field(default=False, validator=_bool)
    dml_delete: bool = attrs.field(default=False, validator=_bool)

    def redacted(self) -> dict[str, Any]:
        return _redacted(self)


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

    initial_backoff_s: float = attrs.field(default=0.1, validator=_positive_number)
    max_backoff_s: float = attrs.field(default=5.0, validator=_positive_number)
    multiplier: float = attrs.field(
        default=2.0, validator=_check(lambda v: _is_number(v) and v >= 1, "must be a number >= 1")
    )
    jitter: float = attrs.field(
        default=0.2, validator=_check(lambda v: _is_number(v) and 0 <= v <= 1, "must be a fraction in 0..1")
    )
    max_attempts: int | None = attrs.field(
        default=None, validator=_check(lambda v: v is None or (_is_int(v) and v > 0), "must be None or >= 1")
    )
    purge_threshold: int = attrs.field(default=3, validator=_positive_int)
    reset_on_purge: bool = attrs.field(default=False, validator=_bool)
    connect_timeout_s: float = attrs.field(default=10.0, validator=_positive_number)
    read_timeout_s: float = attrs.field(default=30.0, validator=_positive_number)
    heartbeat_period_s: float = attrs.field(default=15.0, validator=_non_negative_number)

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


# --------------------------------------------------------------------------------------------------------------------
# filters
# --------------------------------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------------------------------
# instance
# --------------------------------------------------------------------------------------------------------------------


# MySQL/MariaDB character set names; the converter also accepts Java charset names (canal's connectionCharset).
_CHARSET_NAMES: Final = (
    "armscii8 ascii big5 binary cp1250 cp1251 cp1256 cp1257 cp850 cp852 cp866 cp932 dec8 eucjpms euckr gb18030 "
    "gb2312 gbk geostd8 greek hebrew hp8 keybcs2 koi8r koi8u latin1 latin2 latin5 latin7 macce macroman sjis swe7 "
    "tis620 ucs2 ujis utf16 utf16le utf32 utf8 utf8mb3 utf8mb4"
)
_MYSQL_CHARSETS: Final = frozenset(_CHARSET_NAMES.split())
_JAVA_CHARSETS: Final = {
    "utf-8": "utf8mb4",
    "iso-8859-1": "latin1",
    "iso8859_1": "latin1",
    "us-ascii": "ascii",
    "utf-16": "utf16",
    "utf-16be": "utf16",
    "utf-16le": "utf16le",
    "utf-32": "utf32",
    "windows-1250": "cp1250",
    "windows-1251": "cp1251",
    "windows-1256": "cp1256",
    "windows-1257": "cp1257",
    "shift_jis": "sjis",
    "windows-31j": "cp932",
    "euc-jp": "ujis",
    "euc-kr": "euckr",
    "koi8-r": "koi8r",
    "koi8-u": "koi8u",
    "iso-8859-2": "latin2",
    "iso-8859-7": "greek",
    "iso-8859-8": "hebrew",
    "iso-8859-9": "latin5",
    "iso-8859-13": "latin7",
    "tis-620": "tis620",
}


def _to_charset(value: object) -> object:
    if not isinstance(value, str):
        return value
    name = value.strip().lower()
    return _JAVA_CHARSETS.get(name, name)


_ZK_HOST_RE: Final = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)(?::\d{1,5})?")


def _zk_problem(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        return "must be None or host:port[,host:port...][/chroot]"
    hosts, slash, chroot = value.strip().partition("/")
    for host in hosts.split(","):
        if not _ZK_HOST_RE.fullmatch(host.strip()):
            return f"bad ZooKeeper host {host.strip()!r} (expected host:port[,host:port...][/chroot])"
    if slash and (chroot.endswith("/") or "//" in chroot):
        return "bad chroot path"
    return None


def _validate_zk(inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
    problem = _zk_problem(value)
    if problem:
        raise _FieldError(type(inst).__name__, attr.name, value, problem)


def _validate_destination(inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, str) or not DESTINATION_RE.fullmatch(value):
        raise _FieldError(
            type(inst).__name__,
            attr.name,
            value,
            "must be 1-128 letters, digits, '_', '.', '-' starting with a letter, digit or '_' "
            "(it becomes a ZooKeeper node and a directory name)",
        )


def _validate_meta_dir(inst: Any, attr: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and (not isinstance(value, str) or not value.strip() or "\0" in value):
        raise _FieldError(type(inst).__name__, attr.name, value, "must be None or a directory path")


def _to_path_str(value: object) -> object:
    return os.fspath(value) if isinstance(value, os.PathLike) else value


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

    destination: str = attrs.field(validator=_validate_destination)
    master: MasterConfig = attrs.field(
        validator=_check(lambda v: isinstance(v, MasterConfig), "must be a MasterConfig")
    )
    standby: MasterConfig | None = attrs.field(
        default=None, validator=_check(lambda v: v is None or isinstance(v, MasterConfig), "must be a MasterConfig")
    )
    slave_id: int | None = attrs.field(
        default=None,
        validator=_check(lambda v: v is None or (_is_int(v) and 0 < v < 2**32), "must be None or in 1..4294967295"),
    )
    charset: str = attrs.field(
        default="utf8mb4",
        converter=_to_charset,
        validator=_check(lambda v: v in _MYSQL_CHARSETS, "must be a MySQL character set name, e.g. utf8mb4"),
    )
    gtid_mode: bool = attrs.field(default=False, validator=_bool)
    filter_regex: str = attrs.field(default=DEFAULT_FILTER_REGEX, validator=_str)
    black_regex: str = attrs.field(default="", validator=_str)
    field_filter: str = attrs.field(default="", validator=_str)
    black_field_filter: str = attrs.field(default="", validator=_str)
    filter_flags: FilterFlags = attrs.field(
        factory=FilterFlags, validator=_check(lambda v: isinstance(v, FilterFlags), "must be a FilterFlags")
    )
    store: StoreConfig = attrs.field(
        factory=StoreConfig, validator=_check(lambda v: isinstance(v, StoreConfig), "must be a StoreConfig")
    )
    meta_mode: MetaMode = attrs.field(default=MetaMode.MEMORY, converter=_to_meta_mode)
    meta_dir: str | None = attrs.field(default=None, converter=_to_path_str, validator=_validate_meta_dir)
    zk_hosts: str | None = attrs.field(default=None, converter=_opt_strip, validator=_validate_zk)
    # ZooKeeper authentication ("digest", "user:password"): the session authenticates and pycanal's nodes get an ACL
    # (canal.meta.zkclient); key pycanal.zookeeper.auth = digest:user:password. Never shown.
    zk_auth: ZkAuth | None = attrs.field(
        default=None, converter=to_zk_auth, repr=_mask_repr, metadata={"secret": True}
    )
    flush_period_s: float = attrs.field(default=1.0, validator=_non_negative_number)
    detecting: DetectingConfig = attrs.field(
        factory=DetectingConfig,
        validator=_check(lambda v: isinstance(v, DetectingConfig), "must be a DetectingConfig"),
    )
    fallback_interval_s: float = attrs.field(default=60, validator=_non_negative_number)
    transaction_size: int = attrs.field(default=1024, validator=_positive_int)
    retry: RetryConfig = attrs.field(
        factory=RetryConfig, validator=_check(lambda v: isinstance(v, RetryConfig), "must be a RetryConfig")
    )

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
            dest = props.get("canal.instance.destination") or None
        if dest is None and path is not None:
            dest = path.resolve().parent.name
        if not dest:
            raise ConfigError(
                "no destination: pass destination=..., set canal.instance.destination, or load from "
                "conf/{destination}/instance.properties",
                key="canal.instance.destination",
            )
        props.raw["canal.instance.destination"] = dest
        _report_keys(instance_props, dest, _destinations_of(props, dest), "instance.properties")
        if global_props and not isinstance(canal_properties, ServerConfig):
            _report_keys(global_props, dest, _destinations_of(props, dest), "canal.properties")
        conf_dir = canal_properties.conf_dir if isinstance(canal_properties, ServerConfig) else None
        base = None if base_dir is None else os.fspath(base_dir)
        if conf_dir is None and base is not None:
            conf_dir = _resolve_dir(props.get("canal.conf.dir") or None, base)
        return _instance_from_props(props, dest, base, conf_dir)

    def to_properties(self, *, include_password: bool = False) -> str:
        """canal ``instance.properties`` text for this config (plus ``pycanal.*`` keys for settings canal lacks).

        The password is written only with ``include_password=True``. ``from_properties`` of the result gives an
        equal config (with the password when it was included).
        """
        values: dict[str, str] = {"canal.instance.destination": self.destination}
        for prefix, master in (("master", self.master), ("standby", self.standby)):
            if master is not None:
                values.update(_format_fields(master, _master_spec(prefix)))
                values.update(_format_ssl(master.ssl, prefix, include_password=include_password))
        values["canal.instance.dbUsername"] = self.master.username
        if include_password:
            values["canal.instance.dbPassword"] = self.master.password
        values.update(_format_fields(self, _INSTANCE_SPEC))
        values.update(_format_fields(self.filter_flags, _FLAGS_SPEC))
        values.update(_format_fields(self.store, _STORE_SPEC))
        values.update(_format_fields(self.detecting, _DETECTING_SPEC))
        values.update(_format_fields(self.retry, _RETRY_SPEC))
        values["pycanal.meta.mode"] = self.meta_mode.value
        if self.meta_dir is not None:
            values["canal.file.data.dir"] = self.meta_dir
        if self.zk_hosts is not None:
            values["canal.zkServers"] = self.zk_hosts
        if self.zk_auth is not None and include_password:
            values[ZK_AUTH_KEY] = f"{self.zk_auth.scheme}:{self.zk_auth.credential}"
        values[_flush_key(self.meta_mode)] = _fmt_ms(self.flush_period_s)
        return format_properties(values)


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


@attrs.frozen(slots=True)
class ServerConfig:
    """canal.properties globals: destinations, ZooKeeper, meta defaults and this server's identity for HA.

    ``ip``/``register_ip``/``port`` form the address this process registers under
    ``/otter/canal/destinations/{dest}/cluster/{ip:port}`` (an empty ip: the HA module picks the local address).
    ``meta_mode`` is the global default (``canal.instance.global.spring.xml``); ``destination_meta_modes`` holds
    per-destination overrides (``canal.instance.{dest}.spring.xml``). ``properties`` keeps every raw key
    (hidden from repr) so instance loading sees canal.properties defaults.
    """

    destinations: tuple[str, ...] = attrs.field(default=(), converter=_to_tuple, validator=_validate_destinations)
    zk_hosts: str | None = attrs.field(default=None, converter=_opt_strip, validator=_validate_zk)
    # ZooKeeper authentication ("digest", "user:password"): the session authenticates and pycanal's nodes get an ACL
    # (canal.meta.zkclient); key pycanal.zookeeper.auth = digest:user:password. Never shown.
    zk_auth: ZkAuth | None = attrs.field(
        default=None, converter=to_zk_auth, repr=_mask_repr, metadata={"secret": True}
    )
    zk_flush_period_s: float = attrs.field(default=1.0, validator=_positive_number)
    file_data_dir: str | None = attrs.field(default=None, converter=_to_path_str, validator=_validate_meta_dir)
    file_flush_period_s: float = attrs.field(default=1.0, validator=_positive_number)
    meta_mode: MetaMode = attrs.field(default=MetaMode.MEMORY, converter=_to_meta_mode)
    destination_meta_modes: Mapping[str, MetaMode] = attrs.field(factory=dict, converter=_frozen_mapping)
    conf_dir: str | None = attrs.field(default=None, converter=_to_path_str, validator=_validate_meta_dir)
    auto_scan: bool = attrs.field(default=True, validator=_bool)
    auto_scan_interval_s: float = attrs.field(default=5, validator=_positive_number)
    auto_reset_latest_pos: bool = attrs.field(default=False, validator=_bool)
    canal_id: int | None = attrs.field(default=None, validator=_opt_non_negative_int)
    ip: str = attrs.field(default="", converter=_strip_str, validator=_str)
    register_ip: str = attrs.field(default="", converter=_strip_str, validator=_str)
    port: int = attrs.field(
        default=11111, validator=_check(lambda v: _is_int(v) and 0 < v < 65536, "must be a port in 1..65535")
    )
    base_dir: str | None = attrs.field(default=None, converter=_to_path_str, validator=_validate_meta_dir)
    properties: Mapping[str, str] = attrs.field(factory=dict, converter=_frozen_mapping, repr=False, eq=False)

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
    alias = props.get("canal.conf.dir") or None
    if conf_dir is not None:
        kwargs["conf_dir"] = conf_dir
    elif "conf_dir" in kwargs:
        kwargs["conf_dir"] = _resolve_dir(kwargs["conf_dir"], base)
    if "file_data_dir" in kwargs:
        kwargs["file_data_dir"] = _resolve_dir(kwargs["file_data_dir"], base, alias, kwargs.get("conf_dir"))
    _report_keys(raw, None, names, "canal.properties")
    return _build(
        ServerConfig,
        {field: key for field, key, _ in _SERVER_SPEC} | {"meta_mode": xml_key},
        props,
        destination_meta_modes=per_dest,
        base_dir=base,
        properties=raw,
        **kwargs,
    )


def load_conf_dir(path: str | os.PathLike[str]) -> tuple[ServerConfig, dict[str, InstanceConfig]]:
    """Load a canal ``conf/`` directory: ``conf/canal.properties`` and ``conf/{destination}/instance.properties``.

    ``path`` is the conf directory (or its ``canal.properties``). The destinations are those of
    ``canal.destinations``; with ``canal.auto.scan`` (canal's default) every other sub-directory holding an
    ``instance.properties`` is a destination too. Relative directories in the files are resolved as canal does,
    against its working directory ``{conf}/../bin`` (so canal's ``../conf`` means the conf directory).
    """
    conf = Path(path)
    if _is_file(conf):
        conf = conf.parent
    canal_file = conf / "canal.properties"
    if not _is_file(canal_file):
        raise ConfigError(f"no canal.properties in {os.fspath(conf)!r}", key="canal.properties")
    base_dir = os.path.normpath(os.fspath(conf.parent / "bin"))
    text, _path = _read_source(canal_file)
    server = _server_from_raw(parse_properties(text), base_dir, os.path.normpath(os.fspath(conf)))
    names = list(server.destinations)
    for name in names:
        if not _is_file(conf / name / "instance.properties"):
            raise ConfigError(
                f"invalid canal.destinations = {','.join(names)!r}: no {name}/instance.properties in "
                f"{os.fspath(conf)!r}",
                key="canal.destinations",
            )
    if server.auto_scan:
        try:
            children = sorted(conf.iterdir())
        except OSError as exc:
            what = exc.strerror or exc
            raise ConfigError(f"cannot list {os.fspath(conf)!r}: {what}", key="canal.auto.scan") from None
        for child in children:
            if child.name not in names and _is_file(child / "instance.properties"):
                if DESTINATION_RE.fullmatch(child.name):
                    names.append(child.name)
                else:
                    logger.warning("ignoring %s: %r is not a valid destination name", child, child.name)
    instances = {
        name: InstanceConfig.from_properties(
            conf / name / "instance.properties", destination=name, canal_properties=server, base_dir=base_dir
        )
        for name in names
    }
    return server, instances


# --------------------------------------------------------------------------------------------------------------------
# .properties syntax
# --------------------------------------------------------------------------------------------------------------------

_WS: Final = " \t\f"
_ESCAPES: Final = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        if i + 1 >= len(text):  # a lone trailing backslash (end of file) vanishes, as in Java
            break
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise ConfigError(f"malformed \\uxxxx escape in .properties text: {text[i : i + 6]!r}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    joined = "".join(out)
    # \\uD83D\\uDE00 style surrogate pairs -> one code point
    return re.sub(
        "[\ud800-\udbff][\udc00-\udfff]",
        lambda m: chr(0x10000 + ((ord(m.group()[0]) - 0xD800) << 10) + (ord(m.group()[1]) - 0xDC00)),
        joined,
    )


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text (``java.util.Properties.load`` rules): ``key=value``, ``key: value`` or
    ``key value``; ``#``/``!`` comment lines; a line ending in an odd number of backslashes continues on the next
    (whose leading whitespace is dropped); ``\\t \\n \\r \\f \\uXXXX`` escapes, ``\\x`` -> ``x``. Later keys win.
    Values keep trailing whitespace (as Java does); pycanal strips it when it interprets a value."""
    result: dict[str, str] = {}
    lines = re.split(r"\r\n|\r|\n", text)
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(_WS)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(_WS)
            i += 1
        if _continues(line):
            line = line[:-1]
        key_end = len(line)
        value_start = len(line)
        j = 0
        while j < len(line):
            ch = line[j]
            if ch == "\\":
                j += 2
                continue
            if ch in "=:" or ch in _WS:
                key_end = j
                k = j
                while k < len(line) and line[k] in _WS:
                    k += 1
                if ch in _WS and k < len(line) and line[k] in "=:":
                    k += 1
                elif ch in "=:":
                    k = j + 1
                while k < len(line) and line[k] in _WS:
                    k += 1
                value_start = k
                break
            j += 1
        result[_unescape(line[:key_end])] = _unescape(line[value_start:])
    return result


def _continues(line: str) -> bool:
    count = len(line) - len(line.rstrip("\\"))
    return count % 2 == 1


def _escape(text: str, *, is_key: bool) -> str:
    out: list[str] = []
    for idx, ch in enumerate(text):
        code = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[ch])
        elif ch == " " and (is_key or idx == 0):
            out.append("\\ ")
        elif ch in "=:#!" and (is_key or idx == 0):
            out.append("\\" + ch)
        elif code < 0x20 or code >= 0x7F:
            if code > 0xFFFF:
                code -= 0x10000
                out.append(f"\\u{0xD800 + (code >> 10):04X}\\u{0xDC00 + (code & 0x3FF):04X}")
            else:
                out.append(f"\\u{code:04X}")
        else:
            out.append(ch)
    return "".join(out)


def format_properties(values: Mapping[str, str]) -> str:
    """Java ``.properties`` text for ``values`` (one ``key=value`` line each, ASCII with ``\\uXXXX`` escapes), such
    that :func:`parse_properties` (and Java) reads back exactly ``values``."""
    return "".join(f"{_escape(k, is_key=True)}={_escape(v, is_key=False)}\n" for k, v in values.items())


# --------------------------------------------------------------------------------------------------------------------
# placeholders
# --------------------------------------------------------------------------------------------------------------------


def _find_close(text: str, start: int) -> int:
    """Index of the ``}`` closing the placeholder whose body starts at ``start``, or -1."""
    depth = 1
    i = start
    while i < len(text):
        if text.startswith("${", i):
            depth += 1
            i += 2
            continue
        if text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _split_default(body: str) -> tuple[str, str | None]:
    depth = 0
    i = 0
    while i < len(body):
        if body.startswith("${", i):
            depth += 1
            i += 2
            continue
        if body[i] == "}":
            depth -= 1
        elif body[i] == ":" and depth == 0:
            return body[:i], body[i + 1 :]
        i += 1
    return body, None


def _env_lookup(name: str, environ: Mapping[str, str]) -> str | None:
    if name in environ:
        return environ[name]
    relaxed = re.sub(r"[.\-]", "_", name).upper()
    return environ.get(relaxed)


def resolve_placeholders(
    value: str,
    lookup: Callable[[str], str | None],
    *,
    key: str = "value",
    environ: Mapping[str, str] | None = None,
    _stack: tuple[str, ...] = (),
) -> str:
    """Resolve ``${name}`` / ``${name:default}`` in ``value`` as canal's Spring configuration does.

    ``name`` is looked up with ``lookup`` (other keys; its result is resolved in turn), then in ``environ`` (default
    ``os.environ``) as ``name`` or ``NAME_WITH_UNDERSCORES``, then the default is used. Placeholders nest. An
    unresolvable placeholder or a cycle raises ConfigError naming ``key`` (never the value).
    """
    env = os.environ if environ is None else environ
    out: list[str] = []
    i = 0
    while True:
        start = value.find("${", i)
        if start < 0:
            out.append(value[i:])
            break
        end = _find_close(value, start + 2)
        if end < 0:
            out.append(value[i:])
            break
        out.append(value[i:start])
        body = value[start + 2 : end]
        name_part, default = _split_default(body)
        name = resolve_placeholders(name_part, lookup, key=key, environ=env, _stack=_stack).strip()
        if name in _stack:
            raise ConfigError(f"{key}: circular placeholder ${{{name}}}", key=key)
        found = lookup(name)
        if found is not None:
            found = resolve_placeholders(found, lookup, key=key, environ=env, _stack=(*_stack, name))
        else:
            found = _env_lookup(name, env)
        if found is None:
            if default is None:
                raise ConfigError(
                    f"{key}: cannot resolve placeholder ${{{name}}} (no such key or environment variable, no default)",
                    key=key,
                )
            found = resolve_placeholders(default, lookup, key=key, environ=env, _stack=_stack)
        out.append(found)
        i = end + 1
    return "".join(out)


# --------------------------------------------------------------------------------------------------------------------
# loading helpers
# --------------------------------------------------------------------------------------------------------------------

_SECRET_KEY_RE: Final = re.compile(r"pass(?:word|wd)?|secret|accesskey|token|pwd|zookeeper\.auth", re.IGNORECASE)
ZK_AUTH_KEY: Final = "pycanal.zookeeper.auth"  # digest:user:password


def _is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEY_RE.search(key))


def _shown(key: str, raw: str | None) -> str:
    if raw is None:
        return "(unset)"
    return repr(_MASK) if _is_secret_key(key) else repr(raw)


class _Props:
    """Merged properties with lazy placeholder resolution (only the keys pycanal reads must resolve)."""

    def __init__(self, raw: dict[str, str]) -> None:
        self.raw = raw

    def _lookup(self, name: str) -> str | None:
        return self.raw.get(name)

    def get(self, key: str) -> str | None:
        """The resolved value, stripped (except secrets: Java keeps a password's trailing blanks); None when the
        key is absent."""
        raw = self.raw.get(key)
        if raw is None:
            return None
        try:
            value = resolve_placeholders(raw, self._lookup, key=key, _stack=(key,))
            return value if _is_secret_key(key) else value.strip()
        except ConfigError:
            if not _is_secret_key(key):
                raise
            # the placeholder's name is part of the secret value: do not show it
            raise ConfigError(f"{key}: cannot resolve a placeholder in its value", key=key) from None


class _Kind:
    def __init__(self, parse: Callable[[str], Any], fmt: Callable[[Any], str], expect: str) -> None:
        self.parse = parse
        self.fmt = fmt
        self.expect = expect


def _parse_int(text: str) -> int:
    if not re.fullmatch(r"[+-]?\d+", text):
        raise ValueError
    return int(text)


def _parse_float(text: str) -> float:
    if not re.fullmatch(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", text):
        raise ValueError
    number = float(text)
    return int(number) if number.is_integer() and re.fullmatch(r"[+-]?\d+", text) else number


_TRUE: Final = frozenset({"true", "yes", "on", "1"})
_FALSE: Final = frozenset({"false", "no", "off", "0"})


def parse_bool(text: str) -> bool:
    """canal's boolean spellings (true/yes/on/1, false/no/off/0, any case); ValueError for anything else."""
    lowered = text.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError


def _fmt_number(value: Any) -> str:
    return repr(value)


def _fmt_ms(seconds: Any) -> str:
    ms = seconds * 1000
    return str(round(ms)) if abs(ms - round(ms)) < 1e-9 else repr(ms)


def _parse_ms(text: str) -> float:
    return _parse_float(text) / 1000


def _parse_slave_id(text: str) -> int | None:
    value = _parse_int(text)
    return None if value == 0 else value


_INT: Final = _Kind(_parse_int, _fmt_number, "an integer")
_FLOAT: Final = _Kind(_parse_float, _fmt_number, "a number")
_BOOL: Final = _Kind(parse_bool, lambda v: "true" if v else "false", "true or false")
_STR: Final = _Kind(lambda s: s, str, "a string")
_MS: Final = _Kind(_parse_ms, _fmt_ms, "a number of milliseconds")
_SLAVE_ID: Final = _Kind(_parse_slave_id, lambda v: "0" if v is None else str(v), "an integer")
_OPT_INT: Final = _Kind(_parse_int, lambda v: "" if v is None else str(v), "an integer")
_OPT_STR: Final = _Kind(lambda s: s, lambda v: "" if v is None else str(v), "a string")
_ENUM: Final = _Kind(lambda s: s, lambda v: str(v.value), "a name")
_LIST: Final = _Kind(lambda s: s, lambda v: ",".join(v), "a comma-separated list")

_Spec = tuple[tuple[str, str, _Kind], ...]


def _master_spec(prefix: str) -> _Spec:
    base = f"canal.instance.{prefix}."
    return (
        ("address", base + "address", _STR),
        ("journal_name", base + "journal.name", _OPT_STR),
        ("position", base + "position", _OPT_INT),
        ("timestamp", base + "timestamp", _OPT_INT),
        ("gtid", base + "gtid", _OPT_STR),
    )


_CREDENTIAL_SPEC: Final[_Spec] = (
    ("username", "canal.instance.dbUsername", _STR),
    ("password", "canal.instance.dbPassword", _STR),
)
_STORE_SPEC: Final[_Spec] = (
    ("buffer_size", "canal.instance.memory.buffer.size", _INT),
    ("memory_unit", "canal.instance.memory.buffer.memunit", _INT),
    ("batch_mode", "canal.instance.memory.batch.mode", _ENUM),
    ("ddl_isolation", "canal.instance.get.ddl.isolation", _BOOL),
)
_DETECTING_SPEC: Final[_Spec] = (
    ("enable", "canal.instance.detecting.enable", _BOOL),
    ("sql", "canal.instance.detecting.sql", _STR),
    ("interval_s", "canal.instance.detecting.interval.time", _FLOAT),
    ("retry_threshold", "canal.instance.detecting.retry.threshold", _INT),
    ("ha_switch", "canal.instance.detecting.heartbeatHaEnable", _BOOL),
)
_FLAGS_SPEC: Final[_Spec] = (
    ("query_dml", "canal.instance.filter.query.dml", _BOOL),
    ("query_ddl", "canal.instance.filter.query.ddl", _BOOL),
    ("query_dcl", "canal.instance.filter.query.dcl", _BOOL),
    ("rows", "canal.instance.filter.rows", _BOOL),
    ("table_error", "canal.instance.filter.table.error", _BOOL),
    ("transaction_entry", "canal.instance.filter.transaction.entry", _BOOL),
    ("dml_insert", "canal.instance.filter.dml.insert", _BOOL),
    ("dml_update", "canal.instance.filter.dml.update", _BOOL),
    ("dml_delete", "canal.instance.filter.dml.delete", _BOOL),
)
_RETRY_SPEC: Final[_Spec] = (
    ("initial_backoff_s", "pycanal.retry.backoff.initial", _FLOAT),
    ("max_backoff_s", "pycanal.retry.backoff.max", _FLOAT),
    ("multiplier", "pycanal.retry.backoff.multiplier", _FLOAT),
    ("jitter", "pycanal.retry.jitter", _FLOAT),
    ("max_attempts", "pycanal.retry.max.attempts", _OPT_INT),
    ("purge_threshold", "pycanal.retry.purge.threshold", _INT),
    ("reset_on_purge", "canal.auto.reset.latest.pos.mode", _BOOL),
    ("connect_timeout_s", "pycanal.retry.connect.timeout", _FLOAT),
    ("read_timeout_s", "canal.instance.network.soTimeout", _FLOAT),
    ("heartbeat_period_s", "pycanal.retry.heartbeat.period", _FLOAT),
)
_INSTANCE_SPEC: Final[_Spec] = (
    ("slave_id", "canal.instance.mysql.slaveId", _SLAVE_ID),
    ("charset", "canal.instance.connectionCharset", _STR),
    ("gtid_mode", "canal.instance.gtidon", _BOOL),
    ("filter_regex", "canal.instance.filter.regex", _STR),
    ("black_regex", "canal.instance.filter.black.regex", _STR),
    ("field_filter", "canal.instance.filter.field", _STR),
    ("black_field_filter", "canal.instance.filter.black.field", _STR),
    ("fallback_interval_s", "canal.instance.fallbackIntervalInSeconds", _FLOAT),
    ("transaction_size", "canal.instance.transaction.size", _INT),
)
_SERVER_SPEC: Final[_Spec] = (
    ("destinations", "canal.destinations", _LIST),
    ("zk_hosts", "canal.zkServers", _STR),
    ("zk_auth", ZK_AUTH_KEY, _STR),
    ("zk_flush_period_s", "canal.zookeeper.flush.period", _MS),
    ("file_data_dir", "canal.file.data.dir", _STR),
    ("file_flush_period_s", "canal.file.flush.period", _MS),
    ("conf_dir", "canal.conf.dir", _STR),
    ("auto_scan", "canal.auto.scan", _BOOL),
    ("auto_scan_interval_s", "canal.auto.scan.interval", _FLOAT),
    ("auto_reset_latest_pos", "canal.auto.reset.latest.pos.mode", _BOOL),
    ("canal_id", "canal.id", _INT),
    ("ip", "canal.ip", _STR),
    ("register_ip", "canal.register.ip", _STR),
    ("port", "canal.port", _INT),
)


def _flush_key(mode: MetaMode) -> str:
    return (
        "canal.zookeeper.flush.period"
        if mode in (MetaMode.ZOOKEEPER, MetaMode.PERIOD_MIXED)
        else ("canal.file.flush.period")
    )


def _read_fields(props: _Props, spec: _Spec) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    for field, key, kind in spec:
        text = props.get(key)
        if not text:
            continue
        try:
            kwargs[field] = kind.parse(text)
        except ValueError:
            raise ConfigError(f"invalid {key} = {_shown(key, text)}: expected {kind.expect}", key=key) from None
    return kwargs


def _format_fields(obj: Any, spec: _Spec) -> dict[str, str]:
    return {key: kind.fmt(getattr(obj, field)) for field, key, kind in spec}


_T = TypeVar("_T")


def _build(cls: Callable[..., _T], keys: Mapping[str, str], props: _Props, **kwargs: Any) -> _T:
    """``cls(**kwargs)``, re-keying a field error to canal's key and showing the raw value of that key."""
    try:
        return cls(**kwargs)
    except _FieldError as exc:
        key = keys.get(exc.field)
        if key is None:
            raise
        raw = props.raw.get(key)
        shown = _shown(key, raw.strip() if raw is not None else None)
        raise ConfigError(f"invalid {key} = {shown}: {exc.reason}", key=key) from None
    except FilterError as exc:
        key = keys.get(exc.key or "")
        if key is None:
            raise
        raise FilterError(str(exc).replace(f"{exc.key}:", f"{key}:", 1), key=key) from None


_SPRING_XML_MODES: Final = {
    "file-instance.xml": MetaMode.FILE,
    "default-instance.xml": MetaMode.PERIOD_MIXED,
    "memory-instance.xml": MetaMode.MEMORY,
    "group-instance.xml": MetaMode.MEMORY,
}


def _meta_mode_from_xml(value: str, key: str) -> MetaMode:
    name = value.rsplit("/", 1)[-1].rsplit(":", 1)[-1].strip()
    mode = _SPRING_XML_MODES.get(name)
    if mode is None:
        raise ConfigError(
            f"invalid {key} = {value!r}: expected classpath:spring/(file|default|memory|group)-instance.xml", key=key
        )
    if name == "group-instance.xml":
        _warn_once(
            "group-instance.xml",
            "%s = %s: group parsing (several masters merged) is not configured from properties; memory meta is used",
            key,
            value,
        )
    return mode


def _resolve_dir(value: Any, base: str | None, conf_alias: str | None = None, conf_dir: str | None = None) -> Any:
    """Resolve a relative directory as canal does (against its working directory ``base``); a path equal to or
    under the raw ``canal.conf.dir`` (``conf_alias``, e.g. ``../conf``) maps onto the actual conf directory."""
    if not isinstance(value, str) or os.path.isabs(value):
        return value
    if conf_alias and conf_dir and not os.path.isabs(conf_alias):
        norm, alias = os.path.normpath(value), os.path.normpath(conf_alias)
        if norm == alias:
            return conf_dir
        if norm.startswith(alias + os.sep):
            return os.path.join(conf_dir, norm[len(alias) + 1 :])
    if base is None:
        return value
    return os.path.normpath(os.path.join(base, value))


def _is_file(path: Path) -> bool:
    """Whether ``path`` is a readable-looking file; a name the OS rejects (too long, a NUL byte) is not one."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def _read_source(path_or_text: str | os.PathLike[str]) -> tuple[str, Path | None]:
    """(text, path): a str with a newline, or with ``=``/``:`` that is not an existing file, is the text itself."""
    if isinstance(path_or_text, str) and (
        "\n" in path_or_text or (("=" in path_or_text or ":" in path_or_text) and not os.path.isfile(path_or_text))
    ):
        return path_or_text, None
    path = Path(path_or_text)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {os.fspath(path)!r}: {exc.strerror or exc}", key=os.fspath(path)) from None
    except ValueError as exc:  # a NUL byte: no file has that name
        raise ConfigError(f"cannot read {os.fspath(path)!r}: {exc}", key=os.fspath(path)) from None
    try:
        return data.decode("utf-8-sig"), path
    except UnicodeDecodeError:
        return data.decode("latin-1"), path  # java.util.Properties.load's encoding


def _destinations_of(props: _Props, dest: str) -> tuple[str, ...]:
    raw = props.raw.get("canal.destinations", "")
    return (dest, *(d.strip() for d in raw.split(",") if d.strip()))


_SSL_SUFFIXES: Final = (
    "sslMode",
    "tlsVersions",
    "trustCertificateKeyStoreType",
    "trustCertificateKeyStoreUrl",
    "trustCertificateKeyStorePassword",
    "clientCertificateKeyStoreType",
    "clientCertificateKeyStoreUrl",
    "clientCertificateKeyStorePassword",
)
_SSL_KEY_SUFFIX: Final = "ssl.key"  # pycanal.{master,standby}.ssl.key: a client key in its own PEM file
SSL_PROPERTY_KEYS: Final = tuple(f"canal.instance.{p}.{s}" for p in ("master", "standby") for s in _SSL_SUFFIXES)
"""canal's TLS keys (camelCase, as canal spells them), for readers of lower-cased option names (Spark)."""
# canal reads Java key stores; Python's ssl reads PEM. The store types that have no PEM reading say how to convert.
_STORE_SUFFIXES: Final = {
    ".pem": "PEM",
    ".crt": "PEM",
    ".cer": "PEM",
    ".jks": "JKS",
    ".p12": "PKCS12",
    ".pfx": "PKCS12",
}
_STORE_CONVERSIONS: Final = {
    ("trust", "JKS"): "keytool -exportcert -rfc -keystore STORE -alias ALIAS > ca.pem",
    ("trust", "PKCS12"): "openssl pkcs12 -in STORE -nokeys -out ca.pem",
    ("client", "JKS"): "keytool -importkeystore -srckeystore STORE -destkeystore client.p12 -deststoretype PKCS12, "
    "then openssl pkcs12 -in client.p12 -out client.pem",
    ("client", "PKCS12"): "openssl pkcs12 -in STORE -out client.pem",
}


def _store_path(props: _Props, prefix: str, kind: str) -> tuple[str | None, str | None]:
    """(PEM path, password) of canal's ``{kind}CertificateKeyStore*`` keys; ConfigError for a store that is not PEM."""
    base = f"canal.instance.{prefix}.{kind}CertificateKeyStore"
    url_key, type_key, password_key = base + "Url", base + "Type", base + "Password"
    url = props.get(url_key)
    password = props.get(password_key) or None
    if not url:
        if password is not None:
            raise ConfigError(f"invalid {password_key} = '***': there is no {url_key}", key=password_key)
        return None, None
    path = _file_url_path(url, url_key)
    store_type = (props.get(type_key) or "").strip().upper()
    named = bool(store_type)
    if not named:
        store_type = _STORE_SUFFIXES.get(os.path.splitext(path)[1].lower(), "")
        if not store_type:
            raise ConfigError(
                f"{url_key} = {url!r}: set {type_key} (PEM; Java JKS and PKCS12 stores must be converted to PEM)",
                key=type_key,
            )
    if store_type != "PEM":
        how = _STORE_CONVERSIONS.get((kind, store_type))
        hint = f"; convert it: {how}" if how else ""
        what = f"invalid {type_key} = {store_type!r} ({url_key} = {url!r})" if named else f"{url_key} = {url!r}"
        raise ConfigError(
            f"{what}: a {store_type} store cannot be read, pycanal reads PEM files only (with {type_key}=PEM){hint}",
            key=type_key if named else url_key,
        )
    if kind == "trust" and password is not None:
        raise ConfigError(
            f"invalid {password_key} = '***': a PEM trust store has no password; remove the key", key=password_key
        )
    return path, password


def _file_url_path(url: str, key: str) -> str:
    """The path of canal's key store URL: ``file:/path``, ``file:///path`` or a plain path (percent-decoded)."""
    from urllib.parse import unquote

    text = url.strip()
    if text.lower().startswith("file://"):
        rest = text[len("file://") :]
        if not rest.startswith("/"):
            raise ConfigError(f"invalid {key} = {url!r}: a file URL names a local path (file:///path)", key=key)
        return unquote(rest)
    if text.lower().startswith("file:"):
        return unquote(text[len("file:") :])
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]+:", text):
        raise ConfigError(f"invalid {key} = {url!r}: only local files (file:/path) can be read", key=key)
    return text


def _ssl_from_props(props: _Props, prefix: str) -> SslConfig:
    """canal's ``canal.instance.{prefix}.sslMode`` / ``tlsVersions`` / key store keys as an :class:`SslConfig`.

    Absent ``sslMode`` means PREFERRED, as everywhere in pycanal (the MySQL client's default; canal's is DISABLED,
    which differs only against a server that offers TLS, and then in pycanal's favour). PEM stores map onto ``ca``
    and ``cert`` (whose file may hold the private key too, else ``pycanal.{prefix}.ssl.key`` names it); Java stores
    raise ConfigError saying how to convert them.
    """
    mode_key = f"canal.instance.{prefix}.sslMode"
    versions_key = f"canal.instance.{prefix}.tlsVersions"
    key_key = f"pycanal.{prefix}.{_SSL_KEY_SUFFIX}"
    keys = {
        "mode": mode_key,
        "tls_versions": versions_key,
        "key": key_key,
        "key_password": f"canal.instance.{prefix}.clientCertificateKeyStorePassword",
    }
    ca, _ = _store_path(props, prefix, "trust")
    cert, key_password = _store_path(props, prefix, "client")
    return _build(
        SslConfig,
        keys,
        props,
        mode=props.get(mode_key) or SslMode.PREFERRED,
        ca=ca,
        cert=cert,
        key=props.get(key_key) or None,
        key_password=key_password,
        tls_versions=props.get(versions_key) or (),
    )


def _format_ssl(ssl: SslConfig, prefix: str, *, include_password: bool) -> dict[str, str]:
    from urllib.parse import quote

    base = f"canal.instance.{prefix}."
    values = {base + "sslMode": ssl.mode.value}
    if ssl.tls_versions:
        values[base + "tlsVersions"] = ",".join(ssl.tls_versions)
    if ssl.ca is not None:
        values[base + "trustCertificateKeyStoreType"] = "PEM"
        values[base + "trustCertificateKeyStoreUrl"] = "file:" + quote(ssl.ca)
    if ssl.cert is not None:
        values[base + "clientCertificateKeyStoreType"] = "PEM"
        values[base + "clientCertificateKeyStoreUrl"] = "file:" + quote(ssl.cert)
        if ssl.key_password is not None and include_password:
            values[base + "clientCertificateKeyStorePassword"] = ssl.key_password
    if ssl.key is not None:
        values[f"pycanal.{prefix}.{_SSL_KEY_SUFFIX}"] = ssl.key
    return values


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

    keys = {field: key for field, key, _ in _INSTANCE_SPEC}
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

    data_dir = props.get("canal.file.data.dir")
    if not data_dir and meta_mode is MetaMode.FILE and base_dir is not None:
        data_dir = "../conf"  # canal's default, relative to its working directory
    if data_dir:
        kwargs["meta_dir"] = _resolve_dir(data_dir, base_dir, props.get("canal.conf.dir") or "../conf", conf_dir)
    zk = props.get("canal.zkServers")
    if zk:
        kwargs["zk_hosts"] = zk
    zk_auth = props.get(ZK_AUTH_KEY)
    if zk_auth:
        kwargs["zk_auth"] = zk_auth
    flush_key = _flush_key(meta_mode)
    flush = _read_fields(props, (("flush_period_s", flush_key, _MS),))
    kwargs.update(flush)
    keys.update(
        {
            "meta_dir": "canal.file.data.dir",
            "zk_hosts": "canal.zkServers",
            "zk_auth": ZK_AUTH_KEY,
            "flush_period_s": flush_key,
            "destination": "canal.instance.destination",
        }
    )
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
        **kwargs,
    )
    log.debug("loaded instance config %s", config.redacted())
    return config


def _parse_bool_or_error(text: str, key: str) -> bool:
    try:
        return parse_bool(text)
    except ValueError:
        raise ConfigError(f"invalid {key} = {text!r}: expected true or false", key=key) from None


# keys pycanal reads; everything in these specs is "known"
_USED_KEYS: Final = frozenset(
    key
    for spec in (
        _master_spec("master"),
        _master_spec("standby"),
        _CREDENTIAL_SPEC,
        _STORE_SPEC,
        _DETECTING_SPEC,
        _FLAGS_SPEC,
        _RETRY_SPEC,
        _INSTANCE_SPEC,
        _SERVER_SPEC,
    )
    for _field, key, _kind in spec
) | {
    "canal.instance.destination",
    "canal.instance.global.spring.xml",
    "canal.instance.enableDruid",
    "pycanal.meta.mode",
    *SSL_PROPERTY_KEYS,
    *(f"pycanal.{p}.{_SSL_KEY_SUFFIX}" for p in ("master", "standby")),
}

# keys canal has that pycanal knowingly does not use (logged at debug)
_IGNORED_KEYS: Final = frozenset(
    {
        "canal.instance.memory.rawEntry",
        "canal.instance.multi.stream.on",
        "canal.instance.pwdPublicKey",
        "canal.instance.filter.druid.ddl",
        "canal.instance.binlog.format",
        "canal.instance.binlog.image",
        "canal.instance.defaultDatabaseName",
        "canal.instance.global.mode",
        "canal.instance.global.lazy",
        "canal.instance.global.manager.address",
        "canal.withoutNetty",
        "canal.serverMode",
        "canal.user",
        "canal.passwd",
    }
)
_IGNORED_PREFIXES: Final = (
    "canal.instance.tsdb.",
    "canal.instance.rds.",
    "canal.instance.network.",
    "canal.instance.parser.",
    "canal.instance.mysql.",  # slaveId is used; the rest (e.g. canal.instance.mysql.ssl) are not
    "canal.mq.",
    "canal.admin.",
    "canal.aliyun.",
    "canal.metrics.",
    "canal.register.",
    "kafka.",
    "rocketmq.",
    "rabbitmq.",
    "pulsarmq.",
)
_PER_DESTINATION_SUFFIXES: Final = ("spring.xml", "mode", "lazy", "manager.address")

_warned: set[str] = set()
_warned_lock = threading.Lock()


def _warn_once(token: str, msg: str, *args: object) -> None:
    with _warned_lock:
        if token in _warned:
            return
        _warned.add(token)
    logger.warning(msg, *args)


def _report_keys(keys: Iterable[str], dest: str | None, destinations: tuple[str, ...], source: str) -> None:
    """Warn (once per key per process) about unknown keys; debug-log the ones pycanal knowingly ignores."""
    for key in keys:
        if key in _USED_KEYS:
            continue
        per_dest = any(
            key == f"canal.instance.{d}.{suffix}" for d in destinations for suffix in _PER_DESTINATION_SUFFIXES
        )
        if per_dest or key in _IGNORED_KEYS or key.startswith(_IGNORED_PREFIXES):
            logger.debug("%s: key %s is not used by pycanal", source, key)
            continue
        where = f" (destination {dest})" if dest else ""
        _warn_once(f"unknown-key:{key}", "%s%s: unknown key %s is ignored", source, where, key)


def _redacted(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field in attrs.fields(type(obj)):
        if not field.init or field.name == "properties":
            continue
        value = getattr(obj, field.name)
        out[field.name] = _MASK if field.metadata.get("secret") else _plain(value)
    return out


def _plain(value: Any) -> Any:
    if attrs.has(type(value)):
        return _redacted(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value
