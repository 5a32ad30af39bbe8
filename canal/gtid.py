"""GTIDs, one module: MySQL GTID sets (``uuid:1-5:7``, MySQL 8.3 tags ``uuid:tag:1-3``) and MariaDB GTID positions
(``domain-server-seq``) as text, the binary set of COM_BINLOG_DUMP_GTID and previous-GTIDs events, and the mutable
executed set the converter keeps (:class:`GtidSet`). The parser, the converter and the fake server all read GTIDs here.
"""

from __future__ import annotations

import re
import struct
import uuid
from collections.abc import Mapping, Sequence

import attrs

from canal.errors import ParseError

_U64 = struct.Struct("<Q")

GTID_TAG = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,31}")  # MySQL 8.3+ tagged GTIDs: uuid:tag:gno
_GTID_FORMAT_TAGGED = 1
_INTERVAL = re.compile(r"(\d+)(?:-(\d+))?")


def parse_mysql_gtid_set(gtid_set: str) -> list[tuple[uuid.UUID, str, list[tuple[int, int]]]]:
    """A MySQL GTID set's text (``uuid:1-5:7,uuid2:3``, tags ``uuid:1-5:tag:1-3``) as (uuid, tag, [(first, last)])
    entries, tags lowercased. ``ValueError`` for malformed text."""
    entries: list[tuple[uuid.UUID, str, list[tuple[int, int]]]] = []
    for part in gtid_set.replace("\n", "").split(","):
        part = part.strip()
        if not part:
            continue
        sid_text, *tokens = part.split(":")
        sid = uuid.UUID(sid_text.strip())
        tag = ""
        intervals: list[tuple[int, int]] = []
        for token in (t.strip() for t in tokens):
            match = _INTERVAL.fullmatch(token)
            if match is not None:
                first = int(match.group(1))
                last = int(match.group(2) or first)
                if not 1 <= first <= last < 1 << 63:
                    raise ValueError(f"bad GTID interval {token!r} in {part!r}")
                intervals.append((first, last))
            elif GTID_TAG.fullmatch(token):
                if intervals or tag:
                    entries.append((sid, tag, intervals))
                tag, intervals = token.lower(), []
            else:
                raise ValueError(f"malformed GTID set element {part!r}")
        entries.append((sid, tag, intervals))
    return entries


def format_mysql_gtid_set(gtids: Mapping[str, Sequence[tuple[int, int]]]) -> str:
    """``{uuid: [(first, last), ...]}`` as MySQL writes an untagged set (uuids in order, single GTIDs as ``n``)."""
    parts = []
    for sid in sorted(gtids):
        if gtids[sid]:
            spans = ":".join(f"{a}-{b}" if b != a else str(a) for a, b in gtids[sid])
            parts.append(f"{sid}:{spans}")
    return ",".join(parts)


def parse_mariadb_gtid_pos(text: str) -> dict[int, tuple[int, int]]:
    """``0-1-5,1-2-9`` -> {0: (1, 5), 1: (2, 9)}: per replication domain, the server id and sequence number of its
    last GTID (the highest sequence number when a domain repeats). ``ValueError`` for malformed text."""
    out: dict[int, tuple[int, int]] = {}
    for part in text.replace("\n", "").split(","):
        part = part.strip()
        if not part:
            continue
        pieces = part.split("-")
        if len(pieces) != 3 or not all(p.strip().isdigit() for p in pieces):
            raise ValueError(f"malformed GTID position element {part!r}: expected domain-server-seq")
        domain, server, seq = (int(p) for p in pieces)
        current = out.get(domain)
        if current is None or seq >= current[1]:
            out[domain] = (server, seq)
    return out


def format_mariadb_gtid_pos(state: Mapping[int, tuple[int, int]]) -> str:
    return ",".join(f"{d}-{s}-{q}" for d, (s, q) in sorted(state.items()))


