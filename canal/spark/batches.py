"""``foreachBatch`` for an instance embedded in the driver: pull, hand a DataFrame to ``fn``, ack after it returns.

Batch ids mean the same thing after a restart. :func:`run_batches` names a batch by the binlog position of its last
entry (:func:`~canal.lake.forms.changes.position_id`: ``journal_number << 32 | offset``), or by the id before it plus
one when that position does not exceed it: snapshot rows sit at the boundary they follow, so any number of batches can
end at one position. Positions are one server's: after a failover to a replica whose binlog numbering is behind,
the ids are lower, which a :class:`~canal.lake.mirror.DeltaMirror` does not take for replays (it follows the changes'
source lineage, :mod:`canal.lake.identity.lineage`); the journal names the server of its batch's end, and entries of
another server's binlog are neither cut nor dropped by it.

With a ``journal`` file, a crash between ``fn``'s write and the ack loses nothing and changes nothing an idempotent
sink (e.g. :class:`~canal.lake.mirror.DeltaMirror`, which skips ids it has committed) has seen:

* a batch of binlog entries: its id and end position are recorded before ``fn`` runs and marked done after the ack;
  the instance redelivers from its acked cursor and the first batch is cut to end exactly at the recorded position,
  and begins where it began (a cursor saved before the acks of batches before it -- file meta is flushed every second,
  and a process killed before the flush restarts from an older one -- delivers those again: they are dropped) -- the
  same entries under the same id. A message the cut splits goes back to the instance, and its entries that the
  batch held are dropped when they come again -- after a restart too: while the instance's acked cursor lies before
  them, the journal's records say ``through`` where they end.
* a batch that holds snapshot rows cannot come back that way: a restarted snapshot reads its chunks again, at a
  newer position. Its change rows are written to the spool next to the journal (Arrow IPC, fsynced) *before* the
  batch is acked and ``fn`` runs; after a crash the spooled batch is handed to ``fn`` again under its id, then any
  binlog entry at or before its end that the instance redelivers (the ack may not have happened) is dropped. Snapshot
  rows read again after it are newer upserts of rows the sink already has.
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, Literal

import attrs

from canal.errors import CanalError, SnapshotError
from canal.instance import Instance
from canal.lake.forms.changes import CHANGE_SCHEMA_DDL, entries_to_batch, log_server_id, position_id
from canal.lake.forms.ranges import Cursor, cursor_after, cursor_before, stamped
from canal.lake.forms.typed_batch import TypedBatch, entries_to_typed
from canal.lake.identity.applied import run_journal_path
from canal.lake.mirror import DeltaMirror
from canal.lake.native_memory import give_back_freed
from canal.lake.store import fs
from canal.log import destination_logger
from canal.position import LogPosition
from canal.protocol import EMPTY_MESSAGE_ID, Entry, EventType
from canal.spark.spool import Spool


@attrs.define(slots=True)
class RunStats:
    """What :func:`run_batches` did."""

    batches: int = 0  # fn calls
    rows: int = 0  # change rows handed to fn
    entries: int = 0
    decode_s: float = 0.0  # waiting for / pulling entries and turning them into Arrow
    spark_s: float = 0.0  # building DataFrames (Arrow tables when spark is None)
    fn_s: float = 0.0  # inside fn
    batch_ids: list[int] = attrs.field(factory=list)
    last_file: str | None = None  # binlog file of the last entry handled
    last_next_offset: int = 0  # offset just past the last entry handled (compare with SHOW MASTER STATUS)
    # how far the parser had read when the stream was last found drained (every entry it had handed over handled,
    # and no snapshot reading): past the events that make no entry after the last that did -- MariaDB's
    # Binlog_checkpoint, written after the first commit in a new binlog file, a filtered table's transactions, an
    # XA PREPARE
    drained_file: str | None = None
    drained_offset: int = 0
    snapshots: int = 0  # the snapshots the instance started, as of the last batch
    # of those, how many ended done with every row of theirs handled: the entries acked reach where the snapshot's
    # entries end in the store (SnapshotRunner.stored_through)
    snapshots_handled: int = 0
    # the server_id of the server whose binlog last_file / drained_file are in (None: not known)
    last_server_id: int | None = None
    drained_server_id: int | None = None

    def reached(self, file: str, offset: int, server_id: int | None = None) -> bool:
        """Whether every event before ``file:offset`` -- a position between transactions, as ``SHOW MASTER STATUS``
        gives -- was handled (and acked): the last entry handled ends there or after, or the stream was found drained
        with the parser's reading there or after; and every snapshot the instance started was handled whole (its
        chunks join the stream at positions of their own, so a position says nothing of them). A snapshot that
        failed or was stopped is never handled here: its rows come after the next start, which resumes it. A
        position means something in one server's binlog only: after a switch to the standby (whose binlog numbering
        may be far behind the old master's), give the server's ``server_id`` -- the old master's positions then count
        for nothing."""
        from canal.position import journal_number

        if self.snapshots_handled < self.snapshots:
            return False
        target = (journal_number(file), offset)
        return any(
            at is not None and server_id in (None, server) and (journal_number(at), next_offset) >= target
            for at, next_offset, server in (
                (self.last_file, self.last_next_offset, self.last_server_id),
                (self.drained_file, self.drained_offset, self.drained_server_id),
            )
        )


GIVE_BACK_BYTES = 1 << 20
"""After a batch of this many binlog bytes or more, the free pages of the C library's arenas go back to the system
(:func:`~canal.lake.native_memory.give_back_freed`): the batch's decoded rows are several times its binlog bytes."""

