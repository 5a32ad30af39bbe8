"""The mirror with its root in an object store (the private S3-compatible server): every kind of step, both modes,
reads as the same batches applied to a local root; a RENAME or a rewrite that a crash cut short between its copies
and deletes is finished by the replay; a table that was not copied there is refused; the credentials stay out of
reprs and messages.

Which commit path each store takes: locally the mirror's own Delta commits (change-log appends and whole-file trims,
:mod:`canal.lake.store.delta_append`) are published by renames that never replace; in an object store by a conditional
PUT (``If-None-Match: *``) -- :func:`test_direct_appends_publish_by_conditional_put` watches the puts. Tables the
mirror creates, folds and rewrites are committed by ``deltalake`` itself in both.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from canal.errors import StorageLocationError
from canal.lake.store import fs, table_moves
from canal.spark import DeltaMirror
from canal.testing.plugin import S3Bucket
from tests.mirror_rows import CREATE, batch, ddl, delete, upsert, values
from tests.test_mirror_step_faults import BATCHES, MODEL

pytest.importorskip("deltalake")
pytest.importorskip("obstore")

# (moto answers a request in milliseconds, and opening a Delta table takes several: folds only where a step needs one)
OPTIONS: dict[str, Any] = {"background_folds": False, "fold_ratio": 1000.0}
CHECKED = (1, 4, 6, 7, len(BATCHES))  # after the creates, the rename swap, a drop, a rename, the end


def _state(mirror: DeltaMirror) -> dict[str, dict[int, str]]:
    return {table: values(mirror.read(schema, table)) for schema, table in mirror.tables()}


@pytest.fixture
def root(s3_bucket: S3Bucket) -> Iterator[str]:
    yield f"{s3_bucket.url}/mirror"


# copy-on-write differs from merge-on-read in its MERGE into the table, which deltalake commits in the store alike:
# the batches up to the rename swap
@pytest.mark.parametrize(("mode", "batches"), [("merge_on_read", len(BATCHES)), ("copy_on_write", 4)])
def test_every_kind_of_step_reads_as_on_a_local_root(
    s3_bucket: S3Bucket, root: str, tmp_path: Path, mode: Any, batches: int
) -> None:
    remote = DeltaMirror(root, storage_options=s3_bucket.storage_options, mode=mode, **OPTIONS)
    local = DeltaMirror(tmp_path / "mirror", mode=mode, **OPTIONS)
    for number, rows in enumerate(BATCHES[:batches], 1):
        for mirror in (remote, local):
            mirror.apply(batch(*rows), number)
        if number in CHECKED or number == batches:
            assert _state(remote) == _state(local) == MODEL[number - 1], number
    again = remote.apply(batch(*BATCHES[batches - 1]), batches)  # a replay: skipped, nothing changes
    assert set(again.tables.values()) == {"skipped"}
    remote.fold()
    assert _state(remote) == MODEL[batches - 1]
    assert remote.version("s", "a") == local.version("s", "a") is not None
    remote.close()
    local.close()
    # a new mirror object (a restarted process) on the same root reads the same and goes on from the step journal
    reopened = DeltaMirror(root, storage_options=s3_bucket.storage_options, mode=mode, **OPTIONS)
    assert _state(reopened) == MODEL[batches - 1]
    reopened.apply(batch(upsert("a", 99, "late")), batches + 1)
    assert values(reopened.read("s", "a"))[99] == "late"
    reopened.close()


def test_a_column_reorder_rewrites_the_table_in_the_store(s3_bucket: S3Bucket, root: str) -> None:
    """MODIFY ... FIRST: delta-rs keeps a table's column order on overwrite, so the table is written anew and
    replaces the old one -- by copies and deletes here, with its last batch id carried over."""
    mirror = DeltaMirror(root, storage_options=s3_bucket.storage_options, **OPTIONS)
    mirror.apply(batch(ddl("t", "CREATE", CREATE.format(table="t")), upsert("t", 1, "x"), upsert("t", 2, "y")), 1)
    reordered = json.dumps([["v", "varchar(20)", False], ["id", "int(11)", True]])
    row = {**upsert("t", 3, "z"), "columns": reordered}
    types = {"RETYPED_FROM": json.dumps({"v": "varchar(20)"}), "RETYPED_TO": json.dumps({"v": "varchar(20)"})}
    mirror.apply(batch(ddl("t", "ALTER", "ALTER TABLE t MODIFY v VARCHAR(20) FIRST", props=types), row), 2)
    table = mirror.read("s", "t")
    assert table.column_names == ["v", "id"]
    assert values(table) == {1: "x", 2: "y", 3: "z"}
    assert mirror.version("s", "t") == 2
    location = mirror.table_location("s", "t")
    assert not fs.exists(f"{location}.rewritten")  # the rewritten copy is gone
    mirror.close()


class _Cut(BaseException):
    """The process dies here (nothing of the mirror catches it)."""


@pytest.mark.parametrize("cut_at", ["log copied", "base copied", "base half deleted"])
def test_a_rename_cut_short_is_finished_by_the_replay(
    s3_bucket: S3Bucket, root: str, monkeypatch: pytest.MonkeyPatch, cut_at: str
) -> None:
    options = OPTIONS  # the change log is not folded: the move carries it too
    mirror = DeltaMirror(root, storage_options=s3_bucket.storage_options, **options)
    first = batch(ddl("a", "CREATE", CREATE.format(table="a")), upsert("a", 1, "one"))
    mirror.apply(first, 1)
    mirror.apply(batch(upsert("a", 2, "two"), delete("a", 1)), 2)
    moving = batch(upsert("a", 3, "three"), ddl("a", "RENAME", "RENAME TABLE a TO b"), upsert("b", 4, "four"))
    real_copy, real_rmtree = fs.copy_tree, fs.rmtree
    seen: list[str] = []

    def copy_tree(source: str, target: str) -> int:
        copied = real_copy(source, target)
        seen.append("log copied" if "/_changes/" in source else "base copied")
        if seen[-1] == cut_at:
            raise _Cut(cut_at)
        return copied

    def rmtree(location: str) -> None:
        if cut_at == "base half deleted" and "base copied" in seen and location.endswith("s.a"):
            store = fs.listdir(fs.join(location, "_delta_log"))
            fs.unlink(fs.join(location, "_delta_log", store[0]))  # its log's first object only
            raise _Cut(cut_at)
        real_rmtree(location)

    monkeypatch.setattr(table_moves.fs, "copy_tree", copy_tree)
    monkeypatch.setattr(table_moves.fs, "rmtree", rmtree)
    with pytest.raises(_Cut):
        mirror.apply(moving, 3)
    monkeypatch.undo()
    del mirror  # dropped as a dead process drops it
    restarted = DeltaMirror(root, storage_options=s3_bucket.storage_options, **options)
    restarted.apply(moving, 3)  # the consumer acked nothing of it: replayed
    assert _state(restarted) == {"b": {2: "two", 3: "three", 4: "four"}}
    assert not fs.exists(restarted.table_location("s", "a"))
    restarted.close()


def test_a_rename_onto_a_table_the_mirror_holds_is_refused(s3_bucket: S3Bucket, root: str) -> None:
    mirror = DeltaMirror(root, storage_options=s3_bucket.storage_options, **OPTIONS)
    a, b = mirror.table_location("s", "a"), mirror.table_location("s", "b")
    mirror.apply(batch(ddl("a", "CREATE", CREATE.format(table="a")), upsert("a", 1, "one")), 1)
    mirror.apply(batch(ddl("b", "CREATE", CREATE.format(table="b")), upsert("b", 2, "two")), 2)
    with pytest.raises(Exception, match="already has that table"):
        table_moves.move_table(a, a + "-log", b, b + "-log")
    assert _state(mirror) == {"a": {1: "one"}, "b": {2: "two"}}  # nothing moved, nothing deleted
    mirror.close()


def test_direct_appends_publish_by_conditional_put(
    s3_bucket: S3Bucket, root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The change log's appends after the first are Delta commits the mirror writes itself: in an object store each
    is a PUT that only creates (``If-None-Match: *``)."""
    mirror = DeltaMirror(root, storage_options=s3_bucket.storage_options, stage_rows=0, **OPTIONS)
    mirror.apply(batch(ddl("a", "CREATE", CREATE.format(table="a")), upsert("a", 1, "one")), 1)
    mirror.apply(batch(upsert("a", 2, "two")), 2)  # creates the change log (deltalake)
    puts: list[tuple[str, bool]] = []
    real = fs.write_bytes

    def write_bytes(location: str, data: bytes, *, replace: bool = True, synced: bool = True) -> bool:
        puts.append((location.rsplit("/", 2)[-2], replace))
        return real(location, data, replace=replace, synced=synced)

    monkeypatch.setattr(fs, "write_bytes", write_bytes)
    mirror.apply(batch(upsert("a", 3, "three")), 3)
    assert ("_delta_log", False) in puts  # the commit: a conditional PUT
    assert values(mirror.read("s", "a")) == {1: "one", 2: "two", 3: "three"}
    mirror.close()


def test_table_path_is_local_only_and_secrets_stay_out_of_reprs(s3_bucket: S3Bucket, root: str) -> None:
    mirror = DeltaMirror(root, storage_options=s3_bucket.storage_options)
    with pytest.raises(StorageLocationError, match="s3://"):
        mirror.table_path("s", "a")
    assert mirror.table_location("s", "a") == f"{root}/s.a"
    secret = s3_bucket.storage_options["AWS_SECRET_ACCESS_KEY"]
    assert secret not in repr(mirror) and secret not in repr(fs._resolved(root)[0])
    with pytest.raises(StorageLocationError) as refused:
        DeltaMirror(root.replace("s3://", "ftp://"), storage_options=s3_bucket.storage_options)
    assert secret not in str(refused.value)
    with pytest.raises(StorageLocationError, match="local path"):
        DeltaMirror("/tmp/somewhere", storage_options=s3_bucket.storage_options)
