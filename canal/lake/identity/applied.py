"""What a mirror applied, per app id: the batch it finished last, the batch in flight, and the source lineage up to
them -- what tells a replay from changes the mirror has not seen.

Batch ids are the caller's: a Spark query's micro-batch numbers (a new checkpoint location starts them at 0 again),
or :func:`canal.spark.run_batches`' binlog-derived ids (a server whose binlog numbering is behind -- a replica built
from a backup, promoted -- gives lower ones). A lower id proves nothing. So the driver keeps, beside the tables,
``root/_pycanal_applied.{app id as hex}.json``:

* the last batch it finished: its id and its fingerprint (:func:`canal.lake.identity.lineage.fingerprint`: what it
  held); only that very batch again is a replay, skipped whole;
* the batch in flight (``pending``), written before any of it is: the same batch again (a replay after a crash)
  goes on where it stopped, with the same number;
* the mirror's own batch ``number``, which orders the changes in its change logs and is committed as the tables'
  app transaction version (:meth:`~canal.lake.mirror.DeltaMirror.version`): it only grows -- the caller's id when
  that is higher (so a mirror written by one query numbers its batches as the query does), else one past the last;
  a new app id on a root starts past every number the root's other app ids used;
* the source lineage up to the last batch (:mod:`canal.lake.identity.lineage`): the destination, the server whose binlog
  the newest change came from and its position, and the GTIDs applied -- by which each row of a batch is known applied
  (skipped) or not (applied), whatever the batch's id -- and, of MariaDB's GTIDs, the numbers applied per domain and
  writing server (:mod:`canal.lake.identity.forks`);
* where the binlog range of the batches applied ends (``through``, :mod:`canal.lake.forms.ranges`): a batch whose range
  begins after it in the same server's binlog comes from a stream with a gap (:mod:`canal.lake.identity.admit`).

A record written before the lineage was (``{"batch", "log_file", "log_offset"}``) is read with its old rules
(``legacy``): its position is taken to be in the binlog of the server the next batch comes from, its batch id is its
number; the next batch writes the record in today's form.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import attrs

from canal.lake.store import fs
from canal.lake.types import MirrorError
from canal.position import journal_number

RECORD_VERSION = 2
ALL_ROWS = 1 << 31
"""The row index a record written before rows were counted gives its position: every row of that event applied."""
_PREFIX, _SUFFIX = "_pycanal_applied.", ".json"
_JOURNAL_PREFIX = "_pycanal_steps."
_RUN_PREFIX = "_pycanal_run."


@attrs.frozen(slots=True)
class Pending:
    """The batch in flight: the caller's id, its fingerprint, the number the mirror gave it."""

    batch: int
    fingerprint: str | None
    number: int


@attrs.frozen(slots=True)
class Applied:
    """A mirror's record for one app id (module docstring)."""

    batch: int | None  # the caller's id of the last batch finished; None before the first
    fingerprint: str | None  # what that batch held; None in a record from before fingerprints
    number: int  # the mirror's number of the last batch that wrote anything (-1: none)
    destination: str | None = None  # the destination whose changes the app id mirrors
    server_id: int | None = None  # the server whose binlog the newest change applied came from (None: unknown)
    log_file: str | None = None  # that change's position (None: no change carried one yet)
    log_offset: int = 0
    row_index: int = 0
    gtids: str | None = None  # the GTIDs of the transactions applied (canal.gtid.GtidSet text); None: none seen
    open_gtid: str | None = None  # the newest change's transaction, when it may go on in the next batch (its rows)
    pending: Pending | None = None
    legacy: bool = False  # read from a record of the old form (module docstring)
    # MariaDB: per domain and writing server, the lowest and highest numbers applied (canal.lake.identity.forks: a fork
    # of the servers' histories told from a replay); None: none recorded (a record written before they were)
    origins: str | None = None
    # where the binlog range of the batches applied ends (canal.lake.forms.ranges: a cursor's text): the next batch's
    # range must begin there or before, in that server's binlog; None: no batch carried a range yet
    through: str | None = None

    @property
    def lineage(self) -> str:
        """The lineage as a message names it: the server, the position and the GTIDs applied."""
        server = "an unknown server" if self.server_id is None else f"server_id {self.server_id}"
        where = "no position" if self.log_file is None else f"{self.log_file}:{self.log_offset}"
        gtids = f", GTIDs {self.gtids}" if self.gtids else ", no GTIDs"
        return f"{server} at {where}{gtids}"


def applied_path(root: str | os.PathLike[str], app_id: str) -> str:
    """The location of the record (``root``: a local path or an object-store URI, :mod:`canal.lake.store.fs`)."""
    return fs.join(os.fspath(root), f"{_PREFIX}{app_id.encode().hex()}{_SUFFIX}")


def run_journal_path(root: str | os.PathLike[str], app_id: str) -> str:
    """Where :func:`canal.spark.run_batches` keeps its journal by default for a mirror of ``root`` / ``app_id`` (its
    spool beside it, ``<journal>.spool``): with the mirror's records, one per app id."""
    return fs.join(os.fspath(root), f"{_RUN_PREFIX}{app_id.encode().hex()}{_SUFFIX}")


def read_applied(root: str | os.PathLike[str], app_id: str) -> Applied | None:
    """The record of ``app_id`` (None: there is none); a :class:`MirrorError` when it cannot be read."""
    path = applied_path(root, app_id)
    try:
        return _from_json(json.loads(fs.read_text(path)))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise MirrorError(f"the mirror's record of what it applied, {path}, cannot be read: {exc}") from exc