def encode_mysql_gtid_set(gtid_set: str) -> bytes:
    """A MySQL GTID set in the binary form of COM_BINLOG_DUMP_GTID / previous-GTIDs: classic, or MySQL 8.3's tagged
    format when any GTID has a tag (the sid count framed by format bytes, a tag before each entry's intervals)."""
    entries = parse_mysql_gtid_set(gtid_set)
    tagged = any(tag for _, tag, _ in entries)
    # tagged: the count between two format bytes, so an old reader sees an impossible count rather than a wrong one
    head = (_GTID_FORMAT_TAGGED << 56 | len(entries) << 8 | _GTID_FORMAT_TAGGED) if tagged else len(entries)
    out = [_U64.pack(head)]
    for sid, tag, intervals in entries:
        out.append(sid.bytes)
        if tagged:
            out.append(bytes([len(tag) << 1]) + tag.encode("ascii"))
        out.append(_U64.pack(len(intervals)))
        for first, last in intervals:
            out.append(struct.pack("<qq", first, last + 1))
    return b"".join(out)


def decode_mysql_gtid_set(buf: bytes, pos: int = 0, end: int | None = None) -> str:
    """The binary GTID set of a previous-GTIDs event (classic or tagged) as text. ``ValueError`` when the counts do
    not fit the bytes."""
    end = len(buf) if end is None else end
    if end - pos < 8:
        raise ValueError("GTID set shorter than its count")
    (head,) = _U64.unpack_from(buf, pos)
    pos += 8
    fmt = head >> 56
    if fmt == _GTID_FORMAT_TAGGED:
        if head & 0xFF != _GTID_FORMAT_TAGGED:
            raise ValueError(f"malformed tagged GTID set header 0x{head:016x}")
        n_sids = (head >> 8) & ((1 << 48) - 1)
    elif fmt == 0:
        n_sids = head
    else:
        raise ValueError(f"unknown GTID set format {fmt}")
    if n_sids > (end - pos) // 24:
        raise ValueError(f"GTID set of {n_sids} sources in {end - pos} bytes")
    text: list[str] = []  # "uuid:ranges" elements; a tagged entry of the same uuid continues the element
    last_sid = None
    for _ in range(n_sids):
        if end - pos < 16:
            raise ValueError("GTID set entry cut short")
        sid = str(uuid.UUID(bytes=bytes(buf[pos : pos + 16])))
        pos += 16
        tag = ""
        if fmt == _GTID_FORMAT_TAGGED:
            if pos >= end or buf[pos] & 1 or buf[pos] >> 1 > 32:
                raise ValueError("malformed GTID tag length")
            n = buf[pos] >> 1
            tag = bytes(buf[pos + 1 : pos + 1 + n]).decode("ascii")
            if n and not GTID_TAG.fullmatch(tag):
                raise ValueError(f"malformed GTID tag {tag!r}")
            pos += 1 + n
        if end - pos < 8:
            raise ValueError("GTID set entry cut short")
        (n_int,) = _U64.unpack_from(buf, pos)
        pos += 8
        if n_int > (end - pos) // 16:
            raise ValueError(f"GTID set entry of {n_int} intervals in {end - pos} bytes")
        ranges = []
        for _ in range(n_int):
            a, b = struct.unpack_from("<qq", buf, pos)
            pos += 16
            if not 0 < a < b:
                raise ValueError(f"bad GTID interval [{a}, {b})")
            ranges.append(str(a) if b == a + 1 else f"{a}-{b - 1}")
        piece = ":".join(([tag] if tag else []) + ranges)
        if sid == last_sid and text:
            text[-1] += ":" + piece if piece else ""
        else:
            text.append(f"{sid}:{piece}" if piece else sid)
            last_sid = sid
    if pos != end:
        raise ValueError(f"{end - pos} bytes after the GTID set")
    return ",".join(text)


_GTID_INTERVAL_ANCHORED = re.compile(r"^(\d+)(?:-(\d+))?$")
_MYSQL_GTID = re.compile(r"([^:,\s]+):(?:([A-Za-z_][A-Za-z0-9_]{0,31}):)?([0-9]+)")


