"""An ``XA COMMIT`` whose ``XA PREPARE`` lies before the stream's start: its rows, read back from the server's binlog.

MariaDB logs a prepared XA transaction as an event group of its own (a GTID event carrying the xid, the rows, then
``XA END`` + ``XA_PREPARE_LOG_EVENT``) and its ``XA COMMIT`` later as a separate group holding only the statement.
A stream that starts between the two (a snapshot taken while the transaction was prepared: its SELECT does not see
the rows, its binlog position lies after the PREPARE; or an explicit start position) would see the commit without
the rows it made visible. :class:`XAFollower` notices such a commit and :func:`prepared_rows` reads the PREPARE's
group back over a second, non-blocking dump of the files still on the server (the commit's file first, then older
ones), so the parser hands the rows out as part of the commit.

The rows handed out so are ROWDATA entries placed in the commit's transaction (its anchor, ``rows_done`` counting
them, the commit's file and offset), carrying ``XA_XID`` and ``XA_RECOVERED`` = ``file:offset`` of the PREPARE
group they come from; the commit entry carries ``XA_RECOVERED`` too. A consumer that already holds the rows of that
PREPARE (it saw the group before a restart of the parser) ignores them. A PREPARE no longer on the server is an
:class:`~canal.errors.XAPrepareLostError`, raised before anything of the commit is handed off.

A statement in the group that heals (DML logged as a statement: :mod:`canal.parse.reach` judges it with the schema
history as it is now) is in :attr:`PreparedGroup.heals`: the parser heals its tables at the commit and puts the heal's
mark on its entries (:func:`healed`); one that does not heal stops typed.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping

import attrs

from canal.errors import SourceError, XAPrepareLostError
from canal.parse.convert import ConvertOptions, EntryConverter
from canal.parse.events import HeartbeatEvent, RotateEvent, RowsEvent, TableMapEvent
from canal.parse.reach import StatementReach
from canal.parse.retry import is_purged
from canal.parse.source import BinlogSource, DumpRequest
from canal.parse.unmodeled import UnmodeledStatement
from canal.parse.xa import XA_TYPE, XA_XID, xid_key
from canal.position import EntryPosition, journal_number
from canal.protocol import Entry, EntryType

XA_RECOVERED = "XA_RECOVERED"
"""Header prop (``file:offset`` of an XA PREPARE group) of the rows an XA COMMIT made visible whose PREPARE lies
before the stream's start, and of that XA COMMIT entry."""


@attrs.frozen(slots=True)
class PreparedGroup:
    """The row entries of one XA PREPARE group and where the group starts."""

    position: str  # file:offset of the group's first event
    entries: list[Entry]
    heals: list[UnmodeledStatement] = attrs.field(factory=list)  # its statements that heal (module docstring)


class XAFollower:
    """Which XA transactions the parser read the PREPARE of since it started (kept across reconnects)."""

    def __init__(self) -> None:
        self._prepared: set[str] = set()

    def unseen_commit(self, entry: Entry) -> str | None:
        """Follow ``entry``; the xid of an XA COMMIT whose PREPARE this parser never read, else None."""
        props = entry.header.props
        kind = props.get(XA_TYPE)
        if kind is None:
            return None
        xid = props[XA_XID]
        key = xid_key(xid)
        if kind in ("XA_START", "XA_END"):  # the END too: a dump resumed inside the PREPARE group skips its BEGIN
            self._prepared.add(key)
        elif kind == "XA_COMMIT":
            if key not in self._prepared:
                return xid
            self._prepared.discard(key)
        elif kind == "XA_ROLLBACK":
            self._prepared.discard(key)
        return None

    def clear(self) -> None:
        """The parser now reads another server: what it read of the old one says nothing."""
        self._prepared.clear()


