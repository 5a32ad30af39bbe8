"""TLS settings without a server: SslConfig's defaults and validation, canal's sslMode / tlsVersions / key-store keys
mapped onto it (PEM) or refused with a ConfigError naming the key (JKS, PKCS12, remote URLs), the round trip through
``to_properties``, the command line's --ssl-* arguments, and the key password never shown."""

from __future__ import annotations

import argparse
import logging
import re
import string
from pathlib import Path

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from canal.cli.common import add_source_arguments, load_instance_config
from canal.config import InstanceConfig, MasterConfig, SslConfig, SslMode
from canal.errors import ConfigError

BASE = "canal.instance.master.address=127.0.0.1:3306\n"


def load(text: str) -> InstanceConfig:
    return InstanceConfig.from_properties(BASE + text, destination="d")


# -- SslConfig ---------------------------------------------------------------------------------------------------------


def test_defaults_follow_the_mysql_client() -> None:
    assert MasterConfig(address="db:3306").ssl == SslConfig(mode=SslMode.PREFERRED)
    assert SslConfig().mode is SslMode.PREFERRED
    assert SslConfig(ca="/etc/ca.pem").mode is SslMode.VERIFY_CA  # a CA without a mode means: verify against it
    assert SslConfig(mode="required", ca="/etc/ca.pem").mode is SslMode.REQUIRED
    assert MasterConfig(address="db:3306", ssl="verify-identity").ssl == SslConfig(mode="VERIFY_IDENTITY")
    assert load("").master.ssl.mode is SslMode.PREFERRED  # the same when the properties leave sslMode out


def test_modes_say_what_they_require() -> None:
    assert [m.value for m in SslMode if m.requires_tls] == ["REQUIRED", "VERIFY_CA", "VERIFY_IDENTITY"]
    assert [m.value for m in SslMode if m.verifies] == ["VERIFY_CA", "VERIFY_IDENTITY"]
    assert not SslConfig(mode="DISABLED").enabled and SslConfig(mode="PREFERRED").enabled


@pytest.mark.parametrize(
    ("kwargs", "field", "reason"),
    [
        ({"mode": "SOMETIMES"}, "mode", "must be one of DISABLED | PREFERRED"),
        ({"key": "/k.pem"}, "key", "needs its certificate"),
        ({"key_password": "hunter2"}, "key_password", "needs cert"),
        ({"tls_versions": ("TLSv1.1",)}, "tls_versions", "TLSv1.2 and/or TLSv1.3"),
        ({"tls_versions": "TLSv1.2,SSLv3"}, "tls_versions", "older versions are insecure"),
        ({"ca": "  "}, "ca", None),  # blank means None, which is valid
        ({"cert": 42}, "cert", "must be None or a file path"),
    ],
)
def test_bad_values_name_the_field(kwargs: dict[str, object], field: str, reason: str | None) -> None:
    if reason is None:
        assert getattr(SslConfig(**kwargs), field) is None  # type: ignore[arg-type]
        return
    with pytest.raises(ConfigError, match=reason) as info:
        SslConfig(**kwargs)  # type: ignore[arg-type]
    assert info.value.key == field
    assert "hunter2" not in str(info.value)


def test_tls_versions_are_normalised() -> None:
    assert SslConfig(tls_versions="tlsv1.3, TLSv1.2").tls_versions == ("TLSv1.3", "TLSv1.2")
    assert SslConfig(tls_versions="").tls_versions == ()


def test_the_key_password_is_never_shown() -> None:
    ssl = SslConfig(mode="VERIFY_IDENTITY", ca="/ca.pem", cert="/c.pem", key="/k.pem", key_password="hunter2")
    master = MasterConfig(address="db:3306", password="pw-secret", ssl=ssl)
    for text in (repr(ssl), str(ssl), repr(master), str(master.redacted()), str(ssl.redacted())):
        assert "hunter2" not in text and "pw-secret" not in text
    assert master.redacted()["ssl"]["key_password"] == "***"
    assert "key_password=None" in repr(SslConfig())


# -- canal's keys ------------------------------------------------------------------------------------------------------


