"""Batches of change rows kept on disk until their consumer is done with them, so a replay is identical.

The ``canal`` Spark source spools each micro-batch it plans (a batch Spark planned but did not commit comes back
byte for byte); :func:`~canal.spark.batches.run_batches` spools a batch that holds snapshot rows, which a restarted
snapshot reads again and cannot reproduce. A file is Arrow IPC named by the batch's start offset, written to a
temporary name -- chunk by chunk as the batch is prepared (:class:`SpoolWriter`) --, fsynced and renamed
(:class:`canal.files.AtomicFile`). The start offset is in its schema metadata, the end offset and the row count in the
custom metadata of its last record batch (an empty one), as they are known only when the batch is. Its buffers are
LZ4-compressed (:data:`COMPRESSION`). (Files written before the chunks came have the end offset in the schema
metadata; files written before the compression have plain buffers and no row count. Both are read.) The directory
may be local or a prefix in an object store (:class:`canal.lake.store.storage.Storage`): there a file is written locally
and uploaded whole when it is published.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

import attrs

from canal.errors import CanalError
from canal.lake.forms.changes import arrow_schema, conform
from canal.lake.forms.packed import is_packed
from canal.lake.store.arrow_streams import stream_bytes
from canal.lake.store.storage import StagedFile, Storage
from canal.spark.offsets import Offset, canonical

_LOG = logging.getLogger(__name__)


class SpoolError(CanalError):
    """A spooled batch cannot be read back: the batch it holds cannot be replayed identically."""


COMPRESSION: Final = "lz4"
"""The codec of a spool file's buffers (Arrow IPC's own: readers decompress them without being told). A change row
repeats most of the one before -- its ``columns`` text, its metadata, often most of its images --, so 1,000
UPDATEs of ``bench_spark``'s 10-column row take 220 bytes a row in a spool file against 1,921 as Arrow, for under
half a microsecond a row to write (outside the interpreter lock) and less to read: the reader fsyncs, and a remote
spool uploads, a ninth of the bytes. The rows' bytes in Spark and in the mirror's task are as before."""


def ipc_options() -> Any:
    """The Arrow IPC write options of spooled rows, on disk and inline."""
    import pyarrow as pa

    return pa.ipc.IpcWriteOptions(compression=COMPRESSION)


INLINE_PIECE_BYTES: Final = 64 << 20
"""The most bytes one :class:`InlineRows` holds (LZ4-compressed Arrow IPC: 20,000 change rows of 1 KB rows'
updates, 38 MB of Arrow, take 4 MB): a task whose partition held more would near Spark's limit on a message to an
executor (``spark.rpc.message.maxSize``, 128 MB), so such a micro-batch is cut in pieces, one task each. One piece
is the rule: the mirror writes a one-partition micro-batch in one task, while several are grouped by table (a
shuffle)."""


class Spool:
    """Batches as Arrow IPC files named by their start offset, written atomically; the end offset in the metadata.
    ``options``: the object store's, when ``root`` is an object-store URI."""

    def __init__(
        self, root: str | os.PathLike[str], options: Mapping[str, str] | None = None, form: Any | None = None
    ) -> None:
        self.storage = Storage.at(root, "the spool directory", options)
        self.form = form  # the schema of the rows this spool's reader hands on; a file of another is refused

    @property
    def root(self) -> str:
        """The directory, as text (a path or a URI)."""
        return self.storage.uri

    def name_for(self, start: Offset) -> str:
        digest = hashlib.sha1(canonical(start).encode()).hexdigest()[:16]
        return f"{int(start.get('batch', 0)):012d}-{digest}.arrow"

    def path_for(self, start: Offset) -> Path:
        """The local path of the file of the batch that starts at ``start`` (a local spool's)."""
        return self.storage.local_path(self.name_for(start))

    def open(self, start: Offset, schema: Any) -> SpoolWriter:
        """A writer of the batch that starts at ``start``, its rows in ``schema``: nothing is visible under the
        batch's name until :meth:`SpoolWriter.publish`."""
        return SpoolWriter(self.storage.writer(self.name_for(start)), start, schema)

    def write(self, start: Offset, end: Offset, batch: Any) -> None:
        """Spool a whole batch at once."""
        writer = self.open(start, batch.schema)
        try:
            writer.write(batch)
            writer.publish(end)
        finally:
            writer.discard()

    def read(self, start: Offset) -> tuple[Any, Offset] | None:
        """``(record batch, end offset)`` spooled for ``start``, None when there is none."""
        try:
            with _spool_file(self.storage, self.name_for(start), self.form) as reader:
                table = reader.read_all()
                meta = _closing_metadata(reader)
                if meta is None or b"end" not in meta:
                    meta = table.schema.metadata or {}  # a file written whole, before the chunks came
                end_offset: Offset = json.loads(meta[b"end"])
        except FileNotFoundError:
            return None
        table = conform(table.replace_schema_metadata(None).combine_chunks())
        batches = table.to_batches()
        return (batches[0] if batches else empty_batch()), end_offset

    def rows(self, start: Offset) -> int | None:
        """How many change rows are spooled for ``start`` (the count its writer put in the file's last record
        batch, not its rows: reading those would decompress them), None when there is no such file."""
        try:
            with _spool_file(self.storage, self.name_for(start), self.form) as reader:
                meta = _closing_metadata(reader)
                if meta is not None and b"rows" in meta:
                    return int(meta[b"rows"])
                # a file written before the count was: its buffers are not compressed, so this reads headers only
                rows: int = sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))
        except FileNotFoundError:
            return None
        return rows

    def shared(self, start: Offset) -> SpooledRows:
        """What a task needs to read the batch that starts at ``start`` itself (:func:`read_spooled`)."""
        return SpooledRows(self.storage, self.name_for(start))

    def inline(self, start: Offset) -> list[InlineRows] | None:
        """The rows spooled for ``start`` as :class:`InlineRows` -- one, unless its bytes would pass
        :data:`INLINE_PIECE_BYTES`; then halves, until each fits (or holds one row) --, none when the batch has no
        rows; None when there is no such file. Read here (on the driver), so the tasks need no access to the
        spool."""
        import pyarrow as pa

        try:
            with _spool_file(self.storage, self.name_for(start), self.form) as reader:
                batches = [reader.get_batch(i) for i in range(reader.num_record_batches)]
                rows = pa.Table.from_batches([b for b in batches if b.num_rows], reader.schema)
        except FileNotFoundError:
            return None
        return _inline(conform(rows.replace_schema_metadata(None))) if rows.num_rows else []

    def discard(self, start: Offset) -> None:
        """Delete the file of the batch that starts at ``start``, if there is one."""
        self.storage.delete(self.name_for(start))

    def clear(self) -> None:
        """Delete every batch file."""
        for name in self.storage.names():
            if name.endswith(".arrow"):
                self.storage.delete(name)

    def discard_through(self, end: Offset) -> None:
        """Delete the files of batches that end at or before ``end`` (they start before its batch number)."""
        discard_numbered(self.storage, "", int(end.get("batch", 0)) - 1)


