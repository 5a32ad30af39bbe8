"""Durable file writes (``canal.files``), which every kept file goes through: a file is replaced whole or not at all,
the first writer wins where asked, a failed write leaves the previous file and no temporary file, and directory
fsyncs that a file system does not offer are skipped while real I/O errors are not."""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path
from typing import BinaryIO

import pytest

from canal import files
from canal.errors import MetaError, SchemaError
from canal.files import temp_files_of, write_bytes_atomic, write_file_atomic
from canal.meta.persist import read_json, remove_stale_temp_files, write_json_atomic
from canal.schema.history import FileHistoryStore


def test_a_file_is_replaced_whole_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "doc"
    write_bytes_atomic(target, b"first")
    write_bytes_atomic(target, b"second")
    assert target.read_bytes() == b"second"
    assert sorted(p.name for p in target.parent.iterdir()) == ["doc"]


def test_without_replace_the_first_writer_wins(tmp_path: Path) -> None:
    target = tmp_path / "range"

    def writing(data: bytes) -> object:
        def fill(fh: BinaryIO) -> None:
            fh.write(b"partial rows of a read that starts over")
            fh.seek(0)
            fh.truncate()  # a fill may start over
            fh.write(data)

        return fill

    assert write_file_atomic(target, writing(b"first attempt"), replace=False) is True
    assert write_file_atomic(target, writing(b"second attempt"), replace=False) is False
    assert target.read_bytes() == b"first attempt"
    assert not temp_files_of(target)


@pytest.mark.parametrize("replace", [True, False])
def test_a_failed_write_leaves_the_previous_file_and_nothing_else(tmp_path: Path, replace: bool) -> None:
    target = tmp_path / "doc"
    target.write_bytes(b"previous")

    def fails(fh: BinaryIO) -> None:
        fh.write(b"half")
        raise RuntimeError("the reader broke")

    with pytest.raises(RuntimeError, match="the reader broke"):
        write_file_atomic(target, fails, replace=replace)
    assert target.read_bytes() == b"previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["doc"]


def test_temporary_files_of_killed_writers_are_found_and_removed(tmp_path: Path) -> None:
    target = tmp_path / "meta.json"
    write_json_atomic(target, {"a": 1})
    stale = tmp_path / f".meta.json{files.TEMP_MARK}0123abcd"
    stale.write_bytes(b'{"a":')  # a writer killed before its rename
    (tmp_path / ".other.json.tmp-1").write_bytes(b"")  # another file's: not ours to remove
    assert temp_files_of(target) == [stale]
    assert remove_stale_temp_files(target) == 1
    assert not stale.exists() and (tmp_path / ".other.json.tmp-1").exists()
    assert read_json(target) == {"a": 1}


def test_a_directory_fsync_the_file_system_lacks_is_skipped_but_io_errors_are_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_fsync = os.fsync
    failure = {"errno": errno.EINVAL}

    def fsync(fd: int) -> None:
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            raise OSError(failure["errno"], os.strerror(failure["errno"]))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    target = tmp_path / "doc"
    write_bytes_atomic(target, b"kept")  # EINVAL: this file system has no directory fsync
    assert target.read_bytes() == b"kept"
    failure["errno"] = errno.EIO
    with pytest.raises(OSError) as raised:
        write_bytes_atomic(target, b"new")
    assert raised.value.errno == errno.EIO
    with pytest.raises(MetaError, match="cannot write"):
        write_json_atomic(tmp_path / "meta.json", {"a": 1})


def test_a_schema_history_that_cannot_be_written_is_a_schema_error_and_keeps_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileHistoryStore(tmp_path / "history.json")
    store.save('{"v": 1}')

    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(SchemaError, match=r"cannot write the schema history .*No space left"):
        store.save('{"v": 2}')
    monkeypatch.undo()
    assert store.load() == '{"v": 1}'
    assert not temp_files_of(store.path)


def test_a_file_system_without_hard_links_is_named_and_keeps_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Neither a rename that never replaces nor a hard link (some FUSE and object-store mounts)."""

    def no_links(src: object, dst: object) -> None:
        raise OSError(errno.EPERM, os.strerror(errno.EPERM))

    monkeypatch.setattr(files, "_rename_noreplace", lambda source, target: None)
    monkeypatch.setattr(os, "link", no_links)
    target = tmp_path / "range"
    write_bytes_atomic(target, b"replaced as usual")  # a replace needs no link
    with pytest.raises(files.HardLinksUnsupportedError, match=f"{tmp_path} has no hard links") as raised:
        write_file_atomic(tmp_path / "other", lambda fh: None, replace=False)
    assert raised.value.errno == errno.EPERM
    assert target.read_bytes() == b"replaced as usual" and not (tmp_path / "other").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["range"]  # no temporary file left


def test_a_name_taken_only_if_absent_deletes_no_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``rename_if_absent`` renames (no temporary name to delete: each deleted name slows the next file creations on
    ext4 without a journal), and leaves both files as they are when the target exists."""
    unlinked: list[str] = []
    real_unlink = os.unlink

    def unlink(path: object, *args: object, **kwargs: object) -> None:
        unlinked.append(str(path))
        real_unlink(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "unlink", unlink)
    source, target = tmp_path / "staged", tmp_path / "00.json"
    source.write_bytes(b"mine")
    target.write_bytes(b"theirs")
    assert files.rename_if_absent(source, target) is False
    assert source.read_bytes() == b"mine" and target.read_bytes() == b"theirs"
    assert files.rename_if_absent(source, tmp_path / "01.json") is True
    assert not source.exists() and (tmp_path / "01.json").read_bytes() == b"mine"
    if sys.platform == "linux":  # glibc's renameat2, on a file system with RENAME_NOREPLACE
        assert files._RENAMEAT2 is not None
        assert unlinked == []


@pytest.mark.parametrize("code", [errno.EINVAL, errno.ENOSYS])
def test_without_a_rename_that_never_replaces_a_name_is_linked_then_the_source_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    """Where the kernel or the file system has no ``RENAME_NOREPLACE`` (EINVAL, ENOSYS), a hard link does it."""
    import ctypes

    def refused(*args: object) -> int:
        ctypes.set_errno(code)
        return -1

    monkeypatch.setattr(files, "_RENAMEAT2", refused)
    source, target = tmp_path / "staged", tmp_path / "00.json"
    source.write_bytes(b"mine")
    assert files.rename_if_absent(source, target) is True
    assert not source.exists() and target.read_bytes() == b"mine"
    source.write_bytes(b"again")
    assert files.rename_if_absent(source, target) is False
    assert source.read_bytes() == b"again" and target.read_bytes() == b"mine"


def test_a_rename_that_fails_otherwise_raises_and_keeps_the_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "staged"
    source.write_bytes(b"mine")
    with pytest.raises(FileNotFoundError):
        files.rename_if_absent(source, tmp_path / "no such directory" / "00.json")
    assert source.read_bytes() == b"mine"
