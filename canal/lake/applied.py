"""How far in the binlog a mirror applied, per app id: what tells a replay from a new query's batches.

A mirror skips a batch whose id its tables already committed (``transaction_version(app_id) >= batch_id``): that is
how a micro-batch Spark replays after a crash is applied once. But batch ids are the Spark query's: a new
checkpoint location on an existing mirror starts them at 0 again, and its batches -- the changes after those the
mirror holds, when the ``canal`` source resumes from its destination's cursor -- would all be skipped as replays.

So the driver keeps, beside the tables, the last batch id it finished and the binlog position of the newest change
up to it (``root/_pycanal_applied.{app id as hex}.json``). A batch whose id is not past that batch's but which holds
a change after that position is no replay: :class:`~canal.lake.types.MirrorCheckpointError`, before anything of
it is written. A replay holds only changes the mirror saw, at or before the position.

Positions compare as (binlog file number, offset): the order of one server's binlog. A change row without a
position (a ``canal`` source without ``log_file``) is not compared.
"""

from __future__ import annotations

import json
import os
from typing import Any

import attrs

from canal.lake import fs
from canal.lake.types import MirrorCheckpointError, MirrorError
from canal.position import journal_number


@attrs.frozen(slots=True)
class Applied:
    """The last batch a mirror's driver finished and the position of the newest change up to it."""

    batch: int
    log_file: str | None  # None: no change carried a position yet
    log_offset: int


def position_key(log_file: str, log_offset: int) -> tuple[int, int]:
    """The order of positions in one server's binlog: (file number, offset)."""
    return (journal_number(log_file), log_offset)


def applied_path(root: str | os.PathLike[str], app_id: str) -> str:
    """The location of the record (``root``: a local path or an object-store URI, :mod:`canal.lake.fs`)."""
    return fs.join(os.fspath(root), f"_pycanal_applied.{app_id.encode().hex()}.json")


def read_applied(root: str | os.PathLike[str], app_id: str) -> Applied | None:
    path = applied_path(root, app_id)
    try:
        data = json.loads(fs.read_text(path))
        return Applied(int(data["batch"]), data["log_file"], int(data["log_offset"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise MirrorError(f"the mirror's record of what it applied, {path}, cannot be read: {exc}") from exc


def newest_position(table: Any) -> tuple[str, int] | None:
    """(log_file, log_offset) of the newest change of a pyarrow Table of change rows (or a typed batch's metadata);
    None without positions."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if "log_file" not in table.column_names or "log_offset" not in table.column_names or not table.num_rows:
        return None
    names = table.column("log_file")
    if pa.types.is_dictionary(names.type):  # a typed batch's metadata (canal.lake.typed_batch)
        names = names.cast(pa.string())
    files = [name for name in pc.unique(names).to_pylist() if name]
    if not files:
        return None
    newest = max(files, key=journal_number)
    offsets = pc.filter(table.column("log_offset"), pc.equal(names, newest))
    offset = pc.max(offsets).as_py()
    return None if offset is None else (newest, int(offset))


def newest_time(table: Any) -> int | None:
    """The newest execute time of the changes of a pyarrow Table of change rows (or a typed batch's metadata), in ms
    since the epoch; None without any."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if "execute_time" not in table.column_names or not table.num_rows:
        return None
    column = table.column("execute_time")
    if not pa.types.is_timestamp(column.type):
        return None
    newest = pc.max(column.cast(pa.int64())).as_py()  # in the column's unit
    per_ms = {"s": 0.001, "ms": 1, "us": 1000, "ns": 1_000_000}[column.type.unit]
    return None if newest is None else int(newest // per_ms)


def refuses(applied: Applied | None, batch_id: int, newest: tuple[str, int] | None) -> bool:
    """Whether batch ``batch_id``, whose newest change is at ``newest``, is not past the last batch finished
    (``applied``) but holds changes after its position: a new query's batch, not a replay."""
    if newest is None or applied is None or applied.log_file is None or batch_id > applied.batch:
        return False
    return position_key(*newest) > position_key(applied.log_file, applied.log_offset)


def check_batch(
    root: str | os.PathLike[str], app_id: str, batch_id: int, newest: tuple[str, int] | None
) -> Applied | None:
    """The mirror's record of what it applied (for :func:`record_batch`), or :class:`MirrorCheckpointError` when it
    :func:`refuses` the batch."""
    applied = read_applied(root, app_id)
    if not refuses(applied, batch_id, newest):
        return applied
    assert applied is not None and newest is not None
    raise MirrorCheckpointError(
        f"mirror {root} (app id {app_id!r}) finished batch {applied.batch} with the changes up to binlog position "
        f"{applied.log_file}:{applied.log_offset}, and batch {batch_id} holds changes after it (up to "
        f"{newest[0]}:{newest[1]}): that is no replay but a query whose batch ids start again -- a new checkpoint "
        "location on this mirror. Its batches would be skipped as applied already. Nothing of it was written. "
        "Run the query from the checkpoint that wrote this mirror, or mirror into a new root (or with a new "
        "app_id) from a snapshot."
    )


def record_batch(
    root: str | os.PathLike[str],
    app_id: str,
    before: Applied | None,
    batch_id: int,
    newest: tuple[str, int] | None,
) -> None:
    """Batch ``batch_id`` (newest change at ``newest``) is finished: keep the furthest position seen. ``before``:
    the record as :func:`check_batch` read it for this batch."""
    if before is not None and batch_id < before.batch:
        return  # a replay of an older batch: nothing new
    log_file, log_offset = (None, 0) if before is None else (before.log_file, before.log_offset)
    if newest is not None and (log_file is None or position_key(*newest) > position_key(log_file, log_offset)):
        log_file, log_offset = newest
    if before == Applied(batch_id, log_file, log_offset):
        return
    data = {"batch": batch_id, "log_file": log_file, "log_offset": log_offset}
    fs.write_bytes(applied_path(root, app_id), json.dumps(data).encode())