LINGER_S = 0.1
"""How long :func:`run_batches` -- and a read of the ``canal`` source that found nothing there -- lets the stream be
quiet before it hands on a batch that is not full: a parser behind the server hands over a transaction every few
milliseconds (a 1,000-row statement) and fills its batches, while one caught up with the server has nothing to add
until the server writes -- waiting ``timeout`` then (a second by default) would only delay those changes, and end a
backlog's last batch a second late."""

CUT_PATIENCE_S = 30.0
"""How long the replay of a batch in flight before a crash waits for its next entry before it is cut short."""


def _is_snapshot(entry: Entry) -> bool:
    return entry.header.event_type is EventType.SNAPSHOT


class _Puller:
    """Messages from the instance, consumed entry by entry; a message is acked once all its entries are done."""

    def __init__(
        self,
        instance: Instance,
        batch_size: int,
        timeout: float,
        clock: Callable[[], float] = time.monotonic,
        linger: float | None = None,
    ) -> None:
        self.instance = instance
        self.batch_size = batch_size
        self.timeout = timeout
        self.linger = linger
        self.clock = clock
        self.buffer: deque[list[Any]] = deque()  # [message id, remaining entries]
        # the binlog entries up to this position id came to fn already, and the instance may deliver them again (a
        # spooled batch replayed, whose ack may not have happened; the rest of a message a cut batch split, handed
        # back): they are dropped when they come; None once the stream passed it
        self.drop_through: int | None = None
        # the same position while the instance has not had every message holding such an entry acked: a restart
        # would deliver them again too, so the journal keeps it (None once acked past it)
        self.behind: int | None = None
        # the server whose binlog the journal's positions are in (None: a journal of the old form, or no position):
        # an entry of another server's binlog is no entry of that batch, whatever its position id
        self.lineage: int | None = None

    def _beyond(self, entry: Entry, end: int) -> bool:
        """Whether ``entry`` lies past the position id ``end`` the journal recorded: a snapshot entry (read again at a
        later position), an entry of another server's binlog (a failover: its position ids say nothing of the
        other's), or one later in the same binlog."""
        server = log_server_id(entry)
        other = self.lineage is not None and server is not None and server != self.lineage
        return _is_snapshot(entry) or other or position_id(entry) > end

    def _fetch(self) -> bool:
        msg = self.instance.get_without_ack(self.batch_size, self.timeout, linger=self.linger)
        if msg.id == EMPTY_MESSAGE_ID:
            return False
        entries = list(msg.entries)
        if self.drop_through is not None:
            end = self.drop_through
            entries = [e for e in entries if self._beyond(e, end)]
            if entries and self._beyond(entries[-1], end):
                self.drop_through = None
        self.buffer.append([msg.id, entries])
        return True

    def redelivers(self, through: int | None) -> None:
        """The binlog entries up to position id ``through`` came to fn already, but the instance may deliver them
        again: drop them when they come."""
        if through is not None:
            self.drop_through = self.behind = through

    def take(self, until: int | None) -> tuple[list[Entry], list[int], bool]:
        """Entries for one batch, the message ids to ack after it (both empty when nothing arrived in time), and
        whether the batch is the one in flight before a crash, cut after ``until``.

        ``until``: the end position of the batch in flight before a crash, which held binlog entries only; the
        entries are cut after it. A snapshot entry is always past it: a restarted snapshot reads its chunks at a
        position at or after the end of anything delivered before, so such an entry was not in that batch. Entries
        are fetched until the one at ``until`` is there, however long the instance takes to read them again; only
        when nothing at all arrives for :data:`CUT_PATIENCE_S` (the entries no longer come: the filter changed, say)
        is the batch cut where the entries end, with a warning: it is then shorter than the one in flight.

        A message the cut splits goes back to the instance (:meth:`Instance.rollback`, with every message fetched
        after it), and the entries of it that this batch holds are dropped when the instance delivers them again: a
        message is acked whole, so a puller that kept its rest would leave it outstanding -- unacked, and out of
        reach of a later run on the instance, which gets only what follows it -- should the run stop before taking
        it. The puller holds no entry between batches.
        """
        if not self.buffer and not self._fetch():
            return [], [], False
        entries: list[Entry]
        ids: list[int]
        first = next((rest[0] for _mid, rest in self.buffer if rest), None)
        if until is not None and first is not None and self._beyond(first, until):
            until = None  # the recorded batch was acked before the crash (or another server's binlog): nothing to cut
        if until is None:
            entries = [e for _mid, rest in self.buffer for e in rest]
            ids = [mid for mid, _rest in self.buffer]
            self.buffer.clear()
            return entries, ids, False

        def past(entry: Entry) -> bool:
            return self._beyond(entry, until)

        # cut at until: fetch until the batch's last entry (the one at until) or one past it is buffered
        quiet_since = self.clock()
        while not any(past(e) or position_id(e) == until for e in self.buffer[-1][1][-1:]):
            if self._fetch():
                quiet_since = self.clock()
            elif self.clock() - quiet_since > CUT_PATIENCE_S:
                log = destination_logger(__name__, self.instance.destination)
                log.warning(
                    "the batch in flight before the crash ended at position id %d, but nothing arrived for %.0f s "
                    "before reaching it: replaying it as far as the entries came",
                    until,
                    CUT_PATIENCE_S,
                )
                break
        entries = []
        ids = []
        while self.buffer:
            mid, rest = self.buffer[0]
            cut = next((i for i, entry in enumerate(rest) if past(entry)), len(rest))
            entries.extend(rest[:cut])
            if cut < len(rest):
                # the rest of this message, and the messages after it, back to the instance
                self.instance.rollback(mid)
                self.buffer.clear()
                self.redelivers(until)
                break
            ids.append(mid)
            self.buffer.popleft()
        return entries, ids, True

    def ack(self, ids: list[int]) -> None:
        for mid in ids:
            self.instance.ack(mid)
        if ids and self.drop_through is None:
            self.behind = None  # the messages up to one past it are acked: a restart delivers none of them again


