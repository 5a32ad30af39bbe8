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

The package, by concern: :mod:`~canal.config.settings` (the setting classes of an instance: TLS, master, store,
detecting, flags, retry, ZooKeeper auth), :mod:`~canal.config.instance` (:class:`InstanceConfig`),
:mod:`~canal.config.server` (:class:`ServerConfig`), :mod:`~canal.config.conf_dir` (:func:`load_conf_dir`),
:mod:`~canal.config.properties` (syntax and placeholders), :mod:`~canal.config.keys` (canal's keys and how each setting
reads and writes), :mod:`~canal.config.fields` (validation, redaction). Import the names from ``canal.config``.

Keys pycanal knowingly does not use (tsdb, rds, mq, network buffers, parallel parser, admin, ...) are logged at debug;
any other unknown key is warned about once per process.
"""

from canal.config.conf_dir import load_conf_dir
from canal.config.fields import DEFAULT_FILTER_REGEX, ZK_AUTH_KEY
from canal.config.instance import InstanceConfig
from canal.config.keys import SSL_PROPERTY_KEYS, parse_bool
from canal.config.mq import MqConfig
from canal.config.properties import format_properties, parse_properties, resolve_placeholders
from canal.config.server import BalanceConfig, ServerConfig, to_balance_config
from canal.config.settings import (
    TLS_VERSIONS,
    BatchMode,
    DetectingConfig,
    FilterFlags,
    HealMode,
    KeylessTables,
    MasterConfig,
    MetaMode,
    RetryConfig,
    SchemaHistoryConfig,
    SnapshotConfig,
    SnapshotMode,
    SslConfig,
    SslMode,
    StoreConfig,
    ZkAuth,
    to_zk_auth,
)

__all__ = [
    "DEFAULT_FILTER_REGEX",
    "SSL_PROPERTY_KEYS",
    "TLS_VERSIONS",
    "ZK_AUTH_KEY",
    "BalanceConfig",
    "BatchMode",
    "DetectingConfig",
    "FilterFlags",
    "HealMode",
    "InstanceConfig",
    "KeylessTables",
    "MasterConfig",
    "MetaMode",
    "MqConfig",
    "RetryConfig",
    "SchemaHistoryConfig",
    "ServerConfig",
    "SnapshotConfig",
    "SnapshotMode",
    "SslConfig",
    "SslMode",
    "StoreConfig",
    "ZkAuth",
    "format_properties",
    "load_conf_dir",
    "parse_bool",
    "parse_properties",
    "resolve_placeholders",
    "to_balance_config",
    "to_zk_auth",
]
