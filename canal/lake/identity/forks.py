"""MariaDB transactions the mirror applied, by the server that wrote them: a fork of the servers' histories after a
failover, told from changes brought again.

MariaDB numbers a replication domain's transactions in one sequence across the servers that take it over, and a
GTID (``domain-server-seq``) names the server that wrote its transaction. The lineage
(:mod:`canal.lake.identity.lineage`) counts a transaction of another server applied when its domain's position is at or
past its number -- right while the servers' histories are one. A failover can fork them: the old primary wrote
transactions the mirror applied and the replica never received (replication is asynchronous), then the promoted replica
numbers its own transactions from where it was, reusing those numbers (``0-2-105`` after the mirror's ``0-1-105``). They
would pass for applied and be skipped, silently, and the mirror would keep changes the new server never had.

So the record keeps, per domain and writing server, the lowest and highest numbers applied (``origins``:
``domain-server-lo-hi`` elements). A transaction of another server whose number lies within what the mirror applied
in its domain, but which no range of its own writing server holds, is one the mirror never applied, numbered as if
it had: the histories forked. It is a :class:`~canal.lake.types.MirrorLineageError` naming both servers, nothing of
the batch written. A number below everything the mirror applied in the domain (a transaction from before the
mirror's start, brought again by a search by time) counts as applied, as before; so does everything of a record
written before origins were kept, for the numbers it applied then.

MySQL's GTIDs name their source server (its uuid) and never reuse a number, so a promoted replica's transactions
are new by their GTIDs; what a MySQL failover lost shows where the server is asked for it (a dump by GTID refuses a
set the server does not have).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from canal.lake.identity.applied import Applied
from canal.lake.types import MirrorLineageError

Ranges = dict[tuple[int, int], tuple[int, int]]
"""(domain, writing server) -> (lowest, highest) number applied."""


def origin_elements(gtids: Any) -> tuple[str, ...]:
    """Distinct MariaDB GTIDs (a pyarrow string array) as their origins' elements (``domain-server-lo-hi``), a
    column at a time; () for MySQL GTIDs."""
    import numpy as np
    import pyarrow.compute as pc

    if not len(gtids) or pc.any(pc.match_substring(gtids, ":")).as_py():
        return ()
    parts = pc.split_pattern(gtids, "-")
    domain, server, seq = (pc.list_element(parts, i).cast("int64").to_numpy() for i in range(3))
    out = []
    for d, s in sorted({(int(d), int(s)) for d, s in zip(domain, server, strict=True)}):
        numbers = seq[(domain == d) & (server == s)]
        out.append(f"{d}-{s}-{int(np.min(numbers))}-{int(np.max(numbers))}")
    return tuple(out)


def parse(text: str | Iterable[str] | None) -> Ranges:
    """Origins' elements (a record's text, comma-separated, or the elements) as ranges; the widest where one
    repeats."""
    out: Ranges = {}
    elements = (text or "").split(",") if text is None or isinstance(text, str) else text
    for element in elements:
        if not element.strip():
            continue
        d, s, lo, hi = (int(part) for part in element.split("-"))
        known = out.get((d, s))
        out[(d, s)] = (lo, hi) if known is None else (min(known[0], lo), max(known[1], hi))
    return out


def merged(text: str | None, elements: Iterable[str]) -> str | None:
    """A record's origins with a batch's added (None: none at all)."""
    ranges = parse(text)
    for key, (lo, hi) in parse(elements).items():
        known = ranges.get(key)
        ranges[key] = (lo, hi) if known is None else (min(known[0], lo), max(known[1], hi))
    return ",".join(f"{d}-{s}-{lo}-{hi}" for (d, s), (lo, hi) in sorted(ranges.items())) or None


def find_fork(ranges: Ranges, gtids: Iterable[str]) -> str | None:
    """The first of the MariaDB ``gtids`` (transactions of another server the domain rule counts applied) that the
    mirror never applied though its number lies within what it applied in its domain; None when there is none."""
    if not ranges:
        return None
    lowest: dict[int, int] = {}
    for (d, _s), (lo, _hi) in ranges.items():
        lowest[d] = min(lo, lowest.get(d, lo))
    for gtid in gtids:
        d, s, n = (int(part) for part in gtid.split("-"))
        if d not in lowest or n < lowest[d]:
            continue  # before anything the mirror applied in the domain: the stream's start, as before
        held = ranges.get((d, s))
        if held is None or not held[0] <= n <= held[1]:
            return gtid
    return None


def fork_error(applied: Applied, server_id: int, gtid: str, *, root: str, app_id: str) -> MirrorLineageError:
    """The error for a transaction ``gtid`` of server ``server_id`` that forks from what the mirror ``applied``."""
    domain = gtid.split("-")[0]
    held = ", ".join(
        f"server {s}: {lo}-{hi}" for (d, s), (lo, hi) in sorted(parse(applied.origins).items()) if str(d) == domain
    )
    return MirrorLineageError(
        f"mirror {root} (app id {app_id!r}) applied the changes up to {applied.lineage}; this batch reads the binlog "
        f"of server_id {server_id}, which holds transaction {gtid}: one the mirror never applied, numbered within "
        f"what it applied in domain {domain} ({held}). The servers' histories forked -- transactions the mirror "
        "applied were lost in a failover, and the new server numbered its own as theirs: the mirror holds changes "
        "that server never had. Nothing of the batch was written; none of it was skipped. Mirror into a new root "
        "from a snapshot of that server."
    )