def prepared_rows(
    source: BinlogSource,
    options: ConvertOptions,
    xid: str,
    commit: EntryPosition,
    log: logging.Logger | logging.LoggerAdapter[logging.Logger],
    reach: StatementReach | None = None,
) -> PreparedGroup:
    """The rows of the last PREPARE group of ``xid`` before ``commit`` (file and offset of its XA COMMIT), read over a
    dump of its own from ``source`` (the open source of the parser's dump: a second dump of one source registers
    under its own replica id, so the server does not end the first), its statements judged with ``reach`` (the
    parser's). :class:`XAPrepareLostError` when no file on the server holds it."""
    on_server = [f for f in source.binlog_files() if journal_number(f.name) <= commit.journal_number]
    files = [f.name for f in on_server]
    key = xid_key(xid)
    # the search reads whole files (a few MB/s) while the stream waits: say why it pauses
    log.info(
        "XA COMMIT %s at %s:%s: its XA PREPARE lies before the stream's start; reading the binlog back for it "
        "(%s first, %d bytes)",
        xid,
        commit.journal_name,
        commit.position,
        commit.journal_name,
        next((f.size for f in on_server if f.name == commit.journal_name), 0),
    )
    for name in reversed(files):
        limit = commit.position if name == commit.journal_name else None
        try:
            found = _scan(source, options, name, limit, key, reach)
        except SourceError as exc:
            if not is_purged(exc):
                raise
            raise _lost(xid, commit, files, f"purged while read: {exc}") from exc
        if found is not None:
            log.info("XA COMMIT %s: %d row entries read back from %s", xid, len(found.entries), found.position)
            return found
    raise _lost(xid, commit, files, "no binlog file on the server holds it")


def _lost(xid: str, commit: EntryPosition, files: list[str], why: str) -> XAPrepareLostError:
    searched = f"{files[0]} .. {files[-1]}" if files else "none"
    return XAPrepareLostError(
        f"XA COMMIT {xid} at {commit.journal_name}:{commit.position} commits a transaction whose XA PREPARE lies "
        f"before the stream's start, and its rows cannot be read back ({why}; files searched: {searched}): the rows "
        "it made visible cannot be handed out. Start from a position before that XA PREPARE, or take a snapshot "
        "after the XA COMMIT."
    )


def _scan(
    source: BinlogSource, options: ConvertOptions, name: str, limit: int | None, key: str, reach: StatementReach | None
) -> PreparedGroup | None:
    """The last PREPARE group of the xid ``key`` in the binlog file ``name`` (before offset ``limit``).

    Two passes, because decoding row images is most of the cost of reading a binlog and the file may be large
    (every table's changes since the last rotate): the first reads the file's structure only (rows undecoded) and
    finds where that group starts; the second dumps from there and decodes the group's rows alone."""
    start: int | None = None
    begin: int | None = None
    held = _HeldStops()
    for offset, entry in _entries(source, options, name, 4, limit, held, reach, decode_rows=False):
        props = entry.header.props
        if entry.entry_type is EntryType.TRANSACTIONBEGIN:
            xid = props.get(XA_XID)
            here = xid is not None and props.get(XA_TYPE) == "XA_START" and xid_key(xid) == key
            begin = offset if here else None
        elif entry.entry_type is EntryType.TRANSACTIONEND:
            if begin is not None and props.get(XA_TYPE) == "XA_END":
                start = begin
            begin = None
    if start is None:
        return None
    group = PreparedGroup(f"{name}:{start}", [])
    for _, entry in _entries(source, options, name, start, limit, held, reach, decode_rows=True):
        if entry.entry_type is EntryType.ROWDATA:
            healing = held.check(entry)
            if healing is not None:
                group.heals.append(healing)
            group.entries.append(entry)
        elif entry.entry_type is EntryType.TRANSACTIONEND:
            return group
    raise XAPrepareLostError(  # the first pass saw the group end: the file changed between the passes
        f"XA PREPARE group at {group.position}: the binlog file ended inside it when read a second time"
    )


_SCAN_HEARTBEAT_S = 1.0  # how long a read-back dump that reached the end of the binlog waits before it stops


