"""Durable file writes: a file appears whole or not at all, and stays once written, through crashes and power cuts.

Every file pycanal keeps (meta and log positions, the schema history, the Spark spools and journal) is written by
:func:`write_file_atomic` or, when its content comes over time, :class:`AtomicFile`: a temporary file in the same
directory, fsynced, then renamed over the target -- or, where the first writer must win, hard-linked to it only if
none is there -- and the directory fsynced so the new name is durable too. A reader, or a process restarted after a
crash, sees the previous file or the new one, never a mix.

"Only if none is there" is :func:`rename_if_absent`: a rename that never replaces a file (Linux's
``renameat2(RENAME_NOREPLACE)``), else a hard link and the removal of the temporary name.
"""

from __future__ import annotations

import ctypes
import errno
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

TEMP_MARK = ".tmp-"
"""Temporary files are named ``.<target name>.tmp-<random>`` beside their target (:func:`temp_files_of`)."""


class HardLinksUnsupportedError(OSError):
    """The file system of a target's directory has no hard links, which publishing a file only if there is none
    (``replace=False``) needs."""


# link(2)'s answers on file systems without hard links (FAT, some FUSE and object-store mounts)
_NO_HARD_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP}

# a directory fsync that the file system does not offer (some network and FUSE file systems): the rename is then as
# durable as that file system makes it
_NO_DIRECTORY_FSYNC = {errno.EINVAL, errno.ENOTSUP, errno.EBADF}


def _renameat2() -> Callable[..., int] | None:
    """The C library's ``renameat2`` (glibc 2.28+), None where there is none."""
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_RENAMEAT2 = _renameat2()
_AT_FDCWD = -100
_RENAME_NOREPLACE = 1
# renameat2's answers where the kernel or the file system lacks it (some FUSE and network file systems): link instead
_NO_RENAME_NOREPLACE = {errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP}


def _rename_noreplace(source: str, target: str) -> bool | None:
    """Rename ``source`` to ``target`` unless a file has that name: True when renamed, False when one had, None
    where there is no such rename (the caller links instead); other OSErrors propagate."""
    if _RENAMEAT2 is None:
        return None
    if _RENAMEAT2(_AT_FDCWD, os.fsencode(source), _AT_FDCWD, os.fsencode(target), _RENAME_NOREPLACE) == 0:
        return True
    code = ctypes.get_errno()
    if code == errno.EEXIST:
        return False
    if code in _NO_RENAME_NOREPLACE:
        return None
    raise OSError(code, os.strerror(code), source, None, target)


def rename_if_absent(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> bool:
    """Give the file ``source`` the name ``target`` unless a file has that name: True when it has it (``source``'s
    name is gone), False when another file had it (``source`` stays). A rename that cannot replace, where the
    system has one: it leaves no name to delete, and every name deleted makes the next file's creation slower on
    ext4 without a journal (it looks at each inode freed in the last minutes). Elsewhere :func:`link_if_absent`,
    then ``source`` removed; :class:`HardLinksUnsupportedError` where neither is possible."""
    renamed = _rename_noreplace(os.fspath(source), os.fspath(target))
    if renamed is not None:
        return renamed
    if not link_if_absent(source, target):
        return False
    os.unlink(source)
    return True


def link_if_absent(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> bool:
    """Give the file ``source`` the name ``target`` as well, unless a file has that name: False then.
    :class:`HardLinksUnsupportedError` where the file system has no hard links; other OSErrors propagate."""
    try:
        os.link(source, target)  # unlike a rename, a link never replaces a file
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno in _NO_HARD_LINKS:
            parent = os.path.dirname(os.fspath(target))
            raise HardLinksUnsupportedError(exc.errno, f"{parent} has no hard links ({exc.strerror})") from exc
        raise
    return True


class AtomicFile:
    """A file written under a temporary name beside ``path`` and published whole (:meth:`publish`), or dropped
    (:meth:`discard`, or leaving the ``with`` block without publishing). Its content may be written over time;
    :meth:`sync` makes what is written so far durable, so that :meth:`publish` has little left to flush. Creates the
    parent directory."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tmp = self.path.with_name(f".{self.path.name}{TEMP_MARK}{uuid.uuid4().hex}")
        self.fh: BinaryIO = open(self._tmp, "wb")  # noqa: SIM115 -- closed by publish / discard

    def __enter__(self) -> AtomicFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()

    def sync(self) -> None:
        """Flush what is written so far to disk."""
        self.fh.flush()
        os.fsync(self.fh.fileno())

    def publish(self, *, replace: bool = True) -> bool:
        """Make the file durable and give it its name. With ``replace`` it replaces any file at ``path``. Without it
        it is published only if there is none: True when it was, False when another writer's file was there first
        (it stays, and this one is dropped; :class:`HardLinksUnsupportedError` where the file system has no hard
        links). The temporary file is removed whatever happens; OSError propagates."""
        try:
            self.sync()
            self.fh.close()
            if replace:
                os.replace(self._tmp, self.path)
            elif not rename_if_absent(self._tmp, self.path):
                return False
        finally:
            self.discard()
        fsync_directory(self.path.parent)
        return True

    def discard(self) -> None:
        """Drop the temporary file (nothing if it was published)."""
        self.fh.close()
        self._tmp.unlink(missing_ok=True)


def write_file_atomic(path: str | os.PathLike[str], fill: Callable[[BinaryIO], None], *, replace: bool = True) -> bool:
    """Write ``path`` with ``fill`` (given the open temporary file, which it may rewind and truncate), durably
    (:class:`AtomicFile`; ``replace`` and the result as for :meth:`AtomicFile.publish`). The temporary file is
    removed on every error; OSError and ``fill``'s errors propagate.
    """
    with AtomicFile(path) as file:
        fill(file.fh)
        return file.publish(replace=replace)


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace ``path`` with ``data`` durably (:func:`write_file_atomic`)."""

    def fill(fh: BinaryIO) -> None:
        fh.write(data)

    write_file_atomic(path, fill)


def write_new(path: str, data: Any) -> None:
    """A new file at ``path`` (never one that exists) holding ``data`` (bytes or a buffer), through the system calls
    alone and not synced: it survives the writing process's crash, not necessarily the machine's -- for files that
    a commit or a rename publishes afterwards, as deltalake's own commits are."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def fsync_directory(directory: str | os.PathLike[str]) -> None:
    """Make the names in ``directory`` durable, where the file system can."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in _NO_DIRECTORY_FSYNC:
            raise
    finally:
        os.close(fd)


def temp_files_of(path: str | os.PathLike[str]) -> list[Path]:
    """Temporary files that killed writers of ``path`` left behind."""
    target = Path(path)
    return sorted(target.parent.glob(f".{target.name}{TEMP_MARK}*"))
