"""Destinations sharing a reader of a real MariaDB decode with their schema history, as each does alone: the types
only a history knows (MariaDB's UUID, INET6 and INET4, which the binlog logs as BINARY(16) / BINARY(4); a FLOAT's or
DOUBLE's declared decimals) are what ``SELECT`` shows, and a destination whose history holds another layout of a table
it captures gets that history's decoding, not the reader's."""

from __future__ import annotations

import json
import logging
import shutil
import time
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from shared_entries import END_ID, canonical, ended, through_marker

from canal.client import ClientIdentity
from canal.config import InstanceConfig, MasterConfig, RetryConfig, StoreConfig
from canal.instance import Instance
from canal.meta.file import SCHEMA_HISTORY_FILE_NAME
from canal.protocol import EMPTY_MESSAGE_ID, Entry, EntryType
from canal.server import EmbeddedServer
from canal.testing.plugin import MariaDBDatabase

pytestmark = pytest.mark.integration

TYPED = (
    "CREATE TABLE typed (id INT PRIMARY KEY, u UUID, i6 INET6, i4 INET4, f FLOAT(7,4), d DOUBLE(10,3), "
    "b BINARY(16), v VARCHAR(10))"
)
ROW = (
    1,
    "123e4567-e89b-12d3-a456-426614174000",
    "2001:db8::1",
    "10.0.0.1",
    123.45678,
    1.23456,
    b"sixteen bytes!!!",
    "x",
)


def _config(master: MasterConfig, name: str, regex: str, meta: Path, *, share: bool) -> InstanceConfig:
    return InstanceConfig(
        destination=name,
        master=master,
        filter_regex=regex,
        share_reader=share,
        meta_mode="file",
        meta_dir=str(meta),
        store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=256),
        retry=RetryConfig(initial_backoff_s=0.02, max_backoff_s=0.3, read_timeout_s=10, heartbeat_period_s=0.3),
    )


def _take(get: Any, ack: Any, out: list[Entry], db: str, limit_s: float = 60) -> None:
    deadline = time.monotonic() + limit_s
    while not ended([canonical(e) for e in out], db):
        assert time.monotonic() < deadline, f"{len(out)} entries, no end marker"
        msg = get()
        if msg.id != EMPTY_MESSAGE_ID:
            ack(msg.id)
            out += msg.entries


def _alone(inst: Instance, db: str) -> list[Entry]:
    """An instance's entries through the end marker (one started beside the shared ones, before the workload: its
    schema history starts where theirs do)."""
    out: list[Entry] = []
    try:
        _take(lambda: inst.get_without_ack(50, 0.05), inst.ack, out, db)
    finally:
        inst.stop()
    return out


def _shared(server: EmbeddedServer, names: list[str], db: str) -> dict[str, list[Entry]]:
    got: dict[str, list[Entry]] = {n: [] for n in names}
    for name in names:
        client = ClientIdentity(name, 1001)
        _take(
            lambda c=client: server.get_without_ack(c, 50, 0.05),
            lambda batch, c=client: server.ack(c, batch),
            got[name],
            db,
        )
    return got


