"""canal's keys: how each setting reads from and writes to ``.properties``.

Each setting declares its key once, in its attrs field's metadata (:func:`~canal.config.fields.canal_key`); the key
tables (``_STORE_SPEC``, :func:`_master_spec`, ...) and the set of known keys are derived from those declarations.
Also here: the kinds (how a key's text parses and formats), meta modes from spring xml names, directories and
sources, TLS key stores, and the report of unknown keys."""

from __future__ import annotations

import functools
import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Final, TypeVar

import attrs

from canal.config.fields import _MASK, KEYED_CLASSES, _FieldError, _warn_once
from canal.config.mq import MqConfig
from canal.config.properties import resolve_placeholders
from canal.config.settings import (
    DetectingConfig,
    FilterFlags,
    MasterConfig,
    MetaMode,
    RetryConfig,
    SchemaHistoryConfig,
    SnapshotConfig,
    SslConfig,
    SslMode,
    StoreConfig,
)
from canal.errors import ConfigError, FilterError
from canal.secrets import is_secret_key

logger = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------------------------------
# loading helpers
# --------------------------------------------------------------------------------------------------------------------


def _shown(key: str, raw: str | None) -> str:
    if raw is None:
        return "(unset)"
    return repr(_MASK) if is_secret_key(key) else repr(raw)


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
            return value if is_secret_key(key) else value.strip()
        except ConfigError:
            if not is_secret_key(key):
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
_OPT_LIST: Final = _Kind(lambda s: s, lambda v: "" if v is None else ",".join(v), "a comma-separated list")
_OPT_FLOAT: Final = _Kind(
    lambda s: None if s.strip() == "" else _parse_float(s), lambda v: "" if v is None else repr(v), "a number"
)

_Spec = tuple[tuple[str, str, _Kind], ...]
"""(field, canal key, kind) of each setting of one class that a loader reads and writes generically."""

_KINDS: Final = {
    "int": _INT,
    "float": _FLOAT,
    "bool": _BOOL,
    "str": _STR,
    "ms": _MS,
    "slave_id": _SLAVE_ID,
    "opt_int": _OPT_INT,
    "opt_str": _OPT_STR,
    "enum": _ENUM,
    "list": _LIST,
    "opt_list": _OPT_LIST,
    "opt_float": _OPT_FLOAT,
}
_PREFIXES: Final = ("master", "standby")


def _spec_of(cls: type, *, prefix: str | None = None, custom: bool = False) -> _Spec:
    """The key table of ``cls``, derived from the :func:`~canal.config.fields.canal_key` metadata of its fields.

    With ``prefix``, the fields whose key holds ``{prefix}`` (a master's or standby's own keys), filled in; without,
    the others. ``custom`` adds the keys the loader reads itself.
    """
    spec = []
    for field in attrs.fields(cls):
        template = field.metadata.get("canal_key")
        if template is None or (field.metadata["canal_custom"] and not custom):
            continue
        if ("{prefix}" in template) != (prefix is not None):
            continue
        spec.append((field.name, template.format(prefix=prefix), _KINDS[field.metadata["canal_kind"]]))
    return tuple(spec)


def _master_spec(prefix: str) -> _Spec:
    """The keys of the master (``prefix`` ``master``) or the standby (``standby``)."""
    return _spec_of(MasterConfig, prefix=prefix)


_CREDENTIAL_SPEC: Final = _spec_of(MasterConfig)  # shared by master and standby (canal.instance.dbUsername, ...)
_STORE_SPEC: Final = _spec_of(StoreConfig)
_DETECTING_SPEC: Final = _spec_of(DetectingConfig)
_FLAGS_SPEC: Final = _spec_of(FilterFlags)
_RETRY_SPEC: Final = _spec_of(RetryConfig)
_SCHEMA_HISTORY_SPEC: Final = _spec_of(SchemaHistoryConfig)
_SNAPSHOT_SPEC: Final = _spec_of(SnapshotConfig)
_MQ_SPEC: Final = _spec_of(MqConfig)


def _key(cls: type, field: str) -> str:
    """The canal key ``cls.field`` declares."""
    return _key_names(cls)[field]


