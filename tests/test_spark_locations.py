"""Mirror roots and spool directories: local paths and ``file://`` URIs are local paths; both may also be in an
object store (``test_mirror_s3.py``, ``test_spark_storage.py``), kept as URIs; any other URI is refused with a typed
error that names it, and nothing is created (``Path("s3://b/m")`` would be ``s3:/b/m``, a directory of the working
directory)."""

from __future__ import annotations

from pathlib import Path

import pytest

from canal.errors import ConfigError, StorageLocationError
from canal.lake.store.locations import local_path
from canal.spark import DeltaMirror
from canal.spark.spool import Spool


def test_local_paths_and_file_uris_are_local_paths(tmp_path: Path) -> None:
    assert local_path(tmp_path / "m", "root") == tmp_path / "m"
    assert local_path("relative/m", "root") == Path("relative/m")
    assert local_path((tmp_path / "a b").as_uri(), "root") == tmp_path / "a b"  # percent-encoded
    assert local_path(f"file://localhost{tmp_path}/m", "root") == tmp_path / "m"
    assert DeltaMirror((tmp_path / "m").as_uri()).root == str(tmp_path / "m")
    assert Spool((tmp_path / "s").as_uri()).root == str(tmp_path / "s")


@pytest.mark.parametrize("uri", ["s3://bucket/mirror", "gs://b/m", "abfss://c@acct.dfs.core.windows.net/m"])
def test_object_store_uris_are_kept_as_uris(uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    mirror = DeltaMirror(uri)  # nothing reaches the store before the first batch
    assert mirror.root == uri and mirror.table_location("s", "t") == f"{uri}/s.t"
    assert Spool(uri).root == uri
    assert list(tmp_path.iterdir()) == []  # no s3:/... directory made in the working directory


@pytest.mark.parametrize("uri", ["file://host/m", "ftp://host/m", "hdfs://namenode/m"])
def test_other_uris_are_refused_naming_them(uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StorageLocationError, match="mirror's root") as refused:
        DeltaMirror(uri)
    assert uri in str(refused.value) and isinstance(refused.value, ConfigError)
    with pytest.raises(StorageLocationError, match="spool"):
        Spool(uri)
    assert list(tmp_path.iterdir()) == []  # nothing made in the working directory
