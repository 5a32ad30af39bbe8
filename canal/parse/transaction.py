"""The transaction buffer: whole transactions (or ordered parts of big ones) to the sink, then the restart point.

canal's ``EventTransactionBuffer`` + ``TransactionFlushCallback``. Entries are collected until a boundary (a
transaction end or a DDL) and handed to the sink in one call; a transaction of more than ``transaction_size`` entries
is handed off in parts of at most that many entries, in order. After every successful hand-off the position a
restart must begin from is recorded in the log-position manager: the last boundary handed off, or -- after a part of
a transaction -- that transaction's anchor with the number of its row entries already handed off (``rows_done``), so a
restart resumes exactly after the last handed-off entry.

A part never ends with a TRANSACTIONBEGIN: a cursor cannot say "the BEGIN was handed off but no row", so the BEGIN is
kept for the next part. Heartbeats flush what is buffered and then go to the sink on their own; one that rests past
the last restart point between transactions (the converter's heartbeat after a binlog rotate) moves the restart point
there, so a caught-up parser follows rotates and a purge of the old files does not strand it.

Savepoints: MariaDB logs ``SAVEPOINT x`` inside a transaction, and when the part a ``ROLLBACK TO x`` undoes cannot
simply be cut from its binlog cache (a non-transactional table was changed meanwhile) it logs the undone rows
followed by ``ROLLBACK TO x``. The buffer marks where each savepoint was set and, at ``ROLLBACK TO x``, drops every
entry after x's mark (the server keeps only the non-transactional changes, and those it logs as transactions of their
own, before this one), so only what the transaction committed is handed off. Entries after a transaction's first
savepoint are held until the transaction ends (``transaction_size`` does not split a transaction past it), since
until then any of them may be undone. Dropped rows still count in ``rows_done`` (the converter counts every row it
reads), so a resume skips the same rows whether or not they were dropped.

Rolled-back transactions: a transaction cache that changed a non-transactional table is logged even when the
transaction rolls back, ended by a ``ROLLBACK`` query instead of COMMIT or XID (in ROW format the non-transactional
changes themselves are logged before it, as groups of their own). At that ROLLBACK the buffer drops everything after
the transaction's BEGIN, so the consumer gets an empty transaction. MariaDB's GTID event says ahead when a group may
end so (it lacks FL_TRANSACTIONAL): the converter asks to HOLD such a transaction whole, past ``transaction_size``
(up to :data:`HOLD_ENTRIES`).
MySQL says nothing ahead; a rolled-back transaction of which a part was already handed off is a
:class:`~canal.errors.RolledBackHandOffError` (the consumer may hold rows that never happened), never a silent
difference.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Protocol

from canal.errors import ParseError, RolledBackHandOffError
from canal.log import destination_logger
from canal.parse.events import RowsEvent
from canal.position import EntryPosition, LogIdentity, LogPosition
from canal.protocol import Entry, EntryType

HOLD_ENTRIES = 8192
"""The most entries a transaction is held whole for because MariaDB did not flag it transactional (it may end in
ROLLBACK); past that it goes out in parts of ``transaction_size``, so memory stays bounded (a bulk statement on a
MyISAM table is such a transaction, and ends in COMMIT)."""

Sink = Callable[[list[Entry], LogIdentity], None]
"""``sink(entries, origin)``: one hand-off and the server it was read from (carried with the entries into the store,
so a batch names its server however the parser has switched since)."""


class StreamMerge(Protocol):
    """Entries from outside the binlog that join the stream at transaction boundaries
    (:class:`canal.snapshot.merge.SnapshotMerge`)."""

    @property
    def active(self) -> bool:
        """Whether :meth:`tag` and :meth:`after_hand_off` have anything to do (else the parser skips them)."""
        ...

    @property
    def stream_ended(self) -> bool:
        """The stream ends here: the parser hands off nothing more and stops (a snapshot that ends the stream)."""
        ...

    def tag(self, entries: list[Entry]) -> list[Entry]:
        """The entries to hand off in place of ``entries`` (carrying what the cursor must remember)."""
        ...

    def reading(self) -> Collection[str]:
        """The tables (``db.table``) whose entries from outside the binlog have not all joined the stream yet."""
        ...

    def after_hand_off(
        self, entries: Sequence[Entry], resume: LogPosition | None, put: Callable[[list[Entry]], None]
    ) -> int:
        """Called after each hand-off with the restart point it made: at a boundary, ``put`` what joins the stream
        there (it returns once they are stored); how many entries were put."""
        ...

    def attach(self, hand_off_now: Callable[[], None]) -> None:
        """The parser's callback that hands off, from any thread, what is due at the boundary it rests at."""
        ...

    def due(self, last: Entry, resume: LogPosition | None, put: Callable[[list[Entry]], None]) -> int:
        """``put`` what is due now after ``last``, the boundary the parser rests at (the parser's hand-off lock
        held); how many entries were put."""
        ...

    def abort(self, reason: str) -> None:
        """The stream's positions changed meaning (another server): drop what waits for a position."""
        ...

    @property
    def watermark_table(self) -> tuple[str, str] | None:
        """A table whose row events place reads in the stream (DBLog's watermarks) and are never handed off."""
        ...

    def observe_marks(self, event: RowsEvent) -> None:
        """A row event of :attr:`watermark_table`, at its place in the binlog (the parser thread)."""
        ...


