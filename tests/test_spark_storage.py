"""The source's spool in an object store (a private S3-compatible server): batches are written whole and read back,
a task reads its batch from the store, the first of two attempts at a file wins through a conditional PUT, spent
files go, and the store's credentials stay out of reprs and errors. The same operations on a local directory take
the local path (renames and hard links)."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("obstore")
pytest.importorskip("pyarrow")

from canal.errors import StorageLocationError
from canal.lake.forms.changes import entries_to_batch
from canal.lake.store.storage import Storage, StorageError, in_object_store
from canal.spark.offsets import INITIAL_OFFSET
from canal.spark.source import config_from_options
from canal.spark.spool import Spool, SpoolError, read_spooled
from canal.testing.plugin import S3Bucket

pytestmark = pytest.mark.integration


def _batch() -> Any:
    from tests.procs.mirror_writer import batch

    return entries_to_batch(batch(1, {}), "dest", 0)


def _keys(bucket: S3Bucket) -> list[str]:
    from pyarrow.fs import FileSelector

    infos = bucket.filesystem().get_file_info(FileSelector(bucket.name, recursive=True, allow_not_found=True))
    return sorted(i.path.removeprefix(f"{bucket.name}/") for i in infos if i.size is not None)


@pytest.fixture
def spool(s3_bucket: S3Bucket) -> Spool:
    return Spool(f"{s3_bucket.url}/ckpt.canal-spool", s3_bucket.storage_options)


def test_a_batch_spooled_to_the_store_reads_back_and_goes_when_committed(spool: Spool, s3_bucket: S3Bucket) -> None:
    batch = _batch()
    starts = [{**INITIAL_OFFSET, "batch": n} for n in range(3)]
    writer = spool.open(starts[0], batch.schema)
    writer.write(batch)
    assert spool.read(starts[0]) is None and _keys(s3_bucket) == []  # nothing in the store before it is published
    writer.publish(starts[1])
    for start, end in zip(starts[1:], [*starts[2:], {**INITIAL_OFFSET, "batch": 3}], strict=True):
        spool.write(start, end, batch)
    got = spool.read(starts[0])
    assert got is not None and got[0].equals(batch) and got[1] == starts[1]
    assert spool.rows(starts[0]) == batch.num_rows and spool.rows({**INITIAL_OFFSET, "batch": 9}) is None
    # a task reads its batch from the store with what the partition carries (pickled, as Spark ships it)
    shared = pickle.loads(pickle.dumps(spool.shared(starts[1])))
    assert [b.to_pylist() for b in read_spooled(shared)] == [batch.to_pylist()]
    spool.discard_through({**INITIAL_OFFSET, "batch": 2})  # Spark committed batches 0 and 1
    assert [spool.read(s) is None for s in starts] == [True, True, False]
    assert _keys(s3_bucket) == [f"ckpt.canal-spool/{spool.name_for(starts[2])}"]
    spool.clear()
    assert _keys(s3_bucket) == []
    with pytest.raises(SpoolError, match=f"spool file {spool.root}/.* is not there for this task"):
        list(read_spooled(shared))
    with pytest.raises(StorageError, match="object store"):
        spool.path_for(starts[0])  # no local path to hand out


def test_a_discarded_writer_leaves_nothing_in_the_store_or_on_disk(spool: Spool, s3_bucket: S3Bucket) -> None:
    import tempfile

    staging = Path(tempfile.gettempdir()) / "pycanal-staging"
    before = set(staging.iterdir()) if staging.exists() else set()
    batch = _batch()
    writer = spool.open(dict(INITIAL_OFFSET), batch.schema)
    writer.write(batch)
    writer.discard()
    assert _keys(s3_bucket) == [] and set(staging.iterdir()) == before


@pytest.mark.parametrize("where", ["s3", "local"])
def test_the_first_of_two_writers_of_a_file_wins(where: str, s3_bucket: S3Bucket, tmp_path: Path) -> None:
    """Publishing without replacing: a conditional PUT in the store, a rename that never replaces (or a hard link)
    on a local disk. The second writer learns it lost; the first one's content stays."""
    storage = (
        Storage.at(f"{s3_bucket.url}/spool", "the spool directory", s3_bucket.storage_options)
        if where == "s3"
        else Storage.at(tmp_path, "the spool directory")
    )
    first, second = storage.writer("chunks/r.arrow"), storage.writer("chunks/r.arrow")
    first.fh.write(b"first")
    second.fh.write(b"second")
    assert first.publish(replace=False) is True
    assert second.publish(replace=False) is False
    with storage.open("chunks/r.arrow") as source:
        assert source.read() == b"first"
    assert storage.names("chunks") == ["r.arrow"] and storage.exists("chunks/r.arrow")
    assert storage.write("chunks/r.arrow", lambda fh: fh.write(b"third")) is True  # replacing is allowed
    with storage.open("chunks/r.arrow") as source:
        assert source.read() == b"third"
    storage.delete("chunks/r.arrow")
    storage.delete("chunks/r.arrow")  # gone already: nothing to do
    assert storage.names("chunks") == [] and not storage.exists("chunks/r.arrow")
    with pytest.raises(FileNotFoundError, match=r"r\.arrow"), storage.open("chunks/r.arrow"):
        pass


