"""What production does to destinations sharing a reader of a real MariaDB, each compared with the same destination
reading alone (``share_reader=False``) over the same binlog: a foreign key's action from a table no destination
captures, ..."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from procs.ha_harness import Child, kill_all
from shared_entries import END_ID, canonical, ended, through_marker

from canal.client import ClientIdentity
from canal.config import InstanceConfig, MasterConfig, RetryConfig, StoreConfig
from canal.instance import Instance
from canal.protocol import EMPTY_MESSAGE_ID, Entry
from canal.server import EmbeddedServer
from canal.testing.plugin import MariaDBDatabase, MariaDBFactory

pytestmark = pytest.mark.integration


def _config(master: MasterConfig, name: str, tables: str, db: str, meta: Path, *, share: bool) -> InstanceConfig:
    return InstanceConfig(
        destination=name,
        master=master,
        filter_regex=",".join(rf"{db}\.{t}" for t in (*tables.split(","), "marks")),
        share_reader=share,
        meta_mode="file",  # a schema history
        meta_dir=str(meta),
        heal="stop",  # a heal where alone there is none stops the destination: seen at once
        store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=256),
        retry=RetryConfig(initial_backoff_s=0.02, max_backoff_s=0.3, read_timeout_s=10, heartbeat_period_s=0.3),
    )


def _take(get: Callable[[], Any], ack: Callable[[int], None], failed: Callable[[], Any], name: str) -> list[Entry]:
    """A destination's entries through the end marker; a destination that stopped fails the test with its error."""
    out: list[Entry] = []
    deadline = time.monotonic() + 60
    while not ended([canonical(e) for e in out], ""):
        error = failed()
        assert error is None, f"{name} stopped: {type(error).__name__}: {error}"
        assert time.monotonic() < deadline, f"{name}: {len(out)} entries, no end marker"
        msg = get()
        if msg.id != EMPTY_MESSAGE_ID:
            ack(msg.id)
            out += msg.entries
    return out


def _alone(inst: Instance, name: str) -> list[Entry]:
    try:
        return _take(lambda: inst.get_without_ack(50, 0.05), inst.ack, lambda: inst.parser.error, name)
    finally:
        inst.stop()


def _shared(server: EmbeddedServer, name: str) -> list[Entry]:
    client = ClientIdentity(name, 1001)
    return _take(
        lambda: server.get_without_ack(client, 50, 0.05),
        lambda batch: server.ack(client, batch),
        lambda: server.instance(name).parser.error,
        name,
    )


def _same(got: list[Entry], want: list[Entry], name: str) -> None:
    a, b = through_marker([canonical(e) for e in got]), through_marker([canonical(e) for e in want])
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        assert x == y, f"{name}: entry {i} differs:\nshared {x}\nalone  {y}"
    assert len(a) == len(b), name


def _run_shared(
    mariadb: MariaDBDatabase, tmp_path: Path, tables: dict[str, str], workload: Callable[[], None]
) -> tuple[dict[str, list[Entry]], dict[str, bool]]:
    """``tables``' destinations, started alone (their twins) and in one server sharing, before ``workload``: each
    shared destination's entries, compared with its twin's; whether each still shared at the end."""
    db = mariadb.database
    master = mariadb.master()
    alone = {n: Instance(_config(master, n, t, db, tmp_path / "alone", share=False)) for n, t in tables.items()}
    server = EmbeddedServer()
    try:
        for inst in alone.values():
            inst.start()
        server.start()
        for name, t in tables.items():
            server.start_destination(_config(master, name, t, db, tmp_path / "shared", share=True))
        deadline = time.monotonic() + 30
        while not all(server.instance(n).parser.shared for n in tables):
            assert time.monotonic() < deadline, "the destinations did not share"
            time.sleep(0.01)
        workload()
        mariadb.execute(f"INSERT INTO marks VALUES ({END_ID})")
        got = {n: _shared(server, n) for n in tables}
        shared = {n: server.instance(n).parser.shared for n in tables}
        server.stop()
        for name, inst in alone.items():
            _same(got[name], _alone(inst, name), name)
    finally:
        server.stop()
        for inst in alone.values():
            inst.stop()
    return got, shared


