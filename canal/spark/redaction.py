"""Spark's redaction of the ``canal`` source's secret options, set on a session where the source registers
(:func:`redact_source_secrets`, called by :func:`canal.spark.register`).

Spark writes a streaming query's options into text that the UI, the history server and the event log show:

* the options of the plan (``explain``, the SQL tab, ``SparkListenerSQLExecutionStart``): Spark hides the value of
  an option whose key ``spark.redaction.regex`` finds (a cluster setting, by default
  ``(?i)secret|password|token|access[.]?key``) or ``spark.sql.redaction.options.regex`` (a key pattern of the session,
  by default ``(?i)url``);
* over Spark Connect, the plan as the client sent it, protobuf text with every option as ``key: "..." value: "..."``
  (``SparkListenerConnectOperationStarted.statementText``: the event log, the Connect tab). Only a string pattern
  reaches it: ``spark.sql.redaction.string.regex`` (a session setting; unset, ``spark.redaction.string.regex``, unset
  by default), whose every match Spark replaces. ``master.password`` stood there in clear.

Both session patterns are extended with the source's secret options (:data:`OPTIONS_PATTERN`,
:data:`STRING_PATTERN`): an option under ``master.``, ``standby.``, ``canal.``, ``pycanal.`` or ``spool.storage.``
whose key holds a secret by :func:`canal.secrets.is_secret_key` (``master.password``, ``canal.instance.dbPassword``,
the TLS key's password, ``pycanal.zookeeper.auth``, ``spool.storage.AWS_SECRET_ACCESS_KEY``, ...). A pattern the user
set stays and matches as before (``(?:theirs)|ours``). Options that name a secret (``.env``, ``.file``) are left
readable: they hold a name. ``spark.redaction.regex`` is the cluster's and cannot change in a running session.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from canal.secrets import NAMED_FORMS, SECRET_KEY_PATTERN

__all__ = ["OPTIONS_PATTERN", "OPTIONS_REDACTION", "STRING_PATTERN", "STRING_REDACTION", "redact_source_secrets"]

_LOG = logging.getLogger(__name__)

OPTIONS_REDACTION: Final = "spark.sql.redaction.options.regex"
STRING_REDACTION: Final = "spark.sql.redaction.string.regex"
_STRING_FALLBACK: Final = "spark.redaction.string.regex"

_PREFIXES: Final = r"(?:master|standby|canal|pycanal|spool\.storage)\."
_NAMED: Final = "|".join(NAMED_FORMS)


def _secret_option(end: str) -> str:
    """A secret option's key up to ``end`` (where the key ends): one of the source's prefixes, a secret key's part
    after it, and not a name of a secret (``.env``, ``.file``)."""
    return rf'{_PREFIXES}(?=[^"]*(?:{SECRET_KEY_PATTERN}))(?![^"]*\.(?:{_NAMED}){end})[^"]*'


OPTIONS_PATTERN: Final = rf"(?i:^{_secret_option('$')}$)"
"""The key pattern of the source's secret options (Java's syntax, Python's alike): what is added to
``spark.sql.redaction.options.regex``."""

STRING_PATTERN: Final = rf'(?i:key: "{_secret_option(chr(34))}"\s*value: "(?:[^"\\]|\\.)*")'
"""The string pattern of a secret option in a plan's protobuf text, key and value (the value's escapes included):
what is added to ``spark.sql.redaction.string.regex``."""


def _current(spark: Any, key: str) -> str | None:
    """The pattern ``key`` holds in the session, or None. A setting without a value raises over Spark Connect where
    the classic session gives None; ``get(key)`` without a default gives a setting's own default (``(?i)url``)."""
    from pyspark.errors import SparkNoSuchElementException

    try:
        value = spark.conf.get(key)
    except SparkNoSuchElementException:
        return None
    return str(value) if value else None


def _extended(existing: str | None, ours: str) -> str:
    if not existing:
        return ours
    if ours in existing:  # registered before
        return existing
    return f"(?:{existing})|{ours}"


def redact_source_secrets(spark: Any) -> None:
    """Extend ``spark``'s session patterns so that Spark redacts the source's secret options wherever it writes a
    plan: :data:`OPTIONS_PATTERN` joins ``spark.sql.redaction.options.regex``, :data:`STRING_PATTERN` joins
    ``spark.sql.redaction.string.regex`` (or, unset, the cluster's ``spark.redaction.string.regex``). Idempotent.

    A Spark Declarative Pipeline refuses changes to its session (``SESSION_MUTATION_IN_DECLARATIVE_PIPELINE``): there
    the patterns belong in the pipeline spec's ``configuration``, and a warning says so, naming both settings and
    what to give them -- the options stay as they are (a pipeline's source options can name their secrets instead:
    ``master.password.env``, ``master.password.file``)."""
    from pyspark.errors import PySparkException

    try:
        spark.conf.set(OPTIONS_REDACTION, _extended(_current(spark, OPTIONS_REDACTION), OPTIONS_PATTERN))
        string = _current(spark, STRING_REDACTION) or _current(spark, _STRING_FALLBACK)
        spark.conf.set(STRING_REDACTION, _extended(string, STRING_PATTERN))
    except PySparkException as exc:
        if "SESSION_MUTATION_IN_DECLARATIVE_PIPELINE" not in str(exc.getCondition() or exc):
            raise
        _LOG.warning(
            "a declarative pipeline's session cannot be changed, so the canal source's secret options are not "
            "redacted by it: give them by name (master.password.env / .file), or set in the pipeline spec's "
            "configuration %s to %r and %s to %r",
            OPTIONS_REDACTION,
            OPTIONS_PATTERN,
            STRING_REDACTION,
            STRING_PATTERN,
        )
