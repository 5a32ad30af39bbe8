"""Where a schema history's JSON document lives: the :class:`HistoryStore` protocol, in this process's memory
(:class:`MemoryHistoryStore`) or in one file replaced atomically (:class:`FileHistoryStore`, beside the destination's
file meta). :class:`~canal.schema.history.SchemaHistory` reads and writes the document through one of them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from canal.errors import SchemaError
from canal.files import write_bytes_atomic

__all__ = ["FileHistoryStore", "HistoryStore", "MemoryHistoryStore"]


class HistoryStore(Protocol):
    """Where a history's JSON document lives."""

    def load(self) -> str | None: ...

    def save(self, text: str) -> None: ...


class MemoryHistoryStore:
    """Keeps the document in this process (memory meta: a restart starts a new history)."""

    def __init__(self) -> None:
        self.text: str | None = None

    def load(self) -> str | None:
        return self.text

    def save(self, text: str) -> None:
        self.text = text


class FileHistoryStore:
    """One file, replaced atomically (write to a temporary file, fsync, rename) so a crash leaves the old or the new
    document, never a torn one."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"FileHistoryStore({os.fspath(self.path)!r})"

    def load(self) -> str | None:
        try:
            return self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    def save(self, text: str) -> None:
        try:
            write_bytes_atomic(self.path, text.encode("utf-8"))
        except OSError as exc:
            raise SchemaError(f"cannot write the schema history {self.path}: {exc.strerror or exc}") from exc
