"""GTID state of the fake server: MySQL GTID sets (``uuid:1-5,...``) and MariaDB GTID positions (``0-1-5,...``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from canal import gtid as gtid_text
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
    """``uuid:1-5:7,uuid2:3`` -> {uuid: [(1, 5), (7, 7)], uuid2: [(3, 3)]} (read by :mod:`canal.gtid`; the fake
    has no tagged GTIDs). A malformed set is the server's error 1772."""
    out: dict[str, list[tuple[int, int]]] = {}
    try:
        for sid, tag, intervals in gtid_text.parse_mysql_gtid_set(text):
            if tag:
                raise ValueError("tagged GTIDs")
            out.setdefault(str(sid), []).extend(intervals)
    except ValueError:
        raise SourceError(f"Malformed GTID set specification {text!r}", errno=1772) from None
    return {k: merge(v) for k, v in out.items()}


format_mysql_gtid_set = gtid_text.format_mysql_gtid_set
format_mariadb_gtid_pos = gtid_text.format_mariadb_gtid_pos


def mysql_contains(gtids: Mapping[str, Sequence[tuple[int, int]]], sid: str, gno: int) -> bool:
    return any(s <= gno <= e for s, e in gtids.get(sid, ()))


def mysql_subset(a: Mapping[str, Sequence[tuple[int, int]]], b: Mapping[str, Sequence[tuple[int, int]]]) -> bool:
    for sid, intervals in a.items():
        for s, e in intervals:
            if not any(bs <= s and e <= be for bs, be in b.get(sid, ())):
                return False
    return True


def parse_mariadb_gtid_pos(text: str) -> dict[int, tuple[int, int]]:
    """``0-1-5,1-2-9`` -> {0: (1, 5), 1: (2, 9)} (read by :mod:`canal.gtid`); malformed text is error 1236."""
    try:
        return gtid_text.parse_mariadb_gtid_pos(text)
    except ValueError:
        raise SourceError(f"Malformed GTID position {text!r}: expected domain-server-seq", errno=1236) from None
