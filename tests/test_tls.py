"""TLS and authentication to the master, against a private MariaDB started with certificates made here
(``require_secure_transport=ON``): capture under REQUIRED / VERIFY_CA / VERIFY_IDENTITY and with a client certificate,
typed errors for a wrong CA, a wrong host name, a plain login and a plain server, PREFERRED both ways, TLS versions,
``canal check``'s tls line, a login through MariaDB's ed25519 plugin, and no password in any error, log or repr.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql  # type: ignore[import-untyped]
import pytest
from pymysql.constants import CLIENT  # type: ignore[import-untyped]

from canal.cli import main
from canal.config import InstanceConfig, MasterConfig, RetryConfig, SslConfig, SslMode
from canal.errors import CanalError, ConfigError, NotRunningError, SourceUnreachableError, TlsError
from canal.instance import Instance
from canal.parse.mysql import connect
from canal.parse.mysql.connect import open_connection, ssl_context
from canal.parse.mysql.source import MysqlBinlogSource
from canal.parse.retry import is_permanent
from canal.protocol import EMPTY_MESSAGE_ID, EntryType
from canal.testing.plugin import MariaDBDatabase
from canal.testing.services import MariaDBServer
from canal.testing.tls import Certificates, make_certificates

pytestmark = pytest.mark.integration

DB = "tls_db"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    # the server certificate names 127.0.0.1 only, so "localhost" is a wrong host name for VERIFY_IDENTITY
    return make_certificates(tmp_path_factory.mktemp("certs"), hosts=("127.0.0.1",))


@pytest.fixture(scope="module")
def other_certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("other"))


@pytest.fixture(scope="module")
def server(certs: Certificates) -> Iterator[MariaDBServer]:
    with MariaDBServer(server_id=7, tls=certs.server(), require_secure_transport=True) as srv:
        srv.execute(f"CREATE DATABASE {DB}")
        srv.execute(f"CREATE TABLE {DB}.t (id INT PRIMARY KEY, v VARCHAR(20))")
        yield srv


def source(srv: MariaDBServer, ssl_config: SslConfig, address: str | None = None, **kw: Any) -> MysqlBinlogSource:
    return MysqlBinlogSource(
        address or srv.address,
        kw.pop("user", srv.user),
        kw.pop("password", srv.password),
        ssl=ssl_config,
        connect_timeout=5,
        **kw,
    )


def capture(
    srv: MariaDBServer, ssl_config: SslConfig, *, user: str | None = None, password: str | None = None, rows: int = 3
) -> list[dict[str, Any]]:
    """Write ``rows`` rows and read them back through an Instance with ``ssl_config``."""
    journal, position = srv.execute("SHOW MASTER STATUS")[0][:2]
    base = int(time.time_ns() % 1_000_000_000)
    for i in range(rows):
        srv.execute(f"INSERT INTO {DB}.t VALUES (%s, %s)", (base + i, f"row{i}"))
    config = InstanceConfig(
        destination="tls",
        master=MasterConfig(
            address=srv.address,
            username=user or srv.user,
            password=password or srv.password,
            journal_name=str(journal),
            position=int(position),
            ssl=ssl_config,
        ),
        filter_regex=rf"{DB}\.t",
        retry=RetryConfig(initial_backoff_s=0.01, max_backoff_s=0.2, max_attempts=3),
    )
    seen: list[dict[str, Any]] = []
    with Instance(config) as inst:
        deadline = time.monotonic() + 30
        while len(seen) < rows:
            assert time.monotonic() < deadline, f"only {len(seen)} rows; parser: {inst.parser.last_error!r}"
            msg = inst.get(100, timeout=0.5)
            if msg.id == EMPTY_MESSAGE_ID:
                continue
            seen += [r.after_dict() for e in msg.entries if e.entry_type is EntryType.ROWDATA for r in e.iter_rows()]
    assert [r["v"] for r in seen] == [f"row{i}" for i in range(rows)]
    return seen


# -- capture under each mode that encrypts -----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["REQUIRED", "VERIFY_CA", "VERIFY_IDENTITY"])
def test_capture_over_tls(server: MariaDBServer, certs: Certificates, mode: str) -> None:
    # the server refuses every plain connection, so rows arriving prove the dump and side connections were TLS
    ca = str(certs.ca) if mode != "REQUIRED" else None
    capture(server, SslConfig(mode=mode, ca=ca))
    with source(server, SslConfig(mode=mode, ca=ca)) as src:
        state = src.tls
        assert state.encrypted and state.version in ("TLSv1.2", "TLSv1.3") and state.cipher
        assert state.mode is SslMode(mode)


def test_capture_with_a_client_certificate(server: MariaDBServer, certs: Certificates) -> None:
    server.execute("CREATE USER IF NOT EXISTS x509user@'%' IDENTIFIED BY 'x509pw' REQUIRE SUBJECT '/CN=canal'")
    server.execute("GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT, BINLOG MONITOR ON *.* TO x509user@'%'")
    with_cert = SslConfig(
        mode="VERIFY_IDENTITY", ca=str(certs.ca), cert=str(certs.client_cert), key=str(certs.client_key)
    )
    capture(server, with_cert, user="x509user", password="x509pw")
    with pytest.raises(SourceUnreachableError, match="refused the login of user 'x509user'"):
        source(server, SslConfig(mode="VERIFY_IDENTITY", ca=str(certs.ca)), user="x509user", password="x509pw").open()


# -- typed errors ------------------------------------------------------------------------------------------------------


def test_wrong_ca_is_a_tls_error(server: MariaDBServer, other_certs: Certificates) -> None:
    src = source(server, SslConfig(mode="VERIFY_CA", ca=str(other_certs.ca)))
    with pytest.raises(TlsError, match="did not verify") as info:
        src.open()
    assert "give the CA that signed" in str(info.value)
    assert src._side is None  # nothing half-open is kept
    with pytest.raises(TlsError):  # and the next attempt fails the same way
        src.server_id()


def test_wrong_host_name_fails_only_identity(server: MariaDBServer, certs: Certificates) -> None:
    localhost = f"localhost:{server.port}"  # the certificate names 127.0.0.1 only
    with pytest.raises(TlsError, match=r"does not name 'localhost'.*VERIFY_CA"):
        source(server, SslConfig(mode="VERIFY_IDENTITY", ca=str(certs.ca)), address=localhost).open()
    with source(server, SslConfig(mode="VERIFY_CA", ca=str(certs.ca)), address=localhost) as src:
        assert src.tls.encrypted


def test_disabled_is_refused_with_a_clear_error(server: MariaDBServer) -> None:
    with pytest.raises(SourceUnreachableError, match="require_secure_transport=ON, set sslMode REQUIRED") as info:
        source(server, SslConfig(mode="DISABLED")).open()
    assert info.value.errno == 1045


def test_required_refuses_a_server_without_tls(mariadb: MariaDBDatabase) -> None:
    server = mariadb.server  # the session server offers no TLS
    with pytest.raises(TlsError, match="offers no TLS, but sslMode is REQUIRED") as info:
        source(server, SslConfig(mode="REQUIRED")).open()
    assert info.value.errno == 2026


def _stopped_with(config: InstanceConfig) -> BaseException:
    """The typed error a destination with the default RetryConfig stops on, within seconds (a consumer's get raises
    it); its metrics say it failed, and nothing was retried."""
    with Instance(config) as inst:
        began = time.monotonic()
        with pytest.raises(NotRunningError) as raised:
            inst.get_without_ack(100, timeout=20.0)  # before: empty batches, the TLS failure retried for ever
        assert time.monotonic() - began < 5.0
        m = inst.metrics()
        assert (m.running, m.state, m.connected, m.errors) == (False, "failed", False, 1)
        assert inst.parser.reconnects == 0
    cause = raised.value.__cause__
    assert cause is not None and m.last_error_type == type(cause).__name__
    return cause


@pytest.mark.parametrize("case", ["wrong CA", "plain server"])
def test_a_tls_failure_stops_the_destination(
    server: MariaDBServer, other_certs: Certificates, mariadb: MariaDBDatabase, case: str
) -> None:
    # the server's answer about TLS does not change by retrying: the TLS settings (or the server's) must
    srv, ssl_config = (
        (server, SslConfig(mode="VERIFY_CA", ca=str(other_certs.ca)))
        if case == "wrong CA"
        else (mariadb.server, SslConfig(mode="REQUIRED"))  # the session server offers no TLS
    )
    journal, position = srv.execute("SHOW MASTER STATUS")[0][:2]
    master = MasterConfig(
        address=srv.address,
        username=srv.user,
        password=srv.password,
        journal_name=str(journal),
        position=int(position),
        ssl=ssl_config,
    )
    error = _stopped_with(InstanceConfig(destination="tls", master=master, filter_regex=rf"{DB}\.t"))
    assert type(error) is TlsError, error
    assert ("did not verify" if case == "wrong CA" else "offers no TLS, but sslMode is REQUIRED") in str(error)


def test_a_connection_cut_in_the_tls_handshake_is_retried() -> None:
    # a server (or a proxy before it) that offers TLS and closes the connection at the client's hello, as one
    # shutting down does: no answer about TLS, a network failure -- retried, not a TlsError
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    accepted: list[int] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            accepted.append(1)
            with conn:
                conn.sendall(_handshake_packet())
                conn.recv(64)  # the client's SSL request, then its hello: closed unanswered

    threading.Thread(target=serve, daemon=True).start()
    try:
        src = MysqlBinlogSource(
            f"127.0.0.1:{port}", "canal", "secret", ssl=SslConfig(mode="REQUIRED"), connect_timeout=5
        )
        with pytest.raises(SourceUnreachableError, match="closed during the TLS handshake") as raised:
            src.open()
        assert type(raised.value) is SourceUnreachableError
        assert not is_permanent(raised.value, connected_before=False)
        assert accepted
    finally:
        listener.close()


def _handshake_packet() -> bytes:
    """A MySQL protocol-10 initial handshake offering TLS (CLIENT_SSL) and the native password plugin."""
    caps = CLIENT.LONG_PASSWORD | CLIENT.PROTOCOL_41 | CLIENT.SECURE_CONNECTION | CLIENT.SSL | CLIENT.PLUGIN_AUTH
    body = (
        b"\x0a" + b"10.11.0-fake\x00" + (7).to_bytes(4, "little") + b"12345678\x00"
        + (caps & 0xFFFF).to_bytes(2, "little") + b"\x2d" + (2).to_bytes(2, "little")
        + (caps >> 16).to_bytes(2, "little") + b"\x15" + b"\x00" * 10 + b"123456789012\x00"
        + b"mysql_native_password\x00"
    )  # fmt: skip
    return len(body).to_bytes(3, "little") + b"\x00" + body


def test_preferred_encrypts_when_offered_and_falls_back_when_not(
    server: MariaDBServer, mariadb: MariaDBDatabase, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the fallback is logged once per address per process: forget what earlier tests' connections noted
    monkeypatch.setattr(connect, "_plain_noted", set())
    with source(server, SslConfig(mode="PREFERRED")) as src:
        assert src.tls.encrypted
    caplog.set_level(logging.WARNING, logger="canal.parse.mysql.connect")
    with source(mariadb.server, SslConfig()) as src:  # the default mode
        state = src.tls
        assert not state.encrypted and state.describe() == "not encrypted (sslMode PREFERRED)"
    assert f"{mariadb.server.address} offers no TLS: connected unencrypted" in caplog.text


def test_a_short_command_notes_plain_connections_at_info_only_while_it_runs(
    mariadb: MariaDBDatabase,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(connect, "_plain_noted", set())
    monkeypatch.setenv("CANAL_PASSWORD", mariadb.server.password)
    caplog.set_level(logging.INFO, logger="canal.parse.mysql.connect")
    note = f"{mariadb.server.address} offers no TLS: connected unencrypted"
    code = main(["check", "--address", mariadb.server.address, "--user", mariadb.server.user, "--connect-timeout", "5"])
    assert code == 0, capsys.readouterr()
    assert [r.levelno for r in caplog.records if note in r.getMessage()] == [logging.INFO]
    # the process goes on (an embedder that ran a command): a later first plain connection warns again
    caplog.clear()
    connect._plain_noted.clear()
    with source(mariadb.server, SslConfig()) as src:
        assert not src.tls.encrypted
    assert [r.levelno for r in caplog.records if note in r.getMessage()] == [logging.WARNING]


@pytest.mark.parametrize("version", ["TLSv1.2", "TLSv1.3"])
def test_tls_versions_are_honoured(server: MariaDBServer, version: str) -> None:
    with source(server, SslConfig(mode="REQUIRED", tls_versions=(version,))) as src:
        assert src.tls.version == version


def test_no_password_anywhere(
    server: MariaDBServer, other_certs: Certificates, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    secret = server.password
    texts: list[str] = []
    for ssl_config, password in [
        (SslConfig(mode="VERIFY_CA", ca=str(other_certs.ca)), secret),
        (SslConfig(mode="DISABLED"), secret),
        (SslConfig(mode="REQUIRED"), secret + "x"),  # a wrong password, over TLS
    ]:
        src = source(server, ssl_config, password=password)
        texts.append(repr(src))
        with pytest.raises(SourceUnreachableError) as info:
            src.open()
        texts += [str(info.value), repr(info.value)]
    # through an Instance: the parser logs its retries
    config = InstanceConfig(
        destination="tls",
        master=MasterConfig(address=server.address, username=server.user, password=secret, ssl="DISABLED"),
        retry=RetryConfig(initial_backoff_s=0.01, max_backoff_s=0.01, max_attempts=2),
    )
    texts += [repr(config), str(config.redacted()), config.to_properties()]
    failed = threading.Event()
    with Instance(config, on_error=lambda _exc: failed.set()) as inst:
        assert failed.wait(10)
        error = inst.parser.error
        texts += [repr(error), str(inst.metrics())]
    assert isinstance(error, SourceUnreachableError)
    texts.append(caplog.text)
    assert "require_secure_transport" in caplog.text  # the retries were logged, with the hint
    for text in texts:
        assert secret not in text


# -- canal check -------------------------------------------------------------------------------------------------------


def test_canal_check_reports_tls(
    server: MariaDBServer,
    certs: Certificates,
    other_certs: Certificates,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CANAL_PASSWORD", server.password)
    base = ["check", "--address", server.address, "--user", server.user]
    code = main([*base, "--ssl-mode", "verify_identity", "--ssl-ca", str(certs.ca), "--connect-timeout", "5"])
    out = capsys.readouterr().out
    tls = [line for line in out.splitlines() if line.startswith("OK   tls: ")]
    assert code == 0, out
    assert len(tls) == 1 and "(sslMode VERIFY_IDENTITY)" in tls[0] and "TLSv1.3, TLS_" in tls[0], out

    code = main([*base, "--ssl-ca", str(other_certs.ca)])  # a CA alone means VERIFY_CA, as in the MySQL client
    captured = capsys.readouterr()
    assert code == 1
    assert captured.out.startswith("FAIL tls: ") and "did not verify (sslMode VERIFY_CA)" in captured.out
    assert server.password not in captured.out + captured.err


# -- authentication plugins --------------------------------------------------------------------------------------------


def test_capture_through_an_ed25519_login(server: MariaDBServer) -> None:
    if not server.execute("SELECT 1 FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'ed25519'"):
        server.execute("INSTALL SONAME 'auth_ed25519'")
    server.execute("CREATE USER IF NOT EXISTS edcanal@'%' IDENTIFIED VIA ed25519 USING PASSWORD('ed-secret')")
    server.execute("GRANT SELECT, REPLICATION SLAVE, REPLICATION CLIENT, BINLOG MONITOR ON *.* TO edcanal@'%'")
    plugin = server.execute("SELECT plugin FROM mysql.user WHERE user = 'edcanal'")
    assert plugin == [("ed25519",)]
    capture(server, SslConfig(mode="REQUIRED"), user="edcanal", password="ed-secret")
    with pytest.raises(SourceUnreachableError, match="refused the login of user 'edcanal'") as info:
        source(server, SslConfig(mode="REQUIRED"), user="edcanal", password="not-it").open()
    assert "not-it" not in str(info.value)


def test_auth_plugin_libraries_are_installed() -> None:
    # pymysql signs ed25519 logins with PyNaCl and encrypts caching_sha2_password / sha256_password passwords on plain
    # connections with cryptography (MySQL 8's default plugin; no MySQL server can be run here to test it end to end)
    import cryptography.hazmat.primitives.asymmetric.padding  # noqa: F401
    import nacl.bindings

    assert hasattr(nacl.bindings, "crypto_scalarmult_ed25519_base_noclamp")
    assert callable(pymysql._auth.sha2_rsa_encrypt) and callable(pymysql._auth.ed25519_password)


# -- the pymysql internals connect.py relies on ------------------------------------------------------------------------


def test_pymysql_internals_that_connect_relies_on(server: MariaDBServer) -> None:
    # PREFERRED: with no TLS arguments pymysql negotiates opportunistically through ``ctx``
    conn = pymysql.connections.Connection(host="127.0.0.1", port=server.port, defer_connect=True)
    assert conn.ssl is True and conn._ssl_required is False and isinstance(conn.ctx, ssl.SSLContext)
    # ... which it makes in _create_ssl_ctx({}), where connect._Connection makes none (ours replaces it)
    made: list[object] = []
    real = pymysql.connections.Connection._create_ssl_ctx
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            pymysql.connections.Connection, "_create_ssl_ctx", lambda self, sslp: made.append(sslp) or real(self, sslp)
        )
        pymysql.connections.Connection(host="127.0.0.1", port=server.port, defer_connect=True)
    assert made == [{}]
    # the socket of an open connection tells whether and how it is encrypted
    opened = open_connection(
        address=server.address,
        host=server.host,
        port=server.port,
        user=server.user,
        password=server.password,
        ssl_config=SslConfig(mode="REQUIRED"),
    )
    try:
        assert isinstance(opened._sock, ssl.SSLSocket)
    finally:
        opened.close()


def test_a_changed_pymysql_fails_loudly_for_preferred(server: MariaDBServer, monkeypatch: pytest.MonkeyPatch) -> None:
    original = pymysql.connections.Connection.__init__

    def older(self: Any, *args: Any, **kwargs: Any) -> None:  # pymysql < 1.2 left TLS off without arguments
        original(self, *args, **kwargs)
        self.ssl = False

    monkeypatch.setattr(pymysql.connections.Connection, "__init__", older)
    with pytest.raises(CanalError, match="sslMode PREFERRED cannot be honoured"):
        source(server, SslConfig(mode="PREFERRED")).open()


def test_one_context_per_setting_and_none_from_pymysql(
    server: MariaDBServer, certs: Certificates, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a destination's start used to read the system's trust store for each connection (pymysql's default context
    # for PREFERRED, then ours): 60 ms of CPU each, most of the start of 100 destinations
    monkeypatch.setattr(connect, "_CONTEXTS", {})
    made: list[SslConfig] = []
    real = connect.ssl_context
    monkeypatch.setattr(connect, "ssl_context", lambda config: made.append(config) or real(config))
    trust_store_reads: list[object] = []
    real_defaults = ssl.SSLContext.load_default_certs
    monkeypatch.setattr(
        ssl.SSLContext, "load_default_certs", lambda self, *a: trust_store_reads.append(a) or real_defaults(self, *a)
    )
    ca = tmp_path / "ca.pem"
    ca.write_bytes(Path(certs.ca).read_bytes())
    verify = SslConfig(mode="VERIFY_CA", ca=str(ca))
    for config in (verify, verify, SslConfig(mode="VERIFY_CA", ca=str(ca)), SslConfig(mode="REQUIRED")):
        src = source(server, config)
        src.open()
        assert src.tls.encrypted
        src.close()
    assert made == [verify, SslConfig(mode="REQUIRED")]
    assert trust_store_reads == []
    # a renewed CA file is read at the next connection
    ca.write_bytes(Path(certs.ca).read_bytes() + b"\n")
    src = source(server, verify)
    src.open()
    src.close()
    assert made == [verify, SslConfig(mode="REQUIRED"), verify]
    # PREFERRED makes a context of its own, but pymysql reads no trust store for it
    conn = open_connection(
        address=server.address,
        host=server.host,
        port=server.port,
        user=server.user,
        password=server.password,
        ssl_config=SslConfig(mode="PREFERRED"),
    )
    try:
        assert isinstance(conn._sock, ssl.SSLSocket)
    finally:
        conn.close()
    assert trust_store_reads == []


# -- unreadable files --------------------------------------------------------------------------------------------------


def test_unreadable_tls_files_are_config_errors(tmp_path: Path, certs: Certificates) -> None:
    with pytest.raises(ConfigError, match="cannot read CA certificates") as info:
        ssl_context(SslConfig(mode="VERIFY_CA", ca=str(tmp_path / "missing.pem")))
    assert info.value.key == "ssl.ca"
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    with pytest.raises(ConfigError, match="cannot read CA certificates"):
        ssl_context(SslConfig(mode="VERIFY_IDENTITY", ca=str(garbage)))
    with pytest.raises(ConfigError, match="cannot load the client certificate") as info:
        ssl_context(SslConfig(mode="REQUIRED", cert=str(certs.client_cert), key=str(certs.ca)))  # not its key
    assert info.value.key == "ssl.cert"
    assert ssl_context(SslConfig(mode="DISABLED")) is None