@attrs.frozen(slots=True)
class GtidStep:
    """One GTID as the source that numbers it and its number: MySQL ``(uuid, tag)`` and the gno; MariaDB ``(domain,
    server)`` and the sequence number. GTIDs of one source numbered one after another are a span a
    :class:`GtidSet` takes at once (:meth:`GtidSet.add_span`)."""

    source: tuple[str, str] | tuple[int, int]
    number: int
    mariadb: bool  # its flavour, as GtidSet.add reads it from the text

    def follows(self, previous: GtidStep) -> bool:
        """Whether this GTID is the next one of ``previous``'s source."""
        return (
            self.number == previous.number + 1 and self.source == previous.source and self.mariadb == previous.mariadb
        )


def gtid_step(gtid: str) -> GtidStep | None:
    """``gtid`` as a :class:`GtidStep`, when written plainly (``uuid:n``, ``uuid:tag:n``, ``domain-server-seq``);
    None for any other text, which :meth:`GtidSet.add` then reads (and refuses, if malformed)."""
    parts = gtid.split("-")  # MariaDB's domain-server-seq; split, not a regex: a shared reader reads every GTID
    if len(parts) == 3 and all(p.isascii() and p.isdigit() for p in parts):
        return GtidStep((int(parts[0]), int(parts[1])), int(parts[2]), True)
    match = _MYSQL_GTID.fullmatch(gtid)
    if match is not None:
        return GtidStep((match.group(1).lower(), (match.group(2) or "").lower()), int(match.group(3)), False)
    return None