@attrs.frozen
class SpooledRows:
    """An input partition of a micro-batch's binlog rows: the spool file that holds them, read by the task."""

    storage: Storage
    name: str


@attrs.frozen(repr=False)
class InlineRows:
    """An input partition of a micro-batch's binlog rows carried in the partition itself: an Arrow IPC stream read
    from the spool on the driver. Spark hands it to the task as it is (bytes), so the task needs no access to
    ``spool.dir``, and the driver's JVM holds the bytes rather than rows."""

    data: bytes

    def __repr__(self) -> str:
        return f"InlineRows({len(self.data)} bytes)"


def _closing_metadata(reader: Any) -> Any:
    """The custom metadata of a spool file's last record batch (its end offset and row count), None without."""
    last = reader.num_record_batches - 1
    return reader.get_batch_with_custom_metadata(last)[1] if last >= 0 else None


def _of_form(schema: Any, form: Any) -> bool:
    """Whether a spool file's rows of ``schema`` are of the rows' ``form`` -- or its form as an older pycanal wrote
    it, without some of :data:`~canal.lake.forms.changes.LATER_COLUMNS` (:func:`~canal.lake.forms.changes.conform` adds
    them as it reads them)."""
    from canal.lake.forms.changes import LATER_COLUMNS
    from canal.lake.forms.flat_messages import message_schema
    from canal.spark.message_rows import is_plans

    written, wanted = schema.remove_metadata(), form.remove_metadata()
    if is_plans(wanted) and written.equals(message_schema()):
        return True  # the messages themselves, as an older pycanal spooled them: they pass as they are
    for name in LATER_COLUMNS:
        if name in wanted.names and name not in written.names:
            wanted = wanted.remove(wanted.get_field_index(name))
    return bool(written.equals(wanted))


@contextlib.contextmanager
def _spool_file(storage: Storage, name: str, form: Any | None = None) -> Iterator[Any]:
    """The Arrow IPC reader of spool file ``name``, memory-mapped when local; FileNotFoundError when there is none,
    a :class:`SpoolError` when it (or what the caller reads from it) is unreadable, or holds rows of another schema
    than ``form`` (when given)."""
    import pyarrow as pa

    where = storage.locate(name)
    try:
        with storage.open(name) as source:
            reader = pa.ipc.open_file(source)
            if form is not None and not _of_form(reader.schema, form):
                raise SpoolError(
                    f"spool file {where} holds change rows of another form than this query reads "
                    f"(images={_form_name(reader.schema)}, not images={_form_name(form)}): the option changed under a "
                    "checkpoint; go on with the option the checkpoint was written with, or start a new checkpoint "
                    "and spool.dir"
                )
            yield reader
    except (FileNotFoundError, SpoolError):
        raise
    except (pa.ArrowException, OSError, KeyError, ValueError, CanalError) as exc:
        raise SpoolError(
            f"spool file {where} is unreadable ({type(exc).__name__}: {exc}): the batch it holds cannot be "
            "replayed identically"
        ) from None