def test_a_foreign_keys_action_from_a_table_no_destination_captures(mariadb: MariaDBDatabase, tmp_path: Path) -> None:
    """An UPDATE of a parent no destination captures, of a column no child references: alone, the destination
    capturing the child decodes the parent's rows, sees its children's keys unchanged, and makes nothing of it.
    Sharing, the reader must decode those rows for it too (it decodes only captured tables' rows): undecoded, the
    change looks as if it may have reached the child, a heal (here a typed stop) the destination never makes alone."""
    for sql in (
        "CREATE TABLE p (id INT PRIMARY KEY, v VARCHAR(10))",
        "CREATE TABLE c (id INT PRIMARY KEY, pid INT, "
        "FOREIGN KEY (pid) REFERENCES p (id) ON UPDATE CASCADE ON DELETE CASCADE)",
        "CREATE TABLE o (id INT PRIMARY KEY)",
        "CREATE TABLE marks (id INT PRIMARY KEY)",
        "INSERT INTO p VALUES (1, 'a'), (2, 'b')",
        "INSERT INTO c VALUES (10, 1), (20, 2)",
    ):
        mariadb.execute(sql)

    def workload() -> None:
        mariadb.execute("UPDATE p SET v = 'x' WHERE id = 1")  # no child's key changes: nothing happened to c
        mariadb.execute("INSERT INTO o VALUES (1)")
        mariadb.execute("INSERT INTO c VALUES (30, 2)")

    got, shared = _run_shared(mariadb, tmp_path, {"child": "c", "other": "o"}, workload)
    assert all(shared.values()), shared
    assert any(e.header.table == "c" and e.row_change is not None and e.row_change.rows for e in got["child"])


def test_a_destination_handed_to_another_process_takes_its_replica_id_from_the_reader(
    mariadb: MariaDBDatabase, tmp_path: Path
) -> None:
    """Destinations set their own ``slave_id`` (canal's ``canal.instance.mysql.slaveId``). The one whose start made
    the reader leaves this process (an HA handover) and dumps from another with its id: the server keeps one dump per
    replica id and ends the older one. The reader's dump must not be that one: the destination still sharing here,
    alone, never hears of another destination's id."""
    for sql in ("CREATE TABLE o (id INT PRIMARY KEY)", "CREATE TABLE c (id INT PRIMARY KEY)"):
        mariadb.execute(sql)
    mariadb.execute("CREATE TABLE marks (id INT PRIMARY KEY)")
    db = mariadb.database
    master = mariadb.master()
    configs = {
        name: attrs.evolve(_config(master, name, t, db, tmp_path, share=True), slave_id=slave_id)
        for name, t, slave_id in (("stays", "o", 7101), ("moves", "c", 7102))
    }
    server = EmbeddedServer()
    other: Child | None = None
    try:
        server.start()
        server.start_destination(configs["stays"])
        server.start_destination(configs["moves"])  # another destination runs: it makes the reader, of its source
        deadline = time.monotonic() + 30
        while not all(server.instance(n).parser.shared for n in configs):
            assert time.monotonic() < deadline, "the destinations did not share"
            time.sleep(0.01)
        server.stop_destination("moves")  # released here, taken by the other process
        spec = {"address": mariadb.address, "user": mariadb.user, "password": mariadb.password, "slave_id": 7102}
        other = Child("moves", spec, module="tests.procs.replica_dump")
        other.expect(lambda line: line == "dumping", 30, "dumping")
        mariadb.execute("INSERT INTO o VALUES (1)")
        mariadb.execute(f"INSERT INTO marks VALUES ({END_ID})")
        got = _shared(server, "stays")
        parser = server.instance("stays").parser
        error = parser.last_error
    finally:
        if other is not None:
            kill_all([other])
        server.stop()
    assert error is None, f"{type(error).__name__}: {error}"
    assert any(e.header.table == "o" for e in got)


def test_xa_transactions_and_a_destination_starting_between_prepare_and_commit(
    mariadb: MariaDBDatabase, tmp_path: Path
) -> None:
    """XA transactions of either destination's tables, committed, rolled back and one phase, go to each as alone; a
    destination whose start lies between an XA PREPARE and its COMMIT reads the prepared rows back from the server
    through its own connection while it shares."""
    for sql in ("CREATE TABLE o (id INT PRIMARY KEY)", "CREATE TABLE c (id INT PRIMARY KEY)"):
        mariadb.execute(sql)
    mariadb.execute("CREATE TABLE marks (id INT PRIMARY KEY)")
    db = mariadb.database
    start = mariadb.master()
    with mariadb.connect() as conn, conn.cursor() as cur:
        for sql in ("XA START 'x1'", "INSERT INTO c VALUES (1)", "INSERT INTO o VALUES (1)", "XA END 'x1'"):
            cur.execute(sql)
        cur.execute("XA PREPARE 'x1'")
    between = mariadb.master()
    with mariadb.connect() as conn, conn.cursor() as cur:
        for sql in ("XA START 'x2'", "INSERT INTO o VALUES (2)", "XA END 'x2'", "XA PREPARE 'x2'"):
            cur.execute(sql)
        cur.execute("XA ROLLBACK 'x2'")
        for sql in ("XA START 'x3'", "INSERT INTO c VALUES (3)", "XA END 'x3'", "XA COMMIT 'x3' ONE PHASE"):
            cur.execute(sql)
    mariadb.execute("INSERT INTO o VALUES (4)")
    mariadb.execute("XA COMMIT 'x1'")
    mariadb.execute(f"INSERT INTO marks VALUES ({END_ID})")
    configs = {
        "early": _config(start, "early", "o", db, tmp_path / "shared", share=True),
        "late": _config(between, "late", "c", db, tmp_path / "shared", share=True),
    }
    server = EmbeddedServer()
    try:
        server.start()
        server.start_destination(configs["early"])
        got = {"early": _shared(server, "early")}  # the reader stands past the XA COMMIT when "late" starts
        server.start_destination(configs["late"])
        got["late"] = _shared(server, "late")
        assert server.instance("late").parser.shared  # it read the XA COMMIT through the reader
    finally:
        server.stop()
    for name, config in configs.items():
        alone = Instance(attrs.evolve(config, share_reader=False, meta_dir=str(tmp_path / "alone")))
        alone.start()
        _same(got[name], _alone(alone, name), name)


