"""Binlog positions: where an entry is, where a consumer's cursor is, and what one batch spans.

Ordering. Positions are ordered by journal number (the numeric suffix of ``mysql-bin.000042``), then by offset
inside that file. The remaining fields only break ties, so the order is total and consistent with equality.

JSON forms. ``to_dict``/``from_dict`` use canal's field names (``journalName``, ``position``, ``serverId``, ...) so
the documents read the same as canal's; :class:`LogPosition` additionally reads and writes canal's own cursor
document (``{"@type": ..., "identity": {...}, "postion": {...}}`` -- canal's spelling) and adds ``rowsDone``, which
canal ignores. These forms are stable: changing them breaks persisted cursors.

Cursor semantics. A cursor names an *anchor* -- the transaction boundary a restart begins from -- and how many
row entries of the transaction after it were already acked:

* ``included=True``: the event at ``position`` (a transaction end or a DDL) was consumed; resume after it.
* ``included=False``: nothing at ``position`` was consumed yet; resume at it.
* ``rows_done=N``: skip the first N row entries of the transaction that begins at the resume point. This is how
  a restart inside a large transaction redelivers nothing that was acked (canal redelivers the whole transaction).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache, total_ordering
from typing import Any

import attrs

from canal.address import host_and_port
from canal.errors import PositionError

_SUFFIX = re.compile(r"(\d+)$")


@lru_cache(maxsize=1024)  # asked for every event and position compared, of a few file names at a time
def journal_number(journal_name: str | None) -> int:
    """The numeric suffix of a binlog file name (``mysql-bin.000042`` -> 42); -1 when there is none."""
    if not journal_name:
        return -1
    match = _SUFFIX.search(journal_name)
    return int(match.group(1)) if match else -1


def _opt_int(value: Any, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and value.lstrip("-").isdigit():
            return int(value)
        raise PositionError(f"position field {field!r} must be an integer, got {value!r}")
    return value


@total_ordering
@attrs.frozen(slots=True, eq=True, order=False)
class EntryPosition:
    """A point in a server's binlog: file and offset of an event, with its time, server and GTID.

    ``timestamp`` is the event's execute time in milliseconds since the epoch. ``gtid`` is the GTID set executed
    up to and including this point (MySQL ``uuid:1-5`` or MariaDB ``0-1-5`` form), or a single GTID, as the source
    provides it.
    """

    journal_name: str | None = None
    position: int | None = None
    timestamp: int | None = None
    server_id: int | None = None
    gtid: str | None = None
    included: bool = False

    @property
    def journal_number(self) -> int:
        return journal_number(self.journal_name)

    def sort_key(self) -> tuple[int, int, str, int, int, str, bool]:
        return (
            journal_number(self.journal_name),
            -1 if self.position is None else self.position,
            self.journal_name or "",
            -1 if self.timestamp is None else self.timestamp,
            -1 if self.server_id is None else self.server_id,
            self.gtid or "",
            self.included,
        )

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, EntryPosition):
            return NotImplemented
        return self.sort_key() < other.sort_key()

    def with_included(self, included: bool = True) -> EntryPosition:
        return attrs.evolve(self, included=included)

    def to_dict(self) -> dict[str, Any]:
        """canal's JSON field names; absent values are omitted."""
        out: dict[str, Any] = {}
        if self.journal_name is not None:
            out["journalName"] = self.journal_name
        if self.position is not None:
            out["position"] = self.position
        if self.timestamp is not None:
            out["timestamp"] = self.timestamp
        if self.server_id is not None:
            out["serverId"] = self.server_id
        if self.gtid:
            out["gtid"] = self.gtid
        out["included"] = self.included
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EntryPosition:
        if not isinstance(data, Mapping):
            raise PositionError(f"an entry position must be a JSON object, got {data!r}")
        journal = data.get("journalName")
        if journal is not None and not isinstance(journal, str):
            raise PositionError(f"position field 'journalName' must be a string, got {journal!r}")
        gtid = data.get("gtid")
        if gtid is not None and not isinstance(gtid, str):
            raise PositionError(f"position field 'gtid' must be a string, got {gtid!r}")
        included = data.get("included", False)
        if not isinstance(included, bool):
            raise PositionError(f"position field 'included' must be true or false, got {included!r}")
        return cls(
            journal_name=journal,
            position=_opt_int(data.get("position"), "position"),
            timestamp=_opt_int(data.get("timestamp"), "timestamp"),
            server_id=_opt_int(data.get("serverId"), "serverId"),
            gtid=gtid or None,
            included=included,
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> EntryPosition:
        return cls.from_dict(_loads(text))

    def __str__(self) -> str:
        where = f"{self.journal_name}:{self.position}" if self.journal_name else f"@{self.position}"
        extra = f" gtid={self.gtid}" if self.gtid else ""
        return f"{where}{' (consumed)' if self.included else ''}{extra}"


@attrs.frozen(slots=True)
class LogIdentity:
    """Which server a position belongs to: its address and the slave id we dumped with (-1 when unknown)."""

    source_address: str | None = None  # "host:port", "fake://name" or a directory for local files
    slave_id: int = -1

    def to_dict(self) -> dict[str, Any]:
        host, port = host_and_port(self.source_address)
        address: dict[str, Any] = {"address": host, "port": port}
        return {"slaveId": self.slave_id, "sourceAddress": address}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LogIdentity:
        if not isinstance(data, Mapping):
            raise PositionError(f"a log identity must be a JSON object, got {data!r}")
        slave_id = _opt_int(data.get("slaveId", -1), "slaveId")
        source = data.get("sourceAddress")
        address: str | None = None
        if isinstance(source, Mapping):
            host = source.get("address") or source.get("hostString")
            port = source.get("port")
            if host is not None:
                host = str(host)
                if ":" in host and "://" not in host and not host.startswith("["):
                    host = f"[{host}]"  # an IPv6 address: bracketed, so the port stays readable
                address = f"{host}:{port}" if port not in (None, 0, -1) else host
        elif isinstance(source, str):
            address = source
        return cls(source_address=address, slave_id=-1 if slave_id is None else slave_id)


_CANAL_LOG_POSITION_TYPE = "com.alibaba.otter.canal.protocol.position.LogPosition"


KeyValue = str | bytes  # one raw key column value, as the server's text protocol returns it


def _names(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


@attrs.frozen(slots=True)
class SnapshotCursor:
    """How far a snapshot running in the stream is, as of a cursor: the tables it covers (``db.table``, in the order
    they are read), the index of the table being read, and the key of that table's last row in the stream.

    ``tables`` empty: a snapshot of every captured table, not listed yet (the snapshot lists them when it starts).
    ``after`` holds the raw values of the key columns (text, or bytes for binary columns) of the last snapshot row
    at or before the cursor -- the next read starts after it; None: no row of ``tables[table]`` yet. ``rows``
    counts the snapshot rows up to the cursor (progress only). A cursor carries one only while its snapshot is
    unfinished: acking the snapshot's last entry clears it.

    ``key`` names the columns ``after`` holds values of (the chunk key, in its index's order): a resume whose table
    now has another chunk key (a DDL while the destination was down) cannot continue after those values and reads
    the table again from its first row. None: a cursor written before the key was recorded (only the count of its
    values can be checked).

    JSON: ``{"tables": [...], "table": 0, "after": [["s", "text"] | ["b", "hex"], ...] | null, "key": [names] |
    null, "rows": 0}``.
    """

    tables: tuple[str, ...] = attrs.field(converter=_names)
    table: int = 0
    after: tuple[KeyValue, ...] | None = None
    rows: int = 0
    key: tuple[str, ...] | None = None

    def __attrs_post_init__(self) -> None:
        if not self.tables and (self.table or self.after is not None):
            raise PositionError("a snapshot cursor without its tables cannot be past the start of one")
        if self.tables and not 0 <= self.table < len(self.tables):
            raise PositionError(f"snapshot cursor table index {self.table} is not one of {len(self.tables)} tables")
        if self.rows < 0:
            raise PositionError(f"snapshot cursor rows must be >= 0, got {self.rows}")
        if self.after is not None and not all(isinstance(v, str | bytes) for v in self.after):
            raise PositionError(f"snapshot cursor key values must be text or bytes, got {self.after!r}")
        if self.key is not None and self.after is not None and len(self.key) != len(self.after):
            raise PositionError(f"snapshot cursor key {self.key!r} does not name its {len(self.after)} values")

    def to_dict(self) -> dict[str, Any]:
        after = None if self.after is None else key_to_json(self.after)
        data: dict[str, Any] = {"tables": list(self.tables), "table": self.table, "after": after, "rows": self.rows}
        if self.key is not None:
            data["key"] = list(self.key)
        return data

    @classmethod
    def from_dict(cls, data: Any) -> SnapshotCursor:
        if not isinstance(data, Mapping):
            raise PositionError(f"a snapshot cursor must be a JSON object, got {data!r}")
        tables = data.get("tables")
        if not isinstance(tables, list) or not all(isinstance(t, str) for t in tables):
            raise PositionError(f"snapshot cursor field 'tables' must be a list of names, got {tables!r}")
        raw = data.get("after")
        after: tuple[KeyValue, ...] | None = None
        if raw is not None:
            if not isinstance(raw, list):
                raise PositionError(f"snapshot cursor field 'after' must be a list, got {raw!r}")
            after = key_from_json(raw)
        key = data.get("key")
        if key is not None and (not isinstance(key, list) or not all(isinstance(k, str) for k in key)):
            raise PositionError(f"snapshot cursor field 'key' must be a list of column names, got {key!r}")
        return cls(
            tables=tuple(tables),
            table=_opt_int(data.get("table", 0), "table") or 0,
            after=after,
            rows=_opt_int(data.get("rows", 0), "rows") or 0,
            key=None if key is None else tuple(key),
        )


def key_to_json(values: Sequence[KeyValue]) -> list[list[str]]:
    """Raw key values as JSON: ``["s", text]`` or ``["b", hex]`` each (the form snapshot cursors use)."""
    return [["b", v.hex()] if isinstance(v, bytes) else ["s", v] for v in values]


def key_from_json(items: Sequence[Any]) -> tuple[KeyValue, ...]:
    """The raw key values :func:`key_to_json` wrote (:class:`PositionError` for anything else)."""
    return tuple(_key_value(item) for item in items)


def _key_value(item: Any) -> KeyValue:
    if isinstance(item, list) and len(item) == 2 and isinstance(item[1], str):
        if item[0] == "s":
            return str(item[1])
        if item[0] == "b":
            try:
                return bytes.fromhex(item[1])
            except ValueError:
                pass
    raise PositionError(f"a snapshot cursor key value is ['s', text] or ['b', hex], got {item!r}")


def _snapshot_order(snapshot: SnapshotCursor | None) -> tuple[Any, ...]:
    """A tie-break between cursors at one binlog position: no snapshot first, then by progress."""
    if snapshot is None:
        return ()
    after = () if snapshot.after is None else tuple((isinstance(v, bytes), str(v)) for v in snapshot.after)
    return (snapshot.table, snapshot.rows, snapshot.tables, after)


def _opt_snapshot(data: Mapping[str, Any]) -> SnapshotCursor | None:
    raw = data.get("snapshot")
    return None if raw is None else SnapshotCursor.from_dict(raw)


@total_ordering
@attrs.frozen(slots=True, eq=True, order=False)
class LogPosition:
    """A persisted position: the server it belongs to, the anchor position, and rows already done after it.

    Used for consumer cursors and for the parser's restart point. Ordered by ``position`` then ``rows_done``.
    """

    identity: LogIdentity = attrs.field(factory=LogIdentity)
    position: EntryPosition = attrs.field(factory=EntryPosition)
    rows_done: int = attrs.field(default=0)
    snapshot: SnapshotCursor | None = None  # an unfinished snapshot in the stream (see SnapshotCursor)

    @rows_done.validator
    def _check_rows(self, _attr: attrs.Attribute[int], value: int) -> None:
        if value < 0:
            raise PositionError(f"rows_done must be >= 0, got {value}")

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, LogPosition):
            return NotImplemented
        return (
            self.position,
            self.rows_done,
            self.identity.source_address or "",
            self.identity.slave_id,
            _snapshot_order(self.snapshot),
        ) < (
            other.position,
            other.rows_done,
            other.identity.source_address or "",
            other.identity.slave_id,
            _snapshot_order(other.snapshot),
        )

    def to_dict(self) -> dict[str, Any]:
        """canal's cursor document (its field is spelled ``postion``) plus ``rowsDone`` and ``anchorIncluded``.

        ``postion.included`` is always false, as canal writes it: Java canal's store reads a cursor marked included
        as "hand out the event at the cursor again" and fails on an empty store (a NullPointerException on every
        get, measured: ``tests/test_peers_ha_mariadb.py``). Whether the anchor's event was consumed is pycanal's own
        ``anchorIncluded``; canal, reading the cursor as the last entry its client acked, resumes from the same event
        as on its own restart."""
        position = self.position.to_dict() | {"included": False}
        return {
            "@type": _CANAL_LOG_POSITION_TYPE,
            "identity": self.identity.to_dict(),
            "postion": position,
            "rowsDone": self.rows_done,
            "anchorIncluded": self.position.included,
        } | ({} if self.snapshot is None else {"snapshot": self.snapshot.to_dict()})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LogPosition:
        if not isinstance(data, Mapping):
            raise PositionError(f"a log position must be a JSON object, got {data!r}")
        raw = data.get("postion", data.get("position"))
        if raw is None:
            raise PositionError("a log position document needs a 'postion' object (canal's spelling)")
        rows = _opt_int(data.get("rowsDone", 0), "rowsDone") or 0
        identity = data.get("identity")
        position = EntryPosition.from_dict(raw)
        if "anchorIncluded" in data:  # pycanal's (a document without it: canal's, or pycanal's of before)
            included = data["anchorIncluded"]
            if not isinstance(included, bool):
                raise PositionError(f"cursor field 'anchorIncluded' must be true or false, got {included!r}")
            position = position.with_included(included)
        return cls(
            identity=LogIdentity.from_dict(identity) if identity is not None else LogIdentity(),
            position=position,
            rows_done=rows,
            snapshot=_opt_snapshot(data),
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> LogPosition:
        return cls.from_dict(_loads(text))


@attrs.frozen(slots=True)
class PositionRange:
    """What one batch spans, and what acking it means for the cursor.

    * ``start`` / ``end``: positions of the first and last entry of the batch.
    * ``ack``: the last transaction end or DDL in the batch (``included=True``), canal's "safe to persist" point;
      None when the whole batch lies inside one transaction.
    * ``cursor`` / ``rows_done``: the resume point after the batch is acked -- the anchor of the transaction the
      batch ends in and the number of its row entries handed out up to the end of the batch. Always set.
    * ``identity``: the server the batch's last entry was read from, carried with the entries from the parser's
      hand-off (so a batch stored before a master/standby switch names the old server). None for a range built
      from entries alone (the store adds it when it hands the batch out).
    * ``seqs``: the store sequences ``(first, last)`` of the batch in the process that handed it out (what acking
      or rolling back the batch frees or rewinds there). None in a mark this process did not hand out.

    The JSON form is canal's batch mark (``start``, ``end``, ``ack``, ``cursor``) plus ``rowsDone``, ``identity``
    and ``seqs``, which canal ignores.
    """

    start: EntryPosition
    end: EntryPosition
    ack: EntryPosition | None
    cursor: EntryPosition
    rows_done: int = 0
    identity: LogIdentity | None = None
    seqs: tuple[int, int] | None = None
    snapshot: SnapshotCursor | None = None  # the cursor's snapshot progress after the batch (its last entry's)

    @property
    def ack_cursor(self) -> LogPosition:
        """The consumer cursor once this batch is acked."""
        return LogPosition(self.identity or LogIdentity(), self.cursor, self.rows_done, self.snapshot)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "start": self.start.to_dict(),
            "end": self.end.to_dict(),
            "ack": None if self.ack is None else self.ack.to_dict(),
            "cursor": self.cursor.to_dict(),
            "rowsDone": self.rows_done,
        }
        if self.identity is not None:
            out["identity"] = self.identity.to_dict()
        if self.seqs is not None:
            out["seqs"] = list(self.seqs)
        if self.snapshot is not None:
            out["snapshot"] = self.snapshot.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PositionRange:
        if not isinstance(data, Mapping):
            raise PositionError(f"a position range must be a JSON object, got {data!r}")
        try:
            ack = data.get("ack")
            identity = data.get("identity")
            return cls(
                start=EntryPosition.from_dict(data["start"]),
                end=EntryPosition.from_dict(data["end"]),
                ack=None if ack is None else EntryPosition.from_dict(ack),
                cursor=EntryPosition.from_dict(data["cursor"]),
                rows_done=_opt_int(data.get("rowsDone", 0), "rowsDone") or 0,
                identity=None if identity is None else LogIdentity.from_dict(identity),
                seqs=_seqs(data.get("seqs")),
                snapshot=_opt_snapshot(data),
            )
        except KeyError as missing:
            raise PositionError(f"a position range needs field {missing}") from None

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> PositionRange:
        return cls.from_dict(_loads(text))


def _seqs(value: Any) -> tuple[int, int] | None:
    if value is None:
        return None
    if (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        and value[0] <= value[1]
    ):
        return value[0], value[1]
    raise PositionError(f"position range field 'seqs' must be [first, last] store sequences, got {value!r}")


def _loads(text: str | bytes) -> Any:
    try:
        return json.loads(text)
    except (ValueError, TypeError) as exc:
        raise PositionError(f"not a JSON position document: {exc}") from None