class SpoolWriter:
    """One batch being spooled: its rows written as they come (:meth:`write`, each chunk made durable, so that
    publishing has little left to flush), then published with its end offset, or discarded."""

    def __init__(self, staged: StagedFile, start: Offset, schema: Any) -> None:
        import pyarrow as pa

        self._file = staged
        try:
            schema = schema.with_metadata({b"start": canonical(start).encode()})
            self._writer = pa.ipc.new_file(self._file.fh, schema, options=ipc_options())
        except BaseException:
            self._file.discard()
            raise
        self._empty = pa.RecordBatch.from_arrays([pa.array([], type=f.type) for f in schema], schema=schema)
        self._rows = 0

    def write(self, batch: Any) -> None:
        self._writer.write_batch(batch)
        self._rows += batch.num_rows
        self._file.sync()

    def publish(self, end: Offset) -> None:
        """End the file with ``end`` and the rows written, and give it the batch's name."""
        meta = {b"end": canonical(end).encode(), b"rows": str(self._rows).encode()}
        self._writer.write_batch(self._empty, custom_metadata=meta)
        self._writer.close()
        self._file.publish()

    def discard(self) -> None:
        """Drop the file unless it was published."""
        self._file.discard()


def _form_name(schema: Any) -> str:
    """``json``, ``variant``, ``packed`` or ``messages``: the form of the rows of ``schema``."""
    import pyarrow as pa

    if is_packed(schema.names):
        return "packed"
    if "after" not in schema.names:
        return "messages"  # the messages option's (its plans, or the messages an older pycanal spooled)
    return "variant" if pa.types.is_struct(schema.field("after").type) else "json"


def discard_numbered(storage: Storage, directory: str, through: int) -> None:
    """Delete the spool files in ``directory`` of ``storage`` (``<number:012d>-....arrow``, markers named after
    them, and the temporary files of writers killed before they published one: ``.<name>.tmp-...``) numbered
    ``through`` or lower: they hold batches Spark committed, which it never reads again (it replays only past
    them)."""
    for name in storage.names(directory):
        if ".arrow" not in name:
            continue
        try:
            number = int(name.removeprefix(".").split("-", 1)[0])
        except ValueError:
            continue  # not a spool file of ours: leave it alone
        if number <= through:
            where = f"{directory}/{name}" if directory else name
            try:
                storage.delete(where)
            except (OSError, CanalError) as exc:  # spent: a file left behind costs space, not correctness
                _LOG.warning("could not delete spent spool file %s: %s", storage.locate(where), exc)


def _inline(rows: Any) -> list[InlineRows]:
    """``rows`` (a table) as compressed Arrow IPC streams of at most :data:`INLINE_PIECE_BYTES` (halved until they
    fit; one row always goes whole)."""
    data = stream_bytes(rows, COMPRESSION)
    if len(data) <= INLINE_PIECE_BYTES or rows.num_rows == 1:
        return [InlineRows(data)]
    half = rows.num_rows // 2
    return _inline(rows.slice(0, half)) + _inline(rows.slice(half))


def read_inline(rows: InlineRows) -> Iterator[Any]:
    """The record batches of an :class:`InlineRows` (not copied: they point into its bytes)."""
    import pyarrow as pa

    with pa.ipc.open_stream(pa.py_buffer(rows.data)) as reader:
        yield from reader


def read_spooled(rows: SpooledRows) -> Any:
    """The record batches (with rows) of the spool file ``rows`` names, read where the task runs: memory mapped
    when local, each batch decompressed as it is read. A :class:`SpoolError` when it is not there -- ``spool.dir``
    is then not reachable from this executor at the driver's path -- or is unreadable."""
    try:
        with _spool_file(rows.storage, rows.name) as reader:
            for i in range(reader.num_record_batches):
                batch = reader.get_batch(i)
                if batch.num_rows:
                    yield conform(batch.replace_schema_metadata(None))
    except FileNotFoundError:
        raise SpoolError(
            f"spool file {rows.storage.locate(rows.name)} is not there for this task: with spool.shared (or "
            "snapshot.partitions) the canal source's spool.dir must be reachable from every executor at the same "
            "path"
        ) from None


def empty_batch() -> Any:
    """A record batch of the change-row schema without rows."""
    import pyarrow as pa

    schema = arrow_schema()
    return pa.RecordBatch.from_arrays([pa.array([], type=f.type) for f in schema], schema=schema)
