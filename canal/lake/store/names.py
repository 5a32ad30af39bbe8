"""The one place a source table's name becomes a mirror path: ``(schema, table)`` <-> a directory name under the
mirror's root.

A MariaDB name may hold any character but NUL -- dots, slashes, ``..``, ``%``, spaces, backticks, non-ASCII
letters -- and is case sensitive (on Linux, ``Orders`` and ``orders`` are two tables). Delta and its readers are
not that lenient: deltalake decodes ``%20`` in a path, Polars' Delta reader fails on spaces, ``#`` and non-ASCII
letters. So each part is escaped: a character of the safe set ``[A-Za-z0-9_$-]`` stands for itself; every other one
(the separator ``.`` and the escape character ``~`` included) becomes ``~XX`` per byte of its UTF-8 form (upper-case
hex). The directory is ``{escaped schema}.{escaped table}``:

* injective: the one ``.`` separates the parts, an escaped part holds no ``.``, ``~`` only starts an escape, case
  is kept;
* confined to the root: an escaped part holds no ``/`` and is never ``.`` or ``..``, so the directory is one
  entry of the root (a statement's row without a database -- a session with none -- names ``.{table}``);
* reversible: :func:`parse` gives the server's names back (``DeltaMirror.table_names()``);
* readable by deltalake, Polars, DuckDB and Spark (ASCII letters, digits and ``_ $ - ~ .`` only);
* unchanged for plain names: ``shop.orders`` is ``shop.orders``, so mirrors written before names were escaped keep
  their tables; a table whose name holds another character was written at its raw name then, and is mirrored under
  the escaped one now (re-snapshot it, or rename its directory to :func:`directory`).

On a case-insensitive filesystem (macOS, Windows defaults) two tables whose names differ only in case would share a
directory: keep such a mirror on a case-sensitive one. A directory name is at most :data:`MAX_DIRECTORY` bytes (a
filesystem's 255 less room for the mirror's suffixes): a longer one is a :class:`MirrorError` naming the table,
raised before the batch writes anything.
"""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Final

from canal.lake.store import fs
from canal.lake.types import MirrorError

__all__ = ["MAX_DIRECTORY", "directory", "display", "location", "parse", "table_path"]

ESCAPE: Final = "~"
SEPARATOR: Final = "."
MAX_DIRECTORY: Final = 255 - len(".rewritten")  # a rewrite writes the table anew beside itself under that suffix

_SAFE: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_$-")
_ESCAPED_PART: Final = re.compile(r"(?:[A-Za-z0-9_$-]|~[0-9A-F]{2})+")


def _escape(part: str) -> str:
    return "".join(c if c in _SAFE else "".join(f"{ESCAPE}{b:02X}" for b in c.encode()) for c in part)


@functools.lru_cache(maxsize=8192)
def directory(schema: str, table: str) -> str:
    """The directory name of the mirror table of ``schema.table``."""
    if not table:
        raise MirrorError(f"a table without a name (in {schema!r}) cannot be mirrored")
    name = f"{_escape(schema)}{SEPARATOR}{_escape(table)}"
    if len(name) > MAX_DIRECTORY:
        raise MirrorError(
            f"{display(schema, table)}: its mirror directory name would be {len(name)} bytes escaped, over the "
            f"{MAX_DIRECTORY} a filesystem takes"
        )
    return name


def parse(name: str) -> tuple[str, str] | None:
    """``(schema, table)`` of a mirror table's directory name; None for a name :func:`directory` does not make
    (the mirror's own files, a table being rewritten, anything else under the root)."""
    schema, dot, table = name.partition(SEPARATOR)
    if not dot or not _ESCAPED_PART.fullmatch(table) or (schema and not _ESCAPED_PART.fullmatch(schema)):
        return None
    try:
        pair = (_unescape(schema), _unescape(table))
    except UnicodeDecodeError:
        return None
    return pair if directory(*pair) == name else None


def _unescape(part: str) -> str:
    data = bytearray()
    i = 0
    while i < len(part):
        if part[i] == ESCAPE:
            data.append(int(part[i + 1 : i + 3], 16))
            i += 3
        else:
            data.extend(part[i].encode())
            i += 1
    return data.decode()


def table_path(root: str | os.PathLike[str], schema: str, table: str) -> Path:
    """The mirror table of ``schema.table`` under ``root``."""
    return Path(root) / directory(schema, table)


def location(root: str, schema: str, table: str) -> str:
    """The mirror table of ``schema.table`` under ``root`` (a local path or an object-store URI), as text: what the
    mirror and ``deltalake`` name it by."""
    return fs.join(root, directory(schema, table))


def display(schema: str, table: str) -> str:
    """``schema.table`` as the server spells them: for messages, statistics and ``table_names()`` (a name holding a
    dot reads ambiguously here; :func:`directory` never does)."""
    return f"{schema}{SEPARATOR}{table}"
