"""Where the mirror lives: a local path, or a ``file://`` URI of one (the spool may also be in an object store:
:mod:`canal.lake.store.storage`, which reads both forms for both).

A URI of any other scheme (``s3://bucket/mirror``) is refused with :class:`~canal.errors.StorageLocationError`
rather than read as a relative path (``Path("s3://b/m")`` is ``s3:/b/m``, a directory of the working directory): the
mirror's commits rely on hard links and renames that do not replace, which object stores do not have.
"""

from __future__ import annotations

import os
from pathlib import Path

from canal.errors import StorageLocationError
from canal.lake.store.storage import local_text


def local_path(location: str | os.PathLike[str], what: str) -> Path:
    """``location`` as a local path; ``what`` names it in the error (``"the mirror's root"``)."""
    text = os.fspath(location)
    local = local_text(text)
    if local is None:
        raise StorageLocationError(
            f"{what} {text!r} is a {text.split(':', 1)[0]}:// URI: only local paths and file:// URIs are supported "
            "(a file system every process reaches, mounted at the same path on each host)"
        )
    return Path(local)
