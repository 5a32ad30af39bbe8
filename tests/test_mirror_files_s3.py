"""The mirror's own small files under a root in an object store (a private S3-compatible server), each module through
:mod:`canal.lake.store.fs`: the applied position, the writer lease, the step marks of a table's first commit, staged
parts, held XA rows, the kept expanded batch and the DDL batch handed from a task to the driver -- written, read,
listed and deleted as objects under the root's prefix, and an error leaving them as they were."""

from __future__ import annotations

import json
import time
from typing import Any

import attrs
import pytest

pytest.importorskip("obstore")
pytest.importorskip("pyarrow")

import pyarrow as pa

from canal.lake import DeltaMirror
from canal.lake.apply.cascade import ExpandedBatch
from canal.lake.apply.step_marks import created_by, created_metadata
from canal.lake.apply.xa import HeldTransactions, MirrorXAError, held_directory
from canal.lake.identity.applied import (
    Applied,
    Pending,
    applied_path,
    read_applied,
    root_number,
    with_pending,
    write_applied,
)
from canal.lake.identity.lease import LEASE_S, WriterLease, lease_path
from canal.lake.settings import MirrorSettings
from canal.lake.store import fs, staged
from canal.lake.types import MirrorError, MirrorLeaseError
from canal.spark.mirror_tasks import SPILL_PREFIX, _drop_spills, _read_spill, write_partition
from canal.testing.plugin import S3Bucket
from tests.test_mirror_xa_units import _batch, _row

pytestmark = pytest.mark.integration

PREFIX = "m"


@pytest.fixture
def root(s3_bucket: S3Bucket) -> str:
    """The mirror's root in the bucket, its options registered as the mirror registers them."""
    return fs.register(f"{s3_bucket.url}/{PREFIX}", "the mirror's root", s3_bucket.storage_options)


def _keys(bucket: S3Bucket) -> list[str]:
    """Every object's name under the root, relative to it."""
    listed = bucket.server.client().list_objects_v2(Bucket=bucket.name, Prefix=f"{PREFIX}/")
    return sorted(item["Key"].removeprefix(f"{PREFIX}/") for item in listed.get("Contents", []))


def _object(bucket: S3Bucket, name: str) -> bytes:
    return bytes(bucket.server.client().get_object(Bucket=bucket.name, Key=f"{PREFIX}/{name}")["Body"].read())


class _Owner:
    """A mirror object, as far as a lease cares (it is weakly referenced)."""


def test_the_applied_record_is_written_read_and_a_damaged_one_is_a_typed_error(root: str, s3_bucket: S3Bucket) -> None:
    name = f"_pycanal_applied.{b'app'.hex()}.json"
    assert applied_path(root, "app") == f"{root}/{name}"  # a URI joined with "/", never collapsed to s3:/
    assert read_applied(root, "app") is None and _keys(s3_bucket) == []
    record = Applied(3, "f" * 32, 3, "d", 1, "mysql-bin.000002", 120, 0, "0-1-9", None)
    write_applied(root, "app", with_pending(record, Pending(4, "e" * 32, 4)))
    assert _keys(s3_bucket) == [name]
    assert read_applied(root, "app") == attrs.evolve(record, pending=Pending(4, "e" * 32, 4))
    assert root_number(root, "other") == 4 and root_number(root, "app") == -1  # the others' numbers only
    fs.write_bytes(applied_path(root, "app"), b"{not json")
    with pytest.raises(MirrorError, match="cannot be read"):
        read_applied(root, "app")
    assert _object(s3_bucket, name) == b"{not json" and _keys(s3_bucket) == [name]


def test_a_second_writer_of_a_remote_root_is_refused_until_the_first_releases(root: str, s3_bucket: S3Bucket) -> None:
    name = f"_pycanal_lease.{b'app'.hex()}.json"
    first_owner, second_owner = _Owner(), _Owner()
    first, second = WriterLease(root, "app", first_owner), WriterLease(root, "app", second_owner)
    assert first.root == root and first.path == f"{root}/{name}"  # the URI itself, not a resolved local path
    first.hold()
    assert _keys(s3_bucket) == [name] and json.loads(_object(s3_bucket, name))["token"] == first.token
    with pytest.raises(MirrorLeaseError, match="another DeltaMirror of this process holds the lease"):
        second.hold()
    assert json.loads(_object(s3_bucket, name))["token"] == first.token  # refused: the first's lease stays
    assert not second._write(replace=False)  # a conditional PUT never replaces a lease there
    assert json.loads(_object(s3_bucket, name))["token"] == first.token
    first.release()
    assert _keys(s3_bucket) == []
    second.hold()
    assert json.loads(_object(s3_bucket, name))["token"] == second.token
    second.release()
    assert _keys(s3_bucket) == []


