"""The persistence helpers shared by the meta and log-position managers.

* :func:`write_json_atomic` / :func:`read_json`: one JSON document per file, replaced atomically
  (:func:`canal.files.write_file_atomic`), so a reader -- or a process restarted after a crash or a power cut -- sees
  either the previous document or the new one, never a mix.
* :class:`PeriodicFlusher`: a background thread that calls a flush function every period until stopped.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from canal.errors import MetaError
from canal.files import temp_files_of, write_bytes_atomic
from canal.meta.base import CorruptMetaError

_log = logging.getLogger(__name__)


def write_json_atomic(path: str | os.PathLike[str], document: Any) -> None:
    """Replace ``path`` with ``document`` as JSON, atomically and durably; creates the parent directory."""
    text = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"
    try:
        write_bytes_atomic(path, text.encode("utf-8"))
    except OSError as exc:
        raise MetaError(f"cannot write {os.fspath(path)}: {exc.strerror or exc}") from exc


def remove_stale_temp_files(path: str | os.PathLike[str]) -> int:
    """Delete temporary files a killed writer of ``path`` left behind; return how many. Call before the first write
    of a process, never while another process may be writing ``path``."""
    removed = 0
    for stale in temp_files_of(path):
        with contextlib.suppress(OSError):
            stale.unlink()
            removed += 1
    return removed


def read_json(path: str | os.PathLike[str]) -> Any | None:
    """The JSON document at ``path``, or None when there is no file.

    Raises :class:`~canal.meta.base.CorruptMetaError` when the file is not complete JSON (our writes never leave
    such a file; something else wrote or truncated it).
    """
    target = Path(path)
    try:
        raw = target.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise MetaError(f"cannot read {target}: {exc.strerror or exc}") from exc
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise CorruptMetaError(
            f"{target} is corrupt ({len(raw)} bytes, not a complete JSON document: {exc}); "
            "restore it from a backup or delete it to start from the configured position"
        ) from None


class PeriodicFlusher:
    """Calls ``flush`` every ``period_s`` seconds on a daemon thread until :meth:`stop`.

    ``period_s=None`` starts no thread (the owner flushes explicitly and on stop). An exception from ``flush`` is
    logged and retried next period. :meth:`stop` does not flush; the owner does its final flush after it, so no
    flush ever runs concurrently with that final one.
    """

    def __init__(
        self,
        flush: Callable[[], None],
        period_s: float | None,
        *,
        name: str,
        logger: logging.Logger | logging.LoggerAdapter[logging.Logger] | None = None,
    ) -> None:
        if period_s is not None and not period_s > 0:
            raise ValueError(f"a flush period must be > 0 seconds or None, got {period_s!r}")
        self._flush = flush
        self._period = period_s
        self._name = name
        self._log = logger if logger is not None else _log
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing = False

    @property
    def period_s(self) -> float | None:
        return self._period

    def start(self) -> None:
        if self._period is None or self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        assert self._period is not None
        while not self._stop.wait(self._period):
            try:
                self._flush()
            except Exception as exc:
                # once per failure streak, not every period
                if not self._failing:
                    self._log.warning("%s: periodic flush failed, will retry: %s", self._name, exc)
                self._failing = True
            else:
                if self._failing:
                    self._log.info("%s: periodic flush recovered", self._name)
                self._failing = False