class _HeldStops:
    """The statement policy of a read-back: the binlog it reads lies before the stream's start, which never judged
    it, so a statement the capture cannot follow matters only inside the PREPARE group read back (:meth:`check`);
    elsewhere it is let through (its entry, never handed off, is marked)."""

    def __init__(self) -> None:
        self.found: dict[str, UnmodeledStatement] = {}

    def __call__(self, statement: UnmodeledStatement) -> dict[str, str]:
        where = f"{statement.position.journal_name}:{statement.position.position}"
        self.found[where] = statement
        return {_UNMODELED: where}

    def check(self, entry: Entry) -> UnmodeledStatement | None:
        """Of an entry of the group read back that is a statement the capture cannot follow: the statement where it
        heals, else its typed stop."""
        where = entry.header.props.get(_UNMODELED)
        if where is None:
            return None
        statement = self.found[where]
        if statement.healable and statement.heal_tables:
            return statement
        raise statement.error()


_UNMODELED = "UNMODELED_READ_BACK"  # a read-back's own mark (never handed off)


def _entries(
    source: BinlogSource,
    options: ConvertOptions,
    name: str,
    position: int,
    limit: int | None,
    held: _HeldStops,
    reach: StatementReach | None,
    *,
    decode_rows: bool,
) -> Iterator[tuple[int, Entry]]:
    """The entries of the binlog file ``name`` from ``position`` (an event start) to ``limit``, with their offsets."""
    converter = EntryConverter(options)
    converter.unmodeled = held
    if reach is not None:
        converter.reach = reach
    converter.reset(EntryPosition(name, position))
    # non-blocking: the server ends the dump at the end of its binlog. A dump seen to wait there all the same (a
    # full suite's run once did, in the commit's file) gets the server's heartbeat, sent only to a dump waiting for
    # new events: the end of what there is to read, so the scan stops instead of waiting for ever
    request = DumpRequest(
        journal_name=name,
        position=position,
        blocking=False,
        heartbeat_period_s=_SCAN_HEARTBEAT_S,
        decode_rows=decode_rows,
    )
    events = source.dump(request)
    with contextlib.closing(events):  # type: ignore[type-var]
        for event in events:
            if isinstance(event, HeartbeatEvent):
                return  # the server waits for new events: nothing more in the binlog
            if isinstance(event, RotateEvent) and not event.artificial:
                return  # the end of the file
            if event.log_file != name or (limit is not None and event.offset >= limit):
                return
            if not decode_rows and isinstance(event, (RowsEvent, TableMapEvent)):
                continue  # a source may decode them anyway (DumpRequest.decode_rows): the first pass skips them
            entry = converter.convert(event)
            if entry is not None:
                yield event.offset, entry


def healed(group: PreparedGroup, marks: Mapping[str, str]) -> PreparedGroup:
    """``group`` with the heal's ``marks`` on the entries of its statements that heal (the read-back's own mark
    off)."""
    entries = [
        attrs.evolve(e, header=attrs.evolve(e.header, props={**_without_mark(e.header.props), **marks}))
        if _UNMODELED in e.header.props
        else e
        for e in group.entries
    ]
    return attrs.evolve(group, entries=entries, heals=[])


def _without_mark(props: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in props.items() if k != _UNMODELED}


def recovered_entries(group: PreparedGroup, commit: Entry, anchor: EntryPosition, skip: int) -> list[Entry]:
    """``group``'s rows as entries of ``commit``'s transaction (resumed from ``anchor``, the boundary before it),
    without the first ``skip`` (handed off before a restart), then the commit entry, all marked ``XA_RECOVERED``."""
    header = commit.header
    out: list[Entry] = []
    for done, entry in enumerate(group.entries, start=1):
        if done <= skip:
            continue
        props = {**entry.header.props, XA_RECOVERED: group.position}
        moved = attrs.evolve(
            entry.header, log_file=header.log_file, log_offset=header.log_offset, gtid=header.gtid, props=props
        )
        out.append(attrs.evolve(entry, header=moved, anchor=anchor, rows_done=done))
    marked = attrs.evolve(header, props={**header.props, XA_RECOVERED: group.position})
    out.append(attrs.evolve(commit, header=marked))
    return out