def test_credentials_stay_out_of_reprs_and_errors(s3_bucket: S3Bucket) -> None:
    secret = s3_bucket.storage_options["AWS_SECRET_ACCESS_KEY"]
    spool = Spool(f"{s3_bucket.url}/s", s3_bucket.storage_options)
    assert secret not in repr(spool.storage) and secret not in repr(spool.shared(dict(INITIAL_OFFSET)))
    # a bad option: the error names the keys given, never a value
    bad = Storage.at(f"{s3_bucket.url}/s", "the spool directory", {**s3_bucket.storage_options, "no_such_key": "x"})
    with pytest.raises(StorageLocationError, match="cannot be opened") as refused:
        bad.exists("f")
    assert secret not in str(refused.value) and "aws_secret_access_key" in str(refused.value)
    # a wrong secret: the store refuses; the message does not carry the key
    wrong = Storage.at(
        f"{s3_bucket.url}/s",
        "the spool directory",
        {**s3_bucket.storage_options, "AWS_ENDPOINT_URL": "http://127.0.0.1:9"},
    )
    with pytest.raises(StorageError, match="could not look for") as failed:
        wrong.exists("f")
    assert secret not in str(failed.value)


def test_locations_and_options_are_checked_before_anything_is_written(tmp_path: Path) -> None:
    assert in_object_store("s3://b/p") and in_object_store("GS://b/p") and not in_object_store(str(tmp_path))
    assert not in_object_store("file:///tmp/x")
    with pytest.raises(StorageLocationError, match=r"storage options .*aws_region.* are for object-store URIs"):
        Spool(tmp_path / "s", {"AWS_REGION": "x"})
    with pytest.raises(StorageLocationError, match="names no bucket"):
        Spool("s3:///prefix")
    assert list(tmp_path.iterdir()) == []
    # the source's spool.storage.* options are the store's, not instance properties
    options = {"destination": "d", "master.address": "127.0.0.1:3306", "spool.dir": "s3://b/s"}
    assert config_from_options({**options, "spool.storage.AWS_REGION": "us-east-1"}).destination == "d"


def test_a_source_whose_spool_is_in_a_store_shares_it_with_its_tasks_by_default() -> None:
    pytest.importorskip("pyspark")
    from canal.spark.datasource import CanalDataSource

    options = {"destination": "d", "master.address": "127.0.0.1:3306", "spool.dir": "s3://bucket/spool"}
    assert CanalDataSource(options).reader_options()["spool.shared"] == "true"  # every executor reaches the store
    assert CanalDataSource({**options, "spool.shared": "false"}).reader_options()["spool.shared"] == "false"
    assert CanalDataSource({**options, "spool.dir": "/tmp/s"}).reader_options()["spool.shared"] == "false"


def test_a_store_configured_by_the_environment_alone(s3_bucket: S3Bucket, monkeypatch: pytest.MonkeyPatch) -> None:
    """No options: the store's variables (AWS_ENDPOINT_URL, keys, AWS_ALLOW_HTTP, as deltalake reads them) apply."""
    for key, value in s3_bucket.storage_options.items():
        monkeypatch.setenv(key, value)
    spool = Spool(f"{s3_bucket.url}/from-env")
    spool.write(dict(INITIAL_OFFSET), {**INITIAL_OFFSET, "batch": 1}, _batch())
    assert _keys(s3_bucket) == [f"from-env/{spool.name_for(dict(INITIAL_OFFSET))}"]
