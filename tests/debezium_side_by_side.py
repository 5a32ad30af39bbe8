"""Debezium and pycanal reading one workload, for the differential tests against Debezium.

A Debezium engine (``tests.peer_harness.DebeziumPeer``, the MariaDB connector, ``snapshot.mode=no_data``) runs for a
whole test module, capturing every database whose name starts with the module's prefix, plus ``peers_marks``.
:func:`streaming` waits until it streams (a marker row it hands out); :func:`side_by_side` then records the position,
plays a workload, writes a marker row, waits for Debezium's record of it, and reads the same range with a pycanal
``Instance``.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import attrs
from canal_side_by_side import MARKS, consume
from debezium_form import changes
from peer_harness import DebeziumPeer, PeerError

from canal.config import InstanceConfig, MasterConfig
from canal.protocol import Entry, EntryType, EventType

_MARKS = itertools.count(1)


def streaming(peer: DebeziumPeer, engine: str, server: Any, timeout: float = 60.0) -> None:
    """Writes a marker row every half second until the engine hands one out: it reads the binlog."""
    server.execute(f"CREATE DATABASE IF NOT EXISTS {MARKS}")
    server.execute(f"CREATE TABLE IF NOT EXISTS {MARKS}.dbz (id INT PRIMARY KEY)")
    deadline = time.monotonic() + timeout
    while True:
        mark = next(_MARKS) + 1_000_000
        server.execute(f"INSERT INTO {MARKS}.dbz VALUES ({mark})")
        try:
            _await_mark(peer, engine, mark, 0.5)
            return
        except PeerError:
            if time.monotonic() > deadline:
                raise


def _await_mark(peer: DebeziumPeer, engine: str, mark: int, timeout: float, start: int = 0) -> None:
    """Waits for the engine's record of marker row ``mark``; :class:`PeerError` at once if the engine stopped."""
    line = peer.wait_for(
        lambda line: (
            (line["kind"] == "completed" and line.get("name") == engine)
            or (
                line["kind"] == "record"
                and line.get("name") == engine
                and line["topic"].endswith(f".{MARKS}.dbz")
                and (line["value"] or {}).get("payload", {}).get("after", {}).get("id") == mark
            )
        ),
        timeout,
        f"marker row {mark}",
        start=start,
    )
    if line["kind"] == "completed":
        raise PeerError(f"Debezium's engine {engine} stopped: {line.get('error')}\n{line.get('trace', '')[:3000]}")


@attrs.define
class Run:
    """Each engine's records of the workload (between the markers) and their data changes decoded, and pycanal's
    entries."""

    records: dict[str, list[dict[str, Any]]]
    changes: dict[str, list[tuple[str, str, dict[str, Any] | None, dict[str, Any] | None]]]
    entries: list[Entry]
    config: InstanceConfig  # pycanal's, from the position before the workload
    end: tuple[str, int]  # the master's position after the end marker


def side_by_side(
    server: Any,
    peer: DebeziumPeer,
    engines: list[str],
    play: Callable[[], None],
    *,
    filter_regex: str,
    pycanal_settings: dict[str, Any] | None = None,
    timeout: float = 60.0,
) -> Run:
    """``play`` read by every engine of ``engines`` (streaming already) and by pycanal from the position before it."""
    journal, position = server.execute("SHOW MASTER STATUS")[0][:2]
    start = len(peer.lines)
    play()
    mark = next(_MARKS) + 1_000_000
    server.execute(f"INSERT INTO {MARKS}.dbz VALUES ({mark})")
    records: dict[str, list[dict[str, Any]]] = {}
    for engine in engines:
        _await_mark(peer, engine, mark, timeout, start)
        records[engine] = [
            line
            for line in peer.lines[start:]
            if line["kind"] == "record" and line.get("name") == engine and not line["topic"].endswith(f".{MARKS}.dbz")
        ]
    config = InstanceConfig(
        destination=f"dbz{mark}",
        master=MasterConfig(
            address=server.address,
            username=server.user,
            password=server.password,
            journal_name=str(journal),
            position=int(position),
        ),
        filter_regex=f"{filter_regex},{MARKS}\\.dbz",
        **(pycanal_settings or {}),
    )

    def marked(entries: list[Entry]) -> bool:
        return any(
            e.header.table == "dbz"
            and e.entry_type is EntryType.ROWDATA
            and any(r.after == (mark,) for r in e.iter_rows())
            for e in entries
        )

    end = server.execute("SHOW MASTER STATUS")[0][:2]
    entries, error = consume(config, marked, timeout)
    if error is not None:
        raise error
    ours = [e for e in entries if e.header.schema != MARKS]
    changed = {engine: changes(rs) for engine, rs in records.items()}
    return Run(records, changed, ours, config, (str(end[0]), int(end[1])))


OPS = {EventType.INSERT: "c", EventType.UPDATE: "u", EventType.DELETE: "d"}


def pycanal_changes(
    entries: list[Entry],
) -> tuple[list[tuple[str, str, dict[str, Any] | None, dict[str, Any] | None]], list[dict[str, tuple[str, int]]]]:
    """pycanal's row changes in Debezium's shape, ``(db.table, op, before, after)``, and the (mysql type, fsp) of
    each change's columns."""
    out = []
    types = []
    for e in entries:
        rc = e.row_change
        if e.entry_type is not EntryType.ROWDATA or rc is None or rc.is_ddl or e.header.event_type not in OPS:
            continue
        for r in rc.rows:
            out.append(
                (
                    f"{e.header.schema}.{e.header.table}",
                    OPS[e.header.event_type],
                    None if r.before is None else r.before_dict(),
                    None if r.after is None else r.after_dict(),
                )
            )
            types.append({c.name: (c.mysql_type, c.fsp) for c in r.table.columns})
    return out, types
