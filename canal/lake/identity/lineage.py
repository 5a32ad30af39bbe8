"""Which rows of a batch a mirror applied already: decided by the source lineage, never by a batch's id.

A position (binlog file, offset, row of the event) means something only in the binlog of one server -- the one the
destination reads, which each change row names (``log_server_id``). A replica promoted after a failover has its own
binlog, whose numbering may be far behind the old primary's, and a new Spark checkpoint or a ``run_batches`` journal
numbers its batches anew. So a row of a batch counts as applied when:

* it comes from the server whose binlog the mirror's newest change came from, at or before that change's position
  (file number, offset, row index): the binlog of one server is one order; or
* it comes from another server and its transaction's GTID is among those the mirror applied -- or the batch applies
  before it (a switch of servers inside one batch) -- (MariaDB: its domain's position is at or past its sequence
  number; MySQL: the set holds it), unless that transaction is the newest one applied and was a DML one, which may
  have been applied in part (a batch can end inside a transaction): it is applied again whole, in order, which
  leaves its rows as they were.

A row from another server without a GTID (or a mirror that has recorded none) has no provable relation to what the
mirror applied: the batch stops with :class:`~canal.lake.types.MirrorLineageError`, naming both lineages, before
anything of it is written -- never skipped. So does a batch of another destination than the one the app id mirrors
(two destinations mirrored into one root under one app id). SNAPSHOT rows (no position of their own: they sit at
the boundary they follow) are never skipped by position; only the last batch again, known by its fingerprint, is a
replay (:mod:`canal.lake.identity.applied`). Rows an XA COMMIT brings read back from a PREPARE before the stream's start
sit at the commit's position, every one of them: they count as applied once the commit row is, and move nothing.

Rows without ``log_server_id`` (change rows made before it was, or by hand) and a record from before lineages were
recorded are compared by position as before: taken to come from the server the mirror followed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from canal.gtid import GtidSet
from canal.lake.identity import forks
from canal.lake.identity.applied import Applied
from canal.lake.types import MirrorLineageError
from canal.parse.xa_lookback import XA_RECOVERED
from canal.position import journal_number

SNAPSHOT = "SNAPSHOT"
DML_TYPES = frozenset({"INSERT", "UPDATE", "DELETE"})
FINGERPRINT_FIELDS = ("log_server_id", "log_file", "log_offset", "row_index", "gtid", "type", "schema", "table")
"""The fields of a batch's first and last rows (by ``seq``) its fingerprint holds, with its row count."""