def test_a_remote_lease_from_another_host_holds_while_it_is_renewed(root: str, s3_bucket: S3Bucket) -> None:
    owner = _Owner()
    lease = WriterLease(root, "app", owner)
    other = {"host": "another-host.invalid", "pid": 1, "started": None, "token": "theirs", "root": root}
    written = json.dumps({**other, "renewed": time.time()}).encode()
    fs.write_bytes(lease_path(root, "app"), written)
    with pytest.raises(MirrorLeaseError, match=r"process 1 on another-host\.invalid holds the lease"):
        lease.hold()
    assert fs.read_bytes(lease_path(root, "app")) == written
    fs.write_bytes(lease_path(root, "app"), json.dumps({**other, "renewed": time.time() - LEASE_S - 1}).encode())
    lease.hold()  # not renewed for LEASE_S: its holder is gone, the lease taken over
    assert json.loads(fs.read_text(lease_path(root, "app")))["token"] == lease.token


def test_a_tables_first_commit_names_the_step_that_created_it(root: str, s3_bucket: S3Bucket) -> None:
    import deltalake
    from deltalake import CommitProperties

    table = fs.join(root, "s.t")
    assert not created_by(table, "app", 1, 0)  # no table
    deltalake.write_deltalake(
        table,
        pa.table({"id": [1]}),
        storage_options=fs.delta_options(table),
        commit_properties=CommitProperties(custom_metadata=created_metadata("app", 1, 0)),
    )
    assert "s.t/_delta_log/00000000000000000000.json" in _keys(s3_bucket)
    assert created_by(table, "app", 1, 0)
    assert not created_by(table, "app", 1, 1) and not created_by(table, "other", 1, 0)


def test_staged_parts_are_written_read_taken_up_and_deleted(root: str, s3_bucket: S3Bucket) -> None:
    t, u = fs.join(root, "s.t"), fs.join(root, "s.u")

    def ids(rows: Any) -> list[int]:
        return sorted(rows.column("id").to_pylist())

    def name(batch: int, app: str) -> str:
        return f"{staged.STAGED_DIR}/{batch:020d}-{app.encode().hex()}.arrow"

    assert staged.staged_rows(t) is None
    first = staged.write(root, "app", 1, {"s.t": pa.table({"id": [1, 2]}), "s.u": pa.table({"id": [3]})})
    assert first == f"{root}/{name(1, 'app')}"
    staged.write(root, "other", 2, {"s.t": pa.table({"id": [9]})})  # another app id's
    held = staged.Staged(root, "app")
    held.stage(3, {t: pa.table({"id": [4]})})
    held.stage(4, {u: pa.table({"id": [5]})})
    assert _keys(s3_bucket) == [name(1, "app"), name(2, "other"), name(3, "app"), name(4, "app")]
    assert ids(staged.staged_rows(t)) == [1, 2, 4, 9] and ids(staged.staged_rows(u)) == [3, 5]

    # a new mirror takes its app's parts up, without those its logs hold (s.u through batch 4): batch 4's file goes
    loaded = staged.load(root, "app", lambda base: 4 if base == u else None)
    assert sorted(loaded.tables) == [t] and loaded.tables[t].batches == [1, 3]
    assert [ids(rows) for rows in loaded.tables[t].parts] == [[1, 2], [4]]
    assert loaded.files == {1: {t}, 3: {t}}
    assert _keys(s3_bucket) == [name(1, "app"), name(2, "other"), name(3, "app")]
    loaded.flushed(t)  # in its log now: its files go, another app's stays
    assert _keys(s3_bucket) == [name(2, "other")]

    fs.write_bytes(fs.join(root, name(2, "other")), b"not arrow")
    with pytest.raises(MirrorError, match=r"staged changes .* cannot be read"):
        staged.staged_rows(t)
    assert _keys(s3_bucket) == [name(2, "other")] and _object(s3_bucket, name(2, "other")) == b"not arrow"


