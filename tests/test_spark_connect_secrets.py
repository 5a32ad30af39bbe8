"""Credentials over Spark Connect: the Connect server writes each query's plan, with the ``canal`` source's options,
to its event log (read by the history server and the Connect UI). On a private Connect server writing an
uncompressed event log: a query given the capture password and the object store's secret key as options, and one
naming them instead (``master.password.env``: a variable set in the server's environment only;
``spool.storage.AWS_SECRET_ACCESS_KEY.file`` and the mirror's ``AWS_SECRET_ACCESS_KEY.file``: a file), both mirror
equal to ``SELECT``, and neither secret is anywhere in the event log or in the server's own files (its log
included): :func:`canal.spark.register` extended the session's redaction patterns, and named secrets travel as
names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from canal.spark import DeltaMirror, register
from canal.spark.testing import compare_tables, master_position
from canal.testing.plugin import S3Bucket, connect_session
from canal.testing.services import SparkConnectServer
from tests.test_spark_units import _mirror_available_now, _source_options

pytestmark = [pytest.mark.integration, pytest.mark.spark]

PASSWORD_VARIABLE = "PYCANAL_TEST_CAPTURE_PASSWORD"


def _files_holding(root: Path, secrets: dict[str, str]) -> list[str]:
    """``file: secret name`` for every file under ``root`` that holds one of ``secrets`` (name -> value)."""
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        found += [f"{path}: {name}" for name, value in secrets.items() if value.encode() in data]
    return found


def test_no_credential_reaches_the_connect_servers_event_log_or_logs(
    mariadb: Any, s3_bucket: S3Bucket, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = s3_bucket.storage_options
    secrets = {"master.password": mariadb.password, "AWS_SECRET_ACCESS_KEY": storage["AWS_SECRET_ACCESS_KEY"]}
    secret_file = tmp_path / "s3-secret"
    secret_file.write_text(storage["AWS_SECRET_ACCESS_KEY"] + "\n")
    named_storage = {k: v for k, v in storage.items() if k != "AWS_SECRET_ACCESS_KEY"}
    named_storage["AWS_SECRET_ACCESS_KEY.file"] = str(secret_file)

    conn = mariadb.connect()
    db = mariadb.database
    start = master_position(conn)
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v VARCHAR(20))")
        cur.executemany(f"INSERT INTO `{db}`.t VALUES (%s, %s)", [(i, f"v{i}") for i in range(20)])
        cur.execute(f"UPDATE `{db}`.t SET v = 'changed' WHERE id < 5")
        cur.execute(f"DELETE FROM `{db}`.t WHERE id >= 15")

    events = tmp_path / "events"
    events.mkdir()
    # the password is in the server's environment only: the reader reads it there, never in this process
    monkeypatch.setenv(PASSWORD_VARIABLE, mariadb.password)
    server = SparkConnectServer(
        conf={
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": events.as_uri(),
            "spark.eventLog.compress": "false",
        }
    )
    server.start()
    monkeypatch.delenv(PASSWORD_VARIABLE)
    try:
        with connect_session(server.url) as spark:
            register(spark)
            runs = {
                "given": (
                    {
                        **_source_options(mariadb, start, tmp_path, destination="given"),
                        "spool.dir": f"{s3_bucket.url}/given/spool",
                        **{f"spool.storage.{k}": v for k, v in storage.items()},
                    },
                    DeltaMirror(f"{s3_bucket.url}/given/mirror", storage_options=storage),
                ),
                "named": (
                    {
                        **{
                            k: v for k, v in _source_options(mariadb, start, tmp_path).items() if k != "master.password"
                        },
                        "destination": "named",
                        "master.password.env": PASSWORD_VARIABLE,
                        "spool.dir": f"{s3_bucket.url}/named/spool",
                        **{f"spool.storage.{k}": v for k, v in named_storage.items()},
                    },
                    DeltaMirror(f"{s3_bucket.url}/named/mirror", storage_options=named_storage),
                ),
            }
            for name, (options, mirror) in runs.items():
                query = _mirror_available_now(spark, options, mirror, tmp_path / f"{name}-checkpoint")
                assert query.awaitTermination(180), name
                assert query.exception() is None, name
                for c in compare_tables(conn, mirror, db, ["t"]):
                    assert c.equal, f"{name}: {c}"
        assert server.workdir is not None
        assert (server.workdir / f"{server.kind}.log").stat().st_size > 0
        assert _files_holding(server.workdir, secrets) == []  # its log, and whatever else it keeps there
    finally:
        server.stop()  # ends the event log
    log = b"".join(p.read_bytes() for p in events.rglob("*") if p.is_file())
    # the plans are there, secrets hidden (the key goes with its value) and named ones named
    assert b"SparkListenerConnectOperationStarted" in log and b"*********(redacted)" in log
    assert PASSWORD_VARIABLE.encode() in log and str(secret_file).encode() in log
    assert _files_holding(events, secrets) == []
    conn.close()