def fingerprint_of(count: int, first: Sequence[Any] | None, last: Sequence[Any] | None) -> str:
    """The fingerprint of a batch of ``count`` rows whose first and last rows (by ``seq``) hold ``first`` and
    ``last`` (:data:`FINGERPRINT_FIELDS`' values): the same batch replayed has the same one (what the Spark side
    computes with an aggregation, :mod:`canal.spark.mirror_tasks`, and :func:`fingerprint` from Arrow)."""
    text = json.dumps([count, list(first or ()), list(last or ())], separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _column(table: Any, name: str, type_: Any) -> Any:
    """Column ``name`` of ``table`` as a plain array of ``type_`` (nulls where the table has no such column)."""
    import pyarrow as pa

    if name not in table.column_names:
        return pa.nulls(table.num_rows, type_)
    column = table.column(name)
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    return column.cast(type_)


def _field_types() -> dict[str, Any]:
    import pyarrow as pa

    return {
        "log_server_id": pa.int64(),
        "log_file": pa.string(),
        "log_offset": pa.int64(),
        "row_index": pa.int64(),
        "gtid": pa.string(),
        "type": pa.string(),
        "schema": pa.string(),
        "table": pa.string(),
    }


def fingerprint(table: Any) -> str | None:
    """The fingerprint of a batch of change rows (or a typed batch's metadata); None without ``seq``."""
    import pyarrow.compute as pc

    if "seq" not in table.column_names or table.num_rows == 0:
        return fingerprint_of(table.num_rows, None, None) if "seq" in table.column_names else None
    seq = _column(table, "seq", _field_types()["log_offset"])
    bounds = pc.min_max(seq)
    ends = table.take([pc.index(seq, bounds[side]).as_py() for side in ("min", "max")])  # two rows, then typed
    fields = {name: _column(ends, name, type_) for name, type_ in _field_types().items()}
    first, last = ([fields[name][i].as_py() for name in FINGERPRINT_FIELDS] for i in (0, 1))
    return fingerprint_of(table.num_rows, first, last)


@attrs.frozen(slots=True)
class Newest:
    """The newest change a batch applies (by ``seq``): where it is, its transaction, its kind."""

    seq: int
    server_id: int | None
    log_file: str | None
    log_offset: int
    row_index: int
    gtid: str | None
    type: str


@attrs.frozen(slots=True)
class Advance:
    """What a batch's rows applied add to the record: its newest change, the GTIDs of its transactions (as the
    elements of a GTID set's text: a MariaDB domain's position, a MySQL source's intervals), its destination. Several
    tasks' advances (a batch written a table group a task) merge into the batch's."""

    newest: Newest | None = None
    gtids: tuple[str, ...] = ()
    destination: str | None = None
    # MariaDB: the numbers applied per domain and writing server (canal.lake.identity.forks)
    origins: tuple[str, ...] = ()

    def merge(self, other: Advance) -> Advance:
        newest = max((n for n in (self.newest, other.newest) if n is not None), key=lambda n: n.seq, default=None)
        origins = forks.merged(None, (*self.origins, *other.origins))
        return Advance(
            newest,
            tuple(sorted({*self.gtids, *other.gtids})),
            self.destination or other.destination,
            tuple(origins.split(",")) if origins else (),
        )

    def to_json(self) -> str:
        return json.dumps(attrs.asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Advance:
        data = json.loads(text)
        newest = data.get("newest")
        found = None if newest is None else Newest(**newest)
        return cls(found, tuple(data.get("gtids") or ()), data.get("destination"), tuple(data.get("origins") or ()))

    def recorded(
        self, applied: Applied | None, batch_id: int, fingerprint: str | None, number: int, through: str | None = None
    ) -> Applied:
        """The record once the batch ``batch_id`` (``fingerprint``, numbered ``number``) is applied: the newest
        change and the GTIDs it adds to ``applied`` (its lineage moving to the newest change's server), and the end
        of its binlog range (``through``: :func:`canal.lake.identity.admit.range_end`)."""
        before = applied if applied is not None else Applied(None, None, -1)
        if through is not None:
            before = attrs.evolve(before, through=through)
        gtids = GtidSet(before.gtids) if before.gtids else None
        if self.gtids and gtids is None:
            gtids = GtidSet(",".join(self.gtids))
        elif self.gtids and gtids is not None:
            gtids.update(",".join(self.gtids))
        newest = self.newest
        if newest is None:  # nothing new applied (every row was): only the batch finished moves
            return attrs.evolve(
                before, batch=batch_id, fingerprint=fingerprint, pending=None, legacy=False,
                destination=before.destination or self.destination,
            )  # fmt: skip
        origins = forks.merged(before.origins, self.origins)
        has_position = newest.log_file is not None
        return Applied(
            batch=batch_id,
            fingerprint=fingerprint,
            number=number,
            destination=before.destination or self.destination,
            server_id=newest.server_id if newest.server_id is not None else before.server_id,
            log_file=newest.log_file if has_position else before.log_file,
            log_offset=newest.log_offset if has_position else before.log_offset,
            row_index=newest.row_index if has_position else before.row_index,
            gtids=None if gtids is None else str(gtids),
            open_gtid=newest.gtid if newest.type in DML_TYPES else None,
            origins=origins,
            through=before.through,
        )


@attrs.frozen(slots=True)
class Followed:
    """The rows of a batch not applied yet (``keep``: a boolean mask, None for all) and what they add."""

    keep: Any
    advance: Advance
    kept: int  # rows kept


def gtid_elements(gtids: Any) -> tuple[str, ...]:
    """Distinct GTIDs (a pyarrow string array) as the elements of the set they make, computed a column at a time (a
    batch may hold tens of thousands of transactions): per MariaDB domain its highest sequence number
    (``domain-server-seq``), per MySQL source (``uuid`` or ``uuid:tag``) its intervals (``uuid:1-5:7``)."""
    import numpy as np
    import pyarrow.compute as pc

    if not len(gtids):
        return ()
    if not pc.any(pc.match_substring(gtids, ":")).as_py():  # MariaDB: domain-server-seq
        parts = pc.split_pattern(gtids, "-")
        domain, server, seq = (pc.list_element(parts, i).cast("int64").to_numpy() for i in range(3))
        out = []
        for d in np.unique(domain):  # a domain's highest sequence number, and its server
            at = np.flatnonzero(domain == d)
            top = at[np.argmax(seq[at])]
            out.append(f"{d}-{server[top]}-{seq[top]}")
        return tuple(out)
    found = pc.extract_regex(gtids, r"^(?P<source>.+):(?P<n>\d+)$")
    sources, numbers = found.field("source"), found.field("n").cast("int64").to_numpy()
    out = []
    for source in sorted(pc.unique(sources).to_pylist()):
        ns = np.unique(numbers[pc.equal(sources, source).to_numpy(zero_copy_only=False)])
        breaks = np.flatnonzero(np.diff(ns) != 1)
        starts, ends = ns[np.r_[0, breaks + 1]], ns[np.r_[breaks, len(ns) - 1]]
        spans = ":".join(str(a) if a == b else f"{a}-{b}" for a, b in zip(starts, ends, strict=True))
        out.append(f"{source}:{spans}")
    return tuple(out)


def destinations(table: Any) -> list[str]:
    """The distinct destinations a batch's rows name."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return sorted(str(v) for v in pc.unique(_column(table, "destination", pa.string())).drop_null().to_pylist())


def check_destination(found: Iterable[str], applied: Applied | None, root: str, app_id: str) -> None:
    """:class:`MirrorLineageError` when a batch names another destination than the one ``app_id`` mirrors, or
    several."""
    names = sorted(set(found))
    recorded = None if applied is None else applied.destination
    others = [name for name in names if name != recorded] if recorded is not None else names[1:]
    if not others:
        return
    mirrored = recorded if recorded is not None else names[0]
    raise MirrorLineageError(
        f"mirror {root} (app id {app_id!r}) mirrors destination {mirrored!r}, and this batch holds changes of "
        f"{', '.join(repr(n) for n in others)}: two destinations under one app id would take each other's changes "
        "for replays. Nothing of the batch was written. Give each destination mirrored into one root its own app_id."
    )


def unprovable_error(
    applied: Applied, server_id: int, log_file: str | None, log_offset: int, gtid: str | None, *, root: str, app_id: str
) -> MirrorLineageError:
    """The error for a change of ``server_id`` (at ``log_file:log_offset``, ``gtid``) whose relation to what the
    mirror ``applied`` nothing proves."""
    return MirrorLineageError(
        f"mirror {root} (app id {app_id!r}) applied the changes up to {applied.lineage}; this batch holds changes "
        f"of server_id {server_id} (from {log_file}:{log_offset}{'' if gtid is None else ', GTID ' + gtid}) with no "
        "provable relation to them: its positions are in another server's binlog, and without GTIDs on both sides "
        "nothing tells which of its changes the mirror has. Nothing of the batch was written; none of it was "
        "skipped. Mirror into a new root from a snapshot, or read the binlog of a server that logs GTIDs."
    )


def follow(table: Any, applied: Applied | None, root: str, app_id: str) -> Followed:
    """Which rows of a batch (change rows, or a typed batch's planner table: any order) the mirror has not applied,
    by ``applied`` (module docstring); :class:`MirrorLineageError` for rows whose relation to it is not provable."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    found = destinations(table)
    check_destination(found, applied, root, app_id)
    n = table.num_rows
    types = _field_types()
    kind = _column(table, "type", pa.string())
    snapshot = pc.fill_null(pc.equal(kind, SNAPSHOT), False).to_numpy(zero_copy_only=False)
    server = _column(table, "log_server_id", types["log_server_id"])
    gtid = _column(table, "gtid", pa.string())
    files = _column(table, "log_file", pa.string())
    offsets = pc.fill_null(_column(table, "log_offset", pa.int64()), 0).to_numpy(zero_copy_only=False)
    rows = pc.fill_null(_column(table, "row_index", pa.int64()), 0).to_numpy(zero_copy_only=False)
    encoded = files.dictionary_encode()  # a batch holds a few binlog files: each file's number once
    numbers_of = pa.array([journal_number(name) for name in encoded.dictionary.to_pylist()], pa.int64())
    numbers = pc.fill_null(numbers_of.take(encoded.indices), -1).to_numpy(zero_copy_only=False)
    has_position = pc.is_valid(files).to_numpy(zero_copy_only=False)
    # rows an XA COMMIT brings read back from a PREPARE before the start: at the commit's position, all of them (no
    # position of their own), so they count as applied once the commit row is; they never move the record
    marked = pc.match_substring(_column(table, "props", pa.string()), f'"{XA_RECOVERED}"')
    recovered = pc.fill_null(pc.and_(marked, pc.not_equal(kind, "XACOMMIT")), False).to_numpy(zero_copy_only=False)
    rows = np.where(recovered, 0, rows)
    keep = np.ones(n, dtype=bool)
    if applied is not None and (applied.log_file is not None or applied.gtids):
        servers = pc.fill_null(server, -1).to_numpy(zero_copy_only=False)
        if applied.server_id is None:
            same = np.ones(n, dtype=bool)  # a record from before lineages: its position is the next batch's server's
        else:  # (a row without a server: made before rows named it, compared as it was then)
            same = ~pc.is_valid(server).to_numpy(zero_copy_only=False) | (servers == applied.server_id)
        if applied.log_file is None:
            after = np.ones(n, dtype=bool)  # nothing applied carried a position: none to compare with
        else:
            a, b, c = journal_number(applied.log_file), applied.log_offset, applied.row_index
            after = (numbers > a) | ((numbers == a) & ((offsets > b) | ((offsets == b) & (rows > c))))
            after |= ~has_position  # a row without a position cannot be compared: applied, as it always was
        other = ~same & ~snapshot
        with_gtid = pc.is_valid(gtid).to_numpy(zero_copy_only=False)
        held = GtidSet(applied.gtids) if applied.gtids else None
        origins = forks.parse(applied.origins)
        opened = applied.open_gtid
        own = same & after & ~snapshot & ~recovered
        if other.any() and own.any():  # a switch inside the batch: its rows before it count as applied too
            seq = pc.fill_null(_column(table, "seq", pa.int64()), 0).to_numpy(zero_copy_only=False)
            last = int(np.flatnonzero(own)[np.argmax(seq[own])])
            opened = gtid[last].as_py() if kind[last].as_py() in DML_TYPES else None
            own_gtids = pc.unique(gtid.filter(pa.array(own))).drop_null()
            elements = ",".join(gtid_elements(own_gtids))
            if elements and held is None:
                held = GtidSet(elements)
            elif elements and held is not None:
                held.update(elements)
            origins = forks.parse(forks.merged(applied.origins, forks.origin_elements(own_gtids)))
        unprovable = other & (~with_gtid if held else np.ones(n, dtype=bool))
        if unprovable.any():
            first = int(np.flatnonzero(unprovable)[0])
            where = (files[first].as_py(), int(offsets[first]), gtid[first].as_py())
            raise unprovable_error(applied, int(servers[first]), *where, root=root, app_id=app_id)
        contained = np.zeros(n, dtype=bool)
        if held and other.any():
            unique = pc.unique(gtid.filter(pa.array(other))).drop_null().to_pylist()
            applied_ids = [g for g in unique if g != opened and held.contains(g)]
            forked = forks.find_fork(origins, applied_ids) if held.is_mariadb else None
            if forked is not None:  # numbered as applied, never applied: the servers' histories forked
                at = int(np.flatnonzero(pc.fill_null(pc.equal(gtid, forked), False).to_numpy(zero_copy_only=False))[0])
                raise forks.fork_error(applied, int(servers[at]), forked, root=root, app_id=app_id)
            if applied_ids:
                contained = pc.is_in(gtid, value_set=pa.array(applied_ids, pa.string()))
                contained = pc.fill_null(contained, False).to_numpy(zero_copy_only=False)
        keep = snapshot | (same & after) | (other & ~contained)
    changes = keep & ~snapshot & ~recovered
    newest = None
    gtids: tuple[str, ...] = ()
    origin: tuple[str, ...] = ()
    if changes.any():
        seq = pc.fill_null(_column(table, "seq", pa.int64()), 0).to_numpy(zero_copy_only=False)
        at = int(np.flatnonzero(changes)[np.argmax(seq[changes])])
        newest = Newest(
            seq=int(seq[at]),
            server_id=server[at].as_py(),
            log_file=files[at].as_py(),
            log_offset=int(offsets[at]),
            row_index=int(rows[at]),
            gtid=gtid[at].as_py(),
            type=str(kind[at].as_py()),
        )
        applied_gtids = pc.unique(gtid.filter(pa.array(changes))).drop_null()
        gtids = gtid_elements(applied_gtids)
        origin = forks.origin_elements(applied_gtids)
    advance = Advance(newest, gtids, found[0] if found else None, origin)
    kept = int(keep.sum())
    return Followed(None if kept == n else pa.array(keep), advance, kept)