def test_held_xa_rows_wait_in_the_store_until_their_commit(root: str, s3_bucket: S3Bucket) -> None:
    xid = "X'7831',X'',1"
    key = b"7831::1".hex()
    directory = held_directory(root, "app")
    assert directory == f"{root}/_pycanal_xa.app"
    held = HeldTransactions(directory)
    out, record = held.follow(_batch(_row("INSERT", 1), _row("INSERT", 2, xid=xid), _row("XAPREPARE", xid=xid)), 1)
    assert out.column("keys").to_pylist() == [json.dumps({"id": "1"})]
    record()
    assert _keys(s3_bucket) == [f"_pycanal_xa.app/{key}.ended.1", f"_pycanal_xa.app/{key}.rows.1.arrow"]

    with pytest.raises(MirrorXAError, match="whose XA PREPARE"):
        held.follow(_batch(_row("XACOMMIT", xid="'other'", sql="XA COMMIT 'other'")), 2)
    assert _keys(s3_bucket) == [f"_pycanal_xa.app/{key}.ended.1", f"_pycanal_xa.app/{key}.rows.1.arrow"]

    out, record = held.follow(_batch(_row("INSERT", 3), _row("XACOMMIT", xid=xid, sql=f"XA COMMIT {xid}")), 2)
    assert out.column("keys").to_pylist() == [json.dumps({"id": "3"}), json.dumps({"id": "2"})]
    record()
    assert f"_pycanal_xa.app/{key}.done.2" in _keys(s3_bucket)
    held.collect(3)  # batch 2 is applied for good: the transaction's files go
    assert _keys(s3_bucket) == []

    fs.write_bytes(fs.join(directory, f"{key}.rows.5.arrow"), b"not arrow")
    with pytest.raises(MirrorError, match=r"held XA rows .* cannot be read"):
        held.follow(_batch(_row("XACOMMIT", xid=xid, sql=f"XA COMMIT {xid}")), 6)
    assert _keys(s3_bucket) == [f"_pycanal_xa.app/{key}.rows.5.arrow"]


def test_the_expanded_batch_is_kept_in_the_store_until_a_later_one(root: str, s3_bucket: S3Bucket) -> None:
    kept = ExpandedBatch(root, "app")
    one, two = pa.table({"id": [1]}), pa.table({"id": [2, 3]})
    kept.save(1, one)
    kept.save(2, two)
    fs.write_bytes(fs.join(root, "_pycanal_cascade.other.1.arrow"), b"")  # another app id's
    assert kept.load(1) == one and kept.load(2) == two and kept.load(3) is None
    kept.drop_before(2)
    assert _keys(s3_bucket) == ["_pycanal_cascade.app.2.arrow", "_pycanal_cascade.other.1.arrow"]


def test_a_ddl_batch_is_handed_to_the_driver_through_the_store(root: str, s3_bucket: S3Bucket) -> None:
    rows = pa.table({"is_ddl": [True], "sql": ["CREATE TABLE t (id int)"]})
    answer = pa.Table.from_batches(
        list(write_partition(DeltaMirror, MirrorSettings(root=root, app_id="app"), "e", 5, rows.to_batches(), None))
    )
    (spill,) = answer.column("spill").to_pylist()
    assert answer.column("status").to_pylist() == ["ddl"] and spill.startswith(f"{root}/{SPILL_PREFIX}5.")
    assert _keys(s3_bucket) == [spill.removeprefix(f"{root}/")]
    assert _read_spill(spill) == rows
    assert _keys(s3_bucket) == []  # read once, then gone

    for name in (f"{SPILL_PREFIX}3.a.arrow", f"{SPILL_PREFIX}4.b.arrow", f"{SPILL_PREFIX}x.arrow", "other.arrow"):
        fs.write_bytes(fs.join(root, name), b"")
    _drop_spills(root, 4)  # those of batches before 4, left by a failed driver
    assert _keys(s3_bucket) == [f"{SPILL_PREFIX}4.b.arrow", f"{SPILL_PREFIX}x.arrow", "other.arrow"]
