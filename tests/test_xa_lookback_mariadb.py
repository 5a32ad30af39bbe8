"""An XA COMMIT whose XA PREPARE lies before the stream's start, on a real MariaDB: the parser reads the PREPARE's
rows back from the server's binlog and hands them out with the commit (``XA_RECOVERED``), exactly once per ack;
an XA ROLLBACK of such a transaction hands out nothing; a purged PREPARE is a typed error that hands out nothing."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from canal.config import InstanceConfig, MasterConfig, RetryConfig, StoreConfig
from canal.errors import XAPrepareLostError
from canal.instance import Instance
from canal.parse.convert import ConvertOptions
from canal.parse.source import DumpRequest
from canal.parse.sources import open_source
from canal.parse.xa_lookback import XA_RECOVERED, prepared_rows
from canal.position import EntryPosition
from canal.protocol import Entry, EntryType, EventType
from canal.spark.testing import master_position

pytestmark = pytest.mark.integration

_LOG = logging.getLogger(__name__)


def _execute(conn: Any, *statements: str) -> None:
    with conn.cursor() as cur:
        for sql in statements:
            cur.execute(sql)


def _config(master: Any, db: str, tmp_path: Path, start: tuple[str, int]) -> InstanceConfig:
    """``master``: a MasterConfig, or a MariaDBServer (address, user, password)."""
    return InstanceConfig(
        destination="xa-back",
        master=MasterConfig(
            address=master.address,
            username=getattr(master, "username", None) or master.user,
            password=master.password,
            journal_name=start[0],
            position=start[1],
        ),
        filter_regex=rf"{db}\..*",
        store=StoreConfig(batch_mode="ITEMSIZE"),
        transaction_size=2,  # the rows read back are handed off in parts: cursors inside them
        meta_mode="file",
        meta_dir=str(tmp_path / "meta"),
        retry=RetryConfig(max_attempts=2, initial_backoff_s=0.05, max_backoff_s=0.1),
    )


def _item(entry: Entry) -> tuple[str, Any]:
    rc = entry.row_change
    if entry.entry_type is not EntryType.ROWDATA or rc is None:
        return (entry.entry_type.name, None)
    if rc.rows:
        return (rc.event_type.name, [(row.before, row.after) for row in rc.rows])
    return (rc.event_type.name, rc.sql)


def _until_commit(inst: Instance, size: int, ack: bool) -> list[list[Entry]]:
    """Batches (``size`` entries at most) up to the one holding the XACOMMIT entry; acked when ``ack``."""
    batches: list[list[Entry]] = []
    deadline = time.monotonic() + 30
    while not any(e.header.event_type is EventType.XACOMMIT for b in batches for e in b):
        assert time.monotonic() < deadline, f"no XACOMMIT came; got {batches}"
        msg = inst.get_without_ack(size, timeout=0.2)
        if msg.entries:
            batches.append(list(msg.entries))
            if ack:
                inst.ack(msg.id)
    return batches


def _rows(batches: list[list[Entry]]) -> list[tuple[str, Any]]:
    return [_item(e) for b in batches for e in b if e.entry_type is EntryType.ROWDATA]


def test_an_xa_commit_prepared_before_the_start_hands_out_the_prepared_rows(
    mariadb: Any, sessions: Callable[[], Any], tmp_path: Path
) -> None:
    db = mariadb.database
    conn = sessions()
    _execute(conn, f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v INT)")
    early = sessions()
    _execute(
        early,
        "XA START 'early'",
        f"INSERT INTO `{db}`.t VALUES (1, 1), (2, 2)",
        f"UPDATE `{db}`.t SET v = 20 WHERE id = 2",
        f"INSERT INTO `{db}`.t VALUES (3, 3)",
        "XA END 'early'",
        "XA PREPARE 'early'",
    )
    prepared_in = master_position(conn)[0]
    _execute(conn, "FLUSH BINARY LOGS")  # the PREPARE lies in an older file than the start
    start = master_position(conn)
    config = _config(mariadb.master(), db, tmp_path, start)  # after the XA PREPARE
    _execute(early, "XA COMMIT 'early'")
    commit = [
        ("INSERT", [(None, (1, 1)), (None, (2, 2))]),
        ("UPDATE", [((2, 2), (2, 20))]),
        ("INSERT", [(None, (3, 3))]),
        ("XACOMMIT", "XA COMMIT X'6561726c79',X'',1"),
    ]
    # restart before any ack: everything again; after acking the first rows: the rest; after the commit: nothing
    with Instance(config) as inst:
        first = _until_commit(inst, 100, ack=False)
        assert _rows(first) == commit
        recovered = [e for b in first for e in b if e.entry_type is EntryType.ROWDATA]
        assert all(e.header.props.get("XA_XID") == "X'6561726c79',X'',1" for e in recovered)
        assert {e.header.props[XA_RECOVERED] for e in recovered} == {recovered[0].header.props[XA_RECOVERED]}
        assert recovered[0].header.props[XA_RECOVERED].startswith(f"{prepared_in}:")
        assert {e.header.log_file for e in recovered} == {start[0]}  # placed at the commit
        assert inst.parser.reconnects == 0  # reading back does not end the dump
    with Instance(config) as inst:
        again = _until_commit(inst, 2, ack=False)
        assert _rows(again) == commit
        inst.rollback()
        head = inst.get_without_ack(2, timeout=5)
        kept = [_item(e) for e in head.entries if e.entry_type is EntryType.ROWDATA]
        assert kept and kept == commit[: len(kept)] and len(kept) < len(commit)
        inst.ack(head.id)
    with Instance(config) as inst:
        rest = _until_commit(inst, 100, ack=True)
        assert _rows(rest) == commit[len(kept) :]
    _execute(conn, f"INSERT INTO `{db}`.t VALUES (4, 4)")
    with Instance(config) as inst:
        deadline = time.monotonic() + 30
        after: list[tuple[str, Any]] = []
        while ("INSERT", [(None, (4, 4))]) not in after:
            assert time.monotonic() < deadline, f"the last insert never came; got {after}"
            after.extend(_item(e) for e in inst.get(100, timeout=0.2).entries if e.entry_type is EntryType.ROWDATA)
        assert after == [("INSERT", [(None, (4, 4))])]  # the acked commit is not handed out again
    assert [tuple(r) for r in mariadb.execute(f"SELECT id, v FROM `{db}`.t ORDER BY id")] == [
        (1, 1),
        (2, 20),
        (3, 3),
        (4, 4),
    ]


def test_an_xa_rollback_prepared_before_the_start_hands_out_nothing(
    mariadb: Any, sessions: Callable[[], Any], tmp_path: Path
) -> None:
    db = mariadb.database
    conn = sessions()
    _execute(conn, f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v INT)")
    early = sessions()
    _execute(early, "XA START 'gone'", f"INSERT INTO `{db}`.t VALUES (1, 1)", "XA END 'gone'", "XA PREPARE 'gone'")
    config = _config(mariadb.master(), db, tmp_path, master_position(conn))
    _execute(early, "XA ROLLBACK 'gone'")
    _execute(conn, f"INSERT INTO `{db}`.t VALUES (2, 2)")
    seen: list[tuple[str, Any]] = []
    deadline = time.monotonic() + 30
    with Instance(config) as inst:
        while ("INSERT", [(None, (2, 2))]) not in seen:
            assert time.monotonic() < deadline, f"the last insert never came; got {seen}"
            seen.extend(_item(e) for e in inst.get(100, timeout=0.2).entries if e.entry_type is EntryType.ROWDATA)
    assert seen == [("XAROLLBACK", "XA ROLLBACK X'676f6e65',X'',1"), ("INSERT", [(None, (2, 2))])]


def test_an_xa_commit_whose_prepare_was_purged_is_a_typed_error(mariadb_factory: Any, tmp_path: Path) -> None:
    server = mariadb_factory()
    server.execute("CREATE DATABASE d")
    server.execute("CREATE TABLE d.t (id INT PRIMARY KEY, v INT)")
    early = server.connect(autocommit=True)
    try:
        _execute(early, "XA START 'lost'", "INSERT INTO d.t VALUES (1, 1)", "XA END 'lost'", "XA PREPARE 'lost'")
        server.execute("FLUSH BINARY LOGS")
        start = master_position(server.connect(autocommit=True))
        server.execute(f"PURGE BINARY LOGS TO '{start[0]}'")
        _execute(early, "XA COMMIT 'lost'")
    finally:
        early.close()
    config = _config(server, "d", tmp_path, start)
    with Instance(config) as inst:
        assert inst.parser.join(30), "the parser did not stop"
        error = inst.parser.error
        assert isinstance(error, XAPrepareLostError)
        assert "X'6c6f7374',X'',1" in str(error) and f"{start[0]}:" in str(error)
        assert inst.store.get(100, None).entries == []  # nothing of the commit handed out
        assert inst.get_cursor() is None  # and no cursor moved
        assert inst.parser.position is not None and inst.parser.position.position.journal_name == start[0]
        assert inst.parser.position.position.position == start[1]


def test_a_one_phase_xa_commit_is_an_ordinary_transaction(
    mariadb: Any, sessions: Callable[[], Any], tmp_path: Path
) -> None:
    db = mariadb.database
    conn = sessions()
    _execute(conn, f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v INT)")
    config = _config(mariadb.master(), db, tmp_path, master_position(conn))
    _execute(conn, "XA START 'one'", f"INSERT INTO `{db}`.t VALUES (1, 1)", "XA END 'one'", "XA COMMIT 'one' ONE PHASE")
    _execute(conn, f"INSERT INTO `{db}`.t VALUES (2, 2)")
    seen: list[Entry] = []
    deadline = time.monotonic() + 30
    with Instance(config) as inst:
        while ("INSERT", [(None, (2, 2))]) not in [_item(e) for e in seen]:
            assert time.monotonic() < deadline, f"the last insert never came; got {seen}"
            seen.extend(e for e in inst.get(100, timeout=0.2).entries if e.entry_type is not EntryType.HEARTBEAT)
    # logged as an ordinary transaction: no XA marks, no XA COMMIT entry, nothing read back
    assert [(_item(e), dict(e.header.props)) for e in seen] == [
        (("TRANSACTIONBEGIN", None), {}),
        (("INSERT", [(None, (1, 1))]), {}),
        (("TRANSACTIONEND", None), {}),
        (("TRANSACTIONBEGIN", None), {}),
        (("INSERT", [(None, (2, 2))]), {}),
        (("TRANSACTIONEND", None), {}),
    ]


def test_a_restart_inside_a_prepare_group_reads_nothing_back(
    mariadb: Any, sessions: Callable[[], Any], tmp_path: Path
) -> None:
    """The destination saw the PREPARE (its rows in parts) and restarted inside it: the commit needs no read-back."""
    db = mariadb.database
    conn = sessions()
    _execute(conn, f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v INT)")
    config = _config(mariadb.master(), db, tmp_path, master_position(conn))  # before the XA PREPARE
    early = sessions()
    _execute(
        early,
        "XA START 'seen'",
        *(f"INSERT INTO `{db}`.t VALUES ({i}, {i})" for i in range(1, 5)),
        "XA END 'seen'",
        "XA PREPARE 'seen'",
    )
    with Instance(config) as inst:
        head = inst.get_without_ack(2, timeout=5)  # the BEGIN and the first row
        assert [_item(e) for e in head.entries if e.entry_type is EntryType.ROWDATA] == [("INSERT", [(None, (1, 1))])]
        inst.ack(head.id)
    _execute(early, "XA COMMIT 'seen'")
    with Instance(config) as inst:
        rest = _until_commit(inst, 100, ack=True)
    entries = [e for b in rest for e in b if e.entry_type is EntryType.ROWDATA]
    assert [_item(e) for e in entries] == [
        *(("INSERT", [(None, (i, i))]) for i in range(2, 5)),
        ("XACOMMIT", "XA COMMIT X'7365656e',X'',1"),
    ]
    assert not any(XA_RECOVERED in e.header.props for e in entries)


def test_the_read_back_decodes_the_prepare_group_alone(
    mariadb: Any, sessions: Callable[[], Any], tmp_path: Path
) -> None:
    """The commit's file holds many other rows (a busy server's binlog): the read-back finds the PREPARE over an
    undecoded pass and decodes rows only from the group's start -- the full read once took longer than a consumer's
    patience on a loaded machine."""
    db = mariadb.database
    conn = sessions()
    _execute(
        conn,
        f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v INT)",
        f"CREATE TABLE `{db}`.busy (id INT PRIMARY KEY, pad VARCHAR(200))",
    )
    _execute(conn, "FLUSH BINARY LOGS")
    for chunk in range(20):  # 20 000 rows of another table before the PREPARE, in the commit's file
        values = ", ".join(f"({chunk * 1000 + i}, REPEAT('x', 150))" for i in range(1000))
        _execute(conn, f"INSERT INTO `{db}`.busy VALUES {values}")
    early = sessions()
    _execute(
        early,
        "XA START 'busy'",
        f"INSERT INTO `{db}`.t VALUES (1, 1), (2, 2)",
        "XA END 'busy'",
        "XA PREPARE 'busy'",
    )
    _execute(conn, f"UPDATE `{db}`.busy SET pad = 'y' WHERE id < 500")
    start = master_position(conn)
    _execute(early, "XA COMMIT 'busy'")
    commit = master_position(conn)
    config = _config(mariadb.master(), db, tmp_path, start)
    source = open_source(config.master, config)
    requests: list[DumpRequest] = []
    real_dump = source.dump

    def dump(request: DumpRequest) -> Any:
        requests.append(request)
        return real_dump(request)

    source.dump = dump  # type: ignore[method-assign]
    source.open()
    try:
        files = [f.name for f in source.binlog_files()]
        group = prepared_rows(source, ConvertOptions(), "'busy'", EntryPosition(commit[0], commit[1]), _LOG)
    finally:
        source.close()
    assert [_item(e) for e in group.entries] == [("INSERT", [(None, (1, 1)), (None, (2, 2))])]
    name, offset = group.position.split(":")
    assert name == start[0] and start[0] in files
    assert [(r.journal_name, r.position, r.decode_rows) for r in requests] == [
        (start[0], 4, False),  # the structure of the whole file
        (start[0], int(offset), True),  # the rows of the group alone
    ]
