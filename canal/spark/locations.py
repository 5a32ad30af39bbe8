"""Where the mirror and the spool live: a local path, or a ``file://`` URI of one.

A URI of any other scheme (``s3://bucket/mirror``) is refused with :class:`~canal.errors.StorageLocationError`
rather than read as a relative path (``Path("s3://b/m")`` is ``s3:/b/m``, a directory of the working directory): the
mirror's commits rely on hard links and renames that do not replace, which object stores do not have.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

from canal.errors import StorageLocationError

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def local_path(location: str | os.PathLike[str], what: str) -> Path:
    """``location`` as a local path; ``what`` names it in the error (``"the mirror's root"``)."""
    text = os.fspath(location)
    if not _SCHEME.match(text):
        return Path(text)
    parts = urlsplit(text)
    if parts.scheme.lower() == "file" and parts.netloc in ("", "localhost"):
        return Path(unquote(parts.path))
    raise StorageLocationError(
        f"{what} {text!r} is a {parts.scheme}:// URI: only local paths and file:// URIs are supported (a file system "
        "every process reaches, mounted at the same path on each host)"
    )