def _row_of(entries: list[Entry], table: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The first row of ``table``'s inserts, and its columns' types."""
    for entry in entries:
        rc = entry.row_change
        if entry.entry_type is EntryType.ROWDATA and entry.header.table == table and rc is not None and rc.rows:
            assert rc.table is not None
            return rc.rows[0].after_dict(), {c.name: c.mysql_type for c in rc.table.columns}
    raise AssertionError(f"no row of {table}")


def _same(got: list[Entry], want: list[Entry], name: str) -> None:
    a, b = through_marker([canonical(e) for e in got]), through_marker([canonical(e) for e in want])
    assert len(a) == len(b), name
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        assert x == y, f"{name}: entry {i} differs:\nshared {x}\nalone  {y}"


def _workload(mariadb: MariaDBDatabase) -> None:
    mariadb.execute("INSERT INTO typed VALUES (%s, %s, %s, %s, %s, %s, %s, %s)", ROW)
    mariadb.execute("INSERT INTO other VALUES (1, 'o')")
    mariadb.execute("ALTER TABLE typed ADD COLUMN w FLOAT(5,1)")  # the histories follow; the next row has it
    mariadb.execute("INSERT INTO typed VALUES (2, UUID(), '::1', '127.0.0.1', 99.999, 2.5, NULL, 'y', 1.25)")
    mariadb.execute(f"INSERT INTO marks VALUES ({END_ID})")


def test_shared_destinations_decode_with_their_schema_history(mariadb: MariaDBDatabase, tmp_path: Path) -> None:
    db = mariadb.database
    mariadb.execute(TYPED)
    mariadb.execute("CREATE TABLE other (id INT PRIMARY KEY, v VARCHAR(10))")
    mariadb.execute("CREATE TABLE marks (id INT PRIMARY KEY)")
    master = mariadb.master()
    filters = {"typed": rf"{db}\.typed,{db}\.marks", "both": rf"{db}\..*", "other": rf"{db}\.other,{db}\.marks"}
    alone = {n: Instance(_config(master, n, regex, tmp_path / "alone", share=False)) for n, regex in filters.items()}
    for inst in alone.values():
        inst.start()
    server = EmbeddedServer()
    server.start()
    try:
        for name, regex in filters.items():
            server.start_destination(_config(master, name, regex, tmp_path / "shared", share=True))
        deadline = time.monotonic() + 30
        while not all(server.instance(n).parser.shared for n in filters):
            assert time.monotonic() < deadline, "the destinations did not share"
            time.sleep(0.01)
        _workload(mariadb)
        got = _shared(server, list(filters), db)
        shared = {n: server.instance(n).parser.shared for n in filters}
    finally:
        server.stop()
    assert all(shared.values()), shared  # every table map's layout was its own history's: no one left
    selected = mariadb.execute("SELECT id, u, i6, i4, f, d, b, v FROM typed ORDER BY id")
    for name in filters:
        _same(got[name], _alone(alone[name], db), name)
        if name == "other":
            continue
        row, types = _row_of(got[name], "typed")
        # what SELECT shows: the UUID / INET values as text, the FLOAT to its 4 declared decimals
        first = selected[0]
        assert row["u"] == uuid.UUID(str(first[1])) or str(row["u"]) == str(first[1])
        assert str(row["i6"]) == str(first[2]) and str(row["i4"]) == str(first[3])
        assert Decimal(str(row["f"])) == Decimal("123.4568") and types["f"] == "float(7,4)"
        assert types["u"] == "uuid" and types["i6"] == "inet6" and types["i4"] == "inet4"
        assert types["b"] == "binary(16)" and row["b"] == ROW[6]


def test_a_destination_whose_history_types_a_table_otherwise_reads_alone(
    mariadb: MariaDBDatabase, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The destination "odd"'s schema history says ``typed.f`` is a FLOAT without decimals (a history that differs
    from the server's tables, as one restored from elsewhere would): alone it decodes ``f`` so; joining a reader whose
    history holds FLOAT(7,4), it must too: it finds the reader's layout is not its own and reads alone."""
    db = mariadb.database
    mariadb.execute(TYPED)
    mariadb.execute("CREATE TABLE other (id INT PRIMARY KEY, v VARCHAR(10))")
    mariadb.execute("CREATE TABLE marks (id INT PRIMARY KEY)")
    master = mariadb.master()
    regex = rf"{db}\.typed,{db}\.marks"
    meta = tmp_path / "shared"
    path = meta / "odd" / SCHEMA_HISTORY_FILE_NAME
    with Instance(_config(master, "odd", regex, meta, share=False)):  # its history starts at the master's position
        deadline = time.monotonic() + 30
        while not path.exists():
            assert time.monotonic() < deadline, "no schema history"
            time.sleep(0.01)
    doc = json.loads(path.read_text())
    (table,) = (t for t in doc["snapshots"][0]["catalog"]["tables"] if t["db"] == db and t["name"] == "typed")
    (column,) = (c for c in table["columns"] if c["name"] == "f")
    assert column["params"] == [7, 4]
    column["params"] = []
    path.write_text(json.dumps(doc))
    shutil.copytree(meta / "odd", tmp_path / "alone" / "odd")  # the same history, read alone beside
    alone = Instance(_config(master, "odd", regex, tmp_path / "alone", share=False))
    alone.start()
    server = EmbeddedServer()
    server.start()
    try:
        for name in ("first", "second"):  # the reader's history is theirs
            server.start_destination(_config(master, name, regex, meta, share=True))
        deadline = time.monotonic() + 30
        while not all(server.instance(n).parser.shared for n in ("first", "second")):
            assert time.monotonic() < deadline, "no reader"
            time.sleep(0.01)
        server.start_destination(_config(master, "odd", regex, meta, share=True))
        while not server.instance("odd").parser.shared:
            assert time.monotonic() < deadline, "odd did not join"
            time.sleep(0.01)
        with caplog.at_level(logging.INFO, logger="canal.parse.shared.reader"):
            _workload(mariadb)
            got = _shared(server, ["first", "second", "odd"], db)
        left = server.instance("odd").parser.shared
    finally:
        server.stop()
    assert not left
    assert any(
        "[odd] leaves the shared reader" in r.getMessage() and "another layout of" in r.getMessage()
        for r in caplog.records
    )
    _same(got["odd"], _alone(alone, db), "odd")
    row, types = _row_of(got["odd"], "typed")
    assert types["f"] == "float" and row["f"] != pytest.approx(123.4568, abs=1e-9)  # its history's FLOAT
    row, types = _row_of(got["first"], "typed")
    assert types["f"] == "float(7,4)"