class JournalError(CanalError):
    """The ``run_batches`` journal cannot be read: the batch in flight before a crash is unknown, so the first batch
    cannot be guaranteed identical to it. Nothing was consumed; fix or remove the file (losing that guarantee)."""


@attrs.frozen
class _Journal:
    """What the journal says of the last batch: its id, and if it was in flight, where it ended and how it returns."""

    last_id: int | None = None  # the id of the last batch handed to fn
    pending: bool = False  # fn may not have finished with it
    end: int | None = None  # the position id of its last entry
    spooled: bool = False  # its rows are in the spool (it held snapshot rows; the instance acked it before fn)
    # the binlog entries up to this position id came to fn in earlier batches, but the instance, whose acked cursor
    # lies before some of them, delivers them again (a batch cut inside a message): dropped when they come
    through: int | None = None
    server: int | None = None  # the server whose binlog ``end`` and ``through`` are in (None: unknown, old form)
    # the binlog range (canal.lake.forms.ranges, cursors' texts) of the last batch handed to fn -- where it began
    # (``range_from``: the batch in flight's is replayed alike) and ended (``range_to``) --, where the next one's
    # begins once it is done (``range_next``), and how far the stream was read since with nothing for fn (``reach``);
    # None in a journal of the old form
    range_from: str | None = None
    range_to: str | None = None
    range_next: str | None = None
    reach: str | None = None


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _read_journal(path: str) -> _Journal:
    """The journal's record of the last batch; an empty record when there is no journal yet."""
    try:
        text = fs.read_text(path)
    except FileNotFoundError:
        return _Journal()
    except (OSError, UnicodeDecodeError) as exc:
        raise JournalError(f"cannot read the run_batches journal {path}: {exc}") from exc
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise JournalError(f"the run_batches journal {path} is not JSON ({exc}): {text[:80]!r}") from None
    server = document.get("server") if isinstance(document, dict) else None  # optional, null: unknown
    ranges = {key: document.get(key) for key in _RANGE_KEYS} if isinstance(document, dict) else {}
    if (
        isinstance(document, dict)
        and _int(document.get("through", 0))
        and (server is None or _int(server))
        and all(value is None or isinstance(value, str) for value in ranges.values())
    ):
        through = document.get("through")  # optional
        range_from, range_to, range_next, reach = (ranges[key] for key in _RANGE_KEYS)
        if set(document) <= {"done", "through", "server", *_RANGE_KEYS} and _int(document.get("done")):
            return _Journal(
                document["done"],
                through=through,
                server=server,
                range_from=range_from,
                range_to=range_to,
                range_next=range_next,
                reach=reach,
            )
        if "pending" in document and set(document) <= {"pending", "end", "spooled", "through", "server", *_RANGE_KEYS}:
            batch_id, end, spooled = (
                document["pending"],
                document.get("end", document["pending"]),
                document.get("spooled", False),
            )
            if _int(batch_id) and _int(end) and isinstance(spooled, bool):
                return _Journal(batch_id, True, end, spooled, through, server, range_from, range_to, range_next, reach)
    raise JournalError(
        f"the run_batches journal {path} holds {text[:80]!r}; expected "
        '{"pending": id, "end": position, "spooled": bool, "through": position, "server": server_id} or '
        '{"done": id, "through": position, "server": server_id} (spooled, through and server optional)'
    )


