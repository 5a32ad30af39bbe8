"""Mirror roots and spool directories: local paths and ``file://`` URIs are local paths; a spool may also be in an
object store (``test_spark_storage.py``); any other URI is refused with a typed error that names it, and nothing is
created (``Path("s3://b/m")`` would be ``s3:/b/m``, a directory of the working directory)."""

from __future__ import annotations

from pathlib import Path

import pytest

from canal.errors import ConfigError, StorageLocationError
from canal.spark import DeltaMirror
from canal.spark.locations import local_path
from canal.spark.spool import Spool


def test_local_paths_and_file_uris_are_local_paths(tmp_path: Path) -> None:
    assert local_path(tmp_path / "m", "root") == tmp_path / "m"
    assert local_path("relative/m", "root") == Path("relative/m")
    assert local_path((tmp_path / "a b").as_uri(), "root") == tmp_path / "a b"  # percent-encoded
    assert local_path(f"file://localhost{tmp_path}/m", "root") == tmp_path / "m"
    assert DeltaMirror((tmp_path / "m").as_uri()).root == tmp_path / "m"
    assert Spool((tmp_path / "s").as_uri()).root == str(tmp_path / "s")


@pytest.mark.parametrize(
    "uri", ["s3://bucket/mirror", "gs://b/m", "abfss://c@acct.dfs.core.windows.net/m", "file://host/m"]
)
def test_other_uris_are_refused_naming_them(uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StorageLocationError, match="mirror's root") as refused:
        DeltaMirror(uri)
    assert uri in str(refused.value) and isinstance(refused.value, ConfigError)
    if not uri.startswith("file:"):  # an object store: a spool may be there
        assert Spool(uri).root == uri
    else:
        with pytest.raises(StorageLocationError, match="spool"):
            Spool(uri)
    with pytest.raises(StorageLocationError, match="spool"):
        Spool("ftp://host/spool")
    assert list(tmp_path.iterdir()) == []  # no s3:/... directory made in the working directory
