"""Settings that name a secret instead of holding it (``KEY.env``, ``KEY.file``: :mod:`canal.secrets`): read where
they are used, in the ``canal`` source's options and in an object store's options (the spool's, the mirror's), with
typed errors that name the setting and the variable or file and never the secret; and the one rule of which keys
hold a secret. Spark's redaction of the source's secret options in a session's plans: tests/test_spark_redaction.py;
over a real Spark Connect server: tests/test_spark_connect_secrets.py."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from canal.errors import ConfigError, SecretError
from canal.lake.store import fs
from canal.lake.store.storage import Storage
from canal.secrets import check_named, is_secret_key, named_secret, read_named
from canal.spark.source_options import config_from_options

SECRET = "s3cr3t-Value:with=signs"
VARIABLE = "PYCANAL_TEST_NAMED_SECRET"


def _source(**options: str) -> dict[str, str]:
    return {"destination": "d", "master.address": "127.0.0.1:3306", "master.user": "canal", **options}


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("master.password", True),
        ("canal.instance.dbPassword", True),
        ("canal.instance.master.clientCertificateKeyStorePassword", True),
        ("pycanal.zookeeper.auth", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("aws_session_token", True),
        ("AZURE_STORAGE_ACCOUNT_KEY", True),
        ("azure_storage_access_key", True),
        ("azure_storage_sas_key", True),
        ("GOOGLE_SERVICE_ACCOUNT_KEY", True),
        ("AWS_ACCESS_KEY_ID", False),
        ("AWS_ENDPOINT_URL", False),
        ("master.user", False),
        ("pycanal.master.ssl.key", False),  # a path to a key file
    ],
)
def test_which_keys_hold_a_secret(key: str, secret: bool) -> None:
    assert is_secret_key(key) is secret


def test_named_forms() -> None:
    assert named_secret("master.password.env") == ("master.password", "env")
    assert named_secret("MASTER.PASSWORD.FILE") == ("MASTER.PASSWORD", "file")
    assert named_secret("master.password") is None
    assert named_secret(".env") is None


def test_the_source_reads_a_password_named_by_a_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VARIABLE, SECRET)
    config = config_from_options(_source(**{"master.password.env": VARIABLE}))
    assert config.master.password == SECRET
    # as Spark hands options over (names lower-cased), and canal's own key
    monkeypatch.setenv(VARIABLE, SECRET + "2")
    config = config_from_options(_source(**{"canal.instance.dbpassword.env": VARIABLE}))
    assert config.master.password == SECRET + "2"


def test_the_source_reads_a_password_named_by_a_file(tmp_path: Path) -> None:
    path = tmp_path / "password"
    path.write_text(SECRET + "\n")  # as echo writes it: the line end is no part of the secret
    assert config_from_options(_source(**{"master.password.file": str(path)})).master.password == SECRET
    path.write_bytes(b" padded \r\n")  # only one line end goes: a password's blanks are its own
    assert config_from_options(_source(**{"master.password.file": str(path)})).master.password == " padded "


def test_zookeeper_auth_may_be_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VARIABLE, f"digest:canal:{SECRET}")
    config = config_from_options(_source(**{"pycanal.zookeeper.auth.env": VARIABLE}))
    assert config.zk_auth is not None and config.zk_auth.credential == f"canal:{SECRET}"


def _refused(options: dict[str, str], match: str) -> SecretError:
    with pytest.raises(SecretError, match=match) as caught:
        config_from_options(_source(**options))
    assert SECRET not in str(caught.value)
    assert isinstance(caught.value, ConfigError)
    return caught.value


def test_a_named_secret_that_cannot_be_read_is_a_typed_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(VARIABLE, raising=False)
    error = _refused(
        {"master.password.env": VARIABLE},
        rf"canal source option master.password.env names the environment variable {VARIABLE}, which is not set "
        r"in process \d+ on ",
    )
    assert error.key == "master.password.env"
    monkeypatch.setenv(VARIABLE, "")
    _refused({"master.password.env": VARIABLE}, f"{VARIABLE}, which is empty")
    _refused({"master.password.env": " "}, "master.password.env is empty: it must name an environment variable")
    missing = tmp_path / "nope"
    _refused({"master.password.file": str(missing)}, f"names the file {missing}, which cannot be read .*No such file")
    empty = tmp_path / "empty"
    empty.write_text("\n")
    _refused({"master.password.file": str(empty)}, f"names the file {empty}, which is empty")
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xff\xfe" + SECRET.encode())
    _refused({"master.password.file": str(binary)}, "which is not UTF-8 text")
    big = tmp_path / "big"
    big.write_bytes(SECRET.encode() * 100_000)
    _refused({"master.password.file": str(big)}, "larger than 1 MiB")
    _refused({"master.password.file": str(tmp_path)}, "cannot be read")  # a directory


def test_a_secret_given_twice_or_a_plain_option_named_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VARIABLE, SECRET)
    _refused(
        {"master.password": SECRET, "master.password.env": VARIABLE},
        r"master.password is given twice \(master.password and master.password.env\)",
    )
    _refused({"master.password.env": VARIABLE, "master.password.file": "/x"}, "given twice")
    _refused({"master.address.env": VARIABLE}, "only a setting that holds a secret may name one")
    with pytest.raises(SecretError, match="only a setting that holds a secret"):
        check_named({"spool.dir.file": "/x"}, where="canal source option", may_name=is_secret_key)


def test_an_object_stores_secret_is_read_where_the_store_is_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s3-secret"
    path.write_text(SECRET)
    monkeypatch.setenv(VARIABLE, "token-" + SECRET)
    given = {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:1",
        "AWS_SECRET_ACCESS_KEY.file": str(path),
        "AWS_SESSION_TOKEN.env": VARIABLE,
    }
    storage = Storage.at("s3://bucket/spool", "the spool directory", given)
    # held by name: the storage (and so a task's partition, a pickled mirror) carries no secret
    assert storage.options == {k.lower(): v for k, v in given.items()}
    assert SECRET.encode() not in pickle.dumps(storage) and SECRET not in repr(storage)
    assert storage.store_options() == {
        "aws_endpoint_url": "http://127.0.0.1:1",
        "aws_secret_access_key": SECRET,
        "aws_session_token": "token-" + SECRET,
    }
    # what deltalake gets for a table under a registered root
    fs.register("s3://secret-test-bucket/mirror", "the mirror's root", given)
    assert fs.delta_options("s3://secret-test-bucket/mirror/db/t") == storage.store_options()
    path.write_text(SECRET + "-rotated")  # read again at each opening
    assert storage.store_options()["aws_secret_access_key"] == SECRET + "-rotated"


def test_an_object_stores_named_secret_is_checked_when_given_and_read_when_used(tmp_path: Path) -> None:
    with pytest.raises(SecretError, match="the spool directory's storage option aws_secret_access_key is given twice"):
        Storage.at("s3://b/p", "the spool directory", {"AWS_SECRET_ACCESS_KEY": "x", "aws_secret_access_key.env": "V"})
    missing = tmp_path / "missing"
    storage = Storage.at("s3://b/p", "the spool directory", {"AWS_SECRET_ACCESS_KEY.file": str(missing)})
    with pytest.raises(
        SecretError,
        match=rf"s3://b/p's storage option aws_secret_access_key.file names the file "
        rf"{missing}, which cannot be read",
    ):
        storage.store_options()


def test_read_named_leaves_other_settings_as_they_are(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(VARIABLE, SECRET)
    options = {"a": "1", "token.env": VARIABLE}
    assert read_named(options, where="w", may_name=is_secret_key) == {"a": "1", "token": SECRET}
    assert options == {"a": "1", "token.env": VARIABLE}
