"""Spark's redaction of the ``canal`` source's secret options, set by :func:`canal.spark.register` on a local
session: the plan of a query (its options, as ``explain`` and the SQL tab show them) and the protobuf text of the same
query as a Spark Connect client sends it (what a Connect server writes to its event log) hold no secret; options
that name a secret stay readable, and a pattern the user set keeps working. Over a real Connect server:
tests/test_spark_connect_secrets.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark")

from canal.spark import register
from canal.spark.redaction import OPTIONS_PATTERN, OPTIONS_REDACTION, STRING_PATTERN, STRING_REDACTION

pytestmark = pytest.mark.spark

# values Spark's own redaction (by key or by value: secret, password, token, access key) would not catch
SECRETS = {
    "master.password": 'pw"with\\quotes',
    "canal.instance.dbPassword": "hidden-db-1",
    "canal.instance.master.clientCertificateKeyStorePassword": "hidden-tls-2",
    "pycanal.zookeeper.auth": "digest:canal:hidden-zk-3",
    "spool.storage.AWS_SECRET_ACCESS_KEY": "hidden-aws-4",
    "spool.storage.aws_session_token": "hidden-aws-5",
    "spool.storage.AZURE_STORAGE_ACCOUNT_KEY": "hidden-azure-6",
    "spool.storage.GOOGLE_SERVICE_ACCOUNT_KEY": '{"private_key": "hidden-gcs-7"}',
}
PLAIN = {
    "destination": "d",
    "master.address": "127.0.0.1:3306",
    "master.user": "canal-user",
    "spool.dir": "s3://bucket/spool",
    "spool.storage.AWS_ACCESS_KEY_ID": "AKIDPLAIN",
    "master.password.env": "CAPTURE_PASSWORD_VARIABLE",
    "spool.storage.AWS_SECRET_ACCESS_KEY.file": "/run/secrets/s3-key-file",
}


@pytest.fixture
def session(spark: Any) -> Iterator[Any]:
    """The session's redaction patterns put back after the test (the session is shared)."""
    before = {key: spark.conf.get(key, None) for key in (OPTIONS_REDACTION, STRING_REDACTION)}
    try:
        yield spark
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def _plan_text(spark: Any, options: dict[str, str]) -> str:
    """The query's plans as ``explain`` shows them (the analyzed plan lists the source's options)."""
    df = spark.readStream.format("canal").options(**options).load()
    text: str = df._jdf.queryExecution().toString()
    assert "StreamingRelationV2" in text and "master.address=127.0.0.1:3306" in text
    return text


def _connect_text(spark: Any, options: dict[str, str]) -> str:
    """The query's read as a Spark Connect client sends it (protobuf text), redacted as the Connect server redacts
    the statement it writes to its event log: Spark's own ``Utils.redact`` with the session's string pattern."""
    from pyspark.sql.connect.plan import DataSource

    text = str(DataSource(format="canal", options=options, is_streaming=True).plan(None))
    pattern = spark._jsparkSession.sessionState().conf().stringRedactionPattern()
    redacted: str = spark._jvm.org.apache.spark.util.Utils.redact(pattern, text)
    return redacted


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


def test_a_registered_sessions_plans_hold_no_secret_option(session: Any) -> None:
    register(session)
    options = {**PLAIN, **SECRETS}
    plan = _plan_text(session, options)
    sent = _connect_text(session, options)
    for value in SECRETS.values():
        assert value not in plan and _escaped(value) not in sent
    assert "hidden-gcs-7" not in plan and "hidden-gcs-7" not in sent  # a JSON key: escaped in the text
    assert sent.count("*********(redacted)") == len(SECRETS)
    for key, value in PLAIN.items():  # the rest is there to read, names of secrets included
        assert f'key: "{key}"\n      value: "{value}"' in sent


def test_without_the_patterns_the_secrets_show(session: Any) -> None:
    """What the patterns prevent: Spark's defaults leave these secrets in the plan and in Connect's statement text."""
    session.conf.set(OPTIONS_REDACTION, "(?i)url")
    session.conf.unset(STRING_REDACTION)
    options = {**PLAIN, **SECRETS}
    assert "hidden-azure-6" in _plan_text(session, options) and "hidden-zk-3" in _plan_text(session, options)
    assert "hidden-aws-4" in _connect_text(session, options)


def test_register_extends_the_users_patterns_once(session: Any) -> None:
    session.conf.set(STRING_REDACTION, "(?i)internal-[0-9]+")
    session.conf.set(OPTIONS_REDACTION, "(?i)url|customer")
    register(session)
    register(session)
    assert session.conf.get(STRING_REDACTION) == f"(?:(?i)internal-[0-9]+)|{STRING_PATTERN}"
    assert session.conf.get(OPTIONS_REDACTION) == f"(?:(?i)url|customer)|{OPTIONS_PATTERN}"
    options = {**PLAIN, "customer": "acme", "filter.regex": "internal-42", **SECRETS}
    plan = _plan_text(session, options)
    sent = _connect_text(session, options)
    assert "acme" not in plan and "internal-42" not in sent  # the user's patterns still apply
    assert "hidden-aws-4" not in plan and "hidden-aws-4" not in sent
