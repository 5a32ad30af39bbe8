"""Batches of change rows kept on disk until their consumer is done with them, so a replay is identical.

The ``canal`` Spark source spools each micro-batch it plans (a batch Spark planned but did not commit comes back
byte for byte); :func:`~canal.spark.batches.run_batches` spools a batch that holds snapshot rows, which a restarted
snapshot reads again and cannot reproduce. A file is Arrow IPC named by the batch's start offset, written to a
temporary name, fsynced and renamed (:func:`canal.files.write_file_atomic`), with the start and end offsets in its
schema metadata.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any, BinaryIO

from canal.errors import CanalError
from canal.files import write_file_atomic
from canal.spark.changes import Offset, arrow_schema, canonical

_LOG = logging.getLogger(__name__)


class SpoolError(CanalError):
    """A spooled batch cannot be read back: the batch it holds cannot be replayed identically."""


class Spool:
    """Batches as Arrow IPC files named by their start offset, written atomically; the end offset in the metadata."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def path_for(self, start: Offset) -> Path:
        digest = hashlib.sha1(canonical(start).encode()).hexdigest()[:16]
        return self.root / f"{int(start.get('batch', 0)):012d}-{digest}.arrow"

    def write(self, start: Offset, end: Offset, batch: Any) -> None:
        import pyarrow as pa

        schema = batch.schema.with_metadata({b"start": canonical(start).encode(), b"end": canonical(end).encode()})

        def fill(fh: BinaryIO) -> None:
            with pa.ipc.new_file(fh, schema) as writer:
                writer.write_batch(batch)

        write_file_atomic(self.path_for(start), fill)

    def read(self, start: Offset) -> tuple[Any, Offset] | None:
        """``(record batch, end offset)`` spooled for ``start``, None when there is none."""
        import pyarrow as pa

        path = self.path_for(start)
        if not path.exists():
            return None
        try:
            with pa.memory_map(str(path)) as source:
                table = pa.ipc.open_file(source).read_all()
            meta = table.schema.metadata or {}
            end_offset: Offset = json.loads(meta[b"end"])
        except (pa.ArrowException, OSError, KeyError, ValueError) as exc:
            raise SpoolError(
                f"spool file {path} is unreadable ({type(exc).__name__}: {exc}): the batch it holds cannot be "
                "replayed identically"
            ) from None
        table = table.replace_schema_metadata(None).combine_chunks()
        batches = table.to_batches()
        return (batches[0] if batches else empty_batch()), end_offset

    def discard(self, start: Offset) -> None:
        """Delete the file of the batch that starts at ``start``, if there is one."""
        with contextlib.suppress(FileNotFoundError):
            self.path_for(start).unlink()

    def clear(self) -> None:
        """Delete every batch file."""
        if self.root.exists():
            for path in self.root.glob("*.arrow"):
                path.unlink()

    def discard_through(self, end: Offset) -> None:
        """Delete the files of batches that end at or before ``end`` (they start before its batch number)."""
        discard_numbered(self.root, int(end.get("batch", 0)) - 1)


def discard_numbered(root: Path, through: int) -> None:
    """Delete the spool files in ``root`` (``<number:012d>-....arrow``, and markers named after them) numbered
    ``through`` or lower: they hold batches Spark committed, which it never reads again (it replays only past
    them)."""
    if not root.exists():
        return
    for path in root.glob("*.arrow*"):
        try:
            number = int(path.name.split("-", 1)[0])
        except ValueError:
            continue  # not a spool file of ours: leave it alone
        if number <= through:
            try:
                path.unlink(missing_ok=True)
            except OSError as exc:  # spent: a file left behind costs space, not correctness
                _LOG.warning("could not delete spent spool file %s: %s", path, exc)


def empty_batch() -> Any:
    """A record batch of the change-row schema without rows."""
    import pyarrow as pa

    schema = arrow_schema()
    return pa.RecordBatch.from_arrays([pa.array([], type=f.type) for f in schema], schema=schema)