_RANGE_KEYS = ("from", "to", "next", "reach")  # the journal's keys of the binlog range (optional; cursors' texts)


def _spool_key(batch_id: int) -> dict[str, int]:
    return {"batch": batch_id}


class _JournalFile:
    """The journal file and the spool beside it (``<journal>.spool``): a local path, or a location in an object store
    (``options``: the store's, as the mirror's root it is kept beside takes them)."""

    def __init__(self, path: str | os.PathLike[str], options: Mapping[str, str] | None = None) -> None:
        self.path = os.fspath(path)
        self.spool = Spool(self.path + ".spool", options or None)
        self._document: dict[str, Any] | None = None  # the record as last written

    def read(self) -> _Journal:
        return _read_journal(self.path)

    def spooled(self, batch_id: int) -> Any:
        """The rows spooled for ``batch_id``; a JournalError when they are not there."""
        found = self.spool.read(_spool_key(batch_id))
        if found is None:
            raise JournalError(
                f"the run_batches journal {self.path} says batch {batch_id} is spooled, but {self.spool.root} has no "
                "file for it: that batch cannot be replayed"
            )
        return found[0]

    def pending(
        self,
        batch_id: int,
        end: int,
        server: int | None,
        spooled_rows: Any = None,
        through: int | None = None,
        ranged: Mapping[str, str | None] | None = None,
    ) -> None:
        """Record the batch as in flight (``end`` in the binlog of ``server``); with ``spooled_rows``, spool them
        first (the batch is acked before fn). ``through``: the binlog entries up to it came to fn before this batch,
        and a restart delivers them again. ``ranged``: the binlog range's keys (``from``, ``to``, ``next``,
        ``reach``)."""
        record: dict[str, Any] = {"pending": batch_id, "end": end, "server": server, **_present(ranged)}
        if spooled_rows is not None:
            self.spool.write(_spool_key(batch_id), {"batch": batch_id, "end": end}, spooled_rows)
            record["spooled"] = True
        self._write(_through(record, through))

    def done(
        self,
        batch_id: int,
        through: int | None = None,
        server: int | None = None,
        ranged: Mapping[str, str | None] | None = None,
    ) -> None:
        record: dict[str, Any] = {"done": batch_id, **_present(ranged)}
        if through is not None:
            record["server"] = server
        self._write(_through(record, through))
        self.spool.discard(_spool_key(batch_id))

    def reached(self, reach: str, record: _Journal) -> None:
        """Record that the stream was read to ``reach`` (a cursor's text) with nothing for fn since the last batch
        fn got (``record``: the journal as read at the run's start, before this run wrote it). Written before the
        instance's cursor moves there, without an fsync: a machine's crash that loses it only stops the next batch,
        typed (a restart resumes past where the journal says the stream was read)."""
        document = self._document
        if document is None:  # nothing written by this run yet: the record read, as it was
            document = {"done": record.last_id or 0} if not record.pending else {
                "pending": record.last_id, "end": record.end, "server": record.server,
                **({"spooled": True} if record.spooled else {}),
            }  # fmt: skip
            if not record.pending and record.through is not None:
                document["server"] = record.server
            ranged = _present({"from": record.range_from, "to": record.range_to, "next": record.range_next})
            document = _through({**document, **ranged}, record.through)
        self._write({**document, "reach": reach}, synced=False)

    def _write(self, record: Mapping[str, Any], *, synced: bool = True) -> None:
        """Replace the journal with ``record``, durably (locally: atomically through a rename, fsynced unless
        ``synced`` is False)."""
        document = dict(record)
        text = json.dumps(document, sort_keys=True, separators=(",", ":")) + "\n"
        try:
            fs.write_bytes(self.path, text.encode("utf-8"), synced=synced)
        except OSError as exc:
            raise JournalError(f"cannot write the run_batches journal {self.path}: {exc}") from exc
        self._document = document


