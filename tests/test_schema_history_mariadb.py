"""Rows are named as they were when written, whatever ``binlog_row_metadata`` the server logs (MINIMAL, NO_LOG, FULL).

A private MariaDB runs with the metadata setting under test. A destination starts once (its schema history is
bootstrapped and persisted with its file meta), then a workload interleaves DML with every kind of layout change --
a column added in the middle, one dropped, one renamed, a type changed, the table renamed, dropped and created again
with other columns -- while a writer records, after each statement, the row as ``SELECT`` returns it. The destination
then reads it all from before the first DDL: every row must carry the names and values it had when written. Restarts
at cursors between the DDLs must give the same rows from there on.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import attrs
import pytest

from canal.config import InstanceConfig, MasterConfig, StoreConfig
from canal.errors import NotRunningError, SchemaError
from canal.instance import Instance
from canal.position import EntryPosition, LogIdentity, LogPosition
from canal.protocol import EMPTY_MESSAGE_ID, Entry, EntryType, EventType
from canal.testing.plugin import MariaDBFactory
from canal.testing.services import MariaDBServer

pytestmark = pytest.mark.integration

Row = tuple[str, str, dict[str, Any]]  # (table, INSERT/UPDATE/DELETE, the row's values by name)


def _config(server: MariaDBServer, meta_dir: Path, start: tuple[str, int] | None = None) -> InstanceConfig:
    journal, position = start if start is not None else server.execute("SHOW MASTER STATUS")[0][:2]
    return InstanceConfig(
        destination="history",
        master=MasterConfig(
            address=server.address,
            username=server.user,
            password=server.password,
            journal_name=str(journal),
            position=int(position),
        ),
        filter_regex=r"app\..*",
        meta_mode="file",
        meta_dir=str(meta_dir),
        flush_period_s=0,
        store=StoreConfig(batch_mode="ITEMSIZE", buffer_size=1024),
    )


def _rows(entries: list[Entry]) -> list[Row]:
    out: list[Row] = []
    for e in entries:
        if e.entry_type is not EntryType.ROWDATA or e.row_change is None or e.row_change.is_ddl:
            continue
        for r in e.iter_rows():
            image = r.before_dict() if e.header.event_type is EventType.DELETE else r.after_dict()
            out.append((e.header.table, e.header.event_type.name, image))
    return out


def _consume(inst: Instance, want: int, limit_s: float = 60.0) -> list[Row]:
    """Rows until ``want`` arrived, each batch acked (the cursor moves as a consumer's would)."""
    entries: list[Entry] = []
    deadline = time.monotonic() + limit_s
    while len(_rows(entries)) < want:
        assert time.monotonic() < deadline, f"timed out with {len(_rows(entries))} of {want} rows"
        error = inst.parser.error
        if error is not None:
            raise error
        msg = inst.get_without_ack(100, timeout=1.0, linger=0.1)  # fewer than 100 go once the stream is quiet
        if msg.id != EMPTY_MESSAGE_ID:
            entries.extend(msg.entries)
            inst.ack(msg.id)
    return _rows(entries)


class Writer:
    """Runs the workload, recording each changed row as SELECT returns it and the binlog end after each DDL."""

    def __init__(self, server: MariaDBServer) -> None:
        self.server = server
        self.rows: list[Row] = []
        self.after_ddl: list[tuple[str, int]] = []  # SHOW MASTER STATUS after each DDL
        self.rows_before_ddl: list[int] = []  # how many rows were written before each DDL

    def ddl(self, sql: str) -> None:
        self.rows_before_ddl.append(len(self.rows))
        self.server.execute(sql)
        journal, position = self.server.execute("SHOW MASTER STATUS")[0][:2]
        self.after_ddl.append((str(journal), int(position)))

    def _select(self, table: str, key: str, value: Any) -> dict[str, Any]:
        conn = self.server.connect("app")
        try:
            with conn.cursor() as cur:
                cur.execute(f"SELECT * FROM `{table}` WHERE `{key}` = %s", (value,))
                names = [d[0] for d in cur.description]
                found = cur.fetchall()
                assert len(found) == 1
                return dict(zip(names, found[0], strict=True))
        finally:
            conn.close()

    def write(self, table: str, kind: str, sql: str, key: str, value: Any) -> None:
        if kind == "DELETE":
            self.rows.append((table, kind, self._select(table, key, value)))
        self.server.execute(sql, database="app")
        if kind != "DELETE":
            self.rows.append((table, kind, self._select(table, key, value)))


def _workload(w: Writer) -> None:
    w.write("t", "INSERT", "INSERT INTO t VALUES (1, 'oné', 10)", "id", 1)  # latin1: NO_LOG names no charset
    w.ddl("ALTER TABLE app.t ADD COLUMN c VARCHAR(5) AFTER id")
    w.write("t", "INSERT", "INSERT INTO t (id, c, a, b) VALUES (2, 'cc', 'two', 20)", "id", 2)
    w.write("t", "UPDATE", "UPDATE t SET b = 11, c = 'c1' WHERE id = 1", "id", 1)
    w.ddl("ALTER TABLE app.t DROP COLUMN a")
    w.write("t", "INSERT", "INSERT INTO t (id, c, b) VALUES (3, 'c3', 30)", "id", 3)
    w.ddl("ALTER TABLE app.t RENAME COLUMN b TO bb")
    w.write("t", "UPDATE", "UPDATE t SET bb = 21 WHERE id = 2", "id", 2)
    w.ddl("ALTER TABLE app.t MODIFY bb BIGINT")
    w.write("t", "INSERT", "INSERT INTO t (id, c, bb) VALUES (4, 'c4', 1099511627776)", "id", 4)
    w.ddl("RENAME TABLE app.t TO app.t2")
    w.write("t2", "INSERT", "INSERT INTO t2 (id, c, bb) VALUES (5, 'c5', 50)", "id", 5)
    w.write("t2", "DELETE", "DELETE FROM t2 WHERE id = 1", "id", 1)
    w.ddl("DROP TABLE app.t2")
    w.ddl("CREATE TABLE app.t2 (k VARCHAR(3) NOT NULL PRIMARY KEY, v DOUBLE, n INT)")
    w.write("t2", "INSERT", "INSERT INTO t2 VALUES ('a', 1.5, 7)", "k", "a")
    w.write("t2", "UPDATE", "UPDATE t2 SET n = 8 WHERE k = 'a'", "k", "a")


@pytest.mark.parametrize("metadata", ["MINIMAL", "NO_LOG", "FULL"])
def test_rows_carry_the_names_they_were_written_with(
    mariadb_factory: MariaDBFactory, tmp_path: Path, metadata: str, caplog: pytest.LogCaptureFixture
) -> None:
    server = mariadb_factory(extra_args=[f"--binlog-row-metadata={metadata}"])
    assert server.execute("SELECT @@binlog_row_metadata")[0][0] == metadata
    server.execute("CREATE DATABASE app")
    server.execute("CREATE TABLE app.t (id INT NOT NULL PRIMARY KEY, a VARCHAR(10), b INT)")
    config = _config(server, tmp_path)

    # first start: the history is bootstrapped (here, at the start) and persisted with the file meta
    inst = Instance(config)
    inst.start()
    try:
        server.execute("INSERT INTO app.t VALUES (0, 'zero', 0)")
        assert _consume(inst, 1) == [("t", "INSERT", {"id": 0, "a": "zero", "b": 0})]
    finally:
        inst.stop()
    assert (tmp_path / "history" / "schema_history.json").is_file()
    acked_before_ddl = server.execute("SHOW MASTER STATUS")[0][:2]

    writer = Writer(server)
    _workload(writer)

    # from before all the DDL (the acked cursor): every row as it was written
    inst = Instance(config)
    inst.start()
    try:
        assert _consume(inst, len(writer.rows)) == writer.rows
    finally:
        inst.stop()

    # restarts at cursors between the DDLs: the same rows from there on
    identity = LogIdentity(server.address, -1)
    for i in (1, 3, 5):
        journal, position = writer.after_ddl[i]
        cursor = LogPosition(identity, EntryPosition(journal, position, included=False))
        inst = Instance.at(config, cursor)
        inst.start()
        try:
            expected = writer.rows[writer.rows_before_ddl[i] :]
            assert _consume(inst, len(expected)) == expected, f"from after DDL {i}"
        finally:
            inst.stop()
    assert acked_before_ddl is not None
    # with FULL metadata every table map is checked against the history: it followed every DDL, so no repair
    assert not [r for r in caplog.records if "differs from the schema history" in r.getMessage()]


def test_a_start_before_ddl_without_a_history_is_refused_when_the_binlog_names_nothing(
    mariadb_factory: MariaDBFactory, tmp_path: Path
) -> None:
    """A first start at a past position with DDL since, on a server that logs no names: a typed error naming the
    DDL, and no history written; never rows named by the later schema."""
    server = mariadb_factory(extra_args=["--binlog-row-metadata=MINIMAL"])
    server.execute("CREATE DATABASE app")
    server.execute("CREATE TABLE app.t (id INT NOT NULL PRIMARY KEY, a VARCHAR(10), b INT)")
    start = server.execute("SHOW MASTER STATUS")[0][:2]
    server.execute("INSERT INTO app.t VALUES (1, 'one', 1)")
    server.execute("ALTER TABLE app.t DROP COLUMN a")
    inst = Instance(_config(server, tmp_path, (str(start[0]), int(start[1]))))
    inst.start()
    try:
        deadline = time.monotonic() + 30
        with pytest.raises(NotRunningError) as stopped:
            while True:  # get blocks for its timeout, then says whether the destination still runs
                assert time.monotonic() < deadline, "the start was not refused"
                msg = inst.get_without_ack(10, timeout=0.5)
                assert not _rows(list(msg.entries)), "rows were delivered"
    finally:
        inst.stop()
    error = stopped.value.__cause__
    assert isinstance(error, SchemaError)
    assert "DROP COLUMN a" in str(error) and "canal schema rebuild" in str(error)
    assert not (tmp_path / "history" / "schema_history.json").exists()


def test_a_first_start_before_a_drop_database_names_the_rows_of_the_tables_created_since(
    mariadb_factory: MariaDBFactory, tmp_path: Path
) -> None:
    """A first start at a past position, on a server that logs no names, with a DROP DATABASE since of a database
    whose tables were created since: the history replays them from the start, so every row carries the names of the
    layout it was written under (found by the randomized capture differential: the start was refused, the drop being
    taken for a statement on tables from before the start)."""
    server = mariadb_factory(extra_args=["--binlog-row-metadata=MINIMAL"])
    server.execute("CREATE DATABASE app")
    start = server.execute("SHOW MASTER STATUS")[0][:2]
    for sql in (
        "CREATE TABLE app.t (id INT PRIMARY KEY, a VARCHAR(10))",
        "INSERT INTO app.t VALUES (1, 'one')",
        "DROP SCHEMA app",
        "CREATE DATABASE app",
        "CREATE TABLE app.t (id INT PRIMARY KEY, b INT, c VARCHAR(10))",
        "INSERT INTO app.t VALUES (2, 2, 'two')",
        "CREATE OR REPLACE DATABASE app",
        "CREATE TABLE app.t (id INT PRIMARY KEY, d INT)",
        "INSERT INTO app.t VALUES (3, 3)",
    ):
        server.execute(sql)
    inst = Instance(_config(server, tmp_path, (str(start[0]), int(start[1]))))
    inst.start()
    try:
        rows = _consume(inst, 3, limit_s=30)
    finally:
        inst.stop()
    assert [values for _table, _event, values in rows] == [
        {"id": 1, "a": "one"},
        {"id": 2, "b": 2, "c": "two"},
        {"id": 3, "d": 3},
    ]


def test_a_kill_between_a_ddl_and_its_history_write_restarts_exactly(
    mariadb_factory: MariaDBFactory, tmp_path: Path
) -> None:
    """The consumer process is SIGKILLed when its history is about to record an ALTER it read; the restart reads the
    ALTER again from the cursor (nothing after the DDL was handed off before it was recorded), so every row after
    the cursor is named as written and no acked row comes twice."""
    server = mariadb_factory(extra_args=["--binlog-row-metadata=MINIMAL"])
    server.execute("CREATE DATABASE app")
    server.execute("CREATE TABLE app.t (id INT NOT NULL PRIMARY KEY, a VARCHAR(10), b INT)")
    journal, position = server.execute("SHOW MASTER STATUS")[0][:2]
    args = {
        "address": server.address,
        "user": server.user,
        "password": server.password,
        "journal": str(journal),
        "position": int(position),
        "meta_dir": str(tmp_path),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.procs.schema_crash_consumer", json.dumps(args)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
    )
    acked: list[dict[str, Any]] = []
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "I"  # running: the history is bootstrapped
        server.execute("INSERT INTO app.t VALUES (1, 'one', 10)")
        line = proc.stdout.readline()
        assert line.startswith("R"), line
        acked.append(json.loads(line[2:]))
        server.execute("ALTER TABLE app.t ADD COLUMN c VARCHAR(5) FIRST, DROP COLUMN a")
        server.execute("INSERT INTO app.t VALUES ('cc', 2, 20)")
        for line in proc.stdout:  # until it dies at the ALTER's history write
            if line.startswith("R"):
                acked.append(json.loads(line[2:]))
        assert proc.wait(30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert acked == [{"table": "t", "values": {"id": 1, "a": "one", "b": 10}}]
    history = json.loads((tmp_path / "history" / "schema_history.json").read_text())
    assert history["records"] == []  # killed before the ALTER was recorded

    inst = Instance(_config(server, tmp_path))
    inst.start()
    try:
        assert _consume(inst, 1) == [("t", "INSERT", {"c": "cc", "id": 2, "b": 20})]
    finally:
        inst.stop()
    history = json.loads((tmp_path / "history" / "schema_history.json").read_text())
    assert [r["sql"] for r in history["records"]] == ["ALTER TABLE app.t ADD COLUMN c VARCHAR(5) FIRST, DROP COLUMN a"]


def test_schema_cli_shows_rebuilds_and_dumps(
    mariadb_factory: MariaDBFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from canal.cli import main

    server = mariadb_factory(extra_args=["--binlog-row-metadata=MINIMAL"])
    server.execute("CREATE DATABASE app")
    server.execute("CREATE TABLE app.t (id INT NOT NULL PRIMARY KEY, a VARCHAR(10))")
    meta = ["--meta-dir", str(tmp_path / "meta"), "--destination", "history"]
    source = ["--address", server.address, "--user", server.user, "--password", server.password]

    assert main(["schema", "show", *meta]) == 1  # no history yet
    assert "has no schema history" in capsys.readouterr().err

    start = server.execute("SHOW MASTER STATUS")[0][:2]
    at = f"{start[0]}:{start[1]}"
    server.execute("ALTER TABLE app.t ADD COLUMN b INT")
    after = server.execute("SHOW MASTER STATUS")[0][:2]

    # the layouts now do not hold before the ALTER: refused, nothing written
    assert main(["schema", "rebuild", *meta, "--at", at, *source]) == 2
    assert "ALTER TABLE app.t ADD COLUMN b INT" in capsys.readouterr().err
    assert not (tmp_path / "meta" / "history" / "schema_history.json").exists()

    assert main(["schema", "rebuild", *meta, "--at", f"{after[0]}:{after[1]}", *source]) == 0
    assert "rebuilt" in capsys.readouterr().out
    assert main(["schema", "show", *meta, "--table", "app.t"]) == 0
    shown = capsys.readouterr().out
    assert "-- app.t" in shown and "`b` int(11)" in shown and "PRIMARY KEY (`id`)" in shown

    # dump, then rebuild another destination from the file (for binlog files with no server to ask)
    snapshot = tmp_path / "schema.json"
    assert main(["schema", "dump", "--out", str(snapshot), *source]) == 0
    other = ["--meta-dir", str(tmp_path / "meta"), "--destination", "files"]
    assert main(["schema", "rebuild", *other, "--at", "mysql-bin.000001:4", "--snapshot", str(snapshot)]) == 0
    capsys.readouterr()
    assert main(["schema", "show", *other, "--at", "mysql-bin.000001:4"]) == 0
    assert "`b` int(11)" in capsys.readouterr().out
    assert server.password not in (tmp_path / "schema.json").read_text()


def test_with_full_metadata_the_binlog_wins_and_repairs_the_history(
    mariadb_factory: MariaDBFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from canal.schema.history import FileHistoryStore, SchemaHistory

    server = mariadb_factory(extra_args=["--binlog-row-metadata=FULL"])
    server.execute("CREATE DATABASE app")
    server.execute("CREATE TABLE app.t (id INT NOT NULL PRIMARY KEY, a VARCHAR(10), b INT)")
    config = _config(server, tmp_path)
    history_file = tmp_path / "history" / "schema_history.json"
    inst = Instance(config)
    inst.start()
    try:
        deadline = time.monotonic() + 30
        while not history_file.exists():  # the parser bootstraps the history before it dumps
            assert time.monotonic() < deadline and inst.parser.error is None, "no schema history"
            inst.get_without_ack(1, timeout=0.1)
        server.execute("INSERT INTO app.t VALUES (0, 'zero', 0)")
        assert len(_consume(inst, 1)) == 1
    finally:
        inst.stop()
    # the history goes wrong (as if it had missed a DDL): it believes b was dropped just after it started, before
    # the row the consumer acked
    store = FileHistoryStore(history_file)
    wrong = SchemaHistory(store)
    began = wrong.position
    assert began is not None and began.journal_name is not None and began.position is not None
    at = began.position + 1
    wrong.apply(EntryPosition(began.journal_name, at), "app", "ALTER TABLE app.t DROP COLUMN b", next_offset=at + 1)
    assert [c.name for c in wrong.columns("app", "t") or []] == ["id", "a"]

    server.execute("INSERT INTO app.t VALUES (1, 'one', 1)")
    inst = Instance(config)
    inst.start()
    try:
        assert _consume(inst, 1) == [("t", "INSERT", {"id": 1, "a": "one", "b": 1})]  # named by the binlog
    finally:
        inst.stop()
    assert [r for r in caplog.records if "differs from the schema history" in r.getMessage()]
    repaired = SchemaHistory(store)
    assert [c.name for c in repaired.columns("app", "t") or []] == ["id", "a", "b"]


@pytest.mark.parametrize("alter_between", [False, True])
def test_with_full_metadata_a_first_start_in_the_past_names_the_foreign_keys_actions(
    mariadb_factory: MariaDBFactory, tmp_path: Path, caplog: pytest.LogCaptureFixture, alter_between: bool
) -> None:
    """The binlog names the rows, but only the history names the foreign keys a parent's change cascades through:
    a first start before the child was created holds them from the start (the binlog in between is scanned). With
    a DDL in between that changes a table older than the start (which the history could not replay), it starts at
    the read, as without foreign keys, and says that the changes before name the actions of the tables then."""
    server = mariadb_factory(extra_args=["--binlog-row-metadata=FULL"])
    server.execute("CREATE DATABASE app")
    server.execute("CREATE TABLE app.p (id INT NOT NULL PRIMARY KEY)")
    start = server.execute("SHOW MASTER STATUS")[0][:2]
    server.execute(
        "CREATE TABLE app.c (id INT NOT NULL PRIMARY KEY, pid INT, "
        "FOREIGN KEY (pid) REFERENCES app.p (id) ON DELETE CASCADE)"
    )
    if alter_between:
        server.execute("ALTER TABLE app.p ADD COLUMN note VARCHAR(5)")
    server.execute("INSERT INTO app.p (id) VALUES (1)")
    server.execute("INSERT INTO app.c VALUES (1, 1)")
    server.execute("DELETE FROM app.p WHERE id = 1")
    inst = Instance(_config(server, tmp_path, (str(start[0]), int(start[1]))))
    inst.start()
    try:
        entries: list[Entry] = []
        deadline = time.monotonic() + 60
        while not any(e.header.event_type is EventType.DELETE for e in entries if e.row_change is not None):
            assert time.monotonic() < deadline and inst.parser.error is None, inst.parser.error
            msg = inst.get_without_ack(100, timeout=0.5, linger=0.1)
            if msg.id != EMPTY_MESSAGE_ID:
                entries.extend(msg.entries)
                inst.ack(msg.id)
    finally:
        inst.stop()
    (delete,) = [e for e in entries if e.row_change is not None and e.header.event_type is EventType.DELETE]
    actions = json.loads(delete.header.props.get("FOREIGN_KEY_ACTIONS", "[]"))
    assert [(a["db"], a["table"]) for a in actions] == [("app", "c")]
    warned = [r for r in caplog.records if "foreign keys' actions named by the changes before" in r.getMessage()]
    assert len(warned) == alter_between
    if alter_between:
        assert "ALTER TABLE app.p" in warned[0].getMessage()


def test_local_binlog_files_read_with_a_schema_snapshot_give_the_same_rows(
    mariadb_factory: MariaDBFactory, tmp_path: Path
) -> None:
    """Binlog files have no server to ask for layouts: ``canal schema dump`` at the start position and ``canal schema
    rebuild --snapshot`` give the file destination its history, and it reads the same rows as the network does."""
    from canal.cli import main

    server = mariadb_factory(extra_args=["--binlog-row-metadata=MINIMAL"])
    server.execute("CREATE DATABASE app")
    server.execute("CREATE TABLE app.t (id INT NOT NULL PRIMARY KEY, a VARCHAR(10), b INT)")
    journal, position = (str(v) for v in server.execute("SHOW MASTER STATUS")[0][:2])
    snapshot = tmp_path / "schema.json"
    source = ["--address", server.address, "--user", server.user, "--password", server.password]
    assert main(["schema", "dump", "--out", str(snapshot), *source]) == 0
    writer = Writer(server)
    _workload(writer)
    server.execute("FLUSH BINARY LOGS")  # the files hold everything written

    meta = tmp_path / "files-meta"
    at = f"{journal}:{position}"
    assert (
        main(
            [
                "schema",
                "rebuild",
                "--meta-dir",
                str(meta),
                "--destination",
                "history",
                "--at",
                at,
                "--snapshot",
                str(snapshot),
            ]
        )
        == 0
    )
    config = attrs.evolve(
        _config(server, meta, (journal, int(position))),
        master=MasterConfig(address=f"file://{server.datadir}", journal_name=journal, position=int(position)),
    )
    inst = Instance(config)
    inst.start()
    try:
        assert _consume(inst, len(writer.rows)) == writer.rows
    finally:
        inst.stop()


def test_with_full_metadata_a_first_start_in_the_past_reads_the_range_once(
    mariadb_factory: MariaDBFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The history a first start at a past position bootstraps is checked by the parser's own dump as it reads the
    range, where the binlog names the rows: no scan of the range beside it (a second dump, which doubled the
    server's work), and the history persisted once the range was read."""
    from canal.parse import schema_tracking

    server = mariadb_factory(extra_args=["--binlog-row-metadata=FULL"])
    server.execute("CREATE DATABASE app")
    server.execute("CREATE TABLE app.t (id INT NOT NULL PRIMARY KEY, a INT)")
    journal, position = server.execute("SHOW MASTER STATUS")[0][:2]
    server.execute("INSERT INTO app.t VALUES (1, 1), (2, 2)", database="app")
    server.execute("UPDATE app.t SET a = a + 1")
    scanned: list[tuple[EntryPosition, EntryPosition]] = []
    real = schema_tracking.layout_ddl_between

    def recorded(source: Any, start: EntryPosition, end: EntryPosition, **kwargs: Any) -> Any:
        scanned.append((start, end))
        return real(source, start, end, **kwargs)

    monkeypatch.setattr(schema_tracking, "layout_ddl_between", recorded)
    inst = Instance(_config(server, tmp_path, (str(journal), int(position))))
    inst.start()
    try:
        assert [kind for _t, kind, _v in _consume(inst, 4)] == ["INSERT", "INSERT", "UPDATE", "UPDATE"]
    finally:
        inst.stop()
    start = EntryPosition(str(journal), int(position))
    # the layouts' read checks what ran while it read them (nothing); no scan reads from the start
    assert scanned and all(s.position != start.position and s.position == e.position for s, e in scanned)
    assert (tmp_path / "history" / "schema_history.json").is_file()
