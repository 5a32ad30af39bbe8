"""File operations on a location that is a local path or an object-store URI: what the mirror does to its files.

The mirror keeps its tables (through ``deltalake``) and its own small files (step journal, applied position, lease,
staged parts, held XA transactions, ...) under one root, a local directory or a prefix in an object store
(:mod:`canal.lake.store.storage`). Its code names each file by its whole location -- a local path as text, or a URI such
as ``s3://bucket/mirror/_pycanal_steps.app.json`` -- and does to it what this module offers; for a local path each
function is the ``os`` call the mirror always made, for a URI the object store's nearest equivalent:

* a file is written whole: a local temporary file renamed over the target, or one PUT; "write unless there is one" is
  a rename that never replaces (or a hard link), or a conditional PUT (``If-None-Match: *``);
* a directory is a prefix: it exists while an object lies under it; listing gives the names one level down;
  removing a tree deletes every object under the prefix;
* there is no rename in an object store: :func:`copy_tree` copies object by object (server-side), and the caller
  orders its copies and deletes so that a crash between them is finished on replay
  (:mod:`canal.lake.store.table_moves`).

The options that reach a store (credentials, endpoint) belong to the root: :func:`register` records them for this
process -- the mirror registers its root when it is made, in the driver and in every executor task that rebuilds it
-- and every location under that root is reached with them, by these functions and by ``deltalake``
(:func:`delta_options`). A URI under no registered root is reached with the store's environment variables.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import uuid
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

from canal.files import write_bytes_atomic, write_new
from canal.lake.store.storage import Storage, in_object_store, local_text

_ROOTS: dict[str, Storage] = {}  # registered roots in object stores, by URI (no trailing slash)
_ROOTS_LOCK = threading.Lock()


def register(location: str | os.PathLike[str], what: str, options: Mapping[str, str] | None = None) -> str:
    """The text of ``location`` (a local path or a URI without a trailing slash), its ``options`` recorded for every
    location under it (none given: the options registered before, else the store's environment). A
    :class:`~canal.errors.StorageLocationError` for an unknown scheme or options given for a local path
    (:meth:`Storage.at`)."""
    storage = Storage.at(location, what, options)
    if storage.local is None:
        with _ROOTS_LOCK:
            if storage.options or storage.uri not in _ROOTS:  # none given: keep what the process knows
                _ROOTS[storage.uri] = storage
    return storage.uri


def remote(location: str | os.PathLike[str]) -> bool:
    """Whether ``location`` is in an object store."""
    return isinstance(location, str) and in_object_store(location)


def local(location: str | os.PathLike[str]) -> str | None:
    """The local path ``location`` names (a path or a ``file://`` URI), None for an object-store URI."""
    return local_text(os.fspath(location))


def join(location: str | os.PathLike[str], *names: str) -> str:
    """``location`` / ``names``: ``/``-separated in an object store, the platform's way locally."""
    if isinstance(location, str) and remote(location):
        return "/".join([location.rstrip("/"), *names])
    return os.path.join(location, *names)


def split(location: str | os.PathLike[str]) -> tuple[str, str]:
    """(the directory holding ``location``, its name): ``/``-separated in an object store, the platform's way
    locally."""
    text = os.fspath(location)
    if remote(text):
        parent, _, name = text.rstrip("/").rpartition("/")
        return parent, name
    return os.path.split(text.rstrip(os.sep) or text)


def _resolved(location: str) -> tuple[Storage, str]:
    """The storage holding ``location`` and the name of ``location`` in it (``""``: the storage's own prefix)."""
    with _ROOTS_LOCK:
        roots = sorted(_ROOTS.items(), key=lambda item: -len(item[0]))
    text = location.rstrip("/")
    for uri, storage in roots:
        if text == uri:
            return storage, ""
        if text.startswith(uri + "/"):
            return storage, text[len(uri) + 1 :]
    parts = urlsplit(text)
    bucket = Storage.at(f"{parts.scheme}://{parts.netloc}", "a location")
    return bucket, parts.path.lstrip("/")


def delta_options(location: str | os.PathLike[str]) -> dict[str, str] | None:
    """The ``storage_options`` ``deltalake`` needs for a table at ``location`` (None: a local path, or a URI the
    store's environment reaches)."""
    text = os.fspath(location)
    if not remote(text):
        return None
    storage, _name = _resolved(text)
    return storage.store_options() or None


def delta_table(location: str | os.PathLike[str], **kwargs: Any) -> Any:
    """``deltalake.DeltaTable`` at ``location``, with its root's options."""
    from deltalake import DeltaTable

    return DeltaTable(os.fspath(location), storage_options=delta_options(location), **kwargs)


def delta_rows(table: Any) -> Any:
    """The rows of a ``deltalake.DeltaTable``'s version as a pyarrow Table, read from its files in its schema.
    ``DeltaTable.to_pyarrow_table`` turns every file's statistics into Python values to prune with, and Python's
    ``datetime`` holds no year 0, which MySQL stores ('0000-01-01' in a DATE or DATETIME) and Arrow holds: with such a
    value in a file, that call fails. The mirror's tables are unpartitioned and never prune, so nothing is lost."""
    import pyarrow.dataset as ds

    fragments, schema, parquet, store = _fragments(table)
    return ds.FileSystemDataset(fragments, schema, parquet, store).to_table()


def delta_pieces(table: Any) -> Iterator[Any]:
    """The rows of a ``deltalake.DeltaTable``'s version as :func:`delta_rows` reads them, one data file at a time (a
    pyarrow Table each, in its schema): a reader that reduces them as they come holds one file's rows, not the
    table's."""
    import pyarrow.dataset as ds

    fragments, schema, parquet, store = _fragments(table)
    for fragment in fragments:
        yield ds.FileSystemDataset([fragment], schema, parquet, store).to_table()


def _fragments(table: Any) -> tuple[list[Any], Any, Any, Any]:
    """The Parquet fragments of a DeltaTable's version, its Arrow schema, the format and the filesystem to read with."""
    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.fs as pa_fs
    from deltalake.fs import DeltaStorageHandler

    actions = pa.table(table.get_add_actions(flatten=True))
    paths: list[str] = actions.column("path").to_pylist()
    parquet = ds.ParquetFileFormat(default_fragment_scan_options=ds.ParquetFragmentScanOptions(pre_buffer=True))
    schema = pa.schema(table.schema().to_arrow())
    root = local(table.table_uri)
    if root is not None and not any("://" in path or os.path.isabs(path) for path in paths):
        # a local table is read through Arrow's own file system, not a Python one (PyFileSystem): the scan's
        # read-ahead can still be finishing on Arrow's threads after to_table returned, and the thread that drops the
        # last reference to a Python file system takes the GIL to release it -- during the interpreter's exit that
        # thread is ended inside C++ and the process aborts ("terminate called without an active exception")
        store = pa_fs.LocalFileSystem()
        files = [os.path.join(root, unquote(path)) for path in paths]  # the log's paths are relative URIs
        return [parquet.make_fragment(file, filesystem=store) for file in files], schema, parquet, store
    sizes = dict(zip(paths, actions.column("size_bytes").to_pylist(), strict=True))
    store = pa_fs.PyFileSystem(DeltaStorageHandler(table.table_uri, delta_options(table.table_uri), sizes))
    return [parquet.make_fragment(path, filesystem=store) for path in paths], schema, parquet, store


def is_delta_table(location: str | os.PathLike[str]) -> bool:
    """Whether a Delta table is at ``location``."""
    from deltalake import DeltaTable

    return bool(DeltaTable.is_deltatable(os.fspath(location), storage_options=delta_options(location)))


WIDE_COLUMNS = 256
"""Parquet files of tables wider than this many columns are written without dictionary pages: a Parquet writer keeps
a dictionary encoder for every column it writes, about 60 KB each whatever the rows, so at 1,000 columns a write
or a MERGE held some 60 MB more (``benchmarks/bench_wide.py``) for files that a wide table's few rows a file hardly
shrink."""


def writer_properties(width: int) -> Any:
    """The ``writer_properties`` of a Delta write or MERGE of ``width`` columns (None: deltalake's defaults)."""
    if width <= WIDE_COLUMNS:
        return None
    from deltalake import ColumnProperties, WriterProperties

    return WriterProperties(default_column_properties=ColumnProperties(dictionary_enabled=False))


def compact_delta(table: Any) -> Any:
    """``table.optimize.compact()`` of a DeltaTable, a wide table's without dictionary pages (:data:`WIDE_COLUMNS`)."""
    return table.optimize.compact(writer_properties=writer_properties(len(table.schema().fields)))


def write_delta(target: Any, data: Any, **kwargs: Any) -> None:
    """``deltalake.write_deltalake`` to ``target`` -- a location (given its root's options) or a DeltaTable; a wide
    table's without dictionary pages (:data:`WIDE_COLUMNS`)."""
    from deltalake import write_deltalake

    schema = getattr(data, "schema", None)
    if "writer_properties" not in kwargs and schema is not None and hasattr(schema, "names"):
        kwargs["writer_properties"] = writer_properties(len(schema.names))
    if isinstance(target, str | os.PathLike):
        write_deltalake(os.fspath(target), data, storage_options=delta_options(target), **kwargs)
    else:
        write_deltalake(target, data, **kwargs)


def _store(location: str) -> tuple[Any, Storage, str]:
    from canal.lake.store.storage import _object_store

    storage, name = _resolved(location)
    return _object_store(storage), storage, name


# -- reading ---------------------------------------------------------------------------------------------------------


def exists(location: str) -> bool:
    """Whether a file or a directory (a prefix with an object under it) is at ``location``."""
    if not remote(location):
        return os.path.exists(location)
    return is_file(location) or is_dir(location)


def is_file(location: str) -> bool:
    if not remote(location):
        return os.path.isfile(location)
    storage, name = _resolved(location)
    return storage.exists(name)


def is_dir(location: str) -> bool:
    if not remote(location):
        return os.path.isdir(location)
    import obstore

    store, storage, name = _store(location)
    try:
        for chunk in obstore.list(store, f"{name}/" if name else None, chunk_size=1):
            if chunk:
                return True
    except Exception as exc:
        raise storage._error("list", name or ".", exc) from None
    return False


def read_bytes(location: str) -> bytes:
    """The whole file at ``location``; FileNotFoundError when there is none."""
    if not remote(location):
        with open(location, "rb") as fh:
            return fh.read()
    storage, name = _resolved(location)
    return storage.read_bytes(name)


def read_text(location: str) -> str:
    return read_bytes(location).decode("utf-8")


def listdir(location: str) -> list[str]:
    """The names directly under ``location`` (files and directories), sorted; none when it does not exist."""
    if not remote(location):
        try:
            return sorted(os.listdir(location))
        except (FileNotFoundError, NotADirectoryError):
            return []
    import obstore

    store, storage, name = _store(location)
    try:
        listed = obstore.list_with_delimiter(store, f"{name}/" if name else None)
    except Exception as exc:
        raise storage._error("list", name or ".", exc) from None
    files = [str(meta["path"]).rstrip("/").rsplit("/", 1)[-1] for meta in listed["objects"]]
    dirs = [str(prefix).rstrip("/").rsplit("/", 1)[-1] for prefix in listed["common_prefixes"]]
    return sorted(set(files) | set(dirs))


def files_modified(location: str) -> list[tuple[str, float]]:
    """(name, when last modified, as seconds since the epoch) of each file directly in the directory ``location``;
    none when it does not exist."""
    if not remote(location):
        found: list[tuple[str, float]] = []
        try:
            entries = list(os.scandir(location))
        except (FileNotFoundError, NotADirectoryError):
            return []
        for entry in entries:
            with contextlib.suppress(FileNotFoundError):  # deleted meanwhile: not there
                if entry.is_file():
                    found.append((entry.name, entry.stat().st_mtime))
        return found
    import obstore

    store, storage, name = _store(location)
    try:
        listed = obstore.list_with_delimiter(store, f"{name}/" if name else None)
    except Exception as exc:
        raise storage._error("list", name or ".", exc) from None
    return [(str(meta["path"]).rsplit("/", 1)[-1], meta["last_modified"].timestamp()) for meta in listed["objects"]]


def _objects_under(location: str) -> tuple[Any, Storage, list[str]]:
    """Every object's name under the directory ``location`` (in an object store)."""
    import obstore

    store, storage, name = _store(location)
    found: list[str] = []
    try:
        for chunk in obstore.list(store, f"{name}/" if name else None):
            found.extend(str(meta["path"]) for meta in chunk)
    except Exception as exc:
        raise storage._error("list", name or ".", exc) from None
    return store, storage, found


# -- writing ---------------------------------------------------------------------------------------------------------


def makedirs(location: str) -> None:
    """Make the directory ``location`` and its parents (an object store has none to make)."""
    if not remote(location):
        os.makedirs(location, exist_ok=True)


def write_bytes(location: str, data: bytes, *, replace: bool = True, synced: bool = True) -> bool:
    """Write ``data`` to ``location`` whole; without ``replace`` only if no file is there (False when one was: it
    stays). ``synced=False`` (locally): replaced whole through a rename but not fsynced -- it survives the writing
    process's crash, not necessarily the machine's, as the Delta commits it guards (deltalake does not sync them)."""
    if not remote(location):
        os.makedirs(os.path.dirname(location) or ".", exist_ok=True)
        if replace and not synced:
            directory, name = os.path.split(location)
            temporary = os.path.join(directory, f".{name}.tmp-{uuid.uuid4().hex}")
            write_new(temporary, data)
            os.replace(temporary, location)
            return True
        if replace:
            write_bytes_atomic(location, data)
            return True
        try:
            write_new(location, data)
        except FileExistsError:
            return False
        return True
    storage, name = _resolved(location)
    return storage.put(name, data, replace=replace)


def unlink(location: str) -> None:
    """Delete the file at ``location`` if it is there."""
    if not remote(location):
        with contextlib.suppress(FileNotFoundError):  # deleting what is gone is done
            os.unlink(location)
        return
    storage, name = _resolved(location)
    storage.delete(name)


def rmtree(location: str) -> None:
    """Delete the directory ``location`` and everything under it, if it is there."""
    if not remote(location):
        if os.path.lexists(location):
            shutil.rmtree(location)
        return
    import obstore

    store, storage, names = _objects_under(location)
    try:
        for start in range(0, len(names), 1000):  # S3 deletes up to 1,000 keys a request
            obstore.delete(store, names[start : start + 1000])
    except Exception as exc:
        raise storage._error("delete", location, exc) from None


def copy_tree(source: str, target: str) -> int:
    """Copy every object under ``source`` to the same name under ``target`` (both under one registered root of an
    object store; copied server-side), the Delta log (``_delta_log``) last, so that ``target`` is a table only once
    its data files are all there. The number of objects copied."""
    import obstore

    store, storage, names = _objects_under(source)
    source_name, target_name = _resolved(source)[1], _resolved(target)[1]
    cut = len(source_name) + 1 if source_name else 0
    relative = sorted((n[cut:] for n in names), key=lambda r: (r.startswith("_delta_log/"), r))
    try:
        for name in relative:
            obstore.copy(
                store,
                f"{source_name}/{name}" if source_name else name,
                f"{target_name}/{name}" if target_name else name,
            )
    except Exception as exc:
        raise storage._error("copy", source_name, exc) from None
    return len(relative)


__all__ = [
    "copy_tree",
    "delta_options",
    "delta_table",
    "exists",
    "files_modified",
    "is_delta_table",
    "is_dir",
    "is_file",
    "join",
    "listdir",
    "local",
    "makedirs",
    "read_bytes",
    "read_text",
    "register",
    "remote",
    "rmtree",
    "split",
    "unlink",
    "write_bytes",
    "write_delta",
]
