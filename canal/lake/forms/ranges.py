"""The binlog range a batch covers, which its change rows carry: where its reading began and where it ended.

A mirror that has applied the stream up to some point must be given the stream from that point on. Its record keeps
the end of the range of the last batch it applied (:mod:`canal.lake.identity.applied`); a batch whose range begins
after that end, in the same server's binlog, comes from a stream that skipped what lies between -- a new Spark
checkpoint started after batches the old query spooled but never committed, a destination restarted without its
cursor -- and is refused (:mod:`canal.lake.identity.admit`). The newest change applied cannot tell it: transactions
the filter leaves out move the range, not the newest change.

A range's ends are consumer cursors (:class:`Cursor`: a server's binlog position with ``included`` and the row
entries of the transaction after it already read, ``rows_done``), as an instance's ack and the ``canal`` source's
offsets name them. Its reader stamps them into the header props of the batch's entries before they become change
rows -- ``RANGE_FROM`` on the first entry that makes change rows, ``RANGE_TO`` on the last -- so they reach the mirror
in every form (JSON rows, variant rows, packed or typed batches) and are replayed byte for byte from a spool. A batch
without change rows carries none: the range of the next one begins where the last one with rows ended
(``run_batches``, and the ``canal`` source's offsets, field ``covered``), so what the filter left out between them
is covered by that one.

Props are otherwise marks the mirror acts on (an XA xid, a foreign key's actions, a heal): :func:`marked` tells the
rows whose props hold more than a range.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import attrs

from canal.lake.forms.changes import change_rows
from canal.position import LogPosition, journal_number
from canal.protocol import Entry, EntryType

__all__ = ["RANGE_FROM", "RANGE_TO", "Cursor", "batch_range", "cursor_after", "cursor_before", "marked", "stamped"]

RANGE_FROM: Final = "RANGE_FROM"
RANGE_TO: Final = "RANGE_TO"
UNMARKED_PATTERN: Final = r'"RANGE_(FROM|TO)":"[^"]*",?'
"""The range's props (as a change row's ``props`` JSON holds them): what :func:`marked` leaves out (RE2 and Java)."""


@attrs.frozen(slots=True)
class Cursor:
    """A consumer cursor in one server's binlog: resume at ``file:offset`` (``included``: the event there was
    consumed), ``rows_done`` row entries of the transaction after it already read. ``server_id`` None: unknown."""

    server_id: int | None
    file: str
    offset: int
    included: bool
    rows_done: int = 0

    @property
    def key(self) -> tuple[int, int, int, int]:
        """The binlog order of cursors of one server."""
        return (journal_number(self.file), self.offset, int(self.included), self.rows_done)

    def text(self) -> str:
        """``server:file:offset:included:rows_done`` (no quote, so a change row's props JSON holds it as it is)."""
        server = "" if self.server_id is None else str(self.server_id)
        return f"{server}:{self.file}:{self.offset}:{int(self.included)}:{self.rows_done}"

    @classmethod
    def parse(cls, text: str | None) -> Cursor | None:
        """:meth:`text` back; None for None or text of another shape."""
        if not text:
            return None
        parts = text.split(":")
        if len(parts) != 5 or not all(p.isdigit() for p in parts[2:]) or not (parts[0] == "" or parts[0].isdigit()):
            return None
        return cls(None if parts[0] == "" else int(parts[0]), parts[1], int(parts[2]), parts[3] == "1", int(parts[4]))

    @classmethod
    def of_offset(cls, offset: Any) -> Cursor | None:
        """The cursor a ``canal`` source offset (or any mapping of its fields) names; None without a position."""
        if offset is None or offset.get("file") is None or offset.get("offset") is None:
            return None
        server = offset.get("server_id")
        return cls(
            None if server is None else int(server),
            str(offset["file"]),
            int(offset["offset"]),
            bool(offset.get("included")),
            int(offset.get("rows_done") or 0),
        )

    @classmethod
    def of_saved(cls, saved: LogPosition | None) -> Cursor | None:
        """The cursor an instance's saved cursor names; None without one (or without a position)."""
        at = None if saved is None else saved.position
        if saved is None or at is None or at.journal_name is None or at.position is None:
            return None
        return cls(at.server_id, at.journal_name, at.position, at.included, saved.rows_done)

    def __str__(self) -> str:
        server = "an unknown server" if self.server_id is None else f"server_id {self.server_id}"
        return f"{self.file}:{self.offset}{' (consumed)' if self.included else ''}+{self.rows_done} rows of {server}"


def cursor_after(entry: Entry) -> Cursor | None:
    """The cursor just after ``entry`` (its anchor and row entries done); None for an entry that places none."""
    anchor = entry.anchor
    if anchor is None or anchor.journal_name is None or anchor.position is None:
        return None
    if entry.entry_type is EntryType.HEARTBEAT:
        return None
    return Cursor(anchor.server_id, anchor.journal_name, anchor.position, anchor.included, entry.rows_done)


def cursor_before(entry: Entry) -> Cursor | None:
    """The cursor just before ``entry``, where nothing names it otherwise (a destination's first batch, without a
    saved cursor): a transaction's entries' anchor and the row entries before it; a boundary that is its own anchor
    (a DDL) at its position, not consumed."""
    after = cursor_after(entry)
    if after is None:
        return None
    header = entry.header
    if after.included and (after.file, after.offset) == (header.log_file, header.log_offset):
        return attrs.evolve(after, included=False, rows_done=0)
    rows_before = entry.rows_done - 1 if entry.entry_type is EntryType.ROWDATA else entry.rows_done
    return attrs.evolve(after, rows_done=max(rows_before, 0))


def stamped(entries: Sequence[Entry], start: Cursor | None, end: Cursor | None) -> list[Entry]:
    """``entries`` with the range's ends in the header props of the first and the last of them that make change
    rows (module docstring): ``start`` on the first (None: none), ``end`` on the last (None: none)."""
    out = list(entries)
    rows = [i for i, entry in enumerate(out) if change_rows(entry)]
    if not rows:
        return out
    for index, key, cursor in ((rows[0], RANGE_FROM, start), (rows[-1], RANGE_TO, end)):
        if cursor is not None:
            entry = out[index]
            header = attrs.evolve(entry.header, props={**entry.header.props, key: cursor.text()})
            out[index] = attrs.evolve(entry, header=header)
    return out


def marked(props: Any) -> Any:
    """Of a ``props`` column (Arrow strings): whether each row's props hold a mark beyond a range (a boolean array,
    False for null) -- what the mirror acts on."""
    import pyarrow.compute as pc

    props = _strings(props)
    if props.null_count == len(props):
        return pc.is_valid(props)
    rest = pc.replace_substring_regex(props, UNMARKED_PATTERN, "")
    return pc.fill_null(pc.match_substring(rest, '":'), False)


def _strings(column: Any) -> Any:
    """A column as one plain Arrow string array (chunks joined, a dictionary decoded)."""
    import pyarrow as pa

    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    return column.cast(pa.string())


def batch_range(table: Any) -> tuple[Cursor | None, Cursor | None]:
    """The range a batch's change rows (or a typed batch's metadata) carry: ``RANGE_FROM`` of the first row (by
    ``seq``) holding one, ``RANGE_TO`` of the last; (None, None) for a batch that carries none."""
    import json

    import pyarrow as pa
    import pyarrow.compute as pc

    if "props" not in table.column_names or "seq" not in table.column_names or not table.num_rows:
        return None, None
    props = _strings(table.column("props"))
    seq = table.column("seq")
    seq = (seq.combine_chunks() if isinstance(seq, pa.ChunkedArray) else seq).cast(pa.int64())

    def end_of(key: str, side: str) -> Cursor | None:
        found = pc.fill_null(pc.match_substring(props, f'"{key}":'), False)
        if not pc.any(found).as_py():
            return None
        rows = pc.indices_nonzero(found)
        seqs = seq.take(rows)
        at = rows[pc.index(seqs, pc.min_max(seqs)[side]).as_py()].as_py()  # the first / last such row by seq
        return Cursor.parse(json.loads(props[at].as_py()).get(key))

    return end_of(RANGE_FROM, "min"), end_of(RANGE_TO, "max")
