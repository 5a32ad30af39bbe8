"""Sharing a reader never weakens how a destination reads its master: destinations share one only when everything
that decides what their connection is -- the login, the TLS mode, CA, client certificate and key, TLS versions, the
charset and the checks -- is the same. Against a private MariaDB that offers TLS and accepts plain logins too, and
whose ``performance_schema`` tells which of the capture user's binlog dumps are encrypted."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from canal.client import ClientIdentity
from canal.config import InstanceConfig, MasterConfig, RetryConfig, SslConfig
from canal.parse.mysql.source import MysqlBinlogSource
from canal.protocol import EMPTY_MESSAGE_ID, EntryType
from canal.server import EmbeddedServer
from canal.testing.services import MariaDBServer
from canal.testing.tls import Certificates, make_certificates

DB = "tls_share"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"), hosts=("127.0.0.1",))


@pytest.fixture(scope="module")
def server(certs: Certificates) -> Iterator[MariaDBServer]:
    with MariaDBServer(server_id=9, tls=certs.server(), extra_args=["--performance-schema=ON"]) as srv:
        srv.execute(f"CREATE DATABASE {DB}")
        srv.execute(f"CREATE TABLE {DB}.t (id INT PRIMARY KEY, v VARCHAR(20))")
        yield srv


def dumps(srv: MariaDBServer) -> list[str]:
    """The TLS cipher of each binlog dump of the capture user on the server ("" for a plain one)."""
    rows = srv.execute(
        "SELECT COALESCE(s.VARIABLE_VALUE, '') FROM performance_schema.threads t "
        "LEFT JOIN performance_schema.status_by_thread s "
        "ON s.THREAD_ID = t.THREAD_ID AND s.VARIABLE_NAME = 'Ssl_cipher' "
        "WHERE t.PROCESSLIST_USER = %s AND t.PROCESSLIST_COMMAND = 'Binlog Dump'",
        (srv.user,),
    )
    return sorted(str(r[0]) for r in rows)


@pytest.mark.integration
def test_destinations_share_only_a_reader_of_their_own_tls_settings(
    server: MariaDBServer, certs: Certificates, tmp_path: Path
) -> None:
    journal, position = server.execute("SHOW MASTER STATUS")[0][:2]
    settings = {
        "plain1": SslConfig(mode="DISABLED"),
        "plain2": SslConfig(mode="DISABLED"),
        "secure1": SslConfig(mode="REQUIRED"),
        "secure2": SslConfig(mode="REQUIRED"),
        "verified": SslConfig(mode="VERIFY_IDENTITY", ca=str(certs.ca)),
    }
    embedded = EmbeddedServer()
    embedded.start()
    try:
        for name, ssl in settings.items():  # the plain ones first: on a key of user@address they made the reader
            master = MasterConfig(
                address=server.address,
                username=server.user,
                password=server.password,
                journal_name=str(journal),
                position=int(position),
                ssl=ssl,
            )
            embedded.start_destination(
                InstanceConfig(
                    destination=name,
                    master=master,
                    filter_regex=rf"{DB}\.t",
                    meta_dir=str(tmp_path),
                    meta_mode="file",
                    retry=RetryConfig(initial_backoff_s=0.02, max_backoff_s=0.3, heartbeat_period_s=0.3),
                )
            )
        deadline = time.monotonic() + 30
        pairs = ("plain1", "plain2", "secure1", "secure2")
        while not all(embedded.instance(n).parser.shared for n in pairs):
            assert time.monotonic() < deadline, {n: embedded.instance(n).parser.shared for n in settings}
            time.sleep(0.01)
        for i in range(3):
            server.execute(f"INSERT INTO {DB}.t VALUES (%s, %s)", (int(time.time_ns() % 10**9) + i, f"row {i}"))
        for name in settings:
            client = ClientIdentity(name, 1001)
            rows = 0
            while rows < 3:
                assert time.monotonic() < deadline, f"{name}: {rows} rows"
                msg = embedded.get(client, 100, 0.2)
                if msg.id != EMPTY_MESSAGE_ID:
                    rows += sum(len(list(e.iter_rows())) for e in msg.entries if e.entry_type is EntryType.ROWDATA)
        # one dump for the plain pair, one encrypted for the REQUIRED pair, one encrypted for VERIFY_IDENTITY alone
        ciphers = dumps(server)
        assert not embedded.instance("verified").parser.shared
    finally:
        embedded.stop()
    assert len(ciphers) == 3 and ciphers[0] == "" and all(ciphers[1:]), ciphers


def test_the_sharing_key_holds_every_setting_of_the_connection_and_no_secret(certs: Certificates) -> None:
    def key(user: str = "canal", password: str = "pw1", ssl: SslConfig | None = None, **kw: Any) -> str:
        ssl = ssl if ssl is not None else SslConfig(mode="REQUIRED")
        return MysqlBinlogSource("127.0.0.1:3306", user, password, ssl=ssl, **kw).share_key

    base = key()
    assert base == key()  # equal settings, equal key
    ca, cert, client_key = str(certs.ca), str(certs.client_cert), str(certs.client_key)
    others = [
        key(user="other"),
        key(password="pw2"),
        key(ssl=SslConfig(mode="DISABLED")),
        key(ssl=SslConfig(mode="PREFERRED")),
        key(ssl=SslConfig(mode="VERIFY_CA", ca=ca)),
        key(ssl=SslConfig(mode="VERIFY_IDENTITY", ca=ca)),
        key(ssl=SslConfig(mode="REQUIRED", cert=cert, key=client_key)),
        key(ssl=SslConfig(mode="REQUIRED", cert=cert, key=client_key, key_password="kp")),
        key(ssl=SslConfig(mode="REQUIRED", tls_versions=("TLSv1.3",))),
        key(charset="latin1"),
        key(verify_checksum=False),
        key(schema_fallback=False),
    ]
    assert len({base, *others}) == len(others) + 1
    for text in (base, *others):
        assert "pw1" not in text and "pw2" not in text and "kp" not in text
    assert key(ssl=SslConfig(mode="VERIFY_CA", ca=ca)) != key(ssl=SslConfig(mode="VERIFY_CA", ca=cert))
