"""canal and pycanal reading one workload from one binlog position, for the differential tests against canal.

:func:`side_by_side` records the position, starts a canal destination there (``tests.peer_harness.CanalPeer``), waits
until canal is dumping (a first marker row arrives: its table-meta TSDB has read the schema of that moment), plays the
workload, writes a second marker row, waits for canal to hand it out (or to raise an alarm: canal retries a parse error
forever), then reads the same range with a pycanal ``Instance``. Both see the marker rows, in a table of their own
(``peers_marks.m_<name>``) that both filters take.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import attrs
from canal_form import Form, from_canal, from_pycanal
from peer_harness import CanalPeer

from canal.config import InstanceConfig, MasterConfig
from canal.instance import Instance
from canal.protocol import EMPTY_MESSAGE_ID, Entry, EntryType, EventType

MARKS = "peers_marks"


@attrs.define
class Run:
    """What the two read: canal's entry lines and pycanal's entries, in the form :mod:`canal_form` compares, and
    canal's alarms (non-empty: canal stopped at a parse error, and its entries end there)."""

    canal: list[Form]
    ours: list[Form]
    alarms: list[str]
    ours_error: BaseException | None = None
    raw_canal: list[dict[str, Any]] = attrs.field(factory=list)
    entries: list[Entry] = attrs.field(factory=list)


def _marks(forms_table: Callable[[Any], tuple[str, str, str]], items: list[Any], mark: str) -> int:
    return sum(1 for item in items if forms_table(item) == (MARKS, mark, "INSERT"))


def through_second_mark(key: Callable[[Any], tuple[str, str, str]], items: list[Any], mark: str) -> list[Any]:
    """``items`` up to the second marker row's entry (all of them when canal stopped before it)."""
    seen = 0
    for i, item in enumerate(items):
        seen += key(item) == (MARKS, mark, "INSERT")
        if seen == 2:
            return items[: i + 1]
    return items


def canal_key(line: dict[str, Any]) -> tuple[str, str, str]:
    h = line["header"]
    return (h["schemaName"], h["tableName"], h["eventType"] if line["entryType"] == "ROWDATA" else "")


def our_key(entry: Entry) -> tuple[str, str, str]:
    h = entry.header
    is_row = entry.entry_type is EntryType.ROWDATA and entry.row_change is not None and not entry.row_change.is_ddl
    return (h.schema, h.table, h.event_type.name if is_row else "")


def side_by_side(
    server: Any,
    peer: CanalPeer,
    name: str,
    play: Callable[[], None],
    *,
    filter_regex: str,
    black_regex: str = "",
    canal_settings: dict[str, Any] | None = None,
    pycanal_settings: dict[str, Any] | None = None,
    timeout: float = 60.0,
) -> Run:
    """``play`` read by canal and by pycanal from the position before it; ``server`` is a MariaDB fixture (its
    ``execute``, ``address``, ``user``, ``password``)."""
    mark = f"m_{name}"
    server.execute(f"CREATE DATABASE IF NOT EXISTS {MARKS}")
    server.execute(f"CREATE TABLE {MARKS}.{mark} (id INT PRIMARY KEY)")
    journal, position = server.execute("SHOW MASTER STATUS")[0][:2]
    both = f"{filter_regex},{MARKS}\\.{mark}"
    settings = {
        "address": server.address,
        "username": server.user,
        "password": server.password,
        "position": {"journalName": str(journal), "position": int(position), "timestamp": int(time.time() * 1000)},
        "filter": both,
        **({"black_filter": black_regex} if black_regex else {}),
        **(canal_settings or {}),
    }
    peer.start_destination(name, **settings)
    try:
        server.execute(f"INSERT INTO {MARKS}.{mark} VALUES (1)")
        peer.wait_entries(name, lambda es: _marks(canal_key, es, mark) >= 1, timeout, stop_on_alarm=True)
        play()
        server.execute(f"INSERT INTO {MARKS}.{mark} VALUES (2)")
        canal = peer.wait_entries(name, lambda es: _marks(canal_key, es, mark) >= 2, timeout, stop_on_alarm=True)
        alarms = peer.alarms(name)
    finally:
        peer.command({"cmd": "stop", "destination": name})
    config = InstanceConfig(
        destination=name,
        master=MasterConfig(
            address=server.address,
            username=server.user,
            password=server.password,
            journal_name=str(journal),
            position=int(position),
        ),
        filter_regex=both,
        black_regex=black_regex,
        **(pycanal_settings or {}),
    )
    entries, error = consume(config, lambda es: _marks(our_key, es, mark) >= 2, timeout)
    # each side's reading ends with the batch that holds the second marker row, and what else that batch holds (the
    # marker's transaction end, or not) is a matter of timing: both are compared up to that row
    canal = through_second_mark(canal_key, canal, mark)
    entries = through_second_mark(our_key, entries, mark)
    return Run(
        [from_canal(line) for line in canal],
        [from_pycanal(e) for e in entries],
        alarms,
        error,
        canal,
        entries,
    )


def consume(
    config: InstanceConfig, until: Callable[[list[Entry]], bool], timeout: float
) -> tuple[list[Entry], BaseException | None]:
    """Every entry an Instance of ``config`` hands out (each batch acked) until ``until`` holds of them, or the
    error the destination stopped with."""
    entries: list[Entry] = []
    deadline = time.monotonic() + timeout
    inst = Instance(config)
    inst.start()
    try:
        while not until(entries):
            error = inst.parser.error
            if error is not None:
                return entries, error
            assert time.monotonic() < deadline, f"pycanal: {len(entries)} entries and no end marker in {timeout}s"
            msg = inst.get_without_ack(1000, timeout=0.2, linger=0.05)
            if msg.id != EMPTY_MESSAGE_ID:
                entries.extend(msg.entries)
                inst.ack(msg.id)
    finally:
        inst.stop()
    return entries, None


def rows_of(entries: list[Entry], table: str) -> list[tuple[str, dict[str, Any]]]:
    """The row images of ``table`` (after, or before for a DELETE) with their event type."""
    out = []
    for e in entries:
        if e.header.table == table and e.row_change is not None and not e.row_change.is_ddl:
            for r in e.row_change.rows:
                image = r.before_dict() if e.header.event_type is EventType.DELETE else r.after_dict()
                out.append((e.header.event_type.name, image))
    return out