def _present(ranged: Mapping[str, str | None] | None) -> dict[str, str]:
    return {key: value for key, value in (ranged or {}).items() if value is not None}


def _through(record: dict[str, Any], through: int | None) -> dict[str, Any]:
    return record if through is None else {**record, "through": through}


def run_batches(
    instance: Instance,
    spark: Any,
    fn: Callable[[Any, int], Any],
    *,
    batch_size: int = 16384,
    timeout: float = 1.0,
    linger: float | None = LINGER_S,
    journal: str | os.PathLike[str] | Literal[False] | None = None,
    max_batches: int | None = None,
    stop: threading.Event | None = None,
    idle_stop_s: float | None = None,
    until: Callable[[RunStats], bool] | None = None,
) -> RunStats:
    """Pull batches from a started ``instance`` and call ``fn(df, batch_id)`` with each; ack after ``fn`` returns.

    ``df`` has the change-row schema (:data:`~canal.lake.forms.changes.CHANGE_SCHEMA_DDL`): a Spark DataFrame, or with
    ``spark=None`` a pyarrow Table -- except that with ``spark=None`` a :class:`~canal.lake.mirror.DeltaMirror`
    passed as ``fn`` gets a :class:`~canal.lake.forms.typed_batch.TypedBatch` (typed columns, no JSON text; batches
    holding snapshot rows, which are spooled as change rows, stay change rows). Batches
    without change rows (only transaction boundaries or heartbeats) are acked without calling ``fn``. An exception
    from ``fn`` leaves the batch unacked and propagates (the instance redelivers it after
    :meth:`Instance.rollback` or a restart; the next ``run_batches`` on the instance rolls back what is outstanding
    first) -- except a batch holding snapshot rows, which is acked once spooled:
    the next ``run_batches`` with the same journal hands it to ``fn`` again. Stops after ``max_batches`` calls, when
    ``stop`` is set, when ``until(stats)`` is true (``until=lambda s: s.reached(file, offset)`` with the master's
    position runs until everything before it was handled, and every row of the instance's snapshots), or after
    ``idle_stop_s`` seconds without data; a run that stops holds back nothing it took from the instance. ``journal`` (a
    file path, or a location in an object store; the spool is the directory beside it, ``<journal>.spool``) makes the
    first batch after a crash identical to the one that was in flight (see the module docstring). Snapshot rows --
    an initial snapshot's, a heal's -- need it: without one they raise :class:`~canal.errors.SnapshotError` before
    ``fn`` sees them and nothing is acked, because only the journal keeps their batch ids (which are not binlog
    positions) across a restart. By default (None) a :class:`~canal.lake.mirror.DeltaMirror` given as ``fn`` gets one
    beside its records (``_pycanal_run.<app id as hex>.json`` in its root), so the defaults heal; ``False``: none.

    ``batch_size`` and ``timeout`` are what each batch asks of the instance (:meth:`Instance.get_without_ack`): in
    the store's default MEMSIZE mode ``batch_size`` units of ``memory_unit`` bytes (16384: 16 MB of binlog events,
    all that canal's default store holds), in ITEMSIZE mode entries. Big batches spend less on each batch's fixed
    cost: into a :class:`~canal.lake.mirror.DeltaMirror`, 1,000,000 changes of a 10-column row ran at 77,000
    rows/s in 16 MB batches against 69,000 in 4 MB ones (three runs each, ``benchmarks/bench_spark.py``'s
    workload). A batch's entries stay in the store until ``fn`` returns, so give the instance a store that holds
    more than a batch (``canal.instance.memory.buffer.size`` 65536, 64 MB, as the Spark source does): the parser
    then decodes the next batch while ``fn`` writes this one, where with canal's 16 MB it waits for room -- the
    same 1,000,000 changes took 17.5-18.1 s against 18.8-19.3 s here. ``timeout`` bounds how long a batch waits to
    fill, and ``linger`` ends that wait once the stream went quiet: when the instance has handed over nothing new
    for ``linger`` seconds (it caught up with the server), the entries there go to ``fn`` at once rather than after
    ``timeout`` (None: always wait for a full batch or ``timeout``, as canal's clients do).
    """
    stats = RunStats()
    # a DeltaMirror without Spark takes typed batches: no JSON text between the decoder and its tables
    typed_to = fn if spark is None and isinstance(fn, DeltaMirror) else None
    if typed_to is not None:
        instance.decode_rows_by_column()  # the rows become typed columns: decoded column by column, half the cost
    puller = _Puller(instance, batch_size, timeout, linger=linger)
    if instance.list_batch_ids():
        # batches taken before and never acked -- an earlier run's, whose fn raised: the instance hands out what follows
        # them, and fn would get later changes first (applied before those, which the mirror then takes for applied);
        # handed out again, in order
        instance.rollback()
    journal_file = _journal_of(fn, journal)
    record = _Journal() if journal_file is None else journal_file.read()
    last_id = record.last_id or 0
    cut_at: int | None = None  # the end of the binlog batch in flight before a crash
    destination = instance.destination
    if record.pending and record.spooled:
        assert journal_file is not None and record.last_id is not None
        rows = journal_file.spooled(record.last_id)
        if rows.num_rows:
            _call(fn, spark, rows, record.last_id, stats)
        puller.lineage = record.server
        puller.redelivers(record.end)  # acked before fn, unless the crash came first
        # acked before fn, the batch let the cursor follow the stream past it while it was in flight (``reach``):
        # fn has it whole now, so the next batch's range goes on from its end through what was read since
        ranged = {"from": record.range_from, "to": record.range_to, "next": record.range_to, "reach": record.reach}
        journal_file.done(record.last_id, puller.behind, record.server, ranged)
        record = attrs.evolve(record, pending=False, spooled=False, range_next=record.range_to)
    else:
        puller.lineage = record.server
        through, ended = record.through, record.end
        if record.pending and through is not None and ended is not None and through >= ended:
            # a journal of an older version, whose through named the batch in flight itself (a replay's cut had
            # split a message): fn may not have had it whole -- it is replayed from the cursor, not dropped
            through = None
        puller.redelivers(through)
        if record.pending:
            cut_at = record.end
    # where the binlog range of the next batch handed to fn begins (None: its first entry says)
    chain = _chain_start(instance.get_cursor(), record)
    if journal_file is not None:
        journal_file.spool.clear()  # a batch spooled but never recorded as pending was not acked: the instance has it
        # where the instance's cursor follows the stream's rest, the stream was read with nothing for fn: journaled
        # first, so a restart from there knows the range goes on from the last batch fn got
        instance.following = functools.partial(_followed, journal_file, record)
    try:
        idle_since = time.monotonic()
        while True:
            if stop is not None and stop.is_set():
                break
            _count_snapshots(instance, stats)
            if until is not None and until(stats):
                break
            if max_batches is not None and stats.batches >= max_batches:
                break
            began = time.perf_counter()
            # how far the parser had read before a take that finds nothing: every event before it made no entry or was
            # handed over -- to the store, and so to an earlier take, handled and acked before this one (the parser
            # holds back only the transaction it is reading, which starts after any position between transactions).
            # Not while a snapshot reads: its next chunk, on its way, joins the stream at a position of its own
            read = None if instance.snapshot_running else instance.read_position
            entries, ack_ids, replaying = puller.take(cut_at)
            if not entries:
                puller.ack(ack_ids)  # entries dropped as already handed to fn, if any
                if not ack_ids and read is not None and read.journal_name and read.position is not None:
                    stats.drained_file, stats.drained_offset = read.journal_name, read.position
                    stats.drained_server_id = read.server_id
                stats.decode_s += time.perf_counter() - began
                if not ack_ids and idle_stop_s is not None and time.monotonic() - idle_since > idle_stop_s:
                    break
                continue
            idle_since = time.monotonic()
            cut_at = None
            end = position_id(entries[-1])
            batch_id = last_id if replaying else max(end, last_id + 1)
            snapshot_rows = any(_is_snapshot(e) for e in entries)
            if snapshot_rows and journal_file is None:
                raise SnapshotError(
                    "run_batches needs a journal to deliver snapshot rows: they share their binlog position with the "
                    "batches around them, so their batch ids exist only in the journal (pass journal=...)"
                )
            stats.entries += len(entries)
            # the binlog range the batch covers (canal.lake.forms.ranges): from where the last batch fn got ended (or
            # the batch in flight before a crash began), to the cursor after its last entry
            start = chain if chain is not None else next(filter(None, map(cursor_before, entries)), None)
            if replaying and record.range_from is not None:
                start = Cursor.parse(record.range_from)
            finish = next(filter(None, map(cursor_after, reversed(entries))), start)
            entries = stamped(entries, start, finish)
            rows = _batch(entries, destination, typed_to if not snapshot_rows else None)
            stats.decode_s += time.perf_counter() - began
            ranged = {
                "from": None if start is None else start.text(),
                "to": None if finish is None else finish.text(),
                "next": None if finish is None else finish.text(),
                "reach": None if finish is None else finish.text(),
            }
            if rows.num_rows:
                if journal_file is not None:
                    # a restarted snapshot cannot deliver snapshot rows again as they are: spool them, then ack
                    server = log_server_id(entries[-1])
                    spooled = rows if snapshot_rows else None
                    in_flight = {**ranged, "next": record.range_next, "reach": None}
                    # a binlog batch comes back through the instance, which may deliver batches before it again (a
                    # cursor saved before acks it has not flushed): they are dropped, so it comes back alike
                    through = puller.behind if snapshot_rows else _redelivered_through(entries, server)
                    journal_file.pending(batch_id, end, server, spooled, through, in_flight)
                if snapshot_rows:
                    puller.ack(ack_ids)
                    ack_ids = []
                _call(fn, spark, rows, batch_id, stats)
                last_id = batch_id
                chain = finish
            elif journal_file is not None and finish is not None:
                journal_file.reached(finish.text(), record)  # nothing for fn: read past, before the instance moves on
            puller.ack(ack_ids)
            if rows.num_rows and journal_file is not None:
                journal_file.done(batch_id, puller.behind, log_server_id(entries[-1]), ranged)
            last_entry = next((e for e in reversed(entries) if not _is_snapshot(e)), None)
            if last_entry is not None:  # a snapshot entry's header is the boundary it follows, not an event of its own
                stats.last_file, stats.last_next_offset = last_entry.header.log_file, last_entry.header.next_offset
                stats.last_server_id = log_server_id(last_entry)
            if sum(e.header.event_length for e in entries) >= GIVE_BACK_BYTES:
                del entries, rows, last_entry  # the batch's decoded rows, freed with the ack: given back
                give_back_freed()
    finally:
        # the cursor may follow the stream's rest after the run too (the instance's stop does: a restart right after
        # a rotate starts in the new file), past nothing for fn as long as nothing was acked since: journaled alike,
        # or the next run would see a gap where there is none
        instance.following = (
            None
            if journal_file is None
            else functools.partial(_followed_since, instance, instance.store.stats().ack_sequence, journal_file, record)
        )
    return stats


