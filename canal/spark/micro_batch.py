"""The entries of one micro-batch of the ``canal`` source as they are taken from the instance, their change rows
and their spool file (:mod:`canal.spark.source` reads with it), and the binlog range they cover
(:mod:`canal.lake.forms.ranges`)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from canal.lake.forms.changes import change_rows, change_type, entries_to_batch
from canal.lake.forms.ranges import Cursor, cursor_before, stamped
from canal.lake.forms.variant_changes import IMAGES_VARIANT, entries_to_variant_batch
from canal.position import EntryPosition
from canal.protocol import Entry, EventType
from canal.spark.message_rows import plan_rows
from canal.spark.offsets import Offset, moved, offset_of
from canal.spark.options import IMAGES_PACKED
from canal.spark.packed_cut import PACKED_BATCH_BYTES, PackedCut
from canal.spark.sessions import Session
from canal.spark.source_options import ReadCap
from canal.spark.spool import Spool, SpoolWriter

__all__ = ["MicroBatchCut", "at_or_past", "past_target"]


class MicroBatchCut:
    """The entries of one micro-batch as they are taken from the instance, and their change rows, written to the
    batch's spool file as they come -- or with ``images=packed``, packed as they come and spooled when the batch ends
    (:class:`~canal.spark.packed_cut.PackedCut`)."""

    def __init__(
        self,
        start: Offset,
        spool: Spool,
        images: str,
        packed_bytes: int = PACKED_BATCH_BYTES,
        since: Cursor | None = None,
        messages: Any = None,
    ) -> None:
        self.start = start
        self.messages = messages  # the messages option's maker (MQ messages instead of change rows)
        # the binlog range the micro-batch covers (canal.lake.forms.ranges): from ``since`` (None: its first entry
        # says), to the end of what it took when it last made change rows (``covered``, which the end offset keeps:
        # the next micro-batch's range begins there)
        self.since = since
        self.covered: str | None = None
        self.spool = spool
        self.variant = images == IMAGES_VARIANT  # the images=variant form (canal.lake.forms.variant_changes)
        self.packer = PackedCut(packed_bytes) if images == IMAGES_PACKED else None
        self.plan_bytes = 0  # the messages option's: the bytes of the plans made (a micro-batch ends past packed_bytes)
        self.most_bytes = packed_bytes
        self.count = 0  # entries taken
        self.fresh: list[Any] = []  # entries taken and not yet turned into change rows
        self.end: Offset | None = None
        self.partial = False  # stopped at an AvailableNow target
        self.full = False  # stopped at a cap
        self.taken = 0  # entries, a SNAPSHOT entry counting its rows (it holds up to 1,000)
        self.rows = 0  # change rows (what maxRowsPerTrigger counts)
        self.nbytes = 0  # binlog bytes (what maxBytesPerTrigger counts)
        self.changes: Counter[str] = Counter()  # change rows by type: the end offset's (canal.spark.progress)
        self.chunks: list[Any] = []  # record batches of the change rows
        self.chunk_rows = 0
        self.writer: SpoolWriter | None = None  # the spool file being written, from the first change row on

    def done(self, max_entries: int) -> bool:
        full = (
            self.taken >= max_entries
            or (self.packer is not None and self.packer.full())
            or (self.messages is not None and self.plan_bytes >= self.most_bytes)
        )
        return (full and self.advanced()) or self.partial or self.full

    def mark(self, session: Session) -> tuple[Any, ...]:
        """What :meth:`give_back` restores: the counts before a :meth:`take` (under the session's lock)."""
        marked = (self.end, self.rows, self.nbytes, self.count, self.taken, self.partial, Counter(self.changes))
        return (*marked, len(session.outstanding))

    def advanced(self) -> bool:
        """Whether the entries taken place a cursor past the micro-batch's start. Only then may a cap end it: a
        transaction's BEGIN places none (a cursor inside a transaction names the boundary before it until a row of
        it is taken), and a micro-batch ending where it started reads as nothing new -- which ends an AvailableNow
        run."""
        return self.end is not None and moved(self.start, self.end)

    def take(
        self,
        session: Session,
        mid: int,
        pending: list[Any],
        cap: ReadCap,
        target: EntryPosition | None,
        batch_no: int,
        max_entries: int,
    ) -> None:
        """Add the entries of instance batch ``mid`` up to the caps (``max.entries`` among them) or the AvailableNow
        target; the rest a cap cuts is carried into the next micro-batch (``session.carry``). Called under the
        session's lock."""
        kept = 0
        for entry in pending:
            if target is not None and past_target(entry, target):
                self.partial = True
                break
            rc = entry.row_change
            entry_rows = change_rows(entry)
            weight = len(rc.rows) if rc is not None and rc.event_type is EventType.SNAPSHOT else 1
            # an instance batch may hold more entries than were asked for (in the store's MEMSIZE mode a get asks
            # for bytes), so max.entries is kept here, entry by entry, as the other caps are
            if self.advanced() and (
                self.taken + weight > max_entries
                or cap.exceeded(self.rows + entry_rows, self.nbytes + entry.header.event_length)
            ):
                self.full = True
                break
            self.rows += entry_rows
            self.changes[change_type(entry)] += entry_rows
            self.nbytes += entry.header.event_length
            self.fresh.append(entry)
            self.count += 1
            kept += 1
            self.taken += weight
            placed = offset_of(entry, batch_no)
            if placed is not None:
                self.end = placed
        if self.full:
            # the cap fell inside this instance batch: its rest opens the next micro-batch, and the instance batch
            # is acked with that one (whose end covers all of it)
            session.carry, session.carry_id = pending[kept:], mid
        elif not self.partial:
            session.outstanding.append(mid)

    def encode(self, destination: str, batch_no: int) -> bool:
        """Turn the entries taken since the last call into change rows and spool them (``images=packed``: into a
        packed row, kept until :meth:`publish`). False when the packer refused them (they cannot join this
        micro-batch's typed rows: :meth:`give_back` them, as they were taken)."""
        if not self.fresh:
            return True
        fresh, covered = self._stamped()
        if self.packer is not None:
            added = self.packer.add(fresh, destination, batch_no, self.chunk_rows)
            if added is None:
                return False
            self.chunk_rows += added
            self.fresh, self.covered = [], covered
            return True
        if self.messages is not None:
            # planned here, made into messages by the micro-batch's task (canal.spark.message_rows)
            chunk, after = plan_rows(self.messages, fresh, batch_no, self.chunk_rows)
            self.plan_bytes += chunk.nbytes
        else:
            make = entries_to_variant_batch if self.variant else entries_to_batch
            chunk = make(fresh, destination, batch_no, self.chunk_rows)
            after = self.chunk_rows + chunk.num_rows
        self.fresh, self.covered = [], covered
        if chunk.num_rows:
            if self.writer is None:
                self.writer = self.spool.open(self.start, chunk.schema)
            self.writer.write(chunk)
            self.chunks.append(chunk)
            self.chunk_rows = after
        return True

    def _stamped(self) -> tuple[list[Any], str | None]:
        """The entries taken since the last call with the range's ends (:mod:`canal.lake.forms.ranges`): where it
        begins on the micro-batch's first entry with change rows, where it ends so far -- after everything taken --
        on their last; and ``covered`` once they are encoded."""
        if not any(change_rows(entry) for entry in self.fresh):
            return self.fresh, self.covered
        start = None
        if self.covered is None:  # the first change rows of the micro-batch
            start = self.since if self.since is not None else next(filter(None, map(cursor_before, self.fresh)), None)
        end = Cursor.of_offset(self.end)
        return stamped(self.fresh, start, end), (self.covered if end is None else end.text())

    def give_back(self, session: Session, mark: tuple[Any, ...], mid: int) -> None:
        """End the micro-batch before the entries of the last :meth:`take` (instance batch ``mid``), which the
        packer refused: they open the next micro-batch, as the rest of an instance batch a cap cuts does, and the
        instance batch is acked with that one. Called under the session's lock."""
        admitted, self.fresh = self.fresh, []
        self.end, self.rows, self.nbytes, self.count, self.taken, partial, self.changes, outstanding = mark
        if self.partial and not partial:
            pass  # the AvailableNow target fell in them: the session reopens at the end (they are read again)
        elif self.full and session.carry_id == mid:
            session.carry = admitted + session.carry  # a cap cut them off their instance batch: all of it goes on
        else:
            del session.outstanding[outstanding:]
            session.carry, session.carry_id = admitted, mid
        self.full = True

    def publish(self, end: Offset) -> None:
        """Publish the spool file with ``end`` (the chunks go to Spark as they are: joining 40 MB took 0.2 s)."""
        if self.packer is not None:
            packed = self.packer.packed()
            self.writer = self.spool.open(self.start, self.spool.form)
            self.chunks = packed.combine_chunks().to_batches()  # a packed row is some 70 bytes a change
            for chunk in self.chunks:
                self.writer.write(chunk)
        if self.writer is None:
            self.writer = self.spool.open(self.start, self.spool.form)
        self.writer.publish(end)

    def discard(self) -> None:
        """Drop the spool file unless it was published."""
        if self.writer is not None:
            self.writer.discard()


def at_or_past(position: EntryPosition, target: EntryPosition) -> bool:
    return (position.journal_number, position.position or 0) >= (target.journal_number, target.position or 0)


def past_target(entry: Entry, target: EntryPosition) -> bool:
    """Whether Trigger.AvailableNow stops before ``entry``: a binlog entry at or past the master's position when the
    trigger began, with no snapshot unfinished. The rows a snapshot reads are data available now: its SNAPSHOT
    entries sit at the position the stream had reached when each chunk joined it, which can be past the target
    (an initial snapshot starts at the master's position, the target itself), and the binlog entries between its
    chunks carry its progress; both are read until the snapshot's last entry."""
    rc = entry.row_change
    if entry.snapshot is not None or (rc is not None and rc.event_type is EventType.SNAPSHOT):
        return False
    return at_or_past(entry.position, target)
