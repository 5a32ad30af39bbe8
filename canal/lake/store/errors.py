"""Storage errors typed: what pyarrow and deltalake raise for files they cannot read or write (a damaged Parquet
file, a truncated Delta commit, a disk error) as :class:`~canal.lake.types.MirrorStorageError` at the mirror's public
methods, naming the root and the method; and how much of such an error's text a record keeps."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, cast

from canal.lake.types import MirrorError, MirrorStorageError

F = TypeVar("F", bound=Callable[..., Any])
ERROR_CHARS = 2000  # of a fold error kept: the library's message can carry a whole backtrace


def storage_error_types() -> tuple[type[BaseException], ...]:
    import pyarrow as pa
    from deltalake.exceptions import DeltaError

    from canal.lake.store.storage import StorageError  # the mirror's own files in an object store (canal.lake.store.fs)

    return (pa.ArrowException, DeltaError, OSError, StorageError)


def typed_storage_errors(method: F) -> F:
    """``method`` of an object with a ``root``, raising :class:`MirrorStorageError` for a storage error (a
    MirrorError, or any other error, goes through as it is)."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except MirrorError:
            raise
        except storage_error_types() as exc:
            raise MirrorStorageError(
                f"mirror {self.root}: {method.__name__} failed on its files: {type(exc).__name__}: "
                f"{str(exc)[:ERROR_CHARS]}"
            ) from exc

    return cast(F, wrapper)
