"""Entries in a comparable form, for the shared reader's differential tests (and their child processes), and the
fake-binlog helpers those tests share: a destination's config, its entries through the end marker (shared or alone),
and the process's reader of a fake."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from canal.client import ClientIdentity
from canal.config import DetectingConfig, InstanceConfig, MasterConfig, RetryConfig, StoreConfig
from canal.instance import Instance
from canal.parse.shared import reader as shared
from canal.position import EntryPosition
from canal.protocol import EMPTY_MESSAGE_ID, Entry, EntryType
from canal.server import EmbeddedServer
from canal.testing import FakeMysql

END_ID = 999_999


def canonical(entry: Entry) -> tuple[Any, ...]:
    """Everything an entry carries, comparable."""
    h = entry.header
    rc = entry.row_change
    change = None
    if rc is not None:
        change = (
            rc.event_type,
            rc.is_ddl,
            rc.sql,
            rc.ddl_schema,
            rc.table_id,
            None if rc.table is None else rc.table.columns,  # names, types, keys, charsets, precision
            tuple((r.before, r.after) for r in rc.rows),
        )
    return (
        entry.entry_type,
        h.log_file,
        h.log_offset,
        h.server_id,
        h.execute_time,
        h.schema,
        h.table,
        h.event_type,
        h.event_length,
        h.gtid,
        tuple(sorted(h.props.items())),
        change,
        entry.thread_id,
        entry.xid,
        entry.anchor,
        entry.rows_done,
    )


def _is_marker(e: tuple[Any, ...]) -> bool:
    change = e[11]
    return (
        e[0] is EntryType.ROWDATA
        and e[6] == "marks"
        and change is not None
        and any(after is not None and after[0] == END_ID for _before, after in change[6])
    )


def ended(entries: Sequence[tuple[Any, ...]], db: str) -> bool:
    """Whether the end marker (a row of ``db.marks`` with id END_ID) arrived."""
    return any(_is_marker(e) for e in entries)


def through_marker(entries: Sequence[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The entries up to the end marker's row: whether its transaction's END came in the same batch depends on when
    the consumer asked, not on what the destination made."""
    return list(entries[: next(i for i, e in enumerate(entries) if _is_marker(e)) + 1])


# -- the fake binlog's differential tests ------------------------------------------------------------------------------

Start = EntryPosition | str  # a file position, or a GTID set (a destination in GTID mode)


def fake_config(
    fake: FakeMysql, start: Start, name: str, regex: str, meta: Path, *, share: bool, gtid: bool = False
) -> InstanceConfig:
    """Destination ``name`` of ``fake`` capturing ``regex`` (and ``m.marks``), from ``start``: a file position, or
    with a GTID set (then in GTID mode)."""
    if isinstance(start, str):
        master = MasterConfig(address=fake.address, gtid=start)
        gtid = True
    else:
        master = MasterConfig(address=fake.address, journal_name=start.journal_name, position=start.position)
    return InstanceConfig(
        destination=name,
        master=master,
        filter_regex=f"{regex},m\\.marks",
        share_reader=share,
        gtid_mode=gtid,
        meta_mode="file",
        meta_dir=str(meta),
        flush_period_s=0,
        transaction_size=3,
        store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=64),
        detecting=DetectingConfig(interval_s=0.2),
        retry=RetryConfig(initial_backoff_s=0.01, max_backoff_s=0.1, heartbeat_period_s=0.2, read_timeout_s=10),
    )


def is_end(entry: tuple[Any, ...], end: int) -> bool:
    """Whether ``entry`` holds the row of ``m.marks`` with id ``end``."""
    change = entry[11]
    return (
        entry[0] is EntryType.ROWDATA
        and entry[6] == "marks"
        and change is not None
        and change[6] != ()
        and (change[6][-1][1][0] == end)
    )


def done(entries: list[tuple[Any, ...]], end: int) -> bool:
    return any(is_end(e, end) for e in entries)


def upto_end(entries: list[tuple[Any, ...]], end: int) -> list[tuple[Any, ...]]:
    """The entries up to the end marker's row (a batch may end before or after the transaction's end)."""
    return entries[: next(i for i, e in enumerate(entries) if is_end(e, end)) + 1]


def drain(
    get: Callable[[], Any], ack: Callable[[int], None], out: list[tuple[Any, ...]], end: int, limit_s: float = 30
) -> None:
    deadline = time.monotonic() + limit_s
    while not done(out, end):
        assert time.monotonic() < deadline, f"{len(out)} entries, no end marker"
        msg = get()
        if msg.id != EMPTY_MESSAGE_ID:
            ack(msg.id)
            out += [canonical(e) for e in msg.entries]


def drain_shared(server: EmbeddedServer, name: str, out: list[tuple[Any, ...]], end: int) -> None:
    """Destination ``name`` of ``server``'s entries into ``out``, through the end marker ``end``."""
    client = ClientIdentity(name, 1001)
    drain(lambda: server.get_without_ack(client, 5, 0.02), lambda batch: server.ack(client, batch), out, end)


def drain_all(server: EmbeddedServer, got: dict[str, list[tuple[Any, ...]]], end: int, limit_s: float = 30) -> None:
    """Every destination of ``got``'s entries, a batch of each in turn (one that waits for a slow one's room gets
    it), through the end marker ``end``."""
    deadline = time.monotonic() + limit_s
    while not all(done(out, end) for out in got.values()):
        assert time.monotonic() < deadline, {name: len(out) for name, out in got.items()}
        for name, out in got.items():
            if not done(out, end):
                client = ClientIdentity(name, 1001)
                msg = server.get_without_ack(client, 5, 0.005)
                if msg.id != EMPTY_MESSAGE_ID:
                    server.ack(client, msg.id)
                    out += [canonical(e) for e in msg.entries]


def read_alone(
    fake: FakeMysql, start: Start, name: str, regex: str, tmp: str, end: int, *, gtid: bool = False
) -> list[tuple[Any, ...]]:
    """The entries destination ``name`` gets reading alone from ``start``, through the end marker ``end``."""
    alone: list[tuple[Any, ...]] = []
    with Instance(fake_config(fake, start, name, regex, Path(tmp, "alone"), share=False, gtid=gtid)) as inst:
        drain(lambda: inst.get_without_ack(5, 0.02), inst.ack, alone, end)
    return alone


def reader_of(fake: FakeMysql) -> shared.SharedReader:
    """The shared reader of ``fake`` (its key: the fake's address, and how it decodes)."""
    (reader,) = (r for key, r in shared.READERS._readers.items() if key.startswith(fake.address + " "))
    return reader


def wait_for(what: str, check: Callable[[], bool], limit_s: float = 20.0) -> None:
    deadline = time.monotonic() + limit_s
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)
