"""Arrow tables as the bytes of one Arrow IPC stream: how rows travel inside a single value -- a staged part of the
mirror (:mod:`canal.lake.store.staged`), a packed batch (:mod:`canal.lake.forms.packed`), a piece of a micro-batch sent
inside its task's partition (:mod:`canal.spark.spool`)."""

from __future__ import annotations

from typing import Any


def stream_bytes(table: Any, compression: str | None = None) -> bytes:
    """``table`` (a pyarrow Table or RecordBatch) as one Arrow IPC stream; its buffers compressed with Arrow's own
    ``compression`` codec (``"lz4"``, ``"zstd"``: readers decompress without being told), or plain."""
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression=compression)
    with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
        writer.write(table)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def read_stream(data: Any) -> Any:
    """The pyarrow Table of one Arrow IPC stream (``bytes``, or a buffer)."""
    import pyarrow as pa

    return pa.ipc.open_stream(pa.py_buffer(data) if isinstance(data, bytes) else data).read_all()