def _redelivered_through(entries: list[Entry], server: int | None) -> int | None:
    """The ``through`` the journal keeps for a batch of binlog ``entries`` in flight, whose end is in the binlog of
    ``server``: the position id just before its first entry of that binlog. The batches fn got before it -- whose
    acks the instance's saved cursor may not hold yet (file meta is flushed every ``flush_period_s``: a process killed
    before the flush restarts from an older cursor) -- are dropped when they come again, and none of its own entries
    is: it is replayed alike. (Not the puller's ``behind``: a replay whose cut split a message puts it at the batch's
    own end, which would drop the whole batch should it crash again before fn is done with it.)"""
    first = next(
        (e for e in entries if not _is_snapshot(e) and server in (None, log_server_id(e))),
        None,
    )
    return None if first is None else position_id(first) - 1


def _chain_start(saved: LogPosition | None, record: _Journal) -> Cursor | None:
    """Where the binlog range of a run's first batch begins: the instance's cursor (``saved``; None: none saved, the
    batch's first entry says) -- or, when the journal says the stream was read past the end of the last batch fn got
    with nothing for fn (``reach``) and the cursor lies there, that end: the instance's cursor followed the stream's
    rest past transactions the filter left out (or acked batches without change rows), which is no gap."""
    here = Cursor.of_saved(saved)
    done_to, reach = Cursor.parse(record.range_next), Cursor.parse(record.reach)
    if record.pending or here is None or done_to is None or here.server_id != done_to.server_id:
        return here
    if here.key <= done_to.key:
        return here
    if reach is not None and reach.server_id == here.server_id and here.key <= reach.key:
        return done_to
    return here


