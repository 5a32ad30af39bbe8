"""Entry factories and a reference model of batch cutting / position ranges, shared by the store tests."""

from __future__ import annotations

from collections.abc import Sequence

from canal.position import EntryPosition, PositionRange
from canal.protocol import Entry, EntryType, EventType, Header, RowChange


class EntryMaker:
    """Makes distinct entries at increasing binlog offsets."""

    def __init__(self, journal: str = "mysql-bin.000001") -> None:
        self.journal = journal
        self.offset = 4

    def make(
        self,
        kind: str,
        length: int = 100,
        anchor: EntryPosition | None = None,
        rows_done: int = 0,
    ) -> Entry:
        """kind: B(egin), R(ow), E(nd), D(DL), H(eartbeat)."""
        offset = self.offset
        self.offset += max(length, 1)
        if kind == "B":
            return Entry(
                Header(self.journal, offset, 1, offset, event_length=length),
                EntryType.TRANSACTIONBEGIN,
                anchor=anchor,
                rows_done=rows_done,
            )
        if kind == "R":
            rc = RowChange(EventType.INSERT)
            return Entry(
                Header(self.journal, offset, 1, offset, "s", "t", EventType.INSERT, length),
                EntryType.ROWDATA,
                rc,
                anchor=anchor,
                rows_done=rows_done,
            )
        if kind == "E":
            return Entry(
                Header(self.journal, offset, 1, offset, event_length=length),
                EntryType.TRANSACTIONEND,
                xid=offset,
                anchor=anchor,
                rows_done=rows_done,
            )
        if kind == "D":
            rc = RowChange(EventType.ALTER, is_ddl=True, sql="ALTER TABLE s.t ADD c INT", ddl_schema="s")
            return Entry(
                Header(self.journal, offset, 1, offset, "s", "t", EventType.ALTER, length),
                EntryType.ROWDATA,
                rc,
                anchor=anchor,
                rows_done=rows_done,
            )
        if kind == "H":
            return Entry(
                Header(self.journal, offset, 1, offset, event_length=length),
                EntryType.HEARTBEAT,
                anchor=anchor,
                rows_done=rows_done,
            )
        raise ValueError(kind)

    def transaction(self, rows: int, length: int = 100) -> list[Entry]:
        """BEGIN, ``rows`` ROWDATA entries, END -- anchored like the parser anchors them."""
        anchor = EntryPosition(self.journal, self.offset, included=False)
        out = [self.make("B", length, anchor, 0)]
        out.extend(self.make("R", length, anchor, i + 1) for i in range(rows))
        end = self.make("E", length, anchor, rows)
        out.append(end)
        return out

    def stream(self, count: int, length: int = 100) -> list[Entry]:
        """At least ``count`` entries of transactions with 1-3 rows."""
        out: list[Entry] = []
        i = 0
        while len(out) < count:
            out.extend(self.transaction(1 + i % 3, length))
            i += 1
        return out[:count]


def is_ddl(entry: Entry) -> bool:
    # a DDL entry, whether or not it ends a transaction (CREATE TABLE ... SELECT is a DDL inside one): ddl_isolation
    # hands each out alone
    return entry.row_change is not None and entry.row_change.is_ddl


def model_cut(unread: Sequence[Entry], batch_size: int, memsize: bool, unit: int, ddl_isolation: bool) -> int:
    """How many of ``unread`` entries one get hands out (the plain, loop-per-entry reading of the rules)."""
    if not unread:
        return 0
    if memsize:
        budget = batch_size * unit
        n = 0
        total = 0
        for entry in unread:
            if total + entry.byte_size > budget:
                break
            total += entry.byte_size
            n += 1
        n = max(n, 1)
    else:
        n = min(batch_size, len(unread))
    if ddl_isolation:
        for i, entry in enumerate(unread[:n]):
            if is_ddl(entry):
                n = i if i > 0 else 1
                break
    if unread[n - 1].entry_type is EntryType.TRANSACTIONBEGIN:
        # a batch never ends with a BEGIN that has an entry after it: the cut moves before it, or after the next
        if n > 1:
            n -= 1
        elif len(unread) > 1:
            n = 2
    return n


def model_range(batch: Sequence[Entry]) -> PositionRange:
    """The rules of Events.range, written the obvious way."""
    last = batch[-1]
    ack = None
    for entry in batch:
        if entry.is_boundary:
            ack = entry.position.with_included(True)
    cursor = last.anchor if last.anchor is not None else last.position.with_included(last.is_boundary)
    return PositionRange(batch[0].position, last.position, ack, cursor, last.rows_done)