def _key_names(cls: type) -> dict[str, str]:
    """field -> canal key of every keyed field of ``cls`` (custom ones too), for re-keying a field's error."""
    return {field: key for field, key, _ in _spec_of(cls, custom=True)}


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


def _parse_bool_or_error(text: str, key: str) -> bool:
    try:
        return parse_bool(text)
    except ValueError:
        raise ConfigError(f"invalid {key} = {text!r}: expected true or false", key=key) from None


# keys pycanal reads besides those its setting classes declare
_OTHER_USED_KEYS: Final = frozenset(
    {
        "canal.instance.global.spring.xml",
        "canal.instance.enableDruid",
        "pycanal.meta.mode",
        *SSL_PROPERTY_KEYS,
        *(f"pycanal.{p}.{_SSL_KEY_SUFFIX}" for p in _PREFIXES),
    }
)


def _used_keys() -> frozenset[str]:
    """Every key pycanal reads: the keys declared by the setting classes (:data:`~canal.config.fields.KEYED_CLASSES`)
    and a few read directly."""
    keys = set(_OTHER_USED_KEYS)
    for cls in KEYED_CLASSES:
        for prefix in (None, *_PREFIXES):
            keys.update(key for _, key, _ in _spec_of(cls, prefix=prefix, custom=True))
    return frozenset(keys)


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


NEAR_MISS_EDITS = 2
"""A key this many single-character edits (or fewer) from a key pycanal reads, or equal to one but for case, is taken
for a misspelling of it. No key of canal's own files is within three edits of a key pycanal reads."""


def _edits(a: str, b: str, limit: int) -> int:
    """Levenshtein distance of ``a`` and ``b``, or ``limit + 1`` once it is known to exceed ``limit`` (only the band
    of ``limit`` cells either side of the diagonal is computed)."""
    over = limit + 1
    if abs(len(a) - len(b)) > limit:
        return over
    previous = [j if j <= limit else over for j in range(len(b) + 1)]
    for i in range(1, len(a) + 1):
        low, high = max(1, i - limit), min(len(b), i + limit)
        current = [over] * (len(b) + 1)
        current[0] = i if i <= limit else over
        char = a[i - 1]
        for j in range(low, high + 1):
            current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char != b[j - 1]), over)
        if min(current[low - 1 : high + 1]) >= over:
            return over
        previous = current
    return previous[len(b)]


@functools.lru_cache(maxsize=4096)
def near_miss(key: str) -> tuple[str, ...]:
    """The keys pycanal reads that ``key`` may misspell: the one equal to it but for case, else those nearest to it
    within :data:`NEAR_MISS_EDITS` edits (several at one distance: ``canal.id`` and ``canal.ip`` are one edit
    apart); empty when none is that near."""
    folded = key.casefold()
    found: dict[int, list[str]] = {}
    for known in sorted(_used_keys()):
        if known.casefold() == folded:
            return (known,)
        distance = _edits(key, known, NEAR_MISS_EDITS)
        if distance <= NEAR_MISS_EDITS:
            found.setdefault(distance, []).append(known)
    return tuple(found[min(found)]) if found else ()


def _report_keys(keys: Iterable[str], dest: str | None, destinations: tuple[str, ...], source: str) -> None:
    """Warn (once per key per process) about unknown keys, naming the key a misspelt one was meant to be; debug-log
    the ones pycanal knowingly ignores (canal's keys of features it does not have), unless one misspells a key it
    reads (``canal.instance.mysql.slaveID``: the ignored prefix ``canal.instance.mysql.`` hid it)."""
    used = _used_keys()
    where = f" (destination {dest})" if dest else ""
    for key in keys:
        if key in used:
            continue
        meant = near_miss(key)
        if meant:
            warning = "%s%s: key %s is not read: did you mean %s?"
            _warn_once(f"unknown-key:{key}", warning, source, where, key, " or ".join(meant))
            continue
        per_dest = any(
            key == f"canal.instance.{d}.{suffix}" for d in destinations for suffix in _PER_DESTINATION_SUFFIXES
        )
        if per_dest or key in _IGNORED_KEYS or key.startswith(_IGNORED_PREFIXES):
            logger.debug("%s: key %s is not used by pycanal", source, key)
            continue
        _warn_once(f"unknown-key:{key}", "%s%s: unknown key %s is ignored", source, where, key)