def _from_json(data: dict[str, Any]) -> Applied:
    if data.get("version") != RECORD_VERSION:  # the old form: batch id, position
        batch = int(data["batch"])
        log_file = data["log_file"]
        return Applied(
            batch, None, batch, log_file=log_file, log_offset=int(data["log_offset"]), row_index=ALL_ROWS, legacy=True
        )
    pending = data.get("pending")
    return Applied(
        batch=None if data["batch"] is None else int(data["batch"]),
        fingerprint=data["fingerprint"],
        number=int(data["number"]),
        destination=data["destination"],
        server_id=None if data["server_id"] is None else int(data["server_id"]),
        log_file=data["log_file"],
        log_offset=int(data["log_offset"]),
        row_index=int(data["row_index"]),
        gtids=data["gtids"],
        open_gtid=data["open_gtid"],
        pending=None
        if pending is None
        else Pending(int(pending["batch"]), pending["fingerprint"], int(pending["number"])),
        origins=data.get("origins"),
        through=data.get("through"),
    )


def write_applied(root: str | os.PathLike[str], app_id: str, applied: Applied, *, synced: bool = True) -> None:
    """Replace the record of ``app_id`` with ``applied`` (in today's form), whole. ``synced=False``: the batch in
    flight, written before its first commit -- durable as those commits are (:func:`canal.lake.store.fs.write_bytes`),
    without a second fsync in every batch."""
    data = attrs.asdict(applied, recurse=True)
    del data["legacy"]
    encoded = json.dumps({"version": RECORD_VERSION, **data}).encode()
    fs.write_bytes(applied_path(root, app_id), encoded, synced=synced)


def root_number(root: str | os.PathLike[str], app_id: str) -> int:
    """The highest batch number the other app ids on the root used (their records, and the step journals of mirrors
    written before records were), -1 when there are none: a new app id numbers its batches past it, so that its
    changes order after theirs in a table they all wrote (the change logs and fold points are ordered by number)."""
    root = os.fspath(root)
    own = (f"{_PREFIX}{app_id.encode().hex()}{_SUFFIX}", f"{_JOURNAL_PREFIX}{app_id}{_SUFFIX}")
    highest = -1
    for name in fs.listdir(root):
        if name in own or not name.endswith(_SUFFIX) or not name.startswith((_PREFIX, _JOURNAL_PREFIX)):
            continue
        try:
            data = json.loads(fs.read_text(fs.join(root, name)))
        except (FileNotFoundError, ValueError):
            continue  # gone since listed, or being written: its app id goes on past it
        if name.startswith(_PREFIX):
            pending = data.get("pending") or {}
            found = [data.get("number", data.get("batch")), pending.get("number")]
        else:
            found = [data.get("batch")]
        highest = max([highest, *(int(n) for n in found if isinstance(n, int))])
    return highest


def other_app_ids(root: str | os.PathLike[str], app_id: str) -> list[str]:
    """The app ids other than ``app_id`` that have written the root (by their records and step journals)."""
    found: set[str] = set()
    for name in fs.listdir(os.fspath(root)):
        if not name.endswith(_SUFFIX):
            continue
        if name.startswith(_PREFIX):
            try:
                found.add(bytes.fromhex(name[len(_PREFIX) : -len(_SUFFIX)]).decode())
            except ValueError:
                continue
        elif name.startswith(_JOURNAL_PREFIX):
            found.add(name[len(_JOURNAL_PREFIX) : -len(_SUFFIX)])
    found.discard(app_id)
    return sorted(found)


@attrs.frozen(slots=True)
class Decision:
    """What a mirror does with a batch, by its record: skip it (``replay``: the last batch finished, again), go on
    with it (``resume``: the batch in flight, again), or apply it as new -- under ``number``."""

    number: int
    replay: bool = False
    resume: bool = False
    interrupted: Pending | None = None  # another batch in flight, left unfinished (a new batch is numbered past it)


def decide(
    applied: Applied | None, batch_id: int, fingerprint: str | None, root_highest: Callable[[], int]
) -> Decision:
    """How the batch ``batch_id`` holding ``fingerprint`` stands against the record ``applied`` (module docstring).
    ``root_highest``: :func:`root_number`, asked only for an app id's first batch."""
    # (a record of the old form has no fingerprint: its batch is known by its id)
    if applied is not None and applied.batch == batch_id and applied.fingerprint in (fingerprint, None):
        return Decision(applied.number, replay=True)
    pending = applied.pending if applied is not None else None
    if pending is not None and pending.batch == batch_id and pending.fingerprint == fingerprint:
        return Decision(pending.number, resume=True)
    # an app id's first batch (nothing finished yet) is numbered past the root's other app ids
    base = applied.number if applied is not None and applied.batch is not None else root_highest()
    number = max(base + 1, batch_id)
    if pending is not None:
        number = max(number, pending.number + 1)  # its changes, if any landed, order before this batch's
    return Decision(number, interrupted=pending)


def with_pending(applied: Applied | None, pending: Pending) -> Applied:
    """The record with ``pending`` in flight (before it, nothing: an empty record)."""
    if applied is None:
        return Applied(None, None, -1, pending=pending)
    return attrs.evolve(applied, pending=pending, legacy=False)


def position_key(log_file: str, log_offset: int) -> tuple[int, int]:
    """The order of positions in one server's binlog: (file number, offset)."""
    return (journal_number(log_file), log_offset)


def newest_position(table: Any) -> tuple[str, int] | None:
    """(log_file, log_offset) of the newest change of a pyarrow Table of change rows (or a typed batch's metadata),
    by binlog file number then offset; None without positions. For metrics: it names where the mirror got to, not
    what it applied (that is the record's lineage, :mod:`canal.lake.identity.lineage`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if "log_file" not in table.column_names or "log_offset" not in table.column_names or not table.num_rows:
        return None
    names = table.column("log_file")
    if pa.types.is_dictionary(names.type):  # a typed batch's metadata (canal.lake.forms.typed_batch)
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
