"""Field validation shared by the configuration classes: typed errors naming the field, validators and converters,
the master-address and ZooKeeper-host rules, and the redacted (loggable) form of a config."""

from __future__ import annotations

import enum
import logging
import math
import os
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

import attrs

from canal.address import split_address
from canal.client import DESTINATION_RE
from canal.errors import ConfigError

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


_warned: set[str] = set()
_warned_lock = threading.Lock()


def _warn_once(token: str, msg: str, *args: object) -> None:
    with _warned_lock:
        if token in _warned:
            return
        _warned.add(token)
    logger.warning(msg, *args)


# --------------------------------------------------------------------------------------------------------------------
# canal's key of a setting, declared once on its attrs field
# --------------------------------------------------------------------------------------------------------------------

ZK_AUTH_KEY: Final = "pycanal.zookeeper.auth"
"""pycanal's key for ZooKeeper authentication, ``digest:user:password``."""

KEYED_CLASSES: Final[list[type]] = []
"""The setting classes whose fields declare canal keys (:func:`keyed`), in import order; ``canal.config.keys``
derives the key tables and the set of known keys from them."""


def canal_key(key: str, kind: str = "str", *, custom: bool = False, secret: bool = False) -> dict[str, Any]:
    """attrs field metadata naming a setting's ``.properties`` key and how its text reads and writes.

    ``key`` may hold ``{prefix}`` (``master`` / ``standby``); ``kind`` names a kind of ``canal.config.keys``
    (``int``, ``float``, ``bool``, ``str``, ``ms``, ...). ``custom``: the loader reads and writes the key itself (a
    directory resolved against canal's working directory, a key chosen by the meta mode), but the key is still known
    and errors are reported under it.
    """
    metadata: dict[str, Any] = {"canal_key": key, "canal_kind": kind, "canal_custom": custom}
    if secret:
        metadata["secret"] = True
    return metadata


_C = TypeVar("_C", bound=type)


def keyed(cls: _C) -> _C:
    """Class decorator: ``cls``'s fields declare canal keys (see :func:`canal_key`)."""
    KEYED_CLASSES.append(cls)
    return cls
