"""Secrets in settings: which keys hold one (:func:`is_secret_key`, the one rule every redaction of pycanal's
follows), and settings that name a secret instead of holding it (:func:`check_named`, :func:`read_named`).

A setting ``KEY`` that holds a secret may be given instead as ``KEY.env``, the name of an environment variable, or
as ``KEY.file``, the path of a file that holds the secret (one line end at its end is dropped, as ``echo`` and
most secret stores write one). The secret is read where the setting is used -- in the process that opens the
connection or the store, each time it opens one -- so whatever carries the setting (a Spark plan and its event log,
a pickled reader or mirror, a log line) carries the name only. A file is re-read at each opening: a rotated secret
is taken up by the next connection.

An unset or empty variable, a missing, unreadable, empty or oversized file, a file that is not UTF-8 text, and a
secret given twice (``KEY`` beside ``KEY.env``, or both named forms) are a :class:`~canal.errors.SecretError` that
names the setting and the variable or the file -- never the secret.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import socket
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

from canal.errors import SecretError

__all__ = [
    "NAMED_FORMS",
    "SECRET_KEY_PATTERN",
    "check_named",
    "is_secret_key",
    "named_secret",
    "read_named",
    "secret_token",
]

SECRET_KEY_PATTERN: Final = (
    r"pass(?:word|wd)?|secret|accesskey|token|pwd|zookeeper\.auth"
    # object stores' keys (deltalake / object_store names): AZURE_STORAGE_ACCOUNT_KEY, ..._ACCESS_KEY, ..._MASTER_KEY,
    # GOOGLE_SERVICE_ACCOUNT_KEY (a key's JSON), AZURE_STORAGE_SAS_KEY; AWS_ACCESS_KEY_ID names a key, it is none
    r"|(?:account|access|master|sas)_key(?!_id)"
)
"""What a key that holds a secret contains (any case), as a regular expression that Python and Java read alike."""
_SECRET_KEY: Final = re.compile(SECRET_KEY_PATTERN, re.IGNORECASE)

NAMED_FORMS: Final = ("env", "file")
"""The suffixes of a key that names a secret: ``KEY.env`` (an environment variable), ``KEY.file`` (a file)."""

_MAX_FILE_BYTES: Final = 1 << 20  # a secret is small: a bigger file is a wrong path, not read into memory whole


def is_secret_key(key: str) -> bool:
    """Whether the setting ``key`` holds a secret (a password, a secret key, a token, ZooKeeper's auth)."""
    return bool(_SECRET_KEY.search(key))


def named_secret(key: str) -> tuple[str, str] | None:
    """``(KEY, form)`` when ``key`` is ``KEY.env`` or ``KEY.file`` (any case; ``form`` lower-cased), else None."""
    base, dot, form = key.rpartition(".")
    if not dot or not base or form.lower() not in NAMED_FORMS:
        return None
    return base, form.lower()


def check_named(options: Mapping[str, str], *, where: str, may_name: Callable[[str], bool]) -> None:
    """Check, without reading anything, the named secrets among ``options``: each names a key ``may_name`` allows,
    names a variable or a file (not nothing), and no secret is given twice. ``where`` names the options in messages
    (``"canal source option"``)."""
    given: dict[str, str] = {}
    for key, value in options.items():
        named = named_secret(key)
        base = key if named is None else named[0]
        if named is not None:
            if not may_name(base):
                raise SecretError(
                    f"{where} {key}: only a setting that holds a secret may name one, and {base} holds none", key=key
                )
            if not value.strip():
                what = "an environment variable" if named[1] == "env" else "a file"
                raise SecretError(f"{where} {key} is empty: it must name {what}", key=key)
        earlier = given.setdefault(base.lower(), key)
        if earlier != key:
            raise SecretError(f"{where} {base} is given twice ({earlier} and {key}): give one of them", key=key)


def read_named(options: Mapping[str, str], *, where: str, may_name: Callable[[str], bool]) -> dict[str, str]:
    """``options`` with each named secret (``KEY.env``, ``KEY.file``) replaced by ``KEY`` and the secret read in this
    process; the rest as they are. :func:`check_named` first."""
    check_named(options, where=where, may_name=may_name)
    out: dict[str, str] = {}
    for key, value in options.items():
        named = named_secret(key)
        if named is None:
            out[key] = value
        else:
            base, form = named
            out[base] = _from_env(where, key, value.strip()) if form == "env" else _from_file(where, key, value.strip())
    return out


def _here() -> str:
    return f"process {os.getpid()} on {socket.gethostname()}"


def _from_env(where: str, key: str, name: str) -> str:
    value = os.environ.get(name)
    if not value:
        state = "is not set" if value is None else "is empty"
        raise SecretError(
            f"{where} {key} names the environment variable {name}, which {state} in {_here()} (the secret is read "
            "where the setting is used: set the variable there)",
            key=key,
        )
    return value


def _from_file(where: str, key: str, path: str) -> str:
    try:
        with Path(path).open("rb") as f:
            data = f.read(_MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise SecretError(
            f"{where} {key} names the file {path}, which cannot be read in {_here()}: {exc.strerror or exc}", key=key
        ) from None
    if len(data) > _MAX_FILE_BYTES:
        raise SecretError(f"{where} {key} names the file {path}, larger than 1 MiB: not a secret's file", key=key)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SecretError(f"{where} {key} names the file {path}, which is not UTF-8 text", key=key) from None
    text = text.removesuffix("\n").removesuffix("\r")
    if not text:
        raise SecretError(f"{where} {key} names the file {path}, which is empty", key=key)
    return text


_TOKEN_KEY: Final = os.urandom(32)
_TOKENS: dict[bytes, int] = {}
_TOKENS_LOCK = threading.Lock()


def secret_token(*secrets: str) -> str:
    """A label of ``secrets`` for comparing them where they must not appear (a key that log lines name): equal for
    equal secrets within this process, and telling nothing of them -- a number given, in the order first seen, to
    each digest under a key made at random for the process."""
    digest = hmac.new(_TOKEN_KEY, json.dumps(secrets).encode("utf-8"), hashlib.sha256).digest()
    with _TOKENS_LOCK:
        return str(_TOKENS.setdefault(digest, len(_TOKENS) + 1))