def test_a_server_shutdown_ends_each_shared_dump_as_it_ends_a_dump_alone(
    mariadb_factory: MariaDBFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A server shutting down ends its dumps (an EOF packet): a destination reading alone takes that for a failed dump
    -- counted against its retries, retried after a backoff, its last error --, and so must each destination reading
    through the shared reader, rather than dumping again at once as if it had merely left the reader."""
    server = mariadb_factory()
    server.execute("CREATE DATABASE d")
    for table in ("o", "c", "marks"):
        server.execute(f"CREATE TABLE d.{table} (id INT PRIMARY KEY)")
    journal, position = server.execute("SHOW MASTER STATUS")[0][:2]
    master = MasterConfig(
        address=server.address, username=server.user, password=server.password, journal_name=journal, position=position
    )
    names = {"one": "o", "two": "c"}
    embedded = EmbeddedServer()
    try:
        embedded.start()
        for name, table in names.items():
            embedded.start_destination(_config(master, name, table, "d", tmp_path / "shared", share=True))
            embedded.start_destination(_config(master, f"{name}_alone", table, "d", tmp_path / "alone", share=False))
        deadline = time.monotonic() + 30
        while not all(embedded.instance(n).parser.shared for n in names):
            assert time.monotonic() < deadline, "the destinations did not share"
            time.sleep(0.01)
        # a destination shares once subscribed, before the reader's dump has even connected: a shutdown then fails
        # its connect, not its dump. Every dump is streaming once each destination has had a row through it.
        server.execute(f"INSERT INTO d.marks VALUES ({END_ID})")
        for name in names:
            for twin in (name, f"{name}_alone"):
                _shared(embedded, twin)
        assert all(embedded.instance(n).parser.shared for n in names)
        with caplog.at_level(logging.INFO, logger="canal.parse.parser"):
            server.restart()
            server.execute(f"DELETE FROM d.marks WHERE id = {END_ID}")
            server.execute(f"INSERT INTO d.marks VALUES ({END_ID})")
            for name in names:
                for twin in (name, f"{name}_alone"):
                    _shared(embedded, twin)
    finally:
        embedded.stop()
    for name in (*names, *(f"{n}_alone" for n in names)):
        ended_dump = [
            r.getMessage()
            for r in caplog.records
            # the server ends a dump with an EOF packet ("the dump from ... ended") or, caught mid-read, by closing
            # the connection ("binlog dump failed: Lost connection"): a failed dump either way, unlike the failures
            # to reach it that follow (SourceUnreachableError)
            if r.getMessage().startswith(f"[{name}] dump from ") and "failed (SourceError: " in r.getMessage()
        ]
        assert ended_dump, f"{name}: no failed dump logged"


def test_a_destination_with_a_short_read_timeout_gets_its_heartbeats_while_idle(
    mariadb: MariaDBDatabase, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A destination counts its dump dead when nothing came for ``read_timeout_s``, and asks the server for a
    heartbeat often enough never to count an idle one so (half of it, or its heartbeat period). Sharing a reader that
    another destination, of a longer period, made, it must get its heartbeats as often: an idle server is not a dead
    connection."""
    for table in ("o", "c", "marks"):
        mariadb.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY)")
    db = mariadb.database
    master = mariadb.master()
    quick = attrs.evolve(
        _config(master, "quick", "c", db, tmp_path, share=True),
        retry=RetryConfig(initial_backoff_s=0.02, max_backoff_s=0.3, read_timeout_s=0.8, heartbeat_period_s=0.2),
    )
    slow = attrs.evolve(_config(master, "slow", "o", db, tmp_path, share=True), retry=RetryConfig())
    server = EmbeddedServer()
    try:
        server.start()
        server.start_destination(quick)
        server.start_destination(slow)  # the second of the master: it makes the reader, with its own period
        deadline = time.monotonic() + 30
        while not all(server.instance(n).parser.shared for n in ("quick", "slow")):
            assert time.monotonic() < deadline, "the destinations did not share"
            time.sleep(0.01)
        with caplog.at_level(logging.WARNING, logger="canal.parse.parser"):
            time.sleep(3)  # idle: only heartbeats come
        parser = server.instance("quick").parser
        error = parser.last_error
    finally:
        server.stop()
    stalls = [r.getMessage() for r in caplog.records if "nothing received" in r.getMessage()]
    assert not stalls and error is None, (stalls, error)