def _followed(journal_file: _JournalFile, record: _Journal, rest: LogPosition) -> None:
    """The instance's cursor is about to follow the stream's rest to ``rest``: journaled as read with nothing for fn."""
    reached = Cursor.of_saved(rest)
    if reached is not None:
        journal_file.reached(reached.text(), record)


def _followed_since(
    instance: Instance, acked: int, journal_file: _JournalFile, record: _Journal, rest: LogPosition
) -> None:
    """After a run: the cursor follows the stream's rest to ``rest``, journaled as by :func:`_followed` while the
    instance acked nothing since the run ended (``acked``: its store's ack sequence then) -- entries another consumer
    took and acked were never fn's, and the next run must find the gap they leave."""
    if instance.store.stats().ack_sequence == acked:
        _followed(journal_file, record, rest)


def _journal_of(fn: Callable[[Any, int], Any], journal: str | os.PathLike[str] | Literal[False] | None) -> Any:
    """The journal a run keeps: the one given; by default (None), for a :class:`~canal.lake.mirror.DeltaMirror` given
    as ``fn``, one beside its records (:func:`~canal.lake.identity.applied.run_journal_path`: the mirror's root and
    app id, its store's options) -- so that the defaults heal, whose snapshot rows need one; none for ``False``, or
    for another ``fn`` given none."""
    if journal is False:
        return None
    if journal is not None:
        return _JournalFile(journal)
    if isinstance(fn, DeltaMirror):
        return _JournalFile(run_journal_path(fn.root, fn.app_id), fn.storage_options)
    return None