def test_canal_keys_map_onto_pem_files() -> None:
    config = load(
        "canal.instance.master.sslMode=VERIFY_IDENTITY\n"
        "canal.instance.master.tlsVersions=TLSv1.3\n"
        "canal.instance.master.trustCertificateKeyStoreType=PEM\n"
        "canal.instance.master.trustCertificateKeyStoreUrl=file:///etc/canal/ca%20bundle.pem\n"
        "canal.instance.master.clientCertificateKeyStoreUrl=file:/etc/canal/client.pem\n"
        "canal.instance.master.clientCertificateKeyStorePassword=hunter2\n"
        "canal.instance.standby.address=127.0.0.1:3307\n"
        "canal.instance.standby.sslMode=REQUIRED\n"
        "canal.instance.standby.clientCertificateKeyStoreUrl=/etc/canal/standby.crt\n"
        "pycanal.standby.ssl.key=/etc/canal/standby.key\n"
    )
    assert config.master.ssl == SslConfig(
        mode="VERIFY_IDENTITY",
        ca="/etc/canal/ca bundle.pem",
        cert="/etc/canal/client.pem",
        key_password="hunter2",
        tls_versions=("TLSv1.3",),
    )
    assert config.standby is not None
    assert config.standby.ssl == SslConfig(mode="REQUIRED", cert="/etc/canal/standby.crt", key="/etc/canal/standby.key")


def test_ssl_keys_are_known(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="canal.config")
    load("canal.instance.master.sslMode=REQUIRED\ncanal.instance.master.tlsVersions=\n")
    assert "sslMode" not in caplog.text and "tlsVersions" not in caplog.text


@pytest.mark.parametrize(
    ("text", "key", "reason"),
    [
        ("canal.instance.master.sslMode=MAYBE", "canal.instance.master.sslMode", "must be one of"),
        (
            "canal.instance.standby.address=127.0.0.1:3307\ncanal.instance.standby.sslMode=ON",
            "canal.instance.standby.sslMode",
            "must be one of",
        ),
        ("canal.instance.master.tlsVersions=TLSv1,TLSv1.1", "canal.instance.master.tlsVersions", "insecure"),
        (
            "canal.instance.master.trustCertificateKeyStoreUrl=file:/etc/truststore.jks",
            "canal.instance.master.trustCertificateKeyStoreUrl",
            "a JKS store cannot be read.*keytool -exportcert",
        ),
        (
            "canal.instance.master.trustCertificateKeyStoreUrl=/etc/trust\n"
            "canal.instance.master.trustCertificateKeyStoreType=PKCS12",
            "canal.instance.master.trustCertificateKeyStoreType",
            "openssl pkcs12 -in STORE -nokeys",
        ),
        (
            "canal.instance.master.clientCertificateKeyStoreUrl=/etc/client.p12\n"
            "canal.instance.master.clientCertificateKeyStorePassword=hunter2",
            "canal.instance.master.clientCertificateKeyStoreUrl",
            "a PKCS12 store cannot be read",
        ),
        (
            "canal.instance.master.clientCertificateKeyStoreUrl=/etc/client.keystore",
            "canal.instance.master.clientCertificateKeyStoreType",
            "set canal.instance.master.clientCertificateKeyStoreType",
        ),
        (
            "canal.instance.master.trustCertificateKeyStoreUrl=https://example.com/ca.pem",
            "canal.instance.master.trustCertificateKeyStoreUrl",
            "only local files",
        ),
        (
            "canal.instance.master.trustCertificateKeyStoreUrl=file://host/ca.pem",
            "canal.instance.master.trustCertificateKeyStoreUrl",
            "names a local path",
        ),
        (
            "canal.instance.master.trustCertificateKeyStoreUrl=/etc/ca.pem\n"
            "canal.instance.master.trustCertificateKeyStorePassword=hunter2",
            "canal.instance.master.trustCertificateKeyStorePassword",
            "a PEM trust store has no password",
        ),
        (
            "canal.instance.master.clientCertificateKeyStorePassword=hunter2",
            "canal.instance.master.clientCertificateKeyStorePassword",
            "there is no",
        ),
        ("pycanal.master.ssl.key=/etc/k.pem", "pycanal.master.ssl.key", "needs its certificate"),
    ],
)
def test_unusable_keys_raise_config_error_naming_the_key(text: str, key: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason) as info:
        load(text)
    assert info.value.key == key
    assert "hunter2" not in str(info.value)


_path_chars = st.text(string.ascii_letters + string.digits + " %#_-.é", min_size=1, max_size=12)
_paths = st.one_of(st.none(), _path_chars.map(lambda p: f"/etc/{p.strip() or 'x'}.pem"))