class LogPositionManagerLike(Protocol):
    """The parser's restart-point store (``canal.parse.log_position.LogPositionManager``)."""

    def get_latest_position(self, destination: str) -> LogPosition | None: ...

    def persist_position(self, destination: str, position: LogPosition) -> None: ...


def restart_position(entries: list[Entry], identity: LogIdentity) -> LogPosition | None:
    """Where to restart after ``entries`` were handed off: the placement of the last non-heartbeat entry."""
    for entry in reversed(entries):
        if entry.entry_type is EntryType.HEARTBEAT or entry.anchor is None:
            continue
        return LogPosition(identity=identity, position=entry.anchor, rows_done=entry.rows_done)
    return None


class TransactionBuffer:
    """Buffers converted entries and hands whole transactions (or parts) to ``sink``.

    ``sink`` blocks until the entries are stored and may raise; on a raise nothing is recorded and the buffered
    entries are kept until :meth:`clear` (the parser clears and re-reads from the last recorded position).
    """

    def __init__(
        self,
        destination: str,
        sink: Sink,
        position_manager: LogPositionManagerLike | None = None,
        *,
        transaction_size: int = 1024,
        part_bytes: int | None = None,
        identity: LogIdentity | None = None,
        on_recorded: Callable[[LogPosition], None] | None = None,
    ) -> None:
        if transaction_size < 1:
            raise ValueError(f"transaction_size must be >= 1, got {transaction_size}")
        if part_bytes is not None and part_bytes < 1:
            raise ValueError(f"part_bytes must be >= 1, got {part_bytes}")
        self.destination = destination
        self.sink = sink
        self.position_manager = position_manager
        self.transaction_size = transaction_size
        # binlog bytes after which a transaction goes out in parts, as after transaction_size entries: what the
        # parser holds decoded while the store is full stays a fraction of the store (a wide row decodes to 7-9
        # times its binlog bytes, and 1,024 of them could be more than the store itself)
        self.part_bytes = part_bytes
        self._bytes = 0  # binlog bytes of the entries buffered
        self.identity = identity or LogIdentity()
        self.on_recorded = on_recorded
        self._buffer: list[Entry] = []
        # the open transaction's savepoints, oldest first: (name casefolded, index in the buffer where it was set);
        # a HOLD is a savepoint named "" at the transaction's BEGIN (no statement names a savepoint so)
        self._savepoints: list[tuple[str, int]] = []
        self._hold_next = False  # the next BEGIN opens a transaction to hold whole (HOLD came before it)
        self.last_position: LogPosition | None = None
        self.handoffs = 0

    @property
    def byte_size(self) -> int:
        """Binlog bytes of the entries buffered."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._buffer)

    def clear(self) -> None:
        """Drop what was not handed off (after a failed dump; it will be read again)."""
        self._buffer.clear()
        self._bytes = 0
        self._savepoints.clear()
        self._hold_next = False

    def savepoint(self, verb: str, name: str, where: str) -> None:
        """A savepoint statement of the open transaction: ``verb`` SAVEPOINT, ROLLBACK TO or RELEASE (names compared
        case-insensitively, as the server does); ``where`` names the statement and its position for errors. Also
        HOLD (the next transaction goes out whole) and ROLLBACK (the open transaction ends rolled back)."""
        if verb == "HOLD":
            self._hold_next = True
            return
        if verb == "ROLLBACK":
            self._rolled_back(where)
            return
        key = name.casefold()
        marks = self._savepoints
        found = next((i for i, (k, _) in enumerate(marks) if k == key), None)
        if verb == "SAVEPOINT":
            if found is not None:  # the same name again: the old savepoint goes, a new one is set
                del marks[found]
            marks.append((key, len(self._buffer)))
            return
        if found is None:
            raise ParseError(f"{verb} {name!r} names no savepoint of the transaction being read: {where}")
        if verb == "ROLLBACK TO":
            del self._buffer[marks[found][1] :]
            self._bytes = _bytes_of(self._buffer)
            del marks[found + 1 :]  # savepoints set after it are gone; it stays
        else:  # RELEASE SAVEPOINT: it and every later one are gone
            del marks[found:]

    def add(self, entry: Entry) -> None:
        kind = entry.entry_type
        if kind is EntryType.HEARTBEAT:
            self.flush()
            if not self._buffer:
                self._rest_at(entry)  # first: what joins the stream at this rest (a snapshot chunk) is placed there
                self.sink([entry], self.identity)
            return
        buffer = self._buffer
        if kind is EntryType.TRANSACTIONBEGIN and (buffer or self._savepoints):
            self._savepoints.clear()
            if len(buffer) == 1 and buffer[0].entry_type is EntryType.TRANSACTIONBEGIN:
                # an unterminated transaction with nothing in it: its BEGIN alone would be a part no cursor can
                # follow (a cursor cannot say "the BEGIN and no row"), and it carries no change
                buffer.clear()
                self._bytes = 0
            elif buffer:
                # an unterminated transaction before it (a dump that started mid-transaction): hand it off as it is
                self._hand_off(len(buffer))
        if kind is EntryType.TRANSACTIONBEGIN and self._hold_next:
            self._hold_next = False
            self._savepoints.append(("", len(buffer)))
        buffer.append(entry)
        self._bytes += entry.header.event_length
        if entry.is_boundary:
            self._savepoints.clear()  # the transaction is over: nothing of it can be undone any more
            self.flush()
        elif len(buffer) >= self.transaction_size or (self.part_bytes is not None and self._bytes >= self.part_bytes):
            self.flush()

    def flush(self) -> None:
        """Hand off everything buffered, in parts of at most ``transaction_size``, keeping a trailing BEGIN."""
        buffer = self._buffer
        marks = self._savepoints
        if marks and marks[0][0] == "" and len(buffer) - marks[0][1] > HOLD_ENTRIES:
            # a held transaction this large (a bulk statement on a non-transactional table, most likely): its
            # memory stays bounded, and a ROLLBACK ending it after all is a RolledBackHandOffError
            del marks[0]
            destination_logger(__name__, self.destination).warning(
                "a transaction MariaDB did not flag transactional holds over %d entries: it goes out in parts, and "
                "should it end in ROLLBACK the parser stops (RolledBackHandOffError)",
                HOLD_ENTRIES,
            )
        while buffer:
            # what follows the transaction's first savepoint waits for its end (a ROLLBACK TO may undo it)
            ready = self._savepoints[0][1] if self._savepoints else len(buffer)
            if ready == 0:
                return
            count = min(ready, self.transaction_size)
            if self.part_bytes is not None and self._bytes > self.part_bytes:
                count = _within(buffer, count, self.part_bytes)
            if buffer[count - 1].entry_type is EntryType.TRANSACTIONBEGIN:
                if count > 1:
                    count -= 1
                elif ready > 1:
                    count = 2  # transaction_size 1: the BEGIN goes with the entry after it
                else:
                    return
            self._hand_off(count)

    def _rolled_back(self, where: str) -> None:
        """The open transaction ended in ROLLBACK: drop what follows its BEGIN (its END comes next)."""
        buffer = self._buffer
        begin = next(
            (i for i in range(len(buffer) - 1, -1, -1) if buffer[i].entry_type is EntryType.TRANSACTIONBEGIN), None
        )
        if begin is None:
            raise RolledBackHandOffError(
                f"the transaction ending at {where} was rolled back after part of it was handed off "
                f"(transaction_size={self.transaction_size}): the consumer may hold rows the server undid; raise "
                "transaction_size above the transaction's size and start again from before it"
            )
        dropped = len(buffer) - begin - 1
        del buffer[begin + 1 :]
        self._bytes = _bytes_of(buffer)
        self._savepoints.clear()
        if dropped:
            destination_logger(__name__, self.destination).info(
                "the transaction ending at %s was rolled back: its %d entries are left out", where, dropped
            )

    def _hand_off(self, count: int) -> None:
        part = self._buffer[:count]
        self.sink(part, self.identity)
        del self._buffer[:count]
        self._bytes -= _bytes_of(part)
        if self._savepoints:
            self._savepoints = [(name, at - count) for name, at in self._savepoints]
        self.handoffs += 1
        position = restart_position(part, self.identity)
        if position is not None:
            self._record(position)

    def _rest_at(self, heartbeat: Entry) -> None:
        """A heartbeat with nothing buffered: the stream rests at its anchor. Recorded when that lies past the last
        restart point, between transactions -- after a binlog rotate, which moves the anchor to the next file's start
        -- so a reconnect does not ask for a file the server may have purged since. Never inside a transaction or
        while a resumed dump still skips what was handed off before (the heartbeat's anchor is then the resume point
        or earlier)."""
        anchor = heartbeat.anchor
        last = self.last_position
        if anchor is None or heartbeat.rows_done or last is None:
            return
        if _file_offset(anchor) > _file_offset(last.position):
            self._record(LogPosition(identity=self.identity, position=anchor, rows_done=0))

    def _record(self, position: LogPosition) -> None:
        # in memory first: if persisting fails, the parser still knows what was handed off
        self.last_position = position
        if self.on_recorded is not None:
            self.on_recorded(position)
        if self.position_manager is not None:
            self.position_manager.persist_position(self.destination, position)


def _bytes_of(entries: Sequence[Entry]) -> int:
    return sum(entry.header.event_length for entry in entries)


def _within(buffer: Sequence[Entry], count: int, limit: int) -> int:
    """How many of the first ``count`` entries of ``buffer`` hold at most ``limit`` binlog bytes (at least one)."""
    size = 0
    for i in range(count):
        size += buffer[i].header.event_length
        if size > limit:
            return max(i, 1)
    return count


def _file_offset(position: EntryPosition) -> tuple[int, int]:
    return position.journal_number, -1 if position.position is None else position.position