def _count_snapshots(instance: Instance, stats: RunStats) -> None:
    """The instance's snapshots, and how many ended done with every entry of theirs acked -- handled: a batch
    holding snapshot rows is acked once spooled, before fn, but fn has returned by the time ``until`` asks."""
    runners = instance.snapshots
    if not runners:
        return
    acked = instance.store.stats().ack_sequence
    stats.snapshots = len(runners)
    stats.snapshots_handled = sum(
        1 for runner in runners if runner.stored_through is not None and runner.stored_through <= acked
    )


def _batch(entries: list[Entry], destination: str, mirror: DeltaMirror | None) -> Any:
    """The batch ``fn`` gets: change rows, or for ``mirror`` a typed batch (its change rows made only if the mirror
    asks for them: XA transactions, foreign keys' actions; :mod:`canal.lake.forms.typed_plan`). Values that do not
    convert are collected in the typed batch, the mirror failing it only for a value it applies, as it does change
    rows."""
    if mirror is None:
        return entries_to_batch(entries, destination, 0)
    typed = entries_to_typed(
        entries, destination, 0, zero_dates=mirror.zero_dates, collect_errors=True, before_keys_only=True
    )
    return attrs.evolve(typed, rows=functools.partial(entries_to_batch, entries, destination, 0))


def _call(fn: Callable[[Any, int], Any], spark: Any, rows: Any, batch_id: int, stats: RunStats) -> None:
    """``fn`` with the rows as a DataFrame (a typed batch as it is), timed into ``stats``."""
    import pyarrow as pa

    began = time.perf_counter()
    if isinstance(rows, TypedBatch):
        built = time.perf_counter()
        fn(rows, batch_id)
        stats.fn_s += time.perf_counter() - built
        stats.batches += 1
        stats.rows += rows.num_rows
        stats.batch_ids.append(batch_id)
        return
    table = pa.Table.from_batches([rows])
    # one partition: the batch is local data, and one task applies it (every table in parallel threads) in one Spark
    # job, where Spark's split of a local table into partitions cost two more jobs and a shuffle per batch
    df = table if spark is None else spark.createDataFrame(table, schema=CHANGE_SCHEMA_DDL).coalesce(1)
    built = time.perf_counter()
    stats.spark_s += built - began
    fn(df, batch_id)
    stats.fn_s += time.perf_counter() - built
    stats.batches += 1
    stats.rows += rows.num_rows
    stats.batch_ids.append(batch_id)