@given(
    mode=st.sampled_from(list(SslMode)),
    ca=_paths,
    cert=_paths,
    key=_paths,
    key_password=st.one_of(st.none(), st.text(string.printable.strip(), min_size=1, max_size=8)),
    versions=st.lists(st.sampled_from(["TLSv1.2", "TLSv1.3"]), max_size=2, unique=True),
    standby=st.booleans(),
)
def test_to_properties_round_trip(
    mode: SslMode,
    ca: str | None,
    cert: str | None,
    key: str | None,
    key_password: str | None,
    versions: list[str],
    standby: bool,
) -> None:
    if cert is None:
        key = key_password = None
    ssl = SslConfig(mode=mode, ca=ca, cert=cert, key=key, key_password=key_password, tls_versions=tuple(versions))
    master = MasterConfig(address="127.0.0.1:3306", ssl=ssl)
    config = InstanceConfig(
        destination="d", master=master, standby=attrs.evolve(master, address="h:1") if standby else None
    )
    assert InstanceConfig.from_properties(config.to_properties(include_password=True)) == config
    without = InstanceConfig.from_properties(config.to_properties())
    assert without.master.ssl == attrs.evolve(ssl, key_password=None)
    assert "clientCertificateKeyStorePassword" not in config.to_properties()  # only with include_password


# -- the command line --------------------------------------------------------------------------------------------------


def cli(*argv: str) -> InstanceConfig:
    parser = argparse.ArgumentParser()
    add_source_arguments(parser)
    return load_instance_config(parser.parse_args(list(argv)))


def test_cli_ssl_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CANAL_PASSWORD", "pw")
    assert cli("--address", "db:3306").master.ssl == SslConfig()
    assert cli("--address", "db:3306", "--ssl-ca", "/ca.pem").master.ssl == SslConfig(mode="VERIFY_CA", ca="/ca.pem")
    got = cli(
        "--address",
        "db:3306",
        "--ssl-mode",
        "verify_identity",
        "--ssl-ca",
        "/ca.pem",
        "--ssl-cert",
        "/c.pem",
        "--ssl-key",
        "/k.pem",
    ).master.ssl
    assert got == SslConfig(mode="VERIFY_IDENTITY", ca="/ca.pem", cert="/c.pem", key="/k.pem")
    with pytest.raises(SystemExit):
        cli("--address", "db:3306", "--ssl-mode", "sometimes")


def test_cli_ssl_arguments_override_the_properties(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CANAL_PASSWORD", "pw")
    props = tmp_path / "instance.properties"
    props.write_text(
        BASE + "canal.instance.master.sslMode=VERIFY_IDENTITY\n"
        "canal.instance.master.trustCertificateKeyStoreUrl=/etc/ca.pem\n"
    )
    assert cli("--properties", str(props)).master.ssl == SslConfig(mode="VERIFY_IDENTITY", ca="/etc/ca.pem")
    assert cli("--properties", str(props), "--ssl-mode", "REQUIRED").master.ssl == SslConfig(
        mode="REQUIRED", ca="/etc/ca.pem"
    )


def test_the_tls_guide_properties_example_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    guide = (Path(__file__).resolve().parent.parent / "docs" / "guides" / "tls.md").read_text()
    (block,) = re.findall(r"```properties\n(.*?)```", guide, re.S)
    monkeypatch.setenv("CANAL_CLIENT_KEY_PASSWORD", "from-the-environment")
    assert load(block).master.ssl == SslConfig(
        mode="VERIFY_IDENTITY",
        ca="/etc/canal/ca.pem",
        cert="/etc/canal/client.pem",
        key_password="from-the-environment",
        tls_versions=("TLSv1.2", "TLSv1.3"),
    )


def test_spark_options_carry_the_tls_keys() -> None:
    # Spark lower-cases option names: canal's camelCase TLS keys must still be recognised
    pytest.importorskip("pyspark")
    from canal.spark.source import config_from_options

    options = {
        "destination": "d",
        "master.address": "127.0.0.1:3306",
        "canal.instance.master.sslMode": "VERIFY_IDENTITY",
        "canal.instance.master.trustCertificateKeyStoreUrl": "file:/etc/canal/ca.pem",
        "canal.instance.master.tlsVersions": "TLSv1.3",
    }
    lowered = {k.lower(): v for k, v in options.items()}
    expected = SslConfig(mode="VERIFY_IDENTITY", ca="/etc/canal/ca.pem", tls_versions=("TLSv1.3",))
    assert config_from_options(lowered).master.ssl == expected
