"""Durable file writes: a file appears whole or not at all, and stays once written, through crashes and power cuts.

Every file pycanal keeps (meta and log positions, the schema history, the Spark spools and journal) is written by
:func:`write_file_atomic`: a temporary file in the same directory, fsynced, then renamed over the target -- or, where
the first writer must win, hard-linked to it only if none is there -- and the directory fsynced so the new name is
durable too. A reader, or a process restarted after a crash, sees the previous file or the new one, never a mix.
"""

from __future__ import annotations

import errno
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

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


def write_file_atomic(path: str | os.PathLike[str], fill: Callable[[BinaryIO], None], *, replace: bool = True) -> bool:
    """Write ``path`` with ``fill`` (given the open temporary file, which it may rewind and truncate), durably.

    With ``replace`` the new file replaces any file at ``path``. Without it the new file is published only if there
    is none: True when it was, False when another writer's file was there first (it stays, and the new one is
    dropped; :class:`HardLinksUnsupportedError` where the file system has no hard links). Creates the parent
    directory. The temporary file is removed on every error; OSError and ``fill``'s errors propagate.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}{TEMP_MARK}{uuid.uuid4().hex}")
    try:
        with open(tmp, "wb") as fh:
            fill(fh)
            fh.flush()
            os.fsync(fh.fileno())
        if replace:
            os.replace(tmp, target)
        else:
            try:
                os.link(tmp, target)  # unlike a rename, a link never replaces a file
            except FileExistsError:
                return False
            except OSError as exc:
                if exc.errno in _NO_HARD_LINKS:
                    raise HardLinksUnsupportedError(
                        exc.errno, f"{target.parent} has no hard links ({exc.strerror})"
                    ) from exc
                raise
    finally:
        tmp.unlink(missing_ok=True)
    fsync_directory(target.parent)
    return True


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace ``path`` with ``data`` durably (:func:`write_file_atomic`)."""

    def fill(fh: BinaryIO) -> None:
        fh.write(data)

    write_file_atomic(path, fill)


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
