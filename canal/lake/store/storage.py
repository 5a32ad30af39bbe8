"""Where the source keeps files its tasks read: a local directory, or a prefix in an object store.

The ``canal`` source spools micro-batches and executor snapshot ranges (:mod:`canal.spark.spool`,
:mod:`canal.spark.chunks`). Its ``spool.dir`` may be a local path (or ``file://`` URI) -- on a cluster, a file system
every host mounts at the same path -- or a URI of an object store every executor reaches: ``s3://bucket/prefix``
(any S3-compatible store, with an endpoint), ``gs://``, ``az://`` / ``abfs[s]://``. Object stores are reached through
``obstore`` (the Rust ``object_store`` crate that ``deltalake`` uses too), with the same options ``deltalake`` takes
as ``storage_options`` (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_ALLOW_HTTP``, ...; any case) and, where
they are not given, the store's environment variables.

What each kind gives a writer: a file is written whole under a temporary name and published at once -- a local
rename, an object store's single PUT (an object is visible whole or not at all). "Publish unless one is there"
(the first of two attempts at a snapshot range wins) is a rename that never replaces, or a hard link, locally, and a
conditional PUT (``If-None-Match: *``) on an object store; a store that refuses conditional PUTs fails the write with
:class:`StorageError` rather than letting a second attempt replace the first.

Options hold credentials: a :class:`Storage` prints its URI only, and errors never quote option values. A secret
option may be named instead of given (``AWS_SECRET_ACCESS_KEY.env`` = an environment variable's name,
``AWS_SECRET_ACCESS_KEY.file`` = a file's path; :mod:`canal.secrets`): a :class:`Storage` holds the name, and reads
the secret in the process that opens the store (:meth:`Storage.store_options`), so a pickled one carries no secret.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO, Final, cast
from urllib.parse import unquote, urlsplit

import attrs

from canal.errors import CanalError, StorageLocationError
from canal.files import AtomicFile
from canal.secrets import check_named, read_named

_LOG = logging.getLogger(__name__)

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
OBJECT_SCHEMES: Final = frozenset({"s3", "s3a", "gs", "az", "abfs", "abfss", "azure"})
"""URI schemes of the object stores a spool may live in."""

# object_store's client settings (the rest of the options configure the store itself: keys, endpoint, region)
_CLIENT_KEYS: Final = frozenset(
    {"allow_http", "allow_invalid_certificates", "connect_timeout", "timeout", "proxy_url", "user_agent"}
)
_OPTION_PREFIXES: Final = ("aws_", "google_", "azure_")  # deltalake's names of a key, besides the bare one


def _any_key(key: str) -> bool:
    """Any store option may be named (the store's keys are open-ended; naming one that holds no secret is harmless)."""
    return True


def local_text(location: str) -> str | None:
    """The local path ``location`` names -- a path, or a ``file://`` URI without a host -- else None (a URI of
    another scheme, or of another host)."""
    if not _SCHEME.match(location):
        return location
    parts = urlsplit(location)
    if parts.scheme.lower() == "file" and parts.netloc in ("", "localhost"):
        return unquote(parts.path)
    return None


def in_object_store(location: str) -> bool:
    """Whether ``location`` is a URI of an object store (:data:`OBJECT_SCHEMES`)."""
    return bool(_SCHEME.match(location)) and urlsplit(location).scheme.lower() in OBJECT_SCHEMES


def redacted(location: str) -> str:
    """``location`` without what may hold a credential: a URI's user information (``s3://key:secret@bucket``), query
    (an Azure SAS token) and fragment. For labels and messages."""
    if not _SCHEME.match(location):
        return location
    parts = urlsplit(location)
    host = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{host}{parts.path}"


class StorageError(CanalError):
    """A file of the spool could not be written, read or deleted in its store (the store's message is kept; option
    values are not)."""


@attrs.frozen
class Storage:
    """A directory: a local path, or a prefix in an object store with the options that reach it.

    ``uri`` is the local path (as text) or the object-store URI without a trailing slash; ``options`` (kept out of
    the repr: they hold credentials) are the store's as given, lower-cased, named secrets unread
    (:meth:`store_options` reads them). Picklable: tasks get it inside their partitions, and each process opens the
    store once (:func:`_object_store`)."""

    uri: str
    options: Mapping[str, str] = attrs.field(factory=dict, repr=False)

    @classmethod
    def at(cls, location: str | os.PathLike[str], what: str, options: Mapping[str, str] | None = None) -> Storage:
        """The storage at ``location``; ``what`` names it in errors (``"the spool directory"``). A scheme other than
        ``file`` and those of :data:`OBJECT_SCHEMES` is a :class:`~canal.errors.StorageLocationError`, as are
        ``options`` given for a local path (they would be silently ignored); a malformed named secret is a
        :class:`~canal.errors.SecretError` (:func:`canal.secrets.check_named`: nothing is read here)."""
        text = os.fspath(location)
        given = {str(k).lower(): str(v) for k, v in (options or {}).items()}
        check_named(given, where=f"{what}'s storage option", may_name=_any_key)
        local = local_text(text)
        if local is None:
            parts = urlsplit(text)
            if parts.scheme.lower() not in OBJECT_SCHEMES:
                raise StorageLocationError(
                    f"{what} {text!r} is a {parts.scheme}:// URI: a local path, file:// or an object store "
                    f"({', '.join(s + '://' for s in sorted(OBJECT_SCHEMES))}) is expected"
                )
            if not parts.netloc:
                raise StorageLocationError(f"{what} {text!r} names no bucket or container")
            return cls(text.rstrip("/"), given)
        text = local
        if given:
            raise StorageLocationError(
                f"{what} {text!r} is a local path: storage options ({', '.join(sorted(given))}) are for object-store "
                "URIs"
            )
        return cls(text, {})

    def store_options(self) -> dict[str, str]:
        """The options the store is opened with: :attr:`options`, each named secret read in this process."""
        return read_named(self.options, where=f"{self.uri}'s storage option", may_name=_any_key)

    @property
    def local(self) -> Path | None:
        """The directory, when it is local."""
        return None if _SCHEME.match(self.uri) else Path(self.uri)

    def locate(self, name: str) -> str:
        """Where ``name`` (``/``-separated, relative to this directory) is, for messages and logs."""
        return f"{self.uri.rstrip('/')}/{name}" if self.local is None else str(Path(self.uri) / name)

    def local_path(self, name: str) -> Path:
        """The local path of ``name``; a :class:`StorageError` on an object store."""
        local = self.local
        if local is None:
            raise StorageError(f"{self.uri} is in an object store: {name} has no local path")
        return local / name

    # -- reading ------------------------------------------------------------------------------------------------

    def exists(self, name: str) -> bool:
        local = self.local
        if local is not None:
            return (local / name).exists()
        import obstore

        store = _object_store(self)
        try:
            obstore.head(store, name)
        except FileNotFoundError:
            return False
        except Exception as exc:
            raise self._error("look for", name, exc) from None
        return True

    @contextlib.contextmanager
    def open(self, name: str) -> Iterator[Any]:
        """A pyarrow input of ``name``: memory-mapped when local, the object's bytes otherwise. FileNotFoundError
        when there is none."""
        import pyarrow as pa

        local = self.local
        if local is not None:
            with pa.memory_map(str(local / name)) as source:
                yield source
            return
        yield pa.BufferReader(pa.py_buffer(self.read_bytes(name)))

    def read_bytes(self, name: str) -> bytes:
        """The whole of ``name``; FileNotFoundError when there is none."""
        local = self.local
        if local is not None:
            return (local / name).read_bytes()
        import obstore

        store = _object_store(self)
        try:
            return bytes(obstore.get(store, name).bytes())
        except FileNotFoundError:
            raise FileNotFoundError(self.locate(name)) from None
        except Exception as exc:
            raise self._error("read", name, exc) from None

    def names(self, directory: str = "") -> list[str]:
        """The names of the files directly in ``directory`` (relative to this one); none when it does not exist."""
        local = self.local
        if local is not None:
            where = local / directory
            return sorted(p.name for p in where.iterdir() if p.is_file()) if where.is_dir() else []
        import obstore

        prefix = directory.strip("/")
        store = _object_store(self)
        try:
            listed = obstore.list_with_delimiter(store, prefix or None)
        except Exception as exc:
            raise self._error("list", directory or ".", exc) from None
        return sorted(str(meta["path"]).rsplit("/", 1)[-1] for meta in listed["objects"])

    # -- writing ------------------------------------------------------------------------------------------------

    def writer(self, name: str) -> StagedFile:
        """A file to be written over time under ``name`` and published whole (:class:`StagedFile`)."""
        return StagedFile(self, name)

    def write(self, name: str, fill: Callable[[BinaryIO], None], *, replace: bool = True) -> bool:
        """Write ``name`` with ``fill(fh)`` and publish it (:meth:`StagedFile.publish`)."""
        staged = self.writer(name)
        try:
            fill(staged.fh)
            return staged.publish(replace=replace)
        finally:
            staged.discard()

    def put(self, name: str, source: bytes | Path, *, replace: bool = True) -> bool:
        """Upload ``source`` (bytes, or a local file) as ``name`` in one PUT -- not a multipart upload: the object
        appears whole, and a conditional PUT is one request. Without ``replace`` only if nothing has the name
        (``If-None-Match: *``): False when something had. In an object store only."""
        import obstore

        try:
            obstore.put(
                _object_store(self), name, source, mode="overwrite" if replace else "create", use_multipart=False
            )
        except Exception as exc:
            if type(exc).__name__ == "AlreadyExistsError":  # obstore.exceptions.AlreadyExistsError
                return False
            raise self._error("write", name, exc) from None
        return True

    def delete(self, name: str) -> None:
        """Delete ``name`` if it is there."""
        local = self.local
        if local is not None:
            (local / name).unlink(missing_ok=True)
            return
        import obstore

        store = _object_store(self)
        try:
            obstore.delete(store, name)
        except FileNotFoundError:
            pass  # deleting what is gone is done; S3 itself does not tell
        except Exception as exc:
            raise self._error("delete", name, exc) from None

    def _error(self, doing: str, name: str, exc: BaseException) -> StorageError:
        return StorageError(f"could not {doing} {self.locate(name)}: {type(exc).__name__}: {_first_line(exc)}")


class StagedFile:
    """A file written to a temporary name (``fh``) and published whole under its name, or dropped.

    Local: a temporary file beside the target, renamed (:class:`canal.files.AtomicFile`). Object store: a temporary
    local file, uploaded in one PUT on :meth:`publish`."""

    def __init__(self, storage: Storage, name: str) -> None:
        self.storage = storage
        self.name = name
        local = storage.local
        self._atomic = AtomicFile(local / name) if local is not None else None
        self._upload: Path | None = None
        if self._atomic is not None:
            self.fh: BinaryIO = self._atomic.fh
        else:
            self._upload = _staging_dir() / f"{uuid.uuid4().hex}.part"
            self.fh = open(self._upload, "wb")  # noqa: SIM115 -- closed by publish / discard

    def sync(self) -> None:
        """Make what is written so far durable (locally: fsync; an upload is durable once published)."""
        if self._atomic is not None:
            self._atomic.sync()
        else:
            self.fh.flush()

    def publish(self, *, replace: bool = True) -> bool:
        """Give the file its name. Without ``replace`` only if nothing has it: False when another writer's file was
        there first (it stays; this one is dropped)."""
        if self._atomic is not None:
            return self._atomic.publish(replace=replace)
        assert self._upload is not None
        try:
            self.fh.close()
            return self.storage.put(self.name, self._upload, replace=replace)
        finally:
            self.discard()

    def discard(self) -> None:
        """Drop the file unless it was published."""
        if self._atomic is not None:
            self._atomic.discard()
            return
        self.fh.close()
        if self._upload is not None:
            self._upload.unlink(missing_ok=True)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


_STORES: dict[tuple[str, tuple[tuple[str, str], ...]], Any] = {}
_STORES_LOCK = threading.Lock()


def _object_store(storage: Storage) -> Any:
    """The obstore store of ``storage``'s URI and options, made once per process."""
    key = (storage.uri, tuple(sorted(storage.options.items())))
    with _STORES_LOCK:
        store = _STORES.get(key)
        if store is None:
            store = _STORES[key] = _open_store(storage)
    return store


def _open_store(storage: Storage) -> Any:
    from obstore.store import from_url

    config: dict[str, str] = {}
    client: dict[str, Any] = {}
    for key, value in storage.store_options().items():
        bare = next((b for b in (key.removeprefix(p) for p in ("", *_OPTION_PREFIXES)) if b in _CLIENT_KEYS), None)
        if bare is None:
            config[key] = value
        else:
            client[bare] = _client_value(value)
    if storage.uri.lower().startswith(("s3://", "s3a://")):
        # object_store reads the store's settings from AWS_* variables but not its client's, which deltalake does
        for bare in _CLIENT_KEYS - set(client):
            found = os.environ.get(f"AWS_{bare.upper()}")
            if found is not None:
                client[bare] = _client_value(found)
    try:
        return from_url(storage.uri, config=cast(Any, config), client_options=cast(Any, client))
    except Exception as exc:
        # the message may quote a bad key, never its value; the options themselves are not repeated
        raise StorageLocationError(
            f"the object store at {storage.uri} cannot be opened with the options given "
            f"({', '.join(sorted(storage.options)) or 'none'}): {type(exc).__name__}: {_first_line(exc)}"
        ) from None


def _client_value(value: str) -> Any:
    return value.lower() == "true" if value.lower() in ("true", "false") else value


def _staging_dir() -> Path:
    """Where files bound for an object store are written before their upload."""
    path = Path(tempfile.gettempdir()) / "pycanal-staging"
    path.mkdir(parents=True, exist_ok=True)
    return path


__all__ = ["OBJECT_SCHEMES", "StagedFile", "Storage", "StorageError", "in_object_store", "local_text"]