class GtidSet:
    """A mutable executed-GTID set: MySQL ``uuid:1-5:7,uuid2:1-3`` (MySQL 8.3 tags too: ``uuid:1-5:tag:1-3``) or
    MariaDB ``domain-server-seq,...``."""

    __slots__ = ("_mariadb", "_mariadb_domains", "_mysql")

    def __init__(self, text: str | None = None, *, mariadb: bool | None = None) -> None:
        self._mysql: dict[tuple[str, str], list[list[int]]] = {}  # (uuid, tag) -> intervals
        self._mariadb_domains: dict[int, tuple[int, int]] = {}
        text = (text or "").strip()
        if mariadb is None:
            mariadb = bool(text) and ":" not in text
        self._mariadb = mariadb
        if text:
            for part in text.replace("\n", "").split(","):
                part = part.strip()
                if part:
                    self._add_text(part)

    @property
    def is_mariadb(self) -> bool:
        return self._mariadb

    def _add_text(self, part: str) -> None:
        if self._mariadb:
            try:
                ((domain, (server, seq)),) = parse_mariadb_gtid_pos(part).items()
            except ValueError as exc:
                raise ParseError(str(exc)) from None
            self._set_mariadb(domain, server, seq)
            return
        sid, _, rest = part.partition(":")
        sid = sid.strip().lower()
        tag = ""
        for token in rest.split(":"):
            token = token.strip()
            match = _GTID_INTERVAL_ANCHORED.match(token)
            if match is not None:
                lo = int(match.group(1))
                hi = int(match.group(2) or lo)
                self._add_interval((sid, tag), lo, hi)
            elif GTID_TAG.fullmatch(token):
                tag = token.lower()
            else:
                raise ParseError(f"malformed GTID set element {part!r}")

    def _set_mariadb(self, domain: int, server: int, seq: int) -> None:
        current = self._mariadb_domains.get(domain)
        if current is None or seq >= current[1]:
            self._mariadb_domains[domain] = (server, seq)

    def _add_interval(self, source: tuple[str, str], lo: int, hi: int) -> None:
        intervals = self._mysql.setdefault(source, [])
        if intervals and intervals[-1][1] + 1 >= lo >= intervals[-1][0]:
            # the common case: the next transaction of the newest interval
            intervals[-1][1] = max(intervals[-1][1], hi)
            return
        intervals.append([lo, hi])
        intervals.sort()
        merged: list[list[int]] = []
        for a, b in intervals:
            if merged and a <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        self._mysql[source] = merged

    def add(self, gtid: str) -> None:
        """Add one executed GTID (``uuid:n``, ``uuid:tag:n`` or ``domain-server-seq``)."""
        if not self._mysql and not self._mariadb_domains:
            self._mariadb = ":" not in gtid
        self._add_text(gtid)

    def add_span(self, first: int, last: GtidStep) -> bool:
        """Add the GTIDs of ``last``'s source numbered ``first`` to ``last.number``, in one step: the set ends as
        adding each in turn leaves it. False (nothing added) when the set is of the other flavour, where
        :meth:`add` refuses each."""
        if not self._mysql and not self._mariadb_domains:
            self._mariadb = last.mariadb
        if self._mariadb != last.mariadb:
            return False
        if last.mariadb:
            domain, server = last.source
            assert isinstance(domain, int) and isinstance(server, int)
            self._set_mariadb(domain, server, last.number)  # a domain keeps its highest sequence number
        else:
            sid, tag = last.source
            assert isinstance(sid, str) and isinstance(tag, str)
            self._add_interval((sid, tag), first, last.number)
        return True

    def update(self, text: str) -> None:
        """Add every GTID of the set (or MariaDB position) ``text``, written in this set's flavour."""
        for part in text.replace("\n", "").split(","):
            part = part.strip()
            if part:
                self._add_text(part)

    def contains(self, gtid: str) -> bool:
        """Whether the one GTID ``gtid`` (``uuid:n``, ``uuid:tag:n`` or ``domain-server-seq``) is in the set: for
        MySQL, one of its intervals holds it; for MariaDB, its domain's position is at or past its sequence number
        (MariaDB's replication order: a domain's sequence numbers increase across the servers that take it over)."""
        text = gtid.strip()
        if self._mariadb:
            try:
                ((domain, (_server, seq)),) = parse_mariadb_gtid_pos(text).items()
            except ValueError as exc:
                raise ParseError(str(exc)) from None
            held = self._mariadb_domains.get(domain)
            return held is not None and seq <= held[1]
        sid, _, rest = text.partition(":")
        *tags, number = rest.split(":") if rest else [""]
        if not number.isdigit() or len(tags) > 1:
            raise ParseError(f"malformed GTID {gtid!r}: expected uuid:n or uuid:tag:n")
        n = int(number)
        intervals = self._mysql.get((sid.strip().lower(), tags[0].strip().lower() if tags else ""), [])
        return any(lo <= n <= hi for lo, hi in intervals)

    def holds(self, step: GtidStep) -> bool:
        """:meth:`contains` for a GTID read already (:func:`gtid_step`): no text read again."""
        if step.mariadb != self._mariadb and (self._mysql or self._mariadb_domains):
            raise ParseError(f"a {'MariaDB' if step.mariadb else 'MySQL'} GTID against a set of the other flavour")
        if step.mariadb:
            domain = step.source[0]
            assert isinstance(domain, int)
            held = self._mariadb_domains.get(domain)
            return held is not None and step.number <= held[1]
        sid, tag = step.source
        assert isinstance(sid, str) and isinstance(tag, str)
        intervals = self._mysql.get((sid, tag))
        return intervals is not None and any(lo <= step.number <= hi for lo, hi in intervals)

    def copy(self) -> GtidSet:
        other = GtidSet(mariadb=self._mariadb)
        other._mysql = {k: [list(i) for i in v] for k, v in self._mysql.items()}
        other._mariadb_domains = dict(self._mariadb_domains)
        return other

    def __str__(self) -> str:
        if self._mariadb:
            return format_mariadb_gtid_pos(self._mariadb_domains)
        parts: dict[str, list[str]] = {}  # uuid -> its untagged spans, then each tag and its spans
        for sid, tag in sorted(self._mysql):
            spans = ":".join(str(a) if a == b else f"{a}-{b}" for a, b in self._mysql[(sid, tag)])
            parts.setdefault(sid, []).append(f"{tag}:{spans}" if tag else spans)
        return ",".join(f"{sid}:{':'.join(pieces)}" for sid, pieces in parts.items())

    def __bool__(self) -> bool:
        return bool(self._mysql or self._mariadb_domains)
