"""GTID state of the fake server: MySQL GTID sets (``uuid:1-5,...``) and MariaDB GTID positions (``0-1-5,...``)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from canal.errors import SourceError

__all__ = [
    "MariaGtids",
    "MysqlGtids",
    "Tag",
    "format_mariadb_gtid_pos",
    "format_mysql_gtid_set",
    "merge",
    "mysql_contains",
    "mysql_subset",
    "parse_mariadb_gtid_pos",
    "parse_mysql_gtid_set",
]

Intervals = list[tuple[int, int]]
MysqlGtids = dict[str, Intervals]
MariaGtids = dict[int, tuple[int, int]]  # domain -> (server_id, seq_no) of its last transaction
Tag = tuple[Any, ...]  # the GTID an event belongs to: (uuid, gno) or (domain, server_id, seq)


def merge(intervals: Iterable[tuple[int, int]]) -> Intervals:
    out: Intervals = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def parse_mysql_gtid_set(text: str) -> dict[str, list[tuple[int, int]]]:
    """``uuid:1-5:7,uuid2:3`` -> {uuid: [(1, 5), (7, 7)], uuid2: [(3, 3)]} (uuids lowercased, intervals merged)."""
    out: dict[str, list[tuple[int, int]]] = {}
    for part in text.replace("\n", "").split(","):
        part = part.strip()
        if not part:
            continue
        sid, *ranges = part.split(":")
        sid = sid.strip().lower()
        try:
            uuid.UUID(sid)
            for rng in ranges:
                a, _, b = rng.strip().partition("-")
                start = int(a)
                end = int(b) if b else start
                if start < 1 or end < start:
                    raise ValueError(rng)
                out.setdefault(sid, []).append((start, end))
        except ValueError:
            raise SourceError(f"Malformed GTID set specification {text!r}", errno=1772) from None
    return {k: merge(v) for k, v in out.items()}


def format_mysql_gtid_set(gtids: Mapping[str, Sequence[tuple[int, int]]]) -> str:
    parts = []
    for sid in sorted(gtids):
        if gtids[sid]:
            ranges = ":".join(f"{s}-{e}" if e != s else str(s) for s, e in gtids[sid])
            parts.append(f"{sid}:{ranges}")
    return ",".join(parts)


def mysql_contains(gtids: Mapping[str, Sequence[tuple[int, int]]], sid: str, gno: int) -> bool:
    return any(s <= gno <= e for s, e in gtids.get(sid, ()))


def mysql_subset(a: Mapping[str, Sequence[tuple[int, int]]], b: Mapping[str, Sequence[tuple[int, int]]]) -> bool:
    for sid, intervals in a.items():
        for s, e in intervals:
            if not any(bs <= s and e <= be for bs, be in b.get(sid, ())):
                return False
    return True


def parse_mariadb_gtid_pos(text: str) -> dict[int, tuple[int, int]]:
    """``0-1-5,1-2-9`` -> {0: (1, 5), 1: (2, 9)}: per replication domain, the server id and seq_no of its last GTID."""
    out: dict[int, tuple[int, int]] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            d, s, q = (int(x) for x in part.split("-"))
        except ValueError:
            raise SourceError(f"Malformed GTID position {text!r}: expected domain-server-seq", errno=1236) from None
        out[d] = (s, q)
    return out


def format_mariadb_gtid_pos(state: Mapping[int, tuple[int, int]]) -> str:
    return ",".join(f"{d}-{s}-{q}" for d, (s, q) in sorted(state.items()))
