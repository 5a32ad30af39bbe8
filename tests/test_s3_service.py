"""The private S3-compatible store (moto): deltalake and pyarrow reach it with the options it gives, and it honours
the conditional writes a commit protocol on object storage needs (recorded in :class:`S3Server`'s docstring)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from canal.testing.plugin import S3Bucket
from canal.testing.services import S3Server

pytestmark = pytest.mark.integration


def test_deltalake_writes_and_reads_a_table_in_the_bucket(s3_bucket: S3Bucket) -> None:
    deltalake = pytest.importorskip("deltalake")
    import pyarrow as pa
    from pyarrow.fs import FileSelector

    url = f"{s3_bucket.url}/x"
    deltalake.write_deltalake(url, pa.table({"id": [1, 2]}), storage_options=s3_bucket.storage_options)
    deltalake.write_deltalake(url, pa.table({"id": [3]}), mode="append", storage_options=s3_bucket.storage_options)

    table = deltalake.DeltaTable(url, storage_options=s3_bucket.storage_options)
    assert table.version() == 1
    assert sorted(table.to_pyarrow_table().column("id").to_pylist()) == [1, 2, 3]
    # the files are in the store, under the table's prefix, as pyarrow sees them
    keys = [info.path for info in s3_bucket.filesystem().get_file_info(FileSelector(s3_bucket.name, recursive=True))]
    assert f"{s3_bucket.name}/x/_delta_log/00000000000000000001.json" in keys


def test_put_if_none_match_refuses_an_existing_key(s3_bucket: S3Bucket) -> None:
    from botocore.exceptions import ClientError

    client = s3_bucket.server.client()
    client.put_object(Bucket=s3_bucket.name, Key="commit/0", Body=b"first", IfNoneMatch="*")
    with pytest.raises(ClientError) as refused:
        client.put_object(Bucket=s3_bucket.name, Key="commit/0", Body=b"second", IfNoneMatch="*")
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert client.get_object(Bucket=s3_bucket.name, Key="commit/0")["Body"].read() == b"first"


def test_put_if_match_is_compare_and_swap(s3_bucket: S3Bucket) -> None:
    from botocore.exceptions import ClientError

    client = s3_bucket.server.client()
    etag = client.put_object(Bucket=s3_bucket.name, Key="head", Body=b"v1")["ETag"]
    client.put_object(Bucket=s3_bucket.name, Key="head", Body=b"v2", IfMatch=etag)
    with pytest.raises(ClientError) as stale:
        client.put_object(Bucket=s3_bucket.name, Key="head", Body=b"v3", IfMatch=etag)
    assert stale.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert client.get_object(Bucket=s3_bucket.name, Key="head")["Body"].read() == b"v2"


def test_the_secret_key_stays_out_of_the_repr(s3_server: S3Server) -> None:
    secret = s3_server.storage_options()["AWS_SECRET_ACCESS_KEY"]
    assert secret not in repr(s3_server)
    assert s3_server.pyarrow_options()["secret_key"] == secret


def test_each_test_gets_its_own_empty_bucket(s3_bucket: S3Bucket) -> None:
    from pyarrow.fs import FileSelector

    assert s3_bucket.filesystem().get_file_info(FileSelector(s3_bucket.name, recursive=True)) == []
    assert s3_bucket.name in [b["Name"] for b in s3_bucket.server.client().list_buckets()["Buckets"]]


def test_a_taken_port_is_a_service_error_and_leaves_nothing(s3_server: S3Server) -> None:
    from canal.errors import ServiceError

    second = S3Server(port=s3_server.port)
    with pytest.raises(ServiceError, match="in use"):
        second.start()
    assert not second.is_running and second.pid is None and second.workdir is None
    assert s3_server.is_running  # the first server is untouched


def test_a_missing_moto_server_is_a_service_error_naming_the_setup(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from canal.errors import ServiceError

    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))  # no moto_server beside it
    monkeypatch.setenv("PATH", str(tmp_path))
    server = S3Server()
    with pytest.raises(ServiceError, match=r"moto_server.*scripts/setup\.sh"):
        server.start()
    assert server.pid is None and server.workdir is None
